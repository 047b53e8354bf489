/*
 * bench/hlo.c - speed and memory of the XLA HLO text parser on every
 * file of the HLO corpus (or the files named), and on a generated module of
 * a given size (--mb N; 0 leaves it out).
 *
 *   bench_parse_hlo [--repeat R] [--mb N] [FILE...]
 *
 * Prints, per file, the best parse time of R runs as MB/s, the IR arena
 * size and the peak RSS of a fresh child process that parses the file once
 * (VmHWM of a re-executed child, less that of one that only reads the
 * file), both relative to the text.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Peak RSS (kB) of this process's address space: VmHWM (ru_maxrss would
 * include the image forked from the parent before exec). */
static long self_peak_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    if (kb < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = ru.ru_maxrss;
    }
    return kb;
}

/* Peak RSS (kB) of a fresh process (this program re-executed) that reads
 * the file and, when `parse`, parses it once; it reports through a pipe. */
static long child_peak_kb(const char *path, bool parse)
{
    int fd[2];
    if (pipe(fd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        execl("/proc/self/exe", "bench_parse_hlo", parse ? "--rss-parse" : "--rss-read", path, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = {0};
    ssize_t n = pid < 0 ? -1 : read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || n <= 0)
        return -1;
    return atol(buf);
}

/* The child side of child_peak_kb: prints its peak RSS in kB. */
static int rss_child(const char *path, bool parse)
{
    char *text;
    size_t len;
    ap_error err;
    if (ap_read_file(path, &text, &len, &err) < 0)
        return 1;
    int rc = 0;
    if (parse) {
        ir_module *m;
        rc = ir_parse(text, len, "bench.hlo", IR_FMT_HLO, &m, &err);
        if (rc == 0)
            ir_module_free(m);
    }
    ap_free(text);
    printf("%ld\n", self_peak_kb());
    return rc == 0 ? 0 : 1;
}

/* One line of figures for the file at path, shown as `name` (NULL: the
 * file's name). */
static void bench_file(const char *path, const char *name, int repeat)
{
    char *text;
    size_t len;
    ap_error err;
    const char *slash = strrchr(path, '/');
    if (!name)
        name = slash ? slash + 1 : path;
    if (ap_read_file(path, &text, &len, &err) < 0) {
        printf("%s: %s\n", path, err.msg);
        return;
    }
    double best = 1e30;
    size_t ir_bytes = 0;
    uint64_t ops = 0;
    for (int r = 0; r < repeat; r++) {
        ir_module *m;
        double t0 = bench_now();
        if (ir_parse(text, len, name, IR_FMT_HLO, &m, &err) < 0) {
            char msg[800];
            ap_error_format(&err, msg, sizeof msg);
            printf("%s\n", msg);
            ap_free(text);
            return;
        }
        double t = bench_now() - t0;
        best = t < best ? t : best;
        if (r == 0) {
            ir_stats st;
            ir_bytes = ir_module_bytes(m);
            if (ir_stats_compute(m, &st) == 0) {
                ops = st.n_ops;
                ir_stats_free(&st);
            }
        }
        ir_module_free(m);
    }
    long base = child_peak_kb(path, false), peak = child_peak_kb(path, true);
    double mb = (double)len / 1e6;
    printf("%-52s %6.2f MB %7llu ops  parse %7.1f MB/s  IR %5.2fx text  peak RSS +%6.1f MB (%4.2fx text)\n", name, mb,
           (unsigned long long)ops, mb / best, (double)ir_bytes / (double)len, (double)(peak - base) / 1024.0,
           (double)(peak - base) * 1024.0 / (double)len);
    ap_free(text);
}

/* A training-step-like HLO module of about `mb` MB in a temporary file
 * (its path into path): MLP layers as XLA prints them, with layouts,
 * metadata on some instructions and a reduce per layer.  Returns false
 * when the file cannot be written. */
static bool generate(long mb, char *path, size_t path_size)
{
    snprintf(path, path_size, "/tmp/bench_parse_hlo_XXXXXX");
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f)
        return false;
    fprintf(f, "HloModule jit_train_step, num_partitions=8\n\n"
               "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
               "ENTRY main {\n"
               "  x0 = bf16[8,2048,4096]{2,1,0} parameter(0), sharding={devices=[8,1,1]<=[8]}, "
               "metadata={op_name=\"batch['inputs']\"}\n"
               "  w1 = bf16[4096,16384]{1,0} parameter(1), metadata={op_name=\"params['w_up']\"}\n"
               "  w2 = bf16[16384,4096]{1,0} parameter(2), metadata={op_name=\"params['w_down']\"}\n"
               "  z = f32[] constant(0)\n");
    long i = 0;
    for (; ftell(f) < mb * 1000000; i++)
        fprintf(f,
                "  d%ld = bf16[8,2048,16384]{2,1,0} dot(x%ld, w1), lhs_contracting_dims={2}, rhs_contracting_dims={0}, "
                "metadata={op_name=\"jit(train_step)/layer_%ld/mlp/dot_general\" source_file=\"model.py\" "
                "source_line=%ld}\n"
                "  l%ld = bf16[8,2048,16384]{2,1,0} logistic(d%ld), metadata={op_name=\"jit(train_step)/layer_%ld/mlp/"
                "logistic\" source_file=\"model.py\" source_line=%ld}\n"
                "  m%ld = bf16[8,2048,16384]{2,1,0} multiply(d%ld, l%ld)\n"
                "  o%ld = bf16[8,2048,4096]{2,1,0} dot(m%ld, w2), lhs_contracting_dims={2}, rhs_contracting_dims={0}\n"
                "  c%ld = f32[8,2048,4096]{2,1,0} convert(o%ld)\n"
                "  r%ld = f32[8,2048]{1,0} reduce(c%ld, z), dimensions={2}, to_apply=add\n"
                "  b%ld = f32[8,2048,4096]{2,1,0} broadcast(r%ld), dimensions={0,1}\n"
                "  s%ld = f32[8,2048,4096]{2,1,0} subtract(c%ld, b%ld)\n"
                "  x%ld = bf16[8,2048,4096]{2,1,0} convert(s%ld)\n",
                i, i, i % 48, 100 + i % 50, i, i, i % 48, 101 + i % 50, i, i, i, i, i, i, i, i, i, i, i, i, i, i,
                i + 1, i);
    fprintf(f, "  ROOT out = bf16[8,2048,4096]{2,1,0} copy(x%ld)\n}\n", i);
    return fclose(f) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    int repeat = 5, first = argc;
    long mb = 50;
    if (argc == 3 && (!strcmp(argv[1], "--rss-parse") || !strcmp(argv[1], "--rss-read")))
        return rss_child(argv[2], !strcmp(argv[1], "--rss-parse"));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--mb") && i + 1 < argc) {
            mb = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--help")) {
            printf("usage: bench_parse_hlo [--repeat R] [--mb N] [FILE...]\n");
            return 0;
        } else {
            first = i;
            break;
        }
    }
    if (repeat < 1)
        repeat = 1;
    printf("best of %d parses; IR: arena bytes / text bytes; peak RSS: growth of a child parsing once\n", repeat);
    if (mb > 0) {
        char path[64], name[64];
        snprintf(name, sizeof name, "generated (%ld MB)", mb);
        if (generate(mb, path, sizeof path))
            bench_file(path, name, repeat);
        else
            printf("cannot write the generated module to %s\n", path);
        unlink(path);
    }
    if (first < argc) {
        for (int i = first; i < argc; i++)
            bench_file(argv[i], NULL, repeat);
        return 0;
    }
    const char *dir = AP_SHARED_DIR "/corpus/hlo";
    DIR *d = opendir(dir);
    if (!d) {
        printf("cannot open %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".hlo") == 0) {
            names = realloc(names, sizeof *names * (n + 1));
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        bench_file(path, NULL, repeat);
        free(names[i]);
    }
    free(names);
    return 0;
}
