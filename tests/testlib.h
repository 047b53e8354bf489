/*
 * testlib.h - helpers shared by the Check test programs: reading files of
 * the shared corpus, parsing text, and a main() that runs one suite in
 * fork mode.  Header-only so each test stays one program.
 */
#ifndef TESTLIB_H
#define TESTLIB_H

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ircheck.h"
#include "interp.h"
#include "ir.h"
#include "parse.h"
#include "partir.h"

#define TL_MODELGEN AP_SOURCE_DIR "/tests/models/modelgen"

/* Reads a whole file; aborts the test on failure.  Free with ap_free. */
static inline char *tl_read(const char *path, size_t *len)
{
    char *text = NULL;
    ap_error err;
    size_t n = 0;
    ck_assert_msg(ap_read_file(path, &text, &n, &err) == 0, "cannot read %s: %s", path, err.msg);
    if (len)
        *len = n;
    return text;
}

/* A file of the golden tests, tests/lit/NAME (free with ap_free): the C
 * tests that check more of the same program read it from there. */
static inline char *tl_lit(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/lit/%s", AP_SOURCE_DIR, name);
    return tl_read(path, NULL);
}

/* Parses text; on failure returns NULL and leaves the formatted error in
 * msg (which may be NULL). */
static inline ir_module *tl_parse(const char *text, const char *name, char *msg, size_t msg_size)
{
    ir_module *m = NULL;
    ap_error err;
    if (ir_parse(text, strlen(text), name, IR_FMT_AUTO, &m, &err) < 0) {
        if (msg)
            ap_error_format(&err, msg, msg_size);
        return NULL;
    }
    if (msg && msg_size)
        msg[0] = '\0';
    return m;
}

/* Canonical text of a module (heap; free with ap_free). */
static inline char *tl_print(const ir_module *m)
{
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(ir_print(m, &b, NULL), 0);
    return ap_buf_take(&b, NULL);
}

/* The text of a model of the zoo: `modelgen MODEL --config CONFIG EXTRA`
 * (EXTRA: key=value overrides, may be ""). Free with ap_free. */
static inline char *tl_generate_text(const char *model, const char *config, const char *extra)
{
    char cmd[1024], path[] = "/tmp/autopart-model-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' %s --config %s %s -q -o '%s'", TL_MODELGEN, model, config, extra, path);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "modelgen failed: %s", cmd);
    char *text = tl_read(path, NULL);
    unlink(path);
    return text;
}

/* The same, parsed. Free with ir_module_free. */
static inline ir_module *tl_generate(const char *model, const char *config, const char *extra)
{
    char *text = tl_generate_text(model, config, extra);
    ir_module *m = NULL;
    ap_error err;
    ck_assert_msg(ir_parse(text, strlen(text), model, IR_FMT_AUTO, &m, &err) == 0, "%s: %s", model, err.msg);
    ap_free(text);
    return m;
}

/* The standard schedules of tests/models/schedules joined in order: names
 * such as "bp+mp+z3" read bp.txt, mp.txt, z3.txt.  Free with ap_free. */
static inline char *tl_schedule(const char *names)
{
    ap_buf b;
    ap_buf_init(&b);
    for (const char *s = names; *s;) {
        size_t n = strcspn(s, "+");
        char path[512];
        size_t len;
        snprintf(path, sizeof path, "%s/tests/models/schedules/%.*s.txt", AP_SOURCE_DIR, (int)n, s);
        char *text = tl_read(path, &len);
        ap_buf_put(&b, text, len);
        ap_buf_putc(&b, '\n');
        ap_free(text);
        s += n + (s[n] == '+');
    }
    return ap_buf_take(&b, NULL);
}

/* An allocator that fails once tl_allocations_left reaches 0 (< 0: never),
 * for out-of-memory tests: ap_set_allocator(&tl_failing_allocator).
 * Test-only state: each test runs in its own process (CK_FORK). */
static long tl_allocations_left = -1;

static inline void *tl_failing_malloc(size_t n)
{
    if (tl_allocations_left == 0)
        return NULL;
    if (tl_allocations_left > 0)
        tl_allocations_left--;
    return malloc(n);
}

static inline void *tl_failing_realloc(void *p, size_t n)
{
    if (tl_allocations_left == 0)
        return NULL;
    if (tl_allocations_left > 0)
        tl_allocations_left--;
    return realloc(p, n);
}

static const ap_allocator tl_failing_allocator = {tl_failing_malloc, tl_failing_realloc, free};

/* Names of the files in dir ending in suffix, sorted; returns the count. */
static int tl_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static inline int tl_list(const char *dir, const char *suffix, char ***out)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dir);
        exit(1);
    }
    char **v = NULL;
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= sl || strcmp(e->d_name + l - sl, suffix) != 0)
            continue;
        v = realloc(v, sizeof *v * (size_t)(n + 1));
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, tl_cmp_str);
    *out = v;
    return n;
}

