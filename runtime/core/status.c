#include "status.h"

#include <stdio.h>

/* Long enough for a backend's compiler log excerpt plus our own context. */
static _Thread_local char last_error[2048];

const char *locus_status_str(locus_status status)
{
    switch (status) {
#define LOCUS_STATUS_MESSAGE_(name, value, message)                            \
    case name:                                                                 \
        return message;
        LOCUS_STATUS_LIST(LOCUS_STATUS_MESSAGE_)
#undef LOCUS_STATUS_MESSAGE_
    }
    return "unknown status";
}

const char *locus_status_name(locus_status status)
{
    switch (status) {
#define LOCUS_STATUS_NAME_(name, value, message)                               \
    case name:                                                                 \
        return #name;
        LOCUS_STATUS_LIST(LOCUS_STATUS_NAME_)
#undef LOCUS_STATUS_NAME_
    }
    return "LOCUS_STATUS_UNKNOWN";
}

const char *locus_last_error(void)
{
    return last_error;
}

void locus__clear_error(void)
{
    last_error[0] = '\0';
}

void locus__escape_controls(char *text, size_t capacity)
{
    char escaped[2048];
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text;
         *c && used + 5 < sizeof escaped; c++) {
        if (*c >= 0x20 && *c != 0x7f) {
            escaped[used++] = (char)*c;
            continue;
        }
        const char *named = *c == '\n'   ? "\\n"
                            : *c == '\t' ? "\\t"
                            : *c == '\r' ? "\\r"
                                         : NULL;
        used += named ? (size_t)snprintf(escaped + used, 3, "%s", named)
                      : (size_t)snprintf(escaped + used, 5, "\\x%02x", *c);
    }
    escaped[used] = '\0';
    snprintf(text, capacity, "%s", escaped);
}

locus_status locus__vfail(locus_status status, const char *format, va_list args)
{
    int prefix = snprintf(last_error, sizeof last_error,
                          "%s: ", locus_status_str(status));
    if (prefix < 0 || (size_t)prefix >= sizeof last_error)
        return status;
    vsnprintf(last_error + prefix, sizeof last_error - (size_t)prefix, format,
              args);
    locus__escape_controls(last_error, sizeof last_error);
    return status;
}

locus_status locus__fail(locus_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    locus__vfail(status, format, args);
    va_end(args);
    return status;
}
