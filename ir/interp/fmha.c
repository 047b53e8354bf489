/*
 * fmha.c - the reference kernel of cuDNN's fused attention as JAX emits it
 * (ir_fmha_get in ir.h describes the two custom calls): attention computed
 * from its definition in double, one row at a time, and rounded once into
 * the result types.  The forward gives out = softmax(scale q k^T) v and the
 * row statistics (log-sum-exp); the backward recomputes each row's
 * probabilities from those statistics, as flash attention does:
 *   P = exp(scale q k^T - lse), dV = P^T dO, dP = dO V^T,
 *   dS = P * (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q,
 * with dK and dV of a key/value head summed over its group of query heads.
 * Shapes come from the operands (so a partitioned program's local shapes
 * are what count), never from the backend_config's copy of them.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <math.h>

/* The sizes of one call, checked against its operands and results. */
typedef struct fmha_dims {
    int64_t b, s, t, h, kv, d;
} fmha_dims;

static bool dims_are(const ir_tensor *x, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    if (x->kind != IR_TENSOR_ARRAY || x->rank != rank)
        return false;
    int64_t want[4] = {d0, d1, d2, d3};
    for (int i = 0; i < rank; i++)
        if (x->dims[i] != want[i])
            return false;
    return true;
}

static bool is_float(const ir_tensor *x) { return x->kind == IR_TENSOR_ARRAY && ir__ip_class((ir_elem)x->elem) == IP_F; }

/* q [b, s, h, d], k and v [b, t, kv, d] with kv dividing h. */
static int qkv_dims(ip_ctx *c, const ir_tensor *const *in, fmha_dims *z)
{
    const ir_tensor *q = in[0], *k = in[1], *v = in[2];
    if (!is_float(q) || !is_float(k) || !is_float(v) || q->rank != 4 || k->rank != 4)
        return ir__ip_fail(c, AP_ETYPE, "q, k and v must be rank-4 float arrays [batch, seq, heads, head_dim]");
    *z = (fmha_dims){.b = q->dims[0], .s = q->dims[1], .h = q->dims[2], .d = q->dims[3], .t = k->dims[1],
                     .kv = k->dims[2]};
    if (!dims_are(k, 4, z->b, z->t, z->kv, z->d) || !dims_are(v, 4, z->b, z->t, z->kv, z->d))
        return ir__ip_fail(c, AP_ETYPE, "k and v must be [%" PRId64 ", t, kv, %" PRId64 "] alike", z->b, z->d);
    if (z->kv < 1 || z->h % z->kv)
        return ir__ip_fail(c, AP_ETYPE, "%" PRId64 " key/value heads do not divide %" PRId64 " query heads", z->kv,
                           z->h);
    return 0;
}

/* Element (i0, i1, i2, i3) of a rank-4 array. */
static inline double at4(const ir_tensor *x, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    int64_t i = ((i0 * x->dims[1] + i1) * x->dims[2] + i2) * x->dims[3] + i3;
    return ip_ldf((ir_elem)x->elem, x->data + (size_t)i * ip_eb((ir_elem)x->elem));
}

static inline void set_f(ir_tensor *x, int64_t i, double v)
{
    ip_stf((ir_elem)x->elem, x->data + (size_t)i * ip_eb((ir_elem)x->elem), v);
}

/* The row of scaled scores of query (b, i, head n) against keys 0..last-1
 * of its key/value head, into sc; returns their maximum. */
static double scores(const ir_tensor *q, const ir_tensor *k, const fmha_dims *z, double scale, int64_t b, int64_t i,
                     int64_t n, int64_t last, double *sc)
{
    int64_t kn = n / (z->h / z->kv);
    double m = -INFINITY;
    for (int64_t j = 0; j < last; j++) {
        double acc = 0;
        for (int64_t e = 0; e < z->d; e++)
            acc += at4(q, b, i, n, e) * at4(k, b, j, kn, e);
        sc[j] = scale * acc;
        m = fmax(m, sc[j]);
    }
    return m;
}

static int fmha_forward(ip_ctx *c, const ir_fmha *f, const ir_tensor *const *in, ir_tensor **out)
{
    fmha_dims z;
    int rc = qkv_dims(c, in, &z);
    if (rc < 0)
        return rc;
    if (c->op->n_operands != 3 || c->op->n_results != 3)
        return ir__ip_fail(c, AP_EINVALID, "expected 3 operands (q, k, v) and 3 results (out, stats, workspace)");
    for (uint32_t r = 0; r < 3; r++)
        if ((rc = ir__ip_new_result(c, r, &out[r])) < 0)
            return rc;
    if (!dims_are(out[0], 4, z.b, z.h, z.s, z.d) || !is_float(out[0]) || !dims_are(out[1], 3, z.b, z.h, z.s, 0) ||
        !is_float(out[1]))
        return ir__ip_fail(c, AP_ETYPE, "results must be out [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                           "] and stats [%" PRId64 ", %" PRId64 ", %" PRId64 "] (floats)",
                           z.b, z.h, z.s, z.d, z.b, z.h, z.s);
    const ir_tensor *q = in[0], *k = in[1], *v = in[2];
    double *sc = ap_malloc(sizeof *sc * (size_t)(z.t ? z.t : 1)), *acc = ap_malloc(sizeof *acc * (size_t)z.d + 1);
    if (!sc || !acc) {
        ap_free(sc);
        ap_free(acc);
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    }
    int64_t grp = z.h / z.kv;
    for (int64_t b = 0; b < z.b; b++)
        for (int64_t n = 0; n < z.h; n++)
            for (int64_t i = 0; i < z.s; i++) {
                int64_t last = f->causal ? (i + 1 < z.t ? i + 1 : z.t) : z.t;
                double m = scores(q, k, &z, f->scale, b, i, n, last, sc), sum = 0;
                for (int64_t e = 0; e < z.d; e++)
                    acc[e] = 0;
                for (int64_t j = 0; j < last; j++) {
                    double p = exp(sc[j] - m);
                    sum += p;
                    for (int64_t e = 0; e < z.d; e++)
                        acc[e] += p * at4(v, b, j, n / grp, e);
                }
                int64_t row = (b * z.h + n) * z.s + i;
                for (int64_t e = 0; e < z.d; e++)
                    set_f(out[0], row * z.d + e, last ? acc[e] / sum : 0);
                set_f(out[1], row, last ? m + log(sum) : -INFINITY);
            }
    ap_free(sc);
    ap_free(acc);
    return 0;
}

