/* sizeexpr.c - SizeExpr construction, text form and evaluation (sizeexpr.h). Stub. */
#include "sizeexpr.h"
