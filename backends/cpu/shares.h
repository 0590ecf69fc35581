/* Shares of a compute job's work that its workers run and steal (the
 * direct convolution's units, the implicit GEMM's micro-panel columns).
 * Each worker starts with an even, contiguous share and runs it from the
 * front, a piece of at most a quarter of what is left at a time; a worker
 * whose share is done takes half of the largest share left from its back.
 * Workers of one job differ in speed and start (other work on their
 * cores, a late wake-up), so an even static split ends with the slowest;
 * and an owner that took its whole share at once could not be helped
 * (docs/PERFORMANCE.md has the spread seen on the 16-core host). Which
 * worker runs a unit must never change what the unit computes: the callers'
 * results stay bitwise the same.
 *
 * A share is its range [front, back) in one word (front in the high
 * half), so that the owner taking from the front and a thief taking from
 * the back agree by one compare-and-swap; units are below 2^32. */
#ifndef LOCUS_CPU_SHARES_H
#define LOCUS_CPU_SHARES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct locus__share {
    _Alignas(64) atomic_uint_least64_t range;
} locus__share;

/* The most units a share may hold. */
#define LOCUS__SHARE_MAX_UNITS UINT32_MAX

static inline uint64_t locus__share_word(size_t front, size_t back)
{
    return (uint64_t)front << 32 | (uint64_t)back;
}

static inline void locus__share_init(locus__share *share, size_t front,
                                     size_t back)
{
    atomic_init(&share->range, locus__share_word(front, back));
}

/* Units left in a share. */
static inline size_t locus__share_left(locus__share *share)
{
    uint64_t word = atomic_load_explicit(&share->range, memory_order_relaxed);
    size_t front = (size_t)(word >> 32), back = (size_t)(word & 0xffffffffu);
    return back > front ? back - front : 0;
}

/* The part of what is left of its share an owner takes at most. */
#define LOCUS__SHARE_OWNER_PART 4

/* Takes units [*u0, *u1) from the front of a share (its owner: at most
 * `most`, and at most 1/LOCUS__SHARE_OWNER_PART of what is left, rounded
 * up) or from its back (a thief: half); *limit is where the taker's run
 * may go on to (the share's back for the owner, *u1 for a thief). Returns
 * 0 when the share is empty. */
static inline int locus__share_take(locus__share *share, int from_back,
                                    size_t most, size_t *u0, size_t *u1,
                                    size_t *limit)
{
    uint64_t word = atomic_load_explicit(&share->range, memory_order_relaxed);
    for (;;) {
        size_t front = (size_t)(word >> 32),
               back = (size_t)(word & 0xffffffffu);
        if (front >= back)
            return 0;
        size_t left = back - front,
               share_part = (left + LOCUS__SHARE_OWNER_PART - 1) /
                            LOCUS__SHARE_OWNER_PART;
        size_t count = from_back ? (left + 1) / 2
                                 : (most < share_part ? most : share_part);
        uint64_t next = from_back ? locus__share_word(front, back - count)
                                  : locus__share_word(front + count, back);
        if (atomic_compare_exchange_weak_explicit(&share->range, &word, next,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *u0 = from_back ? back - count : front;
            *u1 = *u0 + count;
            *limit = from_back ? *u1 : back;
            return 1;
        }
    }
}

/* The share of shares[first, end) with the most units left; -1 when all
 * are empty. */
static inline int locus__share_largest(locus__share *shares, int first, int end)
{
    int victim = -1;
    size_t most = 0;
    for (int r = first; r < end; r++) {
        size_t left = locus__share_left(&shares[r]);
        if (left > most) {
            most = left;
            victim = r;
        }
    }
    return victim;
}

#endif
