/* artifact.c: the containers hooks fill: runtime modules (named files + link metadata) and
 * constant maps (named tensors). Every add copies (files) or takes a reference (tensors). */
#include "tth/artifact.h"

#include "ir_private.h"

#include <stdlib.h>
#include <string.h>

struct tth_runtime_module {
    char *kind;
    tth_module_file *files;   /* name and data malloc'd */
    size_t n, cap;
    json_t *meta;             /* object, or NULL */
};

struct tth_const_map {
    char **names;
    tth_tensor **tensors;
    size_t n, cap;
};

tth_runtime_module *tth_runtime_module_new(const char *target_kind)
{
    tth_runtime_module *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->kind = strdup(target_kind ? target_kind : "");
    if (!m->kind) {
        free(m);
        return NULL;
    }
    return m;
}

void tth_runtime_module_free(tth_runtime_module *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free((char *)m->files[i].name);
        free((uint8_t *)m->files[i].data);
    }
    free(m->files);
    json_decref(m->meta);
    free(m->kind);
    free(m);
}

const char *tth_runtime_module_kind(const tth_runtime_module *m)
{
    return m ? m->kind : NULL;
}

/* A plain file name: no directories, not "." or "..", no control characters. */
static int plain_file_name(const char *name)
{
    if (!name || !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20)
            return 0;
    return 1;
}

int tth_runtime_module_add_file(tth_runtime_module *m, const char *name, tth_file_kind kind, const void *data,
                                size_t len, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no runtime module");
    if (!plain_file_name(name))
        return tth_diag_set(diag, TTH_EINVAL, name, "'%s' is not a plain file name (no directories)",
                            name ? name : "(null)");
    if (kind < TTH_FILE_C_SOURCE || kind > TTH_FILE_LINK_OBJECT)
        return tth_diag_set(diag, TTH_EINVAL, name, "unknown file kind %d for '%s'", (int)kind, name);
    if (len && !data)
        return tth_diag_set(diag, TTH_EINVAL, name, "no data for '%s'", name);
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->files[i].name, name) == 0)
            return tth_diag_set(diag, TTH_EDUPLICATE, name, "the runtime module already has a file '%s'", name);
    tth_module_file *nf = tth__grow(m->files, m->n, &m->cap, sizeof *nf);
    if (!nf)
        return tth_diag_set(diag, TTH_ENOMEM, name, "out of memory");
    m->files = nf;
    char *n = strdup(name);
    uint8_t *d = malloc(len ? len : 1);
    if (!n || !d) {
        free(n);
        free(d);
        return tth_diag_set(diag, TTH_ENOMEM, name, "out of memory");
    }
    if (len)
        memcpy(d, data, len);
    m->files[m->n++] = (tth_module_file){.name = n, .kind = kind, .data = d, .len = len};
    return 0;
}

size_t tth_runtime_module_count(const tth_runtime_module *m)
{
    return m ? m->n : 0;
}

const tth_module_file *tth_runtime_module_file(const tth_runtime_module *m, size_t i)
{
    return m && i < m->n ? &m->files[i] : NULL;
}

int tth_runtime_module_set_meta(tth_runtime_module *m, const json_t *meta, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no runtime module");
    if (!json_is_object(meta))
        return tth_diag_set(diag, TTH_EINVAL, NULL, "runtime module metadata must be a JSON object");
    json_t *copy = json_deep_copy(meta);
    if (!copy)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    json_decref(m->meta);
    m->meta = copy;
    return 0;
}

const json_t *tth_runtime_module_meta(const tth_runtime_module *m)
{
    return m ? m->meta : NULL;
}

tth_const_map *tth_const_map_new(void)
{
    return calloc(1, sizeof(tth_const_map));
}

void tth_const_map_free(tth_const_map *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->names[i]);
        tth_tensor_unref(m->tensors[i]);
    }
    free(m->names);
    free(m->tensors);
    free(m);
}

int tth_const_map_add(tth_const_map *m, const char *name, tth_tensor *t, tth_diag *diag)
{
    if (!m || !t)
        return tth_diag_set(diag, TTH_EINVAL, name, "no constant map or tensor");
    if (!name || !*name)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "a constant needs a name");
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->names[i], name) == 0)
            return tth_diag_set(diag, TTH_EDUPLICATE, name, "the constant map already has '%s'", name);
    /* names and tensors grow together: m->cap is updated by the second */
    size_t names_cap = m->cap;
    char **nn = tth__grow(m->names, m->n, &names_cap, sizeof *nn);
    if (nn)
        m->names = nn;
    tth_tensor **nt = nn ? tth__grow(m->tensors, m->n, &m->cap, sizeof *nt) : NULL;
    if (!nt)
        return tth_diag_set(diag, TTH_ENOMEM, name, "out of memory");
    m->tensors = nt;
    char *n = strdup(name);
    if (!n)
        return tth_diag_set(diag, TTH_ENOMEM, name, "out of memory");
    m->names[m->n] = n;
    m->tensors[m->n] = tth_tensor_ref(t);
    m->n++;
    return 0;
}

size_t tth_const_map_count(const tth_const_map *m)
{
    return m ? m->n : 0;
}

const char *tth_const_map_name(const tth_const_map *m, size_t i)
{
    return m && i < m->n ? m->names[i] : NULL;
}

tth_tensor *tth_const_map_tensor(const tth_const_map *m, size_t i)
{
    return m && i < m->n ? m->tensors[i] : NULL;
}
