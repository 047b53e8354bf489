/*
 * prepare.c - turns an SPMD program into the flat arrays the evaluation
 * loops over: per compute op its flops, HBM bytes (after elementwise fusion)
 * and precision; per collective its kind, group, mesh axes and ring payload;
 * and the program's peak memory from a live-range walk.  Everything that
 * does not depend on the device is done here, once per program.
 *
 * Values are indexed by their `id` (dense per function in the order
 * ir_func_renumber gives, which the parsers call).  A module edited since it
 * was numbered is detected by walking the same order and comparing; it then
 * goes through a pointer map instead, so a stale numbering never gives a
 * wrong answer and the module is never written to (it may be shared).
 */
#include "cost_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALL_DEPTH 16
#define TRANSCENDENTAL_FLOPS 4.0 /* "a few" flops per element: exp, log, tanh, sqrt, divide, ... */

/* ========================================================== value index */

/* Open-addressing map from value pointers to indices, used only when the
 * numbering of a function is stale. */
typedef struct vmap {
    const ir_value **keys;
    uint32_t *vals;
    uint32_t cap; /* power of two, 0 when unused */
} vmap;

static uint32_t vmap_slot(const vmap *m, const void *k)
{
    uint64_t h = (uint64_t)(uintptr_t)k * 0x9e3779b97f4a7c15ULL;
    return (uint32_t)(h >> 32) & (m->cap - 1);
}

static int vmap_init(vmap *m, uint32_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n + 2)
        cap *= 2;
    m->keys = ap_calloc(cap, sizeof *m->keys);
    m->vals = ap_malloc(sizeof *m->vals * cap);
    m->cap = cap;
    return m->keys && m->vals ? 0 : AP_ENOMEM;
}

