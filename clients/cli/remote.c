/*
 * remote.c - reaching autopartd from the CLI: the options naming the
 * daemon, connections, calls, and failures said in the CLI's voice.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "remote.h"
#include "search.h"

int cli_remote_option(const char *cmd, cli_remote *r, int ch, const char *arg)
{
    switch (ch) {
    case CLI_O_SERVER:
        if (!arg[0] || !strchr(arg, ':'))
            return cli_usage_fail(cmd, "--server wants HOST:PORT, not '%s'", arg);
        r->server = arg;
        return 0;
    case CLI_O_TOKEN_FILE: r->token_file = arg; return 0;
    case CLI_O_TLS_CA: r->tls_ca = arg; return 0;
    case CLI_O_TLS_NAME: r->tls_name = arg; return 0;
    case CLI_O_TIMEOUT: {
        char *end;
        errno = 0;
        double t = strtod(arg, &end);
        if (!arg[0] || *end || errno || !(t > 0 && t < 1e7))
            return cli_usage_fail(cmd, "--timeout wants a number of seconds above 0, not '%s'", arg);
        r->timeout_s = t;
        return 0;
    }
    default: return -1;
    }
}

void cli_remote_help(FILE *f)
{
    fprintf(f, "  --server HOST:PORT the autopartd to ask\n"
               "  --token-file PATH  send the bearer token in PATH (the daemon's --token-file)\n"
               "  --tls-ca PEM       speak TLS, trusting the certificates in PEM\n"
               "  --tls-name NAME    the name the daemon's certificate carries (default: HOST)\n"
               "  --timeout S        give up after S seconds (default: no limit)\n");
}

void cli_remote_default(cli_remote *r)
{
    if (r->server)
        return;
    const char *env = getenv("AUTOPART_SERVER");
    r->server = env && env[0] ? env : "127.0.0.1:50051";
}

static char *read_one(const char *cmd, const char *opt, const char *path, bool line, int *rc)
{
    char *text;
    size_t len;
    ap_error err;
    if (ap_read_file(path, &text, &len, &err) < 0) {
        *rc = cli_fail(cmd, "%s %s: %s", opt, path, err.msg);
        return NULL;
    }
    if (line) {
        while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
            text[--len] = '\0';
        if (!len || strpbrk(text, "\r\n")) {
            ap_free(text);
            *rc = cli_fail(cmd, "%s %s: the token must be one non-empty line", opt, path);
            return NULL;
        }
    }
    return text;
}

int cli_remote_open(const char *cmd, const cli_remote *r, wire_conn **out)
{
    int rc = CLI_FAIL;
    char *token = NULL, *ca = NULL;
    ap_error err;
    *out = NULL;
    if (r->token_file && !(token = read_one(cmd, "--token-file", r->token_file, true, &rc)))
        return rc;
    if (r->tls_ca && !(ca = read_one(cmd, "--tls-ca", r->tls_ca, false, &rc))) {
        ap_free(token);
        return rc;
    }
    wire_opts o = {.target = r->server, .token = token, .tls_ca_pem = ca, .tls_name = r->tls_name,
                   .timeout_s = r->timeout_s};
    rc = wire_connect(&o, out, &err) < 0 ? cli_fail(cmd, "--server %s: %s", r->server, err.msg) : 0;
    ap_free(token);
    ap_free(ca);
    return rc;
}

/* Whether msg starts with "NAME:" followed by a digit: a position in the
 * text the daemon knows by NAME. */
static bool points_into(const char *msg, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n && !strncmp(msg, name, n) && msg[n] == ':' && msg[n + 1] >= '0' && msg[n + 1] <= '9';
}

