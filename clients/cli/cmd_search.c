/*
 * cmd_search.c - `autopart search FILE --mesh batch=8,model=4 --axes model
 * [--manual TEXT|@FILE] [--device D] [--memory-limit B|none] [--memory-margin X]
 * [--episodes N]
 * [--time-limit S] [--threads T] [--seed S] [--json]`: the automatic
 * partitioning search (search/search.h) in this process, no daemon.  One
 * updating progress line on stderr when it is a terminal; at the end the
 * schedule, the shardings, the cost report and why this answer.
 */
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cost.h"
#include "remote.h"
#include "search.h"

#define SEARCH_SYNOPSIS "autopart search FILE (--mesh AXES [--axes A[,B]] | --devices N) [options]"

static void search_usage(FILE *f)
{
    fprintf(f,
            "usage: " SEARCH_SYNOPSIS "\n"
            "\n"
            "Searches for the PartIR actions that make the entry function of FILE fastest\n"
            "on a device mesh (Monte Carlo tree search, each candidate scored by the cost\n"
            "model), starting after the manual tactics.\n"
            "\n"
            "  --mesh AXES        e.g. batch=8,model=4 (default: the module's sdy.mesh)\n"
            "  --devices N        instead of --mesh: the search also chooses the mesh, every\n"
            "                     way to arrange N devices in 1 to 4 axes the program can\n"
            "                     use, and names each axis by its role (data, fsdp, model,\n"
            "                     expert); the explanation lists the best of each mesh\n"
            "  --axes-names A,B   with --devices: exactly these axes, in this order (sizes\n"
            "                     chosen, 1 allowed); --manual and --axes may then name them\n"
            "                     (the explanation notes manual tactics along an axis of 1)\n"
            "  --axes A[,B]       mesh axes the search may use (default: all)\n"
            "  --manual S         manual tactics first: schedule text, or @FILE\n"
            CLI_HELP_IMPORT
            "  --device D         device to estimate on (default h100), a JSON file, or:\n");
    cli_print_device_names(f, "                       ");
    fprintf(f,
            "  --memory-limit B   per-device memory limit: bytes (240GiB, 16e9, 80GB) or\n"
            "                     none (default: the device's HBM)\n"
            "  --memory-margin X  keep this share of the limit free, 0..0.99 (default 0: the\n"
            "                     cost model's peak may reach the limit)\n"
            "  --episodes N       budget: candidates evaluated (default 1000 with no budget;\n"
            "                     with --devices, in all, or 1000 per mesh)\n"
            "  --time-limit S     budget: seconds to the answer (the search stops early enough\n"
            "                     to re-score and lower what it prints)\n"
            "  --patience N       budget: stop after N episodes without improvement\n"
            "  --threads T        workers sharing one tree (default 1; with --devices, meshes\n"
            "                     searched side by side); under an episode budget the result\n"
            "                     does not depend on T\n"
            "  --seed S           (default 1)\n"
            "  --batch N          leaves chosen per round (default 16; part of the result)\n"
            "  --hints S          decision groups, text or @FILE: lines `group GLOB...`,\n"
            "                     `split GLOB...` (no layer grouping), `fix GLOB...` (not searched)\n"
            "  --overlap X        assume at least this share of communication hidden under\n"
            "                     compute, 0..1 (default 0: what the schedule hides)\n"
            "  --framework F      what runs the step, for its peak memory: xla (default:\n"
            "                     fused, as XLA's buffer assignment counts it) or\n"
            "                     pytorch-eager (every op's output a tensor, ops as written;\n"
            "                     the allocator's allocated peak)\n"
            "  --json             the result as JSON\n"
            "  --verbose          every value: the schedule one action per line, the shardings\n"
            "                     one argument per row (by default a run of one action folds\n"
            "                     into a glob over its values, arguments alike into one row)\n"
            "  --format F         stablehlo | hlo (default: detected)\n"
            "  --func NAME        the function to partition (default: main)\n"
            "  -h, --help         this help\n"
            "\n"
            "With --server, autopartd runs the search (and keeps the answer: asking again is\n"
            "answered from its store, a search already running is joined).\n");
    cli_remote_help(f);
    fprintf(f, "\nExit status: 0 success, 1 bad input or a failure, 2 bad usage.\n");
}

