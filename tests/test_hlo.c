/*
 * test_hlo.c - the XLA HLO text parser: every corpus HLO file parses, prints
 * as StableHLO that parses back to an equal module (and printing that again
 * gives the same text); the number of ops matches an independent count of
 * the HLO instructions; small hand-written modules give exactly the IR of
 * the equivalent StableHLO text; parameter shardings import into a
 * schedule; bad input gets its exact error message.  The golden tests of
 * the conversion (HLO in, canonical StableHLO out) and of most error
 * messages are in tests/lit/hlo; what stays here needs more than the text
 * (a NUL byte, the end of the input, the IR itself).
 */
#include "testlib.h"

#include <ctype.h>

/* ============================================================ helpers */

static ir_module *hlo_parse(const char *src, const char *name, char *msg, size_t msg_size)
{
    ir_module *m = NULL;
    ap_error err;
    if (ir_parse(src, strlen(src), name, IR_FMT_HLO, &m, &err) < 0) {
        ap_error_format(&err, msg, msg_size);
        return NULL;
    }
    msg[0] = '\0';
    return m;
}

/* The module prints as text that parses back equal, and printing that
 * gives the same text.  Returns false (with why) otherwise. */
static bool roundtrips(const ir_module *m, char *why, size_t why_size)
{
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(ir_print(m, &b, NULL), 0);
    ir_module *m2 = NULL;
    ap_error err;
    bool ok = false;
    if (ir_parse(b.data, b.len, "printed.mlir", IR_FMT_STABLEHLO, &m2, &err) < 0) {
        char e[400];
        ap_error_format(&err, e, sizeof e);
        snprintf(why, why_size, "printed module does not parse: %s", e);
    } else if (ir_module_equal(m, m2, why, why_size)) {
        ap_buf b2;
        ap_buf_init(&b2);
        ck_assert_int_eq(ir_print(m2, &b2, NULL), 0);
        ok = b.len == b2.len && memcmp(b.data, b2.data, b.len) == 0;
        if (!ok)
            snprintf(why, why_size, "printing is not a fixed point");
        ap_buf_free(&b2);
    }
    ir_module_free(m2);
    ap_buf_free(&b);
    return ok;
}

/* The HLO text gives exactly the module the StableHLO text gives, and
 * round-trips. */
static void same_as_mlir(const char *hlo, const char *mlir)
{
    char msg[800], why[600];
    ir_module *a = hlo_parse(hlo, "t.hlo", msg, sizeof msg);
    ck_assert_msg(a != NULL, "HLO: %s\n%s", msg, hlo);
    ir_module *b = tl_parse(mlir, "want.mlir", msg, sizeof msg);
    ck_assert_msg(b != NULL, "MLIR: %s\n%s", msg, mlir);
    if (!ir_module_equal(a, b, why, sizeof why)) {
        char *got = tl_print(a);
        ck_abort_msg("HLO and StableHLO differ: %s\nprinted HLO module:\n%s", why, got);
    }
    ck_assert_msg(roundtrips(a, why, sizeof why), "%s", why);
    ir_module_free(a);
    ir_module_free(b);
}

static void expect_error(const char *src, size_t len, const char *want)
{
    ir_module *m = NULL;
    ap_error err;
    char msg[800];
    int rc = ir_parse(src, len, "bad.hlo", IR_FMT_HLO, &m, &err);
    ck_assert_msg(rc < 0 && m == NULL, "expected an error for:\n%.*s", (int)len, src);
    ap_error_format(&err, msg, sizeof msg);
    ck_assert_str_eq(msg, want);
}

#define ERR(src, want) expect_error(src, strlen(src), want)

/* ================================================= independent counting */

/*
 * A line scanner for the corpus files (one instruction per line, as XLA
 * prints them), independent of the parser.  It predicts the number of IR
 * ops from the documented mapping:
 *   - module: 1 op; every function (ENTRY as @main, each computation named
 *     by `call`) 1 func.func, and its body instantiated once;
 *   - region computations (to_apply, condition, body, branches, select,
 *     scatter) are instantiated once per referencing op per instantiation
 *     of the referencing computation;
 *   - per instantiation: parameters make no op; a get-tuple-element of a
 *     variadic tuple-shaped instruction (multi_ops) makes no op; a variadic
 *     tuple-shaped instruction used whole (as an operand of anything but
 *     get-tuple-element / opt-barrier) adds one stablehlo.tuple; every other
 *     instruction is one op; one return is added;
 *   - the ROOT, when its elements are returned separately (everything but
 *     while regions): an unused `tuple` ROOT makes no op; another
 *     tuple-shaped ROOT that is not variadic adds one get_tuple_element per
 *     element; in while regions a variadic ROOT adds one stablehlo.tuple.
 */

static const char *const multi_ops[] = {"reduce", "sort", "reduce-window", "scatter", "all-reduce", "all-gather",
                                        "reduce-scatter", "conditional", "call", "custom-call",
                                        "batch-norm-training", "batch-norm-grad", "rng-bit-generator",
                                        "opt-barrier", NULL};

typedef struct sinst {
    char name[512], op[48];
    bool root, tuple;
    int arity;        /* elements of a tuple shape */
    int n_opnds;
    char **opnds;     /* names */
    int n_refs;
    char **refs;      /* region computations */
    char *call;       /* computation named by `call` */
    int uses;         /* as an operand in this computation */
    bool whole_use;   /* as an operand of other than gte / opt-barrier */
} sinst;

typedef struct scomp {
    char name[512];
    bool entry;
    int n;
    sinst *v;
    long inst_flat, inst_tuple; /* instantiations */
} scomp;

typedef struct sfile {
    int n;
    scomp *c;
    long n_insts;
} sfile;

static bool in(const char *const *list, const char *s)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

/* Skips a balanced group at s (which starts with an opener). */
static const char *skip_bal(const char *s)
{
    int d = 0;
    for (; *s; s++) {
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++)
                if (*s == '\\' && s[1])
                    s++;
        } else if (*s == '(' || *s == '{' || *s == '[') {
            d++;
        } else if (*s == ')' || *s == '}' || *s == ']') {
            if (--d == 0)
                return s + 1;
        }
    }
    return s;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static int scomp_find(const sfile *f, const char *name)
{
    if (*name == '%')
        name++;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->c[i].name, name) == 0)
            return i;
    return -1;
}

/* Room for element n of an array grown only through this: doubles at
 * powers of two (growing by one would copy the array every time). */
static void *grow(void *v, size_t elem, int n)
{
    if (n & (n - 1))
        return v;
    return realloc(v, elem * (size_t)(n ? 2 * n : 1));
}

/* Operands are mostly defined just before their use: search backwards. */
static sinst *sinst_find(scomp *c, const char *name)
{
    for (int i = c->n - 1; i >= 0; i--)
        if (strcmp(c->v[i].name, name) == 0)
            return &c->v[i];
    return NULL;
}

/* The value of `, key=VALUE` in an attribute tail with strings blanked. */
static const char *attr_in(const char *tail, const char *key, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, ", %s=", key);
    const char *a = strstr(tail, pat);
    if (!a)
        return NULL;
    a += strlen(pat);
    const char *e = *a == '{' ? skip_bal(a) : a + strcspn(a, ", \n");
    snprintf(out, size, "%.*s", (int)(e - a), a);
    return out;
}

