/*
 * cache.c - answers autopartd gives again and again, kept packed in
 * memory: the hash of a request as written -> the bytes a cache hit sends
 * (for Apply the whole ApplyResponse; for Search the accepted event and the
 * result event).  A hit then costs a hash and a lookup: no parsing, no
 * store read, no copy per call (the bytes are shared with gRPC).  Only
 * answers of done rows go in, and a done row never changes, so an entry
 * never goes stale.  Least recently used entries go first beyond the size
 * limit.  The loop's alone.
 */
#include <string.h>

#include "srv.h"

typedef struct entry {
    struct entry *hnext;       /* hash chain */
    struct entry *prev, *next; /* LRU: head most recent */
    int method;
    uint8_t raw[STORE_KEY_BYTES];
    srv_cached c;
    size_t bytes;
} entry;

struct srv_cache {
    entry **table;
    size_t n_buckets, count, bytes, max_bytes;
    entry *head, *tail;
    uint64_t hits, misses;
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

static void drop(srv_cache *c, entry *e)
{
    entry **p = &c->table[bucket(c, e->method, e->raw)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    unlink_lru(c, e);
    c->count--;
    c->bytes -= e->bytes;
    rpc_shared_unref(e->c.first);
    rpc_shared_unref(e->c.last);
    ap_free(e);
}

const srv_cached *srv_cache_get(srv_cache *c, int method, const uint8_t *raw)
{
    if (!c)
        return NULL;
    for (entry *e = c->table[bucket(c, method, raw)]; e; e = e->hnext)
        if (e->method == method && !memcmp(e->raw, raw, STORE_KEY_BYTES)) {
            unlink_lru(c, e);
            push_front(c, e);
            c->hits++;
            return &e->c;
        }
    c->misses++;
    return NULL;
}

void srv_cache_put(srv_cache *c, int method, const uint8_t *raw, int64_t row_id, rpc_shared *first, rpc_shared *last)
{
    if (!c || !last)
        return;
    for (entry *e = c->table[bucket(c, method, raw)]; e; e = e->hnext)
        if (e->method == method && !memcmp(e->raw, raw, STORE_KEY_BYTES))
            return; /* already there: the same bytes */
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
    if (first)
        rpc_shared_ref(first);
    rpc_shared_ref(last);
    e->bytes = bytes;
    size_t b = bucket(c, method, raw);
    e->hnext = c->table[b];
    c->table[b] = e;
    push_front(c, e);
    c->count++;
    c->bytes += bytes;
    while (c->bytes > c->max_bytes && c->tail)
        drop(c, c->tail);
}

void srv_cache_stats(const srv_cache *c, size_t *count, size_t *bytes)
{
    *count = c ? c->count : 0;
    *bytes = c ? c->bytes : 0;
}

void srv_cache_free(srv_cache *c)
{
    if (!c)
        return;
    while (c->head)
        drop(c, c->head);
    ap_free(c->table);
    ap_free(c);
}
