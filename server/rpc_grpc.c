/*
 * rpc_grpc.c - rpc.h over gRPC's core C API (grpc 1.51, Debian 12): the
 * only file of autopartd that includes <grpc/...>.
 *
 * One completion queue, polled by one thread.  Per method a few
 * grpc_server_request_registered_call are kept posted (re-posted as each
 * fires), plus a catch-all grpc_server_request_call that answers unknown
 * methods UNIMPLEMENTED.  Each call posts RECV_CLOSE_ON_SERVER on its own
 * at once: its completion is how cancellation, deadlines and vanished
 * clients are learned, for unary calls too (an Apply may wait in a queue).
 * Replies go out one SEND_MESSAGE at a time from a per-call queue; the
 * status goes with the last message.  A call is freed when the handler has
 * given back its references and no batch of it is in flight.
 *
 * What gRPC 1.51's core does with a request message, read in its sources
 * (github.com/grpc/grpc, the 1.5x files) and checked against this daemon
 * with a raw HTTP/2 client (tests/service/test_grpc_edges.py):
 *  - The length prefix is never compared with a maximum.
 *    chttp2/transport/frame_data.cc grpc_deframe_unprocessed_incoming_frames
 *    returns Pending while fewer than length+5 bytes are stored, with
 *    min_progress_size = what is missing; flow_control.cc
 *    StreamFlowControl::DesiredAnnounceSize then opens the stream's window
 *    to min(min_progress_size_, kMaxWindowDelta): the client is invited to
 *    send all it claimed, and frame_storage keeps it.  Only the whole
 *    message meets the limit (message_size_filter.cc recv_message_ready:
 *    Length() > max_recv_size -> RESOURCE_EXHAUSTED "Received message
 *    larger than max"); that error carries a grpc status, so the client
 *    gets it in trailers, and the call never reaches on_new_call: there is
 *    no status of ours to race it.  Measured: a 1 GiB prefix followed by 140 MB of
 *    body took the daemon's RSS from 17 to 157 MB under a 64 MiB limit.
 *    Later gRPC checks the prefix there (message_too_large_error); 1.51
 *    has no knob for it.  What bounds it here is a resource quota
 *    (max_buffer_bytes): past it the core's destructive reclaimer
 *    (chttp2_transport.cc, "Buffers full") resets a stream with
 *    ENHANCE_YOUR_CALM and frees its buffers (measured: reset after 100 MB
 *    under a 100 MiB quota, RSS back to 21 MB).
 *  - A message cut short by the end of the stream is dropped without a
 *    word: chttp2_transport.cc grpc_chttp2_maybe_complete_recv_message, on
 *    Pending with s->read_closed, resets frame_storage and recv_message.
 *    The call reaches us exactly as one that sent no message (payload
 *    NULL); nothing in the C API tells the two apart, so both are answered
 *    INVALID_ARGUMENT "no complete request message", whatever the prefix
 *    claimed (RESOURCE_EXHAUSTED would need the prefix, which only the
 *    transport saw).
 *  - Per-message decompression, left on, ends a call whose gzip body does
 *    not inflate with a stream reset and no grpc-status: the filter
 *    (http/message_compress/message_decompress_filter.cc OnRecvMessageReady)
 *    fails it with an error that carries no StatusIntProperty::kRpcStatus,
 *    and grpc_chttp2_cancel_stream writes trailers (close_from_api) only
 *    for an error with a clear grpc status, RST_STREAM otherwise.  It also
 *    inflates without an output bound (lib/compression/message_compress.cc
 *    zlib_decompress), after checking only the compressed length.  So it
 *    is off (GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION 0): the byte buffer
 *    then arrives still compressed, marked with the grpc-encoding's
 *    algorithm (grpc_byte_buffer_reader_init no longer inflates: it hands
 *    the compressed bytes on), and inflate_request below inflates gzip and
 *    deflate to at most max_recv_bytes, answering RESOURCE_EXHAUSTED past
 *    it and INVALID_ARGUMENT for bytes that do not inflate.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <zlib.h>

#include "rpc.h"

enum { TAG_SLOT, TAG_CLOSE, TAG_SEND, TAG_SHUTDOWN, TAG_RECV };

typedef struct tag {
    int kind;
} tag;

/* A posted request for one new call of a method (-1: the catch-all). */
typedef struct slot {
    tag t;
    int method;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    grpc_call_details details;
} slot;

