/*
 * graph.c - one block of a device-local program as XLA compiles it: which
 * ops it fuses into which kernels, what each kernel costs, and the peak of
 * the buffers its buffer assignment keeps live.  cost_prepare feeds it the
 * blocks of a module, the scorer the block ir_lower would emit for a
 * partition state; both then share every rule below.
 *
 * FUSION follows XLA's GPU rules (xla/service/gpu/gpu_fusible.cc:
 * IsLoopFusibleAsProducer / IsLoopFusibleAsConsumer; instruction_fusion.cc
 * does not duplicate expensive producers): a producer (elementwise ops,
 * converts, broadcasts, iotas, constants, slices, pads, concatenates,
 * gathers, transposes, reshapes that move data) is computed inside the
 * kernel of each of its users when every user is a fusible consumer (the
 * same ops, reduces, scatters, dynamic_update_slice) and, for an expensive
 * producer (transcendentals, gathers; not divide, sqrt, rsqrt or exp of f32
 * or f16, which XLA's GPU fusion takes for cheap), it ends up in one kernel
 * (one user, not itself duplicated into several).  A transpose read only by
 * dots is folded into their operand layout (TransposeFolding).  Dead
 * producers are removed (DCE).  Dots, convolutions, custom calls,
 * collectives, sorts and control flow are kernels of their own and read
 * their operands from memory.  A fused producer writes nothing to HBM; its
 * inputs are read by the kernels it is fused into, and live until the last
 * of them runs.
 *
 * TIME per kernel: its members' flops, and the bytes it reads of the
 * buffers outside it (each buffer once, the largest read) plus what its
 * root writes.
 *
 * MEMORY as buffer assignment counts it (xla/service/buffer_assignment.cc,
 * heap_simulator.cc): entry arguments are the caller's buffers, live all
 * along; an output aliased to an argument (donation, input_output_alias)
 * is written into that argument's buffer once nothing reads the argument
 * any more (before that, it takes a buffer of its own until then: copy
 * insertion's copy); every other buffer lives from the kernel writing it
 * to the last kernel reading it.  A kernel's result takes over an operand
 * buffer that dies there when XLA lets them share
 * (HloDataflowAnalysis::CanShareOperandBufferWithUser): in place for
 * dynamic_update_slice, scatter, all_reduce and a while's carried values,
 * any same-size operand for elementwise kernels.  An optimization barrier
 * is no kernel, but it is scheduled like one: its results are its
 * operands' buffers (HloDataflowAnalysis::UpdateOptimizationBarrierValueSet
 * forwards them) and what reads them runs after it; JAX's remat holds a
 * layer's residuals behind one together with the cotangent from above, so
 * that the recomputation waits for the backward.  Regions' temporaries
 * count at the op holding them.  Live bytes are summed (a heap that never
 * fragments).  The entry's results not aliased to an argument are held
 * from the start, in allocations of their own, and temporaries that fit in
 * one before it is written live there (assign: BufferAssigner's live-out
 * allocations), so the entry's figure is those allocations plus the peak
 * of the rest; a region's is the peak of what must coexist.
 *
 * EAGER (cost_graph.eager, COST_FW_EAGER): the memory of PyTorch without
 * compilation.  The kernels' time is the fused program's; but every op's
 * result is a tensor of its own from the op to its last reader (only dead
 * ops, broadcasts, iotas, constants and transposes read by matmuls are
 * views, eager_fuses), no result takes an operand's buffer but in place
 * (dynamic_update_slice, scatter, all_reduce: x + y is a new tensor), and
 * the ops run as written (the autograd engine runs the backward in the
 * order the program writes it; nothing reorders).
 *
 * ORDER: the peak is counted in the program's order and in the order of
 * XLA's list scheduler (hlo_memory_scheduler.cc, ListScheduler: among the
 * ops whose inputs are ready, the one freeing the most bytes net of what
 * it allocates first, scalars first, then more users, then program
 * order), and the lower is kept: the order never raises a peak.  An
 * order is counted as it is made and stops once its peak reaches the
 * lowest of the orders before it (simrun), and its buffer assignment once
 * its figure is sure to reach it (assign_recorded): the lowest is the same; while
 * it follows the program's order it is not counted, and one that never
 * leaves it not at all (order_begin): its figure is the program's.
 */
#include "cost_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================== builder */

/* Makes room for `need` elements of `elem` bytes at *p (capacity *cap,
 * starting at `first`); false when out of memory, *p unchanged. */
static bool grow_mem(void *pp, uint32_t *cap, uint32_t need, size_t elem, uint32_t first)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void **p = pp, *q = ap_realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* Resizes *pp to n elements of `elem` bytes; false (and *pp unchanged)
 * when out of memory.  Arrays that grow together may be left some grown,
 * some not: harmless, their capacity stays the old one. */
static bool resize(void *pp, size_t n, size_t elem)
{
    void **p = pp, *q = ap_realloc(*p, n * elem + 1);
    if (!q)
        return false;
    *p = q;
    return true;
}
#define REALLOC(ptr, n) resize(&(ptr), (size_t)(n), sizeof *(ptr))

bool cost__graph_grow_vals(cost_graph *g, uint32_t more)
{
    if (g->cap_vals - g->n_vals >= more)
        return true;
    uint32_t c = g->cap_vals ? 2 * g->cap_vals : 1024;
    while (c - g->n_vals < more)
        c *= 2;
    if (!REALLOC(g->v_bytes, c) || !REALLOC(g->v_def, c) ||
        !REALLOC(g->v_root, c) || !REALLOC(g->v_what, c) ||
        !REALLOC(g->v_dims, c) || !REALLOC(g->v_in, c) ||
        !REALLOC(g->v_name, c) || !REALLOC(g->v_gate, c)) {
        g->oom = true;
        return false;
    }
    g->cap_vals = c;
    return true;
}

bool cost__graph_grow_nodes(cost_graph *g)
{
    if (!grow_mem(&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes, 256)) {
        g->oom = true;
        return false;
    }
    return true;
}

bool cost__graph_grow_edges(cost_graph *g, uint32_t more)
{
    if (g->cap_edges - g->n_edges >= more)
        return true;
    uint32_t c = g->cap_edges ? 2 * g->cap_edges : 1024;
    while (c - g->n_edges < more)
        c *= 2;
    if (!REALLOC(g->e_val, c) || !REALLOC(g->e_read, c) ||
        !REALLOC(g->e_feeds, c)) {
        g->oom = true;
        return false;
    }
    g->cap_edges = c;
    return true;
}

void cost__graph_reset(cost_graph *g)
{
    g->n_nodes = g->n_edges = g->n_vals = g->n_colls = g->n_peaks = g->n_kids = 0;
    for (uint32_t i = 0; i < g->cap_out; i++)
        g->out_alias[i] = CG_NONE;
    g->oom = false;
}

static void scratch_free(void *scratch);
static void memo_free(void *memos);

/* Frees g's arrays (what a memo entry's key copies of a graph), not its
 * scratch or memos. */
static void graph_arrays_free(cost_graph *g)
{
    ap_free(g->nodes);
    ap_free(g->e_val);
    ap_free(g->e_read);
    ap_free(g->e_feeds);
    ap_free(g->v_feeds);
    ap_free(g->v_bytes);
    ap_free(g->v_def);
    ap_free(g->v_root);
    ap_free(g->v_what);
    ap_free(g->v_dims);
    ap_free(g->v_in);
    ap_free(g->v_name);
    ap_free(g->v_gate);
    ap_free(g->colls);
    ap_free(g->peaks);
    ap_free(g->kids);
    ap_free(g->out_alias);
}

void cost__graph_free(cost_graph *g)
{
    if (!g)
        return;
    graph_arrays_free(g);
    scratch_free(g->scratch);
    memo_free(g->memos);
    memset(g, 0, sizeof *g);
}

void cost__graph_coll(cost_graph *g, const cost_coll_item *it)
{
    if (!g->n_nodes)
        return;
    if (!grow_mem(&g->colls, &g->cap_colls, g->n_colls + 1, sizeof *g->colls, 64)) {
        g->oom = true;
        return;
    }
    g->colls[g->n_colls] = *it;
    g->nodes[g->n_nodes - 1].coll = (int32_t)g->n_colls++;
}

void cost__graph_nested(cost_graph *g, const cost_peak_info *pk, int64_t bytes)
{
    if (!g->n_nodes)
        return;
    cost_gnode *n = &g->nodes[g->n_nodes - 1];
    n->nested = bytes > 0 ? bytes : 0;
    if (!pk)
        return;
    if (n->peak < 0) {
        if (!grow_mem(&g->peaks, &g->cap_peaks, g->n_peaks + 1, sizeof *g->peaks, 16)) {
            g->oom = true;
            return;
        }
        n->peak = (int32_t)g->n_peaks++;
    }
    g->peaks[n->peak] = *pk;
}

void cost__graph_kids(cost_graph *g, const uint32_t *blocks, uint32_t n)
{
    if (!g->n_nodes || !n)
        return;
    if (!grow_mem(&g->kids, &g->cap_kids, g->n_kids + n, sizeof *g->kids, 64)) {
        g->oom = true;
        return;
    }
    cost_gnode *nd = &g->nodes[g->n_nodes - 1];
    nd->kid0 = g->n_kids;
    nd->nkid = n;
    memcpy(g->kids + g->n_kids, blocks, sizeof *blocks * n);
    g->n_kids += n;
}

void cost__graph_out_alias(cost_graph *g, uint32_t j, uint32_t in)
{
    uint32_t old = g->cap_out;
    if (!grow_mem(&g->out_alias, &g->cap_out, j + 1, sizeof *g->out_alias, 64)) {
        g->oom = true;
        return;
    }
    for (uint32_t i = old; i < g->cap_out; i++)
        g->out_alias[i] = CG_NONE;
    g->out_alias[j] = in;
}

uint64_t cost__dims_hash_of(int rank, const int64_t *dims)
{
    if (rank <= 0)
        return 0;
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)rank;
    for (int i = 0; i < rank; i++) {
        h ^= (uint64_t)dims[i] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h *= 0x100000001b3ULL;
    }
    return h ? h : 1;
}

uint64_t cost__dims_hash(const ir_type *t)
{
    if (!t || t->kind != IR_T_TENSOR || t->rank <= 0)
        return 0;
    return cost__dims_hash_of(t->rank, t->dims);
}

uint8_t cost__name_hint(const char *n)
{
    if (!n)
        return 0;
    if (strstr(n, "opt_state"))
        return CG_IN_OPT;
    if (!strncmp(n, "params", 6) || strstr(n, ".params") || strstr(n, "['params']"))
        return CG_IN_PARAMS;
    if (!strncmp(n, "batch", 5) || strstr(n, "inputs") || strstr(n, "targets"))
        return CG_IN_BATCH;
    return 0;
}

/* ============================================================ the rules */

static bool expensive(ir_opcode opc)
{
    switch (opc) {
    case IR_OP_EXP:
    case IR_OP_EXPM1:
    case IR_OP_LOG:
    case IR_OP_LOG1P:
    case IR_OP_LOGISTIC:
    case IR_OP_TANH:
    case IR_OP_SINE:
    case IR_OP_COSINE:
    case IR_OP_TAN:
    case IR_OP_ATAN2:
    case IR_OP_POWER:
    case IR_OP_CBRT:
    case IR_OP_RSQRT:
    case IR_OP_SQRT:
    case IR_OP_DIVIDE:
    case IR_OP_REMAINDER:
        return true;
    default:
        return false;
    }
}

/* XLA's GPU fusion takes divide, sqrt, rsqrt and exp of f32 or f16 for
 * cheap (one hardware instruction): it duplicates them into every
 * consumer like any elementwise op (GpuInstructionFusion::IsExpensive and
 * GpuPriorityFusion::IsExpensive, xla/service/gpu: "Some floating-point
 * math ops are cheap on the GPU"); of other types they stay expensive.
 * A logistic is one of them: the GPU compiler expands it before fusion
 * into 1 / (1 + exp(-x)) (LogisticExpander, gpu_compiler.cc), so a
 * SiLU's sigmoid is recomputed in each of its consumers, not saved (XLA's
 * optimized HLO of the zoo's U-Net on an H200 has no logistic left, and
 * saves two buffers per SiLU, the convolution's and the product). */
static bool cheap_on_gpu(ir_opcode opc, const ir_type *res)
{
    if (opc != IR_OP_DIVIDE && opc != IR_OP_SQRT && opc != IR_OP_RSQRT && opc != IR_OP_EXP && opc != IR_OP_LOGISTIC)
        return false;
    return res && (res->kind == IR_T_TENSOR || res->kind == IR_T_SCALAR) &&
           (res->elem == IR_E_F32 || res->elem == IR_E_F16);
}

uint16_t cost__node_flags(const ir_op *op, const ir_type *a, const ir_type *b)
{
    ir_opcode opc = (ir_opcode)op->opcode;
    if (opc == IR_OP_OPTIMIZATION_BARRIER)
        return CG_ALIAS | CG_BARRIER;
    if (cost__is_alias_op(op, a, b) || opc == IR_OP_COPY)
        return CG_ALIAS;
    if (opc == IR_OP_UNKNOWN)
        return op->n_regions ? CG_REGION : CG_OPAQUE;
    uint16_t f = cost__node_flags_of(opc);
    if ((f & CG_EXPENSIVE) && cheap_on_gpu(opc, b))
        f &= (uint16_t)~CG_EXPENSIVE;
    return f;
}

uint16_t cost__node_flags_of(ir_opcode opc)
{
    if (opc == IR_OP_COPY)
        return CG_ALIAS;
    if (ir_op_info_get(opc)->elementwise || opc == IR_OP_BITCAST_CONVERT)
        return CG_PRODUCER | CG_CONSUMER | CG_SHARE_EW | (expensive(opc) ? CG_EXPENSIVE : 0);
    switch (opc) {
    case IR_OP_BROADCAST_IN_DIM:
    case IR_OP_BROADCAST:
        return CG_PRODUCER | CG_CONSUMER | CG_VIEW;
    case IR_OP_RESHAPE:
    case IR_OP_SLICE:
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_REAL_DYNAMIC_SLICE:
    case IR_OP_PAD:
    case IR_OP_CONCATENATE:
    case IR_OP_REVERSE:
        return CG_PRODUCER | CG_CONSUMER;
    case IR_OP_GATHER: /* InstructionFusion::IsExpensive: kGather */
    case IR_OP_TORCH_INDEX_SELECT:
        return CG_PRODUCER | CG_CONSUMER | CG_EXPENSIVE;
    case IR_OP_TRANSPOSE:
        return CG_PRODUCER | CG_CONSUMER | CG_FOLD;
    case IR_OP_IOTA:
        return CG_PRODUCER | CG_VIEW;
    case IR_OP_CONSTANT:
        return CG_PRODUCER | CG_NOCOST | CG_VIEW;
    case IR_OP_REDUCE:
    case IR_OP_REDUCE_WINDOW:
        return CG_CONSUMER;
    case IR_OP_DYNAMIC_UPDATE_SLICE:
    case IR_OP_SCATTER:
        return CG_CONSUMER | CG_SHARE_IDX;
    case IR_OP_DOT:
    case IR_OP_DOT_GENERAL:
    case IR_OP_CONVOLUTION:
        return CG_DOT;
    case IR_OP_CUSTOM_CALL:
        return CG_OPAQUE;
    case IR_OP_ALL_REDUCE:
        return CG_COLL | CG_SHARE_IDX;
    case IR_OP_ALL_GATHER:
    case IR_OP_REDUCE_SCATTER:
    case IR_OP_ALL_TO_ALL:
    case IR_OP_COLLECTIVE_PERMUTE:
    case IR_OP_COLLECTIVE_BROADCAST:
        return CG_COLL;
    case IR_OP_WHILE:
        return CG_REGION | CG_SHARE_IDX;
    case IR_OP_IF:
    case IR_OP_CASE:
    case IR_OP_FUNC_CALL:
    case IR_OP_COMPOSITE:
        return CG_REGION;
    case IR_OP_FUNC_RETURN:
    case IR_OP_RETURN:
        return CG_RETURN | CG_NOCOST;
    case IR_OP_TUPLE:
    case IR_OP_PARTITION_ID:
    case IR_OP_REPLICA_ID:
    case IR_OP_AFTER_ALL:
    case IR_OP_CREATE_TOKEN:
    case IR_OP_GET_DIMENSION_SIZE:
        return CG_NOCOST;
    case IR_OP_UNKNOWN:
        return CG_OPAQUE;
    default:
        return 0;
    }
}

