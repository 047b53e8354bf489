/*
 * db.c - the store's thread: every store operation of the daemon runs here
 * (or, the lookups of new requests, on one of a few reader threads), on a
 * connection of its own, never on the loop.  A slow or locked store
 * (another process holding a write lock, a PostgreSQL server restarting)
 * then delays only what needs the store: heartbeats of the gRPC layer,
 * answers kept in memory, health checks and cancellations go on.
 *
 * One thread, so operations run in the order they were handed over: a
 * checkpoint never lands after its row's finish, counted hits are written
 * before a GetSearch that follows reads them.  The lookups of new requests
 * (read only, in no order with the rest: a lookup that misses a row made a
 * moment ago only costs a parse, and the row's unique key does the rest)
 * run on reader threads beside it, so that answers read from the store do
 * not queue behind writes.  An operation that names a job holds it until
 * the operation's callback ran (job.c frees a removed job once nothing
 * holds it).
 *
 * Every operation comes back here, so here the log tells the store's
 * outages (srv_outage): not one line per failed sweep or heartbeat.
 */
#include <inttypes.h>

#include "srv.h"

static void db_work(srv_task *t, void *ctx)
{
    srv_dbop *op = (srv_dbop *)t; /* the task is the operation's first member */
    ap_error_clear(&op->err);
    op->fn((store *)ctx, op);
}

static void watch_outage(srv *s, const srv_dbop *op)
{
    srv_outage *o = &s->outage;
    double now = ap_mono_s();
    if (!store_failure(op->rc)) {
        if (o->down)
            srv_log(s, "the store answers again, after %.1f s (%" PRIu64 " operations failed meanwhile)", now - o->since,
                    o->failed);
        o->down = false;
        return;
    }
    if (!o->down)
        *o = (srv_outage){.down = true, .n = o->n + 1, .since = now, .said = now};
    snprintf(o->why, sizeof o->why, "%s", op->err.msg);
    if (!o->failed)
        srv_log(s, "the store fails: %s (what needs it waits or fails until it answers; said again each %.0f s)",
                o->why, SRV_OUTAGE_REMIND_S);
    else if (now - o->said >= SRV_OUTAGE_REMIND_S) {
        o->said = now;
        srv_log(s, "the store still fails, for %.0f s (%" PRIu64 " operations failed): %s", now - o->since,
                o->failed + 1, o->why);
    }
    o->failed++;
}

bool srv_db_say(srv *s, srv_job *job, const srv_dbop *op)
{
    if (!store_failure(op->rc) || !s->outage.down)
        return true;
    if (!job || job->outage_said == s->outage.n)
        return false;
    job->outage_said = s->outage.n;
    return true;
}

static void db_done(srv *s, srv_task *t)
{
    srv_dbop *op = (srv_dbop *)t;
    s->db_inflight--;
    watch_outage(s, op);
    op->cb(s, op);
    if (op->cleanup)
        op->cleanup(op);
    if (op->job)
        srv_job_release_hold(s, op->job);
    ap_free(op);
}

void *srv_db_new(srv *s, size_t size, srv_db_fn fn, srv_db_cb cb, srv_job *job)
{
    srv_dbop *op = ap_calloc(1, size);
    if (!op)
        return NULL;
    op->task.work = db_work;
    op->task.done = db_done;
    op->srv = s;
    op->fn = fn;
    op->cb = cb;
    op->job = job;
    if (job)
        job->dbops++;
    return op;
}

void srv_db_submit(srv *s, srv_dbop *op)
{
    s->db_inflight++;
    srv_pool_push(&s->db, &op->task);
}

void srv_db_submit_read(srv *s, srv_dbop *op)
{
    s->db_inflight++;
    srv_pool_push(&s->db_read, &op->task);
}

int srv_db_start(srv *s, store_observer observe, ap_error *err)
{
    void *ctx[SRV_DB_READERS];
    for (int i = 0; i < SRV_DB_READERS; i++) {
        int rc = store_open(s->opt.db_path, s->owner, 5000, &s->db_read_conn[i], err);
        if (rc < 0)
            return rc;
        store_observe(s->db_read_conn[i], observe, s);
        ctx[i] = s->db_read_conn[i];
    }
    void *one[1] = {s->db_conn};
    int rc = srv_pool_start(s, &s->db, -1, 1, one, err);
    return rc < 0 ? rc : srv_pool_start(s, &s->db_read, -2, SRV_DB_READERS, ctx, err);
}

void srv_db_stop(srv *s)
{
    srv_pool_stop(&s->db);
    srv_pool_stop(&s->db_read);
    for (int i = 0; i < SRV_DB_READERS; i++)
        store_close(s->db_read_conn[i]);
}
