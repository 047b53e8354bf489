/*
 * verify.c - checks a module against the rules the registry knows: required
 * attributes and their kinds, and each op's type rule (result shapes from
 * operand shapes and attributes).  Dynamic dimensions match anything; ops
 * of other dialects are not checked.  The first problem is reported at the
 * op's source position.
 */
#include "ir_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct verifier {
    ir_module *m;
    ap_error *err;
    const ir_op *func; /* enclosing func.func */
} verifier;

static int vfail(verifier *v, const ir_op *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int vfail(verifier *v, const ir_op *op, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *file = v->m->filename ? v->m->filename : "<input>";
    if (op && op->src_line)
        return ap_error_at(v->err, code, file, (int)op->src_line, (int)op->src_col, "'%s' %s", op->name, msg);
    return ap_error_set(v->err, code, "'%s' %s", op ? op->name : "module", msg);
}

static void tstr(const ir_type *t, char *buf, size_t n)
{
    ap_buf b;
    ap_buf_init(&b);
    if (t)
        ir_type_print(&b, t);
    snprintf(buf, n, "%s", b.data ? b.data : "?");
    ap_buf_free(&b);
}

static const char *kind_name(ir_attr_kind k)
{
    switch (k) {
    case IR_A_INT: return "an integer";
    case IR_A_STRING: return "a string";
    case IR_A_DENSE: return "a dense<...> constant";
    case IR_A_DENSE_ARRAY: return "an array<i64: ...>";
    case IR_A_DIALECT: return "a #stablehlo<...> attribute";
    case IR_A_ARRAY: return "an array [...]";
    case IR_A_SYMREF: return "a @symbol";
    case IR_A_TYPE: return "a type";
    default: return "another kind of attribute";
    }
}

static bool kind_ok(ir_attr_kind want, const ir_attr *a)
{
    if (want == IR_A_ANY || want == a->kind)
        return true;
    /* integer lists may be written in the older dense<> or [..] forms */
    if (want == IR_A_DENSE_ARRAY && (a->kind == IR_A_DENSE || a->kind == IR_A_ARRAY))
        return true;
    if (want == IR_A_DENSE && a->kind == IR_A_DENSE_RESOURCE)
        return true;
    return false;
}

/* ------------------------------------------------------------ type rules */

static bool ranked(const ir_type *t) { return t && t->kind == IR_T_TENSOR && t->rank >= 0; }

static bool dim_eq(int64_t a, int64_t b) { return a == IR_DYN || b == IR_DYN || a == b; }

static bool same_shape(const ir_type *a, const ir_type *b)
{
    if (!ranked(a) || !ranked(b))
        return true;
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!dim_eq(a->dims[i], b->dims[i]))
            return false;
    return true;
}

static bool same_elem(const ir_type *a, const ir_type *b)
{
    if (!a || !b || a->kind != IR_T_TENSOR || b->kind != IR_T_TENSOR)
        return true;
    if (a->elem == IR_E_OPAQUE || b->elem == IR_E_OPAQUE)
        return true;
    return a->elem == b->elem;
}

static int expect_shape(verifier *v, const ir_op *op, const int64_t *dims, int rank)
{
    const ir_type *r = op->results[0].type;
    if (!ranked(r))
        return 0;
    bool ok = r->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = dim_eq(dims[i], r->dims[i]);
    if (ok)
        return 0;
    char got[200], want[200];
    ir_module *m = v->m;
    const ir_type *w = ir_type_tensor_ex(m, (ir_elem)r->elem, r->text, rank, dims, r->encoding);
    tstr(r, got, sizeof got);
    tstr(w, want, sizeof want);
    return vfail(v, op, AP_ETYPE, "result type %s does not match the type its operands give, %s", got, want);
}

static int list(const ir_op *op, const char *name, int64_t *out, int cap)
{
    return ir_attr_int_list(ir_op_attr(op, name), out, cap);
}

