/*
 * spmd.c - the SPMD interpreter: splitting global arguments into
 * per-device tiles by their autopart.layout, running the device-local
 * program on every device of the mesh (eval.c, with the collectives of
 * coll.c), and reassembling global results with a check that replicated
 * copies agree bit for bit.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ============================================================== layouts */

/* Per dim of the global tensor, the mesh axes tiling it, major to minor. */
typedef struct tiling {
    int rank;
    int n[IR_MAX_RANK];
    int axes[IR_MAX_RANK][IR_MAX_AXES];
} tiling;

static int tiling_parse(const ir_attr *a, const ir_mesh *mesh, int rank, tiling *t, ap_error *err)
{
    memset(t, 0, sizeof *t);
    t->rank = rank;
    if (!a)
        return 0;
    if (a->kind != IR_A_ARRAY || a->u.arr.n != rank)
        return ap_error_set(err, AP_EINVALID, "autopart.layout must be an array of %d arrays of axis names", rank);
    bool used[IR_MAX_AXES] = {false};
    for (int d = 0; d < rank; d++) {
        const ir_attr *l = a->u.arr.items[d];
        if (l->kind != IR_A_ARRAY || l->u.arr.n > IR_MAX_AXES)
            return ap_error_set(err, AP_EINVALID, "autopart.layout entry %d must be an array of axis names", d);
        for (int k = 0; k < l->u.arr.n; k++) {
            const ir_attr *s = l->u.arr.items[k];
            if (s->kind != IR_A_STRING)
                return ap_error_set(err, AP_EINVALID, "autopart.layout entry %d must hold strings", d);
            int ax = ir_mesh_axis(mesh, s->u.str.s, s->u.str.len);
            if (ax < 0)
                return ap_error_set(err, AP_EINVALID, "autopart.layout names axis '%s', which the mesh does not have",
                                    s->u.str.s);
            if (used[ax])
                return ap_error_set(err, AP_EINVALID, "autopart.layout uses axis '%s' twice", s->u.str.s);
            used[ax] = true;
            t->axes[d][t->n[d]++] = ax;
        }
    }
    return 0;
}

/* Tiles along dim d, and the tile a device holds. */
static int64_t tiling_count(const tiling *t, const ir_mesh *mesh, int d)
{
    int64_t n = 1;
    for (int k = 0; k < t->n[d]; k++)
        n *= mesh->sizes[t->axes[d][k]];
    return n;
}

static int64_t tiling_index(const tiling *t, const ir_mesh *mesh, int d, int64_t dev)
{
    int64_t coord[IR_MAX_AXES], rest = dev;
    for (int a = mesh->n_axes - 1; a >= 0; a--) {
        coord[a] = rest % mesh->sizes[a];
        rest /= mesh->sizes[a];
    }
    int64_t idx = 0;
    for (int k = 0; k < t->n[d]; k++)
        idx = idx * mesh->sizes[t->axes[d][k]] + coord[t->axes[d][k]];
    return idx;
}

/* Copies the box of extent `ext` at `s0` in src to `d0` in dst. */
static void copy_box(ir_tensor *dst, const int64_t *d0, const ir_tensor *src, const int64_t *s0, const int64_t *ext)
{
    int r = src->rank;
    for (int d = 0; d < r; d++)
        if (ext[d] == 0)
            return;
    size_t eb = ip_eb((ir_elem)src->elem);
    if (r == 0) {
        memcpy(dst->data, src->data, eb);
        return;
    }
    /* a row of the box along the last dim is contiguous in both: one copy
     * per row */
    int64_t ds[IR_MAX_RANK], ss[IR_MAX_RANK], bi[IR_MAX_RANK] = {0}, rows[IR_MAX_RANK];
    ip_strides(r, dst->dims, ds);
    ip_strides(r, src->dims, ss);
    for (int d = 0; d < r; d++)
        rows[d] = d < r - 1 ? ext[d] : 1;
    size_t row_bytes = (size_t)ext[r - 1] * eb;
    do {
        int64_t doff = 0, soff = 0;
        for (int d = 0; d < r; d++) {
            doff += (d0[d] + bi[d]) * ds[d];
            soff += (s0[d] + bi[d]) * ss[d];
        }
        memcpy(dst->data + (size_t)doff * eb, src->data + (size_t)soff * eb, row_bytes);
    } while (ip_next(r, rows, bi));
}

