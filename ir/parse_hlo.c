/* parse_hlo.c - placeholder until the HLO parser lands (being written). */
#include "ir_int.h"

int ir_parse_hlo(const char *text, size_t len, const char *filename, ir_module **out, ap_error *err)
{
    (void)text;
    (void)len;
    (void)filename;
    *out = NULL;
    return ap_error_set(err, AP_EUNSUPPORTED, "HLO text is not supported yet");
}
