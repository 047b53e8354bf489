/*
 * eval.c - the reference interpreter's driver: value slots per function,
 * evaluation of blocks and regions in lock step over the devices of a run,
 * control flow (while, if, case, calls, composites), the ops that only move
 * values around (tuple, get_tuple_element, optimization_barrier, tokens,
 * partition_id), custom calls through a caller's handler, the kernel table,
 * errors that name the op and its source position, and ir_interp_run.
 *
 * The kernels live in ew.c (element-wise), shape.c (data
 * movement, gather, scatter), nn.c (dot, convolution, reductions,
 * sort, linear algebra) and spmd.c (collectives, SPMD runs).
 */
#include "interp_int.h"

#include <inttypes.h>
#include <stdio.h>

#define DEFAULT_MAX_WHILE_ITERS ((int64_t)1 << 20)
#define DEFAULT_MAX_DEPTH 64

/* ================================================================ errors */

static int fail_v(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

static int fail_v(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, va_list ap)
{
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char name[160];
    if (op && op->opcode == IR_OP_CUSTOM_CALL) {
        ir_attr *t = ir_op_attr(op, "call_target_name");
        snprintf(name, sizeof name, "%s @%s", op->name, t && t->kind == IR_A_STRING ? t->u.str.s : "?");
    } else {
        snprintf(name, sizeof name, "%s", op ? op->name : "interpreter");
    }
    char where[40] = "";
    if (r->spmd && dev >= 0)
        snprintf(where, sizeof where, " (device %" PRId64 ")", dev);
    if (op && op->src_line)
        return ap_error_at(r->err, code, r->filename, (int)op->src_line, (int)op->src_col, "%s: %s%s", name, msg,
                           where);
    return ap_error_set(r->err, code, "%s: %s%s", name, msg, where);
}

int ir__ip_fail_op(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(r, op, dev, code, fmt, ap);
    va_end(ap);
    return rc;
}

int ir__ip_fail(ip_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(c->run, c->op, c->fr->dev_ids[c->dev], code, fmt, ap);
    va_end(ap);
    return rc;
}

/* Re-raises a tensor-allocation error (message without position) at op. */
static int relay(ip_run *r, const ir_op *op, int64_t dev, int rc, const ap_error *e)
{
    return ir__ip_fail_op(r, op, dev, rc, "%s", e->msg);
}

/* ============================================================== tensors */

int ir__ip_new(ip_ctx *c, ir_elem e, int rank, const int64_t *dims, ir_tensor **out)
{
    ap_error e2;
    int rc = ir__tensor_alloc(e, rank, dims, c->run->opts.max_elems, out, &e2);
    return rc < 0 ? relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2) : 0;
}

int ir__ip_new_result(ip_ctx *c, uint32_t i, ir_tensor **out)
{
    ap_error e2;
    int rc = ir__tensor_alloc_type(c->op->results[i].type, c->run->opts.max_elems, out, &e2);
    return rc < 0 ? relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2) : 0;
}

static int clone_at(ip_run *r, const ir_op *op, int64_t dev, const ir_tensor *t, ir_tensor **out)
{
    ap_error e2;
    int rc = ir_tensor_clone(t, out, &e2);
    return rc < 0 ? relay(r, op, dev, rc, &e2) : 0;
}

/* ============================================================ attributes */

int ir__ip_ints(ip_ctx *c, const char *name, int64_t *out, int cap, int absent)
{
    ir_attr *a = ir_op_attr(c->op, name);
    if (!a)
        return absent;
    int n = ir_attr_int_list(a, out, cap);
    if (n < 0)
        return ir__ip_fail(c, AP_EINVALID, "attribute %s is not a list of integers", name);
    if (n > cap)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "attribute %s has %d entries, more than %d", name, n, cap);
    return n;
}

int ir__ip_int(ip_ctx *c, const char *name, int64_t *out)
{
    ir_attr *a = ir_op_attr(c->op, name);
    if (!a || a->kind != IR_A_INT)
        return ir__ip_fail(c, AP_EINVALID, "needs an integer attribute %s", name);
    *out = a->u.i;
    return 0;
}

bool ir__ip_flag(const ir_op *op, const char *name)
{
    ir_attr *a = ir_op_attr(op, name);
    if (!a)
        return false;
    if (a->kind == IR_A_BOOL)
        return a->u.b;
    return a->kind == IR_A_UNIT;
}

const char *ir__ip_enum(const ir_op *op, const char *name, char *buf, size_t size)
{
    ir_attr *a = ir_op_attr(op, name);
    if (!a)
        return NULL;
    const char *s = NULL;
    if (a->kind == IR_A_DIALECT && a->u.dia.body)
        s = a->u.dia.body;
    else if (a->kind == IR_A_STRING)
        s = a->u.str.s;
    if (!s)
        return NULL;
    const char *sp = strrchr(s, ' ');
    snprintf(buf, size, "%s", sp ? sp + 1 : s);
    return buf;
}

/* ======================================================= value numbering */

static void count_region(const ir_region *reg, uint32_t *n)
{
    for (const ir_block *b = reg->first; b; b = b->next) {
        *n += b->n_args;
        for (const ir_op *op = b->first; op; op = op->next) {
            *n += op->n_results;
            for (uint32_t i = 0; i < op->n_regions; i++)
                count_region(&op->regions[i], n);
        }
    }
}

/* Whether value ids are dense and unique (ir_func_renumber was run). */
static bool check_region(const ir_region *reg, uint32_t n, uint8_t *seen)
{
    for (const ir_block *b = reg->first; b; b = b->next) {
        for (uint32_t i = 0; i < b->n_args; i++) {
            uint32_t id = b->args[i].id;
            if (id >= n || seen[id])
                return false;
            seen[id] = 1;
        }
        for (const ir_op *op = b->first; op; op = op->next) {
            for (uint32_t i = 0; i < op->n_results; i++) {
                uint32_t id = op->results[i].id;
                if (id >= n || seen[id])
                    return false;
                seen[id] = 1;
            }
            for (uint32_t i = 0; i < op->n_regions; i++)
                if (!check_region(&op->regions[i], n, seen))
                    return false;
        }
    }
    return true;
}

static bool map_region(const ir_region *reg, ir_ptrmap *map, uint32_t *next)
{
    for (const ir_block *b = reg->first; b; b = b->next) {
        for (uint32_t i = 0; i < b->n_args; i++)
            if (!ir__map_put(map, &b->args[i], (*next)++))
                return false;
        for (const ir_op *op = b->first; op; op = op->next) {
            for (uint32_t i = 0; i < op->n_results; i++)
                if (!ir__map_put(map, &op->results[i], (*next)++))
                    return false;
            for (uint32_t i = 0; i < op->n_regions; i++)
                if (!map_region(&op->regions[i], map, next))
                    return false;
        }
    }
    return true;
}