static int check_elementwise(verifier *v, const ir_op *op, ir_op_kind kind)
{
    if (op->n_results != 1)
        return 0;
    const ir_type *r = op->results[0].type;
    for (uint32_t i = 0; i < op->n_operands; i++) {
        const ir_type *t = op->operands[i]->type;
        bool scalar_ok = (op->opcode == IR_OP_CLAMP && i != 1) || (op->opcode == IR_OP_SELECT && i == 0);
        if (scalar_ok && ranked(t) && t->rank == 0)
            continue;
        if (!same_shape(t, r)) {
            char a[160], b[160];
            tstr(t, a, sizeof a);
            tstr(r, b, sizeof b);
            return vfail(v, op, AP_ETYPE, "operand #%u has type %s but the result is %s: shapes differ", i, a, b);
        }
        bool elem_must_match = kind == IR_K_EW1 || kind == IR_K_EW2 ||
                               (kind == IR_K_EW3 && !(op->opcode == IR_OP_SELECT && i == 0));
        if (op->opcode == IR_OP_SHIFT_LEFT || op->opcode == IR_OP_REDUCE_PRECISION)
            elem_must_match = true;
        /* abs of a complex tensor is its (real) magnitude */
        if (op->opcode == IR_OP_ABS && ranked(t) && ranked(r) && ir_elem_is_complex((ir_elem)t->elem) &&
            r->elem == (t->elem == IR_E_C64 ? IR_E_F32 : IR_E_F64))
            elem_must_match = false;
        if (elem_must_match && !same_elem(t, r)) {
            char a[160], b[160];
            tstr(t, a, sizeof a);
            tstr(r, b, sizeof b);
            return vfail(v, op, AP_ETYPE, "operand #%u has type %s but the result is %s: element types differ", i, a, b);
        }
    }
    if (kind == IR_K_CMP) {
        if (r && r->kind == IR_T_TENSOR && r->elem != IR_E_I1)
            return vfail(v, op, AP_ETYPE, "result must have element type i1");
        if (op->n_operands == 2 && !same_elem(op->operands[0]->type, op->operands[1]->type))
            return vfail(v, op, AP_ETYPE, "compares operands of different element types");
    }
    return 0;
}

static int check_dot_general(verifier *v, const ir_op *op)
{
    ir_dot_dims d;
    if (ir_dot_dims_get(op, &d) < 0)
        return vfail(v, op, AP_ETYPE, "has malformed dot dimension numbers");
    const ir_type *l = op->operands[0]->type, *r = op->operands[1]->type;
    if (!ranked(l) || !ranked(r))
        return 0;
    bool lused[IR_MAX_RANK] = {0}, rused[IR_MAX_RANK] = {0};
    int64_t out[IR_MAX_RANK];
    int n = 0;
    for (int i = 0; i < d.n_batch + d.n_contract; i++) {
        int64_t ld = i < d.n_batch ? d.lhs_batch[i] : d.lhs_contract[i - d.n_batch];
        int64_t rd = i < d.n_batch ? d.rhs_batch[i] : d.rhs_contract[i - d.n_batch];
        if (ld < 0 || ld >= l->rank || rd < 0 || rd >= r->rank)
            return vfail(v, op, AP_ETYPE, "dimension number out of range for operands of rank %d and %d", l->rank, r->rank);
        if (lused[ld] || rused[rd])
            return vfail(v, op, AP_ETYPE, "uses a dimension twice in its dimension numbers");
        lused[ld] = rused[rd] = true;
        if (!dim_eq(l->dims[ld], r->dims[rd]))
            return vfail(v, op, AP_ETYPE, "%s dimension sizes differ: lhs dim %" PRId64 " is %" PRId64 ", rhs dim %" PRId64 " is %" PRId64,
                         i < d.n_batch ? "batching" : "contracting", ld, l->dims[ld], rd, r->dims[rd]);
    }
    for (int i = 0; i < d.n_batch; i++)
        out[n++] = l->dims[d.lhs_batch[i]];
    for (int i = 0; i < l->rank; i++)
        if (!lused[i] && n < IR_MAX_RANK)
            out[n++] = l->dims[i];
    for (int i = 0; i < r->rank; i++)
        if (!rused[i] && n < IR_MAX_RANK)
            out[n++] = r->dims[i];
    return expect_shape(v, op, out, n);
}

