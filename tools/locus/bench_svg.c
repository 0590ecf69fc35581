/* `locus bench ... --svg FILE`: each device's results on its roofline.
 *
 * A result is a point at (arithmetic intensity, achieved rate): the op's
 * counted flops over the fewest bytes it must move, and flops over the
 * best time. Its references did the same work, so they sit at the same
 * intensity, straight above or below it, with their own markers. The
 * roof is min(peak, bandwidth x intensity) on log-log axes, its two
 * figures from the calibration (locus calibrate) where it measured them,
 * raised to the best this run reached: a point above a roof that claims
 * to be the device's limit would only show that the roof is wrong. The
 * picture is laid out from its own text before it is written (svg.h).
 * docs/PICTURES.md shows how to read it. */
#include "bench_svg_parts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool bench_svg_open(svg_writer *svg, const char *path)
{
    return svg_open(svg, "locus bench", path);
}

/* A result with something to place on log axes. */
static bool drawable(const bench_result *result)
{
    return result_gflops(result) > 0.0 && result_intensity(result) > 0.0 &&
           isfinite(result_gflops(result)) &&
           isfinite(result_intensity(result));
}

/* The ceilings. Peak: the calibration's, raised to the best rate seen,
 * since nothing runs faster than the peak. Memory: the calibration's as
 * measured, else the best byte rate seen; a small op whose data stays in
 * cache between the timed runs may rise above it, and is left there. */
static void set_roof(panel *p, const bench_roof *calibrated)
{
    char device[sizeof p->roof.device];
    memcpy(device, p->roof.device, sizeof device);
    if (calibrated)
        p->roof = *calibrated;
    memcpy(p->roof.device, device, sizeof device);
    const char *peak_by = NULL, *bandwidth_by = NULL;
    const bench_result *peak_at = NULL, *bandwidth_at = NULL;
    double peak = 0.0, bandwidth = 0.0;
    for (size_t i = 0; i < p->count; i++) {
        const bench_result *r = p->results[i];
        double g = result_gflops(r);
        double b = billions_per_second((double)r->bytes, r->best_seconds);
        if (g > peak)
            peak = g, peak_by = "Locus", peak_at = r;
        if (b > bandwidth)
            bandwidth = b, bandwidth_by = "Locus", bandwidth_at = r;
        for (size_t k = 0; k < r->reference_count; k++) {
            const bench_reference *ref = &r->references[k];
            if (ref->gflops > peak && isfinite(ref->gflops))
                peak = ref->gflops, peak_by = ref->name, peak_at = r;
            if (ref->gbps > bandwidth && isfinite(ref->gbps))
                bandwidth = ref->gbps, bandwidth_by = ref->name,
                bandwidth_at = r;
        }
    }
    if (p->roof.peak_source && p->roof.peak_gflops >= peak) {
        snprintf(p->peak_source, sizeof p->peak_source, "%s",
                 p->roof.peak_source);
    } else {
        p->roof.peak_gflops = peak;
        snprintf(p->peak_source, sizeof p->peak_source, "best seen: %s, %s",
                 peak_by ? peak_by : "-", peak_at ? peak_at->shape : "-");
    }
    if (!p->roof.bandwidth_source || !(p->roof.bandwidth_gbps > 0.0)) {
        p->roof.bandwidth_gbps = bandwidth;
        snprintf(p->bandwidth_source, sizeof p->bandwidth_source,
                 "best seen: %s, %s", bandwidth_by ? bandwidth_by : "-",
                 bandwidth_at ? bandwidth_at->shape : "-");
    } else {
        snprintf(p->bandwidth_source, sizeof p->bandwidth_source, "%s",
                 p->roof.bandwidth_source);
    }
    p->above_slope = false;
    double slope = p->roof.bandwidth_gbps * 1.001;
    for (size_t i = 0; i < p->count; i++) {
        const bench_result *r = p->results[i];
        p->above_slope |= result_gflops(r) > slope * result_intensity(r);
        for (size_t k = 0; k < r->reference_count; k++)
            p->above_slope |=
                r->references[k].gflops > slope * result_intensity(r);
    }
}

/* Decades that hold [low, high] with some room at both ends. */
static void decades(double low, double high, int *from, int *to)
{
    *from = (int)floor(log10(low / 1.5));
    *to = (int)ceil(log10(high * 1.5));
    /* At least two decades, the one added on the side with less room. */
    if (*to - *from < 2) {
        if (log10(low) - *from < *to - log10(high))
            (*from)--;
        else
            (*to)++;
    }
}

