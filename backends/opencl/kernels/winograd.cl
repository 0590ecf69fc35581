/* Winograd F(2x2, 3x3) convolution: the three transforms (opencl_conv.c
 * runs them around one launch of gemm.cl's GEMM batched over the 16
 * positions). A port of the CUDA backend's kernels
 * (backends/cuda/conv_winograd.cu): the same matrices, layouts and order
 * of operations, so that scripts/winograd-error.py's accuracy argument
 * holds here too. With xi one of the 16 positions of a transformed 4x4
 * tile:
 *
 *   U[xi][k][c] = (G g_kc G^T)[xi]          filter, once per call
 *   V[xi][c][t] = (B^T d_ct B)[xi]          input tile t of channel c
 *   M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T)    the 16 GEMMs
 *   Y_kt = A^T m_kt A,  m_kt[xi] = M[xi][k][t]     a 2x2 output tile
 *
 * Tile t = (image, ty, tx) covers output rows 2 ty .. 2 ty + 1 and columns
 * 2 tx .. 2 tx + 1, and reads the 4x4 input patch from row 2 ty - ph,
 * column 2 tx - pw; whatever lies outside the image reads as zero. T
 * counts the tiles of the images of one chunk, image-major.
 *
 * One work-item per (channel, tile), (filter, channel) or (filter, tile),
 * consecutive work-items on consecutive t (or c), so that the 16 stores of
 * V and U and the 16 loads of M are each coalesced on a GPU; a grid-stride
 * loop covers what the host's capped range does not. All indices inside
 * a chunk are 32-bit (opencl_conv.c refuses shapes whose image's U, V or
 * M, or the chunk's, would reach 2^31 elements); the chunk's first image
 * comes as a 64-bit offset, as the CUDA host offsets its pointers.
 *
 * The same kernels serve both tunings: they have no barrier and no local
 * memory, so PoCL runs a work-group of them as one vectorizable loop.
 *
 * The transform matrices:
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 */

/* U = G g G^T for work-item i = k C + c: 9 loads, 16 stores strided by
 * K C (= total). */
__kernel void locus_winograd_filter(__global const float *restrict filter,
                                    uint total, __global float *restrict u)
{
    for (uint i = get_global_id(0); i < total; i += get_global_size(0)) {
        __global const float *g = filter + (size_t)i * 9;
        float t[4][3]; /* G g */
        for (int col = 0; col < 3; col++) {
            const float g0 = g[col], g1 = g[3 + col], g2 = g[6 + col];
            t[0][col] = g0;
            t[1][col] = 0.5f * (g0 + g1 + g2);
            t[2][col] = 0.5f * (g0 - g1 + g2);
            t[3][col] = g2;
        }
        for (int row = 0; row < 4; row++) {
            __global float *out = u + row * 4 * total + i;
            out[0] = t[row][0];
            out[total] = 0.5f * (t[row][0] + t[row][1] + t[row][2]);
            out[2 * total] = 0.5f * (t[row][0] - t[row][1] + t[row][2]);
            out[3 * total] = t[row][2];
        }
    }
}

/* The transforms B^T x and x B of one 4-vector, which are the same
 * combinations (B^T's rows). */
static inline void winograd_input_combine(float x0, float x1, float x2,
                                          float x3, float out[4])
{
    out[0] = x0 - x2;
    out[1] = x1 + x2;
    out[2] = x2 - x1;
    out[3] = x1 - x3;
}

/* V = B^T d B for work-item i = c T + t (T = tile_count), t over the
 * chunk's images, the first of which starts at x[x_off]. tiles: of one
 * image, tiles_w of them per tile row. */
__kernel void locus_winograd_input(__global const float *restrict x,
                                   ulong x_off, __global float *restrict v,
                                   int C, int H, int W, int ph, int pw,
                                   int tiles_w, int tiles, int tile_count)
{
    const uint total = (uint)C * (uint)tile_count;
    const __global float *chunk = x + x_off;
    for (uint i = get_global_id(0); i < total; i += get_global_size(0)) {
        const int c = (int)i / tile_count, t = (int)i - c * tile_count;
        const int image = t / tiles, in_image = t - image * tiles;
        const int ty = in_image / tiles_w, tx = in_image - ty * tiles_w;
        const int h0 = 2 * ty - ph, w0 = 2 * tx - pw;
        __global const float *plane =
            chunk + (size_t)image * (size_t)(C * H * W) + c * H * W;
        float d[4][4];
        for (int r = 0; r < 4; r++)
            for (int col = 0; col < 4; col++) {
                const int h = h0 + r, w = w0 + col;
                d[r][col] = (uint)h < (uint)H && (uint)w < (uint)W
                                ? plane[h * W + w]
                                : 0.0f;
            }
        float rows[4][4]; /* B^T d: rows[j] = combination j of d's rows */
        for (int col = 0; col < 4; col++) {
            float out[4];
            winograd_input_combine(d[0][col], d[1][col], d[2][col], d[3][col],
                                   out);
            for (int j = 0; j < 4; j++)
                rows[j][col] = out[j];
        }
        for (int j = 0; j < 4; j++) {
            float out[4];
            winograd_input_combine(rows[j][0], rows[j][1], rows[j][2],
                                   rows[j][3], out);
            for (int xi = 0; xi < 4; xi++)
                v[(j * 4 + xi) * total + i] = out[xi];
        }
    }
}

/* Y = A^T m A for work-item i = k T + t, M starting at m[m_off]; writes
 * the tile's outputs inside P x Q of the chunk, whose first image starts
 * at y[y_off]. pair (uniform): Q is even and the chunk's output 8-byte
 * aligned, so each output row of a tile is one float2 store (a tile then
 * never crosses Q). */
__kernel void locus_winograd_output(__global const float *restrict m,
                                    ulong m_off, __global float *restrict y,
                                    ulong y_off, int K, int P, int Q,
                                    int tiles_w, int tiles, int tile_count,
                                    int pair)
{
    const uint total = (uint)K * (uint)tile_count;
    const __global float *products = m + m_off;
    __global float *chunk = y + y_off;
    for (uint i = get_global_id(0); i < total; i += get_global_size(0)) {
        float xv[16];
        for (int xi = 0; xi < 16; xi++)
            xv[xi] = products[xi * total + i];
        float t[2][4]; /* A^T m */
        for (int col = 0; col < 4; col++) {
            t[0][col] = xv[col] + xv[4 + col] + xv[8 + col];
            t[1][col] = xv[4 + col] - xv[8 + col] - xv[12 + col];
        }
        const int k = (int)i / tile_count, tile = (int)i - k * tile_count;
        const int image = tile / tiles, in_image = tile - image * tiles;
        const int ty = in_image / tiles_w, tx = in_image - ty * tiles_w;
        const int p0 = 2 * ty, q0 = 2 * tx;
        __global float *out = chunk + (size_t)image * (size_t)(K * P * Q) +
                              (k * P + p0) * Q + q0;
        for (int row = 0; row < 2; row++) {
            if (p0 + row >= P)
                break;
            const float y0 = t[row][0] + t[row][1] + t[row][2];
            const float y1 = t[row][1] - t[row][2] - t[row][3];
            if (pair) {
                *(__global float2 *)(out + row * Q) = (float2)(y0, y1);
            } else {
                out[row * Q] = y0;
                if (q0 + 1 < Q)
                    out[row * Q + 1] = y1;
            }
        }
    }
}
