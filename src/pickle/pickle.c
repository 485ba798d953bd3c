/* SPDX-License-Identifier: MIT */
/* pickle.c - the pickle virtual machine: data opcodes of protocols 0 to 5, no execution.
 *
 * Layout: a pickle is a flat sequence of opcodes, each one byte followed by its argument
 * (fixed-width little-endian integers, length-prefixed strings, or for the text opcodes of
 * protocol 0 a line ending in '\n'), ending with STOP.  The machine has a value stack, a
 * stack of MARK positions and a memo (index -> value).  Everything is iterative: nesting in
 * the file grows the explicit stacks, never the C stack.  Lengths and counts are checked
 * against the bytes left before use; all memory (nodes, memo, stack) is counted against
 * one cap.  Opcodes that import or call (GLOBAL, REDUCE, BUILD, ...) and out-of-band
 * buffers are rejected with their name and offset. */
#include "pickle/pickle.h"

#include "base/big.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

const char *pk_opcode_name(uint8_t op)
{
    switch (op) {
    case OP_MARK:
        return "MARK";
    case OP_STOP:
        return "STOP";
    case OP_POP:
        return "POP";
    case OP_POP_MARK:
        return "POP_MARK";
    case OP_DUP:
        return "DUP";
    case OP_FLOAT:
        return "FLOAT";
    case OP_INT:
        return "INT";
    case OP_BININT:
        return "BININT";
    case OP_BININT1:
        return "BININT1";
    case OP_LONG:
        return "LONG";
    case OP_BININT2:
        return "BININT2";
    case OP_NONE:
        return "NONE";
    case OP_PERSID:
        return "PERSID";
    case OP_BINPERSID:
        return "BINPERSID";
    case OP_REDUCE:
        return "REDUCE";
    case OP_STRING:
        return "STRING";
    case OP_BINSTRING:
        return "BINSTRING";
    case OP_SHORT_BINSTRING:
        return "SHORT_BINSTRING";
    case OP_UNICODE:
        return "UNICODE";
    case OP_BINUNICODE:
        return "BINUNICODE";
    case OP_APPEND:
        return "APPEND";
    case OP_BUILD:
        return "BUILD";
    case OP_GLOBAL:
        return "GLOBAL";
    case OP_DICT:
        return "DICT";
    case OP_EMPTY_DICT:
        return "EMPTY_DICT";
    case OP_APPENDS:
        return "APPENDS";
    case OP_GET:
        return "GET";
    case OP_BINGET:
        return "BINGET";
    case OP_INST:
        return "INST";
    case OP_LONG_BINGET:
        return "LONG_BINGET";
    case OP_LIST:
        return "LIST";
    case OP_EMPTY_LIST:
        return "EMPTY_LIST";
    case OP_OBJ:
        return "OBJ";
    case OP_PUT:
        return "PUT";
    case OP_BINPUT:
        return "BINPUT";
    case OP_LONG_BINPUT:
        return "LONG_BINPUT";
    case OP_SETITEM:
        return "SETITEM";
    case OP_TUPLE:
        return "TUPLE";
    case OP_EMPTY_TUPLE:
        return "EMPTY_TUPLE";
    case OP_SETITEMS:
        return "SETITEMS";
    case OP_BINFLOAT:
        return "BINFLOAT";
    case OP_PROTO:
        return "PROTO";
    case OP_NEWOBJ:
        return "NEWOBJ";
    case OP_EXT1:
        return "EXT1";
    case OP_EXT2:
        return "EXT2";
    case OP_EXT4:
        return "EXT4";
    case OP_TUPLE1:
        return "TUPLE1";
    case OP_TUPLE2:
        return "TUPLE2";
    case OP_TUPLE3:
        return "TUPLE3";
    case OP_NEWTRUE:
        return "NEWTRUE";
    case OP_NEWFALSE:
        return "NEWFALSE";
    case OP_LONG1:
        return "LONG1";
    case OP_LONG4:
        return "LONG4";
    case OP_BINBYTES:
        return "BINBYTES";
    case OP_SHORT_BINBYTES:
        return "SHORT_BINBYTES";
    case OP_SHORT_BINUNICODE:
        return "SHORT_BINUNICODE";
    case OP_BINUNICODE8:
        return "BINUNICODE8";
    case OP_BINBYTES8:
        return "BINBYTES8";
    case OP_EMPTY_SET:
        return "EMPTY_SET";
    case OP_ADDITEMS:
        return "ADDITEMS";
    case OP_FROZENSET:
        return "FROZENSET";
    case OP_NEWOBJ_EX:
        return "NEWOBJ_EX";
    case OP_STACK_GLOBAL:
        return "STACK_GLOBAL";
    case OP_MEMOIZE:
        return "MEMOIZE";
    case OP_FRAME:
        return "FRAME";
    case OP_BYTEARRAY8:
        return "BYTEARRAY8";
    case OP_NEXT_BUFFER:
        return "NEXT_BUFFER";
    case OP_READONLY_BUFFER:
        return "READONLY_BUFFER";
    default:
        return NULL;
    }
}

#define FREE_CLASSES   64
#define FLAT_MAX_PAIRS 32
#define FLAT_MAX_ITEMS 1024

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
    pk_val *memo;
    size_t memo_len, memo_cap;
    size_t heap_bytes; /* stack + marks + memo, counted against the cap with the arena */
    size_t max_memory;
    struct gm_error *err;
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *progress_ctx;
    enum gm_status (*on_append)(void *ctx, const struct pk_append *a, bool *consumed,
                                struct gm_error *err);
    void *append_ctx;
    uint32_t (*list_token)(void *ctx, const struct pk_node *list);
    enum gm_status (*on_flat)(void *ctx, const struct pk_node *list, pk_val item,
                              uint32_t *list_tok, struct gm_error *err);
    void (*on_flat_end)(void *ctx, const struct pk_node *list, bool commit);
    struct pk_node flat_dict, flat_list; /* the transient nodes of flat_batch() */
    pk_val flat_pairs[2 * FLAT_MAX_PAIRS];
    pk_val flat_items[FLAT_MAX_ITEMS];
    /* flat_batch(): the key at each position of the entry before, when a memo reference:
     * its opcode bytes (masked) and value */
    uint64_t key_bytes[FLAT_MAX_PAIRS], key_mask[FLAT_MAX_PAIRS];
    pk_val key_val[FLAT_MAX_PAIRS];
    uint8_t key_len[FLAT_MAX_PAIRS];
    bool drop_behind;
    size_t dropped; /* input bytes given back (input_window) */
    bool limit_hit; /* a heap array hit the memory cap */
    /* recycled containers (from consumed appends) and item arrays by slot count */
    struct pk_node *free_nodes;
    pk_val *free_items[FREE_CLASSES + 1];
};

#define OFF(vm, ptr) ((uint64_t)((ptr) - (vm)->base))

static enum gm_status nomem(struct vm *vm, uint64_t off)
{
    if (vm->doc->arena.limit_hit || vm->limit_hit)
        return gm_fail(vm->err, GM_ERR_LIMIT, off,
                       "pickle: memory cap of %zu bytes exceeded (a larger file needs more)",
                       vm->max_memory);
    return gm_fail(vm->err, GM_ERR_NOMEM, off, "pickle: out of memory");
}

/* Grow a heap array of 'elem'-byte items to hold at least 'need'; counted against the cap. */
static bool grow(struct vm *vm, void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap = *cap ? *cap : 64;
    void *n;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem)
            return false;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem)
        return false;
    if (vm->max_memory &&
        vm->heap_bytes - *cap * elem + ncap * elem + vm->doc->arena.used > vm->max_memory) {
        vm->limit_hit = true;
        return false;
    }
    n = gm_big_realloc(*arr, *cap * elem, ncap * elem);
    if (!n)
        return false;
    vm->heap_bytes = vm->heap_bytes - *cap * elem + ncap * elem;
    *arr = n;
    *cap = ncap;
    return true;
}

static enum gm_status push_slow(struct vm *vm, pk_val v, uint64_t off)
{
    if (vm->sp == vm->stack_cap) {
        if (vm->sp >= vm->stack_max)
            return gm_fail(vm->err, GM_ERR_LIMIT, off, "pickle: more than %zu values on the stack",
                           vm->stack_max);
        if (!grow(vm, (void **)&vm->stack, &vm->stack_cap, vm->sp + 1, sizeof(pk_val)))
            return nomem(vm, off);
    }
    vm->stack[vm->sp++] = v;
    return GM_OK;
}

static inline enum gm_status push(struct vm *vm, pk_val v, uint64_t off)
{
    if (vm->sp < vm->stack_cap) {
        vm->stack[vm->sp++] = v;
        return GM_OK;
    }
    return push_slow(vm, v, off);
}

