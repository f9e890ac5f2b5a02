/* module.c - modules and kernels: rt_module_create (metadata + a code image, see
 * provider.h; the device loads the code and resolves each kernel), the AOT loader for
 * shared objects built by `kernc build --target=cpu`, and kernel lookup and
 * introspection.
 *
 * An AOT module file is a shared object that exports the task functions of abi.h and
 *   const char kern_module_meta[];          the metadata text of meta.h
 *   const uint64_t kern_module_meta_size;   its length in bytes (a trailing NUL allowed)
 * The file is read whole and checked (elfcheck.c: a truncated or malformed object is
 * KERN_ERR_FORMAT, never a crash in the loader), then dlopen()ed with RTLD_NOW |
 * RTLD_LOCAL from a private memory file holding the checked bytes, and closed when the
 * module is released.
 * A file that starts with "kern-module " is instead the GPU container of docs/gpu-abi.md
 * (gpu.h: metadata + PTX, an HSACO code object or SPIR-V, and their checksum), read whole
 * and checked, then handed to the device's load_code.
 *
 * Every module's code for the device's target, from a file or the JIT, passes
 * rt_code_check (gpu.h: SPIR-V validated and held to kern's layout, PTX and code objects
 * to the entry points the metadata names) before the device's loader or driver sees it:
 * damaged code is KERN_ERR_FORMAT with a message, never a crash in a driver. */
#define _GNU_SOURCE /* memfd_create, dlinfo */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "rt.h"

enum { RT_MAX_META_SIZE = 64 << 20 };
#define RT_MAX_MODULE_FILE ((size_t)1 << 31)

static void free_kernels(kern_module *m) {
    rt_device *d = m->ctx->dev;
    for (int i = 0; i < m->nkernels; i++) {
        if (m->kernels[i].handle)
            d->ops->free_kernel(d, m->kernels[i].handle);
        for (int s = 0; m->kernels[i].sized && s < m->kernels[i].meta->nadstacks; s++) {
            free(m->kernels[i].sized[s].args);
            free(m->kernels[i].sized[s].written);
        }
        free(m->kernels[i].sized);
        rt_handle_released(&m->kernels[i]);
    }
    rt_handle_free(m->kernels);
    m->kernels = NULL;
    m->nkernels = 0;
}
/* The checks the parser makes, for metadata built in memory by the compiler (which
 * leaves the adstacks' SizeExprs to be parsed here). */
static bool meta_valid(kern_meta *meta, char *err, size_t errlen) {
    if (meta->nkernels < 0 || (meta->nkernels > 0 && !meta->kernels)) {
        snprintf(err, errlen, "bad kernel table");
        return false;
    }
    for (int k = 0; k < meta->nkernels; k++) {
        const kern_meta_kernel *mk = &meta->kernels[k];
        if (!mk->name || mk->nparams < 0 || mk->ntasks < 0 || (mk->nparams && !mk->params) ||
            (mk->ntasks && !mk->tasks)) {
            snprintf(err, errlen, "kernel %d: bad name or tables", k);
            return false;
        }
        for (int i = 0; i < mk->nparams; i++) {
            const kern_type *t = mk->params[i].type;
            if (!mk->params[i].name || !t || t->kind == TY_VOID ||
                (t->kind == TY_ARRAY && (t->rank < 1 || t->rank > KERN_MAX_DIMS))) {
                snprintf(err, errlen, "kernel '%s': parameter %d has no name or a bad type",
                         mk->name, i);
                return false;
            }
        }
        if (mk->nadstacks < 0 || (mk->nadstacks && !mk->adstacks)) {
            snprintf(err, errlen, "kernel '%s': bad adstack table", mk->name);
            return false;
        }
    }
    return kern_meta_check_adstacks(meta, err, errlen);
}

