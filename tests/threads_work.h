/* threads_work.h - workloads on several threads at once (threads_work.c). Each returns
 * true when every thread's results match the C reference, else false with the first
 * failure in msg. */
#ifndef KERN_TEST_THREADS_WORK_H
#define KERN_TEST_THREADS_WORK_H

#include <stdbool.h>
#include <stddef.h>

#include "../include/kern.h"

/* 4 threads, each with its own CPU context (2 workers; checked and SIMD code): the module
 * compiled, two kernels and their gradients launched and checked, twice. */
bool threads_contexts(char *msg, size_t msglen);
/* 4 threads compiling the module with every gradient through the compiler's API at once,
 * each with other SIMD lanes, the JIT in 2 parts. */
bool threads_compilers(char *msg, size_t msglen);
/* n threads (1 to 4), thread t with a context of opts[t] (a CPU or a Vulkan device, say),
 * running the work of threads_contexts. */
bool threads_devices(const kern_context_options *opts, int n, char *msg, size_t msglen);

#endif
