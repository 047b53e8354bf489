/*
 * sqlite.c - the SQLite backend of autopartd's store (the default: one
 * file that the daemons of one host share): schema and its numbered
 * migrations, the statements (prepared once per connection), and the
 * transactions that keep one live row per key across daemons sharing the
 * file.  See store.h for what the rows mean, store_int.h for the backend
 * interface.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store_int.h"

/* ================================================================ schema */

/* Migration k takes a database from user_version k to k + 1.  Append only:
 * a released schema step is never edited. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE searches ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"  /* ids are never reused */
    "  key BLOB NOT NULL,"
    "  kind INTEGER NOT NULL,"
    "  status INTEGER NOT NULL,"
    "  module_hash BLOB NOT NULL,"
    "  module_name TEXT NOT NULL DEFAULT '',"
    "  client_label TEXT NOT NULL DEFAULT '',"
    "  mesh TEXT NOT NULL DEFAULT '',"
    "  device TEXT NOT NULL DEFAULT '',"
    "  axes TEXT NOT NULL DEFAULT '',"
    "  created_us INTEGER NOT NULL,"
    "  started_us INTEGER NOT NULL DEFAULT 0,"
    "  finished_us INTEGER NOT NULL DEFAULT 0,"
    "  owner TEXT,"
    "  lease_until_us INTEGER NOT NULL DEFAULT 0,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  progress_us INTEGER NOT NULL DEFAULT 0,"
    "  episodes INTEGER NOT NULL DEFAULT 0,"
    "  best_runtime_s REAL NOT NULL DEFAULT 0,"
    "  best_peak_memory INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT NOT NULL DEFAULT '',"
    "  cache_hits INTEGER NOT NULL DEFAULT 0"
    ");"
    /* One live row per key: failed and cancelled rows leave the index, so
     * asking again makes a new row; two daemons racing to insert the same
     * key cannot both win. */
    "CREATE UNIQUE INDEX searches_live_key ON searches(key) WHERE status IN (1, 2, 3);"
    /* Listings: newest first, keyset paging on (created_us, id). */
    "CREATE INDEX searches_created ON searches(created_us, id);"
    "CREATE INDEX searches_status ON searches(status, created_us, id);"
    "CREATE INDEX searches_client ON searches(client_label, created_us, id);"
    "CREATE INDEX searches_module ON searches(module_hash, created_us, id);"
    /* The orphan sweep and the heartbeat look only at unfinished rows. */
    "CREATE INDEX searches_unfinished ON searches(owner, lease_until_us) WHERE status IN (1, 2);"
    /* Big payloads apart, so that listing pages stay small. */
    "CREATE TABLE payloads ("
    "  id INTEGER PRIMARY KEY REFERENCES searches(id) ON DELETE CASCADE,"
    "  request BLOB,"
    "  result BLOB,"
    "  checkpoint BLOB,"
    "  best_schedule TEXT"
    ");"
    /* Best cost over time, for the dashboard's plots. */
    "CREATE TABLE progress ("
    "  search_id INTEGER NOT NULL REFERENCES searches(id) ON DELETE CASCADE,"
    "  t_us INTEGER NOT NULL,"
    "  episodes INTEGER NOT NULL,"
    "  best_runtime_s REAL NOT NULL,"
    "  best_peak_memory INTEGER NOT NULL,"
    "  PRIMARY KEY (search_id, t_us)"
    ") WITHOUT ROWID;"
    /* Rows and cache hits by status, kept by triggers: Stats (which a
     * dashboard polls) reads five rows, not the whole table. */
    "CREATE TABLE counters ("
    "  status INTEGER PRIMARY KEY,"
    "  rows INTEGER NOT NULL,"
    "  cache_hits INTEGER NOT NULL"
    ");"
    "CREATE TRIGGER searches_count_insert AFTER INSERT ON searches BEGIN"
    "  INSERT INTO counters (status, rows, cache_hits) VALUES (NEW.status, 1, NEW.cache_hits)"
    "    ON CONFLICT (status) DO UPDATE SET rows = rows + 1, cache_hits = cache_hits + NEW.cache_hits;"
    "END;"
    "CREATE TRIGGER searches_count_update AFTER UPDATE OF status, cache_hits ON searches BEGIN"
    "  UPDATE counters SET rows = rows - 1, cache_hits = cache_hits - OLD.cache_hits WHERE status = OLD.status;"
    "  INSERT INTO counters (status, rows, cache_hits) VALUES (NEW.status, 1, NEW.cache_hits)"
    "    ON CONFLICT (status) DO UPDATE SET rows = rows + 1, cache_hits = cache_hits + NEW.cache_hits;"
    "END;"
    "CREATE TRIGGER searches_count_delete AFTER DELETE ON searches BEGIN"
    "  UPDATE counters SET rows = rows - 1, cache_hits = cache_hits - OLD.cache_hits WHERE status = OLD.status;"
    "END;"
    /* Hash of a request as written -> key of its canonical form. */
    "CREATE TABLE aliases ("
    "  raw BLOB PRIMARY KEY,"
    "  key BLOB NOT NULL,"
    "  created_us INTEGER NOT NULL"
    ") WITHOUT ROWID;",
    /* 1 -> 2: the dashboard's sort orders, keyset-paged on (column, id).
     * Rows without the column's value (no cost yet, not finished) are left
     * out of those orders, hence the partial indexes. */
    "CREATE INDEX searches_by_runtime ON searches(best_runtime_s, id) WHERE best_runtime_s > 0;"
    "CREATE INDEX searches_by_memory ON searches(best_peak_memory, id) WHERE best_peak_memory > 0;"
    "CREATE INDEX searches_by_episodes ON searches(episodes, id);"
    "CREATE INDEX searches_by_duration ON searches((finished_us - started_us), id) WHERE finished_us > 0 AND "
    "started_us > 0;"
    /* Free text: a trigram index (substrings, any case) over the columns a
     * person searches, kept by triggers; it holds no copy of the text. */
    "CREATE VIRTUAL TABLE searches_text USING fts5(module_name, client_label, mesh, device, error, "
    "  content = 'searches', content_rowid = 'id', tokenize = 'trigram');"
    "INSERT INTO searches_text (searches_text) VALUES ('rebuild');"
    "CREATE TRIGGER searches_text_insert AFTER INSERT ON searches BEGIN"
    "  INSERT INTO searches_text (rowid, module_name, client_label, mesh, device, error)"
    "    VALUES (NEW.id, NEW.module_name, NEW.client_label, NEW.mesh, NEW.device, NEW.error);"
    "END;"
    "CREATE TRIGGER searches_text_update AFTER UPDATE OF module_name, client_label, mesh, device, error ON searches"
    "  WHEN OLD.error IS NOT NEW.error OR OLD.module_name IS NOT NEW.module_name OR OLD.client_label IS NOT"
    "  NEW.client_label OR OLD.mesh IS NOT NEW.mesh OR OLD.device IS NOT NEW.device BEGIN"
    "  INSERT INTO searches_text (searches_text, rowid, module_name, client_label, mesh, device, error)"
    "    VALUES ('delete', OLD.id, OLD.module_name, OLD.client_label, OLD.mesh, OLD.device, OLD.error);"
    "  INSERT INTO searches_text (rowid, module_name, client_label, mesh, device, error)"
    "    VALUES (NEW.id, NEW.module_name, NEW.client_label, NEW.mesh, NEW.device, NEW.error);"
    "END;"
    "CREATE TRIGGER searches_text_delete AFTER DELETE ON searches BEGIN"
    "  INSERT INTO searches_text (searches_text, rowid, module_name, client_label, mesh, device, error)"
    "    VALUES ('delete', OLD.id, OLD.module_name, OLD.client_label, OLD.mesh, OLD.device, OLD.error);"
    "END;",
    /* 2 -> 3: when a row was last used (made, ended, or served from: what
     * retention goes by, oldest first), and until when a daemon's calls
     * wait on a row another daemon runs (which then does not give it up
     * for want of clients). */
    "ALTER TABLE searches ADD COLUMN touched_us INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE searches ADD COLUMN watched_until_us INTEGER NOT NULL DEFAULT 0;"
    "UPDATE searches SET touched_us = max(created_us, finished_us);"
    "CREATE INDEX searches_touched ON searches(touched_us) WHERE status IN (3, 4, 5);",
};

