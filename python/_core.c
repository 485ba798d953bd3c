/* SPDX-License-Identifier: MIT */
/* _core.c - gpumem._core, the C extension of the gpumem Python package: Python objects over
 * the public library API (the headers of include/gpumem) and nothing else.
 *
 *   Snapshot(path)   a PyTorch CUDA memory snapshot read by gpumem's own reader (never
 *                    Python's pickle); the analysis (categories, leaks, OOM verdicts) runs
 *                    once, on first use, and is kept with the object; its results are the
 *                    library's JSON documents (what `gpumem snapshot COMMAND --json` prints),
 *                    returned as text for gpumem.Snapshot to parse
 *   Devices()        the driver's view (NVML, CUDA): memory of a device, the environment JSON
 *   event_fields()   the layout of one record of Snapshot._events() (struct py_event)
 *   estimate_json(), calibrate_json(), _estimate_settings()
 *                    the estimator: a job from keyword settings (the library's settings
 *                    table: every setting of the CLI, by name), run by the library, its
 *                    JSON document returned as text (gpumem.estimate / gpumem.calibrate
 *                    parse it into the dict `gpumem estimate --json` prints)
 *
 * No Python dict is built here: results come as the library's JSON text, or as tuples that
 * gpumem/__init__.py names.
 *
 * A status of the library becomes one Python exception: GM_ERR_NOENT FileNotFoundError,
 * GM_ERR_EXISTS FileExistsError, GM_ERR_NOMEM MemoryError, GM_ERR_IO OSError, bad input data
 * (GM_ERR_FORMAT, GM_ERR_UNSUPPORTED, GM_ERR_LIMIT) gpumem.FormatError, GM_ERR_NODEV
 * gpumem.NoDeviceError, GM_ERR_INVALID (a bad setting or argument: the CLI's exit status
 * 64) gpumem.UsageError, a ValueError too; anything else gpumem.Error.  A Python value of
 * the wrong type for a setting is a TypeError.  Loading, writing a report and running the
 * estimator release the GIL; the analysis is computed with it held, so that two threads
 * never compute it twice, and so are the driver calls of Devices. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gpumem/analysis.h"
#include "gpumem/device.h"
#include "gpumem/estimate.h"
#include "gpumem/json.h"
#include "gpumem/output.h"
#include "gpumem/pickle_write.h"
#include "gpumem/replay.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"
#include "gpumem/sweep.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static PyObject *error_base;      /* gpumem.Error */
static PyObject *error_format;    /* gpumem.FormatError(Error, ValueError) */
static PyObject *error_no_device; /* gpumem.NoDeviceError(Error) */
static PyObject *error_usage;     /* gpumem.UsageError(Error, ValueError) */

/* The text of 'err' as a str: its bytes may hold a path that is no UTF-8 (a file name
 * of another encoding), shown escaped rather than failing as a UnicodeDecodeError. */
static PyObject *error_text(const struct gm_error *err)
{
    char buf[sizeof(err->msg) + 112];
    size_t n;
    if (err->offset != GM_NO_OFFSET)
        snprintf(buf, sizeof(buf), "%s (at byte %llu)", err->msg, (unsigned long long)err->offset);
    else
        snprintf(buf, sizeof(buf), "%s", err->msg);
    /* the setting a failure is about, by its Python name (memory_limit=) */
    n = strlen(buf);
    if (err->setting)
        snprintf(buf + n, sizeof(buf) - n, " (%s=)", err->setting);
    return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "backslashreplace");
}

/* OSError(e, text, filename): Python makes the subclass of 'e' (FileNotFoundError,
 * FileExistsError, IsADirectoryError, ...) and sets .filename. */
static PyObject *raise_os(int e, const struct gm_error *err, PyObject *filename)
{
    PyObject *text = error_text(err), *args;
    if (!text)
        return NULL;
    args = Py_BuildValue("(iOO)", e, text, filename ? filename : Py_None);
    Py_DECREF(text);
    if (args) {
        PyErr_SetObject(PyExc_OSError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* Raise the Python exception of 'err'; returns NULL for "return raise_gm(&err);". */
static PyObject *raise_gm(const struct gm_error *err, PyObject *filename)
{
    PyObject *type = error_base, *text;
    switch (err->code) {
    case GM_ERR_NOENT:
        return raise_os(ENOENT, err, filename);
    case GM_ERR_EXISTS:
        return raise_os(EEXIST, err, filename);
    case GM_ERR_NOMEM:
        return PyErr_NoMemory();
    case GM_ERR_IO:
        type = PyExc_OSError;
        break;
    case GM_ERR_FORMAT:
    case GM_ERR_UNSUPPORTED:
    case GM_ERR_LIMIT:
        type = error_format;
        break;
    case GM_ERR_NODEV:
        type = error_no_device;
        break;
    case GM_ERR_INVALID:
        type = error_usage;
        break;
    default:
        break;
    }
    if ((text = error_text(err)) != NULL) {
        PyErr_SetObject(type, text);
        Py_DECREF(text);
    }
    return NULL;
}

/* The failure 'err' to read the file at 'path' (file-system bytes): a directory is an
 * IsADirectoryError whatever the library's status, the rest as raise_gm(). */
static PyObject *raise_input(const struct gm_error *err, const char *path)
{
    PyObject *name = PyUnicode_DecodeFSDefault(path);
    struct stat st;
    if (!name)
        return NULL;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        raise_os(EISDIR, err, name);
    else
        raise_gm(err, name);
    Py_DECREF(name);
    return NULL;
}

/* Converters of Python values to C ones ("O&"), strict: a bool is no number, a float no
 * int, and a value that does not fit is an error, never wrapped or cut. */

/* A non-negative int below 2^64 into *(uint64_t *)out. */
static int u64_arg(PyObject *o, void *out)
{
    int overflow = 0;
    long long v;
    if (PyBool_Check(o) || !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "an int is required, not %.80s", Py_TYPE(o)->tp_name);
        return 0;
    }
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return 0;
    if (overflow < 0 || (!overflow && v < 0)) {
        PyErr_SetString(PyExc_ValueError, "a non-negative int is required");
        return 0;
    }
    if (overflow) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o); /* OverflowError past 2^64 */
        if (u == (unsigned long long)-1 && PyErr_Occurred())
            return 0;
        *(uint64_t *)out = u;
        return 1;
    }
    *(uint64_t *)out = (uint64_t)v;
    return 1;
}

/* The UTF-8 bytes of str 'o' (borrowed from it), NULL with an exception when it holds a
 * NUL (which C would take for its end) or cannot be encoded. */
static const char *text_arg(PyObject *o, const char *what)
{
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s && (size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%s: a str with a NUL character", what);
        return NULL;
    }
    return s;
}

/* A new reference to o (Py_NewRef, which Python 3.9 lacks). */
static PyObject *new_ref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}

/* A reading: its value, or None when it is unknown (never 0).  A new reference. */
static PyObject *reading(struct gm_reading r)
{
    return r.valid ? PyLong_FromUnsignedLongLong(r.value) : new_ref(Py_None);
}

/* A JSON document written by the library into memory, returned as a str. */
struct memout {
    FILE *f;
    char *text;
    size_t len;
};

static bool memout_open(struct memout *m)
{
    m->text = NULL;
    m->len = 0;
    m->f = open_memstream(&m->text, &m->len);
    if (!m->f)
        PyErr_NoMemory();
    return m->f != NULL;
}

/* Close 'm' and return its text; 'ok' false (the writer failed): NULL with 'what' said. */
static PyObject *memout_str(struct memout *m, bool ok, const char *what)
{
    PyObject *s = NULL;
    if (fclose(m->f) != 0)
        ok = false;
    if (ok)
        s = PyUnicode_DecodeUTF8(m->text, (Py_ssize_t)m->len, "replace");
    else
        PyErr_Format(error_base, "writing %s failed", what);
    free(m->text);
    return s;
}

/* ------------------------------------------------------------------------------------ */
/* Events as records */

/* One trace event as Python sees it: a fixed layout of gpumem's own (numpy dtype and struct
 * format are built from event_fields), independent of the library's internal event. */
struct py_event {
    int64_t time_us; /* valid when flags & GM_EVENT_HAS_TIME */
    uint64_t addr;   /* block or segment address; for an oom event the device's free bytes */
    uint64_t size;   /* bytes */
    uint64_t stream; /* raw cudaStream_t */
    uint32_t stack;  /* stack id (Snapshot.stack_frames) */
    uint8_t action;  /* index into gpumem.ACTIONS */
    uint8_t flags;   /* GM_EVENT_HAS_* bits */
    uint8_t pad_[2];
};
_Static_assert(sizeof(struct py_event) == 40, "py_event is 40 bytes");

static const struct {
    const char *name;
    size_t offset;
    const char *numpy;   /* numpy type string */
    const char *struct_; /* struct module code */
} event_fields[] = {
    {"time_us", offsetof(struct py_event, time_us), "<i8", "q"},
    {"addr", offsetof(struct py_event, addr), "<u8", "Q"},
    {"size", offsetof(struct py_event, size), "<u8", "Q"},
    {"stream", offsetof(struct py_event, stream), "<u8", "Q"},
    {"stack", offsetof(struct py_event, stack), "<u4", "I"},
    {"action", offsetof(struct py_event, action), "u1", "B"},
    {"flags", offsetof(struct py_event, flags), "u1", "B"},
};

/* The one conversion from the snapshot's public events to Python's records: adapt this
 * function, and only this one, when the snapshot's event layout changes. */
