/*
 * print.c - the canonical StableHLO printer.
 *
 * Registered ops print in the pretty form stablehlo-opt and JAX use when
 * their attributes are in the canonical shape that form expects (the
 * mirror of pretty.c); otherwise, and for ops of other dialects without
 * a template, in MLIR's generic form.  Values are renumbered (%0, %1, ...,
 * %argN) in order of appearance; locations print inline when short and as
 * #locN aliases after the module otherwise.  Printing a parsed module and
 * parsing the text gives the same IR, and printing is a fixed point.
 */
#include "ir_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* -------------------------------------------------------------- printer */

#define ARG_BIT 0x80000000u

typedef struct printer {
    ap_buf *b;
    bool no_locs, generic;
    ir_ptrmap names;   /* value (block arg or results[0]) -> number | ARG_BIT */
    uint32_t next_result, next_arg;
    /* the function being printed, and whether a value defined outside it
     * was numbered while it was: then the numbering must go on after it */
    const ir_op *cur_func;
    bool escaped;
    ir_ptrmap loc_alias; /* loc -> alias number */
    const ir_loc **aliases;
    uint32_t n_aliases, cap_aliases;
    bool oom;
} printer;

static void indent(printer *pr, int level)
{
    for (int i = 0; i < level; i++)
        ap_buf_puts(pr->b, "  ");
}

/* Is v defined in a region nested (at any depth) in op f? */
static bool defined_inside(const ir_value *v, const ir_op *f)
{
    const ir_block *b = v->def ? v->def->parent : v->block;
    while (b && b->parent) {
        const ir_op *owner = b->parent->parent;
        if (owner == f)
            return true;
        if (!owner)
            break;
        b = owner->parent;
    }
    return false;
}

static uint32_t value_code(printer *pr, const ir_value *v)
{
    const void *key = v->def ? (const void *)&v->def->results[0] : (const void *)v;
    uint32_t code;
    if (ir__map_get(&pr->names, key, &code))
        return code;
    code = v->def ? pr->next_result++ : (pr->next_arg++ | ARG_BIT);
    if (!ir__map_put(&pr->names, key, code))
        pr->oom = true;
    if (pr->cur_func && !pr->escaped && !defined_inside(v, pr->cur_func))
        pr->escaped = true;
    return code;
}

static void print_value(printer *pr, const ir_value *v)
{
    char buf[32];
    int n;
    if (!v) {
        ap_buf_puts(pr->b, "%<null>");
        return;
    }
    uint32_t code = value_code(pr, v);
    if (code & ARG_BIT)
        n = snprintf(buf, sizeof buf, "%%arg%u", code & ~ARG_BIT);
    else if (v->def->n_results > 1)
        n = snprintf(buf, sizeof buf, "%%%u#%u", code, v->index);
    else
        n = snprintf(buf, sizeof buf, "%%%u", code);
    ap_buf_put(pr->b, buf, (size_t)n);
}

static void print_values(printer *pr, ir_value *const *vs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            ap_buf_puts(pr->b, ", ");
        print_value(pr, vs[i]);
    }
}

static void print_type_list(printer *pr, ir_value *const *vs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            ap_buf_puts(pr->b, ", ");
        ir_type_print(pr->b, vs[i]->type);
    }
}

static void print_result_types(printer *pr, const ir_op *op)
{
    for (uint32_t i = 0; i < op->n_results; i++) {
        if (i)
            ap_buf_puts(pr->b, ", ");
        ir_type_print(pr->b, op->results[i].type);
    }
}

/* (T, T) -> R  or  -> (R, R) */
static void print_functional(printer *pr, const ir_op *op)
{
    ap_buf_putc(pr->b, '(');
    print_type_list(pr, op->operands, op->n_operands);
    ap_buf_puts(pr->b, ") -> ");
    bool paren = op->n_results != 1 || op->results[0].type->kind == IR_T_FUNCTION;
    if (paren)
        ap_buf_putc(pr->b, '(');
    print_result_types(pr, op);
    if (paren)
        ap_buf_putc(pr->b, ')');
}

/* --------------------------------------------------------- locations */

static bool loc_simple(const ir_loc *l)
{
    return l->kind == IR_L_FILE || l->kind == IR_L_OPAQUE || l->kind == IR_L_UNKNOWN ||
           (l->kind == IR_L_NAME && !l->a);
}

static void print_loc_ref(printer *pr, const ir_loc *l);

static uint32_t loc_alias(printer *pr, const ir_loc *l)
{
    uint32_t k;
    if (ir__map_get(&pr->loc_alias, l, &k))
        return k;
    if (pr->n_aliases == pr->cap_aliases) {
        uint32_t cap = pr->cap_aliases ? pr->cap_aliases * 2 : 64;
        const ir_loc **v = ap_realloc(pr->aliases, sizeof *v * cap);
        if (!v) {
            pr->oom = true;
            return 0;
        }
        pr->aliases = v;
        pr->cap_aliases = cap;
    }
    k = pr->n_aliases;
    pr->aliases[pr->n_aliases++] = l;
    if (!ir__map_put(&pr->loc_alias, l, k))
        pr->oom = true;
    return k;
}

/* The body of a location with composite children referred to by alias. */
static void print_loc_body(printer *pr, const ir_loc *l)
{
    switch ((ir_loc_kind)l->kind) {
    case IR_L_NAME:
        ir__print_string(pr->b, l->str, strlen(l->str));
        if (l->a) {
            ap_buf_putc(pr->b, '(');
            print_loc_ref(pr, l->a);
            ap_buf_putc(pr->b, ')');
        }
        break;
    case IR_L_CALLSITE:
        ap_buf_puts(pr->b, "callsite(");
        print_loc_ref(pr, l->a);
        ap_buf_puts(pr->b, " at ");
        print_loc_ref(pr, l->b);
        ap_buf_putc(pr->b, ')');
        break;
    case IR_L_FUSED:
        ap_buf_puts(pr->b, "fused");
        if (l->str) {
            ap_buf_putc(pr->b, '<');
            ap_buf_puts(pr->b, l->str);
            ap_buf_putc(pr->b, '>');
        }
        ap_buf_putc(pr->b, '[');
        for (int i = 0; i < l->n; i++) {
            if (i)
                ap_buf_puts(pr->b, ", ");
            print_loc_ref(pr, l->locs[i]);
        }
        ap_buf_putc(pr->b, ']');
        break;
    default:
        ir__print_loc_inline(pr->b, l);
        break;
    }
}

static void print_loc_ref(printer *pr, const ir_loc *l)
{
    if (loc_simple(l))
        ir__print_loc_inline(pr->b, l);
    else
        ap_buf_printf(pr->b, "#loc%u", loc_alias(pr, l) + 1);
}