static int fmha_backward(ip_ctx *c, const ir_fmha *f, const ir_tensor *const *in, ir_tensor **out)
{
    fmha_dims z;
    int rc = qkv_dims(c, in, &z);
    if (rc < 0)
        return rc;
    if (c->op->n_operands != 6 || c->op->n_results != 4)
        return ir__ip_fail(c, AP_EINVALID, "expected 6 operands (q, k, v, stats, d_out, out) and 4 results (dq, dk, "
                                           "dv, workspace)");
    const ir_tensor *q = in[0], *k = in[1], *v = in[2], *st = in[3], *dout = in[4], *o = in[5];
    if (!dims_are(st, 3, z.b, z.h, z.s, 0) || !is_float(st) || !dims_are(dout, 4, z.b, z.s, z.h, z.d) ||
        !is_float(dout) || !dims_are(o, 4, z.b, z.s, z.h, z.d) || !is_float(o))
        return ir__ip_fail(c, AP_ETYPE, "stats must be [%" PRId64 ", %" PRId64 ", %" PRId64 "], d_out and out like q",
                           z.b, z.h, z.s);
    for (uint32_t r = 0; r < 4; r++)
        if ((rc = ir__ip_new_result(c, r, &out[r])) < 0)
            return rc;
    if (!dims_are(out[0], 4, z.b, z.h, z.s, z.d) || !dims_are(out[1], 4, z.b, z.kv, z.t, z.d) ||
        !dims_are(out[2], 4, z.b, z.kv, z.t, z.d) || !is_float(out[0]) || !is_float(out[1]) || !is_float(out[2]))
        return ir__ip_fail(c, AP_ETYPE, "results must be dq [b, h, s, d], dk and dv [b, kv, t, d] (floats)");
    size_t nq = (size_t)(z.b * z.h * z.s * z.d), nk = (size_t)(z.b * z.kv * z.t * z.d);
    double *dq = ap_calloc(nq + 1, sizeof *dq), *dk = ap_calloc(nk + 1, sizeof *dk), *dv = ap_calloc(nk + 1, sizeof *dv),
           *sc = ap_malloc(sizeof *sc * (size_t)(z.t ? z.t : 1));
    if (!dq || !dk || !dv || !sc) {
        rc = ir__ip_fail(c, AP_ENOMEM, "out of memory");
        goto done;
    }
    int64_t grp = z.h / z.kv;
    for (int64_t b = 0; b < z.b; b++)
        for (int64_t n = 0; n < z.h; n++)
            for (int64_t i = 0; i < z.s; i++) {
                int64_t last = f->causal ? (i + 1 < z.t ? i + 1 : z.t) : z.t, kn = n / grp;
                scores(q, k, &z, f->scale, b, i, n, last, sc);
                double lse = ip_ldf((ir_elem)st->elem,
                                    st->data + (size_t)((b * z.h + n) * z.s + i) * ip_eb((ir_elem)st->elem));
                double di = 0;
                for (int64_t e = 0; e < z.d; e++)
                    di += at4(dout, b, i, n, e) * at4(o, b, i, n, e);
                double *dqrow = dq + ((b * z.h + n) * z.s + i) * z.d;
                for (int64_t j = 0; j < last; j++) {
                    double p = exp(sc[j] - lse), dp = 0;
                    for (int64_t e = 0; e < z.d; e++)
                        dp += at4(dout, b, i, n, e) * at4(v, b, j, kn, e);
                    double ds = p * (dp - di);
                    int64_t kvrow = ((b * z.kv + kn) * z.t + j) * z.d;
                    for (int64_t e = 0; e < z.d; e++) {
                        dv[kvrow + e] += p * at4(dout, b, i, n, e);
                        dk[kvrow + e] += f->scale * ds * at4(q, b, i, n, e);
                        dqrow[e] += f->scale * ds * at4(k, b, j, kn, e);
                    }
                }
            }
    for (size_t i = 0; i < nq; i++)
        set_f(out[0], (int64_t)i, dq[i]);
    for (size_t i = 0; i < nk; i++) {
        set_f(out[1], (int64_t)i, dk[i]);
        set_f(out[2], (int64_t)i, dv[i]);
    }
done:
    ap_free(dq);
    ap_free(dk);
    ap_free(dv);
    ap_free(sc);
    return rc;
}

int ir__ip_k_fmha(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    ir_fmha f;
    ap_error e2;
    int rc = ir_fmha_get(c->op, &f, &e2);
    if (rc < 0)
        return ir__ip_fail(c, rc, "%s", e2.msg);
    return f.kind == IR_FMHA_FWD ? fmha_forward(c, &f, in, out) : fmha_backward(c, &f, in, out);
}
