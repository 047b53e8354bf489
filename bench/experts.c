/*
 * bench_experts - the search against what experts run (issue 21, item 5).
 *
 * For every row of ../shared/notes/measured-runs.md the zoo can write
 * (runs.h), the search starts from scratch with the row's device count
 * (search_run_devices: it chooses the mesh and every action), on the row's
 * device, under the default memory limit (the device's HBM, memory counted
 * as the row's framework holds it: runs.h), and is held
 * to the row's own parallelism (the zoo's schedules on the row's mesh)
 * estimated by the same model: a row passes when the search's schedule
 * fits and its estimated step time is at most the expert's.
 *
 * Printed per row: the expert's mesh and schedules with their estimate
 * (step time, peak per device, fits), the mesh found and its schedule on
 * one line (actions folded over layer indices: `tile params['block_*']
 * ['mlp']['w_up'] 1 model x32`), its estimate, wall time and episodes.  A
 * row without a mesh (X1: one device) has nothing to search.
 *
 *   bench_experts [--only ID,ID] [--time S | --episodes N] [--threads T]
 *                 [--seed N] [--zoo DIR] [--meshes]
 *     --time S     the search's wall-time budget per row (default 60)
 *     --episodes N an episode budget per row instead: the answer then
 *                  depends on the seed alone, not on the machine's load
 *     --threads T  default 2
 *     --meshes     each row's meshes tried, best first
 *
 * The wall times depend on the machine's load: the budget is wall time,
 * so a loaded machine gets fewer episodes (printed).
 */
#include <ctype.h>

#include "runs.h"
#include "search.h"

static double gib(int64_t b) { return (double)b / (1024.0 * 1024 * 1024); }

/* One line of a schedule (`verb value rest`) with the digits of its
 * value (layer indices) as one '*' per run. */
static void fold_key(const char *line, size_t len, ap_buf *out)
{
    const char *sp = memchr(line, ' ', len);
    size_t v0 = sp ? (size_t)(sp - line) + 1 : len, v1 = v0;
    while (v1 < len && line[v1] != ' ')
        v1++;
    ap_buf_put(out, line, v0);
    for (size_t i = v0; i < v1; i++)
        if (!isdigit((unsigned char)line[i]))
            ap_buf_putc(out, line[i]);
        else if (i == v0 || !isdigit((unsigned char)line[i - 1]))
            ap_buf_putc(out, '*');
    ap_buf_put(out, line + v1, len - v1);
}

/* The schedule's lines folded over layer indices, "; "-joined, each with
 * its count when above one. */
static char *fold_schedule(const char *text)
{
    enum { MAXK = 256 };
    char *keys[MAXK];
    int count[MAXK], n = 0;
    for (const char *s = text; *s;) {
        size_t len = strcspn(s, "\n");
        if (len && s[0] != '#') {
            ap_buf k;
            ap_buf_init(&k);
            fold_key(s, len, &k);
            char *key = ap_buf_take(&k, NULL);
            int i = 0;
            while (i < n && strcmp(keys[i], key))
                i++;
            if (i < n) {
                count[i]++;
                ap_free(key);
            } else if (n < MAXK) {
                keys[n] = key;
                count[n++] = 1;
            } else {
                ap_free(key);
            }
        }
        s += len + (s[len] == '\n');
    }
    ap_buf b;
    ap_buf_init(&b);
    for (int i = 0; i < n; i++) {
        ap_buf_printf(&b, "%s%s", i ? "; " : "", keys[i]);
        if (count[i] > 1)
            ap_buf_printf(&b, " x%d", count[i]);
        ap_free(keys[i]);
    }
    if (!n)
        ap_buf_puts(&b, "(nothing: the program replicated)");
    return ap_buf_take(&b, NULL);
}

static char *mesh_text(const ir_mesh *m)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_mesh_format(m, &b);
    return ap_buf_take(&b, NULL);
}

static int64_t mesh_devices(const char *text)
{
    ir_mesh m;
    ap_error err;
    if (ir_mesh_parse(text, &m, &err) < 0)
        bench_die(text, &err);
    int64_t n = 1;
    for (int a = 0; a < m.n_axes; a++)
        n *= m.sizes[a];
    return n;
}

typedef struct outcome {
    bool ran, pass;
} outcome;

