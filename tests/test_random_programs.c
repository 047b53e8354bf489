/*
 * test_random_programs.c - the seeded property test of partitioning over
 * the shapes of programs: each seed draws a random, well-typed StableHLO
 * program (randprog.h), a random mesh of 1-3 axes of sizes 1-5 and a
 * random action sequence (randsched.h, as test_check's); the program must
 * parse, the state must lower, the lowered module must print and parse
 * back to the same text, and the equivalence check (ir_check) must find
 * the partitioned program equivalent or refuse it with an error (not
 * AP_ECONFLICT: that is a wrong program caught).  Refusals are counted by
 * reason and printed; more than RP_MAX_REFUSED percent of
 * them means the generator or the partitioner needs a look.
 *
 * AP_TEST_SEQUENCES=N runs N seeds, AP_TEST_FIRST=S from seed S (a failure
 * names its seed); AP_RANDPROG_PRINT=1 prints each program.  A long local
 * hunt: AP_TEST_SEQUENCES=5000 nice -n 19 build/tests/test_random_programs.
 */
#include "testlib.h"
#include "randprog.h"
#include "randsched.h"

/* Seeds per run of the test: about 14 ms of CPU each (14 s in all on the
 * 2-core machine), a quarter of them under ASan+UBSan. */
#define PROGRAMS 1000
#define RP_MAX_REFUSED 30

/* "a=3,b=1": 1-3 axes of sizes 1-5. */
static void random_mesh(uint64_t *rng, char *text, size_t size)
{
    int n = 1 + (int)below(rng, 3), k = 0;
    for (int a = 0; a < n; a++)
        k += snprintf(text + k, size - (size_t)k, "%s%c=%u", a ? "," : "", 'a' + a, 1 + below(rng, 5));
}

/* Refusal reasons and how often each came, keyed by the first words of
 * the message (where it points into the program left out). */
typedef struct reasons {
    char text[32][96];
    int count[32];
    int n, total;
} reasons;

/* What the schedules did, to see that the seeds test something. */
typedef struct tally {
    int actions;                     /* accepted */
    int communicating;               /* seeds whose lowering communicates */
    uint64_t coll[IR_COLL__COUNT];   /* collectives by kind */
    uint64_t dynslice;
    /* per opcode: ops seen, ops looping over an axis by a tile, by a sum */
    int seen[IR_OP__COUNT], tiled[IR_OP__COUNT], summed[IR_OP__COUNT];
} tally;

static void tally_loops(tally *t, const ir_partition *p)
{
    const ir_pctx *c = ir_partition_ctx(p);
    for (uint32_t i = 0; i < ir_pctx_num_ops(c); i++) {
        int axes[IR_MAX_AXES], dims[IR_MAX_AXES], op = ir_pctx_op(c, i)->opcode;
        char kinds[IR_MAX_AXES];
        int n = ir_partition_op_nest(p, i, axes, kinds, dims);
        bool tile = false, sum = false;
        for (int k = 0; k < n; k++)
            tile |= kinds[k] == 't', sum |= kinds[k] == 's';
        t->seen[op]++;
        t->tiled[op] += tile;
        t->summed[op] += sum;
    }
}

static void reason_add(reasons *r, const char *msg)
{
    char key[96];
    /* drop a `file:line:col: ` prefix and keep the first 60 characters */
    const char *s = strstr(msg, ": error: ");
    s = s ? s + 9 : msg;
    snprintf(key, sizeof key, "%.60s", s);
    for (char *c = key; *c; c++)
        if (*c == '\n')
            *c = ' ';
    r->total++;
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->text[i], key) == 0) {
            r->count[i]++;
            return;
        }
    if (r->n < 32) {
        snprintf(r->text[r->n], sizeof r->text[r->n], "%s", key);
        r->count[r->n++] = 1;
    }
}

/* One seed: NULL when the program is equivalent or refused (counted in
 * *refused), else what went wrong (heap; free).  drop: the lowering the
 * check runs leaves out its first all_reduce (a planted bug). */
