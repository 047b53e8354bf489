/*
 * cmd_stats.c - `autopart stats [--json]`: what autopartd has done since it
 * started (calls, cache hits, searches joined and run), and its store.
 */
#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "remote.h"

#define STATS_SYNOPSIS "autopart stats [--json] [options]"

static void stats_usage(FILE *f)
{
    fprintf(f, "usage: " STATS_SYNOPSIS "\n\nWhat autopartd has done since it started, and its store.\n\n"
               "  --json             as JSON\n");
    cli_remote_help(f);
    fprintf(f, "  (default server: $AUTOPART_SERVER, else 127.0.0.1:50051)\n"
               "  -h, --help         this help\n");
}

int cli_stats(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, CLI_REMOTE_OPTIONS, {NULL, 0, NULL, 0}};
    cli_remote remote = {0};
    bool json = false;
    int ch, rc;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = true; break;
        case 'h': stats_usage(stdout); return CLI_OK;
        default:
            if ((rc = cli_remote_option("stats", &remote, ch, optarg)) >= 0) {
                if (rc)
                    return rc;
                break;
            }
            return cli_bad_option("stats", ch, argv);
        }
    }
    if (optind != argc) {
        cli_usage_fail("stats", "unexpected argument '%s'", argv[optind]);
        return cli_usage_hint("stats", STATS_SYNOPSIS);
    }
    cli_remote_default(&remote);
    wire_conn *conn;
    if ((rc = cli_remote_open("stats", &remote, &conn)) != 0)
        return rc;
    Autopart__V1__StatsRequest req = AUTOPART__V1__STATS_REQUEST__INIT;
    Autopart__V1__StatsResponse *r;
    rc = cli_remote_call("stats", &remote, conn, "/autopart.v1.Partitioner/Stats", &req.base,
                         &autopart__v1__stats_response__descriptor, (ProtobufCMessage **)&r, NULL, NULL);
    wire_close(conn);
    if (rc)
        return rc;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "version", json_string(r->version));
        json_object_set_new(o, "owner", json_string(r->owner));
        json_object_set_new(o, "uptime_s", json_real(r->uptime_s));
        json_object_set_new(o, "requests", json_integer((json_int_t)r->requests));
        json_object_set_new(o, "errors", json_integer((json_int_t)r->errors));
        json_object_set_new(o, "cache_hits", json_integer((json_int_t)r->cache_hits));
        json_object_set_new(o, "joined", json_integer((json_int_t)r->joined));
        json_object_set_new(o, "started", json_integer((json_int_t)r->started));
        json_object_set_new(o, "running", json_integer(r->running));
        json_object_set_new(o, "queued", json_integer(r->queued));
        json_object_set_new(o, "max_concurrent", json_integer(r->max_concurrent));
        json_object_set_new(o, "active_calls", json_integer(r->active_calls));
        json_object_set_new(o, "stored", json_integer((json_int_t)r->stored));
        json_object_set_new(o, "stored_done", json_integer((json_int_t)r->stored_done));
        json_object_set_new(o, "stored_cache_hits", json_integer((json_int_t)r->stored_cache_hits));
        json_object_set_new(o, "rss_bytes", json_integer(r->rss_bytes));
        json_object_set_new(o, "db_bytes", json_integer(r->db_bytes));
        json_object_set_new(o, "memory_cache_entries", json_integer((json_int_t)r->memory_cache_entries));
        json_object_set_new(o, "memory_cache_bytes", json_integer(r->memory_cache_bytes));
        rc = cli_print_json("stats", o);
    } else {
        printf("%s at %s, up %.1f s, running as %s\n", r->version, remote.server, r->uptime_s, r->owner);
        printf("  calls:      %" PRIu64 " (%" PRIu64 " not OK), %u open now\n", r->requests, r->errors,
               r->active_calls);
        printf("  answers:    %" PRIu64 " from the store, %" PRIu64 " joined a running one, %" PRIu64 " run here\n",
               r->cache_hits, r->joined, r->started);
        printf("  now:        %u running (at most %u at once), %u queued\n", r->running, r->max_concurrent, r->queued);
        printf("  store:      %" PRIu64 " searches, %" PRIu64 " done, %" PRIu64 " cache hits in all, %.1f MiB\n",
               r->stored, r->stored_done, r->stored_cache_hits, (double)r->db_bytes / (1024.0 * 1024));
        printf("  memory:     %.1f MiB resident; %" PRIu64 " answers kept packed (%.1f MiB)\n",
               (double)r->rss_bytes / (1024.0 * 1024), r->memory_cache_entries,
               (double)r->memory_cache_bytes / (1024.0 * 1024));
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rc;
}
