/*
 * redist.c - synthesis of array redistributions between distributed types
 * (shared/seeds/redistribution-paper.md, sections 2-7; API and conventions in
 * partir.h).
 *
 * How a plan is made (ir_redist_synthesize):
 *   1. Split the mesh axes into prime factors and rewrite both types over
 *      them (paper, Principle 1: without prime axes memory-efficient
 *      sequences need not exist).
 *   2. weak_search: Dijkstra over WEAK types, i.e. types up to a permutation
 *      of devices (section 5).  A weak type is identified by its local type,
 *      stored as the exponents of each prime in each dim's number of pieces.
 *      Edges are the multi-axis all_gather, all_to_all and dynslice (section
 *      7.1-7.2) with the paper's costs (Figure 11); types whose tile exceeds
 *      max(local in, local out) are never visited (height bound, eq. (4)).
 *      Ties are broken by fewer steps, then by discovery order, so a problem
 *      always gives the same plan.
 *   3. lower_path: give every weak step concrete factor axes, replica groups
 *      and device maps (section 6, Figure 10), once forward from `from`
 *      (choices biased towards the axes of `to`, section 7.3) and once
 *      backward from `to` (biased towards `from`).  Where the two lowerings
 *      hold the same tiles on every device, they are joined without a
 *      permutation; otherwise one collective_permute joins them at the point
 *      of the path with the smallest tiles (latest on ties: before the trailing
 *      all_gathers, section 7.3).
 *   4. Only when that needs a permutation (synthesize_path): exact weak
 *      distances to `to` (DISTANCES) and from `from` (REACH) within the cost
 *      of that plan give the weak type where one permutation is cheapest,
 *      and the path through it is lowered instead when it is cheaper; a
 *      search over concrete types (STRONG) takes a permutation-free plan
 *      that costs no more than the best plan with a permutation.
 *   5. build_plan copies the chosen steps into a plan owned by the caller.
 * check_step re-derives every step from the types' base offset maps
 * (Figure 7a) without using anything from the search, for tests and
 * verification between passes.
 */
#include "ir_build.h"
#include "partir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes in types stay below 2^53 so that they survive JSON readers. */
#define MAX_SIZE ((int64_t)1 << 53)
/* A mesh of at most 65536 devices has at most 16 prime factors. */
#define MAX_FACTORS 16
#define MAX_PRIMES MAX_FACTORS
/* Weak types the search may visit before giving up with AP_ELIMIT. */
#define MAX_SEARCH_NODES (1 << 20)

/* ================================================================ names */

static bool ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool ident_char(int c) { return ident_start(c) || (c >= '0' && c <= '9'); }

static bool is_identifier(const char *s)
{
    if (!ident_start((unsigned char)s[0]))
        return false;
    for (s++; *s; s++)
        if (!ident_char((unsigned char)*s))
            return false;
    return true;
}

static void put_name(ap_buf *out, const char *name)
{
    if (is_identifier(name)) {
        ap_buf_puts(out, name);
    } else {
        ap_buf_putc(out, '"');
        ap_buf_puts(out, name);
        ap_buf_putc(out, '"');
    }
}

/* `{x,y}` */
static void put_axes(ap_buf *out, const ir_mesh *mesh, const uint8_t *axes, int naxes)
{
    ap_buf_putc(out, '{');
    for (int k = 0; k < naxes; k++) {
        if (k)
            ap_buf_putc(out, ',');
        if (axes[k] < mesh->n_axes)
            put_name(out, mesh->names[axes[k]]);
        else
            ap_buf_printf(out, "#%d", axes[k]);
    }
    ap_buf_putc(out, '}');
}

/* ================================================================= mesh */

void ir_redist_mesh_format(const ir_mesh *mesh, ap_buf *out)
{
    ap_buf_putc(out, '{');
    for (int a = 0; a < mesh->n_axes; a++) {
        if (a)
            ap_buf_puts(out, ", ");
        put_name(out, mesh->names[a]);
        ap_buf_printf(out, ":%lld", (long long)mesh->sizes[a]);
    }
    ap_buf_putc(out, '}');
}

/* ------------------------------------------------------------ scanning */

/* The small lexer of the type parser.  Errors carry the
 * 1-based column of the offending character (line 1: the texts are one
 * line). */
typedef ir__scanner scanner;

static int scanner_col(const scanner *s, const char *at) { return (int)(at - s->text) + 1; }

