/*
 * bench/cost.c - speed of the cost model on a large SPMD program: the time
 * of cost_prepare (once per program) and of one cost_evaluate (once per
 * search episode), medians over many runs.  The target is under 5 ms for a
 * 30k-op program.
 *
 *   bench_cost [--ops N] [--repeat R] [--device NAME] [FILE...] | --table3 | --scan [CONFIG]
 *
 * Without files it generates a Megatron-style transformer chain on a
 * `batch=4,model=2` mesh, JAX style (pretty ops, locations): per layer two
 * bf16 matmuls, a gated activation, an all_reduce over `model`, a layer norm
 * with a reduce and broadcasts, transposes, a residual add, and every fourth
 * layer a parameter all_gather over `batch` feeding another matmul.
 *
 * Then the acceptance table of the cost model (`--table3` alone): the
 * zoo's T32 training step on mesh {batch:16, model:2} of TPU v3 under the
 * paper's schedules BP, BP+MP, BP+MP+Z2, BP+MP+Z3 and MP, with the
 * orderings of the paper's Table 3 checked.
 *
 * And the scanned transformer against its unrolled form (`--scan`, config
 * t32 unless named): both on {batch:16, model:2} of an H100 under no
 * schedule (replicated), BP, BP+MP and BP+MP+Z3, with the step times and
 * the collective bytes per step (loop trips included) side by side.  Issue
 * 11 asks for them within 5% and 2%.  A schedule the scanned form refuses
 * (the standard schedules name the unrolled layers' parameters) says so.
 */
#include "bench.h"
#include "cost.h"

#include <math.h>

#define T3 "tensor<8x512x1024xbf16>"
#define TF "tensor<8x512x2048xbf16>"

