/* run.c - `kernc run`, `kernc build` and `kernc gradcheck` (docs/reference.md
 * section 10, docs/cli.md).
 *
 * run:   compiles the file with the command line's options (with the one gradient kernel
 *        asked for when KERNEL is K.grad), JITs it (libkern-jit, jit/jit.h), binds every
 *        parameter from NAME=VALUE
 *        (numbers for scalars, .npy files for arrays, checked against the declaration),
 *        launches, waits, and writes the --save arrays; nothing is written when anything
 *        failed, so no partial result is ever reported.
 * build: compiles to an object file through LLVM, adds the module metadata
 *        (runtime/meta.h) as the symbols kern_module_meta / kern_module_meta_size, and
 *        links a shared object with the system C compiler driver (`cc`, or $CC); K.grad
 *        is built for every kernel that passes the global-access check.
 * gradcheck: reads the file and runs cli/gradcheck.c on it. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "../backends/codegen.h"
#include "../backends/llvm/llvm_backend.h"
#include "../backends/meta_ir.h"
#include "../common/half.h"
#include "../common/outfile.h"
#include "../common/suggest.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../jit/jit.h"
#include "../runtime/meta.h"
#include "../runtime/npy.h"
#include "cmds.h"

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("kernc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

/* The code generator of target (NULL: cpu), checking o->arch against it; NULL after
 * printing why. */
static const kc_codegen *codegen_of(const char *target, const kc_options *o, int *rc) {
    const kc_codegen *cg = kc_codegen_find(target ? target : kern_target_cpu.name);
    if (!cg) {
        char names[128];
        *rc = fail(KERNC_EXIT_USAGE, "target '%s' is not available in this version of kernc (%s)",
                   target, kc_codegen_targets(names, sizeof names));
        return NULL;
    }
    if (o->arch && !cg->arch_valid) {
        *rc = fail(KERNC_EXIT_USAGE, "--arch: target %s takes no architecture", cg->t->name);
        return NULL;
    }
    if (o->arch && !cg->arch_valid(o->arch)) {
        *rc = fail(KERNC_EXIT_USAGE,
                   "--arch: '%s' is not an architecture of target %s (its architectures: %s)",
                   o->arch, cg->t->name, cg->t->arches);
        return NULL;
    }
    return cg;
}

/* ---- Scalars from the command line -------------------------------------------------- */

bool kernc_parse_scalar(const char *s, kern_dtype t, kern_arg *out, const char **why) {
    char *end;
    errno = 0;
    *why = NULL;
    switch (t) {
    case KERN_BOOL:
        if (!strcmp(s, "true") || !strcmp(s, "1")) {
            *out = kern_arg_bool(true);
            return true;
        }
        if (!strcmp(s, "false") || !strcmp(s, "0")) {
            *out = kern_arg_bool(false);
            return true;
        }
        *why = "expected true, false, 1 or 0";
        return false;
    case KERN_I8:
    case KERN_I16:
    case KERN_I32:
    case KERN_I64: {
        if (!kernc_int_syntax(s)) {
            *why = "not an integer (decimal without leading zeros, or 0x hex)";
            return false;
        }
        long long v = strtoll(s, &end, 0);
        if (!*s || *end || errno) {
            *why = errno ? "out of range" : "not an integer";
            return false;
        }
        long long lo = t == KERN_I8 ? INT8_MIN : t == KERN_I16 ? INT16_MIN : INT32_MIN;
        long long hi = t == KERN_I8 ? INT8_MAX : t == KERN_I16 ? INT16_MAX : INT32_MAX;
        if (t != KERN_I64 && (v < lo || v > hi)) {
            *why = t == KERN_I8 ? "out of range for i8" : t == KERN_I16 ? "out of range for i16" : "out of range for i32";
            return false;
        }
        *out = t == KERN_I8    ? kern_arg_i8((int8_t)v)
               : t == KERN_I16 ? kern_arg_i16((int16_t)v)
               : t == KERN_I32 ? kern_arg_i32((int32_t)v)
                               : kern_arg_i64((int64_t)v);
        return true;
    }
    case KERN_U8:
    case KERN_U16:
    case KERN_U64:
    case KERN_U32: {
        if (s[0] == '-') {
            *why = "negative value for an unsigned type";
            return false;
        }
        if (!kernc_int_syntax(s)) {
            *why = "not an integer (decimal without leading zeros, or 0x hex)";
            return false;
        }
        unsigned long long v = strtoull(s, &end, 0);
        unsigned long long max = t == KERN_U8 ? UINT8_MAX : t == KERN_U16 ? UINT16_MAX : t == KERN_U64 ? UINT64_MAX : UINT32_MAX;
        if (!*s || *end || errno || v > max) {
            *why = (*end || !*s) ? "not an integer" : "out of range for the type";
            return false;
        }
        *out = t == KERN_U8    ? kern_arg_u8((uint8_t)v)
               : t == KERN_U16 ? kern_arg_u16((uint16_t)v)
               : t == KERN_U64 ? kern_arg_u64((uint64_t)v)
                               : kern_arg_u32((uint32_t)v);
        return true;
    }
    case KERN_F32:
    case KERN_F64: {
        double v = strtod(s, &end);
        if (!*s || *end) {
            *why = "not a number";
            return false;
        }
        if (t == KERN_F32 && isfinite(v) && !isfinite((float)v)) {
            *why = "out of range for f32";
            return false;
        }
        *out = t == KERN_F32 ? kern_arg_f32((float)v) : kern_arg_f64(v);
        return true;
    }
    case KERN_F16:
    case KERN_BF16: break; /* arrays only */
    }
    *why = "unknown type";
    return false;
}

/* ---- Vectors, matrices and structs from the command line ------------------------------ */

bool kernc_by_value(const kern_param_info *p) {
    return p->is_array && p->ntail > 0 && p->rank == p->ntail;
}

bool kernc_is_inline(const kern_param_info *p, const char *value) {
    size_t n = strlen(value);
    return kernc_by_value(p) && !(n >= 4 && !strcmp(value + n - 4, ".npy"));
}

