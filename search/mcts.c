/*
 * mcts.c - the tree search: decisions evaluated at the start state,
 * batches of leaves chosen by UCT over the best reward below each child,
 * evaluated by worker threads, backed up in batch order.
 *
 * A node is a partition state, named by its hash (a transposition table
 * maps hashes to nodes, so two orders of the same actions share a node).
 * It keeps no state of its own: a worker re-derives a node's state by
 * replaying the decisions of its canonical path (the one that created it)
 * from the deepest ancestor in the shared cache of states.  A
 * state of T32 is about 1 MB; a tree of tens of thousands of nodes keeps
 * only hashes, values and edges.
 *
 * Reward: the objective J = step time, times a steep penalty above the
 * memory limit ((peak/limit)^4: continuous at the limit, 16 times at twice
 * it), relative to the start state's: reward = J(start) / J.  The result
 * is the fastest state that fits (else the lowest peak) whatever the
 * rewards; the penalty only steers, and being continuous it ranks a fast
 * state just over the limit next to one as fast just under it, rather
 * than behind every slow state that fits: the steps that make it fit are
 * still to come.  A node's value is the best reward in its subtree
 * (the problem is deterministic: there is no noise to average away).
 *
 * Order of expansion: decisions are tried in the order of the step time
 * each gives alone at the start state (a policy prior from cost deltas;
 * the memory limit enters through the rewards and the completion below:
 * ranked by penalized reward, every step that saved memory came first and
 * the searches settled on slow schedules that fit), with
 * progressive widening: a node visited v times has at most 1 + 2 sqrt(v)
 * children (search_options.widening), so the best-looking steps are
 * expanded first and the rest as the node earns visits.  UCT chooses among
 * children by their best reward below, relative to the best found, plus
 * 0.7 sqrt(ln N / n): enough exploration that a first step which looks
 * worse (Megatron's attention heads, against sequence parallelism) gets
 * its next step tried.  The seed adds a little noise (2% of a score) and
 * breaks ties.
 *
 * Alike children: steps whose states the scores cannot tell apart (step
 * time and peak within 0.1%) can still lead apart.  On T32 under 90 GiB,
 * `w_down` sharded along `batch` on its hidden dim or on d_model cost the
 * same at the start; the first keeps Megatron's MLP split off the hidden
 * dim later (3.87 s once it fits), the second leaves it free (3.74 s).
 * By its own value the one whose line was found first led for good and
 * its alike sibling was never looked at past its first step (13 of 25
 * seeds).  So a child's value is the best reward below it or below any
 * sibling alike to it: alike children share what the others found, and
 * the visits go to whichever has had fewer.
 *
 * Kinds first: under a memory limit the start does not meet, a node over
 * the limit tries one decision of each kind first and the others after
 * (each part in prior order): decisions whose states at the start were
 * alike (as above; twins apart, twin_state handles them) are of one kind,
 * and only the first of it stays ahead.  Far over the limit the penalty
 * leaves a fresh child's value near nothing beside a subtree that holds a
 * state that fits, so what such a node tries is set by the widening's
 * order, and near-copies took its slots.  On T32 under 90 GiB the start's
 * order, after the sequence dim and the attention heads, had nine steps
 * that shard d_model along `model` through different units (two kinds:
 * 8.24 and 8.45 s, both 285.6 GiB) ahead of Megatron's MLP split (14th;
 * now 9th).  The MLP split must come before `targets` goes along `model`
 * (4.20 s / 105.4 GiB, then 3.79 s / 94.8 GiB and 3.740 s once it fits;
 * the other order fits only at 3.87 s); on seeds 14 and 15 the state
 * with both came at episodes 966 and 956, after the completion had
 * fitted the other order, and 1,000 episodes ended at 3.868 and 3.886 s.
 * Kinds first, the 25 seeds reach 3.740 s at episodes 586-961 (before:
 * 602-1,100).  At a node that fits, or without a limit, the values tell
 * children apart, and the later steps of a kind are what the best's last
 * tenths of a percent come from, so the order stays as the prior gives
 * it: kinds first everywhere made t32-bp (no limit) worse on 15 of 25
 * seeds (3.7617 -> up to 3.7951 s) and bench_experts T1 (from scratch
 * under the HBM, 500 episodes) 2.860 -> 2.870 s.
 *
 * Beside UCT, a quarter of each batch climbs from the best node found so
 * far (its next untried decisions, past the widening), so a long line of
 * improving steps is followed as fast as it improves.
 *
 * Under a binding memory limit the fastest schedules often do not fit as
 * they are: the fit comes last, from sharding the state (parameters and
 * optimizer moments along the data axis: ZeRO, FSDP).  So another quarter
 * of each batch completes a state over the limit with its memory-saving
 * decisions (those that lowered the start's peak), in the order of the
 * bytes each saved at the start per second of step time it cost there
 * (those that cost none first): the state the completion expects to end
 * fastest once it fits, and only while that beats the best that fits.
 * Each step is a node of the tree, scored as any; a state a memory-saving
 * step made goes on with the steps after it in that order, so a set of
 * them is tried once, not in every order.
 *
 * What the completion expects rests on two figures.  The start's: the
 * time its remaining memory-saving decisions cost there until the bytes
 * they saved there cover the excess.  And the price of memory it has
 * paid: once a completion fits, the step time it added per byte its lead
 * was over the limit; a state over the limit by X bytes is expected no
 * sooner than its own time plus X at the lowest price paid so far (a
 * Lagrangian bound: time + price x excess), whichever is later.  The
 * start's figures alone are blind to the order of steps, and the order
 * decides what sharding costs later: on T32 under 90 GiB a state that has
 * taken the large steps along `model` still counts the hundreds of GiB
 * each of the others saved at the start, so every state over the limit
 * looked a free completion away from fitting and the fastest always led.
 * The fastest took `batch['targets']` along `model` first (the no-limit
 * path), after which each parameter sharded along `batch` costs 3.3%
 * (3.87 s to fit), and the completion spent its quarter there while the
 * state with Megatron's MLP split first, 0.03 s slower and 7 GiB lower,
 * where that sharding is free (3.740 s at 86.7 GiB), waited.  Priced, the
 * lower state leads once the first completion has shown what a byte
 * costs on the other path.
 *
 * The completion takes up no state alike to one it took up already (step
 * time and peak within 0.1%): by the start's figures the two complete
 * alike, and each copy, expected to fit as soon as the first was before
 * its completion showed otherwise, came next in turn.  With alike children
 * sharing their value UCT makes more such copies (the small transformer
 * under Z3's peak + 2%: the completion went from copy to copy and nothing
 * fitted in 400 episodes on seeds 2-6); even without, 6 of the first 80
 * seeds of T32's layout with 2 layers under 7.8 GiB ended 3-5% slower for
 * it (test_search completion_takes_up_no_alike_state).
 *
 * Twins: decisions that gave one state at the start are one child of the
 * root, but not everywhere: propagation ties w_up's hidden dim to
 * w_down's through the MLP only while that axis is free there; once the
 * batch is tiled along it (from scratch), each parameter is tiled along it
 * on its own (FSDP), and keeping one twin for good left M1's w_down
 * replicated on fsdp=64 (119.9 GiB, the zoo's FSDP 30.6).  So every twin
 * stays in the order, and at a node a twin is passed over only when a
 * sibling twin's child there holds it (its unit tiled so, which the worker
 * that made the child checks), and waits while a sibling is in the batch.
 *
 * Threads: the coordinating thread is worker 0 and evaluates beside the
 * others (with one thread there are no hand-offs).  Workers share one
 * cache of states (see cache_ent) and one memo of graph runs (their
 * scorers', cost_scorer_share), and take the tasks of a batch longest
 * expected first, so fewer wait at the end of a batch.
 *
 * Determinism: selection, expansion order and backup run on the
 * coordinating thread in a fixed order; a worker's evaluation is a function
 * of the path and the decision alone (the fast scorer's result does not
 * depend on what it scored before); so the tree, and the result, depend on
 * the seed and the episode budget only.
 */
#include "search_int.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PENALTY_POWER 4.0
#define SEED_NOISE 0.02 /* of a child's normalized score: seeds grow different trees */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ============================================================== workers */

/* One evaluation: decision d applied to the node at the end of `chain`. */
typedef struct task {
    /* in */
    uint32_t parent;
    uint32_t decision;
    uint32_t chain0, chain_n; /* the parent's canonical path: chain[chain0 ..], chain_dec[chain0 ..] */
    uint64_t parent_key;      /* the parent's cache key (node_key) */
    uint64_t parent_hash;     /* the parent's state's hash */
    uint32_t path0, path_n;   /* the selection path (nodes root .. parent) */
    uint32_t near0, near_n;   /* the decisions its state takes, ascending: near[near0 ..] (claim) */
    bool claimed;             /* taken by a worker */
    bool completes;           /* a step of the completion (complete_lead) */
    bool exact;               /* the result's: node `exact_of`'s state scored again with the lowest peak
                                 (exact_peaks); decision SEARCH_NONE for the start */
    uint32_t exact_of;
    uint64_t exact_hash;      /* the hash of exact_of's state */
    int worker;               /* which */
    double cpu_s;             /* CPU seconds its evaluation took */
    /* out */
    int status; /* 0 evaluated, 1 refused, 2 unchanged, < 0 error */
    uint64_t hash;
    double runtime_s;
    int64_t peak;
    bool implied; /* the state holds every twin of the decision */
    ap_error err;
} task;

/* A cached state is keyed by the step that made it, (parent node,
 * decision), not by its hash: two orders of the same actions give states
 * of one hash whose logs (and identity ops' order) differ, and a node's
 * state must be the one its canonical path gives, whichever worker holds
 * what - else the schedule printed would depend on the thread count.
 *
 * The cache is shared by the workers (under the engine's lock): a state
 * one worker derived serves the others, so a second thread does not
 * replay paths the first already walked.  A worker pins an entry while it
 * copies from it; an entry being derived has no state yet (building) and
 * a worker that needs it waits, or takes other work. */
typedef struct cache_ent {
    uint64_t key;
    ir_partition *p; /* NULL: free, or building */
    uint64_t used;
    uint32_t pins;
    bool building;
} cache_ent;

typedef struct search_engine engine;

static int search__progress(engine *e);
static uint32_t tt_find(const engine *e, uint64_t h);

/* The most decisions claim compares of a state (the path's depth is at
 * most MAX_DEPTH, below): past them a distance only counts less. */
#define NEAR_MAX 72

typedef struct worker {
    engine *e;
    pthread_t thread;
    cost_scorer *scorer; /* NULL: the full path (cost_state_estimate) */
    cost_scorer *exact;  /* the result's exact peaks (exact_scorer), made when first needed */
    /* counters for the result */
    int64_t replays;     /* actions re-applied to re-derive a node's state */
    int64_t hits;        /* node states found in the cache */
    int64_t known;       /* evaluations whose state the tree already held */
    int64_t scored;      /* evaluations scored */
    int64_t refused, unchanged;
    /* the decisions of the state it evaluated last, ascending (claim) */
    uint32_t last[NEAR_MAX];
    uint32_t n_last;
    /* where its time went (wall seconds), and its CPU time */
    double t_state, t_apply, t_score, t_busy, t_wait;
    double cpu_s; /* CPU seconds of its evaluations (not the thread's since it started:
                     the coordinator's thread did other work before the search) */
} worker;

