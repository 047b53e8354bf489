/*
 * srv.h - what the files of autopartd share: the daemon's context, jobs,
 * the inbox through which other threads hand events to the loop, and the
 * work that runs on worker threads.
 *
 * Threads and ownership.  The libuv loop (the main thread) owns the daemon
 * state: jobs, queues, waiting calls, the store connection.  The gRPC
 * thread (rpc_grpc.c) unpacks requests and posts them to the inbox; worker
 * threads run one job's task at a time and post it back when done.  A job's
 * `work` belongs to the worker while its task runs and to the loop
 * otherwise; only `cancel` and the progress snapshot are shared, the first
 * atomic, the second under its mutex.
 */
#ifndef SRV_H
#define SRV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "ap.h"
#include "apply.h"
#include "autopart/v1/partitioner.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"
#include "http.h"
#include "rpc.h"
#include "store.h"

#define SRV_VERSION "autopartd 0.1.0"
/* Every version that can change an answer: a change of any of them must
 * change the key, or old answers would be served for new code.  Bump
 * `engine` when partir's actions or lowering change their output,
 * `costmodel` when the cost model does, `search` when the search does. */
#define SRV_KEY_VERSIONS "key=1;engine=0.2.0;costmodel=4;search=2"

#define SRV_LEASE_US (10 * 1000000LL)     /* a claim on a row lasts this long */
#define SRV_HEARTBEAT_US (2 * 1000000LL)  /* renewed this often */
#define SRV_CHECKPOINT_US (2 * 1000000LL) /* best-so-far written this often */
#define SRV_POINT_US (250 * 1000LL)        /* and when it improves, at most this often */
#define SRV_CKPT_S 2.0                    /* a search's checkpoint: copied at most this often, */
#define SRV_CKPT_BYTES_PER_S (4 << 20)    /* and less often as it grows (about 4 MiB/s at most) */
#define SRV_SWEEP_US (2 * 1000000LL)      /* orphans and cancellations looked for */
#define SRV_HITS_FLUSH_US (1 * 1000000LL)
#define SRV_REMOTE_POLL_US 250000LL       /* joined searches of other daemons */
#define SRV_STOP_WAIT_US (2 * 1000000LL)  /* after the grace period, for tasks to come back */
#define SRV_TRIM_BYTES (4 << 20)          /* after a request this big, memory goes back to the system */
#define SRV_GC_US (60 * 1000000LL)        /* retention runs this often */
#define SRV_GC_PROTECT_US (60 * 1000000LL) /* rows used this recently are never deleted */
#define SRV_MAX_LABEL 200

/* The methods, in the order of the table in calls.c. */
enum { M_SEARCH, M_APPLY, M_GET, M_LIST, M_CANCEL, M_STATS, M_HEALTH_CHECK, M_HEALTH_WATCH, M__COUNT };

typedef struct srv_options {
    const char *listen;
    const char *db_path;
    int max_concurrent;     /* searches running at once */
    int threads_per_search;
    int apply_threads;      /* workers for parsing, validation and Apply */
    int max_queue;          /* jobs waiting per pool */
    int64_t max_message_bytes;
    int64_t rpc_memory_bytes; /* gRPC's memory for requests still arriving (0: no bound) */
    int64_t cache_bytes;    /* answers kept packed in memory */
    int64_t max_queued_bytes; /* requests waiting in queues, in all */
    const char *token_file;
    const char *tls_cert, *tls_key, *tls_client_ca;
    bool insecure;
    double grace_s;         /* after SIGTERM, before calls are cancelled */
    double max_search_s;    /* a search's ceiling, answered with its best so far; 0: none */
    double abandon_s;       /* a search nobody waits for stops after this long, resumable */
    double keep_days;       /* retention: ended rows unused this long are deleted (0: kept) */
    int64_t keep_max_bytes; /* and past this size, the least recently used (0: no bound) */
    double test_stall_s;    /* tests only ($AUTOPARTD_TEST_STALL_S): every search first
                               sleeps this long, deaf to cancellation, as a task stuck
                               in a long lowering or a bug would be */
    bool quiet;
    const char *http;       /* the dashboard's host:port (http.h); NULL: none */
    const char *http_root;  /* its files; NULL: beside the binary */
} srv_options;

