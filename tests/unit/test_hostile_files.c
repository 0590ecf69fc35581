/* Hostile files and values, as a tester planted them (docs/RELIABILITY.md):
 * FIFOs where Locus reads or appends (the calibration cache, LOCUS_RECORD,
 * LOCUS_TOPOLOGY) must not hang it; links planted at the calibration
 * writer's paths must not redirect its writes; a stopped process holding
 * the calibration lock must not stall the first op for more than a
 * bounded wait; a full disk must not leave half a record line; a cache
 * directory that cannot be made must be said; a page query past the end
 * of the address space is refused; control characters in a value are
 * escaped in the message. An alarm turns a hang into a failure. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "expect_error.h"

static char root[] = "/tmp/locus-hostile-XXXXXX";
static char cache_dir[300];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void on_alarm(int signal)
{
    (void)signal;
    static const char message[] = "FAIL: hung (alarm)\n";
    (void)!write(2, message, sizeof message - 1);
    _exit(1);
}

static locus_context *make(const char *record, const char *topology,
                           locus_status want)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.threads = "1";
    options.record = record;
    options.topology = topology;
    options.log = "error";
    locus_context *context = NULL;
    locus_status status = locus_context_create(&options, &context);
    TEST_EXPECT(status == want, "context with record %s, topology %s: %s (%s)",
                record ? record : "-", topology ? topology : "-",
                locus_status_name(status), locus_last_error());
    return status == LOCUS_SUCCESS ? context : NULL;
}

static bool last_error_has(const char *text)
{
    return strstr(locus_last_error(), text) != NULL;
}

static void test_fifos(void)
{
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s/fifo", root);
    TEST_EXPECT(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    alarm(20);
    make(fifo, NULL, LOCUS_ERROR_UNUSABLE_ENVIRONMENT);
    TEST_EXPECT(last_error_has("not a regular file"), "record fifo: %s",
                locus_last_error());
    make(NULL, fifo, LOCUS_ERROR_TOPOLOGY);
    TEST_EXPECT(last_error_has("not a regular file"), "topology fifo: %s",
                locus_last_error());
    alarm(0);
    unlink(fifo);
}

/* The cache file of the cpu device: measured once, then found by name. */
static bool cache_file(char *path, size_t size)
{
    DIR *dir = opendir(cache_dir);
    if (!dir)
        return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(dir)) != NULL;)
        if (strncmp(e->d_name, "calibration-", 12) == 0 &&
            strstr(e->d_name, ".txt")) {
            snprintf(path, size, "%s/%s", cache_dir, e->d_name);
            found = true;
        }
    closedir(dir);
    return found;
}

static locus_status calibrate(int remeasure, locus_calibration *c)
{
    locus_context *context = make(NULL, NULL, LOCUS_SUCCESS);
    if (!context)
        return LOCUS_ERROR_BACKEND;
    locus_device *cpu = NULL;
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    locus_calibration_init(c);
    locus_status status = locus_device_calibration(cpu, remeasure, c);
    locus_context_destroy(context);
    return status;
}

static bool same_contents(const char *path, const char *want)
{
    char text[256] = "";
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    size_t n = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[n] = '\0';
    return strcmp(text, want) == 0;
}

static void plant_victim(const char *victim)
{
    FILE *file = fopen(victim, "w");
    if (file) {
        fputs("the user's own file\n", file);
        fclose(file);
    }
    chmod(victim, 0600);
}