static void fn_free(ip_fn *fn)
{
    if (!fn)
        return;
    ir__map_free(&fn->map);
    ap_free(fn);
}

/* The numbering of func, made once per run.  Functions built without
 * ir_func_renumber get a map from value to slot instead of their ids. */
static int fn_get(ip_run *r, const ir_op *func, const ir_op *caller, const ip_fn **out)
{
    uint32_t idx;
    if (ir__map_get(&r->fn_index, func, &idx)) {
        *out = r->fns[idx];
        return 0;
    }
    ip_fn *fn = ap_calloc(1, sizeof *fn);
    uint8_t *seen = NULL;
    if (!fn)
        goto oom;
    fn->func = func;
    uint32_t n = 0;
    for (uint32_t i = 0; i < func->n_regions; i++)
        count_region(&func->regions[i], &n);
    fn->n_slots = n;
    seen = ap_calloc(n ? n : 1, 1);
    if (!seen)
        goto oom;
    bool ok = true;
    for (uint32_t i = 0; i < func->n_regions && ok; i++)
        ok = check_region(&func->regions[i], n, seen);
    ap_free(seen);
    seen = NULL;
    if (!ok) {
        fn->use_map = true;
        uint32_t next = 0;
        for (uint32_t i = 0; i < func->n_regions; i++)
            if (!map_region(&func->regions[i], &fn->map, &next))
                goto oom;
    }
    if (r->n_fns == r->cap_fns) {
        uint32_t cap = r->cap_fns ? 2 * r->cap_fns : 8;
        ip_fn **v = ap_realloc(r->fns, sizeof *v * cap);
        if (!v)
            goto oom;
        r->fns = v;
        r->cap_fns = cap;
    }
    if (!ir__map_put(&r->fn_index, func, r->n_fns))
        goto oom;
    r->fns[r->n_fns++] = fn;
    *out = fn;
    return 0;
oom:
    ap_free(seen);
    fn_free(fn);
    return ir__ip_fail_op(r, caller, -1, AP_ENOMEM, "out of memory");
}

static inline bool slot_index(const ip_fn *fn, const ir_value *v, uint32_t *out)
{
    if (!fn->use_map) {
        if (v->id >= fn->n_slots)
            return false;
        *out = v->id;
        return true;
    }
    return ir__map_get(&fn->map, v, out);
}

const ir_tensor *ir__ip_slot(ip_run *r, ip_frame *fr, uint32_t dev, const ir_op *user, const ir_value *v)
{
    uint32_t s;
    const ir_tensor *t = slot_index(fr->fn, v, &s) ? fr->slots[dev][s] : NULL;
    if (!t)
        ir__ip_fail_op(r, user, fr->dev_ids[dev], AP_EINVALID,
                       "an operand has no value (defined outside the function or used before its definition)");
    return t;
}

void ir__ip_slot_set(ip_frame *fr, uint32_t dev, const ir_value *v, ir_tensor *t)
{
    uint32_t s;
    if (!slot_index(fr->fn, v, &s)) {
        ir_tensor_free(t); /* cannot happen for values of the function */
        return;
    }
    ir_tensor_free(fr->slots[dev][s]);
    fr->slots[dev][s] = t;
}

/* Takes the value out of its slot (for values dead after a region). */
static ir_tensor *slot_take(ip_frame *fr, uint32_t dev, const ir_value *v)
{
    uint32_t s;
    if (!slot_index(fr->fn, v, &s))
        return NULL;
    ir_tensor *t = fr->slots[dev][s];
    fr->slots[dev][s] = NULL;
    return t;
}

/* ================================================================ frames */

static int frame_new(ip_run *r, const ip_fn *fn, uint32_t n_dev, const int64_t *dev_ids, bool local, int depth,
                     const ir_op *at, ip_frame *fr)
{
    memset(fr, 0, sizeof *fr);
    fr->fn = fn;
    fr->n_dev = n_dev;
    fr->dev_ids = dev_ids;
    fr->local = local;
    fr->depth = depth;
    fr->slots = ap_calloc(n_dev, sizeof *fr->slots);
    ir_tensor **base = ap_calloc((size_t)n_dev * (fn->n_slots ? fn->n_slots : 1), sizeof *base);
    if (!fr->slots || !base) {
        ap_free(fr->slots);
        ap_free(base);
        fr->slots = NULL;
        return ir__ip_fail_op(r, at, -1, AP_ENOMEM, "out of memory");
    }
    for (uint32_t d = 0; d < n_dev; d++)
        fr->slots[d] = base + (size_t)d * fn->n_slots;
    return 0;
}

static void frame_free(ip_frame *fr)
{
    if (!fr->slots)
        return;
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t s = 0; s < fr->fn->n_slots; s++)
            ir_tensor_free(fr->slots[d][s]);
    ap_free(fr->slots[0]);
    ap_free(fr->slots);
    fr->slots = NULL;
}

/* ============================================================ evaluation */

static int eval_op(ip_run *r, ip_frame *fr, const ir_op *op);

static bool is_terminator(const ir_op *op) { return op->opcode == IR_OP_RETURN || op->opcode == IR_OP_FUNC_RETURN; }

/* Whether v is defined in block b itself (so it is dead once b returns). */
static bool local_to(const ir_value *v, const ir_block *b) { return v->def ? v->def->parent == b : v->block == b; }

/* Evaluates single-block region reg on every device of fr: in[d * n_in + i]
 * are the block arguments (borrowed, types checked), out[d * n_out + j]
 * receive new tensors (all NULL on failure). */
