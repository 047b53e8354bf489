/*
 * parse_int.h - private to the parsers: the MLIR lexer (lex.c), the entry
 * point of each text format (mlir.c, hlo.c; ir_parse in parse.c dispatches),
 * and the MLIR parser's state, shared by mlir.c (types, attributes,
 * locations, regions, generic ops, functions, modules) and pretty.c (the
 * pretty forms of registered StableHLO ops).
 */
#ifndef PARSE_INT_H
#define PARSE_INT_H

#ifndef AP_IR_PARSE
#error "parse_int.h is private to the parsers (ir/parse/*.c): use parse.h"
#endif

#include "ir_build.h"
#include "parse.h"

/* ------------------------------------------------------------ entry points */

/* Parse one format; as ir_parse (parse.h) with the format fixed. */
int ir_parse_mlir(const char *text, size_t len, const char *filename, ir_module **out,
                  ap_error *err);
int ir_parse_hlo(const char *text, size_t len, const char *filename, ir_module **out,
                 ap_error *err);

/* ----------------------------------------------------------------- lexer */

typedef enum ir_tok_kind {
    T_EOF,
    T_ERROR,
    T_IDENT,      /* bare identifier, may contain '.', '$', '-': stablehlo.add */
    T_PERCENT,    /* %name or %0 ; text excludes '%' ; #N suffix separate */
    T_CARET,      /* ^bb0 */
    T_AT,         /* @name or @"quoted" ; text excludes '@' (unescaped) */
    T_HASH,       /* #name (dialect attribute / alias), text excludes '#' */
    T_BANG,       /* !name (dialect type / alias), text excludes '!' */
    T_INT,        /* 42, 0x1F (no sign) */
    T_FLOAT,      /* 1.5, 1e-3 */
    T_STRING,     /* "..." ; text is the raw contents between quotes */
    T_LPAREN, T_RPAREN, T_LBRACKET, T_RBRACKET, T_LBRACE, T_RBRACE,
    T_LESS, T_GREATER, T_COLON, T_COMMA, T_EQUAL, T_ARROW, T_MINUS, T_PLUS,
    T_STAR, T_QUESTION, T_FILE_METADATA_BEGIN, /* {-# */
    T_FILE_METADATA_END, /* #-} */
    T_DOUBLE_COLON, T_LESS_BRACE, /* <{ */
    T_RBRACE_GREATER, /* }> */
    T_X,          /* never produced; dims are split by the type parser */
} ir_tok_kind;

typedef struct ir_tok {
    uint8_t kind;
    bool nl_before; /* a newline separates it from the previous token */
    const char *s;  /* start of the text (see kinds) */
    uint32_t len;
    const char *at; /* start of the token in the input */
} ir_tok;

typedef struct ir_lexer {
    const char *src, *p, *end;
    const char *filename;
    /* line bookkeeping for positions: computed lazily from `at`; the last
     * column asked for is kept so that a long line costs one pass */
    const char *line_start;
    uint32_t line;
    const char *col_at;
    int col;
    const char *err_at;
    const char *err_msg;
} ir_lexer;

void ir__lex_init(ir_lexer *lx, const char *src, size_t len, const char *filename);
void ir__lex_next(ir_lexer *lx, ir_tok *t);
/* 1-based line and column of a pointer into the source.  Moves forward
 * incrementally; positions asked for in increasing order are cheap. */
void ir__lex_pos(ir_lexer *lx, const char *at, int *line, int *col);


/* ------------------------------------------------------------ SSA names */

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

typedef struct parser {
    ir_lexer lx;
    ir_tok tok;
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
    /* interned names used often */
    const char *s_value, *s_func_return, *s_return;
} parser;

#define PARSE_MAX_DEPTH 200

/* errors */
bool ir__perr(parser *p, const char *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool ir__perr_expected(parser *p, const char *what);

/* tokens */
void ir__next(parser *p);
bool ir__accept(parser *p, ir_tok_kind k);
bool ir__expect(parser *p, ir_tok_kind k, const char *what);
bool ir__is_word(const parser *p, const char *w);
bool ir__accept_word(parser *p, const char *w);
bool ir__expect_word(parser *p, const char *w);

/* pieces */
const ir_type *ir__parse_type(parser *p);
bool ir__parse_type_list_paren(parser *p, const ir_type ***out, uint32_t *n);
ir_attr *ir__parse_attr(parser *p, bool type_suffix);
/* The `<...>` of a dialect attribute named `name` (the current token is
 * its '<'; `at` is where the attribute starts, for messages). */
ir_attr *ir__parse_dialect_body(parser *p, const char *at, const char *name, uint32_t name_len);
bool ir__parse_attr_dict(parser *p, op_state *st, bool props);
bool ir__parse_i64_list(parser *p, int64_t **out, int *n);
bool ir__parse_int(parser *p, int64_t *out);
bool ir__parse_operand(parser *p, op_state *st);
bool ir__parse_operand_list(parser *p, op_state *st);
const ir_loc *ir__parse_opt_loc(parser *p, bool *ok);
bool ir__parse_region(parser *p, ir_region *r, const arg_list *args);
ir_region *ir__new_region(parser *p);
bool ir__parse_arg_decls(parser *p, arg_list *args, bool allow_attrs);
void ir__arg_list_free(arg_list *a);
const char *ir__conv_dims_canonical(parser *p, const char *body, size_t len);

/* op state */
bool ir__st_add_operand(parser *p, op_state *st, ir_value *v);
bool ir__st_add_result_type(parser *p, op_state *st, const ir_type *t);
bool ir__st_add_attr(parser *p, op_state *st, const char *name, ir_attr *v);
bool ir__st_add_region(parser *p, op_state *st, ir_region *r);
/* Signature after ':' in pretty forms: a function type or a type list. */
typedef struct op_sig {
    bool functional;
    const ir_type **in, **out;
    uint32_t n_in, n_out;
} op_sig;
bool ir__parse_sig(parser *p, op_sig *sig);
/* Applies a signature: functional gives operand and result types; a plain
 * list of one type means "all operands and the result have this type". */
bool ir__apply_sig_same(parser *p, op_state *st, const op_sig *sig, const char *at);
bool ir__apply_sig_functional(parser *p, op_state *st, const op_sig *sig, const char *at);
bool ir__check_operand_type(parser *p, op_state *st, uint32_t i, const ir_type *t, const char *at);

/* pretty forms of registered ops (pretty.c); the op name was consumed */
bool ir__parse_pretty(parser *p, op_state *st, int fmt);
/* builds `^bb0(%a: T, %b: T): %r = OP %a, %b : T; stablehlo.return %r` */
ir_region *ir__reduction_region(parser *p, ir_opcode op, const ir_type *const *elem_types, uint32_t n);

#endif /* PARSE_INT_H */
