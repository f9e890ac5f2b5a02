/* golden.h - helpers for golden-file tests: list a folder, read files, compare with an
 * expected file (UPDATE=1 rewrites the expected file instead). */
#ifndef KERN_TESTS_GOLDEN_H
#define KERN_TESTS_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

/* Sorted names of the files in KERN_SOURCE_ROOT/tests/golden/DIR ending in ext
 * (e.g. ".kern"); returns the count. Free with golden_free_list. */
int golden_list(const char *dir, const char *ext, char ***names);
void golden_free_list(char **names, int n);
/* Reads KERN_SOURCE_ROOT/tests/golden/DIR/NAME; NULL when missing. */
char *golden_read(const char *dir, const char *name, size_t *len);
/* Compares actual with the expected file DIR/NAME; prints a line diff to stderr on
 * mismatch. With UPDATE=1 in the environment, writes actual there and returns true. */
bool golden_check(const char *dir, const char *name, const char *actual);
/* text with every whole-word REAL written as type (the gradient corpus's placeholder), and
 * VEC2..4, MAT2..4, QUAT as the vector types of that precision (vec3 or dvec3, ...); type
 * NULL: a copy. malloc'd. */
char *golden_with_type(const char *text, const char *type);
/* NAME.kern -> NAME.ext (malloc'd). */
char *golden_sibling(const char *name, const char *ext);

#endif