static char *run_seed(uint64_t seed, rp_gen *g, reasons *refused, int *equivalent, tally *t, bool drop)
{
    ap_buf text, why, sched;
    ap_buf_init(&text);
    ap_buf_init(&why);
    ap_buf_init(&sched);
    rp_program(seed, g, &text);
    if (getenv("AP_RANDPROG_PRINT"))
        printf("-- seed %llu\n%s", (unsigned long long)seed, text.data);
    uint64_t rng = 0x2545F4914F6CDD1Dull * (seed + 1);
    char mesh_text[64], msg[1024];
    random_mesh(&rng, mesh_text, sizeof mesh_text);
    ir_module *m = tl_parse(text.data, "randprog.mlir", msg, sizeof msg);
    ir_pctx *c = NULL;
    ir_partition *p = NULL;
    ir_mesh mesh;
    ap_error err;
    const ir_value **vals = NULL;
    if (!m) {
        ap_buf_printf(&why, "parse: %s", msg);
        goto out;
    }
    ck_assert_int_eq(ir_mesh_parse(mesh_text, &mesh, &err), 0);
    if (ir_pctx_new(m, ir_module_entry(m), &mesh, &c, &err) < 0) {
        ap_error_format(&err, msg, sizeof msg);
        ap_buf_printf(&why, "ir_pctx_new: %s", msg);
        goto out;
    }
    ck_assert_int_eq(ir_partition_new(c, &p, &err), 0);
    vals = malloc(sizeof *vals * 4096);
    uint32_t n_vals = candidates(c, vals, 4096);
    if (n_vals)
        t->actions += random_actions(p, &rng, vals, n_vals);
    else
        ck_assert_int_eq(ir_propagate(p, &err), 0);
    ir_partition_schedule(p, &sched);
    tally_loops(t, p);

    ir_check_opts o = IR_CHECK_OPTS_DEFAULT;
    o.seed = seed;
    if (drop)
        o.drop_all_reduce = 0;
    ir_check_report r;
    int rc = ir_check(p, &o, &r, &err);
    if (rc < 0) {
        ap_error_format(&err, msg, sizeof msg);
        /* AP_ECONFLICT is no refusal: the check ran the partitioned
         * program and found it wrong (copies of a replicated value that
         * differ between devices, devices whose control flow diverges) */
        if (rc == AP_ECONFLICT || rc == AP_EINTERNAL)
            ap_buf_printf(&why, "the check found the partitioned program wrong: %s\n", msg);
        else
            reason_add(refused, msg);
        goto out;
    }
    for (uint32_t j = 0; j < r.n_results; j++)
        if (!r.results[j].ok)
            ap_buf_printf(&why, "NOT equivalent: result %u: loops %g, spmd %g, f64 %g (tol %g, %s)\n", j,
                          r.results[j].error[0], r.results[j].error[1], r.results[j].error_f64, r.results[j].tol,
                          r.results[j].tol_basis);
    if (!r.ok && !why.len)
        ap_buf_puts(&why, "NOT equivalent\n");
    ir_check_report_free(&r);
    if (why.len)
        goto out;

    /* the lowered module prints, and its text parses back to itself */
    ir_lowered lw;
    if (ir_lower(p, &lw, &err) < 0) {
        ap_error_format(&err, msg, sizeof msg);
        ap_buf_printf(&why, "ir_lower failed after the check passed: %s", msg);
        goto out;
    }
    uint64_t n_coll = 0;
    for (int k = 0; k < IR_COLL__COUNT; k++)
        t->coll[k] += lw.count[k], n_coll += lw.count[k];
    t->dynslice += lw.n_dynslice;
    t->communicating += n_coll > 0;
    ap_buf b1, b2;
    ap_buf_init(&b1);
    ap_buf_init(&b2);
    if (ir_print(lw.module, &b1, NULL) < 0) {
        ap_buf_puts(&why, "printing the lowered module failed");
    } else {
        ir_module *back = tl_parse(b1.data, "lowered.mlir", msg, sizeof msg);
        if (!back) {
            ap_buf_printf(&why, "the lowered module does not parse back: %s\n%s", msg, b1.data);
        } else {
            if (ir_print(back, &b2, NULL) < 0 || b2.len != b1.len || memcmp(b1.data, b2.data, b1.len) != 0)
                ap_buf_printf(&why, "the lowered module prints differently once parsed back:\n%s\n-- back:\n%s",
                              b1.data, b2.data ? b2.data : "");
            /* and the text means what the module in memory did (as
             * `autopart check --spmd` reads a lowering back) */
            o.spmd = back;
            if (!why.len && ir_check(p, &o, &r, &err) < 0) {
                ap_error_format(&err, msg, sizeof msg);
                ap_buf_printf(&why, "the check of the lowered module parsed back failed: %s\n%s", msg, b1.data);
            } else if (!why.len) {
                if (!r.ok)
                    ap_buf_printf(&why, "the lowered module parsed back is NOT equivalent:\n%s", b1.data);
                ir_check_report_free(&r);
            }
            ir_module_free(back);
        }
    }
    ap_buf_free(&b1);
    ap_buf_free(&b2);
    ir_lowered_free(&lw);
    if (!why.len)
        (*equivalent)++;
out:;
    char *result = NULL;
    if (why.len) {
        ap_buf full;
        ap_buf_init(&full);
        ap_buf_printf(&full, "seed %llu (AP_TEST_FIRST=%llu AP_TEST_SEQUENCES=1), mesh %s: %s\n-- schedule:\n%s\n"
                             "-- program:\n%s",
                      (unsigned long long)seed, (unsigned long long)seed, mesh_text, why.data,
                      sched.data ? sched.data : "", text.data);
        result = ap_buf_take(&full, NULL);
    }
    free(vals);
    ir_partition_free(p);
    ir_pctx_free(c);
    ir_module_free(m);
    ap_buf_free(&text);
    ap_buf_free(&why);
    ap_buf_free(&sched);
    return result;
}

