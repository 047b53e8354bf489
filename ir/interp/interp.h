/*
 * interp.h - the interpreter of the IR: host tensors, the reference
 * interpreter of a function on concrete arrays, the SPMD interpreter that
 * runs a device-local program on every device of a mesh.  The equivalence
 * check of a partition state (`autopart check`) is built on it: see
 * ir/check/ircheck.h.
 */
#ifndef INTERP_H
#define INTERP_H

#include "ir.h"

/*
 * The reference interpreter: host tensors, evaluation of a
 * function of a module on concrete arrays, and the SPMD interpreter that runs
 * a device-local program on every device of a mesh and carries out its
 * collectives across the simulated devices.
 *
 * The interpreter is for checking, not speed: naive loops over small shapes.
 * It evaluates every registered op with defined semantics: all element-wise
 * ops (integer ops wrap; x / 0 = -1, x % 0 = x, INT_MIN / -1 = INT_MIN as
 * XLA; shifts by the width or more give 0 or the sign; float -> int convert
 * truncates and saturates, NaN -> 0), compare (all directions, FLOAT,
 * TOTALORDER, SIGNED, UNSIGNED), select, clamp, convert, bitcast_convert
 * (byte-sized types), reduce_precision, complex/real/imag, map; constant,
 * iota, broadcast(_in_dim), transpose, reshape, reverse, concatenate,
 * slice, dynamic_slice / dynamic_update_slice (indices clamped), pad,
 * gather, scatter (with batching dims; out-of-bounds updates skipped),
 * torch_index_select, get_dimension_size, the dynamic_* ops when every
 * shape is static; dot, dot_general, convolution (groups, padding, strides,
 * dilations, reversal), reduce, reduce_window, select_and_scatter, sort
 * (stable), batch_norm_*, triangular_solve, cholesky, fft; while, if, case,
 * func.call, composite (as a call of its decomposition), tuple,
 * get_tuple_element, optimization_barrier, after_all, create_token,
 * partition_id, replica_id and the collectives; Shardy's ops (annotations
 * and data flow edges pass their value through, sdy.named_computation runs
 * its body, sdy.manual_computation its body per device of its manual axes
 * on their shards: manual.c); and the custom calls of
 * cuDNN's fused attention (__cudnn$fmhaSoftmax and its backward, see
 * ir_fmha_get).  Other custom calls go to the caller's handler.  Sums of products
 * accumulate in double and round once; region reductions round per step
 * (ir_interp_opts.split_sums evaluates sums in another order, and
 * random_rounding rounds the other way at random: the noise run of
 * `autopart check`).
 *
 * Uniform quantized types (!quant.uniform) are held as their storage
 * integers and computed as the spec says (quant.c): ops that move elements
 * run on the storage, arithmetic dequantizes, computes in the expressed
 * type and quantizes.
 *
 * An op it cannot evaluate (ops of other dialects, dynamic shapes,
 * custom_call without a handler, rng, rng_bit_generator, quantized values
 * in an op with a body, infeed/outfeed/send/recv, einsum, multi-block
 * regions) is an error naming
 * the op and its source position, never a wrong answer.  Nothing here keeps
 * process-wide state: runs on different threads are independent as long as
 * they do not share tensors being freed.
 */
/* =============================================================== tensors */

typedef enum ir_tensor_kind {
    IR_TENSOR_ARRAY = 0, /* a dense array of one element type */
    IR_TENSOR_TUPLE,     /* tuple<...>: elems */
    IR_TENSOR_TOKEN      /* !stablehlo.token: no data */
} ir_tensor_kind;