void *kernc_parse_inline(const kern_param_info *p, const char *value, int64_t *count, char *err,
                         size_t errlen) {
    int64_t n = p->tail[0] * (p->ntail > 1 ? p->tail[1] : 1), got = 1;
    for (const char *c = value; *c; c++)
        got += *c == ',';
    if (got != n) {
        snprintf(err, errlen, "%s has %lld components, comma-separated; got %lld", p->type_name,
                 (long long)n, (long long)got);
        return NULL;
    }
    size_t es = kern_dtype_size(p->dtype);
    unsigned char *data = calloc((size_t)n, es);
    char *copy = strdup(value);
    if (!data || !copy)
        kern_oom((size_t)n * es);
    char *item = copy;
    for (int64_t i = 0; i < n; i++) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = 0;
        kern_arg a;
        const char *why;
        if (!kernc_parse_scalar(item, p->dtype, &a, &why)) {
            snprintf(err, errlen, "component %lld '%s': %s (%s is of %s)", (long long)i + 1, item,
                     why, p->type_name, kern_dtype_name(p->dtype));
            free(copy);
            free(data);
            return NULL;
        }
        memcpy(data + (size_t)i * es, &a.u, es); /* every member of the union is at offset 0 */
        item = comma + 1;
    }
    free(copy);
    *count = n;
    return data;
}

void kernc_shape_text(char *buf, size_t size, const kern_param_info *p) {
    static const char *const outer[] = {"N", "M", "K", "L"};
    size_t len = 0;
    buf[0] = 0;
    for (int d = 0; d < p->rank && len < size; d++) {
        int t = d - (p->rank - p->ntail);
        int w = t >= 0 ? snprintf(buf + len, size - len, "%s%lld", d ? ", " : "(",
                                  (long long)p->tail[t])
                       : snprintf(buf + len, size - len, "%s%s", d ? ", " : "(", outer[d & 3]);
        len += w > 0 ? (size_t)w : 0;
    }
    if (len < size)
        snprintf(buf + len, size - len, "%s)", p->rank == 1 ? "," : "");
}

bool kernc_npy_fields_match(const kern_param_info *p, const kern_npy *arr, char *err,
                            size_t errlen) {
    if (!arr->fields)
        return true;
    kern_buf want = {0};
    bool ok = false;
    if (!kern_npy_struct_fields(p->type_name, &want))
        snprintf(err, errlen,
                 "the file holds records of %s, but parameter '%s' is %s, not a struct",
                 arr->fields, p->name, p->type_name);
    else if (strcmp(want.data, arr->fields) != 0)
        snprintf(
            err, errlen,
            "the file's structured dtype %s is not the layout of parameter '%s' (%s), which is %s",
            arr->fields, p->name, p->type_name, want.data);
    else
        ok = true;
    buf_free(&want);
    return ok;
}

bool kernc_tail_fits(const kern_param_info *p, int rank, const int64_t *shape) {
    for (int j = 0; j < p->ntail; j++)
        if (rank - p->ntail + j < 0 || shape[rank - p->ntail + j] != p->tail[j])
            return false;
    return true;
}

/* The declared type; a vector, matrix or struct parameter's with its memory's. */
static void print_type(FILE *f, const kern_param_info *p) {
    fputs(p->type_name, f);
    if (p->ntail > 0) {
        char shape[96];
        kernc_shape_text(shape, sizeof shape, p);
        fprintf(f, ", in memory %s of shape %s", kern_dtype_name(p->dtype), shape);
    }
}

/* Prints an array parameter after a run without --save: dtype, shape, up to 8 values. */
static void print_array(const char *name, kern_buffer *b) {
    int64_t n = kern_buffer_count(b);
    size_t bytes = kern_buffer_bytes(b);
    unsigned char *data = malloc(bytes ? bytes : 1);
    if (!data || kern_buffer_read(b, data, bytes) != KERN_OK) {
        free(data);
        return;
    }
    printf("%s: %s[", name, kern_dtype_name(kern_buffer_dtype(b)));
    for (int d = 0; d < kern_buffer_rank(b); d++)
        printf("%s%" PRId64, d ? ", " : "", kern_buffer_extent(b, d));
    printf("] =");
    for (int64_t i = 0; i < n && i < 8; i++) {
        switch (kern_buffer_dtype(b)) {
        case KERN_BOOL: printf(" %s", data[i] ? "true" : "false"); break;
        case KERN_I32: printf(" %" PRId32, ((int32_t *)data)[i]); break;
        case KERN_U32: printf(" %" PRIu32, ((uint32_t *)data)[i]); break;
        case KERN_I64: printf(" %" PRId64, ((int64_t *)data)[i]); break;
        case KERN_F32: printf(" %.9g", (double)((float *)data)[i]); break;
        case KERN_F64: printf(" %.17g", ((double *)data)[i]); break;
        case KERN_I8: printf(" %d", ((int8_t *)data)[i]); break;
        case KERN_U8: printf(" %u", ((uint8_t *)data)[i]); break;
        case KERN_I16: printf(" %d", ((int16_t *)data)[i]); break;
        case KERN_U16: printf(" %u", ((uint16_t *)data)[i]); break;
        case KERN_U64: printf(" %" PRIu64, ((uint64_t *)data)[i]); break;
        case KERN_F16: printf(" %.5g", (double)kern_f16_value(((uint16_t *)data)[i])); break;
        case KERN_BF16: printf(" %.4g", (double)kern_bf16_value(((uint16_t *)data)[i])); break;
        }
    }
    printf("%s\n", n > 8 ? " ..." : "");
    free(data);
}

/* The exit status of the first of several reported errors. */
static int first(int rc, int next) { return rc ? rc : next; }

/* ---- Compiling ---------------------------------------------------------------------- */

/* Reads and compiles a file with options o, printing its diagnostics (after pausing the
 * progress reports p); NULL with *rc set on failure. The caller frees the module and
 * *ctx_out. */
static ir_module *compile_file(const char *file, const kc_options *o, kc_ctx **ctx_out, int *rc,
                               kernc_progress *p) {
    size_t len;
    char *text = kc_read_source(file, &len);
    if (!text) {
        *rc = fail(KERNC_EXIT_IO, "cannot read '%s': %s", file, strerror(errno));
        return NULL;
    }
    kc_ctx *cc = kc_ctx_new();
    cc->opts = *o;
    ir_module *m = kc_compile_source(cc, file, text, len);
    free(text);
    if (cc->diags.len)
        kernc_progress_pause(p);
    diag_print_all(stderr, &cc->diags);
    if (!m)
        *rc = KERNC_EXIT_USER;
    *ctx_out = cc;
    return m;
}

/* ---- run ---------------------------------------------------------------------------- */

typedef struct binding {
    const char *name; /* points into a copy */
    const char *value;
    bool used;
} binding;

