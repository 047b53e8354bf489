/*
 * cli.h - the subcommands of the `autopart` command-line tool and what they
 * share.  Each takes argc/argv with argv[0] the subcommand name and returns
 * its exit status.  Every subcommand speaks with one voice:
 *
 *   - errors are one line on stderr: `FILE:LINE:COL: error: MESSAGE` when
 *     they point into text (a module, a schedule file, an option's text),
 *     `autopart CMD: error: MESSAGE` otherwise;
 *   - exit status CLI_OK (0) on success, CLI_FAIL (1) when the input is
 *     wrong or the work failed, CLI_USAGE (2) when the command line is
 *     wrong (unknown option, missing or malformed option value).
 */
#ifndef CLI_H
#define CLI_H

#include <stdio.h>

#include "cost.h"
#include "ircheck.h"
#include "interp.h"
#include "ir.h"
#include "parse.h"
#include "partir.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cli_parse(int argc, char **argv);
int cli_apply(int argc, char **argv);
int cli_redistribute(int argc, char **argv);
int cli_check(int argc, char **argv);
int cli_search(int argc, char **argv);

/* Prints `autopart CMD: error: MESSAGE`; returns CLI_FAIL. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints `autopart CMD: error: MESSAGE`; returns CLI_USAGE. */
int cli_usage_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports a library error: `FILE:LINE:COL: error: MESSAGE` when it points
 * into text, else `autopart CMD: error: [WHAT: ]MESSAGE` (what may be NULL).
 * Returns CLI_FAIL. */
int cli_fail_err(const char *cmd, const char *what, const ap_error *err);
/* What getopt_long's ':' or '?' means for argv: "option '--x' needs a
 * value" or "unknown option '--x'".  Call with opterr = 0 and an optstring
 * starting with ':'.  Returns CLI_USAGE. */
int cli_bad_option(const char *cmd, int ch, char **argv);
/* The usage synopsis (first line of help) after an error about the
 * arguments, and where to find the rest.  Returns CLI_USAGE. */
int cli_usage_hint(const char *cmd, const char *synopsis);

/* Reads and parses FILE ("-" for stdin) in the given format, printing
 * "FILE:LINE:COL: error: ..." to stderr on failure (with a hint when a
 * forced format does not match the content).  Returns the module, or NULL
 * when it failed (exit status CLI_FAIL). */
ir_module *cli_load_module(const char *cmd, const char *path, ir_format fmt);
/* Parses "stablehlo" / "hlo" / "auto"; returns false on anything else. */
bool cli_parse_format(const char *s, ir_format *out);

/* The help of --import, one text for apply, check and search (cli_state
 * reads the annotations the same way for each). */
#define CLI_HELP_IMPORT                                                                                          \
    "  --import           start from the sharding annotations the arguments carry\n"                          \
    "                     (sdy.sharding, mhlo.sharding) and the sharding constraints\n"                        \
    "                     in the function's body (sdy.sharding_constraint, custom\n"                           \
    "                     calls @Sharding), loop bodies and case branches included;\n"                         \
    "                     not those in a region partitioned whole (a reduce or\n"                              \
    "                     scatter body, sdy.manual_computation): it says so; a Shardy\n"                       \
    "                     sharding with a closed dim keeps its value replicated\n"                             \
    "                     (atomic) along the axes it does not name\n"

/* What `apply` and `check` share: a module, the context of its function
 * over a mesh, and a state to apply a schedule to. */
typedef struct cli_partition_args {
    const char *cmd;       /* the subcommand, for messages */
    const char *path;      /* FILE or "-" */
    ir_format fmt;
    const char *func_name; /* NULL: the entry function */
    const char *mesh_text; /* NULL: the module's sdy.mesh */
    bool import;           /* start from the arguments' sharding annotations */
    const char *schedule;  /* the schedule to apply (NULL: none), for the note on %N */
} cli_partition_args;

