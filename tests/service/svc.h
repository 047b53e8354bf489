/*
 * svc.h - what the service tests share: starting autopartd (the real
 * binary) on an ephemeral loopback port with a temporary store, stopping
 * it, calling it through the wire, reading its store, and the requests the
 * tests send.  Header-only, like testlib.h.
 */
#ifndef SVC_H
#define SVC_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autopart/v1/partitioner.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"
#include "store.h"
#include "testlib.h"
#include "wire.h"

#define SVC_APPLY "/autopart.v1.Partitioner/Apply"
#define SVC_SEARCH "/autopart.v1.Partitioner/Search"
#define SVC_GET "/autopart.v1.Partitioner/GetSearch"
#define SVC_LIST "/autopart.v1.Partitioner/ListSearches"
#define SVC_CANCEL "/autopart.v1.Partitioner/CancelSearch"
#define SVC_STATS "/autopart.v1.Partitioner/Stats"
#define SVC_HEALTH "/grpc.health.v1.Health/Check"
#define SVC_WATCH "/grpc.health.v1.Health/Watch"

typedef struct svc_daemon {
    pid_t pid;
    int port;
    char db[256];
    char log[300];
} svc_daemon;

/* Where the logs of daemons on a PostgreSQL store go (one on an SQLite file
 * logs beside it): the test's own temporary directory, removed when the
 * test passes, kept when it fails (tests/service/pg.h's pg_finish). */
static const char *svc_log_dir;

