/*
 * types.c - MLIR types: element types, tensors (with encodings and
 * `#stablehlo.bounds`), tuples, function types, dialect and aliased types,
 * and the type signature after ':' of an op.
 */
#include "mlir_int.h"

#include <stdio.h>
#include <stdlib.h>

/* ================================================================= types */

static ir_elem elem_lookup(const char *s, uint32_t len)
{
#define IR_ELEM_CMP(e, text, bytes, cls)                                     \
    if (sizeof(text) - 1 == len && memcmp(text, s, len) == 0 && text[0] != 'c') \
        return IR_E_##e;
    IR_ELEMS(IR_ELEM_CMP)
#undef IR_ELEM_CMP
    return IR_E_NONE;
}

static bool is_int_width_word(const char *s, uint32_t len)
{
    uint32_t i = s[0] == 'i' ? 1 : (len > 2 && (s[0] == 's' || s[0] == 'u') && s[1] == 'i') ? 2 : 0;
    if (i == 0 || i >= len)
        return false;
    for (; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* element-type ::= f32 | i8 | complex<f32> | !dialect.type<...> | ... */
static bool parse_elem(parser *p, ir_elem *e, const char **text)
{
    const char *at = p->tok.at;
    *text = NULL;
    if (p->tok.kind == T_BANG) {
        const char *name_end = p->tok.s + p->tok.len;
        ir__next(p);
        if (p->tok.kind == T_LESS && p->tok.at == name_end)
            *text = ir__take_angle_text(p, at); /* !dialect.type<...> */
        else
            *text = ir_intern(p->m, at, (size_t)(name_end - at));
        *e = IR_E_OPAQUE;
        return *text != NULL;
    }
    if (p->tok.kind != T_IDENT)
        return ir__perr_expected(p, "an element type");
    const char *s = p->tok.s;
    uint32_t len = p->tok.len;
    if (len == 7 && memcmp(s, "complex", 7) == 0) {
        ir__next(p);
        if (!ir__expect(p, T_LESS, "'<' after 'complex'"))
            return false;
        if (ir__accept_word(p, "f32"))
            *e = IR_E_C64;
        else if (ir__accept_word(p, "f64"))
            *e = IR_E_C128;
        else
            return ir__perr_expected(p, "f32 or f64 inside complex<>");
        return ir__expect(p, T_GREATER, "'>'");
    }
    ir_elem found = elem_lookup(s, len);
    if (found != IR_E_NONE) {
        *e = found;
        ir__next(p);
        return true;
    }
    if (is_int_width_word(s, len)) { /* i3, ui7, i128: kept as text */
        *text = ir_intern(p->m, s, len);
        *e = IR_E_OPAQUE;
        ir__next(p);
        return *text != NULL;
    }
    return ir__perr(p, at, AP_ESYNTAX, "unknown element type '%.*s'", (int)len, s);
}

/* `#stablehlo.bounds<?, 2, ?>`: the static upper size of each dynamic dim
 * (`?` for none), as XLA's bounded dims `s32[2,<=2,2]` import.  Checked as
 * StableHLO does (one entry per dim, a bound only on a dynamic dim, no
 * negative bound) and spelled canonically, so that spacing does not make
 * two types differ; returns the interned text or NULL after an error. */
static const char *bounds_canonical(parser *p, const char *s, size_t len, int rank, const int64_t *dims)
{
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "#stablehlo.bounds<");
    const char *q = s + 18, *end = s + len - 1, *err_at = NULL;
    const char *why = NULL;
    int n = 0;
    while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
        q++;
    while (q < end && !why) {
        const char *item = q;
        if (n)
            ap_buf_puts(&b, ", ");
        if (*q == '?') {
            q++;
            ap_buf_putc(&b, '?');
        } else if (*q >= '0' && *q <= '9') {
            int64_t v = 0;
            while (q < end && *q >= '0' && *q <= '9') {
                if (v > (INT64_MAX - 9) / 10) {
                    why = "bound is too large";
                    break;
                }
                v = v * 10 + (*q++ - '0');
            }
            if (!why && n < rank && dims[n] != IR_DYN)
                why = "a static dimension cannot have a bound";
            ap_buf_printf(&b, "%lld", (long long)v);
        } else {
            why = "expected '?' or a non-negative bound";
        }
        if (why) {
            err_at = item;
            break;
        }
        n++;
        while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
            q++;
        if (q < end && *q != ',') {
            why = "expected ',' between bounds";
            err_at = q;
        } else if (q < end) {
            q++;
            while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
                q++;
            if (q == end) {
                why = "expected a bound after ','";
                err_at = q;
            }
        }
    }
    if (!why && n != rank) {
        why = rank < 0 ? "an unranked tensor cannot have bounds" : "bounds must have one entry per dimension";
        err_at = s;
    }
    ap_buf_putc(&b, '>');
    const char *r = NULL;
    if (why)
        ir__perr(p, err_at, AP_ETYPE, "invalid #stablehlo.bounds: %s", why);
    else if (b.oom || !(r = ir_intern(p->m, b.data, b.len)))
        ir__perr(p, s, AP_ENOMEM, "out of memory");
    ap_buf_free(&b);
    return r;
}

/* tensor-type ::= tensor< (dim x)* elem (, encoding)? >   dim ::= N | ? | * */
static const ir_type *parse_tensor_type(parser *p)
{
    /* current token is '<' right after `tensor` */
    const char *q = p->tok.at + 1, *end = p->lx.end;
    int64_t dims_inline[IR_MAX_RANK], *dims = dims_inline;
    int rank = 0, cap = IR_MAX_RANK;
    bool unranked = false;
    const ir_type *t = NULL;
    for (;;) {
        while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
            q++;
        const char *dim_at = q;
        int64_t d;
        if (q < end && *q == '?') {
            d = IR_DYN;
            q++;
        } else if (q < end && *q == '*' && rank == 0) {
            unranked = true;
            q++;
            d = 0;
        } else if (q < end && *q >= '0' && *q <= '9') {
            d = 0;
            while (q < end && *q >= '0' && *q <= '9') {
                if (d > (INT64_MAX - 9) / 10) {
                    ir__perr(p, dim_at, AP_ESYNTAX, "dimension size is too large");
                    goto out;
                }
                d = d * 10 + (*q - '0');
                q++;
            }
        } else {
            break; /* element type starts here */
        }
        if (q >= end || *q != 'x') {
            ir__perr(p, q, AP_ESYNTAX, "expected 'x' after a dimension in a tensor type");
            goto out;
        }
        q++;
        if (unranked)
            continue;
        if (rank >= IR_MAX_RANK) {
            ir__perr(p, dim_at, AP_EUNSUPPORTED, "tensor rank above %d is not supported", IR_MAX_RANK);
            goto out;
        }
        if (rank == cap) { /* unreachable: cap is IR_MAX_RANK; kept for safety */
            ir__perr(p, dim_at, AP_EUNSUPPORTED, "tensor rank too large");
            goto out;
        }
        dims[rank++] = d;
    }
    ir__reset_to(p, q);
    ir_elem e;
    const char *etext;
    if (!parse_elem(p, &e, &etext))
        goto out;
    const char *encoding = NULL;
    if (p->tok.kind == T_COMMA) {
        const char *start = p->lx.p;
        while (start < end && *start == ' ')
            start++;
        /* the encoding attribute runs to the closing '>' of the tensor */
        const char *close = NULL;
        int depth = 0;
        for (const char *r = start; r < end; r++) {
            if (*r == '"') {
                for (r++; r < end && *r != '"'; r++)
                    if (*r == '\\')
                        r++;
                continue;
            }
            if (*r == '<' || *r == '(' || *r == '[' || *r == '{')
                depth++;
            else if ((*r == '>' && r[-1] != '-') || *r == ')' || *r == ']' || *r == '}') {
                if (depth == 0) {
                    close = r;
                    break;
                }
                depth--;
            }
        }
        if (!close || *close != '>') {
            ir__perr(p, start, AP_ESYNTAX, "unterminated tensor encoding");
            goto out;
        }
        size_t elen = (size_t)(close - start);
        while (elen && (start[elen - 1] == ' ' || start[elen - 1] == '\n' || start[elen - 1] == '\t' ||
                        start[elen - 1] == '\r'))
            elen--;
        if (elen > 18 && memcmp(start, "#stablehlo.bounds<", 18) == 0 && start[elen - 1] == '>') {
            if (!(encoding = bounds_canonical(p, start, elen, unranked ? -1 : rank, dims)))
                goto out;
        } else if (!(encoding = ir_intern(p->m, start, elen))) {
            ir__perr(p, start, AP_ENOMEM, "out of memory");
            goto out;
        }
        ir__reset_to(p, close);
    }
    if (!ir__expect(p, T_GREATER, "'>' to close the tensor type"))
        goto out;
    t = ir_type_tensor_ex(p->m, e, etext, unranked ? -1 : rank, dims, encoding);
    if (!t)
        ir__perr(p, q, AP_ENOMEM, "out of memory");
out:
    return t;
}

/* '(' type (, type)* ')' or '()' */
static bool parse_type_list_paren(parser *p, const ir_type ***out, uint32_t *n)
{
    const ir_type **v = NULL;
    uint32_t cnt = 0, cap = 0;
    if (!ir__expect(p, T_LPAREN, "'('"))
        return false;
    if (p->tok.kind != T_RPAREN) {
        for (;;) {
            const ir_type *t = ir__parse_type(p);
            if (!t || !GROW(p, v, cap, cnt + 1))
                goto fail;
            v[cnt++] = t;
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    if (!ir__expect(p, T_RPAREN, "')'"))
        goto fail;
    *out = v;
    *n = cnt;
    return true;
fail:
    ap_free(v);
    return false;
}

/* function-type ::= (types) -> (type | (types)) */
static const ir_type *parse_function_type(parser *p)
{
    const ir_type **in = NULL, **out = NULL, *one;
    uint32_t n_in = 0, n_out = 0;
    const ir_type *t = NULL;
    if (!parse_type_list_paren(p, &in, &n_in))
        return NULL;
    if (!ir__expect(p, T_ARROW, "'->' in a function type"))
        goto out;
    if (p->tok.kind == T_LPAREN) {
        /* `-> (a, b)` or `-> (a) -> b` (a function result): try the list */
        if (!parse_type_list_paren(p, &out, &n_out))
            goto out;
        if (p->tok.kind == T_ARROW) { /* it was a function type result */
            const ir_type **r = NULL;
            uint32_t nr = 0;
            ir__next(p);
            const ir_type *res = ir__parse_type(p);
            if (!res)
                goto out;
            one = ir_type_function(p->m, (int)n_out, out, 1, &res);
            (void)r;
            (void)nr;
            ap_free(out);
            out = NULL;
            t = one ? ir_type_function(p->m, (int)n_in, in, 1, &one) : NULL;
            goto out;
        }
        t = ir_type_function(p->m, (int)n_in, in, (int)n_out, out);
    } else {
        one = ir__parse_type(p);
        if (!one)
            goto out;
        t = ir_type_function(p->m, (int)n_in, in, 1, &one);
    }
out:
    if (!t && !p->failed)
        ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    ap_free(in);
    ap_free(out);
    return t;
}


/* type ::= tensor<...> | tuple<...> | (..) -> .. | !dialect... | scalar */
const ir_type *ir__parse_type(parser *p)
{
    const char *at = p->tok.at;
    if (++p->depth > PARSE_MAX_DEPTH) {
        ir__perr(p, at, AP_ELIMIT, "types nested too deeply");
        return NULL;
    }
    const ir_type *t = NULL;
    switch (p->tok.kind) {
    case T_LPAREN:
        t = parse_function_type(p);
        break;
    case T_BANG: {
        if (p->tok.len == 15 && memcmp(p->tok.s, "stablehlo.token", 15) == 0) {
            ir__next(p);
            t = ir_type_token(p->m);
            break;
        }
        if (!memchr(p->tok.s, '.', p->tok.len)) { /* a type alias */
            t = ir__alias_find(&p->type_aliases, p->tok.s, p->tok.len);
            if (!t) {
                ir__perr(p, at, AP_EUNDEFINED, "undefined type alias '!%.*s'", (int)p->tok.len, p->tok.s);
                break;
            }
            ir__next(p);
            break;
        }
        ir_elem e;
        const char *text;
        if (parse_elem(p, &e, &text))
            t = ir_type_opaque(p->m, text);
        break;
    }
    case T_IDENT:
        if (ir__is_word(p, "tensor")) {
            ir__next(p);
            if (p->tok.kind != T_LESS) {
                ir__perr_expected(p, "'<' after 'tensor'");
                break;
            }
            t = parse_tensor_type(p);
        } else if (ir__is_word(p, "tuple")) {
            ir__next(p);
            const ir_type **v = NULL;
            uint32_t n = 0, cap = 0;
            if (!ir__expect(p, T_LESS, "'<' after 'tuple'"))
                break;
            bool ok = true;
            if (p->tok.kind != T_GREATER) {
                for (;;) {
                    const ir_type *x = ir__parse_type(p);
                    if (!x || !GROW(p, v, cap, n + 1)) {
                        ok = false;
                        break;
                    }
                    v[n++] = x;
                    if (!ir__accept(p, T_COMMA))
                        break;
                }
            }
            if (ok && ir__expect(p, T_GREATER, "'>' to close the tuple type"))
                t = ir_type_tuple(p->m, (int)n, v);
            ap_free(v);
        } else if (ir__is_word(p, "vector") || ir__is_word(p, "memref")) {
            ir__next(p);
            const char *text = ir__take_angle_text(p, at);
            if (text)
                t = ir_type_opaque(p->m, text);
        } else if (ir__is_word(p, "none")) {
            ir__next(p);
            t = ir_type_opaque(p->m, "none");
        } else {
            ir_elem e;
            const char *text;
            if (parse_elem(p, &e, &text))
                t = ir_type_scalar(p->m, e, text);
        }
        break;
    default:
        ir__perr_expected(p, "a type");
        break;
    }
    p->depth--;
    if (!t && !p->failed)
        ir__perr(p, at, AP_ENOMEM, "out of memory");
    return t;
}

static bool parse_sig_in(parser *p, op_sig *sig);

/* sig ::= '(' types ')' '->' results | types ('->' results)?  On failure
 * nothing stays allocated. */
bool ir__parse_sig(parser *p, op_sig *sig)
{
    if (parse_sig_in(p, sig))
        return true;
    ap_free(sig->in);
    ap_free(sig->out);
    memset(sig, 0, sizeof *sig);
    return false;
}
static bool parse_sig_in(parser *p, op_sig *sig)
{
    memset(sig, 0, sizeof *sig);
    uint32_t cap = 0;
    if (p->tok.kind == T_LPAREN) {
        /* `(T, ...) -> R` functional, or a parenthesized... always functional */
        if (!parse_type_list_paren(p, &sig->in, &sig->n_in))
            return false;
        if (!ir__expect(p, T_ARROW, "'->' in the op's type"))
            return false;
        sig->functional = true;
        if (p->tok.kind == T_LPAREN)
            return parse_type_list_paren(p, &sig->out, &sig->n_out);
        const ir_type *t = ir__parse_type(p);
        if (!t || !GROW(p, sig->out, cap, 1))
            return false;
        sig->out[0] = t;
        sig->n_out = 1;
        return true;
    }
    for (;;) {
        const ir_type *t = ir__parse_type(p);
        if (!t || !GROW(p, sig->out, cap, sig->n_out + 1))
            return false;
        sig->out[sig->n_out++] = t;
        if (!ir__accept(p, T_COMMA))
            break;
    }
    if (p->tok.kind == T_ARROW) { /* `T, T -> T` style: inputs then results */
        ir__next(p);
        sig->in = sig->out;
        sig->n_in = sig->n_out;
        sig->out = NULL;
        sig->n_out = 0;
        cap = 0;
        sig->functional = true;
        if (p->tok.kind == T_LPAREN)
            return parse_type_list_paren(p, &sig->out, &sig->n_out);
        const ir_type *t = ir__parse_type(p);
        if (!t || !GROW(p, sig->out, cap, 1))
            return false;
        sig->out[0] = t;
        sig->n_out = 1;
    }
    return true;
}
void ir__sig_free(op_sig *sig)
{
    ap_free(sig->in);
    ap_free(sig->out);
}
