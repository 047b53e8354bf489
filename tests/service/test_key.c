/*
 * test_key.c - the store key covers every request field that changes an
 * answer (server/key.h).  Walks the protobuf-c descriptors of ApplyRequest
 * and SearchRequest down to their leaf fields and fails on a field that is
 * neither in the key nor on the list of fields that do not change the
 * answer, or on a path of the tables that the .proto does not have; shows
 * on altered descriptors that a forgotten field is caught; and checks
 * through autopartd's own preparation (srv_work_prepare) that changing a
 * keyed field changes the key and changing an ignored one does not.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "srv.h"
#include "testlib.h"

/* ======================================================= the descriptors */

#define MAX_PATHS 256

typedef struct paths {
    char *v[MAX_PATHS];
    int n;
} paths;

static void paths_add(paths *p, const char *s)
{
    ck_assert_int_lt(p->n, MAX_PATHS);
    p->v[p->n++] = strdup(s);
}

static void paths_free(paths *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->v[i]);
    p->n = 0;
}

static bool paths_has(const paths *p, const char *s)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->v[i], s))
            return true;
    return false;
}

/* Every leaf field of d as a dotted path ("device.custom.tiers.latency"):
 * fields of message type are walked into (repeated ones too). */
static void leaves(const ProtobufCMessageDescriptor *d, const char *prefix, int depth, paths *out)
{
    ck_assert_int_lt(depth, 8);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", f->name);
        if (f->type == PROTOBUF_C_TYPE_MESSAGE)
            leaves(f->descriptor, path, depth + 1, out);
        else
            paths_add(out, path);
    }
}

/* Splits the space-separated paths of a table cell into out. */
static void cell_paths(const char *cell, paths *out)
{
    while (*cell) {
        size_t k = strcspn(cell, " ");
        if (k) {
            char one[256];
            snprintf(one, sizeof one, "%.*s", (int)k, cell);
            paths_add(out, one);
        }
        cell += k;
        cell += strspn(cell, " ");
    }
}

/* The paths key.h names for a method: keyed ones and ignored ones. */
static void table_paths(bool search, paths *keyed, paths *ignored)
{
#define KEYED(name, apply, srch, hash) cell_paths(search ? srch : apply, keyed);
    SRV_KEY_FIELDS(KEYED)
#undef KEYED
#define IGNORED(apply, srch, why) cell_paths(search ? srch : apply, ignored);
    SRV_KEY_IGNORED(IGNORED)
#undef IGNORED
}

/* What is wrong between a request's descriptor and key.h's tables, as
 * lines in msg (empty when nothing). */
static void audit(const ProtobufCMessageDescriptor *d, bool search, char *msg, size_t size)
{
    paths all = {0}, keyed = {0}, ignored = {0};
    leaves(d, "", 0, &all);
    table_paths(search, &keyed, &ignored);
    size_t at = 0;
    msg[0] = '\0';
#define SAY(...) at += (size_t)snprintf(msg + at, at < size ? size - at : 0, __VA_ARGS__)
    for (int i = 0; i < all.n; i++) {
        bool k = paths_has(&keyed, all.v[i]), g = paths_has(&ignored, all.v[i]);
        if (!k && !g)
            SAY("%s.%s: neither in the key nor on the list of fields that do not change the answer (key.h)\n",
                d->name, all.v[i]);
        if (k && g)
            SAY("%s.%s: both in the key and on the list of fields that do not change it\n", d->name, all.v[i]);
    }
    for (int i = 0; i < keyed.n; i++)
        if (!paths_has(&all, keyed.v[i]))
            SAY("%s: key.h keys '%s', which the message does not have\n", d->name, keyed.v[i]);
    for (int i = 0; i < ignored.n; i++)
        if (!paths_has(&all, ignored.v[i]))
            SAY("%s: key.h ignores '%s', which the message does not have\n", d->name, ignored.v[i]);
#undef SAY
    paths_free(&all);
    paths_free(&keyed);
    paths_free(&ignored);
}

START_TEST(test_every_field_keyed_or_ignored)
{
    char msg[8192];
    audit(&autopart__v1__apply_request__descriptor, false, msg, sizeof msg);
    ck_assert_msg(!msg[0], "%s", msg);
    audit(&autopart__v1__search_request__descriptor, true, msg, sizeof msg);
    ck_assert_msg(!msg[0], "%s", msg);
}
END_TEST

/* A copy of d with one more field, of type `type` (a message of type sub
 * when sub is not NULL); every array the copy owns is heap. */
