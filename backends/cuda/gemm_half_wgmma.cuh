/*
 * The half-precision wgmma of the Hopper half GEMM (gemm_half_wgmma.cu):
 * m64n256k16 with f32 accumulators and bf16 or f16 operands, each read
 * from shared memory through a descriptor, K-major (gemm_wgmma.cuh's
 * smem_descriptor: rows of 128 bytes, here 64 elements of k) or MN-major
 * (smem_descriptor_mn: rows of 64 elements of m or n). sm_90a only, like
 * gemm_wgmma.cuh.
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
 * instruction's type suffix differs. The last two immediates say whether
 * A and B are MN-major (1, "transposed") or K-major (0); only 16-bit
 * types may be MN-major. */
#define LOCUS_HALF_WGMMA(TYPE)                                                 \
    asm volatile(                                                              \
        "{\n"                                                                  \
        ".reg .pred p;\n"                                                      \
        "setp.ne.b32 p, %130, 0;\n"                                            \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"      \
        "%0, %1, %2, %3, %4, %5, %6, %7, "                                     \
        "%8, %9, %10, %11, %12, %13, %14, %15, "                               \
        "%16, %17, %18, %19, %20, %21, %22, %23, "                             \
        "%24, %25, %26, %27, %28, %29, %30, %31, "                             \
        "%32, %33, %34, %35, %36, %37, %38, %39, "                             \
        "%40, %41, %42, %43, %44, %45, %46, %47, "                             \
        "%48, %49, %50, %51, %52, %53, %54, %55, "                             \
        "%56, %57, %58, %59, %60, %61, %62, %63, "                             \
        "%64, %65, %66, %67, %68, %69, %70, %71, "                             \
        "%72, %73, %74, %75, %76, %77, %78, %79, "                             \
        "%80, %81, %82, %83, %84, %85, %86, %87, "                             \
        "%88, %89, %90, %91, %92, %93, %94, %95, "                             \
        "%96, %97, %98, %99, %100, %101, %102, %103, "                         \
        "%104, %105, %106, %107, %108, %109, %110, %111, "                     \
        "%112, %113, %114, %115, %116, %117, %118, %119, "                     \
        "%120, %121, %122, %123, %124, %125, %126, %127}, "                    \
        "%128, %129, p, 1, 1, %131, %132;\n"                                   \
        "}\n"                                                                  \
        : LOCUS_HALF_D16(0), LOCUS_HALF_D16(16), LOCUS_HALF_D16(32),           \
          LOCUS_HALF_D16(48), LOCUS_HALF_D16(64), LOCUS_HALF_D16(80),          \
          LOCUS_HALF_D16(96), LOCUS_HALF_D16(112)                              \
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(MnA ? 1 : 0), "n"(MnB ? 1 : 0) \
        : "memory")

/* d (64 x 256, f32) += A (64 x 16) * B (16 x 256), each K-major or (MnA,
 * MnB) MN-major as its descriptor describes; d's layout in the warpgroup
 * is the tf32 wgmma's (gemm_wgmma.cuh): thread (warp w, lane 4g + t)
 * holds, for each n8 tile j, d[4j..4j+3] = rows 16w + g, g, g + 8, g + 8
 * and columns 8j + 2t, +1, 2t, +1. */
template <bool Bf16, bool MnA, bool MnB>
__device__ __forceinline__ void
wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b)
{
    if constexpr (Bf16)
        LOCUS_HALF_WGMMA("bf16");
    else
        LOCUS_HALF_WGMMA("f16");
}

#undef LOCUS_HALF_WGMMA

/* The descriptor of an MN-major tile in the 128-byte swizzle, as the copy
 * engine writes a box of 64 MN elements (one 128-byte row) by 64 k rows:
 * CUTLASS's canonical MN-major SW128 layout ((8 x 8 elements, m), (8, k))
 * : ((1, 8, leading), (64, stride)) in 16-bit elements. Each 128-byte row
 * holds 64 consecutive MN elements of one k; 8 such rows make a 1024-byte
 * swizzle atom. The stride byte offset steps k by 8 rows (the next atom
 * down the box, 1024 bytes); the leading byte offset steps MN by 64 (the
 * next box, `mn_step` bytes). The tile must start on 1024 bytes; k steps
 * of 16 are then 2048-byte advances, still on the swizzle's period. */
__device__ __forceinline__ uint64_t smem_descriptor_mn(const void *tile,
                                                       uint32_t mn_step)
{
    const uint64_t start = (shared_address(tile) & 0x3FFFF) >> 4;
    const uint64_t leading = mn_step >> 4, stride = 1024 >> 4;
    const uint64_t swizzle_128b = 1;
    return start | leading << 16 | stride << 32 | swizzle_128b << 62;
}

#undef LOCUS_HALF_D16
#undef LOCUS_HALF_D4

} // namespace locus_cuda

#endif
