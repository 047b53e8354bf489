/*
 * fuzz_text.c - libFuzzer target for the small languages a user types
 * besides modules: schedules (applied to a fixed module and lowered), mesh
 * specs, device JSON and redistribution types.  The first byte picks the
 * parser, the rest is its text.  Every input must give a result or an
 * error with a message; a schedule that applies must lower to a
 * device-local module whose printed text parses again to an equal module
 * (what `autopart apply` prints, users feed back), and that `autopart
 * check` finds equivalent to the module ($FUZZ_TEXT_MODULE names another
 * module than the fixed one, module_of).  Aborts on a violation,
 * which libFuzzer reports as a finding; ASan and UBSan report the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "ircheck.h"
#include "cost.h"
#include "ir.h"
#include "parse.h"
#include "partir.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Arguments named as JAX names them (schedules select them by glob), a
 * matmul, a broadcast, reductions, transposes, a reshape, slices and a
 * concatenation: what tiling, propagation and the lowering's collectives,
 * halos and gathers all reach. */
static const char module_text[] =
    "func.func @main(%arg0: tensor<8x16xf32> loc(\"batch['x']\"), %arg1: tensor<16x32xf32> loc(\"params['w']\"), "
    "%arg2: tensor<32xf32> loc(\"params['b']\")) -> (tensor<8x32xf32>, tensor<32xf32>, tensor<8x4xf32>, "
    "tensor<8x24xf32>) {\n"
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, "
    "tensor<16x32xf32>) -> tensor<8x32xf32>\n"
    "  %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<32xf32>) -> tensor<8x32xf32>\n"
    "  %2 = stablehlo.add %0, %1 : tensor<8x32xf32>\n"
    "  %3 = stablehlo.tanh %2 : tensor<8x32xf32>\n"
    "  %4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
    "  %5 = stablehlo.reduce(%3 init: %4) applies stablehlo.add across dimensions = [0] : (tensor<8x32xf32>, "
    "tensor<f32>) -> tensor<32xf32>\n"
    "  %6 = stablehlo.transpose %3, dims = [1, 0] : (tensor<8x32xf32>) -> tensor<32x8xf32>\n"
    "  %7 = stablehlo.transpose %6, dims = [1, 0] : (tensor<32x8xf32>) -> tensor<8x32xf32>\n"
    "  %8 = stablehlo.reshape %3 : (tensor<8x32xf32>) -> tensor<8x4x8xf32>\n"
    "  %9 = stablehlo.reduce(%8 init: %4) applies stablehlo.maximum across dimensions = [2] : (tensor<8x4x8xf32>, "
    "tensor<f32>) -> tensor<8x4xf32>\n"
    "  %10 = stablehlo.slice %0 [0:8, 4:20] : (tensor<8x32xf32>) -> tensor<8x16xf32>\n"
    "  %11 = stablehlo.concatenate %10, %arg0, dim = 1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>\n"
    "  %12 = stablehlo.slice %11 [0:8, 0:24] : (tensor<8x32xf32>) -> tensor<8x24xf32>\n"
    "  return %7, %5, %9, %12 : tensor<8x32xf32>, tensor<32xf32>, tensor<8x4xf32>, tensor<8x24xf32>\n"
    "}\n";

static void need_message(const ap_error *err)
{
    if (err->code == 0 || err->msg[0] == '\0')
        abort();
}

/* The module schedules go to: module_text on x=2,y=4, or the file
 * $FUZZ_TEXT_MODULE on the mesh $FUZZ_TEXT_MESH (default x=2,y=4), to
 * hunt on a program of one's choice (a zoo model, a real export). */
static const char *module_of(size_t *len, const char **name)
{
    static char *file_text;
    static size_t file_len;
    const char *path = getenv("FUZZ_TEXT_MODULE");
    *name = path ? path : "fixed.mlir";
    if (!path) {
        *len = sizeof module_text - 1;
        return module_text;
    }
    if (!file_text) {
        FILE *f = fopen(path, "rb");
        if (!f || fseek(f, 0, SEEK_END) != 0) {
            fprintf(stderr, "FUZZ_TEXT_MODULE: cannot read %s\n", path);
            abort();
        }
        long n = ftell(f);
        rewind(f);
        file_text = malloc(n > 0 ? (size_t)n : 1);
        if (!file_text || n <= 0 || fread(file_text, 1, (size_t)n, f) != (size_t)n)
            abort();
        fclose(f);
        file_len = (size_t)n;
    }
    *len = file_len;
    return file_text;
}