static void print_loc(printer *pr, const ir_loc *l)
{
    if (pr->no_locs || !l || l->kind == IR_L_UNKNOWN || l->kind == IR_L_PENDING)
        return;
    ap_buf_puts(pr->b, " loc(");
    print_loc_ref(pr, l);
    ap_buf_putc(pr->b, ')');
}

static void print_alias_table(printer *pr)
{
    /* printing an alias may discover more aliases: walk until stable */
    for (uint32_t i = 0; i < pr->n_aliases; i++) {
        ap_buf_printf(pr->b, "#loc%u = loc(", i + 1);
        print_loc_body(pr, pr->aliases[i]);
        ap_buf_puts(pr->b, ")\n");
    }
}

/* ---------------------------------------------------------- attributes */

static bool is_skipped(const char *name, const char *const *skip)
{
    for (int i = 0; skip && skip[i]; i++)
        if (strcmp(name, skip[i]) == 0)
            return true;
    return false;
}

/* ` {a = 1, b}` of the attributes not in skip (nothing when none) */
static void print_attr_dict(printer *pr, const ir_named_attr *attrs, uint32_t n, const char *const *skip,
                            const char *prefix)
{
    bool any = false;
    for (uint32_t i = 0; i < n; i++) {
        if (is_skipped(attrs[i].name, skip))
            continue;
        ap_buf_puts(pr->b, any ? ", " : prefix);
        any = true;
        if (ir__is_bare_ident(attrs[i].name, strlen(attrs[i].name)))
            ap_buf_puts(pr->b, attrs[i].name);
        else
            ir__print_string(pr->b, attrs[i].name, strlen(attrs[i].name));
        if (attrs[i].value->kind != IR_A_UNIT) {
            ap_buf_puts(pr->b, " = ");
            ir_attr_print(pr->b, attrs[i].value);
        }
    }
    if (any)
        ap_buf_putc(pr->b, '}');
}

static void print_i64_list(printer *pr, const int64_t *v, int n)
{
    ap_buf_putc(pr->b, '[');
    for (int i = 0; i < n; i++)
        ap_buf_printf(pr->b, i ? ", %" PRId64 : "%" PRId64, v[i]);
    ap_buf_putc(pr->b, ']');
}

static void print_int_array_attr(printer *pr, const ir_attr *a)
{
    ap_buf_putc(pr->b, '[');
    for (int i = 0; i < a->u.arr.n; i++)
        ap_buf_printf(pr->b, i ? ", %" PRId64 : "%" PRId64, a->u.arr.items[i]->u.i);
    ap_buf_putc(pr->b, ']');
}

/* ------------------------------------------- canonical attribute shapes */

static bool is_i64_scalar(const ir_type *t) { return t && t->kind == IR_T_SCALAR && t->elem == IR_E_I64; }

static bool attr_i64_array(const ir_op *op, const char *name, bool required)
{
    ir_attr *a = ir_op_attr(op, name);
    if (!a)
        return !required;
    return a->kind == IR_A_DENSE_ARRAY && a->u.darr.ints && is_i64_scalar(a->type);
}

static bool attr_i64_array_any(const ir_op *op, const char *name, bool required)
{
    ir_attr *a = ir_op_attr(op, name);
    if (!a)
        return !required;
    return a->kind == IR_A_DENSE_ARRAY && (a->u.darr.ints || a->u.darr.n == 0) && is_i64_scalar(a->type);
}

static bool attr_typed_int(const ir_op *op, const char *name, ir_elem e)
{
    ir_attr *a = ir_op_attr(op, name);
    return a && a->kind == IR_A_INT && a->type && a->type->kind == IR_T_SCALAR && a->type->elem == e;
}

/* #stablehlo<kind VALUE> with a plain identifier VALUE */
static const char *enum_value(const ir_attr *a, const char *kind)
{
    if (!a || a->kind != IR_A_DIALECT || a->u.dia.n || !a->u.dia.body || strcmp(a->u.dia.name, "stablehlo") != 0)
        return NULL;
    size_t kl = strlen(kind);
    const char *b = a->u.dia.body;
    if (strncmp(b, kind, kl) != 0 || b[kl] != ' ')
        return NULL;
    const char *v = b + kl + 1;
    if (!ir__is_bare_ident(v, strlen(v)) || strchr(v, '.'))
        return NULL;
    return v;
}

static bool untyped_int_array(const ir_attr *a)
{
    if (!a || a->kind != IR_A_ARRAY)
        return false;
    for (int i = 0; i < a->u.arr.n; i++)
        if (a->u.arr.items[i]->kind != IR_A_INT || a->u.arr.items[i]->type)
            return false;
    return true;
}

static bool precision_ok(const ir_attr *a)
{
    if (!a)
        return true;
    if (a->kind != IR_A_ARRAY || a->u.arr.n == 0)
        return false;
    for (int i = 0; i < a->u.arr.n; i++)
        if (!enum_value(a->u.arr.items[i], "precision"))
            return false;
    return true;
}

static void print_precision(printer *pr, const ir_attr *a)
{
    ap_buf_puts(pr->b, ", precision = [");
    for (int i = 0; i < a->u.arr.n; i++) {
        if (i)
            ap_buf_puts(pr->b, ", ");
        ap_buf_puts(pr->b, enum_value(a->u.arr.items[i], "precision"));
    }
    ap_buf_putc(pr->b, ']');
}

/* dot_general's `algorithm = <...>` is a #stablehlo.dot_algorithm. */
static bool algorithm_ok(const ir_attr *a)
{
    return !a || (a->kind == IR_A_DIALECT && strcmp(a->u.dia.name, "stablehlo.dot_algorithm") == 0);
}

/* dot_dimension_numbers as the pretty parser builds them */
static bool dot_dims_ok(const ir_attr *a, const ir_attr *out[4])
{
    static const char *names[4] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                   "lhs_contracting_dimensions", "rhs_contracting_dimensions"};
    out[0] = out[1] = out[2] = out[3] = NULL;
    if (!a || a->kind != IR_A_DIALECT || strcmp(a->u.dia.name, "stablehlo.dot") != 0)
        return false;
    if (a->u.dia.n == 0)
        return a->u.dia.body && a->u.dia.body[0] == '\0';
    int k = 0;
    for (int i = 0; i < a->u.dia.n; i++) {
        while (k < 4 && strcmp(a->u.dia.params[i].name, names[k]) != 0)
            k++;
        if (k == 4 || !untyped_int_array(a->u.dia.params[i].value) || a->u.dia.params[i].value->u.arr.n == 0)
            return false;
        out[k++] = a->u.dia.params[i].value;
    }
    if (!out[0] != !out[1])
        return false;
    return true;
}

