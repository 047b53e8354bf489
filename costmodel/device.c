/*
 * device.c - the device registry, custom devices from JSON, and meshes with
 * the interconnect tier of each axis.
 *
 * Figures are vendor datasheet values for one JAX device (a TPU v3
 * TensorCore; a TPU v4/v5e chip; a GPU), dense (no 2:4 sparsity).  Where a
 * vendor gives no figure the entry says "assumed" and why; latencies are such
 * assumptions everywhere (no datasheet publishes a per-step collective
 * latency): the usual order of magnitude of a small-message ring step.  A
 * ring across nodes pays a tier's latency only on its steps that cross that
 * tier (NCCL's model, evaluate.c's ring_latency).
 *
 * Tier bandwidth is what one device sends while receiving as much, the `bw`
 * of the ring formulas: for GPUs the bus bandwidth NCCL reaches over half
 * the bidirectional NVLink figure NVIDIA quotes (below); for TPUs the sum
 * over a chip's ICI links of one direction (Google's "all-reduce bandwidth
 * per pod" divided by the chips of the pod gives the same figure for v4 and
 * v5e), divided by the devices per chip, of which a group gets the share of
 * the torus's dims it spans (cost_tier.torus_dims).
 */
#include "cost_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GIB 1073741824.0

/* ============================================================= registry */

typedef struct device_entry {
    const char *aliases; /* normalized (lowercase, no - _ . space), '|'-separated */
    const char *short_name; /* the alias help texts show, or NULL */
    cost_device dev;
} device_entry;

/*
 * What kernels and collectives reach of the peaks (the second half of each
 * entry).  matmul_efficiency is fitted: bench/fidelity fits it per device
 * on that device's calibration rows of ../shared/notes/measured-runs.md
 * (the value of 0.10, 0.11, ..., 1.00 minimizing the squared log ratios of
 * predicted to measured step time) and reports the other rows as
 * validation.  Fitted 2026-11-26: tpu_v4 0.75 (M1), tpu_v5e 0.84 (M4),
 * a100_80gb 0.57 (J3, N1; refitted 2026-11-27, 0.61 before, when a ring
 * across nodes came to pay the network's latency only on the steps that
 * leave a node), h100_sxm 0.67 (J1), b200 0.25 (X1: XLA's
 * 1-GPU MaxText step reaches 20% of the B200's bf16 peak; one row, so
 * treat it as that program's figure), h100_96gb 0.42 (T1: torchtitan's
 * eager PyTorch on the 500 W part; T3 validates it); a device with no row takes its
 * die's (a100_40gb, h200_sxm) or the TPU rows' joint fit, FIT_TPU (tpu_v3,
 * tpu_v5p).  Priors, not fitted: hbm_efficiency 0.9 (STREAM-like copies
 * reach about 90% of HBM bandwidth), kernel_overhead 2 us on GPUs (launch
 * and tail) and 0.5 us on TPUs, collective_overhead 10 us / 5 us.
 *
 * Collective bandwidths are bus bandwidths as NCCL reaches them, not line
 * rates: NVLink carries about 80% of its line rate after protocol overhead
 * (S. Jeaugey, NCCL maintainer, in NVIDIA/nccl-tests issue #212: "450GB/s is
 * the line rate. With the protocol overhead (~20%) NCCL can get an
 * effective NVLink bandwidth of 370GB/s ... On 8 GPUs, you should reach a
 * peak busBw of ~480GB/s" for an all_reduce with NVLink SHARP on H100).
 * InfiniBand: assumed 90% of the NIC's line rate.
 */
#define GPU_TILE 128      /* cuBLAS / CUTLASS thread-block tiles of Ampere and Hopper: 128 x 128 (or 128 x 256) */
#define TPU_TILE 128      /* the MXU is 128 x 128 (Jouppi et al., ISCA 2023) */
#define NCCL_SHARE 0.822  /* 370 / 450: NVLink bus bandwidth over line rate (nccl-tests issue #212) */
#define IB_SHARE 0.9      /* assumed */
#define FIT_TPU 0.79      /* matmul_efficiency fitted on M1 and M4 together (bench/fidelity) */
#define FIT_H100_96GB 0.42 /* matmul_efficiency fitted on T1 alone (bench/fidelity) */

