/*
 * eval.c - the reference interpreter's driver: evaluation of blocks and
 * regions in lock step over the devices of a run, control flow (while, if,
 * case, calls, composites), the ops that only move values around (tuple,
 * get_tuple_element, optimization_barrier, tokens, partition_id), custom
 * calls through a caller's handler, the kernel table, and ir_interp_run.
 *
 * The kernels live in ew.c (element-wise, and the calls of scalar region
 * bodies), shape.c (data movement, gather, scatter), nn.c (dot,
 * convolution, reductions, sort, linear algebra) and coll.c (collectives);
 * what they share in kernel.c; the value slots in frame.c; SPMD runs in
 * spmd.c; Shardy's sdy.manual_computation in manual.c.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#define DEFAULT_MAX_WHILE_ITERS ((int64_t)1 << 20)
#define DEFAULT_MAX_DEPTH 64

/* ============================================================ evaluation */

static int eval_op(ip_run *r, ip_frame *fr, const ir_op *op);

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
            if (!ir__tensor_has_type_w(t, b->args[i].type, r->opts.f64)) {
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
            if (fr->borrow_args) {
                if (!ir__ip_slot_lend(fr, d, &b->args[i], t))
                    return ir__ip_fail_op(r, owner, -1, AP_ENOMEM, "out of memory");
                continue;
            }
            ir_tensor *c;
            if ((rc = ir__ip_clone_at(r, owner, fr->dev_ids[d], t, &c)) < 0)
                return rc;
            ir__ip_slot_set(fr, d, &b->args[i], c);
        }
    }
    fr->borrow_args = false; /* the regions of its ops take copies */
    const ir_op *term = b->last;
    if (!term || !ip_is_terminator(term))
        return ir__ip_fail_op(r, owner, -1, AP_EINVALID, "region does not end with a return");
    uint32_t at = ir__ip_block_deaths(fr->fn, b);
    for (const ir_op *op = b->first; op != term; op = op->next) {
        if (ip_is_terminator(op))
            return ir__ip_fail_op(r, op, -1, AP_EINVALID, "return in the middle of a block");
        if ((rc = eval_op(r, fr, op)) < 0)
            return rc;
        if (at != UINT32_MAX)
            ir__ip_slots_die(fr, at++);
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
                rc = ir__ip_clone_at(r, term, fr->dev_ids[d], out[(size_t)d * n_out + prev], dst);
            } else if (local_to(v, b) && !ir__ip_slot_lent(fr, d, v)) {
                *dst = ir__ip_slot_take(fr, d, v);
                if (!*dst)
                    rc = ir__ip_fail_op(r, term, fr->dev_ids[d], AP_EINVALID, "returns a value that has none");
            } else {
                const ir_tensor *t = ir__ip_slot(r, fr, d, term, v);
                rc = t ? ir__ip_clone_at(r, term, fr->dev_ids[d], t, dst) : AP_EINVALID;
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

int ir__ip_eval_region(ip_run *r, ip_frame *fr, const ir_op *owner, const ir_region *reg, uint32_t n_in,
                       const ir_tensor *const *in, uint32_t n_out, ir_tensor **out)
{
    return eval_region(r, fr, owner, reg, n_in, in, n_out, out);
}

/* ip_run.region: a single-block region evaluated for the kernel's device. */
static int kernel_region(ip_ctx *c, const ir_region *reg, uint32_t n_in, const ir_tensor *const *in, uint32_t n_out,
                         ir_tensor **out)
{
    ip_frame view = {
        .run = c->fr->run,
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
    int rc = ir__ip_fn_get(r, func, caller ? caller : func, &fn);
    if (rc < 0)
        return rc;
    const ir_block *entry = ir_func_entry(func);
    uint32_t n_out = entry->last ? entry->last->n_operands : 0;
    ir_tensor **out = ap_calloc((size_t)n_dev * (n_out ? n_out : 1), sizeof *out);
    if (!out)
        return ir__ip_fail_op(r, caller ? caller : func, -1, AP_ENOMEM, "out of memory");
    ip_frame fr;
    if ((rc = ir__ip_frame_new(r, fn, n_dev, dev_ids, local, depth, caller ? caller : func, &fr)) < 0) {
        ap_free(out);
        return rc;
    }
    fr.borrow_args = caller == NULL; /* a run's own arguments: the caller keeps them as they are */
    rc = eval_region(r, &fr, caller ? caller : func, &func->regions[0], entry->n_args, args, n_out, out);
    ir__ip_frame_free(&fr);
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
        if ((rc = ir__ip_clone_at(r, op, -1, init[k], &vals[k])) < 0)
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
    ir_tensors_free(vals, (size_t)nd * n);
    ir_tensors_free(next, (size_t)nd * n);
    ir_tensors_free(cond, nd);
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
    ir_tensors_free(out, (size_t)fr->n_dev * op->n_results);
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
        ir_tensors_free(res, (size_t)fr->n_dev * n_out);
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "@%s returns %u values, the call has %u results", callee->u.str.s,
                              n_out, op->n_results);
    }
    for (size_t k = 0; k < (size_t)fr->n_dev * n_out; k++)
        if (!ir__tensor_has_type_w(res[k], op->results[k % n_out].type, r->opts.f64)) {
            ir_tensors_free(res, (size_t)fr->n_dev * n_out);
            return ir__ip_fail_op(r, op, -1, AP_ETYPE, "result %zu of @%s does not have the call's result type",
                                  k % n_out, callee->u.str.s);
        }
    set_results(fr, op, res);
    ir_tensors_free(res, (size_t)fr->n_dev * n_out);
    return 0;
}

