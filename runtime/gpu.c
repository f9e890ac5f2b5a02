/* gpu.c - the host side of the GPU kernel ABI: parameters, grids, module files and the
 * dispatch of the code checks (see gpu.h). No driver calls here. */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/modfile.h"
#include "../common/sizeexpr.h"

void rt_gpu_params_free(rt_gpu_params *p) {
    free(p->buf);
    free(p->ptrs);
    free(p->offsets);
    free(p->sizes);
    memset(p, 0, sizeof *p);
}

/* Appends n bytes of v at the next offset aligned to n. */
static void put(rt_gpu_params *p, const void *v, size_t n) {
    size_t off = (p->len + n - 1) / n * n;
    memcpy(p->buf + off, v, n);
    p->offsets[p->n] = off;
    p->sizes[p->n] = n;
    p->n++;
    p->len = off + n;
}

static void put_i64(rt_gpu_params *p, int64_t v) { put(p, &v, 8); }
static void put_u64(rt_gpu_params *p, uint64_t v) { put(p, &v, 8); }

kern_status rt_gpu_pack_params(const kern_meta_kernel *mk, const rt_launch_arg *args,
                               uint64_t err_addr, uint64_t heap_addr, int64_t slots,
                               const int64_t *ad_layout, rt_gpu_params *out, char *err,
                               size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t maxn = (size_t)rt_gpu_param_count(mk); /* 8 bytes each at most */
    out->buf = calloc(maxn, 8);
    out->ptrs = calloc(maxn, sizeof *out->ptrs);
    out->offsets = calloc(maxn, sizeof *out->offsets);
    out->sizes = calloc(maxn, sizeof *out->sizes);
    if (!out->buf || !out->ptrs || !out->offsets || !out->sizes) {
        snprintf(err, errlen, "out of host memory for the parameters of kernel '%s'", mk->name);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < mk->nparams; i++) {
        const kern_type *t = mk->params[i].type;
        const rt_launch_arg *a = &args[i];
        if (t->kind == TY_ARRAY) {
            put_u64(out, (uint64_t)(uintptr_t)a->mem);
            for (int d = 0; d < t->rank; d++)
                put_i64(out, a->shape[d]);
            continue;
        }
        switch (t->kind) {
        case TY_BOOL: put(out, &a->scalar.b, 1); break;
        case TY_I32: put(out, &a->scalar.i32, 4); break;
        case TY_U32: put(out, &a->scalar.u32, 4); break;
        case TY_I64: put(out, &a->scalar.i64, 8); break;
        case TY_F32: put(out, &a->scalar.f32, 4); break;
        case TY_F64: put(out, &a->scalar.f64, 8); break;
        case TY_I8:
        case TY_U8: put(out, &a->scalar.u8, 1); break;
        case TY_I16:
        case TY_U16: put(out, &a->scalar.u16, 2); break;
        case TY_U64: put(out, &a->scalar.u64, 8); break;
        default:
            snprintf(err, errlen, "kernel '%s', parameter '%s': no GPU parameter for type %s",
                     mk->name, mk->params[i].name, t->name);
            return KERN_ERR_INTERNAL;
        }
    }
    put_u64(out, err_addr);
    put_u64(out, heap_addr);
    put_i64(out, slots);
    for (int s = 0; s < mk->nadstacks; s++) {
        put_i64(out, ad_layout[2 * s]);
        put_i64(out, ad_layout[2 * s + 1]);
    }
    for (int i = 0; i < out->n; i++)
        out->ptrs[i] = out->buf + out->offsets[i];
    return KERN_OK;
}

int rt_gpu_param_count(const kern_meta_kernel *mk) {
    int n = 3 + 2 * mk->nadstacks; /* err, heap, slots; per adstack offset and capacity */
    for (int i = 0; i < mk->nparams; i++)
        n += mk->params[i].type->kind == TY_ARRAY ? 1 + mk->params[i].type->rank : 1;
    return n;
}

