/*
 * Program binaries on disk. A file is a 32-byte header and the payload,
 * the binary clGetProgramInfo(CL_PROGRAM_BINARIES) returned:
 *
 *     "LOCUSCL1"  magic and format version
 *     u64         payload length in bytes
 *     u64         FNV-1a hash of the payload
 *     u64         reserved, 0
 *
 * in host byte order (a cache is per host). Which program a file holds is
 * in its name (opencl_program.c hashes device, driver, options and source
 * into it), so nothing here needs to know. A file whose length or hash does
 * not match was truncated or damaged (a crash of a writer that did not use
 * rename, a full disk, a person): it is reported so the caller rebuilds and
 * overwrites it. The driver gets a second chance to refuse a binary (a
 * different compiler inside the same driver version): the caller rebuilds
 * when clBuildProgram fails on it.
 */
#include "opencl_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "LOCUSCL1"
#define HEADER_BYTES 32

uint64_t locus__opencl_hash(uint64_t hash, const void *data, size_t bytes)
{
    const unsigned char *at = data;
    for (size_t i = 0; i < bytes; i++) {
        hash ^= at[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

int locus__opencl_cache_dir(char *dir, size_t size)
{
    const char *forced = getenv("LOCUS_OPENCL_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int written;
    if (forced != NULL && forced[0] != '\0')
        written = snprintf(dir, size, "%s", forced);
    else if (xdg != NULL && xdg[0] == '/')
        written = snprintf(dir, size, "%s/locus/opencl", xdg);
    else if (home != NULL && home[0] != '\0')
        written = snprintf(dir, size, "%s/.cache/locus/opencl", home);
    else
        return 0;
    return written > 0 && (size_t)written < size;
}

/* The header's checks: its magic, and a payload length that is not zero
 * and accounts for the rest of the file exactly, so that a truncated or
 * extended file is refused. header_bytes is how many of the header's bytes
 * there are (fewer than HEADER_BYTES: refused), file_bytes the whole
 * file's size. */
static int check_header(const unsigned char *header, size_t header_bytes,
                        uint64_t file_bytes, uint64_t *length, uint64_t *hash,
                        char *why, size_t why_size)
{
    if (header_bytes < HEADER_BYTES) {
        snprintf(why, why_size, "shorter than its %d-byte header",
                 HEADER_BYTES);
        return 0;
    }
    if (memcmp(header, MAGIC, 8) != 0) {
        snprintf(why, why_size, "bad magic");
        return 0;
    }
    memcpy(length, header + 8, sizeof *length);
    memcpy(hash, header + 16, sizeof *hash);
    /* A difference, taken once file_bytes >= HEADER_BYTES, where a sum
     * could wrap. A length past SIZE_MAX cannot be allocated or addressed. */
    if (file_bytes < HEADER_BYTES || *length != file_bytes - HEADER_BYTES ||
        *length == 0 || (uint64_t)(size_t)*length != *length) {
        snprintf(why, why_size,
                 "size %llu does not match the header's payload of %llu "
                 "bytes",
                 (unsigned long long)file_bytes, (unsigned long long)*length);
        return 0;
    }
    return 1;
}

static int check_payload(const unsigned char *payload, size_t bytes,
                         uint64_t hash, char *why, size_t why_size)
{
    if (locus__opencl_hash(LOCUS_OPENCL_HASH_SEED, payload, bytes) != hash) {
        snprintf(why, why_size, "payload hash does not match the header's");
        return 0;
    }
    return 1;
}

cache_read_result locus__opencl_cache_parse(const unsigned char *file,
                                            size_t file_bytes,
                                            const unsigned char **payload,
                                            size_t *payload_bytes, char *why,
                                            size_t why_size)
{
    *payload = NULL;
    *payload_bytes = 0;
    uint64_t length = 0, hash = 0;
    if (!check_header(file,
                      file_bytes < HEADER_BYTES ? file_bytes : HEADER_BYTES,
                      file_bytes, &length, &hash, why, why_size) ||
        !check_payload(file + HEADER_BYTES, (size_t)length, hash, why,
                       why_size))
        return CACHE_DAMAGED;
    *payload = file + HEADER_BYTES;
    *payload_bytes = (size_t)length;
    return CACHE_VALID;
}

/* The same checks as locus__opencl_cache_parse, on a file: the header
 * first, so that a file that is not a cache file, however large, is
 * refused without reading it all. */
cache_read_result locus__opencl_cache_read(const char *path,
                                           unsigned char **binary,
                                           size_t *bytes, char *why,
                                           size_t why_size)
{
    *binary = NULL;
    *bytes = 0;
    /* Without blocking (a FIFO would hang fopen) or following a link
     * planted in the cache directory; a regular file only. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        snprintf(why, why_size, "not a regular file");
        return CACHE_DAMAGED;
    }
    FILE *file = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (file == NULL) {
        snprintf(why, why_size, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return CACHE_MISSING;
    }
    cache_read_result result = CACHE_DAMAGED;
    unsigned char header[HEADER_BYTES];
    uint64_t length = 0, hash = 0;
    const size_t header_bytes = fread(header, 1, sizeof header, file);
    uint64_t file_bytes = 0;
    if (header_bytes == sizeof header) {
        struct stat info;
        if (fstat(fileno(file), &info) != 0) {
            snprintf(why, why_size, "fstat: %s", strerror(errno));
            goto close;
        }
        file_bytes = (uint64_t)info.st_size;
    }
    if (!check_header(header, header_bytes, file_bytes, &length, &hash, why,
                      why_size))
        goto close;
    unsigned char *payload = malloc((size_t)length);
    if (payload == NULL) {
        snprintf(why, why_size, "out of memory for %llu bytes",
                 (unsigned long long)length);
        goto close;
    }
    /* A short read: the file shrank since fstat (a writer that does not
     * rename); reported as the hash mismatch it amounts to. */
    if (fread(payload, 1, (size_t)length, file) != (size_t)length ||
        !check_payload(payload, (size_t)length, hash, why, why_size)) {
        snprintf(why, why_size, "payload hash does not match the header's");
        free(payload);
        goto close;
    }
    *binary = payload;
    *bytes = (size_t)length;
    result = CACHE_VALID;
close:
    fclose(file);
    return result;
}

/* mkdir -p of path's directory. */
static int make_parents(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return -1;
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0';
    for (char *at = dir + 1; *at != '\0'; at++) {
        if (*at != '/')
            continue;
        *at = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return -1;
        *at = '/';
    }
    return mkdir(dir, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int locus__opencl_cache_write(const char *path, const unsigned char *binary,
                              size_t bytes, char *why, size_t why_size)
{
    char temporary[4200];
    if (snprintf(temporary, sizeof temporary, "%s.XXXXXX", path) >=
        (int)sizeof temporary) {
        snprintf(why, why_size, "path too long");
        return -1;
    }
    if (make_parents(path) != 0) {
        snprintf(why, why_size, "cannot create its directory: %s",
                 strerror(errno));
        return -1;
    }
    /* Unique per writer, so concurrent processes never share a temporary
     * file; whichever rename() comes last wins with a whole file. */
    int fd = mkstemp(temporary);
    if (fd < 0) {
        snprintf(why, why_size, "mkstemp(%s): %s", temporary, strerror(errno));
        return -1;
    }
    unsigned char header[HEADER_BYTES] = {0};
    const uint64_t length = bytes;
    const uint64_t hash =
        locus__opencl_hash(LOCUS_OPENCL_HASH_SEED, binary, bytes);
    memcpy(header, MAGIC, 8);
    memcpy(header + 8, &length, sizeof length);
    memcpy(header + 16, &hash, sizeof hash);
    FILE *file = fdopen(fd, "wb");
    if (file == NULL) {
        snprintf(why, why_size, "fdopen: %s", strerror(errno));
        close(fd);
        unlink(temporary);
        return -1;
    }
    int ok = fwrite(header, 1, sizeof header, file) == sizeof header &&
             fwrite(binary, 1, bytes, file) == bytes;
    /* fclose flushes: its failure (a full disk) is a failed write. */
    ok = (fclose(file) == 0) && ok;
    if (!ok) {
        snprintf(why, why_size, "writing %s: %s", temporary, strerror(errno));
        unlink(temporary);
        return -1;
    }
    if (rename(temporary, path) != 0) {
        snprintf(why, why_size, "rename to %s: %s", path, strerror(errno));
        unlink(temporary);
        return -1;
    }
    return 0;
}
