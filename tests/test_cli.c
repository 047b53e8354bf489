/*
 * test_cli.c - the `autopart` command as a user runs it: exit statuses
 * (0 ok, 1 bad input or a failed check, 2 bad usage), errors on stderr
 * with FILE:LINE:COL, the JSON keys other tools read, and `check` passing
 * on a right partitioning and failing where the tolerance is not met.
 */
#include "testlib.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/wait.h>

typedef struct cli_run {
    int status; /* exit status, or -1 when killed */
    char *out, *err;
} cli_run;

static char *slurp_fd(int fd)
{
    ap_buf b;
    ap_buf_init(&b);
    char chunk[4096];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        ap_buf_put(&b, chunk, (size_t)n);
    ap_buf_putc(&b, '\0');
    close(fd);
    return ap_buf_take(&b, NULL);
}

/* Runs autopart with the NULL-terminated arguments after argv[0]. */
static cli_run run_cli(const char *const *args)
{
    char out_path[] = "/tmp/autopart-cli-out-XXXXXX", err_path[] = "/tmp/autopart-cli-err-XXXXXX";
    int out = mkstemp(out_path), err = mkstemp(err_path);
    ck_assert(out >= 0 && err >= 0);
    unlink(out_path);
    unlink(err_path);
    const char *argv[32] = {AP_CLI};
    int n = 1;
    for (; args[n - 1]; n++) {
        ck_assert_int_lt(n, 31);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(out, 1);
        dup2(err, 2);
        execv(AP_CLI, (char *const *)argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    cli_run r = {.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1, .out = slurp_fd(out), .err = slurp_fd(err)};
    return r;
}

static void cli_run_free(cli_run *r)
{
    ap_free(r->out);
    ap_free(r->err);
}

#define RUN(...) run_cli((const char *const[]){__VA_ARGS__, NULL})

static char *write_temp(const char *text, const char *suffix)
{
    char *path = malloc(64);
    snprintf(path, 64, "/tmp/autopart-cli-XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* A tiny transformer step, written once for the tests that need it. */
static char *tiny_path;

static void setup(void)
{
    char *text = tl_generate_text("transformer", "tiny", "batch=4");
    tiny_path = write_temp(text, ".mlir");
    ap_free(text);
}

static void teardown(void)
{
    unlink(tiny_path);
    free(tiny_path);
}

#define MEGATRON                                                                                       \
    "tile batch['inputs'] 0 batch; tile batch['targets'] 0 batch; propagate; "                          \
    "tile params['block_*']['attn']['w_qkv'] 2 model; tile params['block_*']['attn']['w_out'] 0 model; " \
    "tile params['block_*']['mlp']['w_up'] 1 model; tile params['block_*']['mlp']['b_up'] 0 model; "     \
    "tile params['block_*']['mlp']['w_down'] 0 model; propagate"

START_TEST(usage_errors_exit_2)
{
    cli_run r = run_cli((const char *const[]){NULL});
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "usage: autopart COMMAND"));
    ck_assert_ptr_nonnull(strstr(r.err, "check"));
    cli_run_free(&r);

    r = RUN("frobnicate");
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "autopart: error: unknown command 'frobnicate'"));
    cli_run_free(&r);

    r = RUN("check", tiny_path, "--mesh", "batch=2", "--schedule", "propagate", "--seed", "x1");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.err, "autopart check: error: --seed wants a non-negative integer, not 'x1'\n");
    cli_run_free(&r);

    r = RUN("check", tiny_path, "--mesh", "batch=2");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.err, "autopart check: error: --schedule (or --import) is required\n");
    cli_run_free(&r);

    r = RUN("check", "--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "f64 1e-9, f32 1e-4"));
    cli_run_free(&r);
}
END_TEST

START_TEST(bad_module_names_line_and_column)
{
    char *path = write_temp("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                            "  %0 = stablehlo.add %a, %b : tensor<2xf32>\n"
                            "  return %0 : tensor<2xf32>\n"
                            "}\n",
                            ".mlir");
    const char *cmds[] = {"parse", "apply", "check"};
    for (int i = 0; i < 3; i++) {
        cli_run r = i ? RUN(cmds[i], path, "--mesh", "x=2", "--schedule", "propagate") : RUN(cmds[i], path);
        ck_assert_int_eq(r.status, 1);
        char want[256];
        snprintf(want, sizeof want, "%s:2:26: error: use of undefined value '%%b'", path);
        ck_assert_msg(strstr(r.err, want) != NULL, "%s: %s", cmds[i], r.err);
        ck_assert_str_eq(r.out, "");
        cli_run_free(&r);
    }
    unlink(path);
    free(path);
}
END_TEST

