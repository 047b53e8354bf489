/*
 * metrics.c - autopartd's Prometheus figures (metrics.h): lock-free
 * updates from the gRPC thread, the loop, the workers and the store's
 * callers; one text rendering per scrape.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "rpc.h"

/* Bounds: calls and store operations from 100 us to 60 s; queue waits and
 * searches from 1 ms to an hour; search speed in episodes per second. */
static const double call_bounds[] = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,    0.25,   0.5,   1,      2.5,   5,    10,    60};
static const double wait_bounds[] = {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 3600};
static const double eps_bounds[] = {10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000};

void srv_hist_init(srv_hist *h, const double *bounds, int n)
{
    h->bounds = bounds;
    h->n = n < SRV_HIST_MAX ? n : SRV_HIST_MAX;
    for (int i = 0; i <= SRV_HIST_MAX; i++)
        atomic_init(&h->bucket[i], 0);
    atomic_init(&h->sum_micro, 0);
}

void srv_hist_observe(srv_hist *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    if (v > 0)
        atomic_fetch_add_explicit(&h->sum_micro, (uint_fast64_t)(v * 1e6 + 0.5), memory_order_relaxed);
}

void srv_metrics_init(srv_metrics *m, const char *const *paths, int n, int64_t start_us)
{
    memset(m, 0, sizeof *m);
    m->start_us = start_us;
    for (int i = 0; i < SRV_METRIC_METHODS; i++) {
        snprintf(m->method_service[i], sizeof m->method_service[i], "unknown");
        snprintf(m->method_name[i], sizeof m->method_name[i], "unknown");
        srv_hist_init(&m->handling[i], call_bounds, (int)AP_ARRAY_LEN(call_bounds));
    }
    for (int i = 0; i < n && i < SRV_METRIC_METHODS - 1; i++) { /* "/pkg.Service/Method" */
        const char *p = paths[i][0] == '/' ? paths[i] + 1 : paths[i];
        const char *slash = strchr(p, '/');
        snprintf(m->method_service[i], sizeof m->method_service[i], "%.*s", slash ? (int)(slash - p) : 0, p);
        snprintf(m->method_name[i], sizeof m->method_name[i], "%s", slash ? slash + 1 : p);
    }
    for (int i = 0; i < SRV_METRIC_POOLS; i++)
        srv_hist_init(&m->queue_wait[i], wait_bounds, (int)AP_ARRAY_LEN(wait_bounds));
    srv_hist_init(&m->search_seconds, wait_bounds, (int)AP_ARRAY_LEN(wait_bounds));
    srv_hist_init(&m->search_eps, eps_bounds, (int)AP_ARRAY_LEN(eps_bounds));
    srv_hist_init(&m->store_seconds, call_bounds, (int)AP_ARRAY_LEN(call_bounds));
    atomic_init(&m->store_up, 1);
}

void srv_metrics_call(srv_metrics *m, int method, int code, double seconds)
{
    if (method < 0 || method >= SRV_METRIC_METHODS - 1)
        method = SRV_METRIC_METHODS - 1;
    if (code < 0 || code >= SRV_METRIC_CODES)
        code = RPC_UNKNOWN;
    atomic_fetch_add_explicit(&m->handled[method][code], 1, memory_order_relaxed);
    srv_hist_observe(&m->handling[method], seconds);
}

/* ============================================================== render */

