/* The runtime's log, on the ground floor: every part of the runtime may log
 * without reaching up to the context. */
#ifndef LOCUS_RUNTIME_LOG_H
#define LOCUS_RUNTIME_LOG_H

#include <stdarg.h>

#include <locus/locus.h>

/* Writes "locus <level>: <message>" on stderr, control characters escaped
 * (a value from the environment must not drive the terminal), when level
 * is at or below threshold (error < warn < info < debug). */
void locus__log_at(locus_log_level threshold, locus_log_level level,
                   const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void locus__vlog_at(locus_log_level threshold, locus_log_level level,
                    const char *format, va_list args)
    __attribute__((format(printf, 3, 0)));

#endif
