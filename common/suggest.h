/* suggest.h - "did you mean": the known name nearest a mistyped one, for the messages of
 * the command line (an unknown command, option, target, kernel or parameter). */
#ifndef KERN_SUGGEST_H
#define KERN_SUGGEST_H

#include <stddef.h>

/* The name of names[0..n) nearest word in edit distance (optimal string alignment:
 * insertions, deletions, substitutions and swaps of two neighbours, of characters, a
 * UTF-8 sequence being one), when it is near enough to be a typo: at most a third of the
 * longer one's length in characters, so "rn" gives "run" and "--thread" "--threads", but
 * "x" nothing. The first of equally near names; NULL when none is near, when word is
 * empty or is one of the names. NULL entries are skipped. */
const char *kern_suggest(const char *word, const char *const *names, size_t n);
/* " (did you mean 'NAME'?)" for kern_suggest's NAME, "" when it finds none; into buf
 * (truncated to size), returned. */
const char *kern_suggest_hint(char *buf, size_t size, const char *word, const char *const *names,
                              size_t n);

#endif
