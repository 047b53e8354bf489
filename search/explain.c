/*
 * explain.c - why the search chose its answer: each decision on the path
 * to the best state with the alternatives tried at that point and what
 * each would have changed (step time, peak memory), what blocked
 * propagation in the result, what fills memory at the best state's peak
 * by category (parameters, optimizer state, activations, ...) and, when
 * the memory limit binds, the values that make up the peak.  As JSON and
 * as text for a terminal.
 */
#include "search_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ALTERNATIVES 8
#define MAX_BLOCKED 8
#define MAX_PEAK_VALUES 10

static void put(json_t *o, const char *k, json_t *v)
{
    if (v)
        json_object_set_new(o, k, v);
}

static json_t *cost_pair(double runtime, int64_t peak)
{
    json_t *o = json_object();
    if (o) {
        put(o, "runtime_s", json_real(runtime));
        put(o, "peak_memory_bytes", json_integer(peak));
    }
    return o;
}

/* 1.50 GiB, 12.00 MiB, 512 B */
static void put_bytes(ap_buf *b, double v)
{
    char s[32];
    ap_buf_puts(b, ap_format_bytes(v, s, sizeof s));
}

static void put_seconds(ap_buf *b, double s)
{
    double a = fabs(s);
    if (a >= 1)
        ap_buf_printf(b, "%.3f s", s);
    else if (a >= 1e-3)
        ap_buf_printf(b, "%.3f ms", s * 1e3);
    else
        ap_buf_printf(b, "%.3f us", s * 1e6);
}

static void put_delta(ap_buf *b, double dt, double dm)
{
    ap_buf_puts(b, dt > 0 ? "+" : "");
    put_seconds(b, dt);
    ap_buf_puts(b, ", memory ");
    ap_buf_puts(b, dm > 0 ? "+" : "");
    put_bytes(b, dm);
}

typedef struct alt {
    uint32_t decision;
    uint32_t child; /* SEARCH_NONE: refused or unchanged */
    double runtime;
} alt;

static int cmp_alt(const void *a, const void *b)
{
    const alt *x = a, *y = b;
    bool px = x->child == SEARCH_NONE, py = y->child == SEARCH_NONE;
    if (px != py)
        return px ? 1 : -1;
    if (x->runtime != y->runtime)
        return x->runtime < y->runtime ? -1 : 1;
    return x->decision < y->decision ? -1 : x->decision > y->decision;
}

static const char *block_kind_name(ir_block_kind k)
{
    switch (k) {
    case IR_BLK_CONFLICT: return "conflict";
    case IR_BLK_AXIS_USED: return "axis_used";
    case IR_BLK_INDIVISIBLE: return "indivisible";
    case IR_BLK_ATOMIC: return "atomic";
    case IR_BLK_DYNAMIC: return "dynamic";
    case IR_BLK_NO_RULE: return "no_rule";
    }
    return "?";
}

/* "stablehlo.dot_general at 85:5 "name"" */
static void op_desc(const ir_op *op, char *buf, size_t n)
{
    const char *name = op->loc ? ir_loc_name(op->loc) : NULL;
    if (op->src_line)
        snprintf(buf, n, "%s at %u:%u%s%s%s", op->name, op->src_line, op->src_col, name ? " \"" : "",
                 name ? name : "", name ? "\"" : "");
    else
        snprintf(buf, n, "%s%s%s%s", op->name, name ? " \"" : "", name ? name : "", name ? "\"" : "");
}

static void value_desc(const ir_pctx *c, uint32_t v, char *buf, size_t n)
{
    int32_t k = ir_pctx_value_op(c, v);
    if (k < 0) {
        const char *s = ir_func_arg_name(ir_pctx_func(c), v);
        if (s)
            snprintf(buf, n, "argument %s", s);
        else
            snprintf(buf, n, "argument %%arg%u", v);
        return;
    }
    char d[256];
    op_desc(ir_pctx_op(c, (uint32_t)k), d, sizeof d);
    snprintf(buf, n, "result of %s", d);
}

