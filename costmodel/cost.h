/*
 * cost.h - the cost model of autopart: a registry of devices, and an
 * analytical estimate of the step time and peak memory of one device
 * running an SPMD program (PartIR paper, appendix A.5: "iterates over each
 * SPMD context, tracks the live memory, and counts flops usage for the
 * communication ops also tracks the byte transfers").  Absolute values are
 * rough; relative values between partitionings of one program are what the
 * search relies on.
 *
 * THE INPUT is an SPMD program: a StableHLO module whose public @main has
 * device-local shapes and explicit collectives (all_reduce, all_gather,
 * reduce_scatter, all_to_all, collective_permute) with replica groups over
 * partition ids.  The module attribute `autopart.mesh = "batch=4,model=2"`
 * names the mesh axes in order; device ids are row-major over them (last
 * axis fastest), so decoding the ids of a replica group tells which axes a
 * collective spans.  A module without `autopart.mesh` is costed with every
 * replica group treated as one flat group whose tier follows from its size
 * (the report says so).
 *
 * THE MODEL, per device:
 *   - fusion as XLA's GPU compiler fuses (graph.c): elementwise ops,
 *     converts, broadcasts, iotas, constants, slices, pads, concatenates,
 *     gathers, transposes and data-moving reshapes are computed inside the
 *     kernels of their users when every user can take them (the same ops,
 *     reduces, scatters, dynamic_update_slice) and, for transcendentals,
 *     there is one user; a transpose read by dots is folded into them;
 *     dots, convolutions, custom calls, collectives, sorts and control flow
 *     are kernels of their own.  A reshape that keeps the minor-most dim or
 *     only adds or drops unit dims, a broadcast that only adds unit dims,
 *     copy, get_tuple_element, optimization_barrier and sdy sharding
 *     annotations are no kernels: their results are their operands'
 *     buffers (a barrier's operands must be buffers).
 *   - kernel time = max(flops / peak flops of its precision, HBM bytes / HBM
 *     bandwidth), its flops those of every op fused into it, its bytes what
 *     it reads of buffers outside it (each once) and writes: dot_general
 *     2*M*N*K (times batch), convolution 2 * output elements * kernel window
 *     * input features per group, reductions one per input element,
 *     elementwise one per element (transcendentals 4), data movement zero
 *     flops and the bytes it touches (a slice or dynamic_slice only its
 *     result, dynamic_update_slice and scatter only their updates: in
 *     place).
 *   - kernels reach the device's matmul_efficiency of the peak on large
 *     matmuls, less for small ones (M and N are computed in matmul_tile
 *     tiles, the last one paid in full), and hbm_efficiency of the HBM
 *     bandwidth; each run of a kernel costs kernel_overhead on top.
 *   - collective time from the ring formulas over the tiers the group spans:
 *     all_reduce 2(n-1)/n * bytes / bw + 2(n-1) * latency (or NCCL's tree,
 *     2 * bytes / bw + 2 log2(n) * latency, when faster: small messages);
 *     all_gather (n-1)/n * gathered bytes / bw; reduce_scatter (n-1)/n * full
 *     bytes / bw; all_to_all (n-1)/n * bytes / bw (each plus (n-1) *
 *     latency); collective_permute bytes / bw + latency.  A ring's steps
 *     (all_gather, reduce_scatter, all_reduce's ring) pay each tier's latency
 *     on the steps that cross it, as NCCL's model does (of 255 steps over 32
 *     nodes of 8, 31 the network's and 224 NVLink's); the tree, all_to_all
 *     and collective_permute the slowest tier's.  bw is the least
 *     over the tiers the group spans of k * the tier's bus bandwidth, k the
 *     group's devices on the faster tiers (the GPUs of a group in one node
 *     send over as many NICs); an all_reduce inside one node takes the
 *     switch's reduction bandwidth when it has one (NVLink SHARP); a torus
 *     tier gives a group the share of its dims it spans; plus
 *     collective_overhead each.
 *   - runtime: kernels run one after another, collectives on their own
 *     stream beside them, each starting once what it reads is written (in
 *     the order written, as XLA's latency-hiding scheduler starts a
 *     collective early and waits for it where it is used): communication
 *     is hidden under the compute that does not depend on it, and the
 *     report says how much was (comm_hidden_s) and how much was not
 *     (comm_exposed_s).  A loop or branch is one event of the block holding
 *     it, its own time its blocks' (trips included).
 *   - while loops run their body once per trip when the trip count can be read:
 *     XLA's `known_trip_count` backend config, or a counter loop (`compare
 *     LT, %i, N` with N a constant or an unchanged carried constant, %i
 *     starting at a constant and stepped by a constant; LE, GT, GE alike),
 *     its counter a block argument (JAX's variadic while) or an element of
 *     the carried tuple (HLO's while over a tuple); else once (the report
 *     says so).  The report lists each loop with its trip count, and counts
 *     collectives both as written and per step;
 *     if/case count every branch (an upper bound); func.call and ops of other
 *     dialects holding regions (sdy.manual_computation) cost their bodies.
 *   - peak memory as XLA's buffer assignment counts it (graph.c): the
 *     entry's arguments are the caller's buffers, live all along; an output
 *     aliased to an argument (`tf.aliasing_output`, `jax.buffer_donor`,
 *     HLO's input_output_alias) is written into that argument's buffer;
 *     every other kernel's result lives from that kernel to the last kernel
 *     reading it, and takes over an operand buffer that dies there when
 *     XLA lets them share (in place: dynamic_update_slice, scatter,
 *     all_reduce, a loop's carried values; elementwise kernels: any operand
 *     of the same size); a region's temporaries count at the op holding
 *     it.  The peak is counted in the order written, in that order with
 *     the collectives where XLA's SPMD partitioner puts them, and in the
 *     orders of XLA's list and DFS memory schedulers, and the lowest kept
 *     (so the order never raises it); the report says which, and what is
 *     live at the peak by category (cost_memory).  Or, with the option
 *     framework = COST_FW_EAGER, as eager PyTorch holds it: nothing fused,
 *     nothing shared, the order written (cost_framework).
 *
 * USE: cost_prepare() once per program (one walk over the IR into flat
 * arrays), then cost_evaluate() per device / tier assignment / option set (a
 * loop over those arrays and one temporary array of their size:
 * microseconds).  A prepared program is immutable:
 * any number of threads may evaluate it at once.  It keeps pointers into the
 * module to name ops in reports, so free it before the module.
 *
 * Every function that can fail returns 0 or a negative AP_E* code and fills
 * `err` (which may be NULL).  Nothing here keeps mutable global state.
 */