START_TEST(apply_errors_are_clear)
{
    cli_run r = RUN("apply", tiny_path, "--mesh", "batch=2", "--schedule", "tile batch['inputs'] 0 model");
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "schedule:1:24: error: unknown mesh axis 'model' (the mesh has batch)\n");
    cli_run_free(&r);

    r = RUN("apply", tiny_path, "--mesh", "batch=2", "--schedule", "tile params['nope'] 0 batch");
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.err, "schedule:1:6: error: no argument is named 'params['nope']'\n");
    cli_run_free(&r);

    r = RUN("apply", tiny_path, "--mesh", "batch=0", "--schedule", "propagate");
    ck_assert_int_eq(r.status, 2);
    cli_run_free(&r);

    /* a mesh beyond the limits is refused where it is read, not at lowering */
    r = RUN("apply", tiny_path, "--mesh", "abcdefghijklmnopqrstuvwxyz12=2", "--schedule",
            "tile batch['inputs'] 0 abcdefghijklmnopqrstuvwxyz12", "--view", "spmd");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.err, "autopart apply: error: --mesh: mesh 'abcdefghijklmnopqrstuvwxyz12=2': axis name "
                            "'abcdefghijklmnopqrstuvwxyz12' has 28 characters; at most 24 at column 1\n");
    cli_run_free(&r);
    r = RUN("apply", tiny_path, "--mesh", "batch=512,model=256", "--schedule", "propagate", "--view", "spmd");
    ck_assert_int_eq(r.status, 2);
    ck_assert_str_eq(r.err, "autopart apply: error: --mesh: mesh 'batch=512,model=256': 131072 devices; a mesh has "
                            "at most 65536\n");
    cli_run_free(&r);
    /* and one at the limit lowers */
    r = RUN("apply", tiny_path, "--mesh", "abcdefghijklmnopqrstuvwx=2", "--schedule",
            "tile batch['inputs'] 0 abcdefghijklmnopqrstuvwx", "--view", "spmd");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "abcdefghijklmnopqrstuvwx=2") != NULL, "%.400s", r.out);
    cli_run_free(&r);
}
END_TEST

/* The JSON report carries the keys other tools and tests read. */
START_TEST(apply_json_report)
{
    cli_run r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--json", "--device",
                    "tpu_v3");
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    json_t *coll = json_object_get(j, "collectives");
    ck_assert_ptr_nonnull(coll);
    const char *kinds[] = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "collective_permute"};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(json_is_integer(json_object_get(coll, kinds[i])), "%s", kinds[i]);
    ck_assert_int_ge(json_integer_value(json_object_get(coll, "all_reduce")), 20);
    ck_assert(json_is_array(json_object_get(j, "shardings")));
    ck_assert(json_is_array(json_object_get(j, "conflicts")));
    json_t *cost = json_object_get(j, "cost");
    const char *ckeys[] = {"runtime_s", "compute_s", "comm_s", "peak_memory_bytes", "flops_per_device", "fits"};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(json_object_get(cost, ckeys[i]) != NULL, "cost.%s", ckeys[i]);
    ck_assert_int_eq(json_array_size(json_object_get(j, "tactics")), 2);
    /* a collective among the slowest ops says where: at the op of the
     * module it was inserted for (the lowering's own ops have no place) */
    json_t *top = json_array_get(json_object_get(cost, "top_ops"), 0);
    ck_assert(json_is_true(json_object_get(top, "collective")));
    ck_assert_int_gt(json_integer_value(json_object_get(top, "line")), 0);
    json_decref(j);
    cli_run_free(&r);
    /* for people, the same collective of each layer (one time) is one line
     * with its ranks and places; --verbose lists each */
    r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--view", "report");
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *slow = strstr(r.out, "slowest ops\n");
    ck_assert_ptr_nonnull(slow);
    ck_assert_msg(strstr(slow, "-2. ") && strstr(slow, "stablehlo.all_reduce for the ops at "), "%s", slow);
    cli_run_free(&r);
    r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--view", "report", "--verbose");
    ck_assert_msg(r.status == 0, "%s", r.err);
    slow = strstr(r.out, "slowest ops\n");
    ck_assert_ptr_nonnull(slow);
    ck_assert_msg(strstr(slow, "\n   1. ") && strstr(slow, "\n   2. ") && !strstr(slow, "-2. ") &&
                      strstr(slow, "stablehlo.all_reduce for the op at ") && !strstr(slow, "for the ops at"),
                  "%s", slow);
    cli_run_free(&r);
}
END_TEST

/* --framework pytorch-eager counts memory as eager PyTorch holds it (every
 * op's output a tensor): more than XLA's fused step; the same step time. */
static json_t *apply_cost(const char *framework)
{
    cli_run r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--json", "--framework",
                    framework);
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    json_t *cost = json_incref(json_object_get(j, "cost"));
    json_decref(j);
    cli_run_free(&r);
    return cost;
}

