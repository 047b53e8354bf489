/*
 * units.c - the search's decision space: which arguments are decided
 * together, and how an action applies to a state.
 *
 * The reduction every fast partitioner relies on (AutoParallel clusters
 * repeated layers; TOAST searches named dimensions):
 *   - arguments whose location paths differ only by numbers (layer
 *     indices) and that have one type form one unit; an argument whose
 *     name groups it with no other (%argN, torch_xla's p27.130) joins the
 *     arguments of its type that the program uses the same way (the same
 *     ops, operand positions, attributes and result types, two levels
 *     down) - the layers found from the graph, as AutoParallel does;
 *   - an optimizer moment follows the parameter it updates.  It is found
 *     from the update ops, not from names: a moment is an argument whose
 *     users are all elementwise (it only ever takes part in the update) and
 *     that reaches, through elementwise ops, the updated value of exactly
 *     one other argument of its type (the parameter, whose donated result
 *     it flows into);
 *   - hints add or override groups:
 *       group GLOB...   the matching arguments are one unit
 *       split GLOB...   the matching arguments are not grouped by layer
 *       fix GLOB...     the matching arguments are not decided by the search
 *     GLOB is a location name with '*' and '?' (or %argN).
 */
#include "search_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================== arguments */

static void arg_name(const ir_pctx *c, uint32_t a, char *buf, size_t n)
{
    const char *s = ir_func_arg_name(ir_pctx_func(c), a);
    if (s)
        snprintf(buf, n, "%s", s);
    else
        snprintf(buf, n, "%%arg%u", a);
}

static bool glob_match(const char *p, const char *s)
{
    const char *star = NULL, *ss = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            ss = s;
        } else if (*p == '?' || *p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++ss;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return !*p;
}

/* Users of each value (CSR over value ids). */
typedef struct users {
    uint32_t *u0, *op;
} users;

static int users_build(const ir_pctx *c, users *u)
{
    uint32_t nv = ir_pctx_num_values(c), no = ir_pctx_num_ops(c), n = 0;
    u->u0 = ap_calloc(nv + 2, sizeof *u->u0);
    if (!u->u0)
        return AP_ENOMEM;
    for (uint32_t k = 0; k < no; k++) {
        const ir_op *op = ir_pctx_op(c, k);
        for (uint32_t i = 0; i < op->n_operands; i++)
            u->u0[ir_pctx_operand_value(c, k, i) + 1]++;
        n += op->n_operands;
    }
    for (uint32_t v = 0; v < nv; v++)
        u->u0[v + 1] += u->u0[v];
    u->op = ap_malloc(sizeof *u->op * (n + 1));
    uint32_t *fill = ap_calloc(nv + 1, sizeof *fill);
    if (!u->op || !fill) {
        ap_free(fill);
        return AP_ENOMEM;
    }
    for (uint32_t k = 0; k < no; k++) {
        const ir_op *op = ir_pctx_op(c, k);
        for (uint32_t i = 0; i < op->n_operands; i++) {
            uint32_t v = ir_pctx_operand_value(c, k, i);
            u->op[u->u0[v] + fill[v]++] = k;
        }
    }
    ap_free(fill);
    return 0;
}

/* The argument whose update moment-candidate `a` flows into, or
 * SEARCH_NONE: a's uses are all elementwise, and the values they reach
 * that the function returns as some argument's update (tf.aliasing_output)
 * are updates of a itself and of exactly one other argument of its type. */
