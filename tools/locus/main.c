/* The `locus` command: shows the machine as Locus sees it and benchmarks
 * its kernels. This file dispatches subcommands and holds what they share
 * for reporting; each subcommand lives in its own file. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <locus/locus.h>

#include "args.h"
#include "cli.h"
#include "format.h"

typedef struct subcommand {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *out);
} subcommand;

static const subcommand subcommands[] = {
    {"info", "NUMA nodes, distances, backends, devices and LOCUS_* settings",
     info_command, info_usage},
    {"bench",
     "time reduce, gemm and conv on a device, checked against "
     "float64",
     bench_command, bench_usage},
    {"numa",
     "NUMA distances, measured bandwidth and latency, page placement, "
     "findings",
     numa_command, numa_usage},
    {"calibrate",
     "measure each device's rates for the scheduler and cache them",
     calibrate_command, calibrate_usage},
};

#define SUBCOMMAND_COUNT (sizeof(subcommands) / sizeof(subcommands[0]))

static void main_usage(FILE *out)
{
    fputs("usage: locus [--help | --version] <command> [options]\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < SUBCOMMAND_COUNT; ++i) {
        fprintf(out, "  %-9s  %s\n", subcommands[i].name,
                subcommands[i].summary);
    }
    fputs("  help       the usage of a command: locus help bench\n"
          "\n"
          "Every command takes --help, and --json for output that scripts "
          "read.\n"
          "Exit status: 0 success, 1 failure, 2 bad command line.\n",
          out);
}

void report_locus_failure(const char *what_format, ...)
{
    /* Copied first: nothing below is a Locus call, but keep it obviously
     * the detail of the failure being reported. */
    const char *detail = locus_last_error();
    fputs("locus: ", stderr);
    va_list arguments;
    va_start(arguments, what_format);
    vfprintf(stderr, what_format, arguments);
    va_end(arguments);
    fprintf(stderr, ": %s\n",
            detail != NULL && detail[0] != '\0'
                ? detail
                : "unknown error (no detail given)");
}

void report_context_failure(void)
{
    report_locus_failure("creating a context");
    bool any_set = false;
    for (char **variable = environ; *variable != NULL; ++variable) {
        if (strncmp(*variable, "LOCUS_", 6) != 0) {
            continue;
        }
        const char *equals = strchr(*variable, '=');
        if (equals == NULL) {
            continue;
        }
        char value[512];
        format_escaped(equals + 1, value, sizeof value);
        fprintf(stderr, "%s%.*s=\"%s\"",
                any_set ? ", " : "locus: set: ", (int)(equals - *variable),
                *variable, value);
        any_set = true;
    }
    if (any_set) {
        fputc('\n', stderr);
    }
}

int usage_error(const char *command, void (*usage)(FILE *out),
                const char *message_format, ...)
{
    fprintf(stderr, "locus%s%s: ", command != NULL ? " " : "",
            command != NULL ? command : "");
    va_list arguments;
    va_start(arguments, message_format);
    vfprintf(stderr, message_format, arguments);
    va_end(arguments);
    fputs("\n\n", stderr);
    usage(stderr);
    return EXIT_USAGE;
}

static const subcommand *find_subcommand(const char *name)
{
    for (size_t i = 0; i < SUBCOMMAND_COUNT; ++i) {
        if (strcmp(subcommands[i].name, name) == 0) {
            return &subcommands[i];
        }
    }
    return NULL;
}

static void print_version(void)
{
    /* The header this tool was built with and the library it runs on can
     * differ after an upgrade; show both. */
    printf("locus %d.%d.%d (liblocus %s)\n", LOCUS_VERSION_MAJOR,
           LOCUS_VERSION_MINOR, LOCUS_VERSION_PATCH, locus_version_string());
}

/* `locus help [command]` */
static int help_command(int argc, char **argv)
{
    if (argc < 2) {
        main_usage(stdout);
        return EXIT_SUCCESS;
    }
    if (argc > 2) {
        return usage_error("help", main_usage, "one command at a time");
    }
    const subcommand *command = find_subcommand(argv[1]);
    if (command == NULL) {
        return usage_error("help", main_usage, "unknown command \"%s\"",
                           argv[1]);
    }
    command->usage(stdout);
    return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage_error(NULL, main_usage, "which command?");
    }
    const char *first = argv[1];
    if (arg_is_flag(first, "--help", "-h")) {
        main_usage(stdout);
        return EXIT_SUCCESS;
    }
    if (arg_is_flag(first, "--version", "-V")) {
        print_version();
        return EXIT_SUCCESS;
    }
    if (strcmp(first, "help") == 0) {
        return help_command(argc - 1, argv + 1);
    }
    if (first[0] == '-') {
        return usage_error(NULL, main_usage, "unknown option \"%s\"", first);
    }
    const subcommand *command = find_subcommand(first);
    if (command == NULL) {
        return usage_error(NULL, main_usage, "unknown command \"%s\"", first);
    }
    int status = command->run(argc - 1, argv + 1);
    /* A closed or full stdout (locus info | head, a full disk) must not
     * pass for success. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("locus: writing the output");
        return status != EXIT_SUCCESS ? status : EXIT_FAILURE;
    }
    return status;
}