typedef struct srv srv;
typedef struct srv_job srv_job;

/* A cache hit not yet counted in the store. */
typedef struct srv_hit {
    int64_t id;
    uint64_t n;
} srv_hit;

/* cache.c: packed cache-hit answers by the hash of the request as written;
 * any thread. */
typedef struct srv_cache srv_cache;
typedef struct srv_cached {
    int64_t row_id;
    rpc_shared *first; /* Search: the accepted event; Apply: NULL */
    rpc_shared *last;  /* the answer (Apply) or the result event (Search) */
} srv_cached;
srv_cache *srv_cache_new(size_t max_bytes);
void srv_cache_free(srv_cache *c);
/* A hit: fills *out with references the caller gives back
 * (rpc_shared_unref), and counts the hit for the store. */
bool srv_cache_get(srv_cache *c, int method, const uint8_t *raw, srv_cached *out);
/* Adds an entry (references first and last; first may be NULL). */
void srv_cache_put(srv_cache *c, int method, const uint8_t *raw, int64_t row_id, rpc_shared *first,
                   rpc_shared *last);
/* The hits counted since the last call, by row (heap array, ap_free). */
int srv_cache_take_hits(srv_cache *c, srv_hit **out);
void srv_cache_stats(srv_cache *c, size_t *count, size_t *bytes);

/* A call waiting for a job's answer. */
typedef struct srv_waiter {
    struct srv_waiter *next;
    rpc_call *call;
    int method; /* M_SEARCH or M_APPLY */
    int origin; /* AUTOPART__V1__ORIGIN__... */
    srv_job *job;
    bool accepted_sent;
    int64_t progress_seen; /* episodes of the last progress event sent */
} srv_waiter;

enum job_stage {
    JOB_PREPARE_WAIT, /* in an intake queue for parsing and validation */
    JOB_PREPARING,
    JOB_RUN_WAIT,     /* prepared, row made, in a queue to run */
    JOB_RUNNING,
    JOB_REMOTE,       /* another daemon runs the row: polled */
};

enum { TASK_PREPARE, TASK_RUN };
enum { POOL_INTAKE, POOL_SEARCH, POOL__COUNT };
enum { CANCEL_NONE, CANCEL_USER, CANCEL_SHUTDOWN, CANCEL_ALONE };

/* What a task reads and writes: the loop's between tasks, the worker's
 * during one. */
typedef struct srv_work {
    int kind;                 /* STORE_APPLY or STORE_SEARCH */
    ProtobufCMessage *req;    /* the unpacked request (owned) */
    bool key_known;           /* a claimed row: the key it must still have */
    uint8_t expect_key[STORE_KEY_BYTES];
    int threads;              /* search threads allowed */
    /* outcome of the last task */
    rpc_code code;            /* RPC_OK or why it failed */
    char msg[1024];
    /* TASK_PREPARE */
    uint8_t key[STORE_KEY_BYTES], module_hash[STORE_KEY_BYTES];
    char module_name[256], mesh_text[256], device_name[64], axes_text[256];
    int axes[IR_MAX_AXES], n_axes; /* Search: the mesh axes searched */
    apply_state st;           /* the module and its context, kept for the run */
    cost_device dev;
    bool prepared;
    /* TASK_RUN */
    void *resume;             /* Search: the checkpoint of an interrupted run (heap), or NULL */
    size_t resume_len;
    uint8_t *result;          /* packed PartitionResult (heap) */
    size_t result_len;
    store_progress summary;
    int64_t replayed;         /* Search: episodes taken from `resume` */
} srv_work;

