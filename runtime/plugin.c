#include "plugin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "status.h"

/* Reasons are truncated to the slot's size: a long path must not hide the
 * cause, so callers put the cause first. */
__attribute__((format(printf, 2, 3))) static void
set_reason(locus__backend_slot *slot, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(slot->reason, sizeof slot->reason, format, args);
    va_end(args);
}

bool locus__plugin_abi_ok(const locus_backend *table, char *reason,
                          size_t capacity)
{
    if (!table) {
        snprintf(reason, capacity, "its entry point returned no table");
        return false;
    }
    if (table->abi_version != LOCUS_BACKEND_ABI_VERSION) {
        snprintf(reason, capacity,
                 "backend ABI version %u, this runtime needs %u",
                 table->abi_version, LOCUS_BACKEND_ABI_VERSION);
        return false;
    }
    if (table->struct_size < sizeof *table) {
        snprintf(reason, capacity,
                 "backend table of %zu bytes, this runtime needs %zu",
                 table->struct_size, sizeof *table);
        return false;
    }
    if (!table->init || !table->device_info || !table->name) {
        snprintf(reason, capacity, "backend table lacks init or device_info");
        return false;
    }
    if (!table->host_memory &&
        (!table->alloc || !table->free || !table->upload || !table->download)) {
        snprintf(reason, capacity,
                 "device-memory backend lacks alloc, free, upload or "
                 "download");
        return false;
    }
    return true;
}

/* A backend's init and fini set up and tear down process-wide driver
 * state (an OpenCL ICD's platforms, the CUDA driver): PoCL 3.1's is not
 * thread-safe, and contexts created from several threads at once crashed
 * in its first clGetDeviceInfo. One lock for every backend, so that no
 * module has to know; held only while a context starts or stops. */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

static const char address_in_this_library;

/* The directory liblocus.so itself was loaded from, plus "/locus": a
 * relocated or DESTDIR install loads its own modules, never those of
 * another install at the configured prefix. Not for a liblocus linked
 * statically into a program (dladdr names the program then). */
static bool library_relative_dir(char *dir, size_t capacity)
{
    Dl_info info;
    if (!dladdr(&address_in_this_library, &info) || !info.dli_fname)
        return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash || strncmp(slash + 1, "liblocus.so", 11) != 0)
        return false;
    int n = snprintf(dir, capacity, "%.*s/locus", (int)(slash - info.dli_fname),
                     info.dli_fname);
    return n > 0 && (size_t)n < capacity;
}

/* Tries one directory; true when a module file was found there (loaded or
 * not: a broken module is not skipped in favour of another). */
static bool try_directory(locus__backend_slot *slot, const char *dir,
                          size_t dir_length, const char *name)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%.*s/locus-%s.so", (int)dir_length,
                     dir, name);
    if (n < 0 || (size_t)n >= sizeof path || access(path, F_OK) != 0)
        return false;
    if (locus__fault_hit(LOCUS__FAULT_DLOPEN)) {
        set_reason(slot, "dlopen failed: %s: injected fault", path);
        return true;
    }
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!module) {
        set_reason(slot, "dlopen failed: %s", dlerror());
        return true;
    }
    void *entry = dlsym(module, LOCUS_BACKEND_ENTRY_SYMBOL);
    if (!entry) {
        set_reason(slot, "no %s exported by %s", LOCUS_BACKEND_ENTRY_SYMBOL,
                   path);
        dlclose(module);
        return true;
    }
    locus_backend_entry_fn entry_fn;
    /* POSIX dlsym returns functions as void *; copy the bits, as ISO C
     * forbids the direct cast. */
    memcpy(&entry_fn, &entry, sizeof entry_fn);
    const locus_backend *table = entry_fn();
    char why[200];
    if (!locus__plugin_abi_ok(table, why, sizeof why)) {
        set_reason(slot, "%s (%s)", why, path);
        dlclose(module);
        return true;
    }
    slot->table = table;
    slot->module = module;
    set_reason(slot, "%s", path);
    return true;
}

void locus__plugin_load(locus__backend_slot *slot, const char *name,
                        const char *search_path)
{
    memset(slot, 0, sizeof *slot);
    snprintf(slot->name, sizeof slot->name, "%s", name);
    if (search_path) {
        const char *cursor = search_path;
        for (;;) {
            const char *colon = strchr(cursor, ':');
            size_t length = colon ? (size_t)(colon - cursor) : strlen(cursor);
            if (length && try_directory(slot, cursor, length, name))
                return;
            if (!colon)
                break;
            cursor = colon + 1;
        }
    }
    char relative[4096];
    if (library_relative_dir(relative, sizeof relative) &&
        try_directory(slot, relative, strlen(relative), name))
        return;
    if (try_directory(slot, LOCUS_PLUGIN_DIR, strlen(LOCUS_PLUGIN_DIR), name))
        return;
    set_reason(slot, "module locus-%s.so not found in %s%s%s", name,
               search_path ? search_path : "", search_path ? ":" : "",
               LOCUS_PLUGIN_DIR);
}

void locus__plugin_init(locus__backend_slot *slot,
                        const locus_services *services, void *runtime)
{
    if (!slot->table)
        return;
    char reason[sizeof slot->reason] = "";
    size_t devices = 0;
    pthread_mutex_lock(&setup_lock);
    locus_status status = slot->table->init(services, runtime, &slot->state,
                                            &devices, reason, sizeof reason);
    if (status == LOCUS_SUCCESS && devices == 0 && slot->table->fini)
        slot->table->fini(slot->state);
    pthread_mutex_unlock(&setup_lock);
    if (status != LOCUS_SUCCESS || devices == 0) {
        slot->state = NULL;
        set_reason(slot, "%s",
                   reason[0]                 ? reason
                   : status != LOCUS_SUCCESS ? locus_last_error()
                                             : "no device found");
        return;
    }
    slot->device_count = devices;
    slot->available = true;
    /* A backend's own summary ("2 devices on 2 platforms") follows where it
     * was loaded from. */
    if (reason[0]) {
        char origin[sizeof slot->reason];
        snprintf(origin, sizeof origin, "%s", slot->reason);
        snprintf(slot->reason, sizeof slot->reason, "%.120s; %.120s", origin,
                 reason);
    }
}

void locus__plugin_unload(locus__backend_slot *slot)
{
    if (slot->available && slot->table->fini) {
        pthread_mutex_lock(&setup_lock);
        slot->table->fini(slot->state);
        pthread_mutex_unlock(&setup_lock);
    }
    /* Modules stay mapped (RTLD_NODELETE): driver stacks such as an OpenCL
     * ICD do not survive being unloaded and loaded again. */
    if (slot->module)
        dlclose(slot->module);
    slot->available = false;
    slot->table = NULL;
    slot->state = NULL;
    slot->module = NULL;
}
