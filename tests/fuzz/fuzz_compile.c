/* fuzz_compile.c - libFuzzer harness for the frontend plus the lowering to IR, the
 * optimization pipeline and reverse mode (kc_compile_source with KC_GRAD_POSSIBLE: the
 * global-access check and K.grad of every kernel that passes it).
 *
 * Each input is one .kern source compiled in a fresh context. When it compiles, the module
 * must pass the IR verifier: the lowering and the passes promise well-formed IR for every
 * program the checker accepts, so a verifier error here is a compiler bug and traps. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../common/context.h"
#include "../../compiler/driver.h"
#include "../../ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_POSSIBLE;
    ir_module *m = kc_compile_source(ctx, "fuzz.kern", (const char *)data, size);
    if (m) {
        if (!ir_verify(m, &ctx->diags)) {
            diag_print_all(stderr, &ctx->diags);
            __builtin_trap();
        }
        ir_module_free(m);
    }
    kc_ctx_free(ctx);
    return 0;
}
