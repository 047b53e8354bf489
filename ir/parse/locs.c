/*
 * locs.c - MLIR locations: `loc(...)` in all its forms (names, files with
 * ranges, call sites, fused) and location aliases used before they are
 * defined.
 */
#include "mlir_int.h"

#include <stdio.h>
#include <stdlib.h>

/* ============================================================= locations */

ir_loc *ir__loc_new(parser *p, ir_loc_kind k)
{
    ir_loc *l = ir__zalloc(p->m, sizeof *l);
    if (!l)
        ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    else
        l->kind = (uint8_t)k;
    return l;
}

/* The location alias #name: defined, or a placeholder filled in later. */
static const ir_loc *loc_alias_ref(parser *p)
{
    alias_ent *e = ir__alias_find_ent(&p->loc_aliases, p->tok.s, p->tok.len);
    if (e) {
        ir__next(p);
        return e->ptr;
    }
    ir_loc *ph = ir__loc_new(p, IR_L_PENDING);
    if (!ph || !ir__alias_add(p, &p->loc_aliases, p->tok.s, p->tok.len, ph, p->tok.at))
        return NULL;
    ph->str = ir_intern(p->m, p->tok.s, p->tok.len); /* for the error message */
    ir__next(p);
    return ph;
}

static const ir_loc *parse_loc_inner(parser *p);

static const char *intern_string_tok(parser *p)
{
    size_t len;
    char *s = ir__unescape(p, p->tok.s, p->tok.len, &len);
    return s ? ir_intern(p->m, s, len) : NULL;
}

/* loc-inner ::= unknown | #alias | "name" ('(' loc-inner ')')?
 *             | "file":L:C (to (L)?:C)? | callsite(a at b) | fused<..>?[..] */
static const ir_loc *parse_loc_inner(parser *p)
{
    const char *at = p->tok.at;
    if (++p->depth > PARSE_MAX_DEPTH) {
        ir__perr(p, at, AP_ELIMIT, "locations nested too deeply");
        return NULL;
    }
    const ir_loc *r = NULL;
    if (p->tok.kind == T_HASH) {
        r = loc_alias_ref(p);
    } else if (ir__accept_word(p, "unknown")) {
        r = ir__loc_new(p, IR_L_UNKNOWN);
    } else if (p->tok.kind == T_STRING) {
        const char *s = intern_string_tok(p);
        if (!s)
            goto out;
        ir__next(p);
        if (p->tok.kind == T_COLON) {
            ir_loc *l = ir__loc_new(p, IR_L_FILE);
            int64_t v;
            if (!l)
                goto out;
            l->str = s;
            ir__next(p);
            if (!ir__parse_int(p, &v))
                goto out;
            l->line = (int32_t)v;
            if (!ir__expect(p, T_COLON, "':' and a column"))
                goto out;
            if (!ir__parse_int(p, &v))
                goto out;
            l->col = (int32_t)v;
            if (ir__accept_word(p, "to")) {
                if (ir__accept(p, T_COLON)) {
                    l->end_line = -1;
                } else {
                    if (!ir__parse_int(p, &v) || !ir__expect(p, T_COLON, "':'"))
                        goto out;
                    l->end_line = (int32_t)v;
                }
                if (!ir__parse_int(p, &v))
                    goto out;
                l->end_col = (int32_t)v;
            }
            r = l;
        } else {
            ir_loc *l = ir__loc_new(p, IR_L_NAME);
            if (!l)
                goto out;
            l->str = s;
            if (ir__accept(p, T_LPAREN)) {
                if (!(l->a = parse_loc_inner(p)) || !ir__expect(p, T_RPAREN, "')'"))
                    goto out;
            }
            r = l;
        }
    } else if (ir__accept_word(p, "callsite")) {
        ir_loc *l = ir__loc_new(p, IR_L_CALLSITE);
        if (!l || !ir__expect(p, T_LPAREN, "'('") || !(l->a = parse_loc_inner(p)) ||
            !ir__expect_word(p, "at") || !(l->b = parse_loc_inner(p)) || !ir__expect(p, T_RPAREN, "')'"))
            goto out;
        r = l;
    } else if (ir__accept_word(p, "fused")) {
        ir_loc *l = ir__loc_new(p, IR_L_FUSED);
        const ir_loc **v = NULL;
        uint32_t n = 0, cap = 0;
        if (!l)
            goto out;
        if (p->tok.kind == T_LESS) {
            const char *close = ir__scan_angle(p->tok.at, p->lx.end);
            if (!close) {
                ir__perr(p, p->tok.at, AP_ESYNTAX, "unbalanced '<'");
                goto out;
            }
            l->str = ir_intern(p->m, p->tok.at + 1, (size_t)(close - p->tok.at - 1));
            ir__reset_to(p, close + 1);
        }
        if (!ir__expect(p, T_LBRACKET, "'['"))
            goto out;
        if (p->tok.kind != T_RBRACKET) {
            for (;;) {
                const ir_loc *x = parse_loc_inner(p);
                if (!x || !GROW(p, v, cap, n + 1)) {
                    ap_free(v);
                    goto out;
                }
                v[n++] = x;
                if (!ir__accept(p, T_COMMA))
                    break;
            }
        }
        if (!ir__expect(p, T_RBRACKET, "']'")) {
            ap_free(v);
            goto out;
        }
        l->n = (int32_t)n;
        l->locs = n ? ap_arena_memdup(&p->m->arena, v, sizeof *v * n) : NULL;
        ap_free(v);
        r = l;
    } else {
        ir__perr_expected(p, "a location");
    }
out:
    p->depth--;
    return p->failed ? NULL : r;
}

/* loc ::= loc '(' loc-inner ')'   (optional; *ok false on error) */
const ir_loc *ir__parse_opt_loc(parser *p, bool *ok)
{
    *ok = true;
    if (!ir__is_word(p, "loc"))
        return NULL;
    ir__next(p);
    const ir_loc *l = NULL;
    if (!ir__expect(p, T_LPAREN, "'(' after 'loc'") || !(l = parse_loc_inner(p)) ||
        !ir__expect(p, T_RPAREN, "')' to close the location")) {
        *ok = false;
        return NULL;
    }
    return l;
}
