/* SPDX-License-Identifier: MIT */
/* pickle.h - a pickle reader that builds a generic object graph and never executes
 * anything (library-internal).  It knows nothing about torch.
 *
 * Consumers read values through the accessors below only (pk_get_*, pk_is_*, pk_node(),
 * pk_list_items(), ...); the tag layout is this module's business.  Values are 64-bit
 * tagged words (struct pk_val would only add noise, so they are plain uint64_t "pk_val"s):
 *
 *   low 3 bits 0  pointer to a struct pk_node (list, dict, tuple, set), 8-byte aligned
 *              1  a signed integer of 61 bits, value << 3
 *              2  a string or bytes object: the byte offset of its opcode in the input,
 *                 << 3 (the length and bytes are read back from the input on demand, so
 *                 strings are never copied)
 *              3  a constant: None, False, True, or the "missing memo slot" hole
 *              4  pointer to a struct pk_box (wide integer or float), | 4
 *
 * Memo entries are the same words, so a memo reference shares the object: the graph is a
 * DAG (or, in a hostile file, may even contain cycles: consumers must not recurse on it).
 * Containers live in the document's arena; the input must outlive the document. */
#ifndef GM_PICKLE_PICKLE_H
#define GM_PICKLE_PICKLE_H

#include "gpumem/arena.h"
#include "gpumem/error.h"

#include "base/le.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t pk_val;

#define PK_TAG_NODE  0u
#define PK_TAG_INT   1u
#define PK_TAG_STR   2u
#define PK_TAG_CONST 3u
#define PK_TAG_BOX   4u

#define PK_NONE  ((pk_val)((0u << 3) | PK_TAG_CONST))
#define PK_FALSE ((pk_val)((1u << 3) | PK_TAG_CONST))
#define PK_TRUE  ((pk_val)((2u << 3) | PK_TAG_CONST))
#define PK_HOLE  ((pk_val)((3u << 3) | PK_TAG_CONST))
/* A memo slot whose record was handed to the consumer and recycled (see pk_stream). */
#define PK_DEAD ((pk_val)((4u << 3) | PK_TAG_CONST))
/* The name the consumer gave a recycled list (pk_record_name()): constants from 16 up. */
#define PK_TOKEN(id) ((pk_val)(((uint64_t)(id) + 16u) << 3) | PK_TAG_CONST)
static inline bool pk_is_token(pk_val v)
{
    return (v & 7u) == 3u && (v >> 3) >= 16u;
}
static inline uint32_t pk_token_id(pk_val v)
{
    return (uint32_t)((v >> 3) - 16u);
}
static inline pk_val pk_token(uint32_t id)
{
    return PK_TOKEN(id);
}

enum pk_kind { PK_LIST = 1, PK_DICT, PK_TUPLE, PK_SET, PK_FROZENSET };

enum pk_node_flags {
    PK_NODE_SHARED = 1 << 0,   /* pushed again from the memo or by DUP */
    PK_NODE_STREAMED = 1 << 1, /* a list whose items were streamed as records */
    PK_NODE_SCRATCH = 1 << 2,  /* a transient node of the flat reader: valid only during the
                                  call, never to be remembered (pk_is_transient()) */
};

struct pk_node {
    uint8_t kind;        /* enum pk_kind */
    uint8_t flags;       /* enum pk_node_flags */
    uint8_t n_puts;      /* memo slots holding it (saturating at 255) */
    uint8_t refs;        /* container slots holding it (saturating at 255: then sticky) */
    uint32_t len;        /* items (a dict: key/value pairs); a streamed list: 0 */
    uint32_t cap;        /* slots allocated in items (a dict: pairs) */
    uint32_t memo_idx;   /* the last memo slot holding it */
    pk_val *items;       /* a dict stores key0, value0, key1, value1, ... */
    uint32_t list_index; /* a streamed list: its index in the list under pk_stream.key */
    uint32_t mark;       /* the consumer's (pk_mark()), 0 on a node just made */
};

enum pk_box_kind { PK_BOX_I64 = 1, PK_BOX_U64, PK_BOX_BIGINT, PK_BOX_FLOAT };

