/* spv_msl.c - Metal Shading Language from kern's SPIR-V, through SPIRV-Cross's C API
 * (Debian's libspirv-cross-c-shared; docs/metal.md). SPIRV-Cross translates one entry
 * point at a time, so the text holds one translation unit per task entry point, each
 * starting with a line `// kern: entry NAME` (docs/metal.md says how to split them).
 * Metal has no 64-bit floats: a module that uses f64 is refused, naming the reason. */
#include <spirv_cross/spirv_cross_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "spv_emit.h"

static void on_error(void *user, const char *msg) {
    char *err = user;
    if (!err[0])
        snprintf(err, 512, "%s", msg);
}

/* The entry point names of the module, in order (pointers into words). */
static int entry_names(const uint32_t *w, size_t n, const char **names, int cap) {
    int k = 0;
    for (size_t i = 5; i < n && (w[i] >> 16);) {
        if ((w[i] & 0xffff) == SpvOpEntryPoint && k < cap)
            names[k++] = (const char *)&w[i + 3];
        if ((w[i] & 0xffff) == SpvOpCapability && w[i + 1] == SpvCapabilityFloat64)
            return -1;
        i += w[i] >> 16;
    }
    return k;
}

/* [[buffer(n)]] = descriptor binding n (docs/metal.md), for every binding of the module. */
static bool bind_buffers(spvc_compiler comp, const uint32_t *w, size_t n) {
    for (size_t i = 5; i < n && (w[i] >> 16);) {
        if ((w[i] & 0xffff) == SpvOpDecorate && (w[i] >> 16) == 4 &&
            w[i + 2] == SpvDecorationBinding) {
            spvc_msl_resource_binding rb;
            spvc_msl_resource_binding_init(&rb);
            rb.stage = SpvExecutionModelGLCompute;
            rb.desc_set = 0;
            rb.binding = w[i + 3];
            rb.msl_buffer = w[i + 3];
            if (spvc_compiler_msl_add_resource_binding(comp, &rb) != SPVC_SUCCESS)
                return false;
        }
        i += w[i] >> 16;
    }
    return true;
}

char *kc_spirv_to_msl(const uint32_t *words, size_t nwords, char *err, size_t errlen) {
    enum { MAX_ENTRIES = 4096 };
    const char **names = malloc(MAX_ENTRIES * sizeof *names);
    if (!names) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int ne = entry_names(words, nwords, names, MAX_ENTRIES);
    if (ne < 0) {
        free(names);
        snprintf(err, errlen,
                 "the module uses f64, and Metal has no 64-bit floats: use f32 "
                 "for kernels meant for Metal");
        return NULL;
    }
    kern_buf out = {0};
    char msg[512] = "";
    bool ok = true;
    for (int e = 0; e < ne && ok; e++) {
        spvc_context ctx = NULL;
        ok = spvc_context_create(&ctx) == SPVC_SUCCESS;
        if (!ok)
            break;
        spvc_context_set_error_callback(ctx, on_error, msg);
        spvc_parsed_ir ir = NULL;
        spvc_compiler comp = NULL;
        spvc_compiler_options opts = NULL;
        const char *src = NULL;
        ok =
            spvc_context_parse_spirv(ctx, words, nwords, &ir) == SPVC_SUCCESS &&
            spvc_context_create_compiler(ctx, SPVC_BACKEND_MSL, ir,
                                         SPVC_CAPTURE_MODE_TAKE_OWNERSHIP, &comp) == SPVC_SUCCESS &&
            spvc_compiler_set_entry_point(comp, names[e], SpvExecutionModelGLCompute) ==
                SPVC_SUCCESS &&
            bind_buffers(comp, words, nwords) &&
            spvc_compiler_create_compiler_options(comp, &opts) == SPVC_SUCCESS &&
            spvc_compiler_options_set_uint(opts, SPVC_COMPILER_OPTION_MSL_VERSION,
                                           SPVC_MAKE_MSL_VERSION(2, 3, 0)) == SPVC_SUCCESS &&
            spvc_compiler_install_compiler_options(comp, opts) == SPVC_SUCCESS &&
            spvc_compiler_compile(comp, &src) == SPVC_SUCCESS;
        if (ok)
            buf_printf(&out, "// kern: entry %s\n%s\n", names[e], src);
        else if (!msg[0])
            snprintf(msg, sizeof msg, "%s", spvc_context_get_last_error_string(ctx));
        if (!ok)
            snprintf(err, errlen, "SPIRV-Cross (MSL) on entry point %s: %s", names[e], msg);
        spvc_context_destroy(ctx);
    }
    free(names);
    if (!ok) {
        buf_free(&out);
        return NULL;
    }
    if (!out.data)
        buf_puts(&out, "// kern: no entry points\n");
    return out.data;
}
