/* Cache blocking for the Goto/BLIS loop nest (gemm_block.h), from the
 * cache sizes hwloc reports:
 *  - kc: a KC x NR micro-panel of B is reused by every micro-kernel call
 *    of a macro-kernel column, so it should stay near L1; it is sized to
 *    all of L1 (the A micro-panel streaming through evicts a little of
 *    it, which L2 refills), not half: every kc steps each tile of C is
 *    read and written once more, and C's tiles (rows ldc apart) are the
 *    costly part. On a 2-core Xeon (48 KiB L1) n = 4096 ran in 509-519 ms
 *    at kc 192, 484-493 at 288 and 478-480 at 384; AVX2 (forced) was the
 *    same at 256 and 384;
 *  - mc: the packed MC x KC block of A is swept once per B micro-panel
 *    and should stay in the worker's share of L2 (half of it);
 *  - nc: the packed KC x NC block of B is shared by a node's workers and
 *    swept once per A block, so it should stay in L3 (half of it; L3 is
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

locus__sgemm_blocking locus__sgemm_blocking_for(const locus__cpu_isa *isa,
                                                size_t l1, size_t l2,
                                                int l2_sharing, size_t l3)
{
    size_t mr = isa->mr, nr = isa->nr;
    if (l1 == 0)
        l1 = DEFAULT_L1;
    if (l2 == 0)
        l2 = DEFAULT_L2;
    if (l3 == 0)
        l3 = DEFAULT_L3;
    if (l2_sharing > 1)
        l2 /= (size_t)l2_sharing;

    locus__sgemm_blocking b;
    /* Multiples of 8 keep the kernels' unrolled k loops whole. */
    b.kc = clamp_size(l1 / (nr * sizeof(float)) / 8 * 8, 128, 384);
    b.mc = clamp_size(l2 / 2 / (b.kc * sizeof(float)) / mr * mr, mr,
                      1024 / mr * mr);
    b.nc = clamp_size(l3 / 2 / (b.kc * sizeof(float)) / nr * nr, nr,
                      8192 / nr * nr);
    return b;
}

size_t locus__sgemm_even_block(size_t total, size_t block, size_t unit)
{
    if (total <= block)
        return total;
    size_t blocks = (total + block - 1) / block;
    size_t even = (total + blocks - 1) / blocks;
    even = (even + unit - 1) / unit * unit;
    return even < block ? even : block;
}