static char *generate(long target_ops, size_t *len)
{
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "module @jit_train_step attributes {mhlo.num_partitions = 8 : i32, autopart.mesh = \"batch=4,model=2\"} {\n"
                    "  func.func public @main(%arg0: " T3 " {autopart.layout = [[\"batch\"], [], []]} loc(\"x\"), "
                    "%arg1: tensor<1024x2048xbf16> {autopart.layout = [[], [\"model\"]]} loc(\"params['w_up']\"), "
                    "%arg2: tensor<2048x1024xbf16> {autopart.layout = [[\"model\"], []]} loc(\"params['w_down']\"), "
                    "%arg3: tensor<1024xbf16> {autopart.layout = [[]]} loc(\"params['scale']\"), "
                    "%arg4: tensor<256x1024xbf16> {autopart.layout = [[\"batch\"], []]} loc(\"params['w_z3']\")) -> "
                    T3 " {\n"
                    "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<bf16>\n");
    long ops = 1, v = 0, layer = 0;
    char cur[32] = "%arg0";
    while (ops < target_ops) {
        long s = v;
#define L(...) ap_buf_printf(&b, __VA_ARGS__)
        L("    %%%ld = stablehlo.dot_general %s, %%arg1, contracting_dims = [2] x [0] : (" T3
          ", tensor<1024x2048xbf16>) -> " TF " loc(\"layer_%ld/mlp/up\")\n",
          s, cur, layer);
        L("    %%%ld = stablehlo.logistic %%%ld : " TF " loc(\"layer_%ld/mlp/gate\")\n", s + 1, s, layer);
        L("    %%%ld = stablehlo.multiply %%%ld, %%%ld : " TF " loc(\"layer_%ld/mlp/mul\")\n", s + 2, s, s + 1, layer);
        L("    %%%ld = stablehlo.dot_general %%%ld, %%arg2, contracting_dims = [2] x [0] : (" TF
          ", tensor<2048x1024xbf16>) -> " T3 " loc(\"layer_%ld/mlp/down\")\n",
          s + 3, s + 2, layer);
        L("    %%%ld = \"stablehlo.all_reduce\"(%%%ld) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, "
          "replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>, use_global_device_ids}> ({\n"
          "    ^bb0(%%a%ld: tensor<bf16>, %%b%ld: tensor<bf16>):\n"
          "      %%s%ld = stablehlo.add %%a%ld, %%b%ld : tensor<bf16>\n"
          "      stablehlo.return %%s%ld : tensor<bf16>\n"
          "    }) : (" T3 ") -> " T3 " loc(\"layer_%ld/mlp/psum\")\n",
          s + 4, s + 3, s, s, s, s, s, s, layer);
        L("    %%%ld = stablehlo.broadcast_in_dim %%arg3, dims = [2] : (tensor<1024xbf16>) -> " T3 "\n", s + 5);
        L("    %%%ld = stablehlo.multiply %%%ld, %%%ld : " T3 "\n", s + 6, s + 4, s + 5);
        L("    %%%ld = stablehlo.reduce(%%%ld init: %%cst) applies stablehlo.add across dimensions = [2] : (" T3
          ", tensor<bf16>) -> tensor<8x512xbf16>\n",
          s + 7, s + 6);
        L("    %%%ld = stablehlo.broadcast_in_dim %%%ld, dims = [0, 1] : (tensor<8x512xbf16>) -> " T3 "\n", s + 8, s + 7);
        L("    %%%ld = stablehlo.subtract %%%ld, %%%ld : " T3 "\n", s + 9, s + 6, s + 8);
        L("    %%%ld = stablehlo.exponential %%%ld : " T3 "\n", s + 10, s + 9);
        L("    %%%ld = stablehlo.transpose %%%ld, dims = [0, 2, 1] : (" T3 ") -> tensor<8x1024x512xbf16>\n", s + 11, s + 10);
        L("    %%%ld = stablehlo.transpose %%%ld, dims = [0, 2, 1] : (tensor<8x1024x512xbf16>) -> " T3 "\n", s + 12, s + 11);
        L("    %%%ld = stablehlo.add %%%ld, %s : " T3 " loc(\"layer_%ld/residual\")\n", s + 13, s + 12, cur, layer);
        v += 14;
        ops += 14; /* ops of the function body (the all_reduce region holds two more) */
        snprintf(cur, sizeof cur, "%%%ld", s + 13);
        if (layer % 4 == 3) {
            L("    %%%ld = \"stablehlo.all_gather\"(%%arg4) <{all_gather_dim = 0 : i64, channel_handle = "
              "#stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : "
              "tensor<2x4xi64>, use_global_device_ids}> : (tensor<256x1024xbf16>) -> tensor<1024x1024xbf16>\n",
              v);
            L("    %%%ld = stablehlo.dot_general %s, %%%ld, contracting_dims = [2] x [0] : (" T3
              ", tensor<1024x1024xbf16>) -> " T3 "\n",
              v + 1, cur, v);
            snprintf(cur, sizeof cur, "%%%ld", v + 1);
            v += 2;
            ops += 2;
        }
#undef L
        layer++;
    }
    ap_buf_printf(&b, "    return %s : " T3 "\n  }\n}\n", cur);
    return ap_buf_take(&b, len);
}

