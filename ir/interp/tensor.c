/*
 * tensor.c - host tensors for the interpreter: construction (zeros,
 * buffers, values, seeded random), element access, comparison with absolute
 * and relative differences, printing, and element conversion with the rules
 * of stablehlo.convert.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

/* ============================================================ element types */

ip_class ir__ip_class(ir_elem e)
{
    if (e == IR_E_I1)
        return IP_B;
    if (e == IR_E_INDEX)
        return IP_S;
    if (ir_elem_is_complex(e))
        return IP_C;
    if (ir_elem_is_float(e))
        return IP_F;
    if (ir_elem_is_unsigned(e))
        return IP_U;
    if (ir_elem_is_int(e))
        return IP_S;
    return IP_X;
}

/* Whether the interpreter can compute with element type e. */
static bool elem_ok(ir_elem e) { return e > IR_E_NONE && e < IR_E_OPAQUE && ir__ip_class(e) != IP_X; }

/* ============================================================ allocation */

/* One allocation holds the header, the dims and the data, so that the many
 * scalars region bodies make cost one malloc each. */
int ir__tensor_alloc(ir_elem e, int rank, const int64_t *dims, int64_t limit, ir_tensor **out, ap_error *err)
{
    *out = NULL;
    if (!elem_ok(e))
        return ap_error_set(err, AP_EINVALID, "element type %s cannot be computed with", ir_elem_name(e));
    if (rank < 0 || rank > IR_MAX_RANK)
        return ap_error_set(err, AP_EINVALID, "rank %d is not supported", rank);
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0)
            return ap_error_set(err, AP_EINVALID, "dimension %d has a negative or dynamic size", d);
        if (dims[d] && n > INT64_MAX / dims[d])
            return ap_error_set(err, AP_ELIMIT, "tensor has more than %" PRId64 " elements", limit);
        n *= dims[d];
    }
    if (limit <= 0)
        limit = IR_INTERP_MAX_ELEMS;
    if (n > limit)
        return ap_error_set(err, AP_ELIMIT, "tensor has %" PRId64 " elements, above the limit of %" PRId64, n, limit);
    size_t eb = ip_eb(e);
    size_t nbytes = (size_t)n * eb;
    size_t head = sizeof(ir_tensor) + sizeof(int64_t) * (size_t)rank;
    head = (head + 15) & ~(size_t)15;
    ir_tensor *t = ap_malloc(head + nbytes);
    if (!t)
        return ap_error_set(err, AP_ENOMEM, "out of memory for a tensor of %zu bytes", nbytes);
    memset(t, 0, head + nbytes);
    int64_t *dd = (int64_t *)(t + 1);
    if (rank)
        memcpy(dd, dims, sizeof *dd * (size_t)rank);
    t->kind = IR_TENSOR_ARRAY;
    t->elem = (uint8_t)e;
    t->rank = rank;
    t->dims = dd;
    t->numel = n;
    t->nbytes = nbytes;
    t->data = nbytes ? (uint8_t *)t + head : NULL;
    *out = t;
    return 0;
}

