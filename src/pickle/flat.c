/* SPDX-License-Identifier: MIT */
/* flat.c - the flat reader of record batches (pickle.h, "streaming records").
 *
 * A batch "MARK item... APPENDS" of a streamed list in which every item is
 *   EMPTY_DICT [put] MARK (key value)* SETITEMS
 *   key:   a string literal [put], or a memo reference to a string or number
 *   value: BININT1/BININT2/BININT/LONG1 (fitting a small int), NONE/NEWTRUE/NEWFALSE, a
 *          string literal [put], a memo reference, or (once per dict) a list of memo
 *          references and new dicts of strings and scalars (frames seen for the first time,
 *          built as real nodes): EMPTY_LIST [put] (MARK item* APPENDS | ref APPEND)*
 * with FRAME opcodes between objects, is read here without building nodes or pushing
 * anything: each dict goes to the consumer as a record of transient values.  The memo slots the
 * batch puts are written past memo_len with their final values (PK_DEAD for a consumed dict, the
 * consumer's token for its list, the string itself) and only counted once the batch ends
 * with its APPENDS.  Anything else (a put that is not the next slot, a reference to the
 * current dict's own slot or its list's, a dict put twice, a reference to a consumed dict, a
 * consumer error, a limit) abandons the batch, which the ordinary path then reads again from its
 * MARK, reporting any error itself.  The effects that stay behind (SHARED flags and
 * reference counts on nodes the batch referenced) are the ones the ordinary path has too,
 * counts at most overstated, which only keeps more nodes alive. */
#include "pickle/pickle_int.h"

#include "base/hint.h"

/* An optional put right after a value: it must take the next slot, 'vlen'.  *slot is the
 * slot or SIZE_MAX; false abandons the batch.  flat_put_in(): at p within the input. */
static inline bool flat_put_in(struct vm *vm, const uint8_t **pp, size_t *vlen, size_t *slot)
{
    const uint8_t *p = *pp;
    uint64_t idx;
    *slot = SIZE_MAX;
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
    if (*vlen >= vm->memo_cap && !pk_memo_reserve(vm, *vlen + 1))
        return false;
    vm->memo[*vlen] = CELL_HOLE;
    *slot = (*vlen)++;
    *pp = p;
    return true;
}

static inline bool flat_put(struct vm *vm, const uint8_t **pp, size_t *vlen, size_t *slot)
{
    if (*pp >= vm->end) {
        *slot = SIZE_MAX;
        return true;
    }
    return flat_put_in(vm, pp, vlen, slot);
}

/* The value of memo slot idx for a memo reference: the slot must be below 'first' (the slots
 * in use) and final (not a hole); a node it names is marked shared.  false when it is not. */
static GM_INLINE_ALWAYS bool memo_take(struct vm *vm, uint64_t idx, size_t first, pk_val *out)
{
    pk_val v;
    if (idx >= first)
        return false;
    v = memo_load(vm, idx);
    if (v == PK_HOLE || v == PK_DEAD)
        return false;
    if (pk_tag(v) == PK_TAG_NODE)
        ((struct pk_node *)(uintptr_t)v)->flags |= PK_NODE_SHARED;
    *out = v;
    return true;
}

/* A memo reference at p (BINGET or LONG_BINGET): its value, which must be in a slot below
 * 'first' (the slots in use) and final (the current dict's own slot and its list's are holes
 * until the dict is done).  Returns the position after it, or NULL. */
