/* What the roofline's two files share: bench_svg.c lays out the page
 * (panels, ceilings, legend text, key) and bench_svg_plot.c draws one
 * panel's plot (axes, roof, markers, number labels) and its legend. */
#ifndef LOCUS_TOOL_BENCH_SVG_PARTS_H
#define LOCUS_TOOL_BENCH_SVG_PARTS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "bench_svg.h"

#define MARGIN 16.0
#define HEADING_SIZE 15.0
#define TITLE_SIZE 13.0
#define NOTE_SIZE 11.0
#define TICK_SIZE 11.0
#define LEGEND_SIZE 11.0
#define KEY_SIZE 11.0
#define LABEL_SIZE 10.0
#define PLOT_WIDTH 440.0
#define PLOT_HEIGHT 300.0
#define LEGEND_GAP 24.0
/* Below the plot to the x tick labels: clear of the lowest y label. */
#define TICK_GAP 8.0
#define MAX_LEGEND_TEXT 340.0
#define MAX_SKIP_LINES 8
#define PANEL_GAP 28.0
#define FOOTER_LINE 720

static inline double line_height(double size)
{
    return size * (SVG_ASCENT + SVG_DESCENT);
}

static inline double max_of(double a, double b)
{
    return a > b ? a : b;
}

/* amount / seconds / 1e9 (GFLOP/s, GB/s); 0 without a time. */
static inline double billions_per_second(double amount, double seconds)
{
    return seconds > 0.0 && isfinite(seconds) ? amount / seconds / 1e9 : 0.0;
}

/* A result's rate and its arithmetic intensity (flop/byte). */
static inline double result_gflops(const bench_result *result)
{
    return billions_per_second(result->flops, result->best_seconds);
}

static inline double result_intensity(const bench_result *result)
{
    return result->bytes ? result->flops / (double)result->bytes : 0.0;
}

/* One device's panel: its results, ceilings and axes. */
typedef struct panel {
    bench_roof roof;
    char peak_source[160], bandwidth_source[160];
    bool above_slope; /* a point above the memory roof */
    const bench_result *results[MAX_SHAPES];
    size_t count;
    int x_low, x_high, y_low, y_high; /* decades of the axes */
    double tick_width, legend_width, height;
} panel;

#define MAX_PANELS 16

/* The reference names of the whole picture, in order of appearance: each
 * keeps its marker and colour in every panel. */
typedef struct reference_names {
    const char *names[MAX_PANELS * BENCH_MAX_REFERENCES];
    size_t count;
} reference_names;

size_t bench_svg_reference_index(reference_names *names, const char *name);

/* Where a panel's plot sits and which decades its axes span. */
typedef struct plot {
    double left, top;
    int x_low, x_high, y_low, y_high;
} plot;

typedef struct legend_entry {
    char text[200];
    int kind; /* LEGEND_* */
    size_t reference;
} legend_entry;

enum {
    LEGEND_LOCUS,
    LEGEND_FAILED,
    LEGEND_REFERENCE,
    LEGEND_ROOF,
    LEGEND_TEXT,
    LEGEND_SOURCE, /* grey, indented: where the line above came from */
};

/* Where an entry's text begins, right of its marker. */
static inline double legend_indent(int kind)
{
    return kind == LEGEND_SOURCE ? 32.0 : 22.0;
}

#define MAX_LEGEND (BENCH_MAX_REFERENCES * MAX_PANELS + 8)
#define LEGEND_LINE 18.0

/* bench_svg_plot.c */
void bench_svg_tick_text(int decade, char *text, size_t capacity);
void bench_svg_axes(svg_writer *svg, const plot *g);
void bench_svg_roof(svg_writer *svg, const plot *g, const bench_roof *roof);
void bench_svg_points(svg_writer *svg, const plot *g, const panel *p,
                      reference_names *names);
void bench_svg_legend(svg_writer *svg, const legend_entry *entries,
                      size_t count, double x, double y);

#endif