static int split_binding(const char *s, binding *b, char **copy, const char *what) {
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || !eq[1])
        return fail(KERNC_EXIT_USAGE, "%s '%s' is not of the form NAME=%s", what, s,
                    !strcmp(what, "--save") ? "PATH.npy" : "VALUE");
    *copy = strdup(s);
    (*copy)[eq - s] = 0;
    b->name = *copy;
    b->value = *copy + (eq - s) + 1;
    b->used = false;
    return 0;
}

typedef struct keyed {
    const char *key;
    int i;
} keyed;

static int keyed_cmp(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Whether two of keys[0..n) are equal (NULL keys never are); *a < *b are the pair whose
 * second comes first on the command line. Sorts a copy: n log n, where comparing every
 * pair of 100,000 arguments took minutes. */
static bool find_equal(const char **keys, int n, int *a, int *b) {
    keyed *k = kern_xmalloc(sizeof *k * ((size_t)n + 1));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (keys[i])
            k[m++] = (keyed){keys[i], i};
    qsort(k, (size_t)m, sizeof *k, keyed_cmp);
    *b = -1;
    for (int j = 1; j < m; j++)
        if (!strcmp(k[j - 1].key, k[j].key) && (*b < 0 || k[j].i < *b)) {
            *a = k[j - 1].i; /* equal keys sort by position: the earlier one */
            *b = k[j].i;
        }
    free(k);
    return *b >= 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The parameter of k named name, or -1. */
static int param_index(kern_kernel *k, const char *name, kern_param_info *out) {
    for (int i = 0; i < kern_kernel_param_count(k); i++) {
        kern_param_info p;
        kern_kernel_param(k, i, &p);
        if (!strcmp(p.name, name)) {
            if (out)
                *out = p;
            return i;
        }
    }
    return -1;
}

const char *kernc_kernel_hint(char *buf, size_t size, const char *kernel, const char *const *names,
                              int n) {
    static const char *const derived[] = {".grad.jvp", ".grad", ".jvp"};
    size_t kn = strlen(kernel), sfx = 0;
    for (size_t i = 0; i < sizeof derived / sizeof *derived && !sfx; i++) {
        size_t d = strlen(derived[i]);
        if (kn > d && !strcmp(kernel + kn - d, derived[i]))
            sfx = d;
    }
    char *base = strndup(kernel, kn - sfx);
    const char *near = base ? kern_suggest(base, names, (size_t)n) : NULL;
    if (size)
        buf[0] = 0;
    if (near && size)
        snprintf(buf, size, " (did you mean '%s%s'?)", near, kernel + kn - sfx);
    free(base);
    return buf;
}

const char *kernc_param_hint(char *buf, size_t size, kern_kernel *k, const char *name) {
    int n = kern_kernel_param_count(k);
    const char **names = kern_xmalloc(sizeof *names * ((size_t)n + 1));
    for (int i = 0; i < n; i++) {
        kern_param_info p;
        kern_kernel_param(k, i, &p);
        names[i] = p.name;
    }
    kern_suggest_hint(buf, size, name, names, (size_t)n);
    free(names);
    return buf;
}

/* An unbound adjoint p.grad of K.grad starts as zeros of the primal's shape (a scalar
 * primal: one element); the primal comes first in K.grad's parameters, so its buffer
 * or value is bound already. Returns false when p is not such an adjoint. */
static bool zero_adjoint(kern_context *ctx, kern_kernel *k, const kern_param_info *p,
                         kern_buffer **bufs, kern_buffer **out) {
    size_t n = strlen(p->name), sfx = n > 5 && !strcmp(p->name + n - 5, ".grad")  ? 5
                                      : n > 4 && !strcmp(p->name + n - 4, ".tan") ? 4
                                                                                  : 0;
    if (!p->is_array || !sfx)
        return false;
    char *base = strndup(p->name, n - sfx);
    kern_param_info pp;
    int pi = param_index(k, base, &pp);
    free(base);
    if (pi < 0 || (pp.is_array && !bufs[pi]))
        return false;
    int64_t shape[KERN_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; pp.is_array && d < KERN_MAX_DIMS; d++)
        shape[d] = kern_buffer_extent(bufs[pi], d);
    int64_t count = 1;
    for (int d = 0; d < p->rank; d++)
        count *= shape[d];
    void *zeros = calloc((size_t)(count ? count : 1), kern_dtype_size(p->dtype));
    kern_status st = zeros ? kern_buffer_create(ctx, p->dtype, p->rank, shape, zeros, out)
                           : KERN_ERR_OUT_OF_MEMORY;
    free(zeros);
    return st == KERN_OK;
}

/* --verbose: how the last launch with adstacks kept them (docs/autodiff.md). */
static void print_adstacks(kern_context *ctx, const char *kernel) {
    kern_adstack_info in;
    if (kern_context_adstack_info(ctx, &in) != KERN_OK || !in.last_strategy) {
        fprintf(stderr, "kernc run: %s: no adstacks\n", kernel);
        return;
    }
    static const char *const what[] = {
        "", "store all (every iteration's carried values)",
        "fewer slots (every iteration's carried values, the items in more waves)",
        "recompute (every k-th iteration's carried values; segments recomputed)"};
    char budget[32] = "the device's memory";
    if (in.last_budget < INT64_MAX)
        snprintf(budget, sizeof budget, "%lld bytes", (long long)in.last_budget);
    fprintf(stderr,
            "kernc run: %s: adstacks: %s: %lld bytes (%lld per slot x %lld slots); storing "
            "all: %lld bytes; budget: %s; expected time %.2fx of storing all\n",
            kernel, what[in.last_strategy], (long long)in.last_needed_bytes,
            (long long)in.last_stride, (long long)in.last_slots, (long long)in.last_store_all_bytes,
            budget, in.last_recompute);
}

/* The launches of a run: k once, or --steps N times with the step argument = S .. S+N-1
 * (S: a->step_start), reported to prog.
 * For K.grad with --steps, K runs N times through a tape and the tape's backward pass
 * runs the N gradient launches (docs/reference.md section 8: newest first), with the bound adjoints
 * as the tape's adjoint buffers; a scalar's adjoint adds the records' contributions. */
static kern_status launch_run(const kernc_run_args *a, kern_context *ctx, kern_module *mod,
                              kern_kernel *k, kern_arg *args, kern_buffer **bufs, int step_idx,
                              bool is_grad, kernc_progress *prog) {
    if (!a->steps) {
        kernc_progress_phase(prog, "running");
        kern_status st = kern_launch(k, args, kern_kernel_param_count(k));
        return st == KERN_OK ? kern_sync(ctx) : st;
    }
    kern_kernel *primal = k;
    kern_tape *tape = NULL;
    kern_status st = KERN_OK;
    if (is_grad) {
        char *base = strndup(a->kernel, strlen(a->kernel) - 5);
        st = kern_kernel_find(mod, base, &primal);
        free(base);
        if (st == KERN_OK)
            st = kern_tape_create(ctx, &tape);
    }
    int npk = kern_kernel_param_count(primal);
    double synced = now_ms();
    for (int s = 0; s < a->steps && st == KERN_OK; s++) {
        kern_param_info sp;
        kern_kernel_param(primal, step_idx, &sp);
        int64_t t = a->step_start + s;
        args[step_idx] = sp.dtype == KERN_I32   ? kern_arg_i32((int32_t)t)
                         : sp.dtype == KERN_U32 ? kern_arg_u32((uint32_t)t)
                                                : kern_arg_i64(t);
        kernc_progress_step(prog, s, a->steps, a->step_arg, t);
        st = tape ? kern_tape_launch(tape, primal, args, npk) : kern_launch(primal, args, npk);
        /* the reports count launches done: on a device that runs them asynchronously,
         * wait for the queue every 0.1 s so that the count keeps up */
        if (st == KERN_OK && prog && now_ms() - synced >= 100) {
            st = kern_sync(ctx);
            synced = now_ms();
        }
    }
    if (st == KERN_OK)
        st = kern_sync(ctx);
    if (!tape || st != KERN_OK)
        goto done;
    kernc_progress_phase(prog, "the gradient, through the tape's launches newest first");
    int gi = npk; /* K.grad: K's parameters, then one adjoint per differentiable one */
    int *scalar_grad = calloc((size_t)npk + 1, sizeof *scalar_grad);
    for (int i = 0; i < npk && st == KERN_OK; i++) {
        kern_param_info p;
        kern_kernel_param(primal, i, &p);
        if ((p.dtype != KERN_F32 && p.dtype != KERN_F64) || p.nograd)
            continue;
        scalar_grad[i] = p.is_array ? 0 : gi + 1;
        if (p.is_array)
            st = kern_tape_set_grad(tape, bufs[i], bufs[gi]);
        gi++;
    }
    if (st == KERN_OK)
        st = kern_tape_backward(tape);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    for (int i = 0; i < npk && st == KERN_OK; i++) {
        if (!scalar_grad[i])
            continue;
        kern_buffer *g = bufs[scalar_grad[i] - 1];
        double sum = 0, d;
        for (int r = 0; r < kern_tape_record_count(tape) && st == KERN_OK; r++)
            if ((st = kern_tape_scalar_grad(tape, r, i, &d)) == KERN_OK)
                sum += d;
        if (st != KERN_OK)
            break;
        if (kern_buffer_dtype(g) == KERN_F32) {
            float v;
            if ((st = kern_buffer_read(g, &v, sizeof v)) == KERN_OK) {
                v = (float)((double)v + sum);
                st = kern_buffer_write(g, &v, sizeof v);
            }
        } else {
            double v;
            if ((st = kern_buffer_read(g, &v, sizeof v)) == KERN_OK) {
                v += sum;
                st = kern_buffer_write(g, &v, sizeof v);
            }
        }
    }
    free(scalar_grad);
done:
    kern_tape_destroy(tape);
    return st;
}

int kernc_cmd_run(const kernc_run_args *a) {
    int rc = 0;
    const kc_codegen *cg = codegen_of(a->target, &a->opts, &rc);
    if (!cg)
        return rc;
    if (!a->kernel)
        return fail(KERNC_EXIT_USAGE, "run: missing KERNEL (kernc run FILE.kern KERNEL ...)");
    int nb = a->nbindings, ns = a->nsaves;
    binding *bind = calloc((size_t)nb + 1, sizeof *bind);
    binding *save = calloc((size_t)ns + 1, sizeof *save);
    char **copies = calloc((size_t)(nb + ns) + 1, sizeof *copies);
    kern_context *ctx = NULL;
    kern_module *mod = NULL;
    kern_buffer **bufs = NULL;
    kern_arg *args = NULL;
    kernc_progress *progress = NULL;
    int np = 0;
    for (int i = 0; i < nb && !rc; i++)
        rc = split_binding(a->bindings[i], &bind[i], &copies[i], "binding");
    for (int i = 0; i < ns && !rc; i++)
        rc = split_binding(a->saves[i], &save[i], &copies[nb + i], "--save");
    if (rc)
        goto cleanup;
    /* a parameter bound twice, two saves to one file: by sorting, so n log n */
    int i0, i1;
    const char **names = kern_xmalloc(sizeof *names * ((size_t)nb + 1));
    for (int i = 0; i < nb; i++)
        names[i] = bind[i].name;
    bool twice = find_equal(names, nb, &i0, &i1);
    free(names);
    if (twice) {
        rc = fail(KERNC_EXIT_USAGE, "parameter '%s' is bound twice", bind[i1].name);
        goto cleanup;
    }
    char **keys = kern_xmalloc(sizeof *keys * ((size_t)ns + 1));
    for (int i = 0; i < ns; i++)
        keys[i] = kern_outfile_key(save[i].value);
    bool clash = find_equal((const char **)keys, ns, &i0, &i1);
    for (int i = 0; i < ns; i++)
        free(keys[i]);
    free(keys);
    if (clash) {
        rc = fail(KERNC_EXIT_USAGE, "--save %s=%s and --save %s=%s write one file", save[i0].name,
                  save[i0].value, save[i1].name, save[i1].value);
        goto cleanup;
    }

    /* K.grad: only that gradient is built, and a failed global-access check is an error
     * with both locations; a primal kernel needs no gradient at all. */
    kc_options co = a->opts;
    size_t kn = strlen(a->kernel);
    bool is_grad = kn > 5 && !strcmp(a->kernel + kn - 5, ".grad");
    bool is_jvp = kn > 4 && !strcmp(a->kernel + kn - 4, ".jvp"); /* K.jvp, K.grad.jvp */
    bool is_hvp = kn > 9 && !strcmp(a->kernel + kn - 9, ".grad.jvp");
    co.grad = is_grad || is_hvp ? KC_GRAD_ALL : KC_GRAD_NONE;
    co.jvp = is_jvp;
    co.grad_only = is_grad || is_jvp ? a->kernel : NULL;
    if (is_hvp && a->steps) {
        rc = fail(KERNC_EXIT_USAGE,
                  "--steps: %s runs once (a sequence's Hessian-vector product "
                  "needs K.jvp forward and K.grad.jvp in reverse order)",
                  a->kernel);
        goto cleanup;
    }
    /* K.grad.ckpt only when a launch needs it (jit_module_lazy_ckpt, below) */
    bool lazy_ckpt = is_grad && !co.no_ckpt;
    co.no_ckpt = true;
    double t0 = now_ms();
    char what[160];
    snprintf(what, sizeof what, "kernc run: %s", a->kernel);
    progress = kernc_progress_start(&a->progress, what, "compiling");
    kern_context_options o = kern_context_options_default();
    o.backend = (kern_backend)cg->t->backend;
    o.debug = a->opts.debug;
    o.no_checks = !kc_checks(&a->opts);
    o.ad_stack_size = a->opts.ad_stack_size;
    o.threads = a->threads;
    o.no_cache |= a->no_cache;
    o.device = a->device;
    if (a->ad_budget)
        o.ad_memory_budget = a->ad_budget;
    if (a->ad_strategy)
        o.ad_strategy = a->ad_strategy;
    /* The compile cache's module when it has one: a compile that printed warnings is never
     * kept, so a module from the cache has none to print. */
    size_t srclen = 0;
    char *text = kc_read_source(a->file, &srclen);
    kern_status cst = KERN_ERR_NOT_FOUND, st = KERN_ERR_NOT_FOUND;
    if (text && jit_cache_has(&o, cg->t->name, a->file, text, srclen, &co) &&
        (cst = kern_context_create(&o, &ctx)) == KERN_OK)
        st = jit_module_cached(ctx, a->file, text, srclen, &co, &mod);
    kc_ctx *cc = NULL;
    ir_module *m = NULL;
    if (st != KERN_OK) {
        m = compile_file(a->file, &co, &cc, &rc, progress);
        if (!m) {
            free(text);
            kc_ctx_free(cc);
            goto cleanup;
        }
        if (!ctx)
            cst = kern_context_create(&o, &ctx);
        st = cst;
        if (st == KERN_OK && text && cc->diags.warnings == 0)
            st = jit_module_from_ir_keep(ctx, m, &co, a->file, text, srclen, &mod);
        else if (st == KERN_OK)
            st = jit_module_from_ir(ctx, m, &co, a->file, &mod);
    }
    if (st == KERN_OK && lazy_ckpt)
        st = text ? jit_module_lazy_ckpt(mod, &co, a->file, text, srclen) : KERN_ERR_NOT_FOUND;
    free(text);
    ir_module_free(m);
    kc_ctx_free(cc);
    kernc_progress_pause(progress); /* the arguments' errors, if any, until the launch */
    if (st != KERN_OK) {
        rc = first(
            rc, fail(KERNC_EXIT_USER, "%s", ctx ? kern_context_last_error(ctx) : "out of memory"));
        goto cleanup;
    }
    kern_kernel *k;
    if (kern_kernel_find(mod, a->kernel, &k) != KERN_OK) {
        int nk = kern_module_kernel_count(mod);
        const char **knames = kern_xmalloc(sizeof *knames * ((size_t)nk + 1));
        for (int i = 0; i < nk; i++)
            knames[i] = kern_module_kernel_name(mod, i);
        char hint[300];
        kernc_kernel_hint(hint, sizeof hint, a->kernel, knames, nk);
        free(knames);
        fprintf(stderr, "kernc: error: no kernel named '%s' in %s%s", a->kernel, a->file, hint);
        if (is_grad) {
            kern_kernel *primal;
            char *base = strndup(a->kernel, kn - 5);
            if (kern_kernel_find(mod, base, &primal) == KERN_OK)
                fprintf(stderr, " (no gradient was built for '%s')", base);
            free(base);
        }
        if (kern_module_kernel_count(mod) == 0)
            fprintf(stderr, ", which has no kernels");
        else
            fprintf(stderr, "; kernels:");
        for (int i = 0; i < kern_module_kernel_count(mod); i++)
            fprintf(stderr, " %s", kern_module_kernel_name(mod, i));
        fputc('\n', stderr);
        rc = KERNC_EXIT_USER;
        goto cleanup;
    }
    double t_compiled = now_ms();
    np = kern_kernel_param_count(k);
    bufs = calloc((size_t)np + 1, sizeof *bufs);
    args = calloc((size_t)np + 1, sizeof *args);
    int step_idx = -1;
    if (a->steps) {
        kern_param_info sp;
        step_idx = param_index(k, a->step_arg, &sp);
        if (step_idx < 0 || sp.is_array ||
            (sp.dtype != KERN_I32 && sp.dtype != KERN_U32 && sp.dtype != KERN_I64)) {
            char hint[300];
            if (step_idx < 0)
                rc = fail(KERNC_EXIT_USER,
                          "--step-arg %s: kernel '%s' has no parameter named '%s'%s", a->step_arg,
                          a->kernel, a->step_arg,
                          kernc_param_hint(hint, sizeof hint, k, a->step_arg));
            else
                rc = fail(KERNC_EXIT_USER,
                          "--step-arg %s: parameter '%s' of kernel '%s' is not an integer scalar",
                          a->step_arg, a->step_arg, a->kernel);
            goto cleanup;
        }
    }
    for (int i = 0; i < np; i++) {
        kern_param_info p;
        kern_kernel_param(k, i, &p);
        binding *b = NULL;
        for (int j = 0; j < nb; j++)
            if (!strcmp(bind[j].name, p.name))
                b = &bind[j];
        if (i == step_idx) {
            if (b)
                rc = first(rc, fail(KERNC_EXIT_USAGE,
                                    "%s=%s: the step argument is set by --steps, not bound", p.name,
                                    b->value));
            if (b)
                b->used = true;
            continue;
        }
        if (!b && (is_grad || is_jvp) && zero_adjoint(ctx, k, &p, bufs, &bufs[i])) {
            args[i] = kern_arg_buffer(bufs[i]);
            continue;
        }
        if (!b) {
            fprintf(stderr, "kernc: error: parameter '%s: %s", p.name, p.type_name);
            if (kernc_by_value(&p))
                fprintf(stderr,
                        "' of kernel '%s' is not bound (add %s=X,Y,... with its %lld "
                        "components, or %s=FILE.npy)\n",
                        a->kernel, p.name, (long long)(p.tail[0] * (p.ntail > 1 ? p.tail[1] : 1)),
                        p.name);
            else
                fprintf(stderr, "' of kernel '%s' is not bound (add %s=%s)\n", a->kernel, p.name,
                        p.is_array ? "FILE.npy" : "VALUE");
            rc = first(rc, KERNC_EXIT_USER);
            continue;
        }
        b->used = true;
        if (!p.is_array) {
            const char *why;
            if (!kernc_parse_scalar(b->value, p.dtype, &args[i], &why)) {
                rc = first(rc, fail(KERNC_EXIT_USER, "%s=%s: %s (parameter '%s' is %s)", p.name,
                                    b->value, why, p.name, kern_dtype_name(p.dtype)));
            }
            continue;
        }
        kern_npy arr;
        char err[512];
        if (kernc_is_inline(&p, b->value)) {
            int64_t n;
            void *data = kernc_parse_inline(&p, b->value, &n, err, sizeof err);
            st = data ? kern_buffer_create(ctx, p.dtype, p.rank, p.tail, data, &bufs[i])
                      : KERN_ERR_ARGUMENT;
            free(data);
            if (st != KERN_OK)
                rc = first(rc, fail(KERNC_EXIT_USER, "%s=%s: %s", p.name, b->value,
                                    data ? kern_context_last_error(ctx) : err));
            else
                args[i] = kern_arg_buffer(bufs[i]);
            continue;
        }
        st = kern_npy_read(b->value, &arr, err, sizeof err);
        if (st != KERN_OK) {
            rc = first(rc, fail(st == KERN_ERR_NOT_FOUND || st == KERN_ERR_IO ? KERNC_EXIT_IO
                                                                              : KERNC_EXIT_USER,
                                "%s=%s: %s", p.name, b->value, err));
            continue;
        }
        if (!kernc_npy_fields_match(&p, &arr, err, sizeof err)) {
            rc = first(rc, fail(KERNC_EXIT_USER, "%s=%s: %s", p.name, b->value, err));
            kern_npy_free(&arr);
            continue;
        }
        if (arr.dtype == KERN_U16 && p.dtype == KERN_BF16)
            arr.dtype = KERN_BF16; /* NumPy has no bfloat16: <u2 holds its bits */
        if (arr.dtype != p.dtype || arr.rank != p.rank) {
            fprintf(stderr,
                    "kernc: error: %s=%s: the file holds %s with %d dimension%s, but "
                    "parameter '%s' is ",
                    p.name, b->value, kern_dtype_name(arr.dtype), arr.rank,
                    arr.rank == 1 ? "" : "s", p.name);
            print_type(stderr, &p);
            fprintf(stderr, " (a .npy file of dtype '%s'%s)\n", kern_npy_descr(p.dtype),
                    p.dtype == KERN_BF16 ? ", the bits of bfloat16" : "");
            rc = first(rc, KERNC_EXIT_USER);
            kern_npy_free(&arr);
            continue;
        }
        if (!kernc_tail_fits(&p, arr.rank, arr.shape)) {
            fprintf(stderr, "kernc: error: %s=%s: the file's shape is (", p.name, b->value);
            for (int d = 0; d < arr.rank; d++)
                fprintf(stderr, "%s%lld", d ? ", " : "", (long long)arr.shape[d]);
            fprintf(stderr, "%s), but parameter '%s' is ", arr.rank == 1 ? "," : "", p.name);
            print_type(stderr, &p);
            fputc('\n', stderr);
            rc = first(rc, KERNC_EXIT_USER);
            kern_npy_free(&arr);
            continue;
        }
        st = kern_buffer_create(ctx, arr.dtype, arr.rank, arr.shape, arr.data, &bufs[i]);
        kern_npy_free(&arr);
        if (st != KERN_OK) {
            rc = first(rc, fail(KERNC_EXIT_USER, "%s=%s: %s", p.name, b->value,
                                kern_context_last_error(ctx)));
            continue;
        }
        args[i] = kern_arg_buffer(bufs[i]);
    }
    for (int j = 0; j < nb; j++) {
        char hint[300];
        if (!bind[j].used)
            rc = first(rc,
                       fail(KERNC_EXIT_USER, "kernel '%s' has no parameter named '%s'%s", a->kernel,
                            bind[j].name, kernc_param_hint(hint, sizeof hint, k, bind[j].name)));
    }
    for (int j = 0; j < ns; j++) {
        int idx = -1;
        for (int i = 0; i < np; i++) {
            kern_param_info p;
            kern_kernel_param(k, i, &p);
            if (!strcmp(p.name, save[j].name))
                idx = p.is_array ? i : -2;
        }
        char hint[300];
        if (idx == -1)
            rc = first(rc,
                       fail(KERNC_EXIT_USER, "--save %s: kernel '%s' has no parameter named '%s'%s",
                            save[j].name, a->kernel, save[j].name,
                            kernc_param_hint(hint, sizeof hint, k, save[j].name)));
        else if (idx == -2)
            rc = first(rc, fail(KERNC_EXIT_USER,
                                "--save %s: '%s' is a scalar; only arrays can be saved",
                                save[j].name, save[j].name));
    }
    if (rc)
        goto cleanup;
    double t_launch = now_ms();
    st = launch_run(a, ctx, mod, k, args, bufs, step_idx, is_grad, progress);
    kernc_progress_stop(progress);
    progress = NULL;
    if (st != KERN_OK) {
        rc = first(rc, fail(KERNC_EXIT_USER, "%s", kern_context_last_error(ctx)));
        /* a time loop that reads row t - 1 from t = 0 */
        if (a->steps && a->step_start == 0 && strstr(kern_context_last_error(ctx), "out of bounds"))
            fprintf(stderr,
                    "(the steps ran %s = 0, 1, ...; --steps A..B or --step-start S start them "
                    "elsewhere)\n",
                    a->step_arg);
        goto cleanup;
    }
    if (a->time)
        fprintf(stderr, "kernc run: %s: compile %.3f ms, run %.3f ms (%d launch%s, %d threads)\n",
                a->kernel, t_compiled - t0, now_ms() - t_launch, a->steps ? a->steps : 1,
                a->steps > 1 ? "es" : "", kern_context_threads(ctx));
    if (a->verbose)
        print_adstacks(ctx, a->kernel);
    for (int j = 0; j < ns; j++) {
        for (int i = 0; i < np; i++) {
            kern_param_info p;
            kern_kernel_param(k, i, &p);
            if (strcmp(p.name, save[j].name) != 0)
                continue;
            size_t bytes = kern_buffer_bytes(bufs[i]);
            void *data = malloc(bytes ? bytes : 1);
            int64_t shape[KERN_MAX_DIMS];
            for (int d = 0; d < KERN_MAX_DIMS; d++)
                shape[d] = kern_buffer_extent(bufs[i], d);
            char err[512] = "";
            kern_buf fields = {0}; /* a struct array is saved with its structured dtype */
            bool is_struct = kern_npy_struct_fields(p.type_name, &fields);
            st = kern_buffer_read(bufs[i], data, bytes);
            if (st == KERN_OK)
                st = kern_npy_write_fields(save[j].value, is_struct ? fields.data : NULL, p.dtype,
                                           p.rank, shape, data, err, sizeof err);
            else
                snprintf(err, sizeof err, "%s", kern_context_last_error(ctx));
            buf_free(&fields);
            free(data);
            if (st != KERN_OK)
                rc = first(
                    rc, fail(KERNC_EXIT_IO, "--save %s=%s: %s", save[j].name, save[j].value, err));
        }
    }
    if (ns == 0)
        for (int i = 0; i < np; i++)
            if (bufs[i]) {
                kern_param_info p;
                kern_kernel_param(k, i, &p);
                print_array(p.name, bufs[i]);
            }
cleanup:
    kernc_progress_stop(progress);
    if (bufs)
        for (int i = 0; i < np; i++)
            kern_buffer_release(bufs[i]);
    kern_module_release(mod);
    kern_context_release(ctx);
    for (int i = 0; i < nb + ns; i++)
        free(copies[i]);
    free(copies);
    free(bind);
    free(save);
    free(bufs);
    free(args);
    return rc;
}

/* ---- build -------------------------------------------------------------------------- */

/* An assembly file defining the metadata symbols of runtime/module.c. */
static bool write_meta_asm(const char *path, const char *meta, size_t len) {
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f, "\t.section .rodata\n\t.globl kern_module_meta\n\t.type kern_module_meta, "
               "@object\nkern_module_meta:\n");
    for (size_t i = 0; i < len; i++)
        fprintf(f, "%s%u%s", i % 32 == 0 ? "\t.byte " : ",", (unsigned char)meta[i],
                i % 32 == 31 || i + 1 == len ? "\n" : "");
    fprintf(f, "\t.byte 0\n\t.size kern_module_meta, %zu\n", len + 1);
    fprintf(f,
            "\t.globl kern_module_meta_size\n\t.p2align 3\n\t.type kern_module_meta_size, "
            "@object\nkern_module_meta_size:\n\t.quad %zu\n\t.size kern_module_meta_size, 8\n",
            len);
    fprintf(f, "\t.section .note.GNU-stack,\"\",@progbits\n");
    return fclose(f) == 0;
}

/* A GPU target's module file: metadata and code image (docs/gpu-abi.md). */
static int build_gpu(const kc_codegen *cg, const ir_module *m, const kc_options *o,
                     const char *out) {
    char err[2048] = "";
    size_t len = 0;
    char *code = cg->code(m, o, &len, err, sizeof err);
    if (!code)
        return fail(KERNC_EXIT_USER, "code generation for %s failed: %s", cg->t->name, err);
    kern_meta *meta = kc_meta_from_ir(m);
    kern_buf text = {0};
    kern_meta_print(&text, meta);
    kern_meta_free(meta);
    int rc = 0;
    if (!kc_write_module_file(out, cg->t->name, text.data ? text.data : "", text.len, code, len, err,
                              sizeof err))
        rc = fail(KERNC_EXIT_IO, "%s", err);
    buf_free(&text);
    free(code);
    return rc;
}

/* Runs $CC (split at spaces: "gcc -m64" is a driver and an option) with an argument vector,
 * never a shell, so no path is ever parsed as a command: CC -shared -o SO OBJ ASM -lm.
 * Returns its exit status (127: it could not be started). */
static int link_shared(const char *ccdrv, const char *so, const char *obj, const char *asmf) {
    char *words = strdup(ccdrv);
    char *argv[64];
    int n = 0;
    if (!words)
        return 127;
    for (char *w = strtok(words, " \t"); w && n < 56; w = strtok(NULL, " \t"))
        argv[n++] = w;
    if (n == 0) {
        free(words);
        return 127;
    }
    const char *rest[] = {"-shared", "-o", so, obj, asmf, "-lm"};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++)
        argv[n++] = (char *)rest[i];
    argv[n] = NULL;
    pid_t pid;
    int st = 127;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) == 0 && waitpid(pid, &st, 0) == pid)
        st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    else
        st = 127;
    free(words);
    return st;
}

