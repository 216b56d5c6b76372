/* registry.c: dlopen plugins from a trusted directory, check their descriptors, index kinds. */
#include "tth/registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

struct tth_registry {
    tth_plugin *plugins;
    void **handles;        /* dlopen handle per plugin; NULL for static ones */
    size_t n, cap;
    tth_plugin_error *errors;
    size_t n_errors, cap_errors;
    tth_registry_load_observer observer; /* tth_registry_set_load_observer */
    void *observer_ctx;
};

/* Attribute names every kind has; a plugin may not declare them itself. */
static const char *const common_attrs[] = {"kind", "keys", "tag", "device", "model", "libs", "host",
                                           NULL};

tth_registry *tth_registry_new(void)
{
    return calloc(1, sizeof(tth_registry));
}

void tth_registry_free(tth_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free((char *)r->plugins[i].path);
        free((char *)r->plugins[i].identity);
        if (r->handles[i])
            dlclose(r->handles[i]);
    }
    for (size_t i = 0; i < r->n_errors; i++)
        free((char *)r->errors[i].path);
    free(r->plugins);
    free(r->handles);
    free(r->errors);
    free(r);
}

static void record_error(tth_registry *r, const char *path, const tth_diag *d)
{
    if (r->n_errors == r->cap_errors) {
        size_t cap = r->cap_errors ? r->cap_errors * 2 : 4;
        tth_plugin_error *e = realloc(r->errors, cap * sizeof *e);
        if (!e)
            return;
        r->errors = e;
        r->cap_errors = cap;
    }
    char *p = strdup(path);
    if (!p)
        return;
    r->errors[r->n_errors].path = p;
    r->errors[r->n_errors].diag = *d;
    r->n_errors++;
}

const char *tth_attr_type_name(tth_attr_type t)
{
    switch (t) {
    case TTH_ATTR_STRING: return "string";
    case TTH_ATTR_INT: return "int";
    case TTH_ATTR_BOOL: return "bool";
    case TTH_ATTR_STRING_ARRAY: return "string-array";
    case TTH_ATTR_TARGET: return "target";
    }
    return "unknown";
}

int tth_path_check_trusted(const char *path, tth_diag *diag)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tth_diag_set(diag, errno == ENOENT ? TTH_ENOENT : TTH_EIO, path, "cannot read '%s': %s",
                            path, strerror(errno));
    uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0) {
        tth_diag_set(diag, TTH_EPERM, path, "'%s' is owned by uid %u, not by you (uid %u) or root",
                     path, (unsigned)st.st_uid, (unsigned)me);
        tth_diag_hint(diag, "plugins load only from files and directories you or root own");
        return TTH_EPERM;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        tth_diag_set(diag, TTH_EPERM, path, "'%s' is writable by %s (mode %03o)", path,
                     (st.st_mode & S_IWOTH) ? "other users" : "its group",
                     (unsigned)(st.st_mode & 0777));
        tth_diag_hint(diag, "run 'chmod go-w %s'", path);
        return TTH_EPERM;
    }
    if (!S_ISDIR(st.st_mode)) {
        /* a file is only as safe as the directory it sits in */
        char *dir = strdup(path);
        if (!dir)
            return tth_diag_set(diag, TTH_ENOMEM, path, "out of memory");
        char *slash = strrchr(dir, '/');
        int rc = 0;
        if (slash) {
            if (slash == dir)
                slash[1] = '\0';
            else
                *slash = '\0';
            rc = tth_path_check_trusted(dir, diag);
        }
        free(dir);
        /* a symlink's target is only as safe as the real directory it sits in: a file reached
         * through a trusted directory but living in one others can write could be swapped */
        char real[PATH_MAX];
        if (rc == 0 && realpath(path, real) && strcmp(real, path) != 0) {
            char *rslash = strrchr(real, '/');
            if (rslash && rslash != real) {
                *rslash = '\0';
                rc = tth_path_check_trusted(real, diag);
            }
        }
        return rc;
    }
    return 0;
}

static int is_common_attr(const char *name)
{
    for (size_t i = 0; common_attrs[i]; i++)
        if (strcmp(common_attrs[i], name) == 0)
            return 1;
    return 0;
}