static int scan_error_at(scanner *s, const char *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int scan_error_at(scanner *s, const char *at, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ap_error_setv(s->err, code, fmt, ap);
    va_end(ap);
    if (s->err) {
        s->err->line = 1;
        s->err->col = scanner_col(s, at);
    }
    return code;
}

static bool at_digit(scanner *s)
{
    ir__skip_space(s);
    return *s->p >= '0' && *s->p <= '9';
}

/* INT -> [0-9]+, at most MAX_SIZE */
static int scan_int(scanner *s, int64_t *out)
{
    ir__skip_space(s);
    const char *start = s->p;
    if (!at_digit(s))
        return scan_error_at(s, s->p, AP_ESYNTAX, "expected a size");
    int64_t v = 0;
    while (*s->p >= '0' && *s->p <= '9') {
        v = v * 10 + (*s->p - '0');
        if (v > MAX_SIZE)
            return scan_error_at(s, start, AP_ELIMIT, "size %.20s... is above 2^53", start);
        s->p++;
    }
    *out = v;
    return 0;
}

/* name -> IDENT | '"' CHAR+ '"'; copies into buf (IR_MESH_NAME_SIZE) */
static int scan_name(scanner *s, char *buf)
{
    ir__skip_space(s);
    const char *start = s->p, *end;
    if (*s->p == '"') {
        start = ++s->p;
        while (*s->p && *s->p != '"')
            s->p++;
        if (!*s->p)
            return scan_error_at(s, start - 1, AP_ESYNTAX, "unterminated quoted axis name");
        end = s->p++;
    } else if (ident_start((unsigned char)*s->p)) {
        while (ident_char((unsigned char)*s->p))
            s->p++;
        end = s->p;
    } else {
        return scan_error_at(s, s->p, AP_ESYNTAX, "expected an axis name");
    }
    size_t len = (size_t)(end - start);
    if (len == 0 || len > IR_MESH_NAME_MAX)
        return scan_error_at(s, start, AP_ESYNTAX, "axis names have 1 to %d characters",
                             IR_MESH_NAME_MAX);
    memcpy(buf, start, len);
    buf[len] = '\0';
    return 0;
}

/* ------------------------------------------------------- prime factors */

/* Prime factors of n, largest first (the order of ir_redist_mesh_factor). */
static int prime_factors(int64_t n, int64_t *out)
{
    int count = 0;
    for (int64_t p = 2; p * p <= n; p++)
        while (n % p == 0) {
            out[count++] = p;
            n /= p;
        }
    if (n > 1)
        out[count++] = n;
    for (int i = 0; i < count / 2; i++) {
        int64_t t = out[i];
        out[i] = out[count - 1 - i];
        out[count - 1 - i] = t;
    }
    return count;
}

/* Factor names: scheme 0 `x1`, scheme 1 `x_1`, scheme s >= 2 `x` + s-1 '#'
 * + k; the first scheme under which all names differ wins. */
static void factor_name(char *buf, const char *axis, int k, int scheme)
{
    if (scheme == 0)
        snprintf(buf, IR_MESH_NAME_SIZE, "%s%d", axis, k);
    else if (scheme == 1)
        snprintf(buf, IR_MESH_NAME_SIZE, "%s_%d", axis, k);
    else
        snprintf(buf, IR_MESH_NAME_SIZE, "%s%.*s%d", axis, scheme - 1, "#####", k);
}

int ir_redist_mesh_factor(const ir_mesh *mesh, ir_mesh *factors, int *factor_axis,
                          ap_error *err)
{
    int64_t devices = 1;
    if (mesh->n_axes < 0 || mesh->n_axes > IR_MAX_AXES)
        return ap_error_set(err, AP_EINVALID, "a mesh has 0 to %d axes, not %d",
                            IR_MAX_AXES, mesh->n_axes);
    for (int a = 0; a < mesh->n_axes; a++) {
        if (mesh->sizes[a] < 1 || mesh->sizes[a] > IR_MESH_MAX_DEVICES ||
            (devices *= mesh->sizes[a]) > IR_MESH_MAX_DEVICES)
            return ap_error_set(err, AP_EINVALID,
                                "not a mesh made by ir_redist_mesh_init: axis %d has size %lld", a,
                                (long long)mesh->sizes[a]);
    }
    for (int scheme = 0; scheme < 7; scheme++) {
        memset(factors, 0, sizeof *factors);
        int nf = 0;
        for (int a = 0; a < mesh->n_axes; a++) {
            int64_t primes[MAX_FACTORS];
            int count = prime_factors(mesh->sizes[a], primes);
            for (int k = 0; k < count; k++) {
                if (count == 1)
                    snprintf(factors->names[nf], IR_MESH_NAME_SIZE, "%s", mesh->names[a]);
                else
                    factor_name(factors->names[nf], mesh->names[a], k + 1, scheme);
                factors->sizes[nf] = primes[k];
                factor_axis[nf] = a;
                nf++;
            }
        }
        factors->n_axes = nf;
        bool clash = false;
        for (int f = 0; f < nf && !clash; f++)
            for (int g = 0; g < f && !clash; g++)
                clash = strcmp(factors->names[f], factors->names[g]) == 0;
        if (!clash)
            return 0;
    }
    return ap_error_set(err, AP_EINVALID,
                        "cannot give the prime factors of the mesh axes distinct names");
}

/* Rewrites `type` (over a mesh) over that mesh's prime factors, given the
 * `factors` and `factor_axis` of ir_redist_mesh_factor: each axis becomes its
 * factors, major first.  `out` may be `type`. */
static void type_factor(const ir_mesh *factors, const int *factor_axis,
                           const ir_redist_type *type, ir_redist_type *out)
{
    ir_redist_type t = *type;
    for (int d = 0; d < t.rank; d++) {
        ir_redist_dim *dim = &t.dims[d];
        const ir_redist_dim *src = &type->dims[d];
        dim->naxes = 0;
        for (int k = 0; k < src->naxes; k++)
            for (int f = 0; f < factors->n_axes; f++)
                if (factor_axis[f] == src->axes[k])
                    dim->axes[dim->naxes++] = (uint8_t)f;
    }
    *out = t;
}

/* ================================================================ types */

static int type_error(ap_error *err, int code, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int type_error(ap_error *err, int code, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ap_error_setv(err, code, fmt, ap);
    va_end(ap);
    if (err && col > 0) {
        err->line = 1;
        err->col = col;
    }
    return code;
}

/* Well-formedness (paper, Figure 7b).  `dim_col` and `axis_col` give text
 * columns for messages when the type was parsed, NULL otherwise. */
static int validate_type(const ir_mesh *mesh, const ir_redist_type *t, const int *dim_col,
                         const int (*axis_col)[IR_MESH_MAX_FACTORS], ap_error *err)
{
    if (t->rank < 0 || t->rank > IR_REDIST_MAX_RANK)
        return type_error(err, AP_ELIMIT, 0, "rank %d is above the limit of %d", t->rank,
                          IR_REDIST_MAX_RANK);
    int used_in[IR_MESH_MAX_FACTORS];
    for (int a = 0; a < IR_MESH_MAX_FACTORS; a++)
        used_in[a] = -1;
    for (int d = 0; d < t->rank; d++) {
        const ir_redist_dim *dim = &t->dims[d];
        int col = dim_col ? dim_col[d] : 0;
        if (dim->naxes < 0 || dim->naxes > mesh->n_axes)
            return type_error(err, AP_ETYPE, col, "dim %d: %d axes, the mesh has %d", d, dim->naxes,
                              mesh->n_axes);
        int64_t product = 1;
        for (int k = 0; k < dim->naxes; k++) {
            int a = dim->axes[k];
            int acol = axis_col ? axis_col[d][k] : 0;
            if (a >= mesh->n_axes)
                return type_error(err, AP_EUNDEFINED, acol,
                                  "dim %d: axis index %d is not in the mesh", d, a);
            if (used_in[a] >= 0)
                return type_error(err, AP_ETYPE, acol, "mesh axis \"%s\" used twice",
                                  mesh->names[a]);
            used_in[a] = d;
            product *= mesh->sizes[a];
        }
        if (dim->global < 1 || dim->local < 1 || dim->global > MAX_SIZE || dim->local > MAX_SIZE)
            return type_error(err, AP_ETYPE, col, "dim %d: sizes must be between 1 and 2^53", d);
        if (dim->global % product != 0 || dim->local != dim->global / product) {
            ap_buf axes;
            ap_buf_init(&axes);
            put_axes(&axes, mesh, dim->axes, dim->naxes);
            const char *names = axes.oom ? "its axes" : axes.data;
            int64_t scaled;
            int rc;
            if (dim->global % product != 0)
                rc = type_error(
                    err, AP_ETYPE, col,
                    "dim %d: global size %lld is not divisible by %lld, the product of %s", d,
                    (long long)dim->global, (long long)product, names);
            else if (__builtin_mul_overflow(dim->local, product, &scaled))
                rc = type_error(
                    err, AP_ETYPE, col,
                    "dim %d: local size %lld times the product %lld of %s is above 2^63, "
                    "not the global size %lld",
                    d, (long long)dim->local, (long long)product, names, (long long)dim->global);
            else
                rc = type_error(
                    err, AP_ETYPE, col,
                    "dim %d: local size %lld times the product %lld of %s is %lld, not the "
                    "global size %lld",
                    d, (long long)dim->local, (long long)product, names, (long long)scaled,
                    (long long)dim->global);
            ap_buf_free(&axes);
            return rc;
        }
    }
    return 0;
}

int ir_redist_validate_type(const ir_mesh *mesh, const ir_redist_type *type, ap_error *err)
{
    return validate_type(mesh, type, NULL, NULL, err);
}

/* dim  -> INT [ '{' axes '}' INT ] | '{' axes '}' INT
 * axes -> [ name { ',' name } ] */
static int parse_dim(scanner *s, const ir_mesh *mesh, ir_redist_dim *dim, int *axis_col)
{
    int rc;
    int64_t first = 0;
    bool has_local = at_digit(s);
    if (has_local && (rc = scan_int(s, &first)))
        return rc;
    memset(dim, 0, sizeof *dim);
    if (!ir__scan_char(s, '{')) {
        if (!has_local)
            return scan_error_at(s, s->p, AP_ESYNTAX, "expected a dimension size");
        dim->global = dim->local = first;
        return 0;
    }
    if (!ir__scan_char(s, '}')) {
        do {
            char name[IR_MESH_NAME_SIZE];
            ir__skip_space(s);
            const char *at = s->p;
            if ((rc = scan_name(s, name)))
                return rc;
            int a = 0;
            while (a < mesh->n_axes && strcmp(mesh->names[a], name) != 0)
                a++;
            if (a == mesh->n_axes)
                return scan_error_at(s, at, AP_EUNDEFINED, "unknown mesh axis \"%s\"", name);
            for (int k = 0; k < dim->naxes; k++)
                if (dim->axes[k] == a)
                    return scan_error_at(s, at, AP_ETYPE, "mesh axis \"%s\" used twice", name);
            axis_col[dim->naxes] = scanner_col(s, at);
            dim->axes[dim->naxes++] = (uint8_t)a;
        } while (ir__scan_char(s, ','));
        if (!ir__scan_char(s, '}'))
            return scan_error_at(s, s->p, AP_ESYNTAX, "expected ',' or '}'");
    }
    if ((rc = scan_int(s, &dim->global)))
        return rc;
    if (has_local) {
        dim->local = first;
    } else {
        /* `{x}12`: the local size follows, unless the axes do not divide. */
        int64_t product = 1;
        for (int k = 0; k < dim->naxes; k++)
            product *= mesh->sizes[dim->axes[k]];
        dim->local = dim->global % product == 0 ? dim->global / product : 1;
    }
    return 0;
}

/* type -> '[' [ dim { ',' dim } ] ']' */
int ir_redist_parse_type(const ir_mesh *mesh, const char *text, ir_redist_type *out,
                         ap_error *err)
{
    scanner s = {text, text, err};
    ir_redist_type t;
    int dim_col[IR_REDIST_MAX_RANK];
    int axis_col[IR_REDIST_MAX_RANK][IR_MESH_MAX_FACTORS];
    int rc;
    memset(&t, 0, sizeof t);
    if (!ir__scan_char(&s, '['))
        return scan_error_at(&s, s.p, AP_ESYNTAX, "expected '[' to start a type");
    if (!ir__scan_char(&s, ']')) {
        do {
            ir__skip_space(&s);
            if (t.rank == IR_REDIST_MAX_RANK)
                return scan_error_at(&s, s.p, AP_ELIMIT, "rank above the limit of %d",
                                     IR_REDIST_MAX_RANK);
            dim_col[t.rank] = scanner_col(&s, s.p);
            if ((rc = parse_dim(&s, mesh, &t.dims[t.rank], axis_col[t.rank])))
                return rc;
            t.rank++;
        } while (ir__scan_char(&s, ','));
        if (!ir__scan_char(&s, ']'))
            return scan_error_at(&s, s.p, AP_ESYNTAX, "expected ',' or ']'");
    }
    ir__skip_space(&s);
    if (*s.p)
        return scan_error_at(&s, s.p, AP_ESYNTAX, "unexpected text after the type");
    if ((rc = validate_type(mesh, &t, dim_col, (const int(*)[IR_MESH_MAX_FACTORS])axis_col, err)))
        return rc;
    *out = t;
    return 0;
}

void ir_redist_format_type(const ir_mesh *mesh, const ir_redist_type *type, ap_buf *out)
{
    ap_buf_putc(out, '[');
    for (int d = 0; d < type->rank; d++) {
        const ir_redist_dim *dim = &type->dims[d];
        if (d)
            ap_buf_puts(out, ", ");
        if (dim->naxes == 0 && dim->local == dim->global) {
            ap_buf_printf(out, "%lld", (long long)dim->global);
            continue;
        }
        ap_buf_printf(out, "%lld", (long long)dim->local);
        put_axes(out, mesh, dim->axes, dim->naxes);
        ap_buf_printf(out, "%lld", (long long)dim->global);
    }
    ap_buf_putc(out, ']');
}

static void put_global_shape(ap_buf *out, const ir_redist_type *t)
{
    ap_buf_putc(out, '[');
    for (int d = 0; d < t->rank; d++)
        ap_buf_printf(out, d ? ", %lld" : "%lld", (long long)t->dims[d].global);
    ap_buf_putc(out, ']');
}

int ir_redist_check_problem(const ir_redist_type *from, const ir_redist_type *to, ap_error *err)
{
    if (from->rank != to->rank)
        return ap_error_set(err, AP_ETYPE, "rank mismatch: from has rank %d, to has rank %d",
                            from->rank, to->rank);
    for (int d = 0; d < from->rank; d++) {
        if (from->dims[d].global == to->dims[d].global)
            continue;
        ap_buf a, b;
        ap_buf_init(&a);
        ap_buf_init(&b);
        put_global_shape(&a, from);
        put_global_shape(&b, to);
        int rc = ap_error_set(err, AP_ETYPE, "global shapes differ: from is %s, to is %s",
                              a.oom ? "?" : a.data, b.oom ? "?" : b.data);
        ap_buf_free(&a);
        ap_buf_free(&b);
        return rc;
    }
    return 0;
}

bool ir_redist_type_equal(const ir_redist_type *a, const ir_redist_type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++) {
        const ir_redist_dim *x = &a->dims[d], *y = &b->dims[d];
        if (x->global != y->global || x->local != y->local || x->naxes != y->naxes ||
            memcmp(x->axes, y->axes, (size_t)x->naxes) != 0)
            return false;
    }
    return true;
}

int64_t ir_redist_type_local_size(const ir_redist_type *type)
{
    int64_t n = 1;
    for (int d = 0; d < type->rank; d++)
        n *= type->dims[d].local;
    return n;
}

const char *ir_redist_kind_name(ir_redist_kind kind)
{
    switch (kind) {
#define IR_REDIST_KIND_CASE(name, text) \
    case IR_REDIST_##name:              \
        return text;
        IR_REDIST_KINDS(IR_REDIST_KIND_CASE)
#undef IR_REDIST_KIND_CASE
    }
    return "?";
}

/* ========================================================== the problem */

/* A redistribution problem over the prime-factor mesh, with what the search
 * and the lowering precompute about it. */
typedef struct problem {
    ir_mesh factors;
    int factor_axis[IR_MESH_MAX_FACTORS];
    int nf;
    int64_t stride[MAX_FACTORS]; /* of each factor in a logical device index */
    int64_t ndev;
    int rank;
    int64_t global[IR_REDIST_MAX_RANK];
    int np; /* distinct primes among the factor sizes */
    int64_t prime[MAX_PRIMES];
    int pcount[MAX_PRIMES];  /* factor axes of each prime */
    int fprime[MAX_FACTORS]; /* prime index of each factor axis */
    /* most pieces a dim can be cut into, per prime: min(v_p(global), pcount) */
    uint8_t vmax[IR_REDIST_MAX_RANK][MAX_PRIMES];
    int64_t power[MAX_PRIMES][MAX_FACTORS + 1]; /* prime^e */
    ir_redist_type from, to;                    /* over `factors` */
    int64_t from_local, to_local, bound;        /* elements; bound = max of the two */
    int elem_bytes;
} problem;

/* Exponent of each prime in each dim's number of pieces: the weak type
 * (section 7.2: with a fixed global type, the local type identifies it). */
static void type_key(const problem *pb, const ir_redist_type *t, uint8_t *key)
{
    memset(key, 0, (size_t)(pb->rank * pb->np));
    for (int d = 0; d < t->rank; d++)
        for (int k = 0; k < t->dims[d].naxes; k++)
            key[d * pb->np + pb->fprime[t->dims[d].axes[k]]]++;
}

static int setup_problem(problem *pb, const ir_mesh *mesh, const ir_redist_type *from,
                         const ir_redist_type *to, int elem_bytes, ap_error *err)
{
    int rc;
    if (elem_bytes < 0)
        return ap_error_set(err, AP_EINVALID, "element size %d is negative", elem_bytes);
    if ((rc = ir_redist_mesh_factor(mesh, &pb->factors, pb->factor_axis, err)) ||
        (rc = validate_type(mesh, from, NULL, NULL, err)) ||
        (rc = validate_type(mesh, to, NULL, NULL, err)) ||
        (rc = ir_redist_check_problem(from, to, err)))
        return rc;
    pb->elem_bytes = elem_bytes ? elem_bytes : 4;
    pb->nf = pb->factors.n_axes;
    pb->ndev = 1;
    for (int f = pb->nf - 1; f >= 0; f--) {
        pb->stride[f] = pb->ndev;
        pb->ndev *= pb->factors.sizes[f];
    }
    /* A cost is a sum of far fewer than 256 tiles, none above the global
     * size: keep that in 64 bits. */
    int64_t elems = 1;
    for (int d = 0; d < from->rank; d++)
        if (__builtin_mul_overflow(elems, from->dims[d].global, &elems) ||
            elems > (INT64_MAX >> 8) / pb->elem_bytes)
            return ap_error_set(err, AP_ELIMIT,
                                "the array is too large to count its bytes in 64 bits");

    pb->np = 0;
    for (int f = 0; f < pb->nf; f++) {
        int k = 0;
        while (k < pb->np && pb->prime[k] != pb->factors.sizes[f])
            k++;
        if (k == pb->np) {
            pb->prime[k] = pb->factors.sizes[f];
            pb->pcount[k] = 0;
            pb->np++;
        }
        pb->pcount[k]++;
        pb->fprime[f] = k;
    }
    for (int k = 0; k < pb->np; k++) {
        pb->power[k][0] = 1;
        for (int e = 1; e <= pb->pcount[k]; e++)
            pb->power[k][e] = pb->power[k][e - 1] * pb->prime[k];
    }
    pb->rank = from->rank;
    for (int d = 0; d < pb->rank; d++) {
        pb->global[d] = from->dims[d].global;
        for (int k = 0; k < pb->np; k++) {
            int64_t g = pb->global[d];
            int v = 0;
            while (v < pb->pcount[k] && g % pb->prime[k] == 0) {
                g /= pb->prime[k];
                v++;
            }
            pb->vmax[d][k] = (uint8_t)v;
        }
    }
    type_factor(&pb->factors, pb->factor_axis, from, &pb->from);
    type_factor(&pb->factors, pb->factor_axis, to, &pb->to);
    pb->from_local = ir_redist_type_local_size(from);
    pb->to_local = ir_redist_type_local_size(to);
    pb->bound = pb->from_local > pb->to_local ? pb->from_local : pb->to_local;
    return 0;
}

/* ============================================================ context */

typedef struct search_node {
    int64_t cost;   /* elements per device sent on the best path found so far */
    int64_t local;  /* elements of a tile */
    int64_t mult;   /* pieces moved by the step from `parent` */
    int32_t parent; /* -1 for the start */
    int32_t steps;
    int8_t kind, dim, to_dim;
    uint8_t arg; /* strong search: axes taken from the end of `dim`, or the sliced axis */
    bool closed;
} search_node;

typedef struct heap_entry {
    int64_t cost; /* path cost plus the lower bound to the goal */
    int64_t seq;  /* discovery order: the last tie-breaker */
    int32_t steps;
    int32_t node;
} heap_entry;

typedef struct hash_slot {
    uint32_t gen; /* the slot is in use iff gen == its table's gen */
    int32_t node;
} hash_slot;

/* A step of a path found by the search: kind, dims and the number of pieces
 * it moves; paths of the strong search also know their axes. */
typedef struct path_step {
    ir_redist_kind kind;
    int dim, to_dim;
    int64_t mult;
    int64_t cost;        /* elements */
    int64_t local_after; /* elements */
    int naxes;
    uint8_t axes[MAX_FACTORS];
} path_step;

/* A concrete point of a lowering: a type over the factor axes and the
 * device map it is read through (logical index -> physical device). */
typedef struct lowered_state {
    ir_redist_type type;
    int32_t *map;
} lowered_state;

/* The concrete choices of one lowered step: axes (in group order) and
 * replica groups, computed from the state before it. */
typedef struct lowered_step {
    int naxes;
    uint8_t axes[MAX_FACTORS];
    int32_t *groups;
} lowered_step;

enum { FORWARD, BACKWARD };

/* The searches, all Dijkstra/A* over one node table each:
 *   WEAK      the paper's search: nodes are weak types, from `from` to `to`.
 *   DISTANCES the same graph walked backward from `to`: exact weak costs to
 *             reach `to`, up to the budget; the lower bound of the two
 *             searches below.
 *   REACH     the same graph walked forward from `from` over every type that
 *             can lie on a path within the budget: exact weak costs from
 *             `from`, to find where one permutation is cheapest.
 *   STRONG    nodes are concrete types and collectives act only on the last
 *             axes of a dim, so the device map never changes and no
 *             permutation is needed; it runs only when the weak plan needs
 *             one, and only up to the best plan with one.
 * WEAK runs on every problem; the others only when its path needs a
 * permutation. */
typedef enum { WEAK, DISTANCES, REACH, STRONG } search_space;

#define MAX_KEY (IR_REDIST_MAX_RANK * MAX_PRIMES)
/* Types the strong search may visit before keeping the weak plan. */
#define MAX_STRONG_NODES (1 << 16)

/* Nodes of one search, found by key through an open-addressing hash set.
 * A new search bumps `gen` instead of clearing the slots. */
typedef struct node_table {
    int key_len;
    size_t cap; /* most nodes allowed */
    search_node *nodes;
    size_t nnodes, nodes_cap;
    uint8_t *keys;
    size_t keys_cap;
    hash_slot *slots;
    size_t nslots;
    uint32_t gen; /* a slot is in use iff its gen equals this */
} node_table;

struct ir_redist_ctx {
    problem pb;
    /* search */
    search_space space;
    int64_t budget;       /* paths costing more are not wanted */
    node_table graph;     /* the current search */
    node_table distances; /* weak costs to `to`, for the strong search */
    heap_entry *heap;
    size_t nheap, heap_cap;
    int64_t seq;
    int64_t min_local; /* smallest tile of any type */
    path_step *path;
    size_t npath, path_cap;
    path_step *detour; /* the path through the best permutation point */
    size_t ndetour, detour_cap;
    /* lowering: npath + 1 states and npath steps in each direction */
    lowered_state *states[2];
    lowered_step *lsteps[2];
    size_t states_cap[2], lsteps_cap[2];
    int32_t *ints; /* maps and groups of the states and steps, plus scratch */
    size_t ints_cap;
    int64_t *wide; /* per-device tiles, group offsets and sort keys */
    size_t wide_cap;
    int32_t *identity, *scratch_map, *scratch_groups;
    int64_t *tiles[2], *offsets, *sort_keys;
    /* the join chosen by lower_path */
    size_t join;    /* steps lowered forward, before the join */
    bool permute;   /* a collective_permute at the join */
    int32_t *pairs; /* its (source, target) pairs */
};

/* `buf` resized to hold `need` elements of `elem` bytes, contents kept,
 * capacity doubling in *cap.  When memory runs out it frees `buf` and
 * returns NULL: the caller abandons its search, and the next one starts
 * from an empty buffer. */
static void *grown(void *buf, size_t *cap, size_t need, size_t elem)
{
    size_t n = *cap ? *cap : 64, bytes;
    if (need == 0)
        need = 1;
    if (buf && need <= *cap)
        return buf;
    while (n < need)
        n *= 2;
    void *p = ap_mul_overflow(n, elem, &bytes) ? NULL : ap_realloc(buf, bytes);
    if (!p) {
        ap_free(buf);
        *cap = 0;
        return NULL;
    }
    *cap = n;
    return p;
}

/* 0 once `array` holds `need` elements, else AP_ENOMEM. */
#define GROW(array, cap, need) \
    (((array) = grown((array), &(cap), (need), sizeof *(array))) != NULL ? 0 : AP_ENOMEM)

int ir_redist_ctx_new(ir_redist_ctx **out, ap_error *err)
{
    *out = ap_calloc(1, sizeof **out);
    if (!*out)
        return ap_error_set(err, AP_ENOMEM, "out of memory for a redistribution context");
    return 0;
}

static void table_free(node_table *t)
{
    ap_free(t->nodes);
    ap_free(t->keys);
    ap_free(t->slots);
}

void ir_redist_ctx_free(ir_redist_ctx *ctx)
{
    if (!ctx)
        return;
    table_free(&ctx->graph);
    table_free(&ctx->distances);
    ap_free(ctx->heap);
    ap_free(ctx->path);
    ap_free(ctx->detour);
    ap_free(ctx->states[0]);
    ap_free(ctx->states[1]);
    ap_free(ctx->lsteps[0]);
    ap_free(ctx->lsteps[1]);
    ap_free(ctx->ints);
    ap_free(ctx->wide);
    ap_free(ctx);
}

/* ========================================================== the search */

/* ------------------------------------------------------------ node tables */

static uint8_t *node_key(node_table *t, size_t node) { return t->keys + node * (size_t)t->key_len; }

static size_t slot_of(const node_table *t, const uint8_t *key)
{
    return (size_t)ap_hash_bytes(key, (size_t)t->key_len, 0) & (t->nslots - 1);
}

/* Rebuilds the hash set with twice the slots (at most half of them full). */
static int rehash(node_table *t)
{
    size_t nslots = t->nslots ? t->nslots * 2 : 1024;
    hash_slot *slots = ap_calloc(nslots, sizeof *slots);
    if (!slots)
        return AP_ENOMEM;
    ap_free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    t->gen = 1;
    for (size_t n = 0; n < t->nnodes; n++) {
        size_t s = slot_of(t, node_key(t, n));
        while (t->slots[s].gen == t->gen)
            s = (s + 1) & (nslots - 1);
        t->slots[s] = (hash_slot){t->gen, (int32_t)n};
    }
    return 0;
}

/* Empties the table for a search with keys of `key_len` bytes. */
static int table_reset(node_table *t, int key_len, size_t cap)
{
    t->key_len = key_len;
    t->cap = cap;
    t->nnodes = 0;
    if (!t->slots)
        return rehash(t);
    if (++t->gen == 0) { /* wrapped: forget the stale generations */
        memset(t->slots, 0, t->nslots * sizeof *t->slots);
        t->gen = 1;
    }
    return 0;
}

/* The node of `key`, or -1. */
static int64_t node_find(node_table *t, const uint8_t *key)
{
    for (size_t s = slot_of(t, key); t->slots[s].gen == t->gen; s = (s + 1) & (t->nslots - 1))
        if (memcmp(node_key(t, (size_t)t->slots[s].node), key, (size_t)t->key_len) == 0)
            return t->slots[s].node;
    return -1;
}

/* The node of `key`, added (with an infinite cost) if new.  Returns its
 * index, AP_ELIMIT past t->cap nodes, or AP_ENOMEM. */
static int64_t node_lookup(node_table *t, const uint8_t *key, int64_t local)
{
    size_t len = (size_t)t->key_len;
    size_t s = slot_of(t, key);
    for (; t->slots[s].gen == t->gen; s = (s + 1) & (t->nslots - 1))
        if (memcmp(node_key(t, (size_t)t->slots[s].node), key, len) == 0)
            return t->slots[s].node;
    if (t->nnodes >= t->cap)
        return AP_ELIMIT;
    if (GROW(t->nodes, t->nodes_cap, t->nnodes + 1) ||
        GROW(t->keys, t->keys_cap, (t->nnodes + 1) * len))
        return AP_ENOMEM;
    size_t n = t->nnodes++;
    memcpy(node_key(t, n), key, len);
    t->nodes[n] = (search_node){.cost = INT64_MAX, .local = local, .parent = -1};
    t->slots[s] = (hash_slot){t->gen, (int32_t)n};
    if (2 * t->nnodes >= t->nslots && rehash(t))
        return AP_ENOMEM;
    return (int64_t)n;
}

/* ---------------------------------------------------------------- frontier */

static bool entry_less(const heap_entry *a, const heap_entry *b)
{
    if (a->cost != b->cost)
        return a->cost < b->cost;
    if (a->steps != b->steps)
        return a->steps < b->steps;
    return a->seq < b->seq;
}

static int heap_push(ir_redist_ctx *ctx, int64_t cost, int32_t steps, int32_t node)
{
    if (GROW(ctx->heap, ctx->heap_cap, ctx->nheap + 1))
        return AP_ENOMEM;
    heap_entry e = {cost, ctx->seq++, steps, node};
    size_t i = ctx->nheap++;
    while (i > 0 && entry_less(&e, &ctx->heap[(i - 1) / 2])) {
        ctx->heap[i] = ctx->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    ctx->heap[i] = e;
    return 0;
}

static bool heap_pop(ir_redist_ctx *ctx, heap_entry *out)
{
    if (ctx->nheap == 0)
        return false;
    *out = ctx->heap[0];
    heap_entry last = ctx->heap[--ctx->nheap];
    size_t i = 0, n = ctx->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && entry_less(&ctx->heap[c + 1], &ctx->heap[c]))
            c++;
        if (!entry_less(&ctx->heap[c], &last))
            break;
        ctx->heap[i] = ctx->heap[c];
        i = c;
    }
    if (n)
        ctx->heap[i] = last;
    return true;
}

