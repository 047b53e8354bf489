/*
 * store_int.h - private to store/: the interface a backend implements
 * (sqlite.c, pg.c) and what the backends share (core.c: a row's columns,
 * the listing's cursor and bounds, the owner checks).  store.c dispatches
 * store.h's functions to the backend of a handle; each operation has the
 * meaning store.h gives it, for every backend, and test_store checks that
 * on both.
 */
#ifndef STORE_INT_H
#define STORE_INT_H

#include "store.h"

typedef struct store_ops {
    const char *name; /* "sqlite", "postgresql" */
    void (*close)(store *s);
    int (*check)(store *s, bool full, ap_error *err);
    int (*begin)(store *s, const store_new *n, int64_t now_us, int64_t lease_until_us, store_row *row, bool *created,
                 ap_error *err);
    int (*find_live)(store *s, const uint8_t *key, store_row *row, ap_error *err);
    int (*get)(store *s, int64_t id, store_row *row, ap_error *err);
    int (*payload)(store *s, int64_t id, int which, void **data, size_t *len, ap_error *err);
    int (*start)(store *s, int64_t id, int64_t now_us, ap_error *err);
    int (*set_progress)(store *s, int64_t id, int64_t now_us, const store_progress *p, bool point, const void *ckpt,
                        size_t ckpt_len, ap_error *err);
    int (*finish)(store *s, int64_t id, int status, int64_t now_us, const void *result, size_t result_len,
                  const store_progress *summary, const char *error, ap_error *err);
    int (*add_hits)(store *s, const int64_t *ids, const uint64_t *n, int count, int64_t now_us, ap_error *err);
    int (*watch)(store *s, const int64_t *ids, int count, int64_t until_us, ap_error *err);
    int (*heartbeat)(store *s, int64_t lease_until_us, ap_error *err);
    int (*claim_orphans)(store *s, int kind, int64_t now_us, int64_t lease_until_us, bool queued_too,
                         store_claim *out, int max, ap_error *err);
    int (*take)(store *s, int64_t id, int64_t lease_until_us, ap_error *err);
    int (*release_all)(store *s, ap_error *err);
    int (*release)(store *s, int64_t id, ap_error *err);
    int (*request_cancel)(store *s, int64_t id, int64_t now_us, int *status, ap_error *err);
    int (*cancel_requests)(store *s, int64_t *ids, int max, ap_error *err);
    int (*alias_get)(store *s, const uint8_t *raw, uint8_t *key, ap_error *err);
    int (*alias_put)(store *s, const uint8_t *raw, const uint8_t *key, int64_t now_us, ap_error *err);
    int (*list)(store *s, const store_filter *f, int limit, const char *after, store_row *rows, char *next,
                ap_error *err);
    int (*history)(store *s, int64_t id, store_point *pts, int max, ap_error *err);
    int (*best_schedule)(store *s, int64_t id, char **text, ap_error *err);
    int (*counts_get)(store *s, store_counts *c, ap_error *err);
    int (*gc)(store *s, const store_gc_policy *p, int64_t now_us, store_gc_result *out, ap_error *err);
    int (*vacuum)(store *s, ap_error *err);
} store_ops;

/* The first member of every backend's handle. */
struct store {
    const store_ops *ops;
    char owner[128];
    store_observer observe;
    void *observe_ud;
};

/* Each backend's open: *out gets a handle whose owner store.c fills in. */
int store__sqlite_open(const char *path, int busy_ms, store **out, ap_error *err);
int store__pg_open(const char *conninfo, int busy_ms, store **out, ap_error *err);
/* "postgresql://user@host:port/db" of a connection string: no password,
 * no other option. */
void store__pg_describe(const char *conninfo, char *out, size_t size);

/* The columns of a store_row, in the order store__read_row reads them
 * (the same SQL for both engines). */
#define STORE_ROW_COLS                                                                                       \
    "id, kind, status, key, module_hash, module_name, client_label, mesh, device, axes, created_us, "       \
    "started_us, finished_us, coalesce(owner, ''), lease_until_us, attempts, cancel_requested, progress_us, " \
    "episodes, best_runtime_s, best_peak_memory, error, cache_hits, touched_us, watched_until_us"

/* How a backend reads column `col` of its current result row (ctx): an
 * integer, a real, a text (NUL-terminated, cut to size) and the bytes of a
 * BLOB/BYTEA (zero-filled to size). */
typedef struct store_col_reader {
    int64_t (*i64)(void *ctx, int col);
    double (*f64)(void *ctx, int col);
    void (*text)(void *ctx, int col, char *dst, size_t size);
    void (*bytes)(void *ctx, int col, uint8_t *dst, size_t size);
} store_col_reader;

/* A row of STORE_ROW_COLS, whichever engine it came from. */
void store__read_row(const store_col_reader *rd, void *ctx, store_row *row);

/* Whether `owner` is a process of the host (node) named in `self` that is
 * gone: the same first field, a pid that no longer exists. */
bool store__owner_dead(const char *self, const char *owner);

/* The orders other than newest first: the sort key, and what a row needs
 * to have one (the partial indexes of migration 2, in both backends). */
typedef struct store_sort_col {
    const char *expr, *has;
    bool real;
} store_sort_col;
extern const store_sort_col store__sort_cols[STORE_SORT__COUNT];

/* A listing's bounds, from its filter and cursor, for either backend. */
typedef struct store_list_args {
    int sort;
    bool asc;
    /* the cursor: (created_us, id) < (t, id) newest first; else
     * (key, id) beyond (v_real or v_int, id), created_us < t */
    int64_t t, id, v_int;
    double v_real;
    /* module hash prefix as [lo, hi) */
    uint8_t lo[STORE_KEY_BYTES], hi[STORE_KEY_BYTES + 1];
    int lo_len, hi_len;
    bool text; /* f->text is a search (3 characters or more) */
} store_list_args;

/* Checks the order and the cursor and computes the bounds: AP_EINVALID for
 * an unknown order, a malformed cursor, a text of 1 or 2 characters. */
int store__list_args(const store_filter *f, const char *after, store_list_args *a, ap_error *err);
/* The cursor of the page after `last` (next: 48 bytes). */
void store__list_cursor(int sort, const store_row *last, char *next);

#endif /* STORE_INT_H */
