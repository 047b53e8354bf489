/*
 * interp_int.h - private to the interpreter files (ir/interp/): the run
 * context, frames of slots, what a kernel sees, element access helpers and
 * the kernels each file provides.
 *
 * How evaluation works: a frame holds, for every device of the run, one
 * slot per value of a function (values are numbered densely per function,
 * nested regions included).  A block is evaluated op by op; each op is
 * evaluated on every device of the frame before the next op (lock step), so
 * a collective sees every device's operands.  Ops without regions that
 * could hold collectives are "kernels": a function from input tensors to new
 * output tensors, run once per device.  Kernels that apply a region
 * (reduce, sort, scatter, ...) evaluate it for their own device only.
 */
#ifndef IR_INTERP_INT_H
#define IR_INTERP_INT_H

#ifndef AP_IR_INTERP
#error "interp_int.h is private to the interpreter (ir/interp/*.c): use interp.h"
#endif

#include "interp.h"
#include "ir_build.h"

#include <complex.h>

typedef struct ip_fn ip_fn;
typedef struct ip_run ip_run;
typedef struct ip_frame ip_frame;
typedef struct ip_ctx ip_ctx;

/* Slot numbering of one function, and when its values die: after the
 * k-th op of a block b (block_at[b] + k), the slots
 * dies[die0[block_at[b] + k] .. die0[block_at[b] + k + 1]) are read no
 * more (a value of b whose last reader, itself or through its regions,
 * is that op; or which nothing reads).  A value b returns is never among
 * them: the return takes it.  Freeing them there keeps a run's memory at
 * what is live, not at every value the function computes. */
struct ip_fn {
    const ir_op *func;
    uint32_t n_slots;
    bool use_map;  /* value ids are not dense: look values up in map */
    ir_ptrmap map; /* value -> slot when use_map */
    ir_ptrmap block_at; /* block -> index of its first op in die0 */
    uint32_t *die0, *dies;
};

/* One call of ir_interp_run / ir_spmd_run*. */
struct ip_run {
    const ir_module *m;
    const char *filename;
    ir_interp_opts opts; /* defaults filled in */
    ap_error *err;
    bool spmd;   /* messages name the device */
    ip_fn **fns; /* numbering per function, made on first call */
    uint32_t n_fns, cap_fns;
    ir_ptrmap fn_index; /* func op -> index in fns */
    uint64_t n_ops;
    uint64_t n_rounded; /* tensors perturbed (opts.random_rounding) */
    int64_t held, held_peak; /* bytes of the values in frames' slots: now, at most */
    /* inside interpreter.run_parallel over several replicas of one
     * partition: the devices are replicas (eval.c, coll.c) */
    bool replicas;
    /* inside interpreter.run_parallel over several replicas of several
     * partitions: the partitions per replica; device d is replica d / grid_np
     * of partition d % grid_np, and collectives form the spec's process
     * groups (coll.c).  0 otherwise. */
    uint32_t grid_np;
    /* inside the body of sdy.manual_computation (manual.c): how many are
     * open, and the outermost whose devices are not its mesh's (a free axis
     * above size 1, or nested), where an op whose value depends on the
     * device is refused (NULL: none) */
    int manual_depth;
    const ir_op *manual_free;
    bool manual_nested; /* manual_free is nested in another */
    /* Evaluates single-block region r for the kernel's device with n_in
     * arguments (borrowed) and stores n_out new result tensors in out: how
     * kernels with a body (reduce, sort, map, ...) call back into the
     * evaluator (eval.c), which they do not otherwise know. */
    int (*region)(ip_ctx *c, const ir_region *r, uint32_t n_in, const ir_tensor *const *in, uint32_t n_out,
                  ir_tensor **out);
};

/* An activation of a function body (or a per-device view of one). */
struct ip_frame {
    ip_run *run; /* counts the bytes its slots hold */
    /* a run's own call: the function's arguments are the caller's tensors,
     * lent to the slots (not copied, never freed there) */
    bool borrow_args;
    uint8_t *lent; /* [d * fn->n_slots + s]: slot s of device d holds a lent tensor; NULL: none */
    const ip_fn *fn;
    uint32_t n_dev;
    ir_tensor ***slots;     /* [device][slot] */
    const int64_t *dev_ids; /* partition id per device of the frame */
    bool local;             /* a region run for one device: no collectives */
    int depth;
};

