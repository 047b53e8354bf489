/*
 * cmd_check.c - `autopart check FILE --mesh ... --schedule ... [--seed N]
 * [--tol X] [--json] [--spmd FILE]`: runs the function unpartitioned, through the
 * PartIR:Core loop view and as the SPMD program (the schedule's lowering or
 * the one --spmd names) on every simulated device,
 * on the same seeded random inputs, and says per result how far the
 * partitioned runs are from the original (exit 1 beyond the tolerance).
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CHECK_SYNOPSIS "autopart check FILE --mesh AXES --schedule TEXT|@FILE [options]"

static void check_usage(FILE *f)
{
    fprintf(f,
            "usage: " CHECK_SYNOPSIS "\n"
            "\n"
            "Partitions the entry function of FILE as `autopart apply` does, then runs it\n"
            "three ways on the same seeded random inputs: unpartitioned, through the\n"
            "PartIR:Core loop view (loops run one after another), and as the SPMD program\n"
            "on every device of the mesh with its collectives carried out.  Prints, per\n"
            "result, the largest absolute and relative difference of each partitioned run\n"
            "from the original; exits 1 if any exceeds the tolerance.\n"
            "\n"
            "The error held to the tolerance is max|x - ref| / max(1, max|ref|).  The\n"
            "tolerance follows the lowest precision a result's computation went through\n"
            "(the report says which): f64 1e-9, f32 1e-4, f16 1e-2, bf16 5e-2, 8-bit floats\n"
            "0.25; u * sqrt(n) for a sum of n terms rounded one at a time in a type of\n"
            "unit roundoff u, when larger; for an ill-conditioned result, 4 times how\n"
            "far it moves when its inputs move by one ulp (at most 0.1); and 4 times its\n"
            "rounding noise (at most 0.1): how far the unpartitioned program moves when\n"
            "run again rounded another way (dots and convolutions summed in one rounded\n"
            "chunk per device, added one at a time, as a split sum that is all-reduced;\n"
            "reduce and scatter sums reversed; the sums, and a convert, multiply or divide\n"
            "of a sum's result, rounded up or down at random).  A correct partitioning\n"
            "changes nothing but where and in what order the program rounds its sums;\n"
            "the `noise` run and column show what that moves.  The noise run is made only\n"
            "when some float result is beyond the tolerance of its precision (the noise\n"
            "can only widen a tolerance); `-` in the column otherwise, or ask for it.\n"
            "\n"
            "Then the unpartitioned and the SPMD program run once more with every float\n"
            "held and computed in f64 whatever its type (no rounding to f32, f16, bf16;\n"
            "a convert between floats is a copy), and each result of the two must agree\n"
            "to 1e-9 in the same measure (column f64 err): at low precision a bug can be\n"
            "as small as the rounding noise, but a correct partitioning differs there by\n"
            "f64 rounding only (~1e-15), so a larger gap is a structural error and the\n"
            "verdict is NOT equivalent (`MISMATCH (f64)`).  A program with an op whose\n"
            "meaning depends on a float's width (bitcast_convert of a float,\n"
            "reduce_precision, chlo.next_after, a custom call other than an identity,\n"
            "complex values)\n"
            "skips this comparison, and the report says why.\n"
            "Integers and booleans are exact.  Float inputs are uniform in [-1, 1)\n"
            "(redrawn in [0.01, 1) if that makes the original overflow), integers in\n"
            "[0, 8).\n"
            "\n"
            "  --mesh AXES        e.g. batch=4,model=2 (default: the module's sdy.mesh)\n"
            "  --schedule S       PartIR actions, as for `autopart apply`; @FILE reads a file\n"
            CLI_HELP_IMPORT
            "  --seed N           seed of the random inputs (default 0)\n"
            "  --tol X            tolerance for every result (default: by precision)\n"
            "  --noise            make the noise run even where no verdict needs it\n"
            "  --spmd FILE        run this SPMD module (as `autopart apply` writes one, for\n"
            "                     the same mesh) in place of the schedule's lowering: judges\n"
            "                     a program changed by hand or by another partitioner\n"
            "  --max-arg-bytes N  refuse modules whose arguments take more (K, M, G suffixes;\n"
            "                     default 1G): every value is held several times over\n"
            "  --json             the report as JSON\n"
            "  --format F         stablehlo | hlo (default: detected)\n"
            "  --func NAME        the function to partition (default: main)\n"
            "  -h, --help         this help\n"
            "\n"
            "Exit status: 0 equivalent, 1 a difference beyond the tolerance or a run that\n"
            "failed, 2 bad usage.  A result beyond the tolerance of its precision that only\n"
            "its noise lets pass is `ok within noise` (JSON within_noise), and the verdict\n"
            "counts them: a wrong answer as small as the noise would look the same.\n");
}

static const char *const run_names[IR_CHECK__RUNS] = {"unpartitioned", "loops", "spmd", "noise", "f64 unpartitioned",
                                                      "f64 spmd"};

static int print_json(const ir_check_report *r)
{
    json_t *o = json_object(), *results = json_array(), *runs = json_object();
    for (uint32_t j = 0; j < r->n_results; j++) {
        const ir_check_result *x = &r->results[j];
        json_t *jr = json_pack("{s:s, s:s, s:f, s:s, s:f, s:f, s:b, s:b, s:{s:f, s:f, s:f}, "
                                                 "s:{s:f, s:f, s:f}}",
                                                 "name", x->name, "type", x->type, "tol", x->tol, "tol_follows",
                                                 x->tol_basis, "noise", x->noise, "tol_without_noise", x->tol_rules,
                                                 "ok", x->ok, "within_noise", x->within_noise, "loops",
                                                 "max_abs", x->max_abs[0], "max_rel", x->max_rel[0], "error", x->error[0],
                                                 "spmd", "max_abs", x->max_abs[1], "max_rel", x->max_rel[1], "error",
                                                 x->error[1]);
        if (r->f64_ran) {
            json_object_set_new(jr, "f64_error", json_real(x->error_f64));
            json_object_set_new(jr, "f64_mismatch", json_boolean(x->f64_mismatch));
        }
        json_array_append_new(results, jr);
    }
    for (int k = 0; k < IR_CHECK__RUNS; k++)
        json_object_set_new(runs, run_names[k], json_pack("{s:f, s:I, s:I}", "seconds", r->seconds[k], "ops",
                                                          (json_int_t)r->ops[k], "peak_bytes", (json_int_t)r->held[k]));
    json_object_set_new(o, "ok", json_boolean(r->ok));
    json_object_set_new(o, "within_noise", json_integer(r->n_within_noise));
    json_object_set_new(o, "noise_ran", json_boolean(r->noise_ran));
    json_object_set_new(o, "devices", json_integer(r->n_devices));
    if (r->f64_ran)
        json_object_set_new(o, "f64", json_pack("{s:f, s:f}", "error", r->f64_error, "tol", IR_CHECK_F64_TOL));
    else
        json_object_set_new(o, "f64", json_pack("{s:s}", "skipped", r->f64_skipped));
    json_object_set_new(o, "results", results);
    json_object_set_new(o, "runs", runs);
    json_object_set_new(o, "inputs", json_pack("{s:f, s:f}", "lo", r->input_lo, "hi", r->input_hi));
    if (r->note[0])
        json_object_set_new(o, "note", json_string(r->note));
    char *s = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!s)
        return cli_fail("check", "out of memory writing JSON");
    puts(s);
    ap_free(s);
    return 0;
}

static void print_text(const ir_check_report *r, const char *path, uint64_t seed)
{
    printf("%s on %" PRId64 " devices, seed %" PRIu64 ", float inputs in [%g, %g)\n", path, r->n_devices, seed,
           r->input_lo, r->input_hi);
    for (int k = 0; k < IR_CHECK__RUNS; k++)
        if (k == IR_CHECK_NOISE && !r->noise_ran && !r->ops[k])
            printf("  %-17s not made: no verdict needed it (--noise makes it)\n", run_names[k]);
        else
        {
            char held[32];
            printf("  %-17s %8.3f s  %10" PRIu64 " ops evaluated  %10s of values at most\n", run_names[k],
                   r->seconds[k], r->ops[k], ap_format_bytes((double)r->held[k], held, sizeof held));
        }
    if (r->note[0])
        printf("note: %s\n", r->note);
    int wn = 6, wt = 4, wf = 11;
    for (uint32_t j = 0; j < r->n_results; j++) {
        int n = (int)strlen(r->results[j].name), t = (int)strlen(r->results[j].type),
            f = (int)strlen(r->results[j].tol_basis);
        wn = n > wn ? n : wn;
        wt = t > wt ? t : wt;
        wf = f > wf ? f : wf;
    }
    /* the tolerance follows the lowest precision the result went through;
     * what is held to it is err, not the per-element rel */
    printf("\nheld to tol: err = largest |difference| / max(1, largest |value| of the result), an absolute bound\n"
           "for results within [-1, 1], relative to the result's scale above; rel (the largest per-element\n"
           "relative difference) is for information: tiny elements make it large; noise (the same measure of\n"
           "the unpartitioned run rounded another way) is the rounding noise the result carries: tol is at\n"
           "least %g times it, up to %g\n",
           IR_CHECK_NOISE_FACTOR, IR_CHECK_NOISE_CAP);
    printf("\n%-*s  %-*s  %-8s  %-*s  %-9s  %-9s %-9s %-9s  %-9s %-9s %-9s  %-9s\n", wn, "result", wt, "type", "tol", wf,
           "tol follows", "noise", "loops abs", "rel", "err", "spmd abs", "rel", "err", "f64 err");
    for (uint32_t j = 0; j < r->n_results; j++) {
        const ir_check_result *x = &r->results[j];
        char e64[16] = "-", nz[16] = "-";
        if (r->f64_ran)
            snprintf(e64, sizeof e64, "%.3g", x->error_f64);
        if (r->noise_ran)
            snprintf(nz, sizeof nz, "%.3g", x->noise);
        printf("%-*s  %-*s  %-8.2g  %-*s  %-9s  %-9.3g %-9.3g %-9.3g  %-9.3g %-9.3g %-9.3g  %-9s %s\n", wn, x->name,
               wt, x->type, x->tol, wf, x->tol_basis, nz, x->max_abs[0], x->max_rel[0], x->error[0], x->max_abs[1],
               x->max_rel[1], x->error[1], e64,
               x->f64_mismatch ? "MISMATCH (f64)" : !x->ok ? "MISMATCH" : x->within_noise ? "ok within noise" : "ok");
    }
    uint32_t bad = 0, bad64 = 0;
    for (uint32_t j = 0; j < r->n_results; j++) {
        bad += !r->results[j].ok;
        bad64 += r->results[j].f64_mismatch;
    }
    if (r->f64_ran)
        printf("\nf64 comparison (every float in f64, SPMD against unpartitioned): largest err %.3g, tol %g%s\n",
               r->f64_error, IR_CHECK_F64_TOL, bad64 ? ": a structural error" : "");
    else
        printf("\nf64 comparison skipped: %s\n", r->f64_skipped);
    if (r->ok && r->n_within_noise)
        /* a wrong answer as small as the noise looks the same: say so */
        printf("\nequivalent: all %u results within tolerance; %u only within the rounding noise (beyond\n"
               "the tolerance of their precision, within %g times their noise: a bug that small would pass)\n",
               r->n_results, r->n_within_noise, IR_CHECK_NOISE_FACTOR);
    else if (r->ok)
        printf("\nequivalent: all %u results within tolerance\n", r->n_results);
    else
        printf("\nNOT equivalent: %u of %u results differ beyond tolerance%s\n", bad, r->n_results,
               bad64 ? " (in f64 too: a structural error, not rounding)" : "");
}

