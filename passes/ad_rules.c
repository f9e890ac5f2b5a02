/* ad_rules.c - adjoint rules per opcode. Work in progress. */
#include "passes.h"
