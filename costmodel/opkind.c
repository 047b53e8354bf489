/*
 * opkind.c - what kind of op an op is, for the cost model's two passes:
 * elementwise (fusible), alias (its results live in its operands' buffers:
 * bitcast reshapes and broadcasts, tuple elements, barriers, annotations).
 * A leaf: prepare.c and graph.c both ask these questions, and neither
 * should depend on the other to answer them.
 */
#include "cost_int.h"

#include <string.h>

/* A reshape that only regroups major dims (the minor-most dim is unchanged)
 * or only adds or drops unit dims: a bitcast on every backend, so free, and
 * its result lives in its operand's buffer. */
bool cost__is_bitcast_reshape(const ir_op *op, const ir_type *a, const ir_type *b)
{
    if (op->opcode != IR_OP_RESHAPE || op->n_operands != 1 || op->n_results != 1)
        return false;
    if (!a || !b || a->kind != IR_T_TENSOR || b->kind != IR_T_TENSOR || a->rank < 0 || b->rank < 0)
        return false;
    if (a->rank > 0 && b->rank > 0 && a->dims[a->rank - 1] == b->dims[b->rank - 1])
        return true;
    int i = 0, j = 0;
    for (;;) {
        while (i < a->rank && a->dims[i] == 1)
            i++;
        while (j < b->rank && b->dims[j] == 1)
            j++;
        if (i == a->rank || j == b->rank)
            return i == a->rank && j == b->rank;
        if (a->dims[i++] != b->dims[j++])
            return false;
    }
}

/* A broadcast_in_dim that only inserts unit dims (as many elements in as
 * out, operand dims kept in order): JAX writes one before every
 * dynamic_update_slice of a scan, [48,2048] -> [1,48,2048].  A bitcast like
 * the reshapes above. */
bool cost__is_bitcast_broadcast(const ir_op *op, const ir_type *a, const ir_type *b)
{
    if (op->opcode != IR_OP_BROADCAST_IN_DIM || op->n_operands != 1 || op->n_results != 1)
        return false;
    if (!a || !b || a->kind != IR_T_TENSOR || b->kind != IR_T_TENSOR || a->rank < 0 || b->rank < a->rank)
        return false;
    int64_t d[IR_MAX_RANK];
    int n = ir_attr_int_list(ir_op_attr(op, "broadcast_dimensions"), d, IR_MAX_RANK);
    if (n != a->rank)
        return false;
    for (int i = 0; i < n; i++)
        if (d[i] < 0 || d[i] >= b->rank || (i > 0 && d[i] <= d[i - 1]) || a->dims[i] < 0 || a->dims[i] != b->dims[d[i]])
            return false;
    for (int j = 0; j < b->rank; j++)
        if (b->dims[j] != 1) {
            bool kept = false;
            for (int i = 0; i < n && !kept; i++)
                kept = d[i] == j;
            if (!kept)
                return false;
        }
    return true;
}

/* Whether op's results share its operands' buffers (result i in operand i's,
 * or in operand 0's); a reshape decides by the types it has (a, b). */
bool cost__is_alias_op(const ir_op *op, const ir_type *a, const ir_type *b)
{
    if (op->opcode == IR_OP_GET_TUPLE_ELEMENT || op->opcode == IR_OP_OPTIMIZATION_BARRIER ||
        cost__is_bitcast_reshape(op, a, b) || cost__is_bitcast_broadcast(op, a, b))
        return true;
    /* custom calls that annotate (Sharding, SPMDFullToShardShape, ...): XLA's
     * SPMD partitioner, or its sharding remover on one device, deletes them */
    if (op->opcode == IR_OP_CUSTOM_CALL && ir_custom_call_is_identity(op))
        return true;
    return op->opcode == IR_OP_UNKNOWN && op->n_operands == op->n_results &&
           (strcmp(op->name, "sdy.sharding_constraint") == 0 || strcmp(op->name, "sdy.propagation_barrier") == 0);
}

/* Bytes as the integer the reports carry (saturating: a huge program's
 * estimate stays positive). */
int64_t cost__clamp_bytes(double b) { return b >= 9.2e18 ? INT64_MAX : (int64_t)b; }
