/*
 * cmd_list.c - `autopart list [--status S] [--label L] [--module-hash H]
 * [--kind K] [--since T] [--until T] [--limit N] [--page TOKEN] [--all]
 * [--json]`: the searches (and Applies) autopartd has stored, newest first,
 * a page at a time.
 */
#define _XOPEN_SOURCE 700 /* strptime */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "remote.h"

#define LIST_SYNOPSIS "autopart list [--status S] [--label L] [--limit N] [--page TOKEN] [--all] [options]"

static void list_usage(FILE *f)
{
    fprintf(f,
            "usage: " LIST_SYNOPSIS "\n"
            "\n"
            "Lists what autopartd has stored, newest first.\n"
            "\n"
            "  --status S         queued, running, done, failed or cancelled\n"
            "  --kind K           search or apply\n"
            "  --label L          the client label (a job name) the request carried\n"
            "  --module-hash H    the module's hash, or a prefix of it (8 hex digits or more)\n"
            "  --since T          created at or after T: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SS (local\n"
            "                     time) or milliseconds since 1970\n"
            "  --until T          created before T\n"
            "  --limit N          rows per page (default 20, at most 1000)\n"
            "  --page TOKEN       the page after the one that printed TOKEN\n"
            "  --all              every page\n"
            "  --json             as JSON\n");
    cli_remote_help(f);
    fprintf(f, "  (default server: $AUTOPART_SERVER, else 127.0.0.1:50051)\n"
               "  -h, --help         this help\n");
}

/* T as unix milliseconds; false when malformed. */
static bool parse_when(const char *s, int64_t *ms)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || *end) {
        memset(&tm, 0, sizeof tm);
        end = strptime(s, "%Y-%m-%d", &tm);
    }
    if (end && !*end) {
        tm.tm_isdst = -1;
        time_t t = mktime(&tm);
        if (t == (time_t)-1)
            return false;
        *ms = (int64_t)t * 1000;
        return true;
    }
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (!s[0] || *e || errno || v <= 0)
        return false;
    *ms = v;
    return true;
}

static int status_of(const char *s)
{
    static const char *const names[] = {"queued", "running", "done", "failed", "cancelled"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i]))
            return i + 1;
    return -1;
}

/* Column widths of a listing: as wide as the widest value (nothing is cut);
 * the module, often a long path, is the last column. */
typedef struct list_widths {
    int label, mesh, device;
} list_widths;

static void widen(int *w, const char *s)
{
    int n = (int)strlen(s);
    if (n > *w)
        *w = n;
}

static void print_header(const list_widths *w)
{
    printf("%-8s %-9s %-6s %-19s %-*s %-*s %-*s %10s %9s %6s  %s\n", "ID", "STATUS", "KIND", "CREATED", w->label,
           "LABEL", w->mesh, "MESH", w->device, "DEVICE", "STEP ms", "PEAK GiB", "HITS", "MODULE");
}

static void print_row(const Autopart__V1__SearchSummary *s, const list_widths *w)
{
    char when[32], ms[32] = "-", gib[32] = "-";
    cli_format_time(s->created_unix_ms, when, sizeof when);
    if (s->best_runtime_s > 0)
        snprintf(ms, sizeof ms, "%.3f", s->best_runtime_s * 1e3);
    if (s->best_peak_memory_bytes > 0)
        snprintf(gib, sizeof gib, "%.3f", (double)s->best_peak_memory_bytes / (1024.0 * 1024 * 1024));
    printf("%-8s %-9s %-6s %-19s %-*s %-*s %-*s %10s %9s %6" PRIu64 "  %s\n", s->search_id, cli_status_name(s->status),
           cli_kind_name(s->kind), when, w->label, s->client_label[0] ? s->client_label : "-", w->mesh, s->mesh,
           w->device, s->device, ms, gib, s->cache_hits, s->module_name);
}

