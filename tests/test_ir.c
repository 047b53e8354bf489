/*
 * test_ir.c - the IR and its MLIR text forms: types and attributes parse and
 * print back exactly; pretty and generic forms of an op give one IR;
 * locations, opaque ops of other dialects, the inliner and the typed
 * attribute accessors.  The printer's golden tests (input, RUN line,
 * expected text) and the parser's error messages are in tests/lit/mlir;
 * the tests here that check more of a program than its text read it from
 * there (tl_lit).
 */
#include "testlib.h"

/* Parses src, prints it, checks the printed text equals `want` (when not
 * NULL) and that it re-parses to an equal module.  Returns the text. */
static char *roundtrip(const char *src, const char *want)
{
    char msg[800];
    ir_module *m = tl_parse(src, "t.mlir", msg, sizeof msg);
    ck_assert_msg(m != NULL, "parse failed: %s\n%s", msg, src);
    char *out = tl_print(m);
    if (want)
        ck_assert_msg(strcmp(out, want) == 0, "printed:\n%s\nwanted:\n%s", out, want);
    ir_module *m2 = tl_parse(out, "printed.mlir", msg, sizeof msg);
    ck_assert_msg(m2 != NULL, "reparse failed: %s\n%s", msg, out);
    char why[600];
    ck_assert_msg(ir_module_equal(m, m2, why, sizeof why), "round trip differs: %s\n%s", why, out);
    char *out2 = tl_print(m2);
    ck_assert_str_eq(out, out2);
    ap_free(out2);
    ir_module_free(m);
    ir_module_free(m2);
    return out;
}

/* Two texts must give equal modules. */
static void same_ir(const char *a, const char *b)
{
    char msg[800], why[600];
    ir_module *ma = tl_parse(a, "a.mlir", msg, sizeof msg);
    ck_assert_msg(ma != NULL, "a: %s", msg);
    ir_module *mb = tl_parse(b, "b.mlir", msg, sizeof msg);
    ck_assert_msg(mb != NULL, "b: %s", msg);
    ck_assert_msg(ir_module_equal(ma, mb, why, sizeof why), "%s", why);
    ir_module_free(ma);
    ir_module_free(mb);
}

/* ------------------------------------------------------------ types */

START_TEST(types_parse_and_print)
{
    /* printed back: tests/lit/mlir/types-parse-and-print.mlir */
    char *src = tl_lit("mlir/types-parse-and-print.mlir");
    ir_module *m = tl_parse(src, "t", NULL, 0);
    ir_op *f = ir_module_func(m, "f");
    ck_assert_ptr_nonnull(f);
    const ir_type *t = ir_func_arg(f, 0)->type;
    ck_assert_int_eq(t->kind, IR_T_TENSOR);
    ck_assert_int_eq(t->rank, 3);
    ck_assert_int_eq(t->dims[1], IR_DYN);
    ck_assert_int_eq(t->elem, IR_E_F32);
    ck_assert_int_eq(ir_type_numel(t), -1);
    ck_assert(!ir_type_is_static(t));
    ck_assert_int_eq(ir_func_arg(f, 1)->type->elem, IR_E_BF16);
    ck_assert_int_eq(ir_func_arg(f, 1)->type->rank, 0);
    ck_assert_int_eq(ir_type_bytes(ir_func_arg(f, 2)->type), 48);
    ck_assert_int_eq(ir_func_arg(f, 3)->type->elem, IR_E_OPAQUE);
    ck_assert_str_eq(ir_func_arg(f, 3)->type->text, "!quant.uniform<i8:f32, 5.000000e-01:-3>");
    ck_assert_int_eq(ir_func_arg(f, 4)->type->rank, -1);
    ck_assert_int_eq(ir_func_arg(f, 5)->type->elem, IR_E_F8E4M3FN);
    ck_assert_int_eq(ir_func_arg(f, 6)->type->kind, IR_T_TUPLE);
    ck_assert_int_eq(ir_func_arg(f, 6)->type->n_elems, 2);
    ck_assert_int_eq(ir_func_arg(f, 7)->type->kind, IR_T_TOKEN);
    ck_assert(ir_elem_is_unsigned((ir_elem)ir_func_arg(f, 8)->type->elem));
    ck_assert_str_eq(ir_func_arg(f, 9)->type->encoding, "#stablehlo.bounds<8>");
    ck_assert_int_eq(ir_type_numel(ir_func_arg(f, 10)->type), 0);
    /* interning: equal types are one pointer */
    int64_t dims[3] = {2, IR_DYN, 4};
    ck_assert_ptr_eq(ir_type_tensor(m, IR_E_F32, 3, dims), t);
    ir_module_free(m);
    ap_free(src);
}
END_TEST

START_TEST(elem_types)
{
    ck_assert_str_eq(ir_elem_name(IR_E_BF16), "bf16");
    ck_assert_int_eq(ir_elem_bytes(IR_E_F64), 8);
    ck_assert_int_eq(ir_elem_bytes(IR_E_I1), 1);
    ck_assert_int_eq(ir_elem_bits(IR_E_I4), 4);
    ck_assert(ir_elem_is_float(IR_E_F8E5M2));
    ck_assert(ir_elem_is_int(IR_E_SI32));
    ck_assert(ir_elem_is_complex(IR_E_C64));
    ck_assert(!ir_elem_is_float(IR_E_I32));
}
END_TEST

/* ------------------------------------------------------- attributes */

START_TEST(dense_constants)
{
    /* printed back: tests/lit/mlir/dense-constants.mlir */
    char *src = tl_lit("mlir/dense-constants.mlir");
    ir_module *m = tl_parse(src, "c", NULL, 0);
    ir_block *b = ir_func_entry(ir_module_func(m, "c"));
    ir_op *op = b->first;
    ir_attr *v = ir_op_attr(op, "value");
    ck_assert(v->u.dense.splat);
    ck_assert(ir_dense_float_at(v, 5) == 1.5);
    op = op->next;
    v = ir_op_attr(op, "value");
    ck_assert_int_eq(ir_dense_int_at(v, 1), -2);
    ck_assert_int_eq(ir_dense_int_at(v, 3), 4);
    op = op->next->next->next->next; /* %5 hex */
    ck_assert(ir_dense_float_at(ir_op_attr(op, "value"), 1) == 2.0);
    ir_module_free(m);
    ap_free(src);
}
END_TEST

START_TEST(dense_large_prints_hex)
{
    char src[8192];
    int n = snprintf(src, sizeof src, "func.func @c() {\n  %%0 = stablehlo.constant dense<[");
    for (int i = 0; i < 200; i++)
        n += snprintf(src + n, sizeof src - (size_t)n, i ? ", %d" : "%d", i);
    snprintf(src + n, sizeof src - (size_t)n, "]> : tensor<200xi32>\n  return\n}\n");
    char *out = roundtrip(src, NULL);
    ck_assert_ptr_nonnull(strstr(out, "dense<\"0x00000000010000000200000003000000"));
    ap_free(out);
}
END_TEST

