/*
 * schedule.c - schedules as text: parsing and applying `tile`, `atomic`,
 * `propagate` and the paper's `manual` tactic, selecting arguments by
 * %argN, JAX location names (params['block_3']['w_up']) or globs over
 * them; and the importer that turns the sharding annotations a module
 * already carries (sdy.sharding, mhlo.sharding, sharding constraints) into
 * a schedule.
 */
#include "partir_int.h"
#include "xla/op_sharding.pb-c.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct sched {
    ir_partition *p;
    const char *text, *end, *cur;
    int line;
    const char *line_start;
    ap_error *err;
    ir_tactic_fn fn; /* called after each tactic (a propagate) */
    void *fn_ctx;
    const char *tactic_from; /* where the current tactic's text starts */
} sched;

/* A tactic ended (with a propagate): tell the caller. */
static int tactic_done(sched *s)
{
    if (!s->fn)
        return 0;
    const char *a = s->tactic_from, *b = s->cur;
    while (a < b && (*a == ' ' || *a == '\n' || *a == ';' || *a == '\t' || *a == '\r'))
        a++;
    int rc = s->fn(s->fn_ctx, s->p, a, (size_t)(b - a), s->err);
    s->tactic_from = s->cur;
    return rc;
}

static int serr(sched *s, const char *at, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int serr(sched *s, const char *at, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ap_error_at(s->err, code, "schedule", s->line, (int)(at - s->line_start) + 1, "%s", msg);
}

/* A word: a "quoted string" or a run of non-space characters (no ';'). */
static bool next_word(sched *s, const char **w, size_t *len, bool *quoted)
{
    while (s->cur < s->end && (*s->cur == ' ' || *s->cur == '\t' || *s->cur == '\r'))
        s->cur++;
    *quoted = false;
    if (s->cur >= s->end || *s->cur == '\n' || *s->cur == ';' || *s->cur == '#')
        return false;
    if (*s->cur == '"') {
        const char *q = memchr(s->cur + 1, '"', (size_t)(s->end - s->cur - 1));
        if (!q)
            return false;
        *w = s->cur + 1;
        *len = (size_t)(q - s->cur - 1);
        *quoted = true;
        s->cur = q + 1;
        return true;
    }
    *w = s->cur;
    while (s->cur < s->end && !isspace((unsigned char)*s->cur) && *s->cur != ';')
        s->cur++;
    *len = (size_t)(s->cur - *w);
    return true;
}

static bool word_is(const char *w, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(w, lit, len) == 0;
}

/* '*' any run, '?' one character; everything else literal (JAX paths are
 * full of brackets, so no character classes). */
bool ir_schedule_glob_match(const char *pat, size_t pl, const char *s)
{
    size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0, sl = strlen(s);
    while (si < sl) {
        if (pi < pl && (pat[pi] == '?' || pat[pi] == s[si])) {
            pi++;
            si++;
        } else if (pi < pl && pat[pi] == '*') {
            star_p = pi++;
            star_s = si;
        } else if (star_p != (size_t)-1) {
            pi = star_p + 1;
            si = ++star_s;
        } else {
            return false;
        }
    }
    while (pi < pl && pat[pi] == '*')
        pi++;
    return pi == pl;
}

/* The values a reference names: %argN, %N, %N#k, a location name or glob.
 * Fills vals (up to cap) and returns the count, or a negative error. */
static int resolve(sched *s, const char *w, size_t len, bool quoted, const ir_value **vals, int cap)
{
    const ir_pctx *c = s->p->ctx;
    ir_block *body = ir_func_entry(c->func);
    if (!quoted && len > 4 && memcmp(w, "%arg", 4) == 0) {
        char *end;
        unsigned long n = strtoul(w + 4, &end, 10);
        if (end != w + len || n >= c->n_args)
            return serr(s, w, AP_EINVALID, "no argument '%.*s' (the function has %u)", (int)len, w, c->n_args);
        vals[0] = &body->args[n];
        return 1;
    }
    if (!quoted && len > 1 && w[0] == '%' && isdigit((unsigned char)w[1])) {
        char *end;
        unsigned long n = strtoul(w + 1, &end, 10), k = 0;
        bool bad = n > UINT32_MAX; /* (uint32_t) would name another value: %4294967296 was %0 */
        if (end < w + len && *end == '#') {
            bad |= !isdigit((unsigned char)end[1]); /* `%3#` or `%3#-1` */
            k = strtoul(end + 1, &end, 10);
            bad |= k > UINT32_MAX;
        }
        if (bad || end != w + len)
            return serr(s, w, AP_EINVALID, "bad value reference '%.*s'", (int)len, w);
        const ir_value *v = ir__printed_value(c->func, (uint32_t)n, (uint32_t)k);
        if (!v || ir__value_id(c, v) == VAL_NONE)
            return serr(s, w, AP_EINVALID,
                        "no value '%.*s' that the partitioning of @%s sees (as `autopart parse --inline` numbers "
                        "it; values inside regions that run whole, such as a reduction's body, are not)",
                        (int)len, w, ir_func_name(c->func));
        vals[0] = v;
        return 1;
    }
    bool glob = !quoted && (memchr(w, '*', len) || memchr(w, '?', len));
    int n = 0;
    for (uint32_t a = 0; a < c->n_args; a++) {
        const char *name = ir_func_arg_name(c->func, a);
        if (!name)
            continue;
        bool hit = glob ? ir_schedule_glob_match(w, len, name) : (strlen(name) == len && memcmp(name, w, len) == 0);
        if (hit && n < cap)
            vals[n++] = &body->args[a];
    }
    if (n == 0) { /* an op named by its location (the paper's `tag`) */
        for (uint32_t i = 0; i < c->n_ops && n < cap; i++) {
            const char *name = c->ops[i]->loc ? ir_loc_name(c->ops[i]->loc) : NULL;
            if (!name || !c->ops[i]->n_results)
                continue;
            bool hit = glob ? ir_schedule_glob_match(w, len, name) : (strlen(name) == len && memcmp(name, w, len) == 0);
            if (hit)
                vals[n++] = &c->ops[i]->results[0];
        }
    }
    if (n == 0)
        return serr(s, w, AP_EINVALID, "no argument %s '%.*s'", glob ? "matches" : "is named", (int)len, w);
    return n;
}

static int parse_axis(sched *s, const char *w, size_t len)
{
    int a = ir_mesh_axis(&s->p->ctx->mesh, w, len);
    if (a < 0) {
        char axes[256] = "";
        for (int i = 0; i < s->p->ctx->mesh.n_axes; i++) {
            strncat(axes, i ? ", " : "", sizeof axes - strlen(axes) - 1);
            strncat(axes, s->p->ctx->mesh.names[i], sizeof axes - strlen(axes) - 1);
        }
        return serr(s, w, AP_EINVALID, "unknown mesh axis '%.*s' (the mesh has %s)", (int)len, w, axes);
    }
    return a;
}

#define MAX_MATCH 4096

/* tile REF DIM AXIS */
static int tile_refs(sched *s, const ir_value **vals, int n, const char *dim_w, size_t dim_len, int axis)
{
    bool first_div = word_is(dim_w, dim_len, "first_divisible");
    long dim = -1;
    if (!first_div) {
        char *end;
        dim = strtol(dim_w, &end, 10);
        if (end != dim_w + dim_len || dim < 0)
            return serr(s, dim_w, AP_EINVALID, "expected a dim number or first_divisible, found '%.*s'", (int)dim_len, dim_w);
        /* no tensor has that many dims; (int) would make it another number */
        if (dim > IR_MAX_RANK)
            return serr(s, dim_w, AP_EINVALID, "dim %.*s is out of range (a tensor has at most %d dims)", (int)dim_len,
                        dim_w, IR_MAX_RANK);
    }
    for (int i = 0; i < n; i++) {
        int d = (int)dim;
        if (first_div) {
            d = ir_first_divisible_dim(s->p, vals[i], axis);
            if (d < 0)
                continue; /* nothing to tile in this one: the tactic skips it */
        }
        ap_error e;
        if (ir_tile(s->p, vals[i], d, axis, &e) < 0)
            return serr(s, dim_w, e.code, "%s", e.msg);
    }
    return 0;
}

static int apply_action(sched *s)
{
    const char *w, *at;
    size_t len;
    bool q;
    if (!next_word(s, &w, &len, &q))
        return 0; /* empty */
    at = w;
    const ir_value *vals[MAX_MATCH];
    if (word_is(w, len, "propagate")) {
        ap_error e;
        int rc = ir_propagate(s->p, &e);
        return rc < 0 ? serr(s, at, rc, "%s", e.msg) : tactic_done(s);
    }
    if (word_is(w, len, "tile")) {
        const char *rw, *dw, *aw;
        size_t rl, dl, al;
        bool rq, dq, aq;
        if (!next_word(s, &rw, &rl, &rq) || !next_word(s, &dw, &dl, &dq) || !next_word(s, &aw, &al, &aq))
            return serr(s, at, AP_ESYNTAX, "expected 'tile VALUE DIM AXIS'");
        int axis = parse_axis(s, aw, al);
        if (axis < 0)
            return axis;
        int n = resolve(s, rw, rl, rq, vals, MAX_MATCH);
        return n < 0 ? n : tile_refs(s, vals, n, dw, dl, axis);
    }
    if (word_is(w, len, "atomic")) {
        const char *rw, *aw;
        size_t rl, al;
        bool rq, aq;
        if (!next_word(s, &rw, &rl, &rq) || !next_word(s, &aw, &al, &aq))
            return serr(s, at, AP_ESYNTAX, "expected 'atomic VALUE AXIS'");
        int axis = parse_axis(s, aw, al);
        if (axis < 0)
            return axis;
        int n = resolve(s, rw, rl, rq, vals, MAX_MATCH);
        if (n < 0)
            return n;
        for (int i = 0; i < n; i++) {
            ap_error e;
            if (ir_atomic(s->p, vals[i], axis, &e) < 0)
                return serr(s, rw, e.code, "%s", e.msg);
        }
        return 0;
    }
    if (word_is(w, len, "manual")) {
        const char *aw;
        size_t al;
        bool aq;
        if (!next_word(s, &aw, &al, &aq))
            return serr(s, at, AP_ESYNTAX, "expected 'manual AXIS VALUE=DIM ...'");
        int axis = parse_axis(s, aw, al);
        if (axis < 0)
            return axis;
        int count = 0;
        const char *rw;
        size_t rl;
        bool rq;
        while (next_word(s, &rw, &rl, &rq)) {
            /* VALUE=DIM: the last '=' splits (names may contain '=') */
            const char *eq = NULL;
            for (size_t k = rl; k-- > 0;)
                if (rw[k] == '=') {
                    eq = rw + k;
                    break;
                }
            if (rq && s->cur < s->end && *s->cur == '=') { /* "quoted name"=DIM */
                eq = s->cur;
                const char *d = ++s->cur;
                while (s->cur < s->end && !isspace((unsigned char)*s->cur) && *s->cur != ';')
                    s->cur++;
                int n = resolve(s, rw, rl, true, vals, MAX_MATCH);
                if (n < 0)
                    return n;
                int rc = tile_refs(s, vals, n, d, (size_t)(s->cur - d), axis);
                if (rc < 0)
                    return rc;
                count++;
                continue;
            }
            if (!eq)
                return serr(s, rw, AP_ESYNTAX, "expected VALUE=DIM in a manual tactic, found '%.*s'", (int)rl, rw);
            int n = resolve(s, rw, (size_t)(eq - rw), false, vals, MAX_MATCH);
            if (n < 0)
                return n;
            int rc = tile_refs(s, vals, n, eq + 1, (size_t)(rw + rl - eq - 1), axis);
            if (rc < 0)
                return rc;
            count++;
        }
        if (count == 0)
            return serr(s, at, AP_ESYNTAX, "a manual tactic needs at least one VALUE=DIM");
        ap_error e;
        int rc = ir_propagate(s->p, &e);
        return rc < 0 ? serr(s, at, rc, "%s", e.msg) : tactic_done(s);
    }
    return serr(s, at, AP_ESYNTAX, "unknown action '%.*s' (expected tile, atomic, propagate or manual)", (int)len, w);
}

int ir_schedule_apply(ir_partition *p, const char *text, ap_error *err)
{
    return ir_schedule_apply_cb(p, text, NULL, NULL, err);
}

int ir_schedule_apply_cb(ir_partition *p, const char *text, ir_tactic_fn fn, void *fn_ctx, ap_error *err)
{
    sched s = {.p = p, .text = text, .end = text + strlen(text), .cur = text, .line = 1, .line_start = text, .err = err,
               .fn = fn, .fn_ctx = fn_ctx, .tactic_from = text};
    while (s.cur < s.end) {
        int rc = apply_action(&s);
        if (rc < 0)
            return rc;
        const char *w;
        size_t len;
        bool q;
        const char *before = s.cur;
        if (next_word(&s, &w, &len, &q))
            return serr(&s, w, AP_ESYNTAX, "unexpected '%.*s' after the action (one action per line or ';')", (int)len, w);
        (void)before;
        while (s.cur < s.end && *s.cur != '\n' && *s.cur != ';') { /* a comment */
            if (*s.cur == '#') {
                const char *nl = memchr(s.cur, '\n', (size_t)(s.end - s.cur));
                s.cur = nl ? nl : s.end;
                break;
            }
            s.cur++;
        }
        if (s.cur < s.end) {
            if (*s.cur == '\n') {
                s.line++;
                s.line_start = s.cur + 1;
            }
            s.cur++;
        }
    }
    return 0;
}

/* ================================================================ import */

/* Axis assignment of one sdy dim group `{"x", "y"}`; sets *open when the
 * group ends in `?` (an open dim, which may take more axes) and marks the
 * axes it names in used. */
static int sdy_dim(const char **pp, const ir_mesh *mesh, int d, ap_buf *b, const char *ref, bool *open, bool *used,
                   ap_error *err)
{
    const char *p = *pp;
    int n = 0;
    *open = false;
    if (*p != '{')
        return ap_error_set(err, AP_EINVALID, "sdy sharding of %s: expected '{'", ref);
    p++;
    while (*p && *p != '}') {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '?') { /* an open dim: no decision */
            *open = true;
            p++;
            continue;
        }
        if (*p == '}')
            break;
        if (*p != '"')
            return ap_error_set(err, AP_EINVALID, "sdy sharding of %s: expected a quoted axis name", ref);
        const char *name = ++p;
        while (*p && *p != '"')
            p++;
        int a = ir_mesh_axis(mesh, name, (size_t)(p - name));
        if (a < 0)
            return ap_error_set(err, AP_EINVALID, "sdy sharding of %s names axis '%.*s', which the mesh does not have", ref,
                                (int)(p - name), name);
        if (*p)
            p++;
        if (*p == ':')
            return ap_error_set(err, AP_EUNSUPPORTED, "sdy sharding of %s uses a sub-axis", ref);
        ap_buf_printf(b, "tile %s %d %s\n", ref, d, mesh->names[a]);
        used[a] = true;
        n++;
    }
    if (*p == '}')
        p++;
    /* priorities like {"x"}p1 */
    while (*p == 'p' || isdigit((unsigned char)*p))
        p++;
    *pp = p;
    return n;
}

