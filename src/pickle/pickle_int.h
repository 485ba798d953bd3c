/* SPDX-License-Identifier: MIT */
/* pickle_int.h - the pickle machine's state, shared by the general reader (pickle.c) and
 * the flat reader of record batches (flat.c); library-internal.
 *
 * The memo: one 32-bit cell per slot (a large snapshot memoizes two objects per trace
 * entry, tens of millions of slots), read by memo_load() and written by memo_store() only:
 *
 *   0x00000000 - 0x3fffffff  a string: its opcode's offset minus the base of the slot's
 *                            page of MEMO_PAGE slots (strings are memoized where they are
 *                            read, so one page's strings lie close together in the file)
 *   0x40000000 - 0x7fffffff  the consumer's name for a recycled list (pk_record_name())
 *   0x80000000 - 0xbfffffff  an index into 'wide', the 64-bit values of everything else
 *                            (containers, boxes, small ints, far strings)
 *   0xfffffffb - 0xffffffff  True, False, None, a consumed record, a hole
 * (memo_store_fresh_str() is memo_store()'s common case for strings, inline). */
#ifndef GM_PICKLE_PICKLE_INT_H
#define GM_PICKLE_PICKLE_INT_H

#include "pickle/pickle.h"

#include "base/map.h"

#include <string.h>

/* Opcode bytes (CPython Lib/pickle.py names). */
enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_POP = '0',
    OP_POP_MARK = '1',
    OP_DUP = '2',
    OP_FLOAT = 'F',
    OP_INT = 'I',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_LONG = 'L',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_PERSID = 'P',
    OP_BINPERSID = 'Q',
    OP_REDUCE = 'R',
    OP_STRING = 'S',
    OP_BINSTRING = 'T',
    OP_SHORT_BINSTRING = 'U',
    OP_UNICODE = 'V',
    OP_BINUNICODE = 'X',
    OP_APPEND = 'a',
    OP_BUILD = 'b',
    OP_GLOBAL = 'c',
    OP_DICT = 'd',
    OP_EMPTY_DICT = '}',
    OP_APPENDS = 'e',
    OP_GET = 'g',
    OP_BINGET = 'h',
    OP_INST = 'i',
    OP_LONG_BINGET = 'j',
    OP_LIST = 'l',
    OP_EMPTY_LIST = ']',
    OP_OBJ = 'o',
    OP_PUT = 'p',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_SETITEM = 's',
    OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u',
    OP_BINFLOAT = 'G',
    OP_PROTO = 0x80,
    OP_NEWOBJ = 0x81,
    OP_EXT1 = 0x82,
    OP_EXT2 = 0x83,
    OP_EXT4 = 0x84,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b,
    OP_BINBYTES = 'B',
    OP_SHORT_BINBYTES = 'C',
    OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE8 = 0x8d,
    OP_BINBYTES8 = 0x8e,
    OP_EMPTY_SET = 0x8f,
    OP_ADDITEMS = 0x90,
    OP_FROZENSET = 0x91,
    OP_NEWOBJ_EX = 0x92,
    OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94,
    OP_FRAME = 0x95,
    OP_BYTEARRAY8 = 0x96,
    OP_NEXT_BUFFER = 0x97,
    OP_READONLY_BUFFER = 0x98
};

#define FREE_CLASSES   64
#define FLAT_MAX_PAIRS 32
#define FLAT_MAX_ITEMS 1024
#define MAX_NAMES      8192 /* lists the general reader names in one batch, at most */

#define MEMO_PAGE_BITS 16
#define CELL_STR_MAX   0x3fffffffu
#define CELL_NAME      0x40000000u
#define CELL_WIDE      0x80000000u
#define CELL_INDEX     0x3fffffffu
#define CELL_TRUE      0xfffffffbu
#define CELL_FALSE     0xfffffffcu
#define CELL_NONE      0xfffffffdu
#define CELL_DEAD      0xfffffffeu
#define CELL_HOLE      0xffffffffu
#define NO_BASE        UINT64_MAX

#define SMALL_MIN (-((int64_t)1 << 60))
#define SMALL_MAX (((int64_t)1 << 60) - 1)

/* The flat reader's cache of named lists (pk_stream.names_by_items): a list whose items are
 * one run of memo references (MARK (BINGET | LONG_BINGET)+ APPENDS) is remembered by those
 * bytes and the record key it is the value of, with the name the consumer gave it.  The run of a
 * later list with the same bytes names the same memo slots; while no slot below memo_len has been
 * written again (memo_gen unchanged) they hold the same values, so the later list has the same
 * items and its name. Direct-mapped by a hash of the bytes, which are compared in full on a hit.  A
 * list without items (EMPTY_LIST [put] and the next key) has one name, kept apart.  A hint by the
 * list's first bytes says which entry to compare first, so that a list seen before is found
 * without a pass over its run to hash it (a wrong hint only costs the compare). */
