/*
 * cache.c - answers autopartd gives again and again, kept packed in
 * memory: the hash of a request as written -> the bytes a cache hit sends
 * (for Apply the whole ApplyResponse; for Search the accepted event and the
 * result event).  A hit then costs a hash and a lookup: no parsing, no
 * store read, no copy per call (the bytes are shared with gRPC).  Only
 * answers of done rows go in, and a done row never changes, so an entry
 * never goes stale.  Least recently used entries go first beyond the size
 * limit.
 *
 * The gRPC thread answers hits from here directly (no trip through the
 * loop); the loop adds entries and collects the hit counts for the store.
 * One mutex guards the table; the bytes are reference-counted, so a reply
 * goes out after the lock is let go.
 */
#include <string.h>

#include <uv.h>

#include "srv.h"

typedef struct cached {
    int64_t row_id;
    rpc_shared *first; /* Search: the accepted event; Apply: NULL */
    rpc_shared *last;  /* the answer (Apply) or the result event (Search) */
} cached;

typedef struct entry {
    struct entry *hnext;       /* hash chain */
    struct entry *prev, *next; /* LRU: head most recent */
    int method;
    uint8_t raw[STORE_KEY_BYTES];
    cached c;
    size_t bytes;
    uint64_t pending; /* hits not yet handed to the store */
} entry;

struct srv_cache {
    uv_mutex_t mu;
    entry **table;
    size_t n_buckets, count, bytes, max_bytes;
    entry *head, *tail;
    /* hits of entries evicted before their counts were collected */
    srv_hit *left;
    int n_left, cap_left;
};

srv_cache *srv_cache_new(size_t max_bytes)
{
    srv_cache *c = ap_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->n_buckets = 4096;
    c->table = ap_calloc(c->n_buckets, sizeof *c->table);
    if (!c->table) {
        ap_free(c);
        return NULL;
    }
    c->max_bytes = max_bytes;
    uv_mutex_init(&c->mu);
    return c;
}

static size_t bucket(const srv_cache *c, int method, const uint8_t *raw)
{
    uint64_t h;
    memcpy(&h, raw, sizeof h); /* a SHA-256: its bytes are as good as any hash */
    return (size_t)((h ^ (uint64_t)method) % c->n_buckets);
}

static void unlink_lru(srv_cache *c, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(srv_cache *c, entry *e)
{
    e->next = c->head;
    e->prev = NULL;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

/* Removes e (mu held), keeping its uncounted hits. */
static void drop(srv_cache *c, entry *e)
{
    entry **p = &c->table[bucket(c, e->method, e->raw)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    unlink_lru(c, e);
    c->count--;
    c->bytes -= e->bytes;
    if (e->pending) {
        if (c->n_left == c->cap_left) {
            int cap = c->cap_left ? c->cap_left * 2 : 16;
            srv_hit *h = ap_realloc(c->left, sizeof *h * (size_t)cap);
            if (h) {
                c->left = h;
                c->cap_left = cap;
            }
        }
        if (c->n_left < c->cap_left) /* else the counts are lost: statistics only */
            c->left[c->n_left++] = (srv_hit){e->c.row_id, e->pending};
    }
    rpc_shared_unref(e->c.first);
    rpc_shared_unref(e->c.last);
    ap_free(e);
}

/* A hit: fills *out with references the caller gives back
 * (rpc_shared_unref), and counts the hit for the store. */
static bool cache_get(srv_cache *c, int method, const uint8_t *raw, cached *out)
{
    if (!c)
        return false;
    uv_mutex_lock(&c->mu);
    for (entry *e = c->table[bucket(c, method, raw)]; e; e = e->hnext)
        if (e->method == method && !memcmp(e->raw, raw, STORE_KEY_BYTES)) {
            unlink_lru(c, e);
            push_front(c, e);
            e->pending++;
            *out = e->c;
            if (out->first)
                rpc_shared_ref(out->first);
            rpc_shared_ref(out->last);
            uv_mutex_unlock(&c->mu);
            return true;
        }
    uv_mutex_unlock(&c->mu);
    return false;
}

bool srv_cache_answer(srv *s, rpc_call *c, int method, const uint8_t *raw)
{
    cached hit;
    if (!cache_get(s->cache, method, raw, &hit))
        return false;
    atomic_fetch_add(&s->stats.cache_hits, 1);
    atomic_fetch_add(&s->metrics.hits_memory, 1);
    if (hit.first)
        rpc_send_shared(c, hit.first);
    rpc_finish_shared(c, RPC_OK, NULL, hit.last);
    rpc_shared_unref(hit.first);
    rpc_shared_unref(hit.last);
    return true;
}

void srv_cache_put(srv_cache *c, int method, const uint8_t *raw, int64_t row_id, rpc_shared *first, rpc_shared *last)
{
    if (!c || !last)
        return;
    size_t bytes = sizeof(entry) + rpc_shared_size(last) + (first ? rpc_shared_size(first) : 0);
    if (bytes > c->max_bytes)
        return;
    entry *e = ap_calloc(1, sizeof *e);
    if (!e)
        return;
    e->method = method;
    memcpy(e->raw, raw, STORE_KEY_BYTES);
    e->c.row_id = row_id;
    e->c.first = first;
    e->c.last = last;
    e->bytes = bytes;
    uv_mutex_lock(&c->mu);
    size_t b = bucket(c, method, raw);
    for (entry *x = c->table[b]; x; x = x->hnext)
        if (x->method == method && !memcmp(x->raw, raw, STORE_KEY_BYTES)) {
            uv_mutex_unlock(&c->mu); /* already there: the same bytes */
            ap_free(e);
            return;
        }
    if (first)
        rpc_shared_ref(first);
    rpc_shared_ref(last);
    e->hnext = c->table[b];
    c->table[b] = e;
    push_front(c, e);
    c->count++;
    c->bytes += bytes;
    while (c->bytes > c->max_bytes && c->tail)
        drop(c, c->tail);
    uv_mutex_unlock(&c->mu);
}

int srv_cache_take_hits(srv_cache *c, srv_hit **out)
{
    *out = NULL;
    if (!c)
        return 0;
    uv_mutex_lock(&c->mu);
    int n = c->n_left;
    for (entry *e = c->head; e; e = e->next)
        n += e->pending != 0;
    srv_hit *h = n ? ap_malloc(sizeof *h * (size_t)n) : NULL;
    if (h) {
        int k = 0;
        for (int i = 0; i < c->n_left; i++)
            h[k++] = c->left[i];
        c->n_left = 0;
        for (entry *e = c->head; e; e = e->next)
            if (e->pending) {
                h[k++] = (srv_hit){e->c.row_id, e->pending};
                e->pending = 0;
            }
        *out = h;
    } else {
        n = 0;
    }
    uv_mutex_unlock(&c->mu);
    return n;
}

void srv_cache_stats(srv_cache *c, size_t *count, size_t *bytes)
{
    *count = *bytes = 0;
    if (!c)
        return;
    uv_mutex_lock(&c->mu);
    *count = c->count;
    *bytes = c->bytes;
    uv_mutex_unlock(&c->mu);
}

void srv_cache_free(srv_cache *c)
{
    if (!c)
        return;
    while (c->head)
        drop(c, c->head);
    ap_free(c->left);
    ap_free(c->table);
    uv_mutex_destroy(&c->mu);
    ap_free(c);
}
