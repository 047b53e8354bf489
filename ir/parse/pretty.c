/*
 * pretty.c - the pretty (custom) forms of registered StableHLO ops, as
 * stablehlo-opt and JAX print them.  Each form turns its keywords into the
 * same attributes the generic form carries, so both forms give one IR.
 * Each form_parse_X here is the parse column of a row of ir/ir_forms.h,
 * whose check and print columns (ir/print.c) are its mirror image.
 */
#include "mlir_int.h"

#include <stdio.h>

static const ir_type *i64_type(parser *p) { return ir_type_scalar(p->m, IR_E_I64, NULL); }
static const ir_type *i32_type(parser *p) { return ir_type_scalar(p->m, IR_E_I32, NULL); }

static bool add_i64_attr(parser *p, op_state *st, const char *name, int64_t v)
{
    const ir_type *t = i64_type(p);
    return t && ir__st_add_attr(p, st, name, ir_attr_int(p->m, v, t));
}

/* `kw = [list]` -> array<i64: ...> */
static bool kw_i64_array(parser *p, op_state *st, const char *kw, const char *attr)
{
    int64_t *v = NULL;
    int n = 0;
    if (!ir__expect_word(p, kw) || !ir__expect(p, T_EQUAL, "'='") || !ir__parse_i64_list(p, &v, &n))
        return false;
    bool ok = ir__st_add_attr(p, st, attr, ir_attr_i64_array(p->m, n, v));
    ap_free(v);
    return ok;
}

/* `kw = N` -> N : i64 */
static bool kw_i64(parser *p, op_state *st, const char *kw, const char *attr)
{
    int64_t v;
    return ir__expect_word(p, kw) && ir__expect(p, T_EQUAL, "'='") && ir__parse_int(p, &v) &&
           add_i64_attr(p, st, attr, v);
}

/* An enum keyword turned into #stablehlo<kind VALUE>. */
static bool enum_attr(parser *p, op_state *st, const char *kind, const char *attr)
{
    if (p->tok.kind != T_IDENT)
        return ir__perr_expected(p, "an enum value");
    char body[96];
    snprintf(body, sizeof body, "%s %.*s", kind, (int)(p->tok.len > 60 ? 60 : p->tok.len), p->tok.s);
    ir__next(p);
    return ir__st_add_attr(p, st, attr, ir_attr_dialect_raw(p->m, "stablehlo", body));
}

static bool opt_attr_dict(parser *p, op_state *st)
{
    return p->tok.kind != T_LBRACE || ir__parse_attr_dict(p, st, false);
}

static bool comma(parser *p) { return ir__expect(p, T_COMMA, "','"); }

/* ':' signature, applied in the "same type" or "functional" way. */
static bool sig_tail(parser *p, op_state *st, bool same)
{
    const char *at = p->tok.at;
    op_sig sig;
    if (!ir__expect(p, T_COLON, "':' and the op's type"))
        return false;
    if (!ir__parse_sig(p, &sig))
        return false;
    bool ok = same ? ir__apply_sig_same(p, st, &sig, at) : ir__apply_sig_functional(p, st, &sig, at);
    ap_free(sig.in);
    ap_free(sig.out);
    return ok;
}

/* `stablehlo.complex %re, %im : tensor<2xcomplex<f32>>`: the one type is the
 * result's; the operands have its part type (f32). */
static bool complex_sig_tail(parser *p, op_state *st)
{
    const char *at = p->tok.at;
    op_sig sig;
    if (!ir__expect(p, T_COLON, "':' and the op's type") || !ir__parse_sig(p, &sig))
        return false;
    bool ok;
    if (sig.functional) {
        ok = ir__apply_sig_functional(p, st, &sig, at);
    } else if (sig.n_out != 1) {
        ok = ir__perr(p, at, AP_ESYNTAX, "expected one type for '%s', got %u", st->name, sig.n_out);
    } else {
        const ir_type *part = ir__complex_part_type(p->m, sig.out[0]);
        ok = part ? true : ir__perr(p, at, AP_ETYPE, "'%s' must have a complex result type", st->name);
        for (uint32_t i = 0; ok && i < st->n_operands; i++)
            ok = ir__check_operand_type(p, st, i, part, at);
        ok = ok && ir__st_add_result_type(p, st, sig.out[0]);
    }
    ap_free(sig.in);
    ap_free(sig.out);
    return ok;
}

