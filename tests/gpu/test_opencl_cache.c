/* The OpenCL program cache (backends/opencl/opencl_program.c): a second
 * context loads the binary the first one built; a damaged, a truncated and
 * a garbage cache file are rebuilt and replaced, not trusted; two contexts
 * building at once in two threads leave one valid file and no temporary
 * files; and a kernel that does not compile fails the op with
 * LOCUS_ERROR_BACKEND and the compiler's build log in the error detail
 * under LOCUS_STRICT=1 (without it the op falls back to the CPU, with the
 * log in the warning: docs/SCHEDULER.md).
 *
 * What the cache did is read from the test-only report file
 * (LOCUS_OPENCL_CACHE_REPORT, one line "<event> <file>" per program). Each
 * part uses its own fresh directory (LOCUS_OPENCL_CACHE_DIR). Never
 * skipped. */
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_opencl_common.h"

static char root[256];
static char report_path[320];

/* The last event of the report and its file. */
static int last_event(char *event, size_t event_size, char *file,
                      size_t file_size)
{
    FILE *report = fopen(report_path, "r");
    if (report == NULL)
        return 0;
    char line[4400], last[4400] = "";
    while (fgets(line, sizeof line, report) != NULL)
        snprintf(last, sizeof last, "%s", line);
    fclose(report);
    char *space = strchr(last, ' ');
    if (space == NULL)
        return 0;
    *space = '\0';
    snprintf(event, event_size, "%s", last);
    snprintf(file, file_size, "%s", space + 1);
    file[strcspn(file, "\n")] = '\0';
    return 1;
}

/* A context, one reduce on the device under test, checked, destroyed. */
static locus_status one_reduce(void)
{
    locus_context *context = NULL;
    locus_device *device = NULL, *cpu = NULL;
    if (opencl_test_open(&context, &device, &cpu) != 0)
        return LOCUS_ERROR_BACKEND;
    float x[1000];
    double expected = 0.0;
    for (int i = 0; i < 1000; i++) {
        x[i] = (float)(i % 13) - 6.0f;
        expected += x[i];
    }
    locus_buffer *buffer = cuda_test_buffer(context, x, 1000);
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = 1000;
    double result = NAN;
    locus_status status =
        locus_reduce(context, device, &desc, buffer, &result, NULL);
    if (status == LOCUS_SUCCESS)
        CHECK(result == expected, "reduce %.17g, expected %.17g", result,
              expected);
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);
    return status;
}

/* Points the cache at a fresh directory under root. */
static void use_directory(const char *name, char *dir, size_t size)
{
    snprintf(dir, size, "%s/%s", root, name);
    setenv("LOCUS_OPENCL_CACHE_DIR", dir, 1);
}

static void expect(const char *step, const char *wanted, char *file,
                   size_t file_size)
{
    char event[64] = "";
    int found = last_event(event, sizeof event, file, file_size);
    CHECK(found && strcmp(event, wanted) == 0,
          "%s: cache event \"%s\", "
          "expected \"%s\"",
          step, found ? event : "(none)", wanted);
    printf("%s: %s %s\n", step, event, found ? file : "");
}

static void check_reuse_and_damage(void)
{
    char dir[300], file[4200] = "";
    use_directory("reuse", dir, sizeof dir);
    CHECK(one_reduce() == LOCUS_SUCCESS, "first context: %s",
          locus_last_error());
    expect("first context", "built", file, sizeof file);
    CHECK(one_reduce() == LOCUS_SUCCESS, "second context: %s",
          locus_last_error());
    expect("second context", "loaded", file, sizeof file);

    struct stat info;
    CHECK(stat(file, &info) == 0 && info.st_size > 64, "cache file %s", file);
    if (stat(file, &info) != 0 || info.st_size <= 64)
        return;
    const long size = (long)info.st_size;

    /* One byte of the payload flipped: the hash no longer matches. */
    FILE *f = fopen(file, "r+b");
    CHECK(f != NULL, "opening %s", file);
    if (f != NULL) {
        fseek(f, size / 2, SEEK_SET);
        int byte = fgetc(f);
        fseek(f, size / 2, SEEK_SET);
        fputc(byte ^ 0x5a, f);
        fclose(f);
    }
    CHECK(one_reduce() == LOCUS_SUCCESS, "after corruption: %s",
          locus_last_error());
    expect("corrupted file", "rebuilt-damaged", file, sizeof file);
    CHECK(one_reduce() == LOCUS_SUCCESS, "after the rebuild: %s",
          locus_last_error());
    expect("after the corrupted file's rebuild", "loaded", file, sizeof file);

    /* Cut in half: the length no longer matches. */
    CHECK(truncate(file, size / 2) == 0, "truncating %s", file);
    CHECK(one_reduce() == LOCUS_SUCCESS, "after truncation: %s",
          locus_last_error());
    expect("truncated file", "rebuilt-damaged", file, sizeof file);
    CHECK(stat(file, &info) == 0 && (long)info.st_size == size,
          "the rebuilt file has %lld bytes, the original %ld",
          (long long)info.st_size, size);

    /* Shorter than the header. */
    f = fopen(file, "wb");
    if (f != NULL) {
        fputs("LOCUS", f);
        fclose(f);
    }
    CHECK(one_reduce() == LOCUS_SUCCESS, "after garbage: %s",
          locus_last_error());
    expect("garbage file", "rebuilt-damaged", file, sizeof file);
    CHECK(one_reduce() == LOCUS_SUCCESS, "after the rebuild: %s",
          locus_last_error());
    expect("after the garbage file's rebuild", "loaded", file, sizeof file);
}

