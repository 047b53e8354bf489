/*
 * nn.c - the computing kernels of the interpreter: dot and
 * dot_general, convolution (groups, padding, strides, dilations, window
 * reversal), reduce, reduce_window, select_and_scatter, sort, the batch
 * norms, triangular_solve, cholesky and fft.
 *
 * Sums of products (dot, convolution, batch norm statistics) accumulate in
 * double (complex double, or wrapping 64-bit integers) and round once into
 * the result type: StableHLO leaves the accumulation order and precision to
 * the implementation.  Reductions with a region apply the body step by step
 * in row-major order of the reduced elements, rounding to the accumulator
 * type at each step as the body would.  ir_interp_opts.split_sums selects
 * another valid order for the noise run of `autopart check`: float dots
 * and convolutions in rounded chunks, sums and products reversed.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static bool in_list(int64_t v, const int64_t *l, int n)
{
    for (int i = 0; i < n; i++)
        if (l[i] == v)
            return true;
    return false;
}

/* The whole tensor as doubles (floats) or complex doubles, for inner loops
 * that would otherwise decode every element many times. */
static int as_doubles(ip_ctx *c, const ir_tensor *t, double **out)
{
    *out = ap_malloc(sizeof **out * (size_t)(t->numel ? t->numel : 1));
    if (!*out)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    size_t eb = ip_eb((ir_elem)t->elem);
    for (int64_t i = 0; i < t->numel; i++)
        (*out)[i] = ip_ldf((ir_elem)t->elem, t->data + (size_t)i * eb);
    return 0;
}

static int as_complex(ip_ctx *c, const ir_tensor *t, double complex **out)
{
    *out = ap_malloc(sizeof **out * (size_t)(t->numel ? t->numel : 1));
    if (!*out)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    size_t eb = ip_eb((ir_elem)t->elem);
    ip_class k = ir__ip_class((ir_elem)t->elem);
    for (int64_t i = 0; i < t->numel; i++) {
        const uint8_t *p = t->data + (size_t)i * eb;
        (*out)[i] = k == IP_C ? ip_ldc((ir_elem)t->elem, p) : ip_cplx(ip_ldf((ir_elem)t->elem, p), 0.0);
    }
    return 0;
}

/* ============================================================ dot_general */

/* Rows pack_rows packs side by side when they are the operand's columns. */
#define PACK_ROWS 16

/* Rows of one operand of a float dot, packed contiguously in doubles: row
 * (batch, free) holds the nk contracting elements in order. */
static double *pack_rows(const ir_tensor *t, const int64_t *batch, int nb, const int64_t *free_dims, int nf,
                         const int64_t *koff, int64_t nk, int64_t *n_rows)
{
    int64_t st[IR_MAX_RANK], dims[IR_MAX_RANK], rows = 1;
    int nd = nb + nf;
    ip_strides(t->rank, t->dims, st);
    for (int i = 0; i < nd; i++)
        rows *= (dims[i] = t->dims[i < nb ? batch[i] : free_dims[i - nb]]);
    *n_rows = rows;
    double *p = ap_malloc(sizeof *p * (size_t)(rows * nk > 0 ? rows * nk : 1));
    if (!p || rows * nk == 0)
        return p;
    ir_elem e = (ir_elem)t->elem;
    size_t eb = ip_eb(e);
    int64_t *base = ap_malloc(sizeof *base * (size_t)rows);
    if (!base) {
        ap_free(p);
        return NULL;
    }
    int64_t idx[IR_MAX_RANK] = {0}, row = 0;
    do {
        int64_t b = 0;
        for (int i = 0; i < nd; i++)
            b += idx[i] * st[i < nb ? batch[i] : free_dims[i - nb]];
        base[row++] = b;
    } while (ip_next(nd, dims, idx));
    /* contracting elements contiguous: a row at a time.  Else (the
     * operand's rows are its columns) PACK_ROWS rows side by side per
     * contracting index: neighbouring rows' elements share cache lines,
     * which a row at a time would read again for every row. */
    bool contiguous = nk < 2 || koff[1] - koff[0] == 1;
    int64_t block = contiguous ? 1 : PACK_ROWS;
    const float *f = e == IR_E_F32 ? (const float *)(const void *)t->data : NULL;
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        int64_t r1 = r0 + block < rows ? r0 + block : rows;
        for (int64_t k = 0; k < nk; k++) {
            if (f) {
                for (int64_t r = r0; r < r1; r++)
                    p[r * nk + k] = f[base[r] + koff[k]];
            } else {
                for (int64_t r = r0; r < r1; r++)
                    p[r * nk + k] = ip_ldf(e, t->data + (size_t)(base[r] + koff[k]) * eb);
            }
        }
    }
    ap_free(base);
    return p;
}

/* x rounded to element type e (identity for f64). */
static double round_to(ir_elem e, double x)
{
    uint8_t b[16];
    ip_stf(e, b, x);
    return ip_ldf(e, b);
}

/* The split_sums order (ir_interp_opts): chunk sums part[0..n), each
 * rounded to e, added last to first with a rounding at each step. */
static double split_total(ir_elem e, const double *part, int64_t n)
{
    double acc = n ? round_to(e, part[n - 1]) : 0;
    for (int64_t q = n - 2; q >= 0; q--)
        acc = round_to(e, acc + round_to(e, part[q]));
    return acc;
}

/* Two doubles side by side: lane q of an accumulator is the partial sum
 * of the terms k = q mod 2 (of a pair of them), each lane's multiply and
 * add the IEEE operation a scalar one is.  GCC and Clang both have them. */
typedef double v2d __attribute__((vector_size(16)));

