/*
 * apply.h - partitioning a module with a schedule of PartIR actions and
 * gathering what a user sees of the result: the shardings of arguments and
 * results as partition specs, the device-local SPMD module, the estimated
 * cost after every tactic, and the report.  One implementation for
 * `autopart apply` and for autopartd's Apply and Search answers, so the
 * CLI and the daemon cannot drift apart.
 *
 * Use: apply_open_module -> apply_schedule (any number of
 * times) -> apply_lower (estimating with a device) -> the views below ->
 * apply_state_free.  A state is used by one thread at a time; nothing here
 * keeps global state.
 */
#ifndef APPLY_H
#define APPLY_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ap.h"
#include "cost.h"
#include "ir.h"
#include "parse.h"
#include "partir.h"

/* What one tactic of a schedule led to (the PartIR paper's partir.jit
 * metadata): collectives and the cost estimate after it. */
typedef struct apply_tactic {
    char text[160]; /* the tactic on one line ("...": cut) */
    uint64_t count[IR_COLL__COUNT];
    cost_report cost;
    bool costed;
} apply_tactic;

typedef struct apply_state {
    ir_module *m;
    ir_pctx *ctx;
    ir_partition *p;
    ir_mesh mesh;
    const char *name; /* the module's name in messages; points into m */
    /* apply_schedule with a device: one row per tactic (heap) */
    apply_tactic *tactics;
    int n_tactics, cap_tactics;
    /* apply_lower */
    ir_lowered lw;
    bool lowered;
    /* apply_lower with a device */
    cost_report cost;
    bool costed;
    /* apply_open_module: the calls of the partitioned function it inlined;
     * apply_note_schedule: the note on the schedule's %N (heap, or NULL),
     * which apply_report_json carries as "notes" */
    uint32_t inlined_calls;
    char *note;
} apply_state;

/* The mesh of the module's `sdy.mesh @name = <["x"=2, "y"=4]>` op, if it
 * declares one. */
bool apply_module_mesh(const ir_module *m, ir_mesh *mesh);

/* Takes module m (owned by the state from now on, also on failure), picks
 * function func_name (NULL: the entry function), inlines its calls and
 * makes a fresh state over mesh (NULL: the module's sdy.mesh), starting
 * from the arguments' sharding annotations when `import` is set.  Fails
 * with AP_ENOTFOUND (no such function), AP_EINVALID (no mesh given and none
 * declared; a mesh the annotations do not fit) and the errors of inlining
 * and ir_pctx_new; err names the problem.  Free with apply_state_free
 * (also after a failure, and on a zeroed state). */
int apply_open_module(ir_module *m, const char *func_name, const ir_mesh *mesh, bool import, apply_state *st,
                      ap_error *err);
void apply_state_free(apply_state *st);
/* Makes a state of parts opened elsewhere (the CLI opens modules with its
 * own messages); the state owns them from now on. */
void apply_adopt(apply_state *st, ir_module *m, ir_pctx *ctx, ir_partition *p);

/* The note a schedule gets when it names a value %N (outside comments and
 * quoted names) of function `func`, which had `calls` calls inlined before
 * partitioning: %N counts the values of the inlined function, as `autopart
 * parse --inline` prints it, not the module as written (a schedule written
 * against the module's own printout tiles other values, silently when the
 * ranks allow).  `func_given`: the function was named (--func).  Heap text
 * without a prefix or newline (ap_free); NULL when there is nothing to say
 * (no calls, no %N) or out of memory. */
char *apply_inline_note(const char *func, uint32_t calls, const char *schedule, bool func_given);
/* Sets st->note to apply_inline_note's for schedule on the function
 * apply_open_module opened.  AP_ENOMEM only. */
int apply_note_schedule(apply_state *st, const char *schedule, bool func_given, ap_error *err);

/* Applies schedule text (see ir_schedule_apply: "schedule:LINE:COL: error:
 * ..." on bad text).  With a device, lowers and estimates the state after
 * every tactic into st->tactics (costly: one lowering per tactic). */
int apply_schedule(apply_state *st, const char *schedule, const cost_device *dev, const cost_options *opts,
                   ap_error *err);
/* The callback apply_schedule gives ir_schedule_apply_cb to cost every
 * tactic: `costing` is an apply_costing.  For callers that apply schedules
 * themselves. */
typedef struct apply_costing {
    apply_state *st;
    const cost_device *dev;
    const cost_options *opts;
} apply_costing;
int apply_after_tactic(void *costing, ir_partition *p, const char *tactic, size_t len, ap_error *err);
/* Lowers the state to the device-local SPMD program (st->lw) and, with a
 * device (NULL: none), estimates it there into st->cost
 * (cost_state_estimate). */
int apply_lower(apply_state *st, const cost_device *dev, const cost_options *opts, ap_error *err);
/* The state becomes p, already lowered to *lw and estimated as *cost (a
 * search's best: search_result's best, lowered and report); takes p and
 * the lowered program (*lw is zeroed), and ctx, p's context, when it is
 * not the state's (a search that chose the mesh; NULL: the state's). */
void apply_take_lowered(apply_state *st, ir_pctx *ctx, ir_partition *p, ir_lowered *lw, const cost_report *cost);

/* The schedule of the state as text (one action per line).  Heap, ap_free;
 * NULL when out of memory. */
char *apply_schedule_text(const apply_state *st);

/* One argument or result as it enters or leaves the SPMD program. */
typedef struct apply_sharding {
    bool result;
    uint32_t index;
    char *name;  /* JAX parameter path, %argN, or "result #N" */
    char *type;  /* global type */
    int rank;    /* dims below */
    int n_axes[IR_MAX_RANK];            /* axes tiling each dim, major first */
    int axes[IR_MAX_RANK][IR_MAX_AXES]; /* mesh axis indices */
    int n_partial;                      /* pending partial sums */
    int partial[IR_MAX_AXES];
    char *spec; /* P('batch', None) */
} apply_sharding;

/* The shardings of the arguments (from the state) and, once lowered, of the
 * results, in that order.  *out is a heap array of *n entries, freed with
 * apply_shardings_free.  AP_ENOMEM only. */
int apply_shardings(const apply_state *st, apply_sharding **out, int *n, ap_error *err);
void apply_shardings_free(apply_sharding *s, int n);

/* The shardings as JSON: [{"kind", "index", "name", "type", "spec"}].
 * New reference; NULL when out of memory. */
json_t *apply_shardings_json(const apply_state *st);
/* The report `autopart apply --json` prints: mesh, collectives and their
 * bytes, dynslices, shardings, what blocked propagation, the cost (when
 * estimated), the rows of every tactic (when costed) and the schedule.
 * Needs apply_lower.  New reference; NULL when out of memory. */
json_t *apply_report_json(const apply_state *st);


#endif /* APPLY_H */
