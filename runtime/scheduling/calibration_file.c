#include "calibration_file.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* The format's version: raised whenever the fields change, so that a file
 * of an older Locus is refused at its first line ("damaged", measured
 * again) rather than trusted with a figure missing. 4: wake_seconds; 5: the
 * f64 and half-type rates; 6: conv_filter_bytes; 7: shallow_wake_seconds. */
#define MAGIC_LINE "locus-calibration 7\n"
#define CHECKSUM_WORD "checksum "

/* Each field with the range a real measurement can fall in: a value outside
 * it is a damaged file, not a fast machine. Zero is allowed where a device
 * has no such path (host <-> device rates of the CPU). */
typedef struct field_rule {
    const char *name;
    size_t offset;
    double min, max;
    bool zero_allowed;
} field_rule;

#define FIELD(name, min, max, zero)                                            \
    {                                                                          \
#name, offsetof(locus__rates, name), min, max, zero                    \
    }

static const field_rule fields[] = {
    FIELD(launch_seconds, 1e-9, 10.0, false),
    FIELD(gemm_fixed_seconds, 0.0, 10.0, true),
    FIELD(gemm_flops, 1e3, 1e18, false),
    FIELD(conv_fixed_seconds, 0.0, 10.0, true),
    FIELD(conv_flops, 1e3, 1e18, false),
    FIELD(reduce_bytes, 1e3, 1e15, false),
    FIELD(upload_pageable_bytes, 1e3, 1e15, true),
    FIELD(upload_pinned_bytes, 1e3, 1e15, true),
    FIELD(download_bytes, 1e3, 1e15, true),
    FIELD(transfer_seconds, 1e-9, 10.0, true),
    FIELD(download_pinned_bytes, 1e3, 1e15, true),
    /* Zero where no pool wakes (any device but the CPU's); a wake-up of
     * over a second is no wake-up but a damaged file. */
    FIELD(wake_seconds, 1e-9, 1.0, true),
    /* Zero: not measured (the device does not offer that dtype). */
    FIELD(gemm_flops_f64, 1e3, 1e18, true),
    FIELD(conv_flops_f64, 1e3, 1e18, true),
    FIELD(gemm_flops_half, 1e3, 1e18, true),
    FIELD(conv_flops_half, 1e3, 1e18, true),
    /* Zero where conv2d keeps no prepared filter (any device but the
     * CPU's), or preparing one cost nothing measurable. */
    FIELD(conv_filter_bytes, 1e3, 1e18, true),
    /* As wake_seconds, after a sleep too short for deep idle states. */
    FIELD(shallow_wake_seconds, 1e-9, 1.0, true),
};
#define FIELD_COUNT (sizeof fields / sizeof fields[0])

static double *field_of(locus__rates *rates, size_t i)
{
    return (double *)((char *)rates + fields[i].offset);
}

uint64_t locus__calibration_hash(const char *text, size_t length)
{
    uint64_t hash = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)text[i];
        hash *= UINT64_C(1099511628211);
    }
    return hash;
}

size_t locus__calibration_format(const locus__rates *rates, const char *key,
                                 char *text, size_t capacity)
{
    char body[2048];
    size_t used = 0;
    int n = snprintf(body, sizeof body, MAGIC_LINE "key %s\n", key);
    if (n < 0 || (size_t)n >= sizeof body)
        return SIZE_MAX;
    used = (size_t)n;
    locus__rates copy = *rates;
    for (size_t i = 0; i < FIELD_COUNT; i++) {
        n = snprintf(body + used, sizeof body - used, "%s %.17g\n",
                     fields[i].name, *field_of(&copy, i));
        if (n < 0 || (size_t)n >= sizeof body - used)
            return SIZE_MAX;
        used += (size_t)n;
    }
    n = snprintf(text, capacity, "%s" CHECKSUM_WORD "%016llx\n", body,
                 (unsigned long long)locus__calibration_hash(body, used));
    return n < 0 ? SIZE_MAX : (size_t)n;
}

/* The next line of [*at, end): its start and length without the newline.
 * A last line without a newline is damage (a truncated write). */
