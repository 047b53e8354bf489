/*
 * explain.c - why the search chose its answer: each decision on the path
 * to the best state with the alternatives tried at that point and what
 * each would have changed (step time, peak memory), what blocked
 * propagation in the result, what fills memory at the best state's peak
 * by category (parameters, optimizer state, activations, ...) as the
 * framework the search counted for holds it (XLA's buffer assignment or
 * eager PyTorch) and, when the memory limit binds, the values that make up
 * the peak, and the manual tactics along an axis of size 1 on the mesh
 * (data=1 when the search over meshes chose it, or as asked), which split
 * nothing there; when the start is the answer, the best state the search
 * scored that changes the step, and by how much it loses.  Built as
 * JSON with every value (search__explain); the text for people is made from
 * that JSON (search_explanation_text), so that a client holding a stored
 * answer prints it as the search does, folded or --verbose.
 */
#include "search_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPLAIN_FORMAT 2      /* the JSON's "format": what search_explanation_text reads */
#define SHOWN_ALTERNATIVES 3  /* per decision, unless verbose */
#define SHOWN_BLOCKED 3       /* patterns of blocked propagation, unless verbose */
#define MAX_PEAK_VALUES 10
#define SHOWN_IDLE 3          /* actions per idle axis, unless verbose */

static void put(json_t *o, const char *k, json_t *v)
{
    if (v)
        json_object_set_new(o, k, v);
}

/* A number, or null where it is not finite (a subtree with no state
 * scored has best = inf): jansson has no infinity, and a NULL from
 * json_real made json_pack fail, which read as "out of memory". */