/* ------------------------------------------------------- value plumbing */

static int k_identity(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    if (c->op->n_results != c->op->n_operands)
        return ir__ip_fail(c, AP_EINVALID, "needs one result per operand");
    for (uint32_t i = 0; i < c->op->n_operands; i++) {
        int rc = ir__ip_clone_at(c->run, c->op, c->fr->dev_ids[c->dev], in[i], &out[i]);
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
        if ((rc = ir__ip_clone_at(c->run, c->op, c->fr->dev_ids[c->dev], in[i], &out[0]->elems[i])) < 0)
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
    return ir__ip_clone_at(c->run, c->op, c->fr->dev_ids[c->dev], in[0]->elems[idx], &out[0]);
}

static int k_token(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out) { return ir__ip_new_result(c, 0, &out[0]); }

/* partition_id is the device id; replica_id is 0: one replica (the other
 * way round inside interpreter.run_parallel over replicas; over replicas of
 * several partitions device d is replica d / np of partition d % np). */
static int k_device_id(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    if (out[0]->kind != IR_TENSOR_ARRAY || out[0]->numel != 1 || ir__ip_class((ir_elem)out[0]->elem) == IP_F)
        return ir__ip_fail(c, AP_ETYPE, "result must be an integer scalar");
    uint32_t np = c->run->grid_np;
    if (np) {
        int64_t d = c->fr->dev_ids[c->dev];
        ir_tensor_set_i64(out[0], 0, c->op->opcode == IR_OP_PARTITION_ID ? d % np : d / np);
        return 0;
    }
    bool id = (c->op->opcode == IR_OP_PARTITION_ID) != c->run->replicas;
    ir_tensor_set_i64(out[0], 0, id ? c->fr->dev_ids[c->dev] : 0);
    return 0;
}

/* The StableHLO interpreter's assertions, ops of its `check` dialect:
 * check.expect_eq / expect_almost_eq / expect_close (%x, %expected), and
 * check.expect_eq_const / expect_almost_eq_const (%x, and the literal the
 * parser kept as "value").  They are handed to the custom-call handler as
 * `custom_call @check.*` assertions are (`autopart check` holds every run
 * to them); without a handler, or one that does not take them, they are
 * refused: an assertion is never skipped silently. */
static bool is_check_assertion(const ir_op *op)
{
    static const char *const names[] = {"check.expect_eq", "check.expect_almost_eq", "check.expect_close",
                                        "check.expect_eq_const", "check.expect_almost_eq_const"};
    if (op->opcode != IR_OP_UNKNOWN || op->n_results != 0 || op->n_regions != 0)
        return false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(op->name, names[i]))
            return op->n_operands == (strstr(names[i], "_const") ? 1u : 2u);
    return false;
}