static inline v2d ld2(const double *p)
{
    v2d v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* sum_k a[k] w[k] in four partial sums (k mod 4; the last nk mod 4 terms
 * into the first), added (s0 + s1) + (s2 + s3): the order every float
 * dot of the interpreter sums in.  s01 holds s0 and s1, s23 s2 and s3. */
static double dot1(const double *a, const double *w, int64_t nk)
{
    v2d s01 = {0, 0}, s23 = {0, 0};
    int64_t k = 0;
    for (; k + 4 <= nk; k += 4) {
        s01 += ld2(a + k) * ld2(w + k);
        s23 += ld2(a + k + 2) * ld2(w + k + 2);
    }
    for (; k < nk; k++)
        s01[0] += a[k] * w[k];
    return (s01[0] + s01[1]) + (s23[0] + s23[1]);
}

/* dot1 of a with the four rows of w (nk apart) at once, stored to out[0 ..
 * 3] (yb bytes apart, element type ye): each the same sum in the same
 * order as dot1's, with four times the independent additions in flight
 * and a read once for the four. */
static void dot4(const double *a, const double *w, int64_t nk, ir_elem ye, uint8_t *out, size_t yb)
{
    const double *w0 = w, *w1 = w + nk, *w2 = w + 2 * nk, *w3 = w + 3 * nk;
    v2d p01 = {0, 0}, p23 = {0, 0}, q01 = {0, 0}, q23 = {0, 0};
    v2d r01 = {0, 0}, r23 = {0, 0}, t01 = {0, 0}, t23 = {0, 0};
    int64_t k = 0;
    for (; k + 4 <= nk; k += 4) {
        v2d x01 = ld2(a + k), x23 = ld2(a + k + 2);
        p01 += x01 * ld2(w0 + k), p23 += x23 * ld2(w0 + k + 2);
        q01 += x01 * ld2(w1 + k), q23 += x23 * ld2(w1 + k + 2);
        r01 += x01 * ld2(w2 + k), r23 += x23 * ld2(w2 + k + 2);
        t01 += x01 * ld2(w3 + k), t23 += x23 * ld2(w3 + k + 2);
    }
    for (; k < nk; k++) {
        p01[0] += a[k] * w0[k];
        q01[0] += a[k] * w1[k];
        r01[0] += a[k] * w2[k];
        t01[0] += a[k] * w3[k];
    }
    ip_stf(ye, out, (p01[0] + p01[1]) + (p23[0] + p23[1]));
    ip_stf(ye, out + yb, (q01[0] + q01[1]) + (q23[0] + q23[1]));
    ip_stf(ye, out + 2 * yb, (r01[0] + r01[1]) + (r23[0] + r23[1]));
    ip_stf(ye, out + 3 * yb, (t01[0] + t01[1]) + (t23[0] + t23[1]));
}

/* Bytes of R's packed rows a tile holds: well inside a core's L2. */
#define DOT_TILE_BYTES (256 * 1024)

/* Multiply-adds below which a dot_general or a convolution runs on one
 * thread (a thread's start costs about what ~10^5 of them do). */
#define THREAD_MACS (1 << 22)

/* How many threads a kernel of `macs` multiply-adds whose outputs are cut
 * into at most `pieces` ranges runs on: the run's threads option, 1 below
 * THREAD_MACS, at most one per piece and IR_INTERP_MAX_THREADS. */
static int64_t kernel_threads(const ip_ctx *c, double macs, int64_t pieces)
{
    int64_t nt = c->run->opts.threads > 1 ? c->run->opts.threads : 1;
    if (macs < THREAD_MACS)
        nt = 1;
    if (nt > pieces)
        nt = pieces;
    if (nt > IR_INTERP_MAX_THREADS)
        nt = IR_INTERP_MAX_THREADS;
    return nt < 1 ? 1 : nt;
}

/* Runs fn on jobs 0 .. n - 1 (n <= IR_INTERP_MAX_THREADS, `size` bytes
 * apart): job 0 on this thread, the others on threads of their own, or on
 * this one when no thread is to be had.  Each job writes only its own
 * range of the outputs, so what they compute does not depend on n. */
static void run_jobs(void *(*fn)(void *), void *jobs, size_t size, int64_t n)
{
    pthread_t tid[IR_INTERP_MAX_THREADS];
    bool started[IR_INTERP_MAX_THREADS] = {false};
    char *job = jobs;
    for (int64_t t = 1; t < n; t++)
        started[t] = pthread_create(&tid[t], NULL, fn, job + (size_t)t * size) == 0;
    fn(job);
    for (int64_t t = 1; t < n; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            fn(job + (size_t)t * size);
    }
}

/* One thread's rows q0 <= b ni + i < q1 of a packed dot (dot_packed). */
typedef struct dot_job {
    const double *L, *R;
    ir_tensor *y;
    int64_t ni, nj, nk, q0, q1;
} dot_job;

static void *dot_rows(void *arg)
{
    const dot_job *jb = arg;
    int64_t ni = jb->ni, nj = jb->nj, nk = jb->nk;
    ir_elem ye = (ir_elem)jb->y->elem;
    size_t yb = ip_eb(ye);
    /* the rows of R in tiles that stay in cache while every row of L
     * meets them (R read once from memory, not once per row of L); each
     * output is the same sum in the same order whatever the tiling */
    int64_t tile = nk > 0 ? DOT_TILE_BYTES / (nk * (int64_t)sizeof(double)) : nj;
    if (tile < 1)
        tile = 1;
    for (int64_t b = ni ? jb->q0 / ni : 0; ni && b * ni < jb->q1; b++) {
        int64_t i0 = jb->q0 > b * ni ? jb->q0 - b * ni : 0, i1 = jb->q1 - b * ni < ni ? jb->q1 - b * ni : ni;
        for (int64_t j0 = 0; j0 < nj; j0 += tile) {
            int64_t j1 = j0 + tile < nj ? j0 + tile : nj;
            for (int64_t i = i0; i < i1; i++) {
                const double *a = jb->L + (b * ni + i) * nk;
                uint8_t *yrow = jb->y->data + (size_t)(b * ni + i) * (size_t)nj * yb;
                int64_t j = j0;
                for (; j + 4 <= j1; j += 4)
                    dot4(a, jb->R + (b * nj + j) * nk, nk, ye, yrow + (size_t)j * yb, yb);
                for (; j < j1; j++)
                    ip_stf(ye, yrow + (size_t)j * yb, dot1(a, jb->R + (b * nj + j) * nk, nk));
            }
        }
    }
    return NULL;
}

/* A float dot_general on packed rows: out[b, i, j] = sum_k L[b, i, k] R[b, j, k]
 * with four partial sums (a fixed order, so results are reproducible), or
 * in the run's split_sums order. */
static int dot_packed(ip_ctx *c, const ir_tensor *l, const ir_tensor *r, const ir_dot_dims *dd, const int64_t *lfree,
                      int nlf, const int64_t *rfree, int nrf, const int64_t *loff, const int64_t *roff, int64_t nk,
                      ir_tensor *y)
{
    int64_t nl, nr, nbat = 1;
    for (int i = 0; i < dd->n_batch; i++)
        nbat *= l->dims[dd->lhs_batch[i]];
    double *L = pack_rows(l, dd->lhs_batch, dd->n_batch, lfree, nlf, loff, nk, &nl);
    double *R = pack_rows(r, dd->rhs_batch, dd->n_batch, rfree, nrf, roff, nk, &nr);
    if (!L || !R) {
        ap_free(L);
        ap_free(R);
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    }
    int64_t ni = nbat ? nl / nbat : 0, nj = nbat ? nr / nbat : 0;
    ir_elem ye = (ir_elem)y->elem;
    size_t yb = ip_eb(ye);
    int64_t split = c->run->opts.split_sums;
    if (split > 1) {
        int64_t chunk = (nk + split - 1) / split, nparts = chunk ? (nk + chunk - 1) / chunk : 0;
        double part[IR_INTERP_MAX_SPLIT];
        if (nparts > IR_INTERP_MAX_SPLIT) {
            ap_free(L);
            ap_free(R);
            return ir__ip_fail(c, AP_ELIMIT, "split_sums above %d", IR_INTERP_MAX_SPLIT);
        }
        for (int64_t b = 0; b < nbat; b++)
            for (int64_t i = 0; i < ni; i++)
                for (int64_t j = 0; j < nj; j++) {
                    const double *a = L + (b * ni + i) * nk, *w = R + (b * nj + j) * nk;
                    for (int64_t q = 0; q < nparts; q++) {
                        double s = 0;
                        for (int64_t k = q * chunk; k < nk && k < (q + 1) * chunk; k++)
                            s += a[k] * w[k];
                        part[q] = s;
                    }
                    ip_stf(ye, y->data + (size_t)((b * ni + i) * nj + j) * yb, split_total(ye, part, nparts));
                }
        ap_free(L);
        ap_free(R);
        return 0;
    }
    /* rows of L (b, i) cut among threads, as the convolution's positions
     * are (conv_float): each output is computed whole by one thread */
    int64_t rows = nbat * ni, nt = kernel_threads(c, (double)rows * (double)nj * (double)nk, rows);
    dot_job jobs[IR_INTERP_MAX_THREADS];
    for (int64_t t = 0; t < nt; t++)
        jobs[t] = (dot_job){.L = L, .R = R, .y = y, .ni = ni, .nj = nj, .nk = nk, .q0 = rows * t / nt,
                            .q1 = rows * (t + 1) / nt};
    run_jobs(dot_rows, jobs, sizeof *jobs, nt);
    ap_free(L);
    ap_free(R);
    return 0;
}

int ir__ip_k_dot(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *l = in[0], *r = in[1];
    ir_dot_dims dd;
    if (ir_dot_dims_get(c->op, &dd) < 0)
        return ir__ip_fail(c, AP_EINVALID, "has unreadable dot dimension numbers");
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    ip_class kl = ir__ip_class((ir_elem)l->elem), kr = ir__ip_class((ir_elem)r->elem),
             ky = ir__ip_class((ir_elem)y->elem);
    bool ints = (kl == IP_S || kl == IP_U || kl == IP_B) && (kr == IP_S || kr == IP_U || kr == IP_B);
    if (!(kl == kr || ints) || (ints && (ky == IP_F || ky == IP_C)) ||
        (!ints && ky != kl && !(kl == IP_F && ky == IP_C)))
        return ir__ip_fail(c, AP_EUNSUPPORTED, "mixes %s and %s into %s", ir_elem_name((ir_elem)l->elem),
                           ir_elem_name((ir_elem)r->elem), ir_elem_name((ir_elem)y->elem));
    /* dims: batch, contracting, free, with sizes checked pairwise */
    int nb = dd.n_batch, nc = dd.n_contract;
    for (int i = 0; i < nb + nc; i++) {
        int64_t ld = i < nb ? dd.lhs_batch[i] : dd.lhs_contract[i - nb];
        int64_t rd = i < nb ? dd.rhs_batch[i] : dd.rhs_contract[i - nb];
        if (ld < 0 || ld >= l->rank || rd < 0 || rd >= r->rank || l->dims[ld] != r->dims[rd])
            return ir__ip_fail(c, AP_EINVALID, "batch/contracting dims do not pair up in range with equal sizes");
    }
    int64_t lfree[IR_MAX_RANK], rfree[IR_MAX_RANK];
    int nlf = 0, nrf = 0;
    for (int d = 0; d < l->rank; d++) {
        int hits = in_list(d, dd.lhs_batch, nb) + in_list(d, dd.lhs_contract, nc);
        for (int i = 0; i < nb; i++)
            for (int j = i + 1; j < nb; j++)
                if (dd.lhs_batch[i] == dd.lhs_batch[j])
                    hits = 2;
        if (hits > 1)
            return ir__ip_fail(c, AP_EINVALID, "lhs dim %d is used twice", d);
        if (!hits)
            lfree[nlf++] = d;
    }
    for (int d = 0; d < r->rank; d++) {
        int hits = in_list(d, dd.rhs_batch, nb) + in_list(d, dd.rhs_contract, nc);
        if (hits > 1)
            return ir__ip_fail(c, AP_EINVALID, "rhs dim %d is used twice", d);
        if (!hits)
            rfree[nrf++] = d;
    }
    if (l->rank != nb + nc + nlf || r->rank != nb + nc + nrf || y->rank != nb + nlf + nrf)
        return ir__ip_fail(c, AP_EINVALID, "dimension numbers repeat a dim");
    for (int i = 0; i < y->rank; i++) {
        int64_t want = i < nb         ? l->dims[dd.lhs_batch[i]]
                       : i < nb + nlf ? l->dims[lfree[i - nb]]
                                      : r->dims[rfree[i - nb - nlf]];
        if (y->dims[i] != want)
            return ir__ip_fail(c, AP_ETYPE, "result dim %d should have size %" PRId64, i, want);
    }
    int64_t ls[IR_MAX_RANK], rs[IR_MAX_RANK];
    ip_strides(l->rank, l->dims, ls);
    ip_strides(r->rank, r->dims, rs);
    /* offsets of every contracting position in lhs and rhs */
    int64_t kdims[IR_MAX_RANK], nk = 1;
    for (int i = 0; i < nc; i++)
        nk *= (kdims[i] = l->dims[dd.lhs_contract[i]]);
    int64_t *loff = ap_malloc(sizeof *loff * (size_t)(nk ? nk : 1)),
            *roff = ap_malloc(sizeof *roff * (size_t)(nk ? nk : 1));
    double complex *lz = NULL, *rz = NULL;
    if (!loff || !roff) {
        rc = ir__ip_fail(c, AP_ENOMEM, "out of memory");
        goto done;
    }
    if (nk) {
        int64_t ki[IR_MAX_RANK] = {0}, k = 0;
        do {
            int64_t lo = 0, ro = 0;
            for (int i = 0; i < nc; i++) {
                lo += ki[i] * ls[dd.lhs_contract[i]];
                ro += ki[i] * rs[dd.rhs_contract[i]];
            }
            loff[k] = lo;
            roff[k++] = ro;
        } while (ip_next(nc, kdims, ki));
    }
    bool cplx = kl == IP_C || ky == IP_C;
    if (y->numel == 0)
        goto done;
    if (!ints && !cplx) {
        rc = dot_packed(c, l, r, &dd, lfree, nlf, rfree, nrf, loff, roff, nk, y);
        goto done;
    }
    if (cplx && ((rc = as_complex(c, l, &lz)) < 0 || (rc = as_complex(c, r, &rz)) < 0))
        goto done;
    ir_elem ye = (ir_elem)y->elem, le = (ir_elem)l->elem, re = (ir_elem)r->elem;
    size_t yb = ip_eb(ye), lb = ip_eb(le), rb = ip_eb(re);
    int64_t yi[IR_MAX_RANK] = {0}, n = 0;
    do {
        int64_t lbase = 0, rbase = 0;
        for (int i = 0; i < nb; i++) {
            lbase += yi[i] * ls[dd.lhs_batch[i]];
            rbase += yi[i] * rs[dd.rhs_batch[i]];
        }
        for (int i = 0; i < nlf; i++)
            lbase += yi[nb + i] * ls[lfree[i]];
        for (int i = 0; i < nrf; i++)
            rbase += yi[nb + nlf + i] * rs[rfree[i]];
        uint8_t *q = y->data + (size_t)n * yb;
        if (cplx) {
            double complex s = 0;
            for (int64_t k = 0; k < nk; k++)
                s += lz[lbase + loff[k]] * rz[rbase + roff[k]];
            ip_stc(ye, q, s);
        } else if (ky == IP_B) {
            uint8_t s = 0;
            for (int64_t k = 0; k < nk && !s; k++)
                s = ip_ldi(le, l->data + (size_t)(lbase + loff[k]) * lb) &&
                    ip_ldi(re, r->data + (size_t)(rbase + roff[k]) * rb);
            q[0] = s;
        } else {
            uint64_t s = 0;
            for (int64_t k = 0; k < nk; k++)
                s += (uint64_t)ip_ldi(le, l->data + (size_t)(lbase + loff[k]) * lb) *
                     (uint64_t)ip_ldi(re, r->data + (size_t)(rbase + roff[k]) * rb);
            ip_sti(ye, q, (int64_t)s);
        }
        n++;
    } while (ip_next(y->rank, y->dims, yi));
done:
    ap_free(loff);
    ap_free(roff);
    ap_free(lz);
    ap_free(rz);
    return rc;
}

/* ============================================================ convolution */

/* Window offsets conv_float works out at once: this many terms' input
 * offsets over a chunk of positions (a chunk holds at least one). */
#define CONV_CHUNK_OFFSETS 16384
#define CONV_CHUNK_MAX 64

/* Two positions' sums of eight output features (the same window offsets
 * on the input, a packed kernel block [w][ci][8]): sixteen sums in
 * registers, each one term after another in the reference order (window
 * offset, then input feature).  x0, x1: the positions' packed input;
 * lo0, lo1: each window offset's input offset, negative on padding (the
 * same offsets are padding for both). */
static void conv_2x8(const double *x0, const double *x1, const int64_t *lo0, const int64_t *lo1, const double *kb,
                     int64_t W, int64_t Ci, double *out)
{
    v2d a0 = {0, 0}, a1 = {0, 0}, a2 = {0, 0}, a3 = {0, 0}, b0 = {0, 0}, b1 = {0, 0}, b2 = {0, 0}, b3 = {0, 0};
    for (int64_t w = 0; w < W; w++) {
        if (lo0[w] < 0)
            continue;
        const double *p = x0 + lo0[w], *q = x1 + lo1[w], *kr = kb + w * Ci * 8;
        for (int64_t ci = 0; ci < Ci; ci++, kr += 8) {
            v2d k0 = ld2(kr), k1 = ld2(kr + 2), k2 = ld2(kr + 4), k3 = ld2(kr + 6);
            v2d u = {p[ci], p[ci]}, v = {q[ci], q[ci]};
            a0 = a0 + u * k0;
            a1 = a1 + u * k1;
            a2 = a2 + u * k2;
            a3 = a3 + u * k3;
            b0 = b0 + v * k0;
            b1 = b1 + v * k1;
            b2 = b2 + v * k2;
            b3 = b3 + v * k3;
        }
    }
    memcpy(out, &a0, sizeof a0);
    memcpy(out + 2, &a1, sizeof a1);
    memcpy(out + 4, &a2, sizeof a2);
    memcpy(out + 6, &a3, sizeof a3);
    memcpy(out + 8, &b0, sizeof b0);
    memcpy(out + 10, &b1, sizeof b1);
    memcpy(out + 12, &b2, sizeof b2);
    memcpy(out + 14, &b3, sizeof b3);
}

/* One position's sums of eight output features (conv_2x8 for one). */
static void conv_1x8(const double *x0, const int64_t *lo0, const double *kb, int64_t W, int64_t Ci, double *out)
{
    v2d a0 = {0, 0}, a1 = {0, 0}, a2 = {0, 0}, a3 = {0, 0};
    for (int64_t w = 0; w < W; w++) {
        if (lo0[w] < 0)
            continue;
        const double *p = x0 + lo0[w], *kr = kb + w * Ci * 8;
        for (int64_t ci = 0; ci < Ci; ci++, kr += 8) {
            v2d u = {p[ci], p[ci]};
            a0 = a0 + u * ld2(kr);
            a1 = a1 + u * ld2(kr + 2);
            a2 = a2 + u * ld2(kr + 4);
            a3 = a3 + u * ld2(kr + 6);
        }
    }
    memcpy(out, &a0, sizeof a0);
    memcpy(out + 2, &a1, sizeof a1);
    memcpy(out + 4, &a2, sizeof a2);
    memcpy(out + 6, &a3, sizeof a3);
}

/* Two positions' sums of one output feature of a block of F (kernel
 * block [w][ci][F]), the positions side by side in the lanes. */
static void conv_2x1(const double *x0, const double *x1, const int64_t *lo0, const int64_t *lo1, const double *kb,
                     int64_t W, int64_t Ci, int64_t F, double *out)
{
    v2d a = {0, 0};
    for (int64_t w = 0; w < W; w++) {
        if (lo0[w] < 0)
            continue;
        const double *p = x0 + lo0[w], *q = x1 + lo1[w], *kr = kb + w * Ci * F;
        for (int64_t ci = 0; ci < Ci; ci++, kr += F) {
            v2d u = {p[ci], q[ci]}, kk = {kr[0], kr[0]};
            a = a + u * kk;
        }
    }
    memcpy(out, &a, sizeof a);
}

/* One position's sum of one output feature (conv_2x1 for one). */
static double conv_1x1(const double *x0, const int64_t *lo0, const double *kb, int64_t W, int64_t Ci, int64_t F)
{
    double s = 0;
    for (int64_t w = 0; w < W; w++) {
        if (lo0[w] < 0)
            continue;
        const double *p = x0 + lo0[w], *kr = kb + w * Ci * F;
        for (int64_t ci = 0; ci < Ci; ci++, kr += F)
            s += p[ci] * kr[0];
    }
    return s;
}

/* What conv_float's workers share, read-only but for their disjoint
 * slices of y. */
typedef struct conv_plan {
    const ir_conv_dims *cd;
    const int64_t *ksz, *strides, *pad, *ldil, *rdil;
    const ir_tensor *l;
    ir_tensor *y;
    const double *xp, *kp; /* packed input and kernel */
    int64_t fgc, bgc, G, NO, nbg, Ci, C, S, W, T, chunk;
    int64_t sst[IR_MAX_RANK], ys[IR_MAX_RANK], pdims[IR_MAX_RANK];
} conv_plan;

/* One worker's positions [p0, p1) (row-major over pdims), in chunks. */
typedef struct conv_job {
    const conv_plan *pl;
    int64_t p0, p1;
    int rc; /* 0, or AP_ENOMEM */
} conv_job;

static void *conv_positions(void *arg)
{
    conv_job *jb = arg;
    const conv_plan *pl = jb->pl;
    const ir_conv_dims *cd = pl->cd;
    const ir_tensor *l = pl->l;
    ir_tensor *y = pl->y;
    int ns = cd->n_spatial;
    int64_t W = pl->W, C = pl->C, S = pl->S, Ci = pl->Ci, T = pl->T, NO = pl->NO, chunk = pl->chunk;
    int64_t ysf = pl->ys[cd->out_feature];
    ir_elem ye = (ir_elem)y->elem;
    size_t yb = ip_eb(ye);
    int64_t *loffs = ap_malloc(sizeof *loffs * (size_t)(chunk * (W > 0 ? W : 1)));
    int64_t *pos = ap_malloc(sizeof *pos * (size_t)(2 * chunk));
    bool *same = ap_malloc(sizeof *same * (size_t)chunk);
    if (!loffs || !pos || !same) {
        jb->rc = AP_ENOMEM;
        goto out;
    }
    int64_t yi[IR_MAX_RANK] = {0}, wi[IR_MAX_RANK], rest = jb->p0;
    for (int j = y->rank - 1; j >= 0; j--) { /* p0 unravelled */
        yi[j] = rest % pl->pdims[j];
        rest /= pl->pdims[j];
    }
    for (int64_t p_at = jb->p0; p_at < jb->p1;) {
        /* a chunk: each position's output offset (feature 0), batch index
         * and input offsets (-1 on padding) */
        int64_t np = 0;
        for (; np < chunk && p_at < jb->p1; np++, p_at++, ip_next(y->rank, pl->pdims, yi)) {
            int64_t yoff = 0;
            for (int i = 0; i < y->rank; i++)
                yoff += yi[i] * pl->ys[i];
            pos[2 * np] = yoff;
            pos[2 * np + 1] = yi[cd->out_batch];
            int64_t *lo = loffs + np * W;
            memset(wi, 0, sizeof wi);
            for (int64_t w = 0; w < W; w++, ip_next(ns, pl->ksz, wi)) {
                int64_t off = 0;
                bool inside = true;
                for (int i = 0; i < ns && inside; i++) {
                    int64_t p = yi[cd->out_spatial[i]] * pl->strides[i] + wi[i] * pl->rdil[i] - pl->pad[2 * i];
                    inside = p >= 0 && p % pl->ldil[i] == 0 && p / pl->ldil[i] < l->dims[cd->in_spatial[i]];
                    off += inside ? p / pl->ldil[i] * pl->sst[i] : 0;
                }
                lo[w] = inside ? off * C : -1;
            }
        }
        for (int64_t p = 0; p + 1 < np; p++) {
            const int64_t *a = loffs + p * W, *b = a + W;
            int64_t w = 0;
            while (w < W && (a[w] < 0) == (b[w] < 0))
                w++;
            same[p] = w == W;
        }
        if (np)
            same[np - 1] = false;
        for (int64_t g = 0; g < pl->G; g++) {
            int64_t nbase = pl->bgc > 1 ? g * pl->nbg : 0;
            const double *xg = pl->xp + (pl->fgc > 1 ? g * Ci : 0);
            for (int64_t b = 0; b < NO; b += 8) {
                int64_t F = NO - b < 8 ? NO - b : 8, o0 = g * NO + b;
                const double *kb = pl->kp + o0 * T;
                for (int64_t p = 0; p < np;) {
                    const double *x0 = xg + (nbase + pos[2 * p + 1]) * S * C;
                    const int64_t *lo0 = loffs + p * W;
                    uint8_t *y0 = y->data + (size_t)(pos[2 * p] + o0 * ysf) * yb;
                    double acc[16];
                    if (same[p]) { /* two positions */
                        const double *x1 = xg + (nbase + pos[2 * p + 3]) * S * C;
                        uint8_t *y1 = y->data + (size_t)(pos[2 * p + 2] + o0 * ysf) * yb;
                        if (F == 8) {
                            conv_2x8(x0, x1, lo0, lo0 + W, kb, W, Ci, acc);
                            for (int q = 0; q < 8; q++) {
                                ip_stf(ye, y0 + (size_t)(q * ysf) * yb, acc[q]);
                                ip_stf(ye, y1 + (size_t)(q * ysf) * yb, acc[8 + q]);
                            }
                        } else {
                            for (int64_t f = 0; f < F; f++) {
                                conv_2x1(x0, x1, lo0, lo0 + W, kb + f, W, Ci, F, acc);
                                ip_stf(ye, y0 + (size_t)(f * ysf) * yb, acc[0]);
                                ip_stf(ye, y1 + (size_t)(f * ysf) * yb, acc[1]);
                            }
                        }
                        p += 2;
                    } else {
                        if (F == 8) {
                            conv_1x8(x0, lo0, kb, W, Ci, acc);
                            for (int q = 0; q < 8; q++)
                                ip_stf(ye, y0 + (size_t)(q * ysf) * yb, acc[q]);
                        } else {
                            for (int64_t f = 0; f < F; f++)
                                ip_stf(ye, y0 + (size_t)(f * ysf) * yb, conv_1x1(x0, lo0, kb + f, W, Ci, F));
                        }
                        p++;
                    }
                }
            }
        }
    }
out:
    ap_free(loffs);
    ap_free(pos);
    ap_free(same);
    return NULL;
}

/* A float convolution (feature or batch groups, padding, strides,
 * dilations, window reversal), in the order of the general loop of
 * ir__ip_k_convolution: y[.., of] = sum over the window offsets w
 * (row-major) inside the input, then the input features ci of of's group,
 * of x[w, ci] k[w, ci, of], one term after another.  Each group is a
 * convolution of its own (fgc: its slice of input features; bgc: its
 * slice of the batch).  The input is packed [batch][spatial][feature]
 * in doubles, so a window offset's input features are contiguous
 * whatever the layout; the kernel in blocks of eight output features,
 * each [w][ci][8] contiguous.  Positions (the output's indices but the
 * feature) go in chunks whose window offsets are worked out once for
 * every group and block; two neighbours with the same offsets on padding
 * share the kernel's loads (conv_2x8).  Every sum is the reference's,
 * term for term: only which sums run side by side changes.
 *
 * With ir_interp_opts.threads above 1 the positions are cut into that many
 * contiguous ranges, one thread each: every output is still computed
 * whole by one thread in the same order, so the result does not depend on
 * the number of threads. */
static int conv_float(ip_ctx *c, const ir_tensor *l, const ir_tensor *k, ir_tensor *y, const ir_conv_dims *cd,
                      const int64_t *ksz, const int64_t *strides, const int64_t *pad, const int64_t *ldil,
                      const int64_t *rdil, const int64_t *rev, int64_t fgc, int64_t bgc)
{
    conv_plan pl = {.cd = cd, .ksz = ksz, .strides = strides, .pad = pad, .ldil = ldil, .rdil = rdil, .l = l,
                    .y = y, .fgc = fgc, .bgc = bgc};
    int ns = cd->n_spatial;
    int64_t N = l->dims[cd->in_batch], C = l->dims[cd->in_feature], Ci = k->dims[cd->kernel_in],
            O = k->dims[cd->kernel_out], W = 1, S = 1;
    for (int i = 0; i < ns; i++) {
        W *= ksz[i];
        S *= l->dims[cd->in_spatial[i]];
    }
    int64_t G = fgc > 1 ? fgc : bgc, NO = O / G, T = W * Ci;
    int64_t chunk = W > 0 ? CONV_CHUNK_OFFSETS / W : CONV_CHUNK_MAX;
    if (chunk < 1)
        chunk = 1;
    if (chunk > CONV_CHUNK_MAX)
        chunk = CONV_CHUNK_MAX;
    pl.G = G, pl.NO = NO, pl.nbg = N / bgc, pl.Ci = Ci, pl.C = C, pl.S = S, pl.W = W, pl.T = T, pl.chunk = chunk;
    double *xp = ap_malloc(sizeof *xp * (size_t)(l->numel > 0 ? l->numel : 1));
    double *kp = ap_malloc(sizeof *kp * (size_t)(k->numel > 0 ? k->numel : 1));
    int64_t *koffs = ap_malloc(sizeof *koffs * (size_t)(W > 0 ? W : 1));
    if (!xp || !kp || !koffs) {
        ap_free(xp);
        ap_free(kp);
        ap_free(koffs);
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    }
    /* the input packed: ps[d] is dim d's stride there */
    int64_t ps[IR_MAX_RANK], ks[IR_MAX_RANK];
    for (int64_t i = ns - 1, s = 1; i >= 0; i--) {
        pl.sst[i] = s;
        s *= l->dims[cd->in_spatial[i]];
    }
    ps[cd->in_batch] = S * C;
    ps[cd->in_feature] = 1;
    for (int i = 0; i < ns; i++)
        ps[cd->in_spatial[i]] = pl.sst[i] * C;
    ir_elem le = (ir_elem)l->elem, ke = (ir_elem)k->elem;
    size_t leb = ip_eb(le), keb = ip_eb(ke);
    int r = l->rank;
    int64_t inner = l->dims[r - 1], li[IR_MAX_RANK] = {0};
    for (int64_t i = 0; i + inner <= l->numel && inner > 0; i += inner) {
        int64_t d = 0;
        for (int q = 0; q < r - 1; q++)
            d += li[q] * ps[q];
        for (int64_t j = 0; j < inner; j++)
            xp[d + j * ps[r - 1]] = ip_ldf(le, l->data + (size_t)(i + j) * leb);
        ip_next(r - 1, l->dims, li);
    }
    /* the kernel: group g's block b (F features) at (g NO + 8 b) T, [w][ci][F] */
    ip_strides(k->rank, k->dims, ks);
    ip_strides(y->rank, y->dims, pl.ys);
    int64_t wi[IR_MAX_RANK] = {0};
    for (int64_t w = 0; w < W; w++) {
        int64_t koff = 0;
        for (int i = 0; i < ns; i++)
            koff += (rev[i] ? ksz[i] - 1 - wi[i] : wi[i]) * ks[cd->kernel_spatial[i]];
        koffs[w] = koff;
        ip_next(ns, ksz, wi);
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t b = 0; b < NO; b += 8) {
            int64_t F = NO - b < 8 ? NO - b : 8, o0 = g * NO + b;
            double *kb = kp + o0 * T;
            for (int64_t w = 0; w < W; w++)
                for (int64_t ci = 0; ci < Ci; ci++)
                    for (int64_t f = 0; f < F; f++)
                        kb[(w * Ci + ci) * F + f] = ip_ldf(
                            ke, k->data + (size_t)(koffs[w] + ci * ks[cd->kernel_in] + (o0 + f) * ks[cd->kernel_out]) *
                                              keb);
        }
    pl.xp = xp, pl.kp = kp;
    /* the positions: every index of y with the output feature at 0 */
    int64_t npos = 1;
    for (int i = 0; i < y->rank; i++)
        npos *= (pl.pdims[i] = i == cd->out_feature ? 1 : y->dims[i]);
    /* threads: contiguous ranges of positions, at least a chunk each */
    int64_t nt = kernel_threads(c, (double)y->numel * (double)T, (npos + chunk - 1) / chunk);
    conv_job jobs[IR_INTERP_MAX_THREADS];
    for (int64_t t = 0; t < nt; t++)
        jobs[t] = (conv_job){.pl = &pl, .p0 = npos * t / nt, .p1 = npos * (t + 1) / nt, .rc = 0};
    run_jobs(conv_positions, jobs, sizeof *jobs, nt);
    int rc = 0;
    for (int64_t t = 0; t < nt; t++)
        if (jobs[t].rc)
            rc = ir__ip_fail(c, AP_ENOMEM, "out of memory");
    ap_free(xp);
    ap_free(kp);
    ap_free(koffs);
    return rc;
}

/* Whether (a, b, sp[0..ns)) names each of the ns + 2 dims once, as each
 * of a convolution's three layouts must (StableHLO's C13-C21: "expects
 * kernel dimension-numbers to be unique").  Repeated, one dim goes
 * unvisited and another is walked twice: the kernel read past what it
 * holds. */
static bool conv_layout_ok(int64_t a, int64_t b, const int64_t *sp, int ns)
{
    bool seen[IR_MAX_RANK] = {false};
    int64_t d[IR_MAX_RANK];
    int n = 0;
    d[n++] = a;
    d[n++] = b;
    for (int i = 0; i < ns && n < IR_MAX_RANK; i++)
        d[n++] = sp[i];
    if (n != ns + 2)
        return false;
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || d[i] >= n || seen[d[i]])
            return false;
        seen[d[i]] = true;
    }
    return true;
}

