/*
 * mlir.c - the parser of MLIR text: StableHLO as JAX and MLIR tools
 * print it, in pretty and generic op forms, plus ops of other dialects kept
 * opaque.  Recursive descent over the tokens of lex.c; each function is
 * named after the grammar rule it parses, the rule in its first comment.
 *
 * Errors stop the parse at the first problem and name its line and column.
 */
#include "parse_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ================================================================ errors */

bool ir__perr(parser *p, const char *at, int code, const char *fmt, ...)
{
    if (p->failed)
        return false;
    p->failed = true;
    int line = 0, col = 0;
    if (at)
        ir__lex_pos(&p->lx, at, &line, &col);
    va_list ap;
    va_start(ap, fmt);
    ap_error_setv(p->err, code, fmt, ap);
    va_end(ap);
    if (p->err) {
        snprintf(p->err->file, sizeof p->err->file, "%s", p->m && p->m->filename ? p->m->filename : "<input>");
        p->err->line = line;
        p->err->col = col;
    }
    return false;
}

static void describe_tok(const ir_tok *t, char *buf, size_t n)
{
    switch (t->kind) {
    case T_EOF:
        snprintf(buf, n, "end of input");
        break;
    case T_STRING:
        snprintf(buf, n, "string \"%.*s\"", (int)(t->len > 40 ? 40 : t->len), t->s);
        break;
    default: {
        uint32_t len = t->len ? t->len : 1;
        if (t->kind == T_PERCENT || t->kind == T_CARET || t->kind == T_AT || t->kind == T_HASH ||
            t->kind == T_BANG)
            len = (uint32_t)(t->s + t->len - t->at);
        snprintf(buf, n, "'%.*s'", (int)(len > 40 ? 40 : len), t->at);
    }
    }
}

bool ir__perr_expected(parser *p, const char *what)
{
    if (p->tok.kind == T_ERROR)
        return ir__perr(p, p->lx.err_at, AP_ESYNTAX, "%s", p->lx.err_msg);
    char got[64];
    describe_tok(&p->tok, got, sizeof got);
    if (p->tok.kind == T_EOF)
        return ir__perr(p, p->tok.at, AP_ESYNTAX, "unexpected end of input, expected %s", what);
    return ir__perr(p, p->tok.at, AP_ESYNTAX, "expected %s, found %s", what, got);
}

/* ================================================================ tokens */

void ir__next(parser *p) { ir__lex_next(&p->lx, &p->tok); }

bool ir__accept(parser *p, ir_tok_kind k)
{
    if (p->tok.kind != k)
        return false;
    ir__next(p);
    return true;
}

static const char *tok_name(ir_tok_kind k)
{
    switch (k) {
    case T_LPAREN: return "'('";
    case T_RPAREN: return "')'";
    case T_LBRACKET: return "'['";
    case T_RBRACKET: return "']'";
    case T_LBRACE: return "'{'";
    case T_RBRACE: return "'}'";
    case T_LESS: return "'<'";
    case T_GREATER: return "'>'";
    case T_COLON: return "':'";
    case T_COMMA: return "','";
    case T_EQUAL: return "'='";
    case T_ARROW: return "'->'";
    case T_PERCENT: return "a value name";
    case T_AT: return "a symbol name";
    case T_INT: return "an integer";
    case T_STRING: return "a string";
    case T_IDENT: return "an identifier";
    default: return "a token";
    }
}

bool ir__expect(parser *p, ir_tok_kind k, const char *what)
{
    if (p->tok.kind == k) {
        ir__next(p);
        return true;
    }
    return ir__perr_expected(p, what ? what : tok_name(k));
}

bool ir__is_word(const parser *p, const char *w)
{
    size_t n = strlen(w);
    return p->tok.kind == T_IDENT && p->tok.len == n && memcmp(p->tok.s, w, n) == 0;
}

bool ir__accept_word(parser *p, const char *w)
{
    if (!ir__is_word(p, w))
        return false;
    ir__next(p);
    return true;
}

bool ir__expect_word(parser *p, const char *w)
{
    if (ir__accept_word(p, w))
        return true;
    char what[64];
    snprintf(what, sizeof what, "'%s'", w);
    return ir__perr_expected(p, what);
}

/* Moves the lexer to `pos` and reads the token there. */
static void reset_to(parser *p, const char *pos)
{
    p->lx.p = pos;
    ir__next(p);
}

/* Scans a balanced <...> starting at `open` (which is '<'); returns the
 * position of the matching '>' or NULL.  Strings, nested brackets of every
 * kind and '->' are skipped. */
static const char *scan_angle(const char *open, const char *end)
{
    int depth = 0;
    for (const char *q = open; q < end; q++) {
        switch (*q) {
        case '"':
            for (q++; q < end && *q != '"'; q++)
                if (*q == '\\')
                    q++;
            if (q >= end)
                return NULL;
            break;
        case '<': case '(': case '[': case '{':
            depth++;
            break;
        case '>':
            if (q > open && q[-1] == '-')
                break; /* arrow */
            /* fallthrough */
        case ')': case ']': case '}':
            if (--depth == 0)
                return *q == '>' ? q : NULL;
            if (depth < 0)
                return NULL;
            break;
        default:
            break;
        }
    }
    return NULL;
}

/* ======================================================== scratch arrays */

static bool grow(parser *p, void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *n = ap_realloc(*arr, (size_t)nc * elem);
    if (!n)
        return ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    *arr = n;
    *cap = nc;
    return true;
}

#define GROW(p, arr, cap, need) grow((p), (void **)&(arr), &(cap), (need), sizeof *(arr))

/* ============================================================= SSA names */

static uint32_t name_hash(const char *s, uint32_t len) { return (uint32_t)ap_hash_bytes(s, len, 17); }

static bool names_rehash(parser *p, name_table *t)
{
    uint32_t nb = t->nbuckets ? t->nbuckets * 2 : 1024;
    int32_t *b = ap_malloc(sizeof *b * nb);
    if (!b)
        return ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < nb; i++)
        b[i] = -1;
    for (uint32_t i = 0; i < t->n; i++) { /* oldest first: newest ends at the head */
        uint32_t h = t->ents[i].hash & (nb - 1);
        t->ents[i].next = b[h];
        b[h] = (int32_t)i;
    }
    ap_free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return true;
}

