/* SPDX-License-Identifier: MIT */
/* btree.h - the library's one ordered set: a B+ tree of unique two-word keys, each with a
 * pointer (library-internal).
 *
 * Keys order by 'hi', then 'lo', both unsigned.  The entries sit in leaves of at most
 * GM_BTREE_ORDER, sorted, the leaves linked in key order; an inner node holds up to
 * GM_BTREE_ORDER children and, for each, a bound: no key in the child is greater, every key
 * in the next child is greater.  A bound is exact when a node splits or merges and is only
 * raised by an insert; an erase leaves it alone, so a search that ends past a leaf's last
 * key steps to the next leaf.  A search reads log2(n) keys packed in a few cache lines, an
 * insert or erase moves at most one node's entries (no move proportional to the set), and
 * each node knows its parent and its index in it, so splits and merges walk up without a
 * search.
 *
 * Nodes come from a pool of records (base/slab.h, GM_BTREE_POOL_INIT) that several trees
 * may share, given back to it when a node empties; gm_slab_release() frees them.
 *
 * A value may know its leaf ('home', the offset in the value of a struct gm_btree_node
 * pointer the tree keeps up to date; NULL once erased): gm_btree_erase() then finds it
 * without a search.  Invariants: every leaf holds at least one entry; two neighbouring
 * children of one parent together hold more than GM_BTREE_ORDER / 2; a node's 'slot' is its
 * index in its parent.  Any insert or erase, and a gm_btree_replace_at() that moves an entry
 * within its leaf, invalidates every position. */
#ifndef GM_BASE_BTREE_H
#define GM_BASE_BTREE_H

#include "base/slab.h"

#include "gpumem/error.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GM_BTREE_ORDER   16       /* entries of a leaf, children of an inner node, at most */
#define GM_BTREE_NO_HOME SIZE_MAX /* values that do not know their leaf */
#define GM_BTREE_FINGERS 16       /* fingers of each kind: classes of keys' 'hi' */

struct gm_btree_key {
    uint64_t hi; /* compared first */
    uint64_t lo;
};

struct gm_btree_node {
    struct gm_btree_node *parent; /* NULL: the root */
    unsigned n;                   /* entries (leaf) or children (inner node) */
    unsigned slot;                /* index among the parent's children */
    struct gm_btree_node *prev;   /* leaves: the neighbours in key order, NULL at the ends */
    struct gm_btree_node *next;
    struct gm_btree_ent {
        struct gm_btree_key key; /* leaf: an entry's key; inner: a child's bound */
        void *ptr;               /* leaf: its value; inner: the child */
    } e[GM_BTREE_ORDER];         /* side by side: a shift moves one array */
};

/* a pool of nodes (base/slab.h), which several trees may share */
#define GM_BTREE_POOL_INIT GM_SLAB_INIT(struct gm_btree_node, 32)

struct gm_btree {
    struct gm_slab *pool;       /* where its nodes come from (GM_BTREE_POOL_INIT) */
    struct gm_btree_node *root; /* NULL when empty */
    struct gm_btree_node *head; /* the first and last leaves */
    struct gm_btree_node *tail;
    unsigned height; /* inner levels above the leaves */
    size_t n;        /* entries */
    size_t home;     /* offset of the leaf pointer in each value, or GM_BTREE_NO_HOME */
    /* fingers: the leaves the last inserts and the last gm_btree_seek()s ended in, one per
     * class of keys' 'hi' (gm_btree_finger()), NULL: none; a key whose place is in its
     * class's leaf is found there without a search from the root.  A finger is a leaf of
     * the tree, so it holds an entry (the first invariant above): node_give() drops the
     * fingers of every node the tree gives back, shrink() gives back every leaf it empties,
     * the root included.  The fast paths read a finger's first and last keys, and its
     * neighbours', without testing for an empty leaf. */
    struct gm_btree_node *insert_finger[GM_BTREE_FINGERS];
    struct gm_btree_node *seek_finger[GM_BTREE_FINGERS];
    /* gm_btree_seek()s and inserts that searched from the root (no finger held the key) */
    size_t seek_searches, insert_searches;
};

/* Entry 'i' of 'leaf'; 'leaf' NULL is the end. */
struct gm_btree_pos {
    struct gm_btree_node *leaf;
    unsigned i;
};

/* ---- the parts of the search and of an insert that the callers inline (btree.c holds the
 * rest: searches from the root, splits, merges) ---- */

__extension__ typedef unsigned __int128 gm_btree_u128;