static void bench_module(const char *name, const char *text, size_t len, int repeat, const cost_device *dev)
{
    ap_error err;
    ir_module *m = NULL;
    double t0 = bench_now();
    if (ir_parse(text, len, name, IR_FMT_AUTO, &m, &err) < 0) {
        char msg[800];
        ap_error_format(&err, msg, sizeof msg);
        printf("%s: %s\n", name, msg);
        return;
    }
    double parse_s = bench_now() - t0;

    int n_prep = repeat < 5 ? 5 : repeat / 20;
    double *prep = malloc(sizeof *prep * (size_t)n_prep), *eval = malloc(sizeof *eval * (size_t)repeat);
    cost_program *p = NULL;
    for (int i = 0; i < n_prep; i++) {
        cost_program_free(p);
        t0 = bench_now();
        if (cost_prepare(m, &p, &err) < 0) {
            printf("%s: %s\n", name, err.msg);
            goto out;
        }
        prep[i] = bench_now() - t0;
    }
    cost_report r;
    cost_mesh mesh = *cost_program_mesh(p);
    cost_mesh_default_tiers(&mesh, dev);
    for (int i = 0; i < repeat; i++) {
        t0 = bench_now();
        if (cost_evaluate(p, dev, &mesh, NULL, &r, &err) < 0) {
            printf("%s: %s\n", name, err.msg);
            goto out;
        }
        eval[i] = bench_now() - t0;
    }
    double mp = bench_median(prep, n_prep), me = bench_median(eval, repeat);
    printf("%-44s %7zu ops  parse %8.2f ms  prepare %7.3f ms  evaluate %7.3f ms  prepare+evaluate %7.3f ms\n", name,
           cost_program_num_ops(p), parse_s * 1e3, mp * 1e3, me * 1e3, (mp + me) * 1e3);
    printf("%-44s estimate on %s: step %.3f ms (compute %.3f, comm %.3f), peak %.2f GiB, %.3g flops\n", "",
           dev->name, r.runtime_s * 1e3, r.compute_s * 1e3, r.comm_s * 1e3,
           (double)r.peak_memory_bytes / 1073741824.0, r.flops_per_device);
out:
    cost_program_free(p);
    free(prep);
    free(eval);
    ir_module_free(m);
}

/* The rows of the paper's Table 3 for T32, estimated. */
static int table3(void)
{
    static const char *const schedules[] = {"bp", "bp+mp", "bp+mp+z2", "bp+mp+z3", "mp"};
    enum { N = 5 };
    cost_device tpu;
    ap_error err;
    if (cost_device_lookup("tpu_v3", &tpu, &err) < 0)
        bench_die("tpu_v3", &err);
    double t0 = bench_now();
    ir_module *m = bench_modelgen_module("transformer --config t32");
    double gen_s = bench_now() - t0;
    ir_op *f = ir_module_entry(m);
    ir_mesh mesh;
    ir_pctx *ctx;
    if (ir_mesh_parse("batch=16,model=2", &mesh, &err) < 0 || ir_inline_calls(m, f, &err) < 0 ||
        ir_pctx_new(m, f, &mesh, &ctx, &err) < 0)
        bench_die("t32", &err);
    printf("\nT32 training step (%u ops, generated and parsed in %.1f s), mesh {batch:16, model:2}, %s:\n",
           ir_pctx_num_ops(ctx), gen_s, tpu.name);
    printf("%-10s %10s %10s %10s %12s %5s %5s %5s %5s %9s %11s %9s\n", "schedule", "step ms", "compute", "comm",
           "peak GiB", "fits", "AG", "AR", "RS", "spmd ops", "prepare ms", "eval ms");
    cost_report r[N];
    for (int i = 0; i < N; i++) {
        char *sched = bench_schedule(schedules[i]);
        ir_partition *p;
        ir_lowered lw;
        cost_program *prog;
        if (ir_partition_new(ctx, &p, &err) < 0 || ir_schedule_apply(p, sched, &err) < 0 || ir_lower(p, &lw, &err) < 0)
            bench_die(schedules[i], &err);
        double a = bench_now();
        if (cost_prepare(lw.module, &prog, &err) < 0)
            bench_die(schedules[i], &err);
        double prep_s = bench_now() - a;
        cost_mesh cm = *cost_program_mesh(prog);
        cost_mesh_default_tiers(&cm, &tpu);
        a = bench_now();
        if (cost_evaluate(prog, &tpu, &cm, NULL, &r[i], &err) < 0)
            bench_die(schedules[i], &err);
        double eval_s = bench_now() - a;
        char upper[32];
        size_t k = 0;
        for (; schedules[i][k] && k + 1 < sizeof upper; k++)
            upper[k] = (char)(schedules[i][k] >= 'a' && schedules[i][k] <= 'z' ? schedules[i][k] - 32 : schedules[i][k]);
        upper[k] = '\0';
        printf("%-10s %10.1f %10.1f %10.1f %12.2f %5s %5llu %5llu %5llu %9zu %11.2f %9.3f\n", upper, r[i].runtime_s * 1e3,
               r[i].compute_s * 1e3, r[i].comm_s * 1e3, (double)r[i].peak_memory_bytes / 1073741824.0,
               r[i].fits ? "yes" : "no", (unsigned long long)lw.count[IR_COLL_ALL_GATHER],
               (unsigned long long)lw.count[IR_COLL_ALL_REDUCE], (unsigned long long)lw.count[IR_COLL_REDUCE_SCATTER],
               cost_program_num_ops(prog), prep_s * 1e3, eval_s * 1e3);
        cost_program_free(prog);
        ir_lowered_free(&lw);
        ir_partition_free(p);
        ap_free(sched);
    }
    /* the paper's orderings: memory MP > BP > BP+MP > Z2 > Z3; MP slowest */
    enum { BP, BPMP, Z2, Z3, MP };
    bool mem = r[MP].peak_memory_bytes > r[BP].peak_memory_bytes &&
               r[BP].peak_memory_bytes > r[BPMP].peak_memory_bytes &&
               r[BPMP].peak_memory_bytes > r[Z2].peak_memory_bytes && r[Z2].peak_memory_bytes > r[Z3].peak_memory_bytes;
    double others = 0;
    for (int i = 0; i < MP; i++)
        others = r[i].runtime_s > others ? r[i].runtime_s : others;
    printf("memory order MP > BP > BP+MP > BP+MP+Z2 > BP+MP+Z3: %s\n", mem ? "holds" : "VIOLATED");
    printf("runtime: MP / slowest other = %.2f, MP / BP+MP = %.2f (per-device flops: MP %.3g, BP+MP %.3g)\n",
           r[MP].runtime_s / others, r[MP].runtime_s / r[BPMP].runtime_s, r[MP].flops_per_device,
           r[BPMP].flops_per_device);
    ir_pctx_free(ctx);
    ir_module_free(m);
    return mem && r[MP].runtime_s > others ? 0 : 1;
}