/* ============================================================= scratch */

typedef struct hentry {
    int64_t p1;   /* bytes freed - bytes defined */
    uint32_t p2;  /* users */
    uint32_t node;
    uint32_t ver;
} hentry;

/* A buffer as assign sorts and places it: the sort compares these flat
 * records (not through the graph: bytes are doubles, clamped per look). */
typedef struct abuf {
    int64_t bytes;
    uint32_t start, end; /* end CG_NONE: live-out */
    uint32_t id;         /* the value */
    uint32_t next;       /* the next record placed in the same allocation (latest first) */
} abuf;

/* A live-out allocation: its buffer's record, its first step, the first
 * record placed in it (the others follow latest first, or with step
 * bitmaps in any order: they do not overlap each other) and the span of
 * those placed (lo..hi: a buffer outside the span overlaps none); the
 * last allocation made before it that starts later (up: those between
 * start no later, so a buffer ending too late for this one is too late
 * for them; 0: none, assign_recorded's guard), and steps that buffers
 * placed in it hold, which last turned a buffer away (hs..he, hs
 * UINT32_MAX: none; the steps of that record, or with bitmaps a run of
 * held steps; buffers come in the order of their first steps within a
 * size, so the next often overlaps them too: kept here, not as the
 * record's index, to spare a load per look). */
typedef struct aout {
    uint32_t rec, start, head, lo, hi, up, hs, he;
    uint32_t bit0; /* its step bitmap at s->abits + bit0 (assign_recorded, where it keeps them) */
} aout;

/* A size assign sorts by (bytes, and whether live-out): how many records
 * have it, then where the first of them goes. */
typedef struct asize {
    int64_t bytes;
    uint32_t out; /* 1: live-out */
    uint32_t n;   /* records of this size */
    uint32_t num; /* its number, in the order first met */
} asize;

/* A node's fields that the run's passes read, packed: cost_gnode is 96
 * bytes (its kernel's figures, names, regions), and the passes that walk
 * the nodes or look them up by edge read only where its edges and results
 * are and its flags, so on T32 each such look was a cache line of its own
 * (~12,700 nodes, 1.2 MB: more than L2).  build_users fills one per node,
 * reading each cost_gnode once; the rest read this (20 bytes). */
typedef struct gnh {
    uint32_t opd0, nopd, res0, nres;
    uint32_t flags; /* CG_*, and GH_NESTED */
} gnh;

/* A node's flops and matmul flops, which form_kernel adds up for each
 * fused member of a kernel (copied by build_users with s->nh: a fused
 * member's cost_gnode is read for nothing else). */
typedef struct gfl {
    double flops, matmul;
} gfl;

/* GH_NESTED: its regions have temporaries (cost_gnode.nested > 0) */
enum { GH_NESTED = 1 << 16 };

/* s->skind: a collective; a node holding blocks (cost_gnode.nkid > 0) */
enum { SK_COLL = 1, SK_KIDS = 2 };

/* A step of a recorded simulation whose node's regions hold temporaries
 * (few: loops, calls), and their bytes. */
typedef struct nstep {
    uint32_t step;
    int64_t bytes;
} nstep;

/* A node's keys in the DFS order, side by side: dfs_cmp reads both. */
typedef struct dkey {
    uint64_t extra; /* fan-out behind it */
    double tsize;   /* bytes written behind it */
} dkey;

typedef struct gs {
    uint32_t cap_v, cap_n, cap_e, cap_k, cap_h, cap_ku;
    gnh *nh;  /* per node (build_users) */
    gfl *nfl; /* per node (build_users) */
    /* per scheduled node, set by the kernel loop: SK_COLL, SK_KIDS, for the
     * walks over the scheduled nodes (issue_order, register_block,
     * placed_order), a byte of an array that stays in L1 where s->nh's
     * entries of the scheduled nodes (one node in ~4) are a line each */
    uint8_t *skind;
    uint8_t *dread; /* dfs_order: a kernel reads a result of the node */
    /* per value */
    uint32_t *vstamp, *nusers, *u0, *ulist, *ku0, *kulist, *rem, *pending, *kfill;
    uint32_t *uses; /* kernel readers (rem counts them down for the list order, left for a simulation) */
    uint32_t *left;
    uint32_t *wait; /* per input: the output waiting to move into it (a simulation's) */
    uint32_t *dirty, n_dirty; /* the values a simulation changed (sim_begin puts them back) */
    double *vread, *alloc;
    uint8_t *vflag;
    /* per node */
    uint8_t *fused, *sched, *nstate;
    uint32_t *nkern; /* per node: how many kernels a fused node is computed in */
    uint32_t *kern;  /* per node: the kernel computing it (a node), KERN_MANY when several, CG_NONE when dead */
    uint32_t *nstamp, *k0, *lorder, *npred, *ver, *stack;
    uint32_t *order; /* the issue order (register_block), then the scheduled nodes in program order (the memory orders') */
    uint32_t *ready; /* list_covers' stack */
    bool topo;       /* kernel_users: the list order is sure to cover every node */
    uint32_t *npred0; /* inputs some node writes (npred counts them down) */
    uint32_t *ev, *evlast; /* per node: its event (kind << 28 | item or collective), its last event */
    uint64_t *key;         /* per node: its place in the issue order */
    uint32_t *kcount;      /* per node: issue_order's room to sort the feeders in */
    /* kernel inputs (klist), and the node writing each (kdef: g->v_def of
     * it, which the passes over the kernels' inputs look for; read from
     * here in input order, not looked up by value) */
    uint32_t *klist, *kdef;
    hentry *heap;
    uint32_t n_heap;
    /* the DFS order */
    dkey *dk;
    uint32_t *dorder, *dstack, *dkids;
    /* the placed order */
    uint32_t *porder;
    uint8_t *move;
    uint32_t cap_dfs, cap_dkids;
    /* parameters' dims hashes, sorted */
    uint64_t *pdims;
    uint32_t n_pdims, cap_pdims;
    /* buffer assignment (assign): per value, the buffer its bytes are in
     * (the first value of a chain of shared results), and per buffer its
     * first and last step; the buffers as assign sorts them, and its
     * live-out allocations */
    uint32_t *bown, *bstart, *bend;
    uint32_t *blist, nblist; /* the buffers the simulation made, in the order it made them */
    abuf *arec, *atmp;
    aout *aouts;
    /* assign_recorded: per live-out allocation, a bit per step before its
     * first (its buffer's start), set where a buffer placed in it is live */
    uint64_t *abits;
    size_t cap_abits;
    asize *asizes;   /* the sizes asg_sort met */
    uint32_t *aslot;  /* their hash table (index + 1 into asizes, 0: empty): 2 slots per value */
    uint32_t *acount; /* per step: asg_sort's counts */
    int64_t *hdiff; /* per step: heap bytes starting minus ending there */
    nstep *nest;    /* the steps sim_step recorded whose node has nested temporaries, in order */
    uint32_t n_nest;
    bool rec;       /* sim_step records the buffers' steps */
    bool fed;       /* the run wrote g->v_feeds */
} gs;

/* VF_SELF: a donated output whose own kernel reads the argument it goes
 * into (one read fewer before the argument's buffer is free).  VF_ROOT:
 * its own buffer (g->v_root[v] == v); VF_PLACE: a root of more than 0
 * bytes, which a simulation places.  Both set once per run with the
 * others, so that the simulations and the orders test a byte of a
 * 1-byte array (~14 KB on T32) and not g->v_root and g->v_bytes (8 and 12
 * bytes a value, spread: a cache line a look). */
enum { VF_PINNED = 1, VF_INPUT = 2, VF_GIVEN = 4, VF_OUT = 8, VF_SELF = 16, VF_ROOT = 32, VF_PLACE = 64 };

static void scratch_free(void *scratch)
{
    gs *s = scratch;
    if (!s)
        return;
    ap_free(s->vstamp);
    ap_free(s->nusers);
    ap_free(s->u0);
    ap_free(s->ulist);
    ap_free(s->ku0);
    ap_free(s->kulist);
    ap_free(s->rem);
    ap_free(s->left);
    ap_free(s->wait);
    ap_free(s->dirty);
    ap_free(s->uses);
    ap_free(s->npred0);
    ap_free(s->pending);
    ap_free(s->kfill);
    ap_free(s->vread);
    ap_free(s->alloc);
    ap_free(s->vflag);
    ap_free(s->nh);
    ap_free(s->nfl);
    ap_free(s->skind);
    ap_free(s->dread);
    ap_free(s->fused);
    ap_free(s->nkern);
    ap_free(s->kern);
    ap_free(s->sched);
    ap_free(s->nstate);
    ap_free(s->nstamp);
    ap_free(s->k0);
    ap_free(s->order);
    ap_free(s->lorder);
    ap_free(s->ready);
    ap_free(s->npred);
    ap_free(s->ver);
    ap_free(s->ev);
    ap_free(s->evlast);
    ap_free(s->key);
    ap_free(s->kcount);
    ap_free(s->stack);
    ap_free(s->klist);
    ap_free(s->kdef);
    ap_free(s->heap);
    ap_free(s->pdims);
    ap_free(s->dk);
    ap_free(s->dorder);
    ap_free(s->porder);
    ap_free(s->move);
    ap_free(s->dstack);
    ap_free(s->dkids);
    ap_free(s->bown);
    ap_free(s->bstart);
    ap_free(s->bend);
    ap_free(s->blist);
    ap_free(s->arec);
    ap_free(s->atmp);
    ap_free(s->aouts);
    ap_free(s->abits);
    ap_free(s->asizes);
    ap_free(s->aslot);
    ap_free(s->acount);
    ap_free(s->hdiff);
    ap_free(s->nest);
    ap_free(s);
}

static bool scratch_fit(cost_graph *g, gs **out)
{
    gs *s = g->scratch;
    if (!s) {
        if (!(s = ap_calloc(1, sizeof *s)))
            return false;
        g->scratch = s;
    }
    *out = s;
    uint32_t nv = g->n_vals + 1, nn = g->n_nodes + 1, ne = g->n_edges + 1;
    if (nv > s->cap_v) {
        uint32_t c = nv + nv / 2;
        if (!REALLOC(s->vstamp, c) || !REALLOC(s->nusers, c) || !REALLOC(s->u0, c + 1) || !REALLOC(s->ku0, c + 1) ||
            !REALLOC(s->rem, c) || !REALLOC(s->left, c) || !REALLOC(s->wait, c) ||
            !REALLOC(s->dirty, 2 * (size_t)c) || !REALLOC(s->uses, c) || !REALLOC(s->pending, c) || !REALLOC(s->kfill, c) || !REALLOC(s->vread, c) ||
            !REALLOC(s->alloc, c) || !REALLOC(s->vflag, c) || !REALLOC(s->bown, c) || !REALLOC(s->bstart, c) ||
            !REALLOC(s->bend, c) || !REALLOC(s->blist, c) || !REALLOC(s->arec, c) || !REALLOC(s->atmp, c) || !REALLOC(s->aouts, c) ||
            !REALLOC(s->asizes, c))
            return false;
        uint32_t h = 64;
        while (h < 2 * c)
            h *= 2;
        if (!REALLOC(s->aslot, h))
            return false;
        s->cap_v = c;
    }
    if (nn > s->cap_n) {
        uint32_t c = nn + nn / 2;
        if (!REALLOC(s->nh, c) || !REALLOC(s->nfl, c) || !REALLOC(s->skind, c) || !REALLOC(s->dread, c) || !REALLOC(s->fused, c) || !REALLOC(s->nkern, c) || !REALLOC(s->kern, c) || !REALLOC(s->sched, c) ||
            !REALLOC(s->nstate, c) || !REALLOC(s->nstamp, c) || !REALLOC(s->k0, c + 1) || !REALLOC(s->order, c) ||
            !REALLOC(s->lorder, c) || !REALLOC(s->ready, c) || !REALLOC(s->npred, c) || !REALLOC(s->npred0, c) || !REALLOC(s->ver, c) || !REALLOC(s->ev, c) ||
            !REALLOC(s->evlast, c) || !REALLOC(s->key, c) || !REALLOC(s->porder, c) || !REALLOC(s->move, c) ||
            !REALLOC(s->kcount, c) || !REALLOC(s->hdiff, c + 1) || !REALLOC(s->nest, c) || !REALLOC(s->acount, c + 1))
            return false;
        s->cap_n = c;
    }
    if (ne > s->cap_e) {
        uint32_t c = ne + ne / 2;
        if (!REALLOC(s->ulist, c) || !REALLOC(s->stack, c))
            return false;
        s->cap_e = c;
    }
    return true;
}

/* klist holds every kernel's inputs: grows while kernels are formed (the
 * growth out of line: form_kernel pushes ~9,000 inputs a run on T32) */
static bool klist_grow(gs *s, uint32_t n_k)
{
    uint32_t c = s->cap_k ? 2 * s->cap_k : 4096;
    while (c <= n_k)
        c *= 2;
    if (!REALLOC(s->klist, c) || !REALLOC(s->kdef, c))
        return false;
    s->cap_k = c;
    return true;
}

/* Input v of a kernel, written by node d (g->v_def[v]). */
static inline bool klist_push(gs *s, uint32_t n_k, uint32_t v, uint32_t d)
{
    if (n_k >= s->cap_k && !klist_grow(s, n_k))
        return false;
    s->klist[n_k] = v;
    s->kdef[n_k] = d;
    return true;
}

/* ============================================================== fusion */

/* Users of each root value: the non-alias nodes reading it (an alias's
 * readers read its root), each once.  An optimization barrier is a user
 * too: what it holds must be a buffer (JAX's remat keeps its residuals
 * behind one, so that XLA neither fuses nor recomputes them). */
static void build_users(const cost_graph *g, gs *s)
{
    /* one pass over the edges: each node's roots, each once, into s->stack
     * (from s->k0[n]: both free until the kernels are formed), counted */
    uint32_t nv = g->n_vals, nn = g->n_nodes, np = 0;
    memset(s->nusers, 0, sizeof *s->nusers * nv);
    memset(s->vstamp, 0, sizeof *s->vstamp * nv);
    for (uint32_t n = 0; n < nn; n++) {
        const cost_gnode *nd = &g->nodes[n];
        s->nh[n] = (gnh){nd->opd0, nd->nopd, nd->res0, nd->nres,
                         nd->flags | (nd->nested > 0 ? GH_NESTED : 0)};
        s->nfl[n] = (gfl){nd->flops, nd->matmul};
        s->k0[n] = np;
        if ((nd->flags & (CG_ALIAS | CG_BARRIER)) == CG_ALIAS)
            continue;
        for (uint32_t e = nd->opd0; e < nd->opd0 + nd->nopd; e++) {
            uint32_t r = g->v_root[g->e_val[e]];
            if (s->vstamp[r] != n + 1) {
                s->vstamp[r] = n + 1;
                s->nusers[r]++;
                s->stack[np++] = r;
            }
        }
    }
    s->k0[nn] = np;
    /* u0[v] first at the end of v's users, filled from the last node back
     * (so each list is in node order and u0[v] ends at its start) */
    uint32_t end = 0;
    for (uint32_t v = 0; v < nv; v++)
        s->u0[v] = end += s->nusers[v];
    s->u0[nv] = end;
    for (uint32_t n = nn; n-- > 0;)
        for (uint32_t i = s->k0[n + 1]; i-- > s->k0[n];)
            s->ulist[--s->u0[s->stack[i]]] = n;
}

