/* The SVG writer of the `locus` pictures (svg.h). */
#include "svg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void report_open_failure(const svg_writer *svg, const char *reason)
{
    fprintf(stderr, "%s: cannot write the svg file \"%s\": %s\n", svg->command,
            svg->path, reason);
}

/* errno's text, or a plainer one where open's errno would puzzle: ELOOP
 * for a link refused by O_NOFOLLOW, ENXIO for a FIFO nobody reads. */
static const char *open_failure_reason(const char *path, int error)
{
    struct stat status;
    if (error == ELOOP && lstat(path, &status) == 0 && S_ISLNK(status.st_mode))
        return "it is a symbolic link, and links are not followed";
    if (error == ENXIO && stat(path, &status) == 0 && !S_ISREG(status.st_mode))
        return "not a regular file";
    return strerror(error);
}

bool svg_open(svg_writer *svg, const char *command, const char *path)
{
    memset(svg, 0, sizeof *svg);
    svg->command = command;
    svg->path = path;
    /* O_NONBLOCK: opening a FIFO must fail or return at once, never wait
     * for a reader; O_TRUNC waits until the file is known to be regular. */
    int fd = open(
        path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) {
        report_open_failure(svg, open_failure_reason(path, errno));
        return false;
    }
    struct stat status;
    const char *reason = NULL;
    if (fstat(fd, &status) != 0)
        reason = strerror(errno);
    else if (!S_ISREG(status.st_mode))
        reason = "not a regular file";
    else if (ftruncate(fd, 0) != 0)
        reason = strerror(errno);
    else if (fcntl(fd, F_SETFL, 0) != 0)
        reason = strerror(errno);
    else if (!(svg->out = fdopen(fd, "w")))
        reason = strerror(errno);
    if (reason) {
        report_open_failure(svg, reason);
        close(fd);
        return false;
    }
    return true;
}

/* Keeps the first write error's errno for svg_close's message. */
static void note_result(svg_writer *svg, int written)
{
    if (written < 0 && svg->error == 0)
        svg->error = errno ? errno : EIO;
}

void svg_printf(svg_writer *svg, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    note_result(svg, vfprintf(svg->out, format, arguments));
    va_end(arguments);
}

void svg_begin(svg_writer *svg, double width, double height)
{
    svg->width = width;
    svg->height = height;
    /* Wide fonts first: the layout's width model is DejaVu Sans's. */
    svg_printf(svg,
               "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' "
               "height='%.0f' viewBox='0 0 %.0f %.0f' font-family='DejaVu "
               "Sans, Verdana, sans-serif' font-size='12'>\n",
               width, height, width, height);
    svg_printf(svg,
               "<rect class='background' x='0' y='0' width='%.0f' "
               "height='%.0f' fill='#ffffff'/>\n",
               width, height);
}

bool svg_close(svg_writer *svg)
{
    svg_printf(svg, "</svg>\n");
    if (fflush(svg->out) != 0)
        note_result(svg, -1);
    if (ferror(svg->out) && svg->error == 0)
        svg->error = EIO;
    if (fclose(svg->out) != 0)
        note_result(svg, -1);
    svg->out = NULL;
    if (svg->error) {
        fprintf(stderr, "%s: writing the svg file \"%s\" failed: %s\n",
                svg->command, svg->path, strerror(svg->error));
        return false;
    }
    return true;
}

/* The length of the valid UTF-8 character at text (1 to 4), or 0 when
 * the bytes there are not one (then they are written as '?'). */
static size_t utf8_length(const unsigned char *text)
{
    unsigned char c = text[0];
    size_t length;
    uint32_t point;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        length = 2;
        point = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        length = 3;
        point = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
        length = 4;
        point = c & 0x07u;
    } else {
        return 0;
    }
    for (size_t i = 1; i < length; i++) {
        if ((text[i] & 0xc0u) != 0x80u)
            return 0;
        point = point << 6 | (text[i] & 0x3fu);
    }
    /* Overlong forms, UTF-16 surrogates and points past U+10FFFF are not
     * characters an XML parser accepts. */
    static const uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (point < smallest[length] || point > 0x10ffff ||
        (point >= 0xd800 && point <= 0xdfff) || point == 0xfffe ||
        point == 0xffff)
        return 0;
    return length;
}

/* The next character of text as written: its bytes (or "?") and how far
 * to move in text. */