/* A host value.  Every field is read-only to users: make tensors with the
 * constructors below and free them with ir_tensor_free.  A tensor owns its
 * data and, for a tuple, its elements; it holds no pointer into any module,
 * so it may outlive the module whose types made it.
 *
 * Element data is row-major in the layout of ir_dense (ir.h): little
 * endian, i1 one byte (0 or 1) per element, f16/bf16/f8 as raw bits,
 * complex as (real, imag) pairs.  Every element type of ir.h is accepted
 * except opaque ones (other dialects' types; a quantized type's values are
 * its storage type's); floats narrower
 * than f32 (f16, bf16, f8, tf32) are computed in f32 (via double) and stored
 * rounded to nearest even. */
typedef struct ir_tensor {
    uint8_t kind;             /* ir_tensor_kind */
    uint8_t elem;             /* ARRAY: ir_elem */
    int32_t rank;             /* ARRAY */
    const int64_t *dims;      /* ARRAY: rank entries */
    int64_t numel;            /* ARRAY: product of dims (1 for a scalar) */
    size_t nbytes;            /* ARRAY: numel * ir_elem_bytes(elem) */
    uint8_t *data;            /* ARRAY: nbytes bytes (NULL when 0) */
    uint32_t n_elems;         /* TUPLE */
    struct ir_tensor **elems; /* TUPLE: n_elems owned members */
} ir_tensor;

/* Above this many elements a tensor is refused (AP_ELIMIT) unless
 * ir_interp_opts.max_elems says otherwise. */
#define IR_INTERP_MAX_ELEMS ((int64_t)1 << 28)

/* Constructors.  Each returns 0 and stores a new tensor owned by the caller
 * in *out, or a negative AP_E* code with *out = NULL and err filled: AP_EINVALID
 * for a dynamic, unranked or opaque type, a negative dim or a wrong buffer
 * size, AP_ELIMIT above IR_INTERP_MAX_ELEMS elements, AP_ENOMEM.
 *
 * ir_tensor_new: an array of zeros.
 * ir_tensor_zeros: zeros of any value type: a static tensor, a tuple of
 *   them, or a token.
 * ir_tensor_from_buffer: an array of type t from nbytes bytes in the layout
 *   above (copied).
 * ir_tensor_from_f64 / ir_tensor_from_i64: an array from n values (n ==
 *   numel, or 1 to fill it), converted to the element type as
 *   stablehlo.convert does (floats rounded to nearest even, integers
 *   wrapped, booleans != 0).
 * ir_tensor_random: reproducible values for a seed: floats uniform in
 *   [-1, 1), integers uniform in [0, 8) (so they are valid small indices),
 *   booleans 50/50, complex with both parts uniform in [-1, 1).
 * ir_tensor_random_range: floats uniform in [lo, hi), integers uniform in
 *   [ceil(lo), floor(hi)], booleans 50/50.
 * ir_tensor_clone: a deep copy. */
int ir_tensor_new(ir_elem e, int rank, const int64_t *dims, ir_tensor **out, ap_error *err);
int ir_tensor_zeros(const ir_type *t, ir_tensor **out, ap_error *err);
int ir_tensor_from_buffer(const ir_type *t, const void *data, size_t nbytes, ir_tensor **out, ap_error *err);
int ir_tensor_from_f64(ir_elem e, int rank, const int64_t *dims, const double *v, size_t n, ir_tensor **out,
                       ap_error *err);
int ir_tensor_from_i64(ir_elem e, int rank, const int64_t *dims, const int64_t *v, size_t n, ir_tensor **out,
                       ap_error *err);
int ir_tensor_random(const ir_type *t, uint64_t seed, ir_tensor **out, ap_error *err);
int ir_tensor_random_range(const ir_type *t, uint64_t seed, double lo, double hi, ir_tensor **out, ap_error *err);
int ir_tensor_clone(const ir_tensor *t, ir_tensor **out, ap_error *err);

/* Frees t and everything it owns; NULL is a no-op. */
void ir_tensor_free(ir_tensor *t);
/* Frees n tensors and the heap array v holding them (as ir_interp_run hands
 * them back); NULL is a no-op. */
void ir_tensors_free(ir_tensor **v, size_t n);