START_TEST(attribute_forms)
{
    /* printed back: tests/lit/mlir/attribute-forms.mlir */
    char *src = tl_lit("mlir/attribute-forms.mlir");
    ir_module *m = tl_parse(src, "m", NULL, 0);
    ir_attr *s = ir_op_attr(m->top, "a.str");
    ck_assert_int_eq((int)s->u.str.len, 7);
    ck_assert_str_eq(s->u.str.s, "q\"uote\n");
    ir_attr *f = ir_op_attr(m->top, "i.float");
    ck_assert(f->u.f == (double)0.001f); /* held at f32 precision */
    ir_attr *dot = ir_op_attr(m->top, "f.dot");
    int64_t v[4];
    ck_assert_int_eq(ir_attr_int_list(ir_dialect_param(dot, "lhs_contracting_dimensions"), v, 4), 1);
    ck_assert_int_eq(v[0], 1);
    ir_module_free(m);
    ap_free(src);
}
END_TEST

/* ------------------------------------------- pretty and generic forms */

START_TEST(pretty_equals_generic)
{
    same_ir("func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {\n"
            "  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1], "
            "precision = [DEFAULT, DEFAULT] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>\n"
            "  return %0 : tensor<2x3x5xf32>\n}\n",
            "func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {\n"
            "  %0 = \"stablehlo.dot_general\"(%a, %b) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = "
            "[0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, "
            "precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : "
            "(tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>\n"
            "  \"func.return\"(%0) : (tensor<2x3x5xf32>) -> ()\n}\n");
    same_ir("func.func @f(%a: tensor<2x3xf32>) -> tensor<3xf32> {\n"
            "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
            "  %0 = stablehlo.reduce(%a init: %c) applies stablehlo.add across dimensions = [0] : "
            "(tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>\n"
            "  return %0 : tensor<3xf32>\n}\n",
            "func.func @f(%a: tensor<2x3xf32>) -> tensor<3xf32> {\n"
            "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
            "  %0 = \"stablehlo.reduce\"(%a, %c) ({\n"
            "  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
            "    %s = \"stablehlo.add\"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
            "    \"stablehlo.return\"(%s) : (tensor<f32>) -> ()\n"
            "  }) {dimensions = array<i64: 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>\n"
            "  return %0 : tensor<3xf32>\n}\n");
    same_ir("func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xi1> {\n"
            "  %0 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>\n"
            "  return %0 : tensor<2x3xi1>\n}\n",
            "func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xi1> {\n"
            "  %0 = \"stablehlo.compare\"(%a, %b) {comparison_direction = #stablehlo<comparison_direction GT>, "
            "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>\n"
            "  return %0 : tensor<2x3xi1>\n}\n");
    same_ir("func.func @f(%a: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<1x4x4x4xf32> {\n"
            "  %0 = stablehlo.convolution(%a, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
            "window = {stride = [2, 2], pad = [[1, 0], [1, 0]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} "
            ": (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x4x4x4xf32>\n"
            "  return %0 : tensor<1x4x4x4xf32>\n}\n",
            "func.func @f(%a: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<1x4x4x4xf32> {\n"
            "  %0 = \"stablehlo.convolution\"(%a, %w) <{batch_group_count = 1 : i64, dimension_numbers = "
            "#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, "
            "padding = dense<[[1, 0], [1, 0]]> : tensor<2x2xi64>, window_strides = array<i64: 2, 2>}> "
            ": (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x4x4x4xf32>\n"
            "  return %0 : tensor<1x4x4x4xf32>\n}\n");
    same_ir("func.func @f(%a: tensor<4x6xf32>, %p: tensor<f32>) -> tensor<7x3xf32> {\n"
            "  %0 = stablehlo.slice %a [1:4, 0:6:2] : (tensor<4x6xf32>) -> tensor<3x3xf32>\n"
            "  %1 = stablehlo.pad %0, %p, low = [1, 0], high = [3, 0], interior = [0, 0] : (tensor<3x3xf32>, tensor<f32>) -> tensor<7x3xf32>\n"
            "  return %1 : tensor<7x3xf32>\n}\n",
            "func.func @f(%a: tensor<4x6xf32>, %p: tensor<f32>) -> tensor<7x3xf32> {\n"
            "  %0 = \"stablehlo.slice\"(%a) {limit_indices = array<i64: 4, 6>, start_indices = array<i64: 1, 0>, "
            "strides = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<3x3xf32>\n"
            "  %1 = \"stablehlo.pad\"(%0, %p) {edge_padding_high = array<i64: 3, 0>, edge_padding_low = array<i64: 1, 0>, "
            "interior_padding = array<i64: 0, 0>} : (tensor<3x3xf32>, tensor<f32>) -> tensor<7x3xf32>\n"
            "  return %1 : tensor<7x3xf32>\n}\n");
}
END_TEST



/* ------------------------------------------------------------ locations */

START_TEST(locations)
{
    /* printed back: tests/lit/mlir/locations.mlir */
    char *src = tl_lit("mlir/locations.mlir");
    ir_module *m = tl_parse(src, "l", NULL, 0);
    ir_op *f = ir_module_func(m, "f");
    ck_assert_str_eq(ir_func_arg_name(f, 0), "params['w']");
    ck_assert_str_eq(ir_loc_name(ir_func_entry(f)->first->loc), "jit(f)/neg");
    ir_module_free(m);
    ap_free(src);
}
END_TEST

/* ------------------------------------------------------- other dialects */

/* func.return writes its attributes before its operands (`return {attrs}
 * %x : T`, MLIR's format, in Shardy's tests): it was read as a return of
 * nothing followed by `%x : T` ("expected an integer, found 'tensor'"), and
 * a return's attributes were printed after the operands, where MLIR does
 * not read them; stablehlo.return keeps them after its operands. */
START_TEST(func_return_attributes_first)
{
    const char *src = "module {\n"
                      "  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
                      "    %0 = stablehlo.reduce(%arg0 init: %arg0) across dimensions = [] : (tensor<8x8xf32>, "
                      "tensor<8x8xf32>) -> tensor<8x8xf32>\n"
                      "     reducer(%arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>)  {\n"
                      "      %1 = stablehlo.add %arg1, %arg2 : tensor<8x8xf32>\n"
                      "      stablehlo.return %1 {a = 1 : i32} : tensor<8x8xf32>\n"
                      "    }\n"
                      "    return {sdy.sharding = #sdy.sharding_per_value<[]>} %0 : tensor<8x8xf32>\n"
                      "  }\n"
                      "}\n";
    char *out = roundtrip(src, NULL);
    ck_assert_msg(strstr(out, "    return {sdy.sharding = #sdy.sharding_per_value<[]>} %0 : tensor<8x8xf32>\n"), "%s", out);
    ck_assert_msg(strstr(out, "stablehlo.return %1 {a = 1 : i32} : tensor<8x8xf32>\n"), "%s", out);
    ap_free(out);
    /* the other order is still read */
    same_ir("func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n  return {a = 1 : i32} %arg0 : tensor<2xf32>\n}\n",
            "func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n  return %arg0 {a = 1 : i32} : tensor<2xf32>\n}\n");
    /* and one without operands */
    ap_free(roundtrip("func.func @f() {\n  return {a = 1 : i32}\n}\n", NULL));
}
END_TEST

