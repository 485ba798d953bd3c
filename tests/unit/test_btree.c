/* SPDX-License-Identifier: MIT */
/* test_btree.c - the ordered set (base/btree.h): random inserts, erases, searches and
 * replaces held against a plain sorted array, the tree's invariants checked as it grows and
 * shrinks, and the edge cases (empty, one entry, equal halves of keys, extreme keys, a
 * present key, a value of another tree, reserved inserts under allocation failure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/btree.h"
#include "gpumem/internal/alloc_hooks.h"

#include <stdlib.h>
#include <string.h>

/* a value that knows its leaf */
struct item {
    struct gm_btree_key key;
    struct gm_btree_node *leaf;
};

#define HOME offsetof(struct item, leaf)

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int key_cmp(struct gm_btree_key a, struct gm_btree_key b)
{
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    if (a.lo != b.lo)
        return a.lo < b.lo ? -1 : 1;
    return 0;
}

/* ---- the reference: a sorted array of items ---- */

struct ref {
    struct item **v;
    size_t n;
};

static size_t ref_lower_bound(const struct ref *r, struct gm_btree_key k)
{
    size_t i = 0;
    while (i < r->n && key_cmp(r->v[i]->key, k) < 0)
        i++;
    return i;
}

static void ref_insert(struct ref *r, struct item *it)
{
    size_t i = ref_lower_bound(r, it->key);
    memmove(r->v + i + 1, r->v + i, (r->n - i) * sizeof(*r->v));
    r->v[i] = it;
    r->n++;
}

static void ref_erase(struct ref *r, const struct item *it)
{
    size_t i = ref_lower_bound(r, it->key);
    assert_ptr_equal(r->v[i], it);
    memmove(r->v + i, r->v + i + 1, (r->n - i - 1) * sizeof(*r->v));
    r->n--;
}

/* ---- the invariants ---- */

/* the subtree of 'x' at 'height': parents and slots, keys ascending and within (lo, hi]
 * (lo NULL: no lower limit), children of one parent not both thin; returns its entries */
static size_t check_node(const struct gm_btree *t, const struct gm_btree_node *x, unsigned height,
                         const struct gm_btree_key *lo, const struct gm_btree_key *hi,
                         const struct gm_btree_node **leaf)
{
    size_t n = 0;
    assert_true(x->n >= 1 && x->n <= GM_BTREE_ORDER);
    for (unsigned i = 0; i < x->n; i++) {
        if (i > 0)
            assert_true(key_cmp(x->e[i - 1].key, x->e[i].key) < 0);
        if (lo)
            assert_true(key_cmp(*lo, x->e[i].key) < 0);
        if (hi)
            assert_true(key_cmp(x->e[i].key, *hi) <= 0);
    }
    if (height == 0) {
        /* the leaves in order make the chain */
        assert_ptr_equal(x, *leaf);
        for (unsigned i = 0; i < x->n; i++)
            if (t->home != GM_BTREE_NO_HOME)
                assert_ptr_equal(((const struct item *)x->e[i].ptr)->leaf, x);
        *leaf = x->next;
        return x->n;
    }
    for (unsigned i = 0; i < x->n; i++) {
        const struct gm_btree_node *c = x->e[i].ptr;
        assert_ptr_equal(c->parent, x);
        assert_int_equal(c->slot, i);
        if (i > 0)
            assert_true(((const struct gm_btree_node *)x->e[i - 1].ptr)->n + c->n >
                        GM_BTREE_ORDER / 2);
        n += check_node(t, c, height - 1, i > 0 ? &x->e[i - 1].key : lo, &x->e[i].key, leaf);
    }
    return n;
}

/* every finger is NULL or a leaf of the tree, which holds an entry: the inline fast paths
 * (gm_btree_insert_finger, gm_btree_seek) read a finger's keys without testing for an empty
 * leaf; a node given back to the pool keeps no finger */
