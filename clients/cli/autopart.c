/*
 * autopart.c - entry point of the `autopart` command-line tool: dispatches
 * to the subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "remote.h"

static const struct command {
    const char *name;
    int (*run)(int, char **);
    const char *help;
} commands[] = {
    {"parse", cli_parse, "parse a StableHLO or HLO module; print it canonically or summarize it"},
    {"apply", cli_apply, "partition a module with a schedule of PartIR actions"},
    {"search", cli_search, "search for the schedule that makes a module fastest on a mesh (MCTS)"},
    {"check", cli_check, "run a partitioned module against the original on random inputs"},
    {"redistribute", cli_redistribute, "synthesize the collectives that change a distributed type"},
    {"list", cli_list, "list the searches autopartd has stored, newest first"},
    {"show", cli_show, "show one stored search: its request, progress and result"},
    {"cancel", cli_cancel, "cancel a queued or running search"},
    {"stats", cli_stats, "what autopartd has done since it started, and its store"},
    {"gc", cli_gc, "delete old searches from an autopartd store (retention, on demand)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: autopart COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < AP_ARRAY_LEN(commands); i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nRun 'autopart COMMAND --help' for the options of a command.\n"
               "Errors: FILE:LINE:COL: error: ... when they point into text, else\n"
               "autopart COMMAND: error: ...\n"
               "Exit status: 0 success, 1 bad input or a failure, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
    ap_malloc_one_arena(); /* a search's memory stays for the next (ap.h) */
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("autopart 0.1.0\n");
        return CLI_OK;
    }
    for (size_t i = 0; i < AP_ARRAY_LEN(commands); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "autopart: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
