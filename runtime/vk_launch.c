/* vk_launch.c - the Vulkan device's submissions and launches (vulkan.c): jobs, the timeline
 * semaphore (poll, wait, sync), the transfers that vk_memory.c waits for, and launches:
 * launch blocks, descriptor sets and dispatches, recorded here for graphs too (vk_graph.c).
 *
 * - Launches: a job per launch (reused once its point has passed): a command buffer, a
 *   descriptor pool with the launch's one set, a host-visible buffer holding the launch
 *   block (binding 0) and one for the error record (binding 1). The command buffer starts
 *   with a barrier against everything submitted before (so submissions run in order), then
 *   per task: pipeline, set, dispatch, barrier. The submission signals the device's
 *   timeline semaphore with the launch's completion point; poll reads the semaphore
 *   (vkGetSemaphoreCounterValue), wait polls it for up to vk_device.spin_us (a GPU's, not a
 *   CPU device's) and then blocks on it (vkWaitSemaphores). When a job's point
 *   has passed, its error record is copied into the launch's rt_launch.err and the job is
 *   free again (runtime contracts 5-7, docs/runtime-contracts.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/spvblock.h"
#include "gpu.h"
#include "vk_internal.h"

struct vk_job {
    uint64_t point; /* 0: free */
    VkCommandBuffer cb;
    VkDescriptorPool pool;
    uint32_t pool_bufs;   /* storage-buffer descriptors the pool holds */
    vk_mem block;         /* a launch block larger than a slab slot holds (else unused) */
    struct vk_slab *slab; /* the slab holding this job's slot */
    VkDeviceSize at;      /* the slot's offset: its launch block, then its error record */
    kern_err_record *dst;
    struct vk_job *next;
};

/* Jobs take their launch block and error record from slabs of host-visible memory (one
 * allocation per VK_SLAB_JOBS jobs, not two per job): slot = block, then the record. */
enum { VK_SLAB_JOBS = 64, VK_SLOT = 1024, VK_SLOT_BLOCK = VK_SLOT - 256 };
/* Descriptor offsets must be multiples of minStorageBufferOffsetAlignment, which Vulkan
 * caps at 256: slots and the records in them sit at multiples of 256. */
_Static_assert(VK_SLOT % 256 == 0 && VK_SLOT_BLOCK % 256 == 0, "slot offsets stay aligned");

struct vk_slab {
    vk_mem mem;
    int used;
    struct vk_slab *next;
};

/* ---- submissions ------------------------------------------------------------------------- */

/* Copies finished jobs' error records out and frees the jobs up to `passed`. */
static void retire_jobs(vk_device *v, uint64_t passed) {
    while (v->inflight && v->inflight->point <= passed) {
        vk_job *j = v->inflight;
        v->inflight = j->next;
        if (!v->inflight)
            v->inflight_tail = NULL;
        if (j->dst)
            memcpy(j->dst, (char *)j->slab->mem.map + j->at + VK_SLOT_BLOCK, sizeof *j->dst);
        j->point = 0;
        j->dst = NULL;
        j->next = v->free_jobs;
        v->free_jobs = j;
    }
}

uint64_t vk_poll(rt_device *d) {
    vk_device *v = vk_of(d);
    uint64_t value = 0;
    VkResult r = v->api.vkGetSemaphoreCounterValue(v->dev, v->timeline, &value);
    if (r != VK_SUCCESS) { /* the next wait reports it; what passed stays passed */
        snprintf(v->lost, sizeof v->lost, "vkGetSemaphoreCounterValue: %s", vk_result_name(r));
        return v->passed;
    }
    if (value > v->passed)
        v->passed = value;
    retire_jobs(v, v->passed);
    return v->passed;
}

/* Polls the timeline until point has passed (true) or v->spin_us microseconds have gone
 * by (false): a blocking vkWaitSemaphores wakes the thread 50 to 100 us after the GPU
 * finishes on NVIDIA's driver (kern_sync of a 60 us kernel took 90 us; polled, 70). */
static bool spin(rt_device *d, uint64_t point) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (vk_poll(d) >= point)
            return true;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 > vk_of(d)->spin_us)
            return false;
    }
}

