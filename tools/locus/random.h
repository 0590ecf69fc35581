/* A small, fast pseudo-random generator (xoshiro256**, seeded through
 * splitmix64) for benchmark inputs: reproducible from a printed seed, and
 * the same on every platform, unlike rand(). */
#ifndef LOCUS_TOOL_RANDOM_H
#define LOCUS_TOOL_RANDOM_H

#include <stddef.h>
#include <stdint.h>

typedef struct random_state {
    uint64_t s[4];
} random_state;

static inline uint64_t random_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static inline void random_seed(random_state *state, uint64_t seed)
{
    for (int i = 0; i < 4; ++i) {
        state->s[i] = random_splitmix64(&seed);
    }
}

static inline uint64_t random_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t random_next(random_state *state)
{
    uint64_t *s = state->s;
    uint64_t result = random_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = random_rotl(s[3], 45);
    return result;
}

/* Uniform in [-1, 1): both signs, so sums cancel as real data does, and
 * 24 random bits, so every float is exactly representable. */
static inline float random_signed_unit(random_state *state)
{
    int32_t bits = (int32_t)(random_next(state) >> 40) - (1 << 23);
    return (float)bits * (1.0f / (float)(1 << 23));
}

/* Uniform in [0, bound), bound > 0 (the tiny modulo bias is harmless for
 * picking sample positions). */
static inline size_t random_below(random_state *state, size_t bound)
{
    return (size_t)(random_next(state) % bound);
}

static inline void random_fill(random_state *state, float *x, size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        x[i] = random_signed_unit(state);
    }
}

#endif
