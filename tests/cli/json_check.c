#include "json_check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper than anything `locus` writes; a bound keeps recursion safe. */
#define MAX_DEPTH 64

typedef struct parser {
    const unsigned char *text;
    size_t length;
    size_t position;
    char *error;
    size_t error_capacity;
    bool failed;
} parser;

static bool fail(parser *p, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static bool fail(parser *p, const char *format, ...)
{
    if (p->failed) {
        return false; /* keep the first, innermost reason */
    }
    p->failed = true;
    char reason[192];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(reason, sizeof(reason), format, arguments);
    va_end(arguments);
    snprintf(p->error, p->error_capacity, "%s at byte %zu", reason,
             p->position);
    return false;
}

static int peek(const parser *p)
{
    return p->position < p->length ? p->text[p->position] : -1;
}

static void skip_whitespace(parser *p)
{
    while (p->position < p->length) {
        unsigned char c = p->text[p->position];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return;
        }
        p->position++;
    }
}

static bool expect_literal(parser *p, const char *literal)
{
    size_t length = strlen(literal);
    if (p->length - p->position < length ||
        memcmp(p->text + p->position, literal, length) != 0) {
        return fail(p, "expected %s", literal);
    }
    p->position += length;
    return true;
}

/* A growable byte string for decoded text. */
typedef struct bytes {
    char *data;
    size_t length;
    size_t capacity;
} bytes;

static bool bytes_push(bytes *b, const char *data, size_t length)
{
    if (b->length + length + 1 > b->capacity) {
        size_t capacity = b->capacity ? 2 * b->capacity : 32;
        while (capacity < b->length + length + 1) {
            capacity *= 2;
        }
        char *grown = realloc(b->data, capacity);
        if (grown == NULL) {
            return false;
        }
        b->data = grown;
        b->capacity = capacity;
    }
    memcpy(b->data + b->length, data, length);
    b->length += length;
    b->data[b->length] = '\0';
    return true;
}

static bool push_code_point(bytes *b, uint32_t code_point)
{
    char encoded[4];
    size_t length;
    if (code_point < 0x80) {
        encoded[0] = (char)code_point;
        length = 1;
    } else if (code_point < 0x800) {
        encoded[0] = (char)(0xC0 | code_point >> 6);
        encoded[1] = (char)(0x80 | (code_point & 0x3F));
        length = 2;
    } else if (code_point < 0x10000) {
        encoded[0] = (char)(0xE0 | code_point >> 12);
        encoded[1] = (char)(0x80 | (code_point >> 6 & 0x3F));
        encoded[2] = (char)(0x80 | (code_point & 0x3F));
        length = 3;
    } else {
        encoded[0] = (char)(0xF0 | code_point >> 18);
        encoded[1] = (char)(0x80 | (code_point >> 12 & 0x3F));
        encoded[2] = (char)(0x80 | (code_point >> 6 & 0x3F));
        encoded[3] = (char)(0x80 | (code_point & 0x3F));
        length = 4;
    }
    return bytes_push(b, encoded, length);
}

static bool parse_hex4(parser *p, uint32_t *out)
{
    if (p->length - p->position < 4) {
        return fail(p, "short \\u escape");
    }
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
        unsigned char c = p->text[p->position++];
        value <<= 4;
        if (c >= '0' && c <= '9') {
            value |= (uint32_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            value |= (uint32_t)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            value |= (uint32_t)(c - 'A' + 10);
        } else {
            return fail(p, "bad hex digit in \\u escape");
        }
    }
    *out = value;
    return true;
}

static bool parse_unicode_escape(parser *p, bytes *out)
{
    uint32_t unit = 0;
    if (!parse_hex4(p, &unit)) {
        return false;
    }
    if (unit >= 0xDC00 && unit <= 0xDFFF) {
        return fail(p, "lone low surrogate");
    }
    if (unit >= 0xD800 && unit <= 0xDBFF) {
        uint32_t low = 0;
        if (!expect_literal(p, "\\u") || !parse_hex4(p, &low)) {
            return fail(p, "high surrogate without a low one");
        }
        if (low < 0xDC00 || low > 0xDFFF) {
            return fail(p, "high surrogate without a low one");
        }
        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
    }
    return push_code_point(out, unit);
}

