/*
 * remote_search.c - `autopart search --server HOST:PORT`: the search run by
 * autopartd.  The request is the command line's; the daemon streams
 * whether it starts the search, joins one running or answers from its
 * store, then progress (one updating line on stderr when it is a
 * terminal), then the result, printed as the in-process search prints
 * its own (--json: the same JSON).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "remote.h"

static void progress_line(const Autopart__V1__Progress *p)
{
    char peak[32], line[256];
    ap_format_bytes((double)p->best_peak_memory_bytes, peak, sizeof peak);
    int n = snprintf(line, sizeof line, "search: %lld episodes  %.0f/s  tree %lld  best %.4g s (start %.4g s)  peak %s%s",
                     (long long)p->episodes, p->episodes_per_s, (long long)p->tree_size, p->best_runtime_s,
                     p->start_runtime_s, peak, p->best_fits ? "" : " (over the limit)");
    fprintf(stderr, "\r%-*.*s", 100, n > 0 && n < 100 ? n : 100, line);
    fflush(stderr);
}

/* The result as `autopart search` prints it, from the answer. */
static int print_text(const Autopart__V1__PartitionResult *r, json_t *rj, bool verbose)
{
    json_t *dec = json_object_get(rj, "decisions");
    const Autopart__V1__SearchStats *s = r->search;
    cli_sharding *rows = ap_calloc(r->n_shardings ? r->n_shardings : 1, sizeof *rows);
    if (!rows)
        return cli_fail("search", "out of memory writing the result");
    size_t n = 0;
    ap_buf mesh;
    ap_buf_init(&mesh);
    if (s && s->n_meshes && r->mesh)
        for (size_t i = 0; i < r->mesh->n_axes; i++)
            ap_buf_printf(&mesh, "%s%s=%lld", i ? "," : "", r->mesh->axes[i]->name,
                          (long long)r->mesh->axes[i]->size);
    for (size_t i = 0; i < r->n_shardings; i++)
        if (r->shardings[i]->kind == AUTOPART__V1__SHARDING__KIND__ARGUMENT)
            rows[n++] = (cli_sharding){NULL, r->shardings[i]->name, r->shardings[i]->type, r->shardings[i]->spec_text};
    cost_report cr;
    cost_report_from_json(json_object_get(rj, "cost"), &cr);
    char *ct = cli_cost_text(&cr, verbose);
    char *et = cli_explanation_text(json_object_get(rj, "explanation"), r->explanation_text, verbose);
    cli_search_text t = {.decisions_before = json_integer_value(json_object_get(dec, "before")),
                         .units = json_integer_value(json_object_get(dec, "units")),
                         .decisions_after = json_integer_value(json_object_get(dec, "after")),
                         .have_stats = s != NULL,
                         .runtime_s = r->cost ? r->cost->runtime_s : 0,
                         .start_runtime_s = s ? s->start_runtime_s : 0,
                         .none_fits = s && s->none_fits,
                         .mesh = mesh.data,
                         .n_meshes = s ? (long long)s->n_meshes : 0,
                         .actions = json_string_value(json_object_get(rj, "actions")),
                         .schedule = r->schedule,
                         .cost_text = ct,
                         .explanation = et,
                         .args = rows,
                         .n_args = n};
    if (s) {
        t.episodes = s->episodes;
        t.best_episode = s->best_episode;
        t.tree_nodes = s->tree_nodes;
        t.wall_s = s->wall_s;
        t.episodes_per_s = s->episodes_per_s;
        t.stopped_by = s->stopped_by;
    }
    cli_print_search(stdout, &t, verbose);
    ap_free(ct);
    ap_free(et);
    ap_free(rows);
    ap_buf_free(&mesh);
    return CLI_OK;
}

