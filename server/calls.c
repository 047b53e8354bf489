/*
 * calls.c - autopartd's methods: the table the gRPC layer serves, the
 * intake on the gRPC thread (unpack, hash, post to the loop's inbox), and the
 * handlers that run on the loop: Search and Apply go to jobs.c; GetSearch,
 * ListSearches, CancelSearch and Stats read the store (an operation on the
 * store's thread, db.c, whose callback answers); the standard health
 * service says whether the daemon is serving, without the store.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srv.h"

const rpc_method srv_methods[M__COUNT] = {
    [M_SEARCH] = {"/autopart.v1.Partitioner/Search", true},
    [M_APPLY] = {"/autopart.v1.Partitioner/Apply", false},
    [M_GET] = {"/autopart.v1.Partitioner/GetSearch", false},
    [M_LIST] = {"/autopart.v1.Partitioner/ListSearches", false},
    [M_CANCEL] = {"/autopart.v1.Partitioner/CancelSearch", false},
    [M_STATS] = {"/autopart.v1.Partitioner/Stats", false},
    [M_HEALTH_CHECK] = {"/grpc.health.v1.Health/Check", false},
    [M_HEALTH_WATCH] = {"/grpc.health.v1.Health/Watch", true},
};

static const ProtobufCMessageDescriptor *const request_type[M__COUNT] = {
    [M_SEARCH] = &autopart__v1__search_request__descriptor,
    [M_APPLY] = &autopart__v1__apply_request__descriptor,
    [M_GET] = &autopart__v1__get_search_request__descriptor,
    [M_LIST] = &autopart__v1__list_searches_request__descriptor,
    [M_CANCEL] = &autopart__v1__cancel_search_request__descriptor,
    [M_STATS] = &autopart__v1__stats_request__descriptor,
    [M_HEALTH_CHECK] = &grpc__health__v1__health_check_request__descriptor,
    [M_HEALTH_WATCH] = &grpc__health__v1__health_check_request__descriptor,
};

/* ================================================================= inbox */

/* From the gRPC thread: the loop handles ev soon (srv_run_inbox). */
static void post(srv *s, srv_event *ev)
{
    ev->next = NULL;
    uv_mutex_lock(&s->inbox_mu);
    if (s->inbox_tail)
        s->inbox_tail->next = ev;
    else
        s->inbox = ev;
    s->inbox_tail = ev;
    uv_mutex_unlock(&s->inbox_mu);
    uv_async_send(&s->wake); /* coalesced: one wake-up may carry many events */
}

static void event_free(srv_event *ev)
{
    if (ev->msg)
        protobuf_c_message_free_unpacked(ev->msg, NULL);
    ap_free(ev);
}

/* ============================================================ intake */

/* On the gRPC thread: unpack, hash what needs it, post to the loop. */
void srv_on_call(void *ud, rpc_call *c, int method, const uint8_t *req, size_t len)
{
    srv *s = ud;
    atomic_fetch_add(&s->stats.requests, 1);
    char why[300];
    if (!srv_check_wire(request_type[method], req, len, why, sizeof why)) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "%s", why);
        return;
    }
    ProtobufCMessage *msg = protobuf_c_message_unpack(request_type[method], NULL, len, req);
    if (!msg) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "the request (%zu bytes) is not a valid %s message", len,
                 request_type[method]->name);
        return;
    }
    srv_event *ev = ap_calloc(1, sizeof *ev);
    if (!ev) {
        protobuf_c_message_free_unpacked(msg, NULL);
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    ev->kind = EV_CALL;
    ev->call = c;
    ev->method = method;
    ev->msg = msg;
    ev->req_bytes = len;
    if (method == M_SEARCH || method == M_APPLY) {
        if (srv_raw_hash(method, msg, ev->raw) < 0) {
            protobuf_c_message_free_unpacked(msg, NULL);
            ap_free(ev);
            srv_fail(s, c, RPC_INTERNAL, "cannot hash the request");
            return;
        }
        ev->have_raw = true;
        /* Answered before: straight from memory, without waking the loop. */
        if (srv_cache_answer(s, c, method, ev->raw)) {
            protobuf_c_message_free_unpacked(msg, NULL);
            ap_free(ev);
            return;
        }
        /* Fairness groups: the client's label, else its address. */
        const char *label = method == M_SEARCH ? ((Autopart__V1__SearchRequest *)msg)->client_label
                                               : ((Autopart__V1__ApplyRequest *)msg)->client_label;
        if (label[0]) {
            snprintf(ev->client, sizeof ev->client, "label:%.*s", SRV_MAX_LABEL, label);
        } else {
            char peer[200];
            rpc_call_peer(c, peer, sizeof peer);
            char *colon = strrchr(peer, ':');
            if (colon && colon > peer && strncmp(peer, "unix:", 5) != 0)
                *colon = '\0'; /* the host, not the connection */
            snprintf(ev->client, sizeof ev->client, "peer:%s", peer);
        }
    }
    post(s, ev);
}