static name_ent *names_find(name_table *t, const char *s, uint32_t len)
{
    if (!t->nbuckets)
        return NULL;
    uint32_t h = name_hash(s, len);
    for (int32_t i = t->buckets[h & (t->nbuckets - 1)]; i >= 0; i = t->ents[i].next) {
        name_ent *e = &t->ents[i];
        if (e->hash == h && e->len == len && memcmp(e->name, s, len) == 0)
            return e;
    }
    return NULL;
}

static void names_push_scope(parser *p)
{
    name_table *t = &p->names;
    if (!GROW(p, t->marks, t->cap_marks, t->n_marks + 1))
        return;
    t->marks[t->n_marks++] = (scope_mark){t->n, ++t->n_opened};
}

static void names_pop_scope(parser *p)
{
    name_table *t = &p->names;
    if (!t->n_marks) /* the push ran out of memory */
        return;
    uint32_t mark = t->marks[--t->n_marks].n;
    while (t->n > mark) {
        name_ent *e = &t->ents[--t->n];
        t->buckets[e->hash & (t->nbuckets - 1)] = e->next;
    }
}

static void fwd_resolve(parser *p, const char *s, uint32_t len, ir_value *vals, uint32_t n);

/* Binds %name to `n` values (an op's results or one block argument). */
static bool names_define(parser *p, const char *s, uint32_t len, ir_value *vals, uint32_t n,
                         const char *at)
{
    name_table *t = &p->names;
    name_ent *old = names_find(t, s, len);
    if (old && old->depth == t->n_marks)
        return ir__perr(p, at, AP_ESYNTAX, "redefinition of value '%%%.*s'", (int)len, s);
    if (!GROW(p, t->ents, t->cap, t->n + 1))
        return false;
    if (t->n + 1 > t->nbuckets && !names_rehash(p, t))
        return false;
    name_ent *e = &t->ents[t->n];
    e->name = s;
    e->len = len;
    e->hash = name_hash(s, len);
    e->depth = t->n_marks;
    e->vals = vals;
    e->n = n;
    uint32_t b = e->hash & (t->nbuckets - 1);
    e->next = t->buckets[b];
    t->buckets[b] = (int32_t)t->n;
    t->n++;
    if (p->n_fwd)
        fwd_resolve(p, s, len, vals, n);
    return !p->failed;
}

static bool is_placeholder(const ir_value *v) { return !v->def && !v->block; }

static void fwd_resolve(parser *p, const char *s, uint32_t len, ir_value *vals, uint32_t n)
{
    for (uint32_t i = 0; i < p->n_fwd; i++) {
        fwd_ref *f = &p->fwd[i];
        if (f->resolved || f->len != len || memcmp(f->name, s, len) != 0)
            continue;
        /* a scope opened after the use and open now did not hold the
         * use: its names are out of the use's sight (a sibling region) */
        if (p->names.n_marks && p->names.marks[p->names.n_marks - 1].id > f->scopes_seen)
            continue;
        if (f->index >= n) {
            ir__perr(p, f->at, AP_EUNDEFINED, "use of '%%%.*s#%u' but it has only %u results",
                     (int)len, s, f->index, n);
            return;
        }
        ir_value *real = &vals[f->index];
        ir_block *def_block = real->def ? real->def->parent : real->block;
        if (def_block == f->block || !f->block) {
            ir__perr(p, f->at, AP_EUNDEFINED, "use of value '%%%.*s' before its definition", (int)len, s);
            return;
        }
        if (f->ph->type && real->type && !ir_type_equal(f->ph->type, real->type)) {
            char want[128], got[128];
            ap_buf b1, b2;
            ap_buf_init(&b1);
            ap_buf_init(&b2);
            ir_type_print(&b1, f->ph->type);
            ir_type_print(&b2, real->type);
            snprintf(want, sizeof want, "%s", b1.data ? b1.data : "?");
            snprintf(got, sizeof got, "%s", b2.data ? b2.data : "?");
            ap_buf_free(&b1);
            ap_buf_free(&b2);
            ir__perr(p, f->at, AP_ETYPE, "value '%%%.*s' is used as %s but defined as %s",
                     (int)len, s, want, got);
            return;
        }
        for (uint32_t j = 0; j < f->n_slots; j++)
            *f->slots[j] = real;
        f->resolved = true;
    }
}

/* Checks that every forward reference made so far has been defined. */
static bool fwd_check_all(parser *p)
{
    for (uint32_t i = 0; i < p->n_fwd; i++) {
        fwd_ref *f = &p->fwd[i];
        if (!f->resolved)
            return ir__perr(p, f->at, AP_EUNDEFINED, "use of undefined value '%%%.*s'", (int)f->len,
                            f->name);
    }
    for (uint32_t i = 0; i < p->n_fwd; i++)
        ap_free(p->fwd[i].slots);
    p->n_fwd = 0;
    return true;
}

/* %name or %name#N: the value, or a placeholder when not yet defined. */
static ir_value *lookup_value(parser *p)
{
    const char *at = p->tok.at, *s = p->tok.s;
    uint32_t len = p->tok.len;
    uint32_t index = 0;
    bool has_index = false;
    ir__next(p);
    /* `#N` must follow without spaces */
    if (p->tok.kind == T_HASH && p->tok.at == s + len) {
        const char *q = p->tok.s;
        uint64_t v = 0;
        for (uint32_t i = 0; i < p->tok.len; i++) {
            if (q[i] < '0' || q[i] > '9' || v > UINT32_MAX) {
                ir__perr(p, p->tok.at, AP_ESYNTAX, "expected a result number after '#'");
                return NULL;
            }
            v = v * 10 + (uint64_t)(q[i] - '0');
        }
        index = (uint32_t)v;
        has_index = true;
        ir__next(p);
    }
    name_ent *e = names_find(&p->names, s, len);
    if (e) {
        if (index >= e->n) {
            ir__perr(p, at, AP_EUNDEFINED, "result number %u of '%%%.*s' is out of range (it has %u)",
                     index, (int)len, s, e->n);
            return NULL;
        }
        (void)has_index;
        return &e->vals[index];
    }
    for (uint32_t i = 0; i < p->n_fwd; i++) {
        fwd_ref *f = &p->fwd[i];
        if (!f->resolved && f->len == len && f->index == index && memcmp(f->name, s, len) == 0)
            return f->ph;
    }
    if (!GROW(p, p->fwd, p->cap_fwd, p->n_fwd + 1))
        return NULL;
    ir_value *ph = ir__zalloc(p->m, sizeof *ph);
    if (!ph) {
        ir__perr(p, at, AP_ENOMEM, "out of memory");
        return NULL;
    }
    ph->id = p->n_fwd;
    fwd_ref *f = &p->fwd[p->n_fwd++];
    memset(f, 0, sizeof *f);
    f->name = s;
    f->len = len;
    f->index = index;
    f->ph = ph;
    f->at = at;
    f->block = p->cur_block;
    f->scopes_seen = p->names.n_opened;
    return ph;
}

