/*
 * output.c - listings for people: a schedule with one line per decision
 * and the shardings with one row per pattern, so that the search of a
 * 32-layer transformer prints 81 lines rather than 1,387.  --verbose (and
 * --json) keep every value.
 *
 * A folded schedule stays a schedule: a run of `tile VALUE DIM AXIS` (or
 * `atomic VALUE AXIS`) lines with one DIM and AXIS becomes one line over a
 * glob of their values only when that glob selects exactly those
 * arguments, in that order (schedule.c applies a glob's values in argument
 * order), so `apply --schedule` gives the same state from either text; a
 * `propagate` after an action joins its line as `ACTION; propagate` (';'
 * separates actions as a newline does).
 * Shardings fold the numbers in names (params['block_{0..31}']['mlp']...)
 * of rows with one type and one partition spec; rows that tile nothing
 * are one paragraph of names per kind. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define FOLD_MIN 3 /* fewer values than this stay one line each */

/* ============================================================ schedules */

/* One line of a schedule: a foldable action (`verb value rest`) or other. */
typedef struct sline {
    const char *text; /* the line, without its newline */
    int len;
    bool action;      /* tile or atomic over one bare value */
    bool propagate;   /* followed by `propagate`: printed `ACTION; propagate` */
    bool skip;        /* a `propagate` printed with the action before it */
    char verb[8];
    const char *value, *rest; /* value, and what follows it, within text */
    int value_len, rest_len;
} sline;

static bool bare_word(const char *s, int n)
{
    if (n == 0 || s[0] == '%' || s[0] == '"')
        return false;
    for (int i = 0; i < n; i++)
        if (strchr(" \t;#\"*?", s[i]))
            return false;
    return true;
}

static void split_line(sline *l)
{
    l->action = false;
    const char *s = l->text, *e = s + l->len;
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    int words = 0;
    const char *w[5];
    int wl[5];
    for (const char *p = s; p < e && words < 5;) {
        const char *q = p;
        while (q < e && *q != ' ' && *q != '\t')
            q++;
        w[words] = p;
        wl[words++] = (int)(q - p);
        while (q < e && (*q == ' ' || *q == '\t'))
            q++;
        p = q;
    }
    bool tile = words == 4 && wl[0] == 4 && !memcmp(w[0], "tile", 4);
    bool atomic = words == 3 && wl[0] == 6 && !memcmp(w[0], "atomic", 6);
    if ((!tile && !atomic) || !bare_word(w[1], wl[1]))
        return;
    l->action = true;
    snprintf(l->verb, sizeof l->verb, "%.*s", wl[0], w[0]);
    l->value = w[1];
    l->value_len = wl[1];
    l->rest = w[2];
    l->rest_len = (int)(e - w[2]);
    while (l->rest_len > 0 && (l->rest[l->rest_len - 1] == ' ' || l->rest[l->rest_len - 1] == '\t'))
        l->rest_len--;
}

/* Whether l is `propagate` alone (';' separates actions in a schedule, so
 * `ACTION; propagate` on one line is the same schedule). */
static bool is_propagate(const sline *l)
{
    const char *s = l->text, *e = s + l->len;
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    return e - s == 9 && !memcmp(s, "propagate", 9);
}

/* Whether lines a and b are the same action on (maybe) other values. */
static bool same_action(const sline *a, const sline *b)
{
    return a->action && b->action && !strcmp(a->verb, b->verb) && a->rest_len == b->rest_len &&
           !memcmp(a->rest, b->rest, (size_t)a->rest_len);
}

/* A name split into runs of digits and runs of other characters. */
#define MAX_RUNS 32
typedef struct runs {
    int n;
    int at[MAX_RUNS], len[MAX_RUNS];
    bool digits[MAX_RUNS];
} runs;

static bool split_runs(const char *s, int len, runs *r)
{
    r->n = 0;
    for (int i = 0; i < len;) {
        bool d = isdigit((unsigned char)s[i]) != 0;
        int j = i;
        while (j < len && (isdigit((unsigned char)s[j]) != 0) == d)
            j++;
        if (r->n == MAX_RUNS)
            return false;
        r->at[r->n] = i;
        r->len[r->n] = j - i;
        r->digits[r->n++] = d;
        i = j;
    }
    return true;
}

