/*
 * jobs.c - the life of a search or an Apply in autopartd, on the loop
 * thread: find what a request joins (a job of this daemon, an answer in the
 * store, a row another daemon runs) or start a job; move it through
 * prepare -> row in the store -> run -> answer; answer every call waiting on
 * it; and keep the rows honest (heartbeats, checkpoints, orphans of crashed
 * daemons, cancellations asked through another daemon).
 *
 *   request --raw hash--> job of this daemon? join
 *           --alias--> key --> job with the key? join
 *                          --> done row? answer from the store (cache hit)
 *                          --> row another daemon runs? join it (polled)
 *           otherwise: prepare (parse, validate, key) on a worker, then the
 *           same by key, then a new row and a run.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* ================================================================ helpers */

static srv_job *find_job(srv *s, const uint8_t *raw, const uint8_t *key, int64_t row, int kind, const srv_job *not)
{
    for (srv_job *j = s->jobs; j; j = j->next) {
        if (j == not || j->ended || (kind && j->kind != kind))
            continue;
        if (raw && j->have_raw && !memcmp(j->raw, raw, STORE_KEY_BYTES))
            return j;
        if (key && j->have_key && !memcmp(j->key, key, STORE_KEY_BYTES))
            return j;
        if (row && j->row_id == row)
            return j;
    }
    return NULL;
}

static srv_job *job_new(srv *s, int kind, const char *client)
{
    srv_job *j = ap_calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->srv = s;
    j->kind = kind;
    j->work.kind = kind;
    snprintf(j->client, sizeof j->client, "%s", client);
    atomic_init(&j->cancel, CANCEL_NONE);
    atomic_init(&j->prog_posted, false);
    uv_mutex_init(&j->pmu);
    j->next = s->jobs;
    s->jobs = j;
    return j;
}

void srv_job_free(srv_job *job)
{
    srv_work_release(&job->work);
    ap_free(job->prog_schedule);
    ap_free(job->ckpt);
    uv_mutex_destroy(&job->pmu);
    ap_free(job);
}

static void job_unlink(srv *s, srv_job *job)
{
    for (srv_job **p = &s->jobs; *p; p = &(*p)->next)
        if (*p == job) {
            *p = job->next;
            return;
        }
}

int srv_jobs_count(srv *s, int stage)
{
    int n = 0;
    for (srv_job *j = s->jobs; j; j = j->next)
        n += (int)j->stage == stage;
    return n;
}

static void srv_count_join(srv *s)
{
    s->stats.joined++;
    atomic_fetch_add(&s->metrics.joins, 1);
}

static void add_hits(srv *s, int64_t id, uint64_t n)
{
    for (int i = 0; i < s->n_hits; i++)
        if (s->hits[i].id == id) {
            s->hits[i].n += n;
            return;
        }
    if (s->n_hits == s->cap_hits) {
        int cap = s->cap_hits ? s->cap_hits * 2 : 16;
        srv_hit *h = ap_realloc(s->hits, sizeof *h * (size_t)cap);
        if (!h)
            return; /* the count is statistics: dropping one is harmless */
        s->hits = h;
        s->cap_hits = cap;
    }
    s->hits[s->n_hits++] = (srv_hit){id, n};
}

static void count_hit(srv *s, int64_t id)
{
    atomic_fetch_add(&s->stats.cache_hits, 1);
    add_hits(s, id, 1);
}

void srv_flush_hits(srv *s)
{
    srv_hit *mem;
    int n_mem = srv_cache_take_hits(s->cache, &mem); /* answered from memory */
    for (int i = 0; i < n_mem; i++)
        add_hits(s, mem[i].id, mem[i].n);
    ap_free(mem);
    if (!s->n_hits)
        return;
    int64_t *ids = ap_malloc(sizeof *ids * (size_t)s->n_hits);
    uint64_t *n = ap_malloc(sizeof *n * (size_t)s->n_hits);
    ap_error err;
    if (ids && n) {
        for (int i = 0; i < s->n_hits; i++) {
            ids[i] = s->hits[i].id;
            n[i] = s->hits[i].n;
        }
        if (store_add_hits(s->db, ids, n, s->n_hits, srv_now_us(), &err) < 0)
            srv_log(s, "counting cache hits: %s", err.msg);
        else
            s->n_hits = 0;
    }
    ap_free(ids);
    ap_free(n);
}

/* =============================================================== answers */

/* The packed Accepted event of a search (heap; NULL when out of memory). */
static uint8_t *accepted_bytes(int64_t row_id, int origin, const uint8_t *key, size_t *len)
{
    char id[24], hex[2 * STORE_KEY_BYTES + 1];
    snprintf(id, sizeof id, "%" PRId64, row_id);
    store_hex(key, STORE_KEY_BYTES, hex);
    Autopart__V1__Accepted acc = AUTOPART__V1__ACCEPTED__INIT;
    acc.search_id = id;
    acc.origin = (Autopart__V1__Origin)origin;
    acc.key = hex;
    Autopart__V1__SearchEvent ev = AUTOPART__V1__SEARCH_EVENT__INIT;
    ev.event_case = AUTOPART__V1__SEARCH_EVENT__EVENT_ACCEPTED;
    ev.accepted = &acc;
    *len = autopart__v1__search_event__get_packed_size(&ev);
    uint8_t *buf = ap_malloc(*len ? *len : 1);
    if (buf)
        autopart__v1__search_event__pack(&ev, buf);
    return buf;
}

