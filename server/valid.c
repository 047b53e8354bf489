/*
 * valid.c - what protobuf-c lets through and autopartd must not: a check of
 * a request's wire bytes against its message's descriptor, before it is
 * unpacked.  Every string field must be UTF-8 without NUL (protobuf-c keeps
 * neither rule: a NUL cuts the string short without a word, so "1\0junk"
 * reads as search 1 and "h100\0junk" as h100, and invalid UTF-8 stored in a
 * label makes every later answer holding it unreadable to conforming
 * clients), and every enum field one of its enum's values (proto3 enums
 * are open; ours are not).
 *
 * The walk follows the wire format: a field it does not know is skipped,
 * and bytes that do not parse are left for the unpacker to refuse.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "srv.h"

/* The first byte of s[0..n) that is not part of well-formed UTF-8 (no
 * overlong forms, no surrogates, nothing above U+10FFFF), or a NUL; n when
 * every byte is fine. */
static size_t bad_utf8(const uint8_t *s, size_t n, bool *nul)
{
    size_t i = 0;
    *nul = false;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (!c) {
                *nul = true;
                return i;
            }
            i++;
            continue;
        }
        size_t len;
        uint8_t lo = 0x80, hi = 0xbf; /* the range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0)
                lo = 0xa0; /* overlong */
            else if (c == 0xed)
                hi = 0x9f; /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0)
                lo = 0x90; /* overlong */
            else if (c == 0xf4)
                hi = 0x8f; /* above U+10FFFF */
        } else {
            return i;
        }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
        i += len;
    }
    return n;
}

static bool varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *i < len; shift += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

typedef struct walk {
    char path[256];
    char *msg;
    size_t size;
} walk;

static bool fail(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(walk *w, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(w->msg, w->size, "%s: %s", w->path, what);
    return false;
}

static bool enum_ok(walk *w, const ProtobufCFieldDescriptor *f, uint64_t v)
{
    const ProtobufCEnumDescriptor *e = f->descriptor;
    if (v <= INT32_MAX && protobuf_c_enum_descriptor_get_value(e, (int)v))
        return true;
    return fail(w, "%lld is not a value of %s", (long long)(int64_t)v, e->name);
}

/* Walks one message; false (with w->msg) at the first bad field. */
static bool walk_message(walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth)
{
    size_t i = 0, at = strlen(w->path);
    unsigned index[64] = {0}; /* repeated fields' element counts, by field order */
    if (depth > 32)
        return fail(w, "messages nested too deep");
    while (i < len) {
        uint64_t tag, v;
        if (!varint(p, len, &i, &tag))
            return true; /* malformed: the unpacker says so */
        unsigned wt = (unsigned)(tag & 7);
        const ProtobufCFieldDescriptor *f =
            tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3)) : NULL;
        size_t fi = f ? (size_t)(f - d->fields) : 0;
        if (f) {
            if (f->label == PROTOBUF_C_LABEL_REPEATED && fi < 64)
                snprintf(w->path + at, sizeof w->path - at, "%s%s[%u]", at ? "." : "", f->name, index[fi]++);
            else
                snprintf(w->path + at, sizeof w->path - at, "%s%s", at ? "." : "", f->name);
        }
        switch (wt) {
        case PROTOBUF_C_WIRE_TYPE_VARINT:
            if (!varint(p, len, &i, &v))
                return true;
            if (f && f->type == PROTOBUF_C_TYPE_ENUM && !enum_ok(w, f, v))
                return false;
            break;
        case PROTOBUF_C_WIRE_TYPE_64BIT: i += 8; break;
        case PROTOBUF_C_WIRE_TYPE_32BIT: i += 4; break;
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
            if (!varint(p, len, &i, &v) || v > len - i)
                return true;
            const uint8_t *b = p + i;
            i += (size_t)v;
            if (!f)
                break;
            if (f->type == PROTOBUF_C_TYPE_STRING) {
                bool nul;
                size_t bad = bad_utf8(b, (size_t)v, &nul);
                if (bad < v)
                    return nul ? fail(w, "holds a NUL byte (at byte %zu)", bad)
                               : fail(w, "is not valid UTF-8 (at byte %zu)", bad);
            } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (!walk_message(w, f->descriptor, b, (size_t)v, depth + 1))
                    return false;
            } else if (f->type == PROTOBUF_C_TYPE_ENUM) { /* packed */
                for (size_t k = 0; k < v;) {
                    uint64_t e;
                    if (!varint(b, (size_t)v, &k, &e))
                        return true;
                    if (!enum_ok(w, f, e))
                        return false;
                }
            }
            break;
        }
        default: return true; /* groups, or not a tag at all */
        }
        w->path[at] = '\0';
    }
    return true;
}

bool srv_check_wire(const ProtobufCMessageDescriptor *d, const uint8_t *bytes, size_t len, char *msg, size_t size)
{
    walk w = {.msg = msg, .size = size};
    return walk_message(&w, d, bytes, len, 0);
}