/* The statements, prepared once per connection. */
#define STMTS(X)                                                                                                   \
    X(BEGIN_IMM, "begin", "BEGIN IMMEDIATE")                                                                       \
    X(COMMIT, "commit", "COMMIT")                                                                                  \
    X(ROLLBACK, "rollback", "ROLLBACK")                                                                            \
    X(FIND_LIVE, "find by key", "SELECT " STORE_ROW_COLS " FROM searches WHERE key = ?1 AND status IN (1, 2, 3)")  \
    X(GET, "get", "SELECT " STORE_ROW_COLS " FROM searches WHERE id = ?1")                                         \
    X(INSERT, "insert",                                                                                            \
      "INSERT INTO searches (key, kind, status, module_hash, module_name, client_label, mesh, device, axes, "     \
      "created_us, owner, lease_until_us, touched_us) VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?9)") \
    X(INSERT_PAYLOAD, "insert payload", "INSERT INTO payloads (id, request) VALUES (?1, ?2)")                      \
    X(INHERIT_FIND, "find a checkpoint to resume",                                                                 \
      "SELECT s.id FROM searches s JOIN payloads p ON p.id = s.id WHERE s.module_hash = ?1 AND s.key = ?2 AND "   \
      "s.status = 5 AND p.checkpoint IS NOT NULL ORDER BY s.id DESC LIMIT 1")                                      \
    X(INHERIT_MOVE, "take a checkpoint over",                                                                      \
      "UPDATE payloads SET checkpoint = (SELECT checkpoint FROM payloads WHERE id = ?2) WHERE id = ?1")             \
    X(CKPT_DROP, "drop a checkpoint", "UPDATE payloads SET checkpoint = NULL WHERE id = ?1")                      \
    X(PAYLOAD_REQUEST, "read request", "SELECT request FROM payloads WHERE id = ?1")                               \
    X(PAYLOAD_RESULT, "read result", "SELECT result FROM payloads WHERE id = ?1")                                  \
    X(PAYLOAD_CHECKPOINT, "read checkpoint", "SELECT checkpoint FROM payloads WHERE id = ?1")                      \
    X(BEST_SCHEDULE, "read best schedule", "SELECT best_schedule FROM payloads WHERE id = ?1")                     \
    X(START, "start",                                                                                              \
      "UPDATE searches SET attempts = attempts + (status = 1), status = 2, started_us = ?2 WHERE id = ?1 "         \
      "AND owner = ?3 AND status IN (1, 2)")                                                                       \
    X(PROGRESS, "progress",                                                                                        \
      "UPDATE searches SET progress_us = ?2, episodes = ?3, best_runtime_s = ?4, best_peak_memory = ?5 "          \
      "WHERE id = ?1")                                                                                             \
    X(PROGRESS_SCHEDULE, "progress schedule", "UPDATE payloads SET best_schedule = ?2 WHERE id = ?1")              \
    X(PROGRESS_CKPT, "checkpoint", "UPDATE payloads SET checkpoint = ?2 WHERE id = ?1")                            \
    X(PROGRESS_POINT, "progress point",                                                                            \
      "INSERT OR REPLACE INTO progress (search_id, t_us, episodes, best_runtime_s, best_peak_memory) "            \
      "VALUES (?1, ?2, ?3, ?4, ?5)")                                                                               \
    X(FINISH, "finish",                                                                                            \
      "UPDATE searches SET status = ?2, finished_us = ?3, touched_us = ?3, error = ?4, owner = NULL, "             \
      "lease_until_us = 0 WHERE id = ?1 AND status IN (1, 2)")                                                     \
    X(FINISH_SUMMARY, "finish summary",                                                                            \
      "UPDATE searches SET episodes = ?2, best_runtime_s = ?3, best_peak_memory = ?4, progress_us = ?5 "          \
      "WHERE id = ?1")                                                                                             \
    X(FINISH_RESULT, "store result", "UPDATE payloads SET result = ?2, checkpoint = NULL WHERE id = ?1")             \
    X(FINISH_DROP, "drop the request", "UPDATE payloads SET request = NULL, checkpoint = NULL WHERE id = ?1")           \
    X(FINISH_KEEP, "drop the request", "UPDATE payloads SET request = NULL WHERE id = ?1")                         \
    X(ADD_HITS, "count hits",                                                                                      \
      "UPDATE searches SET cache_hits = cache_hits + ?2, touched_us = max(touched_us, ?3) WHERE id = ?1")          \
    X(WATCH, "watch", "UPDATE searches SET watched_until_us = max(watched_until_us, ?2) WHERE id = ?1")           \
    X(GC_OLD, "retention by age",                                                                                  \
      "DELETE FROM searches WHERE id IN (SELECT id FROM searches WHERE status IN (3, 4, 5) AND touched_us < ?1 "  \
      "ORDER BY touched_us LIMIT ?2)")                                                                             \
    X(GC_ALIASES, "retention of aliases", "DELETE FROM aliases WHERE created_us < ?1")                            \
    X(LIVE_BYTES, "live size",                                                                                     \
      "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), "      \
      "pragma_page_size()")                                                                                        \
    X(HEARTBEAT, "heartbeat", "UPDATE searches SET lease_until_us = ?2 WHERE owner = ?1 AND status IN (1, 2)")    \
    X(ORPHANS, "find orphans",                                                                                     \
      "SELECT id, coalesce(owner, ''), lease_until_us, kind FROM searches WHERE status IN (1, 2) AND "            \
      "(owner IS NULL OR owner != ?1) AND (?2 = 0 OR kind = ?2) ORDER BY id")                                     \
    X(CLAIM, "claim",                                                                                              \
      "UPDATE searches SET owner = ?2, lease_until_us = ?3, status = 1 WHERE id = ?1 AND status IN (1, 2) AND "   \
      "coalesce(owner, '') = ?4 AND lease_until_us = ?5")                                                          \
    X(CLAIM_ONE, "claim one",                                                                                      \
      "UPDATE searches SET owner = ?2, lease_until_us = ?3 WHERE id = ?1 AND "                                   \
      "((status = 1 AND coalesce(owner, ?2) = ?2) OR (status = 2 AND owner = ?2))")                                \
    X(RELEASE, "release",                                                                                          \
      "UPDATE searches SET owner = NULL, lease_until_us = 0, status = 1 WHERE owner = ?1 AND status IN (1, 2)")   \
    X(RELEASE_ONE, "release one",                                                                                  \
      "UPDATE searches SET owner = NULL, lease_until_us = 0, status = 1 WHERE id = ?2 AND owner = ?1 AND "        \
      "status IN (1, 2)")                                                                                          \
    X(CANCEL_NOW, "cancel",                                                                                        \
      "UPDATE searches SET status = 5, finished_us = ?2, error = 'cancelled', cancel_requested = 1 WHERE id = ?1 " \
      "AND status = 1 AND owner IS NULL")                                                                          \
    X(CANCEL_ASK, "ask to cancel",                                                                                 \
      "UPDATE searches SET cancel_requested = 1 WHERE id = ?1 AND status IN (1, 2)")                               \
    X(CANCEL_REQS, "cancel requests",                                                                              \
      "SELECT id FROM searches WHERE owner = ?1 AND status IN (1, 2) AND cancel_requested = 1")                    \
    X(STATUS_OF, "status", "SELECT status FROM searches WHERE id = ?1")                                            \
    X(ALIAS_GET, "read alias", "SELECT key FROM aliases WHERE raw = ?1")                                           \
    X(ALIAS_PUT, "write alias", "INSERT OR IGNORE INTO aliases (raw, key, created_us) VALUES (?1, ?2, ?3)")        \
    X(HISTORY, "history",                                                                                          \
      "SELECT t_us, episodes, best_runtime_s, best_peak_memory FROM (SELECT * FROM progress WHERE search_id = ?1 " \
      "ORDER BY t_us DESC LIMIT ?2) ORDER BY t_us")                                                                \
    X(COUNTS, "counts", "SELECT status, rows, cache_hits FROM counters")                                          \
    X(TEXT_COUNT, "count text matches",                                                                            \
      "SELECT count(*) FROM (SELECT 1 FROM searches_text WHERE searches_text MATCH ?1 LIMIT ?2)")                  \
    X(PAGES, "size", "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")

