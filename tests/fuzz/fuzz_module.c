/* fuzz_module.c - libFuzzer harness for module loading (runtime/module.c), everything
 * that reads a module file before a loader, a driver or code from it runs:
 *   - rt_elf_check, the checks of a shared object before dlopen (runtime/elfcheck.c);
 *     for an image it accepts, rt_elf_in_memory must answer for any range;
 *   - rt_modfile_parse, the GPU container of `kernc build --target=cuda|vulkan|amdgpu`
 *     (common/modfile.h), on the input as it is and again with its checksum line
 *     recomputed, so that mutations reach what the checksum guards;
 *   - kern_meta_parse, the module metadata (runtime/meta.h), on the container's metadata
 *     and on the raw input;
 *   - rt_code_check, the check of the container's code against its metadata that the
 *     runtime makes before any driver sees it (runtime/gpu.h: SPIR-V validated and held to
 *     kern's layout, PTX, HSACO code objects).
 * Each must accept or refuse with a message, never crash or read outside the input. The
 * harness never dlopen()s and has no device: an image that passes the checks is still
 * code. Seeds: modules that kernc builds for cpu, cuda, vulkan and amdgpu
 * (tests/fuzz/run.sh module) and the committed corpus tests/fuzz/corpus/module/. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/modfile.h"
#include "../../common/target.h"
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

/* The metadata text; with a code image, the code checked against it. */
static void meta(const char *text, size_t len, const kern_code_image *img) {
    char err[512] = "";
    kern_meta *m = kern_meta_parse(text, len, err, sizeof err);
    if (!m) {
        no_message("kern_meta_parse", err);
        return;
    }
    if (img && !rt_code_check(m, img, err, sizeof err))
        no_message("rt_code_check", err);
    kern_meta_free(m);
}

/* A container: parsed as it is, then with its last KERN_MODFILE_SUM_LEN bytes replaced by
 * the checksum of the rest, and its code checked. */
static void container(uint8_t *copy, size_t size) {
    rt_modfile mf;
    char err[512] = "";
    if (!rt_modfile_parse(copy, size, &mf, err, sizeof err))
        no_message("rt_modfile_parse", err);
    if (size < KERN_MODFILE_SUM_LEN)
        return;
    size_t body = size - KERN_MODFILE_SUM_LEN;
    char sum[KERN_MODFILE_SUM_LEN + 1];
    snprintf(sum, sizeof sum, "sum %016llx\n", (unsigned long long)kern_modfile_sum(copy, body));
    memcpy(copy + body, sum, KERN_MODFILE_SUM_LEN);
    err[0] = '\0';
    if (!rt_modfile_parse(copy, size, &mf, err, sizeof err)) {
        no_message("rt_modfile_parse", err);
        return;
    }
    const kern_target *t = kern_target_find(mf.target);
    /* an unknown target's code is the loader's to refuse (as host code: nothing to check) */
    kern_code_image img = {.kind = t && t->code_kind >= 0 ? (kern_code_kind)t->code_kind
                                                          : KERN_CODE_HOST,
                           .bytes = mf.code,
                           .len = mf.code_len};
    meta(mf.meta, mf.meta_len, &img);
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
    if (rt_modfile_is(copy, size))
        container(copy, size);
    else
        meta((const char *)copy, size, NULL);
    free(copy);
    return 0;
}
