/*
 * test_cost.c - tests of the cost model (costmodel/): the device registry
 * and its aliases, custom devices from JSON with every rejection message,
 * default and explicit axis tiers, and the laws a user relies on, checked
 * on an MLP training step written four ways (unpartitioned, batch parallel
 * over n devices, Megatron over a 2-way axis, Z3): batch parallelism divides
 * flops by n and leaves parameter memory alone, Z3 divides parameter memory
 * by n, Megatron halves matmul flops with the expected all-reduces, more
 * bandwidth never slows a program down.  Also the ring formulas on exact
 * numbers, fusion, live ranges with donation, counted while loops, the JSON
 * report keys, and sane reports on the corpus files that have collectives.
 */
#include "cost.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

/* ----------------------------------------------------------------- helpers */

static ir_module *parse_ok(const char *text)
{
    char msg[1024];
    ir_module *m = tl_parse(text, "test.mlir", msg, sizeof msg);
    ck_assert_msg(m != NULL, "parse failed: %s\n%s", msg, text);
    return m;
}

static cost_device device(const char *name)
{
    cost_device d;
    ap_error err;
    ck_assert_msg(cost_device_lookup(name, &d, &err) == 0, "%s", err.msg);
    return d;
}

/* Prepares and evaluates text on dev with default tiers. */
static cost_report report_of(const char *text, const cost_device *dev, const cost_options *opts)
{
    ir_module *m = parse_ok(text);
    cost_report r;
    ap_error err;
    ck_assert_msg(cost_estimate(m, dev, opts, &r, &err) == 0, "estimate: %s", err.msg);
    ir_module_free(m);
    return r;
}

static bool close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)); }

/* replica_groups attribute text: `groups` groups of `size` consecutive ids
 * with stride `stride` between members ([[0, s, 2s..], [1, ...]] when the
 * members are `stride` apart). */