static ProtobufCMessageDescriptor *with_field(const ProtobufCMessageDescriptor *d, const char *name,
                                              const ProtobufCMessageDescriptor *sub)
{
    ProtobufCMessageDescriptor *c = malloc(sizeof *c);
    ProtobufCFieldDescriptor *f = calloc(d->n_fields + 1, sizeof *f);
    ck_assert(c && f);
    *c = *d;
    memcpy(f, d->fields, d->n_fields * sizeof *f);
    f[d->n_fields].name = name;
    f[d->n_fields].id = 99;
    f[d->n_fields].label = PROTOBUF_C_LABEL_NONE;
    f[d->n_fields].type = sub ? PROTOBUF_C_TYPE_MESSAGE : PROTOBUF_C_TYPE_INT64;
    f[d->n_fields].descriptor = sub;
    c->fields = f;
    c->n_fields = d->n_fields + 1;
    return c;
}

static void free_copy(ProtobufCMessageDescriptor *c)
{
    free((void *)c->fields);
    free(c);
}

/* The audit on a SearchRequest as it would be with a field added to the
 * .proto and not to key.h: at the top, and inside the mesh. */
START_TEST(test_forgotten_field_is_caught)
{
    char msg[8192];
    ProtobufCMessageDescriptor *top = with_field(&autopart__v1__search_request__descriptor, "new_option", NULL);
    audit(top, true, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "autopart.v1.SearchRequest.new_option: neither in the key"), "%s", msg);
    free_copy(top);

    ProtobufCMessageDescriptor *mesh = with_field(&autopart__v1__mesh__descriptor, "device_order", NULL);
    ProtobufCMessageDescriptor *req = malloc(sizeof *req);
    ProtobufCFieldDescriptor *f = malloc(autopart__v1__apply_request__descriptor.n_fields * sizeof *f);
    ck_assert(req && f);
    *req = autopart__v1__apply_request__descriptor;
    memcpy(f, req->fields, req->n_fields * sizeof *f);
    for (unsigned i = 0; i < req->n_fields; i++)
        if (!strcmp(f[i].name, "mesh"))
            f[i].descriptor = mesh;
    req->fields = f;
    audit(req, false, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "autopart.v1.ApplyRequest.mesh.device_order: neither in the key"), "%s", msg);
    free_copy(req);
    free_copy(mesh);

    /* And the other way: a table path the message lacks (a field renamed). */
    ProtobufCMessageDescriptor *less = malloc(sizeof *less);
    ck_assert(less);
    *less = autopart__v1__apply_request__descriptor;
    ProtobufCFieldDescriptor *g = malloc(less->n_fields * sizeof *g);
    ck_assert(g);
    unsigned n = 0;
    for (unsigned i = 0; i < less->n_fields; i++)
        if (strcmp(less->fields[i].name, "overlap"))
            g[n++] = less->fields[i];
    less->fields = g;
    less->n_fields = n;
    audit(less, false, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "key.h keys 'overlap', which the message does not have"), "%s", msg);
    free_copy(less);
}
END_TEST

/* ============================================ the key autopartd computes */

static char *tiny_text, *other_text;

/* A request as the wire brings it (owned, unpacked), and the key and raw
 * hash autopartd gives it; false with msg when preparing it failed. */
static bool key_of(const ProtobufCMessage *m, bool search, uint8_t key[STORE_KEY_BYTES],
                   uint8_t raw[STORE_KEY_BYTES], char *msg, size_t size)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len + 1);
    ck_assert(buf);
    protobuf_c_message_pack(m, buf);
    srv_job *job = calloc(1, sizeof *job);
    ck_assert(job);
    job->kind = job->work.kind = search ? STORE_SEARCH : STORE_APPLY;
    job->work.req = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
    free(buf);
    ck_assert(job->work.req);
    ck_assert_int_eq(srv_raw_hash(search ? M_SEARCH : M_APPLY, job->work.req, raw), 0);
    srv_work_prepare(job);
    bool ok = job->work.code == RPC_OK && job->work.prepared;
    snprintf(msg, size, "%s", job->work.msg);
    memcpy(key, job->work.key, STORE_KEY_BYTES);
    srv_work_release(&job->work);
    free(job);
    return ok;
}

/* A request of both kinds, fields pointing at static strings or the
 * texts above. */
typedef struct req {
    Autopart__V1__ApplyRequest apply;
    Autopart__V1__SearchRequest search;
    Autopart__V1__Module mod;
    Autopart__V1__Mesh mesh;
    Autopart__V1__MeshAxis ax[2], *axp[2];
    Autopart__V1__Device dev;
    Autopart__V1__DeviceSpec spec;
    Autopart__V1__Tier tier, *tierp[1];
    char *axes[1];
} req;

