/* The context's device list and selector matching. */
#ifndef LOCUS_RUNTIME_DEVICE_H
#define LOCUS_RUNTIME_DEVICE_H

#include <stdbool.h>

#include "context_types.h"
#include "env.h"

/* Fills the device list from the available backends. */
locus_status locus__devices_collect(locus_context *context);
/* The slot of the backend of that name, or NULL. */
locus__backend_slot *locus__backend_find(const locus_context *context,
                                         const char *name);

/* Whether a selector item can name a device of this context: auto, or a
 * backend of the context with a part that backend takes (its number, kind
 * or own part, judged by its table where it is loaded or built in; a
 * module not loaded is taken on trust). false with why ("no backend is
 * named 'gpu' (there are cpu, cuda, opencl)", "cpu takes no device
 * number"). */
bool locus__selector_valid(const locus_context *context,
                           const locus__selector *item, char *why,
                           size_t capacity);

/* For an item with a part of its backend's own that no device matches:
 * the backend's word on why ("no NUMA node 7: this machine has nodes
 * 0,1"). */
void locus__selector_explain_part(const locus_context *context,
                                  const locus__selector *item, char *why,
                                  size_t capacity);

/* The first device matching one selector item (not auto), or NULL. */
locus_device *locus__device_match(locus_context *context,
                                  const locus__selector *selector);

/* True when a and b (two devices) are views of one piece of hardware:
 * the same non-empty PCI address, e.g. cuda:0 and NVIDIA's OpenCL device
 * for the same GPU. */
bool locus__device_same_hardware(const locus_device *a, const locus_device *b);

/* A device's memory and copies, each call a fault point
 * (-Dfault_injection): what buffers and the gemm split use. */
locus_status locus__device_alloc(const locus_device *device, size_t bytes,
                                 void **memory);
/* memory may be NULL (nothing to free). */
void locus__device_free(const locus_device *device, void *memory);
locus_status locus__device_upload(const locus_device *device, void *memory,
                                  const void *host, size_t bytes,
                                  locus_op_context *op);
locus_status locus__device_download(const locus_device *device,
                                    const void *memory, void *host,
                                    size_t bytes, locus_op_context *op);

#endif
