/*
 * bench/parse.c - parse and print speed and memory of the StableHLO parser
 * on the largest corpus file and on a generated module of a given size
 * (default 50 MB, JAX style: pretty ops, locations, an alias table).
 *
 *   bench_parse [--mb N] [--repeat R] [FILE...]
 *
 * Prints MB/s for parse and print and the peak RSS of a fresh process
 * parsing each input once (measured in a child so earlier inputs do not
 * count), as a multiple of the text size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* A transformer-like chain of ops written the way JAX prints them. */
static char *generate(size_t target, size_t *len)
{
    ap_buf b;
    ap_buf_init(&b);
    ap_buf_puts(&b, "module @jit_train_step attributes {mhlo.num_partitions = 1 : i32} {\n"
                    "  func.func public @main(%arg0: tensor<48x2048x4096xbf16> loc(\"batch['inputs']\"), "
                    "%arg1: tensor<4096x16384xbf16> loc(\"params['w_up']\"), "
                    "%arg2: tensor<16384x4096xbf16> loc(\"params['w_down']\"), "
                    "%arg3: tensor<4096xbf16> loc(\"params['scale']\")) -> tensor<48x2048x4096xbf16> {\n"
                    "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<bf16>\n");
    long v = 0, loc = 0;
    const char *x = "%arg0";
    char cur[32], prev[32];
    snprintf(cur, sizeof cur, "%s", x);
    while (b.len < target) {
        long base = v;
        ap_buf_printf(&b,
                      "    %%%ld = stablehlo.dot_general %s, %%arg1, contracting_dims = [2] x [0] : "
                      "(tensor<48x2048x4096xbf16>, tensor<4096x16384xbf16>) -> tensor<48x2048x16384xbf16> loc(#loc%ld)\n",
                      base, cur, loc % 1000 + 1);
        ap_buf_printf(&b, "    %%%ld = stablehlo.logistic %%%ld : tensor<48x2048x16384xbf16> loc(#loc%ld)\n", base + 1,
                      base, (loc + 1) % 1000 + 1);
        ap_buf_printf(&b, "    %%%ld = stablehlo.multiply %%%ld, %%%ld : tensor<48x2048x16384xbf16> loc(#loc%ld)\n",
                      base + 2, base, base + 1, (loc + 2) % 1000 + 1);
        ap_buf_printf(&b,
                      "    %%%ld = stablehlo.dot_general %%%ld, %%arg2, contracting_dims = [2] x [0] : "
                      "(tensor<48x2048x16384xbf16>, tensor<16384x4096xbf16>) -> tensor<48x2048x4096xbf16> loc(#loc%ld)\n",
                      base + 3, base + 2, (loc + 3) % 1000 + 1);
        ap_buf_printf(&b,
                      "    %%%ld = stablehlo.broadcast_in_dim %%arg3, dims = [2] : (tensor<4096xbf16>) -> "
                      "tensor<48x2048x4096xbf16> loc(#loc%ld)\n",
                      base + 4, (loc + 4) % 1000 + 1);
        ap_buf_printf(&b, "    %%%ld = stablehlo.multiply %%%ld, %%%ld : tensor<48x2048x4096xbf16> loc(#loc%ld)\n",
                      base + 5, base + 3, base + 4, (loc + 5) % 1000 + 1);
        ap_buf_printf(&b,
                      "    %%%ld = stablehlo.reduce(%%%ld init: %%cst) applies stablehlo.add across dimensions = [2] : "
                      "(tensor<48x2048x4096xbf16>, tensor<bf16>) -> tensor<48x2048xbf16> loc(#loc%ld)\n",
                      base + 6, base + 5, (loc + 6) % 1000 + 1);
        ap_buf_printf(&b,
                      "    %%%ld = stablehlo.broadcast_in_dim %%%ld, dims = [0, 1] : (tensor<48x2048xbf16>) -> "
                      "tensor<48x2048x4096xbf16> loc(#loc%ld)\n",
                      base + 7, base + 6, (loc + 7) % 1000 + 1);
        ap_buf_printf(&b, "    %%%ld = stablehlo.add %%%ld, %s : tensor<48x2048x4096xbf16> loc(#loc%ld)\n", base + 8,
                      base + 7, cur, (loc + 8) % 1000 + 1);
        snprintf(prev, sizeof prev, "%s", cur);
        snprintf(cur, sizeof cur, "%%%ld", base + 8);
        v += 9;
        loc += 9;
    }
    ap_buf_printf(&b, "    return %s : tensor<48x2048x4096xbf16>\n  }\n}\n", cur);
    for (int i = 1; i <= 1000; i++)
        ap_buf_printf(&b, "#loc%d = loc(\"jit(train_step)/jit(main)/transformer/layer_%d/mlp/dot_general\"(\"train.py\":%d:7))\n",
                      i, i, 100 + i);
    return ap_buf_take(&b, len);
}

