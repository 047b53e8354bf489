/*
 * wire.h - a small synchronous gRPC client for autopart's own tools (the
 * CLI, the integration tests, the service benchmark): unary calls and
 * server-streaming calls carrying packed protobuf messages.  The only
 * implementation, wire_grpc.c, is the one client file that uses gRPC's core
 * C API (unstable between releases: a new gRPC touches that file alone).
 *
 * A connection is used by one thread at a time; open one per thread.
 * Functions return 0 or a negative AP_E* code; a call that reached the
 * server and got a status other than OK reports it in wire_status and
 * returns AP_EIO.
 */
#ifndef WIRE_H
#define WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ap.h"

typedef struct wire_conn wire_conn;
typedef struct wire_stream wire_stream;

typedef struct wire_opts {
    const char *target;      /* host:port */
    const char *token;       /* bearer token sent with every call; NULL: none */
    const char *tls_ca_pem;  /* TLS with these roots (PEM text); NULL: plain text */
    const char *tls_name;    /* the server name to check the certificate for; NULL: the host */
    double timeout_s;        /* per call; 0: none */
} wire_opts;

/* gRPC's status of a finished call (code 0 is OK). */
typedef struct wire_status {
    int code;
    char msg[1200];
} wire_status;

/* gRPC's status codes (ap.h's table; ap_grpc_code_name names them). */
enum {
#define WIRE_CODE_ENUM(name, val) WIRE_##name = val,
    AP_GRPC_CODES(WIRE_CODE_ENUM)
#undef WIRE_CODE_ENUM
};

/* Makes a channel (connecting lazily, at the first call). */
int wire_connect(const wire_opts *o, wire_conn **out, ap_error *err);
void wire_close(wire_conn *c);

/* One request, one reply.  On OK, *resp is the reply (heap, ap_free). */
int wire_unary(wire_conn *c, const char *method, const void *req, size_t len, void **resp, size_t *resp_len,
               wire_status *st);

/* A streaming reply.  wire_stream_next: 1 with a message in *msg (heap,
 * ap_free), 0 at the end with the status in *st, or an error. */
int wire_stream_open(wire_conn *c, const char *method, const void *req, size_t len, wire_stream **out,
                     wire_status *st);
int wire_stream_next(wire_stream *s, void **msg, size_t *len, wire_status *st);
/* Ends a stream, cancelling it when the server has not finished it. */
void wire_stream_close(wire_stream *s);

#endif /* WIRE_H */