/* The HBM bytes node n's kernel would read: the buffers it and its fused
 * producers read, each once (at the most any edge reads of it), as
 * form_kernel counts them.  Uses s->stack, s->nstamp, s->vstamp and
 * s->vread with `mark` (one per node, above every mark in them before). */
static double kernel_reads(const cost_graph *g, gs *s, uint32_t n, uint32_t mark)
{
    const gnh *nd = &s->nh[n];
    uint32_t top = 0;
    double rd = 0;
    for (uint32_t e = nd->opd0; e < nd->opd0 + nd->nopd; e++)
        s->stack[top++] = e;
    s->nstamp[n] = mark;
    while (top) {
        uint32_t e = s->stack[--top];
        uint32_t r = g->v_root[g->e_val[e]], d = g->v_def[r];
        if (d != CG_NONE && s->fused[d]) {
            const gnh *m = &s->nh[d];
            if (s->nstamp[d] == mark || top + m->nopd > s->cap_e) /* each node once: its edges fit */
                continue;
            s->nstamp[d] = mark;
            for (uint32_t k = m->opd0; k < m->opd0 + m->nopd; k++)
                s->stack[top++] = k;
        } else if (s->vstamp[r] != mark) {
            s->vstamp[r] = mark;
            s->vread[r] = g->e_read[e];
            rd += g->e_read[e];
        } else if (g->e_read[e] > s->vread[r]) {
            rd += g->e_read[e] - s->vread[r];
            s->vread[r] = g->e_read[e];
        }
    }
    return rd;
}

#define KERN_MANY (UINT32_MAX - 1)

/* Whether node n's single result is computed inside its users' kernels
 * (or n is dead and removed), its users decided (s->fused, and
 * s->nkern: the kernels each fused node is computed in).  An expensive
 * producer is computed in one kernel only: not fused into a user that is
 * itself duplicated into several (XLA fuses consumers first, and
 * InstructionFusion::ShouldFuse refuses an expensive producer whose
 * fusion would duplicate it: a gather read by a widening convert that
 * every consumer takes stays a buffer of its own).
 *
 * And the kernels it is computed in, in the same walk over its users:
 * s->kern[n] (n itself when not fused, the one, KERN_MANY, or CG_NONE
 * when dead) and s->nkern[n] how many (0 when not fused), a kernel reached
 * through several users counted once (s->nstamp with mark n + 1, zeroed
 * before the pass).
 *
 * Only for a node that can fuse at all (fusable), with s->kern[n] n and
 * s->nkern[n] 0 already: the caller tests and sets those in its loop over
 * every node, so that the others (most of them) cost no call. */
static inline bool fusable(const cost_graph *g, const gs *s, uint32_t n)
{
    const gnh *nd = &s->nh[n];
    return (nd->flags & CG_PRODUCER) && nd->nres == 1 && g->v_root[nd->res0] == nd->res0;
}

static bool fuses(const cost_graph *g, gs *s, uint32_t n)
{
    const gnh *nd = &s->nh[n];
    uint32_t v = nd->res0, nu = s->nusers[v];
    if (nu == 0) {
        s->kern[n] = CG_NONE;
        return true; /* dead: DCE */
    }
    if ((nd->flags & CG_EXPENSIVE) && nu > 1)
        return false;
    if ((nd->flags & CG_EXPENSIVE) && s->fused[s->ulist[s->u0[v]]] && s->nkern[s->ulist[s->u0[v]]] > 1)
        return false;
    bool fold = nd->flags & CG_FOLD;
    uint32_t first = CG_NONE, k = 0, mark = n + 1;
    for (uint32_t i = s->u0[v]; i < s->u0[v] + nu; i++) {
        uint32_t u = s->ulist[i], ku = s->kern[u];
        uint32_t uf = s->nh[u].flags;
        if (!(uf & CG_CONSUMER) && !((uf & CG_DOT) && fold))
            return false; /* its kernel is n, 0 counted */
        if (ku == CG_NONE)
            continue;
        if (ku == KERN_MANY) {
            k += s->nkern[u];
        } else if (s->nstamp[ku] != mark) {
            s->nstamp[ku] = mark;
            k++;
        }
        if (first == CG_NONE)
            first = ku;
    }
    s->kern[n] = k > 1 ? KERN_MANY : first;
    s->nkern[n] = k;
    return true;
}

/* A fused producer that ends up in several kernels is computed again in
 * each; XLA's GPU priority fusion does that only where it saves time
 * (GpuPerformanceModel: the fused consumers' run time against the
 * producer's kernel plus the unfused consumers'), which for kernels bound
 * by memory is: each of the k kernels reads the producer's inputs R
 * instead of its result W, so fusing costs k R against R + W + k W.  The
 * producers that lose are written out instead, weighed from the first to
 * the last, so that R counts what their own producers, once decided, leave
 * them to read (k, s->nkern, from the pass over the users before).
 * Without this a chain of residual adds (x + attn + mlp, layer after
 * layer) was fused into every reader, each layer's kernels reading every
 * earlier layer's outputs again (MPT-7B on 8 H100s: 1.86 TiB of HBM
 * traffic per device and step, 0.55 TiB with it). */
static void unfuse_costly(const cost_graph *g, gs *s, const uint32_t *multi, uint32_t n_multi)
{
    /* marks above build_users' (vstamp, up to nn) and fuses'
     * (nstamp, up to nn): no clearing */
    uint32_t nn = g->n_nodes;
    /* multi: the fused nodes in several kernels (s->nkern > 1: only fused
     * ones have kernels counted), last node first; a node's own fused flag
     * changes only at its turn, so each is still fused there */
    for (uint32_t i = n_multi; i-- > 0;) {
        uint32_t n = multi[i];
        double k = s->nkern[n], r = kernel_reads(g, s, n, 2 * nn + n + 1);
        if (r > 0 && k * r >= r + (k + 1) * g->nodes[n].write) {
            s->fused[n] = 0;
            s->sched[n] = 1;
        }
    }
}

/* Whether node n holds no tensor of its own in an eager framework
 * (PyTorch without compilation): only a dead op, a view (broadcast,
 * iota, constant: expand() and scalars) or a transpose read only by
 * matmuls (a transposed view the matmul takes as it is); every other op's
 * result is a tensor, from the op to its last reader. */
static bool eager_fuses(const cost_graph *g, const gs *s, uint32_t n)
{
    if (!fusable(g, s, n))
        return false;
    const gnh *nd = &s->nh[n];
    uint32_t v = nd->res0, nu = s->nusers[v];
    if (nu == 0 || (nd->flags & CG_VIEW))
        return true;
    if (!(nd->flags & CG_FOLD))
        return false;
    for (uint32_t i = s->u0[v]; i < s->u0[v] + nu; i++)
        if (!(s->nh[s->ulist[i]].flags & CG_DOT))
            return false;
    return true;
}

/* ============================================================ kernels */

/* Forms the kernel of scheduled node n: its fused members' flops, the
 * buffers it reads (into klist from *nk) and their bytes.  Uses s->stack,
 * s->nstamp, s->vstamp and s->vread with `mark` (one per node, above
 * every mark in them before). */
static bool form_kernel(const cost_graph *g, gs *s, uint32_t n, uint32_t mark, uint32_t *nk, double *flops,
                        double *matmul, double *bytes)
{
    const cost_gnode *nd = &g->nodes[n];
    const gnh *nh = &s->nh[n];
    uint32_t top = 0;
    double f = nd->flops, mm = nd->matmul, rd = 0;
    uint32_t first = *nk;
    for (uint32_t e = nh->opd0 + nh->nopd; e-- > nh->opd0;)
        s->stack[top++] = e;
    s->nstamp[n] = mark;
    while (top) {
        uint32_t e = s->stack[--top];
        uint32_t r = g->v_root[g->e_val[e]], d = g->v_def[r], gate = g->v_gate[g->e_val[e]];
        if (gate != CG_NONE && s->vstamp[gate] != mark) {
            /* read through an optimization barrier: after the barrier */
            s->vstamp[gate] = mark;
            s->vread[gate] = 0;
            if (!klist_push(s, (*nk)++, gate, g->v_def[gate]))
                return false;
        }
        if (d != CG_NONE && s->fused[d]) {
            if (s->nstamp[d] == mark)
                continue;
            s->nstamp[d] = mark;
            const gnh *mh = &s->nh[d];
            f += s->nfl[d].flops;
            mm += s->nfl[d].matmul;
            if (top + mh->nopd > s->cap_e) {
                uint32_t c = s->cap_e * 2 + mh->nopd;
                if (!REALLOC(s->stack, c))
                    return false;
                s->cap_e = c;
            }
            for (uint32_t k = mh->opd0 + mh->nopd; k-- > mh->opd0;)
                s->stack[top++] = k;
            continue;
        }
        if (s->vstamp[r] != mark) {
            s->vstamp[r] = mark;
            s->vread[r] = g->e_read[e];
            if (!klist_push(s, (*nk)++, r, d))
                return false;
        } else if (g->e_read[e] > s->vread[r]) {
            s->vread[r] = g->e_read[e];
        }
    }
    for (uint32_t i = first; i < *nk; i++)
        rd += s->vread[s->klist[i]];
    *flops = f;
    *matmul = mm;
    *bytes = rd + nd->write;
    return true;
}

/* ============================================================ events */

/* Nodes a[0 .. n) sorted by s->key, equal keys in the order they came (a
 * merge sort, t: room for n).  Returns a or t, whichever holds them. */
static const uint32_t *sort_by_key(const gs *s, uint32_t *a, uint32_t *t, uint32_t n)
{
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = n - lo > w ? lo + w : n, hi = n - mid > w ? mid + w : n, i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                t[o++] = s->key[a[j]] < s->key[a[i]] ? a[j++] : a[i++];
            while (i < mid)
                t[o++] = a[i++];
            while (j < hi)
                t[o++] = a[j++];
        }
        uint32_t *x = a;
        a = t;
        t = x;
    }
    return a;
}

/* The order events are issued in: the program's, except that a kernel
 * whose results only collectives read (the convert of a weight that an
 * all_gather then gathers) is issued as soon as what it reads is written,
 * so that the collective can start early: what XLA's latency-hiding
 * scheduler does when it moves a collective's start up, its operand with
 * it.  From the n_sched scheduled nodes in program order in s->order, into
 * s->order. */
static uint32_t issue_order(const cost_graph *g, gs *s, uint32_t n_sched)
{
    /* a feeder: a kernel whose every reader is a collective */
    memset(s->nstate, 0, g->n_nodes); /* bit 0: read by a collective, bit 1: read by something else */
    for (uint32_t q = 0; q < n_sched; q++) {
        uint32_t u = s->order[q];
        uint8_t bit = (s->skind[u] & SK_COLL) ? 1 : 2;
        for (uint32_t i = s->k0[u]; i < s->k0[u + 1]; i++) {
            uint32_t d = s->kdef[i];
            if (d != CG_NONE)
                s->nstate[d] |= bit;
        }
    }
    /* keys: a node at its program position; a feeder just after the last
     * writer of what it reads (a feeder's writer's key when that is one) */
    uint32_t k = 0, nf = 0; /* the others into s->order (k <= q), in order of their keys; feeders into s->lorder */
    for (uint32_t q = 0; q < n_sched; q++) {
        uint32_t n = s->order[q];
        const gnh *nd = &s->nh[n];
        bool feeder = s->nstate[n] == 1 && (s->ev[n] >> 28) == CE_KERNEL && !(nd->flags & (CG_COLL | CG_REGION));
        uint64_t key = (uint64_t)(n + 1) << 1; /* 0: before every node (a feeder of inputs only) */
        if (feeder) {
            key = 0;
            for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
                uint32_t d = s->kdef[i];
                if (d != CG_NONE && s->sched[d] && (s->key[d] | 1) > key)
                    key = s->key[d] | 1;
            }
        }
        s->key[n] = key;
        if (feeder)
            s->lorder[nf++] = n;
        else
            s->order[k++] = n;
    }
    /* by key, equal keys in program order: the others' keys are their own
     * (even, 2 and up, one each); a feeder's is 0 or odd: the feeders
     * sorted (stable), then merged in from the back */
    const uint32_t *f = sort_by_key(s, s->lorder, s->kcount, nf);
    for (uint32_t i = k, j = nf, o = k + nf; j > 0;)
        s->order[--o] = i > 0 && s->key[s->order[i - 1]] > s->key[f[j - 1]] ? s->order[--i] : f[--j];
    return k + nf;
}

/* The block's events for the overlap of collectives with compute, in the
 * issue order: each scheduled node an event (its kernel, collective, the
 * blocks of its regions one after another, or nothing), waiting for the
 * events of the nodes that wrote what it reads.  Registered as the next
 * block of p.  s->order: the n_sched scheduled nodes, in program order. */
static bool register_block(const cost_graph *g, gs *s, cost_program *p, uint32_t n_sched)
{
    uint32_t n_order = issue_order(g, s, n_sched);
    uint32_t ev0 = (uint32_t)p->n_ev;
    for (uint32_t q = 0; q < n_order; q++) {
        uint32_t n = s->order[q];
        const cost_gnode *nd = (s->skind[n] & SK_KIDS) ? &g->nodes[n] : NULL; /* nkid: 0 without */
        bool ok = nd ? cost__push_event(p, CE_BLOCK, g->kids[nd->kid0])
                     : cost__push_event(p, (uint8_t)(s->ev[n] >> 28), s->ev[n] & 0x0fffffffu);
        /* it waits for the writers of what the node reads (each once) */
        for (uint32_t i = s->k0[n]; ok && i < s->k0[n + 1]; i++) {
            uint32_t d = s->kdef[i];
            if (d == CG_NONE || !s->sched[d] || s->nstamp[d] == UINT32_MAX - n)
                continue;
            s->nstamp[d] = UINT32_MAX - n;
            ok = cost__push_dep(p, s->evlast[d]);
        }
        /* a loop's condition and body, or branches, one after another */
        for (uint32_t k = 1; ok && nd && k < nd->nkid; k++)
            ok = cost__push_event(p, CE_BLOCK, g->kids[nd->kid0 + k]) && cost__push_dep(p, (uint32_t)p->n_ev - 2);
        if (!ok)
            return false;
        s->evlast[n] = (uint32_t)p->n_ev - 1;
    }
    uint32_t id;
    return cost__push_block(p, ev0, (uint32_t)p->n_ev - ev0, &id);
}

/* ============================================================ memory */

typedef struct sim {
    int64_t peak;
    uint32_t step; /* index into the order of the node at the peak */
    int64_t idle;  /* held (assign): the live-out allocations not yet written at the peak */
} sim;

static bool in_klist(const gs *s, uint32_t n, uint32_t v)
{
    for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++)
        if (s->klist[i] == v)
            return true;
    return false;
}

static inline int64_t b64(double b) { return cost__clamp_bytes(b); }

/* Whether buffer b can be handed to a result of the kernel reading it
 * last: a temporary not yet given away, or a loop body's carried value. */
static bool can_give(const cost_graph *g, const gs *s, uint32_t b)
{
    if (s->vflag[b] & (VF_PINNED | VF_GIVEN) || s->left[b] != 1)
        return false;
    if (s->vflag[b] & VF_INPUT)
        return (g->v_in[b] & CG_IN_CARRIED) != 0;
    return s->alloc[b] > 0;
}

/* The buffer result r of node n (its j-th) takes over: an operand buffer
 * that dies at n and XLA lets it share, else CG_NONE. */
static uint32_t share_source(const cost_graph *g, const gs *s, uint32_t n, uint32_t j, uint32_t r)
{
    const gnh *nd = &s->nh[n];
    double need = g->v_bytes[r];
    if ((nd->flags & CG_SHARE_IDX) && j < nd->nopd) {
        uint32_t b = g->v_root[g->e_val[nd->opd0 + j]];
        if (can_give(g, s, b) && g->v_bytes[b] >= need && in_klist(s, n, b))
            return b;
        return CG_NONE;
    }
    if ((nd->flags & CG_SHARE_EW) && !g->eager) /* eager: x + y is a new tensor */
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
            uint32_t b = s->klist[i];
            if (can_give(g, s, b) && g->v_bytes[b] == need)
                return b;
        }
    return CG_NONE;
}

