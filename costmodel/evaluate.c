/*
 * evaluate.c - the per-device estimate of a prepared program (one loop over
 * its compute ops, one over its collectives) and the report's text and JSON
 * forms.  This is what the search calls once per episode, so it allocates
 * nothing and touches only the prepared arrays.
 */
#include "cost_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cost_coll_name(cost_coll_kind k)
{
    static const char *const names[COST_COLL_COUNT] = {"all_gather",         "all_reduce", "reduce_scatter",
                                                       "all_to_all",         "collective_permute",
                                                       "collective_broadcast"};
    return (unsigned)k < COST_COLL_COUNT ? names[k] : "?";
}

const char *cost_note_text(unsigned note)
{
    switch (note) {
    case COST_NOTE_NO_MESH:
        return "no autopart.mesh: each replica group is one flat group, its tier chosen by its size";
    case COST_NOTE_WHILE_ONCE:
        return "a while loop without a readable trip count is counted once";
    case COST_NOTE_BRANCHES_SUMMED:
        return "if/case: every branch is counted (an upper bound)";
    case COST_NOTE_DYNAMIC_SHAPES:
        return "dynamic shapes: values of unknown size count as 0 bytes";
    case COST_NOTE_CUSTOM_CALL:
        return "custom_call: costed by the bytes it reads and writes only";
    case COST_NOTE_UNKNOWN_OP:
        return "ops of other dialects or external calls: costed by bytes only";
    case COST_NOTE_CALL_DEPTH:
        return "calls nested deeper than 16 (or recursive) are not costed";
    case COST_NOTE_GROUP_OFF_MESH:
        return "a replica group names devices outside the mesh: costed as a flat group";
    default:
        return "";
    }
}

const char *cost_mem_kind_name(cost_mem_kind k)
{
    static const char *const names[COST_MEM_COUNT] = {"parameters",  "optimizer state",   "batch",
                                                      "outputs",     "gradients",         "saved activations",
                                                      "temporaries", "collective buffers"};
    return (unsigned)k < COST_MEM_COUNT ? names[k] : "?";
}

/* ============================================================ evaluation */

static void name_op(const ir_op *op, char *opname, size_t on, char *name, size_t nn, uint32_t *line, uint32_t *col)
{
    const char *ln = op && op->loc ? ir_loc_name(op->loc) : NULL;
    snprintf(opname, on, "%s", op && op->name ? op->name : "");
    snprintf(name, nn, "%s", ln ? ln : "");
    *line = op ? op->src_line : 0;
    *col = op ? op->src_col : 0;
}

/* The report's view of what is live at the peak. */
static void fill_memory(cost_memory *m, const cost_peak_info *pk)
{
    memset(m, 0, sizeof *m);
    memcpy(m->kinds, pk->kinds, sizeof m->kinds);
    m->order = pk->order;
    m->program_order_peak = pk->program_order_peak;
    name_op(pk->at, m->at_op, sizeof m->at_op, m->at_name, sizeof m->at_name, &m->at_line, &m->at_col);
    if (pk->in)
        name_op(pk->in, m->in_op, sizeof m->in_op, m->in_name, sizeof m->in_name, &m->in_line, &m->in_col);
    m->n_values = pk->n_values;
    for (int i = 0; i < pk->n_values && i < COST_MEM_TOP; i++) {
        cost_mem_value *v = &m->values[i];
        v->bytes = pk->values[i].bytes;
        v->kind = pk->values[i].kind;
        if (pk->values[i].op) {
            name_op(pk->values[i].op, v->op, sizeof v->op, v->name, sizeof v->name, &v->line, &v->col);
        } else {
            snprintf(v->op, sizeof v->op, "argument");
            snprintf(v->name, sizeof v->name, "%s", pk->values[i].name ? pk->values[i].name : "");
        }
    }
}


typedef struct top_entry {
    double seconds;
    const ir_op *op;
    bool collective;
} top_entry;

/* Keeps the k largest entries, largest first.  Returns the new threshold. */
static double top_insert(top_entry *top, int *n, int k, double t, const ir_op *op, bool coll)
{
    int i = *n < k ? (*n)++ : k - 1;
    while (i > 0 && top[i - 1].seconds < t) {
        top[i] = top[i - 1];
        i--;
    }
    top[i].seconds = t;
    top[i].op = op;
    top[i].collective = coll;
    return *n < k ? 0 : top[k - 1].seconds;
}