struct search_engine {
    const ir_partition *start;
    ir_partition *base;  /* a copy of start that records nothing blocked: candidates derive from it */
    const ir_pctx *c;
    search_options o;
    search_units units;
    double limit;        /* bytes, < 0 none */
    /* decisions */
    search_decision *dec;
    uint32_t n_dec;
    double *est;         /* per decision: seconds an evaluation takes, recent average (0 unknown; under mu) */
    uint32_t *order;     /* decisions in the order they are tried */
    uint32_t *wide;      /* the same, kinds first (kinds_first): the order at a node over
                            the memory limit; else order itself */
    uint32_t n_order;
    uint32_t n_distinct; /* of them, distinct at the start (twins counted once) */
    uint32_t *save;      /* of them, those that lowered the start's peak, by bytes saved per
                            second of step time (under a memory limit; else none) */
    uint32_t n_save;
    uint32_t *save_at;   /* per decision: its place in the save order + 1 (0: not there) */
    uint32_t *stamp;     /* per unit and axis: completed_time's marks (stamp_gen: this call's) */
    uint32_t stamp_gen;
    double price;        /* seconds of step time per byte over the limit that a completion
                            paid to fit, the lowest so far (INFINITY: none has fitted) */
    /* the tree */
    search_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *tt;        /* open addressing over hashes: node index or SEARCH_NONE */
    uint32_t cap_tt;
    uint32_t *pending;   /* per node: expansions selected, not yet backed up */
    uint32_t n_as_start; /* nodes but the root whose step time is the start's (exact_count) */
    double j0;           /* the start's objective */
    double best_reward;
    uint32_t best;       /* the result: fastest within the limit, else lowest peak */
    int64_t episodes, best_episode;
    double best_time; /* seconds into the search when the best was found */
    bool exhausted;
    /* batch */
    task *tasks;
    uint32_t n_tasks, cap_tasks;
    uint32_t *chain;     /* nodes of the tasks' canonical paths */
    uint32_t *chain_dec; /* their decisions: a worker reads the path from these, not from the tree */
    uint32_t n_chain, cap_chain;
    uint32_t *paths;     /* nodes of the tasks' selection paths */
    uint32_t n_paths, cap_paths;
    uint32_t *near;      /* decisions of the tasks' states, each task's ascending */
    uint32_t n_near, cap_near;
    /* threads */
    worker *w;
    int n_workers;
    pthread_mutex_t mu;
    pthread_cond_t go, done, built;
    /* states, shared (under mu) */
    cache_ent *cache;
    int cap_cache;
    uint64_t tick;
    /* states no longer needed, whose buffers the next copy reuses (a
     * state of T32 is about 1 MB: allocating it anew faults its pages in
     * each time).  Under mu. */
    ir_partition **pool;
    int n_pool, cap_pool;
    uint64_t batch_id;
    uint32_t next_task, n_done;
    /* the result's exact re-scores: claimed in the order queued (siblings
     * together), from the first unclaimed, without claim's pass over the
     * batch: they can be tens of thousands (a program whose every state
     * costs the same: 8,324 episodes of one select, the end took 3.8 s;
     * a dynamic select under a 2 s budget never ended) */
    bool in_order;
    uint32_t first_open;
    /* a batch is open: its tasks belong to the workers.  While it is not,
     * the coordinator builds the next batch without the lock, so a worker
     * that wakes late (from waiting on a state) must not touch the tasks:
     * one that did claimed tasks of a batch still being built, and the
     * batch then never counted them done (the search hung). */
    bool running;
    bool quit;
    double batch_s;      /* wall seconds batches ran (workers busy or waiting at the barrier) */
    double eval_s;       /* wall seconds an evaluation takes, recent average (under mu): what
                            sizes a batch to the time left under a time budget */
    double imbalance_s;  /* CPU seconds workers would wait at barriers on an idle machine */
    double *load;        /* per worker: CPU seconds in the current batch */
    bool fallback;       /* scored through the full lowering */
    ap_error scorer_why;
    uint64_t rng;        /* UCT's noise, from the seed */
    uint32_t root_next;  /* the root pass's next decision */
    uint32_t *arm;       /* UCT's scratch, per edge of a node: the first live sibling alike to its child */
    double *arm_best;    /* per edge first of its kind: the best reward below any child alike to its own */
    uint32_t cap_arm;
    uint32_t *led;       /* the states the completion took up as leads, in order */
    uint32_t n_led, cap_led;
    int stop;            /* the progress callback asked to stop */
    atomic_int *halt;    /* NULL, or set by another thread to stop this search */
    double deadline;     /* ap_mono_s() at which the time budget ends; 0 none */
    bool reserve;        /* the episodes end early by what the result will take (end_s): the
                            deadline is the answer's (search_run; mesh.c reserves its own) */
    const char *stopped_by;
    double wall_s;       /* of the search, without the result's lowering */
    /* progress */
    search_log log;      /* the checkpoint: outcomes so far (ckpt.c) */
    bool final;          /* the last progress call */
    double t0, last_progress;
    char *best_text;
    uint32_t best_text_node;
};

static double objective(const engine *e, double runtime, int64_t peak)
{
    if (e->limit < 0 || (double)peak <= e->limit)
        return runtime;
    return runtime * pow((double)peak / e->limit, PENALTY_POWER);
}

static bool fits(const engine *e, int64_t peak) { return e->limit < 0 || (double)peak <= e->limit; }

/* Whether two states' figures agree to ALIKE_TOL, step time and peak
 * both: what the search's scores cannot tell apart. */
#define ALIKE_TOL 1e-3

static bool alike_figures(double runtime_a, int64_t peak_a, double runtime_b, int64_t peak_b)
{
    return fabs(runtime_a - runtime_b) <= ALIKE_TOL * runtime_b &&
           fabs((double)(peak_a - peak_b)) <= ALIKE_TOL * (double)peak_b;
}

static bool alike(const search_node *a, const search_node *b)
{
    return alike_figures(a->runtime_s, a->peak, b->runtime_s, b->peak);
}

/* ------------------------------------------------------------ the cache */

#define ROOT_KEY UINT64_MAX

static uint64_t step_key(uint32_t parent, uint32_t decision) { return (uint64_t)parent << 32 | decision; }

static uint64_t node_key(const search_node *n)
{
    return n->parent == SEARCH_NONE ? ROOT_KEY : step_key(n->parent, n->decision);
}

/* A spare state for copy_state, or NULL.  Under e->mu. */
static ir_partition *pool_take(engine *e) { return e->n_pool ? e->pool[--e->n_pool] : NULL; }

/* Takes p (NULL: nothing) for reuse.  Under e->mu. */
static void pool_give(engine *e, ir_partition *p)
{
    if (!p)
        return;
    if (e->n_pool < e->cap_pool)
        e->pool[e->n_pool++] = p;
    else
        ir_partition_free(p);
}

/* *out = a copy of src, made in spare (taken; NULL: a new state). */
static int copy_state(ir_partition *spare, const ir_partition *src, ir_partition **out, ap_error *err)
{
    if (!spare)
        return ir_partition_clone(src, out, err);
    int rc = ir_partition_copy(spare, src, err);
    if (rc < 0) {
        ir_partition_free(spare);
        return rc;
    }
    *out = spare;
    return 0;
}

/* The entry holding key (ready or building), or -1.  Under e->mu. */
static int cache_find(const engine *e, uint64_t key)
{
    for (int i = 0; i < e->cap_cache; i++)
        if ((e->cache[i].p || e->cache[i].building) && e->cache[i].key == key)
            return i;
    return -1;
}

/* A slot for a new entry: a free one, else the least recently used entry
 * nobody pins (its state is freed); -1 when every entry is in use.  Under
 * e->mu. */
static int cache_slot(engine *e)
{
    int slot = -1;
    for (int i = 0; i < e->cap_cache; i++) {
        cache_ent *c = &e->cache[i];
        if (!c->p && !c->building)
            return i;
        if (c->building || c->pins)
            continue;
        if (slot < 0 || c->used < e->cache[slot].used)
            slot = i;
    }
    if (slot >= 0) {
        pool_give(e, e->cache[slot].p);
        e->cache[slot].p = NULL;
    }
    return slot;
}

/* Keeps p under key (taking it), or gives it back to the pool when every
 * entry is in use.  Under e->mu. */
static void cache_put(engine *e, uint64_t key, ir_partition *p)
{
    int slot = cache_find(e, key);
    if (slot >= 0) {
        /* derived twice (it was evicted meanwhile, or is building): keep one */
        pool_give(e, p);
        return;
    }
    slot = cache_slot(e);
    if (slot < 0) {
        pool_give(e, p);
        return;
    }
    e->cache[slot] = (cache_ent){key, p, ++e->tick, 0, false};
}

/* --------------------------------------------------------- evaluation */

static int score_state(worker *w, const ir_partition *p, double *runtime, int64_t *peak, ap_error *err)
{
    engine *e = w->e;
    cost_report r;
    int rc;
    if (w->scorer)
        rc = cost_scorer_score(w->scorer, p, &r, err);
    else
        rc = cost_state_estimate(p, &e->o.device, e->o.tiers, &e->o.cost, NULL, &r, err);
    if (rc < 0)
        return rc;
    *runtime = r.runtime_s;
    *peak = r.peak_memory_bytes;
    return 0;
}

/* Applies decision d to p. */
static int redo(engine *e, ir_partition *p, uint32_t d, ap_error *err)
{
    int rc = search__apply(p, &e->units, e->dec[d].a, err);
    if (rc > 0)
        rc = ap_error_set(err, AP_EINTERNAL, "replaying a path: an action it took is refused");
    return rc;
}

/* The state at the end of a canonical path whose decisions are
 * decs[0 .. n) (decs[i] made the node at depth i + 1), from base (the
 * state of the node at depth `from`, or the start when from is 0), made in
 * spare (taken; may be NULL): a state owned by the caller.  Reads no node
 * of the tree. */
static int replay(worker *w, const uint32_t *decs, uint32_t from, uint32_t n, const ir_partition *base,
                  ir_partition *spare, ir_partition **out, ap_error *err)
{
    engine *e = w->e;
    ir_partition *p;
    int rc = copy_state(spare, base ? base : e->base, &p, err);
    if (rc < 0)
        return rc;
    w->replays += (int64_t)(n - from);
    for (uint32_t i = from; i < n; i++)
        if ((rc = redo(e, p, decs[i], err)) < 0) {
            ir_partition_free(p);
            return rc;
        }
    *out = p;
    return 0;
}

/* The deepest node of t's chain whose state is cached and ready: pins
 * it, returns its depth (0: none, the start) and its entry in *slot (-1
 * for the start).  Under e->mu. */
static uint32_t deepest_cached(engine *e, const task *t, int *slot)
{
    const uint32_t *chain = &e->chain[t->chain0], *decs = &e->chain_dec[t->chain0];
    for (uint32_t d = t->chain_n; d > 0; d--) {
        int s = cache_find(e, step_key(d >= 2 ? chain[d - 2] : 0, decs[d - 1]));
        if (s >= 0 && e->cache[s].p) {
            e->cache[s].pins++;
            e->cache[s].used = ++e->tick;
            *slot = s;
            return d;
        }
    }
    *slot = -1;
    return 0;
}

/* What a task needs before it can run: its parent's state. */
enum { NEED_READY, NEED_BUILD, NEED_WAIT };

static int need_of(const engine *e, const task *t)
{
    if (t->chain_n == 0)
        return NEED_READY; /* the start */
    int s = cache_find(e, t->parent_key);
    if (s < 0)
        return NEED_BUILD;
    return e->cache[s].building ? NEED_WAIT : NEED_READY;
}

/* The parent state of a claimed task, pinned (*slot; -1 with *own set
 * when the state is the start or was not cached: *own is then freed, or
 * is the start, by the caller).  Called under e->mu, which it may drop
 * and retake. */
static int parent_state(worker *w, const task *t, const ir_partition **out, int *slot, ir_partition **own,
                        ap_error *err)
{
    engine *e = w->e;
    *own = NULL;
    *slot = -1;
    if (t->chain_n == 0) {
        w->hits += !t->exact; /* the result's re-scores are no evaluations of the search */
        *out = e->base;
        return 0;
    }
    uint64_t key = t->parent_key;
    int s = cache_find(e, key);
    if (s >= 0 && e->cache[s].p) {
        w->hits += !t->exact;
        e->cache[s].pins++;
        e->cache[s].used = ++e->tick;
        *slot = s;
        *out = e->cache[s].p;
        return 0;
    }
    /* derive it: from the deepest cached ancestor, announcing the work */
    int bslot;
    uint32_t from = deepest_cached(e, t, &bslot);
    int ps = cache_slot(e);
    if (ps >= 0)
        e->cache[ps] = (cache_ent){key, NULL, ++e->tick, 1, true};
    const ir_partition *base = bslot >= 0 ? e->cache[bslot].p : NULL;
    ir_partition *spare = pool_take(e);
    pthread_mutex_unlock(&e->mu);
    ir_partition *p = NULL;
    int rc = replay(w, &e->chain_dec[t->chain0], from, t->chain_n, base, spare, &p, err);
    pthread_mutex_lock(&e->mu);
    if (bslot >= 0)
        e->cache[bslot].pins--;
    if (ps >= 0) {
        e->cache[ps].building = false;
        e->cache[ps].p = p; /* NULL on failure: the slot is free again */
        if (!p)
            e->cache[ps].pins = 0;
        pthread_cond_broadcast(&e->built);
    }
    if (rc < 0)
        return rc;
    if (ps >= 0) {
        *slot = ps;
    } else {
        *own = p;
    }
    *out = p;
    return 0;
}

static int finish(worker *w, task *t, ir_partition *p, int rc);

/* The rest of an exact task, without the lock: p's peak, the lowest of
 * its orders, into t->peak (status 0), else the error (status < 0). */
static int finish_exact(worker *w, task *t, ir_partition *p, int rc)
{
    if (rc > 0)
        rc = ap_error_set(&t->err, AP_EINTERNAL, "replaying a path: an action it took is refused");
    if (rc == 0 && ir_partition_hash(p) != t->exact_hash)
        rc = ap_error_set(&t->err, AP_EINTERNAL, "replaying a path: it gave another state");
    cost_report r;
    if (rc == 0 && (rc = cost_scorer_score(w->exact, p, &r, &t->err)) == 0)
        t->peak = r.peak_memory_bytes;
    t->status = rc;
    return rc;
}

/* Does state p hold every twin of decision d (the decisions that gave the
 * start state d gave)?  A twin that tiles holds when its unit's leader is
 * tiled on its dim along its axis; an atomic one is taken to hold (as all
 * twins were before the tree told them apart). */