int cli_remote_fail(const char *cmd, const cli_remote *r, const wire_status *st, const char *text_name,
                    const char *schedule_name, const char *hints_name)
{
    if (st->code == WIRE_INVALID_ARGUMENT) {
        if (points_into(st->msg, text_name)) {
            fprintf(stderr, "%s\n", st->msg);
            return CLI_FAIL;
        }
        const char *roles[][2] = {{"schedule", schedule_name}, {"hints", hints_name}};
        for (size_t i = 0; i < AP_ARRAY_LEN(roles); i++)
            if (points_into(st->msg, roles[i][0])) {
                fprintf(stderr, "%s%s\n", roles[i][1] ? roles[i][1] : roles[i][0], st->msg + strlen(roles[i][0]));
                return CLI_FAIL;
            }
    }
    if (st->code == WIRE_UNAVAILABLE && strstr(st->msg, "failed to connect"))
        return cli_fail(cmd, "cannot reach autopartd at %s (is it running? autopartd --listen %s --db PATH)",
                        r->server, r->server);
    return cli_fail(cmd, "%s from autopartd at %s: %s", ap_grpc_code_name(st->code), r->server, st->msg);
}

int cli_remote_call(const char *cmd, const cli_remote *r, wire_conn *c, const char *method,
                    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_type, ProtobufCMessage **out,
                    const char *text_name, const char *schedule_name)
{
    size_t len = protobuf_c_message_get_packed_size(req), resp_len;
    uint8_t *buf = ap_malloc(len ? len : 1);
    void *resp;
    wire_status st;
    *out = NULL;
    if (!buf)
        return cli_fail(cmd, "out of memory");
    protobuf_c_message_pack(req, buf);
    int rc = wire_unary(c, method, buf, len, &resp, &resp_len, &st);
    ap_free(buf);
    if (rc < 0)
        return st.code ? cli_remote_fail(cmd, r, &st, text_name, schedule_name, NULL) : cli_fail(cmd, "out of memory");
    *out = protobuf_c_message_unpack(reply_type, NULL, resp_len, resp);
    ap_free(resp);
    if (!*out)
        return cli_fail(cmd, "autopartd at %s sent a reply that is not a %s", r->server, reply_type->name);
    return 0;
}

void cli_format_time(int64_t unix_ms, char *buf, size_t size)
{
    if (unix_ms <= 0) {
        snprintf(buf, size, "-");
        return;
    }
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}

const char *cli_status_name(int status)
{
    static const char *const names[] = {"?", "queued", "running", "done", "failed", "cancelled"};
    return status >= 0 && status <= 5 ? names[status] : "?";
}

const char *cli_kind_name(int kind)
{
    return kind == 1 ? "search" : kind == 2 ? "apply" : "?";
}

void cli_remote_notes(const char *name, const char *report_json)
{
    json_error_t jerr;
    json_t *rj = report_json && report_json[0] ? json_loads(report_json, 0, &jerr) : NULL;
    json_t *notes = rj ? json_object_get(rj, "notes") : NULL;
    for (size_t i = 0; json_is_array(notes) && i < json_array_size(notes); i++) {
        const char *t = json_string_value(json_array_get(notes, i));
        if (t)
            fprintf(stderr, "%s: note: %s\n", name, t);
    }
    json_decref(rj);
}

const char *cli_origin_name(int origin)
{
    return origin == 1 ? "new" : origin == 2 ? "joined" : origin == 3 ? "cache hit" : "?";
}

Autopart__V1__Framework cli_wire_framework(cost_framework f)
{
    return f == COST_FW_EAGER ? AUTOPART__V1__FRAMEWORK__FRAMEWORK_PYTORCH_EAGER
                              : AUTOPART__V1__FRAMEWORK__FRAMEWORK_XLA;
}

