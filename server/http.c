/*
 * http.c - the dashboard's port (http.h): libmicrohttpd parses HTTP and runs
 * the handlers on its worker threads; each handler borrows a store
 * connection from a small pool, answers from the store in JSON (jansson),
 * and gives the connection back.  Nothing here touches the daemon's loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>
#include <openssl/crypto.h>

#include "autopart/v1/partitioner.pb-c.h"
#include "http.h"
#include "store.h"

#define HTTP_MAX_STORES 16
#define HTTP_MAX_POINTS 5000
#define HTTP_IDLE_S 10      /* a connection idle this long is closed */
#define HTTP_PER_ADDRESS 32 /* connections one client address may hold */

/* A file of the page, read once at start. */
typedef struct web_file {
    const char *url, *name, *type;
    char *data;
    size_t len;
} web_file;

struct srv_http {
    struct MHD_Daemon *d;
    atomic_bool serving; /* started: libmicrohttpd's own log lines count */
    char *db_path, *token, *cert, *key, *version;
    int64_t start_us;
    web_file files[4];
    void (*metrics)(void *ud, ap_buf *out);
    void *metrics_ud;
    int n_files;
    pthread_mutex_t mu; /* the pool of store connections */
    store *free_stores[HTTP_MAX_STORES];
    int n_free, n_open;
};

/* An answer being built: status, content type, body (heap), file name of
 * an attachment. */
/* bodies come from ap_malloc (or json_dumps, which allocates through it):
 * MHD frees them with ap_free */
typedef struct reply {
    unsigned status;
    const char *type;
    char *body;
    size_t len;
    char attachment[96];
} reply;

/* ========================================================== store pool */

/* A connection for this request: a free one, or a new one (at most one per
 * worker thread is ever open at once, so the pool stays small). */
static store *store_take(srv_http *h, ap_error *err)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_free) {
        store *s = h->free_stores[--h->n_free];
        pthread_mutex_unlock(&h->mu);
        return s;
    }
    h->n_open++;
    pthread_mutex_unlock(&h->mu);
    store *s;
    if (store_open(h->db_path, "http", 5000, &s, err) < 0) {
        pthread_mutex_lock(&h->mu);
        h->n_open--;
        pthread_mutex_unlock(&h->mu);
        return NULL;
    }
    return s;
}

static void store_give(srv_http *h, store *s)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_free < HTTP_MAX_STORES) {
        h->free_stores[h->n_free++] = s;
        s = NULL;
    } else {
        h->n_open--;
    }
    pthread_mutex_unlock(&h->mu);
    store_close(s);
}

/* ============================================================== replies */

static void reply_json(reply *r, unsigned status, json_t *j)
{
    r->status = status;
    r->type = "application/json";
    /* 15 digits: 0.554977, not 0.55497700000000005 */
    r->body = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    r->len = r->body ? strlen(r->body) : 0;
    json_decref(j);
    if (!r->body && status < 500) { /* out of memory while dumping */
        r->status = 500;
        r->type = "text/plain";
    }
}