START_TEST(opaque_ops_print_as_written)
{
    /* printed back: tests/lit/mlir/opaque-ops-print-as-written.mlir */
    char *src = tl_lit("mlir/opaque-ops-print-as-written.mlir");
    ir_module *m = tl_parse(src, "o", NULL, 0);
    ir_block *b = ir_func_entry(ir_module_func(m, "main"));
    ir_op *mc = b->first->next;
    ck_assert_str_eq(mc->name, "sdy.manual_computation");
    ck_assert_int_eq(mc->opcode, IR_OP_UNKNOWN);
    ck_assert_int_eq(mc->n_operands, 1);
    ck_assert_int_eq(mc->n_regions, 1);
    ck_assert_int_eq(mc->results[0].type->rank, 2); /* result type read from its signature */
    ir_op *topk = mc->next;
    ck_assert_int_eq(topk->n_results, 2);
    ck_assert_int_eq(topk->results[1].type->elem, IR_E_I32);
    ir_module_free(m);
    ap_free(src);
}
END_TEST

START_TEST(no_module_wrapper_and_cfg)
{
    const char *src =
        "func.func @main(%arg0: tensor<i1>, %arg1: tensor<f32>) -> tensor<f32> {\n"
        "  cf.br ^bb1(%arg1 : tensor<f32>)\n"
        "^bb1(%0: tensor<f32>):  // 2 preds: ^bb0, ^bb1\n"
        "  %1 = stablehlo.add %0, %0 : tensor<f32>\n"
        "  %extracted = tensor.extract %arg0[] : tensor<i1>\n"
        "  cf.cond_br %extracted, ^bb1(%1 : tensor<f32>), ^bb2\n"
        "^bb2:\n"
        "  return %1 : tensor<f32>\n"
        "}\n";
    char *out = roundtrip(src, NULL);
    ck_assert_ptr_nonnull(strstr(out, "cf.cond_br %1, ^bb1(%0 : tensor<f32>), ^bb2"));
    ap_free(out);
}
END_TEST

/* ------------------------------------------------------------ inliner */

/* src parsed into *m (the caller's to free) with @main's calls inlined;
 * returns @main. */
static ir_op *parse_inlined(const char *src, ir_module **m)
{
    *m = tl_parse(src, "i", NULL, 0);
    ck_assert_ptr_nonnull(*m);
    ir_op *f = ir_module_func(*m, "main");
    ap_error err;
    ck_assert_int_eq(ir_inline_calls(*m, f, &err), 0);
    return f;
}

START_TEST(inline_private_calls)
{
    const char *src =
        "func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = func.call @relu(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  %1 = call @twice(%0) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  return %1 : tensor<4xf32>\n"
        "}\n"
        "func.func private @relu(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %c = stablehlo.constant dense<0.0> : tensor<4xf32>\n"
        "  %0 = stablehlo.maximum %arg0, %c : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n"
        "}\n"
        "func.func private @twice(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = func.call @relu(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  %1 = stablehlo.add %0, %0 : tensor<4xf32>\n"
        "  return %1 : tensor<4xf32>\n"
        "}\n";
    ir_module *m;
    ir_op *f = parse_inlined(src, &m);
    ap_error err;
    int n = 0, calls = 0;
    for (ir_op *op = ir_func_entry(f)->first; op; op = op->next, n++)
        calls += op->opcode == IR_OP_FUNC_CALL;
    ck_assert_int_eq(calls, 0);
    ck_assert_int_eq(n, 6); /* 2 x (const, max) + add + return */
    ck_assert_int_eq(ir_verify(m, &err), 0);
    char *out = tl_print(m);
    ir_module *m2 = tl_parse(out, "o", NULL, 0);
    ck_assert_ptr_nonnull(m2);
    ir_module_free(m2);
    ap_free(out);
    ir_module_free(m);

    const char *rec = "func.func @main(%a: tensor<f32>) -> tensor<f32> {\n"
                      "  %0 = call @main(%a) : (tensor<f32>) -> tensor<f32>\n"
                      "  return %0 : tensor<f32>\n}\n";
    m = tl_parse(rec, "r", NULL, 0);
    ck_assert_int_eq(ir_inline_calls(m, ir_module_func(m, "main"), &err), AP_EUNSUPPORTED);
    ck_assert_str_eq(err.msg, "cannot inline into @main: its calls are recursive");
    ir_module_free(m);
}
END_TEST

/* Nested calls grow exponentially: 20 functions that each call the next
 * twice are 2^20 ops once inlined (4.5 KB of text; 1.2 GB and 8-30 s
 * before the limit).  Refused at the function that grows past it, before
 * the module changes. */
/* A callee with nothing but its return (an identity, as in shardy's call
 * tests) adds no op: the walk went on from the removed call, whose next was
 * cleared, so the ops after it kept the call's result as an operand and the
 * partitioner refused "operand #0 of 'stablehlo.add' is not a value of @main". */
START_TEST(inline_identity_callee)
{
    const char *src =
        "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = call @id(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  %1 = stablehlo.add %0, %0 : tensor<8xf32>\n"
        "  %2 = call @id(%1) : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  return %2 : tensor<8xf32>\n"
        "}\n"
        "func.func private @id(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n";
    ir_module *m;
    ir_op *f = parse_inlined(src, &m);
    ir_block *b = ir_func_entry(f);
    ir_op *add = b->first;
    ck_assert_int_eq(add->opcode, IR_OP_ADD);
    ck_assert_ptr_eq(add->operands[0], &b->args[0]);
    ck_assert_ptr_eq(add->operands[1], &b->args[0]);
    ir_op *ret = add->next;
    ck_assert_ptr_nonnull(ret);
    ck_assert_int_eq(ret->opcode, IR_OP_FUNC_RETURN);
    ck_assert_ptr_eq(ret->operands[0], &add->results[0]);
    ck_assert_ptr_null(ret->next);
    ir_module_free(m);
}
END_TEST

START_TEST(inline_size_limit)
{
    char src[8192];
    size_t n = (size_t)snprintf(src, sizeof src,
                                "func.func @main(%%a: tensor<f32>) -> tensor<f32> {\n"
                                "  %%0 = call @f0(%%a) : (tensor<f32>) -> tensor<f32>\n"
                                "  return %%0 : tensor<f32>\n}\n");
    for (int k = 0; k < 20; k++)
        n += (size_t)snprintf(src + n, sizeof src - n,
                              "func.func private @f%d(%%a: tensor<f32>) -> tensor<f32> {\n"
                              "  %%0 = call @f%d(%%a) : (tensor<f32>) -> tensor<f32>\n"
                              "  %%1 = call @f%d(%%0) : (tensor<f32>) -> tensor<f32>\n"
                              "  return %%1 : tensor<f32>\n}\n",
                              k, k + 1, k + 1);
    n += (size_t)snprintf(src + n, sizeof src - n,
                          "func.func private @f20(%%a: tensor<f32>) -> tensor<f32> {\n"
                          "  %%0 = stablehlo.add %%a, %%a : tensor<f32>\n"
                          "  return %%0 : tensor<f32>\n}\n");
    ck_assert_uint_lt(n, sizeof src - 1);
    ir_module *m = tl_parse(src, "bomb.mlir", NULL, 0);
    ck_assert_ptr_nonnull(m);
    ir_op *f = ir_module_func(m, "main");
    ap_error err;
    ck_assert_int_eq(ir_inline_calls(m, f, &err), AP_ELIMIT);
    ck_assert_int_eq(err.line, 5);
    ck_assert_str_eq(err.msg, "cannot inline the calls of @main: @f0 alone would expand to 1048576 "
                              "ops, past the limit of 1000000 (the larger of 1000000 and twice the 86 ops written)");
    ck_assert_int_eq(ir_func_entry(f)->first->opcode, IR_OP_FUNC_CALL); /* untouched */
    ir_module_free(m);
}
END_TEST

