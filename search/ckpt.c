/*
 * ckpt.c - a search's checkpoint: the outcome of every evaluation so far,
 * in the order the coordinator backed them up, after a header that says
 * which search it belongs to.
 *
 * Why outcomes and not the tree: the coordinator's selection and backup
 * are deterministic given the seed and the outcomes, so replaying the
 * outcomes through the same code rebuilds the very tree, rng and best the
 * interrupted run had, whatever fields the tree grows later; and the
 * replay costs selection and backup only (microseconds an episode), not
 * the evaluations (milliseconds).  A record is 33 bytes.
 *
 * Layout, little-endian: "APCK", u32 version, u64 seed, u32 batch, u32
 * units, u64 hash of the start state, f64 seconds searched, u64 episodes;
 * then records: u32 parent node, u32 decision, u8 status (0 evaluated, 1
 * refused, 2 unchanged; 0x10 set: the state holds the decision's twins),
 * u64 state hash, f64 runtime, i64 peak bytes.
 */
#include <string.h>

#include "search_int.h"

#define CK_VERSION 3 /* 2: the status byte carries search_outcome.implied; 3: state hashes are sums of
                            per-fact terms (ir_partition_hash), so version 2's hashes name no state */
#define CK_HEADER 48
#define CK_RECORD 33
#define IMPLIED 0x10 /* in a record's status byte */

static void put(uint8_t *p, const void *v, size_t n)
{
    /* the build's targets are little-endian (x86-64, aarch64) */
    memcpy(p, v, n);
}

static int grow(search_log *l, size_t need)
{
    if (l->len + need <= l->cap)
        return 0;
    size_t cap = l->cap ? l->cap : 4096;
    while (cap < l->len + need)
        cap *= 2;
    uint8_t *d = ap_realloc(l->data, cap);
    if (!d)
        return AP_ENOMEM;
    l->data = d;
    l->cap = cap;
    return 0;
}

int search__log_open(search_log *l, const void *resume, size_t resume_len, uint64_t seed, uint32_t batch,
                     uint32_t units, uint64_t root, double *elapsed)
{
    memset(l, 0, sizeof *l);
    *elapsed = 0;
    const uint8_t *r = resume;
    uint32_t v32;
    uint64_t v64;
    bool ok = r && resume_len >= CK_HEADER && (resume_len - CK_HEADER) % CK_RECORD == 0 && !memcmp(r, "APCK", 4);
    if (ok) {
        memcpy(&v32, r + 4, 4);
        ok = v32 == CK_VERSION;
        memcpy(&v64, r + 8, 8);
        ok = ok && v64 == seed;
        memcpy(&v32, r + 16, 4);
        ok = ok && v32 == batch;
        memcpy(&v32, r + 20, 4);
        ok = ok && v32 == units;
        memcpy(&v64, r + 24, 8);
        ok = ok && v64 == root;
    }
    /* another search's checkpoint (or none): start afresh */
    size_t n = ok ? resume_len : CK_HEADER;
    if (grow(l, n) < 0)
        return AP_ENOMEM;
    if (ok) {
        memcpy(l->data, r, n);
        memcpy(elapsed, r + 32, 8);
        if (!(*elapsed >= 0 && *elapsed < 1e9))
            *elapsed = 0;
    } else {
        memset(l->data, 0, CK_HEADER);
        memcpy(l->data, "APCK", 4);
        v32 = CK_VERSION;
        put(l->data + 4, &v32, 4);
        put(l->data + 8, &seed, 8);
        put(l->data + 16, &batch, 4);
        put(l->data + 20, &units, 4);
        put(l->data + 24, &root, 8);
    }
    l->len = n;
    l->pos = CK_HEADER;
    l->end = n;
    return 0;
}

void search__log_free(search_log *l)
{
    ap_free(l->data);
    memset(l, 0, sizeof *l);
}

bool search__log_peek(const search_log *l, uint32_t k, search_outcome *o)
{
    size_t at = l->pos + (size_t)k * CK_RECORD;
    if (at + CK_RECORD > l->end)
        return false;
    const uint8_t *p = l->data + at;
    uint8_t st;
    memcpy(&o->parent, p, 4);
    memcpy(&o->decision, p + 4, 4);
    memcpy(&st, p + 8, 1);
    memcpy(&o->hash, p + 9, 8);
    memcpy(&o->runtime_s, p + 17, 8);
    memcpy(&o->peak, p + 25, 8);
    o->status = st & ~IMPLIED;
    o->implied = (st & IMPLIED) != 0;
    return (st & ~IMPLIED) <= 2;
}

void search__log_take(search_log *l, uint32_t n)
{
    l->pos += (size_t)n * CK_RECORD;
    l->replayed += n;
}

void search__log_cut(search_log *l)
{
    l->len = l->end = l->pos;
}

int search__log_add(search_log *l, const search_outcome *o)
{
    if (l->pos != l->len) /* still replaying: the record is there */
        return 0;
    if (o->status < 0 || o->status > 2)
        return AP_EINVALID;
    if (grow(l, CK_RECORD) < 0)
        return AP_ENOMEM;
    uint8_t *p = l->data + l->len;
    uint8_t st = (uint8_t)(o->status | (o->implied ? IMPLIED : 0));
    put(p, &o->parent, 4);
    put(p + 4, &o->decision, 4);
    put(p + 8, &st, 1);
    put(p + 9, &o->hash, 8);
    put(p + 17, &o->runtime_s, 8);
    put(p + 25, &o->peak, 8);
    l->len += CK_RECORD;
    l->pos = l->end = l->len;
    return 0;
}

void search__log_stamp(search_log *l, double elapsed, int64_t episodes)
{
    uint64_t e = (uint64_t)episodes;
    put(l->data + 32, &elapsed, 8);
    put(l->data + 40, &e, 8);
}
