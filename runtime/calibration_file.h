/* The calibration cache file: what one device measured, as text, and the
 * strict reader that refuses anything it did not write itself. */
#ifndef LOCUS_RUNTIME_CALIBRATION_FILE_H
#define LOCUS_RUNTIME_CALIBRATION_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <locus/locus.h>

/* What the cost model knows of one device. Times of an op are modelled as
 * fixed + work / rate, the two fitted from a small and a large run, so that
 * the middle sizes, where the choice between devices is close, come out
 * right. Host <-> device rates are 0 for a device computing on host memory. */
typedef struct locus__rates {
    double launch_seconds;        /* the smallest op, end to end */
    double gemm_fixed_seconds;    /* gemm: time = fixed + flops / rate */
    double gemm_flops;            /* flop/s */
    double conv_fixed_seconds;    /* conv2d, likewise */
    double conv_flops;            /* flop/s */
    double reduce_bytes;          /* bytes/s read by a large reduce */
    double upload_pageable_bytes; /* host -> device from ordinary memory */
    double upload_pinned_bytes;   /* host -> device from pinned memory */
    double download_bytes;        /* device -> host into ordinary memory */
    double transfer_seconds;      /* the latency of one small copy */
    double download_pinned_bytes; /* device -> host into pinned memory */
    /* What an op on the worker pool pays on top when the workers are
     * asleep (idle past their spin): waking them, from deep idle states.
     * 0 for a device whose ops do not run on the pool. */
    double wake_seconds;
} locus__rates;

/* FNV-1a over [text, text + length): the file's checksum, and the hash
 * that names a key's file. Enough to tell a damaged file from a good one;
 * nobody forges a calibration cache to gain anything. */
uint64_t locus__calibration_hash(const char *text, size_t length);

/* Longest key the file carries: host, device, driver and layout version. */
#define LOCUS__CALIBRATION_KEY_MAX 512

/* Writes rates and key as the file's text; returns the length needed, as
 * snprintf does. */
size_t locus__calibration_format(const locus__rates *rates, const char *key,
                                 char *text, size_t capacity);

/* Reads text (not NUL-terminated; exactly length bytes) written by
 * locus__calibration_format for expected_key. Anything else (another key,
 * a missing, repeated, unknown, non-finite or out-of-range field, a bad
 * checksum, trailing bytes) fails with LOCUS_ERROR_INVALID_ARGUMENT and why
 * in the error detail; out is then unchanged. */
locus_status locus__calibration_parse(const char *text, size_t length,
                                      const char *expected_key,
                                      locus__rates *out);

#endif