static json_t *real_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *cost_pair(double runtime, int64_t peak)
{
    json_t *o = json_object();
    if (o) {
        put(o, "runtime_s", real_or_null(runtime));
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

/* ========================================================= the JSON */

/* One decision on the path: what it changed, and every alternative tried
 * at its parent, best first.  *alts grows to the parent's edges. */
static int explain_decision(const search_tree_view *t, uint32_t node, alt **alts, uint32_t *cap, json_t *decs)
{
    const search_node *nodes = t->nodes, *ch = &nodes[node], *pa = &nodes[ch->parent];
    json_t *d = json_object(), *ja = json_array();
    if (!d || !ja || json_array_append(decs, d) < 0) {
        json_decref(d);
        json_decref(ja);
        return AP_ENOMEM;
    }
    json_decref(d); /* decs holds it */
    ap_buf ab;
    ap_buf_init(&ab);
    search__action_text(t->units, t->mesh, t->decisions[ch->decision].a, &ab);
    put(d, "depth", json_integer(ch->depth));
    put(d, "action", json_string(ab.data ? ab.data : ""));
    ap_buf_free(&ab);
    put(d, "before", cost_pair(pa->runtime_s, pa->peak));
    put(d, "after", cost_pair(ch->runtime_s, ch->peak));
    put(d, "delta", cost_pair(ch->runtime_s - pa->runtime_s, ch->peak - pa->peak));
    put(d, "found_at_episode", json_integer(ch->episode));
    if (pa->n_edges > *cap) {
        alt *na = ap_realloc(*alts, sizeof *na * pa->n_edges);
        if (!na) {
            json_decref(ja);
            return AP_ENOMEM;
        }
        *alts = na;
        *cap = pa->n_edges;
    }
    uint32_t n_alt = 0, evaluated = 0;
    for (uint32_t k = 0; k < pa->n_edges; k++) {
        const search_edge *e = &pa->edges[k];
        if (e->child == node && e->decision == ch->decision)
            continue;
        (*alts)[n_alt++] = (alt){e->decision, e->child, e->child != SEARCH_NONE ? nodes[e->child].runtime_s : 0};
        evaluated += e->child != SEARCH_NONE;
    }
    qsort(*alts, n_alt, sizeof **alts, cmp_alt);
    put(d, "alternatives_tried", json_integer(evaluated));
    put(d, "alternatives_pruned", json_integer(n_alt - evaluated));
    put(d, "alternatives", ja);
    for (uint32_t k = 0; k < evaluated; k++) {
        const search_node *an = &nodes[(*alts)[k].child];
        ap_buf ob;
        ap_buf_init(&ob);
        search__action_text(t->units, t->mesh, t->decisions[(*alts)[k].decision].a, &ob);
        json_t *o = json_pack("{s:s, s:o, s:o}", "action", ob.data ? ob.data : "", "delta",
                              cost_pair(an->runtime_s - pa->runtime_s, an->peak - pa->peak), "best_below",
                              real_or_null(an->best));
        ap_buf_free(&ob);
        if (!o || json_array_append_new(ja, o) < 0)
            return AP_ENOMEM;
    }
    return 0;
}

/* What blocked propagation at the best state: the count by kind, and one
 * group per pattern (op, kind, axis, reason, location name) with every op's
 * place, in the order of each pattern's first. */
static int explain_blocked(const search_tree_view *t, json_t *root)
{
    const ir_pctx *c = ir_partition_ctx(t->best_state);
    uint32_t nb;
    const ir_blocked *bl = ir_partition_blocked(t->best_state, &nb);
    json_t *jb = json_object(), *kinds = json_object(), *groups = json_array();
    put(root, "blocked", jb);
    if (!jb || !kinds || !groups) {
        json_decref(kinds);
        json_decref(groups);
        return AP_ENOMEM;
    }
    put(jb, "count", json_integer(nb));
    put(jb, "by_kind", kinds);
    put(jb, "groups", groups);
    int by_kind[IR_BLK_NO_RULE + 1] = {0};
    for (uint32_t i = 0; i < nb; i++)
        by_kind[bl[i].kind]++;
    for (int k = 0; k <= IR_BLK_NO_RULE; k++)
        if (by_kind[k])
            put(kinds, block_kind_name((ir_block_kind)k), json_integer(by_kind[k]));
    for (uint32_t i = 0; i < nb; i++) {
        const ir_op *op = bl[i].op < ir_pctx_num_ops(c) ? ir_pctx_op(c, bl[i].op) : NULL;
        const char *name = op && op->loc ? ir_loc_name(op->loc) : NULL;
        const char *opn = op ? op->name : "a tiling or atomic action", *axis = t->mesh->names[bl[i].axis];
        const char *kind = block_kind_name(bl[i].kind);
        json_t *g = NULL;
        for (size_t k = json_array_size(groups); k-- > 0 && !g;) {
            json_t *h = json_array_get(groups, k);
            if (!strcmp(json_string_value(json_object_get(h, "op")), opn) &&
                !strcmp(json_string_value(json_object_get(h, "kind")), kind) &&
                !strcmp(json_string_value(json_object_get(h, "axis")), axis) &&
                !strcmp(json_string_value(json_object_get(h, "why")), bl[i].why) &&
                !strcmp(json_string_value(json_object_get(h, "name")), name ? name : ""))
                g = h;
        }
        if (!g) {
            g = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:[]}", "op", opn, "kind", kind, "axis", axis, "why",
                          bl[i].why, "name", name ? name : "", "count", (json_int_t)0, "places");
            if (!g || json_array_append_new(groups, g) < 0)
                return AP_ENOMEM;
        }
        json_object_set_new(g, "count", json_integer(json_integer_value(json_object_get(g, "count")) + 1));
        if (op && op->src_line &&
            json_array_append_new(json_object_get(g, "places"),
                                  json_pack("{s:i, s:i}", "line", (json_int_t)op->src_line, "col",
                                            (json_int_t)op->src_col)) < 0)
            return AP_ENOMEM;
    }
    return 0;
}

/* The memory at the best state: the limit, whether it binds, which
 * framework's count it is ("framework": cost_framework_name, the report's
 * and the search's alike), what fills the peak by category (when the
 * report's peak is the search's), and when it binds the values live there. */