void srv_on_cancelled(void *ud, rpc_call *c)
{
    srv *s = ud;
    srv_event *ev = ap_calloc(1, sizeof *ev);
    if (!ev) { /* the call then simply waits for its answer to be dropped */
        rpc_call_unref(c);
        return;
    }
    ev->kind = EV_CANCEL;
    ev->call = c;
    post(s, ev);
}

/* On the loop: a client gone or past its deadline. */
static void handle_cancel(srv *s, rpc_call *c)
{
    srv_waiter *w = rpc_call_user(c);
    if (w) {
        if (w->method == M_HEALTH_WATCH) {
            for (srv_waiter **p = &s->watchers; *p; p = &(*p)->next)
                if (*p == w) {
                    *p = w->next;
                    break;
                }
            rpc_call_set_user(c, NULL);
            ap_free(w);
            rpc_finish(c, RPC_CANCELLED, "the client went away", NULL, 0);
        } else {
            srv_job_detach(s, w);
        }
    }
    rpc_call_unref(c);
}

/* ============================================================== records */

static bool parse_id(const char *text, int64_t *id)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!text[0] || *end || errno || v <= 0)
        return false;
    *id = v;
    return true;
}

/* GetSearch: the row, its history, best schedule and (asked for, done)
 * result, read on the store's thread. */
enum { MAX_POINTS = 2000 };
typedef struct op_get {
    srv_dbop op;
    rpc_call *call;
    int64_t id;
    bool want_result;
    int found;
    store_row row;
    store_point *pts;
    int n;
    char *sched;
    void *res;
    size_t res_len;
} op_get;

static void get_fn(store *db, srv_dbop *op)
{
    op_get *o = (op_get *)op;
    int rc = o->found = store_get(db, o->id, &o->row, &op->err);
    if (rc > 0 && (o->n = store_history(db, o->id, o->pts, MAX_POINTS, &op->err)) < 0)
        rc = o->n;
    if (rc > 0)
        rc = store_best_schedule(db, o->id, &o->sched, &op->err);
    if (rc >= 0 && o->found > 0 && o->want_result && o->row.status == STORE_DONE)
        rc = store_payload(db, o->id, STORE_PAYLOAD_RESULT, &o->res, &o->res_len, &op->err);
    op->rc = rc < 0 ? rc : 0;
}

static void get_cleanup(srv_dbop *op)
{
    op_get *o = (op_get *)op;
    ap_free(o->pts);
    ap_free(o->sched);
    ap_free(o->res);
}

static void get_cb(srv *s, srv_dbop *op)
{
    op_get *o = (op_get *)op;
    rpc_call *c = o->call;
    if (op->rc < 0) {
        srv_fail(s, c, RPC_UNAVAILABLE, "%s", op->err.msg);
        return;
    }
    if (!o->found) {
        srv_fail(s, c, RPC_NOT_FOUND, "no search %" PRId64 " in the store", o->id);
        return;
    }
    Autopart__V1__ProgressPoint *pp = ap_malloc(sizeof *pp * MAX_POINTS);
    Autopart__V1__ProgressPoint **ppp = ap_malloc(sizeof *ppp * MAX_POINTS);
    if (!pp || !ppp) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    Autopart__V1__SearchRecord rec = AUTOPART__V1__SEARCH_RECORD__INIT;
    Autopart__V1__SearchSummary sum;
    char key[65], hash[65], idt[24], axes_buf[256], *axes[IR_MAX_AXES];
    srv_row_summary(&o->row, &sum, key, hash, idt, axes, IR_MAX_AXES, axes_buf);
    rec.summary = &sum;
    for (int i = 0; i < o->n; i++) {
        autopart__v1__progress_point__init(&pp[i]);
        pp[i].unix_ms = o->pts[i].t_us / 1000;
        pp[i].episodes = o->pts[i].episodes;
        pp[i].best_runtime_s = o->pts[i].best_runtime_s;
        pp[i].best_peak_memory_bytes = o->pts[i].best_peak_memory;
        ppp[i] = &pp[i];
    }
    rec.history = ppp;
    rec.n_history = (size_t)o->n;
    rec.best_schedule = o->sched ? o->sched : (char *)"";
    if (o->res) { /* the stored answer, byte for byte, as field 4 */
        size_t len;
        uint8_t *buf = srv_pack_with(&rec.base, 4, o->res, o->res_len, &len);
        if (!buf) {
            srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        } else {
            rpc_finish(c, RPC_OK, NULL, buf, len);
            ap_free(buf);
        }
    } else {
        srv_reply(s, c, &rec.base);
    }
out:
    ap_free(pp);
    ap_free(ppp);
}