int tth_descriptor_check(const tth_plugin_descriptor *d, const char *where, tth_diag *diag)
{
    if (!d)
        return tth_diag_set(diag, TTH_EABI, where, "no descriptor");
    if (d->size < offsetof(tth_plugin_descriptor, tags) + sizeof(d->tags))
        return tth_diag_set(diag, TTH_EABI, where,
                            "descriptor is %u bytes, smaller than ABI %d.0 requires (%zu)",
                            (unsigned)d->size, TTH_ABI_MAJOR,
                            offsetof(tth_plugin_descriptor, tags) + sizeof(d->tags));
    if (d->abi_major != TTH_ABI_MAJOR || d->abi_minor > TTH_ABI_MINOR) {
        tth_diag_set(diag, TTH_EABI, where, "plugin ABI %u.%u is not supported by this tth (ABI %d.%d)",
                     d->abi_major, d->abi_minor, TTH_ABI_MAJOR, TTH_ABI_MINOR);
        tth_diag_hint(diag, "rebuild the plugin against tth-plugin %d.%d headers (pkg-config tth-plugin)",
                      TTH_ABI_MAJOR, TTH_ABI_MINOR);
        return TTH_EABI;
    }
    if (!d->kind || !d->kind[0])
        return tth_diag_set(diag, TTH_EINVAL, where, "descriptor has no kind name");
    for (const char *c = d->kind; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            return tth_diag_set(diag, TTH_EINVAL, where,
                                "kind name '%s' may use only a-z, 0-9, '-' and '_'", d->kind);
    if (strcmp(d->kind, "composite") == 0)
        return tth_diag_set(diag, TTH_EINVAL, where, "kind name 'composite' is reserved");
    if (!d->plugin_name || !d->plugin_name[0] || !d->plugin_version)
        return tth_diag_set(diag, TTH_EINVAL, where, "descriptor of kind '%s' has no plugin name or version",
                            d->kind);
    for (size_t i = 0; d->attrs && d->attrs[i]; i++) {
        const tth_attr_schema *a = d->attrs[i];
        if (a->size < sizeof(tth_attr_schema))
            return tth_diag_set(diag, TTH_EABI, where, "attribute %zu of kind '%s': struct is %u bytes, expected %zu",
                                i, d->kind, (unsigned)a->size, sizeof(tth_attr_schema));
        if (!a->name || !a->name[0])
            return tth_diag_set(diag, TTH_EINVAL, where, "attribute %zu of kind '%s' has no name", i, d->kind);
        if (is_common_attr(a->name))
            return tth_diag_set(diag, TTH_EINVAL, where,
                                "kind '%s' declares attribute '%s', which every kind has already",
                                d->kind, a->name);
        if (a->type < TTH_ATTR_STRING || a->type > TTH_ATTR_TARGET)
            return tth_diag_set(diag, TTH_EINVAL, where, "attribute '%s' of kind '%s' has unknown type %d",
                                a->name, d->kind, (int)a->type);
        for (size_t j = 0; j < i; j++)
            if (strcmp(d->attrs[j]->name, a->name) == 0)
                return tth_diag_set(diag, TTH_EDUPLICATE, where,
                                    "kind '%s' declares attribute '%s' twice", d->kind, a->name);
        if (a->default_json) {
            json_error_t je;
            json_t *v = json_loads(a->default_json, JSON_DECODE_ANY, &je);
            if (!v)
                return tth_diag_set(diag, TTH_EINVAL, where,
                                    "default of attribute '%s' of kind '%s' is not JSON: %s", a->name,
                                    d->kind, je.text);
            json_decref(v);
        }
    }
    for (size_t i = 0; d->tags && d->tags[i]; i++) {
        const tth_tag_def *t = d->tags[i];
        if (t->size < sizeof(tth_tag_def))
            return tth_diag_set(diag, TTH_EABI, where, "tag %zu of kind '%s': struct is %u bytes, expected %zu",
                                i, d->kind, (unsigned)t->size, sizeof(tth_tag_def));
        if (!t->name || !t->name[0] || !t->config_json)
            return tth_diag_set(diag, TTH_EINVAL, where, "tag %zu of kind '%s' has no name or config", i,
                                d->kind);
        json_error_t je;
        json_t *v = json_loads(t->config_json, 0, &je);
        if (!v || !json_is_object(v)) {
            json_decref(v);
            return tth_diag_set(diag, TTH_EINVAL, where, "config of tag '%s' is not a JSON object: %s",
                                t->name, v ? "not an object" : je.text);
        }
        json_decref(v);
    }
    return 0;
}

static int add_plugin(tth_registry *r, const tth_plugin *p, void *handle, tth_diag *diag)
{
    const char *where = p->path;
    if (tth_registry_find_kind(r, p->desc->kind)) {
        const tth_plugin *other = tth_registry_find_kind(r, p->desc->kind);
        tth_diag_set(diag, TTH_EDUPLICATE, where, "kind '%s' is already provided by %s", p->desc->kind,
                     other->path);
        tth_diag_hint(diag, "remove one of the two plugins from the plugins directory");
        return TTH_EDUPLICATE;
    }
    /* a tag name or alias must be unique across all plugins */
    for (size_t t = 0; p->desc->tags && p->desc->tags[t]; t++) {
        const tth_tag_def *tag = p->desc->tags[t];
        for (size_t i = 0; i < r->n; i++) {
            const tth_tag_def *const *ot = r->plugins[i].desc->tags;
            for (size_t k = 0; ot && ot[k]; k++) {
                int clash = strcmp(ot[k]->name, tag->name) == 0;
                for (size_t a = 0; !clash && tag->aliases && tag->aliases[a]; a++)
                    clash = strcmp(ot[k]->name, tag->aliases[a]) == 0;
                if (clash) {
                    tth_diag_set(diag, TTH_EDUPLICATE, where, "tag '%s' is already defined by %s",
                                 ot[k]->name, r->plugins[i].path);
                    return TTH_EDUPLICATE;
                }
            }
        }
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        tth_plugin *np = realloc(r->plugins, cap * sizeof *np);
        if (!np)
            return tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
        r->plugins = np;
        void **nh = realloc(r->handles, cap * sizeof *nh);
        if (!nh)
            return tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
        r->handles = nh;
        r->cap = cap;
    }
    r->plugins[r->n] = *p;
    r->handles[r->n] = handle;
    r->n++;
    return 0;
}

static char *make_identity(const tth_plugin_descriptor *d, uint64_t hash)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s@%s#%016" PRIx64, d->plugin_name, d->plugin_version, hash);
    return strdup(buf);
}

