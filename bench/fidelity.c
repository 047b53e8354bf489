/*
 * bench_fidelity - the cost model against measured training steps.
 *
 * Every row of ../shared/notes/measured-runs.md is written here as the
 * program the zoo's generator prints for it (tests/models/README.md,
 * "Measured runs"), partitioned by the zoo's schedules on the row's mesh,
 * or as the corpus program it names, and estimated on the row's device.
 * A row the zoo cannot write yet (a preset or knob not there) is listed as
 * "not yet writable" with the generator's reason, never approximated.
 *
 * The matmul efficiency of the registry's devices (cost_device.
 * matmul_efficiency) is then fitted per device on the calibration rows (at
 * most half of the rows, marked C): the value of a grid from 0.10 to 1.00
 * that minimizes the sum of the squared log ratios predicted / measured over
 * the device's calibration rows; a device without any (v5p) takes the value
 * fitted on all calibration rows of its family (GPU, TPU).  The
 * other rows (V) are validation: they never enter the fit.  Printed: each
 * row's step time with the registry's constants and with the fitted ones,
 * the ratio, and per set the median and worst |log ratio|; the memory rows
 * (the measured peaks the notes give); and each *_spmd.hlo corpus program's
 * peak against its device's HBM.
 *
 * Usage: bench_fidelity [--zoo DIR] [--only ID,ID] [--no-corpus] [--report]
 *   --zoo DIR   the zoo's directory (modelgen and schedules/); default
 *               tests/models of this tree
 *   --report    each row's whole report (cost_report_text)
 */
#include <math.h>

#include "bench.h"
#include "cost.h"

#define NGRID 91 /* matmul efficiency 0.10, 0.11, ..., 1.00 */
#define GRID(i) (0.10 + 0.01 * (double)(i))

typedef enum { FAM_GPU, FAM_TPU } family;

typedef struct row {
    const char *id;
    const char *device; /* registry name, or "h100_96gb" (T1, T3) */
    family fam;
    bool calib;         /* fit on it */
    const char *model;  /* modelgen arguments, or "hlo:FILE" in the corpus */
    const char *mesh;   /* the zoo's axis names */
    const char *sched;  /* schedules joined by '+', "" for none */
    double time_s;      /* measured step time */
    double mem_gib;     /* measured peak per device, 0 when not given */
    const char *what;
} row;

/* The rows of measured-runs.md, as tests/models/README.md writes them.
 * Calibration: one or two rows per family and kind of parallelism (FSDP
 * on H100 and A100, data + tensor parallel on A100, the 1-GPU program,
 * FSDP on TPU v4 and v5e); validation: the rest, among them the whole of
 * v5p and the multi-node H100 run. */
static const row ROWS[] = {
    {"X1", "b200", FAM_GPU, true, "hlo:xla_maxtext_train_step_1gpu_preopt.hlo", "", "", 0.3022, 0,
     "MaxText 0.67B, 1 GPU, the corpus program as it is"},
    {"J1", "h100_sxm", FAM_GPU, true, "transformer --config llama2_7b attention=flash remat=minimal_flash",
     "batch=8", "fsdp", 0.721, 0, "Llama2-7B FSDP 8, GBS 16 x 4096"},
    {"T1", "h100_96gb", FAM_GPU, false, "transformer --config llama3_8b attention=flash remat=dots", "batch=8",
     "fsdp", 2.84, 82.4, "Llama-3.1-8B FSDP 8, GBS 16 x 8192 (torchtitan)"},
    {"T3", "h100_96gb", FAM_GPU, false, "transformer --config llama3_8b batch=256 attention=flash remat=dots",
     "batch=128", "fsdp", 2.92, 67.0, "as T1, FSDP 128 over 16 nodes"},
    {"J3", "a100_80gb", FAM_GPU, true, "transformer --config gpt3_5b attention=flash remat=dots_no_batch",
     "batch=256", "fsdp", 3.447, 0, "GPT-5B FSDP 256, GBS 2048 (PAXML)"},
    {"J4", "h100_sxm", FAM_GPU, false, "transformer --config gpt3_5b attention=flash remat=dots_no_batch",
     "batch=256", "fsdp", 1.236, 0, "as J3 on H100"},
    {"M1", "tpu_v4", FAM_TPU, true, "transformer --config maxtext_22b attention=flash remat=full", "batch=64",
     "fsdp", 28.4, 0, "MaxText 22B FSDP 64, GBS 1024"},
    {"M4", "tpu_v5e", FAM_TPU, true, "transformer --config maxtext_16b attention=flash remat=full", "batch=256",
     "fsdp", 10.3, 0, "MaxText 16B FSDP 256, GBS 1536"},
    {"M9", "tpu_v5p", FAM_TPU, false, "transformer --config maxtext_32b attention=flash remat=dots_no_batch",
     "batch=16,model=4", "mp_split+fsdp", 9.9, 0, "MaxText 32B FSDP 16 x TP 4, GBS 512"},
    {"Y1", "a100_80gb", FAM_GPU, false,
     "transformer --config mpt_7b vocab=50368 batch=96 microbatches=2 attention=flash", "batch=8", "fsdp", 5.30, 0,
     "MPT-7B FSDP 8, 2 micro-batches of 48"},
    {"Y7", "h100_sxm", FAM_GPU, false, "transformer --config mpt_7b vocab=50368 attention=flash", "batch=8", "fsdp",
     1.15, 0, "MPT-7B FSDP 8, GBS 48"},
    {"N1", "a100_80gb", FAM_GPU, true, "transformer --config gpt_1_7b remat=full", "batch=32", "bp", 3.53, 0,
     "GPT 1.7B DP 32 (Megatron)"},
    {"N2", "a100_80gb", FAM_GPU, false, "transformer --config gpt_3_6b remat=full", "batch=32,model=2", "bp+mp",
     3.70, 0, "GPT 3.6B DP 32 x TP 2"},
    {"N3", "a100_80gb", FAM_GPU, false, "transformer --config gpt_7_5b remat=full", "batch=32,model=4", "bp+mp",
     3.70, 0, "GPT 7.5B DP 32 x TP 4"},
};
#define NROWS (int)(sizeof ROWS / sizeof ROWS[0])

