/* hostcode.c - KERN_CODE_HOST code (provider.h) for devices that run host functions: the
 * CPU device and the tests' fake devices.
 *
 * The code object is the provider itself (copied); unloading it releases the provider.
 * A kernel handle (rt_host_kernel) holds, per task, the `_count` function and the body of
 * abi.h, looked up by their symbols (kern_meta_symbol); the first missing symbol fails
 * the lookup with a message naming the kernel, the task and the symbol. Other code kinds
 * are refused with a message naming what the module holds and the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

const char *kern_code_kind_name(kern_code_kind k) {
    const kern_target *t = kern_target_of_code(k);
    return t ? t->code_name : "code of unknown kind";
}

kern_status rt_code_refused(const rt_device *d, const kern_code_image *img, char *err,
                            size_t errlen) {
    const kern_target *t = kern_target_of_code(img->kind);
    snprintf(err, errlen, "the module holds %s for %s; the context's device is %s",
             kern_code_kind_name(img->kind), t ? t->name : "?", d->ops->name);
    return KERN_ERR_UNSUPPORTED;
}

kern_status rt_host_load_code(rt_device *d, const kern_code_image *img, void **code, char *err,
                              size_t errlen) {
    *code = NULL;
    if (img->kind != KERN_CODE_HOST)
        return rt_code_refused(d, img, err, errlen);
    kern_code_provider *p = malloc(sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of host memory for a module's code");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    *p = img->host;
    *code = p;
    return KERN_OK;
}

void rt_host_unload_code(rt_device *d, void *code) {
    kern_code_provider *p = code;
    if (!p)
        return;
    if (p->release)
        p->release(p->user);
    free(p);
}

void rt_host_free_kernel(rt_device *d, void *handle) {
    rt_host_kernel *hk = handle;
    if (!hk)
        return;
    free(hk->count);
    free(hk->body);
    free(hk);
}

kern_status rt_host_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk, void **handle,
                               char *err, size_t errlen) {
    const kern_code_provider *p = code;
    kern_status s = KERN_OK;
    char sym[512];
    *handle = NULL;
    rt_host_kernel *hk = calloc(1, sizeof *hk);
    if (!hk || !(hk->count = calloc((size_t)mk->ntasks + 1, sizeof *hk->count)) ||
        !(hk->body = calloc((size_t)mk->ntasks + 1, sizeof *hk->body))) {
        snprintf(err, errlen, "out of host memory for kernel '%s'", mk->name);
        s = KERN_ERR_OUT_OF_MEMORY;
        goto cleanup;
    }
    hk->ntasks = mk->ntasks;
    for (int t = 0; t < mk->ntasks; t++) {
        for (int c = 0; c < 2; c++) {
            kern_meta_symbol(sym, sizeof sym, mk->name, t, c == 0);
            void *addr = p->lookup ? p->lookup(p->user, sym) : NULL;
            if (!addr) {
                snprintf(err, errlen, "kernel '%s', task %d: missing symbol '%s'", mk->name, t,
                         sym);
                s = KERN_ERR_FORMAT;
                goto cleanup;
            }
            /* POSIX: symbols from dlsym and friends convert to function pointers */
            if (c == 0)
                memcpy(&hk->count[t], &addr, sizeof addr);
            else
                memcpy(&hk->body[t], &addr, sizeof addr);
        }
    }
    /* SIMD code: its adstack slices hold one stack per lane (adstack.c) */
    kern_lanes_symbol(sym, sizeof sym, mk->name);
    const int32_t *lanes = p->lookup && mk->nadstacks ? p->lookup(p->user, sym) : NULL;
    if (lanes) {
        if (*lanes < 1 || *lanes > 64) {
            snprintf(err, errlen, "kernel '%s': '%s' says %d lanes (1 to 64 expected)", mk->name,
                     sym, (int)*lanes);
            s = KERN_ERR_FORMAT;
            goto cleanup;
        }
        ((kern_meta_kernel *)mk)->ad_lanes = *lanes; /* the module's own metadata */
    }
    *handle = hk;
    return KERN_OK;
cleanup:
    rt_host_free_kernel(d, hk);
    return s;
}
