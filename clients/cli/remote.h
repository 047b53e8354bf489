/*
 * remote.h - what the subcommands that talk to autopartd share: the
 * options that name the daemon and how to reach it, and one call with the
 * CLI's voice for failures.  The commands that only talk to the daemon
 * (list, show, cancel, stats) are declared here too.
 */
#ifndef CLI_REMOTE_H
#define CLI_REMOTE_H

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

#include "autopart/v1/partitioner.pb-c.h"
#include "cost.h"
#include "ir.h"
#include "parse.h"
#include "wire.h"

int cli_list(int argc, char **argv);
int cli_show(int argc, char **argv);
int cli_cancel(int argc, char **argv);
int cli_stats(int argc, char **argv);
int cli_gc(int argc, char **argv);

typedef struct cli_remote {
    const char *server;     /* host:port; NULL: not given */
    const char *token_file;
    const char *tls_ca;     /* PEM file of the roots to trust: TLS */
    const char *tls_name;   /* the name the certificate must carry */
    double timeout_s;       /* 0: none */
} cli_remote;

/* getopt_long entries of the options above, to put in a command's table. */
enum { CLI_O_SERVER = 1000, CLI_O_TOKEN_FILE, CLI_O_TLS_CA, CLI_O_TLS_NAME, CLI_O_TIMEOUT };
#define CLI_REMOTE_OPTIONS                                        \
    {"server", required_argument, NULL, CLI_O_SERVER},            \
    {"token-file", required_argument, NULL, CLI_O_TOKEN_FILE},    \
    {"tls-ca", required_argument, NULL, CLI_O_TLS_CA},            \
    {"tls-name", required_argument, NULL, CLI_O_TLS_NAME},        \
    {"timeout", required_argument, NULL, CLI_O_TIMEOUT}

/* Takes option ch if it is one of the above: 0 taken, CLI_USAGE (after
 * saying why) for a bad value, -1 not one of them. */
int cli_remote_option(const char *cmd, cli_remote *r, int ch, const char *arg);
/* The help lines of the options above. */
void cli_remote_help(FILE *f);
/* The daemon of commands that need one: --server, else $AUTOPART_SERVER,
 * else 127.0.0.1:50051. */
void cli_remote_default(cli_remote *r);

/* Opens a connection (reading the token and CA files).  Returns 0, or the
 * exit status after saying why. */
int cli_remote_open(const char *cmd, const cli_remote *r, wire_conn **out);
/* Says why a call failed: `NAME:LINE:COL: error: ...` as the daemon wrote
 * it when it points into a text the user sent (module, schedule or hints,
 * which the daemon calls `text_name`, `schedule` and `hints`;
 * `schedule_name` and `hints_name`, NULL for none, are what the user calls
 * the last two), else `autopart CMD: error: CODE from SERVER: MESSAGE`.
 * Returns CLI_FAIL. */
int cli_remote_fail(const char *cmd, const cli_remote *r, const wire_status *st, const char *text_name,
                    const char *schedule_name, const char *hints_name);
/* A unary call: packs req, unpacks the reply into *out (free with
 * protobuf_c_message_free_unpacked).  Returns 0, or CLI_FAIL after saying
 * why (through cli_remote_fail). */
int cli_remote_call(const char *cmd, const cli_remote *r, wire_conn *c, const char *method,
                    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_type, ProtobufCMessage **out,
                    const char *text_name, const char *schedule_name);

/* "2024-05-01 12:03:04" (local time) of unix milliseconds; "-" for 0. */
void cli_format_time(int64_t unix_ms, char *buf, size_t size);
/* Names of the wire's enums: "done", "search", "cache hit". */
const char *cli_status_name(int status);
const char *cli_kind_name(int kind);
const char *cli_origin_name(int origin);
/* Prints the notes an answer's report carries (report_json's "notes": the
 * %N inlining note `autopart apply` prints itself) to stderr as
 * "NAME: note: ...", as the local commands print them. */
void cli_remote_notes(const char *name, const char *report_json);

/* What a request says of its module, mesh and device, in wire form.  Its
 * strings point into the caller's text and into itself: keep it in place
 * (a local variable) while the request is sent. */
typedef struct cli_wire_target {
    ir_mesh mesh;
    Autopart__V1__Mesh wmesh;
    Autopart__V1__MeshAxis axes[IR_MAX_AXES], *axp[IR_MAX_AXES];
    Autopart__V1__Module mod;
    Autopart__V1__Device dev;
} cli_wire_target;
/* Fills t; mesh_text NULL sends no mesh (the module's sdy.mesh is read by
 * the daemon).  A bad mesh is a usage error of `cmd` (returns its exit
 * status, else 0). */
int cli_wire_target_init(cli_wire_target *t, const char *cmd, char *text, const char *name, ir_format fmt,
                         const char *func_name, const char *mesh_text, const char *device);

/* `autopart search` through the daemon: the command line's request. */
typedef struct cli_search_request {
    const char *path;
    ir_format fmt;
    const char *func_name, *mesh_text, *axes_text, *device;
    int64_t devices;                  /* > 0: instead of a mesh, the search chooses one */
    const char *axes_names;           /* with devices: the axes' names, or NULL */
    const char *manual, *manual_name; /* schedule text, and what the user calls it */
    bool import, json, verbose;
    double memory_limit;              /* bytes; 0 the device's; < 0 none */
    double memory_margin;             /* share of the limit kept free */
    int64_t episodes, patience;
    double time_limit_s, overlap;
    cost_framework framework;         /* how memory is counted */
    int threads, batch;
    uint64_t seed;
    const char *hints, *hints_name;   /* decision groups, and what the user calls them */
} cli_search_request;
int cli_search_remote(const cli_remote *remote, const cli_search_request *a);

/* The wire's Framework for the cost model's. */
Autopart__V1__Framework cli_wire_framework(cost_framework f);
/* A search's summary as JSON (the wire's field names). New reference. */
json_t *cli_summary_json(const Autopart__V1__SearchSummary *s);
/* cost_report_text (verbose: cost_report_text_verbose) as a heap string
 * (free); NULL when out of memory. */
char *cli_cost_text(const cost_report *r, bool verbose);
/* A search's explanation for people, printed after the cost estimate:
 * search_explanation_text of `ex` (the answer's JSON), or `stored` (the
 * text the answer carries) when ex is of an older form.  A heap string
 * (free); NULL when out of memory. */
char *cli_explanation_text(const json_t *ex, const char *stored, bool verbose);
/* Prints JSON, indented; returns the exit status. */
int cli_print_json(const char *cmd, json_t *j);

#endif