kern_status vk_wait(rt_device *d, uint64_t point, char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    if (point == 0)
        return KERN_OK;
    if (point > d->submitted) { /* it would never come */
        snprintf(err, errlen, "completion point %llu was never submitted (the latest is %llu)",
                 (unsigned long long)point, (unsigned long long)d->submitted);
        return KERN_ERR_INTERNAL;
    }
    if (v->spin_us > 0 && spin(d, point))
        return KERN_OK;
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &v->timeline,
                              .pValues = &point};
    VkResult r = v->api.vkWaitSemaphores(v->dev, &wi, UINT64_MAX);
    if (r != VK_SUCCESS) {
        snprintf(v->lost, sizeof v->lost, "vkWaitSemaphores: %s", vk_result_name(r));
        return vk_fail(r, "vkWaitSemaphores", err, errlen);
    }
    if (point > v->passed)
        v->passed = point;
    retire_jobs(v, point);
    return KERN_OK;
}

kern_status vk_sync(rt_device *d, char *err, size_t errlen) {
    return vk_wait(d, d->submitted, err, errlen);
}

/* Submits cb signalling the next completion point (*point). */
kern_status vk_submit(vk_device *v, VkCommandBuffer cb, uint64_t *point, char *err, size_t errlen) {
    uint64_t value = v->base.submitted + 1;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .signalSemaphoreValueCount = 1,
                                        .pSignalSemaphoreValues = &value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = &ti,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cb,
                       .signalSemaphoreCount = 1,
                       .pSignalSemaphores = &v->timeline};
    VkResult r = v->api.vkQueueSubmit(v->queue, 1, &si, VK_NULL_HANDLE);
    if (r != VK_SUCCESS) {
        snprintf(v->lost, sizeof v->lost, "vkQueueSubmit: %s", vk_result_name(r));
        return vk_fail(r, "vkQueueSubmit", err, errlen);
    }
    v->base.submitted = value;
    *point = value;
    return KERN_OK;
}

