/*
 * quant.c - uniform quantized types, `!quant.uniform<STORAGE[<MIN:MAX>]:
 * EXPRESSED[:AXIS], SCALE[:ZP]>` or `..., {SCALE[:ZP], ...}>` per axis, with
 * the StableHLO spec's semantics ("Quantization computations").
 *
 * A quantized value is held as its storage integers (an i8 tensor for
 * `!quant.uniform<i8:f32, ...>`), so ops that only move elements (reshape,
 * transpose, slice, gather, concatenate, all_gather, ...) run unchanged on
 * them when every quantized type they touch has the same parameters.  The
 * spec's arithmetic ops are `dequantize_op_quantize`: their quantized
 * operands are dequantized to the expressed type, the float kernel runs on
 * a copy of the op whose quantized types are their expressed types, and its
 * quantized results are quantized (compare and select are the spec's
 * dequantize_compare and dequantize_select_quantize; a float result, as in a
 * hybrid dot_general, stays float: hybrid_dequantize_then_op).  An op that
 * would do arithmetic on quantized values in a body (reduce, sort, an
 * all_reduce, ...) or is not in the spec's list is refused: its kernel would
 * otherwise compute on the storage integers.
 *
 * dequantize(x) = convert(x - zero_point, expressed) * scale, the difference
 * taken exactly (the reference interpreter's lowering widens to i32 first);
 * quantize(x) = convert(round_nearest_even(clamp(min, x / scale +
 * zero_point, max)), storage), every step rounded to the expressed type.
 */
#include "interp_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define QPREFIX "!quant.uniform<"

static ir_elem elem_named(const char *s, size_t n)
{
    for (int e = IR_E_NONE + 1; e < IR_E_OPAQUE; e++) {
        const char *nm = ir_elem_name((ir_elem)e);
        if (strlen(nm) == n && !memcmp(nm, s, n))
            return (ir_elem)e;
    }
    return IR_E_NONE;
}

/* The storage part `i8`, `u8`, `ui8`, `i4<-7:7>` at *s: the element type
 * the values are held in and its range.  Advances *s past it. */
static bool parse_storage(const char **s, ir_elem *e, int64_t *smin, int64_t *smax)
{
    const char *p = *s;
    bool is_unsigned = false;
    if (p[0] == 'u' && p[1] == 'i')
        p += 2, is_unsigned = true;
    else if (p[0] == 'u')
        p += 1, is_unsigned = true;
    else if (p[0] == 'i')
        p += 1;
    else
        return false;
    char *end;
    long w = strtol(p, &end, 10);
    if (end == p || (w != 2 && w != 4 && w != 8 && w != 16 && w != 32))
        return false;
    char name[8];
    snprintf(name, sizeof name, "%s%ld", is_unsigned ? "ui" : "i", w);
    *e = elem_named(name, strlen(name));
    if (*e == IR_E_NONE)
        return false;
    if (is_unsigned) {
        *smin = 0;
        *smax = (int64_t)((UINT64_C(1) << w) - 1);
    } else {
        *smin = -(INT64_C(1) << (w - 1));
        *smax = (INT64_C(1) << (w - 1)) - 1;
    }
    p = end;
    if (*p == '<') {
        char *e2;
        int64_t lo = strtoll(p + 1, &e2, 10);
        if (e2 == p + 1 || *e2 != ':')
            return false;
        const char *q = e2 + 1;
        int64_t hi = strtoll(q, &e2, 10);
        if (e2 == q || *e2 != '>' || lo < *smin || hi > *smax || lo > hi)
            return false;
        *smin = lo;
        *smax = hi;
        p = e2 + 1;
    }
    *s = p;
    return true;
}

static const char *skip_sp(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t')
        p++;
    return p;
}

/* SCALE[:ZP] at *s. */
static bool parse_param(const char **s, double *scale, int64_t *zp)
{
    const char *p = skip_sp(*s);
    char *end;
    double v = strtod(p, &end);
    if (end == p || !(v > 0) || !isfinite(v))
        return false;
    *scale = v;
    *zp = 0;
    p = skip_sp(end);
    if (*p == ':') {
        const char *q = skip_sp(p + 1);
        int64_t z = strtoll(q, &end, 10);
        if (end == q)
            return false;
        *zp = z;
        p = end;
    }
    *s = skip_sp(p);
    return true;
}