/* ============================================================== op state */

static void st_init(op_state *st)
{
    memset(st, 0, sizeof *st);
    st->operands = st->operands_inline;
    st->cap_operands = OPS_INLINE;
    st->result_types = st->types_inline;
    st->cap_results = OPS_INLINE;
}

static void st_free(op_state *st)
{
    if (st->operands != st->operands_inline)
        ap_free(st->operands);
    if (st->result_types != st->types_inline)
        ap_free(st->result_types);
    ap_free(st->attrs);
    ap_free(st->regions);
    ap_free(st->successors);
}

static bool grow_inline(parser *p, void **arr, void *inl, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t nc = *cap * 2;
    while (nc < need)
        nc *= 2;
    void *n;
    if (*arr == inl) {
        n = ap_malloc((size_t)nc * elem);
        if (n)
            memcpy(n, inl, (size_t)*cap * elem);
    } else {
        n = ap_realloc(*arr, (size_t)nc * elem);
    }
    if (!n)
        return ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    *arr = n;
    *cap = nc;
    return true;
}

bool ir__st_add_operand(parser *p, op_state *st, ir_value *v)
{
    if (!grow_inline(p, (void **)&st->operands, st->operands_inline, &st->cap_operands,
                     st->n_operands + 1, sizeof *st->operands))
        return false;
    st->operands[st->n_operands++] = v;
    return true;
}

bool ir__st_add_result_type(parser *p, op_state *st, const ir_type *t)
{
    if (!grow_inline(p, (void **)&st->result_types, st->types_inline, &st->cap_results,
                     st->n_results + 1, sizeof *st->result_types))
        return false;
    st->result_types[st->n_results++] = t;
    return true;
}

bool ir__st_add_attr(parser *p, op_state *st, const char *name, ir_attr *v)
{
    if (!v)
        return false;
    const char *iname = ir_intern(p->m, name, strlen(name));
    if (!iname || !GROW(p, st->attrs, st->cap_attrs, st->n_attrs + 1))
        return iname ? false : ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    st->attrs[st->n_attrs].name = iname;
    st->attrs[st->n_attrs].value = v;
    st->n_attrs++;
    return true;
}

bool ir__st_add_region(parser *p, op_state *st, ir_region *r)
{
    if (!GROW(p, st->regions, st->cap_regions, st->n_regions + 1))
        return false;
    st->regions[st->n_regions++] = r;
    return true;
}

bool ir__parse_operand(parser *p, op_state *st)
{
    if (p->tok.kind != T_PERCENT)
        return ir__perr_expected(p, "a value name");
    ir_value *v = lookup_value(p);
    return v && ir__st_add_operand(p, st, v);
}

/* operand-list ::= (%x (, %x)*)?  -- stops before a ',' not followed by %. */
bool ir__parse_operand_list(parser *p, op_state *st)
{
    if (p->tok.kind != T_PERCENT)
        return true;
    for (;;) {
        if (!ir__parse_operand(p, st))
            return false;
        if (p->tok.kind != T_COMMA)
            return true;
        /* peek: a comma followed by a keyword ends the list */
        const char *save = p->lx.p;
        ir_tok saved = p->tok;
        ir__next(p);
        if (p->tok.kind != T_PERCENT) {
            p->lx.p = save;
            p->tok = saved;
            return true;
        }
    }
}

static void type_str(const ir_type *t, char *buf, size_t n)
{
    ap_buf b;
    ap_buf_init(&b);
    if (t)
        ir_type_print(&b, t);
    else
        ap_buf_puts(&b, "?");
    snprintf(buf, n, "%s", b.data ? b.data : "?");
    ap_buf_free(&b);
}

bool ir__check_operand_type(parser *p, op_state *st, uint32_t i, const ir_type *t, const char *at)
{
    ir_value *v = st->operands[i];
    if (!v->type) {
        v->type = t; /* a placeholder learns its type from its first use */
        return true;
    }
    if (v->type == t || ir_type_equal(v->type, t))
        return true;
    char a[160], b[160];
    type_str(v->type, a, sizeof a);
    type_str(t, b, sizeof b);
    return ir__perr(p, at, AP_ETYPE, "operand #%u of '%s' has type %s but the op's type says %s", i,
                    st->name, a, b);
}

