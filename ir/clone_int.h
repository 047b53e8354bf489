/*
 * clone_int.h - private to the ir library: copying ops into a module.
 */
#ifndef CLONE_INT_H
#define CLONE_INT_H

#include "ir_int.h"

typedef struct ir_cloner {
    ir_module *dst;
    ir_ptrmap map; /* source value -> index into tab */
    ir_value **tab;
    uint32_t n, cap;
    /* values not in the map (captured from outside what is cloned) */
    ir_value *(*resolve)(void *ctx, const ir_value *v);
    void *resolve_ctx;
    const ir_value *failed_value; /* the operand nothing could resolve */
    bool oom;
} ir_cloner;

void ir__cloner_init(ir_cloner *c, ir_module *dst);
void ir__cloner_free(ir_cloner *c);
bool ir__cloner_map(ir_cloner *c, const ir_value *from, ir_value *to);
ir_value *ir__cloner_get(ir_cloner *c, const ir_value *v);
/* Copies src (and its regions) into c->dst, detached.  Operands come from
 * `operands` when given, else from the map; result types from
 * `result_types` when given, else copies of src's.  Its results are added to
 * the map.  NULL on failure (c->oom, or c->failed_value unresolved). */
ir_op *ir__clone_op(ir_cloner *c, const ir_op *src, ir_value *const *operands, const ir_type *const *result_types);

#endif
