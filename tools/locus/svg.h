/* A tiny SVG writer shared by the `locus` pictures (the numa heat maps,
 * the bench roofline). A picture is laid out before it is written: text
 * widths come from svg_text_width, a deliberately generous estimate, so
 * that nothing is placed outside the canvas or over other text whatever
 * sans-serif font the viewer has. tests/cli/svg_test.py checks the same
 * from the file's own coordinates with the same model (docs/PICTURES.md).
 *
 * Every picture has an opaque background, so it reads the same on a dark
 * page or viewer. Coordinates are in pixels, y down. */
#ifndef LOCUS_TOOL_SVG_H
#define LOCUS_TOOL_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct svg_writer {
    FILE *out;
    const char *command; /* "locus numa": how error messages begin */
    const char *path;
    double width, height;
    int error; /* errno of the first failed write; 0: none */
} svg_writer;

/* Opens path for writing: created (0666 less the umask) or truncated,
 * never through a symbolic link, and only as a regular file (a FIFO, a
 * device or a directory is refused, without blocking). On failure prints
 * `<command>: cannot write the svg file "<path>": <reason>` on stderr,
 * the reason being errno's text, and returns false. */
bool svg_open(svg_writer *svg, const char *command, const char *path);

/* The root element with a viewBox of width x height, and an opaque white
 * background rectangle covering it. */
void svg_begin(svg_writer *svg, double width, double height);

/* Ends the root element and closes the file; false, with the reason on
 * stderr, when something could not be written. */
bool svg_close(svg_writer *svg);

/* Raw markup, printf-style: the caller writes only numbers and fixed
 * words through it; text from outside goes through svg_text. */
void svg_printf(svg_writer *svg, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* text inside an attribute value quoted with ', escaped as svg_text's. */
void svg_attribute_text(svg_writer *svg, const char *text);

typedef enum svg_anchor {
    SVG_ANCHOR_START,
    SVG_ANCHOR_MIDDLE,
    SVG_ANCHOR_END,
} svg_anchor;

typedef struct svg_font {
    double size; /* px */
    bool bold;
    svg_anchor anchor;
    const char *fill;       /* NULL: black */
    const char *class_name; /* NULL: none; "title" marks a heading */
} svg_font;

/* One line of text with its baseline at y; control characters and bytes
 * that are not UTF-8 become '?', and <, > and & are escaped, so the file
 * stays well-formed XML whatever a driver put in a device name. */
void svg_text(svg_writer *svg, double x, double y, const svg_font *font,
              const char *text);
void svg_textf(svg_writer *svg, double x, double y, const svg_font *font,
               const char *format, ...) __attribute__((format(printf, 5, 6)));

/* The estimated advance width of text in px: per character class, at the
 * width of DejaVu Sans (the widest common sans-serif) plus a margin. */
double svg_text_width(const char *text, double size, bool bold);

/* Copies text into out (capacity bytes), cut at a character boundary and
 * ended with "..." when it is wider than width. */
void svg_fit_text(const char *text, double width, double size, bool bold,
                  char *out, size_t capacity);

/* How far text reaches above its baseline and below it, as fractions of
 * the font size (the checker's model too). */
#define SVG_ASCENT 0.95
#define SVG_DESCENT 0.3

#endif
