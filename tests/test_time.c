/*
 * test_time.c - the step-time model of the cost model (costmodel/
 * evaluate.c): collectives against published nccl-tests figures (the bus
 * bandwidth NCCL's maintainer quotes for 8 x H100 in one node, the
 * figures of a 3-node A100 cluster), the small-message regime, the
 * hierarchy of nodes (k GPUs of a group in one node send over k NICs; a
 * ring pays the network's latency only on the steps that leave a node) and
 * the torus share of a TPU's ICI; the overlap of collectives with compute
 * that does not depend on them (hidden and exposed, the operand's producer
 * issued early); matmul efficiency by shape (tiles) and by dtype; kernel
 * overheads; and the device JSON keys that set all of these.
 */
#include "cost.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#define CH "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"
#define ADD_REGION(t)                                       \
    "({\n    ^bb0(%%ra: tensor<" t ">, %%rb: tensor<" t ">):\n" \
    "      %%rs = stablehlo.add %%ra, %%rb : tensor<" t ">\n"    \
    "      stablehlo.return %%rs : tensor<" t ">\n    })"

static cost_device device(const char *name)
{
    cost_device d;
    ap_error err;
    ck_assert_msg(cost_device_lookup(name, &d, &err) == 0, "%s", err.msg);
    return d;
}

static cost_report report_of(const char *text, const cost_device *dev)
{
    char msg[1024];
    ir_module *m = tl_parse(text, "test.mlir", msg, sizeof msg);
    ck_assert_msg(m != NULL, "parse failed: %s\n%s", msg, text);
    cost_report r;
    ap_error err;
    cost_options o = {.top_k = COST_TOP_MAX, .framework = COST_FW_XLA};
    ck_assert_msg(cost_estimate(m, dev, &o, &r, &err) == 0, "estimate: %s", err.msg);
    ir_module_free(m);
    return r;
}

/* dense<[[0..n-1]]> replica groups: one group of every device */
static void one_group(char *out, size_t cap, int n)
{
    size_t k = (size_t)snprintf(out, cap, "dense<[[");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%d", i ? ", " : "", i);
    snprintf(out + k, cap - k, "]]> : tensor<1x%dxi64>", n);
}

/* The time of one collective of `kind` over all n devices of mesh x=n on
 * dev, of `elems` f32 elements in (all_reduce, all_gather: per device in;
 * the gather's result n times that). */
static double coll_seconds(const char *kind, int n, long long elems, const cost_device *dev)
{
    char groups[4096], text[16384], in[64], out[64];
    one_group(groups, sizeof groups, n);
    snprintf(in, sizeof in, "tensor<%lldxf32>", elems);
    bool ag = !strcmp(kind, "all_gather");
    snprintf(out, sizeof out, "tensor<%lldxf32>", ag ? elems * n : elems);
    if (ag)
        snprintf(text, sizeof text,
                 "module @m attributes {mhlo.num_partitions = %d : i32, autopart.mesh = \"x=%d\"} {\n"
                 "  func.func public @main(%%a: %s) -> %s {\n"
                 "    %%r = \"stablehlo.all_gather\"(%%a) <{all_gather_dim = 0 : i64, " CH
                 ", replica_groups = %s, use_global_device_ids}> : (%s) -> %s\n"
                 "    return %%r : %s\n  }\n}\n",
                 n, n, in, out, groups, in, out, out);
    else
        snprintf(text, sizeof text,
                 "module @m attributes {mhlo.num_partitions = %d : i32, autopart.mesh = \"x=%d\"} {\n"
                 "  func.func public @main(%%a: %s) -> %s {\n"
                 "    %%r = \"stablehlo.all_reduce\"(%%a) <{" CH ", replica_groups = %s, use_global_device_ids}> "
                 ADD_REGION("f32") " : (%s) -> %s\n"
                 "    return %%r : %s\n  }\n}\n",
                 n, n, in, out, groups, in, out, out);
    cost_report r = report_of(text, dev);
    return r.comm_s;
}

/* nccl-tests' bus bandwidth of an all_reduce (doc/PERFORMANCE.md):
 * S / t * 2 (n - 1) / n; of an all_gather of S bytes in all: S / t *
 * (n - 1) / n. */
static double allreduce_busbw(double bytes, double t, int n) { return bytes / t * 2.0 * (n - 1) / n; }
static double allgather_busbw(double bytes, double t, int n) { return bytes / t * (double)(n - 1) / n; }

