#include "record.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "context_types.h"
#include "env.h"

void locus_record_init(locus_record *record)
{
    if (!record)
        return;
    memset(record, 0, sizeof *record);
    record->struct_size = sizeof *record;
}

const char *locus_provenance_str(locus_provenance provenance)
{
    switch (provenance) {
    case LOCUS_PROVENANCE_ESTIMATED:
        return "estimated";
    case LOCUS_PROVENANCE_COUNTED:
        return "counted";
    case LOCUS_PROVENANCE_NONE:
        break;
    }
    return "none";
}

/* Record strings are names Locus chose (selectors, algorithm names), never
 * user text, but are escaped anyway so the line always parses. */
static size_t json_string(char *out, size_t capacity, const char *text)
{
    size_t used = 0;
    if (used < capacity)
        out[used] = '"';
    used++;
    for (const char *c = text; *c; c++) {
        char escaped[8];
        unsigned char ch = (unsigned char)*c;
        if (ch == '"' || ch == '\\')
            snprintf(escaped, sizeof escaped, "\\%c", ch);
        else if (ch < 0x20)
            snprintf(escaped, sizeof escaped, "\\u%04x", ch);
        else
            snprintf(escaped, sizeof escaped, "%c", ch);
        for (const char *e = escaped; *e; e++, used++)
            if (used < capacity)
                out[used] = *e;
    }
    if (used < capacity)
        out[used] = '"';
    used++;
    return used;
}

size_t locus_record_to_json(const locus_record *record, char *text,
                            size_t capacity)
{
    if (!record)
        return 0;
    char op[64], device[80], algorithm[80];
    size_t n = json_string(op, sizeof op, record->op);
    op[n < sizeof op ? n : sizeof op - 1] = '\0';
    n = json_string(device, sizeof device, record->device);
    device[n < sizeof device ? n : sizeof device - 1] = '\0';
    n = json_string(algorithm, sizeof algorithm, record->algorithm);
    algorithm[n < sizeof algorithm ? n : sizeof algorithm - 1] = '\0';
    int length = snprintf(
        text, capacity,
        "{\"op\":%s,\"device\":%s,\"algorithm\":%s,\"seconds\":%.9g,"
        "\"flops\":%.17g,\"bytes\":%" PRIu64 ",\"bytes_to_device\":%" PRIu64
        ",\"bytes_from_device\":%" PRIu64 ",\"workspace_bytes\":%" PRIu64
        ",\"local_bytes\":%" PRIu64 ",\"remote_bytes\":%" PRIu64
        ",\"provenance\":\"%s\"}",
        op, device, algorithm, record->seconds, record->flops, record->bytes,
        record->bytes_to_device, record->bytes_from_device,
        record->workspace_bytes, record->local_bytes, record->remote_bytes,
        locus_provenance_str(record->provenance));
    if (length < 0)
        return 0;
    /* Each version's fields only as far as the caller's struct has them. */
    if (record->struct_size < offsetof(locus_record, dtype))
        return (size_t)length;
    /* The choice: appended inside the object, in place of its '}'. */
    size_t used = (size_t)length - 1;
    used += (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0,
                             ",\"chosen_by\":\"%s\",\"estimated_seconds\":%.9g,"
                             "\"estimates\":[",
                             record->chosen_by, record->estimated_seconds);
    size_t count = record->estimate_count < LOCUS_RECORD_MAX_ESTIMATES
                       ? record->estimate_count
                       : LOCUS_RECORD_MAX_ESTIMATES;
    for (size_t i = 0; i < count; i++) {
        char name[80];
        n = json_string(name, sizeof name, record->estimates[i].device);
        name[n < sizeof name ? n : sizeof name - 1] = '\0';
        used +=
            (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0,
                             "%s{\"device\":%s,\"seconds\":%.9g}", i ? "," : "",
                             name, record->estimates[i].seconds);
    }
    used += (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0, "]}");
    if (record->struct_size < offsetof(locus_record, migrated_bytes))
        return used;
    char dtype[32];
    n = json_string(dtype, sizeof dtype, record->dtype);
    dtype[n < sizeof dtype ? n : sizeof dtype - 1] = '\0';
    used--; /* the '}' again */
    used += (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0,
                             ",\"dtype\":%s}", dtype);
    /* Only where pages moved (or on a "migrate" line): every other
     * record keeps dtype as its last field. */
    if (record->struct_size < sizeof *record ||
        (record->migrated_bytes == 0 && record->buffer_id == 0))
        return used;
    used--;
    used += (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0,
                             ",\"migrated_bytes\":%" PRIu64
                             ",\"migrate_seconds\":%.9g",
                             record->migrated_bytes, record->migrate_seconds);
    used += (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0,
                             ",\"migrate_node\":%d", record->migrate_node);
    if (record->buffer_id != 0)
        used += (size_t)snprintf(used < capacity ? text + used : NULL,
                                 used < capacity ? capacity - used : 0,
                                 ",\"buffer_id\":%" PRIu64
                                 ",\"buffer_address\":%" PRIu64,
                                 record->buffer_id, record->buffer_address);
    used += (size_t)snprintf(used < capacity ? text + used : NULL,
                             used < capacity ? capacity - used : 0, "}");
    return used;
}

