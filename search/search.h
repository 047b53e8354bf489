/*
 * search.h - AutomaticPartition: a Monte Carlo tree search over PartIR
 * actions (DESIGN.md, "Search").
 *
 * A search starts from a partition state (usually after the manual
 * tactics) and looks for the actions that minimize the estimated step time
 * of the partitioned program on a device, with a steep penalty above a
 * memory limit.  An action tiles one decision unit on one dim along one of
 * the allowed mesh axes, or marks it atomic along an axis; `propagate`
 * follows each action; a state is its own candidate (stopping is always
 * allowed).  Every candidate is scored by the cost model's fast scorer
 * (cost_scorer: the same model as the lowered program's report); the full
 * lowering runs once, on the result.
 *
 * DECISION UNITS: the arguments of the function, reduced as fast
 * partitioners do - arguments whose location paths differ only by layer
 * indices (params['block_7']['mlp']['w_up'] and its siblings) and have one
 * type are one unit; an optimizer moment follows the parameter it updates
 * (found from the update ops: the moment reaches that parameter's update
 * through elementwise ops only); actions that give the same state at the
 * start (dims propagation ties together) are twins, tried once at the
 * start and apart past it only where the tree has not shown one holding
 * the others (from scratch, w_up's hidden dim and w_down's are one state
 * until the batch is tiled along the axis, then two FSDP steps); actions
 * that are refused or change nothing are pruned.  Hints add or override
 * groups.
 *
 * REPRODUCIBLE: workers share one tree.  Leaves are chosen in batches of a
 * fixed size by the coordinating thread (deterministically, from the seed),
 * evaluated in parallel, and backed up in batch order, so under an episode
 * budget the result depends on the seed alone, never on the thread count
 * or timing.  Under a wall-time budget only the quality holds.
 *
 * Every function that can fail returns 0 or a negative AP_E* code and fills
 * `err` (may be NULL).  Nothing here keeps global state.
 */
#ifndef SEARCH_H
#define SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ap.h"
#include "cost.h"
#include "ir.h"
#include "partir.h"

/* What the progress callback sees, at least every `progress_interval_s`. */
typedef struct search_progress {
    int64_t episodes;          /* candidates evaluated */
    double elapsed_s;
    double episodes_per_s;
    size_t tree_nodes;
    double best_runtime_s;     /* of the best schedule so far */
    int64_t best_peak_bytes;   /* when it fits, at most (the program's order's figure: cost_options.peak_enough);
                                  the result's figures are the lowest */
    bool best_fits;            /* within the memory limit */
    double start_runtime_s;
    const char *best_schedule; /* the search's actions so far, as schedule text */
    /* the search's checkpoint (search_options.resume takes it back): valid
     * during the call only */
    const void *checkpoint;
    size_t checkpoint_len;
    bool final;                /* the last call, as the search ends */
} search_progress;

/* Returns nonzero to stop the search (it then ends as if out of budget). */
typedef int (*search_progress_fn)(void *ctx, const search_progress *p);

typedef struct search_options {
    uint32_t axes;              /* mesh axes the search may use: bit i = axis i; 0 = all */
    cost_device device;
    const cost_mesh *tiers;     /* NULL: the default tiers */
    cost_options cost;          /* overlap; top_k of the reports */
    double memory_limit;        /* bytes; 0 = the device's HBM; negative = none */
    double memory_margin;       /* share of the limit kept free, [0, 1): the search
                                   aims at memory_limit x (1 - margin) (0 = none) */
    uint64_t seed;
    int64_t max_episodes;       /* budgets: 0 = none of that kind; with none, 1000 episodes */
    double time_limit_s;        /* seconds to the answer: the episodes stop early by what the
                                   result is expected to take (mcts.c, end_s) */
    int64_t patience;           /* stop after this many episodes without improvement */
    int threads;                /* workers, >= 1 (0 = 1) */
    int batch;                  /* leaves per batch, independent of threads (0 = 16) */
    int max_depth;              /* actions on one path (0 = 16, at most 64) */
    size_t cache_bytes;         /* states kept to re-derive others from (0 = 512 MiB; at
                                   least 8 states, at most 1024) */
    double exploration;         /* UCT's constant on rewards relative to the best (0 = 0.7) */
    double widening;            /* progressive widening: a node visited v times grows at
                                   most 1 + widening sqrt(v) children (0 = 2; a large
                                   value expands a node whole at once) */
    bool no_prior;              /* for comparisons: try decisions in their plain order,
                                   not by the reward each gives at the start */
    const char *hints;          /* NULL, or lines: `group GLOB...`, `split GLOB...`, `fix GLOB...` */
    search_progress_fn progress;
    void *progress_ctx;
    /* A checkpoint of an interrupted run of this search (the same start,
     * options and seed): the search replays it and goes on, ending with
     * the answer an uninterrupted run gives.  A checkpoint of another
     * search is ignored.  NULL: start afresh. */
    const void *resume;
    size_t resume_len;
    double progress_interval_s; /* 0 = 0.25 */
} search_options;