static void check_fingers(const struct gm_btree *t)
{
    for (unsigned f = 0; f < GM_BTREE_FINGERS; f++) {
        const struct gm_btree_node *x[2] = {t->insert_finger[f], t->seek_finger[f]};
        for (size_t k = 0; k < 2; k++) {
            const struct gm_btree_node *leaf = t->head;
            if (!x[k])
                continue;
            while (leaf && leaf != x[k])
                leaf = leaf->next;
            assert_ptr_equal(leaf, x[k]);
            assert_true(leaf->n >= 1);
        }
    }
}

static void check_tree(const struct gm_btree *t, const struct ref *r)
{
    const struct gm_btree_node *leaf = t->head;
    size_t i = 0;
    assert_int_equal(t->n, r->n);
    check_fingers(t);
    if (!t->root) {
        assert_int_equal(r->n, 0);
        assert_null(t->head);
        assert_null(t->tail);
        return;
    }
    assert_null(t->root->parent);
    assert_int_equal(check_node(t, t->root, t->height, NULL, NULL, &leaf), r->n);
    assert_null(leaf);
    assert_null(t->head->prev);
    assert_null(t->tail->next);
    for (struct gm_btree_pos p = gm_btree_first(t); p.leaf; gm_btree_next(&p), i++)
        assert_ptr_equal(gm_btree_at(p), r->v[i]);
    assert_int_equal(i, r->n);
}

/* lower_bound of 'k' agrees with the reference, and so do its neighbours */
static void check_search(const struct gm_btree *t, const struct ref *r, struct gm_btree_key k)
{
    struct gm_btree_pos p = gm_btree_lower_bound(t, k), q;
    size_t i = ref_lower_bound(r, k);
    assert_ptr_equal(gm_btree_at(p), i < r->n ? r->v[i] : NULL);
    if (i < r->n)
        assert_int_equal(key_cmp(gm_btree_key_at(p), r->v[i]->key), 0);
    q = p;
    if (gm_btree_prev(t, &q))
        assert_ptr_equal(gm_btree_at(q), r->v[i - 1]);
    else
        assert_int_equal(i, 0);
    if (p.leaf) {
        gm_btree_next(&p);
        assert_ptr_equal(gm_btree_at(p), i + 1 < r->n ? r->v[i + 1] : NULL);
    }
}

/* ---- the tests ---- */

/* Random inserts, erases (by position and by home) and searches (lower_bound and seek, near
 * the last search often), growing to 'n_max' entries and draining to none, twice; keys from
 * a small range of 'hi' (many equal) so that the 'lo' half decides often. */
static void random_against_sorted_array(uint64_t seed, size_t n_max, uint64_t hi_range)
{
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item *items = calloc(n_max, sizeof(*items));
    bool *in = calloc(n_max, sizeof(*in));
    struct ref r = {calloc(n_max, sizeof(struct item *)), 0};
    struct gm_btree_key last = {0, 0};
    uint64_t s = seed;
    assert_non_null(items);
    assert_non_null(in);
    assert_non_null(r.v);
    gm_btree_init(&t, &pool, HOME);
    for (size_t i = 0; i < n_max; i++) {
        items[i].key.hi = rng_next(&s) % hi_range;
        items[i].key.lo = (uint64_t)i * 2 + 1; /* distinct, odd: even keys fall between */
    }
    for (int step = 0; step < 60000; step++) {
        bool grow = (step / 15000) % 2 == 0;
        size_t i = (size_t)(rng_next(&s) % n_max);
        uint64_t op = rng_next(&s) % 8;
        if (op < 5) {
            if (in[i] == grow) {
                if (!grow) /* absent: erasing it finds nothing */
                    assert_false(gm_btree_erase(&t, &items[i]));
                else /* present: a second insert is refused */
                    assert_int_equal(gm_btree_insert(&t, items[i].key, &items[i]), GM_ERR_INVALID);
                continue;
            }
            if (grow) {
                assert_int_equal(gm_btree_insert(&t, items[i].key, &items[i]), GM_OK);
                ref_insert(&r, &items[i]);
            } else if (op & 1) {
                assert_true(gm_btree_erase(&t, &items[i]));
                assert_null(items[i].leaf);
                ref_erase(&r, &items[i]);
            } else {
                struct gm_btree_pos p = gm_btree_lower_bound(&t, items[i].key);
                assert_ptr_equal(gm_btree_at(p), &items[i]);
                gm_btree_erase_at(&t, p);
                ref_erase(&r, &items[i]);
            }
            in[i] = grow;
        } else {
            struct gm_btree_key k;
            struct gm_btree_pos q;
            size_t at;
            /* anywhere, below every key of a 'hi' (a best fit's search), or near the last
             * search (where a seek's finger finds it) */
            if (op == 5 || !step) {
                k.hi = rng_next(&s) % (hi_range + 2);
                k.lo = rng_next(&s) % (2 * n_max + 2);
            } else if (op == 6) { /* a best fit's: below every key of its 'hi' */
                k.hi = rng_next(&s) % (hi_range + 2);
                k.lo = 0;
            } else {
                k = last;
                k.lo = k.lo + rng_next(&s) % 16;
                k.lo = k.lo > 8 ? k.lo - 8 : 0;
            }
            check_search(&t, &r, k);
            q = gm_btree_seek(&t, k);
            at = ref_lower_bound(&r, k);
            assert_ptr_equal(gm_btree_at(q), at < r.n ? r.v[at] : NULL);
            last = k;
        }
        if (step % 1000 == 0)
            check_tree(&t, &r);
    }
    check_tree(&t, &r);
    gm_btree_release(&t);
    assert_null(t.root);
    gm_slab_release(&pool);
    free(r.v);
    free(in);
    free(items);
}