#define LIST_CACHE_BITS  8
#define LIST_HINT_BITS   10
#define LIST_HINT_SHORT  16   /* the bytes after the MARK a hint is taken by, */
#define LIST_HINT_LONG   32   /* two hints */
#define LIST_CACHE_BYTES 2040 /* the longest run an entry holds (408 LONG_BINGETs) */
struct list_cache_entry {
    uint64_t hash;
    pk_val key;    /* the record key the list was the value of */
    uint64_t gen;  /* memo_gen + 1 when it was written; 0: empty */
    uint32_t name; /* the consumer's */
    uint32_t len;  /* bytes of the run */
    uint8_t bytes[LIST_CACHE_BYTES];
};
_Static_assert(LIST_CACHE_BITS <= 8, "a list_hint slot holds an entry's index in one byte");

/* The machine's state during one parse. */
struct vm {
    struct pk_doc *doc;
    const uint8_t *base;
    const uint8_t *p;
    const uint8_t *end;
    pk_val *stack;
    size_t sp, stack_cap, stack_max;
    size_t *marks;
    size_t n_marks, marks_cap, marks_max;
    uint32_t *memo; /* cells, see above */
    size_t memo_len, memo_cap;
    uint64_t *memo_base; /* per page: the offset its string cells count from */
    size_t base_cap;
    pk_val *wide;
    size_t n_wide, wide_cap;
    uint32_t wide_free; /* a free entry of 'wide' (a chain through the entries), CELL_INDEX+1:
                         * none */
    uint64_t memo_gen;  /* writes over a slot below memo_len (and abandoned flat batches), so far:
                         * what list_cache entries are valid for */
    size_t heap_bytes;  /* stack, marks and memo, counted against the cap with the arena */
    size_t memory_limit;
    bool limit_given; /* pk_opts.limit_given */
    size_t *shared;   /* pk_opts.shared: heap_bytes and the arena's are counted in it */
    struct gm_error *err;
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *progress_ctx;
    bool drop_behind;
    size_t dropped; /* input bytes given back (input_window) */
    bool limit_hit; /* a heap array hit the memory cap */
    bool mem_short; /* a memo store could not grow its tables */
    /* record streaming (pk_opts.stream) */
    const struct pk_stream *stream;
    bool general_only;
    size_t key_len;      /* strlen(stream->key) */
    struct gm_map names; /* the general reader's lists named in this batch: node -> id */
    uint32_t flat_name;  /* the flat reader: the name given to the current record's list */
    bool in_flat;
    /* the flat reader: its transient nodes, and the key at each position of the entry
     * before when a memo reference (its opcode bytes, masked, and value) */
    struct pk_node flat_dict, flat_list;
    pk_val flat_pairs[2 * FLAT_MAX_PAIRS];
    pk_val flat_items[FLAT_MAX_ITEMS];
    uint64_t key_bytes[FLAT_MAX_PAIRS + 1], key_mask[FLAT_MAX_PAIRS + 1];
    pk_val key_val[FLAT_MAX_PAIRS];
    uint8_t key_len_[FLAT_MAX_PAIRS];
    /* the named lists (see struct list_cache_entry), and the run of the current record's
     * list, to be remembered when the consumer names it */
    struct list_cache_entry *list_cache;     /* 1 << LIST_CACHE_BITS entries, made at first use */
    uint8_t list_hint[1u << LIST_HINT_BITS]; /* by list_hint_of(): an entry of list_cache */
    uint8_t last_list;                       /* the entry of the last list found or remembered */
    const uint8_t *run;                      /* NULL: the current list is not to be remembered */
    uint32_t run_len;                        /* 0: the list has no items */
    uint64_t run_hash;
    pk_val run_key;
    uint32_t empty_name; /* the name of a list without items, UINT32_MAX: none yet */
    pk_val empty_key;    /* the record key it was the value of */
    /* recycled containers (from consumed records) and item arrays by slot count */
    struct pk_node *free_nodes;
    pk_val *free_items[FREE_CLASSES + 1];
};

#define OFF(vm, ptr) ((uint64_t)((ptr) - (vm)->base))

/* Fixed-width little-endian loads (compilers merge the byte loads into one). */
static inline uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ---- the memo: the one reader and the one writer ---- */

