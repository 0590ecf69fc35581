/* Opening the files Locus reads and writes (the calibration cache, the
 * record file, a topology file) so that a hostile path can neither hang it
 * nor make it write where it should not: open() never blocks (a FIFO would
 * block fopen forever), anything but a regular file is refused, and the
 * descriptor is close-on-exec. docs/RELIABILITY.md. */
#ifndef LOCUS_SAFE_FILE_H
#define LOCUS_SAFE_FILE_H

#include <stdio.h>
#include <sys/types.h>

/* open(path, flags, mode) plus the checks above; flags may add O_NOFOLLOW
 * (paths of Locus's own caches) and O_CREAT. Returns the descriptor, in
 * blocking mode again, or -1 with *why set to the reason ("not a regular
 * file", or strerror's text) and errno kept. */
int locus__open_regular(const char *path, int flags, mode_t mode,
                        const char **why);

/* locus__open_regular(path, O_RDONLY | extra_flags) as a FILE for reading
 * in binary mode; NULL with *why as above. */
FILE *locus__fopen_regular_read(const char *path, int extra_flags,
                                const char **why);

#endif
