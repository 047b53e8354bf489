/*
 * main.c - autopartd's command line: options, help, and the start of the
 * daemon (daemon.c).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: autopartd --db PATH [options]\n"
            "\n"
            "Serves automatic partitioning of ML programs over gRPC (autopart.v1.Partitioner and\n"
            "grpc.health.v1.Health).  Every answer is kept in the store at --db, which several\n"
            "daemons share (an SQLite file: the daemons of one host; PostgreSQL: a fleet on many\n"
            "hosts): an identical request is answered from it at once, a request being worked on\n"
            "is joined, and work interrupted by a crash is taken up by another daemon.\n"
            "\n"
            "  --listen ADDR            host:port (default 127.0.0.1:50051; port 0: any free port,\n"
            "                           printed on stdout).  An address other than loopback needs\n"
            "                           TLS or --insecure.\n"
            "  --db PATH|URL            the store: an SQLite file (created when absent), or a\n"
            "                           PostgreSQL database, postgresql://USER@HOST[:PORT]/DB or libpq's\n"
            "                           'host=... dbname=...' (TLS and passwords as libpq takes them:\n"
            "                           sslmode=..., PGPASSWORD, ~/.pgpass; a password is never printed)\n"
            "  --node-name NAME         this daemon's host in the store's rows (default: the host name);\n"
            "                           give daemons that share a host name but not a process table\n"
            "                           (containers) each their own\n"
            "  --lease-s S              a daemon's hold on the rows it runs, renewed every S/5 seconds:\n"
            "                           another daemon takes the rows of one that died (kill -9, a lost\n"
            "                           host) within S seconds (default 10; the same node: at once)\n"
            "  --max-concurrent N       searches running at once (default 2)\n"
            "  --threads-per-search T   threads of one search (default 2); a request may ask fewer\n"
            "  --apply-threads N        threads reading requests and running Apply (default 2)\n"
            "  --max-queue N            requests waiting per queue before RESOURCE_EXHAUSTED (default 64)\n"
            "  --max-queued-mb M        and the bytes of the requests waiting, in all (default 1024)\n"
            "  --max-message-mb M       largest request message in MiB, compressed or not (default 64)\n"
            "  --rpc-memory-mb M        memory gRPC may hold for requests still arriving, MiB (default\n"
            "                           4 x --max-message-mb, at least 64): past it, it resets streams\n"
            "                           (ENHANCE_YOUR_CALM) until it holds less\n"
            "  --cache-mb M             answers kept packed in memory for repeated requests, MiB\n"
            "                           (default 64; 0: every hit reads the store)\n"
            "  --token-file PATH        every call must carry `authorization: Bearer TOKEN` (the file's\n"
            "                           one line)\n"
            "  --tls-cert PEM --tls-key PEM   serve TLS with this certificate chain and key\n"
            "  --tls-client-ca PEM      and require client certificates signed by this CA\n"
            "  --insecure               allow a non-loopback address without TLS\n"
            "  --http ADDR              also serve the dashboard (a web page and a JSON API over the\n"
            "                           store) on host:port, e.g. 127.0.0.1:8080 (port 0: any free\n"
            "                           port, printed on stdout); the same rules as --listen: loopback,\n"
            "                           or TLS (--tls-cert/--tls-key: HTTPS), or --insecure; with\n"
            "                           --token-file, /api/ wants the bearer token too\n"
            "  --http-root DIR          the page's files (default: ../share/autopart/web beside the binary)\n"
            "  --grace S                seconds calls may go on after SIGTERM (default 5)\n"
            "  --max-search-s S         the longest a search may run, over all its runs: it is then\n"
            "                           answered with its best so far (stopped_by max_search_s;\n"
            "                           default 600; 0: no ceiling)\n"
            "  --abandon-after S        a search no client waits for any more (in any daemon sharing\n"
            "                           the store) stops after S seconds, resumable: asking again\n"
            "                           continues it from its checkpoint (default 30)\n"
            "  --keep-days D            retention: searches and Applies that ended and were not asked\n"
            "                           for in D days are deleted (default: kept); never a queued or\n"
            "                           running one, nor one used in the last 5 seconds\n"
            "  --keep-max-mb M          and past M MiB of store (checked every second), the least\n"
            "                           recently used ended rows go first (default: no bound);\n"
            "                           `autopart gc` does the same on demand\n"
            "  --quiet                  no log lines on stderr\n"
            "  -h, --help               this help\n"
            "  --version\n"
            "\n"
            "SIGTERM or SIGINT: stop taking calls, write the running searches' best so far, give\n"
            "their rows back to the store for the next daemon, and exit 0.\n");
}

static bool parse_int(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!s[0] || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "autopartd: error: %s wants a whole number from %ld to %ld, not '%s'\n", opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    ap_malloc_one_arena(); /* a search's memory stays for the next (ap.h) */
    enum { O_LISTEN = 256, O_DB, O_MAXC, O_TPS, O_APPLY, O_QUEUE, O_MSG, O_TOKEN, O_CERT, O_KEY, O_CA, O_INSECURE,
           O_GRACE, O_QUIET, O_VERSION, O_CACHE, O_QUEUED, O_HTTP, O_HTTP_ROOT, O_MAX_SEARCH, O_ABANDON, O_KEEP_DAYS,
           O_KEEP_MB, O_RPC_MEM, O_NODE, O_LEASE };
    static const struct option opts[] = {
        {"listen", required_argument, NULL, O_LISTEN},
        {"db", required_argument, NULL, O_DB},
        {"node-name", required_argument, NULL, O_NODE},
        {"lease-s", required_argument, NULL, O_LEASE},
        {"max-concurrent", required_argument, NULL, O_MAXC},
        {"threads-per-search", required_argument, NULL, O_TPS},
        {"apply-threads", required_argument, NULL, O_APPLY},
        {"max-queue", required_argument, NULL, O_QUEUE},
        {"max-message-mb", required_argument, NULL, O_MSG},
        {"rpc-memory-mb", required_argument, NULL, O_RPC_MEM},
        {"cache-mb", required_argument, NULL, O_CACHE},
        {"max-queued-mb", required_argument, NULL, O_QUEUED},
        {"token-file", required_argument, NULL, O_TOKEN},
        {"tls-cert", required_argument, NULL, O_CERT},
        {"tls-key", required_argument, NULL, O_KEY},
        {"tls-client-ca", required_argument, NULL, O_CA},
        {"insecure", no_argument, NULL, O_INSECURE},
        {"http", required_argument, NULL, O_HTTP},
        {"http-root", required_argument, NULL, O_HTTP_ROOT},
        {"grace", required_argument, NULL, O_GRACE},
        {"max-search-s", required_argument, NULL, O_MAX_SEARCH},
        {"abandon-after", required_argument, NULL, O_ABANDON},
        {"keep-days", required_argument, NULL, O_KEEP_DAYS},
        {"keep-max-mb", required_argument, NULL, O_KEEP_MB},
        {"quiet", no_argument, NULL, O_QUIET},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    srv_options o = {
        .listen = "127.0.0.1:50051",
        .max_concurrent = 2,
        .threads_per_search = 2,
        .apply_threads = 2,
        .max_queue = 64,
        .max_message_bytes = 64 << 20,
        .cache_bytes = 64 << 20,
        .max_queued_bytes = (int64_t)1024 << 20,
        .grace_s = 5,
        .max_search_s = 600,
        .abandon_s = 30,
        .lease_us = SRV_LEASE_US,
    };
    long v;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case O_LISTEN: o.listen = optarg; break;
        case O_DB: o.db_path = optarg; break;
        case O_NODE:
            if (!optarg[0] || strlen(optarg) > 60 || strpbrk(optarg, ": \t\n")) {
                fprintf(stderr, "autopartd: error: --node-name wants a name of 1 to 60 characters without ':' or "
                                "blanks, not '%s'\n",
                        optarg);
                return 2;
            }
            o.node_name = optarg;
            break;
        case O_MAXC:
            if (!parse_int("--max-concurrent", optarg, 1, 256, &v))
                return 2;
            o.max_concurrent = (int)v;
            break;
        case O_TPS:
            if (!parse_int("--threads-per-search", optarg, 1, 256, &v))
                return 2;
            o.threads_per_search = (int)v;
            break;
        case O_APPLY:
            if (!parse_int("--apply-threads", optarg, 1, 256, &v))
                return 2;
            o.apply_threads = (int)v;
            break;
        case O_QUEUE:
            if (!parse_int("--max-queue", optarg, 1, 1000000, &v))
                return 2;
            o.max_queue = (int)v;
            break;
        case O_MSG:
            if (!parse_int("--max-message-mb", optarg, 1, 2047, &v))
                return 2;
            o.max_message_bytes = (int64_t)v << 20;
            break;
        case O_RPC_MEM:
            if (!parse_int("--rpc-memory-mb", optarg, 16, 1 << 20, &v))
                return 2;
            o.rpc_memory_bytes = (int64_t)v << 20;
            break;
        case O_CACHE:
            if (!parse_int("--cache-mb", optarg, 0, 1 << 20, &v))
                return 2;
            o.cache_bytes = (int64_t)v << 20;
            break;
        case O_QUEUED:
            if (!parse_int("--max-queued-mb", optarg, 1, 1 << 20, &v))
                return 2;
            o.max_queued_bytes = (int64_t)v << 20;
            break;
        case O_TOKEN: o.token_file = optarg; break;
        case O_CERT: o.tls_cert = optarg; break;
        case O_KEY: o.tls_key = optarg; break;
        case O_CA: o.tls_client_ca = optarg; break;
        case O_INSECURE: o.insecure = true; break;
        case O_HTTP: o.http = optarg; break;
        case O_HTTP_ROOT: o.http_root = optarg; break;
        case O_LEASE:
            if (!parse_int("--lease-s", optarg, 1, 3600, &v))
                return 2;
            o.lease_us = (int64_t)v * 1000000;
            break;
        case O_GRACE:
            if (!parse_int("--grace", optarg, 0, 3600, &v))
                return 2;
            o.grace_s = (double)v;
            break;
        case O_MAX_SEARCH:
            if (!parse_int("--max-search-s", optarg, 0, 1000000000, &v))
                return 2;
            o.max_search_s = (double)v;
            break;
        case O_ABANDON:
            if (!parse_int("--abandon-after", optarg, 0, 1000000000, &v))
                return 2;
            o.abandon_s = (double)v;
            break;
        case O_KEEP_DAYS:
            if (!parse_int("--keep-days", optarg, 1, 100000, &v))
                return 2;
            o.keep_days = (double)v;
            break;
        case O_KEEP_MB:
            if (!parse_int("--keep-max-mb", optarg, 1, 1 << 30, &v))
                return 2;
            o.keep_max_bytes = (int64_t)v << 20;
            break;
        case O_QUIET: o.quiet = true; break;
        case O_VERSION: printf("%s\n", SRV_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "autopartd: error: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    /* Tests only: runs that do not listen, a slow shutdown (see srv_options). */
    const char *stall = getenv("AUTOPARTD_TEST_STALL_S");
    if (stall && stall[0])
        o.test_stall_s = atof(stall);
    const char *pause = getenv("AUTOPARTD_TEST_CLOSE_PAUSE_S");
    if (pause && pause[0])
        o.test_close_pause_s = atof(pause);
    if (!o.rpc_memory_bytes)
        o.rpc_memory_bytes = o.max_message_bytes < (16 << 20) ? 64 << 20 : 4 * o.max_message_bytes;
    if (o.rpc_memory_bytes < o.max_message_bytes) {
        fprintf(stderr, "autopartd: error: --rpc-memory-mb must be at least --max-message-mb (a message that "
                        "large must fit)\n");
        return 2;
    }
    if (!o.db_path) {
        fprintf(stderr, "autopartd: error: --db PATH is required (the store: an SQLite file, created when absent, "
                        "or a PostgreSQL URL)\n");
        return 2;
    }
    if (!o.tls_cert != !o.tls_key) {
        fprintf(stderr, "autopartd: error: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (o.tls_client_ca && !o.tls_cert) {
        fprintf(stderr, "autopartd: error: --tls-client-ca needs --tls-cert and --tls-key\n");
        return 2;
    }
    return srv_run(&o);
}