/* The input an output result r lives in (donation), CG_NONE. */
static uint32_t out_target(const cost_graph *g, const gs *s, uint32_t r)
{
    return (s->vflag[r] & VF_OUT) ? s->pending[r] : CG_NONE;
}

/* Number of kernel users of each buffer, from the kernels' inputs, into
 * s->uses (once the kernels are formed: it does not change after); s->order
 * holds the n_sched scheduled nodes. */
static void count_uses(const cost_graph *g, gs *s, uint32_t n_sched)
{
    memset(s->uses, 0, sizeof *s->uses * g->n_vals);
    for (uint32_t j = 0; j < n_sched; j++) {
        uint32_t n = s->order[j];
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++)
            s->uses[s->klist[i]]++;
    }
}

/* s->rem: every buffer's kernel readers still to run, none run yet. */
static void reset_uses(const cost_graph *g, gs *s) { memcpy(s->rem, s->uses, sizeof *s->rem * g->n_vals); }

/*
 * A simulation runs the nodes of an order one at a time, counting live
 * bytes (uncounted inputs and counted ones excluded: the caller adds
 * those), with s->left for the readers still to run of each buffer (not
 * s->rem, which the list order counts down as it is made: the two run side
 * by side).  Given a bound (the lowest peak of the orders counted before,
 * which an order must beat to be kept), it stops as soon as its peak
 * reaches the bound: the peak only grows, so such an order cannot be the
 * lowest, and the rest of it, and of making it, is work for nothing.  On the search's
 * T32 every order's peak is a quarter of the way in, so an order that
 * loses stops there; but held (assign), the bound is the lowest figure,
 * the live-out allocations and the heap's peak, which is above the live
 * peak: there (200 episodes, 408 runs) the list and DFS orders stopped in
 * about a fifth of the runs, the placed order never.
 */
typedef struct simrun {
    sim out;
    int64_t live;
    int64_t bound; /* INT64_MAX: none */
    bool lost;     /* the peak reached the bound: stopped */
    uint32_t i;    /* steps run */
    /* order_step: the program's order while the order made has followed
     * it (NULL once it left it, and the simulation began); how many steps
     * it has followed; after how many the program's own simulation had
     * reached the bound (UINT32_MAX: not known to) */
    const uint32_t *ref;
    uint32_t same, stop;
} simrun;

/* A simulation begins with every buffer's readers to run, nothing
 * allocated or given away, no output waiting (s->alloc 0, no VF_GIVEN,
 * s->wait CG_NONE): graph_run sets those for every value, and each
 * simulation lists the values it changes (s->dirty: each result it
 * places, with the buffer that result takes over or the input it waits
 * for; a node runs once, so at most 2 per value), which the next one puts
 * back.  Resetting all ~14,000 values of T32's graph for each of its 3-4
 * simulations cost more than the simulations' own changes. */
static void sim_begin(const cost_graph *g, gs *s, simrun *r, int64_t bound)
{
    memcpy(s->left, s->uses, sizeof *s->left * g->n_vals);
    for (uint32_t i = 0; i < s->n_dirty; i++) {
        uint32_t v = s->dirty[i];
        s->alloc[v] = 0;
        s->vflag[v] &= (uint8_t) ~VF_GIVEN;
        s->wait[v] = CG_NONE;
    }
    s->n_dirty = 0;
    *r = (simrun){.out = {-1, 0, 0}, .bound = bound};
}

/* Runs node k, the next of the order: places its results (and with
 * `last`, stops there, leaving s->alloc as it is at the node), then frees
 * what dies there.  False once the order cannot beat the bound. */
static bool sim_step(const cost_graph *g, gs *s, simrun *r, uint32_t k, bool last)
{
    const gnh *nd = &s->nh[k];
    for (uint32_t j = 0; j < nd->nres; j++) {
        uint32_t v = nd->res0 + j;
        if (!(s->vflag[v] & VF_PLACE))
            continue;
        uint32_t b = share_source(g, s, k, j, v);
        if (b != CG_NONE) {
            s->alloc[v] = s->alloc[b];
            s->alloc[b] = 0;
            s->vflag[b] |= VF_GIVEN;
            s->dirty[s->n_dirty++] = v;
            s->dirty[s->n_dirty++] = b;
            if (s->rec)
                s->bown[v] = s->bown[b];
            continue;
        }
        uint32_t a = out_target(g, s, v);
        if (a != CG_NONE) {
            uint32_t left = s->left[a] - ((s->vflag[v] & VF_SELF) ? 1 : 0);
            if (left == 0)
                continue; /* written into the argument's buffer */
            s->wait[a] = v; /* its own buffer until the argument's last read */
            s->dirty[s->n_dirty++] = a;
        }
        s->alloc[v] = g->v_bytes[v];
        s->dirty[s->n_dirty++] = v;
        r->live += b64(g->v_bytes[v]);
        if (s->rec) {
            s->bown[v] = v;
            s->bstart[v] = r->i;
            s->bend[v] = CG_NONE;
            s->blist[s->nblist++] = v;
        }
    }
    int64_t now = r->live;
    if (nd->flags & GH_NESTED) {
        int64_t b = g->nodes[k].nested;
        now += b;
        if (s->rec) /* for assign_recorded's heap peak: no node's to look up there */
            s->nest[s->n_nest++] = (nstep){r->i, b};
    }
    if (now > r->out.peak) {
        r->out.peak = now;
        r->out.step = r->i;
        if (now >= r->bound) {
            r->lost = true;
            return false;
        }
    }
    uint32_t at = r->i++;
    if (last)
        return true;
    for (uint32_t q = s->k0[k]; q < s->k0[k + 1]; q++) {
        uint32_t b = s->klist[q];
        if (--s->left[b] != 0)
            continue;
        if (s->vflag[b] & VF_INPUT) {
            uint32_t o = s->wait[b];
            if (o != CG_NONE) {
                r->live -= b64(s->alloc[o]);
                s->alloc[o] = 0;
                if (s->rec)
                    s->bend[s->bown[o]] = at;
                s->wait[b] = CG_NONE;
            }
        } else if (!(s->vflag[b] & VF_PINNED) && s->alloc[b] > 0) {
            r->live -= b64(s->alloc[b]);
            s->alloc[b] = 0;
            if (s->rec)
                s->bend[s->bown[b]] = at;
        }
    }
    for (uint32_t j = 0; j < nd->nres; j++) {
        uint32_t v = nd->res0 + j;
        if ((s->vflag[v] & (VF_ROOT | VF_PINNED)) == VF_ROOT && s->left[v] == 0 && s->alloc[v] > 0) {
            r->live -= b64(s->alloc[v]);
            s->alloc[v] = 0;
            if (s->rec)
                s->bend[s->bown[v]] = at;
        }
    }
    return true;
}

static sim sim_end(simrun *r)
{
    if (r->out.peak < 0)
        r->out.peak = 0;
    return r->out;
}

/* Runs the n nodes of `order` (no bound).  With stop_at < n, stops after
 * the results of order[stop_at] are placed, leaving s->alloc as it is
 * there. */
static sim simulate(const cost_graph *g, gs *s, const uint32_t *order, uint32_t n, uint32_t stop_at)
{
    simrun r;
    sim_begin(g, s, &r, INT64_MAX);
    for (uint32_t i = 0; i < n; i++) {
        sim_step(g, s, &r, order[i], i == stop_at);
        if (i == stop_at)
            return r.out;
    }
    return sim_end(&r);
}

/* ------------------------------------------------- buffer assignment */

/* XLA's buffer assignment (BufferAssigner::AssignBuffersForComputations)
 * gives each buffer the entry computation returns (a live-out buffer not
 * aliased to an argument: a gradient the step returns, a new parameter not
 * donated) an allocation of its own, held for the whole program, outside
 * the heap of temporaries.  Buffers are assigned largest first (a live-out
 * one before another of the same size); a temporary first tries the
 * live-out allocations made so far, smallest first, and lives in one whose
 * buffers' live ranges it does not overlap (MaybeAssignBuffer): only what
 * is left goes to the heap, whose size is the peak of its buffers live at
 * once.  The total is the live-out allocations' bytes plus that peak: more
 * than the peak of what is live when a live-out allocation is idle before
 * its output is written and nothing fits in it (on an H200, XLA's dumps of
 * zoo programs: 3.95 GiB of a 36.94 GiB total for Llama's remat=full step,
 * where the peak of live bytes is 32.99).  The heap's own packing (best
 * fit at offsets, which may leave holes) is not modelled: the heap counts
 * as the peak of its live bytes. */

/* Largest first, a live-out buffer before another of the same size. */
static int asize_cmp(const void *a, const void *b)
{
    const asize *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (int)y->out - (int)x->out;
}

/* Sorts the nb records of s->arec (each starting before step n, those of
 * one first step in the order of their values) as assign places them: largest first, a live-out
 * buffer before another of the same size, then by first step, then by
 * value.  Two stable counting sorts instead of qsort's comparisons (a third
 * of assign): by first step, then by size, of which a block has few (a
 * hash table numbers them, and only those are compared).  by_start: the
 * records already come by first step (assign_recorded's do: a simulation
 * makes its buffers step by step), and the first sort, which would leave
 * them as they are, is skipped.  Returns s->arec or s->atmp, whichever
 * holds the sorted records. */
static abuf *asg_sort(gs *s, uint32_t nb, uint32_t n, bool by_start)
{
    abuf *rec = s->arec, *tmp = s->atmp;
    if (by_start) {
        rec = s->atmp;
        tmp = s->arec;
    } else {
        uint32_t *cnt = s->acount;
        memset(cnt, 0, sizeof *cnt * (n + 1));
        for (uint32_t i = 0; i < nb; i++)
            cnt[rec[i].start + 1]++;
        for (uint32_t i = 1; i <= n; i++)
            cnt[i] += cnt[i - 1];
        for (uint32_t i = 0; i < nb; i++)
            tmp[cnt[rec[i].start]++] = rec[i];
    }
    /* number the sizes: tmp[].next holds its size's number until placed
     * (tmp: the records by first step; rec: where they go) */
    uint32_t slots = 64, m = 0;
    while (slots < 2 * nb)
        slots *= 2;
    uint32_t mask = slots - 1;
    memset(s->aslot, 0, sizeof *s->aslot * slots);
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t out = tmp[i].end == CG_NONE, k;
        for (uint64_t h = ((uint64_t)tmp[i].bytes * 0x9E3779B97F4A7C15ull) >> 32 ^ out;; h++) {
            k = s->aslot[h & mask];
            if (!k) {
                s->asizes[m] = (asize){tmp[i].bytes, out, 0, m};
                s->aslot[h & mask] = k = ++m;
                break;
            }
            if (s->asizes[k - 1].bytes == tmp[i].bytes && s->asizes[k - 1].out == out)
                break;
        }
        s->asizes[k - 1].n++;
        tmp[i].next = k - 1;
    }
    qsort(s->asizes, m, sizeof *s->asizes, asize_cmp);
    uint32_t *first = s->aslot; /* done with the table: per size's number, where its next record goes */
    for (uint32_t j = 0, at = 0; j < m; j++) {
        first[s->asizes[j].num] = at;
        at += s->asizes[j].n;
    }
    for (uint32_t i = 0; i < nb; i++) {
        abuf *r = &rec[first[tmp[i].next]++];
        *r = tmp[i];
        r->next = CG_NONE;
    }
    return rec;
}

/* The first step in lo..hi whose bit is set in bm, or UINT32_MAX. */
static uint32_t bits_first(const uint64_t *bm, uint32_t lo, uint32_t hi)
{
    uint32_t w = lo >> 6, wh = hi >> 6;
    uint64_t x = bm[w] & (~0ull << (lo & 63));
    while (!x && w < wh)
        x = bm[++w];
    if (w == wh)
        x &= ~0ull >> (63 - (hi & 63));
    return x ? w << 6 | (uint32_t)__builtin_ctzll(x) : UINT32_MAX;
}

/* Sets the bits of steps lo..hi in bm. */
static void bits_set(uint64_t *bm, uint32_t lo, uint32_t hi)
{
    uint32_t w = lo >> 6, wh = hi >> 6;
    uint64_t m = ~0ull << (lo & 63);
    for (; w < wh; w++, m = ~0ull)
        bm[w] |= m;
    bm[wh] |= m & (~0ull >> (63 - (hi & 63)));
}

/* Whether buffer v, which ends before live-out allocation a starts, fits
 * in a: its steps overlap none of those of the buffers already placed in
 * a.  No size check: a is sorted before v, so it is not smaller.  bm: the
 * allocations' step bitmaps (a bit set where a buffer placed in one is
 * live), or NULL: a's records are walked. */
static bool asg_fits(const abuf *rec, aout *a, const abuf *v, const uint64_t *bm)
{
    /* the last record to turn one away first: on T32 about 9 looks in
     * 10 end there (it lies within the span, so the span's test can
     * wait) */
    if (!(a->he < v->start || v->end < a->hs))
        return false;
    if (a->head == CG_NONE || v->end < a->lo || v->start > a->hi)
        return true;
    if (bm) {
        /* the first step of v's that some placed buffer holds, to the end
         * of that run of held steps within its word: what overlaps those
         * is turned away next, as by a record's steps */
        uint32_t p = bits_first(bm + a->bit0, v->start, v->end);
        if (p == UINT32_MAX)
            return true;
        uint64_t free_ = ~(bm[a->bit0 + (p >> 6)] >> (p & 63));
        a->hs = p;
        a->he = free_ ? p + (uint32_t)__builtin_ctzll(free_) - 1 : (p | 63);
        return false;
    }
    /* a's records come latest first and do not overlap: the first
     * starting no later than v ends is the one v can overlap */
    for (uint32_t c = a->head; c != CG_NONE; c = rec[c].next)
        if (rec[c].start <= v->end) {
            if (rec[c].end < v->start)
                return true;
            a->hs = rec[c].start;
            a->he = rec[c].end;
            return false;
        }
    return true;
}

/* The most words assign_recorded keeps step bitmaps in (8 MB): where the
 * allocations would need more, it walks their records instead. */
#define ASG_BITS_MAX ((size_t)1 << 20)

/* Starts the record of a simulation's buffers (sim_step fills it while
 * s->rec: the buffers it makes, each one's first and last step, and for
 * each result the buffer it is in) for assign_recorded.  A result's
 * buffer is set when it is placed, before anything reads it; an input's
 * is itself (a loop's carried value may be handed on: it has no bytes
 * here), set once per run (graph_run). */
static void record_begin(gs *s)
{
    s->nblist = 0;
    s->n_nest = 0;
    s->rec = true;
}

/* assign of an order of n nodes once a simulation of all of it was
 * recorded (record_begin, then sim_step on each node, as the orders made
 * while they are counted are): it reads only the record.
 *
 * Given a bound (the lowest figure of the orders before, which this one
 * must beat to be kept; INT64_MAX: none) and a probe step (UINT32_MAX:
 * none), it stops once the figure is sure to reach the bound, and
 * returns a figure at or above it (*at and *idle 0): the figure is the
 * live-out allocations' bytes, known before any buffer is placed, plus
 * the heap's peak, which is at least the heap's bytes at the probe, and
 * a buffer that goes to the heap stays there: the live-out bytes, the
 * nested temporaries at the probe and the bytes of the heap's buffers
 * found so far that hold the probe only grow towards what the figure
 * counts.  With the order's live peak as the probe, on the search's T32
 * (BP, search on `model`, 3 x 200 episodes) every order assigned that
 * lost stopped here (570 of 724): the DFS order after about a third of
 * its buffers and a tenth of the walks down the allocations, a list
 * order losing by a few bytes after ~80% of its buffers.
 * Only where the bytes cannot overflow (their sum fits in int64_t): the
 * figure is then the sum this compares against. */
