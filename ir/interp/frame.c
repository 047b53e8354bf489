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
    ir__map_free(&fn->block_at);
    ap_free(fn->die0);
    ap_free(fn->dies);
    ap_free(fn);
}

static inline bool slot_index(const ip_fn *fn, const ir_value *v, uint32_t *out);

/* ======================================================= when values die */

#define READ_NONE UINT32_MAX
#define READ_KEPT (UINT32_MAX - 1) /* returned by its block */

typedef struct deaths {
    ip_fn *fn;
    uint32_t *last; /* per slot: the position in the block being planned of its last reader */
    uint32_t *own;  /* the slots of that block's values (arguments, then results) */
    uint32_t n_own, cap_own;
    uint32_t n_die0, cap_die0, n_dies, cap_dies;
} deaths;

static bool local_to(const ir_value *v, const ir_block *b) { return v->def ? v->def->parent == b : v->block == b; }

/* Records that the op at position k of b reads, itself or inside its
 * regions, the values of b that op reads. */
static void mark_reads(deaths *d, const ir_block *b, const ir_op *op, uint32_t k)
{
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t s;
        if (local_to(op->operands[i], b) && slot_index(d->fn, op->operands[i], &s))
            d->last[s] = k;
    }
    for (uint32_t r = 0; r < op->n_regions; r++)
        for (const ir_block *nb = op->regions[r].first; nb; nb = nb->next)
            for (const ir_op *o = nb->first; o; o = o->next)
                mark_reads(d, b, o, k);
}

static bool grow_u32(uint32_t **v, uint32_t *cap, uint32_t need)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    uint32_t *n = ap_realloc(*v, sizeof *n * c);
    if (!n)
        return false;
    *v = n;
    *cap = c;
    return true;
}

static bool own_push(deaths *d, const ir_value *v)
{
    uint32_t s;
    if (!slot_index(d->fn, v, &s))
        return true;
    if (!grow_u32(&d->own, &d->cap_own, d->n_own + 1))
        return false;
    d->own[d->n_own++] = s;
    return true;
}

/* The deaths of block b's values, then of its ops' regions' blocks. */
static bool plan_block(deaths *d, const ir_block *b)
{
    ip_fn *fn = d->fn;
    uint32_t n = 0;
    d->n_own = 0;
    for (uint32_t i = 0; i < b->n_args; i++)
        if (!own_push(d, &b->args[i]))
            return false;
    uint32_t n_args = d->n_own;
    for (const ir_op *op = b->first; op; op = op->next, n++)
        for (uint32_t j = 0; j < op->n_results; j++)
            if (!own_push(d, &op->results[j]))
                return false;
    uint32_t at0 = d->n_die0;
    if (!grow_u32(&fn->die0, &d->cap_die0, at0 + n + 1) || !ir__map_put(&fn->block_at, b, at0))
        return false;
    d->n_die0 = at0 + n + 1;
    uint32_t k = 0;
    for (const ir_op *op = b->first; op; op = op->next, k++) {
        if (op != b->last || op->n_regions) {
            mark_reads(d, b, op, k);
            continue;
        }
        for (uint32_t i = 0; i < op->n_operands; i++) { /* the return takes them */
            uint32_t s;
            if (local_to(op->operands[i], b) && slot_index(fn, op->operands[i], &s))
                d->last[s] = READ_KEPT;
        }
    }
    /* a result nothing reads dies where it is made; an argument nothing
     * reads after the first op (a loop's condition takes every carried
     * value and reads few) */
    k = 0;
    for (const ir_op *op = b->first; op; op = op->next, k++)
        for (uint32_t j = 0; j < op->n_results; j++) {
            uint32_t s;
            if (slot_index(fn, &op->results[j], &s) && d->last[s] == READ_NONE)
                d->last[s] = k;
        }
    for (uint32_t i = 0; i < n_args && b->first != b->last; i++)
        if (d->last[d->own[i]] == READ_NONE)
            d->last[d->own[i]] = 0;
    /* per position, how many die there (in die0[at0 ..]), to where its
     * slots start; each position's slots from its start (which moves to
     * the next position's start); the starts back */
    uint32_t *at = &fn->die0[at0];
    memset(at, 0, sizeof *at * (n + 1));
    for (uint32_t i = 0; i < d->n_own; i++)
        if (d->last[d->own[i]] < READ_KEPT)
            at[d->last[d->own[i]]]++;
    uint32_t end = d->n_dies;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t c = at[i];
        at[i] = end;
        end += c;
    }
    if (!grow_u32(&fn->dies, &d->cap_dies, end + 1))
        return false;
    for (uint32_t i = 0; i < d->n_own; i++)
        if (d->last[d->own[i]] < READ_KEPT)
            fn->dies[at[d->last[d->own[i]]]++] = d->own[i];
    for (uint32_t i = n; i > 0; i--)
        at[i] = at[i - 1];
    at[0] = d->n_dies;
    d->n_dies = end;
    for (uint32_t i = 0; i < d->n_own; i++)
        d->last[d->own[i]] = READ_NONE;
    for (const ir_op *op = b->first; op; op = op->next)
        for (uint32_t r = 0; r < op->n_regions; r++)
            for (const ir_block *nb = op->regions[r].first; nb; nb = nb->next)
                if (!plan_block(d, nb))
                    return false;
    return true;
}