static const device_entry registry[] = {
    /* TPU v3, one TensorCore (what JAX calls a device; 2 per chip).
     * Compute and capacity as the PartIR paper states them (appendix A.2):
     * 16 GiB HBM2 per core, 61.5 TFLOP/s f32, 123 TFLOP/s f16 per core, 4 ICI
     * links per chip at 70 GB/s each.  Note Google's Cloud TPU v3 page
     * (cloud.google.com/tpu/docs/v3, 2018-) gives 123 TFLOP/s bf16 *per
     * chip*, i.e. half the paper's per-core rate; we keep the paper's figures
     * so estimates line up with its Table 3.  The MXU multiplies bf16, so f16
     * runs at the bf16 rate; no int8/f8 units.  HBM bandwidth: 900 GB/s per
     * chip (Cloud TPU v3 page), 450 GB/s per core.  ICI: 4 links x 70 GB/s per
     * chip (paper A.2) / 2 cores = 140 GB/s, a 2-D torus; a pod is 1024 chips
     * = 2048 cores (Cloud TPU v3 page).  DCN across pods: assumed 100 Gbit/s
     * per host of 4 chips (8 cores), 1.5625 GB/s per core. */
    {"tpuv3|v3|tpuv3core",
     NULL,
     {"tpu_v3",
      {61.5e12, 123e12, 123e12, 0, 0, 0},
      16 * GIB,
      450e9,
      2,
      {{"ici", 2048, 140e9, 1e-6, 0, 2}, {"dcn", 0, 1.5625e9, 10e-6, 0, 0}},
      FIT_TPU, TPU_TILE, 0.9, 0.5e-6, 5e-6,
      "PartIR paper (Alabed et al. 2024) appendix A.2; Google Cloud TPU v3 "
      "docs (cloud.google.com/tpu/docs/v3, 2018); matmul efficiency fitted by bench/fidelity"}},
    /* TPU v4, one chip (megacore: one JAX device).  Cloud TPU v4 page
     * (cloud.google.com/tpu/docs/v4, 2022): 275 TFLOP/s bf16 or int8, 32 GiB
     * HBM2 at 1200 GB/s, pods of 4096 chips in a 3-D torus, all-reduce
     * bandwidth per pod 1.1 PB/s = 268.6 GB/s per chip.  f32 matmuls: no
     * vendor figure; assumed half the bf16 rate (the paper's v3 ratio).  DCN:
     * assumed as v5e's documented share, 3.125 GB/s per chip. */
    {"tpuv4|v4",
     NULL,
     {"tpu_v4",
      {137.5e12, 275e12, 0, 0, 275e12, 0},
      32 * GIB,
      1200e9,
      2,
      {{"ici", 4096, 268.6e9, 1e-6, 0, 3}, {"dcn", 0, 3.125e9, 10e-6, 0, 0}},
      0.75, TPU_TILE, 0.9, 0.5e-6, 5e-6,
      "Google Cloud TPU v4 docs (cloud.google.com/tpu/docs/v4, 2022); "
      "Jouppi et al., ISCA 2023; matmul efficiency fitted by bench/fidelity"}},
    /* TPU v5e, one chip.  Cloud TPU v5e page (cloud.google.com/tpu/docs/v5e,
     * 2023): 197 TFLOP/s bf16, 393 TOP/s int8, 16 GB HBM2 at 819 GB/s, ICI
     * 400 GB/s bidirectional per chip (200 GB/s each way; all-reduce
     * bandwidth per pod 51.2 TB/s / 256 chips agrees), a 2-D torus, pods of
     * 256 chips, 2 x 100 Gbit/s NICs per host of 8 chips = 3.125 GB/s DCN
     * per chip.  f32: assumed half the bf16 rate; no f16/f8 units. */
    {"tpuv5e|v5e|tpuv5lite|v5litepod",
     NULL,
     {"tpu_v5e",
      {98.5e12, 197e12, 0, 0, 393e12, 0},
      16e9,
      819e9,
      2,
      {{"ici", 256, 200e9, 1e-6, 0, 2}, {"dcn", 0, 3.125e9, 10e-6, 0, 0}},
      0.84, TPU_TILE, 0.9, 0.5e-6, 5e-6,
      "Google Cloud TPU v5e docs (cloud.google.com/tpu/docs/v5e, 2023); "
      "matmul efficiency fitted by bench/fidelity"}},
    /* TPU v5p, one chip.  Cloud TPU v5p page (cloud.google.com/tpu/docs/v5p,
     * 2023): 459 TFLOP/s bf16, 918 TOP/s int8, 95 GiB HBM2e at 2765 GB/s,
     * ICI 4800 Gbit/s per chip (600 GB/s each way, as v5e's 1600 Gbit/s is
     * its 200), a 3-D torus, pods of 8960 chips.  f32: assumed half the bf16
     * rate.  DCN: assumed 200 Gbit/s per host of 4 chips = 6.25 GB/s per
     * chip. */
    {"tpuv5p|v5p",
     NULL,
     {"tpu_v5p",
      {229.5e12, 459e12, 0, 0, 918e12, 0},
      95 * GIB,
      2765e9,
      2,
      {{"ici", 8960, 600e9, 1e-6, 0, 3}, {"dcn", 0, 6.25e9, 10e-6, 0, 0}},
      FIT_TPU, TPU_TILE, 0.9, 0.5e-6, 5e-6,
      "Google Cloud TPU v5p docs (cloud.google.com/tpu/docs/v5p, 2023); "
      "matmul efficiency fitted by bench/fidelity"}},
    /* A100 SXM4 40 GB.  NVIDIA A100 Tensor Core GPU datasheet (2020,
     * nvidia.com/en-us/data-center/a100): TF32 156 TFLOP/s (the paper's "156
     * TFLOPS on float32", A.2), bf16/f16 312, int8 624 TOP/s, FP32 CUDA cores
     * 19.5 (vector); HBM2 40 GB at 1555 GB/s; NVLink 3 600 GB/s total = 300
     * GB/s each way, 82% of it as NCCL bus bandwidth (above; nccl-tests issue
     * #149 reports about 200 GB/s on one 8 x A100 machine), no NVLink SHARP;
     * 8 GPUs per DGX A100, one 200 Gbit/s HDR InfiniBand ConnectX-6 per GPU
     * = 25 GB/s (DGX A100 datasheet, 2020).  No f8. */
    {"a10040gb|a100|a10040g|a100sxm40gb|a100sxm440gb|a100sxm",
     "a100",
     {"a100_40gb",
      {156e12, 312e12, 312e12, 0, 624e12, 19.5e12},
      40e9,
      1555e9,
      2,
      {{"nvlink", 8, 300e9 * NCCL_SHARE, 1e-6, 0, 0}, {"infiniband", 0, 25e9 * IB_SHARE, 5e-6, 0, 0}},
      0.57, GPU_TILE, 0.9, 2e-6, 10e-6,
      "NVIDIA A100 Tensor Core GPU datasheet (2020); NVIDIA DGX A100 datasheet "
      "(2020); PartIR paper appendix A.2; NCCL bus bandwidth: NVIDIA/nccl-tests "
      "#212, #149; matmul efficiency fitted by bench/fidelity"}},
    /* A100 SXM4 80 GB: as the 40 GB part with HBM2e 80 GB at 2039 GB/s (same
     * datasheet, 2021 revision). */
    {"a10080gb|a10080g|a100sxm80gb|a100sxm480gb",
     NULL,
     {"a100_80gb",
      {156e12, 312e12, 312e12, 0, 624e12, 19.5e12},
      80e9,
      2039e9,
      2,
      {{"nvlink", 8, 300e9 * NCCL_SHARE, 1e-6, 0, 0}, {"infiniband", 0, 25e9 * IB_SHARE, 5e-6, 0, 0}},
      0.57, GPU_TILE, 0.9, 2e-6, 10e-6,
      "NVIDIA A100 Tensor Core GPU datasheet (2021); NVIDIA DGX A100 "
      "datasheet; NCCL bus bandwidth: NVIDIA/nccl-tests #212, #149; matmul efficiency "
      "fitted by bench/fidelity"}},
    /* H100 SXM5.  NVIDIA H100 Tensor Core GPU datasheet (2022-2023,
     * nvidia.com/en-us/data-center/h100), dense = half the sparse figures
     * listed: TF32 494.7, bf16/f16 989.4, fp8 1978.9, int8 1978.9 TOP/s,
     * FP32 CUDA cores 66.9 (vector); HBM3 80 GB at 3.35 TB/s; NVLink 4 900
     * GB/s total = 450 each way, 370 GB/s of it as NCCL bus bandwidth and 480
     * GB/s for an all_reduce with NVLink SHARP (nccl-tests issue #212); 8
     * GPUs per DGX H100, one 400 Gbit/s NDR ConnectX-7 per GPU = 50 GB/s
     * (DGX H100 datasheet, 2023). */
    {"h100sxm|h100|h100sxm5|h10080gb|h100sxm80gb",
     "h100",
     {"h100_sxm",
      {494.7e12, 989.4e12, 989.4e12, 1978.9e12, 1978.9e12, 66.9e12},
      80e9,
      3.35e12,
      2,
      {{"nvlink", 8, 450e9 * NCCL_SHARE, 1e-6, 480e9, 0}, {"infiniband", 0, 50e9 * IB_SHARE, 5e-6, 0, 0}},
      0.67, GPU_TILE, 0.9, 2e-6, 10e-6,
      "NVIDIA H100 Tensor Core GPU datasheet (2023); NVIDIA DGX H100 "
      "datasheet (2023); NCCL bus bandwidth: NVIDIA/nccl-tests #212; "
      "matmul efficiency fitted by bench/fidelity"}},
    /* H100 SXM with 96 GB of HBM2e at 500 W: the part of Meta's Grand Teton
     * hosts torchtitan's benchmarks ran on (pytorch/torchtitan,
     * benchmarks/llama3_h100_202412_torchtitan.md, "Hardware": "96GB HBM2e
     * with 2.4 TB/sec peak memory bandwidth", 8 per host "fully connected
     * with NVLink", "400 Gb/s per GPU" RDMA between hosts, "the default 500W
     * power limit").  The same die as h100_sxm (132 SMs, 4 tensor cores
     * each, 4096 dense bf16 flops per SM per clock: 989.4 TFLOP/s is 1830
     * MHz), held to 500 W instead of 700 W, so its tensor clock under a
     * matmul is lower; no vendor publishes it.  Its bounds: the H100 SXM
     * datasheet's 989.4 TFLOP/s bf16 dense (700 W) and the H100 NVL's 835.5
     * (NVIDIA H100 datasheet, NVL column, 2024: 1,671 sparse at 350-400 W,
     * i.e. the same 132 SMs at about 1545 MHz); torchtitan's note on its MFU
     * says the "actual peak TFLOPs number is between SXM and NVL, and we
     * don't know its exact value".  Assumed: the geometric middle of those
     * bounds, 909.2 TFLOP/s (about 1680 MHz), every precision scaled by the
     * same clock ratio 0.919 from h100_sxm's.  What the clock really is at
     * 500 W, and eager PyTorch's unfused kernels on top of it, are left to
     * matmul_efficiency, fitted on torchtitan's 8-GPU row (T1) alone, the
     * 128-GPU row (T3) kept for validation. */
    {"h10096gb|h100sxm96gb|h100hbm2e|h100hbm2e500w|h10096gb500w",
     NULL,
     {"h100_96gb",
      {454.6e12, 909.2e12, 909.2e12, 1818.4e12, 1818.4e12, 61.5e12},
      96e9,
      2.4e12,
      2,
      {{"nvlink", 8, 450e9 * NCCL_SHARE, 1e-6, 480e9, 0}, {"infiniband", 0, 50e9 * IB_SHARE, 5e-6, 0, 0}},
      FIT_H100_96GB, GPU_TILE, 0.9, 2e-6, 10e-6,
      "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (96 GB HBM2e, "
      "2.4 TB/s, 500 W, NVLink, 400 Gb/s RDMA); peak assumed between the NVIDIA H100 "
      "datasheet's SXM and NVL figures; NCCL bus bandwidth: NVIDIA/nccl-tests #212; "
      "matmul efficiency fitted by bench/fidelity on T1"}},
    /* H200 SXM.  NVIDIA H200 Tensor Core GPU datasheet (2024,
     * nvidia.com/en-us/data-center/h200): H100 SXM compute, HBM3e 141 GB at
     * 4.8 TB/s, NVLink 900 GB/s total (as H100, SHARP included); HGX H200
     * nodes of 8 with 400 Gbit/s per GPU (as DGX H100). */
    {"h200sxm|h200|h200141gb|h200sxm141gb",
     "h200",
     {"h200_sxm",
      {494.7e12, 989.4e12, 989.4e12, 1978.9e12, 1978.9e12, 66.9e12},
      141e9,
      4.8e12,
      2,
      {{"nvlink", 8, 450e9 * NCCL_SHARE, 1e-6, 480e9, 0}, {"infiniband", 0, 50e9 * IB_SHARE, 5e-6, 0, 0}},
      0.67, GPU_TILE, 0.9, 2e-6, 10e-6,
      "NVIDIA H200 Tensor Core GPU datasheet (2024); NCCL bus bandwidth: "
      "NVIDIA/nccl-tests #212; matmul efficiency fitted by bench/fidelity"}},
    /* B200 (HGX/DGX, 1000 W).  NVIDIA DGX B200 datasheet (2024,
     * nvidia.com/en-us/data-center/dgx-b200) and HGX B200 specifications,
     * per GPU, dense = half the sparse figures: TF32 1.1 PFLOP/s, bf16/f16
     * 2.25, fp8 4.5, int8 4.5 POP/s, FP32 80 TFLOP/s (vector); 1440 GB HBM3e
     * per 8 GPUs = 180 GB at 64/8 = 8 TB/s; NVLink 5 1.8 TB/s total = 900 GB/s
     * each way (82% of it as NCCL bus bandwidth, as on H100; no published
     * SHARP figure); 8x 400 Gbit/s ConnectX-7 per DGX = 50 GB/s per GPU. */
    {"b200|b200sxm|hgxb200|dgxb200",
     NULL,
     {"b200",
      {1.1e15, 2.25e15, 2.25e15, 4.5e15, 4.5e15, 80e12},
      180e9,
      8e12,
      2,
      {{"nvlink", 8, 900e9 * NCCL_SHARE, 1e-6, 0, 0}, {"infiniband", 0, 50e9 * IB_SHARE, 5e-6, 0, 0}},
      0.25, GPU_TILE, 0.9, 2e-6, 10e-6,
      "NVIDIA DGX B200 datasheet (2024); NVIDIA HGX B200 specifications; NCCL "
      "bus bandwidth: NVIDIA/nccl-tests #212 (as H100); matmul efficiency fitted by "
      "bench/fidelity"}},
};