/* The tile actions of an sdy sharding `[{"x"}, {}, {?}]` (p: its text,
 * from before the '[') on a rank-`rank` value named ref.  A closed dim
 * (no `?`) may take no more axes, so a closed `{}` is replicated: a
 * sharding with a closed dim keeps the value replicated (atomic) along
 * every mesh axis it does not name.  Exact when every dim is closed (the
 * value's sharding is then fixed); with open dims too it also keeps those
 * from taking the unnamed axes, as the partition state pins axes per
 * value, not per dim, and a closed dim's stated replication is kept over
 * an open dim's leave to grow.  Returns the number of actions. */
static int sdy_sharding(const char *p, const ir_mesh *mesh, int rank, ap_buf *b, const char *ref, ap_error *err)
{
    /* an inlined mesh `mesh<["x"=2]>` comes before the dims: its '[' is
     * not theirs */
    const char *inl = p ? strstr(p, "mesh<") : NULL;
    if (inl && (!strchr(p, '[') || inl < strchr(p, '['))) {
        int depth = 0;
        for (p = inl + 4; *p; p++) {
            depth += (*p == '<') - (*p == '>');
            if (depth == 0)
                break;
        }
        if (!*p)
            return ap_error_set(err, AP_EINVALID, "sdy sharding of %s: its mesh<...> is not closed", ref);
    }
    p = p ? strchr(p, '[') : NULL;
    if (!p)
        return 0;
    p++;
    /* one {...} per dim of the value, as Shardy's verifier has it (or none,
     * on a maximal mesh): a dim more was ignored, a dim less read what
     * follows */
    int groups = 0, depth = 0;
    for (const char *q = p; *q && !(depth == 0 && *q == ']'); q++) {
        if (*q == '"') { /* an axis name may hold any of {}[] */
            for (q++; *q && *q != '"'; q++)
                q += q[0] == '\\' && q[1];
            if (!*q)
                break;
            continue;
        }
        groups += depth == 0 && *q == '{';
        depth += (*q == '{') - (*q == '}');
    }
    if (groups == 0)
        return 0; /* `[]`: a maximal sharding (mesh<[], device_ids=[k]>) or a
                     scalar's: nothing to tile */
    if (groups != rank)
        return ap_error_set(err, AP_EINVALID, "sdy sharding of %s has %d dim sharding%s for a rank-%d value", ref, groups,
                            groups == 1 ? "" : "s", rank);
    int total = 0;
    bool closed = false, used[IR_MAX_AXES] = {0};
    for (int d = 0; d < rank; d++) {
        while (*p == ' ' || *p == ',')
            p++;
        bool open;
        int n = sdy_dim(&p, mesh, d, b, ref, &open, used, err);
        if (n < 0)
            return n;
        total += n;
        closed |= !open;
    }
    /* `unreduced={"y"}` after the dims: the value is held as partial sums
     * along those axes, a state no action makes; taken as replicated it
     * was dropped without a word (as mhlo's {manual} is refused) */
    const char *un = strstr(p, "unreduced={");
    if (un) {
        const char *q = un + 11;
        while (*q == ' ')
            q++;
        if (*q != '}') {
            const char *end = strchr(q, '}');
            return ap_error_set(err, AP_EUNSUPPORTED,
                                "sdy sharding of %s has unreduced axes (%.*s): the value is held as partial sums, "
                                "which no action makes",
                                ref, end ? (int)(end - q) : 0, q);
        }
    }
    for (int a = 0; closed && a < mesh->n_axes; a++)
        if (!used[a]) {
            ap_buf_printf(b, "atomic %s %s\n", ref, mesh->names[a]);
            total++;
        }
    return total;
}

