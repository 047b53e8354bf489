/*
 * mlir.c - the parser of MLIR text: StableHLO as JAX and MLIR tools
 * print it, in pretty and generic op forms, plus ops of other dialects kept
 * opaque.  Recursive descent over the tokens of lex.c; each function is
 * named after the grammar rule it parses, the rule in its first comment.
 * This file is the top level (the module, its aliases and file metadata);
 * the parser's core is core.c and the grammar of types, attributes,
 * locations and ops is in types.c, attrs.c, locs.c, ops.c and pretty.c.
 *
 * Errors stop the parse at the first problem and name its line and column.
 */
#include "mlir_int.h"

#include <stdio.h>
#include <stdlib.h>


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
        if (ir__alias_find(&p->type_aliases, s, len))
            return ir__perr(p, at, AP_ESYNTAX, "redefinition of type alias '!%.*s'", (int)len, s);
        const ir_type *t = ir__parse_type(p);
        if (!t || !ir__alias_add(p, &p->type_aliases, s, len, (void *)t, at))
            return false;
        p->type_aliases.ents[p->type_aliases.n - 1].def_end = p->prev_end;
        return true;
    }
    if (ir__is_word(p, "loc")) {
        bool ok;
        const ir_loc *l = ir__parse_opt_loc(p, &ok);
        if (!ok)
            return false;
        alias_ent *e = ir__alias_find_ent(&p->loc_aliases, s, len);
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
        ir_loc *copy = ir__loc_new(p, IR_L_UNKNOWN);
        if (!copy)
            return false;
        *copy = *l;
        return ir__alias_add(p, &p->loc_aliases, s, len, copy, at);
    }
    if (ir__alias_find(&p->attr_aliases, s, len))
        return ir__perr(p, at, AP_ESYNTAX, "redefinition of attribute alias '#%.*s'", (int)len, s);
    ir_attr *a = ir__parse_attr(p, true);
    if (!a || !ir__alias_add(p, &p->attr_aliases, s, len, a, at))
        return false;
    p->attr_aliases.ents[p->attr_aliases.n - 1].def_end = p->prev_end;
    return true;
}

/* The definitions of the attribute and type aliases that ops of unknown
 * syntax name in their text, in the order written, one per line; NULL when
 * there are none. */
static const char *used_alias_defs(parser *p)
{
    ap_buf b;
    ap_buf_init(&b);
    const alias_table *tabs[2] = {&p->attr_aliases, &p->type_aliases};
    uint32_t next[2] = {0, 0};
    for (;;) {
        const alias_ent *e = NULL;
        int from = -1;
        for (int k = 0; k < 2; k++) {
            while (next[k] < tabs[k]->n && !tabs[k]->ents[next[k]].used_in_text)
                next[k]++;
            if (next[k] < tabs[k]->n && (!e || tabs[k]->ents[next[k]].at < e->at)) {
                e = &tabs[k]->ents[next[k]];
                from = k;
            }
        }
        if (!e)
            break;
        next[from]++;
        ap_buf_put(&b, e->at, (size_t)(e->def_end - e->at));
        ap_buf_putc(&b, '\n');
    }
    const char *text = b.len && !b.oom ? ap_arena_strndup(&p->m->arena, b.data, b.len) : NULL;
    if (b.oom || (b.len && !text))
        ir__perr(p, NULL, AP_ENOMEM, "out of memory");
    ap_buf_free(&b);
    return text;
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
    p->forms = ir__form_parsers;
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
    ir__names_push_scope(p);
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
            ir__reset_to(p, end);
            continue;
        }
        const char *op_at = p->tok.at;
        ir_block tmp = {0};
        if (!ir__parse_op(p, &tmp))
            goto fail;
        ir_op *op = tmp.first;
        if (op->opcode == IR_OP_MODULE && !explicit_module && !saw_other && body->n_ops == 0) {
            explicit_module = op;
            continue;
        }
        if (explicit_module && op->opcode == IR_OP_MODULE) {
            ir__perr(p, op_at, AP_EUNSUPPORTED,
                     "a second top-level module: the file holds several modules and autopart reads one; split "
                     "it into one file per module");
            goto fail;
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
    if (!ir__fwd_check_all(p) || !check_loc_aliases(p))
        goto fail;
    for (uint32_t i = 0; i < p->loc_aliases.n; i++)
        if (!loc_acyclic(p->loc_aliases.ents[i].ptr, 0)) {
            ir__perr(p, p->loc_aliases.ents[i].at, AP_ESYNTAX, "location alias '#%.*s' is defined in terms of itself",
                     (int)p->loc_aliases.ents[i].len, p->loc_aliases.ents[i].name);
            goto fail;
        }
    p->m->file_metadata = p->file_metadata;
    p->m->alias_defs = used_alias_defs(p);
    if (p->failed)
        goto fail;
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
