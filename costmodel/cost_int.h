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

/* What is live at a block's peak, as graph.c finds it: ops by pointer
 * (names are resolved when a report is made). */
typedef struct cost_peak_info {
    int64_t kinds[COST_MEM_COUNT];
    int order;
    int64_t program_order_peak;
    const ir_op *at, *in; /* the op at the peak; the op inside its region at the region's peak */
    int n_values;
    struct {
        int64_t bytes;
        uint8_t kind;
        const ir_op *op;  /* the writer, NULL for an argument */
        const char *name; /* an argument's name (NULL: none) */
        uint32_t what;    /* the graph's name for it (cost_graph.v_what) */
    } values[COST_MEM_TOP];
} cost_peak_info;

/* Structure of arrays over the compute ops, in program order, each already
 * multiplied by the executions of its op (loop trips), so the evaluation is
 * one max() per op. */
struct cost_program {
    cost_mesh mesh;
    cost_framework framework; /* what the peak memory was counted for */
    int64_t num_partitions; /* 0 when the module does not say */

    size_t n_items, cap_items;
    double *flops;
    double *mm;           /* the matmul part of flops */
    double *bytes;
    double *mdim, *ndim;  /* a matmul's M and N (the tiles it fills), 0 for others */
    double *runs;         /* executions (loop trips): overheads are paid per run */
    uint8_t *prec;        /* cost_prec */
    const ir_op **ops;    /* for naming the slowest ops */

    size_t n_colls, cap_colls;
    cost_coll_item *colls;

    size_t n_loops, cap_loops;
    cost_loop_item *loops;

    /* The events of each block in program order, for the overlap of
     * collectives with compute (evaluate.c): a kernel (an item), a
     * collective, a nested block, or nothing (an op that only orders
     * others), each with the events of its block it waits for.  A block's
     * events are contiguous; blocks are listed inner first, the entry
     * function's last. */
    size_t n_ev, cap_ev;
    uint8_t *ev_kind;  /* CE_* */
    uint32_t *ev_ref;  /* item, collective or block index */
    uint32_t *ev_dep0; /* its waits: ev_dep[ev_dep0[e] .. ev_dep0[e + 1]) (n_ev + 1 entries) */
    size_t n_dep, cap_dep;
    uint32_t *ev_dep;
    size_t n_blk, cap_blk;
    uint32_t *blk_ev0, *blk_nev;

    double flops_total, matmul_flops, bytes_total;
    int64_t peak_memory, argument_bytes;
    cost_peak_info peak;
    uint32_t while_loops, while_once;
    unsigned notes;
    size_t n_ops_walked;
};

enum { CE_KERNEL, CE_COLL, CE_BLOCK, CE_NONE };

/* One kernel as the evaluation costs it. */
typedef struct cost_item {
    const ir_op *op;
    double flops, matmul, bytes; /* executions included */
    double m, n;                 /* its matmul's M and N, 0 when none */
    double runs;                 /* executions */
    uint8_t prec;
} cost_item;

/* Room for one more item, one more event (and its end in ev_dep0), one
 * more wait (program.c); false when out of memory.  The pushes below are
 * inline: graph.c pushes ~12,000 of them per run of the scorer's graph,
 * and the calls cost as much as the stores. */
bool cost__grow_items(cost_program *p);
bool cost__grow_events(cost_program *p);
bool cost__grow_deps(cost_program *p);

/* Append one item or one collective to p, growing its arrays (an item
 * with neither flops nor bytes is not kept: *index gets SIZE_MAX); false
 * when out of memory.  graph.c appends through these. */
static inline bool cost__push_item(cost_program *p, const cost_item *it, size_t *index)
{
    if (index)
        *index = SIZE_MAX;
    if (it->flops <= 0 && it->bytes <= 0)
        return true;
    if (p->n_items == p->cap_items && !cost__grow_items(p))
        return false;
    size_t i = p->n_items++;
    p->flops[i] = it->flops;
    p->mm[i] = it->matmul;
    p->bytes[i] = it->bytes;
    p->mdim[i] = it->m;
    p->ndim[i] = it->n;
    p->runs[i] = it->runs;
    p->prec[i] = it->prec;
    p->ops[i] = it->op;
    p->flops_total += it->flops;
    p->bytes_total += it->bytes;
    if (index)
        *index = i;
    return true;
}
bool cost__push_coll(cost_program *p, const cost_coll_item *it);
/* An event of the block being registered (kind CE_*), and one event of
 * that block it waits for (after the event: its waits follow it); a
 * block of the events ev0 .. ev0 + nev - 1, its index in *id.  False when
 * out of memory. */