static void reply_error(reply *r, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(reply *r, unsigned status, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* What a client sent may be quoted back: bytes that are not UTF-8
     * (JSON could not hold them) become '?'. */
    json_t *text = json_string(msg);
    for (size_t i = 0; !text && msg[i]; i++)
        if ((unsigned char)msg[i] >= 0x80)
            msg[i] = '?';
    if (!text)
        text = json_string(msg);
    reply_json(r, status, text ? json_pack("{s:o}", "error", text) : NULL);
}

static void reply_store_error(reply *r, const ap_error *err)
{
    reply_error(r, err->code == AP_EINVALID ? 400 : err->code == AP_ELIMIT ? 503 : 500, "%s", err->msg);
}

/* ============================================================ encoding */

static json_t *row_json(const store_row *row)
{
    char key[65], hash[65];
    store_hex(row->key, STORE_KEY_BYTES, key);
    store_hex(row->module_hash, STORE_KEY_BYTES, hash);
    json_t *axes = json_array();
    char buf[sizeof row->axes];
    snprintf(buf, sizeof buf, "%s", row->axes);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(axes, json_string(t));
    /* a running row's duration so far; 0 before it starts */
    int64_t end = row->finished_us ? row->finished_us : row->started_us ? ap_now_us() : 0;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(row->id));
    json_object_set_new(o, "kind", json_string(row->kind == STORE_APPLY ? "apply" : "search"));
    json_object_set_new(o, "status", json_string(store_status_name(row->status)));
    json_object_set_new(o, "key", json_string(key));
    json_object_set_new(o, "module_hash", json_string(hash));
    json_object_set_new(o, "module_name", json_string(row->module_name));
    json_object_set_new(o, "client_label", json_string(row->client_label));
    json_object_set_new(o, "mesh", json_string(row->mesh));
    json_object_set_new(o, "device", json_string(row->device));
    json_object_set_new(o, "axes", axes);
    json_object_set_new(o, "created_ms", json_integer(row->created_us / 1000));
    json_object_set_new(o, "started_ms", json_integer(row->started_us / 1000));
    json_object_set_new(o, "finished_ms", json_integer(row->finished_us / 1000));
    json_object_set_new(o, "duration_s", json_real(row->started_us ? (double)(end - row->started_us) / 1e6 : 0.0));
    json_object_set_new(o, "episodes", json_integer(row->episodes));
    json_object_set_new(o, "best_runtime_s", json_real(row->best_runtime_s));
    json_object_set_new(o, "best_peak_memory_bytes", json_integer(row->best_peak_memory));
    json_object_set_new(o, "cache_hits", json_integer((json_int_t)row->cache_hits));
    json_object_set_new(o, "attempts", json_integer(row->attempts));
    json_object_set_new(o, "error", json_string(row->error));
    json_object_set_new(o, "owner", json_string(row->owner));
    json_object_set_new(o, "cancel_requested", json_boolean(row->cancel_requested));
    return o;
}

/* [[t_ms, episodes, runtime_s, peak_memory_bytes], ...], oldest first. */
static int history_json(store *s, int64_t id, json_t **out, ap_error *err)
{
    store_point *pts = ap_malloc(sizeof *pts * HTTP_MAX_POINTS);
    if (!pts)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    int n = store_history(s, id, pts, HTTP_MAX_POINTS, err);
    if (n < 0) {
        ap_free(pts);
        return n;
    }
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("[I,I,f,I]", (json_int_t)(pts[i].t_us / 1000), (json_int_t)pts[i].episodes,
                                           pts[i].best_runtime_s, (json_int_t)pts[i].best_peak_memory));
    ap_free(pts);
    *out = a;
    return 0;
}

/* A JSON text kept in the result, parsed; null when absent or unreadable. */
static json_t *embedded_json(const char *text)
{
    if (!text || !text[0])
        return json_null();
    json_t *j = json_loads(text, 0, NULL);
    return j ? j : json_null();
}

