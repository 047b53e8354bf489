/*
 * scan.c - chlo.scan(%inputs...) inits(%inits...) dimension = d
 * [attributes {is_reverse = ...}] {body}: XLA's scan (CHLO's description:
 * "Applies a reduction function body to inputs and inits along the
 * dimension and produces results (comprising outputs and carries)").  Step
 * t runs along d (from the end when is_reverse): the body takes the inputs'
 * slices at t (d removed) and the carries, and returns the outputs' slices
 * at t and the next carries; the carries start as the inits, and the last
 * ones are the op's carry results.  Results: the outputs, then the carries
 * (as many as inits).  The custom syntax keeps its words as template text
 * (ir.h): which operands are inits and the dimension are read from it, or
 * from the generic form's attributes.
 */
#include "interp_int.h"

#include <stdio.h>
#include <stdlib.h>

/* The inputs' count, the dimension and is_reverse of op. */
static int scan_form(ip_ctx *c, uint32_t *n_in, int64_t *dim, bool *reverse)
{
    const ir_op *op = c->op;
    ir_attr *d = ir_op_attr(op, "dimension"), *seg = ir_op_attr(op, "operandSegmentSizes"),
            *rv = ir_op_attr(op, "is_reverse");
    *reverse = rv && rv->kind == IR_A_BOOL && rv->u.b;
    if (d && d->kind == IR_A_INT && seg) { /* the generic form */
        int64_t s[2];
        if (ir_attr_int_list(seg, s, 2) != 2 || s[0] < 0 || s[1] < 0 || (uint64_t)(s[0] + s[1]) != op->n_operands)
            return ir__ip_fail(c, AP_EINVALID, "operandSegmentSizes do not fit the operands");
        *n_in = (uint32_t)s[0];
        *dim = d->u.i;
        return 0;
    }
    if (!op->tmpl)
        return ir__ip_fail(c, AP_EINVALID, "its dimension and inits were not read");
    /* the custom form: operands before the word `inits` are the inputs;
     * the text outside the region holds `dimension = N` and the
     * attribute dict */
    ap_buf text;
    ap_buf_init(&text);
    bool seen_inits = false;
    uint32_t before = 0;
    for (uint32_t i = 0; i < op->tmpl->n; i++) {
        const ir_tmpl_piece *p = &op->tmpl->pieces[i];
        if (p->kind == IR_TP_TEXT) {
            ap_buf_printf(&text, "%.*s ", (int)p->len, p->text);
            for (uint32_t j = 0; !seen_inits && j + 5 <= p->len; j++)
                seen_inits = !memcmp(p->text + j, "inits", 5);
        } else if (p->kind == IR_TP_OPERAND && !seen_inits)
            before++;
    }
    int rc = 0;
    const char *t = text.data ? text.data : "", *at = strstr(t, "dimension");
    char *end = NULL;
    if (at) {
        at += strlen("dimension");
        while (*at == ' ')
            at++;
        if (*at == '=')
            *dim = strtoll(at + 1, &end, 10);
    }
    if (!seen_inits || !end || end == at + 1)
        rc = ir__ip_fail(c, AP_EINVALID, "its dimension and inits were not read");
    else {
        *n_in = before;
        if (!rv && strstr(t, "is_reverse")) {
            const char *q = strstr(t, "is_reverse") + strlen("is_reverse");
            while (*q == ' ' || *q == '=')
                q++;
            *reverse = !strncmp(q, "true", 4);
        }
    }
    ap_buf_free(&text);
    return rc;
}

/* x as outer x dims[d] x inner rows: how many outer rows, and the bytes
 * of one index along d (the inner elements). */
static void rows_along(const ir_tensor *x, int d, int64_t *outer, size_t *row)
{
    int64_t inner = 1;
    for (int i = d + 1; i < x->rank; i++)
        inner *= x->dims[i];
    *outer = x->numel / (x->dims[d] ? x->dims[d] : 1) / (inner ? inner : 1);
    *row = (size_t)inner * ip_eb((ir_elem)x->elem);
}

/* A new tensor of x with dimension d removed, its index t along d. */
static int slice_at(ip_ctx *c, const ir_tensor *x, int d, int64_t t, ir_tensor **out)
{
    int64_t dims[IR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (i != d)
            dims[r++] = x->dims[i];
    ap_error e2;
    int rc = ir__tensor_alloc((ir_elem)x->elem, r, dims, INT64_MAX, out, &e2);
    if (rc < 0)
        return ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2);
    int64_t outer;
    size_t row;
    rows_along(x, d, &outer, &row);
    for (int64_t o = 0; o < outer && row; o++)
        memcpy((*out)->data + (size_t)o * row, x->data + ((size_t)(o * x->dims[d] + t)) * row, row);
    return 0;
}

