/*
 * service.c - bench_service: autopartd's figures on loopback.  Starts the
 * daemon (the real binary) on a temporary store, and prints
 *   - cache-hit Apply requests per second and p50/p99 latency with 1, 8 and
 *     32 concurrent clients (each its own connection), for a one-op module
 *     (the service's own cost) and the tiny transformer of the model zoo
 *     (83 KB in, 130 KB out: what a real request weighs);
 *   - the daemon's resident memory idle, with 100 open connections, and
 *     after 100,000 requests;
 *   - the time from kill -9 to serving again (a restart on the same store
 *     until a cache hit is answered).
 * The clients run on the same machine as the daemon: the figures are for
 * both together.
 *
 * With --db ADDR the daemon's store is ADDR (a PostgreSQL URL, say) instead
 * of a temporary SQLite file; --daemon-arg --cache-mb --daemon-arg 0 makes
 * every cache hit read the store.
 *
 *   bench_service [--seconds S] [--requests N] [--db ADDR] [--daemon-arg ARG]...
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autopart/v1/partitioner.pb-c.h"
#include "wire.h"

static pid_t daemon_pid;

static void die(const char *what)
{
    fprintf(stderr, "bench_service: %s\n", what);
    if (daemon_pid > 0) /* not left running */
        kill(daemon_pid, SIGKILL);
    exit(1);
}

/* ============================================================== daemon */

typedef struct daemon_proc {
    pid_t pid;
    int port;
} daemon_proc;

static const char *daemon_extra[8];
static int n_daemon_extra;