/* 240GiB, 16e9, 80GB, 1.5TiB, 123 -> bytes; false on anything else. */
static bool parse_bytes(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || isinf(v))
        return false;
    while (*end == ' ')
        end++;
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1},       {"B", 1},        {"KB", 1e3},      {"MB", 1e6},       {"GB", 1e9},
                 {"TB", 1e12},  {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].unit)) {
            *out = v * units[i].scale;
            return *out >= 1;
        }
    return false;
}

static bool parse_count(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < 0)
        return false;
    *out = v;
    return true;
}

/* ------------------------------------------------------------ progress */

typedef struct prog_ctx {
    bool tty;
    int width;
} prog_ctx;

static int on_progress(void *vctx, const search_progress *p)
{
    prog_ctx *ctx = vctx;
    if (!ctx->tty)
        return 0;
    char peak[32], line[256];
    ap_format_bytes((double)p->best_peak_bytes, peak, sizeof peak);
    int n = snprintf(line, sizeof line, "search: %lld episodes  %.0f/s  tree %zu  best %.4g s (start %.4g s)  peak %s%s",
                     (long long)p->episodes, p->episodes_per_s, p->tree_nodes, p->best_runtime_s, p->start_runtime_s,
                     peak, p->best_fits ? "" : " (over the limit)");
    if (n > 0 && n < ctx->width)
        fprintf(stderr, "\r%-*s", ctx->width, line);
    else
        fprintf(stderr, "\r%.*s", ctx->width, line);
    fflush(stderr);
    return 0;
}

/* ------------------------------------------------------------- output */

/* The arguments' shardings in a state (strings heap; cli_sharding_rows_free). */
static cli_sharding *sharding_rows(const ir_partition *p, size_t *n)
{
    const ir_pctx *c = ir_partition_ctx(p);
    const ir_mesh *mesh = ir_pctx_mesh(c);
    ir_op *f = ir_pctx_func(c);
    *n = ir_func_num_args(f);
    cli_sharding *rows = ap_calloc(*n ? *n : 1, sizeof *rows);
    if (!rows) {
        *n = 0;
        return NULL;
    }
    for (uint32_t a = 0; a < *n; a++) {
        const ir_value *v = ir_func_arg(f, a);
        ir_layout l;
        ir_partition_value_layout(p, v, &l);
        const char *name = ir_func_arg_name(f, a);
        char ref[32];
        snprintf(ref, sizeof ref, "%%arg%u", a);
        ap_buf t, s;
        ap_buf_init(&t);
        ap_buf_init(&s);
        ir_type_print(&t, v->type);
        ir_layout_pspec(&l, mesh, v->type && v->type->kind == IR_T_TENSOR ? v->type->rank : 0, &s);
        rows[a].name = ap_strdup(name ? name : ref);
        rows[a].type = ap_buf_take(&t, NULL);
        rows[a].spec = ap_buf_take(&s, NULL);
    }
    return rows;
}

static void sharding_rows_free(cli_sharding *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ap_free((char *)rows[i].name);
        ap_free((char *)rows[i].type);
        ap_free((char *)rows[i].spec);
    }
    ap_free(rows);
}