json_t *cli_summary_json(const Autopart__V1__SearchSummary *s)
{
    json_t *o = json_object(), *axes = json_array();
    for (size_t i = 0; i < s->n_axes; i++)
        json_array_append_new(axes, json_string(s->axes[i]));
    json_object_set_new(o, "search_id", json_string(s->search_id));
    json_object_set_new(o, "kind", json_string(cli_kind_name(s->kind)));
    json_object_set_new(o, "status", json_string(cli_status_name(s->status)));
    json_object_set_new(o, "key", json_string(s->key));
    json_object_set_new(o, "module_hash", json_string(s->module_hash));
    json_object_set_new(o, "module_name", json_string(s->module_name));
    json_object_set_new(o, "client_label", json_string(s->client_label));
    json_object_set_new(o, "mesh", json_string(s->mesh));
    json_object_set_new(o, "device", json_string(s->device));
    json_object_set_new(o, "axes", axes);
    json_object_set_new(o, "created_unix_ms", json_integer(s->created_unix_ms));
    json_object_set_new(o, "started_unix_ms", json_integer(s->started_unix_ms));
    json_object_set_new(o, "finished_unix_ms", json_integer(s->finished_unix_ms));
    json_object_set_new(o, "episodes", json_integer(s->episodes));
    json_object_set_new(o, "best_runtime_s", json_real(s->best_runtime_s));
    json_object_set_new(o, "best_peak_memory_bytes", json_integer(s->best_peak_memory_bytes));
    json_object_set_new(o, "cache_hits", json_integer((json_int_t)s->cache_hits));
    json_object_set_new(o, "attempts", json_integer(s->attempts));
    json_object_set_new(o, "owner", json_string(s->owner));
    json_object_set_new(o, "error", json_string(s->error));
    return o;
}

int cli_print_json(const char *cmd, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text)
        return cli_fail(cmd, "out of memory writing JSON");
    puts(text);
    ap_free(text);
    return fflush(stdout) == 0 ? CLI_OK : cli_fail(cmd, "cannot write the output");
}

char *cli_cost_text(const cost_report *r, bool verbose)
{
    ap_buf b;
    ap_buf_init(&b);
    (verbose ? cost_report_text_verbose : cost_report_text)(r, &b);
    return b.data && !b.oom ? ap_buf_take(&b, NULL) : (ap_buf_free(&b), NULL);
}

char *cli_explanation_text(const json_t *ex, const char *stored, bool verbose)
{
    ap_buf b;
    ap_buf_init(&b);
    if (search_explanation_text(ex, SEARCH_TEXT_COST_ABOVE | (verbose ? SEARCH_TEXT_VERBOSE : 0), &b) == AP_EINVALID)
        ap_buf_puts(&b, stored ? stored : "");
    return b.data && !b.oom ? ap_buf_take(&b, NULL) : (ap_buf_free(&b), NULL);
}

int cli_wire_target_init(cli_wire_target *t, const char *cmd, char *text, const char *name, ir_format fmt,
                         const char *func_name, const char *mesh_text, const char *device)
{
    ap_error err;
    autopart__v1__mesh__init(&t->wmesh);
    autopart__v1__module__init(&t->mod);
    autopart__v1__device__init(&t->dev);
    if (mesh_text) {
        if (ir_mesh_parse(mesh_text, &t->mesh, &err) < 0)
            return cli_usage_fail(cmd, "--mesh: %s", err.msg);
        for (int i = 0; i < t->mesh.n_axes; i++) {
            autopart__v1__mesh_axis__init(&t->axes[i]);
            t->axes[i].name = t->mesh.names[i];
            t->axes[i].size = t->mesh.sizes[i];
            t->axp[i] = &t->axes[i];
        }
        t->wmesh.axes = t->axp;
        t->wmesh.n_axes = (size_t)t->mesh.n_axes;
    }
    t->mod.text = text;
    t->mod.name = (char *)name;
    t->mod.format = fmt == IR_FMT_HLO         ? AUTOPART__V1__MODULE_FORMAT__MODULE_FORMAT_HLO
                    : fmt == IR_FMT_STABLEHLO ? AUTOPART__V1__MODULE_FORMAT__MODULE_FORMAT_STABLEHLO
                                              : AUTOPART__V1__MODULE_FORMAT__MODULE_FORMAT_AUTO;
    t->mod.func = (char *)(func_name ? func_name : "");
    t->dev.kind_case = AUTOPART__V1__DEVICE__KIND_NAME;
    t->dev.name = (char *)device;
    return 0;
}
