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

/* Reads and checks path's header: magic, payload length (must match the
 * file's size exactly, so a truncated file is refused) and payload hash. */
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