/* The tier a flat group of `group` devices runs on: the first big enough. */
static int flat_tier(const cost_device *dev, int64_t group)
{
    for (int t = 0; t < dev->n_tiers; t++)
        if (dev->tiers[t].devices == 0 || group <= dev->tiers[t].devices)
            return t;
    return dev->n_tiers - 1;
}

static int check_device(const cost_device *dev, ap_error *err)
{
    for (int p = 0; p < COST_PREC_COUNT; p++)
        if (!(cost_device_peak(dev, (cost_prec)p) > 0))
            return ap_error_set(err, AP_EINVALID, "device %s: no positive peak flop/s for %s", dev->name,
                                cost_prec_name((cost_prec)p));
    if (!(dev->hbm_bandwidth > 0))
        return ap_error_set(err, AP_EINVALID, "device %s: HBM bandwidth must be positive", dev->name);
    if (dev->n_tiers < 1 || dev->n_tiers > COST_MAX_TIERS)
        return ap_error_set(err, AP_EINVALID, "device %s: needs 1 to %d interconnect tiers", dev->name, COST_MAX_TIERS);
    for (int t = 0; t < dev->n_tiers; t++)
        if (!(dev->tiers[t].bandwidth > 0) || !(dev->tiers[t].latency >= 0))
            return ap_error_set(err, AP_EINVALID, "device %s: tier %s needs a positive bandwidth and a latency >= 0",
                                dev->name, dev->tiers[t].name);
    return 0;
}

static int check_mesh(const cost_program *p, const cost_mesh *mesh, const cost_device *dev, ap_error *err)
{
    if (mesh->naxes != p->mesh.naxes)
        return ap_error_set(err, AP_EINVALID, "mesh has %d axes but the program's has %d", mesh->naxes, p->mesh.naxes);
    for (int a = 0; a < mesh->naxes; a++) {
        if (strcmp(mesh->names[a], p->mesh.names[a]) != 0 || mesh->sizes[a] != p->mesh.sizes[a])
            return ap_error_set(err, AP_EINVALID, "mesh axis %d is %s=%lld but the program's is %s=%lld", a,
                                mesh->names[a], (long long)mesh->sizes[a], p->mesh.names[a],
                                (long long)p->mesh.sizes[a]);
        if (mesh->tier[a] < 0 || mesh->tier[a] >= dev->n_tiers)
            return ap_error_set(err, AP_EINVALID, "mesh axis %s is on tier %d but device %s has %d tiers",
                                mesh->names[a], mesh->tier[a], dev->name, dev->n_tiers);
    }
    return 0;
}