/* The corpus programs already partitioned (*_spmd.hlo) and the device each
 * ran on, where the corpus says; where it does not, an 80 GB H100 is
 * assumed (and printed). */
static const struct {
    const char *file, *device, *why;
} SPMD[] = {
    {"xla_maxtext_llama31_8b_train_step_1x8_spmd.hlo", "h100_sxm", "assumed"},
    {"xla_maxtext_llama31_70b_train_step_16x8_spmd.hlo", "h100_sxm", "assumed"},
    {"xla_maxtext_llama3_8b_cp_train_step_4dev_spmd.hlo", "h100_sxm", "assumed"},
};

typedef struct result {
    bool ok;
    char why[512];
    double grid[NGRID]; /* runtime at each matmul efficiency */
    double prior_s;     /* with the registry's constants */
    double fit_s;
    cost_report prior;  /* the registry's report */
    size_t ops;
    double gen_s, lower_s, eval_s;
} result;

static const char *zoo_dir;
static bool verbose; /* --report: each row's full report */

static int device_for(const char *name, cost_device *d, ap_error *err)
{
    if (strcmp(name, "h100_96gb") != 0)
        return cost_device_lookup(name, d, err);
    /* T1/T3: H100 SXM with 96 GB of HBM2e at 2.4 TB/s, power-capped at 500 W
     * (torchtitan docs/performance.md, 2024-12); the same chip, NVLink 4 and
     * 400 Gbit/s per GPU between nodes (as the registry's h100_sxm).  The
     * dense peak is the datasheet's (the MFU torchtitan prints divides by
     * it); what the power cap costs is left to the fitted efficiency. */
    if (cost_device_lookup("h100_sxm", d, err) < 0)
        return -1;
    snprintf(d->name, sizeof d->name, "h100_96gb_500w");
    d->hbm_bytes = 96e9;
    d->hbm_bandwidth = 2.4e12;
    return 0;
}

/* Reads schedules/NAME.txt for each name of `names` (joined by '+'); NULL
 * with the missing file in why when one is not there. */
static char *read_schedules(const char *names, char *why, size_t n)
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
static ir_module *generate(const char *args, char *why, size_t n)
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

static ir_module *read_corpus(const char *file, char *why, size_t n)
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