static uint32_t leader_of(const ir_pctx *c, const users *u, const int32_t *update_of, uint32_t a, uint8_t *seen,
                          uint32_t *stack)
{
    uint32_t nv = ir_pctx_num_values(c), na = ir_pctx_num_args(c);
    const ir_type *t = ir_pctx_value(c, a)->type;
    uint32_t sp = 0, leader = SEARCH_NONE, n_seen = 0;
    bool ok = true;
    stack[sp++] = a;
    seen[a] = 1;
    /* the values reached, for resetting `seen` */
    uint32_t *reached = stack + nv;
    reached[n_seen++] = a;
    while (sp && ok) {
        uint32_t v = stack[--sp];
        int32_t upd = update_of[v];
        if (upd >= 0 && (uint32_t)upd != a) {
            if (ir_pctx_value(c, (uint32_t)upd)->type != t || (leader != SEARCH_NONE && leader != (uint32_t)upd))
                ok = false;
            leader = (uint32_t)upd;
        }
        for (uint32_t i = u->u0[v]; i < u->u0[v + 1] && ok; i++) {
            const ir_op *op = ir_pctx_op(c, u->op[i]);
            if (!ir_op_info_get((ir_opcode)op->opcode)->elementwise) {
                ok = false;
                break;
            }
            uint32_t r = ir_pctx_result_value(c, u->op[i], 0);
            if (!seen[r]) {
                seen[r] = 1;
                reached[n_seen++] = r;
                stack[sp++] = r;
            }
        }
    }
    for (uint32_t i = 0; i < n_seen; i++)
        seen[reached[i]] = 0;
    (void)na;
    return ok ? leader : SEARCH_NONE;
}

/* What uses an argument, two levels down: each user's opcode, the
 * operand position, its attributes and result types, and its users'
 * opcodes.  Arguments that repeat across layers without names that say so
 * (a torch_xla export numbers its parameters p0, p1, ...) have equal
 * signatures; distinct roles of one shape (a query and an output
 * projection) differ in their attributes or their users. */
static uint64_t use_signature(const ir_pctx *c, const users *u, uint32_t a)
{
    uint64_t h = (uint64_t)(uintptr_t)ir_pctx_value(c, a)->type * 0x9e3779b97f4a7c15ULL;
    uint64_t sum = 0;
    for (uint32_t i = u->u0[a]; i < u->u0[a + 1]; i++) {
        uint32_t k = u->op[i];
        const ir_op *op = ir_pctx_op(c, k);
        uint64_t x = (uint64_t)op->opcode * 0xff51afd7ed558ccdULL;
        for (uint32_t j = 0; j < op->n_operands; j++)
            if (ir_pctx_operand_value(c, k, j) == a)
                x = (x ^ (j + 1)) * 0xc4ceb9fe1a85ec53ULL;
        for (uint32_t j = 0; j < op->n_attrs; j++)
            x = (x ^ op->attrs[j].value->hash) * 0x100000001b3ULL;
        for (uint32_t j = 0; j < op->n_results; j++) {
            const ir_type *rt = op->results[j].type;
            x = (x ^ (uint64_t)(uintptr_t)rt) * 0x9e3779b97f4a7c15ULL;
            uint32_t r = ir_pctx_result_value(c, k, j);
            uint64_t inner = 0;
            for (uint32_t q = u->u0[r]; q < u->u0[r + 1]; q++)
                inner += ((uint64_t)ir_pctx_op(c, u->op[q])->opcode + 1) * 0x2545f4914f6cdd1dULL;
            x ^= inner;
        }
        sum += x; /* the uses as a multiset */
    }
    return h ^ (sum * 0xbf58476d1ce4e5b9ULL);
}

/* ============================================================== hints */

enum { H_GROUP, H_SPLIT, H_FIX };

typedef struct hint {
    int kind;
    const char *globs; /* words, NUL-separated, ending with an empty one */
} hint;

static int hint_error(ap_error *err, int line, int col, const char *msg)
{
    int rc = ap_error_set(err, AP_ESYNTAX, "%s", msg);
    if (err) {
        snprintf(err->file, sizeof err->file, "hints");
        err->line = line;
        err->col = col;
    }
    return rc;
}

