/*
 * test_redist.c - unit tests of redistribution synthesis (ir/partir/redist.c):
 * the paper's examples (Example 3.1, Example 4.9/7.1, Figure 12, the
 * replicated-to-sharded case of section 7.3), parsing and printing of
 * distributed types with every validation message, replica groups, the
 * all-gather baseline, determinism, the independent step checker catching
 * broken plans, and a property test over 1000 random problems.
 *
 * Axis lists are major to minor (see partir.h): the paper's {y, x} is
 * written {x, y} here.
 */
#include "partir.h"
#include "testlib.h"

/* ----------------------------------------------------------------- helpers */

static ir_redist_mesh mesh_of(const char *text)
{
    ir_redist_mesh mesh;
    ap_error err;
    ap_error_clear(&err);
    ck_assert_msg(ir_redist_mesh_parse(text, &mesh, &err) == 0, "mesh %s: %s", text, err.msg);
    return mesh;
}

static ir_redist_type type_of(const ir_redist_mesh *mesh, const char *text)
{
    ir_redist_type t;
    ap_error err;
    ap_error_clear(&err);
    ck_assert_msg(ir_redist_parse_type(mesh, text, &t, &err) == 0, "type %s: %s", text, err.msg);
    return t;
}

/* Synthesizes and checks a plan with the independent checker. */
static ir_redist_plan *plan_of(const char *mesh_text, const char *from_text, const char *to_text)
{
    ir_redist_mesh mesh = mesh_of(mesh_text);
    ir_redist_type from = type_of(&mesh, from_text), to = type_of(&mesh, to_text);
    ir_redist_plan *plan = NULL;
    ap_error err;
    ap_error_clear(&err);
    ck_assert_msg(ir_redist_plan_make(&mesh, &from, &to, 4, &plan, &err) == 0, "%s", err.msg);
    ck_assert_msg(ir_redist_plan_check(plan, &err) == 0, "plan check: %s", err.msg);
    return plan;
}

/* The plan as text, one step per line (caller frees). */
static char *plan_text(const ir_redist_plan *plan)
{
    ap_buf buf;
    ap_buf_init(&buf);
    ir_redist_plan_format(plan, &buf);
    char *text = ap_buf_take(&buf, NULL);
    ck_assert_ptr_nonnull(text);
    return text;
}

static char *type_text(const ir_redist_mesh *mesh, const ir_redist_type *t)
{
    ap_buf buf;
    ap_buf_init(&buf);
    ir_redist_format_type(mesh, t, &buf);
    char *text = ap_buf_take(&buf, NULL);
    ck_assert_ptr_nonnull(text);
    return text;
}

static int count_kind(const ir_redist_plan *plan, ir_redist_kind kind)
{
    int n = 0;
    for (int s = 0; s < plan->nsteps; s++)
        n += plan->steps[s].kind == kind;
    return n;
}

/* ------------------------------------------------------- paper examples */

/* Example 3.1: [3{x}12, 2{y}12] -> [2{y}12, 3{x}12] over {x:4, y:6} can only
 * be done within max(in, out) = 6 elements per device by splitting x and y
 * into prime factors: two all_to_alls of 6 elements, never a gather.  No
 * device holds a replicated pair of tiles, so each all_to_all's result is
 * forced and the device order must be fixed by one final permutation (the
 * paper's sequence also ends with allpermute). */