int cli_search_remote(const cli_remote *remote, const cli_search_request *a)
{
    int rc;
    char *text;
    size_t len;
    ap_error err;
    if (a->device && strstr(a->device, ".json"))
        return cli_usage_fail("search", "--device FILE.json is not sent to autopartd: name a registry device");
    if (ap_read_file(a->path, &text, &len, &err) < 0)
        return cli_fail("search", "%s", err.msg);
    const char *name = strcmp(a->path, "-") == 0 ? "<stdin>" : a->path;
    cli_wire_target t;
    Autopart__V1__SearchRequest req = AUTOPART__V1__SEARCH_REQUEST__INIT;
    char *axes_buf = NULL, *ax_names[IR_MAX_AXES], *names_buf = NULL, *dev_names[IR_MAX_AXES];
    wire_conn *conn = NULL;
    wire_stream *ws = NULL;
    Autopart__V1__PartitionResult *res = NULL;
    json_t *rj = NULL;
    uint8_t *buf = NULL;
    bool tty = isatty(STDERR_FILENO) != 0, line = false;
    if ((rc = cli_wire_target_init(&t, "search", text, name, a->fmt, a->func_name, a->mesh_text, a->device)) != 0)
        goto out;
    if (a->axes_text) {
        axes_buf = ap_strdup(a->axes_text);
        for (char *p = strtok(axes_buf, ","); p && req.n_axes < IR_MAX_AXES; p = strtok(NULL, ","))
            ax_names[req.n_axes++] = p;
        req.axes = ax_names;
    } /* none: every axis of the mesh, as in-process */
    if (a->axes_names) {
        names_buf = ap_strdup(a->axes_names);
        for (char *p = strtok(names_buf, ","); p && req.n_axes_names < IR_MAX_AXES; p = strtok(NULL, ","))
            dev_names[req.n_axes_names++] = p;
        req.axes_names = dev_names;
    }
    req.devices = a->devices;
    req.module = &t.mod;
    req.mesh = &t.wmesh;
    req.device = &t.dev;
    req.manual_schedule = (char *)(a->manual ? a->manual : "");
    req.import_shardings = a->import;
    if (a->memory_limit < 0)
        req.no_memory_limit = true;
    else
        req.memory_limit_bytes = (int64_t)a->memory_limit;
    req.memory_margin = a->memory_margin;
    req.episodes = a->episodes;
    req.time_limit_s = a->time_limit_s;
    req.patience_episodes = a->patience;
    req.threads = a->threads;
    req.seed = a->seed;
    req.batch = a->batch;
    req.hints = a->hints ? (char *)a->hints : (char *)"";
    req.overlap = a->overlap;
    req.framework = cli_wire_framework(a->framework);
    req.client_label = (char *)"autopart-cli";
    if ((rc = cli_remote_open("search", remote, &conn)) != 0)
        goto out;
    len = autopart__v1__search_request__get_packed_size(&req);
    buf = ap_malloc(len ? len : 1);
    if (!buf) {
        rc = cli_fail("search", "out of memory");
        goto out;
    }
    autopart__v1__search_request__pack(&req, buf);
    wire_status st;
    rc = CLI_FAIL;
    if (wire_stream_open(conn, "/autopart.v1.Partitioner/Search", buf, len, &ws, &st) < 0) {
        cli_remote_fail("search", remote, &st, name, a->manual_name, a->hints_name);
        goto out;
    }
    for (;;) {
        void *msg;
        size_t ml;
        int got = wire_stream_next(ws, &msg, &ml, &st);
        if (got < 0 || (got == 0 && st.code != WIRE_OK)) {
            if (line)
                fputc('\n', stderr);
            cli_remote_fail("search", remote, &st, name, a->manual_name, a->hints_name);
            goto out;
        }
        if (got == 0)
            break;
        Autopart__V1__SearchEvent *ev = autopart__v1__search_event__unpack(NULL, ml, msg);
        ap_free(msg);
        if (!ev) {
            cli_fail("search", "autopartd at %s sent an event that is not a SearchEvent", remote->server);
            goto out;
        }
        if (ev->event_case == AUTOPART__V1__SEARCH_EVENT__EVENT_ACCEPTED) {
            fprintf(stderr, "autopart search: search %s at %s (%s)\n", ev->accepted->search_id, remote->server,
                    cli_origin_name(ev->accepted->origin));
        } else if (ev->event_case == AUTOPART__V1__SEARCH_EVENT__EVENT_PROGRESS && tty) {
            progress_line(ev->progress);
            line = true;
        } else if (ev->event_case == AUTOPART__V1__SEARCH_EVENT__EVENT_RESULT && !res) {
            res = ev->result;
            ev->result = NULL;
            ev->event_case = AUTOPART__V1__SEARCH_EVENT__EVENT__NOT_SET;
        }
        autopart__v1__search_event__free_unpacked(ev, NULL);
    }
    if (line)
        fputc('\n', stderr);
    if (!res) {
        rc = cli_fail("search", "autopartd at %s ended the search without a result", remote->server);
        goto out;
    }
    cli_remote_notes(name, res->report_json);
    json_error_t jerr;
    rj = json_loads(res->result_json, 0, &jerr);
    if (!rj) {
        rc = cli_fail("search", "autopartd's result is not JSON: %s", jerr.text);
        goto out;
    }
    rc = CLI_OK;
    if (a->json)
        puts(res->result_json);
    else
        rc = print_text(res, rj, a->verbose);
    if (fflush(stdout) != 0)
        rc = cli_fail("search", "cannot write the output");
out:
    json_decref(rj);
    if (res)
        autopart__v1__partition_result__free_unpacked(res, NULL);
    wire_stream_close(ws);
    wire_close(conn);
    ap_free(buf);
    ap_free(axes_buf);
    ap_free(names_buf);
    ap_free(text);
    return rc;
}
