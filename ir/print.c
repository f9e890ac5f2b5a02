/* print.c - the IR printer: the text form of docs/ir.md.
 *
 * Printing never fails: an op whose structure breaks the rules (a wrong operand count, a
 * missing region argument, a NULL type) still prints, in a generic fallback form the
 * verifier's report can show, though the parser may then refuse it. Valid IR prints in
 * the canonical form, which ir_parse reads back to IR that prints byte for byte the same.
 * Op keywords come from ir_opinfos (ops.def). A kernel's adstack table prints first in its
 * body, one `adstack TYPE "CAP" !LOC` line per stack in index order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir_priv.h"

typedef struct printer {
    kern_buf *out;
    ir_namer nm;
    ir_print_hook hook;
    void *user;
    const ir_kernel *k;
} printer;

/* ---- Leaves ----------------------------------------------------------------------- */

static void put_indent(printer *p, int indent) {
    for (int i = 0; i < indent; i++)
        buf_puts(p->out, "  ");
}

static void put_type(printer *p, const kern_type *t) { buf_puts(p->out, t ? t->name : "<null>"); }

static void put_value(printer *p, const ir_value *v) { ir_namer_put(p->out, &p->nm, v); }

static void put_loc(printer *p, kern_loc loc) {
    if (loc.line)
        buf_printf(p->out, " !%u:%u", loc.line, loc.col);
}

/* A quoted string: printable ASCII as is, `"`, `\` and other bytes as \XX (hex). */
static void put_quoted(kern_buf *b, const char *s) {
    buf_putc(b, '"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\')
            buf_putc(b, (char)*c);
        else
            buf_printf(b, "\\%02x", *c);
    }
    buf_putc(b, '"');
}

void ir_format_float(kern_buf *b, const kern_type *t, double v) {
    bool f32 = t && t->kind == TY_F32;
    if (isnan(v)) {
        if (f32) {
            float f = (float)v;
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            if (bits == 0x7fc00000u)
                buf_puts(b, "nan");
            else
                buf_printf(b, "nan(0x%08x)", bits);
        } else {
            uint64_t bits;
            memcpy(&bits, &v, sizeof bits);
            if (bits == 0x7ff8000000000000ull)
                buf_puts(b, "nan");
            else
                buf_printf(b, "nan(0x%016llx)", (unsigned long long)bits);
        }
        return;
    }
    if (isinf(v)) {
        buf_puts(b, v < 0 ? "-inf" : "inf");
        return;
    }
    if (f32 && (double)(float)v != v)
        f32 = false; /* not a float (invalid IR): print every bit of the double */
    char s[64];
    if (v == floor(v) && fabs(v) < 1e7) {
        snprintf(s, sizeof s, "%.1f", v); /* 100.0, -0.0: exact in both types */
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(s, sizeof s, "%.*g", prec, v);
            if (f32 ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v)
                break;
        }
        if (!strpbrk(s, ".e"))
            strcat(s, ".0");
    }
    buf_puts(b, s);
}

/* ---- Ops -------------------------------------------------------------------------- */

static void print_region(printer *p, const ir_region *r, int indent);

static void put_list(printer *p, ir_value *const *vals, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            buf_puts(p->out, ", ");
        put_value(p, vals ? vals[i] : NULL);
    }
}

/* True when the parser knows the type of v when it reads op's header: a parameter or a
 * value printed before op. */
static bool known_before(printer *p, const ir_value *v, const ir_op *op) {
    int64_t num;
    int param;
    if (!v || !v->type || !ir_namer_get(&p->nm, v, &num, &param))
        return false;
    return param >= 0 || num < ir_namer_op_start(&p->nm, op);
}

/* A region argument; its type is written only when the parser could not derive it from
 * `from` (the operand it is typed like) or would derive another one. */
static void put_arg(printer *p, const ir_op *op, const ir_value *arg, const ir_value *from) {
    put_value(p, arg);
    if (!arg)
        return;
    bool derived = from ? known_before(p, from, op) && from->type == arg->type : false;
    if (!derived) {
        buf_puts(p->out, ": ");
        put_type(p, arg->type);
    }
}

/* Whether op has the structure its canonical syntax needs. */
static bool regions_ok(const ir_op *op, uint32_t n) {
    if (op->nregions != n || !op->regions)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!op->regions[i] || (op->regions[i]->nargs && !op->regions[i]->args))
            return false;
    return true;
}

