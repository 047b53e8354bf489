/*
 * bench.h - what the benchmarks share: a monotonic clock, medians, fatal
 * errors, models from the zoo's generator and the standard schedules of
 * tests/models/schedules.  Header-only so each benchmark stays one
 * program.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ircheck.h"
#include "interp.h"
#include "ir.h"
#include "parse.h"
#include "partir.h"

static inline double bench_now(void)
{
    return ap_mono_s();
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Whether malloc's heap is in transparent huge pages, for a bench's
 * header: searches run ~7% faster with them (README, Speed), so a figure
 * says which.  "on (GLIBC_TUNABLES)" when glibc was asked to madvise its
 * heap, "on (THP always)" when the kernel gives them to every mapping,
 * else "off". */
static inline const char *bench_huge_pages(void)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && (strstr(t, "glibc.malloc.hugetlb=1") || strstr(t, "glibc.malloc.hugetlb=2")))
        return "on (GLIBC_TUNABLES)";
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = 0;
        fclose(f);
    }
    return strstr(mode, "[always]") ? "on (THP always)" : "off";
}

/* Sorts v in place. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Whether id is one of the comma-separated names of only (NULL: all), in
 * any case: a bench's --only, for its sections or rows. */
static inline bool bench_wants(const char *only, const char *id)
{
    if (!only)
        return true;
    size_t n = strlen(id);
    for (const char *s = only; *s;) {
        size_t k = strcspn(s, ",");
        if (k == n && !strncasecmp(s, id, n))
            return true;
        s += k + (s[k] == ',');
    }
    return false;
}

static inline void bench_die(const char *what, const ap_error *err)
{
    char msg[1024];
    ap_error_format(err, msg, sizeof msg);
    fprintf(stderr, "bench: %s: %s\n", what, msg);
    exit(1);
}

/* `modelgen ARGS` (e.g. "transformer --config t32") as text; exits on
 * failure.  Free with ap_free. */
static inline char *bench_modelgen(const char *args)
{
    char path[] = "/tmp/autopart-bench-XXXXXX", cmd[1024];
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s/tests/models/modelgen' %s -q -o '%s'", AP_SOURCE_DIR, args, path);
    char *text;
    size_t len;
    ap_error err;
    if (system(cmd) != 0) {
        fprintf(stderr, "bench: modelgen failed: %s\n", cmd);
        exit(1);
    }
    if (ap_read_file(path, &text, &len, &err) < 0)
        bench_die(path, &err);
    unlink(path);
    return text;
}

/* The same, parsed.  Free with ir_module_free. */
static inline ir_module *bench_modelgen_module(const char *args)
{
    char *text = bench_modelgen(args);
    ir_module *m;
    ap_error err;
    if (ir_parse(text, strlen(text), args, IR_FMT_AUTO, &m, &err) < 0)
        bench_die(args, &err);
    ap_free(text);
    return m;
}

/* The standard schedules joined in order: names such as "bp+mp+z3" read
 * tests/models/schedules/bp.txt, mp.txt, z3.txt.  Free with ap_free. */
static inline char *bench_schedule(const char *names)
{
    ap_buf b;
    ap_buf_init(&b);
    const char *s = names;
    while (*s) {
        size_t n = strcspn(s, "+");
        char path[512], *text;
        size_t len;
        ap_error err;
        snprintf(path, sizeof path, "%s/tests/models/schedules/%.*s.txt", AP_SOURCE_DIR, (int)n, s);
        if (ap_read_file(path, &text, &len, &err) < 0)
            bench_die(path, &err);
        ap_buf_put(&b, text, len);
        ap_buf_putc(&b, '\n');
        ap_free(text);
        s += n + (s[n] == '+');
    }
    return ap_buf_take(&b, NULL);
}

#endif