START_TEST(test_collectives_against_nccl_tests)
{
    /* 8 x H100 in one node (NVIDIA/nccl-tests issue #212, S. Jeaugey):
     * an all_reduce of a few GB reaches ~480 GB/s bus bandwidth with NVLink
     * SHARP, other collectives ~370 GB/s */
    cost_device h100 = device("h100");
    long long big = 1LL << 30; /* 4 GiB of f32 */
    double t = coll_seconds("all_reduce", 8, big, &h100);
    double bw = allreduce_busbw(4.0 * (double)big, t, 8);
    ck_assert_msg(bw > 0.95 * 480e9 && bw < 1.05 * 480e9, "all_reduce busbw %.1f GB/s", bw / 1e9);
    t = coll_seconds("all_gather", 8, big / 8, &h100);
    bw = allgather_busbw(4.0 * (double)big, t, 8);
    ck_assert_msg(bw > 0.95 * 370e9 && bw < 1.05 * 370e9, "all_gather busbw %.1f GB/s", bw / 1e9);

    /* 3 nodes of 8 x A100 with 4 HDR (200 Gbit/s) NICs each (nccl-tests
     * issue #119): all_reduce_perf up to 128 MB averages 84.8 GB/s bus
     * bandwidth, 96 at its peak.  The group has 8 GPUs per node, which
     * share the node's 4 NICs: 4 x 25 GB/s / 8 per GPU (90% of it as NCCL
     * reaches it), 8 of them at once. */
    cost_device a100 = device("a100_80gb");
    a100.tiers[1].bandwidth = 4 * 25e9 / 8 * 0.9;
    t = coll_seconds("all_reduce", 24, 32LL << 20, &a100); /* 128 MiB */
    bw = allreduce_busbw(128.0 * 1048576, t, 24);
    ck_assert_msg(bw > 0.8 * 96e9 && bw < 1.1 * 96e9, "3 x 8 A100 all_reduce busbw %.1f GB/s", bw / 1e9);
}
END_TEST

START_TEST(test_small_messages_and_hierarchy)
{
    cost_device h100 = device("h100");
    /* small: a latency floor, NCCL's tree (log2 n steps) below the ring's
     * 2 (n - 1) steps, the collective's overhead on top */
    double small = coll_seconds("all_reduce", 8, 2, &h100);
    double floor_tree = 2 * 3 * h100.tiers[0].latency + h100.collective_overhead;
    ck_assert_msg(small >= floor_tree && small < floor_tree * 1.01, "8 B all_reduce %.2f us", small * 1e6);
    ck_assert(small < 2 * 7 * h100.tiers[0].latency + h100.collective_overhead);
    /* time grows with size, never shrinks */
    double prev = 0;
    for (long long e = 1; e <= 1LL << 28; e *= 4) {
        double t = coll_seconds("all_reduce", 8, e, &h100);
        ck_assert_msg(t >= prev, "%lld elements: %g < %g", e, t, prev);
        prev = t;
    }
    /* across nodes: a group with all 8 GPUs of each of 2 nodes sends over 8
     * NICs per node (bus bandwidth min(NVLink, 8 NICs)); a group of one GPU
     * per node over one */
    double two_nodes = coll_seconds("all_gather", 16, 1 << 26, &h100);
    double want_bw = fmin(h100.tiers[0].bandwidth, 8 * h100.tiers[1].bandwidth);
    double bw = allgather_busbw(4.0 * 16 * (1 << 26), two_nodes, 16);
    ck_assert_msg(fabs(bw / want_bw - 1) < 0.01, "16 GPU all_gather busbw %.1f GB/s, want %.1f", bw / 1e9,
                  want_bw / 1e9);
    char text[8192];
    snprintf(text, sizeof text,
             "module @m attributes {mhlo.num_partitions = 16 : i32, autopart.mesh = \"node=2,gpu=8\"} {\n"
             "  func.func public @main(%%a: tensor<67108864xf32>) -> tensor<134217728xf32> {\n"
             "    %%r = \"stablehlo.all_gather\"(%%a) <{all_gather_dim = 0 : i64, " CH
             ", replica_groups = dense<[[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]]> : "
             "tensor<8x2xi64>, use_global_device_ids}> : (tensor<67108864xf32>) -> tensor<134217728xf32>\n"
             "    return %%r : tensor<134217728xf32>\n  }\n}\n");
    cost_report r = report_of(text, &h100);
    bw = allgather_busbw(4.0 * 134217728, r.comm_s, 2);
    ck_assert_msg(fabs(bw / h100.tiers[1].bandwidth - 1) < 0.01, "one GPU per node: %.1f GB/s", bw / 1e9);

    /* a TPU v4 torus: an axis over 4 of 64 chips (one of the cube's 3
     * dims) gets a third of the ICI links, an axis over all 64 all of them */
    cost_device v4 = device("tpu_v4");
    snprintf(text, sizeof text,
             "module @m attributes {mhlo.num_partitions = 64 : i32, autopart.mesh = \"fsdp=16,tp=4\"} {\n"
             "  func.func public @main(%%a: tensor<16777216xf32>) -> tensor<67108864xf32> {\n"
             "    %%r = \"stablehlo.all_gather\"(%%a) <{all_gather_dim = 0 : i64, " CH
             ", replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : "
             "(tensor<16777216xf32>) -> tensor<67108864xf32>\n"
             "    return %%r : tensor<67108864xf32>\n  }\n}\n");
    r = report_of(text, &v4);
    bw = allgather_busbw(4.0 * 67108864, r.comm_s, 4);
    ck_assert_msg(fabs(bw / (v4.tiers[0].bandwidth / 3) - 1) < 0.01, "tp=4 on v4: %.1f GB/s", bw / 1e9);
    double whole = coll_seconds("all_gather", 64, 1 << 22, &v4);
    bw = allgather_busbw(4.0 * 64 * (1 << 22), whole, 64);
    ck_assert_msg(fabs(bw / v4.tiers[0].bandwidth - 1) < 0.02, "64 chips on v4: %.1f GB/s", bw / 1e9);
}
END_TEST

