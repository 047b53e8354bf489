/*
 * srv.h - what the files of autopartd share: the daemon's context, jobs,
 * the pools of worker threads and the store's thread, and what each file
 * exports to the others.
 *
 * Threads and ownership.  The libuv loop (the main thread) owns the daemon
 * state: jobs, queues, waiting calls.  It never waits on anything: the
 * gRPC thread (rpc_grpc.c) unpacks requests and posts them to the inbox;
 * worker threads run one job's task at a time (prepare, run); the store's
 * thread (db.c) runs every store operation on its own connection.  Each
 * hands its finished task back through the loop's completion list, linked
 * through the task itself (libuv's threadpool: work on the thread, done on
 * the loop; nothing allocated on the way back, so nothing can fail there).
 * A job's `work` belongs to the worker while its task runs and to the loop
 * otherwise; only `cancel` and the progress snapshot are shared, the first
 * atomic, the second under its mutex.  An operation on the store that
 * names a job holds it (job->dbops) until its `done` ran.
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
#include "metrics.h"
#include "rpc.h"
#include "store.h"

#define SRV_VERSION "autopartd 0.1.0"
/* Every version that can change an answer: a change of any of them must
 * change the key, or old answers would be served for new code.  Bump
 * `engine` when partir's actions or lowering change their output,
 * `costmodel` when the cost model does, `search` when the search does. */
#define SRV_KEY_VERSIONS "key=2;engine=0.2.5;costmodel=10;search=2"

#define SRV_LEASE_US (10 * 1000000LL)     /* a claim on a row lasts this long (--lease-s) */
#define SRV_CHECKPOINT_US (2 * 1000000LL) /* best-so-far written this often */
#define SRV_POINT_US (250 * 1000LL)        /* and when it improves, at most this often */
#define SRV_CKPT_S 2.0                    /* a search's checkpoint: copied at most this often, */
#define SRV_CKPT_BYTES_PER_S (4 << 20)    /* and less often as it grows (about 4 MiB/s at most) */
#define SRV_HITS_FLUSH_US (1 * 1000000LL)
#define SRV_REMOTE_POLL_US 250000LL       /* rows of this daemon's jobs that others run */
#define SRV_RETRY_US (1 * 1000000LL)      /* results to store again while the store is away */
#define SRV_OUTAGE_REMIND_S 60.0          /* the log says the store still fails this often */
#define SRV_STOP_WAIT_US (2 * 1000000LL)  /* after the grace period, for tasks to come back */
#define SRV_TRIM_BYTES (4 << 20)          /* after a request this big, memory goes back to the system */
#define SRV_GC_US (60 * 1000000LL)        /* retention by age runs this often, */
#define SRV_GC_SIZE_US (1 * 1000000LL)    /* the bound on size is checked this often */
#define SRV_GC_ROWS 500                   /* rows deleted at most in one run (short transactions) */
#define SRV_GC_PROTECT_US (5 * 1000000LL) /* rows used this recently are never deleted */
#define SRV_MAX_LABEL 200
#define SRV_DB_READERS 2                  /* store threads that only look up new requests */

/* The methods, in the order of the table in calls.c. */
enum { M_SEARCH, M_APPLY, M_GET, M_LIST, M_CANCEL, M_STATS, M_HEALTH_CHECK, M_HEALTH_WATCH, M__COUNT };

typedef struct srv_options {
    const char *listen;
    const char *db_path;    /* an SQLite file or a PostgreSQL connection string (store.h) */
    const char *node_name;  /* this host in owner names; NULL: the host name */
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
    double test_close_pause_s; /* tests only ($AUTOPARTD_TEST_CLOSE_PAUSE_S): the shutdown
                                  waits this long between stopping the signal watchers and
                                  ignoring the signals, the gap a SIGTERM once killed it in */
    bool quiet;
    int64_t lease_us;       /* a row's lease; heartbeats and sweeps at a fifth of it */
    const char *http;       /* the dashboard's host:port (http.h); NULL: none */
    const char *http_root;  /* its files; NULL: beside the binary */
} srv_options;

typedef struct srv srv;
typedef struct srv_job srv_job;

/* A unit of work for a pool (pool.c), embedded in what it works on: `work`
 * runs on one of the pool's threads (with that thread's context: the
 * store's connection for the store's pool), then `done` on the loop. */
typedef struct srv_task srv_task;
struct srv_task {
    srv_task *next;
    void (*work)(srv_task *t, void *thread_ctx);
    void (*done)(srv *s, srv_task *t);
};

/* A cache hit not yet counted in the store. */
typedef struct srv_hit {
    int64_t id;
    uint64_t n;
} srv_hit;

/* cache.c: packed cache-hit answers by the hash of the request as written;
 * any thread. */
typedef struct srv_cache srv_cache;
srv_cache *srv_cache_new(size_t max_bytes);
void srv_cache_free(srv_cache *c);
/* Answers call c from s's cache when the request (method, raw hash) is
 * there: the accepted event (Search) and the answer sent, the hit counted
 * (for Stats, /metrics and the store).  false: not in memory. */