/* Mesh coordinate along axis a of device x (devices numbered row-major
 * over the mesh axes). */
static int64_t mesh_coord(const ir_mesh *mesh, int64_t x, int a)
{
    for (int i = mesh->n_axes - 1; i > a; i--)
        x /= mesh->sizes[i];
    return x % mesh->sizes[a];
}

/* The integers of `[a,b,..]` at *pp (which is past the '['), at most max. */
static int int_list(const char **pp, char close, int64_t *v, int max)
{
    const char *p = *pp;
    int n = 0;
    while (*p && *p != close) {
        char *e;
        long long x = strtoll(p, &e, 10);
        if (e == p || n == max)
            return -1;
        v[n++] = x;
        p = e;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
    }
    if (*p != close)
        return -1;
    *pp = p + 1;
    return n;
}

/* mhlo.sharding "{devices=[2,1,4]<=[8] last_tile_dim_replicate}": tile
 * dims, and the device holding each tile (row-major over the tiles) as an
 * iota `<=[r0,r1,..]` transposed by an optional `T(perm)` (XLA's
 * IotaTileAssignment: [2,2]<=[2,2]T(1,0) holds tile (i,j) on device 2j+i)
 * or, as HLO text writes small ones, listed ("{devices=[2,1]0,1}").
 * Each tile dim is matched to the mesh axes (major to minor) whose
 * coordinates give its tile index, the mesh numbering devices row-major;
 * the whole assignment is then checked tile by tile, so any device order
 * the mesh cannot express is refused, never guessed. */
