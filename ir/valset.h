/* valset.h - a set of IR values (open addressing on the pointer): what an analysis keeps
 * per value ("varying", "uniform") without numbering the values. Empty when zeroed. */
#ifndef KERN_IR_VALSET_H
#define KERN_IR_VALSET_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"

typedef struct ir_valset {
    const ir_value **keys;
    size_t cap, len; /* cap is 0 or a power of two */
} ir_valset;

/* Adds v; returns whether it was new. */
bool ir_valset_add(ir_valset *s, const ir_value *v);
bool ir_valset_has(const ir_valset *s, const ir_value *v);
void ir_valset_clear(ir_valset *s);
void ir_valset_free(ir_valset *s);

#endif
