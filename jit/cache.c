/* cache.c - the compile cache of JIT modules (cache.h, docs/runtime.md).
 *
 * An entry is DIR/KEY.kmod, a module file (common/modfile.h) of target TARGET whose code
 * is what the device loads (PTX, SPIR-V) or, for the CPU, the JIT's object files
 * (llvm_jit_compile_keep). KEY is SHA-256 (sha256.c) of a text naming everything that
 * changes the code, followed by the source:
 *     kern-cache 1, kern's version and its build (the ELF build id of the object that holds
 *     this code, else its size and time: a rebuilt kern never loads an older build's code),
 *     the target and architecture, LLVM's version and the host (llvm_host_describe: triple,
 *     CPU name and features, libmvec), every code-changing field of kc_options, the source's
 *     name (it is in the metadata and in messages) and the source text.
 * Writers write a temporary file in DIR (mkstemp), fsync it and rename it over KEY.kmod:
 * processes compiling the same module at once each write a whole entry, and the last
 * rename wins; readers open one whole entry or none. Readers check the entry (its sections'
 * lengths against the file's size, its checksum, its target) and remove one that fails. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../common/modfile.h"
#include "../common/target.h"
#include "../common/util.h"
#include "cache.h"
#include "sha256.h"

enum { MAX_ENTRY = 1 << 30 };

/* ---- the build of kern ------------------------------------------------------------ */

/* Set once (pthread_once: the build is a fact of the process), then only read. */
static pthread_once_t build_once = PTHREAD_ONCE_INIT;
static char build_id[300];

typedef struct build_probe {
    uintptr_t addr; /* an address inside the object */
    char hex[128];  /* its GNU build id, as hex */
} build_probe;