#ifndef COST_H
#define COST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ap.h"
#include "ir.h"
#include "partir.h"

#define COST_NAME_SIZE 48 /* bytes of a stored name, with the NUL */
#define COST_MAX_TIERS 4
#define COST_MAX_AXES IR_MAX_AXES
#define COST_TOP_MAX 32 /* most ops a report lists */

/* ============================================================== devices */

/* Which peak rate an op runs at.  The first five are the matrix units (tensor
 * cores, MXUs) by operand type; VECTOR is everything that is not a matmul or
 * convolution (CUDA cores, the TPU vector unit). */
typedef enum cost_prec {
    COST_PREC_F32,  /* f32, f64, tf32 operands (on NVIDIA the TF32 rate,
                       which XLA's default precision uses for f32 dots) */
    COST_PREC_BF16,
    COST_PREC_F16,
    COST_PREC_F8,   /* every 8-bit and smaller float */
    COST_PREC_INT8, /* 8-bit and smaller integers, quantized types */
    COST_PREC_VECTOR,
    COST_PREC_COUNT
} cost_prec;

/* "f32", "bf16", "f16", "f8", "int8", "vector". */
const char *cost_prec_name(cost_prec p);

/* One level of the interconnect: NVLink or ICI inside a node or pod, a
 * network across them. */
typedef struct cost_tier {
    char name[COST_NAME_SIZE]; /* "nvlink", "ici", "infiniband", "dcn" */
    int64_t devices;  /* devices one group of this tier joins (a node, a pod);
                         0 = unbounded (the last tier) */
    double bandwidth; /* bytes/s one device sends while receiving as much, as
                         collectives reach it (NCCL's bus bandwidth): the
                         `bw` of the ring formulas */
    double latency;   /* seconds per ring step */
    double allreduce_bandwidth; /* bus bandwidth of an all_reduce inside one
                                   group of this tier when the switch reduces
                                   (NVLink SHARP); 0: `bandwidth` */
    int torus_dims;   /* a torus (TPU ICI) of this many dims, `bandwidth` over
                         all of them: a group spanning a share of the tier's
                         devices gets that share of its dims' links; 0: a
                         switch (any group gets all of it) */
} cost_tier;

