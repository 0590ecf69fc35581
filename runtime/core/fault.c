/* Compiled only with the meson option fault_injection: the counters behind
 * locus__fault_hit. Counters are atomic because workers and several
 * application threads allocate at once. */
#include "fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static const char *const names[LOCUS__FAULT_KINDS] = {
    [LOCUS__FAULT_ALLOC] = "alloc",
    [LOCUS__FAULT_BIND] = "bind",
    [LOCUS__FAULT_DLOPEN] = "dlopen",
    [LOCUS__FAULT_DEVICE_ALLOC] = "device_alloc",
    [LOCUS__FAULT_COPY] = "copy",
};

typedef struct fault_counter {
    atomic_ulong calls;
    atomic_ulong fail_at; /* 0: disarmed */
    atomic_bool fired;
} fault_counter;

static fault_counter counters[LOCUS__FAULT_KINDS];
static pthread_once_t environment_once = PTHREAD_ONCE_INIT;
static atomic_bool armed_by_api;

const char *locus__fault_name(locus__fault_kind kind)
{
    return kind < LOCUS__FAULT_KINDS ? names[kind] : NULL;
}

/* LOCUS_FAULT=<kind>:<N>, for trying one failure on any program. A value
 * that does not parse is reported and ignored: this is a test hook, and
 * the program under test should run as it would. */
static void read_environment(void)
{
    if (atomic_load(&armed_by_api))
        return;
    const char *value = getenv("LOCUS_FAULT");
    if (!value || !*value)
        return;
    for (int kind = 0; kind < LOCUS__FAULT_KINDS; kind++) {
        size_t length = strlen(names[kind]);
        if (strncmp(value, names[kind], length) != 0 || value[length] != ':')
            continue;
        char *end;
        unsigned long n = strtoul(value + length + 1, &end, 10);
        if (*end == '\0' && n > 0) {
            atomic_store(&counters[kind].fail_at, n);
            return;
        }
    }
    fprintf(stderr,
            "locus: LOCUS_FAULT='%s' is not <kind>:<N> with kind alloc, "
            "bind, dlopen, device_alloc or copy and N >= 1; ignored\n",
            value);
}

bool locus__fault_hit(locus__fault_kind kind)
{
    pthread_once(&environment_once, read_environment);
    fault_counter *counter = &counters[kind];
    unsigned long call = atomic_fetch_add(&counter->calls, 1) + 1;
    if (call != atomic_load(&counter->fail_at))
        return false;
    atomic_store(&counter->fired, true);
    return true;
}

void locus__fault_arm(locus__fault_kind kind, unsigned long n)
{
    atomic_store(&armed_by_api, true);
    pthread_once(&environment_once, read_environment);
    fault_counter *counter = &counters[kind];
    atomic_store(&counter->fail_at, 0);
    atomic_store(&counter->calls, 0);
    atomic_store(&counter->fired, false);
    atomic_store(&counter->fail_at, n);
}

unsigned long locus__fault_calls(locus__fault_kind kind)
{
    return atomic_load(&counters[kind].calls);
}

bool locus__fault_fired(locus__fault_kind kind)
{
    return atomic_load(&counters[kind].fired);
}
