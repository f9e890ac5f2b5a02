/* meta_ir.h - module metadata (runtime/meta.h) from the IR. */
#ifndef KERN_META_IR_H
#define KERN_META_IR_H

#include "../ir/ir.h"
#include "../runtime/meta.h"

/* Fills a kern_meta from m: its source path, then every kernel in module order with its
 * location, its parameters (name, type, nograd) and its tasks (the kernel body's
 * parallel/serial ops in order: kind, number of dimensions, location). Everything is
 * malloc'd as runtime/meta.h says, so kern_meta_free releases it. Never returns NULL
 * (out of memory aborts through kern_oom). */
kern_meta *kc_meta_from_ir(const ir_module *m);
/* Fills mk's access lines (runtime/meta.h) from kernel k: per array parameter, the
 * elements a launch may read and write (backends/meta_access.c); none for derived kernels
 * (K.grad, K.jvp). */
void kc_meta_access(kern_meta *meta, kern_meta_kernel *mk, const ir_kernel *k);

#endif
