/*
 * mlir_int.h - private to the MLIR text parser: its state and the grammar
 * pieces its files share.  core.c is the parser's core (errors, tokens,
 * scratch arrays, names, aliases, the op being parsed); types.c, attrs.c,
 * locs.c and ops.c the grammar of types, attributes, locations and ops;
 * pretty.c the pretty forms of registered StableHLO ops; mlir.c the top
 * level.  Each function is named after the grammar rule it parses.
 */
#ifndef MLIR_INT_H
#define MLIR_INT_H

#ifndef AP_IR_PARSE
#error "mlir_int.h is private to the parsers (ir/parse/*.c): use parse.h"
#endif

#include "parse_int.h"

/* ------------------------------------------------------------- names */

typedef struct name_ent {
    const char *name;
    uint32_t len, hash;
    int32_t next;   /* bucket chain, -1 ends */
    uint32_t depth; /* scope depth of the definition */
    ir_value *vals; /* results of one op, or one block argument */
    uint32_t n;
} name_ent;

/* An open scope (region): where its names start, and its number in the
 * order scopes were opened (from 1). */
typedef struct scope_mark {
    uint32_t n, id;
} scope_mark;

typedef struct name_table {
    name_ent *ents;
    uint32_t n, cap;
    int32_t *buckets;
    uint32_t nbuckets;
    scope_mark *marks; /* the open scopes, outermost first */
    uint32_t n_marks, cap_marks;
    uint32_t n_opened; /* scopes opened so far */
} name_table;

/* A use of a name before its definition. */
typedef struct fwd_ref {
    const char *name;
    uint32_t len, index;
    ir_value *ph; /* placeholder standing in for the value */
    const char *at;
    uint32_t scopes_seen; /* name_table.n_opened at the use */
    ir_block *block;   /* where it was used */
    ir_value ***slots; /* operand slots that hold ph */
    uint32_t n_slots, cap_slots;
    bool resolved;
} fwd_ref;

/* Block labels of the region being parsed. */
typedef struct label_ent {
    const char *name;
    uint32_t len;
    ir_block *block;
    const char *first_use;
    bool defined;
} label_ent;

typedef struct alias_ent {
    const char *name;
    uint32_t len;
    void *ptr; /* ir_loc *, ir_attr * or const ir_type * */
    const char *at;
    int32_t next; /* bucket chain */
    /* attribute and type aliases: the end of the definition's text, and
     * whether an op of unknown syntax names the alias in its text (the
     * printer must then write the definition, as it cannot inline it) */
    const char *def_end;
    bool used_in_text;
} alias_ent;

typedef struct alias_table {
    alias_ent *ents;
    uint32_t n, cap;
    int32_t *buckets;
    uint32_t nbuckets;
} alias_table;

/* ------------------------------------------------------------ op state */

/* What a parsed op is made of, collected before the op is created. */
#define OPS_INLINE 8
typedef struct op_state {
    ir_opcode opcode;
    const char *name; /* interned */
    const char *at;   /* position of the op (its result list or name) */
    ir_value *operands_inline[OPS_INLINE];
    ir_value **operands;
    uint32_t n_operands, cap_operands;
    const ir_type *types_inline[OPS_INLINE];
    const ir_type **result_types;
    uint32_t n_results, cap_results;
    ir_named_attr *attrs;
    uint32_t n_attrs, cap_attrs, n_props;
    ir_region **regions;
    uint32_t n_regions, cap_regions;
    ir_block **successors;
    uint32_t n_successors, cap_successors;
    ir_template *tmpl;
    const ir_loc *loc;
} op_state;

/* A predeclared entry-block argument list: `(%a: T loc(..), ...)`. */
typedef struct arg_decl {
    const char *name;
    uint32_t len;
    const ir_type *type;
    const ir_loc *loc;
    const char *at;
} arg_decl;

typedef struct arg_list {
    arg_decl *v;
    uint32_t n, cap;
} arg_list;

/* ----------------------------------------------------------------- parser */

typedef struct parser parser;
typedef bool (*ir__form_parser)(parser *p, op_state *st, int fmt);

