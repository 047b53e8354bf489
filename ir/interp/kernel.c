/*
 * kernel.c - what every kernel of the interpreter uses: errors that name
 * the op, its source position and the device; new tensors for its results
 * (within the run's size limit); its attributes; how many threads the host
 * offers a kernel that can use them.  It knows nothing of how ops are
 * evaluated.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

/* =============================================================== threads */

int ir_interp_host_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

/* ================================================================ errors */

static int fail_v(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

static int fail_v(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, va_list ap)
{
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char name[160];
    if (op && op->opcode == IR_OP_CUSTOM_CALL) {
        ir_attr *t = ir_op_attr(op, "call_target_name");
        snprintf(name, sizeof name, "%s @%s", op->name, t && t->kind == IR_A_STRING ? t->u.str.s : "?");
    } else {
        snprintf(name, sizeof name, "%s", op ? op->name : "interpreter");
    }
    char where[40] = "";
    if (r->spmd && dev >= 0)
        snprintf(where, sizeof where, " (device %" PRId64 ")", dev);
    if (op && op->src_line)
        return ap_error_at(r->err, code, r->filename, (int)op->src_line, (int)op->src_col, "%s: %s%s", name, msg,
                           where);
    return ap_error_set(r->err, code, "%s: %s%s", name, msg, where);
}

int ir__ip_fail_op(ip_run *r, const ir_op *op, int64_t dev, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(r, op, dev, code, fmt, ap);
    va_end(ap);
    return rc;
}

int ir__ip_fail(ip_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(c->run, c->op, c->fr->dev_ids[c->dev], code, fmt, ap);
    va_end(ap);
    return rc;
}

/* Re-raises a tensor-allocation error (message without position) at op. */
int ir__ip_relay(ip_run *r, const ir_op *op, int64_t dev, int rc, const ap_error *e)
{
    return ir__ip_fail_op(r, op, dev, rc, "%s", e->msg);
}

int ir__ip_new_result(ip_ctx *c, uint32_t i, ir_tensor **out)
{
    ap_error e2;
    int rc = ir__tensor_alloc_type_w(c->op->results[i].type, c->run->opts.max_elems, c->run->opts.f64, out, &e2);
    return rc < 0 ? ir__ip_relay(c->run, c->op, c->fr->dev_ids[c->dev], rc, &e2) : 0;
}

int ir__ip_clone_at(ip_run *r, const ir_op *op, int64_t dev, const ir_tensor *t, ir_tensor **out)
{
    ap_error e2;
    int rc = ir_tensor_clone(t, out, &e2);
    return rc < 0 ? ir__ip_relay(r, op, dev, rc, &e2) : 0;
}

/* ============================================================ attributes */

int ir__ip_ints(ip_ctx *c, const char *name, int64_t *out, int cap, int absent)
{
    ir_attr *a = ir_op_attr(c->op, name);
    if (!a)
        return absent;
    int n = ir_attr_int_list(a, out, cap);
    if (n < 0)
        return ir__ip_fail(c, AP_EINVALID, "attribute %s is not a list of integers", name);
    if (n > cap)
        return ir__ip_fail(c, AP_EUNSUPPORTED, "attribute %s has %d entries, more than %d", name, n, cap);
    return n;
}

int ir__ip_int(ip_ctx *c, const char *name, int64_t *out)
{
    ir_attr *a = ir_op_attr(c->op, name);
    if (!a || a->kind != IR_A_INT)
        return ir__ip_fail(c, AP_EINVALID, "needs an integer attribute %s", name);
    *out = a->u.i;
    return 0;
}

bool ir__ip_flag(const ir_op *op, const char *name)
{
    ir_attr *a = ir_op_attr(op, name);
    if (!a)
        return false;
    if (a->kind == IR_A_BOOL)
        return a->u.b;
    return a->kind == IR_A_UNIT;
}

const char *ir__ip_enum(const ir_op *op, const char *name, char *buf, size_t size)
{
    ir_attr *a = ir_op_attr(op, name);
    if (!a)
        return NULL;
    const char *s = NULL;
    if (a->kind == IR_A_DIALECT && a->u.dia.body)
        s = a->u.dia.body;
    else if (a->kind == IR_A_STRING)
        s = a->u.str.s;
    if (!s)
        return NULL;
    const char *sp = strrchr(s, ' ');
    snprintf(buf, size, "%s", sp ? sp + 1 : s);
    return buf;
}
