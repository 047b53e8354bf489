/*
 * runs.h - the rows of ../shared/notes/measured-runs.md as programs: each
 * row written by the zoo's generator (tests/models/README.md, "Measured
 * runs") and partitioned by the zoo's schedules on the row's mesh, or the
 * corpus program it names, with the row's device.  bench_fidelity holds
 * the cost model to the rows' measurements; bench_experts holds the
 * search to the rows' own parallelism.  A row the zoo cannot write yet (a
 * preset or knob not there) comes back with the generator's reason, never
 * approximated.  Header-only, as bench.h.
 */
#ifndef BENCH_RUNS_H
#define BENCH_RUNS_H

#include "bench.h"
#include "cost.h"

typedef enum { FAM_GPU, FAM_TPU } family;

typedef struct row {
    const char *id;
    const char *device; /* registry name */
    family fam;
    bool calib;         /* fit on it */
    const char *model;  /* modelgen arguments, or "hlo:FILE" in the corpus */
    const char *mesh;   /* the zoo's axis names */
    const char *sched;  /* schedules joined by '+', "" for none */
    double time_s;      /* measured step time */
    double mem_gib;     /* measured peak per device, 0 when not given */
    const char *what;
    cost_framework fw;  /* what ran it, for memory: XLA (0) or eager PyTorch */
} row;

/* The rows of measured-runs.md, as tests/models/README.md writes them.
 * Calibration: one or two rows per family and kind of parallelism (FSDP
 * on H100 and A100, data + tensor parallel on A100, the 1-GPU program,
 * FSDP on TPU v4 and v5e) and T1, the only 8-GPU row of torchtitan's
 * 500 W H100s (h100_96gb: its clock at 500 W is published nowhere, and
 * the run is eager PyTorch); validation: the rest, among them the whole of
 * v5p and T3, the same software on 128 of those GPUs.  The PyTorch rows
 * (torchtitan T1/T3, llm-foundry Y1/Y7, Megatron N1-N3) differentiate the
 * MLP's activation as PyTorch does (act_grad=torch: its input saved, tanh
 * or the sigmoid recomputed in the backward).  T1/T3's memory is counted
 * as eager PyTorch holds it (COST_FW_EAGER: torchtitan's figures are
 * without torch.compile, docs/performance.md Table 1, and its RMSNorm is
 * written op by op in Python, as the zoo writes it).  llm-foundry (Y1/Y7)
 * and Megatron (N1-N3) run eager too, but their LayerNorm is one fused
 * kernel (F.layer_norm, apex's FusedLayerNorm) that saves its input, mean
 * and rstd, where the zoo's op-by-op norm, each op a tensor, keeps its f32
 * centred input and output per norm (Y1 counted eager: 83.6 GiB, over its
 * 74.5): until the zoo writes the fused norm's backward, as act_grad=torch
 * writes the GELU's, they are counted as XLA's fused step. */