kern_status rt_module_create(kern_context *ctx, kern_meta *meta, kern_code_image code,
                             kern_module **out) {
    kern_status s = KERN_OK;
    char err[512];
    kern_module *m = NULL;
    void *loaded = NULL;
    *out = NULL;
    if (!ctx->dev) {
        s = rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
        goto cleanup;
    }
    rt_device *d = ctx->dev;
    if (!meta_valid(meta, err, sizeof err)) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "invalid module metadata: %s", err);
        goto cleanup;
    }
    /* code for the device's target is checked before its loader or driver sees it; other
     * kinds are refused by load_code, naming both */
    if (d->ops->target && (int)code.kind == d->ops->target->code_kind &&
        !rt_code_check(meta, &code, err, sizeof err)) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "%s", err);
        goto cleanup;
    }
    if ((s = d->ops->load_code(d, &code, &loaded, err, sizeof err)) != KERN_OK) {
        s = rt_error(ctx, s, "%s", err);
        goto cleanup;
    }
    m = calloc(1, sizeof *m);
    if (!m || !(m->kernels = calloc((size_t)meta->nkernels + 1, sizeof *m->kernels))) {
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a module");
        goto cleanup;
    }
    m->ctx = ctx;
    m->meta = meta;
    m->nkernels = meta->nkernels;
    for (int k = 0; k < meta->nkernels; k++) {
        kern_kernel *kk = &m->kernels[k];
        kk->mod = m;
        kk->meta = &meta->kernels[k];
        s = d->ops->get_kernel(d, loaded, kk->meta, &kk->handle, err, sizeof err);
        if (s != KERN_OK) {
            s = rt_error(ctx, s, "%s", err);
            goto cleanup;
        }
    }
    m->code = loaded;
    rt_list_init(&m->link);
    rt_list_push(&ctx->modules, &m->link);
    rt_handle_add(m, RT_H_MODULE, ctx);
    for (int k = 0; k < m->nkernels; k++)
        rt_handle_add(&m->kernels[k], RT_H_KERNEL, ctx);
    *out = m;
    return KERN_OK;
cleanup:
    if (m && m->kernels)
        free_kernels(m);
    free(m);
    kern_meta_free(meta);
    if (loaded)
        ctx->dev->ops->unload_code(ctx->dev, loaded); /* releases a host provider */
    else if (code.kind == KERN_CODE_HOST && code.host.release)
        code.host.release(code.host.user);
    return s;
}

/* Frees m's lazy gradients: their modules are released (after their launches and pins). */
static void lazy_free(kern_module *m) {
    rt_lazy_grads *l = m->lazy;
    if (!l)
        return;
    m->lazy = NULL;
    for (int i = 0; i < l->nnames; i++) {
        if (l->built && l->built[i]) {
            l->built[i]->lazy_parent = NULL;
            kern_module_release(l->built[i]);
        }
        free(l->names[i]);
    }
    for (int i = 0; l->ckpt && i < m->nkernels; i++)
        if (l->ckpt[i]) {
            l->ckpt[i]->lazy_parent = NULL;
            kern_module_release(l->ckpt[i]);
        }
    free(l->ckpt);
    free(l->ckpt_tried);
    if (l->free)
        l->free(l->state);
    free(l->names);
    free(l->built);
    free(l);
}

/* m->lazy with room for `names` lazy names and K.grad.ckpt of each kernel; takes state
 * (freed now on failure). */