/* ------------------------------------------------------- typed accessors */

START_TEST(typed_accessors)
{
    const char *src =
        "func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) "
        "-> tensor<2x3x5xf32> {\n"
        "  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : "
        "(tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>\n"
        "  %1 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {} "
        "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x6x6x4xf32>\n"
        "  return %0 : tensor<2x3x5xf32>\n}\n";
    ir_module *m = tl_parse(src, "t", NULL, 0);
    ck_assert_ptr_nonnull(m);
    ir_op *dot = ir_func_entry(ir_module_func(m, "f"))->first;
    ir_dot_dims d;
    ck_assert_int_eq(ir_dot_dims_get(dot, &d), 0);
    ck_assert_int_eq(d.n_batch, 1);
    ck_assert_int_eq(d.n_contract, 1);
    ck_assert_int_eq(d.lhs_contract[0], 2);
    ck_assert_int_eq(d.rhs_contract[0], 1);
    ir_conv_dims c;
    ck_assert_int_eq(ir_conv_dims_get(dot->next, &c), 0);
    ck_assert_int_eq(c.in_batch, 0);
    ck_assert_int_eq(c.in_feature, 3);
    ck_assert_int_eq(c.n_spatial, 2);
    ck_assert_int_eq(c.in_spatial[1], 2);
    ck_assert_int_eq(c.kernel_in, 2);
    ck_assert_int_eq(c.kernel_out, 3);
    ir_module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- errors */

START_TEST(deep_nesting_is_an_error_not_a_crash)
{
    size_t n = 100000;
    char *s = malloc(n * 2 + 64);
    strcpy(s, "module attributes {a = ");
    size_t k = strlen(s);
    for (size_t i = 0; i < n; i++)
        s[k++] = '[';
    s[k] = '\0';
    char msg[500];
    ir_module *m = tl_parse(s, "deep.mlir", msg, sizeof msg);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(msg, "nested too deeply"));
    free(s);
}
END_TEST

START_TEST(truncated_inputs_never_crash)
{
    /* every prefix of a real module is either valid or a clean error */
    char *text = tl_read(AP_SHARED_DIR "/corpus/stablehlo/shlo_testdata_sort_3operands.mlir", NULL);
    size_t len = strlen(text);
    for (size_t cut = 0; cut < len; cut += 7) {
        ir_module *m = NULL;
        ap_error err;
        int rc = ir_parse(text, cut, "cut.mlir", IR_FMT_STABLEHLO, &m, &err);
        if (rc < 0) {
            ck_assert_ptr_null(m);
            ck_assert_int_gt(err.line, 0);
            ck_assert_str_eq(err.file, "cut.mlir");
        }
        ir_module_free(m);
    }
    ap_free(text);
}
END_TEST

/* Complex numbers as JAX prints them: complex's one type is its result's,
 * abs/real/imag of a complex tensor give its part type. */