int tth_file_xxh64(const char *path, uint64_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    XXH64_state_t *st = XXH64_createState();
    if (!st) {
        close(fd);
        return -1;
    }
    XXH64_reset(st, 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        XXH64_update(st, buf, (size_t)n);
    *out = XXH64_digest(st);
    XXH64_freeState(st);
    close(fd);
    return n < 0 ? -1 : 0;
}

int tth_registry_add_static(tth_registry *r, const tth_plugin_descriptor *desc, const tth_plugin *hooks,
                            tth_diag *diag)
{
    int rc = tth_descriptor_check(desc, "<static>", diag);
    if (rc == 0) {
        tth_plugin p = {0};
        if (hooks)
            p = *hooks;
        p.desc = desc;
        p.path = strdup("<static>");
        p.identity = make_identity(desc, 0);
        if (!p.path || !p.identity) {
            free((char *)p.path);
            free((char *)p.identity);
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        }
        rc = add_plugin(r, &p, NULL, diag);
        if (rc != 0) {
            free((char *)p.path);
            free((char *)p.identity);
        }
    }
    if (rc != 0)
        record_error(r, "<static>", diag);
    return rc;
}

/* Check that path is a whole shared object of this machine's ELF class before dlopen maps it:
 * dlopen of a truncated file (a copy interrupted half-way) maps segments past the end of the
 * file and the process dies with SIGBUS on the first access, taking every worker with it. The
 * ELF header, the program headers and every loadable segment must lie inside the file. */
static int elf_check(const char *path, tth_diag *diag)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tth_diag_set(diag, TTH_EPLUGIN, path, "cannot open: %s", strerror(errno));
    struct stat st;
    ElfW(Ehdr) eh;
    int rc = 0;
    if (fstat(fd, &st) != 0 || pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        rc = tth_diag_set(diag, TTH_EPLUGIN, path, "not a shared object: the file has no ELF header");
        tth_diag_hint(diag, "only compiled plugins (.so) belong in the plugins directory");
        goto out;
    }
    if (eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) || eh.e_type != ET_DYN) {
        rc = tth_diag_set(diag, TTH_EPLUGIN, path, "not a shared object for this machine (ELF class %d, type %d)",
                          eh.e_ident[EI_CLASS], eh.e_type);
        tth_diag_hint(diag, "build the plugin as a shared library for this machine (-shared -fPIC)");
        goto out;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint64_t ph_end = (uint64_t)eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
    if (eh.e_phentsize != sizeof(ElfW(Phdr)) || ph_end > size) {
        rc = tth_diag_set(diag, TTH_EPLUGIN, path,
                          "truncated or corrupted shared object: its program headers end at byte %" PRIu64
                          ", the file has %" PRIu64, ph_end, size);
        tth_diag_hint(diag, "the file may be a copy interrupted half-way; copy or build it again");
        goto out;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        ElfW(Phdr) ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != (ssize_t)sizeof ph) {
            rc = tth_diag_set(diag, TTH_EPLUGIN, path, "cannot read program header %u", i);
            goto out;
        }
        uint64_t end = (uint64_t)ph.p_offset + ph.p_filesz;
        if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) && end > size) {
            rc = tth_diag_set(diag, TTH_EPLUGIN, path,
                              "truncated or corrupted shared object: segment %u ends at byte %" PRIu64
                              ", the file has %" PRIu64, i, end, size);
            tth_diag_hint(diag, "the file may be a copy interrupted half-way; copy or build it again");
            goto out;
        }
    }
