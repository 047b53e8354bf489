/*
 * store.c - bench_store: the store at the dashboard's scale.  Fills a
 * temporary store with N searches (default 200,000: labels, statuses,
 * modules, creation times spread over a month, a progress history for some)
 * and prints how long listing pages take, newest first: the first page, a
 * page deep in the list (by its token), and pages filtered by status,
 * client label, module hash and time range; and a lookup by key.
 *
 * The dashboard's orders (step time, memory, episodes, duration) and its
 * free-text filter are timed too.
 *
 *   bench_store [--rows N]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

static void check(int rc, const ap_error *err)
{
    if (rc < 0) {
        fprintf(stderr, "bench_store: %s\n", err->msg);
        exit(1);
    }
}

/* The median of `reps` timings of one listing, in milliseconds. */
static double time_list(store *s, const store_filter *f, const char *after, int *n_out)
{
    enum { REPS = 21 };
    double t[REPS];
    store_row rows[50];
    char next[48];
    ap_error err;
    for (int r = 0; r < REPS; r++) {
        double t0 = ap_mono_s();
        int n = store_list(s, f, 50, after, rows, next, &err);
        t[r] = ap_mono_s() - t0;
        check(n, &err);
        *n_out = n;
    }
    for (int i = 1; i < REPS; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[REPS / 2] * 1e3;
}

int main(int argc, char **argv)
{
    int rows = 200000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_store [--rows N]\n");
            return 2;
        }
    }
    char db[] = "/tmp/autopart-bench-store-XXXXXX";
    int fd = mkstemp(db);
    close(fd);
    unlink(db);
    store *s;
    ap_error err;
    check(store_open(db, "bench:1:x", 5000, &s, &err), &err);
    const int64_t t_start = 1700000000LL * 1000000, month = 30LL * 86400 * 1000000;
    static const char *const labels[] = {"trainer-llama", "trainer-t32", "sweep-a", "sweep-b", "notebook",
                                         "ci",            "eval",        "",        "bench",   "gns"};
    double t0 = ap_mono_s();
    char request[512];
    memset(request, 'r', sizeof request);
    uint64_t seed = 42;
    for (int i = 0; i < rows; i++) {
        uint8_t key[STORE_KEY_BYTES], mh[STORE_KEY_BYTES];
        for (int k = 0; k < STORE_KEY_BYTES; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            key[k] = (uint8_t)(seed >> 56);
        }
        memset(mh, 0, sizeof mh);
        mh[0] = (uint8_t)(i % 97);
        mh[1] = (uint8_t)(i % 89);
        int64_t created = t_start + (int64_t)((double)i / rows * (double)month);
        store_new n = {.kind = i % 3 ? STORE_SEARCH : STORE_APPLY, .key = key, .module_hash = mh,
                       .module_name = "train_step.mlir", .client_label = labels[i % 10], .mesh = "batch=8,model=4",
                       .device = "tpu_v3", .axes = "model", .request = request, .request_len = sizeof request};
        store_row row;
        bool created_row;
        check(store_begin(s, &n, created, created + 10000000, &row, &created_row, &err), &err);
        if (i % 10 != 9) { /* most finish */
            check(store_start(s, row.id, created, &err), &err);
            if (i % 50 == 0) /* a history for some */
                for (int p = 0; p < 20; p++) {
                    store_progress pr = {.episodes = p * 50, .best_runtime_s = 7.0 - p * 0.01, .best_peak_memory = 1 << 30};
                    check(store_set_progress(s, row.id, created + p * 250000, &pr, true, NULL, 0, &err), &err);
                }
            store_progress sum = {.episodes = 500 + i % 1000, .best_runtime_s = 6.5 + (i % 997) * 1e-3,
                                  .best_peak_memory = (int64_t)(1 + i % 13) << 28};
            check(store_finish(s, row.id, i % 40 == 0 ? STORE_FAILED : STORE_DONE, created + 5000000, "result", 6,
                               &sum, NULL, &err),
                  &err);
        }
    }
    double fill = ap_mono_s() - t0;
    store_counts cnt;
    check(store_counts_get(s, &cnt, &err), &err);
    printf("bench_store: %d searches stored in %.1f s (%.0f/s, each in its own transactions); %.1f MiB on disk\n",
           rows, fill, rows / fill, (double)cnt.db_bytes / (1024.0 * 1024));
    printf("listing a page of 50, newest first (median of 21):\n");
    int n;
    store_filter all = {0};
    { double ms = time_list(s, &all, NULL, &n); printf("  first page                      %7.3f ms (%d rows)\n", ms, n); }
    /* a token deep in the list: the 150,000th newest row, as the UI's page 3000 would hold */
    char token[48];
    snprintf(token, sizeof token, "%" PRId64 ".%d", t_start + (int64_t)((double)(rows / 4) / rows * (double)month),
             rows / 4 + 1);
    { double ms = time_list(s, &all, token, &n); printf("  a page deep in the list (token) %7.3f ms (%d rows)\n", ms, n); }
    store_filter st = {.status = STORE_FAILED};
    { double ms = time_list(s, &st, NULL, &n); printf("  status = failed                 %7.3f ms (%d rows)\n", ms, n); }
    store_filter lb = {.client_label = "sweep-b"};
    { double ms = time_list(s, &lb, NULL, &n); printf("  client label = sweep-b          %7.3f ms (%d rows)\n", ms, n); }
    uint8_t mh[1] = {5};
    store_filter mf = {.module_hash = mh, .module_hash_len = 1};
    { double ms = time_list(s, &mf, NULL, &n); printf("  module hash prefix (1 byte)     %7.3f ms (%d rows)\n", ms, n); }
    store_filter tf = {.created_after_us = t_start + month / 3, .created_before_us = t_start + month / 2};
    { double ms = time_list(s, &tf, NULL, &n); printf("  created in a 5-day window       %7.3f ms (%d rows)\n", ms, n); }
    store_filter combo = {.status = STORE_DONE, .client_label = "trainer-t32", .created_after_us = t_start + month / 2};
    { double ms = time_list(s, &combo, NULL, &n); printf("  status + label + since          %7.3f ms (%d rows)\n", ms, n); }
    /* The dashboard's free text and sort orders. */
    store_filter tx = {.text = "sweep"};
    { double ms = time_list(s, &tx, NULL, &n); printf("  text 'sweep' (common)           %7.3f ms (%d rows)\n", ms, n); }
    store_filter tr = {.text = "no-such-word"};
    { double ms = time_list(s, &tr, NULL, &n); printf("  text matching nothing           %7.3f ms (%d rows)\n", ms, n); }
    static const char *const sorts[] = {"", "runtime", "memory", "episodes", "duration"};
    for (int k = 1; k < STORE_SORT__COUNT; k++)
        for (int asc = 0; asc < 2; asc++) {
            store_filter so = {.sort = k, .ascending = asc};
            double ms = time_list(s, &so, NULL, &n);
            printf("  by %-8s %-4s                %7.3f ms (%d rows)\n", sorts[k], asc ? "asc" : "desc", ms, n);
        }
    store_filter sf = {.sort = STORE_SORT_RUNTIME, .ascending = true, .status = STORE_DONE, .client_label = "eval"};
    { double ms = time_list(s, &sf, NULL, &n); printf("  by runtime, done, label eval    %7.3f ms (%d rows)\n", ms, n); }
    t0 = ap_mono_s();
    store_point pts[2000];
    for (int r = 0; r < 1000; r++)
        check(store_history(s, 1 + (r % (rows / 50)) * 50, pts, 2000, &err), &err);
    printf("  a search's progress history     %7.3f ms (mean of 1000)\n", (ap_mono_s() - t0) / 1000 * 1e3);
    t0 = ap_mono_s();
    check(store_counts_get(s, &cnt, &err), &err);
    printf("  counts by status (Stats)        %7.3f ms\n", (ap_mono_s() - t0) * 1e3);
    store_close(s);
    char p[300];
    unlink(db);
    snprintf(p, sizeof p, "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db);
    unlink(p);
    return 0;
}
