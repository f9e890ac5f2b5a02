/* spv_tools.c - what the SPIR-V backend takes from SPIRV-Tools: validation and the text
 * form, both in common/spvtools.c (the runtime validates with the same function; only that
 * file includes libspirv.h, whose header defines a global). */
#include "../../common/spvtools.h"
#include "spv_emit.h"

bool kc_spirv_validate(const uint32_t *words, size_t nwords, char *err, size_t errlen) {
    return kern_spirv_validate(words, nwords, err, errlen);
}

char *kc_spirv_disassemble(const uint32_t *words, size_t nwords, char *err, size_t errlen) {
    return kern_spirv_disassemble(words, nwords, err, errlen);
}
