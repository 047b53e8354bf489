/*
 * bench_fidelity - the cost model against measured training steps.
 *
 * Every row of ../shared/notes/measured-runs.md (runs.h: the program the
 * zoo's generator prints for it, partitioned by the zoo's schedules on the
 * row's mesh, or the corpus program it names) is estimated on the row's
 * device.
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
 * peak against its device's HBM, and the DeepSeek 4-device program partitioned
 * by its own annotations (--import --mesh x=4).
 *
 * Then the PartIR paper's Table 1 rows (P1-P3: peak HBM and MFU; see
 * PROWS for what is assumed), and single-device zoo programs compiled and
 * timed by XLA on an H200 (xla_h200.h: XLA's own peak and the measured
 * step; validation only, nothing is fitted on them).
 *
 * Usage: bench_fidelity [--zoo DIR] [--only ID,ID] [--no-corpus] [--no-partir] [--no-xla] [--report]
 *   --zoo DIR   the zoo's directory (modelgen and schedules/); default
 *               tests/models of this tree
 *   --only IDS  those rows alone (measured-runs.md's ids, P1-P3, xla: the
 *               section of programs measured with XLA; the
 *               corpus programs are left out); P2 or P3 runs P1 too, which
 *               chooses their sequence length
 *   --report    each row's whole report (cost_report_text), before its line
 */
#include <math.h>
#include <strings.h>

#include "runs.h"
#include "xla_h200.h"

#define NGRID 91 /* matmul efficiency 0.10, 0.11, ..., 1.00 */
#define GRID(i) (0.10 + 0.01 * (double)(i))

/* The corpus programs already partitioned (*_spmd.hlo) and the device each
 * ran on, where the corpus says; where it does not, an 80 GB H100 is
 * assumed (and printed). */
