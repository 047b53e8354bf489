/*
 * ew.c - element-wise kernels of the interpreter: unary and binary
 * arithmetic with StableHLO's integer rules (wrapping, shifts past the
 * width, division by zero as XLA defines it), compare with its direction
 * and compare_type, select, clamp, convert, bitcast_convert,
 * reduce_precision, complex and map; and the calls of scalar region bodies
 * element by element that map and the kernels with a reduction body use.
 *
 * Floats are computed in double and stored in their own type (one rounding
 * for f32; f16/bf16 through f32 with round-to-nearest-even); integers in
 * 64 bits and wrapped to their width on store.
 */
#include "interp_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool same_dims(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

static int int_bits(ir_elem e) { return e == IR_E_INDEX ? 64 : ir_elem_bits(e); }

static uint64_t width_mask(int bits) { return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1; }

/* Sign-extends the low `bits` bits of x. */
static int64_t sext(uint64_t x, int bits)
{
    if (bits >= 64)
        return (int64_t)x;
    uint64_t m = UINT64_C(1) << (bits - 1);
    x &= width_mask(bits);
    return (int64_t)((x ^ m) - m);
}

/* ================================================================ unary */

static double round_even(double x)
{
    double r = round(x);
    if (fabs(x - trunc(x)) == 0.5)
        r = 2.0 * round(x / 2.0);
    return r;
}

static double un_f(ir_opcode opc, double x)
{
    switch (opc) {
    case IR_OP_ABS: return fabs(x);
    case IR_OP_CBRT: return cbrt(x);
    case IR_OP_CEIL: return ceil(x);
    case IR_OP_COSINE: return cos(x);
    case IR_OP_EXP: return exp(x);
    case IR_OP_EXPM1: return expm1(x);
    case IR_OP_FLOOR: return floor(x);
    case IR_OP_LOG: return log(x);
    case IR_OP_LOG1P: return log1p(x);
    case IR_OP_LOGISTIC: return 1.0 / (1.0 + exp(-x));
    case IR_OP_NEGATE: return -x;
    case IR_OP_ROUND_AFZ: return round(x);
    case IR_OP_ROUND_EVEN: return round_even(x);
    case IR_OP_RSQRT: return 1.0 / sqrt(x);
    case IR_OP_SIGN: return isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case IR_OP_SINE: return sin(x);
    case IR_OP_SQRT: return sqrt(x);
    case IR_OP_TAN: return tan(x);
    case IR_OP_TANH: return tanh(x);
    case IR_OP_REAL: return x;
    case IR_OP_IMAG: return 0.0;
    default: return x; /* COPY */
    }
}

/* The ops un_f computes: an element-wise op it does not know (one added to
 * the registry, whose kind sends it here) is refused, not copied. */
static bool un_f_ok(ir_opcode opc)
{
    switch (opc) {
    case IR_OP_ABS:
    case IR_OP_CBRT:
    case IR_OP_CEIL:
    case IR_OP_COSINE:
    case IR_OP_EXP:
    case IR_OP_EXPM1:
    case IR_OP_FLOOR:
    case IR_OP_LOG:
    case IR_OP_LOG1P:
    case IR_OP_LOGISTIC:
    case IR_OP_NEGATE:
    case IR_OP_ROUND_AFZ:
    case IR_OP_ROUND_EVEN:
    case IR_OP_RSQRT:
    case IR_OP_SIGN:
    case IR_OP_SINE:
    case IR_OP_SQRT:
    case IR_OP_TAN:
    case IR_OP_TANH:
    case IR_OP_REAL:
    case IR_OP_IMAG:
    case IR_OP_COPY: return true;
    default: return false;
    }
}

static double complex un_c(ir_opcode opc, double complex x)
{
    switch (opc) {
    case IR_OP_CBRT: return cpow(x, 1.0 / 3.0);
    case IR_OP_COSINE: return ccos(x);
    case IR_OP_EXP: return cexp(x);
    case IR_OP_EXPM1: return cexp(x) - 1.0;
    case IR_OP_LOG: return clog(x);
    case IR_OP_LOG1P: return clog(1.0 + x);
    case IR_OP_LOGISTIC: return 1.0 / (1.0 + cexp(-x));
    case IR_OP_NEGATE: return -x;
    case IR_OP_RSQRT: return 1.0 / csqrt(x);
    case IR_OP_SIGN: {
        double a = cabs(x);
        return a == 0 || isnan(a) ? x : x / a;
    }
    case IR_OP_SINE: return csin(x);
    case IR_OP_SQRT: return csqrt(x);
    case IR_OP_TAN: return ctan(x);
    case IR_OP_TANH: return ctanh(x);
    default: return x; /* COPY */
    }
}

static bool un_c_ok(ir_opcode opc)
{
    switch (opc) {
    case IR_OP_CBRT:
    case IR_OP_COSINE:
    case IR_OP_EXP:
    case IR_OP_EXPM1:
    case IR_OP_LOG:
    case IR_OP_LOG1P:
    case IR_OP_LOGISTIC:
    case IR_OP_NEGATE:
    case IR_OP_RSQRT:
    case IR_OP_SIGN:
    case IR_OP_SINE:
    case IR_OP_SQRT:
    case IR_OP_TAN:
    case IR_OP_TANH:
    case IR_OP_COPY:
    case IR_OP_ABS:
    case IR_OP_REAL:
    case IR_OP_IMAG: return true;
    default: return false;
    }
}

static uint64_t un_i(ir_opcode opc, int64_t x, int bits, bool uns)
{
    uint64_t ux = (uint64_t)x & width_mask(bits);
    switch (opc) {
    case IR_OP_ABS: return uns || x >= 0 ? (uint64_t)x : 0 - (uint64_t)x;
    case IR_OP_NEGATE: return 0 - (uint64_t)x;
    case IR_OP_NOT: return ~(uint64_t)x;
    case IR_OP_POPCNT: return (uint64_t)__builtin_popcountll(ux);
    case IR_OP_CLZ: return ux == 0 ? (uint64_t)bits : (uint64_t)(__builtin_clzll(ux) - (64 - bits));
    case IR_OP_SIGN: return uns ? (uint64_t)(ux != 0) : x > 0 ? 1 : x < 0 ? UINT64_MAX : 0;
    default: return (uint64_t)x; /* COPY */
    }
}

static bool un_i_ok(ir_opcode opc)
{
    return opc == IR_OP_ABS || opc == IR_OP_NEGATE || opc == IR_OP_NOT || opc == IR_OP_POPCNT || opc == IR_OP_CLZ ||
           opc == IR_OP_SIGN || opc == IR_OP_COPY;
}

/* reduce_precision as XLA emits it: round the mantissa to nearest even,
 * then flush exponents out of range to zero or infinity; NaNs stay NaN. */
