/* fake_device.c - a fake asynchronous device for tests (see fake_device.h). */
#include "fake_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fake_destroy(rt_device *d) { (void)d; /* the test frees it (fake_device_free) */ }

static kern_status fake_alloc(rt_device *d, size_t bytes, void **mem, char *err, size_t errlen) {
    fake_device *f = (fake_device *)d;
    if (f->fail_alloc_over && bytes > f->fail_alloc_over) {
        f->failed_allocs++;
        snprintf(err, errlen, "fake: no room for %zu bytes", bytes);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    /* a size header in front, so frees can keep live_bytes */
    size_t *p = calloc(1, sizeof(size_t) * 8 + (bytes ? bytes : 1));
    if (!p) {
        snprintf(err, errlen, "fake: out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    p[0] = bytes;
    f->allocs++;
    f->live_bytes += (int64_t)bytes;
    *mem = p + 8;
    return KERN_OK;
}

static void fake_free(rt_device *d, void *mem) {
    fake_device *f = (fake_device *)d;
    size_t *p = (size_t *)mem - 8;
    f->frees++;
    f->live_bytes -= (int64_t)p[0];
    if (f->nfreed < FAKE_MAX_FREED)
        f->freed[f->nfreed++] = mem;
    free(p);
}

static kern_status fake_zero(rt_device *d, void *mem, size_t off, size_t n, char *err,
                             size_t errlen) {
    memset((char *)mem + off, 0, n);
    return KERN_OK;
}

static kern_status fake_copy_in(rt_device *d, void *mem, size_t off, const void *src, size_t n,
                                char *err, size_t errlen) {
    memcpy((char *)mem + off, src, n);
    return KERN_OK;
}

static kern_status fake_copy_out(rt_device *d, void *dst, const void *mem, size_t off, size_t n,
                                 char *err, size_t errlen) {
    memcpy(dst, (const char *)mem + off, n);
    return KERN_OK;
}

typedef struct fake_code {
    kern_code_kind kind;
    kern_code_provider host;
} fake_code;

static kern_status fake_load_code(rt_device *d, const kern_code_image *img, void **code, char *err,
                                  size_t errlen) {
    fake_device *f = (fake_device *)d;
    fake_code *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "fake: out of host memory");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    c->kind = img->kind;
    if (img->kind == KERN_CODE_HOST)
        c->host = img->host;
    f->code_loads++;
    *code = c;
    return KERN_OK;
}

static void fake_unload_code(rt_device *d, void *code) {
    fake_code *c = code;
    ((fake_device *)d)->code_unloads++;
    if (c->kind == KERN_CODE_HOST && c->host.release)
        c->host.release(c->host.user);
    free(c);
}

static kern_status fake_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk,
                                   void **handle, char *err, size_t errlen) {
    *handle = (void *)mk;
    return KERN_OK;
}

static void fake_free_kernel(rt_device *d, void *handle) {}

static kern_status fake_launch(rt_device *d, const rt_launch *l, uint64_t *point, char *err,
                               size_t errlen) {
    fake_device *f = (fake_device *)d;
    if (f->nlaunch == FAKE_MAX_LAUNCHES) {
        snprintf(err, errlen, "fake: too many launches");
        return KERN_ERR_INTERNAL;
    }
    fake_launch_rec *r = &f->launches[f->nlaunch++];
    kern_err_record result = r->result; /* fake_set_error may come before the launch */
    memset(r, 0, sizeof *r);
    r->result = result;
    *point = ++d->submitted;
    r->point = *point;
    r->name = l->name;
    r->err = l->err;
    memset(l->err, 0, sizeof *l->err); /* the record belongs to the device until completion */
    r->heap = l->ad_heap;
    r->slots = l->ad_slots;
    r->stride = l->ad_stride;
    r->nstacks = l->meta->nadstacks < FAKE_MAX_STACKS ? l->meta->nadstacks : FAKE_MAX_STACKS;
    if (l->ad_layout)
        memcpy(r->layout, l->ad_layout, sizeof(int64_t) * 2 * (size_t)r->nstacks);
    r->ntasks = l->ntasks < FAKE_MAX_TASKS ? l->ntasks : FAKE_MAX_TASKS;
    memcpy(r->counts, l->counts, sizeof(int64_t) * (size_t)r->ntasks);
    for (int i = 0; i < l->nargs && i < 8; i++)
        r->mem[i] = l->args[i].is_array ? l->args[i].mem : NULL;
    return KERN_OK;
}

void fake_complete(fake_device *f, uint64_t point) {
    if (point > f->base.submitted)
        point = f->base.submitted;
    if (point > f->completed)
        f->completed = point;
    for (int i = 0; i < f->nlaunch; i++) {
        fake_launch_rec *r = &f->launches[i];
        if (r->err && r->point <= f->completed) {
            *r->err = r->result;
            r->err = NULL;
        }
    }
}

static uint64_t fake_poll(rt_device *d) { return ((fake_device *)d)->completed; }

static kern_status fake_wait(rt_device *d, uint64_t point, char *err, size_t errlen) {
    fake_device *f = (fake_device *)d;
    f->waits++;
    if (f->wait_fails) {
        snprintf(err, errlen, "fake: the device was lost");
        return KERN_ERR_DEVICE;
    }
    fake_complete(f, point);
    return KERN_OK;
}

static kern_status fake_sync(rt_device *d, char *err, size_t errlen) {
    fake_device *f = (fake_device *)d;
    f->syncs++;
    if (f->wait_fails) {
        snprintf(err, errlen, "fake: the device was lost");
        return KERN_ERR_DEVICE;
    }
    fake_complete(f, d->submitted);
    return KERN_OK;
}

static int64_t fake_ad_slots(rt_device *d, int64_t max_items) {
    fake_device *f = (fake_device *)d;
    if (!d->ad_slot_major || max_items < 0)
        return f->resident;
    int64_t rounded = (max_items + f->block - 1) / f->block * f->block;
    if (rounded < 1)
        rounded = 1;
    return rounded < f->resident ? rounded : f->resident;
}

static kern_status fake_size_adstack(rt_device *d, const void *kernel, const kern_meta_kernel *mk,
                                     int s, const rt_launch_arg *args, int64_t res[4], char *err,
                                     size_t errlen) {
    fake_device *f = (fake_device *)d;
    f->sizings++;
    fake_complete(f, d->submitted); /* it runs after everything submitted */
    sz_arg sa[32];
    if (mk->nparams > 32) {
        snprintf(err, errlen, "fake: too many parameters");
        return KERN_ERR_INTERNAL;
    }
    rt_adstack_args(mk, args, true, sa);
    char msg[256];
    res[0] = INT64_MIN;
    res[1] = res[2] = res[3] = 0;
    if (!sz_eval(mk->adstacks[s].expr, sa, mk->nparams, &res[0], msg, sizeof msg))
        res[1] = strstr(msg, "out of bounds") ? 1 : strstr(msg, "division") ? 2 : 3;
    return KERN_OK;
}

/* The ops every fake has (designated initializers); the sizer's table adds size_adstack. */
#define FAKE_OPS                                                                                  \
    .name = "fake", .destroy = fake_destroy, .alloc = fake_alloc, .free = fake_free,              \
    .zero = fake_zero, .copy_in = fake_copy_in, .copy_out = fake_copy_out,                        \
    .load_code = fake_load_code, .get_kernel = fake_get_kernel, .free_kernel = fake_free_kernel,  \
    .unload_code = fake_unload_code, .launch = fake_launch, .poll = fake_poll, .wait = fake_wait, \
    .sync = fake_sync, .ad_slots = fake_ad_slots

static const rt_device_ops fake_ops = {FAKE_OPS};
static const rt_device_ops fake_sizer_ops = {FAKE_OPS, .size_adstack = fake_size_adstack};

fake_device *fake_device_new(fake_device_config cfg) {
    if (cfg.sizer && cfg.host_memory)
        return NULL; /* the host evaluates sizes on a device whose memory it reads */
    fake_device *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->base.ops = cfg.sizer ? &fake_sizer_ops : &fake_ops;
    f->base.host_memory = cfg.host_memory;
    f->base.ad_slot_major = cfg.slot_major;
    f->resident = cfg.resident > 0 ? cfg.resident : 1;
    f->block = cfg.block > 0 ? cfg.block : 256;
    f->fail_alloc_over = cfg.fail_alloc_over;
    return f;
}

void fake_device_free(fake_device *f) { free(f); }

kern_context *fake_context(fake_device *f) {
    kern_context_options o = kern_context_options_default();
    o.threads = 1;
    kern_context *ctx = NULL;
    if (kern_context_create(&o, &ctx) != KERN_OK) {
        kern_context_release(ctx);
        return NULL;
    }
    ctx->dev->ops->destroy(ctx->dev);
    ctx->dev = &f->base;
    return ctx;
}

void fake_set_error(fake_device *f, int i, kern_err_record rec) {
    if (i >= 0 && i < FAKE_MAX_LAUNCHES)
        f->launches[i].result = rec;
}

bool fake_was_freed(const fake_device *f, const void *mem) {
    for (int i = 0; i < f->nfreed; i++)
        if (f->freed[i] == mem)
            return true;
    return false;
}