static inline bool cost__push_event(cost_program *p, uint8_t kind, uint32_t ref)
{
    if (p->n_ev + 2 > p->cap_ev && !cost__grow_events(p))
        return false;
    if (p->n_ev == 0)
        p->ev_dep0[0] = (uint32_t)p->n_dep;
    p->ev_kind[p->n_ev] = kind;
    p->ev_ref[p->n_ev] = ref;
    p->n_ev++;
    p->ev_dep0[p->n_ev] = (uint32_t)p->n_dep;
    return true;
}
static inline bool cost__push_dep(cost_program *p, uint32_t ev)
{
    if (p->n_dep + 1 > p->cap_dep && !cost__grow_deps(p))
        return false;
    p->ev_dep[p->n_dep++] = ev;
    p->ev_dep0[p->n_ev] = (uint32_t)p->n_dep;
    return true;
}
bool cost__push_block(cost_program *p, uint32_t ev0, uint32_t nev, uint32_t *id);
/* Empties p's items, collectives, events and sums (the scorer reuses one). */
void cost__program_clear(cost_program *p);
/* Whether p holds no item, collective, event or block and its sums are 0. */
bool cost__program_empty(const cost_program *p);
/* Makes dst's items, collectives, events, blocks and their sums (flops,
 * bytes, matmul flops) those of src, in dst's own arrays; the rest of dst
 * is left as it is.  False when out of memory (dst then holds part). */
bool cost__program_copy(cost_program *dst, const cost_program *src);
/* Frees p's arrays (not p). */
void cost__program_free_arrays(cost_program *p);

/* ============================================================ graph.c
 *
 * The block of a device-local program as fusion, time and buffer
 * assignment see it: nodes in program order, each reading values (edges)
 * and writing values.  cost_prepare builds one per block of the module;
 * the scorer builds the one ir_lower's output would give, from the state.
 * cost__graph_run then decides what XLA fuses, costs each fused kernel,
 * and counts the peak of live buffers in the better of two orders, so the
 * two paths share every rule.
 */

#define CG_NONE UINT32_MAX

enum {
    CG_PRODUCER = 1 << 0,   /* loop-fusible as a producer: computed inside its users' kernels */
    CG_CONSUMER = 1 << 1,   /* loop- or input-fusible as a consumer: takes fusible producers */
    CG_EXPENSIVE = 1 << 2,  /* a producer not duplicated into several users (transcendentals) */
    CG_FOLD = 1 << 3,       /* a transpose: folded into a dot's operand layout */
    CG_DOT = 1 << 4,        /* dot or convolution: takes folded transposes */
    CG_ALIAS = 1 << 5,      /* no kernel: its results are its operands' buffers */
    CG_SHARE_EW = 1 << 6,   /* elementwise: a result may take a same-size operand buffer that dies here */
    CG_SHARE_IDX = 1 << 7,  /* in place: result i may take operand i's buffer when it dies here */
    CG_COLL = 1 << 8,       /* a collective: node->coll is its item */
    CG_REGION = 1 << 9,     /* holds regions: node->nested bytes of their temporaries */
    CG_RETURN = 1 << 10,    /* the terminator: its operands are the block's outputs */
    CG_NOCOST = 1 << 11,    /* no kernel time (constants, ids, tokens) */
    CG_OPAQUE = 1 << 12,    /* custom calls and ops of other dialects */
    CG_BARRIER = 1 << 13,   /* with CG_ALIAS: an optimization barrier, whose operands must exist as buffers;
                               ordered: its readers wait for it (its first result, a 0-byte gate) */
    CG_VIEW = 1 << 14,      /* a broadcast, iota or constant: an eager framework reads it as a view
                               (stride 0) or a scalar, never a tensor of its own */
};