/* compact reduce body: ^bb0(%a, %b): %r = OP %a, %b; return %r */
static ir_opcode reduce_compact_op(const ir_op *op)
{
    if (op->n_regions != 1 || op->n_operands != 2)
        return IR_OP_UNKNOWN;
    const ir_region *r = &op->regions[0];
    if (r->n_blocks != 1)
        return IR_OP_UNKNOWN;
    const ir_block *b = r->first;
    if (b->n_args != 2 || b->n_ops != 2)
        return IR_OP_UNKNOWN;
    const ir_op *body = b->first, *ret = b->last;
    const ir_type *et = op->operands[1]->type;
    if (ir_op_info_get((ir_opcode)body->opcode)->kind != IR_K_EW2 || body->n_operands != 2 ||
        body->n_results != 1 || body->operands[0] != &b->args[0] || body->operands[1] != &b->args[1] ||
        body->n_attrs || body->n_regions || body->tmpl || ret->opcode != IR_OP_RETURN || ret->n_operands != 1 ||
        ret->operands[0] != &body->results[0] || ret->n_attrs)
        return IR_OP_UNKNOWN;
    if (b->args[0].type != et || b->args[1].type != et || body->results[0].type != et)
        return IR_OP_UNKNOWN;
    if (b->args[0].loc || b->args[1].loc)
        return IR_OP_UNKNOWN;
    if (!ir_loc_equal(body->loc, op->loc) || !ir_loc_equal(ret->loc, op->loc))
        return IR_OP_UNKNOWN;
    return (ir_opcode)body->opcode;
}

/* Is t the part type of complex tensor type c (f32 of complex<f32>)? */
static bool is_complex_part(const ir_type *t, const ir_type *c)
{
    if (!t || !c || t->kind != IR_T_TENSOR || c->kind != IR_T_TENSOR || t->rank != c->rank ||
        t->encoding != c->encoding || !((c->elem == IR_E_C64 && t->elem == IR_E_F32) ||
                                        (c->elem == IR_E_C128 && t->elem == IR_E_F64)))
        return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] != c->dims[d])
            return false;
    return true;
}

/* Can the op's type be written as the one result type? */
static bool same_types(const ir_op *op)
{
    if (op->n_results != 1)
        return false;
    if (op->opcode == IR_OP_COMPLEX) {
        for (uint32_t i = 0; i < op->n_operands; i++)
            if (!is_complex_part(op->operands[i]->type, op->results[0].type))
                return false;
        return true;
    }
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (op->operands[i]->type != op->results[0].type)
            return false;
    return true;
}

/* ------------------------------------------- pretty forms: when they apply */

static bool form_ok_same(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_results == 1;
}

static bool form_ok_functional(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_results >= 1;
}

static bool form_ok_types(const ir_op *op, int fmt)
{
    return !op->n_regions && (op->n_results >= 1 || (op->opcode == IR_OP_OPTIMIZATION_BARRIER && op->n_operands == 0));
}

static bool form_ok_tuple(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_results == 1;
}

static bool form_ok_return(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_results == 0;
}

static bool form_ok_call(const ir_op *op, int fmt)
{
    ir_attr *c = ir_op_attr(op, "callee");
    return !op->n_regions && c && c->kind == IR_A_SYMREF;
}

static bool form_ok_select(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 3 && op->n_results == 1;
}

static bool form_ok_compare(const ir_op *op, int fmt)
{
    ir_attr *t = ir_op_attr(op, "compare_type");
    return !op->n_regions && op->n_operands == 2 && op->n_results == 1 &&
           enum_value(ir_op_attr(op, "comparison_direction"), "comparison_direction") &&
           (!t || enum_value(t, "comparison_type"));
}

static bool form_ok_constant(const ir_op *op, int fmt)
{
    ir_attr *v = ir_op_attr(op, "value");
    return !op->n_regions && op->n_operands == 0 && op->n_results == 1 && v &&
           (v->kind == IR_A_DENSE || v->kind == IR_A_DENSE_RESOURCE) && v->type == op->results[0].type;
}

static bool form_ok_iota(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 0 && op->n_results == 1 && attr_typed_int(op, "iota_dimension", IR_E_I64);
}

static bool form_ok_dynamic_iota(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && attr_typed_int(op, "iota_dimension", IR_E_I64);
}

static bool form_ok_broadcast_in_dim(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 &&
           attr_i64_array_any(op, "broadcast_dimensions", true);
}

static bool form_ok_dynamic_broadcast_in_dim(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 2 && op->n_results == 1 &&
           attr_i64_array_any(op, "broadcast_dimensions", true) &&
           attr_i64_array_any(op, "known_expanding_dimensions", false) &&
           attr_i64_array_any(op, "known_nonexpanding_dimensions", false);
}

static bool form_ok_transpose(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && attr_i64_array_any(op, "permutation", true);
}

static bool form_ok_reverse(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && attr_i64_array_any(op, "dimensions", true);
}

static bool form_ok_concatenate(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands >= 1 && op->n_results == 1 && attr_typed_int(op, "dimension", IR_E_I64);
}

static bool form_ok_slice(const ir_op *op, int fmt)
{
    ir_attr *s = ir_op_attr(op, "start_indices"), *l = ir_op_attr(op, "limit_indices"),
            *st = ir_op_attr(op, "strides");
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && attr_i64_array_any(op, "start_indices", true) &&
           attr_i64_array_any(op, "limit_indices", true) && attr_i64_array_any(op, "strides", true) &&
           s->u.darr.n == l->u.darr.n && s->u.darr.n == st->u.darr.n;
}

static bool form_ok_dynamic_slice(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands >= 1 && op->n_results == 1 && attr_i64_array_any(op, "slice_sizes", true);
}

static bool form_ok_pad(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 2 && op->n_results == 1 &&
           attr_i64_array_any(op, "edge_padding_low", true) && attr_i64_array_any(op, "edge_padding_high", true) &&
           attr_i64_array_any(op, "interior_padding", true);
}

static bool form_ok_dot(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 2 && op->n_results == 1 && precision_ok(ir_op_attr(op, "precision_config"));
}

static bool form_ok_dot_general(const ir_op *op, int fmt)
{
    const ir_attr *d[4];
    return !op->n_regions && op->n_operands == 2 && op->n_results == 1 &&
           dot_dims_ok(ir_op_attr(op, "dot_dimension_numbers"), d) &&
           precision_ok(ir_op_attr(op, "precision_config")) && algorithm_ok(ir_op_attr(op, "algorithm"));
}

