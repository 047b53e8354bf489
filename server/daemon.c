/*
 * daemon.c - autopartd's loop: a libuv loop on the main thread owns the
 * daemon's state and handles signals (SIGTERM/SIGINT: stop taking calls,
 * checkpoint, give running rows back to the store, exit 0), a timer
 * (heartbeats, checkpoints, orphan sweeps, joined searches of other
 * daemons), the inbox where the gRPC thread hands it calls (calls.c), and
 * the tasks that threads hand back.  Two pools of worker threads (pool.c):
 * one reads requests and runs Applies, one runs searches; each with a
 * bounded queue that serves client groups round-robin, so one client's
 * burst does not starve the others (jobs.c queues the jobs).  The store has
 * a thread of its own (db.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "srv.h"

/* ============================================================== shutdown */

/* SIGTERM and SIGINT: taken by the loop's thread alone. */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
}

static void close_all(srv *s)
{
    if (s->closed)
        return;
    s->closed = true;
    /* Stopping the watchers gives SIGTERM back its default action, which
     * would kill the process mid-way if a second one came now: we are
     * already stopping, so ignore them.  Blocked here meanwhile (and in
     * every other thread since srv_run started them), one that comes in
     * between waits, and SIG_IGN discards it. */
    sigset_t stop_sigs, old;
    stop_signals(&stop_sigs);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
    uv_signal_stop(&s->sigterm);
    uv_signal_stop(&s->sigint);
    if (s->opt.test_close_pause_s > 0) {
        double p = s->opt.test_close_pause_s;
        struct timespec ts = {(time_t)p, (long)((p - (double)(time_t)p) * 1e9)};
        nanosleep(&ts, NULL);
    }
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->tick, NULL);
    uv_close((uv_handle_t *)&s->grace, NULL);
}

/* The last operation: counted hits written, this daemon's rows given back
 * to the store for the next daemon. */
static void release_fn(store *db, srv_dbop *op)
{
    op->rc = store_release_all(db, &op->err);
}

static void release_cb(srv *s, srv_dbop *op)
{
    if (op->rc < 0)
        srv_log(s, "giving rows back: %s", op->err.msg);
}

static void maybe_done(srv *s)
{
    if (!s->stopping || !s->rpc_stopped || s->closed)
        return;
    for (int i = 0; i < POOL__COUNT; i++)
        if (s->pools[i].busy)
            return;
    for (srv_job *j = s->jobs; j; j = j->next)
        if (j->stage == JOB_FINISHING && !j->dead)
            return; /* its outcome is being stored */
    if (!s->released) {
        s->released = true;
        srv_flush_hits(s);
        srv_dbop *op = srv_db_new(s, sizeof *op, release_fn, release_cb, NULL);
        if (op)
            srv_db_submit(s, op);
        else
            srv_log(s, "out of memory giving rows back: their leases will run out");
    }
    if (s->db_inflight)
        return;
    close_all(s);
}

static void on_wake(uv_async_t *a);

/* The very last: the store did not answer either. */
static void on_stop_last(uv_timer_t *t)
{
    srv *s = t->data;
    srv_log(s, "the store did not answer within %.0f s either: exiting (the rows' leases will run out)",
            SRV_STOP_WAIT_US / 1e6);
    fflush(NULL);
    _exit(0);
}

/* On the store's thread, after every operation handed over before it: the
 * rows given back, and the process ends there. */
static void exit_fn(store *db, srv_dbop *op)
{
    ap_error err;
    if (store_release_all(db, &err) < 0)
        srv_log(op->srv, "giving rows back: %s", err.msg);
    fflush(NULL);
    _exit(0); /* the stuck threads cannot be joined, nor what they hold freed */
}

static void exit_cb(srv *s, srv_dbop *op)
{
    (void)s;
    (void)op;
}

/* SRV_STOP_WAIT_US after the grace period and tasks still out: a task slow
 * to notice that it should stop (a long parse, a lowering, a bug) must not
 * keep the daemon from exiting.  What came back is handled first (its
 * results are stored); the rest give their rows back to the store, with
 * their last checkpoint, and the process exits without them (on the
 * store's thread, once those operations are done). */
static void on_stop_wait(uv_timer_t *t)
{
    srv *s = t->data;
    on_wake(&s->wake);
    if (s->closed)
        return;
    int out = 0;
    for (int i = 0; i < POOL__COUNT; i++)
        out += s->pools[i].busy;
    srv_jobs_abandon(s);
    srv_flush_hits(s);
    srv_log(s, "%d task%s did not stop within %.0f s of the grace period's end%s; exiting without %s (the rows "
               "go back to the store)", out, out == 1 ? "" : "s", SRV_STOP_WAIT_US / 1e6,
            s->rpc_stopped ? "" : " and calls are still open", out == 1 ? "it" : "them");
    srv_dbop *op = srv_db_new(s, sizeof *op, exit_fn, exit_cb, NULL);
    if (!op) {
        fflush(NULL);
        _exit(0);
    }
    srv_db_submit(s, op);
    uv_timer_start(&s->grace, on_stop_last, SRV_STOP_WAIT_US / 1000, 0);
}