static void events_fill(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                        struct py_event *out)
{
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    size_t k = 0;
    gm_snapshot_cursor_init(&c, dev, 0);
    while (k < dev->n_events && (e = gm_snapshot_cursor_next(&c)) != NULL) {
        out[k++] = (struct py_event){
            .time_us = e->flags & GM_EVENT_HAS_TIME ? e->time_us : 0,
            .addr = e->addr,
            .size = e->size,
            .stream = gm_snapshot_event_stream(snap, e),
            .stack = e->stack,
            .action = e->action,
            .flags = e->flags,
        };
    }
    if (k < dev->n_events) /* the trace ended early: never hand out uninitialised bytes */
        memset(out + k, 0, (dev->n_events - k) * sizeof(*out));
}

/* ------------------------------------------------------------------------------------ */
/* Snapshot */

struct snapshot_obj {
    PyObject_HEAD struct gm_snapshot *snap;
    struct gm_analysis *an;          /* NULL until first needed */
    PyObject *path;                  /* str, as given */
    struct gm_category_rules *rules; /* the user's category rules its analysis applies; NULL:
                                      * none (kept as long as the object: the analysis is
                                      * made when first needed) */
    bool loading;                    /* __init__ is reading the file (the GIL released) */
};

static void snapshot_dealloc(PyObject *self)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    gm_analysis_free(s->an);
    gm_snapshot_free(s->snap);
    gm_category_rules_free(s->rules);
    Py_XDECREF(s->path);
    Py_TYPE(self)->tp_free(self);
}

/* The category rules of the file 'bytes' (file-system bytes; NULL: none) into *out: true, or
 * false with the failure raised. */
static bool rules_load(PyObject *bytes, struct gm_category_rules **out)
{
    struct gm_error err;
    *out = NULL;
    if (!bytes)
        return true;
    if (gm_category_rules_load(PyBytes_AS_STRING(bytes), out, &err) == GM_OK)
        return true;
    *out = NULL;
    raise_input(&err, PyBytes_AS_STRING(bytes));
    return false;
}

static int snapshot_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char kw_path[] = "path", kw_limit[] = "memory_limit", kw_max[] = "max_memory",
                kw_rules[] = "categories";
    static char *kwlist[] = {kw_path, kw_limit, kw_max, kw_rules, NULL};
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    struct gm_snapshot_opts opts;
    struct gm_snapshot *snap = NULL;
    struct gm_error err;
    enum gm_status st;
    uint64_t memory_limit = 0, max_memory = 0;
    PyObject *bytes = NULL, *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    PyThreadState *ts;

    /* max_memory: the earlier name of memory_limit, still accepted */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|$O&O&O&", kwlist, PyUnicode_FSConverter,
                                     &bytes, u64_arg, &memory_limit, u64_arg, &max_memory,
                                     PyUnicode_FSConverter, &rules_path))
        return -1;
    if (memory_limit && max_memory) {
        Py_DECREF(bytes);
        Py_XDECREF(rules_path);
        PyErr_SetString(PyExc_TypeError, "max_memory is memory_limit: give one of them");
        return -1;
    }
    if (!rules_load(rules_path, &rules)) {
        Py_DECREF(bytes);
        Py_XDECREF(rules_path);
        return -1;
    }
    Py_XDECREF(rules_path);
    /* Checked and claimed with the GIL held: another thread may be reading the loaded one,
     * or loading another file into this object, with the GIL released. */
    if (s->snap || s->loading) {
        Py_DECREF(bytes);
        gm_category_rules_free(rules);
        PyErr_SetString(PyExc_TypeError, s->snap
                                             ? "the snapshot is already loaded"
                                             : "the snapshot is being loaded by another thread");
        return -1;
    }
    s->loading = true;
    memset(&opts, 0, sizeof(opts));
    opts.memory_limit = memory_limit ? memory_limit : max_memory;
    ts = PyEval_SaveThread();
    st = gm_snapshot_load(PyBytes_AS_STRING(bytes), &opts, &snap, &err);
    PyEval_RestoreThread(ts);
    s->loading = false;
    if (st != GM_OK) {
        raise_input(&err, PyBytes_AS_STRING(bytes));
        Py_DECREF(bytes);
        gm_category_rules_free(rules);
        return -1;
    }
    s->snap = snap;
    s->rules = rules;
    s->path = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(bytes));
    Py_DECREF(bytes);
    return s->path ? 0 : -1;
}

static bool loaded(struct snapshot_obj *s)
{
    if (s->snap)
        return true;
    PyErr_SetString(error_base, "the snapshot was not loaded (Snapshot.__init__ failed)");
    return false;
}

static const struct gm_analysis *analysis_of(struct snapshot_obj *s)
{
    struct gm_error err;
    if (!loaded(s))
        return NULL;
    /* As many points per category series as `gpumem snapshot report` draws by default, so
     * that report() writes the same page as the command. */
    struct gm_analysis_opts ao = {.max_points = 8000, .rules = s->rules};
    if (!s->an && gm_analysis_run(s->snap, &ao, &s->an, &err) != GM_OK) {
        s->an = NULL;
        raise_gm(&err, s->path);
        return NULL;
    }
    return s->an;
}

/* The device an argument names: an index the file has; None: gm_default_device(), the
 * device with the largest allocated peak. */
static bool resolve_device(struct snapshot_obj *s, PyObject *arg, int32_t *out)
{
    if (!loaded(s))
        return false;
    if (arg && arg != Py_None) {
        long v;
        if (PyBool_Check(arg) || !PyLong_Check(arg)) {
            PyErr_Format(PyExc_TypeError, "device: an int (the CUDA index), not %.80s",
                         Py_TYPE(arg)->tp_name);
            return false;
        }
        v = PyLong_AsLong(arg);
        if (v == -1 && PyErr_Occurred())
            return false;
        if (v < INT32_MIN || v > INT32_MAX || !gm_snapshot_device_by_index(s->snap, (int32_t)v)) {
            PyErr_Format(PyExc_ValueError, "the snapshot has no device %ld", v);
            return false;
        }
        *out = (int32_t)v;
        return true;
    }
    /* the library's rule (gm_default_device): from the analysis kept with the object when
     * one ran, else from the devices' timelines, the same figure either way */
    struct gm_error err;
    if (gm_default_device(s->snap, s->an, out, &err) != GM_OK) {
        raise_gm(&err, s->path);
        return false;
    }
    return true;
}

static PyObject *device_arg(PyObject *args, PyObject *kwds)
{
    static char kw_device[] = "device";
    static char *kwlist[] = {kw_device, NULL};
    PyObject *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O", kwlist, &device))
        return NULL;
    return device;
}

static PyObject *snapshot_events(PyObject *self, PyObject *args, PyObject *kwds)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *device = device_arg(args, kwds), *buf;
    int32_t index;
    const struct gm_snapshot_device *dev;
    if (!device || !resolve_device(s, device, &index))
        return NULL;
    dev = gm_snapshot_device_by_index(s->snap, index);
    if ((uint64_t)dev->n_events > (uint64_t)PY_SSIZE_T_MAX / sizeof(struct py_event))
        return PyErr_NoMemory();
    buf =
        PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(dev->n_events * sizeof(struct py_event)));
    if (buf)
        events_fill(s->snap, dev, (struct py_event *)(void *)PyByteArray_AS_STRING(buf));
    return buf;
}

/* Write 'path' through the library's output writer (gpumem/output.h), the one the commands
 * use: a temporary file beside it moved into place once whole, never over an existing file
 * unless 'overwrite', and even then only over a regular file (never a directory, FIFO,
 * device, socket or symbolic link), with the permissions of the file it replaces or 0666
 * less the umask.  write(f, ctx, err) writes the content, without the GIL.  true, or false
 * with the failure raised ('name': the path for the exception). */
static bool output_write(const char *path, PyObject *name, bool overwrite,
                         enum gm_status (*write)(FILE *, const void *, struct gm_error *),
                         const void *ctx)
{
    struct gm_output *out = PyMem_RawMalloc(sizeof(*out)); /* three paths: not on the stack */
    struct gm_error err;
    enum gm_status st;
    PyThreadState *ts;
    if (!out) {
        PyErr_NoMemory();
        return false;
    }
    ts = PyEval_SaveThread();
    st = gm_output_open(out, path, overwrite, &err);
    if (st == GM_OK) {
        st = write(out->f, ctx, &err);
        if (st == GM_OK)
            st = gm_output_commit(out, &err); /* a failed write: with its errno */
        else if (out->f && (fflush(out->f) != 0 || out->sink.err))
            st = gm_output_commit(out, &err);
        gm_output_abort(out); /* nothing left behind whatever failed */
    }
    PyEval_RestoreThread(ts);
    PyMem_RawFree(out);
    if (st != GM_OK)
        raise_gm(&err, name);
    return st == GM_OK;
}

static enum gm_status write_doc(FILE *f, const void *doc, struct gm_error *err)
{
    return gm_analysis_json(f, doc, err);
}

/* A document written by 'write' into memory: the text, or NULL with the failure raised
 * ('path': the file named in it). */
static PyObject *writer_text(PyObject *path,
                             enum gm_status (*write)(FILE *, const void *, struct gm_error *),
                             const void *ctx, const char *what)
{
    struct memout m;
    struct gm_error err;
    enum gm_status st;
    if (!memout_open(&m))
        return NULL;
    st = write(m.f, ctx, &err);
    if (st != GM_OK && st != GM_ERR_IO) {
        fclose(m.f);
        free(m.text);
        return raise_gm(&err, path);
    }
    return memout_str(&m, st == GM_OK, what);
}