static bool form_ok_convolution(const ir_op *op, int fmt)
{
    ir_attr *dn = ir_op_attr(op, "dimension_numbers"), *pad = ir_op_attr(op, "padding"),
            *rev = ir_op_attr(op, "window_reversal");
    if (op->n_regions || op->n_operands != 2 || op->n_results != 1 || !dn || dn->kind != IR_A_DIALECT ||
        strcmp(dn->u.dia.name, "stablehlo.conv") != 0 || dn->u.dia.n || !dn->u.dia.body ||
        strncmp(dn->u.dia.body, "raw", 3) == 0)
        return false;
    if (!attr_i64_array(op, "window_strides", false) || !attr_i64_array(op, "lhs_dilation", false) ||
        !attr_i64_array(op, "rhs_dilation", false))
        return false;
    if (pad && !(pad->kind == IR_A_DENSE && !pad->u.dense.text && pad->type->rank == 2 &&
                 pad->type->dims[1] == 2 && pad->type->elem == IR_E_I64 && !pad->u.dense.splat &&
                 pad->type->dims[0] > 0))
        return false;
    if (rev && !(rev->kind == IR_A_DENSE_ARRAY && rev->type->elem == IR_E_I1 && rev->u.darr.ints))
        return false;
    return true;
}

static bool form_ok_reduce(const ir_op *op, int fmt)
{
    return op->n_regions == 1 && op->n_operands >= 2 && op->n_operands % 2 == 0 &&
           op->n_results == op->n_operands / 2 && attr_i64_array_any(op, "dimensions", true) &&
           op->regions[0].n_blocks == 1 && op->regions[0].first->n_args == op->n_operands;
}

static bool form_ok_while(const ir_op *op, int fmt)
{
    if (op->n_regions != 2 || op->n_results != op->n_operands)
        return false;
    for (int r = 0; r < 2; r++) {
        const ir_block *b = op->regions[r].first;
        if (!b || b->n_args != op->n_operands)
            return false;
        for (uint32_t i = 0; i < b->n_args; i++)
            if (b->args[i].type != op->operands[i]->type || b->args[i].type != op->results[i].type ||
                b->args[i].loc)
                return false;
    }
    return true;
}

static bool form_ok_custom_call(const ir_op *op, int fmt)
{
    ir_attr *t = ir_op_attr(op, "call_target_name");
    return !op->n_regions && t && t->kind == IR_A_STRING && t->u.str.len == strlen(t->u.str.s) && t->u.str.len > 0;
}

static bool form_ok_composite(const ir_op *op, int fmt)
{
    ir_attr *t = ir_op_attr(op, "name");
    return !op->n_regions && t && t->kind == IR_A_STRING;
}

static bool form_ok_get_tuple_element(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && attr_typed_int(op, "index", IR_E_I32);
}

static bool form_ok_fft(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 &&
           enum_value(ir_op_attr(op, "fft_type"), "fft_type") && attr_i64_array_any(op, "fft_length", true);
}

static bool form_ok_rng(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 3 && op->n_results == 1 &&
           enum_value(ir_op_attr(op, "rng_distribution"), "rng_distribution");
}

static bool form_ok_rng_bit_generator(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results >= 1 &&
           enum_value(ir_op_attr(op, "rng_algorithm"), "rng_algorithm");
}

static bool form_ok_reduce_precision(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 &&
           attr_typed_int(op, "exponent_bits", IR_E_I32) && attr_typed_int(op, "mantissa_bits", IR_E_I32);
}

static bool form_ok_cholesky(const ir_op *op, int fmt)
{
    ir_attr *lower = ir_op_attr(op, "lower");
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && (!lower || lower->kind == IR_A_BOOL);
}

static bool form_ok_get_dimension_size(const ir_op *op, int fmt)
{
    return !op->n_regions && op->n_operands == 1 && op->n_results == 1 && attr_typed_int(op, "dimension", IR_E_I64);
}

/* --------------------------------------------------------------- ops */

static void print_op(printer *pr, const ir_op *op, int level);
static void print_region(printer *pr, const ir_region *r, int level, bool entry_args_declared);

static void print_block_args(printer *pr, const ir_block *b)
{
    for (uint32_t i = 0; i < b->n_args; i++) {
        if (i)
            ap_buf_puts(pr->b, ", ");
        print_value(pr, &b->args[i]);
        ap_buf_puts(pr->b, ": ");
        ir_type_print(pr->b, b->args[i].type);
        print_loc(pr, b->args[i].loc);
    }
}

static void print_label(printer *pr, const ir_block *b)
{
    const ir_region *r = b->parent;
    uint32_t k = 0;
    for (const ir_block *x = r ? r->first : NULL; x && x != b; x = x->next)
        k++;
    ap_buf_printf(pr->b, "^bb%u", k);
}

static void print_region(printer *pr, const ir_region *r, int level, bool entry_args_declared)
{
    ap_buf_puts(pr->b, "{\n");
    for (const ir_block *b = r->first; b; b = b->next) {
        bool header = b != r->first || (b->n_args > 0 && !entry_args_declared);
        if (b == r->first && !entry_args_declared && b->n_args == 0 && r->n_blocks > 1)
            header = false;
        if (header) {
            indent(pr, level);
            print_label(pr, b);
            if (b->n_args) {
                ap_buf_putc(pr->b, '(');
                print_block_args(pr, b);
                ap_buf_putc(pr->b, ')');
            }
            ap_buf_puts(pr->b, ":\n");
        }
        for (const ir_op *op = b->first; op; op = op->next)
            print_op(pr, op, level + 1);
    }
    indent(pr, level);
    ap_buf_putc(pr->b, '}');
}

static void print_generic(printer *pr, const ir_op *op, int level)
{
    ap_buf_putc(pr->b, '"');
    ap_buf_puts(pr->b, op->name);
    ap_buf_puts(pr->b, "\"(");
    print_values(pr, op->operands, op->n_operands);
    ap_buf_putc(pr->b, ')');
    if (op->n_successors) {
        ap_buf_putc(pr->b, '[');
        for (uint32_t i = 0; i < op->n_successors; i++) {
            if (i)
                ap_buf_puts(pr->b, ", ");
            print_label(pr, op->successors[i]);
        }
        ap_buf_putc(pr->b, ']');
    }
    uint32_t n_props = op->opcode == IR_OP_UNKNOWN ? op->n_props : 0;
    if (n_props) {
        ap_buf_puts(pr->b, " <");
        print_attr_dict(pr, op->attrs, n_props, NULL, "{");
        ap_buf_putc(pr->b, '>');
    }
    if (op->n_regions) {
        ap_buf_puts(pr->b, " (");
        for (uint32_t i = 0; i < op->n_regions; i++) {
            if (i)
                ap_buf_puts(pr->b, ", ");
            print_region(pr, &op->regions[i], level, false);
        }
        ap_buf_putc(pr->b, ')');
    }
    if (op->n_attrs > n_props)
        print_attr_dict(pr, op->attrs + n_props, op->n_attrs - n_props, NULL, " {");
    ap_buf_puts(pr->b, " : ");
    print_functional(pr, op);
}

