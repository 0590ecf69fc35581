/* The `locus` JSON writer (tools/locus/json.c) on its own: what it writes
 * must parse, strictly, and read back as what was written: strings with
 * quotes, backslashes, control characters, UTF-8 and invalid bytes from a
 * driver; doubles that must round-trip; NaN and infinity, which JSON cannot
 * spell; nesting and empty containers. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "json_check.h"

static int failures;

#define EXPECT(condition, ...)                                                 \
    do {                                                                       \
        if (!(condition)) {                                                    \
            fprintf(stderr, "FAIL line %d: ", __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static const char *const strings[] = {
    "",
    "plain",
    "quote \" and backslash \\ and slash /",
    "newline\n tab\t return\r backspace\b formfeed\f",
    "\x01\x02\x1f\x7f",
    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", /* é, €, an emoji */
};

/* Invalid UTF-8 and what the writer must turn it into (U+FFFD each). */
static const char *const invalid_inputs[] = {
    "bad \xff byte",
    "truncated \xe2\x82",
    "overlong \xc0\xaf",
    "surrogate \xed\xa0\x80",
};
static const char *const invalid_expected[] = {
    "bad \xef\xbf\xbd byte",
    "truncated \xef\xbf\xbd\xef\xbf\xbd",
    "overlong \xef\xbf\xbd\xef\xbf\xbd",
    "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
};

static const double doubles[] = {
    0.0,       -0.0,          1.0,      -1.0,      0.1,
    1e-5,      1e300,         5e-324,   1e15,      123456789012345678.0,
    2.0 / 3.0, 4e-324 * 1e10, -7.25e-9, 1048576.0,
};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static void write_document(FILE *out)
{
    json_writer json;
    json_init(&json, out);
    json_begin_object(&json);
    json_key(&json, "strings");
    json_begin_array(&json);
    for (size_t i = 0; i < COUNT(strings); ++i) {
        json_string(&json, strings[i]);
    }
    json_end_array(&json);
    json_key(&json, "invalid");
    json_begin_array(&json);
    for (size_t i = 0; i < COUNT(invalid_inputs); ++i) {
        json_string(&json, invalid_inputs[i]);
    }
    json_end_array(&json);
    json_key(&json, "doubles");
    json_begin_inline_array(&json);
    for (size_t i = 0; i < COUNT(doubles); ++i) {
        json_double(&json, doubles[i]);
    }
    json_end_array(&json);
    json_key(&json, "not finite");
    json_begin_array(&json);
    json_double(&json, NAN);
    json_double(&json, INFINITY);
    json_double(&json, -INFINITY);
    json_end_array(&json);
    json_key(&json, "integers");
    json_begin_inline_array(&json);
    json_int(&json, INT64_MIN);
    json_uint(&json, UINT64_MAX);
    json_end_array(&json);
    json_key(&json, "empty object");
    json_begin_object(&json);
    json_end_object(&json);
    json_key(&json, "empty array");
    json_begin_array(&json);
    json_end_array(&json);
    json_key(&json, "nested");
    json_begin_inline_array(&json);
    json_begin_inline_array(&json);
    json_bool(&json, true);
    json_null(&json);
    json_end_array(&json);
    json_begin_object(&json);
    json_key(&json, "a\"key");
    json_string_or_null(&json, NULL);
    json_end_object(&json);
    json_end_array(&json);
    json_end_object(&json);
    json_finish(&json);
}

static void check_strings(const json_value *array, const char *const *expected,
                          size_t count, const char *what)
{
    EXPECT(json_is(array, JSON_ARRAY) && array->count == count,
           "%s: not an array of %zu", what, count);
    for (size_t i = 0; i < count && json_at(array, i) != NULL; ++i) {
        const json_value *value = json_at(array, i);
        EXPECT(json_is(value, JSON_STRING) &&
                   value->string_length == strlen(expected[i]) &&
                   memcmp(value->string, expected[i], value->string_length) ==
                       0,
               "%s[%zu] did not read back", what, i);
    }
}

