/*
 * check.c - the semantic-equivalence check of a partition state: the
 * unpartitioned function, the PartIR:Core loop view and the SPMD program run
 * on the same seeded random inputs and their results are compared (see
 * ir_check in ircheck.h for the error measure and the tolerances).  Two
 * more unpartitioned runs set the tolerances of results that rounding
 * moves more than their precision alone says: one on inputs moved by an
 * ulp (sensitivity), one rounded another way (noise_floor: its sums split
 * and reordered, its sums rounded the other way at random; made only when
 * a float result is beyond its precision's tolerance, the one case where
 * the wider tolerance it may give can change a verdict).  And
 * the unpartitioned and SPMD programs run once more with every float in
 * f64 (ir_interp_opts.f64), held to IR_CHECK_F64_TOL: a structural error.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ircheck.h"
#include "ir_build.h"

double ir_check_default_tol(ir_elem e)
{
    switch (e) {
    case IR_E_F64: case IR_E_C128: return 1e-9;
    case IR_E_F32: case IR_E_TF32: case IR_E_C64: return 1e-4;
    case IR_E_F16: return 1e-2;
    case IR_E_BF16: return 5e-2;
    default: return ir_elem_is_float(e) ? 0.25 : 0;
    }
}

/* Unit roundoff: half the gap between 1 and the next float of the type. */
static double unit_roundoff(ir_elem e)
{
    int mantissa;
    switch (e) {
    case IR_E_F64: case IR_E_C128: mantissa = 52; break;
    case IR_E_F32: case IR_E_C64: mantissa = 23; break;
    case IR_E_TF32: case IR_E_F16: mantissa = 10; break;
    case IR_E_BF16: mantissa = 7; break;
    case IR_E_F8E3M4: mantissa = 4; break;
    case IR_E_F8E4M3FN: case IR_E_F8E4M3FNUZ: case IR_E_F8E4M3B11FNUZ: case IR_E_F8E4M3: case IR_E_F6E2M3FN:
        mantissa = 3;
        break;
    case IR_E_F8E5M2: case IR_E_F8E5M2FNUZ: case IR_E_F6E3M2FN: mantissa = 2; break;
    case IR_E_F4E2M1FN: mantissa = 1; break;
    default: mantissa = 0; break;
    }
    return ldexp(1.0, -(mantissa + 1));
}

/* Prefixes err's message with what was being done, keeping its code and
 * source position. */
static int in_run(ap_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int in_run(ap_error *err, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what - 2, fmt, ap);
    va_end(ap);
    strcat(what, ": ");
    size_t n = strlen(what), len = strnlen(err->msg, sizeof err->msg - 1);
    if (n + len >= sizeof err->msg) /* the tail of the message goes */
        len = sizeof err->msg - 1 - n;
    memmove(err->msg + n, err->msg, len);
    memcpy(err->msg, what, n);
    err->msg[n + len] = '\0';
    return err->code;
}

static const ir_type *result_type(const ir_op *f, uint32_t j)
{
    const ir_type *ft = ir_func_type(f);
    return ft->elems[ft->n_inputs + (int32_t)j];
}

/* The element type of a value's arrays (the first array of a tuple). */
static ir_elem elem_of(const ir_type *t)
{
    if (t->kind == IR_T_TENSOR || t->kind == IR_T_SCALAR)
        return (ir_elem)t->elem;
    for (int i = 0; t->kind == IR_T_TUPLE && i < t->n_elems; i++) {
        ir_elem e = elem_of(t->elems[i]);
        if (e != IR_E_NONE)
            return e;
    }
    return IR_E_NONE;
}

/* Largest finite |element| over the arrays of t: the scale errors are
 * taken against.  Infinities (a mask's -inf, a max over nothing) are left
 * out: as the scale they made every other element's error 0, so any
 * difference passed; an infinity itself must match exactly (a finite value
 * against it is an infinite error). */
static double magnitude(const ir_tensor *t)
{
    double m = 0;
    for (uint32_t i = 0; t->kind == IR_TENSOR_TUPLE && i < t->n_elems; i++)
        m = fmax(m, magnitude(t->elems[i]));
    for (int64_t i = 0; t->kind == IR_TENSOR_ARRAY && i < t->numel; i++) {
        double x = fabs(ir_tensor_get_f64(t, i));
        if (isfinite(x))
            m = fmax(m, x);
    }
    return m;
}

/* The largest absolute and relative differences of x from ref (arrays, or
 * tuples of them member by member), accumulated into *max_abs, *max_rel. */
static int compare(const ir_tensor *x, const ir_tensor *ref, double *max_abs, double *max_rel, ap_error *err)
{
    if (ref->kind == IR_TENSOR_TOKEN && x->kind == IR_TENSOR_TOKEN)
        return 0;
    if (ref->kind == IR_TENSOR_TUPLE) {
        if (x->kind != IR_TENSOR_TUPLE || x->n_elems != ref->n_elems)
            return ap_error_set(err, AP_EINVALID, "a tuple result has a different structure");
        for (uint32_t i = 0; i < ref->n_elems; i++)
            if (compare(x->elems[i], ref->elems[i], max_abs, max_rel, err) < 0)
                return err->code;
        return 0;
    }
    ir_tensor_diff td;
    if (ir_tensor_compare(x, ref, &td, err) < 0)
        return err->code;
    *max_abs = fmax(*max_abs, td.max_abs);
    *max_rel = fmax(*max_rel, td.max_rel);
    return 0;
}

/* What is held to the tolerance (see ir.h). */
static double error_of(double max_abs, double magnitude) { return max_abs / fmax(1.0, magnitude); }