/* Element i (row-major) of an array as a double / an int64: floats and
 * integers are converted (unsigned 64-bit values above INT64_MAX wrap in
 * get_i64), complex gives its real part.  set_* store with the rounding of
 * stablehlo.convert.  i must be < numel. */
double ir_tensor_get_f64(const ir_tensor *t, int64_t i);
int64_t ir_tensor_get_i64(const ir_tensor *t, int64_t i);
void ir_tensor_set_f64(ir_tensor *t, int64_t i, double v);
void ir_tensor_set_i64(ir_tensor *t, int64_t i, int64_t v);

/* Whether t (an array, or every array of a tuple) has the element type and
 * static shape of type ty. */
bool ir_tensor_has_type(const ir_tensor *t, const ir_type *ty);
/* Whether every float or complex element is finite (true for integers). */
bool ir_tensor_all_finite(const ir_tensor *t);

/* Differences between two arrays of the same element type and shape,
 * computed in f64 (complex: the modulus of the difference). */
typedef struct ir_tensor_diff {
    double max_abs;     /* max |a - b| */
    double max_rel;     /* max |a - b| / max(|a|, |b|) over elements that
                            differ (0 when all are equal) */
    int64_t n_diff;     /* elements that are not bitwise equal (NaNs of the
                            same kind count as equal) */
    int64_t first_diff; /* row-major index of the first such element, -1 */
    int64_t worst;      /* index of the element with the largest |a - b|, -1 */
} ir_tensor_diff;

/* Fills *out.  A NaN against a number counts as an infinite difference.
 * Fails with AP_EINVALID (message saying how) when the element types or
 * shapes differ or either is not an array. */
int ir_tensor_compare(const ir_tensor *a, const ir_tensor *b, ir_tensor_diff *out, ap_error *err);

/* Appends "tensor<2x3xf32> [[1, 2, 3], [4, 5, 6]]" (MLIR dense syntax) to b,
 * eliding the middle after max_elems elements (0: no limit). */
void ir_tensor_print(ap_buf *b, const ir_tensor *t, int64_t max_elems);

/* =========================================================== interpreter */

/* A handler for stablehlo.custom_call: given the op and its operands, it
 * stores n_results new tensors of the op's result types in results (the
 * interpreter takes ownership and checks the types) and returns 0, or fills
 * err and returns a negative AP_E* code.  AP_EUNSUPPORTED makes the call an
 * error as if there were no handler. */
typedef int (*ir_custom_call_fn)(void *ctx, const ir_op *op, uint32_t n_operands, const ir_tensor *const *operands,
                                 uint32_t n_results, ir_tensor **results, ap_error *err);

