/* gpu.h - the host side of the GPU kernel ABI (docs/gpu-abi.md) as pure functions, shared
 * by the GPU devices (cuda.c) and unit-tested without a GPU: the kernel parameters of a
 * launch, the grid of a task, and the module-file container.
 *
 * Parameters (rt_gpu_pack_params): per kernel parameter in order, an array of rank r as
 * its data address (8 bytes) then r extents (i64), a scalar as its value (bool 1 byte,
 * i32/u32/f32 4, i64/f64 8); then the error record's address, the adstack heap's
 * address, the slots (i64), and per adstack its offset and capacity (i64 each). Each
 * value is stored in one buffer at an offset aligned to its size (the layout CUDA's
 * CU_LAUNCH_PARAM_BUFFER_POINTER expects), and ptrs[i] points at parameter i (CUDA's
 * kernelParams). Allocation handles of a GPU device are device addresses (the array
 * argument's `mem` is converted with (uint64_t)(uintptr_t)).
 *
 * Grid (rt_gpu_grid): a serial task runs on 1 thread; a parallel task with a host-known
 * count on min(resident blocks, ceil(count / 256)) blocks of 256 threads (none when the
 * count is 0: the task is skipped), with an unknown count (-1) on the full resident
 * grid; a kernel with adstacks never gets more threads than its slots.
 *
 * Module files (rt_modfile_parse): the container `kernc build --target=cuda|amdgpu|vulkan`
 * writes (common/modfile.h, its one definition):
 *     kern-module 2 TARGET\n
 *     meta LEN\n<LEN bytes of metadata text>\n
 *     code LEN\n<LEN bytes of code>\n
 *     sum HEX\n                  FNV-1a 64 of every byte before this line, 16 hex digits
 * with TARGET `cuda` (PTX), `amdgpu` (an HSACO code object) or `vulkan` (SPIR-V); nothing
 * may follow. A damaged file is refused with "checksum mismatch", a version 1 file (no
 * `sum`) with a message to rebuild it. */
#ifndef KERN_RT_GPU_H
#define KERN_RT_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"

enum { RT_GPU_BLOCK = 256 };

typedef struct rt_gpu_params {
    unsigned char *buf; /* the values */
    size_t len;         /* bytes used in buf */
    void **ptrs;        /* per parameter: its address in buf */
    size_t *offsets;    /* per parameter: its offset in buf */
    size_t *sizes;      /* per parameter: its size */
    int n;              /* parameters */
} rt_gpu_params;

/* Packs the parameters of a launch of mk with args (mk->nparams of them) into *out
 * (freed with rt_gpu_params_free, also after a failure). ad_layout holds 2 x
 * mk->nadstacks values (NULL when there are none). KERN_ERR_OUT_OF_MEMORY when host
 * memory runs out, KERN_ERR_INTERNAL for a parameter of an unknown type. */
kern_status rt_gpu_pack_params(const kern_meta_kernel *mk, const rt_launch_arg *args,
                               uint64_t err_addr, uint64_t heap_addr, int64_t slots,
                               const int64_t *ad_layout, rt_gpu_params *out, char *err,
                               size_t errlen);
void rt_gpu_params_free(rt_gpu_params *p);

/* The grid of a task: *blocks blocks of *threads threads (*blocks 0: nothing to run).
 * resident_blocks >= 1 is the device's full grid; slots 0 means no adstack limit. */
void rt_gpu_grid(bool parallel, int64_t count, int64_t resident_blocks, int64_t slots,
                 unsigned *blocks, unsigned *threads);

typedef struct rt_modfile {
    char target[16]; /* "cuda", "amdgpu" */
    const char *meta;
    size_t meta_len;
    const void *code;
    size_t code_len;
} rt_modfile;

/* Whether data starts like a module file ("kern-module "). */
bool rt_modfile_is(const void *data, size_t len);
/* Parses a module file held in data (meta and code point into it). False with a message
 * (naming what is wrong and where) on malformed input; never reads outside data. */
bool rt_modfile_parse(const void *data, size_t len, rt_modfile *out, char *err, size_t errlen);

#endif
