/*
 * bench/interp.c - speed of the reference interpreter: one training step
 * of the model zoo's tiny transformer (f32 and f64), and an 8-device SPMD
 * run of a hand-written tensor- and data-parallel MLP block with its
 * collectives, next to the unpartitioned block; and `autopart check` (three
 * runs and their comparison) of the tiny transformer partitioned BP+MP+Z3
 * over 8 devices.
 *
 *   bench_interp [--repeat R] [--model NAME --config CONFIG]
 *
 * Prints milliseconds per run (median of R), ops evaluated per run and the
 * op rate.  The interpreter is a checking tool: naive loops, small shapes.
 */
#include "bench.h"

static ir_module *parse_text(const char *text, size_t len, const char *name)
{
    ir_module *m;
    ap_error err;
    if (ir_parse(text, len, name, IR_FMT_AUTO, &m, &err) < 0)
        bench_die(name, &err);
    return m;
}

static ir_module *generate(const char *model, const char *config, const char *extra)
{
    char args[256];
    snprintf(args, sizeof args, "%s --config %s %s", model, config, extra);
    return bench_modelgen_module(args);
}

/* Random arguments; Adam's second moments non-negative. */
static ir_tensor **random_args(const ir_op *f)
{
    uint32_t n = ir_func_num_args(f);
    ir_tensor **args = calloc(n ? n : 1, sizeof *args);
    for (uint32_t i = 0; i < n; i++) {
        const char *name = ir_func_arg_name(f, i);
        ap_error err;
        int rc = name && !strncmp(name, "opt_state.nu", 12)
                     ? ir_tensor_random_range(ir_func_arg(f, i)->type, 1 + i, 0, 1, &args[i], &err)
                     : ir_tensor_random(ir_func_arg(f, i)->type, 1 + i, &args[i], &err);
        if (rc < 0)
            bench_die("random argument", &err);
    }
    return args;
}

static void free_args(ir_tensor **args, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ir_tensor_free(args[i]);
    free(args);
}

typedef int (*run_fn)(const ir_module *, const ir_op *, const ir_tensor *const *, uint32_t, ir_tensor ***, uint32_t *,
                      const ir_interp_opts *, ap_error *);

/* Median time of `repeat` runs and the ops evaluated by one. */
static double time_runs(run_fn run, const ir_module *m, const ir_op *f, ir_tensor **args, int repeat, uint64_t *ops,
                        ir_tensor ***keep, uint32_t *n_keep)
{
    double *t = malloc(sizeof *t * (size_t)repeat);
    for (int r = 0; r < repeat; r++) {
        uint64_t count = 0;
        ir_interp_opts o = {.ops_evaluated = &count};
        ir_tensor **res;
        uint32_t n;
        ap_error err;
        double t0 = bench_now();
        if (run(m, f, (const ir_tensor *const *)args, ir_func_num_args(f), &res, &n, &o, &err) < 0)
            bench_die("run", &err);
        t[r] = bench_now() - t0;
        *ops = count;
        if (keep && r == repeat - 1) {
            *keep = res;
            *n_keep = n;
        } else {
            ir_tensors_free(res, n);
        }
    }
    double med = bench_median(t, repeat);
    free(t);
    return med;
}

static void bench_model(const char *model, const char *config, const char *extra, int repeat)
{
    double t0 = bench_now();
    ir_module *m = generate(model, config, extra);
    double tgen = bench_now() - t0;
    ir_op *f = ir_module_entry(m);
    ir_tensor **args = random_args(f);
    uint64_t ops = 0;
    time_runs(ir_interp_run, m, f, args, 1, &ops, NULL, NULL); /* warm-up */
    double t = time_runs(ir_interp_run, m, f, args, repeat, &ops, NULL, NULL);
    printf("%-12s %-6s %-10s %8.2f ms/step  %8llu ops/step  %7.2f Mops/s  (generate+parse %.0f ms)\n", model, config,
           extra[0] ? extra : "f32", 1e3 * t, (unsigned long long)ops, (double)ops / t * 1e-6, 1e3 * tgen);
    free_args(args, ir_func_num_args(f));
    ir_module_free(m);
}

/* One MLP block on mesh batch=4, model=2: x rows along batch, w1 columns
 * and w2 rows along model (Megatron); the partial product is all-reduced
 * along model, then the rows all-gathered along batch. */
#define SPMD_MLP                                                                                                       \
    "module @mlp attributes {mhlo.num_partitions = 8 : i32, autopart.mesh = \"batch=4,model=2\"} {\n"                  \
    "  func.func public @main(%x: tensor<16x128xf32> {autopart.layout = [[\"batch\"], []]}, %w1: tensor<128x128xf32> " \
    "{autopart.layout = [[], [\"model\"]]}, %w2: tensor<128x128xf32> {autopart.layout = [[\"model\"], []]}) -> "       \
    "(tensor<64x128xf32> {autopart.layout = [[], []]}) {\n"                                                            \
    "    %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] :\n"                                         \
    "        (tensor<16x128xf32>, tensor<128x128xf32>) -> tensor<16x128xf32>\n"                                        \
    "    %z = stablehlo.constant dense<0.0> : tensor<16x128xf32>\n"                                                    \
    "    %r = stablehlo.maximum %h, %z : tensor<16x128xf32>\n"                                                         \
    "    %y = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] :\n"                                         \
    "        (tensor<16x128xf32>, tensor<128x128xf32>) -> tensor<16x128xf32>\n"                                        \
    "    %s = \"stablehlo.all_reduce\"(%y) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, "       \
    "replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>, use_global_device_ids}> ({\n"         \
    "      ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"                                                                  \
    "        %t = stablehlo.add %a, %b : tensor<f32>\n"                                                                \
    "        stablehlo.return %t : tensor<f32>\n"                                                                      \
    "    }) : (tensor<16x128xf32>) -> tensor<16x128xf32>\n"                                                            \
    "    %g = \"stablehlo.all_gather\"(%s) <{all_gather_dim = 0 : i64, channel_handle = "                              \
    "#stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : "         \
    "tensor<2x4xi64>, use_global_device_ids}> : (tensor<16x128xf32>) -> tensor<64x128xf32>\n"                          \
    "    return %g : tensor<64x128xf32>\n"                                                                             \
    "  }\n"                                                                                                            \
    "}\n"

