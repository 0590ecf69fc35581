/* Calibration: the figures the cost model has of each device, where they
 * come from (built-in nominal ones, a short probe, the full calibration
 * kept in a cache file per host and device), and when they are measured
 * (docs/SCHEDULER.md, "Calibration"). */
#ifndef LOCUS_RUNTIME_CALIBRATION_H
#define LOCUS_RUNTIME_CALIBRATION_H

#include "calibration_file.h"
#include "context_types.h"

/* In order of trust: a later one replaces an earlier one, never the
 * other way round. */
typedef enum locus__rates_source {
    LOCUS__RATES_NONE = 0, /* not looked up yet */
    LOCUS__RATES_NOMINAL,  /* built-in figures: nothing measured */
    /* A NUMA node's CPU device: the whole CPU's probe or calibration,
     * scaled to the node's share of the workers. */
    LOCUS__RATES_DERIVED,
    LOCUS__RATES_PROBED,   /* a short probe, by this process or cached */
    LOCUS__RATES_CACHED,   /* the full calibration, read from its file */
    LOCUS__RATES_MEASURED, /* the full calibration, by this process */
} locus__rates_source;

const char *locus__rates_source_str(locus__rates_source source);

/* How far off figures of this source may be, as a factor: an estimate
 * made with them may be that many times too high or too low. The
 * scheduler probes, or warns, when two candidates are closer than their
 * doubts multiplied. */
double locus__rates_doubt(locus__rates_source source);

/* Full: every figure, at sizes that swamp the clock and the caches (about
 * half a second on a CPU; `locus calibrate`). Probe: the same figures at
 * small sizes, a tenth of that. */
typedef enum locus__measure_kind {
    LOCUS__MEASURE_FULL,
    LOCUS__MEASURE_PROBE,
} locus__measure_kind;

/* A device's figures as they stand, copied to *out, consistent even while
 * another thread replaces them; returns out. Looked up at the first call
 * for the device: the full calibration's cache file, else (a NUMA node's
 * CPU device) the whole CPU's figures scaled, else (the whole CPU) a
 * cached probe, else nominal; measured in full only under
 * LOCUS_CALIBRATION=remeasure. Otherwise it never measures. */
const locus__rates *locus__device_rates(locus_context *context,
                                        locus_device *device,
                                        locus__rates *out);

/* Where the device's figures come from now (looked up first if need be). */
locus__rates_source locus__device_rates_source(locus_context *context,
                                               locus_device *device);

/* Whether a probe would give this device measured figures: a CPU device
 * of the built-in backend (the whole CPU, or a NUMA node's whose figures
 * derive from it) whose whole CPU has only nominal ones, not probed yet,
 * under LOCUS_CALIBRATION=auto. Its figures are the furthest off (its
 * nominal rate does not know the CPU's vector units) and the cheapest to
 * measure: no driver to start, no kernel to build. */
bool locus__probe_would_help(locus_context *context, locus_device *device);

/* Probes the whole CPU device that `device` is or belongs to, once per
 * context (cached for the next process), and derives its NUMA nodes'
 * devices' figures from it. Returns whether any figure changed (the
 * scheduler's remembered choices are then forgotten). */
bool locus__probe(locus_context *context, locus_device *device);

/* Measures the device in full now, ignoring and then rewriting its cache
 * file. */
locus_status locus__calibrate(locus_context *context, locus_device *device);

/* Whether this thread is measuring a device: its ops then never fall back
 * to another device (that would measure the wrong one, and would ask for
 * that device's figures while the calibration lock is held). */
bool locus__calibrating(void);
void locus__set_calibrating(bool calibrating);

/* Measures the device's figures of this kind by running its own ops. The
 * ops sit above the scheduler that these figures serve, so the op layer
 * supplies the measurement (ops/calibration_measure.c) and the context's
 * life cycle hands it over before any device is asked for figures. */
typedef locus_status (*locus__measure_fn)(locus_context *context,
                                          locus_device *device,
                                          locus__measure_kind kind,
                                          locus__rates *rates);
void locus__calibration_measure_with(locus__measure_fn measure);

/* Whether the device's ops run on the context's worker pool, and so may
 * pay its wake-up (locus__rates.wake_seconds): its backend says so with
 * pool_node (backend.h; the CPU's do, through services->run); a module
 * computing on host memory has threads of its own, or none. */
bool locus__runs_on_pool(const locus_device *device);
/* For a device that runs on the pool: the OS node whose workers it runs
 * on, -1 for the whole pool. */
int locus__pool_node_of(const locus_device *device);

/* Nominal figures, for LOCUS_CALIBRATION=nominal and for every device
 * until it is measured: the backend's own (nominal_rates), else generic
 * ones by whether it computes on host memory and its kind; a rate the
 * backend leaves at 0 that the model divides by takes the generic one. */
void locus__nominal_rates(const locus_device *device, locus__rates *rates);

/* The key that names the device's cache file of this kind, and that the
 * file must carry (calibration_cache.c); false when it does not fit. */
bool locus__calibration_key(locus_context *context, const locus_device *device,
                            locus__measure_kind kind, char *key, size_t size);

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
