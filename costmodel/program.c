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

bool cost__grow_items(cost_program *p)
{
    if (p->n_items < p->cap_items)
        return true;
    size_t cap = p->cap_items ? 2 * p->cap_items : 1024;
    /* each array grows to cap; the capacity is raised once all have */
    size_t c;
#define GROW(field) (c = p->cap_items, grow(&p->field, &c, cap, sizeof *p->field, cap))
    if (!GROW(flops) || !GROW(mm) || !GROW(bytes) || !GROW(mdim) || !GROW(ndim) || !GROW(runs) || !GROW(prec) ||
        !GROW(ops))
        return false;
#undef GROW
    p->cap_items = cap;
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

bool cost__program_empty(const cost_program *p)
{
    return p->n_items == 0 && p->n_colls == 0 && p->n_ev == 0 && p->n_dep == 0 && p->n_blk == 0 &&
           p->flops_total == 0 && p->bytes_total == 0 && p->matmul_flops == 0;
}

bool cost__program_copy(cost_program *dst, const cost_program *src)
{
    size_t ni = src->n_items, ne = src->n_ev, nb = src->n_blk, c;
    /* arrays that share a capacity each grow from the shared one, which is
     * raised once all have (ev_dep0 holds n_ev + 1 entries) */
#define FIT(field, cap, n) (c = dst->cap, grow(&dst->field, &c, n, sizeof *dst->field, n))
    if (ni > dst->cap_items) {
        if (!FIT(flops, cap_items, ni) || !FIT(mm, cap_items, ni) || !FIT(bytes, cap_items, ni) ||
            !FIT(mdim, cap_items, ni) || !FIT(ndim, cap_items, ni) || !FIT(runs, cap_items, ni) ||
            !FIT(prec, cap_items, ni) || !FIT(ops, cap_items, ni))
            return false;
        dst->cap_items = c;
    }
    if (ne + 1 > dst->cap_ev) {
        if (!FIT(ev_kind, cap_ev, ne + 1) || !FIT(ev_ref, cap_ev, ne + 1) || !FIT(ev_dep0, cap_ev, ne + 1))
            return false;
        dst->cap_ev = c;
    }
    if (nb > dst->cap_blk) {
        if (!FIT(blk_ev0, cap_blk, nb) || !FIT(blk_nev, cap_blk, nb))
            return false;
        dst->cap_blk = c;
    }
#undef FIT
    if (!grow(&dst->colls, &dst->cap_colls, src->n_colls, sizeof *dst->colls, src->n_colls) ||
        !grow(&dst->ev_dep, &dst->cap_dep, src->n_dep, sizeof *dst->ev_dep, src->n_dep))
        return false;
#define COPY(field, n)                                                                                         \
    do {                                                                                                       \
        if (n)                                                                                                 \
            memcpy(dst->field, src->field, (n) * sizeof *dst->field);                                          \
    } while (0)
    COPY(flops, ni);
    COPY(mm, ni);
    COPY(bytes, ni);
    COPY(mdim, ni);
    COPY(ndim, ni);
    COPY(runs, ni);
    COPY(prec, ni);
    COPY(ops, ni);
    COPY(ev_kind, ne);
    COPY(ev_ref, ne);
    COPY(ev_dep0, ne ? ne + 1 : 0);
    COPY(blk_ev0, nb);
    COPY(blk_nev, nb);
    COPY(colls, src->n_colls);
    COPY(ev_dep, src->n_dep);
#undef COPY
    dst->n_items = ni;
    dst->n_colls = src->n_colls;
    dst->n_ev = ne;
    dst->n_dep = src->n_dep;
    dst->n_blk = nb;
    dst->flops_total = src->flops_total;
    dst->bytes_total = src->bytes_total;
    dst->matmul_flops = src->matmul_flops;
    return true;
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

bool cost__grow_events(cost_program *p)
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
    return true;
}

bool cost__grow_deps(cost_program *p)
{
    return grow(&p->ev_dep, &p->cap_dep, p->n_dep + 1, sizeof *p->ev_dep, 4096);
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