int cost_evaluate(const cost_program *p, const cost_device *dev, const cost_mesh *mesh,
                  const cost_options *opts, cost_report *out, ap_error *err)
{
    int rc;
    if ((rc = check_device(dev, err)) < 0)
        return rc;
    cost_mesh tiers;
    if (mesh) {
        if ((rc = check_mesh(p, mesh, dev, err)) < 0)
            return rc;
        tiers = *mesh;
    } else {
        tiers = p->mesh;
        cost_mesh_default_tiers(&tiers, dev);
    }
    double overlap = opts ? opts->overlap : 0;
    if (!(overlap >= 0 && overlap <= 1))
        return ap_error_set(err, AP_EINVALID, "overlap must be between 0 and 1, not %g", overlap);
    int k = opts ? opts->top_k : 0;
    k = k == 0 ? 10 : k < 0 ? 0 : k > COST_TOP_MAX ? COST_TOP_MAX : k;

    memset(out, 0, sizeof *out);
    snprintf(out->device, sizeof out->device, "%s", dev->name);

    double inv_peak[COST_PREC_COUNT];
    for (int i = 0; i < COST_PREC_COUNT; i++)
        inv_peak[i] = 1.0 / cost_device_peak(dev, (cost_prec)i);
    const double inv_bw = 1.0 / dev->hbm_bandwidth;

    top_entry top[COST_TOP_MAX];
    int n_top = 0;
    double threshold = 0;

    /* the hot loop: one roofline per compute op */
    double compute = 0;
    const double *flops = p->flops, *bytes = p->bytes;
    const uint8_t *prec = p->prec;
    for (size_t i = 0; i < p->n_items; i++) {
        double tf = flops[i] * inv_peak[prec[i]];
        double tb = bytes[i] * inv_bw;
        double t = tf > tb ? tf : tb;
        compute += t;
        if (t > threshold && k > 0)
            threshold = top_insert(top, &n_top, k, t, p->ops[i], false);
    }

    double comm = 0;
    for (size_t i = 0; i < p->n_colls; i++) {
        const cost_coll_item *c = &p->colls[i];
        int tier = 0;
        if (c->flat) {
            tier = flat_tier(dev, c->group);
        } else {
            /* the slowest tier among the axes the group spans */
            for (int a = 0; a < tiers.naxes; a++)
                if ((c->axes >> a & 1u) && tiers.tier[a] > tier)
                    tier = tiers.tier[a];
        }
        const cost_tier *ct = &dev->tiers[tier];
        double t = c->payload / ct->bandwidth + c->steps * ct->latency;
        comm += t;
        out->coll[c->kind].count += c->count;
        out->coll[c->kind].bytes += c->bytes;
        out->coll[c->kind].seconds += t;
        out->coll[c->kind].written += 1;
        out->coll[c->kind].bytes_written += c->once;
        if (t > threshold && k > 0)
            threshold = top_insert(top, &n_top, k, t, c->op, true);
    }

    out->compute_s = compute;
    out->comm_s = comm;
    /* = compute + comm - overlap * min, written so that rounding keeps it
     * monotone in both (faster links never give a larger estimate) */
    double hi = compute > comm ? compute : comm, lo = compute > comm ? comm : compute;
    out->runtime_s = hi + (1 - overlap) * lo;
    out->flops_per_device = p->flops_total;
    out->matmul_flops = p->matmul_flops;
    out->bytes_per_device = p->bytes_total;
    out->peak_memory_bytes = p->peak_memory;
    out->argument_bytes = p->argument_bytes;
    out->hbm_bytes = dev->hbm_bytes;
    out->fits = (double)p->peak_memory <= dev->hbm_bytes;
    out->while_loops = p->while_loops;
    out->while_loops_counted_once = p->while_once;
    out->notes = p->notes;
    fill_memory(&out->memory, &p->peak);
    for (size_t i = 0; i < p->n_loops && out->n_loops < COST_LOOPS_MAX; i++) {
        const cost_loop_item *it = &p->loops[i];
        cost_loop *l = &out->loops[out->n_loops++];
        const char *name = it->op->loc ? ir_loc_name(it->op->loc) : NULL;
        snprintf(l->name, sizeof l->name, "%s", name ? name : "");
        l->line = it->op->src_line;
        l->col = it->op->src_col;
        l->trips = it->trips;
        l->runs = it->runs;
        l->depth = it->depth;
        l->collectives = it->colls;
    }
    out->n_top = n_top;
    for (int i = 0; i < n_top; i++) {
        cost_top_op *t = &out->top[i];
        const ir_op *op = top[i].op;
        snprintf(t->op, sizeof t->op, "%s", op->name ? op->name : "?");
        const char *name = op->loc ? ir_loc_name(op->loc) : NULL;
        snprintf(t->name, sizeof t->name, "%s", name ? name : "");
        t->line = op->src_line;
        t->col = op->src_col;
        t->seconds = top[i].seconds;
        t->collective = top[i].collective;
    }
    return 0;
}

int cost_estimate(const ir_module *m, const cost_device *dev, const cost_options *opts, cost_report *out,
                  ap_error *err)
{
    cost_program *p = NULL;
    int rc = cost_prepare(m, &p, err);
    if (rc < 0)
        return rc;
    rc = cost_evaluate(p, dev, NULL, opts, out, err);
    cost_program_free(p);
    return rc;
}

int cost_state_estimate(const ir_partition *p, const cost_device *dev, const cost_mesh *mesh,
                        const cost_options *opts, ir_lowered *lw, cost_report *out, ap_error *err)
{
    ir_lowered own;
    ir_lowered *l = lw ? lw : &own;
    cost_program *prog = NULL;
    int rc = ir_lower(p, l, err);
    if (rc < 0)
        return rc;
    if ((rc = cost_prepare(l->module, &prog, err)) == 0)
        rc = cost_evaluate(prog, dev, mesh, opts, out, err);
    cost_program_free(prog);
    if (rc < 0 || !lw)
        ir_lowered_free(l);
    return rc;
}

/* ============================================================== reports */

static void put_bytes(ap_buf *b, double v)
{
    char text[32];
    ap_buf_puts(b, ap_format_bytes(v, text, sizeof text));
}

/* right-aligned in `width` columns */
static void put_bytes_w(ap_buf *b, double v, int width)
{
    char text[32];
    ap_buf_printf(b, "%*s", width, ap_format_bytes(v, text, sizeof text));
}