int ir__ip_k_convolution(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *l = in[0], *k = in[1];
    ir_conv_dims cd;
    if (ir_conv_dims_get(c->op, &cd) < 0)
        return ir__ip_fail(c, AP_EINVALID, "has unreadable dimension numbers");
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    int ns = cd.n_spatial;
    if (l->rank != ns + 2 || k->rank != ns + 2 || y->rank != ns + 2)
        return ir__ip_fail(c, AP_EINVALID, "operands and result need rank %d", ns + 2);
    if (!conv_layout_ok(cd.in_batch, cd.in_feature, cd.in_spatial, ns) ||
        !conv_layout_ok(cd.kernel_in, cd.kernel_out, cd.kernel_spatial, ns) ||
        !conv_layout_ok(cd.out_batch, cd.out_feature, cd.out_spatial, ns))
        return ir__ip_fail(c, AP_EINVALID,
                           "dimension numbers must name each dim of the input, of the kernel and of the output once");
    ip_class kl = ir__ip_class((ir_elem)l->elem), kk = ir__ip_class((ir_elem)k->elem),
             ky = ir__ip_class((ir_elem)y->elem);
    bool ints = (kl == IP_S || kl == IP_U) && (kk == IP_S || kk == IP_U) && (ky == IP_S || ky == IP_U);
    if (!ints && (kl != kk || kl != ky || (kl != IP_F && kl != IP_C)))
        return ir__ip_fail(c, AP_EUNSUPPORTED, "mixes %s and %s into %s", ir_elem_name((ir_elem)l->elem),
                           ir_elem_name((ir_elem)k->elem), ir_elem_name((ir_elem)y->elem));
    int64_t strides[IR_MAX_RANK], pad[2 * IR_MAX_RANK], ldil[IR_MAX_RANK], rdil[IR_MAX_RANK], rev[IR_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        strides[i] = ldil[i] = rdil[i] = 1;
        pad[2 * i] = pad[2 * i + 1] = rev[i] = 0;
    }
    int n;
    if ((n = ir__ip_ints(c, "window_strides", strides, IR_MAX_RANK, ns)) < 0 ||
        (n != ns && (rc = ir__ip_fail(c, AP_EINVALID, "window_strides needs %d entries", ns)) < 0))
        return n < 0 ? n : rc;
    if ((n = ir__ip_ints(c, "padding", pad, 2 * IR_MAX_RANK, 2 * ns)) < 0 ||
        (n != 2 * ns && (rc = ir__ip_fail(c, AP_EINVALID, "padding needs %d pairs", ns)) < 0))
        return n < 0 ? n : rc;
    if ((n = ir__ip_ints(c, "lhs_dilation", ldil, IR_MAX_RANK, ns)) < 0 ||
        (n != ns && (rc = ir__ip_fail(c, AP_EINVALID, "lhs_dilation needs %d entries", ns)) < 0))
        return n < 0 ? n : rc;
    if ((n = ir__ip_ints(c, "rhs_dilation", rdil, IR_MAX_RANK, ns)) < 0 ||
        (n != ns && (rc = ir__ip_fail(c, AP_EINVALID, "rhs_dilation needs %d entries", ns)) < 0))
        return n < 0 ? n : rc;
    if ((n = ir__ip_ints(c, "window_reversal", rev, IR_MAX_RANK, ns)) < 0 ||
        (n != ns && (rc = ir__ip_fail(c, AP_EINVALID, "window_reversal needs %d entries", ns)) < 0))
        return n < 0 ? n : rc;
    int64_t fgc = 1, bgc = 1;
    ir_attr *a;
    if ((a = ir_op_attr(c->op, "feature_group_count")) && a->kind == IR_A_INT)
        fgc = a->u.i;
    if ((a = ir_op_attr(c->op, "batch_group_count")) && a->kind == IR_A_INT)
        bgc = a->u.i;
    int64_t N = l->dims[cd.in_batch], C = l->dims[cd.in_feature], Ci = k->dims[cd.kernel_in],
            O = k->dims[cd.kernel_out];
    if (fgc < 1 || bgc < 1 || (fgc > 1 && bgc > 1) || C != Ci * fgc || O % fgc || O % bgc || N % bgc ||
        y->dims[cd.out_batch] != N / bgc || y->dims[cd.out_feature] != O)
        return ir__ip_fail(
            c, AP_EINVALID,
            "feature/batch group counts (%" PRId64 ", %" PRId64 ") do not fit the feature and batch sizes", fgc, bgc);
    int64_t ksz[IR_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        int64_t insz = l->dims[cd.in_spatial[i]];
        ksz[i] = k->dims[cd.kernel_spatial[i]];
        if (strides[i] < 1 || ldil[i] < 1 || rdil[i] < 1)
            return ir__ip_fail(c, AP_EINVALID, "strides and dilations must be positive");
        int64_t padded = (insz > 0 ? (insz - 1) * ldil[i] + 1 : 0) + pad[2 * i] + pad[2 * i + 1];
        int64_t win = ksz[i] > 0 ? (ksz[i] - 1) * rdil[i] + 1 : 0;
        int64_t o = padded < win ? 0 : (padded - win) / strides[i] + 1;
        if (y->dims[cd.out_spatial[i]] != o)
            return ir__ip_fail(c, AP_ETYPE, "output spatial dim %d should have size %" PRId64, i, o);
    }
    int64_t ls[IR_MAX_RANK], ks[IR_MAX_RANK];
    ip_strides(l->rank, l->dims, ls);
    ip_strides(k->rank, k->dims, ks);
    double *lf = NULL, *kf = NULL;
    double complex *lz = NULL, *kz = NULL;
    bool cplx = kl == IP_C;
    if (y->numel == 0)
        goto done;
    if (!cplx && !ints && !(c->run->opts.split_sums > 1)) {
        rc = conv_float(c, l, k, y, &cd, ksz, strides, pad, ldil, rdil, rev, fgc, bgc);
        goto done;
    }
    if (!cplx && !ints && ((rc = as_doubles(c, l, &lf)) < 0 || (rc = as_doubles(c, k, &kf)) < 0))
        goto done;
    if (cplx && ((rc = as_complex(c, l, &lz)) < 0 || (rc = as_complex(c, k, &kz)) < 0))
        goto done;
    ir_elem ye = (ir_elem)y->elem;
    size_t yb = ip_eb(ye);
    int64_t ofg = O / fgc, obg = O / bgc, nbg = N / bgc;
    int64_t yi[IR_MAX_RANK] = {0}, idx = 0;
    /* split_sums: chunks of the input features (what a split of the
     * contracting dim over devices sums apart) */
    int64_t split = !cplx && !ints ? c->run->opts.split_sums : 0;
    int64_t chunk = split > 1 ? (Ci + split - 1) / split : 0, nparts = chunk ? (Ci + chunk - 1) / chunk : 0;
    double part[IR_INTERP_MAX_SPLIT];
    if (nparts > IR_INTERP_MAX_SPLIT) {
        rc = ir__ip_fail(c, AP_ELIMIT, "split_sums above %d", IR_INTERP_MAX_SPLIT);
        goto done;
    }
    do {
        for (int64_t q = 0; q < nparts; q++)
            part[q] = 0;
        int64_t ob = yi[cd.out_batch], of = yi[cd.out_feature];
        int64_t fg = of / ofg, bg = of / obg;
        int64_t nin = bg * nbg + ob;
        double s = 0;
        double complex sz = 0;
        uint64_t si = 0;
        int64_t wi[IR_MAX_RANK] = {0};
        bool any = true;
        for (int i = 0; i < ns; i++)
            if (ksz[i] == 0)
                any = false;
        while (any) {
            /* the input position under this window offset, if not padding */
            int64_t loff = nin * ls[cd.in_batch], koff = of * ks[cd.kernel_out];
            bool inside = true;
            for (int i = 0; i < ns && inside; i++) {
                int64_t p = yi[cd.out_spatial[i]] * strides[i] + wi[i] * rdil[i] - pad[2 * i];
                if (p < 0 || p % ldil[i]) {
                    inside = false;
                    break;
                }
                int64_t q = p / ldil[i];
                if (q >= l->dims[cd.in_spatial[i]]) {
                    inside = false;
                    break;
                }
                loff += q * ls[cd.in_spatial[i]];
                koff += (rev[i] ? ksz[i] - 1 - wi[i] : wi[i]) * ks[cd.kernel_spatial[i]];
            }
            if (inside) {
                for (int64_t ci = 0; ci < Ci; ci++) {
                    int64_t lo = loff + (fg * Ci + ci) * ls[cd.in_feature], ko = koff + ci * ks[cd.kernel_in];
                    if (cplx)
                        sz += lz[lo] * kz[ko];
                    else if (ints)
                        si += (uint64_t)ip_index_at(l, lo) * (uint64_t)ip_index_at(k, ko);
                    else if (nparts)
                        part[ci / chunk] += lf[lo] * kf[ko];
                    else
                        s += lf[lo] * kf[ko];
                }
            }
            any = ip_next(ns, ksz, wi);
        }
        if (cplx)
            ip_stc(ye, y->data + (size_t)idx * yb, sz);
        else if (ints)
            ip_sti(ye, y->data + (size_t)idx * yb, (int64_t)si);
        else
            ip_stf(ye, y->data + (size_t)idx * yb, nparts ? split_total(ye, part, nparts) : s);
        idx++;
    } while (ip_next(y->rank, y->dims, yi));
done:
    ap_free(lf);
    ap_free(kf);
    ap_free(lz);
    ap_free(kz);
    return rc;
}

