/* vk_graph.c - graphs on the Vulkan device (vulkan.c; runtime contract 9): recorded command
 * buffers, replayed without re-recording.
 *
 * - Graphs (runtime contract 9): the captured launches recorded into command buffers, in
 *   up to RT_GRAPH_MAX_SETS copies with their own launch blocks, descriptor sets and error
 *   records (host visible, allocated for every copy when the graph is built). Copy 0 is
 *   recorded then; another the first time graph.c takes it, which it does only when every
 *   copy recorded so far is in flight: the host waits for the GPU only when 64 replays
 *   are queued, and a graph replayed one at a time keeps one copy. A replay submits its
 *   copy, re-recording nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

enum { VK_GRAPH_SETS = RT_GRAPH_MAX_SETS };

typedef struct vk_graph {
    int n;
    rt_launch *ls;       /* the launches, for the copies recorded later (what they point to
                        lives in graph.c's graph, which frees this one first) */
    VkDeviceSize stride; /* of the launch blocks */
    VkCommandBuffer cbs[VK_GRAPH_SETS]; /* NULL: that copy is not recorded yet */
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
    free(g->ls);
    free(g);
}

/* Records copy c: its command buffer, with the launches' blocks and records of copy c. */
static kern_status record_copy(vk_device *v, vk_graph *g, int c, char *err, size_t errlen) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = v->cmdpool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkCommandBuffer cb;
    VkResult r = v->api.vkAllocateCommandBuffers(v->dev, &ai, &cb);
    if (r != VK_SUCCESS)
        return vk_fail(r, "vkAllocateCommandBuffers", err, errlen);
    kern_status s = KERN_OK;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if ((r = v->api.vkBeginCommandBuffer(cb, &bi)) != VK_SUCCESS)
        s = vk_fail(r, "vkBeginCommandBuffer", err, errlen);
    if (s == KERN_OK)
        vk_barrier_all(v, cb);
    for (int i = 0; s == KERN_OK && i < g->n; i++) {
        VkDeviceSize at = (VkDeviceSize)c * (VkDeviceSize)g->n + (VkDeviceSize)i;
        s = vk_record_launch(v, cb, g->pool, &g->ls[i], &g->blocks, at * g->stride, &g->recs,
                             at * sizeof(kern_err_record), err, errlen);
    }
    if (s == KERN_OK && (r = v->api.vkEndCommandBuffer(cb)) != VK_SUCCESS)
        s = vk_fail(r, "vkEndCommandBuffer", err, errlen);
    if (s != KERN_OK) {
        v->api.vkFreeCommandBuffers(v->dev, v->cmdpool, 1, &cb);
        return s;
    }
    g->cbs[c] = cb;
    return KERN_OK;
}

/* Room for VK_GRAPH_SETS copies of one command buffer holding the n launches, each launch
 * with its own block and record (the records of copy c are recs[c * n .. c * n + n - 1],
 * host visible: the runtime zeroes and reads them); copy 0 recorded. */
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
    g->stride = stride;
    g->ls = malloc((size_t)n * sizeof *g->ls);
    if (s == KERN_OK && !g->ls) {
        snprintf(err, errlen, "out of host memory");
        s = KERN_ERR_OUT_OF_MEMORY;
    }
    if (s == KERN_OK) {
        memcpy(g->ls, ls, (size_t)n * sizeof *ls);
        s = record_copy(v, g, 0, err, errlen);
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
    if (!g->cbs[set]) { /* every copy before it is in flight: record this one */
        kern_status s = record_copy(v, g, set, err, errlen);
        if (s != KERN_OK)
            return s;
    }
    return vk_submit(v, g->cbs[set], point, err, errlen);
}