bool srv_cache_answer(srv *s, rpc_call *c, int method, const uint8_t *raw);
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
    JOB_LOOKUP,       /* the store is asked whether the request was seen before */
    JOB_PREPARE_WAIT, /* in an intake queue for parsing and validation */
    JOB_PREPARING,
    JOB_BEGIN,        /* its row is being made */
    JOB_RUN_WAIT,     /* prepared, row made, in a queue to run */
    JOB_STARTING,     /* a worker kept for it; its row being taken and started */
    JOB_RUNNING,
    JOB_FINISHING,    /* its outcome being stored (again, while the store is away) */
    JOB_REMOTE,       /* another daemon runs the row, or may: polled */
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
    srv_task worker_task;     /* the prepare or run task (pool.c) */
    srv_task progress_task;   /* the worker's progress, handed to the loop */
    int dbops;                /* store operations holding it */
    bool dead;                /* removed: freed when the last one is done */
    bool row_owned;           /* its row is this daemon's (else: queued for any daemon) */
    bool urgent;              /* queued first: an orphan taken over, a start the store refused */
    srv_job *next;            /* srv.jobs */
    srv_job *qnext;           /* in a fair queue */
    int kind;
    enum job_stage stage;
    int task, pool;           /* the task waiting or running */
    int64_t req_bytes;        /* the request's size, for the queues' byte bound */
    int64_t queued_us;        /* when it entered its pool's queue */
    char client[SRV_MAX_LABEL + 64];  /* fairness group */
    bool have_raw, have_key;
    uint8_t raw[STORE_KEY_BYTES], key[STORE_KEY_BYTES];
    int64_t row_id;           /* 0 until a row exists */
    srv_waiter *waiters;
    atomic_int cancel;        /* CANCEL_* */
    bool ended;               /* its row ended and its calls were answered while it
                                 waited on a task or the store (cancelled): it only
                                 waits for them, out of sight */
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
    int64_t retry_us;         /* JOB_FINISHING: when to store the outcome again */
    int outage_said;          /* the last store outage (srv_outage.n) a line about it named */
};

/* Calls handed to the loop by the gRPC thread (allocated there: a failure
 * there fails the call). */
enum { EV_CALL, EV_CANCEL };
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
/* The same, served next (a job that waited long already). */
bool srv_fq_push_first(srv_fq *q, srv_job *job);
srv_job *srv_fq_pop(srv_fq *q);
bool srv_fq_remove(srv_fq *q, srv_job *job);

/* Threads that run tasks (pool.c).  The job pools (intake, search) keep
 * at most n tasks handed over, counted by the loop (busy), and a fair
 * queue of jobs waiting for one; the store's pool takes every operation
 * in order. */
typedef struct srv_pool_thread {
    struct srv_pool *pool;
    uv_thread_t thread;
    void *ctx;                /* given to each task's work */
} srv_pool_thread;

typedef struct srv_pool {
    srv *s;
    int id, n, busy;          /* busy: loop's count */
    srv_pool_thread *threads;
    int started;
    uv_mutex_t mu;
    uv_cond_t cv;
    srv_task *ready, *ready_tail; /* handed to the threads */
    bool quit;
    srv_fq queue;             /* loop's: jobs waiting for a free worker */
    int64_t paused_until;     /* loop's: no job taken from the queue before (the store is away) */
} srv_pool;

/* pool.c.  ctx: one per thread (NULL: none).  Tasks handed over before
 * srv_pool_stop all run. */
int srv_pool_start(srv *s, srv_pool *p, int id, int n, void **ctx, ap_error *err);
void srv_pool_push(srv_pool *p, srv_task *t);
void srv_pool_stop(srv_pool *p);
/* From any thread: t's `done` runs on the loop soon (never fails). */
void srv_complete(srv *s, srv_task *t);
/* On the loop: runs the `done` of every task handed back so far. */
void srv_run_completions(srv *s);

typedef struct srv_stats {
    atomic_uint_fast64_t requests, errors, cache_hits; /* also counted on the gRPC thread */
    uint64_t joined, started;                          /* the loop's */
} srv_stats;

/* The store's outages as the log tells them (db.c): a line when the store
 * starts failing, with why; a line a minute while it goes on; a line when
 * it answers again.  Lines about the chores (sweeps, heartbeats,
 * checkpoints) leave out the store's failures, told here; a line about a
 * search the store failed comes once per search and outage. */
typedef struct srv_outage {
    bool down;
    int n;               /* outages so far */
    double since, said;  /* ap_mono_s: when it began, when the log last said so */
    uint64_t failed;     /* operations failed in this one */
    char why[512];       /* the last failure's message */
} srv_outage;

