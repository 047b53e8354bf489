/*
 * attrs.c - MLIR attributes: numbers, strings, arrays, dictionaries, dense
 * arrays, dense elements, dialect attributes (with the canonical spelling
 * of convolution dimension numbers) and opaque ones; and an op's
 * attribute dictionary.
 */
#include "mlir_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ============================================================ attributes */

static double parse_float_text(const char *s, uint32_t len)
{
    char buf[64];
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return strtod(buf, NULL);
}

/* number [: type]: int, float, or hex bit pattern of a float */
static ir_attr *parse_number_attr(parser *p, bool type_suffix)
{
    const char *at = p->tok.at;
    bool neg = ir__accept(p, T_MINUS);
    bool is_float = p->tok.kind == T_FLOAT;
    bool is_hex = p->tok.kind == T_INT && p->tok.len > 2 && p->tok.s[1] == 'x';
    if (p->tok.kind != T_INT && p->tok.kind != T_FLOAT) {
        ir__perr_expected(p, "a number");
        return NULL;
    }
    double f = 0;
    uint64_t u = 0;
    if (is_float)
        f = parse_float_text(p->tok.s, p->tok.len);
    else if (!ir__tok_to_u64(p, &u))
        return NULL;
    ir__next(p);
    const ir_type *type = NULL;
    if (type_suffix && p->tok.kind == T_COLON) {
        ir__next(p);
        if (!(type = ir__parse_type(p)))
            return NULL;
    }
    ir_elem e = type ? (ir_elem)type->elem : IR_E_NONE;
    bool float_type = type && type->kind == IR_T_SCALAR && ir_elem_is_float(e);
    if (is_float || float_type) {
        if (!is_float) {
            if (is_hex && float_type) {
                uint8_t raw[8] = {0};
                memcpy(raw, &u, (size_t)ir_elem_bytes(e));
                f = ir__float_load(e, raw);
            } else {
                f = (double)u;
            }
        }
        if (type && !float_type) {
            ir__perr(p, at, AP_ETYPE, "a floating-point literal needs a float type");
            return NULL;
        }
        if (neg)
            f = -f;
        if (float_type) { /* keep the value the type can hold, as MLIR does */
            uint8_t raw[8];
            ir__float_store(e, raw, f);
            f = ir__float_load(e, raw);
        }
        return ir_attr_float(p->m, f, type);
    }
    if (!neg && u > (uint64_t)INT64_MAX && !(type && ir_elem_is_unsigned(e))) {
        ir__perr(p, at, AP_ESYNTAX, "integer literal is too large");
        return NULL;
    }
    return ir_attr_int(p->m, neg ? (int64_t)(0 - u) : (int64_t)u, type);
}