int kernc_cmd_build(const char *file, const char *target, const char *out, const kc_options *o) {
    int rc = 0;
    if (!target)
        target = kern_target_cpu.name; /* the one target that needs no device to load */
    const kc_codegen *cg = codegen_of(target, o, &rc);
    if (!cg)
        return rc;
    if (!out)
        return fail(KERNC_EXIT_USAGE, "build: -o OUT is required");
    /* AOT modules carry K.grad wherever the global-access check allows it, and the
     * forward-mode kernels K.jvp and K.grad.jvp wherever forward mode can build them
     * (unless --no-jvp). */
    kc_options go = *o;
    go.grad = KC_GRAD_POSSIBLE;
    go.jvp = !o->no_jvp;
    go.grad_only = NULL;
    kc_ctx *cc = NULL;
    ir_module *m = compile_file(file, &go, &cc, &rc, NULL);
    if (!m) {
        kc_ctx_free(cc);
        return rc;
    }
    if (m->nkernels == 0)
        fprintf(stderr, "kernc build: warning: no kernels in %s: the module is empty\n", file);
    ir_foreach_kernel(k, m) {
        if (k->grad_error)
            fprintf(stderr, "kernc build: warning: no gradient '%s.grad' in the module: %s\n",
                    k->name, k->grad_error);
        if (k->jvp_error)
            fprintf(stderr,
                    "kernc build: warning: no forward-mode kernel '%s.jvp' in the module: %s\n",
                    k->name, k->jvp_error);
    }
    if (cg->code) {
        rc = build_gpu(cg, m, o, out);
        goto done;
    }
    char dir[] = "/tmp/kernc-build-XXXXXX";
    if (!mkdtemp(dir)) {
        rc = fail(KERNC_EXIT_IO, "cannot create a temporary directory: %s", strerror(errno));
        goto done;
    }
    char obj[64], asmf[64], so[64];
    snprintf(obj, sizeof obj, "%s/code.o", dir);
    snprintf(asmf, sizeof asmf, "%s/meta.s", dir);
    snprintf(so, sizeof so, "%s/module.so", dir); /* linked here, then written to OUT */
    char err[1024] = "";
    kern_meta *meta = kc_meta_from_ir(m);
    kern_buf text = {0};
    kern_meta_print(&text, meta);
    kern_meta_free(meta);
    if (!cg->object(m, o, obj, err, sizeof err)) {
        rc = fail(KERNC_EXIT_USER, "code generation failed: %s", err);
    } else if (!write_meta_asm(asmf, text.data ? text.data : "", text.len)) {
        rc = fail(KERNC_EXIT_IO, "cannot write '%s'", asmf);
    } else {
        const char *ccdrv = getenv("CC");
        if (!ccdrv || !*ccdrv)
            ccdrv = "cc";
        int st = link_shared(ccdrv, so, obj, asmf);
        size_t solen = 0;
        char *image = st == 0 ? kern_read_file(so, &solen) : NULL;
        if (st != 0)
            rc = fail(KERNC_EXIT_IO,
                      "linking the module failed (%s exited with status %d); kernc build "
                      "needs a C compiler driver ($CC or cc) to link shared objects",
                      ccdrv, st);
        else if (!image)
            rc = fail(KERNC_EXIT_IO, "cannot read the linked module: %s", strerror(errno));
        else
            rc = kernc_write_output(out, image, solen);
        free(image);
        remove(so);
    }
    buf_free(&text);
    remove(obj);
    remove(asmf);
    rmdir(dir);
done:
    ir_module_free(m);
    kc_ctx_free(cc);
    return rc;
}

