/*
 * work.c - what autopartd's worker threads do with a request: prepare it
 * (read the wire message, parse and validate the module, mesh, device and
 * schedule, compute the key of the canonical request) and run it (apply
 * the schedule, lower, estimate, and pack the answer).  Nothing here
 * touches the daemon's loop state: a task reads and writes its job's
 * `work` only.
 *
 * The engine runs on the canonical text of the module (parsed, printed,
 * parsed again), not on the text as sent: positions in an answer (the ops
 * that blocked propagation) then depend only on the key, so an answer
 * served from the store to a differently formatted copy of a module is
 * still right.  Parse errors name positions in the text as sent.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "key.h"
#include "search.h"
#include "srv.h"

/* Whether this build has the search engine (search/search.h). */
bool srv_search_available(void)
{
    return true;
}

static void work_fail(srv_work *w, rpc_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void work_fail(srv_work *w, rpc_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->code = code;
}

/* The status for an engine error: bad input unless it is about resources
 * or a bug. */
static rpc_code code_of(int ap_code)
{
    switch (ap_code) {
    case AP_ENOMEM:
    case AP_ELIMIT: return RPC_RESOURCE_EXHAUSTED;
    case AP_EINTERNAL:
    case AP_EIO: return RPC_INTERNAL;
    default: return RPC_INVALID_ARGUMENT;
    }
}

static void work_fail_err(srv_work *w, const char *what, const ap_error *err)
{
    char line[900];
    ap_error_format(err, line, sizeof line);
    /* ap_error_format writes "error: MSG" without a file; the file form
     * "NAME:LINE:COL: error: MSG" is what a user can act on. */
    if (what)
        work_fail(w, code_of(err->code), "%s: %s", what, line);
    else
        work_fail(w, code_of(err->code), "%s", line);
}

void srv_work_release(srv_work *w)
{
    apply_state_free(&w->st);
    ap_free(w->resume);
    w->resume = NULL;
    w->resume_len = 0;
    ap_free(w->result);
    w->result = NULL;
    w->result_len = 0;
    w->prepared = false;
    if (w->req)
        protobuf_c_message_free_unpacked(w->req, NULL);
    w->req = NULL;
}

/* ================================================================ inputs */

/* The mesh of the request; *given false when it names none.  Held to the
 * limits of every mesh (ir_mesh_init). */
static bool mesh_from_wire(srv_work *w, const Autopart__V1__Mesh *m, ir_mesh *out, bool *given)
{
    memset(out, 0, sizeof *out);
    *given = m && m->n_axes > 0;
    if (!*given)
        return true;
    if (m->n_axes > IR_MAX_AXES) {
        work_fail(w, RPC_INVALID_ARGUMENT, "mesh: %zu axes; at most %d", m->n_axes, IR_MAX_AXES);
        return false;
    }
    const char *names[IR_MAX_AXES];
    int64_t sizes[IR_MAX_AXES];
    for (size_t i = 0; i < m->n_axes; i++) {
        names[i] = m->axes[i]->name ? m->axes[i]->name : "";
        sizes[i] = m->axes[i]->size;
    }
    ap_error err;
    if (ir_mesh_init(out, (int)m->n_axes, names, sizes, &err) < 0) {
        work_fail(w, RPC_INVALID_ARGUMENT, "mesh: %s", err.msg);
        return false;
    }
    return true;
}

static bool device_from_wire(srv_work *w, const Autopart__V1__Device *d, cost_device *out)
{
    ap_error err;
    if (!d || d->kind_case == AUTOPART__V1__DEVICE__KIND__NOT_SET ||
        (d->kind_case == AUTOPART__V1__DEVICE__KIND_NAME && !d->name[0])) {
        if (cost_device_lookup("h100", out, &err) < 0) {
            work_fail(w, RPC_INTERNAL, "device: %s", err.msg);
            return false;
        }
        return true;
    }
    if (d->kind_case == AUTOPART__V1__DEVICE__KIND_NAME) {
        if (cost_device_lookup(d->name, out, &err) < 0) {
            work_fail(w, RPC_INVALID_ARGUMENT, "device: %s", err.msg);
            return false;
        }
        return true;
    }
    /* A custom spec: through the JSON reader, which checks every field. */
    const Autopart__V1__DeviceSpec *c = d->custom;
    json_t *j = json_object(), *pf = json_object(), *tiers = json_array();
    json_object_set_new(j, "name", json_string(c->name));
    static const char *const prec[] = {"f32", "bf16", "f16", "f8", "int8", "vector"};
    const double v[] = {c->peak_flops_f32, c->peak_flops_bf16, c->peak_flops_f16,
                        c->peak_flops_f8,  c->peak_flops_int8, c->peak_flops_vector};
    for (int i = 0; i < 6; i++)
        if (i < 2 || v[i] != 0)
            json_object_set_new(pf, prec[i], json_real(v[i]));
    json_object_set_new(j, "peak_flops", pf);
    json_object_set_new(j, "hbm_bytes", json_real(c->hbm_bytes));
    json_object_set_new(j, "hbm_bandwidth", json_real(c->hbm_bandwidth));
    for (size_t i = 0; i < c->n_tiers; i++) {
        json_t *t = json_object();
        json_object_set_new(t, "name", json_string(c->tiers[i]->name));
        json_object_set_new(t, "devices", json_integer(c->tiers[i]->devices));
        json_object_set_new(t, "bandwidth", json_real(c->tiers[i]->bandwidth));
        json_object_set_new(t, "latency", json_real(c->tiers[i]->latency));
        if (c->tiers[i]->allreduce_bandwidth != 0)
            json_object_set_new(t, "allreduce_bandwidth", json_real(c->tiers[i]->allreduce_bandwidth));
        if (c->tiers[i]->torus_dims != 0)
            json_object_set_new(t, "torus_dims", json_integer(c->tiers[i]->torus_dims));
        json_array_append_new(tiers, t);
    }
    json_object_set_new(j, "tiers", tiers);
    /* the efficiencies: unset (0) is the JSON's absent key */
    if (c->matmul_efficiency != 0)
        json_object_set_new(j, "matmul_efficiency", json_real(c->matmul_efficiency));
    if (c->matmul_tile != 0)
        json_object_set_new(j, "matmul_tile", json_integer(c->matmul_tile));
    if (c->hbm_efficiency != 0)
        json_object_set_new(j, "hbm_efficiency", json_real(c->hbm_efficiency));
    if (c->kernel_overhead != 0)
        json_object_set_new(j, "kernel_overhead", json_real(c->kernel_overhead));
    if (c->collective_overhead != 0)
        json_object_set_new(j, "collective_overhead", json_real(c->collective_overhead));
    if (c->source[0])
        json_object_set_new(j, "source", json_string(c->source));
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text) {
        work_fail(w, RPC_INVALID_ARGUMENT, "device.custom: not representable (a name that is not UTF-8?)");
        return false;
    }
    int rc = cost_device_from_json(text, strlen(text), out, &err);
    ap_free(text);
    if (rc < 0) {
        work_fail(w, RPC_INVALID_ARGUMENT, "device.custom: %s", err.msg);
        return false;
    }
    return true;
}

