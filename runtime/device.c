#include "device.h"

#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "scheduler.h"
#include "status.h"

static void assign_selector(locus_device *device)
{
    locus_device_info *info = &device->info;
    const char *backend = device->backend->name;
    if (strcmp(backend, "cpu") == 0) {
        /* Device 0 is every worker; the others are one node each. */
        if (device->index_in_backend == 0) {
            snprintf(info->selector, sizeof info->selector, "cpu");
        } else {
            int node =
                device->context->topology.nodes[device->index_in_backend - 1]
                    .os_index;
            snprintf(info->selector, sizeof info->selector, "cpu:numa=%d",
                     node);
        }
        return;
    }
    snprintf(info->selector, sizeof info->selector, "%s:%zu", backend,
             device->index_in_backend);
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

static bool backend_is(const locus_device *device, const char *name)
{
    return strcmp(device->backend->name, name) == 0;
}

static bool matches(const locus_device *device, const locus__selector *selector)
{
    switch (selector->kind) {
    case LOCUS__SELECT_AUTO:
        return false;
    case LOCUS__SELECT_CPU:
        if (!backend_is(device, "cpu"))
            return false;
        if (selector->numa_node < 0)
            return device->index_in_backend == 0;
        /* One node: the whole-machine device is that node's device. */
        if (device->backend->device_count == 1)
            return device->context->topology.nodes[0].os_index ==
                   selector->numa_node;
        return device->index_in_backend > 0 &&
               device->context->topology.nodes[device->index_in_backend - 1]
                       .os_index == selector->numa_node;
    case LOCUS__SELECT_CUDA:
        return backend_is(device, "cuda") &&
               (selector->index < 0 ||
                device->index_in_backend == (size_t)selector->index);
    case LOCUS__SELECT_OPENCL:
        if (!backend_is(device, "opencl"))
            return false;
        if (selector->want_kind >= 0 &&
            device->info.kind != (locus_device_kind)selector->want_kind)
            return false;
        return selector->index < 0 ||
               device->index_in_backend == (size_t)selector->index;
    }
    return false;
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

const char *locus_device_kind_str(locus_device_kind kind)
{
    switch (kind) {
    case LOCUS_DEVICE_CPU:
        return "cpu";
    case LOCUS_DEVICE_GPU:
        return "gpu";
    case LOCUS_DEVICE_ACCELERATOR:
        return "accelerator";
    }
    return "unknown";
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

LOCUS_API locus_status locus_device_find(locus_context *context,
                                         const char *selector,
                                         locus_device **out)
{
    locus__clear_error();
    if (!context || !selector || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context    ? "context"
                           : !selector ? "selector"
                                       : "out");
    *out = NULL;
    locus__selector_list list;
    locus_status status = locus__parse_selector_list(selector, &list);
    if (status != LOCUS_SUCCESS)
        return status;
    for (size_t i = 0; i < list.count; i++) {
        locus_device *device =
            list.items[i].kind == LOCUS__SELECT_AUTO
                ? locus__sched_default_device(context)
                : locus__device_match(context, &list.items[i]);
        if (device) {
            *out = device;
            return LOCUS_SUCCESS;
        }
    }
    return locus__fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                       "no device matches '%s' (run `locus info` to list "
                       "them)",
                       selector);
}

/* The same walk as locus__sched_choose's over the device list, less the
 * op's own check (whether the device offers it). */
LOCUS_API locus_status locus_default_device(locus_context *context,
                                            locus_device **out,
                                            locus_default_choice *how)
{
    locus__clear_error();
    if (!context || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "out" : "context");
    *out = NULL;
    locus_default_choice choice = LOCUS_DEFAULT_FALLBACK;
    const locus__selector_list *list = &context->config.device;
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].kind == LOCUS__SELECT_AUTO) {
            choice = LOCUS_DEFAULT_AUTO;
            break;
        }
        locus_device *device = locus__device_match(context, &list->items[i]);
        if (device) {
            *out = device;
            choice = LOCUS_DEFAULT_SELECTED;
            break;
        }
    }
    if (!*out)
        *out = locus__sched_default_device(context);
    if (how)
        *how = choice;
    if (!*out)
        return locus__fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                           "the context has no device");
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
