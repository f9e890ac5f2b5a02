/* modfile.h - the module file of a GPU target (docs/gpu-abi.md, "Module files"), in one
 * place for its writer (kc_write_module_file, backends/codegen.c, and the tests) and its
 * reader (rt_modfile_parse, runtime/gpu.c), so the two cannot disagree:
 *     kern-module 2 TARGET\n
 *     meta LEN\n<LEN bytes of metadata text>\n
 *     code LEN\n<LEN bytes of code>\n
 *     sum HEX\n
 * TARGET a registry name (cuda, amdgpu, vulkan), LEN decimal, HEX the 16 lowercase hex
 * digits of the FNV-1a 64-bit hash of every byte before the `sum` line. The hash is
 * against accidental damage (a flipped byte, a truncated copy): any change of one byte
 * changes it, and any other damage goes unnoticed with probability 2^-64. It is no
 * signature: a module is code, load only modules you trust. Version 1 had no `sum` line. */
#ifndef KERN_MODFILE_H
#define KERN_MODFILE_H

#include <stddef.h>
#include <stdint.h>

enum {
    KERN_MODFILE_VERSION = 2,
    KERN_MODFILE_SUM_LEN = 21, /* "sum " + 16 hex digits + "\n" */
};

#define KERN_FNV1A64_INIT 0xcbf29ce484222325ull

/* FNV-1a 64 of len bytes, continuing from h (KERN_FNV1A64_INIT to start). */
uint64_t kern_fnv1a64(uint64_t h, const void *data, size_t len);

/* The whole module file of target's metadata and code, malloc'd (*len bytes); NULL when
 * memory runs out. */
char *kern_modfile_build(const char *target, const char *meta, size_t metalen, const void *code,
                         size_t codelen, size_t *len);

#endif