START_TEST(complex_forms)
{
    const char *src =
        "func.func @main(%re: tensor<2xf32>, %im: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {\n"
        "  %0 = stablehlo.complex %re, %im : tensor<2xcomplex<f32>>\n"
        "  %1 = stablehlo.abs %0 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>\n"
        "  %2 = stablehlo.real %0 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>\n"
        "  return %1, %2 : tensor<2xf32>, tensor<2xf32>\n"
        "}\n";
    char *out = roundtrip(src, NULL);
    ck_assert_ptr_nonnull(strstr(out, "stablehlo.complex %arg0, %arg1 : tensor<2xcomplex<f32>>\n"));
    ap_free(out);
    char msg[800];
    ir_module *m = tl_parse(src, "c.mlir", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    ap_error err;
    ck_assert_msg(ir_verify(m, &err) == 0, "%s", err.msg);
    ir_module_free(m);
}
END_TEST

/* Inputs the fuzzer found (tests/fuzz): each must parse and round trip, or
 * fail with a positioned error; none may crash. */
START_TEST(fuzz_findings)
{
    static const char *const inputs[] = {
        /* a carriage return between an opaque op's name and its text */
        "stab.ouchlo.t\rp_ite\n",
        /* an op using a value defined inside its own region */
        "func.func @f() {\n  %0 = \"foo.op\"() ({\n    \"foo.use\"(%0) : (i32) -> ()\n  }) : () -> i32\n  return\n}\n",
        /* a branch to a label defined nowhere */
        "func.func @f() {\n  cf.br ^bb9\n}\n",
        /* convolution dimension numbers with an overflowing digit string */
        "func.func @f(%a: tensor<1x2x2x1xf32>, %b: tensor<1x1x1x1xf32>) -> tensor<1x2x2x1xf32> {\n"
        "  %0 = stablehlo.convolution(%a, %b) dim_numbers = [b, 99999999999999999999999, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
        "window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
        "(tensor<1x2x2x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x2x2x1xf32>\n"
        "  return %0 : tensor<1x2x2x1xf32>\n}\n",
        /* file location ends that are zero or on an unnamed line */
        "func.func @f() {\n  return loc(\"a\":1:2 to :0)\n} loc(fused[\"b\":1:2 to 0:5, \"c\":3:4 to 7:0, \"d\":5:6 to 0:0])\n",
        /* a value used in one region and defined in a sibling region */
        "func.func @f() {\n  \"foo.a\"() ({\n    \"foo.use\"(%9) : (i32) -> ()\n  }) : () -> ()\n"
        "  \"foo.b\"() ({\n    %9 = \"foo.def\"() : () -> i32\n    \"foo.use\"(%9) : (i32) -> ()\n  }) : () -> ()\n"
        "  return\n}\n",
        /* a generic func.func whose visibility is not one of the three words */
        ("\"func.func\"() <{function_type = () -> (), sym_name = \"f\", sym_visibility = \"\x1a\x1aprivate\"}> ({\n"
         "  \"func.return\"() : () -> ()\n}) : () -> ()\n"),
        /* a function inside an opaque op's region: the numbering after it
         * must not start again (`%a` printed as the other argument) */
        "f.(%0:i8,%a:i4){func.func@d()u.%a}",
        /* ... nor repeat a name defined before it in the same region */
        "f.(%0:i8,%a:i4){\n%1 = \"x.y\"() : () -> i8\nfunc.func @d() {\n%0 = \"x.z\"() : () -> i8\nreturn\n}\n"
        "%2 = \"x.w\"(%1, %a) : (i8, i4) -> i8\n}\n",
        /* a comment after an opaque op's '{' ends its line: a region, as the
         * printed text (comment dropped) reads */
        "func.func @main(%a: tensor<3x4xf32>) {\n  %0 = sstablehlo.get_dimension_size contracting_dims = [1] x [0], "
        "algorit=<m h x = 1> {// c\nithm = 3} : (tensor<3x4xf32>) -> tensor<3x3xf32>\n  return\n}\n",
        /* ... and a ')' inside a comment does not close a region's arguments */
        "func.func @f(%a: i32) {\n  foo.op (%a: i32 // )\n) {\n  }\n  return\n}\n",
        /* a comment and a line break between an opaque op's name and a clause
         * on the next line keep them apart (the name printed glued to `y`) */
        "func.func @main(%arg0: tensor<4x?xf32>) -> tensor<i32> {\n  %0 = stablehlo.get_dimensiostablehlo.ch// c\n"
        "y= 1 : (tensor<4x?xf32>) -> tensor<i32>\n  return %0 : tensor<i32>\n}\n",
        /* a '>' closing nothing in an opaque op balanced the '{' after it */
        "s.mstablehlo.cholesky=4,ensor<i> > {",
        /* a value named inside the text an opaque op's result type is read
         * from: the type's raw text kept the name the printer renumbers */
        "func.func @main() -> tensor<i1> {\n  %cst_1 = stablehlo.constant dense<1.0> : tensor<1xf32>\n"
        "  %0 = func.funcstablehlo.uniform_quantize %cst_1 : (tensor<1xf32>) -> tensor<1x!quant.uniform<i8<1xf32>\n"
        "  %cst_1 = stablehlo.:f32, 0.0039153145808799592>>\n  %1 = stablehlo.constant dense<true> : tensor<i1>\n"
        "  return %1 : tensor<i1>\n}\n",
        /* several comments end an opaque op: all go, not just the last */
        "func.\n\n\n// c\f\n\n// c_",
        /* a bound too large for 64 bits (signed overflow) */
        "func.func @f(%a: tensor<?xi32, #stablehlo.bounds<99999999999999999999>>) {\n  return\n}\n",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        ir_module *m = NULL;
        ap_error err;
        if (ir_parse(inputs[i], strlen(inputs[i]), "fuzz.mlir", IR_FMT_STABLEHLO, &m, &err) < 0) {
            ck_assert_ptr_null(m);
            ck_assert_msg(err.line > 0 && err.msg[0], "input %zu: error without a position", i);
            continue;
        }
        ir_module_free(m);
        ap_free(roundtrip(inputs[i], NULL));
    }
}
END_TEST

/* Donation (`tf.aliasing_output = K`) must name a result of the argument's
 * own type that no other argument names; the parser accepted any K, and the
 * partitioner then lowered an argument donated to a result of another shape
 * (its layout not kept: an SPMD module XLA refuses).  Each wrong form is an
 * error at the function, naming the argument; the right form parses. */
START_TEST(donation_names_a_result_of_the_arguments_type)
{
    static const struct {
        const char *attrs0, *attrs1, *want;
    } cases[] = {
        {"{tf.aliasing_output = 1 : i32}", "", NULL},
        {"{tf.aliasing_output = 0 : i32}", "",
         "argument %arg0 (a), tensor<8x4xf32>, is donated to result #0 (tf.aliasing_output), a tensor<32xf32>"},
        {"", "{tf.aliasing_output = 2 : i32}", "argument %arg1 (b) is donated to result #2 (tf.aliasing_output) but @main "
                                               "returns 2 results"},
        {"", "{tf.aliasing_output = -1 : i32}", "argument %arg1 (b) is donated to result #-1"},
        {"", "{tf.aliasing_output = \"x\"}", "argument %arg1 (b): tf.aliasing_output should be an integer"},
        {"{tf.aliasing_output = 1 : i32}", "{tf.aliasing_output = 1 : i32}", "argument %arg1 (b), tensor<32xf32>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[600];
        snprintf(src, sizeof src,
                 "func.func public @main(%%a: tensor<8x4xf32> %s loc(\"a\"), %%b: tensor<32xf32> %s loc(\"b\")) "
                 "-> (tensor<32xf32>, tensor<8x4xf32>) {\n"
                 "  %%0 = stablehlo.exponential %%b : tensor<32xf32>\n"
                 "  %%1 = stablehlo.negate %%a : tensor<8x4xf32>\n"
                 "  return %%0, %%1 : tensor<32xf32>, tensor<8x4xf32>\n}\n",
                 cases[i].attrs0, cases[i].attrs1);
        ir_module *m = NULL;
        ap_error err;
        int rc = ir_parse(src, strlen(src), "d.mlir", IR_FMT_STABLEHLO, &m, &err);
        if (!cases[i].want) {
            ck_assert_msg(rc == 0, "case %zu: %s", i, err.msg);
            ir_module_free(m);
            continue;
        }
        ck_assert_msg(rc < 0, "case %zu: accepted", i);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(err.msg, cases[i].want), "case %zu: %s", i, err.msg);
        ck_assert_int_eq(err.line, 1);
        ck_assert_int_eq(err.col, 1);
    }
    /* two arguments of one type donated to one result */
    const char *twice = "func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}, "
                        "%b: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {\n"
                        "  %0 = stablehlo.add %a, %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";
    ir_module *m = NULL;
    ap_error err;
    ck_assert_int_lt(ir_parse(twice, strlen(twice), "d.mlir", IR_FMT_STABLEHLO, &m, &err), 0);
    ck_assert_msg(strstr(err.msg, "arguments %arg0 and %arg1 are both donated to result #0"), "%s", err.msg);
    /* the earlier donor is named, past a donation to another result */
    const char *third = "func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 1 : i32}, "
                        "%b: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %c: tensor<4xf32> {tf.aliasing_output = 1 "
                        ": i32}) -> (tensor<4xf32>, tensor<4xf32>) {\n"
                        "  %0 = stablehlo.add %a, %b : tensor<4xf32>\n  return %0, %c : tensor<4xf32>, tensor<4xf32>\n}\n";
    ck_assert_int_lt(ir_parse(third, strlen(third), "d.mlir", IR_FMT_STABLEHLO, &m, &err), 0);
    ck_assert_msg(strstr(err.msg, "arguments %arg0 and %arg2 are both donated to result #1"), "%s", err.msg);
}
END_TEST

/* Forms real programs use that MLIR accepts and the parser once refused
 * (issue 11, item 7): each parses, prints as MLIR does, and its pretty and
 * generic spellings give one IR. */
START_TEST(real_world_forms)
{
    /* cholesky and get_dimension_size in their pretty forms */
    const char *chol = "func.func @logdensity(%arg0: tensor<2x2xf32>, %arg1: tensor<4x?xf32>) -> "
                       "(tensor<2x2xf32>, tensor<2x2xf32>, tensor<i32>) {\n"
                       "  %0 = stablehlo.cholesky %arg0, lower = true : tensor<2x2xf32>\n"
                       "  %1 = stablehlo.cholesky %arg0 : (tensor<2x2xf32>) -> tensor<2x2xf32>\n"
                       "  %2 = stablehlo.get_dimension_size %arg1, dim = 1 : (tensor<4x?xf32>) -> tensor<i32>\n"
                       "  return %0, %1, %2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<i32>\n}\n";
    ap_free(roundtrip(chol, "module {\n"
                            "  func.func @logdensity(%arg0: tensor<2x2xf32>, %arg1: tensor<4x?xf32>) -> "
                            "(tensor<2x2xf32>, tensor<2x2xf32>, tensor<i32>) {\n"
                            "    %0 = stablehlo.cholesky %arg0, lower = true : tensor<2x2xf32>\n"
                            "    %1 = stablehlo.cholesky %arg0 : tensor<2x2xf32>\n"
                            "    %2 = stablehlo.get_dimension_size %arg1, dim = 1 : (tensor<4x?xf32>) -> tensor<i32>\n"
                            "    return %0, %1, %2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<i32>\n"
                            "  }\n}\n"));
    same_ir(chol, "func.func @logdensity(%arg0: tensor<2x2xf32>, %arg1: tensor<4x?xf32>) -> "
                  "(tensor<2x2xf32>, tensor<2x2xf32>, tensor<i32>) {\n"
                  "  %0 = \"stablehlo.cholesky\"(%arg0) {lower = true} : (tensor<2x2xf32>) -> tensor<2x2xf32>\n"
                  "  %1 = \"stablehlo.cholesky\"(%arg0) : (tensor<2x2xf32>) -> tensor<2x2xf32>\n"
                  "  %2 = \"stablehlo.get_dimension_size\"(%arg1) {dimension = 1 : i64} : (tensor<4x?xf32>) -> tensor<i32>\n"
                  "  return %0, %1, %2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<i32>\n}\n");

    /* dot_general with an algorithm, as JAX writes it under
     * jax.default_matmul_precision("F32_F32_F32") */
    const char *alg = "func.func @main(%arg0: tensor<3x4xf32>, %arg1: tensor<4x3xf32>) -> tensor<3x3xf32> {\n"
                      "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT], "
                      "algorithm = <lhs_precision_type = tf32, rhs_precision_type = tf32, accumulation_type = f32, "
                      "lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 3, "
                      "allow_imprecise_accumulation = false> : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>\n"
                      "  return %0 : tensor<3x3xf32>\n}\n";
    char *out = roundtrip(alg, NULL);
    ck_assert_ptr_nonnull(strstr(out, "precision = [DEFAULT, DEFAULT], algorithm = <lhs_precision_type = tf32, "
                                      "rhs_precision_type = tf32, accumulation_type = f32, lhs_component_count = 1, "
                                      "rhs_component_count = 1, num_primitive_operations = 3, "
                                      "allow_imprecise_accumulation = false> : "));
    ap_free(out);
    same_ir(alg, "func.func @main(%arg0: tensor<3x4xf32>, %arg1: tensor<4x3xf32>) -> tensor<3x3xf32> {\n"
                 "  %0 = \"stablehlo.dot_general\"(%arg0, %arg1) <{algorithm = #stablehlo.dot_algorithm<\n"
                 "    lhs_precision_type = tf32, rhs_precision_type = tf32, accumulation_type = f32,\n"
                 "    lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 3,\n"
                 "    allow_imprecise_accumulation = false>, dot_dimension_numbers = #stablehlo.dot<\n"
                 "    lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>,\n"
                 "    precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> :\n"
                 "    (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>\n"
                 "  return %0 : tensor<3x3xf32>\n}\n");
    {
        ir_module *m = tl_parse(alg, "a.mlir", NULL, 0);
        ir_op *dot = ir_func_entry(ir_module_func(m, "main"))->first;
        ir_attr *a = ir_op_attr(dot, "algorithm");
        ck_assert_ptr_nonnull(a);
        ck_assert_str_eq(a->u.dia.name, "stablehlo.dot_algorithm");
        ck_assert_int_eq(ir_dialect_param(a, "num_primitive_operations")->u.i, 3);
        ir_module_free(m);
    }

    /* #stablehlo.conv<raw ...> over several lines, keys in another order and
     * a trailing comma (as Reactant writes it): the same IR as the compact
     * form; dims the compact form cannot hold stay raw */
    const char *conv_head = "func.func @test_conv(%input: tensor<100x32x26x26xf32>, %filter: tensor<1x32x3x3xf32>) -> "
                            "tensor<100x1x28x28xf32> {\n"
                            "  %result = \"stablehlo.convolution\"(%input, %filter) {\n"
                            "    batch_group_count = 1 : i64,\n";
    const char *conv_tail = ",\n    feature_group_count = 1 : i64, padding = dense<[[2, 2], [2, 2]]> : tensor<2x2xi64>,\n"
                            "    window_strides = array<i64: 1, 1>\n"
                            "  } : (tensor<100x32x26x26xf32>, tensor<1x32x3x3xf32>) -> tensor<100x1x28x28xf32>\n"
                            "  return %result : tensor<100x1x28x28xf32>\n}\n";
    char raw[2048], compact[2048];
    snprintf(raw, sizeof raw, "%s%s%s", conv_head,
             "    dimension_numbers = #stablehlo.conv<raw\n"
             "      input_batch_dimension = 0, input_feature_dimension = 1,\n"
             "      input_spatial_dimensions = [2, 3],\n"
             "      kernel_output_feature_dimension = 0, kernel_input_feature_dimension = 1,\n"
             "      kernel_spatial_dimensions = [2, 3],\n"
             "      output_batch_dimension = 0, output_feature_dimension = 1,\n"
             "      output_spatial_dimensions = [2, 3],\n"
             "    >",
             conv_tail);
    snprintf(compact, sizeof compact, "%s%s%s", conv_head,
             "    dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>", conv_tail);
    same_ir(raw, compact);
    out = roundtrip(raw, NULL);
    ck_assert_ptr_nonnull(strstr(out, "stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"));
    ap_free(out);
    out = roundtrip("module attributes {\n  stablehlo.conv = #stablehlo.conv<raw\n    input_batch_dimension = 0,\n"
                    "    input_feature_dimension = 3,\n    input_spatial_dimensions = [1, 2],\n"
                    "    kernel_input_feature_dimension = 2,\n    kernel_output_feature_dimension = 3,\n"
                    "    kernel_spatial_dimensions = [0, 1],\n    output_batch_dimension = 99,\n"
                    "    output_feature_dimension = 3,\n    output_spatial_dimensions = [2, 1]>\n} {}\n",
                    "module attributes {stablehlo.conv = #stablehlo.conv<raw input_batch_dimension = 0, "
                    "input_feature_dimension = 3, input_spatial_dimensions = [1, 2], kernel_input_feature_dimension = 2, "
                    "kernel_output_feature_dimension = 3, kernel_spatial_dimensions = [0, 1], output_batch_dimension = 99, "
                    "output_feature_dimension = 3, output_spatial_dimensions = [2, 1]>} {\n}\n");
    ap_free(out);

    /* bounded dims: the bounds are canonical and checked */
    same_ir("func.func @f(%a: tensor<2x?x2xi32, #stablehlo.bounds<?,2,?>>) -> tensor<2x?x2xi32, #stablehlo.bounds<?,2,?>> {\n"
            "  return %a : tensor<2x?x2xi32, #stablehlo.bounds<?, 2, ?>>\n}\n",
            "func.func @f(%a: tensor<2x?x2xi32, #stablehlo.bounds<?, 2, ?>>) -> tensor<2x?x2xi32, #stablehlo.bounds<?, 2, ?>> {\n"
            "  return %a : tensor<2x?x2xi32, #stablehlo.bounds<?, 2, ?>>\n}\n");

    /* sdy.manual_computation with its clauses on several lines and comments
     * between them (as Shardy's tests write it), kept as written; a
     * trailing comment after an op of unknown syntax is dropped, so that it
     * does not swallow the location printed after it */
    const char *mc = "sdy.mesh @mesh3d = <[\"a\"=4, \"b\"=4, \"c\"=4]>\n"
                     "func.func @manual_computation_free_axes(%arg0: tensor<4xf32>, %arg1: tensor<12xf32>)\n"
                     "    -> (tensor<4xf32>, tensor<12xf32>) {\n"
                     "  %0:2 = sdy.manual_computation(%arg0, %arg1)\n"
                     "    in_shardings=[<@mesh3d, [{\"a\", \"b\"}]>,\n"
                     "                  <@mesh3d, [{\"a\"}]>]\n"
                     "    // the outputs stay sharded over \"a\"\n"
                     "    out_shardings=[<@mesh3d, [{\"a\"}]>, <@mesh3d, [{\"a\"}]>] // after a clause\n"
                     "    manual_axes={\"a\"} (%arg2: tensor<1xf32>, %arg3: tensor<3xf32>) {\n"
                     "    %1 = stablehlo.negate %arg2 : tensor<1xf32>\n"
                     "    sdy.return %1, %arg3 : tensor<1xf32>, tensor<3xf32>\n"
                     "  } : (tensor<4xf32>, tensor<12xf32>) -> (tensor<4xf32>, tensor<12xf32>) loc(\"mc\")\n"
                     "  %2 = sdy.sharding_constraint %0#0 <@mesh3d, [{\"a\"}]> : tensor<4xf32> loc(\"sc\") // the end\n"
                     "  return %2, %0#1 : tensor<4xf32>, tensor<12xf32>\n"
                     "}\n";
    out = roundtrip(mc, "module {\n"
                        "  sdy.mesh @mesh3d = <[\"a\"=4, \"b\"=4, \"c\"=4]>\n"
                        "  func.func @manual_computation_free_axes(%arg0: tensor<4xf32>, %arg1: tensor<12xf32>) -> "
                        "(tensor<4xf32>, tensor<12xf32>) {\n"
                        "    %0:2 = sdy.manual_computation(%arg0, %arg1)\n"
                        "    in_shardings=[<@mesh3d, [{\"a\", \"b\"}]>,\n"
                        "                  <@mesh3d, [{\"a\"}]>]\n"
                        "    // the outputs stay sharded over \"a\"\n"
                        "    out_shardings=[<@mesh3d, [{\"a\"}]>, <@mesh3d, [{\"a\"}]>] // after a clause\n"
                        "    manual_axes={\"a\"} (%arg2: tensor<1xf32>, %arg3: tensor<3xf32>) {\n"
                        "      %1 = stablehlo.negate %arg2 : tensor<1xf32>\n"
                        "      sdy.return %1, %arg3 : tensor<1xf32>, tensor<3xf32>\n"
                        "    } : (tensor<4xf32>, tensor<12xf32>) -> (tensor<4xf32>, tensor<12xf32>) loc(\"mc\")\n"
                        "    %2 = sdy.sharding_constraint %0#0 <@mesh3d, [{\"a\"}]> : tensor<4xf32> loc(\"sc\")\n"
                        "    return %2, %0#1 : tensor<4xf32>, tensor<12xf32>\n"
                        "  }\n"
                        "}\n");
    ap_free(out);
    {
        ir_module *m = tl_parse(mc, "mc.mlir", NULL, 0);
        ir_op *op = ir_func_entry(ir_module_func(m, "manual_computation_free_axes"))->first;
        ck_assert_str_eq(op->name, "sdy.manual_computation");
        ck_assert_int_eq(op->n_operands, 2);
        ck_assert_int_eq(op->n_regions, 1);
        ck_assert_int_eq(op->n_results, 2);
        ck_assert_int_eq(op->results[1].type->dims[0], 12);
        ck_assert_str_eq(op->loc->str, "mc");
        ck_assert_str_eq(op->next->loc->str, "sc");
        ir_module_free(m);
    }
}
END_TEST

/* One mesh type, one parser, one set of limits: what is refused is refused
 * where the mesh is read, with a message naming the limit, so a mesh that
 * is accepted can be lowered (a 28-character axis name or a 131,072-device
 * mesh used to pass --mesh and fail only at SPMD lowering). */
START_TEST(mesh_limits_at_parse)
{
    ir_mesh m;
    ap_error err;
    ck_assert_int_eq(ir_mesh_parse("batch=4,model=2", &m, &err), 0);
    ck_assert_int_eq(m.n_axes, 2);
    ck_assert_int_eq(ir_mesh_devices(&m), 8);
    ck_assert_int_eq(ir_mesh_parse("{x:4, y:6}", &m, &err), 0);
    ck_assert_str_eq(m.names[1], "y");
    ck_assert_int_eq(ir_mesh_parse("abcdefghijklmnopqrstuvwx=2", &m, &err), 0); /* 24 characters */
    ck_assert_int_eq(ir_mesh_parse("x=256,y=256", &m, &err), 0);                /* 65,536 devices */

    ck_assert_int_eq(ir_mesh_parse("abcdefghijklmnopqrstuvwxyz12=2", &m, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh 'abcdefghijklmnopqrstuvwxyz12=2': axis name 'abcdefghijklmnopqrstuvwxyz12' has "
                              "28 characters; at most 24 at column 1");
    ck_assert_int_eq(ir_mesh_parse("x=512,y=256", &m, &err), AP_ELIMIT);
    ck_assert_str_eq(err.msg, "mesh 'x=512,y=256': 131072 devices; a mesh has at most 65536");
    ck_assert_int_eq(ir_mesh_parse("x=131072", &m, &err), AP_ELIMIT);
    ck_assert_str_eq(err.msg, "mesh 'x=131072': axis 'x' has size 131072; a mesh has at most 65536 devices");
    ck_assert_int_eq(ir_mesh_parse("x=99999999999999999999", &m, &err), AP_ELIMIT);
    /* the size as written, not the digits read before the limit (99999) */
    ck_assert_str_eq(err.msg, "mesh 'x=99999999999999999999': axis 'x' has size 99999999999999999999; a mesh has at "
                              "most 65536 devices at column 3");
    ck_assert_int_eq(ir_mesh_parse("a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1", &m, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh 'a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1': more than 8 axes at column 33");
    ck_assert_int_eq(ir_mesh_parse("batch=4,", &m, &err), AP_ESYNTAX);
    ck_assert_str_eq(err.msg, "mesh 'batch=4,': expected AXIS=SIZE at column 9");
    ck_assert_int_eq(ir_mesh_parse("batch", &m, &err), AP_ESYNTAX);
    ck_assert_str_eq(err.msg, "mesh 'batch': expected '=' after axis 'batch' at column 6");
    ck_assert_int_eq(ir_mesh_parse("B=0", &m, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh 'B=0': axis 'B' has size 0; sizes are at least 1");
    ck_assert_int_eq(ir_mesh_parse("B=2,B=2", &m, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "mesh 'B=2,B=2': axis 'B' is given twice");
    ck_assert_int_eq(ir_mesh_parse("", &m, &err), AP_EINVALID);
    ck_assert_int_eq(ir_mesh_parse("{}", &m, &err), AP_EINVALID);
    ck_assert_int_eq(ir_mesh_parse("\"a\tb\"=2", &m, &err), AP_EINVALID);

    /* names that need quotes print quoted and read back */
    ck_assert_int_eq(ir_mesh_parse("\"data parallel\"=2, model=4", &m, &err), 0);
    ap_buf b;
    ap_buf_init(&b);
    ir_mesh_format(&m, &b);
    ck_assert_str_eq(b.data, "\"data parallel\"=2,model=4");
    ir_mesh back;
    ck_assert_int_eq(ir_mesh_parse(b.data, &back, &err), 0);
    ck_assert_str_eq(back.names[0], "data parallel");
    ap_buf_free(&b);

    /* meshes made from parts (a request's) hold the same limits */
    const char *names[2] = {"abcdefghijklmnopqrstuvwxyz12", "y"};
    int64_t sizes[2] = {2, 2};
    ck_assert_int_eq(ir_mesh_init(&m, 2, names, sizes, &err), AP_EINVALID);
    ck_assert_str_eq(err.msg, "axis name 'abcdefghijklmnopqrstuvwxyz12' has 28 characters; at most 24");
    names[0] = "x";
    sizes[0] = 65536;
    ck_assert_int_eq(ir_mesh_init(&m, 2, names, sizes, &err), AP_ELIMIT);
    ck_assert_str_eq(err.msg, "131072 devices; a mesh has at most 65536");
}
END_TEST

/* Ops of other dialects whose custom syntax goes on past the end of a line
 * (a line ending in ',' or ':', linalg's `ins(...) outs(...)` on the next
 * line, a region after a keyword's operands, `} -> type`), and the
 * aliases their text names; several modules in one file are refused. */
START_TEST(opaque_ops_across_lines)
{
    static const char src[] = "#map = affine_map<(d0) -> (d0)>\n"
                              "module {\n"
                              "  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {\n"
                              "    %0 = foo.bar %arg0,\n"
                              "        %arg1 : tensor<4xf32>, tensor<4xf32>\n"
                              "    %1 = tensor.empty() : tensor<4xf32>\n"
                              "    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = [\"parallel\"]}\n"
                              "        ins(%0 : tensor<4xf32>) outs(%1 : tensor<4xf32>) {\n"
                              "    ^bb0(%in: f32, %out: f32):\n"
                              "      %n = arith.negf %in : f32\n"
                              "      linalg.yield %n : f32\n"
                              "    } -> tensor<4xf32>\n"
                              "    %3 = foo.baz %2 :\n"
                              "        tensor<4xf32>\n"
                              "    return %3 : tensor<4xf32>\n"
                              "  }\n"
                              "}\n";
    char msg[600];
    ir_module *m = tl_parse(src, "lines.mlir", msg, sizeof msg);
    ck_assert_msg(m != NULL, "%s", msg);
    const ir_op *f = ir_module_entry(m);
    const ir_op *bar = ir_func_entry(f)->first, *generic = bar->next->next;
    ck_assert_str_eq(bar->name, "foo.bar");
    ck_assert_int_eq(bar->n_operands, 2);
    ck_assert_str_eq(generic->name, "linalg.generic");
    ck_assert_int_eq(generic->n_operands, 2); /* %0 and %1, not region arguments */
    ck_assert_int_eq(generic->n_regions, 1);
    ck_assert_int_eq(generic->regions[0].first->n_args, 2);
    ck_assert_int_eq(generic->results[0].type->kind, IR_T_TENSOR); /* from `} -> tensor<4xf32>` */
    char *out = tl_print(m);
    /* the alias the text names and the block header print, and read back */
    ck_assert_msg(strncmp(out, "#map = affine_map<(d0) -> (d0)>\nmodule {", 40) == 0, "%s", out);
    ck_assert_msg(strstr(out, "    ^bb0(%arg2: f32, %arg3: f32):\n") != NULL, "%s", out);
    ir_module *m2 = tl_parse(out, "printed.mlir", msg, sizeof msg);
    ck_assert_msg(m2 != NULL, "%s\n%s", msg, out);
    char why[400];
    ck_assert_msg(ir_module_equal(m, m2, why, sizeof why), "%s", why);
    char *out2 = tl_print(m2);
    ck_assert_str_eq(out, out2);
    free(out);
    free(out2);
    ir_module_free(m);
    ir_module_free(m2);

    static const char two[] = "module {\n  func.func @main() {\n    return\n  }\n}\nmodule {\n}\n";
    ap_error err;
    ck_assert_int_eq(ir_parse(two, strlen(two), "two.mlir", IR_FMT_AUTO, &m, &err), AP_EUNSUPPORTED);
    ap_error_format(&err, msg, sizeof msg);
    ck_assert_str_eq(msg, "two.mlir:6:1: error: a second top-level module: the file holds several modules and "
                          "autopart reads one; split it into one file per module");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, types_parse_and_print);
    tcase_add_test(tc, elem_types);
    tcase_add_test(tc, dense_constants);
    tcase_add_test(tc, dense_large_prints_hex);
    tcase_add_test(tc, attribute_forms);
    tcase_add_test(tc, pretty_equals_generic);
    tcase_add_test(tc, locations);
    tcase_add_test(tc, opaque_ops_print_as_written);
    tcase_add_test(tc, func_return_attributes_first);
    tcase_add_test(tc, no_module_wrapper_and_cfg);
    tcase_add_test(tc, inline_private_calls);
    tcase_add_test(tc, inline_identity_callee);
    tcase_add_test(tc, inline_size_limit);
    tcase_add_test(tc, typed_accessors);
    tcase_add_test(tc, deep_nesting_is_an_error_not_a_crash);
    tcase_add_test(tc, truncated_inputs_never_crash);
    tcase_add_test(tc, fuzz_findings);
    tcase_add_test(tc, complex_forms);
    tcase_add_test(tc, real_world_forms);
    tcase_add_test(tc, mesh_limits_at_parse);
    tcase_add_test(tc, opaque_ops_across_lines);
    tcase_add_test(tc, donation_names_a_result_of_the_arguments_type);
    suite_add_tcase(s, tc);
    return tl_run(s);
}
