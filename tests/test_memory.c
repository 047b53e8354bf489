/*
 * test_memory.c - the peak memory and the fusion of the cost model
 * (costmodel/graph.c) on programs whose answer is known: a donated Adam
 * step counts each parameter once, a chain of elementwise ops on a 1 GiB
 * tensor peaks at 2 GiB (argument and result), an in-place
 * dynamic_update_slice into a buffer that dies adds nothing (and copies
 * when the old value is read later), an optimization barrier keeps what it
 * holds and its readers wait for it, the fusion rules on small programs (what becomes one kernel and
 * what HBM traffic it has), the order the peak is counted in (XLA's list
 * and DFS schedulers), never above the order written, on random programs,
 * and the breakdown at the peak summing to the peak on random programs,
 * the zoo's models and the corpus; an output returned without donation
 * held in an allocation of its own all along, and what XLA places in it.
 */
#include "cost.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#define GiB 1073741824.0

static ir_module *parse_ok(const char *text)
{
    char msg[1024];
    ir_module *m = tl_parse(text, "test.mlir", msg, sizeof msg);
    ck_assert_msg(m != NULL, "parse failed: %s\n%s", msg, text);
    return m;
}

static cost_device h100(void)
{
    cost_device d;
    ap_error err;
    ck_assert_msg(cost_device_lookup("h100", &d, &err) == 0, "%s", err.msg);
    return d;
}

static cost_report report_as(const char *text, cost_framework fw)
{
    ir_module *m = parse_ok(text);
    cost_report r;
    ap_error err;
    cost_device d = h100();
    cost_options o = {.top_k = COST_TOP_MAX, .framework = fw};
    ck_assert_msg(cost_estimate(m, &d, &o, &r, &err) == 0, "estimate: %s", err.msg);
    ir_module_free(m);
    return r;
}

static cost_report report_of(const char *text) { return report_as(text, COST_FW_XLA); }

static int64_t kinds_sum(const cost_report *r)
{
    int64_t s = 0;
    for (int k = 0; k < COST_MEM_COUNT; k++)
        s += r->memory.kinds[k];
    return s;
}

/* ------------------------------------------------------------ buffers */

/* Adam on three 1 GiB parameters: params, moments m and v, gradients g
 * (not donated).  Donated, every updated parameter and moment is written
 * into its own argument's buffer: the peak is the arguments. */
#define ADAM_FMT                                                                                              \
    "func.func public @main(%%p: tensor<256x1024x1024xf32>%s loc(\"params['w']\"), "                         \
    "%%m: tensor<256x1024x1024xf32>%s loc(\"opt_state.mu['w']\"), "                                           \
    "%%v: tensor<256x1024x1024xf32>%s loc(\"opt_state.nu['w']\"), "                                           \
    "%%g: tensor<256x1024x1024xf32> loc(\"grads['w']\")) -> (tensor<256x1024x1024xf32>, "                    \
    "tensor<256x1024x1024xf32>, tensor<256x1024x1024xf32>) {\n"                                               \
    "  %%b1 = stablehlo.constant dense<0.9> : tensor<256x1024x1024xf32>\n"                                   \
    "  %%c1 = stablehlo.constant dense<0.1> : tensor<256x1024x1024xf32>\n"                                   \
    "  %%b2 = stablehlo.constant dense<0.999> : tensor<256x1024x1024xf32>\n"                                 \
    "  %%c2 = stablehlo.constant dense<0.001> : tensor<256x1024x1024xf32>\n"                                 \
    "  %%lr = stablehlo.constant dense<0.001> : tensor<256x1024x1024xf32>\n"                                 \
    "  %%eps = stablehlo.constant dense<1.0e-8> : tensor<256x1024x1024xf32>\n"                               \
    "  %%t0 = stablehlo.multiply %%b1, %%m : tensor<256x1024x1024xf32>\n"                                    \
    "  %%t1 = stablehlo.multiply %%c1, %%g : tensor<256x1024x1024xf32>\n"                                    \
    "  %%m2 = stablehlo.add %%t0, %%t1 : tensor<256x1024x1024xf32>\n"                                        \
    "  %%t2 = stablehlo.multiply %%g, %%g : tensor<256x1024x1024xf32>\n"                                     \
    "  %%t3 = stablehlo.multiply %%c2, %%t2 : tensor<256x1024x1024xf32>\n"                                   \
    "  %%t4 = stablehlo.multiply %%b2, %%v : tensor<256x1024x1024xf32>\n"                                    \
    "  %%v2 = stablehlo.add %%t4, %%t3 : tensor<256x1024x1024xf32>\n"                                        \
    "  %%t5 = stablehlo.sqrt %%v2 : tensor<256x1024x1024xf32>\n"                                             \
    "  %%t6 = stablehlo.add %%t5, %%eps : tensor<256x1024x1024xf32>\n"                                       \
    "  %%t7 = stablehlo.divide %%m2, %%t6 : tensor<256x1024x1024xf32>\n"                                     \
    "  %%t8 = stablehlo.multiply %%lr, %%t7 : tensor<256x1024x1024xf32>\n"                                   \
    "  %%p2 = stablehlo.subtract %%p, %%t8 : tensor<256x1024x1024xf32>\n"                                    \
    "  return %%p2, %%m2, %%v2 : tensor<256x1024x1024xf32>, tensor<256x1024x1024xf32>, "                     \
    "tensor<256x1024x1024xf32>\n}\n"