static inline void tl_list_free(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* How many random cases a property test runs: `fallback`, or
 * AP_TEST_SEQUENCES from the environment, for long local runs that look for
 * counterexamples with many more seeds. */
static inline int tl_sequences(int fallback)
{
    const char *s = getenv("AP_TEST_SEQUENCES");
    int n = s ? atoi(s) : 0;
    return n > 0 ? n : fallback;
}

/* The same, but a quarter of `fallback` in the ASan+UBSan build
 * (AP_SANITIZED: instrumented, at -O1, several times slower): the
 * sanitizers look for memory and undefined-behaviour errors on the paths
 * those cases take, while the normal build holds the property over all of
 * them.  For tests whose assertions hold case by case; a test that counts
 * how often something happens among its cases scales what it asks for. */
static inline int tl_sequences_lean(int fallback)
{
#if AP_SANITIZED
    if (fallback > 4 && !getenv("AP_TEST_SEQUENCES"))
        return (fallback + 3) / 4;
#endif
    return tl_sequences(fallback);
}

/* The first random case a property test runs: 0, or AP_TEST_FIRST from the
 * environment, to run again the case a long run reported (with
 * AP_TEST_SEQUENCES=1). */
static inline int tl_first_sequence(void)
{
    const char *s = getenv("AP_TEST_FIRST");
    int n = s ? atoi(s) : 0;
    return n > 0 ? n : 0;
}

/* Runs the suite built by make_suite in fork mode; the exit status is the
 * number of failures (capped), as ctest expects. */
static inline int tl_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/* A JAX-style scan (test_check, test_partir): a variadic while over stacked weights read per layer
 * with dynamic_slice, a stacked gradient built with dynamic_update_slice,
 * an outer value and an outer dot (a pending sum when its contraction is
 * tiled) captured by the body, and a conditional inside the body capturing
 * the body's values. */
#define TL_SCAN_PROGRAM \
    "func.func @main(%x: tensor<8x16xf32>, %w: tensor<4x16x16xf32>, %b: tensor<16xf32>, %v: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<4x16x16xf32>) {\n" \
    "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n" \
    "  %zg = stablehlo.constant dense<0.0> : tensor<4x16x16xf32>\n" \
    "  %u = stablehlo.dot_general %x, %v, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>\n" \
    "  %r:4 = stablehlo.while(%i = %c0, %h = %x, %ws = %w, %g = %zg) : tensor<i32>, tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>\n" \
    "   cond {\n" \
    "    %n = stablehlo.constant dense<4> : tensor<i32>\n" \
    "    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n" \
    "    stablehlo.return %p : tensor<i1>\n" \
    "  } do {\n" \
    "    %z = stablehlo.constant dense<0> : tensor<i32>\n" \
    "    %wl = stablehlo.dynamic_slice %ws, %i, %z, %z, sizes = [1, 16, 16] : (tensor<4x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x16x16xf32>\n" \
    "    %w2 = stablehlo.reshape %wl : (tensor<1x16x16xf32>) -> tensor<16x16xf32>\n" \
    "    %y = stablehlo.dot_general %h, %w2, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>\n" \
    "    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>\n" \
    "    %y2 = stablehlo.add %y, %bb : tensor<8x16xf32>\n" \
    "    %t = stablehlo.tanh %y2 : tensor<8x16xf32>\n" \
    "    %t2 = stablehlo.add %t, %u : tensor<8x16xf32>\n" \
    "    %gl = stablehlo.dot_general %h, %t2, contracting_dims = [0] x [0] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>\n" \
    "    %g3 = stablehlo.reshape %gl : (tensor<16x16xf32>) -> tensor<1x16x16xf32>\n" \
    "    %gn = stablehlo.dynamic_update_slice %g, %g3, %i, %z, %z : (tensor<4x16x16xf32>, tensor<1x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x16x16xf32>\n" \
    "    %one = stablehlo.constant dense<1> : tensor<i32>\n" \
    "    %in = stablehlo.add %i, %one : tensor<i32>\n" \
    "    %two = stablehlo.constant dense<2> : tensor<i32>\n" \
    "    %k = stablehlo.remainder %i, %two : tensor<i32>\n" \
    "    %hn = \"stablehlo.case\"(%k) ({\n" \
    "      %a = stablehlo.tanh %t2 : tensor<8x16xf32>\n" \
    "      stablehlo.return %a : tensor<8x16xf32>\n" \
    "    }, {\n" \
    "      %a = stablehlo.add %y, %t2 : tensor<8x16xf32>\n" \
    "      stablehlo.return %a : tensor<8x16xf32>\n" \
    "    }) : (tensor<i32>) -> tensor<8x16xf32>\n" \
    "    stablehlo.return %in, %hn, %ws, %gn : tensor<i32>, tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>\n" \
    "  }\n" \
    "  return %r#1, %r#3 : tensor<8x16xf32>, tensor<4x16x16xf32>\n" \
    "}\n"

#endif