/* Length of the well-formed UTF-8 sequence at the parser, or 0. */
static size_t utf8_length(const parser *p)
{
    const unsigned char *s = p->text + p->position;
    size_t left = p->length - p->position;
    unsigned char lead = s[0];
    size_t length;
    uint32_t code_point, minimum;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2, code_point = lead & 0x1Fu, minimum = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3, code_point = lead & 0x0Fu, minimum = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4, code_point = lead & 0x07u, minimum = 0x10000;
    } else {
        return 0;
    }
    if (left < length) {
        return 0;
    }
    for (size_t i = 1; i < length; ++i) {
        if ((s[i] & 0xC0u) != 0x80u) {
            return 0;
        }
        code_point = code_point << 6 | (s[i] & 0x3Fu);
    }
    if (code_point < minimum || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
        return 0;
    }
    return length;
}

static bool parse_string_into(parser *p, bytes *out)
{
    if (peek(p) != '"') {
        return fail(p, "expected a string");
    }
    p->position++;
    for (;;) {
        int c = peek(p);
        if (c < 0) {
            return fail(p, "unterminated string");
        }
        if (c == '"') {
            p->position++;
            return bytes_push(out, "", 0) || fail(p, "out of memory");
        }
        if (c < 0x20) {
            return fail(p, "raw control character 0x%02x in a string", c);
        }
        if (c == '\\') {
            p->position++;
            int escape = peek(p);
            p->position++;
            static const char simple_from[] = "\"\\/bfnrt";
            static const char simple_to[] = "\"\\/\b\f\n\r\t";
            const char *found = escape > 0 ? strchr(simple_from, escape) : NULL;
            if (escape == 'u') {
                if (!parse_unicode_escape(p, out)) {
                    return false;
                }
            } else if (found != NULL && escape != '\0') {
                if (!bytes_push(out, &simple_to[found - simple_from], 1)) {
                    return fail(p, "out of memory");
                }
            } else {
                p->position--;
                return fail(p, "bad escape");
            }
            continue;
        }
        if (c < 0x80) {
            if (!bytes_push(out, (const char *)&p->text[p->position], 1)) {
                return fail(p, "out of memory");
            }
            p->position++;
            continue;
        }
        size_t length = utf8_length(p);
        if (length == 0) {
            return fail(p, "invalid UTF-8");
        }
        if (!bytes_push(out, (const char *)&p->text[p->position], length)) {
            return fail(p, "out of memory");
        }
        p->position += length;
    }
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool parse_number(parser *p, json_value *value)
{
    size_t start = p->position;
    if (peek(p) == '-') {
        p->position++;
    }
    if (peek(p) == '0') {
        p->position++;
    } else if (is_digit(peek(p))) {
        while (is_digit(peek(p))) {
            p->position++;
        }
    } else {
        return fail(p, "bad number");
    }
    if (peek(p) == '.') {
        p->position++;
        if (!is_digit(peek(p))) {
            return fail(p, "bad number: no digit after the point");
        }
        while (is_digit(peek(p))) {
            p->position++;
        }
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->position++;
        if (peek(p) == '+' || peek(p) == '-') {
            p->position++;
        }
        if (!is_digit(peek(p))) {
            return fail(p, "bad number: no digit in the exponent");
        }
        while (is_digit(peek(p))) {
            p->position++;
        }
    }
    char copy[64];
    size_t length = p->position - start;
    if (length >= sizeof(copy)) {
        return fail(p, "number too long for this checker");
    }
    memcpy(copy, p->text + start, length);
    copy[length] = '\0';
    value->type = JSON_NUMBER;
    value->number = strtod(copy, NULL);
    return true;
}

static bool parse_value(parser *p, json_value *value, int depth);

/* Appends a zeroed value to a growable array of values. */
static json_value *push_item(json_value *container, size_t *capacity)
{
    if (container->count == *capacity) {
        size_t grown_capacity = *capacity ? 2 * *capacity : 4;
        json_value *items =
            realloc(container->items, grown_capacity * sizeof(json_value));
        if (items == NULL) {
            return NULL;
        }
        container->items = items;
        if (container->type == JSON_OBJECT) {
            char **keys =
                realloc(container->keys, grown_capacity * sizeof(char *));
            if (keys == NULL) {
                return NULL;
            }
            container->keys = keys;
        }
        *capacity = grown_capacity;
    }
    json_value *item = &container->items[container->count];
    memset(item, 0, sizeof(*item));
    if (container->type == JSON_OBJECT) {
        container->keys[container->count] = NULL;
    }
    container->count++;
    return item;
}

static bool parse_array(parser *p, json_value *value, int depth)
{
    value->type = JSON_ARRAY;
    size_t capacity = 0;
    p->position++; /* [ */
    skip_whitespace(p);
    if (peek(p) == ']') {
        p->position++;
        return true;
    }
    for (;;) {
        json_value *item = push_item(value, &capacity);
        if (item == NULL) {
            return fail(p, "out of memory");
        }
        if (!parse_value(p, item, depth + 1)) {
            return false;
        }
        skip_whitespace(p);
        int c = peek(p);
        p->position++;
        if (c == ']') {
            return true;
        }
        if (c != ',') {
            p->position--;
            return fail(p, "expected , or ] in an array");
        }
    }
}

static bool parse_object(parser *p, json_value *value, int depth)
{
    value->type = JSON_OBJECT;
    size_t capacity = 0;
    p->position++; /* { */
    skip_whitespace(p);
    if (peek(p) == '}') {
        p->position++;
        return true;
    }
    for (;;) {
        skip_whitespace(p);
        bytes key = {0};
        if (!parse_string_into(p, &key)) {
            free(key.data);
            return false;
        }
        for (size_t i = 0; i < value->count; ++i) {
            if (strcmp(value->keys[i], key.data) == 0) {
                free(key.data);
                return fail(p, "duplicate key \"%s\"", value->keys[i]);
            }
        }
        json_value *member = push_item(value, &capacity);
        if (member == NULL) {
            free(key.data);
            return fail(p, "out of memory");
        }
        value->keys[value->count - 1] = key.data;
        skip_whitespace(p);
        if (peek(p) != ':') {
            return fail(p, "expected : after a key");
        }
        p->position++;
        if (!parse_value(p, member, depth + 1)) {
            return false;
        }
        skip_whitespace(p);
        int c = peek(p);
        p->position++;
        if (c == '}') {
            return true;
        }
        if (c != ',') {
            p->position--;
            return fail(p, "expected , or } in an object");
        }
    }
}

static bool parse_value(parser *p, json_value *value, int depth)
{
    if (depth > MAX_DEPTH) {
        return fail(p, "nested deeper than %d", MAX_DEPTH);
    }
    skip_whitespace(p);
    int c = peek(p);
    switch (c) {
    case '{':
        return parse_object(p, value, depth);
    case '[':
        return parse_array(p, value, depth);
    case '"': {
        bytes text = {0};
        value->type = JSON_STRING;
        if (!parse_string_into(p, &text)) {
            free(text.data);
            return false;
        }
        value->string = text.data;
        value->string_length = text.length;
        return true;
    }
    case 't':
        value->type = JSON_BOOL;
        value->boolean = true;
        return expect_literal(p, "true");
    case 'f':
        value->type = JSON_BOOL;
        value->boolean = false;
        return expect_literal(p, "false");
    case 'n':
        value->type = JSON_NULL;
        return expect_literal(p, "null");
    default:
        if (c == '-' || is_digit(c)) {
            return parse_number(p, value);
        }
        return c < 0 ? fail(p, "unexpected end of text")
                     : fail(p, "unexpected character '%c'", c);
    }
}

static void free_contents(json_value *value)
{
    free(value->string);
    for (size_t i = 0; i < value->count; ++i) {
        free_contents(&value->items[i]);
        if (value->keys != NULL) {
            free(value->keys[i]);
        }
    }
    free(value->items);
    free(value->keys);
}

json_value *json_parse(const char *text, size_t length, char *error,
                       size_t error_capacity)
{
    parser p = {
        .text = (const unsigned char *)text,
        .length = length,
        .error = error,
        .error_capacity = error_capacity,
    };
    json_value *root = calloc(1, sizeof(*root));
    if (root == NULL) {
        snprintf(error, error_capacity, "out of memory");
        return NULL;
    }
    bool parsed = parse_value(&p, root, 0);
    if (parsed) {
        skip_whitespace(&p);
        if (p.position != p.length) {
            parsed = fail(&p, "text after the value");
        }
    }
    if (!parsed) {
        json_free(root);
        return NULL;
    }
    return root;
}

void json_free(json_value *value)
{
    if (value != NULL) {
        free_contents(value);
        free(value);
    }
}

const json_value *json_get(const json_value *value, const char *key)
{
    if (!json_is(value, JSON_OBJECT)) {
        return NULL;
    }
    for (size_t i = 0; i < value->count; ++i) {
        if (strcmp(value->keys[i], key) == 0) {
            return &value->items[i];
        }
    }
    return NULL;
}

const json_value *json_at(const json_value *value, size_t index)
{
    if (!json_is(value, JSON_ARRAY) || index >= value->count) {
        return NULL;
    }
    return &value->items[index];
}

bool json_is(const json_value *value, json_type type)
{
    return value != NULL && value->type == type;
}

const char *json_type_name(json_type type)
{
    static const char *const names[] = {"null",   "boolean", "number",
                                        "string", "array",   "object"};
    return (size_t)type < sizeof(names) / sizeof(names[0]) ? names[type]
                                                           : "unknown";
}
