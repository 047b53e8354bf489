/*
 * mesh.c - device meshes: ordered named axes with sizes, read from text
 * ("batch=4,model=2", "{x:4, y:6}") or made from names and sizes, and
 * written back.  Every mesh in the project is one of these (a --mesh, a
 * request's, a module's sdy.mesh or autopart.mesh, the partition states',
 * the redistribution's, the interpreter's), held to one set of limits where
 * it is made: a mesh that is accepted can be partitioned and lowered.
 */
#include "ir_int.h"

#include <stdarg.h>
#include <stdio.h>

/* Characters of an axis name written without quotes: anything printable
 * but the mesh's own punctuation. */
static bool bare_char(int c)
{
    return c > ' ' && c < 0x7f && c != '"' && c != '=' && c != ':' && c != ',' && c != '{' && c != '}';
}

static bool name_is_bare(const char *s)
{
    for (; *s; s++)
        if (!bare_char((unsigned char)*s))
            return false;
    return true;
}

static int check_name(const char *name, size_t len, ap_error *err)
{
    if (len == 0)
        return ap_error_set(err, AP_EINVALID, "an axis has an empty name");
    if (len > IR_MESH_NAME_MAX)
        return ap_error_set(err, AP_EINVALID, "axis name '%.*s' has %zu characters; at most %d", (int)len, name, len,
                            IR_MESH_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        if (name[i] == '"' || (unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return ap_error_set(err, AP_EINVALID, "axis name '%.*s' holds a quote or control character", (int)len,
                                name);
    return 0;
}

int ir_mesh_init(ir_mesh *out, int n_axes, const char *const *names, const int64_t *sizes, ap_error *err)
{
    memset(out, 0, sizeof *out);
    if (n_axes < 0 || n_axes > IR_MAX_AXES)
        return ap_error_set(err, AP_EINVALID, "%d axes; a mesh has at most %d", n_axes, IR_MAX_AXES);
    int64_t devices = 1;
    for (int a = 0; a < n_axes; a++) {
        size_t len = strlen(names[a]);
        int rc = check_name(names[a], len, err);
        if (rc)
            return rc;
        for (int b = 0; b < a; b++)
            if (strcmp(names[a], names[b]) == 0)
                return ap_error_set(err, AP_EINVALID, "axis '%s' is given twice", names[a]);
        if (sizes[a] < 1)
            return ap_error_set(err, AP_EINVALID, "axis '%s' has size %lld; sizes are at least 1", names[a],
                                (long long)sizes[a]);
        if (sizes[a] > IR_MESH_MAX_DEVICES)
            return ap_error_set(err, AP_ELIMIT, "axis '%s' has size %lld; a mesh has at most %d devices", names[a],
                                (long long)sizes[a], IR_MESH_MAX_DEVICES);
        if (devices * sizes[a] > IR_MESH_MAX_DEVICES)
            return ap_error_set(err, AP_ELIMIT, "%lld devices; a mesh has at most %d",
                                (long long)(devices * sizes[a]), IR_MESH_MAX_DEVICES);
        devices *= sizes[a];
        memcpy(out->names[a], names[a], len + 1);
        out->sizes[a] = sizes[a];
    }
    out->n_axes = n_axes;
    return 0;
}

/* ------------------------------------------------------------- the text */

typedef ir__scanner scanner;

static int scan_error(scanner *s, const char *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int scan_error(scanner *s, const char *at, int code, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the texts are one line: the column says where */
    ap_error_set(s->err, code, "mesh '%.80s': %s at column %d", s->text, msg, (int)(at - s->text) + 1);
    return code;
}

/* name -> BARE+ | '"' CHAR+ '"'; copies into buf (IR_MESH_NAME_SIZE) */
static int scan_name(scanner *s, char *buf)
{
    ir__skip_space(s);
    const char *start = s->p, *end;
    if (*s->p == '"') {
        start = ++s->p;
        while (*s->p && *s->p != '"')
            s->p++;
        if (!*s->p)
            return scan_error(s, start - 1, AP_ESYNTAX, "unterminated quoted axis name");
        end = s->p++;
    } else {
        while (bare_char((unsigned char)*s->p))
            s->p++;
        end = s->p;
        if (end == start)
            return scan_error(s, start, AP_ESYNTAX, "expected AXIS=SIZE");
    }
    size_t len = (size_t)(end - start);
    ap_error e;
    if (check_name(start, len, &e))
        return scan_error(s, start, AP_EINVALID, "%s", e.msg);
    memcpy(buf, start, len);
    buf[len] = '\0';
    return 0;
}

/* size -> [0-9]+ */
static int scan_size(scanner *s, const char *name, int64_t *out)
{
    ir__skip_space(s);
    const char *start = s->p;
    if (*s->p < '0' || *s->p > '9')
        return scan_error(s, start, AP_ESYNTAX, "axis '%s' needs a positive size", name);
    int64_t v = 0;
    bool cut = false;
    while (*s->p >= '0' && *s->p <= '9') {
        if (v <= IR_MESH_MAX_DEVICES)
            v = v * 10 + (*s->p - '0');
        else
            cut = true;
        s->p++;
    }
    /* past the limit the digits stopped counting: say the size as written */
    if (cut)
        return scan_error(s, start, AP_ELIMIT, "axis '%s' has size %.*s; a mesh has at most %d devices", name,
                          (int)(s->p - start), start, IR_MESH_MAX_DEVICES);
    *out = v;
    return 0;
}

/* mesh -> [ '{' ] axis { ',' axis } [ '}' ]
 * axis -> name ( '=' | ':' ) size
 * A separator must be followed by another axis: "batch=4," is an error, so
 * a typo never silently drops an axis. */
int ir_mesh_parse(const char *text, ir_mesh *out, ap_error *err)
{
    memset(out, 0, sizeof *out);
    scanner s = {text, text, err};
    char names[IR_MAX_AXES][IR_MESH_NAME_SIZE];
    const char *name_ptrs[IR_MAX_AXES];
    int64_t sizes[IR_MAX_AXES];
    int n = 0, rc;
    bool braced = ir__scan_char(&s, '{');
    ir__skip_space(&s);
    if (!*s.p || (braced && *s.p == '}'))
        return ap_error_set(err, AP_EINVALID, "mesh '%.80s' has no axes (expected e.g. batch=4,model=2)", text);
    do {
        if (n == IR_MAX_AXES)
            return scan_error(&s, s.p, AP_EINVALID, "more than %d axes", IR_MAX_AXES);
        if ((rc = scan_name(&s, names[n])))
            return rc;
        if (!ir__scan_char(&s, '=') && !ir__scan_char(&s, ':'))
            return scan_error(&s, s.p, AP_ESYNTAX, "expected '=' after axis '%s'", names[n]);
        if ((rc = scan_size(&s, names[n], &sizes[n])))
            return rc;
        name_ptrs[n] = names[n];
        n++;
    } while (ir__scan_char(&s, ','));
    if (braced && !ir__scan_char(&s, '}'))
        return scan_error(&s, s.p, AP_ESYNTAX, "expected ',' or '}'");
    ir__skip_space(&s);
    if (*s.p)
        return scan_error(&s, s.p, AP_ESYNTAX, "expected ',' between mesh axes");
    ap_error e;
    rc = ir_mesh_init(out, n, name_ptrs, sizes, &e);
    if (rc < 0)
        return ap_error_set(err, rc, "mesh '%.80s': %s", text, e.msg);
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

/* Appends an axis name as the mesh text writes it (quoted when needed). */
static void put_name(ap_buf *b, const char *name)
{
    if (name_is_bare(name) && *name) {
        ap_buf_puts(b, name);
    } else {
        ap_buf_putc(b, '"');
        ap_buf_puts(b, name);
        ap_buf_putc(b, '"');
    }
}

void ir_mesh_format(const ir_mesh *m, ap_buf *b)
{
    for (int i = 0; i < m->n_axes; i++) {
        if (i)
            ap_buf_putc(b, ',');
        put_name(b, m->names[i]);
        ap_buf_printf(b, "=%lld", (long long)m->sizes[i]);
    }
}