static void on_grace(uv_timer_t *t)
{
    srv *s = t->data;
    srv_log(s, "grace period over: cancelling the calls still open");
    rpc_server_cancel_all(s->rpc);
    uv_timer_start(&s->grace, on_stop_wait, SRV_STOP_WAIT_US / 1000, 0);
}

static void begin_shutdown(srv *s, const char *why)
{
    if (s->stopping)
        return;
    s->stopping = true;
    srv_log(s, "%s: no more calls; running searches go back to the store", why);
    srv_health_broadcast(s);
    rpc_server_shutdown(s->rpc);
    srv_jobs_shutdown(s);
    uv_timer_start(&s->grace, on_grace, (uint64_t)(s->opt.grace_s * 1000), 0);
    maybe_done(s);
}

static void on_signal(uv_signal_t *h, int signum)
{
    begin_shutdown(h->data, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ================================================================= loop */

static void on_wake(uv_async_t *a)
{
    srv *s = a->data;
    srv_run_inbox(s);
    srv_run_completions(s);
    if (s->trim) { /* a big module's pages go back to the system, not to the heap's free lists */
        s->trim = false;
        malloc_trim(0);
    }
    maybe_done(s);
}

static void on_tick(uv_timer_t *t)
{
    srv *s = t->data;
    int64_t now = ap_now_us();
    srv_jobs_tick(s, now);
    for (int i = 0; i < POOL__COUNT; i++)
        if (s->pools[i].paused_until && now >= s->pools[i].paused_until) {
            s->pools[i].paused_until = 0;
            srv_pump(s, i);
        }
}

static void on_call_finished(void *ud, int method, rpc_code code, double seconds)
{
    srv *s = ud;
    srv_metrics_call(&s->metrics, method, code, seconds);
}

static void on_store_op(void *ud, double seconds, bool failed)
{
    srv *s = ud;
    srv_hist_observe(&s->metrics.store_seconds, seconds);
    if (failed)
        atomic_fetch_add(&s->metrics.store_errors, 1);
    atomic_store(&s->metrics.store_up, !failed);
}

static void render_metrics(void *ud, ap_buf *out)
{
    srv *s = ud;
    srv_metrics_render(&s->metrics, SRV_VERSION, out);
}

static void rpc_stopped_done(srv *s, srv_task *t)
{
    (void)t;
    s->rpc_stopped = true;
}

static void on_rpc_stopped(void *ud)
{
    srv *s = ud;
    s->stopped_task.done = rpc_stopped_done;
    srv_complete(s, &s->stopped_task);
}

/* ================================================================ start */

static bool is_loopback(const char *addr)
{
    if (!strncmp(addr, "unix:", 5) || !strncmp(addr, "unix-abstract:", 14))
        return true;
    char host[256];
    const char *end;
    if (addr[0] == '[') {
        end = strchr(addr, ']');
        if (!end)
            return false;
        snprintf(host, sizeof host, "%.*s", (int)(end - addr - 1), addr + 1);
    } else {
        end = strrchr(addr, ':');
        snprintf(host, sizeof host, "%.*s", end ? (int)(end - addr) : (int)strlen(addr), addr);
    }
    return !strcmp(host, "localhost") || !strcmp(host, "::1") || !strncmp(host, "127.", 4);
}

static char *read_text(const char *what, const char *path, ap_error *err)
{
    char *text;
    size_t len;
    if (ap_read_file(path, &text, &len, err) < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        ap_error_set(err, AP_EIO, "%s: %s", what, msg);
        return NULL;
    }
    return text;
}

/* host:port with the port bound (a unix: address as it is). */
static void bound_address(const char *addr, int port, char *out, size_t size)
{
    const char *colon = strrchr(addr, ':');
    if (!strncmp(addr, "unix", 4) || !colon)
        snprintf(out, size, "%s", addr);
    else
        snprintf(out, size, "%.*s:%d", (int)(colon - addr), addr, port);
}

/* host:pid:nonce, the daemon's name in the store's rows (host: the node
 * name when given). */
static void make_owner(const char *node, char *out, size_t size)
{
    char host[200] = "localhost";
    if (node)
        snprintf(host, sizeof host, "%s", node);
    else
        gethostname(host, sizeof host - 1);
    uint8_t nonce[6] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, nonce, sizeof nonce) != (ssize_t)sizeof nonce)
            memset(nonce, 0, sizeof nonce);
        close(fd);
    }
    char hex[13];
    store_hex(nonce, 6, hex);
    snprintf(out, size, "%.64s:%ld:%s", host, (long)getpid(), hex); /* --node-name: 60 at most; a host name, 64 */
}

