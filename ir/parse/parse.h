/*
 * parse.h - the text parsers: StableHLO (MLIR text, pretty and generic
 * forms, other dialects kept opaque) and XLA HLO text, into the IR of
 * ir/ir.h.  The IR core knows nothing of them; what a parser builds it
 * builds through the core's builder.
 */
#ifndef PARSE_H
#define PARSE_H

#include "ir.h"

typedef enum ir_format {
    IR_FMT_AUTO,      /* detect from the content */
    IR_FMT_STABLEHLO, /* MLIR text */
    IR_FMT_HLO        /* XLA HLO text */
} ir_format;

/* Guesses the format of text: HLO when, after comments, it starts with
 * `HloModule` or as HLO text without that header does (`ENTRY`, or a
 * computation and its first instruction); StableHLO otherwise. */
ir_format ir_detect_format(const char *text, size_t len);

/* Parses text (need not be NUL-terminated) into a new module.  `filename`
 * names the input in error messages ("FILE:LINE:COL: error: ...").
 * On success *out owns a module (ir_module_free); on failure *out is NULL,
 * err is filled and a negative AP_E* code is returned.  The module is
 * verified (ir_verify) before it is returned. */
int ir_parse(const char *text, size_t len, const char *filename, ir_format fmt, ir_module **out,
             ap_error *err);

#endif /* PARSE_H */
