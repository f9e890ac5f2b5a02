/* cuda_cases.h - end-to-end cases of the CUDA device with hand-written PTX that follows
 * docs/gpu-abi.md (tests/cuda_cases.c). Each returns 1 when it passes, 0 when it fails
 * and -1 when there is no CUDA device (msg says why). tests/test_cuda.c runs them under
 * Criterion; tests/cuda_smoke.c runs them from a plain main (for machines with a GPU but
 * without Criterion: build it with the command at the top of that file). */
#ifndef KERN_TEST_CUDA_CASES_H
#define KERN_TEST_CUDA_CASES_H

#include <stddef.h>

typedef int (*cuda_case_fn)(char *msg, size_t len);

int cuda_case_saxpy(char *msg, size_t len);
int cuda_case_task_order(char *msg, size_t len);
int cuda_case_error_record(char *msg, size_t len);
int cuda_case_adstack_slot_major(char *msg, size_t len);
int cuda_case_bad_ptx(char *msg, size_t len);
int cuda_case_missing_symbol(char *msg, size_t len);

/* The cases' PTX (for a test that assembles it with ptxas where the toolkit is). */
const char *cuda_cases_ptx(size_t *len);

typedef struct cuda_case {
    const char *name;
    cuda_case_fn fn;
} cuda_case;
extern const cuda_case cuda_cases[];
extern const int cuda_ncases;

#endif