static void groups_text(char *out, size_t cap, int groups, int size, int stride)
{
    size_t n = (size_t)snprintf(out, cap, "dense<[");
    for (int g = 0; g < groups; g++) {
        n += (size_t)snprintf(out + n, cap - n, "%s[", g ? ", " : "");
        int base = stride == 1 ? g * size : g;
        for (int i = 0; i < size; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s%d", i ? ", " : "", base + i * stride);
        n += (size_t)snprintf(out + n, cap - n, "]");
    }
    snprintf(out + n, cap - n, "]> : tensor<%dx%dxi64>", groups, size);
}

#define CH "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"
/* an add reduction region, for printf formats (hence %%) */
#define ADD_REGION(t)                                       \
    "({\n    ^bb0(%%ra: tensor<" t ">, %%rb: tensor<" t ">):\n" \
    "      %%rs = stablehlo.add %%ra, %%rb : tensor<" t ">\n"    \
    "      stablehlo.return %%rs : tensor<" t ">\n    })"

/* ------------------------------------------------------ the MLP step */

typedef enum form { SINGLE, BP, MP, Z3 } form;

/* A training step of a 2-layer MLP (global batch B, D -> H -> D, f32):
 * forward, loss gradient, backward (weights and input), SGD update.
 *   SINGLE  one device
 *   BP      batch split over n devices, weight gradients all-reduced
 *   MP      Megatron over a 2-way `model` axis: w1 column-, w2 row-split;
 *           the partial y and dx all-reduced
 *   Z3      BP plus parameters stored split over n, all-gathered before use,
 *           gradients reduce-scattered */
static char *mlp(form f, int n, int B, int D, int H)
{
    int b = (f == BP || f == Z3) ? B / n : B;
    int h = f == MP ? H / n : H;
    int ds = f == Z3 ? D / n : D, hs = f == Z3 ? H / n : h;
    char groups[512];
    groups_text(groups, sizeof groups, 1, n, 1);
    ap_buf t;
    ap_buf_init(&t);
    ap_buf_printf(&t,
                  "module @mlp attributes {mhlo.num_partitions = %d : i32, autopart.mesh = \"%s=%d\"} {\n"
                  "  func.func public @main(%%x: tensor<%dx%dxf32> {autopart.layout = [[\"batch\"], []]}, "
                  "%%w1: tensor<%dx%dxf32> {tf.aliasing_output = 0 : i32}, "
                  "%%w2: tensor<%dx%dxf32> {tf.aliasing_output = 1 : i32}) -> "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>, tensor<%dx%dxf32>) {\n",
                  n, f == MP ? "model" : "batch", n, b, D, ds, h, hs, D, ds, h, hs, D, b, D);
    const char *w1 = "%w1", *w2 = "%w2";
    if (f == Z3) {
        ap_buf_printf(&t,
                      "    %%w1f = \"stablehlo.all_gather\"(%%w1) <{all_gather_dim = 0 : i64, " CH
                      ", replica_groups = %s, use_global_device_ids}> : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                      "    %%w2f = \"stablehlo.all_gather\"(%%w2) <{all_gather_dim = 0 : i64, " CH
                      ", replica_groups = %s, use_global_device_ids}> : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                      groups, ds, H, D, H, groups, hs, D, H, D);
        w1 = "%w1f";
        w2 = "%w2f";
    }
    ap_buf_printf(&t,
                  "    %%h = stablehlo.dot_general %%x, %s, contracting_dims = [1] x [0] : "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                  "    %%a = stablehlo.tanh %%h : tensor<%dx%dxf32>\n"
                  "    %%yp = stablehlo.dot_general %%a, %s, contracting_dims = [1] x [0] : "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                  w1, b, D, D, h, b, h, b, h, w2, b, h, h, D, b, D);
    if (f == MP)
        ap_buf_printf(&t,
                      "    %%y = \"stablehlo.all_reduce\"(%%yp) <{" CH ", replica_groups = %s, use_global_device_ids}> "
                      ADD_REGION("f32") " : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                      groups, b, D, b, D);
    else
        ap_buf_printf(&t, "    %%y = stablehlo.negate %%yp : tensor<%dx%dxf32>\n", b, D);
    ap_buf_printf(&t,
                  "    %%dy = stablehlo.subtract %%y, %%x : tensor<%dx%dxf32>\n"
                  "    %%gw2 = stablehlo.dot_general %%a, %%dy, contracting_dims = [0] x [0] : "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                  "    %%da = stablehlo.dot_general %%dy, %s, contracting_dims = [1] x [1] : "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                  "    %%a2 = stablehlo.multiply %%a, %%a : tensor<%dx%dxf32>\n"
                  "    %%dh = stablehlo.multiply %%da, %%a2 : tensor<%dx%dxf32>\n"
                  "    %%gw1 = stablehlo.dot_general %%x, %%dh, contracting_dims = [0] x [0] : "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                  "    %%dxp = stablehlo.dot_general %%dh, %s, contracting_dims = [1] x [1] : "
                  "(tensor<%dx%dxf32>, tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                  b, D, b, h, b, D, h, D, w2, b, D, h, D, b, h, b, h, b, h, b, D, b, h, D, h, w1, b, h, D, h, b, D);
    if (f == MP)
        ap_buf_printf(&t,
                      "    %%dx = \"stablehlo.all_reduce\"(%%dxp) <{" CH ", replica_groups = %s, use_global_device_ids}> "
                      ADD_REGION("f32") " : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                      groups, b, D, b, D);
    else
        ap_buf_printf(&t, "    %%dx = stablehlo.negate %%dxp : tensor<%dx%dxf32>\n", b, D);
    const char *g1 = "%gw1", *g2 = "%gw2";
    if (f == BP) {
        ap_buf_printf(&t,
                      "    %%gw1r = \"stablehlo.all_reduce\"(%%gw1) <{" CH ", replica_groups = %s, use_global_device_ids}> "
                      ADD_REGION("f32") " : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                      "    %%gw2r = \"stablehlo.all_reduce\"(%%gw2) <{" CH ", replica_groups = %s, use_global_device_ids}> "
                      ADD_REGION("f32") " : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                      groups, D, H, D, H, groups, H, D, H, D);
        g1 = "%gw1r";
        g2 = "%gw2r";
    } else if (f == Z3) {
        ap_buf_printf(&t,
                      "    %%gw1r = \"stablehlo.reduce_scatter\"(%%gw1) <{" CH ", replica_groups = %s, "
                      "scatter_dimension = 0 : i64, use_global_device_ids}> " ADD_REGION("f32")
                      " : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n"
                      "    %%gw2r = \"stablehlo.reduce_scatter\"(%%gw2) <{" CH ", replica_groups = %s, "
                      "scatter_dimension = 0 : i64, use_global_device_ids}> " ADD_REGION("f32")
                      " : (tensor<%dx%dxf32>) -> tensor<%dx%dxf32>\n",
                      groups, D, H, ds, H, groups, H, D, hs, D);
        g1 = "%gw1r";
        g2 = "%gw2r";
    }
    ap_buf_printf(&t,
                  "    %%c = stablehlo.constant dense<1.000000e-02> : tensor<f32>\n"
                  "    %%lr1 = stablehlo.broadcast_in_dim %%c, dims = [] : (tensor<f32>) -> tensor<%dx%dxf32>\n"
                  "    %%u1 = stablehlo.multiply %s, %%lr1 : tensor<%dx%dxf32>\n"
                  "    %%w1n = stablehlo.subtract %%w1, %%u1 : tensor<%dx%dxf32>\n"
                  "    %%lr2 = stablehlo.broadcast_in_dim %%c, dims = [] : (tensor<f32>) -> tensor<%dx%dxf32>\n"
                  "    %%u2 = stablehlo.multiply %s, %%lr2 : tensor<%dx%dxf32>\n"
                  "    %%w2n = stablehlo.subtract %%w2, %%u2 : tensor<%dx%dxf32>\n"
                  "    return %%w1n, %%w2n, %%dx : tensor<%dx%dxf32>, tensor<%dx%dxf32>, tensor<%dx%dxf32>\n"
                  "  }\n}\n",
                  ds, h, g1, ds, h, ds, h, hs, D, g2, hs, D, hs, D, ds, h, hs, D, b, D);
    return ap_buf_take(&t, NULL);
}

enum { MB = 1024, MD = 256, MH = 512 };

static cost_report mlp_report(form f, int n, const cost_device *dev)
{
    char *text = mlp(f, n, MB, MD, MH);
    cost_report r = report_of(text, dev, NULL);
    ap_free(text);
    return r;
}

/* ------------------------------------------------------------- registry */

START_TEST(test_registry_and_aliases)
{
    static const char *const want[] = {"tpu_v3", "tpu_v4", "tpu_v5e", "a100_40gb", "a100_80gb", "h100_sxm", "h100_96gb", "h200_sxm", "b200"};
    ck_assert_int_ge(cost_device_count(), 9);
    for (size_t i = 0; i < AP_ARRAY_LEN(want); i++) {
        cost_device d = device(want[i]);
        ck_assert_str_eq(d.name, want[i]);
        ck_assert_msg(d.source[0], "%s has no source", d.name);
        ck_assert(d.hbm_bytes > 0 && d.hbm_bandwidth > 0 && d.n_tiers >= 2);
        for (int p = 0; p < COST_PREC_COUNT; p++)
            ck_assert(cost_device_peak(&d, (cost_prec)p) > 0);
        ck_assert(d.tiers[d.n_tiers - 1].devices == 0);
        ck_assert(d.tiers[1].bandwidth < d.tiers[0].bandwidth);
    }
    struct {
        const char *alias, *name;
    } cases[] = {{"h100", "h100_sxm"},      {"H100-SXM", "h100_sxm"}, {"a100-80gb", "a100_80gb"},
                 {"A100", "a100_40gb"},     {"tpu_v3", "tpu_v3"},     {"TPU v3", "tpu_v3"},
                 {"tpu-v4", "tpu_v4"},      {"v5e", "tpu_v5e"},       {"H200", "h200_sxm"},
                 {"b200", "b200"},          {"a100_40gb", "a100_40gb"},
                 {"H100-96GB", "h100_96gb"}};
    for (size_t i = 0; i < AP_ARRAY_LEN(cases); i++)
        ck_assert_str_eq(device(cases[i].alias).name, cases[i].name);
    cost_device d;
    ap_error err;
    ck_assert_int_eq(cost_device_lookup("z80", &d, &err), AP_ENOTFOUND);
    ck_assert_msg(strstr(err.msg, "unknown device \"z80\" (known: tpu_v3, tpu_v4"), "%s", err.msg);

    /* the paper's figures (appendix A.2) */
    cost_device v3 = device("tpu_v3");
    ck_assert(v3.peak_flops[COST_PREC_F32] == 61.5e12 && v3.hbm_bytes == 16.0 * 1073741824.0);
    cost_device a100 = device("a100");
    ck_assert(a100.peak_flops[COST_PREC_F32] == 156e12 && a100.peak_flops[COST_PREC_BF16] == 312e12);
    /* f8 falls back to bf16 where there is no f8 unit */
    ck_assert(cost_device_peak(&a100, COST_PREC_F8) == 312e12);
    ck_assert(cost_device_peak(&v3, COST_PREC_VECTOR) == 61.5e12);
}
END_TEST

/* ------------------------------------------------------- JSON devices */

static const char *valid_json =
    "{\"name\": \"toy\", \"peak_flops\": {\"f32\": 1e12, \"bf16\": 2e12, \"int8\": 4e12},\n"
    " \"hbm_bytes\": 1e9, \"hbm_bandwidth\": 1e9,\n"
    " \"tiers\": [{\"name\": \"fast\", \"devices\": 4, \"bandwidth\": 1e9, \"latency\": 1e-6},\n"
    "           {\"name\": \"slow\", \"devices\": 0, \"bandwidth\": 1e8, \"latency\": 1e-5}],\n"
    " \"source\": \"made up\"}";

static cost_device toy(void)
{
    cost_device d;
    ap_error err;
    ck_assert_msg(cost_device_from_json(valid_json, strlen(valid_json), &d, &err) == 0, "%s", err.msg);
    return d;
}

static void expect_reject(const char *json, int code, const char *msg)
{
    cost_device d;
    ap_error err;
    ap_error_clear(&err);
    int rc = cost_device_from_json(json, strlen(json), &d, &err);
    ck_assert_msg(rc == code, "%s: rc %d (%s)", json, rc, err.msg);
    ck_assert_str_eq(err.msg, msg);
}

START_TEST(test_device_json)
{
    /* a valid file */
    char path[] = "/tmp/test_cost_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, valid_json, strlen(valid_json)), (int)strlen(valid_json));
    close(fd);
    cost_device d;
    ap_error err;
    ck_assert_msg(cost_device_load(path, &d, &err) == 0, "%s", err.msg);
    unlink(path);
    ck_assert_str_eq(d.name, "toy");
    ck_assert_int_eq(d.n_tiers, 2);
    ck_assert_str_eq(d.tiers[1].name, "slow");
    ck_assert(d.tiers[0].devices == 4 && d.tiers[1].bandwidth == 1e8 && d.tiers[0].latency == 1e-6);
    ck_assert(cost_device_peak(&d, COST_PREC_F16) == 2e12);   /* absent: bf16 rate */
    ck_assert(cost_device_peak(&d, COST_PREC_INT8) == 4e12);
    ck_assert(cost_device_peak(&d, COST_PREC_VECTOR) == 1e12); /* absent: f32 rate */
    ck_assert_str_eq(d.source, "made up");

    /* a file that is not there */
    ck_assert_int_eq(cost_device_load("/nonexistent/dev.json", &d, &err), AP_EIO);

    const char *T = "\"tiers\": [{\"name\": \"n\", \"devices\": 0, \"bandwidth\": 1e9, \"latency\": 0}]";
    char buf[1024];
#define JSON(...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)
    expect_reject(JSON("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bandwidth\": 1, %s}", T),
                  AP_EINVALID, "device JSON: missing key \"hbm_bytes\"");
    expect_reject(JSON("{\"name\": \"x\", \"flops\": 1, \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, "
                       "\"hbm_bandwidth\": 1, %s}", T),
                  AP_EINVALID, "device JSON: unknown key \"flops\"");
    expect_reject(JSON("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1, \"fp8\": 1}, \"hbm_bytes\": 1, "
                       "\"hbm_bandwidth\": 1, %s}", T),
                  AP_EINVALID, "device JSON: peak_flops: unknown key \"fp8\"");
    expect_reject(JSON("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1, %s}", T),
                  AP_EINVALID, "device JSON: peak_flops: missing key \"bf16\"");
    expect_reject(JSON("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, "
                       "\"hbm_bandwidth\": -3, %s}", T),
                  AP_EINVALID, "device JSON: \"hbm_bandwidth\" must be a positive number");
    expect_reject(JSON("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": \"lots\", "
                       "\"hbm_bandwidth\": 1, %s}", T),
                  AP_EINVALID, "device JSON: \"hbm_bytes\" must be a positive number");
    expect_reject("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1, "
                  "\"tiers\": [{\"name\": \"a\", \"devices\": 8, \"bandwidth\": 1, \"latency\": 0}, "
                  "{\"name\": \"b\", \"devices\": 0, \"bandwidth\": 1}]}",
                  AP_EINVALID, "device JSON: tiers[1]: missing key \"latency\"");
    expect_reject("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1, "
                  "\"tiers\": [{\"name\": \"a\", \"devices\": 8, \"bandwidth\": 1, \"latency\": 0, \"hops\": 2}]}",
                  AP_EINVALID, "device JSON: tiers[0]: unknown key \"hops\"");
    expect_reject("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1, "
                  "\"tiers\": [{\"name\": \"a\", \"devices\": 0, \"bandwidth\": 1, \"latency\": 0}, "
                  "{\"name\": \"b\", \"devices\": 0, \"bandwidth\": 1, \"latency\": 0}]}",
                  AP_EINVALID,
                  "device JSON: tiers[1]: \"devices\" must grow from tier to tier, 0 (unbounded) only on the last");
    expect_reject("{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1, "
                  "\"tiers\": []}",
                  AP_EINVALID, "device JSON: \"tiers\" must be an array of 1 to 4 objects");
    expect_reject(JSON("{\"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1, %s}", T),
                  AP_EINVALID, "device JSON: missing key \"name\"");
    expect_reject("[1, 2]", AP_EINVALID, "device JSON: the top level must be an object");
    ap_error_clear(&err);
    ck_assert_int_eq(cost_device_from_json("{\"name\": ", 9, &d, &err), AP_ESYNTAX);
    ck_assert_msg(strncmp(err.msg, "device JSON: line 1 column ", 27) == 0, "%s", err.msg);
#undef JSON
}
END_TEST

/* ------------------------------------------------------------------ tiers */

START_TEST(test_mesh_tiers)
{
    cost_device h100 = device("h100");
    cost_mesh m;
    ap_error err;
    ck_assert_int_eq(cost_mesh_parse("batch=4,model=8", &m, &err), 0);
    cost_mesh_default_tiers(&m, &h100);
    ck_assert_int_eq(m.tier[1], 0); /* model: 8 fit a node: NVLink */
    ck_assert_int_eq(m.tier[0], 1); /* batch: 32 devices: across nodes */
    ck_assert_int_eq(cost_mesh_parse("batch=2, model=4", &m, &err), 0);
    cost_mesh_default_tiers(&m, &h100);
    ck_assert(m.tier[0] == 0 && m.tier[1] == 0);
    ck_assert_int_eq(cost_mesh_parse("a=2,b=8,c=2", &m, &err), 0);
    cost_mesh_default_tiers(&m, &h100);
    ck_assert(m.tier[2] == 0 && m.tier[1] == 1 && m.tier[0] == 1);
    /* a TPU v3 pod slice of 32 cores is one ICI domain */
    cost_device v3 = device("tpu_v3");
    ck_assert_int_eq(cost_mesh_parse("batch=4,model=8", &m, &err), 0);
    cost_mesh_default_tiers(&m, &v3);
    ck_assert(m.tier[0] == 0 && m.tier[1] == 0);

    /* explicit tiers */
    ck_assert_int_eq(cost_mesh_set_tier(&m, &v3, "model", "DCN", &err), 0);
    ck_assert_int_eq(m.tier[1], 1);
    ck_assert_int_eq(cost_mesh_set_tier(&m, &v3, "model", "0", &err), 0);
    ck_assert_int_eq(m.tier[1], 0);
    ck_assert_int_eq(cost_mesh_set_tier(&m, &v3, "data", "ici", &err), AP_ENOTFOUND);
    ck_assert_str_eq(err.msg, "no mesh axis \"data\" (axes: batch, model)");
    ck_assert_int_eq(cost_mesh_set_tier(&m, &v3, "model", "nvlink", &err), AP_ENOTFOUND);
    ck_assert_str_eq(err.msg, "device tpu_v3 has no tier \"nvlink\" (tiers: ici, dcn)");

    /* malformed meshes */
    ck_assert_int_eq(cost_mesh_parse("batch", &m, &err), AP_ESYNTAX);
    ck_assert_int_eq(cost_mesh_parse("batch=0", &m, &err), AP_EINVALID);
    ck_assert_int_eq(cost_mesh_parse("x=2,x=2", &m, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh 'x=2,x=2': axis 'x' is given twice");
}
END_TEST

/* ------------------------------------------------------------ MLP laws */

START_TEST(test_bp_divides_flops)
{
    cost_device h100 = device("h100");
    cost_report one = mlp_report(SINGLE, 1, &h100);
    double param_bytes = 2.0 * MD * MH * 4, x_bytes = (double)MB * MD * 4;
    ck_assert(one.argument_bytes == (int64_t)(param_bytes + x_bytes));
    for (int n = 2; n <= 8; n *= 2) {
        cost_report bp = mlp_report(BP, n, &h100);
        ck_assert_msg(close_rel(bp.flops_per_device * n, one.flops_per_device, 0.01),
                      "n=%d: %g * n vs %g", n, bp.flops_per_device, one.flops_per_device);
        ck_assert(close_rel(bp.matmul_flops * n, one.matmul_flops, 1e-12));
        /* parameters are replicated: only the batch shrinks */
        ck_assert(bp.argument_bytes == (int64_t)(param_bytes + x_bytes / n));
        ck_assert(close_rel(bp.coll[COST_ALL_REDUCE].count, 2, 0));
        ck_assert(close_rel(bp.coll[COST_ALL_REDUCE].bytes, param_bytes, 0));
        ck_assert(bp.coll[COST_ALL_GATHER].count == 0 && bp.coll[COST_REDUCE_SCATTER].count == 0);
        ck_assert(bp.comm_s > 0 && bp.compute_s < one.compute_s);
        ck_assert(bp.peak_memory_bytes < one.peak_memory_bytes);
        ck_assert(bp.peak_memory_bytes >= (int64_t)param_bytes);
    }
    ck_assert(one.comm_s == 0);
    ck_assert(one.fits);
}
END_TEST

START_TEST(test_z3_divides_param_memory)
{
    /* an A100: no in-switch reduction, so an all_reduce is a ring too */
    cost_device h100 = device("a100_80gb");
    double param_bytes = 2.0 * MD * MH * 4, x_bytes = (double)MB * MD * 4;
    for (int n = 2; n <= 8; n *= 2) {
        cost_report bp = mlp_report(BP, n, &h100), z3 = mlp_report(Z3, n, &h100);
        ck_assert(z3.argument_bytes == (int64_t)(param_bytes / n + x_bytes / n));
        ck_assert(close_rel(z3.matmul_flops, bp.matmul_flops, 1e-12));
        /* the weight update runs on shards */
        ck_assert(z3.flops_per_device < bp.flops_per_device);
        ck_assert(close_rel(z3.coll[COST_ALL_GATHER].count, 2, 0));
        ck_assert(close_rel(z3.coll[COST_ALL_GATHER].bytes, param_bytes, 0)); /* gathered = full */
        ck_assert(close_rel(z3.coll[COST_REDUCE_SCATTER].count, 2, 0));
        ck_assert(close_rel(z3.coll[COST_REDUCE_SCATTER].bytes, param_bytes, 0));
        ck_assert(z3.coll[COST_ALL_REDUCE].count == 0);
        /* all_gather + reduce_scatter move what one all_reduce moves as a
         * ring (less the overhead of the collectives: four against two);
         * an all_reduce this small may take NCCL's tree, faster */
        double co = h100.collective_overhead;
        ck_assert(z3.coll[COST_ALL_GATHER].seconds + z3.coll[COST_REDUCE_SCATTER].seconds - 4 * co >=
                  (bp.coll[COST_ALL_REDUCE].seconds - 2 * co) * (1 - 1e-9));
    }
}
END_TEST

START_TEST(test_megatron_halves_matmuls)
{
    cost_device h100 = device("h100");
    cost_report one = mlp_report(SINGLE, 1, &h100), mp = mlp_report(MP, 2, &h100);
    ck_assert(close_rel(mp.matmul_flops * 2, one.matmul_flops, 1e-12));
    ck_assert(mp.flops_per_device < one.flops_per_device);
    ck_assert(close_rel(mp.coll[COST_ALL_REDUCE].count, 2, 0));
    ck_assert(close_rel(mp.coll[COST_ALL_REDUCE].bytes, 2.0 * MB * MD * 4, 0)); /* y and dx */
    for (int k = 0; k < COST_COLL_COUNT; k++)
        if (k != COST_ALL_REDUCE)
            ck_assert(mp.coll[k].count == 0);
    /* two all_reduces over 2 NVLink devices, each 2 * 1/2 * bytes over the
     * switch's reduction bandwidth (NVLink SHARP) + 2 steps, + the
     * collective's overhead */
    const cost_tier *nv = &h100.tiers[0];
    ck_assert(nv->allreduce_bandwidth > nv->bandwidth);
    double want = 2.0 * MB * MD * 4 / nv->allreduce_bandwidth + 2 * (2 * nv->latency + h100.collective_overhead);
    ck_assert_msg(close_rel(mp.comm_s, want, 1e-9), "%g vs %g", mp.comm_s, want);
    ck_assert(mp.argument_bytes < one.argument_bytes);
}
END_TEST

/* A reduction or gather over groups of one device (a sum or a tiling
 * along an axis of size 1: data=1 of a search over meshes) moves nothing
 * and XLA drops it (AllReduceSimplifier): no collectives in the report,
 * and the step of BP and Z3 on one device is the single device's, where
 * each collective cost the device's collective overhead. */
START_TEST(test_groups_of_one_dropped)
{
    cost_device h100 = device("h100");
    cost_report one = mlp_report(SINGLE, 1, &h100);
    form forms[] = {BP, MP, Z3};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        cost_report r = mlp_report(forms[i], 1, &h100);
        for (int k = 0; k < COST_COLL_COUNT; k++)
            ck_assert_msg(r.coll[k].count == 0, "form %zu: %d collectives of kind %d", i, (int)r.coll[k].count, k);
        ck_assert_msg(r.comm_s == 0, "form %zu: comm %g s", i, r.comm_s);
        /* MP's all_reduces stand where SINGLE negates: the other two add theirs to SINGLE's ops */
        ck_assert_msg(forms[i] == MP || close_rel(r.runtime_s, one.runtime_s, 1e-12), "form %zu: %g s vs %g s", i,
                      r.runtime_s, one.runtime_s);
    }
}
END_TEST

START_TEST(test_more_bandwidth_never_slower)
{
    static const double scales[] = {0.125, 0.5, 1, 2, 8, 64};
    static const double overlaps[] = {0, 0.5, 1};
    const char *names[] = {"h100", "tpu_v3", "a100"};
    for (form f = SINGLE; f <= Z3; f++) {
        char *text = mlp(f, f == SINGLE ? 1 : (f == MP ? 2 : 4), MB, MD, MH);
        ir_module *m = parse_ok(text);
        cost_program *p;
        ap_error err;
        ck_assert_msg(cost_prepare(m, &p, &err) == 0, "%s", err.msg);
        for (size_t di = 0; di < AP_ARRAY_LEN(names); di++)
            for (size_t oi = 0; oi < AP_ARRAY_LEN(overlaps); oi++)
                for (int which = 0; which < 3; which++) { /* HBM, links, both */
                    cost_options o = {.overlap = overlaps[oi], .framework = COST_FW_XLA};
                    double prev = INFINITY;
                    for (size_t si = 0; si < AP_ARRAY_LEN(scales); si++) {
                        cost_device d = device(names[di]);
                        if (which != 1)
                            d.hbm_bandwidth *= scales[si];
                        if (which != 0)
                            for (int t = 0; t < d.n_tiers; t++)
                                d.tiers[t].bandwidth *= scales[si];
                        cost_report r;
                        ck_assert_int_eq(cost_evaluate(p, &d, NULL, &o, &r, &err), 0);
                        ck_assert(isfinite(r.runtime_s) && r.runtime_s > 0);
                        ck_assert_msg(r.runtime_s <= prev, "form %d %s scale %g: %g > %g", f, names[di], scales[si],
                                      r.runtime_s, prev);
                        ck_assert(r.runtime_s <= r.compute_s + r.comm_s + 1e-18);
                        ck_assert(r.runtime_s >= fmax(r.compute_s, r.comm_s) - 1e-18);
                        prev = r.runtime_s;
                    }
                }
        cost_program_free(p);
        ir_module_free(m);
        ap_free(text);
    }
}
END_TEST

/* ---------------------------------------------------------- formulas */

START_TEST(test_ring_formulas_and_tiers)
{
    /* mesh x=2 (outer), y=4 (inner) on the toy device: y fits the 4-device
     * fast tier, x does not */
    char gy[256], gx[256], gall[256];
    groups_text(gy, sizeof gy, 2, 4, 1);  /* [[0,1,2,3],[4,5,6,7]]: y */
    groups_text(gx, sizeof gx, 4, 2, 4);  /* [[0,4],[1,5],...]: x */
    groups_text(gall, sizeof gall, 1, 8, 1);
    char text[8192];
    snprintf(text, sizeof text,
             "module @m attributes {mhlo.num_partitions = 8 : i32, autopart.mesh = \"x=2,y=4\"} {\n"
             "  func.func public @main(%%a: tensor<1000xf32>) -> (tensor<1000xf32>, tensor<2000xf32>, "
             "tensor<1000xf32>, tensor<1000xf32>, tensor<125xf32>) {\n"
             "    %%ar = \"stablehlo.all_reduce\"(%%a) <{" CH ", replica_groups = %s, use_global_device_ids}> "
             ADD_REGION("f32") " : (tensor<1000xf32>) -> tensor<1000xf32>\n"
             "    %%ag = \"stablehlo.all_gather\"(%%a) <{all_gather_dim = 0 : i64, " CH
             ", replica_groups = %s, use_global_device_ids}> : (tensor<1000xf32>) -> tensor<2000xf32>\n"
             "    %%cp = \"stablehlo.collective_permute\"(%%a) <{" CH ", source_target_pairs = "
             "dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<1000xf32>) -> tensor<1000xf32>\n"
             "    %%aa = \"stablehlo.all_to_all\"(%%a) <{" CH ", concat_dimension = 0 : i64, replica_groups = %s, "
             "split_count = 4 : i64, split_dimension = 0 : i64}> : (tensor<1000xf32>) -> tensor<1000xf32>\n"
             "    %%rs = \"stablehlo.reduce_scatter\"(%%a) <{" CH ", replica_groups = %s, scatter_dimension = 0 : i64, "
             "use_global_device_ids}> " ADD_REGION("f32") " : (tensor<1000xf32>) -> tensor<125xf32>\n"
             "    return %%ar, %%ag, %%cp, %%aa, %%rs : tensor<1000xf32>, tensor<2000xf32>, tensor<1000xf32>, "
             "tensor<1000xf32>, tensor<125xf32>\n  }\n}\n",
             gy, gx, gy, gall);
    cost_device d = toy();
    cost_report r = report_of(text, &d, NULL);
    double fast = 1e9, slow = 1e8, lf = 1e-6, ls = 1e-5;
    double ar = 2 * 3.0 / 4 * 4000 / fast + 6 * lf; /* y: fast */
    double ag = 1.0 / 2 * 8000 / slow + 1 * ls;      /* x: slow, gathered bytes */
    double cp = 4000 / fast + lf;                    /* within y */
    double aa = 3.0 / 4 * 4000 / fast + 3 * lf;
    /* x and y: the slow tier, over 4 links from each 4-device unit (the
     * group's part in one unit sends over as many); of the ring's 7 steps
     * one leaves a unit (the slow latency), 6 stay inside one (the fast) */
    double rs = 7.0 / 8 * 4000 / fmin(fast, 4 * slow) + 1 * ls + 6 * lf;
    ck_assert(close_rel(r.coll[COST_ALL_REDUCE].seconds, ar, 1e-12));
    ck_assert(close_rel(r.coll[COST_ALL_GATHER].seconds, ag, 1e-12));
    ck_assert(close_rel(r.coll[COST_COLLECTIVE_PERMUTE].seconds, cp, 1e-12));
    ck_assert(close_rel(r.coll[COST_ALL_TO_ALL].seconds, aa, 1e-12));
    ck_assert(close_rel(r.coll[COST_REDUCE_SCATTER].seconds, rs, 1e-12));
    ck_assert(close_rel(r.comm_s, ar + ag + cp + aa + rs, 1e-12));
    ck_assert(r.coll[COST_ALL_GATHER].bytes == 8000 && r.coll[COST_REDUCE_SCATTER].bytes == 4000);
    ck_assert(r.notes == 0);

    /* moving y to the slow tier slows the y collectives only */
    ir_module *m = parse_ok(text);
    cost_program *p;
    ap_error err;
    ck_assert_int_eq(cost_prepare(m, &p, &err), 0);
    cost_mesh mesh = *cost_program_mesh(p);
    cost_mesh_default_tiers(&mesh, &d);
    ck_assert_int_eq(cost_mesh_set_tier(&mesh, &d, "y", "slow", &err), 0);
    cost_report r2;
    ck_assert_int_eq(cost_evaluate(p, &d, &mesh, NULL, &r2, &err), 0);
    ck_assert(close_rel(r2.coll[COST_ALL_REDUCE].seconds, 2 * 3.0 / 4 * 4000 / slow + 6 * ls, 1e-12));
    ck_assert(close_rel(r2.coll[COST_ALL_GATHER].seconds, ag, 1e-12));
    /* a mesh that is not the program's */
    cost_mesh other;
    ck_assert_int_eq(cost_mesh_parse("x=8", &other, &err), 0);
    ck_assert_int_eq(cost_evaluate(p, &d, &other, NULL, &r2, &err), AP_EINVALID);
    /* overlap: max at 1, sum at 0 */
    cost_options o = {.overlap = 1, .framework = COST_FW_XLA};
    ck_assert_int_eq(cost_evaluate(p, &d, NULL, &o, &r2, &err), 0);
    ck_assert(r2.runtime_s == fmax(r2.compute_s, r2.comm_s));
    o.overlap = 2;
    ck_assert_int_eq(cost_evaluate(p, &d, NULL, &o, &r2, &err), AP_EINVALID);
    cost_program_free(p);
    ir_module_free(m);

    /* without a mesh: flat groups by size (4 fits the fast tier, 8 not) */
    char *flat = strdup(text);
    char *at = strstr(flat, ", autopart.mesh = \"x=2,y=4\"");
    memmove(at, at + strlen(", autopart.mesh = \"x=2,y=4\""), strlen(at + strlen(", autopart.mesh = \"x=2,y=4\"")) + 1);
    cost_report r3 = report_of(flat, &d, NULL);
    free(flat);
    ck_assert(r3.notes & COST_NOTE_NO_MESH);
    ck_assert(close_rel(r3.coll[COST_ALL_REDUCE].seconds, ar, 1e-12));
    ck_assert(close_rel(r3.coll[COST_ALL_GATHER].seconds, 1.0 / 2 * 8000 / fast + lf, 1e-12)); /* 2: fast */
    ck_assert(close_rel(r3.coll[COST_REDUCE_SCATTER].seconds, rs, 1e-12));
}
END_TEST

START_TEST(test_mesh_mismatch)
{
    const char *text = "module @m attributes {mhlo.num_partitions = 4 : i32, autopart.mesh = \"x=2,y=4\"} {\n"
                       "  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                       "    return %a : tensor<4xf32>\n  }\n}\n";
    ir_module *m = parse_ok(text);
    cost_program *p = NULL;
    ap_error err;
    ck_assert_int_eq(cost_prepare(m, &p, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "autopart.mesh \"x=2,y=4\" has 8 devices but mhlo.num_partitions = 4");
    ck_assert(p == NULL);
    ir_module_free(m);
}
END_TEST

START_TEST(test_roofline_and_fusion)
{
    /* exp(exp(exp(a))): one fused kernel, the two inner results on chip */
    const char *text = "module @m {\n"
                       "  func.func public @main(%a: tensor<256xf32>) -> tensor<256xf32> {\n"
                       "    %b = stablehlo.exponential %a : tensor<256xf32>\n"
                       "    %c = stablehlo.exponential %b : tensor<256xf32>\n"
                       "    %d = stablehlo.exponential %c : tensor<256xf32>\n"
                       "    return %d : tensor<256xf32>\n  }\n}\n";
    cost_device d = toy();
    cost_report r = report_of(text, &d, NULL);
    ck_assert(r.bytes_per_device == 2 * 1024);
    ck_assert(r.flops_per_device == 3 * 256 * 4.0);
    /* the kernel: max(its flops / vector peak, its bytes / bw) */
    double want = fmax(3 * 256 * 4.0 / 1e12, 2048 / 1e9);
    ck_assert_msg(close_rel(r.compute_s, want, 1e-12), "%g vs %g", r.compute_s, want);

    /* a dot_general: 2*M*N*K at the bf16 rate, batch dims included */
    const char *dot = "module @m {\n"
                      "  func.func public @main(%a: tensor<4x64x32xbf16>, %b: tensor<4x32x128xbf16>) -> tensor<4x64x128xbf16> {\n"
                      "    %c = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : "
                      "(tensor<4x64x32xbf16>, tensor<4x32x128xbf16>) -> tensor<4x64x128xbf16>\n"
                      "    return %c : tensor<4x64x128xbf16>\n  }\n}\n";
    r = report_of(dot, &d, NULL);
    ck_assert(r.matmul_flops == 2.0 * 4 * 64 * 128 * 32);
    double bytes = (4 * 64 * 32 + 4 * 32 * 128 + 4 * 64 * 128) * 2.0;
    ck_assert(r.bytes_per_device == bytes);
    ck_assert(close_rel(r.compute_s, fmax(r.matmul_flops / 2e12, bytes / 1e9), 1e-12));

    /* a convolution: 2 * output elements * window * input features / groups */
    const char *conv = "module @m {\n"
                       "  func.func public @main(%x: tensor<2x16x16x8xf32>, %k: tensor<3x3x4x6xf32>) -> tensor<2x14x14x6xf32> {\n"
                       "    %y = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
                       "window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : "
                       "(tensor<2x16x16x8xf32>, tensor<3x3x4x6xf32>) -> tensor<2x14x14x6xf32>\n"
                       "    return %y : tensor<2x14x14x6xf32>\n  }\n}\n";
    r = report_of(conv, &d, NULL);
    ck_assert_msg(r.matmul_flops == 2.0 * (2 * 14 * 14 * 6) * 9 * 4, "%g", r.matmul_flops);

    /* a reduce: one flop per input element */
    const char *red = "module @m {\n"
                      "  func.func public @main(%x: tensor<8x100xf32>) -> tensor<8xf32> {\n"
                      "    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
                      "    %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : "
                      "(tensor<8x100xf32>, tensor<f32>) -> tensor<8xf32>\n"
                      "    return %s : tensor<8xf32>\n  }\n}\n";
    r = report_of(red, &d, NULL);
    ck_assert(r.flops_per_device == 800);
    ck_assert(r.n_top == 1 && strcmp(r.top[0].op, "stablehlo.reduce") == 0 && r.top[0].line == 4);
}
END_TEST

START_TEST(test_live_ranges_and_donation)
{
#define CHAIN_FMT                                                                 \
    "module @m {\n"                                                              \
    "  func.func public @main(%%a: tensor<256xf32>%s) -> tensor<256xf32> {\n"   \
    "    %%b = stablehlo.exponential %%a : tensor<256xf32>\n"                    \
    "    %%c = stablehlo.exponential %%b : tensor<256xf32>\n"                    \
    "    %%d = stablehlo.exponential %%c : tensor<256xf32>\n"                    \
    "    return %%d : tensor<256xf32>\n  }\n}\n"
    char text[1024];
    cost_device d = toy();
    snprintf(text, sizeof text, CHAIN_FMT, "");
    cost_report r = report_of(text, &d, NULL);
    /* one kernel: the argument (the caller's buffer) and the result */
    ck_assert_int_eq(r.peak_memory_bytes, 2 * 1024);
    ck_assert_int_eq(r.argument_bytes, 1024);
    snprintf(text, sizeof text, CHAIN_FMT, " {tf.aliasing_output = 0 : i32}");
#undef CHAIN_FMT
    r = report_of(text, &d, NULL);
    /* donated: the result is written into a's buffer (nothing reads a after) */
    ck_assert_int_eq(r.peak_memory_bytes, 1024);

    /* a nested region's temporaries count at the op holding it; a value used
     * only inside the region lives until that op */
    const char *nested = "module @m {\n"
                         "  func.func public @main(%a: tensor<256xf32>, %p: tensor<i1>) -> tensor<256xf32> {\n"
                         "    %big = stablehlo.exponential %a : tensor<256xf32>\n"
                         "    %r = \"stablehlo.if\"(%p) ({\n"
                         "      %t1 = stablehlo.exponential %big : tensor<256xf32>\n"
                         "      %t2 = stablehlo.exponential %t1 : tensor<256xf32>\n"
                         "      stablehlo.return %t2 : tensor<256xf32>\n"
                         "    }, {\n"
                         "      stablehlo.return %a : tensor<256xf32>\n"
                         "    }) : (tensor<i1>) -> tensor<256xf32>\n"
                         "    return %r : tensor<256xf32>\n  }\n}\n";
    r = report_of(nested, &d, NULL);
    /* at the if: a, p, big (read inside, so a buffer), r, plus the branch's
     * one kernel t2 = exp(exp(big)) */
    ck_assert_int_eq(r.peak_memory_bytes, 1024 + 1 + 1024 + 1024 + 1024);
    ck_assert(r.notes & COST_NOTE_BRANCHES_SUMMED);

    /* too big for one device */
    const char *huge = "module @m {\n"
                       "  func.func public @main(%a: tensor<12000x1000000xf32>) -> tensor<12000x1000000xf32> {\n"
                       "    return %a : tensor<12000x1000000xf32>\n  }\n}\n";
    cost_device a100 = device("a100_40gb"), h100 = device("h100");
    r = report_of(huge, &a100, NULL);
    ck_assert_int_eq(r.peak_memory_bytes, INT64_C(48000000000));
    ck_assert(!r.fits);
    r = report_of(huge, &h100, NULL);
    ck_assert(r.fits);
    ap_buf b;
    ap_buf_init(&b);
    r = report_of(huge, &a100, NULL);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "per device, DOES NOT FIT in 37.25 GiB\n"), "%s", b.data);
    ap_buf_free(&b);
    /* held to a search's limit above the HBM (48 GB fits 64 GiB): the
     * verdict is the limit's, named with the HBM beside it (it once said
     * "DOES NOT FIT in 37.25 GiB" while the search had met its limit) */
    cost_report_hold_to(&r, 64.0 * 1073741824.0);
    ck_assert(r.fits);
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "per device, fits the 64.00 GiB limit (the device's HBM: 37.25 GiB)\n"), "%s",
                  b.data);
    ap_buf_free(&b);
    cost_report_hold_to(&r, 1e9);
    ck_assert(!r.fits);
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "per device, DOES NOT FIT the 953.67 MiB limit (the device's HBM: 37.25 GiB)\n"),
                  "%s", b.data);
    ap_buf_free(&b);
    cost_report_hold_to(&r, -1);
    ck_assert(r.fits);
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "per device, no memory limit (the device's HBM: 37.25 GiB)\n"), "%s", b.data);
    ap_buf_free(&b);
    /* an answer stored before the limit was carried was held to the HBM */
    json_t *j = cost_report_to_json(&r);
    json_t *c = json_object_get(j, "cost");
    ck_assert(json_is_null(json_object_get(c, "memory_limit_bytes")));
    json_object_del(c, "memory_limit_bytes");
    json_object_set_new(c, "fits", json_false());
    cost_report old;
    cost_report_from_json(c, &old);
    ck_assert(old.memory_limit_bytes == old.hbm_bytes && !old.fits);
    json_decref(j);
}
END_TEST