static int mhlo_tiled(const char *s, const ir_mesh *mesh, int rank, ap_buf *b, const char *ref, ap_error *err)
{
    const char *p = strstr(s, "devices=[");
    if (strstr(s, "last_tile_dims"))
        return ap_error_set(err, AP_EUNSUPPORTED, "mhlo.sharding of %s: unsupported form %s", ref, s);
    p += 9;
    int64_t tiles[IR_MAX_RANK + 1], rdims[IR_MAX_RANK], perm[IR_MAX_RANK];
    int n = int_list(&p, ']', tiles, IR_MAX_RANK + 1), nr = 0, np = 0;
    if (n < 0)
        return ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s: malformed tile dims in %s", ref, s);
    bool replicate_last = strstr(s, "last_tile_dim_replicate") != NULL;
    int data_dims = replicate_last ? n - 1 : n;
    if (data_dims != rank)
        return ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s has %d tiled dims for a rank-%d value", ref, data_dims, rank);
    int64_t ntiles = 1, ndev = ir_mesh_devices(mesh);
    for (int d = 0; d < n; d++) {
        if (tiles[d] < 1 || tiles[d] > ndev || ntiles * tiles[d] > ndev)
            return ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s (%s) needs more devices than the mesh's %lld", ref,
                                s, (long long)ndev);
        ntiles *= tiles[d];
    }
    if (ntiles != ndev)
        return ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s (%s) places %lld tiles on a mesh of %lld devices", ref,
                            s, (long long)ntiles, (long long)ndev);
    int64_t *dev = ap_malloc(sizeof *dev * (size_t)ndev);
    if (!dev)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    int rc = 0;
    if (strncmp(p, "<=[", 3) == 0) { /* iota over rdims, transposed by perm */
        p += 3;
        nr = int_list(&p, ']', rdims, IR_MAX_RANK);
        int64_t total = 1;
        for (int i = 0; i < nr; i++)
            total = rdims[i] > 0 && total <= ndev ? total * rdims[i] : -1;
        if (nr > 0 && *p == 'T' && p[1] == '(') {
            p += 2;
            np = int_list(&p, ')', perm, IR_MAX_RANK);
        } else {
            for (np = 0; np < nr; np++)
                perm[np] = np;
        }
        bool seen[IR_MAX_RANK] = {0};
        bool ok = nr > 0 && np == nr && total == ndev;
        for (int i = 0; ok && i < np; i++) {
            ok = perm[i] >= 0 && perm[i] < nr && !seen[perm[i]];
            if (ok)
                seen[perm[i]] = true;
        }
        if (!ok) {
            rc = ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s: malformed device iota in %s", ref, s);
            goto out;
        }
        for (int64_t k = 0; k < ndev; k++) { /* element k of the transposed iota */
            int64_t rem = k, idx[IR_MAX_RANK], src = 0;
            for (int i = nr - 1; i >= 0; i--) {
                idx[perm[i]] = rem % rdims[perm[i]];
                rem /= rdims[perm[i]];
            }
            for (int i = 0; i < nr; i++)
                src = src * rdims[i] + idx[i];
            dev[k] = src;
        }
    } else { /* the devices listed: a permutation of the mesh's */
        int64_t k = 0;
        while (isdigit((unsigned char)*p) && k < ndev) {
            dev[k++] = strtoll(p, (char **)&p, 10);
            if (*p == ',')
                p++;
        }
        bool ok = k == ndev;
        bool *seen = ok ? ap_calloc((size_t)ndev, sizeof *seen) : NULL;
        for (int64_t i = 0; ok && i < ndev; i++) {
            ok = seen && dev[i] >= 0 && dev[i] < ndev && !seen[dev[i]];
            if (ok)
                seen[dev[i]] = true;
        }
        ap_free(seen);
        if (!ok) {
            rc = ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s: the device list of %s is not the mesh's %lld devices",
                              ref, s, (long long)ndev);
            goto out;
        }
    }
    /* the axes of each tile dim, minor first: stepping the tile index by
     * the product P of the axes found so far must step exactly one new
     * axis (the next more major one) and return the others to zero */
    int axes[IR_MAX_RANK + 1][IR_MAX_AXES], n_axes[IR_MAX_RANK + 1] = {0};
    bool used[IR_MAX_AXES] = {0};
    int64_t stride = ndev;
    for (int d = 0; d < n && !rc; d++) {
        stride /= tiles[d];
        int64_t prod = 1;
        while (prod < tiles[d] && !rc) {
            int64_t x0 = dev[0], x = dev[prod * stride];
            int found = -1, changed = 0;
            for (int a = 0; a < mesh->n_axes; a++)
                if (mesh_coord(mesh, x, a) != mesh_coord(mesh, x0, a)) {
                    changed++;
                    if (!used[a])
                        found = a;
                }
            if (changed != 1 || found < 0 || tiles[d] % (prod * mesh->sizes[found]) != 0) {
                rc = AP_EUNSUPPORTED;
                break;
            }
            used[found] = true;
            axes[d][n_axes[d]++] = found;
            prod *= mesh->sizes[found];
        }
    }
    /* every tile where the axes put it */
    for (int64_t k = 0; k < ndev && !rc; k++) {
        int64_t coord[IR_MAX_AXES] = {0}, rem = k, x = 0;
        for (int d = n - 1; d >= 0; d--) {
            int64_t i = rem % tiles[d];
            rem /= tiles[d];
            for (int j = 0; j < n_axes[d]; j++) { /* minor first */
                coord[axes[d][j]] = i % mesh->sizes[axes[d][j]];
                i /= mesh->sizes[axes[d][j]];
            }
        }
        for (int a = 0; a < mesh->n_axes; a++)
            x = x * mesh->sizes[a] + coord[a];
        if (x != dev[k])
            rc = AP_EUNSUPPORTED;
    }
    if (rc) {
        rc = ap_error_set(err, AP_EUNSUPPORTED, "mhlo.sharding of %s: its device order (%s) does not map onto the mesh axes",
                          ref, s);
        goto out;
    }
    for (int d = 0; d < data_dims; d++)
        for (int j = n_axes[d] - 1; j >= 0; j--) { /* major first: deeper tiles go minor-most */
            ap_buf_printf(b, "tile %s %d %s\n", ref, d, mesh->names[axes[d][j]]);
            rc++;
        }
