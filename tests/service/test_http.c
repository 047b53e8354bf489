/*
 * test_http.c - the dashboard's JSON API (server/http.c) against the real
 * daemon: autopartd started with --http on an ephemeral loopback port, its
 * store filled beforehand through the store's own API (rows of known
 * labels, statuses, names and costs) or by a real search through the CLI,
 * and spoken to with libcurl.  Filters, keyset pages in every order, the
 * 404s and 400s with their messages, the token, the address rules, HTTPS,
 * and a real search's page and downloads.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>

#include "svc.h"

/* ============================================================ fixture */

typedef struct http_daemon {
    svc_daemon d;
    int http_port;
} http_daemon;

/* Starts autopartd with --http 127.0.0.1:0 (or `http`) and the extra
 * arguments; reads both lines it prints.  Returns the exit status when it
 * exits before serving (d->d.pid 0). */
static int http_start_args(http_daemon *h, const char *db, const char *http, const char *const *extra)
{
    const char *args[40] = {"--http", http ? http : "127.0.0.1:0"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 39; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    char text[1024];
    memset(h, 0, sizeof *h);
    int rc = svc_start_until(&h->d, db, NULL, args, "dashboard", text, sizeof text);
    if (rc != 0 || !h->d.pid)
        return rc;
    const char *w = strstr(text, "dashboard"), *wp = strstr(w, " port ");
    ck_assert_msg(wp != NULL, "no port in the dashboard's line: %s", text);
    h->http_port = atoi(wp + 6);
    ck_assert_int_gt(h->http_port, 0);
    return 0;
}

static void http_start(http_daemon *h, const char *db, const char *const *extra)
{
    int rc = http_start_args(h, db, NULL, extra);
    ck_assert_msg(rc == 0 && h->d.pid > 0, "autopartd --http did not start (exit %d); see %s", rc, h->d.log);
}

/* Stops the daemon: SIGTERM, exit 0 (under ASan: no leaks). */
static void http_stop(http_daemon *h)
{
    int rc = svc_stop(&h->d, SIGTERM, 30);
    ck_assert_msg(rc == 0, "autopartd exited %d after SIGTERM; see %s", rc, h->d.log);
}

/* ============================================================ requests */

typedef struct resp {
    long status;
    char *body;
    size_t len;
    char type[128];
    char disposition[256];
} resp;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    resp *r = ud;
    char *b = realloc(r->body, r->len + size * n + 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b + r->len, p, size * n);
    r->len += size * n;
    b[r->len] = '\0';
    r->body = b;
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    resp *r = ud;
    size_t len = size * n;
    if (len > 20 && !strncasecmp(p, "Content-Disposition:", 20))
        snprintf(r->disposition, sizeof r->disposition, "%.*s", (int)(len - 20), p + 20);
    return len;
}

typedef struct req_opts {
    const char *token;      /* Authorization: Bearer */
    const char *method;     /* default GET */
    const char *ca_file;    /* HTTPS: trust this */
    const char *resolve;    /* curl's host:port:addr */
    const char *source;     /* the local address to send from */
    long timeout_s;         /* default 60 */
} req_opts;

/* GET (or o->method) url; the status, body (heap, free with resp_free)
 * and content type.  Status 0 when no HTTP answer came. */