/* ------------------------------------------------- precision of a result */

/* What the tolerance of a result follows: the lowest precision its
 * computation went through (the element types of the results of every op it
 * depends on, inside regions too), and the longest reduction that rounds at
 * every step in that precision (reduce and reduce_window with add or
 * multiply: the interpreter, like plain arithmetic, rounds each partial
 * result, and partitioning reorders the terms).  A candidate per op:
 * max(tolerance of its type, u * sqrt(terms)), u the unit roundoff, the
 * size of a random walk of `terms` roundings.  The largest wins. */
typedef struct basis {
    double tol;
    ir_elem elem;
    int64_t terms; /* > 1 when a long reduction set tol */
} basis;

/* The lowest-precision float element type among t's arrays. */
static ir_elem lowest_float(const ir_type *t)
{
    if (!t)
        return IR_E_NONE;
    if (t->kind == IR_T_TENSOR || t->kind == IR_T_SCALAR) {
        ir_elem e = (ir_elem)t->elem;
        return ir_elem_is_float(e) || ir_elem_is_complex(e) ? e : IR_E_NONE;
    }
    ir_elem worst = IR_E_NONE;
    for (int i = 0; t->kind == IR_T_TUPLE && i < t->n_elems; i++) {
        ir_elem e = lowest_float(t->elems[i]);
        if (e != IR_E_NONE && (worst == IR_E_NONE || ir_check_default_tol(e) > ir_check_default_tol(worst)))
            worst = e;
    }
    return worst;
}

/* Terms each element of a reduce / reduce_window with add or multiply
 * combines one rounding at a time; 1 for every other op. */
static int64_t rounded_terms(const ir_op *op)
{
    if ((op->opcode != IR_OP_REDUCE && op->opcode != IR_OP_REDUCE_WINDOW) || op->n_regions != 1 || !op->n_operands)
        return 1;
    ir_opcode r = ir_region_reduction(&op->regions[0]);
    if (r != IR_OP_ADD && r != IR_OP_MULTIPLY)
        return 1;
    const ir_type *in = op->operands[0]->type;
    int64_t dims[IR_MAX_RANK], n = 1;
    if (!in || in->kind != IR_T_TENSOR || in->rank < 0)
        return 1;
    if (op->opcode == IR_OP_REDUCE) {
        int k = ir_attr_int_list(ir_op_attr(op, "dimensions"), dims, IR_MAX_RANK);
        for (int i = 0; i < k; i++)
            if (dims[i] >= 0 && dims[i] < in->rank && in->dims[dims[i]] > 0)
                n *= in->dims[dims[i]];
    } else {
        int k = ir_attr_int_list(ir_op_attr(op, "window_dimensions"), dims, IR_MAX_RANK);
        for (int i = 0; i < k; i++)
            if (dims[i] > 0)
                n *= dims[i];
    }
    return n;
}

static void consider(basis *b, const ir_op *op)
{
    for (uint32_t j = 0; j < op->n_results; j++) {
        ir_elem e = lowest_float(op->results[j].type);
        if (e == IR_E_NONE)
            continue;
        int64_t terms = rounded_terms(op);
        double tol = ir_check_default_tol(e), walk = unit_roundoff(e) * sqrt((double)terms);
        if (walk > tol)
            tol = walk;
        else
            terms = 1;
        if (tol > b->tol || (tol == b->tol && terms > b->terms)) {
            b->tol = tol;
            b->elem = e;
            b->terms = terms;
        }
    }
}

/* Pushes the producers of op's operands, and of the operands of every op
 * inside its regions (values it captures), that are not seen yet. */
static bool push_producers(const ir_op *op, ir_ptrmap *seen, const ir_op ***stack, size_t *n, size_t *cap, basis *b)
{
    for (uint32_t i = 0; i < op->n_operands; i++) {
        const ir_op *d = op->operands[i] ? op->operands[i]->def : NULL;
        uint32_t x;
        if (!d || ir__map_get(seen, d, &x))
            continue;
        if (!ir__map_put(seen, d, 1))
            return false;
        if (*n == *cap) {
            size_t c = *cap ? *cap * 2 : 64;
            const ir_op **v = ap_realloc((void *)*stack, sizeof *v * c);
            if (!v)
                return false;
            *stack = v;
            *cap = c;
        }
        (*stack)[(*n)++] = d;
    }
    for (uint32_t r = 0; r < op->n_regions; r++)
        for (const ir_block *blk = op->regions[r].first; blk; blk = blk->next)
            for (const ir_op *o = blk->first; o; o = o->next) {
                consider(b, o);
                if (!push_producers(o, seen, stack, n, cap, b))
                    return false;
            }
    return true;
}

/* The basis of the tolerance of result j of f; false when out of memory. */
static bool result_basis(const ir_op *f, uint32_t j, basis *out)
{
    const ir_block *body = ir_func_entry(f);
    const ir_op *ret = body ? body->last : NULL;
    ir_elem e = elem_of(result_type(f, j));
    out->elem = e;
    out->tol = ir_check_default_tol(e);
    out->terms = 1;
    if (!(ir_elem_is_float(e) || ir_elem_is_complex(e)) || !ret || j >= ret->n_operands)
        return true; /* integers and booleans are exact */
    ir_ptrmap seen = {0};
    const ir_op **stack = NULL;
    size_t n = 0, cap = 0;
    /* a one-operand view of the return: the cone of operand j */
    const ir_op *root = ret->operands[j]->def;
    bool ok = true;
    if (root) {
        ok = ir__map_put(&seen, root, 1);
        if (ok) {
            stack = ap_malloc(sizeof *stack * 64);
            ok = stack != NULL;
            cap = 64;
            if (ok)
                stack[n++] = root;
        }
    }
    while (ok && n) {
        const ir_op *op = stack[--n];
        consider(out, op);
        ok = push_producers(op, &seen, &stack, &n, &cap, out);
    }
    ap_free((void *)stack);
    ir__map_free(&seen);
    return ok;
}