START_TEST(test_adam_donated_counts_each_parameter_once)
{
    char text[8192];
    snprintf(text, sizeof text, ADAM_FMT, " {tf.aliasing_output = 0 : i32}", " {tf.aliasing_output = 1 : i32}",
             " {tf.aliasing_output = 2 : i32}");
    cost_report r = report_of(text);
    ck_assert_int_eq(r.argument_bytes, (int64_t)(4 * GiB));
    ck_assert_msg(r.peak_memory_bytes == r.argument_bytes, "donated: peak %lld, arguments %lld",
                  (long long)r.peak_memory_bytes, (long long)r.argument_bytes);
    ck_assert_int_eq(r.memory.kinds[COST_MEM_PARAMS], (int64_t)GiB);
    ck_assert_int_eq(r.memory.kinds[COST_MEM_OPT_STATE], (int64_t)(2 * GiB));
    ck_assert_int_eq(kinds_sum(&r), r.peak_memory_bytes);
    /* jax.buffer_donor: XLA pairs each with an output of its type */
    snprintf(text, sizeof text, ADAM_FMT, " {jax.buffer_donor = true}", " {jax.buffer_donor = true}",
             " {jax.buffer_donor = true}");
    r = report_of(text);
    ck_assert_int_eq(r.peak_memory_bytes, r.argument_bytes);
    /* not donated: the three new buffers are outputs of their own */
    snprintf(text, sizeof text, ADAM_FMT, "", "", "");
    r = report_of(text);
    ck_assert_int_eq(r.peak_memory_bytes, (int64_t)(7 * GiB));
}
END_TEST

/* An output the entry returns without donation is an allocation of its
 * own for the whole program (XLA's BufferAssigner: live-out buffers are
 * not in the heap).  t = w . w (1 GiB, a dot: a buffer of its own) dies
 * at the reduce, and the output, a broadcast of the reduction, is written
 * after: live at once at most w + t + r, but XLA holds the output's
 * allocation all along.  When it is smaller than t, t cannot live in it:
 * w + out + t + r.  When it is larger, t is placed in it before it is
 * written (MaybeAssignBuffer): w + out + r. */
#define HELD_FMT                                                                                              \
    "func.func public @main(%%w: tensor<16384x16384xf32>) -> tensor<%dx16384xf32> {\n"                         \
    "  %%t = stablehlo.dot_general %%w, %%w, contracting_dims = [1] x [0] : (tensor<16384x16384xf32>, "       \
    "tensor<16384x16384xf32>) -> tensor<16384x16384xf32>\n"                                                   \
    "  %%z = stablehlo.constant dense<0.0> : tensor<f32>\n"                                                    \
    "  %%r = stablehlo.reduce(%%t init: %%z) applies stablehlo.add across dimensions = [1] : "                 \
    "(tensor<16384x16384xf32>, tensor<f32>) -> tensor<16384xf32>\n"                                           \
    "  %%o = stablehlo.broadcast_in_dim %%r, dims = [1] : (tensor<16384xf32>) -> tensor<%dx16384xf32>\n"       \
    "  return %%o : tensor<%dx16384xf32>\n}\n"

START_TEST(test_returned_output_is_held_all_along)
{
    char text[4096];
    const int64_t w = (int64_t)GiB, r = 16384 * 4;
    /* the output (0.5 GiB) is smaller than t: held beside it */
    snprintf(text, sizeof text, HELD_FMT, 8192, 8192, 8192);
    cost_report rep = report_of(text);
    int64_t out = 8192LL * 16384 * 4;
    ck_assert_msg(rep.peak_memory_bytes == w + out + w + r, "peak %lld, want %lld", (long long)rep.peak_memory_bytes,
                  (long long)(w + out + w + r));
    ck_assert_int_eq(kinds_sum(&rep), rep.peak_memory_bytes);
    ck_assert_int_eq(rep.memory.kinds[COST_MEM_OUTPUTS], out); /* not yet written at the peak */
    /* eager PyTorch allocates it when it is written */
    rep = report_as(text, COST_FW_EAGER);
    ck_assert_msg(rep.peak_memory_bytes < w + out + w, "eager peak %lld", (long long)rep.peak_memory_bytes);
    /* the output (2 GiB) is larger: t lives in its allocation before it */
    snprintf(text, sizeof text, HELD_FMT, 32768, 32768, 32768);
    rep = report_of(text);
    out = 32768LL * 16384 * 4;
    ck_assert_msg(rep.peak_memory_bytes == w + out + r, "peak %lld, want %lld", (long long)rep.peak_memory_bytes,
                  (long long)(w + out + r));
    ck_assert_int_eq(kinds_sum(&rep), rep.peak_memory_bytes);
}
END_TEST

