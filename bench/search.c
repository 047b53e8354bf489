/*
 * bench/search.c - the automatic partitioning search against the
 * acceptance of issue 12, as a table:
 *
 *   t32-bp     T32 {batch:8, model:4} on tpu_v3, no memory limit, manual BP,
 *              search on `model`: step time within 2% of BP+MP, per seed,
 *              within 1,000 episodes; time to reach it
 *   t32-free   the same from scratch on both axes: at least as good as BP+MP
 *   t32-mem    manual BP, both axes, --memory-limit 240GiB (--memory-limit
 *              GIB): per seed, within 2% of the best known schedule that
 *              fits (BP+MP, +Z2, +Z3, the search's best with no limit +Z2
 *              or +Z3, or the fastest seed's result)
 *   unet, gns  the paper configs from BP, both axes: better than BP alone
 *   llama      tt_llama3_2_3b auto on {model:2} and {model:8} (h100) against
 *              the human sharding of tt_llama3_2_3b_manual_sdy imported
 *   speed      episodes/s on T32 from BP on `model` (per thread count of
 *              --threads, 1,2 by default; --speed-episodes each, 600 by
 *              default; median of 3), where an episode's time goes, and the
 *              fast scorer against the full lowering per candidate
 *   speed-70b  the same on llama3_70b (80 layers unrolled) on {batch:8,
 *              model:8} h100 from BP on `model`
 *   ceiling    what the machine allows the speed section's search: per
 *              thread count T above 1 of --threads, 3 alternated rounds of
 *              one 1-thread search alone, T 1-thread searches in T
 *              processes at once (sharing nothing but the machine: their
 *              summed rate over the one alone is the most T threads could
 *              give), and one T-thread search
 *   t48        T48 from BP on `model`: wall time to the BP+MP cost
 *   determinism  seeds 1-5 x threads 1, 2: identical schedules
 *
 *   bench_search [--seeds N] [--threads T[,T...]] [--batch N] [--memory-limit GIB]
 *                [--mem-episodes N] [--speed-episodes N] [--only SECTION[,SECTION]]
 *
 * --threads: a list runs the speed sections once per count (e.g.
 * `--only speed,speed-70b --threads 1,2,4,8,16` on a 16-core machine); the
 * other sections use its last count (2 by default).
 *
 * Figures depend on the machine's load: run it when the machine is quiet,
 * or read the episodes/s as a lower bound.
 */
#include "bench.h"

#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "cost.h"
#include "search.h"

/* --batch: leaves per batch for every search here (0: the search's default) */
static int batch_size;
/* t32-mem: the limit (--memory-limit GiB) and the budget (--mem-episodes) */
static double mem_limit_gib = 240;
static int mem_episodes = 1000;

typedef struct model {
    ir_module *m;
    ir_pctx *ctx;
} model;

static model load(ir_module *m, const char *mesh_text)
{
    model md;
    ap_error err;
    md.m = m;
    ir_op *f = ir_module_entry(m);
    if (ir_inline_calls(m, f, &err) < 0)
        bench_die("inline", &err);
    ir_mesh mesh;
    if (ir_mesh_parse(mesh_text, &mesh, &err) < 0)
        bench_die("mesh", &err);
    if (ir_pctx_new(m, f, &mesh, &md.ctx, &err) < 0)
        bench_die("context", &err);
    return md;
}

static void unload(model *md)
{
    ir_pctx_free(md->ctx);
    ir_module_free(md->m);
}

static ir_partition *state(const model *md, const char *schedule)
{
    ir_partition *p;
    ap_error err;
    if (ir_partition_new(md->ctx, &p, &err) < 0)
        bench_die("state", &err);
    if (schedule && ir_schedule_apply(p, schedule, &err) < 0)
        bench_die("schedule", &err);
    return p;
}

static cost_report full_cost(const ir_partition *p, const cost_device *dev)
{
    ap_error err;
    cost_report r;
    if (cost_state_estimate(p, dev, NULL, NULL, NULL, &r, &err) < 0)
        bench_die("lower and cost", &err);
    return r;
}

typedef struct target_watch {
    double target, t0, reached;
    int64_t episodes_at;
} target_watch;

static int watch(void *ctx, const search_progress *p)
{
    target_watch *w = ctx;
    if (w->reached < 0 && p->best_fits && p->best_runtime_s <= w->target) {
        w->reached = p->elapsed_s;
        w->episodes_at = p->episodes;
    }
    return 0;
}

static search_result run(const ir_partition *start, search_options *o, target_watch *w)
{
    search_result r;
    ap_error err;
    if (w) {
        w->reached = -1;
        o->progress = watch;
        o->progress_ctx = w;
        o->progress_interval_s = 0.02;
    } else {
        o->progress = NULL;
    }
    if (search_run(start, o, &r, &err) < 0)
        bench_die("search", &err);
    /* a target reached by the last batch shows in the result */
    if (w && w->reached < 0 && r.fits && r.report.runtime_s <= w->target) {
        w->reached = r.best_wall_s;
        w->episodes_at = r.best_episode;
    }
    return r;
}