static resp request(const char *url, const req_opts *o)
{
    resp r = {0};
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    struct curl_slist *hdr = NULL, *res = NULL;
    char auth[300];
    if (o && o->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, o && o->timeout_s ? o->timeout_s : 60L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    if (o && o->source)
        curl_easy_setopt(c, CURLOPT_INTERFACE, o->source);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (o && o->method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, o->method);
    if (o && o->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
    if (o && o->resolve) {
        res = curl_slist_append(res, o->resolve);
        curl_easy_setopt(c, CURLOPT_RESOLVE, res);
    }
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(r.type, sizeof r.type, "%s", ct ? ct : "");
    }
    curl_slist_free_all(hdr);
    curl_slist_free_all(res);
    curl_easy_cleanup(c);
    return r;
}

static void resp_free(resp *r)
{
    free(r->body);
    r->body = NULL;
}

/* GET http://127.0.0.1:PORT/path, expecting `status`; the JSON body
 * (caller decrefs).  A failure says the body. */
static json_t *get_json(const http_daemon *h, const char *path, long status, const char *token)
{
    char url[1200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", h->http_port, path);
    req_opts o = {.token = token};
    resp r = request(url, &o);
    ck_assert_msg(r.status == status, "GET %s: %ld, wanted %ld: %s", path, r.status, status, r.body ? r.body : "");
    ck_assert_msg(strstr(r.type, "application/json"), "GET %s: content type %s", path, r.type);
    json_error_t je;
    json_t *j = json_loads(r.body ? r.body : "", 0, &je);
    ck_assert_msg(j, "GET %s: not JSON (%s): %s", path, je.text, r.body ? r.body : "");
    resp_free(&r);
    return j;
}

/* A 4xx whose JSON says why, with `words` in its message. */
static void expect_error(const http_daemon *h, const char *path, long status, const char *words)
{
    json_t *j = get_json(h, path, status, NULL);
    const char *msg = json_string_value(json_object_get(j, "error"));
    ck_assert_msg(msg && strstr(msg, words), "GET %s: error message '%s' lacks '%s'", path, msg ? msg : "(none)",
                  words);
    json_decref(j);
}

/* ============================================================ the store */

/* 120 rows, oldest first, a second apart: row i has label alpha/beta/
 * gamma (i % 3), module t32.mlir when i % 4 == 0 else mlp.mlir, status
 * failed when i % 10 == 7, running when i == 119, else done; runtime
 * (i * 37 % 101 + 1) ms, memory (i % 7 + 1) MiB. */
enum { N_ROWS = 120 };
static const char *const labels[] = {"alpha", "beta", "gamma"};

static void fill_store(const char *db)
{
    store *s;
    ap_error err;
    /* The running row's owner is this test process (alive, with a lease
     * for an hour): the daemon must not take it over as an orphan. */
    char host[200] = "localhost", owner[300];
    gethostname(host, sizeof host - 1);
    snprintf(owner, sizeof owner, "%s:%ld:test", host, (long)getpid());
    ck_assert_msg(store_open(db, owner, 5000, &s, &err) == 0, "%s", err.msg);
    const int64_t t0 = 1750000000LL * 1000000;
    for (int i = 0; i < N_ROWS; i++) {
        uint8_t key[STORE_KEY_BYTES] = {0}, mh[STORE_KEY_BYTES] = {0};
        key[0] = (uint8_t)i;
        key[1] = 0xa5;
        mh[0] = i % 4 == 0 ? 0x32 : 0x77;
        store_new n = {.kind = STORE_SEARCH, .key = key, .module_hash = mh,
                       .module_name = i % 4 == 0 ? "t32.mlir" : "mlp.mlir", .client_label = labels[i % 3],
                       .mesh = "batch=8,model=4", .device = "tpu_v3", .axes = "model", .request = "r", .request_len = 1};
        store_row row;
        bool created;
        int64_t t = t0 + (int64_t)i * 1000000;
        int64_t lease = (int64_t)time(NULL) * 1000000 + 3600LL * 1000000;
        ck_assert_msg(store_begin(s, &n, t, lease, &row, &created, &err) == 0, "%s", err.msg);
        ck_assert(created);
        ck_assert_int_eq(store_start(s, row.id, t + 1000, &err), 0);
        store_progress p = {.episodes = 100 + i, .best_runtime_s = (i * 37 % 101 + 1) * 1e-3,
                            .best_peak_memory = (int64_t)(i % 7 + 1) << 20};
        ck_assert_int_eq(store_set_progress(s, row.id, t + 2000, &p, true, NULL, 0, &err), 0);
        if (i == N_ROWS - 1)
            continue; /* stays running (its owner is gone, but nobody sweeps in this test's time) */
        int st = i % 10 == 7 ? STORE_FAILED : STORE_DONE;
        ck_assert_int_eq(store_finish(s, row.id, st, t + 500000 + i * 1000, st == STORE_DONE ? "x" : NULL,
                                      st == STORE_DONE ? 1 : 0, &p, st == STORE_DONE ? NULL : "it broke", &err),
                         0);
    }
    store_close(s);
}

/* Every row of a listing, page after page of `limit`; checks that pages
 * neither repeat nor skip and that the order holds.  Returns the count;
 * ids[] gets them in order. */
static int list_all(const http_daemon *h, const char *query, int limit, int64_t *ids, int max, const char *order_key,
                    bool ascending)
{
    char after[64] = "", path[800];
    int n = 0, pages = 0;
    double last = ascending ? -1e300 : 1e300;
    int64_t last_id = ascending ? -1 : INT64_MAX;
    for (;;) {
        char *esc = curl_easy_escape(NULL, after, 0);
        snprintf(path, sizeof path, "/api/searches?limit=%d%s%s%s%s", limit, query[0] ? "&" : "", query,
                 after[0] ? "&after=" : "", after[0] ? esc : "");
        curl_free(esc);
        json_t *j = get_json(h, path, 200, NULL);
        json_t *rows = json_object_get(j, "searches");
        ck_assert(json_is_array(rows));
        ck_assert_int_le((int)json_array_size(rows), limit);
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r) {
            ck_assert_int_lt(n, max);
            int64_t id = json_integer_value(json_object_get(r, "id"));
            double v = json_number_value(json_object_get(r, order_key));
            /* strictly ordered by (key, id) */
            bool ok = ascending ? (v > last || (v == last && id > last_id)) : (v < last || (v == last && id < last_id));
            ck_assert_msg(ok, "%s: row %" PRId64 " (%s %g) out of order after %" PRId64 " (%g)", path, id, order_key, v,
                          last_id, last);
            last = v;
            last_id = id;
            ids[n++] = id;
        }
        const char *next = json_string_value(json_object_get(j, "next"));
        ck_assert_ptr_nonnull(next);
        snprintf(after, sizeof after, "%s", next);
        json_decref(j);
        pages++;
        ck_assert_int_lt(pages, 1000);
        if (!after[0])
            break;
    }
    return n;
}

/* ================================================================ tests */

START_TEST(test_list_filters_and_pages)
{
    char db[256];
    svc_temp_db(db, sizeof db);
    fill_store(db);
    http_daemon h;
    http_start(&h, db, NULL);
    int64_t ids[N_ROWS + 1];

    /* everything, newest first, in pages of 50: 50 + 50 + 20, no repeats */
    int n = list_all(&h, "", 50, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, N_ROWS);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], N_ROWS - i); /* ids were made oldest first */

    /* a first page's fields */
    json_t *j = get_json(&h, "/api/searches?limit=1", 200, NULL);
    json_t *r = json_array_get(json_object_get(j, "searches"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "running");
    ck_assert_str_eq(json_string_value(json_object_get(r, "client_label")), labels[(N_ROWS - 1) % 3]);
    ck_assert_str_eq(json_string_value(json_object_get(r, "mesh")), "batch=8,model=4");
    ck_assert_str_eq(json_string_value(json_object_get(r, "device")), "tpu_v3");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "episodes")), 100 + N_ROWS - 1);
    ck_assert(strlen(json_string_value(json_object_get(r, "module_hash"))) == 64);
    json_decref(j);

    /* status: failed rows are i % 10 == 7 */
    n = list_all(&h, "status=failed", 5, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, N_ROWS / 10);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq((ids[i] - 1) % 10, 7);
    /* client label */
    n = list_all(&h, "client=beta", 7, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, N_ROWS / 3);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq((ids[i] - 1) % 3, 1);
    /* free text, any case, in the module name */
    n = list_all(&h, "q=T32", 50, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, N_ROWS / 4);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq((ids[i] - 1) % 4, 0);
    /* free text in the error, and combined with a label */
    n = list_all(&h, "q=broke&client=alpha", 50, ids, N_ROWS, "created_ms", false);
    for (int i = 0; i < n; i++)
        ck_assert((ids[i] - 1) % 10 == 7 && (ids[i] - 1) % 3 == 0);
    ck_assert_int_eq(n, 4); /* i in {27, 57, 87, 117} */
    /* the text index's own syntax is plain text */
    n = list_all(&h, "q=%22t32%22%20OR%20alpha", 50, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, 0);
    n = list_all(&h, "q=pha", 50, ids, N_ROWS, "created_ms", false); /* a substring of alpha */
    ck_assert_int_eq(n, N_ROWS / 3);
    /* a common text across pages (the index walk) and with another order */
    n = list_all(&h, "q=mlp.mlir&sort=runtime&order=asc", 7, ids, N_ROWS, "best_runtime_s", true);
    ck_assert_int_eq(n, N_ROWS - N_ROWS / 4);
    /* module hash prefix */
    n = list_all(&h, "module=32000000", 50, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, N_ROWS / 4);
    /* a time window: rows 10..19 (created in [t0 + 10 s, t0 + 20 s)) */
    n = list_all(&h, "since=1750000010000&until=1750000020000", 3, ids, N_ROWS, "created_ms", false);
    ck_assert_int_eq(n, 10);
    ck_assert_int_eq(ids[0], 20);
    ck_assert_int_eq(ids[9], 11);

    /* the other orders, both ways, across pages; rows without a value are out */
    n = list_all(&h, "sort=runtime&order=asc", 13, ids, N_ROWS, "best_runtime_s", true);
    ck_assert_int_eq(n, N_ROWS); /* every row has a cost (the running one its best so far) */
    n = list_all(&h, "sort=runtime", 13, ids, N_ROWS, "best_runtime_s", false);
    ck_assert_int_eq(n, N_ROWS);
    n = list_all(&h, "sort=memory&order=asc&status=done", 9, ids, N_ROWS, "best_peak_memory_bytes", true);
    ck_assert_int_eq(n, N_ROWS - N_ROWS / 10 - 1);
    n = list_all(&h, "sort=episodes&order=desc", 11, ids, N_ROWS, "episodes", false);
    ck_assert_int_eq(n, N_ROWS);
    ck_assert_int_eq(ids[0], N_ROWS);
    n = list_all(&h, "sort=duration&order=asc", 17, ids, N_ROWS, "duration_s", true);
    ck_assert_int_eq(n, N_ROWS - 1); /* the running row has no duration yet */

    /* stats count the store */
    j = get_json(&h, "/api/stats", 200, NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "stored")), N_ROWS);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "by_status"), "failed")), N_ROWS / 10);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "by_status"), "running")), 1);
    json_decref(j);

    /* one row, its history (the live feed) */
    j = get_json(&h, "/api/searches/5/progress", 200, NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "search"), "id")), 5);
    json_t *hist = json_object_get(j, "history");
    ck_assert_int_eq((int)json_array_size(hist), 1);
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(hist, 0), 1)), 104);
    json_decref(j);
    http_stop(&h);
    svc_remove_db(db);
}
END_TEST