static void get_search(srv *s, rpc_call *c, const Autopart__V1__GetSearchRequest *r)
{
    int64_t id;
    if (!parse_id(r->search_id, &id)) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "search_id '%.40s' is not a search id (a positive number)", r->search_id);
        return;
    }
    srv_flush_hits(s); /* the counts a reader sees are current (written first: operations run in order) */
    op_get *o = srv_db_new(s, sizeof *o, get_fn, get_cb, NULL);
    if (o && !(o->pts = ap_malloc(sizeof *o->pts * MAX_POINTS))) {
        ap_free(o);
        o = NULL;
    }
    if (!o) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->op.cleanup = get_cleanup;
    o->call = c;
    o->id = id;
    o->want_result = r->include_result;
    srv_db_submit(s, &o->op);
}

/* ListSearches: a page of rows. */
typedef struct op_list {
    srv_dbop op;
    rpc_call *call;
    store_filter f;
    uint8_t hash[STORE_KEY_BYTES];
    char label[SRV_MAX_LABEL + 1], token[64];
    bool token_too_long;
    int limit, n;
    store_row *rows;
    char next[48];
} op_list;

static void list_fn(store *db, srv_dbop *op)
{
    op_list *o = (op_list *)op;
    o->n = store_list(db, &o->f, o->limit, o->token, o->rows, o->next, &op->err);
    op->rc = o->n < 0 ? o->n : 0;
}

static void list_cleanup(srv_dbop *op)
{
    ap_free(((op_list *)op)->rows);
}

static void list_cb(srv *s, srv_dbop *op)
{
    op_list *o = (op_list *)op;
    rpc_call *c = o->call;
    if (op->rc < 0) {
        srv_fail(s, c, op->err.code == AP_EINVALID ? RPC_INVALID_ARGUMENT : RPC_UNAVAILABLE, "%s", op->err.msg);
        return;
    }
    int n = o->n;
    Autopart__V1__SearchSummary *sum = ap_malloc(sizeof *sum * (size_t)(n ? n : 1));
    Autopart__V1__SearchSummary **sump = ap_malloc(sizeof *sump * (size_t)(n ? n : 1));
    struct strs {
        char key[65], hash[65], id[24], axes_buf[256], *axes[IR_MAX_AXES];
    } *st = ap_malloc(sizeof *st * (size_t)(n ? n : 1));
    if (!sum || !sump || !st) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        srv_row_summary(&o->rows[i], &sum[i], st[i].key, st[i].hash, st[i].id, st[i].axes, IR_MAX_AXES,
                        st[i].axes_buf);
        sump[i] = &sum[i];
    }
    Autopart__V1__ListSearchesResponse resp = AUTOPART__V1__LIST_SEARCHES_RESPONSE__INIT;
    resp.searches = sump;
    resp.n_searches = (size_t)n;
    resp.next_page_token = o->next;
    srv_reply(s, c, &resp.base);
out:
    ap_free(sum);
    ap_free(sump);
    ap_free(st);
}