/* Parses the hints into kinds and word lists (in buf). */
static int parse_hints(const char *text, hint **out, int *n_out, char **buf_out, ap_error *err)
{
    *out = NULL;
    *n_out = 0;
    *buf_out = NULL;
    if (!text)
        return 0;
    size_t len = strlen(text);
    char *buf = ap_malloc(2 * len + 2);
    hint *h = ap_malloc(sizeof *h * (len / 4 + 2));
    if (!buf || !h) {
        ap_free(buf);
        ap_free(h);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    size_t bo = 0;
    int n = 0, line = 1;
    const char *s = text;
    while (*s) {
        const char *eol = s + strcspn(s, "\n;");
        const char *p = s;
        int words = 0, kind = -1;
        while (p < eol) {
            while (p < eol && isspace((unsigned char)*p))
                p++;
            if (p >= eol || *p == '#')
                break;
            const char *w = p;
            while (p < eol && !isspace((unsigned char)*p))
                p++;
            size_t wl = (size_t)(p - w);
            if (words == 0) {
                if (wl == 5 && !memcmp(w, "group", 5))
                    kind = H_GROUP;
                else if (wl == 5 && !memcmp(w, "split", 5))
                    kind = H_SPLIT;
                else if (wl == 3 && !memcmp(w, "fix", 3))
                    kind = H_FIX;
                else {
                    char msg[128];
                    snprintf(msg, sizeof msg, "unknown hint '%.*s' (expected group, split or fix)",
                             (int)(wl < 60 ? wl : 60), w);
                    ap_free(buf);
                    ap_free(h);
                    return hint_error(err, line, (int)(w - s) + 1, msg);
                }
                h[n].kind = kind;
                h[n].globs = buf + bo;
            } else {
                memcpy(buf + bo, w, wl);
                bo += wl;
                buf[bo++] = '\0';
            }
            words++;
        }
        if (words == 1) {
            ap_free(buf);
            ap_free(h);
            return hint_error(err, line, 1,
                              kind == H_GROUP   ? "group needs at least one argument name or glob"
                              : kind == H_SPLIT ? "split needs at least one argument name or glob"
                                                : "fix needs at least one argument name or glob");
        }
        if (words > 1) {
            buf[bo++] = '\0';
            n++;
        }
        if (*eol == '\n')
            line++;
        s = *eol ? eol + 1 : eol;
    }
    *out = h;
    *n_out = n;
    *buf_out = buf;
    return 0;
}

static bool hint_matches(const hint *h, const char *name)
{
    for (const char *g = h->globs; *g; g += strlen(g) + 1)
        if (glob_match(g, name))
            return true;
    return false;
}

/* ============================================================== units */

/* The layer-generic key of a name: every run of digits that is an index
 * (not part of a word: block_7, layers[3], mp_1, but not ln1 or w2)
 * becomes '*'. */
static void layer_key(const char *name, char *out, size_t n)
{
    size_t o = 0;
    for (const char *s = name; *s && o + 2 < n; s++) {
        if (!isdigit((unsigned char)*s)) {
            out[o++] = *s;
            continue;
        }
        /* a whole run of digits: an index, or part of a word */
        bool index = s == name || !isalpha((unsigned char)s[-1]);
        if (index)
            out[o++] = '*';
        for (;; s++) {
            if (!index && o + 2 < n)
                out[o++] = *s;
            if (!isdigit((unsigned char)s[1]))
                break;
        }
    }
    out[o] = '\0';
}

void search__units_free(search_units *u)
{
    ap_free(u->v);
    ap_free(u->members);
    memset(u, 0, sizeof *u);
}

int search__units(const ir_pctx *c, uint32_t axes, const char *hints_text, search_units *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    uint32_t na = ir_pctx_num_args(c), nv = ir_pctx_num_values(c);
    const ir_op *func = ir_pctx_func(c);
    const ir_mesh *mesh = ir_pctx_mesh(c);
    int n_axes = 0;
    for (int a = 0; a < mesh->n_axes; a++)
        n_axes += (axes >> a & 1u) != 0;
    hint *hints = NULL;
    char *hbuf = NULL;
    int n_hints = 0, rc;
    if ((rc = parse_hints(hints_text, &hints, &n_hints, &hbuf, err)) < 0)
        return rc;
    users u = {0};
    int32_t *update_of = ap_malloc(sizeof *update_of * (nv + 1));
    uint32_t *leader = ap_malloc(sizeof *leader * (na + 1));
    uint32_t *unit_of = ap_malloc(sizeof *unit_of * (na + 1));
    uint8_t *seen = ap_calloc(nv + 1, 1);
    uint32_t *stack = ap_malloc(sizeof *stack * (2 * (size_t)nv + 2));
    char (*key)[192] = ap_malloc(sizeof *key * (na + 1));
    int *hint_of = ap_malloc(sizeof *hint_of * (na + 1));
    out->v = ap_malloc(sizeof *out->v * (na + 1));
    out->members = ap_malloc(sizeof *out->members * (na + 1));
    if (!update_of || !leader || !unit_of || !seen || !stack || !key || !hint_of || !out->v || !out->members ||
        users_build(c, &u) < 0) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto out;
    }
    /* which returned value updates which argument */
    for (uint32_t v = 0; v < nv; v++)
        update_of[v] = -1;
    for (uint32_t a = 0; a < na; a++) {
        ir_attr *al = ir_func_arg_attr(func, a, "tf.aliasing_output");
        if (al && al->kind == IR_A_INT && al->u.i >= 0 && (uint64_t)al->u.i < ir_pctx_num_returns(c))
            update_of[ir_pctx_return_value(c, (uint32_t)al->u.i)] = (int32_t)a;
    }
    /* decidable arguments and the raw count of decisions */
    for (uint32_t a = 0; a < na; a++) {
        const ir_type *t = ir_pctx_value(c, a)->type;
        bool tensor = t && t->kind == IR_T_TENSOR && t->rank > 0;
        leader[a] = tensor ? a : SEARCH_NONE;
        unit_of[a] = SEARCH_NONE;
        hint_of[a] = -1;
        if (tensor)
            out->decisions_before += (t->rank + 1) * n_axes;
        char name[192];
        arg_name(c, a, name, sizeof name);
        for (int h = 0; h < n_hints; h++)
            if (hint_matches(&hints[h], name))
                hint_of[a] = h; /* the last hint naming it wins */
        if (hint_of[a] >= 0 && hints[hint_of[a]].kind == H_FIX)
            leader[a] = SEARCH_NONE;
    }
    /* moments follow their parameter */
    for (uint32_t a = 0; a < na; a++) {
        if (leader[a] != a || hint_of[a] >= 0)
            continue;
        uint32_t l = leader_of(c, &u, update_of, a, seen, stack);
        if (l != SEARCH_NONE && l != a && leader[l] == l &&
            ir_pctx_value(c, l)->type == ir_pctx_value(c, a)->type)
            leader[a] = l;
    }
    /* a parameter's moments may have been taken for one another's: keep
     * only followers of arguments that lead themselves */
    for (uint32_t a = 0; a < na; a++)
        if (leader[a] != SEARCH_NONE && leader[a] != a && leader[leader[a]] != leader[a])
            leader[a] = a;
    /* group keys: layer-generic names (one type), or a group hint */
    for (uint32_t a = 0; a < na; a++) {
        if (leader[a] != a)
            continue;
        char name[192];
        arg_name(c, a, name, sizeof name);
        if (hint_of[a] >= 0 && hints[hint_of[a]].kind == H_GROUP)
            snprintf(key[a], sizeof key[a], "\x01group %d", hint_of[a]);
        else if (hint_of[a] >= 0 && hints[hint_of[a]].kind == H_SPLIT)
            snprintf(key[a], sizeof key[a], "%s", name);
        else if (ir_func_arg_name(func, a))
            layer_key(name, key[a], sizeof key[a]);
        else
            key[a][0] = '\0';
    }
    /* an argument its name groups with no other (%argN, or p27.130 as
     * torch_xla numbers parameters): its layer siblings are found from the
     * program instead, as arguments one same computation uses */
    for (uint32_t a = 0; a < na; a++) {
        if (leader[a] != a || hint_of[a] >= 0)
            continue;
        bool alone = true;
        for (uint32_t b = 0; b < na && alone && key[a][0]; b++)
            alone = b == a || leader[b] != b || strcmp(key[a], key[b]) ||
                    ir_pctx_value(c, b)->type != ir_pctx_value(c, a)->type;
        if (alone)
            snprintf(key[a], sizeof key[a], "\x02use %016llx", (unsigned long long)use_signature(c, &u, a));
    }
    /* units in order of their first argument */
    for (uint32_t a = 0; a < na; a++) {
        if (leader[a] != a || unit_of[a] != SEARCH_NONE)
            continue;
        search_unit *un = &out->v[out->n];
        memset(un, 0, sizeof *un);
        un->type = ir_pctx_value(c, a)->type;
        uint32_t id = out->n++;
        for (uint32_t b = a; b < na; b++)
            if (leader[b] == b && unit_of[b] == SEARCH_NONE && !strcmp(key[a], key[b])) {
                if (ir_pctx_value(c, b)->type != un->type) {
                    if (key[a][0] == '\x01') {
                        char n1[192], n2[192];
                        arg_name(c, a, n1, sizeof n1);
                        arg_name(c, b, n2, sizeof n2);
                        rc = ap_error_set(err, AP_EINVALID, "hints: group: %s and %s have different types", n1, n2);
                        goto out;
                    }
                    continue;
                }
                unit_of[b] = id;
            }
        /* the name: the key, or the only argument's name */
        uint32_t n_lead = 0;
        for (uint32_t b = a; b < na; b++)
            n_lead += leader[b] == b && unit_of[b] == id;
        if (n_lead == 1 || key[a][0] == '\x01' || key[a][0] == '\x02')
            arg_name(c, a, un->name, sizeof un->name);
        else
            snprintf(un->name, sizeof un->name, "%s", key[a]);
        if (key[a][0] == '\x01' && n_lead > 1)
            snprintf(un->name + strlen(un->name), sizeof un->name - strlen(un->name), " (+%u)", n_lead - 1);
        if (key[a][0] == '\x02' && n_lead > 1)
            snprintf(un->name + strlen(un->name), sizeof un->name - strlen(un->name), " (+%u used alike)", n_lead - 1);
        un->n_leaders = n_lead;
    }
    /* members: leaders, then followers */
    for (uint32_t id = 0; id < out->n; id++) {
        search_unit *un = &out->v[id];
        un->first = out->n_members;
        for (uint32_t b = 0; b < na; b++)
            if (leader[b] == b && unit_of[b] == id)
                out->members[out->n_members++] = b;
        for (uint32_t b = 0; b < na; b++)
            if (leader[b] != SEARCH_NONE && leader[b] != b && unit_of[leader[b]] == id)
                out->members[out->n_members++] = b;
        un->n = out->n_members - un->first;
    }
    rc = 0;
out:
    if (rc < 0)
        search__units_free(out);
    ap_free(u.u0);
    ap_free(u.op);
    ap_free(update_of);
    ap_free(leader);
    ap_free(unit_of);
    ap_free(seen);
    ap_free(stack);
    ap_free(key);
    ap_free(hint_of);
    ap_free(hints);
    ap_free(hbuf);
    return rc;
}

