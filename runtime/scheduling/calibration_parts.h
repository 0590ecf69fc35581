/* What the scheduling folder's parts of calibration share: calibration.c
 * keeps each device's figures and decides when to look them up or measure
 * them (through the measurement ops/calibration_measure.c supplies),
 * calibration_cache.c keeps them in files between processes. Nothing
 * else includes this. */
#ifndef LOCUS_RUNTIME_CALIBRATION_PARTS_H
#define LOCUS_RUNTIME_CALIBRATION_PARTS_H

#include "calibration.h"

/* The measurement locus__calibration_measure_with was given; an error
 * when none was. */
locus_status locus__measure_now(locus_context *context, locus_device *device,
                                locus__measure_kind kind, locus__rates *rates);

/* The figures of this kind in the device's cache file, without a lock:
 * false when there is none or it is damaged (then warned about). */
bool locus__cache_read(locus_context *context, const locus_device *device,
                       locus__measure_kind kind, locus__rates *rates);

/* The cached figures of this kind (unless remeasure), else measured and
 * cached, under an exclusive lock on the file's lock file so that
 * processes starting together measure once and the others read what it
 * wrote. Returns LOCUS__RATES_CACHED or _MEASURED for a full calibration,
 * _PROBED for a probe, or _NOMINAL (nominal figures in rates) when the
 * measurement failed or another process held the lock past the bounded
 * wait with nothing cached. *kept: whether what was measured is on disk. */
locus__rates_source
locus__cache_look_up_or_measure(locus_context *context, locus_device *device,
                                locus__measure_kind kind, bool remeasure,
                                locus__rates *rates, bool *kept);

/* Why this thread's last look-up could not keep its figures ("" when it
 * could, or when nothing was measured), and forgetting it. */
const char *locus__cache_failure(void);
void locus__cache_failure_clear(void);

#endif