static double gib(int64_t b) { return (double)b / (1024.0 * 1024 * 1024); }

/* One schedule the t32-mem section knows: printed with its estimate, and
 * the best known that fits when it is (name: what the summary calls it). */
static void known_schedule(const char *label, const char *name, cost_report r, double limit_gib, double *best_s,
                           const char **best_name)
{
    bool fit = gib(r.peak_memory_bytes) <= limit_gib;
    printf("%s: %.4f s, %.1f GiB%s\n", label, r.runtime_s, gib(r.peak_memory_bytes), fit ? "" : " (does not fit)");
    if (fit && r.runtime_s < *best_s) {
        *best_s = r.runtime_s;
        *best_name = name;
    }
}

/* T32 acceptance rows over seeds. */
static void t32_rows(const model *t32, int seeds, int threads, const cost_device *tpu, double bpmp, const char *only)
{
    char *bp = bench_schedule("bp");
    ir_partition *start_bp = state(t32, bp), *start_free = state(t32, NULL);
    if (bench_wants(only, "t32-bp")) {
        int ok = 0;
        double worst = 0, slowest = 0;
        printf("\n### t32-bp: manual BP, search on model, no memory limit (BP+MP %.4f s)\n\n", bpmp);
        printf("| seed | step s | vs BP+MP | best at episode | to within 2%%: s (episode) | eps/s |\n|---|---|---|---|---|---|\n");
        for (int s = 1; s <= seeds; s++) {
            search_options o;
            search_options_init(&o);
            o.device = *tpu;
            o.memory_limit = -1;
            o.axes = 1u << 1;
            o.max_episodes = 1000;
            o.threads = threads;
            o.batch = batch_size;
            o.seed = (uint64_t)s;
            target_watch w = {.target = bpmp * 1.02};
            search_result r = run(start_bp, &o, &w);
            double ratio = r.report.runtime_s / bpmp;
            bool pass = ratio <= 1.02 && w.reached >= 0;
            ok += pass;
            worst = ratio > worst ? ratio : worst;
            slowest = w.reached > slowest ? w.reached : slowest;
            printf("| %d | %.4f | %.3f | %lld | %.2f (%lld) | %.0f |\n", s, r.report.runtime_s, ratio,
                   (long long)r.best_episode, w.reached, (long long)w.episodes_at, r.episodes_per_s);
            fflush(stdout);
            search_result_free(&r);
        }
        printf("\nt32-bp: %d of %d seeds within 2%% of BP+MP within 1000 episodes; worst ratio %.3f; slowest to "
               "reach it %.2f s (%d thread%s)\n",
               ok, seeds, worst, slowest, threads, threads > 1 ? "s" : "");
    }
    if (bench_wants(only, "t32-free")) {
        int ok = 0;
        printf("\n### t32-free: from scratch, both axes, no memory limit\n\n| seed | step s | vs BP+MP | best at "
               "episode |\n|---|---|---|---|\n");
        for (int s = 1; s <= seeds; s++) {
            search_options o;
            search_options_init(&o);
            o.device = *tpu;
            o.memory_limit = -1;
            o.max_episodes = 1000;
            o.threads = threads;
            o.batch = batch_size;
            o.seed = (uint64_t)s;
            search_result r = run(start_free, &o, NULL);
            ok += r.report.runtime_s <= bpmp;
            printf("| %d | %.4f | %.3f | %lld |\n", s, r.report.runtime_s, r.report.runtime_s / bpmp,
                   (long long)r.best_episode);
            fflush(stdout);
            search_result_free(&r);
        }
        printf("\nt32-free: %d of %d seeds at least as good as BP+MP\n", ok, seeds);
    }
    if (bench_wants(only, "t32-mem")) {
        /* the best known schedule that fits: the hand-written ones and
         * every seed's result, whichever is fastest within the limit */
        const char *known[] = {"bp+mp", "bp+mp+z2", "bp+mp+z3"};
        double best_known = INFINITY;
        const char *best_name = "none";
        printf("\n### t32-mem: manual BP, both axes, memory limit %.0f GiB, %d episodes\n\n", mem_limit_gib,
               mem_episodes);
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
            char *text = bench_schedule(known[k]);
            ir_partition *p = state(t32, text);
            known_schedule(known[k], known[k], full_cost(p, tpu), mem_limit_gib, &best_known, &best_name);
            ir_partition_free(p);
            ap_free(text);
        }
        /* what a user would try next: the search's best with no limit
         * (seed 1), made to fit by sharding parameters and optimizer state
         * along batch (ZeRO; z2's atomic parameters may clash with it) */
        {
            search_options o;
            search_options_init(&o);
            o.device = *tpu;
            o.memory_limit = -1;
            o.max_episodes = mem_episodes;
            o.threads = threads;
            o.batch = batch_size;
            search_result r = run(start_bp, &o, NULL);
            printf("the search with no limit: %.4f s, %.1f GiB\n", r.report.runtime_s,
                   gib(r.report.peak_memory_bytes));
            const char *zs[] = {"z2", "z3"};
            for (size_t k = 0; k < sizeof zs / sizeof zs[0]; k++) {
                char *z = bench_schedule(zs[k]);
                ap_buf b;
                ap_buf_init(&b);
                ap_buf_printf(&b, "%s\n%s\npropagate\n", r.schedule, z);
                ir_partition *p = state(t32, NULL);
                ap_error err;
                if (ir_schedule_apply(p, b.data, &err) < 0) {
                    printf("  + %s: does not apply (%s)\n", zs[k], err.msg);
                } else {
                    char label[16];
                    snprintf(label, sizeof label, "  + %s", zs[k]);
                    known_schedule(label,
                                   zs[k][1] == '3' ? "the search with no limit + z3" : "the search with no limit + z2",
                                   full_cost(p, tpu), mem_limit_gib, &best_known, &best_name);
                }
                ir_partition_free(p);
                ap_buf_free(&b);
                ap_free(z);
            }
            search_result_free(&r);
        }
        double *rt = ap_calloc((size_t)seeds + 1, sizeof *rt);
        bool *fit = ap_calloc((size_t)seeds + 1, sizeof *fit);
        printf("\n| seed | step s | peak GiB | fits | best at episode | wall s |\n|---|---|---|---|---|---|\n");
        for (int s = 1; s <= seeds; s++) {
            search_options o;
            search_options_init(&o);
            o.device = *tpu;
            o.memory_limit = mem_limit_gib * 1024 * 1024 * 1024;
            o.max_episodes = mem_episodes;
            o.threads = threads;
            o.batch = batch_size;
            o.seed = (uint64_t)s;
            search_result r = run(start_bp, &o, NULL);
            rt[s] = r.report.runtime_s;
            fit[s] = r.fits;
            if (r.fits && r.report.runtime_s < best_known) {
                best_known = r.report.runtime_s;
                best_name = "a seed's result";
            }
            printf("| %d | %.4f | %.1f | %s | %lld | %.1f |\n", s, r.report.runtime_s,
                   gib(r.report.peak_memory_bytes), r.fits ? "yes" : "NO", (long long)r.best_episode, r.wall_s);
            fflush(stdout);
            search_result_free(&r);
        }
        int ok = 0, fits_n = 0;
        double worst = 0;
        for (int s = 1; s <= seeds; s++) {
            fits_n += fit[s];
            double ratio = fit[s] ? rt[s] / best_known : INFINITY;
            ok += ratio <= 1.02;
            worst = ratio > worst ? ratio : worst;
        }
        printf("\nt32-mem: %d of %d seeds fit in %.0f GiB; %d of %d within 2%% of the best known that fits (%.4f s, "
               "%s); worst ratio %.4f\n",
               fits_n, seeds, mem_limit_gib, ok, seeds, best_known, best_name, worst);
        ap_free(rt);
        ap_free(fit);
    }
    ir_partition_free(start_bp);
    ir_partition_free(start_free);
    ap_free(bp);
}

