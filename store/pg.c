/*
 * pg.c - the PostgreSQL backend of autopartd's store (libpq), for a fleet
 * of daemons on many hosts sharing one database.  The same rows, the same
 * meaning and the same numbered migrations as the SQLite backend
 * (sqlite.c); what differs is how the database keeps them consistent:
 *
 * - one live row per key: a partial unique index, and INSERT ... ON
 *   CONFLICT DO NOTHING (two daemons racing on a key: one inserts, the
 *   other finds its row and joins it);
 * - taking orphaned or unowned queued rows: SELECT ... FOR UPDATE SKIP
 *   LOCKED, so daemons sweeping at once never wait on, nor take, the same
 *   row;
 * - the counts by status kept by a trigger that locks its counter rows in
 *   one order (no deadlock between two transactions changing statuses);
 * - free text: a trigram index (pg_trgm, part of Debian's postgresql) over
 *   the columns a person searches, matched with ILIKE.
 *
 * A connection that breaks (the server restarted, the network dropped)
 * makes the calls fail with AP_EIO "store unavailable: ..."; the next call
 * connects again (at most once a second), and an operation that failed on
 * its first statement because the connection had silently died since the
 * last call is tried once more on the new one.  The connection string may
 * hold a password: messages name the server by store_describe, never by the
 * string.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "store_int.h"

/* ================================================================ schema */

/* The text the trigram index covers: the columns a person searches, apart
 * (a unit separator between them, so no match spans two). */
#define TEXT_EXPR                                                                                         \
    "(module_name || E'\\x1f' || client_label || E'\\x1f' || mesh || E'\\x1f' || device || E'\\x1f' || " \
    "error)"

/* Migration k takes a database from version k to k + 1, as sqlite.c's do.
 * Append only. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE searches ("
    "  id BIGSERIAL PRIMARY KEY," /* ids are never reused */
    "  key BYTEA NOT NULL,"
    "  kind INTEGER NOT NULL,"
    "  status INTEGER NOT NULL,"
    "  module_hash BYTEA NOT NULL,"
    "  module_name TEXT NOT NULL DEFAULT '',"
    "  client_label TEXT NOT NULL DEFAULT '',"
    "  mesh TEXT NOT NULL DEFAULT '',"
    "  device TEXT NOT NULL DEFAULT '',"
    "  axes TEXT NOT NULL DEFAULT '',"
    "  created_us BIGINT NOT NULL,"
    "  started_us BIGINT NOT NULL DEFAULT 0,"
    "  finished_us BIGINT NOT NULL DEFAULT 0,"
    "  owner TEXT,"
    "  lease_until_us BIGINT NOT NULL DEFAULT 0,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  progress_us BIGINT NOT NULL DEFAULT 0,"
    "  episodes BIGINT NOT NULL DEFAULT 0,"
    "  best_runtime_s DOUBLE PRECISION NOT NULL DEFAULT 0,"
    "  best_peak_memory BIGINT NOT NULL DEFAULT 0,"
    "  error TEXT NOT NULL DEFAULT '',"
    "  cache_hits BIGINT NOT NULL DEFAULT 0"
    ");"
    "CREATE UNIQUE INDEX searches_live_key ON searches(key) WHERE status IN (1, 2, 3);"
    "CREATE INDEX searches_created ON searches(created_us, id);"
    "CREATE INDEX searches_status ON searches(status, created_us, id);"
    "CREATE INDEX searches_client ON searches(client_label, created_us, id);"
    "CREATE INDEX searches_module ON searches(module_hash, created_us, id);"
    "CREATE INDEX searches_unfinished ON searches(owner, lease_until_us) WHERE status IN (1, 2);"
    "CREATE TABLE payloads ("
    "  id BIGINT PRIMARY KEY REFERENCES searches(id) ON DELETE CASCADE,"
    "  request BYTEA,"
    "  result BYTEA,"
    "  checkpoint BYTEA,"
    "  best_schedule TEXT"
    ");"
    "CREATE TABLE progress ("
    "  search_id BIGINT NOT NULL REFERENCES searches(id) ON DELETE CASCADE,"
    "  t_us BIGINT NOT NULL,"
    "  episodes BIGINT NOT NULL,"
    "  best_runtime_s DOUBLE PRECISION NOT NULL,"
    "  best_peak_memory BIGINT NOT NULL,"
    "  PRIMARY KEY (search_id, t_us)"
    ");"
    /* Rows and cache hits by status, kept by a trigger (Stats reads five
     * rows).  An update locks the two counters it moves in status order, so
     * two transactions never wait on each other's counters in a circle. */
    "CREATE TABLE counters ("
    "  status INTEGER PRIMARY KEY,"
    "  rows BIGINT NOT NULL,"
    "  cache_hits BIGINT NOT NULL"
    ");"
    "INSERT INTO counters (status, rows, cache_hits) VALUES (1, 0, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0), (5, 0, 0);"
    "CREATE FUNCTION autopart_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  IF TG_OP = 'INSERT' THEN"
    "    UPDATE counters SET rows = rows + 1, cache_hits = cache_hits + NEW.cache_hits WHERE status = NEW.status;"
    "  ELSIF TG_OP = 'DELETE' THEN"
    "    UPDATE counters SET rows = rows - 1, cache_hits = cache_hits - OLD.cache_hits WHERE status = OLD.status;"
    "  ELSE"
    "    PERFORM 1 FROM counters WHERE status IN (OLD.status, NEW.status) ORDER BY status FOR UPDATE;"
    "    UPDATE counters SET rows = rows - 1, cache_hits = cache_hits - OLD.cache_hits WHERE status = OLD.status;"
    "    UPDATE counters SET rows = rows + 1, cache_hits = cache_hits + NEW.cache_hits WHERE status = NEW.status;"
    "  END IF;"
    "  RETURN NULL;"
    "END $$;"
    "CREATE TRIGGER searches_count AFTER INSERT OR DELETE OR UPDATE OF status, cache_hits ON searches"
    "  FOR EACH ROW EXECUTE FUNCTION autopart_count();"
    "CREATE TABLE aliases ("
    "  raw BYTEA PRIMARY KEY,"
    "  key BYTEA NOT NULL,"
    "  created_us BIGINT NOT NULL"
    ");",
    /* 1 -> 2: the dashboard's orders (partial indexes, as in SQLite) and
     * free text (trigrams). */
    "CREATE INDEX searches_by_runtime ON searches(best_runtime_s, id) WHERE best_runtime_s > 0;"
    "CREATE INDEX searches_by_memory ON searches(best_peak_memory, id) WHERE best_peak_memory > 0;"
    "CREATE INDEX searches_by_episodes ON searches(episodes, id);"
    "CREATE INDEX searches_by_duration ON searches((finished_us - started_us), id) WHERE finished_us > 0 AND "
    "started_us > 0;"
    "CREATE EXTENSION IF NOT EXISTS pg_trgm;"
    "CREATE INDEX searches_text ON searches USING gin (" TEXT_EXPR " gin_trgm_ops);",
    /* 2 -> 3: when a row was last used (made, ended, or served from: what
     * retention goes by, oldest first), and until when a daemon's calls
     * wait on a row another daemon runs. */
    "ALTER TABLE searches ADD COLUMN touched_us BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE searches ADD COLUMN watched_until_us BIGINT NOT NULL DEFAULT 0;"
    "UPDATE searches SET touched_us = greatest(created_us, finished_us);"
    "CREATE INDEX searches_touched ON searches(touched_us) WHERE status IN (3, 4, 5);",
};