static int64_t assign_recorded(const cost_graph *g, gs *s, uint32_t n, int64_t bound, uint32_t probe, uint32_t *at,
                               int64_t *idle)
{
    uint32_t nb_made = s->nblist;
    const uint32_t *made = s->blist;
    s->rec = false;
    memset(s->hdiff, 0, sizeof *s->hdiff * (n + 1));
    /* the live-out buffers' last first step: a buffer ending there or
     * after fits in no allocation, and goes to the heap unsorted (the
     * heap's peak does not depend on the order its buffers come in) */
    uint32_t last_out = 0;
    bool any_out = false;
    size_t words = 0; /* the allocations' bitmaps: a word per 64 steps before each one's first */
    uint64_t lb = 0;  /* the live-out bytes, then what the figure is sure to reach (used where total fits) */
    for (uint32_t i = 0; i < nb_made; i++) {
        uint32_t v = made[i];
        if (s->bend[v] == CG_NONE) {
            any_out = true;
            last_out = s->bstart[v] > last_out ? s->bstart[v] : last_out;
            words += (s->bstart[v] >> 6) + 1;
            lb += (uint64_t)b64(g->v_bytes[v]);
        }
    }
    /* the bitmaps answer asg_fits in a few words where the walk down an
     * allocation's records (a load after a load) took ~43,000 steps a
     * call on T32; within ASG_BITS_MAX words (else, and with
     * every_order, which takes no shortcut, the walk) */
    uint64_t *bm = NULL;
    if (!g->every_order && words <= ASG_BITS_MAX) {
        if (words > s->cap_abits) {
            size_t c = words + words / 2;
            if (REALLOC(s->abits, c))
                s->cap_abits = c;
        }
        if (words <= s->cap_abits)
            bm = s->abits;
    }
    /* the records in the order the buffers were made: by first step, and
     * at one step (one node's results) by value, as asg_sort needs */
    abuf *rec = s->arec;
    uint32_t nb = 0, prev = 0;
    bool by_start = true; /* checked, not assumed: the sort by first step is skipped only then */
    int64_t total = 0; /* every buffer's bytes and the nested temporaries' (the figure is below) */
    bool fits = true;  /* none negative and total did not overflow: lb's sums are below total */
    for (uint32_t i = 0; i < nb_made; i++) {
        uint32_t v = made[i];
        int64_t bytes = b64(g->v_bytes[v]);
        fits &= bytes >= 0 && !__builtin_add_overflow(total, bytes, &total);
        if (any_out && (s->bend[v] == CG_NONE || s->bend[v] < last_out)) {
            rec[nb++] = (abuf){bytes, s->bstart[v], s->bend[v], v, CG_NONE};
            by_start &= s->bstart[v] >= prev;
            prev = s->bstart[v];
        } else {
            s->hdiff[s->bstart[v]] += bytes;
            s->hdiff[s->bend[v] + 1] -= bytes;
            if (s->bstart[v] <= probe && probe <= s->bend[v])
                lb += (uint64_t)bytes; /* in the heap (not live-out here: bend is a step) */
        }
    }
    for (uint32_t i = 0; i < s->n_nest; i++) {
        fits &= s->nest[i].bytes >= 0 && !__builtin_add_overflow(total, s->nest[i].bytes, &total);
        if (s->nest[i].step == probe)
            lb += (uint64_t)s->nest[i].bytes;
    }
    if (!fits || bound == INT64_MAX)
        probe = UINT32_MAX; /* no stop: the walk below tests the probe only */
    else if (lb >= (uint64_t)bound) {
        *at = 0;
        *idle = 0;
        return (int64_t)lb;
    }
    rec = asg_sort(s, nb, n, by_start);
    /* the live-out allocations are outs_a[1..n_out], in the order made;
     * outs_a[0] is a guard that every buffer ends too late for (start 0)
     * and whose up (0) ends the walk, so the walk's usual step (to the
     * next allocation down, on a look the last hit answers) tests no
     * bound: 13 instructions a look became 8 (31.5 M looks in 1,207
     * calls on the brief's command) */
    aout *outs_a = s->aouts;
    outs_a[0] = (aout){CG_NONE, 0, CG_NONE, 0, 0, 0, UINT32_MAX, 0, 0};
    uint32_t bit0 = 0;
    int64_t outs = 0;
    uint32_t n_out = 0;
    uint32_t written = 0; /* the last first step of those: a buffer ending there or after fits in none */
    for (uint32_t i = 0; i < nb; i++) {
        abuf *v = &rec[i];
        if (v->end == CG_NONE) {
            uint32_t up = n_out;
            while (up && outs_a[up].start <= v->start)
                up = outs_a[up].up;
            outs_a[++n_out] = (aout){i, v->start, CG_NONE, 0, 0, up, UINT32_MAX, 0, bit0};
            bit0 += (v->start >> 6) + 1;
            outs += v->bytes;
            written = v->start > written ? v->start : written;
            continue;
        }
        bool placed = false;
        /* the smallest allocation first, of those starting after v ends */
        for (aout *a = outs_a + (v->end < written ? n_out : 0);;) {
            if (v->end >= a->start) {
                if (!a->up)
                    break;
                a = outs_a + a->up;
                continue;
            }
            if (!asg_fits(rec, a, v, bm)) {
                a--;
                continue;
            }
            if (a->head == CG_NONE) {
                a->lo = v->start;
                a->hi = v->end;
                if (bm)
                    memset(bm + a->bit0, 0, sizeof *bm * ((a->start >> 6) + 1));
            } else {
                a->lo = v->start < a->lo ? v->start : a->lo;
                a->hi = v->end > a->hi ? v->end : a->hi;
            }
            uint32_t *pos = &a->head; /* latest first for asg_fits' walk; with bitmaps in any order */
            if (bm)
                bits_set(bm + a->bit0, v->start, v->end);
            else
                while (*pos != CG_NONE && rec[*pos].start > v->start)
                    pos = &rec[*pos].next;
            v->next = *pos;
            *pos = i;
            placed = true;
            break;
        }
        if (!placed) {
            s->hdiff[v->start] += v->bytes;
            s->hdiff[v->end + 1] -= v->bytes;
            if (v->start <= probe && probe <= v->end && (lb += (uint64_t)v->bytes) >= (uint64_t)bound) {
                *at = 0;
                *idle = 0;
                return (int64_t)lb; /* the figure reaches the bound: this order cannot be the lowest */
            }
        }
    }
    /* the heap's peak, with the nested temporaries of the steps that have
     * them (s->nest, by step: the simulation recorded them) */
    int64_t cur = 0, peak = -1;
    const nstep *ns = s->nest, *ns_end = s->nest + s->n_nest;
    *at = 0;
    for (uint32_t i = 0; i < n; i++) {
        cur += s->hdiff[i];
        int64_t now = cur;
        if (ns < ns_end && ns->step == i)
            now += (ns++)->bytes;
        if (now > peak) {
            peak = now;
            *at = i;
        }
    }
    /* the allocations not yet written at the peak, less the buffer placed
     * in each that is live there (counted as what it is) */
    *idle = 0;
    for (uint32_t j = 1; j <= n_out; j++) {
        const aout *a = &outs_a[j];
        if (a->start <= *at)
            continue;
        *idle += rec[a->rec].bytes;
        for (uint32_t c = a->head; c != CG_NONE; c = rec[c].next)
            if (rec[c].start <= *at && *at <= rec[c].end)
                *idle -= rec[c].bytes;
    }
    return outs + (peak < 0 ? 0 : peak);
}

/* The bytes the buffer assignment of `order` holds: the live-out
 * allocations' and the heap's peak; *at: the step of the heap's peak,
 * *idle: the live-out allocations whose buffer is not yet written there,
 * less what is placed in them and live there. */
static int64_t assign(const cost_graph *g, gs *s, const uint32_t *order, uint32_t n, uint32_t *at, int64_t *idle)
{
    record_begin(s);
    simulate(g, s, order, n, UINT32_MAX);
    return assign_recorded(g, s, n, INT64_MAX, UINT32_MAX, at, idle);
}

/* The figure of `order`: its buffer assignment's (held) or the peak of
 * what is live. */
static sim measure(const cost_graph *g, gs *s, const uint32_t *order, uint32_t n, bool held)
{
    if (!held)
        return simulate(g, s, order, n, UINT32_MAX);
    sim r;
    r.peak = assign(g, s, order, n, &r.step, &r.idle);
    return r;
}

/*
 * An order counted as it is made (held: its simulation recorded for
 * assign, which then needs no simulation of its own) is not simulated
 * while it follows the program's order, counted before it: on the
 * search's T32 the placed order is the program's in about half the runs
 * (194 of 408: the collectives that move are already where they would
 * move to), and its simulation and assignment would only give the
 * program's figure again, which cannot be below the lowest.  At the
 * first node where it leaves the program's order its simulation begins
 * and runs the steps it followed first (the same steps, in the same
 * order, as counting them as they came); one that never leaves it is not
 * counted (take_order).  Where the program's own simulation reached the
 * bound within the steps followed (prog's peak, when not held: the bound
 * is never above it), the order is lost there, as its simulation would
 * have been; held, the program's live peak is not known (the figure is
 * assign's), and an order whose live bytes reach the bound while it
 * follows is found lost once it leaves, or never counted.
 */
static void order_begin(gs *s, simrun *r, const uint32_t *prog_order, const sim *prog, int64_t bound, bool held)
{
    if (held)
        record_begin(s);
    *r = (simrun){.out = {-1, 0, 0}, .bound = bound, .ref = prog_order, .stop = UINT32_MAX};
    if (!held && bound <= prog->peak)
        r->stop = prog->step + 1;
}

/* The order made leaves the program's order at node n: its simulation
 * begins, runs the steps it followed, then n. */
static bool order_leave(const cost_graph *g, gs *s, simrun *r, uint32_t n)
{
    const uint32_t *ref = r->ref;
    uint32_t same = r->same;
    sim_begin(g, s, r, r->bound); /* r->ref: NULL */
    for (uint32_t i = 0; i < same; i++)
        if (!sim_step(g, s, r, ref[i], false))
            return false;
    return sim_step(g, s, r, n, false);
}

/* Counts node n, the next of the order made (see order_begin): false once
 * the order cannot beat the bound. */
static inline bool order_step(const cost_graph *g, gs *s, simrun *r, uint32_t n)
{
    if (!r->ref)
        return sim_step(g, s, r, n, false);
    if (n != r->ref[r->same])
        return order_leave(g, s, r, n);
    if (++r->same < r->stop)
        return true;
    r->lost = true;
    return false;
}

/* The figure of an order whose simulation ran to its end (not lost): its
 * peak, or held, its buffer assignment's, or a figure at or above the
 * bound, which the order cannot then beat (assign_recorded stops once
 * its figure is sure to reach it: the heap's bytes at the step of the
 * order's live peak, where its buffers are most, are the probe). */
static sim order_figure(const cost_graph *g, gs *s, simrun *r, uint32_t n, bool held)
{
    s->rec = false;
    if (!held || r->lost)
        return sim_end(r);
    sim x;
    x.peak = assign_recorded(g, s, n, r->bound, r->out.step, &x.step, &x.idle);
    return x;
}

/* ----------------------------------------------------- the list order */

static bool h_less(const hentry *a, const hentry *b)
{
    if (a->p1 != b->p1)
        return a->p1 < b->p1;
    if (a->p2 != b->p2)
        return a->p2 < b->p2;
    return a->node > b->node; /* earlier in the program first */
}

static bool h_push(gs *s, hentry e)
{
    if (s->n_heap == s->cap_h) {
        uint32_t c = s->cap_h ? 2 * s->cap_h : 1024;
        if (!REALLOC(s->heap, c))
            return false;
        s->cap_h = c;
    }
    uint32_t i = s->n_heap++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!h_less(&s->heap[p], &e))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = e;
    return true;
}

static hentry h_pop(gs *s)
{
    hentry top = s->heap[0], last = s->heap[--s->n_heap];
    uint32_t i = 0, n = s->n_heap;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h_less(&s->heap[c], &s->heap[c + 1]))
            c++;
        if (!h_less(&last, &s->heap[c]))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

static hentry priority(const cost_graph *g, const gs *s, uint32_t n)
{
    const gnh *nd = &s->nh[n];
    hentry e = {0, 0, n, s->ver[n]};
    double defined = 0, freed = 0;
    bool scalar = nd->nres > 0;
    for (uint32_t j = 0; j < nd->nres; j++) {
        uint32_t r = nd->res0 + j;
        if (g->v_bytes[r] > 8)
            scalar = false;
        if (s->vflag[r] & VF_ROOT) {
            defined += g->v_bytes[r];
            e.p2 += s->nusers[r];
        } else {
            e.p2 += s->nusers[g->v_root[r]];
        }
    }
    if (scalar) {
        e.p1 = INT64_MAX;
        return e;
    }
    for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
        uint32_t b = s->klist[i];
        if (s->rem[b] == 1 && !(s->vflag[b] & (VF_INPUT | VF_PINNED)))
            freed += g->v_bytes[b];
    }
    e.p1 = b64(freed) - b64(defined);
    return e;
}

enum { NS_WAIT, NS_READY, NS_DONE };

/* Each buffer's kernel readers (CSR in ku0/kulist, duplicates kept) and
 * each node's count of inputs some node writes (npred0), from s->uses;
 * s->topo: whether every such input is a buffer of a kernel before its
 * reader, the return excepted (the list order then covers every node:
 * list_covers need not look).  False when out of memory. */
static bool kernel_users(const cost_graph *g, gs *s, uint32_t n_sched, uint32_t ret)
{
    uint32_t nv = g->n_vals;
    uint32_t total = 0;
    for (uint32_t v = 0; v < nv; v++) { /* kfill: where v's next reader goes */
        s->ku0[v] = s->kfill[v] = total;
        total += s->uses[v];
    }
    s->ku0[nv] = total;
    if (total + 1 > s->cap_ku) {
        if (!REALLOC(s->kulist, total + 1))
            return false;
        s->cap_ku = total + 1;
    }
    uint32_t *kul = s->kulist;
    bool topo = true;
    memset(s->npred0, 0, sizeof *s->npred0 * g->n_nodes);
    for (uint32_t j = 0; j < n_sched; j++) { /* s->order: the scheduled nodes, in program order */
        uint32_t n = s->order[j];
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
            uint32_t b = s->klist[i], d = s->kdef[i];
            kul[s->kfill[b]++] = n;
            if (d != CG_NONE) {
                s->npred0[n]++;
                topo &= d < n && d != ret && s->sched[d] && (s->vflag[b] & VF_ROOT);
            }
        }
    }
    s->topo = topo;
    return true;
}

/* s->rem and s->npred as kernel_users left them, for an order that
 * counts them down. */
static void reset_users(const cost_graph *g, gs *s)
{
    reset_uses(g, s);
    memcpy(s->npred, s->npred0, sizeof *s->npred * g->n_nodes);
}

/* ---------------------------------------------------- the placed order */

/*
 * The order written with its collectives where XLA's SPMD partitioner puts
 * them: it emits the collectives of a resharding next to the op whose
 * result is resharded (spmd_partitioner.cc, ReshardNoCache: the partial sum
 * of a dot is reduce-scattered where the dot is partitioned; a gather is
 * made where its user needs the replicated value), and its latency-hiding
 * scheduler starts a reduction as soon as its operand is ready and a
 * gather one step ahead of its reader (latency_hiding_scheduler.cc).  A
 * lowering that writes every gradient's reduce-scatter at the optimizer
 * (or every weight's gather at the step's start) would otherwise hold each
 * full-size value from its producer to there.  Collectives that write
 * fewer bytes than they read move up to just after their last producer;
 * those that write more move down to just before their first reader.
 */
enum { MV_NONE, MV_UP, MV_DOWN };

static void place_emit(const cost_graph *g, gs *s, uint32_t n, uint32_t *k, simrun *sr);