static pk_val *alloc_items(struct vm *vm, size_t slots)
{
    if (slots && slots <= FREE_CLASSES && vm->free_items[slots]) {
        pk_val *it = vm->free_items[slots];
        vm->free_items[slots] = (pk_val *)(uintptr_t)it[0];
        return it;
    }
    return gm_arena_alloc(&vm->doc->arena, slots * sizeof(pk_val), 8);
}

static struct pk_node *new_node(struct vm *vm, uint8_t kind, uint32_t cap)
{
    struct pk_node *n;
    size_t slots = kind == PK_DICT ? (size_t)cap * 2 : cap;
    if (vm->free_nodes) {
        n = vm->free_nodes;
        vm->free_nodes = (struct pk_node *)(void *)n->items;
    } else {
        n = gm_arena_alloc(&vm->doc->arena, sizeof(*n), 8);
        if (!n)
            return NULL;
    }
    n->kind = kind;
    n->flags = 0;
    n->n_puts = 0;
    n->refs = 0;
    n->memo_idx = 0;
    n->len = 0;
    n->cap = cap;
    n->items = NULL;
    if (cap) {
        n->items = alloc_items(vm, slots);
        if (!n->items)
            return NULL;
    }
    return n;
}

/* Give back an item the append hook consumed, if nothing else can reach it: it was never
 * pushed again (memo, DUP), no container holds it, and at most one memo slot holds it,
 * which becomes 'tomb' (PK_DEAD, or the consumer's token for a list). */
static void recycle_node(struct vm *vm, struct pk_node *n, pk_val tomb)
{
    pk_val v = (pk_val)(uintptr_t)n;
    size_t slots;
    if (n->n_puts == 1) {
        if (n->memo_idx < vm->memo_len && vm->memo[n->memo_idx] == v)
            vm->memo[n->memo_idx] = tomb;
        else
            return; /* the slot was reused; be conservative */
    }
    slots = (size_t)n->cap * (n->kind == PK_DICT ? 2 : 1);
    if (n->items && slots && slots <= FREE_CLASSES) {
        n->items[0] = (pk_val)(uintptr_t)vm->free_items[slots];
        vm->free_items[slots] = n->items;
    }
    n->kind = 0;
    n->items = (pk_val *)(void *)vm->free_nodes;
    vm->free_nodes = n;
}

static bool on_stack(const struct vm *vm, size_t below, pk_val v)
{
    for (size_t i = 0; i < below; i++)
        if (vm->stack[i] == v)
            return true;
    return false;
}

/* A consumed item (stack[i] with i >= 'below'), and the lists inside it that were held
 * only by consumed dicts: their reference count drops, and at zero the consumer may give
 * a token for them. */
static void recycle(struct vm *vm, pk_val v, size_t below)
{
    struct pk_node *n = (struct pk_node *)(uintptr_t)pk_node(v);
    if (!n || (n->flags & (PK_NODE_SHARED | PK_NODE_STREAMED)) || n->n_puts > 1 || n->refs)
        return;
    if (n->kind == PK_DICT && vm->list_token) {
        for (uint32_t i = 0; i < n->len; i++) {
            pk_val c = n->items[2 * i + 1];
            struct pk_node *cn = (struct pk_node *)(uintptr_t)pk_node_of_kind(c, PK_LIST);
            uint32_t tok;
            if (!cn || cn->refs == UINT8_MAX || cn->refs == 0)
                continue;
            if (--cn->refs != 0 || (cn->flags & PK_NODE_STREAMED) || cn->n_puts > 1)
                continue;
            /* a list pushed from the memo may still sit lower on the stack */
            if ((cn->flags & PK_NODE_SHARED) && (below > 64 || on_stack(vm, below, c)))
                continue;
            tok = vm->list_token(vm->append_ctx, cn);
            if (tok != UINT32_MAX)
                recycle_node(vm, cn, PK_TOKEN(tok));
        }
    }
    recycle_node(vm, n, PK_DEAD);
}

/* Make room for 'extra' more items (pairs for a dict) in 'n'.  Arena arrays cannot be
 * resized in place, so a growing list leaves its old array behind: doubling keeps that
 * waste below the final size. */
static bool node_reserve(struct vm *vm, struct pk_node *n, size_t extra)
{
    size_t need = (size_t)n->len + extra, ncap, per = n->kind == PK_DICT ? 2 : 1;
    pk_val *items;
    if (need <= n->cap)
        return true;
    if (need > UINT32_MAX)
        return false;
    ncap = n->cap ? (size_t)n->cap * 2 : 0;
    if (ncap < need)
        ncap = need;
    if (ncap > UINT32_MAX)
        ncap = UINT32_MAX;
    items = alloc_items(vm, ncap * per);
    if (!items)
        return false;
    if (n->len)
        memcpy(items, n->items, (size_t)n->len * per * sizeof(pk_val));
    n->items = items;
    n->cap = (uint32_t)ncap;
    return true;
}

static pk_val box(struct vm *vm, uint8_t kind, const void *v)
{
    struct pk_box *b = gm_arena_alloc(&vm->doc->arena, sizeof(*b), 8);
    if (!b)
        return 0;
    b->kind = kind;
    memcpy(&b->v, v, 8);
    return (pk_val)(uintptr_t)b | PK_TAG_BOX;
}

#define SMALL_MIN (-((int64_t)1 << 60))
#define SMALL_MAX (((int64_t)1 << 60) - 1)

static pk_val make_i64(struct vm *vm, int64_t i)
{
    if (i >= SMALL_MIN && i <= SMALL_MAX)
        return ((pk_val)i << 3) | PK_TAG_INT;
    return box(vm, PK_BOX_I64, &i);
}

/* Little-endian two's complement integer of n bytes (LONG1/LONG4): an int64 when it fits,
 * a u64 when it is non-negative and fits 64 bits (a 9-byte LONG1), else a BIGINT box. */
static pk_val make_long(struct vm *vm, const uint8_t *b, size_t n)
{
    uint64_t u = 0;
    bool neg;
    if (n == 0)
        return make_i64(vm, 0);
    neg = (b[n - 1] & 0x80) != 0;
    for (size_t i = 0; i < 8; i++) {
        uint8_t byte = i < n ? b[i] : (neg ? 0xff : 0x00);
        u |= (uint64_t)byte << (8 * i);
    }
    if (n > 8) {
        uint8_t ext = neg ? 0xff : 0x00;
        for (size_t i = 8; i < n; i++)
            if (b[i] != ext) {
                uint64_t z = 0;
                return box(vm, PK_BOX_BIGINT, &z);
            }
        if (!neg && (u >> 63)) /* 2^63 .. 2^64-1 */
            return box(vm, PK_BOX_U64, &u);
        if (neg && !(u >> 63)) {
            uint64_t z = 0;
            return box(vm, PK_BOX_BIGINT, &z);
        }
    }
    return make_i64(vm, (int64_t)u);
}

static enum gm_status memo_put(struct vm *vm, uint64_t idx, pk_val v, uint64_t off)
{
    /* A real pickler numbers memo slots densely from 0; a slot far beyond the slots used so
     * far only serves to make us allocate, so it is refused. */
    if (idx >= vm->memo_len + (1u << 20) || idx >= SIZE_MAX / sizeof(pk_val))
        return gm_fail(vm->err, GM_ERR_FORMAT, off,
                       "pickle: memo index %llu is far beyond the %zu slots used",
                       (unsigned long long)idx, vm->memo_len);
    if (idx >= vm->memo_cap &&
        !grow(vm, (void **)&vm->memo, &vm->memo_cap, (size_t)idx + 1, sizeof(pk_val)))
        return nomem(vm, off);
    while (vm->memo_len <= idx)
        vm->memo[vm->memo_len++] = PK_HOLE;
    vm->memo[idx] = v;
    if (pk_node(v)) {
        struct pk_node *n = (struct pk_node *)(uintptr_t)v;
        if (n->n_puts < UINT8_MAX)
            n->n_puts++;
        n->memo_idx = (uint32_t)(idx > UINT32_MAX ? UINT32_MAX : idx);
    }
    return GM_OK;
}

static inline enum gm_status memo_get(struct vm *vm, uint64_t idx, uint64_t off)
{
    pk_val v;
    if (idx >= vm->memo_len || vm->memo[idx] == PK_HOLE)
        return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: memo slot %llu is empty",
                       (unsigned long long)idx);
    v = vm->memo[idx];
    if (v == PK_DEAD)
        return gm_fail(vm->err, GM_ERR_FORMAT, off,
                       "pickle: memo slot %llu refers to a trace entry that was already consumed "
                       "(a trace entry shared between lists is not supported)",
                       (unsigned long long)idx);
    if (pk_node(v))
        ((struct pk_node *)(uintptr_t)v)->flags |= PK_NODE_SHARED;
    return push(vm, v, off);
}

/* Items from the topmost MARK to the top of the stack: start index, count. */
static enum gm_status pop_mark(struct vm *vm, size_t *start, uint64_t off, uint8_t op)
{
    if (!vm->n_marks)
        return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: %s without a MARK",
                       pk_opcode_name(op));
    *start = vm->marks[--vm->n_marks];
    return GM_OK;
}