static int eval_region(ip_run *r, ip_frame *fr, const ir_op *owner, const ir_region *reg, uint32_t n_in,
                       const ir_tensor *const *in, uint32_t n_out, ir_tensor **out)
{
    int rc = 0;
    for (size_t k = 0; k < (size_t)fr->n_dev * n_out; k++)
        out[k] = NULL;
    if (reg->n_blocks != 1)
        return ir__ip_fail_op(r, owner, -1, AP_EUNSUPPORTED, "regions with %u blocks are not supported", reg->n_blocks);
    const ir_block *b = reg->first;
    if (b->n_args != n_in)
        return ir__ip_fail_op(r, owner, -1, AP_EINVALID, "region takes %u arguments, %u given", b->n_args, n_in);
    for (uint32_t d = 0; d < fr->n_dev; d++) {
        for (uint32_t i = 0; i < n_in; i++) {
            const ir_tensor *t = in[(size_t)d * n_in + i];
            if (!ir_tensor_has_type(t, b->args[i].type)) {
                char ts[128];
                ap_buf tb;
                ap_buf_init(&tb);
                ir_type_print(&tb, b->args[i].type);
                ir__tensor_type_str(t, ts, sizeof ts);
                rc = ir__ip_fail_op(r, owner, fr->dev_ids[d], AP_ETYPE,
                                    "region argument %u has type %s, the value given is %s", i, tb.data ? tb.data : "?",
                                    ts);
                ap_buf_free(&tb);
                return rc;
            }
            ir_tensor *c;
            if ((rc = clone_at(r, owner, fr->dev_ids[d], t, &c)) < 0)
                return rc;
            ir__ip_slot_set(fr, d, &b->args[i], c);
        }
    }
    const ir_op *term = b->last;
    if (!term || !is_terminator(term))
        return ir__ip_fail_op(r, owner, -1, AP_EINVALID, "region does not end with a return");
    for (const ir_op *op = b->first; op != term; op = op->next) {
        if (is_terminator(op))
            return ir__ip_fail_op(r, op, -1, AP_EINVALID, "return in the middle of a block");
        if ((rc = eval_op(r, fr, op)) < 0)
            return rc;
    }
    if (term->n_operands != n_out)
        return ir__ip_fail_op(r, term, -1, AP_EINVALID, "returns %u values, %u expected", term->n_operands, n_out);
    for (uint32_t d = 0; d < fr->n_dev; d++) {
        for (uint32_t j = 0; j < n_out; j++) {
            const ir_value *v = term->operands[j];
            ir_tensor **dst = &out[(size_t)d * n_out + j];
            /* a value of this block is dead after the return: move it,
             * unless it is returned twice */
            uint32_t prev = j;
            for (uint32_t k = 0; k < j; k++)
                if (term->operands[k] == v) {
                    prev = k;
                    break;
                }
            if (prev != j) {
                rc = clone_at(r, term, fr->dev_ids[d], out[(size_t)d * n_out + prev], dst);
            } else if (local_to(v, b)) {
                *dst = slot_take(fr, d, v);
                if (!*dst)
                    rc = ir__ip_fail_op(r, term, fr->dev_ids[d], AP_EINVALID, "returns a value that has none");
            } else {
                const ir_tensor *t = ir__ip_slot(r, fr, d, term, v);
                rc = t ? clone_at(r, term, fr->dev_ids[d], t, dst) : AP_EINVALID;
            }
            if (rc < 0)
                goto fail;
        }
    }
    return 0;
fail:
    for (size_t k = 0; k < (size_t)fr->n_dev * n_out; k++) {
        ir_tensor_free(out[k]);
        out[k] = NULL;
    }
    return rc;
}

int ir__ip_region(ip_ctx *c, const ir_region *reg, uint32_t n_in, const ir_tensor *const *in, uint32_t n_out,
                  ir_tensor **out)
{
    ip_frame view = {
        .fn = c->fr->fn,
        .n_dev = 1,
        .slots = &c->fr->slots[c->dev],
        .dev_ids = &c->fr->dev_ids[c->dev],
        .local = true,
        .depth = c->fr->depth,
    };
    return eval_region(c->run, &view, c->op, reg, n_in, in, n_out, out);
}

int ir__ip_call(ip_run *r, const ir_op *func, uint32_t n_dev, const int64_t *dev_ids, int depth, bool local,
                const ir_tensor *const *args, ir_tensor ***res, const ir_op *caller)
{
    *res = NULL;
    if (depth > r->opts.max_depth)
        return ir__ip_fail_op(r, caller, -1, AP_ELIMIT, "calls nested deeper than %d (recursion?)", r->opts.max_depth);
    if (!ir_func_entry(func))
        return ir__ip_fail_op(r, caller ? caller : func, -1, AP_EINVALID, "@%s is a declaration without a body",
                              ir_func_name(func));
    if (func->n_regions != 1 || func->regions[0].n_blocks != 1)
        return ir__ip_fail_op(r, func, -1, AP_EUNSUPPORTED,
                              "@%s has more than one block (unstructured control flow is not supported)",
                              ir_func_name(func));
    const ip_fn *fn = NULL;
    int rc = fn_get(r, func, caller ? caller : func, &fn);
    if (rc < 0)
        return rc;
    const ir_block *entry = ir_func_entry(func);
    uint32_t n_out = entry->last ? entry->last->n_operands : 0;
    ir_tensor **out = ap_calloc((size_t)n_dev * (n_out ? n_out : 1), sizeof *out);
    if (!out)
        return ir__ip_fail_op(r, caller ? caller : func, -1, AP_ENOMEM, "out of memory");
    ip_frame fr;
    if ((rc = frame_new(r, fn, n_dev, dev_ids, local, depth, caller ? caller : func, &fr)) < 0) {
        ap_free(out);
        return rc;
    }
    rc = eval_region(r, &fr, caller ? caller : func, &func->regions[0], entry->n_args, args, n_out, out);
    frame_free(&fr);
    if (rc < 0) {
        ap_free(out);
        return rc;
    }
    *res = out;
    return 0;
}

/* ---------------------------------------------------------- control flow */

static const ir_tensor **operands_of(ip_run *r, ip_frame *fr, const ir_op *op, uint32_t from, int *rc)
{
    uint32_t n = op->n_operands - from;
    const ir_tensor **v = ap_calloc((size_t)fr->n_dev * (n ? n : 1), sizeof *v);
    if (!v) {
        *rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        return NULL;
    }
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t i = 0; i < n; i++)
            if (!(v[(size_t)d * n + i] = ir__ip_slot(r, fr, d, op, op->operands[from + i]))) {
                ap_free(v);
                *rc = AP_EINVALID;
                return NULL;
            }
    *rc = 0;
    return v;
}

/* Moves out[d * n + i] into the op's result slots. */
static void set_results(ip_frame *fr, const ir_op *op, ir_tensor **out)
{
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t i = 0; i < op->n_results; i++) {
            ir__ip_slot_set(fr, d, &op->results[i], out[(size_t)d * op->n_results + i]);
            out[(size_t)d * op->n_results + i] = NULL;
        }
}

static void free_all(ir_tensor **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        ir_tensor_free(v[i]);
    ap_free(v);
}

/* The scalar predicate / index of a branch or loop condition per device;
 * every device must agree, since devices run in lock step. */