/* A device: plain data, copy it freely. */
typedef struct cost_device {
    char name[COST_NAME_SIZE];
    /* Dense (no sparsity) peak flop/s per precision.  0 means "no native
     * support": F16, F8 and INT8 then run at the BF16 rate, VECTOR at the F32
     * rate (see cost_device_peak). */
    double peak_flops[COST_PREC_COUNT];
    double hbm_bytes;     /* memory capacity of one device */
    double hbm_bandwidth; /* bytes/s */
    int n_tiers;          /* 1..COST_MAX_TIERS, fastest first */
    cost_tier tiers[COST_MAX_TIERS];
    /* What kernels reach of those peaks (0 where unset: the peak itself, no
     * overhead): */
    double matmul_efficiency; /* share of the peak a large matmul reaches */
    int64_t matmul_tile;      /* a matmul's M and N are computed in tiles of
                                 this many rows/columns (tensor-core or MXU
                                 tiles): the last tile is paid in full */
    double hbm_efficiency;    /* share of the HBM bandwidth a kernel streaming
                                 memory reaches */
    double kernel_overhead;   /* seconds each kernel costs beyond its
                                 roofline (launch, ramp) */
    double collective_overhead; /* seconds each collective costs beyond its
                                   formula (launch, synchronization) */
    char source[512];     /* where the figures come from */
} cost_device;

/* The registry: tpu_v3, tpu_v4, tpu_v5e, tpu_v5p, a100_40gb, a100_80gb, h100_sxm, h100_96gb,
 * h200_sxm, b200.  Index 0 .. cost_device_count() - 1; NULL outside. */
int cost_device_count(void);
const cost_device *cost_device_at(int i);

/* Finds a registry device by name or alias, ignoring case and the characters
 * '-', '_', ' ' and '.' ("h100", "H100-SXM", "a100-80gb", "tpu_v3", "v5e").
 * Copies it into *out.  AP_ENOTFOUND naming the known devices otherwise. */
int cost_device_lookup(const char *name, cost_device *out, ap_error *err);
/* The registry's names for people, as help texts and errors list them:
 * "tpu_v3, ..., h100_sxm (or h100), ..." (appended to b). */
void cost_device_names(ap_buf *b);

/* The effective peak flop/s of precision p (with the fallbacks above). */
double cost_device_peak(const cost_device *d, cost_prec p);

/*
 * A custom device as JSON:
 *
 *   {
 *     "name": "my-gpu",                        string, 1..47 chars
 *     "peak_flops": {                          flop/s, dense
 *       "f32": 6.7e13, "bf16": 9.9e14,         required, > 0
 *       "f16": 9.9e14, "f8": 1.98e15,          optional, >= 0 (0 or absent:
 *       "int8": 1.98e15, "vector": 6.7e13      the fallbacks above)
 *     },
 *     "hbm_bytes": 80e9,                       > 0
 *     "hbm_bandwidth": 3.35e12,                bytes/s, > 0
 *     "tiers": [                               1..4, fastest first
 *       {"name": "nvlink", "devices": 8,       devices: integer >= 0, growing;
 *        "bandwidth": 370e9, "latency": 1e-6,   0 (unbounded) only last
 *        "allreduce_bandwidth": 480e9},        bandwidth > 0 bytes/s,
 *       {"name": "infiniband", "devices": 0,   latency >= 0 s; optional:
 *        "bandwidth": 45e9, "latency": 5e-6}   allreduce_bandwidth >= 0,
 *     ],                                         torus_dims integer 0..8
 *     "matmul_efficiency": 0.75,               optional, (0, 1]
 *     "matmul_tile": 128,                      optional, integer 0..65536
 *     "hbm_efficiency": 0.9,                   optional, (0, 1]
 *     "kernel_overhead": 2e-6,                 optional, >= 0 s
 *     "collective_overhead": 1e-5,             optional, >= 0 s
 *     "source": "where the figures come from"  optional string
 *   }
 *
 * Every key listed is required unless marked optional; any other key is
 * rejected.  Errors (AP_ESYNTAX for malformed JSON, AP_EINVALID otherwise)
 * name the key: `device JSON: missing key "hbm_bytes"`, `device JSON: unknown
 * key "flops"`, `device JSON: tiers[1]: "bandwidth" must be a positive
 * number`, `device JSON: peak_flops: unknown key "fp8"`.
 */