static bool canonical_shape(const ir_op *op) {
    ir_region *const *r = op->regions;
    switch (op->code) {
    case IR_IF: return op->noperands == 1 && regions_ok(op, 2) && !r[0]->nargs && !r[1]->nargs;
    case IR_FOR: return op->noperands >= 2 && regions_ok(op, 1) && r[0]->nargs == op->noperands - 1;
    case IR_WHILE:
        return regions_ok(op, 2) && r[0]->nargs == op->noperands && r[1]->nargs == op->nresults;
    case IR_PARALLEL:
        return op->noperands >= 2 && op->noperands % 2 == 0 && regions_ok(op, 1) &&
               r[0]->nargs == op->noperands / 2;
    case IR_SERIAL: return op->noperands == 0 && regions_ok(op, 1) && !r[0]->nargs;
    case IR_CUSTOM: return regions_ok(op, 2);
    case IR_LOAD: return op->noperands >= 1 && op->nregions == 0;
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG: return op->noperands >= 2 && op->nregions == 0;
    case IR_ATOMIC_CAS: return op->noperands >= 3 && op->nregions == 0;
    default: return op->nregions == 0;
    }
}

static void put_const(printer *p, const ir_op *op) {
    const ir_value *r0 = op->nresults && op->results ? op->results[0] : NULL;
    const kern_type *t = r0 ? r0->type : NULL;
    if (t && ty_is_float(t))
        ir_format_float(p->out, t, op->imm.f);
    else if (t && t->kind == TY_BOOL && (op->imm.i == 0 || op->imm.i == 1))
        buf_puts(p->out, op->imm.i ? "true" : "false");
    else if (t && t->kind == TY_U64)
        buf_printf(p->out, "%llu", (unsigned long long)op->imm.i);
    else
        buf_printf(p->out, "%lld", (long long)op->imm.i);
}

/* The part of an op's first line between its keyword and its result types. */
static void put_operands(printer *p, const ir_op *op, bool canonical) {
    ir_value *const *o = op->operands;
    uint32_t n = op->noperands;
    if (!canonical) {
        if (n)
            buf_putc(p->out, ' ');
        put_list(p, o, n);
        if (op->code == IR_DIM || op->code == IR_CONST || op->code == IR_ADPUSH ||
            op->code == IR_ADPOP || op->code == IR_CHECK)
            buf_printf(p->out, "%s%lld", n ? ", " : " ", (long long)op->imm.i);
        return;
    }
    switch (op->code) {
    case IR_CONST:
        buf_putc(p->out, ' ');
        put_const(p, op);
        if (n) { /* operands on a const: keep them visible */
            buf_puts(p->out, ", ");
            put_list(p, o, n);
        }
        break;
    case IR_DIM:
    case IR_ADPUSH:
    case IR_ADPOP:
    case IR_CHECK: /* operands, then imm.i: the dimension / the adstack / the error code */
        buf_putc(p->out, ' ');
        if (n) {
            put_list(p, o, n);
            buf_puts(p->out, ", ");
        }
        buf_printf(p->out, "%lld", (long long)op->imm.i);
        break;
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG:
    case IR_ATOMIC_CAS: {
        uint32_t nidx = ir_access_nidx(op);
        buf_putc(p->out, ' ');
        put_value(p, o[0]);
        buf_putc(p->out, '[');
        put_list(p, o + 1, nidx);
        buf_putc(p->out, ']');
        for (uint32_t i = 1 + nidx; i < n; i++) {
            buf_puts(p->out, ", ");
            put_value(p, o[i]);
        }
        break;
    }
    case IR_FOR: {
        ir_region *body = op->regions[0];
        if (op->attr & IR_FOR_EARLY_EXIT)
            buf_puts(p->out, " early_exit");
        buf_putc(p->out, ' ');
        put_arg(p, op, body->args[0], o[0]);
        buf_puts(p->out, " = ");
        put_value(p, o[0]);
        buf_puts(p->out, " to ");
        put_value(p, o[1]);
        if (n > 2) {
            buf_puts(p->out, " iter(");
            for (uint32_t i = 2; i < n; i++) {
                if (i > 2)
                    buf_puts(p->out, ", ");
                put_arg(p, op, body->args[i - 1], o[i]);
                buf_puts(p->out, " = ");
                put_value(p, o[i]);
            }
            buf_putc(p->out, ')');
        }
        break;
    }
    case IR_WHILE: {
        ir_region *before = op->regions[0];
        buf_puts(p->out, " (");
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                buf_puts(p->out, ", ");
            put_arg(p, op, before->args[i], o[i]);
            buf_puts(p->out, " = ");
            put_value(p, o[i]);
        }
        buf_putc(p->out, ')');
        break;
    }
    case IR_PARALLEL: {
        ir_region *body = op->regions[0];
        buf_puts(p->out, " (");
        for (uint32_t d = 0; d < n / 2; d++) {
            if (d)
                buf_puts(p->out, ", ");
            put_arg(p, op, body->args[d], o[2 * d]);
            buf_puts(p->out, " = ");
            put_value(p, o[2 * d]);
            buf_puts(p->out, " to ");
            put_value(p, o[2 * d + 1]);
        }
        buf_putc(p->out, ')');
        break;
    }
    default:
        if (n)
            buf_putc(p->out, ' ');
        put_list(p, o, n);
        break;
    }
}

