/*
 * bench/partir.c - speed of the PartIR core on model-zoo training steps:
 * building the TMR, one tile + propagate, and a whole BP+MP+Z3 schedule
 * with lowering to SPMD.  Generates the modules with tests/models/modelgen
 * (T32, and a T32 variant with 80 layers, about 30k ops).
 *
 *   bench_partir [--repeat N] [FILE...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ir.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *generate(const char *args)
{
    char path[] = "/tmp/autopart-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/tests/models/modelgen' %s -q -o '%s'", AP_SOURCE_DIR, args, path);
    char *text = NULL;
    size_t len;
    ap_error err;
    if (system(cmd) == 0)
        ap_read_file(path, &text, &len, &err);
    unlink(path);
    return text;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define BP "manual batch batch['inputs']=0 batch['targets']=0\n"
#define MP "manual model params['block_*']['attn']['w_qkv']=2 params['block_*']['attn']['w_out']=0 " \
           "params['block_*']['mlp']['w_up']=1 params['block_*']['mlp']['b_up']=0 params['block_*']['mlp']['w_down']=0\n"
#define Z3 "manual batch params['embed']=first_divisible params['*']['w_qkv']=first_divisible " \
           "params['*']['w_out']=first_divisible params['*']['w_up']=first_divisible params['*']['w_down']=first_divisible " \
           "opt_state.*['embed']=first_divisible opt_state.*['w_qkv']=first_divisible opt_state.*['w_out']=first_divisible " \
           "opt_state.*['w_up']=first_divisible opt_state.*['w_down']=first_divisible\n"

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
    double t0 = now();
    if (ir_pctx_new(m, f, &mesh, &ctx, &err) < 0) {
        printf("%s: %s\n", name, err.msg);
        ir_module_free(m);
        return;
    }
    double t_ctx = now() - t0;
    double *tp = calloc((size_t)repeat, sizeof *tp), *ts = calloc((size_t)repeat, sizeof *ts),
           *tl = calloc((size_t)repeat, sizeof *tl);
    uint64_t ag = 0, ar = 0, rs = 0;
    for (int r = 0; r < repeat; r++) {
        ir_partition *p;
        ir_partition_new(ctx, &p, &err);
        /* one tile + propagate: the batch input, then propagation */
        double a = now();
        ir_schedule_apply(p, "tile batch['inputs'] 0 batch\npropagate", &err);
        tp[r] = now() - a;
        ir_partition_free(p);
        ir_partition_new(ctx, &p, &err);
        a = now();
        if (ir_schedule_apply(p, BP MP Z3, &err) < 0)
            printf("schedule: %s\n", err.msg);
        ts[r] = now() - a;
        ir_lowered lw;
        a = now();
        if (ir_lower(p, &lw, &err) < 0)
            printf("lower: %s\n", err.msg);
        tl[r] = now() - a;
        ag = lw.count[IR_COLL_ALL_GATHER];
        ar = lw.count[IR_COLL_ALL_REDUCE];
        rs = lw.count[IR_COLL_REDUCE_SCATTER];
        ir_lowered_free(&lw);
        ir_partition_free(p);
    }
    qsort(tp, (size_t)repeat, sizeof *tp, cmp_double);
    qsort(ts, (size_t)repeat, sizeof *ts, cmp_double);
    qsort(tl, (size_t)repeat, sizeof *tl, cmp_double);
    printf("%-26s %6u ops  TMR %6.1f ms  tile+propagate %6.2f ms  BP+MP+Z3 schedule %7.2f ms  lowering %7.2f ms"
           "  (medians of %d; AG %llu AR %llu RS %llu)\n",
           name, ir_pctx_num_ops(ctx), t_ctx * 1e3, tp[repeat / 2] * 1e3, ts[repeat / 2] * 1e3, tl[repeat / 2] * 1e3,
           repeat, (unsigned long long)ag, (unsigned long long)ar, (unsigned long long)rs);
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
        char *text = generate(configs[i][1]);
        if (!text) {
            printf("%s: modelgen failed\n", configs[i][0]);
            continue;
        }
        bench(configs[i][0], text, repeat);
        ap_free(text);
    }
    return 0;
}
