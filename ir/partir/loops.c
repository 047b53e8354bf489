/*
 * loops.c - the PartIR:Core loop view of a partition state, for people:
 * every op with a loop nest printed as nested `loop` ops whose bodies
 * slice the operands by the loop indices (paper section 5), tiling and
 * atomic actions on values as identity loops.  Values are global tensors;
 * names are positional: %argN for arguments, %vK for the K-th value
 * defined at the top level of the function, %vK.t for a value after its
 * tiling/atomic identity op.
 */
#include "partir_int.h"

#include <stdio.h>

typedef struct lv {
    const ir_partition *p;
    ap_buf *b;
    int tmp;
} lv;

static void val_name(lv *x, uint32_t v, bool through_vop)
{
    const ir_pctx *c = x->p->ctx;
    if (c->val_op[v] < 0)
        ap_buf_printf(x->b, "%%arg%u", v);
    else
        ap_buf_printf(x->b, "%%v%u", v - c->n_args);
    if (through_vop && x->p->vop_of[v] >= 0)
        ap_buf_puts(x->b, ".t");
}

static void indent(lv *x, int n)
{
    for (int i = 0; i < n; i++)
        ap_buf_puts(x->b, "  ");
}

static void action_text(lv *x, uint32_t e, uint32_t res_index)
{
    const ir_pctx *c = x->p->ctx;
    int8_t s = tmr_spec(c, e)[res_index];
    if (s >= 0)
        ap_buf_printf(x->b, "#tile<%d>", s);
    else if (s == SP_SUM)
        ap_buf_printf(x->b, "#sum<%s>", ir_red_name((ir_red)c->entries[e].red));
    else
        ap_buf_puts(x->b, "#any");
}

/* Prints one op (real: its original text form with sliced operands; or an
 * identity op) inside its loops. */
static void print_nest(lv *x, uint32_t op, bool is_id, uint32_t id_val, int level)
{
    const ir_partition *p = x->p;
    const ir_pctx *c = p->ctx;
    uint32_t no = is_id ? 1 : c->ops[op]->n_operands, nr = is_id ? 1 : c->ops[op]->n_results;
    const ir_loop *nest = nest_of(p, op);
    int depth = p->nlen[op];
    for (int k = 0; k < depth; k++) {
        indent(x, level + k);
        ap_buf_printf(x->b, "loop \"%s\" [", c->mesh.names[nest[k].axis]);
        for (uint32_t j = 0; j < nr; j++) {
            if (j)
                ap_buf_puts(x->b, ", ");
            action_text(x, nest[k].entry, no + j);
        }
        ap_buf_printf(x->b, "] (%%r%s: range<%lld>) {\n", c->mesh.names[nest[k].axis],
                      (long long)c->mesh.sizes[nest[k].axis]);
    }
    int in = level + depth;
    /* operands, sliced by the loops that slice them */
    int first_tmp = x->tmp;
    for (uint32_t i = 0; i < no; i++) {
        uint32_t v = is_id ? id_val : c->opd_val[c->opd0[op] + i];
        bool sliced = false;
        for (int k = 0; k < depth; k++) {
            int8_t s = tmr_spec(c, nest[k].entry)[i];
            if (s == SP_NONE)
                continue;
            indent(x, in);
            ap_buf_printf(x->b, "%%s%d = ", x->tmp);
            if (s >= 0)
                ap_buf_printf(x->b, "slice %d ", s);
            else
                ap_buf_puts(x->b, "piece ");
            if (sliced)
                ap_buf_printf(x->b, "%%s%d", x->tmp - 1);
            else
                val_name(x, v, !is_id);
            ap_buf_printf(x->b, "[%%r%s]\n", c->mesh.names[nest[k].axis]);
            x->tmp++;
            sliced = true;
        }
        if (!sliced) {
            indent(x, in);
            ap_buf_printf(x->b, "%%s%d = ", x->tmp++);
            val_name(x, v, !is_id);
            ap_buf_putc(x->b, '\n');
        }
    }
    indent(x, in);
    if (is_id) {
        ap_buf_printf(x->b, "yield %%s%d\n", x->tmp - 1);
    } else {
        const ir_op *o = c->ops[op];
        ap_buf_printf(x->b, "%%y = \"%s\"(", o->name);
        /* the last slice of each operand */
        int t = first_tmp;
        for (uint32_t i = 0; i < no; i++) {
            int count = 0;
            for (int k = 0; k < depth; k++)
                count += tmr_spec(c, nest[k].entry)[i] != SP_NONE;
            t += count ? count : 1;
            ap_buf_printf(x->b, i ? ", %%s%d" : "%%s%d", t - 1);
        }
        ap_buf_puts(x->b, ")");
        if (o->n_attrs) {
            ap_buf_puts(x->b, " {");
            for (uint32_t a = 0; a < o->n_attrs; a++) {
                ap_buf_printf(x->b, a ? ", %s = " : "%s = ", o->attrs[a].name);
                ir_attr_print(x->b, o->attrs[a].value);
            }
            ap_buf_putc(x->b, '}');
        }
        if (o->n_regions)
            ap_buf_printf(x->b, " (%u regions)", o->n_regions);
        ap_buf_puts(x->b, "\n");
        indent(x, in);
        ap_buf_puts(x->b, "yield %y\n");
    }
    for (int k = depth - 1; k >= 0; k--) {
        indent(x, level + k);
        ap_buf_puts(x->b, "}\n");
    }
}

