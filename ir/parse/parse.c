/*
 * parse.c - the parsers' entry point: which format a text is in, and the
 * parser of that format.
 */
#include "parse_int.h"

static bool hlo_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

static const char *skip_blank(const char *q, const char *end)
{
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    return q;
}

/* Is an HLO shape at q: `f32[`, `(`, `b(` or `token[`? */
static bool hlo_shape_at(const char *q, const char *end)
{
    if (q < end && *q == '(')
        return true;
    const char *w = q;
    while (q < end && ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
        q++;
    return q > w && q < end && (*q == '[' || (q - w == 1 && *w == 'b' && *q == '('));
}

/* HLO text without its `HloModule` header, as XLA's parser takes it: it
 * starts at `ENTRY`, at the stack frame tables, or at a computation
 * `%name (p: f32[2]) -> f32[2] {` / `name {` whose first instruction is
 * `name = SHAPE opcode(`.  MLIR never starts that way (an op starts with
 * %results, a quoted name or an op name followed by its operands). */
static bool hlo_without_header(const char *q, const char *end)
{
    const char *w = q;
    while (q < end && hlo_name_char(*q))
        q++;
    size_t wl = (size_t)(q - w);
    if ((wl == 5 && memcmp(w, "ENTRY", 5) == 0) || (wl == 9 && memcmp(w, "FileNames", 9) == 0))
        return q == end || *q == ' ' || *q == '\n' || *q == '\t' || *q == '\r' || *q == '%';
    q = w;
    if (q < end && *q == '%')
        q++;
    const char *name = q;
    while (q < end && hlo_name_char(*q))
        q++;
    if (q == name)
        return false;
    q = skip_blank(q, end);
    if (q < end && *q == '(') { /* parameters: `()` or `(name: SHAPE` */
        q = skip_blank(q + 1, end);
        if (q < end && *q == ')')
            return true;
        if (q < end && *q == '%')
            q++;
        const char *pn = q;
        while (q < end && hlo_name_char(*q))
            q++;
        if (q == pn)
            return false;
        q = skip_blank(q, end);
        return q < end && *q == ':' && hlo_shape_at(skip_blank(q + 1, end), end);
    }
    if (q >= end || *q != '{')
        return false;
    /* `name {` then the first instruction */
    q = skip_blank(q + 1, end);
    if ((size_t)(end - q) > 5 && memcmp(q, "ROOT", 4) == 0 && (q[4] == ' ' || q[4] == '\t'))
        q = skip_blank(q + 4, end);
    if (q < end && *q == '%')
        q++;
    const char *in = q;
    while (q < end && hlo_name_char(*q))
        q++;
    if (q == in)
        return false;
    q = skip_blank(q, end);
    return q < end && *q == '=' && hlo_shape_at(skip_blank(q + 1, end), end);
}

ir_format ir_detect_format(const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
            p++;
        if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            p = nl ? nl : end;
            continue;
        }
        if (p + 1 < end && p[0] == '/' && p[1] == '*') { /* HLO only: MLIR has no block comments */
            for (p += 2; p + 1 < end && !(p[0] == '*' && p[1] == '/'); p++)
                ;
            p = p + 1 < end ? p + 2 : end;
            continue;
        }
        break;
    }
    if ((size_t)(end - p) >= 9 && memcmp(p, "HloModule", 9) == 0)
        return IR_FMT_HLO;
    return hlo_without_header(p, end) ? IR_FMT_HLO : IR_FMT_STABLEHLO;
}

int ir_parse(const char *text, size_t len, const char *filename, ir_format fmt, ir_module **out,
             ap_error *err)
{
    if (fmt == IR_FMT_AUTO)
        fmt = ir_detect_format(text, len);
    if (fmt == IR_FMT_HLO)
        return ir_parse_hlo(text, len, filename, out, err);
    return ir_parse_mlir(text, len, filename, out, err);
}