typedef struct outmsg {
    struct outmsg *next;
    grpc_byte_buffer *bb;
} outmsg;

struct rpc_call {
    rpc_server *s;
    grpc_call *call;
    int method;
    gpr_timespec deadline;
    pthread_mutex_t mu;
    int refs; /* the handler's, the notice's, and one per op in flight */
    tag close_tag, send_tag, recv_tag;
    grpc_byte_buffer *request; /* the request, until the end of the client's stream is seen */
    grpc_byte_buffer *extra;   /* what came after it: nothing, for a well-formed call */
    int cancelled_flag; /* written by gRPC at RECV_CLOSE */
    bool closed, cancelled;
    bool sending, sent_initial, finishing, final_sent;
    grpc_byte_buffer *in_flight;
    outmsg *head, *tail;
    size_t backlog;
    rpc_code fin_code;
    grpc_slice fin_details;
    grpc_byte_buffer *fin_msg;
    void *user;
    gpr_timespec arrived; /* monotonic */
};

struct rpc_server {
    grpc_server *server;
    grpc_completion_queue *cq;
    rpc_handlers h;
    rpc_method *methods;
    void **registered;
    int n_methods;
    size_t max_recv;    /* the largest request, inflated */
    char *token_header; /* "Bearer TOKEN" */
    pthread_t thread;
    bool thread_started;
    atomic_int live;  /* calls not yet freed */
    atomic_bool stopping;
    bool shutdown_seen, cq_shut;
    tag shutdown_tag;
};

#define CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* ================================================================= calls */

static grpc_byte_buffer *bytes_to_bb(const void *msg, size_t len)
{
    grpc_slice sl = grpc_slice_from_copied_buffer(msg, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    return bb;
}

struct rpc_shared {
    atomic_int refs;
    size_t len;
    uint8_t data[];
};

rpc_shared *rpc_shared_new(const void *bytes, size_t len)
{
    rpc_shared *m = ap_malloc(sizeof *m + (len ? len : 1));
    if (!m)
        return NULL;
    atomic_init(&m->refs, 1);
    m->len = len;
    if (len)
        memcpy(m->data, bytes, len);
    return m;
}

void rpc_shared_ref(rpc_shared *m)
{
    atomic_fetch_add(&m->refs, 1);
}

void rpc_shared_unref(rpc_shared *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1)
        ap_free(m);
}

size_t rpc_shared_size(const rpc_shared *m)
{
    return sizeof *m + m->len;
}

static void shared_slice_done(void *m)
{
    rpc_shared_unref(m);
}

/* A byte buffer over the shared bytes: no copy; gRPC drops its reference
 * when it is done with them. */
static grpc_byte_buffer *shared_to_bb(rpc_shared *m)
{
    rpc_shared_ref(m);
    grpc_slice sl = grpc_slice_new_with_user_data(m->data, m->len, shared_slice_done, m);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    return bb;
}

static void call_free(rpc_call *c)
{
    rpc_server *s = c->s;
    for (outmsg *m = c->head, *n; m; m = n) {
        n = m->next;
        grpc_byte_buffer_destroy(m->bb);
        ap_free(m);
    }
    if (c->in_flight)
        grpc_byte_buffer_destroy(c->in_flight);
    if (c->fin_msg)
        grpc_byte_buffer_destroy(c->fin_msg);
    if (c->request)
        grpc_byte_buffer_destroy(c->request);
    if (c->extra)
        grpc_byte_buffer_destroy(c->extra);
    grpc_slice_unref(c->fin_details);
    grpc_call_unref(c->call);
    pthread_mutex_destroy(&c->mu);
    ap_free(c);
    atomic_fetch_sub(&s->live, 1);
}

/* Drops one reference taken with mu held; frees when it was the last. */
static void unref_locked(rpc_call *c)
{
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last)
        call_free(c);
}

