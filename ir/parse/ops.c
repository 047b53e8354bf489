/*
 * ops.c - MLIR ops: regions and blocks, the generic form, ops of other
 * dialects in their custom syntax (kept as templates), functions and
 * modules, and the dispatch of an op to its form.
 */
#include "mlir_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

/* A registered op in its pretty form, read by the form's parser that the
 * top level handed in (p->forms: pretty.c's forms of StableHLO ops). */
static bool parse_generic_tail(parser *p, op_state *st);

static bool parse_pretty(parser *p, op_state *st)
{
    int fmt = ir_op_info_get(st->opcode)->fmt;
    /* StableHLO prints a constant whose value's type is not its result's
     * (a quantized constant holds integers) as its bare name and then the
     * generic form: `stablehlo.constant() {value = ...} : () -> T`. */
    if (st->opcode == IR_OP_CONSTANT && p->tok.kind == T_LPAREN)
        return parse_generic_tail(p, st);
    ir__form_parser form = fmt >= 0 && fmt < IR_FMT__COUNT ? p->forms[fmt] : NULL;
    if (!form)
        return ir__perr(p, st->at, AP_ESYNTAX, "'%s' must be written in the generic form \"%s\"(...)", st->name,
                        st->name);
    return form(p, st, fmt);
}

/* ========================================================== regions/blocks */

/* arg-decls ::= '(' (%x ':' type attr-dict? loc? (',' ...)*)? ')' */
bool ir__parse_arg_decls(parser *p, arg_list *args, bool allow_attrs)
{
    if (!ir__expect(p, T_LPAREN, "'('"))
        return false;
    if (ir__accept(p, T_RPAREN))
        return true;
    for (;;) {
        if (p->tok.kind != T_PERCENT)
            return ir__perr_expected(p, "an argument name");
        if (!GROW(p, args->v, args->cap, args->n + 1))
            return false;
        arg_decl *d = &args->v[args->n++];
        memset(d, 0, sizeof *d);
        d->name = p->tok.s;
        d->len = p->tok.len;
        d->at = p->tok.at;
        ir__next(p);
        if (!ir__expect(p, T_COLON, "':' and the argument's type"))
            return false;
        if (!(d->type = ir__parse_type(p)))
            return false;
        if (allow_attrs && p->tok.kind == T_LBRACE)
            return ir__perr(p, p->tok.at, AP_EINTERNAL, "argument attributes handled by caller");
        bool ok;
        d->loc = ir__parse_opt_loc(p, &ok);
        if (!ok)
            return false;
        if (ir__accept(p, T_RPAREN))
            return true;
        if (!ir__expect(p, T_COMMA, "',' or ')'"))
            return false;
    }
}

static bool parse_op_in(parser *p, ir_block *block);

static label_ent *label_get(parser *p, uint32_t mark, const char *s, uint32_t len, const char *at)
{
    for (uint32_t i = mark; i < p->n_labels; i++)
        if (p->labels[i].len == len && memcmp(p->labels[i].name, s, len) == 0)
            return &p->labels[i];
    if (!GROW(p, p->labels, p->cap_labels, p->n_labels + 1))
        return NULL;
    label_ent *e = &p->labels[p->n_labels++];
    e->name = s;
    e->len = len;
    e->block = ir__zalloc(p->m, sizeof(ir_block));
    e->first_use = at;
    e->defined = false;
    if (!e->block) {
        ir__perr(p, at, AP_ENOMEM, "out of memory");
        return NULL;
    }
    return e;
}

static bool define_block_args(parser *p, ir_block *b, const arg_list *args)
{
    b->n_args = args->n;
    if (!args->n)
        return true;
    b->args = ir__zalloc(p->m, sizeof *b->args * args->n);
    if (!b->args)
        return ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < args->n; i++) {
        ir_value *v = &b->args[i];
        v->type = args->v[i].type;
        v->block = b;
        v->index = i;
        v->loc = args->v[i].loc;
        if (args->v[i].name && !ir__names_define(p, args->v[i].name, args->v[i].len, v, 1, args->v[i].at))
            return false;
    }
    return true;
}

/* region ::= '{' block* '}'   block ::= (^label args? ':')? op* */
bool ir__parse_region(parser *p, ir_region *r, const arg_list *args)
{
    const char *open = p->tok.at;
    if (!ir__expect(p, T_LBRACE, "'{' to start a region"))
        return false;
    if (++p->depth > PARSE_MAX_DEPTH)
        return ir__perr(p, open, AP_ELIMIT, "regions nested too deeply");
    ir__names_push_scope(p);
    uint32_t label_mark = p->n_labels;
    uint32_t saved_mark = p->label_mark;
    p->label_mark = label_mark;
    bool ok = true;
    ir_block *cur = NULL;
    if (p->tok.kind != T_CARET && p->tok.kind != T_RBRACE) {
        cur = ir__zalloc(p->m, sizeof *cur);
        if (!cur || !define_block_args(p, cur, args ? args : &(arg_list){0}))
            ok = false;
        else
            ir_region_append(r, cur);
    } else if (args && args->n && p->tok.kind == T_RBRACE) {
        /* declared arguments but an empty body: keep an empty entry block */
        cur = ir__zalloc(p->m, sizeof *cur);
        if (!cur || !define_block_args(p, cur, args))
            ok = false;
        else
            ir_region_append(r, cur);
    }
    while (ok && p->tok.kind != T_RBRACE) {
        if (p->tok.kind == T_EOF) {
            ok = ir__perr(p, open, AP_ESYNTAX, "region opened here is not closed (missing '}')");
            break;
        }
        if (p->tok.kind == T_CARET) {
            const char *at = p->tok.at;
            label_ent *e = label_get(p, label_mark, p->tok.s, p->tok.len, at);
            if (!e) {
                ok = false;
                break;
            }
            if (e->defined) {
                ok = ir__perr(p, at, AP_ESYNTAX, "redefinition of block '^%.*s'", (int)e->len, e->name);
                break;
            }
            e->defined = true;
            ir__next(p);
            arg_list blk = {0};
            if (p->tok.kind == T_LPAREN && !ir__parse_arg_decls(p, &blk, false)) {
                ir__arg_list_free(&blk);
                ok = false;
                break;
            }
            if (!r->first && args && args->n && blk.n == 0) {
                ir__arg_list_free(&blk);
                ok = ir__perr(p, at, AP_ESYNTAX, "entry block arguments were already declared");
                break;
            }
            ok = define_block_args(p, e->block, &blk) && ir__expect(p, T_COLON, "':' after the block label");
            ir__arg_list_free(&blk);
            if (!ok)
                break;
            cur = e->block;
            ir_region_append(r, cur);
            continue;
        }
        if (!cur) {
            ok = ir__perr_expected(p, "a block label");
            break;
        }
        ok = ir__parse_op(p, cur);
    }
    for (uint32_t i = label_mark; ok && i < p->n_labels; i++)
        if (!p->labels[i].defined)
            ok = ir__perr(p, p->labels[i].first_use, AP_EUNDEFINED, "reference to an undefined block '^%.*s'",
                          (int)p->labels[i].len, p->labels[i].name);
    p->n_labels = label_mark;
    p->label_mark = saved_mark;
    if (ok)
        ok = ir__expect(p, T_RBRACE, "'}'");
    ir__names_pop_scope(p);
    p->depth--;
    return ok;
}

