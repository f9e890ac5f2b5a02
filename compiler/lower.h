/* lower.h - lowering of a checked AST to the structured SSA IR (lower.c). */
#ifndef KERN_LOWER_H
#define KERN_LOWER_H

#include "../ir/ir.h"
#include "ast.h"

/* Lowers every kernel of a file that passed fe_check(). Funcs are inlined at their call
 * sites; mutable locals become SSA values carried through ifs and loops; break, continue
 * and return become flags. Never fails on a checked tree. */
ir_module *fe_lower(kc_ctx *ctx, const fe_file *file);

#endif