static outcome run_row(const row *rw, const search_options *base, bool meshes)
{
    outcome oc = {false, false};
    char why[512];
    cost_device dev;
    ap_error err;
    if (!rw->mesh[0]) {
        printf("%-3s %-15s %5s  one device: nothing to search\n", rw->id, rw->device, "1");
        return oc;
    }
    if (cost_device_lookup(rw->device, &dev, &err) < 0)
        bench_die(rw->device, &err);
    int64_t n = mesh_devices(rw->mesh);
    run_program rp;
    if (!run_open(rw, &rp, why, sizeof why)) {
        printf("%-3s %-15s %5lld  not yet writable: %s\n", rw->id, rw->device, (long long)n, why);
        fflush(stdout);
        return oc;
    }
    /* memory counted as the row's framework counts it, for the expert's
     * schedule and the search's limit alike (T1/T3: eager PyTorch) */
    cost_report ex;
    cost_options eo = {.framework = rw->fw};
    if (cost_state_estimate(rp.p, &dev, NULL, &eo, NULL, &ex, &err) < 0)
        bench_die("the expert's schedule", &err);
    /* the search from scratch: its own contexts over the same module */
    search_options o = *base;
    o.device = dev;
    o.cost.framework = rw->fw;
    search_devices req = {.devices = n};
    search_result r;
    double t0 = bench_now();
    int rc = search_run_devices(rp.m, ir_module_entry(rp.m), &req, &o, &r, &err);
    double wall = bench_now() - t0;
    printf("%-3s %-15s %5lld  %-16s %-13s %8.3f %7.1f %-4s", rw->id, dev.name, (long long)n, rw->mesh, rw->sched,
           ex.runtime_s, gib(ex.peak_memory_bytes), ex.fits ? "yes" : "no");
    if (rc < 0) {
        char msg[512];
        ap_error_format(&err, msg, sizeof msg);
        printf("  search failed after %.1f s: %s\n", wall, msg);
        run_close(&rp);
        return oc;
    }
    oc.ran = true;
    oc.pass = r.fits && r.report.runtime_s <= ex.runtime_s;
    const search_mesh_row *chosen = NULL;
    for (int i = 0; i < r.n_meshes; i++)
        if (r.meshes[i].chosen)
            chosen = &r.meshes[i];
    char *mt = chosen ? mesh_text(&chosen->mesh) : ap_strdup("?");
    char *folded = fold_schedule(r.actions ? r.actions : "");
    printf(" %8.3f %7.1f %-4s %6.2f %6.1f %8lld %3d/%-3d %-4s  %s: %s\n", r.report.runtime_s,
           gib(r.report.peak_memory_bytes), r.fits ? "yes" : "no", r.report.runtime_s / ex.runtime_s, wall,
           (long long)r.episodes, r.n_meshes, r.meshes_considered, oc.pass ? "PASS" : "FAIL", mt, folded);
    if (meshes)
        for (int i = 0; i < r.n_meshes; i++) {
            char *t = mesh_text(&r.meshes[i].mesh);
            printf("      %s %-36s %8.3f s %7.1f GiB%s  %lld episodes\n", r.meshes[i].chosen ? "*" : " ", t,
                   r.meshes[i].runtime_s, gib(r.meshes[i].peak_bytes), r.meshes[i].fits ? "" : " over", 
                   (long long)r.meshes[i].episodes);
            ap_free(t);
        }
    fflush(stdout);
    ap_free(mt);
    ap_free(folded);
    search_result_free(&r);
    run_close(&rp);
    return oc;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_experts [--only ID,ID] [--time S | --episodes N] [--threads T] [--seed N] "
                    "[--zoo DIR] [--meshes]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    ap_malloc_one_arena(); /* a search's memory stays for the next (ap.h) */
    const char *only = NULL;
    bool meshes = false;
    search_options o;
    search_options_init(&o);
    o.threads = 2;
    o.time_limit_s = 60;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--time") && i + 1 < argc)
            o.time_limit_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--episodes") && i + 1 < argc)
            o.max_episodes = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            o.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            o.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--zoo") && i + 1 < argc)
            zoo_dir = argv[++i];
        else if (!strcmp(argv[i], "--meshes"))
            meshes = true;
        else
            usage();
    }
    if (o.max_episodes < 0 || o.time_limit_s <= 0 || o.threads < 1)
        usage();
    if (o.max_episodes > 0)
        o.time_limit_s = 0;
    double load[3] = {0};
    if (getloadavg(load, 3) < 1)
        load[0] = -1;
    char budget[64];
    if (o.max_episodes > 0)
        snprintf(budget, sizeof budget, "%lld episodes", (long long)o.max_episodes);
    else
        snprintf(budget, sizeof budget, "%.0f s", o.time_limit_s);
    printf("The search from scratch (--devices = the row's count, the row's device, memory limit = its HBM, "
           "%d threads, %s, seed %llu) against the row's own parallelism; load %.1f, malloc huge pages %s\n",
           o.threads, budget, (unsigned long long)o.seed, load[0], bench_huge_pages());
    printf("%-3s %-15s %5s  %-16s %-13s %8s %7s %-4s %8s %7s %-4s %6s %6s %8s %7s %-4s  %s\n", "row", "device", "devs",
           "expert mesh", "schedule", "step s", "GiB", "fits", "step s", "GiB", "fits", "ratio", "wall s", "episodes",
           "meshes", "", "found mesh: schedule");
    int ran = 0, passed = 0, rows = 0;
    for (int i = 0; i < NROWS; i++) {
        if (!bench_wants(only, ROWS[i].id))
            continue;
        rows++;
        outcome oc = run_row(&ROWS[i], &o, meshes);
        ran += oc.ran;
        passed += oc.pass;
    }
    printf("\n%d of %d rows searched, %d at or below the expert's estimate and fitting\n", ran, rows, passed);
    return 0;
}
