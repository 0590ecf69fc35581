/* A one-line progress indicator on stderr for long runs. It is shown only
 * when stderr is a terminal, so logs and pipes never collect it. */
#ifndef LOCUS_TOOL_PROGRESS_H
#define LOCUS_TOOL_PROGRESS_H

#include <stddef.h>

/* Decides once whether progress is shown (stderr is a terminal). */
void progress_init(void);
/* Where we are in the whole run, e.g. "[3/12] ", shown before each line. */
void progress_set_step(size_t step, size_t steps);
/* Replaces the progress line with this text. */
void progress_show(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
/* Erases the line, before anything else is written to the terminal. */
void progress_clear(void);

#endif
