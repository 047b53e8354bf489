/*
 * store.h - autopartd's store: one row per search (and per Apply), kept in
 * SQLite (one file the daemons of a host share; the default) or in
 * PostgreSQL (a fleet of daemons on many hosts).  The backend is chosen by
 * the address given to store_open; every function below means the same
 * for both (test_store runs its cases against each).
 *
 * A row is found by its key (a SHA-256 of the canonical request, computed
 * by the daemon): at most one row per key is live (queued, running or
 * done); a failed or cancelled row stays for the record and a new request
 * with that key makes a new row.  The result of a done row is the packed
 * answer, served byte for byte to every later request with the key.
 *
 * Daemons coordinate through the rows themselves: the daemon running a row
 * is its `owner` and holds a lease it renews with a heartbeat.  A row whose
 * owner stopped renewing (a crash, kill -9), whose owner is a dead process
 * on this host, or that has no owner (queued for whichever daemon has room)
 * is claimed by a daemon with a free worker and run from its stored
 * request.  Every state change is one short explicit transaction;
 * statements are prepared once per connection and kept for its life.
 *
 * Queries for listings (newest first or by step time, memory, episodes or
 * duration; keyset paging; filters on status, client label, module hash,
 * kind and creation time; free text through a trigram index) use indexes
 * that keep a page under a millisecond or so with hundreds of thousands of
 * rows (a text matching half the rows: tens of ms), and a progress history
 * per search for plots.
 *
 * A store handle is one connection: use it from one thread at a time (open
 * one handle per thread that needs one).  Every function returns 0 or a
 * negative AP_E* code and fills err (AP_EIO for database errors, naming
 * the statement's purpose and the database's message, "store unavailable"
 * when the server cannot be reached -- the next call connects again;
 * AP_ELIMIT when the database stayed locked past the busy timeout).
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ap.h"

#define STORE_SCHEMA_VERSION 3
#define STORE_KEY_BYTES 32

/* The numbers are those of the wire's SearchStatus and RecordKind. */
typedef enum store_status {
    STORE_QUEUED = 1,
    STORE_RUNNING = 2,
    STORE_DONE = 3,
    STORE_FAILED = 4,
    STORE_CANCELLED = 5,
} store_status;

typedef enum store_kind { STORE_SEARCH = 1, STORE_APPLY = 2 } store_kind;

const char *store_status_name(int status); /* "queued", ... */

typedef struct store store;

/* Opens the store at `address`: a PostgreSQL connection string
 * ("postgresql://user@host/db", or libpq's "host=... dbname=..."; TLS and
 * passwords as libpq takes them: sslmode, PGPASSWORD, ~/.pgpass), or else
 * the path of an SQLite file (created when absent; WAL mode).  The schema
 * is migrated up to STORE_SCHEMA_VERSION; a lock held by another
 * connection is waited for busy_ms.  `owner` names this daemon in the rows
 * it runs (host:pid:nonce).  Fails with AP_EIO (cannot open or connect,
 * not a database, a schema newer than this program's), AP_EINVALID (a
 * connection string libpq cannot read).  Free with store_close. */
int store_open(const char *address, const char *owner, int busy_ms, store **out, ap_error *err);
void store_close(store *s);
const char *store_owner(const store *s);
/* Called after every operation on s, on the caller's thread, with its
 * time and whether the store failed it (unreachable, locked, I/O). */
typedef void (*store_observer)(void *ud, double seconds, bool failed);
/* Whether an operation's result rc says the store failed it (unreachable,
 * locked past the busy timeout, I/O), not that it answered (a conflict, not
 * found, a bad argument are answers). */
bool store_failure(int rc);
void store_observe(store *s, store_observer fn, void *ud);
/* "sqlite" or "postgresql". */
const char *store_backend(const store *s);
/* Whether an address names a PostgreSQL database. */
bool store_is_postgres(const char *address);
/* The address as it may be printed: a PostgreSQL connection string as
 * postgresql://user@host:port/db (never its password or other options). */
void store_describe(const char *address, char *out, size_t size);
/* SQLite: `PRAGMA quick_check` (full: integrity_check) says ok;
 * PostgreSQL: the database answers (it checks itself). */
int store_check(store *s, bool full, ap_error *err);

/* A row without its payloads.  Text fields are cut to their size. */
typedef struct store_row {
    int64_t id;
    int kind, status;
    uint8_t key[STORE_KEY_BYTES], module_hash[STORE_KEY_BYTES];
    char module_name[256], client_label[256], mesh[256], device[64], axes[256];
    char owner[128], error[512];
    int64_t created_us, started_us, finished_us, lease_until_us, progress_us;
    int64_t episodes, best_peak_memory;
    double best_runtime_s;
    uint64_t cache_hits;
    uint32_t attempts;
    bool cancel_requested;
    int64_t touched_us;       /* last made, ended or served from */
    int64_t watched_until_us; /* calls of another daemon wait on it until then */
} store_row;

