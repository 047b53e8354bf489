/*
 * cli.h - the subcommands of the `autopart` command-line tool.  Each takes
 * argc/argv with argv[0] the subcommand name and returns the exit status
 * (0 success, 1 failure, 2 usage error).
 */
#ifndef CLI_H
#define CLI_H

#include "interp.h"
#include "ir.h"
#include "partir.h"

int cli_parse(int argc, char **argv);
int cli_apply(int argc, char **argv);
int cli_redistribute(int argc, char **argv);
int cli_check(int argc, char **argv);

/* Reads and parses FILE ("-" for stdin) in the given format, printing
 * "FILE:LINE:COL: error: ..." to stderr on failure.  Returns the module or
 * NULL. */
ir_module *cli_load_module(const char *path, ir_format fmt);
/* Prints an error line for err to stderr. */
void cli_print_error(const ap_error *err);
/* Parses "stablehlo" / "hlo" / "auto"; returns false on anything else. */
bool cli_parse_format(const char *s, ir_format *out);

/* What `apply` and `check` share: a module, the context of its function
 * over a mesh, and a state to apply a schedule to. */
typedef struct cli_partition_args {
    const char *cmd;       /* the subcommand, for messages */
    const char *path;      /* FILE or "-" */
    ir_format fmt;
    const char *func_name; /* NULL: the entry function */
    const char *mesh_text; /* NULL: the module's sdy.mesh */
    bool import;           /* start from the arguments' sharding annotations */
} cli_partition_args;

typedef struct cli_partitioned {
    ir_module *m;
    ir_pctx *ctx;
    ir_partition *p;
} cli_partitioned;

/* Loads the module, picks the function, inlines its calls and makes a fresh
 * state (with the imported shardings applied when asked).  Returns 0, or
 * the exit status after printing why (1 bad input, 2 bad usage).  Free
 * with cli_partitioned_free (also on a zeroed struct). */
int cli_partition_open(const cli_partition_args *a, cli_partitioned *st);
void cli_partitioned_free(cli_partitioned *st);
/* A --schedule argument: the text itself, or "@FILE" read from FILE.  The
 * caller frees the result with ap_free; NULL after printing why. */
char *cli_read_schedule(const char *cmd, const char *arg);

#endif
