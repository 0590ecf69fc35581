/* The on-disk cache of program binaries (opencl_cache.c). */
#ifndef LOCUS_OPENCL_CACHE_H
#define LOCUS_OPENCL_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a, 64 bits, continued from `hash` (start with
 * LOCUS_OPENCL_HASH_SEED). Not cryptographic: it names cache files and
 * detects damaged ones, it does not defend against forged ones (the cache
 * directory is the user's own). */
#define LOCUS_OPENCL_HASH_SEED 0xcbf29ce484222325ull
uint64_t locus__opencl_hash(uint64_t hash, const void *data, size_t bytes);

/* The cache directory: LOCUS_OPENCL_CACHE_DIR, else
 * $XDG_CACHE_HOME/locus/opencl, else $HOME/.cache/locus/opencl. Returns 0
 * when none can be named (no HOME). */
int locus__opencl_cache_dir(char *dir, size_t size);

typedef enum cache_read_result {
    CACHE_MISSING = 0, /* no file: build */
    CACHE_VALID = 1,   /* *binary holds the payload (caller frees) */
    CACHE_DAMAGED = 2, /* bad magic, length or hash: rebuild, overwrite */
} cache_read_result;

/* The checks of a cache file, on its bytes in memory (file_bytes of them,
 * the whole file): magic, payload length (not 0, and exactly the rest of
 * the file, so a truncated or extended file is refused) and payload hash.
 * No I/O, no allocation, no OpenCL: the fuzz target
 * (tests/fuzz/fuzz_program_cache.c) links it alone. CACHE_VALID points
 * *payload into file; CACHE_DAMAGED leaves it NULL and fills why. */
cache_read_result locus__opencl_cache_parse(const unsigned char *file,
                                            size_t file_bytes,
                                            const unsigned char **payload,
                                            size_t *payload_bytes, char *why,
                                            size_t why_size);

/* The same checks on the file at path, header first (a large file that is
 * not a cache file is not read whole). CACHE_VALID: *binary is the payload,
 * *bytes its length (caller frees); else *binary is NULL and why says why
 * (the error of fopen for CACHE_MISSING). */
cache_read_result locus__opencl_cache_read(const char *path,
                                           unsigned char **binary,
                                           size_t *bytes, char *why,
                                           size_t why_size);

/* Writes binary to path atomically: to a unique temporary file in the same
 * directory (made with its parents if missing), then rename(), so a reader
 * sees the old file, no file or the whole new one, never a part. Returns 0
 * on success, else -1 with why filled (the caller only logs it: a cache
 * that cannot be written costs a rebuild next time, nothing else). */
int locus__opencl_cache_write(const char *path, const unsigned char *binary,
                              size_t bytes, char *why, size_t why_size);

#endif