/* Evaluates prog on dev (tiers by default) at every grid efficiency. */
static bool evaluate_row(const cost_program *prog, const cost_device *dev, result *res)
{
    ap_error err;
    cost_mesh mesh = *cost_program_mesh(prog);
    cost_mesh_default_tiers(&mesh, dev);
    cost_options o = {0, verbose ? 12 : -1};
    double a = bench_now();
    if (cost_evaluate(prog, dev, &mesh, &o, &res->prior, &err) < 0) {
        ap_error_format(&err, res->why, sizeof res->why);
        return false;
    }
    res->eval_s = bench_now() - a;
    if (verbose) {
        ap_buf b;
        ap_buf_init(&b);
        cost_report_text(&res->prior, &b);
        printf("%.*s\n", (int)b.len, b.data);
        ap_buf_free(&b);
    }
    o.top_k = -1;
    res->prior_s = res->prior.runtime_s;
    for (int i = 0; i < NGRID; i++) {
        cost_device d = *dev;
        cost_report r;
        d.matmul_efficiency = GRID(i);
        if (cost_evaluate(prog, &d, &mesh, &o, &r, &err) < 0) {
            ap_error_format(&err, res->why, sizeof res->why);
            return false;
        }
        res->grid[i] = r.runtime_s;
    }
    return true;
}

static void run_row(const row *rw, result *res)
{
    memset(res, 0, sizeof *res);
    cost_device dev;
    ap_error err;
    if (device_for(rw->device, &dev, &err) < 0) {
        ap_error_format(&err, res->why, sizeof res->why);
        return;
    }
    double a = bench_now();
    ir_module *m;
    char *sched = NULL;
    if (!strncmp(rw->model, "hlo:", 4)) {
        m = read_corpus(rw->model + 4, res->why, sizeof res->why);
    } else {
        if (rw->sched[0] && !(sched = read_schedules(rw->sched, res->why, sizeof res->why)))
            return;
        m = generate(rw->model, res->why, sizeof res->why);
    }
    if (!m) {
        ap_free(sched);
        return;
    }
    res->gen_s = bench_now() - a;
    a = bench_now();
    cost_program *prog = NULL;
    ir_pctx *ctx = NULL;
    ir_partition *p = NULL;
    ir_lowered lw;
    bool lowered = false;
    if (!rw->mesh[0]) {
        /* XLA inlines calls first (CallInliner), as ir_pctx_new does */
        if (ir_inline_calls(m, ir_module_entry(m), &err) < 0 || cost_prepare(m, &prog, &err) < 0)
            goto fail;
    } else {
        ir_mesh mesh;
        ir_op *f = ir_module_entry(m);
        if (ir_mesh_parse(rw->mesh, &mesh, &err) < 0 || ir_inline_calls(m, f, &err) < 0 ||
            ir_pctx_new(m, f, &mesh, &ctx, &err) < 0 || ir_partition_new(ctx, &p, &err) < 0 ||
            (sched && ir_schedule_apply(p, sched, &err) < 0) || ir_lower(p, &lw, &err) < 0)
            goto fail;
        lowered = true;
        if (cost_prepare(lw.module, &prog, &err) < 0)
            goto fail;
    }
    res->lower_s = bench_now() - a;
    res->ops = cost_program_num_ops(prog);
    res->ok = evaluate_row(prog, &dev, res);
    goto out;
fail:
    ap_error_format(&err, res->why, sizeof res->why);
out:
    cost_program_free(prog);
    if (lowered)
        ir_lowered_free(&lw);
    ir_partition_free(p);
    ir_pctx_free(ctx);
    ir_module_free(m);
    ap_free(sched);
}

static double lr(double pred, double meas)
{
    return fabs(log(pred / meas));
}

static double runtime_at(const result *r, double eff)
{
    int i = (int)lround((eff - 0.10) / 0.01);
    return r->grid[i < 0 ? 0 : i >= NGRID ? NGRID - 1 : i];
}

/* The registry device whose efficiency row i shares (T1/T3's H100 is an
 * h100_sxm with other memory). */
static const char *fit_device(int i)
{
    return strcmp(ROWS[i].device, "h100_96gb") ? ROWS[i].device : "h100_sxm";
}

/* The grid efficiency minimizing the squared log ratios of the calibration
 * rows of device dev (or, dev NULL, of all of family f); -1 when there are
 * none.  *n: how many. */
static double fit(const result *res, const char *dev, family f, int *n_out)
{
    double best = -1, best_e = -1;
    int n = 0;
    for (int g = 0; g < NGRID; g++) {
        double s = 0;
        n = 0;
        for (int i = 0; i < NROWS; i++)
            if (ROWS[i].calib && res[i].ok && (dev ? !strcmp(fit_device(i), dev) : ROWS[i].fam == f)) {
                double l = log(res[i].grid[g] / ROWS[i].time_s);
                s += l * l;
                n++;
            }
        if (n && (best < 0 || s < best)) {
            best = s;
            best_e = GRID(g);
        }
    }
    *n_out = n;
    return best_e;
}