START_TEST(test_example_3_1)
{
    ir_redist_plan *plan = plan_of("x=4,y=6", "[3{x}12, 2{y}12]", "[2{y}12, 3{x}12]");
    char *from = type_text(&plan->factors, &plan->from);
    ck_assert_str_eq(from, "[3{x1,x2}12, 2{y1,y2}12]");
    ck_assert_int_eq(plan->factors.naxes, 4);
    ck_assert_int_eq(plan->factors.sizes[2], 3); /* y1:3 major, y2:2 minor */
    ck_assert_int_eq(plan->factors.sizes[3], 2);

    ck_assert_int_eq(count_kind(plan, IR_REDIST_ALL_GATHER), 0);
    ck_assert_int_eq(count_kind(plan, IR_REDIST_ALL_TO_ALL), 2);
    ck_assert_int_eq(plan->nsteps, 3);
    ck_assert_int_eq(plan->permute_step, 2);
    for (int s = 0; s < plan->nsteps; s++) {
        ck_assert_int_le(plan->steps[s].local_bytes, 6 * 4);
        ck_assert_int_eq(plan->steps[s].bytes, 6 * 4);
    }
    ck_assert_int_eq(plan->peak_local_bytes, 6 * 4);
    ck_assert_int_eq(plan->cost_bytes, 3 * 6 * 4);
    /* gather dim 0 (4 pieces) to [12, 2], then dim 1 to [12, 12] */
    ck_assert_int_eq(plan->baseline.cost_bytes, (24 + 144) * 4);
    ck_assert_int_eq(plan->baseline.peak_local_bytes, 144 * 4);
    free(from);
    ir_redist_plan_free(plan);
}
END_TEST

/* Examples 4.9 and 7.1: [1{a}8, 8] -> [8, 1{a}8] over {a:8}.  With merged
 * multi-axis collectives this is one all_to_all of all three factors of a
 * costing 8 elements (not 3 * 8 for three single-factor ones), and no
 * permutation. */
START_TEST(test_example_4_9)
{
    ir_redist_plan *plan = plan_of("a=8", "[1{a}8, 8]", "[8, 1{a}8]");
    char *text = plan_text(plan);
    ck_assert_str_eq(text, "all_to_all(dims 0->1, axes {a1,a2,a3})  [8, 1{a1,a2,a3}8]  32 bytes\n");
    ck_assert_int_eq(plan->nsteps, 1);
    ck_assert_int_eq(plan->permute_step, -1);
    ck_assert_int_eq(plan->cost_bytes, 8 * 4);
    const ir_redist_step *step = &plan->steps[0];
    ck_assert_int_eq(step->group_size, 8);
    ck_assert_int_eq(step->ngroups, 1);
    for (int d = 0; d < 8; d++)
        ck_assert_int_eq(step->groups[d], d); /* device d takes chunk d */
    free(text);
    ir_redist_plan_free(plan);
}
END_TEST

/* Figure 12: over {x:4, y:2, z:4}, [1{y,x}8, 8, 8, 4] (paper order; ours
 * [1{x,y}8, ...]) -> [8, 4{y}8, 2{x}8, 4].  Without over-partitioning: two
 * all_to_alls of 256 elements (cost 512).  With it, the replicated axis z
 * slices dim 3 first (free), the all_to_alls move 64 elements each, and a
 * final all_gather of z costs 256: 384 in all, the figure's right column. */
START_TEST(test_figure_12)
{
    ir_redist_plan *plan = plan_of("x=4,y=2,z=4", "[1{x,y}8, 8, 8, 4]", "[8, 4{y}8, 2{x}8, 4]");
    char *text = plan_text(plan);
    ck_assert_str_eq(
        text, "dynslice(dim 3, axes {z1,z2})  [1{x1,x2,y}8, 8, 8, 1{z1,z2}4]  0 bytes\n"
              "all_to_all(dims 0->1, axes {y})  [2{x1,x2}8, 4{y}8, 8, 1{z1,z2}4]  256 bytes\n"
              "all_to_all(dims 0->2, axes {x1,x2})  [8, 4{y}8, 2{x1,x2}8, 1{z1,z2}4]  256 bytes\n"
              "all_gather(dim 3, axes {z1,z2})  [8, 4{y}8, 2{x1,x2}8, 4]  1024 bytes\n");
    ck_assert_int_eq(plan->cost_bytes, 384 * 4);
    ck_assert_int_lt(plan->cost_bytes, 512 * 4);
    ck_assert_int_eq(plan->peak_local_bytes, 256 * 4);
    ck_assert_int_eq(plan->permute_step, -1);
    free(text);
    ir_redist_plan_free(plan);
}
END_TEST

/* Section 7.3: [16] -> [4{x}16] over {x:4, y:4} is one dynslice, and it
 * must use x (the target's axis), not y, or a permutation would follow. */
