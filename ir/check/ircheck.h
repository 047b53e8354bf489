/*
 * ircheck.h - the equivalence check of a partition state (`autopart check`):
 * the unpartitioned function, the PartIR:Core loop view and the SPMD
 * program run by the interpreter (ir/interp/interp.h) on the same seeded
 * random inputs, and their results compared.  A library of its own because
 * it needs both the interpreter and PartIR (partition, loop view,
 * lowering), which know nothing of each other.
 */
#ifndef IRCHECK_H
#define IRCHECK_H

#include "interp.h"
#include "partir.h"

/*
 * `autopart check`: runs the unpartitioned function, the PartIR:Core loop
 * view (ir_temporal: tile loops stack their iterations, sum loops add them,
 * any loops must agree) and the SPMD program (ir_lower run on every device
 * by ir_spmd_run) on the same seeded random inputs, and compares each
 * result of the two partitioned runs with the unpartitioned one.
 *
 * The error of a result is max |x - ref| / max(1, max |ref|): absolute for
 * values below one, relative to the result's largest magnitude above (an
 * element-wise relative error would flag every reordered sum that lands
 * near zero).  It must not exceed the result's tolerance, which follows
 * the lowest precision its computation went through, unless
 * ir_check_opts.tol overrides it: the largest, over the ops the result
 * depends on (region bodies included), of ir_check_default_tol of their
 * result types, and of u * sqrt(n) for a reduce or reduce_window with add
 * or multiply that combines n terms one rounding at a time in a type of
 * unit roundoff u (reordering such a sum, as partitioning does, moves it by
 * about that much in plain arithmetic).  So an f32 result of a bf16
 * computation is held to the bf16 tolerance, and a million-term f16 sum to
 * 2^-11 * 1024 = 0.5.  And a result that is ill-conditioned (cancellation
 * in a gradient, say) is held to at least IR_CHECK_SENSITIVITY times how
 * far it moves when its inputs move by one ulp of the precision it is
 * computed in (from an extra unpartitioned run on inputs moved by about one
 * ulp of their own types, scaled), up to IR_CHECK_SENSITIVITY_CAP:
 * reordering its arithmetic moves it about as much.  Integer and boolean
 * results are exact.
 *
 * And a float result is held to at least IR_CHECK_NOISE_FACTOR times its
 * noise floor, up to IR_CHECK_NOISE_CAP.  The noise floor is how far the
 * unpartitioned program moves when it runs once more rounded another way
 * (the `noise` run; the same error measure against the first run):
 *  - its sums in another order StableHLO equally allows
 *    (ir_interp_opts.split_sums, one chunk per device, at least 2): every
 *    float dot_general and convolution summed in chunks rounded to the
 *    result type and added one at a time, as a contraction split over the
 *    devices and all-reduced is; reduce and scatter sums reversed;
 *  - and the sums, and the convert, multiply or divide that carries a
 *    sum's result, rounded the other way at random (the Monte Carlo
 *    arithmetic of Parker, Verificarlo and CADNA:
 *    ir_interp_opts.random_rounding, random_rounding_sums), since a
 *    partitioned program also rounds at points the original does not: each
 *    partial sum, and a partial sum carried through a multiply or a
 *    convert to a narrower type before it is reduced.  Only there: every
 *    other value a partitioned program computes as the original does, and
 *    rounding every op at random (dde2e72) overstated the noise 2-8x in
 *    bf16 (t_mixed's grads['embed']: 0.15-0.27 against 0.023-0.081 from
 *    the sums alone and 0.014-0.027 from the partitionings themselves),
 *    so much that a dropped all_reduce (0.05-0.08 there) passed.  Of the
 *    lowering bugs scripts/check-mutants plants that the precision rules
 *    alone catch, 20% passed in t_mixed and 7% in f16; now 16% and 3%.
 *    The rest are within 4x the noise of the sums: a correct partitioning
 *    of t_mixed moves a result by up to 3.3 times that noise.
 * A correct partitioning changes nothing but where and in what order the
 * program rounds, and a deep low-precision backward pass amplifies those
 * roundings far beyond what the rules above foresee (f16 gradients moved
 * by 0.018 against 0.01); the extra run measures the amplification in this
 * very program.  The factor 4: the noise run is one draw of that noise, and
 * the largest error over a result's elements varies between draws by up to
 * about 2x (the largest of n >= 16 normal draws: its 5th to 95th
 * percentile span 1.8x), and a partitioned program rounds some values
 * once per device (each partial sum, and each op a pending sum passes
 * through before it is reduced), which one perturbation per op does not
 * bound when the partials cancel (another 2x).  The cap keeps gross
 * errors (a missing or doubled reduction, a wrong tile: of the order of the
 * values themselves) caught where a result is all noise at its precision.
 * Integer and boolean results stay exact.  A noise run that fails (a
 * loop on x != 0.75 that the other rounding never ends) leaves every noise
 * at 0 and says so in the report's note.  Both extra runs are skipped
 * under ir_check_opts.tol.  A result is held to the largest tolerance the
 * rules give, and the report says which rule set it (tol_basis).
 *
 * Then the unpartitioned and the SPMD program run once more with every
 * float held and computed in f64 whatever its type (ir_interp_opts.f64:
 * no rounding to f32, f16 or bf16; a convert between floats is a copy),
 * on the same inputs, and each SPMD result must be within IR_CHECK_F64_TOL
 * (1e-9, the same error measure) of the unpartitioned one, or the result
 * is not ok (f64_mismatch).  At low precision a structural bug (a dropped
 * or doubled reduction, a wrong shard) can be as small as the rounding
 * noise: mutation testing (scripts/check-mutants) found the noise floor
 * letting through a sixth of the mixed-precision mutants the precision
 * rules caught, and every rule missing many (a small gradient short of
 * some partial sums).  In f64 a correct partitioning differs only by f64
 * rounding of its reordered sums: u = 1.1e-16 times sqrt(n) to n per sum,
 * times the conditioning of what follows; 2e-15 on the f16 transformer of
 * test_check, so 1e-9 leaves five orders of magnitude for deeper programs
 * and longer sums, while a dropped partial sum moves a result by about
 * its own size (1e-3 and up in every mutant measured).  Only a program
 * with a discontinuity (compare, select, a float -> int convert) fed by a
 * reordered sum within ~1e-15 of its threshold could differ more.  The
 * comparison is skipped, with the reason in f64_skipped, when a program
 * has an op whose meaning depends on a float's width (bitcast_convert of
 * a float, reduce_precision, chlo.next_after, a custom call other than
 * an identity or the check's own, cuDNN's fused attention) or a complex
 * value, or when an f64 run fails (the native runs stand), except that
 * replicated copies disagreeing in the f64 SPMD run is the AP_ECONFLICT
 * error the native one gives.  It runs under --tol too.
 */
