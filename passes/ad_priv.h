/* ad_priv.h - state shared by the gradient transform (ad_grad.c) and its adjoint rules
 * (ad_rules.c). Not a public interface. */
#ifndef KERN_AD_PRIV_H
#define KERN_AD_PRIV_H

#include "passes.h"

/* What the forward sweep of one primal loop left for its reverse sweep. */
typedef struct ad_loop {
    uint32_t *stacks; /* per carried value: its adstack, or UINT32_MAX when not pushed */
    ir_value **step;  /* per carried value not pushed: NULL when it never changes (its
                         init), else c of the induction x + c (x - c when neg[i]) */
    bool *neg;
    uint32_t ncarried;
    ir_value *count; /* early-exit for and while: the iterations the forward sweep ran */
    /* K.grad.ckpt (checkpointed loops): the checkpoint adstack of each pushed carried
     * value (every k-th iteration's value), k (an i64 >= 1 of the kernel body); NULL
     * ck_stacks otherwise. L->stacks then hold one segment of at most k iterations. */
    uint32_t *ck_stacks;
    ir_value *ck_k;
} ad_loop;

typedef struct ad_ctx {
    ir_module *m;
    ir_kernel *pk; /* the primal kernel */
    ir_kernel *gk; /* K.grad, being built */
    uint32_t ad_stack_size;
    uint32_t nvals; /* primal values, numbered through ir_value.id */
    uint32_t nops;  /* primal ops, numbered through ir_op.id */
    ir_value **map; /* primal value -> its value in the code being built (current copy) */
    ir_value **adj; /* primal value -> its accumulated adjoint (NULL: zero) */
    uint32_t *mark; /* scratch marks per primal value (free-variable sets) */
    uint32_t markgen;
    ad_loop **loops;       /* primal op -> its loop record (FOR, WHILE) */
    ir_value **grad_param; /* primal param index -> the adjoint array param of K.grad */
    ir_value **ck_k;       /* K.grad.ckpt: primal op -> its segment length k (i64 >= 1) when
                              the loop is checkpointed, else NULL; NULL for K.grad */
    uint32_t *ck_param;    /* K.grad.ckpt: primal op -> the parameter ckpt.kN of its k */
    ir_builder b;          /* where new code goes */
    ir_divergence div;     /* the primal task being reversed, when it is parallel */
    bool div_ok;           /* div holds it (a serial task has no lanes) */
} ad_ctx;

/* The type of the adjoint of a value of float type t: f16 and bf16 values have f32
 * adjoints (language.md 11.4: accumulated in f32, rounded when stored). */
static inline const kern_type *ad_adj_type(const kern_type *t) {
    return t->kind == TY_F16 || t->kind == TY_BF16 ? ty_f32() : t;
}

/* Numbers the values (ir_value.id) and ops (ir_op.id) of r and its nested regions from
 * a->nvals and a->nops on. */
void ad_number_region(ad_ctx *a, ir_region *r);
/* The value of primal value v in the code being built. */
ir_value *ad_val(ad_ctx *a, ir_value *v);
/* adj(v) += d; ignored when v is not a float scalar. */
void ad_accum(ad_ctx *a, ir_value *v, ir_value *d);
/* Accumulates the adjoint g of the result of the pure scalar op `op` (ad_rules.c): the
 * rule of each opcode, with the reference's values (section 8) at non-differentiable points. */
void ad_rule_pure(ad_ctx *a, ir_op *op, ir_value *g);

#endif
