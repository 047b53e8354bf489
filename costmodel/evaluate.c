/*
 * evaluate.c - the per-device estimate of a prepared program (one loop over
 * its compute ops, one over its collectives) and the report's text and JSON
 * forms.  This is what the search calls once per episode, so it touches
 * only the prepared arrays and allocates one scratch array of their size.
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

/* The share of a torus tier's links a group of g of its D devices gets:
 * the dims it spans (log g / log D of them), at least one. */
static double torus_share(const cost_tier *t, double g, double D)
{
    if (t->torus_dims <= 0 || D <= 1 || g >= D)
        return 1;
    double share = log(g) / log(D), least = 1.0 / t->torus_dims;
    return share > least ? share : least;
}

/*
 * The mean latency of one step of a ring over g_t[t] devices per unit of
 * each tier t (n = the product of them): NCCL orders a ring so that it
 * leaves a node once per node, and its model (src/graph/tuning.cc,
 * ncclTopoTuneModel: "nInterSteps = nNodes - 1", 2 (nNodes - 1) for an
 * all_reduce, of its nsteps = nRanks - 1 or 2 (nRanks - 1)) pays the
 * network's latency on those steps alone and NVLink's on the rest.  Over
 * several tiers the same holds per tier: of the ring's n - 1 steps,
 * (g_t - 1) * (the product of g_u over the slower tiers u) cross tier t's
 * units and no slower one's.  E.g. 256 GPUs in 32 nodes of 8: 31 steps at
 * InfiniBand's 5 us and 224 at NVLink's 1 us, 0.379 ms an all_gather where
 * every step at 5 us made 1.275 ms.  (NCCL also raises the intra-node steps
 * of a multi-node ring to its per-step network overhead, 1-2 us and 3x that
 * for the Simple protocol; our tier latencies are assumed figures of that
 * order, so that floor is not added.)
 */
static double ring_latency(const cost_device *dev, const double *g_t)
{
    double sum = 0, beyond = 1;
    for (int t = dev->n_tiers - 1; t >= 0; t--) {
        if (g_t[t] <= 1)
            continue;
        sum += dev->tiers[t].latency * (g_t[t] - 1) * beyond;
        beyond *= g_t[t];
    }
    return beyond > 1 ? sum / (beyond - 1) : 0;
}

/* What a collective's time reads of its group's place on the tiers: a
 * function of the group (flat, its devices, its axes) on one device and
 * mesh, so cost_evaluate works it out once per distinct group (coll_path)
 * and each collective reads it (coll_time): a program's hundreds of
 * collectives span a few groups (T32's search: ~620 a program, about 2
 * groups), and this part, with its logarithms, was 1% of a search's
 * instructions.  The same code on the same inputs: the same bits. */
typedef struct coll_group {
    /* the key */
    bool flat;
    uint16_t axes;
    int64_t group;
    /* the path */
    int used, last;  /* tiers it crosses (0: a group of one), the slowest */
    double bw, lat;  /* the least bandwidth, the slowest latency */
    double ring;     /* ring_latency over its tiers (used > 1) */
    double share;    /* torus_share of tier `last` (an all_reduce in the switch) */
    double log2g;    /* ceil(log2(group)): the tree's steps */
} coll_group;

