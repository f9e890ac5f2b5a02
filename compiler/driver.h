/* driver.h - the compiler library's entry points, used by kernc, the tests, the fuzz
 * harnesses and the benchmarks. Every function reports user errors to ctx->diags and
 * returns NULL/false; none prints or exits. */
#ifndef KERN_DRIVER_H
#define KERN_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/context.h"
#include "../ir/ir.h"
#include "ast.h"

/* The compiler's limits (docs/language.md, "Limits"): every one ends in a diagnostic, so
 * compiling takes bounded time and memory and never overflows the stack.
 *   KC_MAX_SOURCE_BYTES  a source longer than this is an error (kc_read_source stops
 *                        reading one byte past it);
 *   KC_MAX_INLINE_DEPTH  funcs are inlined at each call: a chain of calls deeper than this
 *                        (a kernel calling f calling g ... ) is an error;
 *   KC_MAX_INLINED_NODES the syntax nodes that inlining adds to one kernel (each call
 *                        copies the callee's body, with the callee's own calls inlined):
 *                        more is an error, so exponential inlining stops at check time;
 *   KC_MAX_NESTING       statements and expressions nested in one kernel once its funcs
 *                        are inlined (a call nested 100 deep in a func called from 100
 *                        deep counts 200): beyond it, an error; the IR it becomes stays
 *                        well within what the verifier and the passes take (2000).
 * The parser limits nesting within one body (200 levels of blocks or parentheses, 1000 of
 * operators), so a kernel without calls never reaches KC_MAX_NESTING. */
enum {
    KC_MAX_SOURCE_BYTES = 8 << 20,
    KC_MAX_INLINE_DEPTH = 64,
    KC_MAX_INLINED_NODES = 1000000,
    KC_MAX_NESTING = 1500,
};

/* Reads a source file of at most KC_MAX_SOURCE_BYTES (+1 byte, which the check then
 * reports); NULL with errno set when it cannot be read. The caller frees the text. */
char *kc_read_source(const char *path, size_t *len);

/* Lexes, parses and checks a source. Returns the annotated tree, or NULL when any error
 * was reported (the partial tree is then not returned). */
fe_file *kc_check_source(kc_ctx *ctx, const char *path, const char *text, size_t len);
/* Parses only (for --emit=ast of a file that does not type-check, and for the parser
 * tests); NULL when a syntax error was reported. */
fe_file *kc_parse_source(kc_ctx *ctx, const char *path, const char *text, size_t len);
/* check + lower + the optimization pipeline of ctx->opts.opt_level. The caller frees the
 * module with ir_module_free(). */
ir_module *kc_compile_source(kc_ctx *ctx, const char *path, const char *text, size_t len);

#endif