START_TEST(apply_framework)
{
    json_t *x = apply_cost("xla"), *e = apply_cost("pytorch-eager");
    json_int_t px = json_integer_value(json_object_get(x, "peak_memory_bytes"));
    json_int_t pe = json_integer_value(json_object_get(e, "peak_memory_bytes"));
    ck_assert_msg(pe > px, "eager %lld, xla %lld", (long long)pe, (long long)px);
    ck_assert(json_real_value(json_object_get(e, "runtime_s")) == json_real_value(json_object_get(x, "runtime_s")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "memory"), "framework")), "pytorch_eager");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(x, "memory"), "framework")), "xla");
    json_decref(x);
    json_decref(e);
    cli_run r = RUN("apply", tiny_path, "--mesh", "batch=2", "--schedule", "propagate", "--framework", "jax");
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--framework: unknown framework 'jax' (xla or pytorch_eager)"), "%s", r.err);
    cli_run_free(&r);
    /* the report says which framework counted the memory */
    r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--view", "report",
            "--framework", "pytorch_eager");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "\n  counted as      PyTorch eager\n"), "%s", r.out);
    cli_run_free(&r);
    r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--view", "report");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "\n  counted as      XLA buffer assignment\n"), "%s", r.out);
    cli_run_free(&r);
}
END_TEST

START_TEST(check_passes_and_fails)
{
    cli_run r = RUN("check", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "on 4 devices, seed 0"));
    ck_assert_ptr_nonnull(strstr(r.out, "grads['block_1']['mlp']['w_up']"));
    ck_assert_ptr_nonnull(strstr(r.out, "equivalent: all "));
    /* each tolerance says what it follows: here an f32 computation */
    ck_assert_ptr_nonnull(strstr(r.out, "tol follows"));
    ck_assert_ptr_nonnull(strstr(r.out, "0.0001    f32 "));
    /* and which difference is held to it: err, beside abs and rel */
    ck_assert_ptr_nonnull(strstr(r.out, "held to tol: err = largest |difference| / max(1, largest |value|"));
    ck_assert_ptr_nonnull(strstr(r.out, "loops abs rel       err"));
    /* and the rounding noise each result carries, from the fourth run,
     * made only where a verdict needs it: not for f32 results within
     * f32's tolerance (--noise below makes it) */
    ck_assert_ptr_nonnull(strstr(r.out, "  noise     "));
    ck_assert_ptr_nonnull(strstr(r.out, "  noise             not made: no verdict needed it (--noise makes it)\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "noise (the same measure of\nthe unpartitioned run rounded another way)"));
    /* and the f64 comparison: its largest error, tiny for a correct state */
    ck_assert_ptr_nonnull(strstr(r.out, "  f64 err"));
    ck_assert_ptr_nonnull(strstr(r.out, "\nf64 comparison (every float in f64, SPMD against unpartitioned): largest err "));
    cli_run_free(&r);
    r = RUN("check", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--json", "--noise");
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    json_error_t je0;
    json_t *j0 = json_loads(r.out, 0, &je0);
    ck_assert_msg(j0 != NULL, "%s", je0.text);
    ck_assert(json_is_object(json_object_get(json_object_get(j0, "runs"), "noise")));
    ck_assert(json_is_true(json_object_get(j0, "noise_ran")));
    size_t noisy = 0;
    for (size_t i = 0; i < json_array_size(json_object_get(j0, "results")); i++) {
        json_t *x = json_array_get(json_object_get(j0, "results"), i);
        ck_assert(json_is_number(json_object_get(x, "noise")));
        noisy += json_number_value(json_object_get(x, "noise")) > 0;
        /* what the tolerance would be without the noise floor, and whether
         * only the noise floor let the result pass */
        ck_assert(json_number_value(json_object_get(x, "tol_without_noise")) <=
                  json_number_value(json_object_get(x, "tol")));
        ck_assert(json_is_boolean(json_object_get(x, "within_noise")));
    }
    ck_assert_uint_gt(noisy, 0); /* f32 gradients do move */
    ck_assert(json_is_integer(json_object_get(j0, "within_noise")));
    json_t *f64 = json_object_get(j0, "f64");
    ck_assert(json_is_object(f64));
    ck_assert(json_number_value(json_object_get(f64, "error")) < 1e-12);
    ck_assert(json_number_value(json_object_get(f64, "tol")) == 1e-9);
    ck_assert(json_is_number(json_object_get(json_array_get(json_object_get(j0, "results"), 0), "f64_error")));
    ck_assert(json_is_object(json_object_get(json_object_get(j0, "runs"), "f64 spmd")));
    json_decref(j0);
    cli_run_free(&r);

    /* no float sum is exact once reordered: a tolerance of 1e-30 fails */
    r = RUN("check", tiny_path, "--mesh", "batch=2,model=2", "--schedule", MEGATRON, "--tol", "1e-30", "--json");
    ck_assert_int_eq(r.status, 1);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    ck_assert(json_is_false(json_object_get(j, "ok")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "devices")), 4);
    json_t *res = json_object_get(j, "results");
    ck_assert_int_gt(json_array_size(res), 40);
    json_t *first = json_array_get(res, 0);
    ck_assert(json_is_number(json_object_get(json_object_get(first, "spmd"), "max_abs")));
    ck_assert_str_eq(json_string_value(json_object_get(first, "tol_follows")), "--tol");
    json_decref(j);
    cli_run_free(&r);

    /* too big to run on the host: refused, not OOM-killed */
    r = RUN("check", tiny_path, "--mesh", "batch=2", "--schedule", "propagate", "--max-arg-bytes", "1K");
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "above the limit of"));
    cli_run_free(&r);
}
END_TEST