START_TEST(test_errors_say_why)
{
    char db[256];
    svc_temp_db(db, sizeof db);
    fill_store(db);
    http_daemon h;
    http_start(&h, db, NULL);
    expect_error(&h, "/api/searches/99999", 404, "no search 99999");
    expect_error(&h, "/api/searches/abc", 404, "no such search");
    expect_error(&h, "/api/searches/-3", 404, "no such search");
    expect_error(&h, "/api/searches/1/bogus", 404, "no such page");
    expect_error(&h, "/api/nothing", 404, "no such API");
    expect_error(&h, "/nothing.html", 404, "no such page");
    expect_error(&h, "/api/searches/120/module", 404, "no partitioned module yet (running)");
    expect_error(&h, "/api/searches?limit=0", 400, "limit=0");
    expect_error(&h, "/api/searches?limit=abc", 400, "a whole number");
    expect_error(&h, "/api/searches?limit=100000", 400, "from 1 to 1000");
    expect_error(&h, "/api/searches?status=finished", 400, "one of queued, running, done");
    expect_error(&h, "/api/searches?kind=x", 400, "search or apply");
    expect_error(&h, "/api/searches?after=garbage", 400, "malformed page token");
    expect_error(&h, "/api/searches?sort=runtime&after=1.2", 400, "malformed page token");
    expect_error(&h, "/api/searches?sort=colour", 400, "one of created, runtime");
    expect_error(&h, "/api/searches?order=up", 400, "asc or desc");
    expect_error(&h, "/api/searches?order=asc", 400, "no ascending form");
    expect_error(&h, "/api/searches?module=xyz", 400, "hex digits");
    expect_error(&h, "/api/searches?since=-5", 400, "since=-5");
    expect_error(&h, "/api/searches?q=ab", 400, "at least 3 characters");
    expect_error(&h, "/api/searches?stauts=done", 400, "unknown parameter 'stauts'");
    expect_error(&h, "/api/stats?x=1", 400, "unknown parameter 'x'");
    /* only GET and HEAD */
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/searches", h.http_port);
    req_opts post = {.method = "DELETE"};
    resp r = request(url, &post);
    ck_assert_int_eq(r.status, 405);
    ck_assert(r.body && strstr(r.body, "only GET"));
    resp_free(&r);
    /* the page itself */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", h.http_port);
    r = request(url, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strstr(r.type, "text/html") && strstr(r.body, "app.js"));
    resp_free(&r);
    http_stop(&h);
    svc_remove_db(db);
}
END_TEST