/* "bf16", "f16, a 1048576-term sum" */
static void basis_text(const basis *b, char *buf, size_t size)
{
    if (b->terms > 1)
        snprintf(buf, size, "%s, a %lld-term sum", ir_elem_name(b->elem), (long long)b->terms);
    else if (b->elem != IR_E_NONE)
        snprintf(buf, size, "%s", ir_elem_name(b->elem));
    else
        snprintf(buf, size, "exact");
}


/* The program's own assertions (`custom_call @check.expect_close(%x,
 * %expected)`, as in the StableHLO test suite) must hold in every run:
 * exact for expect_eq, else within 1e-4 absolute plus 1e-4 relative, or
 * within max_ulp_difference units in the last place of the element type
 * (StableHLO's check.expect_close: 3 unless the op says): its f16 and bf16
 * tests expect results one ulp from what a correct evaluation gives
 * (cbrt_float16_20_20: 1.52734 for 1.52637, ulp 0.00098).
 *
 * In the partitioned runs (loop view, SPMD) an assertion that is not exact
 * also passes within `widen`: the tolerance the check holds a result to
 * (its type's, or --tol) times max(1, largest |expected|).  A correct
 * partitioning rounds its sums in another order, which can move a value
 * further than the assertion allows around the unpartitioned result (an
 * f16 contraction split over devices and summed in f16:
 * dot_general_int8_4_3_float16_3_6 gave 1.29688 for 1.30078, 4 ulps), and
 * the check holds the results themselves no tighter. */
static bool within_ulps(double a, double b, ir_elem e, double max_ulp)
{
    if (!ir_elem_is_float(e) || isinf(a) || isinf(b) || isnan(a) || isnan(b))
        return false;
    int ex;
    double m = fmax(fabs(a), fabs(b));
    frexp(m, &ex); /* m = f * 2^ex, f in [0.5, 1) */
    double ulp = 2 * unit_roundoff(e) * ldexp(1.0, ex - 1);
    return fabs(a - b) <= max_ulp * ulp;
}

static int expectation(const ir_op *op, const char *name, const ir_tensor *const *operands, bool partitioned,
                       double run_tol, ap_error *err)
{
    const ir_tensor *x = operands[0], *want = operands[1];
    ir_tensor_diff d;
    if (ir_tensor_compare(x, want, &d, err) < 0)
        return err->code;
    /* check.eq: exact on integers, else within 1e-4 (the StableHLO
     * translate tool's evalCustomCallCheckEq, the one that defines it) */
    bool exact = !strcmp(name, "check.expect_eq") || !strcmp(name, "check.expect_eq_const") ||
                 (!strcmp(name, "check.eq") && !ir_elem_is_float((ir_elem)want->elem));
    double widen = 0;
    if (partitioned && !exact)
        widen = (run_tol > 0 ? run_tol : ir_check_default_tol((ir_elem)x->elem)) * fmax(1, magnitude(want));
    ir_attr *mu = ir_op_attr(op, "max_ulp_difference"), *tl = ir_op_attr(op, "tolerance");
    double max_ulp = mu && mu->kind == IR_A_INT ? (double)mu->u.i : 3;
    /* check.expect_almost_eq(_const)'s own tolerance, when it gives one */
    double tol = !exact && tl && tl->kind == IR_A_FLOAT ? tl->u.f : 0;
    if (ir_elem_is_complex((ir_elem)x->elem)) {
        /* element access gives the real part: judged on the moduli of the
         * differences (an imaginary part was not compared at all) */
        if (d.n_diff && (exact || (d.max_abs > fmax(fmax(tol, widen), 1e-4) && d.max_rel > 1e-4)))
            return ap_error_set(err, AP_ECONFLICT,
                                "line %u: the program's own %s fails: element %lld differs by %g (modulus), expected "
                                "%s",
                                op->src_line, name, (long long)(exact ? d.first_diff : d.worst), d.max_abs,
                                exact ? "equal" : "within 1e-4");
        return 0;
    }
    for (int64_t i = 0; i < x->numel && d.n_diff; i++) {
        double a = ir_tensor_get_f64(x, i), b = ir_tensor_get_f64(want, i);
        bool same = a == b || (isnan(a) && isnan(b));
        if (!same && (exact || !(fabs(a - b) <= 1e-4 + 1e-4 * fabs(b) || fabs(a - b) <= fmax(tol, widen) ||
                                 within_ulps(a, b, (ir_elem)x->elem, max_ulp))))
            return ap_error_set(err, AP_ECONFLICT, "line %u: the program's own %s fails: element %lld is %g, expected %g",
                                op->src_line, name, (long long)i, a, b);
    }
    return 0;
}

/* The custom calls the runs meet: annotations pass their operand through,
 * the program's assertions are checked, and the loop view's `any`
 * iterations must agree with the first. */
typedef struct handler_ctx {
    double tol;         /* 0: per element type */
    bool f64;           /* the f64 runs: every float held in f64 */
    bool no_assertions; /* the noise run: its values are rounded another
                           way on purpose, so the program's own exact
                           assertions are not asked of it */
    bool partitioned;   /* the loop view and SPMD runs: see expectation() */
} handler_ctx;