/* Whether text starts with prefix. */
static bool starts(const char *text, const char *prefix) { return strncmp(text, prefix, strlen(prefix)) == 0; }

#define ASSERT_RUN(r, want_status, stream, prefix)                                                             \
    do {                                                                                                       \
        ck_assert_msg((r).status == (want_status), "exit %d, want %d: %s", (r).status, want_status, (r).err); \
        ck_assert_msg(starts((r).stream, prefix), "want '%s...', got '%s'", prefix, (r).stream);             \
    } while (0)

/* Every subcommand speaks with one voice: `autopart CMD: error: ...` or
 * `FILE:LINE:COL: error: ...`, and exit 0 success, 1 bad input or failure,
 * 2 bad usage. */
START_TEST(every_command_one_voice)
{
    const char *cmds[] = {"parse", "apply", "check", "redistribute", "search"};
    char want[512];
    for (int i = 0; i < 5; i++) {
        cli_run r = RUN(cmds[i], "--frob");
        snprintf(want, sizeof want, "autopart %s: error: unknown option '--frob'", cmds[i]);
        ASSERT_RUN(r, 2, err, want);
        cli_run_free(&r);

        r = RUN(cmds[i], i == 0 ? "--format" : "--mesh");
        snprintf(want, sizeof want, "autopart %s: error: option '%s' needs a value", cmds[i],
                 i == 0 ? "--format" : "--mesh");
        ASSERT_RUN(r, 2, err, want);
        cli_run_free(&r);

        r = RUN(cmds[i], "--help");
        snprintf(want, sizeof want, "usage: autopart %s", cmds[i]);
        ASSERT_RUN(r, 0, out, want);
        ck_assert_str_eq(r.err, "");
        cli_run_free(&r);
    }

    /* the commands that read a module */
    char *empty = write_temp("\n  // nothing here\n", ".mlir");
    char *hlo = write_temp("HloModule m\n\nENTRY main {\n  ROOT p = f32[4] parameter(0)\n}\n", ".hlo");
    for (int i = 0; i < 3; i++) {
        const char *c = cmds[i];
        cli_run r = i ? RUN(c, "--mesh", "x=2", "--schedule", "propagate") : RUN(c);
        snprintf(want, sizeof want, "autopart %s: error: expected a FILE", c);
        ASSERT_RUN(r, 2, err, want);
        cli_run_free(&r);

        r = i ? RUN(c, "/nonexistent/m.mlir", "--mesh", "x=2", "--schedule", "propagate") : RUN(c, "/nonexistent/m.mlir");
        snprintf(want, sizeof want, "autopart %s: error: /nonexistent/m.mlir: ", c);
        ASSERT_RUN(r, 1, err, want);
        cli_run_free(&r);

        r = i ? RUN(c, empty, "--mesh", "x=2", "--schedule", "propagate") : RUN(c, empty);
        snprintf(want, sizeof want, "%s: error: the file is empty", empty);
        ASSERT_RUN(r, 1, err, want);
        ck_assert_str_eq(r.out, "");
        cli_run_free(&r);

        /* a forced format that does not match says which one would */
        r = i ? RUN(c, hlo, "--format", "stablehlo", "--mesh", "x=2", "--schedule", "propagate")
              : RUN(c, hlo, "--format", "stablehlo");
        snprintf(want, sizeof want, "%s:1:1: error: ", hlo);
        ASSERT_RUN(r, 1, err, want);
        ck_assert_msg(strstr(r.err, "try --format hlo") != NULL, "%s", r.err);
        cli_run_free(&r);
    }

    /* the commands that partition */
    char *sched = write_temp("tile batch['inputs'] 0 batch\ntile batch['inputs'] 9 batch\n", ".txt");
    for (int i = 1; i < 3; i++) {
        const char *c = cmds[i];
        cli_run r = RUN(c, tiny_path, "--mesh", "batch=4,", "--schedule", "propagate");
        snprintf(want, sizeof want, "autopart %s: error: --mesh: mesh 'batch=4,': expected AXIS=SIZE at column 9", c);
        ASSERT_RUN(r, 2, err, want);
        cli_run_free(&r);

        r = RUN(c, tiny_path, "--mesh", "batch=4", "--schedule", "");
        snprintf(want, sizeof want, "autopart %s: error: --schedule is empty", c);
        ASSERT_RUN(r, 2, err, want);
        cli_run_free(&r);

        /* a schedule file is named by its file */
        char at[300];
        snprintf(at, sizeof at, "@%s", sched);
        r = RUN(c, tiny_path, "--mesh", "batch=4", "--schedule", at);
        snprintf(want, sizeof want, "%s:2:", sched);
        ASSERT_RUN(r, 1, err, want);
        ck_assert_msg(strstr(r.err, ": error: ") != NULL, "%s", r.err);
        cli_run_free(&r);
    }

    /* devices: the help and the error name the same registry */
    cli_run r = RUN("apply", tiny_path, "--mesh", "batch=4", "--schedule", "propagate", "--view", "report", "--device",
                    "tpu_v9");
    ASSERT_RUN(r, 2, err, "autopart apply: error: --device: unknown device \"tpu_v9\"");
    ck_assert_msg(strstr(r.err, "h100_sxm (or h100)") != NULL, "%s", r.err);
    cli_run_free(&r);
    r = RUN("apply", "--help");
    ck_assert_msg(strstr(r.out, "h100_sxm (or h100)") != NULL, "%s", r.out);
    cli_run_free(&r);

    /* redistribute: its mesh and element size are usage; its types are input */
    r = RUN("redistribute", "--mesh", "x=2,", "--from", "[2{x}4]", "--to", "[4]");
    ASSERT_RUN(r, 2, err, "autopart redistribute: error: --mesh: ");
    cli_run_free(&r);
    r = RUN("redistribute", "--mesh", "x=2", "--from", "[2{x}4]", "--to", "[4]", "--elem-bytes", "q");
    ASSERT_RUN(r, 2, err, "autopart redistribute: error: --elem-bytes wants a positive integer, not 'q'");
    cli_run_free(&r);
    r = RUN("redistribute", "--mesh", "x=2", "--from", "[2{x}4]", "--to", "[4");
    ASSERT_RUN(r, 1, err, "--to:1:3: error: ");
    cli_run_free(&r);
    r = RUN("redistribute", "--mesh", "x=2");
    ASSERT_RUN(r, 2, err, "autopart redistribute: error: --mesh, --from and --to are required");
    cli_run_free(&r);

    /* sizes in errors come in a unit that fits */
    r = RUN("check", tiny_path, "--mesh", "batch=2", "--schedule", "propagate", "--max-arg-bytes", "1K");
    ASSERT_RUN(r, 1, err, "autopart check: error: the arguments of @main take ");
    ck_assert_msg(strstr(r.err, "above the limit of 1.00 KiB") != NULL, "%s", r.err);
    cli_run_free(&r);

    unlink(empty);
    unlink(hlo);
    unlink(sched);
    free(empty);
    free(hlo);
    free(sched);
}
END_TEST