struct pk_box {
    uint8_t kind; /* enum pk_box_kind; BIGINT: does not fit 64 bits (value not kept) */
    union {
        int64_t i;
        uint64_t u;
        double d;
    } v;
};

/* ---- streaming records ----
 *
 * Snapshot writers emit {key: [[record, record, ...], ...]}: inside the list under one key,
 * lists of millions of flat dicts.  A consumer that names the key gets every item of those
 * inner lists as a record while it is parsed; the item is then forgotten (its memo slot
 * reads as consumed), so such a list never exists as a graph and stays empty
 * (pk_list_streamed()).  Which reader delivers the records is this module's choice: the
 * flat reader decodes a whole MARK ... APPENDS batch of plain dicts straight from the
 * bytes, without building nodes, and gives it back to the general reader when anything
 * does not fit its narrow grammar; the general reader builds each item and hands it over.
 *
 * Records come in batches, each ended by batch_end(): commit false means the batch's
 * records must be dropped (the flat reader gave up half-way), and they are then delivered
 * again by the general reader.  An error from record() fails the parse (the general
 * reader), or hands the batch to the general reader (the flat one), which then reports it.
 *
 * Values inside a record may not outlive the call when pk_is_transient(); and a list the
 * consumer names (pk_record_name()) may be recycled after the batch: remember neither by
 * its handle.  A named list read again later through the memo reads as pk_token(name). */
struct pk_record {
    const struct pk_doc *doc;
    pk_val item;         /* the item itself (for a message when it is no dict) */
    bool is_dict;        /* else the record has no pairs */
    const pk_val *pairs; /* a dict's key0, value0, key1, value1, ... (n pairs) */
    uint32_t n;
    bool same_keys;  /* its keys are the values of the record before in this batch, in
                      * the same order */
    uint64_t offset; /* of the batch's APPEND/APPENDS, for messages (GM_NO_OFFSET from
                      * the flat reader, whose errors the general reader repeats) */
    void *vm_;       /* private */
};

struct pk_stream {
    const char *key;    /* "device_traces" */
    uint32_t max_lists; /* inner lists at index >= this are built as plain lists */
    enum gm_status (*record)(void *ctx, uint32_t list_index, const struct pk_record *r,
                             struct gm_error *err);
    void (*batch_end)(void *ctx, uint32_t list_index, bool commit);
    void *ctx;
    /* The name the consumer gives a list (pk_record_name()) depends only on the list's
     * items and the record key it is the value of.  The reader may then hand a record's
     * list value as pk_token(name) instead of the list, when its items are the same memo
     * references, to slots unchanged since, as those of a list named before under the same
     * key (the writers make a new frames list per entry, with the frames of an earlier
     * one). */
    bool names_by_items;
};

/* A record for 'item' outside any stream (an item of a list the parser built): the same
 * view of a dict, nothing can be named. */
void pk_record_of(const struct pk_doc *doc, pk_val item, struct pk_record *r);

/* Whether list value 'list' of record 'r' can be named: the reader may recycle it after the
 * batch (nothing else holds it), so that later memo references read as the name. */
bool pk_record_can_name(const struct pk_record *r, pk_val list);
/* Name 'list' (see pk_record_can_name()) 'id' (< 2^30); false when it cannot be named. */
bool pk_record_name(const struct pk_record *r, pk_val list, uint32_t id);

struct pk_opts {
    size_t memory_limit; /* bytes for nodes, memo and stack together; 0: no cap */
    bool limit_given;    /* memory_limit is the user's, not a default (for the message) */
    size_t *shared;      /* NULL, or the bytes the consumer holds under the same memory_limit: the
                            parse adds its own while it holds them, and the cap bounds the sum */
    uint32_t max_depth;  /* open MARKs at one time; 0: 1000 */
    uint32_t max_stack;  /* values on the stack; 0: 1 << 22 */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *progress_ctx;
    const struct pk_stream *stream; /* records to stream (see above); NULL: none */
    bool general_only;              /* never the flat reader (tests compare the two) */
    /* The input is a private file mapping: give back pages well behind the cursor
     * (madvise MADV_DONTNEED), so resident memory stays below the file size. */
    bool drop_behind;
};