static double reduce_precision(double x, ir_elem e, int ebits, int mbits)
{
    if (e == IR_E_F64) {
        uint64_t u;
        memcpy(&u, &x, 8);
        const int sm = 52, se = 11;
        if (mbits < sm) {
            uint64_t last = UINT64_C(1) << (sm - mbits);
            uint64_t bias = (last >> 1) - 1 + ((u & last) >> (sm - mbits));
            u = (u + bias) & ~(last - 1);
        }
        if (ebits < se) {
            uint64_t sign = u & (UINT64_C(1) << 63), expmask = UINT64_C(0x7ff) << sm;
            uint64_t ebias = (UINT64_C(1) << (se - 1)) - 1, rbias = (UINT64_C(1) << (ebits - 1)) - 1;
            uint64_t ex = u & expmask;
            if (ex > (ebias + rbias) << sm)
                u = sign | expmask;
            else if (ex <= (ebias - rbias) << sm)
                u = sign;
        }
        double r;
        memcpy(&r, &u, 8);
        return isnan(x) ? (mbits > 0 ? x : copysign(INFINITY, x)) : r;
    }
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    const int sm = 23, se = 8;
    if (mbits < sm) {
        uint32_t last = UINT32_C(1) << (sm - mbits);
        uint32_t bias = (last >> 1) - 1 + ((u & last) >> (sm - mbits));
        u = (u + bias) & ~(last - 1);
    }
    if (ebits < se) {
        uint32_t sign = u & UINT32_C(0x80000000), expmask = UINT32_C(0xff) << sm;
        uint32_t ebias = (UINT32_C(1) << (se - 1)) - 1, rbias = (UINT32_C(1) << (ebits - 1)) - 1;
        uint32_t ex = u & expmask;
        if (ex > (ebias + rbias) << sm)
            u = sign | expmask;
        else if (ex <= (ebias - rbias) << sm)
            u = sign;
    }
    float r;
    memcpy(&r, &u, 4);
    return isnan(x) ? (mbits > 0 ? x : copysign(INFINITY, x)) : (double)r;
}

/* CHLO's element-wise math that C's libm has (stablehlo/testdata uses
 * them as JAX writes them: chlo.acosh, chlo.lgamma, ...).  NULL for one it
 * does not have. */
typedef double (*chlo_fn)(double);

static double chlo_lgamma(double x) { return lgamma(x); }

/* chlo.erf_inv: the y with erf(y) = x, found from libm's erf and erfc by
 * Newton's method kept inside a bracket [lo, hi] of the root (a step that
 * leaves it bisects).  For |x| > 1/2 it solves erfc(y) = 1 - |x|, which is
 * exact there (Sterbenz), so the tail keeps erfc's relative accuracy.  Both
 * forms are increasing in y and concave on y > 0.  Odd in x; +-1 give +-inf,
 * |x| > 1 and NaN give NaN. */
static double chlo_erf_inv(double x)
{
    double a = fabs(x);
    if (isnan(x) || a > 1)
        return NAN;
    if (a == 1)
        return copysign(INFINITY, x);
    if (a == 0)
        return x;
    bool tail = a > 0.5;
    double t = 1 - a;
    /* erfc(27) underflows to 0, below any t > 0 */
    double lo = 0, hi = 27, y = tail ? sqrt(-log(t)) : a * 0.886226925452758;
    for (int it = 0; it < 200; it++) {
        double h = tail ? t - erfc(y) : erf(y) - a;
        if (h == 0)
            break;
        if (h < 0)
            lo = y;
        else
            hi = y;
        double d = 1.1283791670955126 * exp(-y * y); /* 2 / sqrt(pi) e^-y^2, both forms' slope */
        double next = y - h / d;
        if (!(next > lo && next < hi))
            next = lo + (hi - lo) / 2;
        if (next == y || next == lo || next == hi)
            break;
        y = next;
    }
    return copysign(y, x);
}

/* chlo.bessel_i1e(x) = e^-|x| I1(x), the exponentially scaled modified
 * Bessel function of the first kind of order 1 (odd in x).  libm has no I1.
 * Up to |x| = 30 its power series (x/2)^(2k+1) / (k! (k+1)!), whose terms
 * are all positive (no cancellation; they peak near 1e11 at 30), times
 * e^-|x|; beyond, the asymptotic series (Abramowitz and Stegun 9.7.1)
 * 1/sqrt(2 pi x) sum t_k, t_0 = 1, t_k = t_(k-1) ((2k-1)^2 - 4) / (8 k x):
 * 1 - 3/(8x) - 15/(128x^2) - ...; its terms shrink while k < 2x: past 30
 * they fall below 1e-18 of the sum long before that.  0 at +-inf, NaN for
 * NaN. */
static double chlo_bessel_i1e(double x)
{
    double a = fabs(x);
    if (isnan(x))
        return x;
    if (isinf(x))
        return copysign(0.0, x);
    if (a == 0)
        return x;
    double sum;
    if (a <= 30) {
        double h = a / 2, hh = h * h, term = h;
        sum = term;
        for (int k = 1; k < 200 && term > sum * 1e-18; k++) {
            term *= hh / ((double)k * (double)(k + 1));
            sum += term;
        }
        sum *= exp(-a);
    } else {
        double term = 1;
        sum = 1;
        for (int k = 1; k < 200; k++) {
            double next = term * ((2.0 * k - 1) * (2.0 * k - 1) - 4.0) / (8.0 * k * a);
            if (fabs(next) >= fabs(term) || fabs(next) < 1e-18)
                break;
            term = next;
            sum += term;
        }
        sum /= sqrt(6.283185307179586 * a); /* 2 pi x */
    }
    return copysign(sum, x);
}

chlo_fn ir__ip_chlo_unary_fn(const char *name)
{
    static const struct {
        const char *name;
        chlo_fn fn;
    } t[] = {{"chlo.acos", acos},   {"chlo.acosh", acosh}, {"chlo.asin", asin},     {"chlo.asinh", asinh},
             {"chlo.atan", atan},   {"chlo.atanh", atanh}, {"chlo.cosh", cosh},     {"chlo.sinh", sinh},
             {"chlo.tan", tan},     {"chlo.erf", erf},     {"chlo.erfc", erfc},     {"chlo.lgamma", chlo_lgamma},
             {"chlo.erf_inv", chlo_erf_inv}, {"chlo.bessel_i1e", chlo_bessel_i1e}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(name, t[i].name))
            return t[i].fn;
    return NULL;
}

/* The complex forms (complex.h has the inverse and hyperbolic ones). */
typedef double complex (*chlo_cfn)(double complex);

static chlo_cfn chlo_complex_fn(const char *name)
{
    static const struct {
        const char *name;
        chlo_cfn fn;
    } t[] = {{"chlo.acos", cacos}, {"chlo.acosh", cacosh}, {"chlo.asin", casin}, {"chlo.asinh", casinh},
             {"chlo.atan", catan}, {"chlo.atanh", catanh}, {"chlo.cosh", ccosh}, {"chlo.sinh", csinh},
             {"chlo.tan", ctan}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(name, t[i].name))
            return t[i].fn;
    return NULL;
}

/* One of those on a float (or complex) tensor: computed in double, rounded
 * to the element type, as the other element-wise ops are. */
