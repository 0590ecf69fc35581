/* Text forms of the values `locus` shows: byte counts, NUMA node masks and
 * Linux cpu lists ("0-7,16-23"). */
#ifndef LOCUS_TOOL_FORMAT_H
#define LOCUS_TOOL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "0 B", "512 B", "1.5 KiB", "62.8 GiB": binary units, as numactl and
 * free(1) use for memory. */
void format_bytes(uint64_t bytes, char *text, size_t capacity);

/* text with its control characters written as \n, \t, \r or \xHH, for
 * showing values from the environment on a terminal (an escape sequence in
 * a variable must not reach it raw), truncated to capacity. */
void format_escaped(const char *text, char *out, size_t capacity);

/* The OS node numbers of a mask as "0,1"; "unknown" for an empty mask. */
void format_node_mask(uint64_t mask, char *text, size_t capacity);

/* Calls visit(cpu, state) for each cpu of a list such as "0-3,8,10-11";
 * returns false (after visiting what parsed) at the first malformed item,
 * e.g. a list cut short by a fixed-size field. */
bool cpu_list_for_each(const char *list, void (*visit)(long cpu, void *state),
                       void *state);

#endif
