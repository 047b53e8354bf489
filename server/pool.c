/*
 * pool.c - autopartd's pools of threads, in libuv's threadpool style: a
 * task carries its `work` (run on a pool thread) and its `done` (run on the
 * loop afterwards), and is handed back to the loop through a list linked
 * through the task itself, so handing back allocates nothing and cannot
 * fail.  Each thread has a context its tasks get (the store's pool: the
 * thread's connection).
 */
#include "srv.h"

static void thread_main(void *arg)
{
    srv_pool_thread *pt = arg;
    srv_pool *p = pt->pool;
    for (;;) {
        uv_mutex_lock(&p->mu);
        while (!p->ready && !p->quit)
            uv_cond_wait(&p->cv, &p->mu);
        srv_task *t = p->ready;
        if (!t) {
            uv_mutex_unlock(&p->mu);
            break;
        }
        p->ready = t->next;
        if (!p->ready)
            p->ready_tail = NULL;
        uv_mutex_unlock(&p->mu);
        t->work(t, pt->ctx);
        srv_complete(p->s, t);
    }
}

int srv_pool_start(srv *s, srv_pool *p, int id, int n, void **ctx, ap_error *err)
{
    p->s = s;
    p->id = id;
    uv_mutex_init(&p->mu);
    uv_cond_init(&p->cv);
    p->threads = ap_calloc((size_t)n, sizeof *p->threads);
    if (!p->threads)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->threads[i].pool = p;
        p->threads[i].ctx = ctx ? ctx[i] : NULL;
        if (uv_thread_create(&p->threads[i].thread, thread_main, &p->threads[i]) != 0)
            return ap_error_set(err, AP_EINTERNAL, "cannot start worker threads");
        p->started++;
    }
    return 0;
}

void srv_pool_push(srv_pool *p, srv_task *t)
{
    t->next = NULL;
    uv_mutex_lock(&p->mu);
    if (p->ready_tail)
        p->ready_tail->next = t;
    else
        p->ready = t;
    p->ready_tail = t;
    uv_cond_signal(&p->cv);
    uv_mutex_unlock(&p->mu);
}

void srv_pool_stop(srv_pool *p)
{
    if (!p->threads)
        return;
    uv_mutex_lock(&p->mu);
    p->quit = true;
    uv_cond_broadcast(&p->cv);
    uv_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        uv_thread_join(&p->threads[i].thread);
    ap_free(p->threads);
    p->threads = NULL;
    uv_cond_destroy(&p->cv);
    uv_mutex_destroy(&p->mu);
}

void srv_complete(srv *s, srv_task *t)
{
    t->next = NULL;
    uv_mutex_lock(&s->done_mu);
    if (s->done_tail)
        s->done_tail->next = t;
    else
        s->done_head = t;
    s->done_tail = t;
    uv_mutex_unlock(&s->done_mu);
    uv_async_send(&s->wake); /* coalesced: one wake-up may carry many */
}

void srv_run_completions(srv *s)
{
    uv_mutex_lock(&s->done_mu);
    srv_task *t = s->done_head;
    s->done_head = s->done_tail = NULL;
    uv_mutex_unlock(&s->done_mu);
    while (t) {
        srv_task *next = t->next;
        t->done(s, t);
        t = next;
    }
}
