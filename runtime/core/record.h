/* Per-operation records: their JSON form and the LOCUS_RECORD file. */
#ifndef LOCUS_RUNTIME_RECORD_H
#define LOCUS_RUNTIME_RECORD_H

#include <stdbool.h>

#include <locus/locus.h>

/* Appends the record as one JSON line to the context's record file, if any.
 * A failed write is logged, never fails the op whose result is good. */
void locus__record_append(locus_context *context, const locus_record *record);

/* While paused, this thread's ops append nothing to the record file: the
 * calibration's own runs are not the application's. */
void locus__record_pause(bool paused);
/* Copies a record into a caller's struct of possibly older, smaller size. */
void locus__record_copy_out(locus_record *destination,
                            const locus_record *source);

#endif