static kern_status lazy_new(kern_module *m, int names,
                            kern_status (*build)(kern_context *, void *, const char *,
                                                 kern_module **),
                            void (*free_state)(void *), void *state) {
    rt_lazy_grads *l = calloc(1, sizeof *l);
    if (l) {
        l->names = calloc((size_t)names + 1, sizeof *l->names);
        l->built = calloc((size_t)names + 1, sizeof *l->built);
        l->ckpt = calloc((size_t)m->nkernels + 1, sizeof *l->ckpt);
        l->ckpt_tried = calloc((size_t)m->nkernels + 1, sizeof *l->ckpt_tried);
    }
    if (!l || !l->names || !l->built || !l->ckpt || !l->ckpt_tried) {
        if (l) {
            free(l->names);
            free(l->built);
            free(l->ckpt);
            free(l->ckpt_tried);
        }
        free(l);
        free_state(state);
        return rt_error(m->ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a module");
    }
    l->build = build;
    l->free = free_state;
    l->state = state;
    m->lazy = l;
    return KERN_OK;
}

kern_status rt_module_set_lazy_grads(kern_module *m,
                                     kern_status (*build)(kern_context *, void *, const char *,
                                                          kern_module **),
                                     void (*free_state)(void *), void *state) {
    kern_status st = lazy_new(m, 3 * m->nkernels, build, free_state, state);
    if (st != KERN_OK)
        return st;
    rt_lazy_grads *l = m->lazy;
    /* K.grad and K.grad.jvp where the global-access check allows them, K.jvp always */
    static const char *const suffixes[] = {".grad", ".jvp", ".grad.jvp"};
    for (int i = 0; i < m->nkernels; i++) {
        const kern_meta_kernel *mk = m->kernels[i].meta;
        for (int s = 0; s < 3; s++) {
            if (mk->grad_error && s != 1)
                continue;
            size_t n = strlen(mk->name) + strlen(suffixes[s]) + 1;
            char *name = malloc(n);
            if (!name) {
                lazy_free(m);
                return rt_error(m->ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a module");
            }
            snprintf(name, n, "%s%s", mk->name, suffixes[s]);
            l->names[l->nnames++] = name;
        }
    }
    return KERN_OK;
}

void rt_module_destroy(kern_module *m) {
    lazy_free(m);
    rt_lazy_grads *pl = m->lazy_parent ? m->lazy_parent->lazy : NULL;
    for (int i = 0; pl && i < pl->nnames; i++) /* its parent goes first, or forgets it */
        if (pl->built[i] == m)
            pl->built[i] = NULL;
    for (int i = 0; pl && i < m->lazy_parent->nkernels; i++)
        if (pl->ckpt[i] == m)
            pl->ckpt[i] = NULL;
    rt_list_remove(&m->link);
    free_kernels(m);
    kern_meta_free(m->meta);
    m->ctx->dev->ops->unload_code(m->ctx->dev, m->code);
    rt_handle_free(m);
}

void kern_module_release(kern_module *m) {
    if (!m || !rt_handle_check(m, RT_H_MODULE, "kern_module_release"))
        return;
    kern_context *ctx = m->ctx;
    rt_clear_error(ctx);
    rt_handle_released(m);
    for (int i = 0; i < m->nkernels; i++)
        rt_handle_released(&m->kernels[i]); /* its kernels go with it */
    if (m->pins > 0) { /* a graph uses its kernels: freed with the last such graph */
        m->released = true;
        return;
    }
    char err[512];
    if (m->last_use > ctx->dev->ops->poll(ctx->dev) &&
        ctx->dev->ops->wait(ctx->dev, m->last_use, err, sizeof err) != KERN_OK)
        rt_error(ctx, KERN_ERR_DEVICE, "device %s: %s", ctx->dev->ops->name, err);
    rt_collect(ctx, false); /* device errors name the module's kernels: format them now */
    rt_module_destroy(m);
}

/* ---- AOT module files ---------------------------------------------------------------- */

/* Loads the GPU container held in data (known to start with "kern-module "). */
static kern_status load_container(kern_context *ctx, const char *path, const char *data,
                                  size_t size, kern_module **out) {
    char err[512];
    rt_modfile mf;
    if (!rt_modfile_parse(data, size, &mf, err, sizeof err))
        return rt_error(ctx, KERN_ERR_FORMAT, "'%s': corrupt module file: %s", path, err);
    kern_code_image img = {.bytes = mf.code, .len = mf.code_len};
    const kern_target *t = kern_target_find(mf.target);
    if (!t || !(t->caps & KERN_TARGET_AOT_CONTAINER)) {
        char names[128];
        return rt_error(ctx, KERN_ERR_FORMAT,
                        "'%s': a module for target '%s', which this runtime does not know (%s)",
                        path, mf.target,
                        kern_target_names(KERN_TARGET_AOT_CONTAINER, names, sizeof names));
    }
    img.kind = (kern_code_kind)t->code_kind;
    if (mf.meta_len > RT_MAX_META_SIZE)
        return rt_error(ctx, KERN_ERR_FORMAT, "'%s': corrupt module metadata (size %zu)", path,
                        mf.meta_len);
    kern_meta *meta = kern_meta_parse(mf.meta, mf.meta_len, err, sizeof err);
    if (!meta)
        return rt_error(ctx, KERN_ERR_FORMAT, "'%s': corrupt module metadata: %s", path, err);
    kern_status s = rt_module_create(ctx, meta, img, out);
    if (s != KERN_OK)
        rt_error(ctx, s, "'%s': %s", path, ctx->msg);
    return s;
}

/* Reads the whole module file at path (at most RT_MAX_MODULE_FILE bytes) into *data. */
static kern_status read_module(kern_context *ctx, const char *path, char **data, size_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rt_error(ctx, errno == ENOENT ? KERN_ERR_NOT_FOUND : KERN_ERR_IO,
                        "cannot open module '%s': %s", path, strerror(errno));
    struct stat st;
    kern_status s = KERN_OK;
    *data = NULL;
    if (fstat(fd, &st) != 0) {
        s = rt_error(ctx, KERN_ERR_IO, "cannot open module '%s': %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "module '%s' is not a regular file", path);
    } else if ((uint64_t)st.st_size > RT_MAX_MODULE_FILE) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "'%s': a module file of %lld bytes is too large", path,
                     (long long)st.st_size);
    } else if (!(*data = malloc((size_t)st.st_size + 1))) {
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for module '%s'", path);
    } else {
        size_t got = 0, want = (size_t)st.st_size;
        while (got < want) {
            ssize_t k = read(fd, *data + got, want - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                s = rt_error(ctx, KERN_ERR_IO, "cannot read module '%s': %s", path,
                             k < 0 ? strerror(errno) : "the file shrank while read");
                break;
            }
            got += (size_t)k;
        }
        *size = got;
    }
    close(fd);
    if (s != KERN_OK) {
        free(*data);
        *data = NULL;
    }
    return s;
}

/* ---- AOT shared objects ------------------------------------------------------------ */

/* A shared object as loaded: its handle, and the memory file it was loaded from (kept
 * open while it is loaded, so that its name /proc/self/fd/N stays its own). */
typedef struct dl_image {
    void *handle;
    int fd;
} dl_image;

static void *dl_lookup(void *user, const char *symbol) {
    return dlsym(((dl_image *)user)->handle, symbol);
}
static void dl_release(void *user) {
    dl_image *d = user;
    dlclose(d->handle);
    if (d->fd >= 0)
        close(d->fd);
    free(d);
}

/* dlopen()s the checked image: from a private memory file holding exactly the bytes that
 * were checked, so that a module rebuilt at the same path is new code (glibc returns an
 * already loaded object of the same name or file), and a file changed after the check is
 * not what runs. Where memory files cannot be mapped executable, the path itself. */
static bool dl_load(const char *path, const char *data, size_t size, dl_image *d,
                    const char **why) {
    d->fd = -1;
    d->handle = NULL;
#ifdef MFD_CLOEXEC
    int fd = memfd_create("kern-module", MFD_CLOEXEC);
    if (fd >= 0) {
        size_t done = 0;
        while (done < size) {
            ssize_t k = write(fd, data + done, size - done);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            done += (size_t)k;
        }
        char name[64];
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
        if (done == size && (d->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
            d->fd = fd;
            return true;
        }
        close(fd);
    }
#endif
    /* a path without '/' would make dlopen search the library path */
    size_t n = strlen(path);
    char *dlpath = malloc(n + 3);
    if (!dlpath) {
        *why = "out of host memory";
        return false;
    }
    snprintf(dlpath, n + 3, "%s%s", strchr(path, '/') ? "" : "./", path);
    dlerror();
    d->handle = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
    free(dlpath);
    if (!d->handle) {
        const char *e = dlerror();
        *why = e ? e : "dlopen failed";
        return false;
    }
    return true;
}

/* Whether [p, p + len) lies in the memory of the module loaded from the checked image. */
static bool in_module(const dl_image *d, const char *data, size_t size, const void *p, size_t len) {
    struct link_map *lm = NULL;
    if (dlinfo(d->handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return false;
    uintptr_t a = (uintptr_t)p;
    if (a < (uintptr_t)lm->l_addr)
        return false;
    return rt_elf_in_memory(data, size, a - (uintptr_t)lm->l_addr, len);
}

kern_status kern_module_load_file(kern_context *ctx, const char *path, kern_module **out) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, "kern_module_load_file"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!out || !path)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_module_load_file: NULL path or out");
    *out = NULL;
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    char *data = NULL;
    size_t size = 0;
    kern_status s = read_module(ctx, path, &data, &size);
    if (s != KERN_OK)
        return s;
    if (rt_modfile_is(data, size)) {
        s = load_container(ctx, path, data, size, out);
        free(data);
        return s;
    }
    char err[512];
    dl_image *d = calloc(1, sizeof *d);
    const char *why = "out of host memory";
    if (!rt_elf_check(data, size, err, sizeof err)) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "'%s' is not a loadable module: %s", path, err);
        goto cleanup;
    }
    if (!d || !dl_load(path, data, size, d, &why)) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "'%s' is not a loadable module: %s", path, why);
        goto cleanup;
    }
    const char *text = dlsym(d->handle, "kern_module_meta");
    const uint64_t *msize = dlsym(d->handle, "kern_module_meta_size");
    if (!text || !msize) {
        s = rt_error(ctx, KERN_ERR_FORMAT,
                     "'%s' is not a kern module (it does not define kern_module_meta and "
                     "kern_module_meta_size)",
                     path);
        goto cleanup;
    }
    if (!in_module(d, data, size, msize, sizeof *msize) || *msize > RT_MAX_META_SIZE ||
        !in_module(d, data, size, text, (size_t)*msize)) {
        s = rt_error(ctx, KERN_ERR_FORMAT,
                     "'%s': corrupt module metadata (it does not lie inside the module)", path);
        goto cleanup;
    }
    kern_meta *meta = kern_meta_parse(text, (size_t)*msize, err, sizeof err);
    if (!meta) {
        s = rt_error(ctx, KERN_ERR_FORMAT, "'%s': corrupt module metadata: %s", path, err);
        goto cleanup;
    }
    kern_code_image img = {.kind = KERN_CODE_HOST, .host = {d, dl_lookup, dl_release}};
    d = NULL; /* the provider owns it now, even on failure */
    s = rt_module_create(ctx, meta, img, out);
    if (s != KERN_OK)
        rt_error(ctx, s, "'%s': %s", path, ctx->msg);