static const struct {
    const char *file, *device, *why;
    const char *import_mesh; /* partitioned here from its own annotations over this mesh, or NULL */
} SPMD[] = {
    {"xla_maxtext_llama31_8b_train_step_1x8_spmd.hlo", "h100_sxm", "assumed", NULL},
    {"xla_maxtext_llama31_70b_train_step_16x8_spmd.hlo", "h100_sxm", "assumed", NULL},
    {"xla_maxtext_llama3_8b_cp_train_step_4dev_spmd.hlo", "h100_sxm", "assumed", NULL},
    /* not partitioned yet: its arguments' shardings and the sharding
     * constraints of its body (the logits', line 12441) imported over x=4 (the
     * CLI's --import --mesh x=4); XLA's benchmark suite runs it on 4 GPUs */
    {"xla_maxtext_deepseek_train_step_4dev_preopt.hlo", "h100_sxm", "assumed", "x=4"},
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

static bool verbose; /* --report: each row's full report */

/* Evaluates prog on dev (tiers by default), and with grid at every grid
 * efficiency. */
static bool evaluate_row(const cost_program *prog, const cost_device *dev, cost_framework fw, bool grid, result *res)
{
    ap_error err;
    cost_mesh mesh = *cost_program_mesh(prog);
    cost_mesh_default_tiers(&mesh, dev);
    cost_options o = {.top_k = verbose ? 12 : -1, .framework = fw};
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
    for (int i = 0; grid && i < NGRID; i++) {
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

static void run_row(const row *rw, bool grid, result *res)
{
    memset(res, 0, sizeof *res);
    cost_device dev;
    ap_error err;
    if (cost_device_lookup(rw->device, &dev, &err) < 0) {
        ap_error_format(&err, res->why, sizeof res->why);
        return;
    }
    double a = bench_now();
    run_program rp;
    if (!run_open(rw, &rp, res->why, sizeof res->why))
        return;
    res->gen_s = rp.gen_s;
    cost_program *prog = NULL;
    ir_lowered lw;
    bool lowered = false;
    if (!rp.p) {
        if (cost_prepare_framework(rp.m, rw->fw, &prog, &err) < 0)
            goto fail;
    } else {
        if (ir_lower(rp.p, &lw, &err) < 0)
            goto fail;
        lowered = true;
        if (cost_prepare_framework(lw.module, rw->fw, &prog, &err) < 0)
            goto fail;
    }
    res->lower_s = bench_now() - a - res->gen_s;
    res->ops = cost_program_num_ops(prog);
    res->ok = evaluate_row(prog, &dev, rw->fw, grid, res);
    goto out;
fail:
    ap_error_format(&err, res->why, sizeof res->why);
out:
    cost_program_free(prog);
    if (lowered)
        ir_lowered_free(&lw);
    run_close(&rp);
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
            if (ROWS[i].calib && res[i].ok && (dev ? !strcmp(ROWS[i].device, dev) : ROWS[i].fam == f)) {
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
    printf("\nCorpus programs (partitioned, or partitioned here by their own annotations): peak per device against the "
           "device's HBM\n");
    printf("%-52s %-10s %9s %9s %5s  %s\n", "program", "device", "peak GiB", "HBM GiB", "fits", "at the peak");
    for (size_t i = 0; i < sizeof SPMD / sizeof SPMD[0]; i++) {
        char why[512];
        ir_module *m = read_corpus(SPMD[i].file, why, sizeof why);
        cost_device dev;
        cost_report r;
        ap_error err;
        cost_options o = {.top_k = verbose ? 12 : -1, .framework = COST_FW_XLA};
        ir_pctx *ctx = NULL;
        ir_partition *p = NULL;
        ap_buf sched;
        ap_buf_init(&sched);
        int rc = -1;
        if (m && cost_device_lookup(SPMD[i].device, &dev, &err) == 0 &&
            ir_inline_calls(m, ir_module_entry(m), &err) == 0) {
            ir_mesh mesh;
            if (!SPMD[i].import_mesh)
                rc = cost_estimate(m, &dev, &o, &r, &err);
            else if (ir_mesh_parse(SPMD[i].import_mesh, &mesh, &err) == 0 &&
                     ir_pctx_new(m, ir_module_entry(m), &mesh, &ctx, &err) == 0 &&
                     ir_schedule_import(m, ir_pctx_func(ctx), ir_pctx_mesh(ctx), &sched, &err) >= 0 &&
                     ir_partition_new(ctx, &p, &err) == 0 && ir_schedule_apply(p, sched.data, &err) == 0)
                rc = cost_state_estimate(p, &dev, NULL, &o, NULL, &r, &err);
        }
        ap_buf_free(&sched);
        ir_partition_free(p);
        ir_pctx_free(ctx);
        if (rc < 0) {
            if (m)
                ap_error_format(&err, why, sizeof why);
            printf("%-52s %s\n", SPMD[i].file, why);
            ir_module_free(m);
            continue;
        }
        if (verbose) {
            ap_buf b;
            ap_buf_init(&b);
            cost_report_text(&r, &b);
            printf("%.*s\n", (int)b.len, b.data);
            ap_buf_free(&b);
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

/* The PartIR paper's Table 1 (measured-runs.md, context rows: a
 * consistency check, not a target): T32 and T48 under BP+MP+Z3+EMB, the
 * peak HBM as XLA's compiler reported it (taken as GiB: XLA prints its
 * buffer sizes in binary units) and the MFU.  The paper states neither the
 * sequence length nor the precision.
 *
 * Precision: f32 throughout, as the paper's own figures imply.  Its
 * appendix A.2 gives a TPU v3 core 61.5 TFLOP/s "on float32" and 123 "on
 * float16"; Google's Cloud TPU v3 page gives 123 TFLOP/s bf16 per chip of
 * two cores, so 61.5 is all a core's matrix units do in any precision (and
 * what an f32 matmul gets at JAX's default precision on TPU, one bf16
 * pass).  T32's MFU of 58.5% on TPU taken against 123 would be 72 TFLOP/s
 * per core, more than the core has: the paper's MFU is against its
 * float32 figure, i.e. the step ran in f32.  (The A100 rows fit either.)
 *
 * Sequence length: chosen on P1 alone among 512, 1024 and 2048, the one
 * whose estimated peak is nearest P1's figure; P2 and P3 at that length
 * are the check.  Then, as context, the same done with bf16 activations
 * and f32 parameters (the choice made on P1 again, in that precision):
 * the rows depend on the two together, and P1 alone cannot tell them
 * apart.  The MFU printed is the estimate's flops per device over its step
 * time and the device's peak of that precision (the paper's appendix A.2
 * figures: TPU v3 core 61.5 TFLOP/s f32, 123 bf16; A100 156 and 312). */
static const struct prow {
    const char *id, *config, *mesh, *device;
    double hbm_gib, mfu;
    const char *what;
} PROWS[] = {
    {"P1", "t32", "batch=16,model=2", "tpu_v3", 14.38, 0.585, "T32 (5B), 16x2 TPU v3 cores, batch 48"},
    {"P2", "t48", "batch=32,model=4", "tpu_v3", 14.48, 0.523, "T48 (32B), 32x4 TPU v3 cores, batch 64"},
    {"P3", "t32", "batch=8,model=2", "a100_40gb", 27.02, 0.422, "T32 (5B), 8x2 A100-40GB, batch 48"},
};
#define NPROWS (int)(sizeof PROWS / sizeof PROWS[0])
static const struct {
    const char *knobs, *name;
    cost_prec prec;
} PREC[] = {{"", "f32", COST_PREC_F32}, {"dtype=bf16 param_dtype=f32", "bf16/f32", COST_PREC_BF16}};

/* Row p of PROWS at sequence length seq and precision k: false with the
 * reason printed when it cannot be estimated. */
static bool partir_row(int p, int seq, int k, result *res, double *mfu)
{
    char model[256];
    snprintf(model, sizeof model, "transformer --config %s seq=%d %s", PROWS[p].config, seq, PREC[k].knobs);
    row rw = {PROWS[p].id, PROWS[p].device, FAM_GPU, false, model, PROWS[p].mesh, "bp+mp+z3+emb", 0, 0, "", COST_FW_XLA};
    run_row(&rw, false, res);
    if (!res->ok) {
        printf("%-3s %5d %-9s not estimated: %s\n", PROWS[p].id, seq, PREC[k].name, res->why);
        return false;
    }
    cost_device dev;
    cost_device_lookup(PROWS[p].device, &dev, NULL);
    *mfu = res->prior.flops_per_device / (res->prior.runtime_s * cost_device_peak(&dev, PREC[k].prec));
    return true;
}

static void partir_print(int p, int seq, int k, const result *res, double mfu)
{
    double peak = (double)res->prior.peak_memory_bytes / 1073741824.0;
    printf("%-3s %5d %-9s %-10s %-17s %8.2f %8.2f %6.2f %6.1f%% %6.1f%%  %s\n", PROWS[p].id, seq, PREC[k].name,
           PROWS[p].device, PROWS[p].mesh, PROWS[p].hbm_gib, peak, peak / PROWS[p].hbm_gib, 100 * PROWS[p].mfu,
           100 * mfu, PROWS[p].what);
}

/* In precision k: P1 at each length, the length nearest its figure, then
 * the rows of `want` (PROWS' ids selected) at that length. */
static void partir_precision(int k, const bool *want)
{
    static const int SEQ[] = {512, 1024, 2048};
    int best_s = -1;
    double best = 0;
    for (int si = 0; si < (int)(sizeof SEQ / sizeof SEQ[0]); si++) {
        static result res;
        double mfu;
        if (!partir_row(0, SEQ[si], k, &res, &mfu))
            continue;
        partir_print(0, SEQ[si], k, &res, mfu);
        double l = lr((double)res.prior.peak_memory_bytes / 1073741824.0, PROWS[0].hbm_gib);
        if (best_s < 0 || l < best) {
            best = l;
            best_s = SEQ[si];
        }
        fflush(stdout);
    }
    if (best_s < 0)
        return;
    printf("  seq %d in %s: the nearest to P1's figure (chosen on P1, which is no check)\n", best_s, PREC[k].name);
    for (int p = 1; p < NPROWS; p++) {
        static result res;
        double mfu;
        if (want[p] && partir_row(p, best_s, k, &res, &mfu))
            partir_print(p, best_s, k, &res, mfu);
        fflush(stdout);
    }
}

static void partir_rows(const bool *want)
{
    printf("\nThe PartIR paper's Table 1 (context rows), BP+MP+Z3+EMB: f32, as the paper's TPU MFU implies\n");
    printf("%-3s %5s %-9s %-10s %-17s %8s %8s %6s %7s %7s\n", "id", "seq", "precision", "device", "mesh", "HBM GiB",
           "peak GiB", "ratio", "MFU", "est MFU");
    partir_precision(0, want);
    printf("Context, not the assumption: bf16 activations with f32 parameters, the length chosen on P1 again\n");
    partir_precision(1, want);
    printf("  EMB here splits the embedding's d_model on `model`; its collectives differ from the paper's Table 2\n"
           "  (tests/models/schedules/emb.txt), so the activations it shards may too.\n");
}

static void measured_rows(const char *only);

/* The programs of xla_h200.h on the registry's h200 (constants as the
 * registry has them: these rows are not in the fit), as XLA's buffer
 * assignment counts memory. */
static void xla_rows(void)
{
    printf("\nSingle-device programs measured with XLA on an H200 (jax 0.11.2, 2026-11-27, bench/xla_measure.py;\n"
           "validation only: nothing is fitted on them)\n");
    printf("%-16s %9s %9s %6s %9s %9s %6s  %s\n", "program", "est GiB", "XLA GiB", "ratio", "est ms", "meas ms", "ratio",
           "modelgen");
    double lm[XLA_NROWS], lt[XLA_NROWS], wm = 0, wt = 0;
    const char *wmn = "", *wtn = "";
    int n = 0;
    for (int i = 0; i < XLA_NROWS; i++) {
        const struct xla_row *x = &XLA_H200[i];
        row rw = {x->id, "h200", FAM_GPU, false, x->model, "x=1", "", x->step_ms / 1e3, x->peak_gib, x->id, COST_FW_XLA};
        static result res;
        run_row(&rw, false, &res);
        if (!res.ok) {
            printf("%-16s not estimated: %s\n", x->id, res.why);
            continue;
        }
        double peak = (double)res.prior.peak_memory_bytes / 1073741824.0, ms = res.prior_s * 1e3;
        printf("%-16s %9.2f %9.2f %6.2f %9.1f %9.1f %6.2f  %s\n", x->id, peak, x->peak_gib, peak / x->peak_gib, ms,
               x->step_ms, ms / x->step_ms, x->model);
        fflush(stdout);
        lm[n] = lr(peak, x->peak_gib);
        lt[n] = lr(ms, x->step_ms);
        if (lm[n] >= wm) {
            wm = lm[n];
            wmn = x->id;
        }
        if (lt[n] >= wt) {
            wt = lt[n];
            wtn = x->id;
        }
        n++;
    }
    if (!n)
        return;
    double mm = bench_median(lm, n), mt = bench_median(lt, n);
    printf("  peak: median |log ratio| %.3f (x%.2f)  worst %.3f (x%.2f, %s)\n", mm, exp(mm), wm, exp(wm), wmn);
    printf("  step: median |log ratio| %.3f (x%.2f)  worst %.3f (x%.2f, %s)\n", mt, exp(mt), wt, exp(wt), wtn);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    bool corpus = true, partir = true, xla = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--zoo") && i + 1 < argc)
            zoo_dir = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--no-corpus"))
            corpus = false;
        else if (!strcmp(argv[i], "--no-partir"))
            partir = false;
        else if (!strcmp(argv[i], "--no-xla"))
            xla = false;
        else if (!strcmp(argv[i], "--report"))
            verbose = true;
        else {
            fprintf(stderr,
                    "usage: bench_fidelity [--zoo DIR] [--only ID,ID] [--no-corpus] [--no-partir] [--no-xla] [--report]\n");
            return 2;
        }
    }
    bool any_row = false, want_p[NPROWS], any_p = false;
    for (int i = 0; i < NROWS; i++)
        any_row |= bench_wants(only, ROWS[i].id);
    for (int p = 0; p < NPROWS; p++)
        any_p |= want_p[p] = partir && bench_wants(only, PROWS[p].id);
    bool want_x = xla && bench_wants(only, "xla");
    if (only && !any_row && !any_p && !want_x) {
        fprintf(stderr, "bench_fidelity: --only %s names no row (ids: X1, J1, T1, ..., P1, P2, P3, xla)\n", only);
        return 2;
    }
    if (any_row)
        measured_rows(only);
    if (any_p)
        partir_rows(want_p);
    if (want_x)
        xla_rows();
    if (corpus && !only)
        corpus_memory();
    return 0;
}

/* The rows of measured-runs.md that only selects: step time, the fit, memory. */
static void measured_rows(const char *only)
{
    static result res[NROWS];
    printf("Rows of ../shared/notes/measured-runs.md (zoo: %s)\n", zoo_dir);
    printf("%-3s %-2s %-15s %8s %8s %7s %9s %9s %9s %6s\n", "id", "", "device", "ops", "gen s", "lower s",
           "eval ms", "prior s", "meas s", "ratio");
    for (int i = 0; i < NROWS; i++) {
        if (!bench_wants(only, ROWS[i].id))
            continue;
        run_row(&ROWS[i], true, &res[i]);
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
            seen |= res[j].ok && !strcmp(ROWS[i].device, ROWS[j].device);
        eff[i] = fit(res, ROWS[i].device, ROWS[i].fam, &n);
        const char *how = "its calibration rows";
        if (eff[i] < 0) {
            eff[i] = fam[ROWS[i].fam];
            how = eff[i] < 0 ? "none: registry kept" : "no rows of its own: the family's fit";
            n = nf[ROWS[i].fam];
        }
        cost_device d;
        cost_device_lookup(ROWS[i].device, &d, NULL);
        if (!seen)
            printf("  %-10s %5.2f  [%4.2f]  %s (%d)\n", ROWS[i].device, eff[i] < 0 ? d.matmul_efficiency : eff[i],
                   d.matmul_efficiency, how, n);
    }
    for (int i = 0; i < NROWS; i++)
        if (res[i].ok)
            res[i].fit_s = eff[i] >= 0 ? runtime_at(&res[i], eff[i]) : res[i].prior_s;

    printf("\n%-3s %-5s %-15s %10s %10s %10s %7s %7s %9s %9s  %s\n", "id", "set", "device", "measured s", "prior s",
           "fitted s", "ratio", "|log|", "comm s", "hidden s", "row");
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < NROWS; i++) {
            if (ROWS[i].calib != (pass == 1) || !bench_wants(only, ROWS[i].id))
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
    int ncal = 0;
    for (int i = 0; i < NROWS; i++)
        ncal += ROWS[i].calib;
    printf("  (%d of %d rows fit the efficiencies; h100_96gb's on T1 alone, which T3 validates)\n", ncal, NROWS);

    printf("\nMemory rows (the peak the sources measured, per device)\n");
    printf("%-3s %-15s %-13s %12s %12s %7s %9s  %s\n", "id", "device", "memory as", "measured GiB", "peak GiB",
           "ratio", "HBM GiB", "at the peak");
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
        cost_device_lookup(ROWS[i].device, &dev, NULL);
        const char *fw = cost_framework_name(ROWS[i].fw);
        if (ROWS[i].mem_gib > 0)
            printf("%-3s %-15s %-13s %12.1f %12.1f %7.2f %9.1f  %s\n", ROWS[i].id, ROWS[i].device, fw, ROWS[i].mem_gib,
                   peak, peak / ROWS[i].mem_gib, dev.hbm_bytes / 1073741824.0, kinds);
        else
            printf("%-3s %-15s %-13s %12s %12.1f %7s %9.1f  %s%s\n", ROWS[i].id, ROWS[i].device, fw, "-", peak, "",
                   dev.hbm_bytes / 1073741824.0, kinds, r->fits ? "" : " (DOES NOT FIT, yet it ran)");
    }
    printf("  memory as: xla = XLA's buffer assignment of the fused step; pytorch_eager = every op's output a\n"
           "  tensor from the op to its last reader, ops as written (autopart --framework pytorch-eager), what\n"
           "  PyTorch's caching allocator holds allocated.  T1, T3: torchtitan without torch.compile; its figure\n"
           "  is the allocator's peak reservation, which also holds what it caches: nothing is fitted to it\n"
           "  (T1 and T3 are both checks of the mode).  Y1/Y7 and N1-N3 run eager too, but with fused LayerNorm\n"
           "  kernels the zoo writes op by op: counted as XLA's step (bench/runs.h).\n");
}
