/* ad_grad.c - K.grad. Work in progress. */
#include "passes.h"

ir_kernel *ad_grad_kernel(ir_kernel *k, uint32_t ad_stack_size) {
    (void)k; (void)ad_stack_size;
    return NULL;
}