/* A ring across nodes pays the network's latency only on the steps that
 * leave a node (NCCL's ncclTopoTuneModel, src/graph/tuning.cc: nNodes - 1
 * of its nRanks - 1 steps), the node's own on the rest.  Latencies set here,
 * so the figures are the hand computation's whatever the registry says. */
START_TEST(test_ring_latency_across_nodes)
{
    /* 256 H100s in 32 nodes of 8, an all_gather of one f32 per device:
     * 31 steps at 5 us + 224 at 1 us = 379 us (every step at 5 us: 1275) */
    cost_device h100 = device("h100");
    h100.tiers[0].latency = 1e-6;
    h100.tiers[1].latency = 5e-6;
    h100.collective_overhead = 0;
    double bw = fmin(h100.tiers[0].bandwidth, 8 * h100.tiers[1].bandwidth);
    double t = coll_seconds("all_gather", 256, 1, &h100) - 255.0 / 256 * 4 * 256 / bw;
    ck_assert_msg(fabs(t - 379e-6) < 1e-9, "256 GPUs in 32 nodes: %.3f us of latency, want 379", t * 1e6);
    /* inside one node every step is NVLink's: 7 us */
    t = coll_seconds("all_gather", 8, 1, &h100) - 7.0 / 8 * 4 * 8 / h100.tiers[0].bandwidth;
    ck_assert_msg(fabs(t - 7e-6) < 1e-9, "8 GPUs: %.3f us of latency, want 7", t * 1e6);
    /* 512 TPU v5e chips in 2 pods of 256: one step over the DCN (10 us),
     * 510 over ICI (1 us) = 520 us */
    cost_device v5e = device("tpu_v5e");
    v5e.tiers[0].latency = 1e-6;
    v5e.tiers[1].latency = 10e-6;
    v5e.collective_overhead = 0;
    bw = fmin(v5e.tiers[0].bandwidth, 256 * v5e.tiers[1].bandwidth);
    t = coll_seconds("all_gather", 512, 1, &v5e) - 511.0 / 512 * 4 * 512 / bw;
    ck_assert_msg(fabs(t - 520e-6) < 1e-9, "512 v5e in 2 pods: %.3f us of latency, want 520", t * 1e6);
}
END_TEST

/* ------------------------------------------------------------ overlap */