/* 12.3 ms, 4.56 us, 1.20 s */
static void put_seconds(ap_buf *b, double s)
{
    if (s >= 1)
        ap_buf_printf(b, "%.3f s", s);
    else if (s >= 1e-3)
        ap_buf_printf(b, "%.3f ms", s * 1e3);
    else
        ap_buf_printf(b, "%.3f us", s * 1e6);
}

static void put_at(ap_buf *b, const char *op, const char *name, uint32_t line, uint32_t col)
{
    ap_buf_puts(b, op[0] ? op : "?");
    if (line)
        ap_buf_printf(b, " at %u:%u", line, col);
    if (name[0])
        ap_buf_printf(b, " \"%s\"", name);
}

/* The peak's breakdown: where, in which order, by category, the largest. */
static void memory_text(const cost_report *r, ap_buf *out)
{
    const cost_memory *m = &r->memory;
    if (!m->at_op[0])
        return;
    ap_buf_puts(out, "\n  at              ");
    put_at(out, m->at_op, m->at_name, m->at_line, m->at_col);
    if (m->in_op[0]) {
        ap_buf_puts(out, ", inside it ");
        put_at(out, m->in_op, m->in_name, m->in_line, m->in_col);
    }
    if (m->order != COST_ORDER_PROGRAM) {
        ap_buf_printf(out, "\n  order           XLA's %s scheduler (", m->order == COST_ORDER_LIST ? "list" : "DFS");
        put_bytes(out, (double)m->program_order_peak);
        ap_buf_puts(out, " in the order written)");
    } else {
        ap_buf_puts(out, "\n  order           as written (XLA's list and DFS orders peak no lower)");
    }
    for (int k = 0; k < COST_MEM_COUNT; k++) {
        if (!m->kinds[k])
            continue;
        ap_buf_printf(out, "\n  %-18s", cost_mem_kind_name((cost_mem_kind)k));
        put_bytes_w(out, (double)m->kinds[k], 12);
    }
    if (m->n_values)
        ap_buf_puts(out, "\n  largest live at the peak");
    for (int i = 0; i < m->n_values; i++) {
        const cost_mem_value *v = &m->values[i];
        ap_buf_puts(out, "\n    ");
        put_bytes_w(out, (double)v->bytes, 12);
        ap_buf_printf(out, "  %-18s  ", cost_mem_kind_name((cost_mem_kind)v->kind));
        put_at(out, v->op, v->name, v->line, v->col);
    }
}

int cost_report_text(const cost_report *r, ap_buf *out)
{
    ap_buf_printf(out, "device            %s\n", r->device);
    ap_buf_puts(out, "step time         ");
    put_seconds(out, r->runtime_s);
    ap_buf_puts(out, "  (compute ");
    put_seconds(out, r->compute_s);
    ap_buf_puts(out, ", communication ");
    put_seconds(out, r->comm_s);
    ap_buf_puts(out, ")\npeak memory       ");
    put_bytes(out, (double)r->peak_memory_bytes);
    ap_buf_puts(out, r->fits ? " per device, fits in " : " per device, DOES NOT FIT in ");
    put_bytes(out, r->hbm_bytes);
    memory_text(r, out);
    ap_buf_puts(out, "\narguments         ");
    put_bytes(out, (double)r->argument_bytes);
    ap_buf_printf(out, "\nflops             %.4g per device (matmul %.4g)\nHBM traffic       ", r->flops_per_device,
                  r->matmul_flops);
    put_bytes(out, r->bytes_per_device);
    /* as written: each loop body once; per step: times the trip counts */
    ap_buf_puts(out, " per device\ncollectives        written  per step   bytes written  bytes per step        time\n");
    for (int k = 0; k < COST_COLL_COUNT; k++) {
        const cost_coll_stats *c = &r->coll[k];
        if (k == COST_COLLECTIVE_BROADCAST && c->count == 0 && c->written == 0)
            continue;
        ap_buf_printf(out, "  %-18s %6.0f  %8.0f  ", cost_coll_name((cost_coll_kind)k), c->written, c->count);
        put_bytes_w(out, c->bytes_written, 14);
        ap_buf_puts(out, "  ");
        put_bytes_w(out, c->bytes, 14);
        ap_buf_puts(out, "  ");
        put_seconds(out, c->seconds);
        ap_buf_putc(out, '\n');
    }
    if (r->n_top > 0)
        ap_buf_puts(out, "slowest ops\n");
    for (int i = 0; i < r->n_top; i++) {
        const cost_top_op *t = &r->top[i];
        ap_buf_printf(out, "  %2d. ", i + 1);
        put_seconds(out, t->seconds);
        ap_buf_printf(out, "  %s", t->op);
        if (t->line)
            ap_buf_printf(out, " at %u:%u", t->line, t->col);
        if (t->name[0])
            ap_buf_printf(out, "  \"%s\"", t->name);
        ap_buf_putc(out, '\n');
    }
    if (r->while_loops)
        ap_buf_printf(out, "while loops       %u (%u counted once)\n", r->while_loops, r->while_loops_counted_once);
    for (int i = 0; i < r->n_loops; i++) {
        const cost_loop *l = &r->loops[i];
        ap_buf_printf(out, "  %*s", 2 * (int)(l->depth > 8 ? 8 : l->depth), "");
        if (l->trips >= 0)
            ap_buf_printf(out, "trips %-8lld runs %-8.0f", (long long)l->trips, l->runs);
        else
            ap_buf_printf(out, "trips unknown (counted once, runs %.0f)", l->runs);
        ap_buf_printf(out, "  %u collective%s", l->collectives, l->collectives == 1 ? "" : "s");
        if (l->line)
            ap_buf_printf(out, " at %u:%u", l->line, l->col);
        if (l->name[0])
            ap_buf_printf(out, "  \"%s\"", l->name);
        ap_buf_putc(out, '\n');
    }
    if (r->while_loops > (uint32_t)r->n_loops)
        ap_buf_printf(out, "  ... %u more\n", r->while_loops - (uint32_t)r->n_loops);
    for (unsigned bit = 1; bit && bit <= COST_NOTE_GROUP_OFF_MESH; bit <<= 1)
        if (r->notes & bit)
            ap_buf_printf(out, "note: %s\n", cost_note_text(bit));
    return out->oom ? AP_ENOMEM : 0;
}