int cost_device_count(void) { return (int)AP_ARRAY_LEN(registry); }

const cost_device *cost_device_at(int i)
{
    if (i < 0 || i >= cost_device_count())
        return NULL;
    return &registry[i].dev;
}

/* Lowercase without the separators people vary: "A100-80GB" -> "a10080gb". */
static void normalize(const char *s, char *out, size_t size)
{
    size_t n = 0;
    for (; *s && n + 1 < size; s++) {
        if (*s == '-' || *s == '_' || *s == ' ' || *s == '.')
            continue;
        out[n++] = (char)tolower((unsigned char)*s);
    }
    out[n] = '\0';
}

static bool alias_match(const char *aliases, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = aliases; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == kl && memcmp(p, key, kl) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

int cost_device_lookup(const char *name, cost_device *out, ap_error *err)
{
    char key[64];
    normalize(name ? name : "", key, sizeof key);
    for (int i = 0; i < cost_device_count(); i++) {
        char canon[64];
        normalize(registry[i].dev.name, canon, sizeof canon);
        if (strcmp(canon, key) == 0 || alias_match(registry[i].aliases, key)) {
            *out = registry[i].dev;
            return 0;
        }
    }
    ap_buf known;
    ap_buf_init(&known);
    cost_device_names(&known);
    int rc = ap_error_set(err, AP_ENOTFOUND, "unknown device \"%s\" (known: %s)", name ? name : "",
                          known.data ? known.data : "");
    ap_buf_free(&known);
    return rc;
}

void cost_device_names(ap_buf *b)
{
    for (int i = 0; i < cost_device_count(); i++) {
        ap_buf_printf(b, "%s%s", i ? ", " : "", registry[i].dev.name);
        if (registry[i].short_name)
            ap_buf_printf(b, " (or %s)", registry[i].short_name);
    }
}

double cost_device_peak(const cost_device *d, cost_prec p)
{
    double v = d->peak_flops[p];
    if (v > 0)
        return v;
    switch (p) {
    case COST_PREC_F16:
    case COST_PREC_F8:
    case COST_PREC_INT8:
        return d->peak_flops[COST_PREC_BF16];
    case COST_PREC_VECTOR:
        return d->peak_flops[COST_PREC_F32];
    default:
        return v;
    }
}

const char *cost_prec_name(cost_prec p)
{
    static const char *const names[COST_PREC_COUNT] = {"f32", "bf16", "f16", "f8", "int8", "vector"};
    return (unsigned)p < COST_PREC_COUNT ? names[p] : "?";
}

/* ========================================================== JSON devices */

/* Sets err for a problem with `key` inside `where` ("" at the top). */
static int json_fail(ap_error *err, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int json_fail(ap_error *err, const char *where, const char *fmt, ...)
{
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return ap_error_set(err, AP_EINVALID, "device JSON: %s%s%s", where, *where ? ": " : "", detail);
}

/* Rejects keys of obj not in `allowed` (NULL-terminated). */
static int check_keys(const json_t *obj, const char *const *allowed, const char *where, ap_error *err)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                ok = true;
        if (!ok)
            return json_fail(err, where, "unknown key \"%s\"", key);
    }
    return 0;
}