static void send_accepted(srv *s, srv_waiter *w)
{
    srv_job *job = w->job;
    if (w->accepted_sent || w->method != M_SEARCH || !job || !job->row_id)
        return;
    size_t len;
    uint8_t *buf = accepted_bytes(job->row_id, w->origin, job->key, &len);
    if (buf) {
        rpc_send(w->call, buf, len);
        ap_free(buf);
    }
    w->accepted_sent = true;
    (void)s;
}

/* The bytes of an answer: the stored PartitionResult inside an
 * ApplyResponse, or as the final SearchEvent, byte for byte.  Heap. */
static uint8_t *answer_bytes(int method, int64_t row_id, int origin, const void *res, size_t len, size_t *n)
{
    char id[24];
    snprintf(id, sizeof id, "%" PRId64, row_id);
    if (method == M_APPLY) {
        Autopart__V1__ApplyResponse r = AUTOPART__V1__APPLY_RESPONSE__INIT;
        r.search_id = id;
        r.origin = (Autopart__V1__Origin)origin;
        return srv_pack_with(&r.base, 3, res, len, n);
    }
    Autopart__V1__SearchEvent ev = AUTOPART__V1__SEARCH_EVENT__INIT;
    return srv_pack_with(&ev.base, 3, res, len, n);
}

/* Sends an answer to one call and ends it. */
static void answer_result(srv *s, rpc_call *call, int method, int64_t row_id, int origin, const void *res,
                          size_t len)
{
    size_t n = 0;
    uint8_t *buf = answer_bytes(method, row_id, origin, res, len, &n);
    if (!buf) {
        srv_fail(s, call, RPC_RESOURCE_EXHAUSTED, "out of memory sending the answer");
        return;
    }
    rpc_finish(call, RPC_OK, NULL, buf, n);
    ap_free(buf);
}

static void waiter_unlink(srv_job *job, srv_waiter *w)
{
    for (srv_waiter **p = &job->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            return;
        }
}

/* Frees a waiter before its call is finished: a finished call may be gone
 * at once. */
static void waiter_free(srv_waiter *w)
{
    rpc_call_set_user(w->call, NULL);
    ap_free(w);
}

/* Answers every call waiting on the job with the result, then drops them. */
static void answer_all(srv *s, srv_job *job, const void *res, size_t len)
{
    for (srv_waiter *w = job->waiters, *n; w; w = n) {
        n = w->next;
        if (w->method == M_SEARCH)
            send_accepted(s, w);
        rpc_call *call = w->call;
        int method = w->method, origin = w->origin;
        waiter_free(w);
        answer_result(s, call, method, job->row_id, origin, res, len);
    }
    job->waiters = NULL;
}

static void fail_all(srv *s, srv_job *job, rpc_code code, const char *msg)
{
    for (srv_waiter *w = job->waiters, *n; w; w = n) {
        n = w->next;
        rpc_call *call = w->call;
        waiter_free(w);
        srv_fail(s, call, code, "%s", msg);
    }
    job->waiters = NULL;
}