START_TEST(test_elementwise_chain_peaks_at_two)
{
    /* ten ops on 1 GiB: one fused kernel reading the argument and writing
     * the result */
    const char *ops[] = {"exponential", "negate", "tanh", "abs", "sqrt", "exponential", "negate", "log", "abs", "tanh"};
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "func.func public @main(%x: tensor<256x1024x1024xf32>) -> tensor<256x1024x1024xf32> {\n");
    for (int i = 0; i < 10; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "%%v%d" : "%%x", i - 1);
        ap_buf_printf(&b, "  %%v%d = stablehlo.%s %s : tensor<256x1024x1024xf32>\n", i, ops[i], prev);
    }
    ap_buf_puts(&b, "  return %v9 : tensor<256x1024x1024xf32>\n}\n");
    cost_report r = report_of(b.data);
    ck_assert_msg(r.peak_memory_bytes == (int64_t)(2 * GiB), "peak %lld", (long long)r.peak_memory_bytes);
    ck_assert(r.bytes_per_device == 2 * GiB); /* one read, one write */
    ck_assert_int_eq(r.n_top, 1);              /* one kernel */
    ck_assert_int_eq(kinds_sum(&r), r.peak_memory_bytes);
    ap_buf_free(&b);
}
END_TEST

/* b = dot(x, w) is a buffer of its own (a dot is a kernel); the
 * dynamic_update_slice writes into it in place when nothing reads b
 * after, and into a copy when something does. */
#define DUS_FMT                                                                                               \
    "func.func public @main(%%x: tensor<4096x1024xf32>, %%w: tensor<1024x65536xf32>, %%u: tensor<1x65536xf32>, " \
    "%%i: tensor<i32>) -> (tensor<4096x65536xf32>%s) {\n"                                                       \
    "  %%b = stablehlo.dot_general %%x, %%w, contracting_dims = [1] x [0] : (tensor<4096x1024xf32>, "          \
    "tensor<1024x65536xf32>) -> tensor<4096x65536xf32>\n"                                                       \
    "  %%z = stablehlo.constant dense<0> : tensor<i32>\n"                                                       \
    "  %%y = stablehlo.dynamic_update_slice %%b, %%u, %%i, %%z : (tensor<4096x65536xf32>, tensor<1x65536xf32>, " \
    "tensor<i32>, tensor<i32>) -> tensor<4096x65536xf32>\n"                                                     \
    "%s"                                                                                                        \
    "  return %%y%s\n}\n"

START_TEST(test_in_place_update)
{
    char text[4096];
    double B = 4096.0 * 65536 * 4;
    snprintf(text, sizeof text, DUS_FMT, "", "", " : tensor<4096x65536xf32>");
    cost_report r = report_of(text);
    ck_assert_msg((double)r.peak_memory_bytes == (double)r.argument_bytes + B, "in place: peak %lld, args %lld",
                  (long long)r.peak_memory_bytes, (long long)r.argument_bytes);
    /* the update reads and writes only the slice */
    ck_assert(r.bytes_per_device < 4096.0 * 1024 * 4 + 1024.0 * 65536 * 4 + 2 * B);
    /* b read after the update: y needs a buffer of its own */
    snprintf(text, sizeof text, DUS_FMT, ", tensor<4096x65536xf32>",
             "  %e = stablehlo.exponential %b : tensor<4096x65536xf32>\n",
             ", %e : tensor<4096x65536xf32>, tensor<4096x65536xf32>");
    r = report_of(text);
    ck_assert_msg((double)r.peak_memory_bytes >= (double)r.argument_bytes + 2 * B, "copy: peak %lld",
                  (long long)r.peak_memory_bytes);
}
END_TEST

START_TEST(test_barrier_keeps_what_it_holds)
{
    /* without the barrier, exp(x) is fused into both users and never
     * written; behind one (JAX's remat residuals) it is a buffer */
#define BARRIER_FMT                                                                                          \
    "func.func public @main(%%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {\n"                       \
    "  %%e = stablehlo.negate %%x : tensor<1024x1024xf32>\n"                                                 \
    "%s"                                                                                                     \
    "  %%a = stablehlo.add %%h, %%x : tensor<1024x1024xf32>\n"                                               \
    "  %%m = stablehlo.multiply %%a, %%h : tensor<1024x1024xf32>\n"                                          \
    "  return %%m : tensor<1024x1024xf32>\n}\n"
    char text[2048];
    snprintf(text, sizeof text, BARRIER_FMT, "  %h = stablehlo.abs %e : tensor<1024x1024xf32>\n");
    cost_report free_r = report_of(text);
    snprintf(text, sizeof text, BARRIER_FMT, "  %h = stablehlo.optimization_barrier %e : tensor<1024x1024xf32>\n");
#undef BARRIER_FMT
    cost_report held = report_of(text);
    ck_assert_int_eq(free_r.n_top, 1);
    ck_assert_int_eq(held.n_top, 2);
    /* e written and read back, x read by both kernels (e's buffer is then
     * the result's: no more memory) */
    ck_assert_msg(held.bytes_per_device == free_r.bytes_per_device + 3 * 4194304.0, "%g vs %g", held.bytes_per_device,
                  free_r.bytes_per_device);
}
END_TEST

