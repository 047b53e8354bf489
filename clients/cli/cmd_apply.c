/*
 * cmd_apply.c - `autopart apply FILE --mesh batch=4,model=2 --schedule
 * TEXT|@FILE [--view spmd|core|shardings|report] [--json] [--server
 * HOST:PORT]`: applies a partitioning schedule (PartIR actions) to a module
 * and shows the result: the device-local SPMD program with its collectives,
 * the PartIR:Core loop view, the shardings of arguments and results, or a
 * report.  The work is apply.h's, here or, with --server, in autopartd;
 * both answers print through the same functions.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "cli.h"
#include "cost.h"
#include "remote.h"

#define APPLY_SYNOPSIS "autopart apply FILE --mesh AXES --schedule TEXT|@FILE [options]"

static void apply_usage(FILE *f)
{
    fprintf(f,
            "usage: " APPLY_SYNOPSIS "\n"
            "\n"
            "Partitions the entry function of FILE (StableHLO or HLO) over a device mesh\n"
            "with a schedule of PartIR actions and prints the result.\n"
            "\n"
            "  --mesh AXES        e.g. batch=4,model=2 (default: the module's sdy.mesh)\n"
            "  --schedule S       actions, one per line or ';'-separated; @FILE reads a file:\n"
            "                       tile VALUE DIM AXIS     (DIM may be first_divisible)\n"
            "                       atomic VALUE AXIS\n"
            "                       propagate\n"
            "                       manual AXIS VALUE=DIM ...  (tiles, then propagate)\n"
            "                     VALUE: %%argN, a location name such as params['w'], a glob\n"
            "                     over location names (params['block_*']['mlp']['w_up']), or %%N\n"
            "                     as `autopart parse --inline` numbers the function's values\n"
            "                     (its calls inlined, as partitioned; without calls, as\n"
            "                     `autopart parse` does)\n"
            CLI_HELP_IMPORT
            "  --view V           spmd (default): device-local program with collectives\n"
            "                     core: PartIR:Core loop view\n"
            "                     temporal: the loop view unrolled as a single-device program\n"
            "                     shardings: per-argument and result partition specs\n"
            "                     report: collectives, shardings, what blocked propagation\n"
            "  --json             report (or shardings) as JSON\n"
            "  --verbose          the shardings one row per argument and result, the schedule\n"
            "                     one action per line (by default arguments alike share a row\n"
            "                     and a run of one action folds into a glob over its values)\n"
            "  --device D         device for the cost estimate of the report (default h100),\n"
            "                     a JSON file describing one, or one of:\n");
    cli_print_device_names(f, "                       ");
    fprintf(f,
            "  --overlap X        assume at least this share of communication hidden under\n"
            "                     compute, 0..1 (default 0: what the schedule hides)\n"
            "  --framework F      what runs the step, for its peak memory: xla (default:\n"
            "                     fused, as XLA's buffer assignment counts it) or\n"
            "                     pytorch-eager (every op's output a tensor, ops as written;\n"
            "                     the allocator's allocated peak)\n"
            "  --format F         stablehlo | hlo (default: detected)\n"
            "  --func NAME        the function to partition (default: main)\n"
            "  -h, --help         this help\n"
            "\n"
            "With --server, autopartd does the work (and keeps the answer: asking again is\n"
            "answered from its store).  Views spmd, core, shardings and report; positions\n"
            "in its report refer to the module as `autopart parse FILE` prints it.\n");
    cli_remote_help(f);
    fprintf(f,
            "\n"
            "Exit status: 0 success, 1 bad input (module, schedule) or a failure, 2 bad usage.\n");
}


/* The rows of shardings JSON ([{"kind", "name", "type", "spec"}]), pointing
 * into it (heap array; NULL when empty or out of memory). */
