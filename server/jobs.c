/*
 * jobs.c - the life of a search or an Apply in autopartd, on the loop
 * thread: find what a request joins (a job of this daemon, an answer in the
 * store, a row another daemon runs) or start a job; move it through
 * prepare -> row in the store -> run -> answer; answer every call waiting on
 * it; and keep the rows honest (heartbeats, checkpoints, rows of dead
 * daemons, cancellations asked through another daemon).  Every step that
 * needs the store is an operation on the store's thread (db.c) whose
 * callback takes the next step: the loop never waits for the store.
 *
 *   request --raw hash--> job of this daemon? join
 *           --(store) alias--> key --> job with the key? join
 *                                  --> done row? answer from the store (cache hit)
 *                                  --> row another daemon runs? join it (polled)
 *           otherwise: prepare (parse, validate, key) on a worker, then the
 *           same by key, then (store) a new row, then a run.
 *
 * Work is shared by the daemons of a store.  A row made while this daemon
 * has no free worker is left in the store without an owner: its job waits
 * in the local fair queue, and whichever daemon has a worker first takes
 * the row (store_claim; FOR UPDATE SKIP LOCKED on PostgreSQL).  A daemon
 * with free workers and nothing queued here takes such rows, and rows whose
 * owner died (its lease ran out, or its process on this node is gone), from
 * the store (the sweep).  A job whose row another daemon took waits for the
 * row's end (polled), streaming its progress to its callers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

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

static void job_task_work(srv_task *t, void *ctx);
static void checkpoint_one(srv *s, srv_job *job, int64_t now);
static void job_task_done(srv *s, srv_task *t);
static void job_progress_done(srv *s, srv_task *t);
static void job_start(srv *s, srv_job *job);

static srv_job *job_new(srv *s, int kind, const char *client)
{
    srv_job *j = ap_calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->srv = s;
    j->kind = kind;
    j->work.kind = kind;
    j->worker_task.work = job_task_work;
    j->worker_task.done = job_task_done;
    j->progress_task.done = job_progress_done;
    snprintf(j->client, sizeof j->client, "%s", client);
    atomic_init(&j->cancel, CANCEL_NONE);
    atomic_init(&j->prog_posted, false);
    uv_mutex_init(&j->pmu);
    j->next = s->jobs;
    s->jobs = j;
    return j;
}

static void job_unlink(srv *s, srv_job *job)
{
    for (srv_job **p = &s->jobs; *p; p = &(*p)->next)
        if (*p == job) {
            *p = job->next;
            return;
        }
}

/* Takes a job out of the daemon; freed now, or when the store operations
 * that hold it are done. */
static void remove_job(srv *s, srv_job *job)
{
    job_unlink(s, job);
    job->dead = true;
    if (!job->dbops)
        srv_job_free(job);
}

int srv_jobs_count(srv *s, int stage)
{
    int n = 0;
    for (srv_job *j = s->jobs; j; j = j->next)
        n += (int)j->stage == stage;
    return n;
}

static void count_join(srv *s)
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

static int pool_of(const srv_job *job)
{
    return job->kind == STORE_SEARCH ? POOL_SEARCH : POOL_INTAKE;
}

/* ========================================================= pools' queues */

/* A worker of the pool kept for a job whose task will be handed over with
 * hand_over (after the store said yes), or given back (unkeep). */
static bool keep_worker(srv *s, int pool)
{
    srv_pool *p = &s->pools[pool];
    if (p->busy >= p->n)
        return false;
    p->busy++;
    atomic_store(&s->metrics.busy[pool], p->busy);
    return true;
}

static void unkeep(srv *s, int pool)
{
    srv_pool *p = &s->pools[pool];
    p->busy--;
    atomic_store(&s->metrics.busy[pool], p->busy);
    srv_pump(s, pool);
}

/* Hands a job's task to a worker kept for it. */
static void hand_over(srv *s, srv_job *job, int task, int pool)
{
    job->task = task;
    job->pool = pool;
    job->stage = task == TASK_PREPARE ? JOB_PREPARING : JOB_RUNNING;
    if (task == TASK_RUN) {
        job->started_us = ap_now_us();
        if (job->kind == STORE_SEARCH)
            atomic_fetch_add(&s->metrics.searches_running, 1);
    }
    srv_pool_push(&s->pools[pool], &job->worker_task);
}

/* A job's turn: a prepare goes to the worker; a run first takes and
 * starts its row in the store (job_start), then goes. */
static void give_worker(srv *s, srv_job *job, int task, int pool)
{
    if (task == TASK_PREPARE)
        hand_over(s, job, task, pool);
    else
        job_start(s, job);
}

/* Queues a job's task in its pool (run at once when a worker is free);
 * false when the queue is full. */
static bool submit(srv *s, srv_job *job, int task, int pool)
{
    srv_pool *p = &s->pools[pool];
    job->task = task;
    job->pool = pool;
    if (ap_now_us() >= p->paused_until && keep_worker(s, pool)) {
        give_worker(s, job, task, pool);
        return true;
    }
    /* Waiting requests hold their modules in memory: bounded in bytes too. */
    if (s->queued_bytes + job->req_bytes > s->opt.max_queued_bytes ||
        !(job->urgent ? srv_fq_push_first : srv_fq_push)(&p->queue, job))
        return false;
    s->queued_bytes += job->req_bytes;
    job->queued_us = ap_now_us();
    job->stage = task == TASK_PREPARE ? JOB_PREPARE_WAIT : JOB_RUN_WAIT;
    atomic_store(&s->metrics.queued[pool], p->queue.count);
    return true;
}

/* Whether submit would take a job of `bytes` into the pool now. */
static bool can_submit(srv *s, int pool, int64_t bytes)
{
    srv_pool *p = &s->pools[pool];
    return p->busy < p->n || (p->queue.count < p->queue.max && s->queued_bytes + bytes <= s->opt.max_queued_bytes);
}

/* The next queued jobs of a pool, for its free workers. */
void srv_pump(srv *s, int pool)
{
    srv_pool *p = &s->pools[pool];
    srv_job *j;
    if (ap_now_us() < p->paused_until)
        return; /* the timer pumps again */
    while (p->busy < p->n && (j = srv_fq_pop(&p->queue))) {
        s->queued_bytes -= j->req_bytes;
        atomic_store(&s->metrics.queued[pool], p->queue.count);
        srv_hist_observe(&s->metrics.queue_wait[pool], (double)(ap_now_us() - j->queued_us) / 1e6);
        keep_worker(s, pool);
        give_worker(s, j, j->task, pool);
    }
}

/* Takes a job out of its pool's queue (cancel); false if it was not there. */
static bool unqueue(srv *s, srv_job *job)
{
    if (!srv_fq_remove(&s->pools[job->pool].queue, job))
        return false;
    s->queued_bytes -= job->req_bytes;
    atomic_store(&s->metrics.queued[job->pool], s->pools[job->pool].queue.count);
    return true;
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

static void send_accepted(srv_waiter *w)
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
            send_accepted(w);
        rpc_call *call = w->call;
        int method = w->method, origin = w->origin;
        waiter_free(w);
        size_t nb = 0;
        uint8_t *buf = answer_bytes(method, job->row_id, origin, res, len, &nb);
        if (!buf) {
            srv_fail(s, call, RPC_RESOURCE_EXHAUSTED, "out of memory sending the answer");
            continue;
        }
        rpc_finish(call, RPC_OK, NULL, buf, nb);
        ap_free(buf);
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
        count_join(s);
    send_accepted(w);
}

/* The callers of `from` wait on `to` from now on: they joined it. */
static void move_waiters(srv *s, srv_job *from, srv_job *to)
{
    for (srv_waiter *w = from->waiters, *n; w; w = n) {
        n = w->next;
        w->job = to;
        if (w->origin == AUTOPART__V1__ORIGIN__NEW) {
            w->origin = AUTOPART__V1__ORIGIN__JOINED;
            count_join(s);
        }
        w->next = to->waiters;
        to->waiters = w;
        to->alone_us = 0;
        send_accepted(w);
    }
    from->waiters = NULL;
}

void srv_job_detach(srv *s, srv_waiter *w)
{
    (void)s;
    if (w->job) {
        waiter_unlink(w->job, w);
        if (!w->job->waiters && w->job->kind == STORE_SEARCH)
            w->job->alone_us = ap_now_us(); /* srv_jobs_tick gives it up if nobody comes back */
    }
    rpc_call *call = w->call;
    waiter_free(w);
    /* The client is gone: the status goes nowhere, but the call is ours to
     * finish.  The job goes on: its answer is stored for the next asker. */
    rpc_finish(call, RPC_CANCELLED, "the client went away", NULL, 0);
}