START_TEST(random_programs_are_equivalent)
{
    static rp_gen g; /* large; this process runs this test only (fork mode) */
    reasons refused = {0};
    tally t = {0};
    int n = tl_sequences_lean(PROGRAMS), first = tl_first_sequence(), equivalent = 0, failed = 0;
    int ops[RP__KINDS] = {0};
    char *first_failure = NULL;
    for (int k = first; k < first + n; k++) {
        char *f = run_seed((uint64_t)k, &g, &refused, &equivalent, &t, false);
        for (int i = 0; i < RP__KINDS; i++)
            ops[i] += g.counts[i];
        if (f) {
            /* go on: a long hunt lists every failure at once */
            fprintf(stderr, "FAILED %s\n", f);
            failed++;
            if (!first_failure)
                first_failure = f;
            else
                free(f);
        }
    }
    printf("random programs: %d seeds from %d: %d equivalent, %d refused, %d failed\n", n, first, equivalent,
           refused.total, failed);
    for (int i = 0; i < refused.n; i++)
        printf("  refused %4d: %s\n", refused.count[i], refused.text[i]);
    printf("  %d actions accepted; %d lowerings communicate:", t.actions, t.communicating);
    for (int k = 0; k < IR_COLL__COUNT; k++)
        printf(" %s %llu", ir_coll_name((ir_coll_kind)k), (unsigned long long)t.coll[k]);
    printf(", dynslice %llu\n", (unsigned long long)t.dynslice);
    printf("  ops seen/tiled/summed:");
    for (int op = 1; op < IR_OP__COUNT; op++)
        if (t.seen[op])
            printf(" %s %d/%d/%d", ir_op_info_get((ir_opcode)op)->name, t.seen[op], t.tiled[op], t.summed[op]);
    printf("\n  ops drawn:");
    for (int i = 0; i < RP__KINDS; i++)
        printf(" %s %d", rp_kind_names[i], ops[i]);
    printf("\n");
    fflush(stdout);
    ck_assert_msg(!first_failure, "%d of %d seeds failed; the first:\n%.6000s", failed, n,
                  first_failure ? first_failure : "");
    ck_assert_msg(refused.total * 100 <= n * RP_MAX_REFUSED, "%d of %d programs refused", refused.total, n);
    /* every kind of op was drawn */
    if (n >= 100)
        for (int i = 0; i < RP__KINDS; i++)
            ck_assert_msg(ops[i] > 0, "no %s drawn", rp_kind_names[i]);
}
END_TEST

/* The harness itself: with the first all_reduce of every lowering left
 * out, the seeds whose lowering has one fail (a value a device then holds
 * differs from the other devices' copies: ir_check's AP_ECONFLICT, which
 * the test first counted as a refusal) or are NOT equivalent; none is
 * refused. */
START_TEST(planted_bug_fails)
{
    static rp_gen g;
    reasons refused = {0};
    tally t = {0};
    int equivalent = 0, failed = 0;
    for (int k = 0; k < 100; k++) {
        char *f = run_seed((uint64_t)k, &g, &refused, &equivalent, &t, true);
        failed += f != NULL;
        free(f);
    }
    ck_assert_int_eq(refused.total, 0);
    ck_assert_int_ge(failed, 5); /* (9 of these 100 lowerings have an all_reduce) */
    ck_assert_int_eq(equivalent + failed, 100);
}
END_TEST

static Suite *random_programs_suite(void)
{
    Suite *s = suite_create("random_programs");
    TCase *tc = tcase_create("random_programs");
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, random_programs_are_equivalent);
    tcase_add_test(tc, planted_bug_fails);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tl_run(random_programs_suite()); }
