/* ir.c - IR core: the opcode table, modules and kernels, op creation, region arguments,
 * list surgery, use replacement and walking (see ir.h).
 *
 * Every object lives in the module's arena; ir_module_free() releases the arena and the
 * module header, nothing else is ever freed. Detached ops (ir_op_new) get their regions'
 * kernel pointer when they are inserted into a region of a kernel. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* ---- The opcode table, generated from ops.def ------------------------------------- */

const ir_opinfo ir_opinfos[IR__COUNT] = {
#define IR_OP(e, text, nops, nres, nreg, rule, flags) {text, nops, nres, nreg, rule, flags},
#include "ops.def"
#undef IR_OP
};

ir_opcode ir_opcode_lookup(const char *name, int len) {
    if (!name || len <= 0)
        return IR__COUNT;
    for (int c = 0; c < IR__COUNT; c++) {
        const char *n = ir_opinfos[c].name;
        if ((int)strlen(n) == len && memcmp(n, name, (size_t)len) == 0)
            return (ir_opcode)c;
    }
    return IR__COUNT;
}

/* ---- Modules and kernels ---------------------------------------------------------- */

ir_module *ir_module_new(const char *source_path) {
    ir_module *m = kern_xmalloc(sizeof *m);
    memset(m, 0, sizeof *m);
    arena_init(&m->mem);
    m->source_path = source_path ? arena_strdup(&m->mem, source_path) : NULL;
    return m;
}

void ir_module_free(ir_module *m) {
    if (!m)
        return;
    arena_free(&m->mem);
    free(m);
}

static ir_region *region_new(ir_module *m, ir_op *parent, ir_kernel *k) {
    ir_region *r = ARENA_NEW(&m->mem, ir_region);
    r->parent = parent;
    r->kernel = k;
    return r;
}

ir_kernel *ir_kernel_new(ir_module *m, const char *name, kern_loc loc, const ir_param *params,
                         uint32_t nparams) {
    kern_assert(m && name);
    kern_assert(nparams == 0 || params);
    ir_kernel *k = ARENA_NEW(&m->mem, ir_kernel);
    k->module = m;
    k->name = arena_strdup(&m->mem, name);
    k->loc = loc;
    k->nparams = nparams;
    k->params = ARENA_ARRAY(&m->mem, ir_param, nparams);
    k->body = region_new(m, NULL, k);
    for (uint32_t i = 0; i < nparams; i++) {
        kern_assert(params[i].type);
        k->params[i] = params[i];
        k->params[i].name = params[i].name ? arena_strdup(&m->mem, params[i].name) : NULL;
        ir_value *v = ir_region_add_arg(m, k->body, params[i].type);
        v->name = k->params[i].name;
    }
    if (m->last_kernel)
        m->last_kernel->next = k;
    else
        m->kernels = k;
    m->last_kernel = k;
    m->nkernels++;
    return k;
}

ir_kernel *ir_kernel_find(const ir_module *m, const char *name) {
    ir_foreach_kernel(k, m) {
        if (k->name && name && strcmp(k->name, name) == 0)
            return k;
    }
    return NULL;
}

uint32_t ir_kernel_add_adstack(ir_kernel *k, const kern_type *type, const sz_expr *cap,
                               kern_loc loc) {
    kern_assert(k && type && ty_is_scalar(type) && cap);
    if (k->nadstacks == k->capadstacks) {
        uint32_t n = k->capadstacks ? k->capadstacks * 2 : 8;
        ir_adstack *a = ARENA_ARRAY(&k->module->mem, ir_adstack, n);
        for (uint32_t i = 0; i < k->nadstacks; i++)
            a[i] = k->adstacks[i];
        k->adstacks = a;
        k->capadstacks = n;
    }
    k->adstacks[k->nadstacks] =
        (ir_adstack){.type = type, .cap = sz_copy(&k->module->mem, cap), .loc = loc};
    return k->nadstacks++;
}

/* ---- Ops and values --------------------------------------------------------------- */

ir_op *ir_op_new(ir_module *m, ir_opcode code, kern_loc loc, ir_value *const *operands,
                 uint32_t noperands, const kern_type *const *result_types, uint32_t nresults,
                 uint32_t nregions) {
    kern_assert(m && (unsigned)code < IR__COUNT);
    kern_assert(noperands == 0 || operands);
    kern_assert(nresults == 0 || result_types);
    ir_op *op = ARENA_NEW(&m->mem, ir_op);
    op->code = code;
    op->loc = loc;
    op->noperands = noperands;
    op->operands = ARENA_ARRAY(&m->mem, ir_value *, noperands);
    for (uint32_t i = 0; i < noperands; i++)
        op->operands[i] = operands[i];
    op->nresults = nresults;
    op->results = ARENA_ARRAY(&m->mem, ir_value *, nresults);
    for (uint32_t i = 0; i < nresults; i++) {
        ir_value *v = ARENA_NEW(&m->mem, ir_value);
        v->type = result_types[i];
        v->def = op;
        v->index = i;
        op->results[i] = v;
    }
    op->nregions = nregions;
    op->regions = ARENA_ARRAY(&m->mem, ir_region *, nregions);
    for (uint32_t i = 0; i < nregions; i++)
        op->regions[i] = region_new(m, op, NULL);
    return op;
}