int search__explain(const search_tree_view *t, search_result *r, ap_error *err)
{
    const ir_pctx *c = ir_partition_ctx(t->best_state);
    json_t *root = json_object(), *decs = json_array();
    ap_buf tx;
    ap_buf_init(&tx);
    if (!root || !decs) {
        json_decref(root);
        json_decref(decs);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    const search_node *nodes = t->nodes;
    put(root, "start", cost_pair(nodes[0].runtime_s, nodes[0].peak));
    put(root, "decisions", decs);
    ap_buf_puts(&tx, "start: ");
    put_seconds(&tx, nodes[0].runtime_s);
    ap_buf_puts(&tx, ", peak ");
    put_bytes(&tx, (double)nodes[0].peak);
    ap_buf_putc(&tx, '\n');
    /* the path to the best state, top down */
    uint32_t chain[256], depth = 0;
    for (uint32_t x = t->best; x != 0 && x != SEARCH_NONE && depth < 256; x = nodes[x].parent)
        chain[depth++] = x;
    if (depth == 0)
        ap_buf_puts(&tx, "no action improves on the start state\n");
    alt *alts = NULL;
    uint32_t cap_alts = 0;
    for (uint32_t i = depth; i-- > 0;) {
        const search_node *ch = &nodes[chain[i]], *pa = &nodes[ch->parent];
        ap_buf ab;
        ap_buf_init(&ab);
        search__action_text(t->units, t->mesh, t->decisions[ch->decision].a, &ab);
        json_t *d = json_object();
        if (!d)
            break;
        json_array_append_new(decs, d);
        put(d, "depth", json_integer(ch->depth));
        put(d, "action", json_string(ab.data ? ab.data : ""));
        put(d, "before", cost_pair(pa->runtime_s, pa->peak));
        put(d, "after", cost_pair(ch->runtime_s, ch->peak));
        put(d, "delta", cost_pair(ch->runtime_s - pa->runtime_s, ch->peak - pa->peak));
        put(d, "found_at_episode", json_integer(ch->episode));
        ap_buf_printf(&tx, "%u. %s\n   ", ch->depth, ab.data ? ab.data : "");
        put_delta(&tx, ch->runtime_s - pa->runtime_s, (double)(ch->peak - pa->peak));
        ap_buf_puts(&tx, "  -> ");
        put_seconds(&tx, ch->runtime_s);
        ap_buf_puts(&tx, ", peak ");
        put_bytes(&tx, (double)ch->peak);
        ap_buf_putc(&tx, '\n');
        ap_buf_free(&ab);
        /* the alternatives tried at the parent */
        if (pa->n_edges > cap_alts) {
            alt *na = ap_realloc(alts, sizeof *na * pa->n_edges);
            if (!na)
                break;
            alts = na;
            cap_alts = pa->n_edges;
        }
        uint32_t n_alt = 0, evaluated = 0, pruned = 0;
        for (uint32_t k = 0; k < pa->n_edges; k++) {
            const search_edge *e = &pa->edges[k];
            if (e->child == chain[i] && e->decision == ch->decision)
                continue;
            alts[n_alt++] = (alt){e->decision, e->child, e->child != SEARCH_NONE ? nodes[e->child].runtime_s : 0};
            evaluated += e->child != SEARCH_NONE;
            pruned += e->child == SEARCH_NONE;
        }
        qsort(alts, n_alt, sizeof *alts, cmp_alt);
        json_t *ja = json_array();
        put(d, "alternatives_tried", json_integer(evaluated));
        put(d, "alternatives_pruned", json_integer(pruned));
        put(d, "alternatives", ja);
        if (evaluated)
            ap_buf_printf(&tx, "   %u alternative%s tried here%s:\n", evaluated, evaluated > 1 ? "s" : "",
                          evaluated > MAX_ALTERNATIVES ? " (the best shown)" : "");
        for (uint32_t k = 0; k < n_alt && k < MAX_ALTERNATIVES && ja; k++) {
            if (alts[k].child == SEARCH_NONE)
                break;
            const search_node *an = &nodes[alts[k].child];
            ap_buf ob;
            ap_buf_init(&ob);
            search__action_text(t->units, t->mesh, t->decisions[alts[k].decision].a, &ob);
            json_t *o = json_object();
            if (o) {
                put(o, "action", json_string(ob.data ? ob.data : ""));
                put(o, "delta", cost_pair(an->runtime_s - pa->runtime_s, an->peak - pa->peak));
                put(o, "best_below", json_real(an->best));
                json_array_append_new(ja, o);
            }
            ap_buf_printf(&tx, "     %-64s ", ob.data ? ob.data : "");
            put_delta(&tx, an->runtime_s - pa->runtime_s, (double)(an->peak - pa->peak));
            ap_buf_putc(&tx, '\n');
            ap_buf_free(&ob);
        }
        if (pruned)
            ap_buf_printf(&tx, "   %u refused or changing nothing\n", pruned);
    }
    ap_free(alts);
    /* what blocked propagation */
    uint32_t nb;
    const ir_blocked *bl = ir_partition_blocked(t->best_state, &nb);
    json_t *jb = json_object(), *kinds = json_object(), *ex = json_array();
    put(root, "blocked", jb);
    if (jb) {
        put(jb, "count", json_integer(nb));
        put(jb, "by_kind", kinds);
        put(jb, "examples", ex);
    }
    int by_kind[IR_BLK_NO_RULE + 1] = {0};
    for (uint32_t i = 0; i < nb; i++)
        by_kind[bl[i].kind]++;
    for (int k = 0; k <= IR_BLK_NO_RULE && kinds; k++)
        if (by_kind[k])
            put(kinds, block_kind_name((ir_block_kind)k), json_integer(by_kind[k]));
    ap_buf_printf(&tx, "blocked propagation: %u", nb);
    const char *sep = " (";
    for (int k = 0; k <= IR_BLK_NO_RULE; k++)
        if (by_kind[k]) {
            ap_buf_printf(&tx, "%s%s %d", sep, block_kind_name((ir_block_kind)k), by_kind[k]);
            sep = ", ";
        }
    ap_buf_puts(&tx, nb ? ")\n" : "\n");
    for (uint32_t i = 0; i < nb && i < MAX_BLOCKED && ex; i++) {
        char d[300];
        const ir_op *op = bl[i].op < ir_pctx_num_ops(c) ? ir_pctx_op(c, bl[i].op) : NULL;
        if (op)
            op_desc(op, d, sizeof d);
        else
            snprintf(d, sizeof d, "a tiling or atomic action");
        json_t *o = json_object();
        if (o) {
            put(o, "op", json_string(d));
            put(o, "kind", json_string(block_kind_name(bl[i].kind)));
            put(o, "axis", json_string(t->mesh->names[bl[i].axis]));
            put(o, "why", json_string(bl[i].why));
            json_array_append_new(ex, o);
        }
        ap_buf_printf(&tx, "  %s (along %s): %s\n", d, t->mesh->names[bl[i].axis], bl[i].why);
    }
    /* memory */
    const search_node *best = &nodes[t->best];
    bool binds = false;
    if (t->memory_limit >= 0) {
        binds = t->none_fits;
        for (uint32_t i = 0; i < t->n_nodes && !binds; i++)
            binds = (double)nodes[i].peak > t->memory_limit && nodes[i].runtime_s < best->runtime_s;
    }
    json_t *jm = json_object();
    put(root, "memory", jm);
    if (jm) {
        put(jm, "limit_bytes", t->memory_limit >= 0 ? json_integer((json_int_t)t->memory_limit) : json_null());
        put(jm, "peak_bytes", json_integer(best->peak));
        put(jm, "binds", json_boolean(binds));
    }
    if (t->memory_limit >= 0) {
        ap_buf_puts(&tx, "memory: peak ");
        put_bytes(&tx, (double)best->peak);
        ap_buf_puts(&tx, " of a ");
        put_bytes(&tx, t->memory_limit);
        ap_buf_printf(&tx, " limit%s\n", t->none_fits        ? ": nothing found fits; this is the lowest-memory schedule"
                                         : binds ? ": it binds (faster schedules found need more)"
                                                 : "");
    }
    /* what fills memory at the best state's peak, by category */
    const cost_memory *mm = &r->report.memory;
    if (mm->at_op[0] && r->report.peak_memory_bytes == best->peak) {
        json_t *jk = json_object();
        put(jm, "kinds", jk);
        ap_buf_printf(&tx, "  at the peak (%s", mm->at_op);
        if (mm->at_line)
            ap_buf_printf(&tx, " at %u:%u", mm->at_line, mm->at_col);
        ap_buf_puts(&tx, "):");
        bool first = true;
        for (int k = 0; k < COST_MEM_COUNT; k++) {
            if (!mm->kinds[k])
                continue;
            char key[32];
            snprintf(key, sizeof key, "%s", cost_mem_kind_name((cost_mem_kind)k));
            for (char *q = key; *q; q++)
                if (*q == ' ')
                    *q = '_';
            if (jk)
                put(jk, key, json_integer(mm->kinds[k]));
            ap_buf_printf(&tx, "%s %s ", first ? "" : ",", cost_mem_kind_name((cost_mem_kind)k));
            put_bytes(&tx, (double)mm->kinds[k]);
            first = false;
        }
        ap_buf_putc(&tx, '\n');
        if (jm)
            put(jm, "at", json_pack("{s:s, s:i, s:i}", "op", mm->at_op, "line", (json_int_t)mm->at_line, "col",
                                    (json_int_t)mm->at_col));
    }
    if (binds && t->scorer) {
        cost_peak_value pv[MAX_PEAK_VALUES];
        int64_t other = 0;
        int n = cost_scorer_peak_values(t->scorer, pv, MAX_PEAK_VALUES, &other);
        json_t *jv = json_array();
        put(jm, "peak_values", jv);
        put(jm, "other_bytes", json_integer(other));
        ap_buf_puts(&tx, "  live at the peak:\n");
        for (int i = 0; i < n; i++) {
            char d[400];
            if (pv[i].kind == COST_PEAK_OTHER) {
                snprintf(d, sizeof d, "per-device offset tables");
            } else {
                char vd[320];
                value_desc(c, pv[i].value, vd, sizeof vd);
                snprintf(d, sizeof d, "%s%s", pv[i].kind == COST_PEAK_COPY ? "a redistributed copy of " : "", vd);
            }
            json_t *o = json_object();
            if (o && jv) {
                put(o, "value", json_string(d));
                put(o, "bytes", json_integer(pv[i].bytes));
                json_array_append_new(jv, o);
            }
            ap_buf_puts(&tx, "    ");
            put_bytes(&tx, (double)pv[i].bytes);
            ap_buf_printf(&tx, "  %s\n", d);
        }
        if (other) {
            ap_buf_puts(&tx, "    ");
            put_bytes(&tx, (double)other);
            ap_buf_puts(&tx, "  everything else\n");
        }
    }
    if (tx.oom) {
        ap_buf_free(&tx);
        json_decref(root);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    r->explanation = root;
    r->explanation_text = ap_buf_take(&tx, NULL);
    return 0;
}

json_t *search_result_json(const search_result *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    put(o, "schedule", json_string(r->schedule ? r->schedule : ""));
    put(o, "actions", json_string(r->actions ? r->actions : ""));
    json_t *rep = cost_report_to_json(&r->report);
    if (rep) {
        json_t *cost = json_object_get(rep, "cost");
        if (cost) {
            put(o, "cost", json_incref(cost));
            json_t *colls = json_object_get(cost, "collectives");
            if (colls)
                put(o, "collectives", json_incref(colls));
        }
        json_decref(rep);
    }
    json_t *st = cost_report_to_json(&r->start);
    if (st) {
        json_t *cost = json_object_get(st, "cost");
        if (cost)
            put(o, "start_cost", json_incref(cost));
        json_decref(st);
    }
    put(o, "episodes", json_integer(r->episodes));
    put(o, "episodes_per_s", json_real(r->episodes_per_s));
    put(o, "best_episode", json_integer(r->best_episode));
    put(o, "wall_s", json_real(r->wall_s));
    put(o, "best_wall_s", json_real(r->best_wall_s));
    put(o, "tree_nodes", json_integer((json_int_t)r->tree_nodes));
    put(o, "fits", json_boolean(r->fits));
    put(o, "none_fits", json_boolean(r->none_fits));
    put(o, "memory_limit_bytes", r->memory_limit >= 0 ? json_integer((json_int_t)r->memory_limit) : json_null());
    put(o, "stopped_by", json_string(r->stopped_by ? r->stopped_by : ""));
    json_t *en = json_object();
    if (en) {
        put(en, "scored", json_integer(r->scored));
        put(en, "known_states", json_integer(r->known));
        put(en, "refused", json_integer(r->refused));
        put(en, "unchanged", json_integer(r->unchanged));
        put(en, "replayed_actions", json_integer(r->replays));
        put(en, "cache_hits", json_integer(r->cache_hits));
        put(en, "cached_states", json_integer(r->cached_states));
        put(en, "batch_s", json_real(r->batch_s));
        put(en, "busy_s", json_real(r->busy_s));
        put(en, "state_s", json_real(r->state_s));
        put(en, "apply_s", json_real(r->apply_s));
        put(en, "score_s", json_real(r->score_s));
        put(en, "wait_s", json_real(r->wait_s));
        put(en, "imbalance_s", json_real(r->imbalance_s));
        put(en, "worker_cpu_s", json_real(r->worker_cpu_s));
        put(o, "engine", en);
    }
    json_t *d = json_object();
    if (d) {
        put(d, "before", json_integer(r->decisions_before));
        put(d, "units", json_integer(r->units));
        put(d, "after", json_integer(r->decisions_after));
        put(o, "decisions", d);
    }
    if (r->ctx) {
        ap_buf b;
        ap_buf_init(&b);
        ir_mesh_format(ir_pctx_mesh(r->ctx), &b);
        put(o, "mesh", json_string(b.data ? b.data : ""));
        ap_buf_free(&b);
        put(o, "meshes", search__meshes_json(r));
    }
    if (r->explanation)
        put(o, "explanation", json_incref(r->explanation));
    return o;
}

json_t *search__meshes_json(const search_result *r)
{
    json_t *a = json_array();
    for (int i = 0; a && i < r->n_meshes; i++) {
        const search_mesh_row *m = &r->meshes[i];
        json_t *o = json_object();
        if (!o)
            break;
        ap_buf b;
        ap_buf_init(&b);
        ir_mesh_format(&m->mesh, &b);
        put(o, "mesh", json_string(b.data ? b.data : ""));
        ap_buf_free(&b);
        json_t *sizes = json_array();
        for (int k = 0; sizes && k < m->mesh.n_axes; k++)
            json_array_append_new(sizes, json_integer(m->mesh.sizes[k]));
        put(o, "shape", sizes);
        put(o, "runtime_s", json_real(m->runtime_s));
        put(o, "peak_memory_bytes", json_integer(m->peak_bytes));
        put(o, "fits", json_boolean(m->fits));
        put(o, "episodes", json_integer(m->episodes));
        put(o, "chosen", json_boolean(m->chosen));
        json_array_append_new(a, o);
    }
    return a;
}
