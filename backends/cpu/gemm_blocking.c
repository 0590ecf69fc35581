/* Cache blocking for the Goto/BLIS loop nest (gemm_block.h), from the
 * cache sizes hwloc reports:
 *  - kc: an MR x KC micro-panel of A is reused by every micro-kernel call
 *    of a sweep, so it should stay in L1 while B's micro-panels stream
 *    through: half of L1. Every kc steps each tile of C is read and
 *    written once more, so kc is no smaller than it must be: 384 on a
 *    48 KiB L1 (a smaller kc is measurably slower, larger ones no faster:
 *    docs/PERFORMANCE.md);
 *  - l2_cols: the KC x l2_cols part of the B block swept once per A
 *    micro-panel stays in the worker's share of L2; a quarter of it,
 *    since the A micro-panels and C's tiles pass through L2 too (a sweep
 *    over all of L2 is clearly slower, one of a single micro-panel a
 *    little: docs/PERFORMANCE.md);
 *  - mc: each worker's packed MC x KC block of A is read once per sweep,
 *    so it can live in L3: a quarter of the worker's share of L3, up to
 *    4096 rows (the larger block packs A in fewer, longer runs, which is
 *    a little faster);
 *  - nc: the packed KC x NC block of B is shared by a node's workers and
 *    read once per A block, so it should stay in L3 (half of it; L3 is
 *    per node or larger, and every worker of the node reads this block).
 * Caches the topology does not report get typical sizes. */
#include "gemm_block.h"

#define DEFAULT_L1 (32u << 10)
#define DEFAULT_L2 (256u << 10)
#define DEFAULT_L3 (8u << 20)

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

locus__gemm_blocking locus__gemm_blocking_for(size_t mr, size_t nr,
                                              size_t elem_size, size_t l1,
                                              size_t l2, int l2_sharing,
                                              size_t l3, int l3_sharing)
{
    if (l1 == 0)
        l1 = DEFAULT_L1;
    if (l2 == 0)
        l2 = DEFAULT_L2;
    if (l3 == 0)
        l3 = DEFAULT_L3;
    if (l2_sharing > 1)
        l2 /= (size_t)l2_sharing;
    size_t l3_share = l3_sharing > 1 ? l3 / (size_t)l3_sharing : l3;

    locus__gemm_blocking b;
    /* Multiples of 8 keep the kernels' unrolled k loops whole. */
    b.kc = clamp_size(l1 / 2 / (mr * elem_size) / 8 * 8, 128, 384);
    size_t panel_bytes = b.kc * elem_size;
    b.l2_cols = clamp_size(l2 / 4 / panel_bytes / nr * nr, nr, 8192 / nr * nr);
    b.mc = clamp_size(l3_share / 4 / panel_bytes / mr * mr, mr, 4096 / mr * mr);
    b.nc = clamp_size(l3 / 2 / panel_bytes / nr * nr, nr, 8192 / nr * nr);
    return b;
}

size_t locus__gemm_even_block(size_t total, size_t block, size_t unit)
{
    if (total <= block)
        return total;
    size_t blocks = (total + block - 1) / block;
    size_t even = (total + blocks - 1) / blocks;
    even = (even + unit - 1) / unit * unit;
    return even < block ? even : block;
}