/* ================================================================== ops */

/* A successor reference ^label. */
static bool parse_successor(parser *p, op_state *st)
{
    label_ent *e = label_get(p, p->label_mark, p->tok.s, p->tok.len, p->tok.at);
    if (!e || !GROW(p, st->successors, st->cap_successors, st->n_successors + 1))
        return false;
    st->successors[st->n_successors++] = e->block;
    ir__next(p);
    return true;
}

/* generic-op ::= "name" generic-tail
 * generic-tail ::= '(' operands ')' successors? props? regions?
 *                  attr-dict? ':' function-type */
static bool parse_generic_tail(parser *p, op_state *st)
{
    const char *sig_at;
    op_sig sig;
    if (!ir__expect(p, T_LPAREN, "'(' after the op name"))
        return false;
    if (p->tok.kind != T_RPAREN) {
        for (;;) {
            if (!ir__parse_operand(p, st))
                return false;
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    if (!ir__expect(p, T_RPAREN, "')' after the operands"))
        return false;
    if (ir__accept(p, T_LBRACKET)) {
        for (;;) {
            if (p->tok.kind != T_CARET)
                return ir__perr_expected(p, "a successor block");
            if (!parse_successor(p, st))
                return false;
            if (!ir__accept(p, T_COMMA))
                break;
        }
        if (!ir__expect(p, T_RBRACKET, "']'"))
            return false;
    }
    if (p->tok.kind == T_LESS) { /* <{ properties }> */
        ir__next(p);
        if (p->tok.kind != T_LBRACE)
            return ir__perr_expected(p, "'{' of the properties");
        if (!ir__parse_attr_dict(p, st, true) || !ir__expect(p, T_GREATER, "'>' to close the properties"))
            return false;
    }
    if (p->tok.kind == T_LPAREN) {
        ir__next(p);
        for (;;) {
            ir_region *r = ir__new_region(p);
            if (!r || !ir__parse_region(p, r, NULL) || !ir__st_add_region(p, st, r))
                return false;
            if (!ir__accept(p, T_COMMA))
                break;
        }
        if (!ir__expect(p, T_RPAREN, "')' after the regions"))
            return false;
    }
    if (p->tok.kind == T_LBRACE && !ir__parse_attr_dict(p, st, false))
        return false;
    sig_at = p->tok.at;
    if (!ir__expect(p, T_COLON, "':' and the op's function type"))
        return false;
    if (p->tok.kind != T_LPAREN)
        return ir__perr_expected(p, "a function type '(...) -> ...'");
    if (!ir__parse_sig(p, &sig))
        return false;
    bool ok = ir__apply_sig_functional(p, st, &sig, sig_at);
    ir__sig_free(&sig);
    return ok;
}

static bool parse_generic_op(parser *p, op_state *st)
{
    ir__next(p); /* the name string */
    return parse_generic_tail(p, st);
}

/* ----------------------------------------------- opaque custom syntax */

static bool tmpl_add(parser *p, ir_tmpl_piece **v, uint32_t *n, uint32_t *cap, ir_tmpl_piece piece)
{
    if (piece.kind == IR_TP_TEXT && piece.len == 0)
        return true;
    if (!GROW(p, *v, *cap, *n + 1))
        return false;
    (*v)[(*n)++] = piece;
    return true;
}

/* Where a `//` comment that runs to `to` (the end of an op's text)
 * starts, or `to` when none does; strings are skipped whole. */
static const char *trailing_comment(const char *from, const char *to)
{
    const char *q = memchr(from, '/', (size_t)(to - from));
    if (!q)
        return to;
    for (q = from; q < to; q++) {
        if (*q == '"') {
            for (q++; q < to && *q != '"'; q++)
                if (*q == '\\')
                    q++;
        } else if (*q == '/' && q + 1 < to && q[1] == '/') {
            const char *nl = memchr(q, '\n', (size_t)(to - q));
            if (!nl)
                return q;
            q = nl;
        }
    }
    return to;
}

/* A literal piece of an opaque op's text, kept as written (comments too:
 * types and attributes inside it are read from the same raw text, and
 * must read alike when it is parsed again).  The op's last piece drops a
 * comment that ends it, which would swallow what the printer writes after
 * the op on its line. */
static bool text_piece_ex(parser *p, ir_tmpl_piece **v, uint32_t *n, uint32_t *cap, const char *from,
                          const char *to, bool last)
{
    while (last) { /* comments and blank lines, however many, end it */
        while (to > from && (to[-1] == ' ' || to[-1] == '\n' || to[-1] == '\t' || to[-1] == '\r'))
            to--;
        const char *c = trailing_comment(from, to);
        if (c == to)
            break;
        to = c;
    }
    if (to <= from)
        return true;
    ir_tmpl_piece t = {.kind = IR_TP_TEXT};
    size_t len = (size_t)(to - from);
    if (len > UINT32_MAX)
        return ir__perr(p, from, AP_ELIMIT, "op text too long");
    t.text = ap_arena_strndup(&p->m->arena, from, len);
    if (!t.text)
        return ir__perr(p, from, AP_ENOMEM, "out of memory");
    t.len = (uint32_t)len;
    return tmpl_add(p, v, n, cap, t);
}

static bool text_piece(parser *p, ir_tmpl_piece **v, uint32_t *n, uint32_t *cap, const char *from,
                       const char *to)
{
    return text_piece_ex(p, v, n, cap, from, to, false);
}

/* Does the token that starts a new line continue an op of unknown syntax?
 * Yes when the line before ended in ',', ':', '=' or '->', which no op
 * ends with; and when no op can start with the token: `key=` or `key =`
 * (a clause, as sdy.manual_computation writes `in_shardings=[...]` on its
 * own line), a keyword with its operands (`ins(`, `outs(`), an opening
 * bracket, ':' or '->' of a signature, '=', ',', '<', or a location.  Ops
 * start with %results, a "generic" name, a dotted name, a bare word of the
 * default dialect (`return`, `module {`) or a ^label. */
static bool continues_op(const parser *p)
{
    const ir_tok *t = &p->tok;
    /* a line cannot end an op with a separator: `foo.bar %a,\n %b : T` */
    switch (p->prev_kind) {
    case T_COMMA: case T_COLON: case T_EQUAL: case T_ARROW:
        return true;
    default:
        break;
    }
    switch (t->kind) {
    case T_LPAREN: case T_LBRACKET: case T_LBRACE: case T_COLON: case T_ARROW:
    case T_EQUAL: case T_COMMA: case T_LESS: case T_LESS_BRACE:
        return true;
    case T_IDENT: {
        if (memchr(t->s, '.', t->len))
            return false;
        const char *q = t->s + t->len, *end = p->lx.end;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if (q < end && *q == '=' && !(q + 1 < end && q[1] == '='))
            return true;
        /* a keyword with its operands: linalg's `ins(%a : T) outs(%b : T)` */
        if (q == t->s + t->len && q < end && *q == '(')
            return true;
        return t->len == 3 && memcmp(t->s, "loc", 3) == 0 && q < end && *q == '(' && q == t->s + 3;
    }
    default:
        return false;
    }
}

/* Is the '(' at the current token the argument list of a region: `(%a: T
 * ...)` followed by '{'? */
/* Skips white space and `//` comments: the lookaheads below read the raw
 * text, and must see it as the printed text (comments dropped) will be. */
static const char *skip_blank_comments(const char *q, const char *end)
{
    while (q < end) {
        if (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r') {
            q++;
        } else if (*q == '/' && q + 1 < end && q[1] == '/') {
            const char *nl = memchr(q, '\n', (size_t)(end - q));
            q = nl ? nl : end;
        } else {
            break;
        }
    }
    return q;
}

static bool at_region_args(parser *p)
{
    if (p->tok.kind != T_LPAREN)
        return false;
    /* `outs(%e : T) {`: a keyword's operands, not the region's arguments */
    const char *b = p->tok.at;
    if (b > p->lx.src && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
        return false;
    const char *q = p->tok.at + 1, *end = p->lx.end;
    q = skip_blank_comments(q, end);
    if (q >= end || *q != '%')
        return false;
    while (q < end && *q != ':' && *q != ',' && *q != ')')
        q++;
    if (q >= end || *q != ':')
        return false;
    /* find the matching ')' */
    int depth = 0;
    for (q = p->tok.at; q < end; q++) {
        if (*q == '"') {
            for (q++; q < end && *q != '"'; q++)
                if (*q == '\\')
                    q++;
            continue;
        }
        if (*q == '/' && q + 1 < end && q[1] == '/') {
            const char *nl = memchr(q, '\n', (size_t)(end - q));
            if (!nl)
                return false;
            q = nl;
            continue;
        }
        if (*q == '(' || *q == '[' || *q == '{' || *q == '<')
            depth++;
        else if (*q == ')' || *q == ']' || *q == '}' || (*q == '>' && q[-1] != '-'))
            if (--depth == 0)
                break;
    }
    if (q >= end)
        return false;
    q = skip_blank_comments(q + 1, end);
    return q < end && *q == '{';
}

/* `(%a: T loc(..), ...)` in an opaque op's text, declaring the next
 * region's arguments: into pending, each a piece of the template; the text
 * resumes at the ')'. */
static bool opaque_region_args(parser *p, op_state *st, arg_list *pending, ir_tmpl_piece **pieces, uint32_t *n,
                               uint32_t *cap, const char **text_from)
{
    bool ok = true;
    ir__arg_list_free(pending);
    ir__next(p); /* '(' */
    if (!text_piece(p, pieces, n, cap, *text_from, p->tok.at))
        return false;
    uint32_t region = st->n_regions;
    for (;;) {
        if (p->tok.kind != T_PERCENT) {
            ok = ir__perr_expected(p, "an argument name");
            break;
        }
        if (!GROW(p, pending->v, pending->cap, pending->n + 1)) {
            ok = false;
            break;
        }
        arg_decl *d = &pending->v[pending->n++];
        memset(d, 0, sizeof *d);
        d->name = p->tok.s;
        d->len = p->tok.len;
        d->at = p->tok.at;
        ok = tmpl_add(p, pieces, n, cap,
                      (ir_tmpl_piece){.kind = IR_TP_REGION_ARG, .index = pending->n - 1,
                                      .region = region});
        ir__next(p);
        /* the printer writes `%name: type loc(...)` itself */
        if (!ok || !ir__expect(p, T_COLON, "':'") || !(d->type = ir__parse_type(p))) {
            ok = false;
            break;
        }
        bool lok;
        d->loc = ir__parse_opt_loc(p, &lok);
        if (!lok) {
            ok = false;
            break;
        }
        if (p->tok.kind == T_COMMA) {
            const char *cs = p->tok.at;
            ir__next(p);
            if (!text_piece(p, pieces, n, cap, cs, p->tok.at)) {
                ok = false;
                break;
            }
            continue;
        }
        break;
    }
    if (!ok)
        return false;
    *text_from = p->tok.at;
    return ir__expect(p, T_RPAREN, "')'");
}

/* A region in an opaque op's text (at its '{'), with the arguments pending
 * declared before it: parsed into st, a piece of the template; the text
 * resumes after its '}'. */
static bool opaque_region(parser *p, op_state *st, arg_list *pending, ir_tmpl_piece **pieces, uint32_t *n,
                          uint32_t *cap, const char **text_from)
{
    if (!text_piece(p, pieces, n, cap, *text_from, p->tok.at))
        return false;
    ir_region *r = ir__new_region(p);
    if (!r || !ir__parse_region(p, r, pending) || !ir__st_add_region(p, st, r))
        return false;
    ir__arg_list_free(pending);
    bool ok = tmpl_add(p, pieces, n, cap, (ir_tmpl_piece){.kind = IR_TP_REGION, .index = st->n_regions - 1});
    *text_from = p->tok.at;
    {
        const char *q2 = p->tok.at;
        while (q2 > p->lx.src && (q2[-1] == ' ' || q2[-1] == '\t' || q2[-1] == '\r'))
            q2--;
        *text_from = q2;
    }
    return ok;
}

/* Result types from an opaque op's trailing `: ...` (sig_at: just after
 * its ':' or '->') when that parses as types, on a scratch error: text
 * that is not a signature leaves them unknown.  false: out of memory. */
static bool opaque_sig_types(parser *p, op_state *st, uint32_t n_results_expected, const char *sig_at)
{
    bool ok = true;
    const char *saved = p->lx.p;
    ir_tok saved_tok = p->tok;
    ap_error scratch, *saved_err = p->err;
    p->err = &scratch;
    ir__reset_to(p, sig_at);
    op_sig sig;
    if (ir__parse_sig(p, &sig)) {
        if (sig.n_out == n_results_expected)
            for (uint32_t i = 0; i < sig.n_out; i++)
                ir__st_add_result_type(p, st, sig.out[i]);
        else if (n_results_expected == 1 && sig.n_out > 1 && !sig.functional)
            ir__st_add_result_type(p, st, sig.out[sig.n_out - 1]);
    }
    ir__sig_free(&sig);
    bool oom = p->failed && scratch.code == AP_ENOMEM;
    p->failed = false;
    p->err = saved_err;
    p->lx.p = saved;
    p->tok = saved_tok;
    if (oom)
        ok = ir__perr(p, st->at, AP_ENOMEM, "out of memory");
    if (st->n_results != n_results_expected)
        st->n_results = 0;
    return ok;
}

/* An opaque op's template: its pieces copied into the module's arena. */
static bool store_template(parser *p, op_state *st, const ir_tmpl_piece *pieces, uint32_t n)
{
    ir_template *tp = ir__alloc(p->m, sizeof *tp);
    if (!tp)
        return ir__perr(p, st->at, AP_ENOMEM, "out of memory");
    tp->n = n;
    tp->pieces = n ? ap_arena_memdup(&p->m->arena, pieces, sizeof *pieces * n) : NULL;
    st->tmpl = tp;
    return true;
}

/* An op of an unknown dialect in its own syntax: everything up to the end
 * of its line (regions may span lines) is kept as a template; %values,
 * ^successors and regions inside it are parsed so they take part in the
 * IR. */
/* Ops of other dialects whose value is a literal in their custom syntax:
 * Shardy's `sdy.constant dense<...> : tensor<...>` (a constant Shardy keeps
 * from being folded or deduplicated), MLIR's `arith.constant dense<...> :
 * tensor<...>` (torch-mlir and TensorFlow exports write tensor constants
 * so; its scalar forms, `arith.constant 0 : index`, are not read), and the
 * StableHLO interpreter's
 * assertions `check.expect_eq_const %x, dense<...> : tensor<...>` and
 * check.expect_almost_eq_const (its test suite's 620 programs end in them).
 * They stay ops of unknown syntax, printed as written and counted under
 * their names, but the literal is read too, as stablehlo.constant's is, and
 * kept as the op's "value" attribute: the interpreter evaluates the
 * constant and `check` holds every run to the assertion (both refused
 * them).  The text is read twice: here, from a copy of the lexer's place
 * (past the operand and its comma for an assertion), and then as the op's
 * text.  A literal this reader does not take leaves the op without its
 * value (the interpreter then says so), as before. */
static bool opaque_literal_value(parser *p, op_state *st)
{
    bool constant = strcmp(st->name, "sdy.constant") == 0 || strcmp(st->name, "arith.constant") == 0;
    if (!constant && strcmp(st->name, "check.expect_eq_const") != 0 &&
        strcmp(st->name, "check.expect_almost_eq_const") != 0)
        return true;
    ir_lexer lx = p->lx;
    ir_tok tok = p->tok;
    uint8_t prev_kind = p->prev_kind;
    const char *prev_end = p->prev_end;
    int depth = p->depth;
    ap_error saved;
    if (p->err)
        saved = *p->err;
    if (!constant) { /* past `%x,` (or `%x#1,`) */
        for (int i = 0; i < 6 && p->tok.kind != T_COMMA && p->tok.kind != T_EOF && !(i && p->tok.nl_before); i++)
            ir__next(p);
        if (p->tok.kind == T_COMMA && !p->tok.nl_before)
            ir__next(p);
    }
    /* (an assertion's literal may start the next line: the op goes on past
     * its comma, as parse_opaque_op takes it) */
    bool dense = ir__is_word(p, "dense") && (!constant || !p->tok.nl_before);
    if (dense) {
        /* a `dense<` that never closes: the op's text would run on through
         * the lines after it (its '<' opens a nesting) and the error would
         * fall there ("use of value before its definition"); name it here,
         * as stablehlo.constant's is named */
        const char *lt = p->tok.at + 5;
        while (lt < p->lx.end && (*lt == ' ' || *lt == '\t'))
            lt++;
        if (lt < p->lx.end && *lt == '<' && !ir__scan_angle(lt, p->lx.end)) {
            p->lx = lx;
            p->tok = tok;
            p->prev_kind = prev_kind;
            p->prev_end = prev_end;
            p->depth = depth;
            return ir__perr(p, lt, AP_ESYNTAX, "unterminated dense<...> in %s", st->name);
        }
    }
    ir_attr *v = dense ? ir__parse_attr(p, true) : NULL;
    bool ok = v && v->kind == IR_A_DENSE && v->type && !p->failed;
    /* an assertion's attributes after it: `{tolerance = 0.1 : f64}` */
    if (ok && !constant && p->tok.kind == T_LBRACE && !p->tok.nl_before)
        ok = ir__parse_attr_dict(p, st, false);
    p->lx = lx;
    p->tok = tok;
    p->prev_kind = prev_kind;
    p->prev_end = prev_end;
    p->depth = depth;
    if (p->failed) { /* not ours to report: the op's text is taken as before */
        p->failed = false;
        if (p->err)
            *p->err = saved;
    }
    return !ok || ir__st_add_attr(p, st, "value", v);
}

static bool parse_opaque_op(parser *p, op_state *st, uint32_t n_results_expected, const char *name_end)
{
    ir_tmpl_piece *pieces = NULL;
    uint32_t n = 0, cap = 0;
    arg_list pending = {0};
    /* the text starts right after the op name: what separates the name
     * from the next token (spaces, a line break, a comment) must stay a
     * separation when printed */
    const char *text_from = name_end;
    const char *sig_colon = NULL; /* after the `:` (or `->`) of the trailing signature */
    const char *loc_at = NULL, *last_end = p->tok.at;
    uint32_t sig_piece = 0; /* pieces made before the signature's ':' */
    int depth = 0;
    bool ok = true;
    for (;;) {
        ir_tok *t = &p->tok;
        if (t->kind == T_EOF)
            break;
        if (t->kind == T_ERROR) {
            ok = ir__perr_expected(p, "the rest of the op");
            break;
        }
        if (depth == 0 && t->nl_before && !continues_op(p))
            break; /* ops of unknown syntax end with their line */
        if (depth == 0 && (t->kind == T_RBRACE || t->kind == T_RPAREN || t->kind == T_RBRACKET))
            break; /* closes something outside the op */
        if (ir__is_word(p, "loc")) {
            /* a location: the op's own when it ends the line, otherwise a
             * piece of the syntax printed through the alias table */
            bool lok;
            const char *lat = t->at;
            const ir_loc *l = ir__parse_opt_loc(p, &lok);
            if (!lok) {
                ok = false;
                break;
            }
            if (depth == 0 && (p->tok.kind == T_EOF || p->tok.nl_before || p->tok.kind == T_RBRACE)) {
                st->loc = l;
                loc_at = lat;
                break;
            }
            if (!text_piece(p, &pieces, &n, &cap, text_from, lat) ||
                !tmpl_add(p, &pieces, &n, &cap, (ir_tmpl_piece){.kind = IR_TP_LOC, .loc = l})) {
                ok = false;
                break;
            }
            {
                const char *q = p->tok.at;
                while (q > lat && (q[-1] == ' ' || q[-1] == '\n' || q[-1] == '\t' || q[-1] == '\r'))
                    q--;
                text_from = q;
            }
            continue;
        }
        switch (t->kind) {
        case T_PERCENT: {
            const char *at = t->at;
            if (!text_piece(p, &pieces, &n, &cap, text_from, at)) {
                ok = false;
                break;
            }
            ir_value *v = ir__lookup_value(p);
            if (!v || !ir__st_add_operand(p, st, v)) {
                ok = false;
                break;
            }
            ok = tmpl_add(p, &pieces, &n, &cap,
                          (ir_tmpl_piece){.kind = IR_TP_OPERAND, .index = st->n_operands - 1});
            text_from = last_end = p->tok.at;
            /* text resumes right after the value reference */
            {
                const char *q = p->tok.at;
                while (q > at && (q[-1] == ' ' || q[-1] == '\n' || q[-1] == '\t' || q[-1] == '\r'))
                    q--;
                text_from = q;
            }
            continue;
        }
        case T_CARET: {
            if (!text_piece(p, &pieces, &n, &cap, text_from, t->at) || !parse_successor(p, st)) {
                ok = false;
                break;
            }
            ok = tmpl_add(p, &pieces, &n, &cap,
                          (ir_tmpl_piece){.kind = IR_TP_SUCCESSOR, .index = st->n_successors - 1});
            text_from = last_end = p->tok.at;
            {
                const char *q = p->tok.at;
                while (q > text_from && (q[-1] == ' ' || q[-1] == '\n'))
                    q--;
                text_from = q;
            }
            continue;
        }
        case T_LPAREN:
            if (at_region_args(p)) {
                /* `(%a: T loc(..), ...)` declaring the next region's arguments */
                if (!(ok = opaque_region_args(p, st, &pending, &pieces, &n, &cap, &text_from)))
                    break;
                continue;
            }
            depth++;
            break;
        case T_LBRACKET:
        case T_LESS:
            depth++;
            break;
        case T_RPAREN:
        case T_RBRACKET:
            depth--;
            break;
        case T_GREATER:
            /* a '>' that closes nothing is text (a comparison, an arrow
             * head); counting it would let a later bracket balance it */
            if (depth > 0)
                depth--;
            break;
        case T_LBRACE: {
            /* a region when a newline follows the brace (or it is empty and
             * arguments were just declared); else an attribute dictionary */
            const char *q = t->at + 1;
            while (q < p->lx.end && (*q == ' ' || *q == '\t' || *q == '\r'))
                q++;
            /* (a comment ending the line counts as its end) */
            bool region = (q < p->lx.end && (*q == '\n' || (*q == '/' && q + 1 < p->lx.end && q[1] == '/'))) ||
                          pending.n > 0;
            if (!region) {
                depth++;
                break;
            }
            if (!(ok = opaque_region(p, st, &pending, &pieces, &n, &cap, &text_from)))
                break;
            sig_colon = NULL;
            continue;
        }
        case T_RBRACE:
            depth--;
            break;
        case T_COLON:
            if (depth == 0) {
                sig_colon = t->at + 1;
                sig_piece = n;
            }
            break;
        case T_ARROW:
            /* `} -> tensor<4xf32>` (linalg): the results' types when no
             * `: signature` gives them */
            if (depth == 0 && !sig_colon) {
                sig_colon = t->at + 2;
                sig_piece = n;
            }
            break;
        case T_HASH:
        case T_BANG: {
            /* `#map` in the text: the printer keeps its definition */
            alias_ent *e = ir__alias_find_ent(t->kind == T_HASH ? &p->attr_aliases : &p->type_aliases, t->s, t->len);
            if (e)
                e->used_in_text = true;
            break;
        }
        default:
            break;
        }
        if (!ok)
            break;
        last_end = t->at + (t->kind == T_STRING ? t->len + 2 : t->len ? t->len : 1);
        ir__next(p);
    }
    if (ok && depth != 0)
        ok = ir__perr(p, st->at, AP_ESYNTAX, "unbalanced brackets in '%s'", st->name);
    if (ok) {
        const char *end = loc_at ? loc_at : p->tok.at;
        while (end > text_from && (end[-1] == ' ' || end[-1] == '\n' || end[-1] == '\t' || end[-1] == '\r'))
            end--;
        ok = text_piece_ex(p, &pieces, &n, &cap, text_from, end, true);
    }
    /* result types from the trailing `: ...` if it parses as types; not
     * when values or locations lie inside it (types never hold them): its
     * raw text would keep the names the printer renumbers */
    for (uint32_t i = sig_piece; sig_colon && i < n; i++)
        if (pieces[i].kind != IR_TP_TEXT)
            sig_colon = NULL;
    if (ok && sig_colon)
        ok = opaque_sig_types(p, st, n_results_expected, sig_colon);
    if (ok && st->n_results != n_results_expected) {
        /* types unknown: results get an opaque placeholder type */
        const ir_type *unk = ir_type_opaque(p->m, "?");
        st->n_results = 0;
        for (uint32_t i = 0; ok && i < n_results_expected; i++)
            ok = unk && ir__st_add_result_type(p, st, unk);
    }
    ir__arg_list_free(&pending);
    ok = ok && store_template(p, st, pieces, n);
    ap_free(pieces);
    return ok;
}

/* ------------------------------------------------------------- functions */

static bool parse_opt_arg_attrs(parser *p, ir_attr **out)
{
    *out = NULL;
    if (p->tok.kind != T_LBRACE)
        return true;
    op_state st;
    ir__st_init(&st);
    st.name = "argument attributes";
    bool ok = ir__parse_attr_dict(p, &st, false);
    if (ok)
        ok = (*out = ir_attr_dict(p->m, (int)st.n_attrs, st.attrs)) != NULL;
    ir__st_free(&st);
    return ok;
}

static ir_attr *attrs_array(parser *p, ir_attr **v, uint32_t n)
{
    bool any = false;
    for (uint32_t i = 0; i < n; i++)
        if (v[i] && v[i]->u.dict.n > 0)
            any = true;
    if (!any)
        return NULL;
    for (uint32_t i = 0; i < n; i++)
        if (!v[i] && !(v[i] = ir_attr_dict(p->m, 0, NULL)))
            return NULL;
    return ir_attr_array(p->m, (int)n, v);
}

/* func ::= func.func vis? @name '(' args ')' ('->' results)?
 *          ('attributes' attr-dict)? region? */
static bool parse_func(parser *p, op_state *st)
{
    ir_attr **arg_attrs = NULL, **res_attrs = NULL;
    const ir_type **in = NULL, **out = NULL;
    uint32_t n_in = 0, n_out = 0, cap_aa = 0, cap_ra = 0, cap_in = 0, cap_out = 0;
    arg_list args = {0};
    bool ok = false, declaration_types = false;
    if (p->tok.kind == T_IDENT) {
        if (ir__is_word(p, "public") || ir__is_word(p, "private") || ir__is_word(p, "nested")) {
            if (!ir__st_add_attr(p, st, "sym_visibility", ir_attr_string(p->m, p->tok.s, p->tok.len)))
                goto out;
            ir__next(p);
        }
    }
    if (p->tok.kind != T_AT) {
        ir__perr_expected(p, "the function's @name");
        goto out;
    }
    {
        ir_attr *name = ir__parse_attr(p, false);
        if (!name || name->kind != IR_A_SYMREF) {
            if (!p->failed)
                ir__perr(p, st->at, AP_ESYNTAX, "bad function name");
            goto out;
        }
        if (!ir__st_add_attr(p, st, "sym_name", ir_attr_string(p->m, name->u.str.s, name->u.str.len)))
            goto out;
    }
    if (!ir__expect(p, T_LPAREN, "'(' to start the argument list"))
        goto out;
    if (p->tok.kind != T_RPAREN) {
        for (;;) {
            if (!GROW(p, arg_attrs, cap_aa, n_in + 1) || !GROW(p, in, cap_in, n_in + 1))
                goto out;
            if (p->tok.kind == T_PERCENT) {
                if (!GROW(p, args.v, args.cap, args.n + 1))
                    goto out;
                arg_decl *d = &args.v[args.n++];
                memset(d, 0, sizeof *d);
                d->name = p->tok.s;
                d->len = p->tok.len;
                d->at = p->tok.at;
                ir__next(p);
                if (!ir__expect(p, T_COLON, "':' and the argument's type") || !(d->type = ir__parse_type(p)))
                    goto out;
                in[n_in] = d->type;
                if (!parse_opt_arg_attrs(p, &arg_attrs[n_in]))
                    goto out;
                bool lok;
                d->loc = ir__parse_opt_loc(p, &lok);
                if (!lok)
                    goto out;
            } else {
                declaration_types = true;
                if (!(in[n_in] = ir__parse_type(p)) || !parse_opt_arg_attrs(p, &arg_attrs[n_in]))
                    goto out;
            }
            n_in++;
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    if (!ir__expect(p, T_RPAREN, "')' to close the argument list"))
        goto out;
    if (args.n && declaration_types) {
        ir__perr(p, st->at, AP_ESYNTAX, "mixed named and unnamed function arguments");
        goto out;
    }
    if (ir__accept(p, T_ARROW)) {
        bool paren = p->tok.kind == T_LPAREN;
        if (paren) {
            /* `-> (T {attrs}, T)` ; `-> (T) -> T` is not valid here */
            ir__next(p);
            if (p->tok.kind != T_RPAREN) {
                for (;;) {
                    if (!GROW(p, res_attrs, cap_ra, n_out + 1) || !GROW(p, out, cap_out, n_out + 1))
                        goto out;
                    if (!(out[n_out] = ir__parse_type(p)) || !parse_opt_arg_attrs(p, &res_attrs[n_out]))
                        goto out;
                    n_out++;
                    if (!ir__accept(p, T_COMMA))
                        break;
                }
            }
            if (!ir__expect(p, T_RPAREN, "')' to close the result list"))
                goto out;
        } else {
            if (!GROW(p, res_attrs, cap_ra, 1) || !GROW(p, out, cap_out, 1))
                goto out;
            if (!(out[0] = ir__parse_type(p)))
                goto out;
            res_attrs[0] = NULL;
            n_out = 1;
        }
    }
    {
        const ir_type *ft = ir_type_function(p->m, (int)n_in, in, (int)n_out, out);
        if (!ft || !ir__st_add_attr(p, st, "function_type", ir_attr_type(p->m, ft)))
            goto out;
        ir_attr *aa = n_in ? attrs_array(p, arg_attrs, n_in) : NULL;
        ir_attr *ra = n_out ? attrs_array(p, res_attrs, n_out) : NULL;
        if ((aa && !ir__st_add_attr(p, st, "arg_attrs", aa)) || (ra && !ir__st_add_attr(p, st, "res_attrs", ra)))
            goto out;
    }
    if (ir__accept_word(p, "attributes")) {
        uint32_t before = st->n_attrs;
        if (!ir__parse_attr_dict(p, st, false))
            goto out;
        (void)before;
    }
    if (p->tok.kind == T_LBRACE) {
        if (declaration_types) {
            ir__perr(p, p->tok.at, AP_ESYNTAX, "a function with a body needs named arguments");
            goto out;
        }
        ir_region *r = ir__new_region(p);
        if (!r || !ir__parse_region(p, r, &args) || !ir__st_add_region(p, st, r))
            goto out;
        if (!r->first) { /* `{}`: an entry block with the arguments */
            ir_block *b = ir__zalloc(p->m, sizeof *b);
            ir__names_push_scope(p);
            bool dok = b && define_block_args(p, b, &args);
            ir__names_pop_scope(p);
            if (!dok)
                goto out;
            ir_region_append(r, b);
        }
    }
    ok = true;
out:
    ir__arg_list_free(&args);
    ap_free(arg_attrs);
    ap_free(res_attrs);
    ap_free(in);
    ap_free(out);
    return ok;
}

/* module ::= module @name? ('attributes' attr-dict)? region */
static bool parse_module_op(parser *p, op_state *st)
{
    if (p->tok.kind == T_AT) {
        ir_attr *name = ir__parse_attr(p, false);
        if (!name || name->kind != IR_A_SYMREF)
            return p->failed ? false : ir__perr(p, st->at, AP_ESYNTAX, "bad module name");
        if (!ir__st_add_attr(p, st, "sym_name", ir_attr_string(p->m, name->u.str.s, name->u.str.len)))
            return false;
    }
    if (ir__accept_word(p, "attributes") && !ir__parse_attr_dict(p, st, false))
        return false;
    ir_region *r = ir__new_region(p);
    if (!r || !ir__parse_region(p, r, NULL) || !ir__st_add_region(p, st, r))
        return false;
    if (!r->first) {
        ir_block *b = ir__zalloc(p->m, sizeof *b);
        if (!b)
            return ir__perr(p, st->at, AP_ENOMEM, "out of memory");
        ir_region_append(r, b);
    }
    return true;
}

/* Converts a generic-form func.func / builtin.module (whose function_type
 * and sym_name arrived as properties) into the same IR as the pretty form:
 * the entry block arguments must match function_type. */
static bool check_generic_func(parser *p, op_state *st, ir_op *op)
{
    const ir_type *ft = ir_func_type(op);
    if (!ft || ft->kind != IR_T_FUNCTION)
        return ir__perr(p, st->at, AP_ESYNTAX, "func.func needs a function_type attribute");
    ir_block *b = ir_func_entry(op);
    if (b && b->n_args != (uint32_t)ft->n_inputs)
        return ir__perr(p, st->at, AP_ETYPE, "function body has %u arguments but function_type has %d",
                        b->n_args, ft->n_inputs);
    for (uint32_t i = 0; b && i < b->n_args; i++)
        if (!ir_type_equal(b->args[i].type, ft->elems[i]))
            return ir__perr(p, st->at, AP_ETYPE, "type of argument %u does not match function_type", i);
    return true;
}

/* result-list ::= (%name (':' N)? (',' %name (':' N)?)* '=')? */
typedef struct result_name {
    const char *name;
    uint32_t len, count;
    const char *at;
} result_name;

bool ir__parse_op(parser *p, ir_block *block)
{
    ir_block *saved_block = p->cur_block;
    p->cur_block = block;
    bool ok = parse_op_in(p, block);
    p->cur_block = saved_block;
    return ok;
}

static bool parse_op_in(parser *p, ir_block *block)
{
    op_state st;
    result_name rn_inline[4], *rn = rn_inline;
    uint32_t n_rn = 0, cap_rn = 4, n_results = 0;
    bool ok = false;
    int line, col;
    ir__st_init(&st);
    st.at = p->tok.at;
    ir__lex_pos(&p->lx, st.at, &line, &col); /* now: positions only ir__grow */
    if (p->tok.kind == T_PERCENT) {
        for (;;) {
            if (p->tok.kind != T_PERCENT) {
                ir__perr_expected(p, "a result name");
                goto out;
            }
            if (n_rn == cap_rn) {
                result_name *nv = ap_malloc(sizeof *nv * cap_rn * 2);
                if (!nv) {
                    ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
                    goto out;
                }
                memcpy(nv, rn, sizeof *nv * n_rn);
                if (rn != rn_inline)
                    ap_free(rn);
                rn = nv;
                cap_rn *= 2;
            }
            result_name *r = &rn[n_rn++];
            r->name = p->tok.s;
            r->len = p->tok.len;
            r->at = p->tok.at;
            r->count = 1;
            ir__next(p);
            if (ir__accept(p, T_COLON)) {
                int64_t c;
                if (!ir__parse_int(p, &c))
                    goto out;
                if (c < 1 || c > 1 << 20) {
                    ir__perr(p, r->at, AP_ESYNTAX, "bad result count %lld", (long long)c);
                    goto out;
                }
                r->count = (uint32_t)c;
            }
            n_results += r->count;
            if (ir__accept(p, T_EQUAL))
                break;
            if (!ir__expect(p, T_COMMA, "'=' or ',' after the result names"))
                goto out;
        }
    }
    const char *name_at = p->tok.at;
    if (p->tok.kind == T_STRING) {
        st.opcode = ir_opcode_lookup(p->tok.s, p->tok.len);
        st.name = ir_intern(p->m, p->tok.s, p->tok.len);
        if (!st.name)
            goto oom;
        if (!parse_generic_op(p, &st))
            goto out;
        if (st.opcode == IR_OP_UNKNOWN && st.n_props == 0)
            st.n_props = 0;
    } else if (p->tok.kind == T_IDENT) {
        const char *s = p->tok.s;
        uint32_t len = p->tok.len;
        /* bare names inside func.func and at top level */
        if (len == 6 && memcmp(s, "return", 6) == 0)
            st.opcode = IR_OP_FUNC_RETURN;
        else if (len == 4 && memcmp(s, "call", 4) == 0)
            st.opcode = IR_OP_FUNC_CALL;
        else if (len == 6 && memcmp(s, "module", 6) == 0)
            st.opcode = IR_OP_MODULE;
        else
            st.opcode = ir_opcode_lookup(s, len);
        if (st.opcode != IR_OP_UNKNOWN)
            st.name = ir_intern(p->m, ir_op_info_get(st.opcode)->name, strlen(ir_op_info_get(st.opcode)->name));
        else if (memchr(s, '.', len))
            st.name = ir_intern(p->m, s, len);
        else {
            ir__perr(p, name_at, AP_ESYNTAX, "expected an operation name, found '%.*s'", (int)len, s);
            goto out;
        }
        if (!st.name)
            goto oom;
        ir__next(p);
        if (st.opcode == IR_OP_FUNC)
            ok = parse_func(p, &st);
        else if (st.opcode == IR_OP_MODULE)
            ok = parse_module_op(p, &st);
        else if (st.opcode == IR_OP_UNKNOWN)
            ok = opaque_literal_value(p, &st) && parse_opaque_op(p, &st, n_results, s + len);
        else
            ok = parse_pretty(p, &st);
        if (!ok)
            goto out;
        ok = false;
    } else {
        ir__perr_expected(p, "an operation");
        goto out;
    }
    if (!st.tmpl || !st.loc) {
        bool lok;
        const ir_loc *l = ir__parse_opt_loc(p, &lok);
        if (!lok)
            goto out;
        if (l)
            st.loc = l;
    }
    if (st.n_results != n_results) {
        ir__perr(p, st.at, AP_ESYNTAX, "'%s' produces %u result%s but %u name%s given", st.name,
                 st.n_results, st.n_results == 1 ? "" : "s", n_results, n_results == 1 ? " is" : "s are");
        goto out;
    }
    ir_op *op = ir__st_finish(p, &st);
    if (!op)
        goto out;
    op->src_line = (uint32_t)line;
    op->src_col = (uint32_t)col;
    if (op->opcode == IR_OP_FUNC && !check_generic_func(p, &st, op))
        goto out;
    /* the reduce compact form built its body before the location was known */
    if (op->opcode == IR_OP_REDUCE && st.loc)
        for (uint32_t r = 0; r < op->n_regions; r++)
            for (ir_block *b = op->regions[r].first; b; b = b->next)
                for (ir_op *in = b->first; in; in = in->next)
                    if (!in->loc && in->src_line == 0)
                        in->loc = st.loc;
    ir_block_append(block, op);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_rn; i++) {
        if (!ir__names_define(p, rn[i].name, rn[i].len, &op->results[k], rn[i].count, rn[i].at))
            goto out;
        k += rn[i].count;
    }
    if (op->opcode == IR_OP_FUNC && !ir__fwd_check_all(p))
        goto out;
    ok = true;
    goto out;
oom:
    ir__perr(p, st.at, AP_ENOMEM, "out of memory");
out:
    if (rn != rn_inline)
        ap_free(rn);
    ir__st_free(&st);
    return ok;
}
