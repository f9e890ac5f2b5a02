/* vulkan.c - the Vulkan device (device.h) for SPIR-V modules (docs/spirv-abi.md).
 * libvulkan.so.1 is loaded with dlopen only when a Vulkan context is created, so libkern
 * needs no Vulkan at run time otherwise; the entry points come from vkGetInstanceProcAddr
 * and vkGetDeviceProcAddr (the headers are only used for the types: VK_NO_PROTOTYPES).
 *
 * - Device: the first physical device of the most capable kind (discrete, integrated,
 *   virtual, CPU), or number kern_context_options.device ($KERN_VULKAN_DEVICE); one compute queue. The optional
 *   features of docs/spirv-abi.md are enabled when the device has them; a module that
 *   needs one it lacks is refused with its name (load_code scans OpCapability).
 * - Memory: one VkBuffer and VkDeviceMemory per allocation (at least 4 bytes, so 0-byte
 *   buffers stay distinct), device-local when possible. When that memory is also host
 *   visible and coherent (lavapipe, resizable BAR) copies are memcpy; otherwise through a
 *   host-visible staging buffer and a transfer submission that is waited for
 *   (kern_context_options.staging, $KERN_VULKAN_STAGING=1, forces that path, to test it where
 *   all memory is visible).
 * - Launches: a job per launch (reused once its point has passed): a command buffer, a
 *   descriptor pool with the launch's one set, a host-visible buffer holding the launch
 *   block (binding 0) and one for the error record (binding 1). The command buffer starts
 *   with a barrier against everything submitted before (so submissions run in order), then
 *   per task: pipeline, set, dispatch, barrier. The submission signals the device's
 *   timeline semaphore with the launch's completion point; poll reads the semaphore
 *   (vkGetSemaphoreCounterValue), wait blocks on it (vkWaitSemaphores). When a job's point
 *   has passed, its error record is copied into the launch's rt_launch.err and the job is
 *   free again (runtime contracts 5-7, docs/runtime-contracts.md).
 * - Adstacks are slot-major; ad_slots is the resident threads (a fixed number of groups
 *   per device kind), or max_items rounded up to whole groups when fewer. Capacities that
 *   read device arrays are evaluated on the host after copying those arrays back
 *   (size_adstack).
 * - Graphs (runtime contract 9): the captured launches recorded once into a command
 *   buffer, in four copies with their own launch blocks, descriptor sets and error
 *   records (host visible); a replay submits a copy, re-recording nothing.
 * - Validation: kern_context_options.validation ($KERN_VULKAN_VALIDATION=1) enables VK_LAYER_KHRONOS_validation and counts
 *   every message it prints (rt_vulkan_validation_messages); =fatal also aborts the process
 *   on the first one (CI: a test that provokes a message crashes and fails). */
#define VK_NO_PROTOTYPES
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "../common/spvblock.h"
#include "adstack.h"
#include "device.h"

#define VK_INSTANCE_API(X)                      \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceFeatures2)             \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceMemoryProperties)      \
    X(vkEnumerateDeviceExtensionProperties)     \
    X(vkCreateDevice)                           \
    X(vkGetDeviceProcAddr)

#define VK_DEVICE_API(X)             \
    X(vkDestroyDevice)               \
    X(vkGetDeviceQueue)              \
    X(vkCreateBuffer)                \
    X(vkDestroyBuffer)               \
    X(vkGetBufferMemoryRequirements) \
    X(vkAllocateMemory)              \
    X(vkFreeMemory)                  \
    X(vkBindBufferMemory)            \
    X(vkMapMemory)                   \
    X(vkCreateCommandPool)           \
    X(vkDestroyCommandPool)          \
    X(vkAllocateCommandBuffers)      \
    X(vkFreeCommandBuffers)          \
    X(vkBeginCommandBuffer)          \
    X(vkEndCommandBuffer)            \
    X(vkResetCommandBuffer)          \
    X(vkCmdCopyBuffer)               \
    X(vkCmdFillBuffer)               \
    X(vkCmdPipelineBarrier)          \
    X(vkCmdBindPipeline)             \
    X(vkCmdBindDescriptorSets)       \
    X(vkCmdDispatch)                 \
    X(vkQueueSubmit)                 \
    X(vkCreateSemaphore)             \
    X(vkDestroySemaphore)            \
    X(vkGetSemaphoreCounterValue)    \
    X(vkWaitSemaphores)              \
    X(vkDeviceWaitIdle)              \
    X(vkCreateShaderModule)          \
    X(vkDestroyShaderModule)         \
    X(vkCreateDescriptorSetLayout)   \
    X(vkDestroyDescriptorSetLayout)  \
    X(vkCreatePipelineLayout)        \
    X(vkDestroyPipelineLayout)       \
    X(vkCreateComputePipelines)      \
    X(vkDestroyPipeline)             \
    X(vkCreatePipelineCache)         \
    X(vkDestroyPipelineCache)        \
    X(vkCreateDescriptorPool)        \
    X(vkDestroyDescriptorPool)       \
    X(vkResetDescriptorPool)         \
    X(vkAllocateDescriptorSets)      \
    X(vkUpdateDescriptorSets)

