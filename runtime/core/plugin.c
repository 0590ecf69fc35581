#include "plugin.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"
#include "fault.h"
#include "status.h"

/* The backends compiled into liblocus: their registration, the one place
 * the runtime refers to one. */
static const locus_backend *(*const built_in[])(void) = {
    locus__cpu_backend,
};
#define BUILT_IN_COUNT (sizeof built_in / sizeof built_in[0])

/* The modules this build has, whether built here or not (meson's list of
 * backend folders, a comma list): each is reported, found or not. */
#ifndef LOCUS_MODULE_NAMES
#define LOCUS_MODULE_NAMES ""
#endif

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
    if (!locus__backend_name_ok(table->name, strlen(table->name))) {
        snprintf(reason, capacity,
                 "backend name '%.40s' is not 1 to %d lowercase letters, "
                 "digits or '_' starting with a letter (nor auto or all)",
                 table->name, LOCUS__BACKEND_NAME_MAX - 1);
        return false;
    }
    if (table->pool_node && !table->host_memory) {
        snprintf(reason, capacity,
                 "backend runs on the worker pool (pool_node) but does not "
                 "compute on host memory");
        return false;
    }
    if (!(table->inline_flops >= 0 && table->inline_bytes >= 0 &&
          isfinite(table->inline_flops) && isfinite(table->inline_bytes))) {
        snprintf(reason, capacity,
                 "backend's inline thresholds are not finite and >= 0");
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
    if (strcmp(table->name, name) != 0) {
        set_reason(slot, "the module calls itself '%s', not '%s' (%s)",
                   table->name, name, path);
        dlclose(module);
        return true;
    }
    slot->table = table;
    slot->module = module;
    set_reason(slot, "%s", path);
    return true;
}

/* ---- the names of the backends there are -------------------------------- */

typedef struct name_set {
    char (*names)[LOCUS__BACKEND_NAME_MAX];
    size_t count, capacity;
} name_set;

static void add_name(name_set *set, const char *name, size_t length)
{
    if (!locus__backend_name_ok(name, length))
        return;
    for (size_t i = 0; i < set->count; i++)
        if (strlen(set->names[i]) == length &&
            strncmp(set->names[i], name, length) == 0)
            return;
    if (set->count == set->capacity)
        return;
    memcpy(set->names[set->count], name, length);
    set->names[set->count][length] = '\0';
    set->count++;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The backends of the modules in one directory, locus-<name>.so, in the
 * order of their names (readdir's order is the file system's). A
 * directory that cannot be read holds none. */
static void scan_directory(name_set *set, const char *dir, size_t dir_length)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%.*s", (int)dir_length, dir);
    if (n <= 0 || (size_t)n >= sizeof path)
        return;
    DIR *folder = opendir(path);
    if (!folder)
        return;
    enum { MOST = 64 };
    char found[MOST][LOCUS__BACKEND_NAME_MAX];
    size_t count = 0;
    for (struct dirent *entry = readdir(folder); entry && count < MOST;
         entry = readdir(folder)) {
        size_t length = strlen(entry->d_name);
        if (length <= 9 || strncmp(entry->d_name, "locus-", 6) != 0 ||
            strcmp(entry->d_name + length - 3, ".so") != 0)
            continue;
        size_t name_length = length - 9;
        if (!locus__backend_name_ok(entry->d_name + 6, name_length))
            continue;
        memcpy(found[count], entry->d_name + 6, name_length);
        found[count++][name_length] = '\0';
    }
    closedir(folder);
    qsort(found, count, sizeof found[0], compare_names);
    for (size_t i = 0; i < count; i++)
        add_name(set, found[i], strlen(found[i]));
}

size_t locus__plugin_names(const char *search_path,
                           char names[][LOCUS__BACKEND_NAME_MAX],
                           size_t capacity)
{
    name_set set = {names, 0, capacity};
    for (size_t i = 0; i < BUILT_IN_COUNT; i++) {
        const locus_backend *table = built_in[i]();
        if (table && table->name)
            add_name(&set, table->name, strlen(table->name));
    }
    for (const char *cursor = LOCUS_MODULE_NAMES; *cursor;) {
        size_t length = strcspn(cursor, ",");
        add_name(&set, cursor, length);
        cursor += length + (cursor[length] == ',');
    }
    for (const char *cursor = search_path; cursor && *cursor;) {
        size_t length = strcspn(cursor, ":");
        if (length)
            scan_directory(&set, cursor, length);
        cursor += length + (cursor[length] == ':');
    }
    char relative[4096];
    if (library_relative_dir(relative, sizeof relative))
        scan_directory(&set, relative, strlen(relative));
    scan_directory(&set, LOCUS_PLUGIN_DIR, strlen(LOCUS_PLUGIN_DIR));
    return set.count;
}

/* ---- loading one --------------------------------------------------------- */

const locus_backend *locus__plugin_builtin(const char *name)
{
    for (size_t i = 0; i < BUILT_IN_COUNT; i++) {
        const locus_backend *table = built_in[i]();
        if (table && table->name && strcmp(table->name, name) == 0)
            return table;
    }
    return NULL;
}

void locus__plugin_load(locus__backend_slot *slot, const char *name,
                        const char *search_path)
{
    memset(slot, 0, sizeof *slot);
    snprintf(slot->name, sizeof slot->name, "%s", name);
    const locus_backend *builtin = locus__plugin_builtin(name);
    if (builtin) {
        if (locus__plugin_abi_ok(builtin, slot->reason, sizeof slot->reason)) {
            slot->table = builtin;
            set_reason(slot, "built in");
        }
        return;
    }
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

locus_status locus__plugin_init(locus__backend_slot *slot,
                                const locus_services *services, void *runtime)
{
    if (!slot->table)
        return LOCUS_SUCCESS;
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
        return status == LOCUS_ERROR_UNUSABLE_ENVIRONMENT ? status
                                                          : LOCUS_SUCCESS;
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
    return LOCUS_SUCCESS;
}

void locus__plugin_unload(locus__backend_slot *slot)
{
    if (slot->available && slot->table && slot->table->fini) {
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