/* `autopart search`: its usage errors, its JSON, and a schedule that
 * `apply` takes back at the same cost. */
START_TEST(search_round_trip)
{
    cli_run r = RUN("search", tiny_path, "--mesh", "batch=2,model=2", "--axes", "rows");
    ASSERT_RUN(r, 2, err, "autopart search: error: --axes: the mesh has no axis 'rows'");
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--mesh", "batch=2", "--memory-limit", "lots");
    ASSERT_RUN(r, 2, err, "autopart search: error: --memory-limit wants bytes");
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--mesh", "batch=2", "--memory-margin", "1");
    ASSERT_RUN(r, 2, err, "autopart search: error: --memory-margin wants a share");
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--mesh", "batch=2", "--episodes", "0");
    ASSERT_RUN(r, 2, err, "autopart search: error: --episodes wants a positive count, not '0'");
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--mesh", "batch=2", "--threads", "many");
    ASSERT_RUN(r, 2, err, "autopart search: error: --threads wants 1 to 256");
    cli_run_free(&r);
    r = RUN("search", "--mesh", "batch=2");
    ASSERT_RUN(r, 2, err, "autopart search: error: expected a FILE");
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--mesh", "batch=2", "--hints", "fix params*\nsplat x");
    ASSERT_RUN(r, 1, err, "hints:2:1: error: unknown hint 'splat'");
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--mesh", "batch=2", "--manual", "tile nothing 0 batch");
    ASSERT_RUN(r, 1, err, "schedule:1:6: error: ");
    cli_run_free(&r);

    r = RUN("search", tiny_path, "--mesh", "batch=2,model=2", "--manual", "manual batch batch['inputs']=0",
            "--device", "tpu_v3", "--memory-limit", "none", "--episodes", "60", "--threads", "2", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, ""); /* not a terminal: no progress line */
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    const char *keys[] = {"schedule", "cost", "collectives", "episodes", "episodes_per_s", "best_episode", "wall_s",
                          "decisions", "explanation"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(json_object_get(j, keys[i]) != NULL, "no \"%s\"", keys[i]);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "episodes")), 60);
    double runtime = json_real_value(json_object_get(json_object_get(j, "cost"), "runtime_s"));
    json_int_t peak = json_integer_value(json_object_get(json_object_get(j, "cost"), "peak_memory_bytes"));
    char *sched = write_temp(json_string_value(json_object_get(j, "schedule")), ".txt");
    json_decref(j);
    cli_run_free(&r);
    char at[300];
    snprintf(at, sizeof at, "@%s", sched);
    r = RUN("apply", tiny_path, "--mesh", "batch=2,model=2", "--schedule", at, "--device", "tpu_v3", "--view", "report",
            "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    j = json_loads(r.out, 0, &je);
    ck_assert(j != NULL);
    ck_assert(json_real_value(json_object_get(json_object_get(j, "cost"), "runtime_s")) == runtime);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "cost"), "peak_memory_bytes")), peak);
    json_decref(j);
    cli_run_free(&r);

    /* the text form: decisions, schedule, shardings, report, why */
    r = RUN("search", tiny_path, "--mesh", "batch=2,model=2", "--episodes", "30");
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *parts[] = {"decisions: ", "schedule (for autopart apply --schedule):", "shardings:", "cost estimate:",
                           "why this answer:"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ck_assert_msg(strstr(r.out, parts[i]) != NULL, "no '%s' in:\n%s", parts[i], r.out);
    cli_run_free(&r);
    unlink(sched);
    free(sched);
}
END_TEST