#define FULL_MLP                                                                                                       \
    "func.func @main(%x: tensor<64x128xf32>, %w1: tensor<128x256xf32>, %w2: tensor<256x128xf32>) -> "                  \
    "tensor<64x128xf32> {\n"                                                                                           \
    "  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] :\n"                                           \
    "      (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>\n"                                          \
    "  %z = stablehlo.constant dense<0.0> : tensor<64x256xf32>\n"                                                      \
    "  %r = stablehlo.maximum %h, %z : tensor<64x256xf32>\n"                                                           \
    "  %y = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] :\n"                                           \
    "      (tensor<64x256xf32>, tensor<256x128xf32>) -> tensor<64x128xf32>\n"                                          \
    "  return %y : tensor<64x128xf32>\n"                                                                               \
    "}\n"

static void bench_spmd(int repeat)
{
    ir_module *sm = parse_text(SPMD_MLP, strlen(SPMD_MLP), "spmd_mlp"),
              *fm = parse_text(FULL_MLP, strlen(FULL_MLP), "mlp");
    ir_op *sf = ir_module_entry(sm), *ff = ir_module_entry(fm);
    ir_tensor **args = random_args(ff), **sres, **fres;
    uint32_t ns, nf;
    uint64_t sops, fops;
    time_runs(ir_spmd_run, sm, sf, args, 1, &sops, NULL, NULL);
    double ts = time_runs(ir_spmd_run, sm, sf, args, repeat, &sops, &sres, &ns);
    double tf = time_runs(ir_interp_run, fm, ff, args, repeat, &fops, &fres, &nf);
    ir_tensor_diff d;
    ap_error err;
    if (ir_tensor_compare(sres[0], fres[0], &d, &err) < 0)
        bench_die("compare", &err);
    printf("spmd mlp     8 dev  batch=4,model=2  %8.2f ms/run  %8llu ops/run (all devices)  unpartitioned %.2f ms  "
           "max |diff| %.2g\n",
           1e3 * ts, (unsigned long long)sops, 1e3 * tf, d.max_abs);
    ir_tensors_free(sres, ns);
    ir_tensors_free(fres, nf);
    free_args(args, ir_func_num_args(ff));
    ir_module_free(sm);
    ir_module_free(fm);
}

static void bench_check(int repeat)
{
    ir_module *m = generate("transformer", "tiny", "batch=4");
    ir_op *f = ir_module_entry(m);
    ir_mesh mesh;
    ir_pctx *c;
    ir_partition *p;
    ap_error err;
    char *sched = bench_schedule("bp+mp+z3");
    if (ir_mesh_parse("batch=4,model=2", &mesh, &err) < 0 || ir_inline_calls(m, f, &err) < 0 ||
        ir_pctx_new(m, f, &mesh, &c, &err) < 0 || ir_partition_new(c, &p, &err) < 0 ||
        ir_schedule_apply(p, sched, &err) < 0)
        bench_die("check setup", &err);
    ap_free(sched);
    double *t = malloc(sizeof *t * (size_t)repeat);
    ir_check_report r = {0};
    for (int i = 0; i < repeat; i++) {
        ir_check_report_free(&r);
        double t0 = bench_now();
        if (ir_check(p, NULL, &r, &err) < 0)
            bench_die("check", &err);
        t[i] = bench_now() - t0;
    }
    double worst = 0;
    for (uint32_t j = 0; j < r.n_results; j++)
        worst = r.results[j].error[1] > worst ? r.results[j].error[1] : worst;
    printf("check        tiny   BP+MP+Z3   8 dev %8.2f ms/check (unpartitioned %.2f, loops %.2f, spmd %.2f ms; "
           "%llu + %llu + %llu ops)  %s, worst error %.2g\n",
           1e3 * bench_median(t, repeat), 1e3 * r.seconds[IR_CHECK_REF], 1e3 * r.seconds[IR_CHECK_LOOPS],
           1e3 * r.seconds[IR_CHECK_SPMD], (unsigned long long)r.ops[IR_CHECK_REF],
           (unsigned long long)r.ops[IR_CHECK_LOOPS], (unsigned long long)r.ops[IR_CHECK_SPMD],
           r.ok ? "equivalent" : "NOT EQUIVALENT", worst);
    free(t);
    ir_check_report_free(&r);
    ir_partition_free(p);
    ir_pctx_free(c);
    ir_module_free(m);
}

int main(int argc, char **argv)
{
    int repeat = 5;
    const char *model = NULL, *config = "tiny";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
        else {
            fprintf(stderr, "usage: bench_interp [--repeat R] [--model NAME --config CONFIG]\n");
            return 2;
        }
    }
    if (repeat < 1)
        repeat = 1;
    if (model) {
        bench_model(model, config, "", repeat);
        return 0;
    }
    bench_model("transformer", "tiny", "", repeat);
    bench_model("transformer", "tiny", "dtype=f64", repeat);
    bench_spmd(repeat);
    bench_check(repeat);
    return 0;
}