static void *reduce_thread(void *arg)
{
    *(locus_status *)arg = one_reduce();
    return NULL;
}

static void check_concurrent_writers(void)
{
    char dir[300], file[4200] = "";
    use_directory("concurrent", dir, sizeof dir);
    enum { THREADS = 2 };
    pthread_t threads[THREADS];
    locus_status statuses[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, reduce_thread, &statuses[i]) ==
                  0,
              "pthread_create");
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(statuses[i] == LOCUS_SUCCESS, "thread %d: %s", i,
              locus_status_name(statuses[i]));
    }
    /* Whichever rename came last left a whole file. */
    CHECK(one_reduce() == LOCUS_SUCCESS, "after the concurrent builds: %s",
          locus_last_error());
    expect("after two concurrent builds", "loaded", file, sizeof file);
    DIR *listing = opendir(dir);
    CHECK(listing != NULL, "listing %s", dir);
    size_t entries = 0;
    for (struct dirent *entry; listing && (entry = readdir(listing));) {
        if (entry->d_name[0] == '.')
            continue;
        entries++;
        CHECK(strstr(entry->d_name, ".bin") != NULL &&
                  strlen(strstr(entry->d_name, ".bin")) == 4,
              "leftover file %s in the cache", entry->d_name);
    }
    if (listing != NULL)
        closedir(listing);
    CHECK(entries == 1, "%zu files in the cache, expected 1", entries);
}

static void check_build_failure(void)
{
    char dir[300];
    use_directory("broken", dir, sizeof dir);
    setenv("LOCUS_OPENCL_EXTRA_SOURCE",
           "__kernel void locus_broken(__global float *x) { x[0] = "
           "undeclared_identifier_for_the_test; }",
           1);
    locus_status status = one_reduce();
    const char *detail = locus_last_error();
    printf("build failure: %s: %.300s\n", locus_status_name(status), detail);
    CHECK(status == LOCUS_ERROR_BACKEND, "a broken kernel gave %s",
          locus_status_name(status));
    CHECK(strstr(detail, "build log") != NULL &&
              strstr(detail, "undeclared_identifier_for_the_test") != NULL,
          "the error detail does not carry the build log: %s", detail);
    gpu_test_strict = "0";
    CHECK(one_reduce() == LOCUS_SUCCESS,
          "without LOCUS_STRICT a broken kernel must fall back: %s",
          locus_last_error());
    gpu_test_strict = "1";
    unsetenv("LOCUS_OPENCL_EXTRA_SOURCE");
    CHECK(one_reduce() == LOCUS_SUCCESS, "after the failed build: %s",
          locus_last_error());
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/locus-opencl-cache-XXXXXX");
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    snprintf(report_path, sizeof report_path, "%s/report", root);
    setenv("LOCUS_OPENCL_CACHE_REPORT", report_path, 1);
    check_reuse_and_damage();
    check_concurrent_writers();
    check_build_failure();
    if (gpu_test_failures == 0) {
        char command[400];
        snprintf(command, sizeof command, "rm -rf '%s'", root);
        if (system(command) != 0)
            printf("could not remove %s\n", root);
    } else {
        printf("cache files kept in %s\n", root);
    }
    return cuda_test_finish("test_opencl_cache");
}
