/* outfile.h - writing an output file without damaging what kern does not own
 * (docs/cli.md, "Output files"). The one place that decides how a path is written, used by
 * `kernc run --save`, `kernc emit -o`, `kernc build -o` and kern_npy_write:
 *   - a regular file, or an absent one, is written to a new temporary file beside it and
 *     renamed over it once complete (a reader never sees half a file, a failed write leaves
 *     the old file as it was); an existing file keeps its permission bits;
 *   - a symbolic link is written through: the file it names is the one replaced or created,
 *     the link stays;
 *   - anything else that can be opened for writing (a FIFO, a character device, a terminal,
 *     /dev/stdout and the other /proc/self/fd links) is written in place, never removed,
 *     renamed over or truncated;
 *   - a directory is an error;
 *   - every write is checked, and the close too: a full disk is an error.
 * Only the temporary file that outfile_open created is ever removed. */
#ifndef KERN_OUTFILE_H
#define KERN_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kern_outfile {
    int fd;
    char *target; /* the file replaced: the path, or what its symbolic links name */
    char *tmp;    /* our temporary file, NULL when written in place */
    int mode;     /* permission bits to give the new file, -1 for the default */
    int error;    /* the first errno of a failed write, 0 while all is well */
} kern_outfile;

/* Opens path for writing; false (with a message naming path in err) when it cannot. */
bool kern_outfile_open(kern_outfile *o, const char *path, char *err, size_t errlen);
/* Writes n bytes; a failure is remembered and reported by kern_outfile_commit. */
bool kern_outfile_write(kern_outfile *o, const void *p, size_t n);
/* Completes the file: closes it and renames the temporary file over the target. On any
 * failure (of this call or an earlier write) removes the temporary file and says why. */
bool kern_outfile_commit(kern_outfile *o, const char *path, char *err, size_t errlen);
/* Gives up: closes the file and removes the temporary file (the target is untouched). */
void kern_outfile_abort(kern_outfile *o);

/* What an output path writes, as a string (malloc'd): two outputs clash when their keys
 * are equal, that is when they name one file (the same file when it exists, else the same
 * target after following symbolic links and the directories' real paths). NULL for a
 * character device, which clashes with nothing (two outputs to /dev/null are fine).
 * Comparing keys, not pairs of paths, finds a clash among n outputs in n log n. */
char *kern_outfile_key(const char *path);

#endif