static int check_op_types(verifier *v, const ir_op *op)
{
    const ir_op_info *info = ir_op_info_get((ir_opcode)op->opcode);
    int64_t a[IR_MAX_RANK], b[IR_MAX_RANK], c[IR_MAX_RANK], out[IR_MAX_RANK];
    switch (info->kind) {
    case IR_K_EW1:
    case IR_K_EW2:
    case IR_K_EW3:
    case IR_K_CMP:
    case IR_K_CONV:
        if (op->opcode == IR_OP_BITCAST_CONVERT)
            return 0;
        return check_elementwise(v, op, info->kind);
    default:
        break;
    }
    if (op->n_results < 1 || op->n_operands < 1)
        return 0;
    const ir_type *x = op->operands[0]->type, *r = op->results[0].type;
    switch ((ir_opcode)op->opcode) {
    case IR_OP_BROADCAST_IN_DIM: {
        int n = list(op, "broadcast_dimensions", a, IR_MAX_RANK);
        if (!ranked(x) || !ranked(r) || n < 0)
            return 0;
        if (n != x->rank)
            return vfail(v, op, AP_ETYPE, "has %d broadcast dimensions for an operand of rank %d", n, x->rank);
        for (int i = 0; i < n; i++) {
            if (a[i] < 0 || a[i] >= r->rank)
                return vfail(v, op, AP_ETYPE, "broadcast dimension %" PRId64 " is out of range for a result of rank %d", a[i], r->rank);
            if (x->dims[i] != 1 && !dim_eq(x->dims[i], r->dims[a[i]]))
                return vfail(v, op, AP_ETYPE, "operand dimension %d (size %" PRId64 ") cannot broadcast to result dimension %" PRId64 " (size %" PRId64 ")",
                             i, x->dims[i], a[i], r->dims[a[i]]);
        }
        return same_elem(x, r) ? 0 : vfail(v, op, AP_ETYPE, "changes the element type");
    }
    case IR_OP_TRANSPOSE: {
        int n = list(op, "permutation", a, IR_MAX_RANK);
        if (!ranked(x) || n < 0)
            return 0;
        bool seen[IR_MAX_RANK] = {0};
        if (n != x->rank)
            return vfail(v, op, AP_ETYPE, "permutation has %d entries for an operand of rank %d", n, x->rank);
        for (int i = 0; i < n; i++) {
            if (a[i] < 0 || a[i] >= n || seen[a[i]])
                return vfail(v, op, AP_ETYPE, "permutation is not a permutation of 0..%d", n - 1);
            seen[a[i]] = true;
            out[i] = x->dims[a[i]];
        }
        return expect_shape(v, op, out, n);
    }
    case IR_OP_RESHAPE: {
        int64_t nx = ir_type_numel(x), nr = ir_type_numel(r);
        if (nx >= 0 && nr >= 0 && nx != nr)
            return vfail(v, op, AP_ETYPE, "changes the number of elements from %" PRId64 " to %" PRId64, nx, nr);
        return same_elem(x, r) ? 0 : vfail(v, op, AP_ETYPE, "changes the element type");
    }
    case IR_OP_DOT_GENERAL:
        if (op->n_operands != 2)
            return vfail(v, op, AP_ETYPE, "needs 2 operands");
        return check_dot_general(v, op);
    case IR_OP_DOT: {
        if (op->n_operands != 2)
            return vfail(v, op, AP_ETYPE, "needs 2 operands");
        const ir_type *y = op->operands[1]->type;
        if (!ranked(x) || !ranked(y))
            return 0;
        if (x->rank < 1 || x->rank > 2 || y->rank < 1 || y->rank > 2)
            return vfail(v, op, AP_ETYPE, "needs operands of rank 1 or 2");
        if (!dim_eq(x->dims[x->rank - 1], y->dims[0]))
            return vfail(v, op, AP_ETYPE, "contracting dimension sizes differ: %" PRId64 " and %" PRId64, x->dims[x->rank - 1], y->dims[0]);
        int n = 0;
        if (x->rank == 2)
            out[n++] = x->dims[0];
        if (y->rank == 2)
            out[n++] = y->dims[1];
        return expect_shape(v, op, out, n);
    }
    case IR_OP_CONCATENATE: {
        ir_attr *da = ir_op_attr(op, "dimension");
        if (!da || da->kind != IR_A_INT || !ranked(x))
            return 0;
        int64_t d = da->u.i;
        if (d < 0 || d >= x->rank)
            return vfail(v, op, AP_ETYPE, "concatenates along dimension %" PRId64 " of a rank %d tensor", d, x->rank);
        for (int i = 0; i < x->rank; i++)
            out[i] = x->dims[i];
        for (uint32_t k = 1; k < op->n_operands; k++) {
            const ir_type *t = op->operands[k]->type;
            if (!ranked(t))
                return 0;
            if (t->rank != x->rank)
                return vfail(v, op, AP_ETYPE, "operand #%u has rank %d but operand #0 has rank %d", k, t->rank, x->rank);
            for (int i = 0; i < x->rank; i++) {
                if (i == d)
                    out[i] = out[i] == IR_DYN || t->dims[i] == IR_DYN ? IR_DYN : out[i] + t->dims[i];
                else if (!dim_eq(t->dims[i], x->dims[i]))
                    return vfail(v, op, AP_ETYPE, "operand #%u differs from operand #0 in dimension %d", k, i);
            }
        }
        return expect_shape(v, op, out, x->rank);
    }
    case IR_OP_SLICE: {
        int ns = list(op, "start_indices", a, IR_MAX_RANK), nl = list(op, "limit_indices", b, IR_MAX_RANK),
            nt = list(op, "strides", c, IR_MAX_RANK);
        if (!ranked(x) || ns < 0 || nl < 0 || nt < 0)
            return 0;
        if (ns != x->rank || nl != x->rank || nt != x->rank)
            return vfail(v, op, AP_ETYPE, "needs %d start, limit and stride values", x->rank);
        for (int i = 0; i < x->rank; i++) {
            if (c[i] < 1)
                return vfail(v, op, AP_ETYPE, "stride %" PRId64 " in dimension %d must be positive", c[i], i);
            if (a[i] < 0 || b[i] < a[i] || (x->dims[i] != IR_DYN && b[i] > x->dims[i]))
                return vfail(v, op, AP_ETYPE, "range %" PRId64 ":%" PRId64 " is outside dimension %d of size %" PRId64, a[i], b[i], i, x->dims[i]);
            out[i] = (b[i] - a[i] + c[i] - 1) / c[i];
        }
        return expect_shape(v, op, out, x->rank);
    }
    case IR_OP_PAD: {
        int nl = list(op, "edge_padding_low", a, IR_MAX_RANK), nh = list(op, "edge_padding_high", b, IR_MAX_RANK),
            ni = list(op, "interior_padding", c, IR_MAX_RANK);
        if (!ranked(x) || nl < 0 || nh < 0 || ni < 0)
            return 0;
        if (nl != x->rank || nh != x->rank || ni != x->rank)
            return vfail(v, op, AP_ETYPE, "needs %d low, high and interior padding values", x->rank);
        for (int i = 0; i < x->rank; i++) {
            if (c[i] < 0)
                return vfail(v, op, AP_ETYPE, "interior padding must not be negative");
            out[i] = x->dims[i] == IR_DYN ? IR_DYN : a[i] + b[i] + x->dims[i] + (x->dims[i] > 0 ? (x->dims[i] - 1) * c[i] : 0);
        }
        return expect_shape(v, op, out, x->rank);
    }
    case IR_OP_REDUCE: {
        int n = list(op, "dimensions", a, IR_MAX_RANK);
        if (op->n_operands % 2)
            return vfail(v, op, AP_ETYPE, "needs as many init values as inputs");
        if (!ranked(x) || n < 0)
            return 0;
        bool red[IR_MAX_RANK] = {0};
        for (int i = 0; i < n; i++) {
            if (a[i] < 0 || a[i] >= x->rank || red[a[i]])
                return vfail(v, op, AP_ETYPE, "reduces over an invalid dimension %" PRId64, a[i]);
            red[a[i]] = true;
        }
        int k = 0;
        for (int i = 0; i < x->rank; i++)
            if (!red[i])
                out[k++] = x->dims[i];
        for (uint32_t i = 0; i < op->n_results; i++) {
            const ir_type *t = op->results[i].type;
            if (!ranked(t))
                continue;
            bool ok = t->rank == k;
            for (int j = 0; ok && j < k; j++)
                ok = dim_eq(t->dims[j], out[j]);
            if (!ok)
                return vfail(v, op, AP_ETYPE, "result #%u does not have the operand's shape without the reduced dimensions", i);
        }
        return 0;
    }
    case IR_OP_IOTA: {
        ir_attr *d = ir_op_attr(op, "iota_dimension");
        (void)d;
        return 0;
    }
    case IR_OP_DYNAMIC_SLICE: {
        int n = list(op, "slice_sizes", a, IR_MAX_RANK);
        if (!ranked(x) || n < 0)
            return 0;
        if (n != x->rank || op->n_operands != (uint32_t)x->rank + 1)
            return vfail(v, op, AP_ETYPE, "needs %d start indices and slice sizes", x->rank);
        for (int i = 0; i < n; i++)
            if (a[i] < 0 || (x->dims[i] != IR_DYN && a[i] > x->dims[i]))
                return vfail(v, op, AP_ETYPE, "slice size %" PRId64 " exceeds dimension %d of size %" PRId64, a[i], i, x->dims[i]);
        return expect_shape(v, op, a, n);
    }
    case IR_OP_DYNAMIC_UPDATE_SLICE:
        return same_shape(x, r) ? 0 : vfail(v, op, AP_ETYPE, "result must have the operand's shape");
    case IR_OP_GET_TUPLE_ELEMENT: {
        ir_attr *ia = ir_op_attr(op, "index");
        if (!x || x->kind != IR_T_TUPLE || !ia || ia->kind != IR_A_INT)
            return 0;
        if (ia->u.i < 0 || ia->u.i >= x->n_elems)
            return vfail(v, op, AP_ETYPE, "index %" PRId64 " is out of range for a tuple of %d", ia->u.i, x->n_elems);
        if (!ir_type_equal(x->elems[ia->u.i], r))
            return vfail(v, op, AP_ETYPE, "result type differs from tuple element %" PRId64, ia->u.i);
        return 0;
    }
    default:
        return 0;
    }
}