int ir__ip_k_chlo_unary(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    chlo_fn fn = ir__ip_chlo_unary_fn(c->op->name);
    if (!fn || c->op->n_operands != 1 || c->op->n_results != 1)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "cannot evaluate an op unknown to the interpreter");
    const ir_tensor *x = in[0];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    ip_class k = ir__ip_class((ir_elem)x->elem);
    chlo_cfn cfn = k == IP_C ? chlo_complex_fn(c->op->name) : NULL;
    if (x->kind != IR_TENSOR_ARRAY || !same_dims(x, y) || x->elem != y->elem || (k != IP_F && !cfn))
        return ir__ip_fail(c, AP_ETYPE, "%s is evaluated on floats (and complex numbers for the inverse and "
                                        "hyperbolic functions) of one shape and type", c->op->name);
    ir_elem e = (ir_elem)x->elem;
    size_t eb = ip_eb(e);
    for (int64_t i = 0; i < x->numel; i++) {
        const uint8_t *p = x->data + (size_t)i * eb;
        uint8_t *q = y->data + (size_t)i * eb;
        if (cfn)
            ip_stc(e, q, cfn(ip_ldc(e, p)));
        else
            ip_stf(e, q, fn(ip_ldf(e, p)));
    }
    return 0;
}

/* chlo.next_after(x, y): the float of x's type next to x in the direction
 * of y (CHLO's definition, C's nextafter): y itself when x == y (so the
 * sign of a zero is y's), NaN when either is NaN, the least subnormal of
 * y's sign from a zero, +-inf past the largest finite value.  libm's
 * nextafter and nextafterf for f64 and f32; f16 and bf16 step their 16-bit
 * encoding, whose magnitude orders like the value in both (sign bit on top,
 * then exponent, then mantissa, as in every IEEE binary format).  Other
 * float types (8-bit and smaller, tf32) are refused.  Its value depends on
 * the float type's width: ir_interp_op_width_bound. */
static uint16_t next_after16(uint16_t x, double xv, double yv)
{
    uint16_t sign = x & 0x8000u, mag = x & 0x7fffu;
    if (mag == 0)
        return (uint16_t)((signbit(yv) ? 0x8000u : 0) | 1u);
    /* away from zero when y lies beyond x on x's side */
    bool away = (yv > xv) == (sign == 0);
    return (uint16_t)(sign | (away ? mag + 1 : mag - 1));
}

int ir__ip_k_next_after(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs two operands and one result");
    const ir_tensor *x = in[0], *yt = in[1];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *r = out[0];
    ir_elem e = (ir_elem)x->elem;
    if (x->kind != IR_TENSOR_ARRAY || yt->kind != IR_TENSOR_ARRAY || !same_dims(x, yt) || !same_dims(x, r) ||
        yt->elem != x->elem || r->elem != x->elem)
        return ir__ip_fail(c, AP_ETYPE, "operands and result must have one shape and type (a broadcast is not "
                                        "supported)");
    if (e != IR_E_F64 && e != IR_E_F32 && e != IR_E_F16 && e != IR_E_BF16)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "is evaluated on f64, f32, f16 and bf16 only");
    size_t eb = ip_eb(e);
    for (int64_t i = 0; i < x->numel; i++) {
        const uint8_t *p = x->data + (size_t)i * eb, *q = yt->data + (size_t)i * eb;
        uint8_t *o = r->data + (size_t)i * eb;
        double xv = ip_ldf(e, p), yv = ip_ldf(e, q);
        if (e == IR_E_F64) {
            double v = nextafter(xv, yv);
            memcpy(o, &v, 8);
        } else if (e == IR_E_F32) {
            float v = nextafterf((float)xv, (float)yv);
            memcpy(o, &v, 4);
        } else if (isnan(xv) || isnan(yv)) {
            ip_stf(e, o, NAN);
        } else if (xv == yv) {
            memcpy(o, q, 2);
        } else {
            uint16_t b;
            memcpy(&b, p, 2);
            b = next_after16(b, xv, yv);
            memcpy(o, &b, 2);
        }
    }
    return 0;
}

/* chlo.mulhi(x, y) on N-bit integers: the top N bits of the 2N-bit
 * product of x and y, each widened by its signedness (CHLO's definition:
 * downcast((upcast(x) * upcast(y)) >> N)).  For N <= 32 the product fits in
 * 64 bits and its bits N.. are the result (the store wraps to N bits); for
 * N = 64 the unsigned high word comes from 32-bit halves, and a signed one
 * subtracts y where x < 0 and x where y < 0 (two's complement). */
static uint64_t umul_hi64(uint64_t a, uint64_t b)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

int ir__ip_k_mulhi(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs two operands and one result");
    const ir_tensor *x = in[0], *y = in[1];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *r = out[0];
    ir_elem e = (ir_elem)x->elem;
    ip_class k = ir__ip_class(e);
    if (x->kind != IR_TENSOR_ARRAY || y->kind != IR_TENSOR_ARRAY || !same_dims(x, y) || !same_dims(x, r) ||
        y->elem != x->elem || r->elem != x->elem || (k != IP_S && k != IP_U))
        return ir__ip_fail(c, AP_ETYPE, "operands and result must be integers (not i1) of one shape and type");
    int bits = int_bits(e);
    size_t eb = ip_eb(e);
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t a = ip_ldi(e, x->data + (size_t)i * eb), b = ip_ldi(e, y->data + (size_t)i * eb);
        uint64_t hi;
        if (bits < 64) /* |a b| < 2^62 signed, < 2^64 unsigned */
            hi = (k == IP_S ? (uint64_t)(a * b) : (uint64_t)a * (uint64_t)b) >> bits;
        else {
            hi = umul_hi64((uint64_t)a, (uint64_t)b);
            if (k == IP_S)
                hi -= (a < 0 ? (uint64_t)b : 0) + (b < 0 ? (uint64_t)a : 0);
        }
        ip_sti(e, r->data + (size_t)i * eb, (int64_t)hi);
    }
    return 0;
}

/* chlo.top_k: along the last dim, the k largest values (k is the results'
 * last dim), largest first, the lower index first among equals, in the
 * total order of floats (-NaN < -inf < ... < inf < NaN, as XLA sorts and
 * stablehlo/testdata's top_k_float32_5 expects); and their indices. */
typedef struct topk_item {
    double v;
    int64_t i;
} topk_item;