static int custom_call(void *vctx, const ir_op *op, uint32_t n_operands, const ir_tensor *const *operands,
                       uint32_t n_results, ir_tensor **results, ap_error *err)
{
    handler_ctx *ctx = vctx;
    ir_attr *target = ir_op_attr(op, "call_target_name");
    /* a custom call @check.*, or an op of the interpreter's check dialect
     * (the eval.c kernel passes a _const one's literal as the second operand) */
    const char *name = op->opcode == IR_OP_UNKNOWN                     ? op->name
                       : target && target->kind == IR_A_STRING ? target->u.str.s
                                                               : "?";
    if (!strncmp(name, "check.", 6) && n_operands == 2 && n_results == 0)
        return ctx->no_assertions ? 0 : expectation(op, name, operands, ctx->partitioned, ctx->tol, err);
    /* the StableHLO test data's `%ok = custom_call @check.eq(%x, %want) ->
     * tensor<i1>`: the assertion, and true (the translate tool fails the run
     * otherwise) */
    if (!strcmp(name, "check.eq") && n_operands == 2 && n_results == 1) {
        int rc = ctx->no_assertions ? 0 : expectation(op, name, operands, ctx->partitioned, ctx->tol, err);
        if (rc == 0 && (rc = ir_tensor_zeros(op->results[0].type, &results[0], err)) == 0) {
            if (results[0]->kind != IR_TENSOR_ARRAY || results[0]->elem != IR_E_I1 || results[0]->numel != 1)
                return ap_error_set(err, AP_ETYPE, "custom_call @check.eq: its result must be a tensor<i1>");
            ir_tensor_set_i64(results[0], 0, 1);
        }
        return rc;
    }
    bool agree = !strcmp(name, IR_ITERATIONS_AGREE);
    if (!agree && !ir_custom_call_is_identity(op))
        return ap_error_set(err, AP_EUNSUPPORTED, "custom_call @%s has no semantics the checker knows", name);
    if (n_operands < 1 || n_results != 1)
        return ap_error_set(err, AP_EINVALID, "custom_call @%s: expected one result and operands", name);
    double tol = ctx->f64 ? IR_CHECK_F64_TOL
                 : ctx->tol > 0 ? ctx->tol : ir_check_default_tol(elem_of(op->results[0].type));
    double scale = agree ? magnitude(operands[0]) : 0;
    for (uint32_t i = 1; agree && i < n_operands; i++) {
        double max_abs = 0, max_rel = 0;
        if (compare(operands[i], operands[0], &max_abs, &max_rel, err) < 0)
            return err->code;
        if (error_of(max_abs, scale) > tol)
            return ap_error_set(err, AP_ECONFLICT,
                                "iteration %u of a replicated (`any`) loop differs from iteration 0 by %g "
                                "(tolerance %g): the value is not the same on every device",
                                i, max_abs, tol);
    }
    return ir_tensor_clone(operands[0], &results[0], err);
}

/* Why the f64 runs cannot stand for module m (an op whose meaning depends
 * on a float's width, a custom call the handler above does not know to be
 * an identity, a complex value: held as declared, it would mix widths), in
 * why; false when they can. */
static bool f64_blocked_in(const ir_block *blk, char *why, size_t size)
{
    for (; blk; blk = blk->next)
        for (const ir_op *o = blk->first; o; o = o->next) {
            const char *name = NULL;
            if (ir_interp_op_width_bound(o))
                name = o->opcode == IR_OP_UNKNOWN ? o->name : ir_op_info_get((ir_opcode)o->opcode)->name;
            else if (o->opcode == IR_OP_CUSTOM_CALL) {
                ir_attr *t = ir_op_attr(o, "call_target_name");
                const char *tn = t && t->kind == IR_A_STRING ? t->u.str.s : "?";
                if (strncmp(tn, "check.", 6) && strcmp(tn, IR_ITERATIONS_AGREE) && !ir_custom_call_is_identity(o))
                    name = "custom_call";
            }
            for (uint32_t j = 0; !name && j < o->n_results; j++)
                if (o->results[j].type && ir_elem_is_complex(elem_of(o->results[j].type)))
                    name = "a complex value from";
            if (name) {
                snprintf(why, size, "%s at line %u", name, (unsigned)o->src_line);
                return true;
            }
            for (uint32_t r = 0; r < o->n_regions; r++)
                if (f64_blocked_in(o->regions[r].first, why, size))
                    return true;
        }
    return false;
}

/* A copy of t with its real float arrays widened to f64 (exactly): an
 * input of the f64 runs (ir_interp_opts.f64). */
static int widen(const ir_tensor *t, ir_tensor **out, ap_error *err)
{
    ir_elem e = (ir_elem)t->elem;
    if (t->kind != IR_TENSOR_ARRAY || !ir_elem_is_float(e) || ir_elem_is_complex(e) || e == IR_E_F64)
        return ir_tensor_clone(t, out, err);
    int rc = ir_tensor_new(IR_E_F64, t->rank, t->dims, out, err);
    for (int64_t i = 0; rc == 0 && i < t->numel; i++)
        ir_tensor_set_f64(*out, i, ir_tensor_get_f64(t, i));
    return rc;
}

void ir_check_report_free(ir_check_report *r)
{
    ap_free(r->results);
    memset(r, 0, sizeof *r);
}

/* Seeded inputs for every argument of f: floats in [lo, hi), integers in
 * [0, 8) (valid small indices), booleans 50/50.  An argument that cannot
 * have one (a dynamic shape) is named, %argN when it has no location name,
 * at the function's position in `file`. */
