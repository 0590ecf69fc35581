/*
 * Hopper primitives for the wgmma GEMM (gemm_wgmma.cu): mbarriers, the
 * bulk tensor copy (TMA), the shared-memory matrix descriptor and the
 * tf32 wgmma itself, each one PTX instruction in a function. wgmma and
 * setmaxnreg need the sm_90a target; this header is included only by
 * gemm_wgmma.cu, which meson.build compiles for sm_90a alone.
 */
#ifndef LOCUS_CUDA_GEMM_WGMMA_CUH
#define LOCUS_CUDA_GEMM_WGMMA_CUH

#include <cstdint>

#include <cuda.h> /* CUtensorMap, a type only: the module links no libcuda */

namespace locus_cuda
{

__device__ __forceinline__ uint32_t shared_address(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier ---- */

__device__ __forceinline__ void barrier_init(uint64_t *bar, unsigned count)
{
    asm volatile(
        "mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)),
        "r"(count)
        : "memory");
}

/* Makes the initialized barriers visible to the other threads and to the
 * async proxy (the copy engine completes transactions on them). */
__device__ __forceinline__ void barrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* One arrival that also announces `bytes` of copies to come: the phase
 * completes when the arrivals and the bytes are all in. */
__device__ __forceinline__ void barrier_arrive_expect(uint64_t *bar,
                                                      uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     shared_address(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void barrier_arrive(uint64_t *bar)
{
    asm volatile(
        "mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar))
        : "memory");
}

/* Waits until the phase of the given parity has completed. A fresh barrier
 * is in phase 0, so waiting for parity 1 returns at once: that is how the
 * producer's first pass over the empty barriers goes through. */
__device__ __forceinline__ void barrier_wait(uint64_t *bar, uint32_t parity)
{
    const uint32_t at = shared_address(bar);
    uint32_t done;
    do {
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n"
                     "}"
                     : "=r"(done)
                     : "r"(at), "r"(parity)
                     : "memory");
    } while (!done);
}

/* ---- bulk tensor copy ---- */

__device__ __forceinline__ void tensor_map_prefetch(const CUtensorMap *map)
{
    asm volatile(
        "prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map))
        : "memory");
}

/* Copies the box at (inner, outer) of a 2-D tensor map into shared memory
 * at `to`, completing `bytes` on bar. Out-of-range elements arrive as
 * zeros and still count toward the bytes. */
__device__ __forceinline__ void tensor_load_2d(void *to, const CUtensorMap *map,
                                               int inner, int outer,
                                               uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
        ".mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            shared_address(to)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer),
        "r"(shared_address(bar))
        : "memory");
}

/* ---- wgmma ---- */

/* The descriptor of a K-major tile in the 128-byte swizzle the copy
 * engine wrote: rows of 128 bytes (32 floats of k), 8-row groups 1024
 * bytes apart (the stride byte offset); the leading byte offset is unused
 * for swizzled K-major layouts (1 by convention). The tile must start on
 * 1024 bytes, as the swizzle pattern is a function of the address; the
 * k steps inside the 128-byte row are then plain start-address advances
 * (desc_advance). */
__device__ __forceinline__ uint64_t smem_descriptor(const void *tile)
{
    const uint64_t start = (shared_address(tile) & 0x3FFFF) >> 4;
    const uint64_t leading = 1, stride = 1024 >> 4, swizzle_128b = 1;
    return start | leading << 16 | stride << 32 | swizzle_128b << 62;
}

/* The descriptor `bytes` further (a multiple of 16) along the row. */
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes)
{
    return desc + (bytes >> 4);
}

/* wgmma.fence: orders this thread's earlier register accesses (the zeroed
 * accumulators) before the wgmma that reads them. */
__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Waits until at most Pending committed wgmma groups are in flight. */
template <int Pending> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

template <int Registers> __device__ __forceinline__ void registers_shrink()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

template <int Registers> __device__ __forceinline__ void registers_grow()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}

#define LOCUS_WGMMA_D4(i)                                                      \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define LOCUS_WGMMA_D16(i)                                                     \
    LOCUS_WGMMA_D4(i), LOCUS_WGMMA_D4(i + 4), LOCUS_WGMMA_D4(i + 8),           \
        LOCUS_WGMMA_D4(i + 12)

/* d (64 x 256, f32) += A (64 x 8, tf32) * B (8 x 256, tf32), both from
 * shared memory through their descriptors, B given as 256 K-major rows.
 * The warpgroup's thread (warp w, lane 4g + t) holds, for each n8 tile j,
 * d[4j..4j+3] = rows 16w + g, g, g + 8, g + 8 and columns 8j + 2t, +1, 2t,
 * +1. The tensor cores read only the tf32 bits of each float (the low 13
 * mantissa bits are ignored, a truncation). */
__device__ __forceinline__ void
wgmma_m64n256k8_tf32(float (&d)[128], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, "
                 "%8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, "
                 "%40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, "
                 "%56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, "
                 "%72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, "
                 "%88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, "
                 "%104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, "
                 "%120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, p, 1, 1;\n"
                 "}\n"
                 : LOCUS_WGMMA_D16(0), LOCUS_WGMMA_D16(16), LOCUS_WGMMA_D16(32),
                   LOCUS_WGMMA_D16(48), LOCUS_WGMMA_D16(64),
                   LOCUS_WGMMA_D16(80), LOCUS_WGMMA_D16(96),
                   LOCUS_WGMMA_D16(112)
                 : "l"(desc_a), "l"(desc_b), "r"(1)
                 : "memory");
}

#undef LOCUS_WGMMA_D16
#undef LOCUS_WGMMA_D4

} // namespace locus_cuda

#endif