/* Creates the op from its state, binds its results to `res_names`. */
static ir_op *st_finish(parser *p, op_state *st)
{
    ir_module *m = p->m;
    ir_op *op = ir__zalloc(m, sizeof *op);
    if (!op)
        goto oom;
    op->opcode = (uint16_t)st->opcode;
    op->name = st->name;
    op->n_operands = st->n_operands;
    if (st->n_operands) {
        op->operands = ap_arena_memdup(&m->arena, st->operands, sizeof(ir_value *) * st->n_operands);
        if (!op->operands)
            goto oom;
        for (uint32_t i = 0; i < st->n_operands; i++) {
            ir_value *v = op->operands[i];
            if (is_placeholder(v)) {
                if (v->id >= p->n_fwd || p->fwd[v->id].resolved) {
                    /* defined while this op was parsed: inside its own regions */
                    fwd_ref *f = v->id < p->n_fwd ? &p->fwd[v->id] : NULL;
                    ir__perr(p, f ? f->at : st->at, AP_EUNDEFINED, "use of value '%%%.*s' before its definition",
                             f ? (int)f->len : 1, f ? f->name : "?");
                    return NULL;
                }
                fwd_ref *f = &p->fwd[v->id];
                if (!GROW(p, f->slots, f->cap_slots, f->n_slots + 1))
                    return NULL;
                f->slots[f->n_slots++] = &op->operands[i];
            }
        }
    }
    op->n_results = st->n_results;
    if (st->n_results) {
        op->results = ir__zalloc(m, sizeof *op->results * st->n_results);
        if (!op->results)
            goto oom;
        for (uint32_t i = 0; i < st->n_results; i++) {
            op->results[i].type = st->result_types[i];
            op->results[i].def = op;
            op->results[i].index = i;
        }
    }
    op->n_attrs = st->n_attrs;
    op->n_props = st->n_props;
    if (st->n_attrs) {
        op->attrs = ap_arena_memdup(&m->arena, st->attrs, sizeof(ir_named_attr) * st->n_attrs);
        if (!op->attrs)
            goto oom;
        if (st->opcode != IR_OP_UNKNOWN) {
            ir__sort_named(op->attrs, (int)op->n_attrs);
            op->n_props = 0;
            for (uint32_t i = 1; i < op->n_attrs; i++)
                if (strcmp(op->attrs[i - 1].name, op->attrs[i].name) == 0)
                    return ir__perr(p, st->at, AP_ESYNTAX, "attribute '%s' given twice on '%s'",
                                    op->attrs[i].name, st->name),
                           NULL;
        }
    }
    op->n_regions = st->n_regions;
    if (st->n_regions) {
        op->regions = ir__zalloc(m, sizeof *op->regions * st->n_regions);
        if (!op->regions)
            goto oom;
        for (uint32_t i = 0; i < st->n_regions; i++) {
            op->regions[i] = *st->regions[i];
            op->regions[i].parent = op;
            for (ir_block *b = op->regions[i].first; b; b = b->next)
                b->parent = &op->regions[i];
        }
    }
    op->n_successors = st->n_successors;
    if (st->n_successors) {
        op->successors = ap_arena_memdup(&m->arena, st->successors, sizeof(ir_block *) * st->n_successors);
        if (!op->successors)
            goto oom;
    }
    op->tmpl = st->tmpl;
    op->loc = st->loc;
    return op;
oom:
    ir__perr(p, st->at, AP_ENOMEM, "out of memory");
    return NULL;
}

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

/* Text of a balanced construct `<...>` starting at the current token, which
 * must be '<' right after `start`; consumes it and returns the interned text
 * from `start` to the closing '>'. */
