/* vk_adstack.c - adstacks on the Vulkan device (vulkan.c; adstack.h): the slots of a launch,
 * and capacities that read device arrays (runtime contract 3, docs/runtime-contracts.md:
 * evaluated on the host, as the device has no sizer shaders).
 *
 * - Adstacks are slot-major; ad_slots is the resident threads (a fixed number of groups
 *   per device kind), or max_items rounded up to whole groups when fewer. Capacities that
 *   read device arrays are evaluated on the host after copying those arrays back
 *   (size_adstack). */
#include <stdio.h>
#include <stdlib.h>

#include "../common/spvblock.h"
#include "adstack.h"
#include "vk_internal.h"

int64_t vk_ad_slots(rt_device *d, int64_t max_items) {
    int64_t resident = vk_of(d)->resident_groups * KERN_SPV_GROUP;
    if (max_items < 0)
        return resident;
    int64_t want = (max_items + KERN_SPV_GROUP - 1) / KERN_SPV_GROUP * KERN_SPV_GROUP;
    if (want < KERN_SPV_GROUP)
        want = KERN_SPV_GROUP;
    return want < resident ? want : resident;
}

/* Capacities that read device arrays: the arrays are copied back and the SizeExpr is
 * evaluated on the host (after the work submitted so far). */
kern_status vk_size_adstack(rt_device *d, const void *kernel, const kern_meta_kernel *mk, int s,
                            const rt_launch_arg *args, int64_t res[4], char *err, size_t errlen) {
    (void)kernel;
    kern_status st = vk_sync(d, err, errlen);
    if (st != KERN_OK)
        return st;
    sz_arg *sa = calloc((size_t)mk->nparams + 1, sizeof *sa);
    void **copies = calloc((size_t)mk->nparams + 1, sizeof *copies);
    if (!sa || !copies) {
        free(sa);
        free(copies);
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    rt_adstack_args(mk, args, false, sa);
    for (int p = 0; p < mk->nparams && st == KERN_OK; p++) {
        if (!args[p].is_array)
            continue;
        size_t n = (size_t)ty_size(mk->params[p].type->elem);
        for (int dd = 0; dd < mk->params[p].type->rank; dd++)
            n *= (size_t)args[p].shape[dd];
        if (!(copies[p] = malloc(n ? n : 1))) {
            snprintf(err, errlen, "out of host memory");
            st = KERN_ERR_OUT_OF_MEMORY;
            break;
        }
        st = vk_copy_out(d, copies[p], args[p].mem, 0, n, err, errlen);
        sa[p].data = copies[p];
    }
    res[0] = INT64_MIN;
    res[1] = res[2] = res[3] = 0;
    if (st == KERN_OK) {
        char msg[512];
        int64_t value;
        if (sz_eval(mk->adstacks[s].expr, sa, mk->nparams, &value, msg, sizeof msg))
            res[0] = value;
        else {
            snprintf(err, errlen, "%s", msg);
            st = KERN_ERR_ARGUMENT;
        }
    }
    for (int p = 0; p < mk->nparams; p++)
        free(copies[p]);
    free(copies);
    free(sa);
    return st;
}
