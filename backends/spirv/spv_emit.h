/* spv_emit.h - kern's SPIR-V backend (docs/backend-spirv.md, docs/spirv-abi.md): the
 * structured IR to one SPIR-V 1.5 module for Vulkan, and the SPIRV-Tools services the
 * backend and its tests use (validation, disassembly). */
#ifndef KERN_SPV_EMIT_H
#define KERN_SPV_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/context.h"
#include "../../ir/ir.h"

/* The module of m: one GLCompute entry point per task of every kernel. Returns the words
 * (malloc'd, *nwords of them), or NULL with a message naming the kernel and the .kern line
 * (an op the target cannot express). Debug builds of kern validate what they emit. */
uint32_t *kc_spirv_emit(const ir_module *m, const kc_options *o, size_t *nwords, char *err,
                        size_t errlen);

/* spvValidate for SPV_ENV_VULKAN_1_2 (spv_tools.c); false with SPIRV-Tools' message. */
bool kc_spirv_validate(const uint32_t *words, size_t nwords, char *err, size_t errlen);
/* The text form (spvBinaryToText), malloc'd; NULL with a message. */
char *kc_spirv_disassemble(const uint32_t *words, size_t nwords, char *err, size_t errlen);

/* Metal Shading Language for every entry point (spv_msl.c, SPIRV-Cross), malloc'd; NULL
 * with a message (a module with f64, which Metal lacks; a translation failure). */
char *kc_spirv_to_msl(const uint32_t *words, size_t nwords, char *err, size_t errlen);

#endif