static const char *take_angle_text(parser *p, const char *start)
{
    if (p->tok.kind != T_LESS) {
        ir__perr_expected(p, "'<'");
        return NULL;
    }
    const char *close = scan_angle(p->tok.at, p->lx.end);
    if (!close) {
        ir__perr(p, p->tok.at, AP_ESYNTAX, "unbalanced '<'");
        return NULL;
    }
    const char *text = ir_intern(p->m, start, (size_t)(close + 1 - start));
    reset_to(p, close + 1);
    if (!text)
        ir__perr(p, start, AP_ENOMEM, "out of memory");
    return text;
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
            *text = take_angle_text(p, at); /* !dialect.type<...> */
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
    int64_t dims_inline[16], *dims = dims_inline;
    int rank = 0, cap = 16;
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
        if (rank == cap) { /* unreachable with IR_MAX_RANK <= 16; kept for safety */
            ir__perr(p, dim_at, AP_EUNSUPPORTED, "tensor rank too large");
            goto out;
        }
        dims[rank++] = d;
    }
    reset_to(p, q);
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
        reset_to(p, close);
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
bool ir__parse_type_list_paren(parser *p, const ir_type ***out, uint32_t *n)
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
    if (!ir__parse_type_list_paren(p, &in, &n_in))
        return NULL;
    if (!ir__expect(p, T_ARROW, "'->' in a function type"))
        goto out;
    if (p->tok.kind == T_LPAREN) {
        /* `-> (a, b)` or `-> (a) -> b` (a function result): try the list */
        if (!ir__parse_type_list_paren(p, &out, &n_out))
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

static void *alias_find(alias_table *t, const char *s, uint32_t len);

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
            t = alias_find(&p->type_aliases, p->tok.s, p->tok.len);
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
            const char *text = take_angle_text(p, at);
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

/* ============================================================ attributes */

/* Alias tables are looked up once per op location (JAX files use
 * thousands of #locN aliases), so they are hashed. */
static alias_ent *alias_find_ent(alias_table *t, const char *s, uint32_t len)
{
    if (!t->nbuckets)
        return NULL;
    uint32_t h = (uint32_t)ap_hash_bytes(s, len, 3);
    for (int32_t i = t->buckets[h & (t->nbuckets - 1)]; i >= 0; i = t->ents[i].next)
        if (t->ents[i].len == len && memcmp(t->ents[i].name, s, len) == 0)
            return &t->ents[i];
    return NULL;
}

static void *alias_find(alias_table *t, const char *s, uint32_t len)
{
    alias_ent *e = alias_find_ent(t, s, len);
    return e ? e->ptr : NULL;
}

static bool alias_add(parser *p, alias_table *t, const char *s, uint32_t len, void *ptr, const char *at)
{
    if (!GROW(p, t->ents, t->cap, t->n + 1))
        return false;
    if (t->n + 1 > t->nbuckets) {
        uint32_t nb = t->nbuckets ? t->nbuckets * 2 : 256;
        int32_t *b = ap_malloc(sizeof *b * nb);
        if (!b)
            return ir__perr(p, at, AP_ENOMEM, "out of memory");
        for (uint32_t i = 0; i < nb; i++)
            b[i] = -1;
        for (uint32_t i = 0; i < t->n; i++) {
            uint32_t h = (uint32_t)ap_hash_bytes(t->ents[i].name, t->ents[i].len, 3) & (nb - 1);
            t->ents[i].next = b[h];
            b[h] = (int32_t)i;
        }
        ap_free(t->buckets);
        t->buckets = b;
        t->nbuckets = nb;
    }
    uint32_t h = (uint32_t)ap_hash_bytes(s, len, 3) & (t->nbuckets - 1);
    t->ents[t->n] = (alias_ent){s, len, ptr, at, t->buckets[h]};
    t->buckets[h] = (int32_t)t->n;
    t->n++;
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes the escapes of a string token into the arena. */
static char *unescape(parser *p, const char *s, uint32_t len, size_t *out_len)
{
    char *d = ir__alloc(p->m, (size_t)len + 1);
    size_t n = 0;
    if (!d) {
        ir__perr(p, s, AP_ENOMEM, "out of memory");
        return NULL;
    }
    for (uint32_t i = 0; i < len; i++) {
        char c = s[i];
        if (c != '\\') {
            d[n++] = c;
            continue;
        }
        if (++i >= len)
            break;
        c = s[i];
        switch (c) {
        case 'n': d[n++] = '\n'; break;
        case 't': d[n++] = '\t'; break;
        case '"': d[n++] = '"'; break;
        case '\\': d[n++] = '\\'; break;
        default:
            if (i + 1 < len && hexval(c) >= 0 && hexval(s[i + 1]) >= 0) {
                d[n++] = (char)(hexval(c) * 16 + hexval(s[i + 1]));
                i++;
            } else {
                ir__perr(p, s + i - 1, AP_ESYNTAX, "invalid escape '\\%c' in string", c);
                return NULL;
            }
        }
    }
    d[n] = '\0';
    *out_len = n;
    return d;
}

static bool tok_to_u64(parser *p, uint64_t *out)
{
    const char *s = p->tok.s;
    uint32_t len = p->tok.len;
    uint64_t v = 0;
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (len > 18)
            return ir__perr(p, p->tok.at, AP_ESYNTAX, "integer literal is too large");
        for (uint32_t i = 2; i < len; i++)
            v = v * 16 + (uint64_t)hexval(s[i]);
    } else {
        for (uint32_t i = 0; i < len; i++) {
            uint64_t d = (uint64_t)(s[i] - '0');
            if (v > (UINT64_MAX - d) / 10)
                return ir__perr(p, p->tok.at, AP_ESYNTAX, "integer literal is too large");
            v = v * 10 + d;
        }
    }
    *out = v;
    return true;
}

/* integer ::= -? [0-9]+ */
bool ir__parse_int(parser *p, int64_t *out)
{
    bool neg = ir__accept(p, T_MINUS);
    if (p->tok.kind != T_INT)
        return ir__perr_expected(p, "an integer");
    uint64_t v;
    if (!tok_to_u64(p, &v))
        return false;
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
        return ir__perr(p, p->tok.at, AP_ESYNTAX, "integer literal is too large");
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    ir__next(p);
    return true;
}

/* [i, i, ...] */
bool ir__parse_i64_list(parser *p, int64_t **out, int *n)
{
    int64_t *v = NULL;
    uint32_t cnt = 0, cap = 0;
    if (!ir__expect(p, T_LBRACKET, "'['"))
        return false;
    if (p->tok.kind != T_RBRACKET) {
        for (;;) {
            int64_t x;
            if (!ir__parse_int(p, &x) || !GROW(p, v, cap, cnt + 1))
                goto fail;
            v[cnt++] = x;
            if (!ir__accept(p, T_COMMA))
                break;
        }
    }
    if (!ir__expect(p, T_RBRACKET, "']'"))
        goto fail;
    *out = v;
    *n = (int)cnt;
    return true;
fail:
    ap_free(v);
    return false;
}

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
    else if (!tok_to_u64(p, &u))
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
    if (!tok_to_u64(p, &u))
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
    const char *close = scan_angle(p->tok.at, p->lx.end);
    if (!close) {
        ir__perr(p, p->tok.at, AP_ESYNTAX, "unterminated dense<...>");
        return NULL;
    }
    reset_to(p, close + 1);
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
            int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
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
    reset_to(p, body);
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
    reset_to(p, after);
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
        ir_attr *a = alias_find(&p->attr_aliases, name, name_len);
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
    const char *close = scan_angle(p->tok.at, p->lx.end);
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
        reset_to(p, body);
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
    reset_to(p, close + 1);
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
    const char *text = take_angle_text(p, at);
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
        char *s = unescape(p, p->tok.s, p->tok.len, &len);
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
            name = unescape(p, s + 1, (uint32_t)len - 2, &len);
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
        st_init(&st);
        st.name = "dictionary";
        if (ir__parse_attr_dict(p, &st, false))
            a = ir_attr_dict(p->m, (int)st.n_attrs, st.attrs);
        st_free(&st);
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
            char *s = unescape(p, p->tok.s, p->tok.len, &len);
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

/* ============================================================= locations */

static ir_loc *loc_new(parser *p, ir_loc_kind k)
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
    alias_ent *e = alias_find_ent(&p->loc_aliases, p->tok.s, p->tok.len);
    if (e) {
        ir__next(p);
        return e->ptr;
    }
    ir_loc *ph = loc_new(p, IR_L_PENDING);
    if (!ph || !alias_add(p, &p->loc_aliases, p->tok.s, p->tok.len, ph, p->tok.at))
        return NULL;
    ph->str = ir_intern(p->m, p->tok.s, p->tok.len); /* for the error message */
    ir__next(p);
    return ph;
}

static const ir_loc *parse_loc_inner(parser *p);