/* ================================================================ reduce */

int ir__ip_k_reduce(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    uint32_t n = op->n_operands / 2;
    if (op->n_operands != 2 * n || n == 0 || op->n_results != n || op->n_regions != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs N inputs, N init values, N results and a body");
    if (n > IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "has %u inputs; at most %d are supported", n, IP_MAX_VARIADIC);
    int64_t dims[IR_MAX_RANK];
    int nd = ir__ip_ints(c, "dimensions", dims, IR_MAX_RANK, -1);
    if (nd < 0)
        return nd == -1 ? ir__ip_fail(c, AP_EINVALID, "needs dimensions") : nd;
    const ir_tensor *x = in[0];
    bool red[IR_MAX_RANK] = {false};
    for (int i = 0; i < nd; i++) {
        if (dims[i] < 0 || dims[i] >= x->rank || red[dims[i]])
            return ir__ip_fail(c, AP_EINVALID, "dimension %" PRId64 " is out of range or repeated", dims[i]);
        red[dims[i]] = true;
    }
    ir_elem elems[IP_MAX_VARIADIC], xelems[IP_MAX_VARIADIC];
    int rc;
    for (uint32_t k = 0; k < n; k++) {
        const ir_tensor *xk = in[k], *ik = in[n + k];
        if ((rc = ir__ip_new_result(c, k, &out[k])) < 0)
            return rc;
        if (xk->kind != IR_TENSOR_ARRAY || xk->rank != x->rank || ik->kind != IR_TENSOR_ARRAY || ik->numel != 1 ||
            out[k]->rank != x->rank - nd)
            return ir__ip_fail(c, AP_ETYPE, "input %u, its init value or result has the wrong shape", k);
        for (int d = 0, j = 0; d < x->rank; d++) {
            if (xk->dims[d] != x->dims[d])
                return ir__ip_fail(c, AP_ETYPE, "inputs differ in shape");
            if (!red[d] && out[k]->dims[j++] != x->dims[d])
                return ir__ip_fail(c, AP_ETYPE, "result %u does not have the kept dims of the input", k);
        }
        elems[k] = (ir_elem)out[k]->elem;
        xelems[k] = (ir_elem)xk->elem;
        /* every result element starts as the init value */
        uint8_t init[16];
        ir__ip_convert_elem((ir_elem)ik->elem, ik->data, elems[k], init);
        for (int64_t i = 0; i < out[k]->numel; i++)
            memcpy(out[k]->data + (size_t)i * ip_eb(elems[k]), init, ip_eb(elems[k]));
    }
    if (x->numel == 0)
        return 0;
    ip_reducer rd;
    if ((rc = ir__ip_reducer_init(&rd, c, &op->regions[0], n, elems, xelems)) < 0)
        return rc;
    /* result offset of every input element: kept dims' strides in the result */
    int64_t ys[IR_MAX_RANK], ystr[IR_MAX_RANK] = {0}, kdims[IR_MAX_RANK];
    int nk = 0;
    for (int d = 0; d < x->rank; d++)
        if (!red[d])
            kdims[nk++] = x->dims[d];
    ip_strides(nk, kdims, ys);
    for (int d = 0, j = 0; d < x->rank; d++)
        if (!red[d])
            ystr[d] = ys[j++];
    /* walk the input with reduced dims innermost, so each result element
     * folds its inputs in row-major order of the reduced dims */
    int order[IR_MAX_RANK], no = 0;
    for (int d = 0; d < x->rank; d++)
        if (!red[d])
            order[no++] = d;
    for (int d = 0; d < x->rank; d++)
        if (red[d])
            order[no++] = d;
    int64_t odims[IR_MAX_RANK], xs[IR_MAX_RANK], oi[IR_MAX_RANK] = {0};
    ip_strides(x->rank, x->dims, xs);
    for (int i = 0; i < x->rank; i++)
        odims[i] = x->dims[order[i]];
    /* split_sums: a sum or product folds its terms last to first */
    ir_opcode body = ir_region_reduction(&op->regions[0]);
    bool reverse = c->run->opts.split_sums > 1 && (body == IR_OP_ADD || body == IR_OP_MULTIPLY);
    do {
        int64_t xoff = 0, yoff = 0;
        for (int i = 0; i < x->rank; i++) {
            int d = order[i];
            xoff += (reverse && red[d] ? x->dims[d] - 1 - oi[i] : oi[i]) * xs[d];
            yoff += oi[i] * ystr[d];
        }
        uint8_t *acc[IP_MAX_VARIADIC];
        const uint8_t *val[IP_MAX_VARIADIC];
        for (uint32_t k = 0; k < n; k++) {
            acc[k] = out[k]->data + (size_t)yoff * ip_eb(elems[k]);
            val[k] = in[k]->data + (size_t)xoff * ip_eb(xelems[k]);
        }
        if ((rc = ir__ip_reduce_step(&rd, acc, val)) < 0)
            break;
    } while (ip_next(x->rank, odims, oi));
    ir__ip_reducer_free(&rd);
    return rc;
}

/* ========================================================= reduce_window */

/* Window attributes with their defaults; `pad` holds lo, hi pairs. */
typedef struct window {
    int rank;
    int64_t size[IR_MAX_RANK], stride[IR_MAX_RANK], bdil[IR_MAX_RANK], wdil[IR_MAX_RANK], pad[2 * IR_MAX_RANK];
} window;

static int window_get(ip_ctx *c, int rank, bool dilations, bool size_optional, window *w)
{
    w->rank = rank;
    for (int i = 0; i < rank; i++) {
        w->size[i] = w->stride[i] = w->bdil[i] = w->wdil[i] = 1;
        w->pad[2 * i] = w->pad[2 * i + 1] = 0;
    }
    int n = ir__ip_ints(c, "window_dimensions", w->size, IR_MAX_RANK, size_optional ? rank : -1);
    if (n == -1)
        return ir__ip_fail(c, AP_EINVALID, "needs window_dimensions");
    if (n < 0)
        return n;
    if (n != rank)
        return ir__ip_fail(c, AP_EINVALID, "window_dimensions needs %d entries", rank);
    struct {
        const char *name;
        int64_t *v;
        int want;
    } lists[] = {{"window_strides", w->stride, rank},
                 {"padding", w->pad, 2 * rank},
                 {"base_dilations", w->bdil, rank},
                 {"window_dilations", w->wdil, rank}};
    for (size_t i = 0; i < (dilations ? 4u : 2u); i++) {
        n = ir__ip_ints(c, lists[i].name, lists[i].v, i == 1 ? 2 * IR_MAX_RANK : IR_MAX_RANK, lists[i].want);
        if (n < 0)
            return n;
        if (n != lists[i].want)
            return ir__ip_fail(c, AP_EINVALID, "%s needs %d entries", lists[i].name, lists[i].want);
    }
    for (int i = 0; i < rank; i++)
        if (w->size[i] < 1 || w->stride[i] < 1 || w->bdil[i] < 1 || w->wdil[i] < 1)
            return ir__ip_fail(c, AP_EINVALID, "window sizes, strides and dilations must be positive");
    return 0;
}

/* Number of windows along dim i of an input of size insz. */
static int64_t window_count(const window *w, int i, int64_t insz)
{
    int64_t padded = (insz > 0 ? (insz - 1) * w->bdil[i] + 1 : 0) + w->pad[2 * i] + w->pad[2 * i + 1];
    int64_t span = (w->size[i] - 1) * w->wdil[i] + 1;
    return padded < span ? 0 : (padded - span) / w->stride[i] + 1;
}

int ir__ip_k_reduce_window(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    uint32_t n = op->n_operands / 2;
    if (op->n_operands != 2 * n || n == 0 || op->n_results != n || op->n_regions != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs N inputs, N init values, N results and a body");
    if (n > IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "has %u inputs; at most %d are supported", n, IP_MAX_VARIADIC);
    const ir_tensor *x = in[0];
    window w;
    int rc = window_get(c, x->rank, true, false, &w);
    if (rc < 0)
        return rc;
    ir_elem elems[IP_MAX_VARIADIC], xelems[IP_MAX_VARIADIC];
    uint8_t inits[IP_MAX_VARIADIC][16];
    for (uint32_t k = 0; k < n; k++) {
        if ((rc = ir__ip_new_result(c, k, &out[k])) < 0)
            return rc;
        const ir_tensor *xk = in[k], *ik = in[n + k];
        if (xk->kind != IR_TENSOR_ARRAY || xk->rank != x->rank || ik->kind != IR_TENSOR_ARRAY || ik->numel != 1 ||
            out[k]->rank != x->rank)
            return ir__ip_fail(c, AP_ETYPE, "input %u, its init value or result has the wrong shape", k);
        for (int d = 0; d < x->rank; d++)
            if (xk->dims[d] != x->dims[d] || out[k]->dims[d] != window_count(&w, d, x->dims[d]))
                return ir__ip_fail(c, AP_ETYPE, "result %u dim %d should have %" PRId64 " windows", k, d,
                                   window_count(&w, d, x->dims[d]));
        elems[k] = (ir_elem)out[k]->elem;
        xelems[k] = (ir_elem)xk->elem;
        ir__ip_convert_elem((ir_elem)ik->elem, ik->data, xelems[k], inits[k]);
    }
    const ir_tensor *y = out[0];
    if (y->numel == 0)
        return 0;
    ip_reducer rd;
    if ((rc = ir__ip_reducer_init(&rd, c, &op->regions[0], n, elems, xelems)) < 0)
        return rc;
    int64_t xs[IR_MAX_RANK], yi[IR_MAX_RANK] = {0}, idx = 0;
    ip_strides(x->rank, x->dims, xs);
    do {
        uint8_t *acc[IP_MAX_VARIADIC];
        const uint8_t *val[IP_MAX_VARIADIC];
        for (uint32_t k = 0; k < n; k++) {
            acc[k] = out[k]->data + (size_t)idx * ip_eb(elems[k]);
            ir__ip_convert_elem((ir_elem)in[n + k]->elem, in[n + k]->data, elems[k], acc[k]);
        }
        int64_t wi[IR_MAX_RANK] = {0};
        do {
            /* padding (edge or base dilation holes) contributes the init value */
            int64_t off = 0;
            bool inside = true;
            for (int d = 0; d < x->rank && inside; d++) {
                int64_t p = yi[d] * w.stride[d] + wi[d] * w.wdil[d] - w.pad[2 * d];
                if (p < 0 || p % w.bdil[d] || p / w.bdil[d] >= x->dims[d])
                    inside = false;
                else
                    off += (p / w.bdil[d]) * xs[d];
            }
            for (uint32_t k = 0; k < n; k++)
                val[k] = inside ? in[k]->data + (size_t)off * ip_eb(xelems[k]) : inits[k];
            if ((rc = ir__ip_reduce_step(&rd, acc, val)) < 0)
                goto done;
        } while (ip_next(x->rank, w.size, wi));
        idx++;
    } while (ip_next(y->rank, y->dims, yi));
done:
    ir__ip_reducer_free(&rd);
    return rc;
}

/* ==================================================== select_and_scatter */

int ir__ip_k_select_and_scatter(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0], *src = in[1], *init = in[2];
    if (c->op->n_regions != 2)
        return ir__ip_fail(c, AP_EINVALID, "needs a select and a scatter region");
    window w;
    int rc;
    /* the window defaults to 1 in every dim */
    if ((rc = window_get(c, x->rank, false, true, &w)) < 0)
        return rc;
    if ((rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    ir_tensor *y = out[0];
    if (!ir__tensor_same_type(x, y) || src->kind != IR_TENSOR_ARRAY || src->rank != x->rank ||
        init->kind != IR_TENSOR_ARRAY || init->numel != 1 || init->elem != y->elem)
        return ir__ip_fail(c, AP_ETYPE, "operand, source, init value and result do not fit");
    for (int d = 0; d < x->rank; d++)
        if (src->dims[d] != window_count(&w, d, x->dims[d]))
            return ir__ip_fail(c, AP_ETYPE, "source dim %d should have %" PRId64 " windows", d,
                               window_count(&w, d, x->dims[d]));
    ir_elem xe = (ir_elem)x->elem, se = (ir_elem)src->elem;
    size_t xb = ip_eb(xe), sb = ip_eb(se);
    for (int64_t i = 0; i < y->numel; i++)
        memcpy(y->data + (size_t)i * xb, init->data, xb);
    if (src->numel == 0)
        return 0;
    ip_scalar_call sel;
    ip_reducer sc;
    ir_elem two[2] = {xe, xe};
    if ((rc = ir__ip_scall_init(&sel, c, &c->op->regions[0], 2, two)) < 0)
        return rc;
    ir_elem ye = xe;
    if ((rc = ir__ip_reducer_init(&sc, c, &c->op->regions[1], 1, &ye, &se)) < 0) {
        ir__ip_scall_free(&sel);
        return rc;
    }
    int64_t xs[IR_MAX_RANK], si[IR_MAX_RANK] = {0}, sidx = 0;
    ip_strides(x->rank, x->dims, xs);
    do {
        int64_t best = -1, wi[IR_MAX_RANK] = {0};
        do {
            int64_t off = 0;
            bool inside = true;
            for (int d = 0; d < x->rank && inside; d++) {
                int64_t q = si[d] * w.stride[d] + wi[d] - w.pad[2 * d];
                inside = q >= 0 && q < x->dims[d];
                off += q * xs[d];
            }
            if (!inside) /* padding is never selected */
                continue;
            if (best < 0) {
                best = off;
                continue;
            }
            const uint8_t *args[2] = {x->data + (size_t)best * xb, x->data + (size_t)off * xb};
            uint8_t keep = 0, *res = &keep;
            ir_elem be = IR_E_I1;
            if ((rc = ir__ip_scall(&sel, args, 1, &be, &res)) < 0)
                goto done;
            if (!keep)
                best = off;
        } while (ip_next(x->rank, w.size, wi));
        if (best >= 0) {
            uint8_t *acc = y->data + (size_t)best * xb;
            const uint8_t *v = src->data + (size_t)sidx * sb;
            if ((rc = ir__ip_reduce_step(&sc, &acc, &v)) < 0)
                goto done;
        }
        sidx++;
    } while (ip_next(src->rank, src->dims, si));
done:
    ir__ip_scall_free(&sel);
    ir__ip_reducer_free(&sc);
    return rc;
}

/* ================================================================== sort */

typedef struct sorter {
    ip_scalar_call sc;
    uint32_t n;
    const ir_tensor *const *in;
    int64_t base, stride; /* the row being sorted */
    int rc;
} sorter;

/* comparator(a, b): whether element a goes before element b */
static int before(sorter *s, int64_t a, int64_t b, bool *out)
{
    const uint8_t *args[2 * IP_MAX_VARIADIC];
    for (uint32_t k = 0; k < s->n; k++) {
        size_t eb = ip_eb((ir_elem)s->in[k]->elem);
        args[2 * k] = s->in[k]->data + (size_t)(s->base + a * s->stride) * eb;
        args[2 * k + 1] = s->in[k]->data + (size_t)(s->base + b * s->stride) * eb;
    }
    uint8_t r = 0, *res = &r;
    ir_elem be = IR_E_I1;
    int rc = ir__ip_scall(&s->sc, args, 1, &be, &res);
    *out = r != 0;
    return rc;
}

/* Stable bottom-up merge sort of the permutation perm[0..n). */
static int merge_sort(sorter *s, int64_t *perm, int64_t *tmp, int64_t n)
{
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool b;
                int rc = before(s, perm[j], perm[i], &b);
                if (rc < 0)
                    return rc;
                /* take the right element only if strictly before: stable */
                tmp[k++] = b ? perm[j++] : perm[i++];
            }
            while (i < mid)
                tmp[k++] = perm[i++];
            while (j < hi)
                tmp[k++] = perm[j++];
        }
        memcpy(perm, tmp, sizeof *perm * (size_t)n);
    }
    return 0;
}