/* Emits what node n waits for (what moved, as nothing else can wait: the
 * order written puts producers first), then n.  Nothing once the
 * simulation sr run beside it stopped. */
static void place_node(const cost_graph *g, gs *s, uint32_t n, uint32_t *k, simrun *sr)
{
    for (uint32_t i = s->k0[n]; i < s->k0[n + 1] && !sr->lost; i++) {
        uint32_t d = s->kdef[i];
        if (d != CG_NONE && s->nstate[d] != NS_DONE)
            place_node(g, s, d, k, sr);
    }
    if (s->nstate[n] != NS_DONE && !sr->lost)
        place_emit(g, s, n, k, sr);
}

/* Emits n, then every moved-up reader of its results that waits for
 * nothing else. */
static void place_emit(const cost_graph *g, gs *s, uint32_t n, uint32_t *k, simrun *sr)
{
    s->nstate[n] = NS_DONE;
    s->porder[(*k)++] = n;
    if (!order_step(g, s, sr, n))
        return;
    const gnh *nd = &s->nh[n];
    for (uint32_t j = 0; j < nd->nres; j++) {
        uint32_t r = nd->res0 + j;
        if (!(s->vflag[r] & VF_ROOT))
            continue;
        for (uint32_t q = s->ku0[r]; q < s->ku0[r + 1] && !sr->lost; q++) {
            uint32_t u = s->kulist[q];
            if (--s->npred[u] == 0 && s->move[u] == MV_UP && s->nstate[u] != NS_DONE)
                place_node(g, s, u, k, sr);
        }
    }
}

/* The placed order into s->porder, counted by the simulation sr as it is
 * made (order_begin): 0, 1 when no collective moves (the order written
 * stands) or it does not cover every node, 2 when sr stopped. */
static int placed_order(const cost_graph *g, gs *s, uint32_t n_sched, uint32_t ret, simrun *sr)
{
    reset_users(g, s);
    int moved = 0;
    memset(s->nstate, NS_WAIT, g->n_nodes);
    memset(s->move, MV_NONE, g->n_nodes);
    for (uint32_t q = 0; q < n_sched; q++) { /* s->order: the scheduled nodes (only those move) */
        uint32_t n = s->order[q];
        if (n == ret || !(s->skind[n] & SK_COLL))
            continue;
        const gnh *nd = &s->nh[n];
        double rd = 0, wr = 0;
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++)
            rd += g->v_bytes[s->klist[i]];
        for (uint32_t j = 0; j < nd->nres; j++)
            if (s->vflag[nd->res0 + j] & VF_ROOT)
                wr += g->v_bytes[nd->res0 + j];
        s->move[n] = wr < rd ? MV_UP : wr > rd ? MV_DOWN : MV_NONE;
        moved |= s->move[n] != MV_NONE;
    }
    if (!moved)
        return 1;
    uint32_t k = 0;
    /* what moves up and reads only inputs goes first (s->order: the
     * scheduled nodes, in program order; only those move) */
    for (uint32_t i = 0; i < n_sched && !sr->lost; i++) {
        uint32_t n = s->order[i];
        if (s->move[n] == MV_UP && s->npred[n] == 0)
            place_node(g, s, n, &k, sr);
    }
    for (uint32_t i = 0; i < n_sched && !sr->lost; i++) {
        uint32_t n = s->order[i];
        if (s->nstate[n] == NS_DONE || (s->move[n] != MV_NONE && n != ret))
            continue;
        if (n == ret) /* what nothing read: before the return */
            for (uint32_t j = 0; j < n_sched && !sr->lost; j++)
                if (s->order[j] != ret && s->nstate[s->order[j]] != NS_DONE)
                    place_node(g, s, s->order[j], &k, sr);
        place_node(g, s, n, &k, sr);
    }
    return sr->lost ? 2 : k == n_sched ? 0 : 1;
}

/* The list scheduler's order of the scheduled nodes into s->lorder; the
 * return stays last.  -1 when out of memory, 1 when it does not cover
 * every node (a graph this cannot order: the program's order stands), 2
 * when the simulation sr (NULL: none; else order_begin) run beside it
 * stopped (the order cannot win: it is left unfinished). */
static int list_order(const cost_graph *g, gs *s, uint32_t n_sched, uint32_t ret, simrun *sr)
{
    reset_users(g, s);
    const uint32_t *kul = s->kulist;
    memset(s->nstate, NS_WAIT, g->n_nodes);
    memset(s->ver, 0, sizeof *s->ver * g->n_nodes);
    s->n_heap = 0;
    for (uint32_t i = 0; i < n_sched; i++) { /* the scheduled nodes, in program order */
        uint32_t n = s->order[i];
        if (n != ret && s->npred[n] == 0) {
            s->nstate[n] = NS_READY;
            if (!h_push(s, priority(g, s, n)))
                return -1;
        }
    }
    uint32_t k = 0;
    while (s->n_heap) {
        hentry e = h_pop(s);
        if (s->nstate[e.node] != NS_READY || e.ver != s->ver[e.node])
            continue;
        uint32_t n = e.node;
        s->nstate[n] = NS_DONE;
        s->lorder[k++] = n;
        if (sr && !order_step(g, s, sr, n))
            return 2;
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
            uint32_t b = s->klist[i];
            if (--s->rem[b] != 1)
                continue;
            /* its last reader frees it now: that one's priority rises */
            for (uint32_t q = s->ku0[b]; q < s->ku0[b + 1]; q++) {
                uint32_t u = kul[q];
                if (s->nstate[u] == NS_READY) {
                    s->ver[u]++;
                    if (!h_push(s, priority(g, s, u)))
                        return -1;
                }
            }
        }
        const gnh *nd = &s->nh[n];
        for (uint32_t j = 0; j < nd->nres; j++) {
            uint32_t r = nd->res0 + j;
            if (!(s->vflag[r] & VF_ROOT))
                continue;
            for (uint32_t q = s->ku0[r]; q < s->ku0[r + 1]; q++) {
                uint32_t u = kul[q];
                if (--s->npred[u] == 0 && u != ret && s->nstate[u] == NS_WAIT) {
                    s->nstate[u] = NS_READY;
                    if (!h_push(s, priority(g, s, u)))
                        return -1;
                }
            }
        }
    }
    if (ret != CG_NONE) {
        s->lorder[k++] = ret;
        if (sr && !order_step(g, s, sr, ret))
            return 2;
    }
    return k == n_sched ? 0 : 1;
}

/* Whether list_order covers every node, without making the order: which
 * nodes it takes does not depend on the order it takes them in (each is
 * taken once every writer of what it reads is), so a stack does what its
 * heap does.  For a list order stopped by its simulation. */
static bool list_covers(const cost_graph *g, gs *s, uint32_t n_sched, uint32_t ret)
{
    if (s->topo) /* each node's writers come before it: taken in the program's order */
        return true;
    reset_users(g, s);
    uint32_t top = 0, k = 0;
    for (uint32_t n = 0; n < g->n_nodes; n++)
        if (s->sched[n] && n != ret && s->npred[n] == 0)
            s->ready[top++] = n;
    while (top) {
        const gnh *nd = &s->nh[s->ready[--top]];
        k++;
        for (uint32_t j = 0; j < nd->nres; j++) {
            uint32_t r = nd->res0 + j;
            if (!(s->vflag[r] & VF_ROOT))
                continue;
            for (uint32_t q = s->ku0[r]; q < s->ku0[r + 1]; q++) {
                uint32_t u = s->kulist[q];
                if (--s->npred[u] == 0 && u != ret && s->sched[u])
                    s->ready[top++] = u;
            }
        }
    }
    if (ret != CG_NONE)
        k++;
    return k == n_sched;
}

/* ------------------------------------------------------ the DFS order */

static _Thread_local const gs *dfs_sort_s; /* qsort has no context argument: one per thread */

/* The order XLA's DFS visits operands in: most fan-out first, then the
 * largest, then program order. */
static int dfs_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const gs *s = dfs_sort_s;
    const dkey *kx = &s->dk[x], *ky = &s->dk[y];
    if (kx->extra != ky->extra)
        return kx->extra > ky->extra ? -1 : 1;
    if (kx->tsize != ky->tsize)
        return kx->tsize > ky->tsize ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Pushes node n on the DFS stack with its operands (the writers of what it
 * reads), sorted, appended to s->dkids. */
static bool dfs_push(const cost_graph *g, gs *s, uint32_t n, uint32_t *top, uint32_t *nc)
{
    uint32_t from = *nc;
    for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
        uint32_t d = s->kdef[i];
        if (d == CG_NONE || !s->sched[d] || s->nstate[d] != NS_WAIT)
            continue;
        if (*nc >= s->cap_dkids) {
            uint32_t c = s->cap_dkids ? 2 * s->cap_dkids : 4096;
            if (!REALLOC(s->dkids, c))
                return false;
            s->cap_dkids = c;
        }
        s->dkids[(*nc)++] = d;
    }
    uint32_t *kids = s->dkids + from, nk = *nc - from;
    dfs_sort_s = s;
    if (nk > 16) {
        qsort(kids, nk, sizeof *kids, dfs_cmp);
    } else {
        /* most nodes read a few: an insertion sort (the order is total, so
         * any sort gives the same) without qsort's calls */
        for (uint32_t i = 1; i < nk; i++) {
            uint32_t x = kids[i], j = i;
            for (; j > 0 && dfs_cmp(&x, &kids[j - 1]) < 0; j--)
                kids[j] = kids[j - 1];
            kids[j] = x;
        }
    }
    s->nstate[n] = NS_READY;
    s->dstack[(*top)++] = n;
    s->dstack[(*top)++] = from;
    s->dstack[(*top)++] = *nc;
    return true;
}

/* XLA's DFSMemoryScheduler: a post-order from the return, visiting first
 * the operands with the most fan-out behind them (users beyond the first,
 * summed over what leads to them), then the largest (bytes written by what
 * leads to them, capped as XLA caps it), then program order.  Into
 * s->dorder (after kernel_users, whose users it reads); -1 when out of
 * memory, 1 when it does not cover every node, 2 when the simulation sr
 * (NULL: none) run beside it stopped. */
static int dfs_order(const cost_graph *g, gs *s, uint32_t n_sched, uint32_t ret, simrun *sr)
{
    uint32_t nn = g->n_nodes;
    if (nn + 1 > s->cap_dfs) {
        if (!REALLOC(s->dk, nn + 1) || !REALLOC(s->dorder, nn + 1) ||
            !REALLOC(s->dstack, 3 * (nn + 1)))
            return -1;
        s->cap_dfs = nn + 1;
    }
    /* producers of each kernel: the writers of the buffers it reads */
    double cum = 0;
    for (uint32_t q = 0; q < n_sched; q++) { /* s->order: the scheduled nodes, in program order */
        uint32_t n = s->order[q];
        const gnh *nd = &s->nh[n];
        uint64_t users = 0;
        double size = 0;
        for (uint32_t j = 0; j < nd->nres; j++) {
            uint32_t r = nd->res0 + j;
            if (s->vflag[r] & VF_ROOT) {
                users += s->ku0[r + 1] - s->ku0[r];
                size += g->v_bytes[r];
            }
        }
        cum += size;
        s->dread[n] = users > 0; /* for the roots below */
        dkey *k = &s->dk[n];
        k->extra = users ? users - 1 : 0;
        k->tsize = size;
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++) {
            uint32_t d = s->kdef[i];
            if (d != CG_NONE && s->sched[d]) {
                k->extra += s->dk[d].extra;
                k->tsize += s->dk[d].tsize;
            }
        }
        if (k->tsize > cum)
            k->tsize = cum;
        if (k->extra > nn)
            k->extra = nn;
        s->nstate[n] = NS_WAIT;
    }
    uint32_t k = 0;
    /* roots: kernels nobody reads (in program order: s->order holds the
     * scheduled nodes so), the return last */
    for (uint32_t i = 0; i <= n_sched; i++) {
        uint32_t root = i < n_sched ? s->order[i] : ret;
        if (root == CG_NONE || s->nstate[root] != NS_WAIT)
            continue;
        if (i < n_sched) {
            if (root == ret)
                continue;
            if (s->dread[root]) /* a root result of it has a kernel reader */
                continue;
        }
        /* iterative post-order: (node, next of its sorted operands) */
        uint32_t top = 0, nc = 0;
        if (!dfs_push(g, s, root, &top, &nc))
            return -1;
        while (top) {
            uint32_t n = s->dstack[top - 3], at = s->dstack[top - 2], end = s->dstack[top - 1];
            while (at < end && s->nstate[s->dkids[at]] != NS_WAIT)
                at++;
            if (at == end) {
                s->nstate[n] = NS_DONE;
                s->dorder[k++] = n;
                if (sr && !order_step(g, s, sr, n))
                    return 2;
                top -= 3;
                continue;
            }
            s->dstack[top - 2] = at + 1;
            if (!dfs_push(g, s, s->dkids[at], &top, &nc))
                return -1;
        }
    }
    return k == n_sched ? 0 : 1;
}

/* ====================================================== the breakdown */

/* Whether input a is read, through fusible ops, collectives and aliases,
 * by a dot, a convolution or a custom call within a few steps: a weight. */