/* What a new row says of its request. */
typedef struct store_new {
    int kind;
    const uint8_t *key, *module_hash; /* STORE_KEY_BYTES each */
    const char *module_name, *client_label, *mesh, *device, *axes;
    const void *request; /* the packed request, to run it again after a crash */
    size_t request_len;
} store_new;

/* In one transaction: the live row of the key, or else a new queued row
 * owned by this daemon with a lease until lease_until_us (which takes over
 * the checkpoint a cancelled row of the key left, if any).  *created says
 * which; *row is filled either way. */
int store_begin(store *s, const store_new *n, int64_t now_us, int64_t lease_until_us, store_row *row, bool *created,
                ap_error *err);
/* The live row of a key: 1 found (filled), 0 none. */
int store_find_live(store *s, const uint8_t *key, store_row *row, ap_error *err);
/* A row by id: 1 found, 0 none. */
int store_get(store *s, int64_t id, store_row *row, ap_error *err);

/* Payloads of a row: the request it was made from (until the row ends),
 * its result (done rows) and the search's checkpoint.  *data is a heap copy (ap_free), NULL with
 * *len 0 when absent.  Return 1 found, 0 no such row or no payload. */
enum { STORE_PAYLOAD_REQUEST, STORE_PAYLOAD_RESULT, STORE_PAYLOAD_CHECKPOINT };
int store_payload(store *s, int64_t id, int which, void **data, size_t *len, ap_error *err);

/* The owner starts running a row it holds: status running, attempts + 1 (not
 * again for a row it started already: a start tried again after the store
 * went away mid-answer is one run). */
int store_start(store *s, int64_t id, int64_t now_us, ap_error *err);
/* Best so far of a running row; a point of its history when `point`, and
 * its checkpoint when ckpt is not NULL. */
typedef struct store_progress {
    int64_t episodes, best_peak_memory;
    double best_runtime_s;
    const char *best_schedule; /* NULL: unchanged */
} store_progress;
int store_set_progress(store *s, int64_t id, int64_t now_us, const store_progress *p, bool point, const void *ckpt,
                       size_t ckpt_len, ap_error *err);
/* Ends a row owned by this daemon: DONE with its result bytes, or FAILED /
 * CANCELLED with a message (a cancelled row keeps its checkpoint, for a
 * later request of its key to resume from).  A done row's best columns
 * are set from `summary` (may be NULL). */
int store_finish(store *s, int64_t id, int status, int64_t now_us, const void *result, size_t result_len,
                 const store_progress *summary, const char *error, ap_error *err);
/* Adds n cache hits to each of rows ids[0..count-1] (n[i] each), in one
 * transaction; they were used at now_us. */
int store_add_hits(store *s, const int64_t *ids, const uint64_t *n, int count, int64_t now_us, ap_error *err);
/* Calls of this daemon wait on rows ids[0..count-1] that others run, until
 * until_us at least (renewed with the heartbeat). */
int store_watch(store *s, const int64_t *ids, int count, int64_t until_us, ap_error *err);

/* Renews the lease of every queued or running row this daemon owns. */
int store_heartbeat(store *s, int64_t lease_until_us, ap_error *err);
/* Whether `owner` (host:pid:nonce) is a process of this host that is gone. */
bool store_owner_dead(const char *owner);
/* A row claimed by store_claim_orphans. */
typedef struct store_claim {
    int64_t id;
    int kind;
    char prev_owner[128]; /* who had it: "" when nobody (given back at a clean shutdown) */
} store_claim;
/* Claims up to max rows of `kind` (0: any) that are queued or running but
 * whose owner's lease ran out before now_us or whose owner is a dead
 * process of this node (orphans), and with queued_too rows that have no
 * owner (queued for any daemon): they become this daemon's, queued, leased
 * until lease_until_us.  Rows another daemon is claiming at the same moment
 * are skipped, not waited for.  Fills out[] (oldest first); returns the
 * count (>= 0) or an error. */
int store_claim_orphans(store *s, int kind, int64_t now_us, int64_t lease_until_us, bool queued_too,
                        store_claim *out, int max, ap_error *err);
/* Claims one queued row that has no owner (released to whichever daemon
 * has room): it becomes this daemon's, leased until lease_until_us.
 * Returns 1 taken (or this daemon's already: queued, or running because
 * its start went through though its answer was lost with the connection,
 * the claim and start then being tried again), 0 when another daemon took
 * it first or it is no longer queued. */
int store_claim_one(store *s, int64_t id, int64_t lease_until_us, ap_error *err);
/* At a clean shutdown: every queued or running row of this daemon goes back
 * to queued without an owner, for the next daemon to take at once. */
int store_release_all(store *s, ap_error *err);
/* The same for one row this daemon holds but cannot run now. */
int store_release(store *s, int64_t id, ap_error *err);

