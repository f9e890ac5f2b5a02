/* vk_code.c - code on the Vulkan device (vulkan.c): SPIR-V modules, refused with the
 * feature's name when they declare a capability the device lacks (vk_features: the optional
 * features of docs/spirv-abi.md that vk_instance.c enables), and kernels: a descriptor set
 * layout and, per task, a compute pipeline of the module's entry point, and one per sizer
 * entry point the module has (backends/spirv/spv_emit_sizer.c; modules made before sizers
 * have none). A module reaches load_code validated and held to the layout get_kernel
 * creates (rt_spirv_check, gpu.h, in rt_module_create); load_code's own scan keeps the
 * driver safe from a device-level caller too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/spvblock.h"
#include "gpu.h"
#include "vk_internal.h"

typedef struct vk_code {
    VkShaderModule module;
    size_t nwords;
    uint32_t *words; /* kept for the entry-point check */
} vk_code;

const vk_feature vk_features[] = {
    {10, "64-bit floats (shaderFloat64)", offsetof(vk_device, has_f64)},
    {11, "64-bit integers (shaderInt64)", offsetof(vk_device, has_i64)},
    {39, "8-bit integers (shaderInt8)", offsetof(vk_device, has_i8)},
    {4448, "8-bit storage buffers (storageBuffer8BitAccess)", offsetof(vk_device, has_8bit)},
    {22, "16-bit integers (shaderInt16)", offsetof(vk_device, has_i16)},
    {4433, "16-bit storage buffers (storageBuffer16BitAccess)", offsetof(vk_device, has_16bit)},
    {12, "64-bit atomics (shaderBufferInt64Atomics)", offsetof(vk_device, has_i64atomics)},
    {6033, "float atomic add (shaderBufferFloat32AtomicAdd)", offsetof(vk_device, has_f32add)},
    {61, "subgroup operations in compute shaders", offsetof(vk_device, has_sg_basic)},
    {62, "subgroup vote operations", offsetof(vk_device, has_sg_vote)},
    {63, "subgroup arithmetic operations", offsetof(vk_device, has_sg_arith)},
};

const size_t vk_nfeatures = sizeof vk_features / sizeof *vk_features;

/* Drops from the n words of w (instructions checked to fit) the float-control execution
 * modes that v lacks, and their capability when it supports no width of it: kern's
 * modules ask for IEEE infinities, NaNs and subnormals (backends/spirv/spv_emit.c), which
 * a device without them gives as far as it can. Returns the new word count. */
static size_t drop_float_controls(const vk_device *v, uint32_t *w, size_t n) {
    size_t o = 5;
    for (size_t i = 5; i < n;) {
        uint32_t len = w[i] >> 16, op = w[i] & 0xffffu;
        bool drop = false;
        if (op == 16 /* OpExecutionMode */ && len == 4) {
            bool wide = w[i + 3] == 64;
            if (w[i + 2] == 4461 /* SignedZeroInfNanPreserve */)
                drop = !(wide ? v->keeps_nan64 : v->keeps_nan32);
            if (w[i + 2] == 4459 /* DenormPreserve */)
                drop = !(wide ? v->keeps_denorm64 : v->keeps_denorm32);
        }
        if (op == 17 /* OpCapability */ && len == 2) {
            if (w[i + 1] == 4466 /* SignedZeroInfNanPreserve */)
                drop = !v->keeps_nan32 && !v->keeps_nan64;
            if (w[i + 1] == 4464 /* DenormPreserve */)
                drop = !v->keeps_denorm32 && !v->keeps_denorm64;
        }
        if (!drop) {
            memmove(w + o, w + i, len * sizeof *w);
            o += len;
        }
        i += len;
    }
    return o;
}

/* Storage classes by id, as far as the scan has seen them: of each pointer type, and of
 * each variable and access chain (that of its type). */
typedef struct wg_scan {
    uint32_t bound;
    uint32_t *sc; /* storage class + 1 (0: not a pointer) */
} wg_scan;

/* Whether instruction w[i] (len words) is a float atomic add on workgroup memory (the
 * block copies of modules built before 2026-11-28; kern's emitter makes none now): only
 * those need shaderSharedFloat32AtomicAdd. Definitions come before uses in a module, so
 * one pass over it in order sees each pointer's storage class first. */
static bool adds_floats_in_workgroup(const uint32_t *w, size_t i, uint32_t len, wg_scan *s) {
    uint32_t op = w[i] & 0xffffu;
    if (op == 32 /* OpTypePointer */ && len >= 4 && w[i + 1] < s->bound)
        s->sc[w[i + 1]] = w[i + 2] + 1;
    else if ((op == 59 /* OpVariable */ || op == 65 /* OpAccessChain */ ||
              op == 66 /* OpInBoundsAccessChain */) &&
             len >= 4 && w[i + 1] < s->bound && w[i + 2] < s->bound)
        s->sc[w[i + 2]] = s->sc[w[i + 1]];
    else if (op == 6035 /* OpAtomicFAddEXT */ && len >= 4 && w[i + 3] < s->bound)
        return s->sc[w[i + 3]] == 4 /* Workgroup */ + 1;
    return false;
}