/* The longest run of digits in s. */
static size_t longest_digits(const char *s)
{
    size_t best = 0, run = 0;
    for (; *s; s++) {
        run = *s >= '0' && *s <= '9' ? run + 1 : 0;
        best = run > best ? run : best;
    }
    return best;
}

/* What a hostile client sends: bytes that are not UTF-8 (once a 500 "out
 * of memory"), a %00 in a value (which dropped the filter) or in a name
 * (which was let through), and 256 connections that send half a request
 * (which stopped the dashboard for about a minute). */
START_TEST(test_hostile_requests)
{
    char db[256];
    svc_temp_db(db, sizeof db);
    fill_store(db);
    http_daemon h;
    http_start(&h, db, NULL);
    expect_error(&h, "/api/searches?after=%ff%fe", 400, "after: the value holds a NUL or is not UTF-8");
    expect_error(&h, "/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", 400, "not UTF-8");
    expect_error(&h, "/api/searches/1/%ff", 400, "not UTF-8");
    expect_error(&h, "/api/searches?q=%00abc", 400, "q: the value holds a NUL");
    expect_error(&h, "/api/searches?%00=1", 400, "name holds a NUL");
    expect_error(&h, "/api/searches?status=done%00xyz", 400, "status: the value holds a NUL");
    /* floats as a person reads them */
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/stats", h.http_port);
    resp r = request(url, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(longest_digits(r.body) <= 15, "%s", r.body);
    resp_free(&r);
    /* half requests from one address hold at most its share of the
     * connections, and each only for a while */
    enum { N = 256 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h.http_port)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        ck_assert_int_ge(fds[i], 0);
        if (connect(fds[i], (struct sockaddr *)&sa, sizeof sa) == 0) {
            static const char half[] = "GET /api/stats HTTP/1.1\r\nHost: x\r\n";
            ssize_t w = send(fds[i], half, sizeof half - 1, MSG_NOSIGNAL);
            (void)w;
        }
    }
    req_opts other = {.source = "127.0.0.2", .timeout_s = 10};
    double t0 = ap_mono_s();
    r = request(url, &other);
    ck_assert_msg(r.status == 200, "another address waited %.1f s for nothing (status %ld)", ap_mono_s() - t0, r.status);
    resp_free(&r);
    /* and the same address, once the idle ones are closed (10 s) */
    req_opts same = {.timeout_s = 5};
    for (r = request(url, &same); r.status != 200 && ap_mono_s() - t0 < 40; r = request(url, &same)) {
        resp_free(&r);
        usleep(500000);
    }
    ck_assert_msg(r.status == 200, "no answer after %.1f s", ap_mono_s() - t0);
    ck_assert_msg(ap_mono_s() - t0 > 5, "the half requests did not hold their address's share");
    resp_free(&r);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    http_stop(&h);
    svc_remove_db(db);
}
END_TEST