/* A count or byte total: an integer when it is one (loop trips make them
 * doubles), so readers see 2, not 2.0. */
static json_t *json_amount(double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* json_object_set_new that remembers a failure. */
static void put(json_t *obj, const char *key, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(obj, key, v) < 0)
        *ok = false;
}

static json_t *at_json(const char *op, const char *name, uint32_t line, uint32_t col)
{
    json_t *nm = json_string(name);
    return json_pack("{s:s, s:o, s:i, s:i}", "op", op, "name", nm ? nm : json_string(""), "line", (json_int_t)line,
                     "col", (json_int_t)col);
}

/* {"kinds": {"parameters": B, ...}, "order": "program"|"list"|"dfs",
 *  "program_order_peak_bytes", "at": {op, name, line, col}, "inside":
 *  {...}|null, "largest": [{bytes, kind, op, name, line, col}]}; order
 *  "list" or "dfs" when one of XLA's memory schedulers gave the peak */
static json_t *memory_json(const cost_memory *m)
{
    json_t *o = json_object(), *kinds = json_object(), *largest = json_array();
    if (!o || !kinds || !largest) {
        json_decref(o);
        json_decref(kinds);
        json_decref(largest);
        return NULL;
    }
    bool ok = true;
    put(o, "kinds", kinds, &ok);
    for (int k = 0; k < COST_MEM_COUNT; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s", cost_mem_kind_name((cost_mem_kind)k));
        for (char *c = key; *c; c++)
            if (*c == ' ')
                *c = '_';
        put(kinds, key, json_integer(m->kinds[k]), &ok);
    }
    put(o, "order", json_string(m->order == COST_ORDER_LIST ? "list" : m->order == COST_ORDER_DFS ? "dfs" : "program"), &ok);
    put(o, "program_order_peak_bytes", json_integer(m->program_order_peak), &ok);
    put(o, "at", m->at_op[0] ? at_json(m->at_op, m->at_name, m->at_line, m->at_col) : json_null(), &ok);
    put(o, "inside", m->in_op[0] ? at_json(m->in_op, m->in_name, m->in_line, m->in_col) : json_null(), &ok);
    put(o, "largest", largest, &ok);
    for (int i = 0; i < m->n_values; i++) {
        const cost_mem_value *v = &m->values[i];
        json_t *e = at_json(v->op, v->name, v->line, v->col);
        if (!e || json_array_append_new(largest, e) < 0) {
            ok = false;
            continue;
        }
        put(e, "bytes", json_integer(v->bytes), &ok);
        put(e, "kind", json_string(cost_mem_kind_name((cost_mem_kind)v->kind)), &ok);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *cost_report_to_json(const cost_report *r)
{
    bool ok = true;
    json_t *root = json_object(), *cost = json_object(), *colls = json_object(), *top = json_array(),
           *notes = json_array();
    if (!root || !cost || !colls || !top || !notes) {
        json_decref(root);
        json_decref(cost);
        json_decref(colls);
        json_decref(top);
        json_decref(notes);
        return NULL;
    }
    put(root, "cost", cost, &ok);
    put(cost, "runtime_s", json_real(r->runtime_s), &ok);
    put(cost, "compute_s", json_real(r->compute_s), &ok);
    put(cost, "comm_s", json_real(r->comm_s), &ok);
    put(cost, "peak_memory_bytes", json_integer(r->peak_memory_bytes), &ok);
    put(cost, "flops_per_device", json_real(r->flops_per_device), &ok);
    put(cost, "fits", json_boolean(r->fits), &ok);
    put(cost, "device", json_string(r->device), &ok);
    put(cost, "matmul_flops", json_real(r->matmul_flops), &ok);
    put(cost, "bytes_per_device", json_real(r->bytes_per_device), &ok);
    put(cost, "argument_bytes", json_integer(r->argument_bytes), &ok);
    put(cost, "hbm_bytes", json_real(r->hbm_bytes), &ok);
    put(cost, "collectives", colls, &ok);
    for (int k = 0; k < COST_COLL_COUNT; k++) {
        const cost_coll_stats *c = &r->coll[k];
        if (k == COST_COLLECTIVE_BROADCAST && c->count == 0)
            continue;
        json_t *o = json_object();
        put(colls, cost_coll_name((cost_coll_kind)k), o, &ok);
        if (!o)
            continue;
        put(o, "count", json_amount(c->count), &ok);
        put(o, "bytes", json_amount(c->bytes), &ok);
        put(o, "seconds", json_real(c->seconds), &ok);
        put(o, "written", json_amount(c->written), &ok);
        put(o, "bytes_written", json_amount(c->bytes_written), &ok);
    }
    put(cost, "top_ops", top, &ok);
    for (int i = 0; i < r->n_top; i++) {
        const cost_top_op *t = &r->top[i];
        json_t *o = json_object();
        if (!o || json_array_append_new(top, o) < 0) {
            ok = false;
            continue;
        }
        put(o, "op", json_string(t->op), &ok);
        /* a location name may hold bytes that are not UTF-8: keep what is */
        json_t *nm = json_string(t->name);
        put(o, "name", nm ? nm : json_string(""), &ok);
        put(o, "line", json_integer(t->line), &ok);
        put(o, "col", json_integer(t->col), &ok);
        put(o, "seconds", json_real(t->seconds), &ok);
        put(o, "collective", json_boolean(t->collective), &ok);
    }
    put(cost, "while_loops", json_integer(r->while_loops), &ok);
    put(cost, "while_loops_counted_once", json_integer(r->while_loops_counted_once), &ok);
    json_t *loops = json_array();
    put(cost, "loops", loops, &ok);
    for (int i = 0; loops && i < r->n_loops; i++) {
        const cost_loop *l = &r->loops[i];
        json_t *o = json_object();
        if (!o || json_array_append_new(loops, o) < 0) {
            ok = false;
            continue;
        }
        json_t *nm = json_string(l->name);
        put(o, "name", nm ? nm : json_string(""), &ok);
        put(o, "line", json_integer(l->line), &ok);
        put(o, "col", json_integer(l->col), &ok);
        put(o, "trips", l->trips >= 0 ? json_integer(l->trips) : json_null(), &ok);
        put(o, "runs", json_amount(l->runs), &ok);
        put(o, "depth", json_integer(l->depth), &ok);
        put(o, "collectives", json_integer(l->collectives), &ok);
    }
    put(cost, "memory", memory_json(&r->memory), &ok);
    put(cost, "notes", notes, &ok);
    for (unsigned bit = 1; bit && bit <= COST_NOTE_GROUP_OFF_MESH; bit <<= 1)
        if (r->notes & bit) {
            json_t *s = json_string(cost_note_text(bit));
            if (!s || json_array_append_new(notes, s) < 0)
                ok = false;
        }
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int cost_report_json(const cost_report *r, ap_buf *out)
{
    json_t *j = cost_report_to_json(r);
    if (!j)
        return AP_ENOMEM;
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (!s)
        return AP_ENOMEM;
    ap_buf_puts(out, s);
    ap_free(s);
    return out->oom ? AP_ENOMEM : 0;
}