static void layout_axes(panel *p)
{
    double x_min = INFINITY, x_max = 0.0, y_min = INFINITY, y_max = 0.0;
    for (size_t i = 0; i < p->count; i++) {
        const bench_result *r = p->results[i];
        x_min = fmin(x_min, result_intensity(r));
        x_max = fmax(x_max, result_intensity(r));
        y_min = fmin(y_min, result_gflops(r));
        y_max = fmax(y_max, result_gflops(r));
        for (size_t k = 0; k < r->reference_count; k++)
            if (r->references[k].gflops > 0.0) {
                y_min = fmin(y_min, r->references[k].gflops);
                y_max = fmax(y_max, r->references[k].gflops);
            }
    }
    y_max = fmax(y_max, p->roof.peak_gflops);
    if (p->roof.bandwidth_gbps > 0.0) {
        double ridge = p->roof.peak_gflops / p->roof.bandwidth_gbps;
        x_min = fmin(x_min, ridge);
        x_max = fmax(x_max, ridge);
    }
    decades(x_min, x_max, &p->x_low, &p->x_high);
    decades(y_min, y_max, &p->y_low, &p->y_high);
}

static size_t legend_entries(const panel *p, const bench_request *request,
                             reference_names *names, legend_entry *entries)
{
    size_t count = 0;
    bool any_failed = false;
    bool used[MAX_PANELS * BENCH_MAX_REFERENCES] = {false};
    for (size_t i = 0; i < p->count; i++) {
        any_failed |= !p->results[i]->passed;
        for (size_t k = 0; k < p->results[i]->reference_count; k++)
            used[bench_svg_reference_index(
                names, p->results[i]->references[k].name)] = true;
    }
    entries[count] = (legend_entry){.kind = LEGEND_LOCUS};
    snprintf(entries[count++].text, sizeof entries[0].text, "Locus %s",
             request->op_word ? request->op_word : "");
    if (any_failed) {
        entries[count] = (legend_entry){.kind = LEGEND_FAILED};
        snprintf(entries[count++].text, sizeof entries[0].text,
                 "Locus, check failed (above tolerance)");
    }
    for (size_t n = 0; n < names->count; n++) {
        if (!used[n])
            continue;
        entries[count] =
            (legend_entry){.kind = LEGEND_REFERENCE, .reference = n};
        snprintf(entries[count++].text, sizeof entries[0].text, "%s",
                 names->names[n]);
    }
    entries[count] = (legend_entry){.kind = LEGEND_ROOF};
    snprintf(entries[count++].text, sizeof entries[0].text,
             "roof: min(peak, memory x intensity)");
    entries[count] = (legend_entry){.kind = LEGEND_TEXT};
    snprintf(entries[count++].text, sizeof entries[0].text, "peak %.4g GFLOP/s",
             p->roof.peak_gflops);
    entries[count] = (legend_entry){.kind = LEGEND_SOURCE};
    snprintf(entries[count++].text, sizeof entries[0].text, "%s",
             p->peak_source);
    entries[count] = (legend_entry){.kind = LEGEND_TEXT};
    snprintf(entries[count++].text, sizeof entries[0].text, "memory %.4g GB/s",
             p->roof.bandwidth_gbps);
    entries[count] = (legend_entry){.kind = LEGEND_SOURCE};
    snprintf(entries[count++].text, sizeof entries[0].text, "%s",
             p->bandwidth_source);
    if (p->above_slope) {
        entries[count] = (legend_entry){.kind = LEGEND_SOURCE};
        snprintf(entries[count++].text, sizeof entries[0].text,
                 "above the slope: data from cache");
    }
    for (size_t e = 0; e < count; e++) {
        char fitted[200];
        svg_fit_text(entries[e].text,
                     MAX_LEGEND_TEXT - legend_indent(entries[e].kind),
                     LEGEND_SIZE, false, fitted, sizeof fitted);
        memcpy(entries[e].text, fitted, sizeof fitted);
    }
    return count;
}

static double legend_width(const legend_entry *entries, size_t count)
{
    double width = 0.0;
    for (size_t e = 0; e < count; e++)
        width = max_of(width,
                       legend_indent(entries[e].kind) +
                           svg_text_width(entries[e].text, LEGEND_SIZE, false));
    return width;
}

