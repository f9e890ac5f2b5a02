/* meta_ir.c - module metadata from the IR: what the runtime needs to know about a
 * compiled module (kernels, parameters, tasks, adstacks with their SizeExprs, grad_error,
 * locations, the extents of parallel tasks) without the compiler. Each SizeExpr goes in
 * twice: as a tree copied into the metadata's arena (kern_meta.mem; a JIT module is used
 * without parsing anything) and as its text form, for module files and messages. The
 * runtime checks the trees' leaves when it makes the module (kern_meta_check_adstacks).
 * The task numbering is the backends' (runtime/abi.h): the t-th parallel or serial op of
 * the kernel body is task t. */
#include <stdlib.h>
#include <string.h>

#include "meta_ir.h"

#include "../passes/passes.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d)
        kern_oom(n);
    memcpy(d, s, n);
    return d;
}

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p)
        kern_oom(n * size);
    return p;
}

/* A graderror line runs to the end of the line: control characters become spaces. */
static char *one_line(const char *s) {
    char *d = dup_str(*s ? s : "?");
    for (char *p = d; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return d;
}

/* Whether r stores to or updates the array parameter p anywhere. */
static bool writes(const ir_region *r, const ir_value *p) {
    ir_foreach_op(op, r) {
        bool access = op->code == IR_STORE || ir_is_atomic(op->code);
        if (access && op->operands[0] == p)
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (writes(op->regions[i], p))
                return true;
    }
    return false;
}

/* The text form of e, malloc'd. */
static char *sz_text(const sz_expr *e) {
    kern_buf b = {0};
    sz_print(&b, e);
    char *t = dup_str(b.data);
    buf_free(&b);
    return t;
}

/* Whether region r adds or subtracts floats into an array with atomics: the GPUs may sum
 * such an array per block (block copies), a cost per block that a grid of one thread per
 * work item would multiply (kern_meta_task.spread). */
static bool adds_floats(const ir_region *r) {
    ir_foreach_op(op, r) {
        if ((op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) &&
            ty_is_float(op->operands[0]->type->elem))
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (adds_floats(op->regions[i]))
                return true;
    }
    return false;
}

static void fill_kernel(kern_meta *meta, kern_meta_kernel *mk, const ir_kernel *k) {
    mk->name = dup_str(k->name);
    mk->line = k->loc.line;
    mk->col = k->loc.col;
    mk->nparams = (int)k->nparams;
    mk->params = zalloc(k->nparams, sizeof *mk->params);
    for (uint32_t i = 0; i < k->nparams; i++) {
        mk->params[i].name = dup_str(k->params[i].name);
        mk->params[i].type = k->params[i].type;
        mk->params[i].nograd = k->params[i].nograd;
        if (k->params[i].view && k->params[i].ntail > 0) {
            mk->params[i].view = dup_str(k->params[i].view);
            mk->params[i].ntail = k->params[i].ntail;
            mk->params[i].tail[0] = k->params[i].tail[0];
            mk->params[i].tail[1] = k->params[i].tail[1];
        }
        mk->params[i].readonly =
            ty_is_array(k->params[i].type) && !writes(k->body, k->body->args[i]);
    }
    int ntasks = 0;
    ir_foreach_op(op, k->body) ntasks += op->code == IR_PARALLEL || op->code == IR_SERIAL;
    mk->ntasks = ntasks;
    mk->tasks = zalloc((size_t)ntasks, sizeof *mk->tasks);
    int t = 0;
    uint32_t ext = 0; /* the lowering's record of the extents (ir_kernel.extents) */
    ir_foreach_op(op, k->body) {
        if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
            continue;
        kern_meta_task *mt = &mk->tasks[t++];
        mt->parallel = op->code == IR_PARALLEL;
        mt->spread = mt->parallel && !adds_floats(op->regions[0]);
        mt->ndims = mt->parallel ? (int)(op->noperands / 2) : 0;
        mt->line = op->loc.line;
        mt->col = op->loc.col;
        /* the work items per dimension, for the GPU grid sized on the host */
        uint32_t base = ext;
        ext += (uint32_t)mt->ndims;
        for (int d = 0; d < mt->ndims && d < KERN_META_MAX_TASK_DIMS; d++) {
            /* the lowering's record (computed before min/max/div were lowered), else now */
            const sz_expr *recorded = k->extents && base + (uint32_t)d < k->nextents
                                          ? k->extents[base + (uint32_t)d]
                                          : NULL;
            mt->extent_expr[d] = !k->extents ? ad_task_extent(k, op, (uint32_t)d, &meta->mem)
                                 : recorded  ? sz_copy(&meta->mem, recorded)
                                             : NULL;
            mt->extent[d] = mt->extent_expr[d] ? sz_text(mt->extent_expr[d]) : NULL;
        }
    }
    mk->nadstacks = (int)k->nadstacks;
    mk->adstacks = k->nadstacks ? zalloc(k->nadstacks, sizeof *mk->adstacks) : NULL;
    for (uint32_t i = 0; i < k->nadstacks; i++) {
        mk->adstacks[i].type = k->adstacks[i].type;
        mk->adstacks[i].line = k->adstacks[i].loc.line;
        mk->adstacks[i].col = k->adstacks[i].loc.col;
        mk->adstacks[i].expr = sz_copy(&meta->mem, k->adstacks[i].cap);
        mk->adstacks[i].cap = sz_text(k->adstacks[i].cap);
    }
    mk->grad_error = k->grad_error ? one_line(k->grad_error) : NULL;
    kc_meta_access(meta, mk, k);
}

kern_meta *kc_meta_from_ir(const ir_module *m) {
    kern_meta *meta = zalloc(1, sizeof *meta);
    meta->source = m->source_path ? dup_str(m->source_path) : NULL;
    meta->nkernels = (int)m->nkernels;
    meta->kernels = zalloc(m->nkernels, sizeof *meta->kernels);
    int i = 0;
    ir_foreach_kernel(k, m) fill_kernel(meta, &meta->kernels[i++], k);
    return meta;
}