out:
    close(fd);
    return rc ? TTH_EPLUGIN : 0;
}

static int load_file(tth_registry *r, const char *path, tth_diag *diag)
{
    int rc = tth_path_check_trusted(path, diag);
    if (rc != 0)
        return rc;
    rc = elf_check(path, diag);
    if (rc != 0)
        return rc;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        tth_diag_set(diag, TTH_EPLUGIN, path, "cannot load: %s", err ? err : "unknown dlopen error");
        tth_diag_hint(diag, "check that the plugin's dependencies are installed (ldd %s)", path);
        return TTH_EPLUGIN;
    }
    const tth_plugin_descriptor *d = dlsym(h, TTH_PLUGIN_DESCRIPTOR_SYMBOL);
    if (!d) {
        tth_diag_set(diag, TTH_EABI, path, "not a tth plugin: it exports no '%s' symbol",
                     TTH_PLUGIN_DESCRIPTOR_SYMBOL);
        tth_diag_hint(diag, "define 'TTH_PLUGIN_EXPORT const tth_plugin_descriptor %s' (see docs/plugin-guide.md)",
                      TTH_PLUGIN_DESCRIPTOR_SYMBOL);
        dlclose(h);
        return TTH_EABI;
    }
    rc = tth_descriptor_check(d, path, diag);
    if (rc != 0) {
        dlclose(h);
        return rc;
    }
    uint64_t hash = 0;
    if (tth_file_xxh64(path, &hash) != 0) {
        dlclose(h);
        return tth_diag_set(diag, TTH_EIO, path, "cannot read: %s", strerror(errno));
    }
    tth_plugin p = {0};
    p.desc = d;
    p.target_parser = (tth_target_parser_fn)dlsym(h, TTH_HOOK_TARGET_PARSER_SYMBOL);
    p.relay_to_tir = (tth_relay_to_tir_fn)dlsym(h, TTH_HOOK_RELAY_TO_TIR_SYMBOL);
    p.tir_to_runtime = (tth_tir_to_runtime_fn)dlsym(h, TTH_HOOK_TIR_TO_RUNTIME_SYMBOL);
    p.relay_to_runtime = (tth_relay_to_runtime_fn)dlsym(h, TTH_HOOK_RELAY_TO_RUNTIME_SYMBOL);
    p.constant_updater = (tth_constant_updater_fn)dlsym(h, TTH_HOOK_CONSTANT_UPDATER_SYMBOL);
    p.partition_supports = (tth_partition_supports_fn)dlsym(h, TTH_HOOK_PARTITION_SUPPORTS_SYMBOL);
    p.path = strdup(path);
    p.identity = make_identity(d, hash);
    if (!p.path || !p.identity) {
        free((char *)p.path);
        free((char *)p.identity);
        dlclose(h);
        return tth_diag_set(diag, TTH_ENOMEM, path, "out of memory");
    }
    rc = add_plugin(r, &p, h, diag);
    if (rc != 0) {
        free((char *)p.path);
        free((char *)p.identity);
        dlclose(h);
    }
    return rc;
}

int tth_registry_load_file(tth_registry *r, const char *path, tth_diag *diag)
{
    int rc = load_file(r, path, diag);
    if (rc != 0)
        record_error(r, path, diag);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int tth_registry_load_dir(tth_registry *r, const char *dir, tth_diag *diag)
{
    int rc = tth_path_check_trusted(dir, diag);
    if (rc != 0) {
        tth_diag_prefix(diag, "plugins directory not trusted");
        return rc;
    }
    DIR *dp = opendir(dir);
    if (!dp)
        return tth_diag_set(diag, TTH_EIO, dir, "cannot open plugins directory '%s': %s", dir,
                            strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int failed = 0;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.' || !ends_with(de->d_name, ".so"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                failed = 1;
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            failed = 1;
            break;
        }
        n++;
    }
    closedir(dp);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    int loaded = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        tth_diag d;
        tth_diag_clear(&d);
        if (r->observer && r->observer(r->observer_ctx, path, &d) != 0) {
            record_error(r, path, &d);
            continue;
        }
        if (tth_registry_load_file(r, path, &d) == 0)
            loaded++;
    }
    if (r->observer) {
        tth_diag d;
        tth_diag_clear(&d);
        r->observer(r->observer_ctx, NULL, &d);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (failed)
        return tth_diag_set(diag, TTH_ENOMEM, dir, "out of memory while listing plugins");
    return loaded;
}