/* The stored PartitionResult without its module (served apart). */
static json_t *result_json(const Autopart__V1__PartitionResult *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "schedule", json_string(r->schedule ? r->schedule : ""));
    json_t *sh = json_array();
    for (size_t i = 0; i < r->n_shardings; i++) {
        const Autopart__V1__Sharding *x = r->shardings[i];
        json_t *dims = json_array(), *partial = json_array();
        if (x->spec) {
            for (size_t d = 0; d < x->spec->n_dims; d++) {
                json_t *axes = json_array();
                for (size_t k = 0; k < x->spec->dims[d]->n_axes; k++)
                    json_array_append_new(axes, json_string(x->spec->dims[d]->axes[k]));
                json_array_append_new(dims, axes);
            }
            for (size_t k = 0; k < x->spec->n_partial_axes; k++)
                json_array_append_new(partial, json_string(x->spec->partial_axes[k]));
        }
        json_array_append_new(
            sh, json_pack("{s:s,s:I,s:s,s:s,s:s,s:o,s:o}", "kind",
                          x->kind == AUTOPART__V1__SHARDING__KIND__RESULT ? "result" : "argument", "index",
                          (json_int_t)x->index, "name", x->name ? x->name : "", "type", x->type ? x->type : "",
                          "spec", x->spec_text ? x->spec_text : "", "dims", dims, "partial", partial));
    }
    json_object_set_new(o, "shardings", sh);
    if (r->cost) {
        const Autopart__V1__CostSummary *c = r->cost;
        /* what fits is held to (null: no limit); an answer stored before
         * the limit was carried was held to the device's HBM */
        json_t *limit = c->no_memory_limit          ? json_null()
                        : c->memory_limit_bytes > 0 ? json_real(c->memory_limit_bytes)
                                                    : json_real(c->hbm_bytes);
        json_object_set_new(o, "cost",
                            json_pack("{s:s,s:f,s:f,s:f,s:I,s:f,s:o,s:b,s:f}", "device", c->device ? c->device : "",
                                      "runtime_s", c->runtime_s, "compute_s", c->compute_s, "comm_s", c->comm_s,
                                      "peak_memory_bytes", (json_int_t)c->peak_memory_bytes, "hbm_bytes",
                                      c->hbm_bytes, "memory_limit_bytes", limit, "fits", (int)c->fits,
                                      "flops_per_device", c->flops_per_device));
    }
    json_t *coll = json_array();
    for (size_t i = 0; i < r->n_collectives; i++)
        json_array_append_new(coll, json_pack("{s:s,s:I,s:I}", "kind", r->collectives[i]->kind,
                                              "count", (json_int_t)r->collectives[i]->count, "bytes",
                                              (json_int_t)r->collectives[i]->bytes));
    json_object_set_new(o, "collectives", coll);
    if (r->search) {
        const Autopart__V1__SearchStats *x = r->search;
        json_object_set_new(o, "search",
                            json_pack("{s:I,s:I,s:f,s:f,s:I,s:I,s:b,s:b,s:I,s:s,s:f,s:I}", "episodes",
                                      (json_int_t)x->episodes, "best_episode", (json_int_t)x->best_episode,
                                      "episodes_per_s", x->episodes_per_s, "wall_s", x->wall_s, "decisions_before",
                                      (json_int_t)x->decisions_before, "decisions_after",
                                      (json_int_t)x->decisions_after, "memory_limit_met", (int)x->memory_limit_met,
                                      "none_fits", (int)x->none_fits, "units", (json_int_t)x->units, "stopped_by",
                                      x->stopped_by ? x->stopped_by : "", "start_runtime_s", x->start_runtime_s,
                                      "tree_nodes", (json_int_t)x->tree_nodes));
    }
    json_object_set_new(o, "report", embedded_json(r->report_json));
    json_object_set_new(o, "explanation", embedded_json(r->explanation_json));
    json_object_set_new(o, "explanation_text", json_string(r->explanation_text ? r->explanation_text : ""));
    json_object_set_new(o, "search_result", embedded_json(r->result_json));
    json_object_set_new(o, "module_bytes", json_integer(r->module ? (json_int_t)strlen(r->module) : 0));
    return o;
}

/* The stored result of a done row, unpacked: 1, 0 none (not done), or an
 * error.  Free with autopart__v1__partition_result__free_unpacked. */
static int load_result(store *s, int64_t id, Autopart__V1__PartitionResult **out, ap_error *err)
{
    void *data;
    size_t len;
    *out = NULL;
    int rc = store_payload(s, id, STORE_PAYLOAD_RESULT, &data, &len, err);
    if (rc <= 0)
        return rc;
    *out = autopart__v1__partition_result__unpack(NULL, len, data);
    ap_free(data);
    if (!*out)
        return ap_error_set(err, AP_EIO, "search %" PRId64 ": its stored result does not unpack", id);
    return 1;
}