static void scan_instruction(scomp *c, const char *line)
{
    sinst s;
    memset(&s, 0, sizeof s);
    const char *q = line;
    while (*q == ' ')
        q++;
    if (strncmp(q, "ROOT ", 5) == 0) {
        s.root = true;
        q += 5;
    }
    if (*q == '%')
        q++;
    size_t nl = strcspn(q, " =");
    snprintf(s.name, sizeof s.name, "%.*s", (int)nl, q);
    q = strchr(q, '=') + 1;
    while (*q == ' ')
        q++;
    if (*q == '(') { /* tuple shape: count top-level elements */
        const char *e = skip_bal(q);
        s.tuple = true;
        s.arity = 0;
        int d = 0;
        bool any = false;
        for (const char *x = q + 1; x < e - 1; x++) {
            if (*x == '(' || *x == '[' || *x == '{')
                d++;
            else if (*x == ')' || *x == ']' || *x == '}')
                d--;
            else if (*x == ',' && d == 0)
                s.arity++;
            if (*x != ' ')
                any = true;
        }
        s.arity += any;
        q = e;
    } else {
        q = skip_bal(strchr(q, '['));
        if (*q == '{')
            q = skip_bal(q);
    }
    while (*q == ' ')
        q++;
    size_t ol = strcspn(q, "(");
    snprintf(s.op, sizeof s.op, "%.*s", (int)ol, q);
    q += ol;
    const char *close = skip_bal(q);
    if (strcmp(s.op, "parameter") != 0 && strcmp(s.op, "constant") != 0 && close - q > 2) {
        /* operands: the last word of each top-level comma piece */
        const char *x = q + 1, *start = x;
        int d = 0;
        for (; x < close; x++) {
            if (*x == '(' || *x == '[' || *x == '{')
                d++;
            else if ((*x == ')' || *x == ']' || *x == '}') && d > 0)
                d--;
            if ((*x == ',' && d == 0) || x == close - 1) {
                const char *end = x, *w = end;
                while (w > start && w[-1] != ' ' && w[-1] != '(' && w[-1] != '/')
                    w--;
                if (*w == '%')
                    w++;
                s.opnds = grow(s.opnds, sizeof *s.opnds, s.n_opnds);
                s.opnds[s.n_opnds++] = dupn(w, (size_t)(end - w));
                start = x + 1;
            }
        }
    }
    /* the attribute tail with strings blanked */
    char *tail = strdup(close);
    for (char *t = tail; *t; t++)
        if (*t == '"')
            for (t++; *t && *t != '"'; t++) {
                if (*t == '\\' && t[1])
                    *t++ = ' ';
                *t = ' ';
            }
    static const char *const keys[] = {"to_apply", "condition", "body", "true_computation", "false_computation",
                                       "select", "scatter", NULL};
    char v[4096];
    for (int k = 0; keys[k]; k++) {
        if (!attr_in(tail, keys[k], v, sizeof v))
            continue;
        if (strcmp(s.op, "call") == 0) {
            s.call = strdup(v[0] == '%' ? v + 1 : v);
            continue;
        }
        s.refs = grow(s.refs, sizeof *s.refs, s.n_refs);
        s.refs[s.n_refs++] = strdup(v);
    }
    if (attr_in(tail, "branch_computations", v, sizeof v)) {
        for (char *t = strtok(v + 1, ",} "); t; t = strtok(NULL, ",} ")) {
            s.refs = grow(s.refs, sizeof *s.refs, s.n_refs);
            s.refs[s.n_refs++] = strdup(t);
        }
    }
    free(tail);
    for (int i = 0; i < s.n_opnds; i++) {
        sinst *o = sinst_find(c, s.opnds[i]);
        ck_assert_msg(o != NULL, "scanner: operand %s of %s not found", s.opnds[i], s.name);
        o->uses++;
        if (strcmp(s.op, "get-tuple-element") != 0 && strcmp(s.op, "opt-barrier") != 0)
            o->whole_use = true;
    }
    c->v = grow(c->v, sizeof *c->v, c->n);
    c->v[c->n++] = s;
}

static void scan_file(const char *text, sfile *f)
{
    memset(f, 0, sizeof *f);
    scomp *cur = NULL;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *l = dupn(line, len);
        line = nl ? nl + 1 : line + len;
        if (strncmp(l, "HloModule", 9) == 0 || len == 0) {
            free(l);
            continue;
        }
        if (l[0] != ' ' && l[0] != '}') { /* a computation header */
            f->c = grow(f->c, sizeof *f->c, f->n);
            cur = &f->c[f->n++];
            memset(cur, 0, sizeof *cur);
            const char *q = l;
            if (strncmp(q, "ENTRY ", 6) == 0) {
                cur->entry = true;
                q += 6;
            }
            if (*q == '%')
                q++;
            snprintf(cur->name, sizeof cur->name, "%.*s", (int)strcspn(q, " {"), q);
        } else if (l[0] == ' ' && strchr(l, '=') && cur) {
            scan_instruction(cur, l);
            f->n_insts++;
        }
        free(l);
    }
}

static void sfile_free(sfile *f)
{
    for (int i = 0; i < f->n; i++) {
        for (int k = 0; k < f->c[i].n; k++) {
            sinst *s = &f->c[i].v[k];
            for (int j = 0; j < s->n_opnds; j++)
                free(s->opnds[j]);
            for (int j = 0; j < s->n_refs; j++)
                free(s->refs[j]);
            free(s->opnds);
            free(s->refs);
            free(s->call);
        }
        free(f->c[i].v);
    }
    free(f->c);
}

static bool is_multi(const sinst *s) { return s->tuple && in(multi_ops, s->op); }

static int root_index(const scomp *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->v[i].root)
            return i;
    return c->n - 1;
}

/* Ops of one instantiation of c, without its region computations. */
static long local_ops(scomp *c, bool flat)
{
    long n = 1; /* the return */
    for (int i = 0; i < c->n; i++) {
        sinst *s = &c->v[i];
        if (strcmp(s->op, "parameter") == 0)
            continue;
        if (strcmp(s->op, "get-tuple-element") == 0) {
            sinst *o = sinst_find(c, s->opnds[0]);
            if (is_multi(o))
                continue;
        }
        n++;
        if (is_multi(s) && s->whole_use)
            n++;
        if (strcmp(s->op, "opt-barrier") == 0) { /* a plain tuple operand is taken apart */
            sinst *o = sinst_find(c, s->opnds[0]);
            if (o->tuple && !is_multi(o) && strcmp(o->op, "tuple") != 0)
                n += o->arity;
        }
    }
    sinst *r = &c->v[root_index(c)];
    if (flat && strcmp(r->op, "tuple") == 0 && r->uses == 0)
        n--;
    else if (flat && r->tuple && !is_multi(r) && strcmp(r->op, "tuple") != 0)
        n += r->arity;
    else if (!flat && is_multi(r))
        n++;
    return n;
}

/* Instantiation counts, callers first (computations only name earlier
 * ones), then the predicted number of ops; also how often each opcode
 * appears, for `op`. */
static long predict(sfile *f, long *n_funcs, const char *op, long *op_count)
{
    *n_funcs = 0;
    *op_count = 0;
    for (int i = 0; i < f->n; i++)
        f->c[i].inst_flat = f->c[i].inst_tuple = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->c[i].entry) {
            f->c[i].inst_flat = 1;
            (*n_funcs)++;
        }
        for (int k = 0; k < f->c[i].n; k++)
            if (f->c[i].v[k].call) {
                int d = scomp_find(f, f->c[i].v[k].call);
                ck_assert_int_ge(d, 0);
                if (f->c[d].inst_flat == 0 && !f->c[d].entry) {
                    f->c[d].inst_flat = 1; /* one private function */
                    (*n_funcs)++;
                }
            }
    }
    long total = 1 + *n_funcs;
    for (int i = f->n - 1; i >= 0; i--) {
        scomp *c = &f->c[i];
        long times = c->inst_flat + c->inst_tuple;
        if (!times)
            continue;
        for (int k = 0; k < c->n; k++) {
            sinst *s = &c->v[k];
            if (strcmp(s->op, op) == 0)
                *op_count += times;
            for (int j = 0; j < s->n_refs; j++) {
                int d = scomp_find(f, s->refs[j]);
                ck_assert_msg(d >= 0 && d < i, "scanner: %s", s->refs[j]);
                if (strcmp(s->op, "while") == 0)
                    f->c[d].inst_tuple += times;
                else
                    f->c[d].inst_flat += times;
            }
        }
        total += c->inst_flat * local_ops(c, true) + c->inst_tuple * local_ops(c, false);
    }
    return total;
}

static uint64_t stat_of(const ir_stats *st, const char *name)
{
    for (uint32_t i = 0; i < st->n_kinds; i++)
        if (strcmp(st->by_name[i].name, name) == 0)
            return st->by_name[i].count;
    return 0;
}