/* One form of the model under a schedule: *r and the loop count, or the
 * error text in `why` (returns false). */
static bool scan_row(ir_module *m, const char *sched_name, const cost_device *dev, cost_report *r, char *why,
                     size_t why_size)
{
    ap_error err;
    ir_mesh mesh;
    ir_pctx *ctx = NULL;
    ir_partition *p = NULL;
    ir_lowered lw;
    bool lowered = false, ok = false;
    char *sched = sched_name[0] ? bench_schedule(sched_name) : NULL;
    ir_op *f = ir_module_entry(m);
    if (ir_mesh_parse("batch=16,model=2", &mesh, &err) < 0 || ir_pctx_new(m, f, &mesh, &ctx, &err) < 0 ||
        ir_partition_new(ctx, &p, &err) < 0 || (sched && ir_schedule_apply(p, sched, &err) < 0) ||
        ir_lower(p, &lw, &err) < 0)
        goto out;
    lowered = true;
    if (cost_estimate(lw.module, dev, NULL, r, &err) < 0)
        goto out;
    ok = true;
out:
    if (!ok)
        ap_error_format(&err, why, why_size);
    if (lowered)
        ir_lowered_free(&lw);
    ir_partition_free(p);
    ir_pctx_free(ctx);
    ap_free(sched);
    return ok;
}

static double coll_bytes(const cost_report *r)
{
    double b = 0;
    for (int k = 0; k < COST_COLL_COUNT; k++)
        b += r->coll[k].bytes;
    return b;
}