START_TEST(test_while_trip_count)
{
#define LOOP_FMT                                                                              \
        "module @m {\n" \
        "  func.func public @main(%%x: tensor<64x64xf32>) -> tensor<64x64xf32> {\n" \
        "    %%c0 = stablehlo.constant dense<0> : tensor<i32>\n" \
        "    %%n = stablehlo.constant dense<7> : tensor<i32>\n" \
        "    %%r:2 = stablehlo.while(%%i = %%c0, %%v = %%x) : tensor<i32>, tensor<64x64xf32>\n" \
        "     cond {\n" \
        "      %%lim = stablehlo.constant dense<%d> : tensor<i32>\n" \
        "      %%p = stablehlo.compare %s, %%i, %s, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n" \
        "      stablehlo.return %%p : tensor<i1>\n" \
        "    } do {\n" \
        "      %%one = stablehlo.constant dense<%d> : tensor<i32>\n" \
        "      %%i2 = stablehlo.add %%i, %%one : tensor<i32>\n" \
        "      %%v2 = stablehlo.dot_general %%v, %%v, contracting_dims = [1] x [0] : " \
        "(tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n" \
        "      stablehlo.return %%i2, %%v2 : tensor<i32>, tensor<64x64xf32>\n" \
        "    }\n" \
        "    return %%r#1 : tensor<64x64xf32>\n  }\n}\n"
    char text[2048];
    cost_device d = toy();
    double dot = 2.0 * 64 * 64 * 64;
    snprintf(text, sizeof text, LOOP_FMT, 10, "LT", "%lim", 1);
    cost_report r = report_of(text, &d, NULL);
    ck_assert_msg(r.matmul_flops == 10 * dot, "%g", r.matmul_flops);
    ck_assert(r.while_loops == 1 && r.while_loops_counted_once == 0 && !(r.notes & COST_NOTE_WHILE_ONCE));
    snprintf(text, sizeof text, LOOP_FMT, 10, "LT", "%lim", 3); /* 0, 3, 6, 9 */
    r = report_of(text, &d, NULL);
    ck_assert(r.matmul_flops == 4 * dot);
    /* a limit that is not a constant: counted once, and said so */
    snprintf(text, sizeof text, LOOP_FMT, 10, "LT", "%i", 1);
    r = report_of(text, &d, NULL);
    ck_assert(r.matmul_flops == dot);
    ck_assert(r.while_loops_counted_once == 1 && (r.notes & COST_NOTE_WHILE_ONCE));
    snprintf(text, sizeof text, LOOP_FMT, 10, "NE", "%lim", 1);
    r = report_of(text, &d, NULL);
    ck_assert(r.matmul_flops == dot && r.while_loops_counted_once == 1);
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "counted once"), "%s", b.data);
    ap_buf_free(&b);
}
END_TEST