/* Everything of a device that changes an estimate (key.h). */
static void srv_key_hash_device(srv_sha *h, const cost_device *d)
{
    srv_sha_str(h, "device.name", d->name);
    for (int i = 0; i < COST_PREC_COUNT; i++)
        srv_sha_f64(h, "device.peak", d->peak_flops[i]);
    srv_sha_f64(h, "device.hbm_bytes", d->hbm_bytes);
    srv_sha_f64(h, "device.hbm_bandwidth", d->hbm_bandwidth);
    srv_sha_i64(h, "device.tiers", d->n_tiers);
    for (int i = 0; i < d->n_tiers; i++) {
        srv_sha_str(h, "tier.name", d->tiers[i].name);
        srv_sha_i64(h, "tier.devices", d->tiers[i].devices);
        srv_sha_f64(h, "tier.bandwidth", d->tiers[i].bandwidth);
        srv_sha_f64(h, "tier.latency", d->tiers[i].latency);
        srv_sha_f64(h, "tier.allreduce_bandwidth", d->tiers[i].allreduce_bandwidth);
        srv_sha_i64(h, "tier.torus_dims", d->tiers[i].torus_dims);
    }
    srv_sha_f64(h, "device.matmul_efficiency", d->matmul_efficiency);
    srv_sha_i64(h, "device.matmul_tile", d->matmul_tile);
    srv_sha_f64(h, "device.hbm_efficiency", d->hbm_efficiency);
    srv_sha_f64(h, "device.kernel_overhead", d->kernel_overhead);
    srv_sha_f64(h, "device.collective_overhead", d->collective_overhead);
}

/* A search's memory limit, the device's HBM when the request says 0, less
 * its margin: the limit the search aims at (key.h). */
static void srv_key_hash_memory_limit(srv_sha *h, const char *n, const Autopart__V1__SearchRequest *s,
                                      const cost_device *dev)
{
    if (s->no_memory_limit)
        srv_sha_str(h, n, "none");
    else
        srv_sha_f64(h, n, (s->memory_limit_bytes ? (double)s->memory_limit_bytes : dev->hbm_bytes) *
                              (1 - s->memory_margin));
}

/* The mesh axes a search explores, in the order asked (key.h). */
static void srv_key_hash_axes(srv_sha *h, const char *n, const srv_work *w)
{
    for (int i = 0; i < w->n_axes; i++)
        srv_sha_str(h, n, w->st.mesh.names[w->axes[i]]);
}

/* A search that chooses the mesh: its devices and axes names; nothing for
 * the others, whose keys stay as they were (key.h). */
static void srv_key_hash_devices(srv_sha *h, const char *n, const Autopart__V1__SearchRequest *s)
{
    if (!s->devices)
        return;
    srv_sha_i64(h, n, s->devices);
    for (size_t i = 0; i < s->n_axes_names; i++)
        srv_sha_str(h, "axes_name", s->axes_names[i]);
}

static ir_format format_of(Autopart__V1__ModuleFormat f)
{
    return f == AUTOPART__V1__MODULE_FORMAT__MODULE_FORMAT_STABLEHLO ? IR_FMT_STABLEHLO
           : f == AUTOPART__V1__MODULE_FORMAT__MODULE_FORMAT_HLO     ? IR_FMT_HLO
                                                                     : IR_FMT_AUTO;
}

/* The cost model's framework for the wire's (valid.c refuses a value the
 * .proto does not name). */
static cost_framework framework_of(Autopart__V1__Framework f)
{
    return f == AUTOPART__V1__FRAMEWORK__FRAMEWORK_PYTORCH_EAGER ? COST_FW_EAGER : COST_FW_XLA;
}

/* What Apply and Search requests share. */
typedef struct common_req {
    const Autopart__V1__Module *module;
    const Autopart__V1__Mesh *mesh;
    const Autopart__V1__Device *device;
    const char *schedule;
    const char *label;
    bool import;
    double overlap;
    int framework; /* Autopart__V1__Framework, as the wire brings it */
    bool core_view;
    const char *func; /* set by prepare_common: NULL for the entry function */
    /* a search with devices: the mesh the request is opened on (its axes
     * names, or one axis, all of size 1) and its text in listings */
    const ir_mesh *devices_mesh;
    const char *devices_text;
} common_req;