static void test_calibration_cache(void)
{
    locus_calibration c;
    TEST_OK(calibrate(1, &c));
    char path[700], lock[700], victim[400], old_temporary[800];
    if (!TEST_EXPECT(cache_file(path, sizeof path), "no cache file in %s",
                     cache_dir))
        return;
    snprintf(lock, sizeof lock, "%.*s.lock", (int)(strlen(path) - 4), path);
    snprintf(victim, sizeof victim, "%s/victim", root);

    /* A FIFO as the cache file: read without hanging, then replaced. */
    unlink(path);
    TEST_EXPECT(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    alarm(30);
    TEST_OK(calibrate(0, &c));
    alarm(0);
    struct stat st;
    TEST_EXPECT(lstat(path, &st) == 0 && S_ISREG(st.st_mode),
                "the fifo at %s was not replaced by a cache file", path);

    /* Links at the old predictable temporary, at the lock and at the cache
     * file itself: the victim is never written. */
    plant_victim(victim);
    snprintf(old_temporary, sizeof old_temporary, "%s.%ld.tmp", path,
             (long)getpid());
    unlink(lock);
    TEST_EXPECT(symlink(victim, old_temporary) == 0 &&
                    symlink(victim, lock) == 0,
                "planting links");
    TEST_OK(calibrate(1, &c));
    TEST_EXPECT(same_contents(victim, "the user's own file\n"),
                "the victim file was written through a planted link");
    unlink(path);
    TEST_EXPECT(symlink(victim, path) == 0, "planting a link at %s", path);
    TEST_OK(calibrate(0, &c));
    TEST_EXPECT(same_contents(victim, "the user's own file\n"),
                "the victim file was written through the cache file's link");
    TEST_EXPECT(lstat(path, &st) == 0 && S_ISREG(st.st_mode),
                "the link at %s was followed, not replaced", path);
    TEST_EXPECT(stat(victim, &st) == 0 && (st.st_mode & 0777) == 0600,
                "the victim's mode changed to %o", st.st_mode & 0777);
    unlink(old_temporary);
    unlink(lock);
}

/* A process that takes the calibration lock and stops (SIGSTOP): the
 * first op of another process goes on after the bounded wait. */
static void test_stopped_lock_holder(void)
{
    char path[700], lock[700];
    if (!cache_file(path, sizeof path))
        return;
    snprintf(lock, sizeof lock, "%.*s.lock", (int)(strlen(path) - 4), path);
    unlink(path); /* nothing cached: the op must measure, or wait */
    pid_t child = fork();
    if (child == 0) {
        int fd = open(lock, O_RDWR | O_CREAT, 0644);
        if (fd < 0 || flock(fd, LOCK_EX) != 0)
            _exit(2);
        raise(SIGSTOP);
        _exit(0);
    }
    int status = 0;
    TEST_EXPECT(waitpid(child, &status, WUNTRACED) == child &&
                    WIFSTOPPED(status),
                "the lock holder did not stop");
    alarm(30);
    const double start = now();
    locus_calibration c;
    TEST_OK(calibrate(0, &c));
    const double waited = now() - start;
    alarm(0);
    TEST_EXPECT(waited < 10.0,
                "the first op waited %.1f s for a stopped "
                "lock holder",
                waited);
    TEST_EXPECT(strcmp(c.source, "nominal") == 0,
                "with the lock held, source '%s' (want nominal)", c.source);
    printf("stopped lock holder: went on after %.2f s with '%s' figures\n",
           waited, c.source);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
}

/* A cache directory that cannot be made (its parent is a file): remeasure
 * says why and fails, the figures are still returned. */
static void test_unwritable_cache(void)
{
    char file[400], below[500];
    snprintf(file, sizeof file, "%s/a-file", root);
    plant_victim(file);
    snprintf(below, sizeof below, "%s/cache", file);
    setenv("XDG_CACHE_HOME", below, 1);
    locus_calibration c;
    locus_status status = calibrate(1, &c);
    TEST_EXPECT(status == LOCUS_ERROR_SYSTEM &&
                    last_error_has("could not be cached") &&
                    last_error_has("Not a directory"),
                "remeasure into an unmakeable directory: %s (%s)",
                locus_status_name(status), locus_last_error());
    TEST_EXPECT(strcmp(c.source, "measured") == 0 &&
                    c.gemm_flops_per_second > 0,
                "figures not returned: source '%s'", c.source);
    setenv("XDG_CACHE_HOME", root, 1);
}

/* The record file on a disk that fills mid-line (RLIMIT_FSIZE stands in
 * for it): whole lines only. Run in a child, whose limit is its own. */
static void test_record_full_disk(void)
{
    char record[400];
    snprintf(record, sizeof record, "%s/record.jsonl", root);
    pid_t child = fork();
    if (child == 0) {
        locus_context *context = make(record, NULL, LOCUS_SUCCESS);
        if (!context)
            _exit(2);
        locus_buffer *x = NULL;
        float ones[64];
        for (int i = 0; i < 64; i++)
            ones[i] = 1.0f;
        locus_buffer_create(context, sizeof ones, NULL, &x);
        locus_buffer_write(x, 0, ones, sizeof ones);
        locus_device *cpu = NULL;
        locus_device_find(context, "cpu", &cpu);
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = 64;
        double sum;
        locus_reduce(context, cpu, &desc, x, &sum, NULL);
        struct stat st;
        stat(record, &st);
        /* Room for half of the next line. */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit = {(rlim_t)st.st_size * 3 / 2,
                               (rlim_t)st.st_size * 3 / 2};
        setrlimit(RLIMIT_FSIZE, &limit);
        for (int i = 0; i < 3; i++)
            locus_reduce(context, cpu, &desc, x, &sum, NULL);
        locus_buffer_destroy(x);
        locus_context_destroy(context);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    TEST_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "record child: status %d", status);
    FILE *file = fopen(record, "r");
    if (!TEST_EXPECT(file != NULL, "no record file"))
        return;
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[n] = '\0';
    int lines = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        TEST_EXPECT(end != NULL, "a torn last line: '%.60s'", line);
        if (!end)
            break;
        TEST_EXPECT(line[0] == '{' && end[-1] == '}', "a torn line: '%.60s'",
                    line);
        lines++;
        line = end + 1;
    }
    TEST_EXPECT(lines == 1, "%d whole lines, want 1", lines);
}

static void test_page_query_wrap(void)
{
    char memory[64];
    locus_page_report report;
    locus_page_report_init(&report);
    TEST_ERROR(locus_query_pages(memory, SIZE_MAX, 16, &report),
               LOCUS_ERROR_SIZE_OVERFLOW, "past the end");
    TEST_ERROR(
        locus_query_pages(memory, SIZE_MAX - (uintptr_t)memory, 16, &report),
        LOCUS_ERROR_SIZE_OVERFLOW, "past the end");
}

static void test_escaped_value(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.device = "cu\x1b[31mda\nx";
    locus_context *context = NULL;
    TEST_EXPECT(locus_context_create(&options, &context) ==
                    LOCUS_ERROR_BAD_ENVIRONMENT,
                "a device selector with an escape sequence was accepted");
    const char *message = locus_last_error();
    TEST_EXPECT(strchr(message, '\x1b') == NULL &&
                    strchr(message, '\n') == NULL &&
                    strstr(message, "cu\\x1b[31mda\\nx") != NULL,
                "control characters not escaped: %s", message);
    locus_context_destroy(context);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    if (!mkdtemp(root))
        return 1;
    setenv("XDG_CACHE_HOME", root, 1);
    snprintf(cache_dir, sizeof cache_dir, "%s/locus", root);
    test_fifos();
    test_calibration_cache();
    test_stopped_lock_holder();
    test_unwritable_cache();
    test_record_full_disk();
    test_page_query_wrap();
    test_escaped_value();
    char command[400];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_exit_code();
}
