#include "topology_xml.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "safe_file.h"
#include "status.h"

/* The XML of a machine of thousands of cores is a few MiB. */
#define MAX_XML_BYTES (64u << 20)

typedef struct tag_attributes {
    bool cpuset, complete_cpuset, nodeset, complete_nodeset;
    const char *bad_bitmap; /* the first cpuset or nodeset hwloc would
                               misparse, NULL when none */
    size_t bad_length;
} tag_attributes;

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
}

static bool ends_with(const char *name, size_t length, const char *suffix)
{
    size_t n = strlen(suffix);
    return length >= n && memcmp(name + length - n, suffix, n) == 0;
}

static bool name_is(const char *name, size_t length, const char *word)
{
    return strlen(word) == length && memcmp(name, word, length) == 0;
}

/* What hwloc writes and its hwloc_bitmap_sscanf survives: an optional
 * "0xf...f," (infinite) and then hex words, with or without 0x, one comma
 * between each; or "0xf...f" alone. hwloc 2.9 asserts on others, e.g. a
 * leading comma. */
static bool bitmap_ok(const char *value, size_t length)
{
    const char *p = value, *end = value + length;
    if (length >= 7 && memcmp(p, "0xf...f", 7) == 0) {
        if (length == 7)
            return true;
        if (p[7] != ',')
            return false;
        p += 8;
    }
    for (;;) {
        if (end - p >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
            p += 2;
        const char *digits = p;
        while (p < end && is_hex(*p))
            p++;
        if (p == digits)
            return false;
        if (p == end)
            return true;
        if (*p++ != ',')
            return false;
    }
}

static void note_attribute(tag_attributes *seen, const char *name,
                           size_t length, const char *value,
                           size_t value_length)
{
    seen->cpuset |= name_is(name, length, "cpuset");
    seen->complete_cpuset |= name_is(name, length, "complete_cpuset");
    seen->nodeset |= name_is(name, length, "nodeset");
    seen->complete_nodeset |= name_is(name, length, "complete_nodeset");
    if ((ends_with(name, length, "cpuset") ||
         ends_with(name, length, "nodeset")) &&
        !seen->bad_bitmap && !bitmap_ok(value, value_length)) {
        seen->bad_bitmap = name;
        seen->bad_length = length;
    }
}

/* The attributes of the tag whose name ends at `p`, up to its closing '>';
 * returns where the tag ends. XML allows spaces around '='. */
static const char *scan_tag(const char *p, tag_attributes *seen)
{
    while (*p && *p != '>') {
        if (*p == '"' || *p == '\'') {
            const char *close = strchr(p + 1, *p);
            if (!close)
                return p + strlen(p);
            p = close + 1;
            continue;
        }
        if (!is_space(p[-1]) || !(*p == '_' || (*p >= 'a' && *p <= 'z'))) {
            p++;
            continue;
        }
        const char *name = p;
        while (*p == '_' || (*p >= 'a' && *p <= 'z'))
            p++;
        size_t length = (size_t)(p - name);
        while (is_space(*p))
            p++;
        if (*p != '=')
            continue;
        p++;
        while (is_space(*p))
            p++;
        if (*p != '"' && *p != '\'')
            continue;
        const char *close = strchr(p + 1, *p);
        if (!close)
            return p + strlen(p);
        note_attribute(seen, name, length, p + 1, (size_t)(close - p - 1));
        p = close + 1;
    }
    return p;
}

static size_t line_of(const char *text, const char *at)
{
    size_t line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

/* Every tag's bitmaps; objects must also carry the complete sets hwloc's
 * importer uses without checking. */
static locus_status check_text(const char *path, const char *text)
{
    for (const char *p = strchr(text, '<'); p; p = strchr(p, '<')) {
        const char *tag = p++;
        if (!(*p >= 'a' && *p <= 'z'))
            continue;
        bool object = strncmp(p, "object", 6) == 0 && is_space(p[6]);
        while (*p && !is_space(*p) && *p != '>')
            p++;
        tag_attributes seen = {0};
        p = scan_tag(p, &seen);
        if (seen.bad_bitmap)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "LOCUS_TOPOLOGY='%s': line %zu: %.*s is not "
                               "a bitmap of comma-separated hex words",
                               path, line_of(text, tag), (int)seen.bad_length,
                               seen.bad_bitmap);
        const char *missing = !object ? NULL
                              : seen.cpuset && !seen.complete_cpuset
                                  ? "a cpuset but no complete_cpuset"
                              : seen.nodeset && !seen.complete_nodeset
                                  ? "a nodeset but no complete_nodeset"
                                  : NULL;
        if (missing)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "LOCUS_TOPOLOGY='%s': the object at line %zu "
                               "has %s, which hwloc cannot import",
                               path, line_of(text, tag), missing);
        if (!*p)
            break;
    }
    return LOCUS_SUCCESS;
}

locus_status locus__topology_xml_check(const char *path)
{
    const char *why = "";
    FILE *file = locus__fopen_regular_read(path, 0, &why);
    if (!file)
        return locus__fail(LOCUS_ERROR_TOPOLOGY,
                           "LOCUS_TOPOLOGY='%s' is not a readable hwloc XML "
                           "file: %s",
                           path, why);
    locus_status status = LOCUS_SUCCESS;
    char *text = NULL;
    long size = -1;
    if (fseek(file, 0, SEEK_END) == 0)
        size = ftell(file);
    if (size < 0 || fseek(file, 0, SEEK_SET) != 0) {
        status = locus__fail(LOCUS_ERROR_TOPOLOGY,
                             "LOCUS_TOPOLOGY='%s' is not a regular file", path);
        goto close_file;
    }
    if ((unsigned long)size > MAX_XML_BYTES) {
        status = locus__fail(LOCUS_ERROR_TOPOLOGY,
                             "LOCUS_TOPOLOGY='%s' has %ld bytes; an hwloc "
                             "XML topology has at most %u",
                             path, size, MAX_XML_BYTES);
        goto close_file;
    }
    text = locus__malloc((size_t)size + 1);
    if (!text) {
        status =
            locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                        "reading LOCUS_TOPOLOGY='%s' (%ld bytes)", path, size);
        goto close_file;
    }
    size_t got = fread(text, 1, (size_t)size, file);
    text[got] = '\0';
    /* A NUL inside stops the scan early; hwloc stops there too. */
    status = check_text(path, text);
    free(text);
close_file:
    fclose(file);
    return status;
}
