/* lower_math.h - the math expansions of passes/lower_semantics.c (lower_math.c). Not a
 * public interface. */
#ifndef KERN_PASSES_LOWER_MATH_H
#define KERN_PASSES_LOWER_MATH_H

#include "passes.h"

/* The replacement of erf, erfc, log1p, expm1, cbrt, hypot or stopgrad, built at b from
 * existing ops; NULL for any other op. */
ir_value *lower_math_op(ir_builder *b, ir_op *op);

#endif