/* An HLO while over a tuple, as XLA prints a scan: the counter is element 0
 * of the carried tuple, its init an element of the `tuple` operand, its
 * step in the body's result tuple; an all_reduce in the body. */
#define HLO_LOOP_FMT                                                                                  \
    "HloModule m, num_partitions=2\n\n"                                                               \
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"  \
    "body {\n"                                                                                        \
    "  p = (s32[], f32[64,64], s32[]) parameter(0)\n"                                                 \
    "  i = s32[] get-tuple-element(p), index=0\n"                                                     \
    "  x = f32[64,64] get-tuple-element(p), index=1\n"                                                \
    "  n = s32[] get-tuple-element(p), index=2\n"                                                     \
    "  one = s32[] constant(1)\n"                                                                     \
    "  i1 = s32[] add(one, i)\n"                                                                      \
    "  y = f32[64,64] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"               \
    "  z = f32[64,64] all-reduce(y), replica_groups={{0,1}}, to_apply=add\n"                          \
    "  ROOT t = (s32[], f32[64,64], s32[]) tuple(i1, z, n)\n"                                         \
    "}\n\n"                                                                                           \
    "cond {\n"                                                                                        \
    "  p = (s32[], f32[64,64], s32[]) parameter(0)\n"                                                 \
    "  i = s32[] get-tuple-element(p), index=0\n"                                                     \
    "  n = s32[] get-tuple-element(p), index=2\n"                                                     \
    "  lim = s32[] constant(5)\n"                                                                     \
    "  ROOT lt = pred[] compare(%s), direction=%s\n"                                                  \
    "}\n\n"                                                                                           \
    "ENTRY main {\n"                                                                                  \
    "  a = f32[64,64] parameter(0)\n"                                                                 \
    "  k = s32[] parameter(1)\n"                                                                      \
    "  z = s32[] constant(%d)\n"                                                                      \
    "  nn = s32[] constant(9)\n"                                                                      \
    "  t0 = (s32[], f32[64,64], s32[]) tuple(z, a, %s)\n"                                             \
    "  w = (s32[], f32[64,64], s32[]) while(t0), condition=cond, body=body%s\n"                       \
    "  ROOT r = f32[64,64] get-tuple-element(w), index=1\n"                                           \
    "}\n"