static int topk_cmp(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    int ac = isnan(a->v) ? (signbit(a->v) ? -1 : 1) : 0, bc = isnan(b->v) ? (signbit(b->v) ? -1 : 1) : 0;
    if (ac != bc)
        return ac > bc ? -1 : 1;
    if (!ac && a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

int ir__ip_k_top_k(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    if (c->op->n_operands != 1 || c->op->n_results != 2)
        return ir__ip_fail(c, AP_EINVALID, "chlo.top_k needs one operand and two results");
    int rc;
    if ((rc = ir__ip_new_result(c, 0, &out[0])) < 0 || (rc = ir__ip_new_result(c, 1, &out[1])) < 0)
        return rc;
    ir_tensor *vals = out[0], *idx = out[1];
    ip_class k = ir__ip_class((ir_elem)x->elem), ik = ir__ip_class((ir_elem)idx->elem);
    int r = x->rank;
    bool ok = x->kind == IR_TENSOR_ARRAY && r >= 1 && vals->rank == r && idx->rank == r && vals->elem == x->elem &&
              (k == IP_F || k == IP_S || k == IP_U || k == IP_B) && (ik == IP_S || ik == IP_U);
    for (int d = 0; ok && d < r; d++)
        ok = vals->dims[d] == idx->dims[d] && (d == r - 1 ? vals->dims[d] <= x->dims[d] : vals->dims[d] == x->dims[d]);
    if (!ok)
        return ir__ip_fail(c, AP_ETYPE, "chlo.top_k: operand and results do not fit (values of the operand's type, "
                                        "integer indices, k at most the last dim)");
    int64_t n = x->dims[r - 1], kk = vals->dims[r - 1], rows = n ? x->numel / n : 0;
    topk_item *t = ap_malloc(sizeof *t * (size_t)(n ? n : 1));
    if (!t)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    ir_elem e = (ir_elem)x->elem, ie = (ir_elem)idx->elem;
    size_t eb = ip_eb(e), ib = ip_eb(ie);
    for (int64_t row = 0; row < rows; row++) {
        for (int64_t j = 0; j < n; j++) {
            const uint8_t *p = x->data + (size_t)(row * n + j) * eb;
            t[j].v = k == IP_F ? ip_ldf(e, p) : (double)ip_ldi(e, p);
            t[j].i = j;
        }
        qsort(t, (size_t)n, sizeof *t, topk_cmp);
        for (int64_t j = 0; j < kk; j++) {
            const uint8_t *p = x->data + (size_t)(row * n + t[j].i) * eb;
            memcpy(vals->data + (size_t)(row * kk + j) * eb, p, eb); /* the value itself, bit for bit */
            ip_sti(ie, idx->data + (size_t)(row * kk + j) * ib, t[j].i);
        }
    }
    ap_free(t);
    return 0;
}

int ir__ip_k_ew1(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    ir_opcode opc = (ir_opcode)c->op->opcode;
    const ir_tensor *x = in[0];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    if (x->kind != IR_TENSOR_ARRAY || !same_dims(x, y))
        return ir__ip_fail(c, AP_ETYPE, "operand and result shapes differ");
    ir_elem ie = (ir_elem)x->elem, oe = (ir_elem)y->elem;
    ip_class k = ir__ip_class(ie);
    if (!un_f_ok(opc) && !un_c_ok(opc) && !un_i_ok(opc) && opc != IR_OP_IS_FINITE && opc != IR_OP_REDUCE_PRECISION)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "the interpreter has no rule for this element-wise op");
    /* the result element type each op must have */
    bool ok;
    if (opc == IR_OP_IS_FINITE)
        ok = k == IP_F && oe == IR_E_I1;
    else if (k == IP_C && (opc == IR_OP_ABS || opc == IR_OP_REAL || opc == IR_OP_IMAG))
        ok = oe == (ie == IR_E_C64 ? IR_E_F32 : IR_E_F64);
    else if (opc == IR_OP_REDUCE_PRECISION)
        ok = k == IP_F && oe == ie;
    else
        ok = oe == ie && (k == IP_F ? un_f_ok(opc) : k == IP_C ? un_c_ok(opc) : un_i_ok(opc) || opc == IR_OP_REAL);
    if (!ok)
        return ir__ip_fail(c, AP_ETYPE, "not defined from %s to %s", ir_elem_name(ie), ir_elem_name(oe));
    int64_t ebits = 0, mbits = 0;
    if (opc == IR_OP_REDUCE_PRECISION) {
        if ((rc = ir__ip_int(c, "exponent_bits", &ebits)) < 0 || (rc = ir__ip_int(c, "mantissa_bits", &mbits)) < 0)
            return rc;
        if (ebits < 1 || mbits < 0 || ebits > 11 || mbits > 52)
            return ir__ip_fail(c, AP_EINVALID, "exponent_bits %lld / mantissa_bits %lld out of range", (long long)ebits,
                               (long long)mbits);
        if (ie != IR_E_F64) {
            if (ebits > 8)
                ebits = 8;
            if (mbits > 23)
                mbits = 23;
        }
    }
    size_t ib = ip_eb(ie), ob = ip_eb(oe);
    int bits = k == IP_B ? 1 : int_bits(ie);
    for (int64_t i = 0; i < x->numel; i++) {
        const uint8_t *p = x->data + (size_t)i * ib;
        uint8_t *q = y->data + (size_t)i * ob;
        switch (k) {
        case IP_F: {
            double v = ip_ldf(ie, p);
            if (opc == IR_OP_IS_FINITE)
                q[0] = isfinite(v) != 0;
            else if (opc == IR_OP_REDUCE_PRECISION)
                ip_stf(oe, q, reduce_precision(v, ie, (int)ebits, (int)mbits));
            else
                ip_stf(oe, q, un_f(opc, v));
            break;
        }
        case IP_C: {
            double complex v = ip_ldc(ie, p);
            if (opc == IR_OP_ABS)
                ip_stf(oe, q, cabs(v));
            else if (opc == IR_OP_REAL)
                ip_stf(oe, q, creal(v));
            else if (opc == IR_OP_IMAG)
                ip_stf(oe, q, cimag(v));
            else
                ip_stc(oe, q, un_c(opc, v));
            break;
        }
        default: {
            int64_t v = ip_ldi(ie, p);
            ip_sti(oe, q, (int64_t)un_i(opc, v, bits, k != IP_S));
            break;
        }
        }
    }
    return 0;
}

/* =============================================================== binary */

static double fmax_ieee(double a, double b)
{
    if (isnan(a))
        return a;
    if (isnan(b))
        return b;
    if (a == b)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

static double fmin_ieee(double a, double b)
{
    if (isnan(a))
        return a;
    if (isnan(b))
        return b;
    if (a == b)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

static double bin_f(ir_opcode opc, double a, double b)
{
    switch (opc) {
    case IR_OP_ADD: return a + b;
    case IR_OP_SUBTRACT: return a - b;
    case IR_OP_MULTIPLY: return a * b;
    case IR_OP_DIVIDE: return a / b;
    case IR_OP_MAXIMUM: return fmax_ieee(a, b);
    case IR_OP_MINIMUM: return fmin_ieee(a, b);
    case IR_OP_POWER: return pow(a, b);
    case IR_OP_REMAINDER: return fmod(a, b);
    case IR_OP_ATAN2: return atan2(a, b);
    default: return NAN;
    }
}

static double complex bin_c(ir_opcode opc, double complex a, double complex b)
{
    switch (opc) {
    case IR_OP_ADD: return a + b;
    case IR_OP_SUBTRACT: return a - b;
    case IR_OP_MULTIPLY: return a * b;
    case IR_OP_DIVIDE: return a / b;
    case IR_OP_POWER: return cpow(a, b);
    default: return NAN;
    }
}

static uint64_t ipow(int64_t x, int64_t y, bool uns)
{
    if (!uns && y < 0)
        return x == 1 ? 1 : x == -1 ? ((y & 1) ? UINT64_MAX : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x, e = (uint64_t)y;
    while (e) {
        if (e & 1)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/* x and y are the loaded (sign- or zero-extended) values of a `bits`-wide
 * integer type; the result is wrapped by the store. */
static uint64_t bin_i(ir_opcode opc, int64_t x, int64_t y, int bits, bool uns)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (opc) {
    case IR_OP_ADD: return ux + uy;
    case IR_OP_SUBTRACT: return ux - uy;
    case IR_OP_MULTIPLY: return ux * uy;
    case IR_OP_DIVIDE:
        /* XLA: x / 0 = -1 (all ones), INT_MIN / -1 = INT_MIN */
        if (y == 0)
            return UINT64_MAX;
        if (uns)
            return (ux & width_mask(bits)) / (uy & width_mask(bits));
        if (y == -1)
            return 0 - ux;
        return (uint64_t)(x / y);
    case IR_OP_REMAINDER:
        /* XLA: x % 0 = x, INT_MIN % -1 = 0; the sign follows the dividend */
        if (y == 0)
            return ux;
        if (uns)
            return (ux & width_mask(bits)) % (uy & width_mask(bits));
        if (y == -1)
            return 0;
        return (uint64_t)(x % y);
    case IR_OP_MAXIMUM: return uns ? ((ux & width_mask(bits)) > (uy & width_mask(bits)) ? ux : uy) : (x > y ? ux : uy);
    case IR_OP_MINIMUM: return uns ? ((ux & width_mask(bits)) < (uy & width_mask(bits)) ? ux : uy) : (x < y ? ux : uy);
    case IR_OP_AND: return ux & uy;
    case IR_OP_OR: return ux | uy;
    case IR_OP_XOR: return ux ^ uy;
    case IR_OP_POWER: return ipow(x, y, uns);
    case IR_OP_SHIFT_LEFT: {
        /* the shift amount is read as unsigned: negative ones are huge */
        uint64_t s = uy & width_mask(bits);
        return s >= (uint64_t)bits ? 0 : ux << s;
    }
    case IR_OP_SHIFT_RIGHT_LOGICAL: {
        uint64_t s = uy & width_mask(bits);
        return s >= (uint64_t)bits ? 0 : (ux & width_mask(bits)) >> s;
    }
    case IR_OP_SHIFT_RIGHT_ARITH: {
        uint64_t s = uy & width_mask(bits);
        int64_t v = sext(ux, bits);
        if (s >= (uint64_t)bits)
            return v < 0 ? UINT64_MAX : 0;
        return (uint64_t)(v >> s);
    }
    default: return 0;
    }
}

static bool ew2_ok(ir_opcode opc, ir_elem e)
{
    switch (ir__ip_class(e)) {
    case IP_F:
        return opc == IR_OP_ADD || opc == IR_OP_SUBTRACT || opc == IR_OP_MULTIPLY || opc == IR_OP_DIVIDE ||
               opc == IR_OP_MAXIMUM || opc == IR_OP_MINIMUM || opc == IR_OP_POWER || opc == IR_OP_REMAINDER ||
               opc == IR_OP_ATAN2;
    case IP_C:
        return opc == IR_OP_ADD || opc == IR_OP_SUBTRACT || opc == IR_OP_MULTIPLY || opc == IR_OP_DIVIDE ||
               opc == IR_OP_POWER;
    case IP_S:
    case IP_U:
    case IP_B:
        return opc == IR_OP_ADD || opc == IR_OP_SUBTRACT || opc == IR_OP_MULTIPLY || opc == IR_OP_DIVIDE ||
               opc == IR_OP_REMAINDER || opc == IR_OP_MAXIMUM || opc == IR_OP_MINIMUM || opc == IR_OP_AND ||
               opc == IR_OP_OR || opc == IR_OP_XOR || opc == IR_OP_POWER || opc == IR_OP_SHIFT_LEFT ||
               opc == IR_OP_SHIFT_RIGHT_LOGICAL || opc == IR_OP_SHIFT_RIGHT_ARITH;
    default: return false;
    }
}

/* Element-wise binary op on one element of type e, of class k
 * (ir__ip_class(e), which callers work out once per tensor, not per
 * element): out = a op b (out may alias a or b).  The op must be one
 * ew2_ok accepts. */
static void ew2_elem(ir_opcode opc, ir_elem e, ip_class k, const uint8_t *a, const uint8_t *b, uint8_t *out)
{
    switch (k) {
    case IP_F: ip_stf(e, out, bin_f(opc, ip_ldf(e, a), ip_ldf(e, b))); return;
    case IP_C: ip_stc(e, out, bin_c(opc, ip_ldc(e, a), ip_ldc(e, b))); return;
    case IP_B: {
        uint8_t x = a[0] & 1, y = b[0] & 1;
        /* booleans: add is or, multiply is and (the spec); the rest as
         * 1-bit unsigned integers */
        out[0] = opc == IR_OP_ADD ? (x | y) : (uint8_t)(bin_i(opc, x, y, 1, true) & 1);
        return;
    }
    default: {
        int64_t x = ip_ldi(e, a), y = ip_ldi(e, b);
        ip_sti(e, out, (int64_t)bin_i(opc, x, y, int_bits(e), k == IP_U));
        return;
    }
    }
}

/* maximum and minimum of complex numbers: the spec's lexicographic order
 * of the (real, imaginary) pair.  Equal real parts (0 == -0) compare the
 * imaginary ones; a tie gives the second operand, as the reference
 * interpreter does (it matters only for the sign of a zero).  A NaN part
 * has no place in that order (the spec does not say), so it is refused. */
static int complex_max_min(ip_ctx *c, ir_opcode opc, const ir_tensor *a, const ir_tensor *b, ir_tensor *y)
{
    ir_elem e = (ir_elem)a->elem;
    size_t eb = ip_eb(e);
    bool max = opc == IR_OP_MAXIMUM;
    for (int64_t i = 0; i < a->numel; i++) {
        const uint8_t *pa = a->data + (size_t)i * eb, *pb = b->data + (size_t)i * eb;
        double complex za = ip_ldc(e, pa), zb = ip_ldc(e, pb);
        if (isnan(creal(za)) || isnan(cimag(za)) || isnan(creal(zb)) || isnan(cimag(zb)))
            return ir__ip_fail(c, AP_EUNSUPPORTED,
                               "%s of complex numbers with a NaN part is not defined (the spec orders them "
                               "lexicographically)",
                               max ? "maximum" : "minimum");
        bool first = creal(za) == creal(zb) ? (max ? cimag(za) > cimag(zb) : cimag(za) < cimag(zb))
                                            : (max ? creal(za) > creal(zb) : creal(za) < creal(zb));
        memcpy(y->data + (size_t)i * eb, first ? pa : pb, eb);
    }
    return 0;
}

int ir__ip_k_ew2(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    ir_opcode opc = (ir_opcode)c->op->opcode;
    const ir_tensor *a = in[0], *b = in[1];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    if (!ir__tensor_same_type(a, b) || !ir__tensor_same_type(a, y))
        return ir__ip_fail(c, AP_ETYPE, "operands and result must have one type");
    ir_elem e = (ir_elem)a->elem;
    if (ir__ip_class(e) == IP_C && (opc == IR_OP_MAXIMUM || opc == IR_OP_MINIMUM))
        return complex_max_min(c, opc, a, b, y);
    if (!ew2_ok(opc, IR_E_F64) && !ew2_ok(opc, IR_E_I64))
        return ir__ip_fail(c, AP_EUNSUPPORTED, "the interpreter has no rule for this element-wise op");
    if (!ew2_ok(opc, e))
        return ir__ip_fail(c, AP_ETYPE, "not defined on %s", ir_elem_name(e));
    size_t eb = ip_eb(e);
    bool basic = opc == IR_OP_ADD || opc == IR_OP_MULTIPLY || opc == IR_OP_SUBTRACT || opc == IR_OP_DIVIDE;
    /* the common cases without the per-element dispatch; f32 arithmetic
     * rounds exactly as double arithmetic rounded to f32 would for these */
    if (e == IR_E_F32 && basic) {
        const float *x = (const float *)(const void *)a->data, *z = (const float *)(const void *)b->data;
        float *o = (float *)(void *)y->data;
        for (int64_t i = 0; i < a->numel; i++)
            o[i] = opc == IR_OP_ADD        ? x[i] + z[i]
                   : opc == IR_OP_MULTIPLY ? x[i] * z[i]
                   : opc == IR_OP_SUBTRACT ? x[i] - z[i]
                                           : x[i] / z[i];
        return 0;
    }
    if (e == IR_E_F64 && basic) {
        const double *x = (const double *)(const void *)a->data, *z = (const double *)(const void *)b->data;
        double *o = (double *)(void *)y->data;
        for (int64_t i = 0; i < a->numel; i++)
            o[i] = opc == IR_OP_ADD        ? x[i] + z[i]
                   : opc == IR_OP_MULTIPLY ? x[i] * z[i]
                   : opc == IR_OP_SUBTRACT ? x[i] - z[i]
                                           : x[i] / z[i];
        return 0;
    }
    ip_class k = ir__ip_class(e);
    if (k == IP_F) { /* bf16, f16, ...: ew2_elem's float case */
        for (int64_t i = 0; i < a->numel; i++) {
            size_t o = (size_t)i * eb;
            ip_stf(e, y->data + o, bin_f(opc, ip_ldf(e, a->data + o), ip_ldf(e, b->data + o)));
        }
        return 0;
    }
    for (int64_t i = 0; i < a->numel; i++)
        ew2_elem(opc, e, k, a->data + (size_t)i * eb, b->data + (size_t)i * eb, y->data + (size_t)i * eb);
    return 0;
}

/* ============================================================== compare */

enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };
enum { CT_DEFAULT, CT_FLOAT, CT_TOTALORDER, CT_SIGNED, CT_UNSIGNED };

/* A float's position in IEEE totalOrder as a signed integer:
 * -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. */
static int64_t total_key(double v)
{
    int64_t k;
    memcpy(&k, &v, 8);
    return k < 0 ? k ^ INT64_MAX : k;
}

static bool cmp_ord(int dir, int c)
{
    switch (dir) {
    case CMP_EQ: return c == 0;
    case CMP_NE: return c != 0;
    case CMP_LT: return c < 0;
    case CMP_LE: return c <= 0;
    case CMP_GT: return c > 0;
    default: return c >= 0;
    }
}

int ir__ip_k_compare(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    char buf[32];
    const char *d = ir_compare_direction(c->op, buf, sizeof buf);
    static const char *const dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    int dir = -1;
    for (int i = 0; d && i < 6; i++)
        if (!strcmp(d, dirs[i]))
            dir = i;
    if (dir < 0)
        return ir__ip_fail(c, AP_EINVALID, "unknown comparison direction %s", d ? d : "(none)");
    int ct = CT_DEFAULT;
    char tb[32];
    const char *t = ir__ip_enum(c->op, "compare_type", tb, sizeof tb);
    if (t) {
        if (!strcmp(t, "FLOAT"))
            ct = CT_FLOAT;
        else if (!strcmp(t, "TOTALORDER"))
            ct = CT_TOTALORDER;
        else if (!strcmp(t, "SIGNED"))
            ct = CT_SIGNED;
        else if (!strcmp(t, "UNSIGNED"))
            ct = CT_UNSIGNED;
        else if (strcmp(t, "NOTYPE") != 0)
            return ir__ip_fail(c, AP_EINVALID, "unknown compare_type %s", t);
    }
    const ir_tensor *a = in[0], *b = in[1];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    if (!ir__tensor_same_type(a, b) || !same_dims(a, y) || y->elem != IR_E_I1)
        return ir__ip_fail(c, AP_ETYPE, "operands must have one type and the result i1 of their shape");
    ir_elem e = (ir_elem)a->elem;
    ip_class k = ir__ip_class(e);
    if (k == IP_C && dir > CMP_NE)
        return ir__ip_fail(c, AP_ETYPE, "complex numbers are only compared for equality");
    if (k == IP_F && (ct == CT_SIGNED || ct == CT_UNSIGNED))
        return ir__ip_fail(c, AP_ETYPE, "compare_type %s on floats", t);
    size_t eb = ip_eb(e);
    int bits = k == IP_B ? 1 : int_bits(e);
    for (int64_t i = 0; i < a->numel; i++) {
        const uint8_t *p = a->data + (size_t)i * eb, *q = b->data + (size_t)i * eb;
        bool r;
        if (k == IP_F) {
            double x = ip_ldf(e, p), z = ip_ldf(e, q);
            if (ct == CT_TOTALORDER) {
                int64_t kx = total_key(x), kz = total_key(z);
                r = cmp_ord(dir, kx < kz ? -1 : kx > kz);
            } else {
                /* partial order: NaN is unordered, only NE holds */
                switch (dir) {
                case CMP_EQ: r = x == z; break;
                case CMP_NE: r = x != z; break;
                case CMP_LT: r = x < z; break;
                case CMP_LE: r = x <= z; break;
                case CMP_GT: r = x > z; break;
                default: r = x >= z; break;
                }
            }
        } else if (k == IP_C) {
            double complex x = ip_ldc(e, p), z = ip_ldc(e, q);
            r = dir == CMP_EQ ? x == z : x != z;
        } else {
            int64_t x = ip_ldi(e, p), z = ip_ldi(e, q);
            bool uns = ct == CT_UNSIGNED || (ct != CT_SIGNED && k != IP_S);
            int cres;
            if (uns) {
                uint64_t ux = (uint64_t)x & width_mask(bits), uz = (uint64_t)z & width_mask(bits);
                cres = ux < uz ? -1 : ux > uz;
            } else {
                int64_t sx = sext((uint64_t)x, bits), sz = sext((uint64_t)z, bits);
                cres = sx < sz ? -1 : sx > sz;
            }
            r = cmp_ord(dir, cres);
        }
        y->data[i] = r;
    }
    return 0;
}

/* ====================================================== select and clamp */

int ir__ip_k_select(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *p = in[0], *a = in[1], *b = in[2];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    if (p->kind != IR_TENSOR_ARRAY || p->elem != IR_E_I1 || !ir__tensor_same_type(a, b) ||
        !ir__tensor_same_type(a, y) || (p->rank != 0 && !same_dims(p, a)))
        return ir__ip_fail(
            c, AP_ETYPE,
            "needs an i1 predicate (scalar or of the operands' shape) and two operands of the result type");
    size_t eb = ip_eb((ir_elem)a->elem);
    for (int64_t i = 0; i < a->numel; i++) {
        bool t = p->data[p->rank ? i : 0] != 0;
        memcpy(y->data + (size_t)i * eb, (t ? a : b)->data + (size_t)i * eb, eb);
    }
    return 0;
}

int ir__ip_k_clamp(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *lo = in[0], *x = in[1], *hi = in[2];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    if (!ir__tensor_same_type(x, y) || lo->elem != x->elem || hi->elem != x->elem ||
        (lo->rank != 0 && !same_dims(lo, x)) || (hi->rank != 0 && !same_dims(hi, x)))
        return ir__ip_fail(c, AP_ETYPE, "min and max must be scalars or of the operand's type");
    ir_elem e = (ir_elem)x->elem;
    ip_class k = ir__ip_class(e);
    if (k == IP_C)
        return ir__ip_fail(c, AP_ETYPE, "not defined on complex numbers");
    size_t eb = ip_eb(e);
    for (int64_t i = 0; i < x->numel; i++) {
        uint8_t *q = y->data + (size_t)i * eb;
        ew2_elem(IR_OP_MAXIMUM, e, k, x->data + (size_t)i * eb, lo->data + (lo->rank ? (size_t)i * eb : 0), q);
        ew2_elem(IR_OP_MINIMUM, e, k, q, hi->data + (hi->rank ? (size_t)i * eb : 0), q);
    }
    return 0;
}

/* ============================================================ conversion */

int ir__ip_k_convert(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    if (x->kind != IR_TENSOR_ARRAY || !same_dims(x, y))
        return ir__ip_fail(c, AP_ETYPE, "operand and result shapes differ");
    ir_elem ie = (ir_elem)x->elem, oe = (ir_elem)y->elem;
    size_t ib = ip_eb(ie), ob = ip_eb(oe);
    for (int64_t i = 0; i < x->numel; i++)
        ir__ip_convert_elem(ie, x->data + (size_t)i * ib, oe, y->data + (size_t)i * ob);
    return 0;
}

/* The bits are reinterpreted: our element layout is the little-endian one,
 * so the bytes of the whole tensor stay as they are even when the element
 * width changes (the last dim then splits or merges). */
int ir__ip_k_bitcast(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    ir_elem ie = (ir_elem)x->elem, oe = (ir_elem)y->elem;
    /* a sub-byte type to itself keeps its bits, so its values (the spec's
     * bits(result) = bits(operand)); between different sub-byte types the
     * in-memory representation the spec leaves to the implementation
     * decides, and we do not pick one */
    if (ie != oe && (ir_elem_bits(ie) != 8 * ir_elem_bytes(ie) || ir_elem_bits(oe) != 8 * ir_elem_bytes(oe)))
        return ir__ip_fail(c, AP_EUNSUPPORTED, "bitcasts of sub-byte types (%s to %s) are not supported",
                           ir_elem_name(ie), ir_elem_name(oe));
    if (x->nbytes != y->nbytes)
        return ir__ip_fail(c, AP_ETYPE, "operand and result sizes differ");
    if (x->nbytes)
        memcpy(y->data, x->data, x->nbytes);
    return 0;
}

int ir__ip_k_complex(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *re = in[0], *im = in[1];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    ir_elem pe = (ir_elem)re->elem, ce = (ir_elem)y->elem;
    if (!ir__tensor_same_type(re, im) || !same_dims(re, y) ||
        !((pe == IR_E_F32 && ce == IR_E_C64) || (pe == IR_E_F64 && ce == IR_E_C128)))
        return ir__ip_fail(c, AP_ETYPE, "needs two f32 (f64) operands and a complex<f32> (complex<f64>) result");
    size_t pb = ip_eb(pe), cb = ip_eb(ce);
    for (int64_t i = 0; i < re->numel; i++)
        ip_stc(ce, y->data + (size_t)i * cb,
               ip_cplx(ip_ldf(pe, re->data + (size_t)i * pb), ip_ldf(pe, im->data + (size_t)i * pb)));
    return 0;
}

/* ================================================================== map */

int ir__ip_k_map(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    uint32_t n = c->op->n_operands;
    if (n == 0 || c->op->n_regions != 1 || c->op->n_results != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs operands, one region and one result");
    if (n > 2 * IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "has %u operands; at most %d are supported", n, 2 * IP_MAX_VARIADIC);
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    int64_t dims[IR_MAX_RANK];
    int nd = ir__ip_ints(c, "dimensions", dims, IR_MAX_RANK, -2);
    if (nd == -2)
        nd = y->rank;
    else if (nd < 0)
        return nd;
    else
        for (int i = 0; i < nd; i++)
            if (dims[i] != i || nd != y->rank)
                return ir__ip_fail(c, AP_EUNSUPPORTED, "dimensions must be every dimension in order");
    ir_elem elems[2 * IP_MAX_VARIADIC];
    for (uint32_t i = 0; i < n; i++) {
        if (in[i]->kind != IR_TENSOR_ARRAY || !same_dims(in[i], y))
            return ir__ip_fail(c, AP_ETYPE, "operand %u does not have the result's shape", i);
        elems[i] = (ir_elem)in[i]->elem;
    }
    ip_scalar_call sc;
    if ((rc = ir__ip_scall_init(&sc, c, &c->op->regions[0], n, elems)) < 0)
        return rc;
    ir_elem oe = (ir_elem)y->elem;
    const uint8_t *args[2 * IP_MAX_VARIADIC];
    for (int64_t i = 0; i < y->numel && rc == 0; i++) {
        for (uint32_t k = 0; k < n; k++)
            args[k] = in[k]->data + (size_t)i * ip_eb(elems[k]);
        uint8_t *res = y->data + (size_t)i * ip_eb(oe);
        rc = ir__ip_scall(&sc, args, 1, &oe, &res);
    }
    ir__ip_scall_free(&sc);
    return rc;
}

/* ============================================================ region calls */

/* Scalar bodies applied element by element: the reductions of reduce,
 * reduce_window, scatter and select_and_scatter, and the per-element calls
 * of map, sort and select.  The body is evaluated by the evaluator, which
 * the run hands to kernels (ip_run.region). */

int ir__ip_reducer_init(ip_reducer *rd, ip_ctx *c, const ir_region *reg, uint32_t n, const ir_elem *elems,
                        const ir_elem *xelems)
{
    memset(rd, 0, sizeof *rd);
    rd->c = c;
    rd->r = reg;
    rd->n = n;
    rd->fast = IR_OP_UNKNOWN;
    if (n == 0 || n > IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "reductions of %u values are not supported", n);
    if (!reg || reg->n_blocks != 1 || reg->first->n_args != 2 * n)
        return ir__ip_fail(c, AP_EINVALID, "the reduction body must be one block taking %u scalars", 2 * n);
    memcpy(rd->elems, elems, sizeof *elems * n);
    memcpy(rd->xelems, xelems ? xelems : elems, sizeof *elems * n);
    bool same = true;
    for (uint32_t k = 0; k < n; k++)
        same = same && rd->xelems[k] == elems[k];
    const ir_block *b = reg->first;
    ir_opcode opc = ir_region_reduction(reg);
    if (n == 1 && same &&
        (opc == IR_OP_ADD || opc == IR_OP_MULTIPLY || opc == IR_OP_MAXIMUM || opc == IR_OP_MINIMUM ||
         opc == IR_OP_AND || opc == IR_OP_OR || opc == IR_OP_XOR)) {
        const ir_type *t0 = b->args[0].type, *t1 = b->args[1].type, *tr = b->first->results[0].type;
        bool w = c->run->opts.f64;
        if (t0 && t1 && tr && ir__ip_wide_elem((ir_elem)t0->elem, w) == elems[0] &&
            ir__ip_wide_elem((ir_elem)t1->elem, w) == elems[0] && ir__ip_wide_elem((ir_elem)tr->elem, w) == elems[0] &&
            ir_type_numel(t0) == 1 && ir_type_numel(tr) == 1 && ew2_ok(opc, elems[0])) {
            rd->fast = opc;
            rd->fast_class = ir__ip_class(elems[0]);
            return 0;
        }
    }
    /* `return %x...`: scatter with replace semantics (x.at[i].set(v)) */
    if (same && b->n_ops == 1 && b->last && ip_is_terminator(b->last) && b->last->n_operands == n) {
        for (uint32_t k = 0; k < n && same; k++)
            same = b->last->operands[k] == &b->args[n + k] && b->args[n + k].type &&
                   ir__ip_wide_elem((ir_elem)b->args[n + k].type->elem, c->run->opts.f64) == elems[k] && ir_type_numel(b->args[n + k].type) == 1;
        if (same) {
            rd->replace = true;
            return 0;
        }
    }
    for (uint32_t k = 0; k < 2 * n; k++) {
        int rc;
        ap_error e2;
        if ((rc = ir__tensor_alloc_type_w(b->args[k].type, 0, c->run->opts.f64, &rd->args[k], &e2)) < 0) {
            ir__ip_reducer_free(rd);
            return ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
        }
        if (rd->args[k]->kind != IR_TENSOR_ARRAY || rd->args[k]->numel != 1) {
            ir__ip_reducer_free(rd);
            return ir__ip_fail(c, AP_ETYPE, "the reduction body must take scalars");
        }
    }
    return 0;
}

int ir__ip_reduce_step(ip_reducer *rd, uint8_t *const *acc, const uint8_t *const *x)
{
    if (rd->fast != IR_OP_UNKNOWN) {
        ew2_elem(rd->fast, rd->elems[0], rd->fast_class, acc[0], x[0], acc[0]);
        return 0;
    }
    uint32_t n = rd->n;
    if (rd->replace) {
        for (uint32_t k = 0; k < n; k++)
            memcpy(acc[k], x[k], ip_eb(rd->elems[k]));
        return 0;
    }
    for (uint32_t k = 0; k < n; k++) {
        ir__ip_convert_elem(rd->elems[k], acc[k], (ir_elem)rd->args[k]->elem, rd->args[k]->data);
        ir__ip_convert_elem(rd->xelems[k], x[k], (ir_elem)rd->args[n + k]->elem, rd->args[n + k]->data);
    }
    ir_tensor *res[IP_MAX_VARIADIC];
    int rc = rd->c->run->region(rd->c, rd->r, 2 * n, (const ir_tensor *const *)rd->args, n, res);
    if (rc < 0)
        return rc;
    for (uint32_t k = 0; k < n; k++) {
        if (rc == 0 && (res[k]->kind != IR_TENSOR_ARRAY || res[k]->numel != 1))
            rc = ir__ip_fail(rd->c, AP_ETYPE, "the reduction body must return scalars");
        if (rc == 0)
            ir__ip_convert_elem((ir_elem)res[k]->elem, res[k]->data, rd->elems[k], acc[k]);
        ir_tensor_free(res[k]);
    }
    return rc;
}

void ir__ip_reducer_free(ip_reducer *rd)
{
    for (uint32_t k = 0; k < 2 * IP_MAX_VARIADIC; k++) {
        ir_tensor_free(rd->args[k]);
        rd->args[k] = NULL;
    }
}

int ir__ip_scall_init(ip_scalar_call *sc, ip_ctx *c, const ir_region *reg, uint32_t n_in, const ir_elem *elems)
{
    memset(sc, 0, sizeof *sc);
    sc->c = c;
    sc->r = reg;
    sc->n_in = n_in;
    if (n_in > 2 * IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "regions of %u arguments are not supported", n_in);
    if (!reg || reg->n_blocks != 1 || reg->first->n_args != n_in)
        return ir__ip_fail(c, AP_EINVALID, "the region must be one block taking %u scalars", n_in);
    memcpy(sc->in_elems, elems, sizeof *elems * n_in);
    for (uint32_t k = 0; k < n_in; k++) {
        int rc;
        ap_error e2;
        if ((rc = ir__tensor_alloc_type_w(reg->first->args[k].type, 0, c->run->opts.f64, &sc->args[k], &e2)) < 0) {
            ir__ip_scall_free(sc);
            return ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
        }
        if (sc->args[k]->kind != IR_TENSOR_ARRAY || sc->args[k]->numel != 1) {
            ir__ip_scall_free(sc);
            return ir__ip_fail(c, AP_ETYPE, "the region must take scalars");
        }
    }
    return 0;
}

int ir__ip_scall(ip_scalar_call *sc, const uint8_t *const *args, uint32_t n_out, const ir_elem *res_elems,
                 uint8_t *const *res)
{
    for (uint32_t k = 0; k < sc->n_in; k++)
        ir__ip_convert_elem(sc->in_elems[k], args[k], (ir_elem)sc->args[k]->elem, sc->args[k]->data);
    ir_tensor *out[2 * IP_MAX_VARIADIC];
    if (n_out > 2 * IP_MAX_VARIADIC)
        return ir__ip_fail(sc->c, AP_EUNSUPPORTED, "too many region results");
    int rc = sc->c->run->region(sc->c, sc->r, sc->n_in, (const ir_tensor *const *)sc->args, n_out, out);
    if (rc < 0)
        return rc;
    for (uint32_t k = 0; k < n_out; k++) {
        if (rc == 0 && (out[k]->kind != IR_TENSOR_ARRAY || out[k]->numel != 1))
            rc = ir__ip_fail(sc->c, AP_ETYPE, "the region must return scalars");
        if (rc == 0)
            ir__ip_convert_elem((ir_elem)out[k]->elem, out[k]->data, res_elems[k], res[k]);
        ir_tensor_free(out[k]);
    }
    return rc;
}

void ir__ip_scall_free(ip_scalar_call *sc)
{
    for (uint32_t k = 0; k < 2 * IP_MAX_VARIADIC; k++) {
        ir_tensor_free(sc->args[k]);
        sc->args[k] = NULL;
    }
}
