/*
 * frame.c - where the interpreter keeps values: the slot numbering of each
 * function (values numbered densely, nested regions included) and the
 * frames of slots, one row per device, that evaluation and the
 * collectives read and write.
 */
#include "interp_int.h"

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

void ir__ip_fn_free(ip_fn *fn)
{
    if (!fn)
        return;
    ir__map_free(&fn->map);
    ap_free(fn);
}

/* The numbering of func, made once per run.  Functions built without
 * ir_func_renumber get a map from value to slot instead of their ids. */
int ir__ip_fn_get(ip_run *r, const ir_op *func, const ir_op *caller, const ip_fn **out)
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
    ir__ip_fn_free(fn);
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
ir_tensor *ir__ip_slot_take(ip_frame *fr, uint32_t dev, const ir_value *v)
{
    uint32_t s;
    if (!slot_index(fr->fn, v, &s))
        return NULL;
    ir_tensor *t = fr->slots[dev][s];
    fr->slots[dev][s] = NULL;
    return t;
}

/* ================================================================ frames */

int ir__ip_frame_new(ip_run *r, const ip_fn *fn, uint32_t n_dev, const int64_t *dev_ids, bool local, int depth,
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

void ir__ip_frame_free(ip_frame *fr)
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