typedef struct ir_interp_opts {
    int64_t max_elems;             /* per tensor; 0: IR_INTERP_MAX_ELEMS */
    /* Bytes the run's values may hold at once (every device's in SPMD
     * runs, as peak_held counts them): past it the next op is refused
     * with AP_ELIMIT, rather than the process being killed for memory
     * (a big model's training step under `autopart check` held over
     * 23 GB).  0: half the machine's physical memory; negative: none. */
    int64_t max_held;
    int64_t max_while_iters;       /* iterations of one while op; 0: 1 << 20 */
    int max_depth;                 /* nested calls; 0: 64 */
    ir_custom_call_fn custom_call; /* NULL: every custom_call is an error */
    void *custom_call_ctx;
    uint64_t *ops_evaluated; /* if not NULL, incremented per op evaluated (per
                                device in SPMD runs, region bodies included) */
    /* If not NULL, raised to the most bytes the run's values took at once
     * (every device's in SPMD runs; a value is freed after its last reader,
     * so this is what is live, not what the program computes) */
    int64_t *peak_held;
    /* 0: the usual order.  N > 1: another order StableHLO equally allows,
     * the noise run of `autopart check` (ir/check/ircheck.h): a float
     * dot_general or convolution sums its terms in N chunks of consecutive
     * contracting positions (input features for a convolution), rounds
     * each chunk's sum to the result type and adds the chunks last to
     * first, rounding at each step, as a sum split over N devices and
     * all-reduced is; reduce and scatter whose body adds or multiplies fold
     * their terms in reverse order.  Other ops are unchanged.  At most
     * IR_INTERP_MAX_SPLIT (more is AP_ELIMIT at the first such op). */
    int split_sums;
    /* 0: off.  Otherwise the seed of random rounding (Monte Carlo
     * arithmetic, as Verificarlo and CADNA do it), the other half of the
     * noise run: every float element that an op which rounds computes (add,
     * subtract, multiply, divide, power, the transcendental functions, dot,
     * convolution, reduce with an add or multiply body, a narrowing convert)
     * moves to its upper or lower neighbour in its type with probability
     * 1/4 each, as if that op had rounded the other way.  Exact zeros and
     * other ops (max, select, compare, copies) are left exact, so a value
     * compared with its own maximum still matches it.  Region bodies are
     * not perturbed. */
    uint64_t random_rounding;
    /* With random_rounding: only the ops where a partitioned program
     * rounds otherwise than the program as written are rounded at random:
     * the sums (dot, dot_general, convolution, reduce with an add or
     * multiply body: split over devices, their partial sums round), and an
     * op one of whose operands such a sum computes when it is a convert,
     * multiply or divide (a partial sum it is carried through before the
     * all-reduce rounds there once per device).  Elsewhere (an elementwise
     * chain, a parameter converted to bf16 at its use) a partitioned
     * program computes every value as the original does, and rounding it
     * at random would overstate the noise (bf16 gradients 5-10x). */
    bool random_rounding_sums;
    /* Every real float value held and computed in f64 whatever its
     * declared type (f16, bf16, f32, f8...): no op rounds to a narrower
     * float, a convert between floats is an exact copy, constants and
     * arguments keep their exact values.  Shapes, integers, booleans and
     * complex values are as declared; arguments and results of such types
     * are f64 tensors of the declared shape.  Ops whose meaning depends on
     * the bit width of a float (ir_interp_op_width_bound: bitcast_convert
     * of a float, reduce_precision, chlo.next_after, cuDNN's fused attention) are
     * AP_EUNSUPPORTED errors, never silently widened; other custom calls
     * go to custom_call with f64 operands, and the handler must refuse
     * (AP_EUNSUPPORTED) any whose meaning depends on the width.  `autopart check` compares the partitioned
     * program with the original this way too (ir/check/ircheck.h): a
     * structural bug shows there above f64 rounding. */
    bool f64;
    /* Threads a large float convolution may use (0 or 1: the calling
     * thread alone; at most IR_INTERP_MAX_THREADS).  Its outputs are cut
     * into contiguous ranges, each output computed whole by one thread in
     * the one order, so results do not depend on the count. */
    int threads;
} ir_interp_opts;
#define IR_INTERP_MAX_SPLIT 1024
#define IR_INTERP_MAX_THREADS 16

/* What ir_interp_opts.threads may be on this host: the CPUs online, at
 * most 8 (and at least 1). */
int ir_interp_host_threads(void);

/* Whether op cannot be evaluated under ir_interp_opts.f64 (see there). */
bool ir_interp_op_width_bound(const ir_op *op);

/* Evaluates function `func` (a func.func of m, not a declaration) on args
 * (n_args tensors, borrowed; their types must match the function's argument
 * types exactly).  On success stores a heap array of the function's results
 * in *results (free with ir_tensors_free(*results, *n_results)) and returns 0.
 * On failure returns a negative AP_E* code with *results = NULL and err filled;
 * errors about an op carry its source position (m->filename, op->src_line,
 * op->src_col) and say which op could not be evaluated and why.  opts may be
 * NULL for the defaults.
 *
 * stablehlo.partition_id and replica_id evaluate to 0 here; collectives run
 * as on a single device (every replica group must then be [[0]] or empty). */