/* The design's choices against their alternatives on T32 (first seeds):
 * UCT's constant, whole expansion against progressive widening, the prior
 * order against the plain one. */
static void variants(const model *t32, int seeds, int threads, const cost_device *tpu, double bpmp)
{
    char *bp = bench_schedule("bp");
    ir_partition *start_bp = state(t32, bp), *start_free = state(t32, NULL);
    static const struct {
        const char *name;
        double c, widen;
        bool no_prior;
    } vs[] = {{"chosen: C 0.7, widening 1 + 2 sqrt(v), prior order", 0.7, 2, false},
              {"C 0.2", 0.2, 2, false},
              {"C 1.5", 1.5, 2, false},
              {"whole expansion (no widening)", 0.7, 1e9, false},
              {"no prior (plain order)", 0.7, 2, true}};
    printf("\n### variants: T32, 1000 episodes, seeds 1-%d; step time (episode within 2%% of BP+MP)\n\n"
           "| variant | from BP, on model | from scratch, both axes |\n|---|---|---|\n",
           seeds);
    for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
        printf("| %s |", vs[v].name);
        for (int which = 0; which < 2; which++) {
            for (int s = 1; s <= seeds; s++) {
                search_options o;
                search_options_init(&o);
                o.device = *tpu;
                o.memory_limit = -1;
                o.axes = which == 0 ? 1u << 1 : 0;
                o.max_episodes = 1000;
                o.threads = threads;
                o.batch = batch_size;
                o.seed = (uint64_t)s;
                o.exploration = vs[v].c;
                o.widening = vs[v].widen;
                o.no_prior = vs[v].no_prior;
                target_watch w = {.target = bpmp * 1.02};
                search_result r = run(which == 0 ? start_bp : start_free, &o, &w);
                if (w.reached >= 0)
                    printf(" %.3f (%lld)", r.report.runtime_s, (long long)w.episodes_at);
                else
                    printf(" %.3f (-)", r.report.runtime_s);
                search_result_free(&r);
            }
            printf(" |");
            fflush(stdout);
        }
        printf("\n");
    }
    ir_partition_free(start_bp);
    ir_partition_free(start_free);
    ap_free(bp);
}