static bool twins_held(const engine *e, const ir_partition *p, uint32_t d)
{
    for (uint32_t m = e->dec[d].twin; m != SEARCH_NONE && m != d; m = e->dec[m].twin) {
        search_action a = e->dec[m].a;
        if (a.dim < 0)
            continue;
        ir_layout l;
        const search_unit *u = &e->units.v[a.unit];
        ir_partition_value_layout(p, ir_pctx_value(e->c, e->units.members[u->first]), &l);
        if (l.dim[a.axis] != a.dim)
            return false;
    }
    return true;
}

/* Evaluates a claimed task.  Called under e->mu; drops it while it works
 * and returns holding it. */
static void evaluate(worker *w, task *t)
{
    engine *e = w->e;
    ap_error_clear(&t->err);
    const ir_partition *parent = NULL;
    ir_partition *own = NULL, *p = NULL;
    int slot = -1;
    double t0 = ap_mono_s();
    int rc = parent_state(w, t, &parent, &slot, &own, &t->err);
    ir_partition *spare = rc == 0 ? pool_take(e) : NULL;
    pthread_mutex_unlock(&e->mu);
    double t1 = ap_mono_s();
    w->t_state += t1 - t0;
    if (rc == 0)
        rc = copy_state(spare, parent, &p, &t->err);
    pthread_mutex_lock(&e->mu);
    if (slot >= 0)
        e->cache[slot].pins--;
    pool_give(e, own);
    pthread_mutex_unlock(&e->mu);
    if (rc == 0 && t->decision != SEARCH_NONE)
        rc = search__apply(p, &e->units, e->dec[t->decision].a, &t->err);
    if (t->exact) {
        rc = finish_exact(w, t, p, rc);
        pthread_mutex_lock(&e->mu);
        pool_give(e, p);
        return;
    }
    w->t_apply += ap_mono_s() - t1;
    rc = finish(w, t, p, rc);
    double dt = ap_mono_s() - t1;
    pthread_mutex_lock(&e->mu);
    if (e->est)
        e->est[t->decision] = e->est[t->decision] > 0 ? 0.75 * e->est[t->decision] + 0.25 * dt : dt;
    if (rc == 0)
        cache_put(e, step_key(t->parent, t->decision), p);
    else
        pool_give(e, p);
}

/* The rest of an evaluation, without the lock: returns 0 when p is a new
 * state to keep, 1 when not (p, NULL or partly changed, is the caller's
 * to give back). */
static int finish(worker *w, task *t, ir_partition *p, int rc)
{
    engine *e = w->e;
    if (rc == 1) {
        w->refused++;
        t->status = 1;
        return 1;
    }
    if (rc < 0) {
        t->status = rc;
        return 1;
    }
    t->hash = ir_partition_hash(p);
    if (t->hash == t->parent_hash) {
        w->unchanged++;
        t->status = 2;
        return 1;
    }
    t->implied = twins_held(e, p, t->decision);
    /* a state the tree already holds (another order of the same actions):
     * its score is known.  The tree does not change while a batch runs. */
    uint32_t known = tt_find(e, t->hash);
    if (known != SEARCH_NONE) {
        w->known++;
        t->runtime_s = e->nodes[known].runtime_s;
        t->peak = e->nodes[known].peak;
        t->status = 0;
        /* p is not this node's canonical state */
        return 1;
    }
    w->scored++;
    double t2 = ap_mono_s();
    rc = score_state(w, p, &t->runtime_s, &t->peak, &t->err);
    w->t_score += ap_mono_s() - t2;
    if (rc < 0) {
        /* a state the lowering refuses is no candidate */
        t->status = 1;
        return 1;
    }
    t->status = 0;
    return 0;
}

/* How far apart w's last state and t's are: the decisions one takes and
 * the other does not (both lists ascending). */
static uint32_t distance(const engine *e, const worker *w, const task *t)
{
    const uint32_t *a = w->last, *b = &e->near[t->near0];
    uint32_t i = 0, j = 0, na = w->n_last, nb = t->near_n, same = 0;
    while (i < na && j < nb) {
        if (a[i] == b[j]) {
            same++;
            i++;
            j++;
        } else if (a[i] < b[j]) {
            i++;
        } else {
            j++;
        }
    }
    return na + nb - 2 * same;
}

/* The next task for w, claimed, or -1 when every unclaimed task waits
 * for a state another worker is deriving.  Which worker evaluates what
 * changes nothing in the results; the order only saves time:
 *   - a task whose parent state nobody has first (the derivation is the
 *     long part: started early, it does not hold up the end of the batch);
 *   - then, among tasks whose parent state is at hand, the nearest to the
 *     state w evaluated last, the longest expected first among them: its
 *     scorer follows one state at a time and plans again the ops that
 *     differ (T32 from BP, 12,336 ops: by the longest expected alone one
 *     thread's scorer planned ~3,300 per state, each of two threads'
 *     ~4,050; nearest first ~2,900 and ~3,000);
 *   - but the batch's last tasks by the longest expected alone
 *     (evaluations take 1 to 10 ms on T32 by decision: one started last
 *     keeps the other workers waiting at the barrier).
 * Under e->mu. */
static int claim(worker *w)
{
    engine *e = w->e;
    int build = -1, ready = -1;
    if (e->in_order) {
        while (e->first_open < e->n_tasks && e->tasks[e->first_open].claimed)
            e->first_open++;
        for (uint32_t k = e->first_open; k < e->n_tasks && build < 0; k++)
            if (!e->tasks[k].claimed && need_of(e, &e->tasks[k]) != NEED_WAIT)
                build = (int)k;
    }
    bool last = e->n_tasks - e->next_task <= (uint32_t)e->n_workers;
    uint32_t nearest = UINT32_MAX;
    double longest = -1;
    for (uint32_t k = 0; k < e->n_tasks && !e->in_order; k++) {
        const task *t = &e->tasks[k];
        if (t->claimed)
            continue;
        int need = need_of(e, t);
        if (need == NEED_BUILD) {
            if (build < 0)
                build = (int)k;
        } else if (need == NEED_READY) {
            double est = e->est && t->decision < e->n_dec && e->est[t->decision] > 0 ? e->est[t->decision] : 1.0;
            uint32_t d = last ? 0 : distance(e, w, t);
            if (d < nearest || (d == nearest && est > longest)) {
                nearest = d;
                longest = est;
                ready = (int)k;
            }
        }
    }
    int i = build >= 0 ? build : ready;
    if (i >= 0) {
        task *t = &e->tasks[i];
        t->claimed = true;
        e->next_task++;
        w->n_last = t->near_n;
        /* a state that takes no decision (a program with nothing to
         * decide) has no list: e->near may still be NULL */
        if (t->near_n)
            memcpy(w->last, &e->near[t->near0], sizeof *w->last * t->near_n);
    }
    return i;
}

static bool progress_due(const engine *e);

