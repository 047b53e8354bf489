/*
 * util.c - what every file of autopartd uses: log lines, and ending a call
 * with a reply or an error (the clock of the store's rows is ap_now_us).  A leaf:
 * it calls no other file of the daemon.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "srv.h"

void srv_log(srv *s, const char *fmt, ...)
{
    if (s->opt.quiet)
        return;
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s autopartd: ", when);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void srv_fail(srv *s, rpc_call *c, rpc_code code, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&s->stats.errors, 1);
    rpc_finish(c, code, msg, NULL, 0);
}

void srv_reply(srv *s, rpc_call *c, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = ap_malloc(len ? len : 1);
    if (!buf) {
        srv_fail(s, c, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    protobuf_c_message_pack(m, buf);
    rpc_finish(c, RPC_OK, NULL, buf, len);
    ap_free(buf);
}
