/* SPDX-License-Identifier: MIT */
/* btree.c - the library's one ordered set (see btree.h): search, insert with splits, erase
 * with merges, replace in place. */
#include "base/btree.h"

#include <string.h>

#define ORDER GM_BTREE_ORDER
#define HALF  (GM_BTREE_ORDER / 2)

/* a reserved node, empty, of no parent */
static struct gm_btree_node *node_take(struct gm_btree *t)
{
    struct gm_btree_node *x = gm_slab_take(t->pool);
    x->parent = x->prev = x->next = NULL;
    x->n = x->slot = 0;
    return x;
}

static void node_give(struct gm_btree *t, struct gm_btree_node *x)
{
    for (unsigned f = 0; f < GM_BTREE_FINGERS; f++) {
        if (t->insert_finger[f] == x)
            t->insert_finger[f] = NULL;
        if (t->seek_finger[f] == x)
            t->seek_finger[f] = NULL;
    }
    gm_slab_give(t->pool, x);
}

void gm_btree_init(struct gm_btree *t, struct gm_slab *pool, size_t home)
{
    memset(t, 0, sizeof(*t));
    t->pool = pool;
    t->home = home;
}

static void free_subtree(struct gm_btree *t, struct gm_btree_node *x, unsigned height)
{
    if (height > 0)
        for (unsigned i = 0; i < x->n; i++)
            free_subtree(t, x->e[i].ptr, height - 1);
    node_give(t, x);
}

void gm_btree_release(struct gm_btree *t)
{
    if (t->root)
        free_subtree(t, t->root, t->height);
    t->root = t->head = t->tail = NULL;
    memset(t->insert_finger, 0, sizeof(t->insert_finger));
    memset(t->seek_finger, 0, sizeof(t->seek_finger));
    t->height = 0;
    t->n = 0;
}

/* ---- keys ---- */

#define key_less         gm_btree_key_less
#define finger           gm_btree_finger
#define node_lower_bound gm_btree_node_lower_bound
#define set_home         gm_btree_set_home

/* children slot..n-1 of inner node 'x' learn their parent and index */
static void adopt(struct gm_btree_node *x, unsigned slot)
{
    for (unsigned i = slot; i < x->n; i++) {
        struct gm_btree_node *c = x->e[i].ptr;
        c->parent = x;
        c->slot = i;
    }
}

/* ---- search ---- */

struct gm_btree_pos gm_btree_lower_bound(const struct gm_btree *t, struct gm_btree_key key)
{
    struct gm_btree_pos p = {NULL, 0};
    struct gm_btree_node *x = t->root;
    unsigned i;
    if (!x)
        return p;
    for (unsigned h = t->height; h > 0; h--) {
        i = node_lower_bound(x, key);
        /* past every bound: past every key of this subtree, whose last leaf leads on */
        x = x->e[i < x->n ? i : x->n - 1].ptr;
    }
    i = node_lower_bound(x, key);
    if (i < x->n) {
        p.leaf = x;
        p.i = i;
    } else if (x->next) { /* every key of x is less (its bound was not exact) */
        p.leaf = x->next;
    }
    return p;
}

struct gm_btree_pos gm_btree_seek_search(struct gm_btree *t, struct gm_btree_key key, unsigned f)
{
    struct gm_btree_pos p = gm_btree_lower_bound(t, key);
    t->seek_finger[f] = p.leaf;
    t->seek_searches++;
    return p;
}

/* ---- insert ---- */

static void add_right_sibling(struct gm_btree *t, struct gm_btree_node *x, struct gm_btree_node *r);

/* Move the upper half of full node 'x' (a leaf when 'leaf') to a new node right of it,
 * which its parent learns of (splitting in turn when full); returns the new node. */
static struct gm_btree_node *split(struct gm_btree *t, struct gm_btree_node *x, bool leaf)
{
    struct gm_btree_node *r = node_take(t);
    r->n = x->n - HALF;
    memcpy(r->e, x->e + HALF, r->n * sizeof(*r->e));
    x->n = HALF;
    if (leaf) {
        for (unsigned i = 0; i < r->n; i++)
            set_home(t, r->e[i].ptr, r);
        r->prev = x;
        r->next = x->next;
        if (x->next)
            x->next->prev = r;
        else
            t->tail = r;
        x->next = r;
    } else {
        adopt(r, 0);
    }
    add_right_sibling(t, x, r);
    return r;
}

/* 'r' (just split off 'x') becomes the child after x: r takes x's bound, x's bound becomes
 * its last key (a leaf) or its last child's bound */
static void add_right_sibling(struct gm_btree *t, struct gm_btree_node *x, struct gm_btree_node *r)
{
    struct gm_btree_node *p = x->parent;
    unsigned s;
    if (!p) { /* x was the root */
        p = node_take(t);
        p->n = 1;
        p->e[0].key = r->e[r->n - 1].key;
        p->e[0].ptr = x;
        x->parent = p;
        x->slot = 0;
        t->root = p;
        t->height++;
    } else if (p->n == ORDER) {
        split(t, p, false); /* x may now be in the new node: its parent says */
        p = x->parent;
    }
    s = x->slot;
    memmove(p->e + s + 2, p->e + s + 1, (p->n - s - 1) * sizeof(*p->e));
    p->e[s + 1].key = p->e[s].key;
    p->e[s + 1].ptr = r;
    p->e[s].key = x->e[x->n - 1].key;
    p->n++;
    adopt(p, s + 1);
}

