/* Fault injection for tests: with the meson option fault_injection, the Nth
 * call of one kind (a host allocation, a binding call, a dlopen, a device
 * allocation or a device copy) fails as the system would fail it, so tests
 * can sweep N over a whole scenario and watch every error path run. Without
 * the option every hook compiles to the plain call. */
#ifndef LOCUS_RUNTIME_FAULT_H
#define LOCUS_RUNTIME_FAULT_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef enum locus__fault_kind {
    LOCUS__FAULT_ALLOC,        /* malloc, calloc, strdup, mmap in the runtime */
    LOCUS__FAULT_BIND,         /* hwloc memory and thread binding calls */
    LOCUS__FAULT_DLOPEN,       /* loading a backend module */
    LOCUS__FAULT_DEVICE_ALLOC, /* a backend's alloc, through buffer.c */
    LOCUS__FAULT_COPY,         /* a backend's upload or download */
    LOCUS__FAULT_KINDS
} locus__fault_kind;

#ifdef LOCUS_FAULT_INJECTION

/* Counts a call of this kind; true when it is the one armed to fail. The
 * first call reads LOCUS_FAULT=<kind>:<N> (kinds: alloc, bind, dlopen,
 * device_alloc, copy) unless locus__fault_arm came first. */
bool locus__fault_hit(locus__fault_kind kind);
/* Makes the nth call of `kind` from now fail (one call only); n = 0 disarms.
 * Resets the kind's counter. */
void locus__fault_arm(locus__fault_kind kind, unsigned long n);
/* Calls of `kind` counted since it was last armed. */
unsigned long locus__fault_calls(locus__fault_kind kind);
/* Whether the armed failure of `kind` has happened. */
bool locus__fault_fired(locus__fault_kind kind);
/* "alloc", "bind", ...; NULL for an unknown kind. */
const char *locus__fault_name(locus__fault_kind kind);

#else

static inline bool locus__fault_hit(locus__fault_kind kind)
{
    (void)kind;
    return false;
}

#endif

/* The runtime's own heap allocations, each a fault point of kind alloc. */
static inline void *locus__malloc(size_t bytes)
{
    if (locus__fault_hit(LOCUS__FAULT_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return malloc(bytes);
}

static inline void *locus__calloc(size_t count, size_t size)
{
    if (locus__fault_hit(LOCUS__FAULT_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return calloc(count, size);
}

static inline char *locus__strdup(const char *text)
{
    if (locus__fault_hit(LOCUS__FAULT_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return strdup(text);
}

#endif
