/*
 * cmd_show.c - `autopart show ID [--module] [--json]`: one search (or
 * Apply) from autopartd's store: what was asked, by whom, how it went (the
 * best cost over time), and its answer.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#include "remote.h"

#define SHOW_SYNOPSIS "autopart show ID [--module] [--json] [--verbose] [options]"

static void show_usage(FILE *f)
{
    fprintf(f,
            "usage: " SHOW_SYNOPSIS "\n"
            "\n"
            "Shows one stored search: the request's summary, its progress, the best schedule\n"
            "and, once done, the shardings and the estimated cost.\n"
            "\n"
            "  --module           print only the device-local module of the answer\n"
            "  --json             as JSON (the answer without its module text)\n"
            "  --verbose          the shardings one row per argument, the schedule one action\n"
            "                     per line (by default folded as `autopart search` prints them)\n");
    cli_remote_help(f);
    fprintf(f, "  (default server: $AUTOPART_SERVER, else 127.0.0.1:50051)\n"
               "  -h, --help         this help\n");
}

/* What the answer's fit is held to, in bytes (< 0: no limit); an answer
 * stored before the limit was carried (0) was held to the device's HBM. */
static double limit_of(const Autopart__V1__CostSummary *c)
{
    return c->no_memory_limit ? -1 : c->memory_limit_bytes > 0 ? c->memory_limit_bytes : c->hbm_bytes;
}

static json_t *result_json(const Autopart__V1__PartitionResult *r)
{
    json_t *o = json_object(), *sh = json_array(), *coll = json_object();
    json_object_set_new(o, "schedule", json_string(r->schedule));
    for (size_t i = 0; i < r->n_shardings; i++) {
        const Autopart__V1__Sharding *s = r->shardings[i];
        json_t *x = json_object(), *dims = json_array();
        for (size_t d = 0; s->spec && d < s->spec->n_dims; d++) {
            const Autopart__V1__DimSharding *dm = s->spec->dims[d];
            if (dm->n_axes == 0) {
                json_array_append_new(dims, json_null());
            } else if (dm->n_axes == 1) {
                json_array_append_new(dims, json_string(dm->axes[0]));
            } else {
                json_t *t = json_array();
                for (size_t k = 0; k < dm->n_axes; k++)
                    json_array_append_new(t, json_string(dm->axes[k]));
                json_array_append_new(dims, t);
            }
        }
        json_object_set_new(x, "kind", json_string(s->kind == AUTOPART__V1__SHARDING__KIND__RESULT ? "result" : "argument"));
        json_object_set_new(x, "index", json_integer(s->index));
        json_object_set_new(x, "name", json_string(s->name));
        json_object_set_new(x, "type", json_string(s->type));
        json_object_set_new(x, "spec", dims);
        json_object_set_new(x, "spec_text", json_string(s->spec_text));
        json_array_append_new(sh, x);
    }
    json_object_set_new(o, "shardings", sh);
    for (size_t i = 0; i < r->n_collectives; i++)
        json_object_set_new(coll, r->collectives[i]->kind, json_integer((json_int_t)r->collectives[i]->count));
    json_object_set_new(o, "collectives", coll);
    if (r->cost) {
        json_t *c = json_object();
        json_object_set_new(c, "device", json_string(r->cost->device));
        json_object_set_new(c, "runtime_s", json_real(r->cost->runtime_s));
        json_object_set_new(c, "peak_memory_bytes", json_integer(r->cost->peak_memory_bytes));
        json_object_set_new(c, "fits", json_boolean(r->cost->fits));
        double limit = limit_of(r->cost);
        json_object_set_new(c, "memory_limit_bytes", limit < 0 ? json_null() : json_real(limit));
        json_object_set_new(c, "hbm_bytes", json_real(r->cost->hbm_bytes));
        json_object_set_new(o, "cost", c);
    }
    return o;
}