static int check_constant(verifier *v, const ir_op *op)
{
    ir_attr *val = ir_op_attr(op, "value");
    if (!val || op->n_results != 1)
        return 0;
    const ir_type *r = op->results[0].type;
    if (val->type && r && ranked(r) && ranked(val->type) && !same_shape(val->type, r))
        return vfail(v, op, AP_ETYPE, "value's type differs from the result type");
    return 0;
}

static int check_return(verifier *v, const ir_op *op)
{
    if (!v->func || op->parent->parent != &v->func->regions[0])
        return 0;
    const ir_type *ft = ir_func_type(v->func);
    if (!ft)
        return 0;
    int n_out = ft->n_elems - ft->n_inputs;
    if ((int)op->n_operands != n_out)
        return vfail(v, op, AP_ETYPE, "returns %u values but @%s declares %d results", op->n_operands,
                     ir_func_name(v->func), n_out);
    for (int i = 0; i < n_out; i++) {
        const ir_type *t = op->operands[i]->type;
        if (t && !ir_type_equal(t, ft->elems[ft->n_inputs + i])) {
            char a[160], b[160];
            tstr(t, a, sizeof a);
            tstr(ft->elems[ft->n_inputs + i], b, sizeof b);
            return vfail(v, op, AP_ETYPE, "returns %s as result #%d but @%s declares %s", a, i, ir_func_name(v->func), b);
        }
    }
    return 0;
}