int cli_check(int argc, char **argv)
{
    static const struct option opts[] = {{"mesh", required_argument, NULL, 'm'},   {"schedule", required_argument, NULL, 's'},
                                         {"seed", required_argument, NULL, 'S'},   {"tol", required_argument, NULL, 't'},
                                         {"json", no_argument, NULL, 'j'},         {"format", required_argument, NULL, 'f'},
                                         {"func", required_argument, NULL, 'F'},   {"import", no_argument, NULL, 'i'},
                                         {"help", no_argument, NULL, 'h'},         {"max-arg-bytes", required_argument, NULL, 'B'},
                                         {"spmd", required_argument, NULL, 'P'},   {"noise", no_argument, NULL, 'N'},
                                         {NULL, 0, NULL, 0}};
    const char *mesh_text = NULL, *sched_arg = NULL, *func_name = NULL, *spmd_path = NULL;
    ir_check_opts copts = IR_CHECK_OPTS_DEFAULT;
    bool json = false, import = false;
    ir_format fmt = IR_FMT_AUTO;
    int ch;
    char *end;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': mesh_text = optarg; break;
        case 's': sched_arg = optarg; break;
        case 'j': json = true; break;
        case 'i': import = true; break;
        case 'F': func_name = optarg; break;
        case 'P': spmd_path = optarg; break;
        case 'N': copts.noise_always = true; break;
        case 'S':
            copts.seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end || optarg[0] == '-')
                return cli_usage_fail("check", "--seed wants a non-negative integer, not '%s'", optarg);
            break;
        case 't':
            copts.tol = strtod(optarg, &end);
            if (!*optarg || *end || !(copts.tol > 0))
                return cli_usage_fail("check", "--tol wants a positive number, not '%s'", optarg);
            break;
        case 'B': {
            double v = strtod(optarg, &end);
            double unit = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1.0;
            if (unit > 1)
                end++;
            if (!*optarg || *end || !(v > 0) || v * unit > 9e18)
                return cli_usage_fail("check", "--max-arg-bytes wants a size such as 512M or 2G, not '%s'", optarg);
            copts.max_arg_bytes = (int64_t)(v * unit);
            break;
        }
        case 'f':
            if (!cli_parse_format(optarg, &fmt))
                return cli_usage_fail("check", "unknown format '%s' (stablehlo, hlo or auto)", optarg);
            break;
        case 'h': check_usage(stdout); return CLI_OK;
        default: return cli_bad_option("check", ch, argv);
        }
    }
    if (optind != argc - 1) {
        cli_usage_fail("check", optind < argc ? "expected one FILE, not %d" : "expected a FILE", argc - optind);
        return cli_usage_hint("check", CHECK_SYNOPSIS);
    }
    if (!sched_arg && !import)
        return cli_usage_fail("check", "--schedule (or --import) is required");
    const char *path = argv[optind];
    cli_partitioned st = {0};
    ir_check_report report = {0};
    cli_schedule sched = {0};
    ir_module *spmd = NULL;
    ap_error err;
    ap_error_clear(&err);
    int rc;
    if (sched_arg && (rc = cli_schedule_read("check", "--schedule", sched_arg, &sched)) != 0)
        return rc;
    rc = cli_partition_open(&(cli_partition_args){.cmd = "check", .path = path, .fmt = fmt, .func_name = func_name,
                                                      .mesh_text = mesh_text, .import = import,
                                                      .schedule = sched.text},
                                &st);
    if (rc != 0)
        goto out;
    rc = CLI_FAIL;
    if (sched_arg && cli_schedule_apply("check", &sched, st.p, NULL, NULL) != 0)
        goto out;
    if (spmd_path) {
        /* the given SPMD program must be one the interpreter can trust:
         * well-typed, as `autopart apply` prints them */
        if (!(spmd = cli_load_module("check", spmd_path, IR_FMT_AUTO)))
            goto out;
        if (ir_verify(spmd, &err) < 0) {
            cli_fail_err("check", spmd_path, &err);
            goto out;
        }
        copts.spmd = spmd;
    }
    if (ir_check(st.p, &copts, &report, &err) < 0) {
        cli_fail_err("check", NULL, &err);
        goto out;
    }
    rc = json ? print_json(&report) : (print_text(&report, path, copts.seed), 0);
    if (rc == 0 && !report.ok)
        rc = CLI_FAIL;
    if (fflush(stdout) != 0 && rc == 0)
        rc = cli_fail("check", "cannot write the output");
out:
    ir_check_report_free(&report);
    cli_schedule_free(&sched);
    cli_partitioned_free(&st);
    ir_module_free(spmd);
    return rc;
}
