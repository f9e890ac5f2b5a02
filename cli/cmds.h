/* cmds.h - the commands of kernc that run or build code (run.c) and check
 * gradients (gradcheck.c through kernc_cmd_gradcheck). Each returns the process exit
 * status of docs/cli.md. */
#ifndef KERN_KERNC_CMDS_H
#define KERN_KERNC_CMDS_H

#include "../common/context.h"
#include "../include/kern.h"
#include "../runtime/npy.h"
#include "gradcheck.h"
#include "progress.h"

enum { KERNC_EXIT_USER = 1, KERNC_EXIT_USAGE = 2, KERNC_EXIT_IO = 3 };

typedef struct kernc_run_args {
    const char *file, *kernel, *target;
    const char *const *bindings; /* NAME=VALUE */
    int nbindings;
    const char *const *saves; /* NAME=PATH.npy */
    int nsaves;
    kc_options opts;
    int threads;          /* CPU worker threads (0: the online CPUs) */
    bool time;            /* print compile and launch times on stderr */
    int steps;            /* launches with step_arg = step_start .. step_start + steps - 1 (0:
                             one, no step argument) */
    int64_t step_start;   /* --step-start S, --steps A..B: the first step's value */
    const char *step_arg; /* the i32/u32/i64 scalar parameter that counts the steps */
    int64_t ad_budget;    /* --ad-memory-budget BYTES (0: the runtime's default) */
    int ad_strategy;      /* --ad-strategy (a kern_ad_strategy; 0: auto) */
    bool verbose;         /* --verbose: how a gradient launch kept its adstacks, on stderr */
    kernc_progress_mode progress; /* reports of a long run on stderr (cli/progress.h) */
    bool no_cache;        /* run --no-cache: no compile cache (docs/runtime.md) */
    int device;           /* --device N: kern_context_options.device (-1: the default) */
} kernc_run_args;

/* KERNEL may be K.grad: the file is then compiled with that gradient (KC_GRAD_ALL), and a
 * failed global-access check is reported as a diagnostic. */
int kernc_cmd_run(const kernc_run_args *a);
/* gradcheck FILE KERNEL [NAME=VALUE ...]: a->saves are unused. */
int kernc_cmd_gradcheck(const kernc_run_args *a, const gradcheck_options *o);
/* Modules carry K.grad for every kernel that passes the global-access check. */
int kernc_cmd_build(const char *file, const char *target, const char *out, const kc_options *o);
/* --emit=llvm|ptx|...: the code of target for the file, from the target's code generator
 * (backends/codegen.h): the optimized LLVM IR, or PTX, on out; with kernel (--kernel, may be
 * K.grad or K.jvp when o asks for it), that kernel's code alone, and a kernel the file does
 * not have is an error (status 1). */
int kernc_cmd_emit_code(const char *file, const char *target, const char *kind, const char *out,
                        const char *kernel, const kc_options *o);

/* Writes an output: to stdout when path is NULL or "-" (checked, flushed), else to the
 * file by common/outfile.h's rules. Returns 0 or KERNC_EXIT_IO after saying why. */
int kernc_write_output(const char *path, const void *data, size_t len);

/* " (did you mean 'NAME'?)" for a kernel name that names[0..n) lack (common/suggest.h), ""
 * when none is near; a derived name (K.grad, K.jvp, K.grad.jvp) is matched by its K and
 * keeps its suffix. Into buf, returned. */
const char *kernc_kernel_hint(char *buf, size_t size, const char *kernel, const char *const *names,
                              int n);
/* The same for a parameter name that kernel k lacks, among k's parameters. */
const char *kernc_param_hint(char *buf, size_t size, kern_kernel *k, const char *name);

/* A scalar argument NAME=VALUE's value in dtype t (run.c): bool as true/false/1/0, integers
 * as in the language (decimal or 0x hex, an optional '-', no leading zeros), floats as
 * strtod. False with *why saying what is wrong. */
bool kernc_parse_scalar(const char *s, kern_dtype t, kern_arg *out, const char **why);

/* A vector, matrix or struct parameter passed by value (an array of its components, the
 * kernel's rank all trailing extents): its value may be given inline, NAME=0.1,0.2,0.3. */
bool kernc_by_value(const kern_param_info *p);
/* Whether value is such an inline list rather than a .npy path: it does not end in .npy. */
bool kernc_is_inline(const kern_param_info *p, const char *value);
/* Parses an inline value, the components comma-separated in memory order (a matrix row by
 * row, a struct's leaves in declared order), into a malloc'd array of p->dtype values
 * (*count of them). NULL with a message in err naming the component that is wrong. */
void *kernc_parse_inline(const kern_param_info *p, const char *value, int64_t *count, char *err,
                         size_t errlen);
/* The shape an array of p's declared type has, "(N, 3)", "(N, M, 3, 3)", "(3,)". */
void kernc_shape_text(char *buf, size_t size, const kern_param_info *p);
/* A .npy file with a structured dtype (arr->fields) binds only to a struct parameter of
 * the same layout (kern_npy_struct_fields of its declared type); false with why in err.
 * A file without one always passes. */
bool kernc_npy_fields_match(const kern_param_info *p, const kern_npy *arr, char *err,
                            size_t errlen);
/* Whether the last dimensions of shape (rank dims) are p's trailing extents. */
bool kernc_tail_fits(const kern_param_info *p, int rank, const int64_t *shape);

#endif