static int make_inputs(const char *file, const ir_op *f, uint64_t seed, double lo, double hi, ir_tensor **args,
                       ap_error *err)
{
    uint32_t n = ir_func_num_args(f);
    for (uint32_t i = 0; i < n; i++) {
        const ir_type *t = ir_func_arg(f, i)->type;
        uint64_t s = ap_hash_mix(seed, i);
        ir_tensor_free(args[i]);
        args[i] = NULL;
        int rc = ir_elem_is_float(elem_of(t)) || ir_elem_is_complex(elem_of(t))
                     ? ir_tensor_random_range(t, s, lo, hi, &args[i], err)
                     : ir_tensor_random(t, s, &args[i], err);
        if (rc < 0) {
            char who[200];
            if (ir_func_arg_name(f, i))
                snprintf(who, sizeof who, "%s", ir_func_arg_name(f, i));
            else
                snprintf(who, sizeof who, "%%arg%u", i);
            if (err->line <= 0 && f->src_line) {
                snprintf(err->file, sizeof err->file, "%s", file ? file : "");
                err->line = (int)f->src_line;
                err->col = (int)f->src_col;
            }
            return in_run(err, "argument %u (%s)", i, who);
        }
    }
    return 0;
}

static bool all_finite(ir_tensor **v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!ir_tensor_all_finite(v[i]))
            return false;
    return true;
}

/* How far each result of the unpartitioned run moves, measured as the check
 * measures errors, when every float input moves by a relative 2u of the
 * lowest-precision float input type (about one ulp: every input type can
 * hold that move), the signs drawn from the seed: sens[j], per relative
 * 2u of input moved (divide by *moved_by).  Reordering the arithmetic of
 * an ill-conditioned result (cancellation in a gradient) moves it about as
 * much as moving its inputs by one rounding of the precision it is
 * computed in.  sens[j] stays 0 for a result the moved inputs make
 * non-finite, and all are 0 without float inputs. */
static int sensitivity(const ir_module *m, const ir_op *f, ir_tensor *const *args, uint32_t n_args,
                       ir_tensor *const *ref, uint32_t n_ref, uint64_t seed, const ir_interp_opts *opts, double *sens,
                       double *moved_by, ap_error *err)
{
    ir_tensor **moved = NULL, **res = NULL;
    uint32_t n_res = 0;
    int rc = 0;
    double u = 0;
    for (uint32_t j = 0; j < n_ref; j++)
        sens[j] = 0;
    for (uint32_t i = 0; i < n_args; i++)
        if (args[i]->kind == IR_TENSOR_ARRAY && ir_elem_is_float((ir_elem)args[i]->elem))
            u = fmax(u, unit_roundoff((ir_elem)args[i]->elem));
    *moved_by = 2 * u;
    if (u == 0)
        return 0;
    if (!(moved = ap_calloc(n_args ? n_args : 1, sizeof *moved)))
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n_args; i++) {
        if ((rc = ir_tensor_clone(args[i], &moved[i], err)) < 0)
            goto out;
        ir_tensor *t = moved[i];
        if (t->kind != IR_TENSOR_ARRAY || !ir_elem_is_float((ir_elem)t->elem))
            continue;
        uint64_t bits = ap_hash_mix(seed ^ 0x5e45ull, i);
        for (int64_t e = 0; e < t->numel; e++) {
            if ((e & 63) == 0)
                bits = ap_hash_mix(bits, (uint64_t)e);
            double x = ir_tensor_get_f64(t, e);
            ir_tensor_set_f64(t, e, x * (1 + ((bits >> (e & 63)) & 1 ? 2 * u : -2 * u)));
        }
    }
    ir_interp_opts o = *opts;
    o.ops_evaluated = NULL;
    o.peak_held = NULL;
    if ((rc = ir_interp_run(m, f, (const ir_tensor *const *)moved, n_args, &res, &n_res, &o, err)) < 0) {
        rc = in_run(err, "unpartitioned run on moved inputs");
        goto out;
    }
    for (uint32_t j = 0; j < n_ref && j < n_res; j++) {
        double max_abs = 0, max_rel = 0;
        if (!ir_tensor_all_finite(res[j]) || compare(res[j], ref[j], &max_abs, &max_rel, err) < 0)
            continue;
        double e = error_of(max_abs, magnitude(ref[j]));
        sens[j] = isfinite(e) ? e : 0;
    }
out:
    ir_tensors_free(res, n_res);
    ir_tensors_free(moved, n_args);
    return rc;
}

/* The noise floor of each result: how far the unpartitioned program moves
 * when it rounds another way.  It runs again with the interpreter's
 * split_sums order (interp.h: every float dot_general and convolution
 * summed in `split` rounded chunks added one at a time, as a contraction
 * split over `split` devices and all-reduced is; sums and products of
 * reduce and scatter folded in reverse) and its random_rounding (every op
 * that rounds rounded the other way at random, seeded from the check's
 * seed).  A correct partitioning changes nothing but where and in what
 * order the program rounds, so noise[j], the difference of the two runs
 * measured as the check measures errors, is the rounding noise result j
 * carries at its precision.  noise[j] stays 0 where that run is not
 * finite. */