typedef struct vk_api {
    void *lib;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
    PFN_vkEnumerateInstanceLayerProperties vkEnumerateInstanceLayerProperties;
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
#define X(f) PFN_##f f;
    VK_INSTANCE_API(X)
    VK_DEVICE_API(X)
#undef X
} vk_api;

typedef struct vk_mem {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *map; /* host-visible and coherent: the mapping; else NULL */
} vk_mem;

typedef struct vk_job {
    uint64_t point; /* 0: free */
    VkCommandBuffer cb;
    VkDescriptorPool pool;
    uint32_t pool_bufs;   /* storage-buffer descriptors the pool holds */
    vk_mem block;         /* a launch block larger than a slab slot holds (else unused) */
    struct vk_slab *slab; /* the slab holding this job's slot */
    VkDeviceSize at;      /* the slot's offset: its launch block, then its error record */
    kern_err_record *dst;
    struct vk_job *next;
} vk_job;

/* Jobs take their launch block and error record from slabs of host-visible memory (one
 * allocation per VK_SLAB_JOBS jobs, not two per job): slot = block, then the record. */
enum { VK_SLAB_JOBS = 64, VK_SLOT = 1024, VK_SLOT_BLOCK = VK_SLOT - 256 };
/* Descriptor offsets must be multiples of minStorageBufferOffsetAlignment, which Vulkan
 * caps at 256: slots and the records in them sit at multiples of 256. */
_Static_assert(VK_SLOT % 256 == 0 && VK_SLOT_BLOCK % 256 == 0, "slot offsets stay aligned");

typedef struct vk_slab {
    vk_mem mem;
    int used;
    struct vk_slab *next;
} vk_slab;

typedef struct vk_device {
    rt_device base;
    vk_slab *slabs; /* the newest first */
    vk_api api;
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfamily;
    VkCommandPool cmdpool;
    VkSemaphore timeline;
    VkPipelineCache cache;
    vk_mem dummy; /* the heap bindings of kernels without adstacks */
    bool has_f64, has_i64, has_i8, has_8bit, has_i64atomics, has_f32add;
    bool has_sg_basic, has_sg_vote, has_sg_arith; /* subgroup operations in compute shaders */
    bool has_shared_f32add; /* float atomic add on workgroup memory (block copies) */
    bool force_staging;     /* options' staging: never map device-local memory */
    VkDeviceSize max_alloc; /* maxMemoryAllocationSize */
    int64_t resident_groups;
    vk_job *inflight, *inflight_tail, *free_jobs;
    uint64_t passed; /* the highest completion point seen passed */
    atomic_int validation_messages;
    bool validation_fatal;
    char first_message[512];
    char driver[VK_MAX_DRIVER_INFO_SIZE + 1]; /* driverInfo: "Mesa 22.3.6 (LLVM 15.0.6)" */
    char lost[256];
} vk_device;

typedef struct vk_code {
    VkShaderModule module;
    size_t nwords;
    uint32_t *words; /* kept for the entry-point check */
} vk_code;

typedef struct vk_kernel {
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    int ntasks;
    VkPipeline *pipes;
    uint32_t nbindings; /* 5 + nparams */
    size_t block_size;
    size_t *off; /* kern_spv_block_layout */
} vk_kernel;

static vk_device *vk_of(rt_device *d) { return (vk_device *)d; }