static void start_daemon(daemon_proc *d, const char *db)
{
    int out[2];
    if (pipe(out) != 0)
        die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        const char *argv[20] = {AP_DAEMON, "--listen", "127.0.0.1:0", "--db", db, "--quiet"};
        for (int i = 0; i < n_daemon_extra; i++)
            argv[6 + i] = daemon_extra[i];
        execv(AP_DAEMON, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    char line[512];
    size_t n = 0;
    while (n < sizeof line - 1 && read(out[0], line + n, 1) == 1 && line[n] != '\n')
        n++;
    line[n] = '\0';
    close(out[0]);
    const char *p = strstr(line, " port ");
    if (!p)
        die("autopartd did not start");
    d->pid = pid;
    d->port = atoi(p + 6);
}

/* CPU seconds the process has used (user + system). */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* fields after the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

/* ============================================================ requests */

static wire_conn *connect_to(int port)
{
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    wire_opts o = {.target = target, .timeout_s = 60};
    wire_conn *c;
    ap_error err;
    if (wire_connect(&o, &c, &err) < 0)
        die(err.msg);
    return c;
}

typedef struct request {
    uint8_t *bytes;
    size_t len;
} request;

static request make_request(const char *text, const char *mesh_a, int64_t size_a, const char *mesh_b, int64_t size_b,
                            const char *schedule)
{
    Autopart__V1__Module mod = AUTOPART__V1__MODULE__INIT;
    Autopart__V1__MeshAxis ax[2] = {AUTOPART__V1__MESH_AXIS__INIT, AUTOPART__V1__MESH_AXIS__INIT};
    Autopart__V1__MeshAxis *axp[2] = {&ax[0], &ax[1]};
    Autopart__V1__Mesh mesh = AUTOPART__V1__MESH__INIT;
    Autopart__V1__ApplyRequest req = AUTOPART__V1__APPLY_REQUEST__INIT;
    mod.text = (char *)text;
    mod.name = (char *)"bench.mlir";
    ax[0].name = (char *)mesh_a;
    ax[0].size = size_a;
    ax[1].name = (char *)mesh_b;
    ax[1].size = size_b;
    mesh.axes = axp;
    mesh.n_axes = mesh_b ? 2 : 1;
    req.module = &mod;
    req.mesh = &mesh;
    req.schedule = (char *)schedule;
    req.client_label = (char *)"bench";
    request r;
    r.len = autopart__v1__apply_request__get_packed_size(&req);
    r.bytes = malloc(r.len);
    autopart__v1__apply_request__pack(&req, r.bytes);
    return r;
}

/* One Apply; returns its origin (0 on failure, with the status printed). */
static int apply_once(wire_conn *c, const request *r, size_t *reply_len)
{
    void *resp;
    size_t len;
    wire_status st;
    if (wire_unary(c, "/autopart.v1.Partitioner/Apply", r->bytes, r->len, &resp, &len, &st) < 0) {
        fprintf(stderr, "bench_service: Apply: %s: %s\n", ap_grpc_code_name(st.code), st.msg);
        return 0;
    }
    Autopart__V1__ApplyResponse *a = autopart__v1__apply_response__unpack(NULL, len, resp);
    int origin = a ? a->origin : 0;
    if (a)
        autopart__v1__apply_response__free_unpacked(a, NULL);
    ap_free(resp);
    if (reply_len)
        *reply_len = len;
    return origin;
}

typedef struct worker {
    int port;
    const request *req;
    double until;
    int64_t max_requests;
    atomic_llong *total;
    double *lat;
    size_t n_lat, cap_lat;
    int failures;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    wire_conn *c = connect_to(w->port);
    while (ap_mono_s() < w->until && atomic_fetch_add(w->total, 1) < w->max_requests) {
        double t0 = ap_mono_s();
        if (apply_once(c, w->req, NULL) != AUTOPART__V1__ORIGIN__CACHE_HIT)
            w->failures++;
        double dt = ap_mono_s() - t0;
        if (w->n_lat == w->cap_lat) {
            w->cap_lat = w->cap_lat ? w->cap_lat * 2 : 4096;
            w->lat = realloc(w->lat, sizeof *w->lat * w->cap_lat);
        }
        w->lat[w->n_lat++] = dt;
    }
    wire_close(c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* N clients for `seconds` (or until max_requests in all): requests per
 * second and latency percentiles.  Returns the requests made. */

static int64_t measure(int port, const request *req, int clients, double seconds, int64_t max_requests,
                       const char *label)
{
    double cpu0 = cpu_s(daemon_pid);
    worker *w = calloc((size_t)clients, sizeof *w);
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    atomic_llong total;
    atomic_init(&total, 0);
    double t0 = ap_mono_s();
    for (int i = 0; i < clients; i++) {
        w[i] = (worker){.port = port, .req = req, .until = t0 + seconds, .max_requests = max_requests,
                        .total = &total};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    size_t n = 0;
    int failures = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        n += w[i].n_lat;
        failures += w[i].failures;
    }
    double wall = ap_mono_s() - t0;
    double cpu = cpu_s(daemon_pid) - cpu0;
    double *all = malloc(sizeof *all * (n ? n : 1));
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, w[i].lat, sizeof *all * w[i].n_lat);
        k += w[i].n_lat;
        free(w[i].lat);
    }
    qsort(all, n, sizeof *all, cmp_double);
    if (label)
        printf("  %-17s %2d clients %7.0f req/s  p50 %6.3f ms  p99 %6.3f ms  daemon CPU %5.1f us/req (%zu%s)\n",
               label, clients, (double)n / wall, n ? all[n / 2] * 1e3 : 0,
               n ? all[(size_t)((double)n * 0.99)] * 1e3 : 0, n ? cpu / (double)n * 1e6 : 0, n,
               failures ? ", some not cache hits!" : "");
    free(all);
    free(w);
    free(th);
    return (int64_t)n;
}

static char *read_all(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        die("popen");
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (n + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    if (pclose(p) != 0)
        die(cmd);
    return buf;
}

int main(int argc, char **argv)
{
    double seconds = 5;
    int64_t total_requests = 100000;
    const char *store_addr = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--requests") && i + 1 < argc)
            total_requests = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--daemon-arg") && i + 1 < argc && n_daemon_extra < 8)
            daemon_extra[n_daemon_extra++] = argv[++i];
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            store_addr = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_service [--seconds S] [--requests N] [--db ADDR] [--daemon-arg ARG]...\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    char tmp[] = "/tmp/autopart-bench-XXXXXX";
    int fd = mkstemp(tmp);
    close(fd);
    unlink(tmp);
    const char *db = store_addr ? store_addr : tmp;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double load[3] = {0};
    if (getloadavg(load, 3) < 0)
        load[0] = -1;
    printf("bench_service: autopartd on loopback, %ld CPUs (load average %.2f at start; other work on the\n"
           "machine counts against these figures), clients on the same machine\n",
           ncpu, load[0]);

    static const char one_op[] =
        "func.func @main(%x: tensor<256x512xf32> loc(\"x\"), %w: tensor<512x1024xf32> loc(\"w\")) -> "
        "tensor<256x1024xf32> {\n"
        "  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<256x512xf32>, "
        "tensor<512x1024xf32>) -> tensor<256x1024xf32>\n"
        "  return %y : tensor<256x1024xf32>\n"
        "}\n";
    request small = make_request(one_op, "batch", 8, "model", 4, "tile %arg0 0 batch\ntile %arg1 1 model\npropagate\n");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s/tests/models/modelgen' transformer --config tiny -q -o -", AP_SOURCE_DIR);
    char *tiny_text = read_all(cmd);
    snprintf(cmd, sizeof cmd, "cat '%s/tests/models/schedules/bp.txt' '%s/tests/models/schedules/mp.txt'",
             AP_SOURCE_DIR, AP_SOURCE_DIR);
    char *bpmp = read_all(cmd);
    request tiny = make_request(tiny_text, "batch", 2, "model", 2, bpmp);

    daemon_proc d;
    start_daemon(&d, db);
    daemon_pid = d.pid;
    usleep(300000);
    long idle = rss_kb(d.pid);
    wire_conn *c = connect_to(d.port);
    size_t small_reply, tiny_reply;
    if (apply_once(c, &small, &small_reply) != AUTOPART__V1__ORIGIN__NEW ||
        apply_once(c, &tiny, &tiny_reply) != AUTOPART__V1__ORIGIN__NEW)
        die("the first requests were not new");
    wire_close(c);
    printf("requests: one dot_general (%zu B in, %zu B out); tiny transformer BP+MP (%zu B in, %zu B out)\n",
           small.len, small_reply, tiny.len, tiny_reply);

    printf("cache hits (Apply answered before: from memory, or from the store with --cache-mb 0), %.0f s each, "
           "store %s:\n",
           seconds, store_addr ? "as given" : "a temporary SQLite file");
    int64_t done = 0;
    static const int clients[] = {1, 8, 32};
    for (int i = 0; i < 3; i++)
        done += measure(d.port, &small, clients[i], seconds, INT64_MAX, "one-op module");
    for (int i = 0; i < 3; i++)
        done += measure(d.port, &tiny, clients[i], seconds, INT64_MAX, "tiny transformer");

    /* memory */
    wire_conn *conns[100];
    for (int i = 0; i < 100; i++) {
        conns[i] = connect_to(d.port);
        if (apply_once(conns[i], &small, NULL) != AUTOPART__V1__ORIGIN__CACHE_HIT)
            die("a connection's request was not a cache hit");
    }
    long with_conns = rss_kb(d.pid);
    for (int i = 0; i < 100; i++)
        wire_close(conns[i]);
    long before = rss_kb(d.pid);
    int64_t more = total_requests;
    double t0 = ap_mono_s();
    done += measure(d.port, &small, 8, 1e9, more, NULL);
    double t_more = ap_mono_s() - t0;
    usleep(300000);
    long after = rss_kb(d.pid);
    printf("daemon RSS: idle %.1f MiB; with 100 open connections %.1f MiB; %.1f MiB before and %.1f MiB after "
           "another %lld requests (%.1f s; %lld requests in all)\n",
           idle / 1024.0, with_conns / 1024.0, before / 1024.0, after / 1024.0, (long long)more, t_more,
           (long long)done);

    /* kill -9, then a new daemon on the same store until it answers */
    kill(d.pid, SIGKILL);
    waitpid(d.pid, NULL, 0);
    double k0 = ap_mono_s();
    start_daemon(&d, db);
    daemon_pid = d.pid;
    double listening = ap_mono_s() - k0;
    c = connect_to(d.port);
    int origin = apply_once(c, &small, NULL);
    double serving = ap_mono_s() - k0;
    wire_close(c);
    printf("kill -9 to serving: listening after %.1f ms, first cache hit answered after %.1f ms (%s)\n",
           listening * 1e3, serving * 1e3, origin == AUTOPART__V1__ORIGIN__CACHE_HIT ? "a cache hit" : "NOT a hit");
    kill(d.pid, SIGTERM);
    waitpid(d.pid, NULL, 0);
    char p[300];
    unlink(tmp);
    snprintf(p, sizeof p, "%s-wal", tmp);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", tmp);
    unlink(p);
    free(small.bytes);
    free(tiny.bytes);
    free(tiny_text);
    free(bpmp);
    return 0;
}
