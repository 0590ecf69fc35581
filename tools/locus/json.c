#include "json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void json_init(json_writer *writer, FILE *out)
{
    memset(writer, 0, sizeof(*writer));
    writer->out = out;
}

void json_finish(json_writer *writer)
{
    assert(writer->depth == 0);
    fputc('\n', writer->out);
    fflush(writer->out);
}

static bool in_inline_level(const json_writer *writer)
{
    return writer->depth > 0 && writer->inline_items[writer->depth - 1];
}

static void write_indent(json_writer *writer)
{
    fputc('\n', writer->out);
    for (int level = 0; level < writer->depth; ++level) {
        fputs("  ", writer->out);
    }
}

/* Everything a value needs before it: the comma after the previous item and
 * the line break, unless a key already placed us. */
static void begin_value(json_writer *writer)
{
    if (writer->after_key) {
        writer->after_key = false;
        return;
    }
    if (writer->depth == 0) {
        return;
    }
    bool *has_items = &writer->has_items[writer->depth - 1];
    if (*has_items) {
        fputc(',', writer->out);
        if (in_inline_level(writer)) {
            fputc(' ', writer->out);
        }
    }
    *has_items = true;
    if (!in_inline_level(writer)) {
        write_indent(writer);
    }
}

static void open_container(json_writer *writer, char bracket, bool inline_items)
{
    begin_value(writer);
    fputc(bracket, writer->out);
    assert(writer->depth < JSON_MAX_DEPTH);
    bool parent_inline = in_inline_level(writer);
    writer->has_items[writer->depth] = false;
    writer->inline_items[writer->depth] = inline_items || parent_inline;
    writer->depth++;
}

static void close_container(json_writer *writer, char bracket)
{
    assert(writer->depth > 0 && !writer->after_key);
    bool had_items = writer->has_items[writer->depth - 1];
    bool was_inline = in_inline_level(writer);
    writer->depth--;
    if (had_items && !was_inline) {
        write_indent(writer);
    }
    fputc(bracket, writer->out);
}

void json_begin_object(json_writer *writer)
{
    open_container(writer, '{', false);
}

void json_end_object(json_writer *writer)
{
    close_container(writer, '}');
}

void json_begin_array(json_writer *writer)
{
    open_container(writer, '[', false);
}

void json_begin_inline_array(json_writer *writer)
{
    open_container(writer, '[', true);
}

void json_end_array(json_writer *writer)
{
    close_container(writer, ']');
}

void json_key(json_writer *writer, const char *key)
{
    begin_value(writer);
    json_write_escaped(writer->out, key);
    fputs(": ", writer->out);
    writer->after_key = true;
}

/* Length of the well-formed UTF-8 sequence at text, or 0 when it is not
 * one (bad lead byte, truncated, overlong, surrogate, beyond U+10FFFF). */
static size_t utf8_sequence_length(const unsigned char *text)
{
    unsigned char lead = text[0];
    size_t length;
    uint32_t code_point;
    uint32_t minimum;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        code_point = lead & 0x1Fu;
        minimum = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        code_point = lead & 0x0Fu;
        minimum = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        code_point = lead & 0x07u;
        minimum = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < length; ++i) {
        /* A NUL terminator fails this test, so we never read past it. */
        if ((text[i] & 0xC0u) != 0x80u) {
            return 0;
        }
        code_point = (code_point << 6) | (text[i] & 0x3Fu);
    }
    if (code_point < minimum || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
        return 0;
    }
    return length;
}

void json_write_escaped(FILE *out, const char *text)
{
    const unsigned char *cursor = (const unsigned char *)text;
    fputc('"', out);
    while (*cursor != '\0') {
        unsigned char c = *cursor;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            cursor++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n':
                fputs("\\n", out);
                break;
            case '\t':
                fputs("\\t", out);
                break;
            case '\r':
                fputs("\\r", out);
                break;
            case '\b':
                fputs("\\b", out);
                break;
            case '\f':
                fputs("\\f", out);
                break;
            default:
                fprintf(out, "\\u%04x", (unsigned)c);
                break;
            }
            cursor++;
        } else if (c < 0x80) {
            fputc(c, out);
            cursor++;
        } else {
            size_t length = utf8_sequence_length(cursor);
            if (length == 0) {
                fputs("\\ufffd", out);
                cursor++;
            } else {
                fwrite(cursor, 1, length, out);
                cursor += length;
            }
        }
    }
    fputc('"', out);
}

void json_string(json_writer *writer, const char *text)
{
    begin_value(writer);
    json_write_escaped(writer->out, text);
}

void json_string_or_null(json_writer *writer, const char *text)
{
    if (text == NULL) {
        json_null(writer);
    } else {
        json_string(writer, text);
    }
}

void json_int(json_writer *writer, int64_t value)
{
    begin_value(writer);
    fprintf(writer->out, "%" PRId64, value);
}

void json_uint(json_writer *writer, uint64_t value)
{
    begin_value(writer);
    fprintf(writer->out, "%" PRIu64, value);
}

void json_double(json_writer *writer, double value)
{
    if (!isfinite(value)) {
        json_null(writer);
        return;
    }
    char text[32];
    if (value == floor(value) && fabs(value) < 1e15) {
        /* Whole numbers (flop and byte counts) read best without an
         * exponent: 1000, not 1e+03. */
        snprintf(text, sizeof(text), "%.0f", value);
        begin_value(writer);
        fputs(text, writer->out);
        return;
    }
    /* The fewest digits that round-trip: 0.1 stays 0.1, not
     * 0.10000000000000001, and no precision is lost. */
    for (int digits = 1; digits <= 17; ++digits) {
        snprintf(text, sizeof(text), "%.*g", digits, value);
        if (strtod(text, NULL) == value) {
            break;
        }
    }
    begin_value(writer);
    fputs(text, writer->out);
}

void json_bool(json_writer *writer, bool value)
{
    begin_value(writer);
    fputs(value ? "true" : "false", writer->out);
}

void json_null(json_writer *writer)
{
    begin_value(writer);
    fputs("null", writer->out);
}