static void end_line(printer *p, const ir_op *op, int indent) {
    buf_putc(p->out, '\n');
    if (p->hook)
        p->hook(p->out, p->k, op, indent, p->user);
}

/* The while's after-region arguments: typed like the results unless written. */
static void put_after_args(printer *p, const ir_op *op) {
    ir_region *after = op->regions[1];
    buf_puts(p->out, " do (");
    for (uint32_t i = 0; i < after->nargs; i++) {
        if (i)
            buf_puts(p->out, ", ");
        const ir_value *a = after->args[i];
        const ir_value *res = op->results ? op->results[i] : NULL;
        put_value(p, a);
        if (a && (!a->type || !res || a->type != res->type)) {
            buf_puts(p->out, ": ");
            put_type(p, a ? a->type : NULL);
        }
    }
    buf_puts(p->out, ") {\n");
}

/* A custom op's region header: ` WORD (%a: T, ...) {`, every argument typed. */
static void put_region_head(printer *p, const char *word, const ir_region *r) {
    buf_printf(p->out, " %s (", word);
    for (uint32_t i = 0; i < r->nargs; i++) {
        if (i)
            buf_puts(p->out, ", ");
        put_value(p, r->args[i]);
        buf_puts(p->out, ": ");
        put_type(p, r->args[i] ? r->args[i]->type : NULL);
    }
    buf_puts(p->out, ") {");
}

/* The results of op: %N, or %N:K for K >= 2 results. */
static void put_def(printer *p, const ir_op *op) {
    int64_t num;
    int param;
    const ir_value *r0 = op->results ? op->results[0] : NULL;
    if (!r0 || !ir_namer_get(&p->nm, r0, &num, &param) || param >= 0) {
        put_value(p, r0);
        return;
    }
    buf_printf(p->out, "%%%lld", (long long)num);
    if (op->nresults >= 2)
        buf_printf(p->out, ":%u", op->nresults);
}

static void print_op(printer *p, const ir_op *op, int indent) {
    put_indent(p, indent);
    if (op->nresults) {
        put_def(p, op);
        buf_puts(p->out, " = ");
    }
    if ((unsigned)op->code >= IR__COUNT) {
        buf_printf(p->out, "<opcode %d>", (int)op->code);
    } else {
        buf_puts(p->out, ir_info(op->code)->name);
    }
    bool canonical = (unsigned)op->code < IR__COUNT && canonical_shape(op);
    put_operands(p, op, canonical);
    if (op->nresults) {
        buf_puts(p->out, " :");
        for (uint32_t i = 0; i < op->nresults; i++) {
            buf_puts(p->out, i ? ", " : " ");
            put_type(p, op->results && op->results[i] ? op->results[i]->type : NULL);
        }
    }
    put_loc(p, op->loc);
    if (!op->nregions || !op->regions) {
        end_line(p, op, indent);
        return;
    }
    if (canonical && op->code == IR_CUSTOM) {
        put_region_head(p, "primal", op->regions[0]);
        end_line(p, op, indent);
        print_region(p, op->regions[0], indent + 1);
        put_indent(p, indent);
        buf_putc(p->out, '}');
        put_region_head(p, "adjoint", op->regions[1]);
        buf_putc(p->out, '\n');
        print_region(p, op->regions[1], indent + 1);
        put_indent(p, indent);
        buf_puts(p->out, "}\n");
        return;
    }
    if (canonical) {
        buf_puts(p->out, " {");
        end_line(p, op, indent);
        print_region(p, op->regions[0], indent + 1);
        put_indent(p, indent);
        if (op->code == IR_IF) {
            buf_puts(p->out, "} else {\n");
            print_region(p, op->regions[1], indent + 1);
            put_indent(p, indent);
        } else if (op->code == IR_WHILE) {
            buf_putc(p->out, '}');
            put_after_args(p, op);
            print_region(p, op->regions[1], indent + 1);
            put_indent(p, indent);
        }
        buf_puts(p->out, "}\n");
        return;
    }
    /* Fallback: every region with its arguments in a comment line. */
    end_line(p, op, indent);
    for (uint32_t i = 0; i < op->nregions; i++) {
        const ir_region *r = op->regions[i];
        put_indent(p, indent);
        buf_printf(p->out, "{ // region %u", i);
        if (r) {
            buf_puts(p->out, " (");
            for (uint32_t a = 0; a < r->nargs && r->args; a++) {
                if (a)
                    buf_puts(p->out, ", ");
                put_value(p, r->args[a]);
                buf_puts(p->out, ": ");
                put_type(p, r->args[a] ? r->args[a]->type : NULL);
            }
            buf_putc(p->out, ')');
        }
        buf_putc(p->out, '\n');
        if (r)
            print_region(p, r, indent + 1);
        put_indent(p, indent);
        buf_puts(p->out, "}\n");
    }
}

