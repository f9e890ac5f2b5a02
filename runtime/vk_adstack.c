/* vk_adstack.c - adstacks on the Vulkan device (vulkan.c; adstack.h): the slots of a launch,
 * and capacities that read device arrays (runtime contract 3, docs/runtime-contracts.md).
 *
 * - Adstacks are slot-major; ad_slots is the resident threads (a fixed number of groups
 *   per device kind), or max_items rounded up to whole groups when fewer.
 * - Capacities that read device arrays run the module's sizer entry point kern_<K>__s<s>
 *   (backends/spirv/spv_emit_sizer.c) with a small result buffer bound in place of the
 *   heap, and read back only res[4]. A module without sizer entry points (one built before
 *   they existed) has its arrays copied back and the SizeExpr evaluated on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The groups of a sizer's launch: enough for the range of an outermost maxover when the
 * host can evaluate its bounds (they read no array), else KERN_SPV_SIZER_GROUPS; an
 * expression that is no maxover runs in invocation 0. */
static uint32_t sizer_groups(const kern_meta_kernel *mk, const sz_expr *e,
                             const rt_launch_arg *args) {
    if (e->op != SZ_MAXOVER)
        return 1;
    if (sz_reads_memory(e->kids[0]) || sz_reads_memory(e->kids[1]))
        return KERN_SPV_SIZER_GROUPS;
    sz_arg *sa = calloc((size_t)mk->nparams + 1, sizeof *sa);
    if (!sa)
        return KERN_SPV_SIZER_GROUPS;
    rt_adstack_args(mk, args, false, sa);
    int64_t lo, hi;
    char msg[256];
    uint32_t g = 1; /* bounds that fail to evaluate: the sizer reports it */
    if (sz_eval(e->kids[0], sa, mk->nparams, &lo, msg, sizeof msg) &&
        sz_eval(e->kids[1], sa, mk->nparams, &hi, msg, sizeof msg) && hi > lo) {
        uint64_t n = (uint64_t)hi - (uint64_t)lo;
        uint64_t want = n / KERN_SPV_GROUP + (n % KERN_SPV_GROUP != 0);
        g = want < KERN_SPV_SIZER_GROUPS ? (uint32_t)want : KERN_SPV_SIZER_GROUPS;
    }
    free(sa);
    return g;
}

/* Runs adstack s's sizer pipeline: res[4] from its result buffer (v->sizer_res, grown to
 * the launch's groups; host-visible). */
static kern_status size_by_shader(vk_device *v, const vk_kernel *k, const kern_meta_kernel *mk,
                                  int s, const rt_launch_arg *args, int64_t res[4], char *err,
                                  size_t errlen) {
    uint32_t groups = sizer_groups(mk, mk->adstacks[s].expr, args);
    VkDeviceSize bytes =
        8 * ((VkDeviceSize)KERN_SPV_SIZER_PART + (VkDeviceSize)groups * KERN_SPV_GROUP);
    kern_status st;
    if (v->sizer_res.size < bytes) {
        vk_mem_destroy(v, &v->sizer_res);
        memset(&v->sizer_res, 0, sizeof v->sizer_res);
        if ((st = vk_mem_create(v, bytes, true, &v->sizer_res, err, errlen)) != KERN_OK)
            return st;
        if (!v->sizer_res.map) {
            vk_mem_destroy(v, &v->sizer_res);
            snprintf(err, errlen, "no host-visible memory for the adstack sizer's results");
            return KERN_ERR_OUT_OF_MEMORY;
        }
    }
    int64_t *words = v->sizer_res.map;
    int64_t *layout = calloc(2 * (size_t)mk->nadstacks + 1, sizeof *layout);
    if (!layout) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    words[KERN_SPV_SIZER_RES] = INT64_MIN;
    for (int i = KERN_SPV_SIZER_RES + 1; i < KERN_SPV_SIZER_PART; i++)
        words[i] = 0; /* res[1..3], the ticket */
    rt_launch l = {.name = mk->name,
                   .meta = mk,
                   .kernel = k,
                   .args = args,
                   .nargs = mk->nparams,
                   .ad_heap = &v->sizer_res,
                   .ad_layout = layout};
    st = vk_launch_sizer(v, &l, k->sizers[s], groups, err, errlen);
    free(layout);
    if (st != KERN_OK)
        return st;
    for (int i = 0; i < 4; i++)
        res[i] = words[KERN_SPV_SIZER_RES + i];
    v->shader_sizings++;
    return KERN_OK;
}

/* Capacities that read device arrays: by the module's sizer entry point, else the arrays
 * are copied back and the SizeExpr is evaluated on the host (after the work submitted so
 * far). */
kern_status vk_size_adstack(rt_device *d, const void *kernel, const kern_meta_kernel *mk, int s,
                            const rt_launch_arg *args, int64_t res[4], char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    const vk_kernel *k = kernel;
    if (k && s < k->nsizers && k->sizers[s])
        return size_by_shader(v, k, mk, s, args, res, err, errlen);
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
        v->copied_bytes += (int64_t)n;
    }
    res[0] = INT64_MIN;
    res[1] = res[2] = res[3] = 0;
    if (st == KERN_OK) {
        char msg[512];
        v->copied_sizings++;
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