static int noise_floor(const ir_module *m, const ir_op *f, ir_tensor *const *args, uint32_t n_args,
                       ir_tensor *const *ref, uint32_t n_ref, int split, uint64_t seed, const ir_interp_opts *opts,
                       double *noise, ap_error *err)
{
    ir_tensor **res = NULL;
    uint32_t n_res = 0;
    ir_interp_opts o = *opts;
    handler_ctx h = *(const handler_ctx *)opts->custom_call_ctx;
    h.no_assertions = true;
    o.custom_call_ctx = &h;
    o.split_sums = split;
    o.random_rounding = ap_hash_mix(seed, 0x4015eull) | 1;
    o.random_rounding_sums = true;
    for (uint32_t j = 0; j < n_ref; j++)
        noise[j] = 0;
    if (ir_interp_run(m, f, (const ir_tensor *const *)args, n_args, &res, &n_res, &o, err) < 0)
        return in_run(err, "unpartitioned run rounded another way (the noise run)");
    int rc = 0;
    for (uint32_t j = 0; j < n_ref && j < n_res; j++) {
        double max_abs = 0, max_rel = 0;
        if (!ir_tensor_all_finite(res[j]))
            continue;
        if ((rc = compare(res[j], ref[j], &max_abs, &max_rel, err)) < 0)
            break;
        double e = error_of(max_abs, magnitude(ref[j]));
        noise[j] = isfinite(e) ? e : 0;
    }
    ir_tensors_free(res, n_res);
    return rc;
}

