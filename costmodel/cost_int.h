/*
 * cost_int.h - private to the cost model: the layout of a prepared program,
 * shared by prepare.c (which fills it) and evaluate.c (which loops over it).
 */
#ifndef COST_INT_H
#define COST_INT_H

#include "cost.h"

/* One collective as the evaluation needs it.  Everything device-dependent
 * (bandwidth, latency, which tier) is resolved at evaluation time. */
typedef struct cost_coll_item {
    const ir_op *op;
    uint8_t kind;  /* cost_coll_kind */
    bool flat;     /* no usable mesh: the tier follows from `group` */
    uint16_t axes; /* mesh axes the group spans (bit i = axis i) */
    int64_t group; /* devices in one group (n of the ring formulas) */
    double payload; /* ring factor * bytes * executions: bytes one device
                       sends over the whole program */
    double steps;   /* latency steps * executions */
    double bytes;   /* bytes * executions, for the report */
    double count;   /* executions */
} cost_coll_item;

/* Structure of arrays over the compute ops, in program order, each already
 * multiplied by the executions of its op (loop trips), so the evaluation is
 * one max() per op. */
struct cost_program {
    cost_mesh mesh;
    int64_t num_partitions; /* 0 when the module does not say */

    size_t n_items, cap_items;
    double *flops;
    double *bytes;
    uint8_t *prec;        /* cost_prec */
    const ir_op **ops;    /* for naming the slowest ops */

    size_t n_colls, cap_colls;
    cost_coll_item *colls;

    double flops_total, matmul_flops, bytes_total;
    int64_t peak_memory, argument_bytes;
    uint32_t while_loops, while_once;
    unsigned notes;
    size_t n_ops_walked;
};

#endif /* COST_INT_H */