/* JAX's remat puts a layer's residuals behind an optimization barrier
 * together with the cotangent from above, so that XLA cannot recompute
 * the layer before its backward is due: the barrier's results exist only
 * once everything it holds does (an instruction the schedulers order like
 * any other; its outputs are its operands' buffers).  Here y (1 GiB) waits
 * behind the barrier for the loss, which needs t (1 GiB, made after the
 * forward read y): the two coexist in every legal order.  Reading y before
 * the barrier runs (the backward's reduce first, freeing y before t is
 * made) would peak 1 GiB lower. */
START_TEST(test_barrier_orders_its_readers)
{
    const char *text =
        "func.func public @main(%x: tensor<256x1024x1024xf32>) -> tensor<f32> {\n"
        "  %y = stablehlo.tanh %x : tensor<256x1024x1024xf32>\n"
        "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %s = stablehlo.reduce(%y init: %z) applies stablehlo.add across dimensions = [0, 1, 2] : "
        "(tensor<256x1024x1024xf32>, tensor<f32>) -> tensor<f32>\n"
        "  %t = stablehlo.custom_call @f(%x, %s) : (tensor<256x1024x1024xf32>, tensor<f32>) -> "
        "tensor<256x1024x1024xf32>\n"
        "  %l = stablehlo.reduce(%t init: %z) applies stablehlo.add across dimensions = [0, 1, 2] : "
        "(tensor<256x1024x1024xf32>, tensor<f32>) -> tensor<f32>\n"
        "  %b:2 = stablehlo.optimization_barrier %y, %l : tensor<256x1024x1024xf32>, tensor<f32>\n"
        "  %r = stablehlo.reduce(%b#0 init: %z) applies stablehlo.add across dimensions = [0, 1, 2] : "
        "(tensor<256x1024x1024xf32>, tensor<f32>) -> tensor<f32>\n"
        "  %o = stablehlo.add %r, %b#1 : tensor<f32>\n"
        "  return %o : tensor<f32>\n}\n";
    cost_report r = report_of(text);
    ck_assert_msg(r.peak_memory_bytes >= (int64_t)(3 * GiB), "peak %lld: y freed before the barrier ran",
                  (long long)r.peak_memory_bytes);
    ck_assert_msg(r.peak_memory_bytes < (int64_t)(3 * GiB) + 4096, "peak %lld", (long long)r.peak_memory_bytes);
    ck_assert_int_eq(kinds_sum(&r), r.peak_memory_bytes);
}
END_TEST

/* ------------------------------------------------------------- fusion */

typedef struct fcase {
    const char *what, *body;
    int kernels;        /* kernels (items) it becomes */
    double bytes;       /* HBM bytes in all */
} fcase;

