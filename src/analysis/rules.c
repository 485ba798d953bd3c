/* SPDX-License-Identifier: MIT */
/* rules.c - the user's category rules (analysis.h, "the user's category rules"): read from
 * JSON within the limits there, compiled with regcomp(), and tried on every allocation by
 * the analysis's category rule (classify_alloc() in analysis.c) before the built-in ones.
 *
 * What a rule says about a stack is found once per distinct text (a file or function name
 * shared by thousands of frames is searched once per rule) and once per stack; what it says
 * about annotations is found once per change of the open annotations, as a mask of rules
 * over time, so that an allocation costs a lookup, not a search. */
#include "analysis/analysis_int.h"

#include "base/file.h"
#include "base/json_load.h"
#include "snapshot/snapshot_int.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PAT_FILE, PAT_FUNCTION, PAT_ANNOTATION, PAT_COUNT };

static const char *const pat_keys[PAT_COUNT] = {"file", "function", "annotation"};

#define NAME_MAX_BYTES 64

struct rule {
    char name[NAME_MAX_BYTES + 1]; /* "" when the rule has none */
    enum gm_category category;
    bool has[PAT_COUNT];
    regex_t re[PAT_COUNT];
};

struct gm_category_rules {
    struct rule *v;
    size_t n;
    uint64_t frame_mask;      /* rules with a file or function expression */
    uint64_t annotation_mask; /* rules with an annotation expression */
};

void gm_category_rules_free(struct gm_category_rules *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        for (int p = 0; p < PAT_COUNT; p++)
            if (r->v[i].has[p])
                regfree(&r->v[i].re[p]);
    gm_free(r->v);
    gm_free(r);
}

size_t gm_category_rules_count(const struct gm_category_rules *r)
{
    return r ? r->n : 0;
}

enum gm_status ana_rules_keep(struct gm_analysis *an, struct gm_arena *arena,
                              const struct gm_category_rules *r, struct gm_error *err)
{
    char dflt[32];
    uint8_t *cats;
    if (!r || !r->n)
        return GM_OK;
    an->user_rule_names = gm_arena_calloc(arena, r->n, sizeof(*an->user_rule_names));
    an->user_rule_categories = cats = gm_arena_calloc(arena, r->n, 1);
    if (!an->user_rule_names || !cats)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for rules");
    for (size_t i = 0; i < r->n; i++) {
        const char *name = r->v[i].name;
        if (!*name) {
            snprintf(dflt, sizeof(dflt), "rule %zu", i + 1);
            name = dflt;
        }
        an->user_rule_names[i] = gm_arena_strndup(arena, name, strlen(name));
        if (!an->user_rule_names[i])
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for rules");
        cats[i] = (uint8_t)r->v[i].category;
    }
    an->n_user_rules = r->n;
    return GM_OK;
}

static bool category_named(const char *s, enum gm_category *out)
{
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        if (!strcmp(s, gm_category_name((enum gm_category)c))) {
            *out = (enum gm_category)c;
            return true;
        }
    return false;
}

/* What glibc cannot compile or match in bounded time and memory is refused: a
 * back-reference (\1..\9: exponential matching), more than one bounded repetition {m,n}
 * (nested ones multiply the automaton: "((a{0,64}){0,64})x" takes minutes) and more than
 * RULE_PLUS_MAX "+" (regcomp copies the operand of each, so stacked or nested ones double
 * the tree: 32 of them, "a++++..." or "((a)+)+...", take 8 GiB). */
#define RULE_PLUS_MAX 8

static const char *too_costly(const char *s)
{
    int braces = 0, pluses = 0;
    for (; *s; s++) {
        if (*s == '+' && ++pluses > RULE_PLUS_MAX)
            return "has more than 8 repetitions \"+\"";
        if (*s == '\\') {
            if (s[1] >= '1' && s[1] <= '9')
                return "uses a back-reference (\\1..\\9)";
            if (s[1])
                s++;
        } else if (*s == '{' && ++braces > 1) {
            return "has more than one bounded repetition {m,n}";
        }
    }
    return NULL;
}

static enum gm_status read_rule(struct gm_category_rules *r, size_t i, json_t *o,
                                struct gm_error *err)
{
    struct rule *ru = &r->v[i];
    const char *key;
    json_t *val;
    bool named = false;