static int check_call(verifier *v, const ir_op *op)
{
    ir_attr *c = ir_op_attr(op, "callee");
    if (!c || c->kind != IR_A_SYMREF)
        return 0;
    ir_op *f = ir_module_func(v->m, c->u.str.s);
    if (!f)
        return vfail(v, op, AP_EUNDEFINED, "calls @%s, which is not defined", c->u.str.s);
    const ir_type *ft = ir_func_type(f);
    if (!ft)
        return 0;
    if ((int)op->n_operands != ft->n_inputs || (int)op->n_results != ft->n_elems - ft->n_inputs)
        return vfail(v, op, AP_ETYPE, "calls @%s with %u arguments and %u results but it takes %d and returns %d",
                     c->u.str.s, op->n_operands, op->n_results, ft->n_inputs, ft->n_elems - ft->n_inputs);
    for (int i = 0; i < ft->n_inputs; i++)
        if (op->operands[i]->type && !ir_type_equal(op->operands[i]->type, ft->elems[i]))
            return vfail(v, op, AP_ETYPE, "argument #%d type differs from @%s's parameter", i, c->u.str.s);
    for (uint32_t i = 0; i < op->n_results; i++)
        if (!ir_type_equal(op->results[i].type, ft->elems[ft->n_inputs + (int)i]))
            return vfail(v, op, AP_ETYPE, "result #%u type differs from @%s's result", i, c->u.str.s);
    return 0;
}

