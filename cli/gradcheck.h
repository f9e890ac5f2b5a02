/* gradcheck.h - checks a kernel's gradient (and its forward-mode kernel K.jvp) against
 * finite differences (reference section 10):
 * the engine of `kernc gradcheck` (cli/gradcheck.c), usable from tests as well.
 *
 * The kernel K is compiled twice: once with every f32 promoted to f64 (ad_promote_f64),
 * once as written, both with K.grad. Inputs are random (or bound), the loss is
 * L = sum over differentiable array parameters p of w_p . (p after K) with random weights
 * w_p, and for a sample of the input elements of every differentiable parameter the f64
 * central difference (L(x + h) - L(x - h)) / 2h is compared with K.grad's value in f64
 * and in the kernel's own precision. Links the compiler, the JIT and the runtime. */
#ifndef KERN_GRADCHECK_H
#define KERN_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/context.h"

typedef struct gradcheck_options {
    kc_options copts; /* compiler options; debug, grad, grad_only, promote_f64 are set here */
    uint64_t seed;    /* of the random inputs and weights (default 1) */
    int size;         /* extent of every dimension of an unbound array, and the value of an
                         unbound integer scalar (default 8) */
    double eps;       /* step h = eps * max(1, |x|) (default 1e-6) */
    double rtol;      /* tolerance of the f64 gradient (default 1e-6) */
    double rtol_f32;  /* tolerance of the gradient as written, f32 (default 1e-2) */
    int max_checks;   /* elements checked at most, sampled evenly (default 200) */
    int backend;      /* the kern_backend K and K.grad run on (default cpu) */
    int64_t ad_budget; /* kern_context_options.ad_memory_budget (0: the default) */
    int ad_strategy;   /* kern_context_options.ad_strategy (0: auto, or $KERN_AD_STRATEGY) */
    int steps;         /* > 0: K is a sequence of `steps` launches with the integer scalar
                         parameter step_arg = step_start .. step_start + steps - 1, its
                         gradient through the tape */
    int64_t step_start; /* the first step's value (--steps A..B, --step-start; default 0) */
    const char *step_arg;
    int device; /* kern_context_options.device (-1, the default: the backend's) */
} gradcheck_options;

void gradcheck_options_default(gradcheck_options *o);

/* Whether s is written as docs/cli.md says an integer binding is: an optional '-', then
 * decimal digits without a leading zero (0 itself excepted) or 0x and hex digits. Leading
 * zeros are refused, as in the language: "010" is never octal 8. */
bool kernc_int_syntax(const char *s);

/* Relative error of an analytic value a against a finite difference f, as gradcheck
 * measures it: |a - f| / max(|a|, |f|, GRADCHECK_FLOOR); 0 when both are the same
 * infinity or both NaN, +inf when only one is not finite. */
#define GRADCHECK_FLOOR 1e-3
double gradcheck_relerr(double a, double f);

typedef struct gradcheck_worst {
    double err;      /* relative error */
    double analytic; /* K.grad's value */
    double fd;       /* the central difference */
    char where[96];  /* "x[3]", "w[1, 2]", "s" */
} gradcheck_worst;

typedef struct gradcheck_result {
    int elements;             /* elements checked */
    gradcheck_worst f64, f32; /* the worst element of each precision */
    char primal_written[64];  /* a primal array that K.grad changed ("" when none: the reference's
                                  section 8 says it never does) */
    int nonsmooth;            /* elements beyond tolerance where a step of +-h changed the
                                 iteration count of a loop of K: not compared */
    char nonsmooth_at[96];    /* the first of them */
    struct {                  /* K.jvp (forward mode, reference section 11.6) */
        bool checked;         /* false when forward mode refused K: skipped says why */
        char skipped[512];
        int elements;             /* tangent elements of the state after, compared */
        gradcheck_worst f64, f32; /* against central differences along the tangent v */
        double dot_jvp, dot_grad; /* <K.jvp(v), w> and <v, K.grad(w)>, f64 */
        double dot_err;           /* their relative difference */
        bool nonsmooth;           /* the differences along v crossed a point where a loop's
                                     trip count changes: only the identity is required */
    } jvp;
    bool ok; /* both within their tolerance, no primal array written, and
                                 at least one element compared; K.jvp (when checked) within
                                 the same tolerances and the dot-product identity within 1e-9 */
} gradcheck_result;

typedef enum gradcheck_status {
    GRADCHECK_OK = 0,    /* ran; res->ok tells whether it passed */
    GRADCHECK_USER = 1,  /* an error in the program or the bindings (reported on err) */
    GRADCHECK_USAGE = 2, /* a malformed or repeated binding, a bad option value */
    GRADCHECK_IO = 3,    /* a file could not be read (reported on err) */
} gradcheck_status;

/* Checks K.grad of kernel `kernel` (K or K.grad) of source text (path names it in
 * diagnostics). bindings are NAME=VALUE strings as for `kernc run`: numbers for scalars,
 * .npy paths for arrays, and P.grad=PATH.npy for the weights w_P of array P. Diagnostics
 * and errors are printed on err (NULL: nowhere). */
gradcheck_status gradcheck_source(const char *path, const char *text, size_t len,
                                  const char *kernel, const char *const *bindings, int nbindings,
                                  const gradcheck_options *o, gradcheck_result *res, FILE *err);

/* The one-line verdict: "gradcheck K: N elements, worst relative error ... : ok\n",
 * followed on failure by the worst element of each precision. */
void gradcheck_print(FILE *f, const char *kernel, const gradcheck_options *o,
                     const gradcheck_result *res);

#endif