/* The statements, prepared on a connection at their first use: name, what
 * (for messages), SQL, and whether the result comes back binary (payloads:
 * no hex doubling of megabytes). */
#define STMTS(X)                                                                                                   \
    X(FIND_LIVE, "find by key", "SELECT " STORE_ROW_COLS " FROM searches WHERE key = $1 AND status IN (1, 2, 3)", 0) \
    X(GET, "get", "SELECT " STORE_ROW_COLS " FROM searches WHERE id = $1", 0)                                      \
    X(INSERT, "insert",                                                                                            \
      "INSERT INTO searches (key, kind, status, module_hash, module_name, client_label, mesh, device, axes, "     \
      "created_us, owner, lease_until_us, touched_us) VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $9) " \
      "ON CONFLICT (key) WHERE status IN (1, 2, 3) DO NOTHING RETURNING id",                                      \
      0)                                                                                                           \
    X(INSERT_PAYLOAD, "insert payload", "INSERT INTO payloads (id, request) VALUES ($1, $2)", 0)                   \
    X(INHERIT, "take a checkpoint over",                                                                           \
      "WITH f AS (SELECT s.id FROM searches s JOIN payloads p ON p.id = s.id WHERE s.module_hash = $2 AND "       \
      "s.key = $3 AND s.status = 5 AND p.checkpoint IS NOT NULL ORDER BY s.id DESC LIMIT 1 FOR UPDATE), "         \
      "m AS (UPDATE payloads SET checkpoint = (SELECT checkpoint FROM payloads WHERE id = (SELECT id FROM f)) "    \
      "WHERE id = $1 AND EXISTS (SELECT 1 FROM f) RETURNING id) "                                                  \
      "UPDATE payloads SET checkpoint = NULL WHERE id = (SELECT id FROM f) AND EXISTS (SELECT 1 FROM m)", 0)       \
    X(PAYLOAD_REQUEST, "read request", "SELECT request FROM payloads WHERE id = $1", 1)                            \
    X(PAYLOAD_RESULT, "read result", "SELECT result FROM payloads WHERE id = $1", 1)                               \
    X(PAYLOAD_CHECKPOINT, "read checkpoint", "SELECT checkpoint FROM payloads WHERE id = $1", 1)                   \
    X(BEST_SCHEDULE, "read best schedule", "SELECT best_schedule FROM payloads WHERE id = $1", 0)                  \
    X(START, "start",                                                                                              \
      "UPDATE searches SET attempts = attempts + (status = 1)::int, status = 2, started_us = $2 WHERE id = $1 "    \
      "AND owner = $3 AND status IN (1, 2)",                                                                       \
      0)                                                                                                           \
    X(PROGRESS, "progress",                                                                                        \
      "UPDATE searches SET progress_us = $2, episodes = $3, best_runtime_s = $4, best_peak_memory = $5 "          \
      "WHERE id = $1",                                                                                             \
      0)                                                                                                           \
    X(PROGRESS_SCHEDULE, "progress schedule", "UPDATE payloads SET best_schedule = $2 WHERE id = $1", 0)           \
    X(PROGRESS_CKPT, "checkpoint", "UPDATE payloads SET checkpoint = $2 WHERE id = $1", 0)                         \
    X(PROGRESS_POINT, "progress point",                                                                            \
      "INSERT INTO progress (search_id, t_us, episodes, best_runtime_s, best_peak_memory) "                       \
      "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (search_id, t_us) DO UPDATE SET episodes = EXCLUDED.episodes, "    \
      "best_runtime_s = EXCLUDED.best_runtime_s, best_peak_memory = EXCLUDED.best_peak_memory",                   \
      0)                                                                                                           \
    X(FINISH, "finish",                                                                                            \
      "UPDATE searches SET status = $2, finished_us = $3, touched_us = $3, error = $4, owner = NULL, "             \
      "lease_until_us = 0 WHERE id = $1 AND status IN (1, 2)",                                                     \
      0)                                                                                                           \
    X(FINISH_SUMMARY, "finish summary",                                                                            \
      "UPDATE searches SET episodes = $2, best_runtime_s = $3, best_peak_memory = $4, progress_us = $5 "          \
      "WHERE id = $1",                                                                                             \
      0)                                                                                                           \
    X(FINISH_RESULT, "store result", "UPDATE payloads SET result = $2, checkpoint = NULL WHERE id = $1", 0)         \
    X(FINISH_DROP, "drop the request", "UPDATE payloads SET request = NULL, checkpoint = NULL WHERE id = $1", 0)    \
    X(FINISH_KEEP, "drop the request", "UPDATE payloads SET request = NULL WHERE id = $1", 0)                      \
    X(ADD_HITS, "count hits",                                                                                      \
      "UPDATE searches SET cache_hits = cache_hits + $2, touched_us = greatest(touched_us, $3) WHERE id = $1", 0)   \
    X(WATCH, "watch", "UPDATE searches SET watched_until_us = greatest(watched_until_us, $2) WHERE id = $1", 0)    \
    X(GC_OLD, "retention by age",                                                                                  \
      "DELETE FROM searches WHERE id IN (SELECT id FROM searches WHERE status IN (3, 4, 5) AND touched_us < $1 "  \
      "ORDER BY touched_us LIMIT $2)", 0)                                                                          \
    X(GC_ALIASES, "retention of aliases", "DELETE FROM aliases WHERE created_us < $1", 0)                         \
    X(LIVE_BYTES, "live size",                                                                                     \
      "SELECT (SELECT coalesce(sum(pg_column_size(s.*)), 0) FROM searches s) + "                                  \
      "(SELECT coalesce(sum(32 + coalesce(pg_column_size(request), 0) + coalesce(pg_column_size(result), 0) + "    \
      "coalesce(pg_column_size(checkpoint), 0) + coalesce(pg_column_size(best_schedule), 0)), 0) FROM payloads) + " \
      "(SELECT count(*) * 64 FROM progress) + (SELECT count(*) * 96 FROM aliases)", 0)                              \
    X(HEARTBEAT, "heartbeat", "UPDATE searches SET lease_until_us = $2 WHERE owner = $1 AND status IN (1, 2)", 0) \
    X(ORPHANS, "find orphans",                                                                                     \
      "SELECT id, coalesce(owner, ''), lease_until_us, kind FROM searches WHERE status IN (1, 2) AND "            \
      "((owner IS NULL AND $6) OR (owner <> $1 AND (lease_until_us < $2 OR owner LIKE $3))) AND "             \
      "($5 = 0 OR kind = $5) "                                                                                     \
      "ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED",                                                               \
      0)                                                                                                           \
    X(CLAIM, "claim", "UPDATE searches SET owner = $2, lease_until_us = $3, status = 1 WHERE id = $1", 0)          \
    X(CLAIM_ONE, "claim one",                                                                                      \
      "UPDATE searches SET owner = $2, lease_until_us = $3 WHERE id = $1 AND "                                   \
      "((status = 1 AND coalesce(owner, $2) = $2) OR (status = 2 AND owner = $2))", 0)                             \
    X(RELEASE, "release",                                                                                          \
      "UPDATE searches SET owner = NULL, lease_until_us = 0, status = 1 WHERE owner = $1 AND status IN (1, 2)",   \
      0)                                                                                                           \
    X(RELEASE_ONE, "release one",                                                                                  \
      "UPDATE searches SET owner = NULL, lease_until_us = 0, status = 1 WHERE id = $2 AND owner = $1 AND "        \
      "status IN (1, 2)",                                                                                          \
      0)                                                                                                           \
    X(CANCEL_NOW, "cancel",                                                                                        \
      "UPDATE searches SET status = 5, finished_us = $2, error = 'cancelled', cancel_requested = 1 WHERE id = $1 " \
      "AND status = 1 AND owner IS NULL",                                                                          \
      0)                                                                                                           \
    X(CANCEL_ASK, "ask to cancel", "UPDATE searches SET cancel_requested = 1 WHERE id = $1 AND status IN (1, 2)",  \
      0)                                                                                                           \
    X(CANCEL_REQS, "cancel requests",                                                                              \
      "SELECT id FROM searches WHERE owner = $1 AND status IN (1, 2) AND cancel_requested = 1 LIMIT $2", 0)        \
    X(STATUS_OF, "status", "SELECT status FROM searches WHERE id = $1", 0)                                         \
    X(ALIAS_GET, "read alias", "SELECT key FROM aliases WHERE raw = $1", 1)                                        \
    X(ALIAS_PUT, "write alias",                                                                                    \
      "INSERT INTO aliases (raw, key, created_us) VALUES ($1, $2, $3) ON CONFLICT (raw) DO NOTHING", 0)            \
    X(HISTORY, "history",                                                                                          \
      "SELECT t_us, episodes, best_runtime_s, best_peak_memory FROM (SELECT * FROM progress WHERE search_id = $1 " \
      "ORDER BY t_us DESC LIMIT $2) AS p ORDER BY t_us",                                                           \
      0)                                                                                                           \
    X(COUNTS, "counts", "SELECT status, rows, cache_hits FROM counters", 0)                                       \
    X(SIZE, "size", "SELECT pg_database_size(current_database())", 0)