/* Defaults: all axes, h100, HBM limit, seed 1, 1000 episodes, 1 thread. */
void search_options_init(search_options *o);
/* The options a search runs with: every zero that means a default replaced
 * by it (the one place the defaults live), for a mesh of n_axes axes.
 * Fails with AP_EINVALID on options no search takes (an axis outside the
 * mesh, negative budgets, too many threads or actions on a path). */
int search_options_resolve(const search_options *in, int n_axes, search_options *out, ap_error *err);

/* One mesh a search over meshes (search_run_devices) tried. */
typedef struct search_mesh_row {
    ir_mesh mesh;             /* named by the roles its best schedule gives the axes, or as asked */
    double runtime_s;         /* its best schedule's step time */
    int64_t peak_bytes;       /* and peak memory per device */
    bool fits;                /* within the memory limit */
    int64_t episodes;         /* spent on it */
    bool chosen;
} search_mesh_row;

typedef struct search_result {
    ir_pctx *ctx;              /* search_run_devices: the chosen mesh's context, which best and
                                  lowered are of (owned; the module must outlive it); NULL from
                                  search_run (best is of the start's context) */
    search_mesh_row *meshes;   /* search_run_devices: every mesh tried, in the order tried (owned) */
    int n_meshes;
    int meshes_considered;     /* factorizations the program can use (some may be left untried) */
    ir_partition *best;        /* the best state (owned); its log is the schedule */
    ir_lowered lowered;        /* its SPMD program (owned), which `report` estimates */
    char *schedule;            /* the whole schedule from a fresh state (manual
                                  tactics included): text `autopart apply
                                  --schedule` takes back */
    char *actions;             /* only what the search added */
    cost_report start;         /* the start state's report */
    cost_report report;        /* the best state's, from the full lowering */
    bool fits;                 /* within the memory limit */
    bool none_fits;            /* nothing found fits: best is the lowest-memory state */
    double memory_limit;       /* bytes, < 0 none */
    int64_t episodes, best_episode;
    int64_t replayed;          /* of the episodes, those taken from search_options.resume */
    double wall_s, episodes_per_s;
    double best_wall_s;        /* seconds into the search when the best was found */
    size_t tree_nodes;
    int decisions_before;      /* tile/atomic choices over single arguments */
    int units;                 /* decision units after grouping */
    int decisions_after;       /* distinct decisions after ties and pruning */
    bool exhausted;            /* the whole (reduced) space was explored */
    int64_t scored;            /* candidates scored (the rest were refused, changed
                                  nothing, or were states the tree held) */
    int64_t known;             /* candidates that were states the tree held */
    int64_t refused;           /* candidates whose action was refused */
    int64_t unchanged;         /* candidates whose action changed nothing */
    int64_t replays;           /* actions re-applied to re-derive states */
    int64_t cache_hits;        /* states found in a worker's cache */
    int64_t replanned;         /* ops the workers' scorers planned the lowering of, in
                                  all: each score plans again the ops that differ from
                                  the state its scorer scored before */
    int cached_states;         /* states the workers keep (shared) */
    /* where the time went, summed over the workers (wall seconds): batches
     * ran batch_s (each worker busy or waiting at the barrier); a worker
     * was busy busy_s in all, of it state_s re-deriving parent states,
     * apply_s cloning, applying and propagating, score_s scoring; the
     * evaluations took worker_cpu_s of CPU time (the rest of the search's
     * CPU time is the coordinator's: the tree, the start and the result,
     * one thread's work whatever the threads).  Waiting at batch barriers:
     * threads * batch_s - busy_s, of it wait_s for a state another worker
     * was deriving.  imbalance_s: by the CPU time of each evaluation, the
     * seconds threads would wait at barriers on an idle machine (the
     * batches' split of work, apart from the machine's load). */
    double batch_s, busy_s, state_s, apply_s, score_s, wait_s, worker_cpu_s, imbalance_s;
    const char *stopped_by;    /* "episodes", "time", "patience", "exhausted", "callback" */
    json_t *explanation;       /* owned: see search_explain below */
    char *explanation_text;    /* the same, readable */
} search_result;