/* ====================================================== query arguments */

typedef struct args {
    struct MHD_Connection *c;
    const char *const *known;
    char bad[200];
} args;

/* Whether s[0..n) is UTF-8 without NUL (JSON holds it; C strings keep it
 * whole). */
static bool text_ok(const char *s, size_t n)
{
    if (strlen(s) != n)
        return false;
    json_t *j = json_stringn(s, n);
    json_decref(j);
    return j != NULL;
}

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size)
{
    args *a = cls;
    if (!text_ok(key, key_size)) {
        snprintf(a->bad, sizeof a->bad, "a parameter's name holds a NUL or is not UTF-8");
        return MHD_NO;
    }
    if (value && !text_ok(value, value_size)) {
        snprintf(a->bad, sizeof a->bad, "%.40s: the value holds a NUL or is not UTF-8", key);
        return MHD_NO;
    }
    for (const char *const *k = a->known; *k; k++)
        if (!strcmp(*k, key))
            return MHD_YES;
    snprintf(a->bad, sizeof a->bad, "unknown parameter '%.60s'", key);
    return MHD_NO;
}

/* Whether every query argument is one of `known` (a typo is an error, not
 * an ignored filter), named and valued in UTF-8 without NUL (a %00 would
 * cut a filter short, or drop it); else a 400. */
static bool only_args(struct MHD_Connection *c, const char *const *known, reply *r)
{
    args a = {.c = c, .known = known};
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, check_arg, &a);
    if (a.bad[0]) {
        reply_error(r, 400, "%s", a.bad);
        return false;
    }
    return true;
}

static const char *arg(struct MHD_Connection *c, const char *name)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    return v && v[0] ? v : NULL;
}