static void vmap_put(vmap *m, const ir_value *k, uint32_t v)
{
    uint32_t i = vmap_slot(m, k);
    while (m->keys[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
}

static bool vmap_get(const vmap *m, const ir_value *k, uint32_t *v)
{
    uint32_t i = vmap_slot(m, k);
    while (m->keys[i]) {
        if (m->keys[i] == k) {
            *v = m->vals[i];
            return true;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return false;
}

static void vmap_free(vmap *m)
{
    ap_free(m->keys);
    ap_free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ========================================================= per function */

/* What the walks need to know about one function's values, indexed by the
 * dense numbering (walk order). */
typedef struct fn_info {
    const ir_op *func;
    uint32_t n_values, cap;
    bool ids_ok;          /* value ids are that numbering: index = id */
    vmap map;             /* otherwise */
    double *vsize;        /* bytes of the value's type */
} fn_info;

typedef struct func_name {
    const char *name;
    const ir_op *func;
} func_name;

/*
 * The graph of one block being walked (graph.c), and where the block's
 * values are in it.  A value is a list of leaves (one per tensor of a
 * tuple, one for anything else) at leaves[first[v] ..  + count[v]), valid
 * when stamp[v] is the level's epoch; values of enclosing blocks become
 * inputs of the block (captured) and are listed in caps, so that the op
 * holding the block reads them.  Nested blocks use the levels above.
 */
typedef struct glevel {
    cost_graph g;
    const fn_info *fn;
    uint32_t *first, *count, *stamp; /* per value index of fn */
    uint32_t cap, epoch;
    uint32_t *leaves;
    uint32_t n_leaves, cap_leaves;
    const ir_value **caps; /* values captured from enclosing blocks */
    uint32_t n_caps, cap_caps;
    uint32_t n_arg_leaves; /* the block's arguments are its first inputs */
    uint32_t *ret_in;      /* per leaf the block returns: the argument leaf it hands back unchanged, or CG_NONE */
    uint32_t n_ret, cap_ret;
} glevel;

typedef struct prep {
    const ir_module *m;
    cost_program *p;
    ap_error *err;
    fn_info **fns;
    int n_fns, cap_fns;
    func_name *names; /* sorted by name */
    int n_names;
    int depth;
    uint32_t loop_depth; /* while loops around the op being walked */
    glevel **levels;     /* by block nesting (calls included) */
    int n_levels, level;
    /* captured values of the nested blocks of the op being walked */
    const ir_value **acc;
    uint32_t n_acc, cap_acc;
    /* and their blocks (program block indices), in the order they run */
    uint32_t *kidv;
    uint32_t n_kidv, cap_kidv;
} prep;

#define NO_INDEX UINT32_MAX

static inline uint32_t vid(const fn_info *f, const ir_value *v)
{
    if (!v)
        return NO_INDEX;
    if (f->ids_ok)
        return v->id < f->n_values ? v->id : NO_INDEX;
    uint32_t i;
    return vmap_get(&f->map, v, &i) ? i : NO_INDEX;
}


/* Makes room for value index i; false when out of memory. */
static bool fn_grow(fn_info *f, uint32_t i)
{
    if (i < f->cap)
        return true;
    uint32_t cap = f->cap ? f->cap : 1024;
    while (cap <= i)
        cap *= 2;
    double *vs = ap_realloc(f->vsize, cap * sizeof *vs);
    if (!vs)
        return false;
    f->vsize = vs;
    for (uint32_t k = f->cap; k < cap; k++)
        f->vsize[k] = 0;
    f->cap = cap;
    return true;
}

/* One walk in ir_func_renumber's order: checks the ids, sizes every value
 * (valid only if the ids turn out right). */
static bool scan_region(prep *c, fn_info *f, const ir_region *r)
{
    for (const ir_block *b = r->first; b; b = b->next) {
        for (uint32_t i = 0; i < b->n_args; i++) {
            uint32_t k = f->n_values++;
            if (!fn_grow(f, k))
                return false;
            f->ids_ok &= b->args[i].id == k;
            f->vsize[k] = cost__type_bytes(b->args[i].type, &c->p->notes);
        }
        for (const ir_op *op = b->first; op; op = op->next) {
            for (uint32_t i = 0; i < op->n_operands; i++) {
                const ir_value *v = op->operands[i];
                if (!v)
                    continue;
                if (v->id >= f->n_values) /* not defined before: a stale numbering */
                    f->ids_ok = false;
            }
            for (uint32_t i = 0; i < op->n_results; i++) {
                uint32_t k = f->n_values++;
                if (!fn_grow(f, k))
                    return false;
                f->ids_ok &= op->results[i].id == k;
                f->vsize[k] = cost__type_bytes(op->results[i].type, &c->p->notes);
            }
            for (uint32_t i = 0; i < op->n_regions; i++)
                if (!scan_region(c, f, &op->regions[i]))
                    return false;
        }
    }
    return true;
}

/* The slow path for stale ids: the same order into a pointer map. */
static void map_region(fn_info *f, const ir_region *r, uint32_t *nv)
{
    for (const ir_block *b = r->first; b; b = b->next) {
        for (uint32_t i = 0; i < b->n_args; i++)
            vmap_put(&f->map, &b->args[i], (*nv)++);
        for (const ir_op *op = b->first; op; op = op->next) {
            for (uint32_t i = 0; i < op->n_results; i++)
                vmap_put(&f->map, &op->results[i], (*nv)++);
            for (uint32_t i = 0; i < op->n_regions; i++)
                map_region(f, &op->regions[i], nv);
        }
    }
}

static void fn_info_free(fn_info *f)
{
    if (!f)
        return;
    vmap_free(&f->map);
    ap_free(f->vsize);
    ap_free(f);
}

/* The info of func, built on first use.  NULL when out of memory. */
static fn_info *fn_get(prep *c, const ir_op *func)
{
    for (int i = 0; i < c->n_fns; i++)
        if (c->fns[i]->func == func)
            return c->fns[i];
    if (c->n_fns == c->cap_fns) {
        int cap = c->cap_fns ? 2 * c->cap_fns : 8;
        fn_info **v = ap_realloc(c->fns, sizeof *v * (size_t)cap);
        if (!v)
            return NULL;
        c->fns = v;
        c->cap_fns = cap;
    }
    /* about one value per op of the body and one per argument: sized so the
     * arrays rarely grow (regions add a few) */
    const ir_block *body = ir_func_entry(func);
    uint32_t guess = body ? body->n_args + body->n_ops + body->n_ops / 8 + 64 : 64;
    fn_info *f = ap_calloc(1, sizeof *f);
    if (!f || !fn_grow(f, guess))
        goto fail;
    f->func = func;
    f->ids_ok = true;
    for (uint32_t i = 0; i < func->n_regions; i++)
        if (!scan_region(c, f, &func->regions[i]))
            goto fail;
    if (!f->ids_ok) {
        uint32_t nv = 0;
        if (vmap_init(&f->map, f->n_values) < 0)
            goto fail;
        for (uint32_t i = 0; i < func->n_regions; i++)
            map_region(f, &func->regions[i], &nv);
    }
    c->fns[c->n_fns++] = f;
    return f;
fail:
    fn_info_free(f);
    return NULL;
}

static int cmp_func_name(const void *a, const void *b)
{
    return strcmp(((const func_name *)a)->name, ((const func_name *)b)->name);
}

static const ir_op *find_func(const prep *c, const char *name)
{
    func_name key = {name, NULL};
    const func_name *hit = c->n_names ? bsearch(&key, c->names, (size_t)c->n_names, sizeof key, cmp_func_name) : NULL;
    return hit ? hit->func : NULL;
}

/* ================================================================ types */

double cost__elem_bytes(const ir_type *t)
{
    if (t->elem == IR_E_OPAQUE) {
        /* quantized types: the storage type decides (!quant.uniform<i8:f32, ..>) */
        const char *s = t->text ? t->text : "";
        if (strstr(s, "i8") || strstr(s, "u8") || strstr(s, "i4"))
            return 1;
        if (strstr(s, "i16"))
            return 2;
        return 4;
    }
    return ir_elem_bytes((ir_elem)t->elem);
}

/* Elements of a value type: 1 for scalars, 0 when unknown (dynamic). */
double cost__numel(const ir_type *t, unsigned *notes)
{
    if (!t)
        return 0;
    if (t->kind == IR_T_SCALAR)
        return 1;
    if (t->kind != IR_T_TENSOR)
        return 0;
    if (t->rank < 0) {
        *notes |= COST_NOTE_DYNAMIC_SHAPES;
        return 0;
    }
    double n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) {
            *notes |= COST_NOTE_DYNAMIC_SHAPES;
            return 0;
        }
        n *= (double)t->dims[i];
    }
    return n;
}

double cost__type_bytes(const ir_type *t, unsigned *notes)
{
    if (!t)
        return 0;
    switch (t->kind) {
    case IR_T_TENSOR:
    case IR_T_SCALAR:
        return cost__numel(t, notes) * cost__elem_bytes(t);
    case IR_T_TUPLE: {
        double s = 0;
        for (int i = 0; i < t->n_elems; i++)
            s += cost__type_bytes(t->elems[i], notes);
        return s;
    }
    default:
        return 0;
    }
}


/* Bytes of a value of function f (cached by scan_region). */
static double value_bytes(prep *c, const fn_info *f, const ir_value *v)
{
    uint32_t k = vid(f, v);
    return k != NO_INDEX ? f->vsize[k] : v ? cost__type_bytes(v->type, &c->p->notes) : 0;
}

/* The matrix-unit precision of an operand type. */
cost_prec cost__prec_of(const ir_type *t)
{
    if (!t)
        return COST_PREC_F32;
    switch (t->elem) {
    case IR_E_BF16:
        return COST_PREC_BF16;
    case IR_E_F16:
        return COST_PREC_F16;
    case IR_E_OPAQUE:
        return COST_PREC_INT8; /* quantized */
    default:
        break;
    }
    ir_elem e = (ir_elem)t->elem;
    if (ir_elem_is_float(e))
        return ir_elem_bits(e) <= 8 ? COST_PREC_F8 : COST_PREC_F32;
    if (ir_elem_is_int(e))
        return ir_elem_bits(e) <= 8 ? COST_PREC_INT8 : COST_PREC_VECTOR;
    return COST_PREC_F32; /* complex, index */
}

static int rank_of(const ir_type *t) { return t && t->kind == IR_T_TENSOR ? t->rank : 0; }

static int64_t dim(const ir_type *t, int64_t i)
{
    if (!t || t->kind != IR_T_TENSOR || i < 0 || i >= t->rank || t->dims[i] < 0)
        return 0;
    return t->dims[i];
}

/* Ops of other dialects that compute nothing: sharding annotations (the
 * identity on a device), constants, terminators. */
static bool is_free_foreign(const ir_op *op)
{
    static const char *const names[] = {"sdy.sharding_constraint", "sdy.propagation_barrier", "sdy.sharding_group",
                                        "sdy.constant", "sdy.return", "sdy.mesh"};
    if (op->n_regions == 0 && op->n_results == 0 && !op->next)
        return true; /* a terminator */
    for (size_t i = 0; i < AP_ARRAY_LEN(names); i++)
        if (strcmp(op->name, names[i]) == 0)
            return true;
    return false;
}

static bool is_alias_op(const ir_op *op)
{
    const ir_type *a = op->n_operands && op->operands[0] ? op->operands[0]->type : NULL;
    return cost__is_alias_op(op, a, op->n_results ? op->results[0].type : NULL);
}

/* ============================================================ fusion */

static bool is_elementwise(const ir_op *op) { return ir_op_info_get((ir_opcode)op->opcode)->elementwise; }

/* An op that reads all its operands and writes all its results. */
static void plain_bytes(const cost_opview *v, unsigned *notes, cost_opcost *c)
{
    for (uint32_t i = 0; i < v->op->n_operands; i++)
        c->read[i] = cost__type_bytes(v->opd[i], notes);
    c->write = 0;
    for (uint32_t i = 0; i < v->op->n_results; i++)
        c->write += cost__type_bytes(v->res[i], notes);
}

static double ew_flops_per_elem(ir_opcode op)
{
    switch (op) {
    case IR_OP_EXP:
    case IR_OP_EXPM1:
    case IR_OP_LOG:
    case IR_OP_LOG1P:
    case IR_OP_LOGISTIC:
    case IR_OP_TANH:
    case IR_OP_SINE:
    case IR_OP_COSINE:
    case IR_OP_TAN:
    case IR_OP_ATAN2:
    case IR_OP_POWER:
    case IR_OP_CBRT:
    case IR_OP_RSQRT:
    case IR_OP_SQRT:
    case IR_OP_DIVIDE:
    case IR_OP_REMAINDER:
        return TRANSCENDENTAL_FLOPS;
    case IR_OP_CLAMP:
        return 2;
    default:
        return 1;
    }
}

/* ========================================================== collectives */

/* Mesh axes whose coordinates differ between device ids a and b. */
unsigned cost__axes_between(const cost_mesh *m, int64_t a, int64_t b)
{
    unsigned mask = 0;
    for (int ax = m->naxes - 1; ax >= 0; ax--) {
        if (a % m->sizes[ax] != b % m->sizes[ax])
            mask |= 1u << ax;
        a /= m->sizes[ax];
        b /= m->sizes[ax];
    }
    return mask;
}

static int64_t mesh_devices(const cost_mesh *m)
{
    int64_t n = 1;
    for (int i = 0; i < m->naxes; i++)
        n *= m->sizes[i];
    return n;
}

static bool dense_ints_ok(const ir_attr *a)
{
    return a && a->kind == IR_A_DENSE && a->type && a->type->kind == IR_T_TENSOR &&
           ir_elem_is_int((ir_elem)a->type->elem) && a->u.dense.data;
}

static int coll_fail(prep *c, const ir_op *op, const char *what)
{
    if (c->err) {
        ap_error_set(c->err, AP_EINVALID, "%s: %s", op->name, what);
        c->err->line = (int)op->src_line;
        c->err->col = (int)op->src_col;
        if (c->m->filename)
            snprintf(c->err->file, sizeof c->err->file, "%s", c->m->filename);
    }
    return AP_EINVALID;
}

/* The ring formulas of one collective over it->group devices: its kind,
 * the bytes the report counts, the bytes one device sends and the latency
 * steps (collective_permute: one step, its operand). */
void cost__coll_formula(cost_coll_item *it, ir_opcode opc, double in_bytes, double out_bytes)
{
    int64_t n = it->group;
    if (opc == IR_OP_COLLECTIVE_PERMUTE) {
        it->kind = COST_COLLECTIVE_PERMUTE;
        it->bytes = in_bytes;
        it->payload = n > 0 ? in_bytes : 0;
        it->steps = n > 0 ? 1 : 0;
        it->once = it->bytes;
        return;
    }
    double ring = n > 1 ? (double)(n - 1) / (double)n : 0;
    double steps = n > 1 ? (double)(n - 1) : 0;
    switch (opc) {
    case IR_OP_ALL_REDUCE:
        it->kind = COST_ALL_REDUCE;
        it->bytes = in_bytes;
        it->payload = 2 * ring * in_bytes;
        it->steps = 2 * steps;
        break;
    case IR_OP_ALL_GATHER:
        it->kind = COST_ALL_GATHER;
        it->bytes = out_bytes;
        it->payload = ring * out_bytes;
        it->steps = steps;
        break;
    case IR_OP_REDUCE_SCATTER:
        it->kind = COST_REDUCE_SCATTER;
        it->bytes = in_bytes;
        it->payload = ring * in_bytes;
        it->steps = steps;
        break;
    case IR_OP_ALL_TO_ALL:
        it->kind = COST_ALL_TO_ALL;
        it->bytes = in_bytes;
        it->payload = ring * in_bytes;
        it->steps = steps;
        break;
    default: /* collective_broadcast: pipelined along a chain */
        it->kind = COST_COLLECTIVE_BROADCAST;
        it->bytes = in_bytes;
        it->payload = n > 1 ? in_bytes : 0;
        it->steps = steps;
        break;
    }
    it->once = it->bytes;
}

/* The item of collective op, for one execution. */
static int collective_item(prep *c, const fn_info *f, const ir_op *op, cost_coll_item *out)
{
    cost_program *p = c->p;
    cost_coll_item it;
    memset(&it, 0, sizeof it);
    it.op = op;
    const cost_mesh *mesh = &p->mesh;
    int64_t ndev = mesh->naxes ? mesh_devices(mesh) : p->num_partitions;
    bool on_mesh = mesh->naxes > 0;
    double in_bytes = 0, out_bytes = 0;
    for (uint32_t i = 0; i < op->n_operands; i++)
        in_bytes += value_bytes(c, f, op->operands[i]);
    for (uint32_t i = 0; i < op->n_results; i++)
        out_bytes += value_bytes(c, f, &op->results[i]);

    if (op->opcode == IR_OP_COLLECTIVE_PERMUTE) {
        ir_attr *pairs = ir_op_attr(op, "source_target_pairs");
        if (!dense_ints_ok(pairs) || pairs->type->rank != 2 || pairs->type->dims[1] != 2)
            return coll_fail(c, op, "source_target_pairs is not an Nx2 integer tensor");
        int64_t np = pairs->type->dims[0], span = 0;
        for (int64_t i = 0; i < np; i++) {
            int64_t s = ir_dense_int_at(pairs, (size_t)(2 * i)), t = ir_dense_int_at(pairs, (size_t)(2 * i + 1));
            if (s < 0 || t < 0)
                return coll_fail(c, op, "negative device id in source_target_pairs");
            if (on_mesh && (s >= ndev || t >= ndev))
                on_mesh = false, p->notes |= COST_NOTE_GROUP_OFF_MESH;
            if (on_mesh)
                it.axes |= (uint16_t)cost__axes_between(mesh, s, t);
            span = s + 1 > span ? s + 1 : span;
            span = t + 1 > span ? t + 1 : span;
        }
        it.kind = COST_COLLECTIVE_PERMUTE;
        it.group = np > 0 ? span : 1;
        it.bytes = in_bytes;
        it.payload = np > 0 ? in_bytes : 0;
        it.steps = np > 0 ? 1 : 0;
    } else {
        ir_attr *groups = ir_op_attr(op, "replica_groups");
        if (!groups)
            return coll_fail(c, op, "no replica_groups");
        if (!dense_ints_ok(groups) || groups->type->rank != 2)
            return coll_fail(c, op, "replica_groups is not a 2-d integer tensor");
        int64_t n = groups->type->dims[1];
        bool all = groups->type->dims[0] == 0 || n == 0;
        if (all) {
            /* empty groups: one group of every device */
            n = ndev > 0 ? ndev : 1;
            if (on_mesh)
                it.axes = (uint16_t)((1u << mesh->naxes) - 1);
        } else {
            int64_t first = ir_dense_int_at(groups, 0);
            for (int64_t i = 0; i < n; i++) {
                int64_t d = ir_dense_int_at(groups, (size_t)i);
                if (d < 0)
                    return coll_fail(c, op, "negative device id in replica_groups");
                if (on_mesh && (d >= ndev || first >= ndev))
                    on_mesh = false, p->notes |= COST_NOTE_GROUP_OFF_MESH;
                if (on_mesh)
                    it.axes |= (uint16_t)cost__axes_between(mesh, first, d);
            }
        }
        it.group = n;
        cost__coll_formula(&it, (ir_opcode)op->opcode, in_bytes, out_bytes);
    }
    it.flat = !on_mesh;
    if (!on_mesh)
        it.axes = 0;
    it.once = it.bytes;
    it.count = 1;
    *out = it;
    return 0;
}

/* ========================================================== while loops */

/* The value of a scalar integer constant. */
static bool const_int(const ir_value *v, int64_t *out)
{
    const ir_op *d = v ? v->def : NULL;
    if (!d || d->opcode != IR_OP_CONSTANT)
        return false;
    ir_attr *a = ir_op_attr(d, "value");
    if (!dense_ints_ok(a) || ir_type_numel(a->type) != 1)
        return false;
    *out = ir_dense_int_at(a, 0);
    return true;
}

/*
 * A slot of a while loop's carried state, as the regions see it: block
 * argument `arg` itself (tuple -1: a variadic stablehlo.while, as JAX prints
 * scans) or element `tuple` of it (HLO's while over one tuple).
 */
typedef struct loop_slot {
    uint32_t arg;
    int64_t tuple;
} loop_slot;

/* Which slot of block b the value v is: b's argument or a get_tuple_element
 * of one.  False for anything computed. */
static bool slot_of(const ir_value *v, const ir_block *b, loop_slot *out)
{
    if (!v)
        return false;
    if (!v->def) {
        if (v->block != b)
            return false;
        out->arg = v->index;
        out->tuple = -1;
        return true;
    }
    const ir_op *g = v->def;
    if (g->opcode != IR_OP_GET_TUPLE_ELEMENT || g->n_operands != 1 || !g->operands[0] || g->operands[0]->def ||
        g->operands[0]->block != b)
        return false;
    ir_attr *ia = ir_op_attr(g, "index");
    if (!ia || ia->kind != IR_A_INT || ia->u.i < 0)
        return false;
    out->arg = g->operands[0]->index;
    out->tuple = ia->u.i;
    return true;
}

/* The value that fills slot s in the list vals (the while's operands, or
 * what its body returns): vals[s.arg], or operand s.tuple of the `tuple`
 * op that built it.  NULL when it cannot be told. */
static const ir_value *slot_value(const ir_value *const *vals, uint32_t n, loop_slot s)
{
    if (s.arg >= n || !vals[s.arg])
        return NULL;
    const ir_value *v = vals[s.arg];
    if (s.tuple < 0)
        return v;
    const ir_op *t = v->def;
    if (!t || t->opcode != IR_OP_TUPLE || (uint64_t)s.tuple >= t->n_operands)
        return NULL;
    return t->operands[s.tuple];
}

/* A constant integer, seen through converts and reshapes of one element
 * (HLO prints `s32[] constant(8)`, JAX `stablehlo.constant dense<8>`). */
static bool const_int_deep(const ir_value *v, int64_t *out)
{
    for (int hops = 0; v && hops < 4; hops++) {
        if (const_int(v, out))
            return true;
        const ir_op *d = v->def;
        if (!d || d->n_operands != 1 || (d->opcode != IR_OP_CONVERT && d->opcode != IR_OP_RESHAPE &&
                                         d->opcode != IR_OP_BROADCAST_IN_DIM))
            return false;
        v = d->operands[0];
    }
    return false;
}

/* The trip count XLA wrote on the loop: backend_config={"known_trip_count":
 * {"n":"8"}} (the HLO parser keeps it as the string `hlo.backend_config`). */
static bool known_trip_count(const ir_op *w, int64_t *trips)
{
    ir_attr *a = ir_op_attr(w, "hlo.backend_config");
    if (!a || a->kind != IR_A_STRING || !a->u.str.s || !strstr(a->u.str.s, "known_trip_count"))
        return false;
    json_t *j = json_loads(a->u.str.s, 0, NULL);
    json_t *n = json_object_get(json_object_get(j, "known_trip_count"), "n");
    bool ok = false;
    long long v = 0;
    if (json_is_string(n)) {
        char *end;
        v = strtoll(json_string_value(n), &end, 10);
        ok = end != json_string_value(n) && *end == '\0';
    } else if (json_is_integer(n)) {
        v = json_integer_value(n);
        ok = true;
    }
    json_decref(j);
    if (!ok || v < 0)
        return false;
    *trips = v;
    return true;
}

/* The slot the condition tests and the bound, when the condition is `i < n`
 * (`compare LT, i, n` or `compare GT, n, i`; LE and GE count one more) with
 * n a constant or a carried slot the body never changes.  *incl: the bound
 * is included. */
static bool loop_bound(const ir_op *w, loop_slot *ctr, int64_t *limit, bool *incl)
{
    const ir_block *cb = w->regions[0].first, *bb = w->regions[1].first;
    const ir_op *ret = cb->last;
    if (ret->n_operands != 1 || !ret->operands[0])
        return false;
    const ir_op *cmp = ret->operands[0]->def;
    char dir[8];
    if (!cmp || cmp->opcode != IR_OP_COMPARE || cmp->n_operands != 2 || !ir_compare_direction(cmp, dir, sizeof dir))
        return false;
    const ir_value *iv, *lim;
    if (!strcmp(dir, "LT") || !strcmp(dir, "LE")) {
        iv = cmp->operands[0], lim = cmp->operands[1];
    } else if (!strcmp(dir, "GT") || !strcmp(dir, "GE")) {
        iv = cmp->operands[1], lim = cmp->operands[0];
    } else {
        return false;
    }
    *incl = dir[1] == 'E';
    if (!slot_of(iv, cb, ctr))
        return false;
    if (const_int_deep(lim, limit))
        return true;
    /* a loop-invariant carried bound: the body hands it back unchanged */
    loop_slot ls;
    if (!slot_of(lim, cb, &ls) || !bb->last)
        return false;
    const ir_value *back = slot_value((const ir_value *const *)bb->last->operands, bb->last->n_operands, ls);
    loop_slot bs;
    if (!back || !slot_of(back, bb, &bs) || bs.arg != ls.arg || bs.tuple != ls.tuple)
        return false;
    return const_int_deep(slot_value((const ir_value *const *)w->operands, w->n_operands, ls), limit);
}

/*
 * Trips of a counter loop: the condition compares a carried counter with a
 * bound (loop_bound), the counter starts at a constant and the body returns
 * `counter + step` for a constant step > 0.  Both forms of the carried
 * state are read: JAX's variadic while (the counter is a block argument)
 * and HLO's while over one tuple (the counter is get_tuple_element i of the
 * argument, the init and the body's result `tuple` ops).  A trip count XLA
 * wrote on the loop (known_trip_count) is taken as it is.
 */
static bool while_trips(const ir_op *w, int64_t *trips)
{
    if (known_trip_count(w, trips))
        return true;
    if (w->n_regions != 2)
        return false;
    const ir_block *cb = w->regions[0].first, *bb = w->regions[1].first;
    if (!cb || !bb || cb->n_args != w->n_operands || bb->n_args != w->n_operands || !cb->last || !bb->last)
        return false;
    const ir_op *bret = bb->last;
    if (bret->n_operands != w->n_operands)
        return false;
    loop_slot ctr;
    int64_t limit, init, step;
    bool incl;
    if (!loop_bound(w, &ctr, &limit, &incl))
        return false;
    if (!const_int_deep(slot_value((const ir_value *const *)w->operands, w->n_operands, ctr), &init))
        return false;
    const ir_value *next = slot_value((const ir_value *const *)bret->operands, bret->n_operands, ctr);
    const ir_op *inc = next ? next->def : NULL;
    if (!inc || inc->opcode != IR_OP_ADD || inc->n_operands != 2)
        return false;
    loop_slot s;
    if (slot_of(inc->operands[0], bb, &s) && s.arg == ctr.arg && s.tuple == ctr.tuple &&
        const_int_deep(inc->operands[1], &step)) {
        /* %i + step */
    } else if (slot_of(inc->operands[1], bb, &s) && s.arg == ctr.arg && s.tuple == ctr.tuple &&
               const_int_deep(inc->operands[0], &step)) {
        /* step + %i */
    } else {
        return false;
    }
    if (step <= 0)
        return false;
    double span = (double)limit - (double)init + (incl ? 1 : 0);
    if (span <= 0) {
        *trips = 0;
        return true;
    }
    double t = ceil(span / (double)step);
    *trips = t > 1e15 ? (int64_t)1e15 : (int64_t)t;
    return true;
}

/* Records loop w (trips -1 when not readable), run `mult` times per step. */
static int add_loop(prep *c, const ir_op *w, int64_t trips, double mult)
{
    cost_program *p = c->p;
    if (p->n_loops == p->cap_loops) {
        size_t cap = p->cap_loops ? 2 * p->cap_loops : 8;
        cost_loop_item *v = ap_realloc(p->loops, cap * sizeof *v);
        if (!v)
            return ap_error_set(c->err, AP_ENOMEM, "out of memory preparing the cost model");
        p->loops = v;
        p->cap_loops = cap;
    }
    cost_loop_item *it = &p->loops[p->n_loops++];
    it->op = w;
    it->trips = trips;
    it->runs = trips < 0 ? mult : mult * (double)trips;
    it->depth = c->loop_depth;
    it->colls = 0;
    return 0;
}

/* ============================================================ the walk */

/*
 * One walk builds the graph of each block (walk_block) op by op (walk_op)
 * and runs it (graph.c): its kernels' times are appended to the program,
 * and its peak goes to the op holding the block, or is the program's.
 * Each block is its own level; a value of an enclosing block that a
 * nested block reads becomes an input of that block and an operand of the
 * op holding it, so that it lives until that op.
 */

static int walk_block(prep *c, fn_info *f, const ir_block *b, double mult, bool entry, cost_peak_info *pk,
                      int64_t *peak);

static int oom_prep(prep *c) { return ap_error_set(c->err, AP_ENOMEM, "out of memory preparing the cost model"); }

/* The level for a block at the current depth, emptied. */
static glevel *level_enter(prep *c, const fn_info *f)
{
    if (c->level == c->n_levels) {
        glevel **v = ap_realloc(c->levels, sizeof *v * (size_t)(c->n_levels + 1));
        if (!v)
            return NULL;
        c->levels = v;
        if (!(v[c->n_levels] = ap_calloc(1, sizeof **v)))
            return NULL;
        c->n_levels++;
    }
    glevel *lv = c->levels[c->level];
    if (f->n_values + 1 > lv->cap) {
        uint32_t cap = f->n_values + 1;
        uint32_t *a = ap_realloc(lv->first, sizeof *a * cap);
        if (a)
            lv->first = a;
        uint32_t *n = ap_realloc(lv->count, sizeof *n * cap);
        if (n)
            lv->count = n;
        uint32_t *st = ap_calloc(cap, sizeof *st);
        if (!a || !n || !st) {
            ap_free(st);
            return NULL;
        }
        ap_free(lv->stamp);
        lv->stamp = st;
        lv->cap = cap;
        lv->epoch = 0;
    }
    if (++lv->epoch == 0) { /* wrapped: forget every stamp */
        memset(lv->stamp, 0, sizeof *lv->stamp * lv->cap);
        lv->epoch = 1;
    }
    lv->fn = f;
    cost__graph_reset(&lv->g);
    lv->g.eager = c->p->framework == COST_FW_EAGER;
    lv->n_leaves = lv->n_caps = lv->n_ret = lv->n_arg_leaves = 0;
    c->level++;
    return lv;
}

static bool leaf_push(glevel *lv, uint32_t v)
{
    if (lv->n_leaves == lv->cap_leaves) {
        uint32_t cap = lv->cap_leaves ? 2 * lv->cap_leaves : 1024;
        uint32_t *l = ap_realloc(lv->leaves, sizeof *l * cap);
        if (!l)
            return false;
        lv->leaves = l;
        lv->cap_leaves = cap;
    }
    lv->leaves[lv->n_leaves++] = v;
    return true;
}

static uint32_t n_leaves_of(const ir_type *t)
{
    if (!t || t->kind != IR_T_TUPLE)
        return 1;
    uint32_t n = 0;
    for (int i = 0; i < t->n_elems; i++)
        n += n_leaves_of(t->elems[i]);
    return n;
}

/* Appends inputs for the leaves of type t (flattening tuples). */
static bool add_inputs(prep *c, glevel *lv, const ir_type *t, uint8_t in, uint32_t what, const char *name)
{
    if (t && t->kind == IR_T_TUPLE) {
        for (int i = 0; i < t->n_elems; i++)
            if (!add_inputs(c, lv, t->elems[i], in, what, name))
                return false;
        return true;
    }
    uint32_t v = cost__graph_input(&lv->g, cost__type_bytes(t, &c->p->notes), in, cost__dims_hash(t), what, name);
    return v != CG_NONE && leaf_push(lv, v);
}

/* Maps value index k to the leaves [from, lv->n_leaves). */
static void map_leaves(glevel *lv, uint32_t k, uint32_t from)
{
    if (k == NO_INDEX || k >= lv->cap)
        return;
    lv->first[k] = from;
    lv->count[k] = lv->n_leaves - from;
    lv->stamp[k] = lv->epoch;
}

/* The leaves of value v in this block: its own, or for a value of an
 * enclosing block, inputs made for it now.  *first indexes lv->leaves
 * (which may move when more are made: index it afresh). */
static bool leaves(prep *c, glevel *lv, const ir_value *v, uint32_t *first, uint32_t *count)
{
    uint32_t k = vid(lv->fn, v);
    if (k != NO_INDEX && k < lv->cap && lv->stamp[k] == lv->epoch) {
        *first = lv->first[k];
        *count = lv->count[k];
        return true;
    }
    uint32_t from = lv->n_leaves;
    if (!add_inputs(c, lv, v ? v->type : NULL, 0, k, NULL))
        return false;
    if (lv->n_caps == lv->cap_caps) {
        uint32_t cap = lv->cap_caps ? 2 * lv->cap_caps : 64;
        const ir_value **cp = ap_realloc(lv->caps, sizeof *cp * cap);
        if (!cp)
            return false;
        lv->caps = cp;
        lv->cap_caps = cap;
    }
    lv->caps[lv->n_caps++] = v;
    map_leaves(lv, k, from);
    *first = from;
    *count = lv->n_leaves - from;
    return true;
}

/* Edges from the node being built to value v's leaves, `read` bytes in
 * all (shared out by the leaves' sizes). */
static bool edge_to(prep *c, glevel *lv, const ir_value *v, double read)
{
    uint32_t first, count;
    if (!leaves(c, lv, v, &first, &count))
        return false;
    if (count == 1) {
        cost__graph_edge(&lv->g, lv->leaves[first], read);
        return !lv->g.oom;
    }
    double total = 0;
    for (uint32_t i = 0; i < count; i++)
        total += lv->g.v_bytes[lv->leaves[first + i]];
    for (uint32_t i = 0; i < count; i++) {
        double b = lv->g.v_bytes[lv->leaves[first + i]];
        cost__graph_edge(&lv->g, lv->leaves[first + i], total > 0 ? read * b / total : 0);
    }
    return !lv->g.oom;
}

/* Results of the node being built for the leaves of type t (tuples
 * flattened), leaf i taking over buffer alias[i] when that is given and
 * not CG_NONE. */
static bool leaf_results(prep *c, glevel *lv, const ir_type *t, uint32_t k, const uint32_t *alias, uint32_t n_alias,
                         uint32_t *i)
{
    if (t && t->kind == IR_T_TUPLE) {
        for (int e = 0; e < t->n_elems; e++)
            if (!leaf_results(c, lv, t->elems[e], k, alias, n_alias, i))
                return false;
        return true;
    }
    uint32_t al = alias && *i < n_alias ? alias[*i] : CG_NONE;
    (*i)++;
    uint32_t v = cost__graph_result(&lv->g, cost__type_bytes(t, &c->p->notes), al, cost__dims_hash(t), k);
    return v != CG_NONE && leaf_push(lv, v);
}

/* The results of the node being built for value r (see leaf_results);
 * alias may point into lv->leaves. */
static bool results_of(prep *c, glevel *lv, const ir_value *r, const uint32_t *alias, uint32_t n_alias)
{
    uint32_t small[16], *copy = small;
    if (alias && n_alias) {
        if (n_alias > 16 && !(copy = ap_malloc(sizeof *copy * n_alias)))
            return false;
        memcpy(copy, alias, sizeof *copy * n_alias);
    }
    uint32_t from = lv->n_leaves, k = vid(lv->fn, r), i = 0;
    bool ok = leaf_results(c, lv, r->type, k, alias && n_alias ? copy : NULL, n_alias, &i);
    if (ok)
        map_leaves(lv, k, from);
    if (copy != small)
        ap_free(copy);
    return ok;
}

/* Records the values the nested block just walked captured, and the block
 * itself (the last registered), for the op holding it. */
static bool collect_caps(prep *c, const glevel *inner)
{
    if (c->p->n_blk) {
        if (c->n_kidv == c->cap_kidv) {
            uint32_t cap = c->cap_kidv ? 2 * c->cap_kidv : 16;
            uint32_t *k = ap_realloc(c->kidv, sizeof *k * cap);
            if (!k)
                return false;
            c->kidv = k;
            c->cap_kidv = cap;
        }
        c->kidv[c->n_kidv++] = (uint32_t)(c->p->n_blk - 1);
    }
    for (uint32_t i = 0; i < inner->n_caps; i++) {
        if (c->n_acc == c->cap_acc) {
            uint32_t cap = c->cap_acc ? 2 * c->cap_acc : 64;
            const ir_value **a = ap_realloc(c->acc, sizeof *a * cap);
            if (!a)
                return false;
            c->acc = a;
            c->cap_acc = cap;
        }
        c->acc[c->n_acc++] = inner->caps[i];
    }
    return true;
}

/* The larger of two nested peaks. */
static void keep_peak(int64_t *best, cost_peak_info *bpk, int64_t pk, const cost_peak_info *info)
{
    if (pk > *best || (*best == 0 && !bpk->at)) {
        *best = pk;
        *bpk = *info;
    }
}

/* Walks every block of op's regions (each executed `mult` times); the
 * largest of their peaks into *nested and *npk (branches and loop parts do
 * not overlap); their captured values into c->acc. */
static int walk_regions(prep *c, fn_info *f, const ir_op *op, double mult, int64_t *nested, cost_peak_info *npk)
{
    for (uint32_t r = 0; r < op->n_regions; r++)
        for (const ir_block *b = op->regions[r].first; b; b = b->next) {
            int64_t pk = 0;
            cost_peak_info info;
            int rc = walk_block(c, f, b, mult, false, &info, &pk);
            if (rc < 0)
                return rc;
            if (!collect_caps(c, c->levels[c->level]))
                return oom_prep(c);
            keep_peak(nested, npk, pk, &info);
        }
    return 0;
}

static const char *callee_name(const ir_op *op)
{
    ir_attr *a = ir_op_attr(op, op->opcode == IR_OP_COMPOSITE ? "decomposition" : "callee");
    return a && a->kind == IR_A_SYMREF ? a->u.str.s : NULL;
}

/* A called function's body, run `mult` times: its peak into *nested. */
static int walk_call(prep *c, const ir_op *op, double mult, int64_t *nested, cost_peak_info *npk)
{
    const char *name = callee_name(op);
    const ir_op *callee = name ? find_func(c, name) : NULL;
    const ir_block *entry = callee ? ir_func_entry(callee) : NULL;
    if (!entry) {
        /* an external declaration: nothing known about it */
        c->p->notes |= COST_NOTE_UNKNOWN_OP;
        return 0;
    }
    if (c->depth >= MAX_CALL_DEPTH) {
        c->p->notes |= COST_NOTE_CALL_DEPTH;
        return 0;
    }
    fn_info *cf = fn_get(c, callee);
    if (!cf)
        return oom_prep(c);
    c->depth++;
    int rc = walk_block(c, cf, entry, mult, false, npk, nested);
    c->depth--;
    if (rc == 0 && !collect_caps(c, c->levels[c->level]))
        rc = oom_prep(c);
    return rc;
}

/* Elements of t over its dims that are neither batch nor contracting. */
static double free_size(const ir_type *t, const int64_t *batch, int nb, const int64_t *contract, int nc)
{
    double n = 1;
    for (int i = 0; i < rank_of(t); i++) {
        bool skip = false;
        for (int j = 0; j < nb && !skip; j++)
            skip = batch[j] == i;
        for (int j = 0; j < nc && !skip; j++)
            skip = contract[j] == i;
        if (!skip)
            n *= (double)dim(t, i);
    }
    return n;
}

/* What movement_bytes made of an op. */
typedef enum move_kind {
    MOVE_NONE,  /* not an op that only moves data */
    MOVE_FREE,  /* one that costs nothing here */
    MOVE_BYTES, /* c has the bytes it touches (no flops) */
} move_kind;

/* Data movement: zero flops, the bytes actually touched (a slice reads the
 * slice, not its operand), or nothing at all (a bitcast, an address
 * computation into a loop-carried stack). */
static move_kind movement_bytes(const cost_opview *v, unsigned *notes, cost_opcost *c)
{
    const ir_op *op = v->op;
    const ir_type *const *ot = v->opd, *const *rt = v->res;
    const ir_type *o0 = op->n_operands ? ot[0] : NULL;
#define TBYTES(t) cost__type_bytes((t), notes)
    switch (op->opcode) {
    case IR_OP_DYNAMIC_SLICE:
        /* a slice of a loop-carried stack (a scan's layer): an address
         * computation, its users read the slice where it lies */
        if (v->carried)
            return MOVE_FREE;
        c->read[0] = c->write = TBYTES(rt[0]);
        return MOVE_BYTES;
    case IR_OP_SLICE:
    case IR_OP_REAL_DYNAMIC_SLICE:
        /* reads only the slice: a local copy (also how SPMD programs take
         * their shard by partition id) */
        c->read[0] = c->write = TBYTES(rt[0]);
        return MOVE_BYTES;
    case IR_OP_GATHER:
    case IR_OP_DYNAMIC_GATHER:
    case IR_OP_TORCH_INDEX_SELECT:
        c->read[0] = c->write = TBYTES(rt[0]);
        if (op->n_operands > 1)
            c->read[1] = TBYTES(ot[1]);
        return MOVE_BYTES;
    case IR_OP_DYNAMIC_UPDATE_SLICE:
        /* in place: reads and writes the update only; into a loop-carried
         * stack, the update's producer writes it into its slot */
        if (v->carried)
            return MOVE_FREE;
        if (op->n_operands > 1)
            c->read[1] = c->write = TBYTES(ot[1]);
        return MOVE_BYTES;
    case IR_OP_IOTA:
    case IR_OP_DYNAMIC_IOTA:
        c->write = TBYTES(rt[0]);
        return MOVE_BYTES;
    case IR_OP_RESHAPE:
        if (cost__is_bitcast_reshape(op, o0, op->n_results == 1 ? rt[0] : NULL))
            return MOVE_FREE;
        plain_bytes(v, notes, c);
        return MOVE_BYTES;
    case IR_OP_BROADCAST_IN_DIM:
        /* unit dims only: a bitcast */
        if (cost__is_bitcast_broadcast(op, o0, op->n_results == 1 ? rt[0] : NULL))
            return MOVE_FREE;
        plain_bytes(v, notes, c);
        return MOVE_BYTES;
    default:
        return MOVE_NONE;
    }
#undef TBYTES
}

/*
 * The cost of one compute op, from the types it has (a module's, or the
 * local types a partition state gives it) and what fusion keeps on chip.
 * Returns false for ops that cost nothing (a bitcast reshape, a sharding
 * annotation of another dialect).  Structure, loops, calls and collectives
 * are walk_op's.
 */
bool cost__op_cost(const cost_opview *v, unsigned *notes, cost_opcost *c)
{
    const ir_op *op = v->op;
    const ir_type *const *ot = v->opd, *const *rt = v->res;
    const ir_type *o0 = op->n_operands ? ot[0] : NULL;
    double flops = 0, matmul = 0;
    cost_prec prec = COST_PREC_VECTOR;
    c->write = 0;
    c->mm_m = c->mm_n = 0;
    for (uint32_t i = 0; i < op->n_operands; i++)
        c->read[i] = 0;
    move_kind moved = movement_bytes(v, notes, c);
    if (moved == MOVE_FREE)
        return false;
    if (moved == MOVE_BYTES) {
        c->flops = c->matmul = 0;
        c->prec = COST_PREC_VECTOR;
        return true;
    }
#define NUMEL(t) cost__numel((t), notes)
#define TBYTES(t) cost__type_bytes((t), notes)
    switch (op->opcode) {
    case IR_OP_DOT:
    case IR_OP_DOT_GENERAL: {
        ir_dot_dims d;
        double k = 1;
        if (op->n_operands >= 2 && ir_dot_dims_get(op, &d) == 0) {
            for (int i = 0; i < d.n_contract; i++)
                k *= (double)dim(o0, d.lhs_contract[i]);
            /* M: the left's free dims, N: the right's (what tiles cover) */
            c->mm_m = free_size(o0, d.lhs_batch, d.n_batch, d.lhs_contract, d.n_contract);
            c->mm_n = free_size(ot[1], d.rhs_batch, d.n_batch, d.rhs_contract, d.n_contract);
        }
        flops = 2 * NUMEL(rt[0]) * k;
        prec = cost__prec_of(o0);
        if (o0 && ir_elem_is_complex((ir_elem)o0->elem))
            flops *= 4;
        matmul = flops;
        plain_bytes(v, notes, c);
        break;
    }
    case IR_OP_CONVOLUTION: {
        ir_conv_dims d;
        double window = 1, kin = 1;
        if (op->n_operands >= 2 && ir_conv_dims_get(op, &d) == 0) {
            for (int i = 0; i < d.n_spatial; i++)
                window *= (double)dim(ot[1], d.kernel_spatial[i]);
            kin = (double)dim(ot[1], d.kernel_in); /* input features / feature groups */
            /* an implicit GEMM: M the output positions, N the output features */
            double nf = (double)dim(rt[0], d.out_feature);
            c->mm_n = nf;
            c->mm_m = nf > 0 ? NUMEL(rt[0]) / nf : 0;
        }
        flops = 2 * NUMEL(rt[0]) * window * kin;
        prec = cost__prec_of(o0);
        matmul = flops;
        plain_bytes(v, notes, c);
        break;
    }
    case IR_OP_REDUCE:
        for (uint32_t i = 0; i < op->n_operands / 2; i++)
            flops += NUMEL(ot[i]);
        plain_bytes(v, notes, c);
        break;
    case IR_OP_REDUCE_WINDOW: {
        int64_t w[IR_MAX_RANK];
        int n = ir_attr_int_list(ir_op_attr(op, "window_dimensions"), w, IR_MAX_RANK);
        double window = 1;
        for (int i = 0; i < n && i < IR_MAX_RANK; i++)
            window *= (double)w[i];
        flops = (double)(op->n_operands / 2) * NUMEL(rt[0]) * window;
        plain_bytes(v, notes, c);
        break;
    }
    case IR_OP_SELECT_AND_SCATTER: {
        int64_t w[IR_MAX_RANK];
        int n = ir_attr_int_list(ir_op_attr(op, "window_dimensions"), w, IR_MAX_RANK);
        double window = 1;
        for (int i = 0; i < n && i < IR_MAX_RANK; i++)
            window *= (double)w[i];
        flops = 2 * (op->n_operands > 1 ? NUMEL(ot[1]) : 0) * window;
        plain_bytes(v, notes, c);
        break;
    }
    case IR_OP_SORT: {
        ir_attr *da = ir_op_attr(op, "dimension");
        int64_t axis = da && da->kind == IR_A_INT ? da->u.i : -1;
        if (o0 && o0->kind == IR_T_TENSOR && axis < 0)
            axis += o0->rank;
        double len = (double)dim(o0, axis);
        flops = NUMEL(o0) * (len > 1 ? ceil(log2(len)) : 1) * (double)op->n_operands;
        plain_bytes(v, notes, c);
        break;
    }
    case IR_OP_FFT: {
        int64_t l[IR_MAX_RANK];
        int n = ir_attr_int_list(ir_op_attr(op, "fft_length"), l, IR_MAX_RANK);
        double len = 1;
        for (int i = 0; i < n && i < IR_MAX_RANK; i++)
            len *= (double)l[i];
        flops = 5 * NUMEL(rt[0]) * (len > 1 ? log2(len) : 1);
        prec = COST_PREC_VECTOR;
        plain_bytes(v, notes, c);
        break;
    }
    case IR_OP_TRIANGULAR_SOLVE:
        if (op->n_operands == 2)
            flops = NUMEL(ot[1]) * (double)dim(o0, rank_of(o0) - 1);
        plain_bytes(v, notes, c);
        break;
    case IR_OP_CHOLESKY:
        if (op->n_operands == 1)
            flops = NUMEL(o0) * (double)dim(o0, rank_of(o0) - 1) / 3;
        plain_bytes(v, notes, c);
        break;
    case IR_OP_BATCH_NORM_INFERENCE:
    case IR_OP_BATCH_NORM_TRAINING:
    case IR_OP_BATCH_NORM_GRAD:
        flops = 8 * NUMEL(o0);
        plain_bytes(v, notes, c);
        break;
    case IR_OP_RNG:
    case IR_OP_RNG_BIT_GENERATOR:
        for (uint32_t i = 0; i < op->n_results; i++)
            flops += TRANSCENDENTAL_FLOPS * NUMEL(rt[i]);
        plain_bytes(v, notes, c);
        break;
    case IR_OP_MAP:
        flops = NUMEL(rt[0]) * (double)(op->n_operands > 1 ? op->n_operands - 1 : 1);
        plain_bytes(v, notes, c);
        break;

    case IR_OP_SCATTER: {
        uint32_t n_in = (op->n_operands - 1) / 2;
        for (uint32_t i = 0; i < n_in; i++) {
            c->read[n_in + 1 + i] = TBYTES(ot[n_in + 1 + i]);
            c->write += c->read[n_in + 1 + i];
        }
        flops = n_in ? NUMEL(ot[n_in + 1]) * n_in : 0;
        c->read[n_in] = TBYTES(ot[n_in]);
        break;
    }
    case IR_OP_CUSTOM_CALL:
        if (ir_custom_call_is_identity(op))
            return false; /* an annotation: deleted by XLA */
        if (cost__fmha_flops(op, ot, &flops, &matmul)) /* fused attention */
            prec = cost__prec_of(o0);
        else
            *notes |= COST_NOTE_CUSTOM_CALL;
        plain_bytes(v, notes, c);
        break;

    default:
        if (op->opcode == IR_OP_UNKNOWN) {
            if (is_free_foreign(op))
                return false;
            *notes |= COST_NOTE_UNKNOWN_OP;
            plain_bytes(v, notes, c);
            break;
        }
        if (is_elementwise(op)) {
            flops = ew_flops_per_elem((ir_opcode)op->opcode) * NUMEL(rt[0]);
            plain_bytes(v, notes, c);
            break;
        }
        /* transpose, reshape, broadcast, concatenate, pad, reverse, copy,
         * send/recv, ...: zero flops, read and written once */
        plain_bytes(v, notes, c);
        break;
    }
#undef NUMEL
#undef TBYTES
    c->flops = flops;
    c->prec = prec;
    c->matmul = matmul;
    return true;
}

/* The carried value (a while body's block argument, or an element of its
 * tuple) that v is, looking through bitcasts; NULL when v is computed. */
static const ir_value *carried_root(const ir_value *v)
{
    for (int hops = 0; v && hops < 8; hops++) {
        if (!v->def) {
            const ir_block *b = v->block;
            const ir_op *w = b && b->parent ? b->parent->parent : NULL;
            return w && w->opcode == IR_OP_WHILE && w->n_regions == 2 && b->parent == &w->regions[1] ? v : NULL;
        }
        const ir_op *d = v->def;
        if (d->n_operands < 1 || !is_alias_op(d))
            return NULL;
        v = d->operands[d->n_operands == d->n_results ? v->index : 0];
    }
    return NULL;
}

/* A dynamic_slice or dynamic_update_slice of a scan's stacked buffer: its
 * operand carried by the while whose body holds the op (the update, for an
 * update, computed in that body).  XLA runs these as address computations:
 * the slice's users read it in place, the update's producer writes into the
 * slot (in-place dynamic-update-slice fusion).  Scanned and unrolled forms of
 * one model then cost the same. */
static bool carried_slot_op(const ir_op *op)
{
    if ((op->opcode != IR_OP_DYNAMIC_SLICE && op->opcode != IR_OP_DYNAMIC_UPDATE_SLICE) || op->n_operands < 2)
        return false;
    const ir_value *root = carried_root(op->operands[0]);
    if (!root || root->block != op->parent)
        return false;
    if (op->opcode == IR_OP_DYNAMIC_SLICE) {
        /* a slice the body hands on as carried state is a copy */
        const ir_op *ret = op->parent->last;
        for (uint32_t i = 0; ret && i < ret->n_operands; i++)
            if (ret->operands[i] == &op->results[0])
                return false;
        return true;
    }
    const ir_value *u = op->operands[1];
    return u && u->def && u->def->parent == op->parent;
}

/* Structure, ids and aliases: free. */
bool cost__free_op(ir_opcode opc)
{
    switch (opc) {
    case IR_OP_MODULE:
    case IR_OP_FUNC:
    case IR_OP_FUNC_RETURN:
    case IR_OP_RETURN:
    case IR_OP_CONSTANT:
    case IR_OP_TUPLE:
    case IR_OP_GET_TUPLE_ELEMENT:
    case IR_OP_OPTIMIZATION_BARRIER:
    case IR_OP_AFTER_ALL:
    case IR_OP_CREATE_TOKEN:
    case IR_OP_PARTITION_ID:
    case IR_OP_REPLICA_ID:
    case IR_OP_GET_DIMENSION_SIZE:
        return true;
    default:
        return false;
    }
}

/* The leaves of the types of a while's operands, in order (graph values). */
static bool operand_leaves(prep *c, glevel *lv, const ir_op *op, uint32_t **out, uint32_t *n)
{
    uint32_t total = 0;
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t first, count;
        if (!leaves(c, lv, op->operands[i], &first, &count))
            return false;
        total += count;
    }
    uint32_t *v = ap_malloc(sizeof *v * (total + 1));
    if (!v)
        return false;
    total = 0;
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t first, count;
        leaves(c, lv, op->operands[i], &first, &count); /* mapped above */
        for (uint32_t k = 0; k < count; k++)
            v[total++] = lv->leaves[first + k];
    }
    *out = v;
    *n = total;
    return true;
}

/* A node for an op holding regions: reads its operands (`read` 0: what
 * the regions read is costed inside them) and the values its regions
 * captured (c->acc from acc0), writes its results (leaf i taking over
 * alias[i] when that is not CG_NONE). */
static int region_node(prep *c, glevel *lv, const ir_op *op, uint16_t flags, uint32_t acc0, uint32_t kid0,
                       int64_t nested, const cost_peak_info *npk, const uint32_t *alias, uint32_t n_alias,
                       const uint8_t *feeds, uint32_t n_feeds)
{
    cost_gnode *nd = cost__graph_node(&lv->g, op, flags, COST_PREC_VECTOR);
    if (!nd)
        return oom_prep(c);
    cost__graph_kids(&lv->g, c->kidv + kid0, c->n_kidv - kid0);
    c->n_kidv = kid0;
    uint32_t e0 = lv->g.n_edges;
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (!edge_to(c, lv, op->operands[i], 0))
            return oom_prep(c);
    /* operand leaves the regions read with a matmul (a loop's weights) */
    for (uint32_t k = 0; feeds && k < n_feeds && e0 + k < lv->g.n_edges; k++)
        lv->g.e_feeds[e0 + k] = feeds[k];
    for (uint32_t i = acc0; i < c->n_acc; i++)
        if (!edge_to(c, lv, c->acc[i], 0))
            return oom_prep(c);
    c->n_acc = acc0;
    cost__graph_nested(&lv->g, npk && npk->at ? npk : NULL, nested);
    uint32_t li = 0;
    for (uint32_t j = 0; j < op->n_results; j++) {
        uint32_t n = n_leaves_of(op->results[j].type);
        if (!results_of(c, lv, &op->results[j], alias && li < n_alias ? alias + li : NULL,
                        alias && li < n_alias ? n_alias - li : 0))
            return oom_prep(c);
        li += n;
    }
    return lv->g.oom ? oom_prep(c) : 0;
}

static int walk_while(prep *c, fn_info *f, glevel *lv, const ir_op *op, double mult)
{
    cost_program *p = c->p;
    int64_t trips;
    p->while_loops++;
    bool known = while_trips(op, &trips);
    size_t li = p->n_loops, colls0 = p->n_colls;
    int rc = add_loop(c, op, known ? trips : -1, mult);
    if (rc < 0)
        return rc;
    if (!known) {
        p->while_once++;
        p->notes |= COST_NOTE_WHILE_ONCE;
    }
    uint32_t acc0 = c->n_acc, kid0 = c->n_kidv, *pass = NULL, n_pass = 0, *opl = NULL, n_opl = 0, n_feeds = 0;
    uint8_t *feeds = NULL;
    int64_t nested = 0;
    cost_peak_info npk;
    memset(&npk, 0, sizeof npk);
    c->loop_depth++;
    /* the condition runs once more than the body */
    for (uint32_t r = 0; r < op->n_regions && rc == 0; r++)
        for (const ir_block *b = op->regions[r].first; b && rc == 0; b = b->next) {
            double m = !known ? mult : mult * (double)(r == 0 ? trips + 1 : trips);
            int64_t pk = 0;
            cost_peak_info info;
            if ((rc = walk_block(c, f, b, m, false, &info, &pk)) < 0)
                break;
            const glevel *inner = c->levels[c->level];
            if (!collect_caps(c, inner)) {
                rc = oom_prep(c);
                break;
            }
            keep_peak(&nested, &npk, pk, &info);
            if (r == 1 && b == op->regions[1].first && inner->n_ret) {
                /* which carried leaves the body hands back unchanged */
                ap_free(pass);
                if (!(pass = ap_malloc(sizeof *pass * inner->n_ret))) {
                    rc = oom_prep(c);
                    break;
                }
                memcpy(pass, inner->ret_in, sizeof *pass * inner->n_ret);
                n_pass = inner->n_ret;
            }
            if (r == 1 && b == op->regions[1].first && inner->n_arg_leaves && inner->g.v_feeds &&
                inner->g.cap_feeds >= inner->n_arg_leaves) {
                ap_free(feeds);
                if (!(feeds = ap_malloc(inner->n_arg_leaves))) {
                    rc = oom_prep(c);
                    break;
                }
                memcpy(feeds, inner->g.v_feeds, inner->n_arg_leaves);
                n_feeds = inner->n_arg_leaves;
            }
        }
    c->loop_depth--;
    p->loops[li].colls = (uint32_t)(p->n_colls - colls0);
    if (rc == 0 && !operand_leaves(c, lv, op, &opl, &n_opl))
        rc = oom_prep(c);
    if (rc == 0) {
        /* a slot the loop passes through unchanged (the stacked weights of
         * a scan) stays its operand's buffer */
        for (uint32_t i = 0; i < n_opl; i++)
            opl[i] = i < n_pass && pass[i] == i ? opl[i] : CG_NONE;
        rc = region_node(c, lv, op, cost__node_flags(op, NULL, NULL), acc0, kid0, nested, &npk, opl, n_opl, feeds,
                         n_feeds);
    }
    ap_free(pass);
    ap_free(opl);
    ap_free(feeds);
    return rc;
}

/* Builds the node (or nodes) of op in the block's graph; `terminator`: op
 * ends the block (its operands are the block's outputs). */
static int walk_op(prep *c, fn_info *f, glevel *lv, const ir_op *op, double mult, bool terminator)
{
    cost_program *p = c->p;
    p->n_ops_walked++;
    ir_opcode opc = (ir_opcode)op->opcode;
    if (opc == IR_OP_MODULE || opc == IR_OP_FUNC)
        return 0;
    if (terminator) {
        if (!cost__graph_node(&lv->g, op, CG_RETURN | CG_NOCOST, COST_PREC_VECTOR))
            return oom_prep(c);
        for (uint32_t i = 0; i < op->n_operands; i++)
            if (!edge_to(c, lv, op->operands[i], 0))
                return oom_prep(c);
        return 0;
    }
    switch (opc) {
    case IR_OP_TUPLE: {
        /* no kernel: the tuple is its elements */
        uint32_t from = lv->n_leaves;
        for (uint32_t i = 0; i < op->n_operands; i++) {
            uint32_t first, count;
            if (!leaves(c, lv, op->operands[i], &first, &count))
                return oom_prep(c);
            for (uint32_t k = 0; k < count; k++)
                if (!leaf_push(lv, lv->leaves[first + k]))
                    return oom_prep(c);
        }
        if (op->n_results == 1)
            map_leaves(lv, vid(f, &op->results[0]), from);
        return 0;
    }
    case IR_OP_GET_TUPLE_ELEMENT: {
        const ir_value *t = op->n_operands == 1 ? op->operands[0] : NULL;
        ir_attr *ia = ir_op_attr(op, "index");
        uint32_t first, count;
        if (!t || !leaves(c, lv, t, &first, &count))
            return t ? oom_prep(c) : 0;
        if (op->n_results == 1 && t->type && t->type->kind == IR_T_TUPLE && ia && ia->kind == IR_A_INT &&
            ia->u.i >= 0 && ia->u.i < t->type->n_elems && count == n_leaves_of(t->type)) {
            uint32_t off = 0, from = lv->n_leaves;
            for (int64_t e = 0; e < ia->u.i; e++)
                off += n_leaves_of(t->type->elems[e]);
            uint32_t n = n_leaves_of(t->type->elems[ia->u.i]);
            for (uint32_t k = 0; k < n; k++)
                if (!leaf_push(lv, lv->leaves[first + off + k]))
                    return oom_prep(c);
            map_leaves(lv, vid(f, &op->results[0]), from);
            return 0;
        }
        break; /* an element of something unknown: an alias of all of it */
    }
    case IR_OP_WHILE:
        return walk_while(c, f, lv, op, mult);
    case IR_OP_IF:
    case IR_OP_CASE:
    case IR_OP_FUNC_CALL:
    case IR_OP_COMPOSITE:
    case IR_OP_UNKNOWN: {
        if (opc == IR_OP_UNKNOWN && op->n_regions == 0)
            break;
        if ((opc == IR_OP_IF || opc == IR_OP_CASE) && op->n_regions > 1)
            p->notes |= COST_NOTE_BRANCHES_SUMMED;
        uint32_t acc0 = c->n_acc, kid0 = c->n_kidv;
        int64_t nested = 0;
        cost_peak_info npk;
        memset(&npk, 0, sizeof npk);
        /* sdy.manual_computation and kin: cost the body */
        bool call = opc == IR_OP_FUNC_CALL || opc == IR_OP_COMPOSITE;
        int rc = call ? walk_call(c, op, mult, &nested, &npk) : walk_regions(c, f, op, mult, &nested, &npk);
        if (rc < 0)
            return rc;
        /* a callee's arguments are the call's operands: which feed matmuls */
        const glevel *inner = c->level < c->n_levels ? c->levels[c->level] : NULL;
        uint8_t *feeds = NULL;
        uint32_t n_feeds = 0;
        if (call && inner && inner->n_arg_leaves && inner->g.v_feeds && inner->g.cap_feeds >= inner->n_arg_leaves &&
            (feeds = ap_malloc(inner->n_arg_leaves))) {
            memcpy(feeds, inner->g.v_feeds, inner->n_arg_leaves);
            n_feeds = inner->n_arg_leaves;
        }
        rc = region_node(c, lv, op, CG_REGION, acc0, kid0, nested, &npk, NULL, 0, feeds, n_feeds);
        ap_free(feeds);
        return rc;
    }
    case IR_OP_ALL_GATHER:
    case IR_OP_ALL_REDUCE:
    case IR_OP_REDUCE_SCATTER:
    case IR_OP_ALL_TO_ALL:
    case IR_OP_COLLECTIVE_PERMUTE:
    case IR_OP_COLLECTIVE_BROADCAST: {
        cost_coll_item it;
        int rc = collective_item(c, f, op, &it);
        if (rc < 0)
            return rc;
        if (!cost__graph_node(&lv->g, op, cost__node_flags(op, NULL, NULL), COST_PREC_VECTOR))
            return oom_prep(c);
        cost__graph_coll(&lv->g, &it);
        for (uint32_t i = 0; i < op->n_operands; i++)
            if (!edge_to(c, lv, op->operands[i], value_bytes(c, f, op->operands[i])))
                return oom_prep(c);
        for (uint32_t j = 0; j < op->n_results; j++)
            if (!results_of(c, lv, &op->results[j], NULL, 0))
                return oom_prep(c);
        return lv->g.oom ? oom_prep(c) : 0;
    }
    default:
        break;
    }
    /* a compute op (or an alias): its types and its cost as a kernel */
    const ir_type *small_t[32], **types = small_t;
    double small_r[16], *reads = small_r;
    uint32_t nt = op->n_operands + op->n_results;
    int rc = 0;
    if ((nt > 32 && !(types = ap_malloc(sizeof *types * nt))) ||
        (op->n_operands > 16 && !(reads = ap_malloc(sizeof *reads * op->n_operands)))) {
        rc = oom_prep(c);
        goto out;
    }
    for (uint32_t i = 0; i < op->n_operands; i++)
        types[i] = op->operands[i] ? op->operands[i]->type : NULL;
    for (uint32_t j = 0; j < op->n_results; j++)
        types[op->n_operands + j] = op->results[j].type;
    const ir_type *t0 = op->n_operands ? types[0] : NULL, *r0 = op->n_results ? types[op->n_operands] : NULL;
    bool carried = carried_slot_op(op);
    /* a slice of a scan's stack is a view: its users read the slice where
     * it lies (and a dot takes it as an operand address) */
    uint16_t flags = opc == IR_OP_GET_TUPLE_ELEMENT || (carried && opc == IR_OP_DYNAMIC_SLICE)
                         ? CG_ALIAS
                         : cost__node_flags(op, t0, r0);
    cost_opcost oc = {0, 0, 0, COST_PREC_VECTOR, reads, 0, 0};
    bool costed = false;
    if (!(flags & CG_ALIAS) && !cost__free_op(opc)) {
        cost_opview view = {op, types, types + op->n_operands, carried};
        costed = cost__op_cost(&view, &p->notes, &oc);
    }
    cost_gnode *nd = cost__graph_node(&lv->g, op, flags, (uint8_t)oc.prec);
    if (!nd) {
        rc = oom_prep(c);
        goto out;
    }
    if (costed) {
        nd->flops = oc.flops;
        nd->matmul = oc.matmul;
        nd->write = oc.write;
        nd->mm_m = oc.mm_m;
        nd->mm_n = oc.mm_n;
    }
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (!edge_to(c, lv, op->operands[i], costed ? reads[i] : 0)) {
            rc = oom_prep(c);
            goto out;
        }
    for (uint32_t j = 0; j < op->n_results; j++) {
        uint32_t first = 0, count = 0;
        if ((flags & CG_ALIAS) && op->n_operands) {
            /* result j in operand j's buffer (or operand 0's) */
            const ir_value *src = op->operands[op->n_operands == op->n_results ? j : 0];
            if (!leaves(c, lv, src, &first, &count)) {
                rc = oom_prep(c);
                goto out;
            }
        }
        if (!results_of(c, lv, &op->results[j], count ? lv->leaves + first : NULL, count)) {
            rc = oom_prep(c);
            goto out;
        }
    }
    if (lv->g.oom)
        rc = oom_prep(c);
out:
    if (types != small_t)
        ap_free(types);
    if (reads != small_r)
        ap_free(reads);
    return rc;
}

/* The leaf position of output j of the entry's return op. */
static uint32_t output_leaf(const ir_op *ret, uint32_t j)
{
    uint32_t pos = 0;
    for (uint32_t k = 0; k < j && k < ret->n_operands; k++)
        pos += n_leaves_of(ret->operands[k] ? ret->operands[k]->type : NULL);
    return pos;
}

/* Donation: outputs that live in arguments' buffers.  `tf.aliasing_output
 * = j` (and HLO's input_output_alias, which the parser turns into it)
 * names the output; a `jax.buffer_donor` argument takes the first output
 * of its type not taken, as XLA's OptimizeInputOutputBufferAlias pairs
 * them. */
static void donation(glevel *lv, const ir_op *func, const ir_block *b)
{
    const ir_op *ret = b->last;
    if (!ret || ret->n_results || ret->n_regions)
        return;
    uint32_t taken_small[64], *taken = ret->n_operands <= 64 ? taken_small : ap_calloc(ret->n_operands, sizeof *taken);
    if (!taken)
        return;
    memset(taken, 0, sizeof *taken * (ret->n_operands <= 64 ? 64 : 0));
    for (uint32_t i = 0; i < b->n_args; i++) {
        ir_attr *a = ir_func_arg_attr(func, i, "tf.aliasing_output");
        if (a && a->kind == IR_A_INT && a->u.i >= 0 && (uint64_t)a->u.i < ret->n_operands &&
            n_leaves_of(b->args[i].type) == 1) {
            uint32_t k = vid(lv->fn, &b->args[i]);
            if (k != NO_INDEX && k < lv->cap && lv->stamp[k] == lv->epoch) {
                cost__graph_out_alias(&lv->g, output_leaf(ret, (uint32_t)a->u.i), lv->leaves[lv->first[k]]);
                taken[a->u.i] = 1;
            }
        }
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        if (!ir_func_arg_attr(func, i, "jax.buffer_donor") || ir_func_arg_attr(func, i, "tf.aliasing_output") ||
            n_leaves_of(b->args[i].type) != 1)
            continue;
        uint32_t k = vid(lv->fn, &b->args[i]);
        if (k == NO_INDEX || k >= lv->cap || lv->stamp[k] != lv->epoch)
            continue;
        for (uint32_t j = 0; j < ret->n_operands; j++)
            if (!taken[j] && ret->operands[j] && ir_type_equal(ret->operands[j]->type, b->args[i].type)) {
                cost__graph_out_alias(&lv->g, output_leaf(ret, j), lv->leaves[lv->first[k]]);
                taken[j] = 1;
                break;
            }
    }
    if (taken != taken_small)
        ap_free(taken);
}

/*
 * Builds and runs the graph of block b, executed `mult` times: its
 * kernels' times go to the program, its peak (with what is live there)
 * to *peak and *pk.  The entry's arguments are the caller's buffers,
 * counted all along; a loop body's are its carried buffers, which it may
 * update in place; other blocks' belong to the op holding them.  After
 * it returns, c->levels[c->level] describes the block (ret_in, caps).
 */
static int walk_block(prep *c, fn_info *f, const ir_block *b, double mult, bool entry, cost_peak_info *pk,
                      int64_t *peak)
{
    glevel *lv = level_enter(c, f);
    if (!lv)
        return oom_prep(c);
    lv->g.outs_held = entry;
    int rc = 0;
    const ir_op *holder = b->parent ? b->parent->parent : NULL;
    bool carried = holder && holder->opcode == IR_OP_WHILE && holder->n_regions == 2 && b->parent == &holder->regions[1];
    for (uint32_t i = 0; i < b->n_args && rc == 0; i++) {
        uint8_t in = carried ? CG_IN_CARRIED : 0;
        const char *name = NULL;
        if (entry) {
            name = b->args[i].loc ? ir_loc_name(b->args[i].loc) : NULL;
            in = CG_IN_COUNTED | cost__name_hint(name);
        }
        uint32_t from = lv->n_leaves;
        if (!add_inputs(c, lv, b->args[i].type, in, i, name))
            rc = oom_prep(c);
        map_leaves(lv, vid(f, &b->args[i]), from);
    }
    lv->n_arg_leaves = lv->n_leaves;
    for (const ir_op *op = b->first; op && rc == 0; op = op->next)
        rc = walk_op(c, f, lv, op, mult, op == b->last && op->n_results == 0 && op->n_regions == 0);
    if (rc == 0 && entry && holder && holder->opcode == IR_OP_FUNC)
        donation(lv, holder, b);
    /* what the block hands back unchanged */
    const cost_graph *g = &lv->g;
    if (rc == 0 && g->n_nodes && (g->nodes[g->n_nodes - 1].flags & CG_RETURN)) {
        const cost_gnode *rn = &g->nodes[g->n_nodes - 1];
        if (rn->nopd > lv->cap_ret) {
            uint32_t *r = ap_realloc(lv->ret_in, sizeof *r * rn->nopd);
            if (!r)
                rc = oom_prep(c);
            else
                lv->ret_in = r, lv->cap_ret = rn->nopd;
        }
        if (rc == 0) {
            lv->n_ret = rn->nopd;
            for (uint32_t j = 0; j < rn->nopd; j++) {
                uint32_t r = g->v_root[g->e_val[rn->opd0 + j]];
                lv->ret_in[j] = r < lv->n_arg_leaves ? r : CG_NONE;
            }
        }
    }
    if (rc == 0)
        rc = cost__graph_run(&lv->g, c->p, mult, pk, peak, c->err);
    c->level--;
    return rc;
}


static int64_t clamp_bytes(double b) { return cost__clamp_bytes(b); }

/* ============================================================== program */

static int read_mesh(prep *c, const ir_op *top)
{
    cost_program *p = c->p;
    ir_attr *np = ir_op_attr(top, "mhlo.num_partitions");
    if (np && np->kind == IR_A_INT)
        p->num_partitions = np->u.i;
    ir_attr *ma = ir_op_attr(top, "autopart.mesh");
    if (!ma) {
        p->notes |= COST_NOTE_NO_MESH;
        return 0;
    }
    if (ma->kind != IR_A_STRING)
        return ap_error_set(c->err, AP_EINVALID, "autopart.mesh must be a string like \"batch=4,model=2\"");
    int rc = cost_mesh_parse(ma->u.str.s, &p->mesh, c->err);
    if (rc < 0)
        return rc;
    int64_t n = mesh_devices(&p->mesh);
    if (p->num_partitions > 0 && n != p->num_partitions)
        return ap_error_set(c->err, AP_EINVALID, "autopart.mesh \"%s\" has %lld devices but mhlo.num_partitions = %lld",
                            ma->u.str.s, (long long)n, (long long)p->num_partitions);
    if (p->num_partitions <= 0)
        p->num_partitions = n;
    return 0;
}

static int collect_names(prep *c)
{
    int n = 0;
    for (const ir_op *op = ir_module_body(c->m)->first; op; op = op->next)
        n += op->opcode == IR_OP_FUNC;
    if (!n)
        return 0;
    c->names = ap_malloc(sizeof *c->names * (size_t)n);
    if (!c->names)
        return ap_error_set(c->err, AP_ENOMEM, "out of memory preparing the cost model");
    for (const ir_op *op = ir_module_body(c->m)->first; op; op = op->next)
        if (op->opcode == IR_OP_FUNC && ir_func_name(op)) {
            c->names[c->n_names].name = ir_func_name(op);
            c->names[c->n_names].func = op;
            c->n_names++;
        }
    qsort(c->names, (size_t)c->n_names, sizeof *c->names, cmp_func_name);
    return 0;
}

void cost_program_free(cost_program *p)
{
    if (!p)
        return;
    cost__program_free_arrays(p);
    ap_free(p);
}

int cost_prepare(const ir_module *m, cost_program **out, ap_error *err)
{
    return cost_prepare_framework(m, COST_FW_XLA, out, err);
}

int cost_prepare_framework(const ir_module *m, cost_framework fw, cost_program **out, ap_error *err)
{
    int rc = 0;
    prep c;
    memset(&c, 0, sizeof c);
    *out = NULL;
    const ir_op *entry = m ? ir_module_entry(m) : NULL;
    const ir_block *body = entry ? ir_func_entry(entry) : NULL;
    if (!body)
        return ap_error_set(err, AP_ENOTFOUND, "no entry function (a public @main) to cost");
    c.m = m;
    c.err = err;
    c.p = ap_calloc(1, sizeof *c.p);
    if (!c.p)
        return ap_error_set(err, AP_ENOMEM, "out of memory preparing the cost model");
    c.p->framework = fw;
    if ((rc = read_mesh(&c, m->top)) < 0 || (rc = collect_names(&c)) < 0)
        goto out;
    fn_info *f = fn_get(&c, entry);
    if (!f) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory preparing the cost model");
        goto out;
    }
    for (uint32_t i = 0; i < body->n_args; i++)
        c.p->argument_bytes += clamp_bytes(value_bytes(&c, f, &body->args[i]));
    if ((rc = walk_block(&c, f, body, 1.0, true, &c.p->peak, &c.p->peak_memory)) < 0)
        goto out;
    *out = c.p;
    c.p = NULL;
out:
    cost_program_free(c.p);
    for (int i = 0; i < c.n_fns; i++)
        fn_info_free(c.fns[i]);
    ap_free(c.fns);
    ap_free(c.names);
    for (int i = 0; i < c.n_levels; i++) {
        glevel *lv = c.levels[i];
        cost__graph_free(&lv->g);
        ap_free(lv->first);
        ap_free(lv->count);
        ap_free(lv->stamp);
        ap_free(lv->leaves);
        ap_free(lv->caps);
        ap_free(lv->ret_in);
        ap_free(lv);
    }
    ap_free(c.levels);
    ap_free(c.acc);
    ap_free(c.kidv);
    return rc;
}

const cost_mesh *cost_program_mesh(const cost_program *p) { return &p->mesh; }

size_t cost_program_num_ops(const cost_program *p) { return p->n_ops_walked; }
