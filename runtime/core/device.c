#include "device.h"

#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "status.h"

/* The backend's spelling of its device, else name:N. */
static void assign_selector(locus_device *device)
{
    locus_device_info *info = &device->info;
    const locus__backend_slot *slot = device->backend;
    if (!slot->table->device_selector) {
        snprintf(info->selector, sizeof info->selector, "%s:%zu", slot->name,
                 device->index_in_backend);
        return;
    }
    char part[sizeof info->selector] = "";
    slot->table->device_selector(slot->state, device->index_in_backend, part,
                                 sizeof part);
    part[sizeof part - 1] = '\0';
    /* Cut to the field, as every name of a record is. */
    char text[sizeof slot->name + 1 + sizeof part];
    snprintf(text, sizeof text, "%s%s%s", slot->name, part[0] ? ":" : "", part);
    locus_copy_name(info->selector, sizeof info->selector, text);
}

/* The backend's pci_bus_id in the canonical "dddd:bb:dd.f", or "" when it
 * gave none or one that does not parse: the split compares the strings as
 * they are, so two spellings of one address must not differ, and a
 * malformed one must not match anything. */
static void canonical_pci_bus_id(locus_device *device)
{
    char *id = device->info.pci_bus_id;
    id[sizeof device->info.pci_bus_id - 1] = '\0';
    if (id[0] == '\0')
        return;
    unsigned domain, bus, slot, function;
    char end;
    if (sscanf(id, "%x:%x:%x.%x%c", &domain, &bus, &slot, &function, &end) ==
            4 &&
        bus <= 0xff && slot <= 0x1f && function <= 7) {
        char canonical[sizeof device->info.pci_bus_id];
        int n = snprintf(canonical, sizeof canonical, "%04x:%02x:%02x.%x",
                         domain, bus, slot, function);
        if (n > 0 && (size_t)n < sizeof canonical) {
            memcpy(id, canonical, (size_t)n + 1);
            return;
        }
    }
    locus__log(device->context, LOCUS_LOG_WARN,
               "%s device %zu gave PCI address \"%s\", which does not parse "
               "as dddd:bb:dd.f; taken as unknown",
               device->backend->name, device->index_in_backend, id);
    id[0] = '\0';
}

bool locus__device_same_hardware(const locus_device *a, const locus_device *b)
{
    return a != b && a->info.pci_bus_id[0] != '\0' &&
           strcmp(a->info.pci_bus_id, b->info.pci_bus_id) == 0;
}

locus_status locus__devices_collect(locus_context *context)
{
    context->device_count = 0;
    for (size_t b = 0; b < context->backend_count; b++) {
        locus__backend_slot *slot = &context->backends[b];
        if (!slot->available)
            continue;
        for (size_t i = 0; i < slot->device_count; i++) {
            if (context->device_count == LOCUS__MAX_DEVICES) {
                locus__log(context, LOCUS_LOG_WARN,
                           "more than %d devices: the rest of %s is ignored",
                           LOCUS__MAX_DEVICES, slot->name);
                return LOCUS_SUCCESS;
            }
            locus_device *device = &context->devices[context->device_count];
            memset(device, 0, sizeof *device);
            device->context = context;
            device->backend = slot;
            device->index_in_backend = i;
            device->ordinal = (int)context->device_count;
            locus_device_info_init(&device->info);
            locus_status status =
                slot->table->device_info(slot->state, i, &device->info);
            if (status != LOCUS_SUCCESS) {
                locus__log(context, LOCUS_LOG_WARN,
                           "%s device %zu could not describe itself: %s",
                           slot->name, i, locus_last_error());
                continue;
            }
            device->info.struct_size = sizeof device->info;
            snprintf(device->info.backend, sizeof device->info.backend, "%s",
                     slot->name);
            device->info.index_in_backend = (int)i;
            canonical_pci_bus_id(device);
            assign_selector(device);
            context->device_count++;
        }
    }
    return LOCUS_SUCCESS;
}

locus__backend_slot *locus__backend_find(const locus_context *context,
                                         const char *name)
{
    for (size_t i = 0; i < context->backend_count; i++)
        if (strcmp(context->backends[i].name, name) == 0)
            return (locus__backend_slot *)&context->backends[i];
    return NULL;
}

/* The table that can judge a selector of this backend: its own where it
 * is loaded, a built-in's even when LOCUS_BACKENDS leaves it out; NULL
 * for a module not loaded, whose parts are taken on trust. */
static const locus_backend *judge_of(const locus__backend_slot *slot)
{
    return slot->table ? slot->table : locus__plugin_builtin(slot->name);
}

