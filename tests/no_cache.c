/* no_cache.c - the test binary compiles without the compile cache (docs/runtime.md):
 * tests must not write to the user's home. $KERN_CACHE=0, unless the environment says
 * otherwise; test_cache.c gives its contexts a directory of their own. */
#include <stdlib.h>

__attribute__((constructor)) static void tests_without_cache(void) { setenv("KERN_CACHE", "0", 0); }