struct pk_doc {
    const uint8_t *data; /* the input (borrowed) */
    size_t len;
    struct gm_arena arena;
    pk_val root;
    int protocol;            /* from PROTO, 0 when absent */
    uint64_t n_memo;         /* memo slots used */
    uint64_t n_flat_batches; /* record batches the flat reader delivered (and committed) */
    void *vm_;               /* private: the machine while pk_parse() runs */
};

/* Parse 'len' bytes at 'data' (which must stay valid while 'doc' is used).  On success
 * doc->root is the unpickled value and doc owns the graph (pk_doc_release()).  Errors carry
 * the byte offset: GM_ERR_FORMAT (malformed, truncated), GM_ERR_UNSUPPORTED (an opcode that
 * would import or call something: GLOBAL, REDUCE, ...; or out-of-band buffers),
 * GM_ERR_LIMIT (memory, depth or stack cap), GM_ERR_NOMEM.  On failure doc holds nothing. */
enum gm_status pk_parse(struct pk_doc *doc, const void *data, size_t len, const struct pk_opts *o,
                        struct gm_error *err);

/* Release the graph; the doc may then be reused. */
void pk_doc_release(struct pk_doc *doc);

/* Release everything of a parse that never returned (the input faulted under it: see
 * base/guard.h), and the graph; the doc may then be reused. */
void pk_doc_abandon(struct pk_doc *doc);

/* The name of an opcode byte ("GLOBAL"), or NULL when it is no pickle opcode. */
const char *pk_opcode_name(uint8_t op);

static inline unsigned pk_tag(pk_val v)
{
    return (unsigned)(v & 7u);
}

/* The container behind 'v', or NULL. */
static inline const struct pk_node *pk_node(pk_val v)
{
    return pk_tag(v) == PK_TAG_NODE && v ? (const struct pk_node *)(uintptr_t)v : NULL;
}

static inline const struct pk_node *pk_node_of_kind(pk_val v, enum pk_kind k)
{
    const struct pk_node *n = pk_node(v);
    return n && n->kind == (uint8_t)k ? n : NULL;
}

/* Integers: Python ints (and bools, as Python does) that fit the target type. */
bool pk_get_i64(pk_val v, int64_t *out);
bool pk_get_u64(pk_val v, uint64_t *out);
/* Floats and ints as a double. */
bool pk_get_double(pk_val v, double *out);
static inline bool pk_is_bool(pk_val v)
{
    return v == PK_TRUE || v == PK_FALSE;
}

/* A str (or bytes) value: its bytes (not NUL-terminated) and length, borrowed from the
 * input.  'is_bytes' (may be NULL) tells bytes from str. */
bool pk_get_str(const struct pk_doc *doc, pk_val v, const char **p, size_t *n, bool *is_bytes);

/* pk_get_str() for the commonest case, inline: a str written with SHORT_BINUNICODE (the
 * parser checked its bounds when it read it).  false for any other value. */
static inline bool pk_short_str(const struct pk_doc *doc, pk_val v, const char **p, size_t *n)
{
    uint64_t off = v >> 3;
    if ((v & 7u) != PK_TAG_STR || off + 1 >= doc->len || doc->data[off] != 0x8c)
        return false;
    *n = doc->data[off + 1];
    *p = (const char *)doc->data + off + 2;
    return true;
}

/* The word of a short string of n bytes (n <= 6) whose opcode is at 'off' (8 bytes readable). */
static inline uint64_t pk_str_word_at(const struct pk_doc *doc, uint64_t off, size_t n)
{
    uint64_t w = gm_load64(doc->data + off);
    /* opcode, length and up to 6 bytes: a 6-byte string fills the word */
    return n == 6 ? w : w & (((uint64_t)1 << (8 * (n + 2))) - 1);
}
/* A str of at most 6 bytes written with SHORT_BINUNICODE (pk_short_str()) as one word of
 * its opcode, length and bytes (equal words: equal strings); 0 for any other value, and when
 * the word would reach past the input.  For a short string met on every record as a new
 * literal ("N/A"), known again without a look at its bytes. */
static inline uint64_t pk_short_str_word(const struct pk_doc *doc, pk_val v)
{
    const char *p;
    size_t n;
    uint64_t off = v >> 3;
    if (!pk_short_str(doc, v, &p, &n) || n > 6 || off + 8 > doc->len)
        return 0;
    return pk_str_word_at(doc, off, n);
}