static cli_sharding *sharding_rows(json_t *sh, size_t *n)
{
    *n = json_array_size(sh);
    cli_sharding *rows = *n ? ap_calloc(*n, sizeof *rows) : NULL;
    if (!rows) {
        *n = 0;
        return NULL;
    }
    size_t i;
    json_t *o;
    json_array_foreach(sh, i, o) {
        rows[i] = (cli_sharding){json_string_value(json_object_get(o, "kind")),
                                 json_string_value(json_object_get(o, "name")),
                                 json_string_value(json_object_get(o, "type")),
                                 json_string_value(json_object_get(o, "spec"))};
        rows[i].name = rows[i].name ? rows[i].name : "?";
        rows[i].type = rows[i].type ? rows[i].type : "?";
        rows[i].spec = rows[i].spec ? rows[i].spec : "?";
    }
    return rows;
}

/* The shardings, one row per pattern (verbose: per argument and result),
 * then the schedule when there is one, folded alike. */
static void print_shardings(json_t *sh, const char *indent, const char *schedule, bool verbose)
{
    size_t n, n_args = 0;
    cli_sharding *rows = sharding_rows(sh, &n);
    cli_print_shardings(stdout, rows, n, indent, verbose);
    if (schedule) {
        while (n_args < n && rows[n_args].kind && !strcmp(rows[n_args].kind, "argument"))
            n_args++;
        printf("\nschedule:\n");
        cli_print_schedule(stdout, schedule, rows, n_args, verbose);
    }
    ap_free(rows);
}

static int print_json(json_t *j)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text)
        return cli_fail("apply", "out of memory writing JSON");
    puts(text);
    ap_free(text);
    return 0;
}

static uint64_t juint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

/* The text report, from the report JSON (apply_report_json's, made here or
 * by autopartd) and the cost estimate as text. */
static void print_report_text(json_t *rep, const char *path, const char *cost_text, bool verbose)
{
    ir_mesh mesh;
    ap_error err;
    const char *mesh_text = json_string_value(json_object_get(rep, "mesh"));
    printf("file:     %s\nmesh:     {", path);
    if (mesh_text && ir_mesh_parse(mesh_text, &mesh, &err) == 0) {
        for (int a = 0; a < mesh.n_axes; a++)
            printf(a ? ", %s:%lld" : "%s:%lld", mesh.names[a], (long long)mesh.sizes[a]);
        printf("} (%lld devices)\n", (long long)ir_mesh_devices(&mesh));
    } else {
        printf("%s}\n", mesh_text ? mesh_text : "?");
    }
    json_t *coll = json_object_get(rep, "collectives"), *bytes = json_object_get(rep, "collective_bytes");
    /* the lowering's ops: loop bodies once (the cost estimate counts them per step) */
    printf("collectives as written:\n");
    for (int k = 0; k < IR_COLL__COUNT; k++) {
        const char *name = ir_coll_name((ir_coll_kind)k);
        printf("  %-20s %6" PRIu64 "   %12" PRIu64 " bytes per device\n", name, juint(coll, name), juint(bytes, name));
    }
    printf("  %-20s %6" PRIu64 "   (local slicing, no communication)\n", "dynslice", juint(rep, "dynslices"));
    printf("shardings:\n");
    print_shardings(json_object_get(rep, "shardings"), "  ", NULL, verbose);
    json_t *tac = json_object_get(rep, "tactics"), *cost = json_object_get(rep, "cost");
    if (json_array_size(tac)) {
        const char *dev = json_string_value(json_object_get(cost, "device"));
        printf("after each tactic (on %s):\n", dev ? dev : "?");
        printf("  %-4s %5s %5s %5s %5s %5s %12s %12s  %s\n", "#", "AG", "AR", "RS", "A2A", "CP", "step ms",
               "peak GiB", "tactic");
        size_t i;
        json_t *r;
        json_array_foreach(tac, i, r) {
            json_t *cc = json_object_get(r, "collectives");
            uint64_t c[IR_COLL__COUNT];
            for (int k = 0; k < IR_COLL__COUNT; k++)
                c[k] = juint(cc, ir_coll_name((ir_coll_kind)k));
            printf("  %-4zu %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %12.3f %12.3f%s %s\n",
                   i + 1, c[0], c[1], c[2], c[3], c[4], json_number_value(json_object_get(r, "runtime_s")) * 1e3,
                   (double)juint(r, "peak_memory_bytes") / (1024.0 * 1024 * 1024),
                   json_is_false(json_object_get(r, "fits")) ? "!" : " ",
                   json_string_value(json_object_get(r, "tactic")));
        }
    }
    if (cost_text)
        printf("cost estimate:\n%s", cost_text);
    json_t *conf = json_object_get(rep, "conflicts");
    size_t nb = json_array_size(conf);
    printf("blocked propagation: %zu\n", nb);
    for (size_t k = 0; k < nb && k < 50; k++) {
        json_t *b = json_array_get(conf, k);
        printf("  %s on '%s': %s at %" PRIu64 ":%" PRIu64 ": %s\n", json_string_value(json_object_get(b, "kind")),
               json_string_value(json_object_get(b, "axis")), json_string_value(json_object_get(b, "op")),
               juint(b, "line"), juint(b, "column"), json_string_value(json_object_get(b, "why")));
    }
    if (nb > 50)
        printf("  ... %zu more (see --json)\n", nb - 50);
}