static int agree(ip_run *r, ip_frame *fr, const ir_op *op, const ir_tensor *const *v, size_t stride, const char *what,
                 int64_t *out)
{
    for (uint32_t d = 0; d < fr->n_dev; d++) {
        const ir_tensor *t = v[(size_t)d * stride];
        if (t->kind != IR_TENSOR_ARRAY || t->rank != 0 || ir__ip_class((ir_elem)t->elem) == IP_F ||
            ir__ip_class((ir_elem)t->elem) == IP_C)
            return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "%s must be an integer or i1 scalar", what);
        int64_t x = ip_index_at(t, 0);
        if (d == 0) {
            *out = x;
        } else if (x != *out) {
            return ir__ip_fail_op(r, op, -1, AP_ECONFLICT,
                                  "devices diverge in control flow: %s is %" PRId64 " on device %" PRId64
                                  " but %" PRId64 " on device %" PRId64,
                                  what, *out, fr->dev_ids[0], x, fr->dev_ids[d]);
        }
    }
    return 0;
}

static int eval_while(ip_run *r, ip_frame *fr, const ir_op *op)
{
    uint32_t n = op->n_operands, nd = fr->n_dev;
    if (op->n_regions != 2 || op->n_results != n)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs a cond and a body region and one result per operand");
    int rc;
    const ir_tensor **init = operands_of(r, fr, op, 0, &rc);
    if (!init)
        return rc;
    ir_tensor **vals = ap_calloc((size_t)nd * (n ? n : 1), sizeof *vals);
    ir_tensor **next = ap_calloc((size_t)nd * (n ? n : 1), sizeof *next);
    ir_tensor **cond = ap_calloc(nd, sizeof *cond);
    if (!vals || !next || !cond) {
        rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < (size_t)nd * n; k++)
        if ((rc = clone_at(r, op, -1, init[k], &vals[k])) < 0)
            goto done;
    for (int64_t iter = 0;; iter++) {
        if ((rc = eval_region(r, fr, op, &op->regions[0], n, (const ir_tensor *const *)vals, 1, cond)) < 0)
            goto done;
        int64_t go;
        rc = agree(r, fr, op, (const ir_tensor *const *)cond, 1, "the loop condition", &go);
        for (uint32_t d = 0; d < nd; d++) {
            ir_tensor_free(cond[d]);
            cond[d] = NULL;
        }
        if (rc < 0)
            goto done;
        if (!go)
            break;
        if (iter >= r->opts.max_while_iters) {
            rc = ir__ip_fail_op(r, op, -1, AP_ELIMIT,
                                "more than %" PRId64 " iterations (ir_interp_opts.max_while_iters)",
                                r->opts.max_while_iters);
            goto done;
        }
        if ((rc = eval_region(r, fr, op, &op->regions[1], n, (const ir_tensor *const *)vals, n, next)) < 0)
            goto done;
        for (size_t k = 0; k < (size_t)nd * n; k++) {
            ir_tensor_free(vals[k]);
            vals[k] = next[k];
            next[k] = NULL;
        }
    }
    set_results(fr, op, vals);
done:
    ap_free(init);
    free_all(vals, (size_t)nd * n);
    free_all(next, (size_t)nd * n);
    free_all(cond, nd);
    return rc;
}

/* stablehlo.if (regions: true, false) and stablehlo.case (branches; an index
 * out of range takes the last branch, as the spec says). */
static int eval_branch(ip_run *r, ip_frame *fr, const ir_op *op)
{
    if (op->n_operands < 1 || op->n_regions < 1)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs a selector operand and branches");
    int rc;
    const ir_tensor **sel = operands_of(r, fr, op, 0, &rc);
    if (!sel)
        return rc;
    int64_t v;
    rc = agree(r, fr, op, sel, op->n_operands, op->opcode == IR_OP_IF ? "the predicate" : "the branch index", &v);
    ap_free(sel);
    if (rc < 0)
        return rc;
    uint32_t branch;
    if (op->opcode == IR_OP_IF) {
        if (op->n_regions != 2)
            return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs two regions");
        branch = v ? 0 : 1;
    } else {
        branch = v < 0 || v >= (int64_t)op->n_regions ? op->n_regions - 1 : (uint32_t)v;
    }
    ir_tensor **out = ap_calloc((size_t)fr->n_dev * (op->n_results ? op->n_results : 1), sizeof *out);
    if (!out)
        return ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
    rc = eval_region(r, fr, op, &op->regions[branch], 0, NULL, op->n_results, out);
    if (rc == 0)
        set_results(fr, op, out);
    free_all(out, (size_t)fr->n_dev * op->n_results);
    return rc;
}

/* func.call and stablehlo.composite (which means a call of its
 * decomposition). */
static int eval_call(ip_run *r, ip_frame *fr, const ir_op *op)
{
    ir_attr *callee = ir_op_attr(op, op->opcode == IR_OP_COMPOSITE ? "decomposition" : "callee");
    if (!callee || callee->kind != IR_A_SYMREF)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "has no callee symbol");
    const ir_op *f = ir_module_func(r->m, callee->u.str.s);
    if (!f)
        return ir__ip_fail_op(r, op, -1, AP_EUNDEFINED, "calls @%s, which the module does not define", callee->u.str.s);
    int rc;
    const ir_tensor **args = operands_of(r, fr, op, 0, &rc);
    if (!args)
        return rc;
    ir_tensor **res;
    rc = ir__ip_call(r, f, fr->n_dev, fr->dev_ids, fr->depth + 1, fr->local, args, &res, op);
    ap_free(args);
    if (rc < 0)
        return rc;
    uint32_t n_out = ir_func_entry(f)->last->n_operands;
    if (n_out != op->n_results) {
        free_all(res, (size_t)fr->n_dev * n_out);
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "@%s returns %u values, the call has %u results", callee->u.str.s,
                              n_out, op->n_results);
    }
    for (size_t k = 0; k < (size_t)fr->n_dev * n_out; k++)
        if (!ir_tensor_has_type(res[k], op->results[k % n_out].type)) {
            free_all(res, (size_t)fr->n_dev * n_out);
            return ir__ip_fail_op(r, op, -1, AP_ETYPE, "result %zu of @%s does not have the call's result type",
                                  k % n_out, callee->u.str.s);
        }
    set_results(fr, op, res);
    free_all(res, (size_t)fr->n_dev * n_out);
    return 0;
}

/* ------------------------------------------------------- value plumbing */