static bool plan_deaths(ip_fn *fn)
{
    deaths d = {.fn = fn, .last = ap_malloc(sizeof *d.last * (fn->n_slots ? fn->n_slots : 1))};
    if (!d.last)
        return false;
    for (uint32_t s = 0; s < fn->n_slots; s++)
        d.last[s] = READ_NONE;
    bool ok = true;
    for (uint32_t r = 0; r < fn->func->n_regions && ok; r++)
        for (const ir_block *b = fn->func->regions[r].first; b && ok; b = b->next)
            ok = plan_block(&d, b);
    ap_free(d.last);
    ap_free(d.own);
    return ok;
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
    if (!plan_deaths(fn))
        goto oom;
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

/* The bytes a value holds (a tuple's members'). */
static int64_t held_bytes(const ir_tensor *t)
{
    if (!t)
        return 0;
    if (t->kind != IR_TENSOR_TUPLE)
        return (int64_t)t->nbytes;
    int64_t b = 0;
    for (uint32_t i = 0; i < t->n_elems; i++)
        b += held_bytes(t->elems[i]);
    return b;
}

static void hold(ip_frame *fr, int64_t bytes)
{
    ip_run *r = fr->run;
    if (!r)
        return;
    r->held += bytes;
    if (r->held > r->held_peak)
        r->held_peak = r->held;
}

/* Empties slot s of device dev: frees its tensor unless it is lent. */
static void slot_drop(ip_frame *fr, uint32_t dev, uint32_t s)
{
    ir_tensor **slot = &fr->slots[dev][s];
    hold(fr, -held_bytes(*slot));
    uint8_t *lent = fr->lent ? &fr->lent[(size_t)dev * fr->fn->n_slots + s] : NULL;
    if (lent && *lent)
        *lent = 0;
    else
        ir_tensor_free(*slot);
    *slot = NULL;
}

void ir__ip_slot_set(ip_frame *fr, uint32_t dev, const ir_value *v, ir_tensor *t)
{
    uint32_t s;
    if (!slot_index(fr->fn, v, &s)) {
        ir_tensor_free(t); /* cannot happen for values of the function */
        return;
    }
    slot_drop(fr, dev, s);
    hold(fr, held_bytes(t));
    fr->slots[dev][s] = t;
}

bool ir__ip_slot_lend(ip_frame *fr, uint32_t dev, const ir_value *v, const ir_tensor *t)
{
    uint32_t s;
    if (!slot_index(fr->fn, v, &s))
        return true;
    if (!fr->lent && !(fr->lent = ap_calloc((size_t)fr->n_dev * fr->fn->n_slots, 1)))
        return false;
    slot_drop(fr, dev, s);
    hold(fr, held_bytes(t));
    fr->slots[dev][s] = (ir_tensor *)t; /* never written through: slots are read as const */
    fr->lent[(size_t)dev * fr->fn->n_slots + s] = 1;
    return true;
}

bool ir__ip_slot_lent(const ip_frame *fr, uint32_t dev, const ir_value *v)
{
    uint32_t s;
    return fr->lent && slot_index(fr->fn, v, &s) && fr->lent[(size_t)dev * fr->fn->n_slots + s];
}

/* Takes the value out of its slot (for values dead after a region). */
ir_tensor *ir__ip_slot_take(ip_frame *fr, uint32_t dev, const ir_value *v)
{
    uint32_t s;
    if (!slot_index(fr->fn, v, &s) || ir__ip_slot_lent(fr, dev, v))
        return NULL; /* a lent tensor is the caller's: copy it */
    ir_tensor *t = fr->slots[dev][s];
    fr->slots[dev][s] = NULL;
    hold(fr, -held_bytes(t));
    return t;
}

uint32_t ir__ip_block_deaths(const ip_fn *fn, const ir_block *b)
{
    uint32_t at;
    return ir__map_get(&fn->block_at, b, &at) ? at : UINT32_MAX;
}

void ir__ip_slots_die(ip_frame *fr, uint32_t at)
{
    const ip_fn *fn = fr->fn;
    for (uint32_t i = fn->die0[at]; i < fn->die0[at + 1]; i++)
        for (uint32_t d = 0; d < fr->n_dev; d++)
            slot_drop(fr, d, fn->dies[i]);
}

/* ================================================================ frames */

int ir__ip_frame_new(ip_run *r, const ip_fn *fn, uint32_t n_dev, const int64_t *dev_ids, bool local, int depth,
                     const ir_op *at, ip_frame *fr)
{
    memset(fr, 0, sizeof *fr);
    fr->run = r;
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
            slot_drop(fr, d, s);
    ap_free(fr->lent);
    fr->lent = NULL;
    ap_free(fr->slots[0]);
    ap_free(fr->slots);
    fr->slots = NULL;
}