static long peak_rss_kb_child(const char *text, size_t len)
{
    pid_t pid = fork();
    if (pid == 0) {
        ir_module *m;
        ap_error err;
        int rc = ir_parse(text, len, "bench", IR_FMT_AUTO, &m, &err);
        if (rc == 0)
            ir_module_free(m);
        _exit(rc == 0 ? 0 : 1);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0)
        return -1;
    return ru.ru_maxrss;
}

static long base_rss_kb(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    return ru.ru_maxrss;
}

static void bench_text(const char *name, const char *text, size_t len, int repeat)
{
    double best_parse = 1e30, best_print = 1e30;
    ir_module *m = NULL;
    ap_error err;
    for (int r = 0; r < repeat; r++) {
        double t0 = bench_now();
        if (ir_parse(text, len, name, IR_FMT_AUTO, &m, &err) < 0) {
            char msg[800];
            ap_error_format(&err, msg, sizeof msg);
            printf("%s: %s\n", name, msg);
            return;
        }
        double t1 = bench_now();
        ap_buf b;
        ap_buf_init(&b);
        ir_print(m, &b, NULL);
        double t2 = bench_now();
        if (t1 - t0 < best_parse)
            best_parse = t1 - t0;
        if (t2 - t1 < best_print)
            best_print = t2 - t1;
        ap_buf_free(&b);
        if (r + 1 < repeat)
            ir_module_free(m);
    }
    size_t ir_bytes = ir_module_bytes(m);
    ir_module_free(m);
    /* the child inherits the text already in memory: count only its growth */
    long base = base_rss_kb();
    long peak = peak_rss_kb_child(text, len);
    double mb = (double)len / 1e6;
    printf("%-48s %8.2f MB  parse %7.1f MB/s  print %7.1f MB/s  IR %5.2fx text  peak RSS %5.2fx text\n", name, mb,
           mb / best_parse, mb / best_print, (double)ir_bytes / (double)len,
           (double)(peak - base) * 1024.0 / (double)len + 1.0);
}

int main(int argc, char **argv)
{
    size_t mb = 50;
    int repeat = 3;
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc)
            mb = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: bench_parse [--mb N] [--repeat R] [FILE...]\n");
            return 0;
        } else {
            first_file = i;
            break;
        }
    }
    printf("IR: arena bytes / text bytes; peak RSS: of a process holding the text and parsing it, / text bytes\n");
    const char *defaults[] = {AP_SHARED_DIR "/corpus/stablehlo/tt_qwen3_32b_tp8_manual.mlir",
                              AP_SHARED_DIR "/corpus/hlo/xla_maxtext_deepseek_train_step_4dev_preopt.hlo"};
    int n_files = first_file < argc ? argc - first_file : 2;
    for (int i = 0; i < n_files; i++) {
        const char *path = first_file < argc ? argv[first_file + i] : defaults[i];
        char *text;
        size_t len;
        ap_error err;
        if (ap_read_file(path, &text, &len, &err) < 0) {
            printf("%s: %s\n", path, err.msg);
            continue;
        }
        const char *slash = strrchr(path, '/');
        bench_text(slash ? slash + 1 : path, text, len, repeat);
        ap_free(text);
    }
    if (mb > 0) {
        size_t len;
        char *text = generate(mb * 1000 * 1000, &len);
        char name[64];
        snprintf(name, sizeof name, "generated (%zu MB, JAX style)", mb);
        bench_text(name, text, len, repeat);
        ap_free(text);
    }
    return 0;
}