/* Values above the topmost MARK must not be consumed by opcodes that ignore marks. */
static size_t floor_sp(const struct vm *vm)
{
    return vm->n_marks ? vm->marks[vm->n_marks - 1] : 0;
}

static enum gm_status need_stack(struct vm *vm, size_t n, uint64_t off, uint8_t op)
{
    if (vm->sp - floor_sp(vm) < n)
        return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: %s on a stack with too few values",
                       pk_opcode_name(op));
    return GM_OK;
}

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

static enum gm_status add_items(struct vm *vm, struct pk_node *n, const pk_val *items, size_t k,
                                uint64_t off)
{
    if (k == 0)
        return GM_OK;
    if (!node_reserve(vm, n, k))
        return nomem(vm, off);
    ref_items(items, k);
    memcpy(n->items + n->len, items, k * sizeof(pk_val));
    n->len += (uint32_t)k;
    return GM_OK;
}

static enum gm_status add_pairs(struct vm *vm, struct pk_node *n, const pk_val *items, size_t k,
                                uint64_t off)
{
    if (k % 2)
        return gm_fail(vm->err, GM_ERR_FORMAT, off,
                       "pickle: SETITEMS with an odd number of values");
    if (k == 0)
        return GM_OK;
    if (!node_reserve(vm, n, k / 2))
        return nomem(vm, off);
    ref_items(items, k);
    memcpy(n->items + 2 * (size_t)n->len, items, k * sizeof(pk_val));
    n->len += (uint32_t)(k / 2);
    return GM_OK;
}

/* A line argument of a protocol-0 opcode, without its '\n'. */
static bool read_line(struct vm *vm, const uint8_t **s, size_t *n)
{
    const uint8_t *nl = memchr(vm->p, '\n', (size_t)(vm->end - vm->p));
    if (!nl)
        return false;
    *s = vm->p;
    *n = (size_t)(nl - vm->p);
    vm->p = nl + 1;
    return true;
}

static bool parse_decimal(const uint8_t *s, size_t n, int64_t *out)
{
    char buf[32];
    char *endp;
    long long v;
    if (n && s[n - 1] == 'L') /* protocol-0 LONG: "123L" */
        n--;
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    v = strtoll(buf, &endp, 10);
    if (errno || *endp)
        return false;
    *out = v;
    return true;
}

#define NEED(k)                                                                                    \
    do {                                                                                           \
        if ((size_t)(vm->end - vm->p) < (size_t)(k))                                               \
            return gm_fail(vm->err, GM_ERR_FORMAT, off,                                            \
                           "pickle: truncated %s argument (file ends at byte %llu)",               \
                           pk_opcode_name(op), (unsigned long long)OFF(vm, vm->end));              \
    } while (0)

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        enum gm_status st_ = (expr);                                                               \
        if (st_ != GM_OK)                                                                          \
            return st_;                                                                            \
    } while (0)

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

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

/* A string-like opcode with a length prefix of 'w' bytes at the current position. */
static enum gm_status string_op(struct vm *vm, uint8_t op, uint64_t off, unsigned w)
{
    uint64_t n;
    NEED(w);
    n = le(vm->p, w);
    if (n > (uint64_t)(vm->end - vm->p) - w)
        return gm_fail(vm->err, GM_ERR_FORMAT, off,
                       "pickle: %s of %llu bytes runs past the end of the file (%llu left)",
                       pk_opcode_name(op), (unsigned long long)n,
                       (unsigned long long)((uint64_t)(vm->end - vm->p) - w));
    vm->p += w + n;
    return push(vm, (off << 3) | PK_TAG_STR, off);
}

/* A MEMOIZE right after the value it memoizes (the common case), without a dispatch. */
static inline enum gm_status fused_memoize(struct vm *vm)
{
    if (vm->p < vm->end && *vm->p == OP_MEMOIZE) {
        uint64_t off = OFF(vm, vm->p);
        vm->p++;
        return memo_put(vm, vm->memo_len, vm->stack[vm->sp - 1], off);
    }
    return GM_OK;
}

static enum gm_status refuse(struct vm *vm, uint8_t op, uint64_t off)
{
    const char *name = pk_opcode_name(op);
    if (op == OP_GLOBAL || op == OP_INST) {
        /* Name what it wanted to import: "module name\n" lines follow. */
        const uint8_t *s = vm->p, *nl1, *nl2 = NULL;
        size_t left = (size_t)(vm->end - vm->p);
        nl1 = memchr(s, '\n', left);
        if (nl1)
            nl2 = memchr(nl1 + 1, '\n', (size_t)(vm->end - nl1 - 1));
        if (nl1 && nl2 && nl2 - s < 200) {
            char what[256];
            size_t a = (size_t)(nl1 - s), b = (size_t)(nl2 - nl1 - 1);
            for (size_t i = 0; i < a + 1 + b; i++) {
                uint8_t c = s[i];
                what[i] = (char)((c == '\n') ? '.' : (c >= 0x20 && c < 0x7f ? c : '?'));
            }
            what[a + 1 + b] = '\0';
            return gm_fail(vm->err, GM_ERR_UNSUPPORTED, off,
                           "pickle: opcode %s would import '%s': refusing to run code from the "
                           "file (snapshots contain only plain data)",
                           name, what);
        }
    }
    if (op == OP_STACK_GLOBAL && vm->sp - floor_sp(vm) >= 2) {
        const char *m, *n;
        size_t ml, nl;
        if (pk_get_str(vm->doc, vm->stack[vm->sp - 2], &m, &ml, NULL) &&
            pk_get_str(vm->doc, vm->stack[vm->sp - 1], &n, &nl, NULL) && ml < 100 && nl < 100) {
            char what[256];
            size_t k = 0;
            for (size_t i = 0; i < ml; i++)
                what[k++] = (m[i] >= 0x20 && m[i] < 0x7f) ? m[i] : '?';
            what[k++] = '.';
            for (size_t i = 0; i < nl; i++)
                what[k++] = (n[i] >= 0x20 && n[i] < 0x7f) ? n[i] : '?';
            what[k] = '\0';
            return gm_fail(vm->err, GM_ERR_UNSUPPORTED, off,
                           "pickle: opcode %s would import '%s': refusing to run code from the "
                           "file (snapshots contain only plain data)",
                           name, what);
        }
    }
    if (op == OP_NEXT_BUFFER || op == OP_READONLY_BUFFER)
        return gm_fail(vm->err, GM_ERR_UNSUPPORTED, off,
                       "pickle: opcode %s needs out-of-band buffers, which snapshots never use",
                       name);
    if (name)
        return gm_fail(vm->err, GM_ERR_UNSUPPORTED, off,
                       "pickle: opcode %s would import or call code: refusing it (snapshots "
                       "contain only plain data)",
                       name);
    return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: unknown opcode 0x%02x", op);
}

/* The mapped input is read through a window (pk_opts.drop_behind), moved at each
 * checkpoint, every WINDOW_STEP bytes: the pages more than WINDOW_BEHIND behind 'at' go
 * back to the kernel (a private read-only file mapping refaults them from the page cache if
 * a memoized string there is read again), and the next WINDOW_STEP bytes are mapped in one
 * system call (MADV_POPULATE_READ) instead of a page fault every 16 pages. */
#define WINDOW_STEP   ((uint64_t)4 << 20)
#define WINDOW_BEHIND ((uintptr_t)1 << 20)

static void input_window(struct vm *vm, const uint8_t *at)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t pmask, lo, hi;
    if (pg <= 0)
        return;
    pmask = ~((uintptr_t)pg - 1);
    lo = ((uintptr_t)vm->base + vm->dropped + (uintptr_t)pg - 1) & pmask;
    if ((uintptr_t)at > lo + WINDOW_BEHIND) {
        hi = ((uintptr_t)at - WINDOW_BEHIND) & pmask;
        if (hi > lo) {
            (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
            vm->dropped = (size_t)(hi - (uintptr_t)vm->base);
        }
    }
#ifdef MADV_POPULATE_READ
    lo = (uintptr_t)at & pmask;
    hi = (size_t)(vm->end - at) > WINDOW_STEP + 4096u
             ? ((uintptr_t)at + WINDOW_STEP + 4096u) & pmask
             : (uintptr_t)vm->end & pmask;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
#endif
}

