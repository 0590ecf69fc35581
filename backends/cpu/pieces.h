/* Pieces of a shared workspace that a compute job's workers prepare
 * themselves (the implicit GEMM's and the direct convolution's packed
 * filter, MEC's lowering shared by a team: conv_implicit.c says why not
 * in a job of its own). Each piece
 * has an atomic state: a worker claims a free piece and prepares it, then
 * waits for the pieces others claimed. A claimed piece is always being
 * prepared by a running worker that waits for nothing, so this cannot
 * deadlock, even where the pool runs the ranks one after another. */
#ifndef LOCUS_CPU_PIECES_H
#define LOCUS_CPU_PIECES_H

#include <stdatomic.h>
#include <stddef.h>
#include <threads.h>

enum { LOCUS__PIECE_FREE, LOCUS__PIECE_CLAIMED, LOCUS__PIECE_DONE };

/* Whether this worker won the piece (it must prepare it, then call
 * locus__piece_done). */
static inline int locus__piece_claim(atomic_int *state)
{
    int expected = LOCUS__PIECE_FREE;
    return atomic_load_explicit(state, memory_order_relaxed) ==
               LOCUS__PIECE_FREE &&
           atomic_compare_exchange_strong_explicit(
               state, &expected, LOCUS__PIECE_CLAIMED, memory_order_relaxed,
               memory_order_relaxed);
}

/* Publishes the prepared piece. */
static inline void locus__piece_done(atomic_int *state)
{
    atomic_store_explicit(state, LOCUS__PIECE_DONE, memory_order_release);
}

/* Waits until states[first..end) are all done. */
static inline void locus__pieces_wait(atomic_int *states, size_t first,
                                      size_t end)
{
    for (size_t i = first; i < end; i++)
        for (unsigned spin = 0;
             atomic_load_explicit(&states[i], memory_order_acquire) !=
             LOCUS__PIECE_DONE;
             spin++)
            if (spin >= 64)
                thrd_yield(); /* the preparer may have lost its core */
}

/* Claims and prepares the free pieces among states[first..first+count),
 * from first + from on cyclically (workers sharing the pieces start at
 * different ones, so they split them), calling prepare(context, piece)
 * for each piece won, then waits for the ones others claimed. */
static inline void locus__pieces_prepare(atomic_int *states, size_t first,
                                         size_t count, size_t from,
                                         void (*prepare)(const void *, size_t),
                                         const void *context)
{
    for (size_t n = 0, i = from; n < count;
         n++, i = i + 1 == count ? 0 : i + 1) {
        if (!locus__piece_claim(&states[first + i]))
            continue;
        prepare(context, first + i);
        locus__piece_done(&states[first + i]);
    }
    locus__pieces_wait(states, first, first + count);
}

#endif
