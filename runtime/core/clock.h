/* The runtime's clock, on the ground floor. */
#ifndef LOCUS_RUNTIME_CLOCK_H
#define LOCUS_RUNTIME_CLOCK_H

/* The monotonic clock, in seconds: what records time ops with. */
double locus__now_seconds(void);

#endif