/* A number member: required or not, > 0 (positive) or >= 0. */
static int get_number(const json_t *obj, const char *key, bool required, bool positive, double *out,
                      const char *where, ap_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return json_fail(err, where, "missing key \"%s\"", key);
        return 0;
    }
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(d) || d < 0 || (positive && d <= 0))
        return json_fail(err, where, "\"%s\" must be a %s number", key, positive ? "positive" : "non-negative");
    *out = d;
    return 0;
}

/* An optional share in (0, 1]. */
static int get_share(const json_t *obj, const char *key, double *out, const char *where, ap_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(d > 0 && d <= 1))
        return json_fail(err, where, "\"%s\" must be a number above 0 and at most 1", key);
    *out = d;
    return 0;
}

/* An optional integer in [lo, hi]. */
static int get_count(const json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, const char *where,
                     ap_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return json_fail(err, where, "\"%s\" must be an integer from %lld to %lld", key, (long long)lo, (long long)hi);
    *out = (int64_t)json_integer_value(v);
    return 0;
}

static int get_name(const json_t *obj, const char *key, char *out, size_t size, const char *where,
                    ap_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return json_fail(err, where, "missing key \"%s\"", key);
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= size ||
        strlen(json_string_value(v)) != json_string_length(v))
        return json_fail(err, where, "\"%s\" must be a string of 1 to %zu characters", key, size - 1);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int device_from_obj(const json_t *root, cost_device *d, ap_error *err)
{
    static const char *const top_keys[] = {"name",         "peak_flops",       "hbm_bytes",           "hbm_bandwidth",
                                           "tiers",        "matmul_efficiency", "matmul_tile",        "hbm_efficiency",
                                           "kernel_overhead", "collective_overhead", "source",         NULL};
    static const char *const flop_keys[] = {"f32", "bf16", "f16", "f8", "int8", "vector", NULL};
    static const char *const tier_keys[] = {"name", "devices", "bandwidth", "latency", "allreduce_bandwidth", "torus_dims",
                                            NULL};
    int rc;
    memset(d, 0, sizeof *d);
    if (!json_is_object(root))
        return json_fail(err, "", "the top level must be an object");
    if ((rc = check_keys(root, top_keys, "", err)) < 0)
        return rc;
    if ((rc = get_name(root, "name", d->name, sizeof d->name, "", err)) < 0)
        return rc;

    json_t *flops = json_object_get(root, "peak_flops");
    if (!flops)
        return json_fail(err, "", "missing key \"peak_flops\"");
    if (!json_is_object(flops))
        return json_fail(err, "", "\"peak_flops\" must be an object");
    if ((rc = check_keys(flops, flop_keys, "peak_flops", err)) < 0)
        return rc;
    for (int p = 0; p < COST_PREC_COUNT; p++) {
        bool required = p == COST_PREC_F32 || p == COST_PREC_BF16;
        if ((rc = get_number(flops, flop_keys[p], required, required, &d->peak_flops[p], "peak_flops", err)) < 0)
            return rc;
    }
    if ((rc = get_number(root, "hbm_bytes", true, true, &d->hbm_bytes, "", err)) < 0 ||
        (rc = get_number(root, "hbm_bandwidth", true, true, &d->hbm_bandwidth, "", err)) < 0)
        return rc;
    if ((rc = get_share(root, "matmul_efficiency", &d->matmul_efficiency, "", err)) < 0 ||
        (rc = get_share(root, "hbm_efficiency", &d->hbm_efficiency, "", err)) < 0 ||
        (rc = get_count(root, "matmul_tile", 0, 1 << 16, &d->matmul_tile, "", err)) < 0 ||
        (rc = get_number(root, "kernel_overhead", false, false, &d->kernel_overhead, "", err)) < 0 ||
        (rc = get_number(root, "collective_overhead", false, false, &d->collective_overhead, "", err)) < 0)
        return rc;

    json_t *tiers = json_object_get(root, "tiers");
    if (!tiers)
        return json_fail(err, "", "missing key \"tiers\"");
    if (!json_is_array(tiers) || json_array_size(tiers) < 1 || json_array_size(tiers) > COST_MAX_TIERS)
        return json_fail(err, "", "\"tiers\" must be an array of 1 to %d objects", COST_MAX_TIERS);
    d->n_tiers = (int)json_array_size(tiers);
    for (int i = 0; i < d->n_tiers; i++) {
        char where[32];
        snprintf(where, sizeof where, "tiers[%d]", i);
        json_t *t = json_array_get(tiers, (size_t)i);
        cost_tier *ct = &d->tiers[i];
        if (!json_is_object(t))
            return json_fail(err, where, "must be an object");
        if ((rc = check_keys(t, tier_keys, where, err)) < 0 ||
            (rc = get_name(t, "name", ct->name, sizeof ct->name, where, err)) < 0)
            return rc;
        json_t *dv = json_object_get(t, "devices");
        if (!dv)
            return json_fail(err, where, "missing key \"devices\"");
        if (!json_is_integer(dv) || json_integer_value(dv) < 0)
            return json_fail(err, where, "\"devices\" must be a non-negative integer");
        ct->devices = (int64_t)json_integer_value(dv);
        int64_t dims = 0;
        if ((rc = get_number(t, "bandwidth", true, true, &ct->bandwidth, where, err)) < 0 ||
            (rc = get_number(t, "latency", true, false, &ct->latency, where, err)) < 0 ||
            (rc = get_number(t, "allreduce_bandwidth", false, false, &ct->allreduce_bandwidth, where, err)) < 0 ||
            (rc = get_count(t, "torus_dims", 0, 8, &dims, where, err)) < 0)
            return rc;
        ct->torus_dims = (int)dims;
        if (i > 0 && (d->tiers[i - 1].devices == 0 || (ct->devices != 0 && ct->devices <= d->tiers[i - 1].devices)))
            return json_fail(err, where, "\"devices\" must grow from tier to tier, 0 (unbounded) only on the last");
        for (int j = 0; j < i; j++)
            if (strcasecmp(d->tiers[j].name, ct->name) == 0)
                return json_fail(err, where, "duplicate tier name \"%s\"", ct->name);
    }

    json_t *src = json_object_get(root, "source");
    if (src) {
        if (!json_is_string(src))
            return json_fail(err, "", "\"source\" must be a string");
        snprintf(d->source, sizeof d->source, "%s", json_string_value(src));
    }
    return 0;
}

