/*
 * randsched.h - random action sequences over a partition state, shared by
 * the property tests of partitioning (test_check over fixed programs,
 * test_random_programs over generated ones): random_actions tiles random
 * values (arguments and results of top-level ops) on random dims along
 * random axes, deep-tiles and re-tiles, marks values atomic and
 * propagates, and asserts that no accepted action undoes what the state
 * had and no refused one changes it.  Header-only, like testlib.h.
 */
#ifndef RANDSCHED_H
#define RANDSCHED_H

#include "testlib.h"

/* xorshift64*: reproducible across platforms, unlike rand(). */
static uint64_t next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static uint32_t below(uint64_t *x, uint32_t n) { return (uint32_t)(next(x) % n); }

/* The values an action may name: arguments and the results of top-level
 * ops that are static tensors of rank >= 1. */
static uint32_t candidates(const ir_pctx *c, const ir_value **out, uint32_t cap)
{
    const ir_op *f = ir_pctx_func(c);
    uint32_t n = 0;
    for (uint32_t a = 0; a < ir_func_num_args(f) && n < cap; a++)
        out[n++] = ir_func_arg(f, a);
    for (uint32_t i = 0; i < ir_pctx_num_ops(c) && n < cap; i++) {
        const ir_op *op = ir_pctx_op(c, i);
        for (uint32_t j = 0; j < op->n_results && n < cap; j++)
            out[n++] = &op->results[j];
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ir_type *t = out[i]->type;
        bool ok = t->kind == IR_T_TENSOR && t->rank >= 1;
        for (int d = 0; ok && d < t->rank; d++)
            ok = t->dims[d] >= 0;
        if (ok)
            out[k++] = out[i];
    }
    return k;
}

/* Actions never undo earlier decisions: every axis that tiled a value (on
 * a dim, at a position) or made it a pending sum still does. */
static void assert_monotone(const ir_partition *p, const ir_value **vals, uint32_t n_vals, const ir_layout *before,
                            const char *what)
{
    for (uint32_t i = 0; i < n_vals; i++) {
        ir_layout now;
        ir_partition_value_layout(p, vals[i], &now);
        for (int a = 0; a < IR_MAX_AXES; a++) {
            const ir_layout *b = &before[i];
            if (b->dim[a] >= 0)
                ck_assert_msg(now.dim[a] == b->dim[a] && now.pos[a] == b->pos[a],
                              "%s undid the tiling of a value on dim %d along axis #%d", what, b->dim[a], a);
            else if (b->dim[a] == IR_AX_PARTIAL)
                ck_assert_msg(now.dim[a] == IR_AX_PARTIAL && now.red[a] == b->red[a],
                              "%s undid a pending sum along axis #%d", what, a);
        }
    }
}

static void snapshot(const ir_partition *p, const ir_value **vals, uint32_t n_vals, ir_layout *out)
{
    for (uint32_t i = 0; i < n_vals; i++)
        ir_partition_value_layout(p, vals[i], &out[i]);
}

/* Applies 1 to 8 random actions that the state accepts: tile a random value
 * on a random dim along a random axis, now and then atomic; a third of the
 * time on a value some axis already tiles or makes a pending sum (deep
 * tiling and re-tiling, of pending sums and maxima too, and atomic after
 * tile); a propagate after about half and at the end.  Every accepted
 * action keeps what the state had (assert_monotone), every refused one
 * leaves it unchanged, and atomic along an axis that tiles the value (or
 * makes it a pending sum) is refused.  Returns the number applied. */
static int random_actions(ir_partition *p, uint64_t *rng, const ir_value **vals, uint32_t n_vals)
{
    const ir_mesh *mesh = ir_pctx_mesh(ir_partition_ctx(p));
    int want = 1 + (int)below(rng, 8), done = 0;
    ap_error err;
    ir_layout *before = malloc(sizeof *before * n_vals), *after = malloc(sizeof *after * n_vals);
    uint32_t *busy = malloc(sizeof *busy * n_vals);
    for (int tries = 0; done < want && tries < 200; tries++) {
        snapshot(p, vals, n_vals, before);
        const ir_value *v = vals[below(rng, n_vals)];
        ir_layout lv;
        if (below(rng, 3) == 0) { /* one some axis already tiles or sums */
            uint32_t n_busy = 0;
            for (uint32_t i = 0; i < n_vals; i++) {
                bool any = false;
                for (int a = 0; a < mesh->n_axes; a++)
                    any |= before[i].dim[a] != IR_AX_NONE;
                if (any)
                    busy[n_busy++] = i;
            }
            if (n_busy)
                v = vals[busy[below(rng, n_busy)]];
        }
        ir_partition_value_layout(p, v, &lv);
        int axis = (int)below(rng, (uint32_t)mesh->n_axes);
        bool atomic = below(rng, 6) == 0;
        int rc;
        /* no message wanted: refusals are frequent, and naming a result
         * asks the printer */
        if (atomic)
            rc = ir_atomic(p, v, axis, NULL);
        else
            rc = ir_tile(p, v, (int)below(rng, (uint32_t)v->type->rank), axis, NULL);
        if (atomic && lv.dim[axis] != IR_AX_NONE)
            ck_assert_msg(rc < 0, "atomic along an axis that tiles the value, or sums it, was accepted");
        if (rc < 0) {
            snapshot(p, vals, n_vals, after);
            for (uint32_t i = 0; i < n_vals; i++)
                ck_assert_msg(ir_layout_equal(&before[i], &after[i]), "a refused action changed the state");
            continue;
        }
        assert_monotone(p, vals, n_vals, before, atomic ? "atomic" : "tile");
        done++;
        if (below(rng, 2) == 0) {
            snapshot(p, vals, n_vals, before);
            ck_assert_msg(ir_propagate(p, &err) == 0, "%s", err.msg);
            assert_monotone(p, vals, n_vals, before, "propagate");
        }
    }
    snapshot(p, vals, n_vals, before);
    ck_assert_msg(ir_propagate(p, &err) == 0, "%s", err.msg);
    assert_monotone(p, vals, n_vals, before, "propagate");
    free(before);
    free(after);
    free(busy);
    return done;
}

#endif
