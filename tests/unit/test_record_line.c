/* LOCUS_RECORD lines (docs/JSON.md): each is one JSON object that says
 * when it was written (ISO 8601 UTC), by which process (pid) and of which
 * MPI rank (the job's, from the launcher's variables, and the machine's
 * local rank as the context read it; null when there is none), followed by
 * the record's own fields. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cli/json_check.h"
#include "test_util.h"

/* Every variable a launcher may set that the record or the local rank
 * reads: cleared before each case so the harness's own cannot leak in. */
static const char *const launcher_variables[] = {
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MV2_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMIX_RANK",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE",
};

static void set_only(const char *const *pairs)
{
    for (size_t i = 0;
         i < sizeof launcher_variables / sizeof launcher_variables[0]; i++)
        unsetenv(launcher_variables[i]);
    for (size_t i = 0; pairs[i]; i += 2)
        setenv(pairs[i], pairs[i + 1], 1);
}

/* One reduce with a context recording to a fresh file; the file's text
 * (malloc'd) or NULL. */
static char *record_one_op(bool read_environment)
{
    char path[] = "/tmp/locus-record-line-XXXXXX";
    int fd = mkstemp(path);
    if (!TEST_EXPECT(fd >= 0, "mkstemp"))
        return NULL;
    close(fd);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = !read_environment;
    options.backends = "cpu";
    options.device = "cpu";
    options.record = path;
    locus_context *context = NULL;
    locus_buffer *buffer = NULL;
    float values[4] = {1, 2, 3, 4};
    double sum = 0;
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = 4;
    if (TEST_OK(locus_context_create(&options, &context)) == LOCUS_SUCCESS &&
        TEST_OK(locus_buffer_create(context, sizeof values, NULL, &buffer)) ==
            LOCUS_SUCCESS &&
        TEST_OK(locus_buffer_write(buffer, 0, values, sizeof values)) ==
            LOCUS_SUCCESS)
        TEST_OK(locus_reduce(context, NULL, &desc, buffer, &sum, NULL));
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);
    char *text = NULL;
    FILE *file = fopen(path, "r");
    if (file) {
        text = calloc(1, 8192);
        if (text)
            fread(text, 1, 8191, file);
        fclose(file);
    }
    unlink(path);
    return text;
}

/* "2026-12-03T10:11:12.123456Z" as seconds since the epoch; -1 when the
 * text is not that form. */
static double parse_timestamp(const char *text)
{
    struct tm utc;
    memset(&utc, 0, sizeof utc);
    int micro = -1, consumed = 0;
    if (strlen(text) != 27 ||
        sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ%n", &utc.tm_year,
               &utc.tm_mon, &utc.tm_mday, &utc.tm_hour, &utc.tm_min,
               &utc.tm_sec, &micro, &consumed) != 7 ||
        consumed != 27)
        return -1;
    utc.tm_year -= 1900;
    utc.tm_mon -= 1;
    return (double)timegm(&utc) + micro * 1e-6;
}

/* rank -1: null expected. */
static void expect_field(const json_value *line, const char *key, int expected,
                         const char *what)
{
    const json_value *value = json_get(line, key);
    if (expected < 0)
        TEST_EXPECT(json_is(value, JSON_NULL), "%s: %s is not null", what, key);
    else
        TEST_EXPECT(json_is(value, JSON_NUMBER) && value->number == expected,
                    "%s: %s is not %d", what, key, expected);
}

static void expect_line(const char *what, const char *const *variables,
                        bool read_environment, int rank, int local_rank)
{
    set_only(variables);
    /* clock_gettime, not time(): glibc's time() reads the coarse clock,
     * up to a tick behind the precise one the record's stamp comes from,
     * and a stamp of 17:54:24.000233 once fell after a time() of :23. */
    struct timespec start, end;
    clock_gettime(CLOCK_REALTIME, &start);
    char *text = record_one_op(read_environment);
    clock_gettime(CLOCK_REALTIME, &end);
    time_t before = start.tv_sec, after = end.tv_sec;
    if (!TEST_EXPECT(text != NULL, "%s: no record file", what))
        return;
    size_t length = strlen(text);
    TEST_EXPECT(length > 0 && text[length - 1] == '\n' &&
                    strchr(text, '\n') == text + length - 1,
                "%s: not one line: '%s'", what, text);
    char error[256];
    json_value *line = json_parse(text, length, error, sizeof error);
    if (TEST_EXPECT(line && json_is(line, JSON_OBJECT), "%s: '%s': %s", what,
                    text, line ? "not an object" : error)) {
        const json_value *stamp = json_get(line, "timestamp");
        double when =
            json_is(stamp, JSON_STRING) ? parse_timestamp(stamp->string) : -1;
        /* The stamp is the wall clock's, in UTC: between the two reads
         * around the op (which truncate to the second). */
        TEST_EXPECT(when >= (double)before && when < (double)after + 1,
                    "%s: timestamp %s is not ISO 8601 UTC between %lld and "
                    "%lld",
                    what, json_is(stamp, JSON_STRING) ? stamp->string : "-",
                    (long long)before, (long long)after);
        expect_field(line, "pid", (int)getpid(), what);
        expect_field(line, "rank", rank, what);
        expect_field(line, "local_rank", local_rank, what);
        const json_value *op = json_get(line, "op");
        TEST_EXPECT(
            json_is(op, JSON_STRING) && strcmp(op->string, "reduce") == 0,
            "%s: the record's own fields are missing: '%s'", what, text);
        TEST_EXPECT(json_is(json_get(line, "estimates"), JSON_ARRAY),
                    "%s: the record's appended fields are missing", what);
    }
    json_free(line);
    free(text);
}

int main(void)
{
    static const char *const none[] = {NULL};
    expect_line("no launcher", none, true, -1, -1);

    static const char *const open_mpi[] = {"OMPI_COMM_WORLD_RANK", "3", NULL};
    expect_line("Open MPI", open_mpi, true, 3, -1);
    /* The rank names the writer even when the context reads no LOCUS_*
     * variable; the local rank is the context's, which then reads none. */
    expect_line("Open MPI, environment ignored", open_mpi, false, 3, -1);

    static const char *const hydra[] = {
        "PMI_RANK", "5", "MPI_LOCALRANKID", "1", "MPI_LOCALNRANKS", "2", NULL};
    expect_line("Hydra", hydra, true, 5, 1);

    static const char *const pmix[] = {"PMIX_RANK", "12", NULL};
    expect_line("PMIx", pmix, true, 12, -1);

    /* The first launcher that speaks decides, as for the local rank. */
    static const char *const both[] = {"OMPI_COMM_WORLD_RANK", "2", "PMI_RANK",
                                       "9", NULL};
    expect_line("Open MPI before Hydra", both, true, 2, -1);

    static const char *const garbled[] = {"OMPI_COMM_WORLD_RANK", "two",
                                          "PMI_RANK", "9", NULL};
    expect_line("a garbled rank", garbled, true, -1, -1);

    /* A Slurm batch script is no task of a step. */
    static const char *const batch[] = {"SLURM_PROCID", "0", NULL};
    expect_line("Slurm batch script", batch, true, -1, -1);
    static const char *const step[] = {"SLURM_PROCID",
                                       "4",
                                       "SLURM_LOCALID",
                                       "0",
                                       "SLURM_NODEID",
                                       "1",
                                       "SLURM_STEP_TASKS_PER_NODE",
                                       "4(x2)",
                                       NULL};
    expect_line("Slurm step", step, true, 4, 0);
    return test_exit_code();
}
