/*
 * manual.c - Shardy's sdy.manual_computation in the reference interpreter.
 *
 * Shardy's definition (its ops.td and the op's verifier): the body is
 * per-device code along the op's manual_axes.  Each operand is split along
 * the manual axes its in_sharding names on each dim (manual axes come
 * first in a dim's axes; the dim's size divides by their product, and the
 * body's argument has the quotient as that dim), and is whole along every
 * other axis; the body runs once per device of the manual axes with its
 * shard, in lock step, so its collectives meet; each result is put back
 * together from the body's results along the manual axes its out_sharding
 * names.  Free axes (those not in manual_axes) only tell propagation how
 * to shard the body's values further: they change no value.
 *
 * So the op runs as: one frame of devices, one per point of the manual
 * axes (its partition id the mesh's device id there, the mesh's
 * device_ids when it has them), the body evaluated on it, the results
 * concatenated.  The partitioner has no rule for the op (its region runs
 * whole: the SPMD program hands it whole operands), so each device of an
 * SPMD run does the same.
 *
 * Refused with a message naming the op and where it is, never guessed:
 *  - an op whose value depends on the device (a collective, partition_id,
 *    replica_id, a run_parallel) in a body whose mesh has a free axis of
 *    size above 1, or in a manual computation nested in another: the
 *    body's devices are then not the mesh's devices, and which devices a
 *    collective's groups name is not defined here (eval.c asks
 *    ir__ip_manual_refuse);
 *  - a result that out_shardings replicates along a manual axis on which
 *    the devices' results differ: Shardy gives such a result no value;
 *  - unreduced axes (partial sums), sub-axes of manual axes, shardings on
 *    different meshes, a sharding that does not fit its value, or text
 *    this reader does not know.
 */
#include "interp_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>

#define MC_MAX_AXES 16   /* mesh axes */
#define MC_MAX_DEVICES 4096 /* devices of the manual axes, and of the mesh */

typedef struct mc_name {
    const char *s;
    int len;
} mc_name;

/* One tensor sharding `<@mesh, [{"x"}, {}], replicated={"y"}>`: per dim
 * the axes it names, in order. */
typedef struct mc_sharding {
    mc_name mesh; /* `@name`, or the inline `mesh<...>` text */
    int rank;     /* dim groups */
    uint8_t n_axes[IR_MAX_RANK];
    mc_name axes[IR_MAX_RANK][MC_MAX_AXES];
    bool sub[IR_MAX_RANK][MC_MAX_AXES]; /* a sub-axis `"x":(1)2` */
    bool unreduced;
} mc_sharding;

typedef struct mc_mesh {
    int n_axes;
    mc_name names[MC_MAX_AXES];
    int64_t sizes[MC_MAX_AXES];
    int64_t n_dev;
    int64_t *ids; /* n_dev device ids, row-major over the axes (owned) */
} mc_mesh;

typedef struct mc_op {
    mc_sharding *in, *out; /* n_operands, n_results (owned) */
    mc_name manual[MC_MAX_AXES];
    int n_manual;
    mc_mesh mesh;
    ap_buf text, mesh_text; /* the op's and its sdy.mesh's text, which the names point into */
    bool manual_axis[MC_MAX_AXES]; /* per mesh axis */
} mc_op;

/* ------------------------------------------------------------ reading */

typedef struct rd {
    const char *p, *end;
} rd;

static void ws(rd *s)
{
    while (s->p < s->end && isspace((unsigned char)*s->p))
        s->p++;
}

static bool eat(rd *s, char c)
{
    ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

static bool eat_word(rd *s, const char *w)
{
    ws(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, w, n)) {
        s->p += n;
        return true;
    }
    return false;
}

static bool quoted(rd *s, mc_name *out)
{
    ws(s);
    if (s->p >= s->end || *s->p != '"')
        return false;
    const char *b = ++s->p;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\')
            return false; /* escapes in axis names: not read */
        s->p++;
    }
    if (s->p >= s->end)
        return false;
    out->s = b;
    out->len = (int)(s->p - b);
    s->p++;
    return true;
}

static bool integer(rd *s, int64_t *v)
{
    ws(s);
    const char *b = s->p;
    int64_t x = 0;
    while (s->p < s->end && isdigit((unsigned char)*s->p) && x < ((int64_t)1 << 40))
        x = 10 * x + (*s->p++ - '0');
    *v = x;
    return s->p > b && !(s->p < s->end && isdigit((unsigned char)*s->p));
}