/* One line of the key under a plot: the point's number, its shape and
 * rate, and each reference's rate with the ratio of the times. */
static void key_line(const bench_result *r, size_t number, char *line,
                     size_t capacity)
{
    int used = snprintf(line, capacity, "%zu: %s %s, %.4g GFLOP/s (%s)%s",
                        number, r->op, r->shape, result_gflops(r),
                        r->record.algorithm, r->passed ? "" : " FAILED");
    for (size_t k = 0;
         k < r->reference_count && used > 0 && (size_t)used < capacity; k++) {
        const bench_reference *ref = &r->references[k];
        used += snprintf(line + used, capacity - (size_t)used,
                         "; %s %.4g (ratio %.2f)", ref->name, ref->gflops,
                         r->best_seconds > 0 ? ref->seconds / r->best_seconds
                                             : 0.0);
    }
}

static void layout_panel(panel *p, double legend_w)
{
    layout_axes(p);
    double widest = 0.0;
    char text[32];
    for (int d = p->y_low; d <= p->y_high; d++) {
        bench_svg_tick_text(d, text, sizeof text);
        widest = max_of(widest, svg_text_width(text, TICK_SIZE, false));
    }
    p->tick_width = widest;
    p->legend_width = legend_w;
}

static double panel_width(const panel *p)
{
    return p->tick_width + 10.0 + PLOT_WIDTH + LEGEND_GAP + p->legend_width;
}

static double panel_height(const panel *p, size_t legend_count)
{
    double plot_area = max_of(PLOT_HEIGHT, legend_count * LEGEND_LINE);
    return line_height(TITLE_SIZE) + 6.0 + line_height(NOTE_SIZE) + 4.0 +
           plot_area + TICK_GAP + line_height(TICK_SIZE) + 2.0 +
           line_height(NOTE_SIZE) + 10.0 +
           (double)p->count * (line_height(KEY_SIZE) + 2.0);
}

static void draw_panel(svg_writer *svg, const panel *p,
                       const legend_entry *entries, size_t legend_count,
                       reference_names *names, double x0, double y0,
                       double width)
{
    svg_printf(svg, "<g class='panel' data-device='");
    svg_attribute_text(svg, p->roof.device);
    svg_printf(svg, "'>\n");
    const svg_font title = {
        .size = TITLE_SIZE, .bold = true, .class_name = "title"};
    char heading[300], fitted[300];
    snprintf(heading, sizeof heading, "%s%s%s", p->roof.device,
             p->roof.name[0] ? ": " : "", p->roof.name);
    svg_fit_text(heading, width, TITLE_SIZE, true, fitted, sizeof fitted);
    svg_text(svg, x0, y0 + TITLE_SIZE * SVG_ASCENT, &title, fitted);
    plot g = {.left = x0 + p->tick_width + 10.0,
              .top = y0 + line_height(TITLE_SIZE) + 6.0 +
                     line_height(NOTE_SIZE) + 4.0,
              .x_low = p->x_low,
              .x_high = p->x_high,
              .y_low = p->y_low,
              .y_high = p->y_high};
    bench_svg_axes(svg, &g);
    bench_svg_roof(svg, &g, &p->roof);
    bench_svg_points(svg, &g, p, names);
    bench_svg_legend(svg, entries, legend_count,
                     g.left + PLOT_WIDTH + LEGEND_GAP, g.top);
    double plot_area = max_of(PLOT_HEIGHT, legend_count * LEGEND_LINE);
    double y = g.top + plot_area + TICK_GAP + line_height(TICK_SIZE) + 2.0 +
               line_height(NOTE_SIZE) + 10.0;
    const svg_font key = {.size = KEY_SIZE, .class_name = "key"};
    for (size_t i = 0; i < p->count; i++) {
        char line[600], cut[600];
        key_line(p->results[i], i + 1, line, sizeof line);
        svg_fit_text(line, width, KEY_SIZE, false, cut, sizeof cut);
        svg_text(svg, x0, y + KEY_SIZE * SVG_ASCENT, &key, cut);
        y += line_height(KEY_SIZE) + 2.0;
    }
    svg_printf(svg, "</g>\n");
}