/* The glob over values v[0..n) (each value_len long in its line): runs
 * that differ become '*' (keeping what other runs share at their ends).
 * Empty when the names do not line up. */
static void make_glob(const sline *v, int n, ap_buf *g)
{
    runs r0, ri;
    if (!split_runs(v[0].value, v[0].value_len, &r0))
        return;
    for (int i = 1; i < n; i++) {
        if (!split_runs(v[i].value, v[i].value_len, &ri) || ri.n != r0.n)
            return;
        for (int k = 0; k < r0.n; k++)
            if (ri.digits[k] != r0.digits[k])
                return;
    }
    bool star = false;
    for (int k = 0; k < r0.n; k++) {
        const char *s0 = v[0].value + r0.at[k];
        int l0 = r0.len[k], pre = l0, suf = l0, minl = l0;
        bool same = true;
        for (int i = 1; i < n; i++) {
            split_runs(v[i].value, v[i].value_len, &ri);
            const char *s = v[i].value + ri.at[k];
            int l = ri.len[k];
            same &= l == l0 && !memcmp(s, s0, (size_t)l);
            if (l < minl)
                minl = l;
            int p = 0;
            while (p < pre && p < l && s[p] == s0[p])
                p++;
            pre = p;
            int q = 0;
            while (q < suf && q < l && s[l - 1 - q] == s0[l0 - 1 - q])
                q++;
            suf = q;
        }
        if (same) {
            ap_buf_printf(g, "%.*s", l0, s0);
            star = false;
            continue;
        }
        if (r0.digits[k]) {
            pre = suf = 0;
        } else if (pre + suf > minl) {
            suf = minl - pre;
        }
        ap_buf_printf(g, "%.*s", pre, s0);
        if (!star || pre)
            ap_buf_puts(g, "*");
        ap_buf_printf(g, "%.*s", suf, s0 + l0 - suf);
        star = suf == 0;
    }
}

/* Whether glob g selects exactly the values v[0..n), in the order of the
 * arguments' names. */
static bool glob_exact(const char *g, const sline *v, int n, const cli_sharding *args, size_t n_args)
{
    int k = 0;
    for (size_t a = 0; a < n_args; a++) {
        if (!args[a].name || !ir_schedule_glob_match(g, strlen(g), args[a].name))
            continue;
        if (k == n || strlen(args[a].name) != (size_t)v[k].value_len ||
            memcmp(args[a].name, v[k].value, (size_t)v[k].value_len))
            return false;
        k++;
    }
    return k == n;
}

/* Where a folded schedule goes, and the arguments its globs select. */
typedef struct fold_out {
    ap_buf *b;
    const cli_sharding *args;
    size_t n_args;
} fold_out;

static void put_line(fold_out *o, const sline *l)
{
    ap_buf_put(o->b, l->text, (size_t)l->len);
    ap_buf_puts(o->b, l->propagate ? "; propagate\n" : "\n");
}

/* Prints v[0..n) (same_action all) folded when a glob selects them
 * exactly; true when it did. */
static bool put_folded(fold_out *o, const sline *v, int n)
{
    if (n < FOLD_MIN)
        return false;
    ap_buf g;
    ap_buf_init(&g);
    make_glob(v, n, &g);
    bool ok = g.len && !g.oom && glob_exact(g.data, v, n, o->args, o->n_args);
    if (ok) {
        size_t at = o->b->len;
        ap_buf_printf(o->b, "%s %s %.*s%s", v[0].verb, g.data, v[0].rest_len, v[0].rest,
                      v[n - 1].propagate ? "; propagate" : "");
        for (size_t w = o->b->len - at; w < 64; w++)
            ap_buf_putc(o->b, ' ');
        ap_buf_printf(o->b, " # %d values\n", n);
    }
    ap_buf_free(&g);
    return ok;
}