bool ir__ip_is_quant_text(const char *text) { return text && !strncmp(text, QPREFIX, strlen(QPREFIX)); }

bool ir__ip_type_is_quant(const ir_type *t)
{
    return t && (t->kind == IR_T_TENSOR || t->kind == IR_T_SCALAR) && t->elem == IR_E_OPAQUE &&
           ir__ip_is_quant_text(t->text);
}

ir_elem ir__ip_quant_storage(const char *text)
{
    if (!ir__ip_is_quant_text(text))
        return IR_E_NONE;
    const char *p = text + strlen(QPREFIX);
    ir_elem e;
    int64_t lo, hi;
    return parse_storage(&p, &e, &lo, &hi) ? e : IR_E_NONE;
}

void ir__ip_quant_free(ip_quant *q)
{
    ap_free(q->scale);
    ap_free(q->zp);
    memset(q, 0, sizeof *q);
}

int ir__ip_quant_parse(const char *text, ip_quant *q, ap_error *err)
{
    memset(q, 0, sizeof *q);
    q->axis = -1;
    if (!ir__ip_is_quant_text(text))
        return ap_error_set(err, AP_EINVALID, "not a uniform quantized type");
    const char *p = text + strlen(QPREFIX);
    if (!parse_storage(&p, &q->storage, &q->smin, &q->smax) || *p != ':')
        goto bad;
    p++;
    size_t n = strcspn(p, ":,");
    q->expressed = elem_named(p, n);
    if (q->expressed != IR_E_F32 && q->expressed != IR_E_F16 && q->expressed != IR_E_BF16 &&
        q->expressed != IR_E_F64)
        goto bad;
    p += n;
    if (*p == ':') {
        char *end;
        long a = strtol(p + 1, &end, 10);
        if (end == p + 1 || a < 0 || a >= IR_MAX_RANK)
            goto bad;
        q->axis = (int)a;
        p = end;
    }
    if (*p != ',')
        goto bad;
    p = skip_sp(p + 1);
    if (q->axis < 0) {
        q->scale = ap_malloc(sizeof *q->scale);
        q->zp = ap_malloc(sizeof *q->zp);
        if (!q->scale || !q->zp) {
            ir__ip_quant_free(q);
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        }
        q->n = 1;
        if (!parse_param(&p, &q->scale[0], &q->zp[0]))
            goto bad;
    } else {
        if (*p != '{')
            goto bad;
        uint32_t cap = 0;
        p++;
        for (;;) {
            if (q->n == cap) {
                uint32_t nc = cap ? 2 * cap : 8;
                double *s = ap_malloc(sizeof *s * nc);
                int64_t *z = ap_malloc(sizeof *z * nc);
                if (!s || !z) {
                    ap_free(s);
                    ap_free(z);
                    ir__ip_quant_free(q);
                    return ap_error_set(err, AP_ENOMEM, "out of memory");
                }
                if (q->n) {
                    memcpy(s, q->scale, sizeof *s * q->n);
                    memcpy(z, q->zp, sizeof *z * q->n);
                }
                ap_free(q->scale);
                ap_free(q->zp);
                q->scale = s;
                q->zp = z;
                cap = nc;
            }
            if (!parse_param(&p, &q->scale[q->n], &q->zp[q->n]))
                goto bad;
            q->n++;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p != '}')
                goto bad;
            p = skip_sp(p + 1);
            break;
        }
    }
    if (*p != '>' || p[1] != '\0')
        goto bad;
    for (uint32_t i = 0; i < q->n; i++)
        if (q->zp[i] < q->smin || q->zp[i] > q->smax)
            goto bad;
    return 0;
bad:
    ir__ip_quant_free(q);
    return ap_error_set(err, AP_EUNSUPPORTED, "quantized type %s is not read (expected %sSTORAGE:EXPRESSED[:AXIS], "
                                              "SCALE[:ZP] or {SCALE[:ZP], ...}>)", text, QPREFIX);
}

/* Parameters of two types agree (axis aside): storage moves between them
 * keep every element's value. */
static bool same_params(const ip_quant *a, const ip_quant *b)
{
    if (a->storage != b->storage || a->expressed != b->expressed || a->smin != b->smin || a->smax != b->smax ||
        a->n != b->n || (a->axis < 0) != (b->axis < 0))
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (a->scale[i] != b->scale[i] || a->zp[i] != b->zp[i])
            return false;
    return true;
}

