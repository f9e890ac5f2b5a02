/* test_threads.c - compiling and launching from several threads and contexts at once
 * (the workloads: threads_work.c). */
#include <criterion/criterion.h>

#include "threads_work.h"

Test(threads, contexts_compile_and_launch_at_once) {
    char msg[512] = "";
    cr_expect(threads_contexts(msg, sizeof msg), "%s", msg);
}

Test(threads, compilers_with_other_lanes_at_once) {
    char msg[512] = "";
    cr_expect(threads_compilers(msg, sizeof msg), "%s", msg);
}