/* ================================================================= local */

typedef struct apply_args {
    const char *path, *mesh_text, *view, *func_name, *device;
    bool json, import, verbose;
    ir_format fmt;
    cost_options copts;
    cli_schedule sched;
} apply_args;

static int apply_local(apply_args *a)
{
    int rc;
    ap_error err;
    cost_device dev;
    apply_state st = {0};
    bool want_cost = a->json || !strcmp(a->view, "report");
    cli_partitioned cp = {0};
    ap_error_clear(&err);
    if (want_cost && (rc = cli_device("apply", a->device, &dev)) != 0)
        return rc;
    rc = cli_partition_open(&(cli_partition_args){.cmd = "apply", .path = a->path, .fmt = a->fmt,
                                                  .func_name = a->func_name, .mesh_text = a->mesh_text,
                                                  .import = a->import, .schedule = a->sched.text},
                            &cp);
    if (rc != 0)
        return rc;
    apply_adopt(&st, cp.m, cp.ctx, cp.p);
    rc = CLI_FAIL;
    apply_costing costing = {&st, &dev, &a->copts};
    if (a->sched.text &&
        cli_schedule_apply("apply", &a->sched, st.p, want_cost ? apply_after_tactic : NULL, &costing) != 0)
        goto out;
    if (strcmp(a->view, "core") != 0 && strcmp(a->view, "temporal") != 0 &&
        apply_lower(&st, want_cost ? &dev : NULL, &a->copts, &err) < 0) {
        cli_fail_err("apply", want_cost ? "SPMD lowering and cost estimate" : "SPMD lowering", &err);
        goto out;
    }
    ap_buf b;
    ap_buf_init(&b);
    rc = 0;
    if (!strcmp(a->view, "core")) {
        ir_print_loops(st.p, &b);
        fwrite(b.data, 1, b.len, stdout);
    } else if (!strcmp(a->view, "temporal")) {
        ir_module *tm = NULL;
        if (ir_temporal(st.p, &tm, &err) < 0 || ir_verify(tm, &err) < 0 || ir_print(tm, &b, NULL) < 0)
            rc = cli_fail_err("apply", "temporal view", &err);
        else
            fwrite(b.data, 1, b.len, stdout);
        ir_module_free(tm);
    } else if (a->json && !strcmp(a->view, "shardings")) {
        rc = print_json(apply_shardings_json(&st));
    } else if (a->json) {
        rc = print_json(apply_report_json(&st));
    } else if (!strcmp(a->view, "report")) {
        json_t *rep = apply_report_json(&st);
        char *ct = cli_cost_text(&st.cost, a->verbose);
        print_report_text(rep, a->path, ct, a->verbose);
        ap_free(ct);
        json_decref(rep);
    } else if (!strcmp(a->view, "shardings")) {
        json_t *sh = apply_shardings_json(&st);
        char *sched = apply_schedule_text(&st);
        print_shardings(sh, "", sched ? sched : "", a->verbose);
        json_decref(sh);
        ap_free(sched);
    } else {
        if (ir_print(st.lw.module, &b, NULL) < 0)
            rc = cli_fail("apply", "out of memory while printing");
        else
            fwrite(b.data, 1, b.len, stdout);
    }
    ap_buf_free(&b);
    if (fflush(stdout) != 0 && rc == 0)
        rc = cli_fail("apply", "cannot write the output");
out:
    apply_state_free(&st);
    return rc;
}