static cost_report hlo_loop_report(const char *cmp, const char *dir, int init, const char *bound, const char *extra)
{
    char text[4096];
    snprintf(text, sizeof text, HLO_LOOP_FMT, cmp, dir, init, bound, extra);
    cost_device d = toy();
    return report_of(text, &d, NULL);
}

START_TEST(test_while_trip_count_hlo_tuple)
{
    const double dot = 2.0 * 64 * 64 * 64, ar = 64.0 * 64 * 4;
    /* i < 5 from 0: 5 trips */
    cost_report r = hlo_loop_report("i, lim", "LT", 0, "nn", "");
    ck_assert_msg(r.matmul_flops == 5 * dot, "%g", r.matmul_flops);
    ck_assert(r.while_loops == 1 && r.while_loops_counted_once == 0 && !(r.notes & COST_NOTE_WHILE_ONCE));
    ck_assert_int_eq(r.n_loops, 1);
    ck_assert_int_eq(r.loops[0].trips, 5);
    ck_assert(r.loops[0].runs == 5 && r.loops[0].depth == 0 && r.loops[0].collectives == 1);
    ck_assert_str_eq(r.loops[0].name, "w");
    /* collectives: one as written, five per step */
    ck_assert(r.coll[COST_ALL_REDUCE].written == 1 && r.coll[COST_ALL_REDUCE].count == 5);
    ck_assert(r.coll[COST_ALL_REDUCE].bytes_written == ar && r.coll[COST_ALL_REDUCE].bytes == 5 * ar);
    /* from 2, i <= 5 (written `lim >= i`): 2..5, 4 trips */
    r = hlo_loop_report("lim, i", "GE", 2, "nn", "");
    ck_assert_int_eq(r.loops[0].trips, 4);
    ck_assert(r.matmul_flops == 4 * dot && r.coll[COST_ALL_REDUCE].count == 4);
    /* the bound a carried constant the body hands back: i < 9 */
    r = hlo_loop_report("i, n", "LT", 0, "nn", "");
    ck_assert_int_eq(r.loops[0].trips, 9);
    ck_assert(r.matmul_flops == 9 * dot);
    /* the bound a parameter: unknown, counted once, said so */
    r = hlo_loop_report("i, n", "LT", 0, "k", "");
    ck_assert_int_eq(r.loops[0].trips, -1);
    ck_assert(r.loops[0].runs == 1 && r.matmul_flops == dot && r.while_loops_counted_once == 1);
    ck_assert(r.notes & COST_NOTE_WHILE_ONCE);
    ck_assert(r.coll[COST_ALL_REDUCE].written == 1 && r.coll[COST_ALL_REDUCE].count == 1);
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "trips unknown (counted once"), "%s", b.data);
    json_t *j = cost_report_to_json(&r);
    json_t *loop = json_array_get(json_object_get(json_object_get(j, "cost"), "loops"), 0);
    ck_assert(loop && json_is_null(json_object_get(loop, "trips")));
    ck_assert_int_eq(json_integer_value(json_object_get(loop, "collectives")), 1);
    json_decref(j);
    ap_buf_free(&b);
    /* ... unless XLA wrote the trip count on the loop */
    r = hlo_loop_report("i, n", "LT", 0, "k", ", backend_config={\"known_trip_count\":{\"n\":\"8\"}}");
    ck_assert_int_eq(r.loops[0].trips, 8);
    ck_assert(r.matmul_flops == 8 * dot && r.while_loops_counted_once == 0);
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert_msg(strstr(b.data, "trips 8 "), "%s", b.data);
    j = cost_report_to_json(&r);
    loop = json_array_get(json_object_get(json_object_get(j, "cost"), "loops"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(loop, "trips")), 8);
    json_t *arj = json_object_get(json_object_get(json_object_get(j, "cost"), "collectives"), "all_reduce");
    ck_assert_int_eq(json_integer_value(json_object_get(arj, "written")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(arj, "count")), 8);
    json_decref(j);
    ap_buf_free(&b);
}
END_TEST