int ir__ip_k_sort(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    uint32_t n = op->n_operands;
    if (n == 0 || op->n_results != n || op->n_regions != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs operands, one result each and a comparator");
    /* the limit is the interpreter's (fixed arrays of the region's scalar
     * arguments), not a fault of the program: say which */
    if (n > IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "has %u operands; at most %d are supported", n, IP_MAX_VARIADIC);
    const ir_tensor *x = in[0];
    int64_t dim = -1;
    ir_attr *a = ir_op_attr(op, "dimension");
    if (a && a->kind == IR_A_INT)
        dim = a->u.i;
    if (dim < 0)
        dim += x->rank;
    if (x->kind != IR_TENSOR_ARRAY || dim < 0 || dim >= x->rank)
        return ir__ip_fail(c, AP_EINVALID, "dimension is out of range");
    ir_elem elems[2 * IP_MAX_VARIADIC];
    int rc;
    for (uint32_t k = 0; k < n; k++) {
        if (in[k]->kind != IR_TENSOR_ARRAY || in[k]->rank != x->rank)
            return ir__ip_fail(c, AP_ETYPE, "operands must share one shape");
        for (int d = 0; d < x->rank; d++)
            if (in[k]->dims[d] != x->dims[d])
                return ir__ip_fail(c, AP_ETYPE, "operands must share one shape");
        if ((rc = ir__ip_new_result(c, k, &out[k])) < 0)
            return rc;
        if (!ir__tensor_same_type(out[k], in[k]))
            return ir__ip_fail(c, AP_ETYPE, "result %u differs from its operand", k);
        elems[2 * k] = elems[2 * k + 1] = (ir_elem)in[k]->elem;
    }
    if (x->numel == 0)
        return 0;
    sorter s = {.n = n, .in = in, .rc = 0};
    if ((rc = ir__ip_scall_init(&s.sc, c, &op->regions[0], 2 * n, elems)) < 0)
        return rc;
    int64_t len = x->dims[dim], xs[IR_MAX_RANK], odims[IR_MAX_RANK], oi[IR_MAX_RANK] = {0};
    ip_strides(x->rank, x->dims, xs);
    memcpy(odims, x->dims, sizeof *odims * (size_t)x->rank);
    odims[dim] = 1;
    int64_t *perm = ap_malloc(sizeof *perm * (size_t)len), *tmp = ap_malloc(sizeof *tmp * (size_t)len);
    if (!perm || !tmp) {
        rc = ir__ip_fail(c, AP_ENOMEM, "out of memory");
        goto done;
    }
    s.stride = xs[dim];
    do {
        s.base = 0;
        for (int d = 0; d < x->rank; d++)
            s.base += oi[d] * xs[d];
        for (int64_t i = 0; i < len; i++)
            perm[i] = i;
        if ((rc = merge_sort(&s, perm, tmp, len)) < 0)
            goto done;
        for (uint32_t k = 0; k < n; k++) {
            size_t eb = ip_eb(elems[2 * k]);
            for (int64_t i = 0; i < len; i++)
                memcpy(out[k]->data + (size_t)(s.base + i * s.stride) * eb,
                       in[k]->data + (size_t)(s.base + perm[i] * s.stride) * eb, eb);
        }
    } while (ip_next(x->rank, odims, oi));
done:
    ap_free(perm);
    ap_free(tmp);
    ir__ip_scall_free(&s.sc);
    return rc;
}

/* ============================================================ batch norm */

static int bn_attrs(ip_ctx *c, const ir_tensor *x, int64_t *fi, double *eps)
{
    int rc = ir__ip_int(c, "feature_index", fi);
    if (rc < 0)
        return rc;
    ir_attr *e = ir_op_attr(c->op, "epsilon");
    if (!e || e->kind != IR_A_FLOAT)
        return ir__ip_fail(c, AP_EINVALID, "needs a float attribute epsilon");
    *eps = e->u.f;
    if (x->kind != IR_TENSOR_ARRAY || *fi < 0 || *fi >= x->rank || ir__ip_class((ir_elem)x->elem) != IP_F)
        return ir__ip_fail(c, AP_EINVALID, "feature_index is out of range or the operand is not a float tensor");
    return 0;
}

/* A per-feature vector operand: rank 1, the feature size, the operand type. */
static int bn_vec(ip_ctx *c, const ir_tensor *v, const ir_tensor *x, int64_t fi, const char *what)
{
    if (v->kind != IR_TENSOR_ARRAY || v->rank != 1 || v->dims[0] != x->dims[fi] || v->elem != x->elem)
        return ir__ip_fail(c, AP_ETYPE, "%s must be a vector of the feature size", what);
    return 0;
}

/* The elements before and after the feature dim fi: element i =
 * (o nf + f) inner + j.  The kernels below walk o, f, j nested, which is
 * i in row-major order (so every per-feature sum adds its terms in the
 * order a walk over i would), without dividing i per element. */
static void bn_shape(const ir_tensor *x, int64_t fi, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < fi)
            *outer *= x->dims[d];
        else if (d > fi)
            *inner *= x->dims[d];
    }
}

