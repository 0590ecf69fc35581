/* One panel of the roofline (bench_svg.c lays out the page): the log-log
 * axes, the roof, the results and their references, the number beside
 * each result, and the legend. */
#include "bench_svg_parts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const reference_colours[] = {"#e6550d", "#31a354", "#756bb1",
                                                "#636363"};

#define LOCUS_COLOUR "#1f5fa8"
#define FAILED_COLOUR "#d62728"

size_t bench_svg_reference_index(reference_names *names, const char *name)
{
    for (size_t i = 0; i < names->count; i++)
        if (strcmp(names->names[i], name) == 0)
            return i;
    if (names->count < sizeof names->names / sizeof names->names[0])
        names->names[names->count++] = name;
    return names->count - 1;
}

void bench_svg_tick_text(int decade, char *text, size_t capacity)
{
    if (decade >= 0 && decade <= 5)
        snprintf(text, capacity, "%.0f", pow(10.0, decade));
    else if (decade < 0 && decade >= -3)
        snprintf(text, capacity, "%.*f", -decade, pow(10.0, decade));
    else
        snprintf(text, capacity, "1e%d", decade);
}

/* Every decade labelled up to 8 of them, every other one beyond. */
static int tick_step(int low, int high)
{
    return high - low > 8 ? 2 : 1;
}

static double plot_x(const plot *g, double value)
{
    return g->left +
           (log10(value) - g->x_low) / (g->x_high - g->x_low) * PLOT_WIDTH;
}

static double plot_y(const plot *g, double value)
{
    return g->top + PLOT_HEIGHT -
           (log10(value) - g->y_low) / (g->y_high - g->y_low) * PLOT_HEIGHT;
}

void bench_svg_axes(svg_writer *svg, const plot *g)
{
    const svg_font x_tick = {.size = TICK_SIZE, .anchor = SVG_ANCHOR_MIDDLE};
    const svg_font y_tick = {.size = TICK_SIZE, .anchor = SVG_ANCHOR_END};
    double right = g->left + PLOT_WIDTH, bottom = g->top + PLOT_HEIGHT;
    char text[32];
    for (int d = g->x_low; d <= g->x_high; d++) {
        double x = plot_x(g, pow(10.0, d));
        svg_printf(svg,
                   "<line class='grid-x' data-value='1e%d' x1='%.2f' "
                   "y1='%.2f' x2='%.2f' y2='%.2f' stroke='#e5e5e5'/>\n",
                   d, x, g->top, x, bottom);
        if ((d - g->x_low) % tick_step(g->x_low, g->x_high) == 0) {
            bench_svg_tick_text(d, text, sizeof text);
            svg_text(svg, x, bottom + TICK_GAP + TICK_SIZE * SVG_ASCENT,
                     &x_tick, text);
        }
    }
    for (int d = g->y_low; d <= g->y_high; d++) {
        double y = plot_y(g, pow(10.0, d));
        svg_printf(svg,
                   "<line class='grid-y' data-value='1e%d' x1='%.2f' "
                   "y1='%.2f' x2='%.2f' y2='%.2f' stroke='#e5e5e5'/>\n",
                   d, g->left, y, right, y);
        if ((d - g->y_low) % tick_step(g->y_low, g->y_high) == 0) {
            bench_svg_tick_text(d, text, sizeof text);
            svg_text(svg, g->left - 6.0, y + 0.35 * TICK_SIZE, &y_tick, text);
        }
    }
    svg_printf(svg,
               "<rect x='%.2f' y='%.2f' width='%.0f' height='%.0f' "
               "fill='none' stroke='#333333'/>\n",
               g->left, g->top, PLOT_WIDTH, PLOT_HEIGHT);
    const svg_font label = {.size = NOTE_SIZE, .fill = "#333333"};
    const svg_font centred = {
        .size = NOTE_SIZE, .fill = "#333333", .anchor = SVG_ANCHOR_MIDDLE};
    svg_text(svg, g->left, g->top - 6.0, &label,
             "achieved GFLOP/s (log scale)");
    svg_text(svg, g->left + PLOT_WIDTH / 2,
             bottom + TICK_GAP + line_height(TICK_SIZE) + 2.0 +
                 NOTE_SIZE * SVG_ASCENT,
             &centred, "arithmetic intensity, flop/byte (log scale)");
}

