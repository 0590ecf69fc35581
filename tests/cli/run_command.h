/* Runs the `locus` command under test and captures what it says, for the
 * cli tests: exit status, stdout and stderr, with a controlled
 * environment. */
#ifndef LOCUS_TEST_RUN_COMMAND_H
#define LOCUS_TEST_RUN_COMMAND_H

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

#endif