static int shard(const ir_tensor *global, const tiling *t, const ir_mesh *mesh, int64_t dev, ir_tensor **out,
                 ap_error *err)
{
    *out = NULL;
    if (global->kind != IR_TENSOR_ARRAY) {
        for (int d = 0; d < t->rank; d++)
            if (t->n[d])
                return ap_error_set(err, AP_EINVALID, "only arrays can be split");
        return ir_tensor_clone(global, out, err);
    }
    int64_t local[IR_MAX_RANK], start[IR_MAX_RANK];
    for (int d = 0; d < global->rank; d++) {
        int64_t n = tiling_count(t, mesh, d);
        if (global->dims[d] % n)
            return ap_error_set(err, AP_EINVALID, "dim %d of size %" PRId64 " does not split into %" PRId64 " tiles", d,
                                global->dims[d], n);
        local[d] = global->dims[d] / n;
        start[d] = tiling_index(t, mesh, d, dev) * local[d];
    }
    int rc = ir_tensor_new((ir_elem)global->elem, global->rank, local, out, err);
    if (rc < 0)
        return rc;
    int64_t zero[IR_MAX_RANK] = {0};
    copy_box(*out, zero, global, start, local);
    return 0;
}

int ir_tensor_shard(const ir_tensor *global, const ir_attr *layout, const ir_mesh *mesh, int64_t device,
                    ir_tensor **out, ap_error *err)
{
    *out = NULL;
    if (device < 0 || device >= ir_mesh_devices(mesh))
        return ap_error_set(err, AP_EINVALID, "device %" PRId64 " is not on the mesh", device);
    tiling t;
    int rc = tiling_parse(layout, mesh, global->kind == IR_TENSOR_ARRAY ? global->rank : 0, &t, err);
    return rc < 0 ? rc : shard(global, &t, mesh, device, out, err);
}

int ir_spmd_mesh(const ir_module *m, ir_mesh *out, ap_error *err)
{
    ir_attr *ms = ir_op_attr(m->top, "autopart.mesh");
    if (!ms || ms->kind != IR_A_STRING)
        return ap_error_set(err, AP_EINVALID, "the module has no autopart.mesh string attribute (not an SPMD module)");
    int rc = ir_mesh_parse(ms->u.str.s, out, err);
    if (rc < 0)
        return rc;
    ir_attr *np = ir_op_attr(m->top, "mhlo.num_partitions");
    if (np && (np->kind != IR_A_INT || np->u.i != ir_mesh_devices(out)))
        return ap_error_set(err, AP_EINVALID,
                            "mhlo.num_partitions is not the %" PRId64 " devices of autopart.mesh \"%s\"",
                            ir_mesh_devices(out), ms->u.str.s);
    return 0;
}

/* Devices of an SPMD module: mhlo.num_partitions, else the mesh's. */
static int module_devices(const ir_module *m, int64_t *n, ap_error *err)
{
    ir_attr *np = ir_op_attr(m->top, "mhlo.num_partitions");
    if (np && np->kind == IR_A_INT && np->u.i >= 1) {
        *n = np->u.i;
        return 0;
    }
    ir_mesh mesh;
    int rc = ir_spmd_mesh(m, &mesh, err);
    if (rc < 0)
        return rc;
    *n = ir_mesh_devices(&mesh);
    return 0;
}

/* ================================================================= runs */

static int run_devices(const ir_module *m, const ir_op *func, uint32_t nd, const ir_tensor *const *args,
                       uint32_t n_args, ir_tensor ***res, uint32_t *n_res, const ir_interp_opts *opts, ap_error *err)
{
    *res = NULL;
    *n_res = 0;
    ip_run r;
    ir__ip_run_init(&r, m, opts, err);
    r.spmd = true;
    int64_t *ids = ap_malloc(sizeof *ids * nd);
    int rc;
    if (!ids) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t d = 0; d < nd; d++)
        ids[d] = d;
    if ((rc = ir__ip_check_args(&r, func, nd, args, n_args)) < 0)
        goto done;
    if ((rc = ir__ip_call(&r, func, nd, ids, 0, false, args, res, NULL)) < 0)
        goto done;
    *n_res = ir_func_entry(func)->last->n_operands;
