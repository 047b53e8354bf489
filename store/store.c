/*
 * store.c - autopartd's store behind one interface: the backend is chosen
 * by the address (a PostgreSQL connection string, or else an SQLite file),
 * and every operation of store.h goes to it, timed for the observer.  What
 * the backends share is core.c's: store.c depends on the backends, they on
 * the core.
 */
#include <stdio.h>
#include <string.h>

#include "store_int.h"

/* ================================================================ choose */

bool store_is_postgres(const char *address)
{
    if (!strncmp(address, "postgresql://", 13) || !strncmp(address, "postgres://", 11))
        return true;
    /* libpq's keyword=value form: "host=db1 dbname=autopart user=..." */
    static const char *const keys[] = {"host=", "hostaddr=", "dbname=", "service=", "user=", "port="};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *p = strstr(address, keys[i]);
        if (p && (p == address || p[-1] == ' '))
            return true;
    }
    return false;
}

int store_open(const char *address, const char *owner, int busy_ms, store **out, ap_error *err)
{
    *out = NULL;
    int rc = store_is_postgres(address) ? store__pg_open(address, busy_ms, out, err)
                                        : store__sqlite_open(address, busy_ms, out, err);
    if (rc < 0)
        return rc;
    snprintf((*out)->owner, sizeof (*out)->owner, "%s", owner ? owner : "");
    return 0;
}

void store_close(store *s)
{
    if (s)
        s->ops->close(s);
}

const char *store_owner(const store *s)
{
    return s->owner;
}

const char *store_backend(const store *s)
{
    return s->ops->name;
}

void store_describe(const char *address, char *out, size_t size)
{
    if (store_is_postgres(address))
        store__pg_describe(address, out, size);
    else
        snprintf(out, size, "%s", address);
}

/* ============================================================== dispatch */

void store_observe(store *s, store_observer fn, void *ud)
{
    s->observe = fn;
    s->observe_ud = ud;
}

bool store_failure(int rc)
{
    return rc < 0 && rc != AP_ECONFLICT && rc != AP_EINVALID && rc != AP_ENOTFOUND;
}

/* Runs an operation, telling the observer how long it took and whether
 * the store failed it (a conflict or a bad argument is an answer, not a
 * failure). */

#define OBSERVED(s, call)                                                                                          \
    do {                                                                                                           \
        double t0_ = (s)->observe ? ap_mono_s() : 0;                                                               \
        int rc_ = (call);                                                                                          \
        if ((s)->observe)                                                                                          \
            (s)->observe((s)->observe_ud, ap_mono_s() - t0_, store_failure(rc_));                                   \
        return rc_;                                                                                                \
    } while (0)

int store_check(store *s, bool full, ap_error *err)
{
    OBSERVED(s, s->ops->check(s, full, err));
}

int store_begin(store *s, const store_new *n, int64_t now_us, int64_t lease_until_us, store_row *row, bool *created,
                ap_error *err)
{
    OBSERVED(s, s->ops->begin(s, n, now_us, lease_until_us, row, created, err));
}

int store_find_live(store *s, const uint8_t *key, store_row *row, ap_error *err)
{
    OBSERVED(s, s->ops->find_live(s, key, row, err));
}

int store_get(store *s, int64_t id, store_row *row, ap_error *err)
{
    OBSERVED(s, s->ops->get(s, id, row, err));
}

int store_payload(store *s, int64_t id, int which, void **data, size_t *len, ap_error *err)
{
    OBSERVED(s, s->ops->payload(s, id, which, data, len, err));
}

int store_start(store *s, int64_t id, int64_t now_us, ap_error *err)
{
    OBSERVED(s, s->ops->start(s, id, now_us, err));
}

int store_set_progress(store *s, int64_t id, int64_t now_us, const store_progress *p, bool point, const void *ckpt,
                       size_t ckpt_len, ap_error *err)
{
    OBSERVED(s, s->ops->set_progress(s, id, now_us, p, point, ckpt, ckpt_len, err));
}

int store_finish(store *s, int64_t id, int status, int64_t now_us, const void *result, size_t result_len,
                 const store_progress *summary, const char *error, ap_error *err)
{
    OBSERVED(s, s->ops->finish(s, id, status, now_us, result, result_len, summary, error, err));
}

int store_add_hits(store *s, const int64_t *ids, const uint64_t *n, int count, int64_t now_us, ap_error *err)
{
    if (!count)
        return 0;
    OBSERVED(s, s->ops->add_hits(s, ids, n, count, now_us, err));
}

int store_watch(store *s, const int64_t *ids, int count, int64_t until_us, ap_error *err)
{
    if (!count)
        return 0;
    OBSERVED(s, s->ops->watch(s, ids, count, until_us, err));
}

int store_heartbeat(store *s, int64_t lease_until_us, ap_error *err)
{
    OBSERVED(s, s->ops->heartbeat(s, lease_until_us, err));
}

int store_claim_orphans(store *s, int kind, int64_t now_us, int64_t lease_until_us, bool queued_too,
                        store_claim *out, int max, ap_error *err)
{
    if (max <= 0)
        return 0;
    OBSERVED(s, s->ops->claim_orphans(s, kind, now_us, lease_until_us, queued_too, out, max, err));
}

int store_claim_one(store *s, int64_t id, int64_t lease_until_us, ap_error *err)
{
    OBSERVED(s, s->ops->take(s, id, lease_until_us, err));
}

int store_release_all(store *s, ap_error *err)
{
    OBSERVED(s, s->ops->release_all(s, err));
}

int store_release(store *s, int64_t id, ap_error *err)
{
    OBSERVED(s, s->ops->release(s, id, err));
}

int store_request_cancel(store *s, int64_t id, int64_t now_us, int *status, ap_error *err)
{
    OBSERVED(s, s->ops->request_cancel(s, id, now_us, status, err));
}

int store_cancel_requests(store *s, int64_t *ids, int max, ap_error *err)
{
    OBSERVED(s, s->ops->cancel_requests(s, ids, max, err));
}

int store_alias_get(store *s, const uint8_t *raw, uint8_t *key, ap_error *err)
{
    OBSERVED(s, s->ops->alias_get(s, raw, key, err));
}

int store_alias_put(store *s, const uint8_t *raw, const uint8_t *key, int64_t now_us, ap_error *err)
{
    OBSERVED(s, s->ops->alias_put(s, raw, key, now_us, err));
}

int store_list(store *s, const store_filter *f, int limit, const char *after, store_row *rows, char *next,
               ap_error *err)
{
    next[0] = '\0';
    OBSERVED(s, s->ops->list(s, f, limit, after, rows, next, err));
}

int store_history(store *s, int64_t id, store_point *pts, int max, ap_error *err)
{
    OBSERVED(s, s->ops->history(s, id, pts, max, err));
}

int store_best_schedule(store *s, int64_t id, char **text, ap_error *err)
{
    *text = NULL;
    OBSERVED(s, s->ops->best_schedule(s, id, text, err));
}

int store_counts_get(store *s, store_counts *c, ap_error *err)
{
    memset(c, 0, sizeof *c);
    OBSERVED(s, s->ops->counts_get(s, c, err));
}

int store_gc(store *s, const store_gc_policy *p, int64_t now_us, store_gc_result *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    return s->ops->gc(s, p, now_us, out, err);
}

int store_vacuum(store *s, ap_error *err)
{
    return s->ops->vacuum(s, err);
}