/* Everything before this point in the queue, made visible to everything after it. */
void vk_barrier_all(vk_device *v, VkCommandBuffer cb) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT};
    VkPipelineStageFlags all =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    v->api.vkCmdPipelineBarrier(cb, all | VK_PIPELINE_STAGE_HOST_BIT,
                                all | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* A free job (one whose point has passed), or a new one; NULL with a message. */
static vk_job *job_get(vk_device *v, char *err, size_t errlen) {
    vk_poll(&v->base);
    vk_job *j = v->free_jobs;
    if (j) {
        v->free_jobs = j->next;
        j->next = NULL;
        v->api.vkResetCommandBuffer(j->cb, 0);
        return j;
    }
    j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = v->cmdpool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    if (!v->slabs || v->slabs->used == VK_SLAB_JOBS) {
        vk_slab *sl = calloc(1, sizeof *sl);
        if (!sl || vk_mem_create(v, (VkDeviceSize)VK_SLAB_JOBS * VK_SLOT, true, &sl->mem, err,
                                 errlen) != KERN_OK) {
            if (!sl)
                snprintf(err, errlen, "out of host memory");
            free(sl);
            free(j);
            return NULL;
        }
        if (!sl->mem.map) {
            vk_mem_destroy(v, &sl->mem);
            free(sl);
            free(j);
            snprintf(err, errlen, "no host-visible memory for launch blocks");
            return NULL;
        }
        sl->next = v->slabs;
        v->slabs = sl;
    }
    j->slab = v->slabs;
    j->at = (VkDeviceSize)v->slabs->used++ * VK_SLOT;
    VkResult r = v->api.vkAllocateCommandBuffers(v->dev, &ai, &j->cb);
    if (r != VK_SUCCESS) {
        vk_fail(r, "vkAllocateCommandBuffers", err, errlen);
        free(j); /* its slot stays unused in the slab */
        return NULL;
    }
    return j;
}

static void job_free(vk_device *v, vk_job *j) {
    if (j->pool)
        v->api.vkDestroyDescriptorPool(v->dev, j->pool, NULL);
    vk_mem_destroy(v, &j->block);
    free(j); /* the command buffer goes with the pool; the slot with its slab */
}

/* Puts j in flight with point. */
static void job_track(vk_device *v, vk_job *j, uint64_t point) {
    j->point = point;
    j->next = NULL;
    if (v->inflight_tail)
        v->inflight_tail->next = j;
    else
        v->inflight = j;
    v->inflight_tail = j;
}

static void job_release(vk_device *v, vk_job *j) {
    j->next = v->free_jobs;
    v->free_jobs = j;
}

static kern_status begin_cb(vk_device *v, VkCommandBuffer cb, char *err, size_t errlen) {
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = v->api.vkBeginCommandBuffer(cb, &bi);
    if (r != VK_SUCCESS)
        return vk_fail(r, "vkBeginCommandBuffer", err, errlen);
    vk_barrier_all(v, cb);
    return KERN_OK;
}

/* Runs a transfer (copy or fill) recorded by rec, after everything submitted so far, and
 * waits for it. */

kern_status vk_run_transfer(vk_device *v, vk_record_fn rec, void *user, char *err, size_t errlen) {
    vk_job *j = job_get(v, err, errlen);
    if (!j)
        return KERN_ERR_OUT_OF_MEMORY;
    kern_status s = begin_cb(v, j->cb, err, errlen);
    if (s != KERN_OK) {
        job_release(v, j);
        return s;
    }
    rec(v, j->cb, user);
    vk_barrier_all(v, j->cb);
    VkResult r = v->api.vkEndCommandBuffer(j->cb);
    if (r != VK_SUCCESS) {
        job_release(v, j);
        return vk_fail(r, "vkEndCommandBuffer", err, errlen);
    }
    uint64_t point;
    if ((s = vk_submit(v, j->cb, &point, err, errlen)) != KERN_OK) {
        job_release(v, j);
        return s;
    }
    job_track(v, j, point);
    return vk_wait(&v->base, point, err, errlen);
}

/* At destruction, with the device idle: frees every job and slab. */
void vk_jobs_free(vk_device *v) {
    retire_jobs(v, UINT64_MAX);
    while (v->free_jobs) {
        vk_job *j = v->free_jobs;
        v->free_jobs = j->next;
        job_free(v, j);
    }
    while (v->slabs) {
        vk_slab *sl = v->slabs;
        v->slabs = sl->next;
        vk_mem_destroy(v, &sl->mem);
        free(sl);
    }
}

/* ---- launches ---------------------------------------------------------------------------- */

/* The groups of a task: a serial task 1, a parallel task enough for its count (0: none)
 * but at most the resident groups (a spread one: at most the device's dispatch limit;
 * rt_gpu_grid, gpu.h), and never more threads than the adstack slots. */
static uint32_t task_groups(vk_device *v, bool parallel, bool spread, int64_t count,
                            int64_t slots) {
    if (!parallel)
        return 1;
    if (count == 0)
        return 0;
    int64_t g = v->resident_groups, need = (count + KERN_SPV_GROUP - 1) / KERN_SPV_GROUP;
    if (count > 0 && spread && slots <= 0)
        g = v->props.limits.maxComputeWorkGroupCount[0];
    if (count > 0 && need < g)
        g = need;
    if (slots > 0 && g * KERN_SPV_GROUP > slots)
        g = slots / KERN_SPV_GROUP;
    return g < 1 ? 1 : (uint32_t)g;
}

static void put(unsigned char *block, size_t off, const void *v, size_t n) {
    memcpy(block + off, v, n);
}

static void fill_block(const vk_kernel *k, const rt_launch *l, unsigned char *block) {
    const kern_meta_kernel *mk = l->meta;
    memset(block, 0, k->block_size);
    for (int p = 0; p < mk->nparams; p++) {
        const kern_type *t = mk->params[p].type;
        const rt_launch_arg *a = &l->args[p];
        if (ty_is_array(t)) {
            for (int dd = 0; dd < t->rank; dd++)
                put(block, k->off[p] + 8 * (size_t)dd, &a->shape[dd], 8);
            continue;
        }
        uint32_t b;
        switch (t->kind) {
        case TY_BOOL: b = a->scalar.b ? 1 : 0, put(block, k->off[p], &b, 4); break;
        case TY_I8:
        case TY_U8: b = a->scalar.u8, put(block, k->off[p], &b, 4); break; /* truncated */
        case TY_I16:
        case TY_U16: b = a->scalar.u16, put(block, k->off[p], &b, 4); break;
        case TY_I32:
        case TY_U32:
        case TY_F32: put(block, k->off[p], &a->scalar, 4); break;
        default: put(block, k->off[p], &a->scalar, 8); break;
        }
    }
    int64_t slots = l->ad_heap ? l->ad_slots : 0;
    put(block, k->off[mk->nparams], &slots, 8);
    for (int s = 0; s < 2 * mk->nadstacks; s++)
        put(block, k->off[mk->nparams + 1 + s], &l->ad_layout[s], 8);
}

static kern_status job_prepare(vk_device *v, vk_job *j, const vk_kernel *k, char *err,
                               size_t errlen) {
    kern_status s;
    if (k->block_size > VK_SLOT_BLOCK && j->block.size < k->block_size) {
        vk_mem_destroy(v, &j->block);
        if ((s = vk_mem_create(v, k->block_size, true, &j->block, err, errlen)) != KERN_OK)
            return s;
    }
    if (!j->pool || j->pool_bufs < k->nbindings) {
        if (j->pool)
            v->api.vkDestroyDescriptorPool(v->dev, j->pool, NULL);
        j->pool = VK_NULL_HANDLE;
        uint32_t want = k->nbindings < 16 ? 16 : k->nbindings;
        VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC, 1},
                                         {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, want}};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = 1,
                                         .poolSizeCount = 2,
                                         .pPoolSizes = sizes};
        VkResult r = v->api.vkCreateDescriptorPool(v->dev, &pi, NULL, &j->pool);
        if (r != VK_SUCCESS)
            return vk_fail(r, "vkCreateDescriptorPool", err, errlen);
        j->pool_bufs = want;
    } else {
        v->api.vkResetDescriptorPool(v->dev, j->pool, 0);
    }
    return KERN_OK;
}