static int k_check_assertion(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_interp_opts *o = &c->run->opts;
    if (!o->custom_call)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "an assertion of the StableHLO interpreter, which only `autopart check` "
                                               "carries out");
    const ir_tensor *args[2] = {in[0], c->op->n_operands == 2 ? in[1] : NULL};
    ir_tensor *value = NULL;
    int rc = 0;
    if (!args[1]) {
        if (!ir_op_attr(c->op, "value"))
            return ir__ip_fail(c, AP_EUNSUPPORTED, "its expected value was not read: it is not a dense<...> literal "
                                                   "whose elements fill its tensor type");
        if ((rc = ir__ip_op_value(c, &value)) < 0)
            return rc;
        args[1] = value;
    }
    ap_error e2;
    ap_error_clear(&e2);
    rc = o->custom_call(o->custom_call_ctx, c->op, 2, args, 0, out, &e2);
    ir_tensor_free(value);
    if (rc == AP_EUNSUPPORTED && !e2.msg[0])
        return ir__ip_fail(c, rc, "an assertion the checker does not carry out");
    return rc ? ir__ip_fail(c, rc, "%s", e2.msg[0] ? e2.msg : ap_strerror(rc)) : 0;
}

static int k_custom_call(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_interp_opts *o = &c->run->opts;
    if (ir_fmha_kind(c->op))
        return ir__ip_k_fmha(c, in, out);
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

static ip_kernel kernel_of(ir_opcode opc)
{
    /* Ops of one kind (the kind column of ir_ops.h) share a kernel, so an
     * element-wise op added to the registry needs no row here; the kernel
     * refuses an op it has no rule for. */
    static const ip_kernel by_kind[] = {
        [IR_K_EW1] = ir__ip_k_ew1,
        [IR_K_EW2] = ir__ip_k_ew2,
        [IR_K_CMP] = ir__ip_k_compare,
    };
    /* The rest by opcode. */
    static const ip_kernel table[IR_OP__COUNT] = {
        [IR_OP_IMAG] = ir__ip_k_ew1,
        [IR_OP_IS_FINITE] = ir__ip_k_ew1,
        [IR_OP_REAL] = ir__ip_k_ew1,
        [IR_OP_CONVERT] = ir__ip_k_convert,
        [IR_OP_BITCAST_CONVERT] = ir__ip_k_bitcast,
        [IR_OP_COMPLEX] = ir__ip_k_complex,
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
    if (opc <= IR_OP_UNKNOWN || opc >= IR_OP__COUNT)
        return NULL;
    if (table[opc])
        return table[opc];
    unsigned kind = (unsigned)ir_op_info_get(opc)->kind;
    return kind < sizeof by_kind / sizeof *by_kind ? by_kind[kind] : NULL;
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

/* Bits of the significand stored for float type e (0: not a float). */
static int mantissa_bits(ir_elem e)
{
    switch (e) {
    case IR_E_F64: return 52;
    case IR_E_F32: return 23;
    case IR_E_TF32: case IR_E_F16: return 10;
    case IR_E_BF16: return 7;
    case IR_E_F8E3M4: return 4;
    case IR_E_F8E4M3FN: case IR_E_F8E4M3FNUZ: case IR_E_F8E4M3B11FNUZ: case IR_E_F8E4M3: case IR_E_F6E2M3FN: return 3;
    case IR_E_F8E5M2: case IR_E_F8E5M2FNUZ: case IR_E_F6E3M2FN: return 2;
    case IR_E_F4E2M1FN: return 1;
    default: return 0;
    }
}

/* Whether op's float results are rounded from a computed value (what
 * opts.random_rounding perturbs). */
static bool rounds(const ir_op *op)
{
    switch ((ir_opcode)op->opcode) {
    case IR_OP_ADD: case IR_OP_SUBTRACT: case IR_OP_MULTIPLY: case IR_OP_DIVIDE: case IR_OP_POWER:
    case IR_OP_ATAN2: case IR_OP_EXP: case IR_OP_EXPM1: case IR_OP_LOG: case IR_OP_LOG1P: case IR_OP_LOGISTIC:
    case IR_OP_RSQRT: case IR_OP_SQRT: case IR_OP_CBRT: case IR_OP_TANH: case IR_OP_SINE: case IR_OP_COSINE:
    case IR_OP_TAN: case IR_OP_DOT: case IR_OP_DOT_GENERAL: case IR_OP_CONVOLUTION:
        return true;
    case IR_OP_REDUCE: {
        ir_opcode b = op->n_regions == 1 ? ir_region_reduction(&op->regions[0]) : IR_OP_UNKNOWN;
        return b == IR_OP_ADD || b == IR_OP_MULTIPLY;
    }
    case IR_OP_CONVERT: {
        const ir_type *a = op->n_operands ? op->operands[0]->type : NULL, *y = op->results[0].type;
        return a && y && a->kind == IR_T_TENSOR && y->kind == IR_T_TENSOR &&
               mantissa_bits((ir_elem)y->elem) < mantissa_bits((ir_elem)a->elem);
    }
    default: return false;
    }
}

static bool is_sum(const ir_op *op)
{
    return op && (op->opcode == IR_OP_DOT || op->opcode == IR_OP_DOT_GENERAL || op->opcode == IR_OP_CONVOLUTION ||
                  (op->opcode == IR_OP_REDUCE && rounds(op)));
}

/* Whether opts.random_rounding perturbs op's results: every op that
 * rounds, or under random_rounding_sums only the sums and a convert,
 * multiply or divide of a sum's result (interp.h). */
static bool rounds_randomly(const ip_run *r, const ir_op *op)
{
    if (!rounds(op))
        return false;
    if (!r->opts.random_rounding_sums || is_sum(op))
        return true;
    if (op->opcode != IR_OP_CONVERT && op->opcode != IR_OP_MULTIPLY && op->opcode != IR_OP_DIVIDE)
        return false;
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (is_sum(op->operands[i]->def))
            return true;
    return false;
}

/* opts.random_rounding on one result: each nonzero finite element moves
 * one ulp up or down with probability 1/4 each. */
static void round_randomly(ip_run *r, ir_tensor *t)
{
    int m = t->kind == IR_TENSOR_ARRAY && ir__ip_class((ir_elem)t->elem) == IP_F ? mantissa_bits((ir_elem)t->elem) : 0;
    if (!m)
        return;
    ir_elem e = (ir_elem)t->elem;
    size_t eb = ip_eb(e);
    uint64_t bits = 0, stream = ap_hash_mix(r->opts.random_rounding, r->n_rounded++);
    for (int64_t i = 0; i < t->numel; i++) {
        if ((i & 31) == 0)
            bits = ap_hash_mix(stream, (uint64_t)i);
        unsigned two = (unsigned)(bits >> (2 * (i & 31))) & 3;
        uint8_t *p = t->data + (size_t)i * eb;
        double v = ip_ldf(e, p);
        if (two < 2 || v == 0 || !isfinite(v))
            continue;
        int ex;
        frexp(v, &ex); /* |v| in [2^(ex-1), 2^ex) */
        double ulp = ldexp(1.0, ex - 1 - m), w = two == 2 ? v + ulp : v - ulp;
        if (isfinite(w))
            ip_stf(e, p, w);
    }
}

/* Whether op's meaning depends on the bit width of a float it reads or
 * makes, so that ir_interp_opts.f64 cannot widen it: bitcast_convert of a
 * float, reduce_precision, the fused-attention custom calls (cuDNN's
 * kernels round as their types say).  Other custom calls go to the
 * caller's handler, which must decide (interp.h). */
bool ir_interp_op_width_bound(const ir_op *op)
{
    if (op->opcode == IR_OP_REDUCE_PRECISION || (op->opcode == IR_OP_CUSTOM_CALL && ir_fmha_kind(op)))
        return true;
    /* the next float depends on the type's precision */
    if (op->opcode == IR_OP_UNKNOWN && !strcmp(op->name, "chlo.next_after"))
        return true;
    /* quantizing rounds to the expressed type's precision (quant.c) */
    if (ir__ip_op_has_quant(op))
        return true;
    if (op->opcode != IR_OP_BITCAST_CONVERT)
        return false;
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (op->operands[i]->type && ir_elem_is_float((ir_elem)op->operands[i]->type->elem))
            return true;
    for (uint32_t i = 0; i < op->n_results; i++)
        if (op->results[i].type && ir_elem_is_float((ir_elem)op->results[i].type->elem))
            return true;
    return false;
}

static int eval_kernel(ip_run *r, ip_frame *fr, const ir_op *op, ip_kernel k)
{
    if (r->opts.f64 && ir_interp_op_width_bound(op))
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                              "depends on the width of its float type, which the f64 run does not keep");
    const char *why;
    bool dequantizes = ir__ip_quant_mode(op, &why) == IP_QM_DEQUANTIZE;
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
        rc = dequantizes ? ir__ip_quant_call(&c, k, in, out) : k(&c, in, out);
        for (uint32_t i = 0; i < op->n_results && rc == 0; i++) {
            if (!out[i] || !ir__tensor_has_type_w(out[i], op->results[i].type, r->opts.f64)) {
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
        for (uint32_t i = 0; r->opts.random_rounding && !fr->local && rounds_randomly(r, op) && i < op->n_results; i++)
            round_randomly(r, out[i]);
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

/* The StableHLO interpreter's `interpreter.run_parallel(%x...) {programs =
 * [[@f, ...], ...]}`: process (i, j) runs programs[i][j] as replica i of
 * partition j, all in lock step, so their collectives meet; operands and
 * results are the processes' in row-major order, each process's in turn.
 * Its test suite's collectives are written so (51 of /work/realprog's
 * programs).  Taken when every process runs the same function and there is
 * one replica (partitions, as the SPMD runs have them: interp.h), one
 * partition (the devices are then replicas: replica_id is the device, and
 * coll.c reads replica groups and pairs as replica ids), or several of both
 * (the spec's process grid: coll.c forms each collective's process groups
 * as the spec does); different functions are refused. */
static bool is_run_parallel(const ir_op *op)
{
    return op->opcode == IR_OP_UNKNOWN && op->n_regions == 0 && !strcmp(op->name, "interpreter.run_parallel");
}

static int eval_run_parallel(ip_run *r, ip_frame *fr, const ir_op *op)
{
    ir_attr *pa = ir_op_attr(op, "programs");
    if (!pa || pa->kind != IR_A_ARRAY || pa->u.arr.n < 1)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "programs must be an array of arrays of functions");
    int32_t nr = pa->u.arr.n, np = -1;
    const char *name = NULL;
    for (int32_t i = 0; i < nr; i++) {
        ir_attr *row = pa->u.arr.items[i];
        if (row->kind != IR_A_ARRAY || row->u.arr.n < 1 || (np >= 0 && row->u.arr.n != np))
            return ir__ip_fail_op(r, op, -1, AP_EINVALID, "programs must be rows of functions of one length");
        np = row->u.arr.n;
        for (int32_t j = 0; j < np; j++) {
            ir_attr *f = row->u.arr.items[j];
            if (f->kind != IR_A_SYMREF)
                return ir__ip_fail_op(r, op, -1, AP_EINVALID, "programs must name functions");
            if (name && strcmp(name, f->u.str.s))
                return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                                      "processes that run different functions (@%s, @%s) are not supported", name,
                                      f->u.str.s);
            name = f->u.str.s;
        }
    }
    if (fr->local || r->replicas || r->grid_np)
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "a run_parallel inside another run cannot be evaluated");
    const ir_op *f = ir_module_func(r->m, name);
    if (!f)
        return ir__ip_fail_op(r, op, -1, AP_EUNDEFINED, "runs @%s, which the module does not define", name);
    uint32_t n = (uint32_t)(nr * np), n_in = ir_func_num_args(f);
    const ir_block *entry = ir_func_entry(f);
    uint32_t n_out = entry && entry->last ? entry->last->n_operands : 0;
    if (op->n_operands != n * n_in || op->n_results != n * n_out)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                              "%u processes of @%s take %u operands and give %u results; the op has %u and %u", n, name,
                              n * n_in, n * n_out, op->n_operands, op->n_results);
    int64_t *ids = ap_malloc(sizeof *ids * n);
    const ir_tensor **args = ap_calloc((size_t)n * n_in + 1, sizeof *args);
    int rc = 0;
    if (!ids || !args) {
        rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t k = 0; k < n; k++)
        ids[k] = k;
    for (uint32_t d = 0; d < fr->n_dev && rc == 0; d++) {
        for (uint32_t i = 0; i < n * n_in; i++)
            if (!(args[i] = ir__ip_slot(r, fr, d, op, op->operands[i]))) {
                rc = AP_EINVALID;
                goto done;
            }
        ir_tensor **res = NULL;
        r->replicas = nr > 1 && np == 1;
        r->grid_np = nr > 1 && np > 1 ? (uint32_t)np : 0;
        rc = ir__ip_call(r, f, n, ids, fr->depth + 1, false, args, &res, op);
        r->replicas = false;
        r->grid_np = 0;
        if (rc < 0)
            goto done;
        for (uint32_t k = 0; k < n * n_out && rc == 0; k++)
            if (!ir__tensor_has_type_w(res[k], op->results[k].type, r->opts.f64))
                rc = ir__ip_fail_op(r, op, -1, AP_ETYPE, "result %u of @%s does not have the op's result type %u",
                                    k % n_out, name, k);
        for (uint32_t k = 0; k < n * n_out; k++) {
            if (rc == 0)
                ir__ip_slot_set(fr, d, &op->results[k], res[k]);
            else
                ir_tensor_free(res[k]);
        }
        ap_free(res);
    }
done:
    ap_free(ids);
    ap_free(args);
    return rc;
}

/* Shardy's sdy.named_computation<"name">(operands) (block arguments) {...}:
 * a call whose callee's body is copied in place (Shardy's docs: the body of
 * the called function; its block arguments and returned values have the
 * operands' and results' types).  It runs its body on its operands.  The
 * partitioner has no rule for it, so its region runs whole: the SPMD
 * program gives it whole operands. */
static bool is_named_computation(const ir_op *op)
{
    return op->opcode == IR_OP_UNKNOWN && op->n_regions == 1 && !strcmp(op->name, "sdy.named_computation");
}

static int eval_named_computation(ip_run *r, ip_frame *fr, const ir_op *op)
{
    int rc;
    const ir_tensor **args = operands_of(r, fr, op, 0, &rc);
    if (!args)
        return rc;
    uint32_t n_out = op->n_results;
    size_t n = (size_t)fr->n_dev * n_out;
    ir_tensor **out = ap_calloc(n ? n : 1, sizeof *out);
    if (!out) {
        ap_free(args);
        return ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
    }
    rc = eval_region(r, fr, op, &op->regions[0], op->n_operands, args, n_out, out);
    ap_free(args);
    for (size_t k = 0; rc == 0 && k < n; k++)
        if (!ir__tensor_has_type_w(out[k], op->results[k % n_out].type, r->opts.f64))
            rc = ir__ip_fail_op(r, op, -1, AP_ETYPE, "its body's result %zu does not have the op's result type",
                                k % n_out);
    if (rc == 0)
        set_results(fr, op, out);
    ir_tensors_free(out, n);
    return rc;
}

/* Shardy's ops that pass their one operand through: the annotations of a
 * value, and sdy.data_flow_edge and sdy.func_data_flow_edge, which only
 * mark the owner of an edge whose sources and targets share a sharding
 * (SameOperandsAndResultType; Shardy's export replaces them by their
 * input).  And Shardy's explicit collectives that only move a tensor's
 * pieces between devices, sdy.all_gather, all_slice, all_to_all and
 * collective_permute: in the global view they are written in
 * (SameOperandsAndResultType) the tensor is the same, only its sharding
 * changes (sdy.all_reduce, which sums partial values, is not one). */
static bool sdy_identity(const ir_op *op)
{
    static const char *const names[] = {"sdy.sharding_constraint", "sdy.propagation_barrier", "sdy.reshard",
                                        "sdy.data_flow_edge",      "sdy.func_data_flow_edge", "sdy.all_gather",
                                        "sdy.all_slice",           "sdy.all_to_all",          "sdy.collective_permute"};
    if (op->n_operands != 1 || op->n_results != 1 || op->n_regions != 0 ||
        !ir_type_equal(op->operands[0]->type, op->results[0].type))
        return false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(op->name, names[i]))
            return true;
    return false;
}

