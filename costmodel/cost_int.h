/*
 * cost_int.h - private to the cost model: the layout of a prepared program,
 * shared by prepare.c (which fills it) and evaluate.c (which loops over it).
 */
#ifndef COST_INT_H
#define COST_INT_H

#ifndef AP_COSTMODEL
#error "cost_int.h is private to the cost model (costmodel/*.c): use cost.h"
#endif

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
    double once;    /* bytes of one execution (the op as written) */
} cost_coll_item;

/* One while loop as walked: what the report lists. */
typedef struct cost_loop_item {
    const ir_op *op;
    int64_t trips;  /* -1: not readable, the body counted once */
    double runs;    /* body executions per step (enclosing loops' trips included) */
    uint32_t depth; /* loops around it */
    uint32_t colls; /* collectives written in it, nested loops' included */
} cost_loop_item;

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

    size_t n_loops, cap_loops;
    cost_loop_item *loops;

    double flops_total, matmul_flops, bytes_total;
    int64_t peak_memory, argument_bytes;
    uint32_t while_loops, while_once;
    unsigned notes;
    size_t n_ops_walked;
};

/* Append one item (skipped when it has neither flops nor bytes) or one
 * collective to p, growing its arrays; false when out of memory.  The
 * preparation of a module and the scorer of states both build programs
 * through these. */
bool cost__push_item(cost_program *p, const ir_op *op, double flops, double bytes, uint8_t prec);
bool cost__push_coll(cost_program *p, const cost_coll_item *it);

/* ------------------------------------------------- one op's cost (prepare.c)
 * Shared by the walk over an SPMD module and the fast scorer of partition
 * states (score.c), which gives an op the local types a state implies. */

typedef struct cost_opview {
    const ir_op *op;            /* opcode, attributes, name */
    const ir_type *const *opd;  /* its operand types (op->n_operands) */
    const ir_type *const *res;  /* its result types (op->n_results) */
    const bool *opd_fused;      /* operand i is computed on chip by its producer (fusion); may be NULL */
    bool res_fused;             /* its result stays on chip */
    bool carried;               /* a dynamic (update) slice of a loop-carried stack: an
                                   address computation, free (prepare.c's carried_slot_op) */
} cost_opview;

/* Flops, HBM bytes, precision and the matmul part of one compute op; false
 * when it costs nothing.  Sets note bits in *notes. */
bool cost__op_cost(const cost_opview *v, unsigned *notes, double *flops, double *bytes, cost_prec *prec,
                   double *matmul);
/* Ops that cost nothing: structure, ids, aliases (constants included). */
bool cost__free_op(ir_opcode opc);
double cost__elem_bytes(const ir_type *t);
double cost__numel(const ir_type *t, unsigned *notes);
double cost__type_bytes(const ir_type *t, unsigned *notes);
cost_prec cost__prec_of(const ir_type *t);
bool cost__is_elementwise(ir_opcode opc);
/* op can be fused into its user: one result, elementwise or a broadcast */
bool cost__fusable(const ir_op *op);
/* A reshape from type a to b that is a bitcast (free, an alias). */
bool cost__is_bitcast_reshape(const ir_op *op, const ir_type *a, const ir_type *b);
/* A broadcast_in_dim from a to b that only inserts unit dims (a bitcast). */
bool cost__is_bitcast_broadcast(const ir_op *op, const ir_type *a, const ir_type *b);
/* op's results live in its operands' buffers (a, b: its first operand and
 * result types, for reshapes). */
bool cost__is_alias_op(const ir_op *op, const ir_type *a, const ir_type *b);

/* Kind, report bytes, ring payload and latency steps of a collective over
 * it->group devices (prepare.c). */
void cost__coll_formula(cost_coll_item *it, ir_opcode opc, double in_bytes, double out_bytes);
unsigned cost__axes_between(const cost_mesh *m, int64_t a, int64_t b);
int64_t cost__clamp_bytes(double b);

#endif /* COST_INT_H */