bool rt_gpu_needs_sizer(const kern_meta_kernel *mk, int s) {
    return mk->adstacks[s].expr && sz_reads_memory(mk->adstacks[s].expr);
}

void rt_gpu_grid(bool parallel, bool spread, int64_t count, int64_t resident_blocks, int64_t slots,
                 unsigned *blocks, unsigned *threads) {
    if (!parallel) {
        *blocks = 1;
        *threads = 1;
        return;
    }
    int64_t b = resident_blocks < 1 ? 1 : resident_blocks, t = RT_GPU_BLOCK;
    if (count == 0) {
        *blocks = 0;
        *threads = (unsigned)t;
        return;
    }
    if (count > 0 && ((count + t - 1) / t < b || (spread && slots <= 0)))
        b = (count + t - 1) / t;
    if (slots > 0) { /* one slot per thread: never more threads than slots */
        if (slots < t)
            t = slots;
        if (b > slots / t)
            b = slots / t;
    }
    if (b > INT32_MAX) /* gridDim.x is below 2^31 */
        b = INT32_MAX;
    *blocks = (unsigned)b;
    *threads = (unsigned)t;
}

/* ---- module files ------------------------------------------------------------------ */

static const char magic[] = "kern-module ";

bool rt_modfile_is(const void *data, size_t len) {
    return len >= sizeof magic - 1 && memcmp(data, magic, sizeof magic - 1) == 0;
}

/* Reads "WORD LEN\n" at *pos, then LEN bytes and a '\n'. */
static bool section(const char *d, size_t len, size_t *pos, const char *word, const char **body,
                    size_t *blen, char *err, size_t errlen) {
    size_t wl = strlen(word), p = *pos;
    if (len - p < wl + 1 || memcmp(d + p, word, wl) != 0 || d[p + wl] != ' ') {
        snprintf(err, errlen, "expected '%s LEN' at byte %zu", word, p);
        return false;
    }
    p += wl + 1;
    uint64_t n = 0;
    size_t digits = 0;
    while (p < len && d[p] >= '0' && d[p] <= '9') {
        if (digits == 19) {
            snprintf(err, errlen, "the %s length at byte %zu is too long", word, p);
            return false;
        }
        n = n * 10 + (uint64_t)(d[p] - '0');
        p++;
        digits++;
    }
    if (digits == 0 || p >= len || d[p] != '\n') {
        snprintf(err, errlen, "the %s length at byte %zu is not a decimal number and a newline",
                 word, *pos + wl + 1);
        return false;
    }
    p++;
    if (n > len - p || len - p - n < 1) {
        snprintf(err, errlen,
                 "the %s section says %llu bytes and a newline, but the file has %zu bytes left",
                 word, (unsigned long long)n, len - p);
        return false;
    }
    if (d[p + n] != '\n') {
        snprintf(err, errlen, "the %s section of %llu bytes is not followed by a newline", word,
                 (unsigned long long)n);
        return false;
    }
    *body = d + p;
    *blen = (size_t)n;
    *pos = p + n + 1;
    return true;
}

/* The trailing "sum HEX\n" of a file of len bytes (len >= KERN_MODFILE_SUM_LEN): whether it
 * is there, and whether it matches the bytes before it. */
