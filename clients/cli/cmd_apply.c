/*
 * cmd_apply.c - `autopart apply FILE --mesh batch=4,model=2 --schedule
 * TEXT|@FILE [--view spmd|core|shardings|report] [--json]`: applies a
 * partitioning schedule (PartIR actions) to a module and shows the result:
 * the device-local SPMD program with its collectives, the PartIR:Core loop
 * view, the shardings of arguments and results, or a report.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"

/* What each tactic of the schedule led to (the paper's partir.jit
 * metadata): collectives and the cost estimate after it. */
typedef struct tactic_row {
    char text[160];
    uint64_t count[IR_COLL__COUNT];
    cost_report cost;
    bool costed;
} tactic_row;

typedef struct apply_ctx {
    const cost_device *dev;
    cost_options copts;
    tactic_row *rows;
    int n_rows, cap_rows;
} apply_ctx;

/* Lowers the state and estimates its cost on dev. */
static int estimate(const ir_partition *p, const cost_device *dev, const cost_options *opts, ir_lowered *lw,
                    cost_report *rep, ap_error *err)
{
    int rc = ir_lower(p, lw, err);
    if (rc < 0)
        return rc;
    return cost_estimate(lw->module, dev, opts, rep, err);
}

static int after_tactic(void *vctx, ir_partition *p, const char *tactic, size_t len, ap_error *err)
{
    apply_ctx *ctx = vctx;
    if (ctx->n_rows == ctx->cap_rows) {
        int cap = ctx->cap_rows ? ctx->cap_rows * 2 : 8;
        tactic_row *r = realloc(ctx->rows, sizeof *r * (size_t)cap);
        if (!r)
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        ctx->rows = r;
        ctx->cap_rows = cap;
    }
    tactic_row *row = &ctx->rows[ctx->n_rows++];
    memset(row, 0, sizeof *row);
    /* one line, without the schedule's comments */
    size_t n = 0, cap = sizeof row->text - 1;
    bool cut = false;
    for (size_t i = 0; i < len && !cut; i++) {
        if (tactic[i] == '#') {
            while (i + 1 < len && tactic[i + 1] != '\n')
                i++;
            continue;
        }
        char c = tactic[i] == '\n' ? ';' : tactic[i];
        if ((c == ';' || c == ' ') && (n == 0 || row->text[n - 1] == ';' || row->text[n - 1] == ' '))
            continue;
        if (n == cap)
            cut = true;
        else
            row->text[n++] = c;
    }
    while (n && (row->text[n - 1] == ';' || row->text[n - 1] == ' '))
        n--;
    row->text[n] = '\0';
    if (cut && n > 3)
        memcpy(row->text + n - 3, "...", 3);
    ir_lowered lw;
    int rc = estimate(p, ctx->dev, &ctx->copts, &lw, &row->cost, err);
    if (rc == 0) {
        memcpy(row->count, lw.count, sizeof row->count);
        row->costed = true;
    }
    ir_lowered_free(&lw);
    return rc;
}

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
            "  --import           start from the sharding annotations the arguments carry\n"
            "                     (sdy.sharding, mhlo.sharding)\n"
            "  --view V           spmd (default): device-local program with collectives\n"
            "                     core: PartIR:Core loop view\n"
            "                     temporal: the loop view unrolled as a single-device program\n"
            "                     shardings: per-argument and result partition specs\n"
            "                     report: collectives, shardings, what blocked propagation\n"
            "  --json             report (or shardings) as JSON\n"
            "  --device D         device for the cost estimate of the report (default h100),\n"
            "                     a JSON file describing one, or one of:\n");
    cli_print_device_names(f, "                       ");
    fprintf(f,
            "  --overlap X        share of communication hidden under compute, 0..1 (default 0)\n"
            "  --format F         stablehlo | hlo (default: detected)\n"
            "  --func NAME        the function to partition (default: main)\n"
            "  -h, --help         this help\n"
            "\n"
            "Exit status: 0 success, 1 bad input (module, schedule) or a failure, 2 bad usage.\n");
}

static const char *const kind_names[] = {"conflict", "axis already used", "indivisible", "atomic", "dynamic dim",
                                         "no TMR rule"};

