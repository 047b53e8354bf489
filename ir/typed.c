/*
 * typed.c - typed views of the structured attributes (dot, convolution,
 * gather and scatter dimension numbers, comparison direction, reduction
 * bodies) that later passes read.  Each accessor accepts every spelling the
 * parser keeps (new and old attribute styles).
 */
#include "ir_int.h"

#include <stdio.h>
#include <stdlib.h>

static int param_list(const ir_attr *dia, const char *name, int64_t *out, int *n)
{
    ir_attr *a = ir_dialect_param(dia, name);
    if (!a) {
        *n = 0;
        return 0;
    }
    int k = ir_attr_int_list(a, out, IR_MAX_RANK);
    if (k < 0 || k > IR_MAX_RANK)
        return AP_EINVALID;
    *n = k;
    return 0;
}

static int param_int(const ir_attr *dia, const char *name, int64_t *out)
{
    ir_attr *a = ir_dialect_param(dia, name);
    if (!a)
        return AP_ENOTFOUND;
    if (a->kind != IR_A_INT)
        return AP_EINVALID;
    *out = a->u.i;
    return 0;
}

int ir_dot_dims_get(const ir_op *op, ir_dot_dims *out)
{
    memset(out, 0, sizeof *out);
    if (op->opcode == IR_OP_DOT) {
        if (op->n_operands != 2 || !op->operands[0]->type || op->operands[0]->type->rank < 1)
            return AP_EINVALID;
        out->n_contract = 1;
        out->lhs_contract[0] = op->operands[0]->type->rank - 1;
        out->rhs_contract[0] = 0;
        return 0;
    }
    ir_attr *d = ir_op_attr(op, "dot_dimension_numbers");
    if (!d || d->kind != IR_A_DIALECT)
        return AP_EINVALID;
    int nlb, nrb, nlc, nrc;
    if (param_list(d, "lhs_batching_dimensions", out->lhs_batch, &nlb) < 0 ||
        param_list(d, "rhs_batching_dimensions", out->rhs_batch, &nrb) < 0 ||
        param_list(d, "lhs_contracting_dimensions", out->lhs_contract, &nlc) < 0 ||
        param_list(d, "rhs_contracting_dimensions", out->rhs_contract, &nrc) < 0)
        return AP_EINVALID;
    if (nlb != nrb || nlc != nrc)
        return AP_EINVALID;
    out->n_batch = nlb;
    out->n_contract = nlc;
    return 0;
}

/* `raw input_batch_dimension = 0, input_feature_dimension = 3, ...` */
static int conv_raw(const char *body, ir_conv_dims *d)
{
    const char *p = body + 3;
    int64_t *lists[3] = {d->in_spatial, d->kernel_spatial, d->out_spatial};
    int counts[3] = {0, 0, 0};
    while (*p) {
        char key[64];
        int len = 0;
        while (*p == ' ' || *p == ',')
            p++;
        while (*p && *p != ' ' && *p != '=' && len < 63)
            key[len++] = *p++;
        key[len] = '\0';
        while (*p == ' ' || *p == '=')
            p++;
        if (!len)
            break;
        if (*p == '[') {
            int which = strcmp(key, "input_spatial_dimensions") == 0    ? 0
                        : strcmp(key, "kernel_spatial_dimensions") == 0 ? 1
                        : strcmp(key, "output_spatial_dimensions") == 0 ? 2
                                                                        : -1;
            p++;
            while (*p && *p != ']') {
                char *end;
                long long v = strtoll(p, &end, 10);
                if (end == p)
                    return AP_EINVALID;
                if (which >= 0 && counts[which] < IR_MAX_RANK)
                    lists[which][counts[which]++] = v;
                p = end;
                while (*p == ' ' || *p == ',')
                    p++;
            }
            if (*p == ']')
                p++;
            continue;
        }
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            return AP_EINVALID;
        p = end;
        if (!strcmp(key, "input_batch_dimension")) d->in_batch = v;
        else if (!strcmp(key, "input_feature_dimension")) d->in_feature = v;
        else if (!strcmp(key, "kernel_input_feature_dimension")) d->kernel_in = v;
        else if (!strcmp(key, "kernel_output_feature_dimension")) d->kernel_out = v;
        else if (!strcmp(key, "output_batch_dimension")) d->out_batch = v;
        else if (!strcmp(key, "output_feature_dimension")) d->out_feature = v;
    }
    if (counts[0] != counts[1] || counts[0] != counts[2])
        return AP_EINVALID;
    d->n_spatial = counts[0];
    return 0;
}

/* One bracket group of the compact form: letters at their positions. */
static const char *conv_group(const char *p, char l0, char l1, int64_t *i0, int64_t *i1, int64_t *sp, int *n_sp)
{
    int idx = 0, max = -1;
    int64_t tmp[IR_MAX_RANK];
    for (int k = 0; k < IR_MAX_RANK; k++)
        tmp[k] = -1;
    while (*p == ' ')
        p++;
    if (*p++ != '[')
        return NULL;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p == l0) {
            *i0 = idx;
            p++;
        } else if (*p == l1) {
            *i1 = idx;
            p++;
        } else if (*p >= '0' && *p <= '9') {
            int v = 0;
            while (*p >= '0' && *p <= '9') {
                v = v * 10 + (*p++ - '0');
                if (v >= IR_MAX_RANK)
                    return NULL;
            }
            tmp[v] = idx;
            if (v > max)
                max = v;
        } else {
            return NULL;
        }
        idx++;
        while (*p == ' ')
            p++;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == ']')
            break;
        return NULL;
    }
    for (int k = 0; k <= max; k++) {
        if (tmp[k] < 0)
            return NULL;
        sp[k] = tmp[k];
    }
    *n_sp = max + 1;
    return p + 1;
}

