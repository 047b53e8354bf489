/*
 * fairq.c - the bounded queues of autopartd's worker pools: one FIFO per
 * client group (its label, else its address), served round-robin, so a
 * client that sends a burst waits behind itself, not in front of everyone
 * else.  The loop's alone.
 */
#include <stdio.h>
#include <string.h>

#include "srv.h"

/* Appends a job to its client's FIFO, or (first) puts it before the
 * others and makes its client the next served. */
static bool push(srv_fq *q, srv_job *job, bool first)
{
    if (q->count >= q->max)
        return false;
    srv_fq_client *c = NULL, *last = NULL;
    if (q->ring) {
        srv_fq_client *x = q->ring;
        do {
            if (!strcmp(x->name, job->client))
                c = x;
            last = x;
            x = x->next;
        } while (x != q->ring);
    }
    if (!c) {
        c = ap_calloc(1, sizeof *c);
        if (!c)
            return false;
        snprintf(c->name, sizeof c->name, "%s", job->client);
        if (last) { /* joins the rotation last */
            c->next = q->ring;
            last->next = c;
        } else {
            c->next = c;
            q->ring = c;
        }
    }
    if (first) {
        job->qnext = c->head;
        c->head = job;
        if (!c->tail)
            c->tail = job;
        q->ring = c;
    } else {
        job->qnext = NULL;
        if (c->tail)
            c->tail->qnext = job;
        else
            c->head = job;
        c->tail = job;
    }
    q->count++;
    return true;
}

bool srv_fq_push(srv_fq *q, srv_job *job)
{
    return push(q, job, false);
}

bool srv_fq_push_first(srv_fq *q, srv_job *job)
{
    return push(q, job, true);
}

static void drop_client(srv_fq *q, srv_fq_client *c)
{
    if (c->next == c) {
        q->ring = NULL;
    } else {
        srv_fq_client *prev = c;
        while (prev->next != c)
            prev = prev->next;
        prev->next = c->next;
        if (q->ring == c)
            q->ring = c->next;
    }
    ap_free(c);
}

srv_job *srv_fq_pop(srv_fq *q)
{
    srv_fq_client *c = q->ring;
    if (!c)
        return NULL;
    srv_job *job = c->head;
    c->head = job->qnext;
    if (!c->head)
        c->tail = NULL;
    q->count--;
    q->ring = c->next; /* the next client's turn */
    if (!c->head)
        drop_client(q, c);
    return job;
}

bool srv_fq_remove(srv_fq *q, srv_job *job)
{
    srv_fq_client *c = q->ring;
    if (!c)
        return false;
    do {
        srv_job *prev = NULL;
        for (srv_job *j = c->head; j; prev = j, j = j->qnext) {
            if (j != job)
                continue;
            if (prev)
                prev->qnext = j->qnext;
            else
                c->head = j->qnext;
            if (c->tail == j)
                c->tail = prev;
            q->count--;
            if (!c->head)
                drop_client(q, c);
            return true;
        }
        c = c->next;
    } while (c != q->ring);
    return false;
}