/* The GNU build id note of the loaded object that holds probe->addr, as hex. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    build_probe *probe = data;
    uintptr_t self = probe->addr;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && self >= lo && self - lo < ph->p_memsz;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *n;
            const unsigned char *desc = (const unsigned char *)name + ((n->n_namesz + 3) & ~3u);
            if ((const char *)desc + n->n_descsz > end)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                n->n_descsz * 2 < sizeof probe->hex) {
                for (unsigned k = 0; k < n->n_descsz; k++)
                    snprintf(probe->hex + 2 * k, 3, "%02x", desc[k]);
                return 1;
            }
            p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

/* The identity of the object holding addr: its build id, else its file's size and time. */
static void identify(uintptr_t addr, char *out, size_t cap) {
    build_probe probe = {addr, {0}};
    dl_iterate_phdr(find_build_id, &probe);
    Dl_info di;
    struct stat st;
    if (probe.hex[0])
        snprintf(out, cap, "%s", probe.hex);
    else if (dladdr((void *)addr, &di) && di.dli_fname && stat(di.dli_fname, &st) == 0)
        snprintf(out, cap, "%s %lld %lld.%09ld", di.dli_fname, (long long)st.st_size,
                 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else
        snprintf(out, cap, "-");
}

/* The runtime's object (this file) and the compiler's (kc_compile_source: the code
 * generators; a shared libkernc is rebuilt without the runtime library when only the
 * compiler changes): both decide what an entry holds. */
static void build_init(void) {
    char jit[140], compiler[140];
    identify((uintptr_t)&jit_cache_key, jit, sizeof jit);
    identify((uintptr_t)&kc_compile_source, compiler, sizeof compiler);
    snprintf(build_id, sizeof build_id, "%s %s", jit, compiler);
}

/* ---- the key ----------------------------------------------------------------------- */

/* A new field of kc_options must be added to the key below when it changes the code. */
_Static_assert(sizeof(void *) != 8 || sizeof(kc_options) == 96,
               "kc_options changed: add its new fields to jit_cache_key");

static const char *str(const char *s) { return s ? s : "-"; }

void jit_cache_key(const char *target, const char *name, const char *source, size_t len,
                   const kc_options *o, char key[JIT_CACHE_KEY_HEX + 1]) {
    pthread_once(&build_once, build_init);
    kern_buf b = {0};
    const kern_target *t = kern_target_find(target);
    buf_printf(&b, "kern-cache 1\nkern %s\nbuild %s\ntarget %s %s\n", KERN_VERSION_STRING, build_id,
               target,
               str(o->arch ? o->arch
                   : t     ? t->default_arch
                           : NULL));
    llvm_host_describe(&b);
    buf_printf(
        &b,
        "opt %d checks %d debug %d no_grad_check %d ad_stack_size %u grad %d grad_only %s jvp %d "
        "no_jvp %d promote_f64 %d libdevice %s simd %d jit_threads %d "
        "scatter_adjoints %d no_ckpt %d no_neighbour_adds %d no_vector_math %d no_trip_sort %d "
        "fast_math %d own_math %d %d eager_grads %d keep_rules %d cuda_home %s lld %s\n",
        o->opt_level, o->checks, o->debug, o->no_grad_check, o->ad_stack_size, (int)o->grad,
        str(o->grad_only), o->jvp, o->no_jvp, o->promote_f64, str(o->libdevice), o->simd,
        o->jit_threads, o->scatter_adjoints, o->no_ckpt, o->no_neighbour_adds, o->no_vector_math,
        o->no_trip_sort, o->fast_math, o->own_math, o->own_math_fused, o->eager_grads,
        o->keep_rules, str(o->cuda_home), str(o->lld));
    buf_printf(&b, "name %zu %s\nsource %zu\n", strlen(name), name, len);
    kern_sha256 s;
    kern_sha256_init(&s);
    kern_sha256_update(&s, b.data, b.len);
    kern_sha256_update(&s, source, len);
    buf_free(&b);
    unsigned char d[32];
    kern_sha256_final(&s, d);
    for (int i = 0; i < 32; i++)
        snprintf(key + 2 * i, 3, "%02x", d[i]);
}

bool jit_cache_usable(const kc_options *o) { return o->pass_debug == 0; }

/* ---- the directory ----------------------------------------------------------------- */

/* mkdir -p: makes path's missing directories (mode 0700: the cache holds code that
 * this user runs). */
static bool make_dirs(char *path) {
    struct stat st;
    if (stat(path, &st) == 0)
        return S_ISDIR(st.st_mode);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        bool ok = mkdir(path, 0700) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok)
            return false;
    }
    return (mkdir(path, 0700) == 0 || errno == EEXIST) && stat(path, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

bool jit_cache_dir(const kern_context_options *o, char *dir, size_t size) {
    if (o->no_cache)
        return false;
    const char *e;
    int n;
    if (o->cache_dir && *o->cache_dir)
        n = snprintf(dir, size, "%s", o->cache_dir);
    else if ((e = getenv("KERN_CACHE_DIR")) && *e)
        n = snprintf(dir, size, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e == '/')
        n = snprintf(dir, size, "%s/kern", e);
    else if ((e = getenv("HOME")) && *e)
        n = snprintf(dir, size, "%s/.cache/kern", e);
    else
        return false;
    if (n <= 0 || (size_t)n >= size - JIT_CACHE_KEY_HEX - 16) /* room for an entry's name */
        return false;
    return make_dirs(dir) && access(dir, W_OK | X_OK) == 0;
}

/* ---- entries ----------------------------------------------------------------------- */

static void entry_path(char *path, size_t size, const char *dir, const char *key) {
    snprintf(path, size, "%s/%s.kmod", dir, key);
}

void jit_cache_remove(const char *dir, const char *key) {
    char path[4096];
    entry_path(path, sizeof path, dir, key);
    unlink(path);
}

char *jit_cache_read(const char *dir, const char *key, const char *target, rt_modfile *mf) {
    char path[4096];
    entry_path(path, sizeof path, dir, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *data = NULL;
    size_t got = 0;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
              st.st_size <= MAX_ENTRY && (data = malloc((size_t)st.st_size));
    while (ok && got < (size_t)st.st_size) {
        ssize_t k = read(fd, data + got, (size_t)st.st_size - got);
        if (k < 0 && errno == EINTR)
            continue;
        ok = k > 0;
        got += ok ? (size_t)k : 0;
    }
    close(fd);
    char err[256];
    if (ok && rt_modfile_parse(data, got, mf, err, sizeof err) && !strcmp(mf->target, target))
        return data;
    free(data);
    if (S_ISREG(st.st_mode))
        unlink(path); /* damaged: rebuilt by this process, never loaded */
    return NULL;
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

void jit_cache_write(const char *dir, const char *key, const char *target, const char *meta,
                     size_t metalen, const char *code, size_t codelen) {
    size_t len = 0;
    char *file = kern_modfile_build(target, meta, metalen, code, codelen, &len);
    if (!file || len > MAX_ENTRY) {
        free(file);
        return;
    }
    char tmp[4096], path[4096];
    entry_path(path, sizeof path, dir, key);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, key);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        bool ok = write_all(fd, file, len) && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        if (!ok || rename(tmp, path) != 0)
            unlink(tmp);
    }
    free(file);
}