static int tensor_tuple(uint32_t n, ir_tensor **out, ap_error *err)
{
    ir_tensor *t = ap_calloc(1, sizeof *t);
    ir_tensor **el = n ? ap_calloc(n, sizeof *el) : NULL;
    if (!t || (n && !el)) {
        ap_free(t);
        ap_free(el);
        *out = NULL;
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    t->kind = IR_TENSOR_TUPLE;
    t->n_elems = n;
    t->elems = el;
    *out = t;
    return 0;
}

int ir__tensor_alloc_type(const ir_type *t, int64_t limit, ir_tensor **out, ap_error *err)
{
    return ir__tensor_alloc_type_w(t, limit, false, out, err);
}

int ir__tensor_alloc_type_w(const ir_type *t, int64_t limit, bool wide, ir_tensor **out, ap_error *err)
{
    *out = NULL;
    if (!t)
        return ap_error_set(err, AP_EINVALID, "no type");
    char buf[128];
    switch ((ir_type_kind)t->kind) {
    case IR_T_TENSOR:
    case IR_T_SCALAR:
        if (t->kind == IR_T_TENSOR && !ir_type_is_static(t)) {
            ap_buf b;
            ap_buf_init(&b);
            ir_type_print(&b, t);
            snprintf(buf, sizeof buf, "%s", b.data ? b.data : "?");
            ap_buf_free(&b);
            return ap_error_set(err, AP_EINVALID, "dynamic shape %s", buf);
        }
        if (t->elem == IR_E_OPAQUE && ir__ip_quant_storage(t->text) != IR_E_NONE) /* held as its storage (quant.c) */
            return ir__tensor_alloc(ir__ip_quant_storage(t->text), t->kind == IR_T_TENSOR ? t->rank : 0, t->dims,
                                    limit, out, err);
        if (t->elem == IR_E_OPAQUE || !elem_ok((ir_elem)t->elem))
            return ap_error_set(err, AP_EINVALID, "element type %s cannot be computed with",
                                t->text ? t->text : ir_elem_name((ir_elem)t->elem));
        return ir__tensor_alloc(ir__ip_wide_elem((ir_elem)t->elem, wide), t->kind == IR_T_TENSOR ? t->rank : 0, t->dims,
                                limit, out, err);
    case IR_T_TOKEN: {
        ir_tensor *k = ap_calloc(1, sizeof *k);
        if (!k)
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        k->kind = IR_TENSOR_TOKEN;
        *out = k;
        return 0;
    }
    case IR_T_TUPLE: {
        ir_tensor *tu;
        int rc = tensor_tuple((uint32_t)t->n_elems, &tu, err);
        if (rc < 0)
            return rc;
        for (int32_t i = 0; i < t->n_elems; i++) {
            if ((rc = ir__tensor_alloc_type_w(t->elems[i], limit, wide, &tu->elems[i], err)) < 0) {
                ir_tensor_free(tu);
                return rc;
            }
        }
        *out = tu;
        return 0;
    }
    default:
        return ap_error_set(err, AP_EINVALID, "values of type %s cannot be computed with",
                            t->text ? t->text : "(function)");
    }
}

int ir_tensor_new(ir_elem e, int rank, const int64_t *dims, ir_tensor **out, ap_error *err)
{
    return ir__tensor_alloc(e, rank, dims, 0, out, err);
}

int ir_tensor_zeros(const ir_type *t, ir_tensor **out, ap_error *err) { return ir__tensor_alloc_type(t, 0, out, err); }

void ir_tensor_free(ir_tensor *t)
{
    if (!t)
        return;
    if (t->kind == IR_TENSOR_TUPLE) {
        for (uint32_t i = 0; i < t->n_elems; i++)
            ir_tensor_free(t->elems[i]);
        ap_free(t->elems);
    }
    ap_free(t);
}

void ir_tensors_free(ir_tensor **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        ir_tensor_free(v[i]);
    ap_free(v);
}

int ir_tensor_clone(const ir_tensor *t, ir_tensor **out, ap_error *err)
{
    *out = NULL;
    if (t->kind == IR_TENSOR_ARRAY) {
        ir_tensor *c;
        int rc = ir__tensor_alloc((ir_elem)t->elem, t->rank, t->dims, INT64_MAX, &c, err);
        if (rc < 0)
            return rc;
        if (t->nbytes)
            memcpy(c->data, t->data, t->nbytes);
        *out = c;
        return 0;
    }
    if (t->kind == IR_TENSOR_TOKEN) {
        ir_tensor *k = ap_calloc(1, sizeof *k);
        if (!k)
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        k->kind = IR_TENSOR_TOKEN;
        *out = k;
        return 0;
    }
    ir_tensor *tu;
    int rc = tensor_tuple(t->n_elems, &tu, err);
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < t->n_elems; i++) {
        if ((rc = ir_tensor_clone(t->elems[i], &tu->elems[i], err)) < 0) {
            ir_tensor_free(tu);
            return rc;
        }
    }
    *out = tu;
    return 0;
}