int ir_interp_run(const ir_module *m, const ir_op *func, const ir_tensor *const *args, uint32_t n_args,
                  ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err);

/* ========================================================== SPMD programs */

/*
 * An SPMD module (what the lowering produces) has the module attributes
 * `mhlo.num_partitions = N : i32` and `autopart.mesh = "batch=4,model=2"`
 * (ordered axes; device ids are row-major over them, the last axis varying
 * fastest; N is the product of the sizes) and, on each argument and result
 * of the function, `autopart.layout = [[AXIS, ...], ...]`: per dimension of
 * the GLOBAL tensor the mesh axes that split it, major to minor.  The tile a
 * device holds along a dim is its coordinates over that dim's axes read
 * row-major (first listed axis major).  Axes listed nowhere replicate the
 * value.  Without the attribute a value is replicated.
 *
 * Collectives follow StableHLO with num_replicas = 1: the ids in
 * replica_groups and source_target_pairs are partition (device) ids in every
 * mode; an empty replica_groups (all replicas) is [[0]], the one replica:
 * with more than one device [[0]] means each device alone when there is no
 * channel (cross_replica: no channel_handle, or one with handle 0, the
 * spec's channel_id <= 0) and all devices when there is one and no
 * use_global_device_ids (cross_replica_and_partition), as the spec gives for
 * one replica.  (interpreter.run_parallel over replicas of one partition,
 * eval.c, reads the ids as replica ids; over replicas of several
 * partitions it forms the spec's process groups: cross_replica,
 * cross_partition, cross_replica_and_partition, flattened_ids.)  Every
 * device must be in exactly one group,
 * except that collective_broadcast and collective_reduce give a device in
 * no group zeros; for them a channel means the spec's cross_partition, the
 * ids as written ([[0]] is partition 0 alone).  Groups of different sizes
 * padded with -1 are read for all_reduce and collective_reduce (StableHLO's
 * verifier allows them there) and refused elsewhere.  Devices run in
 * lock step, op by op (inside while/if/case/call bodies too); devices that
 * take different branches or iteration counts are an error.
 */

/* Splits a global array into the tile `device` holds under `layout` (an
 * autopart.layout attribute, or NULL for replicated) on `mesh`.  Fails with
 * AP_EINVALID when the layout names unknown axes, repeats an axis, has the
 * wrong number of dims or does not divide the shape. */
int ir_tensor_shard(const ir_tensor *global, const ir_attr *layout, const ir_mesh *mesh, int64_t device,
                    ir_tensor **out, ap_error *err);

/* The mesh of an SPMD module (autopart.mesh, checked against
 * mhlo.num_partitions). AP_EINVALID with a message when absent or wrong. */
int ir_spmd_mesh(const ir_module *m, ir_mesh *out, ap_error *err);

/* Runs an SPMD `func` on every device of the module's mesh with GLOBAL
 * arguments: each is split per its argument's autopart.layout, the program
 * runs on all devices, and each global result is reassembled per its
 * result's autopart.layout.  Replicated copies must agree bit for bit; the
 * first disagreement is an AP_ECONFLICT error naming the result, the devices,
 * the index and both values (a broken partitioning).  Results and ownership
 * as ir_interp_run. */
int ir_spmd_run(const ir_module *m, const ir_op *func, const ir_tensor *const *global_args, uint32_t n_args,
                ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err);

/* The same with every device's arguments given: args[d * n_args + i] is
 * argument i on device d (n_devices = mhlo.num_partitions).  Stores the
 * devices' results in *results as one heap array, results[d * n_results +
 * j] (free with ir_tensors_free(*results, n_devices * *n_results)). */
int ir_spmd_run_local(const ir_module *m, const ir_op *func, uint32_t n_devices, const ir_tensor *const *args,
                      uint32_t n_args, ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts,
                      ap_error *err);

#endif /* INTERP_H */