static void test_random_many_equal_high_halves(void **state)
{
    (void)state;
    random_against_sorted_array(0x9E3779B97F4A7C15ull, 4000, 40);
}

static void test_random_distinct_high_halves(void **state)
{
    (void)state;
    random_against_sorted_array(0xD1B54A32D192ED03ull, 3000, UINT64_MAX);
    /* a run in which merging two inner nodes makes two thin leaves neighbours */
    random_against_sorted_array(0xDAA66D2C7DDF743Full, 3000, UINT64_MAX);
}

static void test_random_small_sets(void **state)
{
    (void)state; /* a root leaf that splits and merges back again and again */
    random_against_sorted_array(0x2545F4914F6CDD1Dull, 40, 5);
}

/* whether 'k' is the key of an entry of the reference other than 'self' */
static bool ref_has_other(const struct ref *r, struct gm_btree_key k, const struct item *self)
{
    size_t i = ref_lower_bound(r, k);
    return i < r->n && key_cmp(r->v[i]->key, k) == 0 && r->v[i] != self;
}

/* Random replaces (a present entry given a new key, by its own value or another's, found by
 * search or by home) held against the sorted array: the order kept when done in the entry's
 * place or by shifting its leaf, the tree unchanged when refused (then erase and insert, as
 * a caller does); a key already present is refused.  New keys near the old one often, so
 * that many stay in place, and from a small range, so that some collide. */