/* The skeleton of a value: its name with digit runs as '#'. */
static bool same_skeleton(const sline *a, const sline *b)
{
    int i = 0, j = 0;
    while (i < a->value_len && j < b->value_len) {
        bool da = isdigit((unsigned char)a->value[i]), db = isdigit((unsigned char)b->value[j]);
        if (da != db)
            return false;
        if (da) {
            while (i < a->value_len && isdigit((unsigned char)a->value[i]))
                i++;
            while (j < b->value_len && isdigit((unsigned char)b->value[j]))
                j++;
        } else if (a->value[i++] != b->value[j++]) {
            return false;
        }
    }
    return i == a->value_len && j == b->value_len;
}

/* A run of one action over several values: one line if a glob fits them
 * all, else one per stretch of values named alike (the parameters, then
 * each optimizer moment), else one per value. */
static void put_run(fold_out *o, const sline *v, int n)
{
    if (put_folded(o, v, n))
        return;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && same_skeleton(&v[i], &v[j]))
            j++;
        if (!put_folded(o, v + i, j - i))
            for (int k = i; k < j; k++)
                put_line(o, &v[k]);
        i = j;
    }
}

/* Folds the lines of text into o; false when out of memory. */
static bool fold(fold_out *o, const char *text)
{
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == '\n';
    sline *v = ap_calloc(cap, sizeof *v);
    if (!v)
        return false;
    int n = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p) : (int)strlen(p);
        v[n].text = p;
        v[n].len = len;
        split_line(&v[n]);
        if (n && v[n - 1].action && is_propagate(&v[n]))
            v[n - 1].propagate = v[n].skip = true;
        n++;
        p += len + (e != NULL);
    }
    for (int i = 0; i < n;) {
        if (v[i].skip) {
            i++;
            continue;
        }
        int j = i + 1;
        while (v[i].action && j < n && same_action(&v[i], &v[j]))
            j++;
        if (j - i > 1)
            put_run(o, v + i, j - i);
        else
            put_line(o, &v[i]);
        i = j;
    }
    ap_free(v);
    return !o->b->oom;
}

void cli_print_schedule(FILE *f, const char *text, const cli_sharding *args, size_t n_args, bool verbose)
{
    if (!text)
        return;
    ap_buf b;
    ap_buf_init(&b);
    fold_out o = {&b, args, n_args};
    if (verbose || !fold(&o, text)) /* no memory to fold: as it is */
        fputs(text, f);
    else if (b.len)
        fwrite(b.data, 1, b.len, f);
    ap_buf_free(&b);
}

/* ============================================================ shardings */

#define MAX_NUMS 8

/* A row and the numbers in its name. */
typedef struct srow {
    const cli_sharding *s;
    int n_nums;            /* -1: the name is not folded (too many numbers) */
    long nums[MAX_NUMS];
    int group;             /* the printed row it belongs to */
} srow;

/* The numbers of a name (runs of digits without a leading zero); -1 when
 * there are more than MAX_NUMS. */
static int name_numbers(const char *s, long *nums)
{
    int n = 0;
    for (const char *p = s; *p;) {
        if (isdigit((unsigned char)*p)) {
            const char *q = p;
            while (isdigit((unsigned char)*q))
                q++;
            if (!(*p == '0' && q - p > 1) && q - p < 10) {
                if (n == MAX_NUMS)
                    return -1;
                nums[n++] = strtol(p, NULL, 10);
            }
            p = q;
        } else {
            p++;
        }
    }
    return n;
}

