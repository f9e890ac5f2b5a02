/* fuzz_frontend.c - libFuzzer harness for the whole frontend: lexer, parser, semantic
 * analysis and the diagnostics printer.
 *
 * Each input is one .kern source, checked in a fresh compiler context that is freed
 * afterwards, so state never leaks from one input to the next and LeakSanitizer sees every
 * allocation the frontend forgets. Every outcome is fine except a crash, a sanitizer report,
 * a leak or a hang: user errors must come back as diagnostics (docs/reference.md section 10:
 * "never a crash"). The diagnostics are printed to /dev/null so that the caret printer runs on
 * hostile locations too.
 *
 * Built by tests/fuzz/build.sh (docs/building.md); run with tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../common/context.h"
#include "../../compiler/driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    kc_ctx *ctx = kc_ctx_new();
    fe_file *f = kc_check_source(ctx, "fuzz.kern", (const char *)data, size);
    /* A tree is returned exactly when no error was reported. */
    if (f && diag_errors(&ctx->diags) != 0)
        __builtin_trap();
    if (devnull)
        diag_print_all(devnull, &ctx->diags);
    kc_ctx_free(ctx);
    return 0;
}