/* A scan's stack: the layer read with dynamic_slice at the counter and the
 * result written back with dynamic_update_slice (after a unit-dim
 * broadcast) are address computations and a bitcast - they cost nothing -
 * unless the slice itself is handed on as carried state (a copy). */
#define STACK_FMT                                                                                            \
    "func.func public @main(%%s: tensor<4x64xf32>, %%x: tensor<64xf32>) -> tensor<64xf32> {\n"              \
    "  %%c0 = stablehlo.constant dense<0> : tensor<i32>\n"                                                    \
    "  %%z1 = stablehlo.constant dense<0.0> : tensor<1x64xf32>\n"                                             \
    "  %%r:4 = stablehlo.while(%%i = %%c0, %%st = %%s, %%v = %%x, %%k = %%z1) : tensor<i32>, tensor<4x64xf32>, " \
    "tensor<64xf32>, tensor<1x64xf32>\n"                                                                      \
    "   cond {\n"                                                                                             \
    "    %%n = stablehlo.constant dense<4> : tensor<i32>\n"                                                   \
    "    %%p = stablehlo.compare LT, %%i, %%n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"           \
    "    stablehlo.return %%p : tensor<i1>\n"                                                                 \
    "  } do {\n"                                                                                              \
    "    %%z = stablehlo.constant dense<0> : tensor<i32>\n"                                                   \
    "    %%d = stablehlo.dynamic_slice %%st, %%i, %%z, sizes = [1, 64] : (tensor<4x64xf32>, tensor<i32>, "      \
    "tensor<i32>) -> tensor<1x64xf32>\n"                                                                      \
    "    %%w = stablehlo.reshape %%d : (tensor<1x64xf32>) -> tensor<64xf32>\n"                                \
    "    %%v2 = stablehlo.multiply %%v, %%w : tensor<64xf32>\n"                                               \
    "    %%b = stablehlo.broadcast_in_dim %%v2, dims = [1] : (tensor<64xf32>) -> tensor<1x64xf32>\n"          \
    "    %%st2 = stablehlo.dynamic_update_slice %%st, %%b, %%i, %%z : (tensor<4x64xf32>, tensor<1x64xf32>, "   \
    "tensor<i32>, tensor<i32>) -> tensor<4x64xf32>\n"                                                         \
    "    %%one = stablehlo.constant dense<1> : tensor<i32>\n"                                                 \
    "    %%i2 = stablehlo.add %%i, %%one : tensor<i32>\n"                                                     \
    "    stablehlo.return %%i2, %%st2, %%v2, %s : tensor<i32>, tensor<4x64xf32>, tensor<64xf32>, "            \
    "tensor<1x64xf32>\n"                                                                                      \
    "  }\n"                                                                                                   \
    "  return %%r#2 : tensor<64xf32>\n}\n"

static bool top_has(const cost_report *r, const char *op)
{
    for (int i = 0; i < r->n_top; i++)
        if (!strcmp(r->top[i].op, op))
            return true;
    return false;
}

START_TEST(test_scan_stack_slices)
{
    char text[4096];
    cost_device d = toy();
    cost_options o = {.top_k = COST_TOP_MAX, .framework = COST_FW_XLA};
    snprintf(text, sizeof text, STACK_FMT, "%k");
    cost_report r = report_of(text, &d, &o);
    ck_assert_int_eq(r.loops[0].trips, 4);
    ck_assert(top_has(&r, "stablehlo.multiply") && top_has(&r, "stablehlo.add"));
    ck_assert(!top_has(&r, "stablehlo.dynamic_slice") && !top_has(&r, "stablehlo.dynamic_update_slice") &&
              !top_has(&r, "stablehlo.broadcast_in_dim") && !top_has(&r, "stablehlo.reshape"));
    /* 4 trips: the multiply reads two [64] f32 (the slice where it lies)
     * and writes one, the counter add reads and writes a scalar (its
     * constant fused); 5 compares read a scalar and write an i1 */
    ck_assert_msg(r.bytes_per_device == 4 * (3 * 256 + 8) + 5 * 5, "%g", r.bytes_per_device);
    /* the slice handed on as carried state: copied (read and written) */
    snprintf(text, sizeof text, STACK_FMT, "%d");
    r = report_of(text, &d, &o);
    ck_assert(top_has(&r, "stablehlo.dynamic_slice"));
    ck_assert_msg(r.bytes_per_device == 4 * (3 * 256 + 8 + 2 * 256) + 5 * 5, "%g", r.bytes_per_device);
}
END_TEST

/* The scanned training steps of the corpus: MaxText's HLO while loops over
 * tuples (8 layers; 32 and 80 layers with collectives in the bodies) and
 * the deepseek step's four scans; every loop read, and the per-step
 * collectives the written ones times the trip counts. */
