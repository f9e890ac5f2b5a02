/* modfile.h - the module file of a GPU target (docs/gpu-abi.md, "Module files"), in one
 * place for its writer (kc_write_module_file, backends/codegen.c, and the tests) and its
 * reader (rt_modfile_parse, runtime/gpu.c), so the two cannot disagree:
 *     kern-module 2 TARGET\n
 *     meta LEN\n<LEN bytes of metadata text>\n
 *     code LEN\n<LEN bytes of code>\n
 *     sum HEX\n
 * TARGET a registry name (cuda, amdgpu, vulkan), LEN decimal, HEX the 16 lowercase hex
 * digits of kern_modfile_sum of every byte before the `sum` line. The sum is against
 * accidental damage (a flipped byte, a truncated copy): any change of one byte changes it,
 * and other damage goes unnoticed with a probability near 2^-64. It is no signature: a
 * module is code, load only modules you trust. Version 1 had no `sum` line. */
#ifndef KERN_MODFILE_H
#define KERN_MODFILE_H

#include <stddef.h>
#include <stdint.h>

enum {
    KERN_MODFILE_VERSION = 2,
    KERN_MODFILE_SUM_LEN = 21, /* "sum " + 16 hex digits + "\n" */
};

/* The module file's checksum of len bytes: FNV-1a's step over 64-bit little-endian words
 * (then the last len % 8 bytes as one word, then len), each step followed by h ^= h >> 32:
 *     h = 0xcbf29ce484222325;  for each word w: h = (h ^ w) * 0x100000001b3; h ^= h >> 32
 * Every step is a bijection of h for a given word and one-to-one in the word for a given
 * h, so a change of any one word (any one byte) always changes the sum; the shift feeds
 * the high bits back, so two changes do not cancel the way FNV over words lets bit 63
 * changes cancel. Eight times fewer multiplications than byte-wise FNV-1a (the check
 * runs on every module load and in every fuzz-module execution). */
uint64_t kern_modfile_sum(const void *data, size_t len);

/* The whole module file of target's metadata and code, malloc'd (*len bytes); NULL when
 * memory runs out. */
char *kern_modfile_build(const char *target, const char *meta, size_t metalen, const void *code,
                         size_t codelen, size_t *len);

#endif
