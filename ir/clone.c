/* clone.c - a copy of a kernel under another name (ir_kernel_clone), and of a module
 * (ir_module_copy).
 *
 * ir_kernel_clone is used by compiler/driver.c for `kernel K(...) grad G`: K.grad is G's IR
 * under K.grad's name and parameter names; ir_module_copy by the code generators that lower
 * a module further for their target (backends/codegen.c, kc_math_lowered). Every value of the source gets a number in its scratch id
 * (program order: a use always comes after its definition), and the copy maps numbers to
 * the new values. Linear in the kernel's size. */
#include <stdlib.h>

#include "ir.h"

static void number(ir_region *r, uint32_t *n) {
    for (uint32_t i = 0; i < r->nargs; i++)
        r->args[i]->id = (*n)++;
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nresults; i++)
            op->results[i]->id = (*n)++;
        for (uint32_t i = 0; i < op->nregions; i++)
            number(op->regions[i], n);
    }
}

static void copy_region(ir_module *m, ir_value **map, const ir_region *from, ir_region *to) {
    ir_foreach_op(op, from) {
        ir_value **ops = ARENA_ARRAY(&m->mem, ir_value *, op->noperands + 1);
        const kern_type **types = ARENA_ARRAY(&m->mem, const kern_type *, op->nresults + 1);
        for (uint32_t i = 0; i < op->noperands; i++) {
            ops[i] = map[op->operands[i]->id];
            kern_assert(ops[i]);
        }
        for (uint32_t i = 0; i < op->nresults; i++)
            types[i] = op->results[i]->type;
        ir_op *c =
            ir_op_new(m, op->code, op->loc, ops, op->noperands, types, op->nresults, op->nregions);
        c->imm = op->imm;
        c->attr = op->attr;
        ir_append(to, c);
        for (uint32_t i = 0; i < op->nresults; i++) {
            map[op->results[i]->id] = c->results[i];
            c->results[i]->name = op->results[i]->name;
        }
        for (uint32_t i = 0; i < op->nregions; i++) {
            const ir_region *fr = op->regions[i];
            for (uint32_t j = 0; j < fr->nargs; j++) {
                map[fr->args[j]->id] = ir_region_add_arg(m, c->regions[i], fr->args[j]->type);
                map[fr->args[j]->id]->name = fr->args[j]->name;
            }
            copy_region(m, map, fr, c->regions[i]);
        }
    }
}

/* A copy of src in module m as a kernel called name with the given parameters. */
static ir_kernel *clone_into(ir_module *m, const ir_kernel *src, const char *name,
                             const ir_param *params, uint32_t nparams) {
    kern_assert(nparams == src->nparams);
    for (uint32_t i = 0; i < nparams; i++)
        kern_assert(params[i].type == src->params[i].type);
    uint32_t n = 0;
    number(src->body, &n);
    ir_value **map = calloc(n + 1, sizeof *map);
    if (!map)
        kern_oom((n + 1) * sizeof *map);
    ir_kernel *k = ir_kernel_new(m, name, src->loc, params, nparams);
    for (uint32_t i = 0; i < nparams; i++)
        map[src->body->args[i]->id] = k->body->args[i];
    for (uint32_t i = 0; i < src->nadstacks; i++)
        ir_kernel_add_adstack(k, src->adstacks[i].type, src->adstacks[i].cap, src->adstacks[i].loc);
    copy_region(m, map, src->body, k->body);
    free(map);
    return k;
}

ir_kernel *ir_kernel_clone(ir_kernel *src, const char *name, const ir_param *params,
                           uint32_t nparams) {
    return clone_into(src->module, src, name, params, nparams);
}

static const char *dup_or_null(ir_module *m, const char *s) {
    return s ? arena_strdup(&m->mem, s) : NULL;
}

ir_module *ir_module_copy(const ir_module *src) {
    ir_module *m = ir_module_new(src->source_path);
    m->debug = src->debug;
    m->lowered = src->lowered;
    ir_foreach_kernel(s, src) {
        ir_kernel *k = clone_into(m, s, s->name, s->params, s->nparams);
        k->grad_error = dup_or_null(m, s->grad_error);
        k->jvp_error = dup_or_null(m, s->jvp_error);
        k->grad_kernel = dup_or_null(m, s->grad_kernel);
        k->nextents = s->nextents;
        k->extents = s->nextents ? ARENA_ARRAY(&m->mem, sz_expr *, s->nextents) : NULL;
        for (uint32_t i = 0; i < s->nextents; i++)
            k->extents[i] = s->extents[i] ? sz_copy(&m->mem, s->extents[i]) : NULL;
    }
    return m;
}