static void random_replace_against_sorted_array(uint64_t seed, size_t n_max, uint64_t hi_range)
{
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item *items = calloc(n_max, sizeof(*items));
    bool *in = calloc(n_max, sizeof(*in));
    struct ref r = {calloc(n_max, sizeof(struct item *)), 0};
    uint64_t s = seed;
    size_t in_place = 0, shifted = 0, refused = 0, collided = 0;
    assert_non_null(items);
    assert_non_null(in);
    assert_non_null(r.v);
    gm_btree_init(&t, &pool, HOME);
    for (size_t i = 0; i < n_max; i += 2) {
        items[i].key.hi = rng_next(&s) % hi_range;
        items[i].key.lo = rng_next(&s) % (4 * n_max);
        if (ref_has_other(&r, items[i].key, NULL))
            continue;
        assert_int_equal(gm_btree_insert(&t, items[i].key, &items[i]), GM_OK);
        ref_insert(&r, &items[i]);
        in[i] = true;
    }
    check_tree(&t, &r);
    for (int step = 0; step < 40000; step++) {
        size_t i = (size_t)(rng_next(&s) % n_max), j;
        uint64_t op = rng_next(&s);
        struct gm_btree_key k, was;
        struct gm_btree_pos p, q;
        bool done, present;
        if (!in[i])
            continue;
        /* the same value (a block that changes size) or an absent one (a neighbour that
         * takes its place) */
        j = op & 1 ? i : (size_t)(rng_next(&s) % n_max);
        if (j != i && in[j])
            continue;
        /* near the old key often (a block a little smaller or larger), anywhere sometimes */
        k = items[i].key;
        if (op & 2) {
            k.lo += rng_next(&s) % 64;
            k.lo = k.lo > 32 ? k.lo - 32 : 0;
        } else {
            k.hi = rng_next(&s) % hi_range;
            k.lo = rng_next(&s) % (4 * n_max);
        }
        present = ref_has_other(&r, k, &items[i]);
        p = op & 4 ? gm_btree_lower_bound(&t, items[i].key) : gm_btree_find(&t, &items[i]);
        assert_ptr_equal(gm_btree_at(p), &items[i]);
        /* a value the tree holds is where its home says, without the look for its tree */
        q = gm_btree_find_held(&t, &items[i]);
        assert_ptr_equal(q.leaf, p.leaf);
        assert_int_equal(q.i, p.i);
        done = gm_btree_replace_at(&t, p, k, &items[j]);
        if (present) {
            assert_false(done);
            collided++;
        }
        if (!done) {
            refused += !present;
            if (step % 64 == 0)
                check_tree(&t, &r); /* unchanged */
            if (present)
                continue;
            assert_true(gm_btree_erase(&t, &items[i]));
            was = items[i].key;
            items[j].key = k;
            assert_int_equal(gm_btree_insert(&t, k, &items[j]), GM_OK);
            items[i].key = was;
        } else {
            /* in the entry's own place, or its leaf's entries shifted */
            q = gm_btree_find(&t, &items[j]);
            assert_ptr_equal(q.leaf, p.leaf);
            if (q.i == p.i)
                in_place++;
            else
                shifted++;
        }
        ref_erase(&r, &items[i]);
        items[j].key = k;
        ref_insert(&r, &items[j]);
        if (j != i) {
            assert_null(items[i].leaf);
            in[i] = false;
            in[j] = true;
        }
        if (step % 64 == 0)
            check_tree(&t, &r);
    }
    check_tree(&t, &r);
    /* each outcome seen many times */
    assert_true(in_place > 1000);
    assert_true(shifted > 100);
    assert_true(refused > 100);
    assert_true(collided > 10);
    gm_btree_release(&t);
    gm_slab_release(&pool);
    free(r.v);
    free(in);
    free(items);
}

static void test_random_replace_many_equal_high_halves(void **state)
{
    (void)state;
    random_replace_against_sorted_array(0x9E3779B97F4A7C15ull, 4000, 40);
}

static void test_random_replace_small_sets(void **state)
{
    (void)state; /* one or two leaves: the first leaf and the last one's edges */
    random_replace_against_sorted_array(0x2545F4914F6CDD1Dull, 60, 3);
}

static void test_empty_and_one_entry(void **state)
{
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item it = {{7, 7}, NULL}, other = {{7, 7}, NULL};
    struct gm_btree_key zero = {0, 0}, max = {UINT64_MAX, UINT64_MAX};
    struct gm_btree_pos p;
    (void)state;
    gm_btree_init(&t, &pool, HOME);
    assert_null(gm_btree_at(gm_btree_first(&t)));
    assert_null(gm_btree_at(gm_btree_lower_bound(&t, zero)));
    p = gm_btree_lower_bound(&t, zero);
    assert_false(gm_btree_prev(&t, &p));
    assert_false(gm_btree_erase(&t, &it));

    assert_int_equal(gm_btree_insert(&t, it.key, &it), GM_OK);
    assert_ptr_equal(it.leaf, t.root);
    assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, zero)), &it);
    assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, it.key)), &it);
    assert_null(gm_btree_at(gm_btree_lower_bound(&t, max)));
    /* from the end, prev is the last entry */
    p = gm_btree_lower_bound(&t, max);
    assert_true(gm_btree_prev(&t, &p));
    assert_ptr_equal(gm_btree_at(p), &it);
    assert_false(gm_btree_prev(&t, &p));
    /* the same key again is refused, whatever the value */
    assert_int_equal(gm_btree_insert(&t, other.key, &other), GM_ERR_INVALID);
    assert_null(other.leaf);
    assert_int_equal(t.n, 1);

    assert_true(gm_btree_erase(&t, &it));
    assert_null(it.leaf);
    assert_null(t.root);
    assert_int_equal(t.n, 0);
    gm_btree_release(&t);
    gm_slab_release(&pool);
}

