/* What the `locus` subcommands share: exit statuses, their entry points and
 * how failures are reported, so every subcommand speaks the same way. */
#ifndef LOCUS_TOOL_CLI_H
#define LOCUS_TOOL_CLI_H

#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

/* EXIT_SUCCESS (0) and EXIT_FAILURE (1) come from stdlib.h; 2 is the
 * conventional status for a command line that could not be understood. */
#define EXIT_USAGE 2

/* Each takes the arguments after its own name (argv[0] is the name). */
int info_command(int argc, char **argv);
int bench_command(int argc, char **argv);
int numa_command(int argc, char **argv);
int calibrate_command(int argc, char **argv);
/* `locus bench sched` (bench_sched.c), reached through bench_command. */
int bench_sched_command(int argc, char **argv);
void bench_sched_usage(FILE *out);

void info_usage(FILE *out);
void bench_usage(FILE *out);
void numa_usage(FILE *out);
void calibrate_usage(FILE *out);

/* "locus: <what>: <locus_last_error()>" on stderr. */
void report_locus_failure(const char *what_format, ...)
    __attribute__((format(printf, 1, 2)));

/* Reports a failed locus_context_create. A bad LOCUS_* value is the usual
 * cause, so the variables that are set are listed with their values. */
void report_context_failure(void);

/* Why the backends that a device selector names have no device here, from
 * their reasons: " (cuda: module locus-cuda.so not found in ...)", or ""
 * when the selector names no absent backend. */
void describe_absent_backends(locus_context *context, const char *selector,
                              char *text, size_t capacity);
/* The same on stderr, after a selector matched nothing: one
 * "locus: <backend>: <reason>" line per absent backend it names. */
void report_absent_backends(locus_context *context, const char *selector);

/* "locus <command>: <message>", a blank line and the usage, on stderr;
 * returns EXIT_USAGE for `return usage_error(...)`. */
int usage_error(const char *command, void (*usage)(FILE *out),
                const char *message_format, ...)
    __attribute__((format(printf, 3, 4)));

#endif