static void attach(srv *s, srv_job *job, rpc_call *call, int method, int origin)
{
    srv_waiter *w = ap_calloc(1, sizeof *w);
    if (!w) {
        srv_fail(s, call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    w->call = call;
    w->method = method;
    w->origin = origin;
    w->job = job;
    w->next = job->waiters;
    job->waiters = w;
    job->alone_us = 0;
    rpc_call_set_user(call, w);
    if (origin == AUTOPART__V1__ORIGIN__JOINED)
        srv_count_join(s);
    send_accepted(s, w);
}

void srv_job_detach(srv *s, srv_waiter *w)
{
    (void)s;
    if (w->job) {
        waiter_unlink(w->job, w);
        if (!w->job->waiters && w->job->kind == STORE_SEARCH)
            w->job->alone_us = srv_now_us(); /* srv_jobs_tick gives it up if nobody comes back */
    }
    rpc_call *call = w->call;
    waiter_free(w);
    /* The client is gone: the status goes nowhere, but the call is ours to
     * finish.  The job goes on: its answer is stored for the next asker. */
    rpc_finish(call, RPC_CANCELLED, "the client went away", NULL, 0);
}

/* Answers one call from a done row of the store, and keeps the packed
 * answer in memory for the next request written as `raw` (may be NULL). */
static void answer_from_store(srv *s, rpc_call *call, int method, const store_row *row, const uint8_t *raw)
{
    void *res;
    size_t len, n = 0;
    ap_error err;
    int rc = store_payload(s->db, row->id, STORE_PAYLOAD_RESULT, &res, &len, &err);
    if (rc <= 0) {
        srv_fail(s, call, RPC_INTERNAL, "search %" PRId64 " is done but its result cannot be read: %s", row->id,
                 rc < 0 ? err.msg : "no result stored");
        return;
    }
    rpc_shared *first = NULL, *last = NULL;
    uint8_t *buf = answer_bytes(method, row->id, AUTOPART__V1__ORIGIN__CACHE_HIT, res, len, &n);
    ap_free(res);
    if (buf)
        last = rpc_shared_new(buf, n);
    ap_free(buf);
    if (last && method == M_SEARCH) {
        buf = accepted_bytes(row->id, AUTOPART__V1__ORIGIN__CACHE_HIT, row->key, &n);
        if (buf)
            first = rpc_shared_new(buf, n);
        ap_free(buf);
        if (!first) {
            rpc_shared_unref(last);
            last = NULL;
        }
    }
    if (!last) {
        srv_fail(s, call, RPC_RESOURCE_EXHAUSTED, "out of memory sending the answer");
        return;
    }
    count_hit(s, row->id);
    atomic_fetch_add(&s->metrics.hits_store, 1);
    if (first)
        rpc_send_shared(call, first);
    rpc_finish_shared(call, RPC_OK, NULL, last);
    if (raw)
        srv_cache_put(s->cache, method, raw, row->id, first, last);
    rpc_shared_unref(first);
    rpc_shared_unref(last);
}

/* ============================================================== requests */

/* The threads a search runs with: what it asks, at most the daemon's
 * --threads-per-search.  (Under an episode budget the answer should not
 * depend on it; a restarted search uses the same count all the same.) */
static int search_threads(const srv *s, int kind, const ProtobufCMessage *req)
{
    if (kind != STORE_SEARCH)
        return 1;
    const Autopart__V1__SearchRequest *r = (const Autopart__V1__SearchRequest *)req;
    return r->threads > 0 && r->threads < s->opt.threads_per_search ? r->threads : s->opt.threads_per_search;
}

static void remove_job(srv *s, srv_job *job)
{
    job_unlink(s, job);
    srv_job_free(job);
}

/* A job whose row (job->row_id, job->key) someone else runs, or will: its
 * calls wait, polled, until the row ends. */
static void wait_remote(srv *s, srv_job *job)
{
    job->stage = JOB_REMOTE;
    job->have_key = true;
    job->remote_progress_us = -1;
    for (srv_waiter *w = job->waiters; w; w = w->next) {
        if (w->origin == AUTOPART__V1__ORIGIN__NEW) {
            w->origin = AUTOPART__V1__ORIGIN__JOINED;
            srv_count_join(s);
        }
        send_accepted(s, w);
    }
    srv_work_release(&job->work);
}

static void make_remote(srv *s, srv_job *job, const store_row *row)
{
    job->row_id = row->id;
    memcpy(job->key, row->key, STORE_KEY_BYTES);
    wait_remote(s, job);
}

/* A row this daemon holds but has no room to run now: an accepted request
 * is never failed for the daemon's own capacity.  The row goes back to the
 * store, queued, for the first daemon with a free worker (this one's sweep
 * included); the job's calls wait for it there. */
static void give_back(srv *s, srv_job *job)
{
    ap_error err;
    if (store_release(s->db, job->row_id, &err) < 0)
        srv_log(s, "search %" PRId64 ": %s", job->row_id, err.msg);
    if (job->waiters)
        wait_remote(s, job);
    else
        remove_job(s, job);
}

void srv_job_request(srv *s, srv_event *ev)
{
    int kind = ev->method == M_SEARCH ? STORE_SEARCH : STORE_APPLY;
    ap_error err;
    srv_job *job;
    if (s->stopping) {
        srv_fail(s, ev->call, RPC_UNAVAILABLE, "autopartd is shutting down; ask again when it is back");
        return;
    }
    /* Answered before, and the packed answer is in memory (the gRPC thread
     * looks first; the answer may have arrived since). */
    srv_cached hit;
    if (srv_cache_get(s->cache, ev->method, ev->raw, &hit)) {
        atomic_fetch_add(&s->stats.cache_hits, 1);
        atomic_fetch_add(&s->metrics.hits_memory, 1);
        if (hit.first)
            rpc_send_shared(ev->call, hit.first);
        rpc_finish_shared(ev->call, RPC_OK, NULL, hit.last);
        rpc_shared_unref(hit.first);
        rpc_shared_unref(hit.last);
        return;
    }
    /* The same request, as written, is being worked on here. */
    if ((job = find_job(s, ev->raw, NULL, 0, kind, NULL))) {
        attach(s, job, ev->call, ev->method, AUTOPART__V1__ORIGIN__JOINED);
        return;
    }
    /* Seen before: its key is known without parsing. */
    uint8_t key[STORE_KEY_BYTES];
    int rc = store_alias_get(s->db, ev->raw, key, &err);
    if (rc < 0) {
        srv_fail(s, ev->call, RPC_UNAVAILABLE, "%s", err.msg);
        return;
    }
    if (rc == 1) {
        if ((job = find_job(s, NULL, key, 0, kind, NULL))) {
            attach(s, job, ev->call, ev->method, AUTOPART__V1__ORIGIN__JOINED);
            return;
        }
        store_row row;
        rc = store_find_live(s->db, key, &row, &err);
        if (rc < 0) {
            srv_fail(s, ev->call, RPC_UNAVAILABLE, "%s", err.msg);
            return;
        }
        if (rc == 1 && row.status == STORE_DONE) {
            answer_from_store(s, ev->call, ev->method, &row, ev->raw);
            return;
        }
        if (rc == 1 && (job = job_new(s, kind, ev->client))) {
            attach(s, job, ev->call, ev->method, AUTOPART__V1__ORIGIN__JOINED);
            make_remote(s, job, &row);
            return;
        }
        /* no live row (the last one failed or was cancelled): run afresh */
    }
    job = job_new(s, kind, ev->client);
    if (!job) {
        srv_fail(s, ev->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    job->have_raw = true;
    memcpy(job->raw, ev->raw, STORE_KEY_BYTES);
    job->req_bytes = (int64_t)ev->req_bytes;
    job->work.req = ev->msg;
    ev->msg = NULL;
    job->work.threads = search_threads(s, kind, job->work.req);
    if (!srv_submit(s, job, TASK_PREPARE, POOL_INTAKE)) {
        remove_job(s, job);
        srv_fail(s, ev->call, RPC_RESOURCE_EXHAUSTED,
                 "the queue of requests being read is full (%d waiting, %.0f MiB); try again shortly",
                 s->pools[POOL_INTAKE].queue.count, (double)s->queued_bytes / (1 << 20));
        return;
    }
    attach(s, job, ev->call, ev->method, AUTOPART__V1__ORIGIN__NEW);
}

/* ================================================================ tasks */

/* Writes a running search's best so far and a point of its history. */
static void checkpoint_one(srv *s, srv_job *job, int64_t now)
{
    ap_error err;
    uv_mutex_lock(&job->pmu);
    store_progress p = job->prog;
    p.best_schedule = job->prog_schedule;
    int rc = store_set_progress(s->db, job->row_id, now, &p, true, job->ckpt, job->ckpt_len, &err);
    if (rc == 0) {
        ap_free(job->ckpt);
        job->ckpt = NULL;
    }
    uv_mutex_unlock(&job->pmu);
    if (rc < 0) {
        srv_log(s, "checkpoint of search %" PRId64 ": %s", job->row_id, err.msg);
    } else {
        job->prog_dirty = false;
        job->ckpt_us = now;
        job->ckpt_best = p.best_runtime_s;
    }
}

static void row_new_fields(srv_job *job, store_new *n, uint8_t **req_bytes)
{
    srv_work *w = &job->work;
    memset(n, 0, sizeof *n);
    n->kind = job->kind;
    n->key = job->key;
    n->module_hash = w->module_hash;
    n->module_name = w->module_name;
    n->mesh = w->mesh_text;
    n->device = w->device_name;
    n->axes = w->axes_text;
    n->client_label = job->kind == STORE_SEARCH ? ((Autopart__V1__SearchRequest *)w->req)->client_label
                                                : ((Autopart__V1__ApplyRequest *)w->req)->client_label;
    size_t len = protobuf_c_message_get_packed_size(w->req);
    *req_bytes = ap_malloc(len ? len : 1);
    if (*req_bytes) {
        protobuf_c_message_pack(w->req, *req_bytes);
        n->request = *req_bytes;
        n->request_len = len;
    }
}

static void end_alone(srv *s, srv_job *job);

static void prepare_done(srv *s, srv_job *job)
{
    srv_work *w = &job->work;
    ap_error err;
    if (w->code != RPC_OK) {
        if (job->row_id) { /* a claimed row that cannot run any more */
            if (store_finish(s->db, job->row_id, STORE_FAILED, srv_now_us(), NULL, 0, NULL, w->msg, &err) < 0)
                srv_log(s, "search %" PRId64 ": %s", job->row_id, err.msg);
        }
        fail_all(s, job, w->code, w->msg);
        remove_job(s, job);
        return;
    }
    job->have_key = true;
    memcpy(job->key, w->key, STORE_KEY_BYTES);
    if (job->have_raw && store_alias_put(s->db, job->raw, job->key, srv_now_us(), &err) < 0)
        srv_log(s, "alias: %s", err.msg);
    /* Another spelling of the same request is already here: join it. */
    srv_job *other = find_job(s, NULL, job->key, 0, job->kind, job);
    if (other && !job->row_id) {
        for (srv_waiter *wt = job->waiters, *n; wt; wt = n) {
            n = wt->next;
            wt->job = other;
            if (wt->origin == AUTOPART__V1__ORIGIN__NEW) {
                wt->origin = AUTOPART__V1__ORIGIN__JOINED;
                srv_count_join(s);
            }
            wt->next = other->waiters;
            other->waiters = wt;
            send_accepted(s, wt);
        }
        job->waiters = NULL;
        remove_job(s, job);
        return;
    }
    int pool = job->kind == STORE_SEARCH ? POOL_SEARCH : POOL_INTAKE;
    if (!job->row_id) {
        if (job->kind == STORE_SEARCH && !srv_search_available()) {
            fail_all(s, job, RPC_UNIMPLEMENTED,
                     "this autopartd was built without the search engine (search/search.h is not in this build); "
                     "the request is valid: use Apply with a manual schedule meanwhile");
            remove_job(s, job);
            return;
        }
        if (!srv_can_submit(s, pool, job->req_bytes)) { /* before a row exists: not accepted yet */
            fail_all(s, job, RPC_RESOURCE_EXHAUSTED, "the queue is full; try again later");
            remove_job(s, job);
            return;
        }
        store_new n;
        uint8_t *req_bytes = NULL;
        row_new_fields(job, &n, &req_bytes);
        store_row row;
        bool created;
        int64_t now = srv_now_us();
        int rc = req_bytes ? store_begin(s->db, &n, now, now + SRV_LEASE_US, &row, &created, &err)
                           : ap_error_set(&err, AP_ENOMEM, "out of memory");
        ap_free(req_bytes);
        if (rc < 0) {
            fail_all(s, job, RPC_UNAVAILABLE, err.msg);
            remove_job(s, job);
            return;
        }
        if (!created) {
            if (row.status == STORE_DONE) {
                for (srv_waiter *wt = job->waiters, *nx; wt; wt = nx) {
                    nx = wt->next;
                    rpc_call *call = wt->call;
                    int method = wt->method;
                    waiter_free(wt);
                    answer_from_store(s, call, method, &row, job->have_raw ? job->raw : NULL);
                }
                job->waiters = NULL;
                remove_job(s, job);
            } else {
                make_remote(s, job, &row);
            }
            return;
        }
        job->row_id = row.id;
        for (srv_waiter *wt = job->waiters; wt; wt = wt->next)
            send_accepted(s, wt);
        if (!job->waiters && job->kind == STORE_SEARCH) /* its client left while it was read */
            job->alone_us = srv_now_us();
    }
    if (atomic_load(&job->cancel) == CANCEL_ALONE) { /* given up while it was read */
        if (!job->waiters) {
            end_alone(s, job);
            return;
        }
        atomic_store(&job->cancel, CANCEL_NONE);
    }
    if (!srv_submit(s, job, TASK_RUN, pool)) {
        give_back(s, job);
        return;
    }
    s->stats.started++;
}

/* A search nobody waits for any more stops, resumable: its row ends
 * CANCELLED and keeps its checkpoint, which the next request of its key
 * takes over (store_begin). */
static void end_alone(srv *s, srv_job *job)
{
    ap_error err;
    if (store_finish(s->db, job->row_id, STORE_CANCELLED, srv_now_us(), NULL, 0, NULL,
                     "stopped: every client went away (asking again resumes it from its checkpoint)", &err) < 0)
        srv_log(s, "search %" PRId64 ": %s", job->row_id, err.msg);
    else
        srv_log(s, "search %" PRId64 " stopped: every client went away; it resumes when asked again", job->row_id);
    remove_job(s, job);
}

static void run_done(srv *s, srv_job *job)
{
    srv_work *w = &job->work;
    ap_error err;
    int64_t now = srv_now_us();
    int cancel = atomic_load(&job->cancel);
    if (cancel == CANCEL_SHUTDOWN) {
        remove_job(s, job); /* the row goes back to the queue for the next daemon */
        return;
    }
    if (cancel == CANCEL_ALONE && w->code != RPC_OK) {
        if (job->prog_dirty || job->ckpt)
            checkpoint_one(s, job, now);
        if (job->waiters) { /* someone asked again meanwhile: run on from the checkpoint */
            atomic_store(&job->cancel, CANCEL_NONE);
            give_back(s, job);
        } else {
            end_alone(s, job);
        }
        return;
    }
    if (w->code == RPC_OK) {
        if (job->kind == STORE_SEARCH) {
            double secs = (double)(now - job->started_us) / 1e6;
            atomic_fetch_add(&s->metrics.searches_done, 1);
            srv_hist_observe(&s->metrics.search_seconds, secs);
            if (secs > 0)
                srv_hist_observe(&s->metrics.search_eps, (double)w->summary.episodes / secs);
        }
        if (store_finish(s->db, job->row_id, STORE_DONE, now, w->result, w->result_len, &w->summary, NULL, &err) < 0) {
            srv_log(s, "search %" PRId64 ": %s", job->row_id, err.msg);
            fail_all(s, job, RPC_UNAVAILABLE, err.msg);
        } else {
            if (w->replayed)
                srv_log(s, "search %" PRId64 " done: %" PRId64 " episodes, %" PRId64 " of them replayed from its checkpoint",
                        job->row_id, w->summary.episodes, w->replayed);
            answer_all(s, job, w->result, w->result_len);
        }
    } else {
        if (job->kind == STORE_SEARCH)
            atomic_fetch_add(&s->metrics.searches_failed, 1);
        if (store_finish(s->db, job->row_id, STORE_FAILED, now, NULL, 0, NULL, w->msg, &err) < 0)
            srv_log(s, "search %" PRId64 ": %s", job->row_id, err.msg);
        fail_all(s, job, w->code, w->msg);
    }
    remove_job(s, job);
}

void srv_job_task_done(srv *s, srv_job *job)
{
    if (job->ended) { /* its row was ended while the task ran (a cancellation) */
        remove_job(s, job);
        return;
    }
    if (atomic_load(&job->cancel) == CANCEL_SHUTDOWN) {
        if (job->task == TASK_RUN && (job->prog_dirty || job->ckpt)) /* for the next run to resume from */
            checkpoint_one(s, job, srv_now_us());
        remove_job(s, job);
        return;
    }
    if (job->task == TASK_PREPARE)
        prepare_done(s, job);
    else
        run_done(s, job);
}

/* ============================================================= progress */

void srv_job_progress(srv *s, srv_job *job)
{
    uv_mutex_lock(&job->pmu);
    Autopart__V1__Progress p = AUTOPART__V1__PROGRESS__INIT;
    p.episodes = job->prog.episodes;
    p.best_runtime_s = job->prog.best_runtime_s;
    p.best_peak_memory_bytes = job->prog.best_peak_memory;
    p.best_schedule = job->prog_schedule ? job->prog_schedule : (char *)"";
    p.episodes_per_s = job->prog_eps;
    p.tree_size = job->prog_tree;
    p.elapsed_s = job->prog_elapsed;
    p.best_fits = job->prog_fits;
    p.start_runtime_s = job->prog_start;
    double best = job->prog.best_runtime_s;
    Autopart__V1__SearchEvent ev = AUTOPART__V1__SEARCH_EVENT__INIT;
    ev.event_case = AUTOPART__V1__SEARCH_EVENT__EVENT_PROGRESS;
    ev.progress = &p;
    size_t len = autopart__v1__search_event__get_packed_size(&ev);
    uint8_t *buf = ap_malloc(len ? len : 1);
    if (buf)
        autopart__v1__search_event__pack(&ev, buf);
    uv_mutex_unlock(&job->pmu);
    job->prog_dirty = true;
    /* A better answer is a point of the history at once (at most every
     * SRV_POINT_US), so that the dashboard's curve shows short searches
     * and each step of long ones, not only the 2 s checkpoints. */
    int64_t now = srv_now_us();
    if (job->stage == JOB_RUNNING && !job->ended && best > 0 && (job->ckpt_best == 0 || best < job->ckpt_best) && now - job->ckpt_us >= SRV_POINT_US)
        checkpoint_one(s, job, now);
    if (!buf)
        return;
    /* Progress is lossy: a client that does not read gets fewer events. */
    for (srv_waiter *w = job->waiters; w; w = w->next)
        if (w->method == M_SEARCH && rpc_backlog(w->call) < 2)
            rpc_send(w->call, buf, len);
    ap_free(buf);
}

/* Progress of a row another daemon runs, from the store. */
static void remote_progress(srv *s, srv_job *job, const store_row *row)
{
    char *sched = NULL;
    ap_error err;
    if (store_best_schedule(s->db, row->id, &sched, &err) < 0)
        sched = NULL;
    Autopart__V1__Progress p = AUTOPART__V1__PROGRESS__INIT;
    p.episodes = row->episodes;
    p.best_runtime_s = row->best_runtime_s;
    p.best_peak_memory_bytes = row->best_peak_memory;
    p.best_schedule = sched ? sched : (char *)"";
    p.elapsed_s = row->started_us ? (double)(srv_now_us() - row->started_us) / 1e6 : 0;
    Autopart__V1__SearchEvent ev = AUTOPART__V1__SEARCH_EVENT__INIT;
    ev.event_case = AUTOPART__V1__SEARCH_EVENT__EVENT_PROGRESS;
    ev.progress = &p;
    size_t len = autopart__v1__search_event__get_packed_size(&ev);
    uint8_t *buf = ap_malloc(len ? len : 1);
    if (buf) {
        autopart__v1__search_event__pack(&ev, buf);
        for (srv_waiter *w = job->waiters; w; w = w->next)
            if (w->method == M_SEARCH && rpc_backlog(w->call) < 2)
                rpc_send(w->call, buf, len);
    }
    ap_free(buf);
    ap_free(sched);
}

/* ============================================================ the timer */

static void poll_remote(srv *s)
{
    ap_error err;
    for (srv_job *job = s->jobs, *next; job; job = next) {
        next = job->next;
        if (job->stage != JOB_REMOTE)
            continue;
        store_row row;
        int rc = store_get(s->db, job->row_id, &row, &err);
        if (rc < 0)
            continue; /* busy: next time */
        if (rc == 0) {
            fail_all(s, job, RPC_INTERNAL, "the search's row vanished from the store");
            remove_job(s, job);
        } else if (row.status == STORE_DONE) {
            void *res;
            size_t len;
            rc = store_payload(s->db, row.id, STORE_PAYLOAD_RESULT, &res, &len, &err);
            if (rc <= 0) {
                fail_all(s, job, RPC_INTERNAL, "the search is done but its result cannot be read");
            } else {
                answer_all(s, job, res, len);
                ap_free(res);
            }
            remove_job(s, job);
        } else if (row.status == STORE_FAILED || row.status == STORE_CANCELLED) {
            char msg[700];
            snprintf(msg, sizeof msg, "search %" PRId64 " %s in another daemon: %s", row.id,
                     row.status == STORE_FAILED ? "failed" : "was cancelled", row.error);
            fail_all(s, job, row.status == STORE_FAILED ? RPC_ABORTED : RPC_CANCELLED, msg);
            remove_job(s, job);
        } else if (row.progress_us != job->remote_progress_us) {
            job->remote_progress_us = row.progress_us;
            if (row.progress_us)
                remote_progress(s, job, &row);
        }
    }
}

/* Workers of a pool free for more work: idle ones, less the jobs queued
 * for it and the searches being read (each will want a search worker). */
static int room_in(srv *s, int pool)
{
    srv_pool *p = &s->pools[pool];
    int room = p->n - p->busy - p->queue.count;
    if (pool == POOL_SEARCH)
        for (srv_job *j = s->jobs; j; j = j->next)
            room -= j->kind == STORE_SEARCH && !j->ended &&
                    (j->stage == JOB_PREPARE_WAIT || j->stage == JOB_PREPARING);
    return room;
}

/* Takes over one claimed row: read its request again, then run it. */
static void take_over(srv *s, const store_claim *cl, int64_t now)
{
    ap_error err;
    store_row row;
    void *req = NULL;
    size_t len = 0;
    if (store_get(s->db, cl->id, &row, &err) != 1 ||
        store_payload(s->db, cl->id, STORE_PAYLOAD_REQUEST, &req, &len, &err) != 1) {
        store_finish(s->db, cl->id, STORE_FAILED, now, NULL, 0, NULL, "its stored request cannot be read", &err);
        return;
    }
    const ProtobufCMessageDescriptor *d = row.kind == STORE_SEARCH ? &autopart__v1__search_request__descriptor
                                                                   : &autopart__v1__apply_request__descriptor;
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, len, req);
    ap_free(req);
    if (!msg) {
        store_finish(s->db, cl->id, STORE_FAILED, now, NULL, 0, NULL, "its stored request does not unpack", &err);
        return;
    }
    srv_job *job = find_job(s, NULL, NULL, cl->id, 0, NULL); /* calls of this daemon wait on it */
    if (!job)
        job = job_new(s, row.kind, row.client_label);
    if (!job) {
        protobuf_c_message_free_unpacked(msg, NULL);
        if (store_release(s->db, cl->id, &err) < 0)
            srv_log(s, "search %" PRId64 ": %s", cl->id, err.msg);
        return;
    }
    char before[96];
    if (row.attempts)
        snprintf(before, sizeof before, "interrupted in its run %u, at episode %" PRId64, row.attempts,
                 row.episodes);
    else
        snprintf(before, sizeof before, "never started");
    atomic_fetch_add(&s->metrics.taken_over, 1);
    srv_log(s, "taking over %s %" PRId64 " (%s) from %s: %s", row.kind == STORE_SEARCH ? "search" : "apply",
            row.id, row.module_name, cl->prev_owner[0] ? cl->prev_owner : "the store (given back at a shutdown)",
            before);
    srv_work_release(&job->work);
    job->work.req = msg;
    job->work.kind = row.kind;
    job->work.key_known = true;
    memcpy(job->work.expect_key, row.key, STORE_KEY_BYTES);
    job->work.threads = search_threads(s, row.kind, msg);
    job->row_id = row.id;
    job->have_key = true;
    memcpy(job->key, row.key, STORE_KEY_BYTES);
    job->req_bytes = (int64_t)len;
    if (!srv_submit(s, job, TASK_PREPARE, POOL_INTAKE))
        give_back(s, job);
}

/* Takes over rows of crashed daemons (and of this daemon's previous life),
 * as many as it has workers free for: the rest wait in the store, queued,
 * for the first daemon with room.  An accepted request is never failed
 * for want of room. */
static void claim_orphans(srv *s, int64_t now)
{
    static const struct {
        int kind, pool;
    } kinds[] = {{STORE_SEARCH, POOL_SEARCH}, {STORE_APPLY, POOL_INTAKE}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        store_claim cl[16];
        int room = room_in(s, kinds[k].pool);
        if (room <= 0)
            continue;
        ap_error err;
        int n = store_claim_orphans(s->db, kinds[k].kind, now, now + SRV_LEASE_US, cl, room < 16 ? room : 16, &err);
        if (n < 0) {
            srv_log(s, "looking for orphaned searches: %s", err.msg);
            return;
        }
        for (int i = 0; i < n; i++)
            take_over(s, &cl[i], now);
    }
}

static void checkpoint(srv *s, int64_t now)
{
    for (srv_job *job = s->jobs; job; job = job->next)
        if (job->stage == JOB_RUNNING && !job->ended && job->prog_dirty)
            checkpoint_one(s, job, now);
}

/* Rows other daemons run that calls here wait on: marked in the store, so
 * that their owner does not give them up for want of clients. */
static void watch_remote(srv *s, int64_t now)
{
    int64_t ids[64];
    int n = 0;
    ap_error err;
    for (srv_job *j = s->jobs; j; j = j->next)
        if (j->stage == JOB_REMOTE && j->waiters && j->row_id) {
            ids[n++] = j->row_id;
            if (n == 64) {
                if (store_watch(s->db, ids, n, now + SRV_LEASE_US, &err) < 0)
                    srv_log(s, "watch: %s", err.msg);
                n = 0;
            }
        }
    if (n && store_watch(s->db, ids, n, now + SRV_LEASE_US, &err) < 0)
        srv_log(s, "watch: %s", err.msg);
}

/* Searches no call has waited on for --abandon-after seconds, here or in
 * another daemon: stopped, resumable (a search asked for once and then
 * forgotten must not hold a worker for ever). */
static void give_up_alone(srv *s, int64_t now)
{
    int64_t after = (int64_t)(s->opt.abandon_s * 1e6);
    for (srv_job *job = s->jobs, *next; job; job = next) {
        next = job->next;
        if (!job->alone_us || job->waiters || job->ended || !job->row_id || now - job->alone_us < after ||
            atomic_load(&job->cancel) != CANCEL_NONE ||
            (job->stage != JOB_RUN_WAIT && job->stage != JOB_RUNNING && job->stage != JOB_PREPARING))
            continue;
        store_row row;
        ap_error err;
        if (store_get(s->db, job->row_id, &row, &err) == 1 && row.watched_until_us > now) {
            job->alone_us = now; /* watched from another daemon: look again later */
            continue;
        }
        if (job->stage == JOB_RUN_WAIT) {
            srv_unqueue(s, job);
            end_alone(s, job);
        } else {
            atomic_store(&job->cancel, CANCEL_ALONE); /* its task stops; run_done ends it */
        }
    }
}

/* --keep-days, --keep-max-mb: at most 2,000 rows a minute, in short
 * transactions, so that the loop is never held long. */
static void retention(srv *s, int64_t now)
{
    store_gc_policy p = {
        .keep_us = (int64_t)(s->opt.keep_days * 86400e6),
        .max_bytes = s->opt.keep_max_bytes,
        .protect_us = SRV_GC_PROTECT_US,
        .max_rows = 2000,
    };
    store_gc_result r;
    ap_error err;
    if (store_gc(s->db, &p, now, &r, &err) < 0)
        srv_log(s, "retention: %s", err.msg);
    else if (r.rows)
        srv_log(s, "retention: %d rows deleted, the store's pages in use %.1f -> %.1f MiB", r.rows,
                (double)r.bytes_before / (1 << 20), (double)r.bytes_after / (1 << 20));
}

void srv_jobs_tick(srv *s, int64_t now)
{
    ap_error err;
    if (now - s->last_remote >= SRV_REMOTE_POLL_US) {
        s->last_remote = now;
        poll_remote(s);
        /* cancellations asked through another daemon: an indexed look at
         * this daemon's unfinished rows */
        int64_t ids[32];
        int n = s->stopping ? 0 : store_cancel_requests(s->db, ids, 32, &err);
        for (int i = 0; i < n; i++) {
            srv_job *job = find_job(s, NULL, NULL, ids[i], 0, NULL);
            int st;
            if (job && atomic_load(&job->cancel) == CANCEL_NONE)
                srv_job_cancel(s, ids[i], &st, &err);
        }
    }
    if (now - s->last_flush >= SRV_HITS_FLUSH_US) {
        s->last_flush = now;
        srv_flush_hits(s);
    }
    if (now - s->last_heartbeat >= SRV_HEARTBEAT_US) {
        s->last_heartbeat = now;
        if (store_heartbeat(s->db, now + SRV_LEASE_US, &err) < 0)
            srv_log(s, "heartbeat: %s", err.msg);
        watch_remote(s, now);
    }
    if (!s->stopping)
        give_up_alone(s, now);
    if (now - s->last_ckpt >= SRV_CHECKPOINT_US) {
        s->last_ckpt = now;
        checkpoint(s, now);
    }
    if (!s->stopping && (s->opt.keep_days > 0 || s->opt.keep_max_bytes > 0) && now - s->last_gc >= SRV_GC_US) {
        s->last_gc = now;
        retention(s, now);
    }
    if (!s->stopping && now - s->last_sweep >= SRV_SWEEP_US) {
        s->last_sweep = now;
        claim_orphans(s, now);
    }
}

/* ============================================================== control */

int srv_job_cancel(srv *s, int64_t id, int *status, ap_error *err)
{
    srv_job *job = find_job(s, NULL, NULL, id, 0, NULL);
    if (job && job->stage != JOB_REMOTE) {
        /* The row ends now, whatever the task does: a task slow to notice
         * (a long parse, a lowering, a bug) must not leave it running.  The
         * job waits, out of sight, for its task to come back. */
        atomic_store(&job->cancel, CANCEL_USER);
        if (job->stage == JOB_RUN_WAIT || job->stage == JOB_PREPARE_WAIT)
            srv_unqueue(s, job);
        int rc = store_finish(s->db, id, STORE_CANCELLED, srv_now_us(), NULL, 0, NULL, "cancelled", err);
        fail_all(s, job, RPC_CANCELLED, "the search was cancelled");
        if (job->stage == JOB_PREPARING || job->stage == JOB_RUNNING)
            job->ended = true;
        else
            remove_job(s, job);
        *status = STORE_CANCELLED;
        return rc < 0 && err->code != AP_ECONFLICT ? rc : 1;
    }
    return store_request_cancel(s->db, id, srv_now_us(), status, err);
}

void srv_jobs_shutdown(srv *s)
{
    for (srv_job *job = s->jobs, *next; job; job = next) {
        next = job->next;
        fail_all(s, job, RPC_UNAVAILABLE,
                 "autopartd is shutting down; the search goes on when a daemon sharing the store runs again");
        if (job->stage == JOB_PREPARING || job->stage == JOB_RUNNING) {
            atomic_store(&job->cancel, CANCEL_SHUTDOWN); /* freed when its task returns */
        } else {
            if (job->stage == JOB_PREPARE_WAIT || job->stage == JOB_RUN_WAIT)
                srv_unqueue(s, job);
            remove_job(s, job);
        }
    }
}

void srv_jobs_abandon(srv *s)
{
    int64_t now = srv_now_us();
    for (srv_job *job = s->jobs; job; job = job->next)
        if (job->stage == JOB_RUNNING && !job->ended && job->prog_dirty)
            checkpoint_one(s, job, now);
}

void srv_job_load_checkpoint(srv *s, srv_job *job)
{
    ap_error err;
    srv_work *w = &job->work;
    ap_free(w->resume);
    w->resume = NULL;
    w->resume_len = 0;
    if (job->kind != STORE_SEARCH)
        return;
    if (store_payload(s->db, job->row_id, STORE_PAYLOAD_CHECKPOINT, &w->resume, &w->resume_len, &err) < 0)
        srv_log(s, "search %" PRId64 ": its checkpoint cannot be read (%s): it starts afresh", job->row_id, err.msg);
    else if (w->resume)
        srv_log(s, "search %" PRId64 " resumes from its checkpoint (%zu KiB)", job->row_id, w->resume_len >> 10);
}