/* array<T: v, v> */
static ir_attr *parse_dense_array(parser *p)
{
    const char *at = p->tok.at;
    ir__next(p); /* array */
    if (!ir__expect(p, T_LESS, "'<' after 'array'"))
        return NULL;
    const ir_type *et = ir__parse_type(p);
    if (!et)
        return NULL;
    if (et->kind != IR_T_SCALAR || et->elem == IR_E_OPAQUE) {
        ir__perr(p, at, AP_ESYNTAX, "array<> needs an integer or float element type");
        return NULL;
    }
    ir_elem e = (ir_elem)et->elem;
    bool is_f = ir_elem_is_float(e);
    int64_t *ints = NULL;
    double *fl = NULL;
    uint32_t n = 0, cap = 0;
    ir_attr *a = NULL;
    if (ir__accept(p, T_COLON)) {
        for (;;) {
            if (is_f) {
                ir_attr *x = parse_number_attr(p, false);
                if (!x || !GROW(p, fl, cap, n + 1))
                    goto out;
                double fv = x->kind == IR_A_FLOAT ? x->u.f : (double)x->u.i;
                uint8_t raw[8];
                ir__float_store(e, raw, fv);
                fl[n++] = ir__float_load(e, raw);
            } else {
                int64_t v;
                if (e == IR_E_I1 && (ir__is_word(p, "true") || ir__is_word(p, "false"))) {
                    v = ir__is_word(p, "true");
                    ir__next(p);
                } else if (!ir__parse_int(p, &v)) {
                    goto out;
                }
                if (!GROW(p, ints, cap, n + 1))
                    goto out;
                ints[n++] = v;
            }
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    if (!ir__expect(p, T_GREATER, "'>' to close array<>"))
        goto out;
    a = ir__zalloc(p->m, sizeof *a);
    if (!a)
        goto out;
    a->kind = IR_A_DENSE_ARRAY;
    a->type = et;
    a->u.darr.n = (int32_t)n;
    if (is_f) {
        a->u.darr.floats = n ? ap_arena_memdup(&p->m->arena, fl, sizeof *fl * n) : ir__alloc(p->m, 8);
        if (!a->u.darr.floats)
            a = NULL;
    } else if (n) {
        a->u.darr.ints = ap_arena_memdup(&p->m->arena, ints, sizeof *ints * n);
        if (!a->u.darr.ints)
            a = NULL;
    }
out:
    ap_free(ints);
    ap_free(fl);
    if (!a && !p->failed)
        ir__perr(p, at, AP_ENOMEM, "out of memory");
    return a;
}

/* --------------------------------------------------------------- dense */

typedef struct dense_fill {
    ir_elem e;
    int eb;
    uint8_t *data;
    size_t n, cap; /* elements */
} dense_fill;

/* One element of a dense literal into f at index f->n. */
static bool dense_elem(parser *p, dense_fill *f)
{
    if (f->n >= f->cap)
        return ir__perr(p, p->tok.at, AP_ETYPE, "dense literal has more elements than its type");
    uint8_t *dst = f->data + f->n * (size_t)f->eb;
    ir_elem e = f->e;
    if (ir_elem_is_complex(e)) {
        /* each part reads as a float element, so a hex part is a bit
         * pattern (as the printer writes NaN and infinity parts) */
        ir_elem part = e == IR_E_C64 ? IR_E_F32 : IR_E_F64;
        dense_fill parts = {part, ir_elem_bytes(part), dst, 0, 2};
        if (!ir__expect(p, T_LPAREN, "'(' of a complex value") || !dense_elem(p, &parts) ||
            !ir__expect(p, T_COMMA, "',' in a complex value") || !dense_elem(p, &parts))
            return false;
        f->n++;
        return ir__expect(p, T_RPAREN, "')' of a complex value");
    }
    if (ir__is_word(p, "true") || ir__is_word(p, "false")) {
        if (!ir_elem_is_int(e))
            return ir__perr(p, p->tok.at, AP_ETYPE, "boolean literal in a dense of %s", ir_elem_name(e));
        ir__int_store(e, dst, ir__is_word(p, "true"));
        ir__next(p);
        f->n++;
        return true;
    }
    const char *at = p->tok.at;
    bool neg = ir__accept(p, T_MINUS);
    if (ir__is_word(p, "inf") || ir__is_word(p, "nan")) {
        double v = ir__is_word(p, "inf") ? INFINITY : NAN;
        ir__next(p);
        if (!ir__float_store(e, dst, neg ? -v : v))
            return ir__perr(p, at, AP_ETYPE, "float literal in a dense of %s", ir_elem_name(e));
        f->n++;
        return true;
    }
    if (p->tok.kind == T_FLOAT) {
        double v = parse_float_text(p->tok.s, p->tok.len);
        if (!ir__float_store(e, dst, neg ? -v : v))
            return ir__perr(p, at, AP_ETYPE, "float literal in a dense of %s", ir_elem_name(e));
        ir__next(p);
        f->n++;
        return true;
    }
    if (p->tok.kind != T_INT)
        return ir__perr_expected(p, "a dense element");
    bool is_hex = p->tok.len > 2 && p->tok.s[1] == 'x';
    uint64_t u;
    if (!ir__tok_to_u64(p, &u))
        return false;
    ir__next(p);
    if (ir_elem_is_float(e)) {
        if (is_hex) { /* bit pattern */
            uint64_t bits = u;
            memcpy(dst, &bits, (size_t)f->eb);
        } else {
            ir__float_store(e, dst, neg ? -(double)u : (double)u);
        }
    } else if (ir_elem_is_int(e)) {
        int bits = ir_elem_bits(e);
        if (bits < 64) {
            uint64_t lim = ir_elem_is_unsigned(e) || !neg ? (1ULL << bits) - 1 : (1ULL << (bits - 1));
            if (e == IR_E_I1)
                lim = 1;
            if (u > lim && !(neg && u == 0))
                return ir__perr(p, at, AP_ETYPE, "value %s%llu does not fit in %s", neg ? "-" : "",
                                (unsigned long long)u, ir_elem_name(e));
        }
        ir__int_store(e, dst, neg ? (int64_t)(0 - u) : (int64_t)u);
    } else {
        return ir__perr(p, at, AP_ETYPE, "number in a dense of %s", ir_elem_name(e));
    }
    f->n++;
    return true;
}

/* nested list matching the tensor's shape from dimension `dim` */
static bool dense_list(parser *p, dense_fill *f, const ir_type *t, int dim)
{
    if (++p->depth > PARSE_MAX_DEPTH)
        return ir__perr(p, p->tok.at, AP_ELIMIT, "dense literal nested too deeply");
    bool ok;
    if (p->tok.kind != T_LBRACKET) {
        if (dim != t->rank)
            ok = ir__perr(p, p->tok.at, AP_ETYPE, "dense literal does not match the shape of its type (expected a list at depth %d)", dim);
        else
            ok = dense_elem(p, f);
    } else if (dim >= t->rank) {
        ok = ir__perr(p, p->tok.at, AP_ETYPE, "dense literal is nested deeper than its type's rank %d", t->rank);
    } else {
        const char *open_at = p->tok.at;
        ir__next(p);
        int64_t cnt = 0;
        ok = true;
        if (p->tok.kind != T_RBRACKET) {
            for (;;) {
                if (!dense_list(p, f, t, dim + 1)) {
                    ok = false;
                    break;
                }
                cnt++;
                if (!ir__accept(p, T_COMMA))
                    break;
            }
        }
        if (ok && !ir__expect(p, T_RBRACKET, "']'"))
            ok = false;
        if (ok && cnt != t->dims[dim])
            ok = ir__perr(p, open_at, AP_ETYPE, "dense literal has %lld elements in dimension %d but its type has %lld",
                          (long long)cnt, dim, (long long)t->dims[dim]);
    }
    p->depth--;
    return ok;
}

/* dense<body> : type */
static ir_attr *parse_dense(parser *p)
{
    const char *at = p->tok.at;
    ir__next(p); /* dense */
    if (p->tok.kind != T_LESS) {
        ir__perr_expected(p, "'<' after 'dense'");
        return NULL;
    }
    const char *body = p->tok.at + 1;
    const char *close = ir__scan_angle(p->tok.at, p->lx.end);
    if (!close) {
        ir__perr(p, p->tok.at, AP_ESYNTAX, "unterminated dense<...>");
        return NULL;
    }
    ir__reset_to(p, close + 1);
    if (!ir__expect(p, T_COLON, "':' and a type after dense<...>"))
        return NULL;
    const char *type_at = p->tok.at;
    const ir_type *t = ir__parse_type(p);
    if (!t)
        return NULL;
    const char *after = p->tok.at;
    ir_attr *a = ir__zalloc(p->m, sizeof *a);
    if (!a) {
        ir__perr(p, at, AP_ENOMEM, "out of memory");
        return NULL;
    }
    a->kind = IR_A_DENSE;
    a->type = t;
    if (t->kind != IR_T_TENSOR && t->kind != IR_T_OPAQUE) {
        ir__perr(p, type_at, AP_ETYPE, "dense<...> needs a tensor type");
        return NULL;
    }
    int64_t numel = ir_type_numel(t);
    ir_elem e = (ir_elem)t->elem;
    int eb = ir_elem_bytes(e);
    const char *bs = body, *be = close;
    while (bs < be && (*bs == ' ' || *bs == '\n'))
        bs++;
    while (be > bs && (be[-1] == ' ' || be[-1] == '\n'))
        be--;
    if (t->kind != IR_T_TENSOR || e == IR_E_OPAQUE || eb == 0 || numel < 0 ||
        (bs < be && *bs == '"' && !(be - bs > 3 && bs[1] == '0' && (bs[2] == 'x' || bs[2] == 'X')))) {
        /* strings, quantized or dynamic: keep the text */
        a->u.dense.text = ap_arena_strndup(&p->m->arena, bs, (size_t)(be - bs));
        if (!a->u.dense.text)
            a = NULL;
        return a;
    }
    if ((uint64_t)numel > SIZE_MAX / (uint64_t)eb / 2) {
        ir__perr(p, type_at, AP_ELIMIT, "constant is too large");
        return NULL;
    }
    if (bs < be && *bs == '"') { /* hex blob */
        size_t hex_digits = (size_t)(be - bs) - 4;
        const char *h = bs + 3;
        if (hex_digits % 2) {
            ir__perr(p, bs, AP_ESYNTAX, "hex constant has an odd number of digits");
            return NULL;
        }
        size_t nbytes = hex_digits / 2;
        bool packed_bool = e == IR_E_I1 && nbytes == (size_t)(numel + 7) / 8 && nbytes != (size_t)numel;
        if (nbytes != (size_t)eb && nbytes != (size_t)numel * (size_t)eb && !packed_bool) {
            ir__perr(p, bs, AP_ETYPE, "hex constant has %zu bytes but %s needs %lld", nbytes,
                     ir_elem_name(e), (long long)numel * eb);
            return NULL;
        }
        uint8_t *data = ir__alloc(p->m, packed_bool ? (size_t)numel : nbytes ? nbytes : 1);
        if (!data) {
            ir__perr(p, at, AP_ENOMEM, "out of memory");
            return NULL;
        }
        for (size_t i = 0; i < nbytes; i++) {
            int hi = ir__hexval(h[2 * i]), lo = ir__hexval(h[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                ir__perr(p, h + 2 * i, AP_ESYNTAX, "invalid hex digit in constant");
                return NULL;
            }
            if (!packed_bool)
                data[i] = (uint8_t)(hi * 16 + lo);
            else
                for (int k = 0; k < 8 && (int64_t)(i * 8 + (size_t)k) < numel; k++)
                    data[i * 8 + (size_t)k] = (uint8_t)(((hi * 16 + lo) >> k) & 1);
        }
        a->u.dense.data = data;
        a->u.dense.nbytes = packed_bool ? (size_t)numel : nbytes;
        a->u.dense.splat = !packed_bool && nbytes == (size_t)eb && numel != 1;
        return a;
    }
    /* parse the body with the element type known */
    dense_fill f = {e, eb, NULL, 0, (size_t)numel};
    const char *saved_end = p->lx.end;
    p->lx.end = close;
    ir__reset_to(p, body);
    bool ok;
    if (p->tok.kind == T_EOF) { /* dense<> */
        f.cap = 0;
        ok = numel == 0 ? true : ir__perr(p, body, AP_ETYPE, "empty dense<> for a tensor of %lld elements", (long long)numel);
        f.data = ir__alloc(p->m, 1);
    } else if (p->tok.kind != T_LBRACKET || t->rank == 0) {
        f.cap = 1; /* splat */
        f.data = ir__alloc(p->m, (size_t)eb);
        ok = f.data && dense_elem(p, &f);
    } else {
        f.data = ir__alloc(p->m, (size_t)numel * (size_t)eb + 1);
        ok = f.data && dense_list(p, &f, t, 0);
    }
    if (ok && p->tok.kind != T_EOF)
        ok = ir__perr_expected(p, "'>' to end dense<...>");
    p->lx.end = saved_end;
    if (!ok) {
        if (!f.data && !p->failed)
            ir__perr(p, at, AP_ENOMEM, "out of memory");
        return NULL;
    }
    ir__reset_to(p, after);
    a->u.dense.data = f.data;
    a->u.dense.nbytes = f.n * (size_t)eb;
    a->u.dense.splat = f.cap == 1 && numel != 1;
    return a;
}

/* ------------------------------------------------------- dialect attrs */

/* Canonical text of convolution dimension numbers from their `raw` or
 * compact spelling; NULL when the body is neither. */

/* #name<body> : key = value lists become params; other bodies stay text */
static ir_attr *parse_dialect_attr(parser *p)
{
    const char *at = p->tok.at;
    const char *name = p->tok.s;
    uint32_t name_len = p->tok.len;
    const char *after_name = name + name_len;
    ir__next(p);
    if (p->tok.kind != T_LESS || p->tok.at != after_name) {
        /* an alias: #loc is not an attribute; #map etc. */
        ir_attr *a = ir__alias_find(&p->attr_aliases, name, name_len);
        if (!a) {
            if (!memchr(name, '.', name_len) || 1) {
                /* unknown alias or a parameterless dialect attribute: keep text */
                ir_attr *o = ir__zalloc(p->m, sizeof *o);
                if (!o)
                    return NULL;
                if (!memchr(name, '.', name_len)) {
                    ir__perr(p, at, AP_EUNDEFINED, "undefined attribute alias '#%.*s'", (int)name_len, name);
                    return NULL;
                }
                o->kind = IR_A_OPAQUE;
                o->u.str.s = ap_arena_strndup(&p->m->arena, at, (size_t)(after_name - at));
                o->u.str.len = (size_t)(after_name - at);
                return o->u.str.s ? o : NULL;
            }
        }
        return a;
    }
    return ir__parse_dialect_body(p, at, name, name_len);
}

ir_attr *ir__parse_dialect_body(parser *p, const char *at, const char *name, uint32_t name_len)
{
    const char *close = ir__scan_angle(p->tok.at, p->lx.end);
    if (!close) {
        ir__perr(p, p->tok.at, AP_ESYNTAX, "unbalanced '<' in #%.*s", (int)name_len, name);
        return NULL;
    }
    const char *body = p->tok.at + 1;
    char *dname = ap_arena_strndup(&p->m->arena, name, name_len);
    if (!dname) {
        ir__perr(p, at, AP_ENOMEM, "out of memory");
        return NULL;
    }
    /* Try `key = attr, ...` with a sub-parse limited to the body. */
    ir_named_attr *kv = NULL;
    uint32_t n = 0, cap = 0;
    bool kv_ok = true;
    {
        const char *saved_end = p->lx.end;
        ap_error *saved_err = p->err;
        ap_error scratch;
        p->err = &scratch;
        p->lx.end = close;
        ir__reset_to(p, body);
        if (p->tok.kind == T_EOF)
            kv_ok = false;
        while (kv_ok && p->tok.kind != T_EOF) {
            if (p->tok.kind != T_IDENT) {
                kv_ok = false;
                break;
            }
            const char *k = ir_intern(p->m, p->tok.s, p->tok.len);
            ir__next(p);
            if (!k || !ir__accept(p, T_EQUAL)) {
                kv_ok = false;
                break;
            }
            ir_attr *v = ir__parse_attr(p, true);
            if (!v || !GROW(p, kv, cap, n + 1)) {
                kv_ok = false;
                break;
            }
            kv[n].name = k;
            kv[n].value = v;
            n++;
            if (!ir__accept(p, T_COMMA) && p->tok.kind != T_EOF)
                kv_ok = false;
        }
        bool oom = p->failed && scratch.code == AP_ENOMEM;
        p->failed = false;
        p->err = saved_err;
        p->lx.end = saved_end;
        if (oom) {
            ap_free(kv);
            ir__perr(p, at, AP_ENOMEM, "out of memory");
            return NULL;
        }
    }
    ir__reset_to(p, close + 1);
    ir_attr *a = ir__zalloc(p->m, sizeof *a);
    if (!a) {
        ap_free(kv);
        return NULL;
    }
    a->kind = IR_A_DIALECT;
    a->u.dia.name = ir_intern(p->m, dname, name_len);
    if (kv_ok && n > 0) {
        a->u.dia.n = (int32_t)n;
        a->u.dia.params = ap_arena_memdup(&p->m->arena, kv, sizeof *kv * n);
        ap_free(kv);
        return a->u.dia.params ? a : NULL;
    }
    ap_free(kv);
    const char *bs = body, *be = close;
    while (bs < be && (*bs == ' ' || *bs == '\n'))
        bs++;
    while (be > bs && (be[-1] == ' ' || be[-1] == '\n'))
        be--;
    if (name_len == 14 && memcmp(name, "stablehlo.conv", 14) == 0) {
        a->u.dia.body = ir__conv_dims_canonical(p, bs, (size_t)(be - bs));
        if (!a->u.dia.body)
            return NULL;
        return a;
    }
    a->u.dia.body = ap_arena_strndup(&p->m->arena, bs, (size_t)(be - bs));
    return a->u.dia.body ? a : NULL;
}

/* Parses `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` (or the `raw k = v`
 * form) and prints it back canonically. */
static bool conv_part(const char *s, size_t len, size_t *pos, const char *letters, int64_t *spatial,
                      int *n_spatial, int64_t *l0, int64_t *l1)
{
    size_t i = *pos;
    int idx = 0;
    *n_spatial = 0;
    *l0 = *l1 = -1;
    while (i < len && s[i] == ' ')
        i++;
    if (i >= len || s[i] != '[')
        return false;
    i++;
    for (;;) {
        while (i < len && s[i] == ' ')
            i++;
        if (i >= len)
            return false;
        char c = s[i];
        if (c >= '0' && c <= '9') {
            int64_t v = 0;
            while (i < len && s[i] >= '0' && s[i] <= '9') {
                v = v * 10 + (s[i++] - '0');
                if (v >= IR_MAX_RANK)
                    return false;
            }
            if (*n_spatial >= IR_MAX_RANK)
                return false;
            if (v + 1 > *n_spatial)
                for (int k = *n_spatial; k <= v; k++)
                    spatial[k] = -1;
            if (v + 1 > *n_spatial)
                *n_spatial = (int)v + 1;
            spatial[v] = idx;
        } else if (c == letters[0]) {
            *l0 = idx;
            i++;
        } else if (c == letters[1]) {
            *l1 = idx;
            i++;
        } else {
            return false;
        }
        idx++;
        while (i < len && s[i] == ' ')
            i++;
        if (i < len && s[i] == ',') {
            i++;
            continue;
        }
        if (i < len && s[i] == ']') {
            i++;
            break;
        }
        return false;
    }
    for (int k = 0; k < *n_spatial; k++)
        if (spatial[k] < 0)
            return false;
    *pos = i;
    return *l0 >= 0 && *l1 >= 0;
}

static void conv_print_part(ap_buf *b, int rank, const int64_t *sp, int n_sp, int64_t l0, int64_t l1,
                            const char *letters)
{
    ap_buf_putc(b, '[');
    for (int i = 0; i < rank; i++) {
        if (i)
            ap_buf_puts(b, ", ");
        if (i == l0)
            ap_buf_putc(b, letters[0]);
        else if (i == l1)
            ap_buf_putc(b, letters[1]);
        else
            for (int k = 0; k < n_sp; k++)
                if (sp[k] == i)
                    ap_buf_printf(b, "%d", k);
    }
    ap_buf_putc(b, ']');
}

/* The nine fields of `#stablehlo.conv<raw ...>`, in the order StableHLO
 * prints them. */
static const char *const conv_raw_keys[9] = {
    "input_batch_dimension",          "input_feature_dimension",         "input_spatial_dimensions",
    "kernel_input_feature_dimension", "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension",         "output_feature_dimension",        "output_spatial_dimensions",
};

/* Whether the dims of one side of a convolution (two named dims and the
 * spatial ones) are a permutation of 0..rank-1, as the compact form needs. */
static bool conv_side_compact(int64_t l0, int64_t l1, const int64_t *sp, int n)
{
    int rank = n + 2;
    bool seen[IR_MAX_RANK + 2] = {0};
    int64_t all[IR_MAX_RANK + 2];
    all[0] = l0;
    all[1] = l1;
    for (int i = 0; i < n; i++)
        all[i + 2] = sp[i];
    for (int i = 0; i < rank; i++) {
        if (all[i] < 0 || all[i] >= rank || seen[all[i]])
            return false;
        seen[all[i]] = true;
    }
    return true;
}

/* `raw input_batch_dimension = 0, ..., output_spatial_dimensions = [1, 2]`
 * (keys in any order, on several lines, a trailing comma allowed): the
 * compact form when the dims allow it, so both spellings give one IR;
 * otherwise (an index out of range, as MLIR lets attributes hold) the raw
 * form with the keys in StableHLO's order. */
static const char *conv_raw_canonical(parser *p, const char *s, size_t len)
{
    int64_t scalar[9] = {0}, lists[9][IR_MAX_RANK];
    int nlist[9] = {0};
    bool have[9] = {0};
    size_t i = 3;
    const char *bad = NULL;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (i >= len)
            break;
        size_t k0 = i;
        while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
            i++;
        int key = -1;
        for (int k = 0; k < 9; k++)
            if (strlen(conv_raw_keys[k]) == i - k0 && memcmp(conv_raw_keys[k], s + k0, i - k0) == 0)
                key = k;
        if (key < 0 || have[key]) {
            bad = s + k0;
            break;
        }
        have[key] = true;
        while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (i >= len || s[i] != '=') {
            bad = s + i;
            break;
        }
        i++;
        bool list = key % 3 == 2;
        while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (list) {
            if (i >= len || s[i] != '[') {
                bad = s + i;
                break;
            }
            i++;
        }
        for (;;) {
            while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
                i++;
            if (list && i < len && s[i] == ']' && nlist[key] == 0)
                break;
            bool neg = i < len && s[i] == '-';
            if (neg)
                i++;
            if (i >= len || s[i] < '0' || s[i] > '9') {
                bad = s + i;
                break;
            }
            int64_t v = 0;
            while (i < len && s[i] >= '0' && s[i] <= '9') {
                if (v > (INT64_MAX - 9) / 10) {
                    bad = s + i;
                    break;
                }
                v = v * 10 + (s[i++] - '0');
            }
            if (bad)
                break;
            v = neg ? -v : v;
            if (!list) {
                scalar[key] = v;
                break;
            }
            if (nlist[key] == IR_MAX_RANK) {
                bad = s + i;
                break;
            }
            lists[key][nlist[key]++] = v;
            while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
                i++;
            if (i < len && s[i] == ',') {
                i++;
                continue;
            }
            break;
        }
        if (bad)
            break;
        if (list) {
            if (i >= len || s[i] != ']') {
                bad = s + i;
                break;
            }
            i++;
        }
        while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (i < len && s[i] != ',') {
            bad = s + i;
            break;
        }
        i++;
    }
    for (int k = 0; !bad && k < 9; k++)
        if (!have[k]) {
            ir__perr(p, s, AP_ESYNTAX, "convolution dimension numbers lack '%s'", conv_raw_keys[k]);
            return NULL;
        }
    if (bad) {
        ir__perr(p, bad, AP_ESYNTAX, "malformed raw convolution dimension numbers");
        return NULL;
    }
    ap_buf b;
    ap_buf_init(&b);
    int n = nlist[2];
    if (nlist[5] == n && nlist[8] == n && n <= IR_MAX_RANK - 2 &&
        conv_side_compact(scalar[0], scalar[1], lists[2], n) && conv_side_compact(scalar[3], scalar[4], lists[5], n) &&
        conv_side_compact(scalar[6], scalar[7], lists[8], n)) {
        int64_t sp[3][IR_MAX_RANK];
        for (int side = 0; side < 3; side++)
            for (int d = 0; d < n; d++)
                sp[side][d] = lists[3 * side + 2][d];
        conv_print_part(&b, n + 2, sp[0], n, scalar[0], scalar[1], "bf");
        ap_buf_putc(&b, 'x');
        conv_print_part(&b, n + 2, sp[1], n, scalar[3], scalar[4], "io");
        ap_buf_puts(&b, "->");
        conv_print_part(&b, n + 2, sp[2], n, scalar[6], scalar[7], "bf");
    } else {
        ap_buf_puts(&b, "raw ");
        for (int k = 0; k < 9; k++) {
            ap_buf_printf(&b, "%s%s = ", k ? ", " : "", conv_raw_keys[k]);
            if (k % 3 != 2) {
                ap_buf_printf(&b, "%lld", (long long)scalar[k]);
                continue;
            }
            ap_buf_putc(&b, '[');
            for (int d = 0; d < nlist[k]; d++)
                ap_buf_printf(&b, "%s%lld", d ? ", " : "", (long long)lists[k][d]);
            ap_buf_putc(&b, ']');
        }
    }
    const char *r = b.oom ? NULL : ap_arena_strndup(&p->m->arena, b.data, b.len);
    ap_buf_free(&b);
    if (!r)
        ir__perr(p, s, AP_ENOMEM, "out of memory");
    return r;
}

const char *ir__conv_dims_canonical(parser *p, const char *s, size_t len)
{
    ir_conv_dims d;
    int ns_in, ns_k, ns_out;
    size_t i = 0;
    bool ok;
    if (len > 3 && memcmp(s, "raw", 3) == 0 && (s[3] == ' ' || s[3] == '\n' || s[3] == '\t' || s[3] == '\r'))
        return conv_raw_canonical(p, s, len);
    ok = conv_part(s, len, &i, "bf", d.in_spatial, &ns_in, &d.in_batch, &d.in_feature);
    while (ok && i < len && s[i] == ' ')
        i++;
    ok = ok && i < len && s[i] == 'x';
    i++;
    ok = ok && conv_part(s, len, &i, "io", d.kernel_spatial, &ns_k, &d.kernel_in, &d.kernel_out);
    while (ok && i < len && s[i] == ' ')
        i++;
    ok = ok && i + 1 < len && s[i] == '-' && s[i + 1] == '>';
    i += 2;
    ok = ok && conv_part(s, len, &i, "bf", d.out_spatial, &ns_out, &d.out_batch, &d.out_feature);
    while (ok && i < len && s[i] == ' ')
        i++;
    if (!ok || i != len || ns_in != ns_k || ns_in != ns_out) {
        ir__perr(p, s, AP_ESYNTAX, "malformed convolution dimension numbers '%.*s'", (int)(len > 60 ? 60 : len), s);
        return NULL;
    }
    ap_buf b;
    ap_buf_init(&b);
    conv_print_part(&b, ns_in + 2, d.in_spatial, ns_in, d.in_batch, d.in_feature, "bf");
    ap_buf_putc(&b, 'x');
    conv_print_part(&b, ns_in + 2, d.kernel_spatial, ns_k, d.kernel_in, d.kernel_out, "io");
    ap_buf_puts(&b, "->");
    conv_print_part(&b, ns_in + 2, d.out_spatial, ns_out, d.out_batch, d.out_feature, "bf");
    const char *r = b.oom ? NULL : ap_arena_strndup(&p->m->arena, b.data, b.len);
    ap_buf_free(&b);
    if (!r)
        ir__perr(p, s, AP_ENOMEM, "out of memory");
    return r;
}

/* Keeps a construct we do not model (affine_map<...>, sparse<...>) as text. */
static ir_attr *opaque_angle_attr(parser *p)
{
    const char *at = p->tok.at;
    ir__next(p);
    const char *text = ir__take_angle_text(p, at);
    if (!text)
        return NULL;
    ir_attr *a = ir__zalloc(p->m, sizeof *a);
    if (!a)
        return NULL;
    a->kind = IR_A_OPAQUE;
    a->u.str.s = text;
    a->u.str.len = ir__intern_len(text);
    return a;
}

/* attr ::= number | string | bool | unit | @sym | [..] | {..} | array<..>
 *        | dense<..> : t | dense_resource<..> : t | #dialect<..> | type */
static ir_attr *parse_attr_value(parser *p, bool type_suffix);

/* Parses one attribute and returns the module's uniqued copy of it.  When
 * an equal attribute exists, what parsing this one allocated is given back
 * (if it made no new interned strings or types, which other objects could
 * point to). */
ir_attr *ir__parse_attr(parser *p, bool type_suffix)
{
    ap_arena_mark mark = ap_arena_get_mark(&p->m->arena);
    size_t n_interned = ir__interned_count(p->m);
    ir_attr *a = parse_attr_value(p, type_suffix);
    if (!a)
        return NULL;
    ir_attr *canon = ir__attr_intern(p->m, a, true);
    if (!canon) {
        ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
        return NULL;
    }
    if (canon != a && n_interned == ir__interned_count(p->m))
        ap_arena_rewind(&p->m->arena, mark);
    return canon;
}

static ir_attr *parse_attr_value(parser *p, bool type_suffix)
{
    const char *at = p->tok.at;
    ir_attr *a = NULL;
    if (++p->depth > PARSE_MAX_DEPTH) {
        ir__perr(p, at, AP_ELIMIT, "attributes nested too deeply");
        return NULL;
    }
    switch (p->tok.kind) {
    case T_INT:
    case T_FLOAT:
    case T_MINUS:
        a = parse_number_attr(p, type_suffix);
        break;
    case T_STRING: {
        size_t len;
        char *s = ir__unescape(p, p->tok.s, p->tok.len, &len);
        if (!s)
            break;
        ir__next(p);
        a = ir__zalloc(p->m, sizeof *a);
        if (!a)
            break;
        a->kind = IR_A_STRING;
        a->u.str.s = s;
        a->u.str.len = len;
        if (type_suffix && p->tok.kind == T_COLON) { /* typed string: rare */
            ir__next(p);
            if (!(a->type = ir__parse_type(p)))
                a = NULL;
        }
        break;
    }
    case T_AT: {
        size_t len = p->tok.len;
        const char *s = p->tok.s;
        char *name;
        if (*s == '"') {
            name = ir__unescape(p, s + 1, (uint32_t)len - 2, &len);
            if (!name)
                break;
        } else {
            name = (char *)s;
        }
        const char *iname = ir_intern(p->m, name, len);
        ir__next(p);
        if (p->tok.kind == T_DOUBLE_COLON) { /* nested reference: keep text */
            const char *start = at;
            while (p->tok.kind == T_DOUBLE_COLON) {
                ir__next(p);
                if (p->tok.kind != T_AT) {
                    ir__perr_expected(p, "a symbol after '::'");
                    break;
                }
                ir__next(p);
            }
            if (p->failed)
                break;
            a = ir__zalloc(p->m, sizeof *a);
            if (!a)
                break;
            a->kind = IR_A_OPAQUE;
            size_t tl = (size_t)(p->tok.at - start);
            while (tl && start[tl - 1] == ' ')
                tl--;
            a->u.str.s = ap_arena_strndup(&p->m->arena, start, tl);
            a->u.str.len = tl;
            break;
        }
        a = ir__zalloc(p->m, sizeof *a);
        if (!a || !iname)
            break;
        a->kind = IR_A_SYMREF;
        a->u.str.s = iname;
        a->u.str.len = len;
        break;
    }
    case T_LBRACKET: {
        ir_attr **items = NULL;
        uint32_t n = 0, cap = 0;
        ir__next(p);
        bool ok = true;
        if (p->tok.kind != T_RBRACKET) {
            for (;;) {
                ir_attr *x = ir__parse_attr(p, true);
                if (!x || !GROW(p, items, cap, n + 1)) {
                    ok = false;
                    break;
                }
                items[n++] = x;
                if (!ir__accept(p, T_COMMA))
                    break;
            }
        }
        if (ok && ir__expect(p, T_RBRACKET, "']' or ','"))
            a = ir_attr_array(p->m, (int)n, items);
        ap_free(items);
        break;
    }
    case T_LBRACE: {
        op_state st;
        ir__st_init(&st);
        st.name = "dictionary";
        if (ir__parse_attr_dict(p, &st, false))
            a = ir_attr_dict(p->m, (int)st.n_attrs, st.attrs);
        ir__st_free(&st);
        break;
    }
    case T_HASH:
        a = parse_dialect_attr(p);
        break;
    case T_IDENT:
        if (ir__is_word(p, "true") || ir__is_word(p, "false")) {
            a = ir_attr_bool(p->m, ir__is_word(p, "true"));
            ir__next(p);
        } else if (ir__is_word(p, "unit")) {
            a = ir_attr_unit(p->m);
            ir__next(p);
        } else if (ir__is_word(p, "dense")) {
            a = parse_dense(p);
        } else if (ir__is_word(p, "array")) {
            a = parse_dense_array(p);
        } else if (ir__is_word(p, "dense_resource")) {
            ir__next(p);
            if (!ir__expect(p, T_LESS, "'<' after dense_resource"))
                break;
            if (p->tok.kind != T_IDENT && p->tok.kind != T_STRING) {
                ir__perr_expected(p, "a resource name");
                break;
            }
            const char *rn = p->tok.s;
            uint32_t rl = p->tok.len;
            ir__next(p);
            if (!ir__expect(p, T_GREATER, "'>'") || !ir__expect(p, T_COLON, "':' and a type"))
                break;
            const ir_type *t = ir__parse_type(p);
            if (!t)
                break;
            a = ir__zalloc(p->m, sizeof *a);
            if (!a)
                break;
            a->kind = IR_A_DENSE_RESOURCE;
            a->type = t;
            a->u.str.s = ap_arena_strndup(&p->m->arena, rn, rl);
            a->u.str.len = rl;
        } else if (ir__is_word(p, "affine_map") || ir__is_word(p, "affine_set") ||
                   ir__is_word(p, "sparse") || ir__is_word(p, "strided") ||
                   ir__is_word(p, "opaque")) {
            a = opaque_angle_attr(p);
        } else if (ir__is_word(p, "loc")) {
            ir__perr(p, at, AP_ESYNTAX, "a location is not an attribute here");
        } else {
            const ir_type *t = ir__parse_type(p);
            if (t)
                a = ir_attr_type(p->m, t);
        }
        break;
    case T_LPAREN:
    case T_BANG: {
        const ir_type *t = ir__parse_type(p);
        if (t)
            a = ir_attr_type(p->m, t);
        break;
    }
    default:
        ir__perr_expected(p, "an attribute value");
        break;
    }
    p->depth--;
    if (!a && !p->failed)
        ir__perr(p, at, AP_ENOMEM, "out of memory");
    return a;
}

/* attr-dict ::= '{' (key ('=' attr)? (',' key ('=' attr)?)*)? '}' */
bool ir__parse_attr_dict(parser *p, op_state *st, bool props)
{
    if (!ir__expect(p, T_LBRACE, "'{'"))
        return false;
    if (ir__accept(p, T_RBRACE))
        return true;
    for (;;) {
        const char *key;
        if (p->tok.kind == T_IDENT) {
            key = ir_intern(p->m, p->tok.s, p->tok.len);
        } else if (p->tok.kind == T_STRING) {
            size_t len;
            char *s = ir__unescape(p, p->tok.s, p->tok.len, &len);
            key = s ? ir_intern(p->m, s, len) : NULL;
        } else {
            return ir__perr_expected(p, "an attribute name");
        }
        if (!key)
            return p->failed ? false : ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
        ir__next(p);
        ir_attr *v;
        if (ir__accept(p, T_EQUAL))
            v = ir__parse_attr(p, true);
        else
            v = ir_attr_unit(p->m);
        if (!v || !GROW(p, st->attrs, st->cap_attrs, st->n_attrs + 1))
            return false;
        st->attrs[st->n_attrs].name = key;
        st->attrs[st->n_attrs].value = v;
        st->n_attrs++;
        if (props)
            st->n_props++;
        if (ir__accept(p, T_RBRACE))
            return true;
        if (!ir__expect(p, T_COMMA, "',' or '}' in an attribute dictionary"))
            return false;
    }
}
