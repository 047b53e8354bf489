/*
 * core.c - what the store's backends (sqlite.c, pg.c) share, apart from the
 * engines: a row's columns and their decoding, owners, the listing's
 * cursors and bounds, status names and hex.  A leaf of store/: the backends
 * depend on it, and store.c (the dispatcher) on them.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

const char *store_status_name(int status)
{
    static const char *const names[] = {"unspecified", "queued", "running", "done", "failed", "cancelled"};
    return status >= 0 && status <= 5 ? names[status] : "unknown";
}

/* ================================================================== rows */

void store__read_row(const store_col_reader *rd, void *ctx, store_row *row)
{
    memset(row, 0, sizeof *row);
    row->id = rd->i64(ctx, 0);
    row->kind = (int)rd->i64(ctx, 1);
    row->status = (int)rd->i64(ctx, 2);
    rd->bytes(ctx, 3, row->key, sizeof row->key);
    rd->bytes(ctx, 4, row->module_hash, sizeof row->module_hash);
    rd->text(ctx, 5, row->module_name, sizeof row->module_name);
    rd->text(ctx, 6, row->client_label, sizeof row->client_label);
    rd->text(ctx, 7, row->mesh, sizeof row->mesh);
    rd->text(ctx, 8, row->device, sizeof row->device);
    rd->text(ctx, 9, row->axes, sizeof row->axes);
    row->created_us = rd->i64(ctx, 10);
    row->started_us = rd->i64(ctx, 11);
    row->finished_us = rd->i64(ctx, 12);
    rd->text(ctx, 13, row->owner, sizeof row->owner);
    row->lease_until_us = rd->i64(ctx, 14);
    row->attempts = (uint32_t)rd->i64(ctx, 15);
    row->cancel_requested = rd->i64(ctx, 16) != 0;
    row->progress_us = rd->i64(ctx, 17);
    row->episodes = rd->i64(ctx, 18);
    row->best_runtime_s = rd->f64(ctx, 19);
    row->best_peak_memory = rd->i64(ctx, 20);
    rd->text(ctx, 21, row->error, sizeof row->error);
    row->cache_hits = (uint64_t)rd->i64(ctx, 22);
    row->touched_us = rd->i64(ctx, 23);
    row->watched_until_us = rd->i64(ctx, 24);
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