done:
    ap_free(ids);
    ir__ip_run_free(&r);
    return rc;
}

int ir_spmd_run_local(const ir_module *m, const ir_op *func, uint32_t n_devices, const ir_tensor *const *args,
                      uint32_t n_args, ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts,
                      ap_error *err)
{
    *results = NULL;
    *n_results = 0;
    int64_t nd;
    int rc = module_devices(m, &nd, err);
    if (rc < 0)
        return rc;
    if (nd != (int64_t)n_devices)
        return ap_error_set(err, AP_EINVALID, "the module runs on %" PRId64 " devices, %u given", nd, n_devices);
    return run_devices(m, func, n_devices, args, n_args, results, n_results, opts, err);
}

/* Global index of element i of a device's tile, for messages. */
static void global_index_str(const ir_tensor *local, const int64_t *start, int64_t i, char *buf, size_t size)
{
    int64_t idx[IR_MAX_RANK], rest = i;
    for (int d = local->rank - 1; d >= 0; d--) {
        idx[d] = local->dims[d] ? rest % local->dims[d] : 0;
        rest = local->dims[d] ? rest / local->dims[d] : 0;
    }
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < local->rank && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d ? ", " : "", start[d] + idx[d]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

static void elem_str(const ir_tensor *t, int64_t i, char *buf, size_t size)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_tensor tmp = *t;
    int64_t one = 1;
    tmp.rank = 1;
    tmp.dims = &one;
    tmp.numel = 1;
    tmp.data = t->data + (size_t)i * ip_eb((ir_elem)t->elem);
    tmp.nbytes = ip_eb((ir_elem)t->elem);
    ir_tensor_print(&b, &tmp, 0);
    /* "tensor<1xf32> [v]": keep v */
    const char *s = b.data ? strchr(b.data, '[') : NULL;
    snprintf(buf, size, "%.*s", s ? (int)strlen(s) - 2 : 1, s ? s + 1 : "?");
    ap_buf_free(&b);
}

/* Reassembles result j from every device's tile; replicated copies must
 * be identical. */
