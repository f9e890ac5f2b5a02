/* test_backend.h - the device the end-to-end tests run on: $KERN_TEST_BACKEND (cpu, the
 * default, cuda or vulkan). The gradient corpus and the e2e suite launch every kernel on it, so
 * `KERN_TEST_BACKEND=cuda build/tests/kern-tests` runs them on the GPU machine; a device
 * that was asked for and cannot be created fails those tests (it is not a skip). */
#ifndef KERN_TEST_BACKEND_H
#define KERN_TEST_BACKEND_H

#include <stdbool.h>
#include <stdio.h>
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

/* A Vulkan context for the Vulkan device's own tests: the Khronos validation layer on
 * unless $KERN_VULKAN_VALIDATION says otherwise; where the layer is not installed (the GPU
 * machine) and the environment did not ask for it, without it, said on stderr. The
 * status is kern_context_create's; *ctx must be released either way. */
static inline kern_status kern_test_vulkan_context(kern_context **ctx) {
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_VULKAN;
    bool asked = getenv("KERN_VULKAN_VALIDATION") != NULL;
    if (!asked)
        o.validation = KERN_VALIDATION_ON;
    kern_status s = kern_context_create(&o, ctx);
    if (s != KERN_OK && !asked && strstr(kern_context_last_error(*ctx), "is not installed")) {
        fprintf(stderr, "vulkan: %s: testing without validation\n", kern_context_last_error(*ctx));
        kern_context_release(*ctx);
        o.validation = KERN_VALIDATION_OFF;
        s = kern_context_create(&o, ctx);
    }
    return s;
}

/* A context of kern_test_vulkan_context, or NULL where no Vulkan device can be created,
 * said on stderr for the caller, which skips its test. */
static inline kern_context *kern_test_vulkan_or_null(void) {
    kern_context *ctx = NULL;
    if (kern_test_vulkan_context(&ctx) == KERN_OK)
        return ctx;
    fprintf(stderr, "vulkan: no Vulkan device here (%s): the test is skipped\n",
            kern_context_last_error(ctx));
    kern_context_release(ctx);
    return NULL;
}

#endif
