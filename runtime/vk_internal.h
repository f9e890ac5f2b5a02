/* vk_internal.h - what the files of the Vulkan device share (vulkan.c lists them): the
 * device struct, the table of Vulkan entry points it calls through, and the helpers one
 * file defines for another. Nothing here leaves libkern (-fvisibility=hidden); the shared
 * helpers are named vk_. */
#ifndef KERN_RT_VK_INTERNAL_H
#define KERN_RT_VK_INTERNAL_H

/* the entry points come from the loader (vk_instance.c): the headers give only the types */
#define VK_NO_PROTOTYPES
#include <stdatomic.h>
#include <vulkan/vulkan.h>

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

typedef struct vk_job vk_job;   /* a launch's or a transfer's submission (vk_launch.c) */
typedef struct vk_slab vk_slab; /* host-visible memory for jobs' launch blocks (vk_launch.c) */

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
    vk_mem scratch; /* the replicas' scratch buffer (common/spvblock.h), zero between tasks */
    bool has_f64, has_i64, has_i8, has_8bit, has_i64atomics, has_f32add;
    bool has_i16, has_16bit;                      /* shaderInt16, storageBuffer16BitAccess */
    bool has_sg_basic, has_sg_vote, has_sg_arith; /* subgroup operations in compute shaders */
    bool has_shared_f32add; /* float atomic add on workgroup memory (block copies) */
    /* $KERN_VULKAN_STATS=1 and the device has VK_KHR_pipeline_executable_properties: each
     * pipeline's statistics (the driver's registers, instructions, ...) on stderr */
    PFN_vkGetPipelineExecutablePropertiesKHR get_exec_props;
    PFN_vkGetPipelineExecutableStatisticsKHR get_exec_stats;
    /* the float controls (shaderSignedZeroInfNanPreserveFloat32, ...): a module's modes
     * that the device lacks are dropped at load (vk_code.c) */
    bool keeps_nan32, keeps_nan64, keeps_denorm32, keeps_denorm64;
    bool force_staging;     /* options' staging: never map device-local memory */
    VkDeviceSize max_alloc; /* maxMemoryAllocationSize */
    int64_t resident_groups;
    vk_job *inflight, *inflight_tail, *free_jobs;
    uint64_t passed; /* the highest completion point seen passed */
    long spin_us;    /* how long a wait polls before it blocks (vk_launch.c) */
    atomic_int validation_messages;
    bool validation_fatal;
    char first_message[512];
    char driver[VK_MAX_DRIVER_INFO_SIZE + 1]; /* driverInfo: "Mesa 22.3.6 (LLVM 15.0.6)" */
    char lost[256];
    /* adstack sizings (vk_adstack.c): by sizer shaders, and by copying arrays back (with
     * the bytes copied) */
    int64_t shader_sizings, copied_sizings, copied_bytes;
    vk_mem sizer_res; /* the sizers' result buffer (host-visible; grown as needed) */
} vk_device;

typedef struct vk_kernel {
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    int ntasks;
    VkPipeline *pipes;
    VkPipeline *sizers; /* per adstack: its sizer entry point's, or VK_NULL_HANDLE */
    VkPipeline *sums;   /* per task: its replica sum entry point's, or VK_NULL_HANDLE */
    int nsizers;
    uint32_t nbindings; /* 5 + the array parameters (+ 1: the scratch buffer) */
    size_t block_size;
    size_t *off; /* kern_spv_block_layout */
} vk_kernel;

/* An optional feature of docs/spirv-abi.md: the SPIR-V capability that needs it and the
 * vk_device flag that says the device has it (vk_code.c refuses modules by this table;
 * rt_vulkan_device_forget clears the flags). */
typedef struct vk_feature {
    uint32_t cap; /* SPIR-V capability number */
    const char *what;
    size_t has; /* offset of the vk_device flag */
} vk_feature;
extern const vk_feature vk_features[];
extern const size_t vk_nfeatures;

static inline vk_device *vk_of(rt_device *d) { return (vk_device *)d; }

