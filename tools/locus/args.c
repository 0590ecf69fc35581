#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

arg_match arg_value(int argc, char **argv, int *index, const char *name,
                    const char **value)
{
    const char *arg = argv[*index];
    size_t name_length = strlen(name);
    if (strncmp(arg, name, name_length) != 0) {
        return ARG_NO_MATCH;
    }
    if (arg[name_length] == '=') {
        *value = arg + name_length + 1;
        return ARG_MATCHED;
    }
    if (arg[name_length] != '\0') {
        return ARG_NO_MATCH; /* "--sizes" is not "--size" */
    }
    if (*index + 1 >= argc) {
        return ARG_MISSING_VALUE;
    }
    *index += 1;
    *value = argv[*index];
    return ARG_MATCHED;
}

arg_match arg_value_of(int argc, char **argv, int *index,
                       const char *const *names, size_t *which,
                       const char **value)
{
    for (size_t i = 0; names[i] != NULL; ++i) {
        arg_match match = arg_value(argc, argv, index, names[i], value);
        if (match != ARG_NO_MATCH) {
            *which = i;
            return match;
        }
    }
    return ARG_NO_MATCH;
}

bool arg_is_flag(const char *arg, const char *name, const char *alias)
{
    return strcmp(arg, name) == 0 || (alias != NULL && strcmp(arg, alias) == 0);
}

/* strtoull accepts leading blanks, signs and "0x"; sizes must not. */
static bool starts_with_digit(const char *text)
{
    return isdigit((unsigned char)text[0]);
}

bool parse_unsigned(const char *text, unsigned long long minimum,
                    unsigned long long maximum, unsigned long long *out)
{
    if (!starts_with_digit(text)) {
        return false;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < minimum || value > maximum) {
        return false;
    }
    *out = value;
    return true;
}

bool parse_count(const char *text, bool allow_zero, size_t *out)
{
    if (!starts_with_digit(text)) {
        return false;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0) {
        return false;
    }
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        return false;
    }
    if (shift != 0 && end[1] != '\0') {
        return false;
    }
    if (value > (unsigned long long)SIZE_MAX >> shift) {
        return false;
    }
    value <<= shift;
    if (value == 0 && !allow_zero) {
        return false;
    }
    *out = (size_t)value;
    return true;
}

bool for_each_piece(const char *text, char separator,
                    bool (*parse_piece)(const char *piece, void *state),
                    void *state)
{
    const char *begin = text;
    for (;;) {
        const char *end = strchr(begin, separator);
        size_t length = end != NULL ? (size_t)(end - begin) : strlen(begin);
        char piece[256];
        if (length == 0 || length >= sizeof(piece)) {
            return false;
        }
        memcpy(piece, begin, length);
        piece[length] = '\0';
        if (!parse_piece(piece, state)) {
            return false;
        }
        if (end == NULL) {
            return true;
        }
        begin = end + 1;
    }
}
