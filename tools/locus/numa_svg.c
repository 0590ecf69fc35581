/* `locus numa --svg`: the measured bandwidth and latency matrices side by
 * side as heat maps, or the distance matrix when nothing was measured.
 *
 * Each map is laid out from its own text (titles, labels, legend) before
 * anything is written, so that the picture fits its canvas for any node
 * count. One shading rule for every map: darker is better (more
 * bandwidth, less latency, nearer); a map whose measured cells all hold
 * one value shows it in the middle shade, since it is neither best nor
 * worst of anything. docs/NUMA.md shows how to read it. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "numa.h"
#include "svg.h"

#define MARGIN 16.0
#define PANEL_GAP 40.0
#define HEADING_SIZE 15.0
#define TITLE_SIZE 13.0
#define NOTE_SIZE 11.0
#define CELL_TEXT_SIZE 12.0
#define LABEL_SIZE 12.0
#define LEGEND_SIZE 11.0
#define SWATCH 14.0
#define MIN_CELL 44.0
/* The widest page a long line of text may ask for. */
#define MAX_NOTE_WIDTH 900.0

/* The height a line of text of this size takes, baseline to baseline. */
static double line_height(double size)
{
    return size * (SVG_ASCENT + SVG_DESCENT);
}

typedef struct heat_map {
    const char *title;
    const char *subtitle;
    const char *unit;   /* after a legend value, e.g. " GB/s" */
    const char *format; /* of a value */
    const char *best_word, *worst_word, *missing_word;
    const double *values; /* n x n by node order; NaN: not measured */
    bool higher_is_better;

    double lo, hi; /* over the measured cells */
    size_t measured, missing;
    char legend[3][96];     /* best, worst (or the only value), missing */
    double legend_shade[3]; /* goodness of each swatch; NAN: missing */
    size_t legend_count;

    double cell, label_width, width, height;
} heat_map;

/* 0 for the worst measured value, 1 for the best, 0.5 when all are one. */
static double goodness(const heat_map *map, double value)
{
    if (!(map->hi > map->lo))
        return 0.5;
    double t = (value - map->lo) / (map->hi - map->lo);
    return map->higher_is_better ? t : 1.0 - t;
}