enum {
#define STMT_ENUM(id, what, sql, bin) S_##id,
    STMTS(STMT_ENUM)
#undef STMT_ENUM
        S__COUNT
};

static const struct {
    const char *name, *what, *sql;
    int binary;
} stmt_text[] = {
#define STMT_TEXT(id, what, sql, bin) {"ap_" #id, what, sql, bin},
    STMTS(STMT_TEXT)
#undef STMT_TEXT
};

typedef struct pg {
    store base;
    PGconn *conn;
    char *conninfo; /* as given: may hold a password, never printed */
    char where[300]; /* store_describe of it, for messages */
    int busy_ms;
    bool prepared[S__COUNT];
    int64_t next_connect_us; /* after a failed connection: not before */
    char connect_failed[300]; /* why that connection failed, said again meanwhile */
    /* the current operation: statements that succeeded, and whether it
     * failed because the connection was gone */
    int done;
    bool lost;
} pg;

/* ============================================================ addresses */

void store__pg_describe(const char *conninfo, char *out, size_t size)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &msg);
    PQfreemem(msg);
    if (!opts) {
        snprintf(out, size, "postgresql (a connection string libpq cannot read)");
        return;
    }
    const char *user = "", *host = "", *port = "", *db = "";
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (!strcmp(o->keyword, "user"))
            user = o->val;
        else if (!strcmp(o->keyword, "host") || (!host[0] && !strcmp(o->keyword, "hostaddr")))
            host = o->val;
        else if (!strcmp(o->keyword, "port"))
            port = o->val;
        else if (!strcmp(o->keyword, "dbname"))
            db = o->val;
    }
    snprintf(out, size, "postgresql://%s%s%s%s%s/%s", user, user[0] ? "@" : "", host, port[0] ? ":" : "", port, db);
    PQconninfoFree(opts);
}

/* ============================================================ statements */

/* Parameters of one statement: text, except binary BYTEA. */
typedef struct params {
    int n;
    const char *v[16];
    int len[16], fmt[16];
    char num[16][32];
} params;

static void p_i64(params *p, int64_t x)
{
    snprintf(p->num[p->n], sizeof p->num[0], "%" PRId64, x);
    p->v[p->n] = p->num[p->n];
    p->len[p->n] = p->fmt[p->n] = 0;
    p->n++;
}

static void p_f64(params *p, double x)
{
    snprintf(p->num[p->n], sizeof p->num[0], "%.17g", x);
    p->v[p->n] = p->num[p->n];
    p->len[p->n] = p->fmt[p->n] = 0;
    p->n++;
}

static void p_text(params *p, const char *s)
{
    p->v[p->n] = s ? s : "";
    p->len[p->n] = p->fmt[p->n] = 0;
    p->n++;
}

static void p_blob(params *p, const void *b, size_t n)
{
    p->v[p->n] = n ? b : "";
    p->len[p->n] = (int)n;
    p->fmt[p->n] = 1;
    p->n++;
}

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* notices ("already exists, skipping") are not the user's business */
}

static int lost(pg *s, ap_error *err, const char *what, const char *detail)
{
    s->lost = true;
    char d[400];
    snprintf(d, sizeof d, "%s", detail ? detail : "");
    for (char *c = d; *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    return ap_error_set(err, AP_EIO, "store unavailable: %s (%s): %s", s->where, what, d);
}

static int connect_now(pg *s, ap_error *err)
{
    if (s->conn && PQstatus(s->conn) == CONNECTION_OK)
        return 0;
    int64_t now = (int64_t)(ap_mono_s() * 1e6);
    if (now < s->next_connect_us) {
        char d[sizeof s->connect_failed + 40];
        snprintf(d, sizeof d, "%s (the last attempt, a moment ago)", s->connect_failed);
        return lost(s, err, "connect", d);
    }
    if (s->conn) {
        PQfinish(s->conn);
        s->conn = NULL;
    }
    memset(s->prepared, 0, sizeof s->prepared);
    /* Our defaults unless the connection string says otherwise: a bounded
     * wait to connect, a name in pg_stat_activity. */
    const char *kw[8], *val[8];
    int n = 0;
    kw[n] = "dbname", val[n++] = s->conninfo;
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(s->conninfo, &msg);
    PQfreemem(msg);
    bool has_timeout = false, has_name = false;
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
        has_timeout |= !strcmp(o->keyword, "connect_timeout") && o->val && o->val[0];
        has_name |= !strcmp(o->keyword, "application_name") && o->val && o->val[0];
    }
    PQconninfoFree(opts);
    if (!has_timeout)
        kw[n] = "connect_timeout", val[n++] = "5";
    if (!has_name)
        kw[n] = "application_name", val[n++] = "autopartd";
    kw[n] = NULL;
    val[n] = NULL;
    s->conn = PQconnectdbParams(kw, val, 1);
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        s->next_connect_us = now + 1000000;
        char *why = s->connect_failed;
        snprintf(why, sizeof s->connect_failed, "%s", s->conn ? PQerrorMessage(s->conn) : "out of memory");
        for (size_t k = strlen(why); k && (why[k - 1] == '\n' || why[k - 1] == ' ');)
            why[--k] = 0;
        return lost(s, err, "connect", s->connect_failed);
    }
    PQsetNoticeProcessor(s->conn, quiet, NULL);
    /* A store locked by someone else waits as long as SQLite's busy
     * timeout would, then fails (AP_ELIMIT) instead of hanging. */
    char sql[128];
    snprintf(sql, sizeof sql, "SET lock_timeout = %d; SET client_min_messages = warning", s->busy_ms);
    PGresult *r = PQexec(s->conn, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok)
        return lost(s, err, "configure the session", PQerrorMessage(s->conn));
    return 0;
}