typedef struct svg_char {
    const char *bytes;
    size_t length; /* bytes to write */
    size_t step;   /* bytes consumed */
} svg_char;

static svg_char next_char(const char *text)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t length = utf8_length(u);
    if (length == 0 || (length == 1 && (u[0] < 0x20 || u[0] == 0x7f)))
        return (svg_char){"?", 1, 1};
    return (svg_char){text, length, length};
}

/* Advance widths in em, per class, each at or a little above DejaVu
 * Sans's widest member of the class (its digits are 0.64 em, 'm' 0.97);
 * tests/cli/svg_check.py holds the same classes. */
static double char_width_em(svg_char c)
{
    if (c.length > 1)
        return 1.0;
    char ch = c.bytes[0];
    if (strchr(" .,:;'|!ijl`", ch))
        return 0.34;
    if (strchr("ftrI()[]{}/\\-\"*_?", ch))
        return 0.52;
    if (strchr("mwMW%@#+=<>~^", ch))
        return 1.0;
    if (ch >= 'A' && ch <= 'Z')
        return 0.78;
    return 0.66;
}

#define SVG_BOLD_FACTOR 1.12

double svg_text_width(const char *text, double size, bool bold)
{
    double em = 0.0;
    for (const char *p = text; *p;) {
        svg_char c = next_char(p);
        em += char_width_em(c);
        p += c.step;
    }
    return em * size * (bold ? SVG_BOLD_FACTOR : 1.0);
}

void svg_fit_text(const char *text, double width, double size, bool bold,
                  char *out, size_t capacity)
{
    if (capacity == 0)
        return;
    bool fits =
        svg_text_width(text, size, bold) <= width && strlen(text) < capacity;
    const char *ellipsis = fits ? "" : "...";
    size_t tail = strlen(ellipsis);
    double budget = width - svg_text_width(ellipsis, size, bold);
    double scale = size * (bold ? SVG_BOLD_FACTOR : 1.0);
    double em = 0.0;
    size_t used = 0;
    svg_char c;
    for (const char *p = text; *p; p += c.step) {
        c = next_char(p);
        em += char_width_em(c);
        if (em * scale > budget || used + c.step + tail >= capacity)
            break;
        memcpy(out + used, p, c.step);
        used += c.step;
    }
    if (used + tail < capacity) {
        memcpy(out + used, ellipsis, tail);
        used += tail;
    }
    out[used] = '\0';
}

/* Writes text with '?' for what XML cannot hold and <, >, &, ' and "
 * escaped, which is right both between tags and in attribute values. */
static void write_escaped(svg_writer *svg, const char *text)
{
    for (const char *p = text; *p;) {
        svg_char c = next_char(p);
        const char *entity = NULL;
        if (c.length == 1) {
            switch (c.bytes[0]) {
            case '<':
                entity = "&lt;";
                break;
            case '>':
                entity = "&gt;";
                break;
            case '&':
                entity = "&amp;";
                break;
            case '\'':
                entity = "&apos;";
                break;
            case '"':
                entity = "&quot;";
                break;
            default:
                break;
            }
        }
        if (entity)
            svg_printf(svg, "%s", entity);
        else if (fwrite(c.bytes, 1, c.length, svg->out) != c.length)
            note_result(svg, -1);
        p += c.step;
    }
}

void svg_attribute_text(svg_writer *svg, const char *text)
{
    write_escaped(svg, text);
}

void svg_text(svg_writer *svg, double x, double y, const svg_font *font,
              const char *text)
{
    static const char *const anchors[] = {"start", "middle", "end"};
    svg_printf(svg, "<text x='%.1f' y='%.1f' font-size='%g'", x, y, font->size);
    if (font->bold)
        svg_printf(svg, " font-weight='bold'");
    if (font->anchor != SVG_ANCHOR_START)
        svg_printf(svg, " text-anchor='%s'", anchors[font->anchor]);
    if (font->fill)
        svg_printf(svg, " fill='%s'", font->fill);
    if (font->class_name)
        svg_printf(svg, " class='%s'", font->class_name);
    svg_printf(svg, ">");
    write_escaped(svg, text);
    svg_printf(svg, "</text>\n");
}

void svg_textf(svg_writer *svg, double x, double y, const svg_font *font,
               const char *format, ...)
{
    char text[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(text, sizeof text, format, arguments);
    va_end(arguments);
    svg_text(svg, x, y, font, text);
}
