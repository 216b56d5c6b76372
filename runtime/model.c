/* model.c: open an artifact tar, load its host shared library and run the AOT entry.
 *
 * Requires from the artifact (see daemon/compile/package.c): metadata.json with "model",
 * "executor.entry", "inputs"/"outputs" ({name, c_name, dtype, shape, bytes}) and
 * "memory.workspace_bytes"/"memory.workspace_alignment"; and "files.shared_library" naming the
 * .so inside the tar. The entry's C signature is
 *   int32_t tth_<model>_run(const struct inputs *, struct outputs *, void *workspace)
 * where both structs are `void *` fields in metadata order, so an array of pointers is passed.
 * A module whose meta has "bind_constants" (docs/artifact.md, "Constants bound at run time") gets
 * its constants from the artifact's parameters file once the library is loaded; a module's
 * "status_text_symbol" names the statuses its code returns in the run's error message.
 */
#include "tthrt.h"
#include "tthrt_tar.h"
#include "tth_params.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *tthrt__dtype_name(tth_dtype t);
size_t tthrt__dtype_size(tth_dtype t);

typedef int32_t (*entry_fn)(const void *inputs, void *outputs, void *workspace);
typedef int32_t (*bind_fn)(const void *const *data, const size_t *bytes, size_t n);
typedef const char *(*status_text_fn)(int32_t status);

struct tthrt_model {
    json_t *meta;
    char *name;
    void *dl;
    entry_fn run;
    tthrt_tensor_info *in, *out;
    size_t nin, nout;
    void **in_ptrs;          /* the inputs struct: one pointer per input (>= 1 entries) */
    void **out_ptrs;         /* the outputs struct */
    unsigned char *bound;    /* per input: bound yet */
    void *workspace;
    size_t workspace_size;
    const unsigned char *params; /* the parameters file, when a module binds constants (64-aligned) */
    size_t params_len;
    unsigned char *params_own;   /* params when copied (else a view into map) */
    void *map;                   /* the artifact file's mapping, kept while params point into it */
    size_t map_len;
    status_text_fn *texts;   /* modules' status_text_symbol functions */
    size_t ntexts;
    uint64_t *prof_ns, *prof_calls; /* a profiling artifact's counters (docs/profiling.md), or NULL */
    size_t nprof;
};

static tth_dtype dtype_parse(const char *s)
{
    for (int t = 1; t < 32; t++) {
        const char *n = tthrt__dtype_name((tth_dtype)t);
        if (strcmp(n, "invalid") == 0)
            continue;
        if (s && strcmp(n, s) == 0)
            return (tth_dtype)t;
    }
    return TTH_DTYPE_INVALID;
}

/* size bytes (at least one) at a multiple of align (at least 64); cleared when `clear`, up to
 * the end of the last aligned block */
static void *aligned_buf(size_t align, size_t size, int clear)
{
    if (align < 64)
        align = 64;
    size_t n = size ? (size + align - 1) / align * align : align;
    void *p = aligned_alloc(align, n);
    if (p && clear)
        memset(p, 0, n);
    return p;
}

static void *aligned_zalloc(size_t align, size_t size)
{
    return aligned_buf(align, size, 1);
}

static int parse_infos(const json_t *arr, const char *what, tthrt_tensor_info **out, size_t *n,
                       tth_diag *diag)
{
    if (!json_is_array(arr))
        return tth_diag_set(diag, TTH_EPARSE, "metadata.json", "\"%s\" is missing or not an array",
                            what);
    *n = json_array_size(arr);
    *out = calloc(*n ? *n : 1, sizeof **out);
    if (!*out)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < *n; i++) {
        const json_t *e = json_array_get(arr, i);
        tthrt_tensor_info *t = &(*out)[i];
        t->name = json_string_value(json_object_get(e, "name"));
        t->c_name = json_string_value(json_object_get(e, "c_name"));
        t->dtype = dtype_parse(json_string_value(json_object_get(e, "dtype")));
        const json_t *shape = json_object_get(e, "shape");
        if (!t->name || !t->c_name || t->dtype == TTH_DTYPE_INVALID || !json_is_array(shape) ||
            json_array_size(shape) > TTH_MAX_RANK)
            return tth_diag_set(diag, TTH_EPARSE, "metadata.json", "%s[%zu] is malformed "
                                "(needs name, c_name, dtype, shape)", what, i);
        t->rank = (int32_t)json_array_size(shape);
        size_t numel = 1;
        for (int32_t d = 0; d < t->rank; d++) {
            t->shape[d] = json_integer_value(json_array_get(shape, (size_t)d));
            if (t->shape[d] < 0)
                return tth_diag_set(diag, TTH_EPARSE, "metadata.json", "%s '%s' has a negative "
                                    "dimension", what, t->name);
            numel *= (size_t)t->shape[d];
        }
        t->nbytes = numel * tthrt__dtype_size(t->dtype);
    }
    return 0;
}