START_TEST(test_replicated_to_sharded)
{
    ir_redist_plan *plan = plan_of("x=4,y=4", "[16]", "[4{x}16]");
    char *text = plan_text(plan);
    ck_assert_str_eq(text, "dynslice(dim 0, axes {x1,x2})  [4{x1,x2}16]  0 bytes\n");
    ck_assert_int_eq(plan->cost_bytes, 0);
    /* device (x, y) keeps piece x: groups run along x */
    const ir_redist_step *step = &plan->steps[0];
    ck_assert_int_eq(step->ngroups, 4);
    int32_t first_group[4] = {0, 4, 8, 12};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(step->groups[i], first_group[i]);
    free(text);
    ir_redist_plan_free(plan);
}
END_TEST

/* Section 7.3: when a permutation is needed before trailing all_gathers, it
 * moves ahead of them, where tiles are smaller. */
START_TEST(test_permute_before_gather)
{
    ir_redist_plan *plan = plan_of("x=2,y=2", "[4{x}8, 4{y}8]", "[8, 4{x}8]");
    ck_assert_int_eq(plan->nsteps, 2);
    ck_assert_int_eq(plan->permute_step, 0);
    ck_assert_int_eq(plan->steps[0].bytes, 16 * 4);
    ck_assert_int_eq(plan->steps[1].kind, IR_REDIST_ALL_GATHER);
    ck_assert_int_eq(plan->cost_bytes, (16 + 32) * 4);
    const ir_redist_step *p = &plan->steps[0];
    ck_assert_int_eq(p->npairs, 4);
    int moving = 0;
    for (int i = 0; i < 4; i++)
        moving += p->pairs[2 * i] != p->pairs[2 * i + 1];
    ck_assert_int_eq(moving, 2); /* devices (0,0) and (1,1) keep their tiles */
    ir_redist_plan_free(plan);
}
END_TEST

START_TEST(test_identity_and_swap)
{
    ir_redist_plan *plan = plan_of("x=4,y=6", "[3{x}12, 2{y}12]", "[3{x}12, 2{y}12]");
    ck_assert_int_eq(plan->nsteps, 0);
    ck_assert_int_eq(plan->cost_bytes, 0);
    ir_redist_plan_free(plan);
    /* Figure 3: a swap for a replicated axis is one permutation */
    plan = plan_of("xdev=4,ydev=4", "[32{xdev}128]", "[32{ydev}128]");
    ck_assert_int_eq(plan->nsteps, 1);
    ck_assert_int_eq(plan->steps[0].kind, IR_REDIST_COLLECTIVE_PERMUTE);
    ck_assert_int_eq(plan->cost_bytes, 32 * 4);
    ir_redist_plan_free(plan);
}
END_TEST

/* ----------------------------------------------------- groups and costs */

/* Replica groups of Figure 12's first all_to_all (over y): devices are
 * row-major over (x, y, z), so groups pair d with d + 4 (y stride 4). */
START_TEST(test_replica_groups)
{
    ir_redist_plan *plan = plan_of("x=4,y=2,z=4", "[1{x,y}8, 8, 8, 4]", "[8, 4{y}8, 2{x}8, 4]");
    const ir_redist_step *step = &plan->steps[1];
    ck_assert_int_eq(step->kind, IR_REDIST_ALL_TO_ALL);
    ck_assert_int_eq(step->group_size, 2);
    ck_assert_int_eq(step->ngroups, 16);
    int32_t want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(step->groups[i], want[i]);
    ck_assert_int_eq(step->groups[8], 8);
    ck_assert_int_eq(step->groups[9], 12);
    ir_redist_plan_free(plan);
}
END_TEST