static bool arg_int(struct MHD_Connection *c, const char *name, int64_t lo, int64_t hi, int64_t *out, reply *r)
{
    const char *v = arg(c, name);
    if (!v)
        return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        reply_error(r, 400, "%s=%.40s: a whole number from %" PRId64 " to %" PRId64, name, v, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

/* =========================================================== handlers */

static void api_list(srv_http *h, struct MHD_Connection *c, reply *r)
{
    static const char *const known[] = {"status", "kind",  "client", "module", "q",     "since", "until",
                                        "sort",   "order", "limit",  "after",  NULL};
    static const char *const sorts[] = {"created", "runtime", "memory", "episodes", "duration"};
    if (!only_args(c, known, r))
        return;
    store_filter f = {0};
    uint8_t hash[STORE_KEY_BYTES];
    int64_t limit = STORE_LIST_PAGE, since = 0, until = 0;
    const char *v;
    if ((v = arg(c, "status"))) {
        for (int st = STORE_QUEUED; st <= STORE_CANCELLED; st++)
            if (!strcmp(v, store_status_name(st)))
                f.status = st;
        if (!f.status) {
            reply_error(r, 400, "status=%.40s: one of queued, running, done, failed, cancelled", v);
            return;
        }
    }
    if ((v = arg(c, "kind"))) {
        f.kind = !strcmp(v, "search") ? STORE_SEARCH : !strcmp(v, "apply") ? STORE_APPLY : 0;
        if (!f.kind) {
            reply_error(r, 400, "kind=%.40s: search or apply", v);
            return;
        }
    }
    f.client_label = arg(c, "client");
    if ((v = arg(c, "module"))) {
        int got = strlen(v) >= 8 ? store_unhex(v, hash, STORE_KEY_BYTES) : -1;
        if (got < 0) {
            reply_error(r, 400, "module=%.70s: an even number of hex digits, at least 8 (a prefix of the hash)",
                        v);
            return;
        }
        f.module_hash = hash;
        f.module_hash_len = got;
    }
    f.text = arg(c, "q");
    if (f.text && strlen(f.text) > 200) {
        reply_error(r, 400, "q: at most 200 characters");
        return;
    }
    if (!arg_int(c, "limit", 1, STORE_LIST_MAX, &limit, r) || !arg_int(c, "since", 0, INT64_MAX / 1000, &since, r) ||
        !arg_int(c, "until", 0, INT64_MAX / 1000, &until, r))
        return;
    f.created_after_us = since * 1000;
    f.created_before_us = until * 1000;
    if ((v = arg(c, "sort"))) {
        f.sort = -1;
        for (int k = 0; k < STORE_SORT__COUNT; k++)
            if (!strcmp(v, sorts[k]))
                f.sort = k;
        if (f.sort < 0) {
            reply_error(r, 400, "sort=%.40s: one of created, runtime, memory, episodes, duration", v);
            return;
        }
    }
    if ((v = arg(c, "order"))) {
        if (strcmp(v, "asc") && strcmp(v, "desc")) {
            reply_error(r, 400, "order=%.40s: asc or desc", v);
            return;
        }
        f.ascending = !strcmp(v, "asc");
        if (f.sort == STORE_SORT_CREATED && f.ascending) {
            reply_error(r, 400, "order=asc: the newest-first order has no ascending form");
            return;
        }
    }
    ap_error err;
    store_row *rows = ap_malloc(sizeof *rows * (size_t)limit);
    store *s = rows ? store_take(h, &err) : NULL;
    if (!rows || !s) {
        ap_free(rows);
        if (rows)
            reply_store_error(r, &err);
        else
            reply_error(r, 500, "out of memory");
        return;
    }
    char next[48];
    int n = store_list(s, &f, (int)limit, arg(c, "after"), rows, next, &err);
    store_give(h, s);
    if (n < 0) {
        ap_free(rows);
        reply_store_error(r, &err);
        return;
    }
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, row_json(&rows[i]));
    ap_free(rows);
    reply_json(r, 200, json_pack("{s:o,s:s}", "searches", a, "next", next));
}

/* /api/searches/ID[/what] */
static void api_search(srv_http *h, struct MHD_Connection *c, const char *rest, reply *r)
{
    static const char *const known[] = {NULL};
    if (!only_args(c, known, r))
        return;
    char *end;
    errno = 0;
    long long id = strtoll(rest, &end, 10);
    if (errno || end == rest || id <= 0 || (*end && *end != '/')) {
        reply_error(r, 404, "no such search '%.40s' (ids are positive whole numbers)", rest);
        return;
    }
    const char *what = *end ? end + 1 : "";
    enum { W_ALL, W_PROGRESS, W_SCHEDULE, W_MODULE } w;
    if (!what[0])
        w = W_ALL;
    else if (!strcmp(what, "progress"))
        w = W_PROGRESS;
    else if (!strcmp(what, "schedule"))
        w = W_SCHEDULE;
    else if (!strcmp(what, "module"))
        w = W_MODULE;
    else {
        reply_error(r, 404, "no such page: /api/searches/%lld/%.40s", id, what);
        return;
    }
    ap_error err;
    store *s = store_take(h, &err);
    if (!s) {
        reply_store_error(r, &err);
        return;
    }
    store_row row;
    Autopart__V1__PartitionResult *res = NULL;
    char *best = NULL;
    json_t *hist = NULL;
    int rc = store_get(s, id, &row, &err);
    if (rc == 0) {
        reply_error(r, 404, "no search %lld", id);
        goto out;
    }
    if (rc < 0)
        goto fail;
    if (w != W_PROGRESS && row.status == STORE_DONE && (rc = load_result(s, id, &res, &err)) < 0)
        goto fail;
    if ((w == W_ALL || w == W_PROGRESS || (w == W_SCHEDULE && !res)) && (rc = store_best_schedule(s, id, &best, &err)) < 0)
        goto fail;
    if ((w == W_ALL || w == W_PROGRESS) && (rc = history_json(s, id, &hist, &err)) < 0)
        goto fail;
    switch (w) {
    case W_ALL:
    case W_PROGRESS: {
        json_t *o = json_object();
        json_object_set_new(o, "search", row_json(&row));
        json_object_set_new(o, "history", hist);
        hist = NULL;
        const char *sched = res && res->schedule ? res->schedule : best;
        json_object_set_new(o, "best_schedule", sched ? json_string(sched) : json_null());
        if (w == W_ALL)
            json_object_set_new(o, "result", res ? result_json(res) : json_null());
        reply_json(r, 200, o);
        break;
    }
    case W_SCHEDULE:
    case W_MODULE: {
        const char *text = w == W_MODULE ? (res ? res->module : NULL) : res ? res->schedule : best;
        if (!text) {
            reply_error(r, 404, "search %lld has no %s yet (%s)", id, w == W_MODULE ? "partitioned module" : "schedule",
                        store_status_name(row.status));
            break;
        }
        r->status = 200;
        r->type = "text/plain; charset=utf-8";
        r->body = ap_strdup(text);
        r->len = r->body ? strlen(r->body) : 0;
        if (!r->body)
            reply_error(r, 500, "out of memory");
        snprintf(r->attachment, sizeof r->attachment, "search-%lld-%s", id,
                 w == W_MODULE ? "module.mlir" : "schedule.txt");
        break;
    }
    }
    goto out;
fail:
    reply_store_error(r, &err);
out:
    store_give(h, s);
    json_decref(hist);
    ap_free(best);
    if (res)
        autopart__v1__partition_result__free_unpacked(res, NULL);
}

static void api_stats(srv_http *h, struct MHD_Connection *c, reply *r)
{
    static const char *const known[] = {NULL};
    if (!only_args(c, known, r))
        return;
    ap_error err;
    store *s = store_take(h, &err);
    if (!s) {
        reply_store_error(r, &err);
        return;
    }
    store_counts cnt;
    int rc = store_counts_get(s, &cnt, &err);
    store_give(h, s);
    if (rc < 0) {
        reply_store_error(r, &err);
        return;
    }
    json_t *by = json_object();
    for (int st = 1; st <= 5; st++)
        json_object_set_new(by, store_status_name(st), json_integer((json_int_t)cnt.by_status[st]));
    reply_json(r, 200,
               json_pack("{s:s,s:f,s:I,s:o,s:I,s:I}", "version", h->version, "uptime_s",
                         (double)(ap_now_us() - h->start_us) / 1e6, "stored", (json_int_t)cnt.rows, "by_status", by,
                         "cache_hits", (json_int_t)cnt.cache_hits, "db_bytes", (json_int_t)cnt.db_bytes));
}

/* Whether the request carries the token (compared in constant time). */
static bool authorized(srv_http *h, struct MHD_Connection *c)
{
    if (!h->token)
        return true;
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!v || strncmp(v, "Bearer ", 7))
        return false;
    v += 7;
    size_t n = strlen(h->token);
    return strlen(v) == n && CRYPTO_memcmp(v, h->token, n) == 0;
}

