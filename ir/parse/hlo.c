/*
 * hlo.c - the XLA HLO text format (`HloModule`, computations,
 * instructions) turned into the same IR the StableHLO parser builds, so a
 * module read from HLO prints as StableHLO text that parses back equal.
 *
 * How HLO maps onto StableHLO (the decisions, in one place):
 *  - the module: sym_name = the HloModule name; num_partitions=N and
 *    replica_count=N become mhlo.num_partitions / mhlo.num_replicas (i32),
 *    frontend_attributes a dict of strings mhlo.frontend_attributes, other
 *    header attributes with a one-token value a string `hlo.KEY`; braced
 *    ones (layouts, ...) are dropped, except input_output_alias: a whole
 *    parameter aliased to a top-level output gives the entry's argument
 *    `tf.aliasing_output = OUTPUT` (donation, as JAX writes it).  Text without
 *    the header (as XLA's tests write it) is a module named module_ENTRY.
 *    The stack frame tables after the header (FileNames ... StackFrames)
 *    give each instruction's stack_frame_id=N its call stack as a location.
 *  - ENTRY (else, as in XLA, the last computation) becomes
 *    `func.func public @main` (attribute hlo.computation_name
 *    holds its HLO name), parameters its arguments in parameter-number
 *    order with `mhlo.sharding` / `mhlo.frontend_attributes` argument
 *    attributes; a tuple ROOT is returned as several results (the ROOT's
 *    tuple sharding split per result).  `call` becomes func.call of a
 *    private func.func per called computation.
 *  - to_apply / condition / body / branch computations are cloned into the
 *    op's regions (the last use takes the parsed body itself): block
 *    arguments are the parameters, ROOT becomes stablehlo.return.
 *    Conditional branches take no block arguments: the branch operand is
 *    used in place of the parameter (StableHLO's if/case capture values).
 *  - tuple-shaped results of ops StableHLO makes variadic (reduce, sort,
 *    reduce-window, scatter, all-reduce, all-gather, reduce-scatter,
 *    conditional, call, custom-call, batch-norm-training/grad,
 *    rng-bit-generator, opt-barrier) become several results.  A
 *    get-tuple-element of such an instruction is not an op: it names the
 *    result directly.  Any other use of the whole tuple gets one
 *    stablehlo.tuple, made right after the op.  A ROOT `tuple` whose
 *    elements are returned separately (regions, functions) is not built.
 *    while keeps its single tuple operand and result.
 *  - unknown opcodes (fusion, async and other post-optimization ops)
 *    become unregistered ops `hlo.OPCODE` with their attributes as
 *    strings, so a computation they name (calls=) is not kept; attributes
 *    of known opcodes that have no StableHLO meaning become strings
 *    `hlo.KEY`; layouts, operand_layout_constraints and
 *    control-predecessors are dropped.
 *  - a bounded dimension `<=N` becomes a dynamic one `?` whose bound N is
 *    kept in the tensor's encoding: s32[2,<=2] is
 *    tensor<2x?xi32, #stablehlo.bounds<?, 2>>, as XLA's importer writes it.
 *  - a buffer shape b(f32[2,4]) becomes memref<2x4xf32> (an opaque type),
 *    as XLA's importer writes it (without the layout, like every shape).
 *  - replica groups in every form XLA prints ({{..}}, [G,S]<=[..]T(..),
 *    mesh[..] {axes}) become the dense table of device ids.
 *  - locations: NAME(op_name)(FILE(source_file:source_line:source_column))
 *    from metadata, else NAME(instruction name).
 */
#include "parse_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define HLO_MAX_DEPTH 64    /* nesting of shapes, literals and computations */
#define HLO_MAX_ATTRS 64    /* attributes of one instruction */
#define HLO_OPS_PER_INST 8  /* budget of ops made per instruction parsed ... */
#define HLO_OPS_SLACK 100000 /* ... plus this, against exponential cloning */

/* ================================================================ state */

/* A string-keyed open-addressing table (computations, opcodes, metadata
 * texts) whose keys point into the input or the module; s == NULL is an
 * empty slot. */
typedef struct hent {
    const char *s;
    uint32_t len, val;
    uint64_t h;
} hent;

typedef struct htab {
    hent *e;
    uint32_t cap, n;
} htab;

/* An entry of the instruction name table: an index into p->insts and the
 * hash of its name; idx SLOT_FREE marks a free entry. */
typedef struct islot {
    uint32_t idx, hash;
} islot;

#define SLOT_FREE UINT32_MAX

/* An instruction of the computation being parsed. */
typedef struct hinst {
    const ir_type *type; /* its HLO shape */
    ir_value *v;         /* its value; NULL for a `multi` without a tuple yet */
    ir_op *multi;        /* variadic op whose results are the tuple elements */
    const char *name;    /* in the input, without '%' */
    uint32_t len, uses;
    uint32_t slot;       /* its entry in p->inst_slots */
    bool is_tuple;       /* a `tuple` instruction (v->def is the tuple op) */
} hinst;

/* A parsed computation: its body is a detached block (the template) that
 * uses clone or take. */
typedef struct hcomp {
    const char *name; /* interned, without '%' */
    const char *at;
    ir_block *body;
    uint32_t n_params;
    const ir_type **param_types;
    ir_attr **param_attrs;      /* dict per parameter or NULL */
    const ir_type *root_type;
    ir_value *root_v;           /* ROOT's value (NULL when a multi without tuple) */
    ir_op *root_multi;          /* ROOT is a variadic op */
    ir_op *root_tuple;          /* ROOT is an otherwise unused `tuple` op */
    const ir_loc *root_loc;
    uint32_t root_line, root_col;
    const char *root_sharding;  /* ROOT's sharding text (for @main) */
    uint32_t root_sharding_len;
    uint32_t refs, left;        /* fills naming it: all, not yet done */
    int depth;                  /* region nesting below it */
    ir_op *func;                /* its func.func once called */
    uint32_t n_flat;            /* results as a function / flattened */
    const ir_type **flat;
} hcomp;

enum { FILL_FLAT, FILL_TUPLE, FILL_FUNC };

/* A region (or function body) to fill from a computation once all
 * computations are parsed and every one's number of uses is known. */
typedef struct hfill {
    ir_op *op;
    uint32_t region, comp;
    uint8_t mode;
    ir_value *subst; /* conditional branches: the operand for parameter 0 */
} hfill;

/* One `key=value` attribute of an instruction, as spans of the input. */
typedef struct hattr {
    const char *key, *val;
    uint32_t klen, vlen;
    bool used;
} hattr;

/* A growable list of integers, reused. */
typedef struct ivec {
    int64_t *v;
    uint32_t n, cap;
} ivec;

/* Interned attribute names: a small cache keyed by the literal's address,
 * so building an op interns nothing. */
typedef struct hname {
    const char *lit, *interned;
} hname;

#define HLO_NAME_CACHE 256

/* Attributes of the op being built. */
typedef struct hbuild {
    ir_named_attr na[2 * HLO_MAX_ATTRS + 8];
    uint32_t n;
} hbuild;

typedef struct hp {
    ir_module *m;
    const char *src, *p, *end;
    const char *fname;
    ir_lexer lx; /* line/column bookkeeping only */
    ap_error *err;
    bool failed;
    int depth;
    /* computations */
    hcomp *comps;
    uint32_t n_comps, cap_comps;
    htab comp_tab;
    int32_t entry;
    /* the computation being parsed */
    hinst *insts;
    uint32_t n_insts, cap_insts;
    islot *inst_slots; /* names of insts: see inst_find */
    uint32_t cap_slots;
    ir_block *block;
    ir_value *params;          /* the block's arguments being collected */
    uint32_t n_params, cap_params;
    bool have_sig;
    /* instruction scratch */
    uint32_t *opnds;
    uint32_t n_opnds, cap_opnds;
    hattr attrs[HLO_MAX_ATTRS];
    uint32_t n_attrs;
    char *sbuf; /* unescaped strings */
    uint32_t cap_sbuf;
    /* deferred region fills, functions in order of creation */
    hfill *fills;
    uint32_t n_fills, cap_fills;
    ir_op **funcs;
    uint32_t n_funcs, cap_funcs;
    /* metadata text -> location */
    htab loc_tab;
    const ir_loc **locs;
    uint32_t n_locs, cap_locs;
    /* cloning */
    const ir_value **vm_from;
    ir_value **vm_to;
    uint32_t n_vm, cap_vm, cap_vm2;
    uint64_t n_ops, max_ops, n_insts_total;
    /* the instruction being built */
    const ir_loc *cur_loc;
    const char *cur_at; /* its opcode */
    uint32_t cur_line, cur_col;
    int cur_depth;
    ir_value **vals;
    uint32_t cap_vals;
    ivec iv, iv2;
    /* input_output_alias of the header: entry parameter -> output index */
    struct hio {
        uint32_t param, output;
        const char *at; /* the entry's text, for errors */
    } *io_alias;
    uint32_t n_io_alias;
    /* parameters of the computation being parsed */
    bool *param_def;
    ir_attr **param_attrs;
    uint32_t cap_pmeta;
    const ir_type **sig;
    uint32_t n_sig, cap_sig;
    htab op_tab;
    hname names[HLO_NAME_CACHE];
    hbuild bld;
    int code;
    /* the stack frame index newer XLA prints after the header (ids are
     * 1-based in the text; entries here are 0-based) */
    const char **file_names, **func_names;
    uint32_t n_file_names, n_func_names, cap_file_names, cap_func_names;
    struct hfileloc {
        int64_t file, func, line, col;
    } *file_locs;
    uint32_t n_file_locs, cap_file_locs;
    struct hframe {
        int64_t file_loc, parent; /* parent: 1-based frame id, 0 for none */
        const ir_loc *loc;        /* built on first use */
    } *frames;
    uint32_t n_frames, cap_frames;
} hp;

/* Grows an array to hold at least `need` elements (doubling). */
#define GROW(p, arr, cap, need) \
    ((need) <= (cap) || grow_array((p), (void **)&(arr), &(cap), (need), sizeof *(arr)))

/* ============================================================== errors */

static bool perr(hp *p, const char *at, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Records the first error at `at` ("FILE:LINE:COL: error: ..."); always
 * returns false so callers can `return perr(...)`. */
static bool perr(hp *p, const char *at, int code, const char *fmt, ...)
{
    if (p->failed)
        return false;
    p->failed = true;
    p->code = code;
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 0, col = 0;
    if (!at || at > p->lx.end)
        at = p->lx.end;
    ir__lex_pos(&p->lx, at, &line, &col);
    ap_error_at(p->err, code, p->fname, line, col, "%s", msg);
    return false;
}

static bool oom(hp *p) { return perr(p, p->p, AP_ENOMEM, "out of memory"); }

/* Grows *arr (elem bytes each) to hold `need`, doubling; false (and the
 * error set) when out of memory, *arr unchanged. */
static bool grow_array(hp *p, void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
    uint32_t c = *cap ? *cap : 8;
    while (c < need) {
        if (c > UINT32_MAX / 2)
            return oom(p);
        c *= 2;
    }
    void *n = ap_realloc(*arr, elem * c);
    if (!n)
        return oom(p);
    *arr = n;
    *cap = c;
    return true;
}

/* ========================================================== name tables */

static uint64_t hash_name(const char *s, uint32_t len) { return ap_hash_bytes(s, len, 0x484c4f); }

/* The entry for key: a live one, or the empty slot where it would go. */
static hent *htab_slot(htab *t, const char *s, uint32_t len, uint64_t h)
{
    uint32_t mask = t->cap - 1, j = (uint32_t)h & mask;
    for (;;) {
        hent *e = &t->e[j];
        if (!e->s || (e->h == h && e->len == len && memcmp(e->s, s, len) == 0))
            return e;
        j = (j + 1) & mask;
    }
}

static hent *htab_get(htab *t, const char *s, uint32_t len)
{
    if (!t->cap)
        return NULL;
    hent *e = htab_slot(t, s, len, hash_name(s, len));
    return e->s ? e : NULL;
}

/* Inserts key -> val; the key must not be in the table. */
static bool htab_put(hp *p, htab *t, const char *s, uint32_t len, uint32_t val)
{
    if ((t->n + 1) * 2 > t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        hent *e = ap_calloc(cap, sizeof *e);
        if (!e)
            return oom(p);
        htab old = *t;
        t->e = e;
        t->cap = cap;
        for (uint32_t i = 0; i < old.cap; i++)
            if (old.e[i].s)
                *htab_slot(t, old.e[i].s, old.e[i].len, old.e[i].h) = old.e[i];
        ap_free(old.e);
    }
    uint64_t h = hash_name(s, len);
    *htab_slot(t, s, len, h) = (hent){s, len, val, h};
    t->n++;
    return true;
}

/*
 * The instructions of the computation being parsed, by name: open
 * addressing over 8-byte entries (an index into p->insts, where the name
 * is, and the name's hash), so that a table sized for the largest
 * computation costs little and a probe touches one cache line.  Each
 * instruction records its entry, so starting the next computation frees
 * just the entries in use.
 */
static uint32_t inst_slot(const hp *p, const char *s, uint32_t len, uint32_t h)
{
    uint32_t mask = p->cap_slots - 1;
    for (uint32_t j = h & mask;; j = (j + 1) & mask) {
        const islot *e = &p->inst_slots[j];
        if (e->idx == SLOT_FREE)
            return j;
        if (e->hash == h && p->insts[e->idx].len == len && memcmp(p->insts[e->idx].name, s, len) == 0)
            return j;
    }
}

/* The index of the instruction named s, or -1.  The instruction being
 * parsed is entered but not counted yet: an operand naming it is not found. */
static int64_t inst_find(const hp *p, const char *s, uint32_t len)
{
    if (!p->cap_slots)
        return -1;
    const islot *e = &p->inst_slots[inst_slot(p, s, len, (uint32_t)hash_name(s, len))];
    return e->idx < p->n_insts ? (int64_t)e->idx : -1;
}

static void slots_free(islot *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        v[i].idx = SLOT_FREE;
}

/* Enters insts[n_insts] (name and len set; the name not in the table). */
static bool inst_enter(hp *p)
{
    if ((uint64_t)(p->n_insts + 1) * 4 > (uint64_t)p->cap_slots * 3) {
        uint32_t cap = p->cap_slots ? p->cap_slots * 2 : 256;
        islot *v = ap_malloc(sizeof *v * cap), *old = p->inst_slots;
        if (!v)
            return oom(p);
        slots_free(v, cap);
        for (uint32_t j = 0; j < p->cap_slots; j++) {
            if (old[j].idx == SLOT_FREE)
                continue;
            uint32_t k = old[j].hash & (cap - 1);
            while (v[k].idx != SLOT_FREE)
                k = (k + 1) & (cap - 1);
            v[k] = old[j];
            p->insts[old[j].idx].slot = k;
        }
        ap_free(old);
        p->inst_slots = v;
        p->cap_slots = cap;
    }
    hinst *h = &p->insts[p->n_insts];
    uint32_t hash = (uint32_t)hash_name(h->name, h->len);
    h->slot = inst_slot(p, h->name, h->len, hash);
    p->inst_slots[h->slot] = (islot){p->n_insts, hash};
    return true;
}

/* Empties the table for the next computation. */
static void insts_clear(hp *p)
{
    for (uint32_t i = 0; i < p->n_insts; i++)
        p->inst_slots[p->insts[i].slot].idx = SLOT_FREE;
    p->n_insts = 0;
}

/* ============================================================== lexing */

static bool at_end(hp *p) { return p->p >= p->end; }

/* Is q the first character of its line but for blanks? */
static bool at_line_start(const char *src, const char *q)
{
    while (q > src && (q[-1] == ' ' || q[-1] == '\t'))
        q--;
    return q == src || q[-1] == '\n';
}

/* Skips white space and comments (slash-star, slash-slash, and lines
 * starting with '#'). */
static void skip_ws(hp *p)
{
    const char *q = p->p, *end = p->end;
    while (q < end) {
        char c = *q;
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            q++;
        } else if (c == '/' && q + 1 < end && q[1] == '*') {
            const char *e = q + 2;
            while (e + 1 < end && !(e[0] == '*' && e[1] == '/'))
                e++;
            q = e + 1 < end ? e + 2 : end;
        } else if ((c == '/' && q + 1 < end && q[1] == '/') || (c == '#' && at_line_start(p->src, q))) {
            /* `# RUN: ...` lines of lit tests lead many HLO files */
            const char *nl = memchr(q, '\n', (size_t)(end - q));
            q = nl ? nl + 1 : end;
        } else {
            break;
        }
    }
    p->p = q;
}

static char peek(hp *p)
{
    skip_ws(p);
    return p->p < p->end ? *p->p : '\0';
}

static bool accept(hp *p, char c)
{
    if (peek(p) != c)
        return false;
    p->p++;
    return true;
}

/* What is at the cursor, for "expected X, found Y" messages. */
static bool expected(hp *p, const char *what)
{
    skip_ws(p);
    if (at_end(p))
        return perr(p, p->p, AP_ESYNTAX, "expected %s, found the end of the input", what);
    const char *q = p->p;
    int n = 0;
    while (q + n < p->end && n < 24 && q[n] != '\n' && q[n] != ' ' && (n == 0 || q[n] != ','))
        n++;
    return perr(p, q, AP_ESYNTAX, "expected %s, found '%.*s'", what, n, q);
}

static bool expect(hp *p, char c, const char *what)
{
    return accept(p, c) || expected(p, what);
}

/* Is [k, k+kl) the text of the NUL-terminated lit?  (No strlen: this runs
 * for every attribute against tables of keys.) */