static void fuzz_schedule(const char *text)
{
    static ir_mesh mesh;
    static bool have_mesh;
    ap_error err;
    if (!have_mesh) {
        const char *spec = getenv("FUZZ_TEXT_MESH");
        if (ir_mesh_parse(spec ? spec : "x=2,y=4", &mesh, &err) < 0) {
            fprintf(stderr, "FUZZ_TEXT_MESH: %s\n", err.msg);
            abort();
        }
        have_mesh = true;
    }
    size_t len;
    const char *name;
    const char *src = module_of(&len, &name);
    ir_module *m = NULL;
    if (ir_parse(src, len, name, IR_FMT_STABLEHLO, &m, &err) < 0) {
        fprintf(stderr, "the module does not parse: %s\n", err.msg);
        abort();
    }
    apply_state st;
    memset(&st, 0, sizeof st);
    if (apply_open_module(m, NULL, &mesh, false, &st, &err) < 0) {
        fprintf(stderr, "the module does not open: %s\n", err.msg);
        abort();
    }
    if (apply_schedule(&st, text, NULL, NULL, &err) != 0) {
        need_message(&err);
        goto done;
    }
    if (apply_lower(&st, NULL, NULL, &err) != 0) {
        need_message(&err);
        goto done;
    }
    ap_buf a;
    ap_buf_init(&a);
    if (ir_print(st.lw.module, &a, NULL) < 0)
        abort();
    ir_module *back = NULL;
    if (ir_parse(a.data, a.len, "lowered.mlir", IR_FMT_STABLEHLO, &back, &err) < 0) {
        fprintf(stderr, "the lowered module does not parse: %d:%d %s\n%s\n", err.line, err.col, err.msg, a.data);
        abort();
    }
    char why[512];
    if (!ir_module_equal(st.lw.module, back, why, sizeof why)) {
        fprintf(stderr, "the lowered module's round trip differs: %s\n%s\n", why, a.data);
        abort();
    }
    ir_module_free(back);
    ap_buf_free(&a);
    /* and it computes what the module does: `autopart check`'s verdict */
    ir_check_opts opts = IR_CHECK_OPTS_DEFAULT;
    ir_check_report rep;
    memset(&rep, 0, sizeof rep);
    int rc = ir_check(st.p, &opts, &rep, &err);
    if (rc == AP_ECONFLICT || (rc == 0 && !rep.ok)) {
        fprintf(stderr, "not equivalent: %s\nschedule:\n%s\n", rc ? err.msg : "a result beyond its tolerance",
                text);
        for (uint32_t i = 0; i < rep.n_results; i++)
            fprintf(stderr, "  %s %s: error %g %g, tol %g (%s)\n", rep.results[i].name, rep.results[i].type,
                    rep.results[i].error[0], rep.results[i].error[1], rep.results[i].tol, rep.results[i].tol_basis);
        abort();
    }
    if (rc < 0)
        need_message(&err);
    ir_check_report_free(&rep);
done:
    apply_state_free(&st);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    /* the parsers take NUL-terminated text (a NUL inside ends it early,
     * as it does for a C string from the command line or the wire) */
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    ap_error err;
    switch (data[0] % 5) {
    case 0:
        fuzz_schedule(text);
        break;
    case 1: {
        ir_mesh mesh;
        if (ir_mesh_parse(text, &mesh, &err) < 0)
            need_message(&err);
        break;
    }
    case 2: {
        cost_mesh cm;
        if (cost_mesh_parse(text, &cm, &err) < 0)
            need_message(&err);
        break;
    }
    case 3: {
        cost_device dev;
        if (cost_device_from_json(text, strlen(text), &dev, &err) < 0)
            need_message(&err);
        break;
    }
    case 4: {
        static ir_mesh mesh;
        static bool have_mesh;
        if (!have_mesh) {
            if (ir_mesh_parse("x=4,y=6", &mesh, &err) < 0)
                abort();
            have_mesh = true;
        }
        ir_redist_type t;
        if (ir_redist_parse_type(&mesh, text, &t, &err) < 0)
            need_message(&err);
        break;
    }
    }
    free(text);
    return 0;
}
