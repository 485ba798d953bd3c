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
#include "pickle/pickle_int.h"

#include "base/big.h"
#include "base/vec.h"

#include "gpumem/units.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

enum gm_status pk_vm_nomem(struct vm *vm, uint64_t off)
{
    if (vm->doc->arena.limit_hit || vm->limit_hit) {
        char b[32];
        gm_format_bytes(b, sizeof(b), vm->memory_limit, GM_UNITS_IEC);
        gm_fail(vm->err, GM_ERR_LIMIT, off, "pickle: over the memory limit of %s%s", b,
                vm->limit_given ? "" : " (the default for a file of this size)");
        if (vm->err)
            vm->err->setting = "memory_limit";
        return GM_ERR_LIMIT;
    }
    return gm_fail(vm->err, GM_ERR_NOMEM, off, "pickle: out of memory");
}

/* Grow a heap array of 'elem'-byte items to hold at least 'need'; counted against the cap. */
bool pk_vm_grow(struct vm *vm, void **arr, size_t *cap, size_t need, size_t elem)
{
    /* what the parse holds, or with 'shared' what it and the consumer hold together */
    struct gm_budget bud = gm_budget_make(
        vm->memory_limit, vm->shared ? *vm->shared : vm->heap_bytes + vm->doc->arena.used);
    uint64_t before = bud.used;
    *arr = gm_vec_grow(*arr, cap, need, elem, GM_VEC_BIG, &bud);
    vm->limit_hit |= bud.over;
    vm->heap_bytes += (size_t)(bud.used - before);
    if (vm->shared)
        *vm->shared += (size_t)(bud.used - before);
    return need <= *cap;
}