static int print_text(const search_result *r, bool verbose)
{
    ap_buf b;
    ap_buf_init(&b);
    ap_buf mesh;
    ap_buf_init(&mesh);
    if (r->ctx)
        ir_mesh_format(ir_pctx_mesh(r->ctx), &mesh);
    (verbose ? cost_report_text_verbose : cost_report_text)(&r->report, &b);
    char *et = cli_explanation_text(r->explanation, r->explanation_text, verbose);
    size_t n = 0;
    cli_sharding *rows = sharding_rows(r->best, &n);
    for (size_t i = 0; i < n; i++)
        if (!rows[i].name || !rows[i].type || !rows[i].spec) {
            sharding_rows_free(rows, n);
            ap_buf_free(&b);
            ap_buf_free(&mesh);
            ap_free(et);
            return cli_fail("search", "out of memory writing the result");
        }
    cli_search_text t = {.decisions_before = r->decisions_before, .units = r->units,
                         .decisions_after = r->decisions_after, .have_stats = true, .episodes = r->episodes,
                         .best_episode = r->best_episode, .tree_nodes = (long long)r->tree_nodes,
                         .wall_s = r->wall_s, .episodes_per_s = r->episodes_per_s, .stopped_by = r->stopped_by,
                         .runtime_s = r->report.runtime_s, .start_runtime_s = r->start.runtime_s,
                         .none_fits = r->none_fits, .mesh = r->ctx ? (mesh.data ? mesh.data : "?") : NULL,
                         .n_meshes = r->n_meshes, .actions = r->actions, .schedule = r->schedule,
                         .cost_text = b.data, .explanation = et, .args = rows, .n_args = n};
    cli_print_search(stdout, &t, verbose);
    ap_free(et);
    sharding_rows_free(rows, n);
    ap_buf_free(&b);
    ap_buf_free(&mesh);
    return CLI_OK;
}

/* The result on stdout, as text or JSON; returns the exit status. */
static int print_result(const search_result *res, bool json, bool verbose)
{
    int rc = CLI_OK;
    if (json) {
        json_t *j = search_result_json(res);
        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(j);
        if (!text)
            return cli_fail("search", "out of memory writing JSON");
        puts(text);
        ap_free(text);
    } else {
        rc = print_text(res, verbose);
    }
    if (fflush(stdout) != 0)
        rc = cli_fail("search", "cannot write the output");
    return rc;
}

/* Says why the search failed.  It names the texts it reads by their roles,
 * "schedule" (--manual) and "hints"; the user knows them by the files they
 * came from (manual_name, hints->name).  Returns the exit status. */
static int search_fail(ap_error *err, const char *manual_name, const cli_schedule *hints)
{
    if (hints->text && !strcmp(err->file, "hints"))
        snprintf(err->file, sizeof err->file, "%s", hints->name);
    else if (manual_name && !strcmp(err->file, "schedule"))
        snprintf(err->file, sizeof err->file, "%s", manual_name);
    return cli_fail_err("search", NULL, err);
}

/* `--devices N`: the search chooses the mesh too (search_run_devices). */
static int search_devices_local(const cli_search_request *a, search_options *so, const cli_schedule *hints)
{
    ap_error err;
    ap_error_clear(&err);
    ir_module *m = cli_load_module("search", a->path, a->fmt);
    if (!m)
        return CLI_FAIL;
    search_result res;
    memset(&res, 0, sizeof res);
    int rc = CLI_FAIL;
    ir_op *f = a->func_name ? ir_module_func(m, a->func_name) : ir_module_entry(m);
    if (!f) {
        cli_fail("search", "%s: no function %s%s to partition", a->path, a->func_name ? "@" : "",
                 a->func_name ? a->func_name : "@main (and no single public function)");
        goto out;
    }
    if (a->axes_text) {
        /* bits over the names, as over a mesh's axes */
        const char *names = a->axes_names;
        for (const char *s = a->axes_text; *s;) {
            size_t len = strcspn(s, ",");
            int at = 0, found = -1;
            for (const char *t = names; *t; at++) {
                size_t tl = strcspn(t, ",");
                if (tl == len && !strncmp(t, s, len))
                    found = at;
                t += tl + (t[tl] == ',');
            }
            if (found < 0) {
                rc = cli_usage_fail("search", "--axes: '%.*s' is not one of --axes-names %s", (int)len, s, names);
                goto out;
            }
            so->axes |= 1u << found;
            s += len + (s[len] == ',');
        }
    }
    prog_ctx pc = {isatty(STDERR_FILENO) != 0, 100};
    so->progress = on_progress;
    so->progress_ctx = &pc;
    search_devices sd = {.devices = a->devices, .axes_names = a->axes_names, .manual = a->manual};
    if (search_run_devices(m, f, &sd, so, &res, &err) < 0) {
        if (pc.tty)
            fputc('\n', stderr);
        rc = search_fail(&err, a->manual_name, hints);
        goto out;
    }
    if (pc.tty)
        fputc('\n', stderr);
    rc = print_result(&res, a->json, a->verbose);
out:
    search_result_free(&res);
    ir_module_free(m);
    return rc;
}