/* Offer the items stack[first..sp) for list 'n' at stack[list_pos] to the append hook. */
static enum gm_status hook(struct vm *vm, struct pk_node *n, size_t list_pos, size_t first,
                           uint64_t off, bool *consumed)
{
    struct pk_append a;
    enum gm_status st;
    a.doc = vm->doc;
    a.stack = vm->stack;
    a.list_pos = list_pos;
    a.marks = vm->marks;
    a.n_marks = vm->n_marks;
    a.items = vm->stack + first;
    a.n_items = vm->sp - first;
    a.offset = off;
    *consumed = false;
    if (n->len && !(n->flags & PK_NODE_STREAMED))
        return GM_OK; /* a list that already holds items stays a plain list */
    st = vm->on_append(vm->append_ctx, &a, consumed, vm->err);
    if (st != GM_OK)
        return st;
    if (*consumed) {
        n->flags |= PK_NODE_STREAMED;
        for (size_t i = first; i < vm->sp; i++)
            recycle(vm, vm->stack[i], first);
    } else if (n->flags & PK_NODE_STREAMED) {
        return gm_fail(vm->err, GM_ERR_FORMAT, off,
                       "pickle: a streamed list got items its consumer refused");
    }
    return GM_OK;
}

/* ---- the flat fast path (pk_opts.on_flat) ----
 * A batch "MARK item... APPENDS" of a streamed list in which every item is
 *   EMPTY_DICT [put] MARK (key value)* SETITEMS
 *   key:   a string literal [put], or a memo reference to a string or number
 *   value: BININT1/BININT2/BININT/LONG1 (fitting a small int), NONE/NEWTRUE/NEWFALSE, a
 *          string literal [put], a memo reference, or (once per dict) a list of memo
 *          references and new dicts of strings and scalars (frames seen for the first time,
 *          built as real nodes): EMPTY_LIST [put] (MARK item* APPENDS | ref APPEND)*
 * with FRAME opcodes between objects, is read here without building nodes or pushing
 * anything: each dict goes to on_flat as a transient node.  The memo slots the batch puts
 * are written past memo_len with their final values (PK_DEAD for a consumed dict, the
 * consumer's token for its list, the string itself) and only counted once the batch ends
 * with its APPENDS.  Anything else (a put that is not the next slot, a reference to the
 * current dict's own slot or its list's, a dict put twice, a reference to a consumed dict, a
 * consumer error, a limit) abandons the batch, which the ordinary path then reads again from its
 * MARK, reporting any error itself.  The effects that stay behind (SHARED flags and
 * reference counts on nodes the batch referenced) are the ones the ordinary path has too,
 * counts at most overstated, which only keeps more nodes alive. */

static inline const uint8_t *skip_frames(const uint8_t *p, const uint8_t *end)
{
    while (p < end && *p == OP_FRAME) {
        if ((size_t)(end - p) < 9 || le64(p + 1) > (uint64_t)(end - p - 9))
            return NULL;
        p += 9;
    }
    return p;
}

/* An optional put right after a value: it must take the next slot, 'vlen'.  *slot is the
 * slot or SIZE_MAX; false abandons the batch. */
static inline bool flat_put(struct vm *vm, const uint8_t **pp, size_t *vlen, size_t *slot)
{
    const uint8_t *p = *pp;
    uint64_t idx;
    *slot = SIZE_MAX;
    if (p >= vm->end)
        return true;
    if (*p == OP_MEMOIZE) {
        idx = *vlen;
        p += 1;
    } else if (*p == OP_BINPUT) {
        if (vm->end - p < 2)
            return false;
        idx = p[1];
        p += 2;
    } else if (*p == OP_LONG_BINPUT) {
        if (vm->end - p < 5)
            return false;
        idx = le32(p + 1);
        p += 5;
    } else {
        return true;
    }
    if (idx != *vlen)
        return false;
    if (*vlen >= vm->memo_cap &&
        !grow(vm, (void **)&vm->memo, &vm->memo_cap, *vlen + 1, sizeof(pk_val)))
        return false;
    vm->memo[*vlen] = PK_HOLE;
    *slot = (*vlen)++;
    *pp = p;
    return true;
}

/* A memo reference at p (BINGET or LONG_BINGET): its value, which must be in a slot below
 * 'first' (the slots in use) and final (the current dict's own slot and its list's are holes
 * until the dict is done).  Returns the position after it, or NULL. */
static inline const uint8_t *flat_get(struct vm *vm, const uint8_t *p, size_t first, pk_val *out)
{
    uint64_t idx;
    pk_val v;
    if (*p == OP_BINGET) {
        if (vm->end - p < 2)
            return NULL;
        idx = p[1];
        p += 2;
    } else {
        if (vm->end - p < 5)
            return NULL;
        idx = le32(p + 1);
        p += 5;
    }
    if (idx >= first)
        return NULL;
    v = vm->memo[idx];
    if (v == PK_HOLE || v == PK_DEAD)
        return NULL;
    if (pk_tag(v) == PK_TAG_NODE)
        ((struct pk_node *)(uintptr_t)v)->flags |= PK_NODE_SHARED;
    *out = v;
    return p;
}

/* A string literal at p: its value, or NULL when it runs past the end. */
static inline const uint8_t *flat_str(struct vm *vm, const uint8_t *p, pk_val *out)
{
    uint64_t n;
    unsigned w = *p == OP_SHORT_BINUNICODE ? 1 : 4;
    if ((size_t)(vm->end - p) < 1 + w)
        return NULL;
    n = w == 1 ? p[1] : le32(p + 1);
    if (n > (uint64_t)(vm->end - p) - 1 - w)
        return NULL;
    *out = ((pk_val)OFF(vm, p) << 3) | PK_TAG_STR;
    return p + 1 + w + n;
}

/* A scalar value at p (not a memo reference, not a string): NULL when it is none. */
static inline const uint8_t *flat_scalar(struct vm *vm, const uint8_t *p, pk_val *out)
{
    size_t left = (size_t)(vm->end - p);
    switch (*p) {
    case OP_BININT1:
        if (left < 2)
            return NULL;
        *out = ((pk_val)p[1] << 3) | PK_TAG_INT;
        return p + 2;
    case OP_BININT2:
        if (left < 3)
            return NULL;
        *out = ((pk_val)le16(p + 1) << 3) | PK_TAG_INT;
        return p + 3;
    case OP_BININT:
        if (left < 5)
            return NULL;
        *out = ((pk_val)(int64_t)(int32_t)le32(p + 1) << 3) | PK_TAG_INT;
        return p + 5;
    case OP_LONG1: {
        size_t n;
        uint64_t u = 0;
        int64_t i;
        if (left < 2)
            return NULL;
        n = p[1];
        if (n > 8 || left - 2 < n)
            return NULL;
        if (left - 2 >= 8) {
            u = le64(p + 2); /* one load, then keep the n bytes of the number */
            if (n < 8)
                u &= ((uint64_t)1 << (8 * n)) - 1;
        } else {
            for (size_t k = 0; k < n; k++)
                u |= (uint64_t)p[2 + k] << (8 * k);
        }
        if (n && n < 8 && (p[1 + n] & 0x80))
            u |= ~(uint64_t)0 << (8 * n);
        i = (int64_t)u;
        if (i < SMALL_MIN || i > SMALL_MAX)
            return NULL;
        *out = ((pk_val)i << 3) | PK_TAG_INT;
        return p + 2 + n;
    }
    case OP_NONE:
        *out = PK_NONE;
        return p + 1;
    case OP_NEWTRUE:
        *out = PK_TRUE;
        return p + 1;
    case OP_NEWFALSE:
        *out = PK_FALSE;
        return p + 1;
    default:
        return NULL;
    }
}

/* A container value put into the dict: count the reference as add_pairs and recycle do
 * (a list's count goes back down when the dict is consumed). */
static inline void flat_ref_value(pk_val v)
{
    if (pk_tag(v) == PK_TAG_NODE && v) {
        struct pk_node *c = (struct pk_node *)(uintptr_t)v;
        if (c->kind != PK_LIST ? c->refs < UINT8_MAX : c->refs == UINT8_MAX - 1)
            c->refs++;
    }
}

/* A dict of scalars and strings inside a list (a frame seen for the first time):
 * EMPTY_DICT [put] MARK (key value)* SETITEMS, built as a real node, since later entries
 * refer to it.  Returns the position after it, or NULL. */