static _Thread_local bool recording_paused;

/* The process's rank in the whole MPI job, from the launcher's variables:
 * Open MPI's, MVAPICH's, Hydra's (MPICH, Intel MPI), PMIx's, then Slurm's
 * task id, in local_rank.c's order, the first set one deciding; -1 when
 * none is set or it does not parse (the launcher's variable, not the
 * user's: no warning, as local_rank.h decides). A few getenv calls beside
 * the line's write(), so it is read each time rather than kept. */
static int launcher_world_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK",
                                        "MV2_COMM_WORLD_RANK", "PMI_RANK",
                                        "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *text = getenv(names[i]);
        if (!text || text[0] == '\0')
            continue;
        /* A batch script has SLURM_PROCID too, but is no task of a step
         * (local_rank.c makes the same distinction). */
        if (strcmp(names[i], "SLURM_PROCID") == 0) {
            const char *tasks = getenv("SLURM_STEP_TASKS_PER_NODE");
            if (!tasks || tasks[0] == '\0')
                continue;
        }
        int rank;
        return locus__parse_small_uint(text, strlen(text), &rank) ? rank : -1;
    }
    return -1;
}

/* The start of a LOCUS_RECORD line, before the record's own fields: when
 * it was written (ISO 8601 UTC to the microsecond: lines of one second
 * stay ordered), by which process, of which MPI rank (the job's and the
 * machine's, as the context read it; null when not started by a launcher).
 * No closing brace; returns the length snprintf gives. */
static int line_header(const locus_context *context, char *text,
                       size_t capacity)
{
    char timestamp[64] = "null";
    struct timespec now;
    struct tm utc;
    if (clock_gettime(CLOCK_REALTIME, &now) == 0 &&
        gmtime_r(&now.tv_sec, &utc)) {
        char seconds[32];
        strftime(seconds, sizeof seconds, "%Y-%m-%dT%H:%M:%S", &utc);
        snprintf(timestamp, sizeof timestamp, "\"%s.%06ldZ\"", seconds,
                 (long)(now.tv_nsec / 1000) % 1000000);
    }
    char rank[16] = "null", local_rank[16] = "null";
    int world = launcher_world_rank();
    if (world >= 0)
        snprintf(rank, sizeof rank, "%d", world);
    if (context->local_rank.launcher.rank >= 0)
        snprintf(local_rank, sizeof local_rank, "%d",
                 context->local_rank.launcher.rank);
    return snprintf(text, capacity,
                    "{\"timestamp\":%s,\"pid\":%ld,\"rank\":%s,"
                    "\"local_rank\":%s",
                    timestamp, (long)getpid(), rank, local_rank);
}

void locus__record_pause(bool paused)
{
    recording_paused = paused;
}

void locus__record_append(locus_context *context, const locus_record *record)
{
    if (context->record_fd < 0 || recording_paused)
        return;
    char line[2048];
    int header = line_header(context, line, sizeof line);
    if (header < 0 || (size_t)header >= sizeof line / 2)
        return;
    /* The record's object follows the header, its '{' becoming a comma:
     * one flat object per line. */
    size_t capacity = sizeof line - 1 - (size_t)header;
    size_t length = locus_record_to_json(record, line + header, capacity);
    if (length >= capacity)
        return;
    line[header] = ',';
    length += (size_t)header;
    line[length++] = '\n';
    /* One write() of the whole line on an O_APPEND descriptor: lines of
     * other threads and processes never interleave with it. A full disk
     * can still take part of it; that part is cut off again, so that a
     * reader never sees half a line (if another process appended after
     * it meanwhile, its line is left as it is). */
    pthread_mutex_lock(&context->record_lock);
    ssize_t written = write(context->record_fd, line, length);
    int saved = errno;
    struct stat st;
    if (written > 0 && (size_t)written < length &&
        fstat(context->record_fd, &st) == 0 && st.st_size >= written)
        (void)ftruncate(context->record_fd, st.st_size - written);
    pthread_mutex_unlock(&context->record_lock);
    if (written != (ssize_t)length)
        locus__log(context, LOCUS_LOG_WARN,
                   "could not append to the record file %s: %s",
                   context->config.record_path,
                   written < 0 ? strerror(saved) : "short write (disk full?)");
}

void locus__record_copy_out(locus_record *destination,
                            const locus_record *source)
{
    size_t size = destination->struct_size < sizeof *source
                      ? destination->struct_size
                      : sizeof *source;
    memcpy(destination, source, size);
    destination->struct_size = size;
}
