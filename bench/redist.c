/*
 * bench/redist.c - how fast redistribution synthesis is (ir/partir/redist.c).
 *
 * Runs the paper's evaluation workload (section 8): 1000 random problems
 * with 3 mesh axes and up to 6-D arrays, from a fixed seed, each synthesized
 * with one reused context.  Each problem is timed `repeats` times and keeps
 * its fastest run, since the machine is shared and the minimum is the run
 * least disturbed by others.  Prints the median, p90, max and mean synthesis
 * time in microseconds, the mean number of steps and how often a permutation
 * was needed, then the plans of the paper's Examples 3.1 and 4.9/7.1, of
 * Figure 12 and of the example of issue 15.  Figures, not pass/fail: the
 * tests (and the exhaustive oracle that the plans' costs are checked
 * against) are in tests/test_redist.c.
 *
 * Usage: bench_redist [problems [seed [repeats]]]
 */
#include "partir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints one paper example: the problem, its plan and the totals. */
static int print_example(const char *title, const char *mesh_text, const char *from_text,
                         const char *to_text, int elem_bytes)
{
    ir_mesh mesh;
    ir_redist_type from, to;
    ir_redist_plan *plan = NULL;
    ap_error err;
    ap_buf out;
    int rc;
    ap_error_clear(&err);
    ap_buf_init(&out);
    if ((rc = ir_mesh_parse(mesh_text, &mesh, &err)) ||
        (rc = ir_redist_parse_type(&mesh, from_text, &from, &err)) ||
        (rc = ir_redist_parse_type(&mesh, to_text, &to, &err)) ||
        (rc = ir_redist_plan_make(&mesh, &from, &to, elem_bytes, &plan, &err))) {
        fprintf(stderr, "bench_redist: %s: %s\n", title, err.msg);
        goto done;
    }
    ap_buf_printf(&out, "%s: mesh %s\n  from ", title, mesh_text);
    ir_redist_format_type(&plan->factors, &plan->from, &out);
    ap_buf_puts(&out, "\n  to   ");
    ir_redist_format_type(&plan->factors, &plan->to, &out);
    ap_buf_putc(&out, '\n');
    for (int s = 0; s < plan->nsteps; s++) {
        ap_buf_puts(&out, "    ");
        ir_redist_step_format(plan, &plan->steps[s], &out);
        ap_buf_putc(&out, '\n');
    }
    ap_buf_printf(&out, "  cost %lld bytes, peak %lld bytes (baseline: cost %lld, peak %lld)\n",
                  (long long)plan->cost_bytes, (long long)plan->peak_local_bytes,
                  (long long)plan->baseline.cost_bytes, (long long)plan->baseline.peak_local_bytes);
    fputs(out.oom ? "(out of memory)\n" : out.data, stdout);
done:
    ir_redist_plan_free(plan);
    ap_buf_free(&out);
    return rc;
}

int main(int argc, char **argv)
{
    int problems = argc > 1 ? atoi(argv[1]) : 1000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 20240501;
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    double *times = NULL;
    ir_redist_ctx *ctx = NULL;
    ap_error err;
    long steps = 0, permutes = 0;
    double total_us = 0, cost_ratio = 0;
    int rc = 1;
    ap_error_clear(&err);
    if (problems < 1 || repeats < 1 || !(times = malloc((size_t)problems * sizeof *times)) ||
        ir_redist_ctx_new(&ctx, &err))
        goto done;

    for (int i = 0; i < problems; i++) {
        ir_mesh mesh;
        ir_redist_type from, to;
        ir_redist_plan *plan;
        ir_redist_random_problem(&seed, 6, &mesh, &from, &to);
        for (int r = 0; r < repeats; r++) {
            double start = (ap_mono_s() * 1e6);
            if (ir_redist_synthesize(ctx, &mesh, &from, &to, 4, &plan, &err)) {
                fprintf(stderr, "bench_redist: problem %d: %s\n", i, err.msg);
                goto done;
            }
            double took = (ap_mono_s() * 1e6) - start;
            times[i] = r == 0 || took < times[i] ? took : times[i];
            if (r + 1 < repeats)
                ir_redist_plan_free(plan);
        }
        total_us += times[i];
        steps += plan->nsteps;
        permutes += plan->permute_step >= 0;
        if (plan->baseline.cost_bytes > 0)
            cost_ratio += (double)plan->cost_bytes / (double)plan->baseline.cost_bytes;
        ir_redist_plan_free(plan);
    }
    qsort(times, (size_t)problems, sizeof *times, compare_double);
    printf("redistribution synthesis, %d random problems (3 axes, rank <= 6), fastest of %d runs "
           "each\n",
           problems, repeats);
    printf("  median %.1f us, p90 %.1f us, max %.1f us, mean %.1f us\n", times[problems / 2],
           times[(int)(problems * 0.9)], times[problems - 1], total_us / problems);
    printf("  mean steps %.2f, plans with a collective_permute %.1f%%, mean cost / baseline %.3f\n",
           (double)steps / problems, 100.0 * (double)permutes / problems, cost_ratio / problems);
    printf("\n");
    if (print_example("Example 3.1", "x=4,y=6", "[3{x}12, 2{y}12]", "[2{y}12, 3{x}12]", 4) ||
        print_example("Example 4.9 / 7.1", "a=8", "[1{a}8, 8]", "[8, 1{a}8]", 4) ||
        print_example("Figure 12 (the paper's {y,x} is our {x,y})", "x=4,y=2,z=4",
                      "[1{x,y}8, 8, 8, 4]", "[8, 4{y}8, 2{x}8, 4]", 4) ||
        /* the weak optimum is 3456 bytes, but every plan at it needs a
         * permutation of at least 1152: 4608 is optimal (the oracle's test) */
        print_example("Issue 15 (1-byte elements)", "a=2,b=2,c=2", "[24{a,c}96, 48{b}96]",
                      "[96, 24{a,c}96]", 1))
        goto done;
    rc = 0;
done:
    if (rc && err.msg[0])
        fprintf(stderr, "bench_redist: %s\n", err.msg);
    ir_redist_ctx_free(ctx);
    free(times);
    return rc;
}