void rpc_call_unref(rpc_call *c)
{
    pthread_mutex_lock(&c->mu);
    unref_locked(c);
}

/* Starts the next batch of the call when none is in flight (mu held): the
 * next queued message, or the final status once rpc_finish was called. */
static void start_next(rpc_call *c)
{
    if (c->sending)
        return;
    if (c->cancelled) {
        for (outmsg *m = c->head, *n; m; m = n) {
            n = m->next;
            grpc_byte_buffer_destroy(m->bb);
            ap_free(m);
        }
        c->head = c->tail = NULL;
        c->backlog = 0;
        return;
    }
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    if (c->head) {
        outmsg *m = c->head;
        c->head = m->next;
        if (!c->head)
            c->tail = NULL;
        c->backlog--;
        c->in_flight = m->bb;
        ap_free(m);
    } else if (c->finishing && !c->final_sent) {
        c->in_flight = c->fin_msg;
        c->fin_msg = NULL;
        c->final_sent = true;
    } else {
        return;
    }
    if (!c->sent_initial) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[n].data.send_initial_metadata.count = 0;
        n++;
        c->sent_initial = true;
    }
    if (c->in_flight) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = c->in_flight;
        n++;
    }
    if (c->final_sent && !c->head) {
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.trailing_metadata_count = 0;
        ops[n].data.send_status_from_server.status = (grpc_status_code)c->fin_code;
        ops[n].data.send_status_from_server.status_details = &c->fin_details;
        n++;
    }
    c->sending = true;
    c->refs++;
    if (grpc_call_start_batch(c->call, ops, n, &c->send_tag, NULL) != GRPC_CALL_OK) {
        /* Cannot happen with one batch in flight; treat as a dead call. */
        c->sending = false;
        c->refs--;
        c->cancelled = true;
        if (c->in_flight)
            grpc_byte_buffer_destroy(c->in_flight);
        c->in_flight = NULL;
    }
}