/* Reads `hints` as search_run would over the context's function and the
 * allowed axes, so that a service can refuse bad hints before it accepts
 * a search.  Fails as search_run does on them (AP_ESYNTAX, "hints:LINE:COL:
 * error: ...", or AP_EINVALID). */
int search_check_hints(const ir_pctx *c, uint32_t axes, const char *hints, ap_error *err);

/* Runs a search from `start` (not modified).  On success *out holds the
 * result (search_result_free).  Fails with AP_EINVALID on bad options,
 * AP_ENOMEM, or the lowering's error when the start state cannot be
 * lowered. */
int search_run(const ir_partition *start, const search_options *opts, search_result *out, ap_error *err);
void search_result_free(search_result *r);

/* ------------------------------------------------------ choosing the mesh */

/* A search that also chooses the mesh: N devices, as 1 to 4 axes. */
typedef struct search_devices {
    int64_t devices;
    /* "data,model": exactly these axes, in this order (device ids
     * row-major), each size chosen by the search (1 allowed).  NULL: 1 to
     * 4 axes of sizes >= 2, named afterwards by the role the best schedule
     * gives each (data: batch inputs tiled; fsdp: inputs and parameters;
     * model: parameters only; expert: experts' parameters on their leading
     * dim; replica: nothing). */
    const char *axes_names;
    const char *manual; /* tactics applied first (they name axes_names' axes), or NULL */
} search_devices;

/* Checks the devices and names alone: N from 2 to 2^20, 1 to 4 distinct
 * identifiers of at most 31 characters, manual tactics only with names.
 * AP_EINVALID with a message naming the value. */
int search_devices_check(const search_devices *d, ap_error *err);

/* Searches function func of m (calls inlined) over every arrangement of
 * d->devices into axes whose every axis can tile a dimension the search
 * decides on (arrangements that only permute axes the device links treat
 * alike are tried once): each mesh gets its own tree, the first look a
 * share of the budget (under a time budget alone, or an episode budget
 * whose shares are less than that, its root pass and one batch, meshes in
 * order while half the budget lasts: the rest are counted in
 * meshes_considered and listed in the explanation's meshes_untried), the
 * best few the rest (halved at each round), and
 * the best schedule of the best mesh is the result, with out->ctx its
 * context and out->meshes every mesh tried.  The options are search_run's
 * (o->axes: bits over axes_names; none without names); with no budget,
 * 1000 episodes per mesh.  Under an episode budget the answer depends on
 * the seed alone: meshes are searched in parallel by o->threads threads,
 * each tree by one.  AP_EINVALID when no mesh of N devices can be used,
 * with the reason. */
int search_run_devices(ir_module *m, ir_op *func, const search_devices *d, const search_options *o,
                       search_result *out, ap_error *err);

/* The result as JSON: {"schedule", "actions", "cost" (the report's cost
 * object), "collectives", "start_cost", "episodes", "episodes_per_s",
 * "best_episode", "wall_s", "tree_nodes", "fits", "none_fits",
 * "memory_limit_bytes", "stopped_by", "decisions": {"before", "units",
 * "after"}, "explanation"}.  A new reference, NULL when out of memory. */
json_t *search_result_json(const search_result *r);

/* The explanation (search_result.explanation, or the "explanation" of
 * search_result_json as a client reads it from a stored answer) as text for
 * people, appended to out; search_result.explanation_text is this with
 * flags 0.  Repeats fold: each decision shows its best three alternatives,
 * what blocked propagation one line per pattern (op, axis, reason) with a
 * count and places, the values live at the peak one line per size and op.
 * SEARCH_TEXT_VERBOSE lists every alternative and place; the JSON always
 * has every one.  SEARCH_TEXT_COST_ABOVE: the text follows the cost
 * estimate (cost_report_text), whose breakdown of the peak is this one's,
 * so it is referred to rather than repeated.  Returns 0, AP_ENOMEM, or
 * AP_EINVALID when ex is not an explanation of this form (an older
 * answer's: print its explanation_text). */
enum { SEARCH_TEXT_VERBOSE = 1u, SEARCH_TEXT_COST_ABOVE = 2u };
int search_explanation_text(const json_t *ex, unsigned flags, ap_buf *out);

#endif /* SEARCH_H */
