#include "progress.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

static bool progress_enabled;
static bool progress_visible;
static char progress_step[48];

void progress_init(void)
{
    progress_enabled = isatty(STDERR_FILENO) == 1;
}

void progress_set_step(size_t step, size_t steps)
{
    snprintf(progress_step, sizeof(progress_step), "[%zu/%zu] ", step, steps);
}

void progress_show(const char *format, ...)
{
    if (!progress_enabled) {
        return;
    }
    /* Carriage return and "erase to end of line": every terminal emulator
     * in use understands both. */
    fputs("\r\033[K", stderr);
    fputs(progress_step, stderr);
    va_list arguments;
    va_start(arguments, format);
    vfprintf(stderr, format, arguments);
    va_end(arguments);
    fflush(stderr);
    progress_visible = true;
}

void progress_clear(void)
{
    if (!progress_visible) {
        return;
    }
    fputs("\r\033[K", stderr);
    fflush(stderr);
    progress_visible = false;
}
