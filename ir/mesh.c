/*
 * mesh.c - device meshes: ordered named axes with sizes, read from and
 * written as text ("batch=4,model=2").  Partition states, SPMD programs
 * (their autopart.mesh attribute) and the interpreter all speak of devices
 * through a mesh.
 */
#include "ir_int.h"

#include <stdlib.h>

#define MAX_AXIS_SIZE (1 << 20)
#define MAX_DEVICES (1 << 20)

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* mesh -> ['{'] axis (',' axis)* ['}']
 * axis -> NAME ('=' | ':') SIZE
 * A separator must be followed by another axis: "batch=4," is an error, so
 * a typo never silently drops an axis. */
int ir_mesh_parse(const char *text, ir_mesh *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = skip_spaces(text);
    bool braced = *p == '{';
    if (braced)
        p = skip_spaces(p + 1);
    for (;;) {
        const char *name = p;
        while (*p && *p != '=' && *p != ':' && *p != ',' && *p != ' ' && *p != '}')
            p++;
        size_t len = (size_t)(p - name);
        p = skip_spaces(p);
        if (len == 0 || (*p != '=' && *p != ':')) {
            if (len == 0 && out->n_axes == 0 && (*p == '\0' || *p == '}'))
                return ap_error_set(err, AP_EINVALID, "mesh '%s' has no axes (expected e.g. batch=4,model=2)", text);
            return ap_error_set(err, AP_EINVALID, "mesh '%s': expected AXIS=SIZE at column %d", text,
                                (int)(name - text) + 1);
        }
        if (len >= sizeof out->names[0])
            return ap_error_set(err, AP_EINVALID, "mesh '%s': axis name '%.*s' is too long", text, (int)len, name);
        p = skip_spaces(p + 1);
        char *end;
        long long size = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : (end = (char *)p, 0);
        if (end == p || size < 1)
            return ap_error_set(err, AP_EINVALID, "mesh '%s': axis '%.*s' needs a positive size", text, (int)len, name);
        if (size > MAX_AXIS_SIZE)
            return ap_error_set(err, AP_EINVALID, "mesh '%s': axis '%.*s' is larger than %d", text, (int)len, name,
                                MAX_AXIS_SIZE);
        if (out->n_axes == IR_MAX_AXES)
            return ap_error_set(err, AP_EINVALID, "mesh '%s': at most %d axes", text, IR_MAX_AXES);
        if (ir_mesh_axis(out, name, len) >= 0)
            return ap_error_set(err, AP_EINVALID, "mesh '%s': axis '%.*s' is given twice", text, (int)len, name);
        memcpy(out->names[out->n_axes], name, len);
        out->names[out->n_axes][len] = '\0';
        out->sizes[out->n_axes++] = size;
        p = skip_spaces(end);
        if (*p != ',')
            break;
        p = skip_spaces(p + 1);
    }
    if (braced && *p == '}')
        p = skip_spaces(p + 1);
    if (*p)
        return ap_error_set(err, AP_EINVALID, "mesh '%s': unexpected '%c' at column %d (expected AXIS=SIZE,...)", text,
                            *p, (int)(p - text) + 1);
    if (ir_mesh_devices(out) > MAX_DEVICES)
        return ap_error_set(err, AP_EINVALID, "mesh '%s' has more than %d devices", text, MAX_DEVICES);
    return 0;
}

int ir_mesh_axis(const ir_mesh *m, const char *name, size_t len)
{
    for (int i = 0; i < m->n_axes; i++)
        if (strlen(m->names[i]) == len && memcmp(m->names[i], name, len) == 0)
            return i;
    return -1;
}

int64_t ir_mesh_devices(const ir_mesh *m)
{
    int64_t n = 1;
    for (int i = 0; i < m->n_axes; i++)
        n *= m->sizes[i];
    return n;
}

void ir_mesh_format(const ir_mesh *m, ap_buf *b)
{
    for (int i = 0; i < m->n_axes; i++)
        ap_buf_printf(b, i ? ",%s=%lld" : "%s=%lld", m->names[i], (long long)m->sizes[i]);
}