/* As MLIR: a symbol's visibility is one of three words, which the pretty
 * form prints bare (any other string would print as text that does not
 * parse). */
static int check_func(verifier *v, const ir_op *op)
{
    static const char *const words[] = {"public", "private", "nested"};
    ir_attr *vis = ir_op_attr(op, "sym_visibility");
    if (!vis)
        return 0;
    for (size_t i = 0; vis->kind == IR_A_STRING && i < sizeof words / sizeof words[0]; i++)
        if (vis->u.str.len == strlen(words[i]) && memcmp(vis->u.str.s, words[i], vis->u.str.len) == 0)
            return 0;
    return vfail(v, op, AP_ESYNTAX, "visibility should be \"public\", \"private\" or \"nested\"");
}

/* A function's body ends each block with its terminator, as MLIR has it.
 * A body with none (`{}`, or its return line lost) was read, and failed
 * later where nothing names its position ("@f does not end with
 * func.return"; inlined, "returned value #0 is not a value of @main").
 * A block ending with an op of another dialect may end with a terminator
 * autopart does not know (cf.br): not judged. */
static int check_body_ends(verifier *v, const ir_op *f)
{
    if (f->n_regions != 1)
        return 0;
    for (const ir_block *b = f->regions[0].first; b; b = b->next) {
        const ir_op *last = b->last;
        if (!last)
            return vfail(v, f, AP_ESYNTAX, "@%s has a block without ops: its body must end with `return` (func.return)",
                         ir_func_name(f));
        if (last->opcode != IR_OP_UNKNOWN && last->opcode != IR_OP_FUNC_RETURN)
            return vfail(v, last, AP_ESYNTAX, "ends a block of @%s: its body must end with `return` (func.return)",
                         ir_func_name(f));
    }
    return 0;
}

/* "%arg1" or "%arg1 (params['w'])": an argument as the message names it. */
static void arg_str(const ir_op *f, int i, char *buf, size_t n)
{
    const char *name = ir_func_arg_name(f, (uint32_t)i);
    if (name && *name)
        snprintf(buf, n, "%%arg%d (%.120s)", i, name);
    else
        snprintf(buf, n, "%%arg%d", i);
}

/* Donation: `tf.aliasing_output = K` on argument i (as JAX writes it; HLO's
 * input_output_alias becomes it) hands the argument's buffer to result K.
 * K must name a result of the argument's own type (shape and element
 * type: the partitioning keeps the result in the argument's layout, and the
 * buffer must hold it), and no two arguments may name one result.  Checked
 * here because every reader of the attribute (memory model, search units,
 * lowering) would otherwise skip or misread it silently.  One look-up per
 * argument, each result's donor kept in a table: every lowering verifies
 * its output, and a program donating its optimizer state donates hundreds
 * of arguments (a scan of the earlier ones per argument made ~20 M string
 * compares per three 200-episode T32 searches). */