/* The key of a prepared request (w->key): SRV_KEY_FIELDS expanded; s is
 * NULL for Apply. */
static bool compute_key(srv_work *w, const common_req *c, const Autopart__V1__SearchRequest *s)
{
    srv_sha *h = srv_sha_new(s ? "key-search" : "key-apply");
#define HASH_KEY_FIELD(name, apply, search, hash)                                                                     \
    if ((s ? search : apply)[0]) {                                                                                    \
        const char *n = name;                                                                                         \
        (void)n; /* a row whose hash names its fields itself */                                                       \
        hash;                                                                                                         \
    }
    SRV_KEY_FIELDS(HASH_KEY_FIELD)
#undef HASH_KEY_FIELD
    if (srv_sha_end(h, w->key) < 0) {
        work_fail(w, RPC_INTERNAL, "SHA-256 failed");
        return false;
    }
    return true;
}

/* Parses the module, prints it canonically and opens the canonical copy;
 * fills the summary fields and r->func. */
static bool prepare_common(srv_work *w, common_req *r)
{
    ap_error err;
    ap_error_clear(&err);
    const Autopart__V1__Module *mod = r->module;
    if (!mod || !mod->text[0]) {
        work_fail(w, RPC_INVALID_ARGUMENT, "module.text is empty");
        return false;
    }
    if (strlen(r->label) > SRV_MAX_LABEL) {
        work_fail(w, RPC_INVALID_ARGUMENT, "client_label is longer than %d bytes", SRV_MAX_LABEL);
        return false;
    }
    if (!(r->overlap >= 0 && r->overlap <= 1)) {
        work_fail(w, RPC_INVALID_ARGUMENT, "overlap must be a number from 0 to 1, not %g", r->overlap);
        return false;
    }
    const char *name = mod->name[0] ? mod->name : "module";
    if (strlen(name) > 200 || strchr(name, '\n')) {
        work_fail(w, RPC_INVALID_ARGUMENT, "module.name must be one line of at most 200 bytes");
        return false;
    }
    ir_mesh mesh;
    bool mesh_given;
    if (!mesh_from_wire(w, r->mesh, &mesh, &mesh_given) || !device_from_wire(w, r->device, &w->dev))
        return false;
    if (r->devices_mesh) {
        mesh = *r->devices_mesh;
        mesh_given = true;
    }

    ir_module *raw = NULL, *m = NULL;
    size_t len = strlen(mod->text);
    if (ir_parse(mod->text, len, name, format_of(mod->format), &raw, &err) < 0) {
        work_fail_err(w, NULL, &err);
        return false;
    }
    ap_buf canon;
    ap_buf_init(&canon);
    int rc = ir_print(raw, &canon, NULL);
    ir_attr *sym = ir_op_attr(raw->top, "sym_name");
    snprintf(w->module_name, sizeof w->module_name, "%s",
             mod->name[0] ? mod->name : sym && sym->kind == IR_A_STRING ? sym->u.str.s : "module");
    ir_module_free(raw);
    if (rc < 0 || canon.oom) {
        ap_buf_free(&canon);
        work_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory printing the module");
        return false;
    }
    srv_sha *mh = srv_sha_new("module");
    srv_sha_field(mh, "text", canon.data, canon.len);
    if (srv_sha_end(mh, w->module_hash) < 0) {
        ap_buf_free(&canon);
        work_fail(w, RPC_INTERNAL, "SHA-256 failed");
        return false;
    }
    rc = ir_parse(canon.data, canon.len, name, IR_FMT_STABLEHLO, &m, &err);
    ap_buf_free(&canon);
    if (rc < 0) {
        work_fail_err(w, "the canonical print of the module does not parse back (a bug)", &err);
        w->code = RPC_INTERNAL;
        return false;
    }
    const char *func = r->func = mod->func[0] ? mod->func : NULL;
    if ((rc = apply_open_module(m, func, mesh_given ? &mesh : NULL, r->import, &w->st, &err)) < 0) {
        work_fail_err(w, NULL, &err);
        return false;
    }
    /* the note `autopart apply` prints when the schedule names %N of a
     * function with calls: the answer's report carries it ("notes") */
    if (apply_note_schedule(&w->st, r->schedule, func != NULL, &err) < 0) {
        work_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return false;
    }
    ap_buf mb;
    ap_buf_init(&mb);
    ir_mesh_format(&w->st.mesh, &mb);
    snprintf(w->mesh_text, sizeof w->mesh_text, "%s", r->devices_text ? r->devices_text : mb.data ? mb.data : "");
    ap_buf_free(&mb);
    snprintf(w->device_name, sizeof w->device_name, "%s", w->dev.name);
    return true;
}

/* Applies the schedule to a copy of the state to find its errors now;
 * the state stays as opened, for the run. */
static bool check_schedule(srv_work *w, const char *schedule, ir_partition **after)
{
    ap_error err;
    ir_partition *p = NULL;
    *after = NULL;
    if (ir_partition_clone(w->st.p, &p, &err) < 0 || ir_schedule_apply(p, schedule, &err) < 0) {
        ir_partition_free(p);
        work_fail_err(w, NULL, &err);
        return false;
    }
    *after = p;
    return true;
}

