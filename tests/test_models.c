/*
 * test_models.c - every model of the zoo (tests/models/modelgen) generates,
 * parses with our parser (types verified), round-trips through the printer,
 * and names its arguments the way tactics select them.
 */
#include "testlib.h"

#include <unistd.h>


static const struct {
    const char *model, *config;
    int params; /* parameter tensors, 0 when not checked */
} configs[] = {
    {"transformer", "tiny", 19},      {"transformer", "small", 37}, {"transformer", "t32", 289},
    {"transformer", "t48", 433},      {"transformer_infer", "tiny", 0}, {"transformer_infer", "it32", 0},
    {"unet", "tiny", 0},              {"unet", "paper", 0},         {"gns", "tiny", 0},
    {"gns", "paper", 0},              {"mlp", "tiny", 0},           {"mlp", "small", 0},
};

START_TEST(model_parses_and_round_trips)
{
    const char *model = configs[_i].model, *config = configs[_i].config;
    char *text = tl_generate_text(model, config, "");
    char msg[1024], name[128], why[600];
    snprintf(name, sizeof name, "%s-%s.mlir", model, config);
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

int main(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("zoo");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, model_parses_and_round_trips, 0, (int)(sizeof configs / sizeof configs[0]));
    tcase_add_test(tc, transformer_names);
    suite_add_tcase(s, tc);
    return tl_run(s);
}