enum {
#define STMT_ENUM(id, what, sql) S_##id,
    STMTS(STMT_ENUM)
#undef STMT_ENUM
        S__COUNT
};

static const struct {
    const char *what, *sql;
} stmt_text[] = {
#define STMT_TEXT(id, what, sql) {what, sql},
    STMTS(STMT_TEXT)
#undef STMT_TEXT
};

/* Listing statements, one per combination of filters and order, prepared
 * on first use. */
enum {
    LF_STATUS = 1,
    LF_KIND = 2,
    LF_CLIENT = 4,
    LF_MODULE = 8,
    LF_AFTER = 16,
    LF_TEXT = 32,      /* a common text: walk the order's index, keep rows the text index matched */
    LF_TEXT_RARE = 64, /* a rare one: the matched rows first, sorted (at most TEXT_RARE of them) */
    LF__COUNT = 128
};
/* Matches of a text below which a listing starts from them. */
#define TEXT_RARE 2000
#define LIST_STMTS (LF__COUNT * STORE_SORT__COUNT * 2)

typedef struct sq {
    store base;
    sqlite3 *db;
    sqlite3_stmt *st[S__COUNT];
    sqlite3_stmt *list[LIST_STMTS];
} sq;

/* ================================================================ helpers */

static int db_error(sq *s, ap_error *err, const char *what)
{
    int code = sqlite3_errcode(s->db);
    return ap_error_set(err, code == SQLITE_BUSY || code == SQLITE_LOCKED ? AP_ELIMIT : AP_EIO, "store: %s: %s",
                        what, sqlite3_errmsg(s->db));
}

static sqlite3_stmt *stmt(sq *s, int id)
{
    sqlite3_stmt *q = s->st[id];
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return q;
}

/* Runs a statement that returns no rows. */
static int exec_stmt(sq *s, int id, sqlite3_stmt *q, ap_error *err)
{
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_error(s, err, stmt_text[id].what);
    return 0;
}

static int begin(sq *s, ap_error *err)
{
    return exec_stmt(s, S_BEGIN_IMM, stmt(s, S_BEGIN_IMM), err);
}

static int commit(sq *s, ap_error *err)
{
    return exec_stmt(s, S_COMMIT, stmt(s, S_COMMIT), err);
}

static void rollback(sq *s)
{
    if (!sqlite3_get_autocommit(s->db)) {
        sqlite3_stmt *q = stmt(s, S_ROLLBACK);
        sqlite3_step(q);
        sqlite3_reset(q);
    }
}

/* The columns of a statement's current row, for store__read_row. */
static int64_t col_i64(void *q, int col)
{
    return sqlite3_column_int64(q, col);
}

static double col_f64(void *q, int col)
{
    return sqlite3_column_double(q, col);
}

static void col_text(void *q, int col, char *dst, size_t size)
{
    const unsigned char *src = sqlite3_column_text(q, col);
    snprintf(dst, size, "%s", src ? (const char *)src : "");
}

static void col_bytes(void *q, int col, uint8_t *dst, size_t size)
{
    const void *p = sqlite3_column_blob(q, col);
    size_t n = (size_t)sqlite3_column_bytes(q, col);
    memset(dst, 0, size);
    if (p)
        memcpy(dst, p, n < size ? n : size);
}