/* Whether pk_short_str_word(doc, v) is 'word', a word it gave before (not 0): the word at the
 * value's offset compared, its opcode and length bytes included. */
static inline bool pk_short_str_is_word(const struct pk_doc *doc, pk_val v, uint64_t word)
{
    uint64_t off = v >> 3;
    if ((v & 7u) != PK_TAG_STR || off + 8 > doc->len)
        return false;
    return pk_str_word_at(doc, off, (size_t)(word >> 8) & 0xff) == word;
}

/* A stable identity of a string value (equal for two references to one memoized string),
 * 0 if 'v' is not a string: a cache key for consumers. */
static inline uint64_t pk_str_id(pk_val v)
{
    return pk_tag(v) == PK_TAG_STR ? v : 0;
}

/* Whether string value 'v' equals the NUL-terminated 's'. */
bool pk_str_eq(const struct pk_doc *doc, pk_val v, const char *s);

/* The value of key 's' in dict 'd' (the last one when a key repeats), or PK_HOLE. */
pk_val pk_dict_get(const struct pk_doc *doc, const struct pk_node *d, const char *s);

/* "list", "dict", "str", "int", ...; static storage. */
const char *pk_type_name(pk_val v);

/* ---- accessors for the hot paths (inline) ---- */

static inline bool pk_is_str(pk_val v)
{
    return pk_tag(v) == PK_TAG_STR;
}

/* A non-negative int of at most 60 bits (the common case of a size or an address). */
static inline bool pk_small_u64(pk_val v, uint64_t *out)
{
    if (pk_tag(v) != PK_TAG_INT || (int64_t)v < 0)
        return false;
    *out = v >> 3;
    return true;
}

/* An int of 61 bits (signed). */
static inline bool pk_small_i64(pk_val v, int64_t *out)
{
    if (pk_tag(v) != PK_TAG_INT)
        return false;
    *out = (int64_t)v >> 3;
    return true;
}

/* A str's bytes: pk_get_str(), with the common SHORT_BINUNICODE inline. */
static inline bool pk_str_view(const struct pk_doc *doc, pk_val v, const char **p, size_t *n)
{
    return pk_short_str(doc, v, p, n) || pk_get_str(doc, v, p, n, NULL);
}

/* The items of a list or tuple. */
static inline bool pk_list_items(pk_val v, const pk_val **items, uint32_t *n)
{
    const struct pk_node *l = pk_node(v);
    if (!l || (l->kind != PK_LIST && l->kind != PK_TUPLE))
        return false;
    *items = l->items;
    *n = l->len;
    return true;
}

/* The mark the consumer left on node 'v' (pk_set_mark()), 0 when none or when 'v' is no
 * node or a transient one.  A mark stays while the node lives: a node recycled for another
 * object (pk_record_name()) starts unmarked, so a mark identifies the object itself, and
 * a consumer can remember what it made of an object shared through the memo in O(1) per
 * reference, whatever the object's size. */
static inline uint32_t pk_mark(pk_val v)
{
    const struct pk_node *n = pk_node(v);
    return n && !(n->flags & PK_NODE_SCRATCH) ? n->mark : 0;
}

/* Leave 'mark' on node 'v' (nothing for a non-node or a transient node). */
void pk_set_mark(pk_val v, uint32_t mark);

/* Valid only during the call that handed it over (see pk_stream). */
static inline bool pk_is_transient(pk_val v)
{
    const struct pk_node *n = pk_node(v);
    return n && (n->flags & PK_NODE_SCRATCH);
}

/* A container that was pushed again from the memo (or by DUP): shared. */
static inline bool pk_is_shared(pk_val v)
{
    const struct pk_node *n = pk_node(v);
    return n && (n->flags & PK_NODE_SHARED);
}

/* A list whose items were streamed as records: true with its index in the list under the
 * key (pk_stream.key). */
static inline bool pk_list_streamed(pk_val v, uint32_t *list_index)
{
    const struct pk_node *n = pk_node_of_kind(v, PK_LIST);
    if (!n || !(n->flags & PK_NODE_STREAMED))
        return false;
    *list_index = n->list_index;
    return true;
}

#endif
