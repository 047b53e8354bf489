/*
 * common.c - what the subcommands share: the one voice of their errors and
 * exit statuses, loading a module from a file or stdin, schedules given as
 * text or @FILE, devices by name, and opening a module for partitioning.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "apply.h"
#include "cli.h"

/* ================================================================ errors */

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    fprintf(stderr, "autopart %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_usage_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

int cli_fail_err(const char *cmd, const char *what, const ap_error *err)
{
    const char *msg = err->msg[0] ? err->msg : ap_strerror(err->code);
    if (err->line > 0) {
        char line[800];
        ap_error_format(err, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    } else if (what) {
        cli_fail(cmd, "%s: %s", what, msg);
    } else {
        cli_fail(cmd, "%s", msg);
    }
    return CLI_FAIL;
}

int cli_bad_option(const char *cmd, int ch, char **argv)
{
    const char *arg = argv[optind - 1];
    if (ch == ':')
        return cli_usage_fail(cmd, "option '%s' needs a value", arg);
    if (arg && arg[0] == '-' && arg[1] != '-' && optopt)
        return cli_usage_fail(cmd, "unknown option '-%c' (see 'autopart %s --help')", optopt, cmd);
    return cli_usage_fail(cmd, "unknown option '%s' (see 'autopart %s --help')", arg, cmd);
}

int cli_usage_hint(const char *cmd, const char *synopsis)
{
    fprintf(stderr, "usage: %s\nRun 'autopart %s --help' for the options.\n", synopsis, cmd);
    return CLI_USAGE;
}

/* ================================================================ inputs */

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

/* Whether text holds nothing but blanks and comments of either format. */
static bool only_blanks(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (c == '/' && i + 1 < len && text[i + 1] == '/') { /* a comment to the end of the line */
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        return false;
    }
    return true;
}

ir_module *cli_load_module(const char *cmd, const char *path, ir_format fmt)
{
    ap_error err;
    char *text = NULL;
    size_t len = 0;
    ir_module *m = NULL;
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    ap_error_clear(&err);
    if (ap_read_file(path, &text, &len, &err) < 0) {
        cli_fail(cmd, "%s", err.msg);
        return NULL;
    }
    if (only_blanks(text, len)) {
        fprintf(stderr, "%s: error: the file is empty: it holds no module and no function\n", name);
        ap_free(text);
        return NULL;
    }
    if (ir_parse(text, len, name, fmt, &m, &err) < 0) {
        cli_fail_err(cmd, name, &err);
        ir_format seen = ir_detect_format(text, len);
        if (fmt != IR_FMT_AUTO && seen != fmt)
            fprintf(stderr, "%s: note: the file looks like %s: try --format %s (or leave --format out)\n", name,
                    seen == IR_FMT_HLO ? "XLA HLO text" : "StableHLO (MLIR text)",
                    seen == IR_FMT_HLO ? "hlo" : "stablehlo");
    }
    ap_free(text);
    return m;
}

/* ============================================================= schedules */

/* Whether a schedule holds an action: anything but blanks, ';' separators
 * and '#' comments. */
static bool has_action(const char *s)
{
    for (; *s; s++) {
        if (*s == '#') {
            while (*s && *s != '\n')
                s++;
            if (!*s)
                break;
        } else if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != ';') {
            return true;
        }
    }
    return false;
}

int cli_schedule_read(const char *cmd, const char *opt, const char *arg, cli_schedule *out)
{
    memset(out, 0, sizeof *out);
    if (arg[0] != '@') {
        if (!has_action(arg))
            return cli_usage_fail(cmd, "%s is empty: give actions (tile, atomic, propagate, manual) or @FILE", opt);
        out->text = ap_strdup(arg);
        out->name = "schedule";
        if (!out->text)
            return cli_fail(cmd, "out of memory");
        return 0;
    }
    size_t len;
    ap_error err;
    if (ap_read_file(arg + 1, &out->text, &len, &err) < 0)
        return cli_fail(cmd, "%s %s: %s", opt, arg, err.msg);
    out->name = arg + 1;
    if (!has_action(out->text)) {
        cli_schedule_free(out);
        return cli_fail(cmd, "%s %s: the file holds no action", opt, arg);
    }
    return 0;
}

void cli_schedule_free(cli_schedule *s)
{
    ap_free(s->text);
    memset(s, 0, sizeof *s);
}

int cli_schedule_apply(const char *cmd, const cli_schedule *s, ir_partition *p, ir_tactic_fn fn, void *ctx)
{
    ap_error err;
    ap_error_clear(&err);
    int rc = fn ? ir_schedule_apply_cb(p, s->text, fn, ctx, &err) : ir_schedule_apply(p, s->text, &err);
    if (rc == 0)
        return 0;
    /* the library names its input "schedule"; the user knows it by its file */
    if (!strcmp(err.file, "schedule"))
        snprintf(err.file, sizeof err.file, "%s", s->name);
    return cli_fail_err(cmd, NULL, &err);
}

/* =============================================================== devices */

int cli_device(const char *cmd, const char *arg, cost_device *out)
{
    ap_error err;
    size_t n = strlen(arg);
    bool file = n > 5 && !strcmp(arg + n - 5, ".json");
    if ((file ? cost_device_load(arg, out, &err) : cost_device_lookup(arg, out, &err)) == 0)
        return 0;
    return file ? cli_fail(cmd, "--device %s: %s", arg, err.msg) : cli_usage_fail(cmd, "--device: %s", err.msg);
}

void cli_print_device_names(FILE *f, const char *indent)
{
    ap_buf b;
    ap_buf_init(&b);
    cost_device_names(&b);
    /* wrapped at about 80 columns after the indent */
    const char *s = b.data ? b.data : "";
    size_t col = 0, width = 78 - strlen(indent);
    fputs(indent, f);
    while (*s) {
        const char *end = strstr(s, ", ");
        size_t len = end ? (size_t)(end - s) + 1 : strlen(s);
        if (col && col + len + 1 > width) {
            fprintf(f, "\n%s", indent);
            col = 0;
        } else if (col) {
            fputc(' ', f);
            col++;
        }
        fwrite(s, 1, len, f);
        col += len;
        s += len;
        if (*s == ' ')
            s++;
    }
    fputc('\n', f);
    ap_buf_free(&b);
}

/* ========================================================= partitioning */

int cli_partition_open(const cli_partition_args *a, cli_partitioned *st)
{
    ap_error err;
    ir_mesh mesh;
    memset(st, 0, sizeof *st);
    ap_error_clear(&err);
    if (a->mesh_text && ir_mesh_parse(a->mesh_text, &mesh, &err) < 0)
        return cli_usage_fail(a->cmd, "--mesh: %s", err.msg);
    st->m = cli_load_module(a->cmd, a->path, a->fmt);
    if (!st->m)
        return CLI_FAIL;
    ir_op *f = a->func_name ? ir_module_func(st->m, a->func_name) : ir_module_entry(st->m);
    if (!f) {
        cli_fail(a->cmd, "%s: no function %s%s to partition", a->path, a->func_name ? "@" : "",
                 a->func_name ? a->func_name : "@main (and no single public function)");
        goto fail;
    }
    if (!a->mesh_text && !apply_module_mesh(st->m, &mesh)) {
        cli_partitioned_free(st);
        return cli_usage_fail(a->cmd, "--mesh is required (the module declares no sdy.mesh)");
    }
    /* %N counts the values of the function as partitioned: with its calls
     * inlined that is not the function `autopart parse` prints, and a
     * schedule written against that printout names other values (tiling
     * them silently when the ranks allow) */
    char *note = apply_inline_note(ir_func_name(f), ir_inline_count(st->m, f), a->schedule, a->func_name != NULL);
    if (note)
        fprintf(stderr, "%s: note: %s\n", a->path, note);
    ap_free(note);
    if (ir_inline_calls(st->m, f, &err) < 0 || ir_pctx_new(st->m, f, &mesh, &st->ctx, &err) < 0 ||
        ir_partition_new(st->ctx, &st->p, &err) < 0) {
        cli_fail_err(a->cmd, a->path, &err);
        goto fail;
    }
    if (a->import) {
        /* errors at the annotation they come from, in the module's text */
        if (ir_schedule_import_apply(st->p, st->m, f, &err) < 0) {
            cli_fail_err(a->cmd, "--import", &err);
            goto fail;
        }
        /* constraints it cannot read: said, not dropped silently */
        const ir_op *first;
        uint32_t skipped = ir_schedule_import_skipped(st->ctx, &first);
        if (skipped) {
            if (first->src_line)
                fprintf(stderr, "%s:%u:%u: ", a->path, first->src_line, first->src_col);
            else
                fprintf(stderr, "%s: ", a->path);
            fprintf(stderr, "note: --import does not read this sharding constraint");
            if (skipped > 1)
                fprintf(stderr, " (nor %u more)", skipped - 1);
            fprintf(stderr, ": it is in a region partitioned whole (the body of a reduce, scatter or sort, a loop "
                            "or case the partitioning does not open, sdy.manual_computation), whose values no action can tile\n");
        }
    }
    return 0;

fail:
    cli_partitioned_free(st);
    return CLI_FAIL;
}

void cli_partitioned_free(cli_partitioned *st)
{
    ir_partition_free(st->p);
    ir_pctx_free(st->ctx);
    ir_module_free(st->m);
    memset(st, 0, sizeof *st);
}