kern_status vk_load_code(rt_device *d, const kern_code_image *img, void **out, char *err,
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
    wg_scan wg = {.bound = w[3], .sc = calloc((size_t)w[3] + 1, sizeof *wg.sc)};
    if (!wg.sc) {
        free(w);
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 5; i < n;) { /* the instructions: refuse what the device lacks */
        uint32_t len = w[i] >> 16, op = w[i] & 0xffffu;
        if (len == 0 || i + len > n) {
            free(w);
            free(wg.sc);
            snprintf(err, errlen,
                     "malformed SPIR-V: an instruction at word %zu overruns the module", i);
            return KERN_ERR_FORMAT;
        }
        if (!v->has_shared_f32add && adds_floats_in_workgroup(w, i, len, &wg)) {
            free(w);
            free(wg.sc);
            snprintf(err, errlen,
                     "the module needs float atomic add on workgroup memory "
                     "(shaderSharedFloat32AtomicAdd), which %s lacks",
                     v->props.deviceName);
            return KERN_ERR_UNSUPPORTED;
        }
        if (op == 17 /* OpCapability */ && len == 2) {
            for (size_t f = 0; f < vk_nfeatures; f++)
                if (vk_features[f].cap == w[i + 1] && !*(bool *)((char *)v + vk_features[f].has)) {
                    free(w);
                    free(wg.sc);
                    snprintf(err, errlen, "the module needs %s, which %s lacks",
                             vk_features[f].what, v->props.deviceName);
                    return KERN_ERR_UNSUPPORTED;
                }
        }
        i += len;
    }
    free(wg.sc);
    n = drop_float_controls(v, w, n);
    vk_code *c = calloc(1, sizeof *c);
    if (!c) {
        free(w);
        snprintf(err, errlen, "out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    VkShaderModuleCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = n * 4, .pCode = w};
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

void vk_unload_code(rt_device *d, void *code) {
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

void vk_free_kernel(rt_device *d, void *handle) {
    vk_device *v = vk_of(d);
    vk_kernel *k = handle;
    if (!k)
        return;
    for (int t = 0; t < k->ntasks; t++)
        if (k->pipes && k->pipes[t])
            v->api.vkDestroyPipeline(v->dev, k->pipes[t], NULL);
    for (int t = 0; t < k->ntasks; t++)
        if (k->sums && k->sums[t])
            v->api.vkDestroyPipeline(v->dev, k->sums[t], NULL);
    free(k->sums);
    for (int s = 0; s < k->nsizers; s++)
        if (k->sizers[s])
            v->api.vkDestroyPipeline(v->dev, k->sizers[s], NULL);
    free(k->sizers);
    if (k->layout)
        v->api.vkDestroyPipelineLayout(v->dev, k->layout, NULL);
    if (k->dsl)
        v->api.vkDestroyDescriptorSetLayout(v->dev, k->dsl, NULL);
    free(k->pipes);
    free(k->off);
    free(k);
}

/* $KERN_VULKAN_STATS: the statistics the driver reports for pipeline p (entry point sym),
 * one line per executable on stderr. */
static void report_stats(vk_device *v, VkPipeline p, const char *sym) {
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p};
    uint32_t ne = 0;
    if (v->get_exec_props(v->dev, &pi, &ne, NULL) != VK_SUCCESS)
        return;
    for (uint32_t e = 0; e < ne; e++) {
        VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                          .pipeline = p,
                                          .executableIndex = e};
        uint32_t ns = 0;
        if (v->get_exec_stats(v->dev, &ei, &ns, NULL) != VK_SUCCESS || !ns)
            continue;
        VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof *st);
        if (!st)
            return;
        for (uint32_t i = 0; i < ns; i++)
            st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
        if (v->get_exec_stats(v->dev, &ei, &ns, st) == VK_SUCCESS) {
            fprintf(stderr, "kern: vulkan pipeline %s:", sym);
            for (uint32_t i = 0; i < ns; i++) {
                fprintf(stderr, "%s %s = ", i ? ";" : "", st[i].name);
                switch (st[i].format) {
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
                    fprintf(stderr, "%s", st[i].value.b32 ? "true" : "false");
                    break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
                    fprintf(stderr, "%lld", (long long)st[i].value.i64);
                    break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
                    fprintf(stderr, "%llu", (unsigned long long)st[i].value.u64);
                    break;
                default: fprintf(stderr, "%g", st[i].value.f64); break;
                }
            }
            fprintf(stderr, "\n");
        }
        free(st);
    }
}

/* The compute pipeline of entry point sym of c with k's layout. */
static kern_status create_pipeline(vk_device *v, const vk_code *c, const vk_kernel *k,
                                   const char *sym, VkPipeline *out, char *err, size_t errlen) {
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = v->get_exec_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = c->module,
                  .pName = sym},
        .layout = k->layout};
    VkResult r = v->api.vkCreateComputePipelines(v->dev, v->cache, 1, &ci, NULL, out);
    if (r != VK_SUCCESS)
        return vk_fail(r, "vkCreateComputePipelines", err, errlen);
    if (v->get_exec_stats)
        report_stats(v, *out, sym);
    return KERN_OK;
}