static int eval_op(ip_run *r, ip_frame *fr, const ir_op *op)
{
    r->n_ops += fr->n_dev;
    if (r->opts.max_held > 0 && r->held > r->opts.max_held)
        return ir__ip_fail_op(r, op, -1, AP_ELIMIT,
                              "the run's values hold %.2f GiB at once, over its limit of %.2f GiB (half the "
                              "machine's memory): a smaller configuration of the program can be checked",
                              (double)r->held / (1 << 30), (double)r->opts.max_held / (1 << 30));
    int rc = check_results(r, op);
    if (rc < 0)
        return rc;
    const char *why;
    switch (ir__ip_quant_mode(op, &why)) {
    case IP_QM_REFUSE: return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "%s", why);
    case IP_QM_OWN:
        return eval_kernel(r, fr, op, op->opcode == IR_OP_UNIFORM_QUANTIZE ? ir__ip_k_uniform_quantize
                                                                          : ir__ip_k_uniform_dequantize);
    default: break;
    }
    switch ((ir_opcode)op->opcode) {
    case IR_OP_WHILE: return eval_while(r, fr, op);
    case IR_OP_IF:
    case IR_OP_CASE: return eval_branch(r, fr, op);
    case IR_OP_FUNC_CALL:
    case IR_OP_COMPOSITE: return eval_call(r, fr, op);
    case IR_OP_UNKNOWN:
        /* Shardy's annotations of a value (with_sharding_constraint in a
         * JAX export) pass it through unchanged */
        if (sdy_identity(op))
            return eval_kernel(r, fr, op, k_identity);
        if (is_named_computation(op))
            return eval_named_computation(r, fr, op);
        if (op->n_regions == 1 && !strcmp(op->name, "sdy.manual_computation"))
            return ir__ip_eval_manual(r, fr, op);
        if (is_run_parallel(op))
            return r->manual_free ? ir__ip_manual_refuse(r, op) : eval_run_parallel(r, fr, op);
        if (ir__ip_chlo_unary_fn(op->name))
            return eval_kernel(r, fr, op, ir__ip_k_chlo_unary);
        if (!strcmp(op->name, "chlo.top_k"))
            return eval_kernel(r, fr, op, ir__ip_k_top_k);
        if (!strcmp(op->name, "chlo.next_after"))
            return eval_kernel(r, fr, op, ir__ip_k_next_after);
        if (!strcmp(op->name, "chlo.mulhi"))
            return eval_kernel(r, fr, op, ir__ip_k_mulhi);
        if (!strcmp(op->name, "chlo.ragged_dot"))
            return eval_kernel(r, fr, op, ir__ip_k_ragged_dot);
        if (!strcmp(op->name, "chlo.scan") && op->n_regions == 1)
            return eval_kernel(r, fr, op, ir__ip_k_scan);
        if (ir__ip_is_collective_reduce(op)) {
            if (r->manual_free)
                return ir__ip_manual_refuse(r, op);
            if (fr->local)
                return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                                      "a collective inside a region evaluated per element or per device "
                                      "(reduce, sort, scatter, map bodies) cannot be evaluated");
            return ir__ip_collective(r, fr, op);
        }
        if (is_check_assertion(op))
            return eval_kernel(r, fr, op, k_check_assertion);
        /* Shardy's sdy.sharding_group %v group_id = N: asks that values
         * share a sharding; it computes nothing */
        if (!strcmp(op->name, "sdy.sharding_group") && op->n_results == 0 && op->n_regions == 0)
            return 0;
        /* Shardy's constant and a tensor arith.constant: the value as the
         * parser read it (ops.c) */
        if ((!strcmp(op->name, "sdy.constant") || !strcmp(op->name, "arith.constant")) && op->n_operands == 0 &&
            op->n_results == 1 && op->n_regions == 0) {
            if (!ir_op_attr(op, "value"))
                return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "its value was not read: it is not a dense<...> literal "
                                                                 "whose elements fill its tensor type");
            return eval_kernel(r, fr, op, ir__ip_k_constant);
        }
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "cannot evaluate an op unknown to the interpreter");
    default: break;
    }
    const ir_op_info *info = ir_op_info_get((ir_opcode)op->opcode);
    if (r->manual_free && ((info && info->kind == IR_K_COLL) || op->opcode == IR_OP_PARTITION_ID ||
                           op->opcode == IR_OP_REPLICA_ID))
        return ir__ip_manual_refuse(r, op);
    if (info && info->kind == IR_K_COLL) {
        if (fr->local)
            return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                                  "a collective inside a region evaluated per element or per device "
                                  "(reduce, sort, scatter, map bodies) cannot be evaluated");
        return ir__ip_collective(r, fr, op);
    }
    ip_kernel k = kernel_of((ir_opcode)op->opcode);
    if (!k)
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "%s", refusal((ir_opcode)op->opcode));
    return eval_kernel(r, fr, op, k);
}

