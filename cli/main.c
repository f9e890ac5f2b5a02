/* main.c - the `kernc` command line (docs/cli.md, docs/reference.md section 10).
 *
 *   kernc check FILE.kern
 *   kernc emit FILE.kern --emit=WHAT [-o OUT] [--target=T] [--kernel NAME]
 *   kernc build FILE.kern --target=T -o OUT
 *   kernc run FILE.kern KERNEL [NAME=VALUE ...] [--save NAME=PATH.npy ...]
 *   kernc gradcheck FILE.kern KERNEL [NAME=VALUE ...] [--seed N] [--size N] [--eps E]
 *                   [--rtol R] [--rtol-f32 R] [--max-checks N]
 *   kernc help [COMMAND], kernc --version
 *
 * Exit status: 0 success, 1 a user error in the program (diagnostics printed), 2 a bad
 * command line or a request this build cannot carry out, 3 an I/O error. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/codegen.h"
#include "../backends/llvm/llvm_backend.h"
#include "../common/context.h"
#include "../common/env.h"
#include "../common/suggest.h"
#include "../common/target.h"
#include "../common/util.h"
#include "../compiler/ast.h"
#include "../compiler/driver.h"
#include "cmds.h"

enum { EXIT_USER = 1, EXIT_USAGE = 2, EXIT_IO = 3 };

typedef struct cli {
    const char *cmd;
    const char *file;
    const char **positional; /* KERNEL and NAME=VALUE bindings (room for every argument) */
    int npositional;
    const char *emit;
    const char *out;
    const char *target;
    const char *kernel;
    const char **saves; /* --save NAME=PATH (room for every argument) */
    int nsaves;
    kc_options opts;
    gradcheck_options gc;
    const char *gc_option;  /* the first gradcheck option seen (only gradcheck takes them) */
    const char *run_option; /* the first option of run (and gradcheck) only: --threads, ... */
    bool help;              /* --help after the command: that command's usage */
    bool no_checks;         /* --no-checks: no bounds, division and shift checks */
    bool no_cache;          /* --no-cache: no compile cache */
    int threads;            /* run: --threads N (0: the online CPUs) */
    int64_t ad_budget;      /* run, gradcheck: --ad-memory-budget */
    int ad_strategy;        /* run, gradcheck: --ad-strategy */
    bool verbose;           /* run: --verbose */
    const char *ad_option;  /* the first option of run and gradcheck only: --ad-strategy, ... */
    bool no_ckpt;           /* build: --no-ckpt ($KERN_NO_CKPT sets opts.no_ckpt everywhere) */
    bool time;              /* run: --time */
    int steps;              /* run, gradcheck: --steps N or A..B (0: one launch, no step
                               argument) */
    int64_t step_start;     /* run, gradcheck: --step-start S, or A of --steps A..B */
    bool step_start_set;    /* --step-start was given */
    bool step_range;        /* --steps A..B (range_start: A) was given, the last --steps */
    int64_t range_start;
    const char *step_arg;   /* run, gradcheck: --step-arg NAME */
    int device;             /* run, gradcheck: --device N (-1: the target's default) */
} cli;

static const char *const commands[] = {"check", "emit", "build", "run", "gradcheck", "help"};

/* Every option parse_cli takes (for the suggestions of an unknown one). */
static const char options[] =
    "--debug, --no-grad-check, --no-ckpt, --fast-math, --no-jvp, -O0, -O1, -O2, -O3, --emit, "
    "--target, --simd, --arch, --libdevice, --kernel, -o, --save, --ad-stack-size, --seed, "
    "--size, --max-checks, --eps, --rtol-f32, --rtol, --no-checks, --time, --verbose, "
    "--ad-memory-budget, --ad-strategy, --threads, --steps, --step-start, --step-arg, --help, "
    "-h, --version";

/* An option's name: arg up to an '=' (malloc'd). */
static char *option_name(const char *arg) {
    size_t n = strcspn(arg, "=");
    char *name = kern_xmalloc(n + 1);
    memcpy(name, arg, n);
    name[n] = 0;
    return name;
}

/* kern_suggest_hint over the words of a comma-separated list ("cpu, cuda, vulkan"). */
static const char *hint_in_list(char *buf, size_t size, const char *word, const char *list) {
    char *copy = kern_xmalloc(strlen(list) + 1);
    const char *names[64];
    size_t n = 0;
    strcpy(copy, list);
    for (char *w = strtok(copy, ", "); w && n < 64; w = strtok(NULL, ", "))
        names[n++] = w;
    kern_suggest_hint(buf, size, word, names, n);
    free(copy);
    return buf;
}

