/* cache.h - the compile cache of JIT modules on disk (docs/runtime.md, "The compile
 * cache"): a module compiled from source, or one of its lazily built gradients, is kept as
 * a module file (common/modfile.h: its metadata text and its code: the CPU's object files,
 * PTX, SPIR-V) named by a SHA-256 key of everything that changes the code, so that a later
 * process that compiles the same source with the same options loads it instead.
 *
 * Safe against concurrent processes (entries are written to a temporary file in the same
 * directory and renamed into place, so a reader sees a whole entry or none) and against
 * damage (a reader checks the entry's size and checksum and removes a damaged one, which
 * is then rebuilt, never loaded). A cache that cannot be used (a directory that cannot be
 * made or written, a full disk) is no cache: compiling works as without one. */
#ifndef KERN_JIT_CACHE_H
#define KERN_JIT_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/context.h"
#include "../include/kern.h"
#include "../runtime/gpu.h"

enum { JIT_CACHE_KEY_HEX = 64 };

/* The cache directory of a context with options o into dir (created, with its parents,
 * when missing): o->cache_dir, else $KERN_CACHE_DIR, else $XDG_CACHE_HOME/kern, else
 * $HOME/.cache/kern. false when the cache is off (o->no_cache) or there is no usable
 * directory. */
bool jit_cache_dir(const kern_context_options *o, char *dir, size_t size);

/* Whether compiling with o may go through the cache: not when the compiler prints its IR
 * (KERN_DEBUG), which a cached module would skip. */
bool jit_cache_usable(const kc_options *o);

/* The key (64 lowercase hex digits and a NUL) of compiling `len` bytes of source, named
 * `name`, with o for target `target`: SHA-256 of the source, its name, every option that
 * changes the code, the target and architecture, the host's CPU and features, LLVM's and
 * kern's versions and the build of kern's compiler (its build id). */
void jit_cache_key(const char *target, const char *name, const char *source, size_t len,
                   const kc_options *o, char key[JIT_CACHE_KEY_HEX + 1]);

/* The entry of key in dir, read whole (malloc'd; the caller frees) with its parts in *mf,
 * or NULL when there is none. An entry that is damaged (truncated, a bad checksum, another
 * target's) is removed and NULL returned. */
char *jit_cache_read(const char *dir, const char *key, const char *target, rt_modfile *mf);
/* Removes the entry of key (one that failed to load). */
void jit_cache_remove(const char *dir, const char *key);
/* Writes the entry of key (atomically: a temporary file, fsync, rename). Failures (a full
 * disk, an unwritable directory) leave nothing behind and are not reported. */
void jit_cache_write(const char *dir, const char *key, const char *target, const char *meta,
                     size_t metalen, const char *code, size_t codelen);

#endif