static const char *vk_result_name(VkResult r) {
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

static kern_status vk_fail(VkResult r, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s failed: %s (%d)", what, vk_result_name(r), (int)r);
    return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
               ? KERN_ERR_OUT_OF_MEMORY
               : KERN_ERR_DEVICE;
}

/* ---- memory ------------------------------------------------------------------------------ */

/* A memory type of the buffer's bits with all of `want`, or -1. */
static int mem_type(vk_device *v, uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < v->memprops.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (v->memprops.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

/* host: memory the host maps (staging, launch blocks, error records); else device-local,
 * mapped too when it is host visible and coherent. */
static kern_status mem_create(vk_device *v, VkDeviceSize bytes, bool host, vk_mem *m, char *err,
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

static void mem_destroy(vk_device *v, vk_mem *m) {
    if (m->buf)
        v->api.vkDestroyBuffer(v->dev, m->buf, NULL);
    if (m->mem)
        v->api.vkFreeMemory(v->dev, m->mem, NULL); /* unmaps */
    memset(m, 0, sizeof *m);
}

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

static uint64_t vk_poll(rt_device *d) {
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

static kern_status vk_wait(rt_device *d, uint64_t point, char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    if (point == 0)
        return KERN_OK;
    if (point > d->submitted) { /* it would never come */
        snprintf(err, errlen, "completion point %llu was never submitted (the latest is %llu)",
                 (unsigned long long)point, (unsigned long long)d->submitted);
        return KERN_ERR_INTERNAL;
    }
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

static kern_status vk_sync(rt_device *d, char *err, size_t errlen) {
    return vk_wait(d, d->submitted, err, errlen);
}

/* Submits cb signalling the next completion point (*point). */
static kern_status submit(vk_device *v, VkCommandBuffer cb, uint64_t *point, char *err,
                          size_t errlen) {
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
static void barrier_all(vk_device *v, VkCommandBuffer cb) {
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
        if (!sl || mem_create(v, (VkDeviceSize)VK_SLAB_JOBS * VK_SLOT, true, &sl->mem, err,
                              errlen) != KERN_OK) {
            if (!sl)
                snprintf(err, errlen, "out of host memory");
            free(sl);
            free(j);
            return NULL;
        }
        if (!sl->mem.map) {
            mem_destroy(v, &sl->mem);
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
    mem_destroy(v, &j->block);
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
    barrier_all(v, cb);
    return KERN_OK;
}

/* Runs a transfer (copy or fill) recorded by rec, after everything submitted so far, and
 * waits for it. */
typedef void (*record_fn)(vk_device *v, VkCommandBuffer cb, void *user);

static kern_status run_transfer(vk_device *v, record_fn rec, void *user, char *err, size_t errlen) {
    vk_job *j = job_get(v, err, errlen);
    if (!j)
        return KERN_ERR_OUT_OF_MEMORY;
    kern_status s = begin_cb(v, j->cb, err, errlen);
    if (s != KERN_OK) {
        job_release(v, j);
        return s;
    }
    rec(v, j->cb, user);
    barrier_all(v, j->cb);
    VkResult r = v->api.vkEndCommandBuffer(j->cb);
    if (r != VK_SUCCESS) {
        job_release(v, j);
        return vk_fail(r, "vkEndCommandBuffer", err, errlen);
    }
    uint64_t point;
    if ((s = submit(v, j->cb, &point, err, errlen)) != KERN_OK) {
        job_release(v, j);
        return s;
    }
    job_track(v, j, point);
    return vk_wait(&v->base, point, err, errlen);
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

/* ---- the device operations --------------------------------------------------------------- */

static kern_status vk_alloc(rt_device *d, size_t bytes, void **out, char *err, size_t errlen) {
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
    kern_status s = mem_create(v, bytes, false, m, err, errlen);
    if (s != KERN_OK) {
        free(m);
        return s;
    }
    *out = m;
    return KERN_OK;
}

static void vk_free(rt_device *d, void *mem) {
    if (!mem)
        return;
    mem_destroy(vk_of(d), mem);
    free(mem);
}

static kern_status staged(vk_device *v, vk_mem *m, size_t offset, void *host, const void *src,
                          size_t n, char *err, size_t errlen) {
    vk_mem st;
    kern_status s = mem_create(v, n, true, &st, err, errlen);
    if (s != KERN_OK)
        return s;
    if (!st.map) {
        mem_destroy(v, &st);
        snprintf(err, errlen, "device %s has no host-visible memory for a staging buffer",
                 v->props.deviceName);
        return KERN_ERR_UNSUPPORTED;
    }
    if (src)
        memcpy(st.map, src, n);
    copy_args a = src ? (copy_args){st.buf, m->buf, 0, offset, n, 0}
                      : (copy_args){m->buf, st.buf, offset, 0, n, 0};
    s = run_transfer(v, rec_copy, &a, err, errlen);
    if (s == KERN_OK && host)
        memcpy(host, st.map, n);
    mem_destroy(v, &st);
    return s;
}

static kern_status vk_copy_in(rt_device *d, void *mem, size_t offset, const void *src, size_t n,
                              char *err, size_t errlen) {
    vk_mem *m = mem;
    if (n == 0)
        return KERN_OK;
    if (m->map) {
        memcpy((char *)m->map + offset, src, n);
        return KERN_OK;
    }
    return staged(vk_of(d), m, offset, NULL, src, n, err, errlen);
}

static kern_status vk_copy_out(rt_device *d, void *dst, const void *mem, size_t offset, size_t n,
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

static kern_status vk_zero(rt_device *d, void *mem, size_t offset, size_t n, char *err,
                           size_t errlen) {
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
        return run_transfer(v, rec_fill, &a, err, errlen);
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

/* ---- code -------------------------------------------------------------------------------- */

typedef struct vk_feature {
    uint32_t cap; /* SPIR-V capability number */
    const char *what;
    size_t has; /* offset of the vk_device flag */
} vk_feature;

static const vk_feature features[] = {
    {10, "64-bit floats (shaderFloat64)", offsetof(vk_device, has_f64)},
    {11, "64-bit integers (shaderInt64)", offsetof(vk_device, has_i64)},
    {39, "8-bit integers (shaderInt8)", offsetof(vk_device, has_i8)},
    {4448, "8-bit storage buffers (storageBuffer8BitAccess)", offsetof(vk_device, has_8bit)},
    {12, "64-bit atomics (shaderBufferInt64Atomics)", offsetof(vk_device, has_i64atomics)},
    {6033, "float atomic add (shaderBufferFloat32AtomicAdd)", offsetof(vk_device, has_f32add)},
    {61, "subgroup operations in compute shaders", offsetof(vk_device, has_sg_basic)},
    {62, "subgroup vote operations", offsetof(vk_device, has_sg_vote)},
    {63, "subgroup arithmetic operations", offsetof(vk_device, has_sg_arith)},
};

static kern_status vk_load_code(rt_device *d, const kern_code_image *img, void **out, char *err,
                                size_t errlen) {
    vk_device *v = vk_of(d);
    *out = NULL;
    if (img->kind != KERN_CODE_SPIRV)
        return rt_code_refused(d, img, err, errlen);
    if (!img->bytes || img->len < 20 || img->len % 4 != 0) {
        snprintf(err, errlen,
                 "malformed SPIR-V: %zu bytes (a module is at least 20 bytes, a "
                 "multiple of 4)",
                 img->len);
        return KERN_ERR_FORMAT;
    }
    size_t n = img->len / 4;
    uint32_t *w = malloc(img->len);
    if (!w) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    memcpy(w, img->bytes, img->len);
    if (w[0] != 0x07230203u) {
        snprintf(err, errlen, "malformed SPIR-V: bad magic number 0x%08x", w[0]);
        free(w);
        return KERN_ERR_FORMAT;
    }
    for (size_t i = 5; i < n;) { /* the instructions: refuse what the device lacks */
        uint32_t len = w[i] >> 16, op = w[i] & 0xffffu;
        if (len == 0 || i + len > n) {
            free(w);
            snprintf(err, errlen,
                     "malformed SPIR-V: an instruction at word %zu overruns the module", i);
            return KERN_ERR_FORMAT;
        }
        if (op == 59 /* OpVariable */ && len >= 4 && w[i + 3] == 4 /* Workgroup */ &&
            !v->has_shared_f32add) {
            free(w);
            snprintf(err, errlen,
                     "the module needs float atomic add on workgroup memory "
                     "(shaderSharedFloat32AtomicAdd), which %s lacks",
                     v->props.deviceName);
            return KERN_ERR_UNSUPPORTED;
        }
        if (op == 17 /* OpCapability */ && len == 2) {
            for (size_t f = 0; f < sizeof features / sizeof *features; f++)
                if (features[f].cap == w[i + 1] && !*(bool *)((char *)v + features[f].has)) {
                    free(w);
                    snprintf(err, errlen, "the module needs %s, which %s lacks", features[f].what,
                             v->props.deviceName);
                    return KERN_ERR_UNSUPPORTED;
                }
        }
        i += len;
    }
    vk_code *c = calloc(1, sizeof *c);
    if (!c) {
        free(w);
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    VkShaderModuleCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = img->len, .pCode = w};
    VkResult r = v->api.vkCreateShaderModule(v->dev, &ci, NULL, &c->module);
    if (r != VK_SUCCESS) {
        free(w);
        free(c);
        return vk_fail(r, "vkCreateShaderModule", err, errlen);
    }
    c->words = w;
    c->nwords = n;
    *out = c;
    return KERN_OK;
}

static void vk_unload_code(rt_device *d, void *code) {
    vk_code *c = code;
    vk_of(d)->api.vkDestroyShaderModule(vk_of(d)->dev, c->module, NULL);
    free(c->words);
    free(c);
}

/* Whether the module declares an entry point named name. */
static bool has_entry(const vk_code *c, const char *name) {
    for (size_t i = 5; i < c->nwords;) {
        uint32_t len = c->words[i] >> 16, op = c->words[i] & 0xffffu;
        if (len == 0)
            break;
        if (op == 15 /* OpEntryPoint */ && len > 3 && i + len <= c->nwords) {
            const char *s = (const char *)&c->words[i + 3];
            size_t maxlen = (len - 3) * 4;
            if (strnlen(s, maxlen) < maxlen && !strcmp(s, name))
                return true;
        }
        i += len;
    }
    return false;
}

static void vk_free_kernel(rt_device *d, void *handle) {
    vk_device *v = vk_of(d);
    vk_kernel *k = handle;
    if (!k)
        return;
    for (int t = 0; t < k->ntasks; t++)
        if (k->pipes && k->pipes[t])
            v->api.vkDestroyPipeline(v->dev, k->pipes[t], NULL);
    if (k->layout)
        v->api.vkDestroyPipelineLayout(v->dev, k->layout, NULL);
    if (k->dsl)
        v->api.vkDestroyDescriptorSetLayout(v->dev, k->dsl, NULL);
    free(k->pipes);
    free(k->off);
    free(k);
}

static kern_status vk_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk, void **out,
                                 char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    vk_code *c = code;
    vk_kernel *k = calloc(1, sizeof *k);
    VkDescriptorSetLayoutBinding *b = calloc((size_t)mk->nparams + 5, sizeof *b);
    const kern_type **pt = calloc((size_t)mk->nparams + 1, sizeof *pt);
    if (k)
        k->off = calloc((size_t)mk->nparams + 1 + 2 * (size_t)mk->nadstacks, sizeof *k->off);
    if (k)
        k->pipes = calloc((size_t)mk->ntasks + 1, sizeof *k->pipes);
    kern_status s = KERN_OK;
    if (!k || !b || !pt || !k->off || !k->pipes) {
        snprintf(err, errlen, "out of host memory");
        s = KERN_ERR_OUT_OF_MEMORY;
        goto done;
    }
    uint32_t nb = 0;
    for (uint32_t i = 0; i < 5 + (uint32_t)mk->nparams; i++) {
        if (i >= KERN_SPV_BIND_PARAM0 && !ty_is_array(mk->params[i - KERN_SPV_BIND_PARAM0].type))
            continue;
        b[nb++] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = i == KERN_SPV_BIND_BLOCK ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                                       : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    }
    k->nbindings = nb;
    for (int p = 0; p < mk->nparams; p++)
        pt[p] = mk->params[p].type;
    k->block_size = kern_spv_block_layout(pt, mk->nparams, mk->nadstacks, k->off);
    VkDescriptorSetLayoutCreateInfo li = {.sType =
                                              VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = nb,
                                          .pBindings = b};
    VkResult r = v->api.vkCreateDescriptorSetLayout(v->dev, &li, NULL, &k->dsl);
    if (r != VK_SUCCESS) {
        s = vk_fail(r, "vkCreateDescriptorSetLayout", err, errlen);
        goto done;
    }
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &k->dsl};
    if ((r = v->api.vkCreatePipelineLayout(v->dev, &pli, NULL, &k->layout)) != VK_SUCCESS) {
        s = vk_fail(r, "vkCreatePipelineLayout", err, errlen);
        goto done;
    }
    k->ntasks = mk->ntasks;
    for (int t = 0; t < mk->ntasks; t++) {
        char sym[1024];
        kern_meta_symbol(sym, sizeof sym, mk->name, t, false);
        if (!has_entry(c, sym)) {
            snprintf(err, errlen, "kernel '%s', task %d: missing symbol '%s'", mk->name, t, sym);
            s = KERN_ERR_FORMAT;
            goto done;
        }
        VkComputePipelineCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = c->module,
                      .pName = sym},
            .layout = k->layout};
        r = v->api.vkCreateComputePipelines(v->dev, v->cache, 1, &ci, NULL, &k->pipes[t]);
        if (r != VK_SUCCESS) {
            s = vk_fail(r, "vkCreateComputePipelines", err, errlen);
            goto done;
        }
    }
done:
    free(b);
    free(pt);
    if (s != KERN_OK) {
        vk_free_kernel(d, k);
        k = NULL;
    }
    *out = k;
    return s;
}

/* ---- launches ---------------------------------------------------------------------------- */

static int64_t vk_ad_slots(rt_device *d, int64_t max_items) {
    int64_t resident = vk_of(d)->resident_groups * KERN_SPV_GROUP;
    if (max_items < 0)
        return resident;
    int64_t want = (max_items + KERN_SPV_GROUP - 1) / KERN_SPV_GROUP * KERN_SPV_GROUP;
    if (want < KERN_SPV_GROUP)
        want = KERN_SPV_GROUP;
    return want < resident ? want : resident;
}

/* The groups of a task: a serial task 1, a parallel task enough for its count (0: none)
 * but at most the resident groups, and never more threads than the adstack slots. */
static uint32_t task_groups(vk_device *v, bool parallel, int64_t count, int64_t slots) {
    if (!parallel)
        return 1;
    if (count == 0)
        return 0;
    int64_t g = v->resident_groups;
    if (count > 0 && (count + KERN_SPV_GROUP - 1) / KERN_SPV_GROUP < g)
        g = (count + KERN_SPV_GROUP - 1) / KERN_SPV_GROUP;
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
        mem_destroy(v, &j->block);
        if ((s = mem_create(v, k->block_size, true, &j->block, err, errlen)) != KERN_OK)
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

/* Fills launch l's block at blk + blkoff, allocates and writes its descriptor set from
 * pool (its record at errm + erroff), and records its tasks into cb. */
static kern_status record_launch(vk_device *v, VkCommandBuffer cb, VkDescriptorPool pool,
                                 const rt_launch *l, const vk_mem *blk, VkDeviceSize blkoff,
                                 const vk_mem *errm, VkDeviceSize erroff, char *err,
                                 size_t errlen) {
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
    for (uint32_t i = 0; i < 5 + (uint32_t)mk->nparams; i++) {
        const vk_mem *m;
        VkDeviceSize off = 0, range = VK_WHOLE_SIZE;
        if (i == KERN_SPV_BIND_BLOCK)
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
    uint32_t zero = 0;
    for (int t = 0; t < l->ntasks && t < k->ntasks; t++) {
        uint32_t groups = task_groups(v, l->tasks[t].parallel, l->counts ? l->counts[t] : -1,
                                      l->ad_heap ? l->ad_slots : 0);
        if (groups == 0)
            continue;
        v->api.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipes[t]);
        v->api.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set, 1,
                                       &zero);
        v->api.vkCmdDispatch(cb, groups, 1, 1);
        barrier_all(v, cb);
    }
    return KERN_OK;
}

static kern_status vk_launch(rt_device *d, const rt_launch *l, uint64_t *point, char *err,
                             size_t errlen) {
    vk_device *v = vk_of(d);
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
    memset((char *)j->slab->mem.map + j->at + VK_SLOT_BLOCK, 0, sizeof(kern_err_record));
    if ((s = begin_cb(v, j->cb, err, errlen)) != KERN_OK ||
        (s = record_launch(v, j->cb, j->pool, l, own ? &j->block : &j->slab->mem, own ? 0 : j->at,
                           &j->slab->mem, j->at + VK_SLOT_BLOCK, err, errlen)) != KERN_OK) {
        job_release(v, j);
        return s;
    }
    VkResult r = v->api.vkEndCommandBuffer(j->cb);
    if (r != VK_SUCCESS) {
        job_release(v, j);
        return vk_fail(r, "vkEndCommandBuffer", err, errlen);
    }
    if ((s = submit(v, j->cb, point, err, errlen)) != KERN_OK) {
        job_release(v, j);
        return s;
    }
    j->dst = l->err;
    job_track(v, j, *point);
    return KERN_OK;
}

/* ---- graphs (contract 9): recorded command buffers, replayed without re-recording ---------- */

enum { VK_GRAPH_SETS = 4 };

typedef struct vk_graph {
    int n;
    VkCommandBuffer cbs[VK_GRAPH_SETS];
    VkDescriptorPool pool;
    vk_mem blocks, recs; /* per copy and launch: a launch block, an error record */
} vk_graph;

static void vk_graph_free(rt_device *d, void *graph) {
    vk_device *v = vk_of(d);
    vk_graph *g = graph;
    if (!g)
        return;
    if (g->pool)
        v->api.vkDestroyDescriptorPool(v->dev, g->pool, NULL);
    for (int c = 0; c < VK_GRAPH_SETS; c++)
        if (g->cbs[c])
            v->api.vkFreeCommandBuffers(v->dev, v->cmdpool, 1, &g->cbs[c]);
    mem_destroy(v, &g->blocks);
    mem_destroy(v, &g->recs);
    free(g);
}

/* VK_GRAPH_SETS copies of one command buffer holding the n launches, each launch with its
 * own block and record (the records of copy c are recs[c * n .. c * n + n - 1], host
 * visible: the runtime zeroes and reads them). */
static kern_status vk_graph_build(rt_device *d, const rt_launch *ls, int n, void **out, int *nsets,
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
    kern_status s = mem_create(v, stride * total, true, &g->blocks, err, errlen);
    if (s == KERN_OK)
        s = mem_create(v, sizeof(kern_err_record) * total, true, &g->recs, err, errlen);
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
        barrier_all(v, g->cbs[c]);
        for (int i = 0; s == KERN_OK && i < n; i++) {
            VkDeviceSize at = (VkDeviceSize)c * (VkDeviceSize)n + (VkDeviceSize)i;
            s = record_launch(v, g->cbs[c], g->pool, &ls[i], &g->blocks, at * stride, &g->recs,
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

static kern_status vk_graph_launch(rt_device *d, void *graph, int set, uint64_t *point, char *err,
                                   size_t errlen) {
    vk_device *v = vk_of(d);
    vk_graph *g = graph;
    if (v->lost[0]) {
        snprintf(err, errlen, "the device was lost: %s", v->lost);
        return KERN_ERR_DEVICE;
    }
    return submit(v, g->cbs[set], point, err, errlen);
}

/* Capacities that read device arrays: the arrays are copied back and the SizeExpr is
 * evaluated on the host (after the work submitted so far). */
static kern_status vk_size_adstack(rt_device *d, const void *kernel, const kern_meta_kernel *mk,
                                   int s, const rt_launch_arg *args, int64_t res[4], char *err,
                                   size_t errlen) {
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

/* ---- creation ---------------------------------------------------------------------------- */

static void vk_destroy(rt_device *d) {
    vk_device *v = vk_of(d);
    if (v->dev) {
        v->api.vkDeviceWaitIdle(v->dev);
        retire_jobs(v, UINT64_MAX);
        while (v->free_jobs) {
            vk_job *j = v->free_jobs;
            v->free_jobs = j->next;
            job_free(v, j);
        }
        while (v->slabs) {
            vk_slab *sl = v->slabs;
            v->slabs = sl->next;
            mem_destroy(v, &sl->mem);
            free(sl);
        }
        mem_destroy(v, &v->dummy);
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
};

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
    (void)type;
    vk_device *v = user;
    if (sev < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
        return VK_FALSE;
    if (atomic_fetch_add(&v->validation_messages, 1) == 0)
        snprintf(v->first_message, sizeof v->first_message, "%s",
                 data && data->pMessage ? data->pMessage : "?");
    fprintf(stderr, "kern: vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "?");
    if (v->validation_fatal) /* KERN_VULKAN_VALIDATION=fatal: the tests of CI */
        abort();
    return VK_FALSE;
}

void rt_vulkan_device_forget(rt_device *d, uint32_t capability) {
    vk_device *v = vk_of(d);
    for (size_t f = 0; f < sizeof features / sizeof *features; f++)
        if (features[f].cap == capability)
            *(bool *)((char *)v + features[f].has) = false;
}

int rt_vulkan_validation_messages(const rt_device *d, const char **first) {
    const vk_device *v = (const vk_device *)d;
    if (first)
        *first = v->first_message;
    return atomic_load(&((vk_device *)v)->validation_messages);
}

static int kind_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

static kern_status create_instance(vk_device *v, kern_validation validation, char *err,
                                   size_t errlen) {
    vk_api *a = &v->api;
    bool validate = validation != KERN_VALIDATION_OFF;
    v->validation_fatal = validation == KERN_VALIDATION_FATAL;
    const char *layer = "VK_LAYER_KHRONOS_validation";
    const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (validate) {
        uint32_t n = 0;
        a->vkEnumerateInstanceLayerProperties(&n, NULL);
        VkLayerProperties *lp = calloc(n + 1, sizeof *lp);
        bool found = false;
        if (lp && a->vkEnumerateInstanceLayerProperties(&n, lp) == VK_SUCCESS)
            for (uint32_t i = 0; i < n; i++)
                found = found || !strcmp(lp[i].layerName, layer);
        free(lp);
        if (!found) {
            snprintf(err, errlen,
                     "validation is on (KERN_VULKAN_VALIDATION) but the layer %s is not installed "
                     "(Debian: vulkan-validationlayers)",
                     layer);
            return KERN_ERR_UNSUPPORTED;
        }
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "kern",
                             .pEngineName = "kern",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = validate ? 1 : 0,
                               .ppEnabledLayerNames = &layer,
                               .enabledExtensionCount = validate ? 1 : 0,
                               .ppEnabledExtensionNames = &ext};
    VkResult r = a->vkCreateInstance(&ci, NULL, &v->inst);
    if (r != VK_SUCCESS) {
        vk_fail(r, "vkCreateInstance", err, errlen);
        return KERN_ERR_UNSUPPORTED;
    }
#define X(f)                                                        \
    if (!(a->f = (PFN_##f)a->vkGetInstanceProcAddr(v->inst, #f))) { \
        snprintf(err, errlen, "the Vulkan loader has no %s", #f);   \
        return KERN_ERR_UNSUPPORTED;                                \
    }
    VK_INSTANCE_API(X)
#undef X
    if (validate) {
        a->vkCreateDebugUtilsMessengerEXT =
            (PFN_vkCreateDebugUtilsMessengerEXT)a->vkGetInstanceProcAddr(
                v->inst, "vkCreateDebugUtilsMessengerEXT");
        a->vkDestroyDebugUtilsMessengerEXT =
            (PFN_vkDestroyDebugUtilsMessengerEXT)a->vkGetInstanceProcAddr(
                v->inst, "vkDestroyDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_message,
            .pUserData = v};
        if (a->vkCreateDebugUtilsMessengerEXT)
            a->vkCreateDebugUtilsMessengerEXT(v->inst, &mi, NULL, &v->messenger);
    }
    return KERN_OK;
}

static kern_status pick_device(vk_device *v, int ordinal, char *err, size_t errlen) {
    uint32_t n = 0;
    VkResult r = v->api.vkEnumeratePhysicalDevices(v->inst, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        snprintf(err, errlen, "no Vulkan device (vkEnumeratePhysicalDevices found %u)", n);
        return KERN_ERR_UNSUPPORTED;
    }
    VkPhysicalDevice *pd = calloc(n, sizeof *pd);
    if (!pd) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    v->api.vkEnumeratePhysicalDevices(v->inst, &n, pd);
    int best = -1, best_rank = 99;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        v->api.vkGetPhysicalDeviceProperties(pd[i], &p);
        if (p.apiVersion < VK_API_VERSION_1_2)
            continue;
        if (ordinal >= 0 ? (int)i == ordinal : kind_rank(p.deviceType) < best_rank) {
            best = (int)i;
            best_rank = kind_rank(p.deviceType);
        }
    }
    if (best < 0) {
        free(pd);
        if (ordinal >= 0)
            snprintf(err, errlen,
                     "device %d: there are %u devices (0 to %u), or it is "
                     "older than Vulkan 1.2",
                     ordinal, n, n - 1);
        else
            snprintf(err, errlen, "no Vulkan 1.2 device among the %u found", n);
        return KERN_ERR_UNSUPPORTED;
    }
    v->phys = pd[best];
    free(pd);
    v->api.vkGetPhysicalDeviceProperties(v->phys, &v->props);
    v->api.vkGetPhysicalDeviceMemoryProperties(v->phys, &v->memprops);
    return KERN_OK;
}

static kern_status create_device(vk_device *v, char *err, size_t errlen) {
    vk_api *a = &v->api;
    uint32_t nq = 0;
    a->vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &nq, NULL);
    VkQueueFamilyProperties *qp = calloc(nq + 1, sizeof *qp);
    if (!qp) {
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    a->vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &nq, qp);
    int fam = -1;
    for (uint32_t i = 0; i < nq && fam < 0; i++)
        if (qp[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            fam = (int)i;
    free(qp);
    if (fam < 0) {
        snprintf(err, errlen, "device %s has no compute queue", v->props.deviceName);
        return KERN_ERR_UNSUPPORTED;
    }
    v->qfamily = (uint32_t)fam;
    /* the optional features: what the device has */
    bool has_float_ext = false;
    uint32_t ne = 0;
    a->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, NULL);
    VkExtensionProperties *ep = calloc(ne + 1, sizeof *ep);
    if (ep && a->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, ep) == VK_SUCCESS)
        for (uint32_t i = 0; i < ne; i++)
            has_float_ext = has_float_ext ||
                            !strcmp(ep[i].extensionName, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
    free(ep);
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT af = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = has_float_ext ? &af : NULL};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &f12};
    a->vkGetPhysicalDeviceFeatures2(v->phys, &f2);
    if (!f12.timelineSemaphore) {
        snprintf(err, errlen, "device %s has no timeline semaphores", v->props.deviceName);
        return KERN_ERR_UNSUPPORTED;
    }
    v->has_f64 = f2.features.shaderFloat64;
    v->has_i64 = f2.features.shaderInt64;
    v->has_i8 = f12.shaderInt8;
    v->has_8bit = f12.storageBuffer8BitAccess;
    v->has_i64atomics = f12.shaderBufferInt64Atomics;
    v->has_f32add = has_float_ext && af.shaderBufferFloat32AtomicAdd;
    v->has_shared_f32add = has_float_ext && af.shaderSharedFloat32AtomicAdd;
    VkPhysicalDeviceVulkan12Properties p12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &p12};
    VkPhysicalDeviceSubgroupProperties sgp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &sgp};
    a->vkGetPhysicalDeviceProperties2(v->phys, &p2);
    v->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : (VkDeviceSize)1 << 30;
    snprintf(v->driver, sizeof v->driver, "%.*s", (int)sizeof p12.driverInfo, p12.driverInfo);
    bool sg_compute = (sgp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    v->has_sg_basic = sg_compute && (sgp.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
    v->has_sg_vote = sg_compute && (sgp.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);
    v->has_sg_arith = sg_compute && (sgp.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    /* enable exactly those */
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT eaf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
        .shaderBufferFloat32AtomicAdd = v->has_f32add,
        .shaderSharedFloat32AtomicAdd = v->has_shared_f32add};
    VkPhysicalDeviceVulkan12Features e12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = v->has_f32add ? &eaf : NULL,
        .shaderInt8 = v->has_i8,
        .storageBuffer8BitAccess = v->has_8bit,
        .shaderBufferInt64Atomics = v->has_i64atomics,
        .timelineSemaphore = VK_TRUE};
    VkPhysicalDeviceFeatures2 e2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &e12};
    e2.features.shaderFloat64 = v->has_f64;
    e2.features.shaderInt64 = v->has_i64;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = v->qfamily,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    const char *exts[1] = {VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &e2,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qi,
                              .enabledExtensionCount =
                                  v->has_f32add || v->has_shared_f32add ? 1 : 0,
                              .ppEnabledExtensionNames = exts};
    VkResult r = a->vkCreateDevice(v->phys, &dci, NULL, &v->dev);
    if (r != VK_SUCCESS) {
        vk_fail(r, "vkCreateDevice", err, errlen);
        return KERN_ERR_UNSUPPORTED;
    }
#define X(f)                                                      \
    if (!(a->f = (PFN_##f)a->vkGetDeviceProcAddr(v->dev, #f))) {  \
        snprintf(err, errlen, "the Vulkan driver has no %s", #f); \
        return KERN_ERR_UNSUPPORTED;                              \
    }
    VK_DEVICE_API(X)
#undef X
    a->vkGetDeviceQueue(v->dev, v->qfamily, 0, &v->queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = v->qfamily};
    if ((r = a->vkCreateCommandPool(v->dev, &pci, NULL, &v->cmdpool)) != VK_SUCCESS)
        return vk_fail(r, "vkCreateCommandPool", err, errlen);
    VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                     .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
    if ((r = a->vkCreateSemaphore(v->dev, &sci, NULL, &v->timeline)) != VK_SUCCESS)
        return vk_fail(r, "vkCreateSemaphore", err, errlen);
    VkPipelineCacheCreateInfo cci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    if ((r = a->vkCreatePipelineCache(v->dev, &cci, NULL, &v->cache)) != VK_SUCCESS)
        return vk_fail(r, "vkCreatePipelineCache", err, errlen);
    return mem_create(v, 256, false, &v->dummy, err, errlen);
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
    const char *lib = loader ? loader : "libvulkan.so.1";
    v->api.lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!v->api.lib) {
        const char *why = dlerror();
        snprintf(err, errlen, "Vulkan loader not found: dlopen(%s): %s", lib, why ? why : "?");
        free(v);
        return KERN_ERR_UNSUPPORTED;
    }
    v->api.vkGetInstanceProcAddr =
        (PFN_vkGetInstanceProcAddr)(uintptr_t)dlsym(v->api.lib, "vkGetInstanceProcAddr");
    kern_status s = KERN_OK;
    if (!v->api.vkGetInstanceProcAddr) {
        snprintf(err, errlen, "%s has no vkGetInstanceProcAddr", lib);
        s = KERN_ERR_UNSUPPORTED;
    } else {
        v->api.vkCreateInstance =
            (PFN_vkCreateInstance)v->api.vkGetInstanceProcAddr(NULL, "vkCreateInstance");
        v->api.vkEnumerateInstanceLayerProperties =
            (PFN_vkEnumerateInstanceLayerProperties)v->api.vkGetInstanceProcAddr(
                NULL, "vkEnumerateInstanceLayerProperties");
        if (!v->api.vkCreateInstance || !v->api.vkEnumerateInstanceLayerProperties) {
            snprintf(err, errlen, "%s has no vkCreateInstance", lib);
            s = KERN_ERR_UNSUPPORTED;
        }
    }
    if (s == KERN_OK)
        s = create_instance(v, p->validation, err, errlen);
    if (s == KERN_OK)
        s = pick_device(v, p->ordinal, err, errlen);
    if (s == KERN_OK)
        s = create_device(v, err, errlen);
    if (s != KERN_OK) {
        vk_destroy(&v->base);
        return s;
    }
    /* resident threads: a GPU keeps a few hundred thousand in flight; a CPU device a few
     * groups per core */
    v->resident_groups = v->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 64 : 2048;
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
