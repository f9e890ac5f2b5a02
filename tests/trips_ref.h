/* trips_ref.h - the C reference of the tests' "trips" kernel (test_simd.c, test_e2e.c):
 * item i runs min(count[i], T) steps of x = 0.5 sin(x) w[t] + 0.4 x + 0.1 (no step for a
 * negative count), the work items sorted by that count (passes/trip_sort.c). */
#ifndef KERN_TESTS_TRIPS_REF_H
#define KERN_TESTS_TRIPS_REF_H

#include <math.h>
#include <stdint.h>

enum { TRIPS_MAX_T = 64 };

/* One item in the kernel's float operations: returns x after its steps, adds the item's
 * dL/dw for L = x (in double, from the stored x of each step) to ww, and returns dL/dx0 in
 * *gx0. T is at most TRIPS_MAX_T. */
static inline float trips_item(float x0, int32_t count, const float *w, int T, double *ww,
                               double *gx0) {
    int n = count < T ? count : T;
    float xs[TRIPS_MAX_T], x = x0;
    for (int t = 0; t < n; t++) {
        xs[t] = x;
        x = 0.5f * sinf(x) * w[t] + 0.4f * x + 0.1f;
    }
    double g = 1;
    for (int t = n - 1; t >= 0; t--) {
        ww[t] += g * 0.5 * sin((double)xs[t]);
        g *= 0.5 * cos((double)xs[t]) * w[t] + 0.4;
    }
    *gx0 = g;
    return x;
}

#endif
