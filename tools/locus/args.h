/* Command-line helpers: long options in both "--name value" and
 * "--name=value" forms, and strict number parsing (a typo in a size must
 * be an error, never a silent zero). */
#ifndef LOCUS_TOOL_ARGS_H
#define LOCUS_TOOL_ARGS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum arg_match {
    ARG_NO_MATCH = 0,
    ARG_MATCHED = 1,
    ARG_MISSING_VALUE = 2,
} arg_match;

/* Whether argv[*index] is the option `name` with a value. On a match,
 * *value points at the value and *index moves to its last argument. */
arg_match arg_value(int argc, char **argv, int *index, const char *name,
                    const char **value);

/* arg_value for each option of a NULL-terminated list of names; on a
 * match (or a missing value), *which is the position of the name. */
arg_match arg_value_of(int argc, char **argv, int *index,
                       const char *const *names, size_t *which,
                       const char **value);

/* Whether arg is exactly the flag `name` (or its one-letter alias, when
 * alias is not NULL). */
bool arg_is_flag(const char *arg, const char *name, const char *alias);

/* A decimal count without sign, with an optional binary suffix K, M or G
 * (2^10, 2^20, 2^30); fails on anything else, on overflow and, where
 * allow_zero is false, on zero. */
bool parse_count(const char *text, bool allow_zero, size_t *out);

/* Calls parse_piece on each separator-delimited piece of text (a copy,
 * NUL-terminated) and stops at the first that fails. Empty pieces and
 * pieces longer than 255 characters fail. */
bool for_each_piece(const char *text, char separator,
                    bool (*parse_piece)(const char *piece, void *state),
                    void *state);

/* A decimal unsigned integer in [minimum, maximum]. */
bool parse_unsigned(const char *text, unsigned long long minimum,
                    unsigned long long maximum, unsigned long long *out);

#endif