/* The Prometheus text of the daemon. */
static void metrics(srv_http *h, reply *r)
{
    ap_buf b;
    ap_buf_init(&b);
    h->metrics(h->metrics_ud, &b);
    /* MHD frees the body with free(): a copy from our allocator's buffer */
    r->body = b.oom ? NULL : malloc(b.len + 1);
    if (!r->body) {
        ap_buf_free(&b);
        reply_error(r, 500, "out of memory");
        return;
    }
    memcpy(r->body, b.data, b.len);
    r->len = b.len;
    r->status = 200;
    r->type = "text/plain; version=0.0.4; charset=utf-8";
    ap_buf_free(&b);
}

static void route(srv_http *h, struct MHD_Connection *c, const char *url, reply *r)
{
    if (!text_ok(url, strlen(url))) {
        reply_error(r, 400, "the path is not UTF-8");
        return;
    }
    if (!strcmp(url, "/metrics") && h->metrics) {
        if (!authorized(h, c))
            reply_error(r, 401, "this daemon wants `Authorization: Bearer TOKEN` (its --token-file)");
        else
            metrics(h, r);
        return;
    }
    if (strncmp(url, "/api/", 5) != 0) {
        for (int i = 0; i < h->n_files; i++)
            if (!strcmp(url, h->files[i].url)) {
                r->status = 200;
                r->type = h->files[i].type;
                r->body = ap_malloc(h->files[i].len + 1);
                if (!r->body) {
                    reply_error(r, 500, "out of memory");
                    return;
                }
                memcpy(r->body, h->files[i].data, h->files[i].len);
                r->len = h->files[i].len;
                return;
            }
        reply_error(r, 404, "no such page: %.100s", url);
        return;
    }
    if (!authorized(h, c)) {
        reply_error(r, 401, "this daemon wants `Authorization: Bearer TOKEN` (its --token-file)");
        return;
    }
    if (!strcmp(url, "/api/searches")) {
        api_list(h, c, r);
        return;
    }
    if (!strncmp(url, "/api/searches/", 14)) {
        api_search(h, c, url + 14, r);
        return;
    }
    if (!strcmp(url, "/api/stats")) {
        api_stats(h, c, r);
        return;
    }
    reply_error(r, 404, "no such API: %.100s", url);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    srv_http *h = cls;
    reply r = {0};
    bool head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
    if (!head && strcmp(method, MHD_HTTP_METHOD_GET)) {
        reply_error(&r, 405, "%.20s: only GET and HEAD", method);
    } else if (*upload_size) {
        *upload_size = 0; /* a GET with a body: drop it */
        reply_error(&r, 400, "a GET carries no body");
    } else {
        route(h, c, url, &r);
    }
    struct MHD_Response *resp;
    if (r.body) {
        resp = MHD_create_response_from_buffer_with_free_callback(r.len, r.body, ap_free);
    } else {
        static const char oom[] = "out of memory\n";
        r.status = 500;
        r.type = "text/plain";
        resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) {
        if (r.body)
            ap_free(r.body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; frame-ancestors 'none'");
    if (r.attachment[0]) {
        char disp[160];
        snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", r.attachment);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp);
    }
    if (r.status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, r.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* =============================================================== start */

/* The page's files: --http-root, or ../share/autopart/web beside the
 * binary (the build tree and an install look alike). */
static int load_files(srv_http *h, const char *root, ap_error *err)
{
    static const struct {
        const char *url, *name, *type;
    } names[] = {
        {"/", "index.html", "text/html; charset=utf-8"},
        {"/app.js", "app.js", "text/javascript; charset=utf-8"},
        {"/style.css", "style.css", "text/css; charset=utf-8"},
    };
    char dir[PATH_MAX];
    if (root) {
        snprintf(dir, sizeof dir, "%s", root);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return ap_error_set(err, AP_EIO, "cannot find the dashboard's files: say --http-root DIR");
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(dir, sizeof dir, "%.*s/../share/autopart/web", (int)(sizeof dir - 32), exe);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, names[i].name);
        web_file *f = &h->files[h->n_files];
        f->url = names[i].url;
        f->name = names[i].name;
        f->type = names[i].type;
        if (ap_read_file(path, &f->data, &f->len, err) < 0)
            return ap_error_set(err, AP_EIO, "the dashboard's file %s cannot be read (--http-root DIR says where they are)",
                                path);
        h->n_files++;
    }
    return 0;
}

/* host:port to a socket address (numeric hosts and localhost). */
static int parse_listen(const char *listen, struct sockaddr_storage *sa, bool *v6, ap_error *err)
{
    char host[256];
    const char *colon;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':')
            return ap_error_set(err, AP_EINVALID, "--http %s: host:port, or [v6]:port", listen);
        snprintf(host, sizeof host, "%.*s", (int)(close - listen - 1), listen + 1);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || colon == listen)
            return ap_error_set(err, AP_EINVALID, "--http %s: host:port, e.g. 127.0.0.1:8080", listen);
        snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
    }
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || !colon[1] || *end || port < 0 || port > 65535)
        return ap_error_set(err, AP_EINVALID, "--http %s: the port is a number from 0 to 65535", listen);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
        return ap_error_set(err, AP_EINVALID, "--http %s: cannot resolve '%s'", listen, host);
    memset(sa, 0, sizeof *sa);
    memcpy(sa, ai->ai_addr, ai->ai_addrlen);
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (*v6)
        ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
    return 0;
}