/* ---------------------------------------------------- the command line */

typedef struct search_args {
    cli_remote remote;
    const char *path, *mesh_text, *axes_text, *manual_arg, *device, *func_name, *hints_arg, *axes_names;
    int64_t devices;
    bool json, import, verbose;
    bool help; /* --help: printed, nothing more to do */
    ir_format fmt;
    double limit;
    search_options so;
} search_args;

/* Reads and checks the command line into *a: CLI_OK, or the status of the
 * usage error it printed. */
static int parse_args(int argc, char **argv, search_args *a)
{
    static const struct option opts[] = {
        {"mesh", required_argument, NULL, 'm'},     {"axes", required_argument, NULL, 'a'},
        {"manual", required_argument, NULL, 'M'},   {"import", no_argument, NULL, 'i'},
        {"device", required_argument, NULL, 'd'},   {"memory-limit", required_argument, NULL, 'L'},
        {"episodes", required_argument, NULL, 'e'}, {"time-limit", required_argument, NULL, 't'},
        {"patience", required_argument, NULL, 'P'}, {"threads", required_argument, NULL, 'T'},
        {"seed", required_argument, NULL, 's'},     {"batch", required_argument, NULL, 'b'},
        {"hints", required_argument, NULL, 'H'},    {"overlap", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},           {"format", required_argument, NULL, 'f'},
        {"func", required_argument, NULL, 'F'},     {"help", no_argument, NULL, 'h'},
        {"devices", required_argument, NULL, 'D'},  {"axes-names", required_argument, NULL, 'N'},
        {"memory-margin", required_argument, NULL, 'G'}, {"framework", required_argument, NULL, 'W'},
        {"verbose", no_argument, NULL, 'V'},        CLI_REMOTE_OPTIONS,
        {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof *a);
    a->device = "h100";
    a->fmt = IR_FMT_AUTO;
    search_options_init(&a->so);
    ap_error err;
    int64_t n;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': a->mesh_text = optarg; break;
        case 'a': a->axes_text = optarg; break;
        case 'M': a->manual_arg = optarg; break;
        case 'i': a->import = true; break;
        case 'd': a->device = optarg; break;
        case 'H': a->hints_arg = optarg; break;
        case 'F': a->func_name = optarg; break;
        case 'j': a->json = true; break;
        case 'N': a->axes_names = optarg; break;
        case 'D': {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (!*optarg || *end)
                return cli_usage_fail("search", "--devices wants a number of devices, not '%s'", optarg);
            search_devices sd = {.devices = v};
            if (search_devices_check(&sd, &err) < 0)
                return cli_usage_fail("search", "--%s", err.msg);
            a->devices = v;
            break;
        }
        case 'V': a->verbose = true; break;
        case 'L':
            if (!strcmp(optarg, "none"))
                a->limit = -1;
            else if (!parse_bytes(optarg, &a->limit))
                return cli_usage_fail("search", "--memory-limit wants bytes (240GiB, 16e9, 80GB) or none, not '%s'",
                                      optarg);
            break;
        case 'e':
            if (!parse_count(optarg, &n) || n == 0)
                return cli_usage_fail("search", "--episodes wants a positive count, not '%s'", optarg);
            a->so.max_episodes = n;
            break;
        case 'P':
            if (!parse_count(optarg, &n) || n == 0)
                return cli_usage_fail("search", "--patience wants a positive count, not '%s'", optarg);
            a->so.patience = n;
            break;
        case 'T':
            if (!parse_count(optarg, &n) || n == 0 || n > 256)
                return cli_usage_fail("search", "--threads wants 1 to 256, not '%s'", optarg);
            a->so.threads = (int)n;
            break;
        case 'b':
            if (!parse_count(optarg, &n) || n == 0 || n > 1024)
                return cli_usage_fail("search", "--batch wants 1 to 1024, not '%s'", optarg);
            a->so.batch = (int)n;
            break;
        case 's': {
            char *end;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (!*optarg || *end || optarg[0] == '-')
                return cli_usage_fail("search", "--seed wants a non-negative integer, not '%s'", optarg);
            a->so.seed = v;
            break;
        }
        case 't': {
            char *end;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || !(v > 0) || isinf(v))
                return cli_usage_fail("search", "--time-limit wants a positive number of seconds, not '%s'", optarg);
            a->so.time_limit_s = v;
            break;
        }
        case 'o': {
            char *end;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || !(v >= 0 && v <= 1))
                return cli_usage_fail("search", "--overlap wants a number from 0 to 1, not '%s'", optarg);
            a->so.cost.overlap = v;
            break;
        }
        case 'G': {
            char *end;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || !(v >= 0 && v < 1))
                return cli_usage_fail("search", "--memory-margin wants a share at least 0 and below 1, not '%s'",
                                      optarg);
            a->so.memory_margin = v;
            break;
        }
        case 'f':
            if (!cli_parse_format(optarg, &a->fmt))
                return cli_usage_fail("search", "unknown format '%s' (stablehlo, hlo or auto)", optarg);
            break;
        case 'W':
            if (cost_framework_parse(optarg, &a->so.cost.framework, &err) < 0)
                return cli_usage_fail("search", "--framework: %s", err.msg);
            break;
        case 'h':
            search_usage(stdout);
            a->help = true;
            return CLI_OK;
        default: {
            int r = cli_remote_option("search", &a->remote, ch, optarg);
            if (r > 0)
                return r;
            if (r < 0)
                return cli_bad_option("search", ch, argv);
        }
        }
    }
    if (optind != argc - 1) {
        cli_usage_fail("search", optind < argc ? "expected one FILE, not %d" : "expected a FILE", argc - optind);
        return cli_usage_hint("search", SEARCH_SYNOPSIS);
    }
    a->path = argv[optind];
    const cli_remote *remote = &a->remote;
    if (!remote->server && (remote->token_file || remote->tls_ca || remote->tls_name || remote->timeout_s))
        return cli_usage_fail("search", "--token-file, --tls-ca, --tls-name and --timeout go with --server");
    if (a->devices) {
        search_devices sd = {.devices = a->devices, .axes_names = a->axes_names, .manual = a->manual_arg};
        if (a->mesh_text)
            return cli_usage_fail("search", "--devices and --mesh are exclusive: --devices chooses the mesh");
        if (a->import)
            return cli_usage_fail("search", "--import reads shardings over a mesh: give --mesh, not --devices");
        if (a->axes_text && !a->axes_names)
            return cli_usage_fail("search", "--axes with --devices needs --axes-names (the axes are named after "
                                            "the search otherwise)");
        if (search_devices_check(&sd, &err) < 0)
            return cli_usage_fail("search", "--%s", err.msg);
    } else if (a->axes_names) {
        return cli_usage_fail("search", "--axes-names goes with --devices");
    }
    return CLI_OK;
}

