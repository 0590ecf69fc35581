/* libFuzzer target: the file reader of the OpenCL program cache
 * (backends/opencl/opencl_cache.c, compiled into the target: it makes no
 * OpenCL call, so no libOpenCL is linked). The input is a whole cache file.
 * Each one is checked three ways:
 *
 *  - in memory, by locus__opencl_cache_parse, against this file's own model
 *    of the format (below, from the comment atop opencl_cache.c): valid
 *    exactly when the magic is right, the header's length is not 0 and is
 *    the rest of the file, and the header's FNV-1a hash is the payload's;
 *    then the payload is the rest of the file, else there is none and a
 *    reason is given;
 *  - on disk, written to a temporary file and read by
 *    locus__opencl_cache_read, as the backend reads it: the same verdict,
 *    the same payload (copied; freed here, so a leak shows), a reason;
 *  - a valid file cut by one byte, or with one payload byte changed, is
 *    refused; and the input written as a payload by
 *    locus__opencl_cache_write reads back valid, byte for byte.
 *
 * The cache file carries no key: the key (device, driver, options and
 * source) is its name, so a file is found only under the key it was
 * written for, and what is checked here is everything a file's bytes can
 * get wrong. libFuzzer's input buffer is exactly the input's size, so a
 * read past the file's end shows under ASan. Inputs above 1 MiB (a real
 * program is a few hundred KiB) are skipped; CI fuzzes up to 4 KiB: the
 * checks do not depend on the payload's size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opencl_cache.h"

#define MAX_INPUT (1 << 20)
#define HEADER 32

static char dir[64], input_path[128], written_path[128];

static void require(int condition, const char *what, const char *why)
{
    if (!condition) {
        fprintf(stderr, "fuzz_program_cache: %s (%s)\n", what, why);
        abort();
    }
}

/* The model's FNV-1a, written apart from the reader's. */
static uint64_t fnv1a(const unsigned char *at, size_t bytes)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++)
        hash = (hash ^ at[i]) * 0x100000001b3ull;
    return hash;
}

static int model_valid(const unsigned char *data, size_t size)
{
    if (size <= HEADER || memcmp(data, "LOCUSCL1", 8) != 0)
        return 0;
    uint64_t length, hash;
    memcpy(&length, data + 8, sizeof length);
    memcpy(&hash, data + 16, sizeof hash);
    return length == size - HEADER &&
           fnv1a(data + HEADER, size - HEADER) == hash;
}

/* A reason: not empty, terminated inside its buffer. */
static int has_reason(const char *why, size_t size)
{
    return why[0] != '\0' && memchr(why, '\0', size) != NULL;
}

/* The verdict on an exact-size copy (so ASan sees a read past its end). */
static cache_read_result parse_copy(const unsigned char *data, size_t size)
{
    unsigned char *copy = malloc(size > 0 ? size : 1);
    require(copy != NULL, "out of memory", "");
    if (size > 0)
        memcpy(copy, data, size);
    const unsigned char *payload = NULL;
    size_t bytes = 0;
    char why[256] = "";
    cache_read_result result = locus__opencl_cache_parse(
        copy, size, &payload, &bytes, why, sizeof why);
    require(result == CACHE_VALID || has_reason(why, sizeof why),
            "refused without a reason", why);
    free(copy);
    return result;
}

static void remove_files(void)
{
    unlink(input_path);
    unlink(written_path);
    rmdir(dir);
}

static void check_file(const char *path, const unsigned char *data, size_t size,
                       int valid)
{
    unsigned char *binary = (unsigned char *)"not set";
    size_t bytes = 1;
    char why[256] = "";
    cache_read_result result =
        locus__opencl_cache_read(path, &binary, &bytes, why, sizeof why);
    require(result == (valid ? CACHE_VALID : CACHE_DAMAGED),
            valid ? "a valid file read as not valid"
                  : "a damaged file read as valid",
            why);
    if (valid) {
        require(binary != NULL && bytes == size - HEADER &&
                    memcmp(binary, data + HEADER, bytes) == 0,
                "the file's payload differs from the input's", path);
    } else {
        require(binary == NULL && bytes == 0, "a refused file gave a binary",
                why);
        require(has_reason(why, sizeof why), "refused without a reason", why);
    }
    free(binary);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    if (dir[0] == '\0') {
        /* Memory-backed where there is one: rewriting a file on ext4 costs
         * a flush (its replace-by-truncate and -by-rename heuristics),
         * 400 us against 15 on tmpfs. */
        snprintf(dir, sizeof dir, "/dev/shm/locus-fuzz-program-cache-XXXXXX");
        if (mkdtemp(dir) == NULL) {
            snprintf(dir, sizeof dir, "/tmp/locus-fuzz-program-cache-XXXXXX");
            require(mkdtemp(dir) != NULL, "mkdtemp", dir);
        }
        snprintf(input_path, sizeof input_path, "%s/input.bin", dir);
        snprintf(written_path, sizeof written_path, "%s/written.bin", dir);
        atexit(remove_files);
    }
    const int valid = model_valid(data, size);

    /* In memory. */
    const unsigned char *payload = NULL;
    size_t bytes = 1;
    char why[256] = "";
    cache_read_result result = locus__opencl_cache_parse(
        data, size, &payload, &bytes, why, sizeof why);
    if (valid) {
        require(result == CACHE_VALID, "a valid file parsed as not valid", why);
        require(payload == data + HEADER && bytes == size - HEADER,
                "the payload is not the rest of the file", "");
    } else {
        require(result == CACHE_DAMAGED, "a damaged file parsed as valid", "");
        require(payload == NULL && bytes == 0, "a refused file gave a payload",
                why);
        require(has_reason(why, sizeof why), "refused without a reason", why);
    }

    /* On disk, as the backend reads it. */
    FILE *file = fopen(input_path, "wb");
    require(file != NULL, "creating the input file", input_path);
    require(fwrite(data, 1, size, file) == size && fclose(file) == 0,
            "writing the input file", input_path);
    check_file(input_path, data, size, valid);

    /* A valid file, one byte shorter or with one payload byte changed
     * (FNV-1a always sees a change of one byte). */
    if (valid) {
        require(parse_copy(data, size - 1) == CACHE_DAMAGED,
                "a truncated file parsed as valid", "");
        unsigned char *changed = malloc(size);
        require(changed != NULL, "out of memory", "");
        memcpy(changed, data, size);
        const size_t at = HEADER + data[HEADER] % (size - HEADER);
        changed[at] ^= (unsigned char)(1u << (data[size - 1] % 8));
        require(parse_copy(changed, size) == CACHE_DAMAGED,
                "a file with a changed payload byte parsed as valid", "");
        free(changed);
    }

    /* The input as a payload, through the writer and back. */
    if (size > 0) {
        require(locus__opencl_cache_write(written_path, data, size, why,
                                          sizeof why) == 0,
                "locus__opencl_cache_write failed", why);
        unsigned char *binary = NULL;
        bytes = 0;
        require(locus__opencl_cache_read(written_path, &binary, &bytes, why,
                                         sizeof why) == CACHE_VALID &&
                    bytes == size && memcmp(binary, data, size) == 0,
                "a written file did not read back", why);
        free(binary);
    }
    return 0;
}