int cost_device_from_json(const char *text, size_t len, cost_device *out, ap_error *err);
/* The same from a file (err->file names it; AP_EIO when unreadable). */
int cost_device_load(const char *path, cost_device *out, ap_error *err);

/* ================================================================= mesh */

/* Mesh axes in order, with the interconnect tier (an index into the device's
 * tiers) each axis runs over. */
typedef struct cost_mesh {
    int naxes; /* 0: unknown mesh (flat groups) */
    char names[COST_MAX_AXES][COST_NAME_SIZE];
    int64_t sizes[COST_MAX_AXES];
    int tier[COST_MAX_AXES];
} cost_mesh;

/* Reads a mesh as ir_mesh_parse does (its syntax and limits) into *out with
 * every tier 0; empty text gives no mesh (flat groups). */
int cost_mesh_parse(const char *text, cost_mesh *out, ap_error *err);

/* The default tiers: walking from the innermost (last) axis outwards, axes
 * stay on a tier as long as the product of their sizes fits in its `devices`;
 * the rest go to the next tiers.  On an 8-GPU node, `batch=4,model=8` puts
 * model on NVLink and batch on the network. */
void cost_mesh_default_tiers(cost_mesh *mesh, const cost_device *dev);

/* Puts `axis` on the tier named `tier` (a tier name of dev, case-insensitive,
 * or its index as a decimal string).  AP_ENOTFOUND naming the choices. */
int cost_mesh_set_tier(cost_mesh *mesh, const cost_device *dev, const char *axis, const char *tier,
                       ap_error *err);

/* ============================================================== programs */

/* What runs the program, which decides how its memory is held (time is
 * modelled the same way for both: XLA's fused kernels). */
typedef enum cost_framework {
    COST_FW_XLA,   /* XLA (JAX, TensorFlow, PyTorch/XLA): the default.  Fused
                      values never exist as buffers, buffer assignment shares
                      an elementwise kernel's operand with its result, the
                      memory-aware schedulers may reorder (graph.c) */
    COST_FW_EAGER, /* an eager framework, PyTorch without torch.compile: every
                      op's output is a tensor of its own (views aside:
                      broadcasts, reshapes, transposes read by matmuls), from
                      the op to its last reader; x + y is a new tensor; the ops
                      run in the order written (the autograd engine does not
                      reorder).  The peak is what the caching allocator holds
                      allocated (torch.cuda.max_memory_allocated), not what it
                      reserves */
} cost_framework;

/* "xla", "pytorch_eager". */
const char *cost_framework_name(cost_framework f);
/* What the report says counted the memory: "XLA buffer assignment",
 * "PyTorch eager". */
const char *cost_framework_text(cost_framework f);
/* Reads a framework name ("xla", "pytorch_eager" or "pytorch-eager", any
 * case); AP_EINVALID naming the choices otherwise. */
int cost_framework_parse(const char *name, cost_framework *out, ap_error *err);

typedef struct cost_program cost_program;

/* Walks the entry function of m (ir_module_entry) into the flat arrays the
 * evaluation loops over, and computes the peak memory (which does not depend
 * on the device).  On success *out owns the program (cost_program_free).
 * Fails with AP_ENOTFOUND (no entry function), AP_EINVALID (a malformed
 * `autopart.mesh`, a mesh that disagrees with `mhlo.num_partitions`, a
 * collective without readable replica groups), AP_ENOMEM. */
int cost_prepare(const ir_module *m, cost_program **out, ap_error *err);
/* The same, the peak memory counted as framework fw holds it (cost_prepare:
 * COST_FW_XLA). */
int cost_prepare_framework(const ir_module *m, cost_framework fw, cost_program **out, ap_error *err);
void cost_program_free(cost_program *p);

/* The mesh read from the module (naxes 0 when it has none), tiers 0.  Copy
 * it, set tiers (cost_mesh_default_tiers, cost_mesh_set_tier) and pass the
 * copy to cost_evaluate. */
const cost_mesh *cost_program_mesh(const cost_program *p);
/* Ops walked into the program (loop bodies counted once). */
size_t cost_program_num_ops(const cost_program *p);