/* The error of a failed result (r may be NULL).  Clears r. */
static int result_error(pg *s, PGresult *r, const char *what, ap_error *err)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(s->conn);
    int rc;
    if (PQstatus(s->conn) != CONNECTION_OK || (state && !strncmp(state, "08", 2)) ||
        (state && !strncmp(state, "57P", 3)))
        rc = lost(s, err, what, msg);
    else {
        /* lock_timeout, statement timeout, deadlock, serialization: a busy
         * store, as SQLite's BUSY */
        bool busy = state && (!strcmp(state, "55P03") || !strcmp(state, "57014") || !strcmp(state, "40P01") ||
                              !strcmp(state, "40001"));
        char d[400];
        snprintf(d, sizeof d, "%s", msg);
        size_t n = strlen(d);
        while (n && (d[n - 1] == '\n' || d[n - 1] == ' '))
            d[--n] = '\0';
        rc = ap_error_set(err, busy ? AP_ELIMIT : AP_EIO, "store: %s: %s", what, d);
    }
    PQclear(r);
    return rc;
}

/* Runs statement id; *out gets the result when it has rows (PQclear it).
 * Returns the number of rows it changed or returned, or an error. */
static int run(pg *s, int id, const params *p, PGresult **out, ap_error *err)
{
    int rc;
    if (out)
        *out = NULL;
    if ((rc = connect_now(s, err)) < 0)
        return rc;
    if (!s->prepared[id]) {
        PGresult *r = PQprepare(s->conn, stmt_text[id].name, stmt_text[id].sql, 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            return result_error(s, r, stmt_text[id].what, err);
        PQclear(r);
        s->prepared[id] = true;
    }
    PGresult *r = PQexecPrepared(s->conn, stmt_text[id].name, p ? p->n : 0, p ? p->v : NULL, p ? p->len : NULL,
                                 p ? p->fmt : NULL, stmt_text[id].binary);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK) {
        s->done++;
        int n = PQntuples(r);
        if (out)
            *out = r;
        else
            PQclear(r);
        return n;
    }
    if (st == PGRES_COMMAND_OK) {
        s->done++;
        int n = atoi(PQcmdTuples(r));
        PQclear(r);
        return n;
    }
    return result_error(s, r, stmt_text[id].what, err);
}

/* A statement without parameters or rows (BEGIN, COMMIT, ...). */
static int exec_sql(pg *s, const char *sql, const char *what, ap_error *err)
{
    int rc;
    if ((rc = connect_now(s, err)) < 0)
        return rc;
    PGresult *r = PQexec(s->conn, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        return result_error(s, r, what, err);
    PQclear(r);
    s->done++;
    return 0;
}

static int begin(pg *s, ap_error *err)
{
    return exec_sql(s, "BEGIN", "begin", err);
}

static int commit(pg *s, ap_error *err)
{
    return exec_sql(s, "COMMIT", "commit", err);
}

static void rollback(pg *s)
{
    if (s->conn && PQstatus(s->conn) == CONNECTION_OK && PQtransactionStatus(s->conn) != PQTRANS_IDLE) {
        PGresult *r = PQexec(s->conn, "ROLLBACK");
        PQclear(r);
    }
}

/* Runs one operation; when it failed at its first statement because the
 * connection had died since the last one (a server restart), once more on
 * a new connection: nothing of it reached the database. */
#define RETRYING(s, call)                                                                                         \
    do {                                                                                                          \
        for (int try_ = 0;; try_++) {                                                                             \
            bool up_ = (s)->conn && PQstatus((s)->conn) == CONNECTION_OK;                                         \
            (s)->done = 0;                                                                                        \
            (s)->lost = false;                                                                                    \
            int rc_ = (call);                                                                                     \
            if (rc_ >= 0 || try_ || !up_ || !(s)->lost || (s)->done)                                              \
                return rc_;                                                                                       \
            (s)->next_connect_us = 0; /* it was up a moment ago: try at once */                                   \
        }                                                                                                         \
    } while (0)

/* ================================================================= rows */

static int64_t get_i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* The columns of row `row` of a result, for store__read_row. */
typedef struct pg_cells {
    const PGresult *r;
    int row;
} pg_cells;

static int64_t col_i64(void *ctx, int col)
{
    pg_cells *c = ctx;
    return get_i64(c->r, c->row, col);
}

static double col_f64(void *ctx, int col)
{
    pg_cells *c = ctx;
    return strtod(PQgetvalue(c->r, c->row, col), NULL);
}

static void col_text(void *ctx, int col, char *dst, size_t size)
{
    pg_cells *c = ctx;
    snprintf(dst, size, "%s", PQgetvalue(c->r, c->row, col));
}

/* A BYTEA column in text form ("\x0a1b..."). */
static void col_bytes(void *ctx, int col, uint8_t *dst, size_t size)
{
    pg_cells *c = ctx;
    const char *v = PQgetvalue(c->r, c->row, col);
    memset(dst, 0, size);
    if (v[0] == '\\' && v[1] == 'x') {
        char hex[2 * STORE_KEY_BYTES + 1];
        snprintf(hex, sizeof hex, "%s", v + 2);
        hex[strlen(hex) & ~(size_t)1] = '\0';
        store_unhex(hex, dst, (int)size);
    }
}

static void read_row(const PGresult *r, int i, store_row *row)
{
    static const store_col_reader rd = {col_i64, col_f64, col_text, col_bytes};
    pg_cells c = {r, i};
    store__read_row(&rd, &c, row);
}

/* One row of a statement: 1 found, 0 none. */
static int one_row(pg *s, int id, const params *p, store_row *row, ap_error *err)
{
    PGresult *r;
    int n = run(s, id, p, &r, err);
    if (n > 0)
        read_row(r, 0, row);
    PQclear(r);
    return n < 0 ? n : n > 0;
}

static int find_live_once(pg *s, const uint8_t *key, store_row *row, ap_error *err)
{
    params p = {0};
    p_blob(&p, key, STORE_KEY_BYTES);
    return one_row(s, S_FIND_LIVE, &p, row, err);
}

static int pg_find_live(store *base, const uint8_t *key, store_row *row, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, find_live_once(s, key, row, err));
}

static int get_once(pg *s, int64_t id, store_row *row, ap_error *err)
{
    params p = {0};
    p_i64(&p, id);
    return one_row(s, S_GET, &p, row, err);
}

static int pg_get(store *base, int64_t id, store_row *row, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, get_once(s, id, row, err));
}

static int begin_once(pg *s, const store_new *n, int64_t now_us, int64_t lease_until_us, store_row *row,
                      bool *created, ap_error *err)
{
    int rc;
    *created = false;
    if ((rc = begin(s, err)) < 0)
        return rc;
    if ((rc = find_live_once(s, n->key, row, err)) != 0)
        goto done; /* found (1) or failed */
    params p = {0};
    p_blob(&p, n->key, STORE_KEY_BYTES);
    p_i64(&p, n->kind);
    p_blob(&p, n->module_hash, STORE_KEY_BYTES);
    p_text(&p, n->module_name);
    p_text(&p, n->client_label);
    p_text(&p, n->mesh);
    p_text(&p, n->device);
    p_text(&p, n->axes);
    p_i64(&p, now_us);
    p_text(&p, s->base.owner);
    p_i64(&p, lease_until_us);
    PGresult *r;
    if ((rc = run(s, S_INSERT, &p, &r, err)) < 0)
        goto done;
    if (rc == 0) {
        /* Another daemon inserted the key since we looked (and committed:
         * ON CONFLICT waited for it): its row is the live one. */
        PQclear(r);
        rc = find_live_once(s, n->key, row, err);
        if (rc == 0)
            rc = ap_error_set(err, AP_EIO, "store: the key's live row vanished while inserting it");
        goto done;
    }
    int64_t id = get_i64(r, 0, 0);
    PQclear(r);
    params q = {0};
    p_i64(&q, id);
    p_blob(&q, n->request ? n->request : "", n->request_len);
    if ((rc = run(s, S_INSERT_PAYLOAD, &q, NULL, err)) < 0)
        goto done;
    /* A search of this key that was given up (cancelled) left its
     * checkpoint: the new row takes it over, to resume from it. */
    params h = {0};
    p_i64(&h, id);
    p_blob(&h, n->module_hash, STORE_KEY_BYTES);
    p_blob(&h, n->key, STORE_KEY_BYTES);
    if ((rc = run(s, S_INHERIT, &h, NULL, err)) < 0 || (rc = get_once(s, id, row, err)) < 0)
        goto done;
    *created = true;
    rc = 0;
done:
    if (rc < 0) {
        rollback(s);
        *created = false;
        return rc;
    }
    return commit(s, err);
}