static void paper_model(const char *name, const char *args, int threads, const cost_device *tpu)
{
    model md = load(bench_modelgen_module(args), "batch=8,model=4");
    const ir_pctx *c = md.ctx;
    /* BP: the batch fields' leading dims along `batch` */
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "manual batch");
    for (uint32_t a = 0; a < ir_pctx_num_args(c); a++) {
        const char *n = ir_func_arg_name(ir_pctx_func(c), a);
        if (n && !strncmp(n, "batch", 5))
            ap_buf_printf(&b, " %s=0", n);
    }
    ir_partition *bp = state(&md, b.data);
    ap_buf_free(&b);
    cost_report base = full_cost(bp, tpu);
    search_options o;
    search_options_init(&o);
    o.device = *tpu;
    o.memory_limit = -1;
    o.max_episodes = 1000;
    o.threads = threads;
    o.batch = batch_size;
    search_result r = run(bp, &o, NULL);
    printf("| %s | %.4f | %.4f | %.2fx | %.1f -> %.1f | %lld | %.1f |\n", name, base.runtime_s, r.report.runtime_s,
           base.runtime_s / r.report.runtime_s, gib(base.peak_memory_bytes), gib(r.report.peak_memory_bytes),
           (long long)r.best_episode, r.wall_s);
    fflush(stdout);
    search_result_free(&r);
    ir_partition_free(bp);
    unload(&md);
}

static ir_module *corpus(const char *file)
{
    char path[1024], *text;
    size_t len;
    ap_error err;
    snprintf(path, sizeof path, "%s/corpus/stablehlo/%s", AP_SHARED_DIR, file);
    if (ap_read_file(path, &text, &len, &err) < 0)
        bench_die(path, &err);
    ir_module *m;
    if (ir_parse(text, len, path, IR_FMT_AUTO, &m, &err) < 0)
        bench_die(path, &err);
    ap_free(text);
    return m;
}

static void llama(int n, int threads)
{
    cost_device h100;
    ap_error err;
    cost_device_lookup("h100", &h100, &err);
    char mesh[64];
    /* the human sharding, imported over its own axis name */
    snprintf(mesh, sizeof mesh, "_axis_0=%d", n);
    model man = load(corpus("tt_llama3_2_3b_manual_sdy.mlir"), mesh);
    ap_buf ib;
    ap_buf_init(&ib);
    if (ir_schedule_import(man.m, ir_pctx_func(man.ctx), ir_pctx_mesh(man.ctx), &ib, &err) < 0)
        bench_die("import", &err);
    ir_partition *mp = state(&man, ib.data);
    ap_buf_free(&ib);
    cost_report human = full_cost(mp, &h100);
    ir_partition_free(mp);
    unload(&man);
    snprintf(mesh, sizeof mesh, "model=%d", n);
    model au = load(corpus("tt_llama3_2_3b_unsharded_auto.mlir"), mesh);
    ir_partition *start = state(&au, NULL);
    search_options o;
    search_options_init(&o);
    o.device = h100;
    o.max_episodes = 1000;
    o.threads = threads;
    o.batch = batch_size;
    search_result r = run(start, &o, NULL);
    printf("| llama3.2-3b {model:%d} | %.4f ms (%.2f GiB) | %.4f ms (%.2f GiB) | %s | %lld | %.1f |\n", n,
           human.runtime_s * 1e3, gib(human.peak_memory_bytes), r.report.runtime_s * 1e3,
           gib(r.report.peak_memory_bytes), r.report.runtime_s <= human.runtime_s ? "yes" : "NO",
           (long long)r.best_episode, r.wall_s);
    fflush(stdout);
    search_result_free(&r);
    ir_partition_free(start);
    unload(&au);
}

/* speed: the thread counts to run (--threads LIST), the episodes of each
 * run (--speed-episodes N) */
#define MAX_SPEED_THREADS 16
static int speed_threads[MAX_SPEED_THREADS] = {1, 2}, n_speed_threads = 2;
static int speed_episodes = 600;

/* The 1, 5 and 15-minute load averages for a table's head, -1 each when
 * unknown: the speed and ceiling figures depend on what else runs. */
static void load_average(double load[3])
{
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
}

/* The options of every search the speed and ceiling sections time: no
 * memory limit, speed_episodes, on `axes`, with `threads` threads. */
