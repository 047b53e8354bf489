/*
 * test_models.c - every model of the zoo (tests/models/modelgen) generates,
 * parses with our parser (types verified), round-trips through the printer,
 * and names its arguments the way tactics select them; the scanned
 * transformer (scan=1: stacked layers run by while loops) computes what the
 * unrolled one computes, run by the reference interpreter.
 */
#include "testlib.h"

#include "cost.h"

#include <math.h>
#include <unistd.h>


static const struct {
    const char *model, *config, *extra;
    int params; /* parameter tensors, 0 when not checked */
} configs[] = {
    {"transformer", "tiny", "", 19},
    {"transformer", "small", "", 37},
    {"transformer", "t32", "", 289},
    {"transformer", "t48", "", 433},
    {"transformer", "tiny", "scan=1", 10},
    {"transformer", "t32", "scan=1", 10},
    {"transformer", "t48", "scan=1", 10},
    /* Llama's layout: RMSNorm, SwiGLU, rotary positions, grouped-query
     * attention, untied output, no biases; and GPT's (every bias, learned
     * positions) */
    {"transformer", "tiny", "norm=rms mlp=swiglu pos=rope tied=0 bias=0 fused_qkv=0 kv_heads=1", 1 + 9 * 2 + 2},
    {"transformer", "tiny", "norm=rms mlp=swiglu pos=rope tied=0 bias=0 fused_qkv=0 kv_heads=1 scan=1", 1 + 9 + 2},
    {"transformer", "small", "pos=learned bias=1 mlp=relu", 2 + 12 * 4 + 2},
    /* every knob at once: routed experts every other block (scanned in
     * units of two), flash attention, remat, micro-batches, mixed precision */
    {"transformer", "tiny",
     "experts=4 moe_every=2 scan=1 attention=flash remat=dots_no_batch microbatches=2 dtype=bf16 param_dtype=f32",
     1 + 9 + 9},
    {"transformer_infer", "tiny", "", 0},
    {"transformer_infer", "it32", "", 0},
    {"unet", "tiny", "", 0},
    {"unet", "paper", "", 0},
    {"gns", "tiny", "", 0},
    {"gns", "paper", "", 0},
    {"mlp", "tiny", "", 0},
    {"mlp", "small", "", 0},
};