/* --hints TEXT or @FILE: the text into hints (heap, ap_free), named as the
 * user would call it. */
static int read_hints(const char *arg, cli_schedule *hints)
{
    if (arg[0] == '@') {
        size_t len;
        ap_error err;
        if (ap_read_file(arg + 1, &hints->text, &len, &err) < 0)
            return cli_fail("search", "--hints %s: %s", arg, err.msg);
        hints->name = arg + 1;
    } else {
        hints->text = ap_strdup(arg);
        hints->name = "hints";
    }
    return CLI_OK;
}

/* --server: the daemon searches. */
static int search_on_server(const search_args *a, const cli_schedule *manual, const cli_schedule *hints)
{
    const search_options *so = &a->so;
    cli_search_request req = {.path = a->path, .fmt = a->fmt, .func_name = a->func_name, .mesh_text = a->mesh_text,
                              .devices = a->devices, .axes_names = a->axes_names, .axes_text = a->axes_text,
                              .device = a->device, .manual = manual->text, .manual_name = manual->name,
                              .import = a->import, .json = a->json, .memory_limit = a->limit,
                              .memory_margin = so->memory_margin, .episodes = so->max_episodes,
                              .patience = so->patience, .time_limit_s = so->time_limit_s,
                              .overlap = so->cost.overlap, .framework = so->cost.framework, .threads = so->threads, .batch = so->batch,
                              .seed = so->seed, .hints = hints->text, .hints_name = hints->name,
                              .verbose = a->verbose};
    return cli_search_remote(&a->remote, &req);
}

