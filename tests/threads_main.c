/* threads_main.c - kern-threads: the workloads of threads_work.c without Criterion, for
 * CI's ThreadSanitizer build (.ci/run). Exit status 0 when both pass; the last line is
 * "N passed, N failed". */
#include <stdio.h>

#include "threads_work.h"

int main(void) {
    static const struct {
        const char *name;
        bool (*run)(char *, size_t);
    } work[] = {{"contexts_compile_and_launch_at_once", threads_contexts},
                {"compilers_with_other_lanes_at_once", threads_compilers}};
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof work / sizeof *work; i++) {
        char msg[512] = "";
        bool ok = work[i].run(msg, sizeof msg);
        printf("threads: %s: %s%s%s\n", work[i].name, ok ? "ok" : "FAILED", ok ? "" : ": ", msg);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
