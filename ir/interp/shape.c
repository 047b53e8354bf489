/*
 * shape.c - data-movement kernels of the interpreter: constant,
 * iota, broadcasts, transpose, reshape, reverse, concatenate, slices
 * (static and dynamic, with StableHLO's index clamping), pad (negative and
 * interior padding), gather and scatter (with batching dims and the update
 * region) as the StableHLO spec defines them, torch_index_select,
 * get_dimension_size, and the dynamic_* ops when every shape is static.
 *
 * Every kernel checks the operand and result shapes it relies on before it
 * touches memory: a malformed op is an error, never an out-of-bounds read.
 */
#include "interp_int.h"

#include <inttypes.h>

/* Copies n elements of eb bytes, ds and ss elements apart: the common
 * sizes by a copy of a constant size (a load and a store, not a call). */
static void copy_run(uint8_t *dst, int64_t ds, const uint8_t *src, int64_t ss, int64_t n, size_t eb)
{
#define COPY_RUN(B)                                                                                                \
    for (int64_t i = 0; i < n; i++)                                                                                \
        memcpy(dst + i * ds * (B), src + i * ss * (B), (B));                                                       \
    return
    switch (eb) {
    case 1:
        COPY_RUN(1);
    case 2:
        COPY_RUN(2);
    case 4:
        COPY_RUN(4);
    case 8:
        COPY_RUN(8);
    case 16:
        COPY_RUN(16);
    }
#undef COPY_RUN
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * ds * (int64_t)eb, src + i * ss * (int64_t)eb, eb);
}

/* Copies the box `dims` from src to dst, the last dim innermost; offsets
 * are in elements, strides per dim (may be negative or 0). */
