/* Checks for the error paths: the status a call returned, and that the
 * thread's error detail names what was wrong. */
#ifndef LOCUS_TEST_EXPECT_ERROR_H
#define LOCUS_TEST_EXPECT_ERROR_H

#include <string.h>

#include "test_util.h"

/* Records a failure unless `call` returns `expected` and locus_last_error()
 * contains `fragment` (NULL: any detail, but not an empty one). */
#define TEST_ERROR(call, expected, fragment)                                   \
    test__error((call), (expected), (fragment), #call, __FILE__, __LINE__)

static inline int test__error(locus_status status, locus_status expected,
                              const char *fragment, const char *call,
                              const char *file, int line)
{
    const char *detail = locus_last_error();
    if (status != expected) {
        fprintf(stderr, "FAIL %s:%d: %s returned %s, expected %s (%s)\n", file,
                line, call, locus_status_name(status),
                locus_status_name(expected), detail);
        ++*test__failure_count();
        return 0;
    }
    if (detail[0] == '\0' || (fragment && !strstr(detail, fragment))) {
        fprintf(stderr,
                "FAIL %s:%d: %s: error detail '%s' does not mention '%s'\n",
                file, line, call, detail, fragment ? fragment : "anything");
        ++*test__failure_count();
        return 0;
    }
    return 1;
}

#endif
