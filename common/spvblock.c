/* spvblock.c - the launch block layout of docs/spirv-abi.md (std430 scalars in order). */
#include "spvblock.h"

static size_t align_to(size_t x, size_t a) { return (x + a - 1) / a * a; }

size_t kern_spv_block_layout(const kern_type *const *params, int nparams, int nadstacks,
                             size_t *off) {
    size_t at = 0;
    for (int p = 0; p < nparams; p++) {
        const kern_type *t = params[p];
        size_t size, count = 1;
        if (ty_is_array(t)) {
            size = 8;
            count = t->rank;
        } else {
            size = ty_size(t) == 8 ? 8 : 4; /* bool, i8..u16 as a 32-bit word */
        }
        at = align_to(at, size);
        off[p] = at;
        at += size * count;
    }
    at = align_to(at, 8);
    off[nparams] = at;
    at += 8;
    for (int s = 0; s < nadstacks; s++) {
        off[nparams + 1 + 2 * s] = at;
        off[nparams + 2 + 2 * s] = at + 8;
        at += 16;
    }
    return align_to(at, 16);
}