/* `{"x", "y":(1)2, ?}` of n names at most; false on anything else. */
static bool axis_set(rd *s, mc_name *names, bool *sub, int *n, int cap)
{
    *n = 0;
    if (!eat(s, '{'))
        return false;
    if (eat(s, '}'))
        return true;
    for (;;) {
        if (eat(s, '?')) {
            /* an open dim: more axes may be added; it names none */
        } else {
            if (*n >= cap || !quoted(s, &names[*n]))
                return false;
            bool is_sub = false;
            if (eat(s, ':')) { /* a sub-axis (pre-size)size */
                int64_t a, b;
                if (!eat(s, '(') || !integer(s, &a) || !eat(s, ')') || !integer(s, &b))
                    return false;
                is_sub = true;
            }
            if (sub)
                sub[*n] = is_sub;
            (*n)++;
        }
        if (eat(s, '}'))
            return true;
        if (!eat(s, ','))
            return false;
    }
}

/* A mesh's text from its '<': `<["x"=2, "y"=4], device_ids=[...]>`,
 * `<"x"=2>`, `<[]>`. */
static int mesh_body(rd *s, mc_mesh *m, char *why, size_t wsz)
{
    memset(m, 0, sizeof *m);
    if (!eat(s, '<'))
        return snprintf(why, wsz, "its mesh is not written <[...]>"), -1;
    bool bracket = eat(s, '[');
    ws(s);
    while (s->p < s->end && *s->p == '"') {
        if (m->n_axes >= MC_MAX_AXES)
            return snprintf(why, wsz, "its mesh has more than %d axes", MC_MAX_AXES), -1;
        mc_name n;
        int64_t v;
        if (!quoted(s, &n) || !eat(s, '=') || !integer(s, &v) || v < 1)
            return snprintf(why, wsz, "its mesh's axes are not read"), -1;
        m->names[m->n_axes] = n;
        m->sizes[m->n_axes++] = v;
        if (!eat(s, ','))
            break;
        ws(s);
    }
    if (bracket && !eat(s, ']'))
        return snprintf(why, wsz, "its mesh's axes are not read"), -1;
    int64_t n = 1;
    for (int a = 0; a < m->n_axes; a++)
        if ((n *= m->sizes[a]) > MC_MAX_DEVICES)
            return snprintf(why, wsz, "its mesh has more than %d devices", MC_MAX_DEVICES), -1;
    m->n_dev = n;
    if (!(m->ids = ap_malloc(sizeof *m->ids * (size_t)n)))
        return snprintf(why, wsz, "out of memory"), -1;
    for (int64_t i = 0; i < n; i++)
        m->ids[i] = i;
    eat(s, ',');
    if (eat_word(s, "device_ids")) {
        if (!eat(s, '=') || !eat(s, '['))
            return snprintf(why, wsz, "its mesh's device_ids are not read"), -1;
        int64_t k = 0;
        if (!eat(s, ']')) {
            for (;;) {
                int64_t v;
                if (k >= n || !integer(s, &v))
                    return snprintf(why, wsz, "its mesh's device_ids are not one per device"), -1;
                m->ids[k++] = v;
                if (eat(s, ']'))
                    break;
                if (!eat(s, ','))
                    return snprintf(why, wsz, "its mesh's device_ids are not read"), -1;
            }
        }
        if (k != n)
            return snprintf(why, wsz, "its mesh's device_ids are not one per device"), -1;
    }
    if (!eat(s, '>'))
        return snprintf(why, wsz, "its mesh is not read"), -1;
    return 0;
}

