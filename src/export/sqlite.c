/* SPDX-License-Identifier: MIT */
/* sqlite.c - a snapshot and its analysis as an SQLite database, for SQL (sqlite3, DuckDB,
 * pandas.read_sql).  The tables (docs/export.md shows queries):
 *
 *   meta(key, value)                     the file, gpumem's version, the generation
 *   segments(segment_id, device, address, total_size, allocated_size, active_size,
 *            requested_size, stream, segment_type, is_expandable, pool_id_0, pool_id_1,
 *            stack_id)                   the snapshot's segments
 *   blocks(block_id, segment_id, address, size, requested_size, state, stack_id)
 *   device_traces(device, event, action, address, size, stream, time_us, stack_id,
 *            segment_id)                 every trace event; segment_id is the snapshot
 *                                        segment holding its address, NULL when none does
 *   frames(frame_id, filename, line, name, is_python, is_user)
 *   stack_frames(stack_id, depth, frame_id)   depth 0 is the innermost frame
 *   allocations(device, alloc_id, address, bytes, alloc_event, free_event, stack_id,
 *            category, phase, iteration)     the analysis' allocations (events -1: none)
 *   categories(device, category, at_peak_bytes, at_end_bytes)
 *   phases(device, first_event, last_event, phase, iteration)
 *   iterations(device, iteration, first_event, last_event, start_bytes, peak_bytes,
 *            end_bytes)                  iterations numbered from 1, as the CLI says them
 *
 * Addresses and sizes are SQLite's signed 64-bit integers (CUDA addresses are below 2^63).
 * The database is built in memory and written to the stream whole (sqlite3_serialize()),
 * so that the caller's output discipline (a temporary file moved into place) holds. */
#include "export/export_int.h"

#ifdef GM_HAVE_SQLITE

#include "gpumem/arena.h"
#include "gpumem/version.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static const char schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE segments(segment_id INTEGER PRIMARY KEY, device INTEGER, address INTEGER,"
    " total_size INTEGER, allocated_size INTEGER, active_size INTEGER, requested_size INTEGER,"
    " stream INTEGER, segment_type TEXT, is_expandable INTEGER, pool_id_0 INTEGER,"
    " pool_id_1 INTEGER, stack_id INTEGER);"
    "CREATE TABLE blocks(block_id INTEGER PRIMARY KEY, segment_id INTEGER REFERENCES"
    " segments(segment_id), address INTEGER, size INTEGER, requested_size INTEGER, state TEXT,"
    " stack_id INTEGER);"
    "CREATE TABLE device_traces(device INTEGER, event INTEGER, action TEXT, address INTEGER,"
    " size INTEGER, stream INTEGER, time_us INTEGER, stack_id INTEGER, segment_id INTEGER"
    " REFERENCES segments(segment_id), PRIMARY KEY(device, event));"
    "CREATE TABLE frames(frame_id INTEGER PRIMARY KEY, filename TEXT, line INTEGER, name TEXT,"
    " is_python INTEGER, is_user INTEGER);"
    "CREATE TABLE stack_frames(stack_id INTEGER, depth INTEGER, frame_id INTEGER REFERENCES"
    " frames(frame_id), PRIMARY KEY(stack_id, depth));"
    "CREATE TABLE allocations(device INTEGER, alloc_id INTEGER, address INTEGER, bytes INTEGER,"
    " alloc_event INTEGER, free_event INTEGER, stack_id INTEGER, category TEXT, phase TEXT,"
    " iteration INTEGER, PRIMARY KEY(device, alloc_id));"
    "CREATE TABLE categories(device INTEGER, category TEXT, at_peak_bytes INTEGER,"
    " at_end_bytes INTEGER);"
    "CREATE TABLE phases(device INTEGER, first_event INTEGER, last_event INTEGER, phase TEXT,"
    " iteration INTEGER);"
    "CREATE TABLE iterations(device INTEGER, iteration INTEGER, first_event INTEGER,"
    " last_event INTEGER, start_bytes INTEGER, peak_bytes INTEGER, end_bytes INTEGER);";

