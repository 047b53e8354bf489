/*
 * bench/partir.c - speed of the PartIR core on model-zoo training steps:
 * building the TMR, one tile + propagate, and a whole BP+MP+Z3 schedule
 * with lowering to SPMD.  Generates the modules with tests/models/modelgen
 * (T32, and a T32 variant with 80 layers, about 30k ops).
 *
 *   bench_partir [--repeat N] [FILE...]
 */
#include "bench.h"

static void bench(const char *name, const char *text, int repeat)
{
    ir_module *m;
    ap_error err;
    if (ir_parse(text, strlen(text), name, IR_FMT_AUTO, &m, &err) < 0) {
        printf("%s: %s\n", name, err.msg);
        return;
    }
    ir_op *f = ir_module_entry(m);
    ir_mesh mesh;
    ir_mesh_parse("batch=16,model=2", &mesh, &err);
    ir_pctx *ctx;
    double t0 = bench_now();
    if (ir_pctx_new(m, f, &mesh, &ctx, &err) < 0) {
        printf("%s: %s\n", name, err.msg);
        ir_module_free(m);
        return;
    }
    double t_ctx = bench_now() - t0;
    char *bp_mp_z3 = bench_schedule("bp+mp+z3");
    double *tp = calloc((size_t)repeat, sizeof *tp), *ts = calloc((size_t)repeat, sizeof *ts),
           *tl = calloc((size_t)repeat, sizeof *tl);
    uint64_t ag = 0, ar = 0, rs = 0;
    for (int r = 0; r < repeat; r++) {
        ir_partition *p;
        ir_partition_new(ctx, &p, &err);
        /* one tile + propagate: the batch input, then propagation */
        double a = bench_now();
        ir_schedule_apply(p, "tile batch['inputs'] 0 batch\npropagate", &err);
        tp[r] = bench_now() - a;
        ir_partition_free(p);
        ir_partition_new(ctx, &p, &err);
        a = bench_now();
        if (ir_schedule_apply(p, bp_mp_z3, &err) < 0)
            printf("schedule: %s\n", err.msg);
        ts[r] = bench_now() - a;
        ir_lowered lw;
        a = bench_now();
        if (ir_lower(p, &lw, &err) < 0)
            printf("lower: %s\n", err.msg);
        tl[r] = bench_now() - a;
        ag = lw.count[IR_COLL_ALL_GATHER];
        ar = lw.count[IR_COLL_ALL_REDUCE];
        rs = lw.count[IR_COLL_REDUCE_SCATTER];
        ir_lowered_free(&lw);
        ir_partition_free(p);
    }
    printf("%-26s %6u ops  TMR %6.1f ms  tile+propagate %6.2f ms  BP+MP+Z3 schedule %7.2f ms  lowering %7.2f ms"
           "  (medians of %d; AG %llu AR %llu RS %llu)\n",
           name, ir_pctx_num_ops(ctx), t_ctx * 1e3, bench_median(tp, repeat) * 1e3, bench_median(ts, repeat) * 1e3,
           bench_median(tl, repeat) * 1e3,
           repeat, (unsigned long long)ag, (unsigned long long)ar, (unsigned long long)rs);
    ap_free(bp_mp_z3);
    free(tp);
    free(ts);
    free(tl);
    ir_pctx_free(ctx);
    ir_module_free(m);
}

int main(int argc, char **argv)
{
    int repeat = 5, first = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: bench_partir [--repeat N] [FILE...]\n");
            return 0;
        } else {
            first = i;
            break;
        }
    }
    if (repeat < 1)
        repeat = 1;
    printf("mesh {batch:16, model:2}; schedule BP+MP+Z3 as in the paper's Table 2\n");
    if (first < argc) {
        for (int i = first; i < argc; i++) {
            char *text;
            size_t len;
            ap_error err;
            if (ap_read_file(argv[i], &text, &len, &err) < 0) {
                printf("%s: %s\n", argv[i], err.msg);
                continue;
            }
            bench(argv[i], text, repeat);
            ap_free(text);
        }
        return 0;
    }
    const char *configs[][2] = {{"T32 (32 layers)", "transformer --config t32"},
                                {"T32 with 80 layers", "transformer --config t32 layers=80"}};
    for (int i = 0; i < 2; i++) {
        char *text = bench_modelgen(configs[i][1]);
        bench(configs[i][0], text, repeat);
        ap_free(text);
    }
    return 0;
}
