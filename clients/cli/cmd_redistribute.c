/*
 * cmd_redistribute.c - `autopart redistribute`: synthesizes the collectives
 * that turn an array of one distributed type into another (ir/partir/redist.c) and
 * prints them as text or, with --json, as one JSON object:
 *
 *   autopart redistribute --mesh x=4,y=6 --from '[3{x}12, 2{y}12]' \
 *       --to '[2{y}12, 3{x}12]' [--elem-bytes 4] [--json]
 *
 * Errors and exit statuses as every subcommand (cli.h): a malformed --mesh
 * or --elem-bytes is bad usage (2); a type that does not parse or does not
 * fit the mesh is bad input (1), reported as `--from:1:COL: error: ...`.
 */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "redistribute"
#define SYNOPSIS "autopart redistribute --mesh AXES --from TYPE --to TYPE [--elem-bytes N] [--json]"

static const char usage_text[] =
    "usage: " SYNOPSIS "\n"
    "\n"
    "Synthesizes the collectives (all_gather, all_to_all, dynslice and at most one\n"
    "collective_permute) that redistribute an array from one distributed type to\n"
    "another, never holding more per device than the larger of the two tiles.\n"
    "\n"
    "  --mesh AXES       mesh axes and sizes, e.g. x=4,y=6\n"
    "  --from TYPE       the array's distributed type, e.g. '[3{x}12, 2{y}12]'\n"
    "  --to TYPE         the type wanted, e.g. '[2{y}12, 3{x}12]'\n"
    "  --elem-bytes N    bytes per element (default 4)\n"
    "  --json            print one JSON object instead of text\n"
    "  -h, --help        print this help\n"
    "\n"
    "A dim is SIZE (replicated) or LOCAL{AXES}GLOBAL with the axes listed major to\n"
    "minor. Steps are printed over the prime factors of the mesh axes (x:4 becomes\n"
    "x1:2, x2:2 with x1 major); devices are numbered row-major over the mesh.\n"
    "\n"
    "Exit status: 0 success, 1 a type that is wrong, 2 bad usage.\n";

/* A type option that does not parse: positioned in the option's text. */
static int fail_type(const char *opt, const ap_error *err)
{
    if (err->col > 0) {
        fprintf(stderr, "%s:1:%d: error: %s\n", opt, err->col, err->msg);
        return CLI_FAIL;
    }
    return cli_fail_err(CMD, opt, err);
}

static char *type_string(const ir_mesh *mesh, const ir_redist_type *type)
{
    ap_buf buf;
    ap_buf_init(&buf);
    ir_redist_format_type(mesh, type, &buf);
    return ap_buf_take(&buf, NULL);
}

/* ------------------------------------------------------------------ text */

static int print_text(const ir_mesh *mesh, const ir_redist_plan *plan)
{
    ap_buf out;
    ap_buf_init(&out);
    ap_buf_puts(&out, "mesh ");
    ir_redist_mesh_format(mesh, &out);
    ap_buf_puts(&out, ", prime factors ");
    ir_redist_mesh_format(&plan->factors, &out);
    ap_buf_puts(&out, "\nfrom ");
    ir_redist_format_type(&plan->factors, &plan->from, &out);
    ap_buf_printf(&out, "  (%lld bytes per device)\n", (long long)plan->from_local_bytes);
    for (int s = 0; s < plan->nsteps; s++) {
        ap_buf_printf(&out, "  %d. ", s + 1);
        ir_redist_step_format(plan, &plan->steps[s], &out);
        ap_buf_putc(&out, '\n');
    }
    if (plan->nsteps == 0)
        ap_buf_puts(&out, "  (nothing to do: every device already holds its tile)\n");
    ap_buf_puts(&out, "to   ");
    ir_redist_format_type(&plan->factors, &plan->to, &out);
    ap_buf_printf(&out, "  (%lld bytes per device)\n", (long long)plan->to_local_bytes);
    ap_buf_printf(&out, "cost %lld bytes per device, peak local %lld bytes\n",
                  (long long)plan->cost_bytes, (long long)plan->peak_local_bytes);
    ap_buf_printf(&out,
                  "baseline (all-gather then dynslice): cost %lld bytes per device, peak local "
                  "%lld bytes\n",
                  (long long)plan->baseline.cost_bytes, (long long)plan->baseline.peak_local_bytes);
    if (out.oom) {
        ap_buf_free(&out);
        return cli_fail(CMD, "out of memory");
    }
    fputs(out.data, stdout);
    ap_buf_free(&out);
    return 0;
}

