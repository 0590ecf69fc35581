/* The scheduler's figures measured by running a device's own ops: the op
 * layer's part of the calibration (scheduling/calibration.c keeps the
 * figures, scheduling/calibration_cache.c their files). */
#ifndef LOCUS_RUNTIME_CALIBRATION_MEASURE_H
#define LOCUS_RUNTIME_CALIBRATION_MEASURE_H

#include "calibration.h"

/* Times the device's figures with its own ops (records paused, no
 * fallback meanwhile); an op the device does not offer keeps a nominal
 * figure. A locus__measure_fn. */
locus_status locus__measure(locus_context *context, locus_device *device,
                            locus__measure_kind kind, locus__rates *rates);

#endif
