/* The failure-counting check of the command tests (tests/cli/cli_*.c
 * and tests/numa/test_numa_cli.c): one run reports every broken
 * expectation instead of stopping at the first. Header only: each test is
 * one translation unit, with its own count. */
#ifndef LOCUS_TEST_CLI_EXPECT_H
#define LOCUS_TEST_CLI_EXPECT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "run_command.h"

/* Failed expectations so far; a test compares it before and after a step
 * to show the command's output only when that step failed. */
static int failures;

static inline bool expect(bool condition, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Records a failure when condition is false, with a printf-style
 * explanation; returns condition. */
static inline bool expect(bool condition, const char *format, ...)
{
    if (!condition) {
        va_list arguments;
        va_start(arguments, format);
        fputs("FAIL: ", stderr);
        vfprintf(stderr, format, arguments);
        fputc('\n', stderr);
        va_end(arguments);
        failures++;
    }
    return condition;
}

/* On a failed expectation since failures_before, the command's output,
 * which explains more than its status. */
static inline void show_output_if_failed(int failures_before,
                                         const command_result *result)
{
    if (failures > failures_before) {
        fprintf(stderr,
                "exit status %d (signal %d)\n--- stdout\n%s--- "
                "stderr\n%s---\n",
                result->exit_status, result->signal, result->out, result->err);
    }
}

/* One named case of a command test, run as `test <path to locus> <case>`. */
typedef struct cli_case {
    const char *name;
    void (*run)(void);
} cli_case;

/* Sets *locus_path from argv[1] and runs the case argv[2] names: the exit
 * status is 0 when no expectation failed, 1 when one did, 2 for a bad
 * command line or an unknown case. */
static inline int run_named_case(int argc, char **argv, const char **locus_path,
                                 const cli_case *cases, size_t count)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <path to locus> <case>\n", argv[0]);
        return 2;
    }
    *locus_path = argv[1];
    for (size_t i = 0; i < count; ++i) {
        if (strcmp(cases[i].name, argv[2]) == 0) {
            cases[i].run();
            printf("%s: %d failure(s)\n", argv[2], failures);
            return failures == 0 ? 0 : 1;
        }
    }
    fprintf(stderr, "unknown case \"%s\"\n", argv[2]);
    return 2;
}

#endif