/* Answers every caller of the job from a done row's stored result (a cache
 * hit), and keeps the packed answer in memory for the next request written
 * as the job's raw request. */
static void answer_stored(srv *s, srv_job *job, int64_t row_id, const uint8_t *key, const void *res, size_t len)
{
    rpc_shared *first[M__COUNT] = {0}, *last[M__COUNT] = {0};
    for (srv_waiter *w = job->waiters, *n; w; w = n) {
        n = w->next;
        rpc_call *call = w->call;
        int m = w->method;
        waiter_free(w);
        if (!last[m]) {
            size_t nb = 0;
            uint8_t *buf = answer_bytes(m, row_id, AUTOPART__V1__ORIGIN__CACHE_HIT, res, len, &nb);
            if (buf)
                last[m] = rpc_shared_new(buf, nb);
            ap_free(buf);
            if (last[m] && m == M_SEARCH) {
                buf = accepted_bytes(row_id, AUTOPART__V1__ORIGIN__CACHE_HIT, key, &nb);
                if (buf)
                    first[m] = rpc_shared_new(buf, nb);
                ap_free(buf);
                if (!first[m]) {
                    rpc_shared_unref(last[m]);
                    last[m] = NULL;
                }
            }
        }
        if (!last[m]) {
            srv_fail(s, call, RPC_RESOURCE_EXHAUSTED, "out of memory sending the answer");
            continue;
        }
        atomic_fetch_add(&s->stats.cache_hits, 1);
        atomic_fetch_add(&s->metrics.hits_store, 1);
        add_hits(s, row_id, 1);
        if (first[m])
            rpc_send_shared(call, first[m]);
        rpc_finish_shared(call, RPC_OK, NULL, last[m]);
    }
    job->waiters = NULL;
    for (int m = 0; m < M__COUNT; m++) {
        if (last[m] && job->have_raw && m == (job->kind == STORE_SEARCH ? M_SEARCH : M_APPLY))
            srv_cache_put(s->cache, m, job->raw, row_id, first[m], last[m]);
        rpc_shared_unref(first[m]);
        rpc_shared_unref(last[m]);
    }
}

/* A job whose row another daemon runs (or may take): polled until it ends.
 * What it prepared is dropped. */
static void make_remote(srv *s, srv_job *job, const store_row *row)
{
    job->stage = JOB_REMOTE;
    job->row_id = row->id;
    job->row_owned = false;
    job->have_key = true;
    memcpy(job->key, row->key, STORE_KEY_BYTES);
    job->remote_progress_us = -1;
    for (srv_waiter *w = job->waiters; w; w = w->next) {
        if (w->origin == AUTOPART__V1__ORIGIN__NEW) {
            w->origin = AUTOPART__V1__ORIGIN__JOINED;
            count_join(s);
        }
        send_accepted(w);
    }
    srv_work_release(&job->work);
}

/* The store could not be asked: every caller hears it, the job goes. */
static void store_failed(srv *s, srv_job *job, const ap_error *err)
{
    fail_all(s, job, err->code == AP_ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_UNAVAILABLE, err->msg);
    remove_job(s, job);
}

static void cancel_reply(srv *s, rpc_call *c, int status)
{
    Autopart__V1__CancelSearchResponse resp = AUTOPART__V1__CANCEL_SEARCH_RESPONSE__INIT;
    resp.status = (Autopart__V1__SearchStatus)status;
    srv_reply(s, c, &resp.base);
}

/* Ends a row in the store, answering nobody (a job gone, a row that cannot
 * run); or, a cancellation (op.job set), then answering the job's callers
 * and the CancelSearch call. */
typedef struct op_finish {
    srv_dbop op;
    int64_t id, now;
    int status;
    bool alone; /* given up for want of callers: say so */
    rpc_call *cancel_call; /* a cancellation: the CancelSearch call, or NULL */
    char msg[1024];
} op_finish;

static void finish_fn(store *db, srv_dbop *op)
{
    op_finish *o = (op_finish *)op;
    op->rc = store_finish(db, o->id, o->status, o->now, NULL, 0, NULL, o->msg, &op->err);
}

static void finish_cb(srv *s, srv_dbop *op)
{
    op_finish *o = (op_finish *)op;
    if (op->rc < 0 && op->rc != AP_ECONFLICT)
        srv_log(s, "search %" PRId64 ": %s", o->id, op->err.msg);
    else if (op->rc == 0 && o->alone)
        srv_log(s, "search %" PRId64 " stopped: every client went away; it resumes when asked again", o->id);
    if (op->job) { /* a cancellation: the search stopped here whatever the store said */
        fail_all(s, op->job, RPC_CANCELLED, "the search was cancelled");
        if (o->cancel_call)
            cancel_reply(s, o->cancel_call, STORE_CANCELLED);
    }
}

/* Gives a row of this daemon back to the store, queued for any daemon. */
typedef struct op_release {
    srv_dbop op;
    int64_t id;
} op_release;

static void release_fn(store *db, srv_dbop *op)
{
    op->rc = store_release(db, ((op_release *)op)->id, &op->err);
}

static void release_cb(srv *s, srv_dbop *op)
{
    if (op->rc < 0)
        srv_log(s, "search %" PRId64 ": giving it back: %s", ((op_release *)op)->id, op->err.msg);
}

static void release_row(srv *s, int64_t id)
{
    op_release *o = srv_db_new(s, sizeof *o, release_fn, release_cb, NULL);
    if (!o) {
        srv_log(s, "search %" PRId64 ": out of memory giving it back (its lease will run out)", id);
        return;
    }
    o->id = id;
    srv_db_submit(s, &o->op);
}

static void end_row_as(srv *s, int64_t id, int status, const char *msg, bool alone)
{
    op_finish *o = srv_db_new(s, sizeof *o, finish_fn, finish_cb, NULL);
    if (!o) {
        srv_log(s, "search %" PRId64 ": out of memory ending it (its lease will run out)", id);
        return;
    }
    o->id = id;
    o->now = ap_now_us();
    o->status = status;
    o->alone = alone;
    snprintf(o->msg, sizeof o->msg, "%s", msg);
    srv_db_submit(s, &o->op);
}

static void end_row(srv *s, int64_t id, int status, const char *msg)
{
    end_row_as(s, id, status, msg, false);
}

/* A job cancelled (by CancelSearch `c`, or NULL: by another daemon's): its
 * row ends CANCELLED, and only then are its callers and c told, so that
 * whoever reads the store after hearing it (a dashboard, another daemon,
 * the client itself) reads it cancelled.  The operation holds the job:
 * the caller may remove it meanwhile. */
static void end_cancelled(srv *s, srv_job *job, rpc_call *c)
{
    op_finish *o = job->row_id ? srv_db_new(s, sizeof *o, finish_fn, finish_cb, job) : NULL;
    if (!o) { /* no row yet; or out of memory (then its lease runs out) */
        fail_all(s, job, RPC_CANCELLED, "the search was cancelled");
        if (c)
            cancel_reply(s, c, STORE_CANCELLED);
        return;
    }
    o->id = job->row_id;
    o->now = ap_now_us();
    o->status = STORE_CANCELLED;
    o->cancel_call = c;
    snprintf(o->msg, sizeof o->msg, "cancelled");
    srv_db_submit(s, &o->op);
}

/* A search nobody waits for any more stops, resumable: its row ends
 * CANCELLED and keeps its checkpoint, which the next request of its key
 * takes over (store_begin). */
static void end_alone(srv *s, srv_job *job)
{
    end_row_as(s, job->row_id, STORE_CANCELLED,
               "stopped: every client went away (asking again resumes it from its checkpoint)", true);
    remove_job(s, job);
}

/* ============================================================== requests */

/* A request seen before?  Its key (alias), the key's live row, and a done
 * row's result, in one trip to the store. */
typedef struct op_lookup {
    srv_dbop op;
    uint8_t raw[STORE_KEY_BYTES], key[STORE_KEY_BYTES];
    bool aliased, live;
    store_row row;
    void *res;
    size_t len;
} op_lookup;

static void lookup_fn(store *db, srv_dbop *op)
{
    op_lookup *o = (op_lookup *)op;
    int rc = store_alias_get(db, o->raw, o->key, &op->err);
    if (rc <= 0) {
        op->rc = rc;
        return;
    }
    o->aliased = true;
    if ((rc = store_find_live(db, o->key, &o->row, &op->err)) <= 0) {
        op->rc = rc;
        return;
    }
    o->live = true;
    if (o->row.status == STORE_DONE &&
        (rc = store_payload(db, o->row.id, STORE_PAYLOAD_RESULT, &o->res, &o->len, &op->err)) == 0)
        rc = ap_error_set(&op->err, AP_EIO, "search %" PRId64 " is done but its result is not stored", o->row.id);
    op->rc = rc < 0 ? rc : 0;
}