static void prepare_apply(srv_work *w)
{
    const Autopart__V1__ApplyRequest *r = (const Autopart__V1__ApplyRequest *)w->req;
    common_req c = {.module = r->module, .mesh = r->mesh, .device = r->device, .schedule = r->schedule,
                    .label = r->client_label, .import = r->import_shardings, .overlap = r->overlap,
                    .framework = (int)r->framework, .core_view = r->want_core_view};
    if (!r->schedule[0] && !r->import_shardings) {
        work_fail(w, RPC_INVALID_ARGUMENT, "schedule is empty (and import_shardings is off): nothing to apply");
        return;
    }
    if (!prepare_common(w, &c))
        return;
    ir_partition *after;
    if (!check_schedule(w, r->schedule, &after))
        return;
    ir_partition_free(after);
    w->axes_text[0] = '\0';
    w->n_axes = 0;
    w->prepared = compute_key(w, &c, NULL);
}

static void prepare_search(srv_work *w)
{
    const Autopart__V1__SearchRequest *r = (const Autopart__V1__SearchRequest *)w->req;
    common_req c = {.module = r->module, .mesh = r->mesh, .device = r->device, .schedule = r->manual_schedule,
                    .label = r->client_label, .import = r->import_shardings, .overlap = r->overlap,
                    .framework = (int)r->framework, .core_view = r->want_core_view};
    if (r->memory_limit_bytes < 0 || (r->no_memory_limit && r->memory_limit_bytes > 0)) {
        work_fail(w, RPC_INVALID_ARGUMENT,
                  r->memory_limit_bytes < 0 ? "memory_limit_bytes is negative"
                                            : "memory_limit_bytes and no_memory_limit are both set");
        return;
    }
    if (!(r->memory_margin >= 0 && r->memory_margin < 1)) {
        work_fail(w, RPC_INVALID_ARGUMENT, "memory_margin must be at least 0 and below 1");
        return;
    }
    if (r->episodes < 0 || r->patience_episodes < 0 || r->threads < 0 || r->batch < 0 || r->batch > 1024 ||
        !(r->time_limit_s >= 0 && r->time_limit_s < 1e9)) {
        work_fail(w, RPC_INVALID_ARGUMENT,
                  "episodes, patience_episodes, threads and time_limit_s must be >= 0, batch from 0 to 1024");
        return;
    }
    /* devices: the search chooses the mesh; the request is checked on one
     * of its axes names (or a placeholder), every size 1 */
    ir_mesh dmesh;
    char dtext[300];
    char names[IR_MAX_AXES * 33] = "";
    if (r->devices) {
        if (r->mesh && r->mesh->n_axes) {
            work_fail(w, RPC_INVALID_ARGUMENT, "devices and mesh are exclusive: with devices the search chooses the mesh");
            return;
        }
        if (r->import_shardings) {
            work_fail(w, RPC_INVALID_ARGUMENT, "import_shardings reads shardings over a mesh: give mesh, not devices");
            return;
        }
        size_t at = 0;
        for (size_t i = 0; i < r->n_axes_names && i < IR_MAX_AXES; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%.32s", i ? "," : "", r->axes_names[i]);
        if (r->n_axes_names > 4) {
            work_fail(w, RPC_INVALID_ARGUMENT, "axes_names: %zu names; at most 4 axes", r->n_axes_names);
            return;
        }
        search_devices sd = {.devices = r->devices, .axes_names = r->n_axes_names ? names : NULL,
                             .manual = r->manual_schedule[0] ? r->manual_schedule : NULL};
        ap_error err;
        if (search_devices_check(&sd, &err) < 0) {
            work_fail(w, RPC_INVALID_ARGUMENT, "%s", err.msg);
            return;
        }
        if (r->n_axes && !r->n_axes_names) {
            work_fail(w, RPC_INVALID_ARGUMENT, "axes with devices need axes_names (the axes are named after the search)");
            return;
        }
        memset(&dmesh, 0, sizeof dmesh);
        dmesh.n_axes = r->n_axes_names ? (int)r->n_axes_names : 1;
        for (int i = 0; i < dmesh.n_axes; i++) {
            snprintf(dmesh.names[i], sizeof dmesh.names[i], "%s", r->n_axes_names ? r->axes_names[i] : "devices");
            dmesh.sizes[i] = 1;
        }
        snprintf(dtext, sizeof dtext, "%lld devices%s%s", (long long)r->devices, names[0] ? " as " : "", names);
        c.devices_mesh = &dmesh;
        c.devices_text = dtext;
    } else if (r->n_axes_names) {
        work_fail(w, RPC_INVALID_ARGUMENT, "axes_names go with devices");
        return;
    }
    if (!prepare_common(w, &c))
        return;
    const ir_mesh *mesh = &w->st.mesh;
    size_t at = 0;
    w->axes_text[0] = '\0';
    /* The axes searched: those named, or every axis of the mesh. */
    w->n_axes = 0;
    for (size_t i = 0; i < (r->n_axes ? r->n_axes : (size_t)mesh->n_axes); i++) {
        const char *name = r->n_axes ? r->axes[i] : mesh->names[i];
        int ax = ir_mesh_axis(mesh, name, strlen(name));
        if (ax < 0) {
            work_fail(w, RPC_INVALID_ARGUMENT, "axes: '%.40s' is not an axis of the mesh %s", name, w->mesh_text);
            return;
        }
        for (int k = 0; k < w->n_axes; k++)
            if (w->axes[k] == ax) {
                work_fail(w, RPC_INVALID_ARGUMENT, "axes: '%s' appears twice", name);
                return;
            }
        w->axes[w->n_axes++] = ax;
        at += (size_t)snprintf(w->axes_text + at, at < sizeof w->axes_text ? sizeof w->axes_text - at : 0, "%s%s",
                               i ? "," : "", name);
        if (at >= sizeof w->axes_text)
            at = sizeof w->axes_text - 1;
    }
    ir_partition *after;
    if (!check_schedule(w, r->manual_schedule, &after))
        return;
    /* A mesh axis that divides no argument's dims leaves nothing to search
     * (with devices, the search finds which meshes it can use). */
    ir_op *f = ir_pctx_func(w->st.ctx);
    for (int i = 0; i < w->n_axes && !r->devices; i++) {
        int ax = w->axes[i];
        bool any = false;
        for (uint32_t a = 0; a < ir_func_num_args(f) && !any; a++)
            any = ir_first_divisible_dim(after, ir_func_arg(f, a), ax) >= 0;
        if (!any) {
            work_fail(w, RPC_INVALID_ARGUMENT,
                      "axes: no argument of the function has a dimension divisible by '%s' (size %" PRId64
                      ") after the manual tactics: nothing to search on it",
                      mesh->names[ax], mesh->sizes[ax]);
            ir_partition_free(after);
            return;
        }
    }
    ir_partition_free(after);
    /* Hints are read now too, like every other field: a bad one is refused
     * before the search is accepted (and leaves no row). */
    if (r->hints[0]) {
        ap_error err;
        uint32_t axes = 0;
        for (int i = 0; i < w->n_axes; i++)
            axes |= 1u << w->axes[i];
        ap_error_clear(&err);
        if (search_check_hints(w->st.ctx, axes, r->hints, &err) < 0) {
            work_fail_err(w, NULL, &err);
            return;
        }
    }
    w->prepared = compute_key(w, &c, r);
}

void srv_work_prepare(srv_job *job)
{
    srv_work *w = &job->work;
    w->code = RPC_OK;
    w->msg[0] = '\0';
    if (w->kind == STORE_APPLY)
        prepare_apply(w);
    else
        prepare_search(w);
    if (w->code == RPC_OK && w->key_known && memcmp(w->key, w->expect_key, STORE_KEY_BYTES) != 0)
        work_fail(w, RPC_FAILED_PRECONDITION,
                  "the stored request no longer has the key it was stored under (a new version of autopartd)");
    if (w->code != RPC_OK)
        apply_state_free(&w->st);
}

/* ================================================================ answers */

/* A mesh in wire form; its strings point into `in`, which must outlive it. */
typedef struct srv_wire_mesh {
    Autopart__V1__Mesh m;
    Autopart__V1__MeshAxis a[IR_MAX_AXES];
    Autopart__V1__MeshAxis *ap[IR_MAX_AXES];
} srv_wire_mesh;

static void srv_wire_mesh_of(const ir_mesh *in, srv_wire_mesh *out)
{
    autopart__v1__mesh__init(&out->m);
    for (int i = 0; i < in->n_axes; i++) {
        autopart__v1__mesh_axis__init(&out->a[i]);
        out->a[i].name = (char *)in->names[i];
        out->a[i].size = in->sizes[i];
        out->ap[i] = &out->a[i];
    }
    out->m.axes = out->ap;
    out->m.n_axes = (size_t)in->n_axes;
}

typedef struct packer {
    Autopart__V1__PartitionResult res;
    Autopart__V1__CostSummary cost;
    Autopart__V1__Sharding *sh;
    Autopart__V1__Sharding **shp;
    Autopart__V1__PartitionSpec *spec;
    Autopart__V1__DimSharding *dims;
    Autopart__V1__DimSharding **dimp;
    char **axes;
    Autopart__V1__CollectiveCount coll[IR_COLL__COUNT];
    Autopart__V1__CollectiveCount *collp[IR_COLL__COUNT];
} packer;

/* Packs what the state came to into a PartitionResult (heap bytes). */
static bool pack_result(srv_work *w, bool core_view, const Autopart__V1__SearchStats *stats, const char *explanation,
                        const char *explanation_text, const char *result_json)
{
    apply_state *st = &w->st;
    packer pk;
    memset(&pk, 0, sizeof pk);
    autopart__v1__partition_result__init(&pk.res);
    autopart__v1__cost_summary__init(&pk.cost);
    apply_sharding *sh = NULL;
    int n_sh = 0;
    ap_error err;
    char *schedule = apply_schedule_text(st), *report = NULL;
    ap_buf mod, core;
    ap_buf_init(&mod);
    ap_buf_init(&core);
    bool ok = false;
    if (!schedule || apply_shardings(st, &sh, &n_sh, &err) < 0)
        goto out;
    json_t *rj = apply_report_json(st);
    report = rj ? json_dumps(rj, JSON_COMPACT) : NULL;
    json_decref(rj);
    if (!report || ir_print(st->lw.module, &mod, NULL) < 0 || mod.oom)
        goto out;
    if (core_view && (ir_print_loops(st->p, &core) < 0 || core.oom))
        goto out;

    size_t n_dims = 0;
    for (int i = 0; i < n_sh; i++)
        n_dims += (size_t)sh[i].rank;
    pk.sh = ap_calloc((size_t)n_sh + 1, sizeof *pk.sh);
    pk.shp = ap_calloc((size_t)n_sh + 1, sizeof *pk.shp);
    pk.spec = ap_calloc((size_t)n_sh + 1, sizeof *pk.spec);
    pk.dims = ap_calloc(n_dims + 1, sizeof *pk.dims);
    pk.dimp = ap_calloc(n_dims + 1, sizeof *pk.dimp);
    pk.axes = ap_calloc(n_dims * IR_MAX_AXES + (size_t)n_sh * IR_MAX_AXES + 1, sizeof *pk.axes);
    if (!pk.sh || !pk.shp || !pk.spec || !pk.dims || !pk.dimp || !pk.axes)
        goto out;
    size_t di = 0, ai = 0;
    for (int i = 0; i < n_sh; i++) {
        Autopart__V1__Sharding *m = &pk.sh[i];
        autopart__v1__sharding__init(m);
        autopart__v1__partition_spec__init(&pk.spec[i]);
        m->kind = sh[i].result ? AUTOPART__V1__SHARDING__KIND__RESULT : AUTOPART__V1__SHARDING__KIND__ARGUMENT;
        m->index = sh[i].index;
        m->name = sh[i].name;
        m->type = sh[i].type;
        m->spec_text = sh[i].spec;
        m->spec = &pk.spec[i];
        pk.spec[i].dims = &pk.dimp[di];
        pk.spec[i].n_dims = (size_t)sh[i].rank;
        for (int d = 0; d < sh[i].rank; d++, di++) {
            autopart__v1__dim_sharding__init(&pk.dims[di]);
            pk.dimp[di] = &pk.dims[di];
            pk.dims[di].axes = &pk.axes[ai];
            pk.dims[di].n_axes = (size_t)sh[i].n_axes[d];
            for (int k = 0; k < sh[i].n_axes[d]; k++)
                pk.axes[ai++] = st->mesh.names[sh[i].axes[d][k]];
        }
        pk.spec[i].partial_axes = &pk.axes[ai];
        pk.spec[i].n_partial_axes = (size_t)sh[i].n_partial;
        for (int k = 0; k < sh[i].n_partial; k++)
            pk.axes[ai++] = st->mesh.names[sh[i].partial[k]];
        pk.shp[i] = m;
    }
    srv_wire_mesh wmesh;
    srv_wire_mesh_of(&st->mesh, &wmesh);
    pk.res.mesh = &wmesh.m;
    pk.res.schedule = schedule;
    pk.res.shardings = pk.shp;
    pk.res.n_shardings = (size_t)n_sh;
    pk.res.module = mod.data ? mod.data : (char *)"";
    pk.res.core_view = core.data ? core.data : (char *)"";
    pk.res.report_json = report;
    if (st->costed) {
        pk.cost.device = st->cost.device;
        pk.cost.runtime_s = st->cost.runtime_s;
        pk.cost.compute_s = st->cost.compute_s;
        pk.cost.comm_s = st->cost.comm_s;
        pk.cost.peak_memory_bytes = st->cost.peak_memory_bytes;
        pk.cost.hbm_bytes = st->cost.hbm_bytes;
        pk.cost.fits = st->cost.fits;
        pk.cost.no_memory_limit = st->cost.memory_limit_bytes < 0;
        pk.cost.memory_limit_bytes = pk.cost.no_memory_limit ? 0 : st->cost.memory_limit_bytes;
        pk.cost.flops_per_device = st->cost.flops_per_device;
        pk.res.cost = &pk.cost;
    }
    for (int k = 0; k < IR_COLL__COUNT; k++) {
        autopart__v1__collective_count__init(&pk.coll[k]);
        pk.coll[k].kind = (char *)ir_coll_name((ir_coll_kind)k);
        pk.coll[k].count = st->lw.count[k];
        pk.coll[k].bytes = st->lw.bytes[k];
        pk.collp[k] = &pk.coll[k];
    }
    pk.res.collectives = pk.collp;
    pk.res.n_collectives = IR_COLL__COUNT;
    pk.res.search = (Autopart__V1__SearchStats *)stats;
    if (explanation)
        pk.res.explanation_json = (char *)explanation;
    if (explanation_text)
        pk.res.explanation_text = (char *)explanation_text;
    if (result_json)
        pk.res.result_json = (char *)result_json;
    w->result_len = autopart__v1__partition_result__get_packed_size(&pk.res);
    w->result = ap_malloc(w->result_len ? w->result_len : 1);
    if (!w->result)
        goto out;
    autopart__v1__partition_result__pack(&pk.res, w->result);
    w->summary.best_runtime_s = st->costed ? st->cost.runtime_s : 0;
    w->summary.best_peak_memory = st->costed ? st->cost.peak_memory_bytes : 0;
    ok = true;
out:
    if (!ok)
        work_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory packing the answer");
    ap_free(pk.sh);
    ap_free(pk.shp);
    ap_free(pk.spec);
    ap_free(pk.dims);
    ap_free(pk.dimp);
    ap_free(pk.axes);
    apply_shardings_free(sh, n_sh);
    ap_free(report);
    ap_free(schedule);
    ap_buf_free(&mod);
    ap_buf_free(&core);
    return ok;
}

/* After each tactic: stop when the job was cancelled (or the daemon is
 * stopping), else cost the tactic as apply.h does. */
typedef struct cancellable {
    apply_costing costing;
    atomic_int *cancel;
} cancellable;

static int tactic_or_stop(void *ctx, ir_partition *p, const char *tactic, size_t len, ap_error *err)
{
    cancellable *c = ctx;
    if (atomic_load(c->cancel) != CANCEL_NONE)
        return ap_error_set(err, AP_ECONFLICT, "cancelled");
    return apply_after_tactic(&c->costing, p, tactic, len, err);
}

static void run_apply(srv_work *w, atomic_int *cancel)
{
    const Autopart__V1__ApplyRequest *r = (const Autopart__V1__ApplyRequest *)w->req;
    ap_error err;
    cost_options copts = {.overlap = r->overlap, .framework = framework_of(r->framework)};
    cancellable c = {{&w->st, &w->dev, &copts}, cancel};
    if (ir_schedule_apply_cb(w->st.p, r->schedule, tactic_or_stop, &c, &err) < 0 ||
        apply_lower(&w->st, &w->dev, &copts, &err) < 0) {
        if (atomic_load(cancel) != CANCEL_NONE)
            work_fail(w, RPC_CANCELLED, "cancelled");
        else
            work_fail_err(w, NULL, &err);
        return;
    }
    pack_result(w, r->want_core_view, NULL, NULL, NULL, NULL);
}

/* ================================================================ search */

/* The engine's progress callback, on the worker: keep the snapshot for the
 * loop (which sends it to the callers and checkpoints it) and say whether
 * to stop. */
static int on_progress(void *ctx, const search_progress *p)
{
    srv_job *job = ctx;
    char *sched = p->best_schedule ? ap_strdup(p->best_schedule) : NULL;
    uv_mutex_lock(&job->pmu);
    job->prog.episodes = p->episodes;
    job->prog.best_runtime_s = p->best_runtime_s;
    job->prog.best_peak_memory = p->best_peak_bytes;
    job->prog_eps = p->episodes_per_s;
    job->prog_elapsed = p->elapsed_s;
    job->prog_start = p->start_runtime_s;
    job->prog_tree = (int64_t)p->tree_nodes;
    job->prog_fits = p->best_fits;
    if (sched) {
        ap_free(job->prog_schedule);
        job->prog_schedule = sched;
    }
    /* The checkpoint for the loop to write: every SRV_CKPT_S, less often
     * as it grows (its whole size is written each time), and at the end
     * (a search stopped for a shutdown or because nobody waits for it). */
    double every = SRV_CKPT_S + (double)p->checkpoint_len / SRV_CKPT_BYTES_PER_S;
    if (p->checkpoint && (p->final || p->elapsed_s - job->ckpt_copied_s >= every)) {
        void *copy = ap_malloc(p->checkpoint_len ? p->checkpoint_len : 1);
        if (copy) {
            memcpy(copy, p->checkpoint, p->checkpoint_len);
            ap_free(job->ckpt);
            job->ckpt = copy;
            job->ckpt_len = p->checkpoint_len;
            job->ckpt_copied_s = p->elapsed_s;
        }
    }
    uv_mutex_unlock(&job->pmu);
    if (!atomic_exchange(&job->prog_posted, true)) /* handed to the loop once at a time */
        srv_complete(job->srv, &job->progress_task);
    return atomic_load(&job->cancel) != CANCEL_NONE;
}

static void run_search(srv_job *job)
{
    srv_work *w = &job->work;
    const Autopart__V1__SearchRequest *r = (const Autopart__V1__SearchRequest *)w->req;
    ap_error err;
    search_result res;
    memset(&res, 0, sizeof res);
    ap_error_clear(&err);
    if (!r->devices && r->manual_schedule[0] && ir_schedule_apply(w->st.p, r->manual_schedule, &err) < 0) {
        work_fail_err(w, NULL, &err); /* checked when prepared: cannot happen */
        return;
    }
    search_options o;
    search_options_init(&o);
    for (int i = 0; i < w->n_axes; i++)
        o.axes |= 1u << w->axes[i];
    o.device = w->dev;
    o.cost.overlap = r->overlap;
    o.cost.framework = framework_of(r->framework);
    o.memory_limit = r->no_memory_limit ? -1 : (double)r->memory_limit_bytes;
    o.memory_margin = r->memory_margin;
    o.seed = r->seed;
    o.max_episodes = r->episodes;
    o.time_limit_s = r->time_limit_s;
    o.patience = r->patience_episodes;
    o.threads = w->threads > 0 ? w->threads : 1;
    o.batch = r->batch;
    o.hints = r->hints[0] ? r->hints : NULL;
    o.progress = on_progress;
    o.progress_ctx = job;
    o.resume = w->resume;
    o.resume_len = w->resume_len;
    /* The daemon's ceiling (--max-search-s), over all of a search's runs
     * (a resumed search's clock goes on from its checkpoint). */
    double ceiling = job->srv->opt.max_search_s;
    bool capped = ceiling > 0 && (o.time_limit_s == 0 || o.time_limit_s > ceiling);
    if (capped)
        o.time_limit_s = ceiling;
    job->ckpt_copied_s = 0;
    int rc;
    if (r->devices) {
        /* the axes searched are bits over the names, as over a mesh */
        char names[IR_MAX_AXES * 33] = "";
        size_t at = 0;
        for (size_t i = 0; i < r->n_axes_names && i < IR_MAX_AXES; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%.32s", i ? "," : "", r->axes_names[i]);
        if (!r->n_axes_names)
            o.axes = 0;
        search_devices sd = {.devices = r->devices, .axes_names = r->n_axes_names ? names : NULL,
                             .manual = r->manual_schedule[0] ? r->manual_schedule : NULL};
        rc = search_run_devices(w->st.m, ir_pctx_func(w->st.ctx), &sd, &o, &res, &err);
    } else {
        rc = search_run(w->st.p, &o, &res, &err);
    }
    if (atomic_load(&job->cancel) != CANCEL_NONE) {
        search_result_free(&res);
        work_fail(w, RPC_CANCELLED, "cancelled");
        return;
    }
    if (rc < 0) {
        if (!strcmp(err.file, "hints"))
            work_fail_err(w, NULL, &err);
        else
            work_fail_err(w, "search", &err);
        search_result_free(&res);
        return;
    }
    char *expl = res.explanation ? json_dumps(res.explanation, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_t *rj = search_result_json(&res);
    char *rtext = rj ? json_dumps(rj, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(rj);
    /* The best state becomes the state of the answer, with the lowering
     * and report the search made of it (cost_state_estimate, as Apply's),
     * so both answers read alike. */
    apply_take_lowered(&w->st, res.ctx, res.best, &res.lowered, &res.report);
    res.best = NULL;
    res.ctx = NULL;
    Autopart__V1__SearchStats st = AUTOPART__V1__SEARCH_STATS__INIT;
    st.episodes = res.episodes;
    st.best_episode = res.best_episode;
    st.episodes_per_s = res.episodes_per_s;
    st.wall_s = res.wall_s;
    st.decisions_before = res.decisions_before;
    st.decisions_after = res.decisions_after;
    st.units = res.units;
    st.memory_limit_met = res.fits;
    st.none_fits = res.none_fits;
    st.stopped_by = (char *)(res.stopped_by ? res.stopped_by : "");
    if (capped && res.stopped_by && !strcmp(res.stopped_by, "time"))
        st.stopped_by = (char *)"max_search_s";
    st.resumed_episodes = res.replayed;
    st.start_runtime_s = res.start.runtime_s;
    st.tree_nodes = (int64_t)res.tree_nodes;
    /* with devices: the meshes tried */
    Autopart__V1__MeshTried *mt = ap_calloc((size_t)res.n_meshes + 1, sizeof *mt);
    Autopart__V1__MeshTried **mtp = ap_calloc((size_t)res.n_meshes + 1, sizeof *mtp);
    srv_wire_mesh *wm = ap_calloc((size_t)res.n_meshes + 1, sizeof *wm);
    if (!mt || !mtp || !wm) {
        ap_free(mt);
        ap_free(mtp);
        ap_free(wm);
        ap_free(expl);
        ap_free(rtext);
        search_result_free(&res);
        work_fail(w, RPC_RESOURCE_EXHAUSTED, "out of memory packing the answer");
        return;
    }
    for (int i = 0; i < res.n_meshes; i++) {
        autopart__v1__mesh_tried__init(&mt[i]);
        srv_wire_mesh_of(&res.meshes[i].mesh, &wm[i]);
        mt[i].mesh = &wm[i].m;
        mt[i].runtime_s = res.meshes[i].runtime_s;
        mt[i].peak_memory_bytes = res.meshes[i].peak_bytes;
        mt[i].fits = res.meshes[i].fits;
        mt[i].episodes = res.meshes[i].episodes;
        mt[i].chosen = res.meshes[i].chosen;
        mtp[i] = &mt[i];
    }
    st.meshes = mtp;
    st.n_meshes = (size_t)res.n_meshes;
    if (pack_result(w, r->want_core_view, &st, expl, res.explanation_text, rtext)) {
        w->summary.episodes = res.episodes;
        w->replayed = res.replayed;
        /* the schedule text of the answer is the search's, manual tactics
         * included (apply_schedule_text gives the same actions) */
    }
    ap_free(expl);
    ap_free(rtext);
    ap_free(mt);
    ap_free(mtp);
    ap_free(wm);
    search_result_free(&res);
}

void srv_work_run(srv *s, srv_job *job)
{
    srv_work *w = &job->work;
    if (s->opt.test_stall_s > 0 && w->kind == STORE_SEARCH) {
        struct timespec ts = {(time_t)s->opt.test_stall_s,
                              (long)((s->opt.test_stall_s - (double)(time_t)s->opt.test_stall_s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    w->code = RPC_OK;
    w->msg[0] = '\0';
    ap_free(w->result);
    w->result = NULL;
    memset(&w->summary, 0, sizeof w->summary);
    if (!w->prepared) {
        work_fail(w, RPC_INTERNAL, "run before prepare (a bug)");
        return;
    }
    if (w->kind == STORE_APPLY)
        run_apply(w, &job->cancel);
    else
        run_search(job);
    apply_state_free(&w->st);
    w->prepared = false;
}

/* ================================================================ records */

void srv_row_summary(const store_row *row, Autopart__V1__SearchSummary *out, char *key_hex, char *hash_hex,
                     char *id_text, char **axes, int max_axes, char *axes_buf)
{
    autopart__v1__search_summary__init(out);
    snprintf(id_text, 24, "%" PRId64, row->id);
    store_hex(row->key, STORE_KEY_BYTES, key_hex);
    store_hex(row->module_hash, STORE_KEY_BYTES, hash_hex);
    out->search_id = id_text;
    out->kind = (Autopart__V1__RecordKind)row->kind;
    out->status = (Autopart__V1__SearchStatus)row->status;
    out->key = key_hex;
    out->module_hash = hash_hex;
    out->module_name = (char *)row->module_name;
    out->client_label = (char *)row->client_label;
    out->mesh = (char *)row->mesh;
    out->device = (char *)row->device;
    snprintf(axes_buf, sizeof row->axes, "%s", row->axes);
    int n = 0;
    for (char *p = axes_buf; *p && n < max_axes;) {
        axes[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma)
            break;
        *comma = '\0';
        p = comma + 1;
    }
    out->axes = axes;
    out->n_axes = (size_t)n;
    out->created_unix_ms = row->created_us / 1000;
    out->started_unix_ms = row->started_us / 1000;
    out->finished_unix_ms = row->finished_us / 1000;
    out->episodes = row->episodes;
    out->best_runtime_s = row->best_runtime_s;
    out->best_peak_memory_bytes = row->best_peak_memory;
    out->cache_hits = row->cache_hits;
    out->error = (char *)row->error;
    out->attempts = row->attempts;
    out->owner = (char *)row->owner;
}
