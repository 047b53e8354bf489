/*
 * randprog.h - random, well-typed StableHLO programs for the property test
 * of partitioning over the shapes of programs (test_random_programs.c).
 *
 * test_check's random schedules run over some forty fixed programs; the
 * partitioner's bugs hide in the op and shape combinations those lack.  A
 * seed here draws a program: 2-5 arguments of rank 0-4 with dims 1-12
 * (primes and dims no mesh axis divides among them) in f32, bf16 or i32,
 * then 3-25 ops, each on earlier values of a type that suits it (two
 * kinds, drawn per program, five times as often as the rest): element-wise
 * unary and binary ops, compare and select (by a scalar predicate too),
 * broadcast_in_dim (size-1 dims expanded, dims out of order), reshape
 * (merges, splits, any factoring), transpose, dot_general (random batch
 * and contracting dims, none of either too, a value with itself),
 * reduce (add or max over random dims, now and then from an init that is
 * not the identity), concatenate, slice with strides, pad (negative and
 * interior too), iota, convert between f32, bf16 and i32, reverse,
 * dynamic_slice and dynamic_update_slice at constant indices (past the
 * end too: clamped), reduce_window, a gather of rows and a scatter-add
 * into rows, a while loop and a case capturing a value, clamp, sort, and
 * a 1-D convolution (dims labelled in any order, stride, padding,
 * dilations, feature groups); then 1-3 values returned
 * (an argument as it came and one value twice among them now and then).
 * When an op needs an operand of a shape no earlier value has, one is
 * made of an earlier value (convert, reduce, pad or slice,
 * broadcast_in_dim), so those ops too meet random layouts.  Every type is
 * worked out here, so the text is valid by construction: a parse failure
 * is a bug of the generator or of the parser.
 *
 * Magnitudes are tracked (the check draws floats in [-1, 1) and integers
 * in [0, 8)) so that no float overflows to infinity and no i32 wraps.
 * Deterministic per seed, no process-wide state; header-only, like
 * testlib.h.
 */
#ifndef RANDPROG_H
#define RANDPROG_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ap.h"

#define RP_MAX_RANK 4
#define RP_MAX_VALUES 400
/* Elements of a value at most: dims grow past 12 (concatenate, pad,
 * broadcast), and the check runs every device's tiles. */
#define RP_MAX_ELEMS 32768

typedef enum rp_elem { RP_F32, RP_BF16, RP_I32, RP_I1 } rp_elem;

typedef struct rp_shape {
    int rank;
    int64_t d[RP_MAX_RANK];
    rp_elem et;
} rp_shape;

typedef struct rp_value {
    char name[16];
    rp_shape s;
    double bound;  /* the largest |element| it can hold */
    bool pickable; /* ops may take it (not a scalar constant or predicate) */
    /* Every element an integer: a float sum of such values below the
     * type's exact range is the same in any order. */
    bool integral;
    /* It depends on a float sum that partitioning may reorder: it may
     * differ in its last bits, so no compare or float -> integer convert
     * takes it (a flip there is a difference the check rightly reports,
     * though no partitioning is wrong). */
    bool noisy;
    bool is_arg;
    int uses;
} rp_value;

typedef struct rp_gen {
    uint64_t rng;
    ap_buf body;
    bool quiet; /* rp_adapt makes no noisy value (reductions by max) */
    rp_value v[RP_MAX_VALUES];
    int n;        /* values so far */
    int n_ops;    /* ops drawn (not counting the adapters they needed) */
    int counts[32]; /* ops emitted per kind (rp_kind) */
} rp_gen;

/* xorshift64*, as the other property tests. */
static inline uint64_t rp_next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static inline int rp_below(rp_gen *g, int n) { return n <= 1 ? 0 : (int)(rp_next(&g->rng) % (uint64_t)n); }
static inline int rp_range(rp_gen *g, int lo, int hi) { return lo + rp_below(g, hi - lo + 1); }
static inline bool rp_chance(rp_gen *g, int percent) { return rp_below(g, 100) < percent; }

static const char *const rp_elem_names[] = {"f32", "bf16", "i32", "i1"};

static inline bool rp_is_float(rp_elem e) { return e == RP_F32 || e == RP_BF16; }

/* The largest magnitude a value of e may reach: floats far from infinity
 * (their products and sums stay finite), i32 far from wrapping. */
static inline double rp_limit(rp_elem e) { return e == RP_I32 ? 1e8 : 1e15; }

static inline int64_t rp_elems(const rp_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->d[i];
    return n;
}

static inline bool rp_same(const rp_shape *a, const rp_shape *b)
{
    if (a->rank != b->rank || a->et != b->et)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i])
            return false;
    return true;
}

/* `tensor<2x3xf32>`, `tensor<i32>` into buf (64 bytes suffice). */
static inline const char *rp_type(const rp_shape *s, char *buf)
{
    int k = snprintf(buf, 64, "tensor<");
    for (int i = 0; i < s->rank; i++)
        k += snprintf(buf + k, (size_t)(64 - k), "%lldx", (long long)s->d[i]);
    snprintf(buf + k, (size_t)(64 - k), "%s>", rp_elem_names[s->et]);
    return buf;
}

/* A dim: half the time one with many divisors, half the time any of 1-12
 * (1, primes, 9, 10 as often as the rest). */
static inline int64_t rp_dim(rp_gen *g)
{
    static const int64_t nice[] = {2, 4, 6, 8, 12, 3, 4, 8};
    return rp_chance(g, 50) ? nice[rp_below(g, 8)] : rp_range(g, 1, 12);
}

static inline rp_elem rp_draw_elem(rp_gen *g)
{
    int k = rp_below(g, 20);
    return k < 14 ? RP_F32 : k < 17 ? RP_BF16 : RP_I32;
}

/* Starts a new value of shape s; its line is written by the caller after
 * rp_def.  Returns its index, or -1 when the table is full or the value
 * too large (the op is then not written). */
static inline int rp_new(rp_gen *g, const rp_shape *s, double bound, bool pickable)
{
    if (g->n >= RP_MAX_VALUES || rp_elems(s) > RP_MAX_ELEMS)
        return -1;
    rp_value *v = &g->v[g->n];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%%v%d", g->n);
    v->s = *s;
    v->bound = bound;
    v->pickable = pickable;
    v->integral = true; /* until an operand or the op says otherwise */
    return g->n++;
}

/* `  %vN = ` */
static inline void rp_def(rp_gen *g, int i) { ap_buf_printf(&g->body, "  %s = ", g->v[i].name); }

/* The name of value i as an operand of the op whose value was made last:
 * that value inherits its noise and loses integrality with it. */
static inline const char *rp_use(rp_gen *g, int i)
{
    rp_value *cur = &g->v[g->n - 1];
    g->v[i].uses++;
    cur->noisy |= g->v[i].noisy;
    cur->integral &= g->v[i].integral;
    return g->v[i].name;
}

/* The most terms a float sum may add.  Past them the check's tolerance
 * no longer covers the rounding a reordered sum changes, though the
 * partitioning is right (its f64 run agrees): a bf16 sum of 840 integers
 * in [0, 8) stalls near 2048 one addition at a time and reaches 2848 in
 * three partial sums (39% apart, tolerance 11%), and an f32 sum of 3024
 * products that cancel moved by 1.03e-4 against 1e-4.  (Found by this
 * test; see the check's sum and noise rules in ircheck.h.) */
static inline int64_t rp_max_terms(rp_elem e) { return e == RP_BF16 ? 32 : e == RP_F32 ? 512 : INT64_MAX; }

/* Value o is a float sum of terms terms: noisy unless it is a sum of
 * integers its type holds exactly. */
static inline void rp_sum(rp_gen *g, int o, int64_t terms)
{
    rp_value *v = &g->v[o];
    double exact = v->s.et == RP_BF16 ? 256 : 16777216;
    if (rp_is_float(v->s.et) && terms > 1 && !(v->integral && v->bound <= exact))
        v->noisy = true;
}

static inline bool rp_ok_quiet(const rp_value *v, const void *s)
{
    return !v->noisy && (!s || rp_same(&v->s, (const rp_shape *)s));
}

/* A scalar constant of e holding text (`0.0`, `0xFF800000`, `-3`);
 * returns its name's index (not pickable). */