/* Does the template declare region r's entry arguments (`(%a: T) {`)?
 * Otherwise the region's own ^bb0(...) header declares them. */
static bool region_args_in_template(const ir_template *tp, uint32_t r)
{
    for (uint32_t i = 0; i < tp->n; i++)
        if (tp->pieces[i].kind == IR_TP_REGION_ARG && tp->pieces[i].region == r)
            return true;
    return false;
}

static void print_template(printer *pr, const ir_op *op, int level)
{
    ap_buf_puts(pr->b, op->name);
    for (uint32_t i = 0; i < op->tmpl->n; i++) {
        const ir_tmpl_piece *t = &op->tmpl->pieces[i];
        switch ((ir_tmpl_kind)t->kind) {
        case IR_TP_TEXT:
            ap_buf_put(pr->b, t->text, t->len);
            break;
        case IR_TP_OPERAND:
            print_value(pr, op->operands[t->index]);
            break;
        case IR_TP_SUCCESSOR:
            print_label(pr, op->successors[t->index]);
            break;
        case IR_TP_REGION:
            print_region(pr, &op->regions[t->index], level, region_args_in_template(op->tmpl, t->index));
            break;
        case IR_TP_LOC:
            ap_buf_puts(pr->b, "loc(");
            if (t->loc)
                print_loc_ref(pr, t->loc);
            else
                ap_buf_puts(pr->b, "unknown");
            ap_buf_putc(pr->b, ')');
            break;
        case IR_TP_REGION_ARG: {
            const ir_value *a = &op->regions[t->region].first->args[t->index];
            print_value(pr, a);
            ap_buf_puts(pr->b, ": ");
            ir_type_print(pr->b, a->type);
            print_loc(pr, a->loc);
            break;
        }
        }
    }
}

static const char *const no_skip[] = {NULL};

static void print_func(printer *pr, const ir_op *op, int level)
{
    static const char *const skip[] = {"sym_name", "sym_visibility", "function_type", "arg_attrs", "res_attrs", NULL};
    const ir_type *ft = ir_func_type(op);
    ir_attr *vis = ir_op_attr(op, "sym_visibility");
    ir_attr *aa = ir_op_attr(op, "arg_attrs"), *ra = ir_op_attr(op, "res_attrs");
    ir_block *entry = ir_func_entry(op);
    ir_attr name = {.kind = IR_A_SYMREF};
    const char *fname = ir_func_name(op);
    name.u.str.s = fname;
    name.u.str.len = strlen(fname);
    ap_buf_puts(pr->b, "func.func ");
    if (vis && vis->kind == IR_A_STRING) {
        ap_buf_puts(pr->b, vis->u.str.s);
        ap_buf_putc(pr->b, ' ');
    }
    ir_attr_print(pr->b, &name);
    ap_buf_putc(pr->b, '(');
    for (int i = 0; i < ft->n_inputs; i++) {
        if (i)
            ap_buf_puts(pr->b, ", ");
        if (entry) {
            print_value(pr, &entry->args[i]);
            ap_buf_puts(pr->b, ": ");
        }
        ir_type_print(pr->b, ft->elems[i]);
        if (aa && aa->kind == IR_A_ARRAY && i < aa->u.arr.n && aa->u.arr.items[i]->u.dict.n) {
            ap_buf_putc(pr->b, ' ');
            ir_attr_print(pr->b, aa->u.arr.items[i]);
        }
        if (entry)
            print_loc(pr, entry->args[i].loc);
    }
    ap_buf_putc(pr->b, ')');
    int n_out = ft->n_elems - ft->n_inputs;
    bool res_attrs = ra && ra->kind == IR_A_ARRAY;
    if (n_out > 0) {
        bool paren = n_out > 1 || res_attrs || ft->elems[ft->n_inputs]->kind == IR_T_FUNCTION;
        ap_buf_puts(pr->b, paren ? " -> (" : " -> ");
        for (int i = 0; i < n_out; i++) {
            if (i)
                ap_buf_puts(pr->b, ", ");
            ir_type_print(pr->b, ft->elems[ft->n_inputs + i]);
            if (res_attrs && i < ra->u.arr.n && ra->u.arr.items[i]->u.dict.n) {
                ap_buf_putc(pr->b, ' ');
                ir_attr_print(pr->b, ra->u.arr.items[i]);
            }
        }
        if (paren)
            ap_buf_putc(pr->b, ')');
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, skip, " attributes {");
    if (op->n_regions && op->regions[0].first) {
        ap_buf_putc(pr->b, ' ');
        print_region(pr, &op->regions[0], level, true);
    }
}

static void print_module_op(printer *pr, const ir_op *op, int level)
{
    static const char *const skip[] = {"sym_name", NULL};
    ir_attr *name = ir_op_attr(op, "sym_name");
    ap_buf_puts(pr->b, "module");
    if (name && name->kind == IR_A_STRING) {
        ir_attr sym = {.kind = IR_A_SYMREF};
        sym.u.str.s = name->u.str.s;
        sym.u.str.len = name->u.str.len;
        ap_buf_putc(pr->b, ' ');
        ir_attr_print(pr->b, &sym);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, skip, " attributes {");
    ap_buf_putc(pr->b, ' ');
    print_region(pr, &op->regions[0], level, true);
}

static void form_print_same(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    if (fmt == IR_FMT_REVERSE) {
        ir_attr *d = ir_op_attr(op, "dimensions");
        ap_buf_puts(b, ", dims = ");
        print_i64_list(pr, d->u.darr.ints, d->u.darr.n);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, fmt == IR_FMT_REVERSE ? (const char *const[]){"dimensions", NULL} : no_skip, " {");
    ap_buf_puts(b, " : ");
    if (same_types(op))
        ir_type_print(b, op->results[0].type);
    else
        print_functional(pr, op);
    return;
}

static void form_print_functional(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_types(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    if (op->opcode == IR_OP_OPTIMIZATION_BARRIER) {
        /* StableHLO's form: `attr-dict (operands ':' types)?`, `()` for
         * none; stablehlo-opt reads no dictionary after the operands. */
        print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " {");
        if (!op->n_operands) {
            ap_buf_puts(b, "()");
            return;
        }
        ap_buf_putc(b, ' ');
        print_values(pr, op->operands, op->n_operands);
        ap_buf_puts(b, " : ");
        print_result_types(pr, op);
        return;
    }
    if (op->n_operands) {
        ap_buf_putc(b, ' ');
        print_values(pr, op->operands, op->n_operands);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " {");
    if (op->n_results) {
        ap_buf_puts(b, " : ");
        print_result_types(pr, op);
    }
    return;
}