/* Read the tar: metadata.json and the shared library's bytes. */
/* Does a module of the artifact bind constants at run time? */
static int needs_params(const json_t *meta)
{
    size_t i;
    const json_t *mod;
    json_array_foreach(json_object_get(meta, "modules"), i, mod)
        if (json_object_get(json_object_get(mod, "meta"), "bind_constants"))
            return 1;
    return 0;
}

/* The artifact's entries the runtime needs, as views into the tar (tar.c): metadata.json
 * (parsed into *meta), the shared library and, when a module binds constants, the parameters
 * file. */
static int read_tar(const void *tar, size_t len, json_t **meta, const unsigned char **so, size_t *so_len,
                    const unsigned char **params, size_t *params_len, tth_diag *diag)
{
    const char *so_path = NULL, *why = NULL;
    tthrt__tar_file f, so_file;
    size_t off = 0;
    int r, have_meta = 0;
    while ((r = tthrt__tar_next(tar, len, &off, &f, &why)) == 1) {
        const char *path = strncmp(f.path, "./", 2) == 0 ? f.path + 2 : f.path;
        size_t pl = strlen(path);
        if (strcmp(path, "metadata.json") == 0) {
            json_error_t je;
            json_decref(*meta);
            *meta = json_loadb((const char *)f.data, f.size, 0, &je);
            if (!*meta)
                return tth_diag_set(diag, TTH_EPARSE, "metadata.json", "invalid JSON at line %d: %s", je.line, je.text);
            have_meta = 1;
        } else if (strncmp(path, "lib/", 4) == 0 && pl > 3 && strcmp(path + pl - 3, ".so") == 0) {
            so_file = f;
            so_path = so_file.path + (path - f.path);
            *so = f.data;
            *so_len = f.size;
        } else if (strncmp(path, "parameters/", 11) == 0 && pl > 7 && strcmp(path + pl - 7, ".params") == 0) {
            *params = f.data;
            *params_len = f.size;
        }
    }
    if (r < 0)
        return tth_diag_set(diag, TTH_EPARSE, NULL, "not an artifact tar: %s", why);
    if (!have_meta)
        return tth_diag_set(diag, TTH_EPARSE, NULL, "the artifact has no metadata.json");
    if (!needs_params(*meta)) {
        *params = NULL;
        *params_len = 0;
    }
    const char *want = json_string_value(json_object_get(json_object_get(*meta, "files"), "shared_library"));
    if (!want || !*so) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, "metadata.json", "the artifact has no host shared library, so it "
                     "cannot run here");
        const char *mcpu = json_string_value(json_object_get(json_object_get(*meta, "target"), "mcpu"));
        if (mcpu && strncmp(mcpu, "cortex-m", 8) == 0)
            tth_diag_hint(diag, "it is for a %s: run it on an emulated board with scripts/run-cortexm ARTIFACT "
                          "--board mps3-an547 NAME=FILE.npy --out DIR (--profile for its calls; docs/cortexm.md)",
                          mcpu);
        else
            tth_diag_hint(diag, "compile for a target this machine runs (e.g. --target c) with the build_shared "
                          "option on");
        return TTH_EUNSUPPORTED;
    }
    if (strcmp(want, so_path) != 0)
        return tth_diag_set(diag, TTH_EPARSE, "metadata.json", "files.shared_library is '%s' but the tar holds '%s'",
                            want, so_path);
    return 0;
}

/* Write the .so to a private temporary directory, dlopen it, and remove the file at once (the
 * mapping stays valid). */