int ir_tensor_from_buffer(const ir_type *t, const void *data, size_t nbytes, ir_tensor **out, ap_error *err)
{
    if (!t || t->kind != IR_T_TENSOR) {
        *out = NULL;
        return ap_error_set(err, AP_EINVALID, "ir_tensor_from_buffer needs a tensor type");
    }
    int rc = ir__tensor_alloc_type(t, 0, out, err);
    if (rc < 0)
        return rc;
    if (nbytes != (*out)->nbytes) {
        size_t want = (*out)->nbytes;
        ir_tensor_free(*out);
        *out = NULL;
        return ap_error_set(err, AP_EINVALID, "buffer has %zu bytes, the type needs %zu", nbytes, want);
    }
    if (nbytes)
        memcpy((*out)->data, data, nbytes);
    return 0;
}

/* ============================================================ conversion */

/* Round a double to the nearest float with ties to odd: a second rounding
 * to a narrower format is then correct (the sticky bit survives). */
static float round_to_odd_f32(double v)
{
    float f = (float)v;
    if (isnan(v) || isinf(f) || (double)f == v)
        return f;
    /* step toward zero when (float) rounded away from it */
    if (fabs((double)f) > fabs(v))
        f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1;
    memcpy(&f, &u, 4);
    return f;
}

/* Stores a double into a float type with one rounding (f64 -> bf16
 * directly, not through f32). */
static void store_f_exact(ir_elem e, uint8_t *p, double v)
{
    switch (e) {
    case IR_E_F64: memcpy(p, &v, 8); return;
    case IR_E_F32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        return;
    }
    case IR_E_F16:
    case IR_E_BF16: ir__float_store(e, p, (double)round_to_odd_f32(v)); return;
    default: ir__float_store(e, p, v); return;
    }
}

/* float -> integer: truncation toward zero, saturating at the type's range,
 * NaN -> 0 (what XLA does; StableHLO leaves it implementation-defined). */
static int64_t f_to_int(double v, ir_elem to)
{
    if (isnan(v))
        return 0;
    int bits = to == IR_E_INDEX ? 64 : ir_elem_bits(to);
    v = trunc(v);
    if (ir__ip_class(to) == IP_U) {
        if (v <= 0)
            return 0;
        if (bits == 64)
            return v >= 18446744073709551616.0 ? (int64_t)UINT64_MAX : (int64_t)(uint64_t)v;
        double hi = (double)((UINT64_C(1) << bits) - 1);
        return v >= hi ? (int64_t)((UINT64_C(1) << bits) - 1) : (int64_t)v;
    }
    if (bits == 64) {
        if (v >= 9223372036854775808.0)
            return INT64_MAX;
        if (v < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)v;
    }
    double hi = (double)((INT64_C(1) << (bits - 1)) - 1), lo = -hi - 1;
    return v >= hi ? (int64_t)hi : v <= lo ? (int64_t)lo : (int64_t)v;
}

/* An integer (signed, or unsigned when `uns`) as a float of type to. */
static void int_to_f(int64_t v, bool uns, ir_elem to, uint8_t *dst)
{
    if (to == IR_E_F32) {
        float f = uns ? (float)(uint64_t)v : (float)v;
        memcpy(dst, &f, 4);
        return;
    }
    double d = uns ? (double)(uint64_t)v : (double)v;
    store_f_exact(to, dst, d);
}

void ir__ip_convert_elem(ir_elem from, const uint8_t *src, ir_elem to, uint8_t *dst)
{
    ip_class cf = ir__ip_class(from), ct = ir__ip_class(to);
    if (from == to) {
        memcpy(dst, src, ip_eb(from));
        return;
    }
    switch (cf) {
    case IP_B:
    case IP_S:
    case IP_U: {
        int64_t v = ip_ldi(from, src);
        if (ct == IP_F)
            int_to_f(v, cf == IP_U, to, dst);
        else if (ct == IP_C)
            ip_stc(to, dst, ip_cplx(cf == IP_U ? (double)(uint64_t)v : (double)v, 0.0));
        else if (ct == IP_B)
            dst[0] = v != 0;
        else
            ip_sti(to, dst, v);
        return;
    }
    case IP_F: {
        double v = ip_ldf(from, src);
        if (ct == IP_F)
            store_f_exact(to, dst, v);
        else if (ct == IP_C)
            ip_stc(to, dst, ip_cplx(v, 0.0));
        else if (ct == IP_B)
            dst[0] = v != 0; /* NaN is non-zero: true */
        else
            ip_sti(to, dst, f_to_int(v, to));
        return;
    }
    case IP_C: {
        double complex v = ip_ldc(from, src);
        if (ct == IP_C)
            ip_stc(to, dst, v);
        else if (ct == IP_F)
            store_f_exact(to, dst, creal(v));
        else if (ct == IP_B)
            dst[0] = creal(v) != 0; /* the spec drops the imaginary part, as for every non-complex type */
        else
            ip_sti(to, dst, f_to_int(creal(v), to));
        return;
    }
    default: memset(dst, 0, ip_eb(to)); return;
    }
}

