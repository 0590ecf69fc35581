/* A small streaming JSON writer for the `locus` command's --json output.
 *
 * The writer tracks nesting and commas so callers only say what comes next;
 * output is indented two spaces per level so it stays readable by people
 * and diffable, and every string goes through one escaping routine. */
#ifndef LOCUS_TOOL_JSON_H
#define LOCUS_TOOL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef struct json_writer {
    FILE *out;
    int depth;
    /* Per level: whether a value was already written (a comma is due). */
    bool has_items[JSON_MAX_DEPTH];
    /* Per level: items stay on one line (short arrays of numbers). */
    bool inline_items[JSON_MAX_DEPTH];
    /* A key was just written; the next value goes on the same line. */
    bool after_key;
} json_writer;

void json_init(json_writer *writer, FILE *out);
/* Ends the document with a newline; call once the top level is closed. */
void json_finish(json_writer *writer);

void json_begin_object(json_writer *writer);
void json_end_object(json_writer *writer);
void json_begin_array(json_writer *writer);
/* An array written on one line, for short lists of numbers. */
void json_begin_inline_array(json_writer *writer);
void json_end_array(json_writer *writer);

/* Inside an object: the key of the next value. */
void json_key(json_writer *writer, const char *key);

void json_string(json_writer *writer, const char *text);
/* NULL writes null. */
void json_string_or_null(json_writer *writer, const char *text);
void json_int(json_writer *writer, int64_t value);
void json_uint(json_writer *writer, uint64_t value);
/* The shortest text that reads back as the same double; NaN and the
 * infinities, which JSON cannot spell, become null. */
void json_double(json_writer *writer, double value);
void json_bool(json_writer *writer, bool value);
void json_null(json_writer *writer);

/* Writes text as a JSON string literal, quotes included: the two required
 * escapes, control characters, and invalid UTF-8 replaced by U+FFFD so the
 * output is always valid JSON whatever a driver put in a device name. */
void json_write_escaped(FILE *out, const char *text);

/* ---- documents (json_document.c) ---------------------------------------
 *
 * Every --json document the `locus` command writes is one object that
 * opens with the same header, so a script can tell what wrote it, where,
 * when, and which layout to expect (docs/JSON.md):
 *   "schema_version": JSON_SCHEMA_VERSION,
 *   "command": the subcommand ("info", "bench", "bench sched", ...),
 *   "locus_version": the loaded library's locus_version_string(),
 *   "host": gethostname(), null when it fails,
 *   "timestamp": when the document was begun, ISO 8601 UTC to the second.
 * JSON_SCHEMA_VERSION goes up when a field of any document is removed,
 * renamed, or changes its type or meaning; added fields do not bump it. */
#define JSON_SCHEMA_VERSION 1

/* json_init on out, the top-level object opened and the header written;
 * the caller adds its own fields and ends with json_document_end. */
void json_document_begin(json_writer *writer, FILE *out, const char *command);
/* Closes the top-level object and finishes the document. */
void json_document_end(json_writer *writer);

/* The current time as ISO 8601 UTC, "2026-12-03T10:11:12Z"; false (and
 * text empty) when the clock cannot be read. */
bool json_utc_timestamp(char *text, size_t capacity);

#endif