/* Queues bb (taken) on the call. */
static int send_bb(rpc_call *c, grpc_byte_buffer *bb)
{
    pthread_mutex_lock(&c->mu);
    if (c->cancelled || c->finishing) {
        pthread_mutex_unlock(&c->mu);
        grpc_byte_buffer_destroy(bb);
        return -1;
    }
    outmsg *m = ap_malloc(sizeof *m);
    if (!m) {
        pthread_mutex_unlock(&c->mu);
        grpc_byte_buffer_destroy(bb);
        return -1;
    }
    m->next = NULL;
    m->bb = bb;
    if (c->tail)
        c->tail->next = m;
    else
        c->head = m;
    c->tail = m;
    c->backlog++;
    start_next(c);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int rpc_send(rpc_call *c, const void *msg, size_t len)
{
    return send_bb(c, bytes_to_bb(msg, len));
}

int rpc_send_shared(rpc_call *c, rpc_shared *m)
{
    return send_bb(c, shared_to_bb(m));
}

size_t rpc_backlog(rpc_call *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->backlog + (c->sending ? 1 : 0);
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* Ends the call with bb (taken; may be NULL) and a status. */
static void finish_bb(rpc_call *c, rpc_code code, const char *status_message, grpc_byte_buffer *bb)
{
    pthread_mutex_lock(&c->mu);
    if (c->finishing) {
        fprintf(stderr, "autopartd: bug: call finished twice\n");
        abort();
    }
    c->finishing = true;
    c->fin_code = code;
    if (c->s->h.finished) {
        gpr_timespec d = gpr_time_sub(gpr_now(GPR_CLOCK_MONOTONIC), c->arrived);
        c->s->h.finished(c->s->h.ud, c->method, code, (double)d.tv_sec + (double)d.tv_nsec / 1e9);
    }
    grpc_slice_unref(c->fin_details);
    c->fin_details = grpc_slice_from_copied_string(status_message ? status_message : "");
    if (bb && !c->cancelled)
        c->fin_msg = bb;
    else if (bb)
        grpc_byte_buffer_destroy(bb);
    start_next(c);
    unref_locked(c);
}

void rpc_finish(rpc_call *c, rpc_code code, const char *status_message, const void *msg, size_t len)
{
    finish_bb(c, code, status_message, msg ? bytes_to_bb(msg, len) : NULL);
}

void rpc_finish_shared(rpc_call *c, rpc_code code, const char *status_message, rpc_shared *m)
{
    finish_bb(c, code, status_message, m ? shared_to_bb(m) : NULL);
}

bool rpc_call_cancelled(rpc_call *c)
{
    pthread_mutex_lock(&c->mu);
    bool x = c->cancelled;
    pthread_mutex_unlock(&c->mu);
    return x;
}

void rpc_call_peer(rpc_call *c, char *buf, size_t size)
{
    char *p = grpc_call_get_peer(c->call);
    snprintf(buf, size, "%s", p ? p : "");
    gpr_free(p);
}

int64_t rpc_call_deadline_ms(rpc_call *c)
{
    gpr_timespec d = gpr_convert_clock_type(c->deadline, GPR_CLOCK_MONOTONIC);
    if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0)
        return INT64_MAX;
    gpr_timespec left = gpr_time_sub(d, gpr_now(GPR_CLOCK_MONOTONIC));
    return gpr_time_to_millis(left);
}

void rpc_call_set_user(rpc_call *c, void *user)
{
    c->user = user;
}

void *rpc_call_user(rpc_call *c)
{
    return c->user;
}

/* ============================================================ new calls */

static int post_slot(rpc_server *s, slot *sl)
{
    grpc_metadata_array_init(&sl->md);
    sl->call = NULL;
    sl->payload = NULL;
    grpc_call_error e;
    if (sl->method >= 0) {
        e = grpc_server_request_registered_call(s->server, s->registered[sl->method], &sl->call, &sl->deadline,
                                                &sl->md, &sl->payload,
                                                s->cq, s->cq, &sl->t);
    } else {
        grpc_call_details_init(&sl->details);
        e = grpc_server_request_call(s->server, &sl->call, &sl->details, &sl->md, s->cq, s->cq, &sl->t);
    }
    return e == GRPC_CALL_OK ? 0 : -1;
}

static void slot_release(slot *sl)
{
    grpc_metadata_array_destroy(&sl->md);
    if (sl->method < 0)
        grpc_call_details_destroy(&sl->details);
    if (sl->payload)
        grpc_byte_buffer_destroy(sl->payload);
    sl->payload = NULL;
}

static bool token_ok(rpc_server *s, const grpc_metadata_array *md)
{
    if (!s->token_header)
        return true;
    size_t want = strlen(s->token_header);
    for (size_t i = 0; i < md->count; i++) {
        const grpc_metadata *m = &md->metadata[i];
        if (grpc_slice_str_cmp(m->key, "authorization") != 0)
            continue;
        size_t len = GRPC_SLICE_LENGTH(m->value);
        const uint8_t *v = GRPC_SLICE_START_PTR(m->value);
        /* constant time in the token's length */
        unsigned diff = len != want;
        for (size_t k = 0; k < want; k++)
            diff |= (unsigned)(k < len ? v[k] : 0) ^ (unsigned)(uint8_t)s->token_header[k];
        return diff == 0;
    }
    return false;
}

static void on_new_call(rpc_server *s, slot *sl)
{
    rpc_call *c = ap_calloc(1, sizeof *c);
    if (!c) {
        grpc_call_cancel_with_status(sl->call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL);
        grpc_call_unref(sl->call);
        return;
    }
    atomic_fetch_add(&s->live, 1);
    c->s = s;
    c->call = sl->call;
    c->method = sl->method;
    c->arrived = gpr_now(GPR_CLOCK_MONOTONIC);
    c->deadline = sl->method >= 0 ? sl->deadline : sl->details.deadline;
    c->close_tag.kind = TAG_CLOSE;
    c->send_tag.kind = TAG_SEND;
    c->recv_tag.kind = TAG_RECV;
    c->fin_details = grpc_empty_slice();
    pthread_mutex_init(&c->mu, NULL);
    c->refs = 2; /* the handler's and the RECV_CLOSE op's */
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled_flag;
    if (grpc_call_start_batch(c->call, &op, 1, &c->close_tag, NULL) != GRPC_CALL_OK)
        c->refs--; /* never completes */

    if (!token_ok(s, &sl->md)) {
        rpc_finish(c, RPC_UNAUTHENTICATED, "missing or wrong bearer token (authorization: Bearer ...)", NULL, 0);
        return;
    }
    if (sl->method < 0) {
        char *m = grpc_slice_to_c_string(sl->details.method);
        char msg[600];
        snprintf(msg, sizeof msg, "unknown method %.500s", m ? m : "?");
        gpr_free(m);
        rpc_finish(c, RPC_UNIMPLEMENTED, msg, NULL, 0);
        return;
    }
    if (!sl->payload) { /* none, or one cut short: see the head comment */
        rpc_finish(c, RPC_INVALID_ARGUMENT,
                   "the call carries no complete request message (none, or one shorter than its length prefix)",
                   NULL, 0);
        return;
    }
    /* One request message per call, for every method here: the handler
     * sees it once the client's stream has ended with nothing after it. */
    c->request = sl->payload;
    sl->payload = NULL;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->extra;
    c->refs++;
    if (grpc_call_start_batch(c->call, &op, 1, &c->recv_tag, NULL) != GRPC_CALL_OK) {
        c->refs--;
        rpc_finish(c, RPC_INTERNAL, "cannot read the end of the request", NULL, 0);
    }
}

/* Inflates a request the client compressed (grpc-encoding gzip or
 * deflate; the core leaves it compressed, see the head comment) into *out
 * (malloc'd, the caller frees it), to at most max bytes.  Returns RPC_OK,
 * or the code to answer with a message in why. */
static rpc_code inflate_request(grpc_compression_algorithm algo, const uint8_t *in, size_t len, size_t max,
                                uint8_t **out, size_t *out_len, char *why, size_t why_size)
{
    *out = NULL;
    *out_len = 0;
    if (algo != GRPC_COMPRESS_GZIP && algo != GRPC_COMPRESS_DEFLATE) {
        snprintf(why, why_size, "the request is compressed with an algorithm this daemon does not take (%d)",
                 (int)algo);
        return RPC_UNIMPLEMENTED;
    }
    const char *name = algo == GRPC_COMPRESS_GZIP ? "gzip" : "deflate";
    if (len > UINT32_MAX || max >= UINT32_MAX) {
        snprintf(why, why_size, "the compressed request is too large");
        return RPC_RESOURCE_EXHAUSTED;
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    /* grpc's deflate is zlib's format (window bits 15); gzip adds 16 */
    if (inflateInit2(&zs, algo == GRPC_COMPRESS_GZIP ? 15 + 16 : 15) != Z_OK) {
        snprintf(why, why_size, "out of memory inflating the request");
        return RPC_RESOURCE_EXHAUSTED;
    }
    /* Room grows by doubling up to max + 1: filling that much is too much. */
    size_t cap = len < max / 4 ? 4 * len + 256 : max + 1;
    uint8_t *buf = malloc(cap);
    rpc_code code = RPC_OK;
    if (!buf) {
        snprintf(why, why_size, "out of memory inflating the request");
        code = RPC_RESOURCE_EXHAUSTED;
        goto done;
    }
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = buf;
    zs.avail_out = (uInt)cap;
    for (;;) {
        int r = inflate(&zs, Z_NO_FLUSH);
        if (r == Z_STREAM_END) {
            if (zs.avail_in) {
                snprintf(why, why_size, "the request (%s) has %u bytes after its compressed data", name, zs.avail_in);
                code = RPC_INVALID_ARGUMENT;
            }
            break;
        }
        if ((r == Z_OK || r == Z_BUF_ERROR) && zs.avail_out == 0) {
            if (cap > max) {
                snprintf(why, why_size, "the request inflates (%s) to more than the largest message, %zu bytes",
                         name, max);
                code = RPC_RESOURCE_EXHAUSTED;
                break;
            }
            size_t ncap = cap > max / 2 ? max + 1 : 2 * cap;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                snprintf(why, why_size, "out of memory inflating the request");
                code = RPC_RESOURCE_EXHAUSTED;
                break;
            }
            buf = nb;
            zs.next_out = buf + cap;
            zs.avail_out = (uInt)(ncap - cap);
            cap = ncap;
            continue;
        }
        if (r == Z_OK)
            continue;
        if (r == Z_BUF_ERROR) /* no progress with room left: the input ended first */
            snprintf(why, why_size, "the request is not valid %s data: cut short", name);
        else
            snprintf(why, why_size, "the request is not valid %s data: %s", name, zs.msg ? zs.msg : "bad data");
        code = r == Z_MEM_ERROR ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT;
        break;
    }
done:
    if (code == RPC_OK) {
        *out = buf;
        *out_len = zs.total_out;
    } else {
        free(buf);
    }
    inflateEnd(&zs);
    return code;
}

/* The end of the client's stream (or more). */
static void on_request_end(rpc_server *s, rpc_call *c, bool ok)
{
    if (!ok || rpc_call_cancelled(c)) { /* the client is gone: nobody hears an answer */
        rpc_finish(c, RPC_CANCELLED, "the client went away", NULL, 0);
        return;
    }
    if (c->extra) {
        rpc_finish(c, RPC_INVALID_ARGUMENT, "the call carries more than one request message", NULL, 0);
        return;
    }
    grpc_compression_algorithm algo = c->request->data.raw.compression;
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, c->request)) {
        rpc_finish(c, RPC_INTERNAL, "the request message cannot be read", NULL, 0);
        return;
    }
    grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    grpc_byte_buffer_destroy(c->request);
    c->request = NULL;
    if (algo == GRPC_COMPRESS_NONE) {
        s->h.call(s->h.ud, c, c->method, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
        grpc_slice_unref(all);
        return;
    }
    uint8_t *msg;
    size_t len;
    char why[200];
    rpc_code code = inflate_request(algo, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all), s->max_recv, &msg, &len,
                                    why, sizeof why);
    grpc_slice_unref(all);
    if (code != RPC_OK) {
        rpc_finish(c, code, why, NULL, 0);
        return;
    }
    s->h.call(s->h.ud, c, c->method, msg, len);
    free(msg);
}