static int check_aliasing(verifier *v, const ir_op *f)
{
    const ir_type *ft = ir_func_type(f);
    if (!ft || !ir_op_attr(f, "arg_attrs"))
        return 0;
    int n_out = ft->n_elems - ft->n_inputs, rc = 0;
    int *donor = NULL; /* per result: the argument donated to it, -1 none (made at the first donation) */
    char an[200], bn[200], at[160], rt[160];
    for (int i = 0; i < ft->n_inputs && rc == 0; i++) {
        ir_attr *a = ir_func_arg_attr(f, (uint32_t)i, "tf.aliasing_output");
        if (!a)
            continue;
        arg_str(f, i, an, sizeof an);
        if (a->kind != IR_A_INT) {
            rc = vfail(v, f, AP_ETYPE, "argument %s: tf.aliasing_output should be an integer (the index of a result)",
                       an);
            break;
        }
        if (a->u.i < 0 || a->u.i >= n_out) {
            rc = vfail(v, f, AP_ETYPE,
                       "argument %s is donated to result #%" PRId64 " (tf.aliasing_output) but @%s returns %d result%s",
                       an, a->u.i, ir_func_name(f), n_out, n_out == 1 ? "" : "s");
            break;
        }
        const ir_type *t = ft->elems[i], *r = ft->elems[ft->n_inputs + (int)a->u.i];
        if (t && r && !ir_type_equal(t, r)) {
            tstr(t, at, sizeof at);
            tstr(r, rt, sizeof rt);
            rc = vfail(v, f, AP_ETYPE,
                       "argument %s, %s, is donated to result #%" PRId64 " (tf.aliasing_output), a %s: a donated "
                       "argument's buffer holds the result, so both must have one type",
                       an, at, a->u.i, rt);
            break;
        }
        if (!donor) {
            donor = ap_malloc(sizeof *donor * (size_t)n_out);
            if (!donor) {
                rc = vfail(v, f, AP_ENOMEM, "out of memory checking donated arguments");
                break;
            }
            for (int k = 0; k < n_out; k++)
                donor[k] = -1;
        }
        int j = donor[a->u.i];
        if (j >= 0) {
            arg_str(f, j, bn, sizeof bn);
            rc = vfail(v, f, AP_ETYPE,
                       "arguments %s and %s are both donated to result #%" PRId64
                       " (tf.aliasing_output): a result takes one argument's buffer",
                       bn, an, a->u.i);
            break;
        }
        donor[a->u.i] = i;
    }
    ap_free(donor);
    return rc;
}

static int verify_op(verifier *v, const ir_op *op);

static int verify_region(verifier *v, const ir_region *r)
{
    for (const ir_block *b = r->first; b; b = b->next)
        for (const ir_op *op = b->first; op; op = op->next) {
            int rc = verify_op(v, op);
            if (rc < 0)
                return rc;
        }
    return 0;
}

static int verify_op(verifier *v, const ir_op *op)
{
    int rc;
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (!op->operands[i])
            return vfail(v, op, AP_EINTERNAL, "operand #%u is missing", i);
    if (op->opcode != IR_OP_UNKNOWN) {
        int n;
        const ir_attr_rule *rules = ir_attr_rules((ir_opcode)op->opcode, &n);
        for (int i = 0; i < n; i++) {
            ir_attr *a = ir_op_attr(op, rules[i].name);
            if (!a) {
                if (rules[i].required)
                    return vfail(v, op, AP_ESYNTAX, "is missing its required attribute '%s'", rules[i].name);
                continue;
            }
            if (!kind_ok(rules[i].kind, a))
                return vfail(v, op, AP_ETYPE, "attribute '%s' should be %s", rules[i].name, kind_name(rules[i].kind));
        }
        if (op->opcode == IR_OP_CONSTANT)
            rc = check_constant(v, op);
        else if (op->opcode == IR_OP_FUNC_RETURN)
            rc = check_return(v, op);
        else if (op->opcode == IR_OP_FUNC_CALL)
            rc = check_call(v, op);
        else if (op->opcode == IR_OP_FUNC) {
            if ((rc = check_func(v, op)) == 0)
                rc = check_aliasing(v, op);
        } else
            rc = check_op_types(v, op);
        if (rc < 0)
            return rc;
    } else if ((!strcmp(op->name, "sdy.constant") || !strcmp(op->name, "arith.constant")) &&
               (rc = check_constant(v, op)) < 0) {
        return rc; /* its value is read (ops.c) and evaluated: held to its type as stablehlo.constant's is */
    }
    const ir_op *saved = v->func;
    if (op->opcode == IR_OP_FUNC)
        v->func = op;
    for (uint32_t i = 0; i < op->n_regions; i++)
        if ((rc = verify_region(v, &op->regions[i])) < 0)
            return rc;
    v->func = saved;
    /* after its ops, whose own errors come first */
    if (op->opcode == IR_OP_FUNC && (rc = check_body_ends(v, op)) < 0)
        return rc;
    return 0;
}

int ir_verify(ir_module *m, ap_error *err)
{
    verifier v = {m, err, NULL};
    return verify_op(&v, m->top);
}