/* ================================================================ remote */

/* The wire's shardings as the JSON apply_shardings_json makes. */
static json_t *shardings_of(const Autopart__V1__PartitionResult *res)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < res->n_shardings; i++) {
        const Autopart__V1__Sharding *s = res->shardings[i];
        json_t *o = json_object();
        json_object_set_new(o, "kind",
                            json_string(s->kind == AUTOPART__V1__SHARDING__KIND__RESULT ? "result" : "argument"));
        json_object_set_new(o, "index", json_integer(s->index));
        json_object_set_new(o, "name", json_string(s->name));
        json_object_set_new(o, "type", json_string(s->type));
        json_object_set_new(o, "spec", json_string(s->spec_text));
        json_array_append_new(arr, o);
    }
    return arr;
}

static int apply_remote(apply_args *a, const cli_remote *remote)
{
    int rc;
    if (!strcmp(a->view, "temporal"))
        return cli_usage_fail("apply", "--view temporal is not served by autopartd: leave --server out for it");
    if (a->device && strstr(a->device, ".json"))
        return cli_usage_fail("apply", "--device FILE.json is not sent to autopartd: name a registry device");
    char *text;
    size_t len;
    ap_error err;
    if (ap_read_file(a->path, &text, &len, &err) < 0)
        return cli_fail("apply", "%s", err.msg);
    const char *name = strcmp(a->path, "-") == 0 ? "<stdin>" : a->path;
    cli_wire_target t;
    Autopart__V1__ApplyRequest req = AUTOPART__V1__APPLY_REQUEST__INIT;
    Autopart__V1__ApplyResponse *resp = NULL;
    wire_conn *conn = NULL;
    json_t *rep = NULL;
    if ((rc = cli_wire_target_init(&t, "apply", text, name, a->fmt, a->func_name, a->mesh_text, a->device)) != 0)
        goto out;
    req.module = &t.mod;
    req.mesh = &t.wmesh;
    req.device = &t.dev;
    req.schedule = a->sched.text ? a->sched.text : (char *)"";
    req.import_shardings = a->import;
    req.overlap = a->copts.overlap;
    req.framework = cli_wire_framework(a->copts.framework);
    req.want_core_view = !strcmp(a->view, "core");
    req.client_label = (char *)"autopart-cli";
    if ((rc = cli_remote_open("apply", remote, &conn)) != 0)
        goto out;
    rc = cli_remote_call("apply", remote, conn, "/autopart.v1.Partitioner/Apply", &req.base,
                         &autopart__v1__apply_response__descriptor, (ProtobufCMessage **)&resp, name,
                         a->sched.name);
    if (rc != 0)
        goto out;
    const Autopart__V1__PartitionResult *res = resp->result;
    if (!res) {
        rc = cli_fail("apply", "autopartd at %s answered without a result", remote->server);
        goto out;
    }
    fprintf(stderr, "autopart apply: answered by %s (%s), stored as %s (autopart show %s)\n", remote->server,
            cli_origin_name(resp->origin), resp->search_id, resp->search_id);
    cli_remote_notes(name, res->report_json);
    if (a->json || !strcmp(a->view, "report")) {
        json_error_t jerr;
        rep = json_loads(res->report_json, 0, &jerr);
        if (!rep) {
            rc = cli_fail("apply", "autopartd's report is not JSON: %s", jerr.text);
            goto out;
        }
    }
    if (!strcmp(a->view, "core")) {
        fputs(res->core_view, stdout);
    } else if (a->json && !strcmp(a->view, "shardings")) {
        rc = print_json(shardings_of(res));
    } else if (a->json) {
        rc = print_json(json_incref(rep));
    } else if (!strcmp(a->view, "report")) {
        cost_report cr;
        cost_report_from_json(json_object_get(rep, "cost"), &cr);
        char *ct = json_object_get(rep, "cost") ? cli_cost_text(&cr, a->verbose) : NULL;
        print_report_text(rep, a->path, ct, a->verbose);
        ap_free(ct);
    } else if (!strcmp(a->view, "shardings")) {
        json_t *sh = shardings_of(res);
        print_shardings(sh, "", res->schedule, a->verbose);
        json_decref(sh);
    } else {
        fputs(res->module, stdout);
    }
    if (fflush(stdout) != 0 && rc == 0)
        rc = cli_fail("apply", "cannot write the output");
out:
    json_decref(rep);
    if (resp)
        protobuf_c_message_free_unpacked(&resp->base, NULL);
    wire_close(conn);
    ap_free(text);
    return rc;
}