typedef struct cost_gnode {
    const ir_op *op;        /* names it in reports */
    uint32_t opd0, nopd;    /* edges opd0 .. opd0 + nopd - 1 */
    uint32_t res0, nres;    /* values res0 .. res0 + nres - 1 */
    uint32_t kid0, nkid;    /* the blocks of its regions (program block indices): g->kids[kid0 ..) */
    double flops, matmul;   /* one execution */
    double mm_m, mm_n;      /* a matmul's M and N */
    double write;           /* HBM bytes its results take to write when it is a kernel */
    int64_t nested;         /* its regions' temporaries at their peak */
    int32_t coll;           /* index into the graph's collectives, -1 */
    int32_t peak;           /* index into the graph's nested peaks, -1 */
    uint16_t flags;         /* CG_* */
    uint8_t prec;           /* cost_prec of its flops */
} cost_gnode;

typedef struct cost_graph {
    uint32_t n_nodes, cap_nodes;
    cost_gnode *nodes;
    uint32_t n_edges, cap_edges;
    uint32_t *e_val;  /* value read */
    double *e_read;   /* HBM bytes read of it when it is a buffer (not computed in the kernel) */
    uint8_t *e_feeds; /* an op holding regions reads it with a matmul inside (for the breakdown) */
    uint32_t n_vals, cap_vals;
    double *v_bytes;
    uint32_t *v_def;  /* node, CG_NONE for an input of the block */
    uint32_t *v_root; /* the value whose buffer it is (itself unless an alias) */
    uint32_t *v_what; /* the caller's name for it (scorer: kind << 28 | value id) */
    uint64_t *v_dims; /* a hash of its dims (no element type): gradients have their parameter's */
    uint8_t *v_in;    /* inputs: CG_IN_* */
    const char **v_name; /* inputs: a name for reports, or NULL */
    uint32_t *v_gate;    /* read through an optimization barrier: the barrier's gate value (its
                            first result, 0 bytes), which its readers wait for; else CG_NONE */
    uint32_t n_colls, cap_colls;
    cost_coll_item *colls;
    uint32_t n_peaks, cap_peaks;
    cost_peak_info *peaks; /* regions' peaks, for the breakdown */
    uint32_t n_kids, cap_kids;
    uint32_t *kids;        /* regions' blocks */
    uint8_t *v_feeds;      /* after a run with a peak: inputs read by a matmul, a collective or a custom call */
    uint32_t cap_feeds;
    uint32_t *out_alias;   /* per output (return operand): the input whose buffer it takes, CG_NONE */
    uint32_t cap_out;
    bool oom;
    bool eager;            /* memory as an eager framework holds it (cost_framework): set by the caller */
    bool every_order;      /* count every order's peak to its end, assign without step bitmaps
                              (cost_options.every_order) */
    int64_t peak_enough;   /* a peak the program's order keeps at or below this needs no other order
                              (cost_options.peak_enough; 0: always the lowest) */
    bool outs_held;        /* the entry's block under XLA: what it returns (not donated) is held in
                              allocations of its own all along (graph.c, assign): set by the caller */
    void *scratch;         /* graph.c's working arrays, kept between runs */
    uint8_t memo;          /* runs to remember (set by the caller; 0: none): a run of a graph equal to one
                              of them, into an empty program, gives what that run gave without running
                              (graph.c, the memo).  cost__graph_run reads no field of the graph but those
                              above: a field added that it reads goes into the memo's key (memo_same) */
    size_t memo_bytes;     /* with memo: remember only as many runs as their graphs' arrays fit in this
                              many bytes, at least 4 (0: memo of them, whatever their size) */
    void *memos;           /* graph.c's memo, kept between runs (cost__graph_reset leaves it); it may be
                              shared with other graphs (cost__graph_share_memo) */
    int64_t memo_hits;     /* runs of this graph the memo answered */
} cost_graph;

/* Inputs of a block. */
enum {
    CG_IN_COUNTED = 1 << 0, /* an entry argument: live all along (the caller's buffer) */
    CG_IN_PARAMS = 1 << 1,  /* its name says parameters */
    CG_IN_OPT = 1 << 2,     /* its name says optimizer state */
    CG_IN_BATCH = 1 << 3,   /* its name says batch */
    CG_IN_CARRIED = 1 << 4, /* a loop body's carried value: the body may update it in place */
};

void cost__graph_reset(cost_graph *g);
void cost__graph_free(cost_graph *g);

/* Room for one more node, `more` more edges, `more` more values (graph.c):
 * false, with g->oom set, when out of memory.  Each doubles the capacity
 * until the room is there, so that asking for room for several at once
 * leaves the capacities that asking for one at a time would (the memo's
 * byte limit reads them).  The builder below is inline: the scorer builds
 * a graph of ~12,000 nodes for every state it scores, and the calls cost
 * as much as the stores. */