static int k_identity(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    if (c->op->n_results != c->op->n_operands)
        return ir__ip_fail(c, AP_EINVALID, "needs one result per operand");
    for (uint32_t i = 0; i < c->op->n_operands; i++) {
        int rc = clone_at(c->run, c->op, c->fr->dev_ids[c->dev], in[i], &out[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int k_tuple(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    if (out[0]->kind != IR_TENSOR_TUPLE || out[0]->n_elems != c->op->n_operands)
        return ir__ip_fail(c, AP_ETYPE, "result type is not a tuple of the operands");
    for (uint32_t i = 0; i < c->op->n_operands; i++) {
        ir_tensor_free(out[0]->elems[i]);
        out[0]->elems[i] = NULL;
        if ((rc = clone_at(c->run, c->op, c->fr->dev_ids[c->dev], in[i], &out[0]->elems[i])) < 0)
            return rc;
    }
    return 0;
}

static int k_get_tuple_element(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t idx = 0;
    int rc = ir__ip_int(c, "index", &idx);
    if (rc < 0)
        return rc;
    if (in[0]->kind != IR_TENSOR_TUPLE || idx < 0 || idx >= (int64_t)in[0]->n_elems)
        return ir__ip_fail(c, AP_EINVALID, "index %" PRId64 " is not a member of the tuple", idx);
    return clone_at(c->run, c->op, c->fr->dev_ids[c->dev], in[0]->elems[idx], &out[0]);
}

static int k_token(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out) { return ir__ip_new_result(c, 0, &out[0]); }

/* partition_id is the device id; replica_id is 0: one replica. */
static int k_device_id(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    if (out[0]->kind != IR_TENSOR_ARRAY || out[0]->numel != 1 || ir__ip_class((ir_elem)out[0]->elem) == IP_F)
        return ir__ip_fail(c, AP_ETYPE, "result must be an integer scalar");
    ir_tensor_set_i64(out[0], 0, c->op->opcode == IR_OP_PARTITION_ID ? c->fr->dev_ids[c->dev] : 0);
    return 0;
}

static int k_custom_call(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_interp_opts *o = &c->run->opts;
    if (o->custom_call) {
        ap_error e2;
        ap_error_clear(&e2);
        int rc = o->custom_call(o->custom_call_ctx, c->op, c->op->n_operands, in, c->op->n_results, out, &e2);
        if (rc == 0)
            return 0;
        for (uint32_t i = 0; i < c->op->n_results; i++) {
            ir_tensor_free(out[i]);
            out[i] = NULL;
        }
        if (rc != AP_EUNSUPPORTED)
            return ir__ip_fail(c, rc, "%s", e2.msg[0] ? e2.msg : ap_strerror(rc));
    }
    return ir__ip_fail(c, AP_EUNSUPPORTED, "custom calls have no defined semantics");
}

/* ---------------------------------------------------------- the kernels */

ip_kernel ir__ip_kernel(ir_opcode opc)
{
    static const ip_kernel table[IR_OP__COUNT] = {
        [IR_OP_ABS] = ir__ip_k_ew1,
        [IR_OP_CBRT] = ir__ip_k_ew1,
        [IR_OP_CEIL] = ir__ip_k_ew1,
        [IR_OP_COSINE] = ir__ip_k_ew1,
        [IR_OP_CLZ] = ir__ip_k_ew1,
        [IR_OP_EXP] = ir__ip_k_ew1,
        [IR_OP_EXPM1] = ir__ip_k_ew1,
        [IR_OP_FLOOR] = ir__ip_k_ew1,
        [IR_OP_IMAG] = ir__ip_k_ew1,
        [IR_OP_IS_FINITE] = ir__ip_k_ew1,
        [IR_OP_LOG] = ir__ip_k_ew1,
        [IR_OP_LOG1P] = ir__ip_k_ew1,
        [IR_OP_LOGISTIC] = ir__ip_k_ew1,
        [IR_OP_NEGATE] = ir__ip_k_ew1,
        [IR_OP_NOT] = ir__ip_k_ew1,
        [IR_OP_POPCNT] = ir__ip_k_ew1,
        [IR_OP_REAL] = ir__ip_k_ew1,
        [IR_OP_ROUND_AFZ] = ir__ip_k_ew1,
        [IR_OP_ROUND_EVEN] = ir__ip_k_ew1,
        [IR_OP_RSQRT] = ir__ip_k_ew1,
        [IR_OP_SIGN] = ir__ip_k_ew1,
        [IR_OP_SINE] = ir__ip_k_ew1,
        [IR_OP_SQRT] = ir__ip_k_ew1,
        [IR_OP_TAN] = ir__ip_k_ew1,
        [IR_OP_TANH] = ir__ip_k_ew1,
        [IR_OP_COPY] = ir__ip_k_ew1,
        [IR_OP_REDUCE_PRECISION] = ir__ip_k_ew1,
        [IR_OP_CONVERT] = ir__ip_k_convert,
        [IR_OP_BITCAST_CONVERT] = ir__ip_k_bitcast,
        [IR_OP_ADD] = ir__ip_k_ew2,
        [IR_OP_ATAN2] = ir__ip_k_ew2,
        [IR_OP_AND] = ir__ip_k_ew2,
        [IR_OP_DIVIDE] = ir__ip_k_ew2,
        [IR_OP_MAXIMUM] = ir__ip_k_ew2,
        [IR_OP_MINIMUM] = ir__ip_k_ew2,
        [IR_OP_MULTIPLY] = ir__ip_k_ew2,
        [IR_OP_OR] = ir__ip_k_ew2,
        [IR_OP_POWER] = ir__ip_k_ew2,
        [IR_OP_REMAINDER] = ir__ip_k_ew2,
        [IR_OP_SHIFT_LEFT] = ir__ip_k_ew2,
        [IR_OP_SHIFT_RIGHT_ARITH] = ir__ip_k_ew2,
        [IR_OP_SHIFT_RIGHT_LOGICAL] = ir__ip_k_ew2,
        [IR_OP_SUBTRACT] = ir__ip_k_ew2,
        [IR_OP_XOR] = ir__ip_k_ew2,
        [IR_OP_COMPLEX] = ir__ip_k_complex,
        [IR_OP_COMPARE] = ir__ip_k_compare,
        [IR_OP_SELECT] = ir__ip_k_select,
        [IR_OP_CLAMP] = ir__ip_k_clamp,
        [IR_OP_MAP] = ir__ip_k_map,
        [IR_OP_CONSTANT] = ir__ip_k_constant,
        [IR_OP_IOTA] = ir__ip_k_iota,
        [IR_OP_BROADCAST_IN_DIM] = ir__ip_k_broadcast_in_dim,
        [IR_OP_BROADCAST] = ir__ip_k_broadcast,
        [IR_OP_TRANSPOSE] = ir__ip_k_transpose,
        [IR_OP_RESHAPE] = ir__ip_k_reshape,
        [IR_OP_REVERSE] = ir__ip_k_reverse,
        [IR_OP_CONCATENATE] = ir__ip_k_concatenate,
        [IR_OP_SLICE] = ir__ip_k_slice,
        [IR_OP_DYNAMIC_SLICE] = ir__ip_k_dynamic_slice,
        [IR_OP_DYNAMIC_UPDATE_SLICE] = ir__ip_k_dynamic_update_slice,
        [IR_OP_PAD] = ir__ip_k_pad,
        [IR_OP_GATHER] = ir__ip_k_gather,
        [IR_OP_SCATTER] = ir__ip_k_scatter,
        [IR_OP_TORCH_INDEX_SELECT] = ir__ip_k_torch_index_select,
        [IR_OP_GET_DIMENSION_SIZE] = ir__ip_k_get_dimension_size,
        [IR_OP_DYNAMIC_BROADCAST_IN_DIM] = ir__ip_k_dynamic_broadcast_in_dim,
        [IR_OP_DYNAMIC_RESHAPE] = ir__ip_k_dynamic_reshape,
        [IR_OP_DYNAMIC_IOTA] = ir__ip_k_dynamic_iota,
        [IR_OP_DYNAMIC_PAD] = ir__ip_k_dynamic_pad,
        [IR_OP_REAL_DYNAMIC_SLICE] = ir__ip_k_real_dynamic_slice,
        [IR_OP_DYNAMIC_GATHER] = ir__ip_k_dynamic_gather,
        [IR_OP_DOT] = ir__ip_k_dot,
        [IR_OP_DOT_GENERAL] = ir__ip_k_dot,
        [IR_OP_CONVOLUTION] = ir__ip_k_convolution,
        [IR_OP_REDUCE] = ir__ip_k_reduce,
        [IR_OP_REDUCE_WINDOW] = ir__ip_k_reduce_window,
        [IR_OP_SELECT_AND_SCATTER] = ir__ip_k_select_and_scatter,
        [IR_OP_SORT] = ir__ip_k_sort,
        [IR_OP_BATCH_NORM_INFERENCE] = ir__ip_k_batch_norm_inference,
        [IR_OP_BATCH_NORM_TRAINING] = ir__ip_k_batch_norm_training,
        [IR_OP_BATCH_NORM_GRAD] = ir__ip_k_batch_norm_grad,
        [IR_OP_TRIANGULAR_SOLVE] = ir__ip_k_triangular_solve,
        [IR_OP_CHOLESKY] = ir__ip_k_cholesky,
        [IR_OP_FFT] = ir__ip_k_fft,
        [IR_OP_OPTIMIZATION_BARRIER] = k_identity,
        [IR_OP_TUPLE] = k_tuple,
        [IR_OP_GET_TUPLE_ELEMENT] = k_get_tuple_element,
        [IR_OP_AFTER_ALL] = k_token,
        [IR_OP_CREATE_TOKEN] = k_token,
        [IR_OP_PARTITION_ID] = k_device_id,
        [IR_OP_REPLICA_ID] = k_device_id,
        [IR_OP_CUSTOM_CALL] = k_custom_call,
    };
    return opc > IR_OP_UNKNOWN && opc < IR_OP__COUNT ? table[opc] : NULL;
}

/* Why a registered op without a kernel cannot be evaluated. */
static const char *refusal(ir_opcode opc)
{
    switch (opc) {
    case IR_OP_RNG:
    case IR_OP_RNG_BIT_GENERATOR:
        return "random number generation is not implemented (its bits are implementation-defined)";
    case IR_OP_UNIFORM_QUANTIZE:
    case IR_OP_UNIFORM_DEQUANTIZE: return "quantized element types are not supported";
    case IR_OP_INFEED:
    case IR_OP_OUTFEED:
    case IR_OP_SEND:
    case IR_OP_RECV: return "host communication cannot be evaluated";
    case IR_OP_EINSUM: return "einsum is not supported (legalize it to dot_general)";
    case IR_OP_MODULE:
    case IR_OP_FUNC: return "nested modules and functions cannot be evaluated";
    default: return "the interpreter has no kernel for this op";
    }
}

/* Result types must be static, computable values. */
static int check_results(ip_run *r, const ir_op *op)
{
    for (uint32_t i = 0; i < op->n_results; i++) {
        const ir_type *t = op->results[i].type;
        if (!t)
            return ir__ip_fail_op(r, op, -1, AP_EINVALID, "result %u has no type", i);
        if (t->kind == IR_T_TENSOR && (!ir_type_is_static(t) || t->rank < 0)) {
            ap_buf b;
            ap_buf_init(&b);
            ir_type_print(&b, t);
            int rc = ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "dynamic shape %s cannot be evaluated",
                                    b.data ? b.data : "?");
            ap_buf_free(&b);
            return rc;
        }
    }
    return 0;
}

static int eval_kernel(ip_run *r, ip_frame *fr, const ir_op *op, ip_kernel k)
{
    const ir_tensor *in_small[8];
    ir_tensor *out_small[8];
    const ir_tensor **in = op->n_operands <= 8 ? in_small : ap_calloc(op->n_operands, sizeof *in);
    ir_tensor **out = op->n_results <= 8 ? out_small : ap_calloc(op->n_results, sizeof *out);
    int rc = 0;
    if (!in || !out) {
        rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t d = 0; d < fr->n_dev; d++) {
        for (uint32_t i = 0; i < op->n_operands; i++)
            if (!(in[i] = ir__ip_slot(r, fr, d, op, op->operands[i]))) {
                rc = AP_EINVALID;
                goto done;
            }
        for (uint32_t i = 0; i < op->n_results; i++)
            out[i] = NULL;
        ip_ctx c = {r, fr, d, op};
        rc = k(&c, in, out);
        for (uint32_t i = 0; i < op->n_results && rc == 0; i++) {
            if (!out[i] || !ir_tensor_has_type(out[i], op->results[i].type)) {
                char ts[128] = "nothing";
                if (out[i])
                    ir__tensor_type_str(out[i], ts, sizeof ts);
                ap_buf b;
                ap_buf_init(&b);
                ir_type_print(&b, op->results[i].type);
                rc = ir__ip_fail(&c, out[i] ? AP_ETYPE : AP_EINTERNAL, "result %u is %s but its type is %s", i, ts,
                                 b.data ? b.data : "?");
                ap_buf_free(&b);
            }
        }
        if (rc < 0) {
            for (uint32_t i = 0; i < op->n_results; i++)
                ir_tensor_free(out[i]);
            goto done;
        }
        for (uint32_t i = 0; i < op->n_results; i++)
            ir__ip_slot_set(fr, d, &op->results[i], out[i]);
    }
done:
    if (in != in_small)
        ap_free(in);
    if (out != out_small)
        ap_free(out);
    return rc;
}

static int eval_op(ip_run *r, ip_frame *fr, const ir_op *op)
{
    r->n_ops += fr->n_dev;
    int rc = check_results(r, op);
    if (rc < 0)
        return rc;
    switch ((ir_opcode)op->opcode) {
    case IR_OP_WHILE: return eval_while(r, fr, op);
    case IR_OP_IF:
    case IR_OP_CASE: return eval_branch(r, fr, op);
    case IR_OP_FUNC_CALL:
    case IR_OP_COMPOSITE: return eval_call(r, fr, op);
    case IR_OP_UNKNOWN:
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "cannot evaluate an op unknown to the interpreter");
    default: break;
    }
    const ir_op_info *info = ir_op_info_get((ir_opcode)op->opcode);
    if (info && info->kind == IR_K_COLL) {
        if (fr->local)
            return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                                  "a collective inside a region evaluated per element or per device "
                                  "(reduce, sort, scatter, map bodies) cannot be evaluated");
        return ir__ip_collective(r, fr, op);
    }
    ip_kernel k = ir__ip_kernel((ir_opcode)op->opcode);
    if (!k)
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "%s", refusal((ir_opcode)op->opcode));
    return eval_kernel(r, fr, op, k);
}

