/*
 * lex.c - the tokenizer for MLIR text (StableHLO and other dialects).
 *
 * Tokens point into the source; nothing is copied.  Newlines are not tokens
 * but each token records whether one preceded it, which the parser uses to
 * find the end of ops written in an unknown dialect's custom syntax.
 */
#include "parse_int.h"

void ir__lex_init(ir_lexer *lx, const char *src, size_t len, const char *filename)
{
    lx->src = lx->p = src;
    lx->end = src + len;
    lx->filename = filename;
    lx->line_start = lx->col_at = src;
    lx->line = lx->col = 1;
    lx->err_at = NULL;
    lx->err_msg = NULL;
}

void ir__lex_pos(ir_lexer *lx, const char *at, int *line, int *col)
{
    if (at < lx->line_start) { /* rare: asked for an earlier position */
        lx->line_start = lx->col_at = lx->src;
        lx->line = lx->col = 1;
    }
    if (at > lx->end)
        at = lx->end;
    for (const char *q = lx->line_start; q < at; q++) {
        const char *nl = memchr(q, '\n', (size_t)(at - q));
        if (!nl)
            break;
        lx->line++;
        lx->line_start = nl + 1;
        q = nl;
    }
    *line = (int)lx->line;
    /* columns count characters (UTF-8 continuation bytes excluded), from
     * the last column asked for when it is on this line before `at` */
    if (lx->col_at < lx->line_start || lx->col_at > at) {
        lx->col_at = lx->line_start;
        lx->col = 1;
    }
    int c = lx->col;
    for (const char *q = lx->col_at; q < at; q++)
        if (((unsigned char)*q & 0xc0) != 0x80)
            c++;
    lx->col_at = at;
    lx->col = c;
    *col = c;
}

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_letter(c) || is_digit(c) || c == '_' || c == '$' || c == '.'; }
/* suffix-id of %name, ^bb, #alias: letters, digits and _$.- */
static bool is_suffix_char(char c) { return is_ident_char(c) || c == '-'; }

static void lex_error(ir_lexer *lx, ir_tok *t, const char *at, const char *msg)
{
    lx->err_at = at;
    lx->err_msg = msg;
    t->kind = T_ERROR;
    t->at = t->s = at;
    t->len = 0;
}

/* Scans a string literal starting at the opening quote; returns the closing
 * quote or NULL when the string is not terminated on its line. */
static const char *scan_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '"')
            return p;
        if (*p == '\\') {
            p++;
            if (p >= end)
                return NULL;
        } else if (*p == '\n') {
            return NULL;
        }
    }
    return NULL;
}

