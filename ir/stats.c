/*
 * stats.c - op counts by name over a whole module (nested regions, module
 * and functions included), for `autopart parse --stats` and the corpus
 * tests that compare them with an independent count of the text.
 */
#include "ir_int.h"

#include <stdlib.h>

typedef struct counter {
    ir_ptrmap index; /* interned name -> slot */
    ir_stats_entry *v;
    uint32_t n, cap;
    uint64_t total;
    bool oom;
} counter;

static void count_op(counter *c, const ir_op *op)
{
    uint32_t k;
    c->total++;
    if (ir__map_get(&c->index, op->name, &k)) {
        c->v[k].count++;
    } else {
        if (c->n == c->cap) {
            uint32_t cap = c->cap ? c->cap * 2 : 64;
            ir_stats_entry *v = ap_realloc(c->v, sizeof *v * cap);
            if (!v) {
                c->oom = true;
                return;
            }
            c->v = v;
            c->cap = cap;
        }
        c->v[c->n] = (ir_stats_entry){op->name, 1};
        if (!ir__map_put(&c->index, op->name, c->n)) {
            c->oom = true;
            return;
        }
        c->n++;
    }
    for (uint32_t r = 0; r < op->n_regions; r++)
        for (const ir_block *b = op->regions[r].first; b; b = b->next)
            for (const ir_op *x = b->first; x; x = x->next)
                count_op(c, x);
}

static int by_count(const void *a, const void *b)
{
    const ir_stats_entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->name, y->name);
}

int ir_stats_compute(const ir_module *m, ir_stats *out)
{
    counter c;
    memset(&c, 0, sizeof c);
    memset(out, 0, sizeof *out);
    count_op(&c, m->top);
    ir__map_free(&c.index);
    if (c.oom) {
        ap_free(c.v);
        return AP_ENOMEM;
    }
    qsort(c.v, c.n, sizeof *c.v, by_count);
    out->n_ops = c.total;
    out->n_kinds = c.n;
    out->by_name = c.v;
    return 0;
}

void ir_stats_free(ir_stats *s)
{
    ap_free(s->by_name);
    memset(s, 0, sizeof *s);
}