/* 'top' of a document: None the document's own, else a non-negative int. */
static bool top_arg(PyObject *o, enum gm_analysis_doc_kind kind, uint64_t *top)
{
    *top = gm_analysis_doc_top(kind);
    return o == Py_None || u64_arg(o, top);
}

/* _json(command, device=None, top=None, *, host=None, path=None, overwrite=False) -> str:
 * the document `gpumem snapshot COMMAND --json FILE` prints (info, stats, peak, categories,
 * leaks, oom), or the digest `gpumem snapshot digest FILE -o OUT` writes, computed by the
 * same library calls; device (peak, categories): only that CUDA device; top: as --top;
 * host (digest): the machine the rank ran on (None: unknown).  With 'path' the document is
 * written there by output_write() instead (as -o OUT), and None returned. */
static PyObject *snapshot_json(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char kw_cmd[] = "command", kw_device[] = "device", kw_top[] = "top", kw_host[] = "host",
                kw_path[] = "path", kw_over[] = "overwrite", kw_stats[] = "memory_stats";
    static char *kwlist[] = {kw_cmd, kw_device, kw_top, kw_host, kw_path, kw_over, kw_stats, NULL};
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *command, *device = Py_None, *top = Py_None, *out = NULL, *bytes = NULL;
    PyObject *stats_path = NULL;
    struct gm_components components;
    const char *host = NULL;
    int overwrite = 0;
    struct gm_analysis_doc_file file = {NULL, NULL, NULL, NULL, NULL};
    struct gm_analysis_doc doc = {.files = &file, .n_files = 1, .device = -1};
    struct gm_snapshot_stats stats;
    struct gm_analysis_peaks peaks;
    bool have_stats = false, have_peaks = false;
    struct gm_error err;
    const char *cmd;
    int kind;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "U|OO$zO&pO&", kwlist, &command, &device, &top,
                                     &host, PyUnicode_FSConverter, &bytes, &overwrite,
                                     PyUnicode_FSConverter, &stats_path))
        return NULL;
    if (!(cmd = text_arg(command, "command")) || !loaded(s) ||
        !(file.path = PyUnicode_AsUTF8(s->path)))
        goto out_args;
    for (kind = 0; kind < GM_DOC_COUNT && strcmp(cmd, gm_analysis_doc_name(kind)); kind++)
        ;
    if (kind == GM_DOC_COUNT || kind == GM_DOC_DIFF) {
        PyErr_Format(PyExc_ValueError,
                     "no snapshot document '%.80s' (info, stats, peak, categories, leaks, oom, "
                     "digest)",
                     cmd);
        goto out_args;
    }
    doc.kind = (enum gm_analysis_doc_kind)kind;
    doc.host = host;
    if (!top_arg(top, doc.kind, &doc.top))
        goto out_args;
    if (device != Py_None) {
        int32_t index;
        if (!resolve_device(s, device, &index))
            goto out_args;
        doc.device = index;
    }
    file.snap = s->snap;
    switch (doc.kind) {
    case GM_DOC_STATS:
        if (gm_snapshot_stats(s->snap, &stats, &err) != GM_OK) {
            raise_gm(&err, s->path);
            goto out_args;
        }
        have_stats = true;
        file.stats = &stats;
        break;
    case GM_DOC_PEAK: {
        /* the peak alone: the analysis kept with the object when one ran (read, not a second
         * replay of the trace), else one replay that follows only the peak, as `gpumem
         * snapshot peak` does; the rest of the analysis waits until something asks for it */
        struct gm_analysis_peaks_opts po = {doc.device, 0};
        file.an = s->an;
        if (s->rules && !(file.an = analysis_of(s))) /* the groups' categories by the rules */
            goto out_args;
        if (gm_analysis_peaks(s->snap, file.an, &po, &peaks, &err) != GM_OK) {
            raise_gm(&err, s->path);
            goto out_args;
        }
        have_peaks = true;
        file.peaks = &peaks;
        break;
    }
    case GM_DOC_CATEGORIES:
    case GM_DOC_LEAKS:
    case GM_DOC_OOM:
    case GM_DOC_DIGEST:
        if (!(file.an = analysis_of(s)))
            goto out_args;
        break;
    default:
        break;
    }
    if (stats_path) {
        /* torch's component bytes beside the categories of the device asked for */
        if (doc.kind != GM_DOC_CATEGORIES || doc.device < 0) {
            PyErr_SetString(PyExc_ValueError, "memory_stats goes with the categories of a device");
            goto out_args;
        }
        if (gm_components_load(PyBytes_AS_STRING(stats_path), &components, &err) != GM_OK) {
            raise_gm(&err, NULL);
            goto out_args;
        }
        doc.components = &components;
        doc.components_device = doc.device;
    }
    if (!bytes) {
        out = writer_text(s->path, write_doc, &doc, "the JSON document");
    } else {
        PyObject *name = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(bytes));
        if (name && output_write(PyBytes_AS_STRING(bytes), name, overwrite != 0, write_doc, &doc))
            out = new_ref(Py_None);
        Py_XDECREF(name);
    }
    if (have_stats)
        gm_snapshot_stats_release(&stats);
    if (have_peaks)
        gm_analysis_peaks_release(&peaks);
out_args:
    Py_XDECREF(bytes);
    Py_XDECREF(stats_path);
    return out;
}

/* The analysis a diff reads, as `gpumem snapshot diff` makes it (gm_analysis_diff_prepare():
 * only what the comparison reads, under the object's memory limit); the caller frees it.
 * NULL with the error raised. */
static struct gm_analysis *diff_analysis_of(struct snapshot_obj *s)
{
    struct gm_analysis_opts ao = {.rules = s->rules};
    struct gm_analysis *an = NULL;
    struct gm_error err;
    if (!loaded(s))
        return NULL;
    if (gm_analysis_diff_prepare(s->snap, &ao, &an, &err) != GM_OK) {
        raise_gm(&err, s->path);
        return NULL;
    }
    return an;
}

/* _diff_json(other, top=None) -> str: `gpumem snapshot diff --json SELF OTHER`. */
static PyObject *snapshot_diff_json(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char kw_other[] = "other", kw_top[] = "top";
    static char *kwlist[] = {kw_other, kw_top, NULL};
    struct snapshot_obj *s = (struct snapshot_obj *)self, *o;
    PyObject *other, *top = Py_None, *out;
    struct gm_analysis_doc_file files[2] = {{NULL, NULL, NULL, NULL, NULL},
                                            {NULL, NULL, NULL, NULL, NULL}};
    struct gm_analysis_doc doc = {.kind = GM_DOC_DIFF, .files = files, .n_files = 2, .device = -1};
    struct gm_analysis_diff *d = NULL;
    struct gm_analysis *an[2] = {NULL, NULL};
    struct gm_error err;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|O", kwlist, Py_TYPE(self), &other, &top) ||
        !top_arg(top, GM_DOC_DIFF, &doc.top))
        return NULL;
    o = (struct snapshot_obj *)other;
    out = NULL;
    /* analysed first: an object that was never loaded has no path yet (loaded() says so) */
    if (!(an[0] = diff_analysis_of(s)) || !(an[1] = diff_analysis_of(o)) ||
        !(files[0].path = PyUnicode_AsUTF8(s->path)) ||
        !(files[1].path = PyUnicode_AsUTF8(o->path)))
        goto out_free;
    files[0].an = an[0];
    files[1].an = an[1];
    if (gm_analysis_diff(an[0], an[1], &d, &err) != GM_OK) {
        raise_gm(&err, NULL);
        goto out_free;
    }
    doc.diff = d;
    out = writer_text(s->path, write_doc, &doc, "the JSON document");
    gm_analysis_diff_free(d);
out_free:
    gm_analysis_free(an[0]);
    gm_analysis_free(an[1]);
    return out;
}

/* The device of an analysis an argument names, as the span commands choose it: an int the
 * file has, or None for the first device with a trace.  NULL with ValueError raised. */
static const struct gm_analysis_device *span_device(struct snapshot_obj *s,
                                                    const struct gm_analysis *an, PyObject *arg)
{
    int32_t index;
    if (arg != Py_None) {
        const struct gm_analysis_device *dev;
        if (!resolve_device(s, arg, &index))
            return NULL;
        if (!(dev = gm_analysis_device_by_index(an, index)))
            PyErr_Format(PyExc_ValueError, "the snapshot has no device %d", (int)index);
        return dev;
    }
    for (size_t d = 0; d < an->n_devices; d++)
        if (an->devices[d].n_events)
            return &an->devices[d];
    PyErr_SetString(PyExc_ValueError, "the snapshot has no trace events");
    return NULL;
}

struct regions_writer {
    const char *path;
    enum gm_region_kind kind;
    const struct gm_analysis_device **devs;
    const struct gm_analysis_regions *regs;
    size_t n;
};

static enum gm_status write_regions(FILE *f, const void *ctx, struct gm_error *err)
{
    const struct regions_writer *w = ctx;
    return gm_analysis_regions_json(f, w->path, w->kind, w->devs, w->regs, w->n, err);
}

/* _regions_json(compile, device) -> str: `gpumem snapshot regions [--compile] --json FILE`
 * (device None: every device, as the command; else only that one). */