static inline const uint8_t *flat_get(struct vm *vm, const uint8_t *p, size_t first, pk_val *out)
{
    uint64_t idx;
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
    return memo_take(vm, idx, first, out) ? p : NULL;
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
            if (slot != SIZE_MAX && !memo_store(vm, slot, v, true))
                return NULL;
        } else if (n % 2 == 0 || !(p = flat_scalar(vm, p, &v))) {
            return NULL; /* keys: strings; values: strings or scalars */
        }
        kv[n++] = v;
        if (n % 2 == 0 && !(p = skip_frames(p, end)))
            return NULL;
    }
    if (n % 2)
        return NULL;
    d = pk_vm_new_node(vm, PK_DICT, (uint32_t)(n / 2));
    if (!d)
        return NULL;
    if (n)
        memcpy(d->items, kv, n * sizeof(pk_val));
    d->len = (uint32_t)(n / 2);
    if (dslot != SIZE_MAX) {
        d->n_puts = 1;
        d->memo_idx = (uint32_t)(dslot > UINT32_MAX ? UINT32_MAX : dslot);
        if (!memo_store(vm, dslot, (pk_val)(uintptr_t)d, true))
            return NULL;
    }
    *out = (pk_val)(uintptr_t)d;
    return p;
}

/* Whether the n bytes at a and b are equal, a word at a time (no libc call per list). */
static inline bool run_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (le64(a + i) != le64(b + i))
            return false;
    for (; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Whether opcode 'op' after a list's APPENDS goes on with the list's items. */
static inline bool more_items(uint8_t op)
{
    return op == OP_MARK || op == OP_BINGET || op == OP_LONG_BINGET || op == OP_FRAME;
}

/* The list_hint slot of a run starting at q under 'key', by its first 'nbytes' bytes (a multiple
 * of 8, readable there). */
static inline size_t list_hint_of(const uint8_t *q, pk_val key, size_t nbytes)
{
    uint64_t h = key;
    for (size_t i = 0; i < nbytes; i += 8)
        h = (h ^ le64(q + i)) * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> (64 - LIST_HINT_BITS));
}

/* The list of key 'key' whose run starts at q, when it is the run of the list_cache entry hint
 * slot 'hint' names: its name, and the position after its APPENDS; NULL otherwise.  That entry
 * is the one the hash of the run would find (equal bytes are the same run of opcodes, and the
 * same hash). */
static inline const uint8_t *list_entry_run(struct vm *vm, const uint8_t *q, pk_val key,
                                            size_t slot, uint32_t *name)
{
    const struct list_cache_entry *c = &vm->list_cache[slot];
    size_t len = c->len;
    if (c->gen == vm->memo_gen + 1 && c->key == key && (size_t)(vm->end - q) >= len + 2 &&
        q[len] == OP_APPENDS && !more_items(q[len + 1]) && run_eq(c->bytes, q, len)) {
        *name = c->name;
        vm->last_list = (uint8_t)slot;
        return q + len + 1;
    }
    return NULL;
}

static inline const uint8_t *list_hinted(struct vm *vm, const uint8_t *q, pk_val key, size_t hint,
                                         uint32_t *name)
{
    return list_entry_run(vm, q, key, vm->list_hint[hint], name);
}

/* A list value of key 'key' whose items are one run of memo references, MARK (BINGET |
 * LONG_BINGET)+ APPENDS, with nothing after it (the next byte starts no more items), and
 * which has the run of a list named before under the same key (struct list_cache_entry):
 * its name, and the position after the APPENDS.  NULL otherwise, with vm->run set when the run is
 * one to remember once the consumer names the list. */