static const uint8_t *flat_inner_dict(struct vm *vm, const uint8_t *p, size_t *vlen, pk_val *out)
{
    const uint8_t *end = vm->end;
    pk_val kv[2 * 8];
    size_t n = 0, slot, dslot;
    struct pk_node *d;
    p++;
    if (!flat_put(vm, &p, vlen, &dslot))
        return NULL;
    if (!(p = skip_frames(p, end)) || p >= end || *p != OP_MARK)
        return NULL;
    p++;
    for (;;) {
        pk_val v;
        if (!(p = skip_frames(p, end)) || p >= end)
            return NULL;
        if (*p == OP_SETITEMS) {
            p++;
            break;
        }
        if (n == 2 * 8)
            return NULL;
        if (*p == OP_BINGET || *p == OP_LONG_BINGET) {
            if (!(p = flat_get(vm, p, *vlen, &v)) || pk_tag(v) == PK_TAG_NODE)
                return NULL;
        } else if (*p == OP_SHORT_BINUNICODE || *p == OP_BINUNICODE) {
            if (!(p = flat_str(vm, p, &v)) || !flat_put(vm, &p, vlen, &slot))
                return NULL;
            if (slot != SIZE_MAX)
                vm->memo[slot] = v;
        } else if (n % 2 == 0 || !(p = flat_scalar(vm, p, &v))) {
            return NULL; /* keys: strings; values: strings or scalars */
        }
        kv[n++] = v;
        if (n % 2 == 0 && !(p = skip_frames(p, end)))
            return NULL;
    }
    if (n % 2)
        return NULL;
    d = new_node(vm, PK_DICT, (uint32_t)(n / 2));
    if (!d)
        return NULL;
    if (n)
        memcpy(d->items, kv, n * sizeof(pk_val));
    d->len = (uint32_t)(n / 2);
    if (dslot != SIZE_MAX) {
        d->n_puts = 1;
        d->memo_idx = (uint32_t)(dslot > UINT32_MAX ? UINT32_MAX : dslot);
        vm->memo[dslot] = (pk_val)(uintptr_t)d;
    }
    *out = (pk_val)(uintptr_t)d;
    return p;
}

/* The value of a dict key that is a list (frames): EMPTY_LIST [put] then
 * (MARK item* APPENDS | ref APPEND)*, items memo references or new dicts of scalars
 * (flat_inner_dict), into vm->flat_list.  Returns the position after it, or NULL. */
static const uint8_t *flat_list_value(struct vm *vm, const uint8_t *p, size_t *vlen,
                                      size_t *list_slot)
{
    const uint8_t *end = vm->end;
    struct pk_node *l = &vm->flat_list;
    p++;
    if (!flat_put(vm, &p, vlen, list_slot))
        return NULL;
    l->len = 0;
    for (;;) {
        const uint8_t *q;
        pk_val it;
        if (!(p = skip_frames(p, end)) || p >= end)
            return NULL;
        if (*p == OP_MARK) {
            p++;
            for (;;) {
                if (!(p = skip_frames(p, end)) || p >= end)
                    return NULL;
                if (*p == OP_APPENDS) {
                    p++;
                    break;
                }
                if (l->len == FLAT_MAX_ITEMS)
                    return NULL;
                /* the common run of LONG_BINGETs, without the general checks */
                while (*p == OP_LONG_BINGET && end - p >= 6 && l->len < FLAT_MAX_ITEMS) {
                    uint32_t idx = le32(p + 1);
                    if (idx >= *vlen || vm->memo[idx] == PK_HOLE || vm->memo[idx] == PK_DEAD)
                        return NULL;
                    it = vm->memo[idx];
                    if (pk_tag(it) == PK_TAG_NODE)
                        ((struct pk_node *)(uintptr_t)it)->flags |= PK_NODE_SHARED;
                    vm->flat_items[l->len++] = it;
                    p += 5;
                }
                if (*p == OP_APPENDS || *p == OP_FRAME || l->len == FLAT_MAX_ITEMS)
                    continue;
                if (*p == OP_EMPTY_DICT) {
                    if (!(p = flat_inner_dict(vm, p, vlen, &it)))
                        return NULL;
                } else if ((*p != OP_BINGET && *p != OP_LONG_BINGET) ||
                           !(p = flat_get(vm, p, *vlen, &it))) {
                    return NULL;
                }
                vm->flat_items[l->len++] = it;
            }
            continue;
        }
        if ((*p == OP_BINGET || *p == OP_LONG_BINGET) &&
            (q = flat_get(vm, p, *vlen, &it)) != NULL && q < end && *q == OP_APPEND) {
            if (l->len == FLAT_MAX_ITEMS)
                return NULL;
            vm->flat_items[l->len++] = it;
            p = q + 1;
            continue;
        }
        break; /* the next key */
    }
    /* The items' reference counts are taken only if the list is kept as a real node (see
     * flat_batch()): a list read as a stack (a token) holds frame dicts, which recycle()
     * takes only as consumed entries, and never when they were pushed again from the memo
     * (SHARED), as anything in such a list is, or a new dict that only its memo slot can
     * reach again. */
    return p;
}

/* The integer opcodes of a flat dict's values: bytes before the number (0: not one), bytes
 * of the number (LONG1: its own count byte); masks and sign bits by byte count. */
static const uint8_t int_head[256] = {
    [OP_BININT1] = 1, [OP_BININT2] = 1, [OP_BININT] = 1, [OP_LONG1] = 2};
static const uint8_t int_bytes[256] = {[OP_BININT1] = 1, [OP_BININT2] = 2, [OP_BININT] = 4};
static const uint64_t int_mask[9] = {0,
                                     0xff,
                                     0xffff,
                                     0xffffff,
                                     0xffffffff,
                                     0xffffffffffULL,
                                     0xffffffffffffULL,
                                     0xffffffffffffffULL,
                                     ~(uint64_t)0};
static const uint64_t int_sign[9] = {0,
                                     (uint64_t)1 << 7,
                                     (uint64_t)1 << 15,
                                     (uint64_t)1 << 23,
                                     (uint64_t)1 << 31,
                                     (uint64_t)1 << 39,
                                     (uint64_t)1 << 47,
                                     (uint64_t)1 << 55,
                                     (uint64_t)1 << 63};

/* flat_batch() reads fixed-width opcodes with no bounds check of their own while it is
 * FLAT_GUARD bytes or more before the end (checked once per entry and once per pair);
 * the last bytes of a file are left to the ordinary path. */
#define FLAT_GUARD 32

/* FRAME opcodes at p skipped (they come between objects, once per 64 KiB: out of the
 * hot path).  NULL when what follows is within FLAT_GUARD bytes of the end. */
static const uint8_t *flat_frames(const uint8_t *p, const uint8_t *end, const uint8_t *lim)
{
    p = skip_frames(p, end);
    return p && p < lim ? p : NULL;
}

/* A memo reference in a flat dict (BINGET or LONG_BINGET at p, at least FLAT_GUARD bytes
 * before the end): as flat_get(). */
static inline __attribute__((always_inline)) const uint8_t *
flat_ref(struct vm *vm, const uint8_t *p, size_t first, pk_val *out)
{
    uint64_t idx;
    pk_val v;
    if (*p == OP_LONG_BINGET) {
        idx = le32(p + 1);
        p += 5;
    } else {
        idx = p[1];
        p += 2;
    }
    if (idx >= first)
        return NULL;
    v = vm->memo[idx];
    if (v == PK_HOLE || v == PK_DEAD)
        return NULL;
    if (pk_tag(v) == PK_TAG_NODE)
        ((struct pk_node *)(uintptr_t)v)->flags |= PK_NODE_SHARED;
    *out = v;
    return p;
}

/* A string literal at p with its optional put: the value, or NULL (also when what follows
 * is within FLAT_GUARD bytes of the end). */
static inline const uint8_t *flat_str_put(struct vm *vm, const uint8_t *p, const uint8_t *lim,
                                          size_t *vlen, pk_val *out)
{
    size_t slot;
    if (!(p = flat_str(vm, p, out)) || p >= lim || !flat_put(vm, &p, vlen, &slot))
        return NULL;
    if (slot != SIZE_MAX)
        vm->memo[slot] = *out;
    return p;
}

/* Read the batch after a MARK whose list below is the streamed list 'list'.  true: read,
 * the MARK is gone and vm->p is past the APPENDS; false: nothing consumed. */
