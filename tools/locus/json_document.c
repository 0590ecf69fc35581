/* The header every --json document of the `locus` command opens with
 * (json.h, docs/JSON.md). Kept apart from json.c, the writer itself, which
 * is tested without liblocus. */
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <locus/locus.h>

#include "json.h"

bool json_utc_timestamp(char *text, size_t capacity)
{
    time_t now = time(NULL);
    struct tm utc;
    if (capacity > 0)
        text[0] = '\0';
    if (now == (time_t)-1 || !gmtime_r(&now, &utc))
        return false;
    return strftime(text, capacity, "%Y-%m-%dT%H:%M:%SZ", &utc) > 0;
}

void json_document_begin(json_writer *writer, FILE *out, const char *command)
{
    json_init(writer, out);
    json_begin_object(writer);
    json_key(writer, "schema_version");
    json_int(writer, JSON_SCHEMA_VERSION);
    json_key(writer, "command");
    json_string(writer, command);
    json_key(writer, "locus_version");
    json_string(writer, locus_version_string());
    /* POSIX leaves a truncated name unterminated: the last byte is ours. */
    char host[256];
    bool have_host = gethostname(host, sizeof host - 1) == 0;
    host[sizeof host - 1] = '\0';
    json_key(writer, "host");
    json_string_or_null(writer, have_host && host[0] ? host : NULL);
    char timestamp[32];
    json_key(writer, "timestamp");
    json_string_or_null(writer, json_utc_timestamp(timestamp, sizeof timestamp)
                                    ? timestamp
                                    : NULL);
}

void json_document_end(json_writer *writer)
{
    json_end_object(writer);
    json_finish(writer);
}