static int explain_memory(const search_tree_view *t, const search_result *r, json_t *root)
{
    const search_node *nodes = t->nodes, *best = &nodes[t->best];
    bool binds = false;
    if (t->memory_limit >= 0) {
        binds = t->none_fits;
        for (uint32_t i = 0; i < t->n_nodes && !binds; i++)
            binds = (double)nodes[i].peak > t->memory_limit && nodes[i].runtime_s < best->runtime_s;
    }
    json_t *jm = json_object();
    put(root, "memory", jm);
    if (!jm)
        return AP_ENOMEM;
    put(jm, "limit_bytes", t->memory_limit >= 0 ? json_integer((json_int_t)t->memory_limit) : json_null());
    put(jm, "peak_bytes", json_integer(best->peak));
    put(jm, "framework", json_string(cost_framework_name((cost_framework)r->report.memory.framework)));
    put(jm, "binds", json_boolean(binds));
    put(jm, "none_fits", json_boolean(t->none_fits));
    const cost_memory *mm = &r->report.memory;
    if (mm->at_op[0] && r->report.peak_memory_bytes == best->peak) {
        json_t *jk = json_object();
        put(jm, "kinds", jk);
        for (int k = 0; jk && k < COST_MEM_COUNT; k++) {
            if (!mm->kinds[k])
                continue;
            char key[32];
            snprintf(key, sizeof key, "%s", cost_mem_kind_name((cost_mem_kind)k));
            for (char *q = key; *q; q++)
                if (*q == ' ')
                    *q = '_';
            put(jk, key, json_integer(mm->kinds[k]));
        }
        put(jm, "at", json_pack("{s:s, s:i, s:i}", "op", mm->at_op, "line", (json_int_t)mm->at_line, "col",
                                (json_int_t)mm->at_col));
    }
    if (!binds || !t->scorer)
        return 0;
    const ir_pctx *c = ir_partition_ctx(t->best_state);
    cost_peak_value pv[MAX_PEAK_VALUES];
    int64_t other = 0;
    int n = cost_scorer_peak_values(t->scorer, pv, MAX_PEAK_VALUES, &other);
    json_t *jv = json_array();
    put(jm, "peak_values", jv);
    put(jm, "other_bytes", json_integer(other));
    for (int i = 0; jv && i < n; i++) {
        /* {"bytes", "what": result|copy|argument|other, "op" or "argument", line, col, name} */
        static const char *const what[] = {"argument", "result", "copy", "other"};
        json_t *o = json_pack("{s:I, s:s}", "bytes", (json_int_t)pv[i].bytes, "what", what[pv[i].kind & 3]);
        if (!o || json_array_append_new(jv, o) < 0)
            return AP_ENOMEM;
        int32_t k = pv[i].kind == COST_PEAK_OTHER ? -1 : ir_pctx_value_op(c, pv[i].value);
        if (k >= 0) {
            const ir_op *op = ir_pctx_op(c, (uint32_t)k);
            const char *name = op->loc ? ir_loc_name(op->loc) : NULL;
            put(o, "op", json_string(op->name));
            put(o, "line", json_integer(op->src_line));
            put(o, "col", json_integer(op->src_col));
            put(o, "name", json_string(name ? name : ""));
        } else if (pv[i].kind != COST_PEAK_OTHER) {
            const char *a = ir_func_arg_name(ir_pctx_func(c), pv[i].value);
            char an[32];
            snprintf(an, sizeof an, "%%arg%u", pv[i].value);
            put(o, "argument", json_string(a ? a : an));
        }
    }
    return 0;
}

/* The start's actions (the manual tactics, or shardings imported) along
 * an axis of size 1: they split nothing, which a user who wrote them would
 * not otherwise see, since a search over meshes may well choose data=1.
 * "idle_tactics": [{"axis", "actions": [text as the schedule has it]}],
 * only when there are some. */