START_TEST(test_overlap_hides_independent_collectives)
{
    cost_device h100 = device("h100");
    char groups[256];
    one_group(groups, sizeof groups, 8);
    /* FSDP-like: the next weight is gathered while an unrelated matmul
     * runs (the gather's operand, a convert of the shard, written just
     * before its use as JAX writes it) */
    char text[8192];
    snprintf(text, sizeof text,
             "module @m attributes {mhlo.num_partitions = 8 : i32, autopart.mesh = \"x=8\"} {\n"
             "  func.func public @main(%%x: tensor<8192x8192xbf16>, %%w0: tensor<8192x8192xbf16>, "
             "%%s: tensor<1024x8192xf32>) -> tensor<8192x8192xbf16> {\n"
             "    %%y = stablehlo.dot_general %%x, %%w0, contracting_dims = [1] x [0] : (tensor<8192x8192xbf16>, "
             "tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>\n"
             "    %%c = stablehlo.convert %%s : (tensor<1024x8192xf32>) -> tensor<1024x8192xbf16>\n"
             "    %%w1 = \"stablehlo.all_gather\"(%%c) <{all_gather_dim = 0 : i64, " CH
             ", replica_groups = %s, use_global_device_ids}> : (tensor<1024x8192xbf16>) -> tensor<8192x8192xbf16>\n"
             "    %%z = stablehlo.dot_general %%y, %%w1, contracting_dims = [1] x [0] : (tensor<8192x8192xbf16>, "
             "tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>\n"
             "    return %%z : tensor<8192x8192xbf16>\n  }\n}\n",
             groups);
    cost_report r = report_of(text, &h100);
    ck_assert(r.comm_s > 0 && r.comm_s < r.compute_s / 4);
    ck_assert_msg(r.comm_exposed_s < 1e-9 && fabs(r.comm_hidden_s - r.comm_s) < 1e-12, "hidden %g, exposed %g",
                  r.comm_hidden_s, r.comm_exposed_s);
    ck_assert(fabs(r.runtime_s - r.compute_s) < 1e-12);
    /* --overlap 0 keeps what the schedule hides; 1 forces the max */
    /* a chain (the collective needs the matmul, the next matmul needs it):
     * nothing to hide behind */
    snprintf(text, sizeof text,
             "module @m attributes {mhlo.num_partitions = 8 : i32, autopart.mesh = \"x=8\"} {\n"
             "  func.func public @main(%%x: tensor<8192x8192xbf16>, %%w0: tensor<8192x8192xbf16>) -> "
             "tensor<8192x8192xbf16> {\n"
             "    %%y = stablehlo.dot_general %%x, %%w0, contracting_dims = [1] x [0] : (tensor<8192x8192xbf16>, "
             "tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>\n"
             "    %%s = \"stablehlo.all_reduce\"(%%y) <{" CH ", replica_groups = %s, use_global_device_ids}> "
             ADD_REGION("bf16") " : (tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>\n"
             "    %%z = stablehlo.dot_general %%s, %%w0, contracting_dims = [1] x [0] : (tensor<8192x8192xbf16>, "
             "tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>\n"
             "    return %%z : tensor<8192x8192xbf16>\n  }\n}\n",
             groups);
    r = report_of(text, &h100);
    ck_assert_msg(fabs(r.runtime_s - (r.compute_s + r.comm_s)) < 1e-12 * r.runtime_s && r.comm_hidden_s < 1e-12,
                  "chain: %g vs %g + %g", r.runtime_s, r.compute_s, r.comm_s);
    ck_assert(fabs(r.comm_exposed_s - r.comm_s) < 1e-12);
}
END_TEST

/* ------------------------------------------------------------ kernels */

static double dot_seconds(int m, int n, int k, const char *ty, const cost_device *dev)
{
    char text[2048];
    snprintf(text, sizeof text,
             "func.func public @main(%%a: tensor<%dx%dx%s>, %%b: tensor<%dx%dx%s>) -> tensor<%dx%dx%s> {\n"
             "  %%c = stablehlo.dot_general %%a, %%b, contracting_dims = [1] x [0] : (tensor<%dx%dx%s>, "
             "tensor<%dx%dx%s>) -> tensor<%dx%dx%s>\n"
             "  return %%c : tensor<%dx%dx%s>\n}\n",
             m, k, ty, k, n, ty, m, n, ty, m, k, ty, k, n, ty, m, n, ty, m, n, ty);
    return report_of(text, dev).compute_s;
}

START_TEST(test_matmul_efficiency_by_shape_and_dtype)
{
    cost_device h100 = device("h100");
    h100.kernel_overhead = 0;
    /* a large bf16 matmul: its flops at the efficiency the device reaches */
    double t = dot_seconds(8192, 8192, 8192, "bf16", &h100);
    double want = 2.0 * 8192 * 8192 * 8192 / (h100.peak_flops[COST_PREC_BF16] * h100.matmul_efficiency);
    ck_assert_msg(fabs(t / want - 1) < 1e-9, "%g vs %g", t, want);
    /* f32 at the TF32 rate: twice the time */
    ck_assert(fabs(dot_seconds(8192, 8192, 8192, "f32", &h100) / t - 2) < 1e-6);
    /* one row past a tile: the last tile paid in full (5 tiles of 128 for
     * M = 513 against 4 for 512) */
    double t512 = dot_seconds(512, 8192, 8192, "bf16", &h100), t513 = dot_seconds(513, 8192, 8192, "bf16", &h100);
    ck_assert_msg(fabs(t513 / t512 - 1.25) < 0.01, "M 513 / 512: %g", t513 / t512);
    /* a skinny matmul is bound by memory, not by its flops */
    double tv = dot_seconds(8, 8192, 8192, "bf16", &h100);
    double bytes = 2.0 * (8 * 8192 + 8192 * 8192 + 8 * 8192);
    ck_assert(fabs(tv / (bytes / (h100.hbm_bandwidth * h100.hbm_efficiency)) - 1) < 1e-9);
    /* kernel overheads: paid per kernel run */
    cost_device with = device("h100");
    double d = dot_seconds(128, 128, 128, "bf16", &with) - dot_seconds(128, 128, 128, "bf16", &h100);
    ck_assert(fabs(d - with.kernel_overhead) < 1e-12);
}
END_TEST