/* `[<@mesh, [{"x"}, {}], replicated={"y"}>, ...]` into v (n entries). */
static int sharding_list(rd *s, mc_sharding *v, uint32_t n, const char *what, char *why, size_t wsz)
{
    if (!eat(s, '['))
        return snprintf(why, wsz, "its %s are not a list [...]", what), -1;
    uint32_t k = 0;
    if (eat(s, ']'))
        goto count;
    for (;;) {
        if (k >= n)
            return snprintf(why, wsz, "its %s have more entries than the op has values", what), -1;
        mc_sharding *sh = &v[k++];
        memset(sh, 0, sizeof *sh);
        if (!eat(s, '<'))
            return snprintf(why, wsz, "its %s are not read", what), -1;
        ws(s);
        const char *mb = s->p;
        if (eat(s, '@')) {
            while (s->p < s->end && (isalnum((unsigned char)*s->p) || *s->p == '_' || *s->p == '.' || *s->p == '$' ||
                                     *s->p == '-'))
                s->p++;
        } else if (eat_word(s, "mesh")) {
            int depth = 0;
            for (; s->p < s->end; s->p++) {
                depth += (*s->p == '<') - (*s->p == '>');
                if (depth == 0 && *s->p == '>') {
                    s->p++;
                    break;
                }
            }
        } else {
            return snprintf(why, wsz, "its %s name no mesh", what), -1;
        }
        sh->mesh.s = mb;
        sh->mesh.len = (int)(s->p - mb);
        if (!eat(s, ',') || !eat(s, '['))
            return snprintf(why, wsz, "its %s are not read", what), -1;
        if (!eat(s, ']')) {
            for (;;) {
                if (sh->rank >= IR_MAX_RANK)
                    return snprintf(why, wsz, "its %s have too many dims", what), -1;
                int na;
                if (!axis_set(s, sh->axes[sh->rank], sh->sub[sh->rank], &na, MC_MAX_AXES))
                    return snprintf(why, wsz, "a dim of its %s is not read", what), -1;
                sh->n_axes[sh->rank++] = (uint8_t)na;
                /* a priority `p1` */
                ws(s);
                if (s->p < s->end && *s->p == 'p') {
                    int64_t pr;
                    s->p++;
                    if (!integer(s, &pr))
                        return snprintf(why, wsz, "a dim priority of its %s is not read", what), -1;
                }
                if (eat(s, ']'))
                    break;
                if (!eat(s, ','))
                    return snprintf(why, wsz, "its %s are not read", what), -1;
            }
        }
        while (eat(s, ',')) {
            bool unr = eat_word(s, "unreduced");
            if (!unr && !eat_word(s, "replicated"))
                return snprintf(why, wsz, "its %s hold a field this reader does not know", what), -1;
            mc_name names[MC_MAX_AXES];
            int na;
            if (!eat(s, '=') || !axis_set(s, names, NULL, &na, MC_MAX_AXES))
                return snprintf(why, wsz, "its %s are not read", what), -1;
            sh->unreduced |= unr && na > 0;
        }
        if (!eat(s, '>'))
            return snprintf(why, wsz, "its %s are not read", what), -1;
        if (eat(s, ']'))
            break;
        if (!eat(s, ','))
            return snprintf(why, wsz, "its %s are not read", what), -1;
    }
count:
    if (k != n)
        return snprintf(why, wsz, "its %s have %u entries for %u values", what, k, n), -1;
    return 0;
}

static bool name_eq(mc_name a, mc_name b) { return a.len == b.len && !memcmp(a.s, b.s, (size_t)a.len); }

static bool names_axes(const mc_sharding *sh)
{
    for (int d = 0; d < sh->rank; d++)
        if (sh->n_axes[d])
            return true;
    return false;
}

/* The text of an sdy.mesh op named `@name`'s mesh, from its '<'. */
static bool find_mesh(const ir_module *m, mc_name ref, ap_buf *b)
{
    for (const ir_op *o = ir_module_body(m)->first; o; o = o->next) {
        if (strcmp(o->name, "sdy.mesh") || !o->tmpl)
            continue;
        ap_buf_reset(b);
        for (uint32_t i = 0; i < o->tmpl->n; i++)
            if (o->tmpl->pieces[i].kind == IR_TP_TEXT)
                ap_buf_put(b, o->tmpl->pieces[i].text, o->tmpl->pieces[i].len);
        const char *t = b->data ? strstr(b->data, "@") : NULL;
        if (!t || strncmp(t, ref.s, (size_t)ref.len))
            continue;
        const char *after = t + ref.len;
        if (isalnum((unsigned char)*after) || *after == '_' || *after == '.' || *after == '$' || *after == '-')
            continue;
        const char *lt = strchr(after, '<');
        if (!lt)
            return false;
        size_t off = (size_t)(lt - b->data), len = b->len - off;
        memmove(b->data, b->data + off, len);
        b->len = len;
        b->data[len] = '\0';
        return true;
    }
    return false;
}

/* The mesh a sharding names (`@name`: the module's sdy.mesh, whose text
 * goes to text, which m's names then point into; or inline `mesh<...>`)
 * into m (m->ids owned by the caller, also on failure). */