/* ================================================================= loop */

static void maybe_shutdown_cq(rpc_server *s)
{
    if (s->shutdown_seen && !s->cq_shut && atomic_load(&s->live) == 0) {
        s->cq_shut = true;
        grpc_completion_queue_shutdown(s->cq);
    }
}

static void *cq_main(void *arg)
{
    rpc_server *s = arg;
    for (;;) {
        /* While stopping, wake now and then: the last call may be released
         * by another thread, with nothing arriving here. */
        gpr_timespec dl = atomic_load(&s->stopping)
                              ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(50, GPR_TIMESPAN))
                              : gpr_inf_future(GPR_CLOCK_MONOTONIC);
        grpc_event ev = grpc_completion_queue_next(s->cq, dl, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE) {
            tag *t = ev.tag;
            switch (t->kind) {
            case TAG_SLOT: {
                slot *sl = CONTAINER(t, slot, t);
                if (!ev.success || atomic_load(&s->stopping)) {
                    if (ev.success && sl->call) { /* a call that raced the shutdown */
                        grpc_call_cancel_with_status(sl->call, GRPC_STATUS_UNAVAILABLE, "the daemon is shutting down",
                                                     NULL);
                        grpc_call_unref(sl->call);
                    }
                    slot_release(sl);
                    ap_free(sl);
                    break;
                }
                on_new_call(s, sl);
                slot_release(sl);
                if (post_slot(s, sl) < 0) {
                    slot_release(sl);
                    ap_free(sl);
                }
                break;
            }
            case TAG_CLOSE: {
                rpc_call *c = CONTAINER(t, rpc_call, close_tag);
                pthread_mutex_lock(&c->mu);
                c->closed = true;
                bool notify = false;
                if (c->cancelled_flag || !ev.success) {
                    c->cancelled = true;
                    notify = !c->finishing;
                    if (notify)
                        c->refs++;
                    start_next(c); /* drops the queue */
                }
                pthread_mutex_unlock(&c->mu);
                if (notify)
                    s->h.cancelled(s->h.ud, c);
                rpc_call_unref(c);
                break;
            }
            case TAG_SEND: {
                rpc_call *c = CONTAINER(t, rpc_call, send_tag);
                pthread_mutex_lock(&c->mu);
                c->sending = false;
                if (c->in_flight)
                    grpc_byte_buffer_destroy(c->in_flight);
                c->in_flight = NULL;
                if (!ev.success)
                    c->cancelled = true;
                start_next(c);
                unref_locked(c);
                break;
            }
            case TAG_RECV: {
                rpc_call *c = CONTAINER(t, rpc_call, recv_tag);
                on_request_end(s, c, ev.success);
                rpc_call_unref(c);
                break;
            }
            case TAG_SHUTDOWN:
                s->shutdown_seen = true;
                break;
            }
        }
        maybe_shutdown_cq(s);
    }
    if (s->h.stopped)
        s->h.stopped(s->h.ud);
    return NULL;
}