static bool flat_batch(struct vm *vm, struct pk_node *list)
{
    const uint8_t *p = vm->p, *end = vm->end;
    const uint8_t *lim = (size_t)(end - p) > FLAT_GUARD ? end - FLAT_GUARD : p;
    size_t vlen = vm->memo_len, count = 0, prev_n = SIZE_MAX;
    struct pk_node *d = &vm->flat_dict, *l = &vm->flat_list;

    if (vm->n_marks + 2 > vm->marks_max)
        return false;
    for (size_t j = 0; j < FLAT_MAX_PAIRS; j++) {
        vm->key_mask[j] = 0;
        vm->key_bytes[j] = 1; /* matches nothing */
    }
    for (;;) {
        size_t dict_slot, list_slot = SIZE_MAX, n = 0;
        bool have_list = false, same_keys = true;
        uint32_t tok;

        if (p >= lim)
            goto abandon;
        if (*p != OP_EMPTY_DICT) {
            if (*p == OP_APPENDS) {
                p++;
                break;
            }
            if (*p != OP_FRAME || !(p = flat_frames(p, end, lim)) || *p != OP_EMPTY_DICT)
                goto abandon;
        }
        if (++count + vm->sp + 64 > vm->stack_max)
            goto abandon;
        p++;
        if (!flat_put(vm, &p, &vlen, &dict_slot))
            goto abandon;
        if (*p != OP_MARK && (*p != OP_FRAME || !(p = flat_frames(p, end, lim)) || *p != OP_MARK))
            goto abandon;
        p++;
        for (;;) {
            pk_val k, v;
            /* key */
            if (p >= lim)
                goto abandon;
            /* The same memo reference as the key at this position of the entry before: the
             * same value, with no look-up (within a batch the slots in use never change). */
            if (n < FLAT_MAX_PAIRS && (le64(p) & vm->key_mask[n]) == vm->key_bytes[n]) {
                k = vm->key_val[n];
                p += vm->key_len[n];
                goto have_key;
            }
        key:
            switch (*p) {
            case OP_LONG_BINGET:
            case OP_BINGET: {
                const uint8_t *q = p;
                if (!(p = flat_ref(vm, p, vlen, &k)) || pk_tag(k) == PK_TAG_NODE)
                    goto abandon;
                if (n < FLAT_MAX_PAIRS) {
                    vm->key_len[n] = (uint8_t)(p - q);
                    vm->key_mask[n] = p - q == 2 ? 0xffffu : 0xffffffffffULL;
                    vm->key_bytes[n] = le64(q) & vm->key_mask[n];
                    vm->key_val[n] = k;
                }
                break;
            }
            case OP_SETITEMS:
                p++;
                goto dict_done;
            case OP_SHORT_BINUNICODE:
            case OP_BINUNICODE:
                if (!(p = flat_str_put(vm, p, lim, &vlen, &k)))
                    goto abandon;
                break;
            case OP_FRAME:
                if (!(p = flat_frames(p, end, lim)))
                    goto abandon;
                goto key;
            default:
                goto abandon;
            }
        have_key:
            if (n == FLAT_MAX_PAIRS)
                goto abandon;
            /* value: p is at most 5 bytes past a check, or checked after a string */
        value:
            if (int_head[*p]) {
                /* BININT1, BININT2, BININT or LONG1 (of at most 8 bytes) without a branch on
                 * which: a trace entry's ints change opcode from entry to entry */
                unsigned op = *p, nb = op == OP_LONG1 ? p[1] : int_bytes[op];
                uint64_t u, sb;
                int64_t i;
                if (nb > 8)
                    goto abandon;
                u = le64(p + int_head[op]) & int_mask[nb];
                sb = (op == OP_BININT1 || op == OP_BININT2) ? 0 : int_sign[nb];
                i = (int64_t)((u ^ sb) - sb);
                if (i < SMALL_MIN || i > SMALL_MAX)
                    goto abandon;
                v = ((pk_val)i << 3) | PK_TAG_INT;
                p += int_head[op] + nb;
                goto have_value;
            }
            switch (*p) {
            case OP_BINGET:
            case OP_LONG_BINGET:
                if (!(p = flat_ref(vm, p, vlen, &v)))
                    goto abandon;
                flat_ref_value(v);
                break;
            case OP_NONE:
                v = PK_NONE;
                p++;
                break;
            case OP_NEWTRUE:
                v = PK_TRUE;
                p++;
                break;
            case OP_NEWFALSE:
                v = PK_FALSE;
                p++;
                break;
            case OP_SHORT_BINUNICODE:
            case OP_BINUNICODE:
                if (!(p = flat_str_put(vm, p, lim, &vlen, &v)))
                    goto abandon;
                break;
            case OP_EMPTY_LIST:
                if (have_list)
                    goto abandon;
                have_list = true;
                if (!(p = flat_list_value(vm, p, &vlen, &list_slot)))
                    goto abandon;
                v = (pk_val)(uintptr_t)l;
                break;
            case OP_FRAME:
                if (!(p = flat_frames(p, end, lim)))
                    goto abandon;
                goto value;
            default:
                goto abandon;
            }
        have_value:
            same_keys &= vm->flat_pairs[2 * n] == k; /* a key of the previous dict, if n < prev_n */
            vm->flat_pairs[2 * n] = k;
            vm->flat_pairs[2 * n + 1] = v;
            n++;
        }
    dict_done:
        if (!have_list)
            l->len = 0;
        /* the dict is complete: hand it over */
        d->kind = PK_DICT;
        d->flags = PK_NODE_SCRATCH | (same_keys && n == prev_n ? PK_NODE_SAME_KEYS : 0);
        prev_n = n;
        d->n_puts = dict_slot != SIZE_MAX;
        d->refs = 0;
        d->len = d->cap = (uint32_t)n;
        d->memo_idx = 0;
        d->items = vm->flat_pairs;
        l->kind = PK_LIST;
        l->flags = PK_NODE_SCRATCH;
        l->n_puts = list_slot != SIZE_MAX;
        l->refs = 1;
        l->cap = l->len;
        l->memo_idx = 0;
        l->items = vm->flat_items;
        tok = UINT32_MAX;
        if (vm->on_flat(vm->append_ctx, list, (pk_val)(uintptr_t)d, &tok, vm->err) != GM_OK)
            goto abandon;
        if (dict_slot != SIZE_MAX)
            vm->memo[dict_slot] = PK_DEAD;
        if (list_slot != SIZE_MAX) {
            if (tok != UINT32_MAX) {
                vm->memo[list_slot] = PK_TOKEN(tok);
            } else {
                /* not read as a stack: keep it as a real list */
                struct pk_node *c = new_node(vm, PK_LIST, l->len);
                if (!c)
                    goto abandon;
                if (l->len)
                    memcpy(c->items, l->items, (size_t)l->len * sizeof(pk_val));
                ref_items(c->items, l->len); /* it holds them now, as a list built by APPENDS */
                c->len = l->len;
                c->n_puts = 1;
                c->memo_idx = (uint32_t)(list_slot > UINT32_MAX ? UINT32_MAX : list_slot);
                vm->memo[list_slot] = (pk_val)(uintptr_t)c;
            }
        }
    }
    vm->memo_len = vlen;
    vm->n_marks--;
    vm->p = p;
    vm->on_flat_end(vm->append_ctx, list, true);
    return true;
abandon:
    vm->on_flat_end(vm->append_ctx, list, false);
    return false;
}

static enum gm_status run(struct vm *vm)
{
    uint64_t next_progress = 0;
    struct pk_doc *doc = vm->doc;