static void summary(const char *label, const result *res, bool calib, bool fitted)
{
    double v[NROWS];
    int n = 0;
    const char *worst = "";
    double w = 0;
    for (int i = 0; i < NROWS; i++)
        if (ROWS[i].calib == calib && res[i].ok) {
            v[n] = lr(fitted ? res[i].fit_s : res[i].prior_s, ROWS[i].time_s);
            if (v[n] >= w) {
                w = v[n];
                worst = ROWS[i].id;
            }
            n++;
        }
    if (!n) {
        printf("  %-28s no rows\n", label);
        return;
    }
    double med = bench_median(v, n);
    printf("  %-28s %2d rows  median |log ratio| %.3f (x%.2f)  worst %.3f (x%.2f, %s)\n", label, n, med, exp(med),
           w, exp(w), worst);
}

static void corpus_memory(void)
{
    printf("\nCorpus programs already partitioned: peak per device against the device's HBM\n");
    printf("%-52s %-10s %9s %9s %5s  %s\n", "program", "device", "peak GiB", "HBM GiB", "fits", "at the peak");
    for (size_t i = 0; i < sizeof SPMD / sizeof SPMD[0]; i++) {
        char why[512];
        ir_module *m = read_corpus(SPMD[i].file, why, sizeof why);
        cost_device dev;
        cost_report r;
        ap_error err;
        if (!m || cost_device_lookup(SPMD[i].device, &dev, &err) < 0 ||
            ir_inline_calls(m, ir_module_entry(m), &err) < 0 || cost_estimate(m, &dev, NULL, &r, &err) < 0) {
            if (m)
                ap_error_format(&err, why, sizeof why);
            printf("%-52s %s\n", SPMD[i].file, why);
            ir_module_free(m);
            continue;
        }
        char kinds[512] = "";
        size_t k = 0;
        for (int c = 0; c < COST_MEM_COUNT; c++)
            if (r.memory.kinds[c] >= (1 << 30) && k < sizeof kinds)
                k += (size_t)snprintf(kinds + k, sizeof kinds - k, "%s%s %.1f", k ? ", " : "",
                                      cost_mem_kind_name((cost_mem_kind)c), (double)r.memory.kinds[c] / 1073741824.0);
        printf("%-52s %-10s %9.2f %9.2f %5s  %s (device %s)\n", SPMD[i].file, dev.name,
               (double)r.peak_memory_bytes / 1073741824.0, dev.hbm_bytes / 1073741824.0, r.fits ? "yes" : "no",
               kinds, SPMD[i].why);
        ir_module_free(m);
    }
}