out:
    ap_free(dev);
    return rc;
}

/* The serialized xla.OpSharding proto that JAX wrote as mhlo.sharding
 * before the text form ("\08\03\1A\02\01\02\22\02\00\01"), as that text
 * form ("{devices=[1,2]0,1}"), so one reader judges both (protobuf-c
 * decodes it: proto/xla/op_sharding.proto declares the fields that say
 * where a tile lives; the others are skipped).  An empty string is the
 * proto of a replicated value (proto3 omits the default type).  Returns
 * 0, or -1 when s is not such a proto. */
static int op_sharding_text(const char *s, size_t len, ap_buf *out)
{
    static const char *const types[] = {"replicated", "maximal", "tuple", "other", "manual", "unknown"};
    Xla__OpSharding *o = xla__op_sharding__unpack(NULL, len, (const uint8_t *)s);
    if (!o)
        return -1;
    bool ok = (unsigned)o->type < 6;
    for (size_t i = 0; i < o->n_last_tile_dims && ok; i++)
        ok = (unsigned)o->last_tile_dims[i] < 6;
    if (ok && o->type == XLA__OP_SHARDING__TYPE__OTHER) {
        ap_buf_puts(out, "{devices=[");
        for (size_t i = 0; i < o->n_tile_assignment_dimensions; i++)
            ap_buf_printf(out, "%s%lld", i ? "," : "", (long long)o->tile_assignment_dimensions[i]);
        ap_buf_putc(out, ']');
        if (o->n_iota_reshape_dims) {
            ap_buf_puts(out, "<=[");
            for (size_t i = 0; i < o->n_iota_reshape_dims; i++)
                ap_buf_printf(out, "%s%lld", i ? "," : "", (long long)o->iota_reshape_dims[i]);
            ap_buf_putc(out, ']');
            if (o->n_iota_transpose_perm) {
                ap_buf_puts(out, "T(");
                for (size_t i = 0; i < o->n_iota_transpose_perm; i++)
                    ap_buf_printf(out, "%s%d", i ? "," : "", (int)o->iota_transpose_perm[i]);
                ap_buf_putc(out, ')');
            }
        } else {
            for (size_t i = 0; i < o->n_tile_assignment_devices; i++)
                ap_buf_printf(out, "%s%lld", i ? "," : "", (long long)o->tile_assignment_devices[i]);
        }
        if (o->replicate_on_last_tile_dim)
            ap_buf_puts(out, " last_tile_dim_replicate");
        if (o->n_last_tile_dims) {
            ap_buf_puts(out, " last_tile_dims={");
            for (size_t i = 0; i < o->n_last_tile_dims; i++)
                ap_buf_printf(out, "%s%s", i ? "," : "", types[o->last_tile_dims[i]]);
            ap_buf_putc(out, '}');
        }
        ap_buf_putc(out, '}');
    } else if (ok && o->type == XLA__OP_SHARDING__TYPE__MAXIMAL) {
        ap_buf_puts(out, "{maximal device=");
        for (size_t i = 0; i < o->n_tile_assignment_devices; i++)
            ap_buf_printf(out, "%s%lld", i ? "," : "", (long long)o->tile_assignment_devices[i]);
        ap_buf_putc(out, '}');
    } else if (ok) {
        ap_buf_printf(out, "{%s}", types[o->type]);
    }
    xla__op_sharding__free_unpacked(o, NULL);
    return ok ? 0 : -1;
}