/* Writes s (x without dimension d) into x at index t along d. */
static void place_at(ir_tensor *x, int d, int64_t t, const ir_tensor *s)
{
    int64_t outer;
    size_t row;
    rows_along(x, d, &outer, &row);
    for (int64_t o = 0; o < outer && row; o++)
        memcpy(x->data + ((size_t)(o * x->dims[d] + t)) * row, s->data + (size_t)o * row, row);
}

/* Whether s has x's element type and x's dims without d. */
static bool fits_slice(const ir_tensor *x, int d, const ir_tensor *s)
{
    if (s->kind != IR_TENSOR_ARRAY || s->elem != x->elem || s->rank != x->rank - 1)
        return false;
    for (int i = 0, j = 0; i < x->rank; i++)
        if (i != d && x->dims[i] != s->dims[j++])
            return false;
    return true;
}

int ir__ip_k_scan(ip_ctx *c, const ir_tensor *const *in, ir_tensor **out)
{
    const ir_op *op = c->op;
    uint32_t n_in = 0;
    int64_t dim = -1;
    bool reverse = false;
    int rc = scan_form(c, &n_in, &dim, &reverse);
    if (rc < 0)
        return rc;
    uint32_t n_init = op->n_operands - n_in;
    if (op->n_regions != 1 || op->n_results < n_init || n_in + n_init > 2 * IP_MAX_VARIADIC ||
        op->n_results > 2 * IP_MAX_VARIADIC)
        return ir__ip_fail(c, AP_EINVALID, "its operands, results and body do not fit a scan");
    uint32_t n_out = op->n_results - n_init;
    for (uint32_t i = 0; i < op->n_results; i++)
        if ((rc = ir__ip_new_result(c, i, &out[i])) < 0)
            return rc;
    int64_t len = -1;
    for (uint32_t i = 0; i < n_in + n_out; i++) {
        const ir_tensor *x = i < n_in ? in[i] : out[i - n_in];
        if (x->kind != IR_TENSOR_ARRAY || dim < 0 || dim >= x->rank || (len >= 0 && x->dims[dim] != len))
            return ir__ip_fail(c, AP_EINVALID, "inputs and outputs must have dimension %lld of one size",
                               (long long)dim);
        len = x->dims[dim];
    }
    if (len < 0)
        return ir__ip_fail(c, AP_EINVALID, "a scan without inputs or outputs has no length");
    for (uint32_t k = 0; k < n_init; k++)
        if (!ir__tensor_same_type(in[n_in + k], out[n_out + k]))
            return ir__ip_fail(c, AP_ETYPE, "carry %u's result type is not its init's", k);
    ir_tensor *args[2 * IP_MAX_VARIADIC] = {0}, *res[2 * IP_MAX_VARIADIC] = {0};
    ir_tensor *carry[2 * IP_MAX_VARIADIC] = {0};
    for (uint32_t k = 0; k < n_init && rc == 0; k++)
        rc = ir__ip_clone_at(c->run, op, c->fr->dev_ids[c->dev], in[n_in + k], &carry[k]);
    for (int64_t s = 0; s < len && rc == 0; s++) {
        int64_t t = reverse ? len - 1 - s : s;
        for (uint32_t i = 0; i < n_in && rc == 0; i++)
            rc = slice_at(c, in[i], (int)dim, t, &args[i]);
        for (uint32_t k = 0; k < n_init; k++)
            args[n_in + k] = carry[k];
        if (rc == 0)
            rc = c->run->region(c, &op->regions[0], n_in + n_init, (const ir_tensor *const *)args, n_out + n_init,
                                res);
        for (uint32_t i = 0; i < n_in; i++) {
            ir_tensor_free(args[i]);
            args[i] = NULL;
        }
        if (rc < 0)
            break;
        for (uint32_t i = 0; i < n_out && rc == 0; i++) {
            if (!fits_slice(out[i], (int)dim, res[i]))
                rc = ir__ip_fail(c, AP_ETYPE, "the body's result %u is not a slice of output %u", i, i);
            else
                place_at(out[i], (int)dim, t, res[i]);
        }
        for (uint32_t k = 0; k < n_init && rc == 0; k++)
            if (!ir__tensor_same_type(res[n_out + k], carry[k]))
                rc = ir__ip_fail(c, AP_ETYPE, "the body's carry %u changes its type", k);
        for (uint32_t i = 0; i < n_out; i++)
            ir_tensor_free(res[i]);
        for (uint32_t k = 0; k < n_init; k++) {
            ir_tensor_free(rc == 0 ? carry[k] : res[n_out + k]);
            if (rc == 0)
                carry[k] = res[n_out + k];
            res[n_out + k] = NULL;
        }
    }
    for (uint32_t k = 0; k < n_init; k++) {
        if (rc == 0) {
            ir_tensor_free(out[n_out + k]);
            out[n_out + k] = carry[k];
        } else
            ir_tensor_free(carry[k]);
    }
    return rc;
}
