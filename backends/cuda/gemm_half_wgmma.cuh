/*
 * The half-precision wgmma of the Hopper half GEMM (gemm_half_wgmma.cu):
 * m64n256k16 with f32 accumulators and bf16 or f16 operands, both read
 * K-major from shared memory through descriptors (gemm_wgmma.cuh's
 * smem_descriptor: rows of 128 bytes, here 64 elements of k). sm_90a only,
 * like gemm_wgmma.cuh.
 */
#ifndef LOCUS_CUDA_GEMM_HALF_WGMMA_CUH
#define LOCUS_CUDA_GEMM_HALF_WGMMA_CUH

#include <cstdint>

#include "gemm_wgmma.cuh"

namespace locus_cuda
{

#define LOCUS_HALF_D4(i)                                                       \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define LOCUS_HALF_D16(i)                                                      \
    LOCUS_HALF_D4(i), LOCUS_HALF_D4(i + 4), LOCUS_HALF_D4(i + 8),              \
        LOCUS_HALF_D4(i + 12)

/* The operand list and registers are the same for both types; only the
 * instruction's type suffix differs. The last two immediates (transpose
 * A, B) are 0: both operands are K-major. */
#define LOCUS_HALF_WGMMA(TYPE)                                                 \
    asm volatile("{\n"                                                         \
                 ".reg .pred p;\n"                                             \
                 "setp.ne.b32 p, %130, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE  \
                 " {"                                                          \
                 "%0, %1, %2, %3, %4, %5, %6, %7, "                            \
                 "%8, %9, %10, %11, %12, %13, %14, %15, "                      \
                 "%16, %17, %18, %19, %20, %21, %22, %23, "                    \
                 "%24, %25, %26, %27, %28, %29, %30, %31, "                    \
                 "%32, %33, %34, %35, %36, %37, %38, %39, "                    \
                 "%40, %41, %42, %43, %44, %45, %46, %47, "                    \
                 "%48, %49, %50, %51, %52, %53, %54, %55, "                    \
                 "%56, %57, %58, %59, %60, %61, %62, %63, "                    \
                 "%64, %65, %66, %67, %68, %69, %70, %71, "                    \
                 "%72, %73, %74, %75, %76, %77, %78, %79, "                    \
                 "%80, %81, %82, %83, %84, %85, %86, %87, "                    \
                 "%88, %89, %90, %91, %92, %93, %94, %95, "                    \
                 "%96, %97, %98, %99, %100, %101, %102, %103, "                \
                 "%104, %105, %106, %107, %108, %109, %110, %111, "            \
                 "%112, %113, %114, %115, %116, %117, %118, %119, "            \
                 "%120, %121, %122, %123, %124, %125, %126, %127}, "           \
                 "%128, %129, p, 1, 1, 0, 0;\n"                                \
                 "}\n"                                                         \
                 : LOCUS_HALF_D16(0), LOCUS_HALF_D16(16), LOCUS_HALF_D16(32),  \
                   LOCUS_HALF_D16(48), LOCUS_HALF_D16(64), LOCUS_HALF_D16(80), \
                   LOCUS_HALF_D16(96), LOCUS_HALF_D16(112)                     \
                 : "l"(desc_a), "l"(desc_b), "r"(1)                            \
                 : "memory")

/* d (64 x 256, f32) += A (64 x 16) * B (16 x 256), B given as 256 K-major
 * rows; d's layout in the warpgroup is the tf32 wgmma's (gemm_wgmma.cuh):
 * thread (warp w, lane 4g + t) holds, for each n8 tile j, d[4j..4j+3] =
 * rows 16w + g, g, g + 8, g + 8 and columns 8j + 2t, +1, 2t, +1. */
template <bool Bf16>
__device__ __forceinline__ void
wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b)
{
    if constexpr (Bf16)
        LOCUS_HALF_WGMMA("bf16");
    else
        LOCUS_HALF_WGMMA("f16");
}

#undef LOCUS_HALF_WGMMA

/* ---- clusters of two CTAs (the multicast variant) ---- */

__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

/* Every thread of every CTA of the cluster; orders the barrier inits
 * before the peer's copies and arrivals, and keeps a CTA alive until its
 * peer no longer writes into it. */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;" ::
                     : "memory");
}

/* One arrival on the barrier at the same offset in CTA `cta` of the
 * cluster (this one or its peer). */
__device__ __forceinline__ void barrier_arrive_cluster(uint64_t *bar,
                                                       uint32_t cta)
{
    asm volatile("{\n"
                 ".reg .b32 remote;\n"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, "
                 "[remote];\n"
                 "}" ::"r"(shared_address(bar)),
                 "r"(cta)
                 : "memory");
}

/* tensor_load_2d into the same offset of every CTA in `mask`, each
 * completing the bytes on its own barrier at bar's offset. */
__device__ __forceinline__ void
tensor_load_2d_multicast(void *to, const CUtensorMap *map, int inner, int outer,
                         uint64_t *bar, uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                 ".mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(shared_address(to)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer),
                 "r"(shared_address(bar)), "h"(mask)
                 : "memory");
}
#undef LOCUS_HALF_D16
#undef LOCUS_HALF_D4

} // namespace locus_cuda

#endif
