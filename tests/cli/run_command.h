/* Runs the `locus` command under test and captures what it says, for the
 * cli tests: exit status, stdout and stderr, with a controlled
 * environment. */
#ifndef LOCUS_TEST_RUN_COMMAND_H
#define LOCUS_TEST_RUN_COMMAND_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct command_result {
    int exit_status; /* -1 when a signal ended it */
    int signal;      /* that signal, else 0 */
    char *out;       /* stdout, NUL-terminated */
    size_t out_length;
    char *err; /* stderr, NUL-terminated */
    size_t err_length;
} command_result;

/* Runs argv (argv[0] is the program's path, argv NULL-terminated). The
 * child starts from this environment without any LOCUS_* variable except
 * LOCUS_PLUGIN_PATH, so the user's settings cannot change the outcome;
 * then each "NAME=value" of env (NULL-terminated, may be NULL) is set.
 * Returns false when the program could not be run at all. */
bool run_command(char *const argv[], const char *const env[],
                 command_result *result);
void command_result_free(command_result *result);

/* The tests' way to run the command: the program at path with the
 * arguments first and those after it in rest up to a NULL (at most
 * RUN_LOGGED_MAX_ARGUMENTS; first NULL: none), under env as for
 * run_command. The command line is printed on stdout first, so that a
 * failure is easy to replay. A program that cannot be run at all ends the
 * test (exit 1): nothing after it could be checked. */
#define RUN_LOGGED_MAX_ARGUMENTS 14
command_result run_logged(const char *path, const char *const env[],
                          const char *first, va_list rest);

#endif