/* ================================================================ reports */

typedef enum cost_coll_kind {
    COST_ALL_GATHER,
    COST_ALL_REDUCE,
    COST_REDUCE_SCATTER,
    COST_ALL_TO_ALL,
    COST_COLLECTIVE_PERMUTE,
    COST_COLLECTIVE_BROADCAST,
    COST_COLL_COUNT
} cost_coll_kind;

/* "all_gather", "all_reduce", "reduce_scatter", "all_to_all",
 * "collective_permute", "collective_broadcast". */
const char *cost_coll_name(cost_coll_kind k);

typedef struct cost_options {
    /* At least this share of the shorter of compute and communication is
     * hidden under the other: 0 (default) = what the schedule of the two
     * streams hides, no more; 1 = their max. */
    double overlap;
    /* Ops to list by time, at most COST_TOP_MAX; 0 = 10, negative = none. */
    int top_k;
    /* How memory is held (0: XLA).  The peak is counted when the program is
     * prepared: cost_evaluate refuses a program prepared for another
     * framework. */
    cost_framework framework;
    /* The fast scorer only (cost_scorer_new): the peak's bytes without
     * what makes them up, the report's `memory` (and
     * cost_scorer_peak_values) left empty, every other figure the same.
     * The search's candidates need the bytes alone; the breakdown costs a
     * second simulation and a walk over every value. */
    bool peak_only;
    /* The fast scorer only: count the peak of each order the memory
     * scheduler tries to its end.  By default an order stops once its peak
     * reaches the lowest of those counted before it (it can no longer be
     * the lowest), and the buffer assignment finds which buffers overlap
     * in bitmaps of steps, not by walking each allocation's buffers; the
     * figures are the same either way, and test_score holds them so. */
    bool every_order;
    /* The fast scorer only: a peak the program's own order keeps at or
     * below this many bytes is reported as that order's figure, an upper
     * bound of the lowest, without making the other orders (0 or negative:
     * always the lowest; INT64_MAX: the program's order's figure whatever
     * it is).  A search under a memory limit needs the lowest only above
     * the limit: below it the step time alone ranks a state, and the
     * figure already shows that the state fits (the lowest is never above
     * it).  The search sets it to its limit when it is 0, and makes exact
     * the peaks it prints (search/mcts.c, exact_peaks); negative keeps
     * every peak the lowest. */
    int64_t peak_enough;
    /* The fast scorer only: of how many of the programs it scored last it
     * keeps the graph runs (fusion, time, memory), to give them again for
     * a state that lowers to one of them (0: the default, as many as 64 MB
     * of their graphs hold, 4 to 32; negative: none).  The figures are the
     * same either way; a timing of one state scored again measures the
     * memo. */
    int memo;
} cost_options;

typedef struct cost_coll_stats {
    double count;   /* executions per step (loop trips included) */
    double bytes;   /* per device and step: the operand of all_reduce,
                       reduce_scatter, all_to_all, collective_permute; the
                       result of all_gather (loop trips included) */
    double seconds;
    double written;       /* ops as written (each loop body once) */
    double bytes_written; /* bytes of one execution of each */
} cost_coll_stats;

#define COST_LOOPS_MAX 16 /* most while loops a report lists */

/* A while loop: where it is, its trip count, how often its body runs. */
typedef struct cost_loop {
    char name[96];      /* its location name (JAX name stack), or "" */
    uint32_t line, col; /* source position, 0 when unknown */
    int64_t trips;      /* -1: not readable, counted once */
    double runs;        /* body executions per step, enclosing loops' trips included */
    uint32_t depth;     /* loops around it (0: at the top of a function) */
    uint32_t collectives; /* collectives written in its body, nested loops' included */
} cost_loop;

typedef struct cost_top_op {
    char op[COST_NAME_SIZE]; /* "stablehlo.dot_general" */
    char name[96];           /* its location name (JAX name stack), or "" */
    uint32_t line, col;      /* source position, 0 when unknown */
    double seconds;          /* loop trips included */
    bool collective;
} cost_top_op;

