/* SPDX-License-Identifier: MIT */
/* pickle.h - a pickle reader that builds a generic object graph and never executes
 * anything (library-internal).  It knows nothing about torch.
 *
 * Values are 64-bit tagged words (struct pk_val would only add noise, so they are plain
 * uint64_t "pk_val"s):
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* A memo slot whose object was handed to an append hook and recycled (see pk_opts). */
#define PK_DEAD ((pk_val)((4u << 3) | PK_TAG_CONST))
/* A token the consumer gave for a recycled list (pk_opts.list_token): constants from 16 up. */
#define PK_TOKEN(id) ((pk_val)(((uint64_t)(id) + 16u) << 3) | PK_TAG_CONST)
static inline bool pk_is_token(pk_val v)
{
    return (v & 7u) == 3u && (v >> 3) >= 16u;
}
static inline uint32_t pk_token_id(pk_val v)
{
    return (uint32_t)((v >> 3) - 16u);
}

enum pk_kind { PK_LIST = 1, PK_DICT, PK_TUPLE, PK_SET, PK_FROZENSET };

enum pk_node_flags {
    PK_NODE_SHARED = 1 << 0,    /* pushed again from the memo or by DUP */
    PK_NODE_STREAMED = 1 << 1,  /* a list whose items an append hook consumed */
    PK_NODE_SCRATCH = 1 << 2,   /* a transient node of the flat fast path (see pk_opts.on_flat):
                                   valid only during the call, never to be remembered */
    PK_NODE_SAME_KEYS = 1 << 3, /* a transient dict of on_flat whose keys are those of the
                                   previous on_flat dict of the same batch, in the same order */
};

struct pk_node {
    uint8_t kind;      /* enum pk_kind */
    uint8_t flags;     /* enum pk_node_flags */
    uint8_t n_puts;    /* memo slots holding it (saturating at 255) */
    uint8_t refs;      /* container slots holding it (saturating at 255: then sticky) */
    uint32_t len;      /* items (a dict: key/value pairs); a streamed list: 0 */
    uint32_t cap;      /* slots allocated in items (a dict: pairs) */
    uint32_t memo_idx; /* the last memo slot holding it */
    pk_val *items;     /* a dict stores key0, value0, key1, value1, ... */
};

/* What an append hook sees: the list being appended to sits at stack[list_pos]; 'marks'
 * are the open MARK positions (the APPENDS mark already removed). */
struct pk_append {
    const struct pk_doc *doc;
    const pk_val *stack;
    size_t list_pos;
    const size_t *marks;
    size_t n_marks;
    const pk_val *items;
    size_t n_items;
    uint64_t offset; /* of the APPEND/APPENDS opcode */
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

struct pk_opts {
    size_t max_memory;  /* bytes for nodes, memo and stack together; 0: no cap */
    uint32_t max_depth; /* open MARKs at one time; 0: 1000 */
    uint32_t max_stack; /* values on the stack; 0: 1 << 22 */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *progress_ctx;
    /* Called before items are appended to a list.  Setting *consumed keeps them out of the
     * list (the list gets PK_NODE_STREAMED); items that are containers referenced from
     * nowhere else are then recycled, and their memo slot reads as PK_DEAD.  This lets a
     * consumer turn a huge list of dicts into compact records while parsing, in constant
     * extra memory.  A non-OK status aborts the parse with 'err' as filled by the hook. */
    enum gm_status (*on_append)(void *ctx, const struct pk_append *a, bool *consumed,
                                struct gm_error *err);
    void *append_ctx;
    /* For a list inside consumed dicts that nothing else references any more (no other
     * container, not on the stack, at most one memo slot): return a token (< 2^32 - 1)
     * that stands for it, or UINT32_MAX to keep the list.  With a token the list is
     * recycled and its memo slot reads PK_TOKEN(token) from then on, so a later memo
     * reference gets the token instead of the list (a trace entry's frames, referenced
     * again by later entries, become the consumer's stack id). */
    uint32_t (*list_token)(void *ctx, const struct pk_node *list);
    /* Fast path for the items of a streamed list (one whose items on_append consumed):
     * when a whole MARK ... APPENDS batch of it consists of flat dicts (scalar or string
     * values, at most one list of memo references), the parser decodes them without
     * building nodes and calls on_flat once per dict with a transient dict (its list value,
     * if any, a transient list flagged PK_NODE_SCRATCH).  The consumer records the item
     * provisionally and sets *list_tok to the token for the transient list (as list_token
     * would), or leaves it UINT32_MAX.  on_flat_end(commit) ends the batch: commit is true
     * when the batch was fully read this way; false means the provisional items must be
     * dropped, and the batch is then read again by the ordinary path.  A non-OK status from
     * on_flat only makes the parser fall back to the ordinary path. */
    enum gm_status (*on_flat)(void *ctx, const struct pk_node *list, pk_val item,
                              uint32_t *list_tok, struct gm_error *err);
    void (*on_flat_end)(void *ctx, const struct pk_node *list, bool commit);
    /* The input is a private file mapping: give back pages well behind the cursor
     * (madvise MADV_DONTNEED), so resident memory stays below the file size. */
    bool drop_behind;
};

struct pk_doc {
    const uint8_t *data; /* the input (borrowed) */
    size_t len;
    struct gm_arena arena;
    pk_val root;
    int protocol;    /* from PROTO, 0 when absent */
    uint64_t n_memo; /* memo slots used */
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

#endif