/* Groups the drawable results by device, in order of appearance. */
static size_t gather_panels(const bench_outcome *outcome, panel *panels,
                            size_t *left_out)
{
    size_t count = 0;
    *left_out = 0;
    for (size_t i = 0; i < outcome->result_count; i++) {
        const bench_result *r = &outcome->results[i];
        if (!drawable(r)) {
            (*left_out)++;
            continue;
        }
        size_t d = 0;
        while (d < count && strcmp(panels[d].roof.device, r->device) != 0)
            d++;
        if (d == count) {
            if (count == MAX_PANELS) {
                (*left_out)++;
                continue;
            }
            memset(&panels[count], 0, sizeof panels[count]);
            snprintf(panels[count].roof.device,
                     sizeof panels[count].roof.device, "%s", r->device);
            count++;
        }
        if (panels[d].count < MAX_SHAPES)
            panels[d].results[panels[d].count++] = r;
        else
            (*left_out)++;
    }
    return count;
}

/* The lines under the panels: what was not drawn, and why. */
static size_t footer_lines(const bench_outcome *outcome, size_t left_out,
                           char lines[][FOOTER_LINE])
{
    size_t count = 0;
    for (size_t i = 0; i < outcome->skip_count && count < MAX_SKIP_LINES; i++)
        snprintf(lines[count++], FOOTER_LINE, "not run: %s %s on %s: %s",
                 outcome->skips[i].op, outcome->skips[i].shape,
                 outcome->skips[i].device, outcome->skips[i].reason);
    if (outcome->skip_count > MAX_SKIP_LINES)
        snprintf(lines[count++], FOOTER_LINE, "and %zu more not run",
                 outcome->skip_count - MAX_SKIP_LINES);
    if (left_out)
        snprintf(lines[count++], FOOTER_LINE,
                 "%zu result%s not drawn (no time, flops or bytes to place)",
                 left_out, left_out == 1 ? "" : "s");
    if (outcome->result_count == 0)
        snprintf(lines[count++], FOOTER_LINE, "no results to draw");
    return count;
}