static void coll_path(coll_group *cg, const cost_device *dev, const cost_mesh *tiers)
{
    double g_t[COST_MAX_TIERS] = {0}, all_t[COST_MAX_TIERS] = {0};
    for (int t = 0; t < COST_MAX_TIERS; t++)
        g_t[t] = all_t[t] = 1;
    if (cg->flat) {
        /* no mesh: whole units of the faster tiers, the rest on the first tier big enough */
        double left = (double)cg->group;
        int top = flat_tier(dev, cg->group);
        for (int t = 0; t < top && left > 1; t++) {
            double d = (double)dev->tiers[t].devices;
            g_t[t] = d > 0 && d < left ? d : left;
            left /= g_t[t];
        }
        g_t[top] *= left > 1 ? left : 1;
        memcpy(all_t, g_t, sizeof all_t);
    } else {
        /* devices are row-major over the mesh (the last axis fastest), packed
         * into the tiers' units (nodes): the part of an axis inside one unit
         * of tier t is unit / (the axes after it), and the group's members in
         * one unit the product of its axes' parts.  An axis put on a slower
         * tier than fits (cost_mesh_set_tier) crosses units whole. */
        double in_unit[COST_MAX_TIERS], all_unit[COST_MAX_TIERS];
        for (int t = 0; t < dev->n_tiers; t++) {
            double unit = (double)dev->tiers[t].devices, inner = 1;
            in_unit[t] = all_unit[t] = 1;
            for (int a = tiers->naxes - 1; a >= 0; a--) {
                double size = (double)tiers->sizes[a], part;
                if (unit <= 0)
                    part = size;
                else if (tiers->tier[a] > t && inner * size <= unit)
                    part = 1;
                else
                    part = fmin(size, fmax(1, floor(unit / inner)));
                all_unit[t] *= part;
                if (cg->axes >> a & 1u)
                    in_unit[t] *= part;
                inner *= size;
            }
        }
        for (int t = 0; t < dev->n_tiers; t++) {
            g_t[t] = t ? in_unit[t] / in_unit[t - 1] : in_unit[t];
            all_t[t] = t ? all_unit[t] / all_unit[t - 1] : all_unit[t];
        }
    }
    double bw = INFINITY, lat = 0, k = 1;
    int used = 0, last = 0;
    for (int t = 0; t < dev->n_tiers; t++) {
        if (g_t[t] <= 1)
            continue;
        const cost_tier *ct = &dev->tiers[t];
        double b = ct->bandwidth * torus_share(ct, g_t[t], all_t[t]) * k;
        bw = b < bw ? b : bw;
        lat = ct->latency > lat ? ct->latency : lat;
        k *= g_t[t];
        used++;
        last = t;
    }
    if (!used) {
        /* a group of one: see coll_time */
        bw = dev->tiers[0].bandwidth;
        lat = 0;
    }
    cg->used = used;
    cg->last = last;
    cg->bw = bw;
    cg->lat = lat;
    cg->ring = used > 1 ? ring_latency(dev, g_t) : 0;
    cg->share = torus_share(&dev->tiers[last], g_t[last], all_t[last]);
    cg->log2g = ceil(log2((double)cg->group));
}

/*
 * One collective's time on dev.  The ring (and, for all_reduce, NCCL's
 * tree) over the tiers its group spans: in each tier the group's part
 * inside one unit of it (a node) shares the tier's bandwidth with as many
 * links (rail-optimized NICs: the k GPUs of a group in one node use k NICs
 * at once), so the bandwidth is the least over the tiers of k_t * bw_t,
 * k_t the group's devices on the faster tiers.  A ring's latency (all_gather,
 * reduce_scatter, all_reduce's ring, broadcast's chain) is paid per tier on
 * the steps that cross it (ring_latency); an all_to_all's, a permute's and the
 * tree's per step is the slowest tier's.  An all_reduce inside one node uses
 * the switch's reduction bandwidth when the tier has one (NVLink SHARP).  A
 * torus tier gives a group the share of its dims the group spans.  Plus the
 * device's per-collective overhead.  -1: a collective XLA drops (a
 * reduction or gather over groups of one device: the lowering writes none,
 * plan.c, but an imported program may have them).
 */
static double coll_time(const cost_coll_item *c, const cost_device *dev, const coll_group *cg)
{
    if (!cg->used) { /* a group of one (a sum or a tiling along an axis of size 1): nothing moves */
        /* and XLA drops it before it runs (AllReduceSimplifier: an
         * all-reduce over groups of one, an all-gather or reduce-scatter
         * that keeps its shape, becomes its operand) */
        if (c->kind == COST_ALL_REDUCE || c->kind == COST_ALL_GATHER || c->kind == COST_REDUCE_SCATTER)
            return -1;
    }
    double bw = cg->bw, lat = cg->lat;
    double ring_lat = cg->used > 1 && c->kind != COST_ALL_TO_ALL && c->kind != COST_COLLECTIVE_PERMUTE ? cg->ring : lat;
    double t = c->payload / bw + c->steps * ring_lat;
    if (c->kind == COST_ALL_REDUCE && c->count > 0 && c->group > 1) {
        const cost_tier *t0 = &dev->tiers[cg->last];
        if (cg->used == 1 && t0->allreduce_bandwidth > 0) /* in-switch reduction */
            t = c->payload / (t0->allreduce_bandwidth * cg->share) + c->steps * lat;
        /* NCCL's tree: twice the bytes over the bandwidth, 2 log2 n steps */
        double tree = 2 * c->bytes / bw + 2 * cg->log2g * lat * c->count;
        t = tree < t ? tree : t;
    }
    return t + dev->collective_overhead * c->count;
}