/* The MANIFEST's "ops" column for a file, -1 when absent. */
static long manifest_ops(const char *file)
{
    char path[512], key[300];
    snprintf(path, sizeof path, "%s/corpus/MANIFEST.md", AP_SHARED_DIR);
    char *text = NULL;
    size_t len = 0;
    ap_error err;
    if (ap_read_file(path, &text, &len, &err) < 0)
        return -1;
    snprintf(key, sizeof key, "| `%s` |", file);
    long v = -1;
    size_t at = strstr(text, key) ? (size_t)(strstr(text, key) - text) : strlen(text);
    for (int bar = 0; text[at] && bar < 6; bar++) /* | file | repo | path | commit | license | size | ops */
        at += 1 + strcspn(text + at + 1, "|");
    if (text[at] == '|')
        v = strtol(text + at + 1, NULL, 10);
    ap_free(text);
    return v;
}

/* ============================================================== corpus */

START_TEST(corpus_files)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/corpus/hlo", AP_SHARED_DIR);
    char **files;
    int n = tl_list(dir, ".hlo", &files);
    ck_assert_int_ge(n, 10);
    for (int i = 0; i < n; i++) {
        char path[1024], msg[800], why[600];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        size_t len;
        char *text = tl_read(path, &len);
        ir_module *m = NULL;
        ap_error err;
        int rc = ir_parse(text, len, files[i], IR_FMT_HLO, &m, &err);
        if (rc < 0)
            ap_error_format(&err, msg, sizeof msg);
        ck_assert_msg(rc == 0, "%s: %s", files[i], msg);
        ck_assert_msg(roundtrips(m, why, sizeof why), "%s: %s", files[i], why);
        /* op counts against the independent scan */
        sfile f;
        scan_file(text, &f);
        long want_manifest = manifest_ops(files[i]);
        ck_assert_msg(want_manifest < 0 || want_manifest == f.n_insts, "%s: MANIFEST says %ld ops, scan found %ld",
                      files[i], want_manifest, f.n_insts);
        ir_stats st;
        ck_assert_int_eq(ir_stats_compute(m, &st), 0);
        static const char *const kinds[][2] = {
            {"add", "stablehlo.add"},           {"multiply", "stablehlo.multiply"},
            {"dot", "stablehlo.dot_general"},   {"reduce", "stablehlo.reduce"},
            {"while", "stablehlo.while"},       {"custom-call", "stablehlo.custom_call"},
            {"all-reduce", "stablehlo.all_reduce"}, {"convolution", "stablehlo.convolution"},
            {"constant", "stablehlo.constant"}, {"call", "func.call"},
            {"copy", "mhlo.copy"},              {"broadcast", "stablehlo.broadcast_in_dim"},
        };
        long n_funcs = 0, total = 0;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            long want_kind;
            total = predict(&f, &n_funcs, kinds[k][0], &want_kind);
            ck_assert_msg((uint64_t)want_kind == stat_of(&st, kinds[k][1]), "%s: %ld %s predicted, %llu made",
                          files[i], want_kind, kinds[k][1], (unsigned long long)stat_of(&st, kinds[k][1]));
        }
        ck_assert_msg((uint64_t)total == st.n_ops, "%s: %ld ops predicted, %llu made", files[i], total,
                      (unsigned long long)st.n_ops);
        ck_assert_int_eq((long)stat_of(&st, "func.func"), n_funcs);
        ir_stats_free(&st);
        sfile_free(&f);
        ir_module_free(m);
        ap_free(text);
    }
    tl_list_free(files, n);
}
END_TEST

/* ================================================== op by op mappings */

/* Auto-detection looks past both comment styles HLO text allows. */
START_TEST(detect_format)
{
    static const char *const hlo[] = {"HloModule m", "  // c\n/* a\n b */ HloModule m", "/**/HloModule", NULL};
    static const char *const mlir[] = {"module {}", "// HloModule\nmodule {}", "/* HloModule", "", NULL};
    for (int i = 0; hlo[i]; i++)
        ck_assert_msg(ir_detect_format(hlo[i], strlen(hlo[i])) == IR_FMT_HLO, "%s", hlo[i]);
    for (int i = 0; mlir[i]; i++)
        ck_assert_msg(ir_detect_format(mlir[i], strlen(mlir[i])) == IR_FMT_STABLEHLO, "%s", mlir[i]);
}
END_TEST

/* More parameters than the first guess, in a computation without a
 * signature, used before all are seen. */
