/* ir_priv.h - helpers shared by the IR's printer, parser and verifier; not a public
 * interface (passes and the frontend use ir.h only).
 *
 * The namer gives every value of a kernel its text name: parameters print by name, every
 * other value by a number handed out in print order (op results before the op's region
 * arguments, regions in order). An op with K >= 2 results takes one number N for all of
 * them: %N:K at the definition, %N#i at the uses. */
#ifndef KERN_IR_PRIV_H
#define KERN_IR_PRIV_H

#include "ir.h"

typedef struct ir_namer {
    const ir_kernel *k;
    const void **keys; /* open addressing: ir_value* and ir_op* keys */
    int64_t *vals;     /* value: number, or -1 - parameter index; op: its first number */
    uint32_t cap, len;
    uint32_t next; /* numbers handed out so far */
} ir_namer;

/* Numbers every value of k (NULL: an empty namer). */
void ir_namer_init(ir_namer *n, const ir_kernel *k);
void ir_namer_free(ir_namer *n);
/* The number of v (or of its result group); false when v is not a value of the kernel.
 * *param is set to the parameter index for a parameter, -1 otherwise. */
bool ir_namer_get(const ir_namer *n, const ir_value *v, int64_t *num, int *param);
/* The number the op's first result (or first region argument) took; what every value
 * printed before the op is numbered below. */
int64_t ir_namer_op_start(const ir_namer *n, const ir_op *op);
/* Writes v's reference: %name, %N, %N#i; %<null> / %<undef> for a missing value or one
 * that is not part of the kernel. */
void ir_namer_put(kern_buf *b, const ir_namer *n, const ir_value *v);
/* True when s is a plain name: [A-Za-z_.][A-Za-z0-9_.]* (no leading digit). */
bool ir_is_plain_name(const char *s, size_t len);

/* Called by the printer after the kernel header (op NULL) and after each op's first line,
 * with the op's indentation; writes whole lines (the verifier writes `// error:` lines). */
typedef void (*ir_print_hook)(kern_buf *out, const ir_kernel *k, const ir_op *op, int indent,
                              void *user);
void ir_print_hooked(kern_buf *out, const ir_module *m, const char *only, ir_print_hook hook,
                     void *user);

/* The text of a float constant of type t (f32 or f64): the shortest decimal that reads
 * back to the same bits, always with a '.' or an exponent; inf, -inf, nan, or
 * nan(0xBITS) for a NaN other than the default quiet NaN. */
void ir_format_float(kern_buf *b, const kern_type *t, double v);

#endif