static PyObject *snapshot_regions_json(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *device, *out = NULL;
    int compile;
    int32_t index = -1;
    const struct gm_analysis *an;
    struct regions_writer w = {NULL, GM_REGION_ANNOTATION, NULL, NULL, 0};
    struct gm_analysis_regions *regs = NULL;
    struct gm_error err;

    if (!PyArg_ParseTuple(args, "pO", &compile, &device) || !(an = analysis_of(s)) ||
        !(w.path = PyUnicode_AsUTF8(s->path)))
        return NULL;
    if (device != Py_None) {
        if (!resolve_device(s, device, &index))
            return NULL;
        if (!gm_analysis_device_by_index(an, index)) {
            PyErr_Format(PyExc_ValueError, "the snapshot has no device %d", (int)index);
            return NULL;
        }
    }
    w.kind = compile ? GM_REGION_COMPILE : GM_REGION_ANNOTATION;
    w.devs = PyMem_Calloc(an->n_devices + 1, sizeof(*w.devs));
    regs = PyMem_Calloc(an->n_devices + 1, sizeof(*regs));
    if (!w.devs || !regs) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t d = 0; d < an->n_devices; d++) {
        if (index >= 0 && an->devices[d].device != index)
            continue;
        w.devs[w.n] = &an->devices[d];
        if (gm_analysis_regions(an, w.devs[w.n], w.kind, &regs[w.n], &err) != GM_OK) {
            raise_gm(&err, s->path);
            goto out;
        }
        w.n++;
    }
    w.regs = regs;
    out = writer_text(s->path, write_regions, &w, "the regions");
out:
    for (size_t d = 0; regs && d < w.n; d++)
        gm_analysis_regions_release(&regs[d]);
    PyMem_Free(regs);
    PyMem_Free(w.devs);
    return out;
}

struct window_writer {
    const char *path;
    const struct gm_analysis *an;
    const struct gm_analysis_device *dev;
    const struct gm_analysis_region *window;
    const struct gm_analysis_alloc *alloc;
    uint32_t nth;
    int64_t event;
    uint64_t allocated;
    const struct gm_snapshot_live_group *live;
    size_t n_live, top;
};

static enum gm_status write_window(FILE *f, const void *ctx, struct gm_error *err)
{
    const struct window_writer *w = ctx;
    return gm_analysis_window_json(f, w->path, w->an, w->dev, w->window, w->alloc, w->nth, w->event,
                                   w->allocated, w->live, w->n_live, w->top, err);
}

/* _window_json(by_time, start, end, address, nth, device, top) -> str: `gpumem snapshot
 * window --json FILE` with --from START --to END (events, or microseconds when by_time),
 * or, when address is not None, --at-alloc ADDRESS#NTH. */
static PyObject *snapshot_window_json(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *device, *address, *out;
    struct gm_analysis_window win = {false, 0, 0};
    struct gm_analysis_region r;
    struct window_writer w;
    int by_time;
    long long from, to;
    uint64_t addr = 0, top;
    unsigned int nth;
    size_t ai;
    struct gm_snapshot_live_group *live = NULL;
    struct gm_error err;

    memset(&w, 0, sizeof(w));
    if (!PyArg_ParseTuple(args, "pLLOIOO&", &by_time, &from, &to, &address, &nth, &device, u64_arg,
                          &top) ||
        (address != Py_None && !u64_arg(address, &addr)) || !(w.an = analysis_of(s)) ||
        !(w.path = PyUnicode_AsUTF8(s->path)) || !(w.dev = span_device(s, w.an, device)))
        return NULL;
    if (address == Py_None) {
        win.by_time = by_time != 0;
        win.from = from;
        win.to = to;
        if (gm_analysis_window_region(w.an, w.dev, &win, &r, &err) != GM_OK)
            return raise_gm(&err, NULL);
        w.window = &r;
        w.event = r.peak_event;
    } else {
        if (gm_analysis_alloc_at_address(w.dev, addr, nth, &ai, &err) != GM_OK)
            return raise_gm(&err, NULL);
        w.alloc = &w.dev->allocs[ai];
        w.nth = nth;
        w.event = w.alloc->alloc_event;
    }
    if (gm_analysis_group_live_at(w.an, w.dev, w.event, &live, &w.n_live, &err) != GM_OK)
        return raise_gm(&err, s->path);
    for (size_t i = 0; i < w.n_live; i++)
        w.allocated += live[i].bytes;
    w.live = live;
    w.top = (size_t)top;
    out = writer_text(s->path, write_window, &w, "the window");
    gm_free(live);
    return out;
}

struct files_writer {
    const char *paths[2];
    int32_t device;
    const char *suffix;
    const struct gm_analysis_files *a, *b;
    const struct gm_analysis_file_change *changes;
    size_t n_changes;
};

static enum gm_status write_files(FILE *f, const void *ctx, struct gm_error *err)
{
    const struct files_writer *w = ctx;
    return gm_analysis_files_json(f, w->paths, w->device, w->suffix, w->a, w->b, w->changes,
                                  w->n_changes, err);
}

/* _files_json(other, suffix, lines, device) -> str: `gpumem snapshot files --json SELF
 * [OTHER]` with --file SUFFIX [--lines] when suffix is not None. */
static PyObject *snapshot_files_json(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s[2] = {(struct snapshot_obj *)self, NULL};
    PyObject *other, *device, *out = NULL;
    const char *suffix;
    int lines, n = 1;
    const struct gm_analysis *an[2] = {NULL, NULL};
    const struct gm_analysis_device *devs[2] = {NULL, NULL};
    struct gm_analysis_files fs[2];
    struct gm_analysis_file_change *ch = NULL;
    struct files_writer w;
    struct gm_error err;

    memset(&w, 0, sizeof(w));
    if (!PyArg_ParseTuple(args, "OzpO", &other, &suffix, &lines, &device))
        return NULL;
    if (other != Py_None) {
        if (!PyObject_TypeCheck(other, Py_TYPE(self))) {
            PyErr_Format(PyExc_TypeError, "other: a gpumem.Snapshot, not %.80s",
                         Py_TYPE(other)->tp_name);
            return NULL;
        }
        s[1] = (struct snapshot_obj *)other;
        n = 2;
    }
    memset(fs, 0, sizeof(fs));
    for (int i = 0; i < n; i++) {
        if (!(an[i] = analysis_of(s[i])) || !(w.paths[i] = PyUnicode_AsUTF8(s[i]->path)))
            goto out;
        if (device == Py_None && an[i]->n_devices) {
            if (!(devs[i] = span_device(s[i], an[i], device))) {
                PyErr_Clear(); /* no trace: what the snapshot holds, as the command */
                devs[i] = &an[i]->devices[0];
            }
        } else if (!(devs[i] = span_device(s[i], an[i], device))) {
            goto out;
        }
        if (gm_analysis_files(an[i], devs[i], suffix, lines != 0, &fs[i], &err) != GM_OK) {
            raise_gm(&err, s[i]->path);
            goto out;
        }
    }
    if (n == 2 && gm_analysis_files_compare(&fs[0], &fs[1], &ch, &w.n_changes, &err) != GM_OK) {
        raise_gm(&err, NULL);
        goto out;
    }
    w.device = devs[0]->device;
    w.suffix = suffix;
    w.a = &fs[0];
    w.b = n == 2 ? &fs[1] : NULL;
    w.changes = ch;
    out = writer_text(s[0]->path, write_files, &w, "the files");
out:
    gm_free(ch);
    for (int i = 0; i < 2; i++)
        gm_analysis_files_release(&fs[i]);
    return out;
}

/* _device(device=None) -> int: the CUDA index the methods read (resolve_device()). */
static PyObject *snapshot_device(PyObject *self, PyObject *args, PyObject *kwds)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *device = device_arg(args, kwds);
    int32_t index;
    if (!device || !resolve_device(s, device, &index))
        return NULL;
    return PyLong_FromLong(index);
}

/* _stack_json(stack) -> str: the frames worth showing of a stack id, as JSON. */
static PyObject *snapshot_stack_json(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    uint64_t stack;
    struct memout m;
    struct gm_error err;
    enum gm_status st;
    if (!PyArg_ParseTuple(args, "O&", u64_arg, &stack) || !loaded(s))
        return NULL;
    if (stack >= s->snap->n_stacks) {
        PyErr_Format(PyExc_ValueError, "no stack %llu (the snapshot has %zu)",
                     (unsigned long long)stack, s->snap->n_stacks);
        return NULL;
    }
    if (!memout_open(&m))
        return NULL;
    st = gm_analysis_stack_json(m.f, s->snap, (uint32_t)stack, &err);
    return memout_str(&m, st == GM_OK, "the frames");
}
struct report_writer {
    const struct gm_snapshot *snap;
    const struct gm_analysis *an;
    const struct gm_report_opts *opts;
};

static enum gm_status write_report(FILE *f, const void *ctx, struct gm_error *err)
{
    const struct report_writer *rw = ctx;
    return gm_report_html(f, rw->snap, rw->an, rw->opts, err);
}

