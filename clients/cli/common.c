/*
 * common.c - helpers the subcommands share: loading a module from a file
 * or stdin with clear errors, and option values.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cli_print_error(const ap_error *err)
{
    char line[800];
    ap_error_format(err, line, sizeof line);
    fprintf(stderr, "%s\n", line);
}

bool cli_parse_format(const char *s, ir_format *out)
{
    if (!strcmp(s, "stablehlo") || !strcmp(s, "mlir"))
        *out = IR_FMT_STABLEHLO;
    else if (!strcmp(s, "hlo"))
        *out = IR_FMT_HLO;
    else if (!strcmp(s, "auto"))
        *out = IR_FMT_AUTO;
    else
        return false;
    return true;
}

ir_module *cli_load_module(const char *path, ir_format fmt)
{
    ap_error err;
    char *text = NULL;
    size_t len = 0;
    ir_module *m = NULL;
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    ap_error_clear(&err);
    if (ap_read_file(path, &text, &len, &err) < 0) {
        cli_print_error(&err);
        return NULL;
    }
    if (ir_parse(text, len, name, fmt, &m, &err) < 0)
        cli_print_error(&err);
    ap_free(text);
    return m;
}