/* ---------------------------------------------------- which ops, and how */

/* Ops that only move elements (and the calls and control flow that pass
 * values on): they run on the storage integers. */
static bool moves_only(const ir_op *op)
{
    switch ((ir_opcode)op->opcode) {
    case IR_OP_RESHAPE: case IR_OP_TRANSPOSE: case IR_OP_BROADCAST_IN_DIM: case IR_OP_BROADCAST: case IR_OP_SLICE:
    case IR_OP_DYNAMIC_SLICE: case IR_OP_DYNAMIC_UPDATE_SLICE: case IR_OP_CONCATENATE: case IR_OP_GATHER:
    case IR_OP_REVERSE: case IR_OP_PAD: case IR_OP_TUPLE: case IR_OP_GET_TUPLE_ELEMENT: case IR_OP_OPTIMIZATION_BARRIER:
    case IR_OP_ALL_GATHER: case IR_OP_ALL_TO_ALL: case IR_OP_COLLECTIVE_PERMUTE: case IR_OP_COLLECTIVE_BROADCAST:
        return true;
    default: return false;
    }
}

/* The spec's dequantize_op_quantize ops (and compare, select, the hybrid
 * dot_general and convolution). */
static bool dequantizes(const ir_op *op)
{
    switch ((ir_opcode)op->opcode) {
    case IR_OP_ABS: case IR_OP_ADD: case IR_OP_ATAN2: case IR_OP_CBRT: case IR_OP_CEIL: case IR_OP_COSINE:
    case IR_OP_DIVIDE: case IR_OP_EXP: case IR_OP_EXPM1: case IR_OP_FLOOR: case IR_OP_LOG: case IR_OP_LOG1P:
    case IR_OP_LOGISTIC: case IR_OP_MAXIMUM: case IR_OP_MINIMUM: case IR_OP_MULTIPLY: case IR_OP_NEGATE:
    case IR_OP_POWER: case IR_OP_REMAINDER: case IR_OP_ROUND_AFZ: case IR_OP_ROUND_EVEN: case IR_OP_RSQRT:
    case IR_OP_SIGN: case IR_OP_SINE: case IR_OP_SQRT: case IR_OP_SUBTRACT: case IR_OP_TAN: case IR_OP_TANH:
    case IR_OP_COMPARE: case IR_OP_SELECT: case IR_OP_CLAMP: case IR_OP_DOT: case IR_OP_DOT_GENERAL:
    case IR_OP_CONVOLUTION: case IR_OP_BATCH_NORM_INFERENCE: case IR_OP_BATCH_NORM_TRAINING:
    case IR_OP_BATCH_NORM_GRAD: case IR_OP_CHOLESKY: case IR_OP_TRIANGULAR_SOLVE: case IR_OP_REDUCE_PRECISION:
        return true;
    default: return false;
    }
}

static bool type_has_quant(const ir_type *t)
{
    if (!t)
        return false;
    if (t->kind == IR_T_TUPLE) {
        for (int32_t i = 0; i < t->n_elems; i++)
            if (type_has_quant(t->elems[i]))
                return true;
        return false;
    }
    return ir__ip_type_is_quant(t);
}

bool ir__ip_op_has_quant(const ir_op *op)
{
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (type_has_quant(op->operands[i]->type))
            return true;
    for (uint32_t i = 0; i < op->n_results; i++)
        if (type_has_quant(op->results[i].type))
            return true;
    return false;
}

/* Folds type t (a tuple's members too) into the agreement of quantized
 * parameters: *first holds the first quantized type met (*have). */
static bool agree_type(const ir_type *t, ip_quant *first, bool *have)
{
    if (t && t->kind == IR_T_TUPLE) {
        for (int32_t i = 0; i < t->n_elems; i++) {
            if (t->elems[i] && t->elems[i]->kind == IR_T_TUPLE) {
                if (type_has_quant(t->elems[i]))
                    return false; /* nested tuples: not taken */
            } else if (!agree_type(t->elems[i], first, have))
                return false;
        }
        return true;
    }
    if (!ir__ip_type_is_quant(t))
        return true;
    ip_quant q;
    ap_error e;
    if (ir__ip_quant_parse(t->text, &q, &e) < 0)
        return false;
    if (!*have) {
        *first = q;
        *have = true;
        return true;
    }
    bool ok = same_params(first, &q);
    ir__ip_quant_free(&q);
    return ok;
}

