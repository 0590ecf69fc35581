/*
 * Address-space headroom under RLIMIT_AS (`ulimit -v`). PoCL 3.1 aborts the
 * process where one of its own allocations fails: pthread_scheduler_init
 * when it cannot start its worker threads (at the first device query), an
 * assert in pocl_create_migration_commands when the memory of a buffer
 * cannot be allocated at its first migration. So before each of those
 * Locus checks that the address space it needs can be reserved, and
 * returns a status instead (docs/RELIABILITY.md, "Start-up and limits").
 *
 * The check reserves the range with an inaccessible, unreserved mapping
 * and releases it at once: the mapping counts against RLIMIT_AS as the
 * driver's later allocation will, and commits no memory. Without a limit
 * nothing is checked. Another thread may take the room between the check
 * and the driver's allocation; the check makes the abort unlikely, not
 * impossible.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "opencl_internal.h"

/* What glibc reserves for each thread's malloc arena on 64-bit systems
 * (HEAP_MAX_SIZE), and slack for PoCL's own per-thread allocations. */
#define ARENA_BYTES ((uint64_t)64 << 20)
#define THREAD_SLACK_BYTES ((uint64_t)8 << 20)

static uint64_t used_address_space(void)
{
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm == NULL)
        return 0;
    unsigned long pages = 0;
    if (fscanf(statm, "%lu", &pages) != 1)
        pages = 0;
    fclose(statm);
    long page = sysconf(_SC_PAGESIZE);
    return (uint64_t)pages * (uint64_t)(page > 0 ? page : 4096);
}

int locus__opencl_address_room(uint64_t bytes, uint64_t *left)
{
    *left = UINT64_MAX;
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return 1;
    uint64_t used = used_address_space();
    *left =
        (uint64_t)limit.rlim_cur > used ? (uint64_t)limit.rlim_cur - used : 0;
    if (bytes > SIZE_MAX || bytes > *left)
        return 0;
    void *range = mmap(NULL, (size_t)bytes, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED)
        return 0;
    munmap(range, (size_t)bytes);
    return 1;
}

/* PoCL starts POCL_MAX_PTHREAD_COUNT threads (limit_cpu_threads sets it to
 * the pool's size), else one per online cpu; each takes a stack of
 * RLIMIT_STACK (glibc's default) and a malloc arena. Measured with PoCL
 * 3.1: 73 MiB of address space a thread (146 MiB for 2, 585 MiB for 8). */
uint64_t locus__opencl_pocl_startup_bytes(unsigned *threads_out)
{
    long threads = 0;
    const char *count = getenv("POCL_MAX_PTHREAD_COUNT");
    if (count != NULL)
        threads = strtol(count, NULL, 10);
    if (threads <= 0)
        threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0)
        threads = 1;
    struct rlimit stack;
    uint64_t stack_bytes = (uint64_t)8 << 20;
    if (getrlimit(RLIMIT_STACK, &stack) == 0 &&
        stack.rlim_cur != RLIM_INFINITY && stack.rlim_cur > 0)
        stack_bytes = (uint64_t)stack.rlim_cur;
    *threads_out = (unsigned)threads;
    return (uint64_t)threads * (stack_bytes + ARENA_BYTES + THREAD_SLACK_BYTES);
}
