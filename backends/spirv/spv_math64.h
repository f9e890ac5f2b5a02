/* spv_math64.h - f64 sin, exp, log, ... as SPIR-V functions (spv_math64.c): GLSL.std.450
 * has them for 32-bit floats only. */
#ifndef KERN_SPV_MATH64_H
#define KERN_SPV_MATH64_H

#include <stdbool.h>
#include <stdint.h>

#include "../../ir/ir.h"
#include "spv_builder.h"

enum { SPV_MATH64_FUNCS = 16 };

/* Which functions a module calls (ids allocated on first use) and which are written. */
typedef struct spv_math64 {
    uint32_t fn[SPV_MATH64_FUNCS];
    bool done[SPV_MATH64_FUNCS];
} spv_math64;

/* A call of the f64 function of code (IR_SIN ... IR_POW; x has 1 or 2 operands) in the
 * current function; its body is written by spv_math64_finish. */
uint32_t spv_math64_call(spv_builder *b, spv_math64 *st, ir_opcode code, const uint32_t *x);
/* Writes the bodies of the functions called so far (after the entry points). */
void spv_math64_finish(spv_builder *b, spv_math64 *st);

#endif
