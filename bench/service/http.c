/*
 * http.c - bench_http: the dashboard's list at scale, end to end.  Fills a
 * store with N searches (default 200,000; or takes --db PATH as it is),
 * starts autopartd --http on it, and times pages of the JSON API over one
 * kept-alive connection (libcurl): the first page, pages deep in the list
 * by their cursors, filters, free text, the other orders, one search, its
 * live feed and the stats.  Each figure is the median of 21 requests, from
 * sending the request to the last byte of the JSON.
 *
 *   bench_http [--rows N] [--db PATH]
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "store.h"

static void check(int rc, const ap_error *err)
{
    if (rc < 0) {
        fprintf(stderr, "bench_http: %s\n", err->msg);
        exit(1);
    }
}

/* The same kind of rows as bench_store's: labels, statuses, two model
 * names, creation times over a month, costs that differ. */
static void fill(const char *db, int rows)
{
    store *s;
    ap_error err;
    check(store_open(db, "bench:1:x", 5000, &s, &err), &err);
    const int64_t t_start = 1700000000LL * 1000000, month = 30LL * 86400 * 1000000;
    static const char *const labels[] = {"trainer-llama", "trainer-t32", "sweep-a", "sweep-b", "notebook",
                                         "ci",            "eval",        "",        "bench",   "gns"};
    uint64_t seed = 42;
    double t0 = ap_mono_s();
    for (int i = 0; i < rows; i++) {
        uint8_t key[STORE_KEY_BYTES], mh[STORE_KEY_BYTES] = {0};
        for (int k = 0; k < STORE_KEY_BYTES; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            key[k] = (uint8_t)(seed >> 56);
        }
        mh[0] = (uint8_t)(i % 97);
        int64_t created = t_start + (int64_t)((double)i / rows * (double)month);
        store_new n = {.kind = i % 3 ? STORE_SEARCH : STORE_APPLY, .key = key, .module_hash = mh,
                       .module_name = i % 2 ? "train_step.mlir" : "t32.mlir", .client_label = labels[i % 10],
                       .mesh = "batch=8,model=4", .device = "tpu_v3", .axes = "model", .request = "r", .request_len = 1};
        store_row row;
        bool created_row;
        check(store_begin(s, &n, created, created + 10000000, &row, &created_row, &err), &err);
        check(store_start(s, row.id, created, &err), &err);
        store_progress sum = {.episodes = 500 + i % 1000, .best_runtime_s = 6.5 + (i % 997) * 1e-3,
                              .best_peak_memory = (int64_t)(1 + i % 13) << 28};
        check(store_finish(s, row.id, i % 40 == 0 ? STORE_FAILED : STORE_DONE, created + 5000000 + i % 1000, NULL, 0,
                           &sum, i % 40 == 0 ? "it broke" : NULL, &err),
              &err);
    }
    printf("bench_http: %d searches stored in %.1f s\n", rows, ap_mono_s() - t0);
    store_close(s);
}

typedef struct body {
    char *data;
    size_t len;
} body;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    body *b = ud;
    char *d = realloc(b->data, b->len + size * n + 1);
    if (!d)
        return 0;
    memcpy(d + b->len, p, size * n);
    b->len += size * n;
    d[b->len] = '\0';
    b->data = d;
    return size * n;
}

static CURL *curl;
static int port;

/* GET path once: seconds; the body in *b (reused). */
static double get(const char *path, body *b)
{
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    b->len = 0;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, b);
    double t0 = ap_mono_s();
    CURLcode rc = curl_easy_perform(curl);
    double t = ap_mono_s() - t0;
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) {
        fprintf(stderr, "bench_http: GET %s: %s %ld %s\n", path, curl_easy_strerror(rc), status, b->data ? b->data : "");
        exit(1);
    }
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of 21 GETs of path, in ms; the rows in the answer. */
static void timed(const char *what, const char *path)
{
    enum { REPS = 21 };
    double t[REPS];
    body b = {0};
    for (int r = 0; r < REPS; r++)
        t[r] = get(path, &b);
    qsort(t, REPS, sizeof t[0], cmp_double);
    int rows = 0;
    for (const char *p = b.data; p && (p = strstr(p, "\"id\":")); p += 5)
        rows++;
    printf("  %-34s %8.3f ms  (max %7.3f; %d rows, %zu bytes)\n", what, t[REPS / 2] * 1e3, t[REPS - 1] * 1e3, rows, b.len);
    free(b.data);
}

