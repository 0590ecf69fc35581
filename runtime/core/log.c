#include "log.h"

#include <stdio.h>

#include "status.h"

void locus__vlog_at(locus_log_level threshold, locus_log_level level,
                    const char *format, va_list args)
{
    if (level > threshold)
        return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char text[1024];
    vsnprintf(text, sizeof text, format, args);
    locus__escape_controls(text, sizeof text);
    fprintf(stderr, "locus %s: %s\n", names[level], text);
}

void locus__log_at(locus_log_level threshold, locus_log_level level,
                   const char *format, ...)
{
    va_list args;
    va_start(args, format);
    locus__vlog_at(threshold, level, format, args);
    va_end(args);
}
