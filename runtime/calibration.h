/* Calibration: what each device measured at first use, kept in a cache file
 * per host and device, and the nominal figures used before (or instead). */
#ifndef LOCUS_RUNTIME_CALIBRATION_H
#define LOCUS_RUNTIME_CALIBRATION_H

#include "calibration_file.h"
#include "context.h"

typedef enum locus__rates_source {
    LOCUS__RATES_NONE = 0, /* not looked up yet */
    LOCUS__RATES_NOMINAL,  /* built-in figures (LOCUS_CALIBRATION=nominal) */
    LOCUS__RATES_CACHED,   /* read from the cache file */
    LOCUS__RATES_MEASURED, /* measured by this process */
} locus__rates_source;

const char *locus__rates_source_str(locus__rates_source source);

/* A device's rates: cached or measured at the first call for it (once per
 * context; concurrent callers wait), nominal when LOCUS_CALIBRATION says so
 * or when measuring failed (with a warning). Never fails. */
const locus__rates *locus__device_rates(locus_context *context,
                                        locus_device *device);

/* Measures the device now, ignoring and then rewriting its cache file. */
locus_status locus__calibrate(locus_context *context, locus_device *device);

/* Whether this thread is measuring a device: its ops then never fall back
 * to another device (that would measure the wrong one, and would ask for
 * that device's figures while the calibration lock is held). */
bool locus__calibrating(void);

/* Whether the device's ops run on the context's worker pool, and so may
 * pay its wake-up (locus__rates.wake_seconds): the CPU backend's do
 * (services->run); a module computing on host memory has threads of its
 * own, or none. */
bool locus__runs_on_pool(const locus_device *device);

/* Nominal figures by kind of device, for LOCUS_CALIBRATION=nominal. */
void locus__nominal_rates(const locus_device *device, locus__rates *rates);

/* Robust mean of samples: those further than 3 median absolute deviations
 * from the median are rejected as outliers (a preempted run, a page-fault
 * storm), the rest averaged. Sorts samples in place; count >= 1. */
double locus__robust_mean(double *samples, size_t count);

/* Fits time = fixed + work / rate to the points (work_i, seconds_i) by least
 * squares of the relative error, so that small and large points weigh alike.
 * Returns false when the points do not give a positive rate. */
bool locus__fit_rate(const double *work, const double *seconds, size_t count,
                     double *fixed_seconds, double *rate);

#endif
