/* vk_graph.c - graphs on the Vulkan device (vulkan.c; runtime contract 9): recorded command
 * buffers, replayed without re-recording.
 *
 * - Graphs (runtime contract 9): the captured launches recorded once into a command
 *   buffer, in four copies with their own launch blocks, descriptor sets and error
 *   records (host visible); a replay submits a copy, re-recording nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

enum { VK_GRAPH_SETS = 4 };

typedef struct vk_graph {
    int n;
    VkCommandBuffer cbs[VK_GRAPH_SETS];
    VkDescriptorPool pool;
    vk_mem blocks, recs; /* per copy and launch: a launch block, an error record */
} vk_graph;

void vk_graph_free(rt_device *d, void *graph) {
    vk_device *v = vk_of(d);
    vk_graph *g = graph;
    if (!g)
        return;
    if (g->pool)
        v->api.vkDestroyDescriptorPool(v->dev, g->pool, NULL);
    for (int c = 0; c < VK_GRAPH_SETS; c++)
        if (g->cbs[c])
            v->api.vkFreeCommandBuffers(v->dev, v->cmdpool, 1, &g->cbs[c]);
    vk_mem_destroy(v, &g->blocks);
    vk_mem_destroy(v, &g->recs);
    free(g);
}

/* VK_GRAPH_SETS copies of one command buffer holding the n launches, each launch with its
 * own block and record (the records of copy c are recs[c * n .. c * n + n - 1], host
 * visible: the runtime zeroes and reads them). */
kern_status vk_graph_build(rt_device *d, const rt_launch *ls, int n, void **out, int *nsets,
                           kern_err_record **recs, char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    VkDeviceSize align = v->props.limits.minStorageBufferOffsetAlignment;
    if (align > sizeof(kern_err_record) || sizeof(kern_err_record) % align != 0) {
        snprintf(err, errlen,
                 "the device's storage buffer offset alignment (%llu bytes) does not "
                 "fit the error records of a graph",
                 (unsigned long long)align);
        return KERN_ERR_UNSUPPORTED;
    }
    vk_graph *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    g->n = n;
    VkDeviceSize stride = 256, nbufs = 0;
    for (int i = 0; i < n; i++) {
        const vk_kernel *k = ls[i].kernel;
        VkDeviceSize b = (k->block_size + align - 1) / align * align;
        stride = b > stride ? b : stride;
        nbufs += k->nbindings;
    }
    VkDeviceSize total = (VkDeviceSize)VK_GRAPH_SETS * (VkDeviceSize)n;
    kern_status s = vk_mem_create(v, stride * total, true, &g->blocks, err, errlen);
    if (s == KERN_OK)
        s = vk_mem_create(v, sizeof(kern_err_record) * total, true, &g->recs, err, errlen);
    if (s == KERN_OK && (!g->blocks.map || !g->recs.map)) {
        snprintf(err, errlen, "no host-visible memory for a graph");
        s = KERN_ERR_UNSUPPORTED;
    }
    if (s == KERN_OK) {
        memset(g->recs.map, 0, sizeof(kern_err_record) * total);
        VkDescriptorPoolSize sizes[2] = {
            {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC, (uint32_t)total},
            {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, (uint32_t)(nbufs * VK_GRAPH_SETS)}};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = (uint32_t)total,
                                         .poolSizeCount = 2,
                                         .pPoolSizes = sizes};
        VkResult r = v->api.vkCreateDescriptorPool(v->dev, &pi, NULL, &g->pool);
        if (r != VK_SUCCESS)
            s = vk_fail(r, "vkCreateDescriptorPool", err, errlen);
    }
    for (int c = 0; s == KERN_OK && c < VK_GRAPH_SETS; c++) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = v->cmdpool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        VkResult r = v->api.vkAllocateCommandBuffers(v->dev, &ai, &g->cbs[c]);
        if (r != VK_SUCCESS) {
            s = vk_fail(r, "vkAllocateCommandBuffers", err, errlen);
            break;
        }
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        if ((r = v->api.vkBeginCommandBuffer(g->cbs[c], &bi)) != VK_SUCCESS) {
            s = vk_fail(r, "vkBeginCommandBuffer", err, errlen);
            break;
        }
        vk_barrier_all(v, g->cbs[c]);
        for (int i = 0; s == KERN_OK && i < n; i++) {
            VkDeviceSize at = (VkDeviceSize)c * (VkDeviceSize)n + (VkDeviceSize)i;
            s = vk_record_launch(v, g->cbs[c], g->pool, &ls[i], &g->blocks, at * stride, &g->recs,
                                 at * sizeof(kern_err_record), err, errlen);
        }
        if (s == KERN_OK && (r = v->api.vkEndCommandBuffer(g->cbs[c])) != VK_SUCCESS)
            s = vk_fail(r, "vkEndCommandBuffer", err, errlen);
    }
    if (s != KERN_OK) {
        vk_graph_free(d, g);
        return s;
    }
    *out = g;
    *nsets = VK_GRAPH_SETS;
    *recs = g->recs.map;
    return KERN_OK;
}

kern_status vk_graph_launch(rt_device *d, void *graph, int set, uint64_t *point, char *err,
                            size_t errlen) {
    vk_device *v = vk_of(d);
    vk_graph *g = graph;
    if (v->lost[0]) {
        snprintf(err, errlen, "the device was lost: %s", v->lost);
        return KERN_ERR_DEVICE;
    }
    return vk_submit(v, g->cbs[set], point, err, errlen);
}