static void usage(FILE *f) {
    fputs("usage: kernc COMMAND [options]\n"
          "\n"
          "commands:\n"
          "  check FILE.kern                 parse and type-check, print diagnostics\n"
          "  emit FILE.kern --emit=WHAT      print a compiler stage: ast, ir, ir-grad, ir-jvp,\n"
          "       [-o OUT] [--kernel NAME]   llvm, ptx (CUDA's assembly), amdgcn (AMDGPU's),\n"
          "                                  spirv, spirv-asm (Vulkan's binary and text),\n"
          "                                  msl (Metal's source, through SPIRV-Cross)\n"
          "       [--target=T] [--arch=A]\n"
          "  build FILE.kern [--target=T] -o OUT [--arch=A]\n"
          "  run FILE.kern KERNEL [NAME=VALUE ...] [--save NAME=PATH.npy ...]\n"
          "       [--threads N] [--time] [--no-checks] [--steps N|A..B --step-arg NAME]\n"
          "  gradcheck FILE.kern KERNEL [NAME=VALUE ...]\n"
          "       [--seed N] [--size N] [--eps E] [--rtol R] [--rtol-f32 R] [--max-checks N]\n"
          "  help [COMMAND]                  this text, or the options of one command\n"
          "\n"
          "compiler options (every command that compiles):\n"
          "  -O0 .. -O3                      optimization level (default -O2)\n"
          "  --no-checks                     no bounds, division and shift checks (checked by\n"
          "                                  default: SIMD and GPU code stay fast)\n"
          "  --debug                         a debug build: the checks and scalar CPU code\n"
          "  --ad-stack-size N               adstack capacity of unbounded loops (default 1024)\n"
          "  --no-grad-check                 global-access check of K.grad warns, not fails\n"
          "  --fast-math                     GPU targets: the fast approximations of f32 sin,\n"
          "                                  exp, log, pow, ... (CUDA's __sinf class, Vulkan's\n"
          "                                  own) instead of kern's accuracy table, and a * b + c\n"
          "                                  fused into one fma\n"
          "  --simd=S                        CPU: SIMD lanes of parallel tasks: auto (default:\n"
          "                                  $KERN_SIMD, else the host's widest vectors, 1 to\n"
          "                                  4 of them per task),\n"
          "                                  off, sse (4), avx2 (8), avx512 (16), 4 .. 64\n"
          "  --target=T                      the target (default cpu; run and gradcheck: a\n"
          "                                  target with a device, $KERN_VULKAN_DEVICE picks\n"
          "                                  Vulkan's); the targets and their --emit kinds:\n",
          f);
    /* the targets, their code and architectures: the registry's (common/target.h) */
    size_t n;
    const kern_target *const *t = kern_target_list(&n);
    char arches[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const kc_codegen *cg = kc_codegen_find(t[i]->name);
        fprintf(f, "                                    %-7s %s\n", t[i]->name, t[i]->about);
        if (cg)
            fprintf(f, "                                            --emit: %s\n",
                    t[i]->emit_kinds);
        else if (*t[i]->emit_kinds)
            fprintf(f, "                                            (not in this build)\n");
        if (cg && t[i]->default_arch && len < sizeof arches)
            len += (size_t)snprintf(arches + len, sizeof arches - len, "%s%s: default %s",
                                    len ? ", " : "", t[i]->name, t[i]->default_arch);
    }
    fprintf(f, "  --arch=A                        GPU architecture (%s)\n", arches);
    fputs("  --libdevice=PATH                CUDA's libdevice.10.bc (default: $KERN_LIBDEVICE,\n"
          "                                  then the CUDA install locations)\n"
          "\n"
          "  --help, --version               COMMAND --help: the options of one command;\n"
          "                                  --version: kern's, LLVM's, the targets\n"
          "exit status: 0 success, 1 error in the program, 2 bad command line, 3 I/O error\n",
          f);
}

/* `kernc COMMAND --help`: that command's synopsis and options. */
static const struct {
    const char *cmd, *text;
} command_help[] = {
    {"check", "usage: kernc check FILE.kern [compiler options]\n"
              "  parse and type-check FILE.kern; print every diagnostic (exit 1 on an error)\n"},
    {"emit", "usage: kernc emit FILE.kern --emit=WHAT [-o OUT] [--kernel NAME] [--target=T]\n"
             "       [--arch=A] [compiler options]\n"
             "  WHAT: ast, ir, ir-grad, ir-jvp, or the code of a target: llvm (cpu, or\n"
             "        --target's), ptx (cuda), amdgcn (amdgpu), spirv, spirv-asm, msl (vulkan;\n"
             "        kernc --help lists every target's)\n"
             "  -o OUT         write to OUT (default: standard output)\n"
             "  --kernel NAME  only this kernel (ast: or func; ir: K.grad is ir-grad, K.jvp and\n"
             "                 K.grad.jvp are ir-jvp)\n"},
    {"build", "usage: kernc build FILE.kern [--target=T] -o OUT [--arch=A] [--no-jvp] [--no-ckpt]\n"
              "       [compiler options]\n"
              "  an ahead-of-time module: cpu (the default) a shared object, cuda, vulkan and\n"
              "  amdgpu a module file, with K.grad, K.jvp and K.grad.jvp of each kernel; those\n"
              "  that cannot be built are named, with why\n"
              "  --no-jvp       leave K.jvp and K.grad.jvp out (a smaller, faster build)\n"
              "  --no-ckpt      leave K.grad.ckpt out: K.grad then stores every iteration or\n"
              "                 runs with fewer slots under the memory budget\n"},
    {"run", "usage: kernc run FILE.kern KERNEL [NAME=VALUE ...] [--save NAME=PATH.npy ...]\n"
            "       [--target=T] [--threads N] [--time] [--no-checks] [--verbose]\n"
            "       [--steps N|A..B --step-arg NAME [--step-start S]] [--ad-memory-budget B]\n"
            "       [--ad-strategy S] [--no-cache] [--device N] [compiler options]\n"
            "  without KERNEL: the file's kernels and their parameters (status 2)\n"
            "  NAME=VALUE      a number for a scalar, a .npy file for an array; unbound\n"
            "                  adjoints of K.grad start as zeros of the primal's shape\n"
            "  --save N=P.npy  write array N after the run\n"
            "  --threads N     CPU worker threads (default: the online CPUs)\n"
            "  --time          print the compile and launch times on standard error\n"
            "  --no-checks     no bounds, division and shift checks (checked by default)\n"
            "  --no-cache      compile without the compile cache (docs/runtime.md)\n"
            "  --steps N       launch N times with --step-arg NAME = 0 .. N-1; K.grad runs\n"
            "                  the gradient of the whole sequence through the tape\n"
            "  --steps A..B    launch B - A times with NAME = A .. B-1 (as `for t in A..B`)\n"
            "  --step-start S  with --steps N: NAME = S .. S+N-1\n"
            "  a run past 1 s reports its progress on standard error when that is a\n"
            "  terminal ($KERNC_PROGRESS: off, or a delay in seconds to report anywhere)\n"
            "  --ad-memory-budget B  bytes K.grad's adstacks may take (K, M, G, T suffixes;\n"
            "                  default: 3/4 of the device's free memory)\n"
            "  --ad-strategy S auto (the default), store, slots or recompute\n"
            "  --verbose       how each gradient launch kept its adstacks, on standard error\n"
            "  --device N      the target's device N (run and gradcheck; default: CUDA's 0,\n"
            "                  Vulkan's most capable or $KERN_VULKAN_DEVICE)\n"},
    {"gradcheck",
     "usage: kernc gradcheck FILE.kern KERNEL [NAME=VALUE ...] [--seed N] [--size N]\n"
     "       [--eps E] [--rtol R] [--rtol-f32 R] [--max-checks N]\n"
     "       [--steps N|A..B --step-arg NAME [--step-start S]] [--target=T]\n"
     "       [--device N] [compiler options]\n"
     "  K.grad, run on the state K left, against central finite differences in f64\n"
     "  --seed N        random inputs and weights (default 1)\n"
     "  --size N        extent of unbound arrays without a bound one of their rank (8)\n"
     "  --eps E         step h = E * max(1, |x|) (default 1e-6)\n"
     "  --rtol R        tolerance of the f64 gradient (default 1e-6)\n"
     "  --rtol-f32 R    tolerance of the gradient as written (default 1e-2)\n"
     "  --max-checks N  elements checked at most (default 200)\n"
     "  --steps N       check the sequence of N launches (--step-arg NAME = 0 .. N-1)\n"
     "  --steps A..B    the sequence NAME = A .. B-1 (heat.kern: --steps 1..8 --step-arg t)\n"
     "  --step-start S  with --steps N: NAME = S .. S+N-1\n"
     "  without KERNEL: the file's kernels and their parameters (status 2)\n"},
};