static int load_library(const unsigned char *so, size_t len, void **dl, tth_diag *diag)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/tthrt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return tth_diag_set(diag, TTH_EIO, dir, "cannot create a temporary directory: %s",
                            strerror(errno));
    snprintf(path, sizeof path, "%s/model.so", dir);
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (fd < 0) {
        rc = tth_diag_set(diag, TTH_EIO, path, "cannot create '%s': %s", path, strerror(errno));
        rmdir(dir);
        return rc;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, so + off, len - off);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            rc = tth_diag_set(diag, TTH_EIO, path, "cannot write '%s': %s", path, strerror(errno));
            break;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 && !rc)
        rc = tth_diag_set(diag, TTH_EIO, path, "cannot write '%s'", path);
    if (!rc) {
        *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!*dl)
            rc = tth_diag_set(diag, TTH_EIO, "lib/*.so", "cannot load the model's shared library: %s",
                              dlerror());
    }
    unlink(path);
    rmdir(dir);
    return rc;
}

/* The parameters file's entries (*out malloc'd), read by the one reader of the format
 * (tth_params.h), which checks every length against the file's size. */
static int parse_params(const unsigned char *p, size_t len, tth_params_entry **out, size_t *n, tth_diag *diag)
{
    *out = NULL;
    *n = 0;
    tth_params_reader r;
    int st = tth_params_open(&r, p, len);
    if (st == TTH_PARAMS_E_MAGIC || st == TTH_PARAMS_E_VERSION || len < TTH_PARAMS_HEADER)
        return tth_diag_set(diag, TTH_EPARSE, "parameters", "the artifact's parameters file is not a "
                            "version 1 TTHPARAM file");
    if (st) /* past a good header, the count is all that can be wrong */
        return tth_diag_set(diag, TTH_EPARSE, "parameters", "the parameters file claims %u entries in %zu "
                            "bytes", r.count, len);
    tth_params_entry *e = calloc(r.count ? r.count : 1, sizeof *e);
    if (!e)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    size_t i = 0;
    /* st stays 1 for an entry of more dimensions than the runtime's tensors have */
    while ((st = tth_params_next(&r, &e[i])) > 0 && e[i].rank <= TTH_MAX_RANK)
        i++;
    if (st) {
        free(e);
        return tth_diag_set(diag, TTH_EPARSE, "parameters", "the artifact's parameters file is truncated or "
                            "malformed");
    }
    *out = e;
    *n = i;
    return 0;
}

/* Hand each module that binds constants its constants from the parameters file (docs/artifact.md,
 * "Constants bound at run time"); note each module's status text function. */