bool cost__graph_grow_nodes(cost_graph *g);
bool cost__graph_grow_edges(cost_graph *g, uint32_t more);
bool cost__graph_grow_vals(cost_graph *g, uint32_t more);

static inline uint32_t cost__graph_value(cost_graph *g, double bytes, uint32_t def, uint8_t in, uint64_t dims,
                                         uint32_t what, const char *name)
{
    if (g->n_vals == g->cap_vals && !cost__graph_grow_vals(g, 1))
        return CG_NONE;
    uint32_t v = g->n_vals++;
    g->v_bytes[v] = bytes > 0 ? bytes : 0;
    g->v_def[v] = def;
    g->v_root[v] = v;
    g->v_what[v] = what;
    g->v_dims[v] = dims;
    g->v_in[v] = in;
    g->v_name[v] = name;
    g->v_gate[v] = CG_NONE;
    return v;
}

/* An input of the block (an argument, a loop's carried value, a value
 * captured from outside); returns its value id. */
static inline uint32_t cost__graph_input(cost_graph *g, double bytes, uint8_t in, uint64_t dims, uint32_t what,
                                         const char *name)
{
    return cost__graph_value(g, bytes, CG_NONE, in, dims, what, name);
}

/* Starts a node; its edges and results follow.  NULL when out of memory. */
static inline cost_gnode *cost__graph_node(cost_graph *g, const ir_op *op, uint16_t flags, uint8_t prec)
{
    if (g->n_nodes == g->cap_nodes && !cost__graph_grow_nodes(g))
        return NULL;
    cost_gnode *n = &g->nodes[g->n_nodes++];
    *n = (cost_gnode){.op = op, .opd0 = g->n_edges, .res0 = g->n_vals, .coll = -1, .peak = -1, .flags = flags,
                      .prec = prec};
    if (flags & CG_BARRIER) {
        /* its gate: what every reader of its results waits for */
        if (cost__graph_value(g, 0, g->n_nodes - 1, 0, 0, 0, NULL) == CG_NONE)
            return NULL;
        n->nres = 1;
    }
    return n;
}

static inline void cost__graph_edge(cost_graph *g, uint32_t value, double read)
{
    if (value == CG_NONE || value >= g->n_vals || !g->n_nodes)
        return;
    if (g->n_edges == g->cap_edges && !cost__graph_grow_edges(g, 1))
        return;
    g->e_val[g->n_edges] = value;
    g->e_read[g->n_edges] = read > 0 ? read : 0;
    g->e_feeds[g->n_edges] = 0;
    g->n_edges++;
    g->nodes[g->n_nodes - 1].nopd++;
}

/* cost__graph_edge for values[0 .. n) in turn, reading read[i] of each
 * (one check for room, one count). */
static inline void cost__graph_edges(cost_graph *g, const uint32_t *values, const double *read, uint32_t n)
{
    if (!g->n_nodes || (g->cap_edges - g->n_edges < n && !cost__graph_grow_edges(g, n)))
        return;
    uint32_t e = g->n_edges, nv = g->n_vals; /* CG_NONE is never below nv */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = values[i];
        if (v >= nv)
            continue;
        g->e_val[e] = v;
        g->e_read[e] = read[i] > 0 ? read[i] : 0;
        g->e_feeds[e] = 0;
        e++;
    }
    g->nodes[g->n_nodes - 1].nopd += e - g->n_edges;
    g->n_edges = e;
}

/* A result of the node being built: its own buffer, or (alias_of a value)
 * that value's buffer. */
static inline uint32_t cost__graph_result(cost_graph *g, double bytes, uint32_t alias_of, uint64_t dims, uint32_t what)
{
    if (!g->n_nodes)
        return CG_NONE;
    uint32_t v = cost__graph_value(g, bytes, g->n_nodes - 1, 0, dims, what, NULL);
    if (v == CG_NONE)
        return v;
    cost_gnode *nd = &g->nodes[g->n_nodes - 1];
    if (!nd->nres++) /* an input captured while its edges were added came after cost__graph_node */
        nd->res0 = v;
    if (alias_of != CG_NONE && alias_of < v) {
        g->v_root[v] = g->v_root[alias_of];
        g->v_gate[v] = nd->flags & CG_BARRIER ? nd->res0 : g->v_gate[alias_of];
    }
    return v;
}
/* The collective of the node being built. */
void cost__graph_coll(cost_graph *g, const cost_coll_item *it);
/* The peak of the regions of the node being built. */
void cost__graph_nested(cost_graph *g, const cost_peak_info *pk, int64_t bytes);
/* The blocks of the regions of the node being built, in the order they run
 * (program block indices: cost__graph_run registers each block it runs). */
