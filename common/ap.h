/*
 * ap.h - what every autopart library shares: the project-wide error list,
 * the replaceable allocator, arenas, growable string buffers, hashing,
 * clocks and whole-file reading.  Nothing here knows about IR or partitioning.
 */
#ifndef AP_H
#define AP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- errors */

/* Every function that can fail returns 0 or one of these negative codes and
 * fills an ap_error with the human detail.  Order is part of the ABI of the
 * wire (status codes are mapped from these), so append only. */
#define AP_ERRNO_MAP(X)                                                  \
    X(NOMEM, -1, "out of memory")                                        \
    X(IO, -2, "input/output error")                                      \
    X(SYNTAX, -3, "syntax error")                                        \
    X(TYPE, -4, "type error")                                            \
    X(UNDEFINED, -5, "undefined name")                                   \
    X(INVALID, -6, "invalid argument")                                   \
    X(UNSUPPORTED, -7, "unsupported")                                    \
    X(NOTFOUND, -8, "not found")                                         \
    X(CONFLICT, -9, "conflict")                                          \
    X(LIMIT, -10, "limit exceeded")                                      \
    X(INTERNAL, -11, "internal error")

typedef enum ap_errno {
    AP_OK = 0,
#define AP_ERRNO_ENUM(name, val, msg) AP_E##name = val,
    AP_ERRNO_MAP(AP_ERRNO_ENUM)
#undef AP_ERRNO_ENUM
} ap_errno;

/* Static description of an error code ("syntax error"). */
const char *ap_strerror(int code);

/* gRPC's status codes (the numbers are the protocol's), one table for the
 * daemon's (RPC_*) and the clients' (WIRE_*) names of them. */
#define AP_GRPC_CODES(X)                                                  \
    X(OK, 0)                                                              \
    X(CANCELLED, 1)                                                       \
    X(UNKNOWN, 2)                                                         \
    X(INVALID_ARGUMENT, 3)                                                \
    X(DEADLINE_EXCEEDED, 4)                                               \
    X(NOT_FOUND, 5)                                                       \
    X(ALREADY_EXISTS, 6)                                                  \
    X(PERMISSION_DENIED, 7)                                               \
    X(RESOURCE_EXHAUSTED, 8)                                              \
    X(FAILED_PRECONDITION, 9)                                             \
    X(ABORTED, 10)                                                        \
    X(OUT_OF_RANGE, 11)                                                   \
    X(UNIMPLEMENTED, 12)                                                  \
    X(INTERNAL, 13)                                                       \
    X(UNAVAILABLE, 14)                                                    \
    X(DATA_LOSS, 15)                                                      \
    X(UNAUTHENTICATED, 16)

/* "INVALID_ARGUMENT"; "UNKNOWN" for a number not in the table. */
const char *ap_grpc_code_name(int code);

/* The detail of a failure.  `line`/`col` are 1-based positions in `file`
 * when the error is about text, 0 otherwise. */
typedef struct ap_error {
    int code;
    char file[256]; /* empty when not about a file */
    int line, col;
    char msg[512];
} ap_error;

void ap_error_clear(ap_error *err);
/* Set code and message; returns `code` so callers can `return ap_error_set(..)`.
 * `err` may be NULL. */
