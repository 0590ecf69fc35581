#include "format.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

void format_bytes(uint64_t bytes, char *text, size_t capacity)
{
    static const char *const units[] = {"B",   "KiB", "MiB", "GiB",
                                        "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(text, capacity, "%u B", (unsigned)bytes);
        return;
    }
    double value = (double)bytes;
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < sizeof(units) / sizeof(units[0])) {
        value /= 1024.0;
        unit++;
    }
    snprintf(text, capacity, "%.1f %s", value, units[unit]);
}

void format_node_mask(uint64_t mask, char *text, size_t capacity)
{
    if (mask == 0) {
        snprintf(text, capacity, "unknown");
        return;
    }
    size_t used = 0;
    text[0] = '\0';
    for (int node = 0; node < 64; ++node) {
        if ((mask >> node & 1u) == 0) {
            continue;
        }
        int written = snprintf(text + used, capacity - used, "%s%d",
                               used > 0 ? "," : "", node);
        if (written < 0 || (size_t)written >= capacity - used) {
            return; /* truncated: the caller's field is full */
        }
        used += (size_t)written;
    }
}

static bool parse_cpu_number(const char **cursor, long *cpu)
{
    if (!isdigit((unsigned char)**cursor)) {
        return false;
    }
    char *end = NULL;
    *cpu = strtol(*cursor, &end, 10);
    *cursor = end;
    return true;
}

bool cpu_list_for_each(const char *list, void (*visit)(long cpu, void *state),
                       void *state)
{
    const char *cursor = list;
    while (*cursor != '\0') {
        long first = 0;
        long last = 0;
        if (!parse_cpu_number(&cursor, &first)) {
            return false;
        }
        last = first;
        if (*cursor == '-') {
            cursor++;
            if (!parse_cpu_number(&cursor, &last) || last < first) {
                return false;
            }
        }
        if (*cursor != ',' && *cursor != '\0') {
            return false;
        }
        for (long cpu = first; cpu <= last; ++cpu) {
            visit(cpu, state);
        }
        if (*cursor == ',') {
            cursor++;
        }
    }
    return true;
}

void format_escaped(const char *text, char *out, size_t capacity)
{
    size_t used = 0;
    if (capacity == 0)
        return;
    for (const unsigned char *c = (const unsigned char *)text;
         *c && used + 5 < capacity; c++) {
        if (*c >= 0x20 && *c != 0x7f)
            out[used++] = (char)*c;
        else if (*c == '\n' || *c == '\t' || *c == '\r')
            used += (size_t)snprintf(out + used, 3, "\\%c",
                                     *c == '\n'   ? 'n'
                                     : *c == '\t' ? 't'
                                                  : 'r');
        else
            used += (size_t)snprintf(out + used, 5, "\\x%02x", *c);
    }
    out[used] = '\0';
}
