/* half.h - f16 and bf16 conversions on the host: the compiler's constant folding, the
 * interpreter and the runtime share these (language.md 11.4; docs/reference.md).
 *
 * Every conversion to f16 or bf16 rounds to nearest, ties to even, from the exact value
 * (an f64 is rounded once, not through f32); overflow gives an infinity of the sign, NaN
 * stays NaN (quiet). */
#ifndef KERN_HALF_H
#define KERN_HALF_H

#include <stdint.h>

/* x rounded to the nearest f16 / bf16 value, as a double. */
double kern_round_f16(double x);
double kern_round_bf16(double x);
/* The bits of x rounded to f16 / bf16. */
uint16_t kern_f16_bits(double x);
uint16_t kern_bf16_bits(double x);
/* The value of f16 / bf16 bits (exact in float). */
float kern_f16_value(uint16_t bits);
float kern_bf16_value(uint16_t bits);

#endif
