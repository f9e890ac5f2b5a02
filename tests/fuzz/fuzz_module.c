/* fuzz_module.c - libFuzzer harness for module loading (runtime/module.c), everything
 * that reads a module file before code from it runs:
 *   - rt_elf_check, the checks of a shared object before dlopen (runtime/elfcheck.c);
 *     for an image it accepts, rt_elf_in_memory must answer for any range;
 *   - rt_modfile_parse, the GPU container of `kernc build --target=cuda|vulkan|amdgpu`;
 *   - kern_meta_parse, the module metadata (runtime/meta.h), on the container's metadata
 *     and on the raw input.
 * Each must accept or refuse with a message, never crash or read outside the input. The
 * harness never dlopen()s: an image that passes the checks is still code. Seeds: modules
 * that kernc builds (cpu .so, .kmod, .vkmod) and metadata text (tests/fuzz/run.sh module). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/gpu.h"
#include "../../runtime/meta.h"
#include "../../runtime/rt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_message(const char *who, const char *err) {
    if (err[0] == '\0') {
        fprintf(stderr, "fuzz_module: %s refused the input without a message\n", who);
        __builtin_trap();
    }
}

static void meta(const char *text, size_t len) {
    char err[512] = "";
    kern_meta *m = kern_meta_parse(text, len, err, sizeof err);
    if (m)
        kern_meta_free(m);
    else
        no_message("kern_meta_parse", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    /* the input in a buffer of its own size, so ASan sees any read past its end */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (rt_elf_check(copy, size, err, sizeof err)) {
        uint64_t probe = size;
        if (size >= 8)
            memcpy(&probe, copy + size - 8, 8);
        (void)rt_elf_in_memory(copy, size, probe, probe >> 32);
        (void)rt_elf_in_memory(copy, size, 0, UINT64_MAX);
    } else {
        no_message("rt_elf_check", err);
    }
    if (rt_modfile_is(copy, size)) {
        rt_modfile mf;
        err[0] = '\0';
        if (rt_modfile_parse(copy, size, &mf, err, sizeof err))
            meta(mf.meta, mf.meta_len);
        else
            no_message("rt_modfile_parse", err);
    } else {
        meta((const char *)copy, size);
    }
    free(copy);
    return 0;
}
