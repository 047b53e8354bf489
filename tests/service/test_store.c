/*
 * test_store.c - autopartd's store, on real databases: one live row per
 * key (also between two connections, as two daemons hold), leases and the
 * take-over of rows whose owner died, cancellation, aliases, listings
 * newest first with keyset pages and filters, the dashboard's orders and
 * free text, progress history, schema versions and migrations.
 *
 * The same cases run against each backend: SQLite files (test_store), and
 * a PostgreSQL server the test starts (test_store_pg: AP_TEST_STORE=
 * postgresql; a fresh database per case).
 */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"
#include "store.h"
#include "testlib.h"

static bool pg_mode;
static pg_cluster cluster;
static char db_path[256];

static void setup(void)
{
    if (pg_mode) {
        /* an empty database: everything the store made, gone */
        snprintf(db_path, sizeof db_path, "%s", cluster.url);
        ck_assert(pg_sql(db_path, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"));
        return;
    }
    snprintf(db_path, sizeof db_path, "/tmp/autopart-store-XXXXXX");
    int fd = mkstemp(db_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(db_path); /* SQLite creates it */
}

static void teardown(void)
{
    if (pg_mode)
        return;
    char p[300];
    unlink(db_path);
    snprintf(p, sizeof p, "%s-wal", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path);
    unlink(p);
}

/* SQL straight on the test's database, past the store. */
static void db_exec(const char *sql)
{
    if (pg_mode) {
        ck_assert_msg(pg_sql(db_path, sql), "%s", sql);
        return;
    }
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
    sqlite3_close(db);
}

/* An integer from SQL straight on the test's database. */
static long long db_int_f(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long db_int_f(const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    if (pg_mode)
        return pg_int(db_path, sql);
    sqlite3 *db;
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    long long v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

static store *open_as(const char *owner)
{
    store *s;
    ap_error err;
    ck_assert_msg(store_open(db_path, owner, 2000, &s, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(store_backend(s), pg_mode ? "postgresql" : "sqlite");
    return s;
}

static void key_of(int i, uint8_t *k)
{
    memset(k, 0, STORE_KEY_BYTES);
    k[0] = (uint8_t)(i >> 8);
    k[1] = (uint8_t)i;
    k[31] = 0x5a;
}

/* A new row for key i, made by s at time t. */
static int64_t begin_row(store *s, int i, int64_t t, const char *label, bool *created, store_row *row)
{
    uint8_t key[STORE_KEY_BYTES], mh[STORE_KEY_BYTES];
    key_of(i, key);
    memset(mh, 0, sizeof mh);
    mh[0] = (uint8_t)(i % 3);
    mh[1] = 0xab;
    char req[32];
    snprintf(req, sizeof req, "request %d", i);
    store_new n = {.kind = i % 2 ? STORE_SEARCH : STORE_APPLY, .key = key, .module_hash = mh,
                   .module_name = "m.mlir", .client_label = label, .mesh = "batch=8,model=4", .device = "tpu_v3",
                   .axes = "model", .request = req, .request_len = strlen(req)};
    ap_error err;
    ck_assert_msg(store_begin(s, &n, t, t + 10000000, row, created, &err) == 0, "%s", err.msg);
    return row->id;
}

START_TEST(test_one_live_row_per_key)
{
    store *a = open_as("hostA:1:aa"), *b = open_as("hostB:2:bb");
    store_row r1, r2;
    bool c1, c2;
    ap_error err;
    int64_t id = begin_row(a, 7, 1000, "job", &c1, &r1);
    ck_assert(c1);
    void *req;
    size_t req_len;
    ck_assert_int_eq(store_payload(b, id, STORE_PAYLOAD_REQUEST, &req, &req_len, &err), 1);
    ck_assert(req_len == 9 && memcmp(req, "request 7", 9) == 0);
    ap_free(req);
    ck_assert_int_eq(r1.status, STORE_QUEUED);
    ck_assert_str_eq(r1.owner, "hostA:1:aa");
    /* the other daemon asking the same key finds it: it joins, it does not run it */
    begin_row(b, 7, 2000, "job2", &c2, &r2);
    ck_assert(!c2);
    ck_assert_int_eq(r2.id, id);
    ck_assert_int_eq(store_start(a, id, 3000, &err), 0);
    /* started again by its owner (the daemon tries again when the store went
     * away before it answered, whether or not the start was made): one run */
    ck_assert_int_eq(store_start(a, id, 3000, &err), 0);
    ck_assert_int_eq(store_start(b, id, 3000, &err), AP_ECONFLICT); /* not b's */
    const char result[] = "\x1a\x03" "abc";
    store_progress sum = {.episodes = 5, .best_runtime_s = 1.5, .best_peak_memory = 99};
    ck_assert_int_eq(store_finish(a, id, STORE_DONE, 4000, result, sizeof result - 1, &sum, NULL, &err), 0);
    ck_assert_int_eq(store_finish(a, id, STORE_DONE, 4000, result, 3, &sum, NULL, &err), AP_ECONFLICT);
    void *data;
    size_t len;
    ck_assert_int_eq(store_payload(b, id, STORE_PAYLOAD_RESULT, &data, &len, &err), 1);
    ck_assert_uint_eq(len, sizeof result - 1);
    ck_assert(memcmp(data, result, len) == 0);
    ap_free(data);
    /* the request is kept only while the row may have to run again */
    ck_assert_int_eq(store_payload(b, id, STORE_PAYLOAD_REQUEST, &data, &len, &err), 0);
    ck_assert_int_eq(store_get(b, id, &r2, &err), 1);
    ck_assert_int_eq(r2.status, STORE_DONE);
    ck_assert_int_eq(r2.attempts, 1);
    ck_assert_int_eq(r2.episodes, 5);
    ck_assert_str_eq(r2.owner, "");
    /* a failed row leaves the key free: asking again makes a new row */
    int64_t id2 = begin_row(a, 8, 5000, "job", &c1, &r1);
    ck_assert_int_eq(store_finish(a, id2, STORE_FAILED, 6000, NULL, 0, NULL, "lowering failed", &err), 0);
    int64_t id3 = begin_row(b, 8, 7000, "job", &c2, &r2);
    ck_assert(c2);
    ck_assert_int_ne(id3, id2);
    ck_assert_int_eq(store_find_live(a, r2.key, &r1, &err), 1);
    ck_assert_int_eq(r1.id, id3);
    ck_assert_int_eq(store_check(a, true, &err), 0);
    store_close(a);
    store_close(b);
}
END_TEST

START_TEST(test_orphans_are_taken_over)
{
    store *a = open_as("hostA:1:aa"), *b = open_as("hostB:2:bb");
    store_row r;
    bool c;
    ap_error err;
    store_claim ids[8];
    int64_t id = begin_row(a, 1, 1000, "", &c, &r); /* lease until 1000 + 10 s */
    ck_assert_int_eq(store_start(a, id, 1500, &err), 0);
    /* alive and leased: nobody takes it */
    ck_assert_int_eq(store_claim_orphans(b, 0, 2000, 99999999, true, ids, 8, &err), 0);
    /* the heartbeat keeps it */
    ck_assert_int_eq(store_heartbeat(a, 50000000, &err), 0);
    ck_assert_int_eq(store_claim_orphans(b, 0, 20000000, 99999999, true, ids, 8, &err), 0);
    /* the lease runs out: b takes it, queued again, once */
    ck_assert_int_eq(store_claim_orphans(b, STORE_APPLY, 60000000, 99999999, true, ids, 8, &err), 0); /* a search */
    ck_assert_int_eq(store_claim_orphans(b, STORE_SEARCH, 60000000, 99999999, false, ids, 8, &err), 1); /* an orphan */
    ck_assert_int_eq(ids[0].id, id);
    ck_assert_int_eq(ids[0].kind, STORE_SEARCH);
    ck_assert_str_eq(ids[0].prev_owner, "hostA:1:aa"); /* who had it, for the log */
    ck_assert_int_eq(store_claim_orphans(a, 0, 60000000, 99999999, true, ids, 8, &err), 0);
    ck_assert_int_eq(store_get(a, id, &r, &err), 1);
    ck_assert_str_eq(r.owner, "hostB:2:bb");
    ck_assert_int_eq(r.status, STORE_QUEUED);
    /* a's late finish no longer counts: the row is b's */
    ck_assert_int_eq(store_start(a, id, 60000001, &err), AP_ECONFLICT);
    ck_assert_int_eq(store_start(b, id, 60000001, &err), 0);
    ck_assert_int_eq(store_get(a, id, &r, &err), 1);
    ck_assert_int_eq(r.attempts, 2);
    /* a clean shutdown gives rows back without waiting for the lease: they
     * are queued for any daemon, not orphans */
    ck_assert_int_eq(store_release_all(b, &err), 0);
    ck_assert_int_eq(store_claim_orphans(a, 0, 60000002, 99999999, false, ids, 8, &err), 0);
    ck_assert_int_eq(store_claim_orphans(a, 0, 60000002, 99999999, true, ids, 8, &err), 1);
    ck_assert_str_eq(ids[0].prev_owner, "");
    /* a released row is taken by one daemon: the first to claim it */
    ck_assert_int_eq(store_release(a, id, &err), 0);
    ck_assert_int_eq(store_claim_one(b, id, 99999999, &err), 1);
    ck_assert_int_eq(store_claim_one(a, id, 99999999, &err), 0);
    ck_assert_int_eq(store_get(a, id, &r, &err), 1);
    ck_assert_str_eq(r.owner, "hostB:2:bb");
    ck_assert_int_eq(store_start(b, id, 60000003, &err), 0);
    /* b's start went through but its answer was lost with the connection (a
     * server restart): b claims and starts again, and the row is b's,
     * running, the same run (it once answered "taken": b waited for its own
     * row to end, and renewed its lease forever) */
    ck_assert_int_eq(store_claim_one(b, id, 99999999, &err), 1);
    ck_assert_int_eq(store_claim_one(a, id, 99999999, &err), 0);
    ck_assert_int_eq(store_start(b, id, 60000003, &err), 0);
    ck_assert_int_eq(store_get(a, id, &r, &err), 1);
    ck_assert_str_eq(r.owner, "hostB:2:bb");
    ck_assert_int_eq(r.status, STORE_RUNNING);
    ck_assert_int_eq(r.attempts, 3);
    ck_assert_int_eq(store_release(b, id, &err), 0); /* running: back to queued */
    ck_assert_int_eq(store_finish(a, id, STORE_DONE, 60000004, "r", 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(store_claim_one(a, id, 99999999, &err), 0); /* done: not queued */
    store_close(a);
    store_close(b);
}
END_TEST

START_TEST(test_dead_owner_on_this_host)
{
    char host[256], owner[300];
    ck_assert_int_eq(gethostname(host, sizeof host), 0);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0); /* a pid that is gone */
    snprintf(owner, sizeof owner, "%s:%d:dead", host, (int)child);
    ck_assert(store_owner_dead(owner));
    snprintf(owner, sizeof owner, "%s:%d:alive", host, (int)getpid());
    ck_assert(!store_owner_dead(owner));
    ck_assert(!store_owner_dead("some-other-host:1:x"));
    ck_assert(!store_owner_dead("garbage"));

    snprintf(owner, sizeof owner, "%s:%d:dead", host, (int)child);
    char mine[300];
    snprintf(mine, sizeof mine, "%s:%d:me", host, (int)getpid());
    /* "This host" is the first field of the claimer's own name (the
     * daemon's --node-name): a daemon that calls itself another node
     * judges the row by its lease alone. */
    store *dead = open_as(owner), *me = open_as(mine), *other = open_as("other-node:1:x");
    store_row r;
    bool c;
    ap_error err;
    store_claim ids[4];
    int64_t id = begin_row(dead, 3, 1000, "", &c, &r);
    ck_assert_int_eq(store_heartbeat(dead, INT64_MAX / 2, &err), 0);
    ck_assert_int_eq(store_claim_orphans(other, 0, 2000, 999999, true, ids, 4, &err), 0);
    /* leased for long, but its owner is a dead process here: taken at once */
    ck_assert_int_eq(store_claim_orphans(me, 0, 2000, 999999, true, ids, 4, &err), 1);
    ck_assert_int_eq(ids[0].id, id);
    store_close(dead);
    store_close(me);
    store_close(other);
}
END_TEST

START_TEST(test_cancel)
{
    store *a = open_as("hostA:1:aa"), *b = open_as("hostB:2:bb");
    store_row r;
    bool c;
    ap_error err;
    int st;
    int64_t ids[4];
    int64_t id = begin_row(a, 1, 1000, "", &c, &r);
    /* owned by a daemon: the owner is asked, through the row */
    ck_assert_int_eq(store_request_cancel(b, id, 2000, &st, &err), 1);
    ck_assert_int_eq(st, STORE_QUEUED);
    ck_assert_int_eq(store_cancel_requests(a, ids, 4, &err), 1);
    ck_assert_int_eq(ids[0], id);
    ck_assert_int_eq(store_cancel_requests(b, ids, 4, &err), 0);
    ck_assert_int_eq(store_finish(a, id, STORE_CANCELLED, 3000, NULL, 0, NULL, "cancelled", &err), 0);
    /* queued with nobody running it: cancelled here and now */
    int64_t id2 = begin_row(a, 2, 1000, "", &c, &r);
    ck_assert_int_eq(store_release(a, id2, &err), 0);
    ck_assert_int_eq(store_request_cancel(b, id2, 2000, &st, &err), 1);
    ck_assert_int_eq(st, STORE_CANCELLED);
    /* done rows stay done; unknown ids say so */
    ck_assert_int_eq(store_request_cancel(b, 999, 2000, &st, &err), 0);
    store_close(a);
    store_close(b);
}
END_TEST

START_TEST(test_aliases_and_history)
{
    store *a = open_as("hostA:1:aa");
    uint8_t raw[32], key[32], got[32];
    ap_error err;
    memset(raw, 1, sizeof raw);
    memset(key, 2, sizeof key);
    ck_assert_int_eq(store_alias_get(a, raw, got, &err), 0);
    ck_assert_int_eq(store_alias_put(a, raw, key, 1, &err), 0);
    ck_assert_int_eq(store_alias_put(a, raw, key, 2, &err), 0); /* again: harmless */
    ck_assert_int_eq(store_alias_get(a, raw, got, &err), 1);
    ck_assert(memcmp(got, key, 32) == 0);

    store_row r;
    bool c;
    int64_t id = begin_row(a, 1, 1000, "", &c, &r);
    ck_assert_int_eq(store_start(a, id, 1000, &err), 0);
    for (int i = 0; i < 30; i++) {
        store_progress p = {.episodes = i * 10, .best_runtime_s = 10.0 - i * 0.1, .best_peak_memory = 100 - i,
                            .best_schedule = i == 29 ? "tile %arg0 0 model\npropagate\n" : NULL};
        ck_assert_int_eq(store_set_progress(a, id, 2000 + i, &p, true, "ckpt", 4, &err), 0);
    }
    store_point pts[10];
    int n = store_history(a, id, pts, 10, &err);
    ck_assert_int_eq(n, 10); /* the latest 10, oldest first */
    ck_assert_int_eq(pts[0].t_us, 2020);
    ck_assert_int_eq(pts[9].t_us, 2029);
    ck_assert_int_eq(pts[9].episodes, 290);
    char *sched;
    ck_assert_int_eq(store_best_schedule(a, id, &sched, &err), 1);
    ck_assert_str_eq(sched, "tile %arg0 0 model\npropagate\n");
    ap_free(sched);
    void *ck;
    size_t len;
    ck_assert_int_eq(store_payload(a, id, STORE_PAYLOAD_CHECKPOINT, &ck, &len, &err), 1);
    ck_assert(len == 4 && !memcmp(ck, "ckpt", 4));
    ap_free(ck);
    ck_assert_int_eq(store_get(a, id, &r, &err), 1);
    ck_assert_int_eq(r.episodes, 290);
    ck_assert_int_eq(r.progress_us, 2029);
    store_close(a);
}
END_TEST

/* Pages through everything with a filter; checks order and that every
 * matching row comes exactly once.  Returns the count. */
static int page_all(store *s, const store_filter *f, int limit, int expect)
{
    store_row *rows = malloc(sizeof *rows * (size_t)limit);
    char next[48] = "", after[48] = "";
    ap_error err;
    int total = 0;
    int64_t last_t = INT64_MAX, last_id = INT64_MAX;
    for (;;) {
        int n = store_list(s, f, limit, after, rows, next, &err);
        ck_assert_msg(n >= 0, "%s", err.msg);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(rows[i].created_us < last_t || (rows[i].created_us == last_t && rows[i].id < last_id),
                          "not newest first at row %d", total + i);
            last_t = rows[i].created_us;
            last_id = rows[i].id;
            if (f->status)
                ck_assert_int_eq(rows[i].status, f->status);
            if (f->client_label && f->client_label[0])
                ck_assert_str_eq(rows[i].client_label, f->client_label);
        }
        total += n;
        if (!next[0])
            break;
        ck_assert_int_eq(n, limit);
        snprintf(after, sizeof after, "%s", next);
    }
    free(rows);
    ck_assert_int_eq(total, expect);
    return total;
}

START_TEST(test_listing)
{
    store *a = open_as("hostA:1:aa");
    ap_error err;
    store_row r;
    bool c;
    /* PostgreSQL: fewer rows (a round trip per statement), as many pages */
    const int N = pg_mode ? 600 : 3000;
    int done = 0, labelled = 0, hash0 = 0, mid = 0;
    for (int i = 0; i < N; i++) {
        /* created times with ties, out of id order */
        int64_t t = 1000000 + (int64_t)((i * 7919) % (N / 3)) * 1000;
        const char *label = i % 5 == 0 ? "trainer-7" : "other";
        int64_t id = begin_row(a, i, t, label, &c, &r);
        ck_assert(c);
        labelled += i % 5 == 0;
        hash0 += i % 3 == 0;
        if (t >= 1000000 + N / 15 * 1000 && t < 1000000 + N / 10 * 1000)
            mid++;
        if (i % 4 == 0) {
            ck_assert_int_eq(store_start(a, id, t, &err), 0);
            ck_assert_int_eq(store_finish(a, id, STORE_DONE, t + 1, "r", 1, NULL, NULL, &err), 0);
            done++;
        }
    }
    store_filter all = {0};
    page_all(a, &all, 97, N);
    page_all(a, &all, 1000, N);
    store_filter f = {.status = STORE_DONE};
    page_all(a, &f, 50, done);
    store_filter fl = {.client_label = "trainer-7"};
    page_all(a, &fl, 50, labelled);
    uint8_t prefix[2] = {0, 0xab};
    store_filter fh = {.module_hash = prefix, .module_hash_len = 2};
    page_all(a, &fh, 64, hash0);
    store_filter ft = {.created_after_us = 1000000 + N / 15 * 1000, .created_before_us = 1000000 + N / 10 * 1000};
    page_all(a, &ft, 33, mid);
    store_row rows[4];
    char next[48];
    ck_assert_int_eq(store_list(a, &all, 4, "garbage", rows, next, &err), AP_EINVALID);
    store_counts cnt;
    ck_assert_int_eq(store_counts_get(a, &cnt, &err), 0);
    ck_assert_int_eq(cnt.rows, N);
    ck_assert_int_eq(cnt.by_status[STORE_DONE], done);
    ck_assert_int_gt(cnt.db_bytes, 0);
    int64_t ids[2] = {1, 2};
    uint64_t hits[2] = {3, 4};
    ck_assert_int_eq(store_add_hits(a, ids, hits, 2, 5000, &err), 0);
    ck_assert_int_eq(store_counts_get(a, &cnt, &err), 0);
    ck_assert_int_eq(cnt.cache_hits, 7);
    /* the counters the triggers keep agree with the table */
    for (int st = 1; st <= 5; st++)
        ck_assert_int_eq(cnt.by_status[st], db_int_f("SELECT count(*) FROM searches WHERE status = %d", st));
    store_close(a);
}
END_TEST

/* PostgreSQL: the listing's queries as pg.c writes them, planned with
 * sequential scans priced out (an empty table would rather be scanned):
 * an index serves each order, and nothing is sorted. */
static void pg_listing_uses_indexes(void)
{
    store *a = open_as("hostA:1:aa");
    store_close(a);
    static const char *const queries[] = {
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) ORDER BY created_us DESC, id DESC LIMIT 50",
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) AND status = 3 ORDER BY created_us DESC, id DESC "
        "LIMIT 50",
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) AND client_label = 'x' ORDER BY created_us DESC, "
        "id DESC LIMIT 50",
        "SELECT id FROM searches WHERE key = '\\x00' AND status IN (1, 2, 3)",
        "SELECT id FROM searches WHERE (best_runtime_s, id) > (1, 2) AND created_us < 5 AND best_runtime_s > 0 "
        "ORDER BY best_runtime_s ASC, id ASC LIMIT 50",
        "SELECT id FROM searches WHERE (best_peak_memory, id) < (1, 2) AND created_us < 5 AND best_peak_memory > 0 "
        "ORDER BY best_peak_memory DESC, id DESC LIMIT 50",
        "SELECT id FROM searches WHERE (episodes, id) < (1, 2) AND created_us < 5 ORDER BY episodes DESC, id DESC "
        "LIMIT 50",
        "SELECT id FROM searches WHERE ((finished_us - started_us), id) > (1, 2) AND created_us < 5 AND finished_us "
        "> 0 AND started_us > 0 ORDER BY (finished_us - started_us) ASC, id ASC LIMIT 50",
    };
    PGconn *conn = PQconnectdb(db_path);
    ck_assert_int_eq(PQstatus(conn), CONNECTION_OK);
    PQclear(PQexec(conn, "SET enable_seqscan = off; SET enable_bitmapscan = off"));
    for (size_t i = 0; i < AP_ARRAY_LEN(queries); i++) {
        char sql[800];
        snprintf(sql, sizeof sql, "EXPLAIN %s", queries[i]);
        PGresult *r = PQexec(conn, sql);
        ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
        ap_buf plan;
        ap_buf_init(&plan);
        for (int k = 0; k < PQntuples(r); k++) {
            ap_buf_puts(&plan, PQgetvalue(r, k, 0));
            ap_buf_putc(&plan, ';');
        }
        PQclear(r);
        ck_assert_msg(strstr(plan.data, "Index"), "query %zu does not use an index: %s", i, plan.data);
        ck_assert_msg(!strstr(plan.data, "Sort"), "query %zu sorts: %s", i, plan.data);
        ap_buf_free(&plan);
    }
    /* free text: the trigram index finds the rows */
    PQclear(PQexec(conn, "SET enable_bitmapscan = on"));
    PGresult *r = PQexec(conn, "EXPLAIN SELECT id FROM searches WHERE (module_name || E'\\x1f' || client_label || "
                               "E'\\x1f' || mesh || E'\\x1f' || device || E'\\x1f' || error) ILIKE '%abc%'");
    ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
    bool trgm = false;
    for (int k = 0; k < PQntuples(r); k++)
        trgm |= strstr(PQgetvalue(r, k, 0), "searches_text") != NULL;
    ck_assert_msg(trgm, "the text filter does not use the trigram index: %s", PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(conn);
}

START_TEST(test_listing_uses_indexes)
{
    /* The dashboard pages 200,000 rows: every listing query must walk an
     * index in order, never sort the table. */
    if (pg_mode) {
        pg_listing_uses_indexes();
        return;
    }
    store *a = open_as("hostA:1:aa");
    store_close(a);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    static const char *const queries[] = {
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) ORDER BY created_us DESC, id DESC LIMIT 50",
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) AND status = 3 ORDER BY created_us DESC, id DESC "
        "LIMIT 50",
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) AND client_label = 'x' ORDER BY created_us DESC, "
        "id DESC LIMIT 50",
        "SELECT id FROM searches WHERE key = x'00' AND status IN (1, 2, 3)",
        /* the dashboard's orders, filters only filtering (as store_list writes them) */
        "SELECT id FROM searches WHERE (best_runtime_s, id) > (1, 2) AND +created_us < 5 AND best_runtime_s > 0 "
        "AND +status = 3 AND +client_label = 'x' ORDER BY best_runtime_s ASC, id ASC LIMIT 50",
        "SELECT id FROM searches WHERE (best_peak_memory, id) < (1, 2) AND +created_us < 5 AND best_peak_memory > 0 "
        "ORDER BY best_peak_memory DESC, id DESC LIMIT 50",
        "SELECT id FROM searches WHERE (episodes, id) < (1, 2) AND +created_us < 5 ORDER BY episodes DESC, id DESC "
        "LIMIT 50",
        "SELECT id FROM searches WHERE ((finished_us - started_us), id) > (1, 2) AND +created_us < 5 AND finished_us "
        "> 0 AND started_us > 0 ORDER BY (finished_us - started_us) ASC, id ASC LIMIT 50",
        /* a common text filters the walk of the order's index */
        "SELECT id FROM searches WHERE (created_us, id) < (1, 2) AND +id IN (SELECT rowid FROM searches_text WHERE "
        "searches_text MATCH '\"abc\"') ORDER BY created_us DESC, id DESC LIMIT 50",
    };
    for (size_t i = 0; i < AP_ARRAY_LEN(queries); i++) {
        char sql[800];
        snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", queries[i]);
        sqlite3_stmt *q;
        ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        ap_buf plan;
        ap_buf_init(&plan);
        while (sqlite3_step(q) == SQLITE_ROW) {
            ap_buf_puts(&plan, (const char *)sqlite3_column_text(q, 3));
            ap_buf_putc(&plan, ';');
        }
        sqlite3_finalize(q);
        ck_assert_msg(strstr(plan.data, "USING INDEX") || strstr(plan.data, "USING COVERING INDEX"),
                      "query %zu does not use an index: %s", i, plan.data);
        ck_assert_msg(!strstr(plan.data, "TEMP B-TREE"), "query %zu sorts: %s", i, plan.data);
        ap_buf_free(&plan);
    }
    sqlite3_close(db);
}
END_TEST

START_TEST(test_schema_versions)
{
    store *a = open_as("x:1:a");
    store_close(a);
    store *s;
    ap_error err;
    if (pg_mode) {
        ck_assert_int_eq(db_int_f("SELECT version FROM autopart_schema"), STORE_SCHEMA_VERSION);
        /* opening again migrates nothing */
        a = open_as("x:1:a");
        store_close(a);
        ck_assert_int_eq(db_int_f("SELECT count(*) FROM autopart_schema"), 1);
        /* a newer program's schema is refused, not misread */
        db_exec("UPDATE autopart_schema SET version = 99");
        ck_assert_int_eq(store_open(db_path, "x:1:a", 1000, &s, &err), AP_EIO);
        ck_assert_msg(strstr(err.msg, "schema version 99"), "%s", err.msg);
        /* a server that is not there: named (without the password), and quickly */
        char url[300];
        snprintf(url, sizeof url, "postgresql://autopart:s3cret@127.0.0.1:1/nothing");
        double t0 = ap_mono_s();
        ck_assert_int_eq(store_open(url, "x:1:a", 1000, &s, &err), AP_EIO);
        ck_assert_msg(ap_mono_s() - t0 < 10, "%.1f s", ap_mono_s() - t0);
        ck_assert_msg(strstr(err.msg, "store unavailable: postgresql://autopart@127.0.0.1:1/nothing"), "%s",
                      err.msg);
        ck_assert_msg(!strstr(err.msg, "s3cret"), "%s", err.msg);
        ck_assert_int_eq(store_open("postgresql://[bad", "x:1:a", 1000, &s, &err), AP_EINVALID);
        return;
    }
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(q, 0), STORE_SCHEMA_VERSION);
    sqlite3_finalize(q);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    /* a newer program's schema is refused, not misread */
    ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(store_open(db_path, "x:1:a", 1000, &s, &err), AP_EIO);
    ck_assert_msg(strstr(err.msg, "schema version 99"), "%s", err.msg);
    /* a file that is not a database */
    FILE *f = fopen(db_path, "w");
    fputs("this is not sqlite, it is a text file long enough to have a header..........................\n", f);
    fclose(f);
    char p[300];
    snprintf(p, sizeof p, "%s-wal", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path);
    unlink(p);
    ck_assert_int_eq(store_open(db_path, "x:1:a", 1000, &s, &err), AP_EIO);
    ck_assert_msg(strstr(err.msg, "not an SQLite database"), "%s", err.msg);
    ck_assert_int_eq(store_open("/nonexistent/dir/x.db", "x:1:a", 1000, &s, &err), AP_EIO);
    ck_assert_msg(strstr(err.msg, "/nonexistent/dir/x.db"), "%s", err.msg);
}
END_TEST

START_TEST(test_hex)
{
    uint8_t b[4] = {0x00, 0xab, 0x10, 0xff}, back[4];
    char hex[9];
    store_hex(b, 4, hex);
    ck_assert_str_eq(hex, "00ab10ff");
    ck_assert_int_eq(store_unhex("00AB10ff", back, 4), 4);
    ck_assert(!memcmp(b, back, 4));
    ck_assert_int_eq(store_unhex("abc", back, 4), -1);
    ck_assert_int_eq(store_unhex("zz", back, 4), -1);
    ck_assert_int_eq(store_unhex("0011223344", back, 4), -1);
}
END_TEST

/* Pages of a listing until the end: the ids in order (n returned). */
static int list_ids(store *s, const store_filter *f, int limit, int64_t *ids, int max)
{
    store_row rows[64];
    char after[48] = "", next[48];
    ap_error err;
    int n = 0;
    for (;;) {
        int got = store_list(s, f, limit, after, rows, next, &err);
        ck_assert_msg(got >= 0, "%s", err.msg);
        for (int i = 0; i < got; i++) {
            ck_assert_int_lt(n, max);
            ids[n++] = rows[i].id;
        }
        if (!next[0])
            return n;
        snprintf(after, sizeof after, "%s", next);
    }
}

START_TEST(test_listing_text_and_orders)
{
    /* Enough rows that a text matches more than SQLite's rare path takes
     * (2,000): "many" on 9 rows in 10, "few" on 1 in 10.  (PostgreSQL has
     * one path: fewer rows.) */
    enum { N_MAX = 2600 };
    const int N = pg_mode ? 400 : N_MAX;
    store *s = open_as("hostA:1:aa");
    ap_error err;
    for (int i = 0; i < N; i++) {
        store_row row;
        bool created;
        begin_row(s, i, 1000000 + (int64_t)i * 10, i % 10 ? "many-Label" : "few-label", &created, &row);
        ck_assert(created);
        store_progress p = {.episodes = i, .best_runtime_s = 1.0 + (i * 7919 % N) * 1e-3, .best_peak_memory = 1 + i % 5};
        ck_assert_int_eq(store_set_progress(s, row.id, 1000000 + (int64_t)i * 10 + 1, &p, false, NULL, 0, &err), 0);
    }
    static int64_t ids[N_MAX];
    store_filter many = {.text = "MANY-lab"}, few = {.text = "few-l"};
    ck_assert_int_eq(list_ids(s, &many, 60, ids, N), N - N / 10);
    for (int i = 0; i < N - N / 10; i++) {
        ck_assert_int_ne((ids[i] - 1) % 10, 0);
        if (i)
            ck_assert_int_lt(ids[i], ids[i - 1]); /* newest first */
    }
    ck_assert_int_eq(list_ids(s, &few, 60, ids, N), N / 10);
    for (int i = 0; i < N / 10; i++) {
        ck_assert_int_eq((ids[i] - 1) % 10, 0);
        if (i)
            ck_assert_int_lt(ids[i], ids[i - 1]);
    }
    /* both paths in another order: the same rows, by step time */
    store_filter many_rt = {.text = "many", .sort = STORE_SORT_RUNTIME, .ascending = true};
    store_filter few_rt = {.text = "few", .sort = STORE_SORT_RUNTIME, .ascending = true};
    store_row r0, r1;
    int n = list_ids(s, &many_rt, 64, ids, N);
    ck_assert_int_eq(n, N - N / 10);
    for (int i = 1; i < n; i++) {
        ck_assert_int_eq(store_get(s, ids[i - 1], &r0, &err), 1);
        ck_assert_int_eq(store_get(s, ids[i], &r1, &err), 1);
        ck_assert(r0.best_runtime_s < r1.best_runtime_s || (r0.best_runtime_s == r1.best_runtime_s && r0.id < r1.id));
    }
    ck_assert_int_eq(list_ids(s, &few_rt, 64, ids, N), N / 10);
    /* nothing, too short, a cursor of another order */
    store_filter none = {.text = "zzz"}, shrt = {.text = "ab"};
    ck_assert_int_eq(list_ids(s, &none, 10, ids, N), 0);
    store_row rows[4];
    char next[48];
    ck_assert_int_eq(store_list(s, &shrt, 4, NULL, rows, next, &err), AP_EINVALID);
    ck_assert_int_eq(store_list(s, &many_rt, 4, "1000.5", rows, next, &err), AP_EINVALID);
    store_filter bad = {.sort = 99};
    ck_assert_int_eq(store_list(s, &bad, 4, NULL, rows, next, &err), AP_EINVALID);
    store_close(s);

    /* A store made before the text index (schema 1) gets it, over the rows it has. */
    if (pg_mode)
        db_exec("DROP INDEX searches_text; DROP INDEX searches_by_runtime; DROP INDEX searches_by_memory;"
                "DROP INDEX searches_by_episodes; DROP INDEX searches_by_duration;"
                "DROP INDEX searches_touched; ALTER TABLE searches DROP COLUMN touched_us;"
                "ALTER TABLE searches DROP COLUMN watched_until_us;"
                "UPDATE autopart_schema SET version = 1");
    else
        db_exec("DROP TRIGGER searches_text_insert; DROP TRIGGER searches_text_update;"
                "DROP TRIGGER searches_text_delete; DROP TABLE searches_text;"
                "DROP INDEX searches_by_runtime; DROP INDEX searches_by_memory;"
                "DROP INDEX searches_by_episodes; DROP INDEX searches_by_duration;"
                "DROP INDEX searches_touched; ALTER TABLE searches DROP COLUMN touched_us;"
                "ALTER TABLE searches DROP COLUMN watched_until_us;"
                "PRAGMA user_version = 1");
    s = open_as("hostA:1:aa");
    ck_assert_int_eq(list_ids(s, &few, 60, ids, N), N / 10);
    store_close(s);
}
END_TEST

/* A search given up (cancelled) keeps its checkpoint, and the next row of
 * its key takes it over; done and failed rows keep none. */
START_TEST(test_checkpoint_passes_to_the_next_row)
{
    store *a = open_as("hostA:1:aa");
    store_row r;
    bool c;
    ap_error err;
    void *data;
    size_t len;
    int64_t id = begin_row(a, 11, 1000, "", &c, &r);
    store_progress p = {.episodes = 40, .best_runtime_s = 1.5};
    ck_assert_int_eq(store_set_progress(a, id, 2000, &p, false, "CKPT-1", 6, &err), 0);
    ck_assert_int_eq(store_finish(a, id, STORE_CANCELLED, 3000, NULL, 0, NULL, "nobody waits", &err), 0);
    ck_assert_int_eq(store_payload(a, id, STORE_PAYLOAD_CHECKPOINT, &data, &len, &err), 1);
    ap_free(data);
    ck_assert_int_eq(store_payload(a, id, STORE_PAYLOAD_REQUEST, &data, &len, &err), 0); /* not needed any more */
    int64_t id2 = begin_row(a, 11, 4000, "", &c, &r);
    ck_assert(c && id2 != id);
    ck_assert_int_eq(store_payload(a, id2, STORE_PAYLOAD_CHECKPOINT, &data, &len, &err), 1);
    ck_assert(len == 6 && !memcmp(data, "CKPT-1", 6));
    ap_free(data);
    ck_assert_int_eq(store_payload(a, id, STORE_PAYLOAD_CHECKPOINT, &data, &len, &err), 0); /* moved, not copied */
    /* another key inherits nothing */
    int64_t other = begin_row(a, 12, 4000, "", &c, &r);
    ck_assert_int_eq(store_payload(a, other, STORE_PAYLOAD_CHECKPOINT, &data, &len, &err), 0);
    /* failed: its checkpoint goes */
    ck_assert_int_eq(store_set_progress(a, id2, 5000, &p, false, "CKPT-2", 6, &err), 0);
    ck_assert_int_eq(store_finish(a, id2, STORE_FAILED, 6000, NULL, 0, NULL, "bad", &err), 0);
    ck_assert_int_eq(store_payload(a, id2, STORE_PAYLOAD_CHECKPOINT, &data, &len, &err), 0);
    store_close(a);
}
END_TEST

/* Retention: ended rows not used lately go, least recently used first,
 * with their payloads, history and old aliases; queued, running and
 * recently used rows stay; the file gives the space back. */
START_TEST(test_retention)
{
    store *a = open_as("hostA:1:aa");
    store_row r;
    bool c;
    ap_error err;
    enum { N = 40 };
    static char big[200000]; /* not compressible (PostgreSQL compresses) */
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof big; i++) {
        x = x * 1103515245 + 12345;
        big[i] = (char)(x >> 24);
    }
    int64_t ids[N];
    for (int i = 0; i < N; i++) { /* made at i s, ended at i s + 1 ms */
        ids[i] = begin_row(a, 100 + i, (int64_t)i * 1000000, "", &c, &r);
        store_progress p = {.episodes = i, .best_runtime_s = 1};
        ck_assert_int_eq(store_set_progress(a, ids[i], (int64_t)i * 1000000 + 500, &p, true, NULL, 0, &err), 0);
        if (i == N - 1)
            ck_assert_int_eq(store_start(a, ids[i], (int64_t)i * 1000000 + 1, &err), 0); /* running */
        else if (i != N - 2) /* queued */
            ck_assert_int_eq(store_finish(a, ids[i], i % 5 == 4 ? STORE_FAILED : STORE_DONE,
                                          (int64_t)i * 1000000 + 1000, big, sizeof big, NULL, NULL, &err),
                             0);
    }
    uint8_t raw[STORE_KEY_BYTES] = {7}, key[STORE_KEY_BYTES];
    ck_assert_int_eq(store_alias_put(a, raw, raw, 5, &err), 0);
    /* row 3 is asked for again at 35 s: used recently */
    int64_t hit_id = ids[3];
    uint64_t one = 1;
    ck_assert_int_eq(store_add_hits(a, &hit_id, &one, 1, 35000000, &err), 0);
    /* by age at 40 s, keeping 20 s: rows ended before 20 s go, but row 3 */
    store_gc_policy pol = {.keep_us = 20000000};
    store_gc_result res;
    ck_assert_int_eq(store_gc(a, &pol, 40000000, &res, &err), 0);
    ck_assert_int_eq(res.rows, 19);
    ck_assert(res.bytes_after < res.bytes_before);
    ck_assert_int_eq(store_get(a, ids[0], &r, &err), 0);
    ck_assert_int_eq(store_get(a, ids[3], &r, &err), 1);
    ck_assert_int_eq(store_get(a, ids[20], &r, &err), 1);
    store_point pts[4];
    ck_assert_int_eq(store_history(a, ids[0], pts, 4, &err), 0); /* its history went with it */
    ck_assert_int_eq(store_alias_get(a, raw, key, &err), 0);
    /* by size: down to 1.5 MiB, the least recently used first; row 3
     * (used at 35 s) outlives rows that ended after it was made */
    store_gc_policy size = {.max_bytes = 3 << 19, .protect_us = 3000000};
    ck_assert_int_eq(store_gc(a, &size, 40000000, &res, &err), 0);
    ck_assert_int_gt(res.rows, 0);
    ck_assert_msg(res.bytes_after <= (3 << 19), "%lld bytes in use", (long long)res.bytes_after);
    ck_assert_int_eq(store_get(a, ids[3], &r, &err), 1);
    ck_assert_int_eq(store_get(a, ids[25], &r, &err), 0);
    /* never queued or running ones, nor the protected last seconds */
    ck_assert_int_eq(store_get(a, ids[N - 1], &r, &err), 1);
    ck_assert_int_eq(store_get(a, ids[N - 2], &r, &err), 1);
    ck_assert_int_eq(store_get(a, ids[N - 3], &r, &err), 1);
    ck_assert_int_eq(store_check(a, true, &err), 0);
    store_close(a);
    if (pg_mode) /* PostgreSQL keeps the files; its autovacuum reuses the space */
        return;
    /* the file gave the space back (8 MB of results were written) */
    struct stat st1;
    ck_assert_int_eq(stat(db_path, &st1), 0);
    ck_assert_msg(st1.st_size < (3 << 20), "the file holds %lld bytes", (long long)st1.st_size);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_one_live_row_per_key);
    tcase_add_test(tc, test_orphans_are_taken_over);
    tcase_add_test(tc, test_dead_owner_on_this_host);
    tcase_add_test(tc, test_cancel);
    tcase_add_test(tc, test_aliases_and_history);
    tcase_add_test(tc, test_listing);
    tcase_add_test(tc, test_listing_uses_indexes);
    tcase_add_test(tc, test_listing_text_and_orders);
    tcase_add_test(tc, test_schema_versions);
    tcase_add_test(tc, test_hex);
    tcase_add_test(tc, test_checkpoint_passes_to_the_next_row);
    tcase_add_test(tc, test_retention);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *backend = getenv("AP_TEST_STORE");
    pg_mode = backend && !strcmp(backend, "postgresql");
    if (pg_mode && !pg_start(&cluster, 0))
        return 1;
    int rc = tl_run(make_suite());
    if (pg_mode)
        pg_finish(&cluster, rc == 0);
    return rc;
}