static char *layout_text(const ir_layout *l, const ir_mesh *mesh, const ir_type *t, bool pspec)
{
    ap_buf b;
    ap_buf_init(&b);
    int rank = t && t->kind == IR_T_TENSOR ? t->rank : 0;
    if (pspec)
        ir_layout_pspec(l, mesh, rank, &b);
    else
        ir_layout_format(l, mesh, rank, &b);
    return ap_buf_take(&b, NULL);
}

static char *type_text(const ir_type *t)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_type_print(&b, t);
    return ap_buf_take(&b, NULL);
}

/* Shardings of arguments and results: name, global type, partition spec. */
static json_t *shardings_json(const ir_partition *p, const ir_lowered *lw)
{
    const ir_pctx *c = ir_partition_ctx(p);
    const ir_mesh *mesh = ir_pctx_mesh(c);
    ir_op *f = ir_pctx_func(c);
    json_t *arr = json_array();
    for (uint32_t a = 0; a < ir_func_num_args(f); a++) {
        const ir_value *v = ir_func_arg(f, a);
        ir_layout l;
        ir_partition_value_layout(p, v, &l);
        const char *name = ir_func_arg_name(f, a);
        char ref[32];
        snprintf(ref, sizeof ref, "%%arg%u", a);
        char *spec = layout_text(&l, mesh, v->type, true), *ty = type_text(v->type);
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string("argument"));
        json_object_set_new(o, "index", json_integer(a));
        json_object_set_new(o, "name", json_string(name ? name : ref));
        json_object_set_new(o, "type", json_string(ty ? ty : "?"));
        json_object_set_new(o, "spec", json_string(spec ? spec : "?"));
        json_array_append_new(arr, o);
        ap_free(spec);
        ap_free(ty);
    }
    /* results: as they leave the SPMD program */
    ir_op *lf = lw && lw->module ? ir_module_entry(lw->module) : NULL;
    for (uint32_t r = 0; lf && r < ir_func_num_results(f); r++) {
        ir_attr *info = ir_func_result_attr(f, r, "jax.result_info");
        ir_attr *lay = ir_func_result_attr(lf, r, "autopart.layout");
        const ir_type *t = ir_func_type(f)->elems[ir_func_type(f)->n_inputs + (int)r];
        ap_buf b;
        ap_buf_init(&b);
        ap_buf_puts(&b, "P(");
        for (int d = 0; lay && d < lay->u.arr.n; d++) {
            ir_attr *axes = lay->u.arr.items[d];
            if (d)
                ap_buf_puts(&b, ", ");
            if (axes->u.arr.n == 0)
                ap_buf_puts(&b, "None");
            else if (axes->u.arr.n == 1)
                ap_buf_printf(&b, "'%s'", axes->u.arr.items[0]->u.str.s);
            else {
                ap_buf_putc(&b, '(');
                for (int k = 0; k < axes->u.arr.n; k++)
                    ap_buf_printf(&b, k ? ", '%s'" : "'%s'", axes->u.arr.items[k]->u.str.s);
                ap_buf_putc(&b, ')');
            }
        }
        if (lay && lay->u.arr.n == 1)
            ap_buf_putc(&b, ',');
        ap_buf_putc(&b, ')');
        char *ty = type_text(t), ref[32];
        snprintf(ref, sizeof ref, "result #%u", r);
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string("result"));
        json_object_set_new(o, "index", json_integer(r));
        json_object_set_new(o, "name", json_string(info && info->kind == IR_A_STRING && info->u.str.s[0] ? info->u.str.s : ref));
        json_object_set_new(o, "type", json_string(ty ? ty : "?"));
        json_object_set_new(o, "spec", json_string(b.data ? b.data : "P()"));
        json_array_append_new(arr, o);
        ap_free(ty);
        ap_buf_free(&b);
    }
    return arr;
}

/* One line per argument and result: kind, name, global type, partition
 * spec. */