/* ': T1, T2' giving the result types; operands keep their own types. */
static bool result_types_tail(parser *p, op_state *st, bool optional)
{
    if (optional && p->tok.kind != T_COLON)
        return true;
    const char *at = p->tok.at;
    op_sig sig;
    if (!ir__expect(p, T_COLON, "':' and the result types") || !ir__parse_sig(p, &sig))
        return false;
    bool ok;
    if (sig.functional) {
        ok = ir__apply_sig_functional(p, st, &sig, at);
    } else {
        ok = true;
        for (uint32_t i = 0; ok && i < sig.n_out; i++)
            ok = ir__st_add_result_type(p, st, sig.out[i]);
    }
    ap_free(sig.in);
    ap_free(sig.out);
    return ok;
}

/* '[' lo ':' hi (':' stride)? (',' ...)* ']' */
static bool parse_slice_ranges(parser *p, op_state *st)
{
    int64_t start[IR_MAX_RANK], limit[IR_MAX_RANK], stride[IR_MAX_RANK];
    int n = 0;
    if (!ir__expect(p, T_LBRACKET, "'[' and the slice ranges"))
        return false;
    if (p->tok.kind != T_RBRACKET) {
        for (;;) {
            if (n >= IR_MAX_RANK)
                return ir__perr(p, p->tok.at, AP_EUNSUPPORTED, "too many slice ranges");
            if (!ir__parse_int(p, &start[n]) || !ir__expect(p, T_COLON, "':' in a slice range") ||
                !ir__parse_int(p, &limit[n]))
                return false;
            stride[n] = 1;
            if (ir__accept(p, T_COLON) && !ir__parse_int(p, &stride[n]))
                return false;
            n++;
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    if (!ir__expect(p, T_RBRACKET, "']'"))
        return false;
    return ir__st_add_attr(p, st, "start_indices", ir_attr_i64_array(p->m, n, start)) &&
           ir__st_add_attr(p, st, "limit_indices", ir_attr_i64_array(p->m, n, limit)) &&
           ir__st_add_attr(p, st, "strides", ir_attr_i64_array(p->m, n, stride));
}

/* `[a, b] x [c, d]` into two untyped int arrays */
static bool parse_dim_pair(parser *p, ir_attr **lhs, ir_attr **rhs)
{
    int64_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    bool ok = false;
    if (!ir__parse_i64_list(p, &a, &na))
        return false;
    if (!ir__expect_word(p, "x"))
        goto out;
    if (!ir__parse_i64_list(p, &b, &nb))
        goto out;
    ir_attr *la[IR_MAX_RANK], *ra[IR_MAX_RANK];
    if (na > IR_MAX_RANK || nb > IR_MAX_RANK) {
        ir__perr(p, p->tok.at, AP_EUNSUPPORTED, "too many dimensions");
        goto out;
    }
    for (int i = 0; i < na; i++)
        if (!(la[i] = ir_attr_int(p->m, a[i], NULL)))
            goto out;
    for (int i = 0; i < nb; i++)
        if (!(ra[i] = ir_attr_int(p->m, b[i], NULL)))
            goto out;
    *lhs = ir_attr_array(p->m, na, la);
    *rhs = ir_attr_array(p->m, nb, ra);
    ok = *lhs && *rhs;
out:
    ap_free(a);
    ap_free(b);
    return ok;
}

/* `precision = [DEFAULT, HIGH]` -> [#stablehlo<precision DEFAULT>, ...] */
static bool parse_precision(parser *p, op_state *st)
{
    ir_attr *items[8];
    int n = 0;
    if (!ir__expect(p, T_EQUAL, "'='") || !ir__expect(p, T_LBRACKET, "'['"))
        return false;
    if (p->tok.kind != T_RBRACKET) {
        for (;;) {
            if (p->tok.kind != T_IDENT || n >= 8)
                return ir__perr_expected(p, "a precision (DEFAULT, HIGH, HIGHEST)");
            char body[64];
            snprintf(body, sizeof body, "precision %.*s", (int)(p->tok.len > 40 ? 40 : p->tok.len), p->tok.s);
            if (!(items[n++] = ir_attr_dialect_raw(p->m, "stablehlo", body)))
                return false;
            ir__next(p);
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    return ir__expect(p, T_RBRACKET, "']'") &&
           ir__st_add_attr(p, st, "precision_config", ir_attr_array(p->m, n, items));
}

/* dot_general's `batching_dims = [..] x [..], contracting_dims = ...` */
static bool form_parse_dot_general(parser *p, op_state *st, int fmt)
{
    ir_named_attr kv[4];
    int n = 0;
    if (!ir__parse_operand(p, st) || !comma(p) || !ir__parse_operand(p, st) || !comma(p))
        return false;
    if (ir__accept_word(p, "batching_dims")) {
        ir_attr *l, *r;
        if (!ir__expect(p, T_EQUAL, "'='") || !parse_dim_pair(p, &l, &r) || !comma(p))
            return false;
        kv[n++] = (ir_named_attr){ir_intern(p->m, "lhs_batching_dimensions", 23), l};
        kv[n++] = (ir_named_attr){ir_intern(p->m, "rhs_batching_dimensions", 23), r};
    }
    ir_attr *l, *r;
    if (!ir__expect_word(p, "contracting_dims") || !ir__expect(p, T_EQUAL, "'='") || !parse_dim_pair(p, &l, &r))
        return false;
    if (l->u.arr.n)
        kv[n++] = (ir_named_attr){ir_intern(p->m, "lhs_contracting_dimensions", 26), l};
    if (r->u.arr.n)
        kv[n++] = (ir_named_attr){ir_intern(p->m, "rhs_contracting_dimensions", 26), r};
    if (n > 0 && kv[0].value->u.arr.n == 0 && kv[1].value->u.arr.n == 0) { /* empty batching */
        memmove(kv, kv + 2, sizeof *kv * (size_t)(n - 2));
        n -= 2;
    }
    ir_attr *dims = n ? ir_attr_dialect_kv(p->m, "stablehlo.dot", n, kv)
                      : ir_attr_dialect_raw(p->m, "stablehlo.dot", "");
    if (!ir__st_add_attr(p, st, "dot_dimension_numbers", dims))
        return false;
    while (ir__accept(p, T_COMMA)) {
        if (ir__accept_word(p, "precision")) {
            if (!parse_precision(p, st))
                return false;
        } else if (ir__accept_word(p, "algorithm")) {
            if (!ir__expect(p, T_EQUAL, "'='"))
                return false;
            /* `algorithm = <k = v, ...>` is #stablehlo.dot_algorithm<...> */
            if (p->tok.kind != T_LESS)
                return ir__perr_expected(p, "'<' and the dot algorithm");
            ir_attr *a = ir__parse_dialect_body(p, p->tok.at, "stablehlo.dot_algorithm", 23);
            if (!a || !ir__st_add_attr(p, st, "algorithm", a))
                return false;
        } else {
            return ir__perr_expected(p, "'precision' or 'algorithm'");
        }
    }
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

/* window = {stride = [..], pad = [[..], ..], lhs_dilate = [..], rhs_dilate = [..], reverse = [..]} */
static bool parse_conv_window(parser *p, op_state *st)
{
    if (!ir__expect(p, T_LBRACE, "'{' of the window"))
        return false;
    while (p->tok.kind != T_RBRACE) {
        if (p->tok.kind != T_IDENT)
            return ir__perr_expected(p, "a window attribute");
        char kw[16];
        snprintf(kw, sizeof kw, "%.*s", (int)(p->tok.len > 15 ? 15 : p->tok.len), p->tok.s);
        const char *at = p->tok.at;
        ir__next(p);
        if (!ir__expect(p, T_EQUAL, "'='"))
            return false;
        if (strcmp(kw, "pad") == 0) {
            int64_t pads[2 * IR_MAX_RANK];
            int n = 0;
            if (!ir__expect(p, T_LBRACKET, "'['"))
                return false;
            if (p->tok.kind != T_RBRACKET) {
                for (;;) {
                    if (n >= IR_MAX_RANK)
                        return ir__perr(p, p->tok.at, AP_EUNSUPPORTED, "too many spatial dimensions");
                    if (!ir__expect(p, T_LBRACKET, "'['") || !ir__parse_int(p, &pads[2 * n]) || !comma(p) ||
                        !ir__parse_int(p, &pads[2 * n + 1]) || !ir__expect(p, T_RBRACKET, "']'"))
                        return false;
                    n++;
                    if (!ir__accept(p, T_COMMA))
                        break;
                }
            }
            if (!ir__expect(p, T_RBRACKET, "']'"))
                return false;
            int64_t dims[2] = {n, 2};
            const ir_type *t = ir_type_tensor(p->m, IR_E_I64, 2, dims);
            if (!t || !ir__st_add_attr(p, st, "padding", ir_attr_dense_ints(p->m, t, (size_t)(2 * n), pads)))
                return false;
        } else if (strcmp(kw, "reverse") == 0) {
            bool v[IR_MAX_RANK];
            int n = 0;
            if (!ir__expect(p, T_LBRACKET, "'['"))
                return false;
            if (p->tok.kind != T_RBRACKET) {
                for (;;) {
                    if (n >= IR_MAX_RANK)
                        return ir__perr(p, p->tok.at, AP_EUNSUPPORTED, "too many spatial dimensions");
                    if (ir__is_word(p, "true") || ir__is_word(p, "false")) {
                        v[n++] = ir__is_word(p, "true");
                        ir__next(p);
                    } else {
                        int64_t x;
                        if (!ir__parse_int(p, &x))
                            return false;
                        v[n++] = x != 0;
                    }
                    if (!ir__accept(p, T_COMMA))
                        break;
                }
            }
            if (!ir__expect(p, T_RBRACKET, "']'") ||
                !ir__st_add_attr(p, st, "window_reversal", ir_attr_bool_array(p->m, n, v)))
                return false;
        } else {
            const char *attr = strcmp(kw, "stride") == 0       ? "window_strides"
                               : strcmp(kw, "lhs_dilate") == 0 ? "lhs_dilation"
                               : strcmp(kw, "rhs_dilate") == 0 ? "rhs_dilation"
                                                               : NULL;
            if (!attr)
                return ir__perr(p, at, AP_ESYNTAX, "unknown convolution window attribute '%s'", kw);
            int64_t *v = NULL;
            int n = 0;
            if (!ir__parse_i64_list(p, &v, &n))
                return false;
            bool ok = ir__st_add_attr(p, st, attr, ir_attr_i64_array(p->m, n, v));
            ap_free(v);
            if (!ok)
                return false;
        }
        if (!ir__accept(p, T_COMMA))
            break;
    }
    return ir__expect(p, T_RBRACE, "'}' to close the window");
}

/* convolution(%a, %b) dim_numbers = [..]x[..]->[..], window = {..} {attrs} : sig */
static bool form_parse_convolution(parser *p, op_state *st, int fmt)
{
    if (!ir__expect(p, T_LPAREN, "'('") || !ir__parse_operand(p, st) || !comma(p) ||
        !ir__parse_operand(p, st) || !ir__expect(p, T_RPAREN, "')'"))
        return false;
    if (!ir__expect_word(p, "dim_numbers") || p->tok.kind != T_EQUAL)
        return ir__perr_expected(p, "'=' after dim_numbers");
    /* the dimension numbers run to ", window" */
    const char *start = p->lx.p;
    const char *q = start, *end = p->lx.end;
    int brackets = 0, groups = 0;
    for (; q < end; q++) {
        if (*q == '[')
            brackets++;
        else if (*q == ']' && --brackets == 0 && ++groups == 3) {
            q++;
            break;
        } else if (*q == '\n' || *q == '{')
            break;
    }
    if (groups != 3)
        return ir__perr(p, start, AP_ESYNTAX, "expected convolution dimension numbers '[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]'");
    while (start < q && *start == ' ')
        start++;
    const char *canon = ir__conv_dims_canonical(p, start, (size_t)(q - start));
    if (!canon || !ir__st_add_attr(p, st, "dimension_numbers", ir_attr_dialect_raw(p->m, "stablehlo.conv", canon)))
        return false;
    p->lx.p = q;
    ir__next(p);
    if (ir__accept(p, T_COMMA)) {
        if (!ir__expect_word(p, "window") || !ir__expect(p, T_EQUAL, "'='") || !parse_conv_window(p, st))
            return false;
    }
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

/* builds `^bb0(%a: T, %b: T): %r = OP %a, %b : T; stablehlo.return %r` */
static ir_region *reduction_region(parser *p, ir_opcode opc, const ir_type *const *elem_types, uint32_t n)
{
    ir_module *m = p->m;
    ir_region *r = ir__new_region(p);
    if (!r)
        return NULL;
    const ir_type *args[2 * 8];
    if (n > 8) {
        ir__perr(p, p->tok.at, AP_EUNSUPPORTED, "too many reduction operands");
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        args[i] = args[n + i] = elem_types[i];
    ir_block *b = ir_block_new(m, r, 2 * n, args);
    if (!b)
        goto oom;
    ir_value *res[8];
    for (uint32_t i = 0; i < n; i++) {
        ir_value *ops[2] = {&b->args[i], &b->args[n + i]};
        ir_op *op = ir_op_new(m, opc, NULL, 2, ops, 1, &elem_types[i], 0);
        if (!op)
            goto oom;
        ir_block_append(b, op);
        res[i] = &op->results[0];
    }
    ir_op *ret = ir_op_new(m, IR_OP_RETURN, NULL, n, res, 0, NULL, 0);
    if (!ret)
        goto oom;
    ir_block_append(b, ret);
    return r;
oom:
    ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    return NULL;
}

/* reduce(%x init: %c) (, (%y init: %d))* (applies OP)? across dimensions = [..]
 *   {attrs}? : sig (reducer (%a: T, %b: T)+ region)? */
static bool form_parse_reduce(parser *p, op_state *st, int fmt)
{
    ir_value *inputs[8], *inits[8];
    uint32_t n = 0;
    for (;;) {
        if (n >= 8)
            return ir__perr(p, p->tok.at, AP_EUNSUPPORTED, "too many reduce operands");
        op_state tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.operands = tmp.operands_inline;
        tmp.cap_operands = OPS_INLINE;
        if (!ir__expect(p, T_LPAREN, "'('") || !ir__parse_operand(p, &tmp) || !ir__expect_word(p, "init") ||
            !ir__expect(p, T_COLON, "':' after init") || !ir__parse_operand(p, &tmp) ||
            !ir__expect(p, T_RPAREN, "')'"))
            return false;
        inputs[n] = tmp.operands[0];
        inits[n] = tmp.operands[1];
        n++;
        if (!ir__accept(p, T_COMMA))
            break;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!ir__st_add_operand(p, st, inputs[i]))
            return false;
    for (uint32_t i = 0; i < n; i++)
        if (!ir__st_add_operand(p, st, inits[i]))
            return false;
    ir_opcode applies = IR_OP_UNKNOWN;
    const char *applies_at = NULL;
    if (ir__accept_word(p, "applies")) {
        applies_at = p->tok.at;
        if (p->tok.kind != T_IDENT)
            return ir__perr_expected(p, "an op name after 'applies'");
        applies = ir_opcode_lookup(p->tok.s, p->tok.len);
        if (applies == IR_OP_UNKNOWN || ir_op_info_get(applies)->kind != IR_K_EW2)
            return ir__perr(p, applies_at, AP_ESYNTAX, "'applies' needs a binary elementwise op, found '%.*s'",
                            (int)p->tok.len, p->tok.s);
        ir__next(p);
    }
    if (!ir__expect_word(p, "across") || !kw_i64_array(p, st, "dimensions", "dimensions"))
        return false;
    if (!opt_attr_dict(p, st) || !sig_tail(p, st, false))
        return false;
    if (applies != IR_OP_UNKNOWN) {
        const ir_type *et[8];
        for (uint32_t i = 0; i < n; i++) {
            const ir_type *t = st->operands[n + i]->type;
            if (!t)
                return ir__perr(p, applies_at, AP_ETYPE, "reduce init value has no known type");
            et[i] = t;
        }
        ir_region *r = reduction_region(p, applies, et, n);
        return r && ir__st_add_region(p, st, r);
    }
    /* reducer(%a: T, %b: T) (%c: T, %d: T) { ... } : pairs (lhs_i, rhs_i) */
    if (!ir__expect_word(p, "reducer"))
        return false;
    arg_list pairs = {0}, args = {0};
    bool ok = true;
    while (ok && p->tok.kind == T_LPAREN)
        ok = ir__parse_arg_decls(p, &pairs, false);
    if (ok && pairs.n != 2 * n)
        ok = ir__perr(p, p->tok.at, AP_ESYNTAX, "reducer needs %u argument pairs", n);
    if (ok) {
        args.v = ap_malloc(sizeof *args.v * pairs.n);
        if (!args.v)
            ok = ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
        args.n = args.cap = pairs.n;
        for (uint32_t i = 0; ok && i < n; i++) {
            args.v[i] = pairs.v[2 * i];
            args.v[n + i] = pairs.v[2 * i + 1];
        }
    }
    ir_region *r = ok ? ir__new_region(p) : NULL;
    ok = ok && r && ir__parse_region(p, r, &args) && ir__st_add_region(p, st, r);
    ir__arg_list_free(&pairs);
    ir__arg_list_free(&args);
    return ok;
}

/* while(%iterArg = %x, ...) : T, ... attributes? cond { } do { } */
static bool form_parse_while(parser *p, op_state *st, int fmt)
{
    arg_list args = {0};
    bool ok = ir__expect(p, T_LPAREN, "'('");
    if (ok && p->tok.kind != T_RPAREN) {
        for (;;) {
            if (p->tok.kind != T_PERCENT) {
                ok = ir__perr_expected(p, "a loop variable");
                break;
            }
            arg_decl d = {p->tok.s, p->tok.len, NULL, NULL, p->tok.at};
            ir__next(p);
            if (!ir__expect(p, T_EQUAL, "'='") || !ir__parse_operand(p, st)) {
                ok = false;
                break;
            }
            arg_decl *nv = ap_realloc(args.v, sizeof *nv * (args.n + 1));
            if (!nv) {
                ok = ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
                break;
            }
            args.v = nv;
            args.v[args.n++] = d;
            args.cap = args.n;
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    ok = ok && ir__expect(p, T_RPAREN, "')'");
    if (ok && args.n) {
        const char *at = p->tok.at;
        op_sig sig;
        ok = ir__expect(p, T_COLON, "':' and the loop types") && ir__parse_sig(p, &sig);
        if (ok) {
            if (sig.functional || sig.n_out != args.n)
                ok = ir__perr(p, at, AP_ETYPE, "while has %u loop variables but %u types", args.n, sig.n_out);
            for (uint32_t i = 0; ok && i < args.n; i++) {
                args.v[i].type = sig.out[i];
                ok = ir__check_operand_type(p, st, i, sig.out[i], at) && ir__st_add_result_type(p, st, sig.out[i]);
            }
            ap_free(sig.in);
            ap_free(sig.out);
        }
    }
    if (ok && ir__accept_word(p, "attributes"))
        ok = ir__parse_attr_dict(p, st, false);
    ir_region *cond = NULL, *body = NULL;
    ok = ok && ir__expect_word(p, "cond") && (cond = ir__new_region(p)) && ir__parse_region(p, cond, &args) &&
         ir__expect_word(p, "do") && (body = ir__new_region(p)) && ir__parse_region(p, body, &args) &&
         ir__st_add_region(p, st, cond) && ir__st_add_region(p, st, body);
    ir__arg_list_free(&args);
    return ok;
}

static bool form_parse_same(parser *p, op_state *st, int fmt)
{
    if (st->opcode == IR_OP_COMPLEX)
        return ir__parse_operand_list(p, st) && opt_attr_dict(p, st) && complex_sig_tail(p, st);
    return ir__parse_operand_list(p, st) && opt_attr_dict(p, st) && sig_tail(p, st, true);
}

static bool form_parse_functional(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand_list(p, st) && opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_types(parser *p, op_state *st, int fmt)
{
    if (st->opcode == IR_OP_OPTIMIZATION_BARRIER) {
        /* StableHLO's form puts the attributes first:
         * `attr-dict (operands ':' types)?`, and `()` when it has no
         * operands; an attribute dictionary after the operands (what
         * autopart printed before) is read too. */
        if (!opt_attr_dict(p, st))
            return false;
        if (ir__accept(p, T_LPAREN))
            return ir__expect(p, T_RPAREN, "')' of an optimization_barrier without operands") &&
                   opt_attr_dict(p, st);
        return ir__parse_operand_list(p, st) && opt_attr_dict(p, st) && result_types_tail(p, st, true);
    }
    return ir__parse_operand_list(p, st) && opt_attr_dict(p, st) && result_types_tail(p, st, false);
}

static bool form_parse_return(parser *p, op_state *st, int fmt)
{
    /* func.return writes its attributes first (`return {attrs} %x : T`, as
     * Shardy's tests do: it was read as a return of nothing and `%x : T` as
     * the next op, "expected an integer, found 'tensor'"); stablehlo.return
     * after its operands */
    bool first = st->opcode == IR_OP_FUNC_RETURN && p->tok.kind == T_LBRACE;
    if ((first && !opt_attr_dict(p, st)) || !ir__parse_operand_list(p, st) || (!first && !opt_attr_dict(p, st)))
        return false;
    if (st->n_operands == 0)
        return true;
    const char *at = p->tok.at;
    op_sig sig;
    if (!ir__expect(p, T_COLON, "':' and the returned types") || !ir__parse_sig(p, &sig))
        return false;
    bool ok = true;
    if (sig.functional || sig.n_out != st->n_operands)
        ok = ir__perr(p, at, AP_ETYPE, "'%s' returns %u values but lists %u types", st->name,
                      st->n_operands, sig.functional ? sig.n_in : sig.n_out);
    for (uint32_t i = 0; ok && i < sig.n_out; i++)
        ok = ir__check_operand_type(p, st, i, sig.out[i], at);
    ap_free(sig.in);
    ap_free(sig.out);
    return ok;
}

static bool form_parse_call(parser *p, op_state *st, int fmt)
{
    if (p->tok.kind != T_AT)
        return ir__perr_expected(p, "the callee's @name");
    ir_attr *callee = ir__parse_attr(p, false);
    if (!callee || !ir__st_add_attr(p, st, "callee", callee))
        return false;
    if (!ir__expect(p, T_LPAREN, "'('") || !ir__parse_operand_list(p, st) || !ir__expect(p, T_RPAREN, "')'"))
        return false;
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_select(parser *p, op_state *st, int fmt)
{
    if (!ir__parse_operand_list(p, st) || !opt_attr_dict(p, st))
        return false;
    const char *at = p->tok.at;
    op_sig sig;
    if (!ir__expect(p, T_COLON, "':' and the select's types") || !ir__parse_sig(p, &sig))
        return false;
    bool ok;
    if (sig.functional) {
        ok = ir__apply_sig_functional(p, st, &sig, at);
    } else if (sig.n_out == 2 && st->n_operands == 3) {
        ok = ir__check_operand_type(p, st, 0, sig.out[0], at) &&
             ir__check_operand_type(p, st, 1, sig.out[1], at) &&
             ir__check_operand_type(p, st, 2, sig.out[1], at) && ir__st_add_result_type(p, st, sig.out[1]);
    } else {
        ok = ir__perr(p, at, AP_ESYNTAX, "select needs ': predicate-type, value-type' or a functional type");
    }
    ap_free(sig.in);
    ap_free(sig.out);
    return ok;
}

static bool form_parse_compare(parser *p, op_state *st, int fmt)
{
    if (!enum_attr(p, st, "comparison_direction", "comparison_direction") || !comma(p) ||
        !ir__parse_operand(p, st) || !comma(p) || !ir__parse_operand(p, st))
        return false;
    if (ir__accept(p, T_COMMA) && !enum_attr(p, st, "comparison_type", "compare_type"))
        return false;
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_constant(parser *p, op_state *st, int fmt)
{
    if (!opt_attr_dict(p, st))
        return false;
    const char *at = p->tok.at;
    ir_attr *v = ir__parse_attr(p, true);
    if (!v || !ir__st_add_attr(p, st, "value", v))
        return false;
    if (!v->type || (v->kind != IR_A_DENSE && v->kind != IR_A_DENSE_RESOURCE))
        return ir__perr(p, at, AP_ESYNTAX, "stablehlo.constant needs a dense<...> : tensor<...> value");
    return ir__st_add_result_type(p, st, v->type);
}

static bool form_parse_iota(parser *p, op_state *st, int fmt)
{
    return kw_i64(p, st, "dim", "iota_dimension") && opt_attr_dict(p, st) && result_types_tail(p, st, false);
}

static bool form_parse_dynamic_iota(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && comma(p) && kw_i64(p, st, "dim", "iota_dimension") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_broadcast_in_dim(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && comma(p) && kw_i64_array(p, st, "dims", "broadcast_dimensions") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_dynamic_broadcast_in_dim(parser *p, op_state *st, int fmt)
{
    if (!ir__parse_operand(p, st) || !comma(p) || !ir__parse_operand(p, st) || !comma(p) ||
        !kw_i64_array(p, st, "dims", "broadcast_dimensions"))
        return false;
    while (ir__accept(p, T_COMMA)) {
        if (ir__is_word(p, "known_expanding_dimensions")) {
            if (!kw_i64_array(p, st, "known_expanding_dimensions", "known_expanding_dimensions"))
                return false;
        } else if (!kw_i64_array(p, st, "known_nonexpanding_dimensions", "known_nonexpanding_dimensions")) {
            return false;
        }
    }
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_transpose(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && comma(p) && kw_i64_array(p, st, "dims", "permutation") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_reverse(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && comma(p) && kw_i64_array(p, st, "dims", "dimensions") &&
           opt_attr_dict(p, st) && sig_tail(p, st, true);
}

static bool form_parse_concatenate(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand_list(p, st) && comma(p) && kw_i64(p, st, "dim", "dimension") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_slice(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && parse_slice_ranges(p, st) && opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_dynamic_slice(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand_list(p, st) && comma(p) && kw_i64_array(p, st, "sizes", "slice_sizes") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_pad(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && comma(p) && ir__parse_operand(p, st) && comma(p) &&
           kw_i64_array(p, st, "low", "edge_padding_low") && comma(p) &&
           kw_i64_array(p, st, "high", "edge_padding_high") && comma(p) &&
           kw_i64_array(p, st, "interior", "interior_padding") && opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_dot(parser *p, op_state *st, int fmt)
{
    if (!ir__parse_operand(p, st) || !comma(p) || !ir__parse_operand(p, st))
        return false;
    if (ir__accept(p, T_COMMA) && (!ir__expect_word(p, "precision") || !parse_precision(p, st)))
        return false;
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_custom_call(parser *p, op_state *st, int fmt)
{
    if (p->tok.kind != T_AT)
        return ir__perr_expected(p, "the call target's @name");
    ir_attr *target = ir__parse_attr(p, false);
    if (!target)
        return false;
    if (target->kind != IR_A_SYMREF)
        return ir__perr(p, st->at, AP_ESYNTAX, "bad custom_call target");
    if (!ir__st_add_attr(p, st, "call_target_name", ir_attr_string(p->m, target->u.str.s, target->u.str.len)))
        return false;
    if (!ir__expect(p, T_LPAREN, "'('") || !ir__parse_operand_list(p, st) || !ir__expect(p, T_RPAREN, "')'"))
        return false;
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_composite(parser *p, op_state *st, int fmt)
{
    if (p->tok.kind != T_STRING)
        return ir__perr_expected(p, "the composite's name string");
    ir_attr *name = ir__parse_attr(p, false);
    if (!name || !ir__st_add_attr(p, st, "name", name))
        return false;
    return ir__parse_operand_list(p, st) && opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_get_tuple_element(parser *p, op_state *st, int fmt)
{
    int64_t idx;
    if (!ir__parse_operand(p, st) || !ir__expect(p, T_LBRACKET, "'['") || !ir__parse_int(p, &idx) ||
        !ir__expect(p, T_RBRACKET, "']'"))
        return false;
    const ir_type *t = i32_type(p);
    if (!t || !ir__st_add_attr(p, st, "index", ir_attr_int(p->m, idx, t)))
        return false;
    return opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_fft(parser *p, op_state *st, int fmt)
{
    int64_t *v = NULL;
    int n = 0;
    if (!ir__parse_operand(p, st) || !comma(p) || !ir__expect_word(p, "type") || !ir__expect(p, T_EQUAL, "'='") ||
        !enum_attr(p, st, "fft_type", "fft_type") || !comma(p) || !ir__expect_word(p, "length") ||
        !ir__expect(p, T_EQUAL, "'='") || !ir__parse_i64_list(p, &v, &n))
        return false;
    bool ok = ir__st_add_attr(p, st, "fft_length", ir_attr_i64_array(p->m, n, v));
    ap_free(v);
    return ok && opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_rng(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand_list(p, st) && comma(p) && ir__expect_word(p, "distribution") &&
           ir__expect(p, T_EQUAL, "'='") && enum_attr(p, st, "rng_distribution", "rng_distribution") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_rng_bit_generator(parser *p, op_state *st, int fmt)
{
    return ir__parse_operand(p, st) && comma(p) && ir__expect_word(p, "algorithm") &&
           ir__expect(p, T_EQUAL, "'='") && enum_attr(p, st, "rng_algorithm", "rng_algorithm") &&
           opt_attr_dict(p, st) && sig_tail(p, st, false);
}

static bool form_parse_reduce_precision(parser *p, op_state *st, int fmt)
{
    if (!ir__parse_operand(p, st) || !comma(p) || !ir__expect_word(p, "format") || !ir__expect(p, T_EQUAL, "'='"))
        return false;
    int e = 0, mnt = 0;
    if (p->tok.kind != T_IDENT || sscanf(p->tok.s, "e%dm%d", &e, &mnt) != 2)
        return ir__perr_expected(p, "a format like e5m10");
    ir__next(p);
    const ir_type *t = i32_type(p);
    return t && ir__st_add_attr(p, st, "exponent_bits", ir_attr_int(p->m, e, t)) &&
           ir__st_add_attr(p, st, "mantissa_bits", ir_attr_int(p->m, mnt, t)) && opt_attr_dict(p, st) &&
           sig_tail(p, st, true);
}

static bool form_parse_cholesky(parser *p, op_state *st, int fmt)
{
    /* `%a (, lower = true)? : T` */
    if (!ir__parse_operand(p, st))
        return false;
    if (ir__accept(p, T_COMMA)) {
        bool lower;
        if (!ir__expect_word(p, "lower") || !ir__expect(p, T_EQUAL, "'='"))
            return false;
        if (ir__is_word(p, "true") || ir__is_word(p, "false"))
            lower = ir__is_word(p, "true");
        else
            return ir__perr_expected(p, "true or false");
        ir__next(p);
        if (!ir__st_add_attr(p, st, "lower", ir_attr_bool(p->m, lower)))
            return false;
    }
    return opt_attr_dict(p, st) && sig_tail(p, st, true);
}

static bool form_parse_get_dimension_size(parser *p, op_state *st, int fmt)
{
    /* `%a, dim = N : (T) -> tensor<i32>` */
    return ir__parse_operand(p, st) && comma(p) && kw_i64(p, st, "dim", "dimension") && opt_attr_dict(p, st) &&
           sig_tail(p, st, false);
}

/* The parse column of the table in ir_forms.h (ok and print: ir/print.c). */
const ir__form_parser ir__form_parsers[IR_FMT__COUNT] = {
#define IR_FORM_PARSER(id, ok, print, parse) [IR_FMT_##id] = parse,
    IR_FORMS(IR_FORM_PARSER)
#undef IR_FORM_PARSER
};