int cost_device_from_json(const char *text, size_t len, cost_device *out, ap_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ap_error_set(err, AP_ESYNTAX, "device JSON: line %d column %d: %s", jerr.line, jerr.column,
                            jerr.text);
    cost_device d;
    int rc = device_from_obj(root, &d, err);
    json_decref(root);
    if (rc == 0)
        *out = d;
    return rc;
}

int cost_device_load(const char *path, cost_device *out, ap_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = ap_read_file(path, &text, &len, err);
    if (rc < 0)
        return rc;
    rc = cost_device_from_json(text, len, out, err);
    if (rc < 0 && err)
        snprintf(err->file, sizeof err->file, "%s", path);
    ap_free(text);
    return rc;
}

/* ================================================================= mesh */

int cost_mesh_parse(const char *text, cost_mesh *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text ? text : "";
    while (*p == ' ')
        p++;
    if (!*p)
        return 0; /* no mesh: flat groups */
    ir_mesh m;
    int rc = ir_mesh_parse(p, &m, err);
    if (rc < 0)
        return rc;
    out->naxes = m.n_axes;
    for (int a = 0; a < m.n_axes; a++) {
        snprintf(out->names[a], sizeof out->names[a], "%s", m.names[a]);
        out->sizes[a] = m.sizes[a];
    }
    return 0;
}