    if (!json_is_object(o))
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "category rule %zu is not an object",
                       i + 1);
    json_object_foreach(o, key, val)
    {
        int p;
        if (!strcmp(key, "name")) {
            if (!json_is_string(val) || !json_string_length(val) ||
                json_string_length(val) > NAME_MAX_BYTES ||
                strlen(json_string_value(val)) != json_string_length(val))
                return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                               "category rule %zu: \"name\" must be a string of 1 to %d bytes",
                               i + 1, NAME_MAX_BYTES);
            memcpy(ru->name, json_string_value(val), json_string_length(val) + 1);
            continue;
        }
        if (!strcmp(key, "category")) {
            if (!json_is_string(val) || !category_named(json_string_value(val), &ru->category))
                return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                               "category rule %zu: \"category\" must be one of parameter, "
                               "input, activation, gradient, optimizer_state, optimizer_temp, "
                               "other",
                               i + 1);
            named = true;
            continue;
        }
        for (p = 0; p < PAT_COUNT && strcmp(key, pat_keys[p]); p++)
            ;
        if (p == PAT_COUNT)
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "category rule %zu: unknown key \"%.64s\" (name, category, file, "
                           "function, annotation)",
                           i + 1, key);
        if (!json_is_string(val))
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "category rule %zu: \"%s\" must be a string", i + 1, key);
        const char *pat = json_string_value(val);
        size_t len = json_string_length(val);
        if (len > GM_CATEGORY_RULE_PATTERN_MAX)
            return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                           "category rule %zu: \"%s\" is longer than %d bytes", i + 1, key,
                           GM_CATEGORY_RULE_PATTERN_MAX);
        if (strlen(pat) != len || !len)
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "category rule %zu: \"%s\" is empty or holds a NUL", i + 1, key);
        const char *costly = too_costly(pat);
        if (costly)
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "category rule %zu: \"%s\" %s, which is not supported", i + 1, key,
                           costly);
        int rc = regcomp(&ru->re[p], pat, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char why[128];
            regerror(rc, &ru->re[p], why, sizeof(why));
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "category rule %zu: \"%s\" is not a valid expression: %s", i + 1, key,
                           why);
        }
        ru->has[p] = true;
        if (p == PAT_ANNOTATION)
            r->annotation_mask |= 1ull << i;
        else
            r->frame_mask |= 1ull << i;
    }
    if (!named)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "category rule %zu has no \"category\"",
                       i + 1);
    if (!ru->has[PAT_FILE] && !ru->has[PAT_FUNCTION] && !ru->has[PAT_ANNOTATION])
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "category rule %zu has no \"file\", \"function\" or \"annotation\"", i + 1);
    return GM_OK;
}

enum gm_status gm_category_rules_parse(const char *text, size_t len, struct gm_category_rules **out,
                                       struct gm_error *err)
{
    struct gm_category_rules *r;
    json_t *root, *list;
    enum gm_status st;

    *out = NULL;
    if (len > GM_CATEGORY_RULES_MAX_BYTES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "category rules: larger than %d bytes",
                       GM_CATEGORY_RULES_MAX_BYTES);
    /* The form is the content's: JSON starts with '[' or '{' after its whitespace, else
     * YAML, read into the same tree so that one reader checks both. */
    size_t lead = 0;
    while (lead < len && strchr(" \t\r\n", text[lead]) && text[lead])
        lead++;
    if (lead < len && (text[lead] == '[' || text[lead] == '{'))
        st = gm_json_load(text, len, 0, &root, err);
    else
        st = ana_rules_yaml(text, len, &root, err);
    if (st != GM_OK)
        return gm_error_prefix(err, "category rules");
    list = json_is_array(root) ? root : json_object_get(root, "rules");
    if (!json_is_array(list) || (json_is_object(root) && json_object_size(root) != 1)) {
        json_decref(root);
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "category rules: expected {\"rules\": [...]} or a list of rules");
    }
    if (json_array_size(list) > GM_CATEGORY_RULES_MAX) {
        size_t n = json_array_size(list);
        json_decref(root);
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "category rules: %zu rules, more than %d",
                       n, GM_CATEGORY_RULES_MAX);
    }
    r = gm_calloc(1, sizeof(*r));
    if (r)
        r->v = gm_calloc(json_array_size(list) ? json_array_size(list) : 1, sizeof(*r->v));
    if (!r || !r->v) {
        gm_free(r);
        json_decref(root);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "category rules: out of memory");
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        r->n = i + 1; /* regfree() what was compiled on failure */
        if ((st = read_rule(r, i, json_array_get(list, i), err)) != GM_OK) {
            json_decref(root);
            gm_category_rules_free(r);
            return st;
        }
    }
    json_decref(root);
    *out = r;
    return GM_OK;
}