/* Fills launch l's block at blk + blkoff and allocates and writes its descriptor set from
 * pool (its record at errm + erroff). */
static kern_status write_set(vk_device *v, VkDescriptorPool pool, const rt_launch *l,
                             const vk_mem *blk, VkDeviceSize blkoff, const vk_mem *errm,
                             VkDeviceSize erroff, VkDescriptorSet *out, char *err, size_t errlen) {
    const vk_kernel *k = l->kernel;
    const kern_meta_kernel *mk = l->meta;
    fill_block(k, l, (unsigned char *)blk->map + blkoff);
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &k->dsl};
    VkDescriptorSet set;
    VkResult r = v->api.vkAllocateDescriptorSets(v->dev, &ai, &set);
    if (r != VK_SUCCESS)
        return vk_fail(r, "vkAllocateDescriptorSets", err, errlen);
    VkDescriptorBufferInfo *infos = calloc(k->nbindings, sizeof *infos);
    VkWriteDescriptorSet *writes = calloc(k->nbindings, sizeof *writes);
    if (!infos || !writes) {
        free(infos);
        free(writes);
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    uint32_t nw = 0;
    const vk_mem *heap = l->ad_heap ? l->ad_heap : &v->dummy;
    int scratch = rt_spirv_has_scratch(mk) ? kern_spv_scratch_binding(mk->nparams) : -1;
    for (uint32_t i = 0; i <= KERN_SPV_BIND_PARAM0 + (uint32_t)mk->nparams; i++) {
        const vk_mem *m;
        VkDeviceSize off = 0, range = VK_WHOLE_SIZE;
        if ((int)i == scratch)
            m = &v->scratch;
        else if (i == KERN_SPV_BIND_PARAM0 + (uint32_t)mk->nparams)
            continue;
        else if (i == KERN_SPV_BIND_BLOCK)
            m = blk, off = blkoff, range = k->block_size;
        else if (i == KERN_SPV_BIND_ERR)
            m = errm, off = erroff, range = sizeof(kern_err_record);
        else if (i < KERN_SPV_BIND_PARAM0)
            m = heap;
        else if (l->args[i - KERN_SPV_BIND_PARAM0].is_array)
            m = l->args[i - KERN_SPV_BIND_PARAM0].mem;
        else
            continue;
        infos[nw] = (VkDescriptorBufferInfo){m->buf, off, range};
        writes[nw] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = i == KERN_SPV_BIND_BLOCK ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                                       : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &infos[nw]};
        nw++;
    }
    v->api.vkUpdateDescriptorSets(v->dev, nw, writes, 0, NULL);
    free(infos);
    free(writes);
    *out = set;
    return KERN_OK;
}

/* Fills launch l's block at blk + blkoff, allocates and writes its descriptor set from
 * pool (its record at errm + erroff), and records its tasks into cb. */