static void print_region(printer *p, const ir_region *r, int indent) {
    if (indent > 1000) {
        put_indent(p, 8);
        buf_puts(p->out, "// ... nested too deeply to print\n");
        return;
    }
    for (const ir_op *op = r->first; op; op = op->next)
        print_op(p, op, indent);
}

/* ---- Kernels and modules ---------------------------------------------------------- */

/* adstack TYPE "CAP" [LOC], CAP the SizeExpr's text form; a missing capacity prints as
 * <null> (the parser refuses it). */
static void print_adstack(printer *p, const ir_adstack *a) {
    buf_puts(p->out, "  adstack ");
    put_type(p, a->type);
    buf_putc(p->out, ' ');
    if (a->cap) {
        kern_buf text = {0};
        sz_print(&text, a->cap);
        put_quoted(p->out, text.data);
        buf_free(&text);
    } else {
        buf_puts(p->out, "<null>");
    }
    put_loc(p, a->loc);
    buf_putc(p->out, '\n');
}

static void print_kernel(printer *p, const ir_kernel *k) {
    p->k = k;
    ir_namer_init(&p->nm, k);
    buf_puts(p->out, "kernel @");
    const char *name = k->name ? k->name : "";
    if (ir_is_plain_name(name, strlen(name)))
        buf_puts(p->out, name);
    else
        put_quoted(p->out, name);
    buf_putc(p->out, '(');
    for (uint32_t i = 0; i < k->nparams; i++) {
        const ir_param *pa = &k->params[i];
        if (i)
            buf_puts(p->out, ", ");
        if (pa->nograd)
            buf_puts(p->out, "nograd ");
        if (k->body && i < k->body->nargs && k->body->args)
            put_value(p, k->body->args[i]);
        else
            buf_printf(p->out, "%%%s",
                       pa->name && ir_is_plain_name(pa->name, strlen(pa->name)) ? pa->name
                                                                                : "<unnamed>");
        buf_puts(p->out, ": ");
        put_type(p, pa->type);
    }
    buf_putc(p->out, ')');
    put_loc(p, k->loc);
    buf_puts(p->out, " {\n");
    if (p->hook)
        p->hook(p->out, k, NULL, 1, p->user);
    for (uint32_t i = 0; i < k->nadstacks && k->adstacks; i++)
        print_adstack(p, &k->adstacks[i]);
    if (k->body)
        print_region(p, k->body, 1);
    buf_puts(p->out, "}\n");
    ir_namer_free(&p->nm);
}

void ir_print_hooked(kern_buf *out, const ir_module *m, const char *only, ir_print_hook hook,
                     void *user) {
    printer p = {.out = out, .hook = hook, .user = user};
    bool first = true;
    if (!only && m->source_path) {
        buf_puts(out, "source ");
        put_quoted(out, m->source_path);
        buf_putc(out, '\n');
        first = false;
    }
    ir_foreach_kernel(k, m) {
        if (only && (!k->name || strcmp(k->name, only) != 0))
            continue;
        if (!first)
            buf_putc(out, '\n');
        first = false;
        print_kernel(&p, k);
    }
}

void ir_print(kern_buf *out, const ir_module *m, const char *only) {
    ir_print_hooked(out, m, only, NULL, NULL);
}
