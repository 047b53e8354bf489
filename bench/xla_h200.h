/*
 * xla_h200.h - single-device zoo programs compiled and run by XLA on one
 * NVIDIA H200: XLA's own peak (its buffer assignment) and the measured step
 * time, the rows of bench_fidelity's section "single-device programs
 * measured with XLA on an H200".  Validation only: no constant of the cost
 * model is fitted on them, and none may be.
 *
 * Provenance: measured 2026-11-27 on one NVIDIA H200 (141 GB HBM3e), jax
 * 0.11.2 and its PJRT GPU backend (XLA of that release), by
 * bench/xla_measure.py on the program `tests/models/modelgen ARGS` writes:
 *   python3 bench/xla_measure.py PROG.mlir 5
 * peak: get_compiled_memory_stats(), arguments + outputs - aliased +
 * temporaries (what XLA's memory-usage report calls its total; in GiB as
 * printed there, two decimals); step: the median of 5 executions after 2
 * warm-ups, each timed from the call to its results being ready, on fresh
 * random inputs (ms).  XLA's dumps of four of them (optimized HLO, buffer
 * assignment) are read by bench/xla_buffers.py.  Header-only, as runs.h.
 */
#ifndef BENCH_XLA_H200_H
#define BENCH_XLA_H200_H

static const struct xla_row {
    const char *id, *model; /* modelgen arguments */
    double peak_gib, step_ms;
} XLA_H200[] = {
    {"l8b_l4_b2", "transformer --config llama3_8b layers=4 batch=2 seq=4096", 51.11, 150.8},
    {"l8b_l4_b2_scan", "transformer --config llama3_8b layers=4 batch=2 seq=4096 scan=1", 69.82, 193.7},
    {"l8b_l4_b2_remat", "transformer --config llama3_8b layers=4 batch=2 seq=4096 remat=full", 36.94, 182.0},
    {"l8b_l4_b4_bf16", "transformer --config llama3_8b layers=4 batch=4 seq=2048 param_dtype=bf16", 29.76, 136.5},
    {"t32_l4", "transformer --config t32 layers=4 batch=8 seq=1024", 26.80, 142.1},
    {"gpt17_l8", "transformer --config gpt_1_7b layers=8 batch=8", 48.51, 163.3},
    {"mix_l2", "transformer --config mixtral_8x7b layers=2 batch=2 seq=2048", 52.57, 79.5},
    {"unet", "unet --config paper", 6.13, 56.4},
    {"gns", "gns --config paper", 12.03, 64.6},
};
#define XLA_NROWS (int)(sizeof XLA_H200 / sizeof XLA_H200[0])

#endif