int ir__ip_k_batch_norm_inference(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    int64_t fi;
    double eps;
    int rc = bn_attrs(c, x, &fi, &eps);
    if (rc < 0)
        return rc;
    static const char *const names[] = {"scale", "offset", "mean", "variance"};
    for (int k = 1; k <= 4; k++)
        if ((rc = bn_vec(c, in[k], x, fi, names[k - 1])) < 0)
            return rc;
    if ((rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    if (!ir__tensor_same_type(out[0], x))
        return ir__ip_fail(c, AP_ETYPE, "result differs from the operand");
    ir_elem e = (ir_elem)x->elem;
    int64_t outer, inner, nf = x->dims[fi], i = 0;
    bn_shape(x, fi, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t f = 0; f < nf; f++) {
            double sc = ir_tensor_get_f64(in[1], f), of = ir_tensor_get_f64(in[2], f);
            double mu = ir_tensor_get_f64(in[3], f), var = ir_tensor_get_f64(in[4], f);
            double sd = sqrt(var + eps);
            for (int64_t j = 0; j < inner; j++, i++) {
                double v = ir_tensor_get_f64(x, i);
                ip_stf(e, out[0]->data + (size_t)i * ip_eb(e), sc * (v - mu) / sd + of);
            }
        }
    return 0;
}

/* Per-feature mean and (biased) variance of x, in double. */
static int bn_stats(ip_ctx *c, const ir_tensor *x, int64_t fi, double **mean, double **var)
{
    int64_t nf = x->dims[fi], per = nf ? x->numel / nf : 0;
    *mean = ap_calloc((size_t)(nf ? nf : 1), sizeof **mean);
    *var = ap_calloc((size_t)(nf ? nf : 1), sizeof **var);
    if (!*mean || !*var)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    int64_t outer, inner, i = 0;
    bn_shape(x, fi, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t f = 0; f < nf; f++)
            for (int64_t j = 0; j < inner; j++, i++)
                (*mean)[f] += ir_tensor_get_f64(x, i);
    for (int64_t f = 0; f < nf; f++)
        (*mean)[f] /= (double)per;
    i = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t f = 0; f < nf; f++)
            for (int64_t j = 0; j < inner; j++, i++) {
                double d = ir_tensor_get_f64(x, i) - (*mean)[f];
                (*var)[f] += d * d;
            }
    for (int64_t f = 0; f < nf; f++)
        (*var)[f] /= (double)per;
    return 0;
}

int ir__ip_k_batch_norm_training(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    int64_t fi;
    double eps, *mean = NULL, *var = NULL;
    int rc = bn_attrs(c, x, &fi, &eps);
    if (rc < 0 || (rc = bn_vec(c, in[1], x, fi, "scale")) < 0 || (rc = bn_vec(c, in[2], x, fi, "offset")) < 0)
        return rc;
    for (uint32_t k = 0; k < 3; k++)
        if ((rc = ir__ip_new_result(c, k, &out[k])) < 0)
            return rc;
    if (!ir__tensor_same_type(out[0], x) || bn_vec(c, out[1], x, fi, "batch_mean") < 0 ||
        bn_vec(c, out[2], x, fi, "batch_var") < 0)
        return ir__ip_fail(c, AP_ETYPE, "results must be the operand's type and two feature vectors");
    if ((rc = bn_stats(c, x, fi, &mean, &var)) < 0)
        goto done;
    ir_elem e = (ir_elem)x->elem;
    int64_t outer, inner, i = 0;
    bn_shape(x, fi, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t f = 0; f < x->dims[fi]; f++) {
            double sc = ir_tensor_get_f64(in[1], f), of = ir_tensor_get_f64(in[2], f), sd = sqrt(var[f] + eps);
            for (int64_t j = 0; j < inner; j++, i++) {
                double v = ir_tensor_get_f64(x, i);
                ip_stf(e, out[0]->data + (size_t)i * ip_eb(e), sc * (v - mean[f]) / sd + of);
            }
        }
    for (int64_t f = 0; f < x->dims[fi]; f++) {
        ip_stf(e, out[1]->data + (size_t)f * ip_eb(e), mean[f]);
        ip_stf(e, out[2]->data + (size_t)f * ip_eb(e), var[f]);
    }
done:
    ap_free(mean);
    ap_free(var);
    return rc;
}

int ir__ip_k_batch_norm_grad(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0], *scale = in[1], *mean = in[2], *var = in[3], *gy = in[4];
    int64_t fi;
    double eps;
    int rc = bn_attrs(c, x, &fi, &eps);
    if (rc < 0 || (rc = bn_vec(c, scale, x, fi, "scale")) < 0 || (rc = bn_vec(c, mean, x, fi, "mean")) < 0 ||
        (rc = bn_vec(c, var, x, fi, "variance")) < 0)
        return rc;
    if (!ir__tensor_same_type(gy, x))
        return ir__ip_fail(c, AP_ETYPE, "grad_output must have the operand's type");
    for (uint32_t k = 0; k < 3; k++)
        if ((rc = ir__ip_new_result(c, k, &out[k])) < 0)
            return rc;
    if (!ir__tensor_same_type(out[0], x) || bn_vec(c, out[1], x, fi, "grad_scale") < 0 ||
        bn_vec(c, out[2], x, fi, "grad_offset") < 0)
        return ir__ip_fail(c, AP_ETYPE, "results must be the operand's type and two feature vectors");
    int64_t nf = x->dims[fi], per = nf ? x->numel / nf : 0;
    double *sg = ap_calloc((size_t)(nf ? nf : 1), sizeof *sg), *sgn = ap_calloc((size_t)(nf ? nf : 1), sizeof *sgn);
    if (!sg || !sgn) {
        rc = ir__ip_fail(c, AP_ENOMEM, "out of memory");
        goto done;
    }
    /* grad_offset = sum(g); grad_scale = sum(g * xhat);
     * grad_operand = scale / stddev * (g - mean(g) - xhat * mean(g * xhat)) */
    int64_t outer, inner, i = 0;
    bn_shape(x, fi, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t f = 0; f < nf; f++) {
            double sd = sqrt(ir_tensor_get_f64(var, f) + eps), mu = ir_tensor_get_f64(mean, f);
            for (int64_t j = 0; j < inner; j++, i++) {
                double xhat = (ir_tensor_get_f64(x, i) - mu) / sd, g = ir_tensor_get_f64(gy, i);
                sg[f] += g;
                sgn[f] += g * xhat;
            }
        }
    ir_elem e = (ir_elem)x->elem;
    i = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t f = 0; f < nf; f++) {
            double sd = sqrt(ir_tensor_get_f64(var, f) + eps), mu = ir_tensor_get_f64(mean, f);
            double sc = ir_tensor_get_f64(scale, f);
            for (int64_t j = 0; j < inner; j++, i++) {
                double xhat = (ir_tensor_get_f64(x, i) - mu) / sd, g = ir_tensor_get_f64(gy, i);
                double gx = sc / sd * (g - sg[f] / (double)per - xhat * sgn[f] / (double)per);
                ip_stf(e, out[0]->data + (size_t)i * ip_eb(e), gx);
            }
        }
    for (int64_t f = 0; f < nf; f++) {
        ip_stf(e, out[1]->data + (size_t)f * ip_eb(e), sgn[f]);
        ip_stf(e, out[2]->data + (size_t)f * ip_eb(e), sg[f]);
    }