    for (;;) {
        const uint8_t *at = vm->p;
        uint64_t off = OFF(vm, at);
        uint8_t op;
        size_t start = 0;
        pk_val v;

        if (at >= vm->end)
            return gm_fail(vm->err, GM_ERR_FORMAT, off,
                           "pickle: file ends without STOP (truncated at byte %llu?)",
                           (unsigned long long)off);
        op = *vm->p++;
        if (off >= next_progress) {
            next_progress = off + WINDOW_STEP;
            if (vm->progress)
                vm->progress(off, (uint64_t)(vm->end - vm->base), vm->progress_ctx);
            if (vm->drop_behind)
                input_window(vm, at);
        }
        switch (op) {
        case OP_PROTO:
            NEED(1);
            if (*vm->p > 5)
                return gm_fail(vm->err, GM_ERR_UNSUPPORTED, off,
                               "pickle: protocol %u is newer than 5", (unsigned)*vm->p);
            doc->protocol = *vm->p++;
            break;
        case OP_FRAME: {
            uint64_t n;
            NEED(8);
            n = le(vm->p, 8);
            vm->p += 8;
            if (n > (uint64_t)(vm->end - vm->p))
                return gm_fail(vm->err, GM_ERR_FORMAT, off,
                               "pickle: FRAME of %llu bytes runs past the end of the file "
                               "(%llu left): truncated?",
                               (unsigned long long)n, (unsigned long long)(vm->end - vm->p));
            break;
        }
        case OP_STOP:
            if (vm->sp != 1 || vm->n_marks)
                return gm_fail(vm->err, GM_ERR_FORMAT, off,
                               "pickle: STOP with %zu values and %zu marks on the stack "
                               "(expected one value)",
                               vm->sp, vm->n_marks);
            doc->root = vm->stack[0];
            return GM_OK;
        case OP_MARK:
            if (vm->n_marks >= vm->marks_max)
                return gm_fail(vm->err, GM_ERR_LIMIT, off, "pickle: nesting deeper than %zu MARKs",
                               vm->marks_max);
            if (vm->n_marks == vm->marks_cap &&
                !grow(vm, (void **)&vm->marks, &vm->marks_cap, vm->n_marks + 1, sizeof(size_t)))
                return nomem(vm, off);
            vm->marks[vm->n_marks++] = vm->sp;
            if (vm->on_flat && vm->sp && pk_node_of_kind(vm->stack[vm->sp - 1], PK_LIST) &&
                (pk_node(vm->stack[vm->sp - 1])->flags & PK_NODE_STREAMED))
                (void)flat_batch(vm, (struct pk_node *)(uintptr_t)vm->stack[vm->sp - 1]);
            break;
        case OP_POP:
            if (vm->sp > floor_sp(vm)) {
                vm->sp--;
            } else if (vm->n_marks) {
                vm->n_marks--; /* POP of a MARK, as CPython does */
            } else {
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: POP on an empty stack");
            }
            break;
        case OP_POP_MARK:
            CHECK(pop_mark(vm, &start, off, op));
            vm->sp = start;
            break;
        case OP_DUP:
            CHECK(need_stack(vm, 1, off, op));
            if (pk_node(vm->stack[vm->sp - 1]))
                ((struct pk_node *)(uintptr_t)vm->stack[vm->sp - 1])->flags |= PK_NODE_SHARED;
            CHECK(push(vm, vm->stack[vm->sp - 1], off));
            break;

        /* ---- constants and numbers ---- */
        case OP_NONE:
            CHECK(push(vm, PK_NONE, off));
            break;
        case OP_NEWTRUE:
            CHECK(push(vm, PK_TRUE, off));
            break;
        case OP_NEWFALSE:
            CHECK(push(vm, PK_FALSE, off));
            break;
        case OP_BININT1:
            NEED(1);
            CHECK(push(vm, ((pk_val)vm->p[0] << 3) | PK_TAG_INT, off));
            vm->p += 1;
            break;
        case OP_BININT2:
            NEED(2);
            CHECK(push(vm, (le(vm->p, 2) << 3) | PK_TAG_INT, off));
            vm->p += 2;
            break;
        case OP_BININT:
            NEED(4);
            CHECK(push(vm, make_i64(vm, (int32_t)(uint32_t)le(vm->p, 4)), off));
            vm->p += 4;
            break;
        case OP_LONG1:
        case OP_LONG4: {
            unsigned w = op == OP_LONG1 ? 1 : 4;
            uint64_t n;
            NEED(w);
            n = le(vm->p, w);
            if (op == OP_LONG4 && (n & 0x80000000u))
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: LONG4 with a negative length");
            if (n > (uint64_t)(vm->end - vm->p) - w)
                return gm_fail(vm->err, GM_ERR_FORMAT, off,
                               "pickle: %s of %llu bytes runs past the end of the file",
                               pk_opcode_name(op), (unsigned long long)n);
            v = make_long(vm, vm->p + w, (size_t)n);
            if (!v)
                return nomem(vm, off);
            vm->p += w + n;
            CHECK(push(vm, v, off));
            break;
        }
        case OP_INT:
        case OP_LONG: {
            const uint8_t *s;
            size_t n;
            int64_t i;
            if (!read_line(vm, &s, &n))
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: %s without a newline",
                               pk_opcode_name(op));
            if (op == OP_INT && n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1')) {
                CHECK(push(vm, s[1] == '1' ? PK_TRUE : PK_FALSE, off));
                break;
            }
            if (!parse_decimal(s, n, &i))
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: bad %s literal",
                               pk_opcode_name(op));
            v = make_i64(vm, i);
            if (!v)
                return nomem(vm, off);
            CHECK(push(vm, v, off));
            break;
        }
        case OP_BINFLOAT: {
            uint64_t bits = 0;
            double d;
            NEED(8);
            for (int i = 0; i < 8; i++)
                bits = (bits << 8) | vm->p[i]; /* big-endian */
            vm->p += 8;
            memcpy(&d, &bits, 8);
            v = box(vm, PK_BOX_FLOAT, &d);
            if (!v)
                return nomem(vm, off);
            CHECK(push(vm, v, off));
            break;
        }
        case OP_FLOAT: {
            const uint8_t *s;
            size_t n;
            char buf[64];
            char *endp;
            double d;
            if (!read_line(vm, &s, &n) || n == 0 || n >= sizeof(buf))
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: bad FLOAT literal");
            memcpy(buf, s, n);
            buf[n] = '\0';
            d = strtod(buf, &endp);
            if (*endp)
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: bad FLOAT literal");
            v = box(vm, PK_BOX_FLOAT, &d);
            if (!v)
                return nomem(vm, off);
            CHECK(push(vm, v, off));
            break;
        }

        /* ---- strings and bytes (kept in the input, referenced by offset) ---- */
        case OP_SHORT_BINUNICODE:
        case OP_SHORT_BINSTRING:
        case OP_SHORT_BINBYTES:
            CHECK(string_op(vm, op, off, 1));
            CHECK(fused_memoize(vm));
            break;
        case OP_BINUNICODE:
        case OP_BINSTRING:
        case OP_BINBYTES:
            CHECK(string_op(vm, op, off, 4));
            break;
        case OP_BINUNICODE8:
        case OP_BINBYTES8:
        case OP_BYTEARRAY8:
            CHECK(string_op(vm, op, off, 8));
            break;

        /* ---- containers ---- */
        case OP_EMPTY_LIST:
        case OP_EMPTY_DICT:
        case OP_EMPTY_SET: {
            struct pk_node *n = new_node(vm,
                                         op == OP_EMPTY_LIST   ? PK_LIST
                                         : op == OP_EMPTY_DICT ? PK_DICT
                                                               : PK_SET,
                                         0);
            if (!n)
                return nomem(vm, off);
            CHECK(push(vm, (pk_val)(uintptr_t)n, off));
            CHECK(fused_memoize(vm));
            break;
        }
        case OP_EMPTY_TUPLE:
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3: {
            size_t k = op == OP_EMPTY_TUPLE ? 0 : (size_t)(op - OP_TUPLE1 + 1);
            struct pk_node *n;
            CHECK(need_stack(vm, k, off, op));
            n = new_node(vm, PK_TUPLE, (uint32_t)k);
            if (!n)
                return nomem(vm, off);
            if (k) {
                ref_items(vm->stack + vm->sp - k, k);
                memcpy(n->items, vm->stack + vm->sp - k, k * sizeof(pk_val));
            }
            n->len = (uint32_t)k;
            vm->sp -= k;
            CHECK(push(vm, (pk_val)(uintptr_t)n, off));
            break;
        }
        case OP_TUPLE:
        case OP_LIST:
        case OP_FROZENSET:
        case OP_DICT: {
            size_t k;
            struct pk_node *n;
            uint8_t kind = op == OP_TUPLE  ? PK_TUPLE
                           : op == OP_LIST ? PK_LIST
                           : op == OP_DICT ? PK_DICT
                                           : PK_FROZENSET;
            CHECK(pop_mark(vm, &start, off, op));
            k = vm->sp - start;
            if (k > UINT32_MAX)
                return gm_fail(vm->err, GM_ERR_LIMIT, off, "pickle: container too large");
            if (op == OP_DICT && k % 2)
                return gm_fail(vm->err, GM_ERR_FORMAT, off,
                               "pickle: DICT with an odd number of values");
            n = new_node(vm, kind, (uint32_t)(op == OP_DICT ? k / 2 : k));
            if (!n)
                return nomem(vm, off);
            if (k) {
                ref_items(vm->stack + start, k);
                memcpy(n->items, vm->stack + start, k * sizeof(pk_val));
            }
            n->len = (uint32_t)(op == OP_DICT ? k / 2 : k);
            vm->sp = start;
            CHECK(push(vm, (pk_val)(uintptr_t)n, off));
            break;
        }
        case OP_APPEND:
        case OP_SETITEM: {
            size_t k = op == OP_APPEND ? 1 : 2;
            struct pk_node *n;
            CHECK(need_stack(vm, k + 1, off, op));
            n = (struct pk_node *)(uintptr_t)pk_node(vm->stack[vm->sp - k - 1]);
            if (!n || n->kind != (op == OP_APPEND ? PK_LIST : PK_DICT))
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: %s to a %s",
                               pk_opcode_name(op), pk_type_name(vm->stack[vm->sp - k - 1]));
            if (op == OP_APPEND) {
                bool consumed = false;
                if (vm->on_append)
                    CHECK(hook(vm, n, vm->sp - 2, vm->sp - 1, off, &consumed));
                if (!consumed)
                    CHECK(add_items(vm, n, vm->stack + vm->sp - 1, 1, off));
            } else
                CHECK(add_pairs(vm, n, vm->stack + vm->sp - 2, 2, off));
            vm->sp -= k;
            break;
        }
        case OP_APPENDS:
        case OP_SETITEMS:
        case OP_ADDITEMS: {
            struct pk_node *n;
            uint8_t want = op == OP_APPENDS ? PK_LIST : op == OP_SETITEMS ? PK_DICT : PK_SET;
            CHECK(pop_mark(vm, &start, off, op));
            if (start == 0 || start - 1 < floor_sp(vm))
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: %s with no container",
                               pk_opcode_name(op));
            n = (struct pk_node *)(uintptr_t)pk_node(vm->stack[start - 1]);
            if (!n || n->kind != want)
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: %s to a %s",
                               pk_opcode_name(op), pk_type_name(vm->stack[start - 1]));
            if (op == OP_SETITEMS) {
                CHECK(add_pairs(vm, n, vm->stack + start, vm->sp - start, off));
            } else {
                bool consumed = false;
                if (op == OP_APPENDS && vm->on_append)
                    CHECK(hook(vm, n, start - 1, start, off, &consumed));
                if (!consumed)
                    CHECK(add_items(vm, n, vm->stack + start, vm->sp - start, off));
            }
            vm->sp = start;
            break;
        }

        /* ---- memo ---- */
        case OP_MEMOIZE:
            CHECK(need_stack(vm, 1, off, op));
            CHECK(memo_put(vm, vm->memo_len, vm->stack[vm->sp - 1], off));
            break;
        case OP_BINPUT:
        case OP_LONG_BINPUT: {
            unsigned w = op == OP_BINPUT ? 1 : 4;
            uint64_t idx;
            NEED(w);
            idx = le(vm->p, w);
            vm->p += w;
            CHECK(need_stack(vm, 1, off, op));
            CHECK(memo_put(vm, idx, vm->stack[vm->sp - 1], off));
            break;
        }
        case OP_BINGET:
            NEED(1);
            CHECK(memo_get(vm, *vm->p++, off));
            break;
        case OP_LONG_BINGET: {
            uint32_t idx;
            NEED(4);
            idx = (uint32_t)vm->p[0] | (uint32_t)vm->p[1] << 8 | (uint32_t)vm->p[2] << 16 |
                  (uint32_t)vm->p[3] << 24;
            vm->p += 4;
            CHECK(memo_get(vm, idx, off));
            break;
        }
        case OP_PUT:
        case OP_GET: {
            const uint8_t *s;
            size_t n;
            int64_t idx;
            if (!read_line(vm, &s, &n) || !parse_decimal(s, n, &idx) || idx < 0)
                return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: bad %s index",
                               pk_opcode_name(op));
            if (op == OP_GET) {
                CHECK(memo_get(vm, (uint64_t)idx, off));
            } else {
                CHECK(need_stack(vm, 1, off, op));
                CHECK(memo_put(vm, (uint64_t)idx, vm->stack[vm->sp - 1], off));
            }
            break;
        }

        /* ---- never: they import, call or need the caller's objects ---- */
        default:
            return refuse(vm, op, off);
        }
    }
}

