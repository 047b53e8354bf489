/*
 * parse_int.h - private to the parsers: the entry point of each text format
 * (mlir.c, hlo.c; ir_parse in parse.c dispatches) and the MLIR lexer
 * (lex.c), which the HLO parser also uses for positions.  The MLIR
 * parser's own state and grammar are in mlir_int.h.
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

#endif /* PARSE_INT_H */
