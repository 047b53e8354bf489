/*
 * fuzz_roundtrip.h - the check both parser fuzz targets make: any input
 * gives a module or an error that says what is wrong; a module prints as
 * StableHLO text that parses (as StableHLO) to an equal module, and
 * printing that module gives the same text.  Aborts on a violation, which
 * libFuzzer reports as a finding.
 */
#ifndef FUZZ_ROUNDTRIP_H
#define FUZZ_ROUNDTRIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "parse.h"

static inline int fuzz_roundtrip(ir_format fmt, const unsigned char *data, size_t size, const char *name)
{
    ir_module *m = NULL, *m2 = NULL;
    ap_error err;
    if (ir_parse((const char *)data, size, name, fmt, &m, &err) < 0) {
        if (err.code == 0 || err.msg[0] == '\0')
            abort();
        return 0;
    }
    ap_buf a, b;
    ap_buf_init(&a);
    ap_buf_init(&b);
    if (ir_print(m, &a, NULL) < 0)
        abort();
    if (ir_parse(a.data, a.len, "printed.mlir", IR_FMT_STABLEHLO, &m2, &err) < 0) {
        fprintf(stderr, "printed module does not parse: %s:%d:%d %s\n%s\n", err.file, err.line, err.col, err.msg, a.data);
        abort();
    }
    char why[512];
    if (!ir_module_equal(m, m2, why, sizeof why)) {
        fprintf(stderr, "round trip differs: %s\n%s\n", why, a.data);
        abort();
    }
    if (ir_print(m2, &b, NULL) < 0 || a.len != b.len || memcmp(a.data, b.data, a.len) != 0) {
        fprintf(stderr, "printing is not a fixed point\n%s\n---\n%s\n", a.data, b.data);
        abort();
    }
    ap_buf_free(&a);
    ap_buf_free(&b);
    ir_module_free(m);
    ir_module_free(m2);
    return 0;
}

#endif