START_TEST(many_parameters)
{
    ap_buf h;
    ap_buf_init(&h);
    ap_buf_puts(&h, "HloModule many\nENTRY e {\n  p0 = f32[] parameter(0)\n  s0 = f32[] add(p0, p0)\n");
    for (int i = 1; i < 40; i++)
        ap_buf_printf(&h, "  p%d = f32[] parameter(%d)\n  s%d = f32[] add(s%d, p%d)\n", i, i, i, i - 1, i);
    ap_buf_puts(&h, "  ROOT r = f32[] add(s39, p0)\n}\n");
    char msg[800], why[600];
    ir_module *m = hlo_parse(h.data, "many.hlo", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ir_op *f = ir_module_func(m, "main");
    ck_assert_int_eq(ir_func_num_args(f), 40);
    ir_block *b = ir_func_entry(f);
    ir_op *op = b->first;
    ck_assert_ptr_eq(op->operands[0], &b->args[0]);
    for (int i = 1; i < 40; i++) {
        op = op->next;
        ck_assert_ptr_eq(op->operands[1], &b->args[i]);
    }
    ck_assert_str_eq(ir_func_arg_name(f, 39), "p39");
    ck_assert_msg(roundtrips(m, why, sizeof why), "%s", why);
    ir_module_free(m);
    ap_buf_free(&h);
}
END_TEST

/* Windows, sort, batch norm, opt-barrier and typed attributes, read back
 * through the IR accessors. */
START_TEST(windows_sort_misc)
{
    const char *src =
        "HloModule w\n"
        "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
        "ge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
        "  ROOT g = pred[] compare(a, b), direction=GT, type=TOTALORDER\n}\n"
        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
        "ENTRY e {\n"
        "  x = f32[1,8,8,2]{3,2,1,0} parameter(0)\n"
        "  ninf = f32[] constant(-inf)\n"
        "  rw = f32[1,4,4,2]{3,2,1,0} reduce-window(x, ninf), window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_0x0_0x0_0}, to_apply=max\n"
        "  z = f32[] constant(0)\n"
        "  ss = f32[1,8,8,2]{3,2,1,0} select-and-scatter(x, rw, z), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add\n"
        "  v = f32[16] parameter(1)\n"
        "  io = s32[16] iota(), iota_dimension=0\n"
        "  st = (f32[16], s32[16]) sort(v, io), dimensions={0}, is_stable=true, to_apply=ge\n"
        "  sc = f32[2] parameter(2)\n"
        "  bn = (f32[1,8,8,2], f32[2], f32[2]) batch-norm-training(x, sc, sc), epsilon=0.001, feature_index=3\n"
        "  ob = (f32[1,8,8,2], f32[16]) tuple(ss, v)\n"
        "  o = (f32[1,8,8,2], f32[16]) opt-barrier(ob)\n"
        "  rp = f32[16] reduce-precision(v), exponent_bits=8, mantissa_bits=7\n"
        "  ROOT t = ((f32[16], s32[16]), (f32[1,8,8,2], f32[2], f32[2]), (f32[1,8,8,2], f32[16]), f32[16]) tuple(st, bn, o, rp)\n"
        "}\n";
    char msg[800], why[600];
    ir_module *m = hlo_parse(src, "w.hlo", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ck_assert_msg(roundtrips(m, why, sizeof why), "%s", why);
    ir_op *f = ir_module_func(m, "main");
    int64_t v[8];
    const char *want[] = {"stablehlo.constant", "stablehlo.reduce_window", "stablehlo.constant",
                          "stablehlo.select_and_scatter", "stablehlo.iota", "stablehlo.sort",
                          "stablehlo.tuple", "stablehlo.batch_norm_training", "stablehlo.tuple",
                          "stablehlo.tuple", "stablehlo.optimization_barrier", "stablehlo.tuple",
                          "stablehlo.reduce_precision", "func.return", NULL};
    int k = 0;
    for (ir_op *op = ir_func_entry(f)->first; op; op = op->next, k++) {
        ck_assert_ptr_nonnull(want[k]);
        ck_assert_str_eq(op->name, want[k]);
        if (op->opcode == IR_OP_REDUCE_WINDOW) {
            ck_assert_int_eq(ir_attr_int_list(ir_op_attr(op, "window_dimensions"), v, 8), 4);
            ck_assert_int_eq(v[1], 2);
            ck_assert_int_eq(ir_attr_int_list(ir_op_attr(op, "window_strides"), v, 8), 4);
            ck_assert_int_eq(ir_attr_int_list(ir_op_attr(op, "padding"), v, 8), 8);
            ck_assert_int_eq(ir_attr_int_list(ir_op_attr(op, "base_dilations"), v, 8), 4);
            ck_assert_int_eq(ir_region_reduction(&op->regions[0]), IR_OP_MAXIMUM);
        } else if (op->opcode == IR_OP_SELECT_AND_SCATTER) {
            ck_assert_int_eq(op->n_regions, 2);
            ck_assert_int_eq(ir_region_reduction(&op->regions[1]), IR_OP_ADD);
            ck_assert_ptr_null(ir_op_attr(op, "base_dilations"));
        } else if (op->opcode == IR_OP_SORT) {
            ck_assert_int_eq(op->n_results, 2);
            ck_assert_int_eq(ir_op_attr(op, "dimension")->u.i, 0);
            ck_assert(ir_op_attr(op, "is_stable")->u.b);
            char buf[16];
            ir_op *cmp = op->regions[0].first->first;
            ck_assert_str_eq(ir_compare_direction(cmp, buf, sizeof buf), "GT");
            ck_assert_str_eq(ir_op_attr(cmp, "compare_type")->u.dia.body, "comparison_type TOTALORDER");
            ck_assert_int_eq(op->regions[0].first->n_args, 4);
        } else if (op->opcode == IR_OP_BATCH_NORM_TRAINING) {
            ck_assert_int_eq(op->n_results, 3);
            ck_assert_int_eq(ir_op_attr(op, "feature_index")->u.i, 3);
            ck_assert(ir_op_attr(op, "epsilon")->u.f == (double)0.001f);
        } else if (op->opcode == IR_OP_OPTIMIZATION_BARRIER) {
            ck_assert_int_eq(op->n_operands, 2);
            ck_assert_int_eq(op->n_results, 2);
        } else if (op->opcode == IR_OP_FUNC_RETURN) {
            ck_assert_int_eq(op->n_operands, 4);
        }
    }
    ck_assert_ptr_null(want[k]);
    ir_module_free(m);
}
END_TEST

/* Rarer opcodes: each becomes its StableHLO op and round-trips. */
START_TEST(rare_opcodes)
{
    const char *src =
        "HloModule rare, replica_count=2\n"
        "add {\n"
        "  a = f32[] parameter(0)\n"
        "  b = f32[] parameter(1)\n"
        "  ROOT s = f32[] add(a, b)\n"
        "}\n"
        "add2 {\n"
        "  a = f32[] parameter(0)\n"
        "  b = s32[] parameter(1)\n"
        "  c = f32[] parameter(2)\n"
        "  d = s32[] parameter(3)\n"
        "  x = f32[] add(a, c)\n"
        "  y = s32[] add(b, d)\n"
        "  ROOT t = (f32[], s32[]) tuple(x, y)\n"
        "}\n"
        "ENTRY e {\n"
        "  s = f32[] parameter(0)\n"
        "  z = f32[] constant(0)\n"
        "  rw = f32[] reduce-window(s, z), window={}, to_apply=add\n"
        "  v = f32[8,4] parameter(1)\n"
        "  a2a = f32[8,4] all-to-all(v), channel_id=1, replica_groups={{0,1}}, dimensions={0}\n"
        "  rs = f32[4,4] reduce-scatter(v), channel_id=2, replica_groups={{0,1}}, dimensions={0}, to_apply=add\n"
        "  ar = (f32[8,4], f32[]) all-reduce(v, s), replica_groups={}, to_apply=add\n"
        "  g0 = f32[8,4] get-tuple-element(ar), index=0\n"
        "  cb = f32[8,4] collective-broadcast(g0), replica_groups={{0,1}}\n"
        "  mp = f32[8,4] map(cb, v), dimensions={0,1}, to_apply=add\n"
        "  st = u64[2] parameter(2)\n"
        "  rb = (u64[2], u32[8,4]) rng-bit-generator(st), algorithm=rng_three_fry\n"
        "  bits = u32[8,4] get-tuple-element(rb), index=1\n"
        "  pc = u32[8,4] popcnt(bits)\n"
        "  cx = c64[8,4] parameter(3)\n"
        "  ff = c64[8,4] fft(cx), fft_type=FFT, fft_length={4}\n"
        "  m = f32[4,4] parameter(4)\n"
        "  ch = f32[4,4] cholesky(m), lower=true\n"
        "  ts = f32[4,4] triangular-solve(ch, m), left_side=true, lower=true, transpose_a=NO_TRANSPOSE\n"
        "  gd = s32[] get-dimension-size(v), dimensions={1}\n"
        "  pid = u32[] partition-id()\n"
        "  rid = u32[] replica-id()\n"
        "  tok = token[] after-all()\n"
        "  io = s32[3,4] iota(), iota_dimension=0\n"
        "  io2 = s32[8,4] iota(), iota_dimension=1\n"
        "  zi = s32[] constant(0)\n"
        "  vr = (f32[8], s32[8]) reduce(v, io2, z, zi), dimensions={1}, to_apply=add2\n"
        "  ROOT r = (f32[], f32[8,4], f32[4,4], f32[8,4], u32[8,4], c64[8,4], f32[4,4], s32[], u32[], u32[], token[], s32[3,4]) tuple(rw, a2a, rs, mp, pc, ff, ts, gd, pid, rid, tok, io)\n"
        "}\n";
    char msg[800], why[600];
    ir_module *m = hlo_parse(src, "rare.hlo", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ck_assert_msg(roundtrips(m, why, sizeof why), "%s", why);
    ir_stats st;
    ck_assert_int_eq(ir_stats_compute(m, &st), 0);
    static const char *const want[] = {
        "stablehlo.reduce_window", "stablehlo.all_to_all", "stablehlo.reduce_scatter", "stablehlo.all_reduce",
        "stablehlo.collective_broadcast", "stablehlo.map", "stablehlo.rng_bit_generator", "stablehlo.popcnt",
        "stablehlo.fft", "stablehlo.cholesky", "stablehlo.triangular_solve", "stablehlo.get_dimension_size",
        "stablehlo.partition_id", "stablehlo.replica_id", "stablehlo.after_all", "stablehlo.iota", NULL};
    for (int i = 0; want[i]; i++)
        ck_assert_msg(stat_of(&st, want[i]) >= 1, "no %s", want[i]);
    ck_assert_int_eq((long)stat_of(&st, "stablehlo.get_tuple_element"), 0); /* both name results directly */
    ck_assert_int_eq((long)stat_of(&st, "stablehlo.reduce"), 1);
    ir_stats_free(&st);
    ir_module_free(m);
}
END_TEST

/* Parameter shardings survive as mhlo.sharding argument attributes and the
 * importer turns them into a schedule: iota and explicit device lists,
 * replicated last tile dims; a location name shared by two parameters is
 * no reference, so those arguments are named %argN. */
START_TEST(sharding_to_schedule)
{
    const char *src =
        "HloModule s, num_partitions=4\n"
        "ENTRY e {\n"
        "  x = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}\n"
        "  w = f32[4,6]{1,0} parameter(1), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}, "
        "metadata={op_name=\"params\"}\n"
        "  b = f32[6]{0} parameter(2), sharding={replicated}, metadata={op_name=\"params\"}\n"
        "  v = f32[8,6]{1,0} parameter(3), sharding={devices=[2,2]<=[4]}\n"
        "  d = f32[8,6]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  bb = f32[8,6]{1,0} broadcast(b), dimensions={1}\n"
        "  s = f32[8,6]{1,0} add(d, bb)\n"
        "  ROOT r = f32[8,6]{1,0} add(s, v), sharding={devices=[2,2]<=[4]}\n"
        "}\n";
    char msg[800];
    ir_module *m = hlo_parse(src, "s.hlo", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ir_op *f = ir_module_entry(m);
    ck_assert_str_eq(ir_func_arg_attr(f, 0, "mhlo.sharding")->u.str.s, "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
    ck_assert_str_eq(ir_func_arg_attr(f, 2, "mhlo.sharding")->u.str.s, "{replicated}");
    ck_assert_str_eq(ir_func_result_attr(f, 0, "mhlo.sharding")->u.str.s, "{devices=[2,2]<=[4]}");
    ir_mesh mesh;
    ap_error err;
    ck_assert_int_eq(ir_mesh_parse("batch=2,model=2", &mesh, &err), 0);
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(ir_schedule_import(m, f, &mesh, &b, &err), 4);
    ck_assert_str_eq(b.data, "tile x 0 batch\ntile %arg1 1 batch\ntile v 0 batch\ntile v 1 model\npropagate\n");
    /* the schedule applies to the parsed module */
    ir_pctx *ctx = NULL;
    ir_partition *part = NULL;
    ck_assert_int_eq(ir_pctx_new(m, f, &mesh, &ctx, &err), 0);
    ck_assert_int_eq(ir_partition_new(ctx, &part, &err), 0);
    int rc = ir_schedule_apply(part, b.data, &err);
    ck_assert_msg(rc >= 0, "%s", err.msg);
    ir_layout l;
    ir_partition_value_layout(part, ir_func_arg(f, 1), &l);
    int axes[IR_MAX_AXES];
    ck_assert_int_eq(ir_layout_dim_axes(&l, 1, axes), 1);
    ck_assert_int_eq(axes[0], 0);
    ir_partition_free(part);
    ir_pctx_free(ctx);
    ir_module_free(m);
    /* a transposed device order (tile (i, j) on device 2j + i): dim 0 runs
     * over the minor mesh axis, listed or as an iota with a transpose */
    static const char *const transposed[] = {"{devices=[2,2]0,2,1,3}", "{devices=[2,2]<=[2,2]T(1,0)}"};
    for (int i = 0; i < 2; i++) {
        char src_t[256];
        snprintf(src_t, sizeof src_t, "HloModule p\nENTRY e {\n  ROOT x = f32[8,4] parameter(0), sharding=%s\n}\n",
                 transposed[i]);
        ck_assert_ptr_nonnull(m = hlo_parse(src_t, "p.hlo", msg, sizeof msg));
        ap_buf_reset(&b);
        ck_assert_int_eq(ir_schedule_import(m, ir_module_entry(m), &mesh, &b, &err), 2);
        ck_assert_str_eq(b.data, "tile x 0 model\ntile x 1 batch\npropagate\n");
        /* and it applies: dim 0 over model, dim 1 over batch */
        ir_pctx *tctx = NULL;
        ir_partition *tpart = NULL;
        ck_assert_int_eq(ir_pctx_new(m, ir_module_entry(m), &mesh, &tctx, &err), 0);
        ck_assert_int_eq(ir_partition_new(tctx, &tpart, &err), 0);
        ck_assert_msg(ir_schedule_apply(tpart, b.data, &err) >= 0, "%s", err.msg);
        ir_partition_value_layout(tpart, ir_func_arg(ir_module_entry(m), 0), &l);
        ck_assert_int_eq(ir_layout_dim_axes(&l, 0, axes), 1);
        ck_assert_int_eq(axes[0], 1);
        ck_assert_int_eq(ir_layout_dim_axes(&l, 1, axes), 1);
        ck_assert_int_eq(axes[0], 0);
        ir_partition_free(tpart);
        ir_pctx_free(tctx);
        ir_module_free(m);
    }
    /* one dim over both axes, the second axis major */
    ck_assert_ptr_nonnull(m = hlo_parse("HloModule p\nENTRY e {\n  ROOT x = f32[8] parameter(0), "
                                        "sharding={devices=[4]<=[2,2]T(1,0)}\n}\n", "p.hlo", msg, sizeof msg));
    ap_buf_reset(&b);
    ck_assert_int_eq(ir_schedule_import(m, ir_module_entry(m), &mesh, &b, &err), 2);
    ck_assert_str_eq(b.data, "tile x 0 model\ntile x 0 batch\npropagate\n");
    ir_module_free(m);
    /* a device order no mesh axes give is refused, as is a tiling that
     * leaves devices out */
    static const char *const refused[][2] = {
        {"f32[8]", "{devices=[4]0,2,3,1}"},
        {"f32[8,4]", "{devices=[2,2]0,3,1,2}"},
        {"f32[8,4]", "{devices=[2,1]<=[2]}"},
        {"f32[8,4]", "{devices=[2,2]0,1,2,2}"},
    };
    static const char *const why[] = {
        "mhlo.sharding of x: its device order ({devices=[4]0,2,3,1}) does not map onto the mesh axes",
        "mhlo.sharding of x: its device order ({devices=[2,2]0,3,1,2}) does not map onto the mesh axes",
        "mhlo.sharding of x ({devices=[2,1]<=[2]}) places 2 tiles on a mesh of 4 devices",
        "mhlo.sharding of x: the device list of {devices=[2,2]0,1,2,2} is not the mesh's 4 devices",
    };
    for (int i = 0; i < 4; i++) {
        char src_r[256];
        snprintf(src_r, sizeof src_r, "HloModule p\nENTRY e {\n  ROOT x = %s parameter(0), sharding=%s\n}\n",
                 refused[i][0], refused[i][1]);
        ck_assert_ptr_nonnull(m = hlo_parse(src_r, "p.hlo", msg, sizeof msg));
        ap_buf_reset(&b);
        ck_assert_int_lt(ir_schedule_import(m, ir_module_entry(m), &mesh, &b, &err), 0);
        ck_assert_str_eq(err.msg, why[i]);
        ir_module_free(m);
    }
    /* MaxText's 128-device layout: 64-way on dim 0 over the minor axis,
     * replicated over the major one */
    ck_assert_int_eq(ir_mesh_parse("stage=2,data=64", &mesh, &err), 0);
    ck_assert_ptr_nonnull(m = hlo_parse("HloModule q, num_partitions=128\nENTRY e {\n"
                                        "  ROOT x = f32[128,8] parameter(0), "
                                        "sharding={devices=[64,1,2]<=[2,64]T(1,0) last_tile_dim_replicate}\n}\n",
                                        "q.hlo", msg, sizeof msg));
    ap_buf_reset(&b);
    ck_assert_int_eq(ir_schedule_import(m, ir_module_entry(m), &mesh, &b, &err), 1);
    ck_assert_str_eq(b.data, "tile x 0 data\npropagate\n");
    ap_buf_free(&b);
    ir_module_free(m);
}
END_TEST

/* Sharding constraints in the body (jax.lax.with_sharding_constraint:
 * custom-call "Sharding") become tile actions on their values, as PartIR
 * takes a constraint; propagation then carries the tiling back to the
 * producer (here a dot that nothing else tiles: the arguments are
 * replicated) and forward to the readers.  The corpus's DeepSeek step
 * constrains its logits so (line 12441). */
START_TEST(sharding_constraints_to_schedule)
{
    char msg[800];
    ap_error err;
    const char *src = "HloModule c\n"
                      "ENTRY %main.7 (Arg_0.1: f32[8,16], Arg_1.2: f32[16,32]) -> f32[8,32] {\n"
                      "  %Arg_0.1 = f32[8,16]{1,0} parameter(0)\n"
                      "  %Arg_1.2 = f32[16,32]{1,0} parameter(1)\n"
                      "  %dot.3 = f32[8,32]{1,0} dot(%Arg_0.1, %Arg_1.2), lhs_contracting_dims={1}, "
                      "rhs_contracting_dims={0}\n"
                      "  %sharding_constraint.4 = f32[8,32]{1,0} custom-call(%dot.3), custom_call_target=\"Sharding\", "
                      "sharding={devices=[4,1]<=[4]}\n"
                      "  %replicated.5 = f32[8,32]{1,0} custom-call(%sharding_constraint.4), "
                      "custom_call_target=\"Sharding\", sharding={replicated}\n"
                      "  ROOT %tanh.6 = f32[8,32]{1,0} tanh(%replicated.5)\n"
                      "}\n";
    ir_module *m = hlo_parse(src, "c.hlo", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ir_op *f = ir_module_entry(m);
    ir_mesh mesh;
    ck_assert_int_eq(ir_mesh_parse("x=4", &mesh, &err), 0);
    ap_buf b;
    ap_buf_init(&b);
    ck_assert_int_eq(ir_schedule_import(m, f, &mesh, &b, &err), 1);
    ck_assert_str_eq(b.data, "# sharding_constraint.4\ntile %1 0 x\n# replicated.5\npropagate\n");
    ir_pctx *ctx = NULL;
    ir_partition *part = NULL;
    ck_assert_int_eq(ir_pctx_new(m, f, &mesh, &ctx, &err), 0);
    ck_assert_int_eq(ir_partition_new(ctx, &part, &err), 0);
    ck_assert_msg(ir_schedule_apply(part, b.data, &err) >= 0, "%s", err.msg);
    /* the dot's rows, and the first argument's, are split over x */
    const ir_op *dot = ir_func_entry(f)->first;
    ck_assert_int_eq(dot->opcode, IR_OP_DOT_GENERAL);
    ir_layout l;
    int axes[IR_MAX_AXES];
    ir_partition_value_layout(part, &dot->results[0], &l);
    ck_assert_int_eq(ir_layout_dim_axes(&l, 0, axes), 1);
    ck_assert_int_eq(axes[0], 0);
    ir_partition_value_layout(part, ir_func_arg(f, 0), &l);
    ck_assert_int_eq(ir_layout_dim_axes(&l, 0, axes), 1);
    ir_partition_free(part);
    ir_pctx_free(ctx);
    ap_buf_free(&b);
    ir_module_free(m);
}
END_TEST

/* Two HLO texts give the same module. */
static void same_hlo(const char *a, const char *b)
{
    char msg[800], why[600];
    ir_module *ma = hlo_parse(a, "a.hlo", msg, sizeof msg);
    ck_assert_msg(ma != NULL, "a: %s\n%s", msg, a);
    ir_module *mb = hlo_parse(b, "b.hlo", msg, sizeof msg);
    ck_assert_msg(mb != NULL, "b: %s\n%s", msg, b);
    ck_assert_msg(ir_module_equal(ma, mb, why, sizeof why), "%s", why);
    ck_assert_msg(roundtrips(ma, why, sizeof why), "%s", why);
    ir_module_free(ma);
    ir_module_free(mb);
}

/* Text XLA accepts that the parser once refused (issue 11, item 7): no
 * HloModule header, an entry not marked ENTRY, the stack frame tables,
 * buffer shapes, mesh replica groups, bounded dims. */
START_TEST(real_world_hlo_forms)
{
    /* XLA's tests write computations without a header; the module is named
     * after the entry, and auto-detection sees HLO */
    const char *no_header = "add {\n"
                            "  lhs = f32[] parameter(0)\n"
                            "  rhs = f32[] parameter(1)\n"
                            "  ROOT add = f32[] add(lhs, rhs)\n"
                            "}\n\n"
                            "ENTRY %main.5 (p: f32[8]) -> f32[] {\n"
                            "  p = f32[8]{0} parameter(0)\n"
                            "  c = f32[] constant(0)\n"
                            "  ROOT r = f32[] reduce(p, c), dimensions={0}, to_apply=add\n"
                            "}\n";
    const char *want = "module @module_main.5 {\n"
                       "  func.func public @main(%arg0: tensor<8xf32> loc(\"p\")) -> tensor<f32> attributes "
                       "{hlo.computation_name = \"main.5\"} {\n"
                       "    %0 = stablehlo.constant dense<0.0> : tensor<f32> loc(\"c\")\n"
                       "    %1 = stablehlo.reduce(%arg0 init: %0) across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>\n"
                       "     reducer(%a: tensor<f32>, %b: tensor<f32>) {\n"
                       "      %2 = stablehlo.add %a, %b : tensor<f32> loc(\"add\")\n"
                       "      stablehlo.return %2 : tensor<f32> loc(\"add\")\n"
                       "    } loc(\"r\")\n"
                       "    return %1 : tensor<f32> loc(\"r\")\n"
                       "  }\n"
                       "}\n";
    same_as_mlir(no_header, want);
    ck_assert_int_eq(ir_detect_format(no_header, strlen(no_header)), IR_FMT_HLO);
    /* ... also when it starts at ENTRY, and an HloModule without ENTRY
     * takes its last computation as the entry, as XLA does */
    static const char *const entry_first[] = {
        "ENTRY %e {\n  %p = f32[2] parameter(0)\n  ROOT %n = f32[2] negate(%p)\n}\n",
        "HloModule m\n\nhelper {\n  x = f32[2] parameter(0)\n  ROOT a = f32[2] abs(x)\n}\n\n"
        "e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n",
        "%e (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%p)\n}\n",
        "e {\n  ROOT n = f32[2] parameter(0)\n}\n",
    };
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(ir_detect_format(entry_first[i], strlen(entry_first[i])) == IR_FMT_HLO, "%s", entry_first[i]);
        char msg[800];
        ir_module *m = hlo_parse(entry_first[i], "e.hlo", msg, sizeof msg);
        ck_assert_msg(m != NULL, "%s", msg);
        ir_op *f = ir_module_entry(m);
        ck_assert_str_eq(ir_op_attr(f, "hlo.computation_name")->u.str.s, "e");
        ck_assert_str_eq(ir_op_attr(m->top, "sym_name")->u.str.s, i == 1 ? "m" : "module_e");
        ir_module_free(m);
    }
    static const char *const mlir_like[] = {"module {\n  %0 = \"x.y\"() : () -> tensor<2xf32>\n}\n",
                                            "func.func @e(%p: tensor<2xf32>) {\n  return\n}\n",
                                            "e.f (%p: tensor<2xf32>) {\n}\n", NULL};
    for (int i = 0; mlir_like[i]; i++)
        ck_assert_msg(ir_detect_format(mlir_like[i], strlen(mlir_like[i])) == IR_FMT_STABLEHLO, "%s", mlir_like[i]);

    /* the stack frame tables newer XLA prints after the header: an
     * instruction's stack_frame_id becomes the call stack XLA's importer
     * builds, callee at caller; frames a dump leaves out are unknown */
    same_as_mlir("HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n"
                 "FileNames\n1 \"/app/model.py\"\n2 \"/app/train.py\"\n\n"
                 "FunctionNames\n1 \"layer\"\n2 \"train_step\"\n\n"
                 "FileLocations\n"
                 "1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=8 end_column=20}\n"
                 "2 {file_name_id=2 function_name_id=2 line=40 end_line=41 column=4 end_column=30}\n\n"
                 "StackFrames\n1 {file_location_id=2 parent_frame_id=1}\n2 {file_location_id=1 parent_frame_id=2}\n\n\n"
                 "ENTRY %main.4 (Arg_0.1: f32[4]) -> f32[4] {\n"
                 "  %Arg_0.1 = f32[4]{0} parameter(0), metadata={op_name=\"x\"}\n"
                 "  %tanh.2 = f32[4]{0} tanh(f32[4]{0} %Arg_0.1), metadata={op_name=\"jit(f)/tanh\" stack_frame_id=2}\n"
                 "  ROOT %exp.3 = f32[4]{0} exponential(%tanh.2), metadata={op_name=\"jit(f)/exp\" stack_frame_id=1}\n"
                 "}\n",
                 "module @jit_f {\n"
                 "  func.func public @main(%arg0: tensor<4xf32> loc(\"x\")) -> tensor<4xf32> attributes "
                 "{hlo.computation_name = \"main.4\"} {\n"
                 "    %0 = stablehlo.tanh %arg0 : tensor<4xf32> loc(\"jit(f)/tanh\"(callsite(\"layer\"(\"/app/model.py\":12:8) "
                 "at \"train_step\"(\"/app/train.py\":40:4))))\n"
                 "    %1 = stablehlo.exponential %0 : tensor<4xf32> loc(\"jit(f)/exp\"(\"train_step\"(\"/app/train.py\":40:4)))\n"
                 "    return %1 : tensor<4xf32> loc(\"jit(f)/exp\"(\"train_step\"(\"/app/train.py\":40:4)))\n"
                 "  }\n"
                 "}\n");

    /* buffer shapes, as XLA writes a pinned custom-call operand: a memref */

    /* replica_groups=mesh[...] {axes}: the groups of the same collective
     * written out (the devices row-major over the mesh, or as device_ids
     * lists them) */
    static const char *const mesh[][2] = {
        {"mesh['axis_0'=2,'axis_1'=4] {'axis_1'}", "{{0,1,2,3},{4,5,6,7}}"},
        {"mesh['stage'=2,'local'=4] {'stage'}", "{{0,4},{1,5},{2,6},{3,7}}"},
        {"mesh['x'=8] {'x'}", "{{0,1,2,3,4,5,6,7}}"},
        {"mesh[a=2,b=2,c=2] {c,a}", "{{0,4,1,5},{2,6,3,7}}"},
        {"mesh['x'=8] {'x':(2)2}", "{{0,2},{1,3},{4,6},{5,7}}"},
        {"mesh['x'=8] {'x':(1)2,'x':(4)2}", "{{0,1,4,5},{2,3,6,7}}"},
        {"mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y'}", "{{0,2,4,6},{1,3,5,7}}"},
        {"mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0) {'x'}", "{{7,3},{6,2},{5,1},{4,0}}"},
        {"mesh['x'=2,'y'=4] {}", "{{0},{1},{2},{3},{4},{5},{6},{7}}"},
        {"maximal_mesh[device_id=3] {}", "{{3}}"},
    };
    for (int i = 0; i < 10; i++) {
        char a[1024], b[1024];
#define MESH_HLO                                                                                           \
    "HloModule c, num_partitions=8\n"                                                                      \
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"            \
    "ENTRY e {\n  p = f32[8] parameter(0)\n"                                                               \
    "  ROOT a = f32[8] all-reduce(p), channel_id=1, replica_groups=%s, use_global_device_ids=true, "       \
    "to_apply=add, metadata={op_name=\"psum\"}\n}\n"
        snprintf(a, sizeof a, MESH_HLO, mesh[i][0]);
        snprintf(b, sizeof b, MESH_HLO, mesh[i][1]);
#undef MESH_HLO
        same_hlo(a, b);
    }

    /* a bounded dim keeps its bound: s32[2,<=2,2] is a static upper size */
}
END_TEST

/* =============================================================== errors */

/* input_output_alias: the donated parameters get tf.aliasing_output, as
 * JAX writes them in StableHLO (a part of a tuple parameter is not kept) */
START_TEST(input_output_alias)
{
    same_as_mlir("HloModule m, input_output_alias={ {0}: (1, {}, may-alias), {1}: (0, {}, must-alias) }\n"
                 "ENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[3] parameter(1)\n"
                 "  na = f32[2] negate(a)\n  nb = f32[3] negate(b)\n  ROOT t = (f32[3], f32[2]) tuple(nb, na)\n}\n",
                 "module @m {\n  func.func public @main(%a: tensor<2xf32> {tf.aliasing_output = 1 : i32} loc(\"a\"), "
                 "%b: tensor<3xf32> {tf.aliasing_output = 0 : i32} loc(\"b\")) -> (tensor<3xf32>, tensor<2xf32>) "
                 "attributes {hlo.computation_name = \"e\"} {\n"
                 "    %na = stablehlo.negate %a : tensor<2xf32> loc(\"na\")\n"
                 "    %nb = stablehlo.negate %b : tensor<3xf32> loc(\"nb\")\n"
                 "    return %nb, %na : tensor<3xf32>, tensor<2xf32> loc(\"t\")\n  }\n}\n");
    ERR("HloModule m, input_output_alias={ {0}: 1 }\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n",
        "bad.hlo:1:40: error: input_output_alias: expected '(' and a parameter number");
    ERR("HloModule m, input_output_alias={ {x}: (0, {}, may-alias) }\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n",
        "bad.hlo:1:35: error: input_output_alias: expected an output index {...}");
    /* an alias of a parameter or output that does not exist, or of another
     * type (as XLA refuses them; they were skipped or kept silently) */
    ERR("HloModule m, input_output_alias={ {0}: (3, {}, may-alias) }\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n",
        "bad.hlo:1:35: error: input_output_alias: output {0} takes the buffer of parameter 3, but ENTRY has 1 parameter");
    ERR("HloModule m, input_output_alias={ {2}: (0, {}, may-alias) }\nENTRY e {\n  a = f32[2] parameter(0)\n"
        "  ROOT t = (f32[2], f32[2]) tuple(a, a)\n}\n",
        "bad.hlo:1:35: error: input_output_alias: output {2} takes the buffer of parameter 0, but ENTRY returns 2 outputs");
    ERR("HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\nENTRY e {\n  a = s32[2] parameter(0)\n"
        "  ROOT c = f32[2] convert(a)\n}\n",
        "bad.hlo:1:35: error: input_output_alias: output {0}, a tensor<2xf32>, takes the buffer of parameter 0, a "
        "tensor<2xi32>: a donated parameter's buffer holds the output, so both must have one type");
}
END_TEST

START_TEST(errors)
{
    ERR("HloModule m\n", "bad.hlo:2:1: error: expected a computation, found the end of the input");
    ERR("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n",
        "bad.hlo:4:1: error: expected '}' to close the computation, found the end of the input");
    ERR("HloModule m\nENTRY e {\n  ROOT p = f32[2] param", "bad.hlo:3:24: error: expected '(' after the opcode, found the end of the input");
    ERR("HloModule m\nENTRY e {\n  ROOT p = f\xff" "32[2] parameter(0)\n}\n", "bad.hlo:3:13: error: invalid UTF-8 byte 0xFF");
    {
        static const char nul[] = "HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\0\n}\n";
        expect_error(nul, sizeof nul - 1, "bad.hlo:3:31: error: NUL byte in input");
    }
    ERR("HloMod m\n", "bad.hlo:1:8: error: expected '{' to start the computation, found 'm'");
    ERR("", "bad.hlo:1:1: error: expected a computation, found the end of the input");
}
END_TEST

/* Every prefix of a valid module, in a buffer of exactly that size: a
 * clean error (or a module), never a read past the end. */
START_TEST(truncated_prefixes)
{
    const char *src =
        "HloModule t, num_partitions=2\n"
        "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
        "ENTRY e (p: f32[4]) -> f32[] {\n"
        "  p = f32[4]{0} parameter(0), sharding={replicated}, metadata={op_name=\"a\\\"b\" source_file=\"f\" source_line=1}\n"
        "  c = f32[] constant(-1.5e+3)\n"
        "  k = f32[2,2] constant({ {1, 2}, {nan, -inf} })\n"
        "  w = f32[4] reduce-window(p, c), window={size=2 stride=1 pad=0_1}, to_apply=add\n"
        "  ROOT r = f32[] reduce(w, c), dimensions={0}, to_apply=add, frontend_attributes={a=\"b\"}\n"
        "}\n";
    size_t n = strlen(src);
    int ok = 0;
    for (size_t len = 0; len <= n; len++) {
        char *buf = malloc(len ? len : 1);
        memcpy(buf, src, len);
        ir_module *m = NULL;
        ap_error err;
        if (ir_parse(buf, len, "t.hlo", IR_FMT_HLO, &m, &err) == 0) {
            ok++;
            ir_module_free(m);
        } else {
            ck_assert_msg(err.code < 0 && err.msg[0] && err.line > 0, "prefix %zu: no message", len);
        }
        free(buf);
    }
    ck_assert_int_ge(ok, 1); /* at least the whole text */
}
END_TEST

/* Deep tuples, deep literals and computations that would expand
 * exponentially are refused with a message. */
START_TEST(limits)
{
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "HloModule d\nENTRY e {\n  ROOT p = ");
    for (int i = 0; i < 100; i++)
        ap_buf_putc(&b, '(');
    ap_buf_puts(&b, "f32[]");
    for (int i = 0; i < 100; i++)
        ap_buf_putc(&b, ')');
    ap_buf_puts(&b, " parameter(0)\n}\n");
    expect_error(b.data, b.len, "bad.hlo:3:77: error: shapes nested too deeply");
    /* c_k reduces twice with c_{k-1}: 2^40 copies */
    ap_buf_reset(&b);
    ap_buf_puts(&b, "HloModule x\nc0 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n");
    for (int k = 1; k <= 40; k++)
        ap_buf_printf(&b,
                      "c%d {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                      "  r1 = f32[] reduce(a, b), dimensions={}, to_apply=c%d\n"
                      "  ROOT r2 = f32[] reduce(r1, b), dimensions={}, to_apply=c%d\n}\n",
                      k, k - 1, k - 1);
    ap_buf_puts(&b, "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT r = f32[] reduce(a, a), dimensions={}, to_apply=c40\n}\n");
    ir_module *m = NULL;
    ap_error err;
    ck_assert_int_eq(ir_parse(b.data, b.len, "x.hlo", IR_FMT_HLO, &m, &err), AP_ELIMIT);
    ck_assert_msg(strstr(err.msg, "computations expand to more than"), "%s", err.msg);
    /* a chain of nested computations deeper than the limit */
    ap_buf_reset(&b);
    ap_buf_puts(&b, "HloModule y\nc0 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n");
    for (int k = 1; k <= 70; k++)
        ap_buf_printf(&b,
                      "c%d {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                      "  ROOT r = f32[] reduce(a, b), dimensions={}, to_apply=c%d\n}\n",
                      k, k - 1);
    ap_buf_puts(&b, "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT r = f32[] reduce(a, a), dimensions={}, to_apply=c70\n}\n");
    ck_assert_int_eq(ir_parse(b.data, b.len, "y.hlo", IR_FMT_HLO, &m, &err), AP_ELIMIT);
    ck_assert_msg(strstr(err.msg, "computations nested more than"), "%s", err.msg);
    /* replica groups that a short text would blow up into a huge table */
    ap_buf_reset(&b);
    ap_buf_puts(&b, "HloModule g\nENTRY e {\n  p = f32[8] parameter(0)\n"
                    "  ROOT a = f32[8] all-gather(p), dimensions={0}, replica_groups={");
    for (int i = 0; i < 2000; i++)
        ap_buf_puts(&b, "{0},");
    ap_buf_puts(&b, "{0");
    for (int i = 1; i < 1000; i++)
        ap_buf_printf(&b, ",%d", i);
    ap_buf_puts(&b, "}}\n}\n");
    ck_assert_int_eq(ir_parse(b.data, b.len, "g.hlo", IR_FMT_HLO, &m, &err), AP_ELIMIT);
    ck_assert_str_eq(err.msg, "replica groups of more than 1048576 devices");
    const char *iota = "HloModule g\nENTRY e {\n  p = f32[8] parameter(0)\n"
                       "  ROOT a = f32[8] all-gather(p), dimensions={0}, replica_groups=[2048,1024]<=[2097152]\n}\n";
    ck_assert_int_eq(ir_parse(iota, strlen(iota), "g.hlo", IR_FMT_HLO, &m, &err), AP_ELIMIT);
    ck_assert_str_eq(err.msg, "replica groups of more than 1048576 devices");
    ap_buf_free(&b);
}
END_TEST

/* =============================================================== suite */

/* Forms of real files the parser used to refuse (issue 23): lit RUN lines
 * before the header, `constant(1)` for a non-scalar shape, collectives
 * with no replica_groups; and files that are not one module of HLO text,
 * refused saying what they are and what to do. */
START_TEST(real_file_gaps)
{
    /* `# RUN:` lines of lit tests, detected as HLO too */
    static const char lit[] = "# RUN: hlo-opt %s --platform=cpu | FileCheck %s\n# CHECK: ROOT\n"
                              "HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n  # a note\n"
                              "  ROOT n = f32[4] negate(p)\n}\n";
    ck_assert_int_eq(ir_detect_format(lit, strlen(lit)), IR_FMT_HLO);
    same_as_mlir(lit, "module @m {\n  func.func public @main(%arg0: tensor<4xf32> loc(\"p\")) -> tensor<4xf32> "
                      "attributes {hlo.computation_name = \"main\"} {\n    %0 = stablehlo.negate %arg0 : "
                      "tensor<4xf32> loc(\"n\")\n    return %0 : tensor<4xf32> loc(\"n\")\n  }\n}\n");
    /* an MLIR alias is not such a line */
    static const char alias[] = "#map = affine_map<(d0) -> (d0)>\nmodule {}\n";
    ck_assert_int_eq(ir_detect_format(alias, strlen(alias)), IR_FMT_STABLEHLO);

    /* one value for a whole shape */
    same_as_mlir("HloModule m\nENTRY main {\n  p = f32[2,3] parameter(0)\n  c = f32[2,3] constant(1)\n"
                 "  ROOT a = f32[2,3] add(p, c)\n}\n",
                 "module @m {\n  func.func public @main(%arg0: tensor<2x3xf32> loc(\"p\")) -> tensor<2x3xf32> "
                 "attributes {hlo.computation_name = \"main\"} {\n    %0 = stablehlo.constant dense<1.0> : "
                 "tensor<2x3xf32> loc(\"c\")\n    %1 = stablehlo.add %arg0, %0 : tensor<2x3xf32> loc(\"a\")\n"
                 "    return %1 : tensor<2x3xf32> loc(\"a\")\n  }\n}\n");

    /* no replica_groups: one group of every device, an empty table */
    same_as_mlir("HloModule m, num_partitions=4\nENTRY main {\n  p = f32[2] parameter(0)\n"
                 "  ROOT ag = f32[8] all-gather(p), dimensions={0}\n}\n",
                 "module @m attributes {mhlo.num_partitions = 4 : i32} {\n  func.func public @main(%arg0: "
                 "tensor<2xf32> loc(\"p\")) -> tensor<8xf32> attributes {hlo.computation_name = \"main\"} {\n"
                 "    %0 = \"stablehlo.all_gather\"(%arg0) {all_gather_dim = 0 : i64, replica_groups = dense<> : "
                 "tensor<0x0xi64>} : (tensor<2xf32>) -> tensor<8xf32> loc(\"ag\")\n    return %0 : tensor<8xf32> "
                 "loc(\"ag\")\n  }\n}\n");

    /* several modules in one file */
    ERR("HloModule a\nENTRY main {\n  ROOT p = f32[4] parameter(0)\n}\n\nHloModule b\nENTRY main {\n"
        "  ROOT p = f32[4] parameter(0)\n}\n",
        "bad.hlo:6:1: error: a second HloModule: the file holds several modules and autopart reads one; split it "
        "into one file per module");
    /* XLA's protobuf text, whichever format is asked for */
    ERR("# a dump\nname: \"jit_f\"\nentry_computation_name: \"main\"\ncomputations {\n  name: \"main\"\n}\n",
        "bad.hlo:2:1: error: this is XLA's protobuf text format (an HloModuleProto, `name: ...`), not HLO or "
        "StableHLO text; print the module as HLO text (HloModule::ToString(), or in JAX "
        "jax.jit(f).lower(...).compile().as_text()) or as StableHLO (.lower(...).as_text())");
    ERR("hlo_module {\n  name: \"m\"\n}\n",
        "bad.hlo:1:1: error: this is XLA's protobuf text format (an HloModuleProto, `hlo_module { ...`), not HLO or "
        "StableHLO text; print the module as HLO text (HloModule::ToString(), or in JAX "
        "jax.jit(f).lower(...).compile().as_text()) or as StableHLO (.lower(...).as_text())");
    {
        static const char bytecode[] = "ML\xefR\x00\x05vhlo";
        expect_error(bytecode, sizeof bytecode - 1,
                     "bad.hlo:1:1: error: this is MLIR bytecode (a serialized StableHLO module, as jax.export writes "
                     "it); autopart reads MLIR text: convert it with `stablehlo-translate --deserialize bad.hlo`");
    }
}
END_TEST

static Suite *hlo_suite(void)
{
    Suite *s = suite_create("hlo");
    TCase *tc = tcase_create("corpus");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, corpus_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("mapping");
    tcase_add_test(tc, detect_format);
    tcase_add_test(tc, many_parameters);
    tcase_add_test(tc, windows_sort_misc);
    tcase_add_test(tc, rare_opcodes);
    tcase_add_test(tc, sharding_to_schedule);
    tcase_add_test(tc, sharding_constraints_to_schedule);
    tcase_add_test(tc, real_world_hlo_forms);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, input_output_alias);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, truncated_prefixes);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, real_file_gaps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tl_run(hlo_suite()); }