/* A fresh temporary store path (the file does not exist yet). */
static inline void svc_temp_db(char *path, size_t size)
{
    snprintf(path, size, "/tmp/autopart-svc-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(path);
}

static inline void svc_remove_db(const char *db)
{
    char p[300];
    unlink(db);
    snprintf(p, sizeof p, "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db);
    unlink(p);
    snprintf(p, sizeof p, "%s.log", db);
    unlink(p);
}

/* Starts autopartd on `listen` (NULL: 127.0.0.1:0) with store db and the
 * extra arguments (NULL-terminated); waits for its "listening" line and,
 * when `until` is given, for a line that holds `until` too.  What it printed
 * goes to `text` (when not NULL).  Returns the exit status instead when it
 * exits (or is stopped for not printing them) before that, and leaves d->pid
 * 0. */
static inline int svc_start_until(svc_daemon *d, const char *db, const char *listen, const char *const *extra,
                                  const char *until, char *text, size_t text_size)
{
    int out[2];
    memset(d, 0, sizeof *d);
    snprintf(d->db, sizeof d->db, "%s", db);
    if (store_is_postgres(db)) { /* a file of its own in the test's directory */
        static int n;
        ck_assert_msg(svc_log_dir, "a daemon on PostgreSQL needs svc_log_dir (the test's temporary directory)");
        snprintf(d->log, sizeof d->log, "%.200s/autopartd-%d-%d.log", svc_log_dir, (int)getpid(), n++);
        unlink(d->log);
    } else {
        snprintf(d->log, sizeof d->log, "%s.log", db);
    }
    ck_assert_int_eq(pipe(out), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *argv[40];
        int n = 0;
        argv[n++] = AP_DAEMON;
        argv[n++] = "--listen";
        argv[n++] = listen ? listen : "127.0.0.1:0";
        argv[n++] = "--db";
        argv[n++] = db;
        argv[n++] = "--grace";
        argv[n++] = "2";
        for (int i = 0; extra && extra[i] && n < 38; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        int logfd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(out[1], 1);
        if (logfd >= 0)
            dup2(logfd, 2);
        close(out[0]);
        execv(AP_DAEMON, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    char buf[1024];
    size_t n = 0;
    double t0 = ap_mono_s();
    bool done = false;
    while (!done && n < sizeof buf - 1 && ap_mono_s() - t0 < 60) {
        struct pollfd p = {out[0], POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t r = read(out[0], buf + n, 1);
        if (r <= 0)
            break;
        n++;
        buf[n] = '\0';
        if (buf[n - 1] == '\n')
            done = strstr(buf, " port ") && (!until || strstr(buf, until));
    }
    buf[n] = '\0';
    close(out[0]);
    if (text)
        snprintf(text, text_size, "%s", buf);
    const char *p = strstr(buf, " port ");
    if (!done || !p) {
        int st;
        kill(pid, SIGTERM);
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    d->pid = pid;
    d->port = atoi(p + 6);
    ck_assert_int_gt(d->port, 0);
    return 0;
}

static inline int svc_start_args(svc_daemon *d, const char *db, const char *listen, const char *const *extra)
{
    return svc_start_until(d, db, listen, extra, NULL, NULL, 0);
}

static inline void svc_start(svc_daemon *d, const char *db, const char *const *extra)
{
    int rc = svc_start_args(d, db, NULL, extra);
    ck_assert_msg(rc == 0 && d->pid > 0, "autopartd did not start (exit %d); see %s", rc, d->log);
}

/* Signals the daemon and waits for it (up to `wait_s`); returns its exit
 * status, or 128 + signal. */
static inline int svc_stop(svc_daemon *d, int sig, double wait_s)
{
    if (!d->pid)
        return -1;
    kill(d->pid, sig);
    double t0 = ap_mono_s();
    int st = 0;
    pid_t r;
    while ((r = waitpid(d->pid, &st, WNOHANG)) == 0 && ap_mono_s() - t0 < wait_s)
        usleep(20000);
    if (r == 0) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &st, 0);
        d->pid = 0;
        ck_abort_msg("autopartd did not exit within %.0f s of signal %d", wait_s, sig);
    }
    d->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline wire_conn *svc_conn_opts(int port, const char *token, double timeout_s)
{
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    wire_opts o = {.target = target, .token = token, .timeout_s = timeout_s};
    wire_conn *c;
    ap_error err;
    ck_assert_msg(wire_connect(&o, &c, &err) == 0, "%s", err.msg);
    return c;
}

static inline wire_conn *svc_conn(int port)
{
    return svc_conn_opts(port, NULL, 120);
}

/* Packs m and calls method; on OK *resp is the reply (heap). */
static inline int svc_call(wire_conn *c, const char *method, const ProtobufCMessage *m, void **resp, size_t *len,
                           wire_status *st)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n + 1);
    protobuf_c_message_pack(m, buf);
    int rc = wire_unary(c, method, buf, n, resp, len, st);
    free(buf);
    return rc;
}

/* The bytes of length-delimited field `field` of a packed message. */
static inline bool svc_field(const uint8_t *p, size_t len, uint32_t field, const uint8_t **out, size_t *out_len)
{
    size_t i = 0;
    while (i < len) {
        uint64_t tag = 0, v = 0;
        int shift = 0;
        while (i < len) {
            tag |= (uint64_t)(p[i] & 0x7f) << shift;
            shift += 7;
            if (!(p[i++] & 0x80))
                break;
        }
        int wt = (int)(tag & 7);
        if (wt == 0) {
            while (i < len && (p[i++] & 0x80))
                ;
        } else if (wt == 1) {
            i += 8;
        } else if (wt == 5) {
            i += 4;
        } else if (wt == 2) {
            shift = 0;
            while (i < len) {
                v |= (uint64_t)(p[i] & 0x7f) << shift;
                shift += 7;
                if (!(p[i++] & 0x80))
                    break;
            }
            if ((tag >> 3) == field) {
                *out = p + i;
                *out_len = (size_t)v;
                return i + v <= len;
            }
            i += (size_t)v;
        } else {
            return false;
        }
    }
    return false;
}

/* An Apply request (pointing into the caller's strings). */
typedef struct svc_apply {
    Autopart__V1__ApplyRequest req;
    Autopart__V1__Module mod;
    Autopart__V1__Mesh mesh;
    Autopart__V1__MeshAxis ax[4];
    Autopart__V1__MeshAxis *axp[4];
    Autopart__V1__Device dev;
} svc_apply;

/* mesh: "batch=8,model=4" (at most 4 axes). */
static inline void svc_apply_init(svc_apply *a, const char *text, const char *name, const char *mesh,
                                  const char *schedule, const char *label)
{
    autopart__v1__apply_request__init(&a->req);
    autopart__v1__module__init(&a->mod);
    autopart__v1__mesh__init(&a->mesh);
    autopart__v1__device__init(&a->dev);
    a->mod.text = (char *)text;
    a->mod.name = (char *)name;
    a->req.module = &a->mod;
    static char names[4][32];
    int n = 0;
    for (const char *s = mesh; *s && n < 4;) {
        size_t k = strcspn(s, "=");
        snprintf(names[n], sizeof names[n], "%.*s", (int)k, s);
        autopart__v1__mesh_axis__init(&a->ax[n]);
        a->ax[n].name = names[n];
        a->ax[n].size = atoll(s + k + 1);
        a->axp[n] = &a->ax[n];
        n++;
        s += strcspn(s, ",");
        if (*s == ',')
            s++;
    }
    a->mesh.axes = a->axp;
    a->mesh.n_axes = (size_t)n;
    a->req.mesh = &a->mesh;
    a->dev.kind_case = AUTOPART__V1__DEVICE__KIND_NAME;
    a->dev.name = (char *)"tpu_v3";
    a->req.device = &a->dev;
    a->req.schedule = (char *)schedule;
    a->req.client_label = (char *)(label ? label : "");
}

/* Calls Apply; on OK *resp is unpacked and *raw holds the bytes as they
 * came (both owned by the caller). */
static inline int svc_apply_call(wire_conn *c, const svc_apply *a, Autopart__V1__ApplyResponse **resp, void **raw,
                                 size_t *raw_len, wire_status *st)
{
    void *r = NULL;
    size_t len = 0;
    *resp = NULL;
    int rc = svc_call(c, SVC_APPLY, &a->req.base, &r, &len, st);
    if (rc == 0) {
        *resp = autopart__v1__apply_response__unpack(NULL, len, r);
        ck_assert_msg(*resp, "the Apply reply does not unpack");
    }
    if (raw) {
        *raw = r;
        *raw_len = len;
    } else {
        ap_free(r);
    }
    return rc;
}

/* A row of the store, read with its own connection. */
static inline int svc_row(const char *db, int64_t id, store_row *row)
{
    store *s;
    ap_error err;
    ck_assert_msg(store_open(db, "test:0:0", 5000, &s, &err) == 0, "%s", err.msg);
    int rc = store_get(s, id, row, &err);
    store_close(s);
    return rc;
}

/* Waits until some row of the store has `status` (up to wait_s); returns
 * its id, 0 on timeout. */
static inline int64_t svc_wait_status(const char *db, int status, double wait_s)
{
    store *s;
    ap_error err;
    double t0 = ap_mono_s();
    for (;;) {
        if (store_open(db, "test:0:0", 5000, &s, &err) == 0) {
            store_row rows[16];
            char next[48];
            store_filter f = {.status = status};
            int n = store_list(s, &f, 16, NULL, rows, next, &err);
            store_close(s);
            if (n > 0)
                return rows[0].id;
        }
        if (ap_mono_s() - t0 > wait_s)
            return 0;
        usleep(5000);
    }
}

static inline Autopart__V1__StatsResponse *svc_stats(wire_conn *c)
{
    Autopart__V1__StatsRequest req = AUTOPART__V1__STATS_REQUEST__INIT;
    void *r;
    size_t len;
    wire_status st;
    ck_assert_msg(svc_call(c, SVC_STATS, &req.base, &r, &len, &st) == 0, "Stats: %s %s", ap_grpc_code_name(st.code),
                  st.msg);
    Autopart__V1__StatsResponse *s = autopart__v1__stats_response__unpack(NULL, len, r);
    ap_free(r);
    ck_assert(s);
    return s;
}

/* GetSearch of one stored search, without its result; the caller frees
 * it with autopart__v1__search_record__free_unpacked. */
static inline Autopart__V1__SearchRecord *svc_get(wire_conn *c, const char *search_id)
{
    Autopart__V1__GetSearchRequest g = AUTOPART__V1__GET_SEARCH_REQUEST__INIT;
    g.search_id = (char *)search_id;
    void *r;
    size_t len;
    wire_status st;
    ck_assert_msg(svc_call(c, SVC_GET, &g.base, &r, &len, &st) == 0, "GetSearch %s: %s %s", search_id,
                  ap_grpc_code_name(st.code), st.msg);
    Autopart__V1__SearchRecord *rec = autopart__v1__search_record__unpack(NULL, len, r);
    ap_free(r);
    ck_assert(rec);
    return rec;
}

/* The daemon answers: a Health check says SERVING. */
static inline void svc_assert_serving(int port)
{
    wire_conn *c = svc_conn(port);
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    void *r;
    size_t len;
    wire_status st;
    ck_assert_msg(svc_call(c, SVC_HEALTH, &req.base, &r, &len, &st) == 0, "health: %s %s", ap_grpc_code_name(st.code),
                  st.msg);
    Grpc__Health__V1__HealthCheckResponse *h = grpc__health__v1__health_check_response__unpack(NULL, len, r);
    ck_assert(h);
    ck_assert_int_eq(h->status, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    grpc__health__v1__health_check_response__free_unpacked(h, NULL);
    ap_free(r);
    wire_close(c);
}

/* A Search request on one axis (pointing into the caller's strings). */
typedef struct svc_search {
    svc_apply base;
    Autopart__V1__SearchRequest req;
    char *axes[4];
} svc_search;

static inline void svc_search_init(svc_search *q, const char *text, const char *name, const char *mesh, const char *manual,
                            const char *axis, int64_t episodes, const char *label)
{
    svc_apply_init(&q->base, text, name, mesh, "", label);
    autopart__v1__search_request__init(&q->req);
    q->req.module = &q->base.mod;
    q->req.mesh = &q->base.mesh;
    q->req.device = &q->base.dev;
    q->req.manual_schedule = (char *)manual;
    q->axes[0] = (char *)axis;
    q->req.axes = q->axes;
    q->req.n_axes = 1;
    q->req.episodes = episodes;
    q->req.seed = 1;
    q->req.threads = 1;
    q->req.client_label = (char *)label;
}

/* A search's events: origin of `accepted`, progress events seen, the
 * result's bytes (heap) and the status. */
typedef struct search_run {
    int origin, progress, rc;
    double t_accepted, t_first_progress, t_end; /* ap_mono_s() at each */
    int64_t last_episodes;                       /* of the last progress event */
    /* progress events relayed from the store (another daemon runs the
     * search: no speed in them): when they came (wall clock, us) and their
     * episodes */
    int n_relayed;
    int64_t relayed_us[64], relayed_episodes[64];
    char id[24];
    uint8_t *result;
    size_t result_len;
    wire_status st;
} search_run;

static inline void search_call(wire_conn *c, const svc_search *q, search_run *out)
{
    memset(out, 0, sizeof *out);
    size_t len = autopart__v1__search_request__get_packed_size(&q->req);
    uint8_t *buf = malloc(len + 1);
    autopart__v1__search_request__pack(&q->req, buf);
    wire_stream *ws;
    ck_assert_int_eq(wire_stream_open(c, SVC_SEARCH, buf, len, &ws, &out->st), 0);
    free(buf);
    void *m;
    size_t ml;
    int got, n = 0;
    while ((got = wire_stream_next(ws, &m, &ml, &out->st)) == 1) {
        Autopart__V1__SearchEvent *ev = autopart__v1__search_event__unpack(NULL, ml, m);
        ck_assert_ptr_nonnull(ev);
        if (ev->event_case == AUTOPART__V1__SEARCH_EVENT__EVENT_ACCEPTED) {
            ck_assert_int_eq(n, 0); /* accepted comes first */
            out->origin = ev->accepted->origin;
            out->t_accepted = ap_mono_s();
            snprintf(out->id, sizeof out->id, "%s", ev->accepted->search_id);
        } else if (ev->event_case == AUTOPART__V1__SEARCH_EVENT__EVENT_PROGRESS) {
            if (!out->progress++)
                out->t_first_progress = ap_mono_s();
            out->last_episodes = ev->progress->episodes;
            if (ev->progress->episodes_per_s == 0 && ev->progress->tree_size == 0 && out->n_relayed < 64) {
                out->relayed_us[out->n_relayed] = ap_now_us();
                out->relayed_episodes[out->n_relayed++] = ev->progress->episodes;
            }
        } else if (ev->event_case == AUTOPART__V1__SEARCH_EVENT__EVENT_RESULT) {
            const uint8_t *f;
            ck_assert(svc_field(m, ml, 3, &f, &out->result_len));
            out->result = malloc(out->result_len + 1);
            memcpy(out->result, f, out->result_len);
        }
        autopart__v1__search_event__free_unpacked(ev, NULL);
        ap_free(m);
        n++;
    }
    out->rc = got == 0 && out->st.code == 0 ? 0 : -1;
    out->t_end = ap_mono_s();
    wire_stream_close(ws);
}

/* A search on a thread of its own: pthread_create(..., svc_bg_search_fn, &b)
 * with b.port and b.q set; the run is in b.run once joined. */
typedef struct svc_bg_search {
    int port;
    svc_search q;
    search_run run;
} svc_bg_search;

static inline void *svc_bg_search_fn(void *arg)
{
    svc_bg_search *b = arg;
    wire_conn *c = svc_conn(b->port);
    search_call(c, &b->q, &b->run);
    wire_close(c);
    return NULL;
}

/* What must agree between two runs of one search: everything but timings. */
static inline void same_answer(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    Autopart__V1__PartitionResult *x = autopart__v1__partition_result__unpack(NULL, na, a);
    Autopart__V1__PartitionResult *y = autopart__v1__partition_result__unpack(NULL, nb, b);
    ck_assert(x && y);
    ck_assert_msg(!strcmp(x->schedule, y->schedule), "schedules differ:\n%.1500s\n--- and ---\n%.1500s", x->schedule,
                  y->schedule);
    ck_assert_msg(!strcmp(x->module, y->module), "the modules differ");
    ck_assert_msg(!strcmp(x->report_json, y->report_json), "the reports differ");
    ck_assert_msg(!strcmp(x->explanation_json, y->explanation_json), "the explanations differ");
    ck_assert_int_eq(x->n_shardings, y->n_shardings);
    for (size_t i = 0; i < x->n_shardings; i++)
        ck_assert_str_eq(x->shardings[i]->spec_text, y->shardings[i]->spec_text);
    ck_assert(x->cost->runtime_s == y->cost->runtime_s);
    ck_assert_int_eq(x->search->episodes, y->search->episodes);
    ck_assert_int_eq(x->search->best_episode, y->search->best_episode);
    autopart__v1__partition_result__free_unpacked(x, NULL);
    autopart__v1__partition_result__free_unpacked(y, NULL);
}

/* ============================================= what main() reads first */

/* The searches' manual part: batch parallelism, the rest left to the search. */
#define SVC_BP_MANUAL "manual batch batch['inputs']=0 batch['targets']=0\n"

/* modelgen's transformer of `config` (heap, ap_free).  For main(), outside
 * a test: it exits on failure (no ck_assert there). */
static inline char *svc_generate(const char *config)
{
    char path[] = "/tmp/autopart-model-XXXXXX", cmd[600];
    int fd = mkstemp(path);
    char *text = NULL;
    size_t len;
    ap_error err;
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' transformer --config %s -q -o '%s'", TL_MODELGEN, config, path);
    if (system(cmd) != 0 || ap_read_file(path, &text, &len, &err) < 0) {
        fprintf(stderr, "cannot generate the %s transformer: %s\n", config, cmd);
        exit(1);
    }
    unlink(path);
    return text;
}

/* The paper's BP and MP schedules, one after the other (heap, ap_free);
 * NULL when they cannot be read.  For main(), like svc_generate. */
static inline char *svc_bpmp(void)
{
    char *bp, *mp, path[512];
    size_t len;
    ap_error err;
    snprintf(path, sizeof path, "%s/tests/models/schedules/bp.txt", AP_SOURCE_DIR);
    if (ap_read_file(path, &bp, &len, &err) < 0)
        return NULL;
    snprintf(path, sizeof path, "%s/tests/models/schedules/mp.txt", AP_SOURCE_DIR);
    if (ap_read_file(path, &mp, &len, &err) < 0) {
        ap_free(bp);
        return NULL;
    }
    ap_buf sb;
    ap_buf_init(&sb);
    ap_buf_printf(&sb, "%s\n%s\n", bp, mp);
    ap_free(bp);
    ap_free(mp);
    return ap_buf_take(&sb, NULL);
}

#endif /* SVC_H */