static void speed_options(search_options *o, const cost_device *dev, uint32_t axes, int threads)
{
    search_options_init(o);
    o->device = *dev;
    o->memory_limit = -1;
    o->axes = axes;
    o->max_episodes = speed_episodes;
    o->threads = threads;
    o->batch = batch_size;
}

/* One speed table: `label`'s search from `start` on the axes `axes`, no
 * memory limit, speed_episodes each, 3 runs per thread count of --threads,
 * the run of the median wall rate giving the row.  Per thread count: the
 * wall rate, per thread; episodes per CPU-second of the process; on an idle
 * machine (one CPU per thread) by the CPU time of the run: its serial part
 * (the tree, the start, the result: the process's CPU time less the
 * evaluations') plus the evaluations' CPU time and what the batches' split
 * of it makes threads wait at the barriers, over the threads. */
static void speed_table(const char *label, const ir_partition *start, const cost_device *dev, uint32_t axes)
{
    double load[3];
    load_average(load);
    printf("\n### speed: %s, %d episodes, median of 3 runs\n\n"
           "load average before: %.2f %.2f %.2f on %ld CPUs.  Episodes per CPU-second count the CPU time the\n"
           "process got (on a shared machine wall-clock figures drop when others run); at the barrier: the\n"
           "share of the threads' batch time spent waiting for the others to finish the batch; idle machine:\n"
           "the episodes/s the run's CPU time gives with one CPU per thread (serial part + (evaluations +\n"
           "barrier waits by CPU time) / threads), and its speed-up over the first row\n\n"
           "| threads | episodes/s (wall) | per thread (wall) | episodes per CPU-second | CPU use | at the barrier "
           "| idle machine: episodes/s | per thread | speed-up |\n|---|---|---|---|---|---|---|---|---|\n",
           label, speed_episodes, load[0], load[1], load[2], sysconf(_SC_NPROCESSORS_ONLN));
    search_result keep[MAX_SPEED_THREADS];
    memset(keep, 0, sizeof keep);
    long keep_faults[MAX_SPEED_THREADS] = {0};
    double idle_first = 0;
    for (int ti = 0; ti < n_speed_threads; ti++) {
        int t = speed_threads[ti];
        double eps[3], epc[3], use[3], barrier[3], idle[3];
        long faults[3];
        search_result r[3];
        for (int rep = 0; rep < 3; rep++) {
            search_options o;
            speed_options(&o, dev, axes, t);
            struct timespec c0, c1;
            struct rusage u0, u1;
            getrusage(RUSAGE_SELF, &u0);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            r[rep] = run(start, &o, NULL);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            getrusage(RUSAGE_SELF, &u1);
            faults[rep] = u1.ru_minflt - u0.ru_minflt;
            double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
            double serial = cpu > r[rep].worker_cpu_s ? cpu - r[rep].worker_cpu_s : 0;
            double idle_s = serial + (r[rep].worker_cpu_s + r[rep].imbalance_s) / t;
            eps[rep] = r[rep].episodes_per_s;
            epc[rep] = cpu > 0 ? (double)r[rep].episodes / cpu : 0;
            use[rep] = cpu / r[rep].wall_s;
            barrier[rep] = r[rep].batch_s > 0 ? 1 - r[rep].busy_s / (t * r[rep].batch_s) : 0;
            idle[rep] = idle_s > 0 ? (double)r[rep].episodes / idle_s : 0;
        }
        /* the run of the median wall rate gives the row */
        int med = 0;
        for (int k = 0; k < 3; k++) {
            int below = 0;
            for (int j = 0; j < 3; j++)
                below += eps[j] < eps[k] || (eps[j] == eps[k] && j < k);
            if (below == 1)
                med = k;
        }
        double idle_med = bench_median(idle, 3);
        if (ti == 0)
            idle_first = idle_med;
        printf("| %d | %.0f | %.0f | %.0f | %.2f CPUs | %.0f%% | %.0f | %.0f | %.2fx |\n", t, eps[med], eps[med] / t,
               bench_median(epc, 3), use[med], barrier[med] * 100, idle_med, idle_med / t,
               idle_first > 0 ? idle_med / idle_first : 0);
        fflush(stdout);
        keep_faults[ti] = faults[med];
        for (int k = 0; k < 3; k++)
            if (k == med)
                keep[ti] = r[k];
            else
                search_result_free(&r[k]);
    }
    /* where an episode's time goes (the median runs); ops planned: what
     * the scorers planned again per state (the further apart the states a
     * scorer sees, the more); page faults: the process's minor faults
     * during the run, result included (memory the kernel had to hand out
     * anew) */
    printf("\n| threads | scored | known | refused | unchanged | replays | cache hits | re-derive ms | apply ms | "
           "score ms | per scored ms | ops planned per scored | page faults |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int ti = 0; ti < n_speed_threads; ti++) {
        const search_result *r = &keep[ti];
        double n = r->scored > 0 ? (double)r->scored : 1;
        printf("| %d | %lld | %lld | %lld | %lld | %lld | %lld | %.2f | %.2f | %.2f | %.2f | %.0f | %ld |\n",
               speed_threads[ti], (long long)r->scored, (long long)r->known, (long long)r->refused,
               (long long)r->unchanged, (long long)r->replays, (long long)r->cache_hits, r->state_s / n * 1e3,
               r->apply_s / n * 1e3, r->score_s / n * 1e3, r->busy_s / n * 1e3, (double)r->replanned / n,
               keep_faults[ti]);
        search_result_free(&keep[ti]);
    }
    fflush(stdout);
}