static void list_searches(srv *s, rpc_call *c, const Autopart__V1__ListSearchesRequest *r)
{
    int limit = r->page_size ? r->page_size : STORE_LIST_PAGE;
    if (r->page_size < 0 || r->page_size > STORE_LIST_MAX) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "page_size %d: from 1 to %d (0: %d)", r->page_size, STORE_LIST_MAX,
                 STORE_LIST_PAGE);
        return;
    }
    /* the wire's enums number their values as the store does (0: any) */
    if ((int)r->status < 0 || r->status > AUTOPART__V1__SEARCH_STATUS__CANCELLED || (int)r->kind < 0 ||
        r->kind > AUTOPART__V1__RECORD_KIND__APPLY) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "unknown status %d or kind %d", (int)r->status, (int)r->kind);
        return;
    }
    if (strlen(r->client_label) > SRV_MAX_LABEL) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "client_label is longer than %d bytes", SRV_MAX_LABEL);
        return;
    }
    if (strlen(r->page_token) >= 64) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "malformed page token '%.40s'", r->page_token);
        return;
    }
    op_list *o = srv_db_new(s, sizeof *o, list_fn, list_cb, NULL);
    if (o && !(o->rows = ap_malloc(sizeof *o->rows * (size_t)limit))) {
        ap_free(o);
        o = NULL;
    }
    if (!o) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->op.cleanup = list_cleanup;
    o->call = c;
    o->limit = limit;
    snprintf(o->label, sizeof o->label, "%s", r->client_label);
    snprintf(o->token, sizeof o->token, "%s", r->page_token);
    o->f = (store_filter){.status = (int)r->status, .kind = (int)r->kind, .client_label = o->label};
    if (r->module_hash[0]) {
        size_t n = strlen(r->module_hash);
        int got = n >= 8 ? store_unhex(r->module_hash, o->hash, STORE_KEY_BYTES) : -1;
        if (got < 0) {
            srv_fail(s, c, RPC_INVALID_ARGUMENT,
                     "module_hash '%.70s': an even number of hex digits, at least 8 (a prefix of the hash)",
                     r->module_hash);
            list_cleanup(&o->op);
            ap_free(o);
            return;
        }
        o->f.module_hash = o->hash;
        o->f.module_hash_len = got;
    }
    if (r->created_after_unix_ms < 0 || r->created_before_unix_ms < 0) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "created_after_unix_ms and created_before_unix_ms are >= 0");
        list_cleanup(&o->op);
        ap_free(o);
        return;
    }
    o->f.created_after_us = r->created_after_unix_ms * 1000;
    o->f.created_before_us = r->created_before_unix_ms * 1000;
    srv_flush_hits(s);
    srv_db_submit(s, &o->op);
}

static void cancel_search(srv *s, rpc_call *c, const Autopart__V1__CancelSearchRequest *r)
{
    int64_t id;
    if (!parse_id(r->search_id, &id)) {
        srv_fail(s, c, RPC_INVALID_ARGUMENT, "search_id '%.40s' is not a search id (a positive number)", r->search_id);
        return;
    }
    srv_job_cancel_call(s, c, id);
}

/* Stats: the daemon's counts now, the store's once read. */
typedef struct op_stats {
    srv_dbop op;
    rpc_call *call;
    store_counts cnt;
} op_stats;

static void stats_fn(store *db, srv_dbop *op)
{
    op->rc = store_counts_get(db, &((op_stats *)op)->cnt, &op->err);
}

static void stats_cb(srv *s, srv_dbop *op)
{
    op_stats *o = (op_stats *)op;
    rpc_call *c = o->call;
    if (op->rc < 0) {
        srv_fail(s, c, RPC_UNAVAILABLE, "%s", op->err.msg);
        return;
    }
    Autopart__V1__StatsResponse r = AUTOPART__V1__STATS_RESPONSE__INIT;
    r.version = (char *)SRV_VERSION;
    r.uptime_s = (double)(ap_now_us() - s->start_us) / 1e6;
    r.requests = atomic_load(&s->stats.requests);
    r.errors = atomic_load(&s->stats.errors);
    r.cache_hits = atomic_load(&s->stats.cache_hits);
    r.joined = s->stats.joined;
    r.started = s->stats.started;
    r.running = (uint32_t)srv_jobs_count(s, JOB_RUNNING);
    r.queued = (uint32_t)(srv_jobs_count(s, JOB_RUN_WAIT) + srv_jobs_count(s, JOB_PREPARE_WAIT));
    r.max_concurrent = (uint32_t)s->opt.max_concurrent;
    r.stored = o->cnt.rows;
    r.stored_done = o->cnt.by_status[STORE_DONE];
    r.stored_cache_hits = o->cnt.cache_hits;
    r.rss_bytes = srv_rss_bytes();
    r.db_bytes = o->cnt.db_bytes;
    r.owner = s->owner;
    r.active_calls = (uint32_t)rpc_server_active_calls(s->rpc);
    size_t entries, bytes;
    srv_cache_stats(s->cache, &entries, &bytes);
    r.memory_cache_entries = entries;
    r.memory_cache_bytes = (int64_t)bytes;
    srv_reply(s, c, &r.base);
}