START_TEST(test_corpus_loop_trips)
{
    static const struct {
        const char *file;
        int n;
        int64_t trips[4];
    } cases[] = {
        {"xla_maxtext_train_step_1gpu_preopt.hlo", 2, {8, 8}},
        {"xla_maxtext_llama3_8b_cp_train_step_4dev_spmd.hlo", 2, {32, 32}},
        {"xla_maxtext_llama31_70b_train_step_16x8_spmd.hlo", 2, {80, 80}},
        {"xla_maxtext_deepseek_train_step_4dev_preopt.hlo", 4, {1, 2, 2, 1}},
    };
    cost_device h100 = device("h100");
    for (size_t i = 0; i < AP_ARRAY_LEN(cases); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/corpus/hlo/%s", AP_SHARED_DIR, cases[i].file);
        char *text = tl_read(path, NULL);
        ir_module *m = parse_ok(text);
        cost_report r;
        ap_error err;
        ck_assert_msg(cost_estimate(m, &h100, NULL, &r, &err) == 0, "%s: %s", cases[i].file, err.msg);
        ck_assert_msg(r.while_loops == (uint32_t)cases[i].n && r.while_loops_counted_once == 0 &&
                          r.n_loops == cases[i].n && !(r.notes & COST_NOTE_WHILE_ONCE),
                      "%s: %u loops, %u once", cases[i].file, r.while_loops, r.while_loops_counted_once);
        double extra = 0; /* executions beyond the written ones */
        for (int l = 0; l < r.n_loops; l++) {
            ck_assert_msg(r.loops[l].trips == cases[i].trips[l], "%s: loop %d: %lld trips", cases[i].file, l,
                          (long long)r.loops[l].trips);
            ck_assert(r.loops[l].runs == (double)cases[i].trips[l] && r.loops[l].line > 0);
            extra += (double)r.loops[l].collectives * (r.loops[l].runs - 1);
        }
        double written = 0, count = 0;
        for (int k = 0; k < COST_COLL_COUNT; k++) {
            written += r.coll[k].written;
            count += r.coll[k].count;
            ck_assert(r.coll[k].bytes >= r.coll[k].bytes_written || r.coll[k].written == 0);
        }
        ck_assert_msg(count == written + extra, "%s: %g per step, %g written, %g extra", cases[i].file, count,
                      written, extra);
        ir_module_free(m);
        ap_free(text);
    }
    /* StableHLO: JAX's fori_loop of five rounds, and an early-exit loop
     * (`i < 200 and not converged`) that must not be read as 200 trips */
    static const struct {
        const char *file;
        int64_t trips;
    } shlo[] = {{"sherloc_generic_random_categorical_f32_8.mlir", 5}, {"shlo_testdata_reg_incomplete_beta_chlo.mlir", -1}};
    for (size_t i = 0; i < AP_ARRAY_LEN(shlo); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/corpus/stablehlo/%s", AP_SHARED_DIR, shlo[i].file);
        char *text = tl_read(path, NULL);
        ir_module *m = parse_ok(text);
        cost_report r;
        ap_error err;
        ck_assert_msg(cost_estimate(m, &h100, NULL, &r, &err) == 0, "%s: %s", shlo[i].file, err.msg);
        ck_assert_int_eq(r.n_loops, 1);
        ck_assert_msg(r.loops[0].trips == shlo[i].trips, "%s: %lld trips", shlo[i].file, (long long)r.loops[0].trips);
        ck_assert(r.while_loops_counted_once == (shlo[i].trips < 0) && !!(r.notes & COST_NOTE_WHILE_ONCE) == (shlo[i].trips < 0));
        ir_module_free(m);
        ap_free(text);
    }
}
END_TEST

/* The same transformer written unrolled and scanned (modelgen scan=1: the
 * layers' weights stacked, the blocks in a forward and a reverse while, the
 * residuals stacked by dynamic_update_slice and read back by dynamic_slice)
 * costs about the same unpartitioned: the loops run `layers` times, the
 * stacks' slices are read where they lie, the carried buffers are not
 * counted twice.  What differs is fusion: the scan writes all 27
 * residuals of a layer into its stacks, where the unrolled program lets
 * the cheap ones (u * u, 0.5 u, broadcasts) be recomputed inside their
 * backward kernels, so the scanned form moves more: up to a third more on
 * `small` (and its loop counters add scalar arithmetic). */
START_TEST(test_scan_matches_unrolled)
{
    static const struct {
        const char *config, *extra;
        int layers;
    } cases[] = {{"tiny", "", 2}, {"tiny", "layers=3", 3}, {"small", "", 4}};
    /* the arithmetic and the traffic, not the kernels' launch overhead: the
     * scan adds loop counters and slicing kernels, which on a model this
     * small would be most of the time */
    cost_device h100 = device("h100");
    h100.kernel_overhead = 0;
    for (size_t i = 0; i < AP_ARRAY_LEN(cases); i++) {
        char scan[64];
        snprintf(scan, sizeof scan, "%s scan=1", cases[i].extra);
        ir_module *mu = tl_generate("transformer", cases[i].config, cases[i].extra);
        ir_module *ms = tl_generate("transformer", cases[i].config, scan);
        cost_report u, s;
        ap_error err;
        ck_assert_msg(cost_estimate(mu, &h100, NULL, &u, &err) == 0, "%s", err.msg);
        ck_assert_msg(cost_estimate(ms, &h100, NULL, &s, &err) == 0, "%s", err.msg);
        ck_assert(u.while_loops == 0 && s.while_loops == 2 && s.while_loops_counted_once == 0 && s.n_loops == 2);
        for (int l = 0; l < 2; l++)
            ck_assert_msg(s.loops[l].trips == cases[i].layers && s.loops[l].runs == cases[i].layers, "%s %s: %lld trips",
                          cases[i].config, cases[i].extra, (long long)s.loops[l].trips);
        ck_assert_msg(s.matmul_flops == u.matmul_flops, "%s: matmul %g vs %g", cases[i].config, s.matmul_flops,
                      u.matmul_flops);
        ck_assert_msg(close_rel(s.flops_per_device, u.flops_per_device, 0.03), "%s: flops %g vs %g", cases[i].config,
                      s.flops_per_device, u.flops_per_device);
        ck_assert_msg(s.bytes_per_device >= u.bytes_per_device && close_rel(s.bytes_per_device, u.bytes_per_device, 0.35),
                      "%s: HBM bytes %g vs %g", cases[i].config, s.bytes_per_device, u.bytes_per_device);
        ck_assert_msg(close_rel(s.runtime_s, u.runtime_s, 0.35), "%s %s: scanned %g s, unrolled %g s", cases[i].config,
                      cases[i].extra, s.runtime_s, u.runtime_s);
        ir_module_free(mu);
        ir_module_free(ms);
    }
}
END_TEST

START_TEST(test_calls_and_stale_ids)
{
    /* a private function called twice costs twice */
    const char *text = "module @m {\n"
                       "  func.func public @main(%x: tensor<32x32xf32>) -> tensor<32x32xf32> {\n"
                       "    %a = func.call @mm(%x) : (tensor<32x32xf32>) -> tensor<32x32xf32>\n"
                       "    %b = func.call @mm(%a) : (tensor<32x32xf32>) -> tensor<32x32xf32>\n"
                       "    return %b : tensor<32x32xf32>\n  }\n"
                       "  func.func private @mm(%y: tensor<32x32xf32>) -> tensor<32x32xf32> {\n"
                       "    %z = stablehlo.dot_general %y, %y, contracting_dims = [1] x [0] : "
                       "(tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>\n"
                       "    return %z : tensor<32x32xf32>\n  }\n}\n";
    cost_device d = toy();
    ir_module *m = parse_ok(text);
    cost_report r1, r2;
    ap_error err;
    ck_assert_int_eq(cost_estimate(m, &d, NULL, &r1, &err), 0);
    ck_assert(r1.matmul_flops == 2 * 2.0 * 32 * 32 * 32);
    ck_assert(r1.peak_memory_bytes >= 3 * 4096);
    /* scramble the numbering: same answer through the pointer map */
    ir_op *f = ir_module_entry(m);
    ir_block *body = ir_func_entry(f);
    body->args[0].id = 999;
    for (ir_op *op = body->first; op; op = op->next)
        for (uint32_t i = 0; i < op->n_results; i++)
            op->results[i].id += 7;
    ck_assert_int_eq(cost_estimate(m, &d, NULL, &r2, &err), 0);
    ck_assert(r2.matmul_flops == r1.matmul_flops && r2.peak_memory_bytes == r1.peak_memory_bytes &&
              r2.compute_s == r1.compute_s);
    ir_module_free(m);
}
END_TEST

/* ------------------------------------------------------- out of memory */

START_TEST(test_out_of_memory)
{
    char *text = mlp(BP, 4, MB, MD, MH);
    ir_module *m = parse_ok(text);
    cost_device h100 = device("h100");
    cost_report want;
    ap_error err;
    ck_assert_int_eq(cost_estimate(m, &h100, NULL, &want, &err), 0);
    int succeeded = 0, failed = 0;
    for (long budget = 0; budget < 200; budget++) {
        cost_program *p = NULL;
        tl_allocations_left = budget;
        ap_set_allocator(&tl_failing_allocator);
        int rc = cost_prepare(m, &p, &err);
        ap_set_allocator(NULL);
        tl_allocations_left = -1;
        if (rc == 0) {
            cost_report r;
            ck_assert_int_eq(cost_evaluate(p, &h100, NULL, NULL, &r, &err), 0);
            ck_assert(r.runtime_s == want.runtime_s && r.peak_memory_bytes == want.peak_memory_bytes);
            succeeded++;
        } else {
            ck_assert_int_eq(rc, AP_ENOMEM);
            ck_assert_ptr_null(p);
            failed++;
        }
        cost_program_free(p);
    }
    ck_assert_int_gt(succeeded, 0);
    ck_assert_int_gt(failed, 3);

    /* jansson allocates through the hook too, so the report's JSON meets
     * every failure: it is refused whole (AP_ENOMEM), never half written */
    tl_allocations_left = 0;
    ap_set_allocator(&tl_failing_allocator);
    json_t *o = json_object();
    ap_set_allocator(NULL);
    tl_allocations_left = -1;
    ck_assert_ptr_null(o);
    ap_buf full;
    ap_buf_init(&full);
    ck_assert_int_eq(cost_report_json(&want, &full), 0);
    int json_failed = 0;
    for (long budget = 0; budget < 400; budget++) {
        ap_buf b;
        ap_buf_init(&b);
        tl_allocations_left = budget;
        ap_set_allocator(&tl_failing_allocator);
        int rc = cost_report_json(&want, &b);
        ap_set_allocator(NULL);
        tl_allocations_left = -1;
        if (rc == 0) {
            ck_assert_str_eq(b.data, full.data);
        } else {
            ck_assert_int_eq(rc, AP_ENOMEM);
            json_failed++;
        }
        ap_buf_free(&b);
    }
    ck_assert_int_gt(json_failed, 100); /* jansson's own allocations failed, not only the buffer's */
    ap_buf_free(&full);
    ir_module_free(m);
    ap_free(text);
}
END_TEST

/* --------------------------------------------------------------- reports */

