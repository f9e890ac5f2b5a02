/* outfile.c - output files written safely (outfile.h, docs/cli.md "Output files"). */
#include "outfile.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

enum { MAX_LINKS = 40 }; /* as the kernel's own limit on a path's symbolic links */

static char *dup_n(const char *s, size_t n) {
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\0';
    }
    return r;
}

/* The text of the symbolic link at path (malloc'd), or NULL with errno set. */
static char *read_link(const char *path, size_t hint) {
    size_t cap = hint + 2 > 64 ? hint + 2 : 64;
    for (;;) {
        char *b = malloc(cap);
        if (!b)
            return NULL;
        ssize_t n = readlink(path, b, cap);
        if (n < 0) {
            free(b);
            return NULL;
        }
        if ((size_t)n < cap) {
            b[n] = '\0';
            return b;
        }
        free(b);
        if (cap > (size_t)1 << 20) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        cap *= 2;
    }
}

/* Follows the symbolic links of path to the file they name, which may not exist yet
 * (malloc'd; NULL with errno set). *via_proc is set when a link passes through /proc: the
 * magic links of /proc/self/fd name open files, which are written in place. */
static char *follow_links(const char *path, bool *via_proc) {
    char *cur = strdup(path);
    if (!cur)
        return NULL;
    *via_proc = !strncmp(cur, "/proc/", 6);
    for (int depth = 0; depth <= MAX_LINKS; depth++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno == ENOENT)
                return cur; /* absent: created */
            free(cur);
            return NULL;
        }
        if (!S_ISLNK(st.st_mode))
            return cur;
        char *link = read_link(cur, (size_t)st.st_size);
        if (!link) {
            free(cur);
            return NULL;
        }
        char *next;
        const char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            next = link;
        } else {
            size_t dl = (size_t)(slash - cur) + 1, ll = strlen(link);
            next = malloc(dl + ll + 1);
            if (next) {
                memcpy(next, cur, dl);
                memcpy(next + dl, link, ll + 1);
            }
            free(link);
            if (!next) {
                free(cur);
                return NULL;
            }
        }
        free(cur);
        cur = next;
        if (!strncmp(cur, "/proc/", 6))
            *via_proc = true;
    }
    free(cur);
    errno = ELOOP;
    return NULL;
}

static bool fail(char *err, size_t errlen, const char *what, const char *path, int e) {
    /* a path too long for the message keeps its ends, so that the reason still shows */
    size_t n = strlen(path);
    if (err && errlen && n > 400)
        snprintf(err, errlen, "cannot %s '%.200s...%s': %s", what, path, path + n - 190,
                 strerror(e));
    else if (err && errlen)
        snprintf(err, errlen, "cannot %s '%s': %s", what, path, strerror(e));
    errno = e;
    return false;
}

bool kern_outfile_open(kern_outfile *o, const char *path, char *err, size_t errlen) {
    *o = (kern_outfile){.fd = -1, .mode = -1};
    if (!path || !*path)
        return fail(err, errlen, "write", path ? path : "", ENOENT);
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT)
        return fail(err, errlen, "write", path, errno);
    if (exists && S_ISDIR(st.st_mode))
        return fail(err, errlen, "write", path, EISDIR);
    bool via_proc = false;
    char *target = follow_links(path, &via_proc);
    if (!target)
        return fail(err, errlen, "write", path, errno);
    if (exists && (!S_ISREG(st.st_mode) || via_proc)) {
        /* a FIFO, a device, a terminal, an open file named through /proc: in place, never
         * truncated (a file behind /dev/stdout is appended to, as the shell opened it) */
        int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | (S_ISREG(st.st_mode) ? O_APPEND : 0);
        o->fd = open(path, flags);
        free(target);
        if (o->fd < 0)
            return fail(err, errlen, "write", path, errno);
        return true;
    }
    if (exists) {
        /* replacing a file the user could not write would be a way around its permissions */
        if (access(target, W_OK) != 0) {
            int e = errno;
            free(target);
            return fail(err, errlen, "write", path, e);
        }
        o->mode = (int)(st.st_mode & 07777);
    }
    size_t n = strlen(target) + 64;
    char *tmp = malloc(n);
    if (!tmp) {
        free(target);
        return fail(err, errlen, "write", path, ENOMEM);
    }
    /* process-wide on purpose, and atomic: two threads writing next to the same file must
     * not pick the same temporary name */
    static unsigned counter;
    for (int attempt = 0; attempt < 100 && o->fd < 0; attempt++) {
        snprintf(tmp, n, "%s.kern-tmp-%ld-%u", target, (long)getpid(),
                 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        o->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (o->fd < 0 && errno != EEXIST)
            break;
    }
    if (o->fd < 0) {
        int e = errno;
        free(tmp);
        free(target);
        return fail(err, errlen, "write", path, e); /* its directory's error */
    }
    if (o->mode >= 0 && fchmod(o->fd, (mode_t)o->mode) != 0)
        o->error = errno;
    o->tmp = tmp;
    o->target = target;
    return true;
}

bool kern_outfile_write(kern_outfile *o, const void *p, size_t n) {
    const char *c = p;
    while (n > 0 && !o->error) {
        size_t chunk = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
        ssize_t k = write(o->fd, c, chunk);
        if (k < 0) {
            if (errno != EINTR)
                o->error = errno;
            continue;
        }
        if (k == 0) {
            o->error = EIO;
            break;
        }
        c += k;
        n -= (size_t)k;
    }
    return !o->error;
}

static void release(kern_outfile *o) {
    free(o->tmp);
    free(o->target);
    o->tmp = o->target = NULL;
    o->fd = -1;
}

void kern_outfile_abort(kern_outfile *o) {
    if (o->fd >= 0)
        close(o->fd);
    if (o->tmp)
        unlink(o->tmp); /* our own temporary file, never anything else */
    release(o);
}

bool kern_outfile_commit(kern_outfile *o, const char *path, char *err, size_t errlen) {
    int e = o->error;
    if (close(o->fd) != 0 && !e)
        e = errno;
    o->fd = -1;
    if (!e && o->tmp && rename(o->tmp, o->target) != 0)
        e = errno;
    if (e) {
        if (o->tmp)
            unlink(o->tmp);
        release(o);
        return fail(err, errlen, "write", path, e);
    }
    release(o);
    return true;
}

/* The canonical name of an output path: its links followed, its directory's real path. */
static char *canonical(const char *path) {
    bool via_proc;
    char *t = follow_links(path, &via_proc);
    if (!t)
        return NULL;
    char *slash = strrchr(t, '/');
    char *dir = slash ? (slash == t ? strdup("/") : dup_n(t, (size_t)(slash - t))) : strdup(".");
    const char *base = slash ? slash + 1 : t;
    char *real = dir ? realpath(dir, NULL) : NULL;
    char *r = NULL;
    if (real) {
        size_t n = strlen(real) + strlen(base) + 2;
        r = malloc(n);
        if (r)
            snprintf(r, n, "%s/%s", real, base);
    }
    free(real);
    free(dir);
    free(t);
    return r;
}

char *kern_outfile_key(const char *path) {
    struct stat st;
    kern_buf key = {0};
    if (stat(path, &st) == 0) {
        if (S_ISCHR(st.st_mode))
            return NULL; /* written in place: any number of outputs may go there */
        buf_printf(&key, "file %ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
    } else {
        char *c = canonical(path);
        buf_printf(&key, "path %s", c ? c : path);
        free(c);
    }
    return buf_take(&key);
}