/* ------------------------------------------------------------------ json */

/* jansson returns -1 from setters given NULL (allocation failure), so the
 * helpers below fold every result into *ok and the caller checks once. */
static void put(json_t *obj, const char *key, json_t *value, bool *ok)
{
    if (!value || json_object_set_new(obj, key, value) != 0)
        *ok = false;
}

static void append(json_t *array, json_t *value, bool *ok)
{
    if (!value || json_array_append_new(array, value) != 0)
        *ok = false;
}

static json_t *type_json(const ir_mesh *mesh, const ir_redist_type *type, bool *ok)
{
    char *text = type_string(mesh, type);
    json_t *value = text ? json_string(text) : NULL;
    ap_free(text);
    if (!value)
        *ok = false;
    return value;
}

/* Rows of `width` device ids. */
static json_t *rows_json(const int32_t *ids, int64_t rows, int64_t width, bool *ok)
{
    json_t *array = json_array();
    for (int64_t r = 0; r < rows && array; r++) {
        json_t *row = json_array();
        for (int64_t c = 0; c < width && row; c++)
            append(row, json_integer(ids[r * width + c]), ok);
        append(array, row, ok);
    }
    if (!array)
        *ok = false;
    return array;
}

static json_t *step_json(const ir_redist_plan *plan, const ir_redist_step *step, bool *ok)
{
    json_t *obj = json_object(), *dims = json_array(), *axes = json_array();
    put(obj, "kind", json_string(ir_redist_kind_name(step->kind)), ok);
    if (step->dim >= 0 && dims)
        append(dims, json_integer(step->dim), ok);
    if (step->to_dim >= 0 && dims)
        append(dims, json_integer(step->to_dim), ok);
    for (int k = 0; k < step->naxes && axes; k++)
        append(axes, json_string(plan->factors.names[step->axes[k]]), ok);
    put(obj, "dims", dims, ok);
    put(obj, "axes", axes, ok);
    put(obj, "type", type_json(&plan->factors, &step->type, ok), ok);
    put(obj, "bytes", json_integer(step->bytes), ok);
    put(obj, "local_bytes", json_integer(step->local_bytes), ok);
    if (step->kind == IR_REDIST_COLLECTIVE_PERMUTE)
        put(obj, "source_target_pairs", rows_json(step->pairs, step->npairs, 2, ok), ok);
    else
        put(obj, "replica_groups", rows_json(step->groups, step->ngroups, step->group_size, ok),
            ok);
    if (!obj)
        *ok = false;
    return obj;
}