/* --devices: the search chooses the mesh; bad counts and combinations are
 * refused with the reason */
START_TEST(search_devices)
{
    static const struct {
        const char *a, *b, *c, *d;
        int status;
        const char *want;
    } bad[] = {{"--devices", "0", NULL, NULL, 2, "--devices: 0; a mesh has at least one device"},
               {"--devices", "1", NULL, NULL, 2, "--devices: 1 device leaves nothing to partition"},
               {"--devices", "2147483648", NULL, NULL, 2, "--devices: 2147483648 is more than 2^20"},
               {"--devices", "four", NULL, NULL, 2, "--devices wants a number of devices, not 'four'"},
               {"--devices", "4", "--mesh", "batch=2", 2, "--devices and --mesh are exclusive"},
               {"--devices", "4", "--import", NULL, 2, "--import reads shardings over a mesh"},
               {"--devices", "4", "--axes", "model", 2, "--axes with --devices needs --axes-names"},
               {"--axes-names", "data", "--mesh", "batch=2", 2, "--axes-names goes with --devices"},
               {"--devices", "4", "--axes-names", "a,a", 2, "'a' is given twice"},
               {"--devices", "7919", NULL, NULL, 1, "no mesh of 7919 devices"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"search", tiny_path, bad[i].a, bad[i].b, bad[i].c, bad[i].d, NULL};
        cli_run r = run_cli(args);
        ck_assert_msg(r.status == bad[i].status, "%s: exit %d, want %d: %s", bad[i].b, r.status, bad[i].status, r.err);
        ck_assert_msg(starts(r.err, "autopart search: error: ") && strstr(r.err, bad[i].want), "want '%s' in '%s'",
                      bad[i].want, r.err);
        cli_run_free(&r);
    }
    /* 60 episodes: a root pass on one mesh of the two; the other is named
     * as not tried */
    cli_run r = RUN("search", tiny_path, "--devices", "4", "--episodes", "60", "--device", "tpu_v3");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "\nmesh: ") && strstr(r.out, "meshes of 4 devices tried (1 of the 2 ") &&
                      strstr(r.out, "not tried, the budget spent on those before them (1): 2x2\n"),
                  "%s", r.out);
    cli_run_free(&r);
    /* a limit nothing meets: the lowest peak is the chosen mesh's (the
     * meshes go on by where their searches lead, not by their peaks) */
    r = RUN("search", tiny_path, "--devices", "4", "--episodes", "60", "--device", "tpu_v3", "--memory-limit", "1KiB");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "NOTHING FOUND FITS the memory limit: this is the lowest-memory schedule found on the "
                                "mesh chosen (each mesh's lowest: see why this answer)\n") &&
                      strstr(r.out, "nothing found fits; this is the lowest-memory schedule of the mesh chosen") &&
                      strstr(r.out, " per device, DOES NOT FIT the 1.00 KiB limit (the device's HBM: 16.00 GiB)\n"),
                  "%s", r.out);
    cli_run_free(&r);
    r = RUN("search", tiny_path, "--devices", "4", "--axes-names", "data,model", "--manual",
            "manual data batch['inputs']=0", "--episodes", "40", "--json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    const char *mesh = json_string_value(json_object_get(j, "mesh"));
    ck_assert_msg(mesh && !strncmp(mesh, "data=", 5) && strstr(mesh, ",model="), "%s", mesh ? mesh : "(none)");
    /* every mesh the program can use is accounted for: tried (a row with
     * its figures) or named as not tried */
    const json_t *ex = json_object_get(j, "explanation");
    size_t tried = json_array_size(json_object_get(j, "meshes"));
    size_t untried = json_array_size(json_object_get(ex, "meshes_untried"));
    ck_assert(tried >= 1);
    ck_assert_int_eq((json_int_t)(tried + untried), json_integer_value(json_object_get(ex, "meshes_considered")));
    json_decref(j);
    cli_run_free(&r);
}
END_TEST