START_TEST(test_token)
{
    char db[256], tok[300];
    svc_temp_db(db, sizeof db);
    fill_store(db);
    snprintf(tok, sizeof tok, "%s.token", db);
    FILE *f = fopen(tok, "w");
    fputs("s3cret-dash\n", f);
    fclose(f);
    const char *args[] = {"--token-file", tok, NULL};
    http_daemon h;
    http_start(&h, db, args);
    json_t *j = get_json(&h, "/api/stats", 401, NULL);
    ck_assert(strstr(json_string_value(json_object_get(j, "error")), "Bearer"));
    json_decref(j);
    json_decref(get_json(&h, "/api/searches", 401, "wrong"));
    json_decref(get_json(&h, "/api/searches/1", 401, "s3cret-dash-and-more"));
    j = get_json(&h, "/api/searches?limit=2", 200, "s3cret-dash");
    ck_assert_int_eq((int)json_array_size(json_object_get(j, "searches")), 2);
    json_decref(j);
    /* the page has no data: it loads without the token, and asks for it */
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/app.js", h.http_port);
    resp r = request(url, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strstr(r.body, "Authorization"));
    resp_free(&r);
    http_stop(&h);
    unlink(tok);
    svc_remove_db(db);
}
END_TEST

START_TEST(test_addresses_and_tls)
{
    char db[256];
    svc_temp_db(db, sizeof db);
    http_daemon h;
    /* not loopback, no TLS: refused, and says how */
    int rc = http_start_args(&h, db, "0.0.0.0:0", NULL);
    ck_assert_int_eq(rc, 2);
    ck_assert_int_eq(h.d.pid, 0);
    char *log = tl_read(h.d.log, NULL);
    ck_assert_msg(strstr(log, "--http 0.0.0.0:0 is not a loopback address"), "%s", log);
    ap_free(log);
    /* a bad address */
    rc = http_start_args(&h, db, "127.0.0.1:notaport", NULL);
    ck_assert_int_eq(rc, 1);
    /* the page's files missing: said at start, not at the first request */
    const char *noroot[] = {"--http-root", "/nonexistent/web", NULL};
    rc = http_start_args(&h, db, NULL, noroot);
    ck_assert_int_eq(rc, 1);
    log = tl_read(h.d.log, NULL);
    ck_assert_msg(strstr(log, "/nonexistent/web/index.html cannot be read"), "%s", log);
    ap_free(log);
    /* --insecure allows it */
    const char *insecure[] = {"--insecure", NULL};
    rc = http_start_args(&h, db, "0.0.0.0:0", insecure);
    ck_assert_int_eq(rc, 0);
    json_decref(get_json(&h, "/api/stats", 200, NULL));
    http_stop(&h);

    /* HTTPS with the gRPC side's certificate options */
    char dir[] = "/tmp/autopart-tls-XXXXXX", cmd[1200], cert[300], key[300];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=autopart-test -addext "
             "subjectAltName=DNS:autopart-test -keyout %s -out %s 2>/dev/null",
             key, cert);
    ck_assert_msg(system(cmd) == 0, "openssl could not make a certificate (scripts/setup installs it)");
    const char *tls[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    rc = http_start_args(&h, db, "0.0.0.0:0", tls);
    ck_assert_msg(rc == 0, "with TLS on 0.0.0.0: exit %d", rc);
    char url[200], resolve[100];
    snprintf(url, sizeof url, "https://autopart-test:%d/api/stats", h.http_port);
    snprintf(resolve, sizeof resolve, "autopart-test:%d:127.0.0.1", h.http_port);
    req_opts o = {.ca_file = cert, .resolve = resolve};
    resp r = request(url, &o);
    ck_assert_msg(r.status == 200 && strstr(r.body, "\"stored\""), "HTTPS: %ld %s", r.status, r.body ? r.body : "");
    resp_free(&r);
    /* plain HTTP to the HTTPS port gets no answer */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/stats", h.http_port);
    r = request(url, NULL);
    ck_assert_int_ne(r.status, 200);
    resp_free(&r);
    http_stop(&h);
    /* client certificates are not checked by the HTTP side: refused */
    const char *mtls[] = {"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", cert, NULL};
    rc = http_start_args(&h, db, NULL, mtls);
    ck_assert_int_eq(rc, 2);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    svc_remove_db(db);
}
END_TEST