static inline const uint8_t *list_cached(struct vm *vm, const uint8_t *p, pk_val key,
                                         uint32_t *name)
{
    const uint8_t *q = p + 1, *end = vm->end, *after = NULL;
    const struct list_cache_entry *c;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ key;
    size_t len;
    /* the entry of the list before (an entry often repeats the stack of the one before),
     * then the hints by the first LIST_HINT_LONG bytes (stacks that begin alike, as C++
     * frames do) and by the first LIST_HINT_SHORT (short stacks) */
    if ((after = list_entry_run(vm, q, key, vm->last_list, name)) != NULL)
        return after;
    if (end - q >= LIST_HINT_LONG)
        after = list_hinted(vm, q, key, list_hint_of(q, key, LIST_HINT_LONG), name);
    if (!after && end - q >= LIST_HINT_SHORT)
        after = list_hinted(vm, q, key, list_hint_of(q, key, LIST_HINT_SHORT), name);
    if (after)
        return after;
    for (;;) {
        if (end - q >= 6 && *q == OP_LONG_BINGET) {
            h = (h ^ ((uint64_t)le32(q + 1) << 1 | 1)) * 0xff51afd7ed558ccdULL;
            q += 5;
        } else if (end - q >= 3 && *q == OP_BINGET) {
            h = (h ^ ((uint64_t)q[1] << 1)) * 0xff51afd7ed558ccdULL;
            q += 2;
        } else {
            break;
        }
    }
    len = (size_t)(q - (p + 1));
    if (!len || len > LIST_CACHE_BYTES || end - q < 2 || *q != OP_APPENDS || more_items(q[1]))
        return NULL;
    h ^= h >> 29;
    c = &vm->list_cache[h >> (64 - LIST_CACHE_BITS)];
    if (c->gen == vm->memo_gen + 1 && c->hash == h && c->key == key && c->len == len &&
        run_eq(c->bytes, p + 1, len)) {
        *name = c->name;
        vm->last_list = (uint8_t)(h >> (64 - LIST_CACHE_BITS));
        return q + 1;
    }
    vm->run = p + 1;
    vm->run_len = (uint32_t)len;
    vm->run_hash = h;
    vm->run_key = key;
    return NULL;
}

/* Remember the run of the record's list (list_cached()) under the name the consumer gave it. */
static void list_remember(struct vm *vm, uint32_t name)
{
    size_t slot = vm->run_hash >> (64 - LIST_CACHE_BITS);
    struct list_cache_entry *c = &vm->list_cache[slot];
    if (!vm->run_len) {
        vm->empty_name = name; /* no items: nothing that a write to the memo changes */
        vm->empty_key = vm->run_key;
        return;
    }
    if (vm->end - vm->run >= LIST_HINT_SHORT)
        vm->list_hint[list_hint_of(vm->run, vm->run_key, LIST_HINT_SHORT)] = (uint8_t)slot;
    if (vm->run_len >= LIST_HINT_LONG) /* only when those bytes are the run's own */
        vm->list_hint[list_hint_of(vm->run, vm->run_key, LIST_HINT_LONG)] = (uint8_t)slot;
    c->hash = vm->run_hash;
    c->key = vm->run_key;
    c->gen = vm->memo_gen + 1;
    c->name = name;
    c->len = vm->run_len;
    memcpy(c->bytes, vm->run, vm->run_len);
    vm->last_list = (uint8_t)slot;
}

/* The value of dict key 'key' that is a list (frames): EMPTY_LIST [put] then
 * (MARK item* APPENDS | ref APPEND)*, items memo references or new dicts of scalars
 * (flat_inner_dict), into vm->flat_list; *cached is the name of a list named before under
 * the same key that it repeats (list_cached()), else UINT32_MAX.  Returns the position after it, or
 * NULL. */
static const uint8_t *flat_list_value(struct vm *vm, const uint8_t *p, pk_val key, size_t *vlen,
                                      size_t *list_slot, uint32_t *cached)
{
    const uint8_t *end = vm->end;
    struct pk_node *l = &vm->flat_list;
    p++;
    if (!flat_put(vm, &p, vlen, list_slot))
        return NULL;
    l->len = 0;
    *cached = UINT32_MAX;
    if (vm->list_cache && p < end) {
        if (*p == OP_MARK) {
            const uint8_t *q = list_cached(vm, p, key, cached);
            if (q)
                return q;
        } else if (*p != OP_BINGET && *p != OP_LONG_BINGET && *p != OP_FRAME) {
            /* no items: the name of the empty list, once the consumer has given it one */
            if (vm->empty_name != UINT32_MAX && vm->empty_key == key) {
                *cached = vm->empty_name;
                return p;
            }
            vm->run = p;
            vm->run_len = 0;
            vm->run_key = key;
        }
    }
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
                    if (idx >= *vlen)
                        return NULL;
                    it = memo_load(vm, idx);
                    if (it == PK_HOLE || it == PK_DEAD)
                        return NULL;
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
     * pk_flat_batch()): a list read as a stack (a token) holds frame dicts, which recycle()
     * takes only as consumed entries, and never when they were pushed again from the memo
     * (SHARED), as anything in such a list is, or a new dict that only its memo slot can
     * reach again. */
    return p;
}

