/*
 * program.c - the flat arrays a prepared program is evaluated over
 * (cost_int.h): its kernels' items, its collectives, and the events of
 * its blocks with what each waits for.  graph.c appends to them, for a
 * module's blocks (prepare.c) and for the scorer's lowered block alike.
 */
#include "cost_int.h"

#include <stdint.h>
#include <string.h>

/* Grows *pp (capacity *cap, elements of `elem` bytes) to hold need; false
 * when out of memory (*pp unchanged). */
static bool grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void **p = pp, *q = ap_realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

bool cost__push_item(cost_program *p, const cost_item *it, size_t *index)
{
    if (index)
        *index = SIZE_MAX;
    if (it->flops <= 0 && it->bytes <= 0)
        return true;
    if (p->n_items == p->cap_items) {
        size_t cap = p->cap_items ? 2 * p->cap_items : 1024;
        /* each array grows to cap; the capacity is raised once all have */
        size_t c;
#define GROW(field) (c = p->cap_items, grow(&p->field, &c, cap, sizeof *p->field, cap))
        if (!GROW(flops) || !GROW(mm) || !GROW(bytes) || !GROW(mdim) || !GROW(ndim) || !GROW(runs) || !GROW(prec) ||
            !GROW(ops))
            return false;
#undef GROW
        p->cap_items = cap;
    }
    size_t i = p->n_items++;
    p->flops[i] = it->flops;
    p->mm[i] = it->matmul;
    p->bytes[i] = it->bytes;
    p->mdim[i] = it->m;
    p->ndim[i] = it->n;
    p->runs[i] = it->runs;
    p->prec[i] = it->prec;
    p->ops[i] = it->op;
    p->flops_total += it->flops;
    p->bytes_total += it->bytes;
    if (index)
        *index = i;
    return true;
}

bool cost__push_coll(cost_program *p, const cost_coll_item *it)
{
    if (!grow(&p->colls, &p->cap_colls, p->n_colls + 1, sizeof *p->colls, 64))
        return false;
    p->colls[p->n_colls++] = *it;
    return true;
}

void cost__program_clear(cost_program *p)
{
    p->n_items = p->n_colls = 0;
    p->n_ev = p->n_dep = p->n_blk = 0;
    p->flops_total = p->bytes_total = p->matmul_flops = 0;
    p->notes = 0;
}

void cost__program_free_arrays(cost_program *p)
{
    ap_free(p->flops);
    ap_free(p->mm);
    ap_free(p->bytes);
    ap_free(p->mdim);
    ap_free(p->ndim);
    ap_free(p->runs);
    ap_free(p->prec);
    ap_free(p->ops);
    ap_free(p->colls);
    ap_free(p->loops);
    ap_free(p->ev_kind);
    ap_free(p->ev_ref);
    ap_free(p->ev_dep0);
    ap_free(p->ev_dep);
    ap_free(p->blk_ev0);
    ap_free(p->blk_nev);
}

bool cost__push_event(cost_program *p, uint8_t kind, uint32_t ref)
{
    size_t c = p->cap_ev;
    if (p->n_ev + 2 > p->cap_ev) {
        size_t cap = p->cap_ev ? 2 * p->cap_ev : 1024;
        while (cap < p->n_ev + 2)
            cap *= 2;
        if (!grow(&p->ev_kind, &c, cap, sizeof *p->ev_kind, cap) ||
            (c = p->cap_ev, !grow(&p->ev_ref, &c, cap, sizeof *p->ev_ref, cap)) ||
            (c = p->cap_ev, !grow(&p->ev_dep0, &c, cap, sizeof *p->ev_dep0, cap)))
            return false;
        p->cap_ev = cap;
    }
    if (p->n_ev == 0)
        p->ev_dep0[0] = (uint32_t)p->n_dep;
    p->ev_kind[p->n_ev] = kind;
    p->ev_ref[p->n_ev] = ref;
    p->n_ev++;
    p->ev_dep0[p->n_ev] = (uint32_t)p->n_dep;
    return true;
}

bool cost__push_dep(cost_program *p, uint32_t ev)
{
    if (!grow(&p->ev_dep, &p->cap_dep, p->n_dep + 1, sizeof *p->ev_dep, 4096))
        return false;
    p->ev_dep[p->n_dep++] = ev;
    p->ev_dep0[p->n_ev] = (uint32_t)p->n_dep;
    return true;
}

bool cost__push_block(cost_program *p, uint32_t ev0, uint32_t nev, uint32_t *id)
{
    size_t c = p->cap_blk;
    if (p->n_blk == p->cap_blk) {
        size_t cap = p->cap_blk ? 2 * p->cap_blk : 16;
        if (!grow(&p->blk_ev0, &c, cap, sizeof *p->blk_ev0, cap) ||
            (c = p->cap_blk, !grow(&p->blk_nev, &c, cap, sizeof *p->blk_nev, cap)))
            return false;
        p->cap_blk = cap;
    }
    p->blk_ev0[p->n_blk] = ev0;
    p->blk_nev[p->n_blk] = nev;
    *id = (uint32_t)p->n_blk++;
    return true;
}