static void req_init(req *r)
{
    memset(r, 0, sizeof *r);
    autopart__v1__apply_request__init(&r->apply);
    autopart__v1__search_request__init(&r->search);
    autopart__v1__module__init(&r->mod);
    autopart__v1__mesh__init(&r->mesh);
    autopart__v1__device__init(&r->dev);
    r->mod.text = tiny_text;
    r->mod.name = (char *)"tiny.mlir";
    static const char *const names[] = {"batch", "model"};
    for (int i = 0; i < 2; i++) {
        autopart__v1__mesh_axis__init(&r->ax[i]);
        r->ax[i].name = (char *)names[i];
        r->ax[i].size = 2;
        r->axp[i] = &r->ax[i];
    }
    r->mesh.axes = r->axp;
    r->mesh.n_axes = 2;
    r->dev.kind_case = AUTOPART__V1__DEVICE__KIND_NAME;
    r->dev.name = (char *)"tpu_v3";
    r->apply.module = r->search.module = &r->mod;
    r->apply.mesh = r->search.mesh = &r->mesh;
    r->apply.device = r->search.device = &r->dev;
    r->apply.schedule = r->search.manual_schedule = (char *)"tile batch['inputs'] 0 batch; propagate";
    r->search.episodes = 20;
}

/* A custom device: tpu_v3's figures, spelled out. */
static void req_custom_device(req *r)
{
    autopart__v1__device_spec__init(&r->spec);
    autopart__v1__tier__init(&r->tier);
    r->spec.name = (char *)"my_tpu";
    r->spec.peak_flops_f32 = 61.5e12;
    r->spec.peak_flops_bf16 = 123e12;
    r->spec.hbm_bytes = 16e9;
    r->spec.hbm_bandwidth = 900e9;
    r->tier.name = (char *)"ici";
    r->tier.bandwidth = 70e9;
    r->tier.latency = 1e-6;
    r->tierp[0] = &r->tier;
    r->spec.tiers = r->tierp;
    r->spec.n_tiers = 1;
    r->spec.source = (char *)"a data sheet";
    r->dev.kind_case = AUTOPART__V1__DEVICE__KIND_CUSTOM;
    r->dev.custom = &r->spec;
}

/* Changes of a request: each names the key.h row it should change (or
 * NULL when it should change nothing) and which methods it applies to. */
typedef struct change {
    const char *row;
    bool apply, search;
    void (*fn)(req *);
} change;

static void c_text(req *r) { r->mod.text = other_text; }
static void c_func(req *r) { r->mod.func = (char *)"main"; }
static void c_mesh(req *r) { r->ax[1].size = 4; }
static void c_device(req *r) { r->dev.name = (char *)"h100"; }
static void c_custom(req *r) { req_custom_device(r); }
static void c_custom_bw(req *r)
{
    req_custom_device(r);
    r->tier.bandwidth = 71e9;
}
static void c_schedule(req *r)
{
    r->apply.schedule = r->search.manual_schedule = (char *)"tile batch['inputs'] 0 model; propagate";
}
static void c_import(req *r) { r->apply.import_shardings = r->search.import_shardings = true; }
static void c_overlap(req *r) { r->apply.overlap = r->search.overlap = 0.5; }
static void c_framework(req *r)
{
    r->apply.framework = r->search.framework = AUTOPART__V1__FRAMEWORK__FRAMEWORK_PYTORCH_EAGER;
}
static void c_axes(req *r)
{
    r->axes[0] = (char *)"model";
    r->search.axes = r->axes;
    r->search.n_axes = 1;
}
static void c_memory(req *r) { r->search.memory_limit_bytes = 1 << 30; }
static void c_no_memory(req *r) { r->search.no_memory_limit = true; }
static void c_episodes(req *r) { r->search.episodes = 21; }
static void c_time(req *r) { r->search.time_limit_s = 30; }
static void c_patience(req *r) { r->search.patience_episodes = 5; }
static void c_seed(req *r) { r->search.seed = 7; }
static void c_hints(req *r) { r->search.hints = (char *)"split *"; } /* hints that read (they are checked) */
static void c_batch(req *r) { r->search.batch = 4; }
/* the search chooses the mesh of 4 devices, over the axes the manual tactic names */
static void c_devices(req *r)
{
    static char *names[] = {"batch", "model"};
    r->mesh.n_axes = 0;
    r->search.devices = 4;
    r->search.axes_names = names;
    r->search.n_axes_names = 2;
}
static void c_core(req *r) { r->apply.want_core_view = r->search.want_core_view = true; }
static void c_label(req *r) { r->apply.client_label = r->search.client_label = (char *)"someone"; }
static void c_threads(req *r) { r->search.threads = 2; }
static void c_name(req *r) { r->mod.name = (char *)"renamed.mlir"; }
static void c_format(req *r) { r->mod.format = AUTOPART__V1__MODULE_FORMAT__MODULE_FORMAT_STABLEHLO; }
static void c_source(req *r)
{
    req_custom_device(r);
    r->spec.source = (char *)"another sheet";
}