static void backend_names(const locus_context *context, char *text,
                          size_t capacity)
{
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < context->backend_count && used < capacity; i++) {
        int n = snprintf(text + used, capacity - used, "%s%s", i ? ", " : "",
                         context->backends[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

bool locus__selector_valid(const locus_context *context,
                           const locus__selector *item, char *why,
                           size_t capacity)
{
    if (item->is_auto)
        return true;
    const locus__backend_slot *slot =
        locus__backend_find(context, item->backend);
    if (!slot) {
        char names[LOCUS__MAX_BACKENDS * LOCUS__BACKEND_NAME_MAX + 32];
        backend_names(context, names, sizeof names);
        snprintf(why, capacity, "no backend is named '%s' (there are %s)",
                 item->backend, names);
        return false;
    }
    const locus_backend *table = judge_of(slot);
    if (!table)
        return true;
    if (item->index >= 0 && !(table->selector_parts & LOCUS_SELECTOR_INDEX)) {
        snprintf(why, capacity, "%s takes no device number", slot->name);
        return false;
    }
    if (item->want_kind >= 0 &&
        !(table->selector_parts & LOCUS_SELECTOR_KIND)) {
        snprintf(why, capacity, "%s takes no device kind", slot->name);
        return false;
    }
    if (!item->part[0])
        return true;
    char detail[256] = "";
    if (!table->selector_part) {
        snprintf(why, capacity, "%s takes no '%s'", slot->name, item->part);
        return false;
    }
    if (table->selector_part(NULL, 0, item->part, detail, sizeof detail) != 0) {
        snprintf(why, capacity, "%s: %s", slot->name,
                 detail[0] ? detail : "not a part it takes");
        return false;
    }
    return true;
}

/* Whether a device of the selector's backend answers to the backend's
 * own part; why gets the backend's word on it. */
static bool part_matches(const locus_device *device, const char *part,
                         char *why, size_t capacity)
{
    const locus__backend_slot *slot = device->backend;
    return slot->table->selector_part &&
           slot->table->selector_part(slot->state, device->index_in_backend,
                                      part, why, capacity) == 1;
}

static bool matches(const locus_device *device, const locus__selector *selector)
{
    if (selector->is_auto || strcmp(device->backend->name, selector->backend))
        return false;
    if (selector->index >= 0 &&
        device->index_in_backend != (size_t)selector->index)
        return false;
    if (selector->want_kind >= 0 &&
        device->info.kind != (locus_device_kind)selector->want_kind)
        return false;
    char why[256];
    return !selector->part[0] ||
           part_matches(device, selector->part, why, sizeof why);
}

void locus__selector_explain_part(const locus_context *context,
                                  const locus__selector *item, char *why,
                                  size_t capacity)
{
    snprintf(why, capacity, "no %s device matches %s", item->backend,
             item->part);
    for (size_t d = 0; d < context->device_count; d++) {
        const locus_device *device = &context->devices[d];
        if (strcmp(device->backend->name, item->backend) == 0)
            part_matches(device, item->part, why, capacity);
    }
}

locus_device *locus__device_match(locus_context *context,
                                  const locus__selector *selector)
{
    for (size_t d = 0; d < context->device_count; d++)
        if (matches(&context->devices[d], selector))
            return &context->devices[d];
    return NULL;
}

void locus_device_info_init(locus_device_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

LOCUS_API locus_status locus_device_count(const locus_context *context,
                                          size_t *count)
{
    locus__clear_error();
    if (!context || !count)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "count" : "context");
    *count = context->device_count;
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_device_get(locus_context *context, size_t index,
                                        locus_device **out)
{
    locus__clear_error();
    if (!context || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "out" : "context");
    *out = NULL;
    if (index >= context->device_count)
        return locus__fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                           "device index %zu; the context has %zu device%s",
                           index, context->device_count,
                           context->device_count == 1 ? "" : "s");
    *out = &context->devices[index];
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_device_get_info(const locus_device *device,
                                             locus_device_info *info)
{
    locus__clear_error();
    if (!device || !info)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           device ? "info" : "device");
    if (info->struct_size == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "info struct_size is 0: call "
                           "locus_device_info_init first");
    /* A caller built against an older, smaller struct gets its part. */
    size_t size =
        info->struct_size < sizeof *info ? info->struct_size : sizeof *info;
    memcpy(info, &device->info, size);
    info->struct_size = size;
    return LOCUS_SUCCESS;
}

locus_status locus__device_alloc(const locus_device *device, size_t bytes,
                                 void **memory)
{
    *memory = NULL;
    if (locus__fault_hit(LOCUS__FAULT_DEVICE_ALLOC))
        return locus__fail(LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
                           "%s cannot hold %zu bytes (injected fault)",
                           device->info.selector, bytes);
    locus_status status = device->backend->table->alloc(
        device->backend->state, device->index_in_backend, bytes, memory);
    if (status != LOCUS_SUCCESS)
        *memory = NULL;
    return status;
}

void locus__device_free(const locus_device *device, void *memory)
{
    if (memory)
        device->backend->table->free(device->backend->state,
                                     device->index_in_backend, memory);
}

locus_status locus__device_upload(const locus_device *device, void *memory,
                                  const void *host, size_t bytes,
                                  locus_op_context *op)
{
    if (locus__fault_hit(LOCUS__FAULT_COPY))
        return locus__fail(LOCUS_ERROR_BACKEND,
                           "upload of %zu bytes to %s failed (injected fault)",
                           bytes, device->info.selector);
    return device->backend->table->upload(device->backend->state,
                                          device->index_in_backend, memory,
                                          host, bytes, op);
}

locus_status locus__device_download(const locus_device *device,
                                    const void *memory, void *host,
                                    size_t bytes, locus_op_context *op)
{
    if (locus__fault_hit(LOCUS__FAULT_COPY))
        return locus__fail(LOCUS_ERROR_BACKEND,
                           "download of %zu bytes from %s failed (injected "
                           "fault)",
                           bytes, device->info.selector);
    return device->backend->table->download(device->backend->state,
                                            device->index_in_backend, memory,
                                            host, bytes, op);
}
