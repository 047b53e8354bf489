/*
 * cli.h - the subcommands of the `autopart` command-line tool.  Each takes
 * argc/argv with argv[0] the subcommand name and returns the exit status
 * (0 success, 1 failure, 2 usage error).
 */
#ifndef CLI_H
#define CLI_H

#include "ir.h"

int cli_parse(int argc, char **argv);
int cli_apply(int argc, char **argv);
int cli_redistribute(int argc, char **argv);

/* Reads and parses FILE ("-" for stdin) in the given format, printing
 * "FILE:LINE:COL: error: ..." to stderr on failure.  Returns the module or
 * NULL. */
ir_module *cli_load_module(const char *path, ir_format fmt);
/* Prints an error line for err to stderr. */
void cli_print_error(const ap_error *err);
/* Parses "stablehlo" / "hlo" / "auto"; returns false on anything else. */
bool cli_parse_format(const char *s, ir_format *out);

#endif