START_TEST(model_parses_and_round_trips)
{
    const char *model = configs[_i].model, *config = configs[_i].config;
    char *text = tl_generate_text(model, config, configs[_i].extra);
    char msg[1024], name[128], why[600];
    snprintf(name, sizeof name, "%s-%s%s%s.mlir", model, config, *configs[_i].extra ? "-" : "",
             configs[_i].extra);
    ir_module *m = tl_parse(text, name, msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s: %s", name, msg);
    char *p1 = tl_print(m);
    ir_module *m2 = tl_parse(p1, "printed", msg, sizeof msg);
    ck_assert_msg(m2 != NULL, "%s printed: %s", name, msg);
    ck_assert_msg(ir_module_equal(m, m2, why, sizeof why), "%s: %s", name, why);

    ir_op *f = ir_module_entry(m);
    ck_assert_ptr_nonnull(f);
    int params = 0;
    for (uint32_t i = 0; i < ir_func_num_args(f); i++) {
        const char *arg = ir_func_arg_name(f, i);
        ck_assert_msg(arg != NULL, "%s: argument %u has no location name", name, i);
        params += strncmp(arg, "params[", 7) == 0;
    }
    if (configs[_i].params)
        ck_assert_int_eq(params, configs[_i].params);
    ir_module_free(m);
    ir_module_free(m2);
    ap_free(p1);
    ap_free(text);
}
END_TEST

START_TEST(transformer_names)
{
    char *text = tl_generate_text("transformer", "tiny", "");
    ir_module *m = tl_parse(text, "tiny", NULL, 0);
    ck_assert_ptr_nonnull(m);
    ir_op *f = ir_module_entry(m);
    const char *want[] = {"params['embed']", "params['block_0']['ln1']['scale']",
                          "params['block_0']['attn']['w_qkv']", "params['block_1']['mlp']['w_down']",
                          "opt_state.mu['embed']", "opt_state.nu['block_1']['mlp']['w_down']",
                          "batch['inputs']", "batch['targets']", "step"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        bool found = false;
        for (uint32_t i = 0; i < ir_func_num_args(f); i++)
            found |= strcmp(ir_func_arg_name(f, i), want[k]) == 0;
        ck_assert_msg(found, "no argument named %s", want[k]);
    }
    /* w_qkv is [d_model, 3, heads, head_dim] */
    for (uint32_t i = 0; i < ir_func_num_args(f); i++)
        if (!strcmp(ir_func_arg_name(f, i), "params['block_0']['attn']['w_qkv']")) {
            const ir_type *t = ir_func_arg(f, i)->type;
            ck_assert_int_eq(t->rank, 4);
            ck_assert_int_eq(t->dims[1], 3);
        }
    ir_module_free(m);
    ap_free(text);
}
END_TEST

/* ------------------------------------------------ scanned vs unrolled */

/* Index of the argument (results: false) or result (true) of f named name
 * (loc / jax.result_info), or -1. */
static int find_named(const ir_op *f, const char *name, bool results)
{
    uint32_t n = results ? ir_func_num_results(f) : ir_func_num_args(f);
    for (uint32_t i = 0; i < n; i++) {
        const char *s = NULL;
        if (results) {
            const ir_attr *a = ir_func_result_attr(f, i, "jax.result_info");
            s = a ? a->u.str.s : NULL;
        } else {
            s = ir_func_arg_name(f, i);
        }
        if (s && !strcmp(s, name))
            return (int)i;
    }
    return -1;
}

/* name with its first "['blocks']" replaced by "['block_<layer>']". */
static void layer_name(const char *name, int layer, char *out, size_t size)
{
    const char *p = strstr(name, "['blocks']");
    ck_assert_ptr_nonnull(p);
    snprintf(out, size, "%.*s['block_%d']%s", (int)(p - name), name, layer, p + strlen("['blocks']"));
}

/* The tensor of type t that stacks, along a new leading dim, the L tensors
 * of `from` (arguments or results of unrolled function f) named like `name`
 * with ['blocks'] -> ['block_l']; or a copy of the one named `name` when it
 * has no ['blocks']. */
static ir_tensor *stack_like(const ir_op *f, ir_tensor **from, bool results, const char *name, const ir_type *t, int L)
{
    ap_error err;
    ir_tensor *out = NULL;
    if (!strstr(name, "['blocks']")) {
        int i = find_named(f, name, results);
        ck_assert_msg(i >= 0, "the unrolled model has no %s", name);
        ck_assert_int_eq(ir_tensor_clone(from[i], &out, &err), 0);
        return out;
    }
    size_t total = 0, off = 0;
    uint8_t *buf = NULL;
    for (int l = 0; l < L; l++) {
        char ln[256];
        layer_name(name, l, ln, sizeof ln);
        int i = find_named(f, ln, results);
        ck_assert_msg(i >= 0, "the unrolled model has no %s", ln);
        if (!buf) {
            total = from[i]->nbytes * (size_t)L;
            buf = malloc(total ? total : 1);
            ck_assert_ptr_nonnull(buf);
        }
        ck_assert_uint_eq(from[i]->nbytes * (size_t)L, total);
        memcpy(buf + off, from[i]->data, from[i]->nbytes);
        off += from[i]->nbytes;
    }
    ck_assert_msg(ir_tensor_from_buffer(t, buf, total, &out, &err) == 0, "%s: %s", name, err.msg);
    free(buf);
    return out;
}

static const struct {
    const char *extra;
    int layers;
} scan_variants[] = {
    {"", 2},
    {"layers=3", 3},
    {"layers=3 norm=rms mlp=swiglu pos=rope tied=0 bias=1 fused_qkv=0 kv_heads=1", 3},
    {"layers=3 experts=4 topk=2 mlp=swiglu capacity=0.5", 3},
};

/* transformer --config tiny with scan=1 against the unrolled model on the
 * same random weights (stacked): the loss, every gradient, the updated
 * parameters and Adam moments and the step agree within 1e-5 of max(1,
 * the result's largest magnitude), in f32 through the reference
 * interpreter (ir_interp_run runs the while loops).  Three layers as well,
 * so that reading the wrong layer cannot go unnoticed. */
START_TEST(scan_matches_unrolled)
{
    const char *extra = scan_variants[_i].extra;
    char scan_extra[256];
    snprintf(scan_extra, sizeof scan_extra, "%s scan=1", extra);
    ir_module *mu = tl_generate("transformer", "tiny", extra);
    ir_module *ms = tl_generate("transformer", "tiny", scan_extra);
    ir_op *fu = ir_module_entry(mu), *fs = ir_module_entry(ms);
    int L = scan_variants[_i].layers;
    ap_error err;

    uint32_t nu = ir_func_num_args(fu), ns = ir_func_num_args(fs);
    ir_tensor **au = calloc(nu, sizeof *au), **as = calloc(ns, sizeof *as);
    ck_assert(au && as);
    for (uint32_t i = 0; i < nu; i++) {
        const char *name = ir_func_arg_name(fu, i);
        const ir_type *t = ir_func_arg(fu, i)->type;
        int rc;
        if (!strcmp(name, "step")) {
            int64_t v = 3;
            rc = ir_tensor_from_i64((ir_elem)t->elem, t->rank, t->dims, &v, 1, &au[i], &err);
        } else if (!strncmp(name, "opt_state.nu", 12)) {
            rc = ir_tensor_random_range(t, 100 + i, 0.0, 1.0, &au[i], &err); /* second moments >= 0 */
        } else {
            rc = ir_tensor_random(t, 100 + i, &au[i], &err); /* tokens in [0, 8) < vocab */
        }
        ck_assert_msg(rc == 0, "%s: %s", name, err.msg);
    }
    for (uint32_t i = 0; i < ns; i++)
        as[i] = stack_like(fu, au, false, ir_func_arg_name(fs, i), ir_func_arg(fs, i)->type, L);

    ir_tensor **ru = NULL, **rs = NULL;
    uint32_t nru = 0, nrs = 0;
    ck_assert_msg(ir_interp_run(mu, fu, (const ir_tensor *const *)au, nu, &ru, &nru, NULL, &err) == 0, "unrolled: %s",
                  err.msg);
    ck_assert_msg(ir_interp_run(ms, fs, (const ir_tensor *const *)as, ns, &rs, &nrs, NULL, &err) == 0, "scanned: %s",
                  err.msg);
    uint32_t n_params = 0;
    for (uint32_t i = 0; i < ns; i++)
        n_params += strncmp(ir_func_arg_name(fs, i), "params[", 7) == 0;
    ck_assert_uint_eq(nrs, 1 + 4 * n_params + 1);

    int64_t compared = 0, total = 0, differ = 0;
    double worst = 0;
    for (uint32_t r = 0; r < nru; r++)
        total += ru[r]->numel;
    const ir_type *fst = ir_func_type(fs);
    for (uint32_t r = 0; r < nrs; r++) {
        const ir_attr *info = ir_func_result_attr(fs, r, "jax.result_info");
        ck_assert_ptr_nonnull(info);
        ir_tensor *want = stack_like(fu, ru, true, info->u.str.s, fst->elems[fst->n_inputs + (int)r], L);
        ir_tensor_diff d;
        ck_assert_msg(ir_tensor_compare(rs[r], want, &d, &err) == 0, "%s: %s", info->u.str.s, err.msg);
        double mag = 1;
        for (int64_t k = 0; k < want->numel; k++)
            mag = fmax(mag, fabs(ir_tensor_get_f64(want, k)));
        ck_assert_msg(d.max_abs <= 1e-5 * mag, "%s: scanned and unrolled differ by %g (max magnitude %g)",
                      info->u.str.s, d.max_abs, mag);
        worst = fmax(worst, d.max_abs / mag);
        differ += d.n_diff;
        compared += want->numel;
        ir_tensor_free(want);
    }
    /* every element of every unrolled result was compared once */
    ck_assert_int_eq(compared, total);
    ck_assert(ir_tensor_get_f64(rs[0], 0) != 0);
    fprintf(stderr, "scan_matches_unrolled %s: %lld elements, %lld not bitwise equal, worst %g\n",
            *extra ? extra : "layers=2", (long long)compared, (long long)differ, worst);

    ir_tensors_free(ru, nru);
    ir_tensors_free(rs, nrs);
    for (uint32_t i = 0; i < nu; i++)
        ir_tensor_free(au[i]);
    for (uint32_t i = 0; i < ns; i++)
        ir_tensor_free(as[i]);
    free(au);
    free(as);
    ir_module_free(mu);
    ir_module_free(ms);
}
END_TEST

/* Random arguments for the entry function of m: tokens in [0, 8) (below
 * every tiny vocabulary), second moments >= 0, step 3; the seed of
 * argument i is 100 + i. */
static ir_tensor **random_args(const ir_op *f)
{
    ap_error err;
    uint32_t n = ir_func_num_args(f);
    ir_tensor **a = calloc(n, sizeof *a);
    ck_assert_ptr_nonnull(a);
    for (uint32_t i = 0; i < n; i++) {
        const char *name = ir_func_arg_name(f, i);
        const ir_type *t = ir_func_arg(f, i)->type;
        int rc;
        if (!strcmp(name, "step")) {
            int64_t v = 3;
            rc = ir_tensor_from_i64((ir_elem)t->elem, t->rank, t->dims, &v, 1, &a[i], &err);
        } else if (!strncmp(name, "opt_state.nu", 12)) {
            rc = ir_tensor_random_range(t, 100 + i, 0.0, 1.0, &a[i], &err);
        } else {
            rc = ir_tensor_random(t, 100 + i, &a[i], &err);
        }
        ck_assert_msg(rc == 0, "%s: %s", name, err.msg);
    }
    return a;
}

/* dtype=bf16 param_dtype=f32 (bf16 compute over f32 master weights) takes
 * the same arguments as the f32 step and computes the same loss, gradients
 * and updates within what bf16 rounding allows: every result within 5e-2
 * of max(1, its largest magnitude) of the f32 step's, the loss within 1%.
 * A missing convert or a wrongly typed gradient would fail to run or be
 * far off. */
START_TEST(mixed_precision_matches_f32)
{
    const char *knobs = "norm=rms mlp=swiglu pos=rope tied=0 bias=0 fused_qkv=0 kv_heads=1";
    char mixed[256];
    snprintf(mixed, sizeof mixed, "%s dtype=bf16 param_dtype=f32", knobs);
    ir_module *m32 = tl_generate("transformer", "tiny", knobs);
    ir_module *mbf = tl_generate("transformer", "tiny", mixed);
    ir_op *f32f = ir_module_entry(m32), *fbf = ir_module_entry(mbf);
    ap_error err;
    uint32_t n = ir_func_num_args(f32f);
    ck_assert_uint_eq(ir_func_num_args(fbf), n);
    for (uint32_t i = 0; i < n; i++)
        ck_assert(ir_type_equal(ir_func_arg(f32f, i)->type, ir_func_arg(fbf, i)->type));
    ir_tensor **args = random_args(f32f);
    ir_tensor **r32 = NULL, **rbf = NULL;
    uint32_t n32 = 0, nbf = 0;
    ck_assert_msg(ir_interp_run(m32, f32f, (const ir_tensor *const *)args, n, &r32, &n32, NULL, &err) == 0, "f32: %s",
                  err.msg);
    ck_assert_msg(ir_interp_run(mbf, fbf, (const ir_tensor *const *)args, n, &rbf, &nbf, NULL, &err) == 0, "mixed: %s",
                  err.msg);
    ck_assert_uint_eq(n32, nbf);
    double worst = 0;
    for (uint32_t r = 0; r < n32; r++) {
        ir_tensor_diff d;
        ck_assert_msg(ir_tensor_compare(rbf[r], r32[r], &d, &err) == 0, "result %u: %s", r, err.msg);
        double mag = 1;
        for (int64_t k = 0; k < r32[r]->numel; k++)
            mag = fmax(mag, fabs(ir_tensor_get_f64(r32[r], k)));
        ck_assert_msg(d.max_abs <= (r == 0 ? 1e-2 : 5e-2) * mag, "result %u: mixed and f32 differ by %g (magnitude %g)",
                      r, d.max_abs, mag);
        worst = fmax(worst, d.max_abs / mag);
    }
    fprintf(stderr, "mixed_precision_matches_f32: loss %.6f (f32 %.6f), worst %g\n", ir_tensor_get_f64(rbf[0], 0),
            ir_tensor_get_f64(r32[0], 0), worst);
    ir_tensors_free(r32, n32);
    ir_tensors_free(rbf, nbf);
    for (uint32_t i = 0; i < n; i++)
        ir_tensor_free(args[i]);
    free(args);
    ir_module_free(m32);
    ir_module_free(mbf);
}
END_TEST

/* Runs the entry function of m on args; returns its results (heap). */
static ir_tensor **run_step(ir_module *m, ir_tensor **args, uint32_t *n_res, const char *what)
{
    ap_error err;
    ir_op *f = ir_module_entry(m);
    ir_tensor **r = NULL;
    ck_assert_msg(ir_interp_run(m, f, (const ir_tensor *const *)args, ir_func_num_args(f), &r, n_res, NULL, &err) == 0,
                  "%s: %s", what, err.msg);
    return r;
}

/* The largest |a - b| / max(1, max |b|) over the results of two runs of
 * steps with the same results; counts the elements not bitwise equal. */
static double compare_runs(ir_tensor **a, ir_tensor **b, uint32_t n, int64_t *n_diff)
{
    ap_error err;
    double worst = 0;
    *n_diff = 0;
    for (uint32_t r = 0; r < n; r++) {
        ir_tensor_diff d;
        ck_assert_msg(ir_tensor_compare(a[r], b[r], &d, &err) == 0, "result %u: %s", r, err.msg);
        double mag = 1;
        for (int64_t k = 0; k < b[r]->numel; k++)
            mag = fmax(mag, fabs(ir_tensor_get_f64(b[r], k)));
        worst = fmax(worst, d.max_abs / mag);
        *n_diff += d.n_diff;
    }
    return worst;
}

/* extra without its remat=... word. */
static void without_remat(const char *extra, char *out, size_t size)
{
    out[0] = 0;
    for (const char *p = extra; *p;) {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (strncmp(p, "remat=", 6))
            snprintf(out + strlen(out), size - strlen(out), "%.*s ", (int)len, p);
        p += len + (sp != NULL);
    }
}

static const char *const remat_cases[] = {
    "remat=full", "remat=dots", "remat=dots_no_batch", "remat=minimal_flash", "remat=attn",
    "remat=full scan=1", "remat=dots scan=1", "remat=attn scan=1",
    "remat=dots_no_batch norm=rms mlp=swiglu pos=rope tied=0 bias=0 fused_qkv=0 kv_heads=1",
    "remat=dots attention=flash", "remat=full attention=flash scan=1",
};

/* jax.checkpoint recomputes, it does not change what is computed: every
 * result of every remat policy equals remat=none's bit for bit in f32
 * (the reference interpreter), unrolled and scanned, with flash attention
 * (its forward kernel run again in the backward pass) too. */
START_TEST(remat_is_bit_identical)
{
    const char *extra = remat_cases[_i];
    char base[256];
    without_remat(extra, base, sizeof base);
    ir_module *m0 = tl_generate("transformer", "tiny", base);
    ir_module *m1 = tl_generate("transformer", "tiny", extra);
    ir_op *f0 = ir_module_entry(m0);
    ck_assert_uint_eq(ir_func_num_args(f0), ir_func_num_args(ir_module_entry(m1)));
    ir_tensor **args = random_args(f0);
    uint32_t n0 = 0, n1 = 0;
    ir_tensor **r0 = run_step(m0, args, &n0, base), **r1 = run_step(m1, args, &n1, extra);
    ck_assert_uint_eq(n0, n1);
    int64_t differ;
    double worst = compare_runs(r1, r0, n0, &differ);
    ck_assert_msg(differ == 0, "%s: %lld elements differ from remat=none (worst %g)", extra, (long long)differ,
                  worst);
    ir_tensors_free(r0, n0);
    ir_tensors_free(r1, n1);
    for (uint32_t i = 0; i < ir_func_num_args(f0); i++)
        ir_tensor_free(args[i]);
    free(args);
    ir_module_free(m0);
    ir_module_free(m1);
}
END_TEST

static const char *const flash_cases[] = {"", "scan=1", "kv_heads=1 fused_qkv=0 pos=rope", "dtype=bf16 param_dtype=f32"};

/* attention=flash (cuDNN's fused attention custom calls, run by the
 * interpreter's reference kernel) computes the step dot attention does:
 * every result within 1e-5 of max(1, its magnitude) in f32 (2e-2 for bf16
 * compute, whose roundings differ between the two forms). */
START_TEST(flash_matches_dot_attention)
{
    const char *extra = flash_cases[_i];
    char flash[256];
    snprintf(flash, sizeof flash, "%s attention=flash", extra);
    ir_module *m0 = tl_generate("transformer", "tiny", extra);
    ir_module *m1 = tl_generate("transformer", "tiny", flash);
    ir_op *f0 = ir_module_entry(m0);
    ir_tensor **args = random_args(f0);
    uint32_t n0 = 0, n1 = 0;
    ir_tensor **r0 = run_step(m0, args, &n0, extra), **r1 = run_step(m1, args, &n1, flash);
    ck_assert_uint_eq(n0, n1);
    int64_t differ;
    double worst = compare_runs(r1, r0, n0, &differ), tol = strstr(extra, "bf16") ? 2e-2 : 1e-5;
    ck_assert_msg(worst <= tol, "%s: flash and dot attention differ by %g", flash, worst);
    fprintf(stderr, "flash_matches_dot_attention %s: worst %g\n", extra, worst);
    ir_tensors_free(r0, n0);
    ir_tensors_free(r1, n1);
    for (uint32_t i = 0; i < ir_func_num_args(f0); i++)
        ir_tensor_free(args[i]);
    free(args);
    ir_module_free(m0);
    ir_module_free(m1);
}
END_TEST

/* Partitions text over mesh with schedule, lowers it (collective counts
 * into count) and runs autopart's equivalence check, which must pass. */
static void check_partitioned(const char *text, const char *mesh_text, const char *schedule,
                              uint64_t count[IR_COLL__COUNT], const char *what)
{
    char msg[800];
    ap_error err;
    ir_module *m = tl_parse(text, what, msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s: %s", what, msg);
    ir_mesh mesh;
    ir_pctx *c;
    ir_partition *p;
    ck_assert_int_eq(ir_mesh_parse(mesh_text, &mesh, &err), 0);
    ck_assert_int_eq(ir_pctx_new(m, ir_module_entry(m), &mesh, &c, &err), 0);
    ck_assert_int_eq(ir_partition_new(c, &p, &err), 0);
    ck_assert_msg(ir_schedule_apply(p, schedule, &err) == 0, "%s: %s", what, err.msg);
    ir_lowered lw;
    ck_assert_msg(ir_lower(p, &lw, &err) == 0, "%s: %s", what, err.msg);
    memcpy(count, lw.count, sizeof lw.count);
    ir_lowered_free(&lw);
    ir_check_report r;
    ir_check_opts o = IR_CHECK_OPTS_DEFAULT;
    ck_assert_msg(ir_check(p, &o, &r, &err) == 0, "%s: %s", what, err.msg);
    for (uint32_t j = 0; j < r.n_results; j++)
        ck_assert_msg(r.results[j].ok, "%s: %s differs by %g (tolerance %g)", what, r.results[j].name,
                      fmax(r.results[j].error[0], r.results[j].error[1]), r.results[j].tol);
    ck_assert(r.ok);
    ir_check_report_free(&r);
    ir_partition_free(p);
    ir_pctx_free(c);
    ir_module_free(m);
}

/* The fused attention partitions as a map over batch and heads (its TMR
 * entry): under BP+MP the flash step is equivalent to the unpartitioned
 * one on every device and has the collectives of the dot-attention step:
 * Megatron's all-reduces, nothing around the attention itself. */
START_TEST(flash_partitions_over_batch_and_heads)
{
    char *schedule = tl_schedule("bp+mp");
    uint64_t dot[IR_COLL__COUNT], flash[IR_COLL__COUNT];
    char *t0 = tl_generate_text("transformer", "tiny", "batch=4");
    char *t1 = tl_generate_text("transformer", "tiny", "batch=4 attention=flash");
    check_partitioned(t0, "batch=2,model=2", schedule, dot, "dot attention");
    check_partitioned(t1, "batch=2,model=2", schedule, flash, "flash attention");
    for (int k = 0; k < IR_COLL__COUNT; k++)
        ck_assert_msg(dot[k] == flash[k], "%s: %llu with flash, %llu with dot attention", ir_coll_name((ir_coll_kind)k),
                      (unsigned long long)flash[k], (unsigned long long)dot[k]);
    ck_assert_uint_eq(flash[IR_COLL_ALL_REDUCE], 20 + 4 * 2); /* BP's 20 and Megatron's 4 per layer */
    ck_assert_uint_eq(flash[IR_COLL_ALL_GATHER], 0);
    ap_free(t0);
    ap_free(t1);
    ap_free(schedule);
}
END_TEST

static const char *const micro_cases[] = {"batch=4 microbatches=2", "batch=4 microbatches=4 scan=1",
                                           "batch=4 microbatches=2 remat=full attention=flash"};

/* microbatches=K (gradient accumulation in a scan) is one step on the
 * whole batch: every result within 1e-5 of max(1, its magnitude) in f32
 * (the sums are formed in another order). */
START_TEST(microbatches_match_whole_batch)
{
    const char *extra = micro_cases[_i];
    char whole[256] = "";
    for (const char *p = extra; *p;) { /* extra without microbatches=K */
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (strncmp(p, "microbatches=", 13))
            snprintf(whole + strlen(whole), sizeof whole - strlen(whole), "%.*s ", (int)len, p);
        p += len + (sp != NULL);
    }
    ir_module *m0 = tl_generate("transformer", "tiny", whole);
    ir_module *m1 = tl_generate("transformer", "tiny", extra);
    ir_op *f0 = ir_module_entry(m0);
    ir_tensor **args = random_args(f0);
    uint32_t n0 = 0, n1 = 0;
    ir_tensor **r0 = run_step(m0, args, &n0, whole), **r1 = run_step(m1, args, &n1, extra);
    ck_assert_uint_eq(n0, n1);
    int64_t differ;
    double worst = compare_runs(r1, r0, n0, &differ);
    ck_assert_msg(worst <= 1e-5, "%s: differs from one whole-batch step by %g", extra, worst);
    fprintf(stderr, "microbatches_match_whole_batch %s: worst %g\n", extra, worst);
    ir_tensors_free(r0, n0);
    ir_tensors_free(r1, n1);
    for (uint32_t i = 0; i < ir_func_num_args(f0); i++)
        ir_tensor_free(args[i]);
    free(args);
    ir_module_free(m0);
    ir_module_free(m1);
}
END_TEST

/* ============================================ collectives per family */

/* The standard schedules on the families of the zoo (tiny sizes), unrolled
 * and scanned.  Per step (loop bodies counted by their trips, from the cost
 * model's report of the lowered program) one expects:
 *   BP     one all-reduce per parameter gradient and one for the loss;
 *   FSDP   (fsdp.txt: every parameter and optimizer state on `batch` too)
 *          one reduce-scatter per parameter gradient, one all-gather per
 *          op of the step that uses a parameter (each use gathers afresh:
 *          ZeRO-3; Adam's update runs on the shard), the loss's all-reduce
 *          alone;
 *   BP+MP  BP's and Megatron's four per layer (attention output and MLP
 *          forward, the input gradients through w_q/k/v or w_qkv and
 *          w_gate/w_up backward);
 *   BP+EP  (ep.txt on an `expert` axis: the experts split by expert, the
 *          batch by batch and expert, the dispatched tokens and the
 *          experts' output atomic along `expert`) BP's all-reduces (the
 *          experts' gradients over `batch` only: each device computes its
 *          experts' whole gradient from the tokens sent to it) and, per MoE
 *          layer, GShard's four all-to-alls: tokens to their experts and
 *          back, forward and backward; no all-gather or reduce-scatter
 *          (the expert weights never move);
 * and the scanned program has the unrolled one's per-step counts. */
static const struct {
    const char *family, *extra;
    const char *mp, *mp_scan; /* BP+MP's schedules (unrolled, scanned), or NULL */
} families[] = {
    {"original", "", "bp+mp", "bp+mp_scan"},
    {"llama", "norm=rms mlp=swiglu pos=rope tied=0 bias=0 fused_qkv=0", "bp+mp_split", "bp+mp_split_scan"},
    {"maxtext", "norm=rms mlp=relu pos=rope tied=1 bias=0 fused_qkv=0", "bp+mp_split", "bp+mp_split_scan"},
    {"gpt", "pos=learned bias=1", "bp+mp", "bp+mp_scan"},
    {"mpt", "bias=0", NULL, NULL},
    {"llama-moe", "norm=rms mlp=swiglu pos=rope tied=0 bias=0 fused_qkv=0 experts=4 topk=2 batch=4", NULL, NULL},
};

/* The cost report (on an H100) of text partitioned over mesh by schedule. */
static void estimate(const char *text, const char *mesh_text, const char *schedule, cost_report *r)
{
    char msg[800];
    ap_error err;
    ir_module *m = tl_parse(text, "model", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ir_mesh mesh;
    ir_pctx *c;
    ir_partition *p;
    ck_assert_int_eq(ir_mesh_parse(mesh_text, &mesh, &err), 0);
    ck_assert_int_eq(ir_pctx_new(m, ir_module_entry(m), &mesh, &c, &err), 0);
    ck_assert_int_eq(ir_partition_new(c, &p, &err), 0);
    ck_assert_msg(ir_schedule_apply(p, schedule, &err) == 0, "%s", err.msg);
    ir_lowered lw;
    ck_assert_msg(ir_lower(p, &lw, &err) == 0, "%s", err.msg);
    cost_device dev;
    ck_assert_int_eq(cost_device_lookup("h100", &dev, &err), 0);
    ck_assert_msg(cost_estimate(lw.module, &dev, NULL, r, &err) == 0, "%s", err.msg);
    ir_lowered_free(&lw);
    ir_partition_free(p);
    ir_pctx_free(c);
    ir_module_free(m);
}

/* Collectives per step of text partitioned over mesh by schedule. */
static void per_step(const char *text, const char *mesh_text, const char *schedule, double out[COST_COLL_COUNT])
{
    cost_report r;
    estimate(text, mesh_text, schedule, &r);
    for (int k = 0; k < COST_COLL_COUNT; k++)
        out[k] = r.coll[k].count;
}

/* Whether a result of op is returned by the function (body's last op). */
static bool returned(const ir_block *body, const ir_op *op)
{
    const ir_op *ret = body->last;
    for (uint32_t i = 0; i < ret->n_operands; i++)
        for (uint32_t j = 0; j < op->n_results; j++)
            if (ret->operands[i] == &op->results[j])
                return true;
    return false;
}

/* Parameters and the ops of the step that use them in the unrolled
 * program: all but Adam's update, which runs on the shard. */
static void param_uses(const char *text, int *n_params, int *n_uses)
{
    ir_module *m = tl_parse(text, "model", NULL, 0);
    ck_assert_ptr_nonnull(m);
    ir_op *f = ir_module_entry(m);
    ir_block *body = ir_func_entry(f);
    *n_params = *n_uses = 0;
    for (uint32_t a = 0; a < ir_func_num_args(f); a++) {
        if (strncmp(ir_func_arg_name(f, a), "params[", 7))
            continue;
        ++*n_params;
        for (ir_op *op = body->first; op; op = op->next) {
            if (op == body->last || returned(body, op))
                continue;
            for (uint32_t i = 0; i < op->n_operands; i++)
                if (op->operands[i] == &body->args[a]) {
                    ++*n_uses;
                    break;
                }
        }
    }
    ir_module_free(m);
}

START_TEST(collectives_per_family)
{
    const char *extra = families[_i].extra;
    char scanned[256];
    snprintf(scanned, sizeof scanned, "%s scan=1", extra);
    char *tu = tl_generate_text("transformer", "tiny", extra);
    char *ts = tl_generate_text("transformer", "tiny", scanned);
    int n_params, n_uses;
    param_uses(tu, &n_params, &n_uses);
    int L = 2;
    bool moe = strstr(extra, "experts=") != NULL;
    struct {
        const char *names, *mesh;
    } scheds[4] = {{"bp", "batch=2"}, {"fsdp", "batch=2"}, {NULL, "batch=2,model=2"}, {NULL, "batch=2,expert=2"}};
    if (moe)
        scheds[3].names = "bp+ep";
    scheds[2].names = families[_i].mp;
    for (int k = 0; k < 4; k++) {
        if (!scheds[k].names)
            continue;
        char *su = tl_schedule(scheds[k].names), *ss = tl_schedule(k == 2 ? families[_i].mp_scan : scheds[k].names);
        double u[COST_COLL_COUNT], s[COST_COLL_COUNT];
        per_step(tu, scheds[k].mesh, su, u);
        per_step(ts, scheds[k].mesh, ss, s);
        fprintf(stderr, "%-10s %-12s AG %4.0f AR %4.0f RS %4.0f A2A %2.0f (scanned: %4.0f %4.0f %4.0f %2.0f)\n",
                families[_i].family, scheds[k].names, u[COST_ALL_GATHER], u[COST_ALL_REDUCE],
                u[COST_REDUCE_SCATTER], u[COST_ALL_TO_ALL], s[COST_ALL_GATHER], s[COST_ALL_REDUCE],
                s[COST_REDUCE_SCATTER], s[COST_ALL_TO_ALL]);
        double want_ag = k == 1 ? n_uses : 0, want_rs = k == 1 ? n_params : 0;
        double want_ar = k == 1 ? 1 : n_params + 1 + (k == 2 ? 4 * L : 0);
        double want_a2a = k == 3 ? 4 * L : 0;
        ck_assert_msg(u[COST_ALL_GATHER] == want_ag && u[COST_ALL_REDUCE] == want_ar &&
                          u[COST_REDUCE_SCATTER] == want_rs && u[COST_ALL_TO_ALL] == want_a2a,
                      "%s %s: AG %g AR %g RS %g A2A %g, expected %g %g %g %g", families[_i].family, scheds[k].names,
                      u[COST_ALL_GATHER], u[COST_ALL_REDUCE], u[COST_REDUCE_SCATTER], u[COST_ALL_TO_ALL], want_ag,
                      want_ar, want_rs, want_a2a);
        for (int c = 0; c < COST_COLL_COUNT; c++)
            ck_assert_msg(s[c] == u[c], "%s %s: %d per step scanned %g, unrolled %g", families[_i].family,
                          scheds[k].names, c, s[c], u[c]);
        ap_free(su);
        ap_free(ss);
    }
    ap_free(tu);
    ap_free(ts);
}
END_TEST

/* Micro-batches under BP and FSDP on {batch:2}: the batch splits inside
 * every micro-batch (micro-batch k takes rows k, K + k, ...), so nothing
 * of the batch is gathered and the step is split as without
 * micro-batches; the gradients' reductions run once per micro-batch (a
 * pending sum does not cross the loop's carried sums yet): K times the
 * whole step's (FSDP's gathers: once per parameter and micro-batch, the
 * loop body taking each parameter whole). */
START_TEST(microbatches_split_by_data_parallel_schedules)
{
    char *one = tl_generate_text("transformer", "tiny", "batch=8");
    char *acc = tl_generate_text("transformer", "tiny", "batch=8 microbatches=2");
    char *bp = tl_schedule("bp"), *fsdp = tl_schedule("fsdp");
    double w[COST_COLL_COUNT], m[COST_COLL_COUNT];
    per_step(one, "batch=2", bp, w);
    per_step(acc, "batch=2", bp, m);
    ck_assert_msg(m[COST_ALL_GATHER] == 0 && w[COST_ALL_REDUCE] > 0 && m[COST_ALL_REDUCE] == 2 * w[COST_ALL_REDUCE],
                  "bp with 2 micro-batches: AG %g AR %g (whole batch: AR %g)", m[COST_ALL_GATHER], m[COST_ALL_REDUCE],
                  w[COST_ALL_REDUCE]);
    per_step(one, "batch=2", fsdp, w);
    per_step(acc, "batch=2", fsdp, m);
    ck_assert_msg(w[COST_REDUCE_SCATTER] > 0 && m[COST_REDUCE_SCATTER] == 2 * w[COST_REDUCE_SCATTER] &&
                      m[COST_ALL_REDUCE] == 2 * w[COST_ALL_REDUCE],
                  "fsdp with 2 micro-batches: AR %g RS %g (whole batch: %g %g)", m[COST_ALL_REDUCE],
                  m[COST_REDUCE_SCATTER], w[COST_ALL_REDUCE], w[COST_REDUCE_SCATTER]);
    ap_free(bp);
    ap_free(fsdp);
    ap_free(one);
    ap_free(acc);
}
END_TEST

/* mp_embed.txt, MaxText's `activation_embed -> tensor`, on the MaxText
 * family with names=1: the step is equivalent to the unpartitioned one on
 * every device; the out-projections' all-reduces become reduce-scatters
 * (no Megatron all-reduce of a [b, s, d] value is left: the all-reduces
 * that remain are the norms' [b, s] statistics and the loss's); and with
 * remat=full, where what is saved for the backward is each block's input,
 * that input is 1/model of Megatron's replicated residual stream
 * (mp_split.txt alone).
 * The saved activations at the peak are those inputs plus what one block's
 * backward holds (its recomputed forward, its gradients' temporaries).  The
 * step returns its gradients, held all along in allocations of their own
 * (graph.c, assign), so the peak is where the rest is largest: at the start
 * of the backward, every input still held; its block's part does not
 * depend on the number of layers.  So from 4 layers to 8 the saved
 * activations at the peak grow by 4 block inputs: 4 x [b, s, d] f32 =
 * 16 KiB per device (b = 2, s = 32, d = 16) under Megatron, half that under
 * mp_embed; within x/4 (a few [b, s] statistics, 256 B each) where the peak
 * is a step off the backward's start (Megatron's 4 layers: 448 B).  The
 * ratio of the two at 8 layers alone depends on the block's part: 0.68. */
START_TEST(mp_embed_splits_the_residual_stream)
{
#define MP_EMBED_CFG "norm=rms mlp=relu pos=rope tied=1 bias=0 fused_qkv=0 names=1 remat=full vocab=12 seq=32 batch=4"
    char *text[2] = {tl_generate_text("transformer", "tiny", MP_EMBED_CFG " layers=4"),
                     tl_generate_text("transformer", "tiny", MP_EMBED_CFG " layers=8")};
#undef MP_EMBED_CFG
    char *mega = tl_schedule("mp_split+fsdp"), *embed = tl_schedule("mp_split+mp_embed+fsdp");
    uint64_t count[IR_COLL__COUNT];
    check_partitioned(text[1], "batch=2,model=2", embed, count, "mp_split+mp_embed+fsdp");
    cost_report r0[2], r1[2];
    for (int k = 0; k < 2; k++) {
        estimate(text[k], "batch=2,model=2", mega, &r0[k]);
        estimate(text[k], "batch=2,model=2", embed, &r1[k]);
    }
    ck_assert_msg(r1[1].coll[COST_REDUCE_SCATTER].count >= r0[1].coll[COST_REDUCE_SCATTER].count + 2 * 8,
                  "reduce-scatters %g, Megatron's %g", r1[1].coll[COST_REDUCE_SCATTER].count,
                  r0[1].coll[COST_REDUCE_SCATTER].count);
    ck_assert_msg(r1[1].coll[COST_ALL_REDUCE].bytes < r0[1].coll[COST_ALL_REDUCE].bytes / 8,
                  "all-reduce bytes %g, Megatron's %g", r1[1].coll[COST_ALL_REDUCE].bytes,
                  r0[1].coll[COST_ALL_REDUCE].bytes);
    const double x = 2.0 * 32 * 16 * 4; /* a block's input, [b, s, d] f32 */
    double grow0 = (double)(r0[1].memory.kinds[COST_MEM_ACTIVATIONS] - r0[0].memory.kinds[COST_MEM_ACTIVATIONS]);
    double grow1 = (double)(r1[1].memory.kinds[COST_MEM_ACTIVATIONS] - r1[0].memory.kinds[COST_MEM_ACTIVATIONS]);
    ck_assert_msg(fabs(grow0 - 4 * x) <= x / 4 && fabs(grow1 - 4 * x / 2) <= x / 4,
                  "saved activations at the peak, 4 -> 8 layers: +%.0f bytes under Megatron (%.0f expected), +%.0f "
                  "under mp_embed (%.0f expected)",
                  grow0, 4 * x, grow1, 4 * x / 2);
    ap_free(mega);
    ap_free(embed);
    ap_free(text[0]);
    ap_free(text[1]);
}
END_TEST

/* act_grad=torch, the MLP activation differentiated as PyTorch's
 * GeluBackward / SiluBackward (only the input saved, the rest recomputed in
 * the backward): FSDP-partitioned, the step is equivalent to the
 * unpartitioned one on every device.  Without remat, GELU's peak shrinks
 * by what JAX's product rule kept, tanh's output: one [b, s, d_ff] f32
 * value per layer (b the device's 2 sequences) until its layer's backward.
 * The two steps are otherwise the same, and the gradients they return are
 * held all along alike (graph.c, assign), so at every step the live bytes
 * differ by the tanh outputs still held there: JAX's peak is at most all
 * three above PyTorch's, and at least two (at PyTorch's peak, JAX still
 * holds the tanh of every layer whose backward has not begun: all but the
 * last at the latest).  Measured 2.69.  The saved activations at the two
 * peaks are not compared: the peaks fall at different ops (JAX's in the
 * final norm's backward, PyTorch's in the last MLP's), where other values
 * of the backward are held.  SwiGLU's do not change: the sigmoid JAX's
 * rule reads is cheap to recompute, and XLA (graph.c) recomputes it in
 * the backward's kernel either way. */
static const struct {
    const char *cfg;
    bool saves;
} act_cases[] = {{"mlp=gelu", true}, {"mlp=swiglu norm=rms bias=0", false}};
START_TEST(act_grad_torch_saves_only_the_input)
{
    char jax[100], torch[120];
    snprintf(jax, sizeof jax, "%s batch=4 seq=32 d_ff=64 layers=3", act_cases[_i].cfg);
    snprintf(torch, sizeof torch, "%s act_grad=torch", jax);
    char *t0 = tl_generate_text("transformer", "tiny", jax), *t1 = tl_generate_text("transformer", "tiny", torch);
    char *fsdp = tl_schedule("fsdp");
    uint64_t count[IR_COLL__COUNT];
    check_partitioned(t1, "batch=2", fsdp, count, torch);
    cost_report r0, r1;
    estimate(t0, "batch=2", fsdp, &r0);
    estimate(t1, "batch=2", fsdp, &r1);
    double peak0 = (double)r0.peak_memory_bytes, peak1 = (double)r1.peak_memory_bytes;
    double tanh = 2.0 * 32 * 64 * 4, lo = act_cases[_i].saves ? 2 * tanh : 0, hi = act_cases[_i].saves ? 3 * tanh : 0;
    ck_assert_msg(peak0 - peak1 >= lo && peak0 - peak1 <= hi,
                  "%s: peak %.0f bytes, %.0f with JAX's rule (%.0f to %.0f expected less)", act_cases[_i].cfg, peak1,
                  peak0, lo, hi);
    ap_free(fsdp);
    ap_free(t0);
    ap_free(t1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("zoo");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, model_parses_and_round_trips, 0, (int)(sizeof configs / sizeof configs[0]));
    tcase_add_test(tc, transformer_names);
    tcase_add_loop_test(tc, scan_matches_unrolled, 0, (int)(sizeof scan_variants / sizeof scan_variants[0]));
    tcase_add_test(tc, mixed_precision_matches_f32);
    tcase_add_loop_test(tc, remat_is_bit_identical, 0, (int)(sizeof remat_cases / sizeof remat_cases[0]));
    tcase_add_loop_test(tc, flash_matches_dot_attention, 0, (int)(sizeof flash_cases / sizeof flash_cases[0]));
    tcase_add_test(tc, flash_partitions_over_batch_and_heads);
    tcase_add_loop_test(tc, microbatches_match_whole_batch, 0, (int)(sizeof micro_cases / sizeof micro_cases[0]));
    tcase_add_loop_test(tc, collectives_per_family, 0, (int)(sizeof families / sizeof families[0]));
    tcase_add_test(tc, microbatches_split_by_data_parallel_schedules);
    tcase_add_test(tc, mp_embed_splits_the_residual_stream);
    tcase_add_loop_test(tc, act_grad_torch_saves_only_the_input, 0, (int)(sizeof act_cases / sizeof act_cases[0]));
    suite_add_tcase(s, tc);
    return tl_run(s);
}