cleanup:
    if (d && d->handle)
        dl_release(d);
    else
        free(d);
    free(data);
    return s;
}

/* ---- kernels ----------------------------------------------------------------------- */

int kern_module_kernel_count(const kern_module *m) {
    if (!m || !rt_handle_check(m, RT_H_MODULE, "kern_module_kernel_count"))
        return 0;
    return m->nkernels + (m->lazy ? m->lazy->nnames : 0);
}

const char *kern_module_kernel_name(const kern_module *m, int i) {
    if (!m || !rt_handle_check(m, RT_H_MODULE, "kern_module_kernel_name") || i < 0)
        return NULL;
    if (i < m->nkernels)
        return m->kernels[i].meta->name;
    if (m->lazy && i - m->nkernels < m->lazy->nnames)
        return m->lazy->names[i - m->nkernels];
    return NULL;
}

kern_status rt_module_set_lazy_ckpt(kern_module *m,
                                    kern_status (*build)(kern_context *, void *, const char *,
                                                         kern_module **),
                                    void (*free_state)(void *), void *state) {
    return lazy_new(m, 0, build, free_state, state);
}

kern_kernel *rt_module_lazy_ckpt(kern_module *parent, const char *name) {
    rt_lazy_grads *l = parent->lazy;
    size_t n = strlen(name);
    for (int i = 0; l && i < parent->nkernels; i++) {
        const char *k = parent->kernels[i].meta->name;
        size_t kl = strlen(k);
        if (kl + 10 != n || strncmp(name, k, kl) != 0 || strcmp(name + kl, ".grad.ckpt") != 0)
            continue;
        if (!l->ckpt[i] && !l->ckpt_tried[i]) {
            l->ckpt_tried[i] = true; /* a kernel without checkpointable loops has none */
            char msg[RT_MSG_SIZE];
            memcpy(msg, parent->ctx->msg, sizeof msg);
            kern_module *g = NULL;
            if (l->build(parent->ctx, l->state, name, &g) == KERN_OK) {
                g->lazy_parent = parent;
                l->ckpt[i] = g;
            }
            memcpy(parent->ctx->msg, msg, sizeof msg);
        }
        kern_module *g = l->ckpt[i];
        for (int j = 0; g && j < g->nkernels; j++)
            if (!strcmp(g->kernels[j].meta->name, name))
                return &g->kernels[j];
        return NULL;
    }
    return NULL;
}