static void speed(const model *t32, const cost_device *tpu)
{
    char *bp = bench_schedule("bp");
    ir_partition *start = state(t32, bp);
    speed_table("T32 {batch:8, model:4} on tpu_v3 from BP, search on model", start, tpu, 1u << 1);
    /* the fast scorer against the full path on the states of one action
     * (each scored again: without the memo, which would answer it) */
    cost_scorer *sc;
    ap_error err;
    cost_options fresh = {.memo = -1};
    if (cost_scorer_new(t32->ctx, tpu, NULL, &fresh, &sc, &err) < 0)
        bench_die("scorer", &err);
    const char *acts[] = {"tile params['block_*']['mlp']['w_up'] 1 model", "tile params['block_*']['attn']['w_qkv'] 2 model",
                          "tile params['embed'] 0 model", "tile batch['targets'] 1 model"};
    printf("\n| action from BP | propagate ms | fast score ms | full lowering + cost ms |\n|---|---|---|---|\n");
    cost_report r;
    cost_scorer_score(sc, start, &r, &err);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        double tp[5], ts[5], tf[5];
        for (int k = 0; k < 5; k++) {
            ir_partition *q;
            ir_partition_clone(start, &q, &err);
            double a = bench_now();
            char text[256];
            snprintf(text, sizeof text, "%s\npropagate", acts[i]);
            if (ir_schedule_apply(q, text, &err) < 0)
                bench_die("action", &err);
            tp[k] = bench_now() - a;
            cost_scorer_score(sc, start, &r, &err);
            a = bench_now();
            cost_scorer_score(sc, q, &r, &err);
            ts[k] = bench_now() - a;
            a = bench_now();
            full_cost(q, tpu);
            tf[k] = bench_now() - a;
            ir_partition_free(q);
        }
        printf("| %s | %.2f | %.2f | %.2f |\n", acts[i], bench_median(tp, 5) * 1e3, bench_median(ts, 5) * 1e3,
               bench_median(tf, 5) * 1e3);
    }
    cost_scorer_free(sc);
    ir_partition_free(start);
    ap_free(bp);
}

/* ceiling: T1 1-thread searches from `start`, speed_episodes each, in as
 * many processes started at once; fills rate[] with each one's episodes/s
 * (0 where a process failed).  Forked with no other thread running (the
 * searches' workers have ended), so the children may run searches. */
static void searches_at_once(const ir_partition *start, const cost_device *dev, uint32_t axes, int n, double *rate)
{
    int go[2], back[2];
    pid_t pid[MAX_SPEED_THREADS];
    if (pipe(go) < 0 || pipe(back) < 0) {
        perror("bench_search: pipe");
        exit(1);
    }
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            perror("bench_search: fork");
            exit(1);
        }
        if (pid[i] == 0) {
            char c;
            close(go[1]);
            close(back[0]);
            /* all start when the parent closes the pipe, not as each is forked */
            if (read(go[0], &c, 1) < 0)
                _exit(1);
            search_options o;
            speed_options(&o, dev, axes, 1);
            search_result r = run(start, &o, NULL);
            double msg[2] = {(double)i, r.episodes_per_s};
            _exit(write(back[1], msg, sizeof msg) == (ssize_t)sizeof msg ? 0 : 1);
        }
    }
    close(go[0]);
    close(back[1]);
    close(go[1]); /* go */
    for (int i = 0; i < n; i++)
        rate[i] = 0;
    double msg[2];
    while (read(back[0], msg, sizeof msg) == (ssize_t)sizeof msg)
        if (msg[0] >= 0 && msg[0] < n)
            rate[(int)msg[0]] = msg[1];
    close(back[0]);
    for (int i = 0; i < n; i++)
        waitpid(pid[i], NULL, 0);
}

/* One search from `start` with `threads` threads, speed_episodes: its episodes/s. */
static double speed_once(const ir_partition *start, const cost_device *dev, uint32_t axes, int threads)
{
    search_options o;
    speed_options(&o, dev, axes, threads);
    search_result r = run(start, &o, NULL);
    double eps = r.episodes_per_s;
    search_result_free(&r);
    return eps;
}

/* ceiling: see the head comment.  A T-thread search cannot beat T
 * processes that share nothing but the cores' caches and memory: where
 * those slow each other down, the shortfall of the T-thread search's
 * speed-up is the machine's, not the search's. */
