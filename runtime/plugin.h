/* Backends: the built-in CPU one and the modules loaded with dlopen. */
#ifndef LOCUS_RUNTIME_PLUGIN_H
#define LOCUS_RUNTIME_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include <locus/backend.h>

#define LOCUS__BACKEND_KINDS 3

typedef struct locus__backend_slot {
    char name[16];
    const locus_backend *table; /* NULL when absent */
    void *state;
    void *module; /* dlopen handle, NULL for the built-in one */
    size_t device_count;
    bool available;
    char reason[256];
} locus__backend_slot;

/* Finds locus-<name>.so in the search path (colon list, may be NULL) and then
 * the install dir, checks its ABI and returns its table. Never fails the
 * context: on any failure the slot is absent and `reason` says why. */
void locus__plugin_load(locus__backend_slot *slot, const char *name,
                        const char *search_path);
/* Initializes a loaded backend: probes its devices. */
void locus__plugin_init(locus__backend_slot *slot,
                        const locus_services *services, void *runtime);
void locus__plugin_unload(locus__backend_slot *slot);
/* Checks a backend table against this runtime's ABI; writes why not. */
bool locus__plugin_abi_ok(const locus_backend *table, char *reason,
                          size_t capacity);

#endif