int ir_conv_dims_get(const ir_op *op, ir_conv_dims *out)
{
    memset(out, 0, sizeof *out);
    ir_attr *a = ir_op_attr(op, "dimension_numbers");
    if (!a || a->kind != IR_A_DIALECT || !a->u.dia.body)
        return AP_EINVALID;
    const char *p = a->u.dia.body;
    if (strncmp(p, "raw", 3) == 0)
        return conv_raw(p, out);
    int n1, n2, n3;
    p = conv_group(p, 'b', 'f', &out->in_batch, &out->in_feature, out->in_spatial, &n1);
    if (!p || *p++ != 'x')
        return AP_EINVALID;
    p = conv_group(p, 'i', 'o', &out->kernel_in, &out->kernel_out, out->kernel_spatial, &n2);
    if (!p || p[0] != '-' || p[1] != '>')
        return AP_EINVALID;
    p = conv_group(p + 2, 'b', 'f', &out->out_batch, &out->out_feature, out->out_spatial, &n3);
    if (!p || n1 != n2 || n1 != n3)
        return AP_EINVALID;
    out->n_spatial = n1;
    return 0;
}

int ir_gather_dims_get(const ir_op *op, ir_gather_dims *out)
{
    memset(out, 0, sizeof *out);
    ir_attr *d = ir_op_attr(op, "dimension_numbers");
    if (!d || d->kind != IR_A_DIALECT)
        return AP_EINVALID;
    if (param_list(d, "offset_dims", out->offset_dims, &out->n_offset) < 0 ||
        param_list(d, "collapsed_slice_dims", out->collapsed_slice_dims, &out->n_collapsed) < 0 ||
        param_list(d, "start_index_map", out->start_index_map, &out->n_start_index_map) < 0 ||
        param_list(d, "operand_batching_dims", out->operand_batching_dims, &out->n_operand_batching) < 0 ||
        param_list(d, "start_indices_batching_dims", out->start_indices_batching_dims, &out->n_start_indices_batching) < 0)
        return AP_EINVALID;
    /* StableHLO prints no index_vector_dim when it is 0 (its printer skips
     * a zero field; none of stablehlo/testdata's 2325 programs spells
     * "index_vector_dim = 0"), and reads a missing one as 0 */
    int rc = param_int(d, "index_vector_dim", &out->index_vector_dim);
    if (rc == AP_ENOTFOUND)
        out->index_vector_dim = 0;
    else if (rc < 0)
        return rc;
    return 0;
}

int ir_scatter_dims_get(const ir_op *op, ir_scatter_dims *out)
{
    memset(out, 0, sizeof *out);
    ir_attr *d = ir_op_attr(op, "scatter_dimension_numbers");
    if (!d || d->kind != IR_A_DIALECT)
        return AP_EINVALID;
    if (param_list(d, "update_window_dims", out->update_window_dims, &out->n_update_window) < 0 ||
        param_list(d, "inserted_window_dims", out->inserted_window_dims, &out->n_inserted_window) < 0 ||
        param_list(d, "scatter_dims_to_operand_dims", out->scatter_dims_to_operand_dims, &out->n_scatter_to_operand) < 0 ||
        param_list(d, "input_batching_dims", out->input_batching_dims, &out->n_input_batching) < 0 ||
        param_list(d, "scatter_indices_batching_dims", out->scatter_indices_batching_dims, &out->n_scatter_indices_batching) < 0)
        return AP_EINVALID;
    /* a missing index_vector_dim is 0, as for gather */
    int rc = param_int(d, "index_vector_dim", &out->index_vector_dim);
    if (rc == AP_ENOTFOUND)
        out->index_vector_dim = 0;
    else if (rc < 0)
        return rc;
    return 0;
}

const char *ir_compare_direction(const ir_op *op, char *buf, size_t size)
{
    ir_attr *a = ir_op_attr(op, "comparison_direction");
    if (!a || a->kind != IR_A_DIALECT || !a->u.dia.body)
        return NULL;
    const char *b = a->u.dia.body;
    const char *sp = strrchr(b, ' ');
    snprintf(buf, size, "%s", sp ? sp + 1 : b);
    return buf;
}

ir_opcode ir_region_reduction(const ir_region *r)
{
    if (!r || r->n_blocks != 1)
        return IR_OP_UNKNOWN;
    const ir_block *b = r->first;
    if (b->n_args != 2 || b->n_ops != 2)
        return IR_OP_UNKNOWN;
    const ir_op *body = b->first, *ret = b->last;
    if (body->n_operands != 2 || body->n_results != 1 || ret->n_operands != 1 ||
        ret->operands[0] != &body->results[0])
        return IR_OP_UNKNOWN;
    bool args_in_order = body->operands[0] == &b->args[0] && body->operands[1] == &b->args[1];
    bool args_swapped = body->operands[0] == &b->args[1] && body->operands[1] == &b->args[0];
    if (!args_in_order && !args_swapped)
        return IR_OP_UNKNOWN;
    return (ir_opcode)body->opcode;
}