START_TEST(test_baseline_and_elem_bytes)
{
    ir_redist_mesh mesh = mesh_of("x=4,y=6");
    ir_redist_type from = type_of(&mesh, "[3{x}12, 2{y}12]"),
                   to = type_of(&mesh, "[2{y}12, 3{x}12]");
    ir_redist_baseline base;
    ir_redist_plan *plan;
    ap_error err;
    ap_error_clear(&err);
    ck_assert_int_eq(ir_redist_baseline_of(&mesh, &from, &to, 2, &base, &err), 0);
    ck_assert_int_eq(base.cost_bytes, (24 + 144) * 2);
    ck_assert_int_eq(base.peak_local_bytes, 144 * 2);
    ck_assert_int_eq(base.nsteps, 4);
    ck_assert_int_eq(ir_redist_plan_make(&mesh, &from, &to, 0, &plan, &err), 0);
    ck_assert_int_eq(plan->elem_bytes, 4); /* 0 means the default */
    ck_assert_int_eq(plan->cost_bytes, 72);
    ir_redist_plan_free(plan);
    ck_assert_int_eq(ir_redist_plan_make(&mesh, &from, &to, -1, &plan, &err), AP_EINVALID);
    ck_assert_ptr_null(plan);
}
END_TEST

/* ------------------------------------------------------- text and errors */

static void assert_round_trip(const char *mesh_text, const char *text, const char *printed)
{
    ir_redist_mesh mesh = mesh_of(mesh_text);
    ir_redist_type t = type_of(&mesh, text), again;
    char *out = type_text(&mesh, &t);
    ck_assert_str_eq(out, printed);
    again = type_of(&mesh, out);
    ck_assert(ir_redist_type_equal(&t, &again));
    free(out);
}

START_TEST(test_parse_format)
{
    assert_round_trip("x=4,y=6", "[3{x}12, 2{y}12]", "[3{x}12, 2{y}12]");
    assert_round_trip("x=4,y=6", "[12,12]", "[12, 12]");
    assert_round_trip("x=4,y=6", "[ 12{}12 , 12 ]", "[12, 12]");
    assert_round_trip("x=4,y=6", "[1{y,x}24, 5]", "[1{y,x}24, 5]");
    assert_round_trip("x=4,y=6", "[{\"x\"}12]", "[3{x}12]");
    assert_round_trip("{\"data-par\":2, model:2}", "[4{\"data-par\"}8]", "[4{\"data-par\"}8]");
    assert_round_trip("x=4", "[]", "[]");

    ir_redist_mesh mesh = mesh_of("{x:4, y:6}");
    ck_assert_int_eq(mesh.naxes, 2);
    ck_assert_int_eq(ir_redist_mesh_devices(&mesh), 24);
    ap_buf buf;
    ap_buf_init(&buf);
    ir_redist_mesh_format(&mesh, &buf);
    ck_assert_str_eq(buf.data, "{x:4, y:6}");
    ap_buf_free(&buf);
}
END_TEST

static void assert_type_error(const char *text, int code, int col, const char *msg)
{
    ir_redist_mesh mesh = mesh_of("x=4,y=6");
    ir_redist_type t;
    ap_error err;
    ap_error_clear(&err);
    ck_assert_int_eq(ir_redist_parse_type(&mesh, text, &t, &err), code);
    ck_assert_int_eq(err.code, code);
    ck_assert_str_eq(err.msg, msg);
    ck_assert_int_eq(err.col, col);
}

START_TEST(test_type_errors)
{
    assert_type_error("[3{z}12]", AP_EUNDEFINED, 4, "unknown mesh axis \"z\"");
    assert_type_error("[1{x,x}12]", AP_ETYPE, 6, "mesh axis \"x\" used twice");
    assert_type_error("[3{x}12, 3{x}12]", AP_ETYPE, 12, "mesh axis \"x\" used twice");
    assert_type_error(
        "[3{x}16]", AP_ETYPE, 2,
        "dim 0: local size 3 times the product 4 of {x} is 12, not the global size 16");
    assert_type_error("[12, {x,y}10]", AP_ETYPE, 6,
                      "dim 1: global size 10 is not divisible by 24, the product of {x,y}");
    assert_type_error("[3{x}12", AP_ESYNTAX, 8, "expected ',' or ']'");
    assert_type_error("3{x}12]", AP_ESYNTAX, 1, "expected '[' to start a type");
    assert_type_error("[3{x 12]", AP_ESYNTAX, 6, "expected ',' or '}'");
    assert_type_error("[3{x}]", AP_ESYNTAX, 6, "expected a size");
    assert_type_error("[,]", AP_ESYNTAX, 2, "expected a dimension size");
    assert_type_error("[12] x", AP_ESYNTAX, 6, "unexpected text after the type");
    assert_type_error("[1,1,1,1,1,1,1,1,1]", AP_ELIMIT, 18, "rank above the limit of 8");

    /* a type built by hand */
    ir_redist_mesh mesh = mesh_of("x=4,y=6");
    ir_redist_type t = type_of(&mesh, "[3{x}12]");
    ap_error err;
    t.dims[0].local = 4;
    ck_assert_int_eq(ir_redist_validate_type(&mesh, &t, &err), AP_ETYPE);
    ck_assert_str_eq(
        err.msg, "dim 0: local size 4 times the product 4 of {x} is 16, not the global size 12");
    ck_assert_int_eq(err.col, 0);
}
END_TEST