static inline bool gm_btree_key_less(struct gm_btree_key a, struct gm_btree_key b)
{
    /* one 128-bit comparison (a compare and a subtract with borrow), no branch: a search's
     * comparisons are as good as random */
    return ((gm_btree_u128)a.hi << 64 | a.lo) < ((gm_btree_u128)b.hi << 64 | b.lo);
}

/* the class of 'k' whose fingers it uses: a workload asks for a few sizes (the 'hi' of a
 * set ordered by size) again and again, each in its own place of the tree */
#define GM_BTREE_FINGER_BITS 4 /* log2(GM_BTREE_FINGERS): the hash's top bits pick the class */
_Static_assert(1u << GM_BTREE_FINGER_BITS == GM_BTREE_FINGERS, "fingers: a power of two");
static inline unsigned gm_btree_finger(struct gm_btree_key k)
{
    return (unsigned)((k.hi * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - GM_BTREE_FINGER_BITS));
}

/* index of the first of x's keys not less than 'k' (x->n when none) */
static inline unsigned gm_btree_node_lower_bound(const struct gm_btree_node *x,
                                                 struct gm_btree_key k)
{
    unsigned lo = 0, hi = x->n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (gm_btree_key_less(x->e[mid].key, k))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline void gm_btree_set_home(const struct gm_btree *t, void *val,
                                     struct gm_btree_node *leaf)
{
    if (t->home != GM_BTREE_NO_HOME)
        memcpy((char *)val + t->home, &leaf, sizeof(leaf));
}

/* An empty tree taking its nodes from 'pool' (which must outlive it); 'home' as above.
 * Allocates nothing. */
void gm_btree_init(struct gm_btree *t, struct gm_slab *pool, size_t home);

/* Give every node of 't' back to its pool; 't' is empty again (its values untouched). */
void gm_btree_release(struct gm_btree *t);

/* The nodes 'inserts' inserts into a tree of 'height' may take (a split on every level and
 * a new root each). */
static inline size_t gm_btree_insert_nodes(unsigned height, size_t inserts)
{
    return inserts * (height + inserts + 1);
}

/* Room for 'inserts' more inserts into 't', so that they cannot fail: GM_OK or
 * GM_ERR_NOMEM. */
static inline enum gm_status gm_btree_reserve(struct gm_btree *t, size_t inserts)
{
    size_t need = gm_btree_insert_nodes(t->height, inserts);
    return t->pool->n_spare >= need ? GM_OK : gm_slab_reserve(t->pool, need);
}

/* The leaf of the last insert of key's class when 'key' belongs there: below its first key
 * and above the bound of the subtree before it (which an erase may have left high), or
 * above its first and below its last, or (its bounds raised to the key) below the next
 * leaf's first; NULL otherwise.  A key equal to an entry's is refused by the caller. */
static inline struct gm_btree_node *gm_btree_insert_finger(struct gm_btree *t,
                                                           struct gm_btree_key key)
{
    struct gm_btree_node *x = t->insert_finger[gm_btree_finger(key)];
    if (!x)
        return NULL;
    assert(x->n > 0); /* a finger is a leaf of the tree, never empty (struct gm_btree) */
    if (!gm_btree_key_less(x->e[0].key, key)) {
        /* not above its first: its own unless the bound of the subtree before it (the
         * nearest left sibling of x or of an ancestor) is not below the key; none, x is the
         * first leaf */
        for (struct gm_btree_node *c = x; c->parent; c = c->parent)
            if (c->slot > 0)
                return gm_btree_key_less(c->parent->e[c->slot - 1].key, key) ? x : NULL;
        return x;
    }
    if (gm_btree_key_less(key, x->e[x->n - 1].key))
        return x;
    if (!gm_btree_key_less(x->e[x->n - 1].key, key) ||
        (x->next && !gm_btree_key_less(key, x->next->e[0].key)))
        return NULL; /* present, or the next leaf's */
    for (struct gm_btree_node *c = x, *p = x->parent;
         p && gm_btree_key_less(p->e[c->slot].key, key); c = p, p = p->parent)
        p->e[c->slot].key = key;
    return x;
}

/* Put 'val' under 'key' at index i of leaf 'x', which has room: the one way an entry enters a
 * leaf (the inline fast path below and gm_btree_insert_slow()) */
static inline void gm_btree_leaf_put(struct gm_btree *t, struct gm_btree_node *x, unsigned i,
                                     struct gm_btree_key key, void *val)
{
    memmove(x->e + i + 1, x->e + i, (x->n - i) * sizeof(*x->e));
    x->e[i].key = key;
    x->e[i].ptr = val;
    x->n++;
    gm_btree_set_home(t, val, x);
    t->n++;
}

/* gm_btree_insert() where the key's leaf is 'x' (NULL: not known, a search from the root
 * finds it) and may be full, the tree empty (btree.c) */
enum gm_status gm_btree_insert_slow(struct gm_btree *t, struct gm_btree_key key, void *val,
                                    struct gm_btree_node *x);

/* Insert 'val' under 'key': GM_OK; GM_ERR_INVALID (nothing changed) when 'key' is
 * present; GM_ERR_NOMEM when no room was reserved and none can be had.  Into the leaf its
 * class's finger holds, when the key belongs there and the leaf has room, here. */
static inline enum gm_status gm_btree_insert(struct gm_btree *t, struct gm_btree_key key, void *val)
{
    struct gm_btree_node *x;
    unsigned i;
    if (gm_btree_reserve(t, 1))
        return GM_ERR_NOMEM;
    if (!t->root || !(x = gm_btree_insert_finger(t, key)) || x->n == GM_BTREE_ORDER)
        return gm_btree_insert_slow(t, key, val, t->root ? x : NULL);
    i = gm_btree_node_lower_bound(x, key);
    if (i < x->n && x->e[i].key.hi == key.hi && x->e[i].key.lo == key.lo)
        return GM_ERR_INVALID;
    gm_btree_leaf_put(t, x, i, key, val);
    return GM_OK;
}

/* The first entry whose key is not less than 'key', or the end. */
struct gm_btree_pos gm_btree_lower_bound(const struct gm_btree *t, struct gm_btree_key key);

/* gm_btree_lower_bound(), looking first in the leaf the last seek of a key of the same class
 * ended in, and beside it: a workload that asks for the same few sizes again and again comes
 * back to it (71 % of the best-fit searches of llama-3.1-70b's training replays, 38 % with
 * one finger that knew the leaf's inside only). */
/* gm_btree_seek()'s search from the root, its finger 'f' then the leaf found (btree.c) */
struct gm_btree_pos gm_btree_seek_search(struct gm_btree *t, struct gm_btree_key key, unsigned f);

static inline struct gm_btree_pos gm_btree_seek(struct gm_btree *t, struct gm_btree_key key)
{
    unsigned f = gm_btree_finger(key);
    struct gm_btree_node *x = t->seek_finger[f];
    struct gm_btree_pos p;
    /* Not above its last key: the answer is in it when above its first, or is its first
     * when the leaf before ends below the key (or none does).  Above its last: the next
     * leaf's first when not below the key, the end when no leaf follows. */
    if (x) {
        assert(x->n > 0); /* a finger is a leaf of the tree, never empty (struct gm_btree) */
        p.i = 0;
        if (!gm_btree_key_less(x->e[x->n - 1].key, key)) {
            if (gm_btree_key_less(x->e[0].key, key)) {
                p.leaf = x;
                p.i = gm_btree_node_lower_bound(x, key);
                return p;
            }
            if (!x->prev || gm_btree_key_less(x->prev->e[x->prev->n - 1].key, key)) {
                p.leaf = x;
                return p;
            }
        } else if (!x->next || !gm_btree_key_less(x->next->e[0].key, key)) {
            p.leaf = x->next;
            return p;
        }
    }
    return gm_btree_seek_search(t, key, f);
}

/* Erase the entry at 'p', which is not the end. */
void gm_btree_erase_at(struct gm_btree *t, struct gm_btree_pos p);

/* Erase 'val', found by its home: false when it is not in 't' (or 't' keeps no homes). */
bool gm_btree_erase(struct gm_btree *t, const void *val);

/* The position of 'val' in its home 'leaf' (NULL: none), whichever tree that leaf is in:
 * the end when the leaf does not hold it. */
static inline struct gm_btree_pos gm_btree_find_in_leaf(struct gm_btree_node *leaf, const void *val)
{
    struct gm_btree_pos p = {NULL, 0};
    for (unsigned i = 0; leaf && i < leaf->n; i++)
        if (leaf->e[i].ptr == val) {
            p.leaf = leaf;
            p.i = i;
            break;
        }
    return p;
}

/* The position of 'val', found by its home: the end when it is not in 't' (or 't' keeps no
 * homes).  A caller that knows 't' holds it may skip the look for the leaf's tree:
 * gm_btree_find_held(). */
static inline struct gm_btree_pos gm_btree_find(const struct gm_btree *t, const void *val)
{
    struct gm_btree_pos p = {NULL, 0};
    struct gm_btree_node *leaf, *top;
    if (t->home == GM_BTREE_NO_HOME)
        return p;
    memcpy(&leaf, (const char *)val + t->home, sizeof(leaf));
    if (!leaf)
        return p;
    /* the leaf may be another tree's (a value in one of several sets) */
    for (top = leaf; top->parent; top = top->parent)
        ;
    if (top != t->root)
        return p;
    return gm_btree_find_in_leaf(leaf, val);
}

/* gm_btree_find() of a value 't' holds, or of none (the end): by its home alone, the leaf's
 * tree not looked for (a value that is in another of several trees is found there). */
static inline struct gm_btree_pos gm_btree_find_held(const struct gm_btree *t, const void *val)
{
    struct gm_btree_node *leaf = NULL;
    if (t->home != GM_BTREE_NO_HOME)
        memcpy(&leaf, (const char *)val + t->home, sizeof(leaf));
    return gm_btree_find_in_leaf(leaf, val);
}

/* Put 'key' and 'val' in the place of the entry at 'p' (not the end) when the place of 'key'
 * is in p's leaf: above the leaf's first key (or anywhere below in the tree's first leaf)
 * and below its last (a key above the leaf's last entry is refused, as its leaf's bound
 * would have to rise).  No search from the root: the entry itself when the entries beside it
 * are below and above 'key', else the leaf's entries between the two places shifted by one;
 * true.  False, and nothing changed, otherwise or when 'key' is another entry's (erase and
 * insert then).  The replaced value loses its home when 'val' is another. */
static inline bool gm_btree_replace_at(struct gm_btree *t, struct gm_btree_pos p,
                                       struct gm_btree_key key, void *val)
{
    struct gm_btree_node *x = p.leaf;
    unsigned i = p.i, j = i;
    struct gm_btree_key old = x->e[i].key;
    void *was = x->e[i].ptr;
    if (gm_btree_key_less(key, old) &&
        (i > 0 ? !gm_btree_key_less(x->e[i - 1].key, key) : x->prev != NULL)) {
        /* lower than the entry before: still this leaf's when above its first key (an entry
         * of the leaf, so above every key of the leaves before, whatever their bounds say) */
        if (x->prev && !gm_btree_key_less(x->e[0].key, key))
            return false;
        j = gm_btree_node_lower_bound(x, key); /* below i: e[i - 1] is not less */
        if (!gm_btree_key_less(key, x->e[j].key))
            return false; /* present */
        memmove(x->e + j + 1, x->e + j, (i - j) * sizeof(*x->e));
    } else if (gm_btree_key_less(old, key) &&
               (i + 1 == x->n || !gm_btree_key_less(key, x->e[i + 1].key))) {
        /* higher than the entry after: still this leaf's when below its last key (within the
         * leaf's bound) */
        if (!gm_btree_key_less(key, x->e[x->n - 1].key))
            return false;
        j = gm_btree_node_lower_bound(x, key); /* above i + 1, below n */
        if (!gm_btree_key_less(key, x->e[j].key))
            return false; /* present */
        j--;
        memmove(x->e + i, x->e + i + 1, (j - i) * sizeof(*x->e));
    }
    x->e[j].key = key;
    x->e[j].ptr = val;
    if (was != val)
        gm_btree_set_home(t, was, NULL);
    gm_btree_set_home(t, val, x);
    return true;
}

static inline struct gm_btree_pos gm_btree_first(const struct gm_btree *t)
{
    struct gm_btree_pos p = {t->head, 0};
    return p;
}

static inline struct gm_btree_pos gm_btree_last(const struct gm_btree *t)
{
    struct gm_btree_pos p = {t->tail, t->tail ? t->tail->n - 1 : 0};
    return p;
}

/* the value at 'p', NULL at the end */
static inline void *gm_btree_at(struct gm_btree_pos p)
{
    return p.leaf ? p.leaf->e[p.i].ptr : NULL;
}

/* the key at 'p', which is not the end */
static inline struct gm_btree_key gm_btree_key_at(struct gm_btree_pos p)
{
    return p.leaf->e[p.i].key;
}

/* step to the next entry (or the end); 'p' is not the end */
static inline void gm_btree_next(struct gm_btree_pos *p)
{
    if (++p->i == p->leaf->n) {
        p->leaf = p->leaf->next;
        p->i = 0;
    }
}

/* step to the previous entry (from the end: the last); false (and 'p' unchanged) at the
 * first */
static inline bool gm_btree_prev(const struct gm_btree *t, struct gm_btree_pos *p)
{
    if (!p->leaf) {
        if (!t->tail)
            return false;
        *p = gm_btree_last(t);
        return true;
    }
    if (p->i > 0) {
        p->i--;
        return true;
    }
    if (!p->leaf->prev)
        return false;
    p->leaf = p->leaf->prev;
    p->i = p->leaf->n - 1;
    return true;
}

#endif
