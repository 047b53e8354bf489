/*
 * fmha.c - the typed view of cuDNN's fused attention as JAX emits it for
 * jax.nn.dot_product_attention(implementation='cudnn') (layout BTNH): the
 * custom calls __cudnn$fmhaSoftmax (forward) and
 * __cudnn$fmhaSoftmaxBackward, whose scale and mask live in the JSON of
 * their backend_config.  The interpreter, the partitioner and the cost
 * model read them through here.
 */
#include "ir_int.h"

#include <jansson.h>
#include <stdio.h>

int ir_fmha_kind(const ir_op *op)
{
    if (op->opcode != IR_OP_CUSTOM_CALL)
        return IR_FMHA_NONE;
    ir_attr *t = ir_op_attr(op, "call_target_name");
    if (!t || t->kind != IR_A_STRING)
        return IR_FMHA_NONE;
    if (!strcmp(t->u.str.s, "__cudnn$fmhaSoftmax"))
        return IR_FMHA_FWD;
    if (!strcmp(t->u.str.s, "__cudnn$fmhaSoftmaxBackward"))
        return IR_FMHA_BWD;
    return IR_FMHA_NONE;
}

/* A JSON number (JAX writes the scale as a float, the rate as 0.0 or 0). */
static bool json_num(const json_t *j, double *out)
{
    if (!json_is_number(j))
        return false;
    *out = json_number_value(j);
    return true;
}

int ir_fmha_get(const ir_op *op, ir_fmha *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = ir_fmha_kind(op);
    if (!out->kind)
        return ap_error_set(err, AP_EINVALID, "not a cuDNN fused attention custom call");
    const char *name = out->kind == IR_FMHA_FWD ? "__cudnn$fmhaSoftmax" : "__cudnn$fmhaSoftmaxBackward";
    ir_attr *bc = ir_op_attr(op, "backend_config");
    if (!bc || bc->kind != IR_A_STRING)
        return ap_error_set(err, AP_EINVALID, "%s: no backend_config string", name);
    json_error_t jerr;
    json_t *root = json_loadb(bc->u.str.s, bc->u.str.len, 0, &jerr);
    if (!root)
        return ap_error_set(err, AP_EINVALID, "%s: backend_config is not JSON: %s (at %d)", name, jerr.text,
                            jerr.position);
    int rc = 0;
    json_t *c = json_object_get(root, "cudnn_fmha_backend_config");
    const char *mask = c ? json_string_value(json_object_get(c, "mask_type")) : NULL;
    double rate = 0;
    json_t *dr = c ? json_object_get(c, "dropout_rate") : NULL;
    if (!c || !json_num(json_object_get(c, "fmha_scale"), &out->scale)) {
        rc = ap_error_set(err, AP_EINVALID, "%s: backend_config has no cudnn_fmha_backend_config.fmha_scale", name);
    } else if (dr && (!json_num(dr, &rate) || rate != 0)) {
        rc = ap_error_set(err, AP_EUNSUPPORTED, "%s: dropout (rate %g) is not supported", name, rate);
    } else if (mask && strcmp(mask, "CAUSAL") && strcmp(mask, "NO_MASK")) {
        rc = ap_error_set(err, AP_EUNSUPPORTED, "%s: mask_type %s is not supported (CAUSAL or NO_MASK)", name, mask);
    } else {
        out->causal = mask && !strcmp(mask, "CAUSAL");
    }
    json_decref(root);
    return rc;
}