static bool checksum(const char *d, size_t len, char *err, size_t errlen) {
    const char *t = d + len - KERN_MODFILE_SUM_LEN;
    uint64_t want = 0;
    bool ok = memcmp(t, "sum ", 4) == 0 && t[KERN_MODFILE_SUM_LEN - 1] == '\n';
    for (int i = 4; ok && i < KERN_MODFILE_SUM_LEN - 1; i++) {
        char c = t[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        ok = v >= 0;
        want = want << 4 | (uint64_t)(v & 15);
    }
    if (!ok) {
        snprintf(err, errlen,
                 "the file does not end with its checksum line 'sum HEX' (truncated, or "
                 "damaged)");
        return false;
    }
    uint64_t got = kern_modfile_sum(d, len - KERN_MODFILE_SUM_LEN);
    if (got != want) {
        snprintf(err, errlen,
                 "checksum mismatch: the file says %016llx, its bytes hash to %016llx (the "
                 "file is damaged; rebuild it with kernc build)",
                 (unsigned long long)want, (unsigned long long)got);
        return false;
    }
    return true;
}

bool rt_modfile_parse(const void *data, size_t len, rt_modfile *out, char *err, size_t errlen) {
    const char *d = data;
    memset(out, 0, sizeof *out);
    if (!rt_modfile_is(data, len)) {
        snprintf(err, errlen, "not a kern module file (it does not start with 'kern-module ')");
        return false;
    }
    const char *nl = memchr(d, '\n', len);
    if (!nl) {
        snprintf(err, errlen, "the first line does not end");
        return false;
    }
    const char *ver = d + sizeof magic - 1;
    const char *sp = memchr(ver, ' ', (size_t)(nl - ver));
    if (!sp) {
        snprintf(err, errlen, "the first line is not 'kern-module VERSION TARGET'");
        return false;
    }
    if (sp - ver == 1 && *ver == '1') {
        snprintf(err, errlen,
                 "module file version 1 has no checksum; rebuild the module with this kernc "
                 "(kernc build), which writes version %d",
                 KERN_MODFILE_VERSION);
        return false;
    }
    if (sp - ver != 1 || *ver != '0' + KERN_MODFILE_VERSION) {
        snprintf(err, errlen, "unsupported module file version '%.*s' (this runtime reads %d)",
                 (int)(sp - ver < 32 ? sp - ver : 32), ver, KERN_MODFILE_VERSION);
        return false;
    }
    const char *tg = sp + 1;
    size_t tl = (size_t)(nl - tg);
    if (tl == 0 || tl >= sizeof out->target) {
        snprintf(err, errlen, "bad target '%.*s'", (int)(tl < 32 ? tl : 32), tg);
        return false;
    }
    for (size_t i = 0; i < tl; i++) {
        if (!((tg[i] >= 'a' && tg[i] <= 'z') || (tg[i] >= '0' && tg[i] <= '9'))) {
            snprintf(err, errlen, "bad target '%.*s'", (int)(tl < 32 ? tl : 32), tg);
            return false;
        }
    }
    memcpy(out->target, tg, tl);
    out->target[tl] = '\0';
    size_t pos = (size_t)(nl - d) + 1;
    if (len - pos < KERN_MODFILE_SUM_LEN) {
        snprintf(err, errlen, "the file ends after its first line (truncated)");
        return false;
    }
    if (!checksum(d, len, err, errlen))
        return false;
    size_t end = len - KERN_MODFILE_SUM_LEN; /* the sections end where the sum begins */
    const char *code;
    if (!section(d, end, &pos, "meta", &out->meta, &out->meta_len, err, errlen) ||
        !section(d, end, &pos, "code", &code, &out->code_len, err, errlen))
        return false;
    out->code = code;
    if (pos != end) {
        snprintf(err, errlen, "%zu bytes between the code section and the checksum", end - pos);
        return false;
    }
    return true;
}

/* ---- code checks ------------------------------------------------------------------- */

bool rt_code_check(const kern_meta *meta, const kern_code_image *img, char *err, size_t errlen) {
    switch (img->kind) {
    case KERN_CODE_SPIRV: return rt_spirv_check(img->bytes, img->len, meta, err, errlen);
    case KERN_CODE_PTX: return rt_ptx_check(img->bytes, img->len, meta, err, errlen);
    case KERN_CODE_HSACO: return rt_hsaco_check(img->bytes, img->len, meta, err, errlen);
    default: return true;
    }
}