bool bench_svg_draw(svg_writer *svg, const bench_request *request,
                    const bench_outcome *outcome, const bench_roof *roofs,
                    size_t roof_count)
{
    panel *panels = malloc(MAX_PANELS * sizeof *panels);
    legend_entry *entries = malloc(MAX_PANELS * MAX_LEGEND * sizeof *entries);
    size_t *legend_counts = malloc(MAX_PANELS * sizeof *legend_counts);
    reference_names *names = malloc(sizeof *names);
    if (!panels || !entries || !legend_counts || !names) {
        free(panels), free(entries), free(legend_counts), free(names);
        fprintf(stderr, "locus bench: out of memory for the svg picture\n");
        svg_close(svg);
        return false;
    }
    names->count = 0;
    size_t left_out = 0;
    size_t count = gather_panels(outcome, panels, &left_out);
    /* Every name first, so that each keeps one marker in every panel. */
    for (size_t d = 0; d < count; d++)
        for (size_t i = 0; i < panels[d].count; i++)
            for (size_t k = 0; k < panels[d].results[i]->reference_count; k++)
                bench_svg_reference_index(
                    names, panels[d].results[i]->references[k].name);
    double width = 320.0, height = 0.0;
    for (size_t d = 0; d < count; d++) {
        const bench_roof *calibrated = NULL;
        for (size_t r = 0; r < roof_count; r++)
            if (strcmp(roofs[r].device, panels[d].roof.device) == 0)
                calibrated = &roofs[r];
        set_roof(&panels[d], calibrated);
        legend_counts[d] = legend_entries(&panels[d], request, names,
                                          entries + d * MAX_LEGEND);
        layout_panel(&panels[d],
                     legend_width(entries + d * MAX_LEGEND, legend_counts[d]));
        width = max_of(width, panel_width(&panels[d]));
        height += panel_height(&panels[d], legend_counts[d]) + PANEL_GAP;
    }
    char heading[200], note[300], footer[MAX_SKIP_LINES + 3][FOOTER_LINE];
    snprintf(heading, sizeof heading, "locus bench %s %s: roofline",
             request->op_word ? request->op_word : "",
             locus_dtype_str(request->settings.dtype));
    snprintf(note, sizeof note,
             "%s%sbest of %d timed runs; intensity: counted flops over the "
             "fewest bytes the op must move",
             request->op == BENCH_REDUCE
                 ? ""
                 : bench_math_name(request->settings.math),
             request->op == BENCH_REDUCE ? "" : ", ", request->settings.repeat);
    size_t footer_count = footer_lines(outcome, left_out, footer);
    double top =
        MARGIN + line_height(HEADING_SIZE) + line_height(NOTE_SIZE) + 12.0;
    height +=
        top + MARGIN + (double)footer_count * (line_height(NOTE_SIZE) + 2);
    if (count == 0)
        height += LEGEND_LINE + 6.0;
    /* A note of the heading may widen the page to its own width. */
    width = max_of(width, fmin(svg_text_width(note, NOTE_SIZE, false), 900.0));
    svg_begin(svg, ceil(width + 2 * MARGIN), ceil(height));
    const svg_font heading_font = {
        .size = HEADING_SIZE, .bold = true, .class_name = "title"};
    const svg_font note_font = {.size = NOTE_SIZE, .fill = "#444444"};
    char fitted[FOOTER_LINE];
    svg_fit_text(heading, width, HEADING_SIZE, true, fitted, sizeof fitted);
    svg_text(svg, MARGIN, MARGIN + HEADING_SIZE * SVG_ASCENT, &heading_font,
             fitted);
    svg_fit_text(note, width, NOTE_SIZE, false, fitted, sizeof fitted);
    svg_text(svg, MARGIN,
             MARGIN + line_height(HEADING_SIZE) + NOTE_SIZE * SVG_ASCENT,
             &note_font, fitted);
    double y = top;
    for (size_t d = 0; d < count; d++) {
        draw_panel(svg, &panels[d], entries + d * MAX_LEGEND, legend_counts[d],
                   names, MARGIN, y, width);
        y += panel_height(&panels[d], legend_counts[d]) + PANEL_GAP;
    }
    if (count == 0) {
        /* Still a legend: what the markers would have meant. */
        legend_entry none = {.kind = LEGEND_LOCUS};
        snprintf(none.text, sizeof none.text, "Locus %s (no results)",
                 request->op_word ? request->op_word : "");
        bench_svg_legend(svg, &none, 1, MARGIN, y);
        y += LEGEND_LINE + 6.0;
    }
    for (size_t f = 0; f < footer_count; f++) {
        svg_fit_text(footer[f], width, NOTE_SIZE, false, fitted, sizeof fitted);
        svg_text(svg, MARGIN, y + NOTE_SIZE * SVG_ASCENT, &note_font, fitted);
        y += line_height(NOTE_SIZE) + 2.0;
    }
    free(panels), free(entries), free(legend_counts), free(names);
    return svg_close(svg);
}

/* The calibration's figures of each device, when it measured them. */
bool bench_svg_write(svg_writer *svg, const bench_request *request,
                     const bench_outcome *outcome, locus_device **devices,
                     size_t device_count)
{
    bench_roof *roofs = calloc(device_count ? device_count : 1, sizeof *roofs);
    if (!roofs) {
        fprintf(stderr, "locus bench: out of memory for the svg picture\n");
        svg_close(svg);
        return false;
    }
    for (size_t d = 0; d < device_count; d++) {
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get_info(devices[d], &info) != LOCUS_SUCCESS)
            continue;
        bench_roof *roof = &roofs[d];
        snprintf(roof->device, sizeof roof->device, "%s", info.selector);
        snprintf(roof->name, sizeof roof->name, "%s", info.name);
        locus_calibration c;
        locus_calibration_init(&c);
        locus_status status = locus_device_calibration(devices[d], 0, &c);
        /* SYSTEM: measured but not cached, the figures still good. */
        if ((status != LOCUS_SUCCESS && status != LOCUS_ERROR_SYSTEM) ||
            strcmp(c.source, "nominal") == 0)
            continue;
        bool conv = c.conv_flops_per_second > c.gemm_flops_per_second;
        roof->peak_gflops =
            (conv ? c.conv_flops_per_second : c.gemm_flops_per_second) / 1e9;
        roof->peak_source = conv ? "calibration (conv)" : "calibration (gemm)";
        roof->bandwidth_gbps = c.reduce_bytes_per_second / 1e9;
        roof->bandwidth_source = "calibration (reduce)";
    }
    bool ok = bench_svg_draw(svg, request, outcome, roofs, device_count);
    free(roofs);
    return ok;
}