/* The fixed-width integer opcodes of a flat dict's values: bytes of the number; masks and
 * sign bits by byte count. */
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

/* pk_flat_batch() reads fixed-width opcodes with no bounds check of their own while it is
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
static GM_INLINE_ALWAYS const uint8_t *flat_ref(struct vm *vm, const uint8_t *p, size_t first,
                                                pk_val *out)
{
    uint64_t idx;
    if (*p == OP_LONG_BINGET) {
        idx = le32(p + 1);
        p += 5;
    } else {
        idx = p[1];
        p += 2;
    }
    return memo_take(vm, idx, first, out) ? p : NULL;
}

/* A string literal at p with its optional put: the value, or NULL (also when what follows
 * is within FLAT_GUARD bytes of the end). */
static inline const uint8_t *flat_str_put(struct vm *vm, const uint8_t *p, const uint8_t *lim,
                                          size_t *vlen, pk_val *out)
{
    size_t slot;
    if (!(p = flat_str(vm, p, out)) || p >= lim || !flat_put_in(vm, &p, vlen, &slot))
        return NULL;
    if (slot != SIZE_MAX && !memo_store_fresh_str(vm, slot, *out))
        return NULL;
    return p;
}

/* The fixed fields of a transient node the records are handed in. */
static void scratch_node(struct pk_node *n, uint8_t kind, uint8_t refs, pk_val *items, uint32_t cap)
{
    n->kind = kind;
    n->flags = PK_NODE_SCRATCH;
    n->refs = refs;
    n->memo_idx = 0;
    n->mark = 0;
    n->items = items;
    n->cap = cap;
}

/* Read the batch after a MARK whose list below is the streamed list 'list'.  true: read,
 * the MARK is gone and vm->p is past the APPENDS; false: nothing consumed. */