static int read_mesh(const ip_run *r, mc_name ref, ap_buf *text, mc_mesh *m, char *why, size_t wsz)
{
    memset(m, 0, sizeof *m);
    rd ms;
    if (ref.s[0] == '@') {
        if (!find_mesh(r->m, ref, text))
            return snprintf(why, wsz, "the module has no sdy.mesh %.*s", ref.len, ref.s), -1;
        ms = (rd){text->data, text->data + text->len};
    } else {
        ms = (rd){ref.s + 4, ref.s + ref.len};
    }
    return mesh_body(&ms, m, why, wsz);
}

static bool mesh_equal(const mc_mesh *a, const mc_mesh *b)
{
    if (a->n_axes != b->n_axes || a->n_dev != b->n_dev)
        return false;
    for (int i = 0; i < a->n_axes; i++)
        if (!name_eq(a->names[i], b->names[i]) || a->sizes[i] != b->sizes[i])
            return false;
    for (int64_t k = 0; k < a->n_dev; k++)
        if (a->ids[k] != b->ids[k])
            return false;
    return true;
}

static void mc_free(mc_op *mc)
{
    ap_free(mc->in);
    ap_free(mc->out);
    ap_free(mc->mesh.ids);
    ap_buf_free(&mc->text);
    ap_buf_free(&mc->mesh_text);
    memset(mc, 0, sizeof *mc);
}

/* Reads the op's in_shardings, out_shardings, manual_axes and mesh into
 * mc; on failure returns -1 with why set. */
static int mc_read(const ip_run *r, const ir_op *op, mc_op *mc, char *why, size_t wsz)
{
    memset(mc, 0, sizeof *mc);
    mc->in = ap_calloc(op->n_operands ? op->n_operands : 1, sizeof *mc->in);
    mc->out = ap_calloc(op->n_results ? op->n_results : 1, sizeof *mc->out);
    ap_buf *b = &mc->text, *mb = &mc->mesh_text;
    ap_buf_init(b);
    ap_buf_init(mb);
    int rc = -1;
    if (!mc->in || !mc->out) {
        snprintf(why, wsz, "out of memory");
        goto done;
    }
    /* the clauses come before the region's arguments */
    for (uint32_t i = 0; op->tmpl && i < op->tmpl->n; i++) {
        const ir_tmpl_piece *pc = &op->tmpl->pieces[i];
        if (pc->kind == IR_TP_REGION || pc->kind == IR_TP_REGION_ARG)
            break;
        if (pc->kind == IR_TP_TEXT)
            ap_buf_put(b, pc->text, pc->len);
    }
    const char *text = b->data ? b->data : "";
    const char *ins = strstr(text, "in_shardings"), *outs = strstr(text, "out_shardings"),
               *man = strstr(text, "manual_axes");
    if (!ins || !outs || !man) {
        snprintf(why, wsz, "its in_shardings, out_shardings and manual_axes are not read");
        goto done;
    }
    rd s = {ins + 12, text + b->len};
    if (!eat(&s, '=') || sharding_list(&s, mc->in, op->n_operands, "in_shardings", why, wsz) < 0)
        goto done;
    s.p = outs + 13;
    if (!eat(&s, '=') || sharding_list(&s, mc->out, op->n_results, "out_shardings", why, wsz) < 0)
        goto done;
    s.p = man + 11;
    if (!eat(&s, '=') || !axis_set(&s, mc->manual, NULL, &mc->n_manual, MC_MAX_AXES)) {
        snprintf(why, wsz, "its manual_axes are not read");
        goto done;
    }
    /* one mesh for all (Shardy's verifier asks a common mesh or an empty
     * one): the first sharding's that names an axis; a sharding that names
     * none keeps its value whole whatever its mesh */
    const mc_sharding *first = op->n_operands ? &mc->in[0] : op->n_results ? &mc->out[0] : NULL;
    for (uint32_t i = 0; i < op->n_operands + op->n_results; i++) {
        const mc_sharding *sh = i < op->n_operands ? &mc->in[i] : &mc->out[i - op->n_operands];
        if (names_axes(sh)) {
            first = sh;
            break;
        }
    }
    if (!first) {
        if (mc->n_manual) {
            snprintf(why, wsz, "it has manual axes but no shardings, so no mesh");
            goto done;
        }
        mc->mesh.n_dev = 1;
        if (!(mc->mesh.ids = ap_calloc(1, sizeof *mc->mesh.ids))) {
            snprintf(why, wsz, "out of memory");
            goto done;
        }
        rc = 0;
        goto done;
    }
    if (read_mesh(r, first->mesh, mb, &mc->mesh, why, wsz) < 0)
        goto done;
    for (uint32_t i = 0; i < op->n_operands + op->n_results; i++) {
        const mc_sharding *sh = i < op->n_operands ? &mc->in[i] : &mc->out[i - op->n_operands];
        if (names_axes(sh) && !name_eq(sh->mesh, first->mesh)) {
            /* written otherwise (by name, inline): the same mesh? */
            mc_mesh other;
            ap_buf ot;
            ap_buf_init(&ot);
            bool same = read_mesh(r, sh->mesh, &ot, &other, why, wsz) == 0 && mesh_equal(&other, &mc->mesh);
            ap_free(other.ids);
            ap_buf_free(&ot);
            if (!same) {
                snprintf(why, wsz, "its shardings name different meshes (%.*s, %.*s)", first->mesh.len,
                         first->mesh.s, sh->mesh.len, sh->mesh.s);
                goto done;
            }
        }
        if (sh->unreduced) {
            snprintf(why, wsz, "its %s %u has unreduced axes (partial sums), which are not evaluated",
                     i < op->n_operands ? "in_sharding" : "out_sharding",
                     i < op->n_operands ? i : i - op->n_operands);
            goto done;
        }
    }
    for (int i = 0; i < mc->n_manual; i++) {
        int a = 0;
        while (a < mc->mesh.n_axes && !name_eq(mc->mesh.names[a], mc->manual[i]))
            a++;
        if (a == mc->mesh.n_axes) {
            snprintf(why, wsz, "its manual axis \"%.*s\" is not an axis of its mesh", mc->manual[i].len,
                     mc->manual[i].s);
            goto done;
        }
        mc->manual_axis[a] = true;
    }
    rc = 0;
done:
    return rc;
}