static void lookup_cleanup(srv_dbop *op)
{
    ap_free(((op_lookup *)op)->res);
}

static void prepare(srv *s, srv_job *job);

static void lookup_cb(srv *s, srv_dbop *op)
{
    op_lookup *o = (op_lookup *)op;
    srv_job *job = op->job, *other;
    if (job->dead)
        return;
    if (job->ended) {
        remove_job(s, job);
        return;
    }
    if (op->rc < 0) {
        store_failed(s, job, &op->err);
        return;
    }
    if (o->aliased) {
        if ((other = find_job(s, NULL, o->key, 0, job->kind, job))) {
            move_waiters(s, job, other);
            remove_job(s, job);
            return;
        }
        if (o->live && o->row.status == STORE_DONE) {
            answer_stored(s, job, o->row.id, o->row.key, o->res, o->len);
            remove_job(s, job);
            return;
        }
        if (o->live) {
            make_remote(s, job, &o->row);
            return;
        }
        /* no live row (the last one failed or was cancelled): run afresh */
    }
    prepare(s, job);
}

static void prepare(srv *s, srv_job *job)
{
    if (!submit(s, job, TASK_PREPARE, POOL_INTAKE)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the queue of requests being read is full (%d waiting, %.0f MiB); try again shortly",
                 s->pools[POOL_INTAKE].queue.count, (double)s->queued_bytes / (1 << 20));
        fail_all(s, job, RPC_RESOURCE_EXHAUSTED, msg);
        remove_job(s, job);
    }
}