static void print_shardings(const ir_partition *p, const ir_lowered *lw, const char *indent)
{
    json_t *sh = shardings_json(p, lw);
    size_t i;
    json_t *o;
    json_array_foreach(sh, i, o) {
        printf("%s%-9s %-48s %-32s %s\n", indent, json_string_value(json_object_get(o, "kind")),
               json_string_value(json_object_get(o, "name")), json_string_value(json_object_get(o, "type")),
               json_string_value(json_object_get(o, "spec")));
    }
    json_decref(sh);
}

static json_t *report_json(const ir_partition *p, const ir_lowered *lw, const cost_report *cost,
                           const apply_ctx *actx)
{
    const ir_pctx *c = ir_partition_ctx(p);
    const ir_mesh *mesh = ir_pctx_mesh(c);
    json_t *root = json_object(), *coll = json_object(), *bytes = json_object(), *conf = json_array();
    ap_buf mb;
    ap_buf_init(&mb);
    ir_mesh_format(mesh, &mb);
    json_object_set_new(root, "mesh", json_string(mb.data ? mb.data : ""));
    ap_buf_free(&mb);
    for (int k = 0; k < IR_COLL__COUNT; k++) {
        json_object_set_new(coll, ir_coll_name((ir_coll_kind)k), json_integer((json_int_t)lw->count[k]));
        json_object_set_new(bytes, ir_coll_name((ir_coll_kind)k), json_integer((json_int_t)lw->bytes[k]));
    }
    json_object_set_new(root, "collectives", coll);
    json_object_set_new(root, "collective_bytes", bytes);
    json_object_set_new(root, "dynslices", json_integer((json_int_t)lw->n_dynslice));
    json_object_set_new(root, "shardings", shardings_json(p, lw));
    uint32_t nb;
    const ir_blocked *bl = ir_partition_blocked(p, &nb);
    for (uint32_t i = 0; i < nb; i++) {
        ir_op *op = ir_pctx_op(c, bl[i].op);
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(kind_names[bl[i].kind]));
        json_object_set_new(o, "axis", json_string(mesh->names[bl[i].axis]));
        json_object_set_new(o, "op", json_string(op ? op->name : "(tiling of a value)"));
        if (op && op->src_line) {
            json_object_set_new(o, "line", json_integer(op->src_line));
            json_object_set_new(o, "column", json_integer(op->src_col));
        }
        json_object_set_new(o, "why", json_string(bl[i].why));
        json_array_append_new(conf, o);
    }
    json_object_set_new(root, "conflicts", conf);
    if (cost) {
        json_t *cj = cost_report_to_json(cost);
        json_t *inner = cj ? json_object_get(cj, "cost") : NULL;
        if (inner)
            json_object_set(root, "cost", inner);
        json_decref(cj);
    }
    if (actx && actx->n_rows) {
        json_t *tac = json_array();
        for (int i = 0; i < actx->n_rows; i++) {
            const tactic_row *r = &actx->rows[i];
            json_t *o = json_object(), *cc = json_object();
            json_object_set_new(o, "tactic", json_string(r->text));
            for (int k = 0; k < IR_COLL__COUNT; k++)
                json_object_set_new(cc, ir_coll_name((ir_coll_kind)k), json_integer((json_int_t)r->count[k]));
            json_object_set_new(o, "collectives", cc);
            if (r->costed) {
                json_object_set_new(o, "runtime_s", json_real(r->cost.runtime_s));
                json_object_set_new(o, "peak_memory_bytes", json_integer(r->cost.peak_memory_bytes));
                json_object_set_new(o, "fits", json_boolean(r->cost.fits));
            }
            json_array_append_new(tac, o);
        }
        json_object_set_new(root, "tactics", tac);
    }
    ap_buf sb;
    ap_buf_init(&sb);
    ir_partition_schedule(p, &sb);
    json_object_set_new(root, "schedule", json_string(sb.data ? sb.data : ""));
    ap_buf_free(&sb);
    return root;
}

static int print_json(json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text)
        return cli_fail("apply", "out of memory writing JSON");
    puts(text);
    free(text);
    return 0;
}