static int pg_begin(store *base, const store_new *n, int64_t now_us, int64_t lease_until_us, store_row *row,
                    bool *created, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, begin_once(s, n, now_us, lease_until_us, row, created, err));
}

static int payload_once(pg *s, int64_t id, int which, void **data, size_t *len, ap_error *err)
{
    int sid = which == STORE_PAYLOAD_REQUEST ? S_PAYLOAD_REQUEST
              : which == STORE_PAYLOAD_RESULT ? S_PAYLOAD_RESULT
                                              : S_PAYLOAD_CHECKPOINT;
    *data = NULL;
    *len = 0;
    params p = {0};
    p_i64(&p, id);
    PGresult *r;
    int n = run(s, sid, &p, &r, err);
    if (n <= 0)
        return n;
    int rc = 0;
    if (!PQgetisnull(r, 0, 0)) {
        size_t sz = (size_t)PQgetlength(r, 0, 0);
        *data = ap_malloc(sz ? sz : 1);
        if (!*data) {
            rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        } else {
            memcpy(*data, PQgetvalue(r, 0, 0), sz);
            *len = sz;
            rc = 1;
        }
    }
    PQclear(r);
    return rc;
}

static int pg_payload(store *base, int64_t id, int which, void **data, size_t *len, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, payload_once(s, id, which, data, len, err));
}

static int best_schedule_once(pg *s, int64_t id, char **text, ap_error *err)
{
    params p = {0};
    p_i64(&p, id);
    PGresult *r;
    int n = run(s, S_BEST_SCHEDULE, &p, &r, err);
    if (n <= 0)
        return n;
    int rc = 0;
    if (!PQgetisnull(r, 0, 0)) {
        *text = ap_strdup(PQgetvalue(r, 0, 0));
        rc = *text ? 1 : ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    PQclear(r);
    return rc;
}

static int pg_best_schedule(store *base, int64_t id, char **text, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, best_schedule_once(s, id, text, err));
}

static int start_once(pg *s, int64_t id, int64_t now_us, ap_error *err)
{
    params p = {0};
    p_i64(&p, id);
    p_i64(&p, now_us);
    p_text(&p, s->base.owner);
    int n = run(s, S_START, &p, NULL, err);
    if (n == 0)
        return ap_error_set(err, AP_ECONFLICT, "store: search %" PRId64 " is no longer this daemon's", id);
    return n < 0 ? n : 0;
}

static int pg_start(store *base, int64_t id, int64_t now_us, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, start_once(s, id, now_us, err));
}

static int set_progress_once(pg *s, int64_t id, int64_t now_us, const store_progress *pr, bool point,
                             const void *ckpt, size_t ckpt_len, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    params p = {0};
    p_i64(&p, id);
    p_i64(&p, now_us);
    p_i64(&p, pr->episodes);
    p_f64(&p, pr->best_runtime_s);
    p_i64(&p, pr->best_peak_memory);
    if ((rc = run(s, S_PROGRESS, &p, NULL, err)) < 0)
        goto fail;
    if (pr->best_schedule) {
        params q = {0};
        p_i64(&q, id);
        p_text(&q, pr->best_schedule);
        if ((rc = run(s, S_PROGRESS_SCHEDULE, &q, NULL, err)) < 0)
            goto fail;
    }
    if (ckpt) {
        params q = {0};
        p_i64(&q, id);
        p_blob(&q, ckpt, ckpt_len);
        if ((rc = run(s, S_PROGRESS_CKPT, &q, NULL, err)) < 0)
            goto fail;
    }
    if (point) {
        params q = {0};
        p_i64(&q, id);
        p_i64(&q, now_us);
        p_i64(&q, pr->episodes);
        p_f64(&q, pr->best_runtime_s);
        p_i64(&q, pr->best_peak_memory);
        if ((rc = run(s, S_PROGRESS_POINT, &q, NULL, err)) < 0)
            goto fail;
    }
    return commit(s, err);
fail:
    rollback(s);
    return rc;
}

static int pg_set_progress(store *base, int64_t id, int64_t now_us, const store_progress *p, bool point,
                           const void *ckpt, size_t ckpt_len, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, set_progress_once(s, id, now_us, p, point, ckpt, ckpt_len, err));
}

static int finish_once(pg *s, int64_t id, int status, int64_t now_us, const void *result, size_t result_len,
                       const store_progress *summary, const char *error, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    params p = {0};
    p_i64(&p, id);
    p_i64(&p, status);
    p_i64(&p, now_us);
    p_text(&p, error);
    if ((rc = run(s, S_FINISH, &p, NULL, err)) < 0)
        goto fail;
    if (rc == 0) {
        rc = ap_error_set(err, AP_ECONFLICT, "store: search %" PRId64 " had already ended", id);
        goto fail;
    }
    if (summary) {
        params q = {0};
        p_i64(&q, id);
        p_i64(&q, summary->episodes);
        p_f64(&q, summary->best_runtime_s);
        p_i64(&q, summary->best_peak_memory);
        p_i64(&q, now_us);
        if ((rc = run(s, S_FINISH_SUMMARY, &q, NULL, err)) < 0)
            goto fail;
    }
    /* A cancelled search keeps its checkpoint, for the next request of its
     * key to resume from. */
    params q = {0};
    p_i64(&q, id);
    if ((rc = run(s, status == STORE_CANCELLED ? S_FINISH_KEEP : S_FINISH_DROP, &q, NULL, err)) < 0)
        goto fail;
    if (status == STORE_DONE) {
        p_blob(&q, result ? result : "", result_len);
        if ((rc = run(s, S_FINISH_RESULT, &q, NULL, err)) < 0)
            goto fail;
    }
    return commit(s, err);
fail:
    rollback(s);
    return rc;
}

static int pg_finish(store *base, int64_t id, int status, int64_t now_us, const void *result, size_t result_len,
                     const store_progress *summary, const char *error, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, finish_once(s, id, status, now_us, result, result_len, summary, error, err));
}

static int add_hits_once(pg *s, const int64_t *ids, const uint64_t *n, int count, int64_t now_us, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    for (int i = 0; i < count; i++) {
        params p = {0};
        p_i64(&p, ids[i]);
        p_i64(&p, (int64_t)n[i]);
        p_i64(&p, now_us);
        if ((rc = run(s, S_ADD_HITS, &p, NULL, err)) < 0) {
            rollback(s);
            return rc;
        }
    }
    return commit(s, err);
}