/* min(peak, bandwidth x intensity) across the plot, clipped to it. */
void bench_svg_roof(svg_writer *svg, const plot *g, const bench_roof *roof)
{
    double x_min = pow(10.0, g->x_low), x_max = pow(10.0, g->x_high);
    double y_min = pow(10.0, g->y_low);
    double peak = roof->peak_gflops, bandwidth = roof->bandwidth_gbps;
    svg_printf(svg,
               "<polyline class='roof' data-peak='%.9g' data-bandwidth='%.9g' "
               "fill='none' stroke='#222222' stroke-width='2' points='",
               peak, bandwidth);
    if (bandwidth > 0.0) {
        double start = fmax(x_min, y_min / bandwidth);
        double ridge = fmin(peak / bandwidth, x_max);
        if (start < ridge)
            svg_printf(svg, "%.2f,%.2f ", plot_x(g, start),
                       plot_y(g, bandwidth * start));
        svg_printf(svg, "%.2f,%.2f ", plot_x(g, ridge),
                   plot_y(g, fmin(peak, bandwidth * ridge)));
    } else {
        svg_printf(svg, "%.2f,%.2f ", plot_x(g, x_min), plot_y(g, peak));
    }
    svg_printf(svg, "%.2f,%.2f'/>\n", plot_x(g, x_max), plot_y(g, peak));
}

/* A reference's marker, by its index in the picture's list of names. */
static void draw_marker(svg_writer *svg, size_t index, double x, double y,
                        const char *attributes)
{
    const char *colour = reference_colours[index % 4];
    static const double shapes[4][8] = {
        {0, -6.5, 6.5, 0, 0, 6.5, -6.5, 0}, /* diamond */
        {-5, -5, 5, -5, 5, 5, -5, 5},       /* square */
        {0, -6, 6, 4, -6, 4, 0, 0},         /* triangle up */
        {-6, -4, 6, -4, 0, 6, 0, 0},        /* triangle down */
    };
    size_t corners = index % 4 < 2 ? 4 : 3;
    svg_printf(svg,
               "<polygon %s fill='none' stroke='%s' stroke-width='1.6' "
               "points='",
               attributes, colour);
    /* Triangles are placed by their centroid, as the checker reads them. */
    double cx = 0, cy = 0;
    for (size_t c = 0; c < corners; c++)
        cx += shapes[index % 4][2 * c] / (double)corners,
            cy += shapes[index % 4][2 * c + 1] / (double)corners;
    for (size_t c = 0; c < corners; c++)
        svg_printf(svg, "%.2f,%.2f ", x + shapes[index % 4][2 * c] - cx,
                   y + shapes[index % 4][2 * c + 1] - cy);
    svg_printf(svg, "'/>\n");
}

typedef struct box {
    double x0, y0, x1, y1;
} box;