static void ceiling(const model *t32, const cost_device *tpu)
{
    char *bp = bench_schedule("bp");
    ir_partition *start = state(t32, bp);
    uint32_t axes = 1u << 1;
    for (int ti = 0; ti < n_speed_threads; ti++) {
        int t = speed_threads[ti];
        if (t < 2)
            continue;
        double load[3];
        load_average(load);
        printf("\n### ceiling: T32 from BP, search on model, %d episodes: %d threads against %d processes\n\n"
               "load average before: %.2f %.2f %.2f on %ld CPUs.  Per round, alternated: one 1-thread search alone,\n"
               "%d 1-thread searches in %d processes started at once, one %d-thread search (episodes/s, wall)\n\n"
               "| round | 1 thread alone | %d processes: each | their sum / alone | %d threads | / alone | / the "
               "processes' sum |\n|---|---|---|---|---|---|---|\n",
               speed_episodes, t, t, load[0], load[1], load[2], sysconf(_SC_NPROCESSORS_ONLN), t, t, t, t, t);
        double procs_x[3], threads_x[3], share[3];
        for (int round = 0; round < 3; round++) {
            double alone = speed_once(start, tpu, axes, 1);
            double rate[MAX_SPEED_THREADS], sum = 0;
            searches_at_once(start, tpu, axes, t, rate);
            char each[MAX_SPEED_THREADS * 12] = "";
            size_t len = 0;
            for (int i = 0; i < t; i++) {
                sum += rate[i];
                len += (size_t)snprintf(each + len, sizeof each - len, "%s%.0f", i ? " + " : "", rate[i]);
            }
            double together = speed_once(start, tpu, axes, t);
            procs_x[round] = alone > 0 ? sum / alone : 0;
            threads_x[round] = alone > 0 ? together / alone : 0;
            share[round] = sum > 0 ? together / sum : 0;
            printf("| %d | %.0f | %s | %.2fx | %.0f | %.2fx | %.0f%% |\n", round + 1, alone, each, procs_x[round],
                   together, threads_x[round], share[round] * 100);
            fflush(stdout);
        }
        printf("\nceiling, %d threads: medians %.2fx for %d processes, %.2fx for the search (%.0f%% of them)\n", t,
               bench_median(procs_x, 3), t, bench_median(threads_x, 3), bench_median(share, 3) * 100);
    }
    ir_partition_free(start);
    ap_free(bp);
}

/* speed-70b: llama3_70b as the zoo writes it (80 layers unrolled, 35,849
 * ops: three times T32) on {batch:8, model:8} h100 from BP, search on model */
static void speed_70b(void)
{
    cost_device h100;
    ap_error err;
    if (cost_device_lookup("h100", &h100, &err) < 0)
        bench_die("h100", &err);
    model md = load(bench_modelgen_module("transformer --config llama3_70b"), "batch=8,model=8");
    char *bp = bench_schedule("bp");
    ir_partition *start = state(&md, bp);
    speed_table("llama3_70b {batch:8, model:8} on h100 from BP, search on model", start, &h100, 1u << 1);
    ir_partition_free(start);
    ap_free(bp);
    unload(&md);
}