ir_value *ir_region_add_arg(ir_module *m, ir_region *r, const kern_type *type) {
    kern_assert(m && r && type);
    ir_value **args = ARENA_ARRAY(&m->mem, ir_value *, r->nargs + 1);
    if (r->nargs)
        memcpy(args, r->args, sizeof(ir_value *) * r->nargs);
    ir_value *v = ARENA_NEW(&m->mem, ir_value);
    v->type = type;
    v->region = r;
    v->index = r->nargs;
    args[r->nargs] = v;
    r->args = args;
    r->nargs++;
    return v;
}

void ir_op_set_operand(ir_op *op, uint32_t i, ir_value *v) {
    kern_assert(op && i < op->noperands);
    op->operands[i] = v;
}

/* ---- List surgery ----------------------------------------------------------------- */

/* Gives the regions nested in op the kernel of the region op now lives in. */
static void adopt(ir_op *op, ir_kernel *k) {
    for (uint32_t i = 0; i < op->nregions; i++) {
        ir_region *r = op->regions[i];
        if (!r || r->kernel == k)
            continue;
        r->kernel = k;
        for (ir_op *inner = r->first; inner; inner = inner->next)
            adopt(inner, k);
    }
}

static void link_detached(ir_op *op) { kern_assert(op && !op->parent && !op->prev && !op->next); }

void ir_insert_before(ir_op *before, ir_op *op) {
    kern_assert(before && before->parent);
    link_detached(op);
    ir_region *r = before->parent;
    op->parent = r;
    op->next = before;
    op->prev = before->prev;
    if (before->prev)
        before->prev->next = op;
    else
        r->first = op;
    before->prev = op;
    adopt(op, r->kernel);
}

void ir_insert_after(ir_op *after, ir_op *op) {
    kern_assert(after && after->parent);
    link_detached(op);
    ir_region *r = after->parent;
    op->parent = r;
    op->prev = after;
    op->next = after->next;
    if (after->next)
        after->next->prev = op;
    else
        r->last = op;
    after->next = op;
    adopt(op, r->kernel);
}

void ir_append(ir_region *r, ir_op *op) {
    kern_assert(r);
    link_detached(op);
    op->parent = r;
    op->prev = r->last;
    if (r->last)
        r->last->next = op;
    else
        r->first = op;
    r->last = op;
    adopt(op, r->kernel);
}

void ir_remove(ir_op *op) {
    kern_assert(op && op->parent);
    ir_region *r = op->parent;
    if (op->prev)
        op->prev->next = op->next;
    else
        r->first = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        r->last = op->prev;
    op->prev = op->next = NULL;
    op->parent = NULL;
}

void ir_replace_uses(ir_region *r, ir_value *from, ir_value *to) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++)
            if (op->operands[i] == from)
                op->operands[i] = to;
        for (uint32_t i = 0; i < op->nregions; i++)
            ir_replace_uses(op->regions[i], from, to);
    }
}

static void clear_ids(ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        r->args[i]->id = 0;
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nresults; i++)
            op->results[i]->id = 0;
        for (uint32_t i = 0; i < op->nregions; i++)
            clear_ids(op->regions[i]);
    }
}

void ir_subst_begin(ir_subst *s, ir_kernel *k) {
    s->len = 0;
    clear_ids(k->body); /* the parameters are the body's arguments */
}

void ir_subst_add(ir_subst *s, ir_value *from, ir_value *to) {
    if (s->len == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->to = kern_xrealloc(s->to, sizeof *s->to * s->cap);
    }
    while (to->id) /* `to` was replaced itself: its replacement */
        to = s->to[to->id - 1];
    s->to[s->len++] = to;
    from->id = s->len;
}

void ir_subst_op(const ir_subst *s, ir_op *op) {
    for (uint32_t i = 0; i < op->noperands; i++)
        while (op->operands[i]->id)
            op->operands[i] = s->to[op->operands[i]->id - 1];
}

void ir_subst_apply(const ir_subst *s, ir_region *r) {
    ir_foreach_op(op, r) {
        ir_subst_op(s, op);
        for (uint32_t i = 0; i < op->nregions; i++)
            ir_subst_apply(s, op->regions[i]);
    }
}

void ir_subst_free(ir_subst *s) {
    free(s->to);
    s->to = NULL;
    s->len = s->cap = 0;
}

/* ---- Iteration -------------------------------------------------------------------- */

bool ir_region_uses(const ir_region *r, const ir_value *v) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++)
            if (op->operands[i] == v)
                return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (ir_region_uses(op->regions[i], v))
                return true;
    }
    return false;
}

uint32_t ir_region_count_ops(const ir_region *r) {
    uint32_t n = 0;
    ir_foreach_op(op, r) {
        n++;
        for (uint32_t i = 0; i < op->nregions; i++)
            n += ir_region_count_ops(op->regions[i]);
    }
    return n;
}

bool ir_region_has_loop(const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_FOR || op->code == IR_WHILE)
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (ir_region_has_loop(op->regions[i]))
                return true;
    }
    return false;
}

void ir_walk(ir_region *r, void (*fn)(ir_op *op, void *user), void *user) {
    ir_op *op = r->first;
    while (op) {
        ir_op *next = op->next; /* fn may remove op */
        fn(op, user);
        for (uint32_t i = 0; i < op->nregions; i++)
            ir_walk(op->regions[i], fn, user);
        op = next;
    }
}