enum gm_status pk_parse(struct pk_doc *doc, const void *data, size_t len, const struct pk_opts *o,
                        struct gm_error *err)
{
    struct vm vm;
    enum gm_status st;

    memset(doc, 0, sizeof(*doc));
    gm_arena_init(&doc->arena, o && o->max_memory ? o->max_memory : 0);
    doc->data = data;
    doc->len = len;
    doc->root = PK_NONE;

    memset(&vm, 0, sizeof(vm));
    vm.doc = doc;
    vm.base = data;
    vm.p = data;
    vm.end = vm.p + len;
    vm.err = err;
    vm.max_memory = o ? o->max_memory : 0;
    vm.marks_max = o && o->max_depth ? o->max_depth : 1000;
    vm.stack_max = o && o->max_stack ? o->max_stack : ((size_t)1 << 26);
    if (o) {
        vm.on_append = o->on_append;
        vm.append_ctx = o->append_ctx;
        vm.list_token = o->list_token;
        vm.drop_behind = o->drop_behind;
        vm.on_flat = o->on_flat;
        vm.on_flat_end = o->on_flat_end;
    }

    if (len == 0) {
        st = gm_fail(err, GM_ERR_FORMAT, 0, "pickle: empty file");
    } else {
        if (o && len >= (16u << 20)) {
            vm.progress = o->progress;
            vm.progress_ctx = o->progress_ctx;
        }
        if (vm.progress)
            vm.progress(0, len, vm.progress_ctx);
        st = run(&vm);
        if (st == GM_OK && vm.progress)
            vm.progress(len, len, vm.progress_ctx);
    }
    doc->n_memo = vm.memo_len;
    gm_big_free(vm.stack, vm.stack_cap * sizeof(pk_val));
    gm_big_free(vm.marks, vm.marks_cap * sizeof(size_t));
    gm_big_free(vm.memo, vm.memo_cap * sizeof(pk_val));
    if (st != GM_OK) {
        gm_arena_release(&doc->arena);
        doc->root = PK_NONE;
    }
    return st;
}

void pk_doc_release(struct pk_doc *doc)
{
    if (!doc)
        return;
    gm_arena_release(&doc->arena);
    doc->root = PK_NONE;
}

/* ---- accessors ---- */

static const struct pk_box *box_of(pk_val v)
{
    return pk_tag(v) == PK_TAG_BOX ? (const struct pk_box *)(uintptr_t)(v & ~(pk_val)7) : NULL;
}

bool pk_get_i64(pk_val v, int64_t *out)
{
    const struct pk_box *b;
    if (pk_tag(v) == PK_TAG_INT) {
        *out = (int64_t)v >> 3;
        return true;
    }
    if (v == PK_TRUE || v == PK_FALSE) {
        *out = v == PK_TRUE;
        return true;
    }
    b = box_of(v);
    if (b && b->kind == PK_BOX_I64) {
        *out = b->v.i;
        return true;
    }
    if (b && b->kind == PK_BOX_U64 && b->v.u <= INT64_MAX) {
        *out = (int64_t)b->v.u;
        return true;
    }
    return false;
}

bool pk_get_u64(pk_val v, uint64_t *out)
{
    const struct pk_box *b = box_of(v);
    int64_t i;
    if (b && b->kind == PK_BOX_U64) {
        *out = b->v.u;
        return true;
    }
    if (pk_get_i64(v, &i) && i >= 0) {
        *out = (uint64_t)i;
        return true;
    }
    return false;
}

bool pk_get_double(pk_val v, double *out)
{
    const struct pk_box *b = box_of(v);
    int64_t i;
    uint64_t u;
    if (b && b->kind == PK_BOX_FLOAT) {
        *out = b->v.d;
        return true;
    }
    if (pk_get_i64(v, &i)) {
        *out = (double)i;
        return true;
    }
    if (pk_get_u64(v, &u)) {
        *out = (double)u;
        return true;
    }
    return false;
}

bool pk_get_str(const struct pk_doc *doc, pk_val v, const char **p, size_t *n, bool *is_bytes)
{
    uint64_t off;
    uint8_t op;
    unsigned w;
    uint64_t len;
    if (pk_tag(v) != PK_TAG_STR)
        return false;
    off = v >> 3;
    if (off >= doc->len)
        return false;
    op = doc->data[off];
    switch (op) {
    case OP_SHORT_BINUNICODE:
    case OP_SHORT_BINSTRING:
    case OP_SHORT_BINBYTES:
        w = 1;
        break;
    case OP_BINUNICODE:
    case OP_BINSTRING:
    case OP_BINBYTES:
        w = 4;
        break;
    default:
        w = 8;
        break;
    }
    /* The parser checked these bounds when it read the opcode. */
    len = le(doc->data + off + 1, w);
    *p = (const char *)doc->data + off + 1 + w;
    *n = (size_t)len;
    if (is_bytes)
        *is_bytes = !(op == OP_SHORT_BINUNICODE || op == OP_BINUNICODE || op == OP_BINUNICODE8 ||
                      op == OP_SHORT_BINSTRING || op == OP_BINSTRING);
    return true;
}

bool pk_str_eq(const struct pk_doc *doc, pk_val v, const char *s)
{
    const char *p;
    size_t n;
    return pk_get_str(doc, v, &p, &n, NULL) && n == strlen(s) && memcmp(p, s, n) == 0;
}

pk_val pk_dict_get(const struct pk_doc *doc, const struct pk_node *d, const char *s)
{
    size_t want = strlen(s);
    if (!d || d->kind != PK_DICT)
        return PK_HOLE;
    for (size_t i = d->len; i-- > 0;) {
        const char *p;
        size_t n;
        if (pk_get_str(doc, d->items[2 * i], &p, &n, NULL) && n == want && !memcmp(p, s, n))
            return d->items[2 * i + 1];
    }
    return PK_HOLE;
}

const char *pk_type_name(pk_val v)
{
    const struct pk_node *n = pk_node(v);
    const struct pk_box *b = box_of(v);
    if (n) {
        switch (n->kind) {
        case PK_LIST:
            return "list";
        case PK_DICT:
            return "dict";
        case PK_TUPLE:
            return "tuple";
        case PK_SET:
            return "set";
        default:
            return "frozenset";
        }
    }
    switch (pk_tag(v)) {
    case PK_TAG_INT:
        return "int";
    case PK_TAG_STR:
        return "str";
    case PK_TAG_CONST:
        return v == PK_NONE                     ? "None"
               : (v == PK_HOLE || v == PK_DEAD) ? "nothing"
               : pk_is_token(v)                 ? "list (already read)"
                                                : "bool";
    default:
        break;
    }
    if (b)
        return b->kind == PK_BOX_FLOAT ? "float" : "int";
    return "nothing";
}