static inline int rp_scalar(rp_gen *g, rp_elem e, const char *text, double bound)
{
    rp_shape s = {.rank = 0, .et = e};
    int i = rp_new(g, &s, bound, false);
    if (i < 0)
        return -1;
    char t[64];
    /* 0.5 and the like; -inf (0xFF80...) only ever starts a max */
    g->v[i].integral = strncmp(text, "0x", 2) == 0 || strtod(text, NULL) == floor(strtod(text, NULL));
    rp_def(g, i);
    ap_buf_printf(&g->body, "stablehlo.constant dense<%s> : %s\n", text, rp_type(&s, t));
    return i;
}

static inline int rp_int_const(rp_gen *g, int64_t k)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)k);
    return rp_scalar(g, RP_I32, text, (double)(k < 0 ? -k : k));
}

/* A random pickable value passing ok (NULL: any), half the time one that
 * nothing uses yet (so few values are dead); -1 when none passes. */
static inline int rp_pick(rp_gen *g, bool (*ok)(const rp_value *, const void *), const void *arg)
{
    int cand[RP_MAX_VALUES], n = 0, unused[RP_MAX_VALUES], nu = 0;
    for (int i = 0; i < g->n; i++) {
        const rp_value *v = &g->v[i];
        if (!v->pickable || (ok && !ok(v, arg)))
            continue;
        cand[n++] = i;
        if (v->uses == 0)
            unused[nu++] = i;
    }
    if (n == 0)
        return -1;
    if (nu && rp_chance(g, 50))
        return unused[rp_below(g, nu)];
    return cand[rp_below(g, n)];
}

static inline bool rp_ok_shape(const rp_value *v, const void *s) { return rp_same(&v->s, (const rp_shape *)s); }
static inline bool rp_ok_float(const rp_value *v, const void *unused)
{
    (void)unused;
    return rp_is_float(v->s.et);
}
static inline bool rp_ok_ranked(const rp_value *v, const void *unused)
{
    (void)unused;
    return v->s.rank >= 1;
}

/* --------------------------------------------------------------- adapters */

/* convert of value i to e. */
static inline int rp_convert(rp_gen *g, int i, rp_elem e)
{
    rp_shape s = g->v[i].s;
    s.et = e;
    double bound = g->v[i].bound;
    int o = rp_new(g, &s, bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.convert %s : (%s) -> %s\n", rp_use(g, i), rp_type(&g->v[i].s, t1),
                  rp_type(&s, t2));
    return o;
}

/* reduce of value i over the dims marked in red[] (add or max, from the
 * identity or, init_any, now and then another init). */