static void form_print_return(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    bool func = op->opcode == IR_OP_FUNC_RETURN; /* its attributes come first */
    if (func)
        print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " {");
    if (op->n_operands) {
        ap_buf_putc(b, ' ');
        print_values(pr, op->operands, op->n_operands);
    }
    if (!func)
        print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " {");
    if (op->n_operands) {
        ap_buf_puts(b, " : ");
        print_type_list(pr, op->operands, op->n_operands);
    }
    return;
}

static void form_print_call(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    ir_attr_print(b, ir_op_attr(op, "callee"));
    ap_buf_putc(b, '(');
    print_values(pr, op->operands, op->n_operands);
    ap_buf_putc(b, ')');
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"callee", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_select(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " {");
    ap_buf_puts(b, " : ");
    if (op->operands[1]->type == op->results[0].type && op->operands[2]->type == op->results[0].type) {
        ir_type_print(b, op->operands[0]->type);
        ap_buf_puts(b, ", ");
        ir_type_print(b, op->results[0].type);
    } else {
        print_functional(pr, op);
    }
    return;
}

static void form_print_compare(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ir_attr *t = ir_op_attr(op, "compare_type");
    ap_buf_puts(b, "  ");
    ap_buf_puts(b, enum_value(ir_op_attr(op, "comparison_direction"), "comparison_direction"));
    ap_buf_puts(b, ", ");
    print_values(pr, op->operands, op->n_operands);
    if (t) {
        ap_buf_puts(b, ",  ");
        ap_buf_puts(b, enum_value(t, "comparison_type"));
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"comparison_direction", "compare_type", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_constant(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"value", NULL}, " {");
    ap_buf_putc(b, ' ');
    ir_attr_print(b, ir_op_attr(op, "value"));
    return;
}

static void form_print_iota(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_printf(b, " dim = %" PRId64, ir_op_attr(op, "iota_dimension")->u.i);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"iota_dimension", NULL}, " {");
    ap_buf_puts(b, " : ");
    ir_type_print(b, op->results[0].type);
    return;
}