/* One prepared INSERT and the database's first error. */
struct db {
    sqlite3 *h;
    int rc;
    struct gm_error *err;
};

static sqlite3_stmt *prepare(struct db *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    if (db->rc == SQLITE_OK)
        db->rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
    return s;
}

/* Bind the n values of 'v' (int64) to 's', with NULL where null[i]; run and reset. */
static void row(struct db *db, sqlite3_stmt *s, const int64_t *v, const bool *null,
                const char *const *text, int n)
{
    if (db->rc != SQLITE_OK || !s)
        return;
    for (int i = 0; i < n; i++) {
        if (text && text[i])
            sqlite3_bind_text(s, i + 1, text[i], -1, SQLITE_STATIC);
        else if (null && null[i])
            sqlite3_bind_null(s, i + 1);
        else
            sqlite3_bind_int64(s, i + 1, v[i]);
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        db->rc = sqlite3_errcode(db->h);
    sqlite3_reset(s);
}

/* Segments of one device by address, to find the one holding an address. */
struct seg_ref {
    uint64_t addr, end;
    size_t id;
};

static int seg_cmp(const void *a, const void *b)
{
    const struct seg_ref *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static long seg_find(const struct seg_ref *r, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && addr < r[lo - 1].end ? (long)r[lo - 1].id : -1;
}

static void put_meta(struct db *db, const struct gm_snapshot *snap, const char *label)
{
    sqlite3_stmt *s = prepare(db, "INSERT INTO meta VALUES(?, ?)");
    const char *kv[][2] = {{"generator", "gpumem"},
                           {"gpumem_version", gm_version()},
                           {"file", label ? label : ""},
                           {"generation", gm_snapshot_gen_name(snap->gen)},
                           {"torch", gm_snapshot_gen_torch(snap->gen)}};
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
        row(db, s, NULL, NULL, kv[i], 2);
    sqlite3_finalize(s);
}

static void put_state(struct db *db, const struct gm_snapshot *snap, const struct gm_export_opts *o)
{
    sqlite3_stmt *seg = prepare(db, "INSERT INTO segments VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt *blk = prepare(db, "INSERT INTO blocks VALUES(?,?,?,?,?,?,?)");
    int64_t block_id = 0;
    for (size_t i = 0; i < snap->n_segments; i++) {
        const struct gm_snapshot_segment *sg = &snap->segments[i];
        int64_t v[13] = {(int64_t)i,
                         sg->device,
                         (int64_t)sg->address,
                         (int64_t)sg->total_size,
                         (int64_t)sg->allocated_size,
                         (int64_t)sg->active_size,
                         (int64_t)sg->requested_size,
                         (int64_t)sg->stream,
                         0,
                         sg->is_expandable,
                         sg->pool_id[0],
                         sg->pool_id[1],
                         sg->stack};
        const char *t[13] = {NULL};
        bool null[13] = {false};
        if (!export_selects(o, sg->device))
            continue;
        t[8] = sg->is_small ? "small" : "large";
        null[10] = null[11] = !sg->has_pool_id;
        row(db, seg, v, null, t, 13);
        for (size_t b = 0; b < sg->n_blocks; b++) {
            const struct gm_snapshot_block *bl = &sg->blocks[b];
            int64_t bv[7] = {block_id++,
                             (int64_t)i,
                             (int64_t)bl->address,
                             (int64_t)bl->size,
                             (int64_t)bl->requested_size,
                             0,
                             bl->stack};
            const char *bt[7] = {NULL, NULL, NULL, NULL, NULL, bl->state_name, NULL};
            row(db, blk, bv, NULL, bt, 7);
        }
    }
    sqlite3_finalize(seg);
    sqlite3_finalize(blk);
}

static void put_frames(struct db *db, const struct gm_snapshot *snap)
{
    sqlite3_stmt *fr = prepare(db, "INSERT INTO frames VALUES(?,?,?,?,?,?)");
    sqlite3_stmt *sf = prepare(db, "INSERT INTO stack_frames VALUES(?,?,?)");
    for (size_t i = 0; i < snap->n_frames; i++) {
        const struct gm_snapshot_frame *f = &snap->frames[i];
        int64_t v[6] = {(int64_t)i, 0, f->line, 0, f->is_python, gm_snapshot_frame_is_user(f)};
        const char *t[6] = {NULL, f->filename, NULL, f->name, NULL, NULL};
        row(db, fr, v, NULL, t, 6);
    }
    for (size_t i = 0; i < snap->n_stacks; i++)
        for (uint32_t k = 0; k < snap->stacks[i].n_frames; k++) {
            int64_t v[3] = {(int64_t)i, k, snap->stacks[i].frames[k]};
            row(db, sf, v, NULL, NULL, 3);
        }
    sqlite3_finalize(fr);
    sqlite3_finalize(sf);
}

/* Every event of device 'sdev', each with the snapshot segment holding its address. */
static void put_trace(struct db *db, const struct gm_snapshot *snap,
                      const struct gm_snapshot_device *sdev)
{
    sqlite3_stmt *s = prepare(db, "INSERT INTO device_traces VALUES(?,?,?,?,?,?,?,?,?)");
    struct seg_ref *r = gm_calloc(sdev->n_segments ? sdev->n_segments : 1, sizeof(*r));
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    if (!r) {
        db->rc = SQLITE_NOMEM;
        sqlite3_finalize(s);
        return;
    }
    for (size_t i = 0; i < sdev->n_segments; i++) {
        const struct gm_snapshot_segment *sg = &snap->segments[sdev->first_segment + i];
        r[i] = (struct seg_ref){sg->address, sg->address + sg->total_size, sdev->first_segment + i};
    }
    qsort(r, sdev->n_segments, sizeof(*r), seg_cmp);
    gm_snapshot_cursor_init(&c, sdev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL && db->rc == SQLITE_OK) {
        long seg = e->action == GM_ACTION_OOM ? -1 : seg_find(r, sdev->n_segments, e->addr);
        int64_t v[9] = {
            sdev->index,      (int64_t)c.index, 0,
            (int64_t)e->addr, (int64_t)e->size, (int64_t)gm_snapshot_event_stream(snap, e),
            e->time_us,       e->stack,         seg};
        bool null[9] = {false};
        const char *t[9] = {NULL};
        const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(snap, e);
        t[2] = e->action == GM_ACTION_OTHER && x && x->action_name
                   ? x->action_name
                   : gm_snapshot_action_name((enum gm_snapshot_action)e->action);
        null[6] = !(e->flags & GM_EVENT_HAS_TIME);
        null[8] = seg < 0;
        row(db, s, v, null, t, 9);
    }
    gm_free(r);
    sqlite3_finalize(s);
}

static void put_analysis(struct db *db, const struct gm_analysis_device *dev)
{
    sqlite3_stmt *al = prepare(db, "INSERT INTO allocations VALUES(?,?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt *ca = prepare(db, "INSERT INTO categories VALUES(?,?,?,?)");
    sqlite3_stmt *ph = prepare(db, "INSERT INTO phases VALUES(?,?,?,?,?)");
    sqlite3_stmt *it = prepare(db, "INSERT INTO iterations VALUES(?,?,?,?,?,?,?)");
    for (size_t i = 0; i < dev->n_allocs && db->rc == SQLITE_OK; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        int32_t iteration = gm_analysis_iteration_at(dev, a->alloc_event);
        int64_t v[10] = {dev->device,
                         (int64_t)i,
                         (int64_t)a->addr,
                         (int64_t)a->bytes,
                         a->alloc_event,
                         a->free_event,
                         a->stack,
                         0,
                         0,
                         iteration + 1};
        const char *t[10] = {NULL};
        bool null[10] = {false};
        t[7] = gm_category_name((enum gm_category)a->category);
        t[8] = gm_phase_name((enum gm_phase)a->phase);
        null[9] = iteration < 0;
        row(db, al, v, null, t, 10);
    }
    for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
        int64_t v[4] = {dev->device, 0, (int64_t)dev->at_peak[c], (int64_t)dev->at_end[c]};
        const char *t[4] = {NULL, gm_category_name((enum gm_category)c), NULL, NULL};
        row(db, ca, v, NULL, t, 4);
    }
    for (size_t i = 0; i < dev->n_phases; i++) {
        const struct gm_analysis_phase_run *r = &dev->phases[i];
        int64_t v[5] = {dev->device, r->first_event, r->last_event, 0, r->iteration + 1};
        const char *t[5] = {NULL, NULL, NULL, gm_phase_name((enum gm_phase)r->phase), NULL};
        bool null[5] = {false, false, false, false, r->iteration < 0};
        row(db, ph, v, null, t, 5);
    }
    for (size_t i = 0; i < dev->n_iterations; i++) {
        const struct gm_analysis_iteration *x = &dev->iterations[i];
        int64_t v[7] = {dev->device,          (int64_t)i + 1,          x->first_event,
                        x->last_event,        (int64_t)x->start_bytes, (int64_t)x->peak_bytes,
                        (int64_t)x->end_bytes};
        row(db, it, v, NULL, NULL, 7);
    }
    sqlite3_finalize(al);
    sqlite3_finalize(ca);
    sqlite3_finalize(ph);
    sqlite3_finalize(it);
}

enum gm_status export_sqlite(FILE *f, const struct gm_export_input *in,
                             const struct gm_export_opts *o, struct gm_error *err)
{
    const struct gm_snapshot *snap = in->snap;
    const struct gm_analysis *an = in->an;
    struct db db = {NULL, SQLITE_OK, err};
    unsigned char *image;
    sqlite3_int64 size = 0;
    enum gm_status st = GM_OK;
    if (sqlite3_open_v2(":memory:", &db.h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        sqlite3_close(db.h);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sqlite: cannot open a database");
    }
    db.rc = sqlite3_exec(db.h, schema, NULL, NULL, NULL);
    if (db.rc == SQLITE_OK)
        db.rc = sqlite3_exec(db.h, "BEGIN", NULL, NULL, NULL);
    put_meta(&db, snap, in->label);
    put_state(&db, snap, o);
    put_frames(&db, snap);
    for (size_t d = 0; d < an->n_devices && db.rc == SQLITE_OK; d++) {
        const struct gm_analysis_device *dev = &an->devices[d];
        const struct gm_snapshot_device *sdev = gm_snapshot_device_by_index(snap, dev->device);
        if (!export_selects(o, dev->device))
            continue;
        if (sdev && !snap->events_dropped)
            put_trace(&db, snap, sdev);
        put_analysis(&db, dev);
    }
    if (db.rc == SQLITE_OK)
        db.rc = sqlite3_exec(db.h, "COMMIT", NULL, NULL, NULL);
    if (db.rc != SQLITE_OK) {
        st = gm_fail(err, db.rc == SQLITE_NOMEM ? GM_ERR_NOMEM : GM_ERR_IO, GM_NO_OFFSET,
                     "sqlite: %s", sqlite3_errstr(db.rc));
    } else if (!(image = sqlite3_serialize(db.h, "main", &size, 0))) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sqlite: cannot serialise the database");
    } else {
        if (fwrite(image, 1, (size_t)size, f) != (size_t)size || fflush(f) != 0)
            st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "sqlite: the write failed");
        sqlite3_free(image);
    }
    sqlite3_close(db.h);
    return st;
}

#else

enum gm_status export_sqlite(FILE *f, const struct gm_export_input *in,
                             const struct gm_export_opts *o, struct gm_error *err)
{
    (void)f;
    (void)in;
    (void)o;
    return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                   "sqlite: this gpumem was built without libsqlite3 (install libsqlite3-dev "
                   "and rebuild)");
}

#endif
