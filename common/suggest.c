/* suggest.c - the nearest name by edit distance (suggest.h). The distance is the optimal
 * string alignment variant of Damerau-Levenshtein (Wagner-Fischer's table, with a swap of
 * neighbours as one edit), over characters: a UTF-8 sequence counts as one ('sáxpy' is one
 * edit from 'saxpy'), any other byte as itself. Three rows at a time; a pair whose lengths
 * alone differ by more than the limit is never compared, so a long word costs nothing
 * against short names. */
#include "suggest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The characters of s: each a UTF-8 sequence (its lead byte and continuation bytes, packed)
 * or a lone byte; malloc'd, *n of them. */
static uint32_t *chars_of(const char *s, size_t *n) {
    size_t len = strlen(s), k = 0;
    uint32_t *c = kern_xmalloc((len + 1) * sizeof *c);
    for (size_t i = 0; i < len;) {
        uint32_t v = (unsigned char)s[i++];
        for (int j = 0; v >= 0xC0 && j < 3 && i < len && ((unsigned char)s[i] & 0xC0) == 0x80; j++)
            v = v << 8 | (unsigned char)s[i++];
        c[k++] = v;
    }
    *n = k;
    return c;
}

/* The OSA distance of a[0..n) and b[0..m), or limit + 1 when it exceeds limit. */
static size_t distance(const uint32_t *a, size_t n, const uint32_t *b, size_t m, size_t limit) {
    if ((n > m ? n - m : m - n) > limit)
        return limit + 1;
    size_t *rows = kern_xmalloc(3 * (m + 1) * sizeof *rows);
    size_t *prev2 = rows, *prev = rows + m + 1, *cur = rows + 2 * (m + 1);
    for (size_t j = 0; j <= m; j++)
        prev[j] = j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = i;
        size_t best = cur[0];
        for (size_t j = 1; j <= m; j++) {
            size_t d = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < d)
                d = prev[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
            if (d < best)
                best = d;
        }
        if (best > limit) { /* no later row is nearer: each cell is at least its row's least */
            free(rows);
            return limit + 1;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[m];
    free(rows);
    return d;
}

const char *kern_suggest(const char *word, const char *const *names, size_t n) {
    size_t wn;
    uint32_t *w = chars_of(word, &wn);
    const char *best = NULL;
    size_t best_d = 0;
    for (size_t i = 0; i < n && wn; i++) {
        if (!names[i])
            continue;
        size_t m;
        uint32_t *c = chars_of(names[i], &m);
        size_t limit = (wn > m ? wn : m) / 3;
        size_t d = distance(w, wn, c, m, limit);
        free(c);
        if (d == 0) { /* a known name: nothing to suggest */
            best = NULL;
            break;
        }
        if (d <= limit && (!best || d < best_d)) {
            best = names[i];
            best_d = d;
        }
    }
    free(w);
    return best;
}

const char *kern_suggest_hint(char *buf, size_t size, const char *word, const char *const *names,
                              size_t n) {
    const char *s = kern_suggest(word, names, n);
    if (size)
        buf[0] = 0;
    if (s && size)
        snprintf(buf, size, " (did you mean '%s'?)", s);
    return buf;
}