static inline int rp_reduce_dims(rp_gen *g, int i, const bool *red, bool init_any)
{
    const rp_value *v = &g->v[i];
    rp_elem e = v->s.et;
    bool add = !g->quiet && rp_chance(g, 60);
    int64_t terms = 1;
    rp_shape s = {.rank = 0, .et = e};
    char dims[64] = "";
    int k = 0;
    for (int d = 0; d < v->s.rank; d++) {
        if (red[d]) {
            k += snprintf(dims + k, sizeof dims - (size_t)k, "%s%d", k ? ", " : "", d);
            terms *= v->s.d[d];
        } else {
            s.d[s.rank++] = v->s.d[d];
        }
    }
    double bound = add ? v->bound * (double)terms : v->bound;
    if (bound > rp_limit(e) || terms > rp_max_terms(e))
        add = false, bound = v->bound;
    const char *init;
    double ib = 0;
    bool odd = init_any && rp_chance(g, 12); /* not the identity */
    if (add)
        init = odd ? (e == RP_I32 ? "1" : "1.5") : (e == RP_I32 ? "0" : "0.0");
    else if (odd)
        init = e == RP_I32 ? "3" : "0.25";
    else
        init = e == RP_I32 ? "-2147483648" : e == RP_BF16 ? "0xFF80" : "0xFF800000";
    if (odd)
        ib = 3;
    int c = rp_scalar(g, e, init, ib);
    if (c < 0)
        return -1;
    int o = rp_new(g, &s, bound + ib, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_shape cs = {.rank = 0, .et = e};
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.reduce(%s init: ", rp_use(g, i));
    ap_buf_printf(&g->body, "%s) applies stablehlo.%s across dimensions = [%s] : (%s, %s) -> %s\n", rp_use(g, c),
                  add ? "add" : "maximum", dims, rp_type(&v->s, t1), rp_type(&cs, t2), rp_type(&s, t3));
    if (add)
        rp_sum(g, o, terms + (ib != 0));
    return o;
}

/* pad of value i with lo[], hi[], in[] per dim (result dims >= 0 asked of
 * the caller). */
static inline int rp_pad(rp_gen *g, int i, const int64_t *lo, const int64_t *hi, const int64_t *in)
{
    const rp_value *v = &g->v[i];
    rp_shape s = v->s;
    char l[64] = "", h[64] = "", n[64] = "";
    int kl = 0, kh = 0, kn = 0;
    for (int d = 0; d < s.rank; d++) {
        s.d[d] = v->s.d[d] + lo[d] + hi[d] + (v->s.d[d] > 0 ? (v->s.d[d] - 1) * in[d] : 0);
        kl += snprintf(l + kl, sizeof l - (size_t)kl, "%s%lld", d ? ", " : "", (long long)lo[d]);
        kh += snprintf(h + kh, sizeof h - (size_t)kh, "%s%lld", d ? ", " : "", (long long)hi[d]);
        kn += snprintf(n + kn, sizeof n - (size_t)kn, "%s%lld", d ? ", " : "", (long long)in[d]);
    }
    rp_elem e = v->s.et;
    int c = rp_scalar(g, e, e == RP_I32 ? "2" : "0.5", 2);
    if (c < 0)
        return -1;
    double bound = v->bound > 2 ? v->bound : 2;
    int o = rp_new(g, &s, bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_shape cs = {.rank = 0, .et = e};
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.pad %s, %s, low = [%s], high = [%s], interior = [%s] : (%s, %s) -> %s\n",
                  rp_use(g, i), rp_use(g, c), l, h, n, rp_type(&g->v[i].s, t1), rp_type(&cs, t2), rp_type(&s, t3));
    return o;
}

/* slice of value i: [start:limit:stride] per dim. */
static inline int rp_slice(rp_gen *g, int i, const int64_t *start, const int64_t *limit, const int64_t *stride)
{
    const rp_value *v = &g->v[i];
    rp_shape s = v->s;
    char parts[200] = "";
    int k = 0;
    for (int d = 0; d < s.rank; d++) {
        s.d[d] = (limit[d] - start[d] + stride[d] - 1) / stride[d];
        if (stride[d] != 1)
            k += snprintf(parts + k, sizeof parts - (size_t)k, "%s%lld:%lld:%lld", d ? ", " : "",
                          (long long)start[d], (long long)limit[d], (long long)stride[d]);
        else
            k += snprintf(parts + k, sizeof parts - (size_t)k, "%s%lld:%lld", d ? ", " : "", (long long)start[d],
                          (long long)limit[d]);
    }
    int o = rp_new(g, &s, v->bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.slice %s [%s] : (%s) -> %s\n", rp_use(g, i), parts, rp_type(&g->v[i].s, t1),
                  rp_type(&s, t2));
    return o;
}

/* broadcast_in_dim of value i into shape s, operand dim k at pos[k]. */
static inline int rp_broadcast(rp_gen *g, int i, const rp_shape *s, const int *pos)
{
    const rp_value *v = &g->v[i];
    char dims[64] = "";
    int k = 0;
    for (int d = 0; d < v->s.rank; d++)
        k += snprintf(dims + k, sizeof dims - (size_t)k, "%s%d", d ? ", " : "", pos[d]);
    int o = rp_new(g, s, v->bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.broadcast_in_dim %s, dims = [%s] : (%s) -> %s\n", rp_use(g, i), dims,
                  rp_type(&g->v[i].s, t1), rp_type(s, t2));
    return o;
}

/* Value i brought to the dims of want (same rank) by one pad (grows and
 * shrinks, negative padding) or, to shrink only, one slice. */
static inline int rp_resize(rp_gen *g, int i, const rp_shape *want)
{
    const rp_shape *s = &g->v[i].s;
    bool differ = false, grow = false;
    for (int d = 0; d < s->rank; d++) {
        differ |= s->d[d] != want->d[d];
        grow |= s->d[d] < want->d[d];
    }
    if (!differ)
        return i;
    int64_t lo[RP_MAX_RANK], hi[RP_MAX_RANK], in[RP_MAX_RANK] = {0};
    if (!grow && rp_chance(g, 40)) {
        int64_t start[RP_MAX_RANK], stride[RP_MAX_RANK];
        for (int d = 0; d < s->rank; d++) {
            int64_t room = s->d[d] - want->d[d];
            start[d] = rp_below(g, (int)room + 1);
            stride[d] = 1;
            lo[d] = start[d] + want->d[d]; /* the limit */
        }
        return rp_slice(g, i, start, lo, stride);
    }
    for (int d = 0; d < s->rank; d++) {
        int64_t delta = want->d[d] - s->d[d];
        if (delta >= 0)
            lo[d] = rp_below(g, (int)delta + 1);
        else
            lo[d] = -rp_below(g, (int)-delta + 1);
        hi[d] = delta - lo[d];
    }
    return rp_pad(g, i, lo, hi, in);
}

/* A value of exactly shape (and type) want, made of value i: converted,
 * reduced to fewer dims or broadcast to more, resized. */
static inline int rp_adapt(rp_gen *g, int i, const rp_shape *want)
{
    if (i < 0)
        return -1;
    if (want->et == RP_I32 && g->v[i].noisy && rp_is_float(g->v[i].s.et))
        i = rp_pick(g, rp_ok_quiet, NULL); /* (the arguments are quiet) */
    if (g->v[i].s.et != want->et && (i = rp_convert(g, i, want->et)) < 0)
        return -1;
    int r = g->v[i].s.rank;
    if (r > want->rank) { /* reduce r - want->rank random dims */
        bool red[RP_MAX_RANK] = {false};
        for (int left = r - want->rank; left > 0;) {
            int d = rp_below(g, r);
            if (!red[d])
                red[d] = true, left--;
        }
        if ((i = rp_reduce_dims(g, i, red, false)) < 0)
            return -1;
    } else if (r < want->rank) { /* resize to the dims it lands on, then broadcast */
        int pos[RP_MAX_RANK], k = 0;
        for (int d = 0; d < want->rank && k < r; d++)
            if (rp_below(g, want->rank - d) < r - k)
                pos[k++] = d;
        rp_shape mid = {.rank = r, .et = want->et};
        for (int d = 0; d < r; d++)
            mid.d[d] = want->d[pos[d]];
        if ((i = rp_resize(g, i, &mid)) < 0)
            return -1;
        return rp_broadcast(g, i, want, pos);
    }
    return rp_resize(g, i, want);
}

/* A value of shape want: an existing one most of the time when there is
 * one, else one adapted from a random value. */
static inline int rp_operand(rp_gen *g, const rp_shape *want)
{
    int i = rp_pick(g, rp_ok_shape, want);
    if (i >= 0 && rp_chance(g, 75))
        return i;
    return rp_adapt(g, rp_pick(g, NULL, NULL), want);
}

/* The same, not noisy (for a compare). */
static inline int rp_quiet_operand(rp_gen *g, const rp_shape *want)
{
    int i = rp_pick(g, rp_ok_quiet, want);
    if (i >= 0 && rp_chance(g, 75))
        return i;
    g->quiet = true;
    i = rp_adapt(g, rp_pick(g, rp_ok_quiet, NULL), want);
    g->quiet = false;
    return i;
}

/* -------------------------------------------------------------------- ops */

enum rp_kind {
    RP_UNARY, RP_BINARY, RP_SELECT, RP_BROADCAST, RP_RESHAPE, RP_TRANSPOSE, RP_DOT, RP_REDUCE, RP_CONCAT,
    RP_SLICE, RP_PAD, RP_IOTA, RP_CONVERT, RP_REVERSE, RP_DSLICE, RP_DUS, RP_RWINDOW, RP_GATHER, RP_SCATTER,
    RP_WHILE, RP_CLAMP, RP_SORT, RP_CONV, RP_CASE, RP__KINDS
};

static const char *const rp_kind_names[RP__KINDS] = {
    "unary", "binary", "select", "broadcast", "reshape", "transpose", "dot_general", "reduce", "concatenate",
    "slice", "pad", "iota", "convert", "reverse", "dynamic_slice", "dynamic_update_slice", "reduce_window",
    "gather", "scatter", "while", "clamp", "sort", "convolution", "case"};

/* how often each kind is drawn */
static const int rp_kind_weight[RP__KINDS] = {10, 12, 5, 7, 7, 5, 10, 8, 4, 5, 5, 2,
                                              4,  3,  3, 2, 2, 2, 2, 2, 2, 2, 3, 2};

static inline int rp_op_unary(rp_gen *g)
{
    int i = rp_pick(g, NULL, NULL);
    const rp_value *v = &g->v[i];
    bool fl = rp_is_float(v->s.et);
    int k = fl ? rp_below(g, 4) : 0;
    static const char *const names[] = {"negate", "exponential", "tanh", "abs"};
    double bound = v->bound;
    if (k == 1) {
        if (v->bound > 20)
            k = 2;
        else
            bound = exp(v->bound);
    }
    if (k == 2)
        bound = v->bound < 1 ? v->bound : 1;
    int o = rp_new(g, &v->s, bound, true);
    if (o < 0)
        return -1;
    char t[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.%s %s : %s\n", names[k], rp_use(g, i), rp_type(&g->v[i].s, t));
    if (k == 1 || k == 2)
        g->v[o].integral = false;
    return o;
}

static inline int rp_op_binary(rp_gen *g)
{
    int a = rp_pick(g, NULL, NULL);
    rp_shape s = g->v[a].s;
    int b = rp_operand(g, &s);
    if (b < 0)
        return -1;
    static const char *const names[] = {"add", "multiply", "maximum", "subtract", "minimum"};
    int k = rp_below(g, 5);
    double x = g->v[a].bound, y = g->v[b].bound;
    double bound = k == 1 ? x * y : (k == 0 || k == 3) ? x + y : (x > y ? x : y);
    if (bound > rp_limit(s.et))
        k = 2, bound = x > y ? x : y;
    int o = rp_new(g, &s, bound, true);
    if (o < 0)
        return -1;
    char t[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.%s %s, ", names[k], rp_use(g, a));
    ap_buf_printf(&g->body, "%s : %s\n", rp_use(g, b), rp_type(&s, t));
    return o;
}

/* compare of two values of one shape (not necessarily the selected ones'
 * type), select between two others. */
static inline int rp_op_select(rp_gen *g)
{
    int x = rp_pick(g, NULL, NULL);
    rp_shape s = g->v[x].s;
    int y = rp_operand(g, &s);
    if (y < 0)
        return -1;
    rp_shape cs = s;
    cs.et = rp_chance(g, 70) ? s.et : rp_draw_elem(g);
    if (s.rank > 0 && rp_chance(g, 15)) /* one predicate for all elements */
        cs.rank = 0;
    int a = rp_chance(g, 60) && rp_same(&cs, &s) && !g->v[x].noisy ? x : rp_quiet_operand(g, &cs);
    int b = rp_quiet_operand(g, &cs);
    if (a < 0 || b < 0)
        return -1;
    static const char *const dirs[] = {"LT", "LE", "GT", "GE", "EQ", "NE"};
    rp_shape ps = cs;
    ps.et = RP_I1;
    int p = rp_new(g, &ps, 1, false);
    if (p < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_def(g, p);
    ap_buf_printf(&g->body, "stablehlo.compare %s, %s, ", dirs[rp_below(g, 6)], rp_use(g, a));
    ap_buf_printf(&g->body, "%s : (%s, %s) -> %s\n", rp_use(g, b), rp_type(&cs, t1), rp_type(&cs, t2),
                  rp_type(&ps, t3));
    double bound = g->v[x].bound > g->v[y].bound ? g->v[x].bound : g->v[y].bound;
    int o = rp_new(g, &s, bound, true);
    if (o < 0)
        return -1;
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.select %s, ", rp_use(g, p));
    ap_buf_printf(&g->body, "%s, ", rp_use(g, x));
    ap_buf_printf(&g->body, "%s : %s, %s\n", rp_use(g, y), rp_type(&ps, t1), rp_type(&s, t2));
    return o;
}

static inline int rp_op_broadcast(rp_gen *g)
{
    int i = rp_pick(g, NULL, NULL);
    const rp_shape *in = &g->v[i].s;
    if (in->rank >= RP_MAX_RANK && rp_chance(g, 70))
        return -2;
    int R = rp_range(g, in->rank, RP_MAX_RANK);
    int pos[RP_MAX_RANK], k = 0;
    for (int d = 0; d < R && k < in->rank; d++)
        if (rp_below(g, R - d) < in->rank - k)
            pos[k++] = d;
    if (in->rank >= 2 && rp_chance(g, 25)) /* not in order */
        for (int d = in->rank - 1; d > 0; d--) {
            int j = rp_below(g, d + 1), t = pos[d];
            pos[d] = pos[j], pos[j] = t;
        }
    rp_shape s = {.rank = R, .et = in->et};
    for (int d = 0; d < R; d++)
        s.d[d] = rp_dim(g);
    for (int d = 0; d < in->rank; d++)
        s.d[pos[d]] = in->d[d] == 1 && rp_chance(g, 50) ? rp_dim(g) : in->d[d];
    return rp_broadcast(g, i, &s, pos);
}

static inline int rp_op_reshape(rp_gen *g)
{
    int i = rp_pick(g, NULL, NULL);
    const rp_shape *in = &g->v[i].s;
    rp_shape s = {.rank = 0, .et = in->et};
    int mode = rp_below(g, 4);
    if (mode == 0 && in->rank >= 2) { /* merge two neighbours */
        int m = rp_below(g, in->rank - 1);
        for (int d = 0; d < in->rank; d++) {
            if (d == m)
                s.d[s.rank++] = in->d[d] * in->d[d + 1];
            else if (d != m + 1)
                s.d[s.rank++] = in->d[d];
        }
    } else if (mode == 1 && in->rank >= 1 && in->rank < RP_MAX_RANK) { /* split one */
        int m = rp_below(g, in->rank);
        int64_t f[32], nf = 0; /* its divisors (dims grow past 12: concatenate, pad) */
        for (int64_t x = 2; x < in->d[m] && nf < 32; x++)
            if (in->d[m] % x == 0)
                f[nf++] = x;
        if (nf == 0)
            return -2;
        int64_t a = f[rp_below(g, (int)nf)];
        for (int d = 0; d < in->rank; d++) {
            if (d == m) {
                s.d[s.rank++] = a;
                s.d[s.rank++] = in->d[d] / a;
            } else {
                s.d[s.rank++] = in->d[d];
            }
        }
    } else if (mode == 2) { /* a size-1 dim in or out */
        s = *in;
        int ones = -1;
        for (int d = 0; d < in->rank; d++)
            if (in->d[d] == 1)
                ones = d;
        if (ones >= 0 && rp_chance(g, 50)) {
            for (int d = ones; d + 1 < in->rank; d++)
                s.d[d] = in->d[d + 1];
            s.rank--;
        } else if (in->rank < RP_MAX_RANK) {
            int at = rp_below(g, in->rank + 1);
            for (int d = in->rank; d > at; d--)
                s.d[d] = s.d[d - 1];
            s.d[at] = 1;
            s.rank++;
        } else {
            return -2;
        }
    } else { /* any factoring of the element count into 1-4 dims */
        int64_t n = rp_elems(in), p[32];
        int np = 0;
        for (int64_t x = 2; x * x <= n; x++)
            while (n % x == 0)
                p[np++] = x, n /= x;
        if (n > 1)
            p[np++] = n;
        s.rank = rp_range(g, 1, RP_MAX_RANK);
        for (int d = 0; d < s.rank; d++)
            s.d[d] = 1;
        for (int k = 0; k < np; k++)
            s.d[rp_below(g, s.rank)] *= p[k];
    }
    int o = rp_new(g, &s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.reshape %s : (%s) -> %s\n", rp_use(g, i), rp_type(&g->v[i].s, t1),
                  rp_type(&s, t2));
    return o;
}

static inline int rp_op_transpose(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *in = &g->v[i].s;
    int perm[RP_MAX_RANK];
    for (int d = 0; d < in->rank; d++)
        perm[d] = d;
    for (int d = in->rank - 1; d > 0; d--) {
        int j = rp_below(g, d + 1), t = perm[d];
        perm[d] = perm[j], perm[j] = t;
    }
    rp_shape s = {.rank = in->rank, .et = in->et};
    char dims[64] = "";
    int k = 0;
    for (int d = 0; d < in->rank; d++) {
        s.d[d] = in->d[perm[d]];
        k += snprintf(dims + k, sizeof dims - (size_t)k, "%s%d", d ? ", " : "", perm[d]);
    }
    int o = rp_new(g, &s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.transpose %s, dims = [%s] : (%s) -> %s\n", rp_use(g, i), dims,
                  rp_type(&g->v[i].s, t1), rp_type(&s, t2));
    return o;
}

static inline void rp_dim_list(char *buf, size_t size, const int *d, int n)
{
    int k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        k += snprintf(buf + k, size - (size_t)k, "%s%d", i ? ", " : "", d[i]);
}

/* dot_general: random batch (0-2) and contracting (0-2) dims of the lhs,
 * the rhs made to fit with 0-2 free dims of its own, its dims in any
 * order. */
static inline int rp_op_dot(rp_gen *g)
{
    int l = rp_pick(g, NULL, NULL);
    const rp_shape *ls = &g->v[l].s;
    int r = ls->rank, lb[2], lc[2], nb = 0, nc = 0;
    bool used[RP_MAX_RANK] = {false};
    int want_b = rp_below(g, 3), want_c = rp_below(g, 3);
    for (int t = 0; t < 8 && nb < want_b && nb + nc < r; t++) {
        int d = rp_below(g, r);
        if (!used[d])
            used[d] = true, lb[nb++] = d;
    }
    for (int t = 0; t < 8 && nc < want_c && nb + nc < r; t++) {
        int d = rp_below(g, r);
        if (!used[d])
            used[d] = true, lc[nc++] = d;
    }
    int lfree = r - nb - nc, nf = rp_below(g, 3), rr, slot[RP_MAX_RANK], rb[2], rc[2], rhs;
    if (nb + 2 * lfree <= RP_MAX_RANK && rp_chance(g, 20)) {
        /* a value with itself (x x^T, a Gram matrix): the same dims on
         * both sides, its free dims twice in the result */
        rr = r;
        for (int k = 0; k < nb; k++)
            rb[k] = slot[k] = lb[k];
        for (int k = 0; k < nc; k++)
            rc[k] = slot[nb + k] = lc[k];
        rhs = l;
    } else {
        if (nb + lfree + nf > RP_MAX_RANK)
            nf = RP_MAX_RANK - nb - lfree;
        if (nf < 0 || nb + nc + nf > RP_MAX_RANK)
            return -2;
        /* the rhs: batch, contracting and free dims at random positions */
        rr = nb + nc + nf;
        for (int d = 0; d < rr; d++)
            slot[d] = d;
        for (int d = rr - 1; d > 0; d--) {
            int j = rp_below(g, d + 1), t = slot[d];
            slot[d] = slot[j], slot[j] = t;
        }
        rp_shape rs = {.rank = rr, .et = ls->et};
        for (int k = 0; k < nb; k++)
            rb[k] = slot[k], rs.d[slot[k]] = ls->d[lb[k]];
        for (int k = 0; k < nc; k++)
            rc[k] = slot[nb + k], rs.d[slot[nb + k]] = ls->d[lc[k]];
        for (int k = 0; k < nf; k++)
            rs.d[slot[nb + nc + k]] = rp_dim(g);
        if ((rhs = rp_operand(g, &rs)) < 0)
            return -1;
    }
    rp_shape s = {.rank = 0, .et = ls->et};
    int64_t terms = 1;
    for (int k = 0; k < nb; k++)
        s.d[s.rank++] = ls->d[lb[k]];
    for (int d = 0; d < r; d++) {
        bool b = false, c = false;
        for (int k = 0; k < nb; k++)
            b |= lb[k] == d;
        for (int k = 0; k < nc; k++)
            c |= lc[k] == d;
        if (c)
            terms *= ls->d[d];
        else if (!b)
            s.d[s.rank++] = ls->d[d];
    }
    for (int d = 0; d < rr; d++) {
        bool taken = false;
        for (int k = 0; k < nb + nc; k++)
            taken |= slot[k] == d;
        if (!taken)
            s.d[s.rank++] = g->v[rhs].s.d[d];
    }
    double bound = g->v[l].bound * g->v[rhs].bound * (double)terms;
    if (bound > rp_limit(s.et) || terms > rp_max_terms(s.et))
        return -2;
    int o = rp_new(g, &s, bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64], t3[64], a[32], b[32], c[32], d[32];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.dot_general %s, ", rp_use(g, l));
    ap_buf_printf(&g->body, "%s, ", rp_use(g, rhs));
    if (nb) {
        rp_dim_list(a, sizeof a, lb, nb);
        rp_dim_list(b, sizeof b, rb, nb);
        ap_buf_printf(&g->body, "batching_dims = [%s] x [%s], ", a, b);
    }
    rp_dim_list(c, sizeof c, lc, nc);
    rp_dim_list(d, sizeof d, rc, nc);
    ap_buf_printf(&g->body, "contracting_dims = [%s] x [%s] : (%s, %s) -> %s\n", c, d, rp_type(ls, t1),
                  rp_type(&g->v[rhs].s, t2), rp_type(&s, t3));
    rp_sum(g, o, terms);
    return o;
}

static inline int rp_op_reduce(rp_gen *g)
{
    int i = rp_pick(g, NULL, NULL);
    bool red[RP_MAX_RANK] = {false};
    for (int d = 0; d < g->v[i].s.rank; d++)
        red[d] = rp_chance(g, 50);
    return rp_reduce_dims(g, i, red, true);
}

static inline int rp_op_concat(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    rp_shape s = g->v[i].s;
    int dim = rp_below(g, s.rank), k = rp_range(g, 2, 3), ops[3] = {i};
    rp_shape out = s;
    for (int j = 1; j < k; j++) {
        rp_shape w = s;
        w.d[dim] = rp_dim(g);
        if ((ops[j] = rp_operand(g, &w)) < 0)
            return -1;
        out.d[dim] += w.d[dim];
    }
    double bound = 0;
    for (int j = 0; j < k; j++)
        bound = bound > g->v[ops[j]].bound ? bound : g->v[ops[j]].bound;
    int o = rp_new(g, &out, bound, true);
    if (o < 0)
        return -1;
    char t[64];
    rp_def(g, o);
    ap_buf_puts(&g->body, "stablehlo.concatenate ");
    for (int j = 0; j < k; j++)
        ap_buf_printf(&g->body, "%s%s", j ? ", " : "", rp_use(g, ops[j]));
    ap_buf_printf(&g->body, ", dim = %d : (", dim);
    for (int j = 0; j < k; j++)
        ap_buf_printf(&g->body, "%s%s", j ? ", " : "", rp_type(&g->v[ops[j]].s, t));
    ap_buf_printf(&g->body, ") -> %s\n", rp_type(&out, t));
    return o;
}

static inline int rp_op_slice(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *s = &g->v[i].s;
    int64_t start[RP_MAX_RANK], limit[RP_MAX_RANK], stride[RP_MAX_RANK];
    for (int d = 0; d < s->rank; d++) {
        start[d] = rp_chance(g, 30) ? 0 : rp_below(g, (int)s->d[d]);
        limit[d] = rp_chance(g, 30) ? s->d[d] : rp_range(g, (int)start[d] + 1, (int)s->d[d]);
        stride[d] = rp_chance(g, 65) ? 1 : rp_range(g, 2, 3);
    }
    return rp_slice(g, i, start, limit, stride);
}

static inline int rp_op_pad(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *s = &g->v[i].s;
    int64_t lo[RP_MAX_RANK], hi[RP_MAX_RANK], in[RP_MAX_RANK];
    for (int d = 0; d < s->rank; d++) {
        lo[d] = rp_range(g, -2, 3);
        hi[d] = rp_range(g, -2, 3);
        in[d] = rp_chance(g, 70) ? 0 : rp_range(g, 1, 2);
        int64_t n = s->d[d] + (s->d[d] - 1) * in[d];
        /* what negative padding removes stays inside the padded dim */
        if (lo[d] < 0 && -lo[d] >= n)
            lo[d] = 0;
        if (n + lo[d] + hi[d] < 1)
            hi[d] = 0;
        if (n + lo[d] + hi[d] < 1)
            lo[d] = 0;
    }
    return rp_pad(g, i, lo, hi, in);
}

static inline int rp_op_iota(rp_gen *g)
{
    rp_shape s = {.rank = rp_range(g, 1, RP_MAX_RANK), .et = rp_draw_elem(g)};
    for (int d = 0; d < s.rank; d++)
        s.d[d] = rp_dim(g);
    int dim = rp_below(g, s.rank);
    int o = rp_new(g, &s, (double)s.d[dim], true);
    if (o < 0)
        return -1;
    char t[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.iota dim = %d : %s\n", dim, rp_type(&s, t));
    return o;
}

static inline int rp_op_convert(rp_gen *g)
{
    int i = rp_pick(g, NULL, NULL);
    rp_elem e = (rp_elem)((g->v[i].s.et + 1 + (rp_elem)rp_below(g, 2)) % 3);
    if (e == RP_I32 && g->v[i].noisy)
        e = g->v[i].s.et == RP_F32 ? RP_BF16 : RP_F32;
    return rp_convert(g, i, e);
}

static inline int rp_op_reverse(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *s = &g->v[i].s;
    int dims[RP_MAX_RANK], n = 0;
    for (int d = 0; d < s->rank; d++)
        if (rp_chance(g, 50))
            dims[n++] = d;
    if (n == 0)
        dims[n++] = rp_below(g, s->rank);
    int o = rp_new(g, s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t[64], list[32];
    rp_dim_list(list, sizeof list, dims, n);
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.reverse %s, dims = [%s] : %s\n", rp_use(g, i), list, rp_type(s, t));
    return o;
}

/* Constant start indices for value i: one past either end now and then
 * (the op clamps them). */
static inline bool rp_start_indices(rp_gen *g, const rp_shape *s, const int64_t *size, int *idx)
{
    for (int d = 0; d < s->rank; d++) {
        int64_t room = s->d[d] - size[d];
        int64_t k = rp_chance(g, 15) ? rp_range(g, -1, (int)room + 2) : rp_range(g, 0, (int)room);
        if ((idx[d] = rp_int_const(g, k)) < 0)
            return false;
    }
    return true;
}

static inline int rp_op_dslice(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    rp_shape s = g->v[i].s;
    int64_t size[RP_MAX_RANK];
    int idx[RP_MAX_RANK];
    for (int d = 0; d < s.rank; d++)
        size[d] = rp_chance(g, 30) ? s.d[d] : rp_range(g, 1, (int)s.d[d]);
    if (!rp_start_indices(g, &g->v[i].s, size, idx))
        return -1;
    for (int d = 0; d < s.rank; d++)
        s.d[d] = size[d];
    int o = rp_new(g, &s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.dynamic_slice %s", rp_use(g, i));
    for (int d = 0; d < s.rank; d++)
        ap_buf_printf(&g->body, ", %s", rp_use(g, idx[d]));
    ap_buf_puts(&g->body, ", sizes = [");
    for (int d = 0; d < s.rank; d++)
        ap_buf_printf(&g->body, "%s%lld", d ? ", " : "", (long long)size[d]);
    ap_buf_printf(&g->body, "] : (%s", rp_type(&g->v[i].s, t));
    for (int d = 0; d < s.rank; d++)
        ap_buf_puts(&g->body, ", tensor<i32>");
    ap_buf_printf(&g->body, ") -> %s\n", rp_type(&s, t));
    return o;
}

static inline int rp_op_dus(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    rp_shape us = g->v[i].s;
    for (int d = 0; d < us.rank; d++)
        us.d[d] = rp_chance(g, 30) ? us.d[d] : rp_range(g, 1, (int)us.d[d]);
    int u = rp_operand(g, &us);
    if (u < 0)
        return -1;
    int idx[RP_MAX_RANK];
    if (!rp_start_indices(g, &g->v[i].s, us.d, idx))
        return -1;
    const rp_shape *s = &g->v[i].s;
    double bound = g->v[i].bound > g->v[u].bound ? g->v[i].bound : g->v[u].bound;
    int o = rp_new(g, s, bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.dynamic_update_slice %s, ", rp_use(g, i));
    ap_buf_printf(&g->body, "%s", rp_use(g, u));
    for (int d = 0; d < s->rank; d++)
        ap_buf_printf(&g->body, ", %s", rp_use(g, idx[d]));
    ap_buf_printf(&g->body, " : (%s, %s", rp_type(s, t1), rp_type(&us, t2));
    for (int d = 0; d < s->rank; d++)
        ap_buf_puts(&g->body, ", tensor<i32>");
    ap_buf_printf(&g->body, ") -> %s\n", rp_type(s, t1));
    return o;
}

/* A two-argument scalar region of e applying op (`add`, `maximum`). */
static inline void rp_region(rp_gen *g, rp_elem e, const char *op)
{
    const char *t = e == RP_F32 ? "tensor<f32>" : e == RP_BF16 ? "tensor<bf16>" : "tensor<i32>";
    ap_buf_printf(&g->body,
                  "({\n  ^bb0(%%ra: %s, %%rb: %s):\n    %%rc = stablehlo.%s %%ra, %%rb : %s\n"
                  "    stablehlo.return %%rc : %s\n  })",
                  t, t, op, t, t);
}

/* reduce_window: windows of 1-3 with strides 1-2 and padding 0-1. */
static inline int rp_op_rwindow(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *in = &g->v[i].s;
    rp_elem e = in->et;
    rp_shape s = *in;
    int64_t win[RP_MAX_RANK], st[RP_MAX_RANK], lo[RP_MAX_RANK], hi[RP_MAX_RANK], terms = 1;
    for (int d = 0; d < in->rank; d++) {
        win[d] = rp_chance(g, 50) ? 1 : rp_range(g, 2, 3);
        st[d] = rp_chance(g, 60) ? 1 : 2;
        lo[d] = rp_chance(g, 70) ? 0 : 1;
        hi[d] = rp_chance(g, 70) ? 0 : 1;
        int64_t padded = in->d[d] + lo[d] + hi[d];
        if (padded < win[d])
            win[d] = 1;
        s.d[d] = (padded - win[d]) / st[d] + 1;
        terms *= win[d];
    }
    bool add = rp_chance(g, 50) && g->v[i].bound * (double)terms < rp_limit(e) && terms <= rp_max_terms(e);
    const char *init = add ? (e == RP_I32 ? "0" : "0.0")
                           : (e == RP_I32 ? "-2147483648" : e == RP_BF16 ? "0xFF80" : "0xFF800000");
    int c = rp_scalar(g, e, init, 0);
    if (c < 0)
        return -1;
    int o = rp_new(g, &s, add ? g->v[i].bound * (double)terms : g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_shape cs = {.rank = 0, .et = e};
    rp_def(g, o);
    ap_buf_printf(&g->body, "\"stablehlo.reduce_window\"(%s, ", rp_use(g, i));
    ap_buf_printf(&g->body, "%s) ", rp_use(g, c));
    rp_region(g, e, add ? "add" : "maximum");
    ap_buf_puts(&g->body, " {window_dimensions = array<i64: ");
    for (int d = 0; d < in->rank; d++)
        ap_buf_printf(&g->body, "%s%lld", d ? ", " : "", (long long)win[d]);
    ap_buf_puts(&g->body, ">, window_strides = array<i64: ");
    for (int d = 0; d < in->rank; d++)
        ap_buf_printf(&g->body, "%s%lld", d ? ", " : "", (long long)st[d]);
    ap_buf_puts(&g->body, ">, padding = dense<[");
    for (int d = 0; d < in->rank; d++)
        ap_buf_printf(&g->body, "%s[%lld, %lld]", d ? ", " : "", (long long)lo[d], (long long)hi[d]);
    ap_buf_printf(&g->body, "]> : tensor<%dx2xi64>} : (%s, %s) -> %s\n", in->rank, rp_type(in, t1),
                  rp_type(&cs, t2), rp_type(&s, t3));
    if (add)
        rp_sum(g, o, terms);
    return o;
}

/* A gather of whole rows along dim 0 at constant indices (some out of
 * range: clamped): result n x rest. */
static inline int rp_op_gather(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *in = &g->v[i].s;
    int n = rp_range(g, 1, 5);
    rp_shape is = {.rank = 2, .d = {n, 1}, .et = RP_I32};
    int idx = rp_new(g, &is, 16, false);
    if (idx < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_def(g, idx);
    ap_buf_puts(&g->body, "stablehlo.constant dense<[");
    for (int k = 0; k < n; k++)
        ap_buf_printf(&g->body, "%s[%d]", k ? ", " : "", rp_range(g, 0, (int)in->d[0]));
    ap_buf_printf(&g->body, "]> : %s\n", rp_type(&is, t1));
    rp_shape s = {.rank = in->rank, .et = in->et};
    s.d[0] = n;
    for (int d = 1; d < in->rank; d++)
        s.d[d] = in->d[d];
    int o = rp_new(g, &s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    rp_def(g, o);
    ap_buf_printf(&g->body, "\"stablehlo.gather\"(%s, ", rp_use(g, i));
    ap_buf_printf(&g->body, "%s) {dimension_numbers = #stablehlo.gather<", rp_use(g, idx));
    if (in->rank > 1) {
        ap_buf_puts(&g->body, "offset_dims = [");
        for (int d = 1; d < in->rank; d++)
            ap_buf_printf(&g->body, "%s%d", d > 1 ? ", " : "", d);
        ap_buf_puts(&g->body, "], ");
    }
    ap_buf_puts(&g->body, "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, "
                          "slice_sizes = array<i64: 1");
    for (int d = 1; d < in->rank; d++)
        ap_buf_printf(&g->body, ", %lld", (long long)in->d[d]);
    ap_buf_printf(&g->body, ">, indices_are_sorted = false} : (%s, %s) -> %s\n", rp_type(in, t1), rp_type(&is, t2),
                  rp_type(&s, t3));
    return o;
}

/* A scatter adding rows (dim 0) at constant indices, repeats among them. */
static inline int rp_op_scatter(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    rp_shape in = g->v[i].s;
    int n = rp_range(g, 1, 4);
    rp_shape us = in;
    us.d[0] = n;
    int u = rp_operand(g, &us);
    if (u < 0)
        return -1;
    double bound = g->v[i].bound + n * g->v[u].bound;
    if (bound > rp_limit(in.et))
        return -2;
    rp_shape is = {.rank = 2, .d = {n, 1}, .et = RP_I32};
    int idx = rp_new(g, &is, 16, false);
    if (idx < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_def(g, idx);
    ap_buf_puts(&g->body, "stablehlo.constant dense<[");
    for (int k = 0; k < n; k++)
        ap_buf_printf(&g->body, "%s[%d]", k ? ", " : "", rp_range(g, 0, (int)in.d[0] - 1));
    ap_buf_printf(&g->body, "]> : %s\n", rp_type(&is, t1));
    int o = rp_new(g, &in, bound, true);
    if (o < 0)
        return -1;
    rp_def(g, o);
    ap_buf_printf(&g->body, "\"stablehlo.scatter\"(%s, ", rp_use(g, i));
    ap_buf_printf(&g->body, "%s, ", rp_use(g, idx));
    ap_buf_printf(&g->body, "%s) ", rp_use(g, u));
    rp_region(g, in.et, "add");
    ap_buf_puts(&g->body, " {scatter_dimension_numbers = #stablehlo.scatter<");
    if (in.rank > 1) {
        ap_buf_puts(&g->body, "update_window_dims = [");
        for (int d = 1; d < in.rank; d++)
            ap_buf_printf(&g->body, "%s%d", d > 1 ? ", " : "", d);
        ap_buf_puts(&g->body, "], ");
    }
    ap_buf_printf(&g->body,
                  "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
                  "indices_are_sorted = false, unique_indices = false} : (%s, %s, %s) -> %s\n",
                  rp_type(&in, t1), rp_type(&is, t2), rp_type(&us, t3), rp_type(&in, t1));
    rp_sum(g, o, n);
    return o;
}

/* A while loop of 1-3 trips carrying a counter and a value, the body
 * updating it with an earlier value of the function (captured) of its
 * shape: x = tanh(x) + c or max(x, c). */
static inline int rp_op_while(rp_gen *g)
{
    int x = rp_pick(g, rp_ok_float, NULL);
    if (x < 0)
        return -2;
    rp_shape s = g->v[x].s;
    int c = rp_operand(g, &s);
    if (c < 0)
        return -1;
    int z = rp_int_const(g, 0);
    if (z < 0)
        return -1;
    rp_shape cs = {.rank = 0, .et = RP_I32};
    int trips = rp_range(g, 1, 3);
    bool add = rp_chance(g, 50);
    double bound = add ? 1 + g->v[c].bound : (g->v[x].bound > g->v[c].bound ? g->v[x].bound : g->v[c].bound);
    int o = rp_new(g, &cs, 0, false);
    if (o < 0)
        return -1;
    char t[64], ti[64];
    rp_type(&s, t);
    rp_type(&cs, ti);
    g->v[o].s = s;
    g->v[o].bound = add ? (g->v[x].bound > bound ? g->v[x].bound : bound) : bound;
    g->v[o].pickable = true;
    /* the loop's results are %vN#0 (the counter) and %vN#1; the value is
     * named %vN#1 */
    ap_buf_printf(&g->body, "  %s:2 = stablehlo.while(%%wi = %s, ", g->v[o].name, rp_use(g, z));
    ap_buf_printf(&g->body, "%%wx = %s) : %s, %s\n", rp_use(g, x), ti, t);
    ap_buf_printf(&g->body,
                  "   cond {\n    %%wn = stablehlo.constant dense<%d> : tensor<i32>\n"
                  "    %%wp = stablehlo.compare LT, %%wi, %%wn : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
                  "    stablehlo.return %%wp : tensor<i1>\n  } do {\n",
                  trips);
    if (add)
        ap_buf_printf(&g->body, "    %%wt = stablehlo.tanh %%wx : %s\n    %%wy = stablehlo.add %%wt, %s : %s\n", t,
                      rp_use(g, c), t);
    else
        ap_buf_printf(&g->body, "    %%wy = stablehlo.maximum %%wx, %s : %s\n", rp_use(g, c), t);
    ap_buf_printf(&g->body,
                  "    %%w1 = stablehlo.constant dense<1> : tensor<i32>\n"
                  "    %%wj = stablehlo.add %%wi, %%w1 : tensor<i32>\n"
                  "    stablehlo.return %%wj, %%wy : tensor<i32>, %s\n  }\n",
                  t);
    snprintf(g->v[o].name + strlen(g->v[o].name), sizeof g->v[o].name - strlen(g->v[o].name), "#1");
    if (add)
        g->v[o].integral = false;
    return o;
}

/* clamp between scalar bounds. */
static inline int rp_op_clamp(rp_gen *g)
{
    int i = rp_pick(g, NULL, NULL);
    rp_elem e = g->v[i].s.et;
    int lo = rp_scalar(g, e, e == RP_I32 ? "1" : "-0.5", 1), hi = rp_scalar(g, e, e == RP_I32 ? "5" : "0.75", 5);
    if (lo < 0 || hi < 0)
        return -1;
    const rp_shape *s = &g->v[i].s;
    int o = rp_new(g, s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64];
    rp_shape cs = {.rank = 0, .et = e};
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.clamp %s, ", rp_use(g, lo));
    ap_buf_printf(&g->body, "%s, ", rp_use(g, i));
    ap_buf_printf(&g->body, "%s : (%s, %s, %s) -> %s\n", rp_use(g, hi), rp_type(&cs, t1), rp_type(s, t2),
                  rp_type(&cs, t1), rp_type(s, t2));
    return o;
}

/* sort of one value along a dim, ascending or descending. */
static inline int rp_op_sort(rp_gen *g)
{
    int i = rp_pick(g, rp_ok_ranked, NULL);
    if (i < 0)
        return -2;
    const rp_shape *s = &g->v[i].s;
    const char *et = rp_elem_names[s->et];
    int o = rp_new(g, s, g->v[i].bound, true);
    if (o < 0)
        return -1;
    char t[64];
    rp_def(g, o);
    ap_buf_printf(&g->body,
                  "\"stablehlo.sort\"(%s) ({\n  ^bb0(%%sa: tensor<%s>, %%sb: tensor<%s>):\n"
                  "    %%sc = stablehlo.compare %s, %%sa, %%sb : (tensor<%s>, tensor<%s>) -> tensor<i1>\n"
                  "    stablehlo.return %%sc : tensor<i1>\n  }) {dimension = %d : i64, is_stable = %s} : (%s) -> %s\n",
                  rp_use(g, i), et, et, rp_chance(g, 50) ? "LT" : "GT", et, et, rp_below(g, s->rank),
                  rp_chance(g, 50) ? "true" : "false", rp_type(s, t), rp_type(s, t));
    return o;
}

/* A 1-D convolution of a rank-3 float value, its dims labelled b, 0, f in
 * any order, with stride, padding, dilations and feature groups. */
static inline int rp_op_conv(rp_gen *g)
{
    rp_shape want = {.rank = 3, .et = rp_chance(g, 80) ? RP_F32 : RP_BF16};
    for (int d = 0; d < 3; d++)
        want.d[d] = rp_dim(g);
    int x = rp_operand(g, &want);
    if (x < 0)
        return -1;
    const rp_shape *s = &g->v[x].s;
    char il[3] = {'b', '0', 'f'}, kl[3] = {'0', 'i', 'o'}, ol[3] = {'b', '0', 'f'};
    for (int d = 2; d > 0; d--) {
        int j = rp_below(g, d + 1);
        char c = il[d];
        il[d] = il[j], il[j] = c;
        j = rp_below(g, d + 1), c = kl[d], kl[d] = kl[j], kl[j] = c;
        j = rp_below(g, d + 1), c = ol[d], ol[d] = ol[j], ol[j] = c;
    }
    int64_t nb = 0, sp = 0, nf = 0;
    for (int d = 0; d < 3; d++) {
        if (il[d] == 'b')
            nb = s->d[d];
        else if (il[d] == '0')
            sp = s->d[d];
        else
            nf = s->d[d];
    }
    int64_t G = 1;
    if (rp_chance(g, 30)) /* feature groups: a divisor of the features */
        for (int64_t k = nf; k >= 1; k--)
            if (nf % k == 0 && rp_chance(g, 40)) {
                G = k;
                break;
            }
    int64_t o_f = rp_range(g, 1, 3) * G, ki = nf / G, kw = rp_range(g, 1, 3), st = rp_chance(g, 70) ? 1 : 2;
    int64_t lo = rp_chance(g, 60) ? 0 : 1, hi = rp_chance(g, 60) ? 0 : 1, ld = rp_chance(g, 85) ? 1 : 2;
    int64_t rd = rp_chance(g, 80) ? 1 : 2;
    int64_t padded = (sp - 1) * ld + 1 + lo + hi, eff = (kw - 1) * rd + 1;
    if (padded < eff)
        kw = 1, rd = 1, eff = 1;
    int64_t osp = (padded - eff) / st + 1;
    rp_shape ks = {.rank = 3, .et = s->et}, out = {.rank = 3, .et = s->et};
    for (int d = 0; d < 3; d++) {
        ks.d[d] = kl[d] == '0' ? kw : kl[d] == 'i' ? ki : o_f;
        out.d[d] = ol[d] == 'b' ? nb : ol[d] == '0' ? osp : o_f;
    }
    int64_t terms = kw * ki;
    int k = rp_operand(g, &ks);
    if (k < 0)
        return -1;
    double bound = g->v[x].bound * g->v[k].bound * (double)terms;
    if (bound > rp_limit(out.et) || terms > rp_max_terms(out.et))
        return -2;
    int o = rp_new(g, &out, bound, true);
    if (o < 0)
        return -1;
    char t1[64], t2[64], t3[64];
    rp_def(g, o);
    ap_buf_printf(&g->body, "stablehlo.convolution(%s, ", rp_use(g, x));
    ap_buf_printf(&g->body,
                  "%s) dim_numbers = [%c, %c, %c]x[%c, %c, %c]->[%c, %c, %c], window = {stride = [%lld], "
                  "pad = [[%lld, %lld]], lhs_dilate = [%lld], rhs_dilate = [%lld]} {batch_group_count = 1 : i64, "
                  "feature_group_count = %lld : i64} : (%s, %s) -> %s\n",
                  rp_use(g, k), il[0], il[1], il[2], kl[0], kl[1], kl[2], ol[0], ol[1], ol[2], (long long)st,
                  (long long)lo, (long long)hi, (long long)ld, (long long)rd, (long long)G, rp_type(s, t1),
                  rp_type(&g->v[k].s, t2), rp_type(&out, t3));
    rp_sum(g, o, terms);
    return o;
}

/* A case of 2-3 branches on a constant index (out of range too: the last
 * branch) or an i32 scalar argument, each branch computing a value of x's
 * shape from x and a value it captures. */
static inline int rp_op_case(rp_gen *g)
{
    int x = rp_pick(g, rp_ok_float, NULL);
    if (x < 0)
        return -2;
    rp_shape s = g->v[x].s, is = {.rank = 0, .et = RP_I32};
    int c = rp_operand(g, &s);
    if (c < 0)
        return -1;
    int idx = -1;
    for (int a = 0; a < g->n && idx < 0; a++)
        if (g->v[a].is_arg && rp_same(&g->v[a].s, &is) && rp_chance(g, 50))
            idx = a;
    if (idx < 0 && (idx = rp_int_const(g, rp_range(g, -1, 3))) < 0)
        return -1;
    int n = rp_range(g, 2, 3);
    double bound = g->v[x].bound + g->v[c].bound;
    bound = bound > 1 + g->v[c].bound ? bound : 1 + g->v[c].bound;
    if (bound > rp_limit(s.et))
        return -2;
    int o = rp_new(g, &s, bound, true);
    if (o < 0)
        return -1;
    char t[64], ti[64];
    rp_type(&s, t);
    rp_def(g, o);
    ap_buf_printf(&g->body, "\"stablehlo.case\"(%s) (", rp_use(g, idx));
    const char *xn = rp_use(g, x), *cn = rp_use(g, c);
    for (int b = 0; b < n; b++) {
        ap_buf_printf(&g->body, "%s{\n", b ? ", " : "");
        switch (rp_below(g, 3)) {
        case 0: ap_buf_printf(&g->body, "    %%cy = stablehlo.tanh %s : %s\n", xn, t); break;
        case 1: ap_buf_printf(&g->body, "    %%cy = stablehlo.add %s, %s : %s\n", xn, cn, t); break;
        default: ap_buf_printf(&g->body, "    %%cy = stablehlo.maximum %s, %s : %s\n", cn, xn, t); break;
        }
        ap_buf_printf(&g->body, "    stablehlo.return %%cy : %s\n  }", t);
    }
    ap_buf_printf(&g->body, ") : (%s) -> %s\n", rp_type(&is, ti), t);
    g->v[o].integral = false;
    return o;
}

static inline int rp_op(rp_gen *g, int kind)
{
    switch (kind) {
    case RP_UNARY: return rp_op_unary(g);
    case RP_BINARY: return rp_op_binary(g);
    case RP_SELECT: return rp_op_select(g);
    case RP_BROADCAST: return rp_op_broadcast(g);
    case RP_RESHAPE: return rp_op_reshape(g);
    case RP_TRANSPOSE: return rp_op_transpose(g);
    case RP_DOT: return rp_op_dot(g);
    case RP_REDUCE: return rp_op_reduce(g);
    case RP_CONCAT: return rp_op_concat(g);
    case RP_SLICE: return rp_op_slice(g);
    case RP_PAD: return rp_op_pad(g);
    case RP_IOTA: return rp_op_iota(g);
    case RP_CONVERT: return rp_op_convert(g);
    case RP_REVERSE: return rp_op_reverse(g);
    case RP_DSLICE: return rp_op_dslice(g);
    case RP_DUS: return rp_op_dus(g);
    case RP_RWINDOW: return rp_op_rwindow(g);
    case RP_GATHER: return rp_op_gather(g);
    case RP_SCATTER: return rp_op_scatter(g);
    case RP_WHILE: return rp_op_while(g);
    case RP_CLAMP: return rp_op_clamp(g);
    case RP_SORT: return rp_op_sort(g);
    case RP_CONV: return rp_op_conv(g);
    default: return rp_op_case(g);
    }
}

/* ---------------------------------------------------------------- program */

/* The program of a seed, as StableHLO text into *out (initialized by the
 * caller; appended to).  g is scratch (large: keep it off small stacks);
 * afterwards g->counts says which ops it holds. */
static inline void rp_program(uint64_t seed, rp_gen *g, ap_buf *out)
{
    memset(g, 0, sizeof *g);
    g->rng = 0x9E3779B97F4A7C15ull * (seed + 1) ^ 0xD1B54A32D192ED03ull;
    rp_next(&g->rng);
    ap_buf_init(&g->body);
    int n_args = rp_range(g, 2, 5);
    for (int a = 0; a < n_args; a++) {
        rp_shape s = {.rank = rp_below(g, RP_MAX_RANK + 1), .et = rp_draw_elem(g)};
        for (int d = 0; d < s.rank; d++)
            s.d[d] = rp_dim(g);
        int i = rp_new(g, &s, s.et == RP_I32 ? 8 : 1, true);
        snprintf(g->v[i].name, sizeof g->v[i].name, "%%a%d", a);
        g->v[i].is_arg = true;
        g->v[i].integral = s.et == RP_I32;
    }
    /* two kinds of op drawn five times as often: programs of mostly pads
     * and slices, or of dots and reshapes, as well as of everything */
    int weight[RP__KINDS], total = 0;
    for (int k = 0; k < RP__KINDS; k++)
        weight[k] = rp_kind_weight[k];
    for (int j = 0; j < 2; j++)
        weight[rp_below(g, RP__KINDS)] *= 5;
    for (int k = 0; k < RP__KINDS; k++)
        total += weight[k];
    int want = rp_range(g, 3, 25);
    for (int tries = 0; g->n_ops < want && tries < 200 && g->n < RP_MAX_VALUES - 40; tries++) {
        int w = rp_below(g, total), kind = 0;
        while (w >= weight[kind])
            w -= weight[kind++];
        int o = rp_op(g, kind);
        if (o >= 0) {
            g->n_ops++;
            g->counts[kind]++;
        }
    }
    /* 1-3 results: op results, those nothing uses first */
    int res[3], n_res = 0, want_res = rp_range(g, 1, 3);
    for (int pass = 0; pass < 2 && n_res < want_res; pass++)
        for (int i = g->n - 1; i >= 0 && n_res < want_res; i--) {
            const rp_value *v = &g->v[i];
            if (!v->pickable || v->is_arg || (pass == 0 && v->uses) || (pass == 1 && !v->uses))
                continue;
            res[n_res++] = i;
        }
    if (n_res == 0) /* no op made it: return an argument */
        res[n_res++] = 0;
    if (n_res < 3 && rp_chance(g, 10)) /* an argument returned as it came */
        res[n_res++] = rp_below(g, n_args);
    if (n_res < 3 && rp_chance(g, 10)) /* a value returned twice */
        res[n_res] = res[rp_below(g, n_res)], n_res++;
    char t[64];
    ap_buf_puts(out, "func.func @main(");
    for (int i = 0; i < n_args; i++)
        ap_buf_printf(out, "%s%s: %s", i ? ", " : "", g->v[i].name, rp_type(&g->v[i].s, t));
    ap_buf_puts(out, ") -> (");
    for (int k = 0; k < n_res; k++)
        ap_buf_printf(out, "%s%s", k ? ", " : "", rp_type(&g->v[res[k]].s, t));
    ap_buf_puts(out, ") {\n");
    if (g->body.len)
        ap_buf_put(out, g->body.data, g->body.len);
    ap_buf_puts(out, "  return ");
    for (int k = 0; k < n_res; k++)
        ap_buf_printf(out, "%s%s", k ? ", " : "", g->v[res[k]].name);
    ap_buf_puts(out, " : ");
    for (int k = 0; k < n_res; k++)
        ap_buf_printf(out, "%s%s", k ? ", " : "", rp_type(&g->v[res[k]].s, t));
    ap_buf_puts(out, "\n}\n");
    ap_buf_free(&g->body);
}

#endif