/* ========================================================= element access */

double ir_tensor_get_f64(const ir_tensor *t, int64_t i)
{
    ir_elem e = (ir_elem)t->elem;
    /* the common floats first, without the class (the IP_F case below):
     * `check` reads every value of every run through here */
    if (e == IR_E_F32)
        return ip_ldf(e, t->data + (size_t)i * 4);
    if (e == IR_E_F64)
        return ip_ldf(e, t->data + (size_t)i * 8);
    if (e == IR_E_BF16)
        return ip_ldf(e, t->data + (size_t)i * 2);
    const uint8_t *p = t->data + (size_t)i * ip_eb(e);
    switch (ir__ip_class(e)) {
    case IP_F: return ip_ldf(e, p);
    case IP_C: return creal(ip_ldc(e, p));
    case IP_U: return (double)(uint64_t)ip_ldi(e, p);
    case IP_S:
    case IP_B: return (double)ip_ldi(e, p);
    default: return 0;
    }
}

int64_t ir_tensor_get_i64(const ir_tensor *t, int64_t i)
{
    ir_elem e = (ir_elem)t->elem;
    const uint8_t *p = t->data + (size_t)i * ip_eb(e);
    switch (ir__ip_class(e)) {
    case IP_F: return f_to_int(ip_ldf(e, p), IR_E_I64);
    case IP_C: return f_to_int(creal(ip_ldc(e, p)), IR_E_I64);
    default: return ip_ldi(e, p);
    }
}

void ir_tensor_set_f64(ir_tensor *t, int64_t i, double v)
{
    /* f64 and f32 as ir__ip_convert_elem stores them (store_f_exact), without its dispatch */
    if (t->elem == IR_E_F64) {
        memcpy(t->data + (size_t)i * 8, &v, 8);
        return;
    }
    if (t->elem == IR_E_F32) {
        float f = (float)v;
        memcpy(t->data + (size_t)i * 4, &f, 4);
        return;
    }
    ir__ip_convert_elem(IR_E_F64, (const uint8_t *)&v, (ir_elem)t->elem, t->data + (size_t)i * ip_eb((ir_elem)t->elem));
}

void ir_tensor_set_i64(ir_tensor *t, int64_t i, int64_t v)
{
    ir__ip_convert_elem(IR_E_I64, (const uint8_t *)&v, (ir_elem)t->elem, t->data + (size_t)i * ip_eb((ir_elem)t->elem));
}

static int from_values(ir_elem e, int rank, const int64_t *dims, size_t n, ir_tensor **out, ap_error *err)
{
    int rc = ir_tensor_new(e, rank, dims, out, err);
    if (rc < 0)
        return rc;
    if (n != (size_t)(*out)->numel && n != 1) {
        int64_t want = (*out)->numel;
        ir_tensor_free(*out);
        *out = NULL;
        return ap_error_set(err, AP_EINVALID, "%zu values given for a tensor of %" PRId64 " elements", n, want);
    }
    return 0;
}

int ir_tensor_from_f64(ir_elem e, int rank, const int64_t *dims, const double *v, size_t n, ir_tensor **out,
                       ap_error *err)
{
    int rc = from_values(e, rank, dims, n, out, err);
    if (rc < 0)
        return rc;
    for (int64_t i = 0; i < (*out)->numel; i++)
        ir_tensor_set_f64(*out, i, v[n == 1 ? 0 : i]);
    return 0;
}

