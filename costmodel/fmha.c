/*
 * fmha.c - the flops of cuDNN's fused attention (ir_fmha_get in ir.h), for
 * cost__op_cost.  A fused kernel: its HBM traffic is its operands and
 * results read and written once (the [s, t] scores never leave the chip),
 * which the caller counts as for any op; here is the arithmetic.  Each
 * (query row, key) pair the mask keeps costs, per head:
 *   forward   2 d (q.k) + 2 d (p v) multiply-adds as matmul flops, and a
 *             few vector flops for the scale, max, exp and sum;
 *   backward  2 d each for the recomputed q.k, dV += p dO, dP = dO.v,
 *             dQ += dS k and dK += dS q (10 d matmul flops, 2.5 times the
 *             forward's, as FlashAttention-2 counts), and the exp again.
 * A causal mask keeps min(i + 1, t) keys of query row i.
 */
#include "cost_int.h"

#define FMHA_VECTOR_FLOPS 5.0 /* per pair: scale, max, subtract, exp, sum */

bool cost__fmha_flops(const ir_op *op, const ir_type *const *ot, double *flops, double *matmul)
{
    ir_fmha f;
    ap_error err;
    if (ir_fmha_get(op, &f, &err) < 0 || op->n_operands < 3)
        return false;
    const ir_type *q = ot[0], *k = ot[1];
    if (!q || !k || q->kind != IR_T_TENSOR || k->kind != IR_T_TENSOR || q->rank != 4 || k->rank != 4)
        return false;
    double b = (double)q->dims[0], s = (double)q->dims[1], h = (double)q->dims[2], d = (double)q->dims[3],
           t = (double)k->dims[1];
    double rows;                       /* (query, key) pairs per head */
    if (!f.causal)
        rows = s * t;
    else if (s <= t)
        rows = s * (s + 1) / 2;
    else
        rows = t * (t + 1) / 2 + (s - t) * t;
    double pairs = b * h * rows;
    *matmul = (f.kind == IR_FMHA_FWD ? 4.0 : 10.0) * d * pairs;
    *flops = *matmul + FMHA_VECTOR_FLOPS * pairs;
    return true;
}