static int assemble(const ir_op *func, uint32_t j, const ir_mesh *mesh, const tiling *t, ir_tensor *const *loc,
                    uint32_t n_res, uint32_t nd, ir_tensor **out, ap_error *err)
{
    *out = NULL;
    const ir_tensor *l0 = loc[j];
    if (l0->kind != IR_TENSOR_ARRAY) {
        for (uint32_t d = 1; d < nd; d++)
            if (!ir__tensor_same_type(loc[(size_t)d * n_res + j], l0))
                return ap_error_set(err, AP_ECONFLICT, "result %u of @%s differs in type between devices", j,
                                    ir_func_name(func));
        return ir_tensor_clone(l0, out, err);
    }
    int64_t gdims[IR_MAX_RANK];
    for (int d = 0; d < l0->rank; d++)
        gdims[d] = l0->dims[d] * tiling_count(t, mesh, d);
    int rc = ir_tensor_new((ir_elem)l0->elem, l0->rank, gdims, out, err);
    if (rc < 0)
        return rc;
    /* the first device holding each tile writes it; the others compare */
    int64_t *first = ap_malloc(sizeof *first * nd);
    if (!first) {
        ir_tensor_free(*out);
        *out = NULL;
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    for (uint32_t d = 0; d < nd; d++) {
        const ir_tensor *ld = loc[(size_t)d * n_res + j];
        int64_t start[IR_MAX_RANK];
        for (int k = 0; k < l0->rank; k++)
            start[k] = tiling_index(t, mesh, k, d) * l0->dims[k];
        first[d] = d;
        for (uint32_t e = 0; e < d; e++) {
            bool same_tile = first[e] == e;
            for (int k = 0; k < l0->rank && same_tile; k++)
                same_tile = tiling_index(t, mesh, k, e) == tiling_index(t, mesh, k, d);
            if (same_tile) {
                first[d] = e;
                break;
            }
        }
        if (first[d] == d) {
            copy_box(*out, start, ld, (int64_t[IR_MAX_RANK]){0}, l0->dims);
            continue;
        }
        const ir_tensor *lf = loc[(size_t)first[d] * n_res + j];
        if (ld->nbytes == 0 || memcmp(lf->data, ld->data, ld->nbytes) == 0)
            continue;
        size_t eb = ip_eb((ir_elem)ld->elem);
        int64_t i = 0;
        while (memcmp(lf->data + (size_t)i * eb, ld->data + (size_t)i * eb, eb) == 0)
            i++;
        char where[200], va[64], vb[64];
        global_index_str(ld, start, i, where, sizeof where);
        elem_str(lf, i, va, sizeof va);
        elem_str(ld, i, vb, sizeof vb);
        rc = ap_error_set(err, AP_ECONFLICT,
                          "result %u of @%s: devices %" PRId64
                          " and %u hold replicated copies of one tile but differ at "
                          "global index %s: %s vs %s (a broken partitioning)",
                          j, ir_func_name(func), first[d], d, where, va, vb);
        break;
    }
    ap_free(first);
    if (rc < 0) {
        ir_tensor_free(*out);
        *out = NULL;
    }
    return rc;
}

int ir_spmd_run(const ir_module *m, const ir_op *func, const ir_tensor *const *global_args, uint32_t n_args,
                ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err)
{
    *results = NULL;
    *n_results = 0;
    ir_mesh mesh;
    int rc = ir_spmd_mesh(m, &mesh, err);
    if (rc < 0)
        return rc;
    if (!func || func->opcode != IR_OP_FUNC)
        return ap_error_set(err, AP_EINVALID, "not a func.func");
    if (n_args != ir_func_num_args(func))
        return ap_error_set(err, AP_EINVALID, "@%s takes %u arguments, %u given", ir_func_name(func),
                            ir_func_num_args(func), n_args);
    uint32_t nd = (uint32_t)ir_mesh_devices(&mesh), n_res = 0;
    ir_tensor **local = ap_calloc((size_t)nd * (n_args ? n_args : 1), sizeof *local);
    ir_tensor **lres = NULL, **gres = NULL;
    if (!local)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n_args; i++) {
        tiling t;
        const ir_tensor *g = global_args[i];
        if ((rc = tiling_parse(ir_func_arg_attr(func, i, "autopart.layout"), &mesh,
                               g->kind == IR_TENSOR_ARRAY ? g->rank : 0, &t, err)) < 0)
            goto fail_arg;
        for (uint32_t d = 0; d < nd; d++)
            if ((rc = shard(g, &t, &mesh, d, &local[(size_t)d * n_args + i], err)) < 0)
                goto fail_arg;
        continue;
    fail_arg : {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = ap_error_set(err, rc, "argument %u of @%s: %s", i, ir_func_name(func), msg);
        goto done;
    }
    }
    if ((rc = run_devices(m, func, nd, (const ir_tensor *const *)local, n_args, &lres, &n_res, opts, err)) < 0)
        goto done;
    if (!(gres = ap_calloc(n_res ? n_res : 1, sizeof *gres))) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t j = 0; j < n_res; j++) {
        tiling t;
        const ir_tensor *l0 = lres[j];
        if ((rc = tiling_parse(ir_func_result_attr(func, j, "autopart.layout"), &mesh,
                               l0->kind == IR_TENSOR_ARRAY ? l0->rank : 0, &t, err)) < 0 ||
            (rc = assemble(func, j, &mesh, &t, lres, n_res, nd, &gres[j], err)) < 0)
            goto done;
    }
    *results = gres;
    *n_results = n_res;
    gres = NULL;
done:
    ir_tensors_free(local, nd * n_args);
    ir_tensors_free(lres, nd * n_res);
    ir_tensors_free(gres, n_res);
    return rc;
}