kern_status vk_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk, void **out,
                          char *err, size_t errlen) {
    vk_device *v = vk_of(d);
    vk_code *c = code;
    vk_kernel *k = calloc(1, sizeof *k);
    VkDescriptorSetLayoutBinding *b = calloc((size_t)mk->nparams + 6, sizeof *b);
    const kern_type **pt = calloc((size_t)mk->nparams + 1, sizeof *pt);
    if (k)
        k->off = calloc((size_t)mk->nparams + 1 + 2 * (size_t)mk->nadstacks, sizeof *k->off);
    if (k)
        k->pipes = calloc((size_t)mk->ntasks + 1, sizeof *k->pipes);
    if (k)
        k->sums = calloc((size_t)mk->ntasks + 1, sizeof *k->sums);
    kern_status s = KERN_OK;
    if (!k || !b || !pt || !k->off || !k->pipes || !k->sums) {
        snprintf(err, errlen, "out of host memory");
        s = KERN_ERR_OUT_OF_MEMORY;
        goto done;
    }
    uint32_t nb = 0;
    for (uint32_t i = 0; i <= KERN_SPV_BIND_PARAM0 + (uint32_t)mk->nparams; i++) {
        if (!rt_spirv_binding_in_layout(mk, i)) /* the layout the module was checked against */
            continue;
        b[nb++] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = i == KERN_SPV_BIND_BLOCK ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                                       : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    }
    k->nbindings = nb;
    /* a layout beyond the device's limit is invalid Vulkan (lavapipe allows 32): refused here,
     * naming the kernel, before any driver sees it */
    uint32_t limit = v->props.limits.maxPerStageDescriptorStorageBuffers;
    if (nb > limit) {
        snprintf(err, errlen,
                 "kernel '%s' needs %u storage buffers (one per array parameter, %u of kern's "
                 "own), more than %s allows in one shader (maxPerStageDescriptorStorageBuffers "
                 "= %u); pass fewer arrays, or use a device with a higher limit",
                 mk->name, nb, (uint32_t)KERN_SPV_BIND_PARAM0 + rt_spirv_has_scratch(mk),
                 v->props.deviceName, limit);
        s = KERN_ERR_UNSUPPORTED;
        goto done;
    }
    if (rt_spirv_has_scratch(mk) && !v->scratch.buf) {
        s = vk_mem_create(v, kern_spv_scratch_bytes(), false, &v->scratch, err, errlen);
        if (s == KERN_OK) /* zero between tasks: each task that uses it leaves it so */
            s = vk_zero(&v->base, &v->scratch, 0, kern_spv_scratch_bytes(), err, errlen);
        if (s != KERN_OK) {
            vk_mem_destroy(v, &v->scratch);
            goto done;
        }
    }
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
        if ((s = create_pipeline(v, c, k, sym, &k->pipes[t], err, errlen)) != KERN_OK)
            goto done;
        kern_meta_replica_sum_symbol(sym, sizeof sym, mk->name, t); /* where it has one */
        if (has_entry(c, sym) && (s = create_pipeline(v, c, k, sym, &k->sums[t], err, errlen)))
            goto done;
    }
    if (!(k->sizers = calloc((size_t)mk->nadstacks + 1, sizeof *k->sizers))) {
        snprintf(err, errlen, "out of host memory");
        s = KERN_ERR_OUT_OF_MEMORY;
        goto done;
    }
    k->nsizers = mk->nadstacks;
    for (int a = 0; a < mk->nadstacks; a++) { /* sizers: where the module has them */
        char sym[1024];
        kern_meta_sizer_symbol(sym, sizeof sym, mk->name, a);
        if (!sz_reads_memory(mk->adstacks[a].expr) || !has_entry(c, sym))
            continue;
        if ((s = create_pipeline(v, c, k, sym, &k->sizers[a], err, errlen)) != KERN_OK)
            goto done;
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