static int print_json(const ir_mesh *mesh, const ir_redist_plan *plan)
{
    bool ok = true;
    json_t *root = json_object(), *axes = json_object(), *factors = json_array();
    json_t *steps = json_array(), *baseline = json_object();
    for (int a = 0; a < mesh->n_axes && axes; a++)
        put(axes, mesh->names[a], json_integer(mesh->sizes[a]), &ok);
    for (int f = 0; f < plan->factors.n_axes && factors; f++) {
        json_t *factor = json_object();
        if (factor) {
            put(factor, "name", json_string(plan->factors.names[f]), &ok);
            put(factor, "size", json_integer(plan->factors.sizes[f]), &ok);
            put(factor, "axis", json_string(mesh->names[plan->factor_axis[f]]), &ok);
        }
        append(factors, factor, &ok);
    }
    for (int s = 0; s < plan->nsteps && steps; s++)
        append(steps, step_json(plan, &plan->steps[s], &ok), &ok);
    if (baseline) {
        put(baseline, "cost_bytes", json_integer(plan->baseline.cost_bytes), &ok);
        put(baseline, "peak_local_bytes", json_integer(plan->baseline.peak_local_bytes), &ok);
    }
    if (root) {
        put(root, "mesh", axes, &ok);
        put(root, "factors", factors, &ok);
        put(root, "elem_bytes", json_integer(plan->elem_bytes), &ok);
        put(root, "from", type_json(&plan->factors, &plan->from, &ok), &ok);
        put(root, "to", type_json(&plan->factors, &plan->to, &ok), &ok);
        put(root, "steps", steps, &ok);
        put(root, "cost_bytes", json_integer(plan->cost_bytes), &ok);
        put(root, "peak_local_bytes", json_integer(plan->peak_local_bytes), &ok);
        put(root, "baseline", baseline, &ok);
    } else {
        json_decref(axes);
        json_decref(factors);
        json_decref(steps);
        json_decref(baseline);
        ok = false;
    }
    int rc = 0;
    if (!ok || json_dumpf(root, stdout, JSON_PRESERVE_ORDER) != 0)
        rc = cli_fail(CMD, "out of memory writing JSON");
    else
        fputc('\n', stdout);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------- command */

int cli_redistribute(int argc, char **argv)
{
    static const struct option options[] = {
        {"mesh", required_argument, NULL, 'm'},
        {"from", required_argument, NULL, 'f'},
        {"to", required_argument, NULL, 't'},
        {"elem-bytes", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *mesh_text = NULL, *from_text = NULL, *to_text = NULL;
    int elem_bytes = 4, opt;
    bool json = false;

    /* getopt keeps its position in globals; 0 makes glibc and musl start
     * over, in case the dispatcher or a test parsed options before. */
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (opt) {
        case 'm':
            mesh_text = optarg;
            break;
        case 'f':
            from_text = optarg;
            break;
        case 't':
            to_text = optarg;
            break;
        case 'e': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < 1 || v > INT_MAX)
                return cli_usage_fail(CMD, "--elem-bytes wants a positive integer, not '%s'", optarg);
            elem_bytes = (int)v;
            break;
        }
        case 'j':
            json = true;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return CLI_OK;
        default:
            return cli_bad_option(CMD, opt, argv);
        }
    }
    if (optind < argc) {
        cli_usage_fail(CMD, "unexpected argument '%s'", argv[optind]);
        return cli_usage_hint(CMD, SYNOPSIS);
    }
    if (!mesh_text || !from_text || !to_text) {
        cli_usage_fail(CMD, "--mesh, --from and --to are required");
        return cli_usage_hint(CMD, SYNOPSIS);
    }

    ir_mesh mesh;
    ir_redist_type from, to;
    ir_redist_plan *plan = NULL;
    ap_error err;
    ap_error_clear(&err);
    if (ir_mesh_parse(mesh_text, &mesh, &err))
        return cli_usage_fail(CMD, "--mesh: %s", err.msg[0] ? err.msg : ap_strerror(err.code));
    if (ir_redist_parse_type(&mesh, from_text, &from, &err))
        return fail_type("--from", &err);
    if (ir_redist_parse_type(&mesh, to_text, &to, &err))
        return fail_type("--to", &err);
    if (ir_redist_plan_make(&mesh, &from, &to, elem_bytes, &plan, &err))
        return cli_fail_err(CMD, NULL, &err);
    int rc = json ? print_json(&mesh, plan) : print_text(&mesh, plan);
    ir_redist_plan_free(plan);
    if (rc == 0 && fflush(stdout) != 0)
        rc = cli_fail(CMD, "cannot write the output");
    return rc;
}