/* ================================================================= runs */

int ir__ip_run_init(ip_run *r, const ir_module *m, const ir_interp_opts *opts, ap_error *err)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->filename = m->filename ? m->filename : "";
    r->err = err;
    r->region = kernel_region;
    if (opts)
        r->opts = *opts;
    if (r->opts.max_elems <= 0)
        r->opts.max_elems = IR_INTERP_MAX_ELEMS;
    if (r->opts.max_held == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        r->opts.max_held = pages > 0 && page > 0 ? (int64_t)pages / 2 * page : -1;
    }
    if (r->opts.max_while_iters <= 0)
        r->opts.max_while_iters = DEFAULT_MAX_WHILE_ITERS;
    if (r->opts.max_depth <= 0)
        r->opts.max_depth = DEFAULT_MAX_DEPTH;
    return 0;
}

void ir__ip_run_free(ip_run *r)
{
    for (uint32_t i = 0; i < r->n_fns; i++)
        ir__ip_fn_free(r->fns[i]);
    ap_free(r->fns);
    ir__map_free(&r->fn_index);
    if (r->opts.ops_evaluated)
        *r->opts.ops_evaluated += r->n_ops;
    if (r->opts.peak_held && r->held_peak > *r->opts.peak_held)
        *r->opts.peak_held = r->held_peak;
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
            if (!t || !ir__tensor_has_type_w(t, ty, r->opts.f64)) {
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