int kernc_write_output(const char *path, const void *data, size_t len) {
    if (!path || !strcmp(path, "-")) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return fail(KERNC_EXIT_IO, "cannot write the standard output: %s", strerror(errno));
        return 0;
    }
    char err[1024];
    kern_outfile o;
    if (!kern_outfile_open(&o, path, err, sizeof err))
        return fail(KERNC_EXIT_IO, "%s", err);
    kern_outfile_write(&o, data, len);
    if (!kern_outfile_commit(&o, path, err, sizeof err))
        return fail(KERNC_EXIT_IO, "%s", err);
    return 0;
}

/* A binary code image (--emit=spirv) to a file or a non-terminal stdout. */
static int emit_binary(const kc_codegen *cg, const ir_module *m, const kc_options *o,
                       const char *out) {
    bool to_stdout = !out || !strcmp(out, "-");
    if (to_stdout && isatty(STDOUT_FILENO))
        return fail(KERNC_EXIT_USAGE, "--emit=spirv is binary: give -o FILE or redirect stdout");
    char err[2048] = "";
    size_t len = 0;
    char *code = cg->code(m, o, &len, err, sizeof err);
    if (!code)
        return fail(KERNC_EXIT_USER, "code generation for %s failed: %s", cg->t->name, err);
    int rc = kernc_write_output(out, code, len);
    free(code);
    return rc;
}