int cli_list(int argc, char **argv)
{
    static const struct option opts[] = {
        {"status", required_argument, NULL, 's'}, {"kind", required_argument, NULL, 'k'},
        {"label", required_argument, NULL, 'l'},  {"module-hash", required_argument, NULL, 'H'},
        {"since", required_argument, NULL, 'S'},  {"until", required_argument, NULL, 'U'},
        {"limit", required_argument, NULL, 'n'},  {"page", required_argument, NULL, 'p'},
        {"all", no_argument, NULL, 'a'},          {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},         CLI_REMOTE_OPTIONS,
        {NULL, 0, NULL, 0}};
    Autopart__V1__ListSearchesRequest req = AUTOPART__V1__LIST_SEARCHES_REQUEST__INIT;
    cli_remote remote = {0};
    bool all = false, json = false;
    int ch, rc;
    req.page_size = 20;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 's': {
            int st = status_of(optarg);
            if (st < 0)
                return cli_usage_fail("list", "--status: '%s' is not queued, running, done, failed or cancelled",
                                      optarg);
            req.status = (Autopart__V1__SearchStatus)st;
            break;
        }
        case 'k':
            if (strcmp(optarg, "search") && strcmp(optarg, "apply"))
                return cli_usage_fail("list", "--kind: 'search' or 'apply', not '%s'", optarg);
            req.kind = !strcmp(optarg, "search") ? AUTOPART__V1__RECORD_KIND__SEARCH : AUTOPART__V1__RECORD_KIND__APPLY;
            break;
        case 'l': req.client_label = optarg; break;
        case 'H': req.module_hash = optarg; break;
        case 'S':
        case 'U': {
            int64_t ms;
            if (!parse_when(optarg, &ms))
                return cli_usage_fail("list", "--%s: '%s' is not YYYY-MM-DD[THH:MM:SS] or milliseconds since 1970",
                                      ch == 'S' ? "since" : "until", optarg);
            if (ch == 'S')
                req.created_after_unix_ms = ms;
            else
                req.created_before_unix_ms = ms;
            break;
        }
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!optarg[0] || *end || v < 1 || v > 1000)
                return cli_usage_fail("list", "--limit wants a number from 1 to 1000, not '%s'", optarg);
            req.page_size = (int32_t)v;
            break;
        }
        case 'p': req.page_token = optarg; break;
        case 'a': all = true; break;
        case 'j': json = true; break;
        case 'h': list_usage(stdout); return CLI_OK;
        default:
            if ((rc = cli_remote_option("list", &remote, ch, optarg)) >= 0) {
                if (rc)
                    return rc;
                break;
            }
            return cli_bad_option("list", ch, argv);
        }
    }
    if (optind != argc) {
        cli_usage_fail("list", "unexpected argument '%s'", argv[optind]);
        return cli_usage_hint("list", LIST_SYNOPSIS);
    }
    cli_remote_default(&remote);
    wire_conn *conn;
    if ((rc = cli_remote_open("list", &remote, &conn)) != 0)
        return rc;
    json_t *arr = json ? json_array() : NULL;
    char *token = NULL;
    /* the pages, kept until printed: the columns fit the widest value */
    Autopart__V1__ListSearchesResponse **pages = NULL;
    size_t n_pages = 0, rows = 0;
    list_widths w = {5, 4, 6};
    for (;;) {
        Autopart__V1__ListSearchesResponse *resp;
        rc = cli_remote_call("list", &remote, conn, "/autopart.v1.Partitioner/ListSearches", &req.base,
                             &autopart__v1__list_searches_response__descriptor, (ProtobufCMessage **)&resp, NULL, NULL);
        if (rc)
            break;
        Autopart__V1__ListSearchesResponse **more = ap_realloc(pages, (n_pages + 1) * sizeof *pages);
        if (!more) {
            protobuf_c_message_free_unpacked(&resp->base, NULL);
            rc = cli_fail("list", "out of memory");
            break;
        }
        pages = more;
        pages[n_pages++] = resp;
        for (size_t i = 0; i < resp->n_searches; i++) {
            const Autopart__V1__SearchSummary *x = resp->searches[i];
            if (json)
                json_array_append_new(arr, cli_summary_json(x));
            widen(&w.label, x->client_label);
            widen(&w.mesh, x->mesh);
            widen(&w.device, x->device);
            rows++;
        }
        ap_free(token);
        token = ap_strdup(resp->next_page_token);
        if (!token || !token[0] || !all)
            break;
        req.page_token = token;
    }
    if (rc == 0 && !json && rows) {
        print_header(&w);
        for (size_t k = 0; k < n_pages; k++)
            for (size_t i = 0; i < pages[k]->n_searches; i++)
                print_row(pages[k]->searches[i], &w);
    }
    for (size_t k = 0; k < n_pages; k++)
        protobuf_c_message_free_unpacked(&pages[k]->base, NULL);
    ap_free(pages);
    if (rc == 0) {
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "searches", arr);
            json_object_set_new(o, "next_page_token", json_string(token ? token : ""));
            arr = NULL;
            rc = cli_print_json("list", o);
        } else {
            if (!rows)
                printf("no searches%s\n", req.page_token[0] ? " on this page" : "");
            if (token && token[0])
                fprintf(stderr, "more: autopart list --page %s (or --all)\n", token);
            if (fflush(stdout) != 0)
                rc = cli_fail("list", "cannot write the output");
        }
    }
    json_decref(arr);
    ap_free(token);
    wire_close(conn);
    return rc;
}
