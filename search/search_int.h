/*
 * search_int.h - private to the search (units.c, mcts.c, explain.c): the
 * decision units and actions, and the tree the explanation reads.
 */
#ifndef SEARCH_INT_H
#define SEARCH_INT_H

#ifndef AP_SEARCH
#error "search_int.h is private to the search (search/*.c): use search.h"
#endif

#include "search.h"

#include <stdatomic.h>

/* ------------------------------------------------------------ units */

/* A decision unit: arguments that are tiled (or made atomic) together.
 * Members are argument value ids: the leaders (one argument, or the layer
 * siblings of one) first, then the optimizer moments that follow them. */
typedef struct search_unit {
    uint32_t first, n;  /* members at units->members[first .. first + n) */
    uint32_t n_leaders;
    const ir_type *type; /* of the leaders */
    char name[192];      /* the leaders' path with layer indices as '*', or the argument's name */
} search_unit;

typedef struct search_units {
    search_unit *v;
    uint32_t n;
    uint32_t *members;
    uint32_t n_members;
    int decisions_before; /* tile/atomic choices over single arguments */
} search_units;

/* The decision units of ctx's function over the allowed axes (hints:
 * search_options.hints, may be NULL).  Fails with AP_ESYNTAX on a bad hint
 * ("hints:LINE:COL: error: ...").  Free with search__units_free. */
int search__units(const ir_pctx *c, uint32_t axes, const char *hints, search_units *out, ap_error *err);
void search__units_free(search_units *u);

/* An action: tile every member of a unit on `dim` along `axis`, or make
 * them atomic along it (dim -1); propagate follows. */
typedef struct search_action {
    uint32_t unit;
    int8_t dim;
    uint8_t axis;
} search_action;

/* Applies a to p.  Returns 0, 1 when an action is refused (p is then
 * partly changed: discard it), or a negative error. */
int search__apply(ir_partition *p, const search_units *u, search_action a, ap_error *err);
/* "tile params['block_*']['mlp']['w_up'] 1 model" */
void search__action_text(const search_units *u, const ir_mesh *mesh, search_action a, ap_buf *b);

/* ------------------------------------------------------------- tree */

#define SEARCH_NONE UINT32_MAX

typedef struct search_edge {
    uint32_t decision; /* index into the decision list */
    uint32_t child;    /* node, or SEARCH_NONE when pruned */
    bool implied;      /* the child's state holds every twin of the decision (search_decision) */
} search_edge;

typedef struct search_node {
    uint64_t hash;
    uint32_t parent;    /* the node whose expansion made it (its path is the canonical one) */
    uint32_t decision;  /* the decision applied to the parent */
    uint16_t depth;
    bool exhausted;     /* nothing left to try below */
    uint32_t next_try;  /* next decision (in its order: mcts.c's order_at) to try here */
    uint32_t next_save; /* next memory-saving decision (engine's save order) to try here */
    bool completes;     /* made by a step of the completion */
    bool led;           /* taken up by the completion as its lead */
    search_edge *edges;
    uint32_t n_edges, cap_edges;
    uint32_t visits;
    double best;        /* best reward in the subtree */
    /* its own state */
    double runtime_s;
    int64_t peak;       /* a state that fits: its program's order's figure until made exact (exact_add) */
    bool peak_exact;    /* peak is the lowest of the orders for sure (exact_add) */
    double reward;
    int64_t episode;    /* when it was found */
} search_node;

typedef struct search_decision {
    search_action a;
    double prior;   /* reward at the start state */
    double runtime_s;
    int64_t peak;
    uint32_t same_as; /* a decision giving the same start state, or SEARCH_NONE */
    uint32_t twin;    /* the next decision of those giving one state at the start (its
                         twins, a circle), or SEARCH_NONE when none does */
} search_decision;

/* What the explanation needs of a finished search. */
typedef struct search_tree_view {
    const search_units *units;
    const ir_mesh *mesh;
    const search_node *nodes;
    uint32_t n_nodes;
    const search_decision *decisions;
    uint32_t n_decisions;
    uint32_t best;          /* node */
    double memory_limit;    /* < 0: none */
    bool none_fits;
    const cost_scorer *scorer; /* scored the best state last: its peak breakdown */
    const ir_partition *best_state;
    const ir_partition *start; /* the state the search started from (its manual tactics) */
} search_tree_view;

/* Fills r->explanation and r->explanation_text. */
int search__explain(const search_tree_view *t, search_result *r, ap_error *err);
/* When the start is the answer: the best other state of the n nodes (the
 * highest reward below the root, the earlier on a tie), leaving out those
 * that cost what the start does (step time and peak); SEARCH_NONE when
 * none.  *states (may be NULL): how many are not left out. */