/* A real search through the CLI, then its page in the API. */
START_TEST(test_real_search)
{
    char db[256], model[300], cmd[1500];
    svc_temp_db(db, sizeof db);
    snprintf(model, sizeof model, "%s.small.mlir", db);
    snprintf(cmd, sizeof cmd, "'%s' transformer --config small -q -o '%s'", TL_MODELGEN, model);
    ck_assert_int_eq(system(cmd), 0);
    http_daemon h;
    http_start(&h, db, NULL);
    snprintf(cmd, sizeof cmd,
             "'%s' search '%s' --mesh batch=4,model=2 --axes model --manual \"manual batch batch['inputs']=0 "
             "batch['targets']=0\" --device tpu_v3 --episodes 300 --server 127.0.0.1:%d >/dev/null 2>&1",
             AP_CLI, model, h.d.port);
    ck_assert_int_eq(system(cmd), 0);
    json_t *list = get_json(&h, "/api/searches?q=small.mlir&kind=search", 200, NULL);
    json_t *row = json_array_get(json_object_get(list, "searches"), 0);
    ck_assert_ptr_nonnull(row);
    ck_assert_str_eq(json_string_value(json_object_get(row, "status")), "done");
    ck_assert_int_eq(json_integer_value(json_object_get(row, "episodes")), 300);
    int64_t id = json_integer_value(json_object_get(row, "id"));
    char path[100];
    snprintf(path, sizeof path, "/api/searches/%" PRId64, id);
    json_t *j = get_json(&h, path, 200, NULL);
    json_t *res = json_object_get(j, "result");
    ck_assert(json_is_object(res));
    const char *sched = json_string_value(json_object_get(res, "schedule"));
    ck_assert(sched && strstr(sched, "tile batch['inputs'] 0 batch"));
    ck_assert_str_eq(json_string_value(json_object_get(j, "best_schedule")), sched);
    ck_assert_int_gt((int)json_array_size(json_object_get(res, "shardings")), 10);
    ck_assert_int_eq((int)json_array_size(json_object_get(res, "collectives")), 5);
    ck_assert(json_is_array(json_object_get(json_object_get(res, "explanation"), "decisions")));
    ck_assert(json_is_array(json_object_get(json_object_get(res, "report"), "conflicts")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(res, "search"), "episodes")), 300);
    ck_assert(json_real_value(json_object_get(json_object_get(res, "cost"), "runtime_s")) > 0);
    int64_t module_bytes = json_integer_value(json_object_get(res, "module_bytes"));
    ck_assert_int_gt(module_bytes, 1000);
    /* downloads: the same schedule, the partitioned module */
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/searches/%" PRId64 "/schedule", h.http_port, id);
    resp r = request(url, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, sched);
    ck_assert_msg(strstr(r.disposition, "attachment") && strstr(r.disposition, "schedule.txt"), "%s", r.disposition);
    resp_free(&r);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/searches/%" PRId64 "/module", h.http_port, id);
    r = request(url, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq((int64_t)r.len, module_bytes);
    ck_assert(strstr(r.body, "stablehlo.") && strstr(r.body, "func.func"));
    resp_free(&r);
    json_decref(j);
    json_decref(list);
    http_stop(&h);
    unlink(model);
    svc_remove_db(db);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_list_filters_and_pages);
    tcase_add_test(tc, test_errors_say_why);
    tcase_add_test(tc, test_hostile_requests);
    tcase_add_test(tc, test_token);
    tcase_add_test(tc, test_addresses_and_tls);
    tcase_add_test(tc, test_real_search);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *sr = srunner_create(http_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