/* Write the HTML report through the library's output writer (output_write()). */
static PyObject *snapshot_report(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char kw_path[] = "path", kw_title[] = "title", kw_over[] = "overwrite";
    static char *kwlist[] = {kw_path, kw_title, kw_over, NULL};
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *bytes = NULL, *name;
    const char *title = NULL, *path;
    int overwrite = 0;
    struct gm_report_opts opts;
    const struct gm_analysis *an;
    struct report_writer rw;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|z$p", kwlist, PyUnicode_FSConverter, &bytes,
                                     &title, &overwrite))
        return NULL;
    path = PyBytes_AS_STRING(bytes);
    name = PyUnicode_DecodeFSDefault(path);
    if (!name || !(an = analysis_of(s)))
        goto out_fail;
    memset(&opts, 0, sizeof(opts));
    if (!title) {
        /* as the command: the snapshot's file name */
        const char *src = PyUnicode_AsUTF8(s->path), *slash = src ? strrchr(src, '/') : NULL;
        title = slash ? slash + 1 : src;
    }
    opts.title = title;
    rw.snap = s->snap;
    rw.an = an;
    rw.opts = &opts;
    if (!output_write(path, name, overwrite != 0, write_report, &rw))
        goto out_fail;
    Py_DECREF(name);
    Py_DECREF(bytes);
    Py_RETURN_NONE;
out_fail:
    Py_XDECREF(name);
    Py_DECREF(bytes);
    return NULL;
}

/* ---- Snapshot.from_dict(): torch.cuda.memory._snapshot()'s dict, read without a file ----
 *
 * The dict is written as the pickle torch.cuda.memory._dump_snapshot() would write for it
 * (gpumem/pickle_write.h, into memory: nothing on disk) and that pickle is loaded as a file
 * is, so that a dict and a file give one snapshot by one reader.  Only the plain types a
 * snapshot holds are taken, exactly (no subclass, so no Python code runs while the
 * containers are walked): dict, list, tuple, str, int, float, bool, None. */

#define OBJECT_MAX_DEPTH 200

struct obj_writer {
    struct gm_pickle_writer *w;
    PyObject *strings; /* str -> its memo index: equal texts written once */
};

static bool write_object(struct obj_writer *ow, PyObject *o, int depth)
{
    if (depth > OBJECT_MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError,
                        "from_dict: nested more than 200 deep (a container inside itself?)");
        return false;
    }
    if (o == Py_None) {
        gm_pickle_none(ow->w);
    } else if (PyBool_Check(o)) {
        gm_pickle_bool(ow->w, o == Py_True);
    } else if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred())
            return false;
        if (!overflow) {
            gm_pickle_int(ow->w, v);
        } else {
            unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(o) : 0;
            if (overflow < 0 || PyErr_Occurred()) {
                PyErr_Clear();
                PyErr_SetString(PyExc_OverflowError, "from_dict: an integer beyond 64 bits");
                return false;
            }
            gm_pickle_uint(ow->w, u);
        }
    } else if (PyFloat_CheckExact(o)) {
        gm_pickle_float(ow->w, PyFloat_AS_DOUBLE(o));
    } else if (PyUnicode_CheckExact(o)) {
        PyObject *memo = PyDict_GetItemWithError(ow->strings, o), *m;
        Py_ssize_t n;
        const char *p;
        if (memo) {
            gm_pickle_get(ow->w, (uint32_t)PyLong_AsUnsignedLong(memo));
            return true;
        }
        if (PyErr_Occurred() || !(p = PyUnicode_AsUTF8AndSize(o, &n)))
            return false;
        m = PyLong_FromUnsignedLong(gm_pickle_strn(ow->w, p, (size_t)n));
        if (!m || PyDict_SetItem(ow->strings, o, m) < 0) {
            Py_XDECREF(m);
            return false;
        }
        Py_DECREF(m);
    } else if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        bool tuple = PyTuple_CheckExact(o);
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        if (tuple)
            gm_pickle_tuple_begin(ow->w, (size_t)n);
        else
            gm_pickle_list_begin(ow->w, (size_t)n);
        for (Py_ssize_t i = 0; i < n; i++)
            if (!write_object(ow, PySequence_Fast_GET_ITEM(o, i), depth + 1))
                return false;
        if (tuple)
            gm_pickle_tuple_end(ow->w);
        else
            gm_pickle_list_end(ow->w);
    } else if (PyDict_CheckExact(o)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        gm_pickle_dict_begin(ow->w, (size_t)PyDict_GET_SIZE(o));
        while (PyDict_Next(o, &pos, &k, &v))
            if (!write_object(ow, k, depth + 1) || !write_object(ow, v, depth + 1))
                return false;
        gm_pickle_dict_end(ow->w);
    } else {
        PyErr_Format(PyExc_TypeError, "from_dict: a %.100s, which no memory snapshot holds",
                     Py_TYPE(o)->tp_name);
        return false;
    }
    return true;
}

static PyObject *snapshot_load_object(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    struct obj_writer ow = {NULL, NULL};
    struct gm_snapshot_opts opts;
    struct gm_snapshot *snap = NULL;
    struct gm_error err;
    struct memout m;
    PyObject *obj, *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    uint64_t memory_limit = 0;
    enum gm_status st;
    bool ok;
    PyThreadState *ts;

    if (!PyArg_ParseTuple(args, "OO&|O&", &obj, u64_arg, &memory_limit, PyUnicode_FSConverter,
                          &rules_path))
        return NULL;
    if (s->snap || s->loading) {
        Py_XDECREF(rules_path);
        PyErr_SetString(PyExc_TypeError, "the snapshot is already loaded");
        return NULL;
    }
    ok = rules_load(rules_path, &rules);
    Py_XDECREF(rules_path);
    if (!ok)
        return NULL;
    if (!PyDict_CheckExact(obj) && !PyList_CheckExact(obj)) {
        gm_category_rules_free(rules);
        PyErr_Format(PyExc_TypeError,
                     "from_dict: the dict torch.cuda.memory._snapshot() returns, not a %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (!(ow.strings = PyDict_New()) || !memout_open(&m)) {
        Py_XDECREF(ow.strings);
        gm_category_rules_free(rules);
        return NULL;
    }
    st = gm_pickle_writer_new(m.f, 4, &ow.w, &err);
    ok = st == GM_OK && write_object(&ow, obj, 0);
    if (st == GM_OK && ok)
        st = gm_pickle_writer_finish(ow.w, &err);
    else if (st == GM_OK)
        gm_pickle_writer_free(ow.w);
    Py_DECREF(ow.strings);
    if (fclose(m.f) != 0 && st == GM_OK && ok)
        st = gm_fail(&err, GM_ERR_NOMEM, GM_NO_OFFSET, "from_dict: out of memory");
    if (ok && st == GM_OK) {
        memset(&opts, 0, sizeof(opts));
        opts.memory_limit = memory_limit;
        s->loading = true;
        ts = PyEval_SaveThread();
        st = gm_snapshot_load_mem(m.text, m.len, &opts, &snap, &err);
        PyEval_RestoreThread(ts);
        s->loading = false;
    }
    free(m.text);
    if (!ok || st != GM_OK) {
        gm_category_rules_free(rules);
        return ok ? raise_gm(&err, NULL) : NULL;
    }
    s->snap = snap;
    s->rules = rules;
    s->path = PyUnicode_FromString("<dict>");
    if (!s->path)
        return NULL;
    Py_RETURN_NONE;
}

/* `gpumem snapshot replay --json` for this snapshot: alloc_conf (str or None: the recorded
 * settings), gpu_memory (bytes, a size string, or None: unlimited), memory_fraction (0:
 * none), compare. */
static PyObject *snapshot_replay_json(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    const char *conf = NULL;
    uint64_t device_bytes = 0;
    double fraction = 0;
    int compare = 0;
    struct gm_alloc_conf what_if;
    struct gm_replay_opts ro;
    struct gm_replay_result res;
    struct gm_replay_comparison *cmp = NULL;
    size_t n_cmp = 0;
    struct gm_error err;
    struct memout m;
    char conf_text[256];
    enum gm_status st;
    bool assumed;

    PyObject *gpu_memory;
    if (!PyArg_ParseTuple(args, "zOdp", &conf, &gpu_memory, &fraction, &compare) || !loaded(s))
        return NULL;
    if (PyUnicode_Check(gpu_memory)) { /* "24GiB", "80GB", as --gpu-memory takes it */
        const char *text = PyUnicode_AsUTF8(gpu_memory);
        if (!text)
            return NULL;
        if (gm_parse_gpu_memory(text, &device_bytes, &err) != GM_OK)
            return raise_gm(&err, NULL);
    } else if (gpu_memory != Py_None && !u64_arg(gpu_memory, &device_bytes)) {
        return NULL;
    }
    memset(&ro, 0, sizeof(ro));
    if (conf) {
        gm_replay_snapshot_conf(s->snap, &what_if, &assumed);
        if (gm_alloc_conf_parse(&what_if, conf, &err) != GM_OK)
            return raise_gm(&err, NULL);
        gm_alloc_conf_format(&what_if, conf_text, sizeof(conf_text));
        ro.what_if = &what_if;
    }
    ro.device_bytes = device_bytes;
    ro.memory_fraction = fraction;
    if (gm_replay_snapshot(s->snap, &ro, &res, &err) != GM_OK)
        return raise_gm(&err, s->path);
    if (compare && gm_replay_compare(s->snap, &ro, &cmp, &n_cmp, &err) != GM_OK) {
        gm_replay_release(&res);
        return raise_gm(&err, s->path);
    }
    if (!memout_open(&m)) {
        gm_free(cmp);
        gm_replay_release(&res);
        return NULL;
    }
    {
        const char *path = PyUnicode_AsUTF8(s->path);
        struct gm_replay_doc doc = {.path = path ? path : "",
                                    .snap = s->snap,
                                    .result = &res,
                                    .what_if = conf ? conf_text : NULL,
                                    .device_bytes = device_bytes,
                                    .comparisons = compare ? cmp : NULL,
                                    .n_comparisons = n_cmp};
        st = gm_replay_json(m.f, &doc, &err);
    }
    gm_free(cmp);
    gm_replay_release(&res);
    return memout_str(&m, st == GM_OK, "the replay");
}

/* The HTML report as a str (Jupyter's _repr_html_): the page `snapshot report` writes. */
static PyObject *snapshot_report_html(PyObject *self, PyObject *args)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    const char *title = NULL;
    struct gm_report_opts opts;
    const struct gm_analysis *an;
    struct gm_error err;
    struct memout m;
    enum gm_status st;
    PyThreadState *ts;

    if (!PyArg_ParseTuple(args, "z", &title) || !(an = analysis_of(s)) || !memout_open(&m))
        return NULL;
    memset(&opts, 0, sizeof(opts));
    opts.title = title ? title : PyUnicode_AsUTF8(s->path);
    ts = PyEval_SaveThread();
    st = gm_report_html(m.f, s->snap, an, &opts, &err);
    PyEval_RestoreThread(ts);
    if (st != GM_OK) {
        fclose(m.f);
        free(m.text);
        return raise_gm(&err, s->path);
    }
    return memout_str(&m, true, "the report");
}