enum gm_status gm_category_rules_load(const char *path, struct gm_category_rules **out,
                                      struct gm_error *err)
{
    int fd;
    uint64_t size;
    char *text;
    enum gm_status st;

    *out = NULL;
    if ((st = gm_file_open(path, &fd, &size, err)) != GM_OK)
        return st;
    if (size > GM_CATEGORY_RULES_MAX_BYTES) {
        close(fd);
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "%s: larger than %d bytes", path,
                       GM_CATEGORY_RULES_MAX_BYTES);
    }
    text = gm_malloc(size ? size : 1);
    if (!text) {
        close(fd);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "%s: out of memory", path);
    }
    st = gm_file_read_at(fd, path, 0, text, (size_t)size, err);
    close(fd);
    if (st == GM_OK && (st = gm_category_rules_parse(text, (size_t)size, out, err)) != GM_OK)
        gm_error_prefix(err, "%s", path);
    gm_free(text);
    return st;
}

/* ---------------------------------------------------------------- matching */

/* The rules whose expression 'p' finds in 's'. */
static uint64_t text_mask(const struct gm_category_rules *r, int p, const char *s)
{
    uint64_t m = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].has[p] && regexec(&r->v[i].re[p], s ? s : "", 0, NULL, 0) == 0)
            m |= 1ull << i;
    return m;
}

/* The rules for which text 'id' (file names: p PAT_FILE; function names: PAT_FUNCTION)
 * matches, each text searched once; a rule without that expression counts as matching. */
static uint64_t cached_mask(struct ana_rules *u, int p, uint32_t id, const char *s)
{
    uint64_t none = 0;
    for (size_t i = 0; i < u->rules->n; i++)
        if (!u->rules->v[i].has[p])
            none |= 1ull << i;
    if (id >= u->n_texts)
        return text_mask(u->rules, p, s) | none;
    uint64_t *c = p == PAT_FILE ? u->file_mask : u->name_mask;
    uint8_t bit = p == PAT_FILE ? 1 : 2;
    if (!(u->text_done[id] & bit)) {
        c[id] = text_mask(u->rules, p, s);
        u->text_done[id] |= bit;
    }
    return c[id] | none;
}

/* The frame rules that some frame of 'stack' matches. */
static uint64_t stack_mask(struct ana_rules *u, uint32_t stack)
{
    const struct gm_snapshot *snap = u->snap;
    if (stack >= snap->n_stacks)
        return 0;
    if (u->stack_done[stack >> 3] & (1u << (stack & 7)))
        return u->stack_mask[stack];
    const struct gm_snapshot_stack *st = &snap->stacks[stack];
    uint64_t m = 0;
    for (uint32_t i = 0; i < st->n_frames && m != u->rules->frame_mask; i++) {
        uint32_t id = st->frames[i];
        if (id >= snap->n_frames)
            continue;
        const struct gm_snapshot_frame *f = &snap->frames[id];
        m |= cached_mask(u, PAT_FILE, f->filename_id, f->filename) &
             cached_mask(u, PAT_FUNCTION, f->name_id, f->name) & u->rules->frame_mask;
    }
    u->stack_mask[stack] = m;
    u->stack_done[stack >> 3] |= (uint8_t)(1u << (stack & 7));
    return m;
}

enum gm_status ana_rules_init(struct ana_rules *u, const struct gm_category_rules *rules,
                              const struct gm_snapshot *snap, struct gm_error *err)
{
    memset(u, 0, sizeof(*u));
    if (!rules || !rules->n)
        return GM_OK;
    u->rules = rules;
    u->snap = snap;
    u->n_texts = snap->n_strings;
    u->file_mask = gm_calloc(u->n_texts ? u->n_texts : 1, sizeof(uint64_t));
    u->name_mask = gm_calloc(u->n_texts ? u->n_texts : 1, sizeof(uint64_t));
    u->text_done = gm_calloc(u->n_texts ? u->n_texts : 1, 1);
    u->stack_mask = gm_calloc(snap->n_stacks ? snap->n_stacks : 1, sizeof(uint64_t));
    u->stack_done = gm_calloc(snap->n_stacks / 8 + 1, 1);
    if (!u->file_mask || !u->name_mask || !u->text_done || !u->stack_mask || !u->stack_done) {
        ana_rules_release(u);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for rules");
    }
    return GM_OK;
}

void ana_rules_release(struct ana_rules *u)
{
    gm_free(u->file_mask);
    gm_free(u->name_mask);
    gm_free(u->text_done);
    gm_free(u->stack_mask);
    gm_free(u->stack_done);
    gm_free(u->steps);
    memset(u, 0, sizeof(*u));
}

