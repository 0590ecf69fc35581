/* The calibration cache file: what one device measured, as text, and the
 * strict reader that refuses anything it did not write itself. */
#ifndef LOCUS_RUNTIME_CALIBRATION_FILE_H
#define LOCUS_RUNTIME_CALIBRATION_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <locus/backend.h>

/* What the cost model knows of one device: the figures a backend gives
 * as its nominal ones (locus_backend_rates, backend.h), measured. Times of
 * an op are modelled as fixed + work / rate, the two fitted from a small
 * and a large run, so that the middle sizes, where the choice between
 * devices is close, come out right. Host <-> device rates are 0 for a
 * device computing on host memory. */
typedef locus_backend_rates locus__rates;

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
