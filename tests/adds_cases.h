/* adds_cases.h - kernels whose gradients add into w.grad, for the tests that the GPU code
 * generators combine the adds of a subgroup or warp (test_nvptx.c, test_spirv.c): whether
 * the divergence analysis finds the added element one for the whole group (uniform: no
 * vote on the address is needed) or not. */
#ifndef KERN_TESTS_ADDS_CASES_H
#define KERN_TESTS_ADDS_CASES_H

#include <stdbool.h>

typedef struct adds_case {
    const char *src;
    bool vote; /* the element differs between work items: the group votes on it */
} adds_case;

static const adds_case adds_cases[] = {
    /* w.grad[t] of a loop with uniform bounds */
    {"kernel k(x: f32[], w: f32[], out: f32[]) {\n"
     "  for i in 0..len(x) { var v = x[i];\n"
     "    for t in 0..len(w) { v = sin(v) * w[t]; }\n"
     "    out[i] = v; } }\n",
     false},
    /* per-item trip counts: the aligned reverse loop's t is one for the group */
    {"kernel k(x: f32[], w: f32[], n: i32[], out: f32[]) {\n"
     "  for i in 0..len(x) { var v = x[i];\n"
     "    for t in 0..n[i] { v = sin(v) * w[t]; }\n"
     "    out[i] = v; } }\n",
     false},
    /* a per-item index */
    {"kernel k(x: f32[], w: f32[], j: i32[], out: f32[]) {\n"
     "  for i in 0..len(x) { out[i] = sin(x[i]) * w[j[i]]; } }\n",
     true},
    /* a two-dimensional task: a group spans rows, so w.grad[c] differs in it */
    {"kernel k(x: f32[,], w: f32[], out: f32[,]) {\n"
     "  for i in 0..shape(x, 0), c in 0..shape(x, 1) { out[i, c] = sin(x[i, c]) * w[c]; } }\n",
     true},
};

#endif
