/*
 * test_corpus.c - every StableHLO file of the shared corpus (written outside
 * this project) parses, prints back to text that parses to the same IR,
 * printing is a fixed point, and the op counts of the IR equal an
 * independent count of op names in the text and the MANIFEST's totals.
 */
#include "testlib.h"

#include <ctype.h>

#define CORPUS AP_SHARED_DIR "/corpus/stablehlo"

/* -------------------------------------------------- independent counter */

typedef struct name_count {
    char name[96];
    long count;
} name_count;

typedef struct text_counts {
    name_count v[256];
    int n;
    long applies; /* compact reduce bodies: the IR adds a return for each */
    bool has_module;
} text_counts;

static void bump(text_counts *c, const char *name, size_t len)
{
    if (len >= sizeof c->v[0].name)
        len = sizeof c->v[0].name - 1;
    for (int i = 0; i < c->n; i++)
        if (strlen(c->v[i].name) == len && memcmp(c->v[i].name, name, len) == 0) {
            c->v[i].count++;
            return;
        }
    ck_assert_int_lt(c->n, 256);
    memcpy(c->v[c->n].name, name, len);
    c->v[c->n].name[len] = '\0';
    c->v[c->n].count = 1;
    c->n++;
}

static long get(const text_counts *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].name, name))
            return c->v[i].count;
    return 0;
}

static bool is_name_char(char ch) { return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '$'; }

/* The op names in op position, line by line, the way MANIFEST.md counts
 * them: `%r = name`, `"name"(`, result-less `name ...`, bare return, call
 * and module, and the op named after `applies`. */
static void count_text(const char *text, text_counts *c)
{
    memset(c, 0, sizeof *c);
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        const char *s = line;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s < end && *s == '%') { /* skip the result list */
            const char *eq = memchr(s, '=', (size_t)(end - s));
            s = eq ? eq + 1 : end;
            while (s < end && *s == ' ')
                s++;
        }
        if (s < end && *s == '"') {
            const char *q = memchr(s + 1, '"', (size_t)(end - s - 1));
            if (q && memchr(s + 1, '.', (size_t)(q - s - 1)))
                bump(c, s + 1, (size_t)(q - s - 1));
        } else if (s < end && isalpha((unsigned char)*s) && !(s + 3 <= end && !strncmp(s, "loc(", 4))) {
            const char *w = s;
            while (w < end && is_name_char(*w))
                w++;
            size_t len = (size_t)(w - s);
            if (memchr(s, '.', len))
                bump(c, s, len);
            else if (len == 6 && !strncmp(s, "return", 6))
                bump(c, "func.return", 11);
            else if (len == 4 && !strncmp(s, "call", 4) && w < end && *w == ' ')
                bump(c, "func.call", 9);
            else if (len == 6 && !strncmp(s, "module", 6))
                bump(c, "builtin.module", 14), c->has_module = true;
        }
        for (const char *a = line; a < end; a++) {
            if (end - a > 8 && !strncmp(a, " applies ", 9)) {
                const char *w = a + 9, *e = w;
                while (e < end && is_name_char(*e))
                    e++;
                bump(c, w, (size_t)(e - w));
                c->applies++;
            }
        }
        line = *end ? end + 1 : end;
    }
    if (get(c, "builtin.module"))
        c->has_module = true;
}

/* ------------------------------------------------------------- MANIFEST */

/* The "ops" column of MANIFEST.md for file name; -1 when not listed. */
static long manifest_ops(const char *file)
{
    size_t len;
    char *text = tl_read(AP_SHARED_DIR "/corpus/MANIFEST.md", &len);
    char key[256];
    snprintf(key, sizeof key, "| `%s` |", file);
    long ops = -1;
    size_t klen = strlen(key), start = len;
    for (size_t i = 0; i + klen <= len; i++)
        if (memcmp(text + i, key, klen) == 0) {
            start = i;
            break;
        }
    if (start < len) {
        /* columns: file | repo | path | commit | license | size | ops | ... */
        int col = 0;
        size_t i = start;
        for (; i < len && col < 7; i++)
            if (text[i] == '|')
                col++;
        if (col == 7)
            ops = strtol(text + i, NULL, 10);
    }
    ap_free(text);
    return ops;
}

/* ---------------------------------------------------------------- tests */

static char **files;
static int n_files;