static int pg_add_hits(store *base, const int64_t *ids, const uint64_t *n, int count, int64_t now_us,
                       ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, add_hits_once(s, ids, n, count, now_us, err));
}

static int watch_once(pg *s, const int64_t *ids, int count, int64_t until_us, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    for (int i = 0; i < count; i++) {
        params p = {0};
        p_i64(&p, ids[i]);
        p_i64(&p, until_us);
        if ((rc = run(s, S_WATCH, &p, NULL, err)) < 0) {
            rollback(s);
            return rc;
        }
    }
    return commit(s, err);
}

static int pg_watch(store *base, const int64_t *ids, int count, int64_t until_us, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, watch_once(s, ids, count, until_us, err));
}

/* ============================================================ ownership */

static int heartbeat_once(pg *s, int64_t lease_until_us, ap_error *err)
{
    params p = {0};
    p_text(&p, s->base.owner);
    p_i64(&p, lease_until_us);
    int rc = run(s, S_HEARTBEAT, &p, NULL, err);
    return rc < 0 ? rc : 0;
}

static int pg_heartbeat(store *base, int64_t lease_until_us, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, heartbeat_once(s, lease_until_us, err));
}

static int claim_orphans_once(pg *s, int kind, int64_t now_us, int64_t lease_until_us, bool queued_too,
                              store_claim *out, int max, ap_error *err)
{
    int rc, n = 0;
    if ((rc = begin(s, err)) < 0)
        return rc;
    /* Candidates, locked (rows another daemon is claiming are skipped, not
     * waited for): no owner, a lease run out, or an owner of this host
     * whose process may be gone (checked below). */
    char host[300];
    const char *colon = strchr(s->base.owner, ':');
    size_t hl = colon ? (size_t)(colon - s->base.owner) : 0, k = 0;
    for (size_t i = 0; i < hl && k < sizeof host - 4; i++) {
        char c = s->base.owner[i];
        if (c == '%' || c == '_' || c == '\\')
            host[k++] = '\\';
        host[k++] = c;
    }
    snprintf(host + k, sizeof host - k, "%s", hl ? ":%" : "");
    params p = {0};
    p_text(&p, s->base.owner);
    p_i64(&p, now_us);
    p_text(&p, hl ? host : "\x01"); /* no host: matches nothing */
    p_i64(&p, 4 * (int64_t)max);
    p_i64(&p, kind);
    p_text(&p, queued_too ? "true" : "false");
    PGresult *r;
    int nc = run(s, S_ORPHANS, &p, &r, err);
    if (nc < 0) {
        rc = nc;
        goto fail;
    }
    for (int i = 0; i < nc && n < max; i++) {
        const char *owner = PQgetvalue(r, i, 1);
        if (owner[0] && get_i64(r, i, 2) >= now_us && !store__owner_dead(s->base.owner, owner))
            continue; /* of this host, leased and alive */
        params q = {0};
        int64_t id = get_i64(r, i, 0);
        p_i64(&q, id);
        p_text(&q, s->base.owner);
        p_i64(&q, lease_until_us);
        if ((rc = run(s, S_CLAIM, &q, NULL, err)) < 0) {
            PQclear(r);
            goto fail;
        }
        if (rc == 1) {
            out[n].id = id;
            out[n].kind = (int)get_i64(r, i, 3);
            snprintf(out[n].prev_owner, sizeof out[n].prev_owner, "%s", owner);
            n++;
        }
    }
    PQclear(r);
    if ((rc = commit(s, err)) < 0)
        return rc;
    return n;
fail:
    rollback(s);
    return rc;
}

static int pg_claim_orphans(store *base, int kind, int64_t now_us, int64_t lease_until_us, bool queued_too,
                            store_claim *out, int max, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, claim_orphans_once(s, kind, now_us, lease_until_us, queued_too, out, max, err));
}

static int take_once(pg *s, int64_t id, int64_t lease_until_us, ap_error *err)
{
    params p = {0};
    p_i64(&p, id);
    p_text(&p, s->base.owner);
    p_i64(&p, lease_until_us);
    int rc = run(s, S_CLAIM_ONE, &p, NULL, err);
    return rc < 0 ? rc : rc == 1;
}

static int pg_take(store *base, int64_t id, int64_t lease_until_us, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, take_once(s, id, lease_until_us, err));
}

static int release_all_once(pg *s, ap_error *err)
{
    params p = {0};
    p_text(&p, s->base.owner);
    int rc = run(s, S_RELEASE, &p, NULL, err);
    return rc < 0 ? rc : 0;
}

static int pg_release_all(store *base, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, release_all_once(s, err));
}

static int release_once(pg *s, int64_t id, ap_error *err)
{
    params p = {0};
    p_text(&p, s->base.owner);
    p_i64(&p, id);
    int rc = run(s, S_RELEASE_ONE, &p, NULL, err);
    return rc < 0 ? rc : 0;
}

static int pg_release(store *base, int64_t id, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, release_once(s, id, err));
}

static int request_cancel_once(pg *s, int64_t id, int64_t now_us, int *status, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    params p = {0};
    p_i64(&p, id);
    p_i64(&p, now_us);
    if ((rc = run(s, S_CANCEL_NOW, &p, NULL, err)) < 0)
        goto fail;
    params q = {0};
    p_i64(&q, id);
    if ((rc = run(s, S_CANCEL_ASK, &q, NULL, err)) < 0)
        goto fail;
    PGresult *r;
    int found = run(s, S_STATUS_OF, &q, &r, err);
    if (found < 0) {
        rc = found;
        goto fail;
    }
    *status = found ? (int)get_i64(r, 0, 0) : 0;
    PQclear(r);
    if ((rc = commit(s, err)) < 0)
        return rc;
    return found > 0;
fail:
    rollback(s);
    return rc;
}

static int pg_request_cancel(store *base, int64_t id, int64_t now_us, int *status, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, request_cancel_once(s, id, now_us, status, err));
}

static int cancel_requests_once(pg *s, int64_t *ids, int max, ap_error *err)
{
    params p = {0};
    p_text(&p, s->base.owner);
    p_i64(&p, max);
    PGresult *r;
    int n = run(s, S_CANCEL_REQS, &p, &r, err);
    for (int i = 0; i < n; i++)
        ids[i] = get_i64(r, i, 0);
    PQclear(r);
    return n;
}

static int pg_cancel_requests(store *base, int64_t *ids, int max, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, cancel_requests_once(s, ids, max, err));
}

/* =============================================================== aliases */

static int alias_get_once(pg *s, const uint8_t *raw, uint8_t *key, ap_error *err)
{
    params p = {0};
    p_blob(&p, raw, STORE_KEY_BYTES);
    PGresult *r;
    int n = run(s, S_ALIAS_GET, &p, &r, err);
    int rc = n;
    if (n > 0) {
        rc = PQgetlength(r, 0, 0) == STORE_KEY_BYTES;
        if (rc)
            memcpy(key, PQgetvalue(r, 0, 0), STORE_KEY_BYTES);
    }
    PQclear(r);
    return rc;
}

static int pg_alias_get(store *base, const uint8_t *raw, uint8_t *key, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, alias_get_once(s, raw, key, err));
}

static int alias_put_once(pg *s, const uint8_t *raw, const uint8_t *key, int64_t now_us, ap_error *err)
{
    params p = {0};
    p_blob(&p, raw, STORE_KEY_BYTES);
    p_blob(&p, key, STORE_KEY_BYTES);
    p_i64(&p, now_us);
    int rc = run(s, S_ALIAS_PUT, &p, NULL, err);
    return rc < 0 ? rc : 0;
}

