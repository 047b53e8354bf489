/*
 * wire_grpc.c - wire.h over gRPC's core C API (grpc 1.51): a channel and a
 * pluck completion queue per connection; each call's batches are waited for
 * by their tags.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "wire.h"

struct wire_conn {
    grpc_channel *ch;
    grpc_completion_queue *cq;
    char *auth; /* "Bearer TOKEN" */
    double timeout_s;
};

struct wire_stream {
    wire_conn *c;
    grpc_call *call;
    bool ended;
    bool got_initial; /* RECV_INITIAL_METADATA must come before the first RECV_MESSAGE */
    grpc_metadata_array initial;
};

/* A daemon started a moment before (`autopartd ... &`, then at once a
 * call) may not listen yet, and the first call would fail at once: wait for
 * the channel to connect, at most 3 s (or the call timeout), first. */
static void wait_connected(wire_conn *c)
{
    double wait_s = c->timeout_s > 0 && c->timeout_s < 3 ? c->timeout_s : 3;
    gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                      gpr_time_from_millis((int64_t)(wait_s * 1000), GPR_TIMESPAN));
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(c->ch, 1);
    while (st != GRPC_CHANNEL_READY && st != GRPC_CHANNEL_SHUTDOWN) {
        int tag;
        grpc_channel_watch_connectivity_state(c->ch, st, until, c->cq, &tag);
        grpc_event ev = grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE || !ev.success)
            break; /* the time is up: the call says what is wrong */
        st = grpc_channel_check_connectivity_state(c->ch, 0);
    }
}

int wire_connect(const wire_opts *o, wire_conn **out, ap_error *err)
{
    wire_conn *c = ap_calloc(1, sizeof *c);
    *out = NULL;
    if (!c)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    grpc_init();
    if (o->token) {
        size_t n = strlen(o->token) + 8;
        c->auth = ap_malloc(n);
        if (!c->auth) {
            ap_free(c);
            grpc_shutdown();
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        }
        snprintf(c->auth, n, "Bearer %s", o->token);
    }
    c->timeout_s = o->timeout_s;
    grpc_arg args[3];
    int n = 0;
    memset(args, 0, sizeof args);
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[n++].value.integer = -1; /* answers carry whole modules */
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[n++].value.integer = -1;
    if (o->tls_name) {
        args[n].type = GRPC_ARG_STRING;
        args[n].key = GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[n++].value.string = (char *)o->tls_name;
    }
    grpc_channel_args chargs = {(size_t)n, args};
    grpc_channel_credentials *creds = o->tls_ca_pem ? grpc_ssl_credentials_create(o->tls_ca_pem, NULL, NULL, NULL)
                                                    : grpc_insecure_credentials_create();
    c->ch = grpc_channel_create(o->target, creds, &chargs);
    grpc_channel_credentials_release(creds);
    c->cq = grpc_completion_queue_create_for_pluck(NULL);
    if (!c->ch || !c->cq) {
        wire_close(c);
        return ap_error_set(err, AP_EIO, "cannot make a channel to %s", o->target);
    }
    wait_connected(c);
    *out = c;
    return 0;
}

void wire_close(wire_conn *c)
{
    if (!c)
        return;
    if (c->ch)
        grpc_channel_destroy(c->ch);
    if (c->cq) {
        grpc_completion_queue_shutdown(c->cq);
        while (grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(c->cq);
    }
    ap_free(c->auth);
    ap_free(c);
    grpc_shutdown();
}

static gpr_timespec deadline(const wire_conn *c)
{
    if (c->timeout_s <= 0)
        return gpr_inf_future(GPR_CLOCK_REALTIME);
    return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                        gpr_time_from_micros((int64_t)(c->timeout_s * 1e6), GPR_TIMESPAN));
}

static bool wait_tag(wire_conn *c, void *tag)
{
    grpc_event ev = grpc_completion_queue_pluck(c->cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

static void *bb_bytes(grpc_byte_buffer *bb, size_t *len)
{
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, bb))
        return NULL;
    grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    *len = GRPC_SLICE_LENGTH(all);
    void *p = ap_malloc(*len ? *len : 1);
    if (p && *len)
        memcpy(p, GRPC_SLICE_START_PTR(all), *len);
    grpc_slice_unref(all);
    return p;
}

static void set_status(wire_status *st, grpc_status_code code, grpc_slice details)
{
    st->code = (int)code;
    size_t n = GRPC_SLICE_LENGTH(details);
    if (n >= sizeof st->msg)
        n = sizeof st->msg - 1;
    memcpy(st->msg, GRPC_SLICE_START_PTR(details), n);
    st->msg[n] = '\0';
}

/* Starts a call: its request and half-close, with the token. */
static grpc_call *start_call(wire_conn *c, const char *method, const void *req, size_t len, grpc_op *ops,
                             size_t *n_ops, grpc_metadata *md, grpc_byte_buffer **bb)
{
    grpc_slice m = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, m, NULL, deadline(c), NULL);
    if (!call)
        return NULL;
    grpc_slice sl = grpc_slice_from_copied_buffer(req, len);
    *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (c->auth) {
        md->key = grpc_slice_from_static_string("authorization");
        md->value = grpc_slice_from_static_string(c->auth);
        ops[n].data.send_initial_metadata.count = 1;
        ops[n].data.send_initial_metadata.metadata = md;
    }
    n++;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = *bb;
    ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    *n_ops = n;
    return call;
}