static void copy_box_rows(uint8_t *dst, const int64_t *dstr, int64_t dbase, const uint8_t *src, const int64_t *sstr,
                          int64_t sbase, size_t eb, int rank, const int64_t *dims)
{
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0)
            return;
    if (rank == 0) {
        memcpy(dst + (size_t)dbase * eb, src + (size_t)sbase * eb, eb);
        return;
    }
    int64_t idx[IR_MAX_RANK] = {0};
    int inner = rank - 1;
    int64_t n = dims[inner], ds = dstr[inner], ss = sstr[inner];
    int64_t doff = dbase, soff = sbase;
    for (;;) {
        if (ds == 1 && ss == 1)
            memcpy(dst + (size_t)doff * eb, src + (size_t)soff * eb, (size_t)n * eb);
        else
            copy_run(dst + (size_t)doff * eb, ds, src + (size_t)soff * eb, ss, n, eb);
        int d = inner - 1;
        for (; d >= 0; d--) {
            doff += dstr[d];
            soff += sstr[d];
            if (++idx[d] < dims[d])
                break;
            doff -= dstr[d] * dims[d];
            soff -= sstr[d] * dims[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

/* Tile side of a blocked copy: 32 x 32 elements of up to 16 bytes stay in
 * L1 on both sides. */
#define COPY_TILE 32

/* Copies the box `dims` from src to dst (copy_box_rows).  A transpose
 * reads src across its rows when walking dst's last dim: every element
 * another cache line, each line read again for the next row of dst.  When
 * some other dim p is contiguous in src, the box goes in COPY_TILE x
 * COPY_TILE tiles of (p, last dim), each tile's lines read once. */
static void strided_copy(uint8_t *dst, const int64_t *dstr, int64_t dbase, const uint8_t *src, const int64_t *sstr,
                         int64_t sbase, size_t eb, int rank, const int64_t *dims)
{
    int inner = rank - 1, p = -1;
    if (rank >= 2 && sstr[inner] != 1 && dims[inner] > COPY_TILE)
        for (int d = 0; d < inner && p < 0; d++)
            if (sstr[d] == 1 && dims[d] > 1)
                p = d;
    if (p < 0) {
        copy_box_rows(dst, dstr, dbase, src, sstr, sbase, eb, rank, dims);
        return;
    }
    int64_t sub[IR_MAX_RANK];
    memcpy(sub, dims, sizeof *sub * (size_t)rank);
    for (int64_t i0 = 0; i0 < dims[p]; i0 += COPY_TILE)
        for (int64_t j0 = 0; j0 < dims[inner]; j0 += COPY_TILE) {
            sub[p] = dims[p] - i0 < COPY_TILE ? dims[p] - i0 : COPY_TILE;
            sub[inner] = dims[inner] - j0 < COPY_TILE ? dims[inner] - j0 : COPY_TILE;
            copy_box_rows(dst, dstr, dbase + i0 * dstr[p] + j0 * dstr[inner], src, sstr,
                          sbase + i0 * sstr[p] + j0 * sstr[inner], eb, rank, sub);
        }
}

static bool same_dims(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

static int need_int_scalar(ip_ctx *c, const ir_tensor *t, const char *what)
{
    ip_class k = ir__ip_class((ir_elem)t->elem);
    if (t->kind != IR_TENSOR_ARRAY || t->numel != 1 || (k != IP_S && k != IP_U))
        return ir__ip_fail(c, AP_ETYPE, "%s must be an integer scalar", what);
    return 0;
}

/* An integer vector operand (shape tensors of the dynamic ops). */
static int int_vector(ip_ctx *c, const ir_tensor *t, int64_t n, int64_t *out, const char *what)
{
    ip_class k = ir__ip_class((ir_elem)t->elem);
    if (t->kind != IR_TENSOR_ARRAY || t->rank != 1 || t->dims[0] != n || (k != IP_S && k != IP_U))
        return ir__ip_fail(c, AP_ETYPE, "%s must be an integer vector of %" PRId64 " entries", what, n);
    for (int64_t i = 0; i < n; i++)
        out[i] = ip_index_at(t, i);
    return 0;
}

static int check_dims_equal(ip_ctx *c, const ir_tensor *y, const int64_t *v, const char *what)
{
    for (int d = 0; d < y->rank; d++)
        if (v[d] != y->dims[d])
            return ir__ip_fail(c, AP_EINVALID, "%s gives size %" PRId64 " for dim %d, the result type has %" PRId64,
                               what, v[d], d, y->dims[d]);
    return 0;
}

/* ============================================================= constants */

/* The value of the op's "value" attribute in y (the value's type, or the
 * result type it must have). */
static int fill_constant(ip_ctx *c, const ir_attr *v, ir_tensor *y);

static int constant_attr(ip_ctx *c, const ir_attr **out)
{
    ir_attr *v = ir_op_attr(c->op, "value");
    if (v && v->kind == IR_A_DENSE_RESOURCE)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "dense_resource<%s> constants carry no data", v->u.str.s);
    if (!v || v->kind != IR_A_DENSE)
        return ir__ip_fail(c, AP_EINVALID, "needs a dense value");
    if (v->u.dense.text)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "the elements of this constant could not be decoded");
    *out = v;
    return 0;
}

int ir__ip_k_constant(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_attr *v;
    int rc = constant_attr(c, &v);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    return fill_constant(c, v, out[0]);
}

int ir__ip_op_value(ip_ctx *c, ir_tensor **out)
{
    const ir_attr *v;
    int rc = constant_attr(c, &v);
    if (rc < 0)
        return rc;
    ap_error e2;
    if ((rc = ir__tensor_alloc_type_w(v->type, c->run->opts.max_elems, c->run->opts.f64, out, &e2)) < 0)
        return ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
    if ((rc = fill_constant(c, v, *out)) < 0) {
        ir_tensor_free(*out);
        *out = NULL;
    }
    return rc;
}

static int fill_constant(ip_ctx *c, const ir_attr *v, ir_tensor *y)
{
    if (y->kind != IR_TENSOR_ARRAY || !v->type ||
        ir__ip_wide_elem((ir_elem)v->type->elem, c->run->opts.f64) != y->elem)
        return ir__ip_fail(c, AP_ETYPE, "value and result types differ");
    if (v->type->elem != y->elem) { /* ir_interp_opts.f64: a narrower float's value, exactly */
        ir_elem ve = (ir_elem)v->type->elem;
        size_t veb = ip_eb(ve);
        bool splat = v->u.dense.splat || (y->numel != 1 && v->u.dense.nbytes == veb);
        if (splat ? v->u.dense.nbytes < veb && y->numel > 0 : v->u.dense.nbytes != (size_t)y->numel * veb)
            return ir__ip_fail(c, AP_EINVALID, "constant has %zu bytes, its type needs %zu", v->u.dense.nbytes,
                               (size_t)y->numel * veb);
        for (int64_t i = 0; i < y->numel; i++)
            ip_stf(IR_E_F64, y->data + (size_t)i * 8, ip_ldf(ve, v->u.dense.data + (splat ? 0 : (size_t)i * veb)));
        return 0;
    }
    size_t eb = ip_eb((ir_elem)y->elem);
    if (v->u.dense.splat || (y->numel != 1 && v->u.dense.nbytes == eb)) {
        if (v->u.dense.nbytes < eb && y->numel > 0)
            return ir__ip_fail(c, AP_EINVALID, "splat constant without a value");
        for (int64_t i = 0; i < y->numel; i++)
            memcpy(y->data + (size_t)i * eb, v->u.dense.data, eb);
        return 0;
    }
    if (v->u.dense.nbytes != y->nbytes)
        return ir__ip_fail(c, AP_EINVALID, "constant has %zu bytes, its type needs %zu", v->u.dense.nbytes, y->nbytes);
    if (y->nbytes)
        memcpy(y->data, v->u.dense.data, y->nbytes);
    return 0;
}

static int do_iota(ip_ctx *c, int64_t dim, ir_tensor *y)
{
    if (y->kind != IR_TENSOR_ARRAY || dim < 0 || dim >= y->rank)
        return ir__ip_fail(c, AP_EINVALID, "iota_dimension %" PRId64 " is not a dimension of the result", dim);
    int64_t idx[IR_MAX_RANK] = {0};
    size_t eb = ip_eb((ir_elem)y->elem);
    if (y->numel == 0)
        return 0;
    int64_t i = 0;
    do {
        ir__ip_convert_elem(IR_E_I64, (const uint8_t *)&idx[dim], (ir_elem)y->elem, y->data + (size_t)i * eb);
        i++;
    } while (ip_next(y->rank, y->dims, idx));
    return 0;
}

int ir__ip_k_iota(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t dim;
    int rc = ir__ip_int(c, "iota_dimension", &dim);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    return do_iota(c, dim, out[0]);
}

int ir__ip_k_dynamic_iota(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t dim, shape[IR_MAX_RANK];
    int rc = ir__ip_int(c, "iota_dimension", &dim);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    if ((rc = int_vector(c, in[0], out[0]->rank, shape, "output_shape")) < 0 ||
        (rc = check_dims_equal(c, out[0], shape, "output_shape")) < 0)
        return rc;
    return do_iota(c, dim, out[0]);
}

/* ============================================================ broadcasts */

static int do_broadcast_in_dim(ip_ctx *c, const ir_tensor *x, const int64_t *bd, int nbd, ir_tensor *y)
{
    if (x->kind != IR_TENSOR_ARRAY || nbd != x->rank || x->elem != y->elem)
        return ir__ip_fail(c, AP_EINVALID, "broadcast_dimensions must have one entry per operand dimension");
    int64_t xs[IR_MAX_RANK], sstr[IR_MAX_RANK] = {0}, dstr[IR_MAX_RANK];
    ip_strides(x->rank, x->dims, xs);
    ip_strides(y->rank, y->dims, dstr);
    for (int i = 0; i < x->rank; i++) {
        if (bd[i] < 0 || bd[i] >= y->rank || (x->dims[i] != 1 && x->dims[i] != y->dims[bd[i]]))
            return ir__ip_fail(c, AP_EINVALID,
                               "operand dim %d (size %" PRId64 ") cannot broadcast to result dim %" PRId64, i,
                               x->dims[i], bd[i]);
        for (int j = 0; j < i; j++)
            if (bd[j] == bd[i])
                return ir__ip_fail(c, AP_EINVALID, "broadcast_dimensions repeats %" PRId64, bd[i]);
        if (x->dims[i] != 1)
            sstr[bd[i]] = xs[i];
    }
    strided_copy(y->data, dstr, 0, x->data, sstr, 0, ip_eb((ir_elem)y->elem), y->rank, y->dims);
    return 0;
}

int ir__ip_k_broadcast_in_dim(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t bd[IR_MAX_RANK];
    int n = ir__ip_ints(c, "broadcast_dimensions", bd, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs broadcast_dimensions") : n;
    int rc = ir__ip_new_result(c, 0, &out[0]);
    return rc < 0 ? rc : do_broadcast_in_dim(c, in[0], bd, n, out[0]);
}

int ir__ip_k_dynamic_broadcast_in_dim(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t bd[IR_MAX_RANK], shape[IR_MAX_RANK];
    int n = ir__ip_ints(c, "broadcast_dimensions", bd, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs broadcast_dimensions") : n;
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0 || (rc = int_vector(c, in[1], out[0]->rank, shape, "output_dimensions")) < 0 ||
        (rc = check_dims_equal(c, out[0], shape, "output_dimensions")) < 0)
        return rc;
    return do_broadcast_in_dim(c, in[0], bd, n, out[0]);
}

/* The old stablehlo.broadcast: new major dims broadcast_sizes. */
int ir__ip_k_broadcast(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t sizes[IR_MAX_RANK], bd[IR_MAX_RANK];
    int n = ir__ip_ints(c, "broadcast_sizes", sizes, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs broadcast_sizes") : n;
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    const ir_tensor *x = in[0];
    if (out[0]->rank != n + x->rank)
        return ir__ip_fail(c, AP_ETYPE, "result rank must be the operand rank plus the broadcast sizes");
    for (int i = 0; i < x->rank; i++)
        bd[i] = n + i;
    return do_broadcast_in_dim(c, x, bd, x->rank, out[0]);
}

/* ================================================== transpose, reshape... */

int ir__ip_k_transpose(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t perm[IR_MAX_RANK];
    int n = ir__ip_ints(c, "permutation", perm, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs a permutation") : n;
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    const ir_tensor *x = in[0];
    ir_tensor *y = out[0];
    if (n != x->rank || y->rank != x->rank || x->elem != y->elem)
        return ir__ip_fail(c, AP_EINVALID, "permutation must have one entry per dimension");
    bool seen[IR_MAX_RANK] = {false};
    int64_t xs[IR_MAX_RANK], sstr[IR_MAX_RANK], dstr[IR_MAX_RANK];
    ip_strides(x->rank, x->dims, xs);
    ip_strides(y->rank, y->dims, dstr);
    for (int d = 0; d < n; d++) {
        if (perm[d] < 0 || perm[d] >= n || seen[perm[d]] || y->dims[d] != x->dims[perm[d]])
            return ir__ip_fail(c, AP_EINVALID, "permutation does not map the operand onto the result");
        seen[perm[d]] = true;
        sstr[d] = xs[perm[d]];
    }
    strided_copy(y->data, dstr, 0, x->data, sstr, 0, ip_eb((ir_elem)y->elem), y->rank, y->dims);
    return 0;
}

int ir__ip_k_reshape(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    if (in[0]->kind != IR_TENSOR_ARRAY || in[0]->elem != out[0]->elem || in[0]->numel != out[0]->numel)
        return ir__ip_fail(c, AP_ETYPE, "operand and result must have the same element type and count");
    if (out[0]->nbytes)
        memcpy(out[0]->data, in[0]->data, out[0]->nbytes);
    return 0;
}

int ir__ip_k_dynamic_reshape(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t shape[IR_MAX_RANK];
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0 || (rc = int_vector(c, in[1], out[0]->rank, shape, "output_shape")) < 0 ||
        (rc = check_dims_equal(c, out[0], shape, "output_shape")) < 0)
        return rc;
    ir_tensor_free(out[0]);
    out[0] = NULL;
    return ir__ip_k_reshape(c, in, out);
}

int ir__ip_k_reverse(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t dims[IR_MAX_RANK];
    int n = ir__ip_ints(c, "dimensions", dims, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs dimensions") : n;
    int rc = ir__ip_new_result(c, 0, &out[0]);
    if (rc < 0)
        return rc;
    const ir_tensor *x = in[0];
    ir_tensor *y = out[0];
    if (!ir__tensor_same_type(x, y))
        return ir__ip_fail(c, AP_ETYPE, "operand and result types differ");
    int64_t sstr[IR_MAX_RANK], dstr[IR_MAX_RANK], base = 0;
    ip_strides(x->rank, x->dims, sstr);
    ip_strides(y->rank, y->dims, dstr);
    bool rev[IR_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= x->rank || rev[dims[i]])
            return ir__ip_fail(c, AP_EINVALID, "dimension %" PRId64 " is out of range or repeated", dims[i]);
        rev[dims[i]] = true;
    }
    if (x->numel == 0)
        return 0;
    for (int d = 0; d < x->rank; d++)
        if (rev[d]) {
            base += (x->dims[d] - 1) * sstr[d];
            sstr[d] = -sstr[d];
        }
    strided_copy(y->data, dstr, 0, x->data, sstr, base, ip_eb((ir_elem)y->elem), y->rank, y->dims);
    return 0;
}

int ir__ip_k_concatenate(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t dim;
    int rc = ir__ip_int(c, "dimension", &dim);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    ir_tensor *y = out[0];
    if (dim < 0 || dim >= y->rank)
        return ir__ip_fail(c, AP_EINVALID, "dimension %" PRId64 " is out of range", dim);
    int64_t total = 0;
    for (uint32_t i = 0; i < c->op->n_operands; i++) {
        const ir_tensor *x = in[i];
        if (x->kind != IR_TENSOR_ARRAY || x->elem != y->elem || x->rank != y->rank)
            return ir__ip_fail(c, AP_ETYPE, "operand %u does not match the result", i);
        for (int d = 0; d < y->rank; d++)
            if (d != dim && x->dims[d] != y->dims[d])
                return ir__ip_fail(c, AP_ETYPE, "operand %u differs from the result outside the dimension", i);
        total += x->dims[dim];
    }
    if (total != y->dims[dim])
        return ir__ip_fail(c, AP_ETYPE, "operands add up to %" PRId64 " along dim %" PRId64 ", the result has %" PRId64,
                           total, dim, y->dims[dim]);
    int64_t dstr[IR_MAX_RANK], sstr[IR_MAX_RANK], off = 0;
    ip_strides(y->rank, y->dims, dstr);
    for (uint32_t i = 0; i < c->op->n_operands; i++) {
        const ir_tensor *x = in[i];
        ip_strides(x->rank, x->dims, sstr);
        strided_copy(y->data, dstr, off * dstr[dim], x->data, sstr, 0, ip_eb((ir_elem)y->elem), x->rank, x->dims);
        off += x->dims[dim];
    }
    return 0;
}

/* ================================================================ slices */

static int do_slice(ip_ctx *c, const ir_tensor *x, const int64_t *start, const int64_t *limit, const int64_t *stride,
                    ir_tensor *y)
{
    if (x->kind != IR_TENSOR_ARRAY || x->rank != y->rank || x->elem != y->elem)
        return ir__ip_fail(c, AP_ETYPE, "operand and result ranks or element types differ");
    int64_t xs[IR_MAX_RANK], sstr[IR_MAX_RANK], dstr[IR_MAX_RANK], base = 0;
    ip_strides(x->rank, x->dims, xs);
    ip_strides(y->rank, y->dims, dstr);
    for (int d = 0; d < x->rank; d++) {
        if (start[d] < 0 || start[d] > limit[d] || limit[d] > x->dims[d] || stride[d] < 1)
            return ir__ip_fail(c, AP_EINVALID,
                               "slice [%" PRId64 ":%" PRId64 ":%" PRId64 "] of dim %d (size %" PRId64 ") is invalid",
                               start[d], limit[d], stride[d], d, x->dims[d]);
        int64_t n = (limit[d] - start[d] + stride[d] - 1) / stride[d];
        if (n != y->dims[d])
            return ir__ip_fail(c, AP_ETYPE, "slice of dim %d has %" PRId64 " elements, the result %" PRId64, d, n,
                               y->dims[d]);
        base += start[d] * xs[d];
        sstr[d] = stride[d] * xs[d];
    }
    strided_copy(y->data, dstr, 0, x->data, sstr, base, ip_eb((ir_elem)y->elem), y->rank, y->dims);
    return 0;
}

int ir__ip_k_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t s[IR_MAX_RANK], l[IR_MAX_RANK], st[IR_MAX_RANK];
    int ns = ir__ip_ints(c, "start_indices", s, IR_MAX_RANK, -1);
    int nl = ir__ip_ints(c, "limit_indices", l, IR_MAX_RANK, -1);
    int nst = ir__ip_ints(c, "strides", st, IR_MAX_RANK, -2);
    if (ns < -2 || nl < -2 || nst < -2)
        return ns < -2 ? ns : nl < -2 ? nl : nst;
    if (nst == -2) {
        nst = in[0]->rank;
        for (int d = 0; d < nst; d++)
            st[d] = 1;
    }
    if (ns != in[0]->rank || nl != ns || nst != ns)
        return ir__ip_fail(c, AP_EINVALID, "start, limit and strides need one entry per dimension");
    int rc = ir__ip_new_result(c, 0, &out[0]);
    return rc < 0 ? rc : do_slice(c, in[0], s, l, st, out[0]);
}

int ir__ip_k_real_dynamic_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t s[IR_MAX_RANK], l[IR_MAX_RANK], st[IR_MAX_RANK];
    int r = in[0]->rank, rc;
    if ((rc = int_vector(c, in[1], r, s, "start_indices")) < 0 ||
        (rc = int_vector(c, in[2], r, l, "limit_indices")) < 0 || (rc = int_vector(c, in[3], r, st, "strides")) < 0 ||
        (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    return do_slice(c, in[0], s, l, st, out[0]);
}

/* Start indices clamped so the slice fits: clamp(i, 0, dim - size). */
static int clamped_starts(ip_ctx *c, const ir_tensor *const *idx, const ir_tensor *x, const int64_t *sizes,
                          int64_t *start)
{
    for (int d = 0; d < x->rank; d++) {
        int rc = need_int_scalar(c, idx[d], "a start index");
        if (rc < 0)
            return rc;
        if (sizes[d] < 0 || sizes[d] > x->dims[d])
            return ir__ip_fail(c, AP_EINVALID, "size %" PRId64 " of dim %d exceeds the operand's %" PRId64, sizes[d], d,
                               x->dims[d]);
        int64_t v = ip_index_at(idx[d], 0), hi = x->dims[d] - sizes[d];
        if (ir__ip_class((ir_elem)idx[d]->elem) == IP_U && v < 0)
            v = INT64_MAX; /* a huge unsigned index */
        start[d] = v < 0 ? 0 : v > hi ? hi : v;
    }
    return 0;
}

int ir__ip_k_dynamic_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0];
    int64_t sizes[IR_MAX_RANK], start[IR_MAX_RANK], limit[IR_MAX_RANK], one[IR_MAX_RANK];
    int n = ir__ip_ints(c, "slice_sizes", sizes, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs slice_sizes") : n;
    if (x->kind != IR_TENSOR_ARRAY || n != x->rank || c->op->n_operands != (uint32_t)x->rank + 1)
        return ir__ip_fail(c, AP_EINVALID, "needs one start index and one slice size per dimension");
    int rc = clamped_starts(c, in + 1, x, sizes, start);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    for (int d = 0; d < n; d++) {
        limit[d] = start[d] + sizes[d];
        one[d] = 1;
    }
    return do_slice(c, x, start, limit, one, out[0]);
}

int ir__ip_k_dynamic_update_slice(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0], *u = in[1];
    if (x->kind != IR_TENSOR_ARRAY || u->kind != IR_TENSOR_ARRAY || u->rank != x->rank || u->elem != x->elem ||
        c->op->n_operands != (uint32_t)x->rank + 2)
        return ir__ip_fail(c, AP_EINVALID, "needs an update of the operand's rank and one start index per dimension");
    int64_t start[IR_MAX_RANK];
    int rc = clamped_starts(c, in + 2, x, u->dims, start);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    ir_tensor *y = out[0];
    if (!ir__tensor_same_type(x, y))
        return ir__ip_fail(c, AP_ETYPE, "operand and result types differ");
    if (y->nbytes)
        memcpy(y->data, x->data, y->nbytes);
    int64_t dstr[IR_MAX_RANK], sstr[IR_MAX_RANK], base = 0;
    ip_strides(y->rank, y->dims, dstr);
    ip_strides(u->rank, u->dims, sstr);
    for (int d = 0; d < y->rank; d++)
        base += start[d] * dstr[d];
    strided_copy(y->data, dstr, base, u->data, sstr, 0, ip_eb((ir_elem)y->elem), u->rank, u->dims);
    return 0;
}

/* =================================================================== pad */

static int do_pad(ip_ctx *c, const ir_tensor *x, const ir_tensor *pv, const int64_t *lo, const int64_t *hi,
                  const int64_t *interior, ir_tensor *y)
{
    if (x->kind != IR_TENSOR_ARRAY || pv->kind != IR_TENSOR_ARRAY || pv->numel != 1 || pv->elem != x->elem ||
        y->rank != x->rank || y->elem != x->elem)
        return ir__ip_fail(c, AP_ETYPE, "needs a scalar padding value of the operand's element type");
    for (int d = 0; d < x->rank; d++) {
        if (interior[d] < 0)
            return ir__ip_fail(c, AP_EINVALID, "interior padding of dim %d is negative", d);
        int64_t n = lo[d] + hi[d] + x->dims[d] + (x->dims[d] > 0 ? (x->dims[d] - 1) * interior[d] : 0);
        if (n != y->dims[d])
            return ir__ip_fail(c, AP_ETYPE, "padded dim %d has %" PRId64 " elements, the result %" PRId64, d, n,
                               y->dims[d]);
    }
    size_t eb = ip_eb((ir_elem)y->elem);
    for (int64_t i = 0; i < y->numel; i++)
        memcpy(y->data + (size_t)i * eb, pv->data, eb);
    if (x->numel == 0)
        return 0;
    int64_t ys[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    ip_strides(y->rank, y->dims, ys);
    int64_t i = 0;
    do {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < x->rank && inside; d++) {
            int64_t p = lo[d] + idx[d] * (interior[d] + 1);
            inside = p >= 0 && p < y->dims[d];
            off += p * ys[d];
        }
        if (inside)
            memcpy(y->data + (size_t)off * eb, x->data + (size_t)i * eb, eb);
        i++;
    } while (ip_next(x->rank, x->dims, idx));
    return 0;
}

int ir__ip_k_pad(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t lo[IR_MAX_RANK], hi[IR_MAX_RANK], inter[IR_MAX_RANK];
    int r = in[0]->rank;
    int nl = ir__ip_ints(c, "edge_padding_low", lo, IR_MAX_RANK, -1);
    int nh = ir__ip_ints(c, "edge_padding_high", hi, IR_MAX_RANK, -1);
    int ni = ir__ip_ints(c, "interior_padding", inter, IR_MAX_RANK, -1);
    if (nl < -1 || nh < -1 || ni < -1)
        return nl < -1 ? nl : nh < -1 ? nh : ni;
    if (nl != r || nh != r || ni != r)
        return ir__ip_fail(c, AP_EINVALID, "padding needs one entry per dimension");
    int rc = ir__ip_new_result(c, 0, &out[0]);
    return rc < 0 ? rc : do_pad(c, in[0], in[1], lo, hi, inter, out[0]);
}

int ir__ip_k_dynamic_pad(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t lo[IR_MAX_RANK], hi[IR_MAX_RANK], inter[IR_MAX_RANK];
    int r = in[0]->rank, rc;
    if ((rc = int_vector(c, in[2], r, lo, "edge_padding_low")) < 0 ||
        (rc = int_vector(c, in[3], r, hi, "edge_padding_high")) < 0 ||
        (rc = int_vector(c, in[4], r, inter, "interior_padding")) < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    return do_pad(c, in[0], in[1], lo, hi, inter, out[0]);
}

/* ================================================================ gather */

static bool in_list(int64_t v, const int64_t *l, int n)
{
    for (int i = 0; i < n; i++)
        if (l[i] == v)
            return true;
    return false;
}

/* The index-vector coordinates of a batch position: `batch` are the result's
 * (or updates') scatter/batch coordinates in order, `ivd` where the vector
 * dim sits in the indices tensor; returns the offset of element k = 0 and
 * the stride between vector elements. */
static int64_t index_vector_at(const ir_tensor *ix, int64_t ivd, const int64_t *batch, int64_t *vstride)
{
    int64_t st[IR_MAX_RANK], off = 0;
    ip_strides(ix->rank, ix->dims, st);
    for (int j = 0, b = 0; j < ix->rank; j++) {
        if (j == ivd)
            continue;
        off += batch[b++] * st[j];
    }
    *vstride = ivd < ix->rank ? st[ivd] : 0;
    return off;
}

static int do_gather(ip_ctx *c, const ir_tensor *x, const ir_tensor *ix, const int64_t *ss, int nss, ir_tensor *y)
{
    ir_gather_dims g;
    if (ir_gather_dims_get(c->op, &g) < 0)
        return ir__ip_fail(c, AP_EINVALID, "has unreadable dimension numbers");
    ip_class ik = ir__ip_class((ir_elem)ix->elem);
    if (x->kind != IR_TENSOR_ARRAY || ix->kind != IR_TENSOR_ARRAY || (ik != IP_S && ik != IP_U) || y->elem != x->elem)
        return ir__ip_fail(c, AP_ETYPE, "needs integer start indices and a result of the operand's element type");
    int64_t ivd = g.index_vector_dim;
    if (ivd < 0 || ivd > ix->rank || nss != x->rank)
        return ir__ip_fail(c, AP_EINVALID, "index_vector_dim or slice_sizes do not fit the operands");
    int64_t nvec = ivd < ix->rank ? ix->dims[ivd] : 1;
    int n_batch_res = y->rank - g.n_offset;
    if (nvec != g.n_start_index_map || g.n_offset + g.n_collapsed + g.n_operand_batching != x->rank ||
        n_batch_res != ix->rank - (ivd < ix->rank ? 1 : 0) || g.n_operand_batching != g.n_start_indices_batching)
        return ir__ip_fail(c, AP_EINVALID, "dimension numbers do not fit the operand, indices and result ranks");
    int64_t batch_dims[IR_MAX_RANK], offset_operand[IR_MAX_RANK];
    for (int d = 0, k = 0; d < y->rank; d++)
        if (!in_list(d, g.offset_dims, g.n_offset))
            batch_dims[k++] = d;
    for (int d = 0, k = 0; d < x->rank; d++)
        if (!in_list(d, g.collapsed_slice_dims, g.n_collapsed) &&
            !in_list(d, g.operand_batching_dims, g.n_operand_batching))
            offset_operand[k++] = d;
    for (int d = 0; d < x->rank; d++)
        if (ss[d] < 0 || ss[d] > x->dims[d])
            return ir__ip_fail(c, AP_EINVALID, "slice size %" PRId64 " of dim %d exceeds the operand's %" PRId64, ss[d],
                               d, x->dims[d]);
    for (int k = 0; k < g.n_offset; k++)
        if (g.offset_dims[k] < 0 || g.offset_dims[k] >= y->rank || y->dims[g.offset_dims[k]] != ss[offset_operand[k]])
            return ir__ip_fail(c, AP_ETYPE, "offset dim %d of the result does not have its slice size", k);
    for (int k = 0, j = 0; j < ix->rank; j++) {
        if (j == ivd)
            continue;
        if (y->dims[batch_dims[k++]] != ix->dims[j])
            return ir__ip_fail(c, AP_ETYPE, "batch dims of the result do not match the indices");
    }
    for (int k = 0; k < g.n_start_index_map; k++)
        if (g.start_index_map[k] < 0 || g.start_index_map[k] >= x->rank)
            return ir__ip_fail(c, AP_EINVALID, "start_index_map names a dim out of range");
    for (int i = 0; i < g.n_operand_batching; i++)
        if (g.operand_batching_dims[i] < 0 || g.operand_batching_dims[i] >= x->rank ||
            g.start_indices_batching_dims[i] < 0 || g.start_indices_batching_dims[i] >= ix->rank ||
            g.start_indices_batching_dims[i] == ivd)
            return ir__ip_fail(c, AP_EINVALID, "batching dims out of range");
    if (y->numel == 0)
        return 0;
    int64_t xs[IR_MAX_RANK];
    ip_strides(x->rank, x->dims, xs);
    size_t eb = ip_eb((ir_elem)y->elem);
    int64_t ri[IR_MAX_RANK] = {0}, bi[IR_MAX_RANK], xi[IR_MAX_RANK];
    int64_t i = 0;
    do {
        for (int k = 0; k < n_batch_res; k++)
            bi[k] = ri[batch_dims[k]];
        int64_t vs, voff = index_vector_at(ix, ivd, bi, &vs);
        for (int d = 0; d < x->rank; d++)
            xi[d] = 0;
        for (int k = 0; k < g.n_start_index_map; k++) {
            int64_t d = g.start_index_map[k], v = ip_index_at(ix, voff + k * vs), hi = x->dims[d] - ss[d];
            if (ik == IP_U && v < 0)
                v = INT64_MAX;
            xi[d] += v < 0 ? 0 : v > hi ? hi : v;
        }
        for (int k = 0; k < g.n_operand_batching; k++) {
            int64_t ds = g.start_indices_batching_dims[k];
            xi[g.operand_batching_dims[k]] += bi[ds < ivd ? ds : ds - 1];
        }
        for (int k = 0; k < g.n_offset; k++)
            xi[offset_operand[k]] += ri[g.offset_dims[k]];
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++) {
            if (xi[d] < 0 || xi[d] >= x->dims[d])
                return ir__ip_fail(c, AP_EINVALID, "operand index %" PRId64 " of dim %d is out of bounds", xi[d], d);
            off += xi[d] * xs[d];
        }
        memcpy(y->data + (size_t)i * eb, x->data + (size_t)off * eb, eb);
        i++;
    } while (ip_next(y->rank, y->dims, ri));
    return 0;
}

int ir__ip_k_gather(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t ss[IR_MAX_RANK];
    int n = ir__ip_ints(c, "slice_sizes", ss, IR_MAX_RANK, -1);
    if (n < 0)
        return n == -1 ? ir__ip_fail(c, AP_EINVALID, "needs slice_sizes") : n;
    int rc = ir__ip_new_result(c, 0, &out[0]);
    return rc < 0 ? rc : do_gather(c, in[0], in[1], ss, n, out[0]);
}

int ir__ip_k_dynamic_gather(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t ss[IR_MAX_RANK];
    int rc = int_vector(c, in[2], in[0]->rank, ss, "slice_sizes");
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    return do_gather(c, in[0], in[1], ss, in[0]->rank, out[0]);
}

/* =============================================================== scatter */

int ir__ip_k_scatter(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    uint32_t n = (op->n_operands - 1) / 2;
    if (op->n_operands != 2 * n + 1 || n == 0 || op->n_results != n || op->n_regions != 1)
        return ir__ip_fail(c, AP_EINVALID, "needs N inputs, indices, N updates, N results and an update region");
    if (n > IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "has %u inputs; at most %d are supported", n, IP_MAX_VARIADIC);
    ir_scatter_dims s;
    if (ir_scatter_dims_get(op, &s) < 0)
        return ir__ip_fail(c, AP_EINVALID, "has unreadable dimension numbers");
    const ir_tensor *const *xs = in, *ix = in[n], *const *us = in + n + 1;
    ip_class ik = ir__ip_class((ir_elem)ix->elem);
    if (ix->kind != IR_TENSOR_ARRAY || (ik != IP_S && ik != IP_U))
        return ir__ip_fail(c, AP_ETYPE, "scatter indices must be integers");
    ir_elem elems[IP_MAX_VARIADIC];
    int rc;
    for (uint32_t k = 0; k < n; k++) {
        if (xs[k]->kind != IR_TENSOR_ARRAY || !same_dims(xs[k], xs[0]) || us[k]->kind != IR_TENSOR_ARRAY ||
            !same_dims(us[k], us[0]) || us[k]->elem != xs[k]->elem)
            return ir__ip_fail(c, AP_ETYPE, "inputs (updates) must share one shape and pair up in element type");
        elems[k] = (ir_elem)xs[k]->elem;
        if ((rc = ir__ip_new_result(c, k, &out[k])) < 0)
            return rc;
        if (!ir__tensor_same_type(out[k], xs[k]))
            return ir__ip_fail(c, AP_ETYPE, "result %u differs from its input", k);
        if (out[k]->nbytes)
            memcpy(out[k]->data, xs[k]->data, out[k]->nbytes);
    }
    const ir_tensor *x = xs[0], *u = us[0];
    int64_t ivd = s.index_vector_dim;
    if (ivd < 0 || ivd > ix->rank)
        return ir__ip_fail(c, AP_EINVALID, "index_vector_dim is out of range");
    int64_t nvec = ivd < ix->rank ? ix->dims[ivd] : 1;
    int n_scatter = u->rank - s.n_update_window;
    if (nvec != s.n_scatter_to_operand || n_scatter != ix->rank - (ivd < ix->rank ? 1 : 0) ||
        s.n_update_window + s.n_inserted_window + s.n_input_batching != x->rank ||
        s.n_input_batching != s.n_scatter_indices_batching)
        return ir__ip_fail(c, AP_EINVALID, "dimension numbers do not fit the inputs, indices and updates");
    int64_t scatter_dims[IR_MAX_RANK], window_operand[IR_MAX_RANK];
    for (int d = 0, k = 0; d < u->rank; d++)
        if (!in_list(d, s.update_window_dims, s.n_update_window))
            scatter_dims[k++] = d;
    for (int d = 0, k = 0; d < x->rank; d++)
        if (!in_list(d, s.inserted_window_dims, s.n_inserted_window) &&
            !in_list(d, s.input_batching_dims, s.n_input_batching))
            window_operand[k++] = d;
    for (int k = 0, j = 0; j < ix->rank; j++) {
        if (j == ivd)
            continue;
        if (u->dims[scatter_dims[k++]] != ix->dims[j])
            return ir__ip_fail(c, AP_ETYPE, "scatter dims of the updates do not match the indices");
    }
    for (int k = 0; k < s.n_update_window; k++)
        if (s.update_window_dims[k] < 0 || s.update_window_dims[k] >= u->rank)
            return ir__ip_fail(c, AP_EINVALID, "update_window_dims out of range");
    for (int k = 0; k < s.n_scatter_to_operand; k++)
        if (s.scatter_dims_to_operand_dims[k] < 0 || s.scatter_dims_to_operand_dims[k] >= x->rank)
            return ir__ip_fail(c, AP_EINVALID, "scatter_dims_to_operand_dims out of range");
    for (int i = 0; i < s.n_input_batching; i++)
        if (s.input_batching_dims[i] < 0 || s.input_batching_dims[i] >= x->rank ||
            s.scatter_indices_batching_dims[i] < 0 || s.scatter_indices_batching_dims[i] >= ix->rank ||
            s.scatter_indices_batching_dims[i] == ivd)
            return ir__ip_fail(c, AP_EINVALID, "batching dims out of range");
    if (u->numel == 0)
        return 0;
    ip_reducer rd;
    if ((rc = ir__ip_reducer_init(&rd, c, &op->regions[0], n, elems, NULL)) < 0)
        return rc;
    int64_t xst[IR_MAX_RANK];
    ip_strides(x->rank, x->dims, xst);
    int64_t ui[IR_MAX_RANK] = {0}, si[IR_MAX_RANK], ri[IR_MAX_RANK];
    int64_t i = 0;
    /* split_sums: updates that add or multiply apply last to first */
    ir_opcode body = ir_region_reduction(&op->regions[0]);
    bool reverse = c->run->opts.split_sums > 1 && (body == IR_OP_ADD || body == IR_OP_MULTIPLY);
    if (reverse) {
        for (int d = 0; d < u->rank; d++)
            ui[d] = u->dims[d] - 1;
        i = u->numel - 1;
    }
    do {
        for (int k = 0; k < n_scatter; k++)
            si[k] = ui[scatter_dims[k]];
        int64_t vs, voff = index_vector_at(ix, ivd, si, &vs);
        for (int d = 0; d < x->rank; d++)
            ri[d] = 0;
        for (int k = 0; k < s.n_scatter_to_operand; k++) {
            int64_t v = ip_index_at(ix, voff + k * vs);
            if (ik == IP_U && v < 0)
                v = INT64_MAX / 2;
            ri[s.scatter_dims_to_operand_dims[k]] += v;
        }
        for (int k = 0; k < s.n_input_batching; k++) {
            int64_t ds = s.scatter_indices_batching_dims[k];
            ri[s.input_batching_dims[k]] += si[ds < ivd ? ds : ds - 1];
        }
        for (int k = 0; k < s.n_update_window; k++)
            ri[window_operand[k]] += ui[s.update_window_dims[k]];
        /* updates that land outside the input are skipped (the spec) */
        bool inside = true;
        int64_t off = 0;
        for (int d = 0; d < x->rank && inside; d++) {
            inside = ri[d] >= 0 && ri[d] < x->dims[d];
            off += ri[d] * xst[d];
        }
        if (inside) {
            uint8_t *acc[IP_MAX_VARIADIC];
            const uint8_t *val[IP_MAX_VARIADIC];
            for (uint32_t k = 0; k < n; k++) {
                acc[k] = out[k]->data + (size_t)off * ip_eb(elems[k]);
                val[k] = us[k]->data + (size_t)i * ip_eb(elems[k]);
            }
            if ((rc = ir__ip_reduce_step(&rd, acc, val)) < 0)
                break;
        }
        i += reverse ? -1 : 1;
    } while (reverse ? ip_prev(u->rank, u->dims, ui) : ip_next(u->rank, u->dims, ui));
    ir__ip_reducer_free(&rd);
    return rc;
}

/* ===================================================== small index ops */

/* torch_index_select(operand, index, dim, batch_dims): result shape
 * operand[:dim] ++ index[batch_dims:] ++ operand[dim+1:]; the first
 * batch_dims dims are shared by operand and index. */
int ir__ip_k_torch_index_select(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_tensor *x = in[0], *ix = in[1];
    int64_t dim, bd;
    int rc = ir__ip_int(c, "dim", &dim);
    if (rc < 0 || (rc = ir__ip_int(c, "batch_dims", &bd)) < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    ir_tensor *y = out[0];
    ip_class ik = ir__ip_class((ir_elem)ix->elem);
    if (dim < 0 || dim >= x->rank || bd < 0 || bd > dim || bd > ix->rank || (ik != IP_S && ik != IP_U) ||
        y->elem != x->elem || y->rank != x->rank - 1 + ix->rank - bd)
        return ir__ip_fail(c, AP_EINVALID, "dim, batch_dims and the shapes do not fit");
    int64_t ni = ix->rank - bd;
    for (int d = 0; d < y->rank; d++) {
        int64_t want = d < dim ? x->dims[d] : d < dim + ni ? ix->dims[bd + d - dim] : x->dims[d - ni + 1];
        if (y->dims[d] != want)
            return ir__ip_fail(c, AP_ETYPE, "result dim %d should have size %" PRId64, d, want);
    }
    for (int d = 0; d < bd; d++)
        if (ix->dims[d] != x->dims[d])
            return ir__ip_fail(c, AP_ETYPE, "batch dim %d differs between operand and index", d);
    if (y->numel == 0)
        return 0;
    int64_t xs[IR_MAX_RANK], is[IR_MAX_RANK], ri[IR_MAX_RANK] = {0};
    ip_strides(x->rank, x->dims, xs);
    ip_strides(ix->rank, ix->dims, is);
    size_t eb = ip_eb((ir_elem)y->elem);
    int64_t i = 0;
    do {
        int64_t ioff = 0;
        for (int d = 0; d < ix->rank; d++)
            ioff += (d < bd ? ri[d] : ri[dim + d - bd]) * is[d];
        int64_t sel = ip_index_at(ix, ioff);
        if (sel < 0 || sel >= x->dims[dim])
            return ir__ip_fail(c, AP_EINVALID,
                               "index %" PRId64 " is out of bounds for dim %" PRId64 " of size %" PRId64, sel, dim,
                               x->dims[dim]);
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++)
            off += (d < dim ? ri[d] : d == dim ? sel : ri[d - 1 + ni]) * xs[d];
        memcpy(y->data + (size_t)i * eb, x->data + (size_t)off * eb, eb);
        i++;
    } while (ip_next(y->rank, y->dims, ri));
    return 0;
}

int ir__ip_k_get_dimension_size(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    int64_t dim;
    int rc = ir__ip_int(c, "dimension", &dim);
    if (rc < 0 || (rc = ir__ip_new_result(c, 0, &out[0])) < 0)
        return rc;
    if (in[0]->kind != IR_TENSOR_ARRAY || dim < 0 || dim >= in[0]->rank || out[0]->numel != 1)
        return ir__ip_fail(c, AP_EINVALID, "dimension %" PRId64 " is out of range", dim);
    ir_tensor_set_i64(out[0], 0, in[0]->dims[dim]);
    return 0;
}
