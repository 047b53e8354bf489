/*
 * parse.c - the parsers' entry point: which format a text is in, and the
 * parser of that format.
 */
#include "parse_int.h"

#include <string.h>

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
        if (p < end && p[0] == '#' && (p + 1 == end || p[1] == ' ' || p[1] == '\t' || p[1] == '\n' ||
                                       p[1] == '\r' || p[1] == '#' || p[1] == '!')) {
            /* `# RUN: ...` (lit): HLO only; an MLIR alias is `#name =` */
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

/* Files that hold a module, but not as text of either format, which the
 * parsers would refuse with a puzzling message about their first bytes:
 * MLIR bytecode (jax.export's serialized StableHLO) and XLA's protobuf
 * text (HloModuleProto).  Refused here saying what the file is and what to
 * do; 0 for anything else. */
static int refuse_other_forms(const char *text, size_t len, const char *filename, ap_error *err)
{
    const char *file = filename ? filename : "<input>";
    if (len >= 4 && memcmp(text, "ML\xefR", 4) == 0)
        return ap_error_at(err, AP_EUNSUPPORTED, file, 1, 1,
                           "this is MLIR bytecode (a serialized StableHLO module, as jax.export writes it); autopart "
                           "reads MLIR text: convert it with `stablehlo-translate --deserialize %s`",
                           file);
    const char *p = text, *end = text + len;
    int line = 1;
    for (;;) { /* blank lines and `#` comments, which protobuf text allows */
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
            line += *p++ == '\n';
        if (p < end && *p == '#') {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            p = nl ? nl : end;
            continue;
        }
        break;
    }
    const char *w = p;
    while (p < end && ((*p >= 'a' && *p <= 'z') || *p == '_' || (p > w && *p >= '0' && *p <= '9')))
        p++;
    size_t wl = (size_t)(p - w);
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\t'))
        q++;
    /* `name: "jit_f"` / `hlo_module {`: no module text starts so (MLIR
     * starts with an op or an alias, HLO text with HloModule, ENTRY or a
     * computation `name {` whose name protobuf text would not use) */
    bool field = wl > 0 && q < end && *q == ':' && !(q + 1 < end && q[1] == ':');
    bool message = q < end && *q == '{' &&
                   ((wl == 10 && memcmp(w, "hlo_module", 10) == 0) || (wl == 12 && memcmp(w, "computations", 12) == 0));
    if (field || message)
        return ap_error_at(err, AP_EUNSUPPORTED, file, line, 1,
                           "this is XLA's protobuf text format (an HloModuleProto, `%.*s%s ...`), not HLO or "
                           "StableHLO text; print the module as HLO text (HloModule::ToString(), or in JAX "
                           "jax.jit(f).lower(...).compile().as_text()) or as StableHLO (.lower(...).as_text())",
                           (int)(wl > 40 ? 40 : wl), w, field ? ":" : " {");
    return 0;
}

int ir_parse(const char *text, size_t len, const char *filename, ir_format fmt, ir_module **out,
             ap_error *err)
{
    *out = NULL;
    int rc = refuse_other_forms(text, len, filename, err);
    if (rc < 0)
        return rc;
    if (fmt == IR_FMT_AUTO)
        fmt = ir_detect_format(text, len);
    if (fmt == IR_FMT_HLO)
        return ir_parse_hlo(text, len, filename, out, err);
    return ir_parse_mlir(text, len, filename, out, err);
}