int ir_tensor_from_i64(ir_elem e, int rank, const int64_t *dims, const int64_t *v, size_t n, ir_tensor **out,
                       ap_error *err)
{
    int rc = from_values(e, rank, dims, n, out, err);
    if (rc < 0)
        return rc;
    for (int64_t i = 0; i < (*out)->numel; i++)
        ir_tensor_set_i64(*out, i, v[n == 1 ? 0 : i]);
    return 0;
}

bool ir__tensor_same_type(const ir_tensor *a, const ir_tensor *b)
{
    if (a->kind != b->kind)
        return false;
    if (a->kind == IR_TENSOR_TOKEN)
        return true;
    if (a->kind == IR_TENSOR_TUPLE) {
        if (a->n_elems != b->n_elems)
            return false;
        for (uint32_t i = 0; i < a->n_elems; i++)
            if (!ir__tensor_same_type(a->elems[i], b->elems[i]))
                return false;
        return true;
    }
    if (a->elem != b->elem || a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

/* The element type a value of tensor or scalar type ty is held in: a
 * quantized type's storage (quant.c), f64 for a real float when wide. */
static ir_elem held_elem(const ir_type *ty, bool wide)
{
    if (ty->elem == IR_E_OPAQUE) {
        ir_elem s = ir__ip_quant_storage(ty->text);
        return s != IR_E_NONE ? s : IR_E_OPAQUE;
    }
    return ir__ip_wide_elem((ir_elem)ty->elem, wide);
}

bool ir__tensor_has_type_w(const ir_tensor *t, const ir_type *ty, bool wide)
{
    if (!t || !ty)
        return false;
    switch ((ir_type_kind)ty->kind) {
    case IR_T_TOKEN: return t->kind == IR_TENSOR_TOKEN;
    case IR_T_TUPLE:
        if (t->kind != IR_TENSOR_TUPLE || t->n_elems != (uint32_t)ty->n_elems)
            return false;
        for (uint32_t i = 0; i < t->n_elems; i++)
            if (!ir__tensor_has_type_w(t->elems[i], ty->elems[i], wide))
                return false;
        return true;
    case IR_T_SCALAR: return t->kind == IR_TENSOR_ARRAY && t->elem == held_elem(ty, wide) && t->rank == 0;
    case IR_T_TENSOR:
        if (t->kind != IR_TENSOR_ARRAY || t->elem != held_elem(ty, wide) || t->rank != ty->rank)
            return false;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] != ty->dims[d])
                return false;
        return true;
    default: return false;
    }
}

bool ir_tensor_has_type(const ir_tensor *t, const ir_type *ty) { return ir__tensor_has_type_w(t, ty, false); }

bool ir_tensor_all_finite(const ir_tensor *t)
{
    if (t->kind == IR_TENSOR_TUPLE) {
        for (uint32_t i = 0; i < t->n_elems; i++)
            if (!ir_tensor_all_finite(t->elems[i]))
                return false;
        return true;
    }
    if (t->kind != IR_TENSOR_ARRAY)
        return true;
    ir_elem e = (ir_elem)t->elem;
    ip_class k = ir__ip_class(e);
    size_t eb = ip_eb(e);
    for (int64_t i = 0; i < t->numel; i++) {
        const uint8_t *p = t->data + (size_t)i * eb;
        if (k == IP_F && !isfinite(ip_ldf(e, p)))
            return false;
        if (k == IP_C) {
            double complex z = ip_ldc(e, p);
            if (!isfinite(creal(z)) || !isfinite(cimag(z)))
                return false;
        }
    }
    return true;
}

/* ================================================================ random */