int ap_error_set(ap_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ap_error_setv(ap_error *err, int code, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
int ap_error_at(ap_error *err, int code, const char *file, int line, int col,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* "FILE:LINE:COL: error: MESSAGE" (or "error: MESSAGE") into buf. */
void ap_error_format(const ap_error *err, char *buf, size_t size);

/* ------------------------------------------------------------- allocator */

/* All heap memory goes through these so tests can inject failures
 * (ap_set_allocator) and embedders can route memory elsewhere: ours, and
 * jansson's (so the text json_dumps returns is freed with ap_free).  Set
 * the allocator once, before any other call. */
typedef struct ap_allocator {
    void *(*malloc_fn)(size_t);
    void *(*realloc_fn)(void *, size_t);
    void (*free_fn)(void *);
} ap_allocator;

void ap_set_allocator(const ap_allocator *a); /* NULL restores libc */
void *ap_malloc(size_t n);
void *ap_calloc(size_t count, size_t n);
void *ap_realloc(void *p, size_t n);
void ap_free(void *p);
char *ap_strdup(const char *s);

/* Makes glibc's malloc keep one arena for every thread.  Call it first in
 * the main of a program that searches.  A search's worker threads end
 * with it, and the memory of their states and scorers sat in arenas of
 * their own, which glibc hands back to the kernel once all of it is free:
 * the next search faulted it in again (T32 from BP, 600 episodes, 2
 * threads: ~25,000 page faults a search and a tenth of a CPU second).  In
 * one arena the next search reuses it.  The search hardly allocates once
 * running, so the arena's lock is not contended.  Nothing elsewhere. */
void ap_malloc_one_arena(void);

/* ----------------------------------------------------------------- arena */

/* A bump allocator freed all at once: one per parsed module, one per request.
 * Allocations are 8-byte aligned.  Returns NULL when out of memory. */
typedef struct ap_arena_chunk ap_arena_chunk;
typedef struct ap_arena {
    ap_arena_chunk *head;
    char *cur, *end;
    size_t chunk_size; /* size of the next regular chunk */
    size_t total;      /* bytes obtained from the allocator */
} ap_arena;

void ap_arena_init(ap_arena *a, size_t first_chunk);
void *ap_arena_alloc(ap_arena *a, size_t n);
void *ap_arena_zalloc(ap_arena *a, size_t n);
char *ap_arena_strndup(ap_arena *a, const char *s, size_t n);
void *ap_arena_memdup(ap_arena *a, const void *p, size_t n);
void ap_arena_free(ap_arena *a);

/* Undoing the most recent allocations: ap_arena_rewind frees what was
 * allocated since the mark when that all fits in the current chunk, and
 * does nothing otherwise (the memory then lives until ap_arena_free). */
typedef struct ap_arena_mark {
    ap_arena_chunk *head;
    char *cur;
} ap_arena_mark;

static inline ap_arena_mark ap_arena_get_mark(const ap_arena *a)
{
    ap_arena_mark m = {a->head, a->cur};
    return m;
}

static inline void ap_arena_rewind(ap_arena *a, ap_arena_mark m)
{
    if (a->head == m.head && m.cur && m.cur <= a->cur)
        a->cur = m.cur;
}

/* --------------------------------------------------------- string buffer */

/* A growable byte buffer.  On allocation failure `oom` is set and further
 * appends are ignored, so callers check once at the end. */
typedef struct ap_buf {
    char *data; /* NUL-terminated when len > 0 */
    size_t len, cap;
    bool oom;
} ap_buf;

void ap_buf_init(ap_buf *b);
void ap_buf_free(ap_buf *b);
void ap_buf_reset(ap_buf *b);
bool ap_buf_reserve(ap_buf *b, size_t extra);
void ap_buf_put(ap_buf *b, const void *p, size_t n);
void ap_buf_puts(ap_buf *b, const char *s);
void ap_buf_putc(ap_buf *b, char c);
void ap_buf_printf(ap_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes to the caller (free with ap_free) and empties b. */
char *ap_buf_take(ap_buf *b, size_t *len);

/* A byte count for people, in the binary unit that fits: "812 B",
 * "52.43 KiB", "248.00 GiB".  Writes into buf (32 bytes suffice) and returns
 * it. */
const char *ap_format_bytes(double bytes, char *buf, size_t size);

/* Where the entries of a folded line are written, for people: up to four
 * places in full ("48:5, 128:5, 208:5"), more as the first two and the last
 * ("6054:5, 6252:5, ... 7638:5"), with " (every 198 lines)" when they repeat
 * at one stride, as a model's layers do.  Places with no line are left out. */
void ap_buf_put_places(ap_buf *b, const uint32_t *lines, const uint32_t *cols, size_t n);

/* --------------------------------------------------------------- hashing */

/* Fast non-cryptographic hash for in-memory tables (not for cache keys:
 * those use OpenSSL's EVP SHA-256). */
uint64_t ap_hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t ap_hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/* ----------------------------------------------------------------- clocks */

/* Microseconds since the epoch: the wall clock, for times that are stored
 * or shown (the store's rows). */
int64_t ap_now_us(void);
/* Seconds on the monotonic clock: for durations and deadlines. */
double ap_mono_s(void);

/* ------------------------------------------------------------------ files */

/* Reads a whole file ("-" means standard input) into a NUL-terminated heap
 * buffer owned by the caller (ap_free).  Fails with AP_EIO naming the path. */
int ap_read_file(const char *path, char **data, size_t *len, ap_error *err);

/* Unsigned/signed size helpers that refuse overflow. */
static inline bool ap_mul_overflow(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

#define AP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The greatest common divisor (ap_gcd(0, b) = b). */
static inline uint64_t ap_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

#endif /* AP_H */