#define IR_CHECK_SENSITIVITY 4.0
#define IR_CHECK_SENSITIVITY_CAP 0.1
#define IR_CHECK_NOISE_FACTOR 4.0
#define IR_CHECK_NOISE_CAP 0.1
#define IR_CHECK_F64_TOL 1e-9

/* Default tolerance per element type: 1e-9 for f64, 1e-4 for f32 and tf32,
 * 1e-2 for f16, 5e-2 for bf16, 0.25 for the 8-bit and narrower floats,
 * those of the parts for complex, and 0 (exact) for integers and booleans.
 * Sums are reordered by partitioning, so floats cannot be held to exact
 * equality; the bounds leave room for a few thousand roundings. */
double ir_check_default_tol(ir_elem e);

typedef struct ir_check_opts {
    uint64_t seed;           /* of the random inputs */
    double tol;              /* > 0: for every result; 0: per element type */
    int64_t drop_all_reduce; /* ir_lower_opts (tests only); -1 none */
    /* Tests only: a wrong answer planted in the SPMD run: plant_error
     * times max(1, the result's largest |value|) added to element 0 of
     * result plant_result (0: none). */
    double plant_error;
    uint32_t plant_result;
    /* A SPMD program to run in place of the lowering of the state
     * (`autopart check --spmd FILE`): one `autopart apply` wrote and then
     * changed, or another partitioner's for the same mesh and arguments;
     * NULL: ir_lower's.  Borrowed.  Mutation tests judge planted lowering
     * bugs with it (scripts/check-mutants). */
    const ir_module *spmd;
    int64_t max_elems;       /* per tensor, 0: the interpreter's default */
    int64_t max_arg_bytes;   /* all arguments together; 0: IR_CHECK_MAX_ARG_BYTES */
    /* The noise run is made only when some float result is beyond the
     * tolerance of its precision (tol_rules): the noise floor can only
     * widen a tolerance, so without one it changes no verdict (and it
     * costs a run of its own, 1-2x the unpartitioned one).  true: make it
     * always, to see every result's noise (`check --noise`). */
    bool noise_always;
} ir_check_opts;
#define IR_CHECK_OPTS_DEFAULT ((ir_check_opts){.seed = 0, .tol = 0, .drop_all_reduce = -1})
/* The check holds several copies of every value (three runs, each SPMD
 * device's tiles): above this much argument data it refuses with
 * AP_ELIMIT rather than exhaust memory.  It is meant for small
 * configurations of a model (the zoo's `tiny`). */