/* A --threads list: counts from 1 to 256, comma-separated; false when bad. */
static bool parse_threads(const char *text)
{
    int n = 0;
    for (const char *s = text; *s;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 256 || n == MAX_SPEED_THREADS || (*end && *end != ','))
            return false;
        speed_threads[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    n_speed_threads = n;
    return n > 0;
}

int main(int argc, char **argv)
{
    ap_malloc_one_arena(); /* a search's memory stays for the next (ap.h) */
    int seeds = 25, threads = 2;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (!parse_threads(argv[++i])) {
                fprintf(stderr, "bench_search: --threads wants counts 1..256, comma-separated (at most %d): %s\n",
                        MAX_SPEED_THREADS, argv[i]);
                return 2;
            }
            threads = speed_threads[n_speed_threads - 1];
        } else if (!strcmp(argv[i], "--speed-episodes") && i + 1 < argc)
            speed_episodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch_size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--memory-limit") && i + 1 < argc)
            mem_limit_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--mem-episodes") && i + 1 < argc)
            mem_episodes = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_search [--seeds N] [--threads T[,T...]] [--batch N] [--memory-limit GIB] "
                            "[--mem-episodes N] [--speed-episodes N] [--only SECTION[,SECTION]]\n");
            return 2;
        }
    }
    ap_error err;
    cost_device tpu;
    cost_device_lookup("tpu_v3", &tpu, &err);
    printf("# autopart search: acceptance (issue 12)\n\n%d seeds, %d threads, batch %d, %ld CPUs online, malloc huge pages %s\n",
           seeds, threads, batch_size > 0 ? batch_size : 16, sysconf(_SC_NPROCESSORS_ONLN), bench_huge_pages());
    bool need_t32 = bench_wants(only, "t32-bp") || bench_wants(only, "t32-free") || bench_wants(only, "t32-mem") ||
                    bench_wants(only, "speed") || bench_wants(only, "ceiling") || bench_wants(only, "determinism") ||
                    bench_wants(only, "variants");
    if (need_t32) {
        model t32 = load(bench_modelgen_module("transformer --config t32"), "batch=8,model=4");
        char *bpmp_s = bench_schedule("bp+mp");
        ir_partition *p = state(&t32, bpmp_s);
        cost_report bpmp = full_cost(p, &tpu);
        ir_partition_free(p);
        ap_free(bpmp_s);
        printf("T32 BP+MP on tpu_v3: %.4f s, peak %.1f GiB\n", bpmp.runtime_s, gib(bpmp.peak_memory_bytes));
        if (bench_wants(only, "speed"))
            speed(&t32, &tpu);
        if (bench_wants(only, "ceiling"))
            ceiling(&t32, &tpu);
        t32_rows(&t32, seeds, threads, &tpu, bpmp.runtime_s, only);
        if (bench_wants(only, "variants"))
            variants(&t32, seeds < 3 ? seeds : 3, threads, &tpu, bpmp.runtime_s);
        if (bench_wants(only, "determinism")) {
            char *bp = bench_schedule("bp");
            ir_partition *start = state(&t32, bp);
            int same = 0, total = 0;
            printf("\n### determinism: seeds 1-5 x threads 1, 2 (1000 episodes)\n\n| seed | step s | identical "
                   "|\n|---|---|---|\n");
            for (int s = 1; s <= 5; s++) {
                search_result r[2];
                for (int t = 0; t < 2; t++) {
                    search_options o;
                    search_options_init(&o);
                    o.device = tpu;
                    o.memory_limit = -1;
                    o.axes = 1u << 1;
                    o.max_episodes = 1000;
                    o.threads = t + 1;
                    o.batch = batch_size;
                    o.seed = (uint64_t)s;
                    r[t] = run(start, &o, NULL);
                }
                bool eq = !strcmp(r[0].schedule, r[1].schedule) && r[0].report.runtime_s == r[1].report.runtime_s &&
                          r[0].best_episode == r[1].best_episode;
                same += eq;
                total++;
                printf("| %d | %.4f | %s |\n", s, r[0].report.runtime_s, eq ? "yes" : "NO");
                search_result_free(&r[0]);
                search_result_free(&r[1]);
            }
            printf("\ndeterminism: %d of %d seeds identical across 1 and 2 threads\n", same, total);
            ir_partition_free(start);
            ap_free(bp);
        }
        unload(&t32);
    }
    if (bench_wants(only, "speed-70b"))
        speed_70b();
    if (bench_wants(only, "unet") || bench_wants(only, "gns")) {
        printf("\n### paper models, {batch:8, model:4} on tpu_v3, from BP, both axes, 1000 episodes\n\n| model | BP s "
               "| search s | speedup | peak GiB | best at episode | wall s |\n|---|---|---|---|---|---|---|\n");
        if (bench_wants(only, "unet"))
            paper_model("U-Net", "unet --config paper", threads, &tpu);
        if (bench_wants(only, "gns"))
            paper_model("GNS", "gns --config paper", threads, &tpu);
    }
    if (bench_wants(only, "llama")) {
        printf("\n### real module: tt_llama3_2_3b on h100, 1000 episodes from scratch\n\n| mesh | human (imported) "
               "| search | no worse | best at episode | wall s |\n|---|---|---|---|---|---|\n");
        llama(2, threads);
        llama(8, threads);
    }
    if (bench_wants(only, "t48")) {
        model t48 = load(bench_modelgen_module("transformer --config t48"), "batch=8,model=4");
        char *bpmp_s = bench_schedule("bp+mp"), *bp = bench_schedule("bp");
        ir_partition *p = state(&t48, bpmp_s), *start = state(&t48, bp);
        cost_report bpmp = full_cost(p, &tpu);
        search_options o;
        search_options_init(&o);
        o.device = tpu;
        o.memory_limit = -1;
        o.axes = 1u << 1;
        o.max_episodes = 1000;
        o.threads = threads;
        o.batch = batch_size;
        target_watch w = {.target = bpmp.runtime_s};
        search_result r = run(start, &o, &w);
        printf("\n### t48: from BP on model, %d threads\n\nBP+MP %.4f s; search %.4f s; BP+MP's cost reached after "
               "%.2f s (episode %lld); %lld episodes in %.1f s (%.0f/s)\n",
               threads, bpmp.runtime_s, r.report.runtime_s, w.reached, (long long)w.episodes_at,
               (long long)r.episodes, r.wall_s, r.episodes_per_s);
        search_result_free(&r);
        ir_partition_free(p);
        ir_partition_free(start);
        ap_free(bpmp_s);
        ap_free(bp);
        unload(&t48);
    }
    return 0;
}
