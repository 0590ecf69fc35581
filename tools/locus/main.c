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
          "--version: the version, the backends built and found, the CPU "
          "kernel\n"
          "tables and the hwloc this build uses.\n"
          "\n"
          "Exit status, every command alike:\n"
          "  0  success\n"
          "  1  failure: what was asked could not be done or did not pass "
          "(a\n"
          "     device that is not there, a result above tolerance, "
          "nothing\n"
          "     measured, a file that cannot be written); the reason is on\n"
          "     stderr, and `locus info` still prints its report\n"
          "  2  a bad command line: an unknown command or option, a bad "
          "value\n"
          "     (a --device that is no selector, a --size that does not "
          "parse);\n"
          "     the usage follows the reason on stderr\n",
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

/* Whether a backend's name is one item's backend of a selector list
 * ("cuda:1,opencl:gpu" names cuda and opencl). */
static bool selector_names_backend(const char *selector, const char *backend)
{
    size_t length = strlen(backend);
    for (const char *item = selector; item != NULL;) {
        if (strncmp(item, backend, length) == 0 &&
            strchr(":,", item[length]) != NULL) {
            return true;
        }
        item = strchr(item, ',');
        item = item != NULL ? item + 1 : NULL;
    }
    return false;
}

/* Calls found(backend, state) for each absent backend the selector names. */
static void
for_each_absent_backend(locus_context *context, const char *selector,
                        void (*found)(const locus_backend_info *, void *),
                        void *state)
{
    size_t count = 0;
    if (locus_backend_count(context, &count) != LOCUS_SUCCESS) {
        return;
    }
    for (size_t i = 0; i < count; ++i) {
        locus_backend_info backend;
        locus_backend_info_init(&backend);
        if (locus_backend_get(context, i, &backend) == LOCUS_SUCCESS &&
            !backend.available &&
            selector_names_backend(selector, backend.name)) {
            found(&backend, state);
        }
    }
}

typedef struct text_buffer {
    char *text;
    size_t capacity;
    size_t used;
} text_buffer;

static void append_absent_backend(const locus_backend_info *backend,
                                  void *state)
{
    text_buffer *buffer = state;
    if (buffer->used + 1 >= buffer->capacity) {
        return;
    }
    int written =
        snprintf(buffer->text + buffer->used, buffer->capacity - buffer->used,
                 "%s%s: %s", buffer->used == 0 ? " (" : "; ", backend->name,
                 backend->reason);
    if (written > 0) {
        size_t room = buffer->capacity - buffer->used - 1;
        buffer->used += (size_t)written < room ? (size_t)written : room;
    }
}

void describe_absent_backends(locus_context *context, const char *selector,
                              char *text, size_t capacity)
{
    if (capacity == 0) {
        return;
    }
    text[0] = '\0';
    text_buffer buffer = {text, capacity, 0};
    for_each_absent_backend(context, selector, append_absent_backend, &buffer);
    if (buffer.used > 0 && buffer.used + 1 < capacity) {
        text[buffer.used] = ')';
        text[buffer.used + 1] = '\0';
    }
}

static void print_absent_backend(const locus_backend_info *backend, void *state)
{
    (void)state;
    fprintf(stderr, "locus: %s: %s\n", backend->name, backend->reason);
}

void report_absent_backends(locus_context *context, const char *selector)
{
    for_each_absent_backend(context, selector, print_absent_backend, NULL);
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

#ifndef LOCUS_BUILT_BACKENDS
#define LOCUS_BUILT_BACKENDS "cpu" /* tools/meson.build defines it */
#endif

static bool backend_was_built(const char *name)
{
    const char *built = LOCUS_BUILT_BACKENDS;
    size_t length = strlen(name);
    for (const char *word = built; *word != '\0';) {
        size_t word_length = strcspn(word, " ");
        if (word_length == length && strncmp(word, name, length) == 0) {
            return true;
        }
        word += word_length;
        word += strspn(word, " ");
    }
    return false;
}

/* Every backend with whether this build made it and whether it was found
 * (loaded, with devices), from a context that reads no LOCUS_* variable
 * but the module path: what the machine offers, not what a setting
 * narrowed it to. Returns false when no context could be made. */
static bool print_backends(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.plugin_path = getenv("LOCUS_PLUGIN_PATH");
    options.log = "error";
    locus_context *context = NULL;
    if (locus_context_create(&options, &context) != LOCUS_SUCCESS) {
        report_locus_failure("creating a context to list the backends");
        return false;
    }
    printf("backends (built: %s):\n", LOCUS_BUILT_BACKENDS);
    size_t count = 0;
    locus_backend_count(context, &count);
    for (size_t i = 0; i < count; ++i) {
        locus_backend_info backend;
        locus_backend_info_init(&backend);
        if (locus_backend_get(context, i, &backend) != LOCUS_SUCCESS) {
            continue;
        }
        printf("  %-7s %s; %s: %s\n", backend.name,
               backend_was_built(backend.name) ? "built" : "not built",
               backend.available ? "found" : "not found", backend.reason);
    }
    locus_context_destroy(context);
    return true;
}

/* The version, and what a bug report needs of the build: the backends,
 * the CPU kernel tables and the hwloc it was built with. */
static int print_version(void)
{
    /* The header this tool was built with and the library it runs on can
     * differ after an upgrade; show both. */
    printf("locus %d.%d.%d (liblocus %s)\n", LOCUS_VERSION_MAJOR,
           LOCUS_VERSION_MINOR, LOCUS_VERSION_PATCH, locus_version_string());
    locus_build_info build;
    locus_build_info_init(&build);
    if (locus_build_info_get(&build) != LOCUS_SUCCESS) {
        report_locus_failure("reading what liblocus was built with");
        return EXIT_FAILURE;
    }
    printf("cpu kernels: %s (this cpu runs %s)\n", build.cpu_isa_tables,
           build.cpu_isa_best);
    printf("hwloc: built with %s, API %u.%u loaded\n", build.hwloc_built,
           build.hwloc_api_loaded >> 16, build.hwloc_api_loaded >> 8 & 0xffu);
    return print_backends() ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* `locus help [command]` */
static int help_command(int argc, char **argv)
{
    /* `locus help --help` and `locus help help` ask about help itself. */
    if (argc < 2 || (argc == 2 && (arg_is_flag(argv[1], "--help", "-h") ||
                                   strcmp(argv[1], "help") == 0))) {
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
        int status = print_version();
        if (fflush(stdout) != 0 || ferror(stdout)) {
            perror("locus: writing the output");
            return EXIT_FAILURE;
        }
        return status;
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