int kernc_cmd_emit_code(const char *file, const char *target, const char *kind, const char *out,
                        const char *kernel, const kc_options *o) {
    int rc = 0;
    const kc_codegen *cg = codegen_of(target, o, &rc);
    if (!cg)
        return rc;
    if (!kern_target_list_has(cg->t->emit_kinds, kind))
        return fail(KERNC_EXIT_USAGE, "--emit=%s is not code of target %s (it has: %s)", kind,
                    cg->t->name, cg->t->emit_kinds);
    kc_ctx *cc = NULL;
    ir_module *m = compile_file(file, o, &cc, &rc, NULL);
    if (!m) {
        kc_ctx_free(cc);
        return rc;
    }
    if (kernel) { /* --kernel K: the code of that kernel alone (K.grad, K.jvp: compiled so) */
        ir_kernel *keep = ir_kernel_find(m, kernel);
        if (!keep) {
            const char **names = kern_xmalloc(sizeof *names * ((size_t)m->nkernels + 1));
            int n = 0;
            ir_foreach_kernel(k, m) names[n++] = k->name;
            char hint[300];
            kernc_kernel_hint(hint, sizeof hint, kernel, names, n);
            free(names);
            ir_module_free(m);
            kc_ctx_free(cc);
            return fail(KERNC_EXIT_USER, "no kernel named '%s' in %s%s", kernel, file, hint);
        }
        keep->next = NULL; /* the kernels live in the module's arena: unlinking frees nothing */
        m->kernels = m->last_kernel = keep;
        m->nkernels = 1;
    }
    char err[2048] = "";
    if (kern_target_list_has(cg->t->binary_kinds, kind)) {
        rc = emit_binary(cg, m, o, out);
        ir_module_free(m);
        kc_ctx_free(cc);
        return rc;
    }
    char *text = cg->emit(m, o, kind, err, sizeof err);
    if (!text) {
        rc = fail(KERNC_EXIT_USER, "code generation for %s failed: %s", cg->t->name, err);
    } else {
        rc = kernc_write_output(out, text, strlen(text));
    }
    free(text);
    ir_module_free(m);
    kc_ctx_free(cc);
    return rc;
}