/* Whether the options serve what they ask for safely: false (said on
 * stderr) for a listener off this machine without TLS or --insecure, and
 * for a dashboard asked to check client certificates. */
static bool options_safe(const srv_options *opt)
{
    if (!is_loopback(opt->listen) && !opt->tls_cert && !opt->insecure) {
        fprintf(stderr,
                "autopartd: error: --listen %s is not a loopback address: serve it with TLS (--tls-cert, --tls-key) "
                "or say --insecure\n",
                opt->listen);
        return false;
    }
    if (opt->http && !is_loopback(opt->http) && !opt->tls_cert && !opt->insecure) {
        fprintf(stderr,
                "autopartd: error: --http %s is not a loopback address: serve it with TLS (--tls-cert, --tls-key) "
                "or say --insecure\n",
                opt->http);
        return false;
    }
    if (opt->http && opt->tls_client_ca) {
        /* MHD would accept any client: refuse rather than serve without the check asked for. */
        fprintf(stderr, "autopartd: error: --http does not check client certificates (--tls-client-ca): serve the "
                        "dashboard from a daemon without it\n");
        return false;
    }
    return true;
}

/* Frees what srv_run started, in the order that lets each part finish:
 * the dashboard and the RPC server, the pools, the store's thread, then
 * what was handed back, the jobs, the loop (loop_ready: it was set up). */
static void srv_free(srv *s, bool loop_ready)
{
    srv_http_stop(s->http); /* joins its threads, closes its store connections */
    rpc_server_free(s->rpc);
    for (int i = 0; i < POOL__COUNT; i++) {
        srv_pool_stop(&s->pools[i]);
        while (srv_fq_pop(&s->pools[i].queue)) /* the jobs are freed below */
            ;
    }
    srv_db_stop(s);
    if (loop_ready) {
        /* what was handed back after the loop (none normally: it waits for
         * every task and store operation): freed, nothing more started */
        s->stopping = true;
        srv_run_completions(s);
    }
    while (s->jobs) {
        srv_job *j = s->jobs;
        s->jobs = j->next;
        srv_job_free(j);
    }
    srv_inbox_free(s);
    if (loop_ready) {
        uv_loop_close(&s->loop);
        uv_mutex_destroy(&s->inbox_mu);
        uv_mutex_destroy(&s->done_mu);
    }
    store_close(s->db_conn);
    srv_cache_free(s->cache);
    ap_free(s->hits);
    ap_free(s->token);
}

