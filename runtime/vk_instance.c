/* vk_instance.c - the Vulkan device's setup (vulkan.c): the loader opened with dlopen and
 * the table of entry points (vk_api, vk_internal.h), the instance with the validation layer
 * and its messenger, the choice of physical device, and the logical device with its
 * optional features, compute queue, command pool, timeline semaphore and pipeline cache.
 *
 * - Device: the first physical device of the most capable kind (discrete, integrated,
 *   virtual, CPU), or number kern_context_options.device ($KERN_VULKAN_DEVICE); one
 *   compute queue. The optional features of docs/spirv-abi.md are enabled when the device
 *   has them; a module that needs one it lacks is refused with its name (vk_load_code in
 *   vk_code.c scans OpCapability).
 * - Validation: kern_context_options.validation ($KERN_VULKAN_VALIDATION=1) enables
 *   VK_LAYER_KHRONOS_validation and counts every message it prints
 *   (rt_vulkan_validation_messages); =fatal also aborts the process on the first one (CI: a
 *   test that provokes a message crashes and fails). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

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
        if (ordinal >= (int)n) { /* a wrong number, not a missing device */
            snprintf(err, errlen, "there is no device %d: the loader sees %u (0 to %u)", ordinal, n,
                     n - 1);
            return KERN_ERR_ARGUMENT;
        }
        if (ordinal >= 0)
            snprintf(err, errlen, "device %d is older than Vulkan 1.2", ordinal);
        else
            snprintf(err, errlen, "no Vulkan 1.2 device among the %u found", n);
        return KERN_ERR_UNSUPPORTED;
    }
    v->phys = pd[best];
    v->base.ordinal = best;
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
    bool has_float_ext = false, has_exec = false;
    const char *stats_env = getenv("KERN_VULKAN_STATS");
    bool want_stats = stats_env && *stats_env && strcmp(stats_env, "0") != 0;
    uint32_t ne = 0;
    a->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, NULL);
    VkExtensionProperties *ep = calloc(ne + 1, sizeof *ep);
    if (ep && a->vkEnumerateDeviceExtensionProperties(v->phys, NULL, &ne, ep) == VK_SUCCESS)
        for (uint32_t i = 0; i < ne; i++) {
            has_float_ext = has_float_ext ||
                            !strcmp(ep[i].extensionName, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
            has_exec = has_exec || !strcmp(ep[i].extensionName,
                                           VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
        }
    has_exec = has_exec && want_stats;
    if (want_stats && !has_exec)
        fprintf(stderr, "kern: KERN_VULKAN_STATS: device %s has no %s\n", v->props.deviceName,
                VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    free(ep);
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT af = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = has_float_ext ? &af : NULL};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f11};
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
    v->has_i16 = f2.features.shaderInt16;
    v->has_16bit = f11.storageBuffer16BitAccess;
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
    v->keeps_nan32 = p12.shaderSignedZeroInfNanPreserveFloat32;
    v->keeps_nan64 = p12.shaderSignedZeroInfNanPreserveFloat64;
    v->keeps_denorm32 = p12.shaderDenormPreserveFloat32;
    v->keeps_denorm64 = p12.shaderDenormPreserveFloat64;
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
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR eexec = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE};
    if (v->has_f32add)
        eaf.pNext = has_exec ? &eexec : NULL;
    VkPhysicalDeviceVulkan11Features e11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = v->has_f32add ? (void *)&eaf
                 : has_exec    ? (void *)&eexec
                               : NULL,
        .storageBuffer16BitAccess = v->has_16bit};
    VkPhysicalDeviceVulkan12Features e12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = &e11,
        .shaderInt8 = v->has_i8,
        .storageBuffer8BitAccess = v->has_8bit,
        .shaderBufferInt64Atomics = v->has_i64atomics,
        .timelineSemaphore = VK_TRUE};
    VkPhysicalDeviceFeatures2 e2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &e12};
    e2.features.shaderFloat64 = v->has_f64;
    e2.features.shaderInt64 = v->has_i64;
    e2.features.shaderInt16 = v->has_i16;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = v->qfamily,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    const char *exts[2];
    uint32_t next = 0;
    if (v->has_f32add || v->has_shared_f32add)
        exts[next++] = VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME;
    if (has_exec)
        exts[next++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &e2,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qi,
                              .enabledExtensionCount = next,
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
    if (has_exec) {
        v->get_exec_props = (PFN_vkGetPipelineExecutablePropertiesKHR)a->vkGetDeviceProcAddr(
            v->dev, "vkGetPipelineExecutablePropertiesKHR");
        v->get_exec_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)a->vkGetDeviceProcAddr(
            v->dev, "vkGetPipelineExecutableStatisticsKHR");
        if (!v->get_exec_props || !v->get_exec_stats)
            v->get_exec_props = NULL, v->get_exec_stats = NULL;
    }
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
    return vk_mem_create(v, 256, false, &v->dummy, err, errlen);
}

kern_status vk_open(vk_device *v, const char *loader, const rt_vulkan_params *p, char *err,
                    size_t errlen) {
    const char *lib = loader ? loader : "libvulkan.so.1";
    v->api.lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!v->api.lib) {
        const char *why = dlerror();
        snprintf(err, errlen, "Vulkan loader not found: dlopen(%s): %s", lib, why ? why : "?");
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
    return s;
}