/* Cancels row id: a queued row nobody runs is cancelled here and now; a
 * row queued or running in a daemon gets cancel_requested, which its owner
 * acts on.  *status is the row's status afterwards.  1 done, 0 no such row. */
int store_request_cancel(store *s, int64_t id, int64_t now_us, int *status, ap_error *err);
/* Rows this daemon owns whose cancellation was asked for (by another
 * daemon's CancelSearch).  Returns the count written to ids. */
int store_cancel_requests(store *s, int64_t *ids, int max, ap_error *err);

/* ---------------------------------------------------------------- aliases */

/* A hash of a request as written (raw module text) maps to the key of its
 * canonical form, so that asking again does not parse again.  1 found, 0
 * none. */
int store_alias_get(store *s, const uint8_t *raw, uint8_t *key, ap_error *err);
int store_alias_put(store *s, const uint8_t *raw, const uint8_t *key, int64_t now_us, ap_error *err);

/* --------------------------------------------------------------- listings */

typedef struct store_filter {
    int status;                /* 0: any */
    int kind;                  /* 0: any */
    const char *client_label;  /* NULL or "": any */
    const uint8_t *module_hash; /* a prefix of module_hash_len bytes; NULL: any */
    int module_hash_len;
    int64_t created_after_us, created_before_us; /* 0: unbounded */
    /* Free text (3 characters or more): rows whose module name, client
     * label, mesh, device or error contain it, in any case (a trigram
     * index).  NULL or "": any. */
    const char *text;
    int sort;       /* store_sort; 0: newest first */
    bool ascending; /* for sort != STORE_SORT_CREATED (created: always newest first) */
} store_filter;

/* Orders of a listing.  Runtime and memory leave out rows with no cost
 * yet; duration leaves out rows not finished. */
/* A page of the search list, over gRPC (ListSearches) and the dashboard's
 * HTTP (/api/searches): rows when none is asked for, and at most. */
#define STORE_LIST_PAGE 50
#define STORE_LIST_MAX 1000

typedef enum store_sort {
    STORE_SORT_CREATED = 0,
    STORE_SORT_RUNTIME,
    STORE_SORT_MEMORY,
    STORE_SORT_EPISODES,
    STORE_SORT_DURATION,
    STORE_SORT__COUNT
} store_sort;

/* A page of rows, newest first (creation time, then id), or in the order
 * f->sort names (then id).  `after` is the cursor of the previous page of
 * the same order (NULL or "" for the first); the next page's cursor is
 * written to next (size >= 48; "" after the last page).  rows holds at
 * least `limit` entries; returns the count, or AP_EINVALID for a malformed
 * cursor or an unknown order. */
int store_list(store *s, const store_filter *f, int limit, const char *after, store_row *rows, char *next,
               ap_error *err);

typedef struct store_point {
    int64_t t_us, episodes, best_peak_memory;
    double best_runtime_s;
} store_point;
/* The progress history of a row, oldest first: up to max points (the
 * latest when there are more).  Returns the count. */
int store_history(store *s, int64_t id, store_point *pts, int max, ap_error *err);
/* The best schedule so far of a row (heap, ap_free; NULL when none). */
int store_best_schedule(store *s, int64_t id, char **text, ap_error *err);

typedef struct store_counts {
    uint64_t rows, by_status[6], cache_hits;
    int64_t db_bytes;
} store_counts;
int store_counts_get(store *s, store_counts *c, ap_error *err);

/* ------------------------------------------------------------ retention */

typedef struct store_gc_policy {
    int64_t keep_us;   /* ended rows not used for this long go (0: no limit by age) */
    int64_t max_bytes; /* past this size, the least recently used ended rows go (0: none) */
    int64_t protect_us; /* rows used this recently stay whatever the size */
    int max_rows;      /* at most this many rows in one call (0: no limit) */
} store_gc_policy;

typedef struct store_gc_result {
    int rows;                       /* deleted (with their payloads and history) */
    int64_t bytes_before, bytes_after; /* pages in use */
} store_gc_result;

/* Retention: deletes ended rows (done, failed, cancelled; never queued or
 * running ones) by the policy, least recently used (made, ended, or served
 * from) first, in short transactions, with the aliases as old; then gives
 * the freed pages back to the file system when the store can (stores made
 * by this version can; store_vacuum converts older ones). */
int store_gc(store *s, const store_gc_policy *p, int64_t now_us, store_gc_result *out, ap_error *err);
/* VACUUM: rewrites the file at its live size (takes the write lock for as
 * long as it runs). */
int store_vacuum(store *s, ap_error *err);

/* Hex of n bytes into out (2n + 1 bytes). */
void store_hex(const uint8_t *bytes, int n, char *out);
/* Parses up to max bytes of hex (even length); returns the byte count, or -1. */
int store_unhex(const char *hex, uint8_t *out, int max);

#endif /* STORE_H */
