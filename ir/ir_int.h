/*
 * ir_int.h - private to the IR core (the files of ir/ itself): the intern
 * tables, the printer's helpers the other files share, the op rules of the
 * verifier, float conversions.  The libraries built on the core (parse/,
 * partir/, interp/, check/) use ir_build.h; everything else reads IR
 * through ir.h.  Including this header anywhere else fails to compile.
 */
#ifndef IR_INT_H
#define IR_INT_H

#ifndef AP_IR_CORE
#error "ir_int.h is private to the IR core (ir/*.c): read IR through ir.h, make it through ir_build.h"
#endif

#include "ir_build.h"

/* Expected attributes of an opcode, for the verifier and for users. */
typedef struct ir_attr_rule {
    ir_opcode op;
    const char *name;
    ir_attr_kind kind;
    bool required;
} ir_attr_rule;
/* All rules for op; sets *n. */
const ir_attr_rule *ir_attr_rules(ir_opcode op, int *n);

/* ------------------------------------------------------- module internals */

typedef struct ir_ptr_table {
    const void **slots; /* open addressing, NULL = empty */
    uint32_t cap, n;    /* cap is a power of two */
} ir_ptr_table;

struct ir_module_impl {
    ir_ptr_table strings; /* const char * with a length prefix, see intern */
    ir_ptr_table types;   /* const ir_type * */
    ir_ptr_table attrs;   /* ir_attr *, uniqued */
    const ir_type *token;
    size_t table_bytes;
};

/* The first slot an entry of hash h probes in a table of cap slots.  The
 * hashes are ap_hash_mix chains over small integers and pointers, whose
 * low bits follow the inputs' low bits: taken as they are, they fill runs
 * of neighbouring slots, and linear probing walks those runs (a T32
 * lowering's attribute lookups probed 58 slots each, a cache miss per
 * slot).  Mixed first (murmur3's finalizer), every bit counts. */
static inline uint32_t ir__table_slot(uint64_t h, uint32_t cap)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t)h & (cap - 1);
}

/* Doubles t (rehashing each entry by hash: ir__table_slot), counting the
 * bytes in m->impl->table_bytes; false when out of memory (t unchanged). */
bool ir__table_grow(ir_module *m, ir_ptr_table *t, uint64_t (*hash)(const void *));

/* Valid bare identifier for attribute keys and symbol names. */
bool ir__is_bare_ident(const char *s, size_t len);
/* Appends s as an MLIR string literal with escapes. */
void ir__print_string(ap_buf *b, const char *s, size_t len);
/* Appends a location `loc(...)` body (without `loc(`) for inline printing. */
void ir__print_loc_inline(ap_buf *b, const ir_loc *l);

/* ------------------------------------------------------ float conversion */


#endif /* IR_INT_H */