/* Whether the quantized types of op's operands and results (and with
 * bodies, its regions' arguments) share their parameters, the axis aside;
 * false when one is not read. */
static bool params_agree(const ir_op *op, bool bodies)
{
    ip_quant first;
    bool have = false, ok = true;
    for (uint32_t k = 0; ok && k < op->n_operands; k++)
        ok = agree_type(op->operands[k]->type, &first, &have);
    for (uint32_t k = 0; ok && k < op->n_results; k++)
        ok = agree_type(op->results[k].type, &first, &have);
    for (uint32_t r = 0; ok && bodies && r < op->n_regions; r++)
        for (const ir_block *b = op->regions[r].first; ok && b; b = b->next)
            for (uint32_t k = 0; ok && k < b->n_args; k++)
                ok = agree_type(b->args[k].type, &first, &have);
    if (have)
        ir__ip_quant_free(&first);
    return ok;
}

/* Folds quantized type t into a side of promotes(): *q the first met. */
static bool side_type(const ir_type *t, ip_quant *q, bool *have, bool *same_storage, int64_t *lo, int64_t *hi)
{
    if (!ir__ip_type_is_quant(t))
        return !type_has_quant(t); /* quantized tuple members: not taken */
    ip_quant x;
    ap_error e;
    if (ir__ip_quant_parse(t->text, &x, &e) < 0)
        return false;
    bool ok = true;
    if (!*have) {
        *q = x;
        *have = true;
        *lo = x.smin;
        *hi = x.smax;
        return true;
    }
    ip_quant a = x, b = *q; /* the same parameters but the storage */
    a.storage = b.storage;
    a.smin = b.smin;
    a.smax = b.smax;
    ok = same_params(&a, &b);
    *same_storage = *same_storage && x.storage == q->storage && x.smin == q->smin && x.smax == q->smax;
    *lo = x.smin < *lo ? x.smin : *lo;
    *hi = x.smax > *hi ? x.smax : *hi;
    ir__ip_quant_free(&x);
    return ok;
}

/* Whether op's body computes on quantized values the kernels can hand it:
 * its operands' quantized types and those of its body's arguments and its
 * results share expressed type, scales and zero points, the latter all
 * one storage type whose range holds every operand's (the spec's
 * is_promotable: a wider storage; to_destination_type then requantizes
 * between equal scales and zero points, which keeps the integer, as the
 * kernels' integer conversion does). */
static bool promotes(const ir_op *op)
{
    ip_quant src, dst;
    bool have_s = false, have_d = false, same_s = true, same_d = true, ok = true;
    int64_t slo = 0, shi = 0, dlo = 0, dhi = 0;
    for (uint32_t k = 0; ok && k < op->n_operands; k++)
        ok = side_type(op->operands[k]->type, &src, &have_s, &same_s, &slo, &shi);
    for (uint32_t k = 0; ok && k < op->n_results; k++)
        ok = side_type(op->results[k].type, &dst, &have_d, &same_d, &dlo, &dhi);
    for (uint32_t r = 0; ok && r < op->n_regions; r++)
        for (const ir_block *b = op->regions[r].first; ok && b; b = b->next)
            for (uint32_t k = 0; ok && k < b->n_args; k++)
                ok = side_type(b->args[k].type, &dst, &have_d, &same_d, &dlo, &dhi);
    if (ok && have_s != have_d)
        ok = false;
    if (ok && have_s) {
        ip_quant a = src;
        a.storage = dst.storage;
        a.smin = dst.smin;
        a.smax = dst.smax;
        ok = same_d && same_params(&a, &dst) && slo >= dlo && shi <= dhi;
    }
    if (have_s)
        ir__ip_quant_free(&src);
    if (have_d)
        ir__ip_quant_free(&dst);
    return ok;
}