static void print_record(const Autopart__V1__SearchRecord *rec, bool verbose)
{
    const Autopart__V1__SearchSummary *s = rec->summary;
    char c[32], st[32], fi[32];
    cli_format_time(s->created_unix_ms, c, sizeof c);
    cli_format_time(s->started_unix_ms, st, sizeof st);
    cli_format_time(s->finished_unix_ms, fi, sizeof fi);
    printf("search %s: %s, %s\n", s->search_id, cli_kind_name(s->kind), cli_status_name(s->status));
    printf("  module:     %s (hash %.16s)\n", s->module_name, s->module_hash);
    printf("  client:     %s\n", s->client_label[0] ? s->client_label : "-");
    printf("  mesh:       %s    device: %s", s->mesh, s->device);
    if (s->n_axes) {
        printf("    axes: ");
        for (size_t i = 0; i < s->n_axes; i++)
            printf(i ? ",%s" : "%s", s->axes[i]);
    }
    printf("\n  created:    %s    started: %s    finished: %s", c, st, fi);
    if (s->finished_unix_ms && s->started_unix_ms)
        printf(" (%.3f s)", (double)(s->finished_unix_ms - s->started_unix_ms) / 1e3);
    printf("\n  attempts:   %u    cache hits: %" PRIu64 "%s%s\n", s->attempts, s->cache_hits,
           s->owner[0] ? "    run by: " : "", s->owner);
    if (s->best_runtime_s > 0)
        printf("  best:       %.3f ms per step, %.3f GiB peak per device%s\n", s->best_runtime_s * 1e3,
               (double)s->best_peak_memory_bytes / (1024.0 * 1024 * 1024),
               s->episodes ? "" : "");
    if (s->episodes)
        printf("  episodes:   %" PRId64 "\n", s->episodes);
    if (s->error[0])
        printf("  error:      %s\n", s->error);
    printf("  key:        %s\n", s->key);
    if (rec->n_history) {
        printf("  progress:   %zu points\n", rec->n_history);
        size_t from = rec->n_history > 10 ? rec->n_history - 10 : 0;
        for (size_t i = from; i < rec->n_history; i++) {
            const Autopart__V1__ProgressPoint *p = rec->history[i];
            char t[32];
            cli_format_time(p->unix_ms, t, sizeof t);
            printf("    %s  %10" PRId64 " episodes  %12.3f ms  %10.3f GiB\n", t, p->episodes, p->best_runtime_s * 1e3,
                   (double)p->best_peak_memory_bytes / (1024.0 * 1024 * 1024));
        }
    }
    const Autopart__V1__SearchStats *ss = rec->result ? rec->result->search : NULL;
    if (ss)
        printf("  search:     %.3f ms per step at the start, best found at episode %" PRId64 " of %" PRId64
               " (%.2f s), stopped by %s\n",
               ss->start_runtime_s * 1e3, ss->best_episode, ss->episodes, ss->wall_s, ss->stopped_by);
    const Autopart__V1__PartitionResult *r = rec->result;
    cli_sharding *rows = r && r->n_shardings ? ap_calloc(r->n_shardings, sizeof *rows) : NULL;
    size_t n = 0, n_args = 0;
    for (size_t i = 0; rows && i < r->n_shardings; i++) {
        const Autopart__V1__Sharding *sh = r->shardings[i];
        bool arg = sh->kind != AUTOPART__V1__SHARDING__KIND__RESULT;
        rows[n++] = (cli_sharding){arg ? "argument" : "result", sh->name, sh->type, sh->spec_text};
        n_args += arg && n_args == i;
    }
    if (r) {
        printf("shardings:\n");
        cli_print_shardings(stdout, rows, n, "  ", verbose);
        if (r->cost) {
            /* the verdict as the cost report words it, limit named */
            cost_report fit = {.peak_memory_bytes = r->cost->peak_memory_bytes, .hbm_bytes = r->cost->hbm_bytes,
                               .memory_limit_bytes = limit_of(r->cost), .fits = r->cost->fits};
            ap_buf b;
            ap_buf_init(&b);
            cost_fit_text(&fit, &b);
            printf("cost on %s: %.3f ms per step, %.3f GiB peak per device, %s\n", r->cost->device,
                   r->cost->runtime_s * 1e3, (double)r->cost->peak_memory_bytes / (1024.0 * 1024 * 1024),
                   b.data && !b.oom ? b.data : "?");
            ap_buf_free(&b);
        }
        printf("schedule:\n");
        cli_print_schedule(stdout, r->schedule, rows, n_args, verbose);
    } else if (rec->best_schedule[0]) {
        printf("best schedule so far:\n");
        cli_print_schedule(stdout, rec->best_schedule, NULL, 0, verbose);
    }
    ap_free(rows);
}

int cli_show(int argc, char **argv)
{
    static const struct option opts[] = {{"module", no_argument, NULL, 'm'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"verbose", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_REMOTE_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    cli_remote remote = {0};
    bool json = false, module = false, verbose = false;
    int ch, rc;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': module = true; break;
        case 'j': json = true; break;
        case 'V': verbose = true; break;
        case 'h': show_usage(stdout); return CLI_OK;
        default:
            if ((rc = cli_remote_option("show", &remote, ch, optarg)) >= 0) {
                if (rc)
                    return rc;
                break;
            }
            return cli_bad_option("show", ch, argv);
        }
    }
    if (optind != argc - 1) {
        cli_usage_fail("show", optind < argc ? "expected one ID" : "expected a search ID");
        return cli_usage_hint("show", SHOW_SYNOPSIS);
    }
    cli_remote_default(&remote);
    wire_conn *conn;
    if ((rc = cli_remote_open("show", &remote, &conn)) != 0)
        return rc;
    Autopart__V1__GetSearchRequest req = AUTOPART__V1__GET_SEARCH_REQUEST__INIT;
    Autopart__V1__SearchRecord *rec;
    req.search_id = argv[optind];
    req.include_result = true;
    rc = cli_remote_call("show", &remote, conn, "/autopart.v1.Partitioner/GetSearch", &req.base,
                         &autopart__v1__search_record__descriptor, (ProtobufCMessage **)&rec, NULL, NULL);
    wire_close(conn);
    if (rc)
        return rc;
    if (module) {
        if (!rec->result)
            rc = cli_fail("show", "search %s has no answer yet (%s)", argv[optind],
                          cli_status_name(rec->summary ? rec->summary->status : 0));
        else
            fputs(rec->result->module, stdout);
    } else if (json) {
        json_t *o = json_object(), *h = json_array();
        json_object_set_new(o, "summary", rec->summary ? cli_summary_json(rec->summary) : json_null());
        for (size_t i = 0; i < rec->n_history; i++) {
            json_t *p = json_object();
            json_object_set_new(p, "unix_ms", json_integer(rec->history[i]->unix_ms));
            json_object_set_new(p, "episodes", json_integer(rec->history[i]->episodes));
            json_object_set_new(p, "best_runtime_s", json_real(rec->history[i]->best_runtime_s));
            json_object_set_new(p, "best_peak_memory_bytes", json_integer(rec->history[i]->best_peak_memory_bytes));
            json_array_append_new(h, p);
        }
        json_object_set_new(o, "history", h);
        json_object_set_new(o, "best_schedule", json_string(rec->best_schedule));
        json_object_set_new(o, "result", rec->result ? result_json(rec->result) : json_null());
        rc = cli_print_json("show", o);
    } else if (rec->summary) {
        print_record(rec, verbose);
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = cli_fail("show", "cannot write the output");
    protobuf_c_message_free_unpacked(&rec->base, NULL);
    return rc;
}
