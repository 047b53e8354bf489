/*
 * test_fairq.c - the worker pools' queues: bounded, first in first out per
 * client, and round-robin between clients, so that one client's burst does
 * not keep the others waiting.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "srv.h"
#include "testlib.h"

static srv_job jobs[64];

static srv_job *job(int i, const char *client)
{
    memset(&jobs[i], 0, sizeof jobs[i]);
    snprintf(jobs[i].client, sizeof jobs[i].client, "%s", client);
    jobs[i].row_id = i;
    return &jobs[i];
}

START_TEST(test_round_robin)
{
    srv_fq q = {.max = 64};
    /* a burst from A, then one each from B and C */
    for (int i = 0; i < 5; i++)
        ck_assert(srv_fq_push(&q, job(i, "label:A")));
    ck_assert(srv_fq_push(&q, job(5, "label:B")));
    ck_assert(srv_fq_push(&q, job(6, "peer:ipv4:127.0.0.1")));
    ck_assert_int_eq(q.count, 7);
    static const int want[] = {0, 5, 6, 1, 2, 3, 4};
    for (int i = 0; i < 7; i++) {
        srv_job *j = srv_fq_pop(&q);
        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(j->row_id, want[i]);
    }
    ck_assert_ptr_null(srv_fq_pop(&q));
    ck_assert_int_eq(q.count, 0);
    ck_assert_ptr_null(q.ring);
}
END_TEST

START_TEST(test_bound_and_remove)
{
    srv_fq q = {.max = 3};
    ck_assert(srv_fq_push(&q, job(0, "a")));
    ck_assert(srv_fq_push(&q, job(1, "b")));
    ck_assert(srv_fq_push(&q, job(2, "a")));
    ck_assert(!srv_fq_push(&q, job(3, "c"))); /* full */
    ck_assert(srv_fq_remove(&q, &jobs[1])); /* b leaves the rotation */
    ck_assert(!srv_fq_remove(&q, &jobs[1]));
    ck_assert(srv_fq_push(&q, job(3, "c")));
    ck_assert_int_eq(srv_fq_pop(&q)->row_id, 0);
    ck_assert_int_eq(srv_fq_pop(&q)->row_id, 3);
    ck_assert_int_eq(srv_fq_pop(&q)->row_id, 2);
    ck_assert_ptr_null(srv_fq_pop(&q));
    /* removing the last job of the client whose turn it is */
    ck_assert(srv_fq_push(&q, job(4, "x")));
    ck_assert(srv_fq_push(&q, job(5, "y")));
    ck_assert(srv_fq_remove(&q, &jobs[4]));
    ck_assert_int_eq(srv_fq_pop(&q)->row_id, 5);
    ck_assert_ptr_null(srv_fq_pop(&q));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fairq");
    TCase *tc = tcase_create("fairq");
    tcase_add_test(tc, test_round_robin);
    tcase_add_test(tc, test_bound_and_remove);
    suite_add_tcase(s, tc);
    return tl_run(s);
}