/* Where a loop's or a conditional's parts begin: their ops are listed
 * flat, in the order they are partitioned (notes in partition.c). */
static void region_comment(const ir_pctx *c, uint32_t op, ap_buf *b)
{
    for (uint32_t gi = 0; gi < c->n_groups; gi++) {
        const pgroup *g = &c->groups[gi];
        unsigned line = g->src->src_line, col = g->src->src_col;
        if (op == g->carry0 && g->is_barrier)
            ap_buf_printf(b, "  // optimization_barrier at %u:%u, one identity per operand\n", line, col);
        else if (op == g->carry0 && g->is_case)
            ap_buf_printf(b, "  // %s at %u:%u: its index, then each branch's ops, then its results\n", g->src->name, line,
                          col);
        else if (op == g->carry0)
            ap_buf_printf(b, "  // stablehlo.while at %u:%u: %u carried values (init, yield) -> (in the body, in the "
                             "condition, after the loop), then its condition and body\n",
                          line, col, g->n);
        if (g->is_barrier)
            continue;
        if (g->is_case) {
            for (uint32_t r = 0; r < g->n_br; r++)
                if (op == c->branches[g->br0 + r].begin)
                    ap_buf_printf(b, "  // branch #%u of the %s at %u:%u\n", r, g->src->name, line, col);
            if (op == g->merge0)
                ap_buf_printf(b, "  // results of the %s at %u:%u\n", g->src->name, line, col);
        } else {
            if (op == g->cond0)
                ap_buf_printf(b, "  // condition of the while at %u:%u\n", line, col);
            if (op == g->body0)
                ap_buf_printf(b, "  // body of the while at %u:%u\n", line, col);
        }
    }
}

int ir_print_loops(const ir_partition *p, ap_buf *b)
{
    const ir_pctx *c = p->ctx;
    lv x = {p, b, 0};
    ap_buf_printf(b, "// PartIR:Core loop view of @%s over mesh {", ir_func_name(c->func));
    for (int a = 0; a < c->mesh.n_axes; a++)
        ap_buf_printf(b, a ? ", %s:%lld" : "%s:%lld", c->mesh.names[a], (long long)c->mesh.sizes[a]);
    ap_buf_puts(b, "}\n");
    ap_buf_printf(b, "func @%s(", ir_func_name(c->func));
    for (uint32_t a = 0; a < c->n_args; a++) {
        ap_buf_printf(b, a ? ", %%arg%u: " : "%%arg%u: ", a);
        ir_type_print(b, val_type(c, a));
        const char *name = ir_func_arg_name(c->func, a);
        if (name)
            ap_buf_printf(b, " loc(\"%s\")", name);
    }
    ap_buf_puts(b, ") {\n");
    /* identity ops of arguments first */
    for (uint32_t k = 0; k < p->n_vops; k++) {
        uint32_t v = p->vops[k].val;
        if (c->val_op[v] >= 0)
            continue;
        ap_buf_puts(b, "  ");
        val_name(&x, v, true);
        ap_buf_puts(b, " =\n");
        print_nest(&x, vop_id(p, k), true, v, 2);
    }
    for (uint32_t op = 0; op < c->n_ops; op++) {
        const ir_op *o = c->ops[op];
        region_comment(c, op, b);
        ap_buf_puts(b, "  ");
        for (uint32_t j = 0; j < o->n_results; j++) {
            if (j)
                ap_buf_puts(b, ", ");
            val_name(&x, c->op_val0[op] + j, false);
        }
        if (o->n_results)
            ap_buf_puts(b, " = ");
        if (!p->nlen[op])
            ap_buf_puts(b, "// no loop\n");
        else
            ap_buf_puts(b, "\n");
        print_nest(&x, op, false, 0, 2);
        for (uint32_t j = 0; j < o->n_results; j++) {
            uint32_t v = c->op_val0[op] + j;
            if (p->vop_of[v] < 0)
                continue;
            ap_buf_puts(b, "  ");
            val_name(&x, v, true);
            ap_buf_puts(b, " =\n");
            print_nest(&x, vop_id(p, (uint32_t)p->vop_of[v]), true, v, 2);
        }
    }
    ap_buf_puts(b, "  return ");
    for (uint32_t r = 0; r < c->n_ret; r++) {
        if (r)
            ap_buf_puts(b, ", ");
        val_name(&x, c->ret_val[r], true);
    }
    ap_buf_puts(b, "\n}\n");
    return b->oom ? AP_ENOMEM : 0;
}