void ir__lex_next(ir_lexer *lx, ir_tok *t)
{
    const char *p = lx->p, *end = lx->end;
    bool nl = false;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
            if (*p == '\n')
                nl = true;
            p++;
        }
        if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            const char *e = memchr(p, '\n', (size_t)(end - p));
            p = e ? e : end;
            continue;
        }
        break;
    }
    t->nl_before = nl;
    t->at = t->s = p;
    t->len = 0;
    if (p >= end) {
        t->kind = T_EOF;
        lx->p = p;
        return;
    }
    char c = *p;
    const char *q = p + 1;
    switch (c) {
    case '(': t->kind = T_LPAREN; break;
    case ')': t->kind = T_RPAREN; break;
    case '[': t->kind = T_LBRACKET; break;
    case ']': t->kind = T_RBRACKET; break;
    case '{':
        if (q + 1 < end && q[0] == '-' && q[1] == '#') {
            t->kind = T_FILE_METADATA_BEGIN;
            q += 2;
        } else {
            t->kind = T_LBRACE;
        }
        break;
    case '}': t->kind = T_RBRACE; break;
    case '<': t->kind = T_LESS; break;
    case '>': t->kind = T_GREATER; break;
    case ',': t->kind = T_COMMA; break;
    case '=': t->kind = T_EQUAL; break;
    case '+': t->kind = T_PLUS; break;
    case '*': t->kind = T_STAR; break;
    case '?': t->kind = T_QUESTION; break;
    case ':':
        if (q < end && *q == ':') {
            t->kind = T_DOUBLE_COLON;
            q++;
        } else {
            t->kind = T_COLON;
        }
        break;
    case '-':
        if (q < end && *q == '>') {
            t->kind = T_ARROW;
            q++;
        } else {
            t->kind = T_MINUS;
        }
        break;
    case '"': {
        const char *close = scan_string(p, end);
        if (!close) {
            lex_error(lx, t, p, "unterminated string");
            lx->p = end;
            return;
        }
        t->kind = T_STRING;
        t->s = p + 1;
        t->len = (uint32_t)(close - p - 1);
        lx->p = close + 1;
        return;
    }
    case '%':
    case '^':
        while (q < end && is_suffix_char(*q))
            q++;
        if (q == p + 1) {
            lex_error(lx, t, p, c == '%' ? "expected a value name after '%'" : "expected a block name after '^'");
            lx->p = q;
            return;
        }
        t->kind = c == '%' ? T_PERCENT : T_CARET;
        t->s = p + 1;
        t->len = (uint32_t)(q - p - 1);
        lx->p = q;
        return;
    case '@':
        if (q < end && *q == '"') {
            const char *close = scan_string(q, end);
            if (!close) {
                lex_error(lx, t, q, "unterminated string");
                lx->p = end;
                return;
            }
            t->kind = T_AT;
            t->s = q; /* keep the quote: the parser unescapes */
            t->len = (uint32_t)(close + 1 - q);
            lx->p = close + 1;
            return;
        }
        while (q < end && is_suffix_char(*q))
            q++;
        if (q == p + 1) {
            lex_error(lx, t, p, "expected a symbol name after '@'");
            lx->p = q;
            return;
        }
        t->kind = T_AT;
        t->s = p + 1;
        t->len = (uint32_t)(q - p - 1);
        lx->p = q;
        return;
    case '#':
        if (q < end && *q == '-' && q + 1 < end && q[1] == '}') {
            t->kind = T_FILE_METADATA_END;
            q += 2;
            break;
        }
        /* fallthrough */
    case '!':
        while (q < end && is_suffix_char(*q))
            q++;
        if (q == p + 1) {
            lex_error(lx, t, p, c == '#' ? "expected an attribute name after '#'" : "expected a type name after '!'");
            lx->p = q;
            return;
        }
        t->kind = c == '#' ? T_HASH : T_BANG;
        t->s = p + 1;
        t->len = (uint32_t)(q - p - 1);
        lx->p = q;
        return;
    default:
        if (is_digit(c)) {
            if (c == '0' && q < end && (*q == 'x' || *q == 'X') && q + 1 < end &&
                ((q[1] >= '0' && q[1] <= '9') || (q[1] >= 'a' && q[1] <= 'f') || (q[1] >= 'A' && q[1] <= 'F'))) {
                q++;
                while (q < end && ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F')))
                    q++;
                t->kind = T_INT;
                break;
            }
            while (q < end && is_digit(*q))
                q++;
            t->kind = T_INT;
            if (q < end && *q == '.') {
                q++;
                while (q < end && is_digit(*q))
                    q++;
                t->kind = T_FLOAT;
                if (q < end && (*q == 'e' || *q == 'E')) {
                    const char *r = q + 1;
                    if (r < end && (*r == '+' || *r == '-'))
                        r++;
                    if (r < end && is_digit(*r)) {
                        while (r < end && is_digit(*r))
                            r++;
                        q = r;
                    }
                }
            }
            break;
        }
        if (is_letter(c) || c == '_') {
            while (q < end && is_ident_char(*q))
                q++;
            t->kind = T_IDENT;
            break;
        }
        if ((unsigned char)c >= 0x80)
            lex_error(lx, t, p, ir__utf8_invalid(p, (size_t)(end - p)) == p ? "invalid UTF-8 byte"
                                                                           : "unexpected character");
        else
            lex_error(lx, t, p, "unexpected character");
        lx->p = p + 1;
        return;
    }
    t->len = (uint32_t)(q - p);
    lx->p = q;
}