int wire_unary(wire_conn *c, const char *method, const void *req, size_t len, void **resp, size_t *resp_len,
               wire_status *st)
{
    grpc_op ops[6];
    grpc_metadata md;
    grpc_byte_buffer *bb = NULL, *reply = NULL;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    size_t n;
    *resp = NULL;
    *resp_len = 0;
    memset(ops, 0, sizeof ops);
    memset(st, 0, sizeof *st);
    grpc_call *call = start_call(c, method, req, len, ops, &n, &md, &bb);
    if (!call) {
        st->code = GRPC_STATUS_INTERNAL;
        snprintf(st->msg, sizeof st->msg, "cannot start a call");
        return AP_EIO;
    }
    grpc_metadata_array_init(&init_md);
    grpc_metadata_array_init(&trail_md);
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &init_md;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &reply;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &trail_md;
    ops[n].data.recv_status_on_client.status = &code;
    ops[n++].data.recv_status_on_client.status_details = &details;
    int tag;
    int rc = 0;
    if (grpc_call_start_batch(call, ops, n, &tag, NULL) != GRPC_CALL_OK || !wait_tag(c, &tag)) {
        st->code = GRPC_STATUS_INTERNAL;
        snprintf(st->msg, sizeof st->msg, "the call failed locally");
        rc = AP_EIO;
    } else {
        set_status(st, code, details);
        if (code != GRPC_STATUS_OK) {
            rc = AP_EIO;
        } else if (reply) {
            *resp = bb_bytes(reply, resp_len);
            if (!*resp)
                rc = AP_ENOMEM;
        } else {
            *resp = ap_malloc(1); /* an empty message */
            rc = *resp ? 0 : AP_ENOMEM;
        }
    }
    if (reply)
        grpc_byte_buffer_destroy(reply);
    grpc_byte_buffer_destroy(bb);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&init_md);
    grpc_metadata_array_destroy(&trail_md);
    grpc_call_unref(call);
    return rc;
}

int wire_stream_open(wire_conn *c, const char *method, const void *req, size_t len, wire_stream **out,
                     wire_status *st)
{
    grpc_op ops[4];
    grpc_metadata md;
    grpc_byte_buffer *bb = NULL;
    size_t n;
    memset(ops, 0, sizeof ops);
    memset(st, 0, sizeof *st);
    *out = NULL;
    wire_stream *s = ap_calloc(1, sizeof *s);
    if (!s)
        return AP_ENOMEM;
    s->c = c;
    grpc_metadata_array_init(&s->initial);
    s->call = start_call(c, method, req, len, ops, &n, &md, &bb);
    int tag;
    if (!s->call || grpc_call_start_batch(s->call, ops, n, &tag, NULL) != GRPC_CALL_OK || !wait_tag(c, &tag)) {
        /* The send fails when the server is gone: the status tells why. */
        if (s->call) {
            *out = s;
            grpc_byte_buffer_destroy(bb);
            return 0;
        }
        st->code = GRPC_STATUS_INTERNAL;
        snprintf(st->msg, sizeof st->msg, "cannot start a call");
        grpc_byte_buffer_destroy(bb);
        grpc_metadata_array_destroy(&s->initial);
        ap_free(s);
        return AP_EIO;
    }
    grpc_byte_buffer_destroy(bb);
    *out = s;
    return 0;
}

static int stream_status(wire_stream *s, wire_status *st)
{
    grpc_op op;
    grpc_metadata_array trail_md;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    memset(&op, 0, sizeof op);
    grpc_metadata_array_init(&trail_md);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &trail_md;
    op.data.recv_status_on_client.status = &code;
    op.data.recv_status_on_client.status_details = &details;
    int tag;
    int rc = 0;
    if (grpc_call_start_batch(s->call, &op, 1, &tag, NULL) != GRPC_CALL_OK || !wait_tag(s->c, &tag)) {
        st->code = GRPC_STATUS_INTERNAL;
        snprintf(st->msg, sizeof st->msg, "the call failed locally");
        rc = AP_EIO;
    } else {
        set_status(st, code, details);
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&trail_md);
    s->ended = true;
    return rc;
}

int wire_stream_next(wire_stream *s, void **msg, size_t *len, wire_status *st)
{
    *msg = NULL;
    *len = 0;
    memset(st, 0, sizeof *st);
    if (s->ended)
        return 0;
    grpc_op ops[2];
    grpc_byte_buffer *reply = NULL;
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    if (!s->got_initial) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->initial;
        s->got_initial = true;
    }
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &reply;
    int tag;
    bool ok = grpc_call_start_batch(s->call, ops, n, &tag, NULL) == GRPC_CALL_OK && wait_tag(s->c, &tag);
    if (ok && reply) {
        *msg = bb_bytes(reply, len);
        grpc_byte_buffer_destroy(reply);
        return *msg ? 1 : AP_ENOMEM;
    }
    int rc = stream_status(s, st);
    return rc < 0 ? rc : 0;
}

void wire_stream_close(wire_stream *s)
{
    if (!s)
        return;
    if (!s->ended) {
        grpc_call_cancel(s->call, NULL);
        wire_status st;
        stream_status(s, &st);
    }
    grpc_call_unref(s->call);
    grpc_metadata_array_destroy(&s->initial);
    ap_free(s);
}
