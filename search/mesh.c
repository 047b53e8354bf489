/*
 * mesh.c - the search that also chooses the mesh (search_run_devices):
 * "I have 64 chips: 8 x 8 or 16 x 4, and which axis does what?"
 *
 * The meshes: every ordered factorization of N devices into 1 to 4 axes
 * (or into exactly the axes the user named, sizes 1 allowed), keeping
 * those whose every axis can tile a dimension the search decides on (no
 * axis larger than the dims it could tile), and trying once the
 * arrangements that only permute axes the device's links treat alike (the
 * default tiers give each axis its link by its place: 16 x 4 on 8-GPU
 * nodes keeps the 4 inside a node, 4 x 16 does not, and they are both
 * tried; on a TPU torus they are one mesh).
 *
 * The budget: each mesh gets its own tree (mcts.c's engine, one thread
 * each) and a first look at a share of the budget (under a time budget
 * alone: its root pass and one batch, meshes in order while the first
 * half of the time lasts, so that a large program is looked at on fewer
 * meshes rather than on none properly; under an episode budget whose
 * share is less than that, the same, while half the episodes last); the
 * best KEEP go on, halved at each round (successive halving), the last
 * one alone taking what is left.  Meshes are searched side by side by the
 * option's threads; every budget is a function of the total, the number
 * of meshes and what the searches found, so under an episode budget the
 * answer depends on the seed alone, as search_run's does.
 *
 * The names: with no names asked for, the axes are searched under
 * placeholders and named afterwards by the role the best schedule gives
 * each (search.h, search_devices).
 */
#include "search_int.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MESH_AXES 4         /* axes of a mesh the search chooses, at most */
#define MAX_DEVICES (1 << 20)
#define MAX_MESHES 96       /* meshes tried, at most (fewer axes first) */
#define KEEP 4              /* meshes searched on after the first look */
#define PER_MESH 1000       /* episodes per mesh when no budget is given */

/* ============================================================== requests */

typedef struct names {
    char v[MESH_AXES][32];
    int n;
} names;

static int parse_names(const char *text, names *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    for (const char *s = text;;) {
        size_t len = strcspn(s, ",");
        if (out->n == MESH_AXES)
            return ap_error_set(err, AP_EINVALID, "axes names '%s': at most %d axes", text, MESH_AXES);
        bool ok = len > 0 && len < sizeof out->v[0] && (isalpha((unsigned char)s[0]) || s[0] == '_');
        for (size_t i = 1; ok && i < len; i++)
            ok = isalnum((unsigned char)s[i]) || s[i] == '_';
        if (!ok)
            return ap_error_set(err, AP_EINVALID,
                                "axes names '%s': '%.*s' is not a name (letters, digits and '_', at most 31, not "
                                "starting with a digit)",
                                text, (int)(len > 40 ? 40 : len), s);
        memcpy(out->v[out->n], s, len);
        out->v[out->n][len] = '\0';
        for (int k = 0; k < out->n; k++)
            if (!strcmp(out->v[k], out->v[out->n]))
                return ap_error_set(err, AP_EINVALID, "axes names '%s': '%s' is given twice", text, out->v[k]);
        out->n++;
        if (!s[len])
            return 0;
        s += len + 1;
    }
}

int search_devices_check(const search_devices *d, ap_error *err)
{
    if (d->devices < 1)
        return ap_error_set(err, AP_EINVALID, "devices: %lld; a mesh has at least one device", (long long)d->devices);
    if (d->devices == 1)
        return ap_error_set(err, AP_EINVALID,
                            "devices: 1 device leaves nothing to partition (the program runs on it as it is)");
    if (d->devices > MAX_DEVICES)
        return ap_error_set(err, AP_EINVALID, "devices: %lld is more than 2^20, the largest mesh",
                            (long long)d->devices);
    names nm;
    int rc;
    if (d->axes_names && (rc = parse_names(d->axes_names, &nm, err)) < 0)
        return rc;
    if (d->manual && !d->axes_names)
        return ap_error_set(err, AP_EINVALID,
                            "manual tactics with devices need axes names: the tactics name mesh axes, and without "
                            "names the axes are named only after the search");
    return 0;
}

/* ================================================================ meshes */

typedef struct shape {
    int k;
    int64_t size[MESH_AXES];
} shape;

typedef struct shapes {
    shape *v;
    int n, cap;
    bool oom;
} shapes;

/* Every ordered factorization of rest into the positions from `at` on of
 * a k-axis shape, each factor at least `least`. */