START_TEST(test_fusion_rules)
{
    /* x, y: tensor<64x64xf32> (16 KiB), s: tensor<64xf32> (256 B) */
    static const fcase cases[] = {
        {"a broadcast is computed inside its user",
         "  %b = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<64xf32>) -> tensor<64x64xf32>\n"
         "  %r = stablehlo.add %x, %b : tensor<64x64xf32>\n",
         1, 16384 + 256 + 16384},
        {"a cheap producer is duplicated into both users",
         "  %n = stablehlo.negate %x : tensor<64x64xf32>\n"
         "  %a = stablehlo.add %n, %y : tensor<64x64xf32>\n"
         "  %m = stablehlo.multiply %n, %y : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         3, 2 * (2 * 16384 + 16384) + 3 * 16384},
        {"an expensive producer with two users is written once",
         "  %n = stablehlo.tanh %x : tensor<64x64xf32>\n"
         "  %a = stablehlo.add %n, %y : tensor<64x64xf32>\n"
         "  %m = stablehlo.multiply %n, %y : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         4, 2 * 16384 + 2 * (3 * 16384) + 3 * 16384},
        {"an f32 exponential is cheap on a GPU: duplicated into both users",
         "  %n = stablehlo.exponential %x : tensor<64x64xf32>\n"
         "  %a = stablehlo.add %n, %y : tensor<64x64xf32>\n"
         "  %m = stablehlo.divide %n, %y : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         3, 2 * (2 * 16384 + 16384) + 3 * 16384},
        {"an f32 logistic is expanded into exp and divide on a GPU: duplicated into both users",
         "  %n = stablehlo.logistic %x : tensor<64x64xf32>\n"
         "  %a = stablehlo.add %n, %y : tensor<64x64xf32>\n"
         "  %m = stablehlo.multiply %n, %y : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         3, 2 * (2 * 16384 + 16384) + 3 * 16384},
        {"a bf16 exponential stays expensive: written once",
         "  %h = stablehlo.convert %x : (tensor<64x64xf32>) -> tensor<64x64xbf16>\n"
         "  %n = stablehlo.exponential %h : tensor<64x64xbf16>\n"
         "  %a = stablehlo.convert %n : (tensor<64x64xbf16>) -> tensor<64x64xf32>\n"
         "  %m = stablehlo.convert %n : (tensor<64x64xbf16>) -> tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         4, (16384 + 8192) + 2 * (8192 + 16384) + 3 * 16384},
        {"a gather stays one kernel's: not duplicated through the widening convert both users take",
         "  %h = stablehlo.convert %x : (tensor<64x64xf32>) -> tensor<64x64xbf16>\n"
         "  %i = stablehlo.iota dim = 0 : tensor<64x1xi32>\n"
         "  %g = \"stablehlo.gather\"(%h, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], "
         "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 64>}> "
         ": (tensor<64x64xbf16>, tensor<64x1xi32>) -> tensor<64x64xbf16>\n"
         "  %w = stablehlo.convert %g : (tensor<64x64xbf16>) -> tensor<64x64xf32>\n"
         "  %a = stablehlo.add %w, %y : tensor<64x64xf32>\n"
         "  %m = stablehlo.multiply %w, %y : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         4, (16384 + 8192) + 2 * (8192 + 16384 + 16384) + 3 * 16384},
        {"a reduce takes its elementwise producer",
         "  %e = stablehlo.exponential %x : tensor<64x64xf32>\n"
         "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
         "  %q = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1] : "
         "(tensor<64x64xf32>, tensor<f32>) -> tensor<64xf32>\n"
         "  %r = stablehlo.broadcast_in_dim %q, dims = [0] : (tensor<64xf32>) -> tensor<64x64xf32>\n",
         2, 16384 + 256 + 256 + 16384},
        {"a dot reads its operands from memory, a transpose folded into it",
         "  %n = stablehlo.negate %x : tensor<64x64xf32>\n"
         "  %t = stablehlo.transpose %y, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>\n"
         "  %r = stablehlo.dot_general %n, %t, contracting_dims = [1] x [0] : (tensor<64x64xf32>, "
         "tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         2, 2 * 16384 + 3 * 16384},
        {"a binary producer read by two kernels is computed in both",
         "  %n = stablehlo.add %x, %y : tensor<64x64xf32>\n"
         "  %a = stablehlo.negate %n : tensor<64x64xf32>\n"
         "  %m = stablehlo.abs %n : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n",
         3, 2 * (2 * 16384 + 16384) + 3 * 16384},
        /* in three it would read 3 x 2 tensors where written once it
         * costs 1 + 2 + 3 (XLA's priority fusion weighs the same bytes) */
        {"a binary producer read by three kernels is written once",
         "  %n = stablehlo.add %x, %y : tensor<64x64xf32>\n"
         "  %a = stablehlo.negate %n : tensor<64x64xf32>\n"
         "  %m = stablehlo.abs %n : tensor<64x64xf32>\n"
         "  %c = stablehlo.sine %n : tensor<64x64xf32>\n"
         "  %r = stablehlo.custom_call @f(%a, %m, %c) : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) "
         "-> tensor<64x64xf32>\n",
         5, 3 * 16384 + 3 * (2 * 16384) + 4 * 16384},
        {"a dead producer is removed",
         "  %d = stablehlo.exponential %y : tensor<64x64xf32>\n"
         "  %r = stablehlo.negate %x : tensor<64x64xf32>\n",
         1, 2 * 16384},
    };
    for (size_t i = 0; i < AP_ARRAY_LEN(cases); i++) {
        char text[4096];
        snprintf(text, sizeof text,
                 "func.func public @main(%%x: tensor<64x64xf32>, %%y: tensor<64x64xf32>, %%s: tensor<64xf32>) -> "
                 "tensor<64x64xf32> {\n%s  return %%r : tensor<64x64xf32>\n}\n",
                 cases[i].body);
        cost_report r = report_of(text);
        ck_assert_msg(r.n_top == cases[i].kernels, "%s: %d kernels", cases[i].what, r.n_top);
        ck_assert_msg(r.bytes_per_device == cases[i].bytes, "%s: %.0f bytes, want %.0f", cases[i].what,
                      r.bytes_per_device, cases[i].bytes);
    }
}
END_TEST

/* A residual stream: h_i = h_(i-1) + y_i, y_i a kernel's output (a
 * layer's last matmul), each h_i also normalized (a reduce over it).  Fusing every add into both readers would make layer i's
 * kernels read all i earlier tensors again; XLA writes the stream out, so
 * the HBM bytes grow with the layers, not with their square. */
START_TEST(test_residual_chain_is_written)
{
    enum { L = 16 };
    char text[16384];
    int k = snprintf(text, sizeof text,
                     "func.func public @main(%%x: tensor<64x64xf32>, %%y: tensor<64x64xf32>) -> tensor<64xf32> {\n"
                     "  %%z = stablehlo.constant dense<0.0> : tensor<f32>\n"
                     "  %%h0 = stablehlo.add %%x, %%y : tensor<64x64xf32>\n"
                     "  %%s0 = stablehlo.reduce(%%h0 init: %%z) applies stablehlo.add across dimensions = [1] : "
                     "(tensor<64x64xf32>, tensor<f32>) -> tensor<64xf32>\n");
    for (int i = 1; i < L; i++)
        k += snprintf(text + k, sizeof text - (size_t)k,
                      "  %%y%d = stablehlo.custom_call @layer(%%x) : (tensor<64x64xf32>) -> tensor<64x64xf32>\n"
                      "  %%h%d = stablehlo.add %%h%d, %%y%d : tensor<64x64xf32>\n"
                      "  %%q%d = stablehlo.reduce(%%h%d init: %%z) applies stablehlo.add across dimensions = [1] : "
                      "(tensor<64x64xf32>, tensor<f32>) -> tensor<64xf32>\n"
                      "  %%s%d = stablehlo.add %%s%d, %%q%d : tensor<64xf32>\n",
                      i, i, i - 1, i, i, i, i, i - 1, i);
    snprintf(text + k, sizeof text - (size_t)k, "  return %%s%d : tensor<64xf32>\n}\n", L - 1);
    cost_report r = report_of(text);
    /* per layer: the custom call reads x and writes y_i, the add reads two
     * tensors and writes one, the reduce reads one: 6 tensors of 16 KiB
     * (fused into both readers, layer i's reduce would read i + 1) */
    ck_assert_msg(r.bytes_per_device <= 6.5 * 16384 * L, "%.0f bytes for %d layers", r.bytes_per_device, L);
}
END_TEST

/* -------------------------------------------------------------- order */

/* The loss of a step computed last, though it only needs the logits: in
 * the order written the logits live across the rest; XLA's schedulers
 * run the loss first. */
START_TEST(test_order_lowers_a_bad_written_order)
{
    const char *text =
        "func.func public @main(%x: tensor<1024x1024xf32>, %w: tensor<1024x8192xf32>) -> (tensor<f32>, "
        "tensor<1024x1024xf32>) {\n"
        "  %l = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1024x1024xf32>, "
        "tensor<1024x8192xf32>) -> tensor<1024x8192xf32>\n"
        "  %e = stablehlo.exponential %l : tensor<1024x8192xf32>\n"
        "  %h1 = stablehlo.custom_call @big(%x) : (tensor<1024x1024xf32>) -> tensor<1024x8192xf32>\n"
        "  %h2 = stablehlo.custom_call @big(%h1) : (tensor<1024x8192xf32>) -> tensor<1024x1024xf32>\n"
        "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [0, 1] : "
        "(tensor<1024x8192xf32>, tensor<f32>) -> tensor<f32>\n"
        "  return %s, %h2 : tensor<f32>, tensor<1024x1024xf32>\n}\n";
    cost_report r = report_of(text);
    ck_assert(r.memory.order != COST_ORDER_PROGRAM);
    ck_assert_msg(r.peak_memory_bytes < r.memory.program_order_peak, "%lld vs %lld", (long long)r.peak_memory_bytes,
                  (long long)r.memory.program_order_peak);
    ck_assert_int_eq(kinds_sum(&r), r.peak_memory_bytes);
}
END_TEST

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A random program over NxN matrices and N vectors: elementwise ops,
 * broadcasts, reduces, transposes, dots, custom calls, barriers and
 * dynamic_update_slices, reading earlier values at random; some results
 * returned, some arguments donated. */
static char *random_program(uint64_t seed, int n_ops)
{
    uint64_t rng = seed;
    int N = 8 << (rng_next(&rng) % 4);
    ap_buf b;
    ap_buf_init(&b);
    char M[32], V[32];
    snprintf(M, sizeof M, "tensor<%dx%dxf32>", N, N);
    snprintf(V, sizeof V, "tensor<%dxf32>", N);
    int nm = 3, nv = 1; /* values: m0..m2 (args), v0 (arg) */
    ap_buf_printf(&b, "func.func public @main(%%m0: %s {tf.aliasing_output = 0 : i32}, %%m1: %s, %%m2: %s, %%v0: %s) -> (%s, %s) {\n", M, M, M,
                  V, M, M);
    ap_buf_printf(&b, "  %%z = stablehlo.constant dense<0.0> : tensor<f32>\n  %%i = stablehlo.constant dense<1> : tensor<i32>\n"
                      "  %%i0 = stablehlo.constant dense<0> : tensor<i32>\n");
    for (int k = 0; k < n_ops; k++) {
        int a = (int)(rng_next(&rng) % (uint64_t)nm), c = (int)(rng_next(&rng) % (uint64_t)nm);
        int v = (int)(rng_next(&rng) % (uint64_t)nv);
        switch (rng_next(&rng) % 10) {
        case 0:
            ap_buf_printf(&b, "  %%m%d = stablehlo.add %%m%d, %%m%d : %s\n", nm++, a, c, M);
            break;
        case 1:
            ap_buf_printf(&b, "  %%m%d = stablehlo.exponential %%m%d : %s\n", nm++, a, M);
            break;
        case 2:
            ap_buf_printf(&b, "  %%m%d = stablehlo.broadcast_in_dim %%v%d, dims = [0] : (%s) -> %s\n", nm++, v, V, M);
            break;
        case 3:
            ap_buf_printf(&b,
                          "  %%v%d = stablehlo.reduce(%%m%d init: %%z) applies stablehlo.add across dimensions = [1] : "
                          "(%s, tensor<f32>) -> %s\n",
                          nv++, a, M, V);
            break;
        case 4:
            ap_buf_printf(&b, "  %%m%d = stablehlo.transpose %%m%d, dims = [1, 0] : (%s) -> %s\n", nm++, a, M, M);
            break;
        case 5:
            ap_buf_printf(&b, "  %%m%d = stablehlo.dot_general %%m%d, %%m%d, contracting_dims = [1] x [0] : (%s, %s) -> %s\n",
                          nm++, a, c, M, M, M);
            break;
        case 6:
            ap_buf_printf(&b, "  %%m%d = stablehlo.custom_call @f(%%m%d) : (%s) -> %s\n", nm++, a, M, M);
            break;
        case 7:
            ap_buf_printf(&b, "  %%m%d = stablehlo.optimization_barrier %%m%d : %s\n", nm++, a, M);
            break;
        case 8:
            ap_buf_printf(&b, "  %%u%d = stablehlo.broadcast_in_dim %%v%d, dims = [1] : (%s) -> tensor<1x%dxf32>\n", k, v, V,
                          N);
            ap_buf_printf(&b,
                          "  %%m%d = stablehlo.dynamic_update_slice %%m%d, %%u%d, %%i, %%i0 : (%s, tensor<1x%dxf32>, "
                          "tensor<i32>, tensor<i32>) -> %s\n",
                          nm++, a, k, M, N, M);
            break;
        default:
            ap_buf_printf(&b, "  %%m%d = stablehlo.multiply %%m%d, %%m%d : %s\n", nm++, a, c, M);
            break;
        }
    }
    ap_buf_printf(&b, "  return %%m%d, %%m%d : %s, %s\n}\n", nm - 1, (int)(rng_next(&rng) % (uint64_t)nm), M, M);
    return ap_buf_take(&b, NULL);
}

START_TEST(test_order_never_raises_and_breakdown_sums)
{
    for (uint64_t seed = 1; seed <= 300; seed++) {
        char *text = random_program(seed, 4 + (int)(seed % 40));
        cost_report r = report_of(text);
        ck_assert_msg(r.peak_memory_bytes <= r.memory.program_order_peak, "seed %llu: %lld above the written %lld\n%s",
                      (unsigned long long)seed, (long long)r.peak_memory_bytes, (long long)r.memory.program_order_peak,
                      text);
        ck_assert_msg(kinds_sum(&r) == r.peak_memory_bytes, "seed %llu: breakdown %lld, peak %lld\n%s",
                      (unsigned long long)seed, (long long)kinds_sum(&r), (long long)r.peak_memory_bytes, text);
        ck_assert(r.peak_memory_bytes >= r.argument_bytes);
        ck_assert(r.memory.at_op[0]);
        ap_free(text);
    }
}
END_TEST

/* Eager PyTorch (COST_FW_EAGER) holds every op's output as a tensor from
 * the op to its last reader, a broadcast a view: n = -x, m = n * n,
 * a = m + n, r = a + broadcast(1) on 1 GiB peak at a with x, n, m and a
 * live (4 GiB), where XLA fuses them into one kernel (x and r: 2 GiB).
 * The ops run as written: the order is the program's. */
#define EAGER_SRC                                                                                   \
    "func.func public @main(%x: tensor<256x1024x1024xf32>) -> tensor<256x1024x1024xf32> {\n"       \
    "  %n = stablehlo.negate %x : tensor<256x1024x1024xf32>\n"                                    \
    "  %m = stablehlo.multiply %n, %n : tensor<256x1024x1024xf32>\n"                              \
    "  %a = stablehlo.add %m, %n : tensor<256x1024x1024xf32>\n"                                   \
    "  %c = stablehlo.constant dense<1.0> : tensor<f32>\n"                                        \
    "  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<256x1024x1024xf32>\n" \
    "  %r = stablehlo.add %a, %b : tensor<256x1024x1024xf32>\n"                                   \
    "  return %r : tensor<256x1024x1024xf32>\n}\n"

START_TEST(test_eager_holds_every_output)
{
    cost_report x = report_of(EAGER_SRC), e = report_as(EAGER_SRC, COST_FW_EAGER);
    ck_assert_msg(x.peak_memory_bytes == (int64_t)(2 * GiB), "xla: peak %lld", (long long)x.peak_memory_bytes);
    ck_assert_msg(e.peak_memory_bytes == (int64_t)(4 * GiB), "eager: peak %lld", (long long)e.peak_memory_bytes);
    ck_assert_int_eq(e.memory.order, COST_ORDER_PROGRAM);
    ck_assert_int_eq(kinds_sum(&e), e.peak_memory_bytes);
    ck_assert_str_eq(e.memory.at_op, "stablehlo.add");
    /* the step time is the same fused kernels' */
    ck_assert(e.runtime_s == x.runtime_s);
    /* a program prepared for one framework is not evaluated as the other */
    ir_module *m = parse_ok(EAGER_SRC);
    cost_program *p;
    ap_error err;
    ck_assert_int_eq(cost_prepare_framework(m, COST_FW_EAGER, &p, &err), 0);
    cost_device d = h100();
    cost_report r;
    ck_assert_int_eq(cost_evaluate(p, &d, NULL, NULL, &r, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "the program's memory was counted for pytorch_eager, not xla (cost_prepare_framework)");
    cost_program_free(p);
    ir_module_free(m);
    cost_framework fw;
    ck_assert_int_eq(cost_framework_parse("PyTorch-Eager", &fw, &err), 0);
    ck_assert_int_eq(fw, COST_FW_EAGER);
    ck_assert_int_eq(cost_framework_parse("jax", &fw, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "unknown framework 'jax' (xla or pytorch_eager)");
}
END_TEST

/* Eager on random programs: the order written, the breakdown sums. */
START_TEST(test_eager_breakdown_sums)
{
    for (uint64_t seed = 1; seed <= 150; seed++) {
        char *text = random_program(seed, 4 + (int)(seed % 40));
        cost_report r = report_as(text, COST_FW_EAGER);
        ck_assert_msg(r.peak_memory_bytes == r.memory.program_order_peak, "seed %llu", (unsigned long long)seed);
        ck_assert_msg(kinds_sum(&r) == r.peak_memory_bytes, "seed %llu: breakdown %lld, peak %lld\n%s",
                      (unsigned long long)seed, (long long)kinds_sum(&r), (long long)r.peak_memory_bytes, text);
        ck_assert(r.peak_memory_bytes >= r.argument_bytes);
        ap_free(text);
    }
}
END_TEST

START_TEST(test_breakdown_sums_on_models_and_corpus)
{
    static const struct {
        const char *model, *config, *extra;
    } models[] = {{"transformer", "small", ""}, {"transformer", "small", "scan=1"}, {"unet", "tiny", ""},
                  {"gns", "tiny", ""}};
    for (size_t i = 0; i < AP_ARRAY_LEN(models); i++) {
        ir_module *m = tl_generate(models[i].model, models[i].config, models[i].extra);
        cost_device d = h100();
        cost_report r;
        ap_error err;
        ck_assert_msg(cost_estimate(m, &d, NULL, &r, &err) == 0, "%s", err.msg);
        ck_assert_msg(kinds_sum(&r) == r.peak_memory_bytes, "%s %s: breakdown %lld, peak %lld", models[i].model,
                      models[i].extra, (long long)kinds_sum(&r), (long long)r.peak_memory_bytes);
        /* the zoo names its arguments: parameters and moments apart */
        ck_assert(r.memory.kinds[COST_MEM_PARAMS] > 0);
        ck_assert_msg(fabs((double)r.memory.kinds[COST_MEM_OPT_STATE] - 2.0 * (double)r.memory.kinds[COST_MEM_PARAMS]) <=
                          64 + 1e-3 * (double)r.memory.kinds[COST_MEM_PARAMS],
                      "%s: parameters %lld, optimizer state %lld", models[i].model,
                      (long long)r.memory.kinds[COST_MEM_PARAMS], (long long)r.memory.kinds[COST_MEM_OPT_STATE]);
        ir_module_free(m);
    }
    static const char *const files[] = {"xla_maxtext_train_step_1gpu_preopt.hlo",
                                        "xla_maxtext_llama3_8b_cp_train_step_4dev_spmd.hlo",
                                        "xla_dlrm_keras_jax_train_step.hlo"};
    for (size_t i = 0; i < AP_ARRAY_LEN(files); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/corpus/hlo/%s", AP_SHARED_DIR, files[i]);
        char *text = tl_read(path, NULL);
        ir_module *m = parse_ok(text);
        cost_device d = h100();
        cost_report r;
        ap_error err;
        ck_assert_msg(cost_estimate(m, &d, NULL, &r, &err) == 0, "%s: %s", files[i], err.msg);
        ck_assert_msg(kinds_sum(&r) == r.peak_memory_bytes, "%s: breakdown %lld, peak %lld", files[i],
                      (long long)kinds_sum(&r), (long long)r.peak_memory_bytes);
        ck_assert(r.peak_memory_bytes <= r.memory.program_order_peak);
        ir_module_free(m);
        ap_free(text);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_adam_donated_counts_each_parameter_once);
    tcase_add_test(tc, test_elementwise_chain_peaks_at_two);
    tcase_add_test(tc, test_returned_output_is_held_all_along);
    tcase_add_test(tc, test_in_place_update);
    tcase_add_test(tc, test_barrier_keeps_what_it_holds);
    tcase_add_test(tc, test_barrier_orders_its_readers);
    tcase_add_test(tc, test_fusion_rules);
    tcase_add_test(tc, test_residual_chain_is_written);
    tcase_add_test(tc, test_order_lowers_a_bad_written_order);
    tcase_add_test(tc, test_order_never_raises_and_breakdown_sums);
    tcase_add_test(tc, test_breakdown_sums_on_models_and_corpus);
    tcase_add_test(tc, test_eager_holds_every_output);
    tcase_add_test(tc, test_eager_breakdown_sums);
    suite_add_tcase(s, tc);
    return tl_run(s);
}