static bool boxes_overlap(const box *a, const box *b)
{
    return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* The point's number beside it: right, left, above or below, the first
 * place inside the plot that overlaps no earlier number. A point with no
 * such place (one of a crowd at one spot) goes without: the key below
 * still lists it, and a pile of numbers would label none of them. */
static void draw_point_label(svg_writer *svg, const plot *g, double x, double y,
                             size_t number, box *placed, size_t *placed_count)
{
    char text[24];
    snprintf(text, sizeof text, "%zu", number);
    double w = svg_text_width(text, LABEL_SIZE, false);
    double up = LABEL_SIZE * SVG_ASCENT, down = LABEL_SIZE * SVG_DESCENT;
    double middle = y + 0.35 * LABEL_SIZE; /* a baseline centred on y */
    const double lefts[4] = {x + 9.0, x - 9.0 - w, x - w / 2, x - w / 2};
    const double baselines[4] = {middle, middle, y - 9.0, y + 9.0 + up};
    for (int c = 0; c < 4; c++) {
        box b = {lefts[c], baselines[c] - up, lefts[c] + w,
                 baselines[c] + down};
        if (b.x0 < g->left || b.x1 > g->left + PLOT_WIDTH || b.y0 < g->top ||
            b.y1 > g->top + PLOT_HEIGHT)
            continue;
        bool free = true;
        for (size_t k = 0; k < *placed_count && free; k++)
            free = !boxes_overlap(&b, &placed[k]);
        if (!free)
            continue;
        placed[(*placed_count)++] = b;
        const svg_font font = {
            .size = LABEL_SIZE, .fill = "#333333", .class_name = "point-label"};
        svg_text(svg, b.x0, baselines[c], &font, text);
        return;
    }
}

void bench_svg_points(svg_writer *svg, const plot *g, const panel *p,
                      reference_names *names)
{
    box *placed = malloc((p->count + 1) * sizeof *placed);
    size_t placed_count = 0;
    for (size_t i = 0; i < p->count; i++) {
        const bench_result *r = p->results[i];
        double x = plot_x(g, result_intensity(r)),
               y = plot_y(g, result_gflops(r));
        for (size_t k = 0; k < r->reference_count; k++) {
            const bench_reference *ref = &r->references[k];
            if (!(ref->gflops > 0.0) || !isfinite(ref->gflops))
                continue;
            double ry = plot_y(g, ref->gflops);
            svg_printf(svg,
                       "<line class='pair' x1='%.2f' y1='%.2f' x2='%.2f' "
                       "y2='%.2f' stroke='#bbbbbb' stroke-dasharray='3,2'/>\n",
                       x, y, x, ry);
            char attributes[160];
            snprintf(attributes, sizeof attributes,
                     "class='reference' data-point='%zu' data-gflops='%.9g'",
                     i + 1, ref->gflops);
            draw_marker(svg, bench_svg_reference_index(names, ref->name), x, ry,
                        attributes);
        }
        svg_printf(svg, "<circle class='point%s' data-point='%zu' data-shape='",
                   r->passed ? "" : " failed", i + 1);
        svg_attribute_text(svg, r->shape);
        svg_printf(svg,
                   "' data-intensity='%.9g' data-gflops='%.9g' cx='%.2f' "
                   "cy='%.2f' r='4.5' fill='%s' stroke='#ffffff'/>\n",
                   result_intensity(r), result_gflops(r), x, y,
                   r->passed ? LOCUS_COLOUR : FAILED_COLOUR);
        if (placed)
            draw_point_label(svg, g, x, y, i + 1, placed, &placed_count);
    }
    free(placed);
}

void bench_svg_legend(svg_writer *svg, const legend_entry *entries,
                      size_t count, double x, double y)
{
    const svg_font font = {.size = LEGEND_SIZE};
    const svg_font grey = {.size = LEGEND_SIZE, .fill = "#555555"};
    svg_printf(svg, "<g class='legend'>\n");
    for (size_t e = 0; e < count; e++) {
        double middle = y + LEGEND_LINE * ((double)e + 0.5);
        switch (entries[e].kind) {
        case LEGEND_LOCUS:
        case LEGEND_FAILED:
            svg_printf(svg, "<circle cx='%.2f' cy='%.2f' r='4.5' fill='%s'/>\n",
                       x + 8.0, middle,
                       entries[e].kind == LEGEND_LOCUS ? LOCUS_COLOUR
                                                       : FAILED_COLOUR);
            break;
        case LEGEND_REFERENCE:
            draw_marker(svg, entries[e].reference, x + 8.0, middle,
                        "class='legend-marker'");
            break;
        case LEGEND_ROOF:
            svg_printf(svg,
                       "<line x1='%.2f' y1='%.2f' x2='%.2f' y2='%.2f' "
                       "stroke='#222222' stroke-width='2'/>\n",
                       x, middle, x + 16.0, middle);
            break;
        default:
            break;
        }
        bool source = entries[e].kind == LEGEND_SOURCE;
        svg_text(svg, x + legend_indent(entries[e].kind),
                 middle + 0.35 * LEGEND_SIZE, source ? &grey : &font,
                 entries[e].text);
    }
    svg_printf(svg, "</g>\n");
}