static int cmp_step(const void *a, const void *b)
{
    const struct ana_rules_step *x = a, *y = b;
    return x->time_us < y->time_us ? -1 : x->time_us > y->time_us;
}

enum gm_status ana_rules_device(struct ana_rules *u, const struct gm_snapshot_device *sd,
                                const struct ana_times *tm, struct gm_error *err)
{
    struct gm_snapshot_user_range *r = NULL;
    size_t n = 0, k = 0;
    uint32_t open[GM_CATEGORY_RULES_MAX] = {0};
    enum gm_status st;

    gm_free(u->steps);
    u->steps = NULL;
    u->n_steps = 0;
    u->sd = sd;
    u->have_event = false;
    u->use_times = tm != NULL;
    ana_time_cursor_init(&u->times, tm);
    gm_snapshot_cursor_init(&u->cursor, sd, 0);
    if (!u->rules || !u->rules->annotation_mask)
        return GM_OK;
    if ((st = gm_snapshot_annotation_ranges(u->snap, sd->index, NULL, &r, &n, err)) != GM_OK || !n)
        return st;
    /* each range opens at its start and closes after its end (times are whole us) */
    struct ana_rules_step *s = gm_malloc(2 * n * sizeof(*s));
    if (!s) {
        gm_free(r);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for rules");
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t m = text_mask(u->rules, PAT_ANNOTATION, r[i].name);
        if (!m)
            continue;
        s[k++] = (struct ana_rules_step){r[i].start_us, m, 1};
        if (r[i].end_us != INT64_MAX)
            s[k++] = (struct ana_rules_step){r[i].end_us + 1, m, -1};
    }
    gm_free(r);
    if (k && !tm && !snap_events_stored(sd)) {
        /* annotation_mask() reads the times of allocations' events */
        gm_free(s);
        return ana_events_missing(sd, err);
    }
    qsort(s, k, sizeof(*s), cmp_step);
    /* after each step, the rules that some open range matches */
    for (size_t i = 0; i < k; i++) {
        uint64_t m = 0;
        for (size_t b = 0; b < u->rules->n; b++) {
            if (s[i].mask & (1ull << b))
                open[b] = (uint32_t)((int64_t)open[b] + s[i].delta);
            if (open[b])
                m |= 1ull << b;
        }
        s[i].mask = m;
    }
    u->steps = s;
    u->n_steps = k;
    return GM_OK;
}

/* The annotation rules that match at event k (-1: before the trace, none). */
static uint64_t annotation_mask(struct ana_rules *u, int64_t k)
{
    const struct gm_snapshot_event *e = NULL;
    int64_t t;
    if (k < 0 || !u->n_steps)
        return 0;
    if (u->use_times) {
        /* every event has a time where the scan kept them */
        t = ana_time_cursor_at(&u->times, k);
        goto found;
    }
    if (u->have_event && (int64_t)u->cursor.index > k) {
        gm_snapshot_cursor_init(&u->cursor, u->sd, 0); /* allocations out of event order */
        u->have_event = false;
    }
    if (u->have_event && (int64_t)u->cursor.index == k) {
        e = &u->event;
    } else {
        while ((e = gm_snapshot_cursor_next(&u->cursor)) != NULL && (int64_t)u->cursor.index < k)
            ;
        if (!e)
            return 0;
        u->event = *e;
        u->have_event = true;
    }
    if (!(e->flags & GM_EVENT_HAS_TIME))
        return 0;
    t = e->time_us;
found:;
    /* the last step at or before the event's time */
    size_t lo = 0, hi = u->n_steps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->steps[mid].time_us <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? u->steps[lo - 1].mask : 0;
}

int ana_rules_match(struct ana_rules *u, uint32_t stack, int64_t alloc_event, enum gm_category *cat)
{
    const struct gm_category_rules *r = u->rules;
    if (!r)
        return -1;
    uint64_t all = ((r->n == 64) ? ~0ull : ((1ull << r->n) - 1));
    uint64_t frames = r->frame_mask ? stack_mask(u, stack) : 0;
    uint64_t annots = r->annotation_mask ? annotation_mask(u, alloc_event) : 0;
    /* a rule matches when each of its kinds of expression does */
    uint64_t m = all & (frames | ~r->frame_mask) & (annots | ~r->annotation_mask);
    if (!m)
        return -1;
    int i = __builtin_ctzll(m);
    *cat = r->v[i].category;
    return i;
}