/* ============================================================== regions */

int ir__ip_reducer_init(ip_reducer *rd, ip_ctx *c, const ir_region *reg, uint32_t n, const ir_elem *elems,
                        const ir_elem *xelems)
{
    memset(rd, 0, sizeof *rd);
    rd->c = c;
    rd->r = reg;
    rd->n = n;
    rd->fast = IR_OP_UNKNOWN;
    if (n == 0 || n > IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "reductions of %u values are not supported", n);
    if (!reg || reg->n_blocks != 1 || reg->first->n_args != 2 * n)
        return ir__ip_fail(c, AP_EINVALID, "the reduction body must be one block taking %u scalars", 2 * n);
    memcpy(rd->elems, elems, sizeof *elems * n);
    memcpy(rd->xelems, xelems ? xelems : elems, sizeof *elems * n);
    bool same = true;
    for (uint32_t k = 0; k < n; k++)
        same = same && rd->xelems[k] == elems[k];
    const ir_block *b = reg->first;
    ir_opcode opc = ir_region_reduction(reg);
    if (n == 1 && same &&
        (opc == IR_OP_ADD || opc == IR_OP_MULTIPLY || opc == IR_OP_MAXIMUM || opc == IR_OP_MINIMUM ||
         opc == IR_OP_AND || opc == IR_OP_OR || opc == IR_OP_XOR)) {
        const ir_type *t0 = b->args[0].type, *t1 = b->args[1].type, *tr = b->first->results[0].type;
        if (t0 && t1 && tr && t0->elem == elems[0] && t1->elem == elems[0] && tr->elem == elems[0] &&
            ir_type_numel(t0) == 1 && ir_type_numel(tr) == 1 && ir__ip_ew2_ok(opc, elems[0])) {
            rd->fast = opc;
            return 0;
        }
    }
    /* `return %x...`: scatter with replace semantics (x.at[i].set(v)) */
    if (same && b->n_ops == 1 && b->last && is_terminator(b->last) && b->last->n_operands == n) {
        for (uint32_t k = 0; k < n && same; k++)
            same = b->last->operands[k] == &b->args[n + k] && b->args[n + k].type &&
                   b->args[n + k].type->elem == elems[k] && ir_type_numel(b->args[n + k].type) == 1;
        if (same) {
            rd->replace = true;
            return 0;
        }
    }
    for (uint32_t k = 0; k < 2 * n; k++) {
        int rc;
        ap_error e2;
        if ((rc = ir__tensor_alloc_type(b->args[k].type, 0, &rd->args[k], &e2)) < 0) {
            ir__ip_reducer_free(rd);
            return relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
        }
        if (rd->args[k]->kind != IR_TENSOR_ARRAY || rd->args[k]->numel != 1) {
            ir__ip_reducer_free(rd);
            return ir__ip_fail(c, AP_ETYPE, "the reduction body must take scalars");
        }
    }
    return 0;
}

