/* fuzz_ir.c - libFuzzer harness for the IR text parser and the verifier (docs/ir.md).
 *
 * Each input is IR text. ir_parse must either return a module or report diagnostics; a
 * module that parses is run through ir_verify, which must report, never abort. A module
 * that also verifies must round-trip: print -> parse -> print gives the same bytes
 * (ir.h's promise), and a mismatch traps. Set KERN_FUZZ_NO_ROUNDTRIP=1 to skip that part. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/context.h"
#include "../../common/util.h"
#include "../../ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int roundtrip = 1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *e = getenv("KERN_FUZZ_NO_ROUNDTRIP");
    if (e && *e && strcmp(e, "0") != 0)
        roundtrip = 0;
    return 0;
}

static void check_roundtrip(kc_ctx *ctx, const ir_module *m) {
    kern_buf b1 = {0}, b2 = {0};
    ir_print(&b1, m, NULL);
    const kern_source *src = kc_add_source(ctx, "printed.ir", b1.data ? b1.data : "", b1.len);
    ir_module *m2 = ir_parse(src->text, src->len, src, &ctx->diags);
    if (!m2) {
        fprintf(stderr, "fuzz_ir: the printed module does not parse back:\n%.*s\n", (int)b1.len,
                b1.data ? b1.data : "");
        diag_print_all(stderr, &ctx->diags);
        __builtin_trap();
    }
    ir_print(&b2, m2, NULL);
    if (b1.len != b2.len || (b1.len && memcmp(b1.data, b2.data, b1.len) != 0)) {
        fprintf(stderr,
                "fuzz_ir: print -> parse -> print differs:\n--- first\n%.*s\n"
                "--- second\n%.*s\n",
                (int)b1.len, b1.data ? b1.data : "", (int)b2.len, b2.data ? b2.data : "");
        __builtin_trap();
    }
    ir_module_free(m2);
    buf_free(&b1);
    buf_free(&b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kc_ctx *ctx = kc_ctx_new();
    const kern_source *src = kc_add_source(ctx, "fuzz.ir", (const char *)data, size);
    ir_module *m = ir_parse(src->text, src->len, src, &ctx->diags);
    if (m) {
        if (ir_verify(m, &ctx->diags) && roundtrip)
            check_roundtrip(ctx, m);
        ir_module_free(m);
    }
    kc_ctx_free(ctx);
    return 0;
}