/* The scalar properties, one getter told apart by its closure. */
enum snapshot_prop {
    PROP_PATH,
    PROP_GENERATION,
    PROP_TORCH,
    PROP_PROTOCOL,
    PROP_SIZE,
    PROP_EVENTS
};

static PyObject *snapshot_get(PyObject *self, void *closure)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    if (!loaded(s))
        return NULL;
    switch ((enum snapshot_prop)(intptr_t)closure) {
    case PROP_PATH:
        return new_ref(s->path);
    case PROP_GENERATION:
        return PyUnicode_FromString(gm_snapshot_gen_name(s->snap->gen));
    case PROP_TORCH:
        return PyUnicode_FromString(gm_snapshot_gen_torch(s->snap->gen));
    case PROP_PROTOCOL:
        return PyLong_FromLong(s->snap->protocol);
    case PROP_SIZE:
        return PyLong_FromUnsignedLongLong(s->snap->file_size);
    case PROP_EVENTS:
        return PyLong_FromSize_t(s->snap->n_events);
    }
    Py_RETURN_NONE;
}

#define PROP(p) ((void *)(intptr_t)(p))

static PyObject *snapshot_get_devices(PyObject *self, void *closure)
{
    struct snapshot_obj *s = (struct snapshot_obj *)self;
    PyObject *t;
    (void)closure;
    if (!loaded(s))
        return NULL;
    t = PyTuple_New((Py_ssize_t)s->snap->n_devices);
    for (size_t i = 0; t && i < s->snap->n_devices; i++) {
        PyObject *v = PyLong_FromLong(s->snap->devices[i].index);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, v);
    }
    return t;
}

