/*
 * ap.c - errors, the replaceable allocator, arenas, string buffers, hashing
 * and file reading shared by every autopart library.
 */
#include "ap.h"

#include <jansson.h>

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ================================================================ errors */

const char *ap_strerror(int code)
{
    switch (code) {
    case AP_OK:
        return "success";
#define AP_ERRNO_CASE(name, val, msg) \
    case val:                         \
        return msg;
        AP_ERRNO_MAP(AP_ERRNO_CASE)
#undef AP_ERRNO_CASE
    default:
        return "unknown error";
    }
}

void ap_error_clear(ap_error *err)
{
    if (!err)
        return;
    err->code = 0;
    err->file[0] = '\0';
    err->line = err->col = 0;
    err->msg[0] = '\0';
}

int ap_error_setv(ap_error *err, int code, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    err->file[0] = '\0';
    err->line = err->col = 0;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

int ap_error_set(ap_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ap_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int ap_error_at(ap_error *err, int code, const char *file, int line, int col,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ap_error_setv(err, code, fmt, ap);
    va_end(ap);
    if (err) {
        snprintf(err->file, sizeof err->file, "%s", file ? file : "");
        err->line = line;
        err->col = col;
    }
    return code;
}

void ap_error_format(const ap_error *err, char *buf, size_t size)
{
    const char *msg = err->msg[0] ? err->msg : ap_strerror(err->code);
    if (err->line > 0)
        snprintf(buf, size, "%s:%d:%d: error: %s", err->file[0] ? err->file : "<input>",
                 err->line, err->col, msg);
    else if (err->file[0])
        snprintf(buf, size, "%s: error: %s", err->file, msg);
    else
        snprintf(buf, size, "error: %s", msg);
}

const char *ap_grpc_code_name(int code)
{
    switch (code) {
#define AP_GRPC_NAME(name, val) \
    case val: return #name;
        AP_GRPC_CODES(AP_GRPC_NAME)
#undef AP_GRPC_NAME
    default: return "UNKNOWN";
    }
}

const char *ap_format_bytes(double bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = bytes < 0 ? -bytes : bytes;
    size_t u = 0;
    while (v >= 1024 && u + 1 < AP_ARRAY_LEN(units)) {
        v /= 1024;
        u++;
    }
    if (bytes < 0)
        v = -v;
    snprintf(buf, size, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return buf;
}

void ap_buf_put_places(ap_buf *b, const uint32_t *lines, const uint32_t *cols, size_t n)
{
    size_t m = 0, first = 0, last = 0, second = 0;
    for (size_t i = 0; i < n; i++) {
        if (!lines[i])
            continue;
        if (m == 0)
            first = i;
        else if (m == 1)
            second = i;
        last = i;
        m++;
    }
    if (m <= 4) {
        const char *sep = "";
        for (size_t i = 0; i < n; i++)
            if (lines[i]) {
                ap_buf_printf(b, "%s%u:%u", sep, lines[i], cols[i]);
                sep = ", ";
            }
        return;
    }
    ap_buf_printf(b, "%u:%u, %u:%u, ... %u:%u", lines[first], cols[first], lines[second], cols[second], lines[last],
                  cols[last]);
    /* one stride from each to the next: the same op in each layer */
    int64_t stride = (int64_t)lines[second] - lines[first];
    uint32_t prev = 0;
    bool even = stride > 0;
    for (size_t i = 0; i < n && even; i++) {
        if (!lines[i])
            continue;
        even = cols[i] == cols[first] && (!prev || (int64_t)lines[i] - prev == stride);
        prev = lines[i];
    }
    if (even)
        ap_buf_printf(b, " (every %lld lines)", (long long)stride);
}

/* ============================================================= allocator */

static ap_allocator allocator = {malloc, realloc, free};

void ap_set_allocator(const ap_allocator *a)
{
    if (a)
        allocator = *a;
    else
        allocator = (ap_allocator){malloc, realloc, free};
    /* jansson's objects and json_dumps' text too (free them with ap_free) */
    json_set_alloc_funcs(ap_malloc, ap_free);
}

void *ap_malloc(size_t n) { return allocator.malloc_fn(n ? n : 1); }

void *ap_calloc(size_t count, size_t n)
{
    size_t total;
    if (ap_mul_overflow(count, n, &total))
        return NULL;
    void *p = ap_malloc(total);
    if (p)
        memset(p, 0, total);
    return p;
}

void *ap_realloc(void *p, size_t n) { return allocator.realloc_fn(p, n ? n : 1); }

void ap_free(void *p)
{
    if (p)
        allocator.free_fn(p);
}

void ap_malloc_one_arena(void)
{
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    mallopt(M_ARENA_MAX, 1);
#endif
}

static char *dup_n(const char *s, size_t n)
{
    char *d = ap_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *ap_strdup(const char *s) { return dup_n(s, strlen(s)); }

/* ================================================================= arena */

struct ap_arena_chunk {
    ap_arena_chunk *next;
    size_t size;
    /* payload follows, 16-byte aligned */
};

#define AP_ARENA_ALIGN 8
#define AP_CHUNK_HDR ((sizeof(ap_arena_chunk) + AP_ARENA_ALIGN - 1) & ~(size_t)(AP_ARENA_ALIGN - 1))
#define AP_CHUNK_MAX ((size_t)16 << 20)

void ap_arena_init(ap_arena *a, size_t first_chunk)
{
    a->head = NULL;
    a->cur = a->end = NULL;
    a->chunk_size = first_chunk ? first_chunk : 64 * 1024;
    a->total = 0;
}

static void *arena_new_chunk(ap_arena *a, size_t n)
{
    /* Big requests get a chunk of their own, placed after the head so the
     * current bump region stays usable. */
    bool dedicated = n > a->chunk_size / 4;
    size_t payload = dedicated ? n : a->chunk_size;
    ap_arena_chunk *c = ap_malloc(AP_CHUNK_HDR + payload);
    if (!c)
        return NULL;
    c->size = payload;
    a->total += AP_CHUNK_HDR + payload;
    char *mem = (char *)c + AP_CHUNK_HDR;
    if (dedicated && a->head) {
        c->next = a->head->next;
        a->head->next = c;
        return mem;
    }
    c->next = a->head;
    a->head = c;
    a->cur = mem + n;
    a->end = mem + payload;
    if (!dedicated && a->chunk_size < AP_CHUNK_MAX)
        a->chunk_size *= 2;
    return mem;
}

void *ap_arena_alloc(ap_arena *a, size_t n)
{
    n = (n + AP_ARENA_ALIGN - 1) & ~(size_t)(AP_ARENA_ALIGN - 1);
    if (n == 0)
        n = AP_ARENA_ALIGN;
    if ((size_t)(a->end - a->cur) >= n) {
        void *p = a->cur;
        a->cur += n;
        return p;
    }
    return arena_new_chunk(a, n);
}

void *ap_arena_zalloc(ap_arena *a, size_t n)
{
    void *p = ap_arena_alloc(a, n);
    if (p)
        memset(p, 0, n);
    return p;
}

char *ap_arena_strndup(ap_arena *a, const char *s, size_t n)
{
    char *d = ap_arena_alloc(a, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void *ap_arena_memdup(ap_arena *a, const void *p, size_t n)
{
    void *d = ap_arena_alloc(a, n);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

void ap_arena_free(ap_arena *a)
{
    ap_arena_chunk *c = a->head;
    while (c) {
        ap_arena_chunk *next = c->next;
        ap_free(c);
        c = next;
    }
    a->head = NULL;
    a->cur = a->end = NULL;
    a->total = 0;
}

/* ========================================================= string buffer */

void ap_buf_init(ap_buf *b) { memset(b, 0, sizeof *b); }

void ap_buf_free(ap_buf *b)
{
    ap_free(b->data);
    memset(b, 0, sizeof *b);
}

void ap_buf_reset(ap_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

bool ap_buf_reserve(ap_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *d = ap_realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void ap_buf_put(ap_buf *b, const void *p, size_t n)
{
    if (!ap_buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ap_buf_puts(ap_buf *b, const char *s) { ap_buf_put(b, s, strlen(s)); }

void ap_buf_putc(ap_buf *b, char c)
{
    if (b->len + 2 <= b->cap) {
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
        return;
    }
    ap_buf_put(b, &c, 1);
}

static void buf_vprintf(ap_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof small) {
        ap_buf_put(b, small, (size_t)n);
    } else if (ap_buf_reserve(b, (size_t)n)) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void ap_buf_printf(ap_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *ap_buf_take(ap_buf *b, size_t *len)
{
    char *d = b->data;
    if (!d && !b->oom)
        d = dup_n("", 0);
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    if (b->oom) {
        ap_free(d);
        b->oom = false;
        return NULL;
    }
    return d;
}

/* =============================================================== hashing */

uint64_t ap_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    /* 8 bytes at a time with a multiply-xorshift mix: short keys (SSA names,
     * op names) dominate, so keep the loop simple. */
    const unsigned char *s = p;
    uint64_t h = seed ^ (0xcbf29ce484222325ULL + n * 0x100000001b3ULL);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0x9fb21c651e98df25ULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < n; i++)
        tail |= (uint64_t)s[i] << (8 * i);
    h = (h ^ tail) * 0x9fb21c651e98df25ULL;
    h ^= h >> 32;
    return h;
}

/* ================================================================= files */

int ap_read_file(const char *path, char **data, size_t *len, ap_error *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    ap_buf b;
    ap_buf_init(&b);
    if (!f)
        return ap_error_set(err, AP_EIO, "%s: %s", path, strerror(errno));
    for (;;) {
        if (!ap_buf_reserve(&b, 1 << 16))
            break;
        size_t got = fread(b.data + b.len, 1, b.cap - b.len - 1, f);
        b.len += got;
        b.data[b.len] = '\0';
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    if (f != stdin)
        fclose(f);
    if (b.oom) {
        ap_buf_free(&b);
        return ap_error_set(err, AP_ENOMEM, "%s: out of memory reading file", path);
    }
    if (failed) {
        ap_buf_free(&b);
        return ap_error_set(err, AP_EIO, "%s: read error", path);
    }
    *data = ap_buf_take(&b, len);
    if (!*data)
        return ap_error_set(err, AP_ENOMEM, "%s: out of memory", path);
    return 0;
}

/* ================================================================ clocks */

int64_t ap_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double ap_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