/* The value in slot 'idx' (< memo_len, or a slot the flat reader has written). */
static inline pk_val memo_load(const struct vm *vm, size_t idx)
{
    uint32_t c = vm->memo[idx];
    if (c <= CELL_STR_MAX)
        return ((vm->memo_base[idx >> MEMO_PAGE_BITS] + c) << 3) | PK_TAG_STR;
    if (c < CELL_WIDE)
        return PK_TOKEN(c & CELL_INDEX);
    if (c < CELL_TRUE)
        return vm->wide[c & CELL_INDEX];
    switch (c) {
    case CELL_TRUE:
        return PK_TRUE;
    case CELL_FALSE:
        return PK_FALSE;
    case CELL_NONE:
        return PK_NONE;
    case CELL_DEAD:
        return PK_DEAD;
    default:
        return PK_HOLE;
    }
}

/* A slot the memo has room for: its cell and the page base exist. */
bool pk_memo_store_wide(struct vm *vm, size_t idx, pk_val v);

/* Write 'v' into slot 'idx' (< memo_cap); 'fresh': the slot held nothing a reader could
 * still see (written past memo_len).  false when a table could not grow (vm->mem_short). */
static inline bool memo_store(struct vm *vm, size_t idx, pk_val v, bool fresh)
{
    uint32_t *cell = &vm->memo[idx];
    if (!fresh)
        vm->memo_gen++;
    if (!fresh && *cell >= CELL_WIDE && *cell < CELL_TRUE) {
        /* the slot's wide entry is free again */
        uint32_t w = *cell & CELL_INDEX;
        vm->wide[w] = vm->wide_free;
        vm->wide_free = w;
    }
    if (pk_tag(v) == PK_TAG_STR) {
        uint64_t *base = &vm->memo_base[idx >> MEMO_PAGE_BITS], off = v >> 3;
        if (*base == NO_BASE)
            *base = off > (CELL_STR_MAX >> 1) ? off - (CELL_STR_MAX >> 1) : 0;
        if (off >= *base && off - *base <= CELL_STR_MAX) {
            *cell = (uint32_t)(off - *base);
            return true;
        }
    } else if (pk_is_token(v) && pk_token_id(v) <= CELL_INDEX) {
        *cell = CELL_NAME | pk_token_id(v);
        return true;
    } else if (v == PK_HOLE || v == PK_DEAD || v == PK_NONE || v == PK_TRUE || v == PK_FALSE) {
        *cell = v == PK_HOLE   ? CELL_HOLE
                : v == PK_DEAD ? CELL_DEAD
                : v == PK_NONE ? CELL_NONE
                : v == PK_TRUE ? CELL_TRUE
                               : CELL_FALSE;
        return true;
    }
    *cell = CELL_HOLE;
    return pk_memo_store_wide(vm, idx, v);
}

/* memo_store(vm, idx, v, true) of a string 'v', with the common case (its page has a base
 * within reach) inline. */
static inline bool memo_store_fresh_str(struct vm *vm, size_t idx, pk_val v)
{
    uint64_t base = vm->memo_base[idx >> MEMO_PAGE_BITS], off = v >> 3;
    if (base != NO_BASE && off >= base && off - base <= CELL_STR_MAX) {
        vm->memo[idx] = (uint32_t)(off - base);
        return true;
    }
    return memo_store(vm, idx, v, true);
}

/* Room for slots [0, need): cells and page bases; false when out of memory or over the
 * cap. */
bool pk_memo_reserve(struct vm *vm, size_t need);

/* ---- shared by both readers (pickle.c) ---- */

enum gm_status pk_vm_nomem(struct vm *vm, uint64_t off);
bool pk_vm_grow(struct vm *vm, void **arr, size_t *cap, size_t need, size_t elem);
struct pk_node *pk_vm_new_node(struct vm *vm, uint8_t kind, uint32_t cap);

/* Containers put into a container: count the reference (see recycle()). */
static inline void ref_items(const pk_val *items, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        if (pk_tag(items[i]) == PK_TAG_NODE && items[i]) {
            struct pk_node *c = (struct pk_node *)(uintptr_t)items[i];
            if (c->refs < UINT8_MAX)
                c->refs++;
        }
    }
}

static inline const uint8_t *skip_frames(const uint8_t *p, const uint8_t *end)
{
    while (p < end && *p == OP_FRAME) {
        if ((size_t)(end - p) < 9 || le64(p + 1) > (uint64_t)(end - p - 9))
            return NULL;
        p += 9;
    }
    return p;
}

/* The flat reader (flat.c): read the batch after a MARK whose list below is the streamed
 * list 'list'.  true: read, the MARK is gone and vm->p is past the APPENDS; false: nothing
 * consumed (the general reader reads it). */
bool pk_flat_batch(struct vm *vm, struct pk_node *list);

#endif