static const char *intern_string_tok(parser *p)
{
    size_t len;
    char *s = unescape(p, p->tok.s, p->tok.len, &len);
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
        r = loc_new(p, IR_L_UNKNOWN);
    } else if (p->tok.kind == T_STRING) {
        const char *s = intern_string_tok(p);
        if (!s)
            goto out;
        ir__next(p);
        if (p->tok.kind == T_COLON) {
            ir_loc *l = loc_new(p, IR_L_FILE);
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
            ir_loc *l = loc_new(p, IR_L_NAME);
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
        ir_loc *l = loc_new(p, IR_L_CALLSITE);
        if (!l || !ir__expect(p, T_LPAREN, "'('") || !(l->a = parse_loc_inner(p)) ||
            !ir__expect_word(p, "at") || !(l->b = parse_loc_inner(p)) || !ir__expect(p, T_RPAREN, "')'"))
            goto out;
        r = l;
    } else if (ir__accept_word(p, "fused")) {
        ir_loc *l = loc_new(p, IR_L_FUSED);
        const ir_loc **v = NULL;
        uint32_t n = 0, cap = 0;
        if (!l)
            goto out;
        if (p->tok.kind == T_LESS) {
            const char *close = scan_angle(p->tok.at, p->lx.end);
            if (!close) {
                ir__perr(p, p->tok.at, AP_ESYNTAX, "unbalanced '<'");
                goto out;
            }
            l->str = ir_intern(p->m, p->tok.at + 1, (size_t)(close - p->tok.at - 1));
            reset_to(p, close + 1);
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

/* ========================================================== regions/blocks */

ir_region *ir__new_region(parser *p)
{
    ir_region *r = ir__zalloc(p->m, sizeof *r);
    if (!r)
        ir__perr(p, p->tok.at, AP_ENOMEM, "out of memory");
    return r;
}

void ir__arg_list_free(arg_list *a)
{
    ap_free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

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

static bool parse_op(parser *p, ir_block *block);
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
        if (args->v[i].name && !names_define(p, args->v[i].name, args->v[i].len, v, 1, args->v[i].at))
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
    names_push_scope(p);
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
        ok = parse_op(p, cur);
    }
    for (uint32_t i = label_mark; ok && i < p->n_labels; i++)
        if (!p->labels[i].defined)
            ok = ir__perr(p, p->labels[i].first_use, AP_EUNDEFINED, "reference to an undefined block '^%.*s'",
                          (int)p->labels[i].len, p->labels[i].name);
    p->n_labels = label_mark;
    p->label_mark = saved_mark;
    if (ok)
        ok = ir__expect(p, T_RBRACE, "'}'");
    names_pop_scope(p);
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
        if (!ir__parse_type_list_paren(p, &sig->in, &sig->n_in))
            return false;
        if (!ir__expect(p, T_ARROW, "'->' in the op's type"))
            return false;
        sig->functional = true;
        if (p->tok.kind == T_LPAREN)
            return ir__parse_type_list_paren(p, &sig->out, &sig->n_out);
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
            return ir__parse_type_list_paren(p, &sig->out, &sig->n_out);
        const ir_type *t = ir__parse_type(p);
        if (!t || !GROW(p, sig->out, cap, 1))
            return false;
        sig->out[0] = t;
        sig->n_out = 1;
    }
    return true;
}

static void sig_free(op_sig *sig)
{
    ap_free(sig->in);
    ap_free(sig->out);
}

bool ir__apply_sig_functional(parser *p, op_state *st, const op_sig *sig, const char *at)
{
    if (!sig->functional)
        return ir__perr(p, at, AP_ESYNTAX, "'%s' needs a functional type '(operand types) -> result types'", st->name);
    if (sig->n_in != st->n_operands)
        return ir__perr(p, at, AP_ETYPE, "'%s' has %u operands but its type lists %u", st->name,
                        st->n_operands, sig->n_in);
    for (uint32_t i = 0; i < sig->n_in; i++)
        if (!ir__check_operand_type(p, st, i, sig->in[i], at))
            return false;
    for (uint32_t i = 0; i < sig->n_out; i++)
        if (!ir__st_add_result_type(p, st, sig->out[i]))
            return false;
    return true;
}

bool ir__apply_sig_same(parser *p, op_state *st, const op_sig *sig, const char *at)
{
    if (sig->functional)
        return ir__apply_sig_functional(p, st, sig, at);
    if (sig->n_out != 1)
        return ir__perr(p, at, AP_ESYNTAX, "expected one type for '%s', got %u", st->name, sig->n_out);
    for (uint32_t i = 0; i < st->n_operands; i++)
        if (!ir__check_operand_type(p, st, i, sig->out[0], at))
            return false;
    return ir__st_add_result_type(p, st, sig->out[0]);
}

/* generic-op ::= "name" '(' operands ')' successors? props? regions?
 *                attr-dict? ':' function-type */
static bool parse_generic_op(parser *p, op_state *st)
{
    const char *sig_at;
    op_sig sig;
    ir__next(p); /* the name string */
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
    sig_free(&sig);
    return ok;
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
 * Yes when no op can start with it: `key=` or `key =` (a clause, as
 * sdy.manual_computation writes `in_shardings=[...]` on its own line),
 * an opening bracket, ':' or '->' of a signature, '=', ',', '<', or a
 * location.  Ops start with %results, a "generic" name, a dotted name,
 * a bare word of the default dialect (`return`) or a ^label. */
static bool continues_op(const parser *p)
{
    const ir_tok *t = &p->tok;
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

/* An op of an unknown dialect in its own syntax: everything up to the end
 * of its line (regions may span lines) is kept as a template; %values,
 * ^successors and regions inside it are parsed so they take part in the
 * IR. */
static bool parse_opaque_op(parser *p, op_state *st, uint32_t n_results_expected, const char *name_end)
{
    ir_tmpl_piece *pieces = NULL;
    uint32_t n = 0, cap = 0;
    arg_list pending = {0};
    /* the text starts right after the op name: what separates the name
     * from the next token (spaces, a line break, a comment) must stay a
     * separation when printed */
    const char *text_from = name_end;
    const char *sig_colon = NULL, *loc_at = NULL, *last_end = p->tok.at;
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
            ir_value *v = lookup_value(p);
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
                ir__arg_list_free(&pending);
                ir__next(p); /* '(' */
                if (!text_piece(p, &pieces, &n, &cap, text_from, t->at)) {
                    ok = false;
                    break;
                }
                uint32_t region = st->n_regions;
                for (;;) {
                    if (p->tok.kind != T_PERCENT) {
                        ok = ir__perr_expected(p, "an argument name");
                        break;
                    }
                    if (!GROW(p, pending.v, pending.cap, pending.n + 1)) {
                        ok = false;
                        break;
                    }
                    arg_decl *d = &pending.v[pending.n++];
                    memset(d, 0, sizeof *d);
                    d->name = p->tok.s;
                    d->len = p->tok.len;
                    d->at = p->tok.at;
                    ok = tmpl_add(p, &pieces, &n, &cap,
                                  (ir_tmpl_piece){.kind = IR_TP_REGION_ARG, .index = pending.n - 1,
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
                        if (!text_piece(p, &pieces, &n, &cap, cs, p->tok.at)) {
                            ok = false;
                            break;
                        }
                        continue;
                    }
                    break;
                }
                if (!ok)
                    break;
                text_from = p->tok.at;
                if (!ir__expect(p, T_RPAREN, "')'")) {
                    ok = false;
                    break;
                }
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
            if (!text_piece(p, &pieces, &n, &cap, text_from, t->at)) {
                ok = false;
                break;
            }
            ir_region *r = ir__new_region(p);
            if (!r || !ir__parse_region(p, r, &pending) || !ir__st_add_region(p, st, r)) {
                ok = false;
                break;
            }
            ir__arg_list_free(&pending);
            ok = tmpl_add(p, &pieces, &n, &cap,
                          (ir_tmpl_piece){.kind = IR_TP_REGION, .index = st->n_regions - 1});
            text_from = p->tok.at;
            {
                const char *q2 = p->tok.at;
                while (q2 > p->lx.src && (q2[-1] == ' ' || q2[-1] == '\t' || q2[-1] == '\r'))
                    q2--;
                text_from = q2;
            }
            sig_colon = NULL;
            continue;
        }
        case T_RBRACE:
            depth--;
            break;
        case T_COLON:
            if (depth == 0) {
                sig_colon = t->at;
                sig_piece = n;
            }
            break;
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
    if (ok && sig_colon) {
        const char *saved = p->lx.p;
        ir_tok saved_tok = p->tok;
        ap_error scratch, *saved_err = p->err;
        p->err = &scratch;
        reset_to(p, sig_colon + 1);
        op_sig sig;
        if (ir__parse_sig(p, &sig)) {
            if (sig.n_out == n_results_expected)
                for (uint32_t i = 0; i < sig.n_out; i++)
                    ir__st_add_result_type(p, st, sig.out[i]);
            else if (n_results_expected == 1 && sig.n_out > 1 && !sig.functional)
                ir__st_add_result_type(p, st, sig.out[sig.n_out - 1]);
        }
        sig_free(&sig);
        bool oom = p->failed && scratch.code == AP_ENOMEM;
        p->failed = false;
        p->err = saved_err;
        p->lx.p = saved;
        p->tok = saved_tok;
        if (oom)
            ok = ir__perr(p, st->at, AP_ENOMEM, "out of memory");
        if (st->n_results != n_results_expected)
            st->n_results = 0;
    }
    if (ok && st->n_results != n_results_expected) {
        /* types unknown: results get an opaque placeholder type */
        const ir_type *unk = ir_type_opaque(p->m, "?");
        st->n_results = 0;
        for (uint32_t i = 0; ok && i < n_results_expected; i++)
            ok = unk && ir__st_add_result_type(p, st, unk);
    }
    ir__arg_list_free(&pending);
    if (ok) {
        ir_template *tp = ir__alloc(p->m, sizeof *tp);
        if (!tp) {
            ok = ir__perr(p, st->at, AP_ENOMEM, "out of memory");
        } else {
            tp->n = n;
            tp->pieces = n ? ap_arena_memdup(&p->m->arena, pieces, sizeof *pieces * n) : NULL;
            st->tmpl = tp;
        }
    }
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
    st_init(&st);
    st.name = "argument attributes";
    bool ok = ir__parse_attr_dict(p, &st, false);
    if (ok)
        ok = (*out = ir_attr_dict(p->m, (int)st.n_attrs, st.attrs)) != NULL;
    st_free(&st);
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
            names_push_scope(p);
            bool dok = b && define_block_args(p, b, &args);
            names_pop_scope(p);
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

static bool parse_op(parser *p, ir_block *block)
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
    st_init(&st);
    st.at = p->tok.at;
    ir__lex_pos(&p->lx, st.at, &line, &col); /* now: positions only grow */
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
            ok = parse_opaque_op(p, &st, n_results, s + len);
        else
            ok = ir__parse_pretty(p, &st, ir_op_info_get(st.opcode)->fmt);
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
    ir_op *op = st_finish(p, &st);
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
        if (!names_define(p, rn[i].name, rn[i].len, &op->results[k], rn[i].count, rn[i].at))
            goto out;
        k += rn[i].count;
    }
    if (op->opcode == IR_OP_FUNC && !fwd_check_all(p))
        goto out;
    ok = true;
    goto out;
oom:
    ir__perr(p, st.at, AP_ENOMEM, "out of memory");
out:
    if (rn != rn_inline)
        ap_free(rn);
    st_free(&st);
    return ok;
}

/* ============================================================ top level */

/* #alias = loc(...) | attr ;  !alias = type */
static bool parse_alias_def(parser *p)
{
    const char *at = p->tok.at, *s = p->tok.s;
    uint32_t len = p->tok.len;
    bool is_type = p->tok.kind == T_BANG;
    ir__next(p);
    if (!ir__expect(p, T_EQUAL, "'=' in an alias definition"))
        return false;
    if (is_type) {
        if (alias_find(&p->type_aliases, s, len))
            return ir__perr(p, at, AP_ESYNTAX, "redefinition of type alias '!%.*s'", (int)len, s);
        const ir_type *t = ir__parse_type(p);
        return t && alias_add(p, &p->type_aliases, s, len, (void *)t, at);
    }
    if (ir__is_word(p, "loc")) {
        bool ok;
        const ir_loc *l = ir__parse_opt_loc(p, &ok);
        if (!ok)
            return false;
        alias_ent *e = alias_find_ent(&p->loc_aliases, s, len);
        if (e) {
            ir_loc *ph = e->ptr;
            if (ph->kind != IR_L_PENDING)
                return ir__perr(p, at, AP_ESYNTAX, "redefinition of location alias '#%.*s'", (int)len, s);
            if (l == ph)
                return ir__perr(p, at, AP_ESYNTAX, "location alias '#%.*s' refers to itself", (int)len, s);
            *ph = *l; /* fill the placeholder every earlier use points to */
            return true;
        }
        /* store a node of our own so later placeholders cannot alias it */
        ir_loc *copy = loc_new(p, IR_L_UNKNOWN);
        if (!copy)
            return false;
        *copy = *l;
        return alias_add(p, &p->loc_aliases, s, len, copy, at);
    }
    if (alias_find(&p->attr_aliases, s, len))
        return ir__perr(p, at, AP_ESYNTAX, "redefinition of attribute alias '#%.*s'", (int)len, s);
    ir_attr *a = ir__parse_attr(p, true);
    return a && alias_add(p, &p->attr_aliases, s, len, a, at);
}

/* Location aliases may be used before their definition; each must be
 * defined by the end, and must not be defined in terms of itself. */
static bool check_loc_aliases(parser *p)
{
    for (uint32_t i = 0; i < p->loc_aliases.n; i++) {
        const ir_loc *l = p->loc_aliases.ents[i].ptr;
        if (l->kind == IR_L_PENDING)
            return ir__perr(p, p->loc_aliases.ents[i].at, AP_EUNDEFINED, "undefined location alias '#%.*s'",
                            (int)p->loc_aliases.ents[i].len, p->loc_aliases.ents[i].name);
    }
    return true;
}

static void parser_free(parser *p)
{
    ap_free(p->names.ents);
    ap_free(p->names.buckets);
    ap_free(p->names.marks);
    for (uint32_t i = 0; i < p->n_fwd; i++)
        ap_free(p->fwd[i].slots);
    ap_free(p->fwd);
    ap_free(p->labels);
    ap_free(p->loc_aliases.ents);
    ap_free(p->attr_aliases.ents);
    ap_free(p->type_aliases.ents);
    ap_free(p->loc_aliases.buckets);
    ap_free(p->attr_aliases.buckets);
    ap_free(p->type_aliases.buckets);
}

/* Detects cycles among location aliases defined in terms of each other,
 * which would make printing and comparison loop. */
static bool loc_acyclic(const ir_loc *l, int depth)
{
    if (!l)
        return true;
    if (depth > 1000)
        return false;
    if (!loc_acyclic(l->a, depth + 1) || !loc_acyclic(l->b, depth + 1))
        return false;
    for (int i = 0; i < l->n; i++)
        if (!loc_acyclic(l->locs[i], depth + 1))
            return false;
    return true;
}

int ir_parse_mlir(const char *text, size_t len, const char *filename, ir_module **out, ap_error *err)
{
    parser ps, *p = &ps;
    memset(p, 0, sizeof ps);
    *out = NULL;
    ap_error_clear(err);
    p->err = err;
    p->m = ir_module_new(filename);
    if (!p->m)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    const char *fname = p->m->filename ? p->m->filename : "<input>";
    ir__lex_init(&p->lx, text, len, fname);
    const char *bad = ir__utf8_invalid(text, len);
    if (bad) {
        ir__perr(p, bad, AP_ESYNTAX, "invalid UTF-8 byte 0x%02X", (unsigned char)*bad);
        goto fail;
    }
    if (memchr(text, '\0', len)) {
        ir__perr(p, memchr(text, '\0', len), AP_ESYNTAX, "NUL byte in input");
        goto fail;
    }
    ir__next(p);
    names_push_scope(p);
    ir_block *body = ir_module_body(p->m);
    ir_op *explicit_module = NULL;
    bool saw_other = false;
    while (p->tok.kind != T_EOF) {
        if (p->tok.kind == T_ERROR) {
            ir__perr_expected(p, "a definition");
            goto fail;
        }
        if (p->tok.kind == T_HASH || p->tok.kind == T_BANG) {
            /* `#name =` / `!name =` at top level is an alias definition */
            const char *save = p->lx.p;
            ir_tok saved = p->tok;
            ir__next(p);
            bool is_def = p->tok.kind == T_EQUAL;
            p->lx.p = save;
            p->tok = saved;
            if (is_def) {
                if (!parse_alias_def(p))
                    goto fail;
                continue;
            }
        }
        if (p->tok.kind == T_FILE_METADATA_BEGIN) {
            const char *start = p->tok.at;
            const char *end = NULL;
            for (const char *q = p->lx.p; q + 1 < p->lx.end; q++)
                if (q[0] == '#' && q[1] == '-' && q + 2 < p->lx.end + 1 && q[2] == '}') {
                    end = q + 3;
                    break;
                }
            if (!end) {
                ir__perr(p, start, AP_ESYNTAX, "unterminated '{-#' metadata section");
                goto fail;
            }
            p->file_metadata = ap_arena_strndup(&p->m->arena, start, (size_t)(end - start));
            reset_to(p, end);
            continue;
        }
        const char *op_at = p->tok.at;
        ir_block tmp = {0};
        if (!parse_op(p, &tmp))
            goto fail;
        ir_op *op = tmp.first;
        if (op->opcode == IR_OP_MODULE && !explicit_module && !saw_other && body->n_ops == 0) {
            explicit_module = op;
            continue;
        }
        if (explicit_module) {
            ir__perr(p, op_at, AP_ESYNTAX, "unexpected operation after the top-level module");
            goto fail;
        }
        saw_other = true;
        ir_block_remove(&tmp, op);
        ir_block_append(body, op);
    }
    if (explicit_module) {
        /* the explicit module replaces the implicit one */
        explicit_module->parent = NULL;
        explicit_module->prev = explicit_module->next = NULL;
        p->m->top = explicit_module;
    }
    for (uint32_t i = 0; i < p->n_labels; i++)
        if (!p->labels[i].defined) { /* top-level ops have no blocks to branch to */
            ir__perr(p, p->labels[i].first_use, AP_EUNDEFINED, "reference to an undefined block '^%.*s'",
                     (int)p->labels[i].len, p->labels[i].name);
            goto fail;
        }
    if (!fwd_check_all(p) || !check_loc_aliases(p))
        goto fail;
    for (uint32_t i = 0; i < p->loc_aliases.n; i++)
        if (!loc_acyclic(p->loc_aliases.ents[i].ptr, 0)) {
            ir__perr(p, p->loc_aliases.ents[i].at, AP_ESYNTAX, "location alias '#%.*s' is defined in terms of itself",
                     (int)p->loc_aliases.ents[i].len, p->loc_aliases.ents[i].name);
            goto fail;
        }
    p->m->file_metadata = p->file_metadata;
    for (ir_op *f = ir_module_body(p->m)->first; f; f = f->next)
        if (f->opcode == IR_OP_FUNC)
            ir_func_renumber(f, NULL, NULL);
    parser_free(p);
    {
        int rc = ir_verify(p->m, err);
        if (rc < 0) {
            ir_module_free(p->m);
            return rc;
        }
    }
    *out = p->m;
    return 0;
fail:
    if (!p->failed)
        ir__perr(p, p->tok.at, AP_EINTERNAL, "parse failed");
    parser_free(p);
    ir_module_free(p->m);
    return err ? err->code : AP_ESYNTAX;
}