static int bind_modules(tthrt_model *m, tth_diag *diag)
{
    const json_t *mods = json_object_get(m->meta, "modules");
    tth_params_entry *pe = NULL;
    size_t npe = 0;
    int rc = 0;
    m->texts = calloc(json_array_size(mods) + 1, sizeof *m->texts);
    if (!m->texts)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    size_t i;
    const json_t *mod;
    json_array_foreach(mods, i, mod) {
        const json_t *meta = json_object_get(mod, "meta");
        const char *ts = json_string_value(json_object_get(meta, "status_text_symbol"));
        status_text_fn tf = NULL;
        if (ts)
            *(void **)&tf = dlsym(m->dl, ts);
        int seen = 0;
        for (size_t k = 0; k < m->ntexts; k++)
            seen |= m->texts[k] == tf;
        if (tf && !seen)
            m->texts[m->ntexts++] = tf;
    }
    json_array_foreach(mods, i, mod) {
        const json_t *bc = json_object_get(json_object_get(mod, "meta"), "bind_constants");
        if (!bc)
            continue;
        const char *kind = json_string_value(json_object_get(mod, "kind"));
        const char *sym = json_string_value(json_object_get(bc, "symbol"));
        json_int_t count = json_integer_value(json_object_get(bc, "count"));
        const json_t *list = json_object_get(bc, "constants");
        if (!sym || count < 0 || count > (1 << 20) || !json_is_array(list)) {
            rc = tth_diag_set(diag, TTH_EPARSE, "metadata.json", "module %zu's bind_constants is malformed "
                              "(needs symbol, count, constants)", i);
            break;
        }
        if (!pe && !m->params) {
            rc = tth_diag_set(diag, TTH_EPARSE, "metadata.json", "module %zu (%s) needs constants but the "
                              "artifact has no parameters file", i, kind ? kind : "?");
            break;
        }
        if (!pe && (rc = parse_params(m->params, m->params_len, &pe, &npe, diag)))
            break;
        const void **data = calloc((size_t)count + 1, sizeof *data);
        size_t *bytes = calloc((size_t)count + 1, sizeof *bytes);
        if (!data || !bytes) {
            free(data);
            free(bytes);
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            break;
        }
        size_t k;
        const json_t *c;
        json_array_foreach(list, k, c) {
            json_int_t idx = json_integer_value(json_object_get(c, "index"));
            const char *name = json_string_value(json_object_get(c, "parameter"));
            json_int_t want = json_integer_value(json_object_get(c, "bytes"));
            const tth_params_entry *hit = NULL;
            for (size_t q = 0; name && q < npe && !hit; q++)
                if (pe[q].name_len == strlen(name) && memcmp(pe[q].name, name, pe[q].name_len) == 0)
                    hit = &pe[q];
            if (idx < 0 || idx >= count || !name) {
                rc = tth_diag_set(diag, TTH_EPARSE, "metadata.json", "module %zu: constant %zu of bind_constants "
                                  "is malformed", i, k);
            } else if (!hit || (json_int_t)hit->bytes != want) {
                rc = tth_diag_set(diag, TTH_EPARSE, "parameters", "module %zu (%s) needs parameter '%s' of %lld "
                                  "bytes; the parameters file %s", i, kind ? kind : "?", name, (long long)want,
                                  hit ? "has another size" : "lacks it");
            } else {
                data[idx] = hit->data;
                bytes[idx] = (size_t)hit->bytes;
            }
            if (rc)
                break;
        }
        bind_fn fn = NULL;
        if (!rc) {
            *(void **)&fn = dlsym(m->dl, sym);
            if (!fn)
                rc = tth_diag_set(diag, TTH_ENOENT, sym, "the model's library has no symbol '%s' to bind "
                                  "module %zu's constants", sym, i);
        }
        if (!rc) {
            int32_t st = fn(data, bytes, (size_t)count);
            const char *text = NULL;
            for (size_t q = 0; q < m->ntexts && !text; q++)
                text = m->texts[q](st);
            if (st)
                rc = tth_diag_set(diag, TTH_EPLUGIN, sym, "binding the constants of module %zu (%s) failed with "
                                  "status %d%s%s", i, kind ? kind : "?", (int)st, text ? ": " : "",
                                  text ? text : "");
        }
        free(data);
        free(bytes);
        if (rc)
            break;
    }
    free(pe);
    return rc;
}

/* map: the artifact file's mapping when tar is it (tthrt_model_open), kept by the model while its
 * parameters are read in place; NULL when tar is the caller's memory, which the parameters are
 * copied out of. */
