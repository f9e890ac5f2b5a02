/* lexer.h - the tokens of a .kern source and the on-demand lexer that produces them.
 *
 * The lexer turns UTF-8 source text into tokens one at a time (fe_lex_next), so its
 * diagnostics arrive interleaved with the parser's, in source order. It never fails:
 * a character that starts no token becomes one TK_ERROR token (the error is already
 * reported), a malformed number becomes a TK_INT/TK_FLOAT of value 0 (reported too),
 * and an unterminated block comment is reported at its start and ends the input.
 * After the end of the text, every call returns TK_EOF.
 *
 * Lexical rules (docs/reference.md section 2, choices in docs/ast.md):
 *   - whitespace: space, \t, \n, \r, \f, \v; a UTF-8 byte-order mark at the very start is
 *     skipped; comments run from // to the end of the line or from slash-star to the next
 *     star-slash (not nested);
 *   - identifiers [A-Za-z_][A-Za-z0-9_]*, minus the keywords and the six type names, which
 *     are tokens of their own;
 *   - integers: decimal (no leading zeros) or 0x/0X hex, at most 2^63-1;
 *   - floats: digits '.' digits? exponent?, '.' digits exponent?, digits exponent, where a
 *     '.' directly followed by another '.' is never part of a number (`1..2` is 1 .. 2);
 *   - operators by longest match (`a<<=b` is a << = b).
 * Locations are 1-based lines and 1-based byte columns. */
#ifndef KERN_LEXER_H
#define KERN_LEXER_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/context.h"
#include "../common/types.h"

/* X(kind, spelling): spelling is the source text for fixed tokens, a description for
 * the others. */
#define FE_TOKENS(X)                                                                       \
    X(TK_EOF, "end of file")                                                               \
    X(TK_ERROR, "invalid character")                                                       \
    X(TK_IDENT, "identifier")                                                              \
    X(TK_INT, "integer literal")                                                           \
    X(TK_FLOAT, "float literal")                                                           \
    /* keywords */                                                                         \
    X(TK_CONST, "const")                                                                   \
    X(TK_FUNC, "func")                                                                     \
    X(TK_KERNEL, "kernel")                                                                 \
    X(TK_LET, "let")                                                                       \
    X(TK_VAR, "var")                                                                       \
    X(TK_IF, "if")                                                                         \
    X(TK_ELSE, "else")                                                                     \
    X(TK_FOR, "for")                                                                       \
    X(TK_IN, "in")                                                                         \
    X(TK_WHILE, "while")                                                                   \
    X(TK_BREAK, "break")                                                                   \
    X(TK_CONTINUE, "continue")                                                             \
    X(TK_RETURN, "return")                                                                 \
    X(TK_TRUE, "true")                                                                     \
    X(TK_FALSE, "false")                                                                   \
    X(TK_NOGRAD, "nograd")                                                                 \
    X(TK_STRUCT, "struct")                                                                 \
    /* type names, in kern_tykind order */                                                 \
    X(TK_BOOL, "bool")                                                                     \
    X(TK_I32, "i32")                                                                       \
    X(TK_U32, "u32")                                                                       \
    X(TK_I64, "i64")                                                                       \
    X(TK_F32, "f32")                                                                       \
    X(TK_F64, "f64")                                                                       \
    X(TK_I8, "i8")                                                                         \
    X(TK_U8, "u8")                                                                         \
    X(TK_I16, "i16")                                                                       \
    X(TK_U16, "u16")                                                                       \
    X(TK_U64, "u64")                                                                       \
    X(TK_F16, "f16")                                                                       \
    X(TK_BF16, "bf16")                                                                     \
    X(TK_VTYPE, "vector or matrix type") /* vec3, dmat2, quat, ...: ty_vector_named */      \
    /* punctuation and operators */                                                        \
    X(TK_LPAREN, "(")                                                                      \
    X(TK_RPAREN, ")")                                                                      \
    X(TK_LBRACKET, "[")                                                                    \
    X(TK_RBRACKET, "]")                                                                    \
    X(TK_LBRACE, "{")                                                                      \
    X(TK_RBRACE, "}")                                                                      \
    X(TK_COMMA, ",")                                                                       \
    X(TK_SEMI, ";")                                                                        \
    X(TK_COLON, ":")                                                                       \
    X(TK_QUESTION, "?")                                                                    \
    X(TK_DOTDOT, "..")                                                                     \
    X(TK_DOT, ".")                                                                         \
    X(TK_ARROW, "->")                                                                      \
    X(TK_PLUS, "+")                                                                        \
    X(TK_MINUS, "-")                                                                       \
    X(TK_STAR, "*")                                                                        \
    X(TK_SLASH, "/")                                                                       \
    X(TK_PERCENT, "%")                                                                     \
    X(TK_SHL, "<<")                                                                        \
    X(TK_SHR, ">>")                                                                        \
    X(TK_AMP, "&")                                                                         \
    X(TK_PIPE, "|")                                                                        \
    X(TK_CARET, "^")                                                                       \
    X(TK_TILDE, "~")                                                                       \
    X(TK_BANG, "!")                                                                        \
    X(TK_EQ, "==")                                                                         \
    X(TK_NE, "!=")                                                                         \
    X(TK_LT, "<")                                                                          \
    X(TK_LE, "<=")                                                                         \
    X(TK_GT, ">")                                                                          \
    X(TK_GE, ">=")                                                                         \
    X(TK_ANDAND, "&&")                                                                     \
    X(TK_OROR, "||")                                                                       \
    X(TK_ASSIGN, "=")                                                                      \
    X(TK_PLUSEQ, "+=")                                                                     \
    X(TK_MINUSEQ, "-=")                                                                    \
    X(TK_STAREQ, "*=")                                                                     \
    X(TK_SLASHEQ, "/=")

typedef enum fe_tok_kind {
#define FE_TOK_ENUM(k, s) k,
    FE_TOKENS(FE_TOK_ENUM)
#undef FE_TOK_ENUM
    TK__COUNT
} fe_tok_kind;

typedef struct fe_token {
    fe_tok_kind kind;
    kern_loc loc;
    const char *text; /* the token's bytes in the source (not NUL-terminated) */
    uint32_t len;
    int64_t ival;     /* TK_INT: the value (0 after a reported error) */
    double fval;      /* TK_FLOAT: the value (0 after a reported error) */
} fe_token;

typedef struct fe_lexer {
    kc_ctx *ctx;
    const kern_source *src;
    const char *p, *end;    /* next byte; end of the text */
    const char *line_start; /* first byte of the current line */
    uint32_t line;
    bool truncated;         /* an unterminated comment swallowed the rest of the input */
} fe_lexer;

void fe_lexer_init(fe_lexer *lx, kc_ctx *ctx, const kern_source *src);
/* The next token; errors go to ctx's diagnostics. */
fe_token fe_lex_next(fe_lexer *lx);
/* "end of file", "identifier", "let", "+=": the spelling in FE_TOKENS. */
const char *fe_tok_name(fe_tok_kind k);
/* The scalar type a type-name token stands for; NULL for other tokens. */
const kern_type *fe_tok_scalar(fe_tok_kind k);

#endif