/* ============================================================= actions */

int search__apply(ir_partition *p, const search_units *u, search_action a, ap_error *err)
{
    const ir_pctx *c = ir_partition_ctx(p);
    const search_unit *un = &u->v[a.unit];
    ap_error e;
    for (uint32_t i = 0; i < un->n; i++) {
        const ir_value *v = ir_pctx_value(c, u->members[un->first + i]);
        int rc = a.dim >= 0 ? ir_tile(p, v, a.dim, a.axis, &e) : ir_atomic(p, v, a.axis, &e);
        if (rc == AP_EINVALID)
            return 1;
        if (rc < 0) {
            if (err)
                *err = e;
            return rc;
        }
    }
    return ir_propagate(p, err);
}

void search__action_text(const search_units *u, const ir_mesh *mesh, search_action a, ap_buf *b)
{
    const search_unit *un = &u->v[a.unit];
    if (a.dim >= 0)
        ap_buf_printf(b, "tile %s %d %s", un->name, a.dim, mesh->names[a.axis]);
    else
        ap_buf_printf(b, "atomic %s %s", un->name, mesh->names[a.axis]);
    uint32_t followers = un->n - un->n_leaders;
    if (followers)
        ap_buf_printf(b, " (with %u optimizer moment%s)", followers, followers > 1 ? "s" : "");
}

int search_check_hints(const ir_pctx *c, uint32_t axes, const char *hints, ap_error *err)
{
    search_units u;
    int rc = search__units(c, axes, hints, &u, err);
    if (rc == 0)
        search__units_free(&u);
    return rc;
}