struct parser {
    ir_lexer lx;
    ir_tok tok;
    /* the token before tok: its kind (ops of unknown syntax continue past
     * a line that ends in ',' or ':') and where it ends */
    uint8_t prev_kind;
    const char *prev_end;
    ir_module *m;
    ap_error *err;
    bool failed;
    int depth; /* nesting of regions/attributes, bounded against stack abuse */
    name_table names;
    fwd_ref *fwd;
    uint32_t n_fwd, cap_fwd;
    label_ent *labels; /* stack: each region's labels after its mark */
    uint32_t n_labels, cap_labels;
    uint32_t label_mark; /* first label of the region being parsed */
    ir_block *cur_block; /* block whose ops are being parsed */
    alias_table loc_aliases, attr_aliases, type_aliases;
    const char *file_metadata;
    /* the parsers of pretty forms (ir__form_parsers): ops.c reaches the
     * StableHLO forms through them, without naming pretty.c, whose forms
     * parse regions of ops in turn */
    const ir__form_parser *forms;
};

#define PARSE_MAX_DEPTH 200

/* ============================================================ core.c */

/* Errors: record the first one at `at` ("FILE:LINE:COL: error: ...") and
 * return false, so callers can `return ir__perr(...)`. */
bool ir__perr(parser *p, const char *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool ir__perr_expected(parser *p, const char *what);

/* Tokens.  The small ones are inline: every file of the grammar calls them
 * for nearly every token, and inlined `ir__is_word(p, "cond")` compares
 * with a constant length. */
static inline void ir__next(parser *p)
{
    p->prev_kind = p->tok.kind;
    p->prev_end = p->lx.p;
    ir__lex_next(&p->lx, &p->tok);
}
static inline bool ir__accept(parser *p, ir_tok_kind k)
{
    if (p->tok.kind != k)
        return false;
    ir__next(p);
    return true;
}
/* The error of ir__expect: "expected WHAT" (or the token kind's name). */
bool ir__expect_failed(parser *p, ir_tok_kind k, const char *what);
static inline bool ir__expect(parser *p, ir_tok_kind k, const char *what)
{
    if (p->tok.kind != k)
        return ir__expect_failed(p, k, what);
    ir__next(p);
    return true;
}
static inline bool ir__is_word(const parser *p, const char *w)
{
    size_t n = strlen(w);
    return p->tok.kind == T_IDENT && p->tok.len == n && memcmp(p->tok.s, w, n) == 0;
}
static inline bool ir__accept_word(parser *p, const char *w)
{
    if (!ir__is_word(p, w))
        return false;
    ir__next(p);
    return true;
}
bool ir__expect_word(parser *p, const char *w);
/* Moves the lexer to `pos` and reads the token there. */
void ir__reset_to(parser *p, const char *pos);
/* Scans a balanced <...> starting at `open` (which is '<'); returns the
 * position of the matching '>' or NULL.  Strings, nested brackets of every
 * kind and '->' are skipped. */
const char *ir__scan_angle(const char *open, const char *end);
/* Text of a balanced construct `<...>` starting at the current token, which
 * must be '<' right after `start`; consumes it and returns the interned text
 * from `start` to the closing '>'. */
const char *ir__take_angle_text(parser *p, const char *start);
int ir__hexval(char c); /* -1 when c is not a hex digit */
/* Decodes the escapes of a string token into the arena. */
char *ir__unescape(parser *p, const char *s, uint32_t len, size_t *out_len);
/* The current integer token's value (decimal or 0x hex). */
bool ir__tok_to_u64(parser *p, uint64_t *out);
/* integer ::= -? [0-9]+ */
bool ir__parse_int(parser *p, int64_t *out);
/* [i, i, ...] into a heap array (ap_free) */
bool ir__parse_i64_list(parser *p, int64_t **out, int *n);

/* Scratch arrays: grows *arr (heap) to hold `need` elements. */
bool ir__grow(parser *p, void **arr, uint32_t *cap, uint32_t need, size_t elem);
#define GROW(p, arr, cap, need) \
    ((need) <= (cap) || ir__grow((p), (void **)&(arr), &(cap), (need), sizeof *(arr)))

/* Names: %values in nested scopes (one per region), uses before their
 * definition (forward references, checked at the end), aliases. */
void ir__names_push_scope(parser *p);
void ir__names_pop_scope(parser *p);
/* Binds %name to `n` values (an op's results or one block argument). */
bool ir__names_define(parser *p, const char *s, uint32_t len, ir_value *vals, uint32_t n,
                      const char *at);
/* %name or %name#N: the value, or a placeholder when not yet defined. */
ir_value *ir__lookup_value(parser *p);
/* Checks that every forward reference made so far has been defined. */
bool ir__fwd_check_all(parser *p);
alias_ent *ir__alias_find_ent(alias_table *t, const char *s, uint32_t len);
void *ir__alias_find(alias_table *t, const char *s, uint32_t len);
bool ir__alias_add(parser *p, alias_table *t, const char *s, uint32_t len, void *ptr, const char *at);

/* The op being parsed */
static inline void ir__st_init(op_state *st)
{
    memset(st, 0, sizeof *st);
    st->operands = st->operands_inline;
    st->cap_operands = OPS_INLINE;
    st->result_types = st->types_inline;
    st->cap_results = OPS_INLINE;
}
void ir__st_free(op_state *st);
bool ir__st_add_operand(parser *p, op_state *st, ir_value *v);
bool ir__st_add_result_type(parser *p, op_state *st, const ir_type *t);
bool ir__st_add_attr(parser *p, op_state *st, const char *name, ir_attr *v);
bool ir__st_add_region(parser *p, op_state *st, ir_region *r);
bool ir__parse_operand(parser *p, op_state *st);
bool ir__parse_operand_list(parser *p, op_state *st);
bool ir__check_operand_type(parser *p, op_state *st, uint32_t i, const ir_type *t, const char *at);
/* Creates the op from its state. */
ir_op *ir__st_finish(parser *p, op_state *st);
ir_region *ir__new_region(parser *p);
void ir__arg_list_free(arg_list *a);

/* Signature after ':' in pretty forms: a function type or a type list
 * (parsed by types.c). */
typedef struct op_sig {
    bool functional;
    const ir_type **in, **out;
    uint32_t n_in, n_out;
} op_sig;
/* Applies a signature: functional gives operand and result types; a plain
 * list of one type means "all operands and the result have this type". */
bool ir__apply_sig_same(parser *p, op_state *st, const op_sig *sig, const char *at);
bool ir__apply_sig_functional(parser *p, op_state *st, const op_sig *sig, const char *at);

/* ============================================================ types.c */

const ir_type *ir__parse_type(parser *p);
bool ir__parse_sig(parser *p, op_sig *sig);
void ir__sig_free(op_sig *sig);

/* ============================================================ attrs.c */

ir_attr *ir__parse_attr(parser *p, bool type_suffix);
/* The `<...>` of a dialect attribute named `name` (the current token is
 * its '<'; `at` is where the attribute starts, for messages). */
ir_attr *ir__parse_dialect_body(parser *p, const char *at, const char *name, uint32_t name_len);
bool ir__parse_attr_dict(parser *p, op_state *st, bool props);
const char *ir__conv_dims_canonical(parser *p, const char *body, size_t len);

/* ============================================================= locs.c */

ir_loc *ir__loc_new(parser *p, ir_loc_kind k);
const ir_loc *ir__parse_opt_loc(parser *p, bool *ok);

/* ============================================================== ops.c */

bool ir__parse_op(parser *p, ir_block *block);
bool ir__parse_region(parser *p, ir_region *r, const arg_list *args);
bool ir__parse_arg_decls(parser *p, arg_list *args, bool allow_attrs);

/* =========================================================== pretty.c */

/* The parsers of the pretty forms of registered ops (the parse column of
 * ir_forms.h), by form; NULL for the forms without one.  A form's parser
 * reads what follows the op name. */
extern const ir__form_parser ir__form_parsers[IR_FMT__COUNT];

#endif /* MLIR_INT_H */