START_TEST(test_problem_errors)
{
    ir_redist_mesh mesh = mesh_of("x=4,y=6");
    ir_redist_type a = type_of(&mesh, "[12]"), b = type_of(&mesh, "[12, 12]");
    ir_redist_type c = type_of(&mesh, "[12, 24]");
    ir_redist_plan *plan = NULL;
    ap_error err;
    ck_assert_int_eq(ir_redist_plan_make(&mesh, &a, &b, 4, &plan, &err), AP_ETYPE);
    ck_assert_str_eq(err.msg, "rank mismatch: from has rank 1, to has rank 2");
    ck_assert_ptr_null(plan);
    ck_assert_int_eq(ir_redist_check_problem(&b, &c, &err), AP_ETYPE);
    ck_assert_str_eq(err.msg, "global shapes differ: from is [12, 12], to is [12, 24]");
}
END_TEST

START_TEST(test_mesh_errors_and_factors)
{
    ir_redist_mesh mesh, factors;
    int factor_axis[IR_REDIST_MAX_AXES];
    ap_error err;
    ck_assert_int_eq(ir_redist_mesh_parse("x=4,x=2", &mesh, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh axis \"x\" appears twice");
    ck_assert_int_eq(ir_redist_mesh_parse("x=0", &mesh, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh axis \"x\" has size 0; sizes are at least 1");
    ck_assert_int_eq(ir_redist_mesh_parse("x", &mesh, &err), AP_ESYNTAX);
    ck_assert_str_eq(err.msg, "expected '=' after the axis name");
    ck_assert_int_eq(ir_redist_mesh_parse("x=65536,y=2", &mesh, &err), AP_ELIMIT);

    mesh = mesh_of("x=12,y=1,z=5");
    ck_assert_int_eq(ir_redist_mesh_factor(&mesh, &factors, factor_axis, &err), 0);
    ck_assert_int_eq(factors.naxes, 4); /* x1:3 x2:2 x3:2 z:5; y:1 has none */
    ck_assert_str_eq(factors.names[0], "x1");
    ck_assert_int_eq(factors.sizes[0], 3);
    ck_assert_str_eq(factors.names[2], "x3");
    ck_assert_str_eq(factors.names[3], "z");
    ck_assert_int_eq(factor_axis[3], 2);
    /* x's factors would clash with the axis x1 */
    mesh = mesh_of("x=4,x1=2");
    ck_assert_int_eq(ir_redist_mesh_factor(&mesh, &factors, factor_axis, &err), 0);
    ck_assert_str_eq(factors.names[0], "x_1");
    ck_assert_str_eq(factors.names[1], "x_2");
    ck_assert_str_eq(factors.names[2], "x1");
}
END_TEST

/* --------------------------------------------------- checker and search */

/* The checker is what the property test leans on: it must reject broken
 * plans, not only accept good ones. */
START_TEST(test_checker_rejects)
{
    ir_redist_plan *plan = plan_of("x=4,y=2,z=4", "[1{x,y}8, 8, 8, 4]", "[8, 4{y}8, 2{x}8, 4]");
    ir_redist_step *step = (ir_redist_step *)&plan->steps[1]; /* all_to_all over y */
    int32_t *groups = (int32_t *)step->groups;
    ap_error err;
    int32_t t = groups[0];
    groups[0] = groups[1]; /* chunks go to the wrong devices */
    groups[1] = t;
    ck_assert_int_eq(ir_redist_plan_check(plan, &err), AP_ETYPE);
    groups[1] = groups[0];
    groups[0] = t;
    ck_assert_int_eq(ir_redist_plan_check(plan, &err), 0);
    /* a result type with the right sizes but another device order */
    step->type.dims[0].axes[0] = plan->steps[1].type.dims[0].axes[1];
    step->type.dims[0].axes[1] = plan->steps[0].type.dims[0].axes[0];
    ck_assert_int_eq(ir_redist_plan_check(plan, &err), AP_ETYPE);
    ir_redist_plan_free(plan);
}
END_TEST

static bool plans_equal(const ir_redist_plan *a, const ir_redist_plan *b)
{
    if (a->nsteps != b->nsteps || a->cost_bytes != b->cost_bytes)
        return false;
    for (int s = 0; s < a->nsteps; s++) {
        const ir_redist_step *x = &a->steps[s], *y = &b->steps[s];
        size_t n = (size_t)a->ndevices;
        if (x->kind != y->kind || x->dim != y->dim || x->to_dim != y->to_dim ||
            x->naxes != y->naxes || memcmp(x->axes, y->axes, (size_t)x->naxes) != 0 ||
            !ir_redist_type_equal(&x->type, &y->type) ||
            memcmp(x->device_map, y->device_map, n * sizeof(int32_t)) != 0 ||
            (x->groups && memcmp(x->groups, y->groups, n * sizeof(int32_t)) != 0) ||
            (x->pairs && memcmp(x->pairs, y->pairs, 2 * n * sizeof(int32_t)) != 0))
            return false;
    }
    return true;
}

/* 1000 random problems like the paper's evaluation: every step type-checks
 * under the independent checker, tiles never exceed max(in, out), the cost
 * is at most the all-gather baseline's, the plan ends exactly at the target
 * (axis order and device order), and a reused context gives the same plan
 * as a fresh one. */
START_TEST(test_random_problems)
{
    uint64_t seed = 0x5eed;
    ir_redist_ctx *ctx;
    ap_error err;
    ap_error_clear(&err);
    ck_assert_int_eq(ir_redist_ctx_new(&ctx, &err), 0);
    int with_permute = 0;
    for (int i = 0; i < 1000; i++) {
        ir_redist_mesh mesh;
        ir_redist_type from, to;
        ir_redist_plan *plan, *again;
        ir_redist_random_problem(&seed, 6, &mesh, &from, &to);
        ck_assert_msg(ir_redist_synthesize(ctx, &mesh, &from, &to, 4, &plan, &err) == 0,
                      "problem %d: %s", i, err.msg);
        ck_assert_msg(ir_redist_plan_check(plan, &err) == 0, "problem %d: %s", i, err.msg);

        int64_t bound = plan->from_local_bytes > plan->to_local_bytes ? plan->from_local_bytes
                                                                      : plan->to_local_bytes;
        ck_assert_int_le(plan->peak_local_bytes, bound);
        ck_assert_msg(plan->cost_bytes <= plan->baseline.cost_bytes,
                      "problem %d: cost %lld above the baseline %lld", i,
                      (long long)plan->cost_bytes, (long long)plan->baseline.cost_bytes);
        int permutes = count_kind(plan, IR_REDIST_COLLECTIVE_PERMUTE);
        ck_assert_int_le(permutes, 1);
        with_permute += permutes;
        for (int st = 1; st < plan->nsteps; st++) { /* the documented meaning of `axes` */
            const ir_redist_step *step = &plan->steps[st];
            const ir_redist_dim *dim =
                &plan->steps[st - 1].type.dims[step->dim >= 0 ? step->dim : 0];
            if (step->kind != IR_REDIST_ALL_GATHER && step->kind != IR_REDIST_ALL_TO_ALL)
                continue;
            ck_assert_int_ge(dim->naxes, step->naxes);
            ck_assert(
                memcmp(dim->axes + dim->naxes - step->naxes, step->axes, (size_t)step->naxes) == 0);
        }
        const ir_redist_type *last =
            plan->nsteps ? &plan->steps[plan->nsteps - 1].type : &plan->from;
        const int32_t *last_map =
            plan->nsteps ? plan->steps[plan->nsteps - 1].device_map : plan->identity_map;
        ck_assert(ir_redist_type_equal(last, &plan->to));
        for (int64_t d = 0; d < plan->ndevices; d++)
            ck_assert_int_eq(last_map[d], d);

        ck_assert_int_eq(ir_redist_plan_make(&mesh, &from, &to, 4, &again, &err), 0);
        ck_assert_msg(plans_equal(plan, again), "problem %d: plans differ", i);
        ir_redist_plan_free(again);
        ir_redist_plan_free(plan);
    }
    ck_assert_int_lt(with_permute, 1000);
    ir_redist_ctx_free(ctx);
}
END_TEST

/* ------------------------------------------------------- out of memory */

/* Every allocation of a synthesis that takes all paths (weak search,
 * lowering, permutation, strong search) fails in turn: each run either
 * succeeds with a valid plan or reports AP_ENOMEM, and leaks nothing (run
 * under AddressSanitizer). */
START_TEST(test_out_of_memory)
{
    const char *problems[][3] = {
        {"x=4,y=2,z=4", "[1{x,y}8, 8, 8, 4]", "[8, 4{y}8, 2{x}8, 4]"},
        {"x=4,y=6", "[3{x}12, 2{y}12]", "[2{y}12, 3{x}12]"},
    };
    for (size_t i = 0; i < 2; i++) {
        ir_redist_mesh mesh = mesh_of(problems[i][0]);
        ir_redist_type from = type_of(&mesh, problems[i][1]), to = type_of(&mesh, problems[i][2]);
        int succeeded = 0;
        for (long budget = 0; budget < 300; budget++) {
            ir_redist_plan *plan = NULL;
            ap_error err;
            tl_allocations_left = budget;
            ap_set_allocator(&tl_failing_allocator);
            int rc = ir_redist_plan_make(&mesh, &from, &to, 4, &plan, &err);
            ap_set_allocator(NULL);
            tl_allocations_left = -1;
            if (rc == 0) {
                ck_assert_msg(ir_redist_plan_check(plan, &err) == 0, "%s", err.msg);
                succeeded++;
            } else {
                ck_assert_int_eq(rc, AP_ENOMEM);
                ck_assert_ptr_null(plan);
            }
            ir_redist_plan_free(plan);
        }
        ck_assert_int_gt(succeeded, 0);
    }
}
END_TEST

/* ------------------------------------------------------------------ main */

static Suite *redist_suite(void)
{
    Suite *s = suite_create("redist");
    TCase *examples = tcase_create("examples");
    tcase_add_test(examples, test_example_3_1);
    tcase_add_test(examples, test_example_4_9);
    tcase_add_test(examples, test_figure_12);
    tcase_add_test(examples, test_replicated_to_sharded);
    tcase_add_test(examples, test_permute_before_gather);
    tcase_add_test(examples, test_identity_and_swap);
    tcase_add_test(examples, test_replica_groups);
    tcase_add_test(examples, test_baseline_and_elem_bytes);
    suite_add_tcase(s, examples);

    TCase *text = tcase_create("text");
    tcase_add_test(text, test_parse_format);
    tcase_add_test(text, test_type_errors);
    tcase_add_test(text, test_problem_errors);
    tcase_add_test(text, test_mesh_errors_and_factors);
    suite_add_tcase(s, text);

    TCase *properties = tcase_create("properties");
    tcase_set_timeout(properties, 120);
    tcase_add_test(properties, test_checker_rejects);
    tcase_add_test(properties, test_random_problems);
    tcase_add_test(properties, test_out_of_memory);
    suite_add_tcase(s, properties);
    return s;
}

int main(void) { return tl_run(redist_suite()); }
