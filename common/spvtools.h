/* spvtools.h - what kern takes from SPIRV-Tools (SPV_ENV_VULKAN_1_2), one definition for
 * the compiler (kc_spirv_validate, debug builds and the tests) and the runtime (rt_code_check,
 * before a Vulkan driver sees a module). */
#ifndef KERN_SPVTOOLS_H
#define KERN_SPVTOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the n words are a valid SPIR-V module for Vulkan 1.2; false with "invalid
 * SPIR-V: " and the validator's message, on one line, in err. */
bool kern_spirv_validate(const uint32_t *w, size_t n, char *err, size_t errlen);

/* The text form (friendly names, indented), malloc'd; NULL with a message in err. */
char *kern_spirv_disassemble(const uint32_t *w, size_t n, char *err, size_t errlen);

#endif