/* The time of block b: its kernels (and nested blocks) one after another on
 * the compute stream, its collectives one after another on their own
 * stream, each event starting once what it waits for has finished (the
 * order written: XLA's latency-hiding scheduler starts a collective as
 * soon as its operand is ready and waits for it where it is used). */
static double simulate_block(const cost_program *p, size_t b, const double *t_item, const double *t_coll,
                             const double *t_blk, double *fin)
{
    double compute = 0, comm = 0, end = 0;
    uint32_t e0 = p->blk_ev0[b], e1 = e0 + p->blk_nev[b];
    for (uint32_t e = e0; e < e1; e++) {
        double ready = 0;
        for (uint32_t d = p->ev_dep0[e]; d < p->ev_dep0[e + 1]; d++)
            if (fin[p->ev_dep[d]] > ready)
                ready = fin[p->ev_dep[d]];
        uint32_t r = p->ev_ref[e];
        switch (p->ev_kind[e]) {
        case CE_COLL: {
            double start = comm > ready ? comm : ready;
            fin[e] = comm = start + t_coll[r];
            break;
        }
        case CE_KERNEL:
        case CE_BLOCK:
        default: {
            double dt = p->ev_kind[e] == CE_KERNEL ? t_item[r] : p->ev_kind[e] == CE_BLOCK ? t_blk[r] : 0;
            double start = compute > ready ? compute : ready;
            fin[e] = compute = start + dt;
            break;
        }
        }
        if (fin[e] > end)
            end = fin[e];
    }
    return end;
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
        if (!(dev->tiers[t].bandwidth > 0) || !(dev->tiers[t].latency >= 0) || !(dev->tiers[t].allreduce_bandwidth >= 0))
            return ap_error_set(err, AP_EINVALID, "device %s: tier %s needs a positive bandwidth and a latency >= 0",
                                dev->name, dev->tiers[t].name);
    if (!(dev->matmul_efficiency >= 0 && dev->matmul_efficiency <= 1) ||
        !(dev->hbm_efficiency >= 0 && dev->hbm_efficiency <= 1) || dev->matmul_tile < 0 ||
        !(dev->kernel_overhead >= 0) || !(dev->collective_overhead >= 0))
        return ap_error_set(err, AP_EINVALID, "device %s: efficiencies must be in [0, 1], tiles and overheads >= 0",
                            dev->name);
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
    cost_framework fw = opts ? opts->framework : COST_FW_XLA;
    if (fw != p->framework)
        return ap_error_set(err, AP_EINVALID, "the program's memory was counted for %s, not %s (cost_prepare_framework)",
                            cost_framework_name(p->framework), cost_framework_name(fw));
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
    const double eff_mm = dev->matmul_efficiency > 0 ? dev->matmul_efficiency : 1;
    const double inv_bw = 1.0 / (dev->hbm_bandwidth * (dev->hbm_efficiency > 0 ? dev->hbm_efficiency : 1));
    const double tile = (double)dev->matmul_tile;

    /* each kernel's and each collective's time, then the blocks' */
    double *t_item = NULL, *t_coll = NULL, *fin = NULL, *t_blk = NULL;
    size_t n_scratch = p->n_items + p->n_colls + p->n_ev + p->n_blk;
    double *scratch = n_scratch ? ap_malloc(sizeof *scratch * n_scratch) : NULL;
    if (n_scratch && !scratch)
        return ap_error_set(err, AP_ENOMEM, "out of memory evaluating the cost model");
    if (scratch) {
        t_item = scratch;
        t_coll = t_item + p->n_items;
        fin = t_coll + p->n_colls;
        t_blk = fin + p->n_ev;
    }

    top_entry top[COST_TOP_MAX];
    int n_top = 0;
    double threshold = 0;

    /* the hot loop: one roofline per kernel */
    double compute = 0;
    const double *flops = p->flops, *mm = p->mm, *bytes = p->bytes;
    const uint8_t *prec = p->prec;
    for (size_t i = 0; i < p->n_items; i++) {
        double eff = eff_mm;
        if (tile > 0 && p->mdim[i] > 0 && p->ndim[i] > 0) /* the last tile of M and of N is paid in full */
            eff *= p->mdim[i] / (ceil(p->mdim[i] / tile) * tile) * (p->ndim[i] / (ceil(p->ndim[i] / tile) * tile));
        double tf = mm[i] * inv_peak[prec[i]] / eff + (flops[i] - mm[i]) * inv_peak[COST_PREC_VECTOR];
        double tb = bytes[i] * inv_bw;
        double t = (tf > tb ? tf : tb) + dev->kernel_overhead * p->runs[i];
        t_item[i] = t;
        compute += t;
        if (t > threshold && k > 0)
            threshold = top_insert(top, &n_top, k, t, p->ops[i], false);
    }

    double comm = 0;
    coll_group groups[16]; /* the groups met so far (more: worked out per collective) */
    int n_groups = 0;
    for (size_t i = 0; i < p->n_colls; i++) {
        const cost_coll_item *c = &p->colls[i];
        coll_group one, *cg = NULL;
        for (int j = 0; j < n_groups && !cg; j++)
            if (groups[j].group == c->group && groups[j].axes == c->axes && groups[j].flat == c->flat)
                cg = &groups[j];
        if (!cg) {
            cg = n_groups < (int)(sizeof groups / sizeof *groups) ? &groups[n_groups++] : &one;
            cg->flat = c->flat;
            cg->axes = c->axes;
            cg->group = c->group;
            coll_path(cg, dev, &tiers);
        }
        double t = coll_time(c, dev, cg);
        t_coll[i] = t > 0 ? t : 0;
        if (t < 0) /* dropped: not in the report's collectives */
            continue;
        comm += t;
        out->coll[c->kind].count += c->count;
        out->coll[c->kind].bytes += c->bytes;
        out->coll[c->kind].seconds += t;
        out->coll[c->kind].written += 1;
        out->coll[c->kind].bytes_written += c->once;
        if (t > threshold && k > 0)
            threshold = top_insert(top, &n_top, k, t, c->op, true);
    }

    /* collectives run on their own stream beside the kernels: the step is
     * the two streams' schedule (inner blocks first: a loop is one event of
     * the block holding it) */
    double step = compute + comm;
    for (size_t b = 0; b < p->n_blk; b++)
        t_blk[b] = simulate_block(p, b, t_item, t_coll, t_blk, fin);
    if (p->n_blk)
        step = t_blk[p->n_blk - 1];
    ap_free(scratch);
    out->compute_s = compute;
    out->comm_s = comm;
    /* `overlap`: at least that share of the shorter hidden (written so that
     * rounding keeps it monotone in both: faster links never give a larger
     * estimate) */
    double hi = compute > comm ? compute : comm, lo = compute > comm ? comm : compute;
    double assumed = hi + (1 - overlap) * lo;
    out->runtime_s = step < assumed ? step : assumed;
    if (out->runtime_s < hi)
        out->runtime_s = hi;
    out->comm_exposed_s = out->runtime_s > compute ? out->runtime_s - compute : 0;
    if (out->comm_exposed_s > comm)
        out->comm_exposed_s = comm;
    out->comm_hidden_s = comm - out->comm_exposed_s;
    out->flops_per_device = p->flops_total;
    out->matmul_flops = p->matmul_flops;
    out->bytes_per_device = p->bytes_total;
    out->peak_memory_bytes = p->peak_memory;
    out->argument_bytes = p->argument_bytes;
    out->hbm_bytes = dev->hbm_bytes;
    cost_report_hold_to(out, dev->hbm_bytes);
    out->while_loops = p->while_loops;
    out->while_loops_counted_once = p->while_once;
    out->notes = p->notes;
    fill_memory(&out->memory, &p->peak);
    out->memory.framework = fw;
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
    int rc = cost_prepare_framework(m, opts ? opts->framework : COST_FW_XLA, &p, err);
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
    if ((rc = cost_prepare_framework(l->module, opts ? opts->framework : COST_FW_XLA, &prog, err)) == 0)
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

void cost_report_hold_to(cost_report *r, double limit)
{
    r->memory_limit_bytes = limit < 0 ? -1 : limit;
    r->fits = limit < 0 || (double)r->peak_memory_bytes <= limit;
}

/* What the verdict is held to: the device's HBM, else a search's limit named
 * as such with the HBM beside it (a user may well set a limit above the HBM,
 * to see how far a schedule is from fitting). */
void cost_fit_text(const cost_report *r, ap_buf *out)
{
    if (r->memory_limit_bytes < 0) {
        ap_buf_puts(out, "no memory limit (the device's HBM: ");
    } else if (r->memory_limit_bytes == r->hbm_bytes) {
        ap_buf_puts(out, r->fits ? "fits in " : "DOES NOT FIT in ");
        put_bytes(out, r->hbm_bytes);
        return;
    } else {
        ap_buf_puts(out, r->fits ? "fits the " : "DOES NOT FIT the ");
        put_bytes(out, r->memory_limit_bytes);
        ap_buf_puts(out, " limit (the device's HBM: ");
    }
    put_bytes(out, r->hbm_bytes);
    ap_buf_putc(out, ')');
}

/* 12.3 ms, 4.56 us, 1.20 s */
static const char *seconds_text(double s, char *buf, size_t n)
{
    if (s >= 1)
        snprintf(buf, n, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else
        snprintf(buf, n, "%.3f us", s * 1e6);
    return buf;
}

static void put_seconds(ap_buf *b, double s)
{
    char text[32];
    ap_buf_puts(b, seconds_text(s, text, sizeof text));
}

static void put_at(ap_buf *b, const char *op, const char *name, uint32_t line, uint32_t col)
{
    ap_buf_puts(b, op[0] ? op : "?");
    if (line)
        ap_buf_printf(b, " at %u:%u", line, col);
    if (name[0])
        ap_buf_printf(b, " \"%s\"", name);
}

/* "<lead>48:5, 128:5" when any of them has a place */
static void put_places(ap_buf *b, const char *lead, const uint32_t *lines, const uint32_t *cols, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lines[i]) {
            ap_buf_puts(b, lead);
            ap_buf_put_places(b, lines, cols, n);
            return;
        }
}

static int rank_label(char *buf, size_t size, int first, int n)
{
    return n > 1 ? snprintf(buf, size, "%d-%d.", first + 1, first + n) : snprintf(buf, size, "%d.", first + 1);
}

/* The peak's breakdown: where, in which order, by category, the largest
 * (verbose: one line each; else values of one pattern folded). */
static void memory_text(const cost_report *r, bool verbose, ap_buf *out)
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
    if (m->order == COST_ORDER_PLACED) {
        ap_buf_puts(out, "\n  order           as written, collectives next to their producers (reductions) or "
                         "readers (gathers) as XLA places them (");
        put_bytes(out, (double)m->program_order_peak);
        ap_buf_puts(out, " in the order written)");
    } else if (m->order != COST_ORDER_PROGRAM) {
        ap_buf_printf(out, "\n  order           XLA's %s scheduler (", m->order == COST_ORDER_LIST ? "list" : "DFS");
        put_bytes(out, (double)m->program_order_peak);
        ap_buf_puts(out, " in the order written)");
    } else if (m->framework == COST_FW_EAGER) {
        ap_buf_puts(out, "\n  order           as written (an eager framework runs the ops so)");
    } else {
        ap_buf_puts(out, "\n  order           as written (XLA's list and DFS orders peak no lower)");
    }
    /* by kind, two to a line (verbose: one) */
    for (int k = 0, col = 0; k < COST_MEM_COUNT; k++) {
        if (!m->kinds[k])
            continue;
        ap_buf_printf(out, col ? "    %-18s" : "\n  %-18s", cost_mem_kind_name((cost_mem_kind)k));
        put_bytes_w(out, (double)m->kinds[k], 12);
        col = !verbose && !col;
    }
    if (m->n_values)
        ap_buf_puts(out, "\n  largest live at the peak");
    /* folded: values of one size, kind and op (one per layer) are one line
     * with their count and places, in the order of the first */
    int group[COST_MEM_TOP], count[COST_MEM_TOP] = {0};
    bool folded = false;
    for (int i = 0; i < m->n_values; i++) {
        const cost_mem_value *v = &m->values[i];
        group[i] = i;
        for (int j = 0; j < i && !verbose && group[i] == i; j++) {
            const cost_mem_value *w = &m->values[j];
            if (group[j] == j && w->bytes == v->bytes && w->kind == v->kind && !strcmp(w->op, v->op) &&
                !strcmp(w->name, v->name))
                group[i] = j;
        }
        folded |= ++count[group[i]] > 1;
    }
    for (int i = 0; i < m->n_values; i++) {
        const cost_mem_value *v = &m->values[i];
        if (group[i] != i)
            continue;
        uint32_t lines[COST_MEM_TOP], cols[COST_MEM_TOP];
        size_t n = 0;
        for (int j = i; j < m->n_values; j++)
            if (group[j] == i) {
                lines[n] = m->values[j].line;
                cols[n++] = m->values[j].col;
            }
        ap_buf_puts(out, "\n    ");
        put_bytes_w(out, (double)v->bytes, 12);
        if (n > 1)
            ap_buf_printf(out, " x%-3zu", n);
        else if (folded) /* in the column of the counts */
            ap_buf_puts(out, "     ");
        ap_buf_printf(out, "  %-18s  %s", cost_mem_kind_name((cost_mem_kind)v->kind), v->op[0] ? v->op : "?");
        put_places(out, " at ", lines, cols, n);
        if (v->name[0])
            ap_buf_printf(out, " \"%s\"", v->name);
    }
}

