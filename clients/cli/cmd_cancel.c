/*
 * cmd_cancel.c - `autopart cancel ID`: asks autopartd to cancel a queued or
 * running search (the daemon running it may be another one sharing the
 * store: it stops within a few seconds).
 */
#include <string.h>

#include "cli.h"
#include "remote.h"

#define CANCEL_SYNOPSIS "autopart cancel ID [options]"

static void cancel_usage(FILE *f)
{
    fprintf(f, "usage: " CANCEL_SYNOPSIS "\n\nCancels a queued or running search.\n\n");
    cli_remote_help(f);
    fprintf(f, "  (default server: $AUTOPART_SERVER, else 127.0.0.1:50051)\n"
               "  -h, --help         this help\n");
}

int cli_cancel(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, CLI_REMOTE_OPTIONS, {NULL, 0, NULL, 0}};
    cli_remote remote = {0};
    int ch, rc;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (ch == 'h') {
            cancel_usage(stdout);
            return CLI_OK;
        }
        if ((rc = cli_remote_option("cancel", &remote, ch, optarg)) < 0)
            return cli_bad_option("cancel", ch, argv);
        if (rc)
            return rc;
    }
    if (optind != argc - 1) {
        cli_usage_fail("cancel", optind < argc ? "expected one ID" : "expected a search ID");
        return cli_usage_hint("cancel", CANCEL_SYNOPSIS);
    }
    cli_remote_default(&remote);
    wire_conn *conn;
    if ((rc = cli_remote_open("cancel", &remote, &conn)) != 0)
        return rc;
    Autopart__V1__CancelSearchRequest req = AUTOPART__V1__CANCEL_SEARCH_REQUEST__INIT;
    Autopart__V1__CancelSearchResponse *resp;
    req.search_id = argv[optind];
    rc = cli_remote_call("cancel", &remote, conn, "/autopart.v1.Partitioner/CancelSearch", &req.base,
                         &autopart__v1__cancel_search_response__descriptor, (ProtobufCMessage **)&resp, NULL, NULL);
    wire_close(conn);
    if (rc)
        return rc;
    int status = resp->status;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    if (status == AUTOPART__V1__SEARCH_STATUS__CANCELLED) {
        printf("search %s: cancelled\n", argv[optind]);
        return CLI_OK;
    }
    if (status == AUTOPART__V1__SEARCH_STATUS__QUEUED || status == AUTOPART__V1__SEARCH_STATUS__RUNNING) {
        printf("search %s: cancellation asked; the daemon running it stops it shortly\n", argv[optind]);
        return CLI_OK;
    }
    return cli_fail("cancel", "search %s had already ended: %s", argv[optind], cli_status_name(status));
}