static bool str_eq(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

/* Whether a and b have one skeleton (names equal but for their numbers),
 * type, spec and kind. */
static bool same_pattern(const srow *a, const srow *b)
{
    if (a->n_nums < 0 || a->n_nums != b->n_nums || !str_eq(a->s->type, b->s->type) ||
        !str_eq(a->s->spec, b->s->spec) || !str_eq(a->s->kind, b->s->kind))
        return false;
    const char *p = a->s->name, *q = b->s->name;
    while (*p && *q) {
        if (isdigit((unsigned char)*p) && isdigit((unsigned char)*q)) {
            while (isdigit((unsigned char)*p))
                p++;
            while (isdigit((unsigned char)*q))
                q++;
        } else if (*p++ != *q++) {
            return false;
        }
    }
    return !*p && !*q;
}

/* The one place where the numbers of b differ from a's, for rows of one
 * pattern; -1 when none or several. */
static int differs_at(const srow *a, const srow *b)
{
    if (!same_pattern(a, b))
        return -1;
    int at = -1;
    for (int k = 0; k < a->n_nums; k++)
        if (a->nums[k] != b->nums[k]) {
            if (at >= 0)
                return -1;
            at = k;
        }
    return at;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* {0..31}, {0,2,4}, {0..3,8..11}: sorted distinct numbers v[0..n). */
static void put_set(ap_buf *b, long *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_long);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!m || v[m - 1] != v[i])
            v[m++] = v[i];
    if (m == 1) {
        ap_buf_printf(b, "%ld", v[0]);
        return;
    }
    ap_buf_puts(b, "{");
    for (int i = 0; i < m;) {
        int j = i;
        while (j + 1 < m && v[j + 1] == v[j] + 1)
            j++;
        ap_buf_printf(b, "%s%ld", i ? "," : "", v[i]);
        if (j > i)
            ap_buf_printf(b, j == i + 1 ? ",%ld" : "..%ld", v[j]);
        i = j + 1;
    }
    ap_buf_puts(b, "}");
}

/* The name of a group of rows: the first row's name with each number that
 * varies written as the set of its values. */
static void group_name(const srow *rows, size_t n, int g, int vary, ap_buf *b)
{
    const srow *first = NULL;
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].group == g) {
            if (!first)
                first = &rows[i];
            count++;
        }
    long *vals = ap_calloc(count, sizeof *vals);
    if (!vals) {
        b->oom = true; /* the caller lists the rows one by one */
        return;
    }
    const char *p = first->s->name;
    int k = 0;
    while (*p) {
        if (!isdigit((unsigned char)*p)) {
            ap_buf_putc(b, *p++);
            continue;
        }
        const char *q = p;
        while (isdigit((unsigned char)*q))
            q++;
        bool number = !(*p == '0' && q - p > 1) && q - p < 10;
        if (number && k == vary) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (rows[i].group == g)
                    vals[m++] = rows[i].nums[k];
            put_set(b, vals, (int)m);
        } else {
            ap_buf_printf(b, "%.*s", (int)(q - p), p);
        }
        k += number;
        p = q;
    }
    ap_free(vals);
}

/* A printed row: rows of group `first`'s pattern; merged into another
 * group's row when only the head of the name differs. */
typedef struct sgroup {
    size_t first, count;
    char *name; /* heap: the name with the varying number as a set */
    int head;   /* bytes of name before its first '[' (0: none) */
    int into;   /* the group this one prints with, or -1 */
} sgroup;

static void put_sharding(FILE *f, const char *indent, const cli_sharding *s)
{
    if (s->kind)
        fprintf(f, "%s%-9s ", indent, s->kind);
    else
        fputs(indent, f);
    fprintf(f, "%-48s %-32s %s\n", s->name, s->type, s->spec);
}

/* One printed row: the name of `count` values of s's kind, type and spec. */
static void put_row(FILE *f, const char *indent, const cli_sharding *s, int width, const char *name, size_t count)
{
    char times[24] = "";
    if (count > 1)
        snprintf(times, sizeof times, "x%zu", count);
    if (s->kind)
        fprintf(f, "%s%-9s ", indent, s->kind);
    else
        fputs(indent, f);
    fprintf(f, "%-*s %-5s %-28s %s\n", width, name, times, s->type, s->spec);
}

/* Whether a partition spec tiles nothing: P(), P(None,), P(None, None). */
static bool replicated(const char *spec)
{
    return spec && !strncmp(spec, "P(", 2) && !strchr(spec, '\'');
}

/* Whether name starts with head[0..len) followed by '['. */
static bool has_head(const char *name, const char *head, size_t len)
{
    return !strncmp(name, head, len) && name[len] == '[';
}

/* A place to wrap a paragraph: after a separator the paragraph put there
 * (never inside a name, whose sets have commas too). */
static void mark_break(ap_buf *breaks, size_t at)
{
    ap_buf_put(breaks, &at, sizeof at);
}

#define WRAP_AT 120 /* a replicated paragraph wraps before this column */