static int pg_alias_put(store *base, const uint8_t *raw, const uint8_t *key, int64_t now_us, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, alias_put_once(s, raw, key, now_us, err));
}

/* ============================================================== listings */

/* Appends parameter v as $N with a cast. */
static void arg(ap_buf *sql, params *p, const char *cast)
{
    ap_buf_printf(sql, "$%d::%s", p->n, cast);
}

static int list_once(pg *s, const store_filter *f, int limit, const char *after, store_row *rows, char *next,
                     ap_error *err)
{
    store_list_args a;
    int rc = store__list_args(f, after, &a, err);
    if (rc < 0)
        return rc;
    if ((rc = connect_now(s, err)) < 0)
        return rc;
    /* Built per call (the combinations are many and planning is cheap
     * next to a page): the same bounds as sqlite.c's, with numbered
     * parameters in the order they appear. */
    ap_buf sql, pat;
    ap_buf_init(&sql);
    ap_buf_init(&pat);
    params p = {0};
    const store_sort_col *sc = &store__sort_cols[a.sort];
    ap_buf_puts(&sql, "SELECT " STORE_ROW_COLS " FROM searches WHERE ");
    if (a.sort == STORE_SORT_CREATED) {
        ap_buf_puts(&sql, "(created_us, id) < (");
        p_i64(&p, a.t);
        arg(&sql, &p, "bigint");
        ap_buf_puts(&sql, ", ");
        p_i64(&p, a.id);
        arg(&sql, &p, "bigint");
        ap_buf_puts(&sql, ")");
    } else {
        ap_buf_printf(&sql, "(%s, id) %s (", sc->expr, a.asc ? ">" : "<");
        if (sc->real)
            p_f64(&p, a.v_real);
        else
            p_i64(&p, a.v_int);
        arg(&sql, &p, sc->real ? "double precision" : "bigint");
        ap_buf_puts(&sql, ", ");
        p_i64(&p, a.id);
        arg(&sql, &p, "bigint");
        ap_buf_puts(&sql, ") AND created_us < ");
        p_i64(&p, a.t);
        arg(&sql, &p, "bigint");
        if (sc->has)
            ap_buf_printf(&sql, " AND %s", sc->has);
    }
    if (f->status) {
        ap_buf_puts(&sql, " AND status = ");
        p_i64(&p, f->status);
        arg(&sql, &p, "integer");
    }
    if (f->kind) {
        ap_buf_puts(&sql, " AND kind = ");
        p_i64(&p, f->kind);
        arg(&sql, &p, "integer");
    }
    if (f->client_label && f->client_label[0]) {
        ap_buf_puts(&sql, " AND client_label = ");
        p_text(&p, f->client_label);
        arg(&sql, &p, "text");
    }
    if (a.lo_len) {
        ap_buf_puts(&sql, " AND module_hash >= ");
        p_blob(&p, a.lo, (size_t)a.lo_len);
        arg(&sql, &p, "bytea");
        ap_buf_puts(&sql, " AND module_hash < ");
        p_blob(&p, a.hi, (size_t)a.hi_len);
        arg(&sql, &p, "bytea");
    }
    if (f->created_after_us) {
        ap_buf_puts(&sql, " AND created_us >= ");
        p_i64(&p, f->created_after_us);
        arg(&sql, &p, "bigint");
    }
    if (a.text) {
        /* a substring, any case: ILIKE '%text%' with its wildcards escaped */
        ap_buf_putc(&pat, '%');
        for (const char *c = f->text; *c; c++) {
            if (*c == '%' || *c == '_' || *c == '\\')
                ap_buf_putc(&pat, '\\');
            ap_buf_putc(&pat, *c);
        }
        ap_buf_putc(&pat, '%');
        ap_buf_puts(&sql, " AND " TEXT_EXPR " ILIKE ");
        p_text(&p, pat.data);
        arg(&sql, &p, "text");
    }
    if (a.sort == STORE_SORT_CREATED)
        ap_buf_puts(&sql, " ORDER BY created_us DESC, id DESC");
    else
        ap_buf_printf(&sql, " ORDER BY %s %s, id %s", sc->expr, a.asc ? "ASC" : "DESC", a.asc ? "ASC" : "DESC");
    ap_buf_puts(&sql, " LIMIT ");
    p_i64(&p, limit + 1); /* one more: is there a next page? */
    arg(&sql, &p, "bigint");
    if (sql.oom || pat.oom) {
        ap_buf_free(&sql);
        ap_buf_free(&pat);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    PGresult *r = PQexecParams(s->conn, sql.data, p.n, NULL, p.v, p.len, p.fmt, 0);
    ap_buf_free(&sql);
    ap_buf_free(&pat);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return result_error(s, r, "list", err);
    s->done++;
    int n = PQntuples(r);
    if (n > limit) {
        n = limit;
        read_row(r, n - 1, &rows[n - 1]);
        store__list_cursor(a.sort, &rows[n - 1], next);
    }
    for (int i = 0; i < n; i++)
        read_row(r, i, &rows[i]);
    PQclear(r);
    return n;
}

static int pg_list(store *base, const store_filter *f, int limit, const char *after, store_row *rows, char *next,
                   ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, list_once(s, f, limit, after, rows, next, err));
}

static int history_once(pg *s, int64_t id, store_point *pts, int max, ap_error *err)
{
    params p = {0};
    p_i64(&p, id);
    p_i64(&p, max);
    PGresult *r;
    int n = run(s, S_HISTORY, &p, &r, err);
    for (int i = 0; i < n && i < max; i++) {
        pts[i].t_us = get_i64(r, i, 0);
        pts[i].episodes = get_i64(r, i, 1);
        pts[i].best_runtime_s = strtod(PQgetvalue(r, i, 2), NULL);
        pts[i].best_peak_memory = get_i64(r, i, 3);
    }
    PQclear(r);
    return n < max ? n : max;
}

static int pg_history(store *base, int64_t id, store_point *pts, int max, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, history_once(s, id, pts, max, err));
}

static int counts_once(pg *s, store_counts *c, ap_error *err)
{
    memset(c, 0, sizeof *c);
    PGresult *r;
    int n = run(s, S_COUNTS, NULL, &r, err);
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        int st = (int)get_i64(r, i, 0);
        uint64_t rows = (uint64_t)get_i64(r, i, 1);
        if (st >= 0 && st < 6)
            c->by_status[st] += rows;
        c->rows += rows;
        c->cache_hits += (uint64_t)get_i64(r, i, 2);
    }
    PQclear(r);
    if ((n = run(s, S_SIZE, NULL, &r, err)) < 0)
        return n;
    if (n > 0)
        c->db_bytes = get_i64(r, 0, 0);
    PQclear(r);
    return 0;
}

static int pg_counts_get(store *base, store_counts *c, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, counts_once(s, c, err));
}

static int check_once(pg *s, ap_error *err)
{
    return exec_sql(s, "SELECT 1 FROM counters LIMIT 1", "check", err);
}

static int pg_check(store *base, bool full, ap_error *err)
{
    pg *s = (pg *)base;
    (void)full;
    RETRYING(s, check_once(s, err));
}

/* ============================================================= retention */

/* Deletes up to `limit` ended rows touched before `before`, oldest first
 * (their payloads and history go with them); *n: how many. */