static double thread_cpu(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Claims and evaluates tasks of the batch until none is left to claim.
 * The coordinator (stop != NULL) calls progress between its tasks.  Under
 * e->mu. */
static void work(worker *w, int *stop)
{
    engine *e = w->e;
    while (e->running && e->next_task < e->n_tasks) {
        int i = claim(w);
        if (i < 0) {
            /* what is left waits on states others derive (or on the
             * batch's end, which wakes this wait too) */
            double t0 = ap_mono_s();
            pthread_cond_wait(&e->built, &e->mu);
            w->t_wait += ap_mono_s() - t0;
            continue;
        }
        double t0 = ap_mono_s(), c0 = thread_cpu();
        evaluate(w, &e->tasks[i]);
        double dt = ap_mono_s() - t0;
        e->tasks[i].worker = (int)(w - e->w);
        e->tasks[i].cpu_s = thread_cpu() - c0;
        if (!e->tasks[i].exact) {
            w->t_busy += dt;
            e->eval_s = e->eval_s > 0 ? 0.9 * e->eval_s + 0.1 * dt : dt;
            w->cpu_s += e->tasks[i].cpu_s;
        }
        if (++e->n_done == e->n_tasks)
            pthread_cond_signal(&e->done);
        if (stop && progress_due(e)) {
            pthread_mutex_unlock(&e->mu);
            if (search__progress(e))
                *stop = 1;
            pthread_mutex_lock(&e->mu);
        }
    }
}

/* Workers 1 .. threads - 1; the coordinating thread is worker 0. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    engine *e = w->e;
    uint64_t seen = 0;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->quit && e->batch_id == seen)
            pthread_cond_wait(&e->go, &e->mu);
        if (e->quit)
            break;
        seen = e->batch_id;
        work(w, NULL);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ============================================================= the tree */

static uint32_t tt_find(const engine *e, uint64_t h)
{
    for (uint32_t i = (uint32_t)h & (e->cap_tt - 1);; i = (i + 1) & (e->cap_tt - 1)) {
        uint32_t n = e->tt[i];
        if (n == SEARCH_NONE)
            return SEARCH_NONE;
        if (e->nodes[n].hash == h)
            return n;
    }
}

static int tt_insert(engine *e, uint32_t node)
{
    if ((e->n_nodes + 1) * 2 > e->cap_tt) {
        uint32_t cap = e->cap_tt ? e->cap_tt * 2 : 1024;
        uint32_t *t = ap_malloc(sizeof *t * cap);
        if (!t)
            return AP_ENOMEM;
        memset(t, 0xff, sizeof *t * cap);
        for (uint32_t i = 0; i < e->cap_tt; i++)
            if (e->tt[i] != SEARCH_NONE) {
                uint32_t j = (uint32_t)e->nodes[e->tt[i]].hash & (cap - 1);
                while (t[j] != SEARCH_NONE)
                    j = (j + 1) & (cap - 1);
                t[j] = e->tt[i];
            }
        ap_free(e->tt);
        e->tt = t;
        e->cap_tt = cap;
    }
    uint32_t j = (uint32_t)e->nodes[node].hash & (e->cap_tt - 1);
    while (e->tt[j] != SEARCH_NONE)
        j = (j + 1) & (e->cap_tt - 1);
    e->tt[j] = node;
    return 0;
}

static int node_new(engine *e, uint64_t hash, uint32_t parent, uint32_t decision, bool completes, double runtime,
                    int64_t peak, uint32_t *out)
{
    if (e->n_nodes == e->cap_nodes) {
        uint32_t cap = e->cap_nodes ? e->cap_nodes * 2 : 1024;
        search_node *n = ap_realloc(e->nodes, sizeof *n * cap);
        if (!n)
            return AP_ENOMEM;
        e->nodes = n;
        uint32_t *pd = ap_realloc(e->pending, sizeof *pd * cap);
        if (!pd)
            return AP_ENOMEM;
        e->pending = pd;
        e->cap_nodes = cap;
    }
    uint32_t id = e->n_nodes++;
    search_node *n = &e->nodes[id];
    memset(n, 0, sizeof *n);
    n->hash = hash;
    n->parent = parent;
    n->decision = decision;
    n->depth = parent == SEARCH_NONE ? 0 : (uint16_t)(e->nodes[parent].depth + 1);
    n->runtime_s = runtime;
    n->peak = peak;
    /* a state the completion made goes on with the memory-saving
     * decisions after its own in the save order (a set of them is tried in
     * that order once, not in every order); any other from the first */
    n->next_save = completes ? e->save_at[decision] : 0;
    n->completes = completes;
    n->reward = e->j0 / objective(e, runtime, peak);
    n->best = n->reward;
    n->episode = e->episodes;
    e->n_as_start += id > 0 && runtime == e->nodes[0].runtime_s;
    e->pending[id] = 0;
    int rc = tt_insert(e, id);
    *out = id;
    return rc;
}

static int edge_add(engine *e, uint32_t node, uint32_t decision, uint32_t child, bool implied)
{
    search_node *n = &e->nodes[node];
    if (n->n_edges == n->cap_edges) {
        uint32_t cap = n->cap_edges ? n->cap_edges * 2 : 4;
        search_edge *v = ap_realloc(n->edges, sizeof *v * cap);
        if (!v)
            return AP_ENOMEM;
        n->edges = v;
        n->cap_edges = cap;
    }
    n->edges[n->n_edges++] = (search_edge){decision, child, implied};
    return 0;
}

/* Is node b the result the search keeps, rather than a? */
static bool better_result(const engine *e, uint32_t a, uint32_t b)
{
    const search_node *x = &e->nodes[a], *y = &e->nodes[b];
    bool fx = fits(e, x->peak), fy = fits(e, y->peak);
    if (fx != fy)
        return fy;
    if (fx)
        return y->runtime_s < x->runtime_s;
    /* nothing fits: the lowest peak, then the fastest */
    return y->peak < x->peak || (y->peak == x->peak && y->runtime_s < x->runtime_s);
}

/* --------------------------------------------------------- selection */

/* Whether the node at the end of the canonical path already decided
 * (unit, axis): another tile of the unit along that axis would be refused. */
static bool decided_on_path(const engine *e, uint32_t node, search_action a)
{
    for (uint32_t n = node; n != 0 && n != SEARCH_NONE; n = e->nodes[n].parent) {
        search_action b = e->dec[e->nodes[n].decision].a;
        if (b.unit == a.unit && b.axis == a.axis)
            return true;
    }
    return false;
}

/* Whether decision d is already a child of node (an edge) or taken from
 * it in the batch being built: the three ways a node grows (UCT's
 * widening, the climb from the best, the completion) keep their own
 * cursors over the decisions. */
static bool tried(const engine *e, uint32_t node, uint32_t d)
{
    const search_node *n = &e->nodes[node];
    for (uint32_t i = 0; i < n->n_edges; i++)
        if (n->edges[i].decision == d)
            return true;
    for (uint32_t k = 0; k < e->n_tasks; k++)
        if (e->tasks[k].parent == node && e->tasks[k].decision == d)
            return true;
    return false;
}

/* Whether decision d may be tried at node now (TWIN_TRY), is not worth
 * trying there (TWIN_SKIP: a twin's child there holds it, so it gives
 * that child or nothing new), or waits for a twin taken from node in the
 * batch being built (TWIN_WAIT: its outcome says which).  Twins give one
 * state at the start, where the root pass tried them together; past it
 * they part once a step changes what propagation reaches (from scratch,
 * tiling the batch along an axis leaves each parameter tiled along it on
 * its own: FSDP), so each is tried until the tree shows it implied. */
enum { TWIN_TRY, TWIN_SKIP, TWIN_WAIT };

static int twin_state(const engine *e, uint32_t node, uint32_t d)
{
    if (e->dec[d].twin == SEARCH_NONE)
        return TWIN_TRY;
    if (node == 0)
        return TWIN_SKIP; /* the root pass tried them all */
    const search_node *n = &e->nodes[node];
    for (uint32_t m = e->dec[d].twin; m != d; m = e->dec[m].twin) {
        for (uint32_t i = 0; i < n->n_edges; i++)
            if (n->edges[i].decision == m && n->edges[i].child != SEARCH_NONE && n->edges[i].implied)
                return TWIN_SKIP;
        for (uint32_t k = 0; k < e->n_tasks; k++)
            if (e->tasks[k].parent == node && e->tasks[k].decision == m)
                return TWIN_WAIT;
    }
    return TWIN_TRY;
}

/* The order a node tries decisions in, by UCT's widening and by the climb
 * (one cursor, next_try): kinds first over the limit (kinds_first). */
static const uint32_t *order_at(const engine *e, const search_node *n)
{
    return fits(e, n->peak) ? e->order : e->wide;
}

static bool can_expand(const engine *e, const search_node *n)
{
    return n->next_try < e->n_order && n->depth < e->o.max_depth;
}

/* Progressive widening: children a node visited v times may have. */
static uint32_t width(const engine *e, const search_node *n)
{
    double k = e->o.widening;
    return k > 0 ? 1 + (uint32_t)(k * sqrt((double)n->visits)) : UINT32_MAX;
}

/* Children that are not pruned, and those of them not exhausted. */
static uint32_t live_children(const engine *e, const search_node *n, uint32_t *open)
{
    uint32_t k = 0, o = 0;
    for (uint32_t i = 0; i < n->n_edges; i++) {
        uint32_t ch = n->edges[i].child;
        if (ch == SEARCH_NONE)
            continue;
        k++;
        o += !e->nodes[ch].exhausted;
    }
    *open = o;
    return k;
}

static int push_u32(uint32_t **v, uint32_t *n, uint32_t *cap, uint32_t x)
{
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 256;
        uint32_t *nv = ap_realloc(*v, sizeof *nv * c);
        if (!nv)
            return AP_ENOMEM;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* Room for n more steps of a path in e->chain and e->chain_dec (taken:
 * n_chain grows by n). */
static int chain_room(engine *e, uint32_t n)
{
    if (e->n_chain + n > e->cap_chain) {
        uint32_t cap = e->cap_chain ? e->cap_chain : 64;
        while (cap < e->n_chain + n)
            cap *= 2;
        uint32_t *c = ap_realloc(e->chain, sizeof *c * cap);
        if (!c)
            return AP_ENOMEM;
        e->chain = c;
        uint32_t *d = ap_realloc(e->chain_dec, sizeof *d * cap);
        if (!d)
            return AP_ENOMEM;
        e->chain_dec = d;
        e->cap_chain = cap;
    }
    e->n_chain += n;
    return 0;
}

/* The canonical path to node (depth steps, top down) at e->chain[at ..]
 * and its decisions at e->chain_dec[at ..]. */
static void chain_put(engine *e, uint32_t at, uint32_t node, uint32_t depth)
{
    for (uint32_t i = depth, n = node; i-- > 0; n = e->nodes[n].parent) {
        e->chain[at + i] = n;
        e->chain_dec[at + i] = e->nodes[n].decision;
    }
}

/* Empties the batch. */
static void batch_clear(engine *e) { e->n_tasks = e->n_chain = e->n_paths = e->n_near = 0; }

static int task_add(engine *e, uint32_t parent, uint32_t decision, const uint32_t *path, uint32_t path_n)
{
    if (e->n_tasks == e->cap_tasks) {
        uint32_t cap = e->cap_tasks ? e->cap_tasks * 2 : 16;
        task *t = ap_realloc(e->tasks, sizeof *t * cap);
        if (!t)
            return AP_ENOMEM;
        e->tasks = t;
        e->cap_tasks = cap;
    }
    task *t = &e->tasks[e->n_tasks++];
    memset(t, 0, sizeof *t);
    t->parent = parent;
    t->decision = decision;
    t->parent_key = node_key(&e->nodes[parent]);
    t->parent_hash = e->nodes[parent].hash;
    /* the canonical path of the parent, root excluded, top down */
    uint32_t depth = e->nodes[parent].depth;
    t->chain0 = e->n_chain;
    t->chain_n = depth;
    if (chain_room(e, depth) < 0)
        return AP_ENOMEM;
    chain_put(e, t->chain0, parent, depth);
    t->path0 = e->n_paths;
    t->path_n = path_n;
    for (uint32_t i = 0; i < path_n; i++)
        if (push_u32(&e->paths, &e->n_paths, &e->cap_paths, path[i]) < 0)
            return AP_ENOMEM;
    /* its state's decisions, ascending (insertion: a path is short) */
    t->near0 = e->n_near;
    t->near_n = 0;
    for (uint32_t i = 0; i <= depth && t->near_n < NEAR_MAX; i++) {
        uint32_t d = i < depth ? e->chain_dec[t->chain0 + i] : decision;
        if (d == SEARCH_NONE)
            continue;
        if (push_u32(&e->near, &e->n_near, &e->cap_near, d) < 0)
            return AP_ENOMEM;
        uint32_t *v = &e->near[t->near0], k = t->near_n++;
        for (; k > 0 && v[k - 1] > d; k--)
            v[k] = v[k - 1];
        v[k] = d;
    }
    return 0;
}

/* UCT among node's live children that are not exhausted: *pick, or
 * SEARCH_NONE when there is none.  A child's value is the best reward
 * below it or below any sibling alike to it (the head comment says why). */
static int uct_pick(engine *e, uint32_t node, uint64_t *rng, uint32_t *pick)
{
    const search_node *n = &e->nodes[node];
    *pick = SEARCH_NONE;
    if (n->n_edges > e->cap_arm) {
        uint32_t cap = n->n_edges * 2;
        uint32_t *a = ap_realloc(e->arm, sizeof *a * cap);
        if (!a)
            return AP_ENOMEM;
        e->arm = a;
        double *b = ap_realloc(e->arm_best, sizeof *b * cap);
        if (!b)
            return AP_ENOMEM;
        e->arm_best = b;
        e->cap_arm = cap;
    }
    /* kinds: each live child joins the first earlier one it is alike to */
    for (uint32_t i = 0; i < n->n_edges; i++) {
        uint32_t ch = n->edges[i].child;
        e->arm[i] = SEARCH_NONE;
        if (ch == SEARCH_NONE || e->nodes[ch].exhausted)
            continue;
        const search_node *cn = &e->nodes[ch];
        uint32_t first = i;
        for (uint32_t j = 0; j < i && first == i; j++)
            if (e->arm[j] == j && alike(&e->nodes[n->edges[j].child], cn))
                first = j;
        e->arm[i] = first;
        if (first == i || cn->best > e->arm_best[first])
            e->arm_best[first] = cn->best;
    }
    double best = -1, ln = log((double)n->visits + 1);
    for (uint32_t i = 0; i < n->n_edges; i++) {
        if (e->arm[i] == SEARCH_NONE)
            continue;
        const search_node *cn = &e->nodes[n->edges[i].child];
        double q = e->arm_best[e->arm[i]] / e->best_reward;
        double u = e->o.exploration * sqrt(ln / ((double)cn->visits + 1));
        double s = q + u + SEED_NOISE * (double)(splitmix(rng) >> 11) / 9007199254740992.0;
        if (s > best) {
            best = s;
            *pick = n->edges[i].child;
        }
    }
    return 0;
}

/* One leaf: descends by UCT from the root to a node that may grow, takes
 * its next decision.  Returns 1 when a leaf was added, 0 when none is left. */
static int select_leaf(engine *e, uint32_t *path, uint64_t *rng)
{
    /* a descent that ends at a dead end marks it exhausted, so retrying
     * makes progress; one blocked only by expansions in flight does not */
    for (int blocked = 0; blocked < 64;) {
        uint32_t node = 0, depth = 0;
        path[depth++] = 0;
        for (;;) {
            search_node *n = &e->nodes[node];
            if (n->exhausted)
                break;
            uint32_t open, live = live_children(e, n, &open);
            if (can_expand(e, n) && (open == 0 || live < width(e, n))) {
                /* the next decision not already taken on this path */
                uint32_t d = SEARCH_NONE;
                bool wait = false;
                while (n->next_try < e->n_order) {
                    uint32_t cand = order_at(e, n)[n->next_try];
                    int tw = twin_state(e, node, cand);
                    if ((wait = tw == TWIN_WAIT))
                        break;
                    n->next_try++;
                    if (tw == TWIN_TRY && !decided_on_path(e, node, e->dec[cand].a) && !tried(e, node, cand)) {
                        d = cand;
                        break;
                    }
                }
                if (d != SEARCH_NONE) {
                    for (uint32_t i = 0; i < depth; i++)
                        e->nodes[path[i]].visits++;
                    e->pending[node]++;
                    int rc = task_add(e, node, d, path, depth);
                    return rc < 0 ? rc : 1;
                }
                if (!wait)
                    continue; /* nothing left to try here: choose among children */
                /* the next one waits for this batch: choose among children */
            }
            uint32_t pick;
            if (uct_pick(e, node, rng, &pick) < 0)
                return AP_ENOMEM;
            if (pick == SEARCH_NONE) {
                if (!can_expand(e, n) && e->pending[node] == 0)
                    n->exhausted = true;
                else
                    blocked++;
                break;
            }
            if (depth >= 64) {
                blocked++;
                break;
            }
            node = pick;
            path[depth++] = node;
        }
        if (e->nodes[0].exhausted) {
            e->exhausted = true;
            return 0;
        }
    }
    return 0;
}

/* Hill-climbing beside UCT: up to n leaves that extend the best node
 * found so far by its next decisions not yet tried (in prior order, past
 * the progressive widening), so that a line of steps each of which
 * improves - FSDP, one group of parameters after another - is followed as
 * fast as it improves instead of waiting for visits to widen every node on
 * it (Llama-3-8B on 8 H100s: 600 episodes of UCT alone left it 3% over
 * the memory limit, three groups short).  Returns the leaves added. */
static int extend_best(engine *e, uint32_t *path, int n)
{
    uint32_t node = e->best;
    search_node *b = &e->nodes[node];
    if (n <= 0 || b->exhausted || !can_expand(e, b) || b->depth >= 63)
        return 0;
    uint32_t depth = b->depth + 1u;
    for (uint32_t x = node, i = depth; i-- > 0; x = e->nodes[x].parent)
        path[i] = x;
    int added = 0;
    while (added < n && b->next_try < e->n_order) {
        uint32_t cand = order_at(e, b)[b->next_try];
        int tw = twin_state(e, node, cand);
        if (tw == TWIN_WAIT)
            break;
        b->next_try++;
        if (tw == TWIN_SKIP || decided_on_path(e, node, e->dec[cand].a) || tried(e, node, cand))
            continue;
        for (uint32_t i = 0; i < depth; i++)
            e->nodes[path[i]].visits++;
        e->pending[node]++;
        int rc = task_add(e, node, cand, path, depth);
        if (rc < 0)
            return rc;
        added++;
        b = &e->nodes[node];
    }
    return added;
}

/* The step time the completion expects node x to end at once it fits:
 * its own, plus the time its memory-saving decisions still to try (in the
 * save order, one per unit and axis not decided on its path) cost at the
 * start, until the bytes they saved there cover its excess; INFINITY when
 * they do not; and no sooner than its own time plus its excess at the
 * price of memory paid so far (the head comment says why).  A guess,
 * which only ranks the states to complete: every state it leads to is
 * scored. */
static double completed_time(engine *e, uint32_t node)
{
    const search_node *x = &e->nodes[node], *root = &e->nodes[0];
    uint32_t n_axes = (uint32_t)ir_pctx_mesh(e->c)->n_axes, gen = ++e->stamp_gen;
    for (uint32_t n = node; n != 0 && n != SEARCH_NONE; n = e->nodes[n].parent) {
        search_action a = e->dec[e->nodes[n].decision].a;
        e->stamp[a.unit * n_axes + a.axis] = gen;
    }
    double excess = (double)x->peak - e->limit, t = x->runtime_s;
    for (uint32_t i = x->next_save; i < e->n_save && excess > 0; i++) {
        const search_decision *d = &e->dec[e->save[i]];
        uint32_t *st = &e->stamp[d->a.unit * n_axes + d->a.axis];
        if (*st == gen)
            continue;
        *st = gen;
        excess -= (double)(root->peak - d->peak);
        if (d->runtime_s > root->runtime_s)
            t += d->runtime_s - root->runtime_s;
    }
    if (excess > 0)
        return INFINITY;
    if (e->price < INFINITY) {
        double priced = x->runtime_s + e->price * ((double)x->peak - e->limit);
        t = priced > t ? priced : t;
    }
    return t;
}

/* Whether x is alike to a state the completion took up already: then,
 * by the start's figures, its completion would repeat that one's, and it
 * is no lead (the head comment says why). */
static bool alike_to_led(const engine *e, const search_node *x)
{
    for (uint32_t k = 0; k < e->n_led; k++)
        if (alike(&e->nodes[e->led[k]], x))
            return true;
    return false;
}

/* The completion (the head comment): up to n leaves that extend the state
 * over the memory limit the completion expects to end fastest (and faster
 * than the best that fits), by its next memory-saving decisions in the
 * save order; when one runs out, the next such state.  Returns the leaves
 * added. */
static int complete_lead(engine *e, uint32_t *path, int n)
{
    if (n <= 0 || e->n_save == 0)
        return 0;
    const search_node *best = &e->nodes[e->best];
    double bound = fits(e, best->peak) ? best->runtime_s : INFINITY;
    int added = 0;
    while (added < n) {
        uint32_t lead = SEARCH_NONE;
        double lead_t = bound;
        for (uint32_t i = 0; i < e->n_nodes; i++) {
            const search_node *x = &e->nodes[i];
            if (fits(e, x->peak) || !(x->runtime_s < lead_t) || x->next_save >= e->n_save || x->exhausted ||
                x->depth >= e->o.max_depth || x->depth >= 63)
                continue;
            if (!x->led && alike_to_led(e, x))
                continue;
            double t = completed_time(e, i);
            if (t < lead_t) {
                lead = i;
                lead_t = t;
            }
        }
        if (lead == SEARCH_NONE)
            break;
        if (!e->nodes[lead].led) {
            e->nodes[lead].led = true;
            if (push_u32(&e->led, &e->n_led, &e->cap_led, lead) < 0)
                return AP_ENOMEM;
        }
        uint32_t depth = e->nodes[lead].depth + 1u;
        for (uint32_t x = lead, i = depth; i-- > 0; x = e->nodes[x].parent)
            path[i] = x;
        while (added < n && e->nodes[lead].next_save < e->n_save) {
            uint32_t cand = e->save[e->nodes[lead].next_save];
            int tw = twin_state(e, lead, cand);
            if (tw == TWIN_WAIT)
                return added; /* the lead goes on in the next batch */
            e->nodes[lead].next_save++;
            if (tw == TWIN_SKIP || decided_on_path(e, lead, e->dec[cand].a) || tried(e, lead, cand))
                continue;
            for (uint32_t i = 0; i < depth; i++)
                e->nodes[path[i]].visits++;
            e->pending[lead]++;
            int rc = task_add(e, lead, cand, path, depth);
            if (rc < 0)
                return rc;
            e->tasks[e->n_tasks - 1].completes = true;
            added++;
        }
    }
    return added;
}

/* ------------------------------------------------------------ backup */

static void propagate_best(engine *e, const uint32_t *path, uint32_t path_n, double reward)
{
    for (uint32_t i = 0; i < path_n; i++)
        if (reward > e->nodes[path[i]].best)
            e->nodes[path[i]].best = reward;
    if (reward > e->best_reward)
        e->best_reward = reward;
}

/* A state a step of the completion made fits: what that completion paid,
 * in step time per byte its lead (the nearest state above it the
 * completion did not make) was over the limit, lowers the price of memory
 * (completed_time). */
static void learn_price(engine *e, uint32_t node)
{
    uint32_t lead = e->nodes[node].parent;
    while (lead != 0 && e->nodes[lead].completes)
        lead = e->nodes[lead].parent;
    const search_node *l = &e->nodes[lead], *f = &e->nodes[node];
    double over = (double)l->peak - e->limit;
    if (over <= 0)
        return;
    double paid = f->runtime_s > l->runtime_s ? (f->runtime_s - l->runtime_s) / over : 0;
    if (paid < e->price)
        e->price = paid;
}

static int backup(engine *e, task *t)
{
    uint32_t parent = t->parent;
    const uint32_t *path = &e->paths[t->path0];
    e->pending[parent]--;
    e->episodes++;
    if (t->status < 0 && t->status != 1 && t->status != 2)
        return t->status;
    if (t->status != 0)
        return edge_add(e, parent, t->decision, SEARCH_NONE, false);
    uint32_t child = tt_find(e, t->hash);
    int rc;
    if (child == SEARCH_NONE) {
        if ((rc = node_new(e, t->hash, parent, t->decision, t->completes, t->runtime_s, t->peak, &child)) < 0)
            return rc;
        if (t->completes && fits(e, t->peak))
            learn_price(e, child);
        if (better_result(e, e->best, child)) {
            e->best = child;
            e->best_episode = e->episodes;
            e->best_time = ap_mono_s() - e->t0;
        }
    }
    e->nodes[child].visits++;
    if ((rc = edge_add(e, parent, t->decision, child, t->implied)) < 0)
        return rc;
    propagate_best(e, path, t->path_n, e->nodes[child].best);
    return 0;
}

/* ------------------------------------------------------------ batches */

static bool progress_due(const engine *e)
{
    return e->o.progress && ap_mono_s() - e->last_progress >= e->o.progress_interval_s;
}

/* Takes the batch's outcomes from the checkpoint being replayed when it
 * recorded this very batch (every task's parent and decision); else the
 * rest of it does not belong to this run and is dropped. */
static bool replay_batch(engine *e)
{
    search_outcome o;
    if (!search__log_peek(&e->log, e->n_tasks - 1, &o)) {
        search__log_cut(&e->log);
        return false;
    }
    for (uint32_t k = 0; k < e->n_tasks; k++)
        if (!search__log_peek(&e->log, k, &o) || o.parent != e->tasks[k].parent ||
            o.decision != e->tasks[k].decision) {
            search__log_cut(&e->log);
            return false;
        }
    for (uint32_t k = 0; k < e->n_tasks; k++) {
        task *t = &e->tasks[k];
        search__log_peek(&e->log, k, &o);
        t->status = o.status;
        t->hash = o.hash;
        t->runtime_s = o.runtime_s;
        t->peak = o.peak;
        t->implied = o.implied;
    }
    search__log_take(&e->log, e->n_tasks);
    return true;
}

/* Runs the tasks: the coordinating thread works as worker 0 beside the
 * others (with one thread, no hand-offs at all), then waits for theirs;
 * calls progress between tasks and while waiting, when stop is not NULL. */
static void run_tasks(engine *e, int *stop)
{
    pthread_mutex_lock(&e->mu);
    e->next_task = 0;
    e->n_done = 0;
    e->first_open = 0;
    e->batch_id++;
    e->running = true;
    if (e->n_workers > 1)
        pthread_cond_broadcast(&e->go);
    work(&e->w[0], stop);
    double interval = e->o.progress_interval_s;
    while (e->n_done < e->n_tasks) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double wait = interval / 2;
        ts.tv_sec += (time_t)wait;
        ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e->done, &e->mu, &ts);
        if (stop && e->n_done < e->n_tasks && progress_due(e)) {
            pthread_mutex_unlock(&e->mu);
            if (search__progress(e))
                *stop = 1;
            pthread_mutex_lock(&e->mu);
        }
    }
    e->running = false;
    /* a worker still waiting for a state leaves the batch now */
    pthread_cond_broadcast(&e->built);
    pthread_mutex_unlock(&e->mu);
}