static int open_artifact(const void *tar, size_t len, void *map, tthrt_model **out, tth_diag *diag)
{
    *out = NULL;
    tthrt_model *m = calloc(1, sizeof *m);
    if (!m) {
        if (map)
            munmap(map, len);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    m->map = map;
    m->map_len = len;
    const unsigned char *so = NULL;
    size_t so_len = 0;
    int rc = read_tar(tar, len, &m->meta, &so, &so_len, &m->params, &m->params_len, diag);
    if (rc)
        goto fail;
    /* the parameters in place when they lie in the mapping at the alignment they need (a tar
     * puts every file at a multiple of 512 bytes); else a copy */
    if (m->params && (!map || ((uintptr_t)m->params & 63) != 0)) {
        m->params_own = aligned_buf(64, m->params_len + 1, 0);
        if (!m->params_own) {
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            goto fail;
        }
        memcpy(m->params_own, m->params, m->params_len);
        m->params = m->params_own;
    }

    const char *name = json_string_value(json_object_get(m->meta, "model"));
    const char *entry = json_string_value(json_object_get(json_object_get(m->meta, "executor"),
                                                          "entry"));
    const json_t *mem = json_object_get(m->meta, "memory");
    if (!name || !entry || !json_is_object(mem)) {
        rc = tth_diag_set(diag, TTH_EPARSE, "metadata.json", "needs \"model\", \"executor.entry\" "
                          "and \"memory\"");
        goto fail;
    }
    m->name = strdup(name);
    rc = parse_infos(json_object_get(m->meta, "inputs"), "inputs", &m->in, &m->nin, diag);
    if (!rc)
        rc = parse_infos(json_object_get(m->meta, "outputs"), "outputs", &m->out, &m->nout, diag);
    if (rc)
        goto fail;
    json_int_t wsb = json_integer_value(json_object_get(mem, "workspace_bytes"));
    json_int_t wsa = json_integer_value(json_object_get(mem, "workspace_alignment"));
    if (wsb < 0 || wsa < 0 || (wsa & (wsa - 1)) != 0) {
        rc = tth_diag_set(diag, TTH_EPARSE, "metadata.json", "memory.workspace_bytes or "
                          "workspace_alignment is invalid");
        goto fail;
    }
    m->workspace_size = (size_t)wsb;
    m->workspace = aligned_zalloc((size_t)(wsa ? wsa : 16), m->workspace_size);
    m->in_ptrs = calloc(m->nin ? m->nin : 1, sizeof(void *));
    m->out_ptrs = calloc(m->nout ? m->nout : 1, sizeof(void *));
    m->bound = calloc(m->nin ? m->nin : 1, 1);
    if (!m->name || !m->workspace || !m->in_ptrs || !m->out_ptrs || !m->bound) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < m->nin; i++)
        if (!(m->in_ptrs[i] = aligned_zalloc(64, m->in[i].nbytes))) {
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            goto fail;
        }
    for (size_t i = 0; i < m->nout; i++)
        if (!(m->out_ptrs[i] = aligned_zalloc(64, m->out[i].nbytes))) {
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            goto fail;
        }
    rc = load_library(so, so_len, &m->dl, diag);
    if (rc)
        goto fail;
    *(void **)&m->run = dlsym(m->dl, entry);
    if (!m->run) {
        rc = tth_diag_set(diag, TTH_ENOENT, entry, "the model's library has no entry symbol '%s'",
                          entry);
        goto fail;
    }
    if ((rc = bind_modules(m, diag)))
        goto fail;
    /* a profiling artifact: its timing hooks' counters, one per call of the entry */
    const json_t *prof = json_object_get(m->meta, "profile");
    if (prof) {
        const char *ns = json_string_value(json_object_get(prof, "ns_symbol"));
        const char *cs = json_string_value(json_object_get(prof, "calls_symbol"));
        m->prof_ns = ns ? dlsym(m->dl, ns) : NULL;
        m->prof_calls = cs ? dlsym(m->dl, cs) : NULL;
        m->nprof = json_array_size(json_object_get(prof, "calls"));
        if (!m->prof_ns || !m->prof_calls) {
            rc = tth_diag_set(diag, TTH_ENOENT, entry, "the profiling artifact's library has no timing counters "
                              "'%s' and '%s'", ns ? ns : "?", cs ? cs : "?");
            goto fail;
        }
    }
    if (m->map && (!m->params || m->params == m->params_own)) {
        munmap(m->map, m->map_len); /* loaded, and the parameters do not point into it */
        m->map = NULL;
    }
    *out = m;
    return 0;
fail:
    tthrt_model_close(m);
    return rc;
}

int tthrt_model_open_memory(const void *tar, size_t len, tthrt_model **out, tth_diag *diag)
{
    return open_artifact(tar, len, NULL, out, diag);
}

int tthrt_model_open(const char *path, tthrt_model **out, tth_diag *diag)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tth_diag_set(diag, errno == ENOENT ? TTH_ENOENT : TTH_EIO, path,
                            "cannot open artifact '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fclose(f);
        return tth_diag_set(diag, TTH_EIO, path, "cannot stat '%s'", path);
    }
    size_t len = (size_t)st.st_size;
    /* a regular file is mapped, not copied: the model keeps the mapping and reads its parameters
     * in place (open_artifact) */
    void *map = len > 0 && S_ISREG(st.st_mode) ? mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0) : MAP_FAILED;
    if (map != MAP_FAILED) {
        fclose(f);
        int rc = open_artifact(map, len, map, out, diag);
        if (rc)
            tth_diag_prefix(diag, "opening '%s'", path);
        return rc;
    }
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(f);
        return tth_diag_set(diag, TTH_ENOMEM, path, "out of memory reading '%s'", path);
    }
    size_t got = fread(buf, 1, len, f);
    fclose(f);
    if (got != len) {
        free(buf);
        return tth_diag_set(diag, TTH_EIO, path, "cannot read '%s'", path);
    }
    int rc = tthrt_model_open_memory(buf, len, out, diag);
    free(buf);
    if (rc)
        tth_diag_prefix(diag, "opening '%s'", path);
    return rc;
}

