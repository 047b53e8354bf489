/*
 * ragged.c - chlo.ragged_dot: a dot_general over one ragged lhs dimension
 * split into groups by group_sizes, as CHLO's legalization to StableHLO
 * (ChloLegalizeToStablehlo.cpp) defines its three modes:
 *
 * 1. the ragged dimension is an lhs non-contracting one and the rhs has a
 *    group dimension ([b,m,k], [g,b,k,n], [b?,g] -> [b,m,n]): the sum over
 *    groups i, in order, of dot_general(lhs masked to the rows of group i,
 *    rhs[i]), each dot rounded to the result type and added in it;
 * 2. the ragged dimension is contracting ([b,m,k], [b,k,n], [b?,g] ->
 *    [g,b,m,n]): result[i] = dot_general(lhs masked to the k of group i,
 *    rhs);
 * 3. the ragged dimension is a batch dimension: a plain dot_general (the
 *    groups do not interact).
 * Group i covers [start_i, start_i + group_sizes[..., i]) with start_0 = 0
 * and start_(i+1) the previous limit; group_sizes' leading dimensions index
 * the lhs's first dimensions.  "Masked" keeps an lhs element inside the
 * group and puts 0 elsewhere, so a masked row contributes 0 * rhs (NaN on an
 * infinite rhs element) as the legalized program does.  The mode is the
 * kind of the ragged dimension, as the op's description defines it (the
 * legalization tells them apart by ranks, which takes a mode-1 op whose lhs
 * has a second free dimension for mode 3).  Each dot sums its products in
 * double and rounds once, as the interpreter's dot_general does.  Float
 * element types only.
 */
#include "interp_int.h"

#include <stdio.h>

#define RD_MAX 8 /* dimension numbers per list */

static int dims_of(ip_ctx *c, const ir_attr *dn, const char *name, int64_t *out, int *n)
{
    ir_attr *a = ir_dialect_param(dn, name);
    *n = 0;
    if (!a)
        return 0;
    int k = ir_attr_int_list(a, out, RD_MAX);
    if (k < 0 || k > RD_MAX)
        return ir__ip_fail(c, AP_EINVALID, "ragged_dot_dimension_numbers: %s is not a short list of integers", name);
    *n = k;
    return 0;
}

static bool in_list(int64_t d, const int64_t *l, int n)
{
    for (int i = 0; i < n; i++)
        if (l[i] == d)
            return true;
    return false;
}

/* Whether list l of n dims of a rank-r tensor is in range and distinct. */
static bool valid_dims(const int64_t *l, int n, int r)
{
    for (int i = 0; i < n; i++) {
        if (l[i] < 0 || l[i] >= r)
            return false;
        for (int j = 0; j < i; j++)
            if (l[j] == l[i])
                return false;
    }
    return true;
}