/* The rows that tile nothing, as one paragraph after their kind's table:
 * who is replicated matters, a row each with its type does not (--verbose
 * lists them).  rep[0..n): their places in names[], counts[] and firsts[]
 * (rows).  Runs of names with one head print it once, the rest as a set
 * ({params,opt_state.mu}['block_{0..31}']{['ln1']['scale'],['mlp']['w_up']}),
 * the runs and heads chosen to save the most characters. */
static void put_replicated(FILE *f, const char *indent, const cli_sharding *rows, const size_t *firsts,
                           char *const *names, const size_t *counts, const int *rep, int n, int width)
{
    if (!n)
        return;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += counts[rep[i]];
    long *val = ap_calloc((size_t)n + 1, sizeof *val); /* the most names i.. can save */
    size_t *head = ap_calloc((size_t)n + 1, sizeof *head);
    int *last = ap_calloc((size_t)n + 1, sizeof *last); /* the run from i that saves it (i: none) */
    ap_buf b, breaks;
    ap_buf_init(&b);
    ap_buf_init(&breaks);
    bool ok = val && head && last;
    for (int i = n - 1; ok && i >= 0; i--) {
        const char *name = names[rep[i]];
        val[i] = val[i + 1];
        last[i] = i;
        for (size_t c = 1; name[c]; c++) {
            if (name[c] != '[')
                continue;
            int k = i;
            while (k + 1 < n && has_head(names[rep[k + 1]], name, c))
                k++;
            long v = (long)(k - i) * (long)c - 2 + val[k + 1];
            if (k > i && v > val[i]) {
                val[i] = v;
                head[i] = c;
                last[i] = k;
            }
        }
    }
    for (int i = 0; ok && i < n; i = last[i] + 1) {
        if (b.len) {
            ap_buf_puts(&b, ", ");
            mark_break(&breaks, b.len);
        }
        if (last[i] == i) {
            ap_buf_puts(&b, names[rep[i]]);
            continue;
        }
        ap_buf_printf(&b, "%.*s{", (int)head[i], names[rep[i]]);
        for (int k = i; k <= last[i]; k++) {
            if (k > i) {
                ap_buf_putc(&b, ',');
                mark_break(&breaks, b.len);
            }
            ap_buf_puts(&b, names[rep[k]] + head[i]);
        }
        ap_buf_putc(&b, '}');
    }
    ap_free(val);
    ap_free(head);
    ap_free(last);
    if (!ok || b.oom || breaks.oom) { /* no memory to fold: a row each */
        for (int i = 0; i < n; i++)
            put_row(f, indent, &rows[firsts[rep[i]]], width, names[rep[i]], counts[rep[i]]);
        goto done;
    }
    const char *kind = rows[firsts[rep[0]]].kind;
    int start = kind ? fprintf(f, "%s%-9s replicated x%zu: ", indent, kind, total)
                     : fprintf(f, "%sreplicated x%zu: ", indent, total);
    /* wrapped at the last break before WRAP_AT (or the first after it) */
    const size_t *at = (const size_t *)(void *)breaks.data, n_at = breaks.len / sizeof *at;
    size_t from = 0, k = 0;
    int room = WRAP_AT > start ? WRAP_AT - start : 1;
    while (b.len - from > (size_t)room && k < n_at) {
        size_t cut = 0;
        while (k < n_at && (!cut || at[k] - from <= (size_t)room))
            cut = at[k++];
        size_t end = cut;
        while (end > from && b.data[end - 1] == ' ')
            end--;
        fprintf(f, "%.*s\n%*s", (int)(end - from), b.data + from, start, "");
        from = cut;
    }
    fprintf(f, "%s\n", b.data + from);
done:
    ap_buf_free(&b);
    ap_buf_free(&breaks);
}