int ir_check(const ir_partition *p, const ir_check_opts *opts, ir_check_report *r, ap_error *err)
{
    ir_check_opts o = opts ? *opts : IR_CHECK_OPTS_DEFAULT;
    const ir_pctx *c = ir_partition_ctx(p);
    const ir_op *f = ir_pctx_func(c);
    uint32_t n_args = ir_func_num_args(f), n_ref = 0, n_loops = 0, n_spmd = 0, n_ref64 = 0, n_spmd64 = 0;
    ir_tensor **args64 = NULL, **ref64 = NULL, **spmd64 = NULL; /* the f64 runs */
    ir_tensor **args = ap_calloc(n_args ? n_args : 1, sizeof *args), **ref = NULL, **loops = NULL, **spmd = NULL;
    double *sens = NULL, *noise = NULL; /* per result: see sensitivity(), noise_floor() */
    ir_elem *elem = NULL;               /* per result: the float type its tolerance follows, IR_E_NONE if exact */
    bool need_noise = false;            /* some float result is beyond its precision's tolerance */
    ir_module *tm = NULL;
    ir_lowered low = {0};
    handler_ctx hctx = {.tol = o.tol};
    ir_interp_opts io = {.max_elems = o.max_elems,
                         .custom_call = custom_call,
                         .custom_call_ctx = &hctx,
                         .threads = ir_interp_host_threads()};
    memset(r, 0, sizeof *r);
    r->n_devices = ir_mesh_devices(ir_pctx_mesh(c));
    if (!args)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    int64_t arg_bytes = 0, max_bytes = o.max_arg_bytes > 0 ? o.max_arg_bytes : IR_CHECK_MAX_ARG_BYTES;
    for (uint32_t i = 0; i < n_args; i++) {
        int64_t b = ir_type_bytes(ir_func_arg(f, i)->type);
        arg_bytes += b > 0 ? b : 0;
    }
    if (arg_bytes > max_bytes) {
        char have[32], limit[32];
        ap_free(args);
        return ap_error_set(err, AP_ELIMIT,
                            "the arguments of @%s take %s, above the limit of %s: the check runs every value on "
                            "the host several times over, so use a small configuration of the model",
                            ir_func_name(f), ap_format_bytes((double)arg_bytes, have, sizeof have),
                            ap_format_bytes((double)max_bytes, limit, sizeof limit));
    }

    /* The unpartitioned run; inputs that overflow it (log or sqrt of a
     * negative, say) are redrawn positive, since a NaN compares with
     * nothing. */
    int rc = 0;
    double t0;
    r->input_lo = -1, r->input_hi = 1;
    for (;;) {
        if ((rc = make_inputs(ir_pctx_module(c)->filename, f, o.seed, r->input_lo, r->input_hi, args, err)) < 0)
            goto out;
        io.ops_evaluated = &r->ops[IR_CHECK_REF];
        io.peak_held = &r->held[IR_CHECK_REF];
        r->ops[IR_CHECK_REF] = 0;
        r->held[IR_CHECK_REF] = 0;
        t0 = ap_mono_s();
        if (ir_interp_run(ir_pctx_module(c), f, (const ir_tensor *const *)args, n_args, &ref, &n_ref, &io, err) < 0) {
            rc = in_run(err, "unpartitioned run");
            goto out;
        }
        r->seconds[IR_CHECK_REF] = ap_mono_s() - t0;
        if (all_finite(ref, n_ref))
            break;
        if (r->input_lo > 0) {
            snprintf(r->note, sizeof r->note, "some unpartitioned results are not finite even on positive inputs");
            break;
        }
        ir_tensors_free(ref, n_ref);
        ref = NULL;
        r->input_lo = 0.01;
        snprintf(r->note, sizeof r->note, "inputs in [-1, 1) gave non-finite results; floats redrawn in [0.01, 1)");
    }

    /* How ill-conditioned each result is (unless --tol sets them all). */
    if (!(sens = ap_calloc(n_ref ? n_ref : 1, sizeof *sens)) ||
        !(noise = ap_calloc(n_ref ? n_ref : 1, sizeof *noise)) || !(elem = ap_calloc(n_ref ? n_ref : 1, sizeof *elem))) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto out;
    }
    double moved_by = 0;
    if (!(o.tol > 0) &&
        (rc = sensitivity(ir_pctx_module(c), f, args, n_args, ref, n_ref, o.seed, &io, sens, &moved_by, err)) < 0)
        goto out;

    /* The loop view, as a program of its own. */
    hctx.partitioned = true;
    t0 = ap_mono_s();
    io.ops_evaluated = &r->ops[IR_CHECK_LOOPS];
    io.peak_held = &r->held[IR_CHECK_LOOPS];
    if (ir_temporal(p, &tm, err) < 0 ||
        ir_interp_run(tm, ir_module_entry(tm), (const ir_tensor *const *)args, n_args, &loops, &n_loops, &io, err) < 0) {
        rc = in_run(err, "loop view");
        goto out;
    }
    r->seconds[IR_CHECK_LOOPS] = ap_mono_s() - t0;

    /* The SPMD program on every device. */
    t0 = ap_mono_s();
    const ir_module *sm = o.spmd;
    if (!sm) {
        ir_lower_opts lo = IR_LOWER_OPTS_DEFAULT;
        lo.drop_all_reduce = o.drop_all_reduce;
        if (ir_lower_ex(p, &lo, &low, err) < 0) {
            rc = in_run(err, "SPMD lowering");
            goto out;
        }
        sm = low.module;
    }
    const ir_op *sf = o.spmd ? ir_module_entry(sm) : ir_module_func(sm, ir_func_name(f));
    if (!sf) {
        rc = ap_error_set(err, AP_EINVALID, "the SPMD module has no entry function");
        goto out;
    }
    io.ops_evaluated = &r->ops[IR_CHECK_SPMD];
    io.peak_held = &r->held[IR_CHECK_SPMD];
    if (ir_spmd_run(sm, sf, (const ir_tensor *const *)args, n_args, &spmd, &n_spmd, &io, err) < 0) {
        rc = in_run(err, "SPMD run");
        goto out;
    }
    r->seconds[IR_CHECK_SPMD] = ap_mono_s() - t0;
    if (n_loops != n_ref || n_spmd != n_ref) {
        rc = ap_error_set(err, AP_EINVALID, "the partitioned programs return %u and %u results, the function %u",
                          n_loops, n_spmd, n_ref);
        goto out;
    }
    /* Both again with every float held in f64 (ircheck.h): a structural
     * error shows there above f64 rounding, however low the precision. */
    char why[160] = "";
    if (f64_blocked_in(ir_module_body(ir_pctx_module(c)), why, sizeof why) ||
        f64_blocked_in(ir_module_body(sm), why, sizeof why)) {
        snprintf(r->f64_skipped, sizeof r->f64_skipped, "the program has %s, whose meaning depends on float widths",
                 why);
    } else if (!(args64 = ap_calloc(n_args ? n_args : 1, sizeof *args64))) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto out;
    } else {
        for (uint32_t i = 0; i < n_args; i++)
            if ((rc = widen(args[i], &args64[i], err)) < 0)
                goto out;
        ir_interp_opts io64 = io;
        handler_ctx h64 = {.tol = o.tol, .f64 = true, .no_assertions = true};
        io64.f64 = true;
        io64.custom_call_ctx = &h64;
        io64.ops_evaluated = &r->ops[IR_CHECK_F64_REF];
        io64.peak_held = &r->held[IR_CHECK_F64_REF];
        t0 = ap_mono_s();
        int frc = ir_interp_run(ir_pctx_module(c), f, (const ir_tensor *const *)args64, n_args, &ref64, &n_ref64,
                                &io64, err);
        r->seconds[IR_CHECK_F64_REF] = ap_mono_s() - t0;
        if (frc == 0) {
            io64.ops_evaluated = &r->ops[IR_CHECK_F64_SPMD];
            io64.peak_held = &r->held[IR_CHECK_F64_SPMD];
            t0 = ap_mono_s();
            frc = ir_spmd_run(sm, sf, (const ir_tensor *const *)args64, n_args, &spmd64, &n_spmd64, &io64, err);
            r->seconds[IR_CHECK_F64_SPMD] = ap_mono_s() - t0;
            if (frc == AP_ECONFLICT) { /* replicated copies disagree: wrong, as in the native run */
                rc = in_run(err, "f64 SPMD run");
                goto out;
            }
        }
        if (frc == AP_ENOMEM) {
            rc = frc;
            goto out;
        }
        if (frc < 0 || n_ref64 != n_ref || n_spmd64 != n_ref)
            /* the native runs stand: a failure here is no verdict */
            snprintf(r->f64_skipped, sizeof r->f64_skipped, "an f64 run failed: %.200s",
                     frc < 0 ? err->msg : "another number of results");
        else
            r->f64_ran = true;
        ap_error_clear(err);
    }

    /* a wrong answer planted by a test (ir_check_opts) */
    if (o.plant_error != 0 && o.plant_result < n_spmd && spmd[o.plant_result]->kind == IR_TENSOR_ARRAY &&
        spmd[o.plant_result]->numel > 0) {
        ir_tensor *t = spmd[o.plant_result];
        double scale = fmax(1.0, magnitude(ref[o.plant_result]));
        ir_tensor_set_f64(t, 0, ir_tensor_get_f64(t, 0) + o.plant_error * scale);
    }

    r->results = ap_calloc(n_ref ? n_ref : 1, sizeof *r->results);
    if (!r->results) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto out;
    }
    r->n_results = n_ref;
    r->ok = true;
    for (uint32_t j = 0; j < n_ref; j++) {
        ir_check_result *res = &r->results[j];
        ir_attr *info = ir_func_result_attr(f, j, "jax.result_info");
        if (info && info->kind == IR_A_STRING && info->u.str.s[0])
            snprintf(res->name, sizeof res->name, "%s", info->u.str.s);
        else
            snprintf(res->name, sizeof res->name, "result #%u", j);
        ap_buf tb;
        ap_buf_init(&tb);
        ir_type_print(&tb, result_type(f, j));
        snprintf(res->type, sizeof res->type, "%.*s", (int)tb.len, tb.data ? tb.data : "");
        ap_buf_free(&tb);
        if (o.tol > 0) {
            res->tol = res->tol_rules = o.tol;
            snprintf(res->tol_basis, sizeof res->tol_basis, "--tol");
        } else {
            basis b;
            if (!result_basis(f, j, &b)) {
                rc = ap_error_set(err, AP_ENOMEM, "out of memory");
                goto out;
            }
            res->tol = b.tol;
            basis_text(&b, res->tol_basis, sizeof res->tol_basis);
            /* integers and booleans stay exact: a float rounded the other
             * way may move an index, which is no licence for a wrong one
             * (the sensitivity rule gave them 0.1) */
            bool inexact = ir_elem_is_float(b.elem) || ir_elem_is_complex(b.elem);
            /* moving the inputs by one rounding of the precision the
             * result is computed in (linearly scaled from moved_by) */
            double per_ulp = moved_by > 0 ? sens[j] * 2 * unit_roundoff(b.elem) / moved_by : 0;
            double by_sens = inexact ? fmin(IR_CHECK_SENSITIVITY * per_ulp, IR_CHECK_SENSITIVITY_CAP) : 0;
            if (by_sens > res->tol) {
                res->tol = by_sens;
                snprintf(res->tol_basis, sizeof res->tol_basis, "%s, ill-conditioned (%.2g per ulp)",
                         ir_elem_name(b.elem), per_ulp);
            }
            res->tol_rules = res->tol;
            elem[j] = inexact ? b.elem : IR_E_NONE;
        }
        res->ok = true;
        double scale = magnitude(ref[j]);
        ir_tensor *const got[2] = {loops[j], spmd[j]};
        for (int k = 0; k < 2; k++) {
            if (compare(got[k], ref[j], &res->max_abs[k], &res->max_rel[k], err) < 0) {
                rc = in_run(err, "%s (%s)", res->name, k ? "SPMD" : "loop view");
                goto out;
            }
            res->error[k] = error_of(res->max_abs[k], scale);
            if (!(res->error[k] <= res->tol))
                res->ok = false;
        }
        if (r->f64_ran) {
            double a64 = 0, rel64 = 0;
            if (compare(spmd64[j], ref64[j], &a64, &rel64, err) < 0) {
                rc = in_run(err, "%s (f64 SPMD)", res->name);
                goto out;
            }
            res->error_f64 = error_of(a64, magnitude(ref64[j]));
            res->f64_mismatch = !(res->error_f64 <= IR_CHECK_F64_TOL);
            if (res->f64_mismatch)
                res->ok = false;
            if (!(res->error_f64 <= r->f64_error))
                r->f64_error = res->error_f64;
        }
        need_noise |= elem[j] != IR_E_NONE && !(fmax(res->error[0], res->error[1]) <= res->tol_rules);
    }

    /* The rounding noise of each result (unless --tol sets them all), where
     * it can change a verdict: its sums split in as many chunks as there
     * are devices, the most any partitioning on this mesh splits one into
     * (at least 2), and its roundings drawn at random. */
    if (!(o.tol > 0) && (need_noise || o.noise_always)) {
        int64_t split = r->n_devices > 2 ? r->n_devices : 2;
        t0 = ap_mono_s();
        io.ops_evaluated = &r->ops[IR_CHECK_NOISE];
        io.peak_held = &r->held[IR_CHECK_NOISE];
        if ((rc = noise_floor(ir_pctx_module(c), f, args, n_args, ref, n_ref,
                              (int)(split < IR_INTERP_MAX_SPLIT ? split : IR_INTERP_MAX_SPLIT), o.seed, &io, noise,
                              err)) < 0) {
            /* A program may not survive rounding another way (a loop
             * until x == 0.75 that misses it runs out of iterations): the
             * check goes on without the noise, whose tolerances could only
             * have been wider. */
            if (rc == AP_ENOMEM)
                goto out;
            size_t used = strlen(r->note);
            snprintf(r->note + used, sizeof r->note - used, "%sno tolerance follows rounding noise: %s",
                     used ? "; " : "", err->msg);
            for (uint32_t j = 0; j < n_ref; j++)
                noise[j] = 0;
            ap_error_clear(err);
            rc = 0;
        } else {
            r->noise_ran = true;
        }
        r->seconds[IR_CHECK_NOISE] = ap_mono_s() - t0;
    }
    for (uint32_t j = 0; j < n_ref; j++) {
        ir_check_result *res = &r->results[j];
        /* the rounding noise it carries, with a margin (ircheck.h) */
        res->noise = noise[j];
        double by_noise = elem[j] != IR_E_NONE ? fmin(IR_CHECK_NOISE_FACTOR * noise[j], IR_CHECK_NOISE_CAP) : 0;
        if (by_noise > res->tol) {
            res->tol = by_noise;
            snprintf(res->tol_basis, sizeof res->tol_basis, "%s, rounding noise %.2g", ir_elem_name(elem[j]), noise[j]);
        }
        res->ok = !res->f64_mismatch && fmax(res->error[0], res->error[1]) <= res->tol;
        res->within_noise = res->ok && !(fmax(res->error[0], res->error[1]) <= res->tol_rules);
        r->n_within_noise += res->within_noise;
        r->ok &= res->ok;
    }

out:
    ap_free(sens);
    ap_free(noise);
    ap_free(elem);
    ir_tensors_free(ref, n_ref);
    ir_tensors_free(loops, n_loops);
    ir_tensors_free(spmd, n_spmd);
    ir_tensors_free(ref64, n_ref64);
    ir_tensors_free(spmd64, n_spmd64);
    ir_tensors_free(args64, args64 ? n_args : 0);
    ir_lowered_free(&low);
    ir_module_free(tm);
    ir_tensors_free(args, n_args);
    if (rc < 0)
        ir_check_report_free(r);
    return rc;
}
