/*
 * test_fleet.c - daemons sharing a store, with the store under stress:
 *
 * - contended: another process holds the store's write lock for 3 s (the
 *   SQLite file's; on PostgreSQL, an exclusive lock on the searches table);
 *   health checks and answers kept in memory go on (the store is not on
 *   the loop), and a request that needs the store completes afterwards;
 * - away: the PostgreSQL server stops under a running search; calls that
 *   need the store get UNAVAILABLE, the rest go on; the server comes back,
 *   the daemon reconnects, the search's result is stored and answered;
 * - stranger: while the server is down another test's server takes its
 *   port; the daemon is refused there and writes nothing into it;
 * - fleet: three daemons on one PostgreSQL server (a cluster the test
 *   starts: tests/service/pgcluster), 60 searches through all three (some
 *   identical, more than one daemon's workers), one daemon killed with
 *   SIGKILL mid-search, the server restarted once mid-run: every search
 *   ends exactly once, identical requests get byte-identical answers, the
 *   killed daemon's searches finish elsewhere with the answers a single
 *   daemon gives, nothing finished is lost.  The figures are printed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>

#include <sqlite3.h>

#include "pg.h"
#include "svc.h"

static pg_cluster cluster;
static char *tiny_text, *bpmp;

/* An empty database on the test's server (the store migrates it). */
static void fresh_pg(char *url, size_t size)
{
    snprintf(url, size, "%s", cluster.url);
    ck_assert(pg_sql(url, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"));
}

static int health(int port, double *seconds)
{
    wire_conn *c = svc_conn_opts(port, NULL, 30);
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    void *r = NULL;
    size_t len;
    wire_status st;
    double t0 = ap_mono_s();
    int rc = svc_call(c, SVC_HEALTH, &req.base, &r, &len, &st);
    *seconds = ap_mono_s() - t0;
    ap_free(r);
    wire_close(c);
    return rc;
}

static int apply_on(wire_conn *c, const svc_apply *a, int *origin, wire_status *st, double *seconds)
{
    Autopart__V1__ApplyResponse *r;
    double t0 = ap_mono_s();
    int rc = svc_apply_call(c, a, &r, NULL, NULL, st);
    *seconds = ap_mono_s() - t0;
    if (rc == 0) {
        *origin = r->origin;
        autopart__v1__apply_response__free_unpacked(r, NULL);
    }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ============================================================ contended */

/* In a child process: takes the store's write lock, says so on `ready`,
 * keeps it 3 s.  SQLite: the file's write lock (readers go on, in WAL
 * mode); PostgreSQL: LOCK TABLE searches IN EXCLUSIVE MODE, which blocks
 * every write of a row and lets reads through, the same thing. */
static void hold_write_lock(const char *db, int ready)
{
    if (store_is_postgres(db)) {
        PGconn *h = PQconnectdb(db);
        PGresult *r = PQexec(h, "BEGIN");
        PQclear(r);
        r = PQexec(h, "LOCK TABLE searches IN EXCLUSIVE MODE");
        bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (!ok || write(ready, "x", 1) != 1)
            _exit(1);
        usleep(3000000);
        PQclear(PQexec(h, "COMMIT"));
        PQfinish(h);
        _exit(0);
    }
    sqlite3 *h;
    if (sqlite3_open(db, &h) != SQLITE_OK || sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(h, "UPDATE counters SET rows = rows", NULL, NULL, NULL) != SQLITE_OK)
        _exit(1);
    if (write(ready, "x", 1) != 1)
        _exit(1);
    usleep(3000000);
    sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(h);
    _exit(0);
}

/* Health checks and cache hits from memory, one of each every 20 ms for
 * `seconds`: their times, sorted, into hl and cl (MAX_SAMPLES each). */
enum { MAX_SAMPLES = 400 };
typedef struct samples {
    double hl[MAX_SAMPLES], cl[MAX_SAMPLES];
    int n;
} samples;

static void sample(int port, wire_conn *c, const svc_apply *a, double seconds, samples *out)
{
    wire_status st;
    int origin;
    out->n = 0;
    for (double t0 = ap_mono_s(); ap_mono_s() - t0 < seconds && out->n < MAX_SAMPLES; out->n++) {
        ck_assert_int_eq(health(port, &out->hl[out->n]), 0);
        ck_assert_msg(apply_on(c, a, &origin, &st, &out->cl[out->n]) == 0, "%s", st.msg);
        ck_assert_int_eq(origin, AUTOPART__V1__ORIGIN__CACHE_HIT);
        usleep(20000);
    }
    qsort(out->hl, (size_t)out->n, sizeof *out->hl, cmp_double);
    qsort(out->cl, (size_t)out->n, sizeof *out->cl, cmp_double);
}

static void print_samples(const char *what, const samples *m)
{
    int n = m->n;
    printf("  %s: %d health checks p50 %.2f ms p99 %.2f ms max %.2f ms; %d cache hits from memory p50 %.2f ms p99 "
           "%.2f ms max %.2f ms\n",
           what, n, m->hl[n / 2] * 1e3, m->hl[n * 99 / 100] * 1e3, m->hl[n - 1] * 1e3, n, m->cl[n / 2] * 1e3,
           m->cl[n * 99 / 100] * 1e3, m->cl[n - 1] * 1e3);
}

static void contended(const char *db)
{
    svc_daemon d;
    svc_start(&d, db, NULL);
    wire_conn *c = svc_conn(d.port);
    svc_apply a;
    wire_status st;
    int origin;
    double t;
    svc_apply_init(&a, tiny_text, "tiny.mlir", "batch=2,model=2", bpmp, "locked-out");
    /* new, then from the store (kept in memory), then from memory */
    for (int i = 0; i < 3; i++)
        ck_assert_msg(apply_on(c, &a, &origin, &st, &t) == 0, "%s", st.msg);
    ck_assert_int_eq(origin, AUTOPART__V1__ORIGIN__CACHE_HIT);

    /* The same calls without the lock, to compare with. */
    samples idle, locked;
    sample(d.port, c, &a, 1.0, &idle);

    /* Another process takes the write lock and keeps it 3 s. */
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t holder = fork();
    if (holder == 0)
        hold_write_lock(db, ready[1]);
    close(ready[1]); /* a holder that fails closes its end: the read sees it */
    char x;
    ssize_t got = read(ready[0], &x, 1);
    close(ready[0]);
    ck_assert_msg(got == 1, "the other process could not take the lock");
    double t_lock = ap_mono_s();
    /* A request that must write waits for the lock; meanwhile health checks
     * and answers from memory do not. */
    sample(d.port, c, &a, 2.8, &locked);
    svc_apply fresh;
    svc_apply_init(&fresh, tiny_text, "tiny.mlir", "batch=2", SVC_BP_MANUAL, "must-write");
    wire_conn *c2 = svc_conn(d.port);
    ck_assert_msg(apply_on(c2, &fresh, &origin, &st, &t) == 0, "%s: %s", ap_grpc_code_name(st.code), st.msg);
    double t_fresh = ap_mono_s() - t_lock;
    int hst;
    waitpid(holder, &hst, 0);
    ck_assert(WIFEXITED(hst) && WEXITSTATUS(hst) == 0);
    printf("contended %s store (write lock held 3 s by another process); a request that writes: answered %.2f s "
           "after the lock was taken\n",
           store_is_postgres(db) ? "PostgreSQL" : "SQLite", t_fresh);
    print_samples("the lock held", &locked);
    print_samples("no lock, just before", &idle);
    /* The loop never waited on the lock (it did for up to 3 s before the
     * store had its own thread).  Generous bounds: sanitizers, a busy
     * machine. */
    ck_assert_msg(locked.hl[locked.n - 1] < 1.0, "a health check took %.3f s", locked.hl[locked.n - 1]);
    ck_assert_msg(locked.cl[locked.n - 1] < 1.0, "a cache hit took %.3f s", locked.cl[locked.n - 1]);
    ck_assert_msg(t_fresh >= 2.5, "the write did not wait for the lock (%.2f s)", t_fresh);
    wire_close(c);
    wire_close(c2);
    ck_assert_int_eq(svc_stop(&d, SIGTERM, 60), 0);
}

START_TEST(test_contended_sqlite)
{
    char db[256];
    svc_temp_db(db, sizeof db);
    contended(db);
    svc_remove_db(db);
}
END_TEST

START_TEST(test_contended_pg)
{
    char url[256];
    fresh_pg(url, sizeof url);
    contended(url);
}
END_TEST

/* ================================================================= away */

/* CancelSearch while another process holds the store's write lock: the
 * answer waits for the row's end, so a client reading the store after
 * hearing CANCELLED reads the row cancelled (it read it running when the
 * answer went out first). */
START_TEST(test_cancel_waits_for_the_row)
{
    char db[256];
    svc_temp_db(db, sizeof db);
    svc_daemon d;
    svc_start(&d, db, NULL);
    svc_bg_search b = {.port = d.port};
    svc_search_init(&b.q, tiny_text, "tiny.mlir", "batch=2,model=2", SVC_BP_MANUAL, "model", 1000000, "cancel-locked");
    pthread_t th;
    pthread_create(&th, NULL, svc_bg_search_fn, &b);
    int64_t id = svc_wait_status(db, STORE_RUNNING, 120);
    ck_assert(id > 0);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t holder = fork();
    if (holder == 0)
        hold_write_lock(db, ready[1]);
    close(ready[1]);
    char x;
    ssize_t got = read(ready[0], &x, 1);
    close(ready[0]);
    ck_assert_msg(got == 1, "the other process could not take the lock");
    wire_conn *c = svc_conn(d.port);
    Autopart__V1__CancelSearchRequest cr = AUTOPART__V1__CANCEL_SEARCH_REQUEST__INIT;
    char idt[24];
    snprintf(idt, sizeof idt, "%" PRId64, id);
    cr.search_id = idt;
    void *r = NULL;
    size_t n;
    wire_status st;
    double t0 = ap_mono_s();
    ck_assert_msg(svc_call(c, SVC_CANCEL, &cr.base, &r, &n, &st) == 0, "%s", st.msg);
    double t_cancel = ap_mono_s() - t0;
    ap_free(r);
    /* read as a dashboard would, without waiting for the lock (WAL) */
    sqlite3 *h;
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT status FROM searches WHERE id = ?1", -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_int64(q, 1, id);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    int status = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    ck_assert_msg(status == STORE_CANCELLED, "CancelSearch answered after %.2f s with the row still %s", t_cancel,
                  store_status_name(status));
    pthread_join(th, NULL);
    ck_assert_msg(b.run.rc != 0 && b.run.st.code == WIRE_CANCELLED, "%s: %s", ap_grpc_code_name(b.run.st.code),
                  b.run.st.msg);
    int hst;
    waitpid(holder, &hst, 0);
    ck_assert(WIFEXITED(hst) && WEXITSTATUS(hst) == 0);
    wire_close(c);
    ck_assert_int_eq(svc_stop(&d, SIGTERM, 60), 0);
    svc_remove_db(db);
}
END_TEST

START_TEST(test_store_goes_away)
{
    char url[256];
    fresh_pg(url, sizeof url);
    svc_daemon d;
    static const char *const args[] = {"--lease-s", "60", NULL};
    svc_start(&d, url, args);
    wire_conn *c = svc_conn(d.port);
    svc_apply a;
    wire_status st;
    int origin;
    double t;
    svc_apply_init(&a, tiny_text, "tiny.mlir", "batch=2,model=2", bpmp, "kept");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(apply_on(c, &a, &origin, &st, &t) == 0, "%s", st.msg);
    svc_bg_search b = {.port = d.port};
    svc_search_init(&b.q, tiny_text, "tiny.mlir", "batch=2,model=2", SVC_BP_MANUAL, "model", 3000, "outlives");
    pthread_t th;
    pthread_create(&th, NULL, svc_bg_search_fn, &b);
    int64_t id = svc_wait_status(url, STORE_RUNNING, 120);
    ck_assert(id > 0);
    ck_assert_int_eq(pg_control(&cluster, "stop"), 0);
    double t_down = ap_mono_s();

    /* What needs the store says so; the rest goes on. */
    ck_assert_int_eq(health(d.port, &t), 0);
    ck_assert_msg(t < 1.0, "%.3f s", t);
    ck_assert_msg(apply_on(c, &a, &origin, &st, &t) == 0, "%s", st.msg);
    ck_assert_int_eq(origin, AUTOPART__V1__ORIGIN__CACHE_HIT);
    Autopart__V1__GetSearchRequest gr = AUTOPART__V1__GET_SEARCH_REQUEST__INIT;
    char idt[24];
    snprintf(idt, sizeof idt, "%" PRId64, id);
    gr.search_id = idt;
    void *r = NULL;
    size_t len;
    int rc = svc_call(c, SVC_GET, &gr.base, &r, &len, &st);
    ck_assert_msg(rc != 0 && st.code == WIRE_UNAVAILABLE && strstr(st.msg, "store unavailable"), "%s: %s",
                  ap_grpc_code_name(st.code), st.msg);
    ck_assert_msg(!strstr(st.msg, "autopart:"), "a password-less URL, printed as such: %s", st.msg);
    svc_apply other;
    svc_apply_init(&other, tiny_text, "tiny.mlir", "batch=2", SVC_BP_MANUAL, "needs-the-store");
    rc = apply_on(c, &other, &origin, &st, &t);
    ck_assert_msg(rc != 0 && st.code == WIRE_UNAVAILABLE, "%s: %s", ap_grpc_code_name(st.code), st.msg);
    /* The search ends while the server is down: it keeps its answer and
     * says so; its caller waits. */
    bool held = false;
    for (double t0 = ap_mono_s(); !held && ap_mono_s() - t0 < 300; usleep(100000)) {
        char *log = NULL;
        size_t n;
        ap_error e;
        if (ap_read_file(d.log, &log, &n, &e) == 0)
            held = strstr(log, "storing its outcome") != NULL;
        ap_free(log);
    }
    ck_assert_msg(held, "the search never finished while the store was away (see %s)", d.log);
    /* away a few seconds at least: the chores fail many times meanwhile */
    usleep((useconds_t)(1e6 * fmax(0.5, t_down + 3.0 - ap_mono_s())));
    ck_assert_msg(!b.run.t_end, "the search was answered while its result could not be stored");
    double t_held = ap_mono_s();
    ck_assert_int_eq(pg_control(&cluster, "resume"), 0);
    pthread_join(th, NULL);
    ck_assert_msg(b.run.rc == 0, "%s: %s", ap_grpc_code_name(b.run.st.code), b.run.st.msg);
    printf("store away for %.1f s, the search done meanwhile: its answer came %.1f s after the server was back\n",
           t_held - t_down, b.run.t_end - t_held);
    /* Stored, byte for byte; the daemon serves from the store again. */
    store_row row;
    ck_assert_int_eq(svc_row(url, id, &row), 1);
    ck_assert_int_eq(row.status, STORE_DONE);
    search_run again;
    search_call(c, &b.q, &again);
    ck_assert_msg(again.rc == 0, "%s", again.st.msg);
    ck_assert_int_eq(again.origin, AUTOPART__V1__ORIGIN__CACHE_HIT);
    ck_assert(again.result_len == b.run.result_len && !memcmp(again.result, b.run.result, again.result_len));
    ck_assert_msg(apply_on(c, &other, &origin, &st, &t) == 0, "%s", st.msg);
    rc = svc_call(c, SVC_GET, &gr.base, &r, &len, &st);
    ck_assert_msg(rc == 0, "%s", st.msg);
    ap_free(r);
    /* The operator's log tells the outage, not each sweep, heartbeat and
     * retry that failed during it: that the store fails and why, the
     * search whose outcome waits, that the store is back. */
    char *log = NULL;
    size_t n;
    ap_error e;
    ck_assert_int_eq(ap_read_file(d.log, &log, &n, &e), 0);
    int lines = 0;
    for (const char *l = log; (l = strstr(l, "store unavailable")); l++)
        lines++;
    ck_assert_msg(lines >= 1 && lines <= 4, "%d lines about the store's %.1f s away (see %s)", lines, t_held - t_down,
                  d.log);
    ck_assert_msg(strstr(log, "the store answers again"), "never said the store is back (see %s)", d.log);
    ap_free(log);
    free(again.result);
    free(b.run.result);
    wire_close(c);
    ck_assert_int_eq(svc_stop(&d, SIGTERM, 60), 0);
}
END_TEST

/* ============================================================= stranger */

/* A stopped server's port is anybody's (pgcluster's ports are free ones,
 * chosen and released): here another test's server takes it while ours is
 * down.  A daemon reconnecting there is refused (another password, another
 * database), says so, and writes nothing into that stranger's store; once
 * its own server is back it carries on. */
START_TEST(test_a_stranger_on_the_port)
{
    char url[256];
    fresh_pg(url, sizeof url);
    svc_daemon d;
    svc_start(&d, url, NULL);
    wire_conn *c = svc_conn(d.port);
    svc_apply a, b;
    wire_status st;
    int origin;
    double t;
    svc_apply_init(&a, tiny_text, "tiny.mlir", "batch=2,model=2", bpmp, "before");
    ck_assert_msg(apply_on(c, &a, &origin, &st, &t) == 0, "%s", st.msg);

    ck_assert_int_eq(pg_control(&cluster, "stop"), 0);
    pg_cluster stranger;
    bool up = pg_start(&stranger, cluster.port);
    store *s; /* the stranger's store, in use */
    ap_error err = {0};
    up = up && store_open(stranger.url, "stranger:1:a", 2000, &s, &err) == 0;
    if (up)
        store_close(s);

    /* Past the daemon's pause between attempts to connect (a second), and
     * until it has said why.  The stranger goes before any check can end
     * the test. */
    svc_apply_init(&b, tiny_text, "tiny.mlir", "batch=2", SVC_BP_MANUAL, "after");
    bool answered = false, other = false, told = false;
    char msg[sizeof st.msg] = "";
    for (double t0 = ap_mono_s(); up && ap_mono_s() - t0 < 30; usleep(100000)) {
        if ((answered = apply_on(c, &b, &origin, &st, &t) == 0))
            break;
        snprintf(msg, sizeof msg, "%s", st.msg);
        other = st.code != WIRE_UNAVAILABLE || !strstr(msg, "store unavailable") || strstr(msg, "autopart:");
        told |= strstr(msg, "password authentication failed") != NULL;
        if (other || (told && ap_mono_s() - t0 > 1.5))
            break;
    }
    long long rows = up ? pg_int(stranger.url, "SELECT count(*) FROM searches") : -1;
    pg_destroy(&stranger);
    ck_assert_int_eq(pg_control(&cluster, "resume"), 0);
    ck_assert_msg(up, "the second server did not start on the first's port %d: %s", cluster.port, err.msg);
    ck_assert_msg(!answered, "the daemon answered through another test's store");
    ck_assert_msg(!other, "not UNAVAILABLE, or the URL printed with its password: %s", msg);
    ck_assert_msg(told, "never said why: %s", msg);
    ck_assert_int_eq(rows, 0);

    int rc = -1;
    for (double t0 = ap_mono_s(); rc != 0 && ap_mono_s() - t0 < 30; usleep(100000))
        rc = apply_on(c, &b, &origin, &st, &t);
    ck_assert_msg(rc == 0, "%s", st.msg);
    ck_assert_int_eq(pg_int(url, "SELECT count(*) FROM searches"), 2);
    wire_close(c);
    ck_assert_int_eq(svc_stop(&d, SIGTERM, 60), 0);
}
END_TEST

/* ================================================================ fleet */

enum { N_DAEMONS = 3, N_DISTINCT = 40, N_REQUESTS = 60 };
/* The search node-b runs when it is killed: asked first, through node-b
 * alone, and long (about 4 s here unloaded, the others 0.05-0.15 s), so
 * that node-b is mid-search when the answers the kill waits for are in. */
enum { LONG = 1, LONG_EPISODES = 20000 };

typedef struct fleet {
    char url[256];
    svc_daemon d[N_DAEMONS];
    atomic_bool dead[N_DAEMONS];
    atomic_int answered;
    svc_search q[N_DISTINCT];
    char label[N_DISTINCT][32];
} fleet;

typedef struct client {
    fleet *f;
    int req, first;      /* which request, which daemon first */
    search_run run;      /* the one that ended it */
    int tries, remote_progress;
} client;

/* A client as a training job is: on UNAVAILABLE (its daemon died, the
 * store was away) it asks again, through the next daemon. */
static void *client_fn(void *arg)
{
    client *cl = arg;
    fleet *f = cl->f;
    int k = cl->first;
    double t0 = ap_mono_s();
    for (;;) {
        while (atomic_load(&f->dead[k]))
            k = (k + 1) % N_DAEMONS;
        cl->tries++;
        wire_conn *c = svc_conn_opts(f->d[k].port, NULL, 300);
        search_call(c, &f->q[cl->req], &cl->run);
        wire_close(c);
        if (cl->run.rc == 0)
            break;
        ck_assert_msg(cl->run.st.code == WIRE_UNAVAILABLE || atomic_load(&f->dead[k]),
                      "request %d through daemon %d: %s: %s", cl->req, k, ap_grpc_code_name(cl->run.st.code),
                      cl->run.st.msg);
        ck_assert_msg(ap_mono_s() - t0 < 400, "request %d never answered", cl->req);
        free(cl->run.result);
        k = (k + 1) % N_DAEMONS;
        usleep(200000);
    }
    atomic_fetch_add(&f->answered, 1);
    return NULL;
}

/* Rows the killed daemon ran: when another daemon started them. */
typedef struct watch {
    fleet *f;
    int n;
    int64_t ids[8];
    double claimed[8], taken[8]; /* owned by a live daemon; running there */
    double t_kill;
    atomic_bool stop;
} watch;

static void *watch_fn(void *arg)
{
    watch *w = arg;
    while (!atomic_load(&w->stop)) {
        store *s;
        ap_error err;
        if (store_open(w->f->url, "watch:0:0", 2000, &s, &err) == 0) {
            for (int i = 0; i < w->n; i++) {
                store_row row;
                if (w->taken[i] || store_get(s, w->ids[i], &row, &err) != 1)
                    continue;
                bool elsewhere = row.owner[0] && strncmp(row.owner, "node-b:", 7) != 0;
                if (!w->claimed[i] && (elsewhere || row.status == STORE_DONE))
                    w->claimed[i] = ap_mono_s() - w->t_kill;
                if ((elsewhere && row.status == STORE_RUNNING) || row.status == STORE_DONE)
                    w->taken[i] = ap_mono_s() - w->t_kill;
            }
            store_close(s);
        }
        usleep(50000);
    }
    return NULL;
}

/* What the daemons' logs say of row id (a search run twice: who took it
 * over from whom, the store's errors around it), printed with the failure. */
static void print_row_story(const fleet *f, int64_t id, unsigned attempts)
{
    char needle[2][48];
    snprintf(needle[0], sizeof needle[0], "search %" PRId64 " ", id);
    snprintf(needle[1], sizeof needle[1], "search %" PRId64 ":", id);
    printf("fleet: search %" PRId64 " ran %u times; the daemons' logs say:\n", id, attempts);
    for (int i = 0; i < N_DAEMONS; i++) {
        char *log = NULL;
        size_t n;
        ap_error e;
        if (ap_read_file(f->d[i].log, &log, &n, &e) < 0)
            continue;
        for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
            if (strstr(line, needle[0]) || strstr(line, needle[1]) || strstr(line, "heartbeat"))
                printf("  daemon %d: %s\n", i, line);
        ap_free(log);
    }
}

/* How many times the live daemons' logs say they took row id over from
 * the killed node-b after it had started it ("taking over search ID (...)
 * from node-b:...: interrupted in its run N"): the runs of a row that a
 * death accounts for.  The claimer's own record, so exact whenever the
 * test looks (a listing before the kill misses a row node-b starts in
 * between; one after it, a row claimed once its lease ran out). */
static int takeovers_from_b(const fleet *f, int64_t id)
{
    char needle[64];
    snprintf(needle, sizeof needle, "taking over search %" PRId64 " (", id);
    int n = 0;
    for (int i = 0; i < N_DAEMONS; i++) {
        char *log = NULL;
        size_t len;
        ap_error e;
        if (i == 1 || ap_read_file(f->d[i].log, &log, &len, &e) < 0)
            continue;
        for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
            const char *at = strstr(line, needle), *from = at ? strstr(at, ") from node-b:") : NULL;
            n += from && strstr(from, ": interrupted in its run ") != NULL;
        }
        ap_free(log);
    }
    return n;
}

/* Node-b's rows now (queued or running, owned by it; with `label`, only
 * running rows of that client label), up to max: after its death, the
 * rows it held, until their leases run out. */
static int rows_of_b(const fleet *f, const char *label, int64_t *ids, int max)
{
    store *s;
    ap_error err;
    ck_assert_msg(store_open(f->url, "test:0:0", 2000, &s, &err) == 0, "%s", err.msg);
    store_row rows[N_DISTINCT];
    char next[48];
    store_filter all = {0};
    int n = store_list(s, &all, N_DISTINCT, NULL, rows, next, &err), k = 0;
    ck_assert_msg(n >= 0, "%s", err.msg);
    store_close(s);
    for (int i = 0; i < n && k < max; i++)
        if ((label ? rows[i].status == STORE_RUNNING && !strcmp(rows[i].client_label, label)
                   : rows[i].status == STORE_QUEUED || rows[i].status == STORE_RUNNING) &&
            !strncmp(rows[i].owner, "node-b:", 7))
            ids[k++] = rows[i].id;
    return k;
}

/* The row of client label `label` that node-b runs now, or 0. */
static int64_t running_on_b(const fleet *f, const char *label)
{
    int64_t id = 0;
    return rows_of_b(f, label, &id, 1) ? id : 0;
}

/* Client i (request i, or a repeat of request i - N_DISTINCT through the
 * daemon after the first one's) in a thread of its own. */
static void start_client(fleet *f, client *cl, pthread_t *th, int i)
{
    cl[i] = (client){.f = f, .req = i < N_DISTINCT ? i : i - N_DISTINCT, .first = i % N_DAEMONS};
    if (i >= N_DISTINCT)
        cl[i].first = (cl[i].req + 1) % N_DAEMONS;
    pthread_create(&th[i], NULL, client_fn, &cl[i]);
}

START_TEST(test_fleet)
{
    static fleet f;
    fresh_pg(f.url, sizeof f.url);
    static const char *const names[N_DAEMONS] = {"node-a", "node-b", "node-c"};
    for (int i = 0; i < N_DAEMONS; i++) {
        const char *args[] = {"--node-name", names[i], "--lease-s", "5", "--max-concurrent", "2",
                              "--threads-per-search", "1", NULL};
        svc_start(&f.d[i], f.url, args);
        atomic_init(&f.dead[i], false);
    }
    /* 40 distinct searches (seeds and budgets), 20 of them asked twice,
     * the second time through another daemon. */
    for (int i = 0; i < N_DISTINCT; i++) {
        snprintf(f.label[i], sizeof f.label[i], "job-%d", i);
        svc_search_init(&f.q[i], tiny_text, "tiny.mlir", "batch=2,model=2", SVC_BP_MANUAL, "model",
                        200 + 200 * (i % 3), f.label[i]);
        f.q[i].req.seed = (uint64_t)(i + 1);
    }
    f.q[LONG].req.episodes = LONG_EPISODES;
    static client cl[N_REQUESTS];
    pthread_t th[N_REQUESTS];
    double t0 = ap_mono_s();
    /* The long search first, through node-b, which is idle and so runs it
     * itself; then the other first requests.  (The kill once waited for a
     * listing to show node-b running one of the short searches: now and
     * then it ran none at that moment, and the test failed.) */
    start_client(&f, cl, th, LONG);
    int64_t long_row;
    while (!(long_row = running_on_b(&f, f.label[LONG]))) {
        ck_assert_msg(ap_mono_s() - t0 < 60, "node-b did not start the long search in 60 s");
        usleep(20000);
    }
    for (int i = 0; i < N_DISTINCT; i++)
        if (i != LONG)
            start_client(&f, cl, th, i);
    double t_first = ap_mono_s();

    /* Kill node-b mid-search (the long one, and whatever else it holds)
     * once some answers are in.  Its orphans are the rows it holds at its
     * death, read after it: nobody claims them before their leases run out
     * (a listing before the kill missed a row node-b started in between,
     * which then counted as run twice without a death). */
    static watch w;
    w.f = &f;
    atomic_init(&w.stop, false);
    while (atomic_load(&f.answered) < 6 && ap_mono_s() - t0 < 300)
        usleep(20000);
    atomic_store(&f.dead[1], true);
    kill(f.d[1].pid, SIGKILL);
    waitpid(f.d[1].pid, NULL, 0);
    f.d[1].pid = 0;
    w.t_kill = ap_mono_s();
    int answered_at_kill = atomic_load(&f.answered);
    w.n = rows_of_b(&f, NULL, w.ids, 8);
    bool long_held = false;
    for (int k = 0; k < w.n; k++)
        long_held |= w.ids[k] == long_row;
    if (!long_held && w.n < 8) /* read late (its lease ran out first): that it was held is checked below */
        w.ids[w.n++] = long_row;
    /* The repeats, 1.5 s after the first ones, while they run. */
    usleep((useconds_t)(1e6 * fmax(0, 1.5 - (ap_mono_s() - t_first))));
    for (int i = N_DISTINCT; i < N_REQUESTS; i++)
        start_client(&f, cl, th, i);
    pthread_t wt;
    pthread_create(&wt, NULL, watch_fn, &w);

    /* Restart the PostgreSQL server once, mid-run. */
    while (atomic_load(&f.answered) < 20 && ap_mono_s() - t0 < 300)
        usleep(20000);
    int answered_at_restart = atomic_load(&f.answered);
    double tr = ap_mono_s();
    ck_assert_int_eq(pg_control(&cluster, "restart"), 0);
    double restart_s = ap_mono_s() - tr;

    for (int i = 0; i < N_REQUESTS; i++)
        pthread_join(th[i], NULL);
    double wall = ap_mono_s() - t0;
    atomic_store(&w.stop, true);
    pthread_join(wt, NULL);

    /* Every request answered; identical ones byte for byte; each equal to
     * what the store keeps. */
    store *s;
    ap_error err;
    ck_assert_msg(store_open(f.url, "test:0:0", 5000, &s, &err) == 0, "%s", err.msg);
    int tries = 0, joined = 0, remote_streams = 0, hits = 0;
    for (int i = 0; i < N_REQUESTS; i++) {
        client *c = &cl[i];
        tries += c->tries - 1;
        joined += c->run.origin == AUTOPART__V1__ORIGIN__JOINED;
        hits += c->run.origin == AUTOPART__V1__ORIGIN__CACHE_HIT;
        if (c->run.origin == AUTOPART__V1__ORIGIN__JOINED && c->run.progress > 0)
            remote_streams++;
        for (int k = 0; k < i; k++)
            if (cl[k].req == c->req)
                ck_assert_msg(cl[k].run.result_len == c->run.result_len &&
                                  !memcmp(cl[k].run.result, c->run.result, c->run.result_len),
                              "request %d: two different answers", c->req);
        store_row row;
        ck_assert_int_eq(store_get(s, atoll(c->run.id), &row, &err), 1);
        ck_assert_int_eq(row.status, STORE_DONE);
        void *res;
        size_t len;
        ck_assert_int_eq(store_payload(s, row.id, STORE_PAYLOAD_RESULT, &res, &len, &err), 1);
        ck_assert_msg(len == c->run.result_len && !memcmp(res, c->run.result, len),
                      "request %d: the answer given is not the one stored", c->req);
        ap_free(res);
    }
    /* Progress relayed from the store to callers that joined a search another
     * daemon ran: each event against the history point its daemon wrote. */
    double lat[N_REQUESTS * 64];
    int n_lat = 0;
    for (int i = 0; i < N_REQUESTS; i++) {
        client *c = &cl[i];
        if (!c->run.n_relayed)
            continue;
        store_point pts[512];
        int np = store_history(s, atoll(c->run.id), pts, 512, &err);
        ck_assert_int_ge(np, 0);
        for (int e = 0; e < c->run.n_relayed; e++)
            for (int k = np - 1; k >= 0; k--)
                if (pts[k].episodes == c->run.relayed_episodes[e] && pts[k].t_us <= c->run.relayed_us[e]) {
                    lat[n_lat++] = (double)(c->run.relayed_us[e] - pts[k].t_us) / 1e6;
                    break;
                }
    }
    qsort(lat, (size_t)n_lat, sizeof *lat, cmp_double);
    /* Every search ended exactly once: one row per distinct request, done;
     * run once, or twice when the killed daemon had started it. */
    store_counts cnt;
    ck_assert_int_eq(store_counts_get(s, &cnt, &err), 0);
    ck_assert_int_eq(cnt.rows, N_DISTINCT);
    ck_assert_int_eq(cnt.by_status[STORE_DONE], N_DISTINCT);
    int reruns = 0, duplicates = 0;
    store_row rows[N_DISTINCT];
    char next[48];
    store_filter all = {0};
    int n = store_list(s, &all, N_DISTINCT, NULL, rows, next, &err);
    ck_assert_int_eq(n, N_DISTINCT);
    for (int i = 0; i < n; i++) {
        int deaths = rows[i].attempts > 1 ? takeovers_from_b(&f, rows[i].id) : 0;
        if (rows[i].attempts > 1 && rows[i].attempts <= 1 + (uint32_t)deaths) {
            reruns++;
        } else if (rows[i].attempts != 1) {
            duplicates++;
            print_row_story(&f, rows[i].id, rows[i].attempts);
        }
        if (rows[i].id == long_row) /* node-b died running it, and it was run again elsewhere once */
            ck_assert_msg(rows[i].attempts == 2 && deaths == 1,
                          "the long search ran %u times, %d of them taken over from node-b", rows[i].attempts, deaths);
    }
    ck_assert_msg(duplicates == 0, "%d searches ran more than once without a daemon dying", duplicates);

    /* The orphans' answers are those of an uninterrupted run by one daemon. */
    char db1[256];
    svc_temp_db(db1, sizeof db1);
    svc_daemon one;
    svc_start(&one, db1, NULL);
    wire_conn *c1 = svc_conn(one.port);
    for (int k = 0; k < w.n; k++) {
        int req = -1;
        for (int i = 0; i < N_REQUESTS && req < 0; i++)
            if (atoll(cl[i].run.id) == w.ids[k])
                req = i;
        ck_assert(req >= 0);
        search_run alone;
        search_call(c1, &f.q[cl[req].req], &alone);
        ck_assert_msg(alone.rc == 0, "%s", alone.st.msg);
        same_answer(alone.result, alone.result_len, cl[req].run.result, cl[req].run.result_len);
        free(alone.result);
    }
    wire_close(c1);
    ck_assert_int_eq(svc_stop(&one, SIGTERM, 60), 0);
    svc_remove_db(db1);
    store_close(s);

    printf("fleet: %d daemons on PostgreSQL, %d requests (%d distinct) in %.1f s; answered %d new, %d joined (%d of "
           "them streamed progress of a search run by another daemon), %d from the store; 1 daemon killed with SIGKILL "
           "(%d answers in) holding %d searches; PostgreSQL restarted once (%d answers in, %.1f s down and up); "
           "%d retries by clients\n",
           N_DAEMONS, N_REQUESTS, N_DISTINCT, wall, N_REQUESTS - joined - hits, joined, remote_streams, hits,
           answered_at_kill, w.n, answered_at_restart, restart_s, tries);
    if (n_lat)
        printf("fleet: progress of searches run by another daemon, relayed to joined callers (polling the store every "
               "250 ms): %d events, from the running daemon's write to the caller p50 %.0f ms, p90 %.0f ms, max %.0f "
               "ms\n",
               n_lat, lat[n_lat / 2] * 1e3, lat[n_lat * 9 / 10] * 1e3, lat[n_lat - 1] * 1e3);
    printf("fleet: takeover of the killed daemon's searches (lease 5 s), from the kill to their claim by another "
           "daemon / their start there:");
    for (int k = 0; k < w.n; k++)
        printf(" %.1f/%.1f s", w.claimed[k], w.taken[k]);
    printf("; all %d ended with the answer of an uninterrupted run; lost results 0; searches run twice without a "
           "death %d; rows %" PRIu64 " for %d distinct requests, all done\n",
           w.n, duplicates, cnt.rows, N_DISTINCT);
    for (int k = 0; k < w.n; k++)
        ck_assert_msg(w.taken[k] > 0 && w.taken[k] < 30, "search %" PRId64 " taken over after %.1f s", w.ids[k],
                      w.taken[k]);
    ck_assert_int_ge(reruns, 1); /* the long search at least */
    for (int i = 0; i < N_REQUESTS; i++)
        free(cl[i].run.result);
    for (int i = 0; i < N_DAEMONS; i++)
        if (i != 1)
            ck_assert_int_eq(svc_stop(&f.d[i], SIGTERM, 60), 0);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    tiny_text = svc_generate("tiny");
    if (!(bpmp = svc_bpmp()))
        return 1;
    if (!pg_start(&cluster, 0))
        return 1;
    svc_log_dir = cluster.dir;
    Suite *s = suite_create("fleet");
    TCase *tc = tcase_create("fleet");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_contended_sqlite);
    tcase_add_test(tc, test_contended_pg);
    tcase_add_test(tc, test_cancel_waits_for_the_row);
    tcase_add_test(tc, test_store_goes_away);
    tcase_add_test(tc, test_a_stranger_on_the_port);
    tcase_add_test(tc, test_fleet);
    suite_add_tcase(s, tc);
    int rc = tl_run(s);
    pg_finish(&cluster, rc == 0);
    ap_free(tiny_text);
    ap_free(bpmp);
    return rc;
}