/* libmicrohttpd's log, once serving; while it starts, what fails is said in
 * one line by srv_http_start (its own "Failed to bind to port 0" named the
 * port it was passed, not the address asked for). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    srv_http *h = cls;
    if (!atomic_load(&h->serving))
        return;
    fprintf(stderr, "autopartd: http: ");
    vfprintf(stderr, fmt, ap);
}

int srv_http_start(const srv_http_config *cfg, srv_http **out, int *port, ap_error *err)
{
    int rc;
    *out = NULL;
    srv_http *h = ap_calloc(1, sizeof *h);
    if (!h)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    pthread_mutex_init(&h->mu, NULL);
    h->start_us = cfg->start_us;
    h->metrics = cfg->metrics;
    h->metrics_ud = cfg->metrics_ud;
    h->db_path = ap_strdup(cfg->db_path);
    h->version = ap_strdup(cfg->version ? cfg->version : "");
    h->token = cfg->token ? ap_strdup(cfg->token) : NULL;
    h->cert = cfg->tls_cert_pem ? ap_strdup(cfg->tls_cert_pem) : NULL;
    h->key = cfg->tls_key_pem ? ap_strdup(cfg->tls_key_pem) : NULL;
    if (!h->db_path || !h->version || (cfg->token && !h->token) || (cfg->tls_cert_pem && !h->cert) ||
        (cfg->tls_key_pem && !h->key)) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = load_files(h, cfg->root, err)) < 0)
        goto fail;
    /* One connection now: a store the daemon cannot read fails here, not
     * at the first page. */
    store *s = store_take(h, err);
    if (!s) {
        rc = err->code;
        goto fail;
    }
    store_give(h, s);
    struct sockaddr_storage sa;
    bool v6;
    if ((rc = parse_listen(cfg->listen, &sa, &v6, err)) < 0)
        goto fail;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    if (h->cert)
        flags |= MHD_USE_TLS;
    unsigned threads = cfg->threads > 0 ? (unsigned)cfg->threads : 2;
    if (threads > HTTP_MAX_STORES)
        threads = HTTP_MAX_STORES;
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->key},
        {MHD_OPTION_END, 0, NULL},
    };
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_THREAD_POOL_SIZE, threads,
                            /* against slow clients: a connection that sends nothing for 10 s
                             * is closed, and one address holds at most 32 of the 256 */
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_ADDRESS,
                            MHD_OPTION_ARRAY, h->cert ? tls : tls + 2, MHD_OPTION_END);
    if (!h->d) {
        rc = ap_error_set(err, AP_EIO, "--http %s: cannot serve there (address in use, or TLS setup failed)",
                          cfg->listen);
        goto fail;
    }
    atomic_store(&h->serving, true);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? (int)info->port : 0;
    *out = h;
    return 0;
fail:
    srv_http_stop(h);
    return rc;
}

void srv_http_stop(srv_http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d);
    for (int i = 0; i < h->n_free; i++)
        store_close(h->free_stores[i]);
    for (int i = 0; i < h->n_files; i++)
        ap_free(h->files[i].data);
    pthread_mutex_destroy(&h->mu);
    ap_free(h->db_path);
    ap_free(h->version);
    ap_free(h->token);
    ap_free(h->cert);
    ap_free(h->key);
    ap_free(h);
}