static void factor(shapes *out, shape *cur, int at, int64_t rest, int64_t least)
{
    if (at == cur->k - 1) {
        if (rest < least)
            return;
        cur->size[at] = rest;
        if (out->n == out->cap) {
            int cap = out->cap ? out->cap * 2 : 64;
            shape *v = ap_realloc(out->v, sizeof *v * (size_t)cap);
            if (!v) {
                out->oom = true;
                return;
            }
            out->v = v;
            out->cap = cap;
        }
        out->v[out->n++] = *cur;
        return;
    }
    for (int64_t f = least; f <= rest; f++)
        if (rest % f == 0) {
            cur->size[at] = f;
            factor(out, cur, at + 1, rest / f, least);
        }
}

/* The dims the search decides on: of every decision unit's type, the dims
 * no loop steps through. */
typedef struct dims {
    int64_t *v;
    int n;
} dims;

static int unit_dims(const ir_pctx *c, const search_options *o, dims *out, ap_error *err)
{
    search_units u;
    memset(out, 0, sizeof *out);
    int rc = search__units(c, 1u, o->hints, &u, err);
    if (rc < 0)
        return rc;
    int cap = 0;
    for (uint32_t i = 0; i < u.n; i++)
        cap += u.v[i].type->rank > 0 ? u.v[i].type->rank : 0;
    out->v = ap_malloc(sizeof *out->v * (size_t)(cap + 1));
    if (!out->v) {
        search__units_free(&u);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < u.n; i++) {
        const ir_type *t = u.v[i].type;
        uint32_t lead = u.members[u.v[i].first];
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] > 1 && !ir_pctx_loop_dim(c, lead, d))
                out->v[out->n++] = t->dims[d];
    }
    search__units_free(&u);
    return 0;
}

static bool usable(const dims *d, int64_t size)
{
    if (size == 1)
        return true;
    for (int i = 0; i < d->n; i++)
        if (d->v[i] >= size && d->v[i] % size == 0)
            return true;
    return false;
}

/* Two shapes the device's links treat alike: the same (size, tier) pairs
 * in another order. */
static void shape_key(const shape *s, const cost_device *dev, int64_t *key)
{
    cost_mesh cm;
    memset(&cm, 0, sizeof cm);
    cm.naxes = s->k;
    for (int a = 0; a < s->k; a++)
        cm.sizes[a] = s->size[a];
    cost_mesh_default_tiers(&cm, dev);
    for (int a = 0; a < MESH_AXES; a++)
        key[a] = a < s->k ? cm.sizes[a] * 64 + cm.tier[a] : 0;
    /* sorted: the multiset */
    for (int a = 1; a < s->k; a++)
        for (int b = a; b > 0 && key[b - 1] > key[b]; b--) {
            int64_t t = key[b];
            key[b] = key[b - 1];
            key[b - 1] = t;
        }
}

/* The meshes to try, fewer axes first; *considered counts them before the
 * cap.  AP_EINVALID when none can be used, saying why. */
static int mesh_shapes(const search_devices *d, const names *nm, const dims *dm, const cost_device *dev, shapes *out,
                       int *considered, ap_error *err)
{
    shapes all = {0};
    memset(out, 0, sizeof *out);
    for (int k = nm->n ? nm->n : 1; k <= (nm->n ? nm->n : MESH_AXES); k++) {
        shape cur = {.k = k};
        factor(&all, &cur, 0, d->devices, nm->n ? 1 : 2);
    }
    int kept = 0;
    for (int i = 0; i < all.n && !all.oom; i++) {
        bool ok = true;
        for (int a = 0; a < all.v[i].k && ok; a++)
            ok = usable(dm, all.v[i].size[a]);
        if (ok && !nm->n) {
            int64_t ki[MESH_AXES], kj[MESH_AXES];
            shape_key(&all.v[i], dev, ki);
            for (int j = 0; j < kept && ok; j++) {
                shape_key(&all.v[j], dev, kj);
                ok = all.v[j].k != all.v[i].k || memcmp(ki, kj, sizeof ki) != 0;
            }
        }
        if (ok)
            all.v[kept++] = all.v[i];
    }
    if (all.oom) {
        ap_free(all.v);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    *considered = kept;
    if (kept == 0) {
        /* the largest factor of N some dim takes, for the message */
        int64_t best = 1;
        for (int64_t f = 2; f <= d->devices; f++)
            if (d->devices % f == 0 && usable(dm, f))
                best = f;
        char why[160];
        if (best == 1)
            snprintf(why, sizeof why, "no factor of %lld but 1 divides one", (long long)d->devices);
        else
            snprintf(why, sizeof why, "the largest factor of %lld that divides one: %lld", (long long)d->devices,
                     (long long)best);
        ap_free(all.v);
        if (nm->n)
            return ap_error_set(err, AP_EINVALID,
                                "devices: no way to arrange %lld devices as the %d axes named has every axis divide "
                                "a dimension the search decides on (%s)",
                                (long long)d->devices, nm->n, why);
        return ap_error_set(err, AP_EINVALID,
                            "devices: no mesh of %lld devices in at most %d axes has every axis divide a dimension "
                            "the search decides on (%s); ask for a number of devices whose factors divide the "
                            "program's dimensions",
                            (long long)d->devices, MESH_AXES, why);
    }
    out->v = all.v;
    out->n = kept < MAX_MESHES ? kept : MAX_MESHES;
    return 0;
}

/* ================================================================= roles */

static bool has(const char *s, const char *word)
{
    char low[256];
    size_t n = 0;
    for (; s[n] && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)s[n]);
    low[n] = '\0';
    return strstr(low, word) != NULL;
}

