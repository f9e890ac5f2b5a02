/* vk_memory.c - the Vulkan device's memory (vulkan.c): buffers with their memory, and the
 * operations alloc, free, copy_in, copy_out and zero.
 *
 * - Memory: one VkBuffer and VkDeviceMemory per allocation (at least 4 bytes, so 0-byte
 *   buffers stay distinct), device-local when possible. When that memory is also host
 *   visible and coherent (lavapipe, resizable BAR) copies are memcpy; otherwise through a
 *   host-visible staging buffer and a transfer submission that is waited for
 *   (kern_context_options.staging, $KERN_VULKAN_STAGING=1, forces that path, to test it where
 *   all memory is visible). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* A memory type of the buffer's bits with all of `want`, or -1. */
static int mem_type(vk_device *v, uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < v->memprops.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (v->memprops.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

/* host: memory the host maps (staging, launch blocks, error records); else device-local,
 * mapped too when it is host visible and coherent. */
kern_status vk_mem_create(vk_device *v, VkDeviceSize bytes, bool host, vk_mem *m, char *err,
                          size_t errlen) {
    memset(m, 0, sizeof *m);
    if (bytes < 4)
        bytes = 4;
    bytes = (bytes + 3) & ~(VkDeviceSize)3;
    m->size = bytes;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = v->api.vkCreateBuffer(v->dev, &bi, NULL, &m->buf);
    if (r != VK_SUCCESS)
        return vk_fail(r, "vkCreateBuffer", err, errlen);
    VkMemoryRequirements req;
    v->api.vkGetBufferMemoryRequirements(v->dev, m->buf, &req);
    const VkMemoryPropertyFlags hv =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int t = -1;
    if (host) {
        t = mem_type(v, req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        if (t < 0)
            t = mem_type(v, req.memoryTypeBits, hv);
    } else {
        t = mem_type(v, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        if (t < 0)
            t = mem_type(v, req.memoryTypeBits, 0);
    }
    if (t < 0) {
        v->api.vkDestroyBuffer(v->dev, m->buf, NULL);
        snprintf(err, errlen, "no memory type for a buffer of %llu bytes",
                 (unsigned long long)bytes);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)t};
    r = v->api.vkAllocateMemory(v->dev, &ai, NULL, &m->mem);
    if (r == VK_SUCCESS)
        r = v->api.vkBindBufferMemory(v->dev, m->buf, m->mem, 0);
    if (r == VK_SUCCESS && (v->memprops.memoryTypes[t].propertyFlags & hv) == hv &&
        (host || !v->force_staging))
        r = v->api.vkMapMemory(v->dev, m->mem, 0, VK_WHOLE_SIZE, 0, &m->map);
    if (r != VK_SUCCESS) {
        if (m->mem)
            v->api.vkFreeMemory(v->dev, m->mem, NULL);
        v->api.vkDestroyBuffer(v->dev, m->buf, NULL);
        memset(m, 0, sizeof *m);
        return vk_fail(r, "allocating device memory", err, errlen);
    }
    return KERN_OK;
}

void vk_mem_destroy(vk_device *v, vk_mem *m) {
    if (m->buf)
        v->api.vkDestroyBuffer(v->dev, m->buf, NULL);
    if (m->mem)
        v->api.vkFreeMemory(v->dev, m->mem, NULL); /* unmaps */
    memset(m, 0, sizeof *m);
}

typedef struct copy_args {
    VkBuffer src, dst;
    VkDeviceSize src_off, dst_off, n;
    uint32_t fill;
} copy_args;

static void rec_copy(vk_device *v, VkCommandBuffer cb, void *user) {
    copy_args *a = user;
    VkBufferCopy c = {.srcOffset = a->src_off, .dstOffset = a->dst_off, .size = a->n};
    v->api.vkCmdCopyBuffer(cb, a->src, a->dst, 1, &c);
}

static void rec_fill(vk_device *v, VkCommandBuffer cb, void *user) {
    copy_args *a = user;
    v->api.vkCmdFillBuffer(cb, a->dst, a->dst_off, a->n, a->fill);
}

kern_status vk_alloc(rt_device *d, size_t bytes, void **out, char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    if (bytes > v->props.limits.maxStorageBufferRange) {
        snprintf(err, errlen,
                 "%zu bytes is more than one storage buffer of device %s can address (%u bytes)",
                 bytes, v->props.deviceName, v->props.limits.maxStorageBufferRange);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    if (bytes > v->max_alloc) {
        snprintf(err, errlen,
                 "%zu bytes is more than one allocation of device %s may hold "
                 "(maxMemoryAllocationSize %llu bytes)",
                 bytes, v->props.deviceName, (unsigned long long)v->max_alloc);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    vk_mem *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    kern_status s = vk_mem_create(v, bytes, false, m, err, errlen);
    if (s != KERN_OK) {
        free(m);
        return s;
    }
    *out = m;
    return KERN_OK;
}

void vk_free(rt_device *d, void *mem) {
    if (!mem)
        return;
    vk_mem_destroy(vk_of(d), mem);
    free(mem);
}

static kern_status staged(vk_device *v, vk_mem *m, size_t offset, void *host, const void *src,
                          size_t n, char *err, size_t errlen) {
    vk_mem st;
    kern_status s = vk_mem_create(v, n, true, &st, err, errlen);
    if (s != KERN_OK)
        return s;
    if (!st.map) {
        vk_mem_destroy(v, &st);
        snprintf(err, errlen, "device %s has no host-visible memory for a staging buffer",
                 v->props.deviceName);
        return KERN_ERR_UNSUPPORTED;
    }
    if (src)
        memcpy(st.map, src, n);
    copy_args a = src ? (copy_args){st.buf, m->buf, 0, offset, n, 0}
                      : (copy_args){m->buf, st.buf, offset, 0, n, 0};
    s = vk_run_transfer(v, rec_copy, &a, err, errlen);
    if (s == KERN_OK && host)
        memcpy(host, st.map, n);
    vk_mem_destroy(v, &st);
    return s;
}

kern_status vk_copy_in(rt_device *d, void *mem, size_t offset, const void *src, size_t n, char *err,
                       size_t errlen) {
    vk_mem *m = mem;
    if (n == 0)
        return KERN_OK;
    if (m->map) {
        memcpy((char *)m->map + offset, src, n);
        return KERN_OK;
    }
    return staged(vk_of(d), m, offset, NULL, src, n, err, errlen);
}

kern_status vk_copy_out(rt_device *d, void *dst, const void *mem, size_t offset, size_t n,
                        char *err, size_t errlen) {
    vk_mem *m = (vk_mem *)mem;
    if (n == 0)
        return KERN_OK;
    if (m->map) {
        memcpy(dst, (const char *)m->map + offset, n);
        return KERN_OK;
    }
    return staged(vk_of(d), m, offset, dst, NULL, n, err, errlen);
}

/* Device to device (the tape's saved ranges): one transfer, waited for; a memmove where
 * both are mapped. The runtime has waited for the launches that use either. */
kern_status vk_copy(rt_device *d, void *dst, size_t doff, const void *src, size_t soff, size_t n,
                    char *err, size_t errlen) {
    vk_mem *md = dst;
    const vk_mem *ms = src;
    if (n == 0)
        return KERN_OK;
    if (md->map && ms->map) {
        memmove((char *)md->map + doff, (const char *)ms->map + soff, n);
        return KERN_OK;
    }
    copy_args a = {ms->buf, md->buf, soff, doff, n, 0};
    return vk_run_transfer(vk_of(d), rec_copy, &a, err, errlen);
}

kern_status vk_zero(rt_device *d, void *mem, size_t offset, size_t n, char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    vk_mem *m = mem;
    if (n == 0)
        return KERN_OK;
    if (m->map) {
        memset((char *)m->map + offset, 0, n);
        return KERN_OK;
    }
    if (offset % 4 == 0 && (n % 4 == 0 || offset + n >= m->size)) {
        copy_args a = {0, m->buf, 0, offset, n % 4 ? VK_WHOLE_SIZE : n, 0};
        return vk_run_transfer(v, rec_fill, &a, err, errlen);
    }
    void *z = calloc(1, n);
    if (!z) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    kern_status s = staged(v, m, offset, NULL, z, n, err, errlen);
    free(z);
    return s;
}

/* Without VK_EXT_memory_budget the free memory is not known: the largest device-local heap
 * stands for it (the budget's default takes 3/4 of it, docs/autodiff.md). */
int64_t vk_mem_free(rt_device *d) {
    vk_device *v = vk_of(d);
    VkDeviceSize best = 0;
    for (uint32_t i = 0; i < v->memprops.memoryHeapCount; i++)
        if ((v->memprops.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            v->memprops.memoryHeaps[i].size > best)
            best = v->memprops.memoryHeaps[i].size;
    return best == 0 ? -1 : best > (VkDeviceSize)INT64_MAX ? INT64_MAX : (int64_t)best;
}
