/*
 * zoo.c - how fast the model zoo's generator writes the largest steps, and
 * in how much memory: `modelgen transformer --config NAME ...` run as a
 * child for each row, its wall time and peak RSS (from wait4) printed next
 * to its op count and output size.  The target: llama3_405b
 * unrolled (126 layers) in under 60 s and 2 GiB.
 *
 *   bench_zoo            the table below
 *   bench_zoo ARGS...    one row of your own (e.g. "llama3_70b remat=full")
 */
#include "bench.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *const rows[] = {
    "llama3_405b",
    "llama3_405b remat=full attention=flash",
    "llama3_405b remat=dots_no_batch attention=flash microbatches=4",
    "llama3_405b scan=1",
    "gpt3_175b",
    "mixtral_8x7b remat=full",
    "llama3_8b attention=flash remat=dots",
};

/* Runs modelgen on one row; prints its figures.  Returns 0 or -1. */
static int run_row(const char *args)
{
    char path[] = "/tmp/autopart-bench-zoo-XXXXXX", cmd[1024];
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return -1;
    }
    close(fd);
    snprintf(cmd, sizeof cmd, "exec '%s/tests/models/modelgen' transformer --config %s -q -o '%s'", AP_SOURCE_DIR,
             args, path);
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        unlink(path);
        return -1;
    }
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("wait4");
        unlink(path);
        return -1;
    }
    double secs = bench_now() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench: modelgen failed: %s\n", cmd);
        unlink(path);
        return -1;
    }
    char *text;
    size_t len;
    ap_error err;
    if (ap_read_file(path, &text, &len, &err) < 0)
        bench_die(path, &err);
    unlink(path);
    long ops = 0; /* counted as the zoo's README counts them (shlo.count_ops) */
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        const char *s = line + strspn(line, " ");
        ops += strstr(s, "= stablehlo.") || strstr(s, "\"stablehlo.") || !strncmp(s, "stablehlo.return", 16) ||
               !strncmp(s, "return ", 7);
        line = nl ? nl + 1 : NULL;
    }
    ap_free(text);
    printf("%-62s %8.2f s %7.0f MiB %9ld ops %7.1f MiB text\n", args, secs, (double)ru.ru_maxrss / 1024.0, ops,
           (double)len / (1 << 20));
    return 0;
}

int main(int argc, char **argv)
{
    printf("%-62s %10s %11s %13s %12s\n", "modelgen transformer --config", "wall", "peak RSS", "ops",
           "output");
    int rc = 0;
    if (argc > 1) {
        char args[900] = "";
        for (int i = 1; i < argc; i++)
            snprintf(args + strlen(args), sizeof args - strlen(args), "%s%s", i > 1 ? " " : "", argv[i]);
        return run_row(args) < 0;
    }
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        rc |= run_row(rows[i]) < 0;
    return rc;
}