void cost__graph_kids(cost_graph *g, const uint32_t *blocks, uint32_t n);
/* Output j (operand j of the return node) lives in input `in`'s buffer
 * (donation, input_output_alias). */
void cost__graph_out_alias(cost_graph *g, uint32_t j, uint32_t in);

/* Runs the model over g, executed `mult` times: pushes its kernels' items
 * and its collectives onto p (scaled by mult), registers its events as the
 * next block of p, and gives the peak of its buffers (counted inputs
 * included) with what is live there in *peak (may be NULL: time only).
 * With g->memo and p empty, g is left reset (its graph goes into the memo,
 * or was there already): build the next graph from empty.  AP_ENOMEM. */
int cost__graph_run(cost_graph *g, cost_program *p, double mult, cost_peak_info *peak, int64_t *peak_bytes,
                    ap_error *err);
/* Runs of g that its memo answered, since it was made. */
int64_t cost__graph_memo_hits(const cost_graph *g);
/* Makes g remember its runs in with's memo (and find with's there), g's
 * own memo let go; g and with may then run in different threads at once.
 * Both must have memo set (else nothing is shared); the memo keeps with's
 * size.  False when out of memory (g unchanged). */
bool cost__graph_share_memo(cost_graph *g, cost_graph *with);

/* The flags of op with first operand type a and first result type b. */
uint16_t cost__node_flags(const ir_op *op, const ir_type *a, const ir_type *b);
/* The flags of an op of this opcode that is no alias (ops the lowering
 * inserts: collectives, slices, converts). */
uint16_t cost__node_flags_of(ir_opcode opc);
/* A hash of the dims of t (0 for anything not a ranked tensor of rank > 0). */
uint64_t cost__dims_hash(const ir_type *t);
uint64_t cost__dims_hash_of(int rank, const int64_t *dims);
/* CG_IN_PARAMS, _OPT or _BATCH from an argument's name (a JAX parameter
 * path: params[...], opt_state..., batch[...]), else 0. */
uint8_t cost__name_hint(const char *name);

/* ------------------------------------------------- one op's cost (prepare.c)
 * Shared by the walk over an SPMD module and the fast scorer of partition
 * states (score.c), which gives an op the local types a state implies. */

typedef struct cost_opview {
    const ir_op *op;            /* opcode, attributes, name */
    const ir_type *const *opd;  /* its operand types (op->n_operands) */
    const ir_type *const *res;  /* its result types (op->n_results) */
    bool carried;               /* a dynamic (update) slice of a loop-carried stack: an
                                   address computation, free (prepare.c's carried_slot_op) */
} cost_opview;

/* One op's flops, precision, and HBM bytes as a kernel of its own: read[i]
 * of operand i (the caller's array of op->n_operands), `write` of its
 * results.  Fusion (graph.c) drops the reads and writes that stay on
 * chip.  False when it costs nothing. */
typedef struct cost_opcost {
    double flops, matmul, write;
    cost_prec prec;
    double *read;
    double mm_m, mm_n; /* a matmul's M and N (rows of the left, columns of the right), else 0 */
} cost_opcost;
bool cost__op_cost(const cost_opview *v, unsigned *notes, cost_opcost *c);
/* Ops that cost nothing: structure, ids, aliases (constants included). */
bool cost__free_op(ir_opcode opc);
double cost__elem_bytes(const ir_type *t);
double cost__numel(const ir_type *t, unsigned *notes);
double cost__type_bytes(const ir_type *t, unsigned *notes);
cost_prec cost__prec_of(const ir_type *t);
/* fmha.c: the flops (and of them the matmul flops) of a cuDNN fused
 * attention custom call from its operand types; false when op is not one
 * or they are unreadable. */
bool cost__fmha_flops(const ir_op *op, const ir_type *const *ot, double *flops, double *matmul);
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