static void print_report_text(const ir_partition *p, const ir_lowered *lw, const char *path, const cost_report *cost,
                              const apply_ctx *actx)
{
    const ir_pctx *c = ir_partition_ctx(p);
    const ir_mesh *mesh = ir_pctx_mesh(c);
    printf("file:     %s\nmesh:     {", path);
    for (int a = 0; a < mesh->n_axes; a++)
        printf(a ? ", %s:%lld" : "%s:%lld", mesh->names[a], (long long)mesh->sizes[a]);
    printf("} (%lld devices)\n", (long long)ir_mesh_devices(mesh));
    /* the lowering's ops: loop bodies once (the cost estimate counts them per step) */
    printf("collectives as written:\n");
    for (int k = 0; k < IR_COLL__COUNT; k++)
        printf("  %-20s %6" PRIu64 "   %12" PRIu64 " bytes per device\n", ir_coll_name((ir_coll_kind)k), lw->count[k],
               lw->bytes[k]);
    printf("  %-20s %6" PRIu64 "   (local slicing, no communication)\n", "dynslice", lw->n_dynslice);
    printf("shardings:\n");
    print_shardings(p, lw, "  ");
    if (actx && actx->n_rows) {
        printf("after each tactic (on %s):\n", actx->dev->name);
        printf("  %-4s %5s %5s %5s %5s %5s %12s %12s  %s\n", "#", "AG", "AR", "RS", "A2A", "CP", "step ms",
               "peak GiB", "tactic");
        for (int i = 0; i < actx->n_rows; i++) {
            const tactic_row *r = &actx->rows[i];
            printf("  %-4d %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %12.3f %12.3f%s %s\n", i + 1,
                   r->count[0], r->count[1], r->count[2], r->count[3], r->count[4], r->cost.runtime_s * 1e3,
                   (double)r->cost.peak_memory_bytes / (1024.0 * 1024 * 1024), r->cost.fits ? " " : "!", r->text);
        }
    }
    if (cost) {
        ap_buf cb;
        ap_buf_init(&cb);
        cost_report_text(cost, &cb);
        printf("cost estimate:\n%s", cb.data ? cb.data : "");
        ap_buf_free(&cb);
    }
    uint32_t nb;
    const ir_blocked *bl = ir_partition_blocked(p, &nb);
    printf("blocked propagation: %u\n", nb);
    for (uint32_t k = 0; k < nb && k < 50; k++) {
        ir_op *op = ir_pctx_op(c, bl[k].op);
        printf("  %s on '%s': %s at %u:%u: %s\n", kind_names[bl[k].kind], mesh->names[bl[k].axis],
               op ? op->name : "(identity op)", op ? op->src_line : 0, op ? op->src_col : 0, bl[k].why);
    }
    if (nb > 50)
        printf("  ... %u more (see --json)\n", nb - 50);
}

