/* test_backend.h - the device the end-to-end tests run on: $KERN_TEST_BACKEND (cpu, the
 * default, cuda or vulkan). The gradient corpus and the e2e suite launch every kernel on it, so
 * `KERN_TEST_BACKEND=cuda build/tests/kern-tests` runs them on the GPU machine; a device
 * that was asked for and cannot be created fails those tests (it is not a skip). */
#ifndef KERN_TEST_BACKEND_H
#define KERN_TEST_BACKEND_H

#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"

static inline kern_backend kern_test_backend(void) {
    const char *b = getenv("KERN_TEST_BACKEND");
    if (b && !strcmp(b, "cuda"))
        return KERN_BACKEND_CUDA;
    if (b && !strcmp(b, "vulkan"))
        return KERN_BACKEND_VULKAN;
    return KERN_BACKEND_CPU;
}

#endif