static int delete_old(pg *s, int64_t before, int limit, int *n, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    params p = {0};
    p_i64(&p, before);
    p_i64(&p, limit);
    if ((rc = run(s, S_GC_OLD, &p, NULL, err)) < 0)
        goto fail;
    *n = rc;
    params q = {0};
    p_i64(&q, before);
    if ((rc = run(s, S_GC_ALIASES, &q, NULL, err)) < 0)
        goto fail;
    return commit(s, err);
fail:
    rollback(s);
    return rc;
}

/* The bytes the rows hold (as stored: compressed, out of line), not the
 * files: PostgreSQL keeps deleted rows' pages until its autovacuum makes
 * them reusable.  Costs a scan of the tables: retention runs once a
 * minute. */
static int live_bytes(pg *s, int64_t *out, ap_error *err)
{
    PGresult *r;
    int n = run(s, S_LIVE_BYTES, NULL, &r, err);
    if (n < 0)
        return n;
    *out = n ? get_i64(r, 0, 0) : 0;
    PQclear(r);
    return 0;
}

/* Retention as SQLite's: by age, then by size (the live bytes of the rows,
 * the least recently used first, as many at a time as the bytes the rows
 * deleted so far say are needed). */
static int gc_once(pg *s, const store_gc_policy *p, int64_t now_us, store_gc_result *out, ap_error *err)
{
    int rc = 0, n;
    memset(out, 0, sizeof *out);
    if ((rc = live_bytes(s, &out->bytes_before, err)) < 0)
        return rc;
    int batch = p->max_rows > 0 ? p->max_rows : INT32_MAX;
    int64_t protect = now_us - (p->protect_us > 0 ? p->protect_us : 0);
    if (p->keep_us > 0) {
        int64_t before = now_us - p->keep_us;
        if (before > protect)
            before = protect;
        do {
            int step = batch - out->rows < 500 ? batch - out->rows : 500;
            if (step <= 0 || (rc = delete_old(s, before, step, &n, err)) < 0)
                break;
            out->rows += n;
        } while (n > 0);
        if (rc < 0)
            return rc;
    }
    if (p->max_bytes > 0) {
        int64_t live;
        if ((rc = live_bytes(s, &live, err)) < 0)
            return rc;
        int step = 4, deleted = 0;
        int64_t first = live;
        while (live > p->max_bytes && out->rows < batch) {
            if ((rc = delete_old(s, protect, batch - out->rows < step ? batch - out->rows : step, &n, err)) < 0)
                return rc;
            out->rows += n;
            deleted += n;
            if (n == 0)
                break; /* what is left is queued, running or used lately */
            if ((rc = live_bytes(s, &live, err)) < 0)
                return rc;
            /* the mean row so far (the last few alone may be small ones) */
            int64_t per_row = (first - live) / deleted;
            int64_t want = per_row > 0 ? (live - p->max_bytes + per_row - 1) / per_row : 1;
            step = want < 1 ? 1 : want > 500 ? 500 : (int)want;
        }
    }
    return live_bytes(s, &out->bytes_after, err);
}

static int pg_gc(store *base, const store_gc_policy *p, int64_t now_us, store_gc_result *out, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, gc_once(s, p, now_us, out, err));
}

/* VACUUM FULL: the tables rewritten at their live size (locked while it
 * runs), as SQLite's VACUUM. */
static int pg_vacuum(store *base, ap_error *err)
{
    pg *s = (pg *)base;
    RETRYING(s, exec_sql(s, "VACUUM FULL searches, payloads, progress, aliases", "vacuum", err));
}

/* ================================================================== open */

/* Brings the schema to STORE_SCHEMA_VERSION in one transaction; openers at
 * once wait on an advisory lock, so each step runs once. */
static int migrate(pg *s, ap_error *err)
{
    int rc;
    if ((rc = exec_sql(s, "BEGIN; SELECT pg_advisory_xact_lock(7242018);"
                          "CREATE TABLE IF NOT EXISTS autopart_schema (version INTEGER NOT NULL)",
                       "begin migration", err)) < 0)
        goto fail;
    PGresult *r = PQexec(s->conn, "SELECT version FROM autopart_schema");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = result_error(s, r, "read schema version", err);
        goto fail;
    }
    int v = PQntuples(r) ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    if (v < 0) {
        if ((rc = exec_sql(s, "INSERT INTO autopart_schema (version) VALUES (0)", "set schema version", err)) < 0)
            goto fail;
        v = 0;
    }
    if (v > STORE_SCHEMA_VERSION) {
        rc = ap_error_set(err, AP_EIO,
                          "store: the database has schema version %d, newer than this autopartd knows (%d)", v,
                          STORE_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < STORE_SCHEMA_VERSION; v++) {
        if ((rc = exec_sql(s, migrations[v], "migrate the schema", err)) < 0) {
            if (strstr(err->msg, "pg_trgm"))
                ap_error_set(err, AP_EIO,
                             "store: %s: the trigram extension pg_trgm cannot be created: run `CREATE EXTENSION "
                             "pg_trgm` in the database as its owner or a superuser (it ships with Debian's "
                             "postgresql)",
                             s->where);
            goto fail;
        }
        char sql[80];
        snprintf(sql, sizeof sql, "UPDATE autopart_schema SET version = %d", v + 1);
        if ((rc = exec_sql(s, sql, "set schema version", err)) < 0)
            goto fail;
    }
    return commit(s, err);
fail:
    rollback(s);
    return rc;
}

static void pg_close(store *base)
{
    pg *s = (pg *)base;
    if (!s)
        return;
    PQfinish(s->conn);
    ap_free(s->conninfo);
    ap_free(s);
}

static const store_ops pg_ops;

int store__pg_open(const char *conninfo, int busy_ms, store **out, ap_error *err)
{
    int rc;
    *out = NULL;
    pg *s = ap_calloc(1, sizeof *s);
    if (!s || !(s->conninfo = ap_strdup(conninfo))) {
        ap_free(s);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    s->base.ops = &pg_ops;
    s->busy_ms = busy_ms > 0 ? busy_ms : 5000;
    store__pg_describe(conninfo, s->where, sizeof s->where);
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &msg);
    if (!opts) {
        rc = ap_error_set(err, AP_EINVALID, "store: the PostgreSQL connection string cannot be read: %s",
                          msg ? msg : "out of memory");
        PQfreemem(msg);
        goto fail;
    }
    PQconninfoFree(opts);
    if ((rc = connect_now(s, err)) < 0) {
        /* at start there is nothing to wait for: say what to check */
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        ap_error_set(err, AP_EIO, "%s", m);
        goto fail;
    }
    if ((rc = migrate(s, err)) < 0)
        goto fail;
    *out = &s->base;
    return 0;
fail:
    pg_close(&s->base);
    return rc;
}

static const store_ops pg_ops = {
    .name = "postgresql",
    .close = pg_close,
    .check = pg_check,
    .begin = pg_begin,
    .find_live = pg_find_live,
    .get = pg_get,
    .payload = pg_payload,
    .start = pg_start,
    .set_progress = pg_set_progress,
    .finish = pg_finish,
    .add_hits = pg_add_hits,
    .watch = pg_watch,
    .gc = pg_gc,
    .vacuum = pg_vacuum,
    .heartbeat = pg_heartbeat,
    .claim_orphans = pg_claim_orphans,
    .take = pg_take,
    .release_all = pg_release_all,
    .release = pg_release,
    .request_cancel = pg_request_cancel,
    .cancel_requests = pg_cancel_requests,
    .alias_get = pg_alias_get,
    .alias_put = pg_alias_put,
    .list = pg_list,
    .history = pg_history,
    .best_schedule = pg_best_schedule,
    .counts_get = pg_counts_get,
};