/* vulkan.c */
const char *vk_result_name(VkResult r);
/* Writes "what failed: VK_..." to err; KERN_ERR_OUT_OF_MEMORY or KERN_ERR_DEVICE. */
kern_status vk_fail(VkResult r, const char *what, char *err, size_t errlen);

/* vk_instance.c: opens the loader (NULL: libvulkan.so.1) and creates v's instance and
 * logical device; on failure vk_destroy frees what it made. */
kern_status vk_open(vk_device *v, const char *loader, const rt_vulkan_params *p, char *err,
                    size_t errlen);

/* vk_memory.c */
kern_status vk_mem_create(vk_device *v, VkDeviceSize bytes, bool host, vk_mem *m, char *err,
                          size_t errlen);
void vk_mem_destroy(vk_device *v, vk_mem *m);
kern_status vk_alloc(rt_device *d, size_t bytes, void **out, char *err, size_t errlen);
void vk_free(rt_device *d, void *mem);
kern_status vk_copy_in(rt_device *d, void *mem, size_t offset, const void *src, size_t n, char *err,
                       size_t errlen);
kern_status vk_copy_out(rt_device *d, void *dst, const void *mem, size_t offset, size_t n,
                        char *err, size_t errlen);
kern_status vk_zero(rt_device *d, void *mem, size_t offset, size_t n, char *err, size_t errlen);

/* vk_launch.c */
uint64_t vk_poll(rt_device *d);
kern_status vk_wait(rt_device *d, uint64_t point, char *err, size_t errlen);
kern_status vk_sync(rt_device *d, char *err, size_t errlen);
kern_status vk_submit(vk_device *v, VkCommandBuffer cb, uint64_t *point, char *err, size_t errlen);
void vk_barrier_all(vk_device *v, VkCommandBuffer cb);
/* Records a transfer into cb for vk_run_transfer. */
typedef void (*vk_record_fn)(vk_device *v, VkCommandBuffer cb, void *user);
kern_status vk_run_transfer(vk_device *v, vk_record_fn rec, void *user, char *err, size_t errlen);
kern_status vk_record_launch(vk_device *v, VkCommandBuffer cb, VkDescriptorPool pool,
                             const rt_launch *l, const vk_mem *blk, VkDeviceSize blkoff,
                             const vk_mem *errm, VkDeviceSize erroff, char *err, size_t errlen);
kern_status vk_launch(rt_device *d, const rt_launch *l, uint64_t *point, char *err, size_t errlen);
/* Runs pipeline sizer (a sizer entry point of l's kernel) on `groups` groups with l's
 * launch block and bindings, and waits for it. */
kern_status vk_launch_sizer(vk_device *v, const rt_launch *l, VkPipeline sizer, uint32_t groups,
                            char *err, size_t errlen);
/* At destruction, with the device idle: frees every job and slab. */
void vk_jobs_free(vk_device *v);

/* vk_code.c */
kern_status vk_load_code(rt_device *d, const kern_code_image *img, void **out, char *err,
                         size_t errlen);
void vk_unload_code(rt_device *d, void *code);
kern_status vk_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk, void **out,
                          char *err, size_t errlen);
void vk_free_kernel(rt_device *d, void *handle);

/* vk_graph.c */
kern_status vk_graph_build(rt_device *d, const rt_launch *ls, int n, void **out, int *nsets,
                           kern_err_record **recs, char *err, size_t errlen);
kern_status vk_graph_launch(rt_device *d, void *graph, int set, uint64_t *point, char *err,
                            size_t errlen);
void vk_graph_free(rt_device *d, void *graph);

/* vk_adstack.c */
int64_t vk_ad_slots(rt_device *d, int64_t max_items);
int64_t vk_mem_free(rt_device *d);
kern_status vk_copy(rt_device *d, void *dst, size_t doff, const void *src, size_t soff, size_t n,
                    char *err, size_t errlen);
kern_status vk_size_adstack(rt_device *d, const void *kernel, const kern_meta_kernel *mk, int s,
                            const rt_launch_arg *args, int64_t res[4], char *err, size_t errlen);

#endif