int ir__ip_reduce_step(ip_reducer *rd, uint8_t *const *acc, const uint8_t *const *x)
{
    if (rd->fast != IR_OP_UNKNOWN) {
        ir__ip_ew2_elem(rd->fast, rd->elems[0], acc[0], x[0], acc[0]);
        return 0;
    }
    uint32_t n = rd->n;
    if (rd->replace) {
        for (uint32_t k = 0; k < n; k++)
            memcpy(acc[k], x[k], ip_eb(rd->elems[k]));
        return 0;
    }
    for (uint32_t k = 0; k < n; k++) {
        ir__ip_convert_elem(rd->elems[k], acc[k], (ir_elem)rd->args[k]->elem, rd->args[k]->data);
        ir__ip_convert_elem(rd->xelems[k], x[k], (ir_elem)rd->args[n + k]->elem, rd->args[n + k]->data);
    }
    ir_tensor *res[IP_MAX_VARIADIC];
    int rc = ir__ip_region(rd->c, rd->r, 2 * n, (const ir_tensor *const *)rd->args, n, res);
    if (rc < 0)
        return rc;
    for (uint32_t k = 0; k < n; k++) {
        if (rc == 0 && (res[k]->kind != IR_TENSOR_ARRAY || res[k]->numel != 1))
            rc = ir__ip_fail(rd->c, AP_ETYPE, "the reduction body must return scalars");
        if (rc == 0)
            ir__ip_convert_elem((ir_elem)res[k]->elem, res[k]->data, rd->elems[k], acc[k]);
        ir_tensor_free(res[k]);
    }
    return rc;
}

void ir__ip_reducer_free(ip_reducer *rd)
{
    for (uint32_t k = 0; k < 2 * IP_MAX_VARIADIC; k++) {
        ir_tensor_free(rd->args[k]);
        rd->args[k] = NULL;
    }
}