ip_quant_mode ir__ip_quant_mode(const ir_op *op, const char **why)
{
    *why = NULL;
    if (!ir__ip_op_has_quant(op))
        return IP_QM_NONE;
    switch ((ir_opcode)op->opcode) {
    case IR_OP_UNIFORM_QUANTIZE:
    case IR_OP_UNIFORM_DEQUANTIZE: return IP_QM_OWN;
    case IR_OP_WHILE: case IR_OP_IF: case IR_OP_CASE: case IR_OP_FUNC_CALL: case IR_OP_COMPOSITE:
    case IR_OP_CONSTANT: case IR_OP_BITCAST_CONVERT: case IR_OP_CUSTOM_CALL: case IR_OP_RETURN:
        return IP_QM_STORAGE; /* values passed on; bitcasts and literals of the storage integers */
    default: break;
    }
    if (op->opcode == IR_OP_UNKNOWN) {
        /* what passes values on (Shardy's annotations, calls, assertions
         * on the storage integers); the rest may compute */
        static const char *const pass[] = {"sdy.sharding_constraint", "sdy.propagation_barrier", "sdy.reshard",
                                           "sdy.data_flow_edge", "sdy.func_data_flow_edge", "sdy.named_computation",
                                           "sdy.manual_computation", "interpreter.run_parallel", "sdy.sharding_group",
                                           "func.return", "sdy.return"};
        for (size_t i = 0; i < sizeof pass / sizeof *pass; i++)
            if (!strcmp(op->name, pass[i]))
                return IP_QM_STORAGE;
        if (!strncmp(op->name, "check.", 6))
            return IP_QM_STORAGE;
        *why = "quantized values in an op outside StableHLO's quantized semantics cannot be evaluated";
        return IP_QM_REFUSE;
    }
    if (moves_only(op)) {
        if (params_agree(op, false))
            return IP_QM_STORAGE;
        /* a per-axis type whose count of scales changes, or operands
         * quantized differently: moved in the expressed type; the
         * collectives (coll.c) move storage only */
        const ir_op_info *info = ir_op_info_get((ir_opcode)op->opcode);
        if (info && info->kind == IR_K_COLL) {
            *why = "a collective between differently quantized values is not supported";
            return IP_QM_REFUSE;
        }
        return IP_QM_DEQUANTIZE;
    }
    if (dequantizes(op) && op->n_regions == 0)
        return IP_QM_DEQUANTIZE;
    /* A body applied to quantized values as they are (the spec's reduce,
     * sort, scatter, ...): its ops compute as above on the storage
     * integers the kernel hands it.  Taken when the body's arguments are of
     * the operands' quantized type, or of one with a wider storage
     * (promotes()); other types would need a requantization the kernels do
     * not make.  The
     * collectives with a body stay refused: the partitioner makes them to
     * add partial results of a split contraction, which quantized is not
     * the program's sum. */
    switch ((ir_opcode)op->opcode) {
    case IR_OP_REDUCE: case IR_OP_REDUCE_WINDOW: case IR_OP_SORT: case IR_OP_SCATTER: case IR_OP_SELECT_AND_SCATTER:
    case IR_OP_MAP:
        if (params_agree(op, true) || promotes(op))
            return IP_QM_STORAGE;
        *why = "a body whose quantized types differ from its operands' (other than by a wider storage) is not "
               "supported";
        return IP_QM_REFUSE;
    default: break;
    }
    *why = op->n_regions ? "quantized values in an op with a body (reduce, sort, scatter, all_reduce, ...) are not "
                           "supported"
                         : "this op is not defined on quantized types";
    return IP_QM_REFUSE;
}

/* --------------------------------------------------- the computations */

/* v rounded to float type e (f32, f16, bf16, f64). */
static double round_to(ir_elem e, double v)
{
    uint8_t b[8];
    ip_stf(e, b, v);
    return ip_ldf(e, b);
}

/* Index along q's axis of element i of a tensor with dims (0 per tensor). */
static inline uint32_t channel(const ip_quant *q, int64_t i, int64_t inner, int64_t dim)
{
    return q->axis < 0 ? 0 : (uint32_t)((i / inner) % dim);
}

/* Checks that q fits a tensor of rank/dims; inner: the product of the
 * dims after q's axis. */
static int fit(ip_ctx *c, const ip_quant *q, int rank, const int64_t *dims, int64_t *inner, const char *what)
{
    *inner = 1;
    if (q->axis < 0)
        return 0;
    if (q->axis >= rank || dims[q->axis] != (int64_t)q->n)
        return ir__ip_fail(c, AP_ETYPE, "%s: quantization dimension %d with %u scales does not fit the shape", what,
                           q->axis, q->n);
    for (int d = q->axis + 1; d < rank; d++)
        *inner *= dims[d];
    return 0;
}