/* A parameter (or its optimizer state): donated back by the step, or
 * named as one; anything else tensor-valued is data. */
static bool is_parameter(const ir_op *f, uint32_t a)
{
    if (ir_func_arg_attr(f, a, "tf.aliasing_output") || ir_func_arg_attr(f, a, "jax.buffer_donor"))
        return true;
    const char *n = ir_func_arg_name(f, a);
    if (!n)
        return false;
    static const char *const words[] = {"param", "weight", "kernel", "opt_state", "embed", "moment", "bias",
                                        "scale", "expert"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (has(n, words[i]))
            return true;
    return false;
}

/* The role each axis plays in state p, as names (search.h). */
static void role_names(const ir_partition *p, ir_mesh *out)
{
    const ir_pctx *c = ir_partition_ctx(p);
    const ir_mesh *mesh = ir_pctx_mesh(c);
    ir_op *f = ir_pctx_func(c);
    *out = *mesh;
    for (int a = 0; a < mesh->n_axes; a++) {
        bool data = false, param = false, expert = false;
        for (uint32_t v = 0; v < ir_func_num_args(f); v++) {
            ir_layout l;
            ir_partition_value_layout(p, ir_func_arg(f, v), &l);
            if (l.dim[a] < 0)
                continue;
            if (!is_parameter(f, v)) {
                data = true;
                continue;
            }
            param = true;
            const char *n = ir_func_arg_name(f, v);
            if (n && l.dim[a] == 0 && (has(n, "expert") || has(n, "moe")))
                expert = true;
        }
        const char *role = expert ? "expert" : data && param ? "fsdp" : data ? "data" : param ? "model" : "replica";
        int same = 0;
        for (int b = 0; b < a; b++)
            same += !strncmp(out->names[b], role, strlen(role));
        if (same)
            snprintf(out->names[a], sizeof out->names[a], "%s%d", role, same + 1);
        else
            snprintf(out->names[a], sizeof out->names[a], "%s", role);
    }
}

/* ================================================================ driver */

typedef struct driver driver;

/* One mesh being searched. */
typedef struct slot {
    driver *d;
    int index;          /* in the shapes: ties go to the earlier */
    ir_mesh mesh;
    ir_pctx *ctx;
    ir_partition *start;
    search_engine *eng;
    bool unusable;      /* the manual tactics do not apply on it */
    /* the next run */
    bool first_look;    /* to its root pass and one batch (target set when it opens) */
    bool ends;          /* share_s runs to the answer's deadline: the engine keeps what its result takes */
    int64_t target;     /* episodes in all; 0 none */
    double share_s;     /* wall seconds; 0 none */
    /* what it came to */
    int rc;
    ap_error err;
    search_best best;
    /* progress, under d->mu */
    int64_t prog_episodes;
    size_t prog_tree;
    double prog_start;
} slot;

struct driver {
    ir_module *m;
    ir_op *func;
    const search_devices *req;
    search_options o;   /* for every engine */
    const search_options *user;
    atomic_int halt;
    pthread_mutex_t mu;
    slot *slots;
    int n_slots;
    int n_looked;       /* slots[0 .. n_looked) had a first look; the rest were left untried */
    double t0, last_progress;
    int best_slot;      /* of the progress, -1 none */
    char *best_text;
    search_mesh_row *rows;
    int n_rows;
};

/* Is b a better result than a?  Fits, then faster.  When neither fits
 * yet, the peaks say how far each search has got, not where it leads:
 * ranked by them, MaxText 16B on 256 v5e (bench_experts M4, a 60 s
 * budget on a loaded machine) kept replica=2,fsdp=128 (17.6 GiB, 20.1 s)
 * over fsdp=256 (125 GiB, 10.6 s; 10.3 s once it fits), which was then
 * cut, and the answer fitted nowhere at 1.95x the expert's step.  So
 * first a search whose completion expects to fit at all, then the mesh of
 * fewer axes (fewer decisions: its search goes deeper in as many
 * episodes), then the lower peak. */
static bool better(const search_best *a, const search_best *b)
{
    if (a->fits != b->fits)
        return b->fits;
    if (a->fits)
        return b->runtime_s < a->runtime_s;
    if (a->can_fit != b->can_fit)
        return b->can_fit;
    if (a->axes != b->axes)
        return b->axes < a->axes;
    return b->peak < a->peak || (b->peak == a->peak && b->runtime_s < a->runtime_s);
}

/* The engines' progress, reported as one search: episodes in all, the
 * best of every mesh. */
static int driver_progress(void *ctx, const search_progress *p)
{
    slot *s = ctx;
    driver *d = s->d;
    pthread_mutex_lock(&d->mu);
    s->prog_episodes = p->episodes;
    s->prog_tree = p->tree_nodes;
    s->prog_start = p->start_runtime_s;
    /* whether it can fit: as its last run ended (search__engine_best) */
    search_best b = {.runtime_s = p->best_runtime_s, .peak = p->best_peak_bytes, .fits = p->best_fits,
                     .episodes = p->episodes, .can_fit = p->best_fits || s->best.can_fit, .axes = s->mesh.n_axes};
    s->best = b;
    if (d->best_slot < 0 || d->best_slot == s->index || better(&d->slots[d->best_slot].best, &b)) {
        char *t = ap_strdup(p->best_schedule ? p->best_schedule : "");
        if (t) {
            ap_free(d->best_text);
            d->best_text = t;
        }
        d->best_slot = s->index;
    }
    double t = ap_mono_s();
    if (d->user->progress && t - d->last_progress >= d->o.progress_interval_s) {
        d->last_progress = t;
        search_progress q;
        memset(&q, 0, sizeof q);
        for (int i = 0; i < d->n_slots; i++) {
            q.episodes += d->slots[i].prog_episodes;
            q.tree_nodes += d->slots[i].prog_tree;
        }
        const slot *bs = &d->slots[d->best_slot];
        q.elapsed_s = t - d->t0;
        q.episodes_per_s = q.elapsed_s > 0 ? (double)q.episodes / q.elapsed_s : 0;
        q.best_runtime_s = bs->best.runtime_s;
        q.best_peak_bytes = bs->best.peak;
        q.best_fits = bs->best.fits;
        q.start_runtime_s = bs->prog_start;
        q.best_schedule = d->best_text ? d->best_text : "";
        if (d->user->progress(d->user->progress_ctx, &q))
            atomic_store(&d->halt, 1);
    }
    pthread_mutex_unlock(&d->mu);
    return atomic_load(&d->halt);
}

/* Opens the slot's mesh: its context, the start (after the manual
 * tactics) and the engine.  A mesh the manual tactics do not fit is
 * marked unusable, not an error. */
static int slot_open(slot *s, ap_error *err)
{
    driver *d = s->d;
    int rc;
    if ((rc = ir_pctx_new(d->m, d->func, &s->mesh, &s->ctx, err)) < 0 ||
        (rc = ir_partition_new(s->ctx, &s->start, err)) < 0)
        return rc;
    if (d->req->manual && ir_schedule_apply(s->start, d->req->manual, err) < 0) {
        s->unusable = true;
        return 0;
    }
    search_options o = d->o;
    o.progress_ctx = s;
    return search__engine_new(s->start, &o, &d->halt, &s->eng, err);
}

/* Runs the slot to its next budget, then frees what it keeps meanwhile. */
static void slot_step(slot *s)
{
    if (s->rc < 0 || s->unusable)
        return;
    if (!s->eng && (s->rc = slot_open(s, &s->err)) < 0)
        return;
    if (s->unusable)
        return;
    if (s->first_look) {
        s->target = search__engine_first_look(s->eng);
        s->first_look = false;
    }
    double deadline = s->share_s > 0 ? ap_mono_s() + s->share_s : 0;
    s->rc = search__engine_run(s->eng, s->target, deadline, s->ends, &s->err);
    pthread_mutex_lock(&s->d->mu);
    search__engine_best(s->eng, &s->best);
    s->prog_episodes = s->best.episodes;
    pthread_mutex_unlock(&s->d->mu);
    search__engine_pause(s->eng);
}

typedef struct runner {
    slot **v;
    int n;
    atomic_int next;
} runner;

static void *runner_main(void *arg)
{
    runner *r = arg;
    for (int i; (i = atomic_fetch_add(&r->next, 1)) < r->n;)
        slot_step(r->v[i]);
    return NULL;
}

/* slot_step on each of v, `threads` at a time (the results do not depend
 * on how many). */
static void run_slots(slot **v, int n, int threads)
{
    runner r = {.v = v, .n = n};
    atomic_init(&r.next, 0);
    pthread_t th[256];
    int started = 0;
    for (int i = 1; i < threads && i < n && i < 256; i++)
        if (pthread_create(&th[started], NULL, runner_main, &r) == 0)
            started++;
    runner_main(&r);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* What the end takes, kept from a time budget: the result of the mesh
 * that wins (the largest of the alive's estimates: which wins is not known
 * yet) and the exact best of each other (its row). */
static double end_reserve(slot **alive, int n)
{
    double most = 0, rows = 0;
    for (int k = 0; k < n; k++) {
        double r = search__engine_end_s(alive[k]->eng, true);
        most = r > most ? r : most;
        rows += search__engine_end_s(alive[k]->eng, false);
    }
    return most + rows;
}

/* The slot's row: its mesh named by its best schedule's roles (unless
 * named by the user), what it found and spent. */
static int add_row(driver *d, slot *s, bool chosen, ap_error *err)
{
    search_mesh_row *r = &d->rows[d->n_rows];
    memset(r, 0, sizeof *r);
    r->mesh = s->mesh;
    int erc = search__engine_exact_best(s->eng, err);
    if (erc < 0)
        return erc;
    search__engine_best(s->eng, &s->best);
    if (!d->req->axes_names) {
        ir_partition *p = NULL;
        int rc = search__engine_best_state(s->eng, &p, err);
        if (rc < 0)
            return rc;
        role_names(p, &r->mesh);
        ir_partition_free(p);
    }
    r->runtime_s = s->best.runtime_s;
    r->peak_bytes = s->best.peak;
    r->fits = s->best.fits;
    r->episodes = s->best.episodes;
    r->chosen = chosen;
    d->n_rows++;
    return 0;
}

static void slot_free(slot *s)
{
    search__engine_free(s->eng);
    ir_partition_free(s->start);
    ir_pctx_free(s->ctx);
    s->eng = NULL;
    s->start = NULL;
    s->ctx = NULL;
}

/* Sorts v best first (stable by shape order). */
static void rank_slots(slot **v, int n)
{
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && (better(&v[b - 1]->best, &v[b]->best) ||
                                  (!better(&v[b]->best, &v[b - 1]->best) && v[b]->index < v[b - 1]->index));
             b--) {
            slot *t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
}

static int64_t spent(const driver *d)
{
    int64_t n = 0;
    for (int i = 0; i < d->n_slots; i++)
        n += d->slots[i].best.episodes;
    return n;
}

/* Adds the meshes to the result's explanation, JSON and text. */
static int explain_meshes(const driver *d, search_result *out, ap_error *err)
{
    json_t *ex = out->explanation, *rows = search__meshes_json(out);
    if (!ex || !rows) {
        json_decref(rows);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    json_object_set_new(ex, "devices", json_integer(d->req->devices));
    json_object_set_new(ex, "meshes_considered", json_integer(out->meshes_considered));
    json_object_set_new(ex, "meshes", rows);
    /* the meshes left untried (the budget's first half spent on those
     * before them), by their sizes: a user may ask for one with --mesh */
    json_t *untried = json_array();
    for (int i = d->n_looked; untried && i < d->n_slots; i++) {
        json_t *sizes = json_array();
        for (int a = 0; sizes && a < d->slots[i].mesh.n_axes; a++)
            json_array_append_new(sizes, json_integer(d->slots[i].mesh.sizes[a]));
        json_array_append_new(untried, sizes);
    }
    if (!untried)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    json_object_set_new(ex, "meshes_untried", untried);
    /* the text again, from the JSON, now with the meshes */
    ap_buf b;
    ap_buf_init(&b);
    search_explanation_text(ex, 0, &b);
    if (b.oom) {
        ap_buf_free(&b);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    ap_free(out->explanation_text);
    out->explanation_text = ap_buf_take(&b, NULL);
    return 0;
}

static int cmp_rows(const void *a, const void *b)
{
    const search_mesh_row *x = a, *y = b;
    if (x->chosen != y->chosen)
        return x->chosen ? -1 : 1;
    search_best bx = {.runtime_s = x->runtime_s, .peak = x->peak_bytes, .fits = x->fits},
                by = {.runtime_s = y->runtime_s, .peak = y->peak_bytes, .fits = y->fits};
    return better(&bx, &by) ? 1 : better(&by, &bx) ? -1 : 0;
}

/* The result of the meshes still alive[0..n_alive) after the rounds:
 * the losers' rows, then the winner's, named, and its search's result
 * with every mesh's row (d->rows moves to out). */
static int finish(driver *d, slot **alive, int n_alive, int considered, search_result *out, ap_error *err)
{
    int rc;
    rank_slots(alive, n_alive);
    while (n_alive > 1) {
        slot *gone = alive[--n_alive];
        if ((rc = add_row(d, gone, false, err)) < 0)
            return rc;
        slot_free(gone);
    }
    slot *win = alive[0];
    if ((rc = add_row(d, win, true, err)) < 0)
        return rc;
    if (!d->req->axes_names && (rc = ir_pctx_rename_axes(win->ctx, &d->rows[d->n_rows - 1].mesh, err)) < 0)
        return rc;
    if ((rc = search__engine_result(win->eng, out, err)) < 0)
        return rc;
    out->ctx = win->ctx;
    win->ctx = NULL;
    /* the start lives in the winner's slot: the result keeps the state only */
    qsort(d->rows, (size_t)d->n_rows, sizeof *d->rows, cmp_rows);
    out->meshes = d->rows;
    out->n_meshes = d->n_rows;
    out->meshes_considered = considered;
    d->rows = NULL;
    out->episodes = spent(d);
    out->wall_s = ap_mono_s() - d->t0;
    out->episodes_per_s = out->wall_s > 0 ? (double)out->episodes / out->wall_s : 0;
    if (atomic_load(&d->halt))
        out->stopped_by = "callback";
    return explain_meshes(d, out, err);
}

int search_run_devices(ir_module *m, ir_op *func, const search_devices *req, const search_options *opts,
                       search_result *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    names nm = {0};
    int rc;
    if ((rc = search_devices_check(req, err)) < 0)
        return rc;
    /* nothing to decide: the search tiles arguments and follows them, so
     * with none every mesh would be refused for want of a dim, which
     * blamed the device count (a module whose weights are globals, as
     * IREE's are, is the common case) */
    if (ir_func_num_args(func) == 0)
        return ap_error_at(err, AP_EINVALID, m->filename, (int)func->src_line, (int)func->src_col,
                           "devices: @%s takes no arguments, so the search has nothing to shard: it tiles arguments "
                           "and what follows from them, and values loaded from globals or made from constants stay "
                           "whole on every device; pass the weights and inputs as arguments of the function (or name "
                           "one that takes them with --func) to have them partitioned",
                           ir_func_name(func));
    if (req->axes_names)
        parse_names(req->axes_names, &nm, NULL);
    if (opts->tiers)
        return ap_error_set(err, AP_EINVALID, "devices: link tiers name mesh axes: give them with a mesh");
    if (!nm.n && opts->axes)
        return ap_error_set(err, AP_EINVALID, "devices: the axes to search name mesh axes: give axes names too");
    driver d;
    memset(&d, 0, sizeof d);
    d.m = m;
    d.func = func;
    d.req = req;
    d.user = opts;
    d.t0 = d.last_progress = ap_mono_s();
    d.best_slot = -1;
    atomic_init(&d.halt, 0);
    pthread_mutex_init(&d.mu, NULL);
    shapes sh = {0};
    dims dm = {0};
    ir_pctx *probe = NULL;
    slot **alive = NULL, **batch = NULL;
    int n_alive = 0, considered = 0;
    /* the dims a mesh axis may tile, on a mesh of the right axes, all of size 1 */
    ir_mesh pm;
    memset(&pm, 0, sizeof pm);
    pm.n_axes = nm.n ? nm.n : 1;
    for (int a = 0; a < pm.n_axes; a++) {
        snprintf(pm.names[a], sizeof pm.names[a], "%s", nm.n ? nm.v[a] : "a0");
        pm.sizes[a] = 1;
    }
    if ((rc = ir_inline_calls(m, func, err)) < 0 || (rc = ir_pctx_new(m, func, &pm, &probe, err)) < 0 ||
        (rc = unit_dims(probe, opts, &dm, err)) < 0 ||
        (rc = mesh_shapes(req, &nm, &dm, &opts->device, &sh, &considered, err)) < 0)
        goto out;
    if (req->manual) {
        /* the tactics' text and names, checked once (their divisibility per mesh) */
        ir_partition *p = NULL;
        rc = ir_partition_new(probe, &p, err);
        if (rc == 0)
            rc = ir_schedule_apply(p, req->manual, err);
        ir_partition_free(p);
        if (rc < 0)
            goto out;
    }
    /* the engines' options: one thread each, progress through the driver */
    if ((rc = search_options_resolve(opts, nm.n ? nm.n : 1, &d.o, err)) < 0)
        goto out;
    int threads = d.o.threads;
    d.o.threads = 1;
    d.o.axes = opts->axes;
    d.o.progress = driver_progress;
    /* a checkpoint is one tree's: the meshes' engines start afresh */
    d.o.resume = NULL;
    d.o.resume_len = 0;
    d.o.cache_bytes = d.o.cache_bytes / (size_t)(threads + KEEP);
    bool no_budget = opts->max_episodes == 0 && opts->time_limit_s == 0 && opts->patience == 0;
    int64_t total = opts->max_episodes > 0 ? opts->max_episodes : no_budget ? (int64_t)PER_MESH * sh.n : 0;
    double end = opts->time_limit_s > 0 ? d.t0 + opts->time_limit_s : 0;
    d.n_slots = sh.n;
    d.slots = ap_calloc((size_t)sh.n, sizeof *d.slots);
    d.rows = ap_calloc((size_t)sh.n, sizeof *d.rows);
    alive = ap_calloc((size_t)(KEEP + threads + 1), sizeof *alive);
    batch = ap_calloc((size_t)threads + 1, sizeof *batch);
    if (!d.slots || !d.rows || !alive || !batch)
        goto oom;
    for (int i = 0; i < sh.n; i++) {
        slot *s = &d.slots[i];
        s->d = &d;
        s->index = i;
        s->best.axes = sh.v[i].k;
        s->mesh.n_axes = sh.v[i].k;
        for (int a = 0; a < sh.v[i].k; a++) {
            if (nm.n)
                snprintf(s->mesh.names[a], sizeof s->mesh.names[a], "%s", nm.v[a]);
            else
                snprintf(s->mesh.names[a], sizeof s->mesh.names[a], "a%d", a);
            s->mesh.sizes[a] = sh.v[i].size[a];
        }
    }
    /* the first look: each mesh a share, `threads` side by side; the best
     * KEEP stay, in order */
    /* the first look, the halvings down to one mesh, and the last run of
     * that one alone */
    int stages = 2;
    for (int n = sh.n < KEEP ? sh.n : KEEP; n > 1; n = (n + 1) / 2)
        stages++;
    /* Under a time budget alone, a first look is a mesh's root pass and
     * one batch, meshes taken in order (fewer axes first) while the first
     * half of the budget lasts: a fixed share each left a large program
     * (Llama-3-8B on 128 devices, 29 meshes) without a finished root pass
     * on any mesh, and overran 60 s by two minutes.  A small program looks
     * at every mesh in a second and leaves the time to the rounds. */
    bool timed = total == 0 && end > 0 && sh.n > 1;
    double look_end = d.t0 + opts->time_limit_s / 2;
    /* Under an episode budget whose first half, shared out, is less than
     * the first mesh's root pass and one batch, likewise: that much each,
     * to the meshes in order while their looks fit in half the budget (at
     * least one).  Llama-3-8B on 128 devices (29 meshes) under 1,000
     * episodes gave each 17, no root pass anywhere, and the meshes were
     * ranked on a few decisions each (FSDP 128, the expert's, 5% ahead of
     * the answer).  The meshes looked at are counted here, in order, not
     * as the threads run them: the answer does not depend on the thread
     * count. */
    int looks = sh.n;
    int64_t share = total > 0 ? (total / (2 * sh.n) > 0 ? total / (2 * sh.n) : 1) : 0;
    bool scarce = false;
    for (int64_t sum = 0, i = 0; total > 0 && sh.n > 1 && i < sh.n; i++) {
        slot *s = &d.slots[i];
        if ((rc = slot_open(s, &s->err)) < 0) {
            if (err)
                *err = s->err;
            goto out;
        }
        int64_t look = s->unusable ? 0 : search__engine_first_look(s->eng);
        if (i == 0 && share >= look)
            break; /* a share each is a first look: as it was */
        scarce = true;
        if (i > 0 && sum + look > total / 2) {
            looks = (int)i;
            slot_free(s); /* opened to size its look: not looked at */
            break;
        }
        s->target = look < total - sum ? look : total - sum;
        sum += look;
    }
    for (int i = 0; i < sh.n;) {
        if (timed && i > 0 && ap_mono_s() >= look_end)
            break; /* the rest untried: meshes_considered counts them */
        if (i >= looks)
            break;
        int n = 0;
        for (; i < sh.n && i < looks && n < threads; i++, n++) {
            slot *s = &d.slots[i];
            if (!scarce)
                s->target = sh.n == 1 ? total : share;
            s->share_s = end > 0 ? (sh.n == 1 ? end - ap_mono_s() : opts->time_limit_s * threads / (2.0 * sh.n)) : 0;
            s->ends = sh.n == 1;
            if (timed) {
                double left = look_end - ap_mono_s(), least = opts->time_limit_s / 10;
                s->first_look = true;
                s->share_s = left > least ? left : least;
            }
            batch[n] = s;
        }
        run_slots(batch, n, threads);
        d.n_looked = i;
        for (int k = 0; k < n; k++) {
            slot *s = batch[k];
            if (s->rc < 0) {
                rc = s->rc;
                if (err)
                    *err = s->err;
                goto out;
            }
            if (s->unusable) {
                slot_free(s);
                continue;
            }
            alive[n_alive++] = s;
            rank_slots(alive, n_alive);
            if (n_alive > KEEP) {
                slot *gone = alive[--n_alive];
                if ((rc = add_row(&d, gone, false, err)) < 0)
                    goto out;
                slot_free(gone);
            }
        }
    }
    if (n_alive == 0) {
        rc = ap_error_set(err, AP_EINVALID, "devices: the manual tactics apply on none of the %d meshes of %lld devices",
                          sh.n, (long long)req->devices);
        goto out;
    }
    /* then rounds: the budget left split over the stages, each stage's
     * share among the meshes in it, the better half going on */
    for (int stage = 1; stage < stages && sh.n > 1 && !atomic_load(&d.halt); stage++) {
        int64_t left = total > 0 ? total - spent(&d) : 0;
        double tleft = end > 0 ? end - end_reserve(alive, n_alive) - ap_mono_s() : 0;
        if ((total > 0 && left <= 0) || (end > 0 && tleft <= 0) || (total == 0 && end == 0))
            break;
        int runs = stages - stage;
        bool last = n_alive == 1;
        for (int k = 0; k < n_alive; k++) {
            slot *s = alive[k];
            int64_t add = last ? left : left / runs / n_alive;
            s->target = total > 0 ? s->best.episodes + (add > 0 ? add : 1) : 0;
            s->share_s = end > 0 ? (last ? tleft : tleft / runs * (n_alive < threads ? n_alive : threads) / n_alive) : 0;
        }
        run_slots(alive, n_alive, threads);
        for (int k = 0; k < n_alive; k++)
            if (alive[k]->rc < 0) {
                rc = alive[k]->rc;
                if (err)
                    *err = alive[k]->err;
                goto out;
            }
        rank_slots(alive, n_alive);
        int keep = (n_alive + 1) / 2;
        while (n_alive > keep) {
            slot *gone = alive[--n_alive];
            if ((rc = add_row(&d, gone, false, err)) < 0)
                goto out;
            slot_free(gone);
        }
    }
    rc = finish(&d, alive, n_alive, considered, out, err);
    goto out;
oom:
    rc = ap_error_set(err, AP_ENOMEM, "out of memory");
out:
    if (rc < 0)
        search_result_free(out);
    for (int i = 0; d.slots && i < d.n_slots; i++)
        slot_free(&d.slots[i]);
    ap_free(d.slots);
    ap_free(d.rows);
    ap_free(d.best_text);
    ap_free(alive);
    ap_free(batch);
    ap_free(sh.v);
    ap_free(dm.v);
    ir_pctx_free(probe);
    pthread_mutex_destroy(&d.mu);
    return rc;
}