static const row ROWS[] = {
    {"X1", "b200", FAM_GPU, true, "hlo:xla_maxtext_train_step_1gpu_preopt.hlo", "", "", 0.3022, 0,
     "MaxText 0.67B, 1 GPU, the corpus program as it is", COST_FW_XLA},
    {"J1", "h100_sxm", FAM_GPU, true, "transformer --config llama2_7b attention=flash remat=minimal_flash",
     "batch=8", "fsdp", 0.721, 0, "Llama2-7B FSDP 8, GBS 16 x 4096", COST_FW_XLA},
    {"T1", "h100_96gb", FAM_GPU, true, "transformer --config llama3_8b attention=flash remat=sac act_grad=torch", "batch=8",
     "fsdp", 2.84, 82.4, "Llama-3.1-8B FSDP 8, GBS 16 x 8192 (torchtitan)", COST_FW_EAGER},
    {"T3", "h100_96gb", FAM_GPU, false, "transformer --config llama3_8b batch=256 attention=flash remat=sac act_grad=torch",
     "batch=128", "fsdp", 2.92, 67.0, "as T1, FSDP 128 over 16 nodes", COST_FW_EAGER},
    {"J3", "a100_80gb", FAM_GPU, true, "transformer --config gpt3_5b attention=flash remat=dots_no_batch",
     "batch=256", "fsdp", 3.447, 0, "GPT-5B FSDP 256, GBS 2048 (PAXML)", COST_FW_XLA},
    {"J4", "h100_sxm", FAM_GPU, false, "transformer --config gpt3_5b attention=flash remat=dots_no_batch",
     "batch=256", "fsdp", 1.236, 0, "as J3 on H100", COST_FW_XLA},
    {"M1", "tpu_v4", FAM_TPU, true, "transformer --config maxtext_22b attention=flash remat=full", "batch=64",
     "fsdp", 28.4, 0, "MaxText 22B FSDP 64, GBS 1024", COST_FW_XLA},
    {"M4", "tpu_v5e", FAM_TPU, true, "transformer --config maxtext_16b attention=flash remat=full", "batch=256",
     "fsdp", 10.3, 0, "MaxText 16B FSDP 256, GBS 1536", COST_FW_XLA},
    /* MaxText shards the activations' embed dim over its tensor axis
     * (rule `activation_embed -> tensor`, src/maxtext/configs/base.yml
     * line 598 at e591f30; the DecoderLayer's constraints,
     * src/maxtext/layers/decoders.py lines 113-115): mp_embed.txt, on the
     * values names=1 locates.  Megatron's replicated residual stream
     * (mp_split alone) keeps 4x the saved activations. */
    {"M9", "tpu_v5p", FAM_TPU, false,
     "transformer --config maxtext_32b attention=flash remat=dots_no_batch names=1", "batch=16,model=4",
     "mp_split+mp_embed+fsdp", 9.9, 0,
     "MaxText 32B FSDP 16 x TP 4, GBS 512, activation_embed on TP (MaxText configs/base.yml:598)", COST_FW_XLA},
    {"Y1", "a100_80gb", FAM_GPU, false,
     "transformer --config mpt_7b vocab=50368 batch=96 microbatches=2 attention=flash act_grad=torch", "batch=8", "fsdp", 5.30, 0,
     "MPT-7B FSDP 8, 2 micro-batches of 48", COST_FW_XLA},
    {"Y7", "h100_sxm", FAM_GPU, false, "transformer --config mpt_7b vocab=50368 attention=flash act_grad=torch", "batch=8", "fsdp",
     1.15, 0, "MPT-7B FSDP 8, GBS 48", COST_FW_XLA},
    {"N1", "a100_80gb", FAM_GPU, true, "transformer --config gpt_1_7b remat=full act_grad=torch", "batch=32", "bp", 3.53, 0,
     "GPT 1.7B DP 32 (Megatron)", COST_FW_XLA},
    {"N2", "a100_80gb", FAM_GPU, false, "transformer --config gpt_3_6b remat=full act_grad=torch", "batch=32,model=2", "bp+mp",
     3.70, 0, "GPT 3.6B DP 32 x TP 2", COST_FW_XLA},
    {"N3", "a100_80gb", FAM_GPU, false, "transformer --config gpt_7_5b remat=full act_grad=torch", "batch=32,model=4", "bp+mp",
     3.70, 0, "GPT 7.5B DP 32 x TP 4", COST_FW_XLA},
};
#define NROWS (int)(sizeof ROWS / sizeof ROWS[0])

/* The zoo's directory (modelgen and schedules/): this tree's unless a
 * bench's --zoo says otherwise. */
static const char *zoo_dir = AP_SOURCE_DIR "/tests/models";

/* Reads schedules/NAME.txt for each name of `names` (joined by '+'); NULL
 * with the missing file in why when one is not there. */
static inline char *read_schedules(const char *names, char *why, size_t n)
{
    ap_buf b;
    ap_buf_init(&b);
    for (const char *s = names; *s;) {
        size_t k = strcspn(s, "+");
        char path[1024], *text;
        size_t len;
        ap_error err;
        snprintf(path, sizeof path, "%s/schedules/%.*s.txt", zoo_dir, (int)k, s);
        if (ap_read_file(path, &text, &len, &err) < 0) {
            snprintf(why, n, "schedule %.*s.txt not in the zoo", (int)k, s);
            ap_buf_free(&b);
            return NULL;
        }
        ap_buf_put(&b, text, len);
        ap_buf_putc(&b, '\n');
        ap_free(text);
        s += k + (s[k] == '+');
    }
    return ap_buf_take(&b, NULL);
}