/* ---- gradcheck ---------------------------------------------------------------------- */

int kernc_cmd_gradcheck(const kernc_run_args *a, const gradcheck_options *o) {
    int rc = 0;
    const kc_codegen *cg = codegen_of(a->target, &a->opts, &rc);
    if (!cg)
        return rc;
    if (!a->kernel)
        return fail(KERNC_EXIT_USAGE,
                    "gradcheck: missing KERNEL (kernc gradcheck FILE.kern KERNEL ...)");
    size_t len;
    char *text = kc_read_source(a->file, &len);
    if (!text)
        return fail(KERNC_EXIT_IO, "cannot read '%s': %s", a->file, strerror(errno));
    gradcheck_options go = *o;
    go.copts = a->opts;
    go.backend = cg->t->backend;
    go.step_start = a->step_start;
    go.device = a->device;
    gradcheck_result res;
    gradcheck_status st = gradcheck_source(a->file, text, len, a->kernel, a->bindings, a->nbindings,
                                           &go, &res, stderr);
    free(text);
    if (st == GRADCHECK_IO)
        return KERNC_EXIT_IO;
    if (st == GRADCHECK_USAGE)
        return KERNC_EXIT_USAGE;
    if (st != GRADCHECK_OK)
        return KERNC_EXIT_USER;
    gradcheck_print(stdout, a->kernel, &go, &res);
    return res.ok ? 0 : KERNC_EXIT_USER;
}