/* Reads the columns of STORE_ROW_COLS. */
static void read_row(sqlite3_stmt *q, store_row *r)
{
    static const store_col_reader rd = {col_i64, col_f64, col_text, col_bytes};
    store__read_row(&rd, q, r);
}

/* One row of statement id bound to an id or a key: 1 found, 0 none. */
static int one_row(sq *s, int id, sqlite3_stmt *q, store_row *row, ap_error *err)
{
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        read_row(q, row);
        sqlite3_reset(q);
        return 1;
    }
    sqlite3_reset(q);
    if (rc != SQLITE_DONE)
        return db_error(s, err, stmt_text[id].what);
    return 0;
}

/* ================================================================== open */

static int exec_sql(sq *s, const char *sql, const char *what, ap_error *err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int rc = ap_error_set(err, AP_EIO, "store: %s: %s", what, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return rc;
    }
    return 0;
}

static int user_version(sq *s, int *v, ap_error *err)
{
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "read schema version");
    int rc = sqlite3_step(q);
    *v = rc == SQLITE_ROW ? sqlite3_column_int(q, 0) : 0;
    sqlite3_finalize(q);
    return rc == SQLITE_ROW ? 0 : db_error(s, err, "read schema version");
}

/* Brings the schema to STORE_SCHEMA_VERSION, one migration per transaction;
 * concurrent openers serialize on the write lock and re-read the version
 * inside it, so each step runs once. */
static int migrate(sq *s, ap_error *err)
{
    int rc, v = 0;
    for (;;) {
        if ((rc = exec_sql(s, "BEGIN IMMEDIATE", "begin migration", err)) < 0)
            return rc;
        if ((rc = user_version(s, &v, err)) < 0)
            goto fail;
        if (v > STORE_SCHEMA_VERSION) {
            rc = ap_error_set(err, AP_EIO,
                              "store: the database has schema version %d, newer than this autopartd knows (%d)", v,
                              STORE_SCHEMA_VERSION);
            goto fail;
        }
        if (v == STORE_SCHEMA_VERSION)
            return exec_sql(s, "COMMIT", "commit", err);
        if ((rc = exec_sql(s, migrations[v], "migrate the schema", err)) < 0)
            goto fail;
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
        if ((rc = exec_sql(s, sql, "set schema version", err)) < 0 || (rc = exec_sql(s, "COMMIT", "commit", err)) < 0)
            goto fail;
    }
fail:
    exec_sql(s, "ROLLBACK", "rollback", NULL);
    return rc;
}

static const store_ops sq_ops;
static void sq_close(store *base);

int store__sqlite_open(const char *path, int busy_ms, store **out, ap_error *err)
{
    int rc;
    sq *s = ap_calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    s->base.ops = &sq_ops;
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        rc = ap_error_set(err, AP_EIO, "store: cannot open %s: %s", path,
                          s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(s->db, busy_ms);
    sqlite3_extended_result_codes(s->db, 0);
    /* A new store gives the pages retention frees back to the file system
     * (store_gc); on an old one this takes effect at its next VACUUM. */
    if ((rc = exec_sql(s, "PRAGMA auto_vacuum = INCREMENTAL", "set auto_vacuum", err)) < 0)
        goto fail;
    /* WAL: readers never wait for the writer, and commits need no fsync
     * with synchronous=NORMAL (a power loss may drop the last commits, never
     * corrupt the file). */
    if ((rc = exec_sql(s, "PRAGMA journal_mode = WAL", "set WAL mode", err)) < 0 ||
        (rc = exec_sql(s, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;"
                          /* the WAL keeps its high-water mark unless told: back to 64 MiB after a checkpoint */
                          "PRAGMA journal_size_limit = 67108864", "set pragmas", err)) < 0 ||
        (rc = migrate(s, err)) < 0)
        goto fail;
    for (int i = 0; i < S__COUNT; i++) {
        if (sqlite3_prepare_v3(s->db, stmt_text[i].sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL) != SQLITE_OK) {
            rc = db_error(s, err, stmt_text[i].what);
            goto fail;
        }
    }
    *out = &s->base;
    return 0;
fail:
    if (err && err->code == AP_EIO && strstr(err->msg, "not a database"))
        snprintf(err->msg, sizeof err->msg, "store: %s is not an SQLite database", path);
    sq_close(&s->base);
    return rc;
}

static void sq_close(store *base)
{
    sq *s = (sq *)base;
    if (!s)
        return;
    for (int i = 0; i < S__COUNT; i++)
        sqlite3_finalize(s->st[i]);
    for (int i = 0; i < LIST_STMTS; i++)
        sqlite3_finalize(s->list[i]);
    sqlite3_close(s->db);
    ap_free(s);
}

static int sq_check(store *base, bool full, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, full ? "PRAGMA integrity_check" : "PRAGMA quick_check", -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "integrity check");
    int rc = sqlite3_step(q);
    const unsigned char *t = rc == SQLITE_ROW ? sqlite3_column_text(q, 0) : NULL;
    int out = t && !strcmp((const char *)t, "ok") ? 0
                                                  : ap_error_set(err, AP_EIO, "store: integrity check: %s",
                                                                 t ? (const char *)t : sqlite3_errmsg(s->db));
    sqlite3_finalize(q);
    return out;
}

/* ================================================================== rows */

static int sq_find_live(store *base, const uint8_t *key, store_row *row, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_FIND_LIVE);
    sqlite3_bind_blob(q, 1, key, STORE_KEY_BYTES, SQLITE_STATIC);
    return one_row(s, S_FIND_LIVE, q, row, err);
}

static int sq_get(store *base, int64_t id, store_row *row, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_GET);
    sqlite3_bind_int64(q, 1, id);
    return one_row(s, S_GET, q, row, err);
}