/* The mesh axis of name n, -1 if none. */
static int mesh_axis(const mc_mesh *m, mc_name n)
{
    for (int a = 0; a < m->n_axes; a++)
        if (name_eq(m->names[a], n))
            return a;
    return -1;
}

/* Per dim of a value with sharding sh and type ty: the mesh axes of the
 * dim's manual prefix (man[d][0..n_man[d])) and the local dims; -1 with why
 * when the sharding does not fit (Shardy's verifier's rules). */
static int local_shape(const mc_op *mc, const mc_sharding *sh, const ir_type *ty, const char *what, uint32_t idx,
                       int8_t man[][MC_MAX_AXES], uint8_t *n_man, int64_t *ldims, char *why, size_t wsz)
{
    if (ty && ty->kind == IR_T_TOKEN && sh->rank == 0)
        return 0; /* a token: passed whole (Shardy verifies no sharding of it) */
    if (!ty || ty->kind != IR_T_TENSOR || ty->rank < 0)
        return snprintf(why, wsz, "its %s %u is not a ranked tensor or a token", what, idx), -1;
    if (sh->rank != ty->rank && !(sh->rank == 0 && ty->rank == 0))
        return snprintf(why, wsz, "its %s %u has %d dim shardings for a rank-%d value", what, idx, sh->rank, ty->rank),
               -1;
    for (int d = 0; d < ty->rank; d++) {
        int64_t f = 1;
        bool seen_free = false;
        n_man[d] = 0;
        for (int k = 0; k < sh->n_axes[d]; k++) {
            int a = mesh_axis(&mc->mesh, sh->axes[d][k]);
            if (a < 0)
                return snprintf(why, wsz, "its %s %u names axis \"%.*s\", which its mesh does not have", what, idx,
                                sh->axes[d][k].len, sh->axes[d][k].s),
                       -1;
            if (!mc->manual_axis[a]) {
                seen_free = true;
                continue;
            }
            if (seen_free)
                return snprintf(why, wsz, "its %s %u has manual axis \"%.*s\" after a free axis in dim %d", what, idx,
                                sh->axes[d][k].len, sh->axes[d][k].s, d),
                       -1;
            if (sh->sub[d][k])
                return snprintf(why, wsz, "its %s %u splits manual axis \"%.*s\"", what, idx, sh->axes[d][k].len,
                                sh->axes[d][k].s),
                       -1;
            man[d][n_man[d]++] = (int8_t)a;
            f *= mc->mesh.sizes[a];
        }
        if (ty->dims[d] < 0 || ty->dims[d] % f)
            return snprintf(why, wsz, "dim %d of its %s %u (%" PRId64 ") does not divide by its manual axes (%" PRId64
                            ")", d, what, idx, ty->dims[d], f),
                   -1;
        ldims[d] = ty->dims[d] / f;
    }
    return 0;
}

