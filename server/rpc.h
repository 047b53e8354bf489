/*
 * rpc.h - the gRPC server as autopartd sees it: methods, calls carrying
 * one request message, replies (one message, or a stream of them) and
 * status codes.  The only implementation, rpc_grpc.c, is the one file of
 * the daemon that uses gRPC's core C API, which its maintainers keep
 * unstable between releases (grpc issues 9656, 6814, 23160): a new gRPC
 * version touches that file alone.
 *
 * Threads.  The layer runs one thread that polls gRPC.  New calls and
 * cancellations are reported on that thread through the handlers, which
 * must not block (hand the work to another thread).  rpc_send, rpc_finish,
 * rpc_call_unref and the peer/deadline accessors may be called from any
 * thread.
 *
 * Calls.  A call is reference-counted.  The `call` handler receives one
 * reference, which rpc_finish gives back.  The `cancelled` handler receives
 * a second one, which the handler gives back with rpc_call_unref once it is
 * done with the notice; so a notice waiting in some queue never points at
 * a freed call.  A handler may hang its own pointer on a call
 * (rpc_call_set_user); the layer never reads it.
 *
 * Access control.  With a bearer token configured, a call without
 * `authorization: Bearer TOKEN` is answered UNAUTHENTICATED here, before
 * any handler sees it.  Calls to methods not in the table get
 * UNIMPLEMENTED (a call nobody answers would hang until its deadline).
 */
#ifndef RPC_H
#define RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ap.h"

/* gRPC status codes (ap.h's table; ap_grpc_code_name names them). */
typedef enum rpc_code {
#define RPC_CODE_ENUM(name, val) RPC_##name = val,
    AP_GRPC_CODES(RPC_CODE_ENUM)
#undef RPC_CODE_ENUM
} rpc_code;

typedef struct rpc_server rpc_server;
typedef struct rpc_call rpc_call;

/* A method: "/package.Service/Method"; `streaming` when the reply is a
 * stream (the request is always one message). */
typedef struct rpc_method {
    const char *path;
    bool streaming;
} rpc_method;

typedef struct rpc_handlers {
    void *ud;
    /* A new call of methods[method] with its request (valid during the
     * call only).  The handler owns one reference: it must call rpc_finish
     * exactly once, from any thread, whenever it likes. */
    void (*call)(void *ud, rpc_call *c, int method, const uint8_t *req, size_t len);
    /* The client cancelled, went away, or its deadline passed, before the
     * call was finished: whatever is sent from now on is dropped.  The
     * handler owns one more reference (rpc_call_unref). */
    void (*cancelled)(void *ud, rpc_call *c);
    /* After rpc_server_shutdown: no call remains and the polling thread is
     * about to end; rpc_server_free may follow.  Runs on the layer's thread. */
    void (*stopped)(void *ud);
    /* Optional: a call's status is set (method -1: a method not in the
     * table), `seconds` after it arrived.  Any thread; must not block. */
    void (*finished)(void *ud, int method, rpc_code code, double seconds);
} rpc_handlers;

typedef struct rpc_config {
    const char *listen;        /* host:port; port 0 picks a free one */
    int64_t max_recv_bytes;    /* largest request message, compressed or inflated */
    /* Memory gRPC may hold for requests still arriving (its resource
     * quota); 0: no bound.  See rpc_grpc.c for what happens past it. */
    int64_t max_buffer_bytes;
    /* TLS: PEM text of the certificate chain and key; NULL: plain text. */
    const char *tls_cert_pem, *tls_key_pem;
    const char *tls_client_ca_pem; /* require client certificates signed by it */
    const char *token;         /* bearer token every call must carry; NULL: none */
    const rpc_method *methods;
    int n_methods;
    int slots_per_method;      /* calls accepted ahead of time per method */
} rpc_config;

/* Binds and starts serving: the handlers see calls from now on.  Fails with
 * AP_EIO naming the address when it cannot bind (taken: SO_REUSEPORT is off,
 * so a second daemon on the same port is an error, not a thief), AP_EINVALID
 * for a bad TLS pair.  *port is the bound port. */
int rpc_server_start(const rpc_config *cfg, const rpc_handlers *h, rpc_server **out, int *port, ap_error *err);
/* Stops taking calls (new connections are refused; calls in progress go
 * on).  The `stopped` handler runs once every call has been finished and
 * released. */
void rpc_server_shutdown(rpc_server *s);
/* Cancels every call still in progress (after a grace period). */
void rpc_server_cancel_all(rpc_server *s);
/* Joins the thread and frees everything: after `stopped`. */
void rpc_server_free(rpc_server *s);
/* Calls alive now (for statistics). */
int rpc_server_active_calls(rpc_server *s);

/* Queues one message of a streaming reply.  Messages go out in order, one
 * at a time.  Returns 0, or -1 when the call was cancelled or finished (the
 * message is dropped). */
int rpc_send(rpc_call *c, const void *msg, size_t len);
/* Messages queued and not yet taken by gRPC: a slow reader's backlog. */
size_t rpc_backlog(rpc_call *c);
/* Ends the call with a last message (msg may be NULL) and a status; the
 * message of a non-OK status should name the problem.  Gives back the
 * reference the `call` handler received. */
void rpc_finish(rpc_call *c, rpc_code code, const char *status_message, const void *msg, size_t len);
void rpc_call_unref(rpc_call *c);

/* A message sent to many calls without a copy per call (an answer served
 * again and again).  Reference-counted; any thread. */
typedef struct rpc_shared rpc_shared;
/* Copies bytes once.  NULL when out of memory.  The caller holds one
 * reference. */
rpc_shared *rpc_shared_new(const void *bytes, size_t len);
void rpc_shared_ref(rpc_shared *m);
void rpc_shared_unref(rpc_shared *m);
size_t rpc_shared_size(const rpc_shared *m);
/* rpc_send and rpc_finish with a shared message (which they reference as
 * long as gRPC needs it; the caller keeps its own reference). */
int rpc_send_shared(rpc_call *c, rpc_shared *m);
void rpc_finish_shared(rpc_call *c, rpc_code code, const char *status_message, rpc_shared *m);
/* True once the client is gone (cancelled, deadline, disconnect). */
bool rpc_call_cancelled(rpc_call *c);
/* "ipv4:127.0.0.1:41234" into buf. */
void rpc_call_peer(rpc_call *c, char *buf, size_t size);
/* Milliseconds left until the client's deadline; INT64_MAX when none. */
int64_t rpc_call_deadline_ms(rpc_call *c);
void rpc_call_set_user(rpc_call *c, void *user);
void *rpc_call_user(rpc_call *c);

#endif /* RPC_H */