void cost_mesh_default_tiers(cost_mesh *mesh, const cost_device *dev)
{
    int64_t product = 1;
    int t = 0;
    for (int a = mesh->naxes - 1; a >= 0; a--) {
        product *= mesh->sizes[a];
        while (t < dev->n_tiers - 1 && dev->tiers[t].devices != 0 && product > dev->tiers[t].devices)
            t++;
        mesh->tier[a] = t;
    }
}

int cost_mesh_set_tier(cost_mesh *mesh, const cost_device *dev, const char *axis, const char *tier,
                       ap_error *err)
{
    int a = -1, t = -1;
    for (int i = 0; i < mesh->naxes; i++)
        if (strcmp(mesh->names[i], axis) == 0)
            a = i;
    if (a < 0) {
        char names[400] = "";
        size_t n = 0;
        for (int i = 0; i < mesh->naxes && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", mesh->names[i]);
        return ap_error_set(err, AP_ENOTFOUND, "no mesh axis \"%s\" (axes: %s)", axis, names);
    }
    for (int i = 0; i < dev->n_tiers; i++)
        if (strcasecmp(dev->tiers[i].name, tier) == 0)
            t = i;
    if (t < 0) {
        char *end;
        long v = strtol(tier, &end, 10);
        if (end != tier && *end == '\0' && v >= 0 && v < dev->n_tiers)
            t = (int)v;
    }
    if (t < 0) {
        char names[300] = "";
        size_t n = 0;
        for (int i = 0; i < dev->n_tiers && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", dev->tiers[i].name);
        return ap_error_set(err, AP_ENOTFOUND, "device %s has no tier \"%s\" (tiers: %s)", dev->name, tier, names);
    }
    mesh->tier[a] = t;
    return 0;
}

const char *cost_framework_name(cost_framework f) { return f == COST_FW_EAGER ? "pytorch_eager" : "xla"; }

const char *cost_framework_text(cost_framework f)
{
    return f == COST_FW_EAGER ? "PyTorch eager" : "XLA buffer assignment";
}

int cost_framework_parse(const char *name, cost_framework *out, ap_error *err)
{
    if (!strcasecmp(name, "xla")) {
        *out = COST_FW_XLA;
        return 0;
    }
    if (!strcasecmp(name, "pytorch_eager") || !strcasecmp(name, "pytorch-eager")) {
        *out = COST_FW_EAGER;
        return 0;
    }
    return ap_error_set(err, AP_EINVALID, "unknown framework '%s' (xla or pytorch_eager)", name);
}