START_TEST(test_device_json_efficiency_keys)
{
    const char *json = "{\"name\": \"h100-96gb-500w\", \"peak_flops\": {\"f32\": 4e14, \"bf16\": 8e14},"
                       " \"hbm_bytes\": 96e9, \"hbm_bandwidth\": 2.4e12,"
                       " \"tiers\": [{\"name\": \"nvlink\", \"devices\": 8, \"bandwidth\": 370e9, \"latency\": 1e-6,"
                       "             \"allreduce_bandwidth\": 480e9},"
                       "            {\"name\": \"ib\", \"devices\": 0, \"bandwidth\": 45e9, \"latency\": 5e-6}],"
                       " \"matmul_efficiency\": 0.7, \"matmul_tile\": 128, \"hbm_efficiency\": 0.85,"
                       " \"kernel_overhead\": 3e-6, \"collective_overhead\": 1e-5}";
    cost_device d;
    ap_error err;
    ck_assert_msg(cost_device_from_json(json, strlen(json), &d, &err) == 0, "%s", err.msg);
    ck_assert(d.matmul_efficiency == 0.7 && d.matmul_tile == 128 && d.hbm_efficiency == 0.85);
    ck_assert(d.kernel_overhead == 3e-6 && d.collective_overhead == 1e-5 && d.tiers[0].allreduce_bandwidth == 480e9);
    static const struct {
        const char *key, *value, *msg;
    } bad[] = {
        {"matmul_efficiency", "0", "device JSON: \"matmul_efficiency\" must be a number above 0 and at most 1"},
        {"hbm_efficiency", "1.5", "device JSON: \"hbm_efficiency\" must be a number above 0 and at most 1"},
        {"matmul_tile", "1.5", "device JSON: \"matmul_tile\" must be an integer from 0 to 65536"},
        {"kernel_overhead", "-1", "device JSON: \"kernel_overhead\" must be a non-negative number"},
    };
    for (size_t i = 0; i < AP_ARRAY_LEN(bad); i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, \"hbm_bandwidth\": 1,"
                 " \"tiers\": [{\"name\": \"t\", \"devices\": 0, \"bandwidth\": 1, \"latency\": 0}], \"%s\": %s}",
                 bad[i].key, bad[i].value);
        ap_error_clear(&err);
        ck_assert_int_eq(cost_device_from_json(text, strlen(text), &d, &err), AP_EINVALID);
        ck_assert_str_eq(err.msg, bad[i].msg);
    }
    const char *torus = "{\"name\": \"x\", \"peak_flops\": {\"f32\": 1, \"bf16\": 1}, \"hbm_bytes\": 1, "
                        "\"hbm_bandwidth\": 1, \"tiers\": [{\"name\": \"ici\", \"devices\": 0, \"bandwidth\": 1, "
                        "\"latency\": 0, \"torus_dims\": 9}]}";
    ck_assert_int_eq(cost_device_from_json(torus, strlen(torus), &d, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "device JSON: tiers[0]: \"torus_dims\" must be an integer from 0 to 8");
    /* tpu_v5p is in the registry */
    cost_device v5p = device("v5p");
    ck_assert(v5p.peak_flops[COST_PREC_BF16] == 459e12 && v5p.tiers[0].torus_dims == 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("time");
    TCase *tc = tcase_create("time");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_collectives_against_nccl_tests);
    tcase_add_test(tc, test_ring_latency_across_nodes);
    tcase_add_test(tc, test_small_messages_and_hierarchy);
    tcase_add_test(tc, test_overlap_hides_independent_collectives);
    tcase_add_test(tc, test_matmul_efficiency_by_shape_and_dtype);
    tcase_add_test(tc, test_device_json_efficiency_keys);
    suite_add_tcase(s, tc);
    return tl_run(s);
}