static void check_file(const char *name)
{
    char path[512], msg[1024];
    snprintf(path, sizeof path, "%s/%s", CORPUS, name);
    size_t len;
    char *text = tl_read(path, &len);
    ir_module *m = tl_parse(text, name, msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s does not parse: %s", name, msg);

    /* round trip and fixed point */
    char *p1 = tl_print(m);
    ir_module *m2 = tl_parse(p1, "printed", msg, sizeof msg);
    ck_assert_msg(m2 != NULL, "printed %s does not parse: %s", name, msg);
    char why[700];
    ck_assert_msg(ir_module_equal(m, m2, why, sizeof why), "%s: reparsed IR differs: %s", name, why);
    char *p2 = tl_print(m2);
    ck_assert_msg(strcmp(p1, p2) == 0, "%s: printing is not a fixed point", name);

    /* op counts: the IR against the text, name by name */
    text_counts tc;
    count_text(text, &tc);
    ir_stats st;
    ck_assert_int_eq(ir_stats_compute(m, &st), 0);
    long expected_total = 0;
    for (int i = 0; i < tc.n; i++)
        expected_total += tc.v[i].count;
    long implicit_module = tc.has_module ? 0 : 1;
    for (uint32_t i = 0; i < st.n_kinds; i++) {
        const char *op = st.by_name[i].name;
        long want = get(&tc, op);
        if (!strcmp(op, "stablehlo.return"))
            want += tc.applies;
        if (!strcmp(op, "builtin.module"))
            want += implicit_module;
        ck_assert_msg((long)st.by_name[i].count == want, "%s: %s counted %llu in the IR but %ld in the text", name, op,
                      (unsigned long long)st.by_name[i].count, want);
    }
    for (int i = 0; i < tc.n; i++) {
        bool found = false;
        for (uint32_t k = 0; k < st.n_kinds; k++)
            found |= !strcmp(st.by_name[k].name, tc.v[i].name);
        ck_assert_msg(found, "%s: %s appears in the text but not in the IR", name, tc.v[i].name);
    }
    /* and against the MANIFEST, counted outside this project */
    long man = manifest_ops(name);
    ck_assert_msg(man > 0, "%s is not in MANIFEST.md", name);
    ck_assert_msg((long)st.n_ops == man + tc.applies + implicit_module,
                  "%s: IR has %llu ops, MANIFEST says %ld (+%ld compact reduce returns +%ld implicit module)", name,
                  (unsigned long long)st.n_ops, man, tc.applies, implicit_module);
    ck_assert_int_eq(expected_total, man);

    ir_stats_free(&st);
    ap_free(p1);
    ap_free(p2);
    ir_module_free(m);
    ir_module_free(m2);
    ap_free(text);
}

START_TEST(corpus_file)
{
    ck_assert_int_lt(_i, n_files);
    check_file(files[_i]);
}
END_TEST

START_TEST(corpus_complete)
{
    /* the corpus is the one MANIFEST.md describes */
    ck_assert_int_eq(n_files, 34);
}
END_TEST

START_TEST(corpus_ops_histogram)
{
    /* OPS.md totals over all files, counted outside this project */
    struct {
        const char *op;
        long total;
    } rows[] = {{"stablehlo.reshape", 10787}, {"stablehlo.broadcast_in_dim", 10333}, {"stablehlo.dot_general", 2203},
                {"stablehlo.reduce", 1883},   {"util.global", 1643},                {"sdy.constant", 617},
                {"stablehlo.while", 10},      {"cf.cond_br", 1},                    {"tensor.extract", 1}};
    long got[sizeof rows / sizeof rows[0]] = {0};
    for (int f = 0; f < n_files; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CORPUS, files[f]);
        char *text = tl_read(path, NULL);
        ir_module *m = tl_parse(text, files[f], NULL, 0);
        ck_assert_ptr_nonnull(m);
        ir_stats st;
        ir_stats_compute(m, &st);
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            for (uint32_t k = 0; k < st.n_kinds; k++)
                if (!strcmp(st.by_name[k].name, rows[r].op))
                    got[r] += (long)st.by_name[k].count;
        ir_stats_free(&st);
        ir_module_free(m);
        ap_free(text);
    }
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        ck_assert_msg(got[r] == rows[r].total, "%s: %ld in the IR, OPS.md says %ld", rows[r].op, got[r], rows[r].total);
}
END_TEST

START_TEST(arg_locations_kept)
{
    /* JAX writes parameter paths as argument locations; tactics select by them */
    char *text = tl_read(CORPUS "/kearney_jax_mixtral_moe_layer.mlir", NULL);
    ir_module *m = tl_parse(text, "mixtral", NULL, 0);
    ck_assert_ptr_nonnull(m);
    ir_op *main_fn = ir_module_entry(m);
    ck_assert_ptr_nonnull(main_fn);
    bool any = false;
    for (uint32_t i = 0; i < ir_func_num_args(main_fn); i++)
        any |= ir_func_arg_name(main_fn, i) != NULL;
    ck_assert(any);
    ir_module_free(m);
    ap_free(text);
}
END_TEST

START_TEST(sdy_shardings_kept)
{
    char *text = tl_read(CORPUS "/tt_llama3_2_3b_manual_sdy.mlir", NULL);
    ir_module *m = tl_parse(text, "llama", NULL, 0);
    ck_assert_ptr_nonnull(m);
    ir_op *f = ir_module_entry(m);
    int sharded = 0;
    for (uint32_t i = 0; i < ir_func_num_args(f); i++) {
        ir_attr *a = ir_func_arg_attr(f, i, "sdy.sharding");
        if (a) {
            ck_assert_int_eq(a->kind, IR_A_DIALECT);
            ck_assert_str_eq(a->u.dia.name, "sdy.sharding");
            sharded++;
        }
    }
    ck_assert_int_gt(sharded, 0);
    ir_module_free(m);
    ap_free(text);
}
END_TEST

int main(void)
{
    n_files = tl_list(CORPUS, ".mlir", &files);
    Suite *s = suite_create("corpus");
    TCase *tc = tcase_create("stablehlo");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, corpus_file, 0, n_files);
    tcase_add_test(tc, corpus_complete);
    tcase_add_test(tc, corpus_ops_histogram);
    tcase_add_test(tc, arg_locations_kept);
    tcase_add_test(tc, sdy_shardings_kept);
    suite_add_tcase(s, tc);
    int rc = tl_run(s);
    tl_list_free(files, n_files);
    return rc;
}
