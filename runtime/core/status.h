/* Status codes and the per-thread error detail. */
#ifndef LOCUS_RUNTIME_STATUS_H
#define LOCUS_RUNTIME_STATUS_H

#include <stdarg.h>

#include <locus/locus.h>

/* Sets this thread's error detail to the formatted text and returns status,
 * so that callers can write `return locus__fail(...)`. */
locus_status locus__fail(locus_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
locus_status locus__vfail(locus_status status, const char *format,
                          va_list args);
/* Every public entry point starts here, so that locus_last_error() describes
 * the last call only. */
void locus__clear_error(void);

/* Rewrites the control characters of text (a value from the environment
 * quoted in a message may hold a terminal escape or a newline) as \n, \t,
 * \r or \xHH, in place, truncated to capacity. Messages and log lines
 * pass through it before anyone prints them. */
void locus__escape_controls(char *text, size_t capacity);

#endif