void tthrt_model_close(tthrt_model *m)
{
    if (!m)
        return;
    if (m->dl)
        dlclose(m->dl);
    for (size_t i = 0; m->in_ptrs && i < m->nin; i++)
        free(m->in_ptrs[i]);
    for (size_t i = 0; m->out_ptrs && i < m->nout; i++)
        free(m->out_ptrs[i]);
    free(m->in_ptrs);
    free(m->out_ptrs);
    free(m->bound);
    free(m->in);
    free(m->out);
    free(m->workspace);
    free(m->name);
    free(m->params_own);
    if (m->map)
        munmap(m->map, m->map_len);
    free(m->texts);
    json_decref(m->meta);
    free(m);
}

const char *tthrt_model_name(const tthrt_model *m) { return m->name; }
const json_t *tthrt_model_metadata(const tthrt_model *m) { return m->meta; }
size_t tthrt_model_workspace_size(const tthrt_model *m) { return m->workspace_size; }
size_t tthrt_model_input_count(const tthrt_model *m) { return m->nin; }
size_t tthrt_model_output_count(const tthrt_model *m) { return m->nout; }

const tthrt_tensor_info *tthrt_model_input(const tthrt_model *m, size_t i)
{
    return i < m->nin ? &m->in[i] : NULL;
}

const tthrt_tensor_info *tthrt_model_output(const tthrt_model *m, size_t i)
{
    return i < m->nout ? &m->out[i] : NULL;
}

static int find_info(const tthrt_tensor_info *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return (int)i;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].c_name, name) == 0)
            return (int)i;
    return -1;
}

int tthrt_model_find_input(const tthrt_model *m, const char *name)
{
    return find_info(m->in, m->nin, name);
}

int tthrt_model_find_output(const tthrt_model *m, const char *name)
{
    return find_info(m->out, m->nout, name);
}

