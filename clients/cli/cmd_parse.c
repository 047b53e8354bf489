/*
 * cmd_parse.c - `autopart parse FILE [--format stablehlo|hlo] [--stats]
 * [--json] [--generic] [--no-locs] [--inline [--func NAME]]`: prints the
 * canonical StableHLO of a module, or a summary of it (ops by name,
 * arguments with shapes and location names, total parameter bytes), as text
 * or JSON; with --inline, the entry function's calls inlined first, as
 * apply, check and search partition it (the numbering schedules' %N use).
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define PARSE_SYNOPSIS                                                                                           \
    "autopart parse FILE [--format F] [--stats] [--json] [--generic] [--no-locs] [--inline [--func NAME]]"

static void parse_usage(FILE *f)
{
    fprintf(f,
            "usage: " PARSE_SYNOPSIS "\n"
            "\n"
            "Parses a StableHLO (MLIR text) or XLA HLO text module; FILE '-' reads stdin.\n"
            "Without options prints the module back as canonical StableHLO.\n"
            "\n"
            "options:\n"
            "  --format F   stablehlo | hlo | auto (default: detected from the content)\n"
            "  --stats      summarize: ops by name, arguments, parameter bytes\n"
            "  --json       print the summary as JSON (implies --stats)\n"
            "  --generic    print every op in MLIR's generic form\n"
            "  --no-locs    leave locations out of the printed module\n"
            "  --inline     inline the calls of the entry function (@main, or the single\n"
            "               public one) first, as apply, check and search do: a\n"
            "               schedule's %%N counts the values of the function so printed\n"
            "  --func NAME  with --inline: this function's calls\n"
            "  -h, --help   this help\n");
}

static bool has_function(const ir_module *m)
{
    for (const ir_op *op = ir_module_body(m)->first; op; op = op->next)
        if (op->opcode == IR_OP_FUNC)
            return true;
    return false;
}

static const char *arg_sharding(const ir_op *f, uint32_t i, char *buf, size_t n)
{
    ir_attr *a = ir_func_arg_attr(f, i, "mhlo.sharding");
    if (!a)
        a = ir_func_arg_attr(f, i, "sdy.sharding");
    if (!a)
        return NULL;
    if (a->kind == IR_A_STRING) {
        snprintf(buf, n, "%s", a->u.str.s);
        return buf;
    }
    ap_buf b;
    ap_buf_init(&b);
    ir_attr_print(&b, a);
    snprintf(buf, n, "%s", b.data ? b.data : "");
    ap_buf_free(&b);
    return buf;
}

static char *type_text(const ir_type *t)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_type_print(&b, t);
    return ap_buf_take(&b, NULL);
}

static int summarize(const ir_module *m, const char *path, bool json)
{
    ir_stats st;
    if (ir_stats_compute(m, &st) < 0)
        return cli_fail("parse", "out of memory");
    const ir_op *entry = ir_module_entry(m);
    uint32_t n_funcs = 0;
    for (const ir_op *op = ir_module_body(m)->first; op; op = op->next)
        n_funcs += op->opcode == IR_OP_FUNC;
    ir_attr *mname = ir_op_attr(m->top, "sym_name");
    int64_t param_bytes = 0;
    bool bytes_exact = true;
    uint32_t n_args = entry ? ir_func_num_args(entry) : 0;
    const ir_type *ft = entry ? ir_func_type(entry) : NULL;
    for (uint32_t i = 0; i < n_args; i++) {
        int64_t b = ir_type_bytes(ft->elems[i]);
        if (b < 0)
            bytes_exact = false;
        else
            param_bytes += b;
    }
    int rc = 0;
    if (json) {
        json_t *root = json_object(), *ops = json_object(), *args = json_array();
        json_object_set_new(root, "file", json_string(path));
        json_object_set_new(root, "module", mname ? json_string(mname->u.str.s) : json_null());
        json_object_set_new(root, "functions", json_integer(n_funcs));
        json_object_set_new(root, "entry", entry ? json_string(ir_func_name(entry)) : json_null());
        json_object_set_new(root, "op_count", json_integer((json_int_t)st.n_ops));
        for (uint32_t i = 0; i < st.n_kinds; i++)
            json_object_set_new(ops, st.by_name[i].name, json_integer((json_int_t)st.by_name[i].count));
        json_object_set_new(root, "ops", ops);
        for (uint32_t i = 0; i < n_args; i++) {
            json_t *a = json_object();
            char *t = type_text(ft->elems[i]);
            char sh[512];
            const char *name = ir_func_arg_name(entry, i);
            json_object_set_new(a, "index", json_integer(i));
            json_object_set_new(a, "name", name ? json_string(name) : json_null());
            json_object_set_new(a, "type", json_string(t ? t : "?"));
            int64_t b = ir_type_bytes(ft->elems[i]);
            json_object_set_new(a, "bytes", b >= 0 ? json_integer(b) : json_null());
            const char *s = arg_sharding(entry, i, sh, sizeof sh);
            if (s)
                json_object_set_new(a, "sharding", json_string(s));
            json_array_append_new(args, a);
            ap_free(t);
        }
        json_object_set_new(root, "arguments", args);
        json_object_set_new(root, "results", json_integer(entry ? ir_func_num_results(entry) : 0));
        json_object_set_new(root, "parameter_bytes", json_integer(param_bytes));
        json_object_set_new(root, "parameter_bytes_exact", json_boolean(bytes_exact));
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (text) {
            puts(text);
            ap_free(text);
        } else {
            rc = 1;
        }
        json_decref(root);
    } else {
        printf("file:       %s\n", path);
        printf("module:     %s\n", mname ? mname->u.str.s : "(unnamed)");
        printf("functions:  %u%s%s\n", n_funcs, entry ? ", entry @" : "", entry ? ir_func_name(entry) : "");
        printf("ops:        %" PRIu64 " in %u kinds\n", st.n_ops, st.n_kinds);
        for (uint32_t i = 0; i < st.n_kinds; i++)
            printf("  %8" PRIu64 "  %s\n", st.by_name[i].count, st.by_name[i].name);
        if (entry) {
            printf("arguments:  %u\n", n_args);
            for (uint32_t i = 0; i < n_args; i++) {
                char *t = type_text(ft->elems[i]);
                char sh[512];
                const char *name = ir_func_arg_name(entry, i);
                const char *s = arg_sharding(entry, i, sh, sizeof sh);
                printf("  %%arg%-4u %-36s %s%s%s\n", i, t ? t : "?", name ? name : "", s ? "  sharding " : "",
                       s ? s : "");
                ap_free(t);
            }
            printf("results:    %u\n", ir_func_num_results(entry));
        }
        printf("parameter bytes: %" PRId64 "%s (%.2f MiB)\n", param_bytes, bytes_exact ? "" : " (dynamic shapes excluded)",
               (double)param_bytes / (1024.0 * 1024.0));
    }
    ir_stats_free(&st);
    return rc;
}

int cli_parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'}, {"stats", no_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},         {"generic", no_argument, NULL, 'g'},
        {"no-locs", no_argument, NULL, 'n'},      {"help", no_argument, NULL, 'h'},
        {"inline", no_argument, NULL, 'i'},       {"func", required_argument, NULL, 'F'},
        {NULL, 0, NULL, 0}};
    bool inline_calls = false;
    const char *func_name = NULL;
    ir_format fmt = IR_FMT_AUTO;
    bool stats = false, json = false;
    ir_print_opts popts = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_parse_format(optarg, &fmt))
                return cli_usage_fail("parse", "unknown format '%s' (stablehlo, hlo or auto)", optarg);
            break;
        case 's': stats = true; break;
        case 'j': json = stats = true; break;
        case 'g': popts.generic = true; break;
        case 'n': popts.no_locs = true; break;
        case 'i': inline_calls = true; break;
        case 'F': func_name = optarg; break;
        case 'h': parse_usage(stdout); return CLI_OK;
        default: return cli_bad_option("parse", c, argv);
        }
    }
    if (optind != argc - 1) {
        cli_usage_fail("parse", optind < argc ? "expected one FILE, not %d" : "expected a FILE (or '-' for stdin)",
                       argc - optind);
        return cli_usage_hint("parse", PARSE_SYNOPSIS);
    }
    if (func_name && !inline_calls)
        return cli_usage_fail("parse", "--func names the function --inline inlines into: give --inline");
    const char *path = argv[optind];
    ir_module *m = cli_load_module("parse", path, fmt);
    if (!m)
        return CLI_FAIL;
    if (inline_calls) {
        ir_op *f = func_name ? ir_module_func(m, func_name) : ir_module_entry(m);
        ap_error err;
        if (!f) {
            cli_fail("parse", "%s: no function %s%s to inline into", path, func_name ? "@" : "",
                     func_name ? func_name : "@main (and no single public function)");
            ir_module_free(m);
            return CLI_FAIL;
        }
        if (ir_inline_calls(m, f, &err) < 0) {
            cli_fail_err("parse", path, &err);
            ir_module_free(m);
            return CLI_FAIL;
        }
    }
    if (!has_function(m))
        fprintf(stderr, "%s: warning: the module has no function\n", strcmp(path, "-") ? path : "<stdin>");
    int rc = 0;
    if (stats) {
        rc = summarize(m, strcmp(path, "-") ? path : "<stdin>", json);
    } else {
        ap_buf b;
        ap_buf_init(&b);
        if (ir_print(m, &b, &popts) < 0)
            rc = cli_fail("parse", "out of memory while printing");
        else if (fwrite(b.data, 1, b.len, stdout) != b.len)
            rc = cli_fail("parse", "cannot write the output");
        ap_buf_free(&b);
    }
    ir_module_free(m);
    if (fflush(stdout) != 0)
        rc = 1;
    return rc;
}
