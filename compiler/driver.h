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