/* K.grad of a module whose gradients are lazy: built alone with its first lookup. */
static kern_status find_lazy_grad(kern_module *m, const char *name, kern_kernel **out) {
    rt_lazy_grads *l = m->lazy;
    for (int i = 0; i < l->nnames; i++) {
        if (strcmp(l->names[i], name) != 0)
            continue;
        if (!l->built[i]) {
            kern_module *g = NULL;
            kern_status s = l->build(m->ctx, l->state, name, &g);
            if (s != KERN_OK)
                return s; /* the message says why */
            g->lazy_parent = m;
            l->built[i] = g;
        }
        return kern_kernel_find(l->built[i], name, out);
    }
    return rt_error(m->ctx, KERN_ERR_NOT_FOUND, "no kernel '%s' in the module", name);
}

kern_status kern_kernel_find(kern_module *m, const char *name, kern_kernel **out) {
    if (!m || !rt_handle_check(m, RT_H_MODULE, "kern_kernel_find"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = m->ctx;
    rt_clear_error(ctx);
    if (!name || !out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_kernel_find: NULL name or out");
    *out = NULL;
    for (int i = 0; i < m->nkernels; i++) {
        if (strcmp(m->kernels[i].meta->name, name) == 0) {
            *out = &m->kernels[i];
            return KERN_OK;
        }
    }
    /* a derived kernel of a kernel whose K.grad the global-access check refused says why
     * without building anything; the others of a lazy module are built now */
    size_t namelen = strlen(name);
    for (int i = 0; m->lazy && i < m->nkernels; i++) {
        const kern_meta_kernel *mk = m->kernels[i].meta;
        size_t kl = strlen(mk->name);
        if (kl < namelen && !strncmp(mk->name, name, kl) && mk->grad_error &&
            (!strcmp(name + kl, ".grad") || !strcmp(name + kl, ".grad.jvp")))
            return rt_error(ctx, KERN_ERR_NOT_FOUND, "kernel '%s' was not built: %s", name,
                            mk->grad_error);
    }
    for (int i = 0; m->lazy && i < m->lazy->nnames; i++)
        if (!strcmp(m->lazy->names[i], name))
            return find_lazy_grad(m, name, out);
    /* K.grad.ckpt, which kernel lists leave out (the runtime launches it for K.grad) */
    if (m->lazy && namelen > 10 && !strcmp(name + namelen - 10, ".grad.ckpt") &&
        (*out = rt_module_lazy_ckpt(m, name)))
        return KERN_OK;
    /* "K.grad" of a kernel K whose gradient was not built says why */
    size_t nlen = strlen(name);
    if (nlen > 5 && strcmp(name + nlen - 5, ".grad") == 0) {
        for (int i = 0; i < m->nkernels; i++) {
            const kern_meta_kernel *mk = m->kernels[i].meta;
            if (strlen(mk->name) != nlen - 5 || strncmp(mk->name, name, nlen - 5) != 0)
                continue;
            if (mk->grad_error)
                return rt_error(ctx, KERN_ERR_NOT_FOUND, "kernel '%s' was not built: %s", name,
                                mk->grad_error);
            return rt_error(ctx, KERN_ERR_NOT_FOUND,
                            "no kernel '%s': the module was compiled without the gradient of "
                            "'%s'",
                            name, mk->name);
        }
    }
    char list[1024];
    size_t len = 0;
    list[0] = '\0';
    for (int i = 0; i < m->nkernels && len < sizeof list; i++) {
        int w = snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                         m->kernels[i].meta->name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (m->nkernels == 0)
        return rt_error(ctx, KERN_ERR_NOT_FOUND, "no kernel '%s': the module has no kernels", name);
    return rt_error(ctx, KERN_ERR_NOT_FOUND, "no kernel '%s' in the module (it has: %s)", name,
                    list);
}

static bool live_kernel(const kern_kernel *k, const char *fn) {
    return k && rt_handle_check(k, RT_H_KERNEL, fn);
}
const char *kern_kernel_name(const kern_kernel *k) {
    return live_kernel(k, "kern_kernel_name") ? k->meta->name : NULL;
}
int kern_kernel_param_count(const kern_kernel *k) {
    return live_kernel(k, "kern_kernel_param_count") ? k->meta->nparams : 0;
}
int kern_kernel_adstack_count(const kern_kernel *k) {
    return live_kernel(k, "kern_kernel_adstack_count") ? k->meta->nadstacks : 0;
}

int kern_kernel_param_written(const kern_kernel *k, int i) {
    if (!live_kernel(k, "kern_kernel_param_written") || i < 0 || i >= k->meta->nparams ||
        k->meta->params[i].type->kind != TY_ARRAY)
        return -1;
    return k->meta->params[i].readonly ? 0 : 1;
}

kern_status kern_kernel_param(kern_kernel *k, int i, kern_param_info *out) {
    if (!live_kernel(k, "kern_kernel_param"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = k->mod->ctx;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_kernel_param: out is NULL");
    if (i < 0 || i >= k->meta->nparams)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kernel '%s' has %d parameters: index %d is out of range", k->meta->name,
                        k->meta->nparams, i);
    const kern_meta_param *p = &k->meta->params[i];
    out->name = p->name;
    out->is_array = p->type->kind == TY_ARRAY;
    out->dtype = rt_dtype_of(p->type);
    out->rank = p->type->rank;
    out->nograd = p->nograd;
    out->type_name = p->view ? p->view : p->type->name;
    out->ntail = p->view ? p->ntail : 0;
    out->tail[0] = out->ntail > 0 ? p->tail[0] : 0;
    out->tail[1] = out->ntail > 1 ? p->tail[1] : 0;
    return KERN_OK;
}
