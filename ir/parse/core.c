/*
 * core.c - the core of the MLIR text parser, which the grammar files share:
 * errors, tokens, scratch arrays, SSA names and forward references, alias
 * tables, and the state of the op being parsed.  The grammar is in
 * types.c, attrs.c, locs.c, ops.c (regions, generic, opaque and function
 * ops), pretty.c (the pretty forms of StableHLO ops) and mlir.c (the
 * module and its aliases).
 *
 * Errors stop the parse at the first problem and name its line and column.
 */
#include "mlir_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

bool ir__expect_failed(parser *p, ir_tok_kind k, const char *what)
{
    return ir__perr_expected(p, what ? what : tok_name(k));
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
void ir__reset_to(parser *p, const char *pos)
{
    p->lx.p = pos;
    ir__next(p);
}

/* Scans a balanced <...> starting at `open` (which is '<'); returns the
 * position of the matching '>' or NULL.  Strings, nested brackets of every
 * kind and '->' are skipped. */
const char *ir__scan_angle(const char *open, const char *end)
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

bool ir__grow(parser *p, void **arr, uint32_t *cap, uint32_t need, size_t elem)
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

void ir__names_push_scope(parser *p)
{
    name_table *t = &p->names;
    if (!GROW(p, t->marks, t->cap_marks, t->n_marks + 1))
        return;
    t->marks[t->n_marks++] = (scope_mark){t->n, ++t->n_opened};
}

void ir__names_pop_scope(parser *p)
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
bool ir__names_define(parser *p, const char *s, uint32_t len, ir_value *vals, uint32_t n,
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
bool ir__fwd_check_all(parser *p)
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
ir_value *ir__lookup_value(parser *p)
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

void ir__st_free(op_state *st)
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
    ir_value *v = ir__lookup_value(p);
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
ir_op *ir__st_finish(parser *p, op_state *st)
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
/* Text of a balanced construct `<...>` starting at the current token, which
 * must be '<' right after `start`; consumes it and returns the interned text
 * from `start` to the closing '>'. */
const char *ir__take_angle_text(parser *p, const char *start)
{
    if (p->tok.kind != T_LESS) {
        ir__perr_expected(p, "'<'");
        return NULL;
    }
    const char *close = ir__scan_angle(p->tok.at, p->lx.end);
    if (!close) {
        ir__perr(p, p->tok.at, AP_ESYNTAX, "unbalanced '<'");
        return NULL;
    }
    const char *text = ir_intern(p->m, start, (size_t)(close + 1 - start));
    ir__reset_to(p, close + 1);
    if (!text)
        ir__perr(p, start, AP_ENOMEM, "out of memory");
    return text;
}
/* Alias tables are looked up once per op location (JAX files use
 * thousands of #locN aliases), so they are hashed. */
alias_ent *ir__alias_find_ent(alias_table *t, const char *s, uint32_t len)
{
    if (!t->nbuckets)
        return NULL;
    uint32_t h = (uint32_t)ap_hash_bytes(s, len, 3);
    for (int32_t i = t->buckets[h & (t->nbuckets - 1)]; i >= 0; i = t->ents[i].next)
        if (t->ents[i].len == len && memcmp(t->ents[i].name, s, len) == 0)
            return &t->ents[i];
    return NULL;
}
void *ir__alias_find(alias_table *t, const char *s, uint32_t len)
{
    alias_ent *e = ir__alias_find_ent(t, s, len);
    return e ? e->ptr : NULL;
}
bool ir__alias_add(parser *p, alias_table *t, const char *s, uint32_t len, void *ptr, const char *at)
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
    t->ents[t->n] = (alias_ent){s, len, ptr, at, t->buckets[h], NULL, false};
    t->buckets[h] = (int32_t)t->n;
    t->n++;
    return true;
}
int ir__hexval(char c)
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
char *ir__unescape(parser *p, const char *s, uint32_t len, size_t *out_len)
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
            if (i + 1 < len && ir__hexval(c) >= 0 && ir__hexval(s[i + 1]) >= 0) {
                d[n++] = (char)(ir__hexval(c) * 16 + ir__hexval(s[i + 1]));
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
bool ir__tok_to_u64(parser *p, uint64_t *out)
{
    const char *s = p->tok.s;
    uint32_t len = p->tok.len;
    uint64_t v = 0;
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (len > 18)
            return ir__perr(p, p->tok.at, AP_ESYNTAX, "integer literal is too large");
        for (uint32_t i = 2; i < len; i++)
            v = v * 16 + (uint64_t)ir__hexval(s[i]);
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
    if (!ir__tok_to_u64(p, &v))
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