/* A blue ramp from pale (worst) to dark (best). */
static void shade(double t, char *fill, size_t capacity)
{
    static const double pale[3] = {236, 242, 250}, dark[3] = {8, 48, 107};
    int rgb[3];
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lround(pale[k] + (dark[k] - pale[k]) * t);
    snprintf(fill, capacity, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

#define MISSING_FILL "#d9d9d9"

static void add_legend(heat_map *map, double shade, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void add_legend(heat_map *map, double shade, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(map->legend[map->legend_count], sizeof map->legend[0], format,
              arguments);
    va_end(arguments);
    map->legend_shade[map->legend_count++] = shade;
}

static void layout_map(heat_map *map, const numa_view *view)
{
    size_t n = view->node_count;
    map->lo = INFINITY;
    map->hi = -INFINITY;
    map->measured = map->missing = 0;
    double widest_value = 0.0;
    for (size_t k = 0; k < n * n; k++) {
        double v = map->values[k];
        if (isnan(v)) {
            map->missing++;
            continue;
        }
        map->measured++;
        map->lo = v < map->lo ? v : map->lo;
        map->hi = v > map->hi ? v : map->hi;
        char text[64];
        snprintf(text, sizeof text, map->format, v);
        double w = svg_text_width(text, CELL_TEXT_SIZE, false);
        widest_value = w > widest_value ? w : widest_value;
    }
    map->cell = widest_value + 12.0 > MIN_CELL ? widest_value + 12.0 : MIN_CELL;

    double widest_label = 0.0;
    for (size_t i = 0; i < n; i++) {
        char text[16];
        snprintf(text, sizeof text, "%d", view->nodes[i].info.os_index);
        double w = svg_text_width(text, LABEL_SIZE, false);
        widest_label = w > widest_label ? w : widest_label;
    }
    map->label_width = widest_label + 10.0;

    char best[48], worst[48];
    double best_value = map->higher_is_better ? map->hi : map->lo;
    double worst_value = map->higher_is_better ? map->lo : map->hi;
    snprintf(best, sizeof best, map->format, best_value);
    snprintf(worst, sizeof worst, map->format, worst_value);
    map->legend_count = 0;
    if (map->measured && map->hi > map->lo) {
        add_legend(map, 1.0, "%s%s: %s", best, map->unit, map->best_word);
        add_legend(map, 0.0, "%s%s: %s", worst, map->unit, map->worst_word);
    } else if (map->measured) {
        add_legend(map, 0.5, "%s%s: %s", best, map->unit,
                   map->measured == 1 ? "the only value" : "every cell alike");
    }
    if (map->missing)
        add_legend(map, NAN, "-: %s", map->missing_word);

    double width = svg_text_width(map->title, TITLE_SIZE, true);
    double w = svg_text_width(map->subtitle, NOTE_SIZE, false);
    width = w > width ? w : width;
    w = map->label_width + (double)n * map->cell;
    width = w > width ? w : width;
    for (size_t k = 0; k < map->legend_count; k++) {
        w = SWATCH + 6.0 + svg_text_width(map->legend[k], LEGEND_SIZE, false);
        width = w > width ? w : width;
    }
    map->width = width;
    map->height = line_height(TITLE_SIZE) + 4.0 + line_height(NOTE_SIZE) + 8.0 +
                  (double)n * map->cell + 4.0 + line_height(LABEL_SIZE) + 10.0 +
                  (double)map->legend_count * (SWATCH + 4.0);
}

static void draw_legend(svg_writer *svg, const heat_map *map, double x,
                        double y)
{
    const svg_font font = {.size = LEGEND_SIZE};
    svg_printf(svg, "<g class='legend'>\n");
    for (size_t k = 0; k < map->legend_count; k++) {
        char fill[16];
        if (isnan(map->legend_shade[k]))
            snprintf(fill, sizeof fill, MISSING_FILL);
        else
            shade(map->legend_shade[k], fill, sizeof fill);
        double top = y + (double)k * (SWATCH + 4.0);
        svg_printf(svg,
                   "<rect x='%.1f' y='%.1f' width='%.0f' height='%.0f' "
                   "fill='%s' stroke='#888888'/>\n",
                   x, top, SWATCH, SWATCH, fill);
        svg_text(svg, x + SWATCH + 6.0, top + SWATCH / 2 + 0.35 * LEGEND_SIZE,
                 &font, map->legend[k]);
    }
    svg_printf(svg, "</g>\n");
}

static void draw_map(svg_writer *svg, const heat_map *map,
                     const numa_view *view, double x0, double y0)
{
    size_t n = view->node_count;
    svg_printf(svg, "<g class='panel' data-better='%s'>\n",
               map->higher_is_better ? "higher" : "lower");
    const svg_font title = {
        .size = TITLE_SIZE, .bold = true, .class_name = "title"};
    const svg_font note = {.size = NOTE_SIZE, .fill = "#444444"};
    double y = y0 + TITLE_SIZE * SVG_ASCENT;
    svg_text(svg, x0, y, &title, map->title);
    y = y0 + line_height(TITLE_SIZE) + 4.0 + NOTE_SIZE * SVG_ASCENT;
    svg_text(svg, x0, y, &note, map->subtitle);
    double grid_top =
        y0 + line_height(TITLE_SIZE) + 4.0 + line_height(NOTE_SIZE) + 8.0;
    double grid_left = x0 + map->label_width;
    const svg_font row_label = {.size = LABEL_SIZE, .anchor = SVG_ANCHOR_END};
    const svg_font column_label = {.size = LABEL_SIZE,
                                   .anchor = SVG_ANCHOR_MIDDLE};
    /* Roughly the middle of a digit, above the baseline. */
    double centre = 0.35 * CELL_TEXT_SIZE;
    for (size_t i = 0; i < n; i++) {
        double top = grid_top + (double)i * map->cell;
        svg_textf(svg, grid_left - 6.0, top + map->cell / 2 + centre,
                  &row_label, "%d", view->nodes[i].info.os_index);
        for (size_t j = 0; j < n; j++) {
            double v = map->values[i * n + j];
            double left = grid_left + (double)j * map->cell;
            char fill[16], text[64];
            double t = isnan(v) ? 0.0 : goodness(map, v);
            if (isnan(v)) {
                snprintf(fill, sizeof fill, MISSING_FILL);
                snprintf(text, sizeof text, "-");
                svg_printf(svg, "<rect class='cell missing' data-value=''");
            } else {
                shade(t, fill, sizeof fill);
                snprintf(text, sizeof text, map->format, v);
                svg_printf(svg, "<rect class='cell' data-value='%.9g'", v);
            }
            svg_printf(svg,
                       " x='%.1f' y='%.1f' width='%.1f' height='%.1f' "
                       "fill='%s' stroke='#ffffff'/>\n",
                       left, top, map->cell, map->cell, fill);
            const svg_font value = {.size = CELL_TEXT_SIZE,
                                    .anchor = SVG_ANCHOR_MIDDLE,
                                    .fill = t > 0.55 ? "#ffffff" : "#000000"};
            svg_text(svg, left + map->cell / 2, top + map->cell / 2 + centre,
                     &value, text);
        }
    }
    double grid_bottom = grid_top + (double)n * map->cell;
    for (size_t j = 0; j < n; j++)
        svg_textf(svg, grid_left + ((double)j + 0.5) * map->cell,
                  grid_bottom + 4.0 + LABEL_SIZE * SVG_ASCENT, &column_label,
                  "%d", view->nodes[j].info.os_index);
    draw_legend(svg, map, x0,
                grid_bottom + 4.0 + line_height(LABEL_SIZE) + 10.0);
    svg_printf(svg, "</g>\n");
}

/* What the maps are: measured bandwidth and latency, else distances
 * (copied into distances, the caller's n x n array). */
static size_t choose_maps(const numa_view *view, heat_map *maps,
                          double *distances)
{
    static const char *const measured_subtitle =
        "row: threads' node, column: memory's node";
    if (view->bandwidth_gbps && view->latency_ns) {
        maps[0] = (heat_map){.title = "read bandwidth, GB/s",
                             .subtitle = measured_subtitle,
                             .unit = " GB/s",
                             .format = "%.1f",
                             .best_word = "best",
                             .worst_word = "worst",
                             .missing_word = "not measured",
                             .values = view->bandwidth_gbps,
                             .higher_is_better = true};
        maps[1] = (heat_map){.title = "latency, ns per dependent load",
                             .subtitle = measured_subtitle,
                             .unit = " ns",
                             .format = "%.0f",
                             .best_word = "best",
                             .worst_word = "worst",
                             .missing_word = "not measured",
                             .values = view->latency_ns,
                             .higher_is_better = false};
        return 2;
    }
    size_t n = view->node_count;
    for (size_t k = 0; k < n * n; k++)
        distances[k] = view->distances[k] ? view->distances[k] : NAN;
    maps[0] = (heat_map){.title = "NUMA distances (10 = local)",
                         .subtitle = "row: from node, column: to node",
                         .unit = "",
                         .format = "%.0f",
                         .best_word = "nearest",
                         .worst_word = "farthest",
                         .missing_word = "not given by the topology",
                         .values = distances,
                         .higher_is_better = false};
    return 1;
}

/* The line under the maps: why nothing was measured, or what failed. */
static void note_text(const numa_view *view, char *note, size_t capacity)
{
    note[0] = '\0';
    if (!view->bandwidth_gbps || !view->latency_ns)
        snprintf(note, capacity, "bandwidth and latency not measured: %s",
                 view->not_measured[0] ? view->not_measured
                                       : "--no-measure or a failed run");
    else if (view->measure_error[0])
        snprintf(note, capacity, "some pairs failed: %s", view->measure_error);
}

bool numa_write_svg(const numa_view *view, const char *path)
{
    size_t n = view->node_count;
    double *distances = malloc((n ? n * n : 1) * sizeof(double));
    if (!distances) {
        fprintf(stderr, "locus numa: out of memory for the svg picture\n");
        return false;
    }
    svg_writer svg;
    if (!svg_open(&svg, "locus numa", path)) {
        free(distances);
        return false;
    }
    heat_map maps[2];
    size_t map_count = choose_maps(view, maps, distances);
    double panels_width = 0.0, panels_height = 0.0;
    for (size_t m = 0; m < map_count; m++) {
        layout_map(&maps[m], view);
        panels_width += maps[m].width + (m ? PANEL_GAP : 0.0);
        if (maps[m].height > panels_height)
            panels_height = maps[m].height;
    }

    /* The topology's name and the note may widen the page, up to a
     * point: a long XML path is cut rather than stretch the picture. */
    char lines[2][400], fitted[2][400];
    snprintf(lines[0], sizeof lines[0], "topology: %s", view->topology_source);
    note_text(view, lines[1], sizeof lines[1]);
    double content_width = panels_width < 320.0 ? 320.0 : panels_width;
    for (int k = 0; k < 2; k++) {
        double w = svg_text_width(lines[k], NOTE_SIZE, false);
        w = w < MAX_NOTE_WIDTH ? w : MAX_NOTE_WIDTH;
        content_width = w > content_width ? w : content_width;
    }
    for (int k = 0; k < 2; k++)
        svg_fit_text(lines[k], content_width, NOTE_SIZE, false, fitted[k],
                     sizeof fitted[k]);

    double panels_top =
        MARGIN + line_height(HEADING_SIZE) + line_height(NOTE_SIZE) + 12.0;
    double height = panels_top + panels_height + MARGIN;
    if (lines[1][0])
        height += 6.0 + line_height(NOTE_SIZE);
    svg_begin(&svg, ceil(content_width + 2 * MARGIN), ceil(height));
    const svg_font heading_font = {
        .size = HEADING_SIZE, .bold = true, .class_name = "title"};
    const svg_font note_font = {.size = NOTE_SIZE, .fill = "#444444"};
    svg_textf(&svg, MARGIN, MARGIN + HEADING_SIZE * SVG_ASCENT, &heading_font,
              "locus numa: %zu NUMA node%s", n, n == 1 ? "" : "s");
    svg_text(&svg, MARGIN,
             MARGIN + line_height(HEADING_SIZE) + NOTE_SIZE * SVG_ASCENT,
             &note_font, fitted[0]);
    double x = MARGIN;
    for (size_t m = 0; m < map_count; m++) {
        draw_map(&svg, &maps[m], view, x, panels_top);
        x += maps[m].width + PANEL_GAP;
    }
    if (lines[1][0])
        svg_text(&svg, MARGIN,
                 panels_top + panels_height + 6.0 + NOTE_SIZE * SVG_ASCENT,
                 &note_font, fitted[1]);
    free(distances);
    return svg_close(&svg);
}