START_TEST(test_json_keys)
{
    cost_device h100 = device("h100");
    cost_report r = mlp_report(MP, 2, &h100);
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_json(&r, &b), 0);
    json_error_t jerr;
    json_t *root = json_loads(b.data, 0, &jerr);
    ck_assert_msg(root != NULL, "%s", jerr.text);
    json_t *cost = json_object_get(root, "cost");
    ck_assert(json_is_object(cost));
    static const char *const keys[] = {"runtime_s", "compute_s", "comm_s", "peak_memory_bytes", "flops_per_device", "fits"};
    for (size_t i = 0; i < AP_ARRAY_LEN(keys); i++)
        ck_assert_msg(json_object_get(cost, keys[i]), "missing %s", keys[i]);
    ck_assert(json_is_boolean(json_object_get(cost, "fits")));
    ck_assert(json_is_integer(json_object_get(cost, "peak_memory_bytes")));
    ck_assert(close_rel(json_number_value(json_object_get(cost, "runtime_s")), r.runtime_s, 1e-15));
    json_t *colls = json_object_get(cost, "collectives");
    ck_assert_int_eq(json_object_size(colls), 5);
    static const char *const kinds[] = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "collective_permute"};
    for (size_t i = 0; i < AP_ARRAY_LEN(kinds); i++) {
        json_t *k = json_object_get(colls, kinds[i]);
        ck_assert_msg(json_is_object(k), "missing %s", kinds[i]);
        ck_assert(json_object_get(k, "count") && json_object_get(k, "bytes") && json_object_get(k, "seconds"));
    }
    ck_assert(json_number_value(json_object_get(json_object_get(colls, "all_reduce"), "count")) == 2);
    json_t *top = json_object_get(cost, "top_ops");
    ck_assert(json_is_array(top) && json_array_size(top) == 10);
    json_t *first = json_array_get(top, 0);
    ck_assert(json_object_get(first, "op") && json_object_get(first, "line") && json_object_get(first, "seconds"));
    ck_assert(json_is_array(json_object_get(cost, "notes")));
    json_decref(root);
    ap_buf_free(&b);

    /* the text form names everything */
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &b), 0);
    ck_assert(strstr(b.data, "h100_sxm") && strstr(b.data, "all_reduce") && strstr(b.data, "stablehlo.dot_general"));
    ap_buf_free(&b);

    cost_options none = {.top_k = -1, .framework = COST_FW_XLA};
    r = report_of("module @m {\n  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                  "    %b = stablehlo.negate %a : tensor<4xf32>\n    return %b : tensor<4xf32>\n  }\n}\n",
                  &h100, &none);
    ck_assert_int_eq(r.n_top, 0);
}
END_TEST

/* ---------------------------------------------------------------- corpus */

/* A client prints a daemon's answer from its JSON: the report read back
 * (cost_report_from_json) prints as the one that wrote it, folded and
 * verbose, for a program with collectives, values of every layer live at
 * the peak and while loops.  (The CLI's reader once dropped the peak's
 * breakdown, the hidden share of communication and the counts as written.) */
START_TEST(test_report_read_back)
{
    cost_device h100 = device("h100");
    cost_report rs[5];
    rs[0] = mlp_report(Z3, 4, &h100);
    ir_module *m = tl_generate("transformer", "tiny", "layers=4 seq=64 batch=8");
    ir_module *ms = tl_generate("transformer", "tiny", "layers=4 scan=1");
    ap_error err;
    ck_assert(cost_estimate(m, &h100, NULL, &rs[1], &err) == 0);
    ck_assert(cost_estimate(ms, &h100, NULL, &rs[2], &err) == 0);
    ir_module_free(m);
    ir_module_free(ms);
    ck_assert_int_gt(rs[1].memory.n_values, 1);
    ck_assert_int_gt(rs[2].n_loops, 0);
    /* held to a search's limit, and to none */
    rs[3] = rs[1];
    cost_report_hold_to(&rs[3], 1024);
    rs[4] = rs[1];
    cost_report_hold_to(&rs[4], -1);
    for (int i = 0; i < 5; i++) {
        json_t *j = cost_report_to_json(&rs[i]);
        ck_assert_ptr_nonnull(j);
        cost_report back;
        cost_report_from_json(json_object_get(j, "cost"), &back);
        json_decref(j);
        for (int verbose = 0; verbose < 2; verbose++) {
            ap_buf a, b;
            ap_buf_init(&a);
            ap_buf_init(&b);
            int (*text)(const cost_report *, ap_buf *) = verbose ? cost_report_text_verbose : cost_report_text;
            ck_assert_int_eq(text(&rs[i], &a), 0);
            ck_assert_int_eq(text(&back, &b), 0);
            ck_assert_str_eq(b.data, a.data);
            ap_buf_free(&a);
            ap_buf_free(&b);
        }
    }
}
END_TEST

/* The cost report for people folds what repeats per layer (the values live
 * at the peak, a run of slowest ops of one time); verbose lists each. */
START_TEST(test_report_text_folds)
{
    cost_device h100 = device("h100");
    ir_module *m = tl_generate("transformer", "tiny", "layers=4 seq=64 batch=8");
    cost_report r;
    ap_error err;
    ck_assert(cost_estimate(m, &h100, NULL, &r, &err) == 0);
    ir_module_free(m);
    ap_buf a, b;
    ap_buf_init(&a);
    ap_buf_init(&b);
    ck_assert_int_eq(cost_report_text(&r, &a), 0);
    ck_assert_int_eq(cost_report_text_verbose(&r, &b), 0);
    /* the four layers' values of one size and op: one line, " x4", four places */
    const char *x4 = strstr(a.data, " x4 ");
    ck_assert_msg(x4, "%s", a.data);
    const char *eol = strchr(x4, '\n');
    int commas = 0;
    for (const char *q = x4; q < eol; q++)
        commas += *q == ',';
    ck_assert_msg(commas == 3, "%.*s", (int)(eol - x4), x4);
    ck_assert_ptr_null(strstr(b.data, " x4 "));
    /* every value on its own line when verbose */
    const char *lv = strstr(b.data, "largest live at the peak\n");
    ck_assert_ptr_nonnull(lv);
    int lines = 0;
    for (const char *q = strchr(lv, '\n') + 1; !strncmp(q, "    ", 4); q = strchr(q, '\n') + 1)
        lines++;
    ck_assert_int_eq(lines, r.memory.n_values);
    ap_buf_free(&a);
    ap_buf_free(&b);
}
END_TEST

START_TEST(test_corpus_collectives)
{
    static const char *const files[] = {"tt_gpt_oss_20b_2d_sharded.mlir", "tt_qwen3_32b_tp8_manual.mlir",
                                        "jax_backcompat_shardy_shard_map.mlir", "tt_jax_mlp_pipeline_parallel_loss.mlir"};
    cost_device h100 = device("h100");
    for (size_t i = 0; i < AP_ARRAY_LEN(files); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/corpus/stablehlo/%s", AP_SHARED_DIR, files[i]);
        char *text = tl_read(path, NULL);
        ir_module *m = parse_ok(text);
        cost_report r;
        ap_error err;
        ck_assert_msg(cost_estimate(m, &h100, NULL, &r, &err) == 0, "%s: %s", files[i], err.msg);
        ck_assert_msg(isfinite(r.runtime_s) && r.runtime_s > 0 && isfinite(r.compute_s) && isfinite(r.comm_s),
                      "%s: runtime %g", files[i], r.runtime_s);
        ck_assert_msg(r.comm_s > 0, "%s: no communication", files[i]);
        ck_assert(r.peak_memory_bytes > 0 && r.peak_memory_bytes >= r.argument_bytes);
        /* (the shard_map example only permutes: no flops, no HBM traffic) */
        ck_assert_msg(r.flops_per_device >= 0 && r.bytes_per_device >= 0 && isfinite(r.flops_per_device) &&
                          isfinite(r.bytes_per_device),
                      "%s: flops %g bytes %g", files[i], r.flops_per_device, r.bytes_per_device);
        double colls = 0;
        for (int k = 0; k < COST_COLL_COUNT; k++) {
            ck_assert(r.coll[k].count >= 0 && isfinite(r.coll[k].seconds) && r.coll[k].bytes >= 0);
            colls += r.coll[k].count;
        }
        ck_assert(colls > 0);
        ck_assert(r.notes & COST_NOTE_NO_MESH);
        ir_module_free(m);
        ap_free(text);
    }
}
END_TEST

START_TEST(test_corpus_all_files)
{
    char **names;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/corpus/stablehlo", AP_SHARED_DIR);
    int n = tl_list(dir, ".mlir", &names);
    cost_device v4 = device("tpu_v4");
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *text = tl_read(path, NULL);
        ir_module *m = tl_parse(text, names[i], NULL, 0);
        if (m) {
            cost_report r;
            ap_error err;
            int rc = cost_estimate(m, &v4, NULL, &r, &err);
            ck_assert_msg(rc == 0 || rc == AP_ENOTFOUND, "%s: %s", names[i], err.msg);
            if (rc == 0)
                ck_assert_msg(isfinite(r.runtime_s) && r.runtime_s >= 0 && r.peak_memory_bytes >= 0, "%s", names[i]);
            ir_module_free(m);
        }
        ap_free(text);
    }
    tl_list_free(names, n);
}
END_TEST

static Suite *cost_suite(void)
{
    Suite *s = suite_create("cost");
    TCase *tc = tcase_create("cost");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_registry_and_aliases);
    tcase_add_test(tc, test_device_json);
    tcase_add_test(tc, test_mesh_tiers);
    tcase_add_test(tc, test_bp_divides_flops);
    tcase_add_test(tc, test_z3_divides_param_memory);
    tcase_add_test(tc, test_megatron_halves_matmuls);
    tcase_add_test(tc, test_groups_of_one_dropped);
    tcase_add_test(tc, test_more_bandwidth_never_slower);
    tcase_add_test(tc, test_ring_formulas_and_tiers);
    tcase_add_test(tc, test_mesh_mismatch);
    tcase_add_test(tc, test_roofline_and_fusion);
    tcase_add_test(tc, test_live_ranges_and_donation);
    tcase_add_test(tc, test_while_trip_count);
    tcase_add_test(tc, test_while_trip_count_hlo_tuple);
    tcase_add_test(tc, test_scan_stack_slices);
    tcase_add_test(tc, test_corpus_loop_trips);
    tcase_add_test(tc, test_scan_matches_unrolled);
    tcase_add_test(tc, test_calls_and_stale_ids);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_json_keys);
    tcase_add_test(tc, test_report_read_back);
    tcase_add_test(tc, test_report_text_folds);
    tcase_add_test(tc, test_corpus_collectives);
    tcase_add_test(tc, test_corpus_all_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tl_run(cost_suite()); }