/* Whether the sharding text at p (past its '{') starts with keyword kw. */
static bool sharding_kw(const char *p, const char *kw)
{
    size_t n = strlen(kw);
    return strncmp(p, kw, n) == 0 && (p[n] == '}' || p[n] == ' ');
}

/* mhlo.sharding's value (s, len bytes), in either form XLA writes: read
 * when it tiles (mhlo_tiled) or says there is nothing to tile ({replicated};
 * {unknown}, the partitioner's choice; {maximal device=N}, the whole value
 * on one device, as an sdy sharding on a mesh of no axes is taken; the
 * empty string, a serialized replicated sharding), refused with its text
 * otherwise: a user's sharding is never dropped without a word ({bogus}
 * and the serialized form imported as replicated).  {manual} (a
 * shard_map's value, partitioned by hand) is refused as last_tile_dims
 * (partly manual) is: no action makes it. */
static int mhlo_sharding(const char *s, size_t len, const ir_mesh *mesh, int rank, ap_buf *b, const char *ref,
                         ap_error *err)
{
    ap_buf text;
    ap_buf_init(&text);
    const char *p = s;
    while (p < s + len && isspace((unsigned char)*p))
        p++;
    if (p == s + len)
        return 0;
    if (*p != '{') {
        if (op_sharding_text(s, len, &text) < 0 || text.oom) {
            char shown[200];
            size_t k = 0;
            for (size_t i = 0; i < len && k + 8 < sizeof shown; i++) {
                unsigned char c = (unsigned char)s[i];
                k += (size_t)snprintf(shown + k, sizeof shown - k, isprint(c) && c != '\\' && c != '"' ? "%c" : "\\%02X", c);
            }
            bool oom = text.oom;
            ap_buf_free(&text);
            return ap_error_set(err, oom ? AP_ENOMEM : AP_EUNSUPPORTED,
                                "mhlo.sharding of %s: \"%s%s\" is neither an XLA sharding's text ({devices=[..]..}, "
                                "{replicated}) nor a serialized OpSharding", ref, shown, k + 8 >= sizeof shown ? "..." : "");
        }
        p = text.data;
    }
    const char *kw = p + 1;
    while (*kw == ' ')
        kw++;
    int rc;
    if (sharding_kw(kw, "replicated") || sharding_kw(kw, "unknown") || sharding_kw(kw, "maximal"))
        rc = 0;
    else if (strncmp(kw, "devices=[", 9) == 0)
        rc = mhlo_tiled(p, mesh, rank, b, ref, err);
    else if (sharding_kw(kw, "manual"))
        rc = ap_error_set(err, AP_EUNSUPPORTED,
                          "mhlo.sharding of %s is %s: a value partitioned by hand (shard_map), which no action can tile", ref,
                          p);
    else if (*kw == '{' || sharding_kw(kw, "tuple"))
        rc = ap_error_set(err, AP_EINVALID, "mhlo.sharding of %s: a tuple's sharding (%s) on a single value", ref, p);
    else
        rc = ap_error_set(err, AP_EUNSUPPORTED, "mhlo.sharding of %s: unsupported form %s", ref, p);
    ap_buf_free(&text);
    return rc;
}

typedef struct named_arg {
    const char *name;
    uint32_t a;
} named_arg;

static int cmp_named_arg(const void *x, const void *y)
{
    return strcmp(((const named_arg *)x)->name, ((const named_arg *)y)->name);
}

bool *ir_schedule_shared_arg_names(const ir_op *func)
{
    uint32_t na = ir_func_num_args(func), n = 0;
    bool *dup = ap_calloc(na + 1, sizeof *dup);
    named_arg *ix = ap_malloc(sizeof *ix * (na + 1));
    if (!dup || !ix) {
        ap_free(dup);
        ap_free(ix);
        return NULL;
    }
    for (uint32_t a = 0; a < na; a++)
        if (ir_func_arg_name(func, a))
            ix[n++] = (named_arg){ir_func_arg_name(func, a), a};
    qsort(ix, n, sizeof *ix, cmp_named_arg);
    for (uint32_t i = 1; i < n; i++)
        if (!strcmp(ix[i - 1].name, ix[i].name))
            dup[ix[i - 1].a] = dup[ix[i].a] = true;
    ap_free(ix);
    return dup;
}