static PyMethodDef snapshot_methods[] = {
    {"_events", (PyCFunction)(void (*)(void))snapshot_events, METH_VARARGS | METH_KEYWORDS,
     "_events(device=None) -> bytearray of event records (see event_fields())"},
    {"_json", (PyCFunction)(void (*)(void))snapshot_json, METH_VARARGS | METH_KEYWORDS,
     "_json(command, device=None, top=None, *, host=None, path=None, overwrite=False) -> str: "
     "the document of `gpumem snapshot COMMAND --json` (digest: of `gpumem snapshot digest`); "
     "with path, written there"},
    {"_diff_json", (PyCFunction)(void (*)(void))snapshot_diff_json, METH_VARARGS | METH_KEYWORDS,
     "_diff_json(other, top=None) -> str: the document of `gpumem snapshot diff --json`"},
    {"_device", (PyCFunction)(void (*)(void))snapshot_device, METH_VARARGS | METH_KEYWORDS,
     "_device(device=None) -> int: the device the methods read"},
    {"_regions_json", snapshot_regions_json, METH_VARARGS,
     "_regions_json(compile, device) -> str: `snapshot regions --json`"},
    {"_window_json", snapshot_window_json, METH_VARARGS,
     "_window_json(by_time, start, end, address, nth, device, top) -> str: `snapshot window --json`"},
    {"_files_json", snapshot_files_json, METH_VARARGS,
     "_files_json(other, suffix, lines, device) -> str: `snapshot files --json`"},
    {"_stack_json", snapshot_stack_json, METH_VARARGS,
     "_stack_json(stack) -> str: the frames worth showing of a stack id, as JSON"},
    {"report", (PyCFunction)(void (*)(void))snapshot_report, METH_VARARGS | METH_KEYWORDS,
     "report(path, title=None, *, overwrite=False): write the offline HTML report"},
    {"_load_object", snapshot_load_object, METH_VARARGS,
     "load the dict torch.cuda.memory._snapshot() returns (from_dict)"},
    {"_replay_json", snapshot_replay_json, METH_VARARGS,
     "`gpumem snapshot replay --json` of this snapshot"},
    {"_report_html", snapshot_report_html, METH_VARARGS, "the HTML report as a str"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef snapshot_getset[] = {
    {"path", snapshot_get, NULL, "the file as given", PROP(PROP_PATH)},
    {"generation", snapshot_get, NULL, "format generation ('g7')", PROP(PROP_GENERATION)},
    {"torch_versions", snapshot_get, NULL, "torch versions of that generation", PROP(PROP_TORCH)},
    {"protocol", snapshot_get, NULL, "pickle protocol", PROP(PROP_PROTOCOL)},
    {"file_size", snapshot_get, NULL, "bytes", PROP(PROP_SIZE)},
    {"n_events", snapshot_get, NULL, "trace events over all devices", PROP(PROP_EVENTS)},
    {"devices", snapshot_get_devices, NULL, "device indexes the file names, ascending", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject snapshot_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpumem._core.Snapshot",
    .tp_basicsize = sizeof(struct snapshot_obj),
    .tp_dealloc = snapshot_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "Snapshot(path, *, memory_limit=0, categories=None): a PyTorch CUDA memory snapshot read by gpumem's "
        "own reader; nothing in the file is executed.",
    .tp_methods = snapshot_methods,
    .tp_getset = snapshot_getset,
    .tp_init = snapshot_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------ */
/* Devices */

struct devices_obj {
    PyObject_HEAD struct gm_devices *d;
};

static void devices_dealloc(PyObject *self)
{
    struct devices_obj *o = (struct devices_obj *)self;
    gm_devices_close(o->d);
    Py_TYPE(self)->tp_free(self);
}

static int devices_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    struct devices_obj *o = (struct devices_obj *)self;
    struct gm_devices *d = NULL;
    struct gm_error err;
    enum gm_status st;
    PyThreadState *ts;
    if (!PyArg_ParseTuple(args, "") || (kwds && PyDict_Size(kwds) > 0)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Devices() takes no arguments");
        return -1;
    }
    ts = PyEval_SaveThread();
    st = gm_devices_open(&d, getenv, &err);
    PyEval_RestoreThread(ts);
    if (st != GM_OK) {
        raise_gm(&err, NULL);
        return -1;
    }
    gm_devices_close(o->d);
    o->d = d;
    return 0;
}

static bool opened(struct devices_obj *o)
{
    if (o->d)
        return true;
    PyErr_SetString(error_base, "Devices.__init__ failed");
    return false;
}

/* None when a device is usable, else the sentence saying why not. */
static PyObject *devices_unavailable(PyObject *self, PyObject *unused)
{
    struct devices_obj *o = (struct devices_obj *)self;
    struct gm_error err;
    (void)unused;
    if (!opened(o))
        return NULL;
    if (gm_devices_check(o->d, &err) == GM_OK)
        Py_RETURN_NONE;
    return PyUnicode_FromString(err.msg);
}

static PyObject *devices_memory(PyObject *self, PyObject *args)
{
    struct devices_obj *o = (struct devices_obj *)self;
    struct gm_device_memory m;
    struct gm_error err;
    enum gm_status st;
    int cuda_index;
    size_t pos;
    if (!PyArg_ParseTuple(args, "i", &cuda_index) || !opened(o))
        return NULL;
    if (gm_devices_find_cuda(o->d, cuda_index, &pos, &err) != GM_OK)
        return raise_gm(&err, NULL);
    st = gm_devices_memory(o->d, pos, &m, &err);
    if (st != GM_OK)
        return raise_gm(&err, NULL);
    return Py_BuildValue("(NNNN)", reading(m.total), reading(m.free), reading(m.used),
                         reading(m.reserved));
}

/* The members of `gpumem environment --json` (schema gpumem.environment/1) as one JSON
 * object, for CUDA device 'cuda_index' only (every device when -1). */
static PyObject *devices_environment_json(PyObject *self, PyObject *args)
{
    struct devices_obj *o = (struct devices_obj *)self;
    struct gm_host_info host;
    struct gm_json w;
    struct memout m;
    int cuda_index = -1;
    if (!PyArg_ParseTuple(args, "|i", &cuda_index) || !opened(o) || !memout_open(&m))
        return NULL;
    gm_host_probe(&host, getenv);
    gm_json_init(&w, m.f, 0);
    gm_json_begin_object(&w);
    gm_devices_write_json(&w, o->d, &host, cuda_index);
    gm_json_end_object(&w);
    return memout_str(&m, gm_json_finish(&w), "the environment JSON");
}

static PyMethodDef devices_methods[] = {
    {"unavailable", devices_unavailable, METH_NOARGS,
     "unavailable() -> None when a GPU is usable, else why not (one sentence)"},
    {"_memory", devices_memory, METH_VARARGS,
     "_memory(cuda_index) -> (total, free, used, reserved) bytes, None when unknown"},
    {"environment_json", devices_environment_json, METH_VARARGS,
     "environment_json(cuda_index=-1) -> str: gpumem environment --json members"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject devices_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpumem._core.Devices",
    .tp_basicsize = sizeof(struct devices_obj),
    .tp_dealloc = devices_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Devices(): the driver's view of the GPUs (NVML and the CUDA driver, loaded at run "
              "time); never fails for want of a GPU, see unavailable().",
    .tp_methods = devices_methods,
    .tp_init = devices_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------ */
/* The estimator */

static const char *setting_type_name(enum gm_job_setting_type t)
{
    switch (t) {
    case GM_JOB_FLAG:
        return "flag";
    case GM_JOB_U64:
        return "int";
    case GM_JOB_COUNT:
        return "count";
    case GM_JOB_SIZE:
        return "size";
    case GM_JOB_DOUBLE:
        return "float";
    case GM_JOB_CHOICE:
        return "choice";
    case GM_JOB_TEXT:
        return "text";
    }
    return "unknown";
}

/* What a setting takes from Python, for the TypeError. */
static const char *setting_takes(enum gm_job_setting_type t)
{
    switch (t) {
    case GM_JOB_FLAG:
        return "True or False";
    case GM_JOB_U64:
        return "an int (or a str as the CLI takes it)";
    case GM_JOB_COUNT:
        return "an int, a whole float or a str such as '8B'";
    case GM_JOB_SIZE:
        return "an int of bytes or a str such as '24GiB'";
    case GM_JOB_DOUBLE:
        return "a number (or a str)";
    case GM_JOB_CHOICE:
        return "a str, one of its choices";
    case GM_JOB_TEXT:
        return "a str (or a number)";
    }
    return "a str";
}

/* The text gm_job_set() parses for the Python value 'v' of setting 's': converted here,
 * at the edge, by the setting's type, without running any code of the value's own (an int
 * subclass's __str__ could change the settings being read).  A flag takes True or False; a
 * valued setting takes a str as the CLI spells it (no NUL in it: ValueError), an int (a
 * choice too: zero=3; negative: ValueError, 2^64 or more: OverflowError), and a float
 * where it takes a count, a fraction or free text.  *text is NULL when the setting stays
 * unset (None, False).  false with a TypeError when the type does not suit. */
static bool setting_text(const struct gm_job_setting *s, PyObject *key, PyObject *v, char *buf,
                         size_t n, const char **text)
{
    bool number = s->type == GM_JOB_COUNT || s->type == GM_JOB_DOUBLE || s->type == GM_JOB_TEXT;
    *text = NULL;
    if (v == Py_None)
        return true;
    if (s->type == GM_JOB_FLAG && PyBool_Check(v)) {
        *text = v == Py_True ? "true" : NULL;
        return true;
    }
    if (s->type != GM_JOB_FLAG && PyUnicode_Check(v)) {
        *text = text_arg(v, s->name);
        return *text != NULL;
    }
    if (s->type != GM_JOB_FLAG && PyLong_Check(v) && !PyBool_Check(v)) {
        uint64_t u;
        if (!u64_arg(v, &u)) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb); /* say which setting */
            PyErr_Format(type ? type : PyExc_ValueError, "%U: %S", key, value ? value : Py_None);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return false;
        }
        snprintf(buf, n, "%llu", (unsigned long long)u);
        *text = buf;
        return true;
    }
    if (number && PyFloat_Check(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        char *r;
        if (s->type == GM_JOB_COUNT && d == floor(d) && d >= 0 && d < 1.8e19) {
            snprintf(buf, n, "%.0f", d); /* whole: exact */
        } else {
            if (!(r = PyOS_double_to_string(d, 'r', 0, 0, NULL)))
                return false;
            snprintf(buf, n, "%s", r);
            PyMem_Free(r);
        }
        *text = buf;
        return true;
    }
    PyErr_Format(PyExc_TypeError, "%U: takes %s, not %.80s", key, setting_takes(s->type),
                 Py_TYPE(v)->tp_name);
    return false;
}

/* Set the job from keyword settings (names with '_' or '-', as the table takes them), in
 * the table's order as the CLI does, then check the job as a whole.  The keys and values
 * are read from a copy of the dict, which holds them while they are converted. */
static bool job_from_copy(struct gm_job *job, PyObject *settings);

static bool job_from_settings(struct gm_job *job, PyObject *caller_settings)
{
    PyObject *settings = PyDict_Copy(caller_settings);
    bool ok;
    if (!settings)
        return false;
    ok = job_from_copy(job, settings);
    Py_DECREF(settings);
    return ok;
}

static bool job_from_copy(struct gm_job *job, PyObject *settings)
{
    size_t n_set;
    const struct gm_job_setting *table = gm_job_settings(&n_set);
    PyObject *given[GM_JOB_MAX_SETTINGS] = {NULL}, *names[GM_JOB_MAX_SETTINGS] = {NULL};
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    struct gm_error err;

    while (PyDict_Next(settings, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? text_arg(key, "a setting's name") : NULL;
        const struct gm_job_setting *s = name ? gm_job_setting_find(name) : NULL;
        size_t i;
        if (!name) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "setting names are str");
            return false;
        }
        if (!s) {
            gm_job_set(job, name, NULL, &err); /* the library's "unknown setting" */
            raise_gm(&err, NULL);
            return false;
        }
        i = (size_t)(s - table);
        if (given[i]) {
            PyErr_Format(error_usage, "%U and %U are the same setting '%s'", names[i], key,
                         s->name);
            return false;
        }
        given[i] = value;
        names[i] = key;
    }
    for (size_t i = 0; i < n_set; i++) {
        char buf[128];
        const char *text;
        if (!given[i])
            continue;
        if (!setting_text(&table[i], names[i], given[i], buf, sizeof buf, &text))
            return false;
        if (text && gm_job_set(job, table[i].name, table[i].type == GM_JOB_FLAG ? NULL : text,
                               &err) != GM_OK) {
            raise_gm(&err, NULL);
            return false;
        }
    }
    if (gm_job_check(job, &err) != GM_OK) {
        raise_gm(&err, NULL);
        return false;
    }
    return true;
}

/* MODEL as the CLI takes it (a built-in name, a config.json or folder, weight files), or
 * None; *have says whether 'src' holds something to release. */
static bool job_model(struct gm_job *job, PyObject *model, struct gm_job_source *src, bool *have)
{
    PyObject *bytes = NULL;
    struct gm_error err;
    enum gm_status st;
    PyThreadState *ts;
    *have = false;
    if (model == Py_None)
        return true;
    if (!PyUnicode_FSConverter(model, &bytes))
        return false;
    ts = PyEval_SaveThread();
    {
        char cache[4096];
        bool have_cache = gm_hf_hub_cache(getenv, cache, sizeof cache);
        st = gm_job_source_load(src, PyBytes_AS_STRING(bytes), have_cache ? cache : NULL, &err);
    }
    PyEval_RestoreThread(ts);
    if (st != GM_OK) {
        PyObject *name = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(bytes));
        raise_gm(&err, name);
        Py_XDECREF(name);
        Py_DECREF(bytes);
        return false;
    }
    Py_DECREF(bytes);
    *have = true;
    gm_job_use_source(job, src);
    return true;
}

/* estimate_json(model, settings) -> str: the gpumem.estimate/1 document. */
static PyObject *core_estimate_json(PyObject *self, PyObject *args)
{
    PyObject *model, *settings, *out = NULL;
    struct gm_estimate_report *r = NULL;
    struct gm_job_source src;
    struct gm_job job;
    struct gm_error err;
    struct memout m;
    enum gm_status st;
    PyThreadState *ts;
    bool have = false;
    (void)self;

    if (!PyArg_ParseTuple(args, "OO!", &model, &PyDict_Type, &settings))
        return NULL;
    gm_job_init(&job);
    if (!job_from_settings(&job, settings) || !job_model(&job, model, &src, &have))
        goto out;
    if (!memout_open(&m))
        goto out;
    ts = PyEval_SaveThread();
    st = gm_estimate_report_run(&job, &r, &err);
    if (st == GM_OK)
        st = gm_estimate_report_json(m.f, r, &err);
    PyEval_RestoreThread(ts);
    out = memout_str(&m, st == GM_OK, "the estimate");
    if (st != GM_OK) {
        Py_CLEAR(out);
        PyErr_Clear();
        raise_gm(&err, NULL);
    }
out:
    gm_estimate_report_free(r);
    if (have)
        gm_job_source_release(&src);
    return out;
}

/* The analysis calibrate_json() holds the job against: a Snapshot's own (kept with it), or
 * a file loaded for this call (*snap, *an owned by the caller). */
static const struct gm_analysis *calib_analysis(PyObject *snapshot, struct gm_snapshot **snap,
                                                struct gm_analysis **an)
{
    PyObject *bytes = NULL;
    struct gm_error err;
    enum gm_status st;
    PyThreadState *ts;
    *snap = NULL;
    *an = NULL;
    if (PyObject_TypeCheck(snapshot, &snapshot_type))
        return analysis_of((struct snapshot_obj *)snapshot);
    if (!PyUnicode_FSConverter(snapshot, &bytes))
        return NULL;
    ts = PyEval_SaveThread();
    st = gm_snapshot_load(PyBytes_AS_STRING(bytes), NULL, snap, &err);
    if (st == GM_OK)
        st = gm_analysis_run(*snap, NULL, an, &err);
    PyEval_RestoreThread(ts);
    if (st != GM_OK) {
        raise_input(&err, PyBytes_AS_STRING(bytes));
        gm_snapshot_free(*snap);
        *snap = NULL;
    }
    Py_DECREF(bytes);
    return *an;
}

/* calibrate_json(snapshot, model, settings, predict, device) -> str: the
 * gpumem.calibrate/1 document; device None or a CUDA index (an int, never a bool or a
 * float). */
static PyObject *core_calibrate_json(PyObject *self, PyObject *args)
{
    PyObject *snapshot, *model, *settings, *predict, *dev, *out = NULL;
    struct gm_calibration *c = NULL;
    struct gm_calib_opts o;
    const struct gm_analysis *an;
    struct gm_snapshot *own_snap = NULL;
    struct gm_analysis *own_an = NULL;
    struct gm_job_source src;
    struct gm_job job;
    struct gm_error err;
    struct memout m;
    enum gm_status st;
    PyThreadState *ts;
    bool have = false;
    int device = -1;
    (void)self;

    if (!PyArg_ParseTuple(args, "OOO!O!O", &snapshot, &model, &PyDict_Type, &settings, &PyList_Type,
                          &predict, &dev))
        return NULL;
    if (dev != Py_None) {
        long v;
        if (PyBool_Check(dev) || !PyLong_Check(dev))
            return PyErr_Format(PyExc_TypeError, "device: an int (the CUDA index), not %.80s",
                                Py_TYPE(dev)->tp_name);
        v = PyLong_AsLong(dev);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0 || v > INT32_MAX)
            return PyErr_Format(PyExc_ValueError, "device: a CUDA index (0, 1, ...), not %ld", v);
        device = (int)v;
    }
    gm_calib_job_init(&job);
    gm_calib_opts_init(&o);
    o.device = device;
    if (!job_from_settings(&job, settings))
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(predict); i++) {
        const char *spec = PyUnicode_Check(PyList_GET_ITEM(predict, i))
                               ? text_arg(PyList_GET_ITEM(predict, i), "predict")
                               : NULL;
        if (!spec) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "predict: 'NAME=V1,V2' strings");
            return NULL;
        }
        if (gm_calib_add_points(&o, spec, &err) != GM_OK)
            return raise_gm(&err, NULL);
    }
    if (!job_model(&job, model, &src, &have))
        return NULL;
    if (!(an = calib_analysis(snapshot, &own_snap, &own_an)))
        goto out;
    if (!memout_open(&m))
        goto out;
    ts = PyEval_SaveThread();
    st = gm_calibrate(&job, an, &o, &c, &err);
    if (st == GM_OK)
        st = gm_calibration_json(m.f, c, &err);
    PyEval_RestoreThread(ts);
    out = memout_str(&m, st == GM_OK, "the calibration");
    if (st != GM_OK) {
        Py_CLEAR(out);
        PyErr_Clear();
        raise_gm(&err, NULL);
    }