static bool feeds_matmul(const cost_graph *g, gs *s, uint32_t a)
{
    uint32_t frontier[64], next[64], nf = 1, nn, seen = 0;
    frontier[0] = a;
    for (int depth = 0; depth < 6 && nf; depth++) {
        nn = 0;
        for (uint32_t i = 0; i < nf; i++) {
            uint32_t v = frontier[i];
            for (uint32_t q = s->u0[v]; q < s->u0[v + 1]; q++) {
                const gnh *u = &s->nh[s->ulist[q]];
                if (u->flags & (CG_DOT | CG_OPAQUE))
                    return true;
                if (u->flags & CG_REGION) /* a loop whose body reads it with a matmul */
                    for (uint32_t e = u->opd0; e < u->opd0 + u->nopd; e++)
                        if (g->e_feeds[e] && g->v_root[g->e_val[e]] == v)
                            return true;
                if (!(u->flags & (CG_PRODUCER | CG_COLL)) || ++seen > 256)
                    continue;
                for (uint32_t j = 0; j < u->nres && nn < 64; j++)
                    if (s->vflag[u->res0 + j] & VF_ROOT)
                        next[nn++] = u->res0 + j;
            }
        }
        memcpy(frontier, next, sizeof *next * nn);
        nf = nn;
    }
    return false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool has_dims(const gs *s, uint64_t h)
{
    if (!h || !s->n_pdims)
        return false;
    return bsearch(&h, s->pdims, s->n_pdims, sizeof h, cmp_u64) != NULL;
}

/* The category of each counted input, in vread (as a number); which
 * inputs feed a matmul in g->v_feeds (the op holding the block reads
 * those). */
static bool classify_inputs(cost_graph *g, gs *s)
{
    s->n_pdims = 0;
    if (g->n_vals > g->cap_feeds) {
        if (!REALLOC(g->v_feeds, g->n_vals))
            return false;
        g->cap_feeds = g->n_vals;
    }
    for (uint32_t v = 0; v < g->n_vals; v++) {
        g->v_feeds[v] = 0;
        if (g->v_def[v] != CG_NONE)
            continue;
        bool feeds = feeds_matmul(g, s, v);
        g->v_feeds[v] = feeds;
        if (!(g->v_in[v] & CG_IN_COUNTED))
            continue;
        uint8_t in = g->v_in[v];
        int kind;
        if (in & CG_IN_PARAMS)
            kind = COST_MEM_PARAMS;
        else if (in & CG_IN_OPT)
            kind = COST_MEM_OPT_STATE;
        else if (in & CG_IN_BATCH)
            kind = COST_MEM_BATCH;
        else if (feeds)
            kind = COST_MEM_PARAMS;
        else if (s->vflag[v] & VF_OUT) /* donated, but no weight */
            kind = COST_MEM_OPT_STATE;
        else
            kind = COST_MEM_BATCH;
        s->vread[v] = kind;
        if (kind == COST_MEM_PARAMS && g->v_dims[v]) {
            if (s->n_pdims == s->cap_pdims) {
                uint32_t c = s->cap_pdims ? 2 * s->cap_pdims : 64;
                if (!REALLOC(s->pdims, c))
                    return false;
                s->cap_pdims = c;
            }
            s->pdims[s->n_pdims++] = g->v_dims[v];
        }
    }
    if (s->n_pdims)
        qsort(s->pdims, s->n_pdims, sizeof *s->pdims, cmp_u64);
    return true;
}

static void top_insert(cost_peak_info *pk, int64_t bytes, int kind, const ir_op *op, const char *name, uint32_t what)
{
    if (bytes <= 0)
        return;
    int i = pk->n_values < COST_MEM_TOP ? pk->n_values++ : COST_MEM_TOP - 1;
    if (i == COST_MEM_TOP - 1 && pk->n_values == COST_MEM_TOP && pk->values[i].bytes >= bytes)
        return;
    while (i > 0 && pk->values[i - 1].bytes < bytes) {
        pk->values[i] = pk->values[i - 1];
        i--;
    }
    pk->values[i].bytes = bytes;
    pk->values[i].kind = (uint8_t)kind;
    pk->values[i].op = op;
    pk->values[i].name = name;
    pk->values[i].what = what;
}

/* What is live at step `at` of `order` (after simulate stopped there); a
 * buffer assign placed in a live-out allocation counts as what it is, the
 * rest of an allocation not yet written as outputs (assign's *idle: the
 * caller adds it). */
static bool breakdown(cost_graph *g, gs *s, const uint32_t *order, uint32_t at, cost_peak_info *pk)
{
    uint32_t n = order[at];
    const cost_gnode *nd = &g->nodes[n];
    memset(pk->kinds, 0, sizeof pk->kinds);
    pk->n_values = 0;
    pk->at = nd->op;
    pk->in = NULL;
    /* what the kernel at the peak reads is in flight (a loop's or a
     * call's operands are held for it: activations, saved stacks) */
    if (!(nd->flags & CG_REGION))
        for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++)
            s->vstamp[s->klist[i]] = UINT32_MAX;
    for (uint32_t v = 0; v < g->n_vals; v++) {
        int kind;
        int64_t bytes;
        if (g->v_def[v] == CG_NONE) {
            if (!(g->v_in[v] & CG_IN_COUNTED))
                continue;
            kind = (int)s->vread[v];
            bytes = b64(g->v_bytes[v]);
            pk->kinds[kind] += bytes;
            top_insert(pk, bytes, kind, NULL, g->v_name[v], g->v_what[v]);
            continue;
        }
        if (s->alloc[v] <= 0)
            continue;
        bytes = b64(s->alloc[v]);
        uint32_t d = g->v_def[v];
        const cost_gnode *dn = &g->nodes[d];
        if (s->vflag[v] & VF_PINNED)
            kind = d == n ? COST_MEM_TEMPS : COST_MEM_OUTPUTS;
        else if (dn->flags & CG_COLL)
            kind = COST_MEM_COLL;
        else if (d == n || s->vstamp[v] == UINT32_MAX)
            kind = COST_MEM_TEMPS;
        else
            kind = COST_MEM_ACTIVATIONS;
        if ((kind == COST_MEM_ACTIVATIONS || kind == COST_MEM_TEMPS) && has_dims(s, g->v_dims[v])) {
            /* a parameter's shape not cast from a parameter: a gradient */
            bool from_param = false;
            for (uint32_t i = s->k0[d]; i < s->k0[d + 1] && !from_param; i++) {
                uint32_t b = s->klist[i];
                from_param = g->v_def[b] == CG_NONE && (g->v_in[b] & CG_IN_COUNTED) && (int)s->vread[b] == COST_MEM_PARAMS;
            }
            if (!from_param)
                kind = COST_MEM_GRADS;
        }
        pk->kinds[kind] += bytes;
        top_insert(pk, bytes, kind, dn->op, NULL, g->v_what[v]);
    }
    for (uint32_t i = s->k0[n]; i < s->k0[n + 1]; i++)
        s->vstamp[s->klist[i]] = 0;
    if (nd->nested > 0) {
        if (nd->peak >= 0) {
            const cost_peak_info *in = &g->peaks[nd->peak];
            int64_t sum = 0;
            for (int k = 0; k < COST_MEM_COUNT; k++) {
                pk->kinds[k] += in->kinds[k];
                sum += in->kinds[k];
            }
            pk->kinds[COST_MEM_TEMPS] += nd->nested - sum;
            pk->in = in->in ? in->in : in->at;
            for (int i = 0; i < in->n_values; i++)
                top_insert(pk, in->values[i].bytes, in->values[i].kind, in->values[i].op, in->values[i].name, in->values[i].what);
        } else {
            pk->kinds[COST_MEM_TEMPS] += nd->nested;
        }
    }
    return true;
}

/* The lowest order so far: its figure, the order and which one it is, and
 * the bound the next order's simulation stops at (its figure; INT64_MAX
 * with cost_options.every_order, which counts every order to its end). */
typedef struct lowest {
    sim use;
    const uint32_t *best;
    int order;
    int64_t bound;
    bool every;
} lowest;

/* Takes the order just made (rc: its maker's return, 0 when it covers
 * every node and its simulation r ran to the end) if its figure is lower
 * than the lowest so far.  One that never left the program's order
 * (r->ref: not simulated, order_begin) has the program's figure, which
 * the lowest is never above. */
static void take_order(const cost_graph *g, gs *s, simrun *r, int rc, const uint32_t *order, uint32_t n, bool held,
                       int kind, lowest *lo)
{
    if (rc != 0 || r->lost || r->ref)
        return;
    sim x = order_figure(g, s, r, n, held);
    if (x.peak >= lo->use.peak)
        return;
    lo->use = x;
    lo->best = order;
    lo->order = kind;
    if (!lo->every)
        lo->bound = x.peak;
}

/* ================================================================= run */

static int graph_run(cost_graph *g, cost_program *p, double mult, cost_peak_info *peak, int64_t *peak_bytes,
                     ap_error *err)
{
    gs *s;
    if (g->oom || !scratch_fit(g, &s))
        return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
    s->fed = false;
    uint32_t nv = g->n_vals, nn = g->n_nodes;
    /* the marks of the fusion and kernel passes go up to 4 nn, below
     * register_block's (UINT32_MAX - n) */
    if (nn >= 1u << 28)
        return ap_error_set(err, AP_ENOMEM, "a block of more than 2^28 ops is beyond the cost model");
    for (uint32_t v = 0; v < nv; v++)
        s->bown[v] = v; /* inputs keep it (record_begin) */
    build_users(g, s);
    /* users first (they come later) */
    memset(s->nstamp, 0, sizeof *s->nstamp * nn);
    uint32_t n_multi = 0; /* the fused nodes in several kernels, into s->order (free until the kernels) */
    for (uint32_t n = nn; n-- > 0;) {
        s->kern[n] = n;
        s->nkern[n] = 0;
        bool f = fusable(g, s, n) && fuses(g, s, n);
        s->fused[n] = f;
        s->sched[n] = !f && (s->nh[n].flags & (CG_ALIAS | CG_BARRIER)) != CG_ALIAS;
        if (s->nkern[n] > 1)
            s->order[n_multi++] = n;
    }
    unfuse_costly(g, s, s->order, n_multi);
    /* kernels: their inputs, time items, collectives (marks above
     * unfuse_costly's, up to 3 nn: no clearing) */
    uint32_t nk = 0, n_sched = 0, ret = CG_NONE;
    for (uint32_t n = 0; n < nn; n++) {
        s->k0[n] = nk;
        s->ev[n] = (uint32_t)CE_NONE << 28; /* kind << 28 | index (item, collective) */
        if (!s->sched[n])
            continue;
        s->order[n_sched++] = n; /* for issue_order */
        const cost_gnode *nd = &g->nodes[n];
        s->skind[n] = (uint8_t)(((nd->flags & CG_COLL) ? SK_COLL : 0) | (nd->nkid ? SK_KIDS : 0));
        double f, mm, bytes;
        if (!form_kernel(g, s, n, 3 * nn + n + 1, &nk, &f, &mm, &bytes))
            return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
        if (nd->flags & CG_RETURN)
            ret = n;
        if (nd->flags & CG_COLL) {
            if (nd->coll >= 0) {
                cost_coll_item it = g->colls[nd->coll];
                if (!it.op)
                    it.op = nd->op;
                it.payload *= mult;
                it.steps *= mult;
                it.bytes *= mult;
                it.count = mult;
                s->ev[n] = (uint32_t)CE_COLL << 28 | (uint32_t)p->n_colls;
                if (!cost__push_coll(p, &it))
                    return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
            }
        } else if (!(nd->flags & (CG_REGION | CG_NOCOST))) {
            p->matmul_flops += mm * mult;
            cost_item it = {nd->op, f * mult, mm * mult, bytes * mult, nd->mm_m, nd->mm_n, mult, nd->prec};
            size_t idx;
            if (!cost__push_item(p, &it, &idx))
                return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
            if (idx != SIZE_MAX)
                s->ev[n] = (uint32_t)CE_KERNEL << 28 | (uint32_t)idx;
        }
    }
    s->k0[nn] = nk;
    if (!register_block(g, s, p, n_sched))
        return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
    if (!peak_bytes)
        return 0;
    if (g->eager) {
        /* the same kernels' time; the memory of an eager framework: every
         * op's result a tensor (eager_fuses), the ops run as written */
        for (uint32_t n = 0; n < nn; n++) {
            s->fused[n] = eager_fuses(g, s, n);
            s->sched[n] = !s->fused[n] && (s->nh[n].flags & (CG_ALIAS | CG_BARRIER)) != CG_ALIAS;
        }
        memset(s->vstamp, 0, sizeof *s->vstamp * nv);
        memset(s->nstamp, 0, sizeof *s->nstamp * nn);
        nk = 0;
        n_sched = 0;
        for (uint32_t n = 0; n < nn; n++) {
            s->k0[n] = nk;
            if (!s->sched[n])
                continue;
            n_sched++;
            double f, mm, bytes;
            if (!form_kernel(g, s, n, n + 1, &nk, &f, &mm, &bytes))
                return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
        }
        s->k0[nn] = nk;
    }

    /* memory: flags of the values */
    int64_t base = 0;
    for (uint32_t v = 0; v < nv; v++) {
        uint8_t f = 0;
        if (g->v_root[v] == v)
            f |= !(g->v_bytes[v] <= 0) ? VF_ROOT | VF_PLACE : VF_ROOT; /* sim_step's test, as it was */
        if (g->v_def[v] == CG_NONE) {
            f |= VF_INPUT;
            if (g->v_in[v] & CG_IN_COUNTED)
                base += b64(g->v_bytes[v]);
        }
        s->vflag[v] = f;
        s->pending[v] = CG_NONE;
        s->alloc[v] = 0; /* as a simulation begins (sim_begin) */
        s->wait[v] = CG_NONE;
    }
    s->n_dirty = 0;
    if (ret != CG_NONE) {
        const gnh *rn = &s->nh[ret];
        for (uint32_t j = 0; j < rn->nopd; j++) {
            uint32_t r = g->v_root[g->e_val[rn->opd0 + j]];
            if (s->vflag[r] & VF_INPUT)
                continue;
            s->vflag[r] |= VF_PINNED;
            uint32_t a = j < g->cap_out ? g->out_alias[j] : CG_NONE;
            if (a != CG_NONE && a < nv && (s->vflag[a] & VF_INPUT) && s->pending[r] == CG_NONE) {
                s->vflag[r] |= VF_OUT;
                s->pending[r] = a;
                s->vflag[a] |= VF_OUT; /* donated */
                /* whether its kernel reads the argument: the same for every order */
                uint32_t d = g->v_def[r];
                if (d != CG_NONE && in_klist(s, d, a))
                    s->vflag[r] |= VF_SELF;
            }
        }
    }
    /* the program's order, then the list scheduler's */
    uint32_t k = 0;
    for (uint32_t n = 0; n < nn; n++)
        if (s->sched[n])
            s->order[k++] = n;
    count_uses(g, s, n_sched);
    /* under XLA the entry's figure is its buffer assignment's (assign), and
     * the orders are compared by it.  What is live at a step is never more
     * than that figure (the outputs written are in their allocations, and
     * what lives in one not yet written is under its size), so an order
     * whose live bytes reach the lowest figure so far still cannot win */
    bool held = g->outs_held && !g->eager && n_sched > 0;
    sim prog = measure(g, s, s->order, n_sched, held);
    lowest lo = {prog, s->order, COST_ORDER_PROGRAM, g->every_order ? INT64_MAX : prog.peak, g->every_order};
    /* below the caller's enough, the program's order's figure will do: the
     * lowest is not above it */
    bool enough = g->peak_enough > 0 && !g->every_order && prog.peak <= g->peak_enough - base;
    if (n_sched > 2 && !g->eager && !enough) {
        if (!kernel_users(g, s, n_sched, ret))
            return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
        /* XLA's default memory scheduler keeps the lowest of its list, DFS
         * and post-order schedules; the program's order stands for the
         * post-order (JAX and XLA print in post-order) */
        /* each order is counted as it is made, against the lowest so far
         * (an order wins only below it): one that reaches it stops */
        simrun r;
        order_begin(s, &r, s->order, &prog, lo.bound, held);
        int prc = placed_order(g, s, n_sched, ret, &r);
        take_order(g, s, &r, prc, s->porder, n_sched, held, COST_ORDER_PLACED, &lo);
        order_begin(s, &r, s->order, &prog, lo.bound, held);
        int lrc = list_order(g, s, n_sched, ret, &r);
        if (lrc < 0)
            return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
        take_order(g, s, &r, lrc, s->lorder, n_sched, held, COST_ORDER_LIST, &lo);
        /* the DFS order where the list order covers every node */
        if (lrc == 0 || (lrc == 2 && list_covers(g, s, n_sched, ret))) {
            order_begin(s, &r, s->order, &prog, lo.bound, held);
            int drc = dfs_order(g, s, n_sched, ret, &r);
            if (drc < 0)
                return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
            take_order(g, s, &r, drc, s->dorder, n_sched, held, COST_ORDER_DFS, &lo);
        }
    }
    s->rec = false; /* an order lost, or not made, was recorded for nothing */
    *peak_bytes = base + lo.use.peak;
    if (peak) {
        memset(peak, 0, sizeof *peak);
        peak->order = lo.order;
        peak->program_order_peak = base + prog.peak;
        if (n_sched > 0) {
            if (!classify_inputs(g, s))
                return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
            s->fed = true;
            simulate(g, s, lo.best, n_sched, lo.use.step);
            breakdown(g, s, lo.best, lo.use.step, peak);
            peak->kinds[COST_MEM_OUTPUTS] += lo.use.idle;
            peak->order = lo.order;
            peak->program_order_peak = base + prog.peak;
        }
    }
    return 0;
}

/* ================================================================ memo */

/*
 * A search scores many states whose lowered programs are the same: an
 * action the lowering does not see (a tiling propagation then undoes, a
 * value tiled where only its reshard moves), or one state's program
 * reached again by another path.  On T32 (BP, search on `model`, 600
 * episodes) 208 of the 389 states scored ran a graph run before them, and
 * 102 one of the 4 run last.  cost__graph_run is a function of the graph's
 * fields (the values of its pointers included: ops and names are copied,
 * never read through), of mult and of which results are asked for; so
 * for a graph equal to a remembered one in all of them, into an empty
 * program, what the remembered run gave is what this run gives, bit for
 * bit.  Equality is checked field by field on a full copy (no hash: a
 * collision would be a wrong answer); graphs that differ mostly differ in
 * their sizes or their first values' bytes, so a miss costs little.
 */