static int sq_begin(store *base, const store_new *n, int64_t now_us, int64_t lease_until_us, store_row *row, bool *created,
                ap_error *err)
{
    sq *s = (sq *)base;
    int rc;
    *created = false;
    if ((rc = begin(s, err)) < 0)
        return rc;
    if ((rc = sq_find_live(&s->base, n->key, row, err)) != 0)
        goto done; /* found (1) or failed */
    sqlite3_stmt *q = stmt(s, S_INSERT);
    sqlite3_bind_blob(q, 1, n->key, STORE_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_int(q, 2, n->kind);
    sqlite3_bind_blob(q, 3, n->module_hash, STORE_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, n->module_name ? n->module_name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 5, n->client_label ? n->client_label : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 6, n->mesh ? n->mesh : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 7, n->device ? n->device : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 8, n->axes ? n->axes : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 9, now_us);
    sqlite3_bind_text(q, 10, s->base.owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 11, lease_until_us);
    if ((rc = exec_stmt(s, S_INSERT, q, err)) < 0)
        goto done;
    int64_t id = sqlite3_last_insert_rowid(s->db);
    q = stmt(s, S_INSERT_PAYLOAD);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_blob64(q, 2, n->request ? n->request : "", n->request_len, SQLITE_STATIC);
    if ((rc = exec_stmt(s, S_INSERT_PAYLOAD, q, err)) < 0)
        goto done;
    /* A search of this key that was given up (cancelled) left its
     * checkpoint: the new row takes it over, to resume from it. */
    q = stmt(s, S_INHERIT_FIND);
    sqlite3_bind_blob(q, 1, n->module_hash, STORE_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_blob(q, 2, n->key, STORE_KEY_BYTES, SQLITE_STATIC);
    rc = sqlite3_step(q);
    int64_t from = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
    sqlite3_reset(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = db_error(s, err, stmt_text[S_INHERIT_FIND].what);
        goto done;
    }
    if (from) {
        q = stmt(s, S_INHERIT_MOVE);
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_int64(q, 2, from);
        if ((rc = exec_stmt(s, S_INHERIT_MOVE, q, err)) < 0)
            goto done;
        q = stmt(s, S_CKPT_DROP);
        sqlite3_bind_int64(q, 1, from);
        if ((rc = exec_stmt(s, S_CKPT_DROP, q, err)) < 0)
            goto done;
    }
    if ((rc = sq_get(&s->base, id, row, err)) < 0)
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

static int sq_payload(store *base, int64_t id, int which, void **data, size_t *len, ap_error *err)
{
    sq *s = (sq *)base;
    int sid = which == STORE_PAYLOAD_REQUEST ? S_PAYLOAD_REQUEST
              : which == STORE_PAYLOAD_RESULT ? S_PAYLOAD_RESULT
                                              : S_PAYLOAD_CHECKPOINT;
    sqlite3_stmt *q = stmt(s, sid);
    *data = NULL;
    *len = 0;
    sqlite3_bind_int64(q, 1, id);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
        const void *p = sqlite3_column_blob(q, 0);
        size_t n = (size_t)sqlite3_column_bytes(q, 0);
        *data = ap_malloc(n ? n : 1);
        if (!*data) {
            sqlite3_reset(q);
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        }
        if (n)
            memcpy(*data, p, n);
        *len = n;
        sqlite3_reset(q);
        return 1;
    }
    sqlite3_reset(q);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_error(s, err, stmt_text[sid].what);
    return 0;
}

static int sq_best_schedule(store *base, int64_t id, char **text, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_BEST_SCHEDULE);
    *text = NULL;
    sqlite3_bind_int64(q, 1, id);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
        *text = ap_strdup((const char *)sqlite3_column_text(q, 0));
        sqlite3_reset(q);
        return *text ? 1 : ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    sqlite3_reset(q);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_error(s, err, stmt_text[S_BEST_SCHEDULE].what);
    return 0;
}

static int sq_start(store *base, int64_t id, int64_t now_us, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_START);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, now_us);
    sqlite3_bind_text(q, 3, s->base.owner, -1, SQLITE_STATIC);
    int rc = exec_stmt(s, S_START, q, err);
    if (rc == 0 && sqlite3_changes(s->db) == 0)
        return ap_error_set(err, AP_ECONFLICT, "store: search %" PRId64 " is no longer this daemon's", id);
    return rc;
}

static int sq_set_progress(store *base, int64_t id, int64_t now_us, const store_progress *p, bool point, const void *ckpt,
                       size_t ckpt_len, ap_error *err)
{
    sq *s = (sq *)base;
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    sqlite3_stmt *q = stmt(s, S_PROGRESS);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, now_us);
    sqlite3_bind_int64(q, 3, p->episodes);
    sqlite3_bind_double(q, 4, p->best_runtime_s);
    sqlite3_bind_int64(q, 5, p->best_peak_memory);
    if ((rc = exec_stmt(s, S_PROGRESS, q, err)) < 0)
        goto fail;
    if (p->best_schedule) {
        q = stmt(s, S_PROGRESS_SCHEDULE);
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_text(q, 2, p->best_schedule, -1, SQLITE_STATIC);
        if ((rc = exec_stmt(s, S_PROGRESS_SCHEDULE, q, err)) < 0)
            goto fail;
    }
    if (ckpt) {
        q = stmt(s, S_PROGRESS_CKPT);
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_blob64(q, 2, ckpt, ckpt_len, SQLITE_STATIC);
        if ((rc = exec_stmt(s, S_PROGRESS_CKPT, q, err)) < 0)
            goto fail;
    }
    if (point) {
        q = stmt(s, S_PROGRESS_POINT);
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_int64(q, 2, now_us);
        sqlite3_bind_int64(q, 3, p->episodes);
        sqlite3_bind_double(q, 4, p->best_runtime_s);
        sqlite3_bind_int64(q, 5, p->best_peak_memory);
        if ((rc = exec_stmt(s, S_PROGRESS_POINT, q, err)) < 0)
            goto fail;
    }
    return commit(s, err);
fail:
    rollback(s);
    return rc;
}

static int sq_finish(store *base, int64_t id, int status, int64_t now_us, const void *result, size_t result_len,
                 const store_progress *summary, const char *error, ap_error *err)
{
    sq *s = (sq *)base;
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    sqlite3_stmt *q = stmt(s, S_FINISH);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int(q, 2, status);
    sqlite3_bind_int64(q, 3, now_us);
    sqlite3_bind_text(q, 4, error ? error : "", -1, SQLITE_STATIC);
    if ((rc = exec_stmt(s, S_FINISH, q, err)) < 0)
        goto fail;
    if (sqlite3_changes(s->db) == 0) {
        rc = ap_error_set(err, AP_ECONFLICT, "store: search %" PRId64 " had already ended", id);
        goto fail;
    }
    if (summary) {
        q = stmt(s, S_FINISH_SUMMARY);
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_int64(q, 2, summary->episodes);
        sqlite3_bind_double(q, 3, summary->best_runtime_s);
        sqlite3_bind_int64(q, 4, summary->best_peak_memory);
        sqlite3_bind_int64(q, 5, now_us);
        if ((rc = exec_stmt(s, S_FINISH_SUMMARY, q, err)) < 0)
            goto fail;
    }
    /* The request was kept to run it again after a crash: an ended row
     * needs it no more, and modules are big.  A cancelled search keeps its
     * checkpoint, for the next request of its key to resume from. */
    int drop = status == STORE_CANCELLED ? S_FINISH_KEEP : S_FINISH_DROP;
    q = stmt(s, drop);
    sqlite3_bind_int64(q, 1, id);
    if ((rc = exec_stmt(s, drop, q, err)) < 0)
        goto fail;
    if (status == STORE_DONE) {
        q = stmt(s, S_FINISH_RESULT);
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_blob64(q, 2, result ? result : "", result_len, SQLITE_STATIC);
        if ((rc = exec_stmt(s, S_FINISH_RESULT, q, err)) < 0)
            goto fail;
    }
    return commit(s, err);
fail:
    rollback(s);
    return rc;
}

