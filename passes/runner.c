/* runner.c - the pass runner: what happens after each pass (ir_pass_after) and the
 * standard optimization pipeline (ir_optimize).
 *
 * After a pass (IR_PASS calls ir_pass_after):
 *   - debug builds (KERN_DEBUG_BUILD) verify the module after every pass that made
 *     progress, and abort with the IR and the errors when it is broken;
 *   - the module's debug bits (ir_module.debug, set by the driver from kc_options.pass_debug,
 *     which kc_options_from_env reads from KERN_DEBUG, a comma-separated list):
 *       print      prints the IR to stderr after every pass that made progress, under a
 *                  header naming the pass;
 *       roundtrip  checks print -> parse -> print after every pass that made progress and
 *                  aborts with the first differing line when the texts differ;
 *       verify     verifies after every pass, also in release builds.
 *
 * Pipeline (docs/passes.md): opt level 0 runs nothing; levels 1..3 run fold, simplify,
 * cse, dce in that order, repeated until a round makes no progress, at most
 * OPT_MAX_ROUNDS rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

enum { OPT_MAX_ROUNDS = 8 };

/* Reports the first line where the two texts differ, then aborts. */
static _Noreturn void roundtrip_mismatch(const char *pass, const char *a, const char *b) {
    int line = 1;
    const char *la = a, *lb = b; /* starts of the current lines */
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    fprintf(stderr,
            "kern: KERN_DEBUG=roundtrip: the IR after %s does not print back the same after "
            "parsing; first difference at line %d:\n  printed:  %.*s\n  reprinted: %.*s\n",
            pass, line, (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
    abort();
}

static void check_roundtrip(ir_module *m, const char *pass) {
    kern_buf first = {0}, second = {0};
    ir_print(&first, m, NULL);
    arena mem;
    arena_init(&mem);
    diag_sink sink;
    diag_init(&sink, &mem);
    kern_source src = {"<KERN_DEBUG=roundtrip>", first.data ? first.data : "", first.len};
    ir_module *back = ir_parse(src.text, src.len, &src, &sink);
    if (!back) {
        fprintf(stderr,
                "kern: KERN_DEBUG=roundtrip: the IR printed after %s does not parse:\n",
                pass);
        diag_print_all(stderr, &sink);
        fprintf(stderr, "--- the IR ---\n%s", src.text);
        abort();
    }
    ir_print(&second, back, NULL);
    const char *a = src.text, *b = second.data ? second.data : "";
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "--- printed after %s ---\n%s--- parsed and printed again ---\n%s",
                pass, a, b);
        roundtrip_mismatch(pass, a, b);
    }
    ir_module_free(back);
    diag_free(&sink);
    arena_free(&mem);
    buf_free(&first);
    buf_free(&second);
}

void ir_pass_after(ir_module *m, const char *name, bool progress) {
    unsigned f = m->debug;
#ifdef KERN_DEBUG_BUILD
    bool verify = progress || (f & IR_DEBUG_VERIFY);
#else
    bool verify = f & IR_DEBUG_VERIFY;
#endif
    if (verify)
        ir_verify_or_die(m, name);
    if (!progress)
        return;
    if (f & IR_DEBUG_PRINT) {
        kern_buf b = {0};
        ir_print(&b, m, NULL);
        fprintf(stderr, "// ---- IR after %s ----\n%s", name, b.data ? b.data : "");
        buf_free(&b);
    }
    if (f & IR_DEBUG_ROUNDTRIP)
        check_roundtrip(m, name);
}

void ir_optimize(ir_module *m, int opt_level) {
    if (opt_level <= 0)
        return;
    for (int round = 0; round < OPT_MAX_ROUNDS; round++) {
        bool progress = false;
        IR_PASS(progress, m, ir_opt_fold);
        IR_PASS(progress, m, ir_opt_simplify);
        IR_PASS(progress, m, ir_opt_cse);
        IR_PASS(progress, m, ir_opt_dce);
        if (!progress)
            break;
    }
}