void cli_print_shardings(FILE *f, const cli_sharding *rows, size_t n, const char *indent, bool verbose)
{
    srow *r = verbose ? NULL : ap_calloc(n ? n : 1, sizeof *r);
    int *vary = r ? ap_calloc(n ? n : 1, sizeof *vary) : NULL;
    if (!vary) { /* --verbose, or no memory to fold */
        for (size_t i = 0; i < n; i++)
            put_sharding(f, indent, &rows[i]);
        ap_free(r);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        r[i].s = &rows[i];
        r[i].n_nums = name_numbers(rows[i].name, r[i].nums);
        r[i].group = -1;
    }
    /* Groups: rows of one pattern whose numbers differ from the first
     * row's in one place only, the same for all: the place that gathers
     * the most rows (the layer, rather than ln1/ln2 within one layer). */
    int groups = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].group >= 0)
            continue;
        int g = groups++, best = 0;
        r[i].group = g;
        vary[g] = -1;
        for (int k = 0; k < r[i].n_nums; k++) {
            int count = 0;
            for (size_t j = i + 1; j < n; j++)
                count += r[j].group < 0 && differs_at(&r[i], &r[j]) == k;
            if (count > best) {
                best = count;
                vary[g] = k;
            }
        }
        for (size_t j = i + 1; j < n && vary[g] >= 0; j++)
            if (r[j].group < 0 && differs_at(&r[i], &r[j]) == vary[g])
                r[j].group = g;
    }
    /* Then groups alike but for the head of their names (params,
     * opt_state.mu, opt_state.nu: a parameter and its optimizer moments)
     * print as one row. */
    sgroup *gs = ap_calloc((size_t)groups + 1, sizeof *gs);
    bool ok = gs != NULL;
    for (int g = 0; g < groups && ok; g++) {
        gs[g].into = -1;
        for (size_t i = 0; i < n; i++)
            if (r[i].group == g && !gs[g].count++)
                gs[g].first = i;
        ap_buf b;
        ap_buf_init(&b);
        group_name(r, n, g, vary[g], &b);
        ok = !b.oom && b.len;
        gs[g].name = ap_buf_take(&b, NULL);
        const char *br = gs[g].name ? strchr(gs[g].name, '[') : NULL;
        gs[g].head = br ? (int)(br - gs[g].name) : 0;
    }
    for (int g = 0; g < groups && ok; g++) {
        if (gs[g].into >= 0 || !gs[g].head)
            continue;
        const cli_sharding *a = &rows[gs[g].first];
        for (int h = g + 1; h < groups; h++) {
            const cli_sharding *b = &rows[gs[h].first];
            if (gs[h].into >= 0 || !gs[h].head || strcmp(gs[g].name + gs[g].head, gs[h].name + gs[h].head) ||
                !str_eq(a->type, b->type) || !str_eq(a->spec, b->spec) || !str_eq(a->kind, b->kind))
                continue;
            bool dup = false; /* the same head twice: not a set of heads */
            for (int k = g; k <= h && !dup; k++)
                dup = (k == g || gs[k].into == g) && gs[k].head == gs[h].head &&
                      !memcmp(gs[k].name, gs[h].name, (size_t)gs[h].head);
            if (!dup)
                gs[h].into = g;
        }
    }
    /* The rows' names, then the rows with the name column as wide as the
     * widest (up to a point). */
    char **names = ap_calloc((size_t)groups + 1, sizeof *names);
    size_t *firsts = ap_calloc((size_t)groups + 1, sizeof *firsts);
    size_t *counts = ap_calloc((size_t)groups + 1, sizeof *counts);
    int *rep = ap_calloc((size_t)groups + 1, sizeof *rep);
    ok = ok && names && firsts && counts && rep;
    int out = 0, width = 0;
    for (int g = 0; g < groups && ok; g++) {
        if (gs[g].into >= 0)
            continue;
        ap_buf name;
        ap_buf_init(&name);
        int heads = 0;
        size_t count = 0;
        for (int h = g; h < groups; h++)
            if (h == g || gs[h].into == g) {
                ap_buf_printf(&name, "%s%.*s", heads++ ? "," : "", gs[h].head, gs[h].name);
                count += gs[h].count;
            }
        if (heads > 1) {
            char *list = ap_buf_take(&name, NULL);
            ap_buf_printf(&name, "{%s}%s", list ? list : "", gs[g].name + gs[g].head);
            ap_free(list);
        } else {
            ap_buf_reset(&name);
            ap_buf_puts(&name, gs[g].name);
        }
        ok = !name.oom;
        firsts[out] = gs[g].first;
        counts[out] = count;
        names[out++] = ap_buf_take(&name, NULL);
        int w = replicated(rows[gs[g].first].spec) ? 0 : (int)strlen(names[out - 1] ? names[out - 1] : "");
        width = w > width ? w : width;
    }
    if (ok) {
        width = width < 40 ? 40 : width > 80 ? 80 : width;
        for (int a = 0, b; a < out; a = b) { /* each kind's rows, then its replicated ones */
            const char *kind = rows[firsts[a]].kind;
            int n_rep = 0;
            for (b = a; b < out && str_eq(rows[firsts[b]].kind, kind); b++)
                if (replicated(rows[firsts[b]].spec))
                    rep[n_rep++] = b;
                else
                    put_row(f, indent, &rows[firsts[b]], width, names[b], counts[b]);
            put_replicated(f, indent, rows, firsts, names, counts, rep, n_rep, width);
        }
    }
    if (!ok) { /* out of memory: every row */
        for (size_t i = 0; i < n; i++)
            put_sharding(f, indent, &rows[i]);
    }
    for (int i = 0; names && i < out; i++)
        ap_free(names[i]);
    ap_free(names);
    ap_free(firsts);
    ap_free(counts);
    ap_free(rep);
    for (int g = 0; gs && g < groups; g++)
        ap_free(gs[g].name);
    ap_free(gs);
    ap_free(vary);
    ap_free(r);
}