/* What a kernel sees: the op, and which device of which frame it runs for. */
struct ip_ctx {
    ip_run *run;
    ip_frame *fr;
    uint32_t dev;
    const ir_op *op;
};

/* A kernel: reads op->n_operands inputs, stores op->n_results new tensors in
 * out (left NULL on failure; the caller frees whatever is stored). */
typedef int (*ip_kernel)(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);

/* ------------------------------------------------- errors (kernel.c) */

/* Fills the run's error about the kernel's op ("FILE:L:C: error: OP: MSG",
 * naming the device in SPMD runs) and returns code. */
int ir__ip_fail(ip_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ir__ip_fail_op(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Re-raises a tensor-allocation error (message without position) at op. */
int ir__ip_relay(ip_run *r, const ir_op *op, int64_t dev, int rc, const ap_error *e);

/* ---------------------------------------------- tensors (kernel.c, tensor.c) */

/* A new zero value of result i's type of the kernel's op. */
int ir__ip_new_result(ip_ctx *c, uint32_t i, ir_tensor **out);
/* A copy of t for op on device dev (limit checked, error at the op). */
int ir__ip_clone_at(ip_run *r, const ir_op *op, int64_t dev, const ir_tensor *t, ir_tensor **out);
/* Tensor allocation without a context: checks the limit, fills err. */
int ir__tensor_alloc(ir_elem e, int rank, const int64_t *dims, int64_t limit, ir_tensor **out, ap_error *err);
int ir__tensor_alloc_type(const ir_type *t, int64_t limit, ir_tensor **out, ap_error *err);
/* The same, with every real float element type held as f64 when wide
 * (ir_interp_opts.f64): the type's shape, f64 data. */
int ir__tensor_alloc_type_w(const ir_type *t, int64_t limit, bool wide, ir_tensor **out, ap_error *err);
/* ir_tensor_has_type, with a real float type matched by f64 when wide. */
bool ir__tensor_has_type_w(const ir_tensor *t, const ir_type *ty, bool wide);
/* The element type a value of type e is held in: f64 for a real float
 * when wide (ir_interp_opts.f64), e otherwise. */
static inline ir_elem ir__ip_wide_elem(ir_elem e, bool wide)
{
    return wide && ir_elem_is_float(e) && !ir_elem_is_complex(e) ? IR_E_F64 : e;
}
/* Same elem and dims (arrays), or recursively equal members (tuples). */
bool ir__tensor_same_type(const ir_tensor *a, const ir_tensor *b);
/* "tensor<2x3xf32>" for messages. */
void ir__tensor_type_str(const ir_tensor *t, char *buf, size_t size);


/* ------------------------------------------------------ element access */

/* Classes of element types for arithmetic. */
typedef enum ip_class {
    IP_F, /* floats */
    IP_S, /* signed and signless integers (INDEX too) */
    IP_U, /* unsigned integers */
    IP_B, /* i1 */
    IP_C, /* complex */
    IP_X  /* cannot compute */
} ip_class;

ip_class ir__ip_class(ir_elem e);

/* A complex number from its parts (CMPLX is missing from some C libraries
 * under clang; re + im * I is wrong for infinities). */
static inline double complex ip_cplx(double re, double im)
{
    union {
        double complex z;
        double d[2];
    } u;
    u.d[0] = re;
    u.d[1] = im;
    return u.z;
}

static inline size_t ip_eb(ir_elem e) { return (size_t)ir_elem_bytes(e); }

static inline double ip_ldf(ir_elem e, const uint8_t *p)
{
    if (e == IR_E_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (e == IR_E_F64) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    if (e == IR_E_BF16) {
        uint16_t h;
        memcpy(&h, p, 2);
        return ir__bf16_to_f32(h);
    }
    return ir__float_load(e, p);
}

/* Stores a computed value: f32 rounds once, narrower floats go through f32
 * and are rounded to nearest even. */
static inline void ip_stf(ir_elem e, uint8_t *p, double v)
{
    if (e == IR_E_F32) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (e == IR_E_F64) {
        memcpy(p, &v, 8);
    } else if (e == IR_E_BF16) {
        uint16_t h = ir__f32_to_bf16((float)v);
        memcpy(p, &h, 2);
    } else {
        ir__float_store(e, p, v);
    }
}

static inline double complex ip_ldc(ir_elem e, const uint8_t *p)
{
    if (e == IR_E_C64) {
        float f[2];
        memcpy(f, p, 8);
        return ip_cplx(f[0], f[1]);
    }
    double d[2];
    memcpy(d, p, 16);
    return ip_cplx(d[0], d[1]);
}

static inline void ip_stc(ir_elem e, uint8_t *p, double complex v)
{
    if (e == IR_E_C64) {
        float f[2] = {(float)creal(v), (float)cimag(v)};
        memcpy(p, f, 8);
    } else {
        double d[2] = {creal(v), cimag(v)};
        memcpy(p, d, 16);
    }
}

/* Integers load sign- or zero-extended per their type; stores wrap. */
static inline int64_t ip_ldi(ir_elem e, const uint8_t *p) { return ir__int_load(e, p); }
static inline void ip_sti(ir_elem e, uint8_t *p, int64_t v)
{
    if (e == IR_E_I1)
        p[0] = (uint8_t)(v & 1);
    else
        ir__int_store(e, p, v);
}

/* Converts one element between any two computable types with the rules of
 * stablehlo.convert. */
void ir__ip_convert_elem(ir_elem from, const uint8_t *src, ir_elem to, uint8_t *dst);
/* Integer of any integer or bool element as int64 (for indices). */
static inline int64_t ip_index_at(const ir_tensor *t, int64_t i)
{
    return ip_ldi((ir_elem)t->elem, t->data + (size_t)i * ip_eb((ir_elem)t->elem));
}

/* --------------------------------------------------------------- indices */

/* Row-major strides of dims. */
static inline void ip_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

/* Advances a row-major multi-index; false after the last one. */
static inline bool ip_next(int rank, const int64_t *dims, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/* The row-major index before idx (false, idx at the last one, past the
 * first): ip_next backwards. */
static inline bool ip_prev(int rank, const int64_t *dims, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        if (--idx[d] >= 0)
            return true;
        idx[d] = dims[d] - 1;
    }
    return false;
}

/* ---------------------------------------------------- attributes (kernel.c) */

/* Integer list attribute `name` of the kernel's op into out (at most cap);
 * returns the count, `absent` when the attribute is missing, or fails
 * (negative return, error set) when it is not an integer list or too long. */
int ir__ip_ints(ip_ctx *c, const char *name, int64_t *out, int cap, int absent);
/* Integer attribute `name`; fails when absent or not an integer. */
int ir__ip_int(ip_ctx *c, const char *name, int64_t *out);
/* Whether the op has a true unit or bool attribute `name`. */
bool ir__ip_flag(const ir_op *op, const char *name);
/* The enum word of a `#stablehlo<kind WORD>` attribute into buf, or NULL. */
const char *ir__ip_enum(const ir_op *op, const char *name, char *buf, size_t size);

/* ------------------------------------------------ region calls (ew.c) */

#define IP_MAX_VARIADIC 16

/* Repeated application of a scalar region body(acc..., x...) -> acc...
 * with a fast path for single commutative binary ops (add, max, ...). */
typedef struct ip_reducer {
    ip_ctx *c;
    const ir_region *r;
    uint32_t n;                           /* values per side */
    ir_opcode fast;                       /* IR_OP_UNKNOWN: evaluate the region */
    ip_class fast_class;                  /* with fast: ir__ip_class(elems[0]) */
    bool replace;                         /* the body returns its x arguments unchanged */
    ir_elem elems[IP_MAX_VARIADIC];       /* element types of the accumulators */
    ir_elem xelems[IP_MAX_VARIADIC];      /* element types of the values folded in */
    ir_tensor *args[2 * IP_MAX_VARIADIC]; /* scalar arguments of the region */
} ip_reducer;

int ir__ip_reducer_init(ip_reducer *rd, ip_ctx *c, const ir_region *r, uint32_t n, const ir_elem *elems,
                        const ir_elem *xelems);
/* acc[k] <- body(acc..., x...)[k]: acc points at an element of elems[k], x
 * at one of xelems[k] (xelems NULL at init: the same types). */
int ir__ip_reduce_step(ip_reducer *rd, uint8_t *const *acc, const uint8_t *const *x);
void ir__ip_reducer_free(ip_reducer *rd);

/* Calls a scalar region on elements (args[i] of types elems[i]) and stores
 * result k at res[k] as type res_elems[k]; a general per-element caller for
 * map, sort comparators and select_and_scatter's select. */
typedef struct ip_scalar_call {
    ip_ctx *c;
    const ir_region *r;
    uint32_t n_in;
    ir_elem in_elems[2 * IP_MAX_VARIADIC];
    ir_tensor *args[2 * IP_MAX_VARIADIC];
} ip_scalar_call;

int ir__ip_scall_init(ip_scalar_call *sc, ip_ctx *c, const ir_region *r, uint32_t n_in, const ir_elem *elems);
int ir__ip_scall(ip_scalar_call *sc, const uint8_t *const *args, uint32_t n_out, const ir_elem *res_elems,
                 uint8_t *const *res);
void ir__ip_scall_free(ip_scalar_call *sc);

/* ---------------------------------------------------------------- kernels */


/* ew.c */
int ir__ip_k_ew1(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
/* chlo.acosh, chlo.lgamma and the other CHLO math libm has, on floats */
double (*ir__ip_chlo_unary_fn(const char *name))(double);
int ir__ip_k_chlo_unary(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_top_k(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
/* chlo.mulhi on integers */
int ir__ip_k_mulhi(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
/* chlo.next_after on f64, f32, f16, bf16 */
int ir__ip_k_next_after(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_ew2(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_compare(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_select(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_clamp(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_convert(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_bitcast(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_complex(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_map(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);

/* shape.c */
int ir__ip_k_constant(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
/* chlo.ragged_dot (ragged.c) */
int ir__ip_k_ragged_dot(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
/* chlo.scan (scan.c) */
int ir__ip_k_scan(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
/* The op's "value" attribute (a dense literal) as a tensor of its own type
 * (widened under ir_interp_opts.f64), into *out (owned by the caller). */
int ir__ip_op_value(ip_ctx *c, ir_tensor **out);
int ir__ip_k_iota(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_broadcast_in_dim(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_broadcast(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_transpose(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_reshape(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_reverse(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_concatenate(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_update_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_pad(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_gather(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_scatter(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_torch_index_select(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_get_dimension_size(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_broadcast_in_dim(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_reshape(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_iota(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_pad(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_real_dynamic_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_dynamic_gather(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);

/* nn.c */
int ir__ip_k_dot(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_convolution(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_reduce(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_reduce_window(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_select_and_scatter(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_sort(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_batch_norm_inference(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_batch_norm_training(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_batch_norm_grad(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_triangular_solve(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_cholesky(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_fft(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);

/* fmha.c: cuDNN's fused attention custom calls (ir_fmha_kind != 0). */
int ir__ip_k_fmha(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);

/* manual.c: Shardy's sdy.manual_computation on every device of fr; and the
 * refusal of an op whose value depends on the device inside a body whose
 * devices are not its mesh's (r->manual_free set). */
int ir__ip_eval_manual(ip_run *r, ip_frame *fr, const ir_op *op);
int ir__ip_manual_refuse(ip_run *r, const ir_op *op);

/* coll.c: a collective over every device of frame fr. */
int ir__ip_collective(ip_run *r, ip_frame *fr, const ir_op *op);
/* Whether op is stablehlo.collective_reduce (not in the registry; coll.c
 * evaluates it with the collectives). */
bool ir__ip_is_collective_reduce(const ir_op *op);

/* ------------------------------------------------------ slots (frame.c) */

/* The numbering of func, made once per run (freed with the run). */
int ir__ip_fn_get(ip_run *r, const ir_op *func, const ir_op *caller, const ip_fn **out);
void ir__ip_fn_free(ip_fn *fn);
/* A frame of n_dev rows of func's slots; error at `at` when out of memory. */
int ir__ip_frame_new(ip_run *r, const ip_fn *fn, uint32_t n_dev, const int64_t *dev_ids, bool local, int depth,
                     const ir_op *at, ip_frame *fr);
void ir__ip_frame_free(ip_frame *fr);
/* The value v for device dev (an error at `user` when it has none). */
const ir_tensor *ir__ip_slot(ip_run *r, ip_frame *fr, uint32_t dev, const ir_op *user, const ir_value *v);
void ir__ip_slot_set(ip_frame *fr, uint32_t dev, const ir_value *v, ir_tensor *t);
/* Takes the value out of its slot (for values dead after a region). */
ir_tensor *ir__ip_slot_take(ip_frame *fr, uint32_t dev, const ir_value *v);
/* Puts the caller's tensor t in v's slot without taking it (the slot
 * forgets it when the value dies); false when out of memory. */
bool ir__ip_slot_lend(ip_frame *fr, uint32_t dev, const ir_value *v, const ir_tensor *t);
/* Whether v's slot holds a lent tensor (copy it to return it). */
bool ir__ip_slot_lent(const ip_frame *fr, uint32_t dev, const ir_value *v);
/* Where block b's ops begin in fn's deaths (ip_fn: die0), UINT32_MAX when
 * b has none; looked up once per run of the block. */
uint32_t ir__ip_block_deaths(const ip_fn *fn, const ir_block *b);
/* Frees, on every device of fr, the values no op of the block reads after
 * the op at `at` (ir__ip_block_deaths + the op's position). */
void ir__ip_slots_die(ip_frame *fr, uint32_t at);

/* -------------------------------------------------------------- eval.c */

static inline bool ip_is_terminator(const ir_op *op)
{
    return op->opcode == IR_OP_RETURN || op->opcode == IR_OP_FUNC_RETURN ||
           (op->opcode == IR_OP_UNKNOWN && !strcmp(op->name, "sdy.return")); /* ends Shardy's regions */
}
/* Evaluates single-block region reg of owner on every device of fr:
 * in[d * n_in + i] are the block arguments (borrowed, types checked; lent
 * to the slots when fr->borrow_args), out[d * n_out + j] receive new
 * tensors (all NULL on failure). */
int ir__ip_eval_region(ip_run *r, ip_frame *fr, const ir_op *owner, const ir_region *reg, uint32_t n_in,
                       const ir_tensor *const *in, uint32_t n_out, ir_tensor **out);
/* Runs func on n_dev devices (partition ids dev_ids) with args[d * n + i]
 * (borrowed); stores a heap array res[d * n_results + j] of its results.
 * `local` forbids collectives (a call inside a per-device region). */
int ir__ip_call(ip_run *r, const ir_op *func, uint32_t n_dev, const int64_t *dev_ids, int depth, bool local,
                const ir_tensor *const *args, ir_tensor ***res, const ir_op *caller);
/* Checks that func has a body and takes n_args arguments of the types of
 * args[d * n_args + i] for every device d. */
int ir__ip_check_args(ip_run *r, const ir_op *func, uint32_t n_dev, const ir_tensor *const *args, uint32_t n_args);
int ir__ip_run_init(ip_run *r, const ir_module *m, const ir_interp_opts *opts, ap_error *err);
void ir__ip_run_free(ip_run *r);

/* ------------------------------------------ quantized types (quant.c) */

/* A uniform quantized element type: values are held as storage integers
 * in [smin, smax]; per tensor (axis -1, n 1) or per axis (n scales). */
typedef struct ip_quant {
    ir_elem storage, expressed;
    int64_t smin, smax;
    int axis;
    uint32_t n;
    double *scale; /* n of each, owned: a copy of the struct moves them */
    int64_t *zp;
} ip_quant;

/* How an op with quantized operands or results is evaluated. */
typedef enum ip_quant_mode {
    IP_QM_NONE,       /* no quantized types */
    IP_QM_STORAGE,    /* its kernel runs on the storage integers */
    IP_QM_DEQUANTIZE, /* dequantize_op_quantize: ir__ip_quant_call */
    IP_QM_OWN,        /* uniform_quantize / uniform_dequantize */
    IP_QM_REFUSE      /* *why says why */
} ip_quant_mode;

bool ir__ip_is_quant_text(const char *text);
bool ir__ip_type_is_quant(const ir_type *t);
/* The storage element type of a `!quant.uniform<...>` text, IR_E_NONE when
 * it is not one. */
ir_elem ir__ip_quant_storage(const char *text);
/* Reads text into q (freed with ir__ip_quant_free); fills err otherwise. */
int ir__ip_quant_parse(const char *text, ip_quant *q, ap_error *err);
void ir__ip_quant_free(ip_quant *q);
bool ir__ip_op_has_quant(const ir_op *op);
ip_quant_mode ir__ip_quant_mode(const ir_op *op, const char **why);
/* New tensors (*out, the caller's) of x dequantized / quantized by q. */
int ir__ip_dequantize(ip_ctx *c, const ir_tensor *x, const ip_quant *q, ir_tensor **out);
int ir__ip_quantize(ip_ctx *c, const ir_tensor *x, const ip_quant *q, ir_tensor **out);
/* Runs float kernel k on c's op as dequantize_op_quantize. */
int ir__ip_quant_call(ip_ctx *c, ip_kernel k, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_uniform_quantize(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);
int ir__ip_k_uniform_dequantize(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out);

#endif /* IR_INTERP_INT_H */