done:
    ap_free(sg);
    ap_free(sgn);
    return rc;
}

/* ======================================================== linear algebra */

/* Batched square matrices [..., m, m]: batch count and m. */
static int matrices(ip_ctx *c, const ir_tensor *a, int64_t *batch, int64_t *m)
{
    ip_class k = ir__ip_class((ir_elem)a->elem);
    if (a->kind != IR_TENSOR_ARRAY || a->rank < 2 || a->dims[a->rank - 1] != a->dims[a->rank - 2] ||
        (k != IP_F && k != IP_C))
        return ir__ip_fail(c, AP_ETYPE, "needs batched square float or complex matrices");
    *m = a->dims[a->rank - 1];
    *batch = *m ? a->numel / (*m * *m) : 0;
    return 0;
}

static double complex ld_any(const ir_tensor *t, int64_t i)
{
    const uint8_t *p = t->data + (size_t)i * ip_eb((ir_elem)t->elem);
    return ir__ip_class((ir_elem)t->elem) == IP_C ? ip_ldc((ir_elem)t->elem, p)
                                                  : ip_cplx(ip_ldf((ir_elem)t->elem, p), 0.0);
}

static void st_any(ir_tensor *t, int64_t i, double complex v)
{
    uint8_t *p = t->data + (size_t)i * ip_eb((ir_elem)t->elem);
    if (ir__ip_class((ir_elem)t->elem) == IP_C)
        ip_stc((ir_elem)t->elem, p, v);
    else
        ip_stf((ir_elem)t->elem, p, creal(v));
}

