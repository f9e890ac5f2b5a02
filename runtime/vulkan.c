/* vulkan.c - the Vulkan device (device.h) for SPIR-V modules (docs/spirv-abi.md): its
 * operations table, its creation and destruction, and the rt_vulkan_* functions of device.h.
 * libvulkan.so.1 is loaded with dlopen only when a Vulkan context is created, so libkern
 * needs no Vulkan at run time otherwise; the entry points come from vkGetInstanceProcAddr
 * and vkGetDeviceProcAddr (the headers are only used for the types: VK_NO_PROTOTYPES).
 *
 * The device's files, one idea each (what they share is in vk_internal.h; each opens with
 * its part of the design):
 * - vk_instance.c: the loader and the table of entry points, the instance with the
 *   validation layer and its messenger, the physical device, the logical device and its
 *   optional features.
 * - vk_memory.c: allocations, staging, copies and mapping.
 * - vk_launch.c: jobs, submissions on the timeline semaphore, poll and wait, transfers,
 *   and launches (launch blocks, descriptor sets, dispatches).
 * - vk_code.c: SPIR-V modules (checked against the device's features), kernels and their
 *   pipelines.
 * - vk_graph.c: graphs, recorded once and replayed.
 * - vk_adstack.c: adstack slots and capacities that read device arrays. */
#include <stdio.h>
#include <stdlib.h>

#include "vk_internal.h"

const char *vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "a VkResult error";
    }
}

kern_status vk_fail(VkResult r, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s failed: %s (%d)", what, vk_result_name(r), (int)r);
    return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
               ? KERN_ERR_OUT_OF_MEMORY
               : KERN_ERR_DEVICE;
}

static void vk_destroy(rt_device *d) {
    vk_device *v = vk_of(d);
    if (v->dev) {
        v->api.vkDeviceWaitIdle(v->dev);
        vk_jobs_free(v);
        vk_mem_destroy(v, &v->dummy);
        vk_mem_destroy(v, &v->scratch);
        vk_mem_destroy(v, &v->sizer_res);
        if (v->cache)
            v->api.vkDestroyPipelineCache(v->dev, v->cache, NULL);
        if (v->timeline)
            v->api.vkDestroySemaphore(v->dev, v->timeline, NULL);
        if (v->cmdpool)
            v->api.vkDestroyCommandPool(v->dev, v->cmdpool, NULL);
        v->api.vkDestroyDevice(v->dev, NULL);
    }
    if (v->messenger && v->api.vkDestroyDebugUtilsMessengerEXT)
        v->api.vkDestroyDebugUtilsMessengerEXT(v->inst, v->messenger, NULL);
    if (v->inst)
        v->api.vkDestroyInstance(v->inst, NULL);
    /* the loader stays loaded: drivers keep process-wide state (lavapipe's LLVM among
     * them) that cannot be unloaded safely, and a later context opens it again anyway */
    free(v);
}

static const rt_device_ops vk_ops = {
    .name = "vulkan",
    .target = &kern_target_vulkan,
    .destroy = vk_destroy,
    .alloc = vk_alloc,
    .free = vk_free,
    .zero = vk_zero,
    .copy_in = vk_copy_in,
    .copy_out = vk_copy_out,
    .load_code = vk_load_code,
    .get_kernel = vk_get_kernel,
    .free_kernel = vk_free_kernel,
    .unload_code = vk_unload_code,
    .launch = vk_launch,
    .poll = vk_poll,
    .wait = vk_wait,
    .sync = vk_sync,
    .size_adstack = vk_size_adstack,
    .graph_build = vk_graph_build,
    .graph_launch = vk_graph_launch,
    .graph_free = vk_graph_free,
    .ad_slots = vk_ad_slots,
    .mem_free = vk_mem_free,
    .copy = vk_copy,
};

void rt_vulkan_device_forget(rt_device *d, uint32_t capability) {
    vk_device *v = vk_of(d);
    for (size_t f = 0; f < vk_nfeatures; f++)
        if (vk_features[f].cap == capability)
            *(bool *)((char *)v + vk_features[f].has) = false;
    if (capability == 6033) /* AtomicFloat32AddEXT: on workgroup memory too */
        v->has_shared_f32add = false;
}

void rt_vulkan_sizings(const rt_device *d, int64_t *by_shader, int64_t *copied,
                       int64_t *copied_bytes) {
    const vk_device *v = (const vk_device *)d;
    *by_shader = v->shader_sizings;
    *copied = v->copied_sizings;
    *copied_bytes = v->copied_bytes;
}

int rt_vulkan_validation_messages(const rt_device *d, const char **first) {
    const vk_device *v = (const vk_device *)d;
    if (first)
        *first = v->first_message;
    return atomic_load(&((vk_device *)v)->validation_messages);
}

/* How long a wait polls the timeline before it blocks, in microseconds: $KERN_VULKAN_SPIN_US
 * (0: block at once), else 10 ms on a GPU and none on a CPU device (lavapipe's threads run
 * the shaders on the cores a polling thread would take). */
static long wait_spin_us(bool cpu_device) {
    const char *e = getenv("KERN_VULKAN_SPIN_US");
    if (!e || !*e)
        return cpu_device ? 0 : 10000;
    char *end;
    long n = strtol(e, &end, 10);
    if (*end || n < 0 || n > 10000000) {
        fprintf(stderr,
                "kern: warning: KERN_VULKAN_SPIN_US='%s' is not a number of microseconds from 0 "
                "to 10000000; using %d\n",
                e, cpu_device ? 0 : 10000);
        return cpu_device ? 0 : 10000;
    }
    return n;
}

kern_status rt_vulkan_device_create(const char *loader, const rt_vulkan_params *p,
                                    rt_device **out, char *err, size_t errlen) {
    *out = NULL;
    vk_device *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    v->base.ops = &vk_ops;
    v->base.host_memory = false;
    v->base.ad_slot_major = true;
    v->force_staging = p->staging;
    kern_status s = vk_open(v, loader, p, err, errlen);
    if (s != KERN_OK) {
        vk_destroy(&v->base); /* what vk_open made: nothing without the loader */
        return s;
    }
    /* resident threads: a GPU keeps a few hundred thousand in flight; a CPU device a few
     * groups per core */
    v->resident_groups = v->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 64 : 2048;
    v->spin_us = wait_spin_us(v->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);
    if (v->resident_groups > v->props.limits.maxComputeWorkGroupCount[0])
        v->resident_groups = v->props.limits.maxComputeWorkGroupCount[0];
    uint32_t ver = v->props.apiVersion;
    char drv[VK_MAX_DRIVER_INFO_SIZE + 16];
    if (v->driver[0])
        snprintf(drv, sizeof drv, "%s", v->driver);
    else
        snprintf(drv, sizeof drv, "0x%x", v->props.driverVersion);
    snprintf(v->base.desc, sizeof v->base.desc, "vulkan: %.160s (driver %.120s, Vulkan %u.%u)",
             v->props.deviceName, drv, VK_API_VERSION_MAJOR(ver), VK_API_VERSION_MINOR(ver));
    *out = &v->base;
    return KERN_OK;
}