struct srv {
    srv_options opt;
    uv_loop_t loop;
    uv_async_t wake;
    /* tasks handed back to the loop (srv_complete) */
    uv_mutex_t done_mu;
    srv_task *done_head, *done_tail;
    srv_task stopped_task;  /* the gRPC layer's end, handed back like a task */
    uv_signal_t sigterm, sigint;
    uv_timer_t tick, grace;   /* grace: the grace period, then the wait for tasks */
    rpc_server *rpc;
    int port;
    srv_http *http;         /* the dashboard; its own threads and store connections */
    int http_port;
    srv_pool db;            /* the store's thread (db.c) */
    store *db_conn;         /* its connection */
    srv_pool db_read;       /* readers: the lookups of new requests (db.c) */
    store *db_read_conn[SRV_DB_READERS];
    int db_inflight;        /* operations handed to it and not yet done */
    bool released;          /* at shutdown: the rows given back */
    srv_cache *cache;
    char owner[128];
    char store_name[300];   /* the store's address as it may be printed (no password) */
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
    bool hits_busy, heartbeat_busy, sweep_busy, poll_busy, cancels_busy, gc_busy, alone_busy; /* one at a time */
    bool trim;              /* a big request ended: memory back to the system */
    srv_outage outage;
    srv_stats stats;
    srv_metrics metrics;    /* Prometheus's (/metrics): any thread */
    int64_t start_us, last_heartbeat, last_sweep, last_flush, last_remote, last_ckpt, last_gc, last_gc_size;
    int64_t last_gc_log, gc_rows, gc_bytes_before; /* retention's log line: rows deleted since */
    bool stopping, rpc_stopped, closed;
    int exit_code;
};

/* util.c: what every file of the daemon uses (a leaf: it calls none of them) */
void srv_log(srv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends a call with an error status (counted). */
void srv_fail(srv *s, rpc_call *c, rpc_code code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void srv_reply(srv *s, rpc_call *c, const ProtobufCMessage *m);

/* daemon.c */
int srv_run(const srv_options *opt);
/* calls.c: the methods */
extern const rpc_method srv_methods[M__COUNT];
void srv_on_call(void *ud, rpc_call *c, int method, const uint8_t *req, size_t len);
void srv_on_cancelled(void *ud, rpc_call *c);
/* On the loop: handles the calls and cancellations the gRPC thread posted
 * to the inbox. */
void srv_run_inbox(srv *s);
/* At exit: frees what the inbox still holds. */
void srv_inbox_free(srv *s);
void srv_health_broadcast(srv *s);

/* jobs.c: the life of a search or an Apply */
void srv_job_request(srv *s, srv_event *ev);
void srv_job_detach(srv *s, srv_waiter *w);
/* CancelSearch of row id: the call is answered (here, or once the store
 * said). */
void srv_job_cancel_call(srv *s, rpc_call *c, int64_t id);
void srv_jobs_tick(srv *s, int64_t now);
/* The next queued jobs of a pool, for its free workers (a paused pool's,
 * when its pause is over). */
void srv_pump(srv *s, int pool);
void srv_jobs_shutdown(srv *s);
/* The daemon exits without the tasks still out: their searches' last
 * snapshots become their checkpoints (store operations). */
void srv_jobs_abandon(srv *s);
/* Hands the cache hits counted so far to the store (in order before any
 * later operation). */
void srv_flush_hits(srv *s);
int srv_jobs_count(srv *s, int stage);

/* job.c: a job's memory */
void srv_job_free(srv_job *job);
/* A store operation is done with the job (db.c): a removed job is freed
 * when nothing holds it any more. */
void srv_job_release_hold(srv *s, srv_job *job);

/* db.c: the store's thread.  An operation is a struct that starts with a
 * srv_dbop, allocated by srv_db_new (NULL: out of memory) and handed over
 * with srv_db_submit; `fn` runs on the store's thread with its connection
 * and sets rc (and err), `cb` on the loop; then the operation is freed (with
 * `job`'s hold given back).  Operations run one at a time, in the order
 * submitted. */
typedef struct srv_dbop srv_dbop;
typedef void (*srv_db_fn)(store *db, srv_dbop *op);
typedef void (*srv_db_cb)(srv *s, srv_dbop *op);
struct srv_dbop {
    srv_task task;
    srv *srv;
    srv_db_fn fn;
    srv_db_cb cb;
    void (*cleanup)(srv_dbop *op); /* frees what the operation owns; NULL: nothing */
    srv_job *job;           /* held while the operation is out; NULL: none */
    int rc;
    ap_error err;
};
void *srv_db_new(srv *s, size_t size, srv_db_fn fn, srv_db_cb cb, srv_job *job);
void srv_db_submit(srv *s, srv_dbop *op);
/* Whether a line about job's failed operation op belongs in the log: not
 * when the store failed it and the log named this outage for this search
 * already (the outage itself is told once, by db.c). */
bool srv_db_say(srv *s, srv_job *job, const srv_dbop *op);
/* An operation that only reads, and needs no order with the others (the
 * lookup of a new request): on one of the reader threads, each with its
 * own connection, beside the store's thread. */
void srv_db_submit_read(srv *s, srv_dbop *op);
/* Opens the readers' connections (observed by `observe`) and starts the
 * threads; s->db_conn is the store's thread's. */
int srv_db_start(srv *s, store_observer observe, ap_error *err);
void srv_db_stop(srv *s);

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