int ir__ip_k_ragged_dot(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    if (op->n_operands != 3 || op->n_results != 1)
        return ir__ip_fail(c, AP_EINVALID, "takes lhs, rhs and group_sizes and gives one result");
    const ir_attr *dn = ir_op_attr(op, "ragged_dot_dimension_numbers");
    if (!dn || dn->kind != IR_A_DIALECT || dn->u.dia.n <= 0)
        return ir__ip_fail(c, AP_EINVALID, "its ragged_dot_dimension_numbers were not read");
    int64_t lb[RD_MAX], rb[RD_MAX], lc[RD_MAX], rc[RD_MAX], lr[RD_MAX], rg[RD_MAX];
    int nlb, nrb, nlc, nrc, nlr, nrg, rc_ = 0;
    if ((rc_ = dims_of(c, dn, "lhs_batching_dimensions", lb, &nlb)) < 0 ||
        (rc_ = dims_of(c, dn, "rhs_batching_dimensions", rb, &nrb)) < 0 ||
        (rc_ = dims_of(c, dn, "lhs_contracting_dimensions", lc, &nlc)) < 0 ||
        (rc_ = dims_of(c, dn, "rhs_contracting_dimensions", rc, &nrc)) < 0 ||
        (rc_ = dims_of(c, dn, "lhs_ragged_dimensions", lr, &nlr)) < 0 ||
        (rc_ = dims_of(c, dn, "rhs_group_dimensions", rg, &nrg)) < 0)
        return rc_;
    const ir_tensor *x = in[0], *w = in[1], *gs = in[2];
    if (x->kind != IR_TENSOR_ARRAY || w->kind != IR_TENSOR_ARRAY || gs->kind != IR_TENSOR_ARRAY)
        return ir__ip_fail(c, AP_ETYPE, "its operands must be tensors");
    ir_elem e = (ir_elem)x->elem;
    ip_class gk = ir__ip_class((ir_elem)gs->elem);
    if (ir__ip_class(e) != IP_F || w->elem != x->elem || (gk != IP_S && gk != IP_U) || gs->rank < 1)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "is evaluated on float lhs and rhs of one type and integer "
                                               "group sizes");
    if (nlr != 1 || !valid_dims(lr, nlr, x->rank))
        return ir__ip_fail(c, AP_EINVALID, "needs one lhs ragged dimension");
    int mode = in_list(lr[0], lc, nlc) ? 2 : in_list(lr[0], lb, nlb) ? 3 : 1;
    if (nlr != 1 || nlb != nrb || nlc != nrc || !valid_dims(lb, nlb, x->rank) || !valid_dims(rb, nrb, w->rank) ||
        !valid_dims(lc, nlc, x->rank) || !valid_dims(rc, nrc, w->rank) || !valid_dims(lr, 1, x->rank) ||
        !valid_dims(rg, nrg, w->rank) || (mode == 1) != (nrg == 1) ||
        (mode == 1 && (in_list(lr[0], lb, nlb) || in_list(lr[0], lc, nlc))) ||
        (mode == 2 && !in_list(lr[0], lc, nlc)) || (mode == 3 && !in_list(lr[0], lb, nlb)))
        return ir__ip_fail(c, AP_EINVALID, "its dimension numbers do not fit its operands (mode %d)", mode);
    for (int i = 0; i < nlb; i++)
        if (x->dims[lb[i]] != w->dims[rb[i]] || in_list(rb[i], rc, nrc) || in_list(rb[i], rg, nrg))
            return ir__ip_fail(c, AP_EINVALID, "batch dimension %d differs between lhs and rhs", i);
    for (int i = 0; i < nlc; i++)
        if (x->dims[lc[i]] != w->dims[rc[i]] || in_list(lc[i], lb, nlb) || in_list(rc[i], rg, nrg))
            return ir__ip_fail(c, AP_EINVALID, "contracting dimension %d differs between lhs and rhs", i);
    int gr = gs->rank;
    int64_t ng = gs->dims[gr - 1];
    if (gr - 1 > x->rank || (mode == 1 && ng != w->dims[rg[0]]) || (mode == 2 && ng < 1))
        return ir__ip_fail(c, AP_EINVALID, "group_sizes do not fit the operands");
    for (int d = 0; d < gr - 1; d++)
        if (gs->dims[d] != x->dims[d])
            return ir__ip_fail(c, AP_EINVALID, "group_sizes' dimension %d is not the lhs's", d);
    if (mode == 1 && ng < 1)
        return ir__ip_fail(c, AP_EINVALID, "mode 1 needs at least one group");
    /* free dimensions, in order */
    int64_t lf[IR_MAX_RANK], rf[IR_MAX_RANK];
    int nlf = 0, nrf = 0;
    for (int d = 0; d < x->rank; d++)
        if (!in_list(d, lb, nlb) && !in_list(d, lc, nlc))
            lf[nlf++] = d;
    for (int d = 0; d < w->rank; d++)
        if (!in_list(d, rb, nrb) && !in_list(d, rc, nrc) && !in_list(d, rg, nrg))
            rf[nrf++] = d;
    int off = mode == 2 ? 1 : 0;
    int rc2 = ir__ip_new_result(c, 0, &out[0]);
    if (rc2 < 0)
        return rc2;
    ir_tensor *y = out[0];
    bool fits = y->kind == IR_TENSOR_ARRAY && y->elem == x->elem && y->rank == off + nlb + nlf + nrf &&
                (mode != 2 || y->dims[0] == ng);
    for (int i = 0; fits && i < nlb; i++)
        fits = y->dims[off + i] == x->dims[lb[i]];
    for (int i = 0; fits && i < nlf; i++)
        fits = y->dims[off + nlb + i] == x->dims[lf[i]];
    for (int i = 0; fits && i < nrf; i++)
        fits = y->dims[off + nlb + nlf + i] == w->dims[rf[i]];
    if (!fits)
        return ir__ip_fail(c, AP_ETYPE, "its result type is not the mode %d result of its operands", mode);
    if (y->numel == 0)
        return 0;
    int64_t xs[IR_MAX_RANK], ws[IR_MAX_RANK], gst[IR_MAX_RANK], kd[RD_MAX];
    ip_strides(x->rank, x->dims, xs);
    ip_strides(w->rank, w->dims, ws);
    ip_strides(gr, gs->dims, gst);
    int64_t nk = 1;
    for (int i = 0; i < nlc; i++) {
        kd[i] = x->dims[lc[i]];
        nk *= kd[i];
    }
    size_t eb = ip_eb(e);
    int64_t yi[IR_MAX_RANK] = {0}, xi[IR_MAX_RANK], ki[RD_MAX];
    int64_t yoff = 0;
    do {
        for (int i = 0; i < nlb; i++)
            xi[lb[i]] = yi[off + i];
        for (int i = 0; i < nlf; i++)
            xi[lf[i]] = yi[off + nlb + i];
        int64_t wbase = 0;
        for (int i = 0; i < nlb; i++)
            wbase += yi[off + i] * ws[rb[i]];
        for (int i = 0; i < nrf; i++)
            wbase += yi[off + nlb + nlf + i] * ws[rf[i]];
        int64_t g0 = mode == 2 ? yi[0] : 0, g1 = mode == 1 ? ng : g0 + 1;
        double total = 0;
        for (int64_t g = g0; g < g1; g++) {
            double acc = 0;
            memset(ki, 0, sizeof ki);
            for (int64_t k = 0; k < nk; k++) {
                int64_t xoff = 0, woff = wbase + (mode == 1 ? g * ws[rg[0]] : 0);
                for (int i = 0; i < nlc; i++)
                    xi[lc[i]] = ki[i];
                for (int d = 0; d < x->rank; d++)
                    xoff += xi[d] * xs[d];
                for (int i = 0; i < nlc; i++)
                    woff += ki[i] * ws[rc[i]];
                double v = ip_ldf(e, x->data + (size_t)xoff * eb);
                if (mode != 3) { /* the mask of group g at this lhs element */
                    int64_t goff = 0, start = 0;
                    for (int d = 0; d < gr - 1; d++)
                        goff += xi[d] * gst[d];
                    for (int64_t j = 0; j < g; j++)
                        start += ip_index_at(gs, goff + j * gst[gr - 1]);
                    int64_t limit = start + ip_index_at(gs, goff + g * gst[gr - 1]);
                    if (!(xi[lr[0]] >= start && xi[lr[0]] < limit))
                        v = 0;
                }
                acc += v * ip_ldf(e, w->data + (size_t)woff * eb);
                for (int i = nlc - 1; i >= 0; i--) {
                    if (++ki[i] < kd[i])
                        break;
                    ki[i] = 0;
                }
            }
            uint8_t b[8];
            ip_stf(e, b, acc);
            double d = ip_ldf(e, b);
            if (g == g0)
                total = d;
            else {
                ip_stf(e, b, total + d);
                total = ip_ldf(e, b);
            }
        }
        ip_stf(e, y->data + (size_t)yoff * eb, total);
        yoff++;
    } while (ip_next(y->rank, y->dims, yi));
    return 0;
}
