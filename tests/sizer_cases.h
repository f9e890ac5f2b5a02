/* sizer_cases.h - SizeExprs beyond what the compiler derives, shared by the sizer suites
 * (test_sizer.c: the LLVM sizer kernels; test_vk_sizer.c: the Vulkan sizer shaders), each
 * comparing with the host evaluator sz_eval. */
#ifndef KERN_TEST_SIZER_CASES_H
#define KERN_TEST_SIZER_CASES_H

/* The kernel whose parameters the texts read (its adstacks are added by the tests). */
#define SIZER_SHAPES_SRC                                                               \
    "kernel k(a: f32[], count: i32[], c2: i32[,], steps: i32, n: i32, flags: bool[], " \
    "big: i64[]) {\n"                                                                  \
    "    for i in 0..len(a) { a[i] = 0.0; }\n"                                         \
    "}\n"

/* Shapes beyond what the compiler derives, over the parameters of one kernel:
 * k(a: f32[], count: i32[], c2: i32[,], steps: i32, n: i32, flags: bool[], big: i64[]). */
static const char *const SIZER_TEXTS[] = {
    "7",
    "(max 0 (param 3))",
    "(maxover v0 0 (param 4) (param 3))", /* point */
    "(maxover v0 0 (param 4) v0)",        /* endpoints */
    "(maxover v0 (param 3) (param 4) (sub (param 4) v0))",
    "(maxover v0 0 (param 4) (max (mul 2 v0) (sub 5 v0)))",   /* convex */
    "(maxover v0 0 (param 4) (maxover v1 0 v0 (sub v0 v1)))", /* piecewise */
    "(maxover v0 0 (param 4) (maxover v1 v0 (param 3) (add v1 v0)))",
    "(maxover v0 0 (param 4) (min v0 (sub (param 3) v0)))", /* other */
    "(maxover v0 1 (param 4) (div (param 3) v0))",
    "(maxover v0 0 (param 4) (mul v0 v0))",
    "(maxover v0 0 (dim 1 0) (max 0 (read 1 v0)))", /* scan */
    "(maxover v0 0 (sub (dim 1 0) 1) (max 0 (sub (read 1 (add v0 1)) (read 1 v0))))",
    "(maxover v0 0 (dim 2 0) (maxover v1 0 (dim 2 1) (max 0 (read 2 v0 v1))))",
    "(maxover v0 0 (param 4) (read 1 v0))", /* out of bounds */
    "(maxover v0 0 (dim 1 0) (maxover v1 0 (read 1 v0) (sub (read 1 v0) v1)))",
    "(maxover v0 0 (dim 5 0) (add (read 5 v0) (read 6 v0)))",
    "(maxover v0 0 (param 4) (maxover v1 0 (param 3) (add (read 1 0) v1)))",
    "(div (param 4) (param 3))",                                      /* division by 0 */
    "(maxover v0 0 (dim 6 0) (mul (read 6 v0) 4611686018427387904))", /* overflow */
};

#endif