out:
    gm_calibration_free(c);
    gm_analysis_free(own_an);
    gm_snapshot_free(own_snap);
    if (have)
        gm_job_source_release(&src);
    return out;
}

static PyObject *str_tuple(const char *const *names)
{
    Py_ssize_t n = 0;
    PyObject *t;
    while (names[n])
        n++;
    t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        PyObject *v = PyUnicode_FromString(names[i]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* One setting as a tuple (name, type, argname, help, choices or None, modes, engine or
 * None): gpumem.estimate_settings() names the members. */
static PyObject *setting_tuple(const struct gm_job_setting *s)
{
    static const char *const mode_names[] = {"weights", "train", "infer"};
    const char *modes[4] = {NULL};
    size_t k = 0;
    for (int m = 0; m < GM_EST_MODE__COUNT && m < 3; m++)
        if (s->modes & (1u << m))
            modes[k++] = mode_names[m];
    return Py_BuildValue("(ssszNNN)", s->name, setting_type_name(s->type), s->argname, s->help,
                         s->choices ? str_tuple(s->choices) : new_ref(Py_None), str_tuple(modes),
                         s->engine == GM_ENGINE_NONE
                             ? new_ref(Py_None)
                             : PyUnicode_FromString(gm_engine_name(s->engine)));
}

/* _estimate_settings() -> [tuple]: the settings table, in --help order. */
static PyObject *core_estimate_settings(PyObject *self, PyObject *unused)
{
    size_t n;
    const struct gm_job_setting *table = gm_job_settings(&n);
    PyObject *list = PyList_New((Py_ssize_t)n);
    (void)self;
    (void)unused;
    for (size_t i = 0; list && i < n; i++) {
        PyObject *t = setting_tuple(&table[i]);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* ------------------------------------------------------------------------------------ */
/* Module */

static PyObject *core_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(gm_version());
}

static PyObject *core_event_fields(PyObject *self, PyObject *unused)
{
    size_t n = sizeof(event_fields) / sizeof(event_fields[0]);
    PyObject *list = PyList_New((Py_ssize_t)n);
    (void)self;
    (void)unused;
    for (size_t i = 0; list && i < n; i++) {
        PyObject *t =
            Py_BuildValue("(snss)", event_fields[i].name, (Py_ssize_t)event_fields[i].offset,
                          event_fields[i].numpy, event_fields[i].struct_);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *name_tuple(const char *(*name)(int), int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(name(i));
        if (!s) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static const char *action_name(int i)
{
    return gm_snapshot_action_name((enum gm_snapshot_action)i);
}

static const char *category_name(int i)
{
    return gm_category_name((enum gm_category)i);
}

static PyMethodDef core_methods[] = {
    {"version", core_version, METH_NOARGS, "the version of the gpumem library"},
    {"event_fields", core_event_fields, METH_NOARGS,
     "event_fields() -> [(name, offset, numpy type, struct code)]: one event record"},
    {"estimate_json", core_estimate_json, METH_VARARGS,
     "estimate_json(model, settings) -> str: the gpumem.estimate/1 document of the job"},
    {"calibrate_json", core_calibrate_json, METH_VARARGS,
     "calibrate_json(snapshot, model, settings, predict, device) -> str: gpumem.calibrate/1"},
    {"_estimate_settings", core_estimate_settings, METH_NOARGS,
     "_estimate_settings() -> [(name, type, argname, help, choices, modes, engine)]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gpumem._core",
    .m_doc = "The C extension of gpumem: Snapshot and Devices over the gpumem C library.",
    .m_size = -1,
    .m_methods = core_methods,
};

/* module.name = o, keeping the caller's reference (PyModule_AddObjectRef, which Python 3.9
 * lacks); -1 with an exception on failure. */
static int add_ref(PyObject *m, const char *name, PyObject *o)
{
    Py_INCREF(o);
    if (PyModule_AddObject(m, name, o) < 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}

static bool add_exception(PyObject *m, const char *name, PyObject *bases, const char *doc,
                          PyObject **out)
{
    char full[64];
    snprintf(full, sizeof(full), "gpumem.%s", name);
    *out = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    return *out && add_ref(m, name, *out) == 0;
}

PyMODINIT_FUNC PyInit__core(void);
PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m, *bases;
    if (PyType_Ready(&snapshot_type) < 0 || PyType_Ready(&devices_type) < 0)
        return NULL;
    m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    if (!add_exception(m, "Error", NULL, "An error reported by the gpumem library.", &error_base))
        goto out_fail;
    bases = PyTuple_Pack(2, error_base, PyExc_ValueError);
    if (!bases || !add_exception(m, "FormatError", bases,
                                 "Malformed or unsupported input data (a damaged snapshot).",
                                 &error_format)) {
        Py_XDECREF(bases);
        goto out_fail;
    }
    Py_DECREF(bases);
    bases = PyTuple_Pack(2, error_base, PyExc_ValueError);
    if (!bases ||
        !add_exception(m, "UsageError", bases,
                       "A bad setting or argument (the CLI's exit status 64).", &error_usage)) {
        Py_XDECREF(bases);
        goto out_fail;
    }
    Py_DECREF(bases);
    if (!add_exception(m, "NoDeviceError", error_base,
                       "No usable GPU or driver (the CLI's exit status 2).", &error_no_device) ||
        add_ref(m, "Snapshot", (PyObject *)&snapshot_type) < 0 ||
        add_ref(m, "Devices", (PyObject *)&devices_type) < 0 ||
        PyModule_AddObject(m, "ACTIONS", name_tuple(action_name, GM_ACTION_COUNT)) < 0 ||
        PyModule_AddObject(m, "CATEGORIES", name_tuple(category_name, GM_CATEGORY_COUNT)) < 0 ||
        PyModule_AddIntConstant(m, "EVENT_HAS_TIME", GM_EVENT_HAS_TIME) < 0 ||
        PyModule_AddIntConstant(m, "EVENT_HAS_ADDR", GM_EVENT_HAS_ADDR) < 0 ||
        PyModule_AddIntConstant(m, "EVENT_HAS_FRAMES", GM_EVENT_HAS_FRAMES) < 0 ||
        PyModule_AddIntConstant(m, "EVENT_SIZE", (long)sizeof(struct py_event)) < 0 ||
        PyModule_AddStringConstant(m, "SERIES_ENV", GM_SWEEP_SERIES_ENV) < 0)
        goto out_fail;
    return m;
out_fail:
    Py_DECREF(m);
    return NULL;
}
