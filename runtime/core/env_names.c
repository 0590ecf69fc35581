/* The LOCUS_* names Locus knows, and the ones in the environment it does
 * not: a misspelled variable is reported with the nearest known name
 * instead of being silently ignored. */
#include "env.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h> /* environ */

#include "status.h"

/* The LOCUS_* names read by parts of Locus other than the settings above
 * (docs/ENVIRONMENT.md lists them all), so that none is reported unknown:
 * `LOCUS_WERROR=1 ./test.sh` must not make every test warn. */
static const char *const other_names[] = {
    "LOCUS_FAULT",               /* core/fault.c, fault-injection builds */
    "LOCUS_QUEUE_OVERLAP",       /* ops/queue_prefetch.c, at queue creation */
    "LOCUS_OPENCL_CACHE_DIR",    /* the OpenCL module */
    "LOCUS_OPENCL_CACHE_REPORT", /* the OpenCL module, a test hook */
    "LOCUS_OPENCL_EXTRA_SOURCE", /* the OpenCL module, a test hook */
    "LOCUS_OPENCL_TUNING",       /* the OpenCL module */
    "LOCUS_BENCH_CUDA_PATH",     /* locus bench */
    "LOCUS_BENCH_MKL",           /* locus bench */
    "LOCUS_BENCH_OPENBLAS",      /* locus bench */
    "LOCUS_WERROR",              /* test.sh */
    "LOCUS_CUDNN_ROOT",          /* the build, scripts/device */
    "LOCUS_MPI_BUILD",           /* scripts/device/h200-mpi.sh */
    "LOCUS_MPI_MESON_ARGS",      /* scripts/device/h200-mpi.sh */
    "LOCUS_VM_KERNEL",           /* the numa suite's virtual machine */
    "LOCUS_VM_QEMU",             /* the numa suite's virtual machine */
};
#define OTHER_NAME_COUNT (sizeof other_names / sizeof other_names[0])
#define KNOWN_NAME_COUNT (LOCUS__SETTING_COUNT + OTHER_NAME_COUNT)

/* Test harnesses (CI, the suites' meson lines, the fake modules) set
 * LOCUS_TEST_* freely; the library never reads them. */
#define RESERVED_TEST_PREFIX "LOCUS_TEST_"

static const char *known_name(size_t i)
{
    return i < LOCUS__SETTING_COUNT ? locus__setting_name((locus__setting_id)i)
                                    : other_names[i - LOCUS__SETTING_COUNT];
}

/* The optimal string alignment distance (edits, and swaps of neighbours)
 * between two names, case folded: "LOCUS_DEIVCE" is one swap from
 * LOCUS_DEVICE, "locus_device" no edit. Names are at most 63 bytes. */
static size_t name_distance(const char *a, size_t a_length, const char *b,
                            size_t b_length)
{
    size_t rows[3][64];
    size_t *before = rows[0], *previous = rows[1], *current = rows[2];
    for (size_t j = 0; j <= b_length; j++)
        previous[j] = j;
    for (size_t i = 1; i <= a_length; i++) {
        current[0] = i;
        for (size_t j = 1; j <= b_length; j++) {
            int ca = toupper((unsigned char)a[i - 1]);
            int cb = toupper((unsigned char)b[j - 1]);
            size_t best = previous[j - 1] + (ca != cb);
            if (previous[j] + 1 < best)
                best = previous[j] + 1;
            if (current[j - 1] + 1 < best)
                best = current[j - 1] + 1;
            if (i > 1 && j > 1 && ca == toupper((unsigned char)b[j - 2]) &&
                toupper((unsigned char)a[i - 2]) == cb &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            current[j] = best;
        }
        size_t *spare = before;
        before = previous;
        previous = current;
        current = spare;
    }
    return previous[b_length];
}

/* The known name nearest to `name` (after the LOCUS_ both share), or NULL
 * when even the nearest is too far to be a misspelling of it: one edit for
 * a short name such as LOG, two up to eight letters, three beyond. */
static const char *nearest_known_name(const char *name, size_t length)
{
    const char *best = NULL;
    size_t best_distance = (size_t)-1;
    for (size_t i = 0; i < KNOWN_NAME_COUNT; i++) {
        const char *known = known_name(i) + 6;
        size_t known_length = strlen(known);
        size_t limit = known_length <= 4 ? 1 : known_length <= 8 ? 2 : 3;
        size_t distance =
            name_distance(name + 6, length - 6, known, known_length);
        if (distance <= limit && distance < best_distance) {
            best = known_name(i);
            best_distance = distance;
        }
    }
    return best;
}

static bool is_known_name(const char *name, size_t length)
{
    for (size_t i = 0; i < KNOWN_NAME_COUNT; i++)
        if (locus__token_is(name, length, known_name(i)))
            return true;
    return locus__token_starts(name, length, RESERVED_TEST_PREFIX);
}

LOCUS_API locus_status locus_unknown_variables(locus_unknown_variable *out,
                                               size_t capacity, size_t *count)
{
    locus__clear_error();
    if (!count || (!out && capacity))
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           count ? "out" : "count");
    *count = 0;
    for (char **entry = environ; entry && *entry; entry++) {
        const char *equals = strchr(*entry, '=');
        if (!equals || strncmp(*entry, "LOCUS_", 6) != 0)
            continue;
        size_t length = (size_t)(equals - *entry);
        if (is_known_name(*entry, length))
            continue;
        if (*count < capacity) {
            locus_unknown_variable *item = &out[*count];
            size_t kept =
                length < sizeof item->name ? length : sizeof item->name - 1;
            memcpy(item->name, *entry, kept);
            item->name[kept] = '\0';
            const char *suggestion = nearest_known_name(item->name, kept);
            snprintf(item->suggestion, sizeof item->suggestion, "%s",
                     suggestion ? suggestion : "");
        }
        (*count)++;
    }
    return LOCUS_SUCCESS;
}