static int explain_idle(const search_tree_view *t, json_t *root)
{
    if (!t->start)
        return 0;
    ap_buf b;
    ap_buf_init(&b);
    ir_partition_schedule(t->start, &b);
    if (b.oom) {
        ap_buf_free(&b);
        return AP_ENOMEM;
    }
    json_t *idle = NULL;
    int rc = 0;
    for (const char *line = b.data; line && *line && rc == 0;) {
        size_t len = strcspn(line, "\n");
        /* "tile V DIM AXIS" or "atomic V AXIS": the axis is the last word
         * (the longest axis name that ends the line, for names with spaces) */
        int axis = -1;
        size_t best = 0;
        if (!strncmp(line, "tile ", 5) || !strncmp(line, "atomic ", 7))
            for (int a = 0; a < t->mesh->n_axes; a++) {
                size_t n = strlen(t->mesh->names[a]);
                if (n > best && n < len && line[len - n - 1] == ' ' &&
                    !memcmp(line + len - n, t->mesh->names[a], n)) {
                    axis = a;
                    best = n;
                }
            }
        if (axis >= 0 && t->mesh->sizes[axis] == 1) {
            const char *name = t->mesh->names[axis];
            json_t *g = NULL, *h;
            size_t k;
            if (!idle && !(idle = json_array()))
                rc = AP_ENOMEM;
            json_array_foreach(idle, k, h) if (!strcmp(json_string_value(json_object_get(h, "axis")), name)) g = h;
            if (rc == 0 && !g && (!(g = json_pack("{s:s, s:[]}", "axis", name, "actions")) ||
                                  json_array_append_new(idle, g) < 0))
                rc = AP_ENOMEM;
            if (rc == 0 && json_array_append_new(json_object_get(g, "actions"), json_stringn(line, len)) < 0)
                rc = AP_ENOMEM;
        }
        line += len + (line[len] == '\n');
    }
    ap_buf_free(&b);
    if (idle)
        put(root, "idle_tactics", idle);
    return rc;
}

/* When the start is the answer: the best other state the search scored
 * (the highest reward below the root; the earlier found on a tie), with
 * the actions that lead to it, so that "nothing better than the start"
 * says by how much the best sharded schedule loses.  States that cost
 * what the start does (atomic actions, tilings along an axis of size 1)
 * are left out: they change nothing the model sees.  "best_other":
 * {"runtime_s", "peak_memory_bytes", "delta", "states" (those that change
 * the cost), "actions"}; none when the search scored no such state. */
uint32_t search__best_other(const search_node *nodes, uint32_t n, uint32_t *states)
{
    uint32_t k = SEARCH_NONE, count = 0;
    for (uint32_t i = 1; i < n; i++) {
        if (nodes[i].runtime_s == nodes[0].runtime_s && nodes[i].peak == nodes[0].peak)
            continue;
        count++;
        if (k == SEARCH_NONE || nodes[i].reward > nodes[k].reward)
            k = i;
    }
    if (states)
        *states = count;
    return k;
}

static int explain_best_other(const search_tree_view *t, json_t *root)
{
    const search_node *nodes = t->nodes;
    uint32_t states, k = search__best_other(nodes, t->n_nodes, &states);
    if (k == SEARCH_NONE)
        return 0;
    json_t *o = json_object(), *acts = json_array();
    if (!o || !acts || json_object_set_new(root, "best_other", o) < 0) {
        json_decref(o);
        json_decref(acts);
        return AP_ENOMEM;
    }
    put(o, "runtime_s", json_real(nodes[k].runtime_s));
    put(o, "peak_memory_bytes", json_integer(nodes[k].peak));
    put(o, "delta", cost_pair(nodes[k].runtime_s - nodes[0].runtime_s, nodes[k].peak - nodes[0].peak));
    put(o, "states", json_integer(states));
    put(o, "actions", acts);
    uint32_t chain[256], depth = 0;
    for (uint32_t x = k; x != 0 && x != SEARCH_NONE && depth < 256; x = nodes[x].parent)
        chain[depth++] = x;
    for (uint32_t i = depth; i-- > 0;) {
        ap_buf ab;
        ap_buf_init(&ab);
        search__action_text(t->units, t->mesh, t->decisions[nodes[chain[i]].decision].a, &ab);
        int rc = ab.oom || json_array_append_new(acts, json_string(ab.data ? ab.data : "")) < 0 ? AP_ENOMEM : 0;
        ap_buf_free(&ab);
        if (rc)
            return rc;
    }
    return 0;
}