static bool next_line(const char **at, const char *end, const char **line,
                      size_t *length)
{
    const char *newline = memchr(*at, '\n', (size_t)(end - *at));
    if (!newline)
        return false;
    *line = *at;
    *length = (size_t)(newline - *at);
    *at = newline + 1;
    return true;
}

static bool starts_with(const char *line, size_t length, const char *word)
{
    size_t n = strlen(word);
    return length >= n && memcmp(line, word, n) == 0;
}

/* A decimal number that is the whole of [text, text + length). */
static bool parse_number(const char *text, size_t length, double *value)
{
    char copy[64];
    if (length == 0 || length >= sizeof copy)
        return false;
    memcpy(copy, text, length);
    copy[length] = '\0';
    for (size_t i = 0; i < length; i++)
        if (!strchr("0123456789+-.eE", copy[i]))
            return false;
    char *stop = NULL;
    *value = strtod(copy, &stop);
    return stop == copy + length && isfinite(*value);
}

static locus_status damaged(const char *why, const char *detail)
{
    return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "calibration file %s%s%s",
                       why, detail ? ": " : "", detail ? detail : "");
}

static locus_status parse_field(const char *line, size_t length,
                                locus__rates *rates, bool *seen)
{
    for (size_t i = 0; i < FIELD_COUNT; i++) {
        size_t name_length = strlen(fields[i].name);
        if (length <= name_length || line[name_length] != ' ' ||
            memcmp(line, fields[i].name, name_length) != 0)
            continue;
        if (seen[i])
            return damaged("repeats a field", fields[i].name);
        double value;
        if (!parse_number(line + name_length + 1, length - name_length - 1,
                          &value))
            return damaged("has a value that is not a number", fields[i].name);
        bool in_range = value >= fields[i].min && value <= fields[i].max;
        if (!in_range && !(fields[i].zero_allowed && value == 0.0))
            return damaged("has a value out of range", fields[i].name);
        *field_of(rates, i) = value;
        seen[i] = true;
        return LOCUS_SUCCESS;
    }
    return damaged("has an unknown line", NULL);
}

locus_status locus__calibration_parse(const char *text, size_t length,
                                      const char *expected_key,
                                      locus__rates *out)
{
    const char *at = text, *end = text + length;
    const char *line;
    size_t line_length;
    if (!next_line(&at, end, &line, &line_length) ||
        line_length + 1 != strlen(MAGIC_LINE) ||
        memcmp(line, MAGIC_LINE, line_length) != 0)
        return damaged("does not start with the format line", NULL);
    if (!next_line(&at, end, &line, &line_length) ||
        !starts_with(line, line_length, "key "))
        return damaged("has no key line", NULL);
    size_t key_length = strlen(expected_key);
    if (line_length - 4 != key_length ||
        memcmp(line + 4, expected_key, key_length) != 0)
        return damaged("is for another device, driver or host", NULL);

    locus__rates rates = {0};
    bool seen[FIELD_COUNT] = {false};
    for (;;) {
        const char *body_end = at;
        if (!next_line(&at, end, &line, &line_length))
            return damaged("ends before its checksum", NULL);
        if (!starts_with(line, line_length, CHECKSUM_WORD)) {
            locus_status status = parse_field(line, line_length, &rates, seen);
            if (status != LOCUS_SUCCESS)
                return status;
            continue;
        }
        size_t digits = line_length - strlen(CHECKSUM_WORD);
        char expected[17];
        snprintf(expected, sizeof expected, "%016llx",
                 (unsigned long long)locus__calibration_hash(
                     text, (size_t)(body_end - text)));
        if (digits != 16 ||
            memcmp(line + strlen(CHECKSUM_WORD), expected, 16) != 0)
            return damaged("fails its checksum", NULL);
        if (at != end)
            return damaged("has bytes after its checksum", NULL);
        break;
    }
    for (size_t i = 0; i < FIELD_COUNT; i++)
        if (!seen[i])
            return damaged("lacks a field", fields[i].name);
    *out = rates;
    return LOCUS_SUCCESS;
}
