/* aot_fixture.c - hand-written stand-ins for modules built by `kernc build --target=cpu`
 * (runtime/module.c's file format), compiled into small shared objects for
 * tests/test_runtime.c. One source, four variants chosen with -DFIXTURE=...:
 *   1 good      saxpy(a: f32, x: f32[], y: f32[]) { for i in 0..len(x) { y[i] = a*x[i]+y[i] } }
 *   2 badmeta   the same code with metadata whose task line is corrupt
 *   3 nosym     good metadata, but the body of task 0 is missing
 *   4 notkern   code only, no metadata symbols */
#include <stdint.h>

#include "../runtime/abi.h"

#ifndef FIXTURE
#define FIXTURE 1
#endif

int64_t kern_saxpy__t0_count(void *const *args);
void kern_saxpy__t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                    void *ad_slice, const int64_t *ad_layout);
extern const char kern_module_meta[];
extern const uint64_t kern_module_meta_size;

int64_t kern_saxpy__t0_count(void *const *args) {
    const kern_array_desc *x = args[1];
    return x->shape[0];
}

#if FIXTURE != 3
void kern_saxpy__t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                    void *ad_slice, const int64_t *ad_layout) {
    float a = *(const float *)args[0];
    const kern_array_desc *x = args[1], *y = args[2];
    const float *xs = x->data;
    float *ys = y->data;
    for (int64_t i = begin; i < end; i++)
        ys[i] = a * xs[i] + ys[i];
}
#endif

#if FIXTURE == 1 || FIXTURE == 3
#define META                                                                        \
    "kern-meta 1\nsource fixture/saxpy.kern\nkernel saxpy 1 1 3 1\nparam a f32 0\n" \
    "param x f32[] 0\nparam y f32[] 0\ntask parallel 1 2 5\nend\n"
#elif FIXTURE == 2
#define META                                                                        \
    "kern-meta 1\nsource fixture/saxpy.kern\nkernel saxpy 1 1 3 1\nparam a f32 0\n" \
    "param x f32[] 0\nparam y f32[] 0\ntask sideways 1 2 5\nend\n"
#endif

#ifdef META
const char kern_module_meta[] = META;
const uint64_t kern_module_meta_size = sizeof META - 1;
#endif