/* Notes: where the estimate is less certain than usual. */
enum {
    COST_NOTE_NO_MESH = 1 << 0,        /* no autopart.mesh: flat groups */
    COST_NOTE_WHILE_ONCE = 1 << 1,     /* a while loop counted once */
    COST_NOTE_BRANCHES_SUMMED = 1 << 2, /* if/case: all branches counted */
    COST_NOTE_DYNAMIC_SHAPES = 1 << 3, /* dynamic dims counted as 0 bytes */
    COST_NOTE_CUSTOM_CALL = 1 << 4,    /* custom_call: bytes only */
    COST_NOTE_UNKNOWN_OP = 1 << 5,     /* an op of another dialect: bytes only */
    COST_NOTE_CALL_DEPTH = 1 << 6,     /* calls nested too deep: not costed */
    COST_NOTE_GROUP_OFF_MESH = 1 << 7, /* a replica group outside the mesh */
};

/* What fills memory at the peak (cost_memory.kinds).  Arguments: parameters
 * (read by matmuls, collectives or custom calls: weights), optimizer state
 * (donated and read only by elementwise updates), batch (arguments not
 * donated); outputs: results computed before the peak and kept; gradients:
 * values of a parameter's shape not computed from one; collective buffers:
 * what a collective wrote; saved activations: values computed earlier and
 * held for a later use; temporaries: what the op at the peak reads and
 * writes. */
typedef enum cost_mem_kind {
    COST_MEM_PARAMS,
    COST_MEM_OPT_STATE,
    COST_MEM_BATCH,
    COST_MEM_OUTPUTS,
    COST_MEM_GRADS,
    COST_MEM_ACTIVATIONS,
    COST_MEM_TEMPS,
    COST_MEM_COLL,
    COST_MEM_COUNT
} cost_mem_kind;

/* "parameters", "optimizer state", "batch", "outputs", "gradients", "saved
 * activations", "temporaries", "collective buffers"; the JSON keys are
 * the same with '_' for ' '. */
const char *cost_mem_kind_name(cost_mem_kind k);

#define COST_MEM_TOP 8 /* largest buffers a report lists at the peak */

/* One buffer live at the peak. */
typedef struct cost_mem_value {
    int64_t bytes;
    uint8_t kind;            /* cost_mem_kind */
    char op[COST_NAME_SIZE]; /* the op that wrote it ("stablehlo.dot_general"), or "argument" */
    char name[96];           /* its location name, or the argument's */
    uint32_t line, col;      /* where it was written, 0 when unknown */
} cost_mem_value;

/* Which order of independent ops the peak is counted in. */
typedef enum cost_mem_order {
    COST_ORDER_PROGRAM, /* as the program is written */
    COST_ORDER_LIST,    /* XLA's list scheduler: the op freeing the most bytes first */
    COST_ORDER_DFS,     /* XLA's DFS scheduler: post-order, heaviest operands first */
    COST_ORDER_PLACED   /* as written, with the collectives where XLA's SPMD
                           partitioner emits them: reductions (fewer bytes
                           out than in) just after their producers, gathers
                           just before their first reader */
} cost_mem_order;

/* The peak as the framework counts it (XLA's buffer assignment by default),
 * and what is live there. */
typedef struct cost_memory {
    int framework;                 /* cost_framework that counted it: XLA's buffers or eager tensors */
    int64_t kinds[COST_MEM_COUNT]; /* sums to the peak */
    int order;                     /* cost_mem_order that gave the peak */
    int64_t program_order_peak;    /* the peak in the order written */
    char at_op[COST_NAME_SIZE];    /* the op running at the peak */
    char at_name[96];
    uint32_t at_line, at_col;
    char in_op[COST_NAME_SIZE];    /* when that op holds a loop body or branch: the op in it at its peak, else "" */
    char in_name[96];
    uint32_t in_line, in_col;
    int n_values;
    cost_mem_value values[COST_MEM_TOP]; /* largest first */
} cost_memory;

typedef struct cost_report {
    char device[COST_NAME_SIZE];
    double runtime_s, compute_s, comm_s;
    double comm_hidden_s, comm_exposed_s; /* of comm_s: under compute, and not */
    double flops_per_device;  /* loop trips included */
    double matmul_flops;      /* the dot_general and convolution part */
    double bytes_per_device;  /* HBM traffic of compute ops after fusion */
    int64_t peak_memory_bytes;
    int64_t argument_bytes;   /* the entry function's arguments */
    double hbm_bytes;         /* the device's capacity */
    double memory_limit_bytes; /* what fits is held to: hbm_bytes, or the limit a
                                  search held its states to (cost_report_hold_to);
                                  < 0: none */
    bool fits;                /* peak_memory_bytes <= memory_limit_bytes (true with none) */
    cost_coll_stats coll[COST_COLL_COUNT];
    uint32_t while_loops, while_loops_counted_once;
    int n_loops;              /* listed: the first COST_LOOPS_MAX in program order */
    cost_loop loops[COST_LOOPS_MAX];
    unsigned notes;           /* COST_NOTE_* */
    cost_memory memory;       /* what is live at the peak */
    int n_top;
    cost_top_op top[COST_TOP_MAX]; /* slowest first */
} cost_report;