/* Whether argument a's location name, written as a schedule word, names
 * that argument alone: a word has no spaces or quotes, is not a glob, and
 * no other argument has the name (HLO metadata often repeats one). */
static bool arg_name_is_ref(const ir_op *func, uint32_t a, const char *name)
{
    if (!name || !*name || strpbrk(name, " \t\r\n;#\"*?") || name[0] == '%' || strlen(name) >= 300)
        return false;
    for (uint32_t i = 0; i < ir_func_num_args(func); i++) {
        const char *other = ir_func_arg_name(func, i);
        if (i != a && other && strcmp(other, name) == 0)
            return false;
    }
    return true;
}

/* The sharding text of Shardy's `sdy.sharding_constraint %v <@mesh,
 * [...]> : T` on a tensor (kept as a template of its custom syntax), or of
 * its generic form's `sharding` attribute; NULL for any other op. */
static const char *sdy_constraint_text(const ir_op *o)
{
    if (o->opcode != IR_OP_UNKNOWN || strcmp(o->name, "sdy.sharding_constraint") != 0 || o->n_operands != 1 ||
        o->n_results != 1 || o->results[0].type->kind != IR_T_TENSOR)
        return NULL;
    ir_attr *sh = ir_op_attr(o, "sharding");
    if (sh && sh->kind == IR_A_DIALECT && sh->u.dia.body)
        return sh->u.dia.body;
    for (uint32_t i = 0; o->tmpl && i < o->tmpl->n; i++) {
        const ir_tmpl_piece *t = &o->tmpl->pieces[i];
        if (t->kind == IR_TP_TEXT && t->text && strchr(t->text, '['))
            return t->text;
    }
    return NULL;
}

/* A sharding constraint on a tensor: a custom call @Sharding with an
 * mhlo.sharding (XLA) or an sdy.sharding_constraint (Shardy). */
static bool is_sharding_constraint(const ir_op *o)
{
    if (sdy_constraint_text(o))
        return true;
    if (!ir_custom_call_is_identity(o) || o->results[0].type->kind != IR_T_TENSOR)
        return false;
    ir_attr *t = ir_op_attr(o, "call_target_name"), *sh = ir_op_attr(o, "mhlo.sharding");
    return !strcmp(t->u.str.s, "Sharding") && sh && sh->kind == IR_A_STRING;
}

/* Where in the source each line an import writes comes from: the
 * function's position for an argument's annotation (arguments carry no
 * position of their own), the op's for a constraint. */
typedef struct import_pos {
    uint32_t *line, *col; /* per line written */
    uint32_t n, cap;
    bool oom;
} import_pos;

/* Records (line, col) for every line b gained since `from`. */
static void pos_note(import_pos *ip, const ap_buf *b, size_t from, uint32_t line, uint32_t col)
{
    for (size_t i = from; ip && !ip->oom && i < b->len; i++) {
        if (b->data[i] != '\n')
            continue;
        if (ip->n == ip->cap) {
            uint32_t cap = ip->cap ? 2 * ip->cap : 16;
            uint32_t *nl = ap_realloc(ip->line, sizeof *nl * cap);
            if (nl)
                ip->line = nl;
            uint32_t *nc = nl ? ap_realloc(ip->col, sizeof *nc * cap) : NULL;
            if (!nc) {
                ip->oom = true;
                return;
            }
            ip->col = nc;
            ip->cap = cap;
        }
        ip->line[ip->n] = line;
        ip->col[ip->n++] = col;
    }
}

/* An error of the import, placed at (line, col) of the module's text when
 * there is a position. */
static int import_fail_at(ap_error *err, int rc, const ir_module *m, uint32_t line, uint32_t col)
{
    if (err && line > 0) {
        snprintf(err->file, sizeof err->file, "%s", m && m->filename ? m->filename : "");
        err->line = (int)line;
        err->col = (int)col;
    }
    return rc;
}

/* The sharding constraints of a function, in the order its text has them
 * (an op before the ops of its regions). */
typedef struct constraints {
    const ir_op **ops; /* read: the function's own, and with a context those
                          in regions it partitions with the function */
    uint32_t n, cap;
    const ir_op *skipped; /* the first not read, or NULL */
    uint32_t n_skipped;
    bool oom;
} constraints;

/* Collects the constraints of blk and of its ops' regions.  One inside a
 * region is read when ctx holds its value: the context partitions a while's
 * condition and body and a case's branches with the function (context.c
 * flattens them), so a tile of the value there is a tile of the state.  A
 * region the context runs whole (a reduce, scatter or sort body, a while or case it does not
 * flatten, sdy.manual_computation) holds values no action can name: its
 * constraints are counted as skipped.  Without ctx only the function's
 * own are read. */
static void collect_constraints(const ir_block *blk, bool top, const ir_pctx *ctx, constraints *cs)
{
    for (const ir_op *o = blk ? blk->first : NULL; o && !cs->oom; o = o->next) {
        if (is_sharding_constraint(o)) {
            if (top || (ctx && ir__value_id(ctx, &o->results[0]) != VAL_NONE)) {
                if (cs->n == cs->cap) {
                    uint32_t cap = cs->cap ? 2 * cs->cap : 16;
                    const ir_op **nv = ap_realloc(cs->ops, sizeof *nv * cap);
                    if (!nv) {
                        cs->oom = true;
                        return;
                    }
                    cs->ops = nv;
                    cs->cap = cap;
                }
                cs->ops[cs->n++] = o;
            } else if (!cs->n_skipped++)
                cs->skipped = o;
        }
        for (uint32_t r = 0; r < o->n_regions; r++)
            for (const ir_block *rb = o->regions[r].first; rb; rb = rb->next)
                collect_constraints(rb, false, ctx, cs);
    }
}