typedef struct cli_partitioned {
    ir_module *m;
    ir_pctx *ctx;
    ir_partition *p;
} cli_partitioned;

/* Loads the module, picks the function, inlines its calls and makes a fresh
 * state (with the imported shardings applied when asked).  When calls were
 * inlined and the schedule names a value %N, notes on stderr that %N counts
 * the values of the inlined function (`autopart parse --inline`).  Returns 0, or
 * the exit status after printing why (1 bad input, 2 bad usage).  Free
 * with cli_partitioned_free (also on a zeroed struct). */
int cli_partition_open(const cli_partition_args *a, cli_partitioned *st);
void cli_partitioned_free(cli_partitioned *st);
/* A schedule given on the command line: the text itself, or "@FILE". */
typedef struct cli_schedule {
    char *text;       /* owned */
    const char *name; /* how errors name it: the file, or "schedule" */
} cli_schedule;

/* Reads a --schedule (or --manual) argument `opt`: the text, or `@FILE`
 * read from FILE.  An empty schedule (no action, only blanks or comments) is
 * refused.  Returns 0, or the exit status after printing why.  Free with
 * cli_schedule_free (also on a zeroed struct). */
int cli_schedule_read(const char *cmd, const char *opt, const char *arg, cli_schedule *out);
void cli_schedule_free(cli_schedule *s);
/* Applies s to p (calling fn after every tactic when fn is not NULL).
 * Returns 0, or CLI_FAIL after printing the error, positioned in the
 * schedule's file when it came from one. */
int cli_schedule_apply(const char *cmd, const cli_schedule *s, ir_partition *p, ir_tactic_fn fn, void *ctx);
/* Looks up --device NAME (a registry name or alias) or a JSON file
 * describing one (a path ending in .json).  Returns 0, or CLI_USAGE after
 * printing the known names. */
int cli_device(const char *cmd, const char *arg, cost_device *out);
/* The device help line: registry names and aliases, for --help texts. */
void cli_print_device_names(FILE *f, const char *indent);

/* output.c: listings for people.  A row of the shardings: kind
 * ("argument", "result", or NULL to leave the column out), name, global
 * type and partition spec. */
typedef struct cli_sharding {
    const char *kind, *name, *type, *spec;
} cli_sharding;

/* Prints a schedule with one line per decision: a run of three or more
 * `tile VALUE DIM AXIS` (or `atomic VALUE AXIS`) lines with one DIM and
 * AXIS as one line over a glob of the values, `# N values` after it, when
 * that glob selects exactly those of args[].name, in order, and a
 * `propagate` after an action on its line (`ACTION; propagate`): the text
 * applies as the original does.  verbose: the text as it is. */
void cli_print_schedule(FILE *f, const char *text, const cli_sharding *args, size_t n_args, bool verbose);
/* Prints the rows one per pattern: rows of one kind, type and spec whose
 * names differ in one number (the layer) as one row, the number written as
 * the set of its values (params['block_{0..31}']['mlp']['w_up'] x32); the
 * rows of a kind that tile nothing (P(), P(None, None)) after the others
 * as one paragraph of their names (`replicated x577: ...`, a head the
 * names share written once); verbose: one row each. */
void cli_print_shardings(FILE *f, const cli_sharding *rows, size_t n, const char *indent, bool verbose);

/* What `autopart search` prints, made from a local or a remote result. */
typedef struct cli_search_text {
    long long decisions_before, units, decisions_after;
    bool have_stats;
    long long episodes, best_episode, tree_nodes;
    double wall_s, episodes_per_s;
    const char *stopped_by;
    double runtime_s, start_runtime_s;
    bool none_fits;
    const char *mesh; /* --devices: the mesh the search chose, else NULL */
    long long n_meshes;
    const char *actions, *schedule, *cost_text, *explanation;
    const cli_sharding *args; /* the arguments' shardings */
    size_t n_args;
} cli_search_text;
void cli_print_search(FILE *f, const cli_search_text *t, bool verbose);

#endif