#define IR_CHECK_MAX_ARG_BYTES ((int64_t)1 << 30)

/* The runs timed in the report; IR_CHECK_NOISE is the unpartitioned program
 * again with its sums reordered (the noise floor above). */
enum { IR_CHECK_REF, IR_CHECK_LOOPS, IR_CHECK_SPMD, IR_CHECK_NOISE, IR_CHECK_F64_REF, IR_CHECK_F64_SPMD, IR_CHECK__RUNS };

typedef struct ir_check_result {
    char name[96];  /* jax.result_info, or "result #J" */
    char type[96];  /* tensor<4x8xf32> */
    double tol;
    char tol_basis[48]; /* what tol follows: "bf16", "f16, a 1048576-term sum",
                           "f32, ill-conditioned (1.4e-05 per ulp)",
                           "f16, rounding noise 0.0046", "--tol"
                           (ir_check_opts.tol) */
    double noise;       /* the noise floor (the error of the reordered
                           unpartitioned run); 0 under --tol and when
                           the noise run was not made (noise_ran) */
    double tol_rules;   /* the tolerance without the noise floor (the
                           precision, sum and sensitivity rules) */
    bool within_noise;  /* ok, with an error above tol_rules: only the
                           noise floor let it pass (a bug as small as the
                           noise looks the same; scripts/check-mutants) */
    /* [0]: the loop view, [1]: SPMD, against the unpartitioned run */
    double max_abs[2]; /* largest |x - ref| */
    double max_rel[2]; /* largest |x - ref| / max(|x|, |ref|) */
    double error[2];   /* what is held to tol (see above) */
    double error_f64;  /* the same measure, SPMD against unpartitioned, both
                          with every float in f64; 0 when not run */
    bool f64_mismatch; /* error_f64 above IR_CHECK_F64_TOL (not ok) */
    bool ok;
} ir_check_result;

typedef struct ir_check_report {
    uint32_t n_results;
    ir_check_result *results; /* owned */
    bool ok;                  /* every result within its tolerance */
    uint32_t n_within_noise;  /* results ok only by the noise floor */
    bool noise_ran;           /* the noise run was made (ir_check_opts.noise_always) */
    bool f64_ran;             /* the f64 comparison was made */
    double f64_error;         /* its largest error_f64 */
    char f64_skipped[256];    /* why it was not ("" when it was) */
    int64_t n_devices;
    double input_lo, input_hi;        /* range of the float inputs */
    double seconds[IR_CHECK__RUNS];   /* per run: unpartitioned, loops, SPMD, noise */
    uint64_t ops[IR_CHECK__RUNS];     /* ops evaluated per run */
    int64_t held[IR_CHECK__RUNS];     /* per run: the most bytes its values took at once */
    char note[256];                   /* e.g. why inputs were redrawn, or
                                         that the noise run failed */
} ir_check_report;

/* Runs the check of state p (its context's function and module) and fills
 * *report (free with ir_check_report_free), returning 0 whether or not the
 * results agree: report->ok says.  A negative AP_E* code with err filled
 * when a run fails: an op the interpreter cannot evaluate, the lowering
 * failing, replicated copies disagreeing across devices (AP_ECONFLICT), or
 * iterations of an `any` loop disagreeing (AP_ECONFLICT). */
int ir_check(const ir_partition *p, const ir_check_opts *opts, ir_check_report *report, ap_error *err);
void ir_check_report_free(ir_check_report *r);

#endif /* IRCHECK_H */
