/* The context's device list and selector matching. */
#ifndef LOCUS_RUNTIME_DEVICE_H
#define LOCUS_RUNTIME_DEVICE_H

#include "context.h"
#include "env.h"

/* Fills the device list from the available backends. */
locus_status locus__devices_collect(locus_context *context);
/* The first device matching one selector item (not auto), or NULL. */
locus_device *locus__device_match(locus_context *context,
                                  const locus__selector *selector);

#endif
