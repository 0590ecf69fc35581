#include "run_command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Removes LOCUS_* variables but the plugin path. Names are collected
 * first: unsetenv while walking environ would skip entries. */
static void clear_locus_environment(void)
{
    char names[64][128];
    size_t count = 0;
    for (char **variable = environ; *variable != NULL && count < 64;
         ++variable) {
        const char *equals = strchr(*variable, '=');
        size_t length =
            equals != NULL ? (size_t)(equals - *variable) : strlen(*variable);
        if (strncmp(*variable, "LOCUS_", 6) != 0 ||
            length >= sizeof(names[0]) ||
            strncmp(*variable, "LOCUS_PLUGIN_PATH=", 18) == 0) {
            continue;
        }
        memcpy(names[count], *variable, length);
        names[count][length] = '\0';
        count++;
    }
    for (size_t i = 0; i < count; ++i) {
        unsetenv(names[i]);
    }
}

static void apply_environment(const char *const env[])
{
    for (size_t i = 0; env != NULL && env[i] != NULL; ++i) {
        const char *equals = strchr(env[i], '=');
        if (equals == NULL) {
            continue;
        }
        char name[128];
        size_t length = (size_t)(equals - env[i]);
        if (length >= sizeof(name)) {
            continue;
        }
        memcpy(name, env[i], length);
        name[length] = '\0';
        setenv(name, equals + 1, 1);
    }
}

/* The whole of a temporary file, NUL-terminated. */
static char *read_all(FILE *file, size_t *length)
{
    rewind(file);
    size_t capacity = 4096, used = 0;
    char *data = malloc(capacity);
    while (data != NULL) {
        size_t got = fread(data + used, 1, capacity - used - 1, file);
        used += got;
        if (got == 0) {
            break;
        }
        if (capacity - used - 1 == 0) {
            char *grown = realloc(data, 2 * capacity);
            if (grown == NULL) {
                free(data);
                return NULL;
            }
            data = grown;
            capacity *= 2;
        }
    }
    if (data != NULL) {
        data[used] = '\0';
        *length = used;
    }
    return data;
}

bool run_command(char *const argv[], const char *const env[],
                 command_result *result)
{
    memset(result, 0, sizeof(*result));
    /* Temporary files, not pipes: a child that fills one pipe while we
     * wait on the other cannot deadlock against a file. */
    FILE *out = tmpfile();
    FILE *err = tmpfile();
    if (out == NULL || err == NULL) {
        perror("tmpfile");
        goto close_files;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        goto close_files;
    }
    if (child == 0) {
        clear_locus_environment();
        apply_environment(env);
        if (dup2(fileno(out), STDOUT_FILENO) < 0 ||
            dup2(fileno(err), STDERR_FILENO) < 0) {
            _exit(126);
        }
        execv(argv[0], argv);
        perror(argv[0]);
        _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, 0) < 0) {
        perror("waitpid");
        goto close_files;
    }
    if (WIFEXITED(status)) {
        result->exit_status = WEXITSTATUS(status);
    } else {
        result->exit_status = -1;
        result->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    result->out = read_all(out, &result->out_length);
    result->err = read_all(err, &result->err_length);
    fclose(out);
    fclose(err);
    return result->out != NULL && result->err != NULL;
close_files:
    if (out != NULL) {
        fclose(out);
    }
    if (err != NULL) {
        fclose(err);
    }
    return false;
}

void command_result_free(command_result *result)
{
    free(result->out);
    free(result->err);
    memset(result, 0, sizeof(*result));
}

command_result run_logged(const char *path, const char *const env[],
                          const char *first, va_list rest)
{
    char *argv[RUN_LOGGED_MAX_ARGUMENTS + 2] = {(char *)path};
    size_t count = 1;
    for (const char *arg = first;
         arg != NULL && count <= RUN_LOGGED_MAX_ARGUMENTS;
         arg = va_arg(rest, const char *)) {
        argv[count++] = (char *)arg;
    }
    argv[count] = NULL;
    fputs("$", stdout);
    for (size_t i = 0; env != NULL && env[i] != NULL; ++i) {
        printf(" %s", env[i]);
    }
    for (size_t i = 0; i < count; ++i) {
        printf(" %s", argv[i]);
    }
    fputc('\n', stdout);
    command_result result;
    if (!run_command(argv, env, &result)) {
        fprintf(stderr, "FAIL: could not run %s\n", path);
        exit(1);
    }
    return result;
}