void tth_registry_set_load_observer(tth_registry *r, tth_registry_load_observer fn, void *ctx)
{
    if (!r)
        return;
    r->observer = fn;
    r->observer_ctx = ctx;
}

size_t tth_registry_count(const tth_registry *r)
{
    return r ? r->n : 0;
}

const tth_plugin *tth_registry_plugin(const tth_registry *r, size_t i)
{
    return r && i < r->n ? &r->plugins[i] : NULL;
}

const tth_plugin *tth_registry_find_kind(const tth_registry *r, const char *kind)
{
    if (!r || !kind)
        return NULL;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->plugins[i].desc->kind, kind) == 0)
            return &r->plugins[i];
    return NULL;
}

size_t tth_registry_error_count(const tth_registry *r)
{
    return r ? r->n_errors : 0;
}

const tth_plugin_error *tth_registry_error(const tth_registry *r, size_t i)
{
    return r && i < r->n_errors ? &r->errors[i] : NULL;
}

static json_t *hooks_json(const tth_plugin *p)
{
    json_t *a = json_array();
    if (p->target_parser) json_array_append_new(a, json_string("target_parser"));
    if (p->relay_to_tir) json_array_append_new(a, json_string("relay_to_tir"));
    if (p->tir_to_runtime) json_array_append_new(a, json_string("tir_to_runtime"));
    if (p->relay_to_runtime) json_array_append_new(a, json_string("relay_to_runtime"));
    if (p->constant_updater) json_array_append_new(a, json_string("constant_updater"));
    if (p->partition_supports) json_array_append_new(a, json_string("partition_supports"));
    return a;
}

static json_t *strv_json(const char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

json_t *tth_registry_describe(const tth_registry *r)
{
    json_t *plugins = json_array(), *kinds = json_array(), *tags = json_array(), *errors = json_array();
    for (size_t i = 0; r && i < r->n; i++) {
        const tth_plugin *p = &r->plugins[i];
        const tth_plugin_descriptor *d = p->desc;
        json_array_append_new(plugins, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "name", d->plugin_name,
                                                 "version", d->plugin_version, "kind", d->kind, "path",
                                                 p->path, "identity", p->identity, "hooks", hooks_json(p)));
        json_t *attrs = json_array();
        for (size_t k = 0; d->attrs && d->attrs[k]; k++) {
            const tth_attr_schema *a = d->attrs[k];
            json_t *def = a->default_json ? json_loads(a->default_json, JSON_DECODE_ANY, NULL) : json_null();
            json_array_append_new(attrs, json_pack("{s:s, s:s, s:o, s:s}", "name", a->name, "type",
                                                   tth_attr_type_name(a->type), "default", def ? def : json_null(),
                                                   "doc", a->doc ? a->doc : ""));
        }
        json_t *flags = json_array();
        if (d->flags & TTH_KIND_NEEDS_HOST) json_array_append_new(flags, json_string("needs_host"));
        if (d->flags & TTH_KIND_CAN_BE_HOST) json_array_append_new(flags, json_string("can_be_host"));
        json_array_append_new(kinds, json_pack("{s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o}", "kind", d->kind,
                                               "plugin", d->plugin_name, "doc", d->doc ? d->doc : "",
                                               "device_type", (int)d->device_type, "default_keys",
                                               strv_json(d->default_keys), "flags", flags, "attrs", attrs,
                                               "hooks", hooks_json(p)));
        for (size_t k = 0; d->tags && d->tags[k]; k++) {
            const tth_tag_def *t = d->tags[k];
            json_t *cfg = json_loads(t->config_json, 0, NULL);
            json_array_append_new(tags, json_pack("{s:s, s:o, s:s, s:o, s:s}", "name", t->name, "aliases",
                                                  strv_json(t->aliases), "kind", d->kind, "config",
                                                  cfg ? cfg : json_null(), "doc", t->doc ? t->doc : ""));
        }
    }
    for (size_t i = 0; r && i < r->n_errors; i++) {
        const tth_plugin_error *e = &r->errors[i];
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s, s:s}", "path", e->path, "code",
                                                tth_error_name(e->diag.code), "message", e->diag.message,
                                                "hint", e->diag.hint));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "plugins", plugins, "kinds", kinds, "tags", tags, "errors",
                     errors);
}