/* The offset of device coord's block along each dim: its index over the
 * dim's manual axes (the first major) times the local size. */
static void block_offsets(const mc_mesh *m, const int64_t *coord, int rank, int8_t man[][MC_MAX_AXES],
                          const uint8_t *n_man, const int64_t *ldims, int64_t *off)
{
    for (int d = 0; d < rank; d++) {
        int64_t x = 0;
        for (int k = 0; k < n_man[d]; k++)
            x = x * m->sizes[man[d][k]] + coord[man[d][k]];
        off[d] = x * ldims[d];
    }
}

enum { TO_LOCAL, TO_GLOBAL, SAME };

/* Moves the block of g at off with l's shape: into l, from l, or compares
 * them (returns 1 when they differ). */
static int block_move(ir_tensor *g, ir_tensor *l, const int64_t *off, int how)
{
    size_t eb = ip_eb((ir_elem)l->elem);
    if (l->numel == 0)
        return 0;
    int rank = l->rank;
    if (rank == 0) {
        if (how == TO_LOCAL)
            memcpy(l->data, g->data, eb);
        else if (how == TO_GLOBAL)
            memcpy(g->data, l->data, eb);
        else
            return memcmp(g->data, l->data, eb) != 0;
        return 0;
    }
    int64_t gs[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    ip_strides(rank, g->dims, gs);
    size_t run = (size_t)l->dims[rank - 1] * eb;
    int64_t outer = l->numel / l->dims[rank - 1];
    for (int64_t k = 0; k < outer; k++) {
        int64_t go = off[rank - 1];
        for (int d = 0; d < rank - 1; d++)
            go += (off[d] + idx[d]) * gs[d];
        uint8_t *gp = g->data + (size_t)go * eb, *lp = l->data + (size_t)k * run;
        if (how == TO_LOCAL)
            memcpy(lp, gp, run);
        else if (how == TO_GLOBAL)
            memcpy(gp, lp, run);
        else if (memcmp(gp, lp, run))
            return 1;
        for (int d = rank - 2; d >= 0; d--) {
            if (++idx[d] < l->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- running */

int ir__ip_manual_refuse(ip_run *r, const ir_op *op)
{
    const ir_op *mc = r->manual_free;
    return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                          "its value depends on the device, and it is in the body of the sdy.manual_computation at "
                          "%u:%u, %s: which devices it names is not defined there, so it is not evaluated",
                          mc->src_line, mc->src_col,
                          r->manual_nested ? "which is nested in another" : "whose mesh has an axis of size above 1 "
                                                                            "that is not manual (a free axis)");
}

/* Equal dims (a rank-0 value may have no dims array). */
static bool dims_eq(const int64_t *a, const int64_t *b, int rank)
{
    for (int d = 0; d < rank; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

int ir__ip_eval_manual(ip_run *r, ip_frame *fr, const ir_op *op)
{
    char why[300] = "";
    mc_op mc;
    if (op->n_regions != 1 || op->regions[0].n_blocks != 1) {
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one region of one block");
    }
    if (mc_read(r, op, &mc, why, sizeof why) < 0) {
        mc_free(&mc);
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "%s", why);
    }
    const ir_block *body = op->regions[0].first;
    uint32_t n_in = op->n_operands, n_out = op->n_results;
    int rc = 0;
    /* the devices of the manual axes: k in row-major order over them; the
     * free axes at 0 */
    int64_t n_dev = 1;
    bool free_axis = false;
    for (int a = 0; a < mc.mesh.n_axes; a++) {
        if (mc.manual_axis[a])
            n_dev *= mc.mesh.sizes[a];
        else
            free_axis |= mc.mesh.sizes[a] > 1;
    }
    int64_t *ids = ap_malloc(sizeof *ids * (size_t)n_dev), *coords = ap_calloc((size_t)n_dev * MC_MAX_AXES, 8);
    int8_t(*man)[IR_MAX_RANK][MC_MAX_AXES] = ap_calloc((size_t)(n_in + n_out) + 1, sizeof *man);
    uint8_t(*n_man)[IR_MAX_RANK] = ap_calloc((size_t)(n_in + n_out) + 1, sizeof *n_man);
    int64_t(*ldims)[IR_MAX_RANK] = ap_calloc((size_t)(n_in + n_out) + 1, sizeof *ldims);
    const ir_tensor **args = ap_calloc((size_t)n_dev * n_in + 1, sizeof *args);
    ir_tensor **locals = ap_calloc((size_t)n_dev * n_in + 1, sizeof *locals);
    ir_tensor **outs = ap_calloc((size_t)n_dev * n_out + 1, sizeof *outs);
    ir_tensor **res = ap_calloc((size_t)n_out + 1, sizeof *res);
    if (!ids || !coords || !man || !n_man || !ldims || !args || !locals || !outs || !res) {
        rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < n_dev; k++) {
        int64_t x = k, pos = 0, *c = &coords[k * MC_MAX_AXES];
        for (int a = mc.mesh.n_axes - 1; a >= 0; a--)
            if (mc.manual_axis[a]) {
                c[a] = x % mc.mesh.sizes[a];
                x /= mc.mesh.sizes[a];
            }
        for (int a = 0; a < mc.mesh.n_axes; a++)
            pos = pos * mc.mesh.sizes[a] + c[a];
        ids[k] = mc.mesh.ids[pos];
    }
    for (uint32_t i = 0; i < n_in + n_out; i++) {
        bool in = i < n_in;
        uint32_t j = in ? i : i - n_in;
        const ir_type *ty = in ? op->operands[j]->type : op->results[j].type;
        if (local_shape(&mc, in ? &mc.in[j] : &mc.out[j], ty, in ? "operand" : "result", j, man[i], n_man[i],
                        ldims[i], why, sizeof why) < 0) {
            rc = ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "%s", why);
            goto done;
        }
        const ir_type *bt = in ? body->args[j].type : NULL;
        if (bt && ty->kind == IR_T_TOKEN) {
            if (bt->kind != IR_T_TOKEN) {
                rc = ir__ip_fail_op(r, op, -1, AP_EINVALID, "its body's argument %u is not a token", j);
                goto done;
            }
        } else if (bt && (bt->kind != IR_T_TENSOR || bt->rank != ty->rank ||
                   !dims_eq(bt->dims, ldims[i], ty->rank))) {
            rc = ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                "its body's argument %u does not have the local shape its in_sharding gives operand %u",
                                j, j);
            goto done;
        }
    }

    /* inside the body: device-dependent ops refused where the devices are
     * not the mesh's (eval.c); no random rounding, which would make the
     * devices' copies of a replicated value differ; the devices are
     * partitions */
    const ir_op *saved_free = r->manual_free;
    bool saved_nested = r->manual_nested, saved_replicas = r->replicas;
    uint32_t saved_grid = r->grid_np;
    uint64_t saved_rr = r->opts.random_rounding;
    int saved_depth = r->manual_depth;
    if (!r->manual_free && (free_axis || r->manual_depth > 0)) {
        r->manual_free = op;
        r->manual_nested = r->manual_depth > 0;
    }
    r->manual_depth++;
    r->replicas = false;
    r->grid_np = 0;
    r->opts.random_rounding = 0;
    for (uint32_t d = 0; d < fr->n_dev && rc == 0; d++) {
        /* the shards */
        for (uint32_t i = 0; i < n_in && rc == 0; i++) {
            const ir_tensor *g = ir__ip_slot(r, fr, d, op, op->operands[i]);
            if (!g) {
                rc = AP_EINVALID;
                break;
            }
            if (g->kind == IR_TENSOR_TOKEN && op->operands[i]->type->kind == IR_T_TOKEN) {
                for (int64_t k = 0; k < n_dev; k++)
                    args[(size_t)k * n_in + i] = g;
                continue;
            }
            if (g->kind != IR_TENSOR_ARRAY) {
                rc = ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "operand %u is not an array", i);
                break;
            }
            for (int64_t k = 0; k < n_dev && rc == 0; k++) {
                int64_t off[IR_MAX_RANK];
                ap_error e2;
                ir_tensor **t = &locals[(size_t)k * n_in + i];
                if ((rc = ir__tensor_alloc((ir_elem)g->elem, g->rank, ldims[i], r->opts.max_elems, t, &e2)) < 0) {
                    rc = ir__ip_relay(r, op, fr->dev_ids[d], rc, &e2);
                    break;
                }
                block_offsets(&mc.mesh, &coords[k * MC_MAX_AXES], g->rank, man[i], n_man[i], ldims[i], off);
                block_move((ir_tensor *)g, *t, off, TO_LOCAL);
                args[(size_t)k * n_in + i] = *t;
            }
        }
        ip_frame nf;
        if (rc == 0 &&
            (rc = ir__ip_frame_new(r, fr->fn, (uint32_t)n_dev, ids, fr->local, fr->depth + 1, op, &nf)) == 0) {
            nf.borrow_args = true; /* the shards are ours: lent, not copied */
            rc = ir__ip_eval_region(r, &nf, op, &op->regions[0], n_in, args, n_out, outs);
            ir__ip_frame_free(&nf);
        }
        for (size_t k = 0; k < (size_t)n_dev * n_in; k++) {
            ir_tensor_free(locals[k]);
            locals[k] = NULL;
        }
        /* the results put back together */
        for (uint32_t j = 0; j < n_out && rc == 0; j++) {
            uint32_t i = n_in + j;
            const ir_type *ty = op->results[j].type;
            ap_error e2;
            if (ty->kind == IR_T_TOKEN) { /* a token carries no value */
                if (outs[j]->kind != IR_TENSOR_TOKEN) {
                    rc = ir__ip_fail_op(r, op, -1, AP_ETYPE, "its body's result %u is not a token", j);
                    break;
                }
                res[j] = outs[j];
                outs[j] = NULL;
                continue;
            }
            if ((rc = ir__tensor_alloc_type_w(ty, r->opts.max_elems, r->opts.f64, &res[j], &e2)) < 0) {
                rc = ir__ip_relay(r, op, fr->dev_ids[d], rc, &e2);
                break;
            }
            for (int64_t k = 0; k < n_dev && rc == 0; k++) {
                ir_tensor *l = outs[(size_t)k * n_out + j];
                if (l->kind != IR_TENSOR_ARRAY || l->elem != res[j]->elem || l->rank != ty->rank ||
                    !dims_eq(l->dims, ldims[i], ty->rank)) {
                    rc = ir__ip_fail_op(r, op, -1, AP_ETYPE,
                                        "its body's result %u does not have the local shape its out_sharding gives "
                                        "result %u",
                                        j, j);
                    break;
                }
                /* the first device of a block writes it; the others that
                 * hold it (the manual axes the out_sharding leaves out)
                 * must agree */
                const int64_t *c = &coords[k * MC_MAX_AXES];
                bool first = true;
                int unnamed = -1;
                for (int a = 0; a < mc.mesh.n_axes; a++) {
                    if (!mc.manual_axis[a])
                        continue;
                    bool named = false;
                    for (int dd = 0; dd < ty->rank && !named; dd++)
                        for (int kk = 0; kk < n_man[i][dd]; kk++)
                            named |= man[i][dd][kk] == a;
                    if (!named && c[a] != 0) {
                        first = false;
                        unnamed = a;
                    }
                }
                int64_t off[IR_MAX_RANK];
                block_offsets(&mc.mesh, c, ty->rank, man[i], n_man[i], ldims[i], off);
                if (first)
                    block_move(res[j], l, off, TO_GLOBAL);
                else if (block_move(res[j], l, off, SAME))
                    rc = ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                                        "its result %u is replicated along manual axis \"%.*s\" (its out_sharding does "
                                        "not name it), but the devices along that axis computed different values: "
                                        "Shardy gives such a result no value",
                                        j, mc.mesh.names[unnamed].len, mc.mesh.names[unnamed].s);
            }
        }
        for (size_t k = 0; k < (size_t)n_dev * n_out; k++) {
            ir_tensor_free(outs[k]);
            outs[k] = NULL;
        }
        for (uint32_t j = 0; j < n_out; j++) {
            if (rc == 0)
                ir__ip_slot_set(fr, d, &op->results[j], res[j]);
            else
                ir_tensor_free(res[j]);
            res[j] = NULL;
        }
    }
    r->manual_free = saved_free;
    r->manual_nested = saved_nested;
    r->manual_depth = saved_depth;
    r->replicas = saved_replicas;
    r->grid_np = saved_grid;
    r->opts.random_rounding = saved_rr;
done:
    ap_free(ids);
    ap_free(coords);
    ap_free(man);
    ap_free(n_man);
    ap_free(ldims);
    ap_free(args);
    ir_tensors_free(locals, (size_t)n_dev * n_in);
    ir_tensors_free(outs, (size_t)n_dev * n_out);
    ir_tensors_free(res, n_out);
    mc_free(&mc);
    return rc;
}