int main(int argc, char **argv)
{
    static char zoo[1024];
    snprintf(zoo, sizeof zoo, "%s/tests/models", AP_SOURCE_DIR);
    zoo_dir = zoo;
    const char *only = NULL;
    bool corpus = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--zoo") && i + 1 < argc)
            zoo_dir = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--no-corpus"))
            corpus = false;
        else if (!strcmp(argv[i], "--report"))
            verbose = true;
        else {
            fprintf(stderr, "usage: bench_fidelity [--zoo DIR] [--only ID,ID] [--no-corpus] [--report]\n");
            return 2;
        }
    }
    static result res[NROWS];
    printf("Rows of ../shared/notes/measured-runs.md (zoo: %s)\n", zoo_dir);
    printf("%-3s %-2s %-15s %8s %8s %7s %9s %9s %9s %6s\n", "id", "", "device", "ops", "gen s", "lower s",
           "eval ms", "prior s", "meas s", "ratio");
    for (int i = 0; i < NROWS; i++) {
        if (only && !strstr(only, ROWS[i].id)) {
            snprintf(res[i].why, sizeof res[i].why, "skipped (--only)");
            continue;
        }
        run_row(&ROWS[i], &res[i]);
        if (!res[i].ok) {
            printf("%-3s %-2s %-15s not yet writable: %s\n", ROWS[i].id, ROWS[i].calib ? "C" : "V", ROWS[i].device,
                   res[i].why);
            fflush(stdout);
            continue;
        }
        printf("%-3s %-2s %-15s %8zu %8.1f %7.1f %9.1f %9.3f %9.3f %6.2f\n", ROWS[i].id, ROWS[i].calib ? "C" : "V",
               ROWS[i].device, res[i].ops, res[i].gen_s, res[i].lower_s, res[i].eval_s * 1e3, res[i].prior_s,
               ROWS[i].time_s, res[i].prior_s / ROWS[i].time_s);
        fflush(stdout);
    }

    /* per device where it has calibration rows; else the family's */
    printf("\nFitted matmul efficiency (calibration rows only; registry value in brackets):\n");
    int nf[2];
    double fam[2] = {fit(res, NULL, FAM_GPU, &nf[0]), fit(res, NULL, FAM_TPU, &nf[1])};
    double eff[NROWS];
    for (int i = 0; i < NROWS; i++) {
        eff[i] = -1;
        if (!res[i].ok)
            continue;
        int n, seen = 0;
        for (int j = 0; j < i; j++)
            seen |= res[j].ok && !strcmp(fit_device(i), fit_device(j));
        eff[i] = fit(res, fit_device(i), ROWS[i].fam, &n);
        const char *how = "its calibration rows";
        if (eff[i] < 0) {
            eff[i] = fam[ROWS[i].fam];
            how = eff[i] < 0 ? "none: registry kept" : "no rows of its own: the family's fit";
            n = nf[ROWS[i].fam];
        }
        cost_device d;
        device_for(fit_device(i), &d, NULL);
        if (!seen)
            printf("  %-10s %5.2f  [%4.2f]  %s (%d)\n", fit_device(i), eff[i] < 0 ? d.matmul_efficiency : eff[i],
                   d.matmul_efficiency, how, n);
    }
    for (int i = 0; i < NROWS; i++)
        if (res[i].ok)
            res[i].fit_s = eff[i] >= 0 ? runtime_at(&res[i], eff[i]) : res[i].prior_s;

    printf("\n%-3s %-5s %-15s %10s %10s %10s %7s %7s %9s %9s  %s\n", "id", "set", "device", "measured s", "prior s",
           "fitted s", "ratio", "|log|", "comm s", "hidden s", "row");
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < NROWS; i++) {
            if (ROWS[i].calib != (pass == 1))
                continue;
            if (!res[i].ok) {
                printf("%-3s %-5s %-15s %10.3f  not yet writable: %s\n", ROWS[i].id, pass ? "calib" : "valid",
                       ROWS[i].device, ROWS[i].time_s, res[i].why);
                continue;
            }
            printf("%-3s %-5s %-15s %10.3f %10.3f %10.3f %7.2f %7.3f %9.3f %9.3f  %s\n", ROWS[i].id,
                   pass ? "calib" : "valid", ROWS[i].device, ROWS[i].time_s, res[i].prior_s, res[i].fit_s,
                   res[i].fit_s / ROWS[i].time_s, lr(res[i].fit_s, ROWS[i].time_s), res[i].prior.comm_s,
                   res[i].prior.comm_hidden_s, ROWS[i].what);
        }
    printf("\n");
    summary("calibration, registry", res, true, false);
    summary("calibration, fitted", res, true, true);
    summary("validation, registry", res, false, false);
    summary("validation, fitted", res, false, true);

    printf("\nMemory rows (the peak the sources measured, per device)\n");
    printf("%-3s %-15s %12s %12s %7s %9s  %s\n", "id", "device", "measured GiB", "peak GiB", "ratio", "HBM GiB",
           "at the peak");
    for (int i = 0; i < NROWS; i++) {
        if (!res[i].ok)
            continue;
        const cost_report *r = &res[i].prior;
        double peak = (double)r->peak_memory_bytes / 1073741824.0;
        char kinds[512] = "";
        size_t k = 0;
        for (int c = 0; c < COST_MEM_COUNT; c++)
            if (r->memory.kinds[c] >= (1 << 30) && k < sizeof kinds)
                k += (size_t)snprintf(kinds + k, sizeof kinds - k, "%s%s %.1f", k ? ", " : "",
                                      cost_mem_kind_name((cost_mem_kind)c), (double)r->memory.kinds[c] / 1073741824.0);
        cost_device dev;
        device_for(ROWS[i].device, &dev, NULL);
        if (ROWS[i].mem_gib > 0)
            printf("%-3s %-15s %12.1f %12.1f %7.2f %9.1f  %s\n", ROWS[i].id, ROWS[i].device, ROWS[i].mem_gib, peak,
                   peak / ROWS[i].mem_gib, dev.hbm_bytes / 1073741824.0, kinds);
        else
            printf("%-3s %-15s %12s %12.1f %7s %9.1f  %s%s\n", ROWS[i].id, ROWS[i].device, "-", peak, "",
                   dev.hbm_bytes / 1073741824.0, kinds, r->fits ? "" : " (DOES NOT FIT, yet it ran)");
    }
    if (corpus)
        corpus_memory();
    return 0;
}