static int usage_error(const char *fmt, const char *arg);

/* An unknown command (status 2), with the nearest known one, else the list of them. */
static int unknown_command(const char *cmd) {
    char hint[300], msg[400];
    kern_suggest_hint(hint, sizeof hint, cmd, commands, sizeof commands / sizeof *commands);
    snprintf(msg, sizeof msg, "unknown command '%%s'%s",
             *hint ? hint : " (commands: check, emit, build, run, gradcheck, help)");
    return usage_error(msg, cmd);
}

/* `kernc CMD --help`, `kernc help CMD`; `kernc help help` and `kernc help` are kernc's. */
static int command_usage(const char *cmd) {
    for (size_t i = 0; i < sizeof command_help / sizeof *command_help; i++)
        if (!strcmp(cmd, command_help[i].cmd)) {
            fputs(command_help[i].text, stdout);
            fputs("compiler options: -O0..-O3, --debug, --ad-stack-size N, --no-grad-check "
                  "(kernc --help)\n",
                  stdout);
            return fflush(stdout) ? EXIT_IO : 0;
        }
    if (strcmp(cmd, "help") != 0)
        return unknown_command(cmd);
    usage(stdout);
    return 0;
}

/* Every --emit kind: the compiler's stages, then each target's code once, in the
 * registry's order ("ast, ir, ir-grad, ir-jvp, llvm, ..."); into buf, returned. */
static char *emit_kinds(char *buf, size_t size) {
    size_t n, len = (size_t)snprintf(buf, size, "ast, ir, ir-grad, ir-jvp");
    const kern_target *const *t = kern_target_list(&n);
    for (size_t i = 0; i < n; i++)
        for (const char *k = t[i]->emit_kinds; *k && len < size; k += strspn(k, ", ")) {
            char word[32];
            size_t w = strcspn(k, ",");
            snprintf(word, sizeof word, "%.*s", (int)w, k);
            k += w;
            if (kern_target_of_emit(word) == t[i]) /* llvm: cpu's, listed once */
                len += (size_t)snprintf(buf + len, size - len, ", %s", word);
        }
    return buf;
}

/* The usage error of fmt with one %s (arg, which may be long: printed as it is). */
static int usage_error(const char *fmt, const char *arg) {
    fputs("kernc: error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nkernc: run 'kernc --help' for usage\n", stderr);
    return EXIT_USAGE;
}

/* Option values come as --opt=value or --opt value. Returns the value or NULL. */
static const char *opt_value(const char *arg, const char *name, int argc, char **argv, int *i,
                             bool *matched) {
    size_t n = strlen(name);
    *matched = false;
    if (strncmp(arg, name, n) != 0)
        return NULL;
    if (arg[n] == '=') {
        *matched = true;
        return arg + n + 1;
    }
    if (arg[n] != 0)
        return NULL;
    *matched = true;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static bool parse_double(const char *s, double *out) {
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v > 0) || v == HUGE_VAL)
        return false;
    *out = v;
    return true;
}

static bool parse_uint(const char *s, unsigned long long max, unsigned long long *out) {
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max || s[0] == '-')
        return false;
    *out = v;
    return true;
}

/* A byte count: digits, then an optional K, M, G or T (powers of 2^10); positive, below
 * 2^63. */