static bool text_is(const char *k, uint32_t kl, const char *lit)
{
    return strncmp(lit, k, kl) == 0 && lit[kl] == '\0';
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

/* name ::= '%'? [A-Za-z0-9_.-]+ ; the '%' is not part of the name.  A
 * name does not end in '-' before '>' (`->`). */
static bool lex_name(hp *p, const char **s, uint32_t *len)
{
    skip_ws(p);
    const char *q = p->p;
    if (q < p->end && *q == '%')
        q++;
    const char *start = q;
    while (q < p->end && is_name_char(*q) && !(*q == '-' && q + 1 < p->end && q[1] == '>'))
        q++;
    if (q == start)
        return false;
    *s = start;
    *len = (uint32_t)(q - start);
    p->p = q;
    return true;
}

static bool expect_name(hp *p, const char **s, uint32_t *len, const char *what)
{
    return lex_name(p, s, len) || expected(p, what);
}

/* Is the bare word `w` at the cursor (not followed by a name char)? */
static bool is_word(hp *p, const char *w)
{
    skip_ws(p);
    size_t n = strlen(w);
    return (size_t)(p->end - p->p) >= n && memcmp(p->p, w, n) == 0 &&
           (p->p + n == p->end || !is_name_char(p->p[n]));
}

static bool accept_word(hp *p, const char *w)
{
    if (!is_word(p, w))
        return false;
    p->p += strlen(w);
    return true;
}

/* int ::= '-'? digits */
static bool lex_int(hp *p, int64_t *out)
{
    skip_ws(p);
    const char *q = p->p, *start = q;
    bool neg = q < p->end && *q == '-';
    if (neg)
        q++;
    if (q >= p->end || *q < '0' || *q > '9')
        return expected(p, "an integer");
    uint64_t v = 0;
    for (; q < p->end && *q >= '0' && *q <= '9'; q++) {
        if (v > (UINT64_MAX - 9) / 10)
            return perr(p, start, AP_ESYNTAX, "integer out of range");
        v = v * 10 + (uint64_t)(*q - '0');
    }
    if (v > (uint64_t)INT64_MAX + neg)
        return perr(p, start, AP_ESYNTAX, "integer out of range");
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    p->p = q;
    return true;
}

/* string ::= '"' chars '"' with C escapes; the unescaped bytes go to
 * p->sbuf (NUL-terminated; a NUL inside is an error). */
static bool lex_string(hp *p, const char **out, size_t *out_len)
{
    skip_ws(p);
    const char *start = p->p;
    if (at_end(p) || *p->p != '"')
        return expected(p, "a string");
    const char *q = p->p + 1;
    size_t n = 0;
    if (!GROW(p, p->sbuf, p->cap_sbuf, 64))
        return false;
    for (;;) {
        if (q >= p->end)
            return perr(p, start, AP_ESYNTAX, "unterminated string");
        char c = *q++;
        if (c == '"')
            break;
        if (n + 2 > p->cap_sbuf && (n + 2 > UINT32_MAX || !GROW(p, p->sbuf, p->cap_sbuf, (uint32_t)n + 2)))
            return oom(p);
        if (c != '\\') {
            p->sbuf[n++] = c;
            continue;
        }
        if (q >= p->end)
            return perr(p, start, AP_ESYNTAX, "unterminated string");
        c = *q++;
        int v = -1;
        switch (c) {
        case 'n': v = '\n'; break;
        case 't': v = '\t'; break;
        case 'r': v = '\r'; break;
        case 'a': v = '\a'; break;
        case 'b': v = '\b'; break;
        case 'f': v = '\f'; break;
        case 'v': v = '\v'; break;
        case '\\': case '"': case '\'': case '?': v = c; break;
        case 'x':
            v = 0;
            for (int k = 0; k < 2 && q < p->end && isxdigit((unsigned char)*q); k++, q++)
                v = v * 16 + (isdigit((unsigned char)*q) ? *q - '0' : (tolower((unsigned char)*q) - 'a' + 10));
            break;
        default:
            if (c >= '0' && c <= '7') {
                v = c - '0';
                for (int k = 0; k < 2 && q < p->end && *q >= '0' && *q <= '7'; k++, q++)
                    v = v * 8 + (*q - '0');
                v &= 0xff;
            }
            break;
        }
        if (v < 0)
            return perr(p, q - 2, AP_ESYNTAX, "invalid escape '\\%c' in string", c);
        if (v == 0)
            return perr(p, q - 2, AP_ESYNTAX, "string contains a NUL byte");
        p->sbuf[n++] = (char)v;
    }
    p->sbuf[n] = '\0';
    p->p = q;
    *out = p->sbuf;
    *out_len = n;
    return true;
}

/* ============================================================== shapes */

/* HLO element type names (the length first, so a lookup per shape
 * compares lengths before any text). */
#define ELEM(name, e) {sizeof name - 1, name, IR_E_##e}
static const struct {
    uint32_t len;
    const char *name;
    ir_elem elem;
} elem_names[] = {
    ELEM("pred", I1),          ELEM("s2", I2),           ELEM("s4", I4),
    ELEM("s8", I8),            ELEM("s16", I16),         ELEM("s32", I32),
    ELEM("s64", I64),          ELEM("u2", UI2),          ELEM("u4", UI4),
    ELEM("u8", UI8),           ELEM("u16", UI16),        ELEM("u32", UI32),
    ELEM("u64", UI64),         ELEM("f16", F16),         ELEM("bf16", BF16),
    ELEM("f32", F32),          ELEM("f64", F64),         ELEM("c64", C64),
    ELEM("c128", C128),        ELEM("f8e5m2", F8E5M2),   ELEM("f8e4m3fn", F8E4M3FN),
    ELEM("f8e4m3b11fnuz", F8E4M3B11FNUZ),                ELEM("f8e5m2fnuz", F8E5M2FNUZ),
    ELEM("f8e4m3fnuz", F8E4M3FNUZ), ELEM("f8e4m3", F8E4M3), ELEM("f8e3m4", F8E3M4),
    ELEM("f8e8m0fnu", F8E8M0FNU), ELEM("f4e2m1fn", F4E2M1FN), ELEM("f6e2m3fn", F6E2M3FN),
    ELEM("f6e3m2fn", F6E3M2FN),
};
#undef ELEM

/* Skips a balanced (), [] or {} group starting at the cursor; strings
 * inside are skipped whole.  Returns false at the end of the input. */
static bool skip_group(hp *p)
{
    const char *q = p->p, *start = q;
    int depth = 0;
    while (q < p->end) {
        char c = *q++;
        if (c == '"') {
            while (q < p->end && *q != '"')
                q += *q == '\\' ? 2 : 1;
            if (q >= p->end)
                break;
            q++;
        } else if (c == '{' || c == '[' || c == '(') {
            depth++;
        } else if (c == '}' || c == ']' || c == ')') {
            if (--depth == 0) {
                p->p = q;
                return true;
            }
        }
    }
    return perr(p, start, AP_ESYNTAX, "unterminated '%c'", *start);
}

/* shape ::= '(' (shape (',' shape)*)? ')' | elem '[' dims ']' layout?
 * dims ::= (dim (',' dim)*)? ; dim ::= int | '?' | '<=' int */
static bool parse_shape(hp *p, const ir_type **out)
{
    ir_module *m = p->m;
    if (accept(p, '(')) {
        if (++p->depth > HLO_MAX_DEPTH)
            return perr(p, p->p, AP_ELIMIT, "shapes nested too deeply");
        const ir_type *small[16], **elems = small;
        uint32_t n = 0, cap = 16;
        bool ok = true;
        if (peek(p) != ')') {
            for (;;) {
                const ir_type *t;
                if (!(ok = parse_shape(p, &t)))
                    break;
                if (n == cap) {
                    const ir_type **ne = ap_malloc(sizeof *ne * cap * 2);
                    if (!ne) {
                        ok = oom(p);
                        break;
                    }
                    memcpy(ne, elems, sizeof *ne * n);
                    if (elems != small)
                        ap_free(elems);
                    elems = ne;
                    cap *= 2;
                }
                elems[n++] = t;
                if (!accept(p, ','))
                    break;
            }
        }
        ok = ok && expect(p, ')', "',' or ')' in a tuple shape");
        if (ok && !(*out = ir_type_tuple(m, (int)n, elems)))
            ok = oom(p);
        if (elems != small)
            ap_free(elems);
        p->depth--;
        return ok;
    }
    const char *s;
    uint32_t len;
    const char *at = (skip_ws(p), p->p);
    if (!lex_name(p, &s, &len))
        return expected(p, "a shape");
    if (len == 1 && s[0] == 'b' && p->p < p->end && *p->p == '(') {
        /* shape ::= 'b(' shape ')': a buffer of an array shape, which
         * XLA's importer writes as a memref (kept as an opaque type) */
        p->p++;
        if (++p->depth > HLO_MAX_DEPTH)
            return perr(p, p->p, AP_ELIMIT, "shapes nested too deeply");
        const ir_type *inner;
        bool ok = parse_shape(p, &inner) && expect(p, ')', "')' to close the buffer shape");
        p->depth--;
        if (!ok)
            return false;
        if (inner->kind != IR_T_TENSOR)
            return perr(p, at, AP_ESYNTAX, "a buffer shape holds an array shape");
        if (!ir_type_is_static(inner))
            return perr(p, at, AP_EUNSUPPORTED, "a buffer of a dynamic shape has no memref type");
        ap_buf b;
        ap_buf_init(&b);
        ir_type_print(&b, inner);
        *out = NULL;
        if (!b.oom && b.len > 7 && memcmp(b.data, "tensor<", 7) == 0) {
            memcpy(b.data, "memref<", 7);
            *out = ir_type_opaque(m, b.data);
        }
        ap_buf_free(&b);
        return *out ? true : oom(p);
    }
    ir_elem e = IR_E_NONE;
    for (size_t i = 0; i < AP_ARRAY_LEN(elem_names) && e == IR_E_NONE; i++)
        if (elem_names[i].len == len && memcmp(elem_names[i].name, s, len) == 0)
            e = elem_names[i].elem;
    bool token = text_is(s, len, "token"), opaque = text_is(s, len, "opaque");
    if (e == IR_E_NONE && !token && !opaque)
        return perr(p, at, AP_ESYNTAX, "unknown element type '%.*s'", (int)len, s);
    if (at_end(p) || *p->p != '[')
        return expected(p, "'[' and the dimensions");
    p->p++;
    int64_t dims[IR_MAX_RANK], bounds[IR_MAX_RANK];
    int rank = 0;
    bool any_bound = false;
    if (peek(p) != ']') {
        for (;;) {
            if (rank == IR_MAX_RANK)
                return perr(p, p->p, AP_EUNSUPPORTED, "rank above %d", IR_MAX_RANK);
            int64_t d;
            bounds[rank] = -1;
            if (accept(p, '?')) {
                d = IR_DYN;
            } else {
                bool bounded = peek(p) == '<' && p->p + 1 < p->end && p->p[1] == '=';
                if (bounded)
                    p->p += 2;
                const char *dat = (skip_ws(p), p->p);
                if (dat == p->end || *dat < '0' || *dat > '9')
                    return expected(p, "a dimension size");
                if (!lex_int(p, &d))
                    return false;
                if (d > (INT64_C(1) << 48))
                    return perr(p, dat, AP_ESYNTAX, "dimension size %" PRId64 " out of range", d);
                if (bounded) { /* a dynamic size with a static upper bound */
                    bounds[rank] = d;
                    any_bound = true;
                    d = IR_DYN;
                }
            }
            dims[rank++] = d;
            if (!accept(p, ','))
                break;
        }
    }
    if (!expect(p, ']', "',' or ']' in the dimensions"))
        return false;
    if (p->p < p->end && *p->p == '{') { /* a layout: XLA writes it on one line, so a missing '}' shows there */
        const char *end = p->end, *nl = memchr(p->p, '\n', (size_t)(end - p->p));
        p->end = nl ? nl : end;
        bool ok = skip_group(p);
        p->end = end;
        if (!ok)
            return false;
    }
    if (token || opaque) {
        if (rank)
            return perr(p, at, AP_ESYNTAX, "%s has no dimensions", token ? "token" : "opaque");
        *out = token ? ir_type_token(m) : ir_type_opaque(m, "!hlo.opaque");
    } else if (any_bound) {
        /* StableHLO spells the bounds as the tensor's encoding */
        char enc[32 + IR_MAX_RANK * 22];
        int n = snprintf(enc, sizeof enc, "#stablehlo.bounds<");
        for (int i = 0; i < rank; i++) {
            if (bounds[i] < 0)
                n += snprintf(enc + n, sizeof enc - (size_t)n, "%s?", i ? ", " : "");
            else
                n += snprintf(enc + n, sizeof enc - (size_t)n, "%s%" PRId64, i ? ", " : "", bounds[i]);
        }
        snprintf(enc + n, sizeof enc - (size_t)n, ">");
        *out = ir_type_tensor_ex(m, e, NULL, rank, dims, enc);
    } else {
        *out = ir_type_tensor(m, e, rank, dims);
    }
    return *out ? true : oom(p);
}

/* Is a shape at the cursor (an element type followed by '[', or '(')? */
static bool shape_ahead(hp *p)
{
    char c = peek(p);
    if (c == '(')
        return true;
    const char *q = p->p;
    if (p->end - q >= 2 && q[0] == 'b' && q[1] == '(') /* a buffer shape */
        return true;
    while (q < p->end && ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
        q++;
    return q > p->p && q < p->end && *q == '[';
}

/* ========================================================== attributes */

/* The end of the balanced group opening at q (its closing bracket + 1),
 * or NULL; quotes of both kinds are skipped. */
static const char *group_end(const char *q, const char *end)
{
    int depth = 0;
    for (; q < end; q++) {
        if (*q == '"' || *q == '\'') {
            char c = *q;
            for (q++; q < end && *q != c; q++)
                if (*q == '\\')
                    q++;
            if (q >= end)
                return NULL;
        } else if (*q == '{' || *q == '[' || *q == '(') {
            depth++;
        } else if (*q == '}' || *q == ']' || *q == ')') {
            if (--depth == 0)
                return q + 1;
        }
    }
    return NULL;
}

/* `mesh[..](, device_ids=(..))? {..}`: a replica group list holds a comma
 * and a space outside brackets, so it is captured by its own grammar. */
static bool capture_mesh(hp *p, const char **v, uint32_t *vlen)
{
    const char *start = p->p, *q = memchr(start, '[', (size_t)(p->end - start));
    if (!(q = group_end(q, p->end)))
        return perr(p, start, AP_ESYNTAX, "unterminated mesh in replica groups");
    const char *r = q;
    while (r < p->end && (*r == ' ' || *r == '\t'))
        r++;
    if (r < p->end && *r == ',') { /* , device_ids=(...) */
        const char *d = r + 1;
        while (d < p->end && (*d == ' ' || *d == '\t'))
            d++;
        if (p->end - d > 11 && memcmp(d, "device_ids=", 11) == 0) {
            if (!(q = (d[11] == '(' ? group_end(d + 11, p->end) : NULL)))
                return perr(p, d, AP_ESYNTAX, "expected device_ids=(...)");
            r = q;
            while (r < p->end && (*r == ' ' || *r == '\t'))
                r++;
        }
    }
    if (r < p->end && *r == '{') {
        if (!(q = group_end(r, p->end)))
            return perr(p, r, AP_ESYNTAX, "unterminated axes in replica groups");
    }
    *v = start;
    *vlen = (uint32_t)(q - start);
    p->p = q;
    return true;
}

/* Captures `value` of `key=value`: up to a ',' or white space outside
 * brackets and strings, or an unmatched closing bracket. */
static bool capture_value(hp *p, const char **v, uint32_t *vlen)
{
    skip_ws(p);
    const char *q = p->p, *start = q;
    int depth = 0;
    if ((p->end - q > 5 && memcmp(q, "mesh[", 5) == 0) || (p->end - q > 13 && memcmp(q, "maximal_mesh[", 13) == 0))
        return capture_mesh(p, v, vlen);
    while (q < p->end) {
        char c = *q;
        if (c == '"') {
            q++;
            while (q < p->end && *q != '"')
                q += *q == '\\' ? 2 : 1;
            if (q >= p->end)
                return perr(p, start, AP_ESYNTAX, "unterminated string");
        } else if (c == '{' || c == '[' || c == '(') {
            if (++depth > 4 * HLO_MAX_DEPTH)
                return perr(p, q, AP_ELIMIT, "attribute value nested too deeply");
        } else if (c == '}' || c == ']' || c == ')') {
            if (depth == 0)
                break;
            depth--;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) {
            break;
        }
        q++;
    }
    if (depth)
        return perr(p, start, AP_ESYNTAX, "unterminated '%c' in an attribute value", *start);
    if (q == start)
        return expected(p, "an attribute value");
    *v = start;
    *vlen = (uint32_t)(q - start);
    p->p = q;
    return true;
}

/* attrs ::= (',' key '=' value)* */
static bool parse_attr_list(hp *p)
{
    p->n_attrs = 0;
    while (accept(p, ',')) {
        hattr a = {0};
        if (!expect_name(p, &a.key, &a.klen, "an attribute name") || !expect(p, '=', "'=' after the attribute name") ||
            !capture_value(p, &a.val, &a.vlen))
            return false;
        if (p->n_attrs == HLO_MAX_ATTRS)
            return perr(p, a.key, AP_ELIMIT, "more than %d attributes", HLO_MAX_ATTRS);
        for (uint32_t j = 0; j < p->n_attrs; j++)
            if (p->attrs[j].klen == a.klen && memcmp(p->attrs[j].key, a.key, a.klen) == 0)
                return perr(p, a.key, AP_ESYNTAX, "duplicate attribute '%.*s'", (int)a.klen, a.key);
        p->attrs[p->n_attrs++] = a;
    }
    return true;
}

static hattr *find_attr(hp *p, const char *key)
{
    for (uint32_t i = 0; i < p->n_attrs; i++)
        if (text_is(p->attrs[i].key, p->attrs[i].klen, key))
            return &p->attrs[i];
    return NULL;
}

/* Reading an attribute value: the cursor moves into the value's span and
 * back out; the whole value must be consumed. */
typedef struct hsave {
    const char *p, *end;
} hsave;

static hsave enter_value(hp *p, hattr *a)
{
    hsave s = {p->p, p->end};
    p->p = a->val;
    p->end = a->val + a->vlen;
    a->used = true;
    return s;
}

static bool leave_value(hp *p, hsave s, bool ok)
{
    if (ok && peek(p))
        ok = perr(p, p->p, AP_ESYNTAX, "unexpected '%c' in an attribute value", *p->p);
    p->p = s.p;
    p->end = s.end;
    return ok;
}

static bool ivec_push(hp *p, ivec *iv, int64_t x)
{
    if (!GROW(p, iv->v, iv->cap, iv->n + 1))
        return false;
    iv->v[iv->n++] = x;
    return true;
}

/* ilist ::= '{' (int (',' int)*)? '}' | int */
static bool parse_ilist(hp *p, ivec *iv)
{
    iv->n = 0;
    if (!accept(p, '{')) {
        int64_t x;
        return lex_int(p, &x) && ivec_push(p, iv, x);
    }
    if (accept(p, '}'))
        return true;
    do {
        int64_t x;
        if (!lex_int(p, &x) || !ivec_push(p, iv, x))
            return false;
    } while (accept(p, ','));
    return expect(p, '}', "',' or '}' in a list of integers");
}

/* Integers separated by `sep` (7x7, 2_2): at most IR_MAX_RANK. */
static bool parse_sep_ints(hp *p, char sep, int64_t *v, int *n, int max)
{
    *n = 0;
    for (;;) {
        if (*n == max)
            return perr(p, p->p, AP_ELIMIT, "more than %d values", max);
        if (!lex_int(p, &v[(*n)++]))
            return false;
        if (p->p >= p->end || *p->p != sep)
            return true;
        p->p++;
    }
}

/* bool ::= true | false */
static bool parse_bool(hp *p, bool *out)
{
    *out = false;
    if (accept_word(p, "true"))
        *out = true;
    else if (accept_word(p, "false"))
        *out = false;
    else
        return expected(p, "true or false");
    return true;
}

/* The interned name for a string literal of this file, cached by the
 * literal's address so that building an op interns nothing; NULL when out
 * of memory. */
static const char *nm(hp *p, const char *lit)
{
    hname *cache = p->names;
    uint32_t j = (uint32_t)(((uintptr_t)lit >> 3) * 2654435761u) & (HLO_NAME_CACHE - 1), probes = 0;
    while (cache[j].lit && cache[j].lit != lit && ++probes < HLO_NAME_CACHE)
        j = (j + 1) & (HLO_NAME_CACHE - 1);
    if (probes == HLO_NAME_CACHE) /* full: cannot happen with this file's names */
        return ir_intern(p->m, lit, strlen(lit));
    if (!cache[j].lit) {
        const char *s = ir_intern(p->m, lit, strlen(lit));
        if (!s)
            return NULL;
        cache[j].lit = lit;
        cache[j].interned = s;
    }
    return cache[j].interned;
}

/* ============================================================ locations */

/* A location in the module's arena; NULL (error set) when out of memory. */
static ir_loc *loc_new(hp *p, ir_loc_kind kind, const char *str)
{
    ir_loc *l = ir__zalloc(p->m, sizeof *l);
    if (!l) {
        oom(p);
        return NULL;
    }
    l->kind = (uint8_t)kind;
    l->str = str;
    return l;
}

/* The location of stack frame `id` (1-based): NAME(function)(FILE(file:
 * line:col)) of the frame, called from its parent's location:
 * callsite(leaf at callsite(parent at ... root)). */
static const ir_loc *frame_loc(hp *p, int64_t id, const char *at)
{
    struct hframe *f = &p->frames[id - 1];
    if (f->loc)
        return f->loc;
    /* walk to the root (or a frame already built), then build inward */
    uint32_t depth = 0;
    int64_t cur = id;
    while (cur > 0 && !p->frames[cur - 1].loc) {
        if (++depth > p->n_frames)
            return perr(p, at, AP_ESYNTAX, "stack frame %" PRId64 ": its parents form a loop", id), NULL;
        cur = p->frames[cur - 1].parent;
    }
    const ir_loc *outer = cur > 0 ? p->frames[cur - 1].loc : NULL;
    /* frames from just below `cur` down to `id`, outermost first */
    int64_t *chain = ap_malloc(sizeof *chain * (depth ? depth : 1));
    if (!chain)
        return oom(p), NULL;
    uint32_t n = 0;
    for (int64_t c = id; c != cur; c = p->frames[c - 1].parent)
        chain[n++] = c;
    const ir_loc *l = outer;
    for (uint32_t i = n; i-- > 0;) {
        struct hframe *fr = &p->frames[chain[i] - 1];
        struct hfileloc *fl = &p->file_locs[fr->file_loc - 1];
        ir_loc *file = loc_new(p, IR_L_FILE, p->file_names[fl->file - 1]);
        ir_loc *named = file ? loc_new(p, IR_L_NAME, p->func_names[fl->func - 1]) : NULL;
        if (!named) {
            ap_free(chain);
            return NULL;
        }
        file->line = (int32_t)fl->line;
        file->col = (int32_t)fl->col;
        named->a = file;
        if (l) {
            ir_loc *cs = loc_new(p, IR_L_CALLSITE, NULL);
            if (!cs) {
                ap_free(chain);
                return NULL;
            }
            cs->a = named;
            cs->b = l;
            l = cs;
        } else {
            l = named;
        }
        fr->loc = l;
    }
    ap_free(chain);
    return l;
}

/* metadata ::= '{' (key '=' (string | int | word))* '}' -> NAME(op_name or
 * `fallback`)(FILE(source_file:source_line:source_column)).  Equal
 * metadata texts share one location. */
static const ir_loc *metadata_loc(hp *p, hattr *a, const char *fallback, uint32_t fallback_len)
{
    hent *e = htab_get(&p->loc_tab, a->val, a->vlen);
    if (e) {
        a->used = true;
        return p->locs[e->val];
    }
    const char *name = NULL, *file = NULL;
    int64_t line = 0, col = 0, frame = 0;
    hsave sv = enter_value(p, a);
    bool ok = expect(p, '{', "'{' to start the metadata");
    while (ok && peek(p) != '}') {
        const char *k;
        uint32_t kl;
        if (!(ok = expect_name(p, &k, &kl, "a metadata key") && expect(p, '=', "'='")))
            break;
        if (peek(p) == '"') {
            const char *s;
            size_t sl;
            if (!(ok = lex_string(p, &s, &sl)))
                break;
            bool is_name = text_is(k, kl, "op_name");
            bool is_file = text_is(k, kl, "source_file");
            if ((is_name || is_file) && sl > 0) {
                const char *in = ir_intern(p->m, s, sl);
                if (!in) {
                    ok = oom(p);
                    break;
                }
                if (is_name)
                    name = in;
                else
                    file = in;
            }
        } else if (peek(p) == '-' || (peek(p) >= '0' && peek(p) <= '9')) {
            int64_t v;
            if (!(ok = lex_int(p, &v)))
                break;
            if (text_is(k, kl, "source_line"))
                line = v;
            else if (text_is(k, kl, "source_column"))
                col = v;
            else if (text_is(k, kl, "stack_frame_id"))
                frame = v;
        } else if (peek(p) == '{') {
            if (!(ok = skip_group(p)))
                break;
        } else {
            const char *w;
            uint32_t wl;
            if (!(ok = expect_name(p, &w, &wl, "a metadata value")))
                break;
        }
        accept(p, ',');
    }
    ok = ok && expect(p, '}', "'}' to close the metadata");
    if (!leave_value(p, sv, ok))
        return NULL;
    bool named = name != NULL;
    if (!name && !(name = ir_intern(p->m, fallback, fallback_len))) {
        oom(p);
        return NULL;
    }
    ir_loc *l = loc_new(p, IR_L_NAME, name);
    if (!l)
        return NULL;
    if (frame > 0 && (uint64_t)frame <= p->n_frames) {
        /* the call stack, as XLA's importer builds it; a frame the module
         * does not list (dumps often leave the tables out) is unknown */
        if (!(l->a = frame_loc(p, frame, a->val)))
            return NULL;
    } else if (file) {
        ir_loc *f = loc_new(p, IR_L_FILE, file);
        if (!f)
            return NULL;
        f->line = (int32_t)(line < 0 || line > INT32_MAX ? 0 : line);
        f->col = (int32_t)(col < 0 || col > INT32_MAX ? 0 : col);
        l->a = f;
    }
    /* the fallback name differs per instruction: cache only op_name locs */
    if (named) {
        if (!GROW(p, p->locs, p->cap_locs, p->n_locs + 1) || !htab_put(p, &p->loc_tab, a->val, a->vlen, p->n_locs))
            return NULL;
        p->locs[p->n_locs++] = l;
    }
    return l;
}

/* The location of an instruction: from its metadata, else its name. */
static const ir_loc *inst_loc(hp *p, const char *name, uint32_t len)
{
    hattr *md = find_attr(p, "metadata");
    if (md)
        return metadata_loc(p, md, name, len);
    /* names are unique: a copy is cheaper than interning */
    const char *s = ap_arena_strndup(&p->m->arena, name, len);
    if (!s) {
        oom(p);
        return NULL;
    }
    return loc_new(p, IR_L_NAME, s);
}

/* ============================================================= literals */

/* A number or inf/nan word of a literal, as a double and, when integral,
 * an int64 (uint64 values above INT64_MAX wrap); *integral tells which. */
static bool lex_number(hp *p, double *d, int64_t *i, bool *integral)
{
    skip_ws(p);
    const char *q = p->p, *start = q;
    char buf[72];
    size_t n = 0;
    while (q < p->end && n < sizeof buf - 1 &&
           (isalnum((unsigned char)*q) || *q == '-' || *q == '+' || *q == '.'))
        buf[n++] = *q++;
    buf[n] = '\0';
    if (n == 0)
        return expected(p, "a number");
    const char *b = buf;
    bool neg = *b == '-';
    if (neg || *b == '+')
        b++;
    if (strcmp(b, "inf") == 0 || strcmp(b, "nan") == 0) {
        *d = b[0] == 'i' ? (neg ? -INFINITY : INFINITY) : (neg ? -NAN : NAN);
        *i = 0;
        *integral = false;
        if (b[0] == 'n' && q < p->end && *q == '(') { /* nan(0x...) payload */
            p->p = q;
            if (!skip_group(p))
                return false;
            q = p->p;
        }
        p->p = q;
        return true;
    }
    char *e;
    *integral = strspn(b, "0123456789") == strlen(b) && *b;
    if (*integral) {
        errno = 0;
        uint64_t u = strtoull(b, &e, 10);
        if (errno || *e)
            return perr(p, start, AP_ESYNTAX, "integer out of range");
        *i = neg ? (int64_t)(0 - u) : (int64_t)u;
        *d = neg ? -(double)u : (double)u;
    } else {
        *d = strtod(buf, &e);
        if (*e || e == buf)
            return perr(p, start, AP_ESYNTAX, "invalid number '%s'", buf);
        *i = 0;
    }
    p->p = q;
    return true;
}

/* One element of type e stored at dst. */
static bool parse_elem(hp *p, ir_elem e, uint8_t *dst)
{
    if (e == IR_E_I1) {
        bool v;
        if (is_word(p, "true") || is_word(p, "false")) {
            if (!parse_bool(p, &v))
                return false;
        } else {
            int64_t x;
            if (!lex_int(p, &x))
                return false;
            v = x != 0;
        }
        *dst = v;
        return true;
    }
    if (ir_elem_is_complex(e)) {
        ir_elem part = e == IR_E_C64 ? IR_E_F32 : IR_E_F64;
        double re, im;
        int64_t ign;
        bool ig;
        if (!expect(p, '(', "'(' of a complex number") || !lex_number(p, &re, &ign, &ig) || !expect(p, ',', "','") ||
            !lex_number(p, &im, &ign, &ig) || !expect(p, ')', "')'"))
            return false;
        ir__float_store(part, dst, re);
        ir__float_store(part, dst + ir_elem_bytes(part), im);
        return true;
    }
    double d;
    int64_t i;
    bool integral;
    const char *at = (skip_ws(p), p->p);
    if (!lex_number(p, &d, &i, &integral))
        return false;
    if (ir_elem_is_float(e))
        ir__float_store(e, dst, d);
    else if (integral)
        ir__int_store(e, dst, i);
    else
        return perr(p, at, AP_ESYNTAX, "expected an integer element");
    return true;
}

/* literal ::= elem | '{' (literal (',' literal)*)? '}' nested to the rank */
static bool parse_literal_dim(hp *p, const ir_type *t, int d, uint8_t **dst, int eb)
{
    if (d == t->rank) {
        if (!parse_elem(p, (ir_elem)t->elem, *dst))
            return false;
        *dst += eb;
        return true;
    }
    if (!expect(p, '{', "'{' of a literal"))
        return false;
    for (int64_t i = 0; i < t->dims[d]; i++) {
        if (i && !expect(p, ',', "',' between literal elements"))
            return false;
        if (!parse_literal_dim(p, t, d + 1, dst, eb))
            return false;
    }
    return expect(p, '}', "'}' after the literal's elements");
}

/* The dense attribute of a constant of tensor type t; `{...}` (an elided
 * literal) gives dense_resource<__elided__>. */
static ir_attr *parse_literal(hp *p, const ir_type *t)
{
    ir_module *m = p->m;
    skip_ws(p);
    if ((size_t)(p->end - p->p) >= 5 && memcmp(p->p, "{...}", 5) == 0) {
        p->p += 5;
        ir_attr k = {.kind = IR_A_DENSE_RESOURCE, .type = t};
        k.u.str.s = "__elided__";
        k.u.str.len = 10;
        ir_attr *a = ir__attr_intern(m, &k, false);
        if (!a)
            oom(p);
        return a;
    }
    int64_t numel = ir_type_numel(t);
    int eb = ir_elem_bytes((ir_elem)t->elem);
    const char *at = p->p;
    if (numel < 0 || eb == 0) {
        perr(p, at, AP_EUNSUPPORTED, "constants need a static shape with a numeric element type");
        return NULL;
    }
    if (t->rank > 0 && numel > 0 && p->p < p->end && *p->p != '{') {
        /* `f32[2,3] constant(1)`: one value for every element (a splat) */
        uint8_t *one = ir__zalloc(m, (size_t)eb);
        ir_attr *k = ir__zalloc(m, sizeof *k);
        if (!one || !k) {
            oom(p);
            return NULL;
        }
        if (!parse_elem(p, (ir_elem)t->elem, one))
            return NULL;
        k->kind = IR_A_DENSE;
        k->type = t;
        k->u.dense.splat = true;
        k->u.dense.nbytes = (size_t)eb;
        k->u.dense.data = one;
        ir_attr *a = ir__attr_intern(m, k, true);
        if (!a)
            oom(p);
        return a;
    }
    if (numel > p->end - p->p) { /* every element takes at least a byte */
        perr(p, at, AP_ESYNTAX, "literal has fewer elements than its shape");
        return NULL;
    }
    size_t nbytes = (size_t)numel * (size_t)eb;
    uint8_t *data = ir__zalloc(m, nbytes ? nbytes : 1), *w = data;
    ir_attr *k = ir__zalloc(m, sizeof *k);
    if (!data || !k) {
        oom(p);
        return NULL;
    }
    if (++p->depth > HLO_MAX_DEPTH) {
        perr(p, at, AP_ELIMIT, "literal nested too deeply");
        return NULL;
    }
    bool ok = parse_literal_dim(p, t, 0, &w, eb);
    p->depth--;
    if (!ok)
        return NULL;
    bool splat = numel > 1;
    for (size_t off = (size_t)eb; splat && off < nbytes; off += (size_t)eb)
        splat = memcmp(data, data + off, (size_t)eb) == 0;
    k->kind = IR_A_DENSE;
    k->type = t;
    k->u.dense.splat = splat;
    k->u.dense.nbytes = splat ? (size_t)eb : nbytes;
    k->u.dense.data = data;
    ir_attr *a = ir__attr_intern(m, k, true);
    if (!a)
        oom(p);
    return a;
}

/* =========================================================== op tables */

/* Opcode flags: MULTI = a tuple result becomes several results; REGION =
 * `to_apply` fills one region. */
enum { MULTI = 1, REGION = 2 };

/* HLO opcode, the op it becomes (UNKNOWN: handled by name), flags. */
#define HLO_OPCODES(X)                                                                          \
    X("abs", ABS, 0) X("add", ADD, 0) X("after-all", AFTER_ALL, 0) X("all-gather", ALL_GATHER, MULTI) \
    X("all-reduce", ALL_REDUCE, MULTI | REGION) X("all-to-all", ALL_TO_ALL, MULTI) X("and", AND, 0)   \
    X("atan2", ATAN2, 0) X("batch-norm-grad", BATCH_NORM_GRAD, MULTI)                                 \
    X("batch-norm-inference", BATCH_NORM_INFERENCE, 0) X("batch-norm-training", BATCH_NORM_TRAINING, MULTI) \
    X("bitcast-convert", BITCAST_CONVERT, 0) X("broadcast", BROADCAST_IN_DIM, 0) X("call", FUNC_CALL, MULTI) \
    X("cbrt", CBRT, 0) X("ceil", CEIL, 0) X("cholesky", CHOLESKY, 0) X("clamp", CLAMP, 0)              \
    X("collective-broadcast", COLLECTIVE_BROADCAST, 0) X("collective-permute", COLLECTIVE_PERMUTE, 0) \
    X("compare", COMPARE, 0) X("complex", COMPLEX, 0) X("concatenate", CONCATENATE, 0)                \
    X("conditional", CASE, MULTI) X("constant", CONSTANT, 0) X("convert", CONVERT, 0)                 \
    X("convolution", CONVOLUTION, 0) X("copy", COPY, 0) X("cosine", COSINE, 0)                        \
    X("count-leading-zeros", CLZ, 0) X("custom-call", CUSTOM_CALL, MULTI) X("divide", DIVIDE, 0)      \
    X("dot", DOT_GENERAL, 0) X("dynamic-slice", DYNAMIC_SLICE, 0)                                      \
    X("dynamic-update-slice", DYNAMIC_UPDATE_SLICE, 0) X("exponential", EXP, 0)                        \
    X("exponential-minus-one", EXPM1, 0) X("fft", FFT, 0) X("floor", FLOOR, 0) X("gather", GATHER, 0) \
    X("get-dimension-size", GET_DIMENSION_SIZE, 0) X("get-tuple-element", GET_TUPLE_ELEMENT, 0)       \
    X("imag", IMAG, 0) X("iota", IOTA, 0) X("is-finite", IS_FINITE, 0) X("log", LOG, 0)                \
    X("log-plus-one", LOG1P, 0) X("logistic", LOGISTIC, 0) X("map", MAP, REGION)                      \
    X("maximum", MAXIMUM, 0) X("minimum", MINIMUM, 0) X("multiply", MULTIPLY, 0) X("negate", NEGATE, 0) \
    X("not", NOT, 0) X("opt-barrier", OPTIMIZATION_BARRIER, MULTI) X("or", OR, 0)                     \
    X("pad", PAD, 0) X("parameter", UNKNOWN, 0) X("partition-id", PARTITION_ID, 0)                    \
    X("popcnt", POPCNT, 0) X("power", POWER, 0) X("real", REAL, 0)                                     \
    X("reduce", REDUCE, MULTI | REGION) X("reduce-precision", REDUCE_PRECISION, 0)                    \
    X("reduce-scatter", REDUCE_SCATTER, MULTI | REGION) X("reduce-window", REDUCE_WINDOW, MULTI | REGION) \
    X("remainder", REMAINDER, 0) X("replica-id", REPLICA_ID, 0) X("reshape", RESHAPE, 0)              \
    X("reverse", REVERSE, 0) X("rng-bit-generator", RNG_BIT_GENERATOR, MULTI)                          \
    X("round-nearest-afz", ROUND_AFZ, 0) X("round-nearest-even", ROUND_EVEN, 0) X("rsqrt", RSQRT, 0)  \
    X("scatter", SCATTER, MULTI | REGION) X("select", SELECT, 0)                                        \
    X("select-and-scatter", SELECT_AND_SCATTER, 0) X("shift-left", SHIFT_LEFT, 0)                     \
    X("shift-right-arithmetic", SHIFT_RIGHT_ARITH, 0) X("shift-right-logical", SHIFT_RIGHT_LOGICAL, 0) \
    X("sign", SIGN, 0) X("sine", SINE, 0) X("slice", SLICE, 0) X("sort", SORT, MULTI | REGION)        \
    X("sqrt", SQRT, 0) X("subtract", SUBTRACT, 0) X("tan", TAN, 0) X("tanh", TANH, 0)                 \
    X("transpose", TRANSPOSE, 0) X("triangular-solve", TRIANGULAR_SOLVE, 0) X("tuple", TUPLE, 0)      \
    X("while", WHILE, 0) X("xor", XOR, 0)

static const struct hop {
    const char *name;
    ir_opcode op;
    uint8_t flags;
} hlo_ops[] = {
#define HLO_OP_ROW(name, op, flags) {name, IR_OP_##op, flags},
    HLO_OPCODES(HLO_OP_ROW)
#undef HLO_OP_ROW
};

/* How an attribute value is read. */
enum hconv {
    C_I64S,      /* {1,2} -> array<i64: 1, 2> */
    C_I64,       /* {1} or 1 -> 1 : i64 */
    C_I32,       /* 1 -> 1 : i32 */
    C_BOOL,      /* true | false */
    C_UNIT,      /* true -> unit attribute, false -> nothing */
    C_STR,       /* "..." (or raw text) -> string */
    C_F32,       /* 1e-05 -> 1.0e-05 : f32 */
    C_ENUM,      /* word -> #stablehlo<KIND WORD> (upper case, rng_ dropped) */
    C_APIVER,    /* API_VERSION_X -> N : i32 */
    C_PRECISION, /* {default,high} -> [#stablehlo<precision DEFAULT>, ...] */
    C_SLICE,     /* {[0:2:1], ...} -> start_indices, limit_indices, strides */
    C_PADDING,   /* 0_0_0x1_1_0 -> edge_padding_low/high, interior_padding */
    C_WINDOW,    /* {size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=..} */
    C_DIMLABELS, /* b01f_01io->b01f -> #stablehlo.conv<[b, 0, 1, f]x...> */
    C_PAIRS,     /* {{0,1},{1,0}} -> dense<..> : tensor<Nx2xi64> */
    C_GROUPS,    /* {{0,1},{2,3}} or [2,2]<=[4] -> dense<..> : tensor<GxSxi64> */
    C_CHANNEL,   /* N -> #stablehlo.channel_handle<handle = N, type = 1> */
};

#define IR_OP_COLL_ANY IR_OP__COUNT /* matches every collective */

/* Op-specific attributes: op, HLO key, attribute, how, enum kind. */
static const struct hmap {
    int op;
    const char *key, *attr;
    uint8_t conv;
    const char *kind;
} attr_maps[] = {
    {IR_OP_BROADCAST_IN_DIM, "dimensions", "broadcast_dimensions", C_I64S, NULL},
    {IR_OP_TRANSPOSE, "dimensions", "permutation", C_I64S, NULL},
    {IR_OP_REVERSE, "dimensions", "dimensions", C_I64S, NULL},
    {IR_OP_REDUCE, "dimensions", "dimensions", C_I64S, NULL},
    {IR_OP_MAP, "dimensions", "dimensions", C_I64S, NULL},
    {IR_OP_CONCATENATE, "dimensions", "dimension", C_I64, NULL},
    {IR_OP_SORT, "dimensions", "dimension", C_I64, NULL},
    {IR_OP_SORT, "is_stable", "is_stable", C_BOOL, NULL},
    {IR_OP_ALL_GATHER, "dimensions", "all_gather_dim", C_I64, NULL},
    {IR_OP_REDUCE_SCATTER, "dimensions", "scatter_dimension", C_I64, NULL},
    {IR_OP_GET_DIMENSION_SIZE, "dimensions", "dimension", C_I64, NULL},
    {IR_OP_IOTA, "iota_dimension", "iota_dimension", C_I64, NULL},
    {IR_OP_DYNAMIC_SLICE, "dynamic_slice_sizes", "slice_sizes", C_I64S, NULL},
    {IR_OP_SLICE, "slice", NULL, C_SLICE, NULL},
    {IR_OP_PAD, "padding", NULL, C_PADDING, NULL},
    {IR_OP_GATHER, "slice_sizes", "slice_sizes", C_I64S, NULL},
    {IR_OP_GATHER, "indices_are_sorted", "indices_are_sorted", C_BOOL, NULL},
    {IR_OP_SCATTER, "indices_are_sorted", "indices_are_sorted", C_BOOL, NULL},
    {IR_OP_SCATTER, "unique_indices", "unique_indices", C_BOOL, NULL},
    {IR_OP_REDUCE_PRECISION, "exponent_bits", "exponent_bits", C_I32, NULL},
    {IR_OP_REDUCE_PRECISION, "mantissa_bits", "mantissa_bits", C_I32, NULL},
    {IR_OP_BATCH_NORM_TRAINING, "epsilon", "epsilon", C_F32, NULL},
    {IR_OP_BATCH_NORM_INFERENCE, "epsilon", "epsilon", C_F32, NULL},
    {IR_OP_BATCH_NORM_GRAD, "epsilon", "epsilon", C_F32, NULL},
    {IR_OP_BATCH_NORM_TRAINING, "feature_index", "feature_index", C_I64, NULL},
    {IR_OP_BATCH_NORM_INFERENCE, "feature_index", "feature_index", C_I64, NULL},
    {IR_OP_BATCH_NORM_GRAD, "feature_index", "feature_index", C_I64, NULL},
    {IR_OP_CUSTOM_CALL, "custom_call_target", "call_target_name", C_STR, NULL},
    {IR_OP_CUSTOM_CALL, "custom_call_has_side_effect", "has_side_effect", C_BOOL, NULL},
    {IR_OP_CUSTOM_CALL, "backend_config", "backend_config", C_STR, NULL},
    {IR_OP_CUSTOM_CALL, "api_version", "api_version", C_APIVER, NULL},
    {IR_OP_COMPARE, "direction", "comparison_direction", C_ENUM, "comparison_direction"},
    {IR_OP_COMPARE, "type", "compare_type", C_ENUM, "comparison_type"},
    {IR_OP_FFT, "fft_type", "fft_type", C_ENUM, "fft_type"},
    {IR_OP_FFT, "fft_length", "fft_length", C_I64S, NULL},
    {IR_OP_RNG_BIT_GENERATOR, "algorithm", "rng_algorithm", C_ENUM, "rng_algorithm"},
    {IR_OP_CHOLESKY, "lower", "lower", C_BOOL, NULL},
    {IR_OP_TRIANGULAR_SOLVE, "left_side", "left_side", C_BOOL, NULL},
    {IR_OP_TRIANGULAR_SOLVE, "lower", "lower", C_BOOL, NULL},
    {IR_OP_TRIANGULAR_SOLVE, "unit_diagonal", "unit_diagonal", C_BOOL, NULL},
    {IR_OP_TRIANGULAR_SOLVE, "transpose_a", "transpose_a", C_ENUM, "transpose"},
    {IR_OP_DOT_GENERAL, "operand_precision", "precision_config", C_PRECISION, NULL},
    {IR_OP_CONVOLUTION, "operand_precision", "precision_config", C_PRECISION, NULL},
    {IR_OP_CONVOLUTION, "feature_group_count", "feature_group_count", C_I64, NULL},
    {IR_OP_CONVOLUTION, "batch_group_count", "batch_group_count", C_I64, NULL},
    {IR_OP_CONVOLUTION, "window", NULL, C_WINDOW, NULL},
    {IR_OP_REDUCE_WINDOW, "window", NULL, C_WINDOW, NULL},
    {IR_OP_SELECT_AND_SCATTER, "window", NULL, C_WINDOW, NULL},
    {IR_OP_CONVOLUTION, "dim_labels", "dimension_numbers", C_DIMLABELS, NULL},
    {IR_OP_COLLECTIVE_PERMUTE, "source_target_pairs", "source_target_pairs", C_PAIRS, NULL},
    {IR_OP_COLL_ANY, "replica_groups", "replica_groups", C_GROUPS, NULL},
    {IR_OP_COLL_ANY, "channel_id", "channel_handle", C_CHANNEL, NULL},
    {IR_OP_COLL_ANY, "use_global_device_ids", "use_global_device_ids", C_UNIT, NULL},
};

/* Keys read by the op builders themselves, and keys dropped on purpose. */
static const char *const builder_keys[] = {"to_apply", "condition", "body", "branch_computations",
                                            "true_computation", "false_computation", "select", "scatter",
                                            "metadata", "sharding", "frontend_attributes", NULL};
static const char *const dropped_keys[] = {"control-predecessors", "operand_layout_constraints", NULL};

static bool in_list(const char *const *list, const char *s, uint32_t len)
{
    for (int i = 0; list[i]; i++)
        if (text_is(s, len, list[i]))
            return true;
    return false;
}

/* ========================================================== op building */

/* Adds attribute `lit` = a (NULL a: out of memory) to the op being built. */
static bool put(hp *p, hbuild *b, const char *lit, ir_attr *a)
{
    if (!a)
        return oom(p);
    const char *name = nm(p, lit);
    if (!name)
        return oom(p);
    if (b->n == AP_ARRAY_LEN(b->na))
        return perr(p, p->p, AP_ELIMIT, "too many attributes");
    b->na[b->n++] = (ir_named_attr){name, a};
    return true;
}

/* array<i64: ...>; an empty one always has a NULL list, as the MLIR parser
 * makes it (ir_attr_equal tells NULL from non-NULL). */
static ir_attr *i64s(hp *p, int n, const int64_t *v) { return ir_attr_i64_array(p->m, n, n ? v : NULL); }

static ir_attr *i64_attr(hp *p, int64_t v) { return ir_attr_int(p->m, v, ir_type_scalar(p->m, IR_E_I64, NULL)); }
static ir_attr *i32_attr(hp *p, int64_t v) { return ir_attr_int(p->m, v, ir_type_scalar(p->m, IR_E_I32, NULL)); }

/* The values StableHLO knows for each enum kind. */
static const struct {
    const char *kind, *values;
} enum_values[] = {
    {"comparison_direction", " EQ NE LT LE GT GE "},
    {"comparison_type", " NOTYPE FLOAT TOTALORDER SIGNED UNSIGNED "},
    {"precision", " DEFAULT HIGH HIGHEST "},
    {"fft_type", " FFT IFFT RFFT IRFFT "},
    {"rng_algorithm", " DEFAULT THREE_FRY PHILOX "},
    {"transpose", " NO_TRANSPOSE TRANSPOSE ADJOINT "},
};

/* #stablehlo<KIND WORD> from a word of the input (upper-cased; rng_
 * dropped); the word must be one of the kind's values. */
static ir_attr *enum_attr(hp *p, const char *kind)
{
    const char *w;
    uint32_t wl;
    skip_ws(p);
    const char *at = p->p;
    if (!expect_name(p, &w, &wl, "an enum value"))
        return NULL;
    if (wl > 4 && memcmp(w, "rng_", 4) == 0) {
        w += 4;
        wl -= 4;
    }
    char body[64], word[32];
    if (wl + 3 > sizeof word)
        return perr(p, at, AP_ESYNTAX, "unknown %s '%.*s'", kind, (int)(wl > 40 ? 40 : wl), w), NULL;
    word[0] = ' ';
    for (uint32_t i = 0; i < wl; i++)
        word[i + 1] = (char)toupper((unsigned char)w[i]);
    word[wl + 1] = ' ';
    word[wl + 2] = '\0';
    bool known = false;
    for (size_t i = 0; i < AP_ARRAY_LEN(enum_values); i++)
        known |= strcmp(enum_values[i].kind, kind) == 0 && strstr(enum_values[i].values, word) != NULL;
    if (!known)
        return perr(p, at, AP_ESYNTAX, "unknown %s '%.*s'", kind, (int)wl, w), NULL;
    word[wl + 1] = '\0';
    snprintf(body, sizeof body, "%s%s", kind, word);
    ir_attr *a = ir_attr_dialect_raw(p->m, "stablehlo", body);
    if (!a)
        oom(p);
    return a;
}

/* Devices in a replica group table, at most: groups become dense data, and
 * a short text (iota form, ragged rows) must not make gigabytes of it. */
#define HLO_MAX_GROUP_ELEMS (INT64_C(1) << 20)

#define HLO_MESH_AXES 16
/* dims a mesh's axes split into for its replica groups: each axis one,
 * each sub-axis two more (itself and the gap before it) */
#define HLO_MESH_DIMS (HLO_MESH_AXES + 4 * HLO_MESH_AXES)

/* The source index of element k of an array of shape `dims` (row-major)
 * transposed by `perm` (result dim i is source dim perm[i]); nd at most
 * HLO_MESH_DIMS. */
static int64_t transposed_source(const int64_t *dims, int nd, const int64_t *perm, int64_t k)
{
    int64_t idx[HLO_MESH_DIMS], src = 0;
    for (int i = nd - 1; i >= 0; i--) {
        int64_t d = dims[perm[i]];
        idx[perm[i]] = d ? k % d : 0;
        k = d ? k / d : 0;
    }
    for (int i = 0; i < nd; i++)
        src = src * dims[i] + idx[i];
    return src;
}

/* A mesh axis name in replica groups: 'x', "x" or x. */
static bool mesh_axis_name(hp *p, const char **s, uint32_t *len)
{
    skip_ws(p);
    char q = p->p < p->end ? *p->p : '\0';
    if (q != '\'' && q != '"')
        return expect_name(p, s, len, "a mesh axis name");
    const char *start = ++p->p;
    while (p->p < p->end && *p->p != q && *p->p != '\n')
        p->p++;
    if (p->p >= p->end || *p->p != q)
        return perr(p, start - 1, AP_ESYNTAX, "unterminated axis name");
    *s = start;
    *len = (uint32_t)(p->p - start);
    p->p++;
    return true;
}

/* A mesh of replica groups as written: its axes, and the axes (or
 * sub-axes) its groups run over. */
typedef struct hmesh {
    const char *names[HLO_MESH_AXES];
    uint32_t lens[HLO_MESH_AXES];
    int64_t sizes[HLO_MESH_AXES], total;
    int na;
    int ref_axis[HLO_MESH_AXES * 2];
    int64_t ref_pre[HLO_MESH_AXES * 2], ref_size[HLO_MESH_AXES * 2]; /* pre 0: the whole axis */
    int nref;
} hmesh;

/* (, device_ids=(...))? after a mesh's axes: the device of each of its
 * positions, row-major, into dev: an iota [r0,..]T(perm), the devices one by
 * one (a permutation of 0..N-1), or without device_ids 0..N-1. */
static bool mesh_device_ids(hp *p, const hmesh *m, ivec *dev)
{
    bool ok = true;
    const char *dev_at = p->p;
    if (accept(p, ',')) {
        dev_at = (skip_ws(p), p->p);
        ok = accept_word(p, "device_ids") ? expect(p, '=', "'='") && expect(p, '(', "'(' and the device ids")
                                          : expected(p, "'device_ids='");
        if (ok && accept(p, '[')) { /* [r0,r1,..] T(perm)? : a transposed iota */
            int64_t rd[IR_MAX_RANK], perm[IR_MAX_RANK], n = 1;
            int nr = 0, np = 0;
            do {
                if (nr == IR_MAX_RANK)
                    ok = perr(p, p->p, AP_ELIMIT, "too many iota dimensions");
                else if ((ok = lex_int(p, &rd[nr])) && (rd[nr] < 1 || n > HLO_MAX_GROUP_ELEMS / rd[nr]))
                    ok = perr(p, dev_at, AP_ESYNTAX, "device_ids do not match the mesh");
                else if (ok)
                    n *= rd[nr++];
            } while (ok && accept(p, ','));
            ok = ok && expect(p, ']', "']'");
            if (ok && accept(p, 'T')) {
                ok = expect(p, '(', "'(' of the transpose");
                while (ok) {
                    if (np == IR_MAX_RANK)
                        ok = perr(p, p->p, AP_ELIMIT, "too many iota dimensions");
                    else if ((ok = lex_int(p, &perm[np])))
                        np++;
                    if (!ok || !accept(p, ','))
                        break;
                }
                ok = ok && expect(p, ')', "')'");
            } else {
                for (np = 0; np < nr; np++)
                    perm[np] = np;
            }
            bool seen[IR_MAX_RANK] = {0};
            for (int i = 0; ok && i < np; i++) {
                if (np != nr || perm[i] < 0 || perm[i] >= nr || seen[perm[i]])
                    ok = perr(p, dev_at, AP_ESYNTAX, "device_ids: the transpose is not a permutation");
                else
                    seen[perm[i]] = true;
            }
            if (ok && n != m->total)
                ok = perr(p, dev_at, AP_ESYNTAX, "device_ids list %" PRId64 " devices for a mesh of %" PRId64, n,
                          m->total);
            for (int64_t k = 0; ok && k < m->total; k++)
                ok = ivec_push(p, dev, transposed_source(rd, nr, perm, k));
        } else if (ok) { /* the devices one by one: a permutation of 0..N-1 */
            do {
                int64_t d;
                if ((ok = lex_int(p, &d)) && (d < 0 || d >= m->total || dev->n >= m->total))
                    ok = perr(p, dev_at, AP_ESYNTAX, "device_ids must be a permutation of the mesh's devices");
                ok = ok && ivec_push(p, dev, d);
            } while (ok && accept(p, ','));
            bool *seen = ok ? ap_calloc((size_t)m->total, sizeof *seen) : NULL;
            if (ok && !seen)
                ok = oom(p);
            for (uint32_t i = 0; ok && i < dev->n; i++) {
                if (seen[dev->v[i]])
                    ok = perr(p, dev_at, AP_ESYNTAX, "device_ids must be a permutation of the mesh's devices");
                else
                    seen[dev->v[i]] = true;
            }
            ap_free(seen);
            if (ok && dev->n != m->total)
                ok = perr(p, dev_at, AP_ESYNTAX, "device_ids list %u devices for a mesh of %" PRId64, dev->n,
                          m->total);
        }
        ok = ok && expect(p, ')', "')' after the device ids");
    } else {
        for (int64_t k = 0; ok && k < m->total; k++)
            ok = ivec_push(p, dev, k);
    }
    return ok;
}

/* {'y', 'x':(1)2}: the axes the groups of mesh m run over, in order, each
 * a whole axis or a sub-axis :(pre)size, into m's refs. */
static bool mesh_group_axes(hp *p, hmesh *m)
{
    bool ok = expect(p, '{', "'{' and the axes of the groups");
    if (ok && peek(p) != '}') {
        do {
            const char *ra = (skip_ws(p), p->p), *n;
            uint32_t nl;
            if (m->nref == HLO_MESH_AXES * 2) {
                ok = perr(p, ra, AP_ELIMIT, "too many axes in replica groups");
                break;
            }
            if (!(ok = mesh_axis_name(p, &n, &nl)))
                break;
            int a = 0;
            while (a < m->na && !(m->lens[a] == nl && memcmp(m->names[a], n, nl) == 0))
                a++;
            if (a == m->na) {
                ok = perr(p, ra, AP_EUNDEFINED, "replica groups name axis '%.*s', which the mesh does not have", (int)nl, n);
                break;
            }
            int64_t *pre = &m->ref_pre[m->nref], *size = &m->ref_size[m->nref];
            m->ref_axis[m->nref] = a;
            *pre = 0;
            *size = m->sizes[a];
            if (accept(p, ':')) { /* a sub-axis :(pre)size */
                ok = expect(p, '(', "'(' of a sub-axis") && lex_int(p, pre) && expect(p, ')', "')'") &&
                     lex_int(p, size);
                if (ok && (*pre < 1 || *size < 2 || *size >= m->sizes[a] || *pre > m->sizes[a] / *size ||
                           m->sizes[a] % (*pre * *size)))
                    ok = perr(p, ra, AP_ESYNTAX, "sub-axis %.*s:(%" PRId64 ")%" PRId64 " does not divide its axis",
                              (int)nl, n, *pre, *size);
            }
            m->nref += ok;
        } while (ok && accept(p, ','));
        ok = ok && expect(p, '}', "',' or '}' after the axes");
    } else if (ok) {
        p->p++; /* '}': no axes, groups of one device */
    }
    return ok;
}

/* The groups of mesh m over the devices dev, row by row, into iv: each
 * mesh axis split into the dims its refs need (XLA's reshape), the listed
 * dims moved last, in the listed order.  *group: the devices in a group. */
static bool mesh_groups_fill(hp *p, const char *at, const hmesh *m, const ivec *dev, ivec *iv, int64_t *group_out)
{
    bool ok = true;
    int64_t rd[HLO_MESH_DIMS], perm[HLO_MESH_DIMS];
    int64_t agg[HLO_MESH_AXES * 2];
    int nr = 0;
    for (int a = 0; ok && a < m->na; a++) {
        int idx[HLO_MESH_AXES * 2], k = 0;
        for (int r = 0; r < m->nref; r++)
            if (m->ref_axis[r] == a)
                idx[k++] = r;
        if (k == 0) {
            rd[nr++] = m->sizes[a];
            continue;
        }
        for (int i = 0; i < k && ok; i++)
            if (m->ref_pre[idx[i]] == 0 && k > 1)
                ok = perr(p, at, AP_ESYNTAX, "replica groups use axis '%.*s' twice", (int)m->lens[a], m->names[a]);
        if (!ok)
            break;
        if (k == 1 && m->ref_pre[idx[0]] == 0) {
            agg[idx[0]] = nr;
            rd[nr++] = m->sizes[a];
            continue;
        }
        /* sub-axes, by position along the axis */
        for (int i = 1; i < k; i++)
            for (int j = i; j > 0 && m->ref_pre[idx[j]] < m->ref_pre[idx[j - 1]]; j--) {
                int t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
        int64_t prefix = 1;
        for (int i = 0; i < k && ok; i++) {
            int r = idx[i];
            if (m->ref_pre[r] % prefix) {
                ok = perr(p, at, AP_ESYNTAX, "sub-axes of '%.*s' overlap", (int)m->lens[a], m->names[a]);
                break;
            }
            if (m->ref_pre[r] != prefix) {
                rd[nr++] = m->ref_pre[r] / prefix;
                prefix = m->ref_pre[r];
            }
            agg[r] = nr;
            rd[nr++] = m->ref_size[r];
            prefix *= m->ref_size[r];
        }
        if (ok && prefix != m->sizes[a])
            rd[nr++] = m->sizes[a] / prefix;
    }
    int64_t group = 1;
    if (ok) {
        int np = 0;
        bool grouped[HLO_MESH_DIMS] = {0};
        for (int r = 0; r < m->nref; r++) {
            grouped[agg[r]] = true;
            group *= rd[agg[r]];
        }
        for (int i = 0; i < nr; i++)
            if (!grouped[i])
                perm[np++] = i;
        for (int r = 0; r < m->nref; r++)
            perm[np++] = agg[r];
        iv->n = 0;
        for (int64_t k = 0; ok && k < m->total; k++)
            ok = ivec_push(p, iv, dev->v[transposed_source(rd, nr, perm, k)]);
    }
    *group_out = group;
    return ok;
}

/* replica_groups=mesh['x'=2,'y'=4](, device_ids=(...))? {'y', 'x':(1)2}
 * (MeshAxesReplicaGroupList, as newer XLA prints SPMD collectives): the
 * groups run over the listed axes (sub-axes `:(pre)size` included) in the
 * order listed, one group per position on the other axes; the devices are
 * numbered row-major over the mesh unless device_ids= lists them, as an
 * iota [r0,..]T(perm) or one by one.  maximal_mesh[device_id=N] {} is the
 * one group {N}.  Fills iv with the groups row by row. */
static bool parse_mesh_groups(hp *p, ivec *iv, int64_t *rows, int64_t *cols)
{
    const char *at = p->p;
    if (accept_word(p, "maximal_mesh")) {
        int64_t dev;
        if (!expect(p, '[', "'['") || !accept_word(p, "device_id") || !expect(p, '=', "'='") || !lex_int(p, &dev) ||
            !expect(p, ']', "']'") || !expect(p, '{', "'{' and the axes") || !expect(p, '}', "'}': a maximal mesh has no axes"))
            return false;
        if (dev < 0)
            return perr(p, at, AP_ESYNTAX, "device_id must not be negative");
        *rows = *cols = 1;
        return ivec_push(p, iv, dev);
    }
    if (!accept_word(p, "mesh") || !expect(p, '[', "'[' and the mesh axes"))
        return false;
    hmesh mesh = {.total = 1}, *m = &mesh;
    do {
        if (m->na == HLO_MESH_AXES)
            return perr(p, p->p, AP_ELIMIT, "a mesh of more than %d axes", HLO_MESH_AXES);
        const char *ax = (skip_ws(p), p->p);
        if (!mesh_axis_name(p, &m->names[m->na], &m->lens[m->na]) || !expect(p, '=', "'=' and the axis size") ||
            !lex_int(p, &m->sizes[m->na]))
            return false;
        for (int i = 0; i < m->na; i++)
            if (m->lens[i] == m->lens[m->na] && memcmp(m->names[i], m->names[m->na], m->lens[m->na]) == 0)
                return perr(p, ax, AP_ESYNTAX, "mesh axis '%.*s' appears twice", (int)m->lens[m->na],
                            m->names[m->na]);
        if (m->sizes[m->na] < 1 || m->total > HLO_MAX_GROUP_ELEMS / m->sizes[m->na])
            return perr(p, ax, AP_ELIMIT, "mesh axis sizes must be positive and multiply to at most %" PRId64,
                        HLO_MAX_GROUP_ELEMS);
        m->total *= m->sizes[m->na++];
    } while (accept(p, ','));
    if (!expect(p, ']', "',' or ']' after the mesh axes"))
        return false;
    ivec dev = {0};
    bool ok = mesh_device_ids(p, m, &dev) && mesh_group_axes(p, m);
    int64_t group = 1;
    ok = ok && mesh_groups_fill(p, at, m, &dev, iv, &group);
    ap_free(dev.v);
    *cols = group;
    *rows = m->total / group;
    return ok;
}

/* Rows of integers: {{a,b},{c}} (ragged rows padded with -1), the iota
 * form [G,S]<=[d0,d1,..] with an optional T(perm), or a mesh and its axes
 * (parse_mesh_groups) -> dense GxS i64. */
static ir_attr *parse_groups(hp *p, ivec *iv)
{
    int64_t rows = 0, cols = 0;
    iv->n = 0;
    if (is_word(p, "mesh") || is_word(p, "maximal_mesh")) {
        if (!parse_mesh_groups(p, iv, &rows, &cols))
            return NULL;
    } else if (accept(p, '[')) {
        int64_t shape[2], dims[IR_MAX_RANK], perm[IR_MAX_RANK];
        int ns = 0, nd = 0, np = 0;
        do {
            if (ns == 2)
                return perr(p, p->p, AP_EUNSUPPORTED, "iota replica groups need two dimensions"), NULL;
            if (!lex_int(p, &shape[ns++]))
                return NULL;
        } while (accept(p, ','));
        if (!expect(p, ']', "']'") || !expect(p, '<', "'<='") || !expect(p, '=', "'<='") ||
            !expect(p, '[', "'['"))
            return NULL;
        do {
            if (nd == IR_MAX_RANK)
                return perr(p, p->p, AP_ELIMIT, "too many iota dimensions"), NULL;
            if (!lex_int(p, &dims[nd++]))
                return NULL;
        } while (accept(p, ','));
        if (!expect(p, ']', "']'"))
            return NULL;
        if (accept(p, 'T')) {
            if (!expect(p, '(', "'(' of the transpose"))
                return NULL;
            do {
                if (np == IR_MAX_RANK)
                    return perr(p, p->p, AP_ELIMIT, "too many iota dimensions"), NULL;
                if (!lex_int(p, &perm[np++]))
                    return NULL;
            } while (accept(p, ','));
            if (!expect(p, ')', "')'"))
                return NULL;
        } else {
            for (np = 0; np < nd; np++)
                perm[np] = np;
        }
        int64_t total = 1;
        for (int i = 0; i < nd; i++) {
            if (dims[i] < 0 || (dims[i] && total > HLO_MAX_GROUP_ELEMS / dims[i]))
                return perr(p, p->p, AP_ELIMIT, "replica groups of more than %" PRId64 " devices",
                            HLO_MAX_GROUP_ELEMS), NULL;
            total *= dims[i];
        }
        bool seen[IR_MAX_RANK] = {0};
        bool ok = np == nd && ns == 2 && shape[0] >= 0 && shape[1] >= 0 && shape[0] * shape[1] == total;
        for (int i = 0; ok && i < np; i++) {
            ok = perm[i] >= 0 && perm[i] < nd && !seen[perm[i]];
            if (ok)
                seen[perm[i]] = true;
        }
        if (!ok)
            return perr(p, p->p, AP_ESYNTAX, "inconsistent iota replica groups"), NULL;
        /* element k of the transposed array: decompose k over the permuted
         * dims, then index the iota (row-major over dims) */
        for (int64_t k = 0; k < total; k++)
            if (!ivec_push(p, iv, transposed_source(dims, nd, perm, k)))
                return NULL;
        rows = shape[0];
        cols = shape[1];
    } else {
        if (!expect(p, '{', "'{' or '[' of the replica groups"))
            return NULL;
        ivec lens = {0};
        bool ok = true;
        if (peek(p) != '}') {
            do {
                int64_t n0 = iv->n;
                ok = expect(p, '{', "'{' of a group");
                while (ok && peek(p) != '}') {
                    int64_t x;
                    ok = lex_int(p, &x) && ivec_push(p, iv, x);
                    if (ok && !accept(p, ','))
                        break;
                }
                ok = ok && expect(p, '}', "'}' of a group") && ivec_push(p, &lens, (int64_t)iv->n - n0);
            } while (ok && accept(p, ','));
        }
        ok = ok && expect(p, '}', "'}' of the replica groups");
        rows = lens.n;
        for (uint32_t i = 0; ok && i < lens.n; i++)
            cols = lens.v[i] > cols ? lens.v[i] : cols;
        if (ok && rows * cols > HLO_MAX_GROUP_ELEMS)
            ok = perr(p, p->p, AP_ELIMIT, "replica groups of more than %" PRId64 " devices", HLO_MAX_GROUP_ELEMS);
        if (ok && rows * cols != (int64_t)iv->n) { /* pad ragged rows with -1 */
            ivec flat = {0};
            uint32_t off = 0;
            for (uint32_t r = 0; ok && r < lens.n; r++) {
                for (int64_t c = 0; ok && c < cols; c++)
                    ok = ivec_push(p, &flat, c < lens.v[r] ? iv->v[off + c] : -1);
                off += (uint32_t)lens.v[r];
            }
            ap_free(iv->v);
            *iv = flat;
        }
        ap_free(lens.v);
        if (!ok)
            return NULL;
    }
    int64_t shape2[2] = {rows, cols};
    const ir_type *t = ir_type_tensor(p->m, IR_E_I64, 2, shape2);
    ir_attr *a = t ? ir_attr_dense_ints(p->m, t, iv->n, iv->v) : NULL;
    if (!a)
        oom(p);
    return a;
}

/* Reads one mapped attribute value into b. */
/* window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=.. rhs_dilate=..
 * rhs_reversal=..}: the window's fields as the attributes of a convolution
 * or a (reduce_)window op.  Fields, in v: size, stride, pad low, pad high
 * (v[6]), lhs_dilate, rhs_dilate, reversal. */
static bool read_window(hp *p, hbuild *b, ir_opcode opc)
{
    ir_module *m = p->m;
    static const char *const keys[] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"};
    int64_t v[7][IR_MAX_RANK];
    int cnt[6] = {0}, n = -1;
    if (!expect(p, '{', "'{' of the window"))
        return false;
    while (peek(p) != '}') {
        const char *k;
        uint32_t kl;
        int which = -1;
        if (!expect_name(p, &k, &kl, "a window field") || !expect(p, '=', "'='"))
            return false;
        for (int i = 0; i < 6; i++)
            if (text_is(k, kl, keys[i]))
                which = i;
        if (which < 0)
            return perr(p, k, AP_ESYNTAX, "unknown window field '%.*s'", (int)kl, k);
        if (which == 2) {
            int64_t lh[2];
            int k2;
            do {
                if (cnt[2] == IR_MAX_RANK)
                    return perr(p, p->p, AP_ELIMIT, "too many window dimensions");
                if (!parse_sep_ints(p, '_', lh, &k2, 2))
                    return false;
                if (k2 != 2)
                    return expected(p, "'_' and the high padding");
                v[2][cnt[2]] = lh[0];
                v[6][cnt[2]++] = lh[1];
            } while (p->p < p->end && *p->p == 'x' && p->p++);
        } else if (!parse_sep_ints(p, 'x', v[which == 5 ? 5 : which], &cnt[which], IR_MAX_RANK)) {
            return false;
        }
        if (n >= 0 && cnt[which] != n)
            return perr(p, k, AP_ESYNTAX, "window fields have different numbers of dimensions");
        n = cnt[which];
    }
    if (!expect(p, '}', "'}' of the window"))
        return false;
    if (n < 0)
        n = 0;
    for (int f = 0; f < 6; f++)
        if (!cnt[f])
            for (int i = 0; i < n; i++)
                v[f][i] = f == 0 ? 1 : f == 2 ? 0 : f == 5 ? 0 : 1;
    if (!cnt[2])
        for (int i = 0; i < n; i++)
            v[6][i] = 0;
    int64_t pads[2 * IR_MAX_RANK], pshape[2] = {n, 2};
    for (int i = 0; i < n; i++) {
        pads[2 * i] = v[2][i];
        pads[2 * i + 1] = v[6][i];
    }
    const ir_type *pt = ir_type_tensor(m, IR_E_I64, 2, pshape);
    ir_attr *pad = pt ? ir_attr_dense_ints(m, pt, (size_t)(2 * n), pads) : NULL;
    if (opc == IR_OP_CONVOLUTION) {
        bool rev[IR_MAX_RANK];
        for (int i = 0; i < n; i++)
            rev[i] = v[5][i] != 0;
        return put(p, b, "window_strides", i64s(p, n, v[1])) &&
               put(p, b, "padding", pad) &&
               put(p, b, "lhs_dilation", i64s(p, n, v[3])) &&
               put(p, b, "rhs_dilation", i64s(p, n, v[4])) &&
               (!cnt[5] || put(p, b, "window_reversal", ir_attr_bool_array(m, n, rev)));
    }
    if (!put(p, b, "window_dimensions", i64s(p, n, v[0])) ||
        !put(p, b, "window_strides", i64s(p, n, v[1])) || !put(p, b, "padding", pad))
        return false;
    return opc != IR_OP_REDUCE_WINDOW || (put(p, b, "base_dilations", i64s(p, n, v[3])) &&
                                          put(p, b, "window_dilations", i64s(p, n, v[4])));
}

/* dim_labels=b01f_01io->b01f: three groups of labels (input, kernel,
 * output), as the convolution's dimension numbers. */
static bool read_dim_labels(hp *p, hbuild *b, const struct hmap *mp)
{
    ir_module *m = p->m;
    char canon[3 * (4 * IR_MAX_RANK + 8)];
    int n = 0;
    skip_ws(p);
    int rank = -1;
    for (int g = 0; g < 3; g++) {
        static const char *const seps[] = {"_", "->", ""};
        const char *letters = g == 1 ? "io" : "bf", *start = p->p;
        bool seen[12] = {false};
        canon[n++] = '[';
        int k = 0;
        while (p->p < p->end && (isalnum((unsigned char)*p->p))) {
            /* each letter once, digits 0..rank-3 once each */
            char c = *p->p;
            int slot = c == letters[0] ? 10 : c == letters[1] ? 11 : c >= '0' && c <= '9' ? c - '0' : -1;
            if (slot < 0 || seen[slot])
                return perr(p, p->p, AP_ESYNTAX, "bad convolution dimension label '%c'", c);
            seen[slot] = true;
            if (k++)
                n += snprintf(canon + n, sizeof canon - (size_t)n, ", ");
            canon[n++] = *p->p++;
        }
        canon[n++] = ']';
        if (!k)
            return expected(p, "convolution dimension labels like b01f_01io->b01f");
        for (int d = 0; d < k - 2; d++)
            if (!seen[d] || !seen[10] || !seen[11])
                return perr(p, start, AP_ESYNTAX, "convolution dimension labels need %c, %c and 0..%d",
                            letters[0], letters[1], k - 3);
        if (k < 2 || !seen[10] || !seen[11] || (rank >= 0 && k != rank))
            return perr(p, start, AP_ESYNTAX, "convolution dimension labels need %c, %c and %s", letters[0],
                        letters[1], rank >= 0 ? "as many dimensions in each part" : "the spatial dimensions");
        rank = k;
        size_t sl = strlen(seps[g]);
        if (g < 2) {
            if ((size_t)(p->end - p->p) < sl || memcmp(p->p, seps[g], sl) != 0)
                return expected(p, g == 0 ? "'_' in the dimension labels" : "'->' in the dimension labels");
            p->p += sl;
            n += snprintf(canon + n, sizeof canon - (size_t)n, g == 0 ? "x" : "->");
        }
    }
    canon[n] = '\0';
    return put(p, b, mp->attr, ir_attr_dialect_raw(m, "stablehlo.conv", canon));
}

static bool read_mapped(hp *p, hbuild *b, const struct hmap *mp, ir_opcode opc, ivec *iv)
{
    ir_module *m = p->m;
    switch ((enum hconv)mp->conv) {
    case C_I64S:
        return parse_ilist(p, iv) && put(p, b, mp->attr, i64s(p, (int)iv->n, iv->v));
    case C_I64:
    case C_I32:
        if (!parse_ilist(p, iv))
            return false;
        if (iv->n != 1)
            return perr(p, p->p, AP_ESYNTAX, "'%s' needs exactly one value", mp->key);
        return put(p, b, mp->attr, mp->conv == C_I64 ? i64_attr(p, iv->v[0]) : i32_attr(p, iv->v[0]));
    case C_BOOL:
    case C_UNIT: {
        bool v;
        if (!parse_bool(p, &v))
            return false;
        if (mp->conv == C_UNIT)
            return !v || put(p, b, mp->attr, ir_attr_unit(m));
        return put(p, b, mp->attr, ir_attr_bool(m, v));
    }
    case C_STR: {
        if (peek(p) == '"') {
            const char *s;
            size_t sl;
            return lex_string(p, &s, &sl) && put(p, b, mp->attr, ir_attr_string(m, s, sl));
        }
        const char *s = p->p;
        p->p = p->end;
        return put(p, b, mp->attr, ir_attr_string(m, s, (size_t)(p->end - s)));
    }
    case C_F32: {
        double d;
        int64_t ign;
        bool ig;
        return lex_number(p, &d, &ign, &ig) &&
               put(p, b, mp->attr, ir_attr_float(m, (double)(float)d, ir_type_scalar(m, IR_E_F32, NULL)));
    }
    case C_ENUM:
        return put(p, b, mp->attr, enum_attr(p, mp->kind));
    case C_APIVER: {
        static const char *const names[] = {"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
                                            "API_VERSION_STATUS_RETURNING", "API_VERSION_STATUS_RETURNING_UNIFIED",
                                            "API_VERSION_TYPED_FFI"};
        const char *w;
        uint32_t wl;
        if (!expect_name(p, &w, &wl, "an API version"))
            return false;
        for (int i = 0; i < (int)AP_ARRAY_LEN(names); i++)
            if (text_is(w, wl, names[i]))
                return put(p, b, mp->attr, i32_attr(p, i));
        return perr(p, w, AP_ESYNTAX, "unknown api_version '%.*s'", (int)wl, w);
    }
    case C_PRECISION: {
        ir_attr *items[IR_MAX_RANK];
        int n = 0;
        if (!expect(p, '{', "'{' of the precisions"))
            return false;
        while (peek(p) != '}') {
            if (n == IR_MAX_RANK)
                return perr(p, p->p, AP_ELIMIT, "too many precisions");
            if (!(items[n++] = enum_attr(p, "precision")))
                return false;
            if (!accept(p, ','))
                break;
        }
        return expect(p, '}', "'}' of the precisions") && put(p, b, mp->attr, ir_attr_array(m, n, items));
    }
    case C_SLICE: {
        int64_t v[3][IR_MAX_RANK];
        int n = 0;
        if (!expect(p, '{', "'{' of the slice"))
            return false;
        while (peek(p) == '[') {
            if (n == IR_MAX_RANK)
                return perr(p, p->p, AP_ELIMIT, "too many slice dimensions");
            p->p++;
            v[2][n] = 1;
            if (!lex_int(p, &v[0][n]) || !expect(p, ':', "':' in a slice range") || !lex_int(p, &v[1][n]))
                return false;
            if (accept(p, ':') && !lex_int(p, &v[2][n]))
                return false;
            n++;
            if (!expect(p, ']', "']' after a slice range") || !accept(p, ','))
                break;
        }
        return expect(p, '}', "'}' of the slice") &&
               put(p, b, "start_indices", i64s(p, n, v[0])) &&
               put(p, b, "limit_indices", i64s(p, n, v[1])) &&
               put(p, b, "strides", i64s(p, n, v[2]));
    }
    case C_PADDING: {
        int64_t v[3][IR_MAX_RANK];
        int n = 0;
        for (;;) {
            int64_t one[3];
            int k;
            if (n == IR_MAX_RANK)
                return perr(p, p->p, AP_ELIMIT, "too many padding dimensions");
            if (!parse_sep_ints(p, '_', one, &k, 3))
                return false;
            if (k < 2)
                return expected(p, "'_' and the high padding");
            v[0][n] = one[0];
            v[1][n] = one[1];
            v[2][n++] = k == 3 ? one[2] : 0;
            if (p->p >= p->end || *p->p != 'x')
                break;
            p->p++;
        }
        return put(p, b, "edge_padding_low", i64s(p, n, v[0])) &&
               put(p, b, "edge_padding_high", i64s(p, n, v[1])) &&
               put(p, b, "interior_padding", i64s(p, n, v[2]));
    }
    case C_WINDOW:
        return read_window(p, b, opc);
    case C_DIMLABELS:
        return read_dim_labels(p, b, mp);
    case C_PAIRS:
    case C_GROUPS: {
        ir_attr *a = parse_groups(p, iv);
        if (!a)
            return false;
        if (mp->conv == C_PAIRS && a->type->dims[1] != 2 && a->type->dims[0] != 0)
            return perr(p, p->p, AP_ESYNTAX, "source_target_pairs need pairs");
        return put(p, b, mp->attr, a);
    }
    case C_CHANNEL: {
        int64_t h;
        if (!lex_int(p, &h))
            return false;
        ir_named_attr kv[2] = {{nm(p, "handle"), ir_attr_int(m, h, NULL)},
                               {nm(p, "type"), ir_attr_int(m, 1, NULL)}};
        if (!kv[0].name || !kv[1].name || !kv[0].value || !kv[1].value)
            return oom(p);
        return put(p, b, mp->attr, ir_attr_dialect_kv(m, "stablehlo.channel_handle", 2, kv));
    }
    }
    return false;
}

/* ======================================================== instructions */

static ir_op *emit(hp *p, const hbuild *b, ir_opcode opc, const char *name, uint32_t n_in, ir_value *const *in,
                   uint32_t n_out, const ir_type *const *out, uint32_t n_regions)
{
    ir_op *op = ir_op_new(p->m, opc, name, n_in, in, n_out, out, n_regions);
    if (!op) {
        oom(p);
        return NULL;
    }
    if (b && b->n) {
        if (!(op->attrs = ap_arena_memdup(&p->m->arena, b->na, sizeof *b->na * b->n))) {
            oom(p);
            return NULL;
        }
        op->n_attrs = b->n;
        if (opc != IR_OP_UNKNOWN)
            ir__sort_named(op->attrs, (int)op->n_attrs);
    }
    op->loc = p->cur_loc;
    op->src_line = p->cur_line;
    op->src_col = p->cur_col;
    ir_block_append(p->block, op);
    p->n_ops++;
    return op;
}

/* The value of instruction i as one SSA value: the results of a variadic
 * op are packed into one stablehlo.tuple made right after it. */
static ir_value *use_value(hp *p, uint32_t i)
{
    hinst *h = &p->insts[i];
    h->uses++;
    if (h->v)
        return h->v;
    ir_op *mop = h->multi;
    ir_op *t = ir_op_new(p->m, IR_OP_TUPLE, NULL, mop->n_results, NULL, 1, &h->type, 0);
    if (!t) {
        oom(p);
        return NULL;
    }
    for (uint32_t k = 0; k < mop->n_results; k++)
        t->operands[k] = &mop->results[k];
    t->loc = mop->loc;
    t->src_line = mop->src_line;
    t->src_col = mop->src_col;
    ir_block_insert_before(p->block, mop->next, t);
    p->n_ops++;
    return h->v = &t->results[0];
}

static bool grow_vals(hp *p, uint32_t n) { return GROW(p, p->vals, p->cap_vals, n); }

/* The operands' values into p->vals. */
static bool operand_values(hp *p)
{
    if (!grow_vals(p, p->n_opnds + 1))
        return false;
    for (uint32_t i = 0; i < p->n_opnds; i++)
        if (!(p->vals[i] = use_value(p, p->opnds[i])))
            return false;
    return true;
}

/* The elements of a tuple-shaped instruction as separate values (into
 * p->vals from `at`): a variadic op's results, a `tuple`'s operands, or
 * get_tuple_element ops. */
static bool flatten(hp *p, uint32_t i, uint32_t at, uint32_t *n)
{
    hinst *h = &p->insts[i];
    const ir_type *t = h->type;
    if (t->kind != IR_T_TUPLE) {
        *n = 1;
        return grow_vals(p, at + 1) && (p->vals[at] = use_value(p, i)) != NULL;
    }
    *n = (uint32_t)t->n_elems;
    if (!grow_vals(p, at + *n + 1))
        return false;
    h->uses++;
    for (uint32_t k = 0; k < *n; k++) {
        if (h->multi) {
            p->vals[at + k] = &h->multi->results[k];
        } else if (h->is_tuple) {
            p->vals[at + k] = h->v->def->operands[k];
        } else {
            hbuild b = {.n = 0};
            if (!put(p, &b, "index", i32_attr(p, k)))
                return false;
            ir_op *g = emit(p, &b, IR_OP_GET_TUPLE_ELEMENT, NULL, 1, &h->v, 1, &t->elems[k], 0);
            if (!g)
                return false;
            p->vals[at + k] = &g->results[0];
        }
    }
    return true;
}

/* frontend_attributes ::= '{' (key '=' (string | value))* '}' -> dict */
static ir_attr *parse_frontend(hp *p)
{
    ir_named_attr kv[HLO_MAX_ATTRS];
    int n = 0;
    if (!expect(p, '{', "'{' of the frontend attributes"))
        return NULL;
    while (peek(p) != '}') {
        const char *k;
        uint32_t kl;
        ir_attr *v;
        if (n == HLO_MAX_ATTRS)
            return perr(p, p->p, AP_ELIMIT, "too many frontend attributes"), NULL;
        if (!expect_name(p, &k, &kl, "a frontend attribute name") || !expect(p, '=', "'='"))
            return NULL;
        if (peek(p) == '"') {
            const char *s;
            size_t sl;
            if (!lex_string(p, &s, &sl))
                return NULL;
            v = ir_attr_string(p->m, s, sl);
        } else {
            const char *s;
            uint32_t sl;
            if (!capture_value(p, &s, &sl))
                return NULL;
            v = ir_attr_string(p->m, s, sl);
        }
        if (!v || !(kv[n].name = ir_intern(p->m, k, kl)))
            return oom(p), NULL;
        kv[n++].value = v;
        if (!accept(p, ','))
            break;
    }
    if (!expect(p, '}', "'}' of the frontend attributes"))
        return NULL;
    ir_attr *a = ir_attr_dict(p->m, n, kv);
    if (!a)
        oom(p);
    return a;
}

/* sharding and frontend_attributes, which every op and parameter keeps. */
static bool common_attrs(hp *p, hbuild *b)
{
    hattr *a = find_attr(p, "sharding");
    if (a && !put(p, b, "mhlo.sharding", ir_attr_string(p->m, a->val, a->vlen)))
        return false;
    if ((a = find_attr(p, "frontend_attributes"))) {
        hsave sv = enter_value(p, a);
        ir_attr *d = parse_frontend(p);
        if (!leave_value(p, sv, d != NULL) || !put(p, b, "mhlo.frontend_attributes", d))
            return false;
    }
    return true;
}

/* The attribute value as a string: a quoted string unescaped, else the
 * text as written. */
static ir_attr *raw_string(hp *p, hattr *a)
{
    if (a->vlen >= 2 && a->val[0] == '"' && a->val[a->vlen - 1] == '"') {
        hsave sv = enter_value(p, a);
        const char *s;
        size_t sl;
        bool ok = lex_string(p, &s, &sl);
        ir_attr *r = ok ? ir_attr_string(p->m, s, sl) : NULL;
        if (!leave_value(p, sv, ok))
            return NULL;
        if (!r)
            oom(p);
        return r;
    }
    ir_attr *r = ir_attr_string(p->m, a->val, a->vlen);
    if (!r)
        oom(p);
    return r;
}

/* Every attribute not read yet: through attr_maps for a registered op,
 * then the rest as strings ("hlo.KEY" on registered ops, "KEY" on
 * unknown ones). */
static bool op_attrs(hp *p, hbuild *b, ir_opcode opc)
{
    for (uint32_t i = 0; i < p->n_attrs; i++) {
        hattr *a = &p->attrs[i];
        if (a->used || opc == IR_OP_UNKNOWN)
            continue;
        for (size_t k = 0; k < AP_ARRAY_LEN(attr_maps); k++) {
            const struct hmap *mp = &attr_maps[k];
            if (!(mp->op == (int)opc || (mp->op == IR_OP_COLL_ANY && ir_op_info_get(opc)->kind == IR_K_COLL)) ||
                !text_is(a->key, a->klen, mp->key))
                continue;
            hsave sv = enter_value(p, a);
            if (!leave_value(p, sv, read_mapped(p, b, mp, opc, &p->iv)))
                return false;
            break;
        }
    }
    if (!common_attrs(p, b))
        return false;
    if ((opc == IR_OP_ALL_GATHER || opc == IR_OP_ALL_REDUCE || opc == IR_OP_REDUCE_SCATTER) &&
        !find_attr(p, "replica_groups")) {
        /* none given: one group of every device, which StableHLO writes
         * as an empty table (as XLA's importer does, and as `{}` reads) */
        int64_t empty[2] = {0, 0};
        const ir_type *t = ir_type_tensor(p->m, IR_E_I64, 2, empty);
        if (!put(p, b, "replica_groups", t ? ir_attr_dense_ints(p->m, t, 0, NULL) : NULL))
            return false;
    }
    for (uint32_t i = 0; i < p->n_attrs; i++) {
        hattr *a = &p->attrs[i];
        if (a->used || in_list(builder_keys, a->key, a->klen) || in_list(dropped_keys, a->key, a->klen))
            continue;
        char key[128];
        snprintf(key, sizeof key, "%s%.*s", opc == IR_OP_UNKNOWN ? "" : "hlo.", (int)(a->klen > 100 ? 100 : a->klen),
                 a->key);
        const char *name = ir_intern(p->m, key, strlen(key));
        ir_attr *v = raw_string(p, a);
        if (!name || !v)
            return name ? false : oom(p);
        if (b->n == AP_ARRAY_LEN(b->na))
            return perr(p, a->key, AP_ELIMIT, "too many attributes");
        b->na[b->n++] = (ir_named_attr){name, v};
    }
    return true;
}

/* Integer list attribute `key` into iv; false with no error when absent. */
static bool list_attr(hp *p, const char *key, ivec *iv, bool *present)
{
    hattr *a = find_attr(p, key);
    iv->n = 0;
    *present = a != NULL;
    if (!a)
        return true;
    hsave sv = enter_value(p, a);
    return leave_value(p, sv, parse_ilist(p, iv));
}

/* A dialect attribute `name<k = [..], ...>` from integer-list keys (empty
 * ones left out) and an optional trailing integer key. */
static bool dims_attr(hp *p, hbuild *b, const char *attr, const char *dialect, const char *const *keys,
                      const char *int_key)
{
    ir_named_attr kv[8];
    int n = 0;
    for (int k = 0; keys[k]; k++) {
        bool present;
        if (!list_attr(p, keys[k], &p->iv, &present))
            return false;
        if (!p->iv.n)
            continue;
        ir_attr *items[IR_MAX_RANK];
        if (p->iv.n > IR_MAX_RANK)
            return perr(p, p->p, AP_ELIMIT, "too many dimensions in '%s'", keys[k]);
        for (uint32_t i = 0; i < p->iv.n; i++)
            if (!(items[i] = ir_attr_int(p->m, p->iv.v[i], NULL)))
                return oom(p);
        kv[n++] = (ir_named_attr){nm(p, keys[k]), ir_attr_array(p->m, (int)p->iv.n, items)};
    }
    if (int_key) {
        bool present;
        if (!list_attr(p, int_key, &p->iv, &present))
            return false;
        if (p->iv.n != 1)
            return perr(p, p->p, AP_ESYNTAX, "needs %s=N", int_key);
        kv[n++] = (ir_named_attr){nm(p, int_key), ir_attr_int(p->m, p->iv.v[0], NULL)};
    }
    for (int i = 0; i < n; i++)
        if (!kv[i].name || !kv[i].value)
            return oom(p);
    return put(p, b, attr, ir_attr_dialect_kv(p->m, dialect, n, kv));
}

/* dot: the four dimension lists -> #stablehlo.dot<...>, the way the
 * pretty form `batching_dims = .. x .., contracting_dims = ..` reads. */
static bool dot_attrs(hp *p, hbuild *b)
{
    static const char *const keys[] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"};
    static const char *const names[] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                        "lhs_contracting_dimensions", "rhs_contracting_dimensions"};
    ir_attr *lists[4];
    for (int k = 0; k < 4; k++) {
        bool present;
        if (!list_attr(p, keys[k], &p->iv, &present))
            return false;
        ir_attr *items[IR_MAX_RANK];
        if (p->iv.n > IR_MAX_RANK)
            return perr(p, p->p, AP_ELIMIT, "too many dimensions in '%s'", keys[k]);
        for (uint32_t i = 0; i < p->iv.n; i++)
            if (!(items[i] = ir_attr_int(p->m, p->iv.v[i], NULL)))
                return oom(p);
        if (!(lists[k] = ir_attr_array(p->m, (int)p->iv.n, items)))
            return oom(p);
    }
    ir_named_attr kv[4];
    int n = 0;
    for (int k = 0; k < 4; k++) {
        bool keep = k < 2 ? lists[0]->u.arr.n || lists[1]->u.arr.n : lists[k]->u.arr.n > 0;
        if (keep && !(kv[n++] = (ir_named_attr){nm(p, names[k]), lists[k]}).name)
            return oom(p);
    }
    return put(p, b, "dot_dimension_numbers",
               n ? ir_attr_dialect_kv(p->m, "stablehlo.dot", n, kv) : ir_attr_dialect_raw(p->m, "stablehlo.dot", ""));
}

/* The computation named by an attribute value (`%name`). */
static bool comp_ref(hp *p, const char *s, uint32_t len, const char *at, uint32_t *ci)
{
    if (len && s[0] == '%') {
        s++;
        len--;
    }
    hent *e = htab_get(&p->comp_tab, s, len);
    if (!e)
        return perr(p, at, AP_EUNDEFINED, "use of undefined computation '%%%.*s'", (int)len, s);
    *ci = e->val;
    return true;
}

static bool add_fill(hp *p, ir_op *op, uint32_t region, uint32_t ci, int mode, ir_value *subst)
{
    hcomp *c = &p->comps[ci];
    if (mode != FILL_FUNC && c->depth + 1 > p->cur_depth) {
        if (c->depth + 1 > HLO_MAX_DEPTH)
            return perr(p, p->p, AP_ELIMIT, "computations nested more than %d deep", HLO_MAX_DEPTH);
        p->cur_depth = c->depth + 1;
    }
    if (!GROW(p, p->fills, p->cap_fills, p->n_fills + 1))
        return false;
    p->fills[p->n_fills++] = (hfill){op, region, ci, (uint8_t)mode, subst};
    c->refs++;
    return true;
}

/* Fills region r of op from the computation named by attribute `key`. */
static bool region_from(hp *p, ir_op *op, uint32_t r, const char *key, int mode)
{
    hattr *a = find_attr(p, key);
    if (!a)
        return perr(p, p->cur_at, AP_ESYNTAX, "'%s' needs %s=", op->name, key);
    a->used = true;
    uint32_t ci;
    return comp_ref(p, a->val, a->vlen, a->val, &ci) && add_fill(p, op, r, ci, mode, NULL);
}

/* Attributes of a func.func: name, visibility, type, argument and result
 * attributes. */
static ir_op *make_func(hp *p, uint32_t ci, const char *name, bool public)
{
    ir_module *m = p->m;
    hcomp *c = &p->comps[ci];
    const ir_type *ft = ir_type_function(m, (int)c->n_params, c->param_types, (int)c->n_flat, c->flat);
    ir_op *f = ir_op_new(m, IR_OP_FUNC, NULL, 0, NULL, 0, NULL, 1);
    hbuild *b = ap_malloc(sizeof *b);
    ir_attr **res = ap_malloc(sizeof *res * (c->n_flat + 1));
    bool ok = ft && f && b && res;
    if (ok) {
        b->n = 0;
        ok = put(p, b, "sym_name", ir_attr_string(m, name, strlen(name))) &&
             put(p, b, "sym_visibility", ir_attr_string(m, public ? "public" : "private", public ? 6 : 7)) &&
             put(p, b, "function_type", ir_attr_type(m, ft)) &&
             (!public || put(p, b, "hlo.computation_name", ir_attr_string(m, c->name, strlen(c->name))));
    }
    bool any = false;
    for (uint32_t i = 0; ok && i < c->n_params; i++)
        any |= c->param_attrs[i] != NULL;
    if (public && p->n_io_alias)
        any = true;
    if (ok && any) {
        ir_attr **v = ap_malloc(sizeof *v * c->n_params);
        ok = v != NULL;
        for (uint32_t i = 0; ok && i < c->n_params; i++)
            ok = (v[i] = c->param_attrs[i] ? c->param_attrs[i] : ir_attr_dict(m, 0, NULL)) != NULL;
        /* donation (the header's input_output_alias), as JAX writes it */
        for (uint32_t k = 0; ok && public && k < p->n_io_alias; k++) {
            /* XLA refuses an alias of a parameter or output that does not
             * exist; a donated buffer holds the output, which the
             * partitioning keeps in the parameter's layout: one type */
            uint32_t i = p->io_alias[k].param, o = p->io_alias[k].output;
            if (i >= c->n_params) {
                ok = perr(p, p->io_alias[k].at, AP_ETYPE,
                          "input_output_alias: output {%u} takes the buffer of parameter %u, but ENTRY has %u parameter%s",
                          o, i, c->n_params, c->n_params == 1 ? "" : "s");
                break;
            }
            if (o >= c->n_flat) {
                ok = perr(p, p->io_alias[k].at, AP_ETYPE,
                          "input_output_alias: output {%u} takes the buffer of parameter %u, but ENTRY returns %u output%s", o,
                          i, c->n_flat, c->n_flat == 1 ? "" : "s");
                break;
            }
            if (!ir_type_equal(c->param_types[i], c->flat[o])) {
                ap_buf ta, tb;
                ap_buf_init(&ta);
                ap_buf_init(&tb);
                ir_type_print(&ta, c->param_types[i]);
                ir_type_print(&tb, c->flat[o]);
                ok = perr(p, p->io_alias[k].at, AP_ETYPE,
                          "input_output_alias: output {%u}, a %s, takes the buffer of parameter %u, a %s: a donated "
                          "parameter's buffer holds the output, so both must have one type",
                          o, tb.data ? tb.data : "?", i, ta.data ? ta.data : "?");
                ap_buf_free(&ta);
                ap_buf_free(&tb);
                break;
            }
            const ir_attr *d = v[i];
            int n = d->u.dict.n;
            ir_named_attr *items = ap_malloc(sizeof *items * (size_t)(n + 1));
            const char *key = nm(p, "tf.aliasing_output");
            ok = items && key;
            if (ok) {
                memcpy(items, d->u.dict.items, sizeof *items * (size_t)n);
                items[n] = (ir_named_attr){key, i32_attr(p, p->io_alias[k].output)};
                ok = items[n].value && (v[i] = ir_attr_dict(m, n + 1, items)) != NULL;
            }
            ap_free(items);
        }
        ok = ok && put(p, b, "arg_attrs", ir_attr_array(m, (int)c->n_params, v));
        ap_free(v);
    }
    /* the ROOT's sharding per result: split a tuple sharding {{a}, {b}} */
    if (ok && public && c->root_sharding && c->n_flat) {
        const char *s = c->root_sharding, *e = s + c->root_sharding_len;
        uint32_t n = 0;
        bool tuple = c->root_type->kind == IR_T_TUPLE;
        if (!tuple) {
            res[n++] = ir_attr_string(m, s, (size_t)(e - s));
        } else if (e - s >= 4 && s[0] == '{' && s[1] == '{' && e[-1] == '}') {
            const char *q = s + 1, *start = q;
            int depth = 0;
            for (; q < e - 1; q++) {
                if (*q == '{' || *q == '[' || *q == '(')
                    depth++;
                else if (*q == '}' || *q == ']' || *q == ')')
                    depth--;
                if ((*q == ',' && depth == 0) || q == e - 2) {
                    const char *end = *q == ',' ? q : q + 1;
                    while (start < end && *start == ' ')
                        start++;
                    if (n == c->n_flat) {
                        n++;
                        break;
                    }
                    res[n++] = ir_attr_string(m, start, (size_t)(end - start));
                    start = q + 1;
                }
            }
        }
        if (n == c->n_flat) {
            for (uint32_t i = 0; ok && i < n; i++) {
                ir_named_attr kv = {nm(p, "mhlo.sharding"), res[i]};
                ok = kv.name && kv.value && (res[i] = ir_attr_dict(m, 1, &kv)) != NULL;
            }
            ok = ok && put(p, b, "res_attrs", ir_attr_array(m, (int)n, res));
        }
    }
    if (ok) {
        if (!(f->attrs = ap_arena_memdup(&m->arena, b->na, sizeof *b->na * b->n)))
            ok = oom(p);
        else {
            f->n_attrs = b->n;
            ir__sort_named(f->attrs, (int)f->n_attrs);
        }
    }
    ap_free(b);
    ap_free(res);
    if (!ok || !GROW(p, p->funcs, p->cap_funcs, p->n_funcs + 1) || !add_fill(p, f, 0, ci, FILL_FUNC, NULL)) {
        if (!p->failed)
            oom(p);
        return NULL;
    }
    p->funcs[p->n_funcs++] = f;
    p->comps[ci].func = f;
    return f;
}

/* A symbol name for a called computation that cannot clash with @main. */
static const char *func_name(hp *p, uint32_t ci)
{
    const char *name = p->comps[ci].name;
    if (strcmp(name, "main") != 0)
        return name;
    char buf[64];
    for (int k = 0;; k++) {
        snprintf(buf, sizeof buf, k ? "main.hlo.%d" : "main.hlo", k);
        if (!htab_get(&p->comp_tab, buf, (uint32_t)strlen(buf)))
            break;
    }
    const char *s = ir_intern(p->m, buf, strlen(buf));
    if (!s)
        oom(p);
    return s;
}

/* conditional: branch_computations={%a, %b, ..} (an index picks one) or
 * true_computation= and false_computation= (a predicate), each branch
 * taking its own operand; the op made into *op. */
static bool build_case(hp *p, hbuild *b, const ir_type *t, uint32_t n_out, const ir_type *const *out, const char *at,
                       ir_op **op)
{
    bool ok = true;
    uint32_t br[256], n = 0;
    hattr *a = find_attr(p, "branch_computations");
    bool if_form = !a;
    if (a) {
        hsave sv = enter_value(p, a);
        bool lok = expect(p, '{', "'{' of the branch computations");
        while (lok && peek(p) != '}') {
            const char *s;
            uint32_t sl;
            const char *cat = (skip_ws(p), p->p);
            if (n == AP_ARRAY_LEN(br))
                lok = perr(p, cat, AP_ELIMIT, "too many branches");
            else
                lok = expect_name(p, &s, &sl, "a computation") && comp_ref(p, s, sl, cat, &br[n++]);
            if (!accept(p, ','))
                break;
        }
        lok = lok && expect(p, '}', "'}' of the branch computations");
        if (!(ok = leave_value(p, sv, lok)))
            return false;
    } else {
        static const char *const keys[] = {"true_computation", "false_computation"};
        for (int k = 0; ok && k < 2; k++) {
            hattr *ka = find_attr(p, keys[k]);
            if (!ka) {
                ok = perr(p, at, AP_ESYNTAX, "conditional needs branch_computations= or %s=", keys[k]);
                break;
            }
            ka->used = true;
            ok = comp_ref(p, ka->val, ka->vlen, ka->val, &br[n++]);
        }
        if (!ok)
            return false;
    }
    if (p->n_opnds != n + 1)
        return perr(p, at, AP_ESYNTAX, "conditional with %u branches needs %u operands", n, n + 1);
    for (uint32_t k = 0; ok && k < n; k++) {
        hcomp *bc = &p->comps[br[k]];
        if (bc->n_params != 1 || bc->param_types[0] != p->insts[p->opnds[k + 1]].type || bc->root_type != t)
            ok = perr(p, at, AP_ETYPE, "branch computation '%%%s' does not match the conditional", bc->name);
    }
    ok = ok && op_attrs(p, b, IR_OP_CASE) && operand_values(p) &&
         (*op = emit(p, b, if_form ? IR_OP_IF : IR_OP_CASE, NULL, 1, p->vals, n_out, out, n)) != NULL;
    for (uint32_t k = 0; ok && k < n; k++)
        ok = add_fill(p, *op, k, br[k], FILL_FLAT, p->vals[k + 1]);
    return ok;
}

/* Builds the ops of an instruction of a registered (or unknown) opcode. */
static bool build(hp *p, const struct hop *info, hinst *h, const char *opname, uint32_t oplen, const char *at)
{
    ir_module *m = p->m;
    ir_opcode opc = info ? info->op : IR_OP_UNKNOWN;
    const ir_type *t = h->type;
    bool multi = info && (info->flags & MULTI) && t->kind == IR_T_TUPLE;
    uint32_t n_out = multi ? (uint32_t)t->n_elems : 1;
    const ir_type *const *out = multi ? t->elems : &t;
    hbuild *b = &p->bld;
    bool ok = true;
    ir_op *op = NULL;
    b->n = 0;
    switch (opc) {
    case IR_OP_GET_TUPLE_ELEMENT: {
        bool present;
        hinst *src = p->n_opnds == 1 ? &p->insts[p->opnds[0]] : NULL;
        if (!src)
            return perr(p, at, AP_ESYNTAX, "get-tuple-element needs one operand");
        if (!(ok = list_attr(p, "index", &p->iv, &present)))
            break;
        if (p->iv.n != 1 || src->type->kind != IR_T_TUPLE || p->iv.v[0] < 0 || p->iv.v[0] >= src->type->n_elems ||
            src->type->elems[p->iv.v[0]] != t) {
            ok = perr(p, at, AP_ETYPE, "get-tuple-element needs an index of its tuple operand with the element's shape");
            break;
        }
        int64_t k = p->iv.v[0];
        if (src->multi) { /* names the result itself */
            src->uses++;
            h->v = &src->multi->results[k];
            return true;
        }
        ok = put(p, b, "index", i32_attr(p, k)) && op_attrs(p, b, opc) && operand_values(p) &&
             (op = emit(p, b, opc, NULL, 1, p->vals, 1, &t, 0)) != NULL;
        break;
    }
    case IR_OP_OPTIMIZATION_BARRIER: {
        uint32_t n = 0;
        if (p->n_opnds != 1) {
            ok = perr(p, at, AP_ESYNTAX, "opt-barrier needs one operand");
            break;
        }
        ok = flatten(p, p->opnds[0], 0, &n) && op_attrs(p, b, opc) &&
             (op = emit(p, b, opc, NULL, n, p->vals, n_out, out, 0)) != NULL;
        break;
    }
    case IR_OP_WHILE:
        ok = op_attrs(p, b, opc) && operand_values(p) &&
             (op = emit(p, b, opc, NULL, p->n_opnds, p->vals, 1, &t, 2)) != NULL &&
             region_from(p, op, 0, "condition", FILL_TUPLE) && region_from(p, op, 1, "body", FILL_TUPLE);
        break;
    case IR_OP_CASE:
        ok = build_case(p, b, t, n_out, out, at, &op);
        break;
    case IR_OP_FUNC_CALL: {
        hattr *a = find_attr(p, "to_apply");
        uint32_t ci;
        if (!a) {
            ok = perr(p, at, AP_ESYNTAX, "call needs to_apply=");
            break;
        }
        a->used = true;
        if (!(ok = comp_ref(p, a->val, a->vlen, a->val, &ci)))
            break;
        hcomp *c = &p->comps[ci];
        if (c->root_type != t || c->n_params != p->n_opnds) {
            ok = perr(p, at, AP_ETYPE, "call does not match the signature of '%%%s'", c->name);
            break;
        }
        if (!c->func) {
            const char *fname = func_name(p, ci);
            if (!(ok = fname && make_func(p, ci, fname, false)))
                break;
        }
        ir_attr *name = ir_op_attr(p->comps[ci].func, "sym_name");
        ok = put(p, b, "callee", ir_attr_symref(m, name->u.str.s)) && op_attrs(p, b, opc) && operand_values(p) &&
             (op = emit(p, b, opc, NULL, p->n_opnds, p->vals, n_out, out, 0)) != NULL;
        break;
    }
    case IR_OP_ALL_TO_ALL: {
        bool present;
        hattr *g = find_attr(p, "replica_groups");
        if (!(ok = list_attr(p, "dimensions", &p->iv2, &present)))
            break;
        ir_attr *groups = NULL;
        if (g) {
            hsave sv = enter_value(p, g);
            groups = parse_groups(p, &p->iv);
            if (!(ok = leave_value(p, sv, groups != NULL)))
                break;
        }
        if (p->iv2.n != 1 || !groups || groups->type->dims[1] < 1) { /* tuple form */
            hattr *d = find_attr(p, "dimensions");
            if (g)
                g->used = false;
            if (d)
                d->used = false;
            opc = IR_OP_UNKNOWN;
            goto unknown;
        }
        ok = put(p, b, "split_dimension", i64_attr(p, p->iv2.v[0])) &&
             put(p, b, "concat_dimension", i64_attr(p, p->iv2.v[0])) &&
             put(p, b, "split_count", i64_attr(p, groups->type->dims[1])) && put(p, b, "replica_groups", groups) &&
             op_attrs(p, b, opc) && operand_values(p) &&
             (op = emit(p, b, opc, NULL, p->n_opnds, p->vals, n_out, out, 0)) != NULL;
        break;
    }
    case IR_OP_UNKNOWN:
    unknown: {
        char name[96];
        snprintf(name, sizeof name, "hlo.%.*s", (int)(oplen > 80 ? 80 : oplen), opname);
        ok = op_attrs(p, b, IR_OP_UNKNOWN) && operand_values(p) &&
             (op = emit(p, b, IR_OP_UNKNOWN, name, p->n_opnds, p->vals, 1, &t, 0)) != NULL;
        multi = false;
        break;
    }
    default: {
        uint32_t n_regions = info->flags & REGION ? 1 : opc == IR_OP_SELECT_AND_SCATTER ? 2 : 0;
        if (opc == IR_OP_TUPLE) {
            bool match = t->kind == IR_T_TUPLE && (uint32_t)t->n_elems == p->n_opnds;
            for (uint32_t k = 0; match && k < p->n_opnds; k++)
                match = p->insts[p->opnds[k]].type == t->elems[k];
            if (!match) {
                ok = perr(p, at, AP_ETYPE, "tuple operands do not match its shape");
                break;
            }
        } else if (opc == IR_OP_DOT_GENERAL) {
            ok = dot_attrs(p, b);
        } else if (opc == IR_OP_GATHER) {
            static const char *const keys[] = {"offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                                                "start_indices_batching_dims", "start_index_map", NULL};
            ok = dims_attr(p, b, "dimension_numbers", "stablehlo.gather", keys, "index_vector_dim");
        } else if (opc == IR_OP_SCATTER) {
            static const char *const keys[] = {"update_window_dims", "inserted_window_dims", "input_batching_dims",
                                                "scatter_indices_batching_dims", "scatter_dims_to_operand_dims", NULL};
            ok = dims_attr(p, b, "scatter_dimension_numbers", "stablehlo.scatter", keys, "index_vector_dim");
        } else if (opc == IR_OP_COMPARE && !find_attr(p, "type") && p->n_opnds) {
            const ir_type *ot = p->insts[p->opnds[0]].type;
            ir_elem e = ot->kind == IR_T_TENSOR ? (ir_elem)ot->elem : IR_E_NONE;
            const char *ct = ir_elem_is_float(e) || ir_elem_is_complex(e) ? "comparison_type FLOAT"
                             : e == IR_E_I1 || ir_elem_is_unsigned(e)     ? "comparison_type UNSIGNED"
                                                                          : "comparison_type SIGNED";
            ok = put(p, b, "compare_type", ir_attr_dialect_raw(m, "stablehlo", ct));
        } else if (opc == IR_OP_CONVOLUTION) {
            ok = (find_attr(p, "feature_group_count") || put(p, b, "feature_group_count", i64_attr(p, 1))) &&
                 (find_attr(p, "batch_group_count") || put(p, b, "batch_group_count", i64_attr(p, 1)));
        }
        ok = ok && op_attrs(p, b, opc) && operand_values(p) &&
             (op = emit(p, b, opc, NULL, p->n_opnds, p->vals, n_out, out, n_regions)) != NULL;
        if (ok && opc == IR_OP_SELECT_AND_SCATTER)
            ok = region_from(p, op, 0, "select", FILL_FLAT) && region_from(p, op, 1, "scatter", FILL_FLAT);
        else if (ok && n_regions)
            ok = region_from(p, op, 0, "to_apply", FILL_FLAT);
        break;
    }
    }
    if (!ok)
        return false;
    h->is_tuple = opc == IR_OP_TUPLE;
    if (multi)
        h->multi = op;
    else
        h->v = &op->results[0];
    return true;
}

/* Room for the definitions and attributes of `need` parameters. */
static bool param_meta(hp *p, uint32_t need)
{
    if (need <= p->cap_pmeta)
        return true;
    uint32_t cap = p->cap_pmeta ? p->cap_pmeta : 16;
    while (cap < need)
        cap *= 2;
    bool *d = ap_realloc(p->param_def, sizeof *d * cap);
    if (d)
        p->param_def = d;
    ir_attr **a = ap_realloc(p->param_attrs, sizeof *a * cap);
    if (a)
        p->param_attrs = a;
    if (!d || !a)
        return oom(p);
    p->cap_pmeta = cap;
    return true;
}

/* Makes room for parameter k of the computation being parsed.  Without a
 * signature the arguments grow; values already handed out are moved. */
static bool param_slot(hp *p, int64_t k, const char *at)
{
    /* every parameter takes an instruction of 16 bytes or more: a number
     * beyond what the text can define would only allocate arguments */
    if (k < 0 || k >= (1 << 20) || (uint64_t)k * 16 > (uint64_t)(p->lx.end - p->src))
        return perr(p, at, AP_ESYNTAX, "parameter number %" PRId64 " out of range", k);
    if (p->have_sig) {
        if ((uint32_t)k >= p->n_params)
            return perr(p, at, AP_ESYNTAX, "parameter number %" PRId64 " but the signature has %u parameters", k,
                        p->n_params);
        return true;
    }
    uint32_t need = (uint32_t)k + 1;
    if (need > p->cap_params) {
        uint32_t cap = p->cap_params ? p->cap_params : 16;
        while (cap < need)
            cap *= 2;
        ir_value *nv = ir__zalloc(p->m, sizeof *nv * cap), *old = p->params;
        if (!nv)
            return oom(p);
        if (p->n_params)
            memcpy(nv, old, sizeof *nv * p->n_params);
        /* re-point every use of the old arguments */
        for (ir_op *op = old ? p->block->first : NULL; op; op = op->next)
            for (uint32_t i = 0; i < op->n_operands; i++)
                if (op->operands[i] >= old && op->operands[i] < old + p->n_params)
                    op->operands[i] = nv + (op->operands[i] - old);
        for (uint32_t i = 0; old && i < p->n_insts; i++)
            if (p->insts[i].v >= old && p->insts[i].v < old + p->n_params)
                p->insts[i].v = nv + (p->insts[i].v - old);
        for (uint32_t i = 0; old && i < p->n_fills; i++)
            if (p->fills[i].subst >= old && p->fills[i].subst < old + p->n_params)
                p->fills[i].subst = nv + (p->fills[i].subst - old);
        p->params = nv;
        p->cap_params = cap;
    }
    return param_meta(p, need);
}

/* instruction ::= 'ROOT'? name '=' shape opcode '(' operands ')' attrs */
static bool parse_instruction(hp *p, int32_t *root)
{
    ir_module *m = p->m;
    skip_ws(p);
    const char *at = p->p;
    bool is_root = accept_word(p, "ROOT");
    const char *name, *opname, *name_at = (skip_ws(p), p->p);
    uint32_t len, oplen;
    const ir_type *t;
    if (!expect_name(p, &name, &len, "an instruction name or '}'"))
        return false;
    if (!expect(p, '=', "'=' after the instruction name") || !parse_shape(p, &t))
        return false;
    const char *op_at = (skip_ws(p), p->p);
    if (!expect_name(p, &opname, &oplen, "an opcode") || !expect(p, '(', "'(' after the opcode"))
        return false;
    p->cur_at = op_at;
    if (inst_find(p, name, len) >= 0)
        return perr(p, name_at, AP_ESYNTAX, "redefinition of instruction '%%%.*s'", (int)len, name);
    int line, col;
    ir__lex_pos(&p->lx, is_root ? at : name_at, &line, &col);
    p->cur_line = (uint32_t)line;
    p->cur_col = (uint32_t)col;
    hent *oe = htab_get(&p->op_tab, opname, oplen);
    const struct hop *info = oe ? &hlo_ops[oe->val] : NULL;
    if (!GROW(p, p->insts, p->cap_insts, p->n_insts + 1))
        return false;
    hinst *h = &p->insts[p->n_insts];
    memset(h, 0, sizeof *h);
    h->type = t;
    h->name = name;
    h->len = len;
    if (!inst_enter(p)) /* (not found until counted: an operand naming itself is undefined) */
        return false;
    bool ok = true;
    bool is_param = info && strcmp(info->name, "parameter") == 0;
    if (is_param) {
        int64_t k;
        if (!lex_int(p, &k) || !expect(p, ')', "')'") || !parse_attr_list(p) || !param_slot(p, k, op_at))
            return false;
        if (p->have_sig && p->sig[k] != t)
            return perr(p, op_at, AP_ETYPE, "parameter %" PRId64 " differs from the computation's signature", k);
        if (!p->have_sig && (uint32_t)k >= p->n_params) {
            for (uint32_t i = p->n_params; i <= (uint32_t)k; i++)
                p->param_def[i] = false;
            p->n_params = (uint32_t)k + 1;
        }
        if (p->param_def[k])
            return perr(p, op_at, AP_ESYNTAX, "parameter %" PRId64 " is defined twice", k);
        p->param_def[k] = true;
        ir_value *v = &p->params[k];
        v->type = t;
        v->block = p->block;
        v->index = (uint32_t)k;
        if (!(v->loc = p->cur_loc = inst_loc(p, name, len)))
            return false;
        hbuild b = {.n = 0};
        if (!common_attrs(p, &b))
            return false;
        p->param_attrs[k] = b.n ? ir_attr_dict(m, (int)b.n, b.na) : NULL;
        if (b.n && !p->param_attrs[k])
            return oom(p);
        h->v = v;
    } else if (info && info->op == IR_OP_CONSTANT && t->kind == IR_T_TENSOR) {
        ir_attr *lit = parse_literal(p, t);
        if (!lit || !expect(p, ')', "')' after the literal") || !parse_attr_list(p) ||
            !(p->cur_loc = inst_loc(p, name, len)))
            return false;
        hbuild b = {.n = 0};
        ir_op *op = NULL;
        ok = put(p, &b, "value", lit) && op_attrs(p, &b, IR_OP_CONSTANT) &&
             (op = emit(p, &b, IR_OP_CONSTANT, NULL, 0, NULL, 1, &t, 0)) != NULL;
        if (!ok)
            return false;
        h->v = &op->results[0];
    } else {
        p->n_opnds = 0;
        if (info && info->op == IR_OP_CONSTANT)
            return perr(p, op_at, AP_EUNSUPPORTED, "tuple-shaped constants are not supported");
        if (peek(p) != ')') {
            do {
                const ir_type *decl = NULL;
                const char *o;
                uint32_t ol;
                if (shape_ahead(p) && !parse_shape(p, &decl))
                    return false;
                const char *o_at = (skip_ws(p), p->p);
                if (!expect_name(p, &o, &ol, "an operand"))
                    return false;
                int64_t oi = inst_find(p, o, ol);
                if (oi < 0)
                    return perr(p, o_at, AP_EUNDEFINED, "use of undefined instruction '%%%.*s'", (int)ol, o);
                if (decl && decl != p->insts[oi].type)
                    return perr(p, o_at, AP_ETYPE, "operand '%%%.*s' does not have the shape written before it",
                                (int)ol, o);
                if (!GROW(p, p->opnds, p->cap_opnds, p->n_opnds + 1))
                    return false;
                p->opnds[p->n_opnds++] = (uint32_t)oi;
            } while (accept(p, ','));
        }
        if (!expect(p, ')', "',' or ')' after the operands") || !parse_attr_list(p) ||
            !(p->cur_loc = inst_loc(p, name, len)))
            return false;
        if (!build(p, info, h, opname, oplen, op_at))
            return false;
    }
    if (is_root) {
        if (*root >= 0)
            return perr(p, at, AP_ESYNTAX, "more than one ROOT instruction");
        *root = (int32_t)p->n_insts;
    }
    p->n_insts++;
    p->n_insts_total++;
    return true;
}

/* ========================================================= computations */

/* computation ::= 'ENTRY'? name ('(' (name ':' shape (',' ..)*)? ')')?
 *                 ('->' shape)? attrs '{' instruction* '}' */
static bool parse_computation(hp *p)
{
    ir_module *m = p->m;
    skip_ws(p);
    const char *at = p->p;
    bool entry = accept_word(p, "ENTRY");
    const char *name;
    uint32_t len;
    if (!expect_name(p, &name, &len, "a computation name"))
        return false;
    if (htab_get(&p->comp_tab, name, len))
        return perr(p, at, AP_ESYNTAX, "redefinition of computation '%%%.*s'", (int)len, name);
    p->n_sig = 0;
    p->have_sig = accept(p, '(');
    if (p->have_sig && peek(p) != ')') {
        do {
            const char *pn;
            uint32_t pl;
            const ir_type *t;
            if (!expect_name(p, &pn, &pl, "a parameter name") || !expect(p, ':', "':' and the parameter's shape") ||
                !parse_shape(p, &t) || !GROW(p, p->sig, p->cap_sig, p->n_sig + 1))
                return false;
            p->sig[p->n_sig++] = t;
        } while (accept(p, ','));
    }
    if (p->have_sig && !expect(p, ')', "',' or ')' after the parameters"))
        return false;
    const ir_type *ret = NULL;
    if (peek(p) == '-' && p->p + 1 < p->end && p->p[1] == '>') {
        p->p += 2;
        if (!parse_shape(p, &ret))
            return false;
    }
    if (!parse_attr_list(p) || !expect(p, '{', "'{' to start the computation"))
        return false;
    /* the body */
    insts_clear(p);
    p->cur_depth = 0;
    if (!(p->block = ir_block_new(m, NULL, 0, NULL)))
        return oom(p);
    p->n_params = p->have_sig ? p->n_sig : 0;
    p->cap_params = p->n_params;
    p->params = p->n_params ? ir__zalloc(m, sizeof *p->params * p->n_params) : NULL;
    if ((p->n_params && !p->params) || !param_meta(p, p->n_params + 1))
        return p->failed ? false : oom(p);
    for (uint32_t i = 0; i < p->n_params; i++)
        p->param_def[i] = false;
    int32_t root = -1;
    const ir_loc *root_loc = NULL;
    uint32_t root_line = 0, root_col = 0;
    const char *root_sh = NULL;
    uint32_t root_sh_len = 0;
    while (peek(p) != '}') {
        if (at_end(p))
            return expected(p, "'}' to close the computation");
        bool had_root = root >= 0;
        if (!parse_instruction(p, &root))
            return false;
        if (!had_root) { /* the ROOT, or the last instruction so far */
            hattr *sh = find_attr(p, "sharding");
            root_loc = p->cur_loc;
            root_line = p->cur_line;
            root_col = p->cur_col;
            root_sh = sh ? sh->val : NULL;
            root_sh_len = sh ? sh->vlen : 0;
        }
    }
    p->p++;
    if (!p->n_insts)
        return perr(p, at, AP_ESYNTAX, "computation '%%%.*s' has no instructions", (int)len, name);
    for (uint32_t i = 0; i < p->n_params; i++)
        if (!p->param_def[i])
            return perr(p, at, AP_ESYNTAX, "computation '%%%.*s' does not define parameter %u", (int)len, name, i);
    if (root < 0)
        root = (int32_t)p->n_insts - 1;
    hinst *r = &p->insts[root];
    if (ret && ret != r->type)
        return perr(p, at, AP_ETYPE, "computation '%%%.*s' returns a shape other than its ROOT's", (int)len, name);
    /* the block takes the parameters as its arguments */
    ir_block *blk = p->block;
    blk->args = p->params;
    blk->n_args = p->n_params;
    if (!GROW(p, p->comps, p->cap_comps, p->n_comps + 1))
        return false;
    hcomp *c = &p->comps[p->n_comps];
    memset(c, 0, sizeof *c);
    c->name = ir_intern(m, name, len);
    c->at = at;
    c->body = blk;
    c->n_params = p->n_params;
    c->param_types = ir__alloc(m, sizeof *c->param_types * (p->n_params + 1));
    c->param_attrs = ir__alloc(m, sizeof *c->param_attrs * (p->n_params + 1));
    if (!c->name || !c->param_types || !c->param_attrs)
        return oom(p);
    for (uint32_t i = 0; i < p->n_params; i++) {
        c->param_types[i] = p->params[i].type;
        c->param_attrs[i] = p->param_attrs[i];
    }
    c->root_type = r->type;
    c->root_v = r->v;
    c->root_multi = r->multi;
    c->root_tuple = r->is_tuple && r->uses == 0 ? r->v->def : NULL;
    c->root_loc = root_loc;
    c->root_line = root_line;
    c->root_col = root_col;
    c->root_sharding = root_sh;
    c->root_sharding_len = root_sh_len;
    c->depth = p->cur_depth;
    bool tuple = r->type->kind == IR_T_TUPLE;
    c->n_flat = tuple ? (uint32_t)r->type->n_elems : 1;
    c->flat = tuple ? (const ir_type **)r->type->elems : c->param_types + p->n_params; /* spare slot */
    if (!tuple)
        c->flat[0] = r->type;
    uint32_t ci = p->n_comps++;
    if (!htab_put(p, &p->comp_tab, name, len, ci))
        return false;
    if (entry) {
        if (p->entry >= 0)
            return perr(p, at, AP_ESYNTAX, "more than one ENTRY computation");
        p->entry = (int32_t)ci;
        if (!make_func(p, ci, "main", true))
            return false;
    }
    return true;
}

/* ================================================================ fills */

static bool vm_push(hp *p, const ir_value *from, ir_value *to)
{
    if (!GROW(p, p->vm_from, p->cap_vm, p->n_vm + 1) ||
        (p->n_vm + 1 > p->cap_vm2 && !grow_array(p, (void **)&p->vm_to, &p->cap_vm2, p->n_vm + 1, sizeof *p->vm_to)))
        return false;
    ((ir_value *)from)->id = p->n_vm; /* template values: id is scratch */
    p->vm_from[p->n_vm] = from;
    p->vm_to[p->n_vm++] = to;
    return true;
}

static ir_value *vm_get(hp *p, const ir_value *v)
{
    if (v && v->id < p->n_vm && p->vm_from[v->id] == v)
        return p->vm_to[v->id];
    perr(p, NULL, AP_EINTERNAL, "value defined outside the computation being cloned");
    return NULL;
}

/* Copies the ops of src (but `skip`) to the end of dst, mapping values. */
static bool clone_block(hp *p, ir_block *dst, const ir_block *src, const ir_op *skip)
{
    ir_module *m = p->m;
    for (const ir_op *op = src->first; op; op = op->next) {
        if (op == skip)
            continue;
        if (++p->n_ops > p->max_ops)
            return perr(p, p->src, AP_ELIMIT, "computations expand to more than %" PRIu64 " ops", p->max_ops);
        ir_op *n = ir__alloc(m, sizeof *n);
        if (!n)
            return oom(p);
        *n = *op;
        n->operands = op->n_operands ? ir__alloc(m, sizeof *n->operands * op->n_operands) : NULL;
        n->results = op->n_results ? ir__zalloc(m, sizeof *n->results * op->n_results) : NULL;
        n->regions = op->n_regions ? ir__zalloc(m, sizeof *n->regions * op->n_regions) : NULL;
        n->attrs = op->n_attrs ? ap_arena_memdup(&m->arena, op->attrs, sizeof *op->attrs * op->n_attrs) : NULL;
        if ((op->n_operands && !n->operands) || (op->n_results && !n->results) || (op->n_regions && !n->regions) ||
            (op->n_attrs && !n->attrs))
            return oom(p);
        for (uint32_t i = 0; i < op->n_operands; i++)
            if (!(n->operands[i] = vm_get(p, op->operands[i])))
                return false;
        for (uint32_t i = 0; i < op->n_regions; i++) {
            n->regions[i].parent = n;
            for (const ir_block *b = op->regions[i].first; b; b = b->next) {
                ir_block *nb = ir_block_new(m, &n->regions[i], 0, NULL);
                if (!nb)
                    return oom(p);
                nb->n_args = b->n_args;
                if (b->n_args && !(nb->args = ir__zalloc(m, sizeof *nb->args * b->n_args)))
                    return oom(p);
                for (uint32_t k = 0; k < b->n_args; k++) {
                    nb->args[k] = b->args[k];
                    nb->args[k].block = nb;
                    if (!vm_push(p, &b->args[k], &nb->args[k]))
                        return false;
                }
                if (!clone_block(p, nb, b, NULL))
                    return false;
            }
        }
        for (uint32_t i = 0; i < op->n_results; i++) {
            n->results[i] = op->results[i];
            n->results[i].def = n;
            if (!vm_push(p, &op->results[i], &n->results[i]))
                return false;
        }
        n->parent = NULL;
        n->prev = n->next = NULL;
        ir_block_append(dst, n);
    }
    return true;
}

/* Fills one region (or function body) from its computation: the last use
 * takes the parsed block, others copy it.  The ROOT becomes a return of
 * its elements (FLAT, FUNC) or of itself (TUPLE). */
static bool run_fill(hp *p, const hfill *f)
{
    ir_module *m = p->m;
    hcomp *c = &p->comps[f->comp];
    ir_region *r = &f->op->regions[f->region];
    bool take = --c->left == 0 && !f->subst;
    bool flat = f->mode != FILL_TUPLE;
    const ir_op *elide = flat ? c->root_tuple : NULL;
    ir_block *blk;
    if (take) {
        blk = c->body;
        ir_region_append(r, blk);
        if (elide)
            ir_block_remove(blk, (ir_op *)elide);
        if (f->mode != FILL_FUNC)
            for (uint32_t i = 0; i < blk->n_args; i++)
                blk->args[i].loc = NULL;
    } else {
        p->n_vm = 0;
        blk = ir_block_new(m, r, f->subst ? 0 : c->n_params, c->param_types);
        if (!blk)
            return oom(p);
        for (uint32_t i = 0; i < c->n_params; i++) {
            ir_value *to = f->subst ? f->subst : &blk->args[i];
            if (f->mode == FILL_FUNC)
                to->loc = c->body->args[i].loc;
            if (!vm_push(p, &c->body->args[i], to))
                return false;
        }
        if (!clone_block(p, blk, c->body, elide))
            return false;
    }
    /* the returned values */
    uint32_t n = c->n_flat;
    if (!grow_vals(p, n + 2))
        return false;
    ir_value **vals = p->vals;
    p->block = blk;
    p->cur_loc = c->root_loc;
    p->cur_line = c->root_line;
    p->cur_col = c->root_col;
    if (c->root_multi || elide) {
        for (uint32_t k = 0; k < n; k++) {
            const ir_value *v = c->root_multi ? &c->root_multi->results[k] : elide->operands[k];
            if (!(vals[k] = take ? (ir_value *)v : vm_get(p, v)))
                return false;
        }
    } else {
        ir_value *v = take ? c->root_v : vm_get(p, c->root_v);
        if (!v)
            return false;
        vals[0] = v;
        if (flat && c->root_type->kind == IR_T_TUPLE) { /* element by element */
            for (uint32_t k = 0; k < n; k++) {
                hbuild b = {.n = 0};
                ir_op *g;
                if (!put(p, &b, "index", i32_attr(p, k)) ||
                    !(g = emit(p, &b, IR_OP_GET_TUPLE_ELEMENT, NULL, 1, &v, 1, &c->flat[k], 0)))
                    return false;
                vals[k] = &g->results[0];
            }
        } else {
            n = 1;
        }
    }
    if (!flat && c->root_multi) { /* the loop state as one tuple */
        ir_op *t = emit(p, NULL, IR_OP_TUPLE, NULL, n, vals, 1, &c->root_type, 0);
        if (!t)
            return false;
        vals[0] = &t->results[0];
        n = 1;
    }
    return emit(p, NULL, f->mode == FILL_FUNC ? IR_OP_FUNC_RETURN : IR_OP_RETURN, NULL, n, vals, 0, NULL, 0) != NULL;
}

/* ============================================================== module */

static bool one_token(const char *s, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (strchr("{[( \"", s[i]))
            return false;
    return true;
}

/* An integer at *q (digits only); false when there is none. */
static bool text_int(const char **q, const char *e, int64_t *out)
{
    const char *s = *q;
    int64_t v = 0;
    while (s < e && *s == ' ')
        s++;
    if (s == e || *s < '0' || *s > '9')
        return false;
    while (s < e && *s >= '0' && *s <= '9' && v < INT32_MAX)
        v = v * 10 + (*s++ - '0');
    *q = s;
    *out = v;
    return true;
}

/* `{a,b}`: the integers of a shape index (at most 8 kept); false when
 * malformed. */
static bool shape_index(const char **q, const char *e, int64_t *v, int *n)
{
    const char *s = *q;
    while (s < e && *s == ' ')
        s++;
    if (s == e || *s++ != '{')
        return false;
    *n = 0;
    for (;;) {
        while (s < e && (*s == ' ' || *s == ','))
            s++;
        if (s < e && *s == '}') {
            *q = s + 1;
            return true;
        }
        int64_t x;
        if (!text_int(&s, e, &x))
            return false;
        if (*n < 8)
            v[*n] = x;
        (*n)++;
    }
}

/* input_output_alias={ {OUT}: (PARAM, {PINDEX}, may-alias), ... }: the
 * parameters whose buffers outputs take (donation).  A whole parameter
 * aliased to a top-level output is kept (the func's argument gets
 * tf.aliasing_output); parts of tuples are not. */
static bool parse_io_alias(hp *p, const hattr *a)
{
    const char *s = a->val, *e = a->val + a->vlen;
    while (s < e && *s == ' ')
        s++;
    if (s == e || *s++ != '{')
        return perr(p, a->val, AP_ESYNTAX, "input_output_alias: expected '{'");
    for (;;) {
        while (s < e && (*s == ' ' || *s == ','))
            s++;
        if (s < e && *s == '}')
            return true;
        int64_t out[8], param, pidx[8];
        int n_out, n_p;
        const char *at = s;
        if (!shape_index(&s, e, out, &n_out))
            return perr(p, at, AP_ESYNTAX, "input_output_alias: expected an output index {...}");
        while (s < e && *s == ' ')
            s++;
        if (s == e || *s != ':')
            return perr(p, s, AP_ESYNTAX, "input_output_alias: expected ':'");
        s++;
        while (s < e && *s == ' ')
            s++;
        const char *pa = s;
        if (s == e || *s++ != '(' || !text_int(&s, e, &param))
            return perr(p, pa, AP_ESYNTAX, "input_output_alias: expected '(' and a parameter number");
        while (s < e && *s == ' ')
            s++;
        pa = s;
        if (s == e || *s++ != ',' || !shape_index(&s, e, pidx, &n_p))
            return perr(p, pa, AP_ESYNTAX, "input_output_alias: expected ', {...}' after the parameter number");
        while (s < e && *s != ')')
            s++; /* the kind: may-alias, must-alias */
        if (s == e)
            return perr(p, at, AP_ESYNTAX, "input_output_alias: missing ')'");
        s++;
        if (n_p != 0 || n_out > 1)
            continue;
        struct hio *v = ap_realloc(p->io_alias, sizeof *v * (p->n_io_alias + 1));
        if (!v)
            return oom(p);
        p->io_alias = v;
        v[p->n_io_alias++] = (struct hio){(uint32_t)param, n_out ? (uint32_t)out[0] : 0, at};
    }
}

/* header ::= 'HloModule' name (',' key '=' value)* */
static bool parse_header(hp *p)
{
    ir_module *m = p->m;
    const char *name;
    uint32_t len;
    if (!accept_word(p, "HloModule"))
        return expected(p, "'HloModule'");
    if (!expect_name(p, &name, &len, "the module name") || !parse_attr_list(p))
        return false;
    if (ir_op_set_attr(m, m->top, "sym_name", ir_attr_string(m, name, len)) < 0)
        return oom(p);
    for (uint32_t i = 0; i < p->n_attrs; i++) {
        hattr *a = &p->attrs[i];
        ir_attr *v = NULL;
        char key[128];
        if (text_is(a->key, a->klen, "num_partitions") || text_is(a->key, a->klen, "replica_count")) {
            int64_t x;
            hsave sv = enter_value(p, a);
            if (!leave_value(p, sv, lex_int(p, &x)))
                return false;
            if (x < INT32_MIN || x > INT32_MAX)
                return perr(p, a->val, AP_ESYNTAX, "%.*s out of range", (int)a->klen, a->key);
            v = i32_attr(p, x);
            snprintf(key, sizeof key, a->key[0] == 'n' ? "mhlo.num_partitions" : "mhlo.num_replicas");
        } else if (text_is(a->key, a->klen, "input_output_alias")) {
            if (!parse_io_alias(p, a))
                return false;
            continue;
        } else if (text_is(a->key, a->klen, "frontend_attributes")) {
            hsave sv = enter_value(p, a);
            v = parse_frontend(p);
            if (!leave_value(p, sv, v != NULL))
                return false;
            snprintf(key, sizeof key, "mhlo.frontend_attributes");
        } else if (one_token(a->val, a->vlen)) {
            v = ir_attr_string(m, a->val, a->vlen);
            snprintf(key, sizeof key, "hlo.%.*s", (int)(a->klen > 100 ? 100 : a->klen), a->key);
        } else {
            continue;
        }
        if (!v || ir_op_set_attr(m, m->top, key, v) < 0)
            return oom(p);
    }
    return true;
}

static void hp_free(hp *p)
{
    ap_free(p->comps);
    ap_free(p->comp_tab.e);
    ap_free(p->insts);
    ap_free(p->inst_slots);
    ap_free(p->opnds);
    ap_free(p->sbuf);
    ap_free(p->fills);
    ap_free(p->funcs);
    ap_free(p->loc_tab.e);
    ap_free(p->locs);
    ap_free(p->vm_from);
    ap_free(p->vm_to);
    ap_free(p->vals);
    ap_free(p->iv.v);
    ap_free(p->iv2.v);
    ap_free(p->param_def);
    ap_free(p->param_attrs);
    ap_free(p->io_alias);
    ap_free(p->sig);
    ap_free(p->op_tab.e);
    ap_free(p->file_names);
    ap_free(p->func_names);
    ap_free(p->file_locs);
    ap_free(p->frames);
}

/* An integer in [1, max] naming an entry of a stack frame table. */
static bool table_ref(hp *p, int64_t v, uint32_t max, const char *what, const char *at)
{
    if (v < 1 || (uint64_t)v > max)
        return perr(p, at, AP_ESYNTAX, "%s %" PRId64 " is not in its table (1 to %u)", what, v, max);
    return true;
}

/* `{k=v k=v ...}` of the stack frame tables: integer fields, spaces or
 * commas between them; each of `keys` must appear once. */
static bool frame_fields(hp *p, const char *const *keys, int64_t *vals, int n)
{
    bool seen[8] = {0};
    if (!expect(p, '{', "'{'"))
        return false;
    while (peek(p) != '}') {
        const char *k, *at = p->p;
        uint32_t kl;
        int64_t v;
        if (!expect_name(p, &k, &kl, "a field name") || !expect(p, '=', "'='") || !lex_int(p, &v))
            return false;
        int i = 0;
        while (i < n && !text_is(k, kl, keys[i]))
            i++;
        if (i == n || seen[i])
            return perr(p, at, AP_ESYNTAX, "%s field '%.*s'", i == n ? "unknown" : "repeated", (int)kl, k);
        seen[i] = true;
        vals[i] = v;
        accept(p, ',');
    }
    p->p++;
    for (int i = 0; i < n; i++)
        if (!seen[i])
            return perr(p, p->p, AP_ESYNTAX, "missing field '%s'", keys[i]);
    return true;
}

/* Numbered entries `N value` of one table; N counts from 1 in order. */
static bool table_entry(hp *p, uint32_t n_before, bool *more)
{
    skip_ws(p);
    *more = p->p < p->end && *p->p >= '0' && *p->p <= '9';
    if (!*more)
        return true;
    const char *at = p->p;
    int64_t k;
    if (!lex_int(p, &k))
        return false;
    if (k != (int64_t)n_before + 1)
        return perr(p, at, AP_ESYNTAX, "expected entry %u, found %" PRId64, n_before + 1, k);
    return true;
}

/* stack_frame_index ::= 'FileNames' (N string)* 'FunctionNames' (N string)*
 *     'FileLocations' (N '{' file_name_id function_name_id line end_line
 *     column end_column '}')* 'StackFrames' (N '{' file_location_id
 *     parent_frame_id '}')*
 * as HloModule::PrintStackFrameIndex writes it after the header; the
 * instructions' stack_frame_id=N index it. */
static bool parse_stack_frames(hp *p)
{
    if (!accept_word(p, "FileNames"))
        return true;
    bool more;
    for (;;) {
        const char *s;
        size_t sl;
        if (!table_entry(p, p->n_file_names, &more))
            return false;
        if (!more)
            break;
        if (!lex_string(p, &s, &sl) || !GROW(p, p->file_names, p->cap_file_names, p->n_file_names + 1))
            return false;
        if (!(p->file_names[p->n_file_names++] = ir_intern(p->m, s, sl)))
            return oom(p);
    }
    if (!accept_word(p, "FunctionNames"))
        return expected(p, "'FunctionNames'");
    for (;;) {
        const char *s;
        size_t sl;
        if (!table_entry(p, p->n_func_names, &more))
            return false;
        if (!more)
            break;
        if (!lex_string(p, &s, &sl) || !GROW(p, p->func_names, p->cap_func_names, p->n_func_names + 1))
            return false;
        if (!(p->func_names[p->n_func_names++] = ir_intern(p->m, s, sl)))
            return oom(p);
    }
    if (!accept_word(p, "FileLocations"))
        return expected(p, "'FileLocations'");
    static const char *const loc_keys[] = {"file_name_id", "function_name_id", "line", "end_line", "column",
                                           "end_column"};
    for (;;) {
        int64_t v[6];
        if (!table_entry(p, p->n_file_locs, &more))
            return false;
        if (!more)
            break;
        const char *at = (skip_ws(p), p->p);
        if (!frame_fields(p, loc_keys, v, 6) || !table_ref(p, v[0], p->n_file_names, "file_name_id", at) ||
            !table_ref(p, v[1], p->n_func_names, "function_name_id", at) ||
            !GROW(p, p->file_locs, p->cap_file_locs, p->n_file_locs + 1))
            return false;
        if (v[2] < 0 || v[2] > INT32_MAX || v[4] < 0 || v[4] > INT32_MAX)
            return perr(p, at, AP_ESYNTAX, "line or column out of range");
        p->file_locs[p->n_file_locs++] = (struct hfileloc){v[0], v[1], v[2], v[4]};
    }
    if (!accept_word(p, "StackFrames"))
        return expected(p, "'StackFrames'");
    static const char *const frame_keys[] = {"file_location_id", "parent_frame_id"};
    for (;;) {
        int64_t v[2];
        if (!table_entry(p, p->n_frames, &more))
            return false;
        if (!more)
            break;
        const char *at = (skip_ws(p), p->p);
        if (!frame_fields(p, frame_keys, v, 2) || !table_ref(p, v[0], p->n_file_locs, "file_location_id", at) ||
            !GROW(p, p->frames, p->cap_frames, p->n_frames + 1))
            return false;
        p->frames[p->n_frames++] = (struct hframe){v[0], v[1] - 1, NULL};
    }
    /* XLA writes the parent's id plus one: 1 (or 0) for a frame without one */
    for (uint32_t i = 0; i < p->n_frames; i++) {
        if (p->frames[i].parent < 0)
            p->frames[i].parent = 0;
        if ((uint64_t)p->frames[i].parent > p->n_frames)
            return perr(p, p->p, AP_ESYNTAX, "stack frame %u names parent %" PRId64 ", which does not exist", i + 1,
                        p->frames[i].parent);
    }
    return true;
}

/* module ::= header? stack_frame_index? computation+ ; the computation
 * marked ENTRY is the entry, else (as XLA takes it) the last one.  Without
 * a header the module is named module_ENTRYNAME, as XLA names it. */
static bool parse_module(hp *p)
{
    for (uint32_t i = 0; i < AP_ARRAY_LEN(hlo_ops); i++)
        if (!htab_put(p, &p->op_tab, hlo_ops[i].name, (uint32_t)strlen(hlo_ops[i].name), i))
            return false;
    bool header = is_word(p, "HloModule");
    if (header && !parse_header(p))
        return false;
    if (!parse_stack_frames(p))
        return false;
    if (!peek(p))
        return expected(p, "a computation");
    while (peek(p)) {
        if (is_word(p, "HloModule"))
            return perr(p, p->p, AP_EUNSUPPORTED,
                        "a second HloModule: the file holds several modules and autopart reads one; split it into "
                        "one file per module");
        if (!parse_computation(p))
            return false;
    }
    if (p->entry < 0) {
        p->entry = (int32_t)p->n_comps - 1;
        if (!make_func(p, (uint32_t)p->entry, "main", true))
            return false;
    }
    if (!header) {
        const char *en = p->comps[p->entry].name;
        size_t n = strlen(en) + 8;
        char *name = ap_malloc(n);
        if (!name)
            return oom(p);
        snprintf(name, n, "module_%s", en);
        bool ok = ir_op_set_attr(p->m, p->m->top, "sym_name", ir_attr_string(p->m, name, strlen(name))) == 0;
        ap_free(name);
        if (!ok)
            return oom(p);
    }
    p->max_ops = p->n_ops + HLO_OPS_PER_INST * p->n_insts_total + HLO_OPS_SLACK;
    for (uint32_t i = 0; i < p->n_comps; i++)
        p->comps[i].left = p->comps[i].refs;
    for (uint32_t i = 0; i < p->n_fills; i++)
        if (!run_fill(p, &p->fills[i]))
            return false;
    ir_block *body = ir_module_body(p->m);
    ir_op *main_fn = p->comps[p->entry].func;
    ir_block_append(body, main_fn);
    for (uint32_t i = 0; i < p->n_funcs; i++)
        if (p->funcs[i] != main_fn)
            ir_block_append(body, p->funcs[i]);
    for (uint32_t i = 0; i < p->n_funcs; i++)
        ir_func_renumber(p->funcs[i], NULL, NULL);
    return true;
}

int ir_parse_hlo(const char *text, size_t len, const char *filename, ir_module **out, ap_error *err)
{
    hp *p = ap_malloc(sizeof *p);
    *out = NULL;
    ap_error_clear(err);
    if (!p)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    memset(p, 0, sizeof *p);
    p->err = err;
    p->entry = -1;
    p->m = ir_module_new(filename);
    if (!p->m) {
        ap_free(p);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    p->fname = p->m->filename ? p->m->filename : "<input>";
    p->src = p->p = text;
    p->end = text + len;
    ir__lex_init(&p->lx, text, len, p->fname);
    /* 8 bytes at a time: any byte >= 0x80 or NUL sends us to the exact checks */
    size_t i = 0;
    for (uint64_t w; i + 8 <= len; i += 8) {
        memcpy(&w, text + i, 8);
        if ((w & 0x8080808080808080ULL) || ((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL))
            break;
    }
    const char *bad = ir__utf8_invalid(text + i, len - i), *nul = memchr(text + i, '\0', len - i);
    bool ok;
    if (bad && (!nul || bad < nul))
        ok = perr(p, bad, AP_ESYNTAX, "invalid UTF-8 byte 0x%02X", (unsigned char)*bad);
    else if (nul)
        ok = perr(p, nul, AP_ESYNTAX, "NUL byte in input");
    else
        ok = parse_module(p);
    if (!ok && !p->failed)
        perr(p, NULL, AP_EINTERNAL, "HLO parse failed");
    ir_module *m = p->m;
    int code = p->failed ? p->code : 0;
    hp_free(p);
    ap_free(p);
    if (ok && (code = ir_verify(m, err)) == 0) {
        *out = m;
        return 0;
    }
    ir_module_free(m);
    return code < 0 ? code : AP_EINTERNAL;
}