struct srv_job {
    srv *srv;                 /* for the worker's progress events */
    srv_job *next;            /* srv.jobs */
    srv_job *qnext;           /* in a fair queue */
    int kind;
    enum job_stage stage;
    int task, pool;           /* the task waiting or running */
    int64_t req_bytes;        /* the request's size, for the queues' byte bound */
    char client[SRV_MAX_LABEL + 64];  /* fairness group */
    bool have_raw, have_key;
    uint8_t raw[STORE_KEY_BYTES], key[STORE_KEY_BYTES];
    int64_t row_id;           /* 0 until a row exists */
    srv_waiter *waiters;
    atomic_int cancel;        /* CANCEL_* */
    bool ended;               /* its row ended and its calls were answered while its
                                 task ran (cancelled): it only waits for the task */
    srv_work work;
    /* progress, written by the worker, read by the loop */
    uv_mutex_t pmu;
    store_progress prog;      /* best_schedule: heap copy */
    char *prog_schedule;
    double prog_eps, prog_elapsed, prog_start;
    int64_t prog_tree;
    bool prog_fits;
    void *ckpt;               /* the search's checkpoint, copied from its progress (heap; NULL:
                                 none new since the last written) */
    size_t ckpt_len;
    double ckpt_copied_s;     /* worker: the search's elapsed time at the last copy */
    atomic_bool prog_posted;
    bool prog_dirty;          /* loop: not yet checkpointed */
    int64_t ckpt_us;          /* loop: when last checkpointed */
    double ckpt_best;         /* loop: the best runtime it wrote (0: none yet) */
    int64_t prog_seen;        /* loop: episodes last sent */
    int64_t started_us;
    int64_t alone_us;         /* Search: since when no call waits on it (0: one does) */
    /* JOB_REMOTE: what the row said when last polled */
    int64_t remote_progress_us;
};

/* Events handed to the loop. */
enum { EV_CALL, EV_CANCEL, EV_TASK_DONE, EV_PROGRESS, EV_RPC_STOPPED };
typedef struct srv_event {
    struct srv_event *next;
    int kind;
    rpc_call *call;
    int method;
    ProtobufCMessage *msg;    /* EV_CALL: unpacked request (owned) */
    bool have_raw;
    uint8_t raw[STORE_KEY_BYTES];
    size_t req_bytes;
    char client[SRV_MAX_LABEL + 64];
    srv_job *job;
} srv_event;

/* A fair queue: one FIFO per client group, served round-robin. */
typedef struct srv_fq_client {
    struct srv_fq_client *next;
    srv_job *head, *tail;
    char name[SRV_MAX_LABEL + 64];
} srv_fq_client;

typedef struct srv_fq {
    srv_fq_client *ring; /* the client served next; circular */
    int count, max;
} srv_fq;

/* fairq.c.  push: false when the queue holds max jobs (or out of memory);
 * pop: the next job, round-robin over clients, NULL when empty; remove:
 * takes a job out wherever it is. */
bool srv_fq_push(srv_fq *q, srv_job *job);
srv_job *srv_fq_pop(srv_fq *q);
bool srv_fq_remove(srv_fq *q, srv_job *job);

typedef struct srv_pool {
    srv *s;
    int id, n, busy;     /* busy: loop's count */
    uv_thread_t *threads;
    uv_mutex_t mu;
    uv_cond_t cv;
    srv_job *ready, *ready_tail; /* handed to the workers */
    bool quit;
    srv_fq queue;        /* loop's: waiting for a free worker */
} srv_pool;

typedef struct srv_stats {
    atomic_uint_fast64_t requests, errors, cache_hits; /* also counted on the gRPC thread */
    uint64_t joined, started;                          /* the loop's */
} srv_stats;

struct srv {
    srv_options opt;
    uv_loop_t loop;
    uv_async_t wake;
    uv_signal_t sigterm, sigint;
    uv_timer_t tick, grace;   /* grace: the grace period, then the wait for tasks */
    rpc_server *rpc;
    int port;
    srv_http *http;         /* the dashboard; its own threads and store connections */
    int http_port;
    store *db;
    srv_cache *cache;
    char owner[128];
    char *token;
    srv_pool pools[POOL__COUNT];
    int64_t queued_bytes;
    /* inbox */
    uv_mutex_t inbox_mu;
    srv_event *inbox, *inbox_tail;
    /* loop state */
    srv_job *jobs;
    srv_waiter *watchers; /* Health.Watch streams */
    srv_hit *hits;
    int n_hits, cap_hits;
    srv_stats stats;
    int64_t start_us, last_heartbeat, last_sweep, last_flush, last_remote, last_ckpt, last_gc;
    bool stopping, rpc_stopped, closed;
    int exit_code;
};