/* The slowest ops, slowest first; a run of one time, op and name (the same
 * collective in each layer) is one line with its ranks and places. */
static void top_text(const cost_report *r, bool verbose, ap_buf *out)
{
    if (r->n_top > 0)
        ap_buf_puts(out, "slowest ops\n");
    char tt[COST_TOP_MAX][32], rank[32];
    for (int i = 0; i < r->n_top; i++)
        seconds_text(r->top[i].seconds, tt[i], sizeof tt[i]);
    int runs[COST_TOP_MAX], n_runs = 0, width = 3;
    for (int i = 0; i < r->n_top; i += runs[n_runs++]) {
        const cost_top_op *t = &r->top[i];
        int n = 1;
        while (!verbose && i + n < r->n_top && !strcmp(tt[i + n], tt[i]) && !strcmp(r->top[i + n].op, t->op) &&
               r->top[i + n].collective == t->collective && !strcmp(r->top[i + n].name, t->name))
            n++;
        runs[n_runs] = n;
        int len = rank_label(rank, sizeof rank, i, n);
        width = len > width ? len : width;
    }
    for (int k = 0, i = 0; k < n_runs; i += runs[k++]) {
        const cost_top_op *t = &r->top[i];
        int n = runs[k];
        rank_label(rank, sizeof rank, i, n);
        ap_buf_printf(out, "  %*s %s  %s", width, rank, tt[i], t->op);
        uint32_t lines[COST_TOP_MAX], cols[COST_TOP_MAX];
        for (int j = 0; j < n; j++) {
            lines[j] = r->top[i + j].line;
            cols[j] = r->top[i + j].col;
        }
        /* a collective: where the op it was inserted for is written */
        put_places(out, !t->collective ? " at " : n > 1 ? " for the ops at " : " for the op at ", lines, cols,
                   (size_t)n);
        if (t->name[0])
            ap_buf_printf(out, "  \"%s\"", t->name);
        ap_buf_putc(out, '\n');
    }
}