/* ------------------------------------------------- keys and lower bounds */

/* Strong key: each dim's number of axes, then all axis lists in dim order,
 * zero-padded to rank + nf bytes. */
static void strong_key(const problem *pb, const ir_redist_type *t, uint8_t *key)
{
    int p = pb->rank;
    memset(key, 0, (size_t)(pb->rank + pb->nf));
    for (int d = 0; d < pb->rank; d++) {
        key[d] = (uint8_t)t->dims[d].naxes;
        memcpy(key + p, t->dims[d].axes, (size_t)t->dims[d].naxes);
        p += t->dims[d].naxes;
    }
}

static void strong_decode(const problem *pb, const uint8_t *key, ir_redist_type *t)
{
    int p = pb->rank;
    t->rank = pb->rank;
    for (int d = 0; d < pb->rank; d++) {
        ir_redist_dim *dim = &t->dims[d];
        int64_t product = 1;
        dim->naxes = key[d];
        memcpy(dim->axes, key + p, (size_t)dim->naxes);
        p += dim->naxes;
        for (int k = 0; k < dim->naxes; k++)
            product *= pb->factors.sizes[dim->axes[k]];
        dim->global = pb->global[d];
        dim->local = dim->global / product;
    }
}

/* Lower bounds for A*, in dims that must still give up axes.  Each such dim
 * needs an all_gather or all_to_all of its own, costing at least the
 * smallest tile; one edge fixes at most one dim, so the bounds are
 * consistent and the searches stay exact.
 * Weak: dims with more pieces of some prime than the goal has. */
static int weak_dims_to_fix(const problem *pb, const uint8_t *key, const uint8_t *goal)
{
    int dims = 0;
    for (int d = 0; d < pb->rank; d++)
        for (int k = 0; k < pb->np; k++)
            if (key[d * pb->np + k] > goal[d * pb->np + k]) {
                dims++;
                break;
            }
    return dims;
}

/* Strong: dims whose axes are not a prefix of the goal's (only removing
 * axes from the end can fix them). */
static int strong_dims_to_fix(const ir_redist_type *t, const ir_redist_type *goal)
{
    int dims = 0;
    for (int d = 0; d < t->rank; d++) {
        const ir_redist_dim *have = &t->dims[d], *want = &goal->dims[d];
        dims +=
            have->naxes > want->naxes || memcmp(have->axes, want->axes, (size_t)have->naxes) != 0;
    }
    return dims;
}

/* The smallest tile of any type: every factor axis cutting some dim. */
static int64_t smallest_local(const problem *pb)
{
    int64_t elems = 1;
    for (int d = 0; d < pb->rank; d++)
        elems *= pb->global[d];
    for (int k = 0; k < pb->np; k++) {
        int usable = 0;
        for (int d = 0; d < pb->rank; d++)
            usable += pb->vmax[d][k];
        if (usable > pb->pcount[k])
            usable = pb->pcount[k];
        elems /= pb->power[k][usable];
    }
    return elems > 0 ? elems : 1;
}

/* ------------------------------------------------------------- edges */

/* A successor of the node being expanded, with its lower bound. */
typedef struct edge {
    const uint8_t *key;
    int64_t local, cost;
    int64_t floor; /* lower bound on the cost from there to the goal */
    int floor_steps;
    ir_redist_kind kind;
    int dim, to_dim;
    int64_t mult;
    int arg;
} edge;

/* Records a cheaper way to reach e->key from node `from`. */
static int relax(ir_redist_ctx *ctx, int32_t from, const edge *e)
{
    node_table *t = &ctx->graph;
    int64_t cost = t->nodes[from].cost + e->cost;
    if (e->floor > ctx->budget || cost > ctx->budget - e->floor)
        return 0;
    int64_t n = node_lookup(t, e->key, e->local);
    if (n < 0)
        return (int)n;
    search_node *u = &t->nodes[from], *v = &t->nodes[n];
    /* Strong dynslices slice one axis at a time; a run of them on one dim
     * is merged into one step afterwards, so it counts as one here. */
    bool continues_slice = ctx->space == STRONG && e->kind == IR_REDIST_DYNSLICE &&
                           u->parent >= 0 && u->kind == IR_REDIST_DYNSLICE && u->dim == e->dim;
    int32_t steps = u->steps + !continues_slice;
    if (v->closed || cost > v->cost || (cost == v->cost && steps >= v->steps))
        return 0;
    v->cost = cost;
    v->steps = steps;
    v->parent = from;
    v->kind = (int8_t)e->kind;
    v->dim = (int8_t)e->dim;
    v->to_dim = (int8_t)e->to_dim;
    v->mult = e->mult;
    v->arg = (uint8_t)e->arg;
    return heap_push(ctx, cost + e->floor, steps + e->floor_steps, (int32_t)n);
}