static int sq_add_hits(store *base, const int64_t *ids, const uint64_t *n, int count, int64_t now_us,
                       ap_error *err)
{
    sq *s = (sq *)base;
    int rc;
    if (count == 0)
        return 0;
    if ((rc = begin(s, err)) < 0)
        return rc;
    for (int i = 0; i < count; i++) {
        sqlite3_stmt *q = stmt(s, S_ADD_HITS);
        sqlite3_bind_int64(q, 1, ids[i]);
        sqlite3_bind_int64(q, 2, (int64_t)n[i]);
        sqlite3_bind_int64(q, 3, now_us);
        if ((rc = exec_stmt(s, S_ADD_HITS, q, err)) < 0) {
            rollback(s);
            return rc;
        }
    }
    return commit(s, err);
}

static int sq_watch(store *base, const int64_t *ids, int count, int64_t until_us, ap_error *err)
{
    sq *s = (sq *)base;
    int rc;
    if (count == 0)
        return 0;
    if ((rc = begin(s, err)) < 0)
        return rc;
    for (int i = 0; i < count; i++) {
        sqlite3_stmt *q = stmt(s, S_WATCH);
        sqlite3_bind_int64(q, 1, ids[i]);
        sqlite3_bind_int64(q, 2, until_us);
        if ((rc = exec_stmt(s, S_WATCH, q, err)) < 0) {
            rollback(s);
            return rc;
        }
    }
    return commit(s, err);
}

/* ============================================================ ownership */

static int sq_heartbeat(store *base, int64_t lease_until_us, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_HEARTBEAT);
    sqlite3_bind_text(q, 1, s->base.owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, lease_until_us);
    return exec_stmt(s, S_HEARTBEAT, q, err);
}

static int sq_claim_orphans(store *base, int kind, int64_t now_us, int64_t lease_until_us, bool queued_too,
                            store_claim *out, int max, ap_error *err)
{
    sq *s = (sq *)base;
    int rc, n = 0;
    if ((rc = begin(s, err)) < 0)
        return rc;
    sqlite3_stmt *q = stmt(s, S_ORPHANS);
    sqlite3_bind_text(q, 1, s->base.owner, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 2, kind);
    /* Collect first: the claims below reuse the connection. */
    struct cand {
        int64_t id, lease;
        int kind;
        char owner[128];
    } *c = NULL;
    int nc = 0, cap = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && nc < 4 * max) {
        const char *owner = (const char *)sqlite3_column_text(q, 1);
        int64_t lease = sqlite3_column_int64(q, 2);
        if (owner[0] ? lease >= now_us && !store__owner_dead(s->base.owner, owner) : !queued_too)
            continue; /* alive and leased; or queued for any daemon, not asked for */
        if (nc == cap) {
            cap = cap ? cap * 2 : 16;
            struct cand *nw = ap_realloc(c, sizeof *c * (size_t)cap);
            if (!nw) {
                sqlite3_reset(q);
                rc = ap_error_set(err, AP_ENOMEM, "out of memory");
                goto fail;
            }
            c = nw;
        }
        c[nc].id = sqlite3_column_int64(q, 0);
        c[nc].lease = lease;
        c[nc].kind = sqlite3_column_int(q, 3);
        snprintf(c[nc].owner, sizeof c[nc].owner, "%s", owner);
        nc++;
    }
    sqlite3_reset(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = db_error(s, err, stmt_text[S_ORPHANS].what);
        goto fail;
    }
    for (int i = 0; i < nc && n < max; i++) {
        q = stmt(s, S_CLAIM);
        sqlite3_bind_int64(q, 1, c[i].id);
        sqlite3_bind_text(q, 2, s->base.owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 3, lease_until_us);
        sqlite3_bind_text(q, 4, c[i].owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, c[i].lease);
        if ((rc = exec_stmt(s, S_CLAIM, q, err)) < 0)
            goto fail;
        if (sqlite3_changes(s->db) == 1) {
            out[n].id = c[i].id;
            out[n].kind = c[i].kind;
            snprintf(out[n].prev_owner, sizeof out[n].prev_owner, "%s", c[i].owner);
            n++;
        }
    }
    ap_free(c);
    if ((rc = commit(s, err)) < 0)
        return rc;
    return n;
fail:
    ap_free(c);
    rollback(s);
    return rc;
}

static int sq_take(store *base, int64_t id, int64_t lease_until_us, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_CLAIM_ONE);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_text(q, 2, s->base.owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, lease_until_us);
    int rc = exec_stmt(s, S_CLAIM_ONE, q, err);
    return rc < 0 ? rc : sqlite3_changes(s->db) == 1;
}

static int sq_release_all(store *base, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_RELEASE);
    sqlite3_bind_text(q, 1, s->base.owner, -1, SQLITE_STATIC);
    return exec_stmt(s, S_RELEASE, q, err);
}

static int sq_release(store *base, int64_t id, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_RELEASE_ONE);
    sqlite3_bind_text(q, 1, s->base.owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, id);
    return exec_stmt(s, S_RELEASE_ONE, q, err);
}

static int sq_request_cancel(store *base, int64_t id, int64_t now_us, int *status, ap_error *err)
{
    sq *s = (sq *)base;
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    sqlite3_stmt *q = stmt(s, S_CANCEL_NOW);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, now_us);
    if ((rc = exec_stmt(s, S_CANCEL_NOW, q, err)) < 0)
        goto fail;
    q = stmt(s, S_CANCEL_ASK);
    sqlite3_bind_int64(q, 1, id);
    if ((rc = exec_stmt(s, S_CANCEL_ASK, q, err)) < 0)
        goto fail;
    q = stmt(s, S_STATUS_OF);
    sqlite3_bind_int64(q, 1, id);
    rc = sqlite3_step(q);
    int found = rc == SQLITE_ROW;
    *status = found ? sqlite3_column_int(q, 0) : 0;
    sqlite3_reset(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = db_error(s, err, stmt_text[S_STATUS_OF].what);
        goto fail;
    }
    if ((rc = commit(s, err)) < 0)
        return rc;
    return found;
fail:
    rollback(s);
    return rc;
}