static int report_text(const cost_report *r, bool verbose, ap_buf *out)
{
    ap_buf_printf(out, "device            %s\n", r->device);
    ap_buf_puts(out, "step time         ");
    put_seconds(out, r->runtime_s);
    ap_buf_puts(out, "  (compute ");
    put_seconds(out, r->compute_s);
    ap_buf_puts(out, ", communication ");
    put_seconds(out, r->comm_s);
    if (r->comm_s > 0) {
        ap_buf_puts(out, ": ");
        put_seconds(out, r->comm_hidden_s);
        ap_buf_puts(out, " hidden under compute, ");
        put_seconds(out, r->comm_exposed_s);
        ap_buf_puts(out, " exposed");
    }
    ap_buf_puts(out, ")\npeak memory       ");
    put_bytes(out, (double)r->peak_memory_bytes);
    ap_buf_puts(out, " per device, ");
    cost_fit_text(r, out);
    ap_buf_printf(out, "\n  counted as      %s", cost_framework_text((cost_framework)r->memory.framework));
    memory_text(r, verbose, out);
    ap_buf_puts(out, "\narguments         ");
    put_bytes(out, (double)r->argument_bytes);
    ap_buf_printf(out, "\nflops             %.4g per device (matmul %.4g)\nHBM traffic       ", r->flops_per_device,
                  r->matmul_flops);
    put_bytes(out, r->bytes_per_device);
    /* as written: each loop body once; per step: times the trip counts */
    ap_buf_puts(out, " per device\ncollectives        written  per step   bytes written  bytes per step        time\n");
    for (int k = 0; k < COST_COLL_COUNT; k++) {
        const cost_coll_stats *c = &r->coll[k];
        /* a kind the program does not use says nothing (verbose: all but
         * broadcast, which StableHLO programs do not have) */
        if ((k == COST_COLLECTIVE_BROADCAST || !verbose) && c->count == 0 && c->written == 0)
            continue;
        ap_buf_printf(out, "  %-18s %6.0f  %8.0f  ", cost_coll_name((cost_coll_kind)k), c->written, c->count);
        put_bytes_w(out, c->bytes_written, 14);
        ap_buf_puts(out, "  ");
        put_bytes_w(out, c->bytes, 14);
        ap_buf_puts(out, "  ");
        put_seconds(out, c->seconds);
        ap_buf_putc(out, '\n');
    }
    top_text(r, verbose, out);
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

int cost_report_text(const cost_report *r, ap_buf *out)
{
    return report_text(r, false, out);
}

int cost_report_text_verbose(const cost_report *r, ap_buf *out)
{
    return report_text(r, true, out);
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

/* {"framework": "xla"|"pytorch_eager", "kinds": {"parameters": B, ...},
 *  "order": "program"|"placed"|"list"|"dfs",
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
    put(o, "framework", json_string(cost_framework_name((cost_framework)m->framework)), &ok);
    put(o, "kinds", kinds, &ok);
    for (int k = 0; k < COST_MEM_COUNT; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s", cost_mem_kind_name((cost_mem_kind)k));
        for (char *c = key; *c; c++)
            if (*c == ' ')
                *c = '_';
        put(kinds, key, json_integer(m->kinds[k]), &ok);
    }
    static const char *const orders[] = {"program", "list", "dfs", "placed"};
    put(o, "order", json_string(orders[m->order >= 0 && m->order <= COST_ORDER_PLACED ? m->order : 0]), &ok);
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
    put(cost, "comm_hidden_s", json_real(r->comm_hidden_s), &ok);
    put(cost, "comm_exposed_s", json_real(r->comm_exposed_s), &ok);
    put(cost, "peak_memory_bytes", json_integer(r->peak_memory_bytes), &ok);
    put(cost, "flops_per_device", json_real(r->flops_per_device), &ok);
    put(cost, "fits", json_boolean(r->fits), &ok);
    put(cost, "device", json_string(r->device), &ok);
    put(cost, "matmul_flops", json_real(r->matmul_flops), &ok);
    put(cost, "bytes_per_device", json_real(r->bytes_per_device), &ok);
    put(cost, "argument_bytes", json_integer(r->argument_bytes), &ok);
    put(cost, "hbm_bytes", json_real(r->hbm_bytes), &ok);
    put(cost, "memory_limit_bytes", r->memory_limit_bytes < 0 ? json_null() : json_amount(r->memory_limit_bytes), &ok);
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

/* ================================================= reports read back */

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* The kind named `name` ("saved activations", or as a JSON key
 * "saved_activations"); -1 when none is. */
static int mem_kind(const char *name)
{
    for (int k = 0; name && k < COST_MEM_COUNT; k++) {
        const char *a = cost_mem_kind_name((cost_mem_kind)k), *b = name;
        while (*a && (*a == *b || (*a == ' ' && *b == '_'))) {
            a++;
            b++;
        }
        if (!*a && !*b)
            return k;
    }
    return -1;
}

static void at_from_json(const json_t *o, char *op, size_t on, char *name, size_t nn, uint32_t *line, uint32_t *col)
{
    snprintf(op, on, "%s", jstr(o, "op"));
    snprintf(name, nn, "%s", jstr(o, "name"));
    *line = (uint32_t)json_number_value(json_object_get(o, "line"));
    *col = (uint32_t)json_number_value(json_object_get(o, "col"));
}

/* cost_report_to_json's "memory": the peak's breakdown */
static void memory_from_json(const json_t *m, cost_memory *r)
{
    const char *key;
    json_t *v;
    cost_framework fw;
    /* absent in answers stored before it was written: all were XLA's */
    if (cost_framework_parse(jstr(m, "framework"), &fw, NULL) == 0)
        r->framework = fw;
    json_object_foreach((json_t *)json_object_get(m, "kinds"), key, v) {
        int k = mem_kind(key);
        if (k >= 0)
            r->kinds[k] = json_integer_value(v);
    }
    static const char *const orders[] = {"program", "list", "dfs", "placed"};
    for (int k = 0; k < (int)AP_ARRAY_LEN(orders); k++)
        if (!strcmp(jstr(m, "order"), orders[k]))
            r->order = k;
    r->program_order_peak = json_integer_value(json_object_get(m, "program_order_peak_bytes"));
    json_t *at = json_object_get(m, "at"), *in = json_object_get(m, "inside");
    if (json_is_object(at))
        at_from_json(at, r->at_op, sizeof r->at_op, r->at_name, sizeof r->at_name, &r->at_line, &r->at_col);
    if (json_is_object(in))
        at_from_json(in, r->in_op, sizeof r->in_op, r->in_name, sizeof r->in_name, &r->in_line, &r->in_col);
    size_t i;
    json_array_foreach(json_object_get(m, "largest"), i, v) {
        if (r->n_values == COST_MEM_TOP)
            break;
        cost_mem_value *e = &r->values[r->n_values++];
        at_from_json(v, e->op, sizeof e->op, e->name, sizeof e->name, &e->line, &e->col);
        e->bytes = json_integer_value(json_object_get(v, "bytes"));
        int k = mem_kind(jstr(v, "kind"));
        e->kind = (uint8_t)(k >= 0 ? k : 0);
    }
}

void cost_report_from_json(const json_t *c, cost_report *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->device, sizeof r->device, "%s", jstr(c, "device"));
    r->runtime_s = json_number_value(json_object_get(c, "runtime_s"));
    r->compute_s = json_number_value(json_object_get(c, "compute_s"));
    r->comm_s = json_number_value(json_object_get(c, "comm_s"));
    r->flops_per_device = json_number_value(json_object_get(c, "flops_per_device"));
    r->matmul_flops = json_number_value(json_object_get(c, "matmul_flops"));
    r->bytes_per_device = json_number_value(json_object_get(c, "bytes_per_device"));
    r->peak_memory_bytes = (int64_t)json_number_value(json_object_get(c, "peak_memory_bytes"));
    r->argument_bytes = (int64_t)json_number_value(json_object_get(c, "argument_bytes"));
    r->hbm_bytes = json_number_value(json_object_get(c, "hbm_bytes"));
    /* an answer from before the limit was carried was held to the HBM */
    json_t *limit = json_object_get(c, "memory_limit_bytes");
    r->memory_limit_bytes = !limit ? r->hbm_bytes : json_is_null(limit) ? -1 : json_number_value(limit);
    r->fits = json_is_true(json_object_get(c, "fits"));
    json_t *coll = json_object_get(c, "collectives");
    for (int k = 0; k < COST_COLL_COUNT; k++) {
        json_t *o = json_object_get(coll, cost_coll_name((cost_coll_kind)k));
        r->coll[k].count = json_number_value(json_object_get(o, "count"));
        r->coll[k].bytes = json_number_value(json_object_get(o, "bytes"));
        r->coll[k].seconds = json_number_value(json_object_get(o, "seconds"));
        r->coll[k].written = json_number_value(json_object_get(o, "written"));
        r->coll[k].bytes_written = json_number_value(json_object_get(o, "bytes_written"));
    }
    r->comm_hidden_s = json_number_value(json_object_get(c, "comm_hidden_s"));
    r->comm_exposed_s = json_number_value(json_object_get(c, "comm_exposed_s"));
    memory_from_json(json_object_get(c, "memory"), &r->memory);
    r->while_loops = (uint32_t)json_number_value(json_object_get(c, "while_loops"));
    r->while_loops_counted_once = (uint32_t)json_number_value(json_object_get(c, "while_loops_counted_once"));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(c, "notes"), i, v) {
        for (unsigned bit = 1; bit && bit <= COST_NOTE_GROUP_OFF_MESH; bit <<= 1)
            if (json_string_value(v) && !strcmp(json_string_value(v), cost_note_text(bit)))
                r->notes |= bit;
    }
    json_array_foreach(json_object_get(c, "top_ops"), i, v) {
        if (r->n_top == COST_TOP_MAX)
            break;
        cost_top_op *t = &r->top[r->n_top++];
        snprintf(t->op, sizeof t->op, "%s", jstr(v, "op"));
        snprintf(t->name, sizeof t->name, "%s", jstr(v, "name"));
        t->line = (uint32_t)json_number_value(json_object_get(v, "line"));
        t->col = (uint32_t)json_number_value(json_object_get(v, "col"));
        t->seconds = json_number_value(json_object_get(v, "seconds"));
        t->collective = json_is_true(json_object_get(v, "collective"));
    }
    json_array_foreach(json_object_get(c, "loops"), i, v) {
        if (r->n_loops == COST_LOOPS_MAX)
            break;
        cost_loop *l = &r->loops[r->n_loops++];
        snprintf(l->name, sizeof l->name, "%s", jstr(v, "name"));
        l->line = (uint32_t)json_number_value(json_object_get(v, "line"));
        l->col = (uint32_t)json_number_value(json_object_get(v, "col"));
        l->trips = json_is_integer(json_object_get(v, "trips")) ? json_integer_value(json_object_get(v, "trips")) : -1;
        l->runs = json_number_value(json_object_get(v, "runs"));
        l->depth = (uint32_t)json_number_value(json_object_get(v, "depth"));
        l->collectives = (uint32_t)json_number_value(json_object_get(v, "collectives"));
    }
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