/* keys at the ends of the range, and keys equal in one half only */
static void test_extreme_and_half_equal_keys(void **state)
{
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item it[6] = {
        {{0, 0}, NULL},
        {{0, UINT64_MAX}, NULL},
        {{1, 0}, NULL},
        {{UINT64_MAX, 0}, NULL},
        {{UINT64_MAX, UINT64_MAX - 1}, NULL},
        {{UINT64_MAX, UINT64_MAX}, NULL},
    };
    struct gm_btree_key k;
    (void)state;
    gm_btree_init(&t, &pool, HOME);
    for (size_t i = 6; i-- > 0;)
        assert_int_equal(gm_btree_insert(&t, it[i].key, &it[i]), GM_OK);
    for (size_t i = 0; i < 6; i++)
        assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, it[i].key)), &it[i]);
    k.hi = 0;
    k.lo = 1;
    assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, k)), &it[1]);
    k.hi = 1;
    k.lo = 1;
    assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, k)), &it[3]);
    k.hi = UINT64_MAX;
    k.lo = UINT64_MAX - 2;
    assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, k)), &it[4]);
    gm_btree_release(&t);
    gm_slab_release(&pool);
}

/* Ascending and descending runs split only at one end; erasing from the front merges there;
 * the height grows and shrinks back to a single leaf. */
static void test_sorted_runs(void **state)
{
    enum { N = 5000 };
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item *it = calloc(N, sizeof(*it));
    struct ref r = {calloc(N, sizeof(struct item *)), 0};
    (void)state;
    assert_non_null(it);
    assert_non_null(r.v);
    gm_btree_init(&t, &pool, HOME);
    for (size_t i = 0; i < N; i++) {
        it[i].key.hi = i / 2;
        it[i].key.lo = i % 2;
    }
    for (size_t i = 0; i < N / 2; i++) { /* ascending */
        assert_int_equal(gm_btree_insert(&t, it[i].key, &it[i]), GM_OK);
        ref_insert(&r, &it[i]);
    }
    for (size_t i = N; i-- > N / 2;) { /* descending, above the first half */
        assert_int_equal(gm_btree_insert(&t, it[i].key, &it[i]), GM_OK);
        ref_insert(&r, &it[i]);
    }
    check_tree(&t, &r);
    assert_true(t.height >= 2);
    for (size_t i = 0; i < N - 3; i++) { /* from the front */
        gm_btree_erase_at(&t, gm_btree_first(&t));
        ref_erase(&r, &it[i]);
        if (i % 97 == 0)
            check_tree(&t, &r);
    }
    check_tree(&t, &r);
    assert_int_equal(t.height, 0);
    gm_btree_release(&t);
    gm_slab_release(&pool);
    free(r.v);
    free(it);
}

/* gm_btree_seek() answers from the leaf its last search of the key's class found when the
 * answer is in it or right beside it: the leaf's first entry (the leaf before ends below the
 * key) and the next leaf's first (the leaf ends below the key) are found without a search
 * from the root (seek_searches stays), and are the answers lower_bound gives.  An insert
 * below the first key of its class's last insert's leaf goes there without a search. */