/* What people read: a schedule with one action per value prints one line
 * per run of one action, over a glob that names exactly those values, a
 * `propagate` after it on its line (the folded text applies as the
 * original does), and the shardings one row per pattern, those that tile
 * nothing one paragraph; --verbose keeps every value. */
START_TEST(listings_fold)
{
    char *text = tl_generate_text("transformer", "tiny", "layers=4");
    char *path = write_temp(text, ".mlir");
    ap_free(text);
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "tile batch['inputs'] 0 batch\npropagate\n");
    static const char *const heads[] = {"params", "opt_state.mu", "opt_state.nu"};
    for (int h = 0; h < 3; h++)
        for (int l = 0; l < 4; l++)
            ap_buf_printf(&b, "tile %s['block_%d']['mlp']['w_up'] 1 model\n", heads[h], l);
    ap_buf_puts(&b, "propagate\n");
    ap_buf_puts(&b, "tile params['block_0']['attn']['w_out'] 0 model\n"   /* a run of one layer: */
                    "tile params['block_1']['attn']['w_out'] 0 model\n"); /* too short to fold */
    ap_buf_puts(&b, "propagate\n");
    char *sched = write_temp(b.data, ".txt"), at[80];
    snprintf(at, sizeof at, "@%s", sched);

    cli_run r = RUN("apply", path, "--mesh", "batch=2,model=2", "--schedule", at, "--view", "shardings");
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *want[] = {"\ntile batch['inputs'] 0 batch; propagate\n",
                          "\ntile *['block_*']['mlp']['w_up'] 1 model; propagate ", "# 12 values\n",
                          "\ntile params['block_0']['attn']['w_out'] 0 model\n",
                          "\ntile params['block_1']['attn']['w_out'] 0 model; propagate\n",
                          "{params,opt_state.mu,opt_state.nu}['block_{0..3}']['mlp']['w_up']", " x12 ",
                          "argument  replicated x"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(r.out, want[i]), "no '%s' in:\n%s", want[i], r.out);
    ck_assert_msg(!strstr(r.out, "opt_state.mu['block_2']"), "%s", r.out);
    char *folded = write_temp(strstr(r.out, "\nschedule:\n") + strlen("\nschedule:\n"), ".txt");
    cli_run_free(&r);

    r = RUN("apply", path, "--mesh", "batch=2,model=2", "--schedule", at, "--view", "shardings", "--verbose");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "opt_state.mu['block_2']['mlp']['w_up']") && strstr(r.out, b.data), "%s", r.out);
    cli_run_free(&r);

    /* The folded schedule (runs over globs, `ACTION; propagate`) gives the
     * same shardings as the original. */
    snprintf(at, sizeof at, "@%s", folded);
    r = RUN("apply", path, "--mesh", "batch=2,model=2", "--schedule", at, "--view", "shardings", "--json");
    cli_run s = RUN("apply", path, "--mesh", "batch=2,model=2", "--schedule", b.data, "--view", "shardings", "--json");
    ck_assert_msg(r.status == 0 && s.status == 0, "%s%s", r.err, s.err);
    ck_assert_str_eq(r.out, s.out);
    cli_run_free(&r);
    cli_run_free(&s);

    /* search: the schedule with the search's part marked, one section. */
    r = RUN("search", path, "--mesh", "batch=2,model=2", "--manual", "tile batch['inputs'] 0 batch; propagate",
            "--axes", "model", "--episodes", "30");
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *head = "schedule (for autopart apply --schedule):\ntile batch['inputs'] 0 batch; propagate\n# ",
               *at_head = strstr(r.out, head);
    ck_assert_msg(at_head, "%s", r.out);
    at_head += strlen(head);
    const char *found = "found by the search:\n", *none = "the search found nothing better than the start\n";
    ck_assert_msg(!strncmp(at_head, found, strlen(found)) || !strncmp(at_head, none, strlen(none)), "%s", r.out);
    ck_assert_msg(!strstr(r.out, "actions found:"), "%s", r.out);
    cli_run_free(&r);
    ap_buf_free(&b);
    unlink(path);
    unlink(sched);
    unlink(folded);
    free(path);
    free(sched);
    free(folded);
}
END_TEST

