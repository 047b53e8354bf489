/*
 * key.c - the hashes autopartd files answers under (SHA-256 through
 * OpenSSL's EVP interface), and packing a stored answer inside a new
 * message without re-encoding it.
 *
 * Two hashes.  The key of a request is the hash of its canonical form: the
 * module as the printer writes it, the mesh, the device's full spec, and
 * every option that changes the answer (key.h; work.c computes it after
 * parsing).  The raw hash is of the request as written, cheap to compute
 * before any parsing; the store maps it to the key once one request with it
 * has been parsed, so asking the same thing again costs a lookup.  Both
 * include SRV_KEY_VERSIONS.  Each field is hashed as its name, a NUL, its
 * length (8 bytes, little endian) and its bytes, so that no two different
 * field sequences give the same stream.  Which fields are in the key, and
 * which are left out of both hashes, is key.h's table.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "key.h"
#include "srv.h"

struct srv_sha {
    EVP_MD_CTX *ctx;
    bool failed;
};

srv_sha *srv_sha_new(const char *domain)
{
    srv_sha *h = ap_calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
        h->failed = true;
    srv_sha_str(h, "domain", domain);
    srv_sha_str(h, "versions", SRV_KEY_VERSIONS);
    return h;
}

void srv_sha_field(srv_sha *h, const char *name, const void *data, size_t len)
{
    if (!h || h->failed)
        return;
    uint8_t n[8];
    for (int i = 0; i < 8; i++)
        n[i] = (uint8_t)((uint64_t)len >> (8 * i));
    if (EVP_DigestUpdate(h->ctx, name, strlen(name) + 1) != 1 || EVP_DigestUpdate(h->ctx, n, 8) != 1 ||
        (len && EVP_DigestUpdate(h->ctx, data, len) != 1))
        h->failed = true;
}

void srv_sha_str(srv_sha *h, const char *name, const char *s)
{
    srv_sha_field(h, name, s ? s : "", s ? strlen(s) : 0);
}

void srv_sha_i64(srv_sha *h, const char *name, int64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    srv_sha_field(h, name, b, 8);
}

void srv_sha_f64(srv_sha *h, const char *name, double v)
{
    uint64_t u;
    if (v == 0)
        v = 0; /* -0.0 and 0.0 ask the same */
    memcpy(&u, &v, 8);
    srv_sha_i64(h, name, (int64_t)u);
}

int srv_sha_end(srv_sha *h, uint8_t out[STORE_KEY_BYTES])
{
    if (!h)
        return -1;
    unsigned n = 0;
    int rc = !h->failed && EVP_DigestFinal_ex(h->ctx, out, &n) == 1 && n == STORE_KEY_BYTES ? 0 : -1;
    EVP_MD_CTX_free(h->ctx);
    ap_free(h);
    return rc;
}

/* A protobuf-c output buffer that feeds the hash: the packed request is
 * hashed as it is written, never stored. */
typedef struct sha_buffer {
    ProtobufCBuffer base;
    srv_sha *h;
} sha_buffer;

static void sha_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    srv_sha *h = ((sha_buffer *)b)->h;
    if (!h->failed && len && EVP_DigestUpdate(h->ctx, data, len) != 1)
        h->failed = true;
}

/* Blanks the top-level field `name` of m (a shallow copy) when it is a
 * plain scalar or string; nested paths and other fields stay, which only
 * makes the raw hash more particular than it need be. */
static void blank_field(ProtobufCMessage *m, const char *name)
{
    if (!name[0] || strchr(name, '.'))
        return;
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (!f || f->label != PROTOBUF_C_LABEL_NONE)
        return;
    char *at = (char *)m + f->offset;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: *(const char **)at = protobuf_c_empty_string; break;
    case PROTOBUF_C_TYPE_BOOL: memset(at, 0, sizeof(protobuf_c_boolean)); break;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM: memset(at, 0, 4); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: memset(at, 0, 8); break;
    default: break;
    }
}

int srv_raw_hash(int method, const ProtobufCMessage *req, uint8_t out[STORE_KEY_BYTES])
{
    /* A shallow copy with the fields that do not change the answer (key.h)
     * blanked: the packed copy is then the request as far as the answer
     * goes.  New fields of the .proto are in the hash without anyone
     * remembering. */
    srv_sha *h = srv_sha_new(method == M_SEARCH ? "raw-search" : "raw-apply");
    if (!h)
        return -1;
    sha_buffer b = {{sha_append}, h};
    union {
        Autopart__V1__SearchRequest search;
        Autopart__V1__ApplyRequest apply;
    } copy;
    ProtobufCMessage *m = &copy.search.base;
    memcpy(&copy, req, method == M_SEARCH ? sizeof copy.search : sizeof copy.apply);
#define BLANK_IGNORED(apply, search, why) blank_field(m, method == M_SEARCH ? search : apply);
    SRV_KEY_IGNORED(BLANK_IGNORED)
#undef BLANK_IGNORED
    protobuf_c_message_pack_to_buffer(m, &b.base);
    return srv_sha_end(h, out);
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

uint8_t *srv_pack_with(const ProtobufCMessage *m, uint32_t field, const void *sub, size_t sub_len, size_t *len)
{
    size_t head = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = ap_malloc(head + 20 + sub_len);
    if (!buf)
        return NULL;
    size_t n = protobuf_c_message_pack(m, buf);
    n += put_varint(buf + n, (uint64_t)field << 3 | 2); /* length-delimited */
    n += put_varint(buf + n, sub_len);
    if (sub_len)
        memcpy(buf + n, sub, sub_len);
    *len = n + sub_len;
    return buf;
}
