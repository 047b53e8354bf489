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

char *cli_read_schedule(const char *cmd, const char *arg)
{
    if (arg[0] != '@')
        return ap_strdup(arg);
    char *text;
    size_t len;
    ap_error err;
    if (ap_read_file(arg + 1, &text, &len, &err) < 0) {
        fprintf(stderr, "autopart %s: %s\n", cmd, err.msg);
        return NULL;
    }
    return text;
}

/* The mesh of an sdy.mesh op: `sdy.mesh @mesh = <["x"=2, "y"=4]>`. */
static bool mesh_from_module(const ir_module *m, ir_mesh *mesh)
{
    for (const ir_op *op = ir_module_body(m)->first; op; op = op->next) {
        if (strcmp(op->name, "sdy.mesh") || !op->tmpl)
            continue;
        ap_buf b;
        ap_buf_init(&b);
        for (uint32_t i = 0; i < op->tmpl->n; i++)
            if (op->tmpl->pieces[i].kind == IR_TP_TEXT)
                ap_buf_put(&b, op->tmpl->pieces[i].text, op->tmpl->pieces[i].len);
        const char *s = b.data ? strchr(b.data, '[') : NULL;
        char text[512] = "";
        size_t n = 0;
        for (; s && *s && *s != ']' && n + 2 < sizeof text; s++)
            if (*s != '"' && *s != '[' && *s != ' ')
                text[n++] = *s;
        text[n] = '\0';
        ap_buf_free(&b);
        ap_error err;
        if (n && ir_mesh_parse(text, mesh, &err) == 0)
            return true;
    }
    return false;
}

int cli_partition_open(const cli_partition_args *a, cli_partitioned *st)
{
    ap_error err;
    ir_mesh mesh;
    memset(st, 0, sizeof *st);
    ap_error_clear(&err);
    if (a->mesh_text && ir_mesh_parse(a->mesh_text, &mesh, &err) < 0) {
        fprintf(stderr, "autopart %s: %s\n", a->cmd, err.msg);
        return 2;
    }
    st->m = cli_load_module(a->path, a->fmt);
    if (!st->m)
        return 1;
    ir_op *f = a->func_name ? ir_module_func(st->m, a->func_name) : ir_module_entry(st->m);
    if (!f) {
        fprintf(stderr, "autopart %s: %s: no function %s%s to partition\n", a->cmd, a->path, a->func_name ? "@" : "",
                a->func_name ? a->func_name : "@main (and no single public function)");
        goto fail;
    }
    if (!a->mesh_text && !mesh_from_module(st->m, &mesh)) {
        fprintf(stderr, "autopart %s: --mesh is required (the module declares no sdy.mesh)\n", a->cmd);
        cli_partitioned_free(st);
        return 2;
    }
    if (ir_inline_calls(st->m, f, &err) < 0 || ir_pctx_new(st->m, f, &mesh, &st->ctx, &err) < 0 ||
        ir_partition_new(st->ctx, &st->p, &err) < 0) {
        fprintf(stderr, "autopart %s: %s: %s\n", a->cmd, a->path, err.msg);
        goto fail;
    }
    if (a->import) {
        ap_buf ib;
        ap_buf_init(&ib);
        int rc = ir_schedule_import(st->m, f, &mesh, &ib, &err);
        if (rc >= 0 && ib.data)
            rc = ir_schedule_apply(st->p, ib.data, &err);
        ap_buf_free(&ib);
        if (rc < 0) {
            cli_print_error(&err);
            goto fail;
        }
    }
    return 0;

fail:
    cli_partitioned_free(st);
    return 1;
}

void cli_partitioned_free(cli_partitioned *st)
{
    ir_partition_free(st->p);
    ir_pctx_free(st->ctx);
    ir_module_free(st->m);
    memset(st, 0, sizeof *st);
}
