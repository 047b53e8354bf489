/*
 * cmd_gc.c - `autopart gc --db PATH`: retention on a store, on demand (the
 * daemon's --keep-days / --keep-max-mb, run once), and VACUUM.  It opens
 * the store file itself: daemons may go on using it meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "remote.h"
#include "store.h"

#define GC_SYNOPSIS "autopart gc --db PATH (--keep-days D | --keep-max-mb M | --vacuum) [options]"

static void gc_usage(FILE *f)
{
    fprintf(f,
            "usage: " GC_SYNOPSIS "\n\n"
            "Deletes from an autopartd store the searches and Applies that ended (done, failed or\n"
            "cancelled) and were not used lately, least recently used first, with their results,\n"
            "checkpoints and history; never a queued or running one, nor one used in the last\n"
            "minute.  Daemons sharing the store go on meanwhile.\n\n"
            "  --db PATH          the store (autopartd's --db)\n"
            "  --keep-days D      delete what was not made, ended or asked for in D days\n"
            "  --keep-max-mb M    then, while the store holds more than M MiB, the least recently\n"
            "                     used first\n"
            "  --vacuum           then rewrite the file at its live size (holds the store's write\n"
            "                     lock while it runs; converts a store made before autopartd gave\n"
            "                     freed space back by itself)\n"
            "  --json             the counts as JSON\n"
            "  -h, --help         this help\n");
}

static bool number(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!s[0] || *end || errno || !(v >= lo && v <= hi)) {
        cli_usage_fail("gc", "%s wants a number from %g to %g, not '%s'", opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

int cli_gc(int argc, char **argv)
{
    static const struct option opts[] = {{"db", required_argument, NULL, 'd'},
                                         {"keep-days", required_argument, NULL, 'k'},
                                         {"keep-max-mb", required_argument, NULL, 'm'},
                                         {"vacuum", no_argument, NULL, 'v'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *db = NULL;
    double days = 0, mb = 0;
    bool vacuum = false, json = false;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': db = optarg; break;
        case 'k':
            if (!number("--keep-days", optarg, 0.0001, 1e6, &days))
                return cli_usage_hint("gc", GC_SYNOPSIS);
            break;
        case 'm':
            if (!number("--keep-max-mb", optarg, 1, 1e9, &mb))
                return cli_usage_hint("gc", GC_SYNOPSIS);
            break;
        case 'v': vacuum = true; break;
        case 'j': json = true; break;
        case 'h': gc_usage(stdout); return CLI_OK;
        default: return cli_bad_option("gc", ch, argv);
        }
    }
    if (optind != argc) {
        cli_usage_fail("gc", "unexpected argument '%s'", argv[optind]);
        return cli_usage_hint("gc", GC_SYNOPSIS);
    }
    if (!db || (!days && !mb && !vacuum)) {
        cli_usage_fail("gc", !db ? "--db PATH is required" : "say what to delete: --keep-days, --keep-max-mb or --vacuum");
        return cli_usage_hint("gc", GC_SYNOPSIS);
    }
    store *s;
    ap_error err;
    if (store_open(db, "autopart-gc", 10000, &s, &err) < 0)
        return cli_fail("gc", "%s", err.msg);
    int64_t now = ap_now_us();
    store_gc_policy p = {.keep_us = (int64_t)(days * 86400e6), .max_bytes = (int64_t)(mb * 1048576),
                         .protect_us = 60 * 1000000LL};
    store_gc_result r = {0};
    int rc = days || mb ? store_gc(s, &p, now, &r, &err) : 0;
    int64_t after = r.bytes_after;
    if (rc == 0 && vacuum) {
        rc = store_vacuum(s, &err);
        store_counts c;
        if (rc == 0 && (rc = store_counts_get(s, &c, &err)) == 0)
            after = c.db_bytes;
    }
    store_close(s);
    if (rc < 0)
        return cli_fail("gc", "%s", err.msg);
    if (json) {
        json_t *o = json_pack("{s:i,s:I,s:I}", "rows_deleted", r.rows, "bytes_before", (json_int_t)r.bytes_before,
                              "bytes_after", (json_int_t)after);
        return cli_print_json("gc", o);
    }
    printf("%d rows deleted", r.rows);
    if (days || mb)
        printf("; the store's pages in use: %.1f MiB -> %.1f MiB", (double)r.bytes_before / 1048576,
               (double)after / 1048576);
    else
        printf("; the store's file: %.1f MiB", (double)after / 1048576);
    printf("\n");
    return CLI_OK;
}