enum gm_status gm_btree_insert_slow(struct gm_btree *t, struct gm_btree_key key, void *val,
                                    struct gm_btree_node *x)
{
    unsigned i;
    if (!t->root)
        t->root = t->head = t->tail = node_take(t);
    if (!x) {
        t->insert_searches++;
        x = t->root;
        for (unsigned h = t->height; h > 0; h--) {
            i = node_lower_bound(x, key);
            if (i == x->n) { /* past every bound: the last child's rises to the key */
                i = x->n - 1;
                x->e[i].key = key;
            }
            x = x->e[i].ptr;
        }
    }
    i = node_lower_bound(x, key);
    if (i < x->n && x->e[i].key.hi == key.hi && x->e[i].key.lo == key.lo)
        return GM_ERR_INVALID;
    if (x->n == ORDER) {
        struct gm_btree_node *r = split(t, x, true);
        /* at the split point: the right leaf, as x's bound is now its own last key */
        if (i >= x->n) {
            i -= x->n;
            x = r;
        }
    }
    gm_btree_leaf_put(t, x, i, key, val);
    t->insert_finger[finger(key)] = x;
    return GM_OK;
}

/* ---- erase ---- */

/* drop child 'slot' of 'p' (already emptied or merged away) and give it back */
static void remove_child(struct gm_btree *t, struct gm_btree_node *p, unsigned slot)
{
    struct gm_btree_node *c = p->e[slot].ptr;
    memmove(p->e + slot, p->e + slot + 1, (p->n - slot - 1) * sizeof(*p->e));
    p->n--;
    adopt(p, slot);
    node_give(t, c);
}

static void unlink_leaf(struct gm_btree *t, struct gm_btree_node *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        t->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        t->tail = x->prev;
}

/* move every entry of 'r' to the end of its left neighbour 'l' (same parent, both of height
 * 'h'), 'r' gone */
static void merge(struct gm_btree *t, struct gm_btree_node *l, struct gm_btree_node *r, unsigned h)
{
    struct gm_btree_node *p = l->parent;
    unsigned at = l->n;
    memcpy(l->e + at, r->e, r->n * sizeof(*r->e));
    l->n += r->n;
    if (h == 0) {
        for (unsigned i = at; i < l->n; i++)
            set_home(t, l->e[i].ptr, l);
        unlink_leaf(t, r);
    } else {
        adopt(l, at);
    }
    p->e[l->slot].key = p->e[r->slot].key;
    remove_child(t, p, r->slot);
    /* l's last child and r's first, of two parents before, are neighbours now and may be
     * thin together: merged, l keeps at least as many children as either had */
    if (h > 0) {
        struct gm_btree_node *a = l->e[at - 1].ptr, *b = l->e[at].ptr;
        if (a->n + b->n <= HALF)
            merge(t, a, b, h - 1);
    }
}

/* 'x' (height 'h') has just lost an entry or a child: drop it when empty, merge it with a
 * thin neighbour, and carry on upwards; the root shrinks while it has one child */
static void shrink(struct gm_btree *t, struct gm_btree_node *x, unsigned h)
{
    for (;;) {
        struct gm_btree_node *p = x->parent;
        if (!p)
            break;
        if (x->n == 0) {
            if (h == 0)
                unlink_leaf(t, x);
            remove_child(t, p, x->slot);
        } else if (x->slot + 1 < p->n &&
                   x->n + ((struct gm_btree_node *)p->e[x->slot + 1].ptr)->n <= HALF) {
            merge(t, x, p->e[x->slot + 1].ptr, h);
        } else if (x->slot > 0 &&
                   ((struct gm_btree_node *)p->e[x->slot - 1].ptr)->n + x->n <= HALF) {
            merge(t, p->e[x->slot - 1].ptr, x, h);
        } else {
            return;
        }
        x = p;
        h++;
    }
    /* x is the root */
    while (t->height > 0 && x->n == 1) {
        struct gm_btree_node *c = x->e[0].ptr;
        c->parent = NULL;
        c->slot = 0;
        node_give(t, x);
        t->root = x = c;
        t->height--;
    }
    if (x->n == 0) {
        node_give(t, x);
        t->root = t->head = t->tail = NULL;
        t->height = 0;
    }
}

void gm_btree_erase_at(struct gm_btree *t, struct gm_btree_pos p)
{
    struct gm_btree_node *x = p.leaf;
    set_home(t, x->e[p.i].ptr, NULL);
    memmove(x->e + p.i, x->e + p.i + 1, (x->n - p.i - 1) * sizeof(*x->e));
    x->n--;
    t->n--;
    shrink(t, x, 0);
}

bool gm_btree_erase(struct gm_btree *t, const void *val)
{
    struct gm_btree_pos p = gm_btree_find(t, val);
    if (!p.leaf)
        return false;
    gm_btree_erase_at(t, p);
    return true;
}