int ir__ip_scall_init(ip_scalar_call *sc, ip_ctx *c, const ir_region *reg, uint32_t n_in, const ir_elem *elems)
{
    memset(sc, 0, sizeof *sc);
    sc->c = c;
    sc->r = reg;
    sc->n_in = n_in;
    if (n_in > 2 * IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "regions of %u arguments are not supported", n_in);
    if (!reg || reg->n_blocks != 1 || reg->first->n_args != n_in)
        return ir__ip_fail(c, AP_EINVALID, "the region must be one block taking %u scalars", n_in);
    memcpy(sc->in_elems, elems, sizeof *elems * n_in);
    for (uint32_t k = 0; k < n_in; k++) {
        int rc;
        ap_error e2;
        if ((rc = ir__tensor_alloc_type(reg->first->args[k].type, 0, &sc->args[k], &e2)) < 0) {
            ir__ip_scall_free(sc);
            return relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
        }
        if (sc->args[k]->kind != IR_TENSOR_ARRAY || sc->args[k]->numel != 1) {
            ir__ip_scall_free(sc);
            return ir__ip_fail(c, AP_ETYPE, "the region must take scalars");
        }
    }
    return 0;
}

int ir__ip_scall(ip_scalar_call *sc, const uint8_t *const *args, uint32_t n_out, const ir_elem *res_elems,
                 uint8_t *const *res)
{
    for (uint32_t k = 0; k < sc->n_in; k++)
        ir__ip_convert_elem(sc->in_elems[k], args[k], (ir_elem)sc->args[k]->elem, sc->args[k]->data);
    ir_tensor *out[2 * IP_MAX_VARIADIC];
    if (n_out > 2 * IP_MAX_VARIADIC)
        return ir__ip_fail(sc->c, AP_EUNSUPPORTED, "too many region results");
    int rc = ir__ip_region(sc->c, sc->r, sc->n_in, (const ir_tensor *const *)sc->args, n_out, out);
    if (rc < 0)
        return rc;
    for (uint32_t k = 0; k < n_out; k++) {
        if (rc == 0 && (out[k]->kind != IR_TENSOR_ARRAY || out[k]->numel != 1))
            rc = ir__ip_fail(sc->c, AP_ETYPE, "the region must return scalars");
        if (rc == 0)
            ir__ip_convert_elem((ir_elem)out[k]->elem, out[k]->data, res_elems[k], res[k]);
        ir_tensor_free(out[k]);
    }
    return rc;
}

void ir__ip_scall_free(ip_scalar_call *sc)
{
    for (uint32_t k = 0; k < 2 * IP_MAX_VARIADIC; k++) {
        ir_tensor_free(sc->args[k]);
        sc->args[k] = NULL;
    }
}

/* ================================================================= runs */

int ir__ip_run_init(ip_run *r, const ir_module *m, const ir_interp_opts *opts, ap_error *err)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->filename = m->filename ? m->filename : "";
    r->err = err;
    if (opts)
        r->opts = *opts;
    if (r->opts.max_elems <= 0)
        r->opts.max_elems = IR_INTERP_MAX_ELEMS;
    if (r->opts.max_while_iters <= 0)
        r->opts.max_while_iters = DEFAULT_MAX_WHILE_ITERS;
    if (r->opts.max_depth <= 0)
        r->opts.max_depth = DEFAULT_MAX_DEPTH;
    return 0;
}

void ir__ip_run_free(ip_run *r)
{
    for (uint32_t i = 0; i < r->n_fns; i++)
        fn_free(r->fns[i]);
    ap_free(r->fns);
    ir__map_free(&r->fn_index);
    if (r->opts.ops_evaluated)
        *r->opts.ops_evaluated += r->n_ops;
    r->fns = NULL;
    r->n_fns = 0;
}

/* Checks func and the number and types of args (per device: args[d * n + i]). */
int ir__ip_check_args(ip_run *r, const ir_op *func, uint32_t n_dev, const ir_tensor *const *args, uint32_t n_args)
{
    if (!func || func->opcode != IR_OP_FUNC)
        return ap_error_set(r->err, AP_EINVALID, "not a func.func");
    if (!ir_func_entry(func))
        return ir__ip_fail_op(r, func, -1, AP_EINVALID, "@%s is a declaration without a body", ir_func_name(func));
    for (uint32_t i = 0; i < ir_func_num_args(func); i++) {
        const ir_type *ty = ir_func_arg(func, i)->type;
        if (ty && ty->kind == IR_T_TENSOR && (!ir_type_is_static(ty) || ty->rank < 0)) {
            ap_buf b;
            ap_buf_init(&b);
            ir_type_print(&b, ty);
            int rc = ir__ip_fail_op(r, func, -1, AP_EUNSUPPORTED,
                                    "argument %u of @%s has the dynamic shape %s, which cannot be evaluated", i,
                                    ir_func_name(func), b.data ? b.data : "?");
            ap_buf_free(&b);
            return rc;
        }
    }
    if (n_args != ir_func_num_args(func))
        return ir__ip_fail_op(r, func, -1, AP_EINVALID, "@%s takes %u arguments, %u given", ir_func_name(func),
                              ir_func_num_args(func), n_args);
    for (uint32_t d = 0; d < n_dev; d++)
        for (uint32_t i = 0; i < n_args; i++) {
            const ir_tensor *t = args[(size_t)d * n_args + i];
            const ir_type *ty = ir_func_arg(func, i)->type;
            if (!t || !ir_tensor_has_type(t, ty)) {
                ap_buf b;
                ap_buf_init(&b);
                ir_type_print(&b, ty);
                char ts[128] = "nothing";
                if (t)
                    ir__tensor_type_str(t, ts, sizeof ts);
                int rc =
                    ir__ip_fail_op(r, func, n_dev > 1 ? (int64_t)d : -1, AP_ETYPE, "argument %u is %s, @%s expects %s",
                                   i, ts, ir_func_name(func), b.data ? b.data : "?");
                ap_buf_free(&b);
                return rc;
            }
        }
    return 0;
}

int ir_interp_run(const ir_module *m, const ir_op *func, const ir_tensor *const *args, uint32_t n_args,
                  ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err)
{
    *results = NULL;
    *n_results = 0;
    ip_run r;
    ir__ip_run_init(&r, m, opts, err);
    int rc = ir__ip_check_args(&r, func, 1, args, n_args);
    if (rc == 0) {
        static const int64_t dev0[1] = {0};
        ir_tensor **res;
        rc = ir__ip_call(&r, func, 1, dev0, 0, false, args, &res, NULL);
        if (rc == 0) {
            *results = res;
            *n_results = ir_func_entry(func)->last->n_operands;
        }
    }
    ir__ip_run_free(&r);
    return rc;
}