typedef struct gmemo {
    uint64_t used; /* tick of its last use, 0: empty (or being filled) */
    uint32_t pins; /* finds reading it without the lock: not refilled nor freed while pinned */
    bool filling;  /* a keep is writing it without the lock */
    /* the key: what the run read (arrays of exactly n_* elements) */
    cost_graph key;
    double mult;
    bool want_peak, want_bytes;
    /* what it gave */
    cost_program out;
    cost_peak_info peak;
    int64_t peak_bytes;
    bool fed; /* it wrote g->v_feeds: key.v_feeds holds them */
} gmemo;

/* The fewest entries memo_bytes leaves (when the memo allows them). */
#define MEMO_MIN 4

/* One memo, of one graph or shared by several (cost__graph_share_memo:
 * the fast scorers of a search's threads).  A hit is exact whichever
 * graph ran the remembered run, so sharing changes how often runs are
 * skipped, never what a run gives; with several threads which runs a
 * thread finds remembered depends on their timing.  The lock guards the
 * entries' ticks, pins and fill marks and the list's shape; a find
 * compares and copies a pinned entry without it, and a keep fills an
 * entry it marked, so two threads' graph runs never wait on each other's
 * compares or copies. */
typedef struct gmemos {
    pthread_mutex_t mu;
    uint32_t refs; /* graphs using it */
    uint64_t tick;
    size_t bytes;  /* the graph's memo_bytes when it was made */
    uint32_t n;
    gmemo e[];
} gmemos;

/* Frees what entry e holds; e is left empty. */
static void memo_entry_free(gmemo *e)
{
    graph_arrays_free(&e->key);
    cost__program_free_arrays(&e->out);
    memset(e, 0, sizeof *e);
}

/* A memo of g->memo entries for g, or NULL when out of memory. */
static gmemos *memo_new(const cost_graph *g)
{
    gmemos *m = ap_calloc(1, sizeof *m + sizeof *m->e * g->memo);
    if (!m)
        return NULL;
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        ap_free(m);
        return NULL;
    }
    m->refs = 1;
    m->n = g->memo;
    m->bytes = g->memo_bytes;
    return m;
}

/* Lets go of one graph's use of the memo; the last frees it. */
static void memo_free(void *memos)
{
    gmemos *m = memos;
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&m->mu);
    if (!last)
        return;
    for (uint32_t i = 0; i < m->n; i++)
        memo_entry_free(&m->e[i]);
    pthread_mutex_destroy(&m->mu);
    ap_free(m);
}

bool cost__graph_share_memo(cost_graph *g, cost_graph *with)
{
    if (!g->memo || !with->memo || (g->memos && g->memos == with->memos))
        return true;
    gmemos *m = with->memos;
    if (!m) {
        if (!(m = memo_new(with)))
            return false;
        with->memos = m;
    }
    pthread_mutex_lock(&m->mu);
    m->refs++;
    pthread_mutex_unlock(&m->mu);
    memo_free(g->memos);
    g->memos = m;
    return true;
}

/* The bytes of g's arrays that an entry keeps as its key (the program it
 * keeps is smaller: its kernels and events). */
static size_t graph_bytes(const cost_graph *g)
{
    size_t per_edge = sizeof *g->e_val + sizeof *g->e_read + sizeof *g->e_feeds;
    size_t per_val = sizeof *g->v_bytes + sizeof *g->v_def + sizeof *g->v_root + sizeof *g->v_what +
                     sizeof *g->v_dims + sizeof *g->v_in + sizeof *g->v_name + sizeof *g->v_gate;
    return (size_t)g->cap_nodes * sizeof *g->nodes + (size_t)g->cap_edges * per_edge + (size_t)g->cap_vals * per_val;
}

int64_t cost__graph_memo_hits(const cost_graph *g) { return g->memo_hits; }

static bool same_arr(const void *a, const void *b, size_t n, size_t elem)
{
    return n == 0 || !memcmp(a, b, n * elem);
}
#define SAME(f, n) same_arr(k->f, g->f, (size_t)(n), sizeof *g->f)

/* The outputs g says the input of (out_alias beyond them is CG_NONE: its
 * capacity depends on the arrays g had). */
static uint32_t outs_aliased(const cost_graph *g)
{
    uint32_t n = g->cap_out;
    while (n && g->out_alias[n - 1] == CG_NONE)
        n--;
    return n;
}

/* Whether the run remembered in e read the sizes, flags and outputs a run
 * of g would (the cheap part of memo_same, under the lock). */
static bool memo_same_head(const gmemo *e, const cost_graph *g, double mult, bool want_peak, bool want_bytes)
{
    const cost_graph *k = &e->key;
    if (k->n_nodes != g->n_nodes || k->n_edges != g->n_edges || k->n_vals != g->n_vals ||
        k->n_colls != g->n_colls || k->n_peaks != g->n_peaks || k->n_kids != g->n_kids ||
        k->eager != g->eager || k->every_order != g->every_order || k->outs_held != g->outs_held ||
        k->peak_enough != g->peak_enough ||
        e->mult != mult || e->want_peak != want_peak || e->want_bytes != want_bytes)
        return false;
    uint32_t no = outs_aliased(g);
    return outs_aliased(k) == no && SAME(out_alias, no);
}

/* Whether the run remembered in e, whose head is g's (memo_same_head),
 * read what a run of g would. */
static bool memo_same(const gmemo *e, const cost_graph *g, bool want_peak)
{
    const cost_graph *k = &e->key;
    uint32_t nv = g->n_vals, ne = g->n_edges;
    if (!(SAME(v_bytes, nv) && SAME(nodes, g->n_nodes) && SAME(e_val, ne) && SAME(e_read, ne) &&
          SAME(v_def, nv) && SAME(v_root, nv) && SAME(v_in, nv) && SAME(v_gate, nv) && SAME(colls, g->n_colls) &&
          SAME(peaks, g->n_peaks) && SAME(kids, g->n_kids)))
        return false;
    /* what only the breakdown of the peak reads (classify_inputs, breakdown):
     * the names of values, their dims, which edges feed a matmul.  The
     * search's scorers ask for the peak's bytes alone, and programs that
     * differ only there are common (a copy of another value, a gradient
     * named after another parameter) */
    return !want_peak || (SAME(e_feeds, ne) && SAME(v_what, nv) && SAME(v_dims, nv) && SAME(v_name, nv));
}
#undef SAME

#define SWAP(x, y)                                                                                             \
    do {                                                                                                       \
        __typeof__(x) t_ = (x);                                                                                \
        (x) = (y);                                                                                             \
        (y) = t_;                                                                                              \
    } while (0)

/* The capacity the builder's doubling from cap (else from `first`)
 * reaches for n elements. */
static uint32_t doubled(uint32_t cap, uint32_t n, uint32_t first)
{
    uint32_t c = cap ? cap : first;
    while (c < n)
        c *= 2;
    return c;
}

/* g's node, edge and value arrays (which memo_keep handed over from an
 * entry: none while the memo fills) made as large as the builder's
 * doubling makes them for the graph just kept, k: fresh blocks, not
 * realloc's copy of each smaller block on the way (g is reset, their
 * contents are let go).  Filling the memo, a scorer's graph grew from
 * nothing ~19 times a search, realloc copying ~250 MB per 3 searches of
 * T32 (200 episodes, 1 thread).  Out of memory: a group's arrays are
 * freed, its capacity 0 (the builder grows them again). */
#define FRESH(a) (ap_free(a), (a) = ap_malloc((size_t)c * sizeof *(a) + 1), ok = ok && (a) != NULL)
#define NONE(a) (ap_free(a), (a) = NULL)
static void presize_like(cost_graph *g, const cost_graph *k)
{
    uint32_t c = doubled(g->cap_nodes, k->n_nodes, 256);
    bool ok = true;
    if (k->n_nodes && c > g->cap_nodes) {
        FRESH(g->nodes);
        g->cap_nodes = ok ? c : 0;
    }
    c = doubled(g->cap_edges, k->n_edges, 1024);
    if (k->n_edges && c > g->cap_edges) {
        ok = true;
        FRESH(g->e_val);
        FRESH(g->e_read);
        FRESH(g->e_feeds);
        if (!ok) {
            NONE(g->e_val);
            NONE(g->e_read);
            NONE(g->e_feeds);
        }
        g->cap_edges = ok ? c : 0;
    }
    c = doubled(g->cap_vals, k->n_vals, 1024);
    if (k->n_vals && c > g->cap_vals) {
        ok = true;
        FRESH(g->v_bytes);
        FRESH(g->v_def);
        FRESH(g->v_root);
        FRESH(g->v_what);
        FRESH(g->v_dims);
        FRESH(g->v_in);
        FRESH(g->v_name);
        FRESH(g->v_gate);
        if (!ok) {
            NONE(g->v_bytes);
            NONE(g->v_def);
            NONE(g->v_root);
            NONE(g->v_what);
            NONE(g->v_dims);
            NONE(g->v_in);
            NONE(g->v_name);
            NONE(g->v_gate);
        }
        g->cap_vals = ok ? c : 0;
    }
}
#undef FRESH
#undef NONE

/* Remembers the run of g just made into p (empty before it), in the
 * entry used longest ago that no find has pinned: g's arrays become the
 * entry's key (no copy), g gets the entry's old ones and is reset.
 * Nothing kept when out of memory, or when every entry is in use. */
static void memo_keep(cost_graph *g, const cost_program *p, double mult, const cost_peak_info *peak,
                      const int64_t *peak_bytes)
{
    gmemos *m = g->memos;
    if (!m) {
        if (!(m = memo_new(g)))
            return;
        g->memos = m;
    }
    pthread_mutex_lock(&m->mu);
    /* with memo bytes, the entries whose keys fit in them (at least
     * MEMO_MIN, at most m->n); those beyond are let go */
    uint32_t lim = m->n;
    if (m->bytes) {
        size_t fit = m->bytes / (graph_bytes(g) + 1);
        uint32_t least = m->n < MEMO_MIN ? m->n : MEMO_MIN;
        lim = fit < least ? least : fit < m->n ? (uint32_t)fit : m->n;
        for (uint32_t i = lim; i < m->n; i++)
            if (m->e[i].used && !m->e[i].pins && !m->e[i].filling)
                memo_entry_free(&m->e[i]);
    }
    gmemo *e = NULL;
    for (uint32_t i = 0; i < lim; i++) {
        gmemo *c = &m->e[i];
        if (!c->pins && !c->filling && (!e || c->used < e->used))
            e = c;
    }
    if (!e) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    e->used = 0; /* empty until complete */
    e->filling = true;
    pthread_mutex_unlock(&m->mu);
    cost_graph *k = &e->key;
    const gs *s = g->scratch;
    bool ok = !(s->fed && g->n_vals > k->cap_feeds) || REALLOC(k->v_feeds, g->n_vals);
    if (ok && s->fed && g->n_vals > k->cap_feeds)
        k->cap_feeds = g->n_vals;
    ok = ok && cost__program_copy(&e->out, p);
    if (ok) {
        if (s->fed && g->n_vals)
            memcpy(k->v_feeds, g->v_feeds, g->n_vals);
        SWAP(k->nodes, g->nodes);
        SWAP(k->cap_nodes, g->cap_nodes);
        SWAP(k->e_val, g->e_val);
        SWAP(k->e_read, g->e_read);
        SWAP(k->e_feeds, g->e_feeds);
        SWAP(k->cap_edges, g->cap_edges);
        SWAP(k->v_bytes, g->v_bytes);
        SWAP(k->v_def, g->v_def);
        SWAP(k->v_root, g->v_root);
        SWAP(k->v_what, g->v_what);
        SWAP(k->v_dims, g->v_dims);
        SWAP(k->v_in, g->v_in);
        SWAP(k->v_name, g->v_name);
        SWAP(k->v_gate, g->v_gate);
        SWAP(k->cap_vals, g->cap_vals);
        SWAP(k->colls, g->colls);
        SWAP(k->cap_colls, g->cap_colls);
        SWAP(k->peaks, g->peaks);
        SWAP(k->cap_peaks, g->cap_peaks);
        SWAP(k->kids, g->kids);
        SWAP(k->cap_kids, g->cap_kids);
        SWAP(k->out_alias, g->out_alias);
        SWAP(k->cap_out, g->cap_out);
        k->n_nodes = g->n_nodes;
        k->n_edges = g->n_edges;
        k->n_vals = g->n_vals;
        k->n_colls = g->n_colls;
        k->n_peaks = g->n_peaks;
        k->n_kids = g->n_kids;
        k->eager = g->eager;
        k->every_order = g->every_order;
        k->peak_enough = g->peak_enough;
        k->outs_held = g->outs_held;
        e->mult = mult;
        e->want_peak = peak != NULL;
        e->want_bytes = peak_bytes != NULL;
        if (peak)
            e->peak = *peak;
        e->peak_bytes = peak_bytes ? *peak_bytes : 0;
        e->fed = s->fed;
    }
    pthread_mutex_lock(&m->mu);
    e->filling = false;
    if (ok)
        e->used = ++m->tick;
    pthread_mutex_unlock(&m->mu);
    if (ok) {
        presize_like(g, k);
        cost__graph_reset(g);
    }
}
#undef SWAP

/* The remembered run of a graph equal to g, pinned (memo_done lets it
 * go), or NULL.  The first equal entry in the memo's order, as one
 * thread alone would find it. */
static gmemo *memo_find(const cost_graph *g, double mult, bool want_peak, bool want_bytes)
{
    gmemos *m = g->memos;
    if (!m)
        return NULL;
    uint8_t cand[256]; /* m->n <= 255 (cost_graph.memo) */
    uint32_t n_cand = 0;
    pthread_mutex_lock(&m->mu);
    for (uint32_t i = 0; i < m->n; i++)
        if (m->e[i].used && memo_same_head(&m->e[i], g, mult, want_peak, want_bytes)) {
            m->e[i].pins++;
            cand[n_cand++] = (uint8_t)i;
        }
    pthread_mutex_unlock(&m->mu);
    if (!n_cand)
        return NULL;
    gmemo *hit = NULL;
    for (uint32_t c = 0; c < n_cand && !hit; c++)
        if (memo_same(&m->e[cand[c]], g, want_peak))
            hit = &m->e[cand[c]];
    pthread_mutex_lock(&m->mu);
    for (uint32_t c = 0; c < n_cand; c++)
        if (&m->e[cand[c]] != hit)
            m->e[cand[c]].pins--;
    pthread_mutex_unlock(&m->mu);
    return hit;
}

/* Lets go of a hit of memo_find, now the last used. */
static void memo_done(cost_graph *g, gmemo *e)
{
    gmemos *m = g->memos;
    pthread_mutex_lock(&m->mu);
    e->used = ++m->tick;
    e->pins--;
    pthread_mutex_unlock(&m->mu);
}

int cost__graph_run(cost_graph *g, cost_program *p, double mult, cost_peak_info *peak, int64_t *peak_bytes,
                    ap_error *err)
{
    bool memo = g->memo && !g->oom && cost__program_empty(p);
    gmemo *e = memo ? memo_find(g, mult, peak != NULL, peak_bytes != NULL) : NULL;
    if (e) {
        bool ok = true;
        if (e->fed && g->cap_feeds < g->n_vals) {
            ok = REALLOC(g->v_feeds, g->n_vals);
            if (ok)
                g->cap_feeds = g->n_vals;
        }
        ok = ok && cost__program_copy(p, &e->out);
        if (ok) {
            if (e->fed && g->n_vals)
                memcpy(g->v_feeds, e->key.v_feeds, g->n_vals);
            if (peak)
                *peak = e->peak;
            if (peak_bytes)
                *peak_bytes = e->peak_bytes;
        }
        memo_done(g, e);
        if (!ok)
            return ap_error_set(err, AP_ENOMEM, "out of memory in the cost model");
        g->memo_hits++;
        cost__graph_reset(g);
        return 0;
    }
    int rc = graph_run(g, p, mult, peak, peak_bytes, err);
    if (rc == 0 && memo)
        memo_keep(g, p, mult, peak, peak_bytes);
    return rc;
}