static enum gm_status push_slow(struct vm *vm, pk_val v, uint64_t off)
{
    if (vm->sp == vm->stack_cap) {
        if (vm->sp >= vm->stack_max)
            return gm_fail(vm->err, GM_ERR_LIMIT, off, "pickle: more than %zu values on the stack",
                           vm->stack_max);
        if (!pk_vm_grow(vm, (void **)&vm->stack, &vm->stack_cap, vm->sp + 1, sizeof(pk_val)))
            return pk_vm_nomem(vm, off);
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

struct pk_node *pk_vm_new_node(struct vm *vm, uint8_t kind, uint32_t cap)
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
    n->list_index = 0;
    n->mark = 0;
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
        if (n->memo_idx < vm->memo_len && memo_load(vm, n->memo_idx) == v &&
            memo_store(vm, n->memo_idx, tomb, false))
            ; /* the slot reads as the tomb from now on */
        else
            return; /* the slot was reused (or the tomb does not fit): be conservative */
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

/* The name the consumer gave list 'l' in this batch (pk_record_name()), or UINT32_MAX. */
static uint32_t name_of(const struct vm *vm, const struct pk_node *l)
{
    uint64_t id;
    return gm_map_get(&vm->names, (uintptr_t)l, &id) ? (uint32_t)id : UINT32_MAX;
}

/* A consumed item (stack[i] with i >= 'below'), and the lists inside it that were held
 * only by consumed dicts: their reference count drops, and at zero a list the consumer
 * named is recycled, its memo slot reading as the name. */
static void recycle(struct vm *vm, pk_val v, size_t below)
{
    struct pk_node *n = (struct pk_node *)(uintptr_t)pk_node(v);
    if (!n || (n->flags & (PK_NODE_SHARED | PK_NODE_STREAMED)) || n->n_puts > 1 || n->refs)
        return;
    if (n->kind == PK_DICT && gm_map_count(&vm->names)) {
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
            tok = name_of(vm, cn);
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

bool pk_memo_reserve(struct vm *vm, size_t need)
{
    size_t pages, old = vm->base_cap;
    if (need > vm->memo_cap &&
        !pk_vm_grow(vm, (void **)&vm->memo, &vm->memo_cap, need, sizeof(uint32_t)))
        return false;
    /* a base for every page of the memo's capacity, not only of 'need': the flat reader
     * reads the base of any index below memo_cap (flat.c), and growth may leave the capacity
     * well past 'need' (a quarter more on the heap, whole units in a mapping: gm_big_room()) */
    pages = ((vm->memo_cap ? vm->memo_cap - 1 : 0) >> MEMO_PAGE_BITS) + 1;
    if (pages > vm->base_cap) {
        if (!pk_vm_grow(vm, (void **)&vm->memo_base, &vm->base_cap, pages, sizeof(uint64_t)))
            return false;
        for (size_t i = old; i < vm->base_cap; i++)
            vm->memo_base[i] = NO_BASE;
    }
    return true;
}

bool pk_memo_store_wide(struct vm *vm, size_t idx, pk_val v)
{
    uint32_t w;
    if (vm->wide_free <= CELL_INDEX) {
        w = vm->wide_free;
        vm->wide_free = (uint32_t)vm->wide[w];
    } else {
        if (vm->n_wide > CELL_INDEX ||
            (vm->n_wide == vm->wide_cap &&
             !pk_vm_grow(vm, (void **)&vm->wide, &vm->wide_cap, vm->n_wide + 1, sizeof(pk_val)))) {
            vm->mem_short = true;
            return false;
        }
        w = (uint32_t)vm->n_wide++;
    }
    vm->wide[w] = v;
    vm->memo[idx] = CELL_WIDE | w;
    return true;
}

static enum gm_status memo_put(struct vm *vm, uint64_t idx, pk_val v, uint64_t off)
{
    /* A real pickler numbers memo slots densely from 0; a slot far beyond the slots used so
     * far only serves to make us allocate, so it is refused. */
    bool fresh = idx >= vm->memo_len;
    if (idx >= vm->memo_len + (1u << 20) || idx >= SIZE_MAX / sizeof(pk_val))
        return gm_fail(vm->err, GM_ERR_FORMAT, off,
                       "pickle: memo index %llu is far beyond the %zu slots used",
                       (unsigned long long)idx, vm->memo_len);
    if (idx >= vm->memo_cap && !pk_memo_reserve(vm, (size_t)idx + 1))
        return pk_vm_nomem(vm, off);
    while (vm->memo_len <= idx)
        vm->memo[vm->memo_len++] = CELL_HOLE;
    if (!memo_store(vm, (size_t)idx, v, fresh))
        return pk_vm_nomem(vm, off);
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
    if (idx >= vm->memo_len || (v = memo_load(vm, (size_t)idx)) == PK_HOLE)
        return gm_fail(vm->err, GM_ERR_FORMAT, off, "pickle: memo slot %llu is empty",
                       (unsigned long long)idx);
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

static enum gm_status add_items(struct vm *vm, struct pk_node *n, const pk_val *items, size_t k,
                                uint64_t off)
{
    if (k == 0)
        return GM_OK;
    if (!node_reserve(vm, n, k))
        return pk_vm_nomem(vm, off);
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
        return pk_vm_nomem(vm, off);
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
    if (op == OP_STRING || op == OP_UNICODE)
        return gm_fail(vm->err, GM_ERR_UNSUPPORTED, off,
                       "pickle: opcode %s (a string written as text, protocol 0) is plain data "
                       "that gpumem does not read: save the snapshot with pickle protocol 2 or "
                       "later (torch does by default)",
                       name);
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
#define WINDOW_STEP   ((uint64_t)2 << 20)
#define WINDOW_BEHIND ((uintptr_t)512 << 10)

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

/* ---- streaming records (pk_stream) ---- */

/* Whether the list at stack[p] is one of the inner lists under the stream's key, by the
 * stack shape every known writer produces for {key: [[...], ...]}: the key, the outer
 * list, [MARK,] earlier inner lists, this list.  *index: its position in the outer list. */
static bool stream_list_at(const struct vm *vm, size_t p, uint32_t *index)
{
    const pk_val *st = vm->stack;
    const struct pk_doc *doc = vm->doc;
    const char *key = vm->stream->key;
    size_t i;
    if (p >= 2 && pk_node_of_kind(st[p - 1], PK_LIST) && pk_str_eq(doc, st[p - 2], key)) {
        i = pk_node(st[p - 1])->len;
    } else if (vm->n_marks) {
        size_t m = vm->marks[vm->n_marks - 1];
        if (m < 2 || m > p || !pk_node_of_kind(st[m - 1], PK_LIST) ||
            !pk_str_eq(doc, st[m - 2], key))
            return false;
        for (size_t j = m; j < p; j++)
            if (!pk_node_of_kind(st[j], PK_LIST))
                return false;
        i = (size_t)pk_node(st[m - 1])->len + (p - m);
    } else {
        return false;
    }
    if (i >= vm->stream->max_lists)
        return false; /* the consumer reports it */
    *index = (uint32_t)i;
    return true;
}

void pk_record_of(const struct pk_doc *doc, pk_val item, struct pk_record *r)
{
    const struct pk_node *d = pk_node_of_kind(item, PK_DICT);
    memset(r, 0, sizeof(*r));
    r->doc = doc;
    r->item = item;
    r->is_dict = d != NULL;
    r->pairs = d ? d->items : NULL;
    r->n = d ? d->len : 0;
    r->offset = GM_NO_OFFSET;
}

bool pk_record_can_name(const struct pk_record *r, pk_val list)
{
    const struct vm *vm = r->vm_;
    const struct pk_node *l = pk_node_of_kind(list, PK_LIST);
    if (!l || !vm)
        return false;
    if (vm->in_flat)
        return l == &vm->flat_list;
    /* a batch that has named MAX_NAMES lists names no more, so which lists are recycled
     * depends on their order, never on their addresses (nor does any message about a
     * damaged file) */
    return !(l->flags & PK_NODE_STREAMED) && l->n_puts <= 1 && gm_map_count(&vm->names) < MAX_NAMES;
}

bool pk_record_name(const struct pk_record *r, pk_val list, uint32_t id)
{
    struct vm *vm = r->vm_;
    const struct pk_node *l = pk_node(list);
    if (!pk_record_can_name(r, list) || id > CELL_INDEX)
        return false;
    if (vm->in_flat) {
        vm->flat_name = id;
        return true;
    }
    return gm_map_put(&vm->names, (uintptr_t)l, id);
}

/* A new batch: the names of the one before no longer count. */
static void names_reset(struct vm *vm)
{
    gm_map_clear(&vm->names);
}

/* The items stack[first..sp) appended to list 'n' at stack[list_pos]: when it is a stream
 * list, hand them to the consumer as records and recycle them (*consumed). */
static enum gm_status hook(struct vm *vm, struct pk_node *n, size_t list_pos, size_t first,
                           uint64_t off, bool *consumed)
{
    const struct pk_stream *s = vm->stream;
    const pk_val *prev = NULL;
    uint32_t index, prev_n = 0;
    struct pk_record r;
    enum gm_status st;

    *consumed = false;
    if (n->flags & PK_NODE_STREAMED) {
        index = n->list_index;
    } else if (n->len || !stream_list_at(vm, list_pos, &index)) {
        return GM_OK; /* a list that already holds items stays a plain list */
    } else {
        n->flags |= PK_NODE_STREAMED;
        n->list_index = index;
    }
    names_reset(vm);
    memset(&r, 0, sizeof(r));
    r.doc = vm->doc;
    r.offset = off;
    r.vm_ = vm;
    for (size_t i = first; i < vm->sp; i++) {
        const struct pk_node *d = pk_node_of_kind(vm->stack[i], PK_DICT);
        r.item = vm->stack[i];
        r.is_dict = d != NULL;
        r.pairs = d ? d->items : NULL;
        r.n = d ? d->len : 0;
        r.same_keys = d && prev && r.n == prev_n;
        for (uint32_t k = 0; r.same_keys && k < r.n; k++)
            r.same_keys = r.pairs[2 * k] == prev[2 * k];
        prev = r.pairs;
        prev_n = r.n;
        if ((st = s->record(s->ctx, index, &r, vm->err)) != GM_OK) {
            s->batch_end(s->ctx, index, false);
            return st;
        }
    }
    s->batch_end(s->ctx, index, true);
    *consumed = true;
    for (size_t i = first; i < vm->sp; i++)
        recycle(vm, vm->stack[i], first);
    return GM_OK;
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
            if (vm->n_marks == vm->marks_cap && !pk_vm_grow(vm, (void **)&vm->marks, &vm->marks_cap,
                                                            vm->n_marks + 1, sizeof(size_t)))
                return pk_vm_nomem(vm, off);
            vm->marks[vm->n_marks++] = vm->sp;
            if (vm->stream && !vm->general_only && vm->sp &&
                pk_node_of_kind(vm->stack[vm->sp - 1], PK_LIST) &&
                (pk_node(vm->stack[vm->sp - 1])->flags & PK_NODE_STREAMED))
                (void)pk_flat_batch(vm, (struct pk_node *)(uintptr_t)vm->stack[vm->sp - 1]);
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
                return pk_vm_nomem(vm, off);
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
                return pk_vm_nomem(vm, off);
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
                return pk_vm_nomem(vm, off);
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
                return pk_vm_nomem(vm, off);
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
            struct pk_node *n = pk_vm_new_node(vm,
                                               op == OP_EMPTY_LIST   ? PK_LIST
                                               : op == OP_EMPTY_DICT ? PK_DICT
                                                                     : PK_SET,
                                               0);
            if (!n)
                return pk_vm_nomem(vm, off);
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
            n = pk_vm_new_node(vm, PK_TUPLE, (uint32_t)k);
            if (!n)
                return pk_vm_nomem(vm, off);
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
            n = pk_vm_new_node(vm, kind, (uint32_t)(op == OP_DICT ? k / 2 : k));
            if (!n)
                return pk_vm_nomem(vm, off);
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
                if (vm->stream)
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
                if (op == OP_APPENDS && vm->stream)
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

/* Everything a parse holds besides the document's arena (also after a fault that left
 * the parse half-way: pk_doc_abandon()). */
static void vm_free(struct vm *vm)
{
    if (vm->shared)
        *vm->shared -= vm->heap_bytes;
    gm_big_free(vm->stack, vm->stack_cap * sizeof(pk_val));
    gm_big_free(vm->marks, vm->marks_cap * sizeof(size_t));
    gm_big_free(vm->memo, vm->memo_cap * sizeof(uint32_t));
    gm_big_free(vm->memo_base, vm->base_cap * sizeof(uint64_t));
    gm_big_free(vm->wide, vm->wide_cap * sizeof(pk_val));
    gm_map_release(&vm->names);
    gm_free(vm->list_cache);
    gm_free(vm);
}

enum gm_status pk_parse(struct pk_doc *doc, const void *data, size_t len, const struct pk_opts *o,
                        struct gm_error *err)
{
    struct vm *vm;
    enum gm_status st;

    memset(doc, 0, sizeof(*doc));
    gm_arena_init(&doc->arena, o && o->memory_limit ? o->memory_limit : 0);
    doc->data = data;
    doc->len = len;
    doc->root = PK_NONE;

    vm = gm_calloc(1, sizeof(*vm));
    if (!vm)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "pickle: out of memory");
    doc->vm_ = vm;
    vm->doc = doc;
    vm->base = data;
    vm->p = data;
    vm->end = vm->p + len;
    vm->err = err;
    vm->memory_limit = o ? o->memory_limit : 0;
    if (o && o->shared) {
        vm->shared = o->shared;
        gm_arena_share(&doc->arena, o->shared);
    }
    vm->limit_given = o && o->limit_given;
    vm->marks_max = o && o->max_depth ? o->max_depth : 1000;
    vm->stack_max = o && o->max_stack ? o->max_stack : ((size_t)1 << 26);
    vm->wide_free = CELL_INDEX + 1;
    vm->flat_name = UINT32_MAX;
    vm->empty_name = UINT32_MAX;
    if (o) {
        vm->drop_behind = o->drop_behind;
        vm->stream = o->stream;
        vm->general_only = o->general_only;
    }

    if (len == 0) {
        st = gm_fail(err, GM_ERR_FORMAT, 0, "pickle: empty file");
    } else {
        if (o && len >= (16u << 20)) {
            vm->progress = o->progress;
            vm->progress_ctx = o->progress_ctx;
        }
        if (vm->progress)
            vm->progress(0, len, vm->progress_ctx);
        st = run(vm);
        if (st == GM_OK && vm->progress)
            vm->progress(len, len, vm->progress_ctx);
    }
    doc->n_memo = vm->memo_len;
    doc->vm_ = NULL;
    vm_free(vm);
    if (st != GM_OK) {
        gm_arena_release(&doc->arena);
        doc->root = PK_NONE;
    }
    return st;
}

void pk_set_mark(pk_val v, uint32_t mark)
{
    struct pk_node *n = (struct pk_node *)(uintptr_t)pk_node(v);
    if (n && !(n->flags & PK_NODE_SCRATCH))
        n->mark = mark;
}

void pk_doc_abandon(struct pk_doc *doc)
{
    if (!doc)
        return;
    if (doc->vm_)
        vm_free(doc->vm_);
    doc->vm_ = NULL;
    gm_arena_release(&doc->arena);
    doc->root = PK_NONE;
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
