/* Aligned text tables for people: cells are collected first, so each
 * column is as wide as its widest cell, then printed in one go. */
#ifndef LOCUS_TOOL_TABLE_H
#define LOCUS_TOOL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Enough for a distance matrix of LOCUS_MAX_NUMA_NODES nodes plus labels. */
#define TABLE_MAX_COLUMNS 72

typedef struct table {
    size_t column_count;
    const char *headers[TABLE_MAX_COLUMNS];
    bool right_aligned[TABLE_MAX_COLUMNS];
    size_t row_count;
    size_t row_capacity;
    char **cells; /* row_count x column_count, each owned; NULL: empty */
} table;

/* headers: column_count titles; the table keeps the pointers. */
void table_init(table *table, size_t column_count, const char *const *headers);
/* Numbers read best right-aligned. */
void table_align_right(table *table, size_t column);
void table_add_row(table *table);
/* Sets a cell of the last row, printf-style. */
void table_set(table *table, size_t column, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Header, a rule, then the rows, each line prefixed by indent spaces. */
void table_print(const table *table, FILE *out, int indent);
void table_free(table *table);

/* malloc that ends the command on failure: the tool has nothing sensible
 * to do without memory for its own tables. */
void *xmalloc(size_t bytes);
void *xrealloc(void *memory, size_t bytes);

#endif