static int sq_cancel_requests(store *base, int64_t *ids, int max, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_CANCEL_REQS);
    sqlite3_bind_text(q, 1, s->base.owner, -1, SQLITE_STATIC);
    int rc, n = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && n < max)
        ids[n++] = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_error(s, err, stmt_text[S_CANCEL_REQS].what);
    return n;
}

/* =============================================================== aliases */

static int sq_alias_get(store *base, const uint8_t *raw, uint8_t *key, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_ALIAS_GET);
    sqlite3_bind_blob(q, 1, raw, STORE_KEY_BYTES, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW && sqlite3_column_bytes(q, 0) == STORE_KEY_BYTES) {
        memcpy(key, sqlite3_column_blob(q, 0), STORE_KEY_BYTES);
        sqlite3_reset(q);
        return 1;
    }
    sqlite3_reset(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_error(s, err, stmt_text[S_ALIAS_GET].what);
    return 0;
}

static int sq_alias_put(store *base, const uint8_t *raw, const uint8_t *key, int64_t now_us, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_ALIAS_PUT);
    sqlite3_bind_blob(q, 1, raw, STORE_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_blob(q, 2, key, STORE_KEY_BYTES, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, now_us);
    return exec_stmt(s, S_ALIAS_PUT, q, err);
}

/* ============================================================== listings */

static sqlite3_stmt *list_stmt(sq *s, unsigned mask, int sort, bool asc, ap_error *err)
{
    int slot = ((int)mask * STORE_SORT__COUNT + sort) * 2 + (asc ? 1 : 0);
    if (s->list[slot]) {
        sqlite3_reset(s->list[slot]);
        sqlite3_clear_bindings(s->list[slot]);
        return s->list[slot];
    }
    ap_buf b;
    ap_buf_init(&b);
    /* A rare text: its matches are the outer loop (CROSS JOIN keeps that
     * order), each row looked up by id, the few of them sorted. */
    const char *from = mask & LF_TEXT_RARE ? "WITH m(fid) AS (SELECT rowid FROM searches_text WHERE searches_text "
                                             "MATCH ?12) SELECT " STORE_ROW_COLS " FROM m CROSS JOIN searches ON id = fid"
                                           : "SELECT " STORE_ROW_COLS " FROM searches";
    ap_buf_puts(&b, from);
    if (sort == STORE_SORT_CREATED) {
        ap_buf_puts(&b, " WHERE (created_us, id) < (?1, ?2)");
    } else {
        ap_buf_printf(&b, " WHERE (%s, id) %s (?11, ?2) AND +created_us < ?1", store__sort_cols[sort].expr, asc ? ">" : "<");
        if (store__sort_cols[sort].has)
            ap_buf_printf(&b, " AND %s", store__sort_cols[sort].has);
    }
    /* In the other orders the filters only filter (unary +): the planner,
     * without statistics, would otherwise pick a filter's index and sort
     * every row it matches; walking the order's index stops at a page. */
    const char *plus = sort == STORE_SORT_CREATED ? "" : "+";
    if (mask & LF_STATUS)
        ap_buf_printf(&b, " AND %sstatus = ?3", plus);
    if (mask & LF_KIND)
        ap_buf_printf(&b, " AND %skind = ?4", plus);
    if (mask & LF_CLIENT)
        ap_buf_printf(&b, " AND %sclient_label = ?5", plus);
    if (mask & LF_MODULE)
        ap_buf_printf(&b, " AND %smodule_hash >= ?6 AND %smodule_hash < ?7", plus, plus);
    if (mask & LF_AFTER)
        ap_buf_printf(&b, " AND %screated_us >= ?8", plus);
    /* A common text filters the order's walk (+id: not the rows to start
     * from, which would sort them all). */
    if (mask & LF_TEXT)
        ap_buf_puts(&b, " AND +id IN (SELECT rowid FROM searches_text WHERE searches_text MATCH ?12)");
    if (sort == STORE_SORT_CREATED)
        ap_buf_puts(&b, " ORDER BY created_us DESC, id DESC LIMIT ?10");
    else
        ap_buf_printf(&b, " ORDER BY %s %s, id %s LIMIT ?10", store__sort_cols[sort].expr, asc ? "ASC" : "DESC",
                      asc ? "ASC" : "DESC");
    if (b.oom) {
        ap_buf_free(&b);
        ap_error_set(err, AP_ENOMEM, "out of memory");
        return NULL;
    }
    if (sqlite3_prepare_v3(s->db, b.data, -1, SQLITE_PREPARE_PERSISTENT, &s->list[slot], NULL) != SQLITE_OK) {
        db_error(s, err, "prepare listing");
        s->list[slot] = NULL;
    }
    ap_buf_free(&b);
    return s->list[slot];
}

static int sq_list(store *base, const store_filter *f, int limit, const char *after, store_row *rows, char *next,
                   ap_error *err)
{
    sq *s = (sq *)base;
    store_list_args a;
    int rc = store__list_args(f, after, &a, err);
    if (rc < 0)
        return rc;
    unsigned mask = 0;
    if (f->status)
        mask |= LF_STATUS;
    if (f->kind)
        mask |= LF_KIND;
    if (f->client_label && f->client_label[0])
        mask |= LF_CLIENT;
    if (a.lo_len)
        mask |= LF_MODULE;
    if (f->created_after_us)
        mask |= LF_AFTER;
    ap_buf pat;
    ap_buf_init(&pat);
    if (a.text) {
        /* One FTS5 string: a substring of a column (trigrams in a row). */
        ap_buf_putc(&pat, '"');
        for (const char *c = f->text; *c; c++) {
            if (*c == '"')
                ap_buf_putc(&pat, '"');
            ap_buf_putc(&pat, *c);
        }
        ap_buf_putc(&pat, '"');
        if (pat.oom) {
            ap_buf_free(&pat);
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        }
        sqlite3_stmt *cq = stmt(s, S_TEXT_COUNT);
        sqlite3_bind_text(cq, 1, pat.data, (int)pat.len, SQLITE_STATIC);
        sqlite3_bind_int(cq, 2, TEXT_RARE);
        int crc = sqlite3_step(cq);
        int matches = crc == SQLITE_ROW ? sqlite3_column_int(cq, 0) : 0;
        sqlite3_reset(cq);
        if (crc != SQLITE_ROW) {
            ap_buf_free(&pat);
            return db_error(s, err, stmt_text[S_TEXT_COUNT].what);
        }
        mask |= matches < TEXT_RARE ? LF_TEXT_RARE : LF_TEXT;
    }
    sqlite3_stmt *q = list_stmt(s, mask, a.sort, a.asc, err);
    if (!q) {
        ap_buf_free(&pat);
        return err ? err->code : AP_EIO;
    }
    sqlite3_bind_int64(q, 1, a.t);
    sqlite3_bind_int64(q, 2, a.id);
    if (a.sort != STORE_SORT_CREATED) {
        if (store__sort_cols[a.sort].real)
            sqlite3_bind_double(q, 11, a.v_real);
        else
            sqlite3_bind_int64(q, 11, a.v_int);
    }
    if (mask & LF_STATUS)
        sqlite3_bind_int(q, 3, f->status);
    if (mask & LF_KIND)
        sqlite3_bind_int(q, 4, f->kind);
    if (mask & LF_CLIENT)
        sqlite3_bind_text(q, 5, f->client_label, -1, SQLITE_STATIC);
    if (mask & LF_MODULE) {
        sqlite3_bind_blob(q, 6, a.lo, a.lo_len, SQLITE_STATIC);
        sqlite3_bind_blob(q, 7, a.hi, a.hi_len, SQLITE_STATIC);
    }
    if (mask & LF_AFTER)
        sqlite3_bind_int64(q, 8, f->created_after_us);
    if (mask & (LF_TEXT | LF_TEXT_RARE))
        sqlite3_bind_text(q, 12, pat.data, (int)pat.len, SQLITE_STATIC);
    sqlite3_bind_int(q, 10, limit + 1); /* one more: is there a next page? */
    int n = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (n == limit) {
            store__list_cursor(a.sort, &rows[n - 1], next);
            break;
        }
        read_row(q, &rows[n++]);
    }
    sqlite3_reset(q);
    /* the statement keeps a pointer to the pattern until reset */
    ap_buf_free(&pat);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_error(s, err, "list");
    return n;
}