int ir__ip_dequantize(ip_ctx *c, const ir_tensor *x, const ip_quant *q, ir_tensor **out)
{
    *out = NULL;
    int64_t inner;
    int rc = fit(c, q, x->rank, x->dims, &inner, "dequantize");
    if (rc < 0)
        return rc;
    if (x->kind != IR_TENSOR_ARRAY || x->elem != q->storage)
        return ir__ip_fail(c, AP_ETYPE, "a quantized value is not held in its storage type");
    ap_error e2;
    ir_tensor *y;
    if ((rc = ir__tensor_alloc(q->expressed, x->rank, x->dims, INT64_MAX, &y, &e2)) < 0)
        return ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
    size_t xb = ip_eb((ir_elem)x->elem), yb = ip_eb(q->expressed);
    int64_t dim = q->axis < 0 ? 1 : x->dims[q->axis];
    for (int64_t i = 0; i < x->numel; i++) {
        uint32_t k = channel(q, i, inner, dim);
        int64_t v = ip_ldi((ir_elem)x->elem, x->data + (size_t)i * xb) - q->zp[k];
        double f = round_to(q->expressed, (double)v);
        ip_stf(q->expressed, y->data + (size_t)i * yb, f * round_to(q->expressed, q->scale[k]));
    }
    *out = y;
    return 0;
}

int ir__ip_quantize(ip_ctx *c, const ir_tensor *x, const ip_quant *q, ir_tensor **out)
{
    *out = NULL;
    int64_t inner;
    int rc = fit(c, q, x->rank, x->dims, &inner, "quantize");
    if (rc < 0)
        return rc;
    if (x->kind != IR_TENSOR_ARRAY || x->elem != q->expressed)
        return ir__ip_fail(c, AP_ETYPE, "a value to quantize is not of the expressed type");
    ap_error e2;
    ir_tensor *y;
    if ((rc = ir__tensor_alloc(q->storage, x->rank, x->dims, INT64_MAX, &y, &e2)) < 0)
        return ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
    ir_elem fe = q->expressed;
    size_t xb = ip_eb(fe), yb = ip_eb(q->storage);
    double lo = round_to(fe, (double)q->smin), hi = round_to(fe, (double)q->smax);
    int64_t dim = q->axis < 0 ? 1 : x->dims[q->axis];
    for (int64_t i = 0; i < x->numel; i++) {
        uint32_t k = channel(q, i, inner, dim);
        double v = ip_ldf(fe, x->data + (size_t)i * xb);
        v = round_to(fe, v / round_to(fe, q->scale[k]));
        v = round_to(fe, v + round_to(fe, (double)q->zp[k]));
        if (!isnan(v))
            v = v < lo ? lo : v > hi ? hi : v; /* clamp: NaN stays NaN */
        v = nearbyint(v);                      /* round_nearest_even (the default rounding mode) */
        uint8_t b[8];
        ip_stf(fe, b, v);
        ir__ip_convert_elem(fe, b, q->storage, y->data + (size_t)i * yb);
    }
    *out = y;
    return 0;
}

/* The quantized type's parameters for a value of type t (NULL: none). */
static int quant_of(ip_ctx *c, const ir_type *t, ip_quant *q, bool *is_q)
{
    *is_q = ir__ip_type_is_quant(t);
    if (!*is_q)
        return 0;
    ap_error e2;
    int rc = ir__ip_quant_parse(t->text, q, &e2);
    return rc < 0 ? ir__ip_fail(c, rc, "%s", e2.msg) : 0;
}

int ir__ip_k_uniform_quantize(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    ip_quant qi, qo;
    bool iq, oq;
    int rc = quant_of(c, c->op->operands[0]->type, &qi, &iq);
    if (rc < 0)
        return rc;
    if ((rc = quant_of(c, c->op->results[0].type, &qo, &oq)) < 0)
        goto done_in;
    if (!oq) {
        rc = ir__ip_fail(c, AP_ETYPE, "the result must be of a quantized type");
        goto done;
    }
    const ir_tensor *x = in[0];
    ir_tensor *f = NULL;
    if (iq) { /* requantize: quantize(dequantize(x)) */
        if ((rc = ir__ip_dequantize(c, x, &qi, &f)) < 0)
            goto done;
        x = f;
    }
    if (x->kind != IR_TENSOR_ARRAY || x->elem != qo.expressed)
        rc = ir__ip_fail(c, AP_ETYPE, "the operand's type is not the result's expressed type");
    else
        rc = ir__ip_quantize(c, x, &qo, &out[0]);
    ir_tensor_free(f);
done:
    if (oq)
        ir__ip_quant_free(&qo);
done_in:
    if (iq)
        ir__ip_quant_free(&qi);
    return rc;
}