/* Advances `a` (amounts of each prime, a[k] <= bound[k]) to the next
 * non-zero vector in odometer order; false after the last one.  Start from
 * all zeros. */
static bool next_amounts(int np, const uint8_t *bound, uint8_t *a)
{
    for (int k = 0; k < np; k++) {
        if (a[k] < bound[k]) {
            a[k]++;
            return true;
        }
        a[k] = 0;
    }
    return false;
}

static int64_t amounts_product(const problem *pb, const uint8_t *a)
{
    int64_t m = 1;
    for (int k = 0; k < pb->np; k++)
        m *= pb->power[k][a[k]];
    return m;
}

/* Relaxes a weak successor: forward with the A* bound (REACH: the exact
 * distance to `to`, skipping types that cannot reach it within the budget),
 * backward (the DISTANCES walk) with none. */
static int relax_weak(ir_redist_ctx *ctx, int32_t from, const uint8_t *goal, edge *e)
{
    if (ctx->space == WEAK) {
        e->floor_steps = weak_dims_to_fix(&ctx->pb, e->key, goal);
        e->floor = e->floor_steps * ctx->min_local;
    } else if (ctx->space == REACH) {
        int64_t n = node_find(&ctx->distances, e->key);
        if (n < 0 || !ctx->distances.nodes[n].closed)
            return 0;
        e->floor_steps = 0;
        e->floor = ctx->distances.nodes[n].cost;
    } else {
        e->floor_steps = 0;
        e->floor = 0;
    }
    return relax(ctx, from, e);
}

/* Weak collectives at node `from` (section 7.2): for every dim, an
 * all_to_all of any sub-multiset of its prime pieces that the receiving dim
 * can divide, an all_gather of any sub-multiset within the height bound, and
 * a dynslice by any free primes that divide the tile.  The DISTANCES walk
 * goes against the arrows: the same moves, but a move that adds pieces
 * undoes an all_gather (costing the tile it starts from) and a move that
 * removes pieces undoes a dynslice (free). */
static int expand_weak(ir_redist_ctx *ctx, const uint8_t *goal, int32_t from)
{
    const problem *pb = &ctx->pb;
    const int np = pb->np, len = ctx->graph.key_len;
    const bool backward = ctx->space == DISTANCES;
    uint8_t key[MAX_KEY], next[MAX_KEY];
    uint8_t bound[MAX_PRIMES], amount[MAX_PRIMES], free_count[MAX_PRIMES];
    int64_t local = ctx->graph.nodes[from].local;
    edge e = {.key = next};
    int rc;
    /* a copy: the key array moves when nodes are added */
    memcpy(key, node_key(&ctx->graph, (size_t)from), (size_t)len);
    for (int k = 0; k < np; k++) {
        int used = 0;
        for (int d = 0; d < pb->rank; d++)
            used += key[d * np + k];
        free_count[k] = (uint8_t)(pb->pcount[k] - used);
    }
    for (int i = 0; i < pb->rank; i++) {
        const uint8_t *have = key + i * np;
        for (int j = 0; j < pb->rank; j++) { /* pieces move from dim i to dim j */
            if (j == i)
                continue;
            for (int k = 0; k < np; k++) {
                int room = pb->vmax[j][k] - key[j * np + k];
                bound[k] = (uint8_t)(have[k] < room ? have[k] : room);
            }
            memset(amount, 0, (size_t)np);
            while (next_amounts(np, bound, amount)) {
                memcpy(next, key, (size_t)len);
                for (int k = 0; k < np; k++) {
                    next[i * np + k] -= amount[k];
                    next[j * np + k] += amount[k];
                }
                e.local = e.cost = local;
                e.kind = IR_REDIST_ALL_TO_ALL;
                e.dim = backward ? j : i;
                e.to_dim = backward ? i : j;
                e.mult = amounts_product(pb, amount);
                if ((rc = relax_weak(ctx, from, goal, &e)))
                    return rc;
            }
        }
        memset(amount, 0, (size_t)np); /* dim i loses pieces: its tile grows */
        while (next_amounts(np, have, amount)) {
            int64_t mult = amounts_product(pb, amount);
            if (mult > pb->bound / local) /* the tile would outgrow max(in, out) */
                continue;
            memcpy(next, key, (size_t)len);
            for (int k = 0; k < np; k++)
                next[i * np + k] -= amount[k];
            e.local = local * mult;
            e.cost = backward ? 0 : local * mult;
            e.kind = backward ? IR_REDIST_DYNSLICE : IR_REDIST_ALL_GATHER;
            e.dim = i;
            e.to_dim = -1;
            e.mult = mult;
            if ((rc = relax_weak(ctx, from, goal, &e)))
                return rc;
        }
        for (int k = 0; k < np; k++) { /* dim i gains pieces: its tile shrinks */
            int room = pb->vmax[i][k] - have[k];
            bound[k] = (uint8_t)(free_count[k] < room ? free_count[k] : room);
        }
        memset(amount, 0, (size_t)np);
        while (next_amounts(np, bound, amount)) {
            int64_t mult = amounts_product(pb, amount);
            memcpy(next, key, (size_t)len);
            for (int k = 0; k < np; k++)
                next[i * np + k] += amount[k];
            e.local = local / mult;
            e.cost = backward ? local : 0;
            e.kind = backward ? IR_REDIST_ALL_GATHER : IR_REDIST_DYNSLICE;
            e.dim = i;
            e.to_dim = -1;
            e.mult = mult;
            if ((rc = relax_weak(ctx, from, goal, &e)))
                return rc;
        }
    }
    return 0;
}

/* Relaxes a strong successor `next`, bounded below by the exact weak cost
 * of its weak type (every strong step is a weak step of the same cost). */
static int relax_strong(ir_redist_ctx *ctx, int32_t from, const ir_redist_type *next, edge *e)
{
    const problem *pb = &ctx->pb;
    uint8_t weak[MAX_KEY];
    type_key(pb, next, weak);
    int64_t n = node_find(&ctx->distances, weak);
    if (n < 0 || !ctx->distances.nodes[n].closed)
        return 0; /* cannot reach `to` within the budget */
    e->floor_steps = strong_dims_to_fix(next, &pb->to);
    e->floor = ctx->distances.nodes[n].cost;
    if (e->floor < e->floor_steps * ctx->min_local)
        e->floor = e->floor_steps * ctx->min_local;
    strong_key(pb, next, (uint8_t *)e->key);
    return relax(ctx, from, e);
}

/* Strong collectives at node `from` (Figure 8 with several axes): for every
 * dim and every run of its last axes, an all_to_all to any dim that can
 * divide by them and an all_gather within the height bound; a dynslice by any
 * single free axis (runs of them are merged into one step later). */