int ir__ip_k_triangular_solve(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *a = in[0], *b = in[1];
    int64_t batch, m;
    int rc = matrices(c, a, &batch, &m);
    if (rc < 0)
        return rc;
    bool left = ir__ip_flag(c->op, "left_side"), lower = ir__ip_flag(c->op, "lower");
    bool unit = ir__ip_flag(c->op, "unit_diagonal");
    char tb[32];
    const char *t = ir__ip_enum(c->op, "transpose_a", tb, sizeof tb);
    bool trans = t && strcmp(t, "NO_TRANSPOSE") != 0, conj_a = t && !strcmp(t, "ADJOINT");
    if ((rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    ir_tensor *x = out[0];
    if (!ir__tensor_same_type(x, b) || b->rank != a->rank || b->elem != a->elem)
        return ir__ip_fail(c, AP_ETYPE, "b and the result must share one type of a's rank and element type");
    for (int d = 0; d < a->rank - 2; d++)
        if (b->dims[d] != a->dims[d])
            return ir__ip_fail(c, AP_ETYPE, "batch dims of a and b differ");
    int64_t rows = b->dims[b->rank - 2], cols = b->dims[b->rank - 1];
    if ((left && rows != m) || (!left && cols != m))
        return ir__ip_fail(c, AP_ETYPE, "b does not fit a on the %s side", left ? "left" : "right");
    /* op(a) as a dense matrix from the named triangle of a */
    double complex *A = ap_malloc(sizeof *A * (size_t)(m > 0 ? m * m : 1));
    if (!A)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    bool eff_lower = lower != trans;
    int64_t k = rows * cols;
    for (int64_t bi = 0; bi < batch; bi++) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < m; j++) {
                int64_t si = trans ? j : i, sj = trans ? i : j;
                bool keep = lower ? sj <= si : sj >= si;
                double complex v = keep ? ld_any(a, bi * m * m + si * m + sj) : 0;
                if (conj_a)
                    v = conj(v);
                if (i == j && unit)
                    v = 1;
                A[i * m + j] = v;
            }
        /* left: A X = B column by column; right: X A = B row by row, i.e.
         * A^T x^T = b^T */
        int64_t nsys = left ? cols : rows;
        for (int64_t s = 0; s < nsys; s++) {
            for (int64_t step = 0; step < m; step++) {
                bool fwd = left ? eff_lower : !eff_lower;
                int64_t i = fwd ? step : m - 1 - step;
                int64_t bidx = bi * k + (left ? i * cols + s : s * cols + i);
                double complex v = ld_any(b, bidx);
                for (int64_t j = 0; j < m; j++) {
                    if (j == i)
                        continue;
                    bool solved = fwd ? j < i : j > i;
                    if (!solved)
                        continue;
                    double complex aij = left ? A[i * m + j] : A[j * m + i];
                    v -= aij * ld_any(x, bi * k + (left ? j * cols + s : s * cols + j));
                }
                st_any(x, bidx, v / A[i * m + i]);
            }
        }
    }
    ap_free(A);
    return 0;
}

int ir__ip_k_cholesky(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *a = in[0];
    int64_t batch, m;
    int rc = matrices(c, a, &batch, &m);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    if (!ir__tensor_same_type(out[0], a))
        return ir__ip_fail(c, AP_ETYPE, "result differs from the operand");
    bool lower = ir__ip_flag(c->op, "lower");
    double complex *L = ap_malloc(sizeof *L * (size_t)(m > 0 ? m * m : 1));
    if (!L)
        return ir__ip_fail(c, AP_ENOMEM, "out of memory");
    for (int64_t bi = 0; bi < batch; bi++) {
        /* the lower factor of the Hermitian matrix given by the named
         * triangle; the upper one is its adjoint */
        for (int64_t i = 0; i < m * m; i++)
            L[i] = 0;
        for (int64_t j = 0; j < m; j++) {
            for (int64_t i = j; i < m; i++) {
                double complex aij =
                    lower ? ld_any(a, bi * m * m + i * m + j) : conj(ld_any(a, bi * m * m + j * m + i));
                double complex s = aij;
                for (int64_t p = 0; p < j; p++)
                    s -= L[i * m + p] * conj(L[j * m + p]);
                if (i == j)
                    L[j * m + j] = creal(s) > 0 ? sqrt(creal(s)) : NAN;
                else
                    L[i * m + j] = s / L[j * m + j];
            }
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < m; j++)
                st_any(out[0], bi * m * m + i * m + j, lower ? L[i * m + j] : conj(L[j * m + i]));
    }
    ap_free(L);
    return 0;
}

/* =================================================================== fft */

/* In-place naive DFT of the line buf[base + i * stride], i < n. */
static void dft_line(double complex *buf, double complex *tmp, int64_t base, int64_t stride, int64_t n, bool inverse)
{
    double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; k++) {
        double complex s = 0;
        for (int64_t j = 0; j < n; j++) {
            double ang = sign * 2.0 * 3.14159265358979323846 * (double)((k * j) % n) / (double)n;
            s += buf[base + j * stride] * ip_cplx(cos(ang), sin(ang));
        }
        tmp[k] = inverse ? s / (double)n : s;
    }
    for (int64_t k = 0; k < n; k++)
        buf[base + k * stride] = tmp[k];
}

/* DFT along dim d of a buffer of shape dims. */
static void dft_dim(double complex *buf, double complex *tmp, int rank, const int64_t *dims, int d, bool inverse)
{
    int64_t st[IR_MAX_RANK], odims[IR_MAX_RANK], oi[IR_MAX_RANK] = {0};
    ip_strides(rank, dims, st);
    memcpy(odims, dims, sizeof *odims * (size_t)rank);
    for (int i = 0; i < rank; i++)
        if (dims[i] == 0)
            return;
    odims[d] = 1;
    do {
        int64_t base = 0;
        for (int i = 0; i < rank; i++)
            base += oi[i] * st[i];
        dft_line(buf, tmp, base, st[d], dims[d], inverse);
    } while (ip_next(rank, odims, oi));
}

int ir__ip_k_fft(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    char tb[32];
    const char *type = ir__ip_enum(c->op, "fft_type", tb, sizeof tb);
    int64_t len[3];
    int nl = ir__ip_ints(c, "fft_length", len, 3, -1);
    if (nl < 0)
        return nl == -1 ? ir__ip_fail(c, AP_EINVALID, "needs fft_length") : nl;
    if (!type || nl < 1 || nl > x->rank)
        return ir__ip_fail(c, AP_EINVALID, "needs fft_type and 1 to 3 fft lengths");
    int kind = !strcmp(type, "FFT")     ? 0
               : !strcmp(type, "IFFT")  ? 1
               : !strcmp(type, "RFFT")  ? 2
               : !strcmp(type, "IRFFT") ? 3
                                        : -1;
    if (kind < 0)
        return ir__ip_fail(c, AP_EINVALID, "unknown fft_type %s", type);
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    ir_tensor *y = out[0];
    int r = x->rank;
    bool in_c = ir__ip_class((ir_elem)x->elem) == IP_C, out_c = ir__ip_class((ir_elem)y->elem) == IP_C;
    if (y->rank != r || in_c != (kind != 2) || out_c != (kind != 3))
        return ir__ip_fail(c, AP_ETYPE, "operand and result types do not fit %s", type);
    /* the full complex signal: shape of the operand with the last dim at
     * fft_length (IRFFT extends its half spectrum) */
    int64_t full[IR_MAX_RANK];
    for (int d = 0; d < r; d++) {
        full[d] = x->dims[d];
        bool fd = d >= r - nl;
        int64_t L = fd ? len[d - (r - nl)] : 0;
        int64_t want_in = !fd ? y->dims[d] : (kind == 3 && d == r - 1) ? L / 2 + 1 : L;
        int64_t want_out = !fd ? x->dims[d] : (kind == 2 && d == r - 1) ? L / 2 + 1 : L;
        if (x->dims[d] != want_in || y->dims[d] != want_out)
            return ir__ip_fail(c, AP_ETYPE, "dim %d does not fit fft_length", d);
        if (fd)
            full[d] = L;
    }
    int64_t n = 1;
    for (int d = 0; d < r; d++)
        n *= full[d];
    int64_t maxl = 1;
    for (int d = 0; d < r; d++)
        maxl = full[d] > maxl ? full[d] : maxl;
    double complex *buf = ap_calloc((size_t)(n ? n : 1), sizeof *buf), *tmp = ap_malloc(sizeof *tmp * (size_t)maxl);
    if (!buf || !tmp) {
        rc = ir__ip_fail(c, AP_ENOMEM, "out of memory");
        goto done;
    }
    int64_t fst[IR_MAX_RANK], ist[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    ip_strides(r, full, fst);
    ip_strides(r, x->dims, ist);
    if (x->numel > 0) {
        do { /* load the operand into the full buffer */
            int64_t fo = 0, io = 0;
            for (int d = 0; d < r; d++) {
                fo += idx[d] * fst[d];
                io += idx[d] * ist[d];
            }
            buf[fo] = ld_any(x, io);
        } while (ip_next(r, x->dims, idx));
    }
    if (kind == 3) {
        /* inverse along the outer fft dims, then the last dim from its
         * Hermitian half, keeping the real part */
        for (int d = r - nl; d < r - 1; d++)
            dft_dim(buf, tmp, r, full, d, true);
        int64_t L = full[r - 1], odims[IR_MAX_RANK], oi[IR_MAX_RANK] = {0};
        memcpy(odims, full, sizeof *odims * (size_t)r);
        odims[r - 1] = 1;
        bool empty = false;
        for (int d = 0; d < r; d++)
            empty = empty || full[d] == 0;
        if (!empty) {
            do {
                int64_t base = 0;
                for (int d = 0; d < r; d++)
                    base += oi[d] * fst[d];
                for (int64_t k = L / 2 + 1; k < L; k++)
                    buf[base + k] = conj(buf[base + (L - k)]);
                dft_line(buf, tmp, base, 1, L, true);
            } while (ip_next(r, odims, oi));
        }
    } else {
        for (int d = r - nl; d < r; d++)
            dft_dim(buf, tmp, r, full, d, kind == 1);
    }
    int64_t ost[IR_MAX_RANK], oi2[IR_MAX_RANK] = {0};
    ip_strides(r, y->dims, ost);
    if (y->numel > 0) {
        do {
            int64_t fo = 0, oo = 0;
            for (int d = 0; d < r; d++) {
                fo += oi2[d] * fst[d];
                oo += oi2[d] * ost[d];
            }
            st_any(y, oo, buf[fo]);
        } while (ip_next(r, y->dims, oi2));
    }
done:
    ap_free(buf);
    ap_free(tmp);
    return rc;
}