/* ============================================================== search */

void cli_print_search(FILE *f, const cli_search_text *t, bool verbose)
{
    fprintf(f, "decisions: %lld before grouping, %lld units, %lld after ties and pruning\n", t->decisions_before,
            t->units, t->decisions_after);
    if (t->have_stats)
        fprintf(f, "search: %lld episodes in %.2f s (%.0f/s), best at episode %lld, %lld states; stopped by %s\n",
                t->episodes, t->wall_s, t->episodes_per_s, t->best_episode, t->tree_nodes,
                t->stopped_by ? t->stopped_by : "?");
    fprintf(f, "step time: %.6g s (start %.6g s, %.2fx)\n", t->runtime_s, t->start_runtime_s,
            t->runtime_s > 0 ? t->start_runtime_s / t->runtime_s : 0);
    if (t->mesh)
        fprintf(f, "mesh: %s (the best of %lld meshes tried: see why this answer)\n", t->mesh, t->n_meshes);
    if (t->none_fits)
        fprintf(f, "NOTHING FOUND FITS the memory limit: this is the lowest-memory schedule found%s\n",
                t->mesh ? " on the mesh chosen (each mesh's lowest: see why this answer)" : "");
    /* The schedule, the search's actions marked in it by a comment (the
     * text still applies as it is). */
    const char *sched = t->schedule ? t->schedule : "", *acts = t->actions ? t->actions : "";
    size_t sl = strlen(sched), al = strlen(acts);
    fprintf(f, "\nschedule (for autopart apply --schedule):\n");
    if (al <= sl && !strcmp(sched + sl - al, acts)) {
        char *manual = ap_strdup(sched);
        if (manual) {
            manual[sl - al] = '\0';
            cli_print_schedule(f, manual, t->args, t->n_args, verbose);
            ap_free(manual);
        } else {
            fwrite(sched, 1, sl - al, f);
        }
        if (al) {
            fprintf(f, "# found by the search:\n");
            cli_print_schedule(f, acts, t->args, t->n_args, verbose);
        } else {
            fprintf(f, "# the search found nothing better than the start\n");
        }
    } else {
        cli_print_schedule(f, sched, t->args, t->n_args, verbose);
        fprintf(f, "\nactions found:\n");
        cli_print_schedule(f, acts, t->args, t->n_args, verbose);
    }
    fprintf(f, "\nshardings:\n");
    cli_print_shardings(f, t->args, t->n_args, "  ", verbose);
    fprintf(f, "\ncost estimate:\n%s", t->cost_text ? t->cost_text : "");
    fprintf(f, "\nwhy this answer:\n%s", t->explanation ? t->explanation : "");
}