static void test_fingers_beside_their_leaf(void **state)
{
    enum { N = 200 };
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item *it = calloc(2 * N + 1, sizeof(*it)); /* the last a spare */
    struct gm_btree_key k = {20, 0};
    struct gm_btree_pos p, q;
    size_t searches;
    (void)state;
    assert_non_null(it);
    gm_btree_init(&t, &pool, HOME);
    for (size_t i = 0; i < 2 * N; i++) { /* (10, 1..N) and (20, 1..N), many leaves */
        it[i].key.hi = i < N ? 10 : 20;
        it[i].key.lo = i % N + 1;
        assert_int_equal(gm_btree_insert(&t, it[i].key, &it[i]), GM_OK);
    }
    /* (20, 1) the first of its leaf, (10, *) entries in the leaf before */
    while ((p = gm_btree_lower_bound(&t, k)).i != 0)
        gm_btree_erase_at(&t, (struct gm_btree_pos){p.leaf, 0});
    assert_ptr_equal(gm_btree_at(p), &it[N]);
    assert_non_null(p.leaf->prev);
    q = gm_btree_seek(&t, k);
    assert_ptr_equal(gm_btree_at(q), &it[N]);
    searches = t.seek_searches;
    q = gm_btree_seek(&t, k); /* the leaf's first, the leaf before below the key */
    assert_ptr_equal(gm_btree_at(q), &it[N]);
    assert_int_equal(t.seek_searches, searches);

    /* the last entry of a leaf with a leaf after it, sought, then erased: the answer is the
     * next leaf's first */
    p = gm_btree_lower_bound(&t, (struct gm_btree_key){20, N / 2});
    assert_non_null(p.leaf->next);
    k = p.leaf->e[p.leaf->n - 1].key;
    q = gm_btree_seek(&t, k);
    assert_true(q.leaf == p.leaf && q.i == p.leaf->n - 1);
    gm_btree_erase_at(&t, q);
    searches = t.seek_searches;
    q = gm_btree_seek(&t, k);
    p = gm_btree_lower_bound(&t, k);
    assert_true(q.leaf == p.leaf && q.i == p.i);
    assert_int_equal(q.i, 0);
    assert_int_equal(t.seek_searches, searches);

    /* an insert below the first key of the leaf its class's last insert ended in, above the
     * bound of the leaf before: put there, no search from the root */
    k.hi = 20;
    k.lo = 0;
    p = gm_btree_lower_bound(&t, k);
    assert_ptr_equal(gm_btree_at(p), &it[N]); /* (20, 1), its leaf's first */
    q = p;
    gm_btree_next(&q);
    assert_ptr_equal(q.leaf, p.leaf);
    it[N + 1].key = gm_btree_key_at(q); /* (20, 2) again: the finger of class 20 is its leaf */
    gm_btree_erase_at(&t, q);
    assert_int_equal(gm_btree_insert(&t, it[N + 1].key, &it[N + 1]), GM_OK);
    searches = t.insert_searches;
    it[2 * N].key = k;
    assert_int_equal(gm_btree_insert(&t, k, &it[2 * N]), GM_OK);
    assert_int_equal(t.insert_searches, searches);
    assert_ptr_equal(it[2 * N].leaf, p.leaf);
    assert_ptr_equal(gm_btree_at(gm_btree_lower_bound(&t, k)), &it[2 * N]);
    gm_btree_release(&t);
    gm_slab_release(&pool);
    free(it);
}

/* A value of another tree (sharing the pool) is not erased from this one, nor found in it;
 * gm_btree_find_held(), which trusts the caller, finds it where it is. */
static void test_value_of_another_tree(void **state)
{
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree a, b;
    struct item x = {{1, 1}, NULL}, y = {{1, 1}, NULL};
    (void)state;
    gm_btree_init(&a, &pool, HOME);
    gm_btree_init(&b, &pool, HOME);
    assert_int_equal(gm_btree_insert(&a, x.key, &x), GM_OK);
    assert_int_equal(gm_btree_insert(&b, y.key, &y), GM_OK);
    assert_null(gm_btree_find(&a, &y).leaf);
    assert_ptr_equal(gm_btree_at(gm_btree_find_held(&a, &y)), &y);
    assert_ptr_equal(gm_btree_find_held(&a, &y).leaf, b.root);
    assert_false(gm_btree_erase(&a, &y));
    assert_false(gm_btree_erase(&b, &x));
    assert_true(gm_btree_erase(&a, &x));
    assert_true(gm_btree_erase(&b, &y));
    gm_btree_release(&a);
    gm_btree_release(&b);
    gm_slab_release(&pool);
}

