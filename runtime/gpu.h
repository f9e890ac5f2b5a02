/* gpu.h - the host side of the GPU kernel ABI (docs/gpu-abi.md) as pure functions, shared
 * by the GPU devices (cuda.c) and unit-tested without a GPU: the kernel parameters of a
 * launch, the grid of a task, the module-file container and the checks of a module's code.
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
 * grid; a kernel with adstacks never gets more threads than its slots. A spread task
 * (kern_meta_task.spread) of a kernel without adstacks gets ceil(count / 256) blocks, a
 * thread per work item: the hardware hands out blocks as SMs free up, which balances
 * items of uneven cost (forward kernels 5 to 10% faster on the H200, bench/README.md).
 *
 * Module files (rt_modfile_parse): the container `kernc build --target=cuda|amdgpu|vulkan`
 * writes (common/modfile.h, its one definition):
 *     kern-module 2 TARGET\n
 *     meta LEN\n<LEN bytes of metadata text>\n
 *     code LEN\n<LEN bytes of code>\n
 *     sum HEX\n                  kern_modfile_sum (common/modfile.h) of every byte
 *                                before this line, 16 hex digits
 * with TARGET `cuda` (PTX), `amdgpu` (an HSACO code object) or `vulkan` (SPIR-V); nothing
 * may follow. A damaged file is refused with "checksum mismatch", a version 1 file (no
 * `sum`) with a message to rebuild it.
 *
 * Code checks (rt_code_check): what a GPU module's code passes before any loader or driver
 * sees it, against the metadata of the module (docs/runtime.md, "Loading modules
 * safely"). rt_module_create runs them for every module whose code the context's device
 * runs, from a file or from the JIT; the fuzz harness and the tests call them without a
 * device. Each is false with a message naming the kernel and what is wrong. */
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
 * resident_blocks >= 1 is the device's full grid; slots 0 means no adstack limit; spread:
 * a thread per work item where the count is known (the task is spread and its kernel has
 * no adstacks). */
void rt_gpu_grid(bool parallel, bool spread, int64_t count, int64_t resident_blocks, int64_t slots,
                 unsigned *blocks, unsigned *threads);

typedef struct rt_modfile {
    char target[16]; /* "cuda", "amdgpu" */
    const char *meta;
    size_t meta_len;
    const void *code;
    size_t code_len;
} rt_modfile;

/* The parameter values of a launch of mk in rt_gpu_pack_params's order: the count of an
 * entry point's parameters (a sizer's: the count without the last 2 + 2 nadstacks). */
int rt_gpu_param_count(const kern_meta_kernel *mk);
/* Whether adstack s of mk needs a sizer entry point "kern_<K>__s<s>" (its capacity reads
 * array elements; docs/gpu-abi.md). */
bool rt_gpu_needs_sizer(const kern_meta_kernel *mk, int s);

/* Whether data starts like a module file ("kern-module "). */
bool rt_modfile_is(const void *data, size_t len);
/* Parses a module file held in data (meta and code point into it). False with a message
 * (naming what is wrong and where) on malformed input; never reads outside data. */
bool rt_modfile_parse(const void *data, size_t len, rt_modfile *out, char *err, size_t errlen);

/* The check of img's kind (below) against meta; host code passes (module.c checks a shared
 * object's ELF image before dlopen, the JIT's is the compiler's own). */
bool rt_code_check(const kern_meta *meta, const kern_code_image *img, char *err, size_t errlen);
/* SPIR-V (spvcheck.c): SPIRV-Tools' validator, then kern's layout (docs/spirv-abi.md). */
bool rt_spirv_check(const void *code, size_t len, const kern_meta *meta, char *err, size_t errlen);
/* Whether the pipeline layout of mk has binding (0-4, 5 + p for each array parameter p,
 * and the scratch buffer's): what vk_get_kernel creates and rt_spirv_check requires. */
bool rt_spirv_binding_in_layout(const kern_meta_kernel *mk, uint32_t binding);
/* Whether kernel mk's layout has the scratch buffer of replicas (common/spvblock.h): a
 * parallel task that is not spread (its adds of floats may go to replicas). */
bool rt_spirv_has_scratch(const kern_meta_kernel *mk);
/* PTX (ptxcheck.c): text without NULs or control characters, `.version`, `.target` and
 * `.address_size 64` first, and per task (and needed sizer) of every kernel an `.entry` of
 * the right name whose parameters have the count and sizes rt_gpu_pack_params passes. */
bool rt_ptx_check(const void *code, size_t len, const kern_meta *meta, char *err, size_t errlen);
/* An HSACO code object (elfcheck.c): a well-formed AMDGPU ELF shared object (rt_elf_check's
 * checks, section headers and symbol tables inside the file), with a kernel descriptor
 * "kern_<K>__t<t>.kd" per task whose code lies in an executable segment. */
bool rt_hsaco_check(const void *code, size_t len, const kern_meta *meta, char *err, size_t errlen);

#endif