bool pk_flat_batch(struct vm *vm, struct pk_node *list)
{
    const struct pk_stream *s = vm->stream;
    struct pk_record r;
    const uint8_t *p = vm->p, *end = vm->end;
    const uint8_t *lim = (size_t)(end - p) > FLAT_GUARD ? end - FLAT_GUARD : p;
    size_t vlen = vm->memo_len, count = 0, prev_n = SIZE_MAX;
    /* the records a batch may hold: the general reader, reading it again, holds them all on
     * its stack (the batch pushes nothing meanwhile) */
    size_t count_max = vm->stack_max > vm->sp + 64 ? vm->stack_max - vm->sp - 64 : 0;
    bool prev_refs = false; /* the keys of the dict before were all memo references */
    struct pk_node *d = &vm->flat_dict, *l = &vm->flat_list;

    if (vm->n_marks + 2 > vm->marks_max)
        return false;
    memset(&r, 0, sizeof(r));
    r.doc = vm->doc;
    r.offset = GM_NO_OFFSET;
    r.vm_ = vm;
    for (size_t j = 0; j <= FLAT_MAX_PAIRS; j++) {
        vm->key_mask[j] = 0;
        vm->key_bytes[j] = 1; /* matches nothing (at FLAT_MAX_PAIRS, for good) */
    }
    /* the transient dict and list each record is handed in (the consumer never changes them:
     * pk_set_mark() leaves transient nodes alone) */
    scratch_node(d, PK_DICT, 0, vm->flat_pairs, FLAT_MAX_PAIRS);
    scratch_node(l, PK_LIST, 1, vm->flat_items, FLAT_MAX_ITEMS);
    r.item = (pk_val)(uintptr_t)d;
    r.is_dict = true;
    r.pairs = vm->flat_pairs;
    if (s->names_by_items && !vm->list_cache)
        vm->list_cache = gm_calloc((size_t)1 << LIST_CACHE_BITS, sizeof(*vm->list_cache));
    for (;;) {
        size_t dict_slot, list_slot = SIZE_MAX, n = 0;
        bool have_list = false, all_hits = true, all_refs = true; /* of the keys read */
        uint32_t name, cached = UINT32_MAX;

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
        if (++count > count_max)
            goto abandon;
        p++;
        vm->run = NULL;
        if (!flat_put_in(vm, &p, &vlen, &dict_slot)) /* p <= lim: within the input */
            goto abandon;
        if (*p != OP_MARK && (*p != OP_FRAME || !(p = flat_frames(p, end, lim)) || *p != OP_MARK))
            goto abandon;
        p++;
        for (;;) {
            pk_val k, v;
            /* key */
            if (GM_UNLIKELY(p >= lim))
                goto abandon;
            /* The same memo reference as the key at this position of the entry before: the
             * same value, with no look-up (within a batch the slots in use never change).
             * Never a hit past FLAT_MAX_PAIRS keys. */
            if (GM_LIKELY((le64(p) & vm->key_mask[n]) == vm->key_bytes[n])) {
                k = vm->key_val[n];
                p += vm->key_len_[n];
                goto have_key;
            }
        key:
            switch (*p) {
            case OP_LONG_BINGET:
            case OP_BINGET: {
                const uint8_t *q = p;
                if (!(p = flat_ref(vm, p, vlen, &k)) || pk_tag(k) == PK_TAG_NODE)
                    goto abandon;
                all_hits = false;
                if (n < FLAT_MAX_PAIRS) {
                    vm->key_len_[n] = (uint8_t)(p - q);
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
                all_hits = all_refs = false;
                if (n < FLAT_MAX_PAIRS) { /* no hit at n while flat_pairs holds this key */
                    vm->key_mask[n] = 0;
                    vm->key_bytes[n] = 1;
                }
                break;
            case OP_FRAME:
                if (!(p = flat_frames(p, end, lim)))
                    goto abandon;
                goto key;
            default:
                goto abandon;
            }
            if (n == FLAT_MAX_PAIRS)
                goto abandon;
            vm->flat_pairs[2 * n] = k;
        have_key:
            /* a hit's key is in flat_pairs already: the key cache at n changes only with the
             * memo reference read there, which is stored there, and a string key read there
             * clears it (so it is valid only while flat_pairs[2 n] holds key_val[n]) */
            /* value: p is at most 5 bytes past a check, or checked after a string */
        value:
            switch (*p) {
            case OP_BININT1:
            case OP_BININT2:
            case OP_BININT: {
                /* without a branch on which: a trace entry's sizes change between them from
                 * entry to entry (32 bits at most: a small int) */
                unsigned nb = int_bytes[*p];
                uint64_t u = le64(p + 1) & int_mask[nb], sb = *p == OP_BININT ? int_sign[4] : 0;
                v = ((pk_val)(int64_t)((u ^ sb) - sb) << 3) | PK_TAG_INT;
                p += 1 + nb;
                break;
            }
            case OP_LONG1: {
                /* of at most 8 bytes, within the small ints */
                unsigned nb = p[1];
                uint64_t u, sb;
                int64_t i;
                if (nb > 8)
                    goto abandon;
                u = le64(p + 2) & int_mask[nb];
                sb = int_sign[nb];
                i = (int64_t)((u ^ sb) - sb);
                if (i < SMALL_MIN || i > SMALL_MAX)
                    goto abandon;
                v = ((pk_val)i << 3) | PK_TAG_INT;
                p += 2 + nb;
                break;
            }
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
            case OP_SHORT_BINUNICODE: {
                /* the common short string with its MEMOIZE, its cell written at once (as
                 * flat_str_put() would, without the hole before it) */
                size_t sn = p[1];
                uint64_t base =
                             vlen < vm->memo_cap ? vm->memo_base[vlen >> MEMO_PAGE_BITS] : NO_BASE,
                         off = OFF(vm, p);
                /* (off - base: past CELL_STR_MAX also when off < base) */
                if ((uintptr_t)p + 3 + sn <= (uintptr_t)lim && p[2 + sn] == OP_MEMOIZE &&
                    base != NO_BASE && off - base <= CELL_STR_MAX) {
                    vm->memo[vlen++] = (uint32_t)(off - base);
                    v = (off << 3) | PK_TAG_STR;
                    p += 3 + sn;
                    break;
                }
            }
                /* fall through */
            case OP_BINUNICODE:
                if (!(p = flat_str_put(vm, p, lim, &vlen, &v)))
                    goto abandon;
                break;
            case OP_EMPTY_LIST:
                if (have_list)
                    goto abandon;
                have_list = true;
                if (!(p = flat_list_value(vm, p, k, &vlen, &list_slot, &cached)))
                    goto abandon;
                v = cached != UINT32_MAX ? PK_TOKEN(cached) : (pk_val)(uintptr_t)l;
                break;
            case OP_FRAME:
                if (!(p = flat_frames(p, end, lim)))
                    goto abandon;
                goto value;
            default:
                goto abandon;
            }
            vm->flat_pairs[2 * n + 1] = v;
            n++;
        }
    dict_done:
        if (!have_list)
            l->len = 0;
        /* The dict is complete: hand it over (the fields that never change are set above).
         * Its keys are those of the dict before when each was the memo reference at its
         * position there (a hit of the key cache, which changes only with the key read at
         * that position) and the keys there were all memo references (keys equal in any
         * other way are not looked for). */
        r.same_keys = all_hits && prev_refs && n == prev_n;
        prev_refs = all_refs;
        prev_n = n;
        d->n_puts = dict_slot != SIZE_MAX;
        d->len = (uint32_t)n;
        l->n_puts = list_slot != SIZE_MAX;
        r.n = (uint32_t)n;
        vm->flat_name = UINT32_MAX;
        vm->in_flat = true;
        if (s->record(s->ctx, list->list_index, &r, vm->err) != GM_OK) {
            vm->in_flat = false;
            goto abandon;
        }
        vm->in_flat = false;
        name = vm->flat_name;
        if (vm->run && name != UINT32_MAX)
            list_remember(vm, name);
        if (cached != UINT32_MAX)
            name = cached;
        if (dict_slot != SIZE_MAX)
            vm->memo[dict_slot] = CELL_DEAD; /* a fresh slot: as memo_store() writes it */
        if (list_slot != SIZE_MAX) {
            if (name <= CELL_INDEX) {
                vm->memo[list_slot] = CELL_NAME | name; /* as memo_store() writes it */
            } else if (name != UINT32_MAX) {
                if (!memo_store(vm, list_slot, PK_TOKEN(name), true))
                    goto abandon;
            } else {
                /* not read as a stack: keep it as a real list */
                struct pk_node *c = pk_vm_new_node(vm, PK_LIST, l->len);
                if (!c)
                    goto abandon;
                if (l->len)
                    memcpy(c->items, l->items, (size_t)l->len * sizeof(pk_val));
                ref_items(c->items, l->len); /* it holds them now, as a list built by APPENDS */
                c->len = l->len;
                c->n_puts = 1;
                c->memo_idx = (uint32_t)(list_slot > UINT32_MAX ? UINT32_MAX : list_slot);
                if (!memo_store(vm, list_slot, (pk_val)(uintptr_t)c, true))
                    goto abandon;
            }
        }
    }
    vm->memo_len = vlen;
    vm->n_marks--;
    vm->p = p;
    s->batch_end(s->ctx, list->list_index, true);
    vm->doc->n_flat_batches++;
    return true;
abandon:
    /* the slots the batch wrote will be written again: no list remembered meanwhile stays */
    vm->memo_gen++;
    s->batch_end(s->ctx, list->list_index, false);
    return false;
}
