/* cuda_smoke.c - runs tests/cuda_cases.c without Criterion, for a machine with a GPU
 * and a C compiler but not the test dependencies. From the repository root, with the
 * runtime's archive of a build (it holds SPIRV-Tools' validator, which is C++):
 *   cc -O1 -Iinclude -o /tmp/cuda-smoke tests/cuda_smoke.c tests/cuda_cases.c \
 *      build/runtime/libkern-rt.a -lSPIRV-Tools -lstdc++ -lpthread -ldl -lm
 *   /tmp/cuda-smoke
 * Exit status 0 when every case passed, 77 when there is no CUDA device, 1 otherwise. */
#include <stdio.h>

#include "cuda_cases.h"

int main(void) {
    int failed = 0, skipped = 0;
    for (int i = 0; i < cuda_ncases; i++) {
        char msg[4096] = "";
        int r = cuda_cases[i].fn(msg, sizeof msg);
        printf("%-20s %s %s\n", cuda_cases[i].name, r == 1 ? "ok  " : r < 0 ? "skip" : "FAIL", msg);
        failed += r == 0;
        skipped += r < 0;
    }
    return failed ? 1 : skipped == cuda_ncases ? 77 : 0;
}