static int run_batch(engine *e, int *stop)
{
    if (e->log.pos < e->log.end && e->n_tasks && replay_batch(e))
        return 0;
    double t0 = ap_mono_s();
    run_tasks(e, stop);
    e->batch_s += ap_mono_s() - t0;
    /* the wait the batch's split of work implies, by CPU time: what the
     * barrier costs apart from the machine's load */
    if (e->n_workers > 1 && e->load) {
        double total = 0, most = 0;
        memset(e->load, 0, sizeof *e->load * (size_t)e->n_workers);
        for (uint32_t k = 0; k < e->n_tasks; k++) {
            e->load[e->tasks[k].worker] += e->tasks[k].cpu_s;
            total += e->tasks[k].cpu_s;
        }
        for (int i = 0; i < e->n_workers; i++)
            most = e->load[i] > most ? e->load[i] : most;
        e->imbalance_s += most * e->n_workers - total;
    }
    for (uint32_t k = 0; k < e->n_tasks; k++) {
        const task *t = &e->tasks[k];
        search_outcome o = {t->parent, t->decision, t->status, t->implied, t->hash, t->runtime_s, t->peak};
        if (t->status >= 0 && search__log_add(&e->log, &o) < 0)
            return AP_ENOMEM;
    }
    return 0;
}

/* The schedule text of the decisions on node's canonical path: every
 * member of each unit, as `autopart apply --schedule` reads it. */
static void path_text(const engine *e, uint32_t node, ap_buf *b)
{
    uint32_t chain[256], n = 0;
    for (uint32_t x = node; x != 0 && x != SEARCH_NONE && n < 256; x = e->nodes[x].parent)
        chain[n++] = x;
    const ir_mesh *mesh = ir_pctx_mesh(e->c);
    bool *dup = n ? ir_schedule_shared_arg_names(ir_pctx_func(e->c)) : NULL;
    while (n-- > 0) {
        search_action a = e->dec[e->nodes[chain[n]].decision].a;
        const search_unit *un = &e->units.v[a.unit];
        for (uint32_t i = 0; i < un->n; i++) {
            uint32_t v = e->units.members[un->first + i];
            const char *name = ir_func_arg_name(ir_pctx_func(e->c), v);
            char nb[256];
            if (!name || !dup || dup[v])
                snprintf(nb, sizeof nb, "%%arg%u", v);
            else if (strpbrk(name, " \t;#"))
                snprintf(nb, sizeof nb, "\"%s\"", name);
            else
                snprintf(nb, sizeof nb, "%s", name);
            if (a.dim >= 0)
                ap_buf_printf(b, "tile %s %d %s\n", nb, a.dim, mesh->names[a.axis]);
            else
                ap_buf_printf(b, "atomic %s %s\n", nb, mesh->names[a.axis]);
        }
        ap_buf_puts(b, "propagate\n");
    }
    ap_free(dup);
}

static int search__progress(engine *e)
{
    double t = ap_mono_s();
    e->last_progress = t;
    if (e->best_text_node != e->best || !e->best_text) {
        ap_buf b;
        ap_buf_init(&b);
        path_text(e, e->best, &b);
        ap_free(e->best_text);
        e->best_text = ap_buf_take(&b, NULL);
        e->best_text_node = e->best;
    }
    search_progress p;
    memset(&p, 0, sizeof p);
    p.episodes = e->episodes;
    p.elapsed_s = t - e->t0;
    p.episodes_per_s = p.elapsed_s > 0 ? (double)e->episodes / p.elapsed_s : 0;
    p.tree_nodes = e->n_nodes;
    p.best_runtime_s = e->nodes[e->best].runtime_s;
    p.best_peak_bytes = e->nodes[e->best].peak;
    p.best_fits = fits(e, p.best_peak_bytes);
    p.start_runtime_s = e->nodes[0].runtime_s;
    p.best_schedule = e->best_text ? e->best_text : "";
    search__log_stamp(&e->log, p.elapsed_s, e->episodes);
    p.checkpoint = e->log.data;
    p.checkpoint_len = e->log.len;
    p.final = e->final;
    return e->o.progress(e->o.progress_ctx, &p);
}

/* ============================================================= engine */

