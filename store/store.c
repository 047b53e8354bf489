/*
 * store.c - autopartd's store behind one interface: the backend is chosen
 * by the address (a PostgreSQL connection string, or else an SQLite file),
 * and every operation of store.h goes to it.  Also what the backends share:
 * owners, the listing's cursors and bounds, hex.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

const char *store_status_name(int status)
{
    static const char *const names[] = {"unspecified", "queued", "running", "done", "failed", "cancelled"};
    return status >= 0 && status <= 5 ? names[status] : "unknown";
}

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

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs an operation, telling the observer how long it took and whether
 * the store failed it (a conflict or a bad argument is an answer, not a
 * failure). */
#define OBSERVED(s, call)                                                                                          \
    do {                                                                                                           \
        double t0_ = (s)->observe ? mono_s() : 0;                                                                  \
        int rc_ = (call);                                                                                          \
        if ((s)->observe)                                                                                          \
            (s)->observe((s)->observe_ud, mono_s() - t0_,                                                          \
                         rc_ < 0 && rc_ != AP_ECONFLICT && rc_ != AP_EINVALID && rc_ != AP_ENOTFOUND);               \
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

/* ================================================================ owners */

bool store__owner_dead(const char *self, const char *owner)
{
    const char *c1 = strchr(owner, ':'), *s1 = strchr(self, ':');
    if (!c1 || !s1 || c1 - owner != s1 - self || strncmp(owner, self, (size_t)(c1 - owner)) != 0)
        return false; /* another host: only its lease tells */
    char *end;
    long pid = strtol(c1 + 1, &end, 10);
    if (end == c1 + 1 || *end != ':' || pid <= 0)
        return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

bool store_owner_dead(const char *owner)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 2) != 0)
        return false;
    strcat(host, ":");
    return store__owner_dead(host, owner);
}

/* ============================================================== listings */

const store_sort_col store__sort_cols[STORE_SORT__COUNT] = {
    [STORE_SORT_RUNTIME] = {"best_runtime_s", "best_runtime_s > 0", true},
    [STORE_SORT_MEMORY] = {"best_peak_memory", "best_peak_memory > 0", false},
    [STORE_SORT_EPISODES] = {"episodes", NULL, false},
    [STORE_SORT_DURATION] = {"(finished_us - started_us)", "finished_us > 0 AND started_us > 0", false},
};

/* A cursor "T.ID" (newest first) or "V~ID" (the other orders: V the sort
 * key, a real for runtime). */
static int parse_cursor(const char *after, store_list_args *a, ap_error *err)
{
    char *end;
    errno = 0;
    if (a->sort == STORE_SORT_CREATED) {
        a->t = strtoll(after, &end, 10);
        if (errno || *end != '.' || a->t < 0)
            goto bad;
    } else if (store__sort_cols[a->sort].real) {
        a->v_real = strtod(after, &end);
        if (errno || *end != '~' || end == after || a->v_real != a->v_real)
            goto bad;
    } else {
        a->v_int = strtoll(after, &end, 10);
        if (errno || *end != '~' || end == after)
            goto bad;
    }
    const char *p = end + 1;
    a->id = strtoll(p, &end, 10);
    if (errno || *end || end == p || a->id < 0)
        goto bad;
    return 0;
bad:
    return ap_error_set(err, AP_EINVALID, "malformed page token '%.40s'", after);
}

int store__list_args(const store_filter *f, const char *after, store_list_args *a, ap_error *err)
{
    memset(a, 0, sizeof *a);
    a->sort = f->sort;
    a->asc = a->sort != STORE_SORT_CREATED && f->ascending;
    a->t = INT64_MAX;
    a->id = a->asc ? -1 : INT64_MAX;
    a->v_int = a->asc ? INT64_MIN : INT64_MAX;
    a->v_real = a->asc ? -1e308 : 1e308;
    if (a->sort < 0 || a->sort >= STORE_SORT__COUNT)
        return ap_error_set(err, AP_EINVALID, "unknown listing order %d", a->sort);
    if (after && after[0]) {
        int rc = parse_cursor(after, a, err);
        if (rc < 0)
            return rc;
        if (a->sort != STORE_SORT_CREATED)
            a->t = INT64_MAX;
    }
    if (f->text && f->text[0]) {
        if (strlen(f->text) < 3)
            return ap_error_set(err, AP_EINVALID, "free text '%s': at least 3 characters", f->text);
        a->text = true;
    }
    /* `created before T` is the cursor (T, 0): one upper bound on the
     * index, not two for the planner to choose between.  The other orders
     * bound created_us apart. */
    if (f->created_before_us > 0 && f->created_before_us <= a->t) {
        a->t = f->created_before_us;
        if (a->sort == STORE_SORT_CREATED)
            a->id = 0;
    }
    if (f->module_hash && f->module_hash_len > 0) {
        /* [prefix, prefix + 1): the prefix incremented as a big number;
         * all-0xff prefixes have no upper bound below 0xff..ff + 1 byte. */
        int n = f->module_hash_len > STORE_KEY_BYTES ? STORE_KEY_BYTES : f->module_hash_len;
        memcpy(a->lo, f->module_hash, (size_t)n);
        memcpy(a->hi, f->module_hash, (size_t)n);
        a->lo_len = a->hi_len = n;
        while (a->hi_len > 0 && a->hi[a->hi_len - 1] == 0xff)
            a->hi_len--;
        if (a->hi_len > 0) {
            a->hi[a->hi_len - 1]++;
        } else {
            memset(a->hi, 0xff, STORE_KEY_BYTES + 1);
            a->hi_len = STORE_KEY_BYTES + 1;
        }
    }
    return 0;
}

void store__list_cursor(int sort, const store_row *r, char *next)
{
    switch (sort) {
    case STORE_SORT_CREATED: snprintf(next, 48, "%" PRId64 ".%" PRId64, r->created_us, r->id); break;
    case STORE_SORT_RUNTIME: snprintf(next, 48, "%.17g~%" PRId64, r->best_runtime_s, r->id); break;
    case STORE_SORT_MEMORY: snprintf(next, 48, "%" PRId64 "~%" PRId64, r->best_peak_memory, r->id); break;
    case STORE_SORT_EPISODES: snprintf(next, 48, "%" PRId64 "~%" PRId64, r->episodes, r->id); break;
    default: snprintf(next, 48, "%" PRId64 "~%" PRId64, r->finished_us - r->started_us, r->id); break;
    }
}

/* ================================================================== hex */

void store_hex(const uint8_t *bytes, int n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int store_unhex(const char *hex, uint8_t *out, int max)
{
    size_t len = strlen(hex);
    if (len % 2 || len / 2 > (size_t)max)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return (int)(len / 2);
}