/* --mesh: the search over that mesh, in this process. */
static int search_mesh_local(const search_args *a, search_options *so, const cli_schedule *manual,
                             const cli_schedule *hints)
{
    cli_partitioned st = {0};
    search_result res;
    memset(&res, 0, sizeof res);
    ap_error err;
    ap_error_clear(&err);
    int rc = cli_partition_open(&(cli_partition_args){.cmd = "search", .path = a->path, .fmt = a->fmt,
                                                      .func_name = a->func_name, .mesh_text = a->mesh_text,
                                                      .import = a->import, .schedule = manual ? manual->text : NULL},
                                &st);
    if (rc != 0)
        goto out;
    const ir_mesh *mesh = ir_pctx_mesh(st.ctx);
    if (a->axes_text) {
        const char *s = a->axes_text;
        while (*s) {
            size_t len = strcspn(s, ",");
            int ax = ir_mesh_axis(mesh, s, len);
            if (ax < 0) {
                rc = cli_usage_fail("search", "--axes: the mesh has no axis '%.*s'", (int)len, s);
                goto out;
            }
            so->axes |= 1u << ax;
            s += len + (s[len] == ',');
        }
        if (!so->axes) {
            rc = cli_usage_fail("search", "--axes names no axis");
            goto out;
        }
    }
    rc = CLI_FAIL;
    if (a->manual_arg && cli_schedule_apply("search", manual, st.p, NULL, NULL) != 0)
        goto out;
    prog_ctx pc = {isatty(STDERR_FILENO) != 0, 100};
    so->progress = on_progress;
    so->progress_ctx = &pc;
    if (search_run(st.p, so, &res, &err) < 0) {
        if (pc.tty)
            fputc('\n', stderr);
        rc = search_fail(&err, manual->text ? manual->name : NULL, hints);
        goto out;
    }
    if (pc.tty)
        fputc('\n', stderr);
    rc = print_result(&res, a->json, a->verbose);
out:
    search_result_free(&res);
    cli_partitioned_free(&st);
    return rc;
}

int cli_search(int argc, char **argv)
{
    search_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != CLI_OK || a.help)
        return rc;
    if (!a.remote.server && (rc = cli_device("search", a.device, &a.so.device)) != 0)
        return rc;
    a.so.memory_limit = a.limit;
    cli_schedule manual = {0}, hints = {0};
    if (a.manual_arg && (rc = cli_schedule_read("search", "--manual", a.manual_arg, &manual)) != 0)
        return rc;
    if (a.hints_arg && (rc = read_hints(a.hints_arg, &hints)) != 0)
        goto out;
    if (a.remote.server) {
        rc = search_on_server(&a, &manual, &hints);
        goto out;
    }
    a.so.hints = hints.text;
    if (a.devices)
        rc = search_devices_local(&(cli_search_request){.path = a.path, .fmt = a.fmt, .func_name = a.func_name,
                                                        .devices = a.devices, .axes_names = a.axes_names,
                                                        .axes_text = a.axes_text, .manual = manual.text,
                                                        .manual_name = manual.name, .json = a.json,
                                                        .verbose = a.verbose},
                                  &a.so, &hints);
    else
        rc = search_mesh_local(&a, &a.so, &manual, &hints);
out:
    cli_schedule_free(&manual);
    ap_free(hints.text);
    return rc;
}