int main(int argc, char **argv)
{
    int rows = 200000;
    const char *db_arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            db_arg = argv[++i];
        else {
            fprintf(stderr, "usage: bench_http [--rows N] [--db PATH]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    char db[300];
    if (db_arg) {
        snprintf(db, sizeof db, "%s", db_arg);
    } else {
        snprintf(db, sizeof db, "/tmp/autopart-bench-http-XXXXXX");
        int fd = mkstemp(db);
        close(fd);
        unlink(db);
        fill(db, rows);
    }
    int out[2];
    if (pipe(out) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execl(AP_DAEMON, AP_DAEMON, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--db", db, "--quiet",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char text[1024];
    size_t n = 0;
    while (n < sizeof text - 1) {
        ssize_t r = read(out[0], text + n, 1);
        if (r <= 0)
            break;
        n++;
        text[n] = '\0';
        if (text[n - 1] == '\n' && strstr(text, "dashboard"))
            break;
    }
    text[n] = '\0';
    close(out[0]);
    const char *w = strstr(text, "dashboard");
    w = w ? strstr(w, " port ") : NULL;
    if (!w) {
        fprintf(stderr, "bench_http: autopartd did not start: %s\n", text);
        return 1;
    }
    port = atoi(w + 6);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);

    printf("bench_http: autopartd --http over %s; GET, one kept-alive connection, median of 21:\n", db);
    timed("first page of 50, newest first", "/api/searches?limit=50");
    /* forty pages on, each by the cursor of the one before */
    body b = {0};
    char after[64] = "", path[512];
    double walk = 0;
    int pages = 0;
    for (; pages < 40; pages++) {
        snprintf(path, sizeof path, "/api/searches?limit=50%s%s", after[0] ? "&after=" : "", after);
        walk += get(path, &b);
        const char *nx = strstr(b.data, "\"next\":\"");
        if (!nx)
            break;
        nx += 8;
        snprintf(after, sizeof after, "%.*s", (int)strcspn(nx, "\""), nx);
    }
    printf("  %-34s %8.3f ms  (mean of %d pages followed by their cursors)\n", "paging on from page 1", walk / pages * 1e3,
           pages);
    timed("page 41 by its cursor", path);
    timed("status = failed", "/api/searches?limit=50&status=failed");
    timed("client = sweep-b", "/api/searches?limit=50&client=sweep-b");
    timed("kind = apply, module prefix", "/api/searches?limit=50&kind=apply&module=05000000");
    timed("text 't32' (common)", "/api/searches?limit=50&q=t32");
    timed("text 'broke' (1 in 40)", "/api/searches?limit=50&q=broke");
    timed("text matching nothing", "/api/searches?limit=50&q=no-such-word");
    timed("by step time, ascending", "/api/searches?limit=50&sort=runtime&order=asc");
    timed("by memory, descending", "/api/searches?limit=50&sort=memory");
    timed("by duration, ascending", "/api/searches?limit=50&sort=duration&order=asc");
    timed("by step time, done, sweep-b", "/api/searches?limit=50&sort=runtime&order=asc&status=done&client=sweep-b");
    timed("one search (no result stored)", "/api/searches/1");
    timed("its live feed (progress)", "/api/searches/1/progress");
    timed("stats", "/api/stats");
    free(b.data);
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    if (!db_arg) {
        char p[400];
        unlink(db);
        snprintf(p, sizeof p, "%s-wal", db);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", db);
        unlink(p);
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