/* Values that keep no home: erase by value finds nothing, erase at a position works. */
static void test_without_homes(void **state)
{
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    int v[100];
    (void)state;
    gm_btree_init(&t, &pool, GM_BTREE_NO_HOME);
    for (int i = 0; i < 100; i++) {
        struct gm_btree_key k = {(uint64_t)(i * 37 % 100), 0};
        assert_int_equal(gm_btree_insert(&t, k, &v[i]), GM_OK);
    }
    assert_false(gm_btree_erase(&t, &v[3]));
    assert_null(gm_btree_find_held(&t, &v[3]).leaf);
    for (int i = 0; i < 100; i++) {
        struct gm_btree_pos p = gm_btree_first(&t);
        assert_int_equal(gm_btree_key_at(p).hi, (uint64_t)i);
        gm_btree_erase_at(&t, p);
    }
    assert_null(t.root);
    gm_btree_release(&t);
    gm_slab_release(&pool);
}

/* Once room is reserved, the inserts it covers cannot fail even when every allocation
 * does; without room an insert fails with GM_ERR_NOMEM and changes nothing. */
static void test_reserved_inserts_cannot_fail(void **state)
{
    enum { N = 2000, BATCH = 3 };
    struct gm_slab pool = GM_BTREE_POOL_INIT;
    struct gm_btree t;
    struct item *it = calloc(N, sizeof(*it));
    struct ref r = {calloc(N, sizeof(struct item *)), 0};
    uint64_t s = 0x853C49E6748FEA9Bull;
    (void)state;
    assert_non_null(it);
    assert_non_null(r.v);
    gm_btree_init(&t, &pool, HOME);
    for (size_t i = 0; i < N; i += BATCH) {
        assert_int_equal(gm_btree_reserve(&t, BATCH), GM_OK);
        gm_alloc_fail_after(0);
        for (size_t j = i; j < i + BATCH && j < N; j++) {
            it[j].key.hi = rng_next(&s);
            it[j].key.lo = j;
            assert_int_equal(gm_btree_insert(&t, it[j].key, &it[j]), GM_OK);
            ref_insert(&r, &it[j]);
        }
        gm_alloc_fail_after(-1);
    }
    check_tree(&t, &r);
    /* no room and none to be had: refused, the tree as it was */
    {
        struct gm_slab none = GM_BTREE_POOL_INIT;
        struct gm_btree u;
        struct item extra = {{0, 0}, NULL};
        gm_btree_init(&u, &none, HOME);
        gm_alloc_fail_after(0);
        assert_int_equal(gm_btree_insert(&u, extra.key, &extra), GM_ERR_NOMEM);
        gm_alloc_fail_after(-1);
        assert_null(extra.leaf);
        assert_null(u.root);
        assert_int_equal(u.n, 0);
        gm_slab_release(&none);
    }
    check_tree(&t, &r);
    gm_btree_release(&t);
    gm_slab_release(&pool);
    free(r.v);
    free(it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_many_equal_high_halves),
        cmocka_unit_test(test_random_distinct_high_halves),
        cmocka_unit_test(test_random_small_sets),
        cmocka_unit_test(test_random_replace_many_equal_high_halves),
        cmocka_unit_test(test_random_replace_small_sets),
        cmocka_unit_test(test_empty_and_one_entry),
        cmocka_unit_test(test_extreme_and_half_equal_keys),
        cmocka_unit_test(test_sorted_runs),
        cmocka_unit_test(test_fingers_beside_their_leaf),
        cmocka_unit_test(test_value_of_another_tree),
        cmocka_unit_test(test_without_homes),
        cmocka_unit_test(test_reserved_inserts_cannot_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