static void engine_free(engine *e)
{
    if (e->w) {
        pthread_mutex_lock(&e->mu);
        e->quit = true;
        pthread_cond_broadcast(&e->go);
        pthread_cond_broadcast(&e->built);
        pthread_mutex_unlock(&e->mu);
        for (int i = 0; i < e->n_workers; i++) {
            worker *w = &e->w[i];
            if (w->thread)
                pthread_join(w->thread, NULL);
            cost_scorer_free(w->scorer);
            cost_scorer_free(w->exact);
        }
        ap_free(e->w);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->go);
        pthread_cond_destroy(&e->done);
        pthread_cond_destroy(&e->built);
    }
    for (int k = 0; k < e->cap_cache; k++)
        ir_partition_free(e->cache[k].p);
    ap_free(e->cache);
    for (int k = 0; k < e->n_pool; k++)
        ir_partition_free(e->pool[k]);
    ap_free(e->pool);
    ap_free(e->load);
    for (uint32_t i = 0; i < e->n_nodes; i++)
        ap_free(e->nodes[i].edges);
    ap_free(e->nodes);
    ap_free(e->pending);
    ap_free(e->tt);
    ap_free(e->dec);
    ap_free(e->est);
    if (e->wide != e->order)
        ap_free(e->wide);
    ap_free(e->order);
    ap_free(e->save);
    ap_free(e->stamp);
    ap_free(e->save_at);
    ap_free(e->tasks);
    ap_free(e->chain);
    ap_free(e->chain_dec);
    ap_free(e->paths);
    ap_free(e->near);
    ap_free(e->arm);
    ap_free(e->arm_best);
    ap_free(e->led);
    ap_free(e->best_text);
    search__log_free(&e->log);
    ir_partition_free(e->base);
    search__units_free(&e->units);
}

/* A fast scorer per worker that has none (after engine_pause too), or
 * none at all when the function needs the full path (e->fallback, with
 * the scorer's reason). */
static int make_scorers(engine *e, ap_error *err)
{
    for (int i = 0; i < e->n_workers && !e->fallback; i++) {
        worker *w = &e->w[i];
        if (w->scorer)
            continue;
        ap_error se;
        /* candidates need the step time and the peak, not the slowest ops
         * nor what makes up the peak (the explanation scores the best
         * state again with both) */
        cost_options co = e->o.cost;
        co.top_k = -1;
        co.peak_only = true;
        /* and the lowest peak only above the limit (fits, objective):
         * below it a state's peak is its program's order's figure, which
         * shows it fits; what the search prints is made exact at the end
         * (exact_peaks) */
        if (co.peak_enough == 0)
            co.peak_enough = e->limit < 0 ? INT64_MAX : e->limit >= 0x1p62 ? INT64_C(1) << 62 : (int64_t)e->limit;
        int rc = cost_scorer_new(e->c, &e->o.device, e->o.tiers, &co, &w->scorer, &se);
        /* one memo of graph runs for all the workers: a program one
         * thread ran is a hit for the others too (at 2 threads on T32,
         * 600 episodes, a memo each skipped ~169 of 473 graph runs, one
         * memo ~192 as 1 thread does), and it takes one memo's memory */
        if (rc == 0 && i > 0 && e->w[0].scorer)
            rc = cost_scorer_share(w->scorer, e->w[0].scorer, &se);
        if (rc == AP_EUNSUPPORTED) {
            e->fallback = true;
            e->scorer_why = se;
        } else if (rc < 0) {
            if (err)
                *err = se;
            return rc;
        }
    }
    if (e->fallback)
        for (int i = 0; i < e->n_workers; i++) {
            cost_scorer_free(e->w[i].scorer);
            e->w[i].scorer = NULL;
        }
    return 0;
}

static int start_workers(engine *e, ap_error *err)
{
    int n = e->o.threads;
    e->w = ap_calloc((size_t)n, sizeof *e->w);
    if (!e->w)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->go, NULL);
    pthread_cond_init(&e->done, NULL);
    pthread_cond_init(&e->built, NULL);
    /* states cached: search_options.cache_bytes of them (512 MiB: about
     * 450 states of T32, which a search of 1,000 episodes then re-derives
     * 51 times instead of 165 with 256 MiB), shared by the workers; each
     * worker pins at most two entries at a time */
    uint32_t n_ops = ir_pctx_num_ops(e->c);
    size_t state_bytes = (size_t)n_ops * 80 + (size_t)ir_pctx_num_values(e->c) * 4 + 4096;
    size_t want = e->o.cache_bytes / state_bytes;
    int cap = want < 8 ? 8 : want > 1024 ? 1024 : (int)want;
    if (cap < 2 * n + 8)
        cap = 2 * n + 8;
    e->cap_cache = cap;
    e->cache = ap_calloc((size_t)cap, sizeof *e->cache);
    e->cap_pool = 2 * n + 2;
    e->load = ap_calloc((size_t)n, sizeof *e->load);
    if (!e->load)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    e->pool = ap_calloc((size_t)e->cap_pool, sizeof *e->pool);
    if (!e->cache || !e->pool)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        e->w[i].e = e;
    e->n_workers = n;
    int rc = make_scorers(e, err);
    if (rc < 0)
        return rc;
    for (int i = 1; i < n; i++)
        if (pthread_create(&e->w[i].thread, NULL, worker_main, &e->w[i]) != 0) {
            e->w[i].thread = 0;
            return ap_error_set(err, AP_ENOMEM, "cannot start a search thread");
        }
    return 0;
}

/* How many states exact_peaks would score now, at most: the start, the
 * best and the children of the parents on the best's path that fit and
 * are not exact (a child on two parents' lists counted twice), and when
 * the start is the answer every state as fast as the start (a program
 * whose every state costs the same has tens of thousands). */
static uint32_t exact_count(const engine *e)
{
    uint32_t n = e->best == 0 ? e->n_as_start : 0;
    for (uint32_t c = e->best;; c = e->nodes[c].parent) {
        const search_node *x = &e->nodes[c];
        n += !x->peak_exact && fits(e, x->peak);
        if (c == 0)
            break;
        const search_node *pa = &e->nodes[x->parent];
        for (uint32_t k = 0; k < pa->n_edges; k++) {
            uint32_t ch = pa->edges[k].child;
            n += ch != SEARCH_NONE && ch != c && !e->nodes[ch].peak_exact && fits(e, e->nodes[ch].peak);
        }
    }
    return n;
}

/* What the result will take after the episodes, so that a time budget
 * bounds the answer and not the episodes alone (bench_experts' rows
 * answered in 60.0-60.2 s of 60, UNet under 3 s in 3.35-3.66 s).  In
 * units of a scored evaluation as the search timed them so far (the
 * workers' busy time over the states they scored: eval_s, over every
 * evaluation, counts the known and refused ones and so ran 3-4 times
 * under an exact re-score's time on T32):
 *   - the states exact_peaks scores (exact_count), 1.5 each over the
 *     workers: every memory order and no memo (measured at the end of
 *     3,000 episodes on one thread: T32 under 200 GiB 81 states in
 *     0.145 s, UNet 468 in 0.270 s; on two, 0.109 and 0.163 s);
 *   - 25 for the best replayed, the best and the start lowered and
 *     estimated, and the explanation's scorer (27-35 ms on UNet and T32);
 *   - with the full path, where an evaluation is a lowering, 4 in all.
 * With `result` false, what search__engine_exact_best takes: the best
 * re-derived (the cache may be empty: search__engine_pause) and scored,
 * 10. */
static double end_s(const engine *e, bool result)
{
    double busy = 0;
    int64_t scored = 0;
    for (int i = 0; i < e->n_workers; i++) {
        busy += e->w[i].t_busy;
        scored += e->w[i].scored;
    }
    double unit = scored > 0 ? busy / (double)scored : e->eval_s;
    if (e->fallback)
        return result ? 4 * unit : 0;
    if (!result)
        return 10 * unit;
    return unit * (1.5 * (double)exact_count(e) / e->n_workers + 25);
}

/* Seconds left before the episodes must end under a time budget. */
static double time_left(const engine *e) { return e->deadline - (e->reserve ? end_s(e, true) : 0) - ap_mono_s(); }

static bool out_of_budget(engine *e, const char **why)
{
    if (e->halt && atomic_load(e->halt)) {
        e->stop = 1;
        return true;
    }
    if (e->o.max_episodes > 0 && e->episodes >= e->o.max_episodes) {
        *why = "episodes";
        return true;
    }
    if (e->deadline > 0 && time_left(e) <= 0) {
        *why = "time";
        return true;
    }
    if (e->o.patience > 0 && e->episodes - e->best_episode >= e->o.patience) {
        *why = "patience";
        return true;
    }
    return false;
}

/* The decisions at the start: every unit on every dim along every allowed
 * axis, and atomic along it. */
static int decisions(engine *e, ap_error *err)
{
    const ir_mesh *mesh = ir_pctx_mesh(e->c);
    uint32_t cap = 0;
    for (uint32_t u = 0; u < e->units.n; u++)
        cap += (uint32_t)(e->units.v[u].type->rank + 1) * (uint32_t)mesh->n_axes;
    e->dec = ap_calloc(cap + 1, sizeof *e->dec);
    double *est = ap_calloc(cap + 1, sizeof *est);
    if (!e->dec || !est) {
        ap_free(est);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    /* the workers sleep between batches */
    e->est = est;
    for (uint32_t u = 0; u < e->units.n; u++)
        for (int ax = 0; ax < mesh->n_axes; ax++) {
            if (!(e->o.axes >> ax & 1u))
                continue;
            for (int d = -1; d < e->units.v[u].type->rank; d++) {
                /* a dim that cannot divide at all is no decision */
                if (d >= 0) {
                    int64_t size = e->units.v[u].type->dims[d];
                    if (size < mesh->sizes[ax] || size % mesh->sizes[ax] != 0)
                        continue;
                }
                search_decision *sd = &e->dec[e->n_dec++];
                sd->a = (search_action){u, (int8_t)d, (uint8_t)ax};
                sd->same_as = SEARCH_NONE;
                sd->twin = SEARCH_NONE;
            }
        }
    e->nodes[0].next_try = e->n_dec; /* the root's children are the root pass */
    return 0;
}

/* Is a memory-saving decision that saved saved_a bytes at the start and
 * cost cost_a seconds of step time there ahead of b in the completion's
 * order?  Those that cost no time first, by bytes saved; then by bytes
 * saved per second. */
static bool saves_more(double saved_a, double cost_a, double saved_b, double cost_b)
{
    if ((cost_a <= 0) != (cost_b <= 0))
        return cost_a <= 0;
    if (cost_a <= 0)
        return saved_a > saved_b;
    return saved_a / cost_a > saved_b / cost_b;
}

/* The completion's order (e->save, e->save_at): under a memory limit,
 * the decisions that lowered the start's peak, by saves_more; ties in
 * the order of expansion. */
static int save_order(engine *e, ap_error *err)
{
    e->n_save = 0;
    if (e->limit < 0 || e->o.no_prior)
        return 0;
    e->save = ap_malloc(sizeof *e->save * (e->n_order + 1));
    e->stamp = ap_calloc((size_t)e->units.n * (size_t)ir_pctx_mesh(e->c)->n_axes + 1, sizeof *e->stamp);
    e->save_at = ap_calloc((size_t)e->n_dec + 1, sizeof *e->save_at);
    if (!e->save || !e->stamp || !e->save_at)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    const search_node *root = &e->nodes[0];
#define SAVED(d) ((double)(root->peak - e->dec[d].peak))
#define COST(d) (e->dec[d].runtime_s - root->runtime_s)
    for (uint32_t i = 0; i < e->n_order; i++) {
        uint32_t d = e->order[i];
        if (e->dec[d].peak >= root->peak)
            continue;
        uint32_t b = e->n_save++;
        while (b > 0 && saves_more(SAVED(d), COST(d), SAVED(e->save[b - 1]), COST(e->save[b - 1]))) {
            e->save[b] = e->save[b - 1];
            b--;
        }
        e->save[b] = d;
    }
#undef SAVED
#undef COST
    for (uint32_t i = 0; i < e->n_save; i++)
        e->save_at[e->save[i]] = i + 1;
    return 0;
}

/* Whether decisions a and b are twins (one circle: one state at the start). */
static bool twins(const engine *e, uint32_t a, uint32_t b)
{
    if (e->dec[a].twin == SEARCH_NONE)
        return false;
    for (uint32_t m = e->dec[a].twin; m != a; m = e->dec[m].twin)
        if (m == b)
            return true;
    return false;
}

/* e->wide, the order a node over the memory limit tries decisions in
 * (order_at): under a limit the start does not meet, one decision of each
 * kind first (the first in prior order among those whose states at the
 * start were alike, twins apart: twin_state handles them), then the
 * others, each part in prior order (the head comment says why); else the
 * prior order itself. */
static int kinds_first(engine *e, ap_error *err)
{
    e->wide = e->order;
    if (e->limit < 0 || fits(e, e->nodes[0].peak) || e->o.no_prior)
        return 0;
    uint32_t *order = ap_malloc(sizeof *order * (e->n_order + 1));
    bool *later = ap_calloc(e->n_order + 1, sizeof *later);
    if (!order || !later) {
        ap_free(order);
        ap_free(later);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < e->n_order; i++) {
        const search_decision *a = &e->dec[e->order[i]];
        for (uint32_t j = 0; j < i && !later[i]; j++) {
            const search_decision *b = &e->dec[e->order[j]];
            later[i] = !later[j] && !twins(e, e->order[i], e->order[j]) &&
                       alike_figures(a->runtime_s, a->peak, b->runtime_s, b->peak);
        }
    }
    uint32_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < e->n_order; i++)
            if (later[i] == (pass == 1))
                order[k++] = e->order[i];
    e->wide = order;
    ap_free(later);
    return 0;
}