int cli_apply(int argc, char **argv)
{
    static const struct option opts[] = {{"mesh", required_argument, NULL, 'm'},   {"schedule", required_argument, NULL, 's'},
                                         {"view", required_argument, NULL, 'v'},   {"json", no_argument, NULL, 'j'},
                                         {"format", required_argument, NULL, 'f'}, {"func", required_argument, NULL, 'F'},
                                         {"import", no_argument, NULL, 'i'},       {"help", no_argument, NULL, 'h'},
                                         {"device", required_argument, NULL, 'd'}, {"overlap", required_argument, NULL, 'o'},
                                         {"verbose", no_argument, NULL, 'V'},      {"framework", required_argument, NULL, 'W'},
                                         CLI_REMOTE_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    apply_args a = {.view = "spmd", .device = "h100", .fmt = IR_FMT_AUTO};
    cli_remote remote = {0};
    const char *sched_arg = NULL;
    int ch, rc;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': a.mesh_text = optarg; break;
        case 's': sched_arg = optarg; break;
        case 'v': a.view = optarg; break;
        case 'j': a.json = true; break;
        case 'V': a.verbose = true; break;
        case 'i': a.import = true; break;
        case 'F': a.func_name = optarg; break;
        case 'd': a.device = optarg; break;
        case 'o': {
            char *end;
            a.copts.overlap = strtod(optarg, &end);
            if (!*optarg || *end || !(a.copts.overlap >= 0 && a.copts.overlap <= 1))
                return cli_usage_fail("apply", "--overlap wants a number from 0 to 1, not '%s'", optarg);
            break;
        }
        case 'f':
            if (!cli_parse_format(optarg, &a.fmt))
                return cli_usage_fail("apply", "unknown format '%s' (stablehlo, hlo or auto)", optarg);
            break;
        case 'W': {
            ap_error err;
            if (cost_framework_parse(optarg, &a.copts.framework, &err) < 0)
                return cli_usage_fail("apply", "--framework: %s", err.msg);
            break;
        }
        case 'h': apply_usage(stdout); return CLI_OK;
        default:
            if ((rc = cli_remote_option("apply", &remote, ch, optarg)) >= 0) {
                if (rc)
                    return rc;
                break;
            }
            return cli_bad_option("apply", ch, argv);
        }
    }
    if (optind != argc - 1) {
        cli_usage_fail("apply", optind < argc ? "expected one FILE, not %d" : "expected a FILE", argc - optind);
        return cli_usage_hint("apply", APPLY_SYNOPSIS);
    }
    if (strcmp(a.view, "spmd") && strcmp(a.view, "core") && strcmp(a.view, "shardings") && strcmp(a.view, "report") &&
        strcmp(a.view, "temporal"))
        return cli_usage_fail("apply", "unknown view '%s' (spmd, core, temporal, shardings or report)", a.view);
    if (!sched_arg && !a.import)
        return cli_usage_fail("apply", "--schedule (or --import) is required");
    if (!remote.server && (remote.token_file || remote.tls_ca || remote.tls_name || remote.timeout_s))
        return cli_usage_fail("apply", "--token-file, --tls-ca, --tls-name and --timeout go with --server");
    a.path = argv[optind];
    if (sched_arg && (rc = cli_schedule_read("apply", "--schedule", sched_arg, &a.sched)) != 0)
        return rc;
    rc = remote.server ? apply_remote(&a, &remote) : apply_local(&a);
    cli_schedule_free(&a.sched);
    return rc;
}