START_TEST(redistribute_example)
{
    cli_run r = RUN("redistribute", "--mesh", "x=4,y=6", "--from", "[3{x}12, 2{y}12]", "--to", "[2{y}12, 3{x}12]");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "all_to_all"));
    cli_run_free(&r);
}
END_TEST

/* Calls are inlined before partitioning, so a schedule's %N counts the
 * values of the inlined function: `tile %2 1 x` written against `autopart
 * parse` (where %2 is the dot, 8x6) tiled the negate (8x4) on its dim 1,
 * silently.  `parse --inline` prints the function as partitioned, and apply
 * and check say so when calls were inlined and the schedule names a %N. */
START_TEST(numbered_values_after_inlining)
{
    char *path = write_temp("func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4x6xf32>) -> tensor<8x6xf32> {\n"
                            "  %0 = call @f(%arg0) : (tensor<8x4xf32>) -> tensor<8x4xf32>\n"
                            "  %1 = stablehlo.negate %0 : tensor<8x4xf32>\n"
                            "  %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0] : "
                            "(tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>\n"
                            "  return %2 : tensor<8x6xf32>\n"
                            "}\n"
                            "func.func private @f(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {\n"
                            "  %0 = stablehlo.tanh %x : tensor<8x4xf32>\n"
                            "  %1 = stablehlo.exponential %0 : tensor<8x4xf32>\n"
                            "  return %1 : tensor<8x4xf32>\n"
                            "}\n",
                            ".mlir");
    cli_run r = RUN("parse", path, "--inline");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "    %2 = stablehlo.negate %1 : tensor<8x4xf32>\n    %3 = stablehlo.dot_general"),
                  "%s", r.out);
    cli_run_free(&r);
    r = RUN("parse", path, "--func", "f");
    ck_assert_int_eq(r.status, 2);
    cli_run_free(&r);
    char note[512];
    snprintf(note, sizeof note,
             "%s: note: @main calls other functions (1 call), inlined before partitioning: %%N in the schedule counts "
             "the values of the inlined @main, as `autopart parse --inline` prints it, not as the module is written\n",
             path);
    r = RUN("apply", path, "--mesh", "x=2", "--schedule", "tile %2 1 x; propagate", "--view", "core");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, note);
    ck_assert_msg(strstr(r.out, "slice 1 %v2[%rx]"), "%s", r.out); /* the negate's, as the note says */
    cli_run_free(&r);
    r = RUN("check", path, "--mesh", "x=2", "--schedule", "tile %3 1 x; propagate");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, note);
    cli_run_free(&r);
    /* a %N the inlined function does not have is refused naming that
     * numbering (the message named `autopart parse`'s) */
    r = RUN("check", path, "--mesh", "x=2", "--schedule", "tile %9 0 x; propagate");
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "schedule:1:6: error: no value '%9' that the partitioning of @main sees (as `autopart "
                                "parse --inline` numbers it;"),
                  "%s", r.err);
    cli_run_free(&r);
    /* no %N named (an argument, a %N in a comment): no note */
    r = RUN("check", path, "--mesh", "x=2", "--schedule", "tile %arg0 0 x # not %2\npropagate");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    cli_run_free(&r);
    unlink(path);
    free(path);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, usage_errors_exit_2);
    tcase_add_test(tc, bad_module_names_line_and_column);
    tcase_add_test(tc, apply_errors_are_clear);
    tcase_add_test(tc, apply_json_report);
    tcase_add_test(tc, apply_framework);
    tcase_add_test(tc, check_passes_and_fails);
    tcase_add_test(tc, redistribute_example);
    tcase_add_test(tc, every_command_one_voice);
    tcase_add_test(tc, search_round_trip);
    tcase_add_test(tc, search_devices);
    tcase_add_test(tc, listings_fold);
    tcase_add_test(tc, numbered_values_after_inlining);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tl_run(cli_suite()); }