/* The order of expansion: distinct, valid decisions by prior, with the
 * seed's small perturbation (a few percent) breaking near-ties.
 * Decisions the root pass did not reach (out of budget) have no prior and
 * are left out. */
static int order_decisions(engine *e, ap_error *err)
{
    for (uint32_t i = e->root_next; i < e->n_dec; i++)
        e->dec[i].prior = -2;
    e->order = ap_malloc(sizeof *e->order * (e->n_dec + 1));
    double *key = ap_malloc(sizeof *key * (e->n_dec + 1));
    if (!e->order || !key) {
        ap_free(key);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    uint64_t rng = e->o.seed ^ 0x6a09e667f3bcc909ULL;
    for (uint32_t d = 0; d < e->n_dec; d++) {
        double noise = (double)(splitmix(&rng) >> 11) / 9007199254740992.0;
        /* by the step time alone: the memory limit enters through the
         * rewards and the completion's own order */
        double speed = e->dec[d].prior > -1 ? e->nodes[0].runtime_s / e->dec[d].runtime_s : e->dec[d].prior;
        key[d] = e->o.no_prior ? -(double)d : speed * (1 + 0.03 * noise);
        if (e->dec[d].prior > -1) {
            e->order[e->n_order++] = d;
            e->n_distinct += e->dec[d].same_as == SEARCH_NONE;
        }
        /* twins: a circle per start state, tried apart past the root
         * (twin_state) */
        uint32_t r = e->dec[d].same_as;
        if (e->dec[d].prior > -1 && r != SEARCH_NONE) {
            if (e->dec[r].twin == SEARCH_NONE)
                e->dec[r].twin = r;
            e->dec[d].twin = e->dec[r].twin;
            e->dec[r].twin = d;
        }
    }
    /* insertion sort: stable, by key descending */
    for (uint32_t a = 1; a < e->n_order; a++) {
        uint32_t x = e->order[a];
        uint32_t b = a;
        while (b > 0 && key[e->order[b - 1]] < key[x]) {
            e->order[b] = e->order[b - 1];
            b--;
        }
        e->order[b] = x;
    }
    ap_free(key);
    int rc = save_order(e, err);
    return rc < 0 ? rc : kinds_first(e, err);
}

/* Leaves a batch may hold: `want`, or under a time budget no more than
 * the workers can evaluate before the deadline at the recent rate (at
 * least one), so that a search of a large program ends on time: a batch
 * of 64 evaluations of a second each overran a 2 s share by a minute.  An
 * episode budget alone leaves batches as they are (the result depends on
 * them). */
static uint32_t batch_room(const engine *e, uint32_t want)
{
    if (e->deadline <= 0 || e->eval_s <= 0)
        return want;
    double n = time_left(e) / e->eval_s * e->n_workers;
    return n < 1 ? 1 : n < want ? (uint32_t)n : want;
}

/* The root pass: the decisions evaluated as the root's children, in
 * batches, from where a search out of budget left it; the order of
 * expansion once every decision is in. */
static int root_pass(engine *e, const char **why, ap_error *err)
{
    if (e->order)
        return 0;
    uint32_t path[1] = {0};
    uint32_t i = e->root_next;
    while (i < e->n_dec && !e->stop) {
        if (out_of_budget(e, why))
            break;
        batch_clear(e);
        uint32_t room = e->o.max_episodes > 0 ? (uint32_t)(e->o.max_episodes - e->episodes) : UINT32_MAX;
        uint32_t size = batch_room(e, (uint32_t)e->o.batch * 4);
        for (uint32_t b = 0; b < size && i < e->n_dec && b < room; b++, i++) {
            e->nodes[0].visits++;
            e->pending[0]++;
            int rc = task_add(e, 0, i, path, 1);
            if (rc < 0)
                return ap_error_set(err, rc, "out of memory");
        }
        e->root_next = i;
        int brc = run_batch(e, &e->stop);
        if (brc < 0)
            return ap_error_set(err, brc, "out of memory");
        for (uint32_t k = 0; k < e->n_tasks; k++) {
            task *t = &e->tasks[k];
            search_decision *sd = &e->dec[t->decision];
            if (t->status == 0) {
                uint32_t same = tt_find(e, t->hash);
                if (same != SEARCH_NONE && same != 0)
                    sd->same_as = e->nodes[same].decision;
                sd->runtime_s = t->runtime_s;
                sd->peak = t->peak;
                sd->prior = e->j0 / objective(e, t->runtime_s, t->peak);
            } else {
                sd->prior = -1; /* refused or unchanged */
            }
            int rc = backup(e, t);
            if (rc < 0) {
                if (err)
                    *err = t->err;
                return rc;
            }
        }
    }
    return i == e->n_dec ? order_decisions(e, err) : 0;
}

/* ----------------------------------------------------- the batch loop */

/* Episodes in batches of leaves chosen by UCT, until a budget, the
 * callback or the tree's end stops them (*why says which). */
static int search_loop(engine *e, const char **why, ap_error *err)
{
    uint32_t path[80];
    uint64_t *rng = &e->rng;
    while (!e->stop && !out_of_budget(e, why)) {
        batch_clear(e);
        int64_t room = e->o.max_episodes > 0 ? e->o.max_episodes - e->episodes : INT64_MAX;
        int size = (int)batch_room(e, (uint32_t)e->o.batch);
        /* a quarter of the batch climbs from the best, under a memory
         * limit another completes the best state over it, the rest is
         * UCT's */
        int quarter = (int)(size < room ? size : room) / 4;
        int greedy = extend_best(e, path, quarter), more = greedy < 0 ? 0 : complete_lead(e, path, quarter);
        greedy = greedy < 0 || more < 0 ? -1 : greedy + more;
        if (greedy < 0)
            return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
        for (int b = greedy; b < size && b < room; b++) {
            int rc = select_leaf(e, path, rng);
            if (rc < 0)
                return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
            if (rc == 0)
                break;
        }
        if (e->n_tasks == 0) {
            *why = "exhausted";
            e->exhausted = true;
            break;
        }
        if (run_batch(e, &e->stop) < 0)
            return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
        for (uint32_t k = 0; k < e->n_tasks; k++) {
            int rc = backup(e, &e->tasks[k]);
            if (rc < 0) {
                if (err)
                    *err = e->tasks[k].err;
                return rc;
            }
        }
        if (progress_due(e) && search__progress(e))
            e->stop = 1;
    }
    return 0;
}

/* ================================================================ run */

/* Every default of the options, in one place: search.h documents them. */
#define DEFAULT_EPISODES 1000
#define DEFAULT_BATCH 16
#define DEFAULT_DEPTH 16
#define MAX_DEPTH 64
#define MAX_THREADS 256
#define DEFAULT_EXPLORATION 0.7
#define DEFAULT_WIDENING 2.0
#define DEFAULT_CACHE_BYTES ((size_t)512 << 20)
#define DEFAULT_PROGRESS_S 0.25

void search_options_init(search_options *o)
{
    memset(o, 0, sizeof *o);
    ap_error err;
    cost_device_lookup("h100", &o->device, &err);
    o->seed = 1;
    o->threads = 1;
}

int search_options_resolve(const search_options *in, int n_axes, search_options *out, ap_error *err)
{
    search_options o = *in;
    uint32_t all = n_axes >= 32 ? UINT32_MAX : (1u << n_axes) - 1;
    if (o.axes == 0)
        o.axes = all;
    if (o.axes & ~all)
        return ap_error_set(err, AP_EINVALID, "search: an axis outside the mesh");
    if (o.threads <= 0)
        o.threads = 1;
    if (o.threads > MAX_THREADS)
        return ap_error_set(err, AP_EINVALID, "search: at most %d threads", MAX_THREADS);
    if (o.batch <= 0)
        o.batch = DEFAULT_BATCH;
    if (o.max_depth <= 0)
        o.max_depth = DEFAULT_DEPTH;
    if (o.max_depth > MAX_DEPTH)
        return ap_error_set(err, AP_EINVALID, "search: at most %d actions on a path", MAX_DEPTH);
    if (o.exploration <= 0)
        o.exploration = DEFAULT_EXPLORATION;
    if (o.widening < 0)
        return ap_error_set(err, AP_EINVALID, "search: widening must not be negative");
    if (o.widening == 0)
        o.widening = DEFAULT_WIDENING;
    if (o.max_episodes < 0 || o.time_limit_s < 0 || o.patience < 0)
        return ap_error_set(err, AP_EINVALID, "search: budgets must not be negative");
    if (o.max_episodes == 0 && o.time_limit_s == 0 && o.patience == 0)
        o.max_episodes = DEFAULT_EPISODES;
    if (o.cache_bytes == 0)
        o.cache_bytes = DEFAULT_CACHE_BYTES;
    if (o.progress_interval_s <= 0)
        o.progress_interval_s = DEFAULT_PROGRESS_S;
    if (!(o.memory_margin >= 0 && o.memory_margin < 1))
        return ap_error_set(err, AP_EINVALID, "search: the memory margin must be at least 0 and below 1, not %g",
                            o.memory_margin);
    if (o.memory_limit == 0)
        o.memory_limit = o.device.hbm_bytes;
    if (o.memory_limit > 0) /* headroom the user keeps free */
        o.memory_limit *= 1 - o.memory_margin;
    o.memory_margin = 0;
    *out = o;
    return 0;
}

/* The engine ready to search from start: options resolved, decision
 * units, workers and the root (the start state, scored).  engine_free
 * after a failure too. */
static int engine_open(engine *e, const ir_partition *start, const search_options *opts, ap_error *err)
{
    memset(e, 0, sizeof *e);
    e->start = start;
    e->c = ir_partition_ctx(start);
    e->t0 = ap_mono_s();
    e->last_progress = e->t0;
    int rc = search_options_resolve(opts, ir_pctx_mesh(e->c)->n_axes, &e->o, err);
    if (rc < 0)
        return rc;
    e->limit = e->o.memory_limit;
    e->rng = e->o.seed * 0x9e3779b97f4a7c15ULL + 1;
    if ((rc = search__units(e->c, e->o.axes, e->o.hints, &e->units, err)) < 0 ||
        (rc = ir_partition_clone(start, &e->base, err)) < 0)
        return rc;
    ir_partition_set_diagnostics(e->base, false);
    if ((rc = start_workers(e, err)) < 0)
        return rc;
    double rt, t_score = ap_mono_s();
    int64_t pk;
    if ((rc = score_state(&e->w[0], start, &rt, &pk, err)) < 0)
        return rc;
    /* a first estimate of an evaluation (a whole score: on the high side) */
    e->eval_s = ap_mono_s() - t_score;
    e->j0 = objective(e, rt, pk);
    uint32_t root;
    if (node_new(e, ir_partition_hash(start), SEARCH_NONE, 0, false, rt, pk, &root) < 0)
        return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
    e->nodes[root].visits = 1;
    e->best = root;
    e->best_reward = e->nodes[root].reward;
    e->price = INFINITY;
    /* resumed: the clock goes on from where the checkpoint stopped */
    double elapsed;
    if (search__log_open(&e->log, e->o.resume, e->o.resume_len, e->o.seed, (uint32_t)e->o.batch, e->units.n,
                         e->nodes[root].hash, &elapsed) < 0)
        return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
    e->t0 -= elapsed;
    if (e->o.time_limit_s > 0)
        e->deadline = e->t0 + e->o.time_limit_s;
    e->reserve = true;
    return 0;
}

/* The decisions at the start, then the batch loop. */
static int engine_search(engine *e, ap_error *err)
{
    int rc;
    const char *why = "exhausted";
    if ((!e->dec && (rc = decisions(e, err)) < 0) || (rc = root_pass(e, &why, err)) < 0 ||
        (e->order && (rc = search_loop(e, &why, err)) < 0))
        return rc;
    e->stopped_by = e->stop ? "callback" : why;
    e->final = true;
    if (e->o.progress)
        search__progress(e);
    return 0;
}

/* e->chain = the nodes from the root to node, in order, their decisions
 * in e->chain_dec; returns its length or AP_ENOMEM. */
static int node_chain(engine *e, uint32_t node, ap_error *err)
{
    uint32_t depth = e->nodes[node].depth;
    e->n_chain = 0;
    if (chain_room(e, depth) < 0)
        return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
    chain_put(e, 0, node, depth);
    return (int)depth;
}

static int best_chain(engine *e, ap_error *err) { return node_chain(e, e->best, err); }

/* A scorer of the step time and the lowest peak alone, for the exact
 * re-scores (*out: the caller's, cost_scorer_free). */
static int exact_scorer(engine *e, cost_scorer **out, ap_error *err)
{
    cost_options co = e->o.cost;
    co.top_k = -1;
    co.peak_only = true;
    co.peak_enough = 0;
    return cost_scorer_new(e->c, &e->o.device, e->o.tiers, &co, out, err);
}

/* Queues node n, to have its peak made the lowest of its state's orders,
 * as a task of an exact batch (exact_run), once (queued: per node; may be
 * NULL for a single node).  While the search runs, a state that fits has
 * its program's order's figure (make_scorers: the lowest is not above it,
 * and below the limit the step time alone ranks it).  Its task is the
 * step that made it, so the worker re-derives its canonical state from
 * its parent's, cached or replayed, as for any evaluation. */
static int exact_add(engine *e, uint32_t n, uint8_t *queued)
{
    const search_node *x = &e->nodes[n];
    if (x->peak_exact || !fits(e, x->peak) || (queued && queued[n]))
        return 0;
    if (queued)
        queued[n] = 1;
    int rc = n == 0 ? task_add(e, 0, SEARCH_NONE, NULL, 0) : task_add(e, x->parent, x->decision, NULL, 0);
    if (rc < 0)
        return rc;
    e->tasks[e->n_tasks - 1].exact = true;
    e->tasks[e->n_tasks - 1].exact_of = n;
    e->tasks[e->n_tasks - 1].exact_hash = x->hash;
    return 0;
}

/* An exact scorer per worker (exact_scorer), sharing one memo of graph
 * runs: siblings' lowered programs are often the same. */
static int exact_scorers(engine *e, ap_error *err)
{
    for (int i = 0; i < e->n_workers; i++) {
        worker *w = &e->w[i];
        if (w->exact)
            continue;
        int rc = exact_scorer(e, &w->exact, err);
        if (rc == 0 && i > 0)
            rc = cost_scorer_share(w->exact, e->w[0].exact, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Runs the queued exact tasks, if any, and takes their peaks. */
static int exact_run(engine *e, ap_error *err)
{
    if (e->n_tasks == 0)
        return 0;
    int rc = exact_scorers(e, err);
    if (rc < 0)
        return rc;
    e->in_order = true;
    run_tasks(e, NULL);
    e->in_order = false;
    for (uint32_t k = 0; k < e->n_tasks; k++) {
        const task *t = &e->tasks[k];
        if (t->status < 0) {
            if (err)
                *err = t->err;
            return t->status;
        }
    }
    for (uint32_t k = 0; k < e->n_tasks; k++) {
        search_node *x = &e->nodes[e->tasks[k].exact_of];
        x->peak = e->tasks[k].peak;
        x->peak_exact = true;
    }
    batch_clear(e);
    return 0;
}

/* The peaks the answer prints made exact (exact_add), in batches on the
 * workers: the start's, the best's, each decision's on the path to the
 * best with every other child of its parent (the explanation's
 * alternatives: at the root that is every decision, several hundred
 * states of UNet, 0.35 s on one thread), the best of each mesh
 * (search__engine_exact_best) and, when the start is the answer, those of
 * the states whose step time is the start's (explain_best_other leaves
 * out the ones whose peak is the start's too), then of the best other
 * state, which those peaks choose. */
static int exact_peaks(engine *e, ap_error *err)
{
    if (e->fallback)
        return 0; /* every state was scored by cost_state_estimate */
    uint8_t *queued = ap_calloc(e->n_nodes, 1);
    if (!queued)
        return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
    batch_clear(e);
    int rc = exact_add(e, 0, queued);
    if (rc == 0)
        rc = exact_add(e, e->best, queued);
    for (uint32_t n = e->best; rc == 0 && n != 0; n = e->nodes[n].parent) {
        const search_node *pa = &e->nodes[e->nodes[n].parent];
        for (uint32_t k = 0; rc == 0 && k < pa->n_edges; k++)
            if (pa->edges[k].child != SEARCH_NONE)
                rc = exact_add(e, pa->edges[k].child, queued);
    }
    for (uint32_t i = 1; rc == 0 && e->best == 0 && i < e->n_nodes; i++)
        if (e->nodes[i].runtime_s == e->nodes[0].runtime_s)
            rc = exact_add(e, i, queued);
    if (rc < 0)
        rc = ap_error_set(err, rc, "out of memory in the search");
    else
        rc = exact_run(e, err);
    if (rc == 0 && e->best == 0) {
        uint32_t other = search__best_other(e->nodes, e->n_nodes, NULL);
        if (other != SEARCH_NONE && (rc = exact_add(e, other, queued)) < 0)
            rc = ap_error_set(err, rc, "out of memory in the search");
        else
            rc = exact_run(e, err);
    }
    ap_free(queued);
    return rc;
}

/* The result: the best node's state replayed from the start itself,
 * recording what blocked propagation on the way (the candidates recorded
 * nothing: the explanation reads it), lowered and estimated once; the
 * start's report; the schedules and the explanation. */
static int engine_result(engine *e, search_result *out, ap_error *err)
{
    int rc;
    if (!e->order && (rc = order_decisions(e, err)) < 0)
        return rc;
    if ((rc = exact_peaks(e, err)) < 0)
        return rc;
    int depth = best_chain(e, err);
    if (depth < 0)
        return depth;
    if ((rc = replay(&e->w[0], e->chain_dec, 0, (uint32_t)depth, e->start, NULL, &out->best, err)) < 0 ||
        (rc = cost_state_estimate(out->best, &e->o.device, e->o.tiers, &e->o.cost, &out->lowered, &out->report,
                                  err)) < 0 ||
        (rc = cost_state_estimate(e->start, &e->o.device, e->o.tiers, &e->o.cost, NULL, &out->start, err)) < 0)
        return rc;
    ap_buf b;
    ap_buf_init(&b);
    ir_partition_schedule(out->best, &b);
    out->schedule = ap_buf_take(&b, NULL);
    ap_buf_init(&b);
    path_text(e, e->best, &b);
    out->actions = ap_buf_take(&b, NULL);
    if (!out->schedule || !out->actions)
        return ap_error_set(err, AP_ENOMEM, "out of memory in the search");
    out->memory_limit = e->limit;
    /* every figure of the answer is held to the limit the search was */
    cost_report_hold_to(&out->report, e->limit);
    cost_report_hold_to(&out->start, e->limit);
    out->fits = out->report.fits;
    out->none_fits = !fits(e, e->nodes[e->best].peak);
    /* the explanation reads the peak of the best state off a scorer */
    cost_scorer *sc = NULL;
    cost_report r;
    cost_options eo = e->o.cost;
    eo.peak_enough = 0;
    if (!e->fallback && cost_scorer_new(e->c, &e->o.device, e->o.tiers, &eo, &sc, NULL) == 0 &&
        cost_scorer_score(sc, out->best, &r, NULL) < 0) {
        cost_scorer_free(sc);
        sc = NULL;
    }
    search_tree_view v = {&e->units, ir_pctx_mesh(e->c), e->nodes, e->n_nodes, e->dec, e->n_dec, e->best,
                          e->limit, out->none_fits, sc, out->best, e->start};
    rc = search__explain(&v, out, err);
    cost_scorer_free(sc);
    if (rc < 0)
        return rc;
    if (e->fallback)
        json_object_set_new(out->explanation, "scorer", json_string(e->scorer_why.msg));
    return 0;
}

/* The counters and timings of the result. */
static void engine_stats(engine *e, search_result *out)
{
    out->wall_s = e->wall_s;
    out->episodes = e->episodes;
    out->replayed = e->log.replayed;
    out->best_episode = e->best_episode;
    out->best_wall_s = e->best_time;
    out->episodes_per_s = out->wall_s > 0 ? (double)e->episodes / out->wall_s : 0;
    out->tree_nodes = e->n_nodes;
    out->decisions_before = e->units.decisions_before;
    out->units = (int)e->units.n;
    out->decisions_after = (int)e->n_distinct;
    out->exhausted = e->exhausted;
    out->stopped_by = e->stopped_by;
    out->cached_states = e->cap_cache;
    if (e->n_workers)
        pthread_mutex_lock(&e->mu);
    out->batch_s = e->batch_s;
    out->imbalance_s = e->imbalance_s;
    for (int i = 0; i < e->n_workers; i++) {
        const worker *w = &e->w[i];
        out->busy_s += w->t_busy;
        out->wait_s += w->t_wait;
        out->state_s += w->t_state;
        out->apply_s += w->t_apply;
        out->score_s += w->t_score;
        out->worker_cpu_s += w->cpu_s;
        out->replays += w->replays;
        out->cache_hits += w->hits;
        out->known += w->known;
        out->scored += w->scored;
        out->refused += w->refused;
        out->unchanged += w->unchanged;
        if (w->scorer)
            out->replanned += cost_scorer_replanned(w->scorer);
    }
    if (e->n_workers)
        pthread_mutex_unlock(&e->mu);
}

int search_run(const ir_partition *start, const search_options *opts, search_result *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    engine e;
    int rc;
    if ((rc = engine_open(&e, start, opts, err)) < 0 || (rc = engine_search(&e, err)) < 0 ||
        (!e.order && (rc = order_decisions(&e, err)) < 0))
        goto fail;
    e.wall_s = ap_mono_s() - e.t0;
    engine_stats(&e, out);
    if ((rc = engine_result(&e, out, err)) < 0)
        goto fail;
    engine_free(&e);
    return 0;
fail:
    engine_free(&e);
    search_result_free(out);
    return rc;
}

/* ------------------------------------------------ engines, for mesh.c */

int search__engine_new(const ir_partition *start, const search_options *o, atomic_int *halt, search_engine **out,
                       ap_error *err)
{
    *out = NULL;
    engine *e = ap_malloc(sizeof *e);
    if (!e)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    int rc = engine_open(e, start, o, err);
    if (rc < 0) {
        engine_free(e);
        ap_free(e);
        return rc;
    }
    e->halt = halt;
    if ((rc = decisions(e, err)) < 0) {
        engine_free(e);
        ap_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

int search__engine_run(search_engine *e, int64_t max_episodes, double deadline, bool reserve, ap_error *err)
{
    if (e->exhausted || e->stop || (e->o.patience > 0 && e->episodes - e->best_episode >= e->o.patience))
        return 0;
    double t0 = ap_mono_s();
    e->o.max_episodes = max_episodes;
    e->deadline = deadline;
    e->reserve = reserve;
    int rc = make_scorers(e, err);
    if (rc == 0)
        rc = engine_search(e, err);
    e->wall_s += ap_mono_s() - t0;
    return rc;
}

int64_t search__engine_first_look(const search_engine *e) { return (int64_t)e->n_dec + e->o.batch; }

double search__engine_end_s(const search_engine *e, bool result) { return end_s(e, result); }

void search__engine_pause(search_engine *e)
{
    pthread_mutex_lock(&e->mu);
    for (int k = 0; k < e->cap_cache; k++) {
        ir_partition_free(e->cache[k].p);
        memset(&e->cache[k], 0, sizeof e->cache[k]);
    }
    for (int k = 0; k < e->n_pool; k++)
        ir_partition_free(e->pool[k]);
    e->n_pool = 0;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->n_workers; i++) {
        cost_scorer_free(e->w[i].scorer);
        cost_scorer_free(e->w[i].exact);
        e->w[i].scorer = e->w[i].exact = NULL;
    }
}

void search__engine_best(search_engine *e, search_best *b)
{
    const search_node *n = &e->nodes[e->best];
    b->runtime_s = n->runtime_s;
    b->peak = n->peak;
    b->fits = fits(e, n->peak);
    b->can_fit = b->fits;
    for (uint32_t i = 0; !b->can_fit && i < e->n_nodes && e->n_save; i++)
        b->can_fit = completed_time(e, i) < INFINITY;
    b->axes = ir_pctx_mesh(e->c)->n_axes;
    b->episodes = e->episodes;
    b->done = e->exhausted || e->stop || (e->o.patience > 0 && e->episodes - e->best_episode >= e->o.patience);
}

int search__engine_exact_best(search_engine *e, ap_error *err)
{
    if (e->fallback)
        return 0;
    batch_clear(e);
    int rc = exact_add(e, e->best, NULL);
    return rc < 0 ? ap_error_set(err, rc, "out of memory in the search") : exact_run(e, err);
}

int search__engine_best_state(search_engine *e, ir_partition **out, ap_error *err)
{
    int depth = best_chain(e, err);
    if (depth < 0)
        return depth;
    return replay(&e->w[0], e->chain_dec, 0, (uint32_t)depth, NULL, NULL, out, err);
}

int search__engine_result(search_engine *e, search_result *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = e->order ? 0 : order_decisions(e, err);
    if (rc < 0)
        return rc;
    engine_stats(e, out);
    rc = engine_result(e, out, err);
    if (rc < 0)
        search_result_free(out);
    return rc;
}

void search__engine_free(search_engine *e)
{
    if (!e)
        return;
    engine_free(e);
    ap_free(e);
}

void search_result_free(search_result *r)
{
    if (!r)
        return;
    ir_partition_free(r->best);
    ir_lowered_free(&r->lowered);
    ir_pctx_free(r->ctx);
    ap_free(r->meshes);
    ap_free(r->schedule);
    ap_free(r->actions);
    json_decref(r->explanation);
    ap_free(r->explanation_text);
    memset(r, 0, sizeof *r);
}