/* splitmix64: a tiny, well-mixed generator whose whole state is one word
 * the caller's seed starts. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static int fill_random(ir_tensor *t, uint64_t *s, double lo, double hi, bool default_ints)
{
    if (t->kind == IR_TENSOR_TUPLE) {
        for (uint32_t i = 0; i < t->n_elems; i++)
            fill_random(t->elems[i], s, lo, hi, default_ints);
        return 0;
    }
    if (t->kind != IR_TENSOR_ARRAY)
        return 0;
    ir_elem e = (ir_elem)t->elem;
    ip_class k = ir__ip_class(e);
    size_t eb = ip_eb(e);
    double ilo = default_ints ? 0 : ceil(lo), ihi = default_ints ? 7 : floor(hi);
    if (ihi < ilo)
        ihi = ilo;
    for (int64_t i = 0; i < t->numel; i++) {
        uint8_t *p = t->data + (size_t)i * eb;
        switch (k) {
        case IP_F: store_f_exact(e, p, lo + (hi - lo) * rng_unit(s)); break;
        case IP_C: {
            double re = lo + (hi - lo) * rng_unit(s), im = lo + (hi - lo) * rng_unit(s);
            ip_stc(e, p, ip_cplx(re, im));
            break;
        }
        case IP_B: p[0] = (uint8_t)(rng_next(s) >> 63); break;
        default: {
            double span = ihi - ilo + 1;
            int64_t v = (int64_t)(ilo + floor(rng_unit(s) * span));
            ip_sti(e, p, v);
            break;
        }
        }
    }
    return 0;
}

int ir_tensor_random(const ir_type *t, uint64_t seed, ir_tensor **out, ap_error *err)
{
    int rc = ir__tensor_alloc_type(t, 0, out, err);
    if (rc < 0)
        return rc;
    uint64_t s = seed;
    return fill_random(*out, &s, -1.0, 1.0, true);
}

int ir_tensor_random_range(const ir_type *t, uint64_t seed, double lo, double hi, ir_tensor **out, ap_error *err)
{
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi)) {
        *out = NULL;
        return ap_error_set(err, AP_EINVALID, "random range [%g, %g) is empty or not finite", lo, hi);
    }
    int rc = ir__tensor_alloc_type(t, 0, out, err);
    if (rc < 0)
        return rc;
    uint64_t s = seed;
    return fill_random(*out, &s, lo, hi, false);
}

/* ============================================================= comparison */