int srv_run(const srv_options *opt)
{
    if (!options_safe(opt))
        return 2;
    srv *s = ap_calloc(1, sizeof *s);
    ap_error err;
    char *cert = NULL, *key = NULL, *ca = NULL;
    int rc = 1;
    bool loop_ready = false;
    if (!s) {
        fprintf(stderr, "autopartd: error: out of memory\n");
        return 1;
    }
    s->opt = *opt;
    ap_error_clear(&err);
    if (opt->token_file) {
        if (!(s->token = read_text("--token-file", opt->token_file, &err)))
            goto fail;
        size_t n = strlen(s->token);
        while (n && (s->token[n - 1] == '\n' || s->token[n - 1] == '\r' || s->token[n - 1] == ' '))
            s->token[--n] = '\0';
        if (!n || strpbrk(s->token, "\r\n")) {
            ap_error_set(&err, AP_EINVALID, "--token-file %s: the token must be one non-empty line", opt->token_file);
            goto fail;
        }
    }
    if (opt->tls_cert && (!(cert = read_text("--tls-cert", opt->tls_cert, &err)) ||
                          !(key = read_text("--tls-key", opt->tls_key, &err)) ||
                          (opt->tls_client_ca && !(ca = read_text("--tls-client-ca", opt->tls_client_ca, &err)))))
        goto fail;
    make_owner(opt->node_name, s->owner, sizeof s->owner);
    store_describe(opt->db_path, s->store_name, sizeof s->store_name);
    s->start_us = ap_now_us();
    {
        const char *paths[M__COUNT];
        for (int i = 0; i < M__COUNT; i++)
            paths[i] = srv_methods[i].path;
        srv_metrics_init(&s->metrics, paths, M__COUNT, s->start_us);
    }
    if (store_open(opt->db_path, s->owner, 5000, &s->db_conn, &err) < 0)
        goto fail;
    store_observe(s->db_conn, on_store_op, s);
    if (!(s->cache = srv_cache_new((size_t)opt->cache_bytes))) {
        ap_error_set(&err, AP_ENOMEM, "out of memory");
        goto fail;
    }
    uv_loop_init(&s->loop);
    uv_mutex_init(&s->inbox_mu);
    uv_mutex_init(&s->done_mu);
    loop_ready = true;
    uv_async_init(&s->loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    s->sigterm.data = s->sigint.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_timer_init(&s->loop, &s->tick);
    uv_timer_init(&s->loop, &s->grace);
    s->tick.data = s->grace.data = s;
    /* Every thread started from here on (the store's, the pools', the
     * dashboard's, gRPC's) inherits SIGTERM and SIGINT blocked: they come
     * to the loop's thread, whose close_all can then shut them out. */
    sigset_t stop_sigs;
    stop_signals(&stop_sigs);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
    s->pools[POOL_INTAKE].queue.max = s->pools[POOL_SEARCH].queue.max = opt->max_queue;
    if (srv_db_start(s, on_store_op, &err) < 0 ||
        srv_pool_start(s, &s->pools[POOL_INTAKE], POOL_INTAKE, opt->apply_threads, NULL, &err) < 0 ||
        srv_pool_start(s, &s->pools[POOL_SEARCH], POOL_SEARCH, opt->max_concurrent, NULL, &err) < 0)
        goto fail_loop;
    for (int i = 0; i < POOL__COUNT; i++)
        atomic_store(&s->metrics.workers[i], s->pools[i].n);
    if (opt->http) {
        srv_http_config hc = {
            .listen = opt->http,
            .db_path = opt->db_path,
            .root = opt->http_root,
            .token = s->token,
            .tls_cert_pem = cert,
            .tls_key_pem = key,
            .version = SRV_VERSION,
            .threads = 2,
            .start_us = s->start_us,
            .metrics = render_metrics,
            .metrics_ud = s,
        };
        if (srv_http_start(&hc, &s->http, &s->http_port, &err) < 0)
            goto fail_loop;
        if (!is_loopback(opt->http) && s->token && !opt->tls_cert)
            srv_log(s, "warning: the dashboard's bearer token crosses the network in clear text (no TLS)");
    }
    rpc_config cfg = {
        .listen = opt->listen,
        .max_recv_bytes = opt->max_message_bytes,
        .max_buffer_bytes = opt->rpc_memory_bytes,
        .tls_cert_pem = cert,
        .tls_key_pem = key,
        .tls_client_ca_pem = ca,
        .token = s->token,
        .methods = srv_methods,
        .n_methods = M__COUNT,
        .slots_per_method = 8,
    };
    rpc_handlers h = {.ud = s,
                      .call = srv_on_call,
                      .cancelled = srv_on_cancelled,
                      .stopped = on_rpc_stopped,
                      .finished = on_call_finished};
    if (rpc_server_start(&cfg, &h, &s->rpc, &s->port, &err) < 0)
        goto fail_loop;
    if (!is_loopback(opt->listen) && s->token && !opt->tls_cert)
        srv_log(s, "warning: the bearer token crosses the network in clear text (no TLS)");
    /* The line scripts and tests read to learn the port: the address as
     * bound (port 0 asks for any free port). */
    char bound[300], http_bound[300];
    bound_address(opt->listen, s->port, bound, sizeof bound);
    printf("autopartd: listening on %s, port %d, store %s\n", bound, s->port, s->store_name);
    if (s->http) {
        bound_address(opt->http, s->http_port, http_bound, sizeof http_bound);
        printf("autopartd: dashboard (%s) on %s, port %d\n", cert ? "https" : "http", http_bound, s->http_port);
    }
    fflush(stdout);
    srv_log(s, "%s serving as %s (%d search workers, %d threads each, %d intake workers; store %s, leases of %.0f s)",
            SRV_VERSION, s->owner, opt->max_concurrent, opt->threads_per_search, opt->apply_threads,
            store_backend(s->db_conn), (double)opt->lease_us / 1e6);
    srv_jobs_tick(s, ap_now_us()); /* take over what a crash left at once */
    uv_timer_start(&s->tick, on_tick, 100, 100);
    pthread_sigmask(SIG_UNBLOCK, &stop_sigs, NULL); /* one that came meanwhile is handled now */
    uv_run(&s->loop, UV_RUN_DEFAULT);
    rc = s->exit_code;
    goto cleanup;

fail_loop:
    /* Nothing runs yet: close the handles and unwind. */
    s->stopping = true;
    s->rpc_stopped = true;
    close_all(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
fail:
    if (err.msg[0])
        fprintf(stderr, "autopartd: error: %s\n", err.msg);
    rc = 1;
cleanup:
    srv_free(s, loop_ready);
    ap_free(cert);
    ap_free(key);
    ap_free(ca);
    if (rc == 0)
        srv_log(s, "stopped");
    ap_free(s);
    return rc;
}