/* Estimates one device's step on `dev` with the axis tiers of `mesh` (a copy
 * of cost_program_mesh with tiers set; NULL = the default tiers) and `opts`
 * (NULL = defaults).  Fails with AP_EINVALID when mesh does not match the
 * program's mesh or names a tier dev lacks, or when dev has a non-positive
 * rate. */
int cost_evaluate(const cost_program *p, const cost_device *dev, const cost_mesh *mesh,
                  const cost_options *opts, cost_report *out, ap_error *err);

/* cost_prepare + cost_evaluate with default tiers + cost_program_free. */
int cost_estimate(const ir_module *m, const cost_device *dev, const cost_options *opts,
                  cost_report *out, ap_error *err);

/* The full estimate of a partition state, which every figure reported for a
 * state comes from (the fast scorer below is held equal to it): the state
 * lowered (ir_lower), then cost_prepare + cost_evaluate of the SPMD program
 * with the tiers of `mesh` (NULL: the defaults).  lw (NULL: not kept) gets
 * the lowered program, the caller's to ir_lowered_free (zeroed on failure).
 * Fails as ir_lower and cost_evaluate fail. */
int cost_state_estimate(const ir_partition *p, const cost_device *dev, const cost_mesh *mesh,
                        const cost_options *opts, ir_lowered *lw, cost_report *out, ap_error *err);

/* Holds r to `limit` bytes per device instead of its device's HBM (a
 * search's memory limit, its margin taken off; < 0: none): sets
 * memory_limit_bytes and fits, which the text and the JSON then report,
 * naming the limit and the device's HBM where they differ. */
void cost_report_hold_to(cost_report *r, double limit);

/* The verdict on r's peak, appended to out as the report's "peak memory"
 * line says it: "fits in 16.00 GiB" (held to the HBM), "DOES NOT FIT the
 * 90.00 GiB limit (the device's HBM: 16.00 GiB)", "no memory limit (the
 * device's HBM: 16.00 GiB)".  Reads hbm_bytes, memory_limit_bytes and fits;
 * out->oom says whether it ran out of memory. */
void cost_fit_text(const cost_report *r, ap_buf *out);

/* The report for people, appended to out.  Repeats fold: the values live
 * at the peak of one size, kind and op (one per layer) are one line with a
 * count and their places, a run of slowest ops of one time and op one line
 * with its ranks, and collective kinds the program does not use are left
 * out.  cost_report_text_verbose lists each on its own line (the JSON,
 * cost_report_to_json, always has every one).  Returns 0 or AP_ENOMEM. */
int cost_report_text(const cost_report *r, ap_buf *out);
int cost_report_text_verbose(const cost_report *r, ap_buf *out);

/* The report as `{"cost": {"runtime_s", "compute_s", "comm_s",
 * "comm_hidden_s", "comm_exposed_s",
 * "peak_memory_bytes", "flops_per_device", "fits", "device", "matmul_flops",
 * "bytes_per_device", "argument_bytes", "hbm_bytes", "memory_limit_bytes"
 * (what "fits" is held to: "hbm_bytes" unless a search held it to another
 * limit; null: none), "collectives":
 * {"all_gather": {"count", "bytes", "seconds", "written", "bytes_written"},
 * "all_reduce", "reduce_scatter", "all_to_all", "collective_permute"} (and
 * "collective_broadcast" when the program has one; count and bytes per step,
 * loop trips included; written and bytes_written with each loop body once),
 * "top_ops": [{"op", "name", "line", "col", "seconds", "collective"}],
 * "while_loops", "while_loops_counted_once", "loops": [{"name", "line",
 * "col", "trips" (null when not readable), "runs", "depth", "collectives"}],
 * "notes": [strings]}}`.
 * cost_report_to_json returns a new reference (NULL when out of memory);
 * cost_report_json appends compact text to out (0 or AP_ENOMEM). */
