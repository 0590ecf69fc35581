/* `locus bench ... --svg FILE`: the results on a roofline of each device
 * (bench_svg.c; docs/PICTURES.md). */
#ifndef LOCUS_TOOL_BENCH_SVG_H
#define LOCUS_TOOL_BENCH_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "bench.h"
#include "svg.h"

/* What the calibration measured of one device (0: not measured). The
 * drawing raises each ceiling to the best the run itself reached, so no
 * result sits above a roof that claims to be the device's limit. */
typedef struct bench_roof {
    char device[32]; /* the selector results carry */
    char name[128];
    double peak_gflops;
    const char *peak_source; /* e.g. "calibration (gemm)" */
    double bandwidth_gbps;
    const char *bandwidth_source;
} bench_roof;

/* Opens path before the runs, so that an unwritable path fails at once
 * and not after a long bench; false after saying why on stderr. */
bool bench_svg_open(svg_writer *svg, const char *path);

/* The devices' calibrated ceilings, then the drawing; closes svg. False
 * after saying why on stderr. */
bool bench_svg_write(svg_writer *svg, const bench_request *request,
                     const bench_outcome *outcome, locus_device **devices,
                     size_t device_count);

/* The drawing alone, from ceilings already known (a device without one
 * gets only what its results show); closes svg. */
bool bench_svg_draw(svg_writer *svg, const bench_request *request,
                    const bench_outcome *outcome, const bench_roof *roofs,
                    size_t roof_count);

#endif