static bool parse_bytes(const char *s, int64_t *out) {
    if (!s || !*s || s[0] == '-')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end && !end[1]) {
        const char *units = "KMGT", *u = strchr(units, *end);
        if (!u)
            return false;
        shift = 10 * (int)(u - units + 1);
        end++;
    }
    if (errno || *end || end == s || v == 0 || v > (unsigned long long)INT64_MAX >> shift)
        return false;
    *out = (int64_t)(v << shift);
    return true;
}

/* --steps N, or A..B (the steps A .. B-1, as the language's `for t in A..B`), into c. */
static bool parse_steps(const char *v, cli *c) {
    unsigned long long a, b;
    const char *dots = v ? strstr(v, "..") : NULL;
    if (!dots) {
        if (!parse_uint(v, 1 << 24, &b) || b == 0)
            return false;
        c->steps = (int)b;
        c->step_range = false;
        return true;
    }
    char *first = kern_xmalloc((size_t)(dots - v) + 1);
    memcpy(first, v, (size_t)(dots - v));
    first[dots - v] = 0;
    bool ok = parse_uint(first, INT32_MAX, &a) && parse_uint(dots + 2, INT32_MAX, &b) && a < b &&
              b - a <= 1 << 24;
    free(first);
    if (!ok)
        return false;
    c->steps = (int)(b - a);
    c->range_start = (int64_t)a;
    c->step_range = true;
    return true;
}

/* Parses argv into c; returns 0 or an exit status. The caller frees c->positional and
 * c->saves. */
