/* A strict JSON parser for the cli tests (RFC 8259: no trailing commas, no
 * comments, no lone surrogates, well-formed UTF-8, nothing after the
 * value). It builds a tree the tests then query, so a test can say "this
 * key exists and is a number" without a dependency outside C. */
#ifndef LOCUS_TEST_JSON_CHECK_H
#define LOCUS_TEST_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value {
    json_type type;
    bool boolean;
    double number;
    char *string; /* decoded UTF-8, NUL-terminated (may hold \u0000) */
    size_t string_length;
    size_t count;             /* items of an array or members of an object */
    struct json_value *items; /* count values */
    char **keys;              /* objects: count decoded keys */
} json_value;

/* Parses text[0 .. length); NULL on any error, with the reason and the
 * byte offset in error. */
json_value *json_parse(const char *text, size_t length, char *error,
                       size_t error_capacity);
void json_free(json_value *value);

/* The member named key, or NULL when value is no object or lacks it. */
const json_value *json_get(const json_value *value, const char *key);
/* The item at index, or NULL when value is no array or is too short. */
const json_value *json_at(const json_value *value, size_t index);
/* Whether value is non-NULL and of the type. */
bool json_is(const json_value *value, json_type type);
const char *json_type_name(json_type type);

#endif
