/* meta.h - module metadata: what a compiled module holds (kernels, parameters, tasks,
 * source locations), independent of the code. The compiler fills it from the IR; the
 * runtime reads it for JIT modules (in memory) and AOT modules (serialized into the
 * module file as text). No LLVM here.
 *
 * Text form (one record per line, fields separated by single spaces, names are
 * identifiers possibly containing '.'):
 *   kern-meta 1
 *   source PATH-with-spaces-allowed-to-end-of-line      (optional)
 *   kernel NAME LINE COL NPARAMS NTASKS
 *   param NAME TYPE NOGRAD            TYPE as in types.h: f32, i32[], f64[,], ...; NOGRAD 0|1
 *   task parallel|serial NDIMS LINE COL
 *   end
 * A kernel's params and tasks follow its kernel line. */
#ifndef KERN_META_H
#define KERN_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/types.h"
#include "../common/util.h"

typedef struct kern_meta_param {
    char *name;
    const kern_type *type;
    bool nograd;
} kern_meta_param;

typedef struct kern_meta_task {
    bool parallel;
    int ndims; /* parallel: 1..8; serial: 0 */
    uint32_t line, col;
} kern_meta_task;

typedef struct kern_meta_kernel {
    char *name;
    uint32_t line, col;
    kern_meta_param *params;
    int nparams;
    kern_meta_task *tasks;
    int ntasks;
} kern_meta_kernel;

typedef struct kern_meta {
    char *source; /* may be NULL */
    kern_meta_kernel *kernels;
    int nkernels;
} kern_meta;

/* Parses the text form; on error returns NULL and writes a message (with the line
 * number) to err. Never crashes on malformed input. */
kern_meta *kern_meta_parse(const char *text, size_t len, char *err, size_t errlen);
void kern_meta_print(kern_buf *out, const kern_meta *m);
void kern_meta_free(kern_meta *m);
const kern_meta_kernel *kern_meta_find(const kern_meta *m, const char *name);
/* The symbol of task t of kernel `kernel` (abi.h): writes "kern_<K>__t<t>" or, with
 * count, "kern_<K>__t<t>_count" into buf. */
void kern_meta_symbol(char *buf, size_t size, const char *kernel, int task, bool count);

#endif
