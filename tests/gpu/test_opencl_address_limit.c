/* OpenCL under an address-space limit (`ulimit -v`, RLIMIT_AS): PoCL 3.1
 * aborts the process where its own allocations fail (an assert after
 * the clEnqueueMigrateMemObjects that commits a new buffer, a pthread
 * set-up abort while its platform starts), so Locus must not lead it
 * there. Each child sets the limit, creates a context with the OpenCL
 * backend, and sums a large buffer on the OpenCL device; it must exit
 * with a status: the right sum, an OUT_OF_MEMORY kind, or OpenCL absent
 * with its reason, never a signal.
 *
 * The limits are fractions of what an unlimited child used at its peak
 * (VmPeak), so they fall on the set-up, the allocation and the op
 * wherever this machine's PoCL puts them. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <locus/locus.h>

#include "test_util.h"

/* 96 MiB: large next to PoCL's own footprint, small for the 2-core CI. */
#define COUNT ((size_t)24 << 20)

enum child_result {
    RESULT_SUMMED = 0,
    RESULT_FAILED = 1,
    RESULT_OUT_OF_MEMORY = 2,
    RESULT_NO_OPENCL = 3,
    /* The device refused the buffer (DEVICE_OUT_OF_MEMORY) and the runtime
     * ran the sum on the CPU instead: right, and not on OpenCL. */
    RESULT_SUMMED_ELSEWHERE = 4,
};

/* Prints why the OpenCL backend is absent. */
static void print_absence(const locus_context *context)
{
    size_t count = 0;
    locus_backend_count(context, &count);
    for (size_t i = 0; i < count; i++) {
        locus_backend_info info;
        locus_backend_info_init(&info);
        if (locus_backend_get(context, i, &info) == LOCUS_SUCCESS &&
            strcmp(info.name, "opencl") == 0)
            fprintf(stderr, "  opencl absent: %s\n", info.reason);
    }
}

static int out_of_memory(locus_status status)
{
    return status == LOCUS_ERROR_OUT_OF_MEMORY ||
           status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY;
}

/* The status's kind as an exit code, saying which call gave it. */
static int judge(locus_status status, const char *call)
{
    if (status == LOCUS_SUCCESS)
        return RESULT_SUMMED;
    fprintf(stderr, "  %s: %s: %s\n", call, locus_status_str(status),
            locus_last_error());
    return out_of_memory(status) ? RESULT_OUT_OF_MEMORY : RESULT_FAILED;
}

static long peak_kib(void)
{
    FILE *status = fopen("/proc/self/status", "r");
    if (!status)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, status))
        if (sscanf(line, "VmPeak: %ld kB", &kib) == 1)
            break;
    fclose(status);
    return kib;
}

/* One child's work; returns its exit code. */
static int sum_on_opencl(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.backends = "cpu,opencl";
    options.log = "error";
    locus_context *context = NULL;
    int result =
        judge(locus_context_create(&options, &context), "locus_context_create");
    if (result != RESULT_SUMMED)
        return result;
    locus_device *device = NULL;
    if (locus_device_find(context, "opencl", &device) != LOCUS_SUCCESS) {
        print_absence(context);
        locus_context_destroy(context);
        return RESULT_NO_OPENCL;
    }
    float *values = malloc(COUNT * sizeof *values);
    if (!values) {
        fprintf(stderr, "  the test's own malloc failed\n");
        locus_context_destroy(context);
        return RESULT_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < COUNT; i++)
        values[i] = (float)(i % 3);
    double want = (double)(COUNT / 3) * 3.0;
    locus_buffer *buffer = NULL;
    result = judge(
        locus_buffer_wrap(context, values, COUNT * sizeof *values, &buffer),
        "locus_buffer_wrap");
    if (result == RESULT_SUMMED) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = COUNT;
        double sum = NAN;
        locus_record record;
        locus_record_init(&record);
        result =
            judge(locus_reduce(context, device, &desc, buffer, &sum, &record),
                  "locus_reduce");
        if (result == RESULT_SUMMED && fabs(sum - want) > 1e-6 * want) {
            fprintf(stderr, "  sum %.17g on %s, want %.17g\n", sum,
                    record.device, want);
            result = RESULT_FAILED;
        }
        if (result == RESULT_SUMMED && strncmp(record.device, "opencl", 6)) {
            fprintf(stderr, "  summed on %s\n", record.device);
            result = RESULT_SUMMED_ELSEWHERE;
        }
    }
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);
    free(values);
    return result;
}

/* Runs sum_on_opencl in a child under the limit (0: none); the child's
 * exit code, or -1 after a signal. A pipe brings back the child's VmPeak. */
static int run_child(long limit_kib, long *child_peak_kib)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (limit_kib > 0) {
            struct rlimit limit = {(rlim_t)limit_kib << 10,
                                   (rlim_t)limit_kib << 10};
            if (setrlimit(RLIMIT_AS, &limit) != 0)
                _exit(RESULT_FAILED);
        }
        int result = sum_on_opencl();
        long peak = peak_kib();
        if (write(fds[1], &peak, sizeof peak) != sizeof peak)
            result = RESULT_FAILED;
        _exit(result);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    long peak = -1;
    if (read(fds[0], &peak, sizeof peak) != sizeof peak)
        peak = -1;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (child_peak_kib)
        *child_peak_kib = peak;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "  killed by signal %d\n", WTERMSIG(status));
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
    long peak = 0;
    int unlimited = run_child(0, &peak);
    if (!TEST_EXPECT(unlimited == RESULT_SUMMED && peak > 0,
                     "without a limit the sum must succeed on opencl "
                     "(result %d, VmPeak %ld KiB)",
                     unlimited, peak))
        return test_exit_code();
    printf("without a limit: summed, VmPeak %ld MiB\n", peak >> 10);
    /* From far below the footprint of PoCL's set-up to above the peak. */
    const double fractions[] = {0.05, 0.15, 0.3,  0.45, 0.6, 0.7,
                                0.8,  0.88, 0.94, 0.98, 1.5};
    const char *names[] = {"summed", "failed", "out of memory", "opencl absent",
                           "summed elsewhere"};
    int summed = 0, refused = 0;
    for (size_t i = 0; i < sizeof fractions / sizeof fractions[0]; i++) {
        long limit = (long)(fractions[i] * (double)peak);
        int result = run_child(limit, NULL);
        printf("limit %ld MiB (%.2f of the peak): %s\n", limit >> 10,
               fractions[i],
               result >= 0 && result <= RESULT_SUMMED_ELSEWHERE ? names[result]
                                                                : "signal");
        TEST_EXPECT(result == RESULT_SUMMED || result == RESULT_OUT_OF_MEMORY ||
                        result == RESULT_NO_OPENCL ||
                        result == RESULT_SUMMED_ELSEWHERE,
                    "limit %ld KiB: the child must end with a status "
                    "(result %d)",
                    limit, result);
        summed += result == RESULT_SUMMED;
        refused += result == RESULT_OUT_OF_MEMORY ||
                   result == RESULT_NO_OPENCL ||
                   result == RESULT_SUMMED_ELSEWHERE;
    }
    /* Above the peak the op must still run; below it, something must
     * have been refused, or the limits tested nothing. */
    TEST_EXPECT(summed >= 1, "no limit let the sum run");
    TEST_EXPECT(refused >= 1, "no limit was low enough to refuse anything");
    return test_exit_code();
}