static int parse_cli(int argc, char **argv, cli *c) {
    memset(c, 0, sizeof *c);
    c->positional = kern_xmalloc((size_t)argc * sizeof *c->positional);
    c->saves = kern_xmalloc((size_t)argc * sizeof *c->saves);
    kc_options_default(&c->opts);
    gradcheck_options_default(&c->gc);
    c->device = -1;
    c->cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool m;
        const char *v;
        if (a[0] != '-' || a[1] == 0) {
            if (!c->file)
                c->file = a;
            else
                c->positional[c->npositional++] = a;
            continue;
        }
        if (!strcmp(a, "--debug")) {
            c->opts.debug = true;
        } else if (!strcmp(a, "--no-grad-check")) {
            c->opts.no_grad_check = true;
        } else if (!strcmp(a, "--no-ckpt")) {
            c->opts.no_ckpt = c->no_ckpt = true;
        } else if (!strcmp(a, "--fast-math")) {
            c->opts.fast_math = true;
        } else if (!strcmp(a, "--no-jvp")) {
            c->opts.no_jvp = true;
        } else if (a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && a[3] == 0) {
            c->opts.opt_level = a[2] - '0';
        } else if ((v = opt_value(a, "--emit", argc, argv, &i, &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--emit");
            c->emit = v;
        } else if ((v = opt_value(a, "--target", argc, argv, &i, &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--target");
            c->target = v;
        } else if ((v = opt_value(a, "--simd", argc, argv, &i, &m)) || m) {
            if (!v || !kc_parse_simd(v, &c->opts.simd))
                return usage_error("--simd takes auto, off, sse, avx2, avx512, 4, 8, 16, 32 or 64 "
                                   "(got '%s')",
                                   v ? v : "");
        } else if ((v = opt_value(a, "--arch", argc, argv, &i, &m)) || m) {
            if (!v || !*v)
                return usage_error("%s needs a value", "--arch");
            c->opts.arch = v;
        } else if ((v = opt_value(a, "--libdevice", argc, argv, &i, &m)) || m) {
            if (!v || !*v)
                return usage_error("%s needs a value", "--libdevice");
            c->opts.libdevice = v;
        } else if ((v = opt_value(a, "--kernel", argc, argv, &i, &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--kernel");
            c->kernel = v;
        } else if ((v = opt_value(a, "-o", argc, argv, &i, &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "-o");
            c->out = v;
        } else if ((v = opt_value(a, "--save", argc, argv, &i, &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--save");
            c->saves[c->nsaves++] = v;
        } else if ((v = opt_value(a, "--ad-stack-size", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, 1ull << 31, &n) || n == 0)
                return usage_error("--ad-stack-size needs a positive integer up to 2^31, "
                                   "got '%s'",
                                   v ? v : "");
            c->opts.ad_stack_size = (uint32_t)n;
        } else if ((v = opt_value(a, "--seed", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, UINT64_MAX, &n))
                return usage_error("--seed needs a non-negative integer, got '%s'", v ? v : "");
            c->gc.seed = n;
            c->gc_option = "--seed";
        } else if ((v = opt_value(a, "--size", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, 1 << 20, &n) || n == 0)
                return usage_error("--size needs a positive integer up to 2^20, got '%s'",
                                   v ? v : "");
            c->gc.size = (int)n;
            c->gc_option = "--size";
        } else if ((v = opt_value(a, "--max-checks", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, 1 << 30, &n) || n == 0)
                return usage_error("--max-checks needs a positive integer, got '%s'", v ? v : "");
            c->gc.max_checks = (int)n;
            c->gc_option = "--max-checks";
        } else if ((v = opt_value(a, "--eps", argc, argv, &i, &m)) || m) {
            if (!parse_double(v, &c->gc.eps))
                return usage_error("--eps needs a positive number, got '%s'", v ? v : "");
            c->gc_option = "--eps";
        } else if ((v = opt_value(a, "--rtol-f32", argc, argv, &i, &m)) || m) {
            if (!parse_double(v, &c->gc.rtol_f32))
                return usage_error("--rtol-f32 needs a positive number, got '%s'", v ? v : "");
            c->gc_option = "--rtol-f32";
        } else if ((v = opt_value(a, "--rtol", argc, argv, &i, &m)) || m) {
            if (!parse_double(v, &c->gc.rtol))
                return usage_error("--rtol needs a positive number, got '%s'", v ? v : "");
            c->gc_option = "--rtol";
        } else if (!strcmp(a, "--no-checks")) {
            c->no_checks = true;
        } else if (!strcmp(a, "--no-cache")) {
            c->no_cache = true;
            c->run_option = "--no-cache";
        } else if (!strcmp(a, "--time")) {
            c->time = true;
            c->run_option = "--time";
        } else if (!strcmp(a, "--verbose")) {
            c->verbose = true;
            c->run_option = "--verbose";
        } else if ((v = opt_value(a, "--ad-memory-budget", argc, argv, &i, &m)) || m) {
            c->ad_option = "--ad-memory-budget";
            if (!parse_bytes(v, &c->ad_budget))
                return usage_error("--ad-memory-budget needs a positive number of bytes (a "
                                   "suffix K, M, G or T multiplies by 2^10 ...), got '%s'",
                                   v ? v : "");
        } else if ((v = opt_value(a, "--ad-strategy", argc, argv, &i, &m)) || m) {
            static const char *const names[] = {"auto", "store", "slots", "recompute"};
            c->ad_option = "--ad-strategy";
            c->ad_strategy = -1;
            for (int n = 0; v && n < 4; n++)
                if (!strcmp(v, names[n]))
                    c->ad_strategy = n;
            if (c->ad_strategy < 0)
                return usage_error("--ad-strategy needs auto, store, slots or recompute, got "
                                   "'%s'",
                                   v ? v : "");
        } else if ((v = opt_value(a, "--threads", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, 4096, &n) || n == 0)
                return usage_error("--threads needs a positive integer up to 4096, got '%s'",
                                   v ? v : "");
            c->threads = (int)n;
            c->run_option = "--threads";
        } else if ((v = opt_value(a, "--device", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, 1023, &n))
                return usage_error("--device needs a device number from 0 to 1023, got '%s'",
                                   v ? v : "");
            c->device = (int)n;
            c->ad_option = "--device";
        } else if ((v = opt_value(a, "--steps", argc, argv, &i, &m)) || m) {
            if (!parse_steps(v, c))
                return usage_error("--steps needs N (a positive integer up to 2^24) or A..B (0 <= "
                                   "A < B < 2^31, at most 2^24 steps), got '%s'",
                                   v ? v : "");
        } else if ((v = opt_value(a, "--step-start", argc, argv, &i, &m)) || m) {
            unsigned long long n;
            if (!parse_uint(v, INT32_MAX, &n))
                return usage_error("--step-start needs a non-negative integer below 2^31, got "
                                   "'%s'",
                                   v ? v : "");
            c->step_start = (int64_t)n;
            c->step_start_set = true;
        } else if ((v = opt_value(a, "--step-arg", argc, argv, &i, &m)) || m) {
            if (!v || !*v)
                return usage_error("%s needs a value", "--step-arg");
            c->step_arg = v;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            c->help = true;
        } else {
            /* the nearest option, by its name before any =VALUE */
            char hint[300], msg[400];
            char *name = option_name(a);
            hint_in_list(hint, sizeof hint, name, options);
            free(name);
            snprintf(msg, sizeof msg, "unknown option '%%s'%s", hint);
            return usage_error(msg, a);
        }
    }
    if (c->target && !kern_target_find(c->target)) {
        char names[128], msg[512], hint[300];
        kern_target_names(0, names, sizeof names);
        if (*hint_in_list(hint, sizeof hint, c->target, names))
            snprintf(msg, sizeof msg, "unknown target '%%s'%s", hint);
        else
            snprintf(msg, sizeof msg, "unknown target '%%s' (targets: %s)", names);
        return usage_error(msg, c->target);
    }
    return 0;
}

typedef struct loaded {
    char *text;
    size_t len;
} loaded;

static int load_file(const char *path, loaded *l) {
    l->text = kc_read_source(path, &l->len);
    if (!l->text) {
        fprintf(stderr, "kernc: error: cannot read '%s': %s\n", path, strerror(errno));
        return EXIT_IO;
    }
    return 0;
}

static bool item_exists(const fe_file *f, const char *name) {
    for (int i = 0; i < f->nitems; i++)
        if (f->items[i]->kind != IT_CONST && !strcmp(f->items[i]->name, name))
            return true;
    return false;
}

static int cmd_check(cli *c, kc_ctx *ctx, loaded *l) {
    fe_file *f = kc_check_source(ctx, c->file, l->text, l->len);
    diag_print_all(stderr, &ctx->diags);
    bool kernels = false;
    for (int i = 0; f && i < f->nitems; i++)
        kernels |= f->items[i]->kind == IT_KERNEL;
    if (f && !kernels) /* valid, but nothing to build or run */
        fprintf(stderr, "kernc: warning: no kernels in %s\n", c->file);
    return f ? 0 : EXIT_USER;
}

static bool has_suffix(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && !strcmp(name + n - k, suffix);
}

/* A derived kernel's name: K.grad, K.jvp, K.grad.jvp. */
static bool is_grad_name(const char *name) {
    return has_suffix(name, ".grad") || has_suffix(name, ".jvp");
}

/* kernc_kernel_hint over the kernels of m. */
static const char *ir_kernel_hint(char *buf, size_t size, const ir_module *m, const char *kernel) {
    const char **names = kern_xmalloc(sizeof *names * ((size_t)m->nkernels + 1));
    int n = 0;
    ir_foreach_kernel(k, m) names[n++] = k->name;
    kernc_kernel_hint(buf, size, kernel, names, n);
    free(names);
    return buf;
}

/* --emit=ir-grad / ir-jvp: the derived kernels only (of --kernel K, given as K or as the
 * derived kernel's name: K.grad; K.jvp or K.grad.jvp). */
static int emit_ir_derived(cli *c, kc_ctx *ctx, loaded *l, kern_buf *out, const char *suffix) {
    char *want = NULL;
    bool jvp = !strcmp(suffix, ".jvp");
    if (c->kernel) {
        size_t n = strlen(c->kernel);
        want = malloc(n + 6);
        bool ckpt = !jvp && has_suffix(c->kernel, ".grad.ckpt"); /* asked for by name */
        snprintf(want, n + 6, "%s%s", c->kernel,
                 has_suffix(c->kernel, suffix) || ckpt ? "" : suffix);
    }
    if (jvp) { /* forward mode only: no K.grad unless K.grad.jvp is asked for */
        ctx->opts.grad = want && has_suffix(want, ".grad.jvp") ? KC_GRAD_ALL : KC_GRAD_NONE;
        ctx->opts.jvp = true;
    } else {
        ctx->opts.grad = KC_GRAD_ALL;
    }
    ctx->opts.grad_only = want;
    ir_module *m = kc_compile_source(ctx, c->file, l->text, l->len);
    int rc = 0;
    if (!m) {
        rc = EXIT_USER;
    } else if (want && !ir_kernel_find(m, want)) {
        size_t n = strlen(want) - strlen(suffix);
        if (jvp && has_suffix(want, ".grad.jvp"))
            n -= 5;
        fprintf(stderr, "kernc: error: ");
        char hint[300];
        bool primal = false;
        ir_foreach_kernel(k, m) primal |= strlen(k->name) == n && !strncmp(k->name, want, n);
        if (primal)
            fprintf(stderr, "no kernel '%s' was built for '%.*s'\n", want, (int)n, want);
        else
            fprintf(stderr, "no kernel named '%.*s' in %s%s\n", (int)n, want, c->file,
                    ir_kernel_hint(hint, sizeof hint, m, c->kernel));
        rc = EXIT_USER;
    } else {
        bool first = true;
        ir_foreach_kernel(k, m) {
            if ((!has_suffix(k->name, suffix) && !(want && has_suffix(want, ".ckpt"))) ||
                (want && strcmp(k->name, want) != 0))
                continue;
            if (!first)
                buf_putc(out, '\n');
            first = false;
            ir_print(out, m, k->name);
        }
    }
    if (m)
        ir_module_free(m);
    ctx->opts.grad_only = NULL;
    ctx->opts.jvp = false;
    free(want);
    return rc;
}

static int cmd_emit(cli *c, kc_ctx *ctx, loaded *l) {
    if (!c->emit)
        return usage_error("%s: --emit=WHAT is required (ast, ir)", "emit");
    kern_buf out = {0};
    int rc = 0;
    if (!strcmp(c->emit, "ast")) {
        /* The AST is printed with sema's types when the file checks, without them when it
         * only parses; a syntax error prints diagnostics only. */
        fe_file *f = kc_parse_source(ctx, c->file, l->text, l->len);
        if (f && !fe_check(ctx, f))
            rc = EXIT_USER;
        if (!f) {
            rc = EXIT_USER;
        } else if (c->kernel && !item_exists(f, c->kernel)) {
            const char **names = kern_xmalloc(sizeof *names * ((size_t)f->nitems + 1));
            int n = 0;
            for (int i = 0; i < f->nitems; i++)
                if (f->items[i]->kind != IT_CONST)
                    names[n++] = f->items[i]->name;
            char hint[300];
            fprintf(stderr, "kernc: error: no kernel or func named '%s' in %s%s\n", c->kernel,
                    c->file, kern_suggest_hint(hint, sizeof hint, c->kernel, names, (size_t)n));
            free(names);
            rc = EXIT_USER;
        } else {
            fe_print_ast(&out, f, c->kernel);
        }
    } else if (!strcmp(c->emit, "ir-jvp") ||
               (!strcmp(c->emit, "ir") && c->kernel && has_suffix(c->kernel, ".jvp"))) {
        ctx->opts.keep_rules = ctx->opts.opt_level == 0;
        rc = emit_ir_derived(c, ctx, l, &out, ".jvp"); /* --emit=ir --kernel K.jvp too */
    } else if (!strcmp(c->emit, "ir-grad") ||
               (!strcmp(c->emit, "ir") && c->kernel && is_grad_name(c->kernel))) {
        ctx->opts.keep_rules = ctx->opts.opt_level == 0; /* -O0: the lowering as it is */
        rc = emit_ir_derived(c, ctx, l, &out, ".grad");  /* --emit=ir --kernel K.grad too */
    } else if (!strcmp(c->emit, "ir")) {
        ctx->opts.keep_rules = ctx->opts.opt_level == 0;
        ir_module *m = kc_compile_source(ctx, c->file, l->text, l->len);
        if (!m) {
            rc = EXIT_USER;
        } else if (c->kernel && !ir_kernel_find(m, c->kernel)) {
            char hint[300];
            fprintf(stderr, "kernc: error: no kernel named '%s' in %s%s\n", c->kernel, c->file,
                    ir_kernel_hint(hint, sizeof hint, m, c->kernel));
            rc = EXIT_USER;
        } else {
            ir_print(&out, m, c->kernel);
        }
        if (m)
            ir_module_free(m);
    } else {
        char kinds[256], msg[640], hint[300];
        emit_kinds(kinds, sizeof kinds);
        if (*hint_in_list(hint, sizeof hint, c->emit, kinds))
            snprintf(msg, sizeof msg, "unknown --emit kind '%%s'%s", hint);
        else
            snprintf(msg, sizeof msg, "unknown --emit kind '%%s' (%s)", kinds);
        return usage_error(msg, c->emit);
    }
    diag_print_all(stderr, &ctx->diags);
    if (rc == 0)
        rc = kernc_write_output(c->out, out.data ? out.data : "", out.len);
    buf_free(&out);
    return rc;
}

/* run or gradcheck without KERNEL: a usage error (status 2) listing the file's kernels with
 * their parameters, or the file's diagnostics when it does not check (status 1). */
static int list_kernels(cli *c) {
    loaded l;
    int rc = load_file(c->file, &l);
    if (rc)
        return rc;
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts = c->opts;
    fe_file *f = kc_check_source(ctx, c->file, l.text, l.len);
    diag_print_all(stderr, &ctx->diags);
    if (f) {
        int n = 0;
        for (int i = 0; i < f->nitems; i++)
            n += f->items[i]->kind == IT_KERNEL;
        fprintf(stderr, "kernc: error: %s: missing KERNEL (kernc %s FILE.kern KERNEL ...); ",
                c->cmd, c->cmd);
        if (!n)
            fprintf(stderr, "%s has no kernels\n", c->file);
        else
            fprintf(stderr, "the kernel%s of %s:\n", n > 1 ? "s" : "", c->file);
        for (int i = 0; i < f->nitems; i++) {
            const fe_item *it = f->items[i];
            if (it->kind != IT_KERNEL)
                continue;
            fprintf(stderr, "  %s(", it->name);
            for (int p = 0; p < it->nparams; p++)
                fprintf(stderr, "%s%s%s: %s", p ? ", " : "", it->params[p].nograd ? "nograd " : "",
                        it->params[p].name, it->params[p].type->name);
            fputs(")\n", stderr);
        }
        if (n && !strcmp(c->cmd, "run"))
            fputs("  (KERNEL may also be K.grad, K.jvp or K.grad.jvp)\n", stderr);
    }
    kc_ctx_free(ctx);
    free(l.text);
    return f ? EXIT_USAGE : EXIT_USER;
}

/* The command of a parsed command line; returns the exit status. */
static int run_command(cli *c) {
    int rc;
    kc_options_from_env(&c->opts); /* the environment, once, under the command line's values */
    bool known = !strcmp(c->cmd, "check") || !strcmp(c->cmd, "emit") || !strcmp(c->cmd, "build") ||
                 !strcmp(c->cmd, "run") || !strcmp(c->cmd, "gradcheck");
    if (!known)
        return unknown_command(c->cmd);
    if (!c->file)
        return usage_error("%s: missing FILE.kern", c->cmd);
    /* an option that the command would ignore is an error, never silently dropped */
    bool writes = !strcmp(c->cmd, "emit") || !strcmp(c->cmd, "build");
    if (c->out && !writes)
        return usage_error(strcmp(c->cmd, "run") != 0
                               ? "%s: -o is an option of emit and build only"
                               : "%s: -o is an option of emit and build only (run writes arrays "
                                 "with --save NAME=PATH.npy)",
                           c->cmd);
    if (c->emit && strcmp(c->cmd, "emit") != 0)
        return usage_error("%s: --emit is an option of emit only", c->cmd);
    if (c->kernel && strcmp(c->cmd, "emit") != 0)
        return usage_error("%s: --kernel is an option of emit only (run and gradcheck take "
                           "KERNEL after the file)",
                           c->cmd);
    if (c->gc_option && strcmp(c->cmd, "gradcheck") != 0)
        return usage_error("%s is an option of gradcheck only", c->gc_option);
    if (c->opts.no_jvp && strcmp(c->cmd, "build") != 0)
        return usage_error("%s: --no-jvp is an option of build only", c->cmd);
    if (c->no_ckpt && strcmp(c->cmd, "build") != 0)
        return usage_error("%s: --no-ckpt is an option of build only", c->cmd);
    if (c->run_option && strcmp(c->cmd, "run") != 0)
        return usage_error("%s is an option of run only", c->run_option);
    if (c->ad_option && strcmp(c->cmd, "run") != 0 && strcmp(c->cmd, "gradcheck") != 0)
        return usage_error("%s is an option of run and gradcheck only", c->ad_option);
    const char *step_option = c->steps            ? "--steps"
                              : c->step_arg       ? "--step-arg"
                              : c->step_start_set ? "--step-start"
                                                  : NULL;
    if (step_option && strcmp(c->cmd, "run") != 0 && strcmp(c->cmd, "gradcheck") != 0)
        return usage_error("%s is an option of run and gradcheck only", step_option);
    if (!c->steps != !c->step_arg)
        return usage_error("%s", "--steps N and --step-arg NAME go together");
    if (c->step_range && c->step_start_set)
        return usage_error("%s", "--step-start and --steps A..B both set the first step");
    if (c->step_range)
        c->step_start = c->range_start;
    if (c->step_start_set && !c->steps)
        return usage_error("%s", "--step-start S goes with --steps N and --step-arg NAME");
    if (c->steps && c->step_start + c->steps - 1 > INT32_MAX)
        return usage_error("%s", "--step-start S with --steps N: the last step S + N - 1 must be "
                                 "below 2^31");
    if (c->no_checks && c->opts.debug)
        return usage_error("%s", "--debug and --no-checks contradict each other");
    if (c->no_checks && !strcmp(c->cmd, "gradcheck"))
        return usage_error("%s", "--no-checks: gradcheck always checks (its random inputs may "
                                 "index out of range)");
    c->opts.checks = !c->no_checks; /* every command compiles checked code by default */
    if (!strcmp(c->cmd, "run") || !strcmp(c->cmd, "gradcheck")) {
        if (!c->npositional)
            return list_kernels(c);
        kernc_run_args ra = {.file = c->file,
                             .kernel = c->positional[0],
                             .target = c->target,
                             .bindings = c->positional + 1,
                             .nbindings = c->npositional - 1,
                             .saves = c->saves,
                             .nsaves = c->nsaves,
                             .opts = c->opts,
                             .threads = c->threads,
                             .time = c->time,
                             .steps = c->steps,
                             .step_start = c->step_start,
                             .step_arg = c->step_arg,
                             .ad_budget = c->ad_budget,
                             .ad_strategy = c->ad_strategy,
                             .verbose = c->verbose,
                             .no_cache = c->no_cache,
                             .device = c->device};
        const char *bad = NULL;
        if (!kernc_progress_mode_from_env(&ra.progress, &bad))
            fprintf(stderr,
                    "kernc: warning: $KERNC_PROGRESS='%s' is neither 'off' nor a number of "
                    "seconds; ignored\n",
                    bad);
        if (!strcmp(c->cmd, "run"))
            return kernc_cmd_run(&ra);
        if (c->nsaves)
            return usage_error("%s is an option of run, not gradcheck", "--save");
        c->gc.steps = c->steps;
        c->gc.step_arg = c->step_arg;
        c->gc.ad_budget = c->ad_budget;
        c->gc.ad_strategy = c->ad_strategy;
        return kernc_cmd_gradcheck(&ra, &c->gc);
    }
    if (!strcmp(c->cmd, "build")) {
        if (c->npositional)
            return usage_error("build: unexpected argument '%s'", c->positional[0]);
        return kernc_cmd_build(c->file, c->target, c->out, &c->opts);
    }
    const kern_target *owner = c->emit ? kern_target_of_emit(c->emit) : NULL;
    if (!strcmp(c->cmd, "emit") && owner) {
        /* code of a target: the --target's, else the first target whose emit kinds have
         * it (the registry's order: llvm is cpu's, ptx cuda's, spirv vulkan's) */
        const char *target = c->target ? c->target : owner->name;
        if (c->npositional)
            return usage_error("emit: unexpected argument '%s'", c->positional[0]);
        if (c->kernel && is_grad_name(c->kernel)) { /* the code of K.grad too */
            c->opts.grad = KC_GRAD_ALL;
            c->opts.grad_only = c->kernel;
        }
        return kernc_cmd_emit_code(c->file, target, c->emit, c->out, c->kernel, &c->opts);
    }
    if (c->opts.arch && strcmp(c->cmd, "build") != 0 && strcmp(c->cmd, "run") != 0 &&
        strcmp(c->cmd, "gradcheck") != 0)
        return usage_error("%s: --arch applies to code of a GPU target only", c->cmd);
    if (!strcmp(c->cmd, "check") && c->npositional)
        return usage_error("check: unexpected argument '%s'", c->positional[0]);
    if (!strcmp(c->cmd, "emit") && c->npositional)
        return usage_error("emit: unexpected argument '%s'", c->positional[0]);
    loaded l;
    if ((rc = load_file(c->file, &l)))
        return rc;
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts = c->opts;
    rc = !strcmp(c->cmd, "check") ? cmd_check(c, ctx, &l) : cmd_emit(c, ctx, &l);
    kc_ctx_free(ctx);
    free(l.text);
    return rc;
}

/* --version: kern's, the LLVM it runs on, and what this build does for each target. */
static int print_version(void) {
    const char *lib;
    kern_version(&lib);
    char llvm[32];
    printf("kernc %s (libkern %s)\nLLVM %s\ntargets:\n", KERN_VERSION_STRING, lib,
           llvm_version(llvm, sizeof llvm));
    size_t n;
    const kern_target *const *t = kern_target_list(&n);
    for (size_t i = 0; i < n; i++) {
        bool code = kc_codegen_find(t[i]->name) != NULL;
        bool device = kern_backend_available(t[i]->backend);
        printf("  %-7s %s\n", t[i]->name,
               code && device ? "code and device (emit, build, run, gradcheck)"
               : code         ? "code (emit, build; no device in this runtime)"
               : device       ? "device (modules built elsewhere)"
                              : "not in this build");
    }
    return 0;
}

static int kernc_main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "help")) {
        if (argc > 3)
            return usage_error("help: one COMMAND at most, got '%s' too", argv[3]);
        return command_usage(argc == 3 ? argv[2] : "help");
    }
    if (!strcmp(argv[1], "--version"))
        return print_version();
    if (argv[1][0] == '-' && argv[1][1]) { /* an option where the command belongs */
        char *name = option_name(argv[1]);
        bool known = kern_target_list_has(options, name);
        free(name);
        if (known)
            return usage_error("'%s': the command comes first (kernc COMMAND FILE.kern "
                               "[options])",
                               argv[1]);
        static const char *const top[] = {"--help", "--version"};
        char hint[300], msg[400];
        kern_suggest_hint(hint, sizeof hint, argv[1], top, 2);
        snprintf(msg, sizeof msg, "unknown option '%%s'%s", hint);
        return usage_error(msg, argv[1]);
    }
    cli c;
    int rc = parse_cli(argc, argv, &c);
    rc = c.help ? command_usage(c.cmd) : rc ? rc : run_command(&c);
    free(c.positional);
    free(c.saves);
    return rc;
}

int main(int argc, char **argv) {
    int rc = kernc_main(argc, argv);
    /* every write to stdout is checked: a full disk is an error, not exit 0 */
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "kernc: error: cannot write the standard output: %s\n",
                strerror(errno ? errno : EIO));
        rc = EXIT_IO;
    }
    return rc;
}