int cli_apply(int argc, char **argv)
{
    static const struct option opts[] = {{"mesh", required_argument, NULL, 'm'},   {"schedule", required_argument, NULL, 's'},
                                         {"view", required_argument, NULL, 'v'},   {"json", no_argument, NULL, 'j'},
                                         {"format", required_argument, NULL, 'f'}, {"func", required_argument, NULL, 'F'},
                                         {"import", no_argument, NULL, 'i'},       {"help", no_argument, NULL, 'h'},
                                         {"device", required_argument, NULL, 'd'}, {"overlap", required_argument, NULL, 'o'},
                                         {NULL, 0, NULL, 0}};
    const char *mesh_text = NULL, *sched_arg = NULL, *view = "spmd", *func_name = NULL, *device = "h100";
    double overlap = 0;
    bool json = false, import = false;
    ir_format fmt = IR_FMT_AUTO;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': mesh_text = optarg; break;
        case 's': sched_arg = optarg; break;
        case 'v': view = optarg; break;
        case 'j': json = true; break;
        case 'i': import = true; break;
        case 'F': func_name = optarg; break;
        case 'd': device = optarg; break;
        case 'o': {
            char *end;
            overlap = strtod(optarg, &end);
            if (!*optarg || *end || !(overlap >= 0 && overlap <= 1))
                return cli_usage_fail("apply", "--overlap wants a number from 0 to 1, not '%s'", optarg);
            break;
        }
        case 'f':
            if (!cli_parse_format(optarg, &fmt))
                return cli_usage_fail("apply", "unknown format '%s' (stablehlo, hlo or auto)", optarg);
            break;
        case 'h': apply_usage(stdout); return CLI_OK;
        default: return cli_bad_option("apply", ch, argv);
        }
    }
    if (optind != argc - 1) {
        cli_usage_fail("apply", optind < argc ? "expected one FILE, not %d" : "expected a FILE", argc - optind);
        return cli_usage_hint("apply", APPLY_SYNOPSIS);
    }
    if (strcmp(view, "spmd") && strcmp(view, "core") && strcmp(view, "shardings") && strcmp(view, "report") &&
        strcmp(view, "temporal"))
        return cli_usage_fail("apply", "unknown view '%s' (spmd, core, temporal, shardings or report)", view);
    if (!sched_arg && !import)
        return cli_usage_fail("apply", "--schedule (or --import) is required");
    const char *path = argv[optind];
    int rc;
    ir_partition *p = NULL;
    ir_lowered lw = {0};
    cli_schedule sched = {0};
    ap_error err;
    cost_device dev;
    cost_report final_cost;
    bool want_cost = json || !strcmp(view, "report");
    apply_ctx actx = {.dev = &dev};
    actx.copts.overlap = overlap;
    cli_partitioned st = {0};
    ap_error_clear(&err);
    if (want_cost && (rc = cli_device("apply", device, &dev)) != 0)
        return rc;
    if (sched_arg && (rc = cli_schedule_read("apply", "--schedule", sched_arg, &sched)) != 0)
        return rc;
    rc = cli_partition_open(&(cli_partition_args){.cmd = "apply", .path = path, .fmt = fmt, .func_name = func_name,
                                                  .mesh_text = mesh_text, .import = import},
                            &st);
    if (rc != 0)
        goto out;
    p = st.p;
    rc = CLI_FAIL;
    if (sched_arg && cli_schedule_apply("apply", &sched, p, want_cost ? after_tactic : NULL, &actx) != 0)
        goto out;
    if (strcmp(view, "core") != 0 && strcmp(view, "temporal") != 0 && ir_lower(p, &lw, &err) < 0) {
        cli_fail_err("apply", "SPMD lowering", &err);
        goto out;
    }
    if (want_cost && lw.module && cost_estimate(lw.module, &dev, &actx.copts, &final_cost, &err) < 0) {
        cli_fail_err("apply", "cost estimate", &err);
        goto out;
    }
    ap_buf b;
    ap_buf_init(&b);
    rc = 0;
    if (!strcmp(view, "core")) {
        ir_print_loops(p, &b);
        fwrite(b.data, 1, b.len, stdout);
    } else if (!strcmp(view, "temporal")) {
        ir_module *tm = NULL;
        if (ir_temporal(p, &tm, &err) < 0 || ir_verify(tm, &err) < 0 || ir_print(tm, &b, NULL) < 0) {
            rc = cli_fail_err("apply", "temporal view", &err);
        } else {
            fwrite(b.data, 1, b.len, stdout);
        }
        ir_module_free(tm);
    } else if (json && !strcmp(view, "shardings")) {
        rc = print_json(shardings_json(p, &lw));
    } else if (json || !strcmp(view, "report")) {
        if (json)
            rc = print_json(report_json(p, &lw, &final_cost, &actx));
        else
            print_report_text(p, &lw, path, &final_cost, &actx);
    } else if (!strcmp(view, "shardings")) {
        print_shardings(p, &lw, "");
        ap_buf sb;
        ap_buf_init(&sb);
        ir_partition_schedule(p, &sb);
        printf("\nschedule:\n%s", sb.data ? sb.data : "");
        ap_buf_free(&sb);
    } else {
        if (ir_print(lw.module, &b, NULL) < 0)
            rc = cli_fail("apply", "out of memory while printing");
        else
            fwrite(b.data, 1, b.len, stdout);
    }
    ap_buf_free(&b);
    if (fflush(stdout) != 0 && rc == 0)
        rc = cli_fail("apply", "cannot write the output");
out:
    free(actx.rows);
    cli_schedule_free(&sched);
    ir_lowered_free(&lw);
    cli_partitioned_free(&st);
    return rc;
}
