/*
 * ir_int.h - private to the ir library: intern tables, float conversions,
 * the MLIR lexer shared by the parsers, and helpers the files of ir/ share
 * (double-underscore prefix).
 */
#ifndef IR_INT_H
#define IR_INT_H

#include "ir.h"

#include <string.h>

/* ------------------------------------------------------- module internals */

typedef struct ir_ptr_table {
    const void **slots; /* open addressing, NULL = empty */
    uint32_t cap, n;    /* cap is a power of two */
} ir_ptr_table;

struct ir_module_impl {
    ir_ptr_table strings; /* const char * with a length prefix, see intern */
    ir_ptr_table types;   /* const ir_type * */
    ir_ptr_table attrs;   /* ir_attr *, uniqued */
    const ir_type *token;
    size_t table_bytes;
};

/* Doubles t (rehashing each entry by hash), counting the bytes in
 * m->impl->table_bytes; false when out of memory (t unchanged). */
bool ir__table_grow(ir_module *m, ir_ptr_table *t, uint64_t (*hash)(const void *));

static inline void *ir__alloc(ir_module *m, size_t n) { return ap_arena_alloc(&m->arena, n); }
static inline void *ir__zalloc(ir_module *m, size_t n) { return ap_arena_zalloc(&m->arena, n); }

/* Length of an interned string without strlen (stored before the chars). */
static inline uint32_t ir__intern_len(const char *s)
{
    uint32_t n;
    memcpy(&n, s - sizeof n, sizeof n);
    return n;
}

/* Copies an attribute (deeply) into module m; used by the inliner and by
 * builders that take attributes from another module. */
ir_attr *ir__attr_clone(ir_module *m, const ir_attr *a);
/* Returns the module's one attribute equal to key (children must already be
 * uniqued).  key_in_arena: key was allocated in m's arena and becomes the
 * canonical copy when new; otherwise a new key is copied into the arena. */
ir_attr *ir__attr_intern(ir_module *m, ir_attr *key, bool key_in_arena);
const ir_type *ir__type_clone(ir_module *m, const ir_type *t);
/* The part type of a complex tensor type (complex<f32> -> f32), NULL if t
 * is not one (or out of memory). */
const ir_type *ir__complex_part_type(ir_module *m, const ir_type *t);
const ir_loc *ir__loc_clone(ir_module *m, const ir_loc *l);

/* Sorts named attributes by name (stable for equal names). */
void ir__sort_named(ir_named_attr *items, int n);

/* Valid bare identifier for attribute keys and symbol names. */
bool ir__is_bare_ident(const char *s, size_t len);
/* Appends s as an MLIR string literal with escapes. */
void ir__print_string(ap_buf *b, const char *s, size_t len);
/* Appends a location `loc(...)` body (without `loc(`) for inline printing. */
void ir__print_loc_inline(ap_buf *b, const ir_loc *l);
/* Appends a float in the shortest form that reads back to the same value of
 * element type e (finite values; callers print non-finite ones as hex). */
void ir__print_float(ap_buf *b, double v, ir_elem e);

/* ------------------------------------------------------ float conversion */

uint16_t ir__f32_to_f16(float f);
float ir__f16_to_f32(uint16_t h);
uint16_t ir__f32_to_bf16(float f);
float ir__bf16_to_f32(uint16_t h);
/* Small float formats (8 bits and below, tf32): decode raw bits, and encode
 * the nearest representable value (ties to even). */
double ir__minifloat_decode(ir_elem e, uint32_t bits);
uint32_t ir__minifloat_encode(ir_elem e, double v);
/* Reads a float element of dense data (any float elem) as double. */
double ir__float_load(ir_elem e, const uint8_t *p);
/* Stores v as element type e; returns false if e is not a float type. */
bool ir__float_store(ir_elem e, uint8_t *p, double v);
/* Raw bits of a float element (for hex printing of NaN/inf). */
uint64_t ir__float_bits(ir_elem e, const uint8_t *p);
int64_t ir__int_load(ir_elem e, const uint8_t *p);
void ir__int_store(ir_elem e, uint8_t *p, int64_t v);

/* ------------------------------------------------------------- registry */

enum ir_fmt {
    IR_FMT_GENERIC,
    IR_FMT_MODULE,
    IR_FMT_FUNC,
    IR_FMT_RETURN,
    IR_FMT_CALL,
    IR_FMT_SAME,
    IR_FMT_FUNCTIONAL,
    IR_FMT_TYPES,
    IR_FMT_SELECT,
    IR_FMT_COMPARE,
    IR_FMT_CONSTANT,
    IR_FMT_IOTA,
    IR_FMT_BROADCAST_IN_DIM,
    IR_FMT_DYNAMIC_BROADCAST_IN_DIM,
    IR_FMT_DYNAMIC_IOTA,
    IR_FMT_TRANSPOSE,
    IR_FMT_REVERSE,
    IR_FMT_CONCATENATE,
    IR_FMT_SLICE,
    IR_FMT_DYNAMIC_SLICE,
    IR_FMT_PAD,
    IR_FMT_DOT,
    IR_FMT_DOT_GENERAL,
    IR_FMT_CONVOLUTION,
    IR_FMT_REDUCE,
    IR_FMT_WHILE,
    IR_FMT_CUSTOM_CALL,
    IR_FMT_COMPOSITE,
    IR_FMT_TUPLE,
    IR_FMT_GET_TUPLE_ELEMENT,
    IR_FMT_FFT,
    IR_FMT_RNG,
    IR_FMT_RNG_BIT_GENERATOR,
    IR_FMT_REDUCE_PRECISION,
};

/* ------------------------------------------------------------ pointer map */

typedef struct ir_ptrmap {
    const void **keys;
    uint32_t *vals;
    uint32_t cap, n;
} ir_ptrmap;

bool ir__map_get(const ir_ptrmap *m, const void *k, uint32_t *v);
bool ir__map_put(ir_ptrmap *m, const void *k, uint32_t v); /* false: out of memory */
void ir__map_clear(ir_ptrmap *m);
void ir__map_free(ir_ptrmap *m);

/* The value the canonical printer names %N (result k) in func, or NULL. */
const ir_value *ir__printed_value(const ir_op *func, uint32_t n, uint32_t k);

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

/* UTF-8 validity of [p, p+n): returns the first bad byte or NULL. */
const char *ir__utf8_invalid(const char *p, size_t n);

#endif /* IR_INT_H */