int ir__ip_k_uniform_dequantize(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    ip_quant q;
    bool iq;
    int rc = quant_of(c, c->op->operands[0]->type, &q, &iq);
    if (rc < 0)
        return rc;
    if (!iq)
        return ir__ip_fail(c, AP_ETYPE, "the operand must be of a quantized type");
    rc = ir__ip_dequantize(c, in[0], &q, &out[0]);
    ir__ip_quant_free(&q);
    return rc;
}

/* t with its quantized element type replaced by the expressed type. */
static const ir_type *expressed_type(ip_ctx *c, const ir_type *t, ir_type *buf, bool *is_q, int *rc)
{
    ip_quant q;
    *rc = quant_of(c, t, &q, is_q);
    if (*rc < 0 || !*is_q)
        return t;
    *buf = *t;
    buf->elem = (uint8_t)q.expressed;
    buf->text = NULL;
    buf->hash = 0;
    ir__ip_quant_free(&q);
    return buf;
}

int ir__ip_quant_call(ip_ctx *c, ip_kernel k, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    uint32_t no = op->n_operands, nr = op->n_results;
    int rc = 0;
    /* one allocation: the copy's operand values, their pointers, its
     * results, the types, the dequantized inputs, the kernel's outputs */
    size_t sz = sizeof(ir_value) * (no + nr) + sizeof(ir_value *) * no + sizeof(ir_type) * (no + nr) +
                sizeof(ir_tensor *) * (no + nr) + sizeof(const ir_tensor *) * no + 1;
    uint8_t *mem = ap_calloc(1, sz);
    if (!mem)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    ir_value *vals = (ir_value *)mem;
    ir_value **ops = (ir_value **)(vals + no + nr);
    ir_type *types = (ir_type *)(ops + no);
    ir_tensor **deq = (ir_tensor **)(types + no + nr);
    ir_tensor **fout = deq + no;
    const ir_tensor **fin = (const ir_tensor **)(fout + nr);
    ir_op sh = *op;
    sh.operands = ops;
    sh.results = vals + no;
    for (uint32_t i = 0; i < no && rc == 0; i++) {
        bool q;
        vals[i] = *op->operands[i];
        vals[i].type = expressed_type(c, op->operands[i]->type, &types[i], &q, &rc);
        ops[i] = &vals[i];
        fin[i] = in[i];
        if (rc == 0 && q) {
            ip_quant qq;
            bool dummy;
            if ((rc = quant_of(c, op->operands[i]->type, &qq, &dummy)) == 0) {
                rc = ir__ip_dequantize(c, in[i], &qq, &deq[i]);
                ir__ip_quant_free(&qq);
                fin[i] = deq[i];
            }
        }
    }
    for (uint32_t i = 0; i < nr && rc == 0; i++) {
        bool q;
        vals[no + i] = op->results[i];
        vals[no + i].type = expressed_type(c, op->results[i].type, &types[no + i], &q, &rc);
        vals[no + i].def = &sh;
    }
    if (rc == 0) {
        ip_ctx c2 = *c;
        c2.op = &sh;
        rc = k(&c2, fin, fout);
    }
    for (uint32_t i = 0; i < nr && rc == 0; i++) {
        ip_quant qq;
        bool q;
        if ((rc = quant_of(c, op->results[i].type, &qq, &q)) < 0)
            break;
        if (!q) {
            out[i] = fout[i];
            fout[i] = NULL;
            continue;
        }
        if (!fout[i])
            rc = ir__ip_fail(c, AP_EINTERNAL, "result %u was not made", i);
        else
            rc = ir__ip_quantize(c, fout[i], &qq, &out[i]);
        ir__ip_quant_free(&qq);
    }
    for (uint32_t i = 0; i < no; i++)
        ir_tensor_free(deq[i]);
    for (uint32_t i = 0; i < nr; i++)
        ir_tensor_free(fout[i]);
    ap_free(mem);
    return rc;
}