kern_status vk_record_launch(vk_device *v, VkCommandBuffer cb, VkDescriptorPool pool,
                             const rt_launch *l, const vk_mem *blk, VkDeviceSize blkoff,
                             const vk_mem *errm, VkDeviceSize erroff, char *err, size_t errlen) {
    const vk_kernel *k = l->kernel;
    VkDescriptorSet set;
    kern_status s = write_set(v, pool, l, blk, blkoff, errm, erroff, &set, err, errlen);
    if (s != KERN_OK)
        return s;
    uint32_t zero = 0;
    for (int t = 0; t < l->ntasks && t < k->ntasks; t++) {
        uint32_t groups = task_groups(v, l->tasks[t].parallel, rt_task_spread(l, t),
                                      l->counts ? l->counts[t] : -1, l->ad_heap ? l->ad_slots : 0);
        if (groups == 0)
            continue;
        v->api.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipes[t]);
        v->api.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set, 1,
                                       &zero);
        v->api.vkCmdDispatch(cb, groups, 1, 1);
        vk_barrier_all(v, cb);
        if (k->sums[t]) { /* the task's replicas added to their arrays (spv_emit_adds.c) */
            v->api.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->sums[t]);
            v->api.vkCmdDispatch(cb, KERN_SPV_REPLICA_ELEMS / KERN_SPV_GROUP, 1, 1);
            vk_barrier_all(v, cb);
        }
    }
    return KERN_OK;
}

/* Submits launch l: its tasks, or (sizer not null) that pipeline on `groups` groups. */
static kern_status submit_launch(vk_device *v, const rt_launch *l, VkPipeline sizer,
                                 uint32_t groups, uint64_t *point, char *err, size_t errlen) {
    if (v->lost[0]) {
        snprintf(err, errlen, "the device was lost: %s", v->lost);
        return KERN_ERR_DEVICE;
    }
    vk_job *j = job_get(v, err, errlen);
    if (!j)
        return KERN_ERR_OUT_OF_MEMORY;
    kern_status s = job_prepare(v, j, l->kernel, err, errlen);
    if (s != KERN_OK) {
        job_free(v, j);
        return s;
    }
    const vk_kernel *k = l->kernel;
    bool own = k->block_size > VK_SLOT_BLOCK;
    const vk_mem *blk = own ? &j->block : &j->slab->mem;
    VkDeviceSize blkoff = own ? 0 : j->at;
    memset((char *)j->slab->mem.map + j->at + VK_SLOT_BLOCK, 0, sizeof(kern_err_record));
    if ((s = begin_cb(v, j->cb, err, errlen)) != KERN_OK) {
        job_release(v, j);
        return s;
    }
    if (sizer) {
        VkDescriptorSet set;
        s = write_set(v, j->pool, l, blk, blkoff, &j->slab->mem, j->at + VK_SLOT_BLOCK, &set, err,
                      errlen);
        if (s == KERN_OK) {
            uint32_t zero = 0;
            v->api.vkCmdBindPipeline(j->cb, VK_PIPELINE_BIND_POINT_COMPUTE, sizer);
            v->api.vkCmdBindDescriptorSets(j->cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1,
                                           &set, 1, &zero);
            v->api.vkCmdDispatch(j->cb, groups, 1, 1);
            vk_barrier_all(v, j->cb);
        }
    } else {
        s = vk_record_launch(v, j->cb, j->pool, l, blk, blkoff, &j->slab->mem,
                             j->at + VK_SLOT_BLOCK, err, errlen);
    }
    if (s != KERN_OK) {
        job_release(v, j);
        return s;
    }
    VkResult r = v->api.vkEndCommandBuffer(j->cb);
    if (r != VK_SUCCESS) {
        job_release(v, j);
        return vk_fail(r, "vkEndCommandBuffer", err, errlen);
    }
    if ((s = vk_submit(v, j->cb, point, err, errlen)) != KERN_OK) {
        job_release(v, j);
        return s;
    }
    j->dst = l->err;
    job_track(v, j, *point);
    return KERN_OK;
}

kern_status vk_launch(rt_device *d, const rt_launch *l, uint64_t *point, char *err, size_t errlen) {
    return submit_launch(vk_of(d), l, VK_NULL_HANDLE, 0, point, err, errlen);
}

kern_status vk_launch_sizer(vk_device *v, const rt_launch *l, VkPipeline sizer, uint32_t groups,
                            char *err, size_t errlen) {
    uint64_t point;
    kern_status s = submit_launch(v, l, sizer, groups, &point, err, errlen);
    return s != KERN_OK ? s : vk_wait(&v->base, point, err, errlen);
}