uint32_t search__best_other(const search_node *nodes, uint32_t n, uint32_t *states);
/* r->meshes as JSON: [{"mesh", "shape", "runtime_s", "peak_memory_bytes",
 * "fits", "episodes", "chosen"}].  A new reference; NULL when out of
 * memory. */
json_t *search__meshes_json(const search_result *r);

/* ------------------------------------------------ engines (mcts.c) */

/* One tree search, run in steps: what search_run does at once, for the
 * search over meshes (mesh.c), which grows several and keeps the best. */
typedef struct search_engine search_engine;

/* An engine searching from start (which must outlive it) with options o
 * (resolved by it); halt (may be NULL) stops it when another thread sets
 * it.  Scores the start.  Free with search__engine_free. */
int search__engine_new(const ir_partition *start, const search_options *o, atomic_int *halt, search_engine **out,
                       ap_error *err);
/* Searches on until max_episodes episodes in all (0: no episode budget),
 * now_s() reaching deadline (0: none; with reserve, the answer's: the
 * episodes end early by what search__engine_result will take), the
 * options' patience, the tree's end or the halt.  Under an episode budget
 * the tree depends on the seed and the budgets of the calls alone. */
int search__engine_run(search_engine *e, int64_t max_episodes, double deadline, bool reserve, ap_error *err);
/* Episodes of a first look at the engine's mesh: its root pass (every
 * decision once, which gives the order the tree grows in) and one batch
 * of the tree. */
int64_t search__engine_first_look(const search_engine *e);
/* Seconds, estimated, that search__engine_result (result) or else
 * search__engine_exact_best will take on e as it stands: what a driver
 * under a time budget keeps for the end (search__engine_run's deadline
 * is the episodes'). */
double search__engine_end_s(const search_engine *e, bool result);
/* Frees the states and scorers it keeps between runs (the next run makes
 * them again); the tree stays. */
void search__engine_pause(search_engine *e);

typedef struct search_best {
    double runtime_s;
    int64_t peak;
    bool fits;
    int64_t episodes; /* the engine's, in all */
    bool done;        /* nothing more to find: exhausted, patience, halted */
    bool can_fit;     /* it fits, or the completion expects a state over the limit to fit
                         (the start's savings still to take cover its excess) */
    int axes;         /* of the mesh searched */
} search_best;
void search__engine_best(search_engine *e, search_best *b);
/* The best state found (owned by the caller), replayed from the start. */
int search__engine_best_state(search_engine *e, ir_partition **out, ap_error *err);
/* Makes the best state's peak exact (while the search runs a state that
 * fits has its program's order's figure, an upper bound): what a mesh's
 * row prints. */
int search__engine_exact_best(search_engine *e, ap_error *err);
/* The result as search_run gives it (search_result_free). */
int search__engine_result(search_engine *e, search_result *out, ap_error *err);
void search__engine_free(search_engine *e);

/* ------------------------------------------------------- checkpoint */

/* The outcome of one evaluation (ckpt.c). */
typedef struct search_outcome {
    uint32_t parent, decision;
    int status; /* 0 evaluated, 1 refused, 2 unchanged */
    bool implied; /* the state holds every twin of the decision */
    uint64_t hash;
    double runtime_s;
    int64_t peak;
} search_outcome;

/* The outcomes so far, behind a header naming the search (ckpt.c).
 * data[0, len) is the checkpoint; records from pos to end are still to
 * replay. */
typedef struct search_log {
    uint8_t *data;
    size_t len, cap, pos, end;
    int64_t replayed; /* episodes taken from it */
} search_log;

/* A log that replays `resume` when it is a checkpoint of this search (the
 * same seed, batch, units and start state), else an empty one; *elapsed:
 * the seconds the checkpointed run had searched. */
int search__log_open(search_log *l, const void *resume, size_t resume_len, uint64_t seed, uint32_t batch,
                     uint32_t units, uint64_t root, double *elapsed);
void search__log_free(search_log *l);
/* The k-th record still to replay; false when there is none. */
bool search__log_peek(const search_log *l, uint32_t k, search_outcome *o);
/* n records replayed. */
void search__log_take(search_log *l, uint32_t n);
/* The rest does not match this run: drop it. */
void search__log_cut(search_log *l);
/* Appends an outcome (nothing while replaying). */
int search__log_add(search_log *l, const search_outcome *o);
/* Writes the seconds searched and the episodes into the header. */
void search__log_stamp(search_log *l, double elapsed, int64_t episodes);

#endif /* SEARCH_INT_H */