void srv_job_request(srv *s, srv_event *ev)
{
    int kind = ev->method == M_SEARCH ? STORE_SEARCH : STORE_APPLY;
    srv_job *job;
    if (s->stopping) {
        srv_fail(s, ev->call, RPC_UNAVAILABLE, "autopartd is shutting down; ask again when it is back");
        return;
    }
    /* Answered before, and the packed answer is in memory (the gRPC thread
     * looks first; the answer may have arrived since). */
    if (srv_cache_answer(s, ev->call, ev->method, ev->raw))
        return;
    /* The same request, as written, is being worked on here. */
    if ((job = find_job(s, ev->raw, NULL, 0, kind, NULL))) {
        attach(s, job, ev->call, ev->method, AUTOPART__V1__ORIGIN__JOINED);
        return;
    }
    job = job_new(s, kind, ev->client);
    op_lookup *o = job ? srv_db_new(s, sizeof *o, lookup_fn, lookup_cb, job) : NULL;
    if (!o) {
        if (job)
            remove_job(s, job);
        srv_fail(s, ev->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->op.cleanup = lookup_cleanup;
    job->stage = JOB_LOOKUP;
    job->have_raw = true;
    memcpy(job->raw, ev->raw, STORE_KEY_BYTES);
    job->req_bytes = (int64_t)ev->req_bytes;
    job->work.req = ev->msg;
    ev->msg = NULL;
    job->work.threads = search_threads(s, kind, job->work.req);
    attach(s, job, ev->call, ev->method, AUTOPART__V1__ORIGIN__NEW);
    memcpy(o->raw, ev->raw, STORE_KEY_BYTES);
    srv_db_submit_read(s, &o->op);
}

/* ========================================================= a row is made */

/* The row of a prepared request: the alias written, the key's live row
 * found or a new one made (and left to any daemon when no worker of ours
 * is free), a done row's result read. */
typedef struct op_begin {
    srv_dbop op;
    bool alias, release;
    uint8_t raw[STORE_KEY_BYTES];
    store_new n;
    uint8_t *request;
    int64_t now, lease_until;
    store_row row;
    bool created;
    void *res;
    size_t len;
} op_begin;

static void begin_fn(store *db, srv_dbop *op)
{
    op_begin *o = (op_begin *)op;
    ap_error err;
    if (o->alias && store_alias_put(db, o->raw, o->n.key, o->now, &err) < 0)
        ap_error_set(&op->err, err.code, "%s", err.msg); /* logged; the request goes on */
    int rc = store_begin(db, &o->n, o->now, o->lease_until, &o->row, &o->created, &err);
    if (rc == 0 && o->created && o->release)
        rc = store_release(db, o->row.id, &err);
    if (rc == 0 && !o->created && o->row.status == STORE_DONE &&
        (rc = store_payload(db, o->row.id, STORE_PAYLOAD_RESULT, &o->res, &o->len, &err)) == 0)
        rc = ap_error_set(&err, AP_EIO, "search %" PRId64 " is done but its result is not stored", o->row.id);
    op->rc = rc < 0 ? rc : 0;
    if (rc < 0)
        op->err = err;
}

static void begin_cleanup(srv_dbop *op)
{
    op_begin *o = (op_begin *)op;
    ap_free(o->request);
    ap_free(o->res);
}

static void enqueue_run(srv *s, srv_job *job);

static void begin_cb(srv *s, srv_dbop *op)
{
    op_begin *o = (op_begin *)op;
    srv_job *job = op->job;
    if (op->rc == 0 && op->err.msg[0])
        srv_log(s, "alias: %s", op->err.msg);
    if (job->dead) {
        if (op->rc == 0 && o->created && !o->release) /* nobody left to run it here: for any daemon */
            release_row(s, o->row.id);
        return;
    }
    if (op->rc < 0) {
        store_failed(s, job, &op->err);
        return;
    }
    if (!o->created) {
        if (o->row.status == STORE_DONE) {
            answer_stored(s, job, o->row.id, o->row.key, o->res, o->len);
            remove_job(s, job);
        } else {
            make_remote(s, job, &o->row);
        }
        return;
    }
    job->row_id = o->row.id;
    job->row_owned = !o->release;
    for (srv_waiter *w = job->waiters; w; w = w->next)
        send_accepted(w);
    if (!job->waiters && job->kind == STORE_SEARCH) /* its client left while it was read */
        job->alone_us = ap_now_us();
    if (atomic_load(&job->cancel) == CANCEL_USER) {
        end_cancelled(s, job, NULL);
        remove_job(s, job);
        return;
    }
    enqueue_run(s, job);
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

static void prepare_done(srv *s, srv_job *job)
{
    srv_work *w = &job->work;
    if (w->code != RPC_OK) {
        if (job->row_id) /* a claimed row that cannot run any more */
            end_row(s, job->row_id, STORE_FAILED, w->msg);
        fail_all(s, job, w->code, w->msg);
        remove_job(s, job);
        return;
    }
    job->have_key = true;
    memcpy(job->key, w->key, STORE_KEY_BYTES);
    if (atomic_load(&job->cancel) == CANCEL_USER && job->row_id) {
        end_cancelled(s, job, NULL);
        remove_job(s, job);
        return;
    }
    /* Another spelling of the same request is already here: join it. */
    srv_job *other = find_job(s, NULL, job->key, 0, job->kind, job);
    if (other && !job->row_id) {
        move_waiters(s, job, other);
        remove_job(s, job);
        return;
    }
    if (job->row_id) { /* a row this daemon took from the store */
        if (atomic_load(&job->cancel) == CANCEL_ALONE) { /* given up while it was read */
            if (!job->waiters) {
                end_alone(s, job);
                return;
            }
            atomic_store(&job->cancel, CANCEL_NONE);
        }
        enqueue_run(s, job);
        return;
    }
    if (job->kind == STORE_SEARCH && !srv_search_available()) {
        fail_all(s, job, RPC_UNIMPLEMENTED,
                 "this autopartd was built without the search engine (search/search.h is not in this build); "
                 "the request is valid: use Apply with a manual schedule meanwhile");
        remove_job(s, job);
        return;
    }
    srv_pool *p = &s->pools[pool_of(job)];
    if (!can_submit(s, pool_of(job), job->req_bytes)) { /* before a row exists: not accepted yet */
        fail_all(s, job, RPC_RESOURCE_EXHAUSTED, "the queue is full; try again later");
        remove_job(s, job);
        return;
    }
    op_begin *o = srv_db_new(s, sizeof *o, begin_fn, begin_cb, job);
    if (o) {
        row_new_fields(job, &o->n, &o->request);
        if (!o->request) {
            ap_free(o);
            job->dbops--;
            o = NULL;
        }
    }
    if (!o) {
        fail_all(s, job, RPC_RESOURCE_EXHAUSTED, "out of memory");
        remove_job(s, job);
        return;
    }
    o->op.cleanup = begin_cleanup;
    o->alias = job->have_raw;
    memcpy(o->raw, job->raw, STORE_KEY_BYTES);
    o->now = ap_now_us();
    o->lease_until = o->now + s->opt.lease_us;
    /* No worker free now: the row waits in the store for any daemon's. */
    o->release = p->busy >= p->n;
    job->stage = JOB_BEGIN;
    srv_db_submit(s, &o->op);
}

/* ================================================================ running */

/* In the pool's queue, or started at once when a worker is free.  A full
 * queue leaves the row to the store (and the callers waiting on it). */
static void enqueue_run(srv *s, srv_job *job)
{
    if (submit(s, job, TASK_RUN, pool_of(job)))
        return;
    store_row row = {.id = job->row_id};
    memcpy(row.key, job->key, STORE_KEY_BYTES);
    if (job->row_owned) /* ours, and no room: for whichever daemon has some */
        release_row(s, job->row_id);
    make_remote(s, job, &row);
}

/* Takes (when it has no owner) and starts the row, for the worker kept
 * for it. */
typedef struct op_start {
    srv_dbop op;
    int64_t id, now, lease_until;
    bool take, search;
    void *ckpt; /* the row's checkpoint: a search resumes from it */
    size_t ckpt_len;
    ap_error ckpt_err;
    int ckpt_rc;
} op_start;

static void start_fn(store *db, srv_dbop *op)
{
    op_start *o = (op_start *)op;
    if (o->take) {
        int rc = store_claim_one(db, o->id, o->lease_until, &op->err);
        if (rc <= 0) {
            op->rc = rc < 0 ? rc : ap_error_set(&op->err, AP_ECONFLICT, "taken by another daemon");
            return;
        }
    }
    if ((op->rc = store_start(db, o->id, o->now, &op->err)) == 0 && o->search)
        o->ckpt_rc = store_payload(db, o->id, STORE_PAYLOAD_CHECKPOINT, &o->ckpt, &o->ckpt_len, &o->ckpt_err);
}

static void start_cleanup(srv_dbop *op)
{
    ap_free(((op_start *)op)->ckpt);
}

static void start_cb(srv *s, srv_dbop *op)
{
    srv_job *job = op->job;
    int pool = pool_of(job);
    if (job->dead || job->ended) { /* shut down, or cancelled (its row ended), meanwhile */
        unkeep(s, pool);
        if (!job->dead)
            remove_job(s, job);
        return;
    }
    if (op->rc < 0 && op->rc != AP_ECONFLICT) {
        /* The store is away: the job waits first in the queue, which
         * rests a moment (no worker is taken meanwhile). */
        if (srv_db_say(s, job, op))
            srv_log(s, "search %" PRId64 ": cannot start it now: %s", job->row_id, op->err.msg);
        s->pools[pool].paused_until = ap_now_us() + SRV_RETRY_US;
        job->urgent = true;
        unkeep(s, pool);
        if (!submit(s, job, TASK_RUN, pool))
            enqueue_run(s, job);
        return;
    }
    if (op->rc < 0) {
        /* Another daemon took the row first, or it ended: wait for its end. */
        unkeep(s, pool);
        store_row row = {.id = job->row_id};
        memcpy(row.key, job->key, STORE_KEY_BYTES);
        make_remote(s, job, &row);
        return;
    }
    job->row_owned = true;
    if (atomic_load(&job->cancel) != CANCEL_NONE) {
        unkeep(s, pool);
        if (atomic_load(&job->cancel) == CANCEL_USER) {
            end_cancelled(s, job, NULL);
        }
        remove_job(s, job);
        return;
    }
    s->stats.started++;
    op_start *o = (op_start *)op;
    srv_work *w = &job->work;
    ap_free(w->resume);
    w->resume = o->ckpt; /* the job's now */
    w->resume_len = o->ckpt_len;
    o->ckpt = NULL;
    if (o->ckpt_rc < 0)
        srv_log(s, "search %" PRId64 ": its checkpoint cannot be read (%s): it starts afresh", job->row_id,
                o->ckpt_err.msg);
    else if (w->resume)
        srv_log(s, "search %" PRId64 " resumes from its checkpoint (%zu KiB)", job->row_id, w->resume_len >> 10);
    hand_over(s, job, TASK_RUN, pool);
}

/* A worker of the job's pool is kept for it: take and start its row. */
static void job_start(srv *s, srv_job *job)
{
    op_start *o = srv_db_new(s, sizeof *o, start_fn, start_cb, job);
    if (!o) {
        unkeep(s, pool_of(job));
        fail_all(s, job, RPC_RESOURCE_EXHAUSTED, "out of memory");
        if (job->row_owned)
            release_row(s, job->row_id);
        remove_job(s, job);
        return;
    }
    job->stage = JOB_STARTING;
    o->op.cleanup = start_cleanup;
    o->search = job->kind == STORE_SEARCH;
    o->id = job->row_id;
    o->now = ap_now_us();
    o->lease_until = o->now + s->opt.lease_us;
    o->take = !job->row_owned;
    srv_db_submit(s, &o->op);
}

/* The outcome of a run, stored; then answered. */
typedef struct op_outcome {
    srv_dbop op;
    int64_t id, now;
    int status;
    const void *result; /* the job's: it stays while the operation holds it */
    size_t len;
    store_progress summary;
    bool last_point; /* a search's history gets a point where it ended */
    char msg[1024];
    /* the row ended otherwise (another daemon's run, a cancellation): it */
    store_row row;
    void *res;
    size_t res_len;
} op_outcome;

static void outcome_fn(store *db, srv_dbop *op)
{
    op_outcome *o = (op_outcome *)op;
    if (o->last_point) {
        /* The last point of a search's history: where it ended (the
         * checkpoints before it may be long past, or none).  Only a
         * picture: a store that fails it fails the finish below too, and
         * that error is the one reported. */
        store_progress last = o->summary;
        last.best_schedule = NULL;
        ap_error ignored;
        (void)store_set_progress(db, o->id, o->now, &last, true, NULL, 0, &ignored);
    }
    op->rc = store_finish(db, o->id, o->status, o->now, o->result, o->len,
                          o->status == STORE_DONE ? &o->summary : NULL, o->msg, &op->err);
    if (op->rc == AP_ECONFLICT && store_get(db, o->id, &o->row, &op->err) == 1 && o->row.status == STORE_DONE &&
        store_payload(db, o->id, STORE_PAYLOAD_RESULT, &o->res, &o->res_len, &op->err) != 1)
        o->res = NULL;
}

static void outcome_cleanup(srv_dbop *op)
{
    ap_free(((op_outcome *)op)->res);
}

static void store_outcome(srv *s, srv_job *job);

static void outcome_cb(srv *s, srv_dbop *op)
{
    op_outcome *o = (op_outcome *)op;
    srv_job *job = op->job;
    srv_work *w = &job->work;
    if (job->dead)
        return;
    if (job->ended) { /* cancelled meanwhile: its row ended, its calls were answered */
        remove_job(s, job);
        return;
    }
    if (op->rc == AP_ECONFLICT) {
        /* Ended while we ran it: our lease ran out while the store was away
         * and another daemon finished it, or it was cancelled.  The stored
         * answer is the one every caller gets. */
        if (o->res)
            answer_all(s, job, o->res, o->res_len);
        else
            fail_all(s, job, RPC_ABORTED, o->row.status == STORE_CANCELLED ? "the search was cancelled"
                                                                            : "the search ended in another daemon");
        remove_job(s, job);
        return;
    }
    if (op->rc < 0) {
        /* The store is away: keep the outcome, store it again soon; the
         * callers wait (an answer not stored could differ from the one the
         * next asker gets). */
        if (srv_db_say(s, job, op))
            srv_log(s, "search %" PRId64 ": storing its outcome: %s (trying again)", job->row_id, op->err.msg);
        job->stage = JOB_FINISHING;
        job->retry_us = ap_now_us() + SRV_RETRY_US;
        return;
    }
    if (o->status == STORE_DONE)
        answer_all(s, job, w->result, w->result_len);
    else if (o->status == STORE_CANCELLED)
        fail_all(s, job, RPC_CANCELLED, "the search was cancelled");
    else
        fail_all(s, job, w->code, w->msg);
    remove_job(s, job);
}

static void store_outcome(srv *s, srv_job *job)
{
    srv_work *w = &job->work;
    int cancel = atomic_load(&job->cancel);
    op_outcome *o = srv_db_new(s, sizeof *o, outcome_fn, outcome_cb, job);
    if (!o) { /* try again at the next tick */
        job->stage = JOB_FINISHING;
        job->retry_us = ap_now_us() + SRV_RETRY_US;
        return;
    }
    o->op.cleanup = outcome_cleanup;
    job->stage = JOB_FINISHING;
    job->retry_us = INT64_MAX; /* out now */
    o->id = job->row_id;
    o->now = ap_now_us();
    if (cancel == CANCEL_USER) {
        o->status = STORE_CANCELLED;
        snprintf(o->msg, sizeof o->msg, "cancelled");
    } else if (w->code == RPC_OK) {
        o->status = STORE_DONE;
        o->result = w->result;
        o->len = w->result_len;
        o->summary = w->summary;
        o->last_point = job->kind == STORE_SEARCH && w->summary.best_runtime_s > 0;
    } else {
        o->status = STORE_FAILED;
        snprintf(o->msg, sizeof o->msg, "%s", w->msg);
    }
    srv_db_submit(s, &o->op);
}

static void run_done(srv *s, srv_job *job)
{
    srv_work *w = &job->work;
    int cancel = atomic_load(&job->cancel);
    if (cancel == CANCEL_SHUTDOWN) {
        remove_job(s, job); /* the row goes back to the queue for the next daemon */
        return;
    }
    if (cancel == CANCEL_ALONE && w->code != RPC_OK) {
        if (job->prog_dirty || job->ckpt) /* written before the row ends or goes back (in order) */
            checkpoint_one(s, job, ap_now_us());
        if (job->waiters) { /* someone asked again meanwhile: on from the checkpoint, by any daemon */
            atomic_store(&job->cancel, CANCEL_NONE);
            release_row(s, job->row_id);
            store_row row = {.id = job->row_id};
            memcpy(row.key, job->key, STORE_KEY_BYTES);
            make_remote(s, job, &row);
        } else {
            end_alone(s, job);
        }
        return;
    }
    if (w->code == RPC_OK && w->replayed)
        srv_log(s, "search %" PRId64 " done: %" PRId64 " episodes, %" PRId64 " of them replayed from its checkpoint",
                job->row_id, w->summary.episodes, w->replayed);
    if (cancel == CANCEL_NONE && job->kind == STORE_SEARCH) {
        if (w->code == RPC_OK) {
            double secs = (double)(ap_now_us() - job->started_us) / 1e6;
            atomic_fetch_add(&s->metrics.searches_done, 1);
            srv_hist_observe(&s->metrics.search_seconds, secs);
            if (secs > 0)
                srv_hist_observe(&s->metrics.search_eps, (double)w->summary.episodes / secs);
        } else {
            atomic_fetch_add(&s->metrics.searches_failed, 1);
        }
    }
    store_outcome(s, job);
}

/* ================================================================ tasks */

static void job_task_work(srv_task *t, void *ctx)
{
    srv_job *job = CONTAINER(t, srv_job, worker_task);
    (void)ctx;
    if (job->task == TASK_PREPARE)
        srv_work_prepare(job);
    else
        srv_work_run(job->srv, job);
}

static void job_task_done(srv *s, srv_task *t)
{
    srv_job *job = CONTAINER(t, srv_job, worker_task);
    int pool = job->pool;
    srv_pool *p = &s->pools[pool];
    p->busy--;
    atomic_store(&s->metrics.busy[pool], p->busy);
    if (job->task == TASK_RUN && job->kind == STORE_SEARCH)
        atomic_fetch_sub(&s->metrics.searches_running, 1);
    if (job->req_bytes >= SRV_TRIM_BYTES) /* a big module's pages go back to the system (on_wake) */
        s->trim = true;
    if (job->ended) { /* its row was ended while the task ran (a cancellation) */
        remove_job(s, job);
    } else if (atomic_load(&job->cancel) == CANCEL_SHUTDOWN) {
        if (job->task == TASK_RUN && (job->prog_dirty || job->ckpt)) /* for the next run to resume from */
            checkpoint_one(s, job, ap_now_us());
        remove_job(s, job);
    } else if (job->task == TASK_PREPARE) {
        prepare_done(s, job);
    } else {
        run_done(s, job);
    }
    srv_pump(s, pool);
    if (p->busy < p->n)
        s->last_sweep = 0; /* a worker is free: rows waiting in the store, at the next tick */
}

/* ============================================================= progress */

/* Writes a running search's best so far and a point of its history. */
typedef struct op_progress {
    srv_dbop op;
    int64_t id, now;
    store_progress p;
    char *schedule;
    void *ckpt; /* the search's checkpoint (taken from the job), or NULL */
    size_t ckpt_len;
} op_progress;

static void progress_fn(store *db, srv_dbop *op)
{
    op_progress *o = (op_progress *)op;
    o->p.best_schedule = o->schedule;
    op->rc = store_set_progress(db, o->id, o->now, &o->p, true, o->ckpt, o->ckpt_len, &op->err);
}

static void progress_cb(srv *s, srv_dbop *op)
{
    op_progress *o = (op_progress *)op;
    srv_job *job = op->job;
    if (op->rc < 0) {
        if (srv_db_say(s, NULL, op)) /* kept, written again: the outage's lines say the rest */
            srv_log(s, "checkpoint of search %" PRId64 ": %s", o->id, op->err.msg);
        if (!job->dead) {
            job->prog_dirty = true;
            uv_mutex_lock(&job->pmu);
            if (!job->ckpt && o->ckpt) { /* not stored: the job keeps it, unless it has a newer one */
                job->ckpt = o->ckpt;
                job->ckpt_len = o->ckpt_len;
                o->ckpt = NULL;
            }
            uv_mutex_unlock(&job->pmu);
        }
    }
}

static void progress_cleanup(srv_dbop *op)
{
    op_progress *o = (op_progress *)op;
    ap_free(o->schedule);
    ap_free(o->ckpt);
}

static void checkpoint_one(srv *s, srv_job *job, int64_t now)
{
    op_progress *o = srv_db_new(s, sizeof *o, progress_fn, progress_cb, job);
    if (!o)
        return; /* next time */
    o->op.cleanup = progress_cleanup;
    uv_mutex_lock(&job->pmu);
    o->p = job->prog;
    o->schedule = job->prog_schedule ? ap_strdup(job->prog_schedule) : NULL;
    o->ckpt = job->ckpt; /* the operation's now */
    o->ckpt_len = job->ckpt_len;
    job->ckpt = NULL;
    uv_mutex_unlock(&job->pmu);
    o->id = job->row_id;
    o->now = now;
    job->prog_dirty = false;
    job->ckpt_us = now;
    job->ckpt_best = o->p.best_runtime_s;
    srv_db_submit(s, &o->op);
}

static void send_progress(srv_job *job, const Autopart__V1__Progress *p)
{
    Autopart__V1__SearchEvent ev = AUTOPART__V1__SEARCH_EVENT__INIT;
    ev.event_case = AUTOPART__V1__SEARCH_EVENT__EVENT_PROGRESS;
    ev.progress = (Autopart__V1__Progress *)p;
    size_t len = autopart__v1__search_event__get_packed_size(&ev);
    uint8_t *buf = ap_malloc(len ? len : 1);
    if (!buf)
        return;
    autopart__v1__search_event__pack(&ev, buf);
    /* Progress is lossy: a client that does not read gets fewer events. */
    for (srv_waiter *w = job->waiters; w; w = w->next)
        if (w->method == M_SEARCH && rpc_backlog(w->call) < 2)
            rpc_send(w->call, buf, len);
    ap_free(buf);
}

/* The worker's progress, on the loop: to the callers, and to the store
 * when the best improved. */
static void job_progress_done(srv *s, srv_task *t)
{
    srv_job *job = CONTAINER(t, srv_job, progress_task);
    atomic_store(&job->prog_posted, false);
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
    send_progress(job, &p);
    uv_mutex_unlock(&job->pmu);
    job->prog_dirty = true;
    /* A better answer is a point of the history at once (at most every
     * SRV_POINT_US), so that the dashboard's curve shows short searches
     * and each step of long ones, and daemons whose callers joined this
     * search see it soon. */
    int64_t now = ap_now_us();
    if (job->stage == JOB_RUNNING && !job->ended && best > 0 && (job->ckpt_best == 0 || best < job->ckpt_best) &&
        now - job->ckpt_us >= SRV_POINT_US)
        checkpoint_one(s, job, now);
}

/* ============================================================ the timer */

/* Rows of this daemon's jobs that another daemon runs or may take: their
 * ends, their progress, and queued rows taken elsewhere. */
typedef struct poll_item {
    int64_t id;
    int rc;
    store_row row;
    char *schedule;
    void *res;
    size_t len;
} poll_item;

typedef struct op_poll {
    srv_dbop op;
    int n;
    poll_item *items;
} op_poll;

static void poll_fn(store *db, srv_dbop *op)
{
    op_poll *o = (op_poll *)op;
    for (int i = 0; i < o->n; i++) {
        poll_item *it = &o->items[i];
        ap_error err;
        it->rc = store_get(db, it->id, &it->row, &err);
        if (it->rc == 1 && it->row.status == STORE_DONE &&
            store_payload(db, it->id, STORE_PAYLOAD_RESULT, &it->res, &it->len, &err) != 1)
            it->rc = -1;
        else if (it->rc == 1 && it->row.status == STORE_RUNNING && it->row.progress_us &&
                 store_best_schedule(db, it->id, &it->schedule, &err) < 0)
            it->schedule = NULL;
        if (it->rc < 0)
            op->err = err;
    }
}

static void poll_cleanup(srv_dbop *op)
{
    op_poll *o = (op_poll *)op;
    for (int i = 0; i < o->n; i++) {
        ap_free(o->items[i].schedule);
        ap_free(o->items[i].res);
    }
    ap_free(o->items);
}

/* Progress of a row another daemon runs, from the store. */
static void remote_progress(srv_job *job, const poll_item *it)
{
    Autopart__V1__Progress p = AUTOPART__V1__PROGRESS__INIT;
    p.episodes = it->row.episodes;
    p.best_runtime_s = it->row.best_runtime_s;
    p.best_peak_memory_bytes = it->row.best_peak_memory;
    p.best_schedule = it->schedule ? it->schedule : (char *)"";
    p.elapsed_s = it->row.started_us ? (double)(ap_now_us() - it->row.started_us) / 1e6 : 0;
    send_progress(job, &p);
}

static void poll_cb(srv *s, srv_dbop *op)
{
    op_poll *o = (op_poll *)op;
    s->poll_busy = false;
    for (int i = 0; i < o->n; i++) {
        poll_item *it = &o->items[i];
        srv_job *job = find_job(s, NULL, NULL, it->id, 0, NULL);
        if (!job || it->rc < 0)
            continue; /* gone, or the store is away: next time */
        if (job->stage == JOB_RUN_WAIT) {
            /* Queued here, its row left to any daemon: another took it,
             * or it ended (cancelled through another daemon). */
            if (it->rc == 1 && !job->row_owned &&
                (it->row.status != STORE_QUEUED || (it->row.owner[0] && strcmp(it->row.owner, s->owner) != 0))) {
                unqueue(s, job);
                make_remote(s, job, &it->row);
            } else {
                continue;
            }
        }
        if (job->stage != JOB_REMOTE)
            continue;
        if (it->rc == 0) {
            fail_all(s, job, RPC_INTERNAL, "the search's row vanished from the store");
            remove_job(s, job);
        } else if (it->row.status == STORE_DONE) {
            answer_all(s, job, it->res, it->len);
            remove_job(s, job);
        } else if (it->row.status == STORE_FAILED || it->row.status == STORE_CANCELLED) {
            char msg[700];
            snprintf(msg, sizeof msg, "search %" PRId64 " %s in another daemon: %s", it->row.id,
                     it->row.status == STORE_FAILED ? "failed" : "was cancelled", it->row.error);
            fail_all(s, job, it->row.status == STORE_FAILED ? RPC_ABORTED : RPC_CANCELLED, msg);
            remove_job(s, job);
        } else if (it->row.progress_us != job->remote_progress_us) {
            job->remote_progress_us = it->row.progress_us;
            if (it->row.progress_us)
                remote_progress(job, it);
        }
    }
}

static void poll_remote(srv *s)
{
    int n = 0;
    for (srv_job *j = s->jobs; j; j = j->next)
        n += j->row_id && (j->stage == JOB_REMOTE || (j->stage == JOB_RUN_WAIT && !j->row_owned));
    if (!n || s->poll_busy)
        return;
    op_poll *o = srv_db_new(s, sizeof *o, poll_fn, poll_cb, NULL);
    if (o && !(o->items = ap_calloc((size_t)n, sizeof *o->items))) {
        ap_free(o);
        o = NULL;
    }
    if (!o)
        return;
    o->op.cleanup = poll_cleanup;
    for (srv_job *j = s->jobs; j; j = j->next)
        if (j->row_id && (j->stage == JOB_REMOTE || (j->stage == JOB_RUN_WAIT && !j->row_owned)))
            o->items[o->n++].id = j->row_id;
    s->poll_busy = true;
    srv_db_submit(s, &o->op);
}

/* Rows this daemon takes from the store: orphans of dead daemons, and
 * rows queued for any daemon; as many as it has free workers. */
typedef struct claimed {
    store_claim cl;
    store_row row;
    void *req;
    size_t len;
    bool ok, orphan; /* orphan: claimed as one (an owner died); queued first here */
} claimed;

/* What a sweep asks for, per kind of row (the pool it runs in). */
typedef struct sweep_ask {
    int kind, max;
    bool queued_too;
} sweep_ask;

typedef struct op_sweep {
    srv_dbop op;
    int64_t now, lease_until;
    sweep_ask ask[2];
    int n;
    claimed items[32];
} op_sweep;

static void sweep_fn(store *db, srv_dbop *op)
{
    op_sweep *o = (op_sweep *)op;
    for (int k = 0; k < 2; k++) {
        store_claim cl[16];
        if (o->ask[k].max <= 0)
            continue;
        int n = store_claim_orphans(db, o->ask[k].kind, o->now, o->lease_until, o->ask[k].queued_too, cl,
                                    o->ask[k].max, &op->err);
        if (n < 0) {
            op->rc = n;
            return;
        }
        for (int i = 0; i < n; i++) {
            claimed *c = &o->items[o->n++];
            ap_error err;
            c->cl = cl[i];
            c->orphan = !o->ask[k].queued_too;
            c->ok = store_get(db, cl[i].id, &c->row, &err) == 1 &&
                    store_payload(db, cl[i].id, STORE_PAYLOAD_REQUEST, &c->req, &c->len, &err) == 1;
            if (!c->ok)
                store_finish(db, cl[i].id, STORE_FAILED, o->now, NULL, 0, NULL, "its stored request cannot be read",
                             &err);
        }
    }
}

static void sweep_cleanup(srv_dbop *op)
{
    op_sweep *o = (op_sweep *)op;
    for (int i = 0; i < o->n; i++)
        ap_free(o->items[i].req);
}

/* Runs a row this daemon took from the store: read its request again
 * (prepare), then run it. */
static void take_over(srv *s, claimed *c)
{
    const store_row *row = &c->row;
    int64_t id = c->cl.id;
    const ProtobufCMessageDescriptor *d =
        row->kind == STORE_SEARCH ? &autopart__v1__search_request__descriptor : &autopart__v1__apply_request__descriptor;
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, c->len, c->req);
    if (!msg) {
        end_row(s, id, STORE_FAILED, "its stored request does not unpack");
        return;
    }
    /* A job of ours may wait on it (queued here, or polled). */
    srv_job *job = find_job(s, NULL, NULL, id, 0, NULL);
    if (job && job->stage == JOB_RUN_WAIT)
        unqueue(s, job);
    if (job && job->stage != JOB_RUN_WAIT && job->stage != JOB_REMOTE) {
        protobuf_c_message_free_unpacked(msg, NULL);
        return; /* under way here already */
    }
    if (!job)
        job = job_new(s, row->kind, row->client_label);
    if (!job) {
        protobuf_c_message_free_unpacked(msg, NULL);
        release_row(s, id);
        return;
    }
    atomic_fetch_add(&s->metrics.taken_over, 1);
    char before[96];
    if (row->attempts)
        snprintf(before, sizeof before, "interrupted in its run %u, at episode %" PRId64, row->attempts,
                 row->episodes);
    else
        snprintf(before, sizeof before, "never started");
    srv_log(s, "taking over %s %" PRId64 " (%s) from %s: %s", row->kind == STORE_SEARCH ? "search" : "apply",
            row->id, row->module_name, c->cl.prev_owner[0] ? c->cl.prev_owner : "the store's queue", before);
    /* An orphan's callers waited long already: it goes first, here. */
    job->urgent = c->orphan;
    job->row_owned = true;
    if (job->work.prepared && job->stage == JOB_RUN_WAIT) { /* prepared here already: to a worker */
        protobuf_c_message_free_unpacked(msg, NULL);
        enqueue_run(s, job);
        return;
    }
    srv_work_release(&job->work);
    job->work.req = msg;
    job->work.kind = row->kind;
    job->work.key_known = true;
    memcpy(job->work.expect_key, row->key, STORE_KEY_BYTES);
    job->work.threads = search_threads(s, row->kind, msg);
    job->row_id = row->id;
    job->have_key = true;
    memcpy(job->key, row->key, STORE_KEY_BYTES);
    job->req_bytes = (int64_t)c->len;
    if (!submit(s, job, TASK_PREPARE, POOL_INTAKE)) {
        /* no room after all: back to the store for whoever has some; an
         * accepted request is never failed for want of room */
        release_row(s, id);
        job->row_owned = false;
        make_remote(s, job, row);
        if (!job->waiters)
            remove_job(s, job);
    }
}

static void sweep_cb(srv *s, srv_dbop *op)
{
    op_sweep *o = (op_sweep *)op;
    s->sweep_busy = false;
    if (op->rc < 0 && srv_db_say(s, NULL, op))
        srv_log(s, "looking for orphaned searches: %s", op->err.msg);
    for (int i = 0; i < o->n; i++)
        if (o->items[i].ok)
            take_over(s, &o->items[i]);
}

/* What a pool has room for: with free workers (and nothing queued here),
 * rows of dead daemons and rows queued for any daemon, as many as the free
 * workers; busy, only orphans (their callers waited longest), one per
 * worker at most queued first here -- so they are taken over within the
 * lease whatever the load, and spread over the daemons. */
static sweep_ask sweep_room(srv *s, int kind, int pool)
{
    srv_pool *p = &s->pools[pool];
    int room = p->n - p->busy - p->queue.count, orphans = 0;
    for (srv_job *j = s->jobs; j; j = j->next) {
        if (j->kind != kind || j->ended)
            continue;
        /* rows whose jobs are being read here take workers too */
        if (pool == POOL_SEARCH)
            room -= j->stage == JOB_PREPARE_WAIT || j->stage == JOB_PREPARING || j->stage == JOB_BEGIN;
        orphans += j->urgent && (j->stage == JOB_PREPARE_WAIT || j->stage == JOB_PREPARING ||
                                 j->stage == JOB_RUN_WAIT || j->stage == JOB_STARTING);
    }
    sweep_ask a = {.kind = kind, .queued_too = room > 0};
    a.max = a.queued_too ? room : p->n - orphans;
    if (a.max > 16)
        a.max = 16;
    return a;
}

static void sweep(srv *s, int64_t now)
{
    if (s->sweep_busy)
        return;
    sweep_ask ask[2] = {sweep_room(s, STORE_SEARCH, POOL_SEARCH), sweep_room(s, STORE_APPLY, POOL_INTAKE)};
    if (ask[0].max <= 0 && ask[1].max <= 0)
        return;
    op_sweep *o = srv_db_new(s, sizeof *o, sweep_fn, sweep_cb, NULL);
    if (!o)
        return;
    o->op.cleanup = sweep_cleanup;
    o->now = now;
    o->lease_until = now + s->opt.lease_us;
    o->ask[0] = ask[0];
    o->ask[1] = ask[1];
    s->sweep_busy = true;
    srv_db_submit(s, &o->op);
}

/* Heartbeat: the leases of this daemon's rows. */
static void heartbeat_fn(store *db, srv_dbop *op)
{
    srv_dbop *o = op;
    op->rc = store_heartbeat(db, ap_now_us() + o->srv->opt.lease_us, &op->err);
}

static void heartbeat_cb(srv *s, srv_dbop *op)
{
    s->heartbeat_busy = false;
    if (op->rc < 0 && srv_db_say(s, NULL, op))
        srv_log(s, "heartbeat: %s", op->err.msg);
}

/* Cancellations asked through another daemon. */
typedef struct op_cancels {
    srv_dbop op;
    int n;
    int64_t ids[32];
} op_cancels;

static void cancels_fn(store *db, srv_dbop *op)
{
    op_cancels *o = (op_cancels *)op;
    o->n = store_cancel_requests(db, o->ids, 32, &op->err);
    op->rc = o->n < 0 ? o->n : 0;
}

static void cancel_local(srv *s, srv_job *job, rpc_call *c);

static void cancels_cb(srv *s, srv_dbop *op)
{
    op_cancels *o = (op_cancels *)op;
    s->cancels_busy = false;
    for (int i = 0; i < o->n; i++) {
        srv_job *job = find_job(s, NULL, NULL, o->ids[i], 0, NULL);
        if (job && job->stage != JOB_REMOTE && atomic_load(&job->cancel) == CANCEL_NONE)
            cancel_local(s, job, NULL);
    }
}

/* Cache hits to the store. */
typedef struct op_hits {
    srv_dbop op;
    int n;
    int64_t *ids;
    uint64_t *counts;
} op_hits;

static void hits_fn(store *db, srv_dbop *op)
{
    op_hits *o = (op_hits *)op;
    op->rc = store_add_hits(db, o->ids, o->counts, o->n, ap_now_us(), &op->err);
}

static void hits_cb(srv *s, srv_dbop *op)
{
    op_hits *o = (op_hits *)op;
    s->hits_busy = false;
    if (op->rc < 0) { /* counted again next time */
        if (srv_db_say(s, NULL, op))
            srv_log(s, "counting cache hits: %s", op->err.msg);
        for (int i = 0; i < o->n; i++)
            add_hits(s, o->ids[i], o->counts[i]);
    }
}

static void hits_cleanup(srv_dbop *op)
{
    op_hits *o = (op_hits *)op;
    ap_free(o->ids);
    ap_free(o->counts);
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
    op_hits *o = srv_db_new(s, sizeof *o, hits_fn, hits_cb, NULL);
    if (o) {
        o->op.cleanup = hits_cleanup;
        o->ids = ap_malloc(sizeof *o->ids * (size_t)s->n_hits);
        o->counts = ap_malloc(sizeof *o->counts * (size_t)s->n_hits);
    }
    if (!o || !o->ids || !o->counts) {
        if (o)
            hits_cleanup(&o->op);
        ap_free(o);
        return; /* kept for next time */
    }
    for (int i = 0; i < s->n_hits; i++) {
        o->ids[i] = s->hits[i].id;
        o->counts[i] = s->hits[i].n;
    }
    o->n = s->n_hits;
    s->n_hits = 0;
    srv_db_submit(s, &o->op);
}

/* Rows other daemons run that calls here wait on: marked in the store, so
 * that their owner does not give them up for want of clients. */
typedef struct op_watch {
    srv_dbop op;
    int n;
    int64_t until, ids[64];
} op_watch;

static void watch_fn(store *db, srv_dbop *op)
{
    op_watch *o = (op_watch *)op;
    op->rc = store_watch(db, o->ids, o->n, o->until, &op->err);
}

static void watch_cb(srv *s, srv_dbop *op)
{
    if (op->rc < 0 && srv_db_say(s, NULL, op))
        srv_log(s, "watch: %s", op->err.msg);
}

static void watch_remote(srv *s, int64_t now)
{
    op_watch *o = NULL;
    for (srv_job *j = s->jobs; j; j = j->next) {
        if (j->stage != JOB_REMOTE || !j->waiters || !j->row_id)
            continue;
        if (!o && !(o = srv_db_new(s, sizeof *o, watch_fn, watch_cb, NULL)))
            return;
        o->until = now + s->opt.lease_us;
        o->ids[o->n++] = j->row_id;
        if (o->n == 64) {
            srv_db_submit(s, &o->op);
            o = NULL;
        }
    }
    if (o)
        srv_db_submit(s, &o->op);
}

/* Searches no call has waited on for --abandon-after seconds, here or in
 * another daemon: stopped, resumable (a search asked for once and then
 * forgotten must not hold a worker for ever).  Whether another daemon's
 * calls watch the row is read from the store first. */
typedef struct op_alone {
    srv_dbop op;
    int n;
    int64_t ids[32];
    int64_t watched[32];
} op_alone;

static void alone_fn(store *db, srv_dbop *op)
{
    op_alone *o = (op_alone *)op;
    for (int i = 0; i < o->n; i++) {
        store_row row;
        int rc = store_get(db, o->ids[i], &row, &op->err);
        o->watched[i] = rc == 1 ? row.watched_until_us : rc < 0 ? INT64_MAX : 0; /* store away: later */
    }
}

static void alone_cb(srv *s, srv_dbop *op)
{
    op_alone *o = (op_alone *)op;
    int64_t now = ap_now_us();
    s->alone_busy = false;
    for (int i = 0; i < o->n; i++) {
        srv_job *job = find_job(s, NULL, NULL, o->ids[i], STORE_SEARCH, NULL);
        if (!job || job->waiters || !job->alone_us || atomic_load(&job->cancel) != CANCEL_NONE)
            continue; /* asked again, or gone, meanwhile */
        if (o->watched[i] > now) {
            job->alone_us = now; /* watched from another daemon: look again later */
            continue;
        }
        if (job->stage == JOB_RUN_WAIT) {
            unqueue(s, job);
            end_alone(s, job);
        } else if (job->stage == JOB_RUNNING || job->stage == JOB_PREPARING) {
            atomic_store(&job->cancel, CANCEL_ALONE); /* its task stops; run_done ends it */
        }
    }
}

static void give_up_alone(srv *s, int64_t now)
{
    int64_t after = (int64_t)(s->opt.abandon_s * 1e6);
    if (s->alone_busy)
        return;
    op_alone *o = NULL;
    for (srv_job *job = s->jobs; job; job = job->next) {
        if (!job->alone_us || job->waiters || job->ended || !job->row_id || now - job->alone_us < after ||
            atomic_load(&job->cancel) != CANCEL_NONE ||
            (job->stage != JOB_RUN_WAIT && job->stage != JOB_RUNNING && job->stage != JOB_PREPARING))
            continue;
        if (!o && !(o = srv_db_new(s, sizeof *o, alone_fn, alone_cb, NULL)))
            return;
        o->ids[o->n++] = job->row_id;
        if (o->n == 32)
            break;
    }
    if (o) {
        s->alone_busy = true;
        srv_db_submit(s, &o->op);
    }
}

/* --keep-days once a minute; --keep-max-mb every second, so that the store
 * is back under its bound within a second or two of passing it however fast
 * it is written (a run a minute let a 32-client soak hold 168-403 MB under
 * --keep-max-mb 64).  At most SRV_GC_ROWS rows a run, in short
 * transactions, on the store's thread; under the bound a run is one query. */
typedef struct op_gc {
    srv_dbop op;
    store_gc_policy p;
    int64_t now;
    store_gc_result r;
} op_gc;

static void gc_fn(store *db, srv_dbop *op)
{
    op_gc *o = (op_gc *)op;
    op->rc = store_gc(db, &o->p, o->now, &o->r, &op->err);
}

static void gc_cb(srv *s, srv_dbop *op)
{
    op_gc *o = (op_gc *)op;
    s->gc_busy = false;
    if (op->rc < 0) {
        if (srv_db_say(s, NULL, op))
            srv_log(s, "retention: %s", op->err.msg);
        return;
    }
    /* one line a minute at most */
    if (o->r.rows && !s->gc_rows)
        s->gc_bytes_before = o->r.bytes_before;
    s->gc_rows += o->r.rows;
    if (s->gc_rows && o->now - s->last_gc_log >= SRV_GC_US) {
        srv_log(s, "retention: %" PRId64 " rows deleted, the store's pages in use %.1f -> %.1f MiB", s->gc_rows,
                (double)s->gc_bytes_before / (1 << 20), (double)o->r.bytes_after / (1 << 20));
        s->gc_rows = 0;
        s->last_gc_log = o->now;
    }
}

static void retention(srv *s, int64_t now, bool by_age)
{
    if (s->gc_busy)
        return;
    op_gc *o = srv_db_new(s, sizeof *o, gc_fn, gc_cb, NULL);
    if (!o)
        return;
    o->p = (store_gc_policy){
        .keep_us = by_age ? (int64_t)(s->opt.keep_days * 86400e6) : 0,
        .max_bytes = s->opt.keep_max_bytes,
        .protect_us = SRV_GC_PROTECT_US,
        .max_rows = SRV_GC_ROWS,
    };
    o->now = now;
    s->gc_busy = true;
    srv_db_submit(s, &o->op);
}

static void checkpoint(srv *s, int64_t now)
{
    for (srv_job *job = s->jobs; job; job = job->next)
        if (job->stage == JOB_RUNNING && !job->ended && job->prog_dirty)
            checkpoint_one(s, job, now);
}

void srv_jobs_tick(srv *s, int64_t now)
{
    int64_t fifth = s->opt.lease_us / 5;
    if (now - s->last_remote >= SRV_REMOTE_POLL_US) {
        s->last_remote = now;
        poll_remote(s);
        if (!s->stopping && !s->cancels_busy) {
            op_cancels *o = srv_db_new(s, sizeof *o, cancels_fn, cancels_cb, NULL);
            if (o) {
                s->cancels_busy = true;
                srv_db_submit(s, &o->op);
            }
        }
    }
    if (now - s->last_flush >= SRV_HITS_FLUSH_US) {
        s->last_flush = now;
        srv_flush_hits(s);
    }
    if (now - s->last_heartbeat >= fifth && !s->heartbeat_busy) {
        s->last_heartbeat = now;
        srv_dbop *o = srv_db_new(s, sizeof *o, heartbeat_fn, heartbeat_cb, NULL);
        if (o) {
            s->heartbeat_busy = true;
            srv_db_submit(s, o);
        }
        watch_remote(s, now);
    }
    if (!s->stopping)
        give_up_alone(s, now);
    if (now - s->last_ckpt >= SRV_CHECKPOINT_US) {
        s->last_ckpt = now;
        checkpoint(s, now);
    }
    for (srv_job *job = s->jobs; job; job = job->next)
        if (job->stage == JOB_FINISHING && now >= job->retry_us)
            store_outcome(s, job);
    if (!s->stopping && s->opt.keep_days > 0 && now - s->last_gc >= SRV_GC_US) {
        s->last_gc = now;
        s->last_gc_size = now;
        retention(s, now, true);
    } else if (!s->stopping && s->opt.keep_max_bytes > 0 && now - s->last_gc_size >= SRV_GC_SIZE_US) {
        s->last_gc_size = now;
        retention(s, now, false);
    }
    if (!s->stopping && now - s->last_sweep >= fifth) {
        s->last_sweep = now;
        sweep(s, now);
    }
}

/* ============================================================== control */

/* Cancels a job of this daemon.  The row ends now, whatever its task does:
 * a task slow to notice (a long parse, a lowering, a bug) must not leave it
 * running.  A job with a task or a store operation out waits for it, out
 * of sight (ended). */
static void cancel_local(srv *s, srv_job *job, rpc_call *c)
{
    atomic_store(&job->cancel, CANCEL_USER);
    end_cancelled(s, job, c);
    if (job->stage == JOB_RUN_WAIT || job->stage == JOB_PREPARE_WAIT) {
        unqueue(s, job);
        remove_job(s, job);
    } else {
        job->ended = true;
    }
}

typedef struct op_cancel {
    srv_dbop op;
    rpc_call *call;
    int64_t id, now;
    int status;
} op_cancel;

static void cancel_fn(store *db, srv_dbop *op)
{
    op_cancel *o = (op_cancel *)op;
    op->rc = store_request_cancel(db, o->id, o->now, &o->status, &op->err);
}

static void cancel_cb(srv *s, srv_dbop *op)
{
    op_cancel *o = (op_cancel *)op;
    if (op->rc < 0)
        srv_fail(s, o->call, RPC_UNAVAILABLE, "%s", op->err.msg);
    else if (op->rc == 0)
        srv_fail(s, o->call, RPC_NOT_FOUND, "no search %" PRId64 " in the store", o->id);
    else
        cancel_reply(s, o->call, o->status);
}

void srv_job_cancel_call(srv *s, rpc_call *c, int64_t id)
{
    srv_job *job = find_job(s, NULL, NULL, id, 0, NULL);
    if (job && job->stage != JOB_REMOTE) {
        cancel_local(s, job, c);
        return;
    }
    op_cancel *o = srv_db_new(s, sizeof *o, cancel_fn, cancel_cb, NULL);
    if (!o) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->call = c;
    o->id = id;
    o->now = ap_now_us();
    srv_db_submit(s, &o->op);
}

void srv_jobs_shutdown(srv *s)
{
    for (srv_job *job = s->jobs, *next; job; job = next) {
        next = job->next;
        fail_all(s, job, RPC_UNAVAILABLE,
                 "autopartd is shutting down; the search goes on when a daemon sharing the store runs again");
        if (job->stage == JOB_PREPARING || job->stage == JOB_RUNNING) {
            atomic_store(&job->cancel, CANCEL_SHUTDOWN); /* freed when its task returns */
        } else if (job->stage == JOB_FINISHING) {
            /* its outcome is being stored (or will be, once more, at the end) */
        } else {
            if (job->stage == JOB_PREPARE_WAIT || job->stage == JOB_RUN_WAIT)
                unqueue(s, job);
            remove_job(s, job);
        }
    }
}

void srv_jobs_abandon(srv *s)
{
    int64_t now = ap_now_us();
    for (srv_job *job = s->jobs; job; job = job->next)
        if (job->stage == JOB_RUNNING && !job->ended && (job->prog_dirty || job->ckpt))
            checkpoint_one(s, job, now);
}