static const change changes[] = {
    {"module", true, true, c_text},
    {"func", true, true, c_func},
    {"mesh", true, true, c_mesh},
    {"device", true, true, c_device},
    {"device", true, true, c_custom},
    {"schedule", true, true, c_schedule},
    {"import", true, true, c_import},
    {"overlap", true, true, c_overlap},
    {"framework", true, true, c_framework},
    {"axis", false, true, c_axes},
    {"memory_limit", false, true, c_memory},
    {"memory_limit", false, true, c_no_memory},
    {"episodes", false, true, c_episodes},
    {"time_limit", false, true, c_time},
    {"patience", false, true, c_patience},
    {"seed", false, true, c_seed},
    {"hints", false, true, c_hints},
    {"batch", false, true, c_batch},
    {"core_view", true, true, c_core},
    {"devices", false, true, c_devices},
    {NULL, true, true, c_label},
    {NULL, false, true, c_threads},
    {NULL, true, true, c_name},
    {NULL, true, true, c_format}, /* the same text: the same canonical module */
};

START_TEST(test_key_follows_the_table)
{
    char msg[1024];
    tiny_text = tl_generate_text("transformer", "tiny", "");
    other_text = tl_generate_text("transformer", "tiny", "layers=3");
    for (int search = 0; search < 2; search++) {
        req base;
        req_init(&base);
        const ProtobufCMessage *bm = search ? &base.search.base : &base.apply.base;
        uint8_t key0[STORE_KEY_BYTES], raw0[STORE_KEY_BYTES], key[STORE_KEY_BYTES], raw[STORE_KEY_BYTES];
        ck_assert_msg(key_of(bm, search, key0, raw0, msg, sizeof msg), "%s", msg);
        for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
            const change *c = &changes[i];
            if (!(search ? c->search : c->apply))
                continue;
            req r;
            req_init(&r);
            c->fn(&r);
            const ProtobufCMessage *m = search ? &r.search.base : &r.apply.base;
            ck_assert_msg(key_of(m, search, key, raw, msg, sizeof msg), "change %zu (%s): %s", i,
                          c->row ? c->row : "ignored", msg);
            if (c->row)
                ck_assert_msg(memcmp(key, key0, STORE_KEY_BYTES), "%s: change %zu of '%s' left the key as it was",
                              search ? "Search" : "Apply", i, c->row);
            else
                ck_assert_msg(!memcmp(key, key0, STORE_KEY_BYTES), "%s: change %zu changed the key",
                              search ? "Search" : "Apply", i);
        }
        /* Fields the raw hash leaves out share one cache entry. */
        req r;
        req_init(&r);
        c_label(&r);
        c_threads(&r);
        ck_assert(key_of(search ? &r.search.base : &r.apply.base, search, key, raw, msg, sizeof msg));
        ck_assert(!memcmp(raw, raw0, STORE_KEY_BYTES));
        /* A custom device: its figures are in the key, its source is not. */
        req_init(&r);
        c_custom(&r);
        uint8_t kc[STORE_KEY_BYTES];
        ck_assert_msg(key_of(search ? &r.search.base : &r.apply.base, search, kc, raw, msg, sizeof msg), "%s", msg);
        req_init(&r);
        c_source(&r);
        ck_assert(key_of(search ? &r.search.base : &r.apply.base, search, key, raw, msg, sizeof msg));
        ck_assert(!memcmp(key, kc, STORE_KEY_BYTES));
        req_init(&r);
        c_custom_bw(&r);
        ck_assert(key_of(search ? &r.search.base : &r.apply.base, search, key, raw, msg, sizeof msg));
        ck_assert(memcmp(key, kc, STORE_KEY_BYTES));
    }
    /* Every row of the key is exercised by a change above. */
#define COVERED(name, apply, srch, hash)                                                                              \
    {                                                                                                                 \
        bool found = false;                                                                                           \
        for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++)                                               \
            found |= changes[i].row && !strcmp(changes[i].row, name);                                                 \
        ck_assert_msg(found, "key.h row '%s' has no change in test_key_follows_the_table", name);                     \
    }
    SRV_KEY_FIELDS(COVERED)
#undef COVERED
    ap_free(tiny_text);
    ap_free(other_text);
}
END_TEST

static Suite *key_suite(void)
{
    Suite *s = suite_create("key");
    TCase *tc = tcase_create("key");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_field_keyed_or_ignored);
    tcase_add_test(tc, test_forgotten_field_is_caught);
    tcase_add_test(tc, test_key_follows_the_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run(key_suite());
}