static void format_type(tth_dtype dt, int32_t rank, const int64_t *shape, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s[", tthrt__dtype_name(dt));
    for (int32_t i = 0; i < rank && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "]");
}

static void list_names(const tthrt_tensor_info *v, size_t n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s'%s'", i ? ", " : "", v[i].name);
}

int tthrt_model_bind(tthrt_model *m, const char *name, const tthrt_array *a, tth_diag *diag)
{
    int i = tthrt_model_find_input(m, name);
    if (i < 0) {
        char names[200];
        list_names(m->in, m->nin, names, sizeof names);
        tth_diag_set(diag, TTH_EUNKNOWN, name, "model '%s' has no input '%s'", m->name, name);
        tth_diag_hint(diag, "its inputs are %s", m->nin ? names : "(none)");
        return TTH_EUNKNOWN;
    }
    const tthrt_tensor_info *t = &m->in[i];
    /* a bfloat16 input also takes uint16 holding its bits: NumPy has no bfloat16, so that is how
     * .npy files and ONNX's own test data carry it (docs/tthctl.md, "run") */
    tth_dtype given = a->dtype == TTH_U16 && t->dtype == TTH_BF16 ? TTH_BF16 : a->dtype;
    int same = given == t->dtype && a->rank == t->rank;
    for (int32_t d = 0; same && d < t->rank; d++)
        same = a->shape[d] == t->shape[d];
    /* a scalar input also takes a one-element array */
    if (!same && t->rank == 0 && given == t->dtype && a->nbytes == t->nbytes)
        same = 1;
    if (!same || a->nbytes != t->nbytes) {
        char want[160], got[160];
        format_type(t->dtype, t->rank, t->shape, want, sizeof want);
        format_type(a->dtype, a->rank, a->shape, got, sizeof got);
        return tth_diag_set(diag, TTH_ETYPE, name, "input '%s' expects %s, given %s", t->name,
                            want, got);
    }
    memcpy(m->in_ptrs[i], a->data, t->nbytes);
    m->bound[i] = 1;
    return 0;
}

int tthrt_model_bind_file(tthrt_model *m, const char *name, const char *path, tth_diag *diag)
{
    tthrt_array a;
    int rc = tthrt_array_load(path, &a, diag);
    if (rc)
        return rc;
    rc = tthrt_model_bind(m, name, &a, diag);
    tthrt_array_clear(&a);
    if (rc)
        tth_diag_prefix(diag, "binding '%s'", path);
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int tthrt_model_run(tthrt_model *m, int repeat, tthrt_timing *timing, tth_diag *diag)
{
    for (size_t i = 0; i < m->nin; i++)
        if (!m->bound[i]) {
            tth_diag_set(diag, TTH_EINVAL, m->in[i].name, "input '%s' of model '%s' is not bound",
                         m->in[i].name, m->name);
            tth_diag_hint(diag, "give it with --input %s=FILE.npy", m->in[i].name);
            return TTH_EINVAL;
        }
    if (repeat < 1)
        repeat = 1;
    double *t = malloc((size_t)repeat * sizeof *t);
    if (!t)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    double sum = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = now_ms();
        int32_t status = m->run(m->in_ptrs, m->out_ptrs, m->workspace);
        t[r] = now_ms() - t0;
        sum += t[r];
        if (status != 0) {
            free(t);
            const char *text = NULL;
            for (size_t k = 0; k < m->ntexts && !text; k++)
                text = m->texts[k](status);
            return tth_diag_set(diag, TTH_EPLUGIN, m->name, "model '%s' returned status %d%s%s",
                                m->name, (int)status, text ? ": " : "", text ? text : "");
        }
    }
    if (timing) {
        qsort(t, (size_t)repeat, sizeof *t, cmp_double);
        timing->runs = repeat;
        timing->min_ms = t[0];
        timing->median_ms = repeat % 2 ? t[repeat / 2] : (t[repeat / 2 - 1] + t[repeat / 2]) / 2;
        timing->mean_ms = sum / repeat;
    }
    free(t);
    return 0;
}

size_t tthrt_model_profile_calls(const tthrt_model *m)
{
    return m->prof_ns ? m->nprof : 0;
}

size_t tthrt_model_profile_read(const tthrt_model *m, uint64_t *ns, uint64_t *calls, size_t n)
{
    size_t k = m->prof_ns ? (n < m->nprof ? n : m->nprof) : 0;
    for (size_t i = 0; i < k; i++) {
        ns[i] = m->prof_ns[i];
        if (calls)
            calls[i] = m->prof_calls[i];
    }
    return k;
}

void tthrt_model_profile_reset(tthrt_model *m)
{
    if (!m->prof_ns)
        return;
    memset(m->prof_ns, 0, m->nprof * sizeof *m->prof_ns);
    memset(m->prof_calls, 0, m->nprof * sizeof *m->prof_calls);
}

int tthrt_model_output_array(const tthrt_model *m, size_t i, tthrt_array *view, tth_diag *diag)
{
    memset(view, 0, sizeof *view);
    if (i >= m->nout)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "model '%s' has %zu outputs; no output %zu",
                            m->name, m->nout, i);
    const tthrt_tensor_info *t = &m->out[i];
    view->dtype = t->dtype;
    view->rank = t->rank;
    memcpy(view->shape, t->shape, sizeof view->shape);
    view->data = m->out_ptrs[i];
    view->nbytes = t->nbytes;
    view->name = (char *)t->name; /* borrowed: never pass a view to tthrt_array_clear */
    return 0;
}

int tthrt_model_write_outputs(const tthrt_model *m, const char *dir, json_t **paths, tth_diag *diag)
{
    if (paths)
        *paths = NULL;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tth_diag_set(diag, TTH_EIO, dir, "cannot create directory '%s': %s", dir,
                            strerror(errno));
    json_t *list = paths ? json_array() : NULL;
    for (size_t i = 0; i < m->nout; i++) {
        char file[512], path[2048];
        snprintf(file, sizeof file, "%s", m->out[i].name);
        for (char *p = file; *p; p++)
            if (*p == '/')
                *p = '_';
        if (!file[0] || strcmp(file, ".") == 0 || strcmp(file, "..") == 0)
            snprintf(file, sizeof file, "output_%zu", i);
        /* bfloat16 has no .npy dtype: a TensorProto instead (docs/tthctl.md, "run") */
        int pb = m->out[i].dtype == TTH_BF16;
        snprintf(path, sizeof path, "%s/%s.%s", dir, file, pb ? "pb" : "npy");
        tthrt_array view;
        tthrt_model_output_array(m, i, &view, diag);
        int rc = pb ? tthrt_pb_write(path, &view, diag) : tthrt_npy_write(path, &view, diag);
        if (rc) {
            json_decref(list);
            return rc;
        }
        if (list)
            json_array_append_new(list, json_string(path));
    }
    if (paths)
        *paths = list;
    return 0;
}