uint32_t ir_schedule_import_skipped(const ir_pctx *c, const ir_op **first)
{
    constraints cs = {0};
    collect_constraints(ir_func_entry(ir_pctx_func(c)), true, c, &cs);
    ap_free(cs.ops);
    *first = cs.skipped;
    return cs.n_skipped;
}

static int import_text(const ir_module *m, const ir_op *func, const ir_pctx *ctx, const ir_mesh *mesh, ap_buf *b,
                       import_pos *ip, ap_error *err)
{
    int total = 0;
    for (uint32_t a = 0; a < ir_func_num_args(func); a++) {
        const char *name = ir_func_arg_name(func, a);
        char ref[300];
        if (arg_name_is_ref(func, a, name))
            snprintf(ref, sizeof ref, "%s", name);
        else
            snprintf(ref, sizeof ref, "%%arg%u", a);
        ir_attr *sdy = ir_func_arg_attr(func, a, "sdy.sharding");
        ir_attr *mh = ir_func_arg_attr(func, a, "mhlo.sharding");
        const ir_type *t = ir_func_arg(func, a)->type;
        int rank = t && t->kind == IR_T_TENSOR ? t->rank : 0;
        size_t from = b->len;
        if (sdy && sdy->kind == IR_A_DIALECT && sdy->u.dia.body) {
            int n = sdy_sharding(sdy->u.dia.body, mesh, rank, b, ref, err);
            if (n < 0)
                return import_fail_at(err, n, m, func->src_line, func->src_col);
            total += n;
        } else if (mh && mh->kind == IR_A_STRING) {
            int n = mhlo_sharding(mh->u.str.s, mh->u.str.len, mesh, rank, b, ref, err);
            if (n < 0)
                return import_fail_at(err, n, m, func->src_line, func->src_col);
            total += n;
        }
        pos_note(ip, b, from, func->src_line, func->src_col);
    }
    /* The sharding constraints in the body (jax.lax.with_sharding_constraint
     * becomes XLA's custom call @Sharding or Shardy's sdy.sharding_constraint):
     * the value is tiled as annotated, as
     * PartIR takes a constraint (a tile of the value, then propagation).
     * The function's own, and with a context those in the loop bodies and
     * case branches it partitions with the function (a scan's layers:
     * collect_constraints). */
    constraints cs = {0};
    collect_constraints(ir_func_entry(func), true, ctx, &cs);
    const ir_op **ops = cs.ops;
    uint32_t n = cs.n;
    if (cs.oom) {
        ap_free(ops);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    if (n) {
        int64_t *num = ap_malloc(sizeof *num * n);
        int rc = num ? 0 : ap_error_set(err, AP_ENOMEM, "out of memory");
        if (!rc && ir__printed_numbers(func, ops, n, num) < 0)
            rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        for (uint32_t i = 0; i < n && !rc; i++) {
            const ir_type *t = ops[i]->results[0].type;
            char ref[32];
            snprintf(ref, sizeof ref, "%%%lld", (long long)num[i]);
            const char *name = ops[i]->loc ? ir_loc_name(ops[i]->loc) : NULL;
            size_t from = b->len;
            if (name && *name && !strpbrk(name, "\r\n"))
                ap_buf_printf(b, "# %s\n", name);
            const char *sdy = sdy_constraint_text(ops[i]);
            int t_rc = sdy ? sdy_sharding(sdy, mesh, t->rank, b, ref, err)
                           : mhlo_sharding(ir_op_attr(ops[i], "mhlo.sharding")->u.str.s,
                                           ir_op_attr(ops[i], "mhlo.sharding")->u.str.len, mesh, t->rank, b, ref, err);
            if (t_rc < 0)
                rc = import_fail_at(err, t_rc, m, ops[i]->src_line, ops[i]->src_col);
            else
                total += t_rc;
            pos_note(ip, b, from, ops[i]->src_line, ops[i]->src_col);
        }
        ap_free(num);
        if (rc < 0) {
            ap_free(ops);
            return rc;
        }
    }
    ap_free(ops);
    if (total) {
        size_t from = b->len;
        ap_buf_puts(b, "propagate\n");
        pos_note(ip, b, from, func->src_line, func->src_col);
    }
    return total;
}

int ir_schedule_import(const ir_module *m, const ir_op *func, const ir_mesh *mesh, ap_buf *b, ap_error *err)
{
    return import_text(m, func, NULL, mesh, b, NULL, err);
}

int ir_schedule_import_apply(ir_partition *p, const ir_module *m, const ir_op *func, ap_error *err)
{
    import_pos ip = {0};
    ap_buf b;
    ap_buf_init(&b);
    const ir_pctx *ctx = ir_partition_ctx(p);
    int n = import_text(m, func, ir_pctx_func(ctx) == func ? ctx : NULL, ir_pctx_mesh(ctx), &b, &ip, err);
    if (n >= 0 && (b.oom || ip.oom))
        n = ap_error_set(err, AP_ENOMEM, "out of memory");
    if (n > 0) {
        int rc = ir_schedule_apply(p, b.data, err);
        /* the schedule's text is ours, not the user's: its line:column
         * would point nowhere they can look, so the error moves to the
         * annotation the line came from (or has no position, when the
         * function has none: an HLO module's parameters) */
        if (rc < 0 && err && err->line > 0 && (uint32_t)err->line <= ip.n) {
            char msg[sizeof err->msg];
            uint32_t line = ip.line[err->line - 1], col = ip.col[err->line - 1];
            snprintf(msg, sizeof msg, "%s", err->msg);
            snprintf(err->msg, sizeof err->msg, "the imported sharding does not apply: %.470s", msg);
            err->file[0] = '\0';
            err->line = err->col = 0;
            import_fail_at(err, rc, m, line, col);
        }
        if (rc < 0)
            n = rc;
    }
    ap_buf_free(&b);
    ap_free(ip.line);
    ap_free(ip.col);
    return n;
}