static int scan_table(const char *config)
{
    static const char *const schedules[] = {"", "bp", "bp+mp", "bp+mp+z3"};
    /* the same schedules for the scanned form: Megatron names its stacked weights */
    static const char *const scanned[] = {"", "bp", "bp+mp_scan", "bp+mp_scan+z3"};
    cost_device h100;
    ap_error err;
    if (cost_device_lookup("h100", &h100, &err) < 0)
        bench_die("h100", &err);
    char args[128];
    snprintf(args, sizeof args, "transformer --config %s", config);
    ir_module *mu = bench_modelgen_module(args);
    snprintf(args, sizeof args, "transformer --config %s scan=1", config);
    ir_module *ms = bench_modelgen_module(args);
    if (ir_inline_calls(mu, ir_module_entry(mu), &err) < 0 || ir_inline_calls(ms, ir_module_entry(ms), &err) < 0)
        bench_die(config, &err);
    printf("\n%s training step unrolled vs scanned (scan=1), mesh {batch:16, model:2}, %s:\n", config, h100.name);
    printf("%-10s %12s %12s %7s %14s %14s %7s %6s %5s\n", "schedule", "unrolled ms", "scanned ms", "ratio",
           "unrolled coll", "scanned coll", "ratio", "loops", "trips");
    int bad = 0;
    for (size_t i = 0; i < sizeof schedules / sizeof *schedules; i++) {
        const char *name = schedules[i][0] ? schedules[i] : "none";
        cost_report u, s;
        char why[512];
        if (!scan_row(mu, schedules[i], &h100, &u, why, sizeof why)) {
            printf("%-10s unrolled: %s\n", name, why);
            bad++;
            continue;
        }
        if (!scan_row(ms, scanned[i], &h100, &s, why, sizeof why)) {
            printf("%-10s %12.6g  scanned refused: %s\n", name, u.runtime_s * 1e3, why);
            bad++;
            continue;
        }
        double cu = coll_bytes(&u), cs = coll_bytes(&s);
        double rt = s.runtime_s / u.runtime_s, rc = cu > 0 ? cs / cu : (cs > 0 ? INFINITY : 1);
        char bu[32], bs[32];
        printf("%-10s %12.6g %12.6g %7.3f %14s %14s %7.3f %6u %5lld\n", name, u.runtime_s * 1e3, s.runtime_s * 1e3, rt,
               ap_format_bytes(cu, bu, sizeof bu), ap_format_bytes(cs, bs, sizeof bs), rc, s.while_loops,
               s.n_loops ? (long long)s.loops[0].trips : -1LL);
        bad += fabs(rt - 1) > 0.05 || fabs(rc - 1) > 0.02;
    }
    printf("within 5%% (step time) and 2%% (collective bytes per step): %s\n", bad ? "NO" : "yes");
    ir_module_free(mu);
    ir_module_free(ms);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    long ops = 30000;
    int repeat = 1000;
    const char *device_name = "h100";
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = atol(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device_name = argv[++i];
        else if (!strcmp(argv[i], "--table3"))
            return table3();
        else if (!strcmp(argv[i], "--scan"))
            return scan_table(i + 1 < argc ? argv[i + 1] : "t32");
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: bench_cost [--ops N] [--repeat R] [--device NAME] [FILE...] | --table3 | --scan [CONFIG]\n");
            return 0;
        } else {
            first_file = i;
            break;
        }
    }
    if (repeat < 1)
        repeat = 1;
    cost_device dev;
    ap_error err;
    if (cost_device_lookup(device_name, &dev, &err) < 0) {
        printf("%s\n", err.msg);
        return 1;
    }
    printf("medians: prepare over max(5, R/20) runs, evaluate over R = %d runs\n", repeat);
    for (int i = first_file; i < argc; i++) {
        char *text;
        size_t len;
        if (ap_read_file(argv[i], &text, &len, &err) < 0) {
            printf("%s: %s\n", argv[i], err.msg);
            continue;
        }
        const char *slash = strrchr(argv[i], '/');
        bench_module(slash ? slash + 1 : argv[i], text, len, repeat, &dev);
        ap_free(text);
    }
    if (first_file == argc) {
        size_t len;
        char *text = generate(ops, &len);
        char name[64];
        snprintf(name, sizeof name, "generated SPMD chain (%ld ops)", ops);
        bench_module(name, text, len, repeat, &dev);
        ap_free(text);
        const char *corpus = AP_SHARED_DIR "/corpus/stablehlo/tt_qwen3_32b_tp8_manual.mlir";
        if (ap_read_file(corpus, &text, &len, &err) == 0) {
            bench_module("tt_qwen3_32b_tp8_manual.mlir", text, len, repeat, &dev);
            ap_free(text);
        }
        return table3();
    }
    return 0;
}
