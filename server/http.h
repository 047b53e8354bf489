/*
 * http.h - autopartd's dashboard port: a JSON API over the store and the
 * dashboard's page, served by libmicrohttpd on its own threads.
 *
 * The HTTP side shares nothing with the libuv loop: it reads the store
 * through its own SQLite connections (WAL lets readers run beside the
 * daemon's writer), one per MHD worker thread at most, kept in a small
 * pool.  What it shows of a running search is what the daemon last wrote
 * to the store (a progress point when the best improves, at most every
 * SRV_POINT_US, and every SRV_CHECKPOINT_US).
 *
 * API (GET only; JSON unless said; errors are {"error": "..."} with 400,
 * 401, 404, 405 or 500):
 *   /api/searches?status=&kind=&client=&module=&q=&since=&until=&sort=&order=&limit=&after=
 *        a page of rows: {"searches": [...], "next": "cursor or empty"}
 *   /api/searches/ID             a row, its history, best schedule, result
 *   /api/searches/ID/progress    a row and its history (the live feed)
 *   /api/searches/ID/schedule    the schedule, text (attachment)
 *   /api/searches/ID/module      the partitioned module, text (attachment)
 *   /api/stats                   counts of the store
 *   /metrics                     the daemon's figures for Prometheus (text
 *                                format 0.0.4; the token, as /api/ wants it)
 *   /, /app.js, /style.css       the page (no token needed: no data in it)
 */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <stdint.h>

#include "ap.h"

typedef struct srv_http srv_http;

typedef struct srv_http_config {
    const char *listen;       /* host:port; port 0: any free port */
    const char *db_path;
    const char *root;         /* the page's files; NULL: next to the binary (../share/autopart/web) */
    const char *token;        /* NULL: no token; else `Authorization: Bearer TOKEN` on /api/ */
    const char *tls_cert_pem, *tls_key_pem; /* both or neither: HTTPS */
    const char *version;
    int threads;              /* MHD worker threads (and store connections at most) */
    int64_t start_us;         /* the daemon's start, for uptime */
    /* /metrics: appends the Prometheus text (any thread); NULL: none */
    void (*metrics)(void *ud, ap_buf *out);
    void *metrics_ud;
} srv_http_config;

/* Reads the page's files, opens the first store connection and starts
 * serving; *port is the bound port.  Fails with AP_EIO (files missing,
 * cannot bind), AP_EINVALID (bad address).  Stop (and free) with
 * srv_http_stop. */
int srv_http_start(const srv_http_config *cfg, srv_http **out, int *port, ap_error *err);
/* Stops the threads (open connections are closed), closes the store
 * connections and frees h.  NULL is fine. */
void srv_http_stop(srv_http *h);

#endif /* SRV_HTTP_H */