int search__explain(const search_tree_view *t, search_result *r, ap_error *err)
{
    json_t *root = json_object(), *decs = json_array();
    const search_node *nodes = t->nodes;
    alt *alts = NULL;
    uint32_t cap = 0;
    int rc = root && decs ? 0 : AP_ENOMEM;
    if (rc == 0) {
        put(root, "format", json_integer(EXPLAIN_FORMAT));
        put(root, "start", cost_pair(nodes[0].runtime_s, nodes[0].peak));
        put(root, "decisions", decs);
        decs = NULL;
        /* the path to the best state, top down */
        uint32_t chain[256], depth = 0;
        for (uint32_t x = t->best; x != 0 && x != SEARCH_NONE && depth < 256; x = nodes[x].parent)
            chain[depth++] = x;
        json_t *d = json_object_get(root, "decisions");
        for (uint32_t i = depth; i-- > 0 && rc == 0;)
            rc = explain_decision(t, chain[i], &alts, &cap, d);
        if (rc == 0 && depth == 0)
            rc = explain_best_other(t, root);
    }
    ap_free(alts);
    if (rc == 0)
        rc = explain_idle(t, root);
    if (rc == 0)
        rc = explain_blocked(t, root);
    if (rc == 0)
        rc = explain_memory(t, r, root);
    ap_buf tx;
    ap_buf_init(&tx);
    if (rc == 0)
        rc = search_explanation_text(root, 0, &tx);
    json_decref(decs);
    if (rc < 0) {
        ap_buf_free(&tx);
        json_decref(root);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    r->explanation = root;
    r->explanation_text = ap_buf_take(&tx, NULL);
    return 0;
}

/* ========================================================= the text */

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* "-1.419 s, memory -214.42 GiB" of a {"runtime_s", "peak_memory_bytes"} */
static void put_delta(ap_buf *b, const json_t *delta)
{
    double dt = num(delta, "runtime_s"), dm = num(delta, "peak_memory_bytes");
    ap_buf_puts(b, dt > 0 ? "+" : "");
    put_seconds(b, dt);
    ap_buf_puts(b, ", memory ");
    ap_buf_puts(b, dm > 0 ? "+" : "");
    put_bytes(b, dm);
}

/* The places of a JSON array of {"line", "col"}: every one when verbose,
 * else ap_buf_put_places's short form. */
static void put_places(ap_buf *b, const json_t *places, bool verbose)
{
    size_t n = json_array_size(places);
    uint32_t *lines = ap_malloc(sizeof *lines * (n ? n : 1)), *cols = ap_malloc(sizeof *cols * (n ? n : 1));
    if (!lines || !cols) {
        b->oom = true;
    } else {
        for (size_t i = 0; i < n; i++) {
            lines[i] = (uint32_t)num(json_array_get(places, i), "line");
            cols[i] = (uint32_t)num(json_array_get(places, i), "col");
        }
        if (verbose)
            for (size_t i = 0; i < n; i++)
                ap_buf_printf(b, "%s%u:%u", i ? ", " : "", lines[i], cols[i]);
        else
            ap_buf_put_places(b, lines, cols, n);
    }
    ap_free(lines);
    ap_free(cols);
}

static void meshes_text(const json_t *ex, ap_buf *b)
{
    const json_t *rows = json_object_get(ex, "meshes");
    ap_buf_printf(b, "meshes of %lld devices tried (%zu of the %lld the program can use), best first:\n",
                  (long long)num(ex, "devices"), json_array_size(rows), (long long)num(ex, "meshes_considered"));
    size_t i;
    const json_t *m;
    json_array_foreach(rows, i, m) {
        char peak[32];
        ap_buf_printf(b, "  %s %-32s %.6g s  %s per device%s  (%lld episodes)\n",
                      json_is_true(json_object_get(m, "chosen")) ? "*" : " ", str(m, "mesh"), num(m, "runtime_s"),
                      ap_format_bytes(num(m, "peak_memory_bytes"), peak, sizeof peak),
                      json_is_true(json_object_get(m, "fits")) ? "" : ", over the limit", (long long)num(m, "episodes"));
    }
    const json_t *untried = json_object_get(ex, "meshes_untried"), *u;
    if (json_array_size(untried)) {
        ap_buf_printf(b, "  not tried, the budget spent on those before them (%zu):", json_array_size(untried));
        json_array_foreach(untried, i, u) {
            size_t k;
            const json_t *n;
            json_array_foreach(u, k, n) ap_buf_printf(b, "%s%lld", k ? "x" : " ", (long long)json_integer_value(n));
            ap_buf_puts(b, i + 1 < json_array_size(untried) ? "," : "\n");
        }
    }
    ap_buf_puts(b, "\n");
}

/* "note: the manual (or imported) tactics along data split nothing on this mesh (data=1): ..." */
static void idle_text(const json_t *ex, bool verbose, ap_buf *b)
{
    size_t i, k;
    const json_t *g, *a;
    json_array_foreach(json_object_get(ex, "idle_tactics"), i, g) {
        const json_t *acts = json_object_get(g, "actions");
        size_t n = json_array_size(acts), shown = verbose || n <= SHOWN_IDLE + 1 ? n : SHOWN_IDLE;
        ap_buf_printf(b, "note: the manual (or imported) tactics along %s split nothing on this mesh (%s=1):", str(g, "axis"),
                      str(g, "axis"));
        json_array_foreach(acts, k, a) {
            if (k == shown)
                break;
            ap_buf_printf(b, "%s%s", k ? "; " : " ", json_string_value(a));
        }
        if (shown < n)
            ap_buf_printf(b, "; and %zu more (--verbose lists them)", n - shown);
        ap_buf_putc(b, '\n');
    }
}

static void decisions_text(const json_t *ex, bool verbose, ap_buf *b)
{
    const json_t *decs = json_object_get(ex, "decisions"), *d;
    if (json_array_size(decs) == 0) {
        ap_buf_puts(b, "no action improves on the start state");
        const json_t *o = json_object_get(ex, "best_other"), *acts = json_object_get(o, "actions"), *a;
        size_t n = json_array_size(acts), shown = verbose || n <= SHOWN_ALTERNATIVES + 1 ? n : SHOWN_ALTERNATIVES, i;
        if (o) {
            /* by how much the best sharded schedule loses, and to what */
            ap_buf_printf(b, ": the best of the %lld states it scored that change the step takes ",
                          (long long)num(o, "states"));
            put_seconds(b, num(o, "runtime_s"));
            ap_buf_puts(b, ", peak ");
            put_bytes(b, num(o, "peak_memory_bytes"));
            ap_buf_puts(b, " (");
            put_delta(b, json_object_get(o, "delta"));
            ap_buf_printf(b, "), after %zu action%s:", n, n == 1 ? "" : "s");
            json_array_foreach(acts, i, a) {
                if (i == shown)
                    break;
                ap_buf_printf(b, "\n   %s", json_string_value(a));
            }
            if (shown < n)
                ap_buf_printf(b, "\n   and %zu more (--verbose lists them)", n - shown);
        }
        ap_buf_putc(b, '\n');
    }
    size_t i;
    json_array_foreach(decs, i, d) {
        const json_t *after = json_object_get(d, "after"), *alts = json_object_get(d, "alternatives");
        ap_buf_printf(b, "%lld. %s\n   ", (long long)num(d, "depth"), str(d, "action"));
        put_delta(b, json_object_get(d, "delta"));
        ap_buf_puts(b, "  -> ");
        put_seconds(b, num(after, "runtime_s"));
        ap_buf_puts(b, ", peak ");
        put_bytes(b, num(after, "peak_memory_bytes"));
        /* the alternatives on the same line, the list under it */
        long long tried = (long long)num(d, "alternatives_tried"), pruned = (long long)num(d, "alternatives_pruned");
        size_t shown = json_array_size(alts);
        if (!verbose && shown > SHOWN_ALTERNATIVES)
            shown = SHOWN_ALTERNATIVES;
        if (tried) {
            ap_buf_printf(b, "; %lld alternative%s tried", tried, tried > 1 ? "s" : "");
            if (pruned)
                ap_buf_printf(b, ", %lld refused or changing nothing", pruned);
            if ((long long)shown < tried)
                ap_buf_printf(b, "; the best %zu:", shown);
            else
                ap_buf_puts(b, ":");
        } else if (pruned) {
            ap_buf_printf(b, "; %lld alternative%s refused or changing nothing", pruned, pruned > 1 ? "s" : "");
        }
        ap_buf_putc(b, '\n');
        for (size_t k = 0; k < shown; k++) {
            const json_t *a = json_array_get(alts, k);
            ap_buf_printf(b, "     %-64s ", str(a, "action"));
            put_delta(b, json_object_get(a, "delta"));
            ap_buf_putc(b, '\n');
        }
    }
}

static void blocked_text(const json_t *ex, bool verbose, ap_buf *b)
{
    const json_t *jb = json_object_get(ex, "blocked"), *groups = json_object_get(jb, "groups"), *v;
    ap_buf_printf(b, "blocked propagation: %lld", (long long)num(jb, "count"));
    const char *sep = " (", *k;
    json_object_foreach((json_t *)json_object_get(jb, "by_kind"), k, v) {
        ap_buf_printf(b, "%s%s %lld", sep, k, (long long)json_integer_value(v));
        sep = ", ";
    }
    ap_buf_puts(b, *sep == ',' ? ")\n" : "\n");
    size_t n = json_array_size(groups), shown = verbose || n <= SHOWN_BLOCKED + 1 ? n : SHOWN_BLOCKED;
    for (size_t i = 0; i < shown; i++) {
        const json_t *g = json_array_get(groups, i), *places = json_object_get(g, "places");
        long long count = (long long)num(g, "count");
        ap_buf_printf(b, "  %s", str(g, "op"));
        if (count > 1)
            ap_buf_printf(b, " x%lld", count);
        if (json_array_size(places)) {
            ap_buf_puts(b, " at ");
            put_places(b, places, verbose);
        }
        if (*str(g, "name"))
            ap_buf_printf(b, " \"%s\"", str(g, "name"));
        ap_buf_printf(b, "%salong %s: %s\n", json_array_size(places) || *str(g, "name") ? ", " : " ", str(g, "axis"),
                      str(g, "why"));
    }
    if (shown < n)
        ap_buf_printf(b, "  ... %zu more patterns (--verbose lists them)\n", n - shown);
}

/* "result of stablehlo.dot_general", "argument %arg3", ... of a peak value */
static void peak_value_text(const json_t *v, ap_buf *b)
{
    const char *what = str(v, "what");
    if (!strcmp(what, "other"))
        ap_buf_puts(b, "per-device offset tables");
    else if (!strcmp(what, "argument"))
        ap_buf_printf(b, "argument %s", str(v, "argument"));
    else
        ap_buf_printf(b, "%sresult of %s", !strcmp(what, "copy") ? "a redistributed copy of " : "", str(v, "op"));
}

static bool same_value(const json_t *x, const json_t *y)
{
    return num(x, "bytes") == num(y, "bytes") && !strcmp(str(x, "what"), str(y, "what")) &&
           !strcmp(str(x, "op"), str(y, "op")) && !strcmp(str(x, "argument"), str(y, "argument")) &&
           !strcmp(str(x, "name"), str(y, "name"));
}

/* "memory: peak 1.20 GiB (counted as XLA buffer assignment)": which
 * framework's count, as the cost report says it (cost_framework_text); an
 * answer stored before the explanation said it has none. */
static void memory_head(const json_t *jm, ap_buf *b)
{
    cost_framework fw;
    ap_buf_puts(b, "memory: peak ");
    put_bytes(b, num(jm, "peak_bytes"));
    if (cost_framework_parse(str(jm, "framework"), &fw, NULL) == 0)
        ap_buf_printf(b, " (counted as %s)", cost_framework_text(fw));
}

static void memory_text(const json_t *ex, unsigned flags, ap_buf *b)
{
    const json_t *jm = json_object_get(ex, "memory"), *at = json_object_get(jm, "at");
    bool above = (flags & SEARCH_TEXT_COST_ABOVE) && at, verbose = flags & SEARCH_TEXT_VERBOSE;
    bool none_fits = json_is_true(json_object_get(jm, "none_fits"));
    if (json_is_number(json_object_get(jm, "limit_bytes"))) {
        memory_head(jm, b);
        ap_buf_puts(b, " of a ");
        put_bytes(b, num(jm, "limit_bytes"));
        /* over meshes, the mesh chosen is the one whose search leads
         * nearest a fit (mesh.c), not the lowest peak of all */
        ap_buf_printf(b, " limit%s%s%s\n",
                      none_fits ? ": nothing found fits; this is the lowest-memory schedule"
                      : json_is_true(json_object_get(jm, "binds"))   ? ": it binds (faster schedules found need more)"
                                                                      : "",
                      none_fits && json_object_get(ex, "meshes") ? " of the mesh chosen" : "",
                      above ? " (what fills it: the cost estimate above)" : "");
    }
    if (above) /* the cost estimate's breakdown is this one, and lists the largest values */
        return;
    if (jm && !json_is_number(json_object_get(jm, "limit_bytes"))) {
        memory_head(jm, b);
        ap_buf_putc(b, '\n');
    }
    if (at) {
        ap_buf_printf(b, "  at the peak (%s", str(at, "op"));
        if (num(at, "line"))
            ap_buf_printf(b, " at %lld:%lld", (long long)num(at, "line"), (long long)num(at, "col"));
        ap_buf_puts(b, "):");
        const char *k;
        const json_t *v;
        bool first = true;
        json_object_foreach((json_t *)json_object_get(jm, "kinds"), k, v) {
            ap_buf_printf(b, "%s ", first ? "" : ",");
            for (const char *q = k; *q; q++) /* saved_activations: saved activations */
                ap_buf_putc(b, *q == '_' ? ' ' : *q);
            ap_buf_putc(b, ' ');
            put_bytes(b, (double)json_integer_value(v));
            first = false;
        }
        ap_buf_putc(b, '\n');
    }
    const json_t *pv = json_object_get(jm, "peak_values");
    if (!pv)
        return;
    ap_buf_puts(b, "  live at the peak:\n");
    /* folded: values of one size and op (one per layer) are one line */
    size_t n = json_array_size(pv);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(pv, i);
        bool seen = false;
        for (size_t j = 0; j < i && !verbose && !seen; j++)
            seen = same_value(json_array_get(pv, j), v);
        if (seen)
            continue;
        json_t *places = json_array();
        for (size_t j = i; j < n && places; j++) {
            const json_t *w = json_array_get(pv, j);
            if ((j == i || (!verbose && same_value(w, v))) && num(w, "line"))
                json_array_append(places, (json_t *)w);
        }
        size_t count = 1;
        for (size_t j = i + 1; j < n && !verbose; j++)
            count += same_value(json_array_get(pv, j), v);
        ap_buf_puts(b, "    ");
        put_bytes(b, num(v, "bytes"));
        if (count > 1)
            ap_buf_printf(b, " x%zu", count);
        ap_buf_puts(b, "  ");
        peak_value_text(v, b);
        if (json_array_size(places)) {
            ap_buf_puts(b, " at ");
            put_places(b, places, verbose);
        }
        if (*str(v, "name"))
            ap_buf_printf(b, " \"%s\"", str(v, "name"));
        ap_buf_putc(b, '\n');
        json_decref(places);
    }
    if (num(jm, "other_bytes")) {
        ap_buf_puts(b, "    ");
        put_bytes(b, num(jm, "other_bytes"));
        ap_buf_puts(b, "  everything else\n");
    }
}

int search_explanation_text(const json_t *ex, unsigned flags, ap_buf *out)
{
    if (num(ex, "format") != EXPLAIN_FORMAT)
        return AP_EINVALID;
    bool verbose = flags & SEARCH_TEXT_VERBOSE;
    if (json_object_get(ex, "meshes"))
        meshes_text(ex, out);
    idle_text(ex, verbose, out);
    const json_t *start = json_object_get(ex, "start");
    ap_buf_puts(out, "start: ");
    put_seconds(out, num(start, "runtime_s"));
    ap_buf_puts(out, ", peak ");
    put_bytes(out, num(start, "peak_memory_bytes"));
    ap_buf_putc(out, '\n');
    decisions_text(ex, verbose, out);
    blocked_text(ex, verbose, out);
    memory_text(ex, flags, out);
    return out->oom ? AP_ENOMEM : 0;
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