/* =============================================================== server */

int rpc_server_active_calls(rpc_server *s)
{
    return atomic_load(&s->live);
}

/* gRPC's own log lines (a failed bind is logged before the call returns)
 * would come before autopartd's one-line error: dropped, unless
 * GRPC_VERBOSITY asks for them. */
static void drop_grpc_log(gpr_log_func_args *args)
{
    (void)args;
}

int rpc_server_start(const rpc_config *cfg, const rpc_handlers *h, rpc_server **out, int *port, ap_error *err)
{
    int rc = 0;
    *out = NULL;
    rpc_server *s = ap_calloc(1, sizeof *s);
    if (!s)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    if (!getenv("GRPC_VERBOSITY"))
        gpr_set_log_function(drop_grpc_log);
    grpc_init();
    s->h = *h;
    s->n_methods = cfg->n_methods;
    s->max_recv = cfg->max_recv_bytes > 0 && cfg->max_recv_bytes < INT32_MAX ? (size_t)cfg->max_recv_bytes : INT32_MAX;
    s->shutdown_tag.kind = TAG_SHUTDOWN;
    atomic_init(&s->live, 0);
    atomic_init(&s->stopping, false);
    s->methods = ap_calloc((size_t)cfg->n_methods, sizeof *s->methods);
    s->registered = ap_calloc((size_t)cfg->n_methods, sizeof *s->registered);
    if (!s->methods || !s->registered) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(s->methods, cfg->methods, sizeof *s->methods * (size_t)cfg->n_methods);
    if (cfg->token) {
        size_t n = strlen(cfg->token) + 8;
        s->token_header = ap_malloc(n);
        if (!s->token_header) {
            rc = ap_error_set(err, AP_ENOMEM, "out of memory");
            goto fail;
        }
        snprintf(s->token_header, n, "Bearer %s", cfg->token);
    }

    grpc_arg args[6];
    memset(args, 0, sizeof args);
    /* On by default: a second daemon would bind the same port silently and
     * take half the clients.  Off, binding a taken port fails. */
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = GRPC_ARG_ALLOW_REUSEPORT;
    args[0].value.integer = 0;
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[1].value.integer = cfg->max_recv_bytes > INT32_MAX ? INT32_MAX : (int)cfg->max_recv_bytes;
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[2].value.integer = -1; /* answers (device-local modules) may exceed requests */
    /* Compressed requests come up still compressed, for inflate_request
     * (see the head comment: the core's inflation resets the stream on
     * bad data and has no output bound). */
    args[3].type = GRPC_ARG_INTEGER;
    args[3].key = GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION;
    args[3].value.integer = 0;
    /* Only what inflate_request knows: for any other grpc-encoding the core
     * answers UNIMPLEMENTED itself, with a grpc-status. */
    args[4].type = GRPC_ARG_INTEGER;
    args[4].key = GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET;
    args[4].value.integer = (1 << GRPC_COMPRESS_NONE) | (1 << GRPC_COMPRESS_DEFLATE) | (1 << GRPC_COMPRESS_GZIP);
    grpc_channel_args chargs = {5, args};
    grpc_resource_quota *quota = NULL;
    if (cfg->max_buffer_bytes > 0) {
        quota = grpc_resource_quota_create("autopartd");
        grpc_resource_quota_resize(quota, (size_t)cfg->max_buffer_bytes);
        args[5].type = GRPC_ARG_POINTER;
        args[5].key = GRPC_ARG_RESOURCE_QUOTA;
        args[5].value.pointer.p = quota;
        args[5].value.pointer.vtable = grpc_resource_quota_arg_vtable();
        chargs.num_args = 6;
    }
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->server = grpc_server_create(&chargs, NULL);
    if (quota)
        grpc_resource_quota_unref(quota); /* the server holds its own reference */
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    for (int i = 0; i < cfg->n_methods; i++) {
        s->registered[i] = grpc_server_register_method(s->server, cfg->methods[i].path, NULL,
                                                       GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
        if (!s->registered[i]) {
            rc = ap_error_set(err, AP_EINTERNAL, "cannot register method %s", cfg->methods[i].path);
            goto fail_server;
        }
    }
    grpc_server_credentials *creds;
    if (cfg->tls_cert_pem) {
        grpc_ssl_pem_key_cert_pair pair = {cfg->tls_key_pem, cfg->tls_cert_pem};
        creds = grpc_ssl_server_credentials_create(cfg->tls_client_ca_pem, &pair, 1, cfg->tls_client_ca_pem ? 1 : 0,
                                                   NULL);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    if (!creds) {
        rc = ap_error_set(err, AP_EINVALID, "cannot make the server credentials (bad TLS certificate or key?)");
        goto fail_server;
    }
    int bound = grpc_server_add_http2_port(s->server, cfg->listen, creds);
    grpc_server_credentials_release(creds);
    if (bound <= 0) {
        rc = ap_error_set(err, AP_EIO, "cannot listen on %s (address in use, not local, or malformed%s)", cfg->listen,
                          cfg->tls_cert_pem ? ", or a bad TLS certificate/key" : "");
        goto fail_server;
    }
    grpc_server_start(s->server);
    int per = cfg->slots_per_method > 0 ? cfg->slots_per_method : 4;
    for (int i = -1; i < cfg->n_methods; i++) {
        for (int k = 0; k < (i < 0 ? 2 : per); k++) {
            slot *sl = ap_calloc(1, sizeof *sl);
            if (!sl) {
                rc = ap_error_set(err, AP_ENOMEM, "out of memory");
                break;
            }
            sl->t.kind = TAG_SLOT;
            sl->method = i;
            if (post_slot(s, sl) < 0) {
                slot_release(sl);
                ap_free(sl);
            }
        }
    }
    if (pthread_create(&s->thread, NULL, cq_main, s) != 0) {
        rc = ap_error_set(err, AP_EINTERNAL, "cannot start the gRPC thread");
    } else {
        s->thread_started = true;
    }
    if (rc < 0) {
        /* Unwind through the normal shutdown path: it frees the slots. */
        rpc_server_shutdown(s);
        if (!s->thread_started)
            cq_main(s);
        rpc_server_free(s);
        return rc;
    }
    *port = bound;
    *out = s;
    return 0;

fail_server:
    grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
    grpc_server_cancel_all_calls(s->server);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_server_destroy(s->server);
    grpc_completion_queue_destroy(s->cq);
    s->server = NULL;
    s->cq = NULL;
fail:
    ap_free(s->methods);
    ap_free(s->registered);
    ap_free(s->token_header);
    ap_free(s);
    grpc_shutdown();
    return rc;
}

void rpc_server_shutdown(rpc_server *s)
{
    if (atomic_exchange(&s->stopping, true))
        return;
    grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
}

void rpc_server_cancel_all(rpc_server *s)
{
    grpc_server_cancel_all_calls(s->server);
}

void rpc_server_free(rpc_server *s)
{
    if (!s)
        return;
    if (s->thread_started)
        pthread_join(s->thread, NULL);
    grpc_server_destroy(s->server);
    grpc_completion_queue_destroy(s->cq);
    ap_free(s->methods);
    ap_free(s->registered);
    ap_free(s->token_header);
    ap_free(s);
    grpc_shutdown();
}