static void head(ap_buf *b, const char *name, const char *type, const char *help)
{
    ap_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's lines; labels: "" or `a="x",` (a trailing comma). */
static void hist_lines(ap_buf *b, const char *name, const char *labels, srv_hist *h)
{
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        if (i < h->n)
            ap_buf_printf(b, "%s_bucket{%sle=\"%g\"} %" PRIu64 "\n", name, labels, h->bounds[i], cum);
        else
            ap_buf_printf(b, "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, cum);
    }
    size_t n = strlen(labels);
    char bare[256];
    snprintf(bare, sizeof bare, "%.*s", n ? (int)n - 1 : 0, labels); /* without the comma */
    const char *lo = n ? "{" : "", *lc = n ? "}" : "";
    ap_buf_printf(b, "%s_sum%s%s%s %.6f\n", name, lo, bare, lc,
                  (double)atomic_load_explicit(&h->sum_micro, memory_order_relaxed) / 1e6);
    ap_buf_printf(b, "%s_count%s%s%s %" PRIu64 "\n", name, lo, bare, lc, cum);
}

int64_t srv_rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

void srv_metrics_render(srv_metrics *m, const char *version, ap_buf *b)
{
    static const char *const pools[SRV_METRIC_POOLS] = {"intake", "search"};
    head(b, "autopartd_build_info", "gauge", "The daemon's version (always 1).");
    ap_buf_printf(b, "autopartd_build_info{version=\"%s\"} 1\n", version);
    head(b, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.");
    ap_buf_printf(b, "process_start_time_seconds %.3f\n", (double)m->start_us / 1e6);
    head(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    ap_buf_printf(b, "process_resident_memory_bytes %" PRId64 "\n", srv_rss_bytes());

    head(b, "autopartd_grpc_server_handled_total", "counter",
         "gRPC calls answered, by method and status (every method with OK, other statuses once seen).");
    for (int i = 0; i < SRV_METRIC_METHODS; i++)
        for (int c = 0; c < SRV_METRIC_CODES; c++) {
            uint64_t v = atomic_load_explicit(&m->handled[i][c], memory_order_relaxed);
            bool known = strcmp(m->method_name[i], "unknown") != 0;
            if (v || (c == RPC_OK && known))
                ap_buf_printf(b,
                              "autopartd_grpc_server_handled_total{grpc_service=\"%s\",grpc_method=\"%s\","
                              "grpc_code=\"%s\"} %" PRIu64 "\n",
                              m->method_service[i], m->method_name[i], ap_grpc_code_name(c), v);
        }
    head(b, "autopartd_grpc_server_handling_seconds", "histogram",
         "Time from a call's arrival to its status (a Search: its whole stream).");
    for (int i = 0; i < SRV_METRIC_METHODS; i++) {
        uint64_t calls = 0;
        for (int c = 0; c < SRV_METRIC_CODES; c++)
            calls += atomic_load_explicit(&m->handled[i][c], memory_order_relaxed);
        if (!calls && !strcmp(m->method_name[i], "unknown"))
            continue;
        char labels[256];
        snprintf(labels, sizeof labels, "grpc_service=\"%s\",grpc_method=\"%s\",", m->method_service[i],
                 m->method_name[i]);
        hist_lines(b, "autopartd_grpc_server_handling_seconds", labels, &m->handling[i]);
    }

    head(b, "autopartd_workers", "gauge", "Worker threads of a pool.");
    for (int i = 0; i < SRV_METRIC_POOLS; i++)
        ap_buf_printf(b, "autopartd_workers{pool=\"%s\"} %" PRIdFAST64 "\n", pools[i], atomic_load(&m->workers[i]));
    head(b, "autopartd_workers_busy", "gauge", "Workers of a pool running a task now.");
    for (int i = 0; i < SRV_METRIC_POOLS; i++)
        ap_buf_printf(b, "autopartd_workers_busy{pool=\"%s\"} %" PRIdFAST64 "\n", pools[i], atomic_load(&m->busy[i]));
    head(b, "autopartd_queue_depth", "gauge", "Tasks waiting for a worker of a pool.");
    for (int i = 0; i < SRV_METRIC_POOLS; i++)
        ap_buf_printf(b, "autopartd_queue_depth{pool=\"%s\"} %" PRIdFAST64 "\n", pools[i], atomic_load(&m->queued[i]));
    head(b, "autopartd_queue_wait_seconds", "histogram", "Time a task waited for a worker of a pool.");
    for (int i = 0; i < SRV_METRIC_POOLS; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "pool=\"%s\",", pools[i]);
        hist_lines(b, "autopartd_queue_wait_seconds", labels, &m->queue_wait[i]);
    }

    head(b, "autopartd_searches_running", "gauge", "Searches running in this daemon now.");
    ap_buf_printf(b, "autopartd_searches_running %" PRIdFAST64 "\n", atomic_load(&m->searches_running));
    head(b, "autopartd_searches_total", "counter", "Searches this daemon ran to an end, by outcome.");
    ap_buf_printf(b, "autopartd_searches_total{outcome=\"done\"} %" PRIuFAST64 "\n", atomic_load(&m->searches_done));
    ap_buf_printf(b, "autopartd_searches_total{outcome=\"failed\"} %" PRIuFAST64 "\n",
                  atomic_load(&m->searches_failed));
    head(b, "autopartd_search_duration_seconds", "histogram", "Wall time of a finished search run here.");
    hist_lines(b, "autopartd_search_duration_seconds", "", &m->search_seconds);
    head(b, "autopartd_search_episodes_per_second", "histogram", "Speed of a finished search run here.");
    hist_lines(b, "autopartd_search_episodes_per_second", "", &m->search_eps);

    head(b, "autopartd_cache_hits_total", "counter", "Answers given from before, by where they came from.");
    ap_buf_printf(b, "autopartd_cache_hits_total{source=\"memory\"} %" PRIuFAST64 "\n", atomic_load(&m->hits_memory));
    ap_buf_printf(b, "autopartd_cache_hits_total{source=\"store\"} %" PRIuFAST64 "\n", atomic_load(&m->hits_store));
    head(b, "autopartd_joins_total", "counter", "Calls that joined a search or Apply already under way.");
    ap_buf_printf(b, "autopartd_joins_total %" PRIuFAST64 "\n", atomic_load(&m->joins));
    head(b, "autopartd_takeovers_total", "counter",
         "Rows this daemon took from the store's queue: orphaned by a dead daemon, or queued for anyone.");
    ap_buf_printf(b, "autopartd_takeovers_total %" PRIuFAST64 "\n", atomic_load(&m->taken_over));

    head(b, "autopartd_store_operation_seconds", "histogram", "Time of one operation on the store.");
    hist_lines(b, "autopartd_store_operation_seconds", "", &m->store_seconds);
    head(b, "autopartd_store_errors_total", "counter",
         "Store operations that failed (unreachable, locked past the busy timeout, I/O).");
    ap_buf_printf(b, "autopartd_store_errors_total %" PRIuFAST64 "\n", atomic_load(&m->store_errors));
    head(b, "autopartd_store_up", "gauge", "Whether the last store operation reached the store.");
    ap_buf_printf(b, "autopartd_store_up %d\n", atomic_load(&m->store_up));
}
