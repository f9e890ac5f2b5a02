/* spv_tools.c - what the SPIR-V backend takes from SPIRV-Tools: validation and the text
 * form. The only file that includes libspirv.h (its static libraries have C++ inside). */
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spv_emit.h"

bool kc_spirv_validate(const uint32_t *words, size_t nwords, char *err, size_t errlen) {
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
    spv_const_binary_t bin = {words, nwords};
    spv_diagnostic dg = NULL;
    spv_validator_options vo = spvValidatorOptionsCreate();
    spv_result_t r = spvValidateWithOptions(ctx, vo, &bin, &dg);
    bool ok = r == SPV_SUCCESS;
    if (!ok)
        snprintf(err, errlen, "SPIR-V validation: %s",
                 dg && dg->error ? dg->error : "failed (no message)");
    spvDiagnosticDestroy(dg);
    spvValidatorOptionsDestroy(vo);
    spvContextDestroy(ctx);
    return ok;
}

char *kc_spirv_disassemble(const uint32_t *words, size_t nwords, char *err, size_t errlen) {
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
    spv_text text = NULL;
    spv_diagnostic dg = NULL;
    spv_result_t r = spvBinaryToText(
        ctx, words, nwords,
        SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT, &text, &dg);
    char *out = NULL;
    if (r == SPV_SUCCESS && text) {
        out = malloc(text->length + 1);
        if (out) {
            memcpy(out, text->str, text->length);
            out[text->length] = '\0';
        } else {
            snprintf(err, errlen, "out of memory");
        }
    } else {
        snprintf(err, errlen, "SPIR-V disassembly: %s", dg && dg->error ? dg->error : "failed");
    }
    spvTextDestroy(text);
    spvDiagnosticDestroy(dg);
    spvContextDestroy(ctx);
    return out;
}
