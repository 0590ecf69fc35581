#include "table.h"

#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *xmalloc(size_t bytes)
{
    void *memory = malloc(bytes != 0 ? bytes : 1);
    if (memory == NULL) {
        fputs("locus: out of memory\n", stderr);
        exit(EXIT_FAILURE);
    }
    return memory;
}

void *xrealloc(void *memory, size_t bytes)
{
    void *grown = realloc(memory, bytes != 0 ? bytes : 1);
    if (grown == NULL) {
        fputs("locus: out of memory\n", stderr);
        exit(EXIT_FAILURE);
    }
    return grown;
}

void table_init(table *table, size_t column_count, const char *const *headers)
{
    assert(column_count > 0 && column_count <= TABLE_MAX_COLUMNS);
    memset(table, 0, sizeof(*table));
    table->column_count = column_count;
    for (size_t column = 0; column < column_count; ++column) {
        table->headers[column] = headers[column];
    }
}

void table_align_right(table *table, size_t column)
{
    assert(column < table->column_count);
    table->right_aligned[column] = true;
}

void table_add_row(table *table)
{
    if (table->row_count == table->row_capacity) {
        size_t capacity =
            table->row_capacity != 0 ? 2 * table->row_capacity : 8;
        if (capacity > SIZE_MAX / sizeof(char *) / table->column_count) {
            fputs("locus: out of memory\n", stderr);
            exit(EXIT_FAILURE);
        }
        table->cells = xrealloc(table->cells, capacity * table->column_count *
                                                  sizeof(char *));
        table->row_capacity = capacity;
    }
    char **row = table->cells + table->row_count * table->column_count;
    for (size_t column = 0; column < table->column_count; ++column) {
        row[column] = NULL;
    }
    table->row_count++;
}

void table_set(table *table, size_t column, const char *format, ...)
{
    assert(table->row_count > 0 && column < table->column_count);
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(NULL, 0, format, arguments);
    va_end(arguments);
    if (length < 0) {
        length = 0;
    }
    char *text = xmalloc((size_t)length + 1);
    va_start(arguments, format);
    vsnprintf(text, (size_t)length + 1, format, arguments);
    va_end(arguments);
    char **cell =
        &table->cells[(table->row_count - 1) * table->column_count + column];
    free(*cell);
    *cell = text;
}

static const char *cell_text(const table *table, size_t row, size_t column)
{
    const char *text = table->cells[row * table->column_count + column];
    return text != NULL ? text : "";
}

/* Column widths in characters. Device names may hold UTF-8, so continuation
 * bytes are not counted. */
static size_t display_width(const char *text)
{
    size_t width = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; ++c) {
        if ((*c & 0xC0u) != 0x80u) {
            width++;
        }
    }
    return width;
}

static void print_cell(FILE *out, const char *text, size_t width,
                       bool right_aligned, bool last)
{
    size_t padding = width - display_width(text);
    if (right_aligned) {
        fprintf(out, "%*s%s", (int)padding, "", text);
    } else if (last) {
        fputs(text, out); /* no trailing blanks */
    } else {
        fprintf(out, "%s%*s", text, (int)padding, "");
    }
}

void table_print(const table *table, FILE *out, int indent)
{
    size_t widths[TABLE_MAX_COLUMNS];
    size_t total = 0;
    for (size_t column = 0; column < table->column_count; ++column) {
        widths[column] = display_width(table->headers[column]);
        for (size_t row = 0; row < table->row_count; ++row) {
            size_t width = display_width(cell_text(table, row, column));
            if (width > widths[column]) {
                widths[column] = width;
            }
        }
        /* The rule stops at the last header: a long free-text last
         * column (a reason, a path) would otherwise stretch it. A
         * right-aligned one (figures) ends where its header ends, at the
         * column's full width. */
        bool stop_at_header =
            column + 1 == table->column_count && !table->right_aligned[column];
        total += (stop_at_header ? display_width(table->headers[column])
                                 : widths[column]) +
                 (column > 0 ? 2 : 0);
    }
    for (size_t row = 0; row < table->row_count + 1; ++row) {
        fprintf(out, "%*s", indent, "");
        for (size_t column = 0; column < table->column_count; ++column) {
            const char *text = row == 0 ? table->headers[column]
                                        : cell_text(table, row - 1, column);
            if (column > 0) {
                fputs("  ", out);
            }
            print_cell(out, text, widths[column], table->right_aligned[column],
                       column + 1 == table->column_count);
        }
        fputc('\n', out);
        if (row == 0) {
            fprintf(out, "%*s", indent, "");
            for (size_t dash = 0; dash < total; ++dash) {
                fputc('-', out);
            }
            fputc('\n', out);
        }
    }
}

void table_free(table *table)
{
    if (table->cells != NULL) {
        for (size_t i = 0; i < table->row_count * table->column_count; ++i) {
            free(table->cells[i]);
        }
        free(table->cells);
    }
    memset(table, 0, sizeof(*table));
}