json_t *cost_report_to_json(const cost_report *r);
int cost_report_json(const cost_report *r, ap_buf *out);
/* The report read back from cost_report_to_json's "cost" (a client's copy of
 * a daemon's answer), so that it prints as the report that wrote it; what
 * the JSON lacks is left zero. */
void cost_report_from_json(const json_t *cost, cost_report *r);

/* The text of one note bit ("no autopart.mesh: ..."). */
const char *cost_note_text(unsigned note);

/* ========================================================= state scoring */

/*
 * The fast scorer: the report cost_estimate gives the SPMD lowering
 * (ir_lower) of a partition state, computed from the state itself - each
 * op's flops and bytes from the local types its loop nest implies, the
 * collectives and their bytes from the lowering plan ir_lower emits - and
 * updated incrementally from the last state scored.  It is the same model
 * (the same per-op formulas and collective formulas, and the same graph of
 * the lowered program, on which graph.c decides fusion, kernels, buffers,
 * the order and the peak's breakdown), held equal to the lowered report by
 * test_score; only the slowest ops are named by the ops the lowering
 * inserts them for.
 *
 * A scorer is used by one thread at a time; make one per thread (the
 * scorers of one search share what they remember: cost_scorer_share).
 */
typedef struct cost_scorer cost_scorer;

/* A scorer of states of ctx on dev, with the axis tiers of `mesh` (NULL: the
 * default tiers) and `opts` (NULL: defaults).  Fails with AP_EUNSUPPORTED
 * for functions with ops the fast path does not cover (loops, conditionals,
 * calls, tuples, ops of other dialects holding regions, regions capturing
 * outer values, collectives in the program itself): score those with
 * ir_lower + cost_estimate.  Free with cost_scorer_free. */
int cost_scorer_new(const ir_pctx *ctx, const cost_device *dev, const cost_mesh *mesh, const cost_options *opts,
                    cost_scorer **out, ap_error *err);
void cost_scorer_free(cost_scorer *s);
/* The report of p's lowering.  Fails as ir_lower fails on p. */
int cost_scorer_score(cost_scorer *s, const ir_partition *p, cost_report *out, ap_error *err);
/* How many of s's scores reused the fusion, time and memory figures of a
 * state scored shortly before whose lowered program is the same (the
 * search meets many: actions the lowering does not see); the report is
 * the same either way. */
int64_t cost_scorer_reused(const cost_scorer *s);
/* How many ops s planned the lowering of, over all its scores.  A scorer
 * follows one state at a time: a score plans again the ops whose loops
 * differ from the state scored before it (every op on the first), so a
 * caller that gives it states near one another pays less. */
int64_t cost_scorer_replanned(const cost_scorer *s);
/* Makes s remember the graph runs it makes in with's memo, and reuse
 * those with's (and every scorer's sharing it) made: the memo of one
 * search's threads, one memo's memory and a hit for a program any of them
 * scored.  Reports are the same either way (a hit is taken only for a
 * graph equal to the remembered one in all it reads); which runs are
 * skipped depends on the order the threads score in.  s and with may then
 * be used by different threads at once (the memo has its own lock).  Call
 * before s scores (it lets go of what s remembered); with the memo off
 * (cost_options.memo < 0) on either, nothing is shared.  Fails with
 * AP_EINVALID when with scores another function, AP_ENOMEM. */
int cost_scorer_share(cost_scorer *s, cost_scorer *with, ap_error *err);

/* What is live at the peak of the last state scored. */
enum { COST_PEAK_ARGUMENT, COST_PEAK_RESULT, COST_PEAK_COPY, COST_PEAK_OTHER };
typedef struct cost_peak_value {
    int64_t bytes;
    uint32_t value; /* value id (ir_pctx_value): the argument, the op result, or the value copied */
    int kind;       /* COST_PEAK_*: an argument, an op's result, a copy a collective made, other */
} cost_peak_value;
/* The n largest values live at the peak, largest first; returns how many
 * were filled, *other_bytes (may be NULL) gets the bytes of the rest. */
int cost_scorer_peak_values(const cost_scorer *s, cost_peak_value *out, int n, int64_t *other_bytes);

#endif /* COST_H */