/* daemon.c */
int srv_run(const srv_options *opt);
int64_t srv_now_us(void);
void srv_post(srv *s, srv_event *ev);
void srv_log(srv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Queues a job's task in its pool; false when the queue is full. */
bool srv_submit(srv *s, srv_job *job, int task, int pool);
/* Whether srv_submit would take a job of `bytes` into the pool now. */
bool srv_can_submit(srv *s, int pool, int64_t bytes);
/* Takes a job out of its pool's queue (cancel); false if it was not there. */
bool srv_unqueue(srv *s, srv_job *job);

/* calls.c: the methods */
extern const rpc_method srv_methods[M__COUNT];
void srv_on_call(void *ud, rpc_call *c, int method, const uint8_t *req, size_t len);
void srv_on_cancelled(void *ud, rpc_call *c);
void srv_handle_call(srv *s, srv_event *ev);
void srv_handle_cancel(srv *s, rpc_call *c);
void srv_health_broadcast(srv *s);
/* Ends a call with an error status (counted). */
void srv_fail(srv *s, rpc_call *c, rpc_code code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void srv_reply(srv *s, rpc_call *c, const ProtobufCMessage *m);

/* jobs.c: the life of a search or an Apply */
void srv_job_request(srv *s, srv_event *ev);
void srv_job_task_done(srv *s, srv_job *job);
void srv_job_progress(srv *s, srv_job *job);
void srv_job_detach(srv *s, srv_waiter *w);
int srv_job_cancel(srv *s, int64_t id, int *status, ap_error *err);
void srv_jobs_tick(srv *s, int64_t now);
void srv_jobs_shutdown(srv *s);
/* The daemon exits without the tasks still out: their searches' last
 * snapshots become their checkpoints. */
void srv_jobs_abandon(srv *s);
void srv_job_free(srv_job *job);
/* Before a search runs: the checkpoint its row holds, for it to resume. */
void srv_job_load_checkpoint(srv *s, srv_job *job);
void srv_flush_hits(srv *s);
int srv_jobs_count(srv *s, int stage);

/* work.c: what runs on the workers */
void srv_work_prepare(srv_job *job);
void srv_work_run(srv *s, srv_job *job);
void srv_work_release(srv_work *w);
bool srv_search_available(void);
/* The SearchSummary of a row (strings point into row; axes into *axes_buf). */
void srv_row_summary(const store_row *row, Autopart__V1__SearchSummary *out, char *key_hex, char *hash_hex,
                     char *id_text, char **axes, int max_axes, char *axes_buf);

/* valid.c: whether the wire bytes of a message of type d keep the rules
 * protobuf-c does not check: strings UTF-8 without NUL, enums one of
 * their values.  When not, msg names the field ("module.name: is not valid
 * UTF-8 (at byte 5)").  Bytes that do not parse are left to the unpacker. */
bool srv_check_wire(const ProtobufCMessageDescriptor *d, const uint8_t *bytes, size_t len, char *msg, size_t size);

/* key.c */
/* SHA-256 of a request as written (but for the top-level fields of key.h's
 * SRV_KEY_IGNORED: the client label, the thread count), with the key
 * versions. */
int srv_raw_hash(int method, const ProtobufCMessage *req, uint8_t out[STORE_KEY_BYTES]);

typedef struct srv_sha srv_sha;
srv_sha *srv_sha_new(const char *domain);
void srv_sha_field(srv_sha *h, const char *name, const void *data, size_t len);
void srv_sha_str(srv_sha *h, const char *name, const char *s);
void srv_sha_i64(srv_sha *h, const char *name, int64_t v);
void srv_sha_f64(srv_sha *h, const char *name, double v);
/* Writes the digest and frees h.  -1 when OpenSSL failed. */
int srv_sha_end(srv_sha *h, uint8_t out[STORE_KEY_BYTES]);

/* Bytes of a message that has `field` as its last field, holding `sub`
 * (already packed): the message packed without it, then the field.  The
 * way a stored answer is sent byte for byte inside a new message.  Heap;
 * NULL when out of memory. */
uint8_t *srv_pack_with(const ProtobufCMessage *m, uint32_t field, const void *sub, size_t sub_len, size_t *len);

#endif /* SRV_H */