static int expand_strong(ir_redist_ctx *ctx, int32_t from)
{
    const problem *pb = &ctx->pb;
    ir_redist_type t, next;
    uint8_t key[MAX_KEY];
    int64_t local = ctx->graph.nodes[from].local;
    edge e = {.key = key};
    int rc;
    strong_decode(pb, node_key(&ctx->graph, (size_t)from), &t);
    for (int i = 0; i < pb->rank; i++) {
        const ir_redist_dim *dim = &t.dims[i];
        int64_t mult = 1;
        for (int taken = 1; taken <= dim->naxes; taken++) {
            const uint8_t *run = dim->axes + dim->naxes - taken;
            mult *= pb->factors.sizes[*run];
            e.mult = mult;
            e.arg = taken;
            for (int j = 0; j < pb->rank; j++) {
                if (j == i || t.dims[j].local % mult != 0)
                    continue;
                next = t;
                next.dims[i].naxes -= taken;
                next.dims[i].local *= mult;
                memcpy(next.dims[j].axes + next.dims[j].naxes, run, (size_t)taken);
                next.dims[j].naxes += taken;
                next.dims[j].local /= mult;
                e.local = e.cost = local;
                e.kind = IR_REDIST_ALL_TO_ALL;
                e.dim = i;
                e.to_dim = j;
                if ((rc = relax_strong(ctx, from, &next, &e)))
                    return rc;
            }
            if (mult > pb->bound / local)
                continue;
            next = t;
            next.dims[i].naxes -= taken;
            next.dims[i].local *= mult;
            e.local = e.cost = local * mult;
            e.kind = IR_REDIST_ALL_GATHER;
            e.dim = i;
            e.to_dim = -1;
            if ((rc = relax_strong(ctx, from, &next, &e)))
                return rc;
        }
        for (int a = 0; a < pb->nf; a++) {
            int64_t size = pb->factors.sizes[a];
            bool used = false;
            for (int d = 0; d < pb->rank && !used; d++)
                for (int k = 0; k < t.dims[d].naxes && !used; k++)
                    used = t.dims[d].axes[k] == a;
            if (used || dim->local % size != 0)
                continue;
            next = t;
            next.dims[i].axes[next.dims[i].naxes++] = (uint8_t)a;
            next.dims[i].local /= size;
            e.local = local / size;
            e.cost = 0;
            e.kind = IR_REDIST_DYNSLICE;
            e.dim = i;
            e.to_dim = -1;
            e.mult = size;
            e.arg = a;
            if ((rc = relax_strong(ctx, from, &next, &e)))
                return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ the path */

/* Walks the parents from `goal` back to the start into ctx->path.  Strong
 * paths get their axes from the parents' types, and runs of dynslices on one
 * dim become one step. */
static int trace_path(ir_redist_ctx *ctx, int32_t goal)
{
    const problem *pb = &ctx->pb;
    node_table *t = &ctx->graph;
    size_t n = 0;
    for (int32_t v = goal; t->nodes[v].parent >= 0; v = t->nodes[v].parent)
        n++;
    if (GROW(ctx->path, ctx->path_cap, n + 1))
        return AP_ENOMEM;
    ctx->npath = n;
    for (int32_t v = goal; t->nodes[v].parent >= 0; v = t->nodes[v].parent) {
        const search_node *u = &t->nodes[v], *p = &t->nodes[u->parent];
        path_step *step = &ctx->path[--n];
        *step = (path_step){
            .kind = (ir_redist_kind)u->kind,
            .dim = u->dim,
            .to_dim = u->to_dim,
            .mult = u->mult,
            .cost = u->cost - p->cost,
            .local_after = u->local,
        };
        if (ctx->space == STRONG && u->kind == IR_REDIST_DYNSLICE) {
            step->naxes = 1;
            step->axes[0] = u->arg;
        } else if (ctx->space == STRONG) {
            ir_redist_type before;
            strong_decode(pb, node_key(t, (size_t)u->parent), &before);
            const ir_redist_dim *dim = &before.dims[u->dim];
            step->naxes = u->arg;
            memcpy(step->axes, dim->axes + dim->naxes - u->arg, u->arg);
        }
    }
    if (ctx->space == STRONG) {
        size_t kept = 0;
        for (size_t i = 0; i < ctx->npath; i++) {
            path_step *last = kept ? &ctx->path[kept - 1] : NULL, *step = &ctx->path[i];
            if (last && last->kind == IR_REDIST_DYNSLICE && step->kind == IR_REDIST_DYNSLICE &&
                last->dim == step->dim) {
                last->axes[last->naxes++] = step->axes[0];
                last->mult *= step->mult;
                last->local_after = step->local_after;
            } else {
                ctx->path[kept++] = *step;
            }
        }
        ctx->npath = kept;
    }
    return 0;
}

/* One search in ctx->space, costing at most ctx->budget.  WEAK and STRONG go
 * from `from` to `to` and leave the path in ctx->path (*found says whether
 * there is one); DISTANCES walks back from `to` until the budget, leaving the
 * costs in ctx->distances; REACH walks forward from `from`, leaving the costs
 * in ctx->graph.  The frontier is ordered by (cost + bound, steps,
 * discovery) so the result is deterministic.  Fails with AP_ENOMEM, or
 * AP_ELIMIT when a WEAK or DISTANCES search outgrows its node cap (STRONG
 * then just reports nothing found, REACH keeps the exact costs of the types
 * it closed). */
static int shortest_path(ir_redist_ctx *ctx, bool *found, ap_error *err)
{
    const problem *pb = &ctx->pb;
    node_table *t = &ctx->graph;
    uint8_t start_key[MAX_KEY], goal_key[MAX_KEY];
    int64_t start_local = pb->from_local;
    heap_entry top;
    int rc;

    *found = false;
    if (ctx->space == STRONG) {
        rc = table_reset(t, pb->rank + pb->nf, MAX_STRONG_NODES);
        strong_key(pb, &pb->from, start_key);
        strong_key(pb, &pb->to, goal_key);
    } else {
        rc = table_reset(t, pb->rank * pb->np, MAX_SEARCH_NODES);
        type_key(pb, &pb->from, start_key);
        type_key(pb, &pb->to, goal_key);
        if (ctx->space == DISTANCES) {
            memcpy(start_key, goal_key, (size_t)t->key_len);
            start_local = pb->to_local;
        }
    }
    if (rc)
        goto fail;
    ctx->nheap = 0;
    ctx->seq = 0;
    ctx->min_local = smallest_local(pb);
    int64_t start = node_lookup(t, start_key, start_local);
    if (start < 0) {
        rc = (int)start;
        goto fail;
    }
    t->nodes[start].cost = 0;
    if ((rc = heap_push(ctx, 0, 0, (int32_t)start)))
        goto fail;
    while (heap_pop(ctx, &top)) {
        search_node *u = &t->nodes[top.node];
        if (u->closed)
            continue; /* a stale entry: the node was reached more cheaply */
        u->closed = true;
        if ((ctx->space == WEAK || ctx->space == STRONG) &&
            memcmp(node_key(t, (size_t)top.node), goal_key, (size_t)t->key_len) == 0) {
            if ((rc = trace_path(ctx, top.node)))
                goto fail;
            *found = true;
            return 0;
        }
        rc = ctx->space == STRONG ? expand_strong(ctx, top.node)
                                  : expand_weak(ctx, goal_key, top.node);
        if (rc)
            goto fail;
    }
    return 0;
fail:
    if (rc == AP_ELIMIT && (ctx->space == STRONG || ctx->space == REACH))
        return 0;
    if (rc == AP_ELIMIT)
        return ap_error_set(err, AP_ELIMIT, "redistribution search visited more than %zu types",
                            t->cap);
    return ap_error_set(err, AP_ENOMEM, "out of memory in the redistribution search");
}

/* ================================================= lowering the weak path */

/* Each weak step gets concrete factor axes and replica groups (section 6,
 * Figure 10).  A state is a type read through a device map: map[L] is the
 * physical device at logical position L (row-major over the factor axes).
 * all_gather and all_to_all act on the last axes of a dim; to act on other
 * axes, the state is first re-read (move_axes_last) so that they come last:
 * the paper's new device map phi' under which every device keeps its tile. */

static int64_t coord(const problem *pb, int64_t logical, int f)
{
    return (logical / pb->stride[f]) % pb->factors.sizes[f];
}

/* Row-major index over the axes of `dim` of the device at `logical`: its
 * piece number, so its tile starts at piece * dim->local (Figure 7a). */
static int64_t piece_of(const problem *pb, const ir_redist_dim *dim, int64_t logical)
{
    int64_t t = 0;
    for (int k = 0; k < dim->naxes; k++)
        t = t * pb->factors.sizes[dim->axes[k]] + coord(pb, logical, dim->axes[k]);
    return t;
}

/* One number per tile: the row-major index of its pieces over all dims.
 * Two states with the same local type hold the same tiles on every device
 * iff these agree.  tile[device] for every physical device. */
static void device_tiles(const problem *pb, const lowered_state *s, int64_t *tile)
{
    for (int64_t l = 0; l < pb->ndev; l++) {
        int64_t id = 0;
        for (int d = 0; d < s->type.rank; d++) {
            const ir_redist_dim *dim = &s->type.dims[d];
            id = id * (dim->global / dim->local) + piece_of(pb, dim, l);
        }
        tile[s->map[l]] = id;
    }
}

static bool same_tiles(ir_redist_ctx *ctx, const lowered_state *a, const lowered_state *b)
{
    for (int d = 0; d < a->type.rank; d++)
        if (a->type.dims[d].local != b->type.dims[d].local)
            return false;
    device_tiles(&ctx->pb, a, ctx->tiles[0]);
    device_tiles(&ctx->pb, b, ctx->tiles[1]);
    return memcmp(ctx->tiles[0], ctx->tiles[1], (size_t)ctx->pb.ndev * sizeof(int64_t)) == 0;
}

/* Re-reads state `s` so that the axes `g` end dim `d`, in that order, the
 * others keeping theirs.  The device map changes, the tiles do not. */
static void move_axes_last(const problem *pb, lowered_state *s, int d, const uint8_t *g, int ng,
                           int32_t *scratch_map)
{
    ir_redist_dim *dim = &s->type.dims[d];
    uint8_t order[MAX_FACTORS];
    int n = 0;
    for (int k = 0; k < dim->naxes; k++) {
        bool moved = false;
        for (int m = 0; m < ng; m++)
            moved |= dim->axes[k] == g[m];
        if (!moved)
            order[n++] = dim->axes[k];
    }
    memcpy(order + n, g, (size_t)ng);
    if (memcmp(order, dim->axes, (size_t)dim->naxes) == 0)
        return;
    for (int64_t l = 0; l < pb->ndev; l++) {
        int64_t piece = piece_of(pb, dim, l), moved_to = l;
        for (int k = 0; k < dim->naxes; k++)
            moved_to -= coord(pb, l, dim->axes[k]) * pb->stride[dim->axes[k]];
        for (int k = dim->naxes - 1; k >= 0; k--) { /* the same piece number, new digits */
            int64_t size = pb->factors.sizes[order[k]];
            moved_to += (piece % size) * pb->stride[order[k]];
            piece /= size;
        }
        scratch_map[moved_to] = s->map[l];
    }
    memcpy(s->map, scratch_map, (size_t)pb->ndev * sizeof *s->map);
    memcpy(dim->axes, order, (size_t)dim->naxes);
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Replica groups of a collective over the factor axes `g` of state `s`:
 * devices that differ only along `g`, each group in row-major order over `g`
 * (a device's position is its piece index), groups sorted by first device. */
static void make_groups(ir_redist_ctx *ctx, const lowered_state *s, const uint8_t *g, int ng,
                        int32_t *groups)
{
    const problem *pb = &ctx->pb;
    int64_t n = 1, *offset = ctx->offsets, *row_key = ctx->sort_keys;
    offset[0] = 0;
    for (int k = 0; k < ng; k++) { /* g[0] major: later axes vary faster */
        int64_t size = pb->factors.sizes[g[k]];
        for (int64_t i = n - 1; i >= 0; i--)
            for (int64_t c = size - 1; c >= 0; c--)
                offset[i * size + c] = offset[i] + c * pb->stride[g[k]];
        n *= size;
    }
    int64_t rows = 0;
    for (int64_t l = 0; l < pb->ndev; l++) {
        bool base = true;
        for (int k = 0; k < ng && base; k++)
            base = coord(pb, l, g[k]) == 0;
        if (!base)
            continue;
        for (int64_t pos = 0; pos < n; pos++)
            ctx->scratch_groups[rows * n + pos] = s->map[l + offset[pos]];
        row_key[rows] = ((int64_t)ctx->scratch_groups[rows * n] << 32) | rows;
        rows++;
    }
    qsort(row_key, (size_t)rows, sizeof *row_key, compare_int64);
    for (int64_t r = 0; r < rows; r++)
        memcpy(groups + r * n, ctx->scratch_groups + (row_key[r] & 0xffffffff) * n,
               (size_t)n * sizeof *groups);
}

static int position_in(const ir_redist_dim *dim, int axis)
{
    for (int k = 0; k < dim->naxes; k++)
        if (dim->axes[k] == axis)
            return k;
    return -1;
}

static bool used_in(const ir_redist_type *t, int axis)
{
    for (int d = 0; d < t->rank; d++)
        if (position_in(&t->dims[d], axis) >= 0)
            return true;
    return false;
}

/* Scores of the axis choices: lower is taken first. */
enum { PREFER = 0, NEUTRAL = 1000, AVOID = 2000, LAST = 1000 };

/* Takes from `pool` axes whose sizes multiply to `mult`: for each prime,
 * the pool entries of that size with the lowest score (then the earliest).
 * Writes them to `out` sorted by `order` and returns how many, or -1 if the
 * pool cannot make `mult` (a bug in the search). */
static int pick_axes(const problem *pb, const uint8_t *pool, int npool, const int *score,
                     const int *order, int64_t mult, uint8_t *out)
{
    int need[MAX_PRIMES] = {0}, by_score[MAX_FACTORS], taken[MAX_FACTORS], n = 0;
    for (int k = 0; k < pb->np; k++)
        for (int64_t m = mult; m % pb->prime[k] == 0; m /= pb->prime[k])
            need[k]++;
    for (int i = 0; i < npool; i++) { /* insertion sort: stable, pools are tiny */
        int j = i;
        for (; j > 0 && score[by_score[j - 1]] > score[i]; j--)
            by_score[j] = by_score[j - 1];
        by_score[j] = i;
    }
    for (int i = 0; i < npool; i++) {
        int k = pb->fprime[pool[by_score[i]]];
        if (need[k] > 0) {
            need[k]--;
            int j = n++;
            for (; j > 0 && order[taken[j - 1]] > order[by_score[i]]; j--)
                taken[j] = taken[j - 1];
            taken[j] = by_score[i];
        }
    }
    for (int k = 0; k < pb->np; k++)
        if (need[k])
            return -1;
    for (int i = 0; i < n; i++)
        out[i] = pool[taken[i]];
    return n;
}

/* The type after a step whose axes `g` already end the dim they leave. */
static void apply_step(ir_redist_type *t, const path_step *w, const uint8_t *g, int ng)
{
    ir_redist_dim *dim = &t->dims[w->dim];
    switch (w->kind) {
    case IR_REDIST_ALL_GATHER:
        dim->naxes -= ng;
        dim->local *= w->mult;
        break;
    case IR_REDIST_ALL_TO_ALL: {
        ir_redist_dim *to = &t->dims[w->to_dim];
        dim->naxes -= ng;
        dim->local *= w->mult;
        memcpy(to->axes + to->naxes, g, (size_t)ng);
        to->naxes += ng;
        to->local /= w->mult;
        break;
    }
    case IR_REDIST_DYNSLICE:
        memcpy(dim->axes + dim->naxes, g, (size_t)ng);
        dim->naxes += ng;
        dim->local /= w->mult;
        break;
    case IR_REDIST_COLLECTIVE_PERMUTE:
        break;
    }
}

/* The axes a step takes from the state on its side, chosen so that the
 * state looks like `bias` (the other end of the path): an all_gather (or,
 * backward, a dynslice undone) gives up axes `bias` does not have in that
 * dim, an all_to_all moves axes `bias` wants in the receiving dim, a dynslice
 * (or, backward, an all_gather undone) takes the free axes `bias` has in that
 * dim, in its order (section 7.3).  Ties go to the axes nearest the end of the
 * dim, which need no re-reading of the device map. */
typedef enum { TAKE_FROM_DIM, TAKE_FREE } take_from;

static int choose_axes(const problem *pb, const lowered_state *s, take_from source, int dim,
                       int want_dim, int avoid_dim, const ir_redist_type *bias, int64_t mult,
                       uint8_t *out)
{
    uint8_t pool[MAX_FACTORS];
    int score[MAX_FACTORS], order[MAX_FACTORS], n = 0;
    const ir_redist_dim *have = &s->type.dims[dim];
    if (source == TAKE_FROM_DIM) {
        for (int p = 0; p < have->naxes; p++) {
            int a = have->axes[p];
            int want = want_dim >= 0 ? position_in(&bias->dims[want_dim], a) : -1;
            int distance = have->naxes - 1 - p;
            pool[n] = (uint8_t)a;
            if (want >= 0)
                score[n] = PREFER + distance;
            else if (avoid_dim >= 0 && position_in(&bias->dims[avoid_dim], a) >= 0)
                score[n] = AVOID + distance;
            else
                score[n] = NEUTRAL + distance;
            order[n] = want >= 0 ? want : LAST + p;
            n++;
        }
    } else {
        for (int a = 0; a < pb->nf; a++) {
            if (used_in(&s->type, a))
                continue;
            int want = position_in(&bias->dims[want_dim], a);
            pool[n] = (uint8_t)a;
            score[n] = want >= 0 ? PREFER : used_in(bias, a) ? AVOID : NEUTRAL;
            order[n] = want >= 0 ? want : LAST + a;
            n++;
        }
    }
    return pick_axes(pb, pool, n, score, order, mult, out);
}

/* Lowers weak step `w` forward: re-reads `before` in place so that the
 * chosen axes come last, writes the groups, and fills `after`. */
static int lower_forward(ir_redist_ctx *ctx, const path_step *w, lowered_state *before,
                         lowered_step *step, lowered_state *after)
{
    const problem *pb = &ctx->pb;
    const ir_redist_type *bias = &pb->to;
    int ng;
    switch (w->kind) {
    case IR_REDIST_ALL_GATHER:
        ng = choose_axes(pb, before, TAKE_FROM_DIM, w->dim, -1, w->dim, bias, w->mult, step->axes);
        break;
    case IR_REDIST_ALL_TO_ALL:
        ng = choose_axes(pb, before, TAKE_FROM_DIM, w->dim, w->to_dim, w->dim, bias, w->mult,
                         step->axes);
        break;
    default:
        ng = choose_axes(pb, before, TAKE_FREE, w->dim, w->dim, -1, bias, w->mult, step->axes);
        break;
    }
    if (ng < 0)
        return AP_EINTERNAL;
    step->naxes = ng;
    if (w->kind != IR_REDIST_DYNSLICE)
        move_axes_last(pb, before, w->dim, step->axes, ng, ctx->scratch_map);
    make_groups(ctx, before, step->axes, ng, step->groups);
    after->type = before->type;
    apply_step(&after->type, w, step->axes, ng);
    memcpy(after->map, before->map, (size_t)pb->ndev * sizeof *after->map);
    return 0;
}

/* Lowers weak step `w` backward: from the state after it, finds a state
 * `before` from which the step, with the chosen axes already last, leads to
 * `after` (re-read: `after` itself is left alone, it is what the next step
 * was computed from), and writes the groups. */
static int lower_backward(ir_redist_ctx *ctx, const path_step *w, const lowered_state *after,
                          lowered_step *step, lowered_state *before)
{
    const problem *pb = &ctx->pb;
    const ir_redist_type *bias = &pb->from;
    ir_redist_dim *dim, *to;
    int ng;
    before->type = after->type;
    memcpy(before->map, after->map, (size_t)pb->ndev * sizeof *before->map);
    switch (w->kind) {
    case IR_REDIST_DYNSLICE: /* undo: gather the sliced axes back */
        ng = choose_axes(pb, before, TAKE_FROM_DIM, w->dim, -1, w->dim, bias, w->mult, step->axes);
        if (ng < 0)
            return AP_EINTERNAL;
        move_axes_last(pb, before, w->dim, step->axes, ng, ctx->scratch_map);
        dim = &before->type.dims[w->dim];
        dim->naxes -= ng;
        dim->local *= w->mult;
        break;
    case IR_REDIST_ALL_GATHER: /* undo: slice free axes in */
        ng = choose_axes(pb, before, TAKE_FREE, w->dim, w->dim, -1, bias, w->mult, step->axes);
        if (ng < 0)
            return AP_EINTERNAL;
        dim = &before->type.dims[w->dim];
        memcpy(dim->axes + dim->naxes, step->axes, (size_t)ng);
        dim->naxes += ng;
        dim->local /= w->mult;
        break;
    default: /* all_to_all undone: move the axes back from to_dim */
        ng = choose_axes(pb, before, TAKE_FROM_DIM, w->to_dim, w->dim, w->to_dim, bias, w->mult,
                         step->axes);
        if (ng < 0)
            return AP_EINTERNAL;
        move_axes_last(pb, before, w->to_dim, step->axes, ng, ctx->scratch_map);
        to = &before->type.dims[w->to_dim];
        dim = &before->type.dims[w->dim];
        to->naxes -= ng;
        to->local *= w->mult;
        memcpy(dim->axes + dim->naxes, step->axes, (size_t)ng);
        dim->naxes += ng;
        dim->local /= w->mult;
        break;
    }
    step->naxes = ng;
    make_groups(ctx, before, step->axes, ng, step->groups);
    return 0;
}

/* Pairs (source, target) of a permutation from state `a` to state `b` with
 * the same local type, one per target device, by target.  A device that
 * already holds the tile it needs keeps it; the other targets of each tile
 * get the other holders of that tile, lowest to lowest. */
static void permute_pairs(ir_redist_ctx *ctx, const lowered_state *a, const lowered_state *b,
                          int32_t *pairs)
{
    const problem *pb = &ctx->pb;
    int64_t *have = ctx->tiles[0], *want = ctx->tiles[1];
    int64_t *sources = ctx->sort_keys, *targets = ctx->offsets, nmoving = 0;
    const int64_t device_bits = 20, device_mask = ((int64_t)1 << device_bits) - 1;
    device_tiles(pb, a, have);
    device_tiles(pb, b, want);
    for (int64_t d = 0; d < pb->ndev; d++) {
        pairs[2 * d] = (int32_t)d;
        pairs[2 * d + 1] = (int32_t)d;
        if (have[d] == want[d])
            continue;
        /* tile numbers are below ndev <= 2^16 and so are devices: one key */
        sources[nmoving] = (have[d] << device_bits) | d;
        targets[nmoving] = (want[d] << device_bits) | d;
        nmoving++;
    }
    /* Both lists hold every tile equally often, so sorted by tile they line
     * up tile by tile. */
    qsort(sources, (size_t)nmoving, sizeof *sources, compare_int64);
    qsort(targets, (size_t)nmoving, sizeof *targets, compare_int64);
    for (int64_t i = 0; i < nmoving; i++)
        pairs[2 * (targets[i] & device_mask)] = (int32_t)(sources[i] & device_mask);
}

/* Tile size (elements) at point k of the path: 0 is `from`. */
static int64_t local_at(const ir_redist_ctx *ctx, size_t k)
{
    return k == 0 ? ctx->pb.from_local : ctx->path[k - 1].local_after;
}

/* Makes room for the lowering of a path of `n` steps and carves the maps,
 * groups and scratch arrays out of two buffers. */
static int reserve_lowering(ir_redist_ctx *ctx, size_t n)
{
    size_t ndev = (size_t)ctx->pb.ndev;
    size_t nints = (2 * (n + 1) + 2 * n + 5) * ndev, nwide = 4 * ndev;
    for (int side = 0; side < 2; side++)
        if (GROW(ctx->states[side], ctx->states_cap[side], n + 1) ||
            GROW(ctx->lsteps[side], ctx->lsteps_cap[side], n + 1))
            return AP_ENOMEM;
    if (GROW(ctx->ints, ctx->ints_cap, nints) || GROW(ctx->wide, ctx->wide_cap, nwide))
        return AP_ENOMEM;
    int32_t *next = ctx->ints;
    for (int side = 0; side < 2; side++) {
        for (size_t k = 0; k <= n; k++, next += ndev)
            ctx->states[side][k].map = next;
        for (size_t k = 0; k < n; k++, next += ndev)
            ctx->lsteps[side][k].groups = next;
    }
    ctx->identity = next;
    ctx->scratch_map = next + ndev;
    ctx->scratch_groups = next + 2 * ndev;
    ctx->pairs = next + 3 * ndev; /* 2 * ndev */
    ctx->tiles[0] = ctx->wide;
    ctx->tiles[1] = ctx->wide + ndev;
    ctx->offsets = ctx->wide + 2 * ndev;
    ctx->sort_keys = ctx->wide + 3 * ndev;
    for (size_t d = 0; d < ndev; d++)
        ctx->identity[d] = (int32_t)d;
    return 0;
}

/* Lowers ctx->path forward from `from` and backward from `to`, then picks
 * the join: the latest point where both lowerings hold the same tiles on
 * every device (no permutation), else one collective_permute at the point
 * with the smallest tiles, latest on ties (section 7.3). */
static int lower_path(ir_redist_ctx *ctx, ap_error *err)
{
    const problem *pb = &ctx->pb;
    size_t n = ctx->npath, ndev = (size_t)pb->ndev;
    if (reserve_lowering(ctx, n))
        return ap_error_set(err, AP_ENOMEM, "out of memory lowering a redistribution");
    lowered_state *fwd = ctx->states[FORWARD], *bwd = ctx->states[BACKWARD];

    fwd[0].type = pb->from;
    memcpy(fwd[0].map, ctx->identity, ndev * sizeof *fwd[0].map);
    for (size_t k = 1; k <= n; k++)
        if (lower_forward(ctx, &ctx->path[k - 1], &fwd[k - 1], &ctx->lsteps[FORWARD][k - 1],
                          &fwd[k]))
            return ap_error_set(err, AP_EINTERNAL, "no axes to lower step %zu forward", k);
    bwd[n].type = pb->to;
    memcpy(bwd[n].map, ctx->identity, ndev * sizeof *bwd[n].map);
    for (size_t k = n; k >= 1; k--)
        if (lower_backward(ctx, &ctx->path[k - 1], &bwd[k], &ctx->lsteps[BACKWARD][k - 1],
                           &bwd[k - 1]))
            return ap_error_set(err, AP_EINTERNAL, "no axes to lower step %zu backward", k);

    for (size_t k = n + 1; k-- > 0;)
        if (same_tiles(ctx, &fwd[k], &bwd[k])) {
            ctx->join = k;
            ctx->permute = false;
            return 0;
        }
    size_t best = n;
    for (size_t k = n + 1; k-- > 0;)
        if (local_at(ctx, k) < local_at(ctx, best))
            best = k;
    ctx->join = best;
    ctx->permute = true;
    permute_pairs(ctx, &fwd[best], &bwd[best], ctx->pairs);
    return 0;
}

/* Lowers a path of the strong search: every step acts on the last axes of
 * its dim, the device map stays the identity and the path ends exactly at
 * `to`, so no permutation. */
static int lower_strong(ir_redist_ctx *ctx, ap_error *err)
{
    const problem *pb = &ctx->pb;
    size_t n = ctx->npath, ndev = (size_t)pb->ndev;
    if (reserve_lowering(ctx, n))
        return ap_error_set(err, AP_ENOMEM, "out of memory lowering a redistribution");
    lowered_state *fwd = ctx->states[FORWARD], *bwd = ctx->states[BACKWARD];
    fwd[0].type = pb->from;
    memcpy(fwd[0].map, ctx->identity, ndev * sizeof *fwd[0].map);
    for (size_t k = 1; k <= n; k++) {
        const path_step *w = &ctx->path[k - 1];
        lowered_step *step = &ctx->lsteps[FORWARD][k - 1];
        step->naxes = w->naxes;
        memcpy(step->axes, w->axes, (size_t)w->naxes);
        make_groups(ctx, &fwd[k - 1], w->axes, w->naxes, step->groups);
        fwd[k].type = fwd[k - 1].type;
        apply_step(&fwd[k].type, w, w->axes, w->naxes);
        memcpy(fwd[k].map, ctx->identity, ndev * sizeof *fwd[k].map);
    }
    bwd[n].type = pb->to;
    memcpy(bwd[n].map, ctx->identity, ndev * sizeof *bwd[n].map);
    if (!ir_redist_type_equal(&fwd[n].type, &pb->to))
        return ap_error_set(err, AP_EINTERNAL, "the strong path does not end at the target type");
    ctx->join = n;
    ctx->permute = false;
    return 0;
}

/* After a REACH search: the weak type where one permutation is cheapest,
 * i.e. the least cost from `from` + its tile + cost to `to` (ties: the
 * smaller tile, then the later point, then discovery order).  Writes the
 * path through it to ctx->detour and its total to *total (elements);
 * *total is INT64_MAX when no type qualifies. */
static int best_permute_point(ir_redist_ctx *ctx, int64_t *total)
{
    node_table *t = &ctx->graph, *dist = &ctx->distances;
    int64_t best = -1, best_local = 0, best_from = 0, best_to = -1;
    *total = INT64_MAX;
    for (size_t n = 0; n < t->nnodes; n++) {
        const search_node *v = &t->nodes[n];
        if (!v->closed)
            continue;
        int64_t m = node_find(dist, node_key(t, n));
        if (m < 0 || !dist->nodes[m].closed)
            continue;
        int64_t sum = v->cost + v->local + dist->nodes[m].cost;
        if (sum < *total || (sum == *total && (v->local < best_local ||
                                               (v->local == best_local && v->cost > best_from)))) {
            *total = sum;
            best = (int64_t)n;
            best_local = v->local;
            best_from = v->cost;
            best_to = m;
        }
    }
    if (best < 0)
        return 0;
    /* trace_path fills ctx->path: lend it the detour's buffer */
    path_step *kept = ctx->path;
    size_t kept_n = ctx->npath, kept_cap = ctx->path_cap;
    ctx->path = ctx->detour;
    ctx->path_cap = ctx->detour_cap;
    int rc = trace_path(ctx, (int32_t)best);
    size_t n = ctx->npath;
    for (int64_t v = best_to; rc == 0 && dist->nodes[v].parent >= 0; v = dist->nodes[v].parent) {
        /* DISTANCES nodes record the forward step to their parent */
        const search_node *u = &dist->nodes[v], *p = &dist->nodes[u->parent];
        if (GROW(ctx->path, ctx->path_cap, n + 1)) {
            rc = AP_ENOMEM;
            break;
        }
        ctx->path[n++] = (path_step){
            .kind = (ir_redist_kind)u->kind,
            .dim = u->dim,
            .to_dim = u->to_dim,
            .mult = u->mult,
            .cost = u->cost - p->cost,
            .local_after = p->local,
        };
    }
    ctx->detour = ctx->path;
    ctx->detour_cap = ctx->path_cap;
    ctx->ndetour = n;
    ctx->path = kept;
    ctx->npath = kept_n;
    ctx->path_cap = kept_cap;
    return rc;
}

/* The synthesis.  The paper's weak search and lowering give a plan at the
 * weak optimum W whenever its lowering needs no permutation.  Otherwise the
 * cheapest plan is either one with one permutation, at the weak type s
 * that minimizes d(from, s) + tile(s) + d(s, to) (often not on the W path:
 * a dearer path can pass through smaller tiles), or one without any, which
 * the strong search finds when it costs no more (section 7.3 notes that
 * permutations are hard to cost: on ties the plan without one wins). */
static int synthesize_path(ir_redist_ctx *ctx, ap_error *err)
{
    bool found;
    int rc;
    ctx->space = WEAK;
    ctx->budget = INT64_MAX;
    if ((rc = shortest_path(ctx, &found, err)))
        return rc;
    if (!found) /* Theorem 4.8: over prime axes a memory-bounded path exists */
        return ap_error_set(err, AP_EINTERNAL, "redistribution search found no path");
    if ((rc = lower_path(ctx, err)) || !ctx->permute)
        return rc;
    int64_t total = local_at(ctx, ctx->join);
    for (size_t k = 0; k < ctx->npath; k++)
        total += ctx->path[k].cost;
    /* The distances go into their own table, the other searches into the
     * graph table: the weak path and its lowering stay as they are. */
    ctx->budget = total;
    ctx->space = DISTANCES;
    node_table swap = ctx->graph;
    ctx->graph = ctx->distances;
    rc = shortest_path(ctx, &found, err);
    ctx->distances = ctx->graph;
    ctx->graph = swap;
    if (rc)
        return rc;
    /* A permutation costs at least the smallest tile of any type: when the
     * W path already permutes at that size, no detour can be cheaper. */
    int64_t detour_total = INT64_MAX;
    if (local_at(ctx, ctx->join) > ctx->min_local) {
        ctx->space = REACH;
        if ((rc = shortest_path(ctx, &found, err)))
            return rc;
        if ((rc = best_permute_point(ctx, &detour_total)))
            return ap_error_set(err, AP_ENOMEM, "out of memory in the redistribution search");
        if (detour_total < ctx->budget)
            ctx->budget = detour_total;
    }
    ctx->space = STRONG;
    if ((rc = shortest_path(ctx, &found, err)))
        return rc;
    if (found)
        return lower_strong(ctx, err);
    if (detour_total >= total)
        return 0; /* the W path's own permutation is as cheap */
    path_step *tmp = ctx->path;
    size_t tmp_cap = ctx->path_cap;
    ctx->path = ctx->detour;
    ctx->path_cap = ctx->detour_cap;
    ctx->npath = ctx->ndetour;
    ctx->detour = tmp;
    ctx->detour_cap = tmp_cap;
    return lower_path(ctx, err);
}

/* ============================================================== plans */

/* The device map stored in the plan: shared with the identity when equal. */
static const int32_t *plan_map(ir_redist_plan *plan, const int32_t *map)
{
    if (memcmp(map, plan->identity_map, (size_t)plan->ndevices * sizeof *map) == 0)
        return plan->identity_map;
    return ap_arena_memdup(&plan->arena, map, (size_t)plan->ndevices * sizeof *map);
}

static void baseline_of(const ir_redist_type *from, const ir_redist_type *to, int64_t elem_bytes,
                        ir_redist_baseline *out)
{
    int order[IR_REDIST_MAX_RANK], n = 0;
    for (int d = 0; d < from->rank; d++) {
        int64_t pieces = from->dims[d].global / from->dims[d].local;
        if (pieces == 1)
            continue;
        int j = n++; /* fewest pieces first: the cheapest order to gather in */
        for (; j > 0 && from->dims[order[j - 1]].global / from->dims[order[j - 1]].local > pieces;
             j--)
            order[j] = order[j - 1];
        order[j] = d;
    }
    int64_t local = ir_redist_type_local_size(from), peak = local, cost = 0;
    out->nsteps = n;
    for (int i = 0; i < n; i++) {
        local *= from->dims[order[i]].global / from->dims[order[i]].local;
        cost += local;
        peak = local > peak ? local : peak;
    }
    for (int d = 0; d < to->rank; d++)
        out->nsteps += to->dims[d].global != to->dims[d].local;
    int64_t to_local = ir_redist_type_local_size(to);
    peak = to_local > peak ? to_local : peak;
    out->cost_bytes = cost * elem_bytes;
    out->peak_local_bytes = peak * elem_bytes;
}

static void fill_step(ir_redist_plan *plan, ir_redist_step *step, const path_step *w,
                      const lowered_step *lowered, const lowered_state *after)
{
    step->kind = w->kind;
    step->dim = w->dim;
    step->to_dim = w->kind == IR_REDIST_ALL_TO_ALL ? w->to_dim : -1;
    step->naxes = lowered->naxes;
    memcpy(step->axes, lowered->axes, (size_t)lowered->naxes);
    step->group_size = w->mult;
    step->ngroups = plan->ndevices / w->mult;
    step->groups = ap_arena_memdup(&plan->arena, lowered->groups,
                                   (size_t)plan->ndevices * sizeof *lowered->groups);
    step->type = after->type;
    step->device_map = plan_map(plan, after->map);
    step->bytes = w->cost * plan->elem_bytes;
    step->local_bytes = w->local_after * plan->elem_bytes;
}

/* Copies the joined lowering into a new plan.  Each step's type and device
 * map are those the next step was computed from, so that a step's axes are
 * found last in the type printed on the line before it. */
static int build_plan(ir_redist_ctx *ctx, ir_redist_plan **out, ap_error *err)
{
    const problem *pb = &ctx->pb;
    size_t n = ctx->npath, join = ctx->join, ndev = (size_t)pb->ndev;
    size_t nsteps = n + ctx->permute, s = 0;
    const lowered_state *fwd = ctx->states[FORWARD], *bwd = ctx->states[BACKWARD];
    ir_redist_plan *plan = ap_calloc(1, sizeof *plan);
    ir_redist_step *steps;
    if (!plan)
        goto nomem;
    ap_arena_init(&plan->arena, 1024 + nsteps * (sizeof *steps + 8 * ndev) + 4 * ndev);
    plan->factors = pb->factors;
    memcpy(plan->factor_axis, pb->factor_axis, sizeof plan->factor_axis);
    plan->ndevices = pb->ndev;
    plan->elem_bytes = pb->elem_bytes;
    plan->from = pb->from;
    plan->to = pb->to;
    plan->permute_step = -1;
    plan->identity_map = ap_arena_memdup(&plan->arena, ctx->identity, ndev * sizeof *ctx->identity);
    steps = ap_arena_zalloc(&plan->arena, (nsteps ? nsteps : 1) * sizeof *steps);
    if (!plan->identity_map || !steps)
        goto nomem;

    for (size_t k = 1; k <= join; k++) {
        const lowered_state *after = k < join || ctx->permute ? &fwd[k] : &bwd[k];
        fill_step(plan, &steps[s++], &ctx->path[k - 1], &ctx->lsteps[FORWARD][k - 1], after);
    }
    if (ctx->permute) {
        ir_redist_step *p = &steps[s];
        plan->permute_step = (int)s++;
        p->kind = IR_REDIST_COLLECTIVE_PERMUTE;
        p->dim = p->to_dim = -1;
        p->group_size = 1;
        p->npairs = pb->ndev;
        p->pairs = ap_arena_memdup(&plan->arena, ctx->pairs, 2 * ndev * sizeof *ctx->pairs);
        p->type = bwd[join].type;
        p->device_map = plan_map(plan, bwd[join].map);
        p->bytes = local_at(ctx, join) * pb->elem_bytes;
        p->local_bytes = p->bytes;
        if (!p->pairs)
            goto nomem;
    }
    for (size_t k = join + 1; k <= n; k++)
        fill_step(plan, &steps[s++], &ctx->path[k - 1], &ctx->lsteps[BACKWARD][k - 1], &bwd[k]);

    plan->steps = steps;
    plan->nsteps = (int)nsteps;
    plan->from_local_bytes = pb->from_local * pb->elem_bytes;
    plan->to_local_bytes = pb->to_local * pb->elem_bytes;
    plan->peak_local_bytes = plan->from_local_bytes;
    for (size_t i = 0; i < nsteps; i++) {
        if (!steps[i].groups && steps[i].kind != IR_REDIST_COLLECTIVE_PERMUTE)
            goto nomem;
        if (!steps[i].device_map)
            goto nomem;
        plan->cost_bytes += steps[i].bytes;
        if (steps[i].local_bytes > plan->peak_local_bytes)
            plan->peak_local_bytes = steps[i].local_bytes;
    }
    baseline_of(&pb->from, &pb->to, pb->elem_bytes, &plan->baseline);
    *out = plan;
    return 0;
nomem:
    ir_redist_plan_free(plan);
    return ap_error_set(err, AP_ENOMEM, "out of memory building a redistribution plan");
}

int ir_redist_synthesize(ir_redist_ctx *ctx, const ir_mesh *mesh, const ir_redist_type *from,
                         const ir_redist_type *to, int elem_bytes, ir_redist_plan **out,
                         ap_error *err)
{
    ir_redist_ctx *own = NULL;
    int rc;
    *out = NULL;
    if (!ctx) {
        if ((rc = ir_redist_ctx_new(&own, err)))
            return rc;
        ctx = own;
    }
    if (!(rc = setup_problem(&ctx->pb, mesh, from, to, elem_bytes, err)) &&
        !(rc = synthesize_path(ctx, err)))
        rc = build_plan(ctx, out, err);
    ir_redist_ctx_free(own);
    return rc;
}

int ir_redist_plan_make(const ir_mesh *mesh, const ir_redist_type *from,
                        const ir_redist_type *to, int elem_bytes, ir_redist_plan **out,
                        ap_error *err)
{
    return ir_redist_synthesize(NULL, mesh, from, to, elem_bytes, out, err);
}

void ir_redist_plan_free(ir_redist_plan *plan)
{
    if (!plan)
        return;
    ap_arena_free(&plan->arena);
    ap_free(plan);
}

int ir_redist_baseline_of(const ir_mesh *mesh, const ir_redist_type *from,
                          const ir_redist_type *to, int elem_bytes, ir_redist_baseline *out,
                          ap_error *err)
{
    problem pb;
    int rc = setup_problem(&pb, mesh, from, to, elem_bytes, err);
    if (rc)
        return rc;
    baseline_of(from, to, pb.elem_bytes, out);
    return 0;
}

void ir_redist_step_format(const ir_redist_plan *plan, const ir_redist_step *step, ap_buf *out)
{
    const char *name = ir_redist_kind_name(step->kind);
    switch (step->kind) {
    case IR_REDIST_ALL_TO_ALL:
        ap_buf_printf(out, "%s(dims %d->%d, axes ", name, step->dim, step->to_dim);
        break;
    case IR_REDIST_COLLECTIVE_PERMUTE: {
        int64_t moving = 0;
        for (int64_t i = 0; i < step->npairs; i++)
            moving += step->pairs[2 * i] != step->pairs[2 * i + 1];
        ap_buf_printf(out, "%s(%lld of %lld devices receive a new tile)", name, (long long)moving,
                      (long long)plan->ndevices);
        break;
    }
    default:
        ap_buf_printf(out, "%s(dim %d, axes ", name, step->dim);
        break;
    }
    if (step->kind != IR_REDIST_COLLECTIVE_PERMUTE) {
        put_axes(out, &plan->factors, step->axes, step->naxes);
        ap_buf_putc(out, ')');
    }
    ap_buf_puts(out, "  ");
    ir_redist_format_type(&plan->factors, &step->type, out);
    ap_buf_printf(out, "  %lld bytes", (long long)step->bytes);
}

void ir_redist_plan_format(const ir_redist_plan *plan, ap_buf *out)
{
    for (int s = 0; s < plan->nsteps; s++) {
        ir_redist_step_format(plan, &plan->steps[s], out);
        ap_buf_putc(out, '\n');
    }
}

/* ============================================================ checking */

/* Written apart from the search and the lowering on purpose: it knows only
 * the base offset maps of types (Figure 7a) and what each StableHLO
 * collective does with the tiles of the devices in a replica group. */

/* Offsets of every physical device's tile, rank numbers per device, from a
 * type over `factors` read through `map`. */
static int device_offsets(const ir_mesh *factors, const ir_redist_type *t,
                          const int32_t *map, int64_t ndev, int64_t *offsets, uint8_t *seen,
                          const char *what, ap_error *err)
{
    int64_t stride[IR_MESH_MAX_FACTORS], s = 1;
    for (int f = factors->n_axes - 1; f >= 0; f--) {
        stride[f] = s;
        s *= factors->sizes[f];
    }
    memset(seen, 0, (size_t)ndev);
    for (int64_t logical = 0; logical < ndev; logical++) {
        int64_t device = map[logical];
        if (device < 0 || device >= ndev || seen[device])
            return ap_error_set(err, AP_ETYPE, "the device map of %s is not a permutation", what);
        seen[device] = 1;
        for (int d = 0; d < t->rank; d++) {
            const ir_redist_dim *dim = &t->dims[d];
            int64_t piece = 0;
            for (int k = 0; k < dim->naxes; k++) {
                int f = dim->axes[k];
                piece = piece * factors->sizes[f] + (logical / stride[f]) % factors->sizes[f];
            }
            offsets[device * t->rank + d] = piece * dim->local;
        }
    }
    return 0;
}

/* The tiles every device must hold after `step`, from the tiles before it
 * (in_off), into expect; checks the groups' preconditions on the way. */
static int simulate_step(const ir_redist_step *step, const ir_redist_type *in,
                         const ir_redist_type *out, int64_t ndev, const int64_t *in_off,
                         int64_t *expect, uint8_t *seen, ap_error *err)
{
    const char *name = ir_redist_kind_name(step->kind);
    const int rank = in->rank, i = step->dim, j = step->to_dim;
    if (ndev < 1 || ndev > IR_MESH_MAX_DEVICES)
        return ap_error_set(err, AP_ETYPE, "a mesh of %lld devices", (long long)ndev);
    memset(seen, 0, (size_t)ndev);
    if (step->kind == IR_REDIST_COLLECTIVE_PERMUTE) {
        if (step->npairs != ndev || !step->pairs)
            return ap_error_set(err, AP_ETYPE, "%s: %lld pairs for %lld devices", name,
                                (long long)step->npairs, (long long)ndev);
        for (int64_t p = 0; p < ndev; p++) { /* sources distinct */
            int64_t src = step->pairs[2 * p];
            if (src < 0 || src >= ndev || seen[src])
                return ap_error_set(err, AP_ETYPE, "%s: bad or repeated source %lld", name,
                                    (long long)src);
            seen[src] = 1;
        }
        memset(seen, 0, (size_t)ndev);
        for (int64_t p = 0; p < ndev; p++) {
            int64_t src = step->pairs[2 * p], dst = step->pairs[2 * p + 1];
            if (dst < 0 || dst >= ndev || seen[dst])
                return ap_error_set(err, AP_ETYPE, "%s: bad or repeated target %lld", name,
                                    (long long)dst);
            seen[dst] = 1;
            memcpy(expect + dst * rank, in_off + src * rank, (size_t)rank * sizeof *expect);
        }
        return 0;
    }
    int64_t n = step->group_size;
    if (n < 1 || step->ngroups * n != ndev || !step->groups)
        return ap_error_set(err, AP_ETYPE, "%s: %lld groups of %lld do not cover %lld devices",
                            name, (long long)step->ngroups, (long long)n, (long long)ndev);
    for (int64_t g = 0; g < step->ngroups; g++) {
        const int32_t *group = step->groups + g * n;
        const int64_t *first = in_off + (int64_t)group[0] * rank;
        for (int64_t pos = 0; pos < n; pos++) {
            int64_t dev = group[pos];
            if (dev < 0 || dev >= ndev || seen[dev])
                return ap_error_set(err, AP_ETYPE, "%s: device %lld is in no group or in two", name,
                                    (long long)dev);
            seen[dev] = 1;
            const int64_t *own = in_off + dev * rank;
            int64_t *res = expect + dev * rank;
            for (int d = 0; d < rank; d++) {
                bool gathered = step->kind != IR_REDIST_DYNSLICE && d == i;
                bool split = (step->kind == IR_REDIST_ALL_TO_ALL && d == j) ||
                             (step->kind == IR_REDIST_DYNSLICE && d == i);
                if (gathered) {
                    /* position pos brings the piece right after its predecessors' */
                    if (own[d] != first[d] + pos * in->dims[d].local)
                        return ap_error_set(err, AP_ETYPE,
                                            "%s: group %lld: device %lld holds dim %d at %lld, not "
                                            "next to its group's pieces",
                                            name, (long long)g, (long long)dev, d,
                                            (long long)own[d]);
                    res[d] = first[d];
                } else if (split) {
                    if (step->kind == IR_REDIST_ALL_TO_ALL && own[d] != first[d])
                        return ap_error_set(
                            err, AP_ETYPE,
                            "%s: group %lld: devices split different tiles of dim %d", name,
                            (long long)g, d);
                    res[d] = own[d] + pos * out->dims[d].local;
                } else {
                    if (step->kind != IR_REDIST_DYNSLICE && own[d] != first[d])
                        return ap_error_set(
                            err, AP_ETYPE, "%s: group %lld: devices hold different tiles of dim %d",
                            name, (long long)g, d);
                    res[d] = own[d];
                }
            }
        }
    }
    return 0;
}

/* The local sizes a step of this kind leaves. */
static int check_step_shapes(const ir_mesh *factors, const ir_redist_step *step,
                             const ir_redist_type *in, const ir_redist_type *out, ap_error *err)
{
    const char *name = ir_redist_kind_name(step->kind);
    int64_t n = 1;
    if (step->kind != IR_REDIST_COLLECTIVE_PERMUTE) {
        if (step->dim < 0 || step->dim >= in->rank ||
            (step->kind == IR_REDIST_ALL_TO_ALL &&
             (step->to_dim < 0 || step->to_dim >= in->rank || step->to_dim == step->dim)))
            return ap_error_set(err, AP_ETYPE, "%s: bad dims %d, %d", name, step->dim,
                                step->to_dim);
        if (step->naxes < 1 || step->naxes > factors->n_axes)
            return ap_error_set(err, AP_ETYPE, "%s: acts on %d axes", name, step->naxes);
        for (int k = 0; k < step->naxes; k++) {
            if (step->axes[k] >= factors->n_axes)
                return ap_error_set(err, AP_ETYPE, "%s: axis %d is not in the mesh", name,
                                    step->axes[k]);
            n *= factors->sizes[step->axes[k]];
        }
        if (n != step->group_size)
            return ap_error_set(err, AP_ETYPE, "%s: axes of %lld devices, groups of %lld", name,
                                (long long)n, (long long)step->group_size);
    }
    for (int d = 0; d < in->rank; d++) {
        int64_t want = in->dims[d].local;
        if (step->kind == IR_REDIST_ALL_GATHER && d == step->dim)
            want *= n;
        else if (step->kind == IR_REDIST_ALL_TO_ALL && d == step->dim)
            want *= n;
        else if ((step->kind == IR_REDIST_ALL_TO_ALL && d == step->to_dim) ||
                 (step->kind == IR_REDIST_DYNSLICE && d == step->dim))
            want = want % n == 0 ? want / n : -1;
        if (out->dims[d].local != want)
            return ap_error_set(err, AP_ETYPE, "%s: dim %d has local size %lld, expected %lld",
                                name, d, (long long)out->dims[d].local, (long long)want);
    }
    return 0;
}

/* Independent of the search: checks that `step` turns the array of type `in`
 * (over `factors`, read through device map `in_map`) into its own `type` read
 * through its `device_map`.  It computes every device's tile from the types'
 * base offset maps (paper, Figure 7a), runs the collective on those tiles
 * with the step's replica groups or pairs (StableHLO semantics), and compares
 * with the tiles of the result type.  Also checks that the result type is well
 * formed with the same global shape, and that groups and pairs cover every
 * device once.  Returns 0, AP_ETYPE with a message naming the first problem,
 * or AP_ENOMEM. */
static int check_step(const ir_mesh *factors, const ir_redist_type *in,
                         const int32_t *in_map, const ir_redist_step *step, ap_error *err)
{
    const ir_redist_type *out = &step->type;
    int64_t ndev = ir_mesh_devices(factors);
    if (ndev < 1 || ndev > IR_MESH_MAX_DEVICES || factors->n_axes > IR_MESH_MAX_FACTORS)
        return ap_error_set(err, AP_ETYPE, "not a factor mesh: %lld devices", (long long)ndev);
    size_t cells = (size_t)ndev * (size_t)(in->rank ? in->rank : 1);
    int64_t *in_off = ap_malloc(cells * sizeof *in_off);
    int64_t *out_off = ap_malloc(cells * sizeof *out_off);
    int64_t *expect = ap_malloc(cells * sizeof *expect);
    uint8_t *seen = ap_malloc((size_t)ndev);
    int rc;
    if (!in_off || !out_off || !expect || !seen) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory checking a step");
        goto done;
    }
    if ((rc = ir_redist_validate_type(factors, in, err)) ||
        (rc = ir_redist_validate_type(factors, out, err)) ||
        (rc = ir_redist_check_problem(in, out, err)) ||
        (rc = check_step_shapes(factors, step, in, out, err)) ||
        (rc = device_offsets(factors, in, in_map, ndev, in_off, seen, "the type before", err)) ||
        (rc = device_offsets(factors, out, step->device_map, ndev, out_off, seen, "the type after",
                             err)) ||
        (rc = simulate_step(step, in, out, ndev, in_off, expect, seen, err)))
        goto done;
    for (int64_t dev = 0; dev < ndev; dev++)
        for (int d = 0; d < in->rank; d++)
            if (expect[dev * in->rank + d] != out_off[dev * in->rank + d]) {
                rc = ap_error_set(err, AP_ETYPE,
                                  "%s: device %lld ends with dim %d at %lld, but the type after "
                                  "says %lld",
                                  ir_redist_kind_name(step->kind), (long long)dev, d,
                                  (long long)expect[dev * in->rank + d],
                                  (long long)out_off[dev * in->rank + d]);
                goto done;
            }
done:
    ap_free(in_off);
    ap_free(out_off);
    ap_free(expect);
    ap_free(seen);
    return rc;
}

static bool is_identity(const int32_t *map, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (map[i] != i)
            return false;
    return true;
}

int ir_redist_plan_check(const ir_redist_plan *plan, ap_error *err)
{
    const ir_redist_type *before = &plan->from;
    const int32_t *before_map = plan->identity_map;
    const int64_t eb = plan->elem_bytes;
    int64_t total = 0, peak = ir_redist_type_local_size(&plan->from) * eb;
    int64_t bound = plan->from_local_bytes > plan->to_local_bytes ? plan->from_local_bytes
                                                                  : plan->to_local_bytes;
    int permutes = 0;
    if (!is_identity(plan->identity_map, plan->ndevices))
        return ap_error_set(err, AP_ETYPE, "the plan's identity map is not the identity");
    for (int s = 0; s < plan->nsteps; s++) {
        const ir_redist_step *step = &plan->steps[s];
        int rc = check_step(&plan->factors, before, before_map, step, err);
        if (rc) {
            if (err) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "step %d: %.480s", s, err->msg);
                memcpy(err->msg, msg, sizeof msg);
            }
            return rc;
        }
        int64_t in_bytes = ir_redist_type_local_size(before) * eb;
        int64_t out_bytes = ir_redist_type_local_size(&step->type) * eb;
        int64_t want = step->kind == IR_REDIST_ALL_GATHER ? out_bytes
                       : step->kind == IR_REDIST_DYNSLICE ? 0
                                                          : in_bytes;
        if (step->bytes != want || step->local_bytes != out_bytes)
            return ap_error_set(err, AP_ETYPE,
                                "step %d: costs %lld bytes with tiles of %lld, the cost "
                                "model says %lld and %lld",
                                s, (long long)step->bytes, (long long)step->local_bytes,
                                (long long)want, (long long)out_bytes);
        if (out_bytes > bound)
            return ap_error_set(err, AP_ETYPE,
                                "step %d: a tile of %lld bytes is above max(in, out) = "
                                "%lld",
                                s, (long long)out_bytes, (long long)bound);
        if (step->kind == IR_REDIST_COLLECTIVE_PERMUTE && ++permutes > 1)
            return ap_error_set(err, AP_ETYPE, "step %d: a second collective_permute", s);
        total += step->bytes;
        peak = out_bytes > peak ? out_bytes : peak;
        before = &step->type;
        before_map = step->device_map;
    }
    if (total != plan->cost_bytes || peak != plan->peak_local_bytes)
        return ap_error_set(err, AP_ETYPE,
                            "totals %lld bytes, peak %lld; the steps add up to %lld, %lld",
                            (long long)plan->cost_bytes, (long long)plan->peak_local_bytes,
                            (long long)total, (long long)peak);
    if (!ir_redist_type_equal(before, &plan->to) || !is_identity(before_map, plan->ndevices))
        return ap_error_set(err, AP_ETYPE, "the plan does not end with `to` in device order");
    return 0;
}

/* ============================================================== testing */

/* splitmix64: small, good enough for test problems, state in the caller. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Each axis replicated or on a random dim, in a random order. */
static void random_layout(uint64_t *seed, const ir_mesh *mesh, int rank, ir_redist_type *t)
{
    int order[IR_MAX_AXES];
    memset(t, 0, sizeof *t);
    t->rank = rank;
    for (int a = 0; a < mesh->n_axes; a++)
        order[a] = a;
    for (int a = mesh->n_axes - 1; a > 0; a--) {
        int b = (int)(next_random(seed) % (uint64_t)(a + 1));
        int tmp = order[a];
        order[a] = order[b];
        order[b] = tmp;
    }
    for (int a = 0; a < mesh->n_axes; a++) {
        int d = (int)(next_random(seed) % (uint64_t)(rank + 1));
        if (d < rank)
            t->dims[d].axes[t->dims[d].naxes++] = (uint8_t)order[a];
    }
}

void ir_redist_random_problem(uint64_t *seed, int max_rank, ir_mesh *mesh,
                              ir_redist_type *from, ir_redist_type *to)
{
    static const int64_t axis_sizes[] = {2, 3, 4, 6, 8};
    static const int64_t multipliers[] = {1, 2, 3, 4, 6, 8};
    static const char *const names[] = {"x", "y", "z"};
    int64_t sizes[3];
    for (int a = 0; a < 3; a++)
        sizes[a] = axis_sizes[next_random(seed) % AP_ARRAY_LEN(axis_sizes)];
    ir_mesh_init(mesh, 3, names, sizes, NULL);
    if (max_rank < 1)
        max_rank = 1;
    if (max_rank > IR_REDIST_MAX_RANK)
        max_rank = IR_REDIST_MAX_RANK;
    int rank = 1 + (int)(next_random(seed) % (uint64_t)max_rank);
    random_layout(seed, mesh, rank, from);
    random_layout(seed, mesh, rank, to);
    for (int d = 0; d < rank; d++) {
        int64_t pf = 1, pt = 1;
        for (int k = 0; k < from->dims[d].naxes; k++)
            pf *= mesh->sizes[from->dims[d].axes[k]];
        for (int k = 0; k < to->dims[d].naxes; k++)
            pt *= mesh->sizes[to->dims[d].axes[k]];
        int64_t global =
            pf / (int64_t)ap_gcd((uint64_t)pf, (uint64_t)pt) * pt * multipliers[next_random(seed) % AP_ARRAY_LEN(multipliers)];
        from->dims[d].global = to->dims[d].global = global;
        from->dims[d].local = global / pf;
        to->dims[d].local = global / pt;
    }
}