static void stats(srv *s, rpc_call *c)
{
    srv_flush_hits(s);
    op_stats *o = srv_db_new(s, sizeof *o, stats_fn, stats_cb, NULL);
    if (!o) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->call = c;
    srv_db_submit(s, &o->op);
}

/* ================================================================ health */

static bool known_service(const char *name)
{
    return !name[0] || !strcmp(name, "autopart.v1.Partitioner") || !strcmp(name, "grpc.health.v1.Health");
}

static void send_health(srv *s, rpc_call *c, bool stream, int status)
{
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    size_t len = grpc__health__v1__health_check_response__get_packed_size(&r);
    uint8_t buf[16];
    grpc__health__v1__health_check_response__pack(&r, buf);
    if (stream)
        rpc_send(c, buf, len);
    else
        rpc_finish(c, RPC_OK, NULL, buf, len);
    (void)s;
}

static int serving_status(srv *s)
{
    return s->stopping ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                       : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
}

/* At shutdown: watchers hear NOT_SERVING, then the stream ends. */
void srv_health_broadcast(srv *s)
{
    for (srv_waiter *w = s->watchers, *n; w; w = n) {
        n = w->next;
        if (w->origin)
            send_health(s, w->call, true, serving_status(s));
        rpc_call_set_user(w->call, NULL);
        rpc_finish(w->call, RPC_OK, NULL, NULL, 0);
        ap_free(w);
    }
    s->watchers = NULL;
}

static void health(srv *s, srv_event *ev)
{
    const Grpc__Health__V1__HealthCheckRequest *r = (const Grpc__Health__V1__HealthCheckRequest *)ev->msg;
    bool known = known_service(r->service);
    if (ev->method == M_HEALTH_CHECK) {
        if (!known)
            srv_fail(s, ev->call, RPC_NOT_FOUND, "unknown service '%.100s'", r->service);
        else
            send_health(s, ev->call, false, serving_status(s));
        return;
    }
    send_health(s, ev->call, true,
                known ? serving_status(s) : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN);
    if (s->stopping) {
        rpc_finish(ev->call, RPC_OK, NULL, NULL, 0);
        return;
    }
    srv_waiter *w = ap_calloc(1, sizeof *w);
    if (!w) {
        srv_fail(s, ev->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    w->call = ev->call;
    w->method = M_HEALTH_WATCH;
    w->origin = known; /* whether its status changes at shutdown */
    w->next = s->watchers;
    s->watchers = w;
    rpc_call_set_user(ev->call, w);
}

/* ================================================================ dispatch */

static void handle_call(srv *s, srv_event *ev)
{
    if (s->stopping && ev->method != M_HEALTH_CHECK && ev->method != M_HEALTH_WATCH) {
        srv_fail(s, ev->call, RPC_UNAVAILABLE, "autopartd is shutting down; ask again when it is back");
        return;
    }
    switch (ev->method) {
    case M_SEARCH:
    case M_APPLY: srv_job_request(s, ev); break;
    case M_GET: get_search(s, ev->call, (const Autopart__V1__GetSearchRequest *)ev->msg); break;
    case M_LIST: list_searches(s, ev->call, (const Autopart__V1__ListSearchesRequest *)ev->msg); break;
    case M_CANCEL: cancel_search(s, ev->call, (const Autopart__V1__CancelSearchRequest *)ev->msg); break;
    case M_STATS: stats(s, ev->call); break;
    case M_HEALTH_CHECK:
    case M_HEALTH_WATCH: health(s, ev); break;
    default: srv_fail(s, ev->call, RPC_UNIMPLEMENTED, "method %d", ev->method); break;
    }
}

void srv_run_inbox(srv *s)
{
    uv_mutex_lock(&s->inbox_mu);
    srv_event *ev = s->inbox;
    s->inbox = s->inbox_tail = NULL;
    uv_mutex_unlock(&s->inbox_mu);
    while (ev) {
        srv_event *next = ev->next;
        if (ev->kind == EV_CALL)
            handle_call(s, ev);
        else
            handle_cancel(s, ev->call);
        event_free(ev);
        ev = next;
    }
}

void srv_inbox_free(srv *s)
{
    for (srv_event *ev = s->inbox, *n; ev; ev = n) {
        n = ev->next;
        event_free(ev);
    }
}