static void check_document(const json_value *root)
{
    check_strings(json_get(root, "strings"), strings, COUNT(strings),
                  "strings");
    check_strings(json_get(root, "invalid"), invalid_expected,
                  COUNT(invalid_expected), "invalid");
    const json_value *numbers = json_get(root, "doubles");
    EXPECT(json_is(numbers, JSON_ARRAY) && numbers->count == COUNT(doubles),
           "doubles");
    for (size_t i = 0; i < COUNT(doubles) && json_at(numbers, i); ++i) {
        const json_value *value = json_at(numbers, i);
        EXPECT(json_is(value, JSON_NUMBER) && value->number == doubles[i] &&
                   signbit(value->number) == signbit(doubles[i]),
               "doubles[%zu] = %.17g read back as %.17g", i, doubles[i],
               value->number);
    }
    const json_value *not_finite = json_get(root, "not finite");
    for (size_t i = 0; i < 3; ++i) {
        EXPECT(json_is(json_at(not_finite, i), JSON_NULL),
               "not finite[%zu] is not null", i);
    }
    const json_value *integers = json_get(root, "integers");
    EXPECT(json_is(json_at(integers, 0), JSON_NUMBER) &&
               json_at(integers, 0)->number == (double)INT64_MIN,
           "INT64_MIN");
    EXPECT(json_is(json_at(integers, 1), JSON_NUMBER) &&
               json_at(integers, 1)->number == (double)UINT64_MAX,
           "UINT64_MAX");
    EXPECT(json_is(json_get(root, "empty object"), JSON_OBJECT) &&
               json_get(root, "empty object")->count == 0,
           "empty object");
    EXPECT(json_is(json_get(root, "empty array"), JSON_ARRAY) &&
               json_get(root, "empty array")->count == 0,
           "empty array");
    const json_value *nested = json_get(root, "nested");
    const json_value *inner = json_at(nested, 0);
    EXPECT(json_is(json_at(inner, 0), JSON_BOOL) &&
               json_at(inner, 0)->boolean &&
               json_is(json_at(inner, 1), JSON_NULL),
           "nested array");
    EXPECT(json_is(json_get(json_at(nested, 1), "a\"key"), JSON_NULL),
           "nested object with an escaped key");
}

/* The checker itself must refuse what is not JSON, or the tests built on
 * it prove nothing. */
static void check_parser_rejects(void)
{
    static const char *const bad[] = {
        "",         "{",       "[1,]",        "{\"a\":1,}",
        "01",       "1.",      "-",           "nan",
        "\"\x01\"", "\"\\x\"", "\"\\ud800\"", "{\"a\":1,\"a\":2}",
        "[] []",    "'a'",     "\"\xff\"",    "{a:1}",
    };
    for (size_t i = 0; i < COUNT(bad); ++i) {
        char error[128];
        json_value *value =
            json_parse(bad[i], strlen(bad[i]), error, sizeof(error));
        EXPECT(value == NULL, "the checker accepted bad JSON #%zu", i);
        json_free(value);
    }
}

int main(void)
{
    FILE *file = tmpfile();
    if (file == NULL) {
        perror("tmpfile");
        return 1;
    }
    write_document(file);
    long length = ftell(file);
    rewind(file);
    char *text = malloc((size_t)length + 1);
    if (text == NULL ||
        fread(text, 1, (size_t)length, file) != (size_t)length) {
        fprintf(stderr, "could not read the document back\n");
        return 1;
    }
    text[length] = '\0';
    fclose(file);
    char error[256];
    json_value *root = json_parse(text, (size_t)length, error, sizeof(error));
    EXPECT(root != NULL, "the writer's output does not parse: %s", error);
    if (root != NULL) {
        check_document(root);
    } else {
        fputs(text, stderr);
    }
    json_free(root);
    free(text);
    check_parser_rejects();
    printf("json writer: %d failure(s)\n", failures);
    return failures == 0 ? 0 : 1;
}
