/* spvtools.c - what kern takes from SPIRV-Tools (spvtools.h). The only file that includes
 * libspirv.h: its header defines a global, so two files including it cannot link together. */
#include "spvtools.h"

#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kern_spirv_validate(const uint32_t *w, size_t n, char *err, size_t errlen) {
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
    spv_validator_options vo = spvValidatorOptionsCreate();
    spv_const_binary_t bin = {w, n};
    spv_diagnostic dg = NULL;
    bool ok = ctx && vo && spvValidateWithOptions(ctx, vo, &bin, &dg) == SPV_SUCCESS;
    if (!ok && err && errlen) {
        snprintf(err, errlen, "invalid SPIR-V: %s",
                 dg && dg->error ? dg->error : "the validator failed (no message)");
        for (char *p = err; *p; p++) /* one line */
            if (*p == '\n')
                *p = ' ';
    }
    spvDiagnosticDestroy(dg);
    spvValidatorOptionsDestroy(vo);
    spvContextDestroy(ctx);
    return ok;
}

char *kern_spirv_disassemble(const uint32_t *words, size_t nwords, char *err, size_t errlen) {
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
