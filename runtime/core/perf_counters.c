#include "perf_counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The counters opened on a thread, closed when it exits. */
typedef struct thread_counters {
    int fd_local;
    int fd_remote;
} thread_counters;

static pthread_key_t counters_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_made;
/* Set after the first refusal: the same machine refuses every thread, and
 * each attempt is two system calls per op and worker. */
static atomic_int machine_refused;
static _Thread_local thread_counters *mine;
static _Thread_local bool tried;

static void close_counters(void *value)
{
    thread_counters *counters = value;
    if (!counters)
        return;
    close(counters->fd_local);
    close(counters->fd_remote);
    free(counters);
}

static void make_key(void)
{
    key_made = pthread_key_create(&counters_key, close_counters) == 0;
}

/* One of the generic node cache events on the calling thread, user space
 * only (so perf_event_paranoid 2, the usual default, allows it). */
static int open_node_event(int result)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HW_CACHE;
    attr.config = (uint64_t)PERF_COUNT_HW_CACHE_NODE |
                  (uint64_t)PERF_COUNT_HW_CACHE_OP_READ << 8 |
                  (uint64_t)result << 16;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.read_format =
        PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1,
                        PERF_FLAG_FD_CLOEXEC);
}

static const char *refusal(int error)
{
    switch (error) {
    case ENOENT:
    case EOPNOTSUPP:
    case EINVAL:
        return "the processor or kernel has no node read events (perf's "
               "node-loads)";
    case EACCES:
    case EPERM:
        return "perf_event_paranoid or a security policy forbids counting";
    case ENOSYS:
        return "the kernel has no perf_event_open";
    default:
        return strerror(error);
    }
}

static bool open_mine(char *why, size_t capacity)
{
    if (why && capacity)
        why[0] = '\0';
    if (tried)
        return mine != NULL;
    if (atomic_load(&machine_refused)) {
        if (why)
            snprintf(why, capacity, "refused earlier on this machine");
        return false;
    }
    tried = true;
    pthread_once(&key_once, make_key);
    int fd_local = open_node_event(PERF_COUNT_HW_CACHE_RESULT_ACCESS);
    int error = errno;
    int fd_remote = -1;
    if (fd_local >= 0) {
        fd_remote = open_node_event(PERF_COUNT_HW_CACHE_RESULT_MISS);
        error = errno;
    }
    thread_counters *counters = NULL;
    if (fd_local >= 0 && fd_remote >= 0 && key_made)
        counters = malloc(sizeof *counters);
    if (!counters || pthread_setspecific(counters_key, counters) != 0) {
        if (fd_local >= 0)
            close(fd_local);
        if (fd_remote >= 0)
            close(fd_remote);
        free(counters);
        if (why)
            snprintf(why, capacity, "%s", refusal(error));
        atomic_store(&machine_refused, 1);
        return false;
    }
    counters->fd_local = fd_local;
    counters->fd_remote = fd_remote;
    mine = counters;
    return true;
}

/* A count, scaled by nothing: a counter that did not run the whole time
 * it was enabled was multiplexed, and its count is not used. */
static bool read_count(int fd, uint64_t *count)
{
    uint64_t values[3];
    if (read(fd, values, sizeof values) != (ssize_t)sizeof values)
        return false;
    *count = values[0];
    return values[1] == values[2];
}

bool locus__perf_begin(locus__perf_snapshot *snapshot)
{
    snapshot->fd_local = -1;
    snapshot->fd_remote = -1;
    if (!open_mine(NULL, 0))
        return false;
    if (!read_count(mine->fd_local, &snapshot->local_lines) ||
        !read_count(mine->fd_remote, &snapshot->remote_lines))
        return false;
    snapshot->fd_local = mine->fd_local;
    snapshot->fd_remote = mine->fd_remote;
    return true;
}

/* What the kernel's node "access" event counts differs by processor (its
 * tables in arch/x86/events): local DRAM reads on Intel from Nehalem on,
 * except Sandy Bridge and Ivy Bridge, where it is every DRAM read, as on
 * the AMD families that have the event. The "miss" event is remote DRAM
 * reads everywhere. */
static bool access_includes_remote;
static pthread_once_t model_once = PTHREAD_ONCE_INIT;

static void read_cpu_model(void)
{
    FILE *file = fopen("/proc/cpuinfo", "r");
    char line[256];
    int family = -1, model = -1;
    bool intel = false, amd = false;
    while (file && fgets(line, sizeof line, file) &&
           (family < 0 || model < 0 || !(intel || amd))) {
        intel |= strstr(line, "GenuineIntel") != NULL;
        amd |= strstr(line, "AuthenticAMD") != NULL;
        if (strncmp(line, "cpu family", 10) == 0)
            sscanf(strchr(line, ':') + 1, "%d", &family);
        else if (strncmp(line, "model\t", 6) == 0 ||
                 strncmp(line, "model :", 7) == 0)
            sscanf(strchr(line, ':') + 1, "%d", &model);
    }
    if (file)
        fclose(file);
    bool sandy_or_ivy =
        intel && family == 6 &&
        (model == 0x2a || model == 0x2d || model == 0x3a || model == 0x3e);
    access_includes_remote = amd || sandy_or_ivy;
}

bool locus__perf_since(const locus__perf_snapshot *start, uint64_t *local_lines,
                       uint64_t *remote_lines)
{
    uint64_t access, remote;
    if (start->fd_local < 0 || !read_count(start->fd_local, &access) ||
        !read_count(start->fd_remote, &remote))
        return false;
    access -= start->local_lines;
    remote -= start->remote_lines;
    pthread_once(&model_once, read_cpu_model);
    *local_lines = access;
    if (access_includes_remote)
        *local_lines = access > remote ? access - remote : 0;
    *remote_lines = remote;
    return true;
}

bool locus__perf_available(char *why, size_t capacity)
{
    return open_mine(why, capacity);
}