static int sq_history(store *base, int64_t id, store_point *pts, int max, ap_error *err)
{
    sq *s = (sq *)base;
    sqlite3_stmt *q = stmt(s, S_HISTORY);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int(q, 2, max);
    int rc, n = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && n < max) {
        pts[n].t_us = sqlite3_column_int64(q, 0);
        pts[n].episodes = sqlite3_column_int64(q, 1);
        pts[n].best_runtime_s = sqlite3_column_double(q, 2);
        pts[n].best_peak_memory = sqlite3_column_int64(q, 3);
        n++;
    }
    sqlite3_reset(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_error(s, err, stmt_text[S_HISTORY].what);
    return n;
}

static int sq_counts_get(store *base, store_counts *c, ap_error *err)
{
    sq *s = (sq *)base;
    memset(c, 0, sizeof *c);
    sqlite3_stmt *q = stmt(s, S_COUNTS);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int st = sqlite3_column_int(q, 0);
        uint64_t n = (uint64_t)sqlite3_column_int64(q, 1);
        if (st >= 0 && st < 6)
            c->by_status[st] += n;
        c->rows += n;
        c->cache_hits += (uint64_t)sqlite3_column_int64(q, 2);
    }
    sqlite3_reset(q);
    if (rc != SQLITE_DONE)
        return db_error(s, err, stmt_text[S_COUNTS].what);
    q = stmt(s, S_PAGES);
    if (sqlite3_step(q) == SQLITE_ROW)
        c->db_bytes = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    return 0;
}

/* ============================================================= retention */

static int live_bytes(sq *s, int64_t *out, ap_error *err)
{
    sqlite3_stmt *q = stmt(s, S_LIVE_BYTES);
    int rc = sqlite3_step(q);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
    sqlite3_reset(q);
    return rc == SQLITE_ROW ? 0 : db_error(s, err, stmt_text[S_LIVE_BYTES].what);
}

/* Deletes up to `limit` ended rows touched before `before`, oldest first
 * (their payloads and history go with them); *n: how many. */
static int delete_old(sq *s, int64_t before, int limit, int *n, ap_error *err)
{
    int rc;
    if ((rc = begin(s, err)) < 0)
        return rc;
    sqlite3_stmt *q = stmt(s, S_GC_OLD);
    sqlite3_bind_int64(q, 1, before);
    sqlite3_bind_int(q, 2, limit);
    if ((rc = exec_stmt(s, S_GC_OLD, q, err)) < 0) {
        rollback(s);
        return rc;
    }
    *n = sqlite3_changes(s->db);
    q = stmt(s, S_GC_ALIASES);
    sqlite3_bind_int64(q, 1, before);
    if ((rc = exec_stmt(s, S_GC_ALIASES, q, err)) < 0) {
        rollback(s);
        return rc;
    }
    return commit(s, err);
}

static int sq_gc(store *base, const store_gc_policy *p, int64_t now_us, store_gc_result *out, ap_error *err)
{
    sq *s = (sq *)base;
    int rc = 0, n;
    if ((rc = live_bytes(s, &out->bytes_before, err)) < 0)
        return rc;
    int batch = p->max_rows > 0 ? p->max_rows : INT32_MAX;
    int64_t protect = now_us - (p->protect_us > 0 ? p->protect_us : 0);
    /* by age */
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
    /* by size: the least recently used first, as many rows at a time as
     * the bytes the rows deleted so far say are needed (at most 500) */
    if (p->max_bytes > 0) {
        int64_t live = out->bytes_before;
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
    /* the freed pages back to the file system (an auto_vacuum store) */
    if (out->rows && (rc = exec_sql(s, "PRAGMA incremental_vacuum", "give free pages back", err)) < 0)
        return rc;
    return live_bytes(s, &out->bytes_after, err);
}

static int sq_vacuum(store *base, ap_error *err)
{
    sq *s = (sq *)base;
    int rc = exec_sql(s, "PRAGMA auto_vacuum = INCREMENTAL", "set auto_vacuum", err);
    return rc < 0 ? rc : exec_sql(s, "VACUUM", "vacuum", err);
}

static const store_ops sq_ops = {
    .name = "sqlite",
    .close = sq_close,
    .check = sq_check,
    .begin = sq_begin,
    .find_live = sq_find_live,
    .get = sq_get,
    .payload = sq_payload,
    .start = sq_start,
    .set_progress = sq_set_progress,
    .finish = sq_finish,
    .add_hits = sq_add_hits,
    .watch = sq_watch,
    .gc = sq_gc,
    .vacuum = sq_vacuum,
    .heartbeat = sq_heartbeat,
    .claim_orphans = sq_claim_orphans,
    .take = sq_take,
    .release_all = sq_release_all,
    .release = sq_release,
    .request_cancel = sq_request_cancel,
    .cancel_requests = sq_cancel_requests,
    .alias_get = sq_alias_get,
    .alias_put = sq_alias_put,
    .list = sq_list,
    .history = sq_history,
    .best_schedule = sq_best_schedule,
    .counts_get = sq_counts_get,
};
