/* Backends: the built-in CPU one and the modules loaded with dlopen. The
 * runtime names none of them: the list is the built-in tables, the
 * modules this build has (LOCUS_MODULE_NAMES, from meson) and any other
 * module locus-<name>.so found where modules are looked up
 * (docs/ARCHITECTURE.md, "Adding a backend"). */
#ifndef LOCUS_RUNTIME_PLUGIN_H
#define LOCUS_RUNTIME_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include <locus/backend.h>

#include "env.h"

typedef struct locus__backend_slot {
    char name[LOCUS__BACKEND_NAME_MAX];
    const locus_backend *table; /* NULL when absent */
    void *state;
    void *module; /* dlopen handle, NULL for a built-in one */
    size_t device_count;
    bool available;
    char reason[256];
} locus__backend_slot;

/* The names of every backend there is, each once, into names (at most
 * capacity): the built-in ones first, then the modules this build has,
 * then those found in the search path (a colon list, may be NULL), the
 * library's own module dir and the install dir, in the order found.
 * Returns how many. */
size_t locus__plugin_names(const char *search_path,
                           char names[][LOCUS__BACKEND_NAME_MAX],
                           size_t capacity);

/* The built-in table of that name, or NULL: a built-in backend is there
 * whether or not LOCUS_BACKENDS asks for it. */
const locus_backend *locus__plugin_builtin(const char *name);

/* Makes the slot of the backend `name`: a built-in's table, else the
 * module locus-<name>.so from the search path (colon list, may be NULL)
 * and then the install dir, with its ABI and name checked. Never fails
 * the context: on any failure the slot has no table and `reason` says
 * why. */
void locus__plugin_load(locus__backend_slot *slot, const char *name,
                        const char *search_path);
/* Initializes a loaded backend: probes its devices. Returns the status of
 * init when it is LOCUS_ERROR_UNUSABLE_ENVIRONMENT, which fails the
 * context (a setting such as LOCUS_CPU_ISA that cannot work here: the
 * user's to fix, not a machine without the hardware); LOCUS_SUCCESS
 * otherwise, the slot then available or absent with the reason. */
locus_status locus__plugin_init(locus__backend_slot *slot,
                                const locus_services *services, void *runtime);
/* Undoes init and load; a slot unloaded, or never loaded, is left alone. */
void locus__plugin_unload(locus__backend_slot *slot);
/* Checks a backend table against this runtime's ABI; writes why not. */
bool locus__plugin_abi_ok(const locus_backend *table, char *reason,
                          size_t capacity);

#endif