/* Runs the generator; NULL with its last line of errors in why. */
static inline ir_module *generate(const char *args, char *why, size_t n)
{
    char out[] = "/tmp/autopart-fidelity-XXXXXX", errp[] = "/tmp/autopart-fidelity-err-XXXXXX", cmd[2048];
    int fo = mkstemp(out), fe = mkstemp(errp);
    if (fo < 0 || fe < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fo);
    close(fe);
    snprintf(cmd, sizeof cmd, "'%s/modelgen' %s -q -o '%s' 2>'%s'", zoo_dir, args, out, errp);
    ir_module *m = NULL;
    ap_error err;
    char *text;
    size_t len;
    if (system(cmd) != 0) {
        snprintf(why, n, "the generator says nothing");
        if (ap_read_file(errp, &text, &len, &err) == 0) {
            char *line = text, *p;
            while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
                text[--len] = '\0';
            if ((p = strrchr(text, '\n')))
                line = p + 1;
            if (*line)
                snprintf(why, n, "%s", line);
            ap_free(text);
        }
    } else if (ap_read_file(out, &text, &len, &err) < 0) {
        ap_error_format(&err, why, n);
    } else {
        if (ir_parse(text, len, args, IR_FMT_AUTO, &m, &err) < 0) {
            ap_error_format(&err, why, n);
            m = NULL;
        }
        ap_free(text);
    }
    unlink(out);
    unlink(errp);
    return m;
}

static inline ir_module *read_corpus(const char *file, char *why, size_t n)
{
    char path[1024], *text;
    size_t len;
    ap_error err;
    ir_module *m = NULL;
    snprintf(path, sizeof path, "%s/corpus/hlo/%s", AP_SHARED_DIR, file);
    if (ap_read_file(path, &text, &len, &err) < 0) {
        ap_error_format(&err, why, n);
        return NULL;
    }
    if (ir_parse(text, len, path, IR_FMT_AUTO, &m, &err) < 0) {
        ap_error_format(&err, why, n);
        m = NULL;
    }
    ap_free(text);
    return m;
}

/* A row as a program: the module (calls inlined) and, for a row with a
 * mesh, its context and the state after the row's schedule. */
typedef struct run_program {
    ir_module *m;
    ir_pctx *ctx;     /* NULL for a row without a mesh (the corpus program as it is) */
    ir_partition *p;  /* the row's schedule applied; NULL without a mesh */
    double gen_s;     /* writing (or reading) and parsing the program */
} run_program;

/* Opens row rw: false with the reason in why (a row the zoo cannot write
 * says the generator's last line).  Free with run_close. */
static inline bool run_open(const row *rw, run_program *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    ap_error err;
    char *sched = NULL;
    double a = bench_now();
    if (!strncmp(rw->model, "hlo:", 4)) {
        out->m = read_corpus(rw->model + 4, why, n);
    } else {
        if (rw->sched[0] && !(sched = read_schedules(rw->sched, why, n)))
            return false;
        out->m = generate(rw->model, why, n);
    }
    if (!out->m) {
        ap_free(sched);
        return false;
    }
    out->gen_s = bench_now() - a;
    ir_op *f = ir_module_entry(out->m);
    /* XLA inlines calls first (CallInliner), as ir_pctx_new does */
    if (ir_inline_calls(out->m, f, &err) < 0)
        goto fail;
    if (rw->mesh[0]) {
        ir_mesh mesh;
        if (ir_mesh_parse(rw->mesh, &mesh, &err) < 0 || ir_pctx_new(out->m, f, &mesh, &out->ctx, &err) < 0 ||
            ir_partition_new(out->ctx, &out->p, &err) < 0 || (sched && ir_schedule_apply(out->p, sched, &err) < 0))
            goto fail;
    }
    ap_free(sched);
    return true;
fail:
    ap_error_format(&err, why, n);
    ap_free(sched);
    ir_partition_free(out->p);
    ir_pctx_free(out->ctx);
    ir_module_free(out->m);
    memset(out, 0, sizeof *out);
    return false;
}

static inline void run_close(run_program *rp)
{
    ir_partition_free(rp->p);
    ir_pctx_free(rp->ctx);
    ir_module_free(rp->m);
}

#endif
