/*
 * metrics.h - autopartd's figures for Prometheus: counters, gauges and
 * histograms that any thread updates (atomics, no lock), and their text
 * exposition format (version 0.0.4), served at /metrics on the dashboard's
 * port (http.c) under the API's token rules.
 *
 * Names follow Prometheus's conventions: seconds and bytes, _total for
 * counters, the gRPC ones as grpc-ecosystem's interceptors name them
 * (grpc_service, grpc_method, grpc_code), process_resident_memory_bytes.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "ap.h"

#define SRV_HIST_MAX 16

/* A histogram with fixed upper bounds (the +Inf bucket implied).  The sum
 * is kept in millionths, as an integer. */
typedef struct srv_hist {
    const double *bounds;
    int n;
    atomic_uint_fast64_t bucket[SRV_HIST_MAX + 1]; /* not cumulative; [n]: above the last bound */
    atomic_uint_fast64_t sum_micro;
} srv_hist;

void srv_hist_init(srv_hist *h, const double *bounds, int n);
void srv_hist_observe(srv_hist *h, double v);

enum { SRV_METRIC_METHODS = 9, SRV_METRIC_POOLS = 2, SRV_METRIC_CODES = 17 };

typedef struct srv_metrics {
    /* gRPC calls by method (the last: a method the daemon does not serve)
     * and status, and their time from arrival to status */
    char method_service[SRV_METRIC_METHODS][64], method_name[SRV_METRIC_METHODS][64];
    atomic_uint_fast64_t handled[SRV_METRIC_METHODS][SRV_METRIC_CODES];
    srv_hist handling[SRV_METRIC_METHODS];
    /* the pools (intake: reading requests and Apply; search) */
    atomic_int_fast64_t workers[SRV_METRIC_POOLS], busy[SRV_METRIC_POOLS], queued[SRV_METRIC_POOLS];
    srv_hist queue_wait[SRV_METRIC_POOLS];
    atomic_int_fast64_t searches_running;
    srv_hist search_seconds, search_eps;
    atomic_uint_fast64_t searches_done, searches_failed;
    /* answers not computed here */
    atomic_uint_fast64_t hits_memory, hits_store, joins, taken_over;
    /* the store, as the daemon sees it (its own connection) */
    srv_hist store_seconds;
    atomic_uint_fast64_t store_errors;
    atomic_int store_up;
    int64_t start_us;
} srv_metrics;

/* methods: "/pkg.Service/Method" paths, n of them (<= SRV_METRIC_METHODS
 * - 1). */
void srv_metrics_init(srv_metrics *m, const char *const *paths, int n, int64_t start_us);
/* A call ended with a status (method -1: unknown). */
void srv_metrics_call(srv_metrics *m, int method, int code, double seconds);
/* The process's resident memory in bytes (0 where /proc cannot say). */
int64_t srv_rss_bytes(void);
/* The text exposition of everything, appended to out. */
void srv_metrics_render(srv_metrics *m, const char *version, ap_buf *out);

#endif /* SRV_METRICS_H */