void ir__tensor_type_str(const ir_tensor *t, char *buf, size_t size)
{
    if (t->kind == IR_TENSOR_TOKEN) {
        snprintf(buf, size, "!stablehlo.token");
        return;
    }
    if (t->kind == IR_TENSOR_TUPLE) {
        snprintf(buf, size, "tuple<%u members>", t->n_elems);
        return;
    }
    size_t n = (size_t)snprintf(buf, size, "tensor<");
    for (int d = 0; d < t->rank && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%" PRId64 "x", t->dims[d]);
    if (n < size)
        snprintf(buf + n, size - n, "%s>", ir_elem_name((ir_elem)t->elem));
}

int ir_tensor_compare(const ir_tensor *a, const ir_tensor *b, ir_tensor_diff *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    out->first_diff = out->worst = -1;
    if (a->kind != IR_TENSOR_ARRAY || b->kind != IR_TENSOR_ARRAY)
        return ap_error_set(err, AP_EINVALID, "only arrays can be compared");
    if (!ir__tensor_same_type(a, b)) {
        char ta[128], tb[128];
        ir__tensor_type_str(a, ta, sizeof ta);
        ir__tensor_type_str(b, tb, sizeof tb);
        return ap_error_set(err, AP_EINVALID, "cannot compare %s with %s", ta, tb);
    }
    ir_elem e = (ir_elem)a->elem;
    ip_class k = ir__ip_class(e);
    size_t eb = ip_eb(e);
    double worst = -1;
    for (int64_t i = 0; i < a->numel; i++) {
        const uint8_t *pa = a->data + (size_t)i * eb, *pb = b->data + (size_t)i * eb;
        if (memcmp(pa, pb, eb) == 0)
            continue;
        double d, ma, mb;
        if (k == IP_C) {
            double complex x = ip_ldc(e, pa), y = ip_ldc(e, pb);
            bool nx = isnan(creal(x)) || isnan(cimag(x)), ny = isnan(creal(y)) || isnan(cimag(y));
            if (nx && ny)
                continue;
            d = nx || ny ? INFINITY : cabs(x - y);
            ma = cabs(x);
            mb = cabs(y);
        } else {
            double x = ir_tensor_get_f64(a, i), y = ir_tensor_get_f64(b, i);
            if (k == IP_F && isnan(x) && isnan(y))
                continue;
            if (k == IP_S || k == IP_U) {
                /* exact for 64-bit values beyond 2^53 */
                int64_t xi = ip_ldi(e, pa), yi = ip_ldi(e, pb);
                uint64_t ud = k == IP_U ? ((uint64_t)xi > (uint64_t)yi ? (uint64_t)xi - (uint64_t)yi
                                                                       : (uint64_t)yi - (uint64_t)xi)
                                        : (xi > yi ? (uint64_t)xi - (uint64_t)yi : (uint64_t)yi - (uint64_t)xi);
                d = (double)ud;
            } else {
                d = isnan(x) || isnan(y) ? INFINITY : fabs(x - y);
            }
            ma = fabs(x);
            mb = fabs(y);
        }
        out->n_diff++;
        if (out->first_diff < 0)
            out->first_diff = i;
        if (d > worst) {
            worst = d;
            out->worst = i;
        }
        if (d > out->max_abs || isnan(d))
            out->max_abs = d;
        double m = ma > mb ? ma : mb;
        double rel = m > 0 ? d / m : INFINITY;
        if (d == INFINITY && m == INFINITY)
            rel = INFINITY;
        if (rel > out->max_rel)
            out->max_rel = rel;
    }
    return 0;
}

/* ============================================================== printing */

static void print_elem(ap_buf *b, ir_elem e, const uint8_t *p)
{
    switch (ir__ip_class(e)) {
    case IP_F: {
        double v = ip_ldf(e, p);
        if (isnan(v))
            ap_buf_puts(b, "nan");
        else if (isinf(v))
            ap_buf_puts(b, v > 0 ? "inf" : "-inf");
        else
            ap_buf_printf(b, "%.*g", e == IR_E_F64 ? 17 : 9, v);
        break;
    }
    case IP_C: {
        double complex z = ip_ldc(e, p);
        ap_buf_printf(b, "(%.9g, %.9g)", creal(z), cimag(z));
        break;
    }
    case IP_B: ap_buf_puts(b, p[0] ? "true" : "false"); break;
    case IP_U: ap_buf_printf(b, "%" PRIu64, (uint64_t)ip_ldi(e, p)); break;
    default: ap_buf_printf(b, "%" PRId64, ip_ldi(e, p)); break;
    }
}

static void print_nested(ap_buf *b, const ir_tensor *t, int d, int64_t *pos, int64_t max, bool *elided)
{
    if (d == t->rank) {
        if (max > 0 && *pos >= max) {
            if (!*elided)
                ap_buf_puts(b, "...");
            *elided = true;
            (*pos)++;
            return;
        }
        print_elem(b, (ir_elem)t->elem, t->data + (size_t)*pos * ip_eb((ir_elem)t->elem));
        (*pos)++;
        return;
    }
    ap_buf_putc(b, '[');
    for (int64_t i = 0; i < t->dims[d]; i++) {
        if (max > 0 && *pos >= max && *elided) {
            int64_t inner = 1;
            for (int k = d + 1; k < t->rank; k++)
                inner *= t->dims[k];
            *pos += inner * (t->dims[d] - i);
            break;
        }
        if (i)
            ap_buf_puts(b, ", ");
        print_nested(b, t, d + 1, pos, max, elided);
    }
    ap_buf_putc(b, ']');
}

void ir_tensor_print(ap_buf *b, const ir_tensor *t, int64_t max_elems)
{
    char ty[300];
    if (t->kind == IR_TENSOR_TUPLE) {
        ap_buf_puts(b, "(");
        for (uint32_t i = 0; i < t->n_elems; i++) {
            if (i)
                ap_buf_puts(b, ", ");
            ir_tensor_print(b, t->elems[i], max_elems);
        }
        ap_buf_puts(b, ")");
        return;
    }
    ir__tensor_type_str(t, ty, sizeof ty);
    ap_buf_puts(b, ty);
    if (t->kind != IR_TENSOR_ARRAY)
        return;
    ap_buf_putc(b, ' ');
    int64_t pos = 0;
    bool elided = false;
    print_nested(b, t, 0, &pos, max_elems, &elided);
}