static void form_print_dynamic_iota(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_printf(b, ", dim = %" PRId64, ir_op_attr(op, "iota_dimension")->u.i);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"iota_dimension", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_dims(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    const char *an = fmt == IR_FMT_TRANSPOSE ? "permutation" : "broadcast_dimensions";
    ir_attr *d = ir_op_attr(op, an);
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    ap_buf_puts(b, ", dims = ");
    print_i64_list(pr, d->u.darr.ints, d->u.darr.n);
    const char *const skip[] = {an, "known_expanding_dimensions", "known_nonexpanding_dimensions", NULL};
    if (fmt == IR_FMT_DYNAMIC_BROADCAST_IN_DIM) {
        for (int k = 1; k <= 2; k++) {
            ir_attr *x = ir_op_attr(op, skip[k]);
            if (x) {
                ap_buf_printf(b, ", %s = ", skip[k]);
                print_i64_list(pr, x->u.darr.ints, x->u.darr.n);
            }
        }
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, skip, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_concatenate(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    ap_buf_printf(b, ", dim = %" PRId64, ir_op_attr(op, "dimension")->u.i);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"dimension", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_slice(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ir_attr *s = ir_op_attr(op, "start_indices"), *l = ir_op_attr(op, "limit_indices"),
            *st = ir_op_attr(op, "strides");
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_puts(b, " [");
    for (int i = 0; i < s->u.darr.n; i++) {
        ap_buf_printf(b, i ? ", %" PRId64 ":%" PRId64 : "%" PRId64 ":%" PRId64, s->u.darr.ints[i], l->u.darr.ints[i]);
        if (st->u.darr.ints[i] != 1)
            ap_buf_printf(b, ":%" PRId64, st->u.darr.ints[i]);
    }
    ap_buf_putc(b, ']');
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"start_indices", "limit_indices", "strides", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_dynamic_slice(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ir_attr *s = ir_op_attr(op, "slice_sizes");
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    ap_buf_puts(b, ", sizes = ");
    print_i64_list(pr, s->u.darr.ints, s->u.darr.n);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"slice_sizes", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_pad(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    static const char *const names[3] = {"edge_padding_low", "edge_padding_high", "interior_padding"};
    static const char *const kws[3] = {"low", "high", "interior"};
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 2);
    for (int k = 0; k < 3; k++) {
        ir_attr *x = ir_op_attr(op, names[k]);
        ap_buf_printf(b, ", %s = ", kws[k]);
        print_i64_list(pr, x->u.darr.ints, x->u.darr.n);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){names[0], names[1], names[2], NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_dot(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 2);
    if (fmt == IR_FMT_DOT_GENERAL) {
        const ir_attr *d[4];
        dot_dims_ok(ir_op_attr(op, "dot_dimension_numbers"), d);
        if (d[0]) {
            ap_buf_puts(b, ", batching_dims = ");
            print_int_array_attr(pr, d[0]);
            ap_buf_puts(b, " x ");
            print_int_array_attr(pr, d[1]);
        }
        ap_buf_puts(b, ", contracting_dims = ");
        if (d[2])
            print_int_array_attr(pr, d[2]);
        else
            ap_buf_puts(b, "[]");
        ap_buf_puts(b, " x ");
        if (d[3])
            print_int_array_attr(pr, d[3]);
        else
            ap_buf_puts(b, "[]");
    }
    ir_attr *prec = ir_op_attr(op, "precision_config"), *alg = ir_op_attr(op, "algorithm");
    if (prec)
        print_precision(pr, prec);
    if (alg && fmt == IR_FMT_DOT_GENERAL) {
        /* `algorithm = <...>`: the attribute without its name */
        ap_buf tmp;
        ap_buf_init(&tmp);
        ir_attr_print(&tmp, alg);
        size_t skip = 1 + strlen(alg->u.dia.name);
        if (tmp.oom || tmp.len < skip)
            pr->oom = true;
        else {
            ap_buf_puts(b, ", algorithm = ");
            ap_buf_put(b, tmp.data + skip, tmp.len - skip);
        }
        ap_buf_free(&tmp);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs,
                    fmt == IR_FMT_DOT_GENERAL
                        ? (const char *const[]){"dot_dimension_numbers", "precision_config", "algorithm", NULL}
                        : (const char *const[]){"dot_dimension_numbers", "precision_config", NULL},
                    " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_convolution(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    static const char *const skip[] = {"dimension_numbers", "window_strides", "padding", "lhs_dilation",
                                       "rhs_dilation", "window_reversal", NULL};
    ap_buf_putc(b, '(');
    print_values(pr, op->operands, 2);
    ap_buf_puts(b, ") dim_numbers = ");
    ap_buf_puts(b, ir_op_attr(op, "dimension_numbers")->u.dia.body);
    ap_buf_puts(b, ", window = {");
    bool first = true;
    ir_attr *x;
    if ((x = ir_op_attr(op, "window_strides"))) {
        ap_buf_puts(b, "stride = ");
        print_i64_list(pr, x->u.darr.ints, x->u.darr.n);
        first = false;
    }
    if ((x = ir_op_attr(op, "padding"))) {
        ap_buf_puts(b, first ? "pad = [" : ", pad = [");
        for (int64_t i = 0; i < x->type->dims[0]; i++)
            ap_buf_printf(b, i ? ", [%" PRId64 ", %" PRId64 "]" : "[%" PRId64 ", %" PRId64 "]",
                          ir_dense_int_at(x, (size_t)(2 * i)), ir_dense_int_at(x, (size_t)(2 * i + 1)));
        ap_buf_putc(b, ']');
        first = false;
    }
    if ((x = ir_op_attr(op, "lhs_dilation"))) {
        ap_buf_puts(b, first ? "lhs_dilate = " : ", lhs_dilate = ");
        print_i64_list(pr, x->u.darr.ints, x->u.darr.n);
        first = false;
    }
    if ((x = ir_op_attr(op, "rhs_dilation"))) {
        ap_buf_puts(b, first ? "rhs_dilate = " : ", rhs_dilate = ");
        print_i64_list(pr, x->u.darr.ints, x->u.darr.n);
        first = false;
    }
    if ((x = ir_op_attr(op, "window_reversal"))) {
        ap_buf_puts(b, first ? "reverse = [" : ", reverse = [");
        for (int i = 0; i < x->u.darr.n; i++)
            ap_buf_puts(b, i ? (x->u.darr.ints[i] ? ", true" : ", false") : (x->u.darr.ints[i] ? "true" : "false"));
        ap_buf_putc(b, ']');
    }
    ap_buf_putc(b, '}');
    print_attr_dict(pr, op->attrs, op->n_attrs, skip, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_reduce(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    uint32_t n = op->n_operands / 2;
    ir_attr *d = ir_op_attr(op, "dimensions");
    ir_opcode applies = reduce_compact_op(op);
    for (uint32_t i = 0; i < n; i++) {
        ap_buf_puts(b, i ? ", (" : "(");
        print_value(pr, op->operands[i]);
        ap_buf_puts(b, " init: ");
        print_value(pr, op->operands[n + i]);
        ap_buf_putc(b, ')');
    }
    if (applies != IR_OP_UNKNOWN) {
        ap_buf_puts(b, " applies ");
        ap_buf_puts(b, ir_op_info_get(applies)->name);
    }
    ap_buf_puts(b, " across dimensions = ");
    print_i64_list(pr, d->u.darr.ints, d->u.darr.n);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"dimensions", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    if (applies == IR_OP_UNKNOWN) {
        const ir_block *blk = op->regions[0].first;
        ap_buf_putc(b, '\n');
        indent(pr, level);
        ap_buf_puts(b, " reducer");
        for (uint32_t i = 0; i < n; i++) {
            ap_buf_putc(b, '(');
            print_value(pr, &blk->args[i]);
            ap_buf_puts(b, ": ");
            ir_type_print(b, blk->args[i].type);
            print_loc(pr, blk->args[i].loc);
            ap_buf_puts(b, ", ");
            print_value(pr, &blk->args[n + i]);
            ap_buf_puts(b, ": ");
            ir_type_print(b, blk->args[n + i].type);
            print_loc(pr, blk->args[n + i].loc);
            ap_buf_puts(b, ") ");
        }
        print_region(pr, &op->regions[0], level, true);
    }
    return;
}

static void form_print_while(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    const ir_block *cond = op->regions[0].first, *body = op->regions[1].first;
    ap_buf_putc(b, '(');
    for (uint32_t i = 0; i < op->n_operands; i++) {
        if (i)
            ap_buf_puts(b, ", ");
        print_value(pr, &cond->args[i]);
        /* the body's arguments print under the same names */
        uint32_t code = value_code(pr, &cond->args[i]);
        if (!ir__map_put(&pr->names, &body->args[i], code))
            pr->oom = true;
        ap_buf_puts(b, " = ");
        print_value(pr, op->operands[i]);
    }
    ap_buf_putc(b, ')');
    if (op->n_operands) {
        ap_buf_puts(b, " : ");
        print_result_types(pr, op);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, no_skip, " attributes {");
    ap_buf_putc(b, '\n');
    indent(pr, level);
    ap_buf_puts(b, " cond ");
    print_region(pr, &op->regions[0], level, true);
    ap_buf_puts(b, " do ");
    print_region(pr, &op->regions[1], level, true);
    return;
}

static void form_print_custom_call(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ir_attr *t = ir_op_attr(op, "call_target_name");
    ir_attr sym = {.kind = IR_A_SYMREF};
    sym.u.str = t->u.str;
    ap_buf_putc(b, ' ');
    ir_attr_print(b, &sym);
    ap_buf_putc(b, '(');
    print_values(pr, op->operands, op->n_operands);
    ap_buf_putc(b, ')');
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"call_target_name", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_composite(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    ir_attr_print(b, ir_op_attr(op, "name"));
    if (op->n_operands) {
        ap_buf_putc(b, ' ');
        print_values(pr, op->operands, op->n_operands);
    }
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"name", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_get_tuple_element(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_printf(b, "[%" PRId64 "]", ir_op_attr(op, "index")->u.i);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"index", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_fft(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ir_attr *l = ir_op_attr(op, "fft_length");
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_printf(b, ", type =  %s, length = ", enum_value(ir_op_attr(op, "fft_type"), "fft_type"));
    print_i64_list(pr, l->u.darr.ints, l->u.darr.n);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"fft_type", "fft_length", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_rng(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, op->n_operands);
    ap_buf_printf(b, ", distribution =  %s", enum_value(ir_op_attr(op, "rng_distribution"), "rng_distribution"));
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"rng_distribution", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_rng_bit_generator(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_printf(b, ", algorithm =  %s", enum_value(ir_op_attr(op, "rng_algorithm"), "rng_algorithm"));
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"rng_algorithm", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_cholesky(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ir_attr *lower = ir_op_attr(op, "lower");
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    if (lower)
        ap_buf_puts(b, lower->u.b ? ", lower = true" : ", lower = false");
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"lower", NULL}, " {");
    ap_buf_puts(b, " : ");
    if (same_types(op))
        ir_type_print(b, op->results[0].type);
    else
        print_functional(pr, op);
    return;
}

static void form_print_get_dimension_size(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_printf(b, ", dim = %" PRId64, ir_op_attr(op, "dimension")->u.i);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"dimension", NULL}, " {");
    ap_buf_puts(b, " : ");
    print_functional(pr, op);
    return;
}

static void form_print_reduce_precision(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf *b = pr->b;
    ap_buf_putc(b, ' ');
    print_values(pr, op->operands, 1);
    ap_buf_printf(b, ", format = e%" PRId64 "m%" PRId64, ir_op_attr(op, "exponent_bits")->u.i,
                  ir_op_attr(op, "mantissa_bits")->u.i);
    print_attr_dict(pr, op->attrs, op->n_attrs, (const char *const[]){"exponent_bits", "mantissa_bits", NULL}, " {");
    ap_buf_puts(b, " : ");
    if (same_types(op))
        ir_type_print(b, op->results[0].type);
    else
        print_functional(pr, op);
    return;
}

/* ------------------------------------------------------- pretty forms */

/* How each pretty form is checked and printed: the ok and print columns of
 * the table in ir_forms.h (its parse column is ir/parse/pretty.c). */
static const struct {
    bool (*ok)(const ir_op *op, int fmt);
    void (*print)(printer *pr, const ir_op *op, int fmt, int level);
} forms[IR_FMT__COUNT] = {
#define IR_FORM_PRINTER(id, ok, print, parse) [IR_FMT_##id] = {ok, print},
    IR_FORMS(IR_FORM_PRINTER)
#undef IR_FORM_PRINTER
};

/* Can `op` be printed in its pretty form with its attributes as they are? */
static bool pretty_ok(const ir_op *op, int fmt)
{
    if (op->n_successors || op->tmpl)
        return false;
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (!op->operands[i] || !op->operands[i]->type)
            return false;
    return fmt >= 0 && fmt < IR_FMT__COUNT && forms[fmt].ok && forms[fmt].ok(op, fmt);
}

static void print_pretty(printer *pr, const ir_op *op, int fmt, int level)
{
    ap_buf_puts(pr->b, op->opcode == IR_OP_FUNC_RETURN ? "return" : op->name);
    forms[fmt].print(pr, op, fmt, level);
}

static void print_op(printer *pr, const ir_op *op, int level)
{
    /* A function numbers its values from zero when nothing was numbered
     * before it (a function of the module); inside another op's region
     * (an opaque op's body, a nested module) the numbering goes on, so
     * that the names after the function cannot repeat or take over the
     * names of values defined before it. */
    const ir_op *outer_func = pr->cur_func;
    bool outer_escaped = pr->escaped, fresh = false;
    if (op->opcode == IR_OP_FUNC) {
        fresh = pr->names.n == 0;
        pr->cur_func = op;
        pr->escaped = false;
    }
    indent(pr, level);
    if (op->n_results) {
        uint32_t code = value_code(pr, &op->results[0]);
        ap_buf_printf(pr->b, op->n_results > 1 ? "%%%u:%u = " : "%%%u = ", code, op->n_results);
    }
    int fmt = ir_op_info_get((ir_opcode)op->opcode)->fmt;
    if (op->opcode == IR_OP_FUNC && op->n_successors == 0 && ir_func_type(op) && !pr->generic && op->n_regions <= 1)
        print_func(pr, op, level);
    else if (op->opcode == IR_OP_MODULE && op->n_regions == 1 && !pr->generic)
        print_module_op(pr, op, level);
    else if (op->tmpl)
        print_template(pr, op, level);
    else if (op->opcode != IR_OP_UNKNOWN && !pr->generic && pretty_ok(op, fmt))
        print_pretty(pr, op, fmt, level);
    else
        print_generic(pr, op, level);
    print_loc(pr, op->loc);
    ap_buf_putc(pr->b, '\n');
    if (op->opcode == IR_OP_FUNC) {
        /* a reference out of the function (which MLIR would refuse, as
         * functions are isolated from above) keeps the numbering going */
        if (fresh && !pr->escaped) {
            ir__map_clear(&pr->names);
            pr->next_result = pr->next_arg = 0;
        }
        pr->escaped = outer_escaped || pr->escaped;
        pr->cur_func = outer_func;
    }
}

int ir_print(const ir_module *m, ap_buf *b, const ir_print_opts *opts)
{
    printer pr;
    memset(&pr, 0, sizeof pr);
    pr.b = b;
    if (opts) {
        pr.no_locs = opts->no_locs;
        pr.generic = opts->generic;
    }
    size_t reserve = m->arena.total / 2;
    ap_buf_reserve(b, reserve);
    if (m->alias_defs)
        ap_buf_puts(b, m->alias_defs);
    print_op(&pr, m->top, 0);
    print_alias_table(&pr);
    if (m->file_metadata) {
        ap_buf_puts(b, m->file_metadata);
        ap_buf_putc(b, '\n');
    }
    ir__map_free(&pr.names);
    ir__map_free(&pr.loc_alias);
    ap_free(pr.aliases);
    return pr.oom || b->oom ? AP_ENOMEM : 0;
}

/* The canonical printer's numbering of func's body (pr->names), printed
 * into a scratch buffer; free with numbering_free. */
static void numbering(printer *pr, ap_buf *scratch, const ir_op *func)
{
    ap_buf_init(scratch);
    memset(pr, 0, sizeof *pr);
    pr->b = scratch;
    pr->no_locs = true;
    /* print_op resets the names after a function: print its body instead */
    if (func->n_regions)
        print_region(pr, &func->regions[0], 1, true);
}

static void numbering_free(printer *pr, ap_buf *scratch)
{
    ir__map_free(&pr->names);
    ir__map_free(&pr->loc_alias);
    ap_free(pr->aliases);
    ap_buf_free(scratch);
}

const ir_value *ir__printed_value(const ir_op *func, uint32_t n, uint32_t k)
{
    printer pr;
    ap_buf scratch;
    numbering(&pr, &scratch, func);
    const ir_value *found = NULL;
    for (uint32_t i = 0; i < pr.names.cap && !found; i++) {
        const ir_value *v = pr.names.keys[i];
        if (v && pr.names.vals[i] == n && v->def && k < v->def->n_results)
            found = &v->def->results[k];
    }
    numbering_free(&pr, &scratch);
    return found;
}

int ir__printed_numbers(const ir_op *func, const ir_op *const *ops, uint32_t n, int64_t *out)
{
    printer pr;
    ap_buf scratch;
    numbering(&pr, &scratch, func);
    int rc = pr.oom ? AP_ENOMEM : 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t code;
        out[i] = ops[i]->n_results && ir__map_get(&pr.names, &ops[i]->results[0], &code) && !(code & ARG_BIT)
                     ? (int64_t)code
                     : -1;
    }
    numbering_free(&pr, &scratch);
    return rc;
}
