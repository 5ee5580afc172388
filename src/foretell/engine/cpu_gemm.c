/* foretell's fp32 GEMM for the few rows of a decode or verify pass on a CPU (see cpu_gemm.py).
 *
 * y[m, n] = sum_k x[m, k] * w[n, k] (+ b[n]): x (M, K) and w (N, K) row-major, as torch's F.linear.
 * The weights are read once per call, 4 rows at a time, and each such block is applied to the input rows
 * 4 at a time while it sits in L1; the next weights are prefetched, within a row and, a share per block of
 * each input tile, the next group of rows (prefetch_part). Each output is one reduction over K in a fixed order,
 * whatever M: a row's result does not depend on the other rows of the call. A full tile's 16 sums are taken side
 * by side (store_sums16), in the same order as one horizontal sum, so the same bits.
 * foretell_linear_bf16 reads weights stored as bf16 (half the bytes of a memory-bound pass) and widens them
 * exactly to fp32 in registers (a bf16 is the top half of an fp32): same arithmetic, same bits as
 * foretell_linear on the widened weights. With more input rows than one tile, each block of 4 weight rows is
 * widened once into a per-thread buffer that fits L1, and the fp32 tiles read it from there (with longer rows
 * the tiles widen as they read: an L2-sized buffer was slower).
 * foretell_linear_bf16dot (only where the compiler targets AVX512-BF16) takes bf16 inputs and bf16 weights and
 * multiplies them with VDPBF16PS: 32 products a vector per instruction, accumulated in fp32, twice the work of
 * an fp32 FMA, for bf16 models on CPUs that compute bf16 natively. Its rows are independent too (one fixed
 * sequence of instructions per output, whatever M), but its sums round differently from the fp32 kernels'.
 * Every linear takes a last argument rnd: nonzero stores each output rounded to the nearest bf16 (ties to even,
 * torch's conversion) but kept as an fp32, so a bf16 model's output head writes its logits once, in their final
 * values, instead of an fp32 result, a bf16 copy of it and an fp32 copy of that.
 * Built by cpu_gemm.py with the machine's C compiler (-O3 -march=native -fopenmp, torch's libgomp).
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned short bf16; /* the top 16 bits of an fp32 */

/* f rounded to the nearest bf16, ties to even (torch's float -> bfloat16), as an fp32; NaN stays NaN */
static inline float round_bf16(float f) {
    unsigned int u;
    __builtin_memcpy(&u, &f, sizeof u);
    if (f == f) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    __builtin_memcpy(&f, &u, sizeof u);
    return f;
}

#if defined(__AVX512F__)
#define VW 16
typedef __m512 vec;
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
static inline float hsum(vec v) { return _mm512_reduce_add_ps(v); }
static inline vec vload_tail(const float *p, int n) { return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p); }
static inline vec widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
static inline vec bload(const bf16 *p) { return widen(_mm256_loadu_si256((const __m256i *)p)); }
static inline vec bload_tail(const bf16 *p, int n) { return widen(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p)); }
static inline void vstore(float *p, vec v) { _mm512_storeu_ps(p, v); }
#elif defined(__AVX2__) && defined(__FMA__)
#define VW 8
typedef __m256 vec;
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static inline float hsum(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline vec vload_tail(const float *p, int n) {
    const int idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_loadu_si256((const __m256i *)idx));
    return _mm256_maskload_ps(p, m);
}
static inline vec widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
static inline vec bload(const bf16 *p) { return widen(_mm_loadu_si128((const __m128i *)p)); }
static inline vec bload_tail(const bf16 *p, int n) {
    bf16 t[8] = {0};
    for (int i = 0; i < n; i++) t[i] = p[i];
    return bload(t);
}
static inline void vstore(float *p, vec v) { _mm256_storeu_ps(p, v); }
#else
#error "foretell's CPU GEMM needs AVX2 + FMA or AVX-512"
#endif

enum { GGUF_Q8_0 = 8, GGUF_Q5_0 = 6, GGUF_Q4_K = 12 }; /* GGUF block formats (type ids) */
/* bytes and values of a format's block; 0 for a format this file does not decode */
static inline int q_block_bytes(int fmt) {
    return fmt == GGUF_Q8_0 ? 34 : fmt == GGUF_Q5_0 ? 22 : fmt == GGUF_Q4_K ? 144 : 0;
}
static inline int q_block_values(int fmt) { return fmt == GGUF_Q4_K ? 256 : 32; }

#if defined(__F16C__)
/* the fp16 at p as a float (exact) */
static inline float half1(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }
#endif
/* unaligned little-endian words */
static inline uint16_t load_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t load_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t load_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
#define NB 4         /* weight rows per block */
#define MB 4         /* input rows per tile */

#if defined(__AVX512F__)
#define SUMS16 (NB * MB == 16)
/* The sums of a tile's 16 accumulators a[4 i + j] (weight row i, input row j) into y[j N + i] (+ b[i]; rnd as in
 * round_bf16), rows j < mb. Each sum is hsum's tree of additions (lanes l + l+8, then + l+4, + l+2, + l+1), so the
 * same bits, but the 16 trees run side by side on transposed vectors: 15 additions and 30 shuffles instead of
 * 16 horizontal sums (~130 instructions, against ~670 loads and products in a K = 896 bf16 tile). */
static inline void store_sums16(const vec *a, int mb, float *y, const float *b, int N, int rnd) {
    vec s[8], u[4], w[2];
    for (int p = 0; p < 8; p++) /* [a_2p, a_2p+1]: 8 lanes each, l + l+8 */
        s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int q = 0; q < 4; q++) /* 128-bit lane c: a_4q+c, 4 lanes, + l+4 */
        u[q] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * q], s[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(s[2 * q], s[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int r = 0; r < 2; r++) /* lane c: a_8r+c and a_8r+4+c, 2 lanes each, + l+2 */
        w[r] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * r], u[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(u[2 * r], u[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    vec t = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)), /* lane c: a_c, a_4+c, a_8+c, a_12+c */
                          _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    if (b) t = _mm512_add_ps(t, _mm512_broadcast_f32x4(_mm_loadu_ps(b)));
    if (rnd) { /* round_bf16 on every lane */
        __m512i v = _mm512_castps_si512(t);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
        __m512i r16 = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(0x7fff)), lsb),
                                       _mm512_set1_epi32((int)0xffff0000u));
        t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, t, _CMP_ORD_Q), t, _mm512_castsi512_ps(r16));
    }
    for (int j = 0; j < mb; j++) _mm_storeu_ps(y + (size_t)j * N, j == 0 ? _mm512_castps512_ps128(t)
                                                : j == 1 ? _mm512_extractf32x4_ps(t, 1)
                                                : j == 2 ? _mm512_extractf32x4_ps(t, 2) : _mm512_extractf32x4_ps(t, 3));
}
#else
#define SUMS16 0
static inline void store_sums16(const vec *a, int mb, float *y, const float *b, int N, int rnd) {
    (void)a, (void)mb, (void)y, (void)b, (void)N, (void)rnd;
}
#endif
#define PREFETCH_BYTES 2048 /* ahead in each weight row */
#define WIDE_MAX 32768      /* bytes of widened weights kept per thread */
#define PREFETCH_SHARE_MAX 32768 /* bytes of the next weights prefetched at most in one share */

/* a tile's sums into y[j N + i] (+ b[i]; rnd as in round_bf16): side by side by store_sums16 (the same bits) for
 * a full tile where sums is set, else one horizontal sum each */
static inline __attribute__((always_inline)) void store_tile(vec acc[NB][MB], int nb, int mb, float *y,
                                                             const float *b, int N, int rnd, int sums) {
    if (sums && SUMS16 && nb == NB) {
        store_sums16(&acc[0][0], mb, y, b, N, rnd);
        return;
    }
    for (int j = 0; j < mb; j++)
        for (int i = 0; i < nb; i++) {
            float v = hsum(acc[i][j]) + (b ? b[i] : 0.0f);
            y[(size_t)j * N + i] = rnd ? round_bf16(v) : v;
        }
}

/* nb weight rows x mb input rows; constant nb, mb at each call site, so the loops unroll into registers.
 * XT / WT are the inputs' / weights' types, WV the register type of a weight (and input) vector, STEP the values
 * one holds; WLOAD / XLOAD (and _TAIL: the first n, zeros after) read one, MADD(acc, w, x) accumulates their
 * products into fp32 lanes; PF: prefetch the weights ahead; SUMS: a full tile's sums by store_sums16 (same bits). */
#define DEFINE_TILE(NAME, XT, WT, WV, STEP, WLOAD, WLOAD_TAIL, XLOAD, XLOAD_TAIL, MADD, PF, SUMS)             \
static inline __attribute__((always_inline)) void NAME(const XT *x, const WT *w, float *y, const float *b,    \
                                                       const int nb, const int mb, int K, int N, int rnd) {   \
    vec acc[NB][MB];                                                                                          \
    for (int i = 0; i < NB; i++)                                                                              \
        for (int j = 0; j < MB; j++) acc[i][j] = VZERO();                                                     \
    int k = 0;                                                                                                \
    for (; k + STEP <= K; k += STEP) {                                                                        \
        WV wv[NB];                                                                                            \
        for (int i = 0; i < nb; i++) {                                                                        \
            wv[i] = WLOAD(w + (size_t)i * K + k);                                                             \
            if (PF) _mm_prefetch((const char *)(w + (size_t)i * K + k) + PREFETCH_BYTES, _MM_HINT_T0);        \
        }                                                                                                     \
        for (int j = 0; j < mb; j++) {                                                                        \
            WV u = XLOAD(x + (size_t)j * K + k);                                                              \
            for (int i = 0; i < nb; i++) acc[i][j] = MADD(acc[i][j], wv[i], u);                               \
        }                                                                                                     \
    }                                                                                                         \
    if (k < K) {                                                                                              \
        WV wv[NB];                                                                                            \
        for (int i = 0; i < nb; i++) wv[i] = WLOAD_TAIL(w + (size_t)i * K + k, K - k);                        \
        for (int j = 0; j < mb; j++) {                                                                        \
            WV u = XLOAD_TAIL(x + (size_t)j * K + k, K - k);                                                  \
            for (int i = 0; i < nb; i++) acc[i][j] = MADD(acc[i][j], wv[i], u);                               \
        }                                                                                                     \
    }                                                                                                         \
    store_tile(acc, nb, mb, y, b, N, rnd, SUMS);                                                              \
}                                                                                                             \
                                                                                                              \
static void NAME##_rows(const XT *x, const WT *w, float *y, const float *b, int nb, int mb, int K, int N,     \
                        int rnd) {                                                                            \
    if (nb == NB) {                                                                                           \
        switch (mb) {                                                                                         \
        case 4: NAME(x, w, y, b, NB, 4, K, N, rnd); return;                                                   \
        case 3: NAME(x, w, y, b, NB, 3, K, N, rnd); return;                                                   \
        case 2: NAME(x, w, y, b, NB, 2, K, N, rnd); return;                                                   \
        default: NAME(x, w, y, b, NB, 1, K, N, rnd); return;                                                  \
        }                                                                                                     \
    }                                                                                                         \
    for (int i = 0; i < nb; i++) /* the last weight rows of a matrix whose N is not a multiple of NB */      \
        for (int j = 0; j < mb; j++)                                                                          \
            NAME(x + (size_t)j * K, w + (size_t)i * K, y + (size_t)j * N + i, b ? b + i : 0, 1, 1, K, N, rnd); \
}

/* y = x w^T (+ b) over every block of NB weight rows and tile of MB input rows; a thread takes GROUP blocks at a
 * time and runs each input tile through all of them while it sits in L1 (with many input rows, reading the
 * inputs once per block, not once per group, made the pass L2-bound) */
#define GROUP 4

/* Prefetch into L2 share `part` of `parts` of the `bytes` at p: a thread's next group of weight rows, a share
 * before each block of each input tile of the current group, so that they arrive while those compute instead of
 * stalling the first tile on memory, in shares small enough not to crowd out the current rows' own loads.
 * Cold weights, bf16, 2-core AMD EPYC (Zen 4), no prefetch -> a share per tile -> a share per block and tile: the
 * 0.5B's head 11.4 -> 10.3 -> 8.5 ms for 1 row, 22.2 -> 17.6 -> 13.9 for 16, 77 -> 69 -> 69 for 93; its 4864 x 896
 * MLP matrix 0.38 -> 0.35 -> 0.30, 0.70 -> 0.59 -> 0.45, 2.47 -> 2.22 -> 2.23. On an Intel Xeon (AMX host, 2 cores)
 * a share per tile made one row slower (the head 9.5 -> 10.8 ms); a share per block is near no prefetch there
 * (two rounds: 9.5 / 11.9 without, 10.2 / 10.5 with) and the fastest at 16 rows (33.8 -> 29.8 ms)
 * (benchmarks/results/engine-2026-11-26-epyc-prefetch-spread). */
static inline void prefetch_part(const void *p, size_t bytes, int part, int parts) {
    size_t share = (bytes / parts + 63) / 64 * 64, o = (size_t)part * share, end = o + share < bytes ? o + share : bytes;
    if (share > PREFETCH_SHARE_MAX) return; /* one burst of more slowed a row through long weight rows */
    for (; o < end; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T1);
}
#define DEFINE_LINEAR(NAME, XT, WT, TILE)                                                                     \
void NAME(const XT *x, const WT *w, const float *b, float *y, int M, int N, int K, int threads, int rnd) {   \
    int blocks = (N + NB - 1) / NB, groups = (blocks + GROUP - 1) / GROUP;                                    \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                                         \
    for (int grp = 0; grp < groups; grp++) {                                                                  \
        int last = (grp + 1) * GROUP < blocks ? (grp + 1) * GROUP : blocks;                                   \
        int rows = N - last * NB < GROUP * NB ? N - last * NB : GROUP * NB; /* the next group's, if any */    \
        int own = last - grp * GROUP; /* this group's blocks: a share of the next before each, each tile */ \
        for (int m0 = 0; m0 < M; m0 += MB) {                                                                  \
            int mb = M - m0 < MB ? M - m0 : MB;                                                               \
            for (int blk = grp * GROUP; blk < last; blk++) {                                                  \
                int n0 = blk * NB, nb = N - n0 < NB ? N - n0 : NB;                                            \
                prefetch_part(w + (size_t)last * NB * K, rows > 0 ? (size_t)rows * K * sizeof(WT) : 0,         \
                              m0 / MB * own + blk - grp * GROUP, (M + MB - 1) / MB * own);                    \
                TILE##_rows(x + (size_t)m0 * K, w + (size_t)n0 * K, y + (size_t)m0 * N + n0, b ? b + n0 : 0,  \
                            nb, mb, K, N, rnd);                                                               \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
}

#define FMA_INTO(acc, w, x) VFMA(w, x, acc)
DEFINE_TILE(tile_f32, float, float, vec, VW, VLOAD, vload_tail, VLOAD, vload_tail, FMA_INTO, 1, 1)
DEFINE_TILE(tile_bf16, float, bf16, vec, VW, bload, bload_tail, VLOAD, vload_tail, FMA_INTO, 1, 0) /* long rows: hsum measured ~2% faster */
DEFINE_TILE(tile_hot, float, float, vec, VW, VLOAD, vload_tail, VLOAD, vload_tail, FMA_INTO, 0, 1) /* weights in cache (a widened block) */

DEFINE_LINEAR(foretell_linear, float, float, tile_f32)

/* the same product with bf16 weights; bit for bit foretell_linear on the weights widened to fp32 */
void foretell_linear_bf16(const float *x, const bf16 *w, const float *b, float *y, int M, int N, int K, int threads,
                          int rnd) {
    int blocks = (N + NB - 1) / NB;
    #pragma omp parallel num_threads(threads)
    {
        size_t bytes = ((size_t)NB * K * sizeof(float) + 63) / 64 * 64;
        float *wide = M > MB && bytes <= WIDE_MAX ? aligned_alloc(64, bytes) : NULL;
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int n0 = blk * NB, nb = N - n0 < NB ? N - n0 : NB;
            const bf16 *wb = w + (size_t)n0 * K;
            if (wide) { /* widen the block once, then run the fp32 tiles on it */
                int k = 0;
                for (; k + VW <= nb * K; k += VW) vstore(wide + k, bload(wb + k));
                for (; k < nb * K; k++) {
                    unsigned int u = (unsigned int)wb[k] << 16;
                    __builtin_memcpy(wide + k, &u, sizeof u);
                }
            }
            int next = N - (n0 + NB) < NB ? N - (n0 + NB) : NB; /* the next block's rows, if any */
            for (int m0 = 0; m0 < M; m0 += MB) {
                int mb = M - m0 < MB ? M - m0 : MB;
                if (wide || M <= MB) /* rows too long to widen: the tiles' own prefetch did better alone */
                    prefetch_part(wb + (size_t)NB * K, next > 0 ? (size_t)next * K * sizeof(bf16) : 0, m0 / MB,
                                  (M + MB - 1) / MB);
                const float *xm = x + (size_t)m0 * K;
                float *ym = y + (size_t)m0 * N + n0;
                if (wide)
                    tile_hot_rows(xm, wide, ym, b ? b + n0 : 0, nb, mb, K, N, rnd);
                else
                    tile_bf16_rows(xm, wb, ym, b ? b + n0 : 0, nb, mb, K, N, rnd);
            }
        }
        free(wide);
    }
}

#if defined(__AVX512BF16__)
/* bf16 x bf16 -> fp32 on VDPBF16PS, 32 values a vector; past K zeros on both sides (0 * 0 adds nothing) */
static inline __m512bh bhload(const bf16 *p) { return (__m512bh)_mm512_loadu_si512((const void *)p); }
static inline __m512bh bhload_tail(const bf16 *p, int n) {
    return (__m512bh)_mm512_maskz_loadu_epi16((__mmask32)((1ull << n) - 1), p);
}
#define DOT_INTO(acc, w, x) _mm512_dpbf16_ps(acc, w, x)
DEFINE_TILE(tile_dot, bf16, bf16, __m512bh, 32, bhload, bhload_tail, bhload, bhload_tail, DOT_INTO, 1, 1)
DEFINE_LINEAR(foretell_linear_bf16dot, bf16, bf16, tile_dot)

/* ---- weights read in their GGUF blocks (a model converted from a quantized GGUF file) ----
 * foretell_linear_q: y = x w^T (+ b) with bf16 inputs and w in one of GGUF's block formats (Q8_0, Q5_0, Q4_K),
 * rows of K values each (K a multiple of the format's block). A thread decodes a block of NB weight rows into
 * bf16 in a buffer of its own, then runs tile_dot on it exactly as foretell_linear_bf16dot runs on stored bf16
 * weights; with one input tile and 32-value blocks (Q5_0, Q8_0) each block is decoded into a register as the
 * tile reaches it instead (the same products in the same order, without the store and load: the 0.5B's head
 * 5.7 -> 5.0 ms for one row on a 2-core AMD EPYC). Each value decodes to the fp32 that GGUF's reference decoder (gguf-py, ggml) computes (its products
 * are exact in fp32), rounded to the nearest bf16 as torch's conversion rounds: a model whose bf16 weights were
 * converted from these blocks gets the same bits from 0.56-1.06 bytes a weight instead of 2. Decoding costs
 * about what reading the bf16 weights saves beyond one input tile, so the engine uses it for passes of up to 4
 * rows (a decode step, short verify passes) and the bf16 weights for longer ones. Q6_K is not decoded: its
 * 6-bit values took longer to put together than its bf16 weights took to read (2-core AMD EPYC). */
static inline __m512i bf16x32(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }
static inline __m512 scaled(__m512i q, float s) { return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(s)); }

/* one block of 32 values (34 bytes): fp16 d, int8 q[32]; w = d q */
static inline __m512i q8_0_values(const uint8_t *p) {
    float d = half1(p);
    __m512i lo = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)));
    __m512i hi = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 18)));
    return bf16x32(scaled(lo, d), scaled(hi, d));
}
static inline void dq_q8_0(const uint8_t *p, bf16 *out) { _mm512_storeu_si512(out, q8_0_values(p)); }
/* one block of 32 values (22 bytes): fp16 d, 32 high bits, 16 bytes of low nibbles (values j and j + 16);
 * w = d (q - 16): the block's 32 possible values are computed once as a table, and each value's 5-bit q picks
 * its entry (VPERMW) */
static inline __m512i q5_0_values(const uint8_t *p) {
    const __m512 lo16 = _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1);
    const __m512 hi16 = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0x0004000400040004,
                                            0x0004000400040004, 0, 0, 0, 0);
    __m512 d = _mm512_set1_ps(half1(p));
    __m512i table = bf16x32(_mm512_mul_ps(lo16, d), _mm512_mul_ps(hi16, d));
    uint32_t qh;
    memcpy(&qh, p + 2, 4);
    __m128i qs = _mm_loadu_si128((const __m128i *)(p + 6));
    __m512i idx = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(qs)); /* qs twice: words j and j + 16 */
    idx = _mm512_and_si512(_mm512_srlv_epi16(idx, shifts), _mm512_set1_epi16(15));
    idx = _mm512_mask_add_epi16(idx, (__mmask32)qh, idx, _mm512_set1_epi16(16));
    return _mm512_permutexvar_epi16(idx, table);
}
static inline void dq_q5_0(const uint8_t *p, bf16 *out) { _mm512_storeu_si512(out, q5_0_values(p)); }
/* a super-block of 256 values (144 bytes): fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of
 * nibbles; sub-block j of 32: w = d sc_j q - dmin m_j, a table of its 16 values per sub-block (d sc_j q is exact,
 * so the fused multiply-subtract rounds once, as ggml's product then difference does) */
static inline void dq_q4_k(const uint8_t *p, bf16 *out) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float d = half1(p), dmin = half1(p + 2);
    const uint8_t *sc = p + 4, *qs = p + 16;
    for (int j = 0; j < 8; j += 2, qs += 32, out += 64) { /* 32 bytes: low nibbles sub-block j, high j + 1 */
        int s[2], m[2];
        for (int t = 0; t < 2; t++) {
            int i = j + t;
            s[t] = i < 4 ? sc[i] & 63 : (sc[i + 4] & 0xF) | ((sc[i - 4] >> 6) << 4);
            m[t] = i < 4 ? sc[i + 4] & 63 : (sc[i + 4] >> 4) | ((sc[i] >> 6) << 4);
        }
        __m512i table = bf16x32(_mm512_fmsub_ps(iota, _mm512_set1_ps(d * s[0]), _mm512_set1_ps(dmin * m[0])),
                                _mm512_fmsub_ps(iota, _mm512_set1_ps(d * s[1]), _mm512_set1_ps(dmin * m[1])));
        __m512i q = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)qs));
        __m512i lo = _mm512_and_si512(q, _mm512_set1_epi16(15));
        __m512i hi = _mm512_add_epi16(_mm512_srli_epi16(q, 4), _mm512_set1_epi16(16));
        _mm512_storeu_si512(out, _mm512_permutexvar_epi16(lo, table));
        _mm512_storeu_si512(out + 32, _mm512_permutexvar_epi16(hi, table));
    }
}
#define DQ_ROW(FN) for (int c = 0; c < blocks; c++) FN(p + (size_t)c * bytes, o + (size_t)c * per);

/* rows [n0, n0 + nb) of w (row_bytes each) decoded into out (nb x K bf16) */
static void dq_rows(const uint8_t *w, int fmt, size_t row_bytes, int n0, int nb, int K, bf16 *out) {
    int per = q_block_values(fmt), bytes = q_block_bytes(fmt), blocks = K / per;
    for (int i = 0; i < nb; i++) {
        const uint8_t *p = w + (size_t)(n0 + i) * row_bytes;
        bf16 *o = out + (size_t)i * K;
        switch (fmt) {
        case GGUF_Q8_0: DQ_ROW(dq_q8_0) break;
        case GGUF_Q5_0: DQ_ROW(dq_q5_0) break;
        default: DQ_ROW(dq_q4_k) break;
        }
    }
}

/* the decoded weights alone (rows [n0, n0 + n)), to check them against the model's bf16 weights */
int foretell_dequantize(const uint8_t *w, int fmt, int n0, int n, int K, bf16 *out) {
    if (!q_block_bytes(fmt) || K % q_block_values(fmt)) return -1;
    dq_rows(w, fmt, (size_t)K / q_block_values(fmt) * q_block_bytes(fmt), n0, n, K, out);
    return 0;
}

/* tile_dot on nb weight rows given as 32-value blocks (Q8_0, Q5_0), each block decoded into a register as the
 * tile reaches it: the same products in the same order as tile_dot on the decoded rows, without storing them */
#define DEFINE_TILE_BLOCKS(NAME, VALUES, BYTES)                                                                \
static inline __attribute__((always_inline)) void NAME(const bf16 *x, const uint8_t *w, size_t row_bytes,     \
                                                       float *y, const float *b, const int nb, const int mb,  \
                                                       int K, int N, int rnd) {                               \
    vec acc[NB][MB];                                                                                          \
    for (int i = 0; i < NB; i++)                                                                              \
        for (int j = 0; j < MB; j++) acc[i][j] = VZERO();                                                     \
    for (int k = 0, c = 0; k < K; k += 32, c += BYTES) {                                                      \
        __m512bh wv[NB];                                                                                      \
        for (int i = 0; i < nb; i++) wv[i] = (__m512bh)VALUES(w + (size_t)i * row_bytes + c);                 \
        for (int j = 0; j < mb; j++) {                                                                        \
            __m512bh u = bhload(x + (size_t)j * K + k);                                                       \
            for (int i = 0; i < nb; i++) acc[i][j] = DOT_INTO(acc[i][j], wv[i], u);                           \
        }                                                                                                     \
    }                                                                                                         \
    store_tile(acc, nb, mb, y, b, N, rnd, 1);                                                                 \
}                                                                                                             \
static void NAME##_rows(const bf16 *x, const uint8_t *w, size_t row_bytes, float *y, const float *b, int nb,  \
                        int mb, int K, int N, int rnd) {                                                      \
    if (nb == NB) {                                                                                           \
        switch (mb) {                                                                                         \
        case 4: NAME(x, w, row_bytes, y, b, NB, 4, K, N, rnd); return;                                        \
        case 3: NAME(x, w, row_bytes, y, b, NB, 3, K, N, rnd); return;                                        \
        case 2: NAME(x, w, row_bytes, y, b, NB, 2, K, N, rnd); return;                                        \
        default: NAME(x, w, row_bytes, y, b, NB, 1, K, N, rnd); return;                                       \
        }                                                                                                     \
    }                                                                                                         \
    for (int i = 0; i < nb; i++)                                                                              \
        for (int j = 0; j < mb; j++)                                                                          \
            NAME(x + (size_t)j * K, w + (size_t)i * row_bytes, row_bytes, y + (size_t)j * N + i, b ? b + i : 0,\
                 1, 1, K, N, rnd);                                                                            \
}
DEFINE_TILE_BLOCKS(tile_q8_0, q8_0_values, 34)
DEFINE_TILE_BLOCKS(tile_q5_0, q5_0_values, 22)

int foretell_linear_q(const bf16 *x, const uint8_t *w, int fmt, const float *b, float *y, int M, int N, int K,
                      int threads, int rnd) {
    if (!q_block_bytes(fmt) || K % q_block_values(fmt)) return -1;
    size_t row_bytes = (size_t)K / q_block_values(fmt) * q_block_bytes(fmt);
    int blocks = (N + NB - 1) / NB, tiles = (M + MB - 1) / MB;
    #pragma omp parallel num_threads(threads)
    {
        bf16 *wide = aligned_alloc(64, ((size_t)NB * K * sizeof(bf16) + 63) / 64 * 64);
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int n0 = blk * NB, nb = N - n0 < NB ? N - n0 : NB, next = N - (n0 + NB) < NB ? N - (n0 + NB) : NB;
            if (M <= MB && fmt != GGUF_Q4_K) { /* one input tile: each block decoded into a register as it is used */
                prefetch_part(w + (size_t)(n0 + NB) * row_bytes, next > 0 ? (size_t)next * row_bytes : 0, 0, 1);
                const uint8_t *wb = w + (size_t)n0 * row_bytes;
                float *yb = y + n0;
                if (fmt == GGUF_Q5_0) tile_q5_0_rows(x, wb, row_bytes, yb, b ? b + n0 : 0, nb, M, K, N, rnd);
                else tile_q8_0_rows(x, wb, row_bytes, yb, b ? b + n0 : 0, nb, M, K, N, rnd);
                continue;
            }
            dq_rows(w, fmt, row_bytes, n0, nb, K, wide);
            for (int m0 = 0; m0 < M; m0 += MB) {
                int mb = M - m0 < MB ? M - m0 : MB;
                prefetch_part(w + (size_t)(n0 + NB) * row_bytes, next > 0 ? (size_t)next * row_bytes : 0, m0 / MB,
                              tiles);
                tile_dot_rows(x + (size_t)m0 * K, wide, y + (size_t)m0 * N + n0, b ? b + n0 : 0, nb, mb, K, N,
                              rnd);
            }
        }
        free(wide);
    }
    return 0;
}
#endif

/* ---- attention for a sequence's queries (a prompt chunk, a decode token, a verify pass's drafts) ----
 * out[h, t, :] = softmax_j(scale * q[h, t, :] . k[g, j, :]) v[g, j, :] over keys first[t] <= j < end[t], where
 * g = h / (H / G) is the query head's KV head (grouped-query attention). q (H, T, D) and out (H, T, D) are
 * contiguous; k and v are a sequence's cache buffers (G, cap, D), kv_stride = cap * D. Each (head, query) is
 * computed by one thread in one fixed sequence of arithmetic that depends only on its own keys, never on T or
 * on the other queries: a query's result is the same bits alone (a decode step) or in a pass of any length.
 * Queries of one KV head run in blocks that share each tile of keys and values while it is in L1 (a prompt chunk
 * of 512 queries after 4,096 keys: 120 -> 49 ms a layer on a 2-core Cascade Lake, fp32, the 0.5B's heads; a
 * 16-token verify pass 5.0 -> 2.2 ms; the same bits as each query alone).
 * Scores and softmax in fp32; bf16 inputs (foretell_attention_bf16) are widened exactly. */
#define MAXV 16 /* head_dim / VW at most */

int foretell_lanes(void) { return VW; } /* fp32 lanes of a vector in this build */

#if defined(__AVX512F__)
static inline vec vround(vec x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vec vfnma(vec a, vec b, vec c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a b */
static inline vec vscale2n(vec p, vec n) { return _mm512_scalef_ps(p, n); }       /* p 2^n */
static inline vec vmax(vec a, vec b) { return _mm512_max_ps(a, b); }
static inline float hmax(vec v) { return _mm512_reduce_max_ps(v); }
static inline vec vset1(float f) { return _mm512_set1_ps(f); }
static inline vec vmul(vec a, vec b) { return _mm512_mul_ps(a, b); }
static inline vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
static inline vec vsub(vec a, vec b) { return _mm512_sub_ps(a, b); }
static inline void vstore_tail(float *p, vec v, int n) { _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), v); }
#else
static inline vec vround(vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vec vfnma(vec a, vec b, vec c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vec vscale2n(vec p, vec n) {
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                                                   _mm256_set1_epi32(127)), 23)));
}
static inline vec vmax(vec a, vec b) { return _mm256_max_ps(a, b); }
static inline float hmax(vec v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline vec vset1(float f) { return _mm256_set1_ps(f); }
static inline vec vmul(vec a, vec b) { return _mm256_mul_ps(a, b); }
static inline vec vadd(vec a, vec b) { return _mm256_add_ps(a, b); }
static inline vec vsub(vec a, vec b) { return _mm256_sub_ps(a, b); }
static inline void vstore_tail(float *p, vec v, int n) {
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int i = 0; i < n; i++) p[i] = t[i];
}
#endif

static inline vec vexp(vec x) { /* e^x for x <= 0 (about 1e-7 relative), clamped at e^-87: Cephes' expf */
    x = vmax(x, vset1(-87.0f));
    vec n = vround(vmul(x, vset1(1.44269504f)));
    vec r = vfnma(n, vset1(-2.12194440e-4f), vfnma(n, vset1(0.693359375f), x)); /* x - n ln2, in two parts */
    vec p = vset1(1.9875691500e-4f);
    p = VFMA(p, r, vset1(1.3981999507e-3f));
    p = VFMA(p, r, vset1(8.3334519073e-3f));
    p = VFMA(p, r, vset1(4.1665795894e-2f));
    p = VFMA(p, r, vset1(1.6666665459e-1f));
    p = VFMA(p, r, vset1(5.0000001201e-1f));
    return vscale2n(VFMA(p, vmul(r, r), vadd(r, vset1(1.0f))), n);
}

/* s[0, L) <- e^(s - max s); returns 1 / their sum (the softmax's normalisation) */
static inline float exp_shifted(float *s, int L) {
    vec mv = vset1(-INFINITY);
    int j = 0;
    for (; j + VW <= L; j += VW) mv = vmax(mv, VLOAD(s + j));
    float m = hmax(mv);
    for (; j < L; j++) m = s[j] > m ? s[j] : m;
    vec mm = vset1(m), lv = VZERO();
    for (j = 0; j + VW <= L; j += VW) {
        vec p = vexp(vsub(VLOAD(s + j), mm));
        vstore(s + j, p);
        lv = vadd(lv, p);
    }
    if (j < L) {
        vec p = vexp(vsub(vload_tail(s + j, L - j), mm));
        vstore_tail(s + j, p, L - j);
        lv = vadd(lv, vload_tail(s + j, L - j));
    }
    return 1.0f / hsum(lv);
}

#if defined(__AVX512F__)
static const int TRANSPOSE_IDX[8][16] = { /* per round (sz = 8, 4, 2, 1): row i's and row i + sz's picks */
    {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
    {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
    {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
    {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
    {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
    {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
    {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
    {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}};
#define SWAP_HALVES(i, sz, ia, ib) do { vec x_ = r[i], y_ = r[(i) + (sz)];                                   \
    r[i] = _mm512_permutex2var_ps(x_, ia, y_); r[(i) + (sz)] = _mm512_permutex2var_ps(x_, ib, y_); } while (0)
/* 16 x 16 in registers, in four rounds: in the round of size sz, row i takes the first sz of each 2 sz columns of
 * rows i and i + sz, row i + sz the rest */
static inline __attribute__((always_inline)) void transpose_tile(vec r[VW]) {
    __m512i a = _mm512_loadu_si512(TRANSPOSE_IDX[0]), b = _mm512_loadu_si512(TRANSPOSE_IDX[1]);
    SWAP_HALVES(0, 8, a, b); SWAP_HALVES(1, 8, a, b); SWAP_HALVES(2, 8, a, b); SWAP_HALVES(3, 8, a, b);
    SWAP_HALVES(4, 8, a, b); SWAP_HALVES(5, 8, a, b); SWAP_HALVES(6, 8, a, b); SWAP_HALVES(7, 8, a, b);
    a = _mm512_loadu_si512(TRANSPOSE_IDX[2]), b = _mm512_loadu_si512(TRANSPOSE_IDX[3]);
    SWAP_HALVES(0, 4, a, b); SWAP_HALVES(1, 4, a, b); SWAP_HALVES(2, 4, a, b); SWAP_HALVES(3, 4, a, b);
    SWAP_HALVES(8, 4, a, b); SWAP_HALVES(9, 4, a, b); SWAP_HALVES(10, 4, a, b); SWAP_HALVES(11, 4, a, b);
    a = _mm512_loadu_si512(TRANSPOSE_IDX[4]), b = _mm512_loadu_si512(TRANSPOSE_IDX[5]);
    SWAP_HALVES(0, 2, a, b); SWAP_HALVES(1, 2, a, b); SWAP_HALVES(4, 2, a, b); SWAP_HALVES(5, 2, a, b);
    SWAP_HALVES(8, 2, a, b); SWAP_HALVES(9, 2, a, b); SWAP_HALVES(12, 2, a, b); SWAP_HALVES(13, 2, a, b);
    a = _mm512_loadu_si512(TRANSPOSE_IDX[6]), b = _mm512_loadu_si512(TRANSPOSE_IDX[7]);
    SWAP_HALVES(0, 1, a, b); SWAP_HALVES(2, 1, a, b); SWAP_HALVES(4, 1, a, b); SWAP_HALVES(6, 1, a, b);
    SWAP_HALVES(8, 1, a, b); SWAP_HALVES(10, 1, a, b); SWAP_HALVES(12, 1, a, b); SWAP_HALVES(14, 1, a, b);
}
#else
static inline __attribute__((always_inline)) void transpose_tile(vec r[VW]) { /* 8 x 8 */
    vec t[8], u[8];
    for (int i = 0; i < 8; i += 2) { t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]); t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}
#endif

#define HB 8 /* query heads that share a pass over their KV head's keys and values */
/* With AVX2's 16 registers, more than 4 heads' accumulators over 2 VW keys or dimensions spill to the stack (6
 * heads: 12 accumulators, plus the tile's 2 vectors and a broadcast): from 5 heads on, the tile is taken one vector
 * (VW keys or dimensions) at a time, up to 8 heads' chains in flight. Each score and each weighted value is the
 * same chain of FMAs either way (lanes are independent): the same bits. */
#define ONE_WIDE(nh) (VW == 8 && (nh) > 4)

#ifndef TB
#define TB 8   /* queries of one KV head whose scores and weighted values share each tile of keys and values */
#endif
#define SCORES_FLOATS (1 << 17) /* 512 KB of one thread's scores */
#ifndef JB
#define JB 128 /* keys a tile of values holds (JB x 2 VW values, read from L1 by each query of the block) */
#endif

#define TW (2 * VW) /* keys of a tile of the transposed keys: kt holds D x TW floats a tile, tile after tile */

/* Scores s[h * ls + j] = q[h] . key j for j in [0, TW) of nh query heads (constant at each call site) of one
 * query (q[d * nh + h]: its heads' dimension d side by side), the keys of one tile of transposed keys (D rows of
 * TW). Each score is one chain of FMAs over d in one lane, so it depends neither on nh, on its lane, nor on the
 * other heads and queries. */
static inline __attribute__((always_inline)) void score_tile(const float *q, const float *tile, float *s, int ls,
                                                            int D, const int nh) {
    if (ONE_WIDE(nh)) {
        for (int half = 0; half < TW; half += VW) {
            vec a[HB];
            for (int h = 0; h < nh; h++) a[h] = VZERO();
            for (int d = 0; d < D; d++) {
                vec kd = VLOAD(tile + (size_t)d * TW + half);
                for (int h = 0; h < nh; h++) a[h] = VFMA(vset1(q[d * nh + h]), kd, a[h]);
            }
            for (int h = 0; h < nh; h++) vstore(s + (size_t)h * ls + half, a[h]);
        }
        return;
    }
    vec a[HB][2];
    for (int h = 0; h < nh; h++) a[h][0] = a[h][1] = VZERO();
    for (int d = 0; d < D; d++) {
        const float *row = tile + (size_t)d * TW;
        vec k0 = VLOAD(row), k1 = VLOAD(row + VW);
        for (int h = 0; h < nh; h++) {
            vec qd = vset1(q[d * nh + h]);
            a[h][0] = VFMA(qd, k0, a[h][0]);
            a[h][1] = VFMA(qd, k1, a[h][1]);
        }
    }
    for (int h = 0; h < nh; h++) {
        vstore(s + (size_t)h * ls, a[h][0]);
        vstore(s + (size_t)h * ls + VW, a[h][1]);
    }
}

/* weigh_values (below) for the n <= VW output dimensions from c alone; full: n == VW (a constant in each copy, so
 * that the loop holds no branch and its accumulators stay in registers) */
static inline __attribute__((always_inline)) void weigh_run(const float *s, int ld, const void *v, int v_bf16,
                                                           float *out, size_t ostride, int j0, int j1, int c, int D,
                                                           int n, const int nh, const int full) {
    vec a[HB];
    for (int h = 0; h < nh; h++)
        a[h] = j0 == 0 ? VZERO() : full ? VLOAD(out + h * ostride + c) : vload_tail(out + h * ostride + c, n);
    for (int j = j0; j < j1; j++) {
        vec vj;
        if (v_bf16) {
            const bf16 *row = (const bf16 *)v + (size_t)j * D + c;
            vj = full ? bload(row) : bload_tail(row, n);
        } else {
            const float *row = (const float *)v + (size_t)j * D + c;
            vj = full ? VLOAD(row) : vload_tail(row, n);
        }
        for (int h = 0; h < nh; h++) a[h] = VFMA(vset1(s[(size_t)h * ld + j]), vj, a[h]);
    }
    for (int h = 0; h < nh; h++) {
        if (full) vstore(out + h * ostride + c, a[h]);
        else vstore_tail(out + h * ostride + c, a[h], n);
    }
}

static inline __attribute__((always_inline)) void weigh_vector(const float *s, int ld, const void *v, int v_bf16,
                                                              float *out, size_t ostride, int j0, int j1, int c,
                                                              int D, int n, const int nh) {
    if (n == VW) weigh_run(s, ld, v, v_bf16, out, ostride, j0, j1, c, D, n, nh, 1);
    else weigh_run(s, ld, v, v_bf16, out, ostride, j0, j1, c, D, n, nh, 0);
}

/* out[h * ostride + c + :] += sum over keys j0 <= j < j1 of p[h][j] v[j, c + :] for nh heads of one query, the
 * 2 VW output dimensions from c (n0 + n1 of them: fewer at the end of a head size that is not a multiple of
 * 2 VW); the sums start from zero when j0 == 0. Each output is one chain of FMAs over j in key order, kept in
 * out between calls (fp32 stores and loads change no bits). */
static inline __attribute__((always_inline)) void weigh_values(const float *s, int ld, const void *v, int v_bf16,
                                                              float *out, size_t ostride, int j0, int j1, int c,
                                                              int D, int n0, int n1, const int nh) {
    if (ONE_WIDE(nh)) {
        weigh_vector(s, ld, v, v_bf16, out, ostride, j0, j1, c, D, n0, nh);
        if (n1 > 0) weigh_vector(s, ld, v, v_bf16, out, ostride, j0, j1, c + VW, D, n1, nh);
        return;
    }
    vec a[HB][2];
    const int full = n0 == VW && n1 == VW;
    for (int h = 0; h < nh; h++) {
        if (j0 == 0) a[h][0] = a[h][1] = VZERO();
        else if (full) a[h][0] = VLOAD(out + h * ostride + c), a[h][1] = VLOAD(out + h * ostride + c + VW);
        else {
            a[h][0] = vload_tail(out + h * ostride + c, n0);
            a[h][1] = n1 > 0 ? vload_tail(out + h * ostride + c + VW, n1) : VZERO();
        }
    }
    for (int j = j0; j < j1; j++) {
        vec v0, v1 = VZERO();
        if (v_bf16) {
            const bf16 *row = (const bf16 *)v + (size_t)j * D + c;
            if (full) v0 = bload(row), v1 = bload(row + VW);
            else {
                v0 = bload_tail(row, n0);
                if (n1 > 0) v1 = bload_tail(row + VW, n1);
            }
        } else {
            const float *row = (const float *)v + (size_t)j * D + c;
            if (full) v0 = VLOAD(row), v1 = VLOAD(row + VW);
            else {
                v0 = vload_tail(row, n0);
                if (n1 > 0) v1 = vload_tail(row + VW, n1);
            }
        }
        for (int h = 0; h < nh; h++) {
            vec p = vset1(s[(size_t)h * ld + j]);
            a[h][0] = VFMA(p, v0, a[h][0]);
            a[h][1] = VFMA(p, v1, a[h][1]);
        }
    }
    for (int h = 0; h < nh; h++) {
        if (full) {
            vstore(out + h * ostride + c, a[h][0]);
            vstore(out + h * ostride + c + VW, a[h][1]);
        } else {
            vstore_tail(out + h * ostride + c, a[h][0], n0);
            if (n1 > 0) vstore_tail(out + h * ostride + c + VW, a[h][1], n1);
        }
    }
}

#define JB8 64 /* keys of a tile of values in weigh_head8 (JB8 x 8 VW values: 16 KB of fp32 at 64 dimensions) */
/* out[c + :] += sum over keys j0 <= j < j1 of p[j] v[j, c + :] for one head of one query, the 8 VW output dimensions
 * from c: the same chains of FMAs as weigh_values (one per output, over j in key order), 8 in flight, so a head's
 * probabilities are read once per 8 VW dimensions instead of once per 2 VW (the scores of a block of queries
 * outgrow L1, and with a long context L2) */
static inline __attribute__((always_inline)) void weigh_head8(const float *p, const void *v, int v_bf16, float *out,
                                                             int j0, int j1, int c, int D) {
    vec a[8];
    for (int i = 0; i < 8; i++) a[i] = j0 == 0 ? VZERO() : VLOAD(out + c + i * VW);
    for (int j = j0; j < j1; j++) {
        const vec pj = vset1(p[j]);
        if (v_bf16) {
            const bf16 *row = (const bf16 *)v + (size_t)j * D + c;
            for (int i = 0; i < 8; i++) a[i] = VFMA(pj, bload(row + i * VW), a[i]);
        } else {
            const float *row = (const float *)v + (size_t)j * D + c;
            for (int i = 0; i < 8; i++) a[i] = VFMA(pj, VLOAD(row + i * VW), a[i]);
        }
    }
    for (int i = 0; i < 8; i++) vstore(out + c + i * VW, a[i]);
}

/* nh query heads of one KV head for nt <= TB queries: query t's scaled heads at q + t * nh * D (as score_tile
 * reads them), its L[t] keys from key o[t] of the KV head's tiled transposed keys kt, its values from v[t] (row 0
 * its first key), its scores in the rows s + (t * nh + h) * ls (TW floats before each row are scratch: a tile
 * that starts before the query's first key is scored there) and its result at out[t] (head h at
 * out[t] + h * ostride). The scores, the softmax and the weighted values of each (query, head) are the same
 * operations in the same order as for that query alone: the queries only share the tiles of keys and values while
 * these are in L1. */
static inline __attribute__((always_inline)) void attend_heads(const float *q, const float *kt, const int *o,
                                                              const void *const *v, int v_bf16, float *const *out,
                                                              size_t ostride, float *s, int ls, const int *L, int nt,
                                                              int D, const int nh) {
    int most = 0, from = o[0] / TW, to = 0;
    for (int t = 0; t < nt; t++) {
        most = L[t] > most ? L[t] : most;
        from = o[t] / TW < from ? o[t] / TW : from;
        to = (o[t] + L[t] + TW - 1) / TW > to ? (o[t] + L[t] + TW - 1) / TW : to;
    }
    for (int m = from; m < to; m++)
        for (int t = 0; t < nt; t++)
            if (o[t] / TW <= m && m * TW < o[t] + L[t])
                score_tile(q + (size_t)t * nh * D, kt + (size_t)m * D * TW, s + (size_t)t * nh * ls + m * TW - o[t],
                           ls, D, nh);
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < nh; h++) {
            float *sh = s + ((size_t)t * nh + h) * ls;
            vec inv = vset1(exp_shifted(sh, L[t])); /* the probabilities normalised before they weigh the values */
            int j = 0;
            for (; j + VW <= L[t]; j += VW) vstore(sh + j, vmul(VLOAD(sh + j), inv));
            if (j < L[t]) vstore_tail(sh + j, vmul(vload_tail(sh + j, L[t] - j), inv), L[t] - j);
        }
#if VW == 8
    if (D % (8 * VW) == 0) { /* AVX2: each (query, head)'s probabilities read once per 8 VW dimensions */
        for (int c = 0; c < D; c += 8 * VW)
            for (int j0 = 0; j0 < most; j0 += JB8)
                for (int t = 0; t < nt; t++)
                    if (j0 < L[t])
                        for (int h = 0; h < nh; h++)
                            weigh_head8(s + ((size_t)t * nh + h) * ls, v[t], v_bf16, out[t] + h * ostride, j0,
                                        j0 + JB8 < L[t] ? j0 + JB8 : L[t], c, D);
        return;
    }
#endif
    for (int c = 0; c < D; c += 2 * VW) {
        const int n0 = D - c < VW ? D - c : VW, n1 = D - c - VW > VW ? VW : D - c - VW;
        for (int j0 = 0; j0 < most; j0 += JB)
            for (int t = 0; t < nt; t++)
                if (j0 < L[t])
                    weigh_values(s + (size_t)t * nh * ls, ls, v[t], v_bf16, out[t], ostride, j0,
                                 j0 + JB < L[t] ? j0 + JB : L[t], c, D, n0, n1, nh);
    }
}

#define ATTEND_CASE(N) attend_heads(q, kt, o, v, v_bf16, out, ostride, s, ls, L, nt, D, N); return
#if HB > 6
#define ATTEND_WIDE_CASES case 6: ATTEND_CASE(6); case 7: ATTEND_CASE(7); default: ATTEND_CASE(8);
#else
#define ATTEND_WIDE_CASES default: ATTEND_CASE(6);
#endif
#define ATTEND_SWITCH switch (nh) { case 1: ATTEND_CASE(1); case 2: ATTEND_CASE(2); case 3: ATTEND_CASE(3);   \
                                    case 4: ATTEND_CASE(4); case 5: ATTEND_CASE(5); ATTEND_WIDE_CASES }
/* attend_heads with nh and the values' type as constants in each inlined copy */
static void attend_group(const float *q, const float *kt, const int *o, const void *const *v, int v_bf16,
                         float *const *out, size_t ostride, float *s, int ls, const int *L, int nt, int D, int nh) {
    if (v_bf16) {
        const int v_bf16 = 1;
        ATTEND_SWITCH
    } else {
        const int v_bf16 = 0;
        ATTEND_SWITCH
    }
}

/* scratch for one call, kept by the calling thread between calls (grown, never shrunk) */
static float *grown(float **buffer, size_t *size, size_t floats) { /* a buffer kept across calls, grown to fit */
    if (floats > *size) {
        free(*buffer);
        *size = floats > 2 * *size ? floats : 2 * *size;
        *buffer = aligned_alloc(64, (*size * sizeof(float) + 63) / 64 * 64);
        if (!*buffer) *size = 0;
    }
    return *buffer;
}

static float *workspace(size_t floats) {
    static __thread float *buffer;
    static __thread size_t size;
    return grown(&buffer, &size, floats);
}

static inline float widen1(bf16 h) { unsigned int u = (unsigned int)h << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline float same1(float f) { return f; }

/* The keys every query of the call may see, [lo, hi), are first copied once per KV head into fp32 and
 * transposed, TW keys a tile (kt: a query's scores are then vector lanes, a tile's D x TW floats one after
 * another); values are read in place. With a sequence's own tiled keys (tiles: per KV head tile_cap keys,
 * position p in tile p / TW, kept between calls) only the keys from valid on are transposed into them, up to
 * the end of hi's tile (zeros past hi); the ones before valid are those of earlier calls, which a decode step
 * would otherwise transpose again (the 0.5B's every step after 4,096 keys: ~2 MB a layer read and written). */
#define DEFINE_ATTENTION(NAME, T, WIDEN, LOADV, LOADV_TAIL, V_BF16)                                                       \
static __attribute__((unused)) void NAME##_tiled(const T *q, const T *k, const T *v, float *out,           \
                         const int *first, const int *end,                                                    \
                         int T_, int H, int G, int D, long kv_stride, float scale, int threads, float *tiles,  \
                         long tile_cap, int valid) {                                                          \
    const int rep = H / G;                                                                                    \
    int lo = first[0], hi = end[0];                                                                           \
    for (int t = 1; t < T_; t++) { lo = first[t] < lo ? first[t] : lo; hi = end[t] > hi ? end[t] : hi; }      \
    const int base = tiles ? 0 : lo, span = hi - base, tiled = (span + TW - 1) / TW * TW;                     \
    const int ld = tiles ? (int)tile_cap : tiled, ls = tiled + TW, from = tiles ? valid / VW : 0;            \
    const size_t kt_n = tiles ? 0 : (size_t)G * D * ld;                                                       \
    /* queries per block: as many as TB while their scores stay within SCORES_FLOATS (in L2) */             \
    const long per_query = (long)(rep < HB ? rep : HB) * ls;                                                  \
    const int tb = per_query * TB <= SCORES_FLOATS ? TB : per_query >= SCORES_FLOATS ? 1 : (int)(SCORES_FLOATS / per_query); \
    const int blocks = (T_ + tb - 1) / tb, items = G * blocks, groups = tiled / VW - from;                    \
    float *ws = workspace(kt_n + (size_t)threads * TB * HB * ls), *kt = tiles ? tiles : ws;                  \
    _Pragma("omp parallel num_threads(threads)")                                                              \
    {                                                                                                         \
        _Pragma("omp for schedule(static)")                                                                   \
        for (int gj = 0; gj < G * groups; gj++) { /* VW keys x VW dims a tile, transposed in registers */     \
            int g = gj / groups, j0 = (from + gj % groups) * VW;                                              \
            const T *src = k + g * kv_stride + (size_t)(base + j0) * D;                                       \
            float *dst = kt + (size_t)g * D * ld + (size_t)(j0 / TW) * D * TW + j0 % TW;                      \
            int keys = span - j0 < VW ? (span - j0 > 0 ? span - j0 : 0) : VW;                                 \
            for (int d0 = 0; d0 < D; d0 += VW) {                                                              \
                vec r[VW];                                                                                    \
                const int dims = D - d0 < VW ? D - d0 : VW;                                                   \
                if (keys == VW && dims == VW)                                                                 \
                    for (int jj = 0; jj < VW; jj++) r[jj] = LOADV(src + (size_t)jj * D + d0);                 \
                else                                                                                          \
                    for (int jj = 0; jj < VW; jj++)                                                           \
                        r[jj] = jj < keys ? LOADV_TAIL(src + (size_t)jj * D + d0, dims) : VZERO();            \
                transpose_tile(r);                                                                            \
                for (int dd = 0; dd < dims; dd++) vstore(dst + (size_t)(d0 + dd) * TW, r[dd]);                \
            }                                                                                                 \
        }                                                                                                     \
        float *s = ws + kt_n + (size_t)omp_get_thread_num() * TB * HB * ls + TW;                              \
        float qs[TB * HB * MAXV * VW];                                                                        \
        int oq[TB];                                                                                           \
        const void *vq[TB];                                                                                   \
        float *outq[TB];                                                                                      \
        int Lq[TB];                                                                                           \
        _Pragma("omp for schedule(static)")                                                                   \
        for (int it = 0; it < items; it++) { /* KV head g, queries [t0, t0 + nt) */                          \
            const int g = it / blocks, t0 = it % blocks * tb, nt = T_ - t0 < tb ? T_ - t0 : tb;               \
            const size_t stride = (size_t)T_ * D;                                                             \
            for (int r0 = 0; r0 < rep; r0 += HB) {                                                            \
                const int nh = rep - r0 < HB ? rep - r0 : HB;                                                 \
                for (int i = 0; i < nt; i++) {                                                                \
                    const int t = t0 + i;                                                                     \
                    const size_t row = ((size_t)(g * rep + r0) * T_ + t) * D;                                 \
                    for (int h = 0; h < nh; h++)                                                              \
                        for (int d = 0; d < D; d++)                                                           \
                            qs[(size_t)i * nh * D + d * nh + h] = WIDEN(q[row + h * stride + d]) * scale;  \
                    oq[i] = first[t] - base;                                                                  \
                    vq[i] = v + g * kv_stride + (size_t)first[t] * D;                                         \
                    outq[i] = out + row;                                                                      \
                    Lq[i] = end[t] - first[t];                                                                \
                }                                                                                             \
                attend_group(qs, kt + (size_t)g * D * ld, oq, vq, V_BF16, outq, stride, s, ls, Lq, nt, D, nh); \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
}                                                                                                             \
void NAME(const T *q, const T *k, const T *v, float *out, const int *first, const int *end, int T_, int H,     \
          int G, int D, long kv_stride, float scale, int threads) {                                           \
    NAME##_tiled(q, k, v, out, first, end, T_, H, G, D, kv_stride, scale, threads, NULL, 0, 0);               \
}

DEFINE_ATTENTION(foretell_attention_f32_rows, float, same1, VLOAD, vload_tail, 0)
DEFINE_ATTENTION(foretell_attention_bf16_rows, bf16, widen1, bload, bload_tail, 1)

/* foretell_attention_f32_rows with the sequence's tiled keys (above): tiles [G, tile_cap / TW, D, TW] fp32,
 * tile_cap a multiple of TW past the end of hi's tile; the keys before valid are in them already */
void foretell_attention_f32_tiles(const float *q, const float *k, const float *v, float *out, const int *first,
                                  const int *end, int T_, int H, int G, int D, long kv_stride, float scale,
                                  int threads, float *tiles, long tile_cap, int valid) {
    foretell_attention_f32_rows_tiled(q, k, v, out, first, end, T_, H, G, D, kv_stride, scale, threads, tiles,
                                      tile_cap, valid);
}

int foretell_key_tile(void) { return TW; } /* keys a tile of a sequence's tiled keys holds */

#if defined(__AVX512BF16__)
/* ---- the same attention for bf16 queries and caches on VDPBF16PS (CPUs with AVX512-BF16; head size a
 * multiple of 32): twice the products per instruction of the widened fp32 FMAs above.
 * Scores: lane = key, each lane sums q[2e] k[2e] + q[2e+1] k[2e+1] over the head's dimension pairs e (the keys
 * copied once per call as pairs of dimensions, transposed), then times scale; softmax in fp32 as above; the
 * probabilities rounded to bf16 before the second product (as FlashAttention rounds P).
 * Values: lane = dimension, each lane sums p[j] v[j] + p[j+1] v[j+1] over the pairs (j, j+1) of keys at even
 * positions of the cache (the values copied once per call as such pairs); a query's key range that starts or
 * ends between two keys of a pair adds that key alone, with one fp32 FMA. So a query's result depends only on
 * its own key range, as above: the same bits alone or in a pass of any length. */
typedef unsigned int u32;
static inline __m512bh pair1(const void *p) { return (__m512bh)_mm512_set1_epi32((int)load_u32(p)); }
static inline vec vwiden1(bf16 h) { return vset1(widen1(h)); }
/* a[h] += p_h[r] v[0, 2 VW) for each head: one key of a range that splits its pair, in fp32 */
static inline __attribute__((always_inline)) void add_key(vec a[HB][2], const bf16 *v, const bf16 *pb, int ld,
                                                          int r, const int nh) {
    vec v0 = bload(v), v1 = bload(v + VW);
    for (int h = 0; h < nh; h++) {
        vec p = vwiden1(pb[(size_t)h * ld + r]);
        a[h][0] = VFMA(p, v0, a[h][0]);
        a[h][1] = VFMA(p, v1, a[h][1]);
    }
}

static inline __attribute__((always_inline)) void attend_heads_dot(
        const bf16 *const *qh, const u32 *kp, int ld, const bf16 *v, const u32 *vp, int odd, float *const *oh,
        float *s, bf16 *pb, int L, int D, float scale, const int nh) {
    /* qh[h]: head h's query; kp: key pairs from this query's first key (D / 2 rows of stride ld); v: value rows from
     * the first key; vp: value pairs from the first pair that lies wholly in the range (odd: the first key is
     * alone); oh[h]: head h's output; s, pb: scores and bf16 probabilities, ld per head */
    const int E = D / 2;
    for (int j = 0; j < L; j += 2 * VW) {
        vec a[HB][2];
        for (int h = 0; h < nh; h++) a[h][0] = a[h][1] = VZERO();
        for (int e = 0; e < E; e++) {
            const u32 *row = kp + (size_t)e * ld + j;
            __m512bh k0 = (__m512bh)_mm512_loadu_si512(row), k1 = (__m512bh)_mm512_loadu_si512(row + VW);
            for (int h = 0; h < nh; h++) {
                __m512bh qe = pair1(qh[h] + 2 * e);
                a[h][0] = _mm512_dpbf16_ps(a[h][0], k0, qe);
                a[h][1] = _mm512_dpbf16_ps(a[h][1], k1, qe);
            }
        }
        vec sc = vset1(scale);
        for (int h = 0; h < nh; h++) {
            vstore(s + (size_t)h * ld + j, vmul(a[h][0], sc));
            vstore(s + (size_t)h * ld + j + VW, vmul(a[h][1], sc));
        }
    }
    for (int h = 0; h < nh; h++) {
        float *sh = s + (size_t)h * ld;
        bf16 *ph = pb + (size_t)h * ld;
        vec inv = vset1(exp_shifted(sh, L));
        int j = 0;
        for (; j + VW <= L; j += VW)
            _mm256_storeu_si256((__m256i *)(ph + j), (__m256i)_mm512_cvtneps_pbh(vmul(VLOAD(sh + j), inv)));
        if (j < L)
            _mm256_mask_storeu_epi16(ph + j, (__mmask16)((1u << (L - j)) - 1),
                                     (__m256i)_mm512_cvtneps_pbh(vmul(vload_tail(sh + j, L - j), inv)));
    }
    for (int c = 0; c < D; c += 2 * VW) {
        vec a[HB][2];
        for (int h = 0; h < nh; h++) a[h][0] = a[h][1] = VZERO();
        int r = 0;
        if (odd) /* the first key alone: its pair's other key is outside the range */
            add_key(a, v + c, pb, ld, r++, nh);
        for (const u32 *row = vp + c; r + 1 < L; r += 2, row += D) {
            __m512bh v0 = (__m512bh)_mm512_loadu_si512(row), v1 = (__m512bh)_mm512_loadu_si512(row + VW);
            for (int h = 0; h < nh; h++) {
                __m512bh p = pair1(pb + (size_t)h * ld + r);
                a[h][0] = _mm512_dpbf16_ps(a[h][0], v0, p);
                a[h][1] = _mm512_dpbf16_ps(a[h][1], v1, p);
            }
        }
        if (r < L) /* the last key alone */
            add_key(a, v + (size_t)r * D + c, pb, ld, r, nh);
        for (int h = 0; h < nh; h++) {
            vstore(oh[h] + c, a[h][0]);
            vstore(oh[h] + c + VW, a[h][1]);
        }
    }
}

#define ATTEND_DOT_CASE(N) attend_heads_dot(qh, kp, ld, v, vp, odd, oh, s, pb, L, D, scale, N); return
static void attend_group_dot(const bf16 *const *qh, const u32 *kp, int ld, const bf16 *v, const u32 *vp, int odd,
                             float *const *oh, float *s, bf16 *pb, int L, int D, float scale, int nh) {
    switch (nh) {
    case 1: ATTEND_DOT_CASE(1); case 2: ATTEND_DOT_CASE(2); case 3: ATTEND_DOT_CASE(3); case 4: ATTEND_DOT_CASE(4);
    case 5: ATTEND_DOT_CASE(5); case 6: ATTEND_DOT_CASE(6); case 7: ATTEND_DOT_CASE(7); default: ATTEND_DOT_CASE(8);
    }
}

/* arguments as foretell_attention_bf16_rows; D a multiple of 2 VW (32) */
void foretell_attention_bf16dot_rows(const bf16 *q, const bf16 *k, const bf16 *v, float *out, const int *first,
                                     const int *end, int T_, int H, int G, int D, long kv_stride, float scale,
                                     int threads) {
    const int rep = H / G, items = G * T_, E = D / 2;
    int lo = first[0], hi = end[0];
    for (int t = 1; t < T_; t++) { lo = first[t] < lo ? first[t] : lo; hi = end[t] > hi ? end[t] : hi; }
    const int span = hi - lo, ld = (span + 2 * VW - 1) / (2 * VW) * (2 * VW) + 2 * VW;
    const int base = lo & ~1, pairs = (hi - base + 1) / 2; /* value pairs (base + 2i, base + 2i + 1) */
    const size_t kp_n = (size_t)G * E * ld, vp_n = (size_t)G * pairs * D;
    const size_t scratch = (size_t)HB * ld + ((size_t)HB * ld + 1) / 2 + 16; /* scores, then bf16 probabilities */
    float *ws = workspace(kp_n + vp_n + (size_t)threads * scratch);
    u32 *kp = (u32 *)ws, *vp = (u32 *)ws + kp_n;
    _Pragma("omp parallel num_threads(threads)")
    {
        _Pragma("omp for schedule(static)")
        for (int gj = 0; gj < G * (ld / VW); gj++) { /* VW keys x VW dimension pairs a tile, transposed */
            int g = gj / (ld / VW), j0 = gj % (ld / VW) * VW;
            const u32 *src = (const u32 *)(k + g * kv_stride + (size_t)(lo + j0) * D);
            u32 *dst = kp + (size_t)g * E * ld + j0;
            int keys = span - j0 < VW ? (span - j0 > 0 ? span - j0 : 0) : VW;
            for (int e0 = 0; e0 < E; e0 += VW) {
                vec r[VW];
                for (int jj = 0; jj < VW; jj++)
                    r[jj] = jj < keys ? _mm512_loadu_ps((const float *)(src + (size_t)jj * E + e0)) : VZERO();
                transpose_tile(r);
                for (int ee = 0; ee < VW; ee++) vstore((float *)(dst + (size_t)(e0 + ee) * ld), r[ee]);
            }
        }
        _Pragma("omp for schedule(static)")
        for (int gi = 0; gi < G * pairs; gi++) { /* value pairs: lane c holds (v[j][c], v[j + 1][c]) */
            int g = gi / pairs, i = gi % pairs, j = base + 2 * i;
            const bf16 *r0 = v + g * kv_stride + (size_t)j * D, *r1 = r0 + D;
            u32 *dst = vp + (size_t)gi * D;
            for (int c = 0; c < D; c += VW) {
                __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r0 + c)));
                __m512i b = j + 1 < hi ? _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r1 + c))), 16)
                                       : _mm512_setzero_si512();
                _mm512_storeu_si512(dst + c, _mm512_or_si512(a, b));
            }
        }
        float *s = ws + kp_n + vp_n + (size_t)omp_get_thread_num() * scratch;
        bf16 *pb = (bf16 *)(s + (size_t)HB * ld);
        _Pragma("omp for schedule(static)")
        for (int it = 0; it < items; it++) {
            int g = it / T_, t = it % T_, L = end[t] - first[t], odd = first[t] & 1;
            const bf16 *vg = v + g * kv_stride + (size_t)first[t] * D;
            const u32 *vpg = vp + ((size_t)g * pairs + (first[t] + odd - base) / 2) * D;
            for (int r0 = 0; r0 < rep; r0 += HB) {
                int nh = rep - r0 < HB ? rep - r0 : HB;
                size_t row = ((size_t)(g * rep + r0) * T_ + t) * D, stride = (size_t)T_ * D;
                const bf16 *qh[HB];
                float *oh[HB];
                for (int h = 0; h < nh; h++) qh[h] = q + row + h * stride, oh[h] = out + row + h * stride;
                attend_group_dot(qh, kp + (size_t)g * E * ld + first[t] - lo, ld, vg, vpg, odd, oh, s, pb, L, D,
                                 scale, nh);
            }
        }
    }
}
#endif

/* ---- shared by the head-bounds kernels below ----
 * head_rows_int16: each of M input rows (bf16 xb or float32 xf, whichever is given; K values) scaled to int16 values
 * xi within +-range: sx = max|x| / range (a float), xi = x / sx rounded and clamped; x1 = |x|_1 and ex = max |x -
 * sx xi|, both computed in double and rounded up. -2 where a value is inf or NaN (the caller takes the exact head). */
static int head_rows_int16(const bf16 *xb, const float *xf, int M, int K, long range, int16_t *xi, float *sx,
                           float *x1, float *ex) {
    for (int m = 0; m < M; m++) {
        double mx = 0.0, l1 = 0.0, err = 0.0;
        for (int k = 0; k < K; k++) {
            double v = xb ? widen1(xb[(size_t)m * K + k]) : xf[(size_t)m * K + k];
            if (!(fabs(v) <= 3.0e38)) return -2;
            mx = fabs(v) > mx ? fabs(v) : mx;
            l1 += fabs(v);
        }
        const float sxf = mx > 0.0 ? (float)(mx / (double)range) : 1.0f; /* err is exact for this float scale */
        for (int k = 0; k < K; k++) {
            double v = xb ? widen1(xb[(size_t)m * K + k]) : xf[(size_t)m * K + k];
            long q = lrint(v / (double)sxf);
            q = q > range ? range : q < -range ? -range : q;
            double d = fabs(v - (double)sxf * (double)q);
            err = d > err ? d : err;
            xi[(size_t)m * K + k] = (int16_t)q;
        }
        sx[m] = sxf;
        x1[m] = (float)(l1 * (1.0 + 1e-6));
        ex[m] = (float)(err * (1.0 + 1e-6) + 1e-30);
    }
    return 0;
}

/* lower[m] = the largest of the threads' lower bounds for row m (lows: 16 per thread) */
static void head_lower_bounds(const float *lows, int nthreads, int M, float *lower) {
    for (int m = 0; m < M; m++) {
        float best = -INFINITY;
        for (int t = 0; t < nthreads; t++) best = lows[t * 16 + m] > best ? lows[t * 16 + m] : best;
        lower[m] = best;
    }
}

#if defined(__AVX2__)
/* ---- bounds on an output head's logits without AMX (see foretell_head_bounds_amx for what they promise) ----
 * foretell_head_bounds_int8: x float32 rows (M <= 16; bf16 inputs widened, exactly), q the int8 copy row-major
 * [N][K] (N a multiple of 16, K of 16). Each row of x is scaled to int16 values within +-R, R = min(32767,
 * (2^31 - 1) / (127 K)), so the int32 sums D = sum q xi on VPMADDWD cannot overflow; then A, U and L as there.
 * 8 weight rows at a time (7 KB for the 0.5B: in L1 while every input row reads them), one row's 8 sums from 8
 * accumulators by a tree of horizontal adds. */
int foretell_head_bounds_int8(const float *x, const int8_t *q, const float *s, const float *a, const float *c,
                              float *y, float *top, float *lower, int M, int N, int K, int threads) {
    if (K % 16 || N % 16 || M <= 0 || M > 16 || K > 16384) return -1;
    const long range = 2147483647L / (127L * K) < 32767 ? 2147483647L / (127L * K) : 32767;
    int16_t *xs = aligned_alloc(64, (size_t)16 * K * sizeof(int16_t));
    if (!xs) return -1;
    float sx[16], x1[16], ex[16];
    if (head_rows_int16(NULL, x, M, K, range, xs, sx, x1, ex)) { free(xs); return -2; }
    float lows[64 * 16];
    const int nthreads = threads < 64 ? threads : 64;
    for (int i = 0; i < nthreads * 16; i++) lows[i] = -INFINITY;
    #pragma omp parallel num_threads(nthreads)
    {
        __m256 lmax[16];
        for (int m = 0; m < 16; m++) lmax[m] = _mm256_set1_ps(-INFINITY);
        #pragma omp for schedule(static)
        for (int blk = 0; blk < N / 16; blk++) {
            float tmax[16];
            for (int m = 0; m < M; m++) tmax[m] = -INFINITY;
            for (int half = 0; half < 2; half++) {
                const int j0 = blk * 16 + half * 8;
                const int8_t *wr = q + (size_t)j0 * K;
                for (int l = 0; l < 8 * K; l += 64) _mm_prefetch((const char *)(wr + 16 * K + l), _MM_HINT_T0);
                const __m256 sj = _mm256_loadu_ps(s + j0), aj = _mm256_loadu_ps(a + j0), cj = _mm256_loadu_ps(c + j0);
                for (int m = 0; m < M; m++) {
                    __m256i acc[8];
                    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_si256();
                    const int16_t *xm = xs + (size_t)m * K;
                    for (int k0 = 0; k0 < K; k0 += 16) {
                        const __m256i xv = _mm256_load_si256((const __m256i *)(xm + k0));
                        for (int r = 0; r < 8; r++) {
                            __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wr + (size_t)r * K + k0)));
                            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(w, xv));
                        }
                    }
                    __m256i t0 = _mm256_hadd_epi32(acc[0], acc[1]), t1 = _mm256_hadd_epi32(acc[2], acc[3]);
                    __m256i t2 = _mm256_hadd_epi32(acc[4], acc[5]), t3 = _mm256_hadd_epi32(acc[6], acc[7]);
                    __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
                    __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                                   _mm256_permute2x128_si256(u0, u1, 0x31));
                    __m256 ssx = _mm256_mul_ps(sj, _mm256_set1_ps(sx[m]));
                    __m256 av = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), ssx);
                    __m256 b = _mm256_fmadd_ps(aj, _mm256_set1_ps(x1[m]), _mm256_fmadd_ps(cj, _mm256_set1_ps(ex[m]),
                                               _mm256_mul_ps(ssx, _mm256_set1_ps(8.0f))));
                    __m256 mag = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), av);
                    b = _mm256_fmadd_ps(b, _mm256_set1_ps(1.0f + 0x1p-7f),
                                        _mm256_fmadd_ps(mag, _mm256_set1_ps(0x1p-8f + 0x1p-16f), _mm256_set1_ps(1e-30f)));
                    const __m256 up = _mm256_add_ps(av, b);
                    _mm256_storeu_ps(y + (size_t)m * N + j0, up);
                    lmax[m] = _mm256_max_ps(lmax[m], _mm256_sub_ps(av, b));
                    float lanes[8];
                    _mm256_storeu_ps(lanes, up);
                    for (int i = 0; i < 8; i++) tmax[m] = lanes[i] > tmax[m] ? lanes[i] : tmax[m];
                }
            }
            for (int m = 0; m < M; m++) top[(size_t)m * (N / 16) + blk] = tmax[m];
        }
        const int t = omp_get_thread_num();
        for (int m = 0; m < M; m++) {
            float lanes[8], best = -INFINITY;
            _mm256_storeu_ps(lanes, lmax[m]);
            for (int i = 0; i < 8; i++) best = lanes[i] > best ? lanes[i] : best;
            lows[t * 16 + m] = best;
        }
    }
    head_lower_bounds(lows, nthreads, M, lower);
    free(xs);
    return 0;
}
#endif

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
/* ---- the same products on AMX tiles (Sapphire Rapids and later) ----
 * foretell_linear_amx: y = x w^T (+ b) for bf16 inputs with bf16 weights, stored (w) or decoded from GGUF blocks
 * (wq, fmt), K a multiple of 32. Each output is one chain of TDPBF16PS over K, 32 values a step, from zero, in
 * one fixed order: a tile C (16 weight rows x 16 input rows, fp32) += A (16 weight rows x 32 values, read
 * straight from the weights) . B (the same 32 values of 16 input rows, as pairs). An element of C depends only
 * on its weight row and its input row: a row's result is the same bits whatever the other rows of the call
 * (input rows are padded with zeros to a multiple of 16, weight rows past N read from a zeroed copy). Its sums
 * round differently from tile_dot's, so a layer must take one route for every row that needs logits. One
 * weight tile feeds up to 4 input tiles, so a verify pass reads its weights once per 64 rows. */
#include <sys/syscall.h>
#include <unistd.h>

typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

/* asks Linux for the AMX tile state of this process (0 where granted); before any other call below */
int foretell_amx_init(void) {
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 0 : -1;
}

static void amx_rows_config(int rows) { /* tiles 0-4 of ``rows`` rows (C and A), 5-7 of 16 (B); 64 bytes each */
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = t < 5 ? rows : 16;
    _tile_loadconfig(&c);
}
static void amx_begin(void) { amx_rows_config(16); } /* every tile: 16 rows of 64 bytes */

/* x (M, K) into B tiles: p[(mb KB + kb) 256 + r 16 + m] = the pair x[16 mb + m, 32 kb + 2 r + {0, 1}] as one 32-bit
 * value, zeros for rows past M: 16 rows x 16 pairs, transposed */
static inline void amx_pack(const bf16 *x, int M, int K, int mb, int kb, uint32_t *p) {
    vec r[16];
    for (int m = 0; m < 16; m++)
        r[m] = 16 * mb + m < M ? _mm512_loadu_ps((const float *)(x + (size_t)(16 * mb + m) * K + 32 * kb)) : VZERO();
    transpose_tile(r);
    uint32_t *t = p + ((size_t)mb * (K / 32) + kb) * 256;
    for (int rr = 0; rr < 16; rr++) vstore((float *)(t + rr * 16), r[rr]);
}

/* C tile (weight rows i, input rows m) from buf into y[(16 mb + m) N + n0 + i] (+ b[n0 + i]; rnd as round_bf16;
 * rnd 2: y holds bf16, each output those rounded bits, a NaN torch's 0x7fc0) */
static inline void amx_store(const float *buf, int mb, int M, int n0, int nv, int N, const float *b, int rnd,
                             void *out) {
    float *y = out;
    bf16 *yb = out;
    int rows = M - 16 * mb < 16 ? M - 16 * mb : 16;
    if (nv == 16) { /* a column of the tile at a time: the same sum, bias and rounding as below, 16 lanes */
        const __m512i col = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(16));
        __m512 bias = b ? _mm512_loadu_ps(b + n0) : _mm512_setzero_ps();
        for (int m = 0; m < rows; m++) {
            __m512 t = _mm512_add_ps(_mm512_i32gather_ps(col, buf + m, 4), bias);
            if (rnd) {
                __m512i v = _mm512_castps_si512(t);
                __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
                __m512i r16 = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(0x7fff)), lsb),
                                               _mm512_set1_epi32((int)0xffff0000u));
                __mmask16 ord = _mm512_cmp_ps_mask(t, t, _CMP_ORD_Q);
                if (rnd == 2) {
                    __m512i bits = _mm512_mask_blend_epi32(ord, _mm512_set1_epi32(0x7fc0), _mm512_srli_epi32(r16, 16));
                    _mm256_storeu_si256((__m256i *)(yb + (size_t)(16 * mb + m) * N + n0), _mm512_cvtepi32_epi16(bits));
                    continue;
                }
                t = _mm512_mask_blend_ps(ord, t, _mm512_castsi512_ps(r16));
            }
            _mm512_storeu_ps(y + (size_t)(16 * mb + m) * N + n0, t);
        }
        return;
    }
    for (int m = 0; m < rows; m++) {
        size_t o = (size_t)(16 * mb + m) * N + n0;
        for (int i = 0; i < nv; i++) {
            float v = buf[i * 16 + m] + (b ? b[n0 + i] : 0.0f);
            if (rnd == 2) {
                unsigned int u;
                v = round_bf16(v);
                __builtin_memcpy(&u, &v, sizeof u);
                yb[o + i] = v == v ? (bf16)(u >> 16) : 0x7fc0;
            } else {
                y[o + i] = rnd ? round_bf16(v) : v;
            }
        }
    }
}

/* 16 weight rows (w, K values each) against every input tile, 4 input tiles at a time (C tiles 0-3, the
 * weights in tile 4, the inputs in 5-7). The weight tile's 16 rows lie K values apart: the hardware prefetchers
 * follow 16 such streams poorly, so each step first asks for the rows' values AMX_PREFETCH steps ahead. Measured
 * on the 2-core Sapphire Rapids VM (bf16 weights cold, 2 threads, each call against the same call without it,
 * interleaved): 4864 x 896 with 48-128 rows 10-35% faster, the 0.5B's head 151936 x 896 with 48-128 rows 15-25%
 * faster, one row unchanged. The products, their order and so the bits are the same. */
#define AMX_PREFETCH 8
static void amx_rows(const bf16 *w, int K, const uint32_t *xp, int tiles, int M, int n0, int nv, int N,
                     const float *b, int rnd, void *y, float *buf) {
    int KB = K / 32;
    size_t step = (size_t)KB * 256; /* one input tile's pairs */
    for (int mb0 = 0; mb0 < tiles; mb0 += 4) {
        int cnt = tiles - mb0 < 4 ? tiles - mb0 : 4;
        const uint32_t *x0 = xp + (size_t)mb0 * step;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int kb = 0; kb < KB; kb++) {
            const uint32_t *xb = x0 + (size_t)kb * 256;
            if (kb + AMX_PREFETCH < KB)
                for (int r = 0; r < 16; r++)
                    _mm_prefetch((const char *)(w + (size_t)r * K + (size_t)(kb + AMX_PREFETCH) * 32), _MM_HINT_T0);
            _tile_loadd(4, w + (size_t)kb * 32, (long)K * 2);
            _tile_loadd(5, xb, 64);
            _tile_dpbf16ps(0, 4, 5);
            if (cnt > 1) {
                _tile_loadd(6, xb + step, 64);
                _tile_dpbf16ps(1, 4, 6);
            }
            if (cnt > 2) {
                _tile_loadd(7, xb + 2 * step, 64);
                _tile_dpbf16ps(2, 4, 7);
            }
            if (cnt > 3) {
                _tile_loadd(5, xb + 3 * step, 64);
                _tile_dpbf16ps(3, 4, 5);
            }
        }
        _tile_stored(0, buf, 64);
        if (cnt > 1) _tile_stored(1, buf + 256, 64);
        if (cnt > 2) _tile_stored(2, buf + 512, 64);
        if (cnt > 3) _tile_stored(3, buf + 768, 64);
        for (int j = 0; j < cnt; j++) amx_store(buf + 256 * j, mb0 + j, M, n0, nv, N, b, rnd, y);
    }
}

/* y (M, N) = x w^T (+ b): w (N, K) bf16, or wq in GGUF format fmt (then w is unused); y float32, or bf16 with
 * rnd 2 (see amx_store); 0, or -1 where K or the format does not fit */
int foretell_linear_amx(const bf16 *x, const bf16 *w, const uint8_t *wq, int fmt, const float *b, void *y, int M,
                        int N, int K, int threads, int rnd) {
    if (K % 32 || M <= 0 || N <= 0) return -1;
    if (wq && (!q_block_bytes(fmt) || K % q_block_values(fmt))) return -1;
    size_t row_bytes = wq ? (size_t)K / q_block_values(fmt) * q_block_bytes(fmt) : 0;
    int tiles = (M + 15) / 16, blocks = (N + 15) / 16, KB = K / 32;
    const size_t xp_n = (size_t)tiles * KB * 256, wide_n = (size_t)16 * K / 2; /* floats */
    float *ws = workspace(xp_n + (wq || N % 16 ? (size_t)threads * wide_n : 0));
    uint32_t *xp = (uint32_t *)ws;
    #pragma omp parallel num_threads(threads)
    {
        #pragma omp for schedule(static)
        for (int i = 0; i < tiles * KB; i++) amx_pack(x, M, K, i / KB, i % KB, xp);
        float buf[4 * 256] __attribute__((aligned(64)));
        bf16 *wide = wq || N % 16 ? (bf16 *)(ws + xp_n + (size_t)omp_get_thread_num() * wide_n) : NULL;
        amx_begin();
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int n0 = blk * 16, nv = N - n0 < 16 ? N - n0 : 16;
            const bf16 *wb = w ? w + (size_t)n0 * K : NULL;
            if (nv < 16 || wq) {
                if (nv < 16) memset(wide, 0, (size_t)16 * K * sizeof(bf16));
                if (wq) dq_rows(wq, fmt, row_bytes, n0, nv, K, wide);
                else memcpy(wide, wb, (size_t)nv * K * sizeof(bf16));
                wb = wide;
            }
            amx_rows(wb, K, xp, tiles, M, n0, nv, N, b, rnd, y, buf);
        }
        _tile_release();
    }
    return 0;
}

/* ---- attention for the queries that need logits, on AMX tiles ----
 * foretell_attention_amx: arguments and result as foretell_attention_bf16_rows, D a multiple of 64. Per query head
 * and block of 16 queries: scores Q K^T on tiles (16 queries x 16 keys, 32 dimensions a step), scaled, the keys
 * outside a query's own range set to -inf; softmax in fp32, the sum in 16 lanes (lane = key mod 16, in key
 * order) then one horizontal sum; the probabilities rounded to bf16 (as FlashAttention rounds P); then P V on
 * tiles (16 queries x 16 dimensions, 32 keys a step), divided by the sum. A block spans its queries' keys from a
 * multiple of 32; keys outside a query's range add exact zeros to its sums, so a query's bits depend only on its
 * own keys, whatever the other queries of the call (keys past the last range are packed as zeros). A block of
 * fewer than 16 queries (a decode token, a call's last block) runs on tiles of that many rows: a row of a tile
 * product depends on its own row of the first operand alone, so nothing is computed, stored or cleared for
 * absent queries (one query after 8,192 keys: 1.61 -> 1.13 ms a layer, the same bits). Where it takes fewer blocks
 * (and leaves no thread idle), a block's rows are a KV head's query heads for each query in turn ("stacked"): a
 * decode token is one block of 7 rows per KV head (the 0.5B) in place of 7 blocks of one row, and its keys and
 * values are read once for the 7 (0.74 -> 0.40 ms a layer after 8,192 keys, the same bits). With a head size of
 * 64, full blocks go in pairs: both blocks' queries stay in four tiles while each 16 keys' two tiles are loaded
 * once for the 32 rows (a score tile still sums its two products in the same order), and a pair spans both
 * blocks' keys (those outside a query's range add exact zeros, as above). The softmax takes the max of the raw
 * scores (x -> fl(x scale) is monotonic for scale > 0) and masks only the 16-key groups a query's range cuts.
 * Both keep the bits; a 128-token pass after 4,096 keys 0.93x the time (the 0.5B, 2026-11-28). */
int foretell_attention_amx(const bf16 *q, const bf16 *k, const bf16 *v, float *out, const int *first,
                           const int *end, int T_, int H, int G, int D, long kv_stride, float scale, int threads) {
    if (D % 64 || T_ <= 0 || G <= 0 || H % G) return -1;
    const int rep = H / G, KD = D / 32, DB = D / 16;
    /* Blocks of 16 rows. Stacked: a KV head's rows are its query heads' rows for every query, query-major, so
     * its keys and values are read once for all of them (a decode token: one block of 7 rows in place of 7
     * blocks of one); else a query head's rows are its queries. A row's bits are the same either way. */
    const int stacked = G * ((rep * T_ + 15) / 16) < H * ((T_ + 15) / 16) && G * ((rep * T_ + 15) / 16) >= threads;
    const int units = stacked ? G : H, per = stacked ? rep * T_ : T_, blocks = (per + 15) / 16;
    /* D = 64: full blocks go in pairs (their keys' tiles loaded once for both), then the rest one by one */
    const int paired = D == 64 ? per / 32 : 0, items = blocks - paired;
    int lo = first[0], hi = end[0];
    for (int t = 1; t < T_; t++) { lo = first[t] < lo ? first[t] : lo; hi = end[t] > hi ? end[t] : hi; }
    lo &= ~31;
    const int W = ((hi + 31) & ~31) - lo; /* keys [lo, lo + W) packed, zeros from hi */
    const size_t kp_n = (size_t)G * W * D / 2, scratch = (size_t)32 * W + 8 * W + 16 * D + 16 * 64 + 16;
    float *ws = workspace(2 * kp_n + (size_t)threads * scratch);
    u32 *kp = (u32 *)ws, *vp = (u32 *)ws + kp_n;
    _Pragma("omp parallel num_threads(threads)")
    {
        _Pragma("omp for schedule(static)")
        for (int gj = 0; gj < G * (W / 16); gj++) { /* 16 keys: per 32 dimensions, pairs x keys */
            int g = gj / (W / 16), j0 = gj % (W / 16) * 16, keys = hi - lo - j0 < 16 ? hi - lo - j0 : 16;
            const bf16 *src = k + g * kv_stride + (size_t)(lo + j0) * D;
            for (int kd = 0; kd < KD; kd++) {
                vec r[16];
                for (int jj = 0; jj < 16; jj++)
                    r[jj] = jj < keys ? _mm512_loadu_ps((const float *)(src + (size_t)jj * D + kd * 32)) : VZERO();
                transpose_tile(r);
                u32 *dst = kp + (((size_t)g * (W / 16) + j0 / 16) * KD + kd) * 256;
                for (int rr = 0; rr < 16; rr++) vstore((float *)(dst + rr * 16), r[rr]);
            }
        }
        _Pragma("omp for schedule(static)")
        for (int gi = 0; gi < G * (W / 2); gi++) { /* value pairs: (v[j][d], v[j + 1][d]) per dimension d */
            int g = gi / (W / 2), i = gi % (W / 2), j = lo + 2 * i, js = i / 16, r = i % 16;
            const bf16 *r0 = v + g * kv_stride + (size_t)j * D, *r1 = r0 + D;
            for (int db = 0; db < DB; db++) {
                __m512i a = j < hi ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r0 + db * 16)))
                                   : _mm512_setzero_si512();
                __m512i b = j + 1 < hi ? _mm512_slli_epi32(_mm512_cvtepu16_epi32(
                                             _mm256_loadu_si256((const __m256i *)(r1 + db * 16))), 16)
                                       : _mm512_setzero_si512();
                _mm512_storeu_si512(vp + (((size_t)g * (W / 32) + js) * DB + db) * 256 + r * 16, _mm512_or_si512(a, b));
            }
        }
        float *s = ws + 2 * kp_n + (size_t)omp_get_thread_num() * scratch;
        bf16 *pb = (bf16 *)(s + (size_t)32 * W), *qb16 = (bf16 *)(s + (size_t)40 * W);
        float *ob = s + (size_t)40 * W + 16 * D, *sums = ob + 16 * 64;
        amx_begin();
        int rows = 16; /* the tiles' rows as configured: a block's rows (the last block may hold fewer) */
        _Pragma("omp for schedule(static)")
        for (int it = 0; it < units * items; it++) {
            const int u = it / items, x = it % items, g = stacked ? u : u / rep;
            const int b0 = x < paired ? 2 * x : x + paired, nb = x < paired ? 2 : 1; /* the item's blocks */
            const int r0 = b0 * 16, nr = per - r0 < 16 * nb ? per - r0 : 16 * nb;
            int tq[32], hq[32]; /* each row's query and head */
            for (int i = 0; i < nr; i++) {
                tq[i] = stacked ? (r0 + i) / rep : r0 + i;
                hq[i] = stacked ? u * rep + (r0 + i) % rep : u;
            }
            int blo = first[tq[0]], bhi = end[tq[0]];
            for (int i = 1; i < nr; i++) {
                blo = first[tq[i]] < blo ? first[tq[i]] : blo;
                bhi = end[tq[i]] > bhi ? end[tq[i]] : bhi;
            }
            const int o0 = (blo & ~31) - lo, o1 = ((bhi + 31) & ~31) - lo; /* the item's keys, from lo */
            const u32 *kg = kp + (size_t)g * (W / 16) * KD * 256, *vg = vp + (size_t)g * (W / 32) * DB * 256;
            memset(qb16, 0, (size_t)16 * nb * D * sizeof(bf16));
            for (int i = 0; i < nr; i++) memcpy(qb16 + (size_t)i * D, q + ((size_t)hq[i] * T_ + tq[i]) * D, D * sizeof(bf16));
            if (nb == 2) { /* two full blocks, D = 64: both blocks' queries stay in tiles 2-5, each key tile
                            * loaded once for 32 rows; a score tile sums its two products in the same order */
                if (rows != 16) amx_rows_config(rows = 16);
                _tile_loadd(2, qb16, (long)D * 2);
                _tile_loadd(3, qb16 + 32, (long)D * 2);
                _tile_loadd(4, qb16 + 16 * D, (long)D * 2);
                _tile_loadd(5, qb16 + 16 * D + 32, (long)D * 2);
                for (int jb = o0 / 16; jb < o1 / 16; jb++) {
                    const u32 *kb = kg + (size_t)jb * KD * 256;
                    _tile_zero(0);
                    _tile_zero(1);
                    _tile_loadd(6, kb, 64);
                    _tile_loadd(7, kb + 256, 64);
                    _tile_dpbf16ps(0, 2, 6);
                    _tile_dpbf16ps(1, 4, 6);
                    _tile_dpbf16ps(0, 3, 7);
                    _tile_dpbf16ps(1, 5, 7);
                    float *sc = s + (size_t)jb * 16 - o0;
                    _tile_stored(0, sc, (long)W * 4);
                    _tile_stored(1, sc + (size_t)16 * W, (long)W * 4);
                }
            } else {
                if (nr != rows) amx_rows_config(rows = nr); /* a row of C depends on its own row of A alone */
                for (int jb = o0 / 16; jb < o1 / 16; jb += 4) { /* scores, 64 keys at a time */
                    int cnt = o1 / 16 - jb < 4 ? o1 / 16 - jb : 4;
                    _tile_zero(0);
                    _tile_zero(1);
                    _tile_zero(2);
                    _tile_zero(3);
                    for (int kd = 0; kd < KD; kd++) {
                        const u32 *kb = kg + ((size_t)jb * KD + kd) * 256;
                        _tile_loadd(4, qb16 + kd * 32, (long)D * 2);
                        _tile_loadd(5, kb, 64);
                        _tile_dpbf16ps(0, 4, 5);
                        if (cnt > 1) { _tile_loadd(6, kb + KD * 256, 64); _tile_dpbf16ps(1, 4, 6); }
                        if (cnt > 2) { _tile_loadd(7, kb + 2 * KD * 256, 64); _tile_dpbf16ps(2, 4, 7); }
                        if (cnt > 3) { _tile_loadd(5, kb + 3 * KD * 256, 64); _tile_dpbf16ps(3, 4, 5); }
                    }
                    float *sc = s + (size_t)jb * 16 - o0;
                    _tile_stored(0, sc, (long)W * 4);
                    if (cnt > 1) _tile_stored(1, sc + 16, (long)W * 4);
                    if (cnt > 2) _tile_stored(2, sc + 32, (long)W * 4);
                    if (cnt > 3) _tile_stored(3, sc + 48, (long)W * 4);
                }
            }
            for (int bi = 0; bi < nb; bi++) { /* softmax and P V, a block at a time */
                const int nt = nr - 16 * bi < 16 ? nr - 16 * bi : 16;
                const int *tqb = tq + 16 * bi, *hqb = hq + 16 * bi;
                float *sb = s + (size_t)16 * bi * W;
                if (nt != rows) amx_rows_config(rows = nt);
                const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                const vec sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
                for (int i = 0; i < nt; i++) { /* softmax of each query's own keys (the tiles hold no other rows) */
                    float *sr = sb + (size_t)i * W;
                    bf16 *pr = pb + (size_t)i * W;
                    const int base = lo + o0, L = o1 - o0; /* column c holds key base + c */
                    const __m512i f = _mm512_set1_epi32(first[tqb[i]]), e = _mm512_set1_epi32(end[tqb[i]]);
                    /* columns [c0, c1) lie in 16-key groups wholly inside the query's range: no masks there */
                    int c0 = (first[tqb[i]] - base + 15) & ~15, c1 = (end[tqb[i]] - base) & ~15;
                    if (c0 < 0) c0 = 0;
                    if (c1 > L) c1 = L;
                    if (c1 < c0) c1 = c0;
                    /* the max of the raw scores: x -> fl(x scale) is monotonic for scale > 0, so
                     * fl(max x scale) = max fl(x scale), the max of the scaled scores */
                    vec mx = ninf;
                    for (int c = 0; c < L; c += 16) {
                        vec x = _mm512_loadu_ps(sr + c);
                        if (c < c0 || c >= c1) {
                            __m512i j = _mm512_add_epi32(lane, _mm512_set1_epi32(base + c));
                            __mmask16 in = _mm512_cmpge_epi32_mask(j, f) & _mm512_cmplt_epi32_mask(j, e);
                            x = _mm512_mask_mov_ps(ninf, in, x);
                        }
                        mx = _mm512_max_ps(mx, x);
                    }
                    const vec m = _mm512_mul_ps(_mm512_set1_ps(_mm512_reduce_max_ps(mx)), sc);
                    vec acc = VZERO();
                    for (int c = 0; c < L; c += 16) {
                        vec p = vexp(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sr + c), sc), m));
                        if (c < c0 || c >= c1) {
                            __m512i j = _mm512_add_epi32(lane, _mm512_set1_epi32(base + c));
                            p = _mm512_maskz_mov_ps(_mm512_cmpge_epi32_mask(j, f) & _mm512_cmplt_epi32_mask(j, e), p);
                        }
                        acc = _mm512_add_ps(acc, p);
                        _mm256_storeu_si256((__m256i *)(pr + c), (__m256i)_mm512_cvtneps_pbh(p));
                    }
                    sums[i] = _mm512_reduce_add_ps(acc);
                }
                for (int dh = 0; dh < D; dh += 64) { /* P V, 64 dimensions at a time */
                    const u32 *vd = vg + dh / 16 * 256;
                    _tile_zero(0);
                    _tile_zero(1);
                    _tile_zero(2);
                    _tile_zero(3);
                    for (int js = o0 / 32; js < o1 / 32; js++) {
                        const u32 *vb = vd + (size_t)js * DB * 256;
                        _tile_loadd(4, pb + (size_t)js * 32 - o0, (long)W * 2);
                        _tile_loadd(5, vb, 64);
                        _tile_dpbf16ps(0, 4, 5);
                        _tile_loadd(6, vb + 256, 64);
                        _tile_dpbf16ps(1, 4, 6);
                        _tile_loadd(7, vb + 512, 64);
                        _tile_dpbf16ps(2, 4, 7);
                        _tile_loadd(5, vb + 768, 64);
                        _tile_dpbf16ps(3, 4, 5);
                    }
                    _tile_stored(0, ob, 256);
                    _tile_stored(1, ob + 16, 256);
                    _tile_stored(2, ob + 32, 256);
                    _tile_stored(3, ob + 48, 256);
                    for (int i = 0; i < nt; i++) {
                        float *o = out + ((size_t)hqb[i] * T_ + tqb[i]) * D + dh;
                        const vec inv = _mm512_set1_ps(sums[i]);
                        for (int d = 0; d < 64; d += 16) _mm512_storeu_ps(o + d, _mm512_div_ps(_mm512_loadu_ps(ob + i * 64 + d), inv));
                    }
                }
            }
        }
        _tile_release();
    }
    return 0;
}
#if defined(__AMX_INT8__)
/* ---- bounds on an output head's logits, for rows whose caller needs only the argmax ----
 * foretell_head_bounds_amx: M <= 16 bf16 input rows x (K values, K a multiple of 64) against an int8 copy of the
 * head (row j ~ s[j] q[j], q packed by the caller in B-tile order: per 16 rows and 64 values, 16 quads of values
 * x 16 rows x 4 bytes). Writes y[m N + j] = U, an upper bound of logit j of row m as the exact kernel gives it
 * (rounded to bf16), top[m N / 16 + j / 16] = the largest U of each 16 columns, and lower[m] = the largest lower
 * bound L over j. Every j with U < lower[m] lies below the row's maximum, so only the others need their exact
 * logit.
 * Each row of x is scaled to int16 values xi (sx = max|x| / 32767; ex = max |x - sx xi|, both exact in double),
 * split into a signed high byte and an unsigned low one: D = sum q xi = 256 sum q hi + sum q lo, exact int32 sums
 * on TDPBSSD / TDPBUSD. A = s_j sx D. With the caller's a_j >= max_k |w_jk - s_j q_jk| + K 2^-24 max_k |w_jk| (the
 * quantisation error, and the error of the exact kernel's fp32 sums over K products) and c_j = s_j sum_k |q_jk|,
 * |logit - A| <= a_j |x|_1 + c_j ex, plus 2^-8 |logit| for its rounding to bf16; the bound here is that, inflated to
 * cover float rounding (its own and D's: D's low sum may exceed 2^24). */
#ifndef HEAD_PREFETCH
#define HEAD_PREFETCH 8 /* weight tiles (1 KB) asked for ahead of the one being read */
#endif
static void amx_int8_config(int rows) { /* C tiles 0-1 and A tiles 3-4 of ``rows`` rows, B tile 2 of 16; 64 bytes */
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 5; t++) c.colsb[t] = 64, c.rows[t] = t == 2 ? 16 : rows;
    _tile_loadconfig(&c);
}

int foretell_head_bounds_amx(const bf16 *x, const int8_t *qp, const float *s, const float *a, const float *c,
                             float *y, float *top, float *lower, int M, int N, int K, int threads) {
    if (K % 64 || N % 16 || M <= 0 || M > 16) return -1;
    if (K > 4096) return -1;
    const int KB = K / 64, blocks = N / 16;
    int16_t *xi = aligned_alloc(64, (size_t)4 * 16 * K); /* the rows' int16 values, then their high and low bytes */
    if (!xi) return -1;
    int8_t *hi = (int8_t *)(xi + (size_t)16 * K);
    uint8_t *lo = (uint8_t *)hi + (size_t)16 * K;
    float sx[16], x1[16], ex[16];
    if (head_rows_int16(x, NULL, M, K, 32767, xi, sx, x1, ex)) { free(xi); return -2; }
    for (size_t i = 0; i < (size_t)M * K; i++) { /* xi = 256 hi + lo, hi in [-128, 127], lo in [0, 255] */
        hi[i] = (int8_t)(xi[i] >> 8);
        lo[i] = (uint8_t)(xi[i] & 255);
    }
    float lows[64 * 16];
    int nthreads = threads < 64 ? threads : 64;
    for (int i = 0; i < nthreads * 16; i++) lows[i] = -INFINITY;
    #pragma omp parallel num_threads(nthreads)
    {
        int32_t ch[16 * 16] __attribute__((aligned(64))), cl[16 * 16] __attribute__((aligned(64)));
        vec lmax[16];
        for (int m = 0; m < 16; m++) lmax[m] = _mm512_set1_ps(-INFINITY);
        amx_int8_config(M);
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            const int8_t *wb = qp + (size_t)blk * KB * 1024;
            _tile_zero(0);
            _tile_zero(1);
            for (int kb = 0; kb < KB; kb++) {
                const char *ahead = (const char *)(wb + (size_t)(kb + HEAD_PREFETCH) * 1024);
                for (int l = 0; l < 1024; l += 64) _mm_prefetch(ahead + l, _MM_HINT_T0);
                _tile_loadd(2, wb + (size_t)kb * 1024, 64);
                _tile_loadd(3, hi + kb * 64, K);
                _tile_loadd(4, lo + kb * 64, K);
                _tile_dpbssd(0, 3, 2);
                _tile_dpbusd(1, 4, 2);
            }
            _tile_stored(0, ch, 64);
            _tile_stored(1, cl, 64);
            const int n0 = blk * 16;
            const vec sj = _mm512_loadu_ps(s + n0), aj = _mm512_loadu_ps(a + n0), cj = _mm512_loadu_ps(c + n0);
            for (int m = 0; m < M; m++) {
                vec d = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ch + m * 16)), _mm512_set1_ps(256.0f),
                                        _mm512_cvtepi32_ps(_mm512_load_si512(cl + m * 16)));
                vec ssx = _mm512_mul_ps(sj, _mm512_set1_ps(sx[m]));
                vec av = _mm512_mul_ps(d, ssx);
                vec b = _mm512_fmadd_ps(aj, _mm512_set1_ps(x1[m]), _mm512_fmadd_ps(cj, _mm512_set1_ps(ex[m]),
                                        _mm512_mul_ps(ssx, _mm512_set1_ps(8.0f))));
                vec mag = _mm512_abs_ps(av);
                b = _mm512_fmadd_ps(b, _mm512_set1_ps(1.0f + 0x1p-7f),
                                    _mm512_fmadd_ps(mag, _mm512_set1_ps(0x1p-8f + 0x1p-16f), _mm512_set1_ps(1e-30f)));
                const vec up = _mm512_add_ps(av, b);
                _mm512_storeu_ps(y + (size_t)m * N + n0, up);
                top[(size_t)m * blocks + blk] = _mm512_reduce_max_ps(up);
                lmax[m] = _mm512_max_ps(lmax[m], _mm512_sub_ps(av, b));
            }
        }
        _tile_release();
        int t = omp_get_thread_num();
        for (int m = 0; m < M; m++) lows[t * 16 + m] = _mm512_reduce_max_ps(lmax[m]);
    }
    head_lower_bounds(lows, nthreads, M, lower);
    free(xi);
    return 0;
}
#endif

#endif

/* ---- a decoder layer's elementwise steps on fp32 rows (any build: AVX2 or AVX-512), as the bf16 ones below:
 * RMSNorm (with the residual add before it), SiLU(gate) * up and the rotary embedding. Each row by one thread in one
 * fixed sequence, whatever M. Each product and sum is one rounding, as torch's separate fp32 ops round them (vkeep
 * bars the compiler from fusing a product into the next sum); the sum of squares and the exponential are this
 * file's own. ---- */
#if defined(__AVX512F__)
static inline vec vkeep(vec a) { __asm__("" : "+v"(a)); return a; }
static inline vec vdiv(vec a, vec b) { return _mm512_div_ps(a, b); }
static inline vec vabs(vec a) { return _mm512_abs_ps(a); }
static inline vec vsel_lt(vec x, vec y, vec a, vec b) { /* b where x < y, else a */
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_LT_OQ), a, b);
}
#else
static inline vec vkeep(vec a) { __asm__("" : "+x"(a)); return a; }
static inline vec vdiv(vec a, vec b) { return _mm256_div_ps(a, b); }
static inline vec vabs(vec a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vec vsel_lt(vec x, vec y, vec a, vec b) { return _mm256_blendv_ps(a, b, _mm256_cmp_ps(x, y, _CMP_LT_OQ)); }
#endif
static inline vec vload_n(const float *p, int n) { return n >= VW ? VLOAD(p) : vload_tail(p, n); }
static inline void vstore_n(float *p, vec v, int n) {
    if (n >= VW) vstore(p, v);
    else vstore_tail(p, v, n);
}

/* y = w * (h * (1 / sqrt(sum(h^2) / K + eps))) per row of K values; h = x, or x + r (written to h_out, which may be x)
 * where r is given */
void foretell_rmsnorm_f32(const float *x, const float *r, float *h_out, const float *w, float eps, float *y, int M,
                          int K) {
    #pragma omp parallel for schedule(static) if (M > 1)
    for (int m = 0; m < M; m++) {
        const float *xm = x + (size_t)m * K, *hm = xm;
        vec acc = VZERO();
        if (r != NULL) {
            const float *rm = r + (size_t)m * K;
            float *om = h_out + (size_t)m * K;
            for (int k = 0; k < K; k += VW) {
                const vec h = vkeep(vadd(vload_n(xm + k, K - k), vload_n(rm + k, K - k)));
                vstore_n(om + k, h, K - k);
                acc = VFMA(h, h, acc);
            }
            hm = om;
        } else {
            for (int k = 0; k < K; k += VW) {
                const vec h = vload_n(xm + k, K - k);
                acc = VFMA(h, h, acc);
            }
        }
        const vec inv = vset1(1.0f / sqrtf(hsum(acc) / (float)K + eps));
        float *ym = y + (size_t)m * K;
        for (int k = 0; k < K; k += VW)
            vstore_n(ym + k, vmul(vload_n(w + k, K - k), vkeep(vmul(vload_n(hm + k, K - k), inv))), K - k);
    }
}

/* out[h, r, :] = the rotary embedding of x's row r, head h (at x + r ldr + h ldh, D values) with cos[r], sin[r] (fp32
 * [R, D]): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) by halves, each product and sum one rounding, as
 * transformers' apply_rotary_pos_emb computes x cos + rotate_half(x) sin: the same bits. out is [H, R, D]. */
static void rope_f32_to(const float *x, long ldr, long ldh, const float *cos, const float *sin, float *out, long ldo,
                        int H, int R, int D) { /* out[h, r, :] at out + h ldo + r D */
    const int half = D / 2;
    #pragma omp parallel for collapse(2) schedule(static) if ((long)H * R * D >= 65536)
    for (int h = 0; h < H; h++) {
        for (int r = 0; r < R; r++) {
            const float *xr = x + r * ldr + h * ldh, *c = cos + (size_t)r * D, *s = sin + (size_t)r * D;
            float *o = out + h * ldo + (size_t)r * D;
            for (int i = 0; i < half; i += VW) {
                const int n = half - i;
                const vec a = vload_n(xr + i, n), b = vload_n(xr + half + i, n);
                vstore_n(o + i, vsub(vkeep(vmul(a, vload_n(c + i, n))), vkeep(vmul(b, vload_n(s + i, n)))), n);
                vstore_n(o + half + i, vadd(vkeep(vmul(b, vload_n(c + half + i, n))),
                                            vkeep(vmul(a, vload_n(s + half + i, n)))), n);
            }
        }
    }
}

void foretell_rope_f32(const float *x, long ldr, long ldh, const float *cos, const float *sin, float *out, int H, int R,
                       int D) {
    rope_f32_to(x, ldr, ldh, cos, sin, out, (long)R * D, H, R, D);
}

/* y[m, n] = silu(g[m, n]) * u[m, n] for n < N, rows ld values apart in g and u, N apart in y; silu(g) = g / (1 + e^-g),
 * computed as g / (1 + t) or g t / (1 + t) with t = e^-|g| (no overflow), -0 below -87 */
void foretell_silu_mul_f32(const float *g, const float *u, int ld, float *y, int M, int N) {
    #pragma omp parallel for schedule(static) if ((size_t)M * N >= 65536)
    for (int m = 0; m < M; m++) {
        const float *gm = g + (size_t)m * ld, *um = u + (size_t)m * ld;
        float *ym = y + (size_t)m * N;
        for (int n = 0; n < N; n += VW) {
            const vec gv = vload_n(gm + n, N - n);
            const vec t = vexp(vsub(VZERO(), vabs(gv)));
            vec num = vsel_lt(gv, VZERO(), gv, vmul(gv, t));
            num = vsel_lt(gv, vset1(-87.0f), num, vmul(gv, VZERO()));
            const vec silu = vkeep(vdiv(num, vadd(t, vset1(1.0f))));
            vstore_n(ym + n, vmul(silu, vload_n(um + n, N - n)), N - n);
        }
    }
}

/* ---- a decoder layer's elementwise steps on bf16 rows: RMSNorm (with the residual add before it) and SiLU(gate) *
 * up. Each row is computed by one thread in one fixed sequence of instructions, whatever M: a row's bits do not
 * depend on the other rows. Every intermediate that torch's bf16 modules round to bf16 is rounded here too (the
 * residual sum, the normalised row, the SiLU); the sums of squares and the exponential are this file's own, so
 * results may differ from torch's modules in the last bit of a few values (cpu_gemm.py: LayerGlue). ---- */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
static inline __m512 round_bf16_v(__m512 f) { /* each lane to the nearest bf16, ties to even, as an fp32; NaN kept */
    const __m512i u = _mm512_castps_si512(f);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)),
                                       _mm512_set1_epi32((int)0xffff0000u));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_castsi512_ps(r), f);
}
static inline __m256i top_halves(__m512 f) { return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(f), 16)); }
static inline __m512 bload_m(const bf16 *p, __mmask16 k) { return widen(_mm256_maskz_loadu_epi16(k, p)); }
static inline void bstore_m(bf16 *p, __m512 f, __mmask16 k) { _mm256_mask_storeu_epi16(p, k, top_halves(f)); }
static inline __mmask16 lanes_left(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* y = bf16(w * bf16(h / sqrt(mean(h^2) + eps))) per row of K values; h = x, or bf16(x + r) (then written to h_out,
 * which may be x) where r is given */
void foretell_rmsnorm_bf16(const bf16 *x, const bf16 *r, bf16 *h_out, const bf16 *w, float eps, bf16 *y, int M,
                           int K) {
    #pragma omp parallel for schedule(static) if (M > 1)
    for (int m = 0; m < M; m++) {
        const bf16 *xm = x + (size_t)m * K;
        const bf16 *hm = xm;
        __m512 acc = _mm512_setzero_ps();
        if (r != NULL) {
            const bf16 *rm = r + (size_t)m * K;
            bf16 *om = h_out + (size_t)m * K;
            for (int k = 0; k < K; k += 16) {
                const __mmask16 in = lanes_left(K - k);
                const __m512 h = round_bf16_v(_mm512_add_ps(bload_m(xm + k, in), bload_m(rm + k, in)));
                bstore_m(om + k, h, in);
                acc = _mm512_fmadd_ps(h, h, acc);
            }
            hm = om;
        } else {
            for (int k = 0; k < K; k += 16) {
                const __m512 h = bload_m(xm + k, lanes_left(K - k));
                acc = _mm512_fmadd_ps(h, h, acc);
            }
        }
        const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)K + eps));
        bf16 *ym = y + (size_t)m * K;
        for (int k = 0; k < K; k += 16) {
            const __mmask16 in = lanes_left(K - k);
            const __m512 t = round_bf16_v(_mm512_mul_ps(bload_m(hm + k, in), inv));
            bstore_m(ym + k, round_bf16_v(_mm512_mul_ps(bload_m(w + k, in), t)), in);
        }
    }
}

/* out[h, r, :] = the rotary embedding of x's row r, head h (at x + r ldr + h ldh, D values) with cos[r], sin[r] (bf16
 * [R, D]): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) by halves, each product and each sum rounded to bf16, as
 * transformers' apply_rotary_pos_emb computes it in bf16 (x cos + rotate_half(x) sin): the same bits. out is [H, R, D]. */
void foretell_rope_bf16(const bf16 *x, long ldr, long ldh, const bf16 *cos, const bf16 *sin, bf16 *out, int H, int R,
                        int D) {
    const int half = D / 2;
    #pragma omp parallel for collapse(2) schedule(static) if ((long)H * R * D >= 65536)
    for (int h = 0; h < H; h++) {
        for (int r = 0; r < R; r++) {
            const bf16 *xr = x + r * ldr + h * ldh, *c = cos + (size_t)r * D, *s = sin + (size_t)r * D;
            bf16 *o = out + ((size_t)h * R + r) * D;
            for (int i = 0; i < half; i += 16) {
                const __mmask16 in = lanes_left(half - i);
                const __m512 a = bload_m(xr + i, in), b = bload_m(xr + half + i, in);
                const __m512 lo = _mm512_sub_ps(round_bf16_v(_mm512_mul_ps(a, bload_m(c + i, in))),
                                                round_bf16_v(_mm512_mul_ps(b, bload_m(s + i, in))));
                const __m512 hi = _mm512_add_ps(round_bf16_v(_mm512_mul_ps(b, bload_m(c + half + i, in))),
                                                round_bf16_v(_mm512_mul_ps(a, bload_m(s + half + i, in))));
                bstore_m(o + i, round_bf16_v(lo), in);
                bstore_m(o + half + i, round_bf16_v(hi), in);
            }
        }
    }
}

/* y[m, n] = bf16(bf16(silu(g[m, n])) * u[m, n]) for n < N, rows ld values apart in g and u, N apart in y; silu(g) =
 * g / (1 + e^-g), computed as g / (1 + t) or g t / (1 + t) with t = e^-|g| (no overflow) */
void foretell_silu_mul_bf16(const bf16 *g, const bf16 *u, int ld, bf16 *y, int M, int N) {
    #pragma omp parallel for schedule(static) if ((size_t)M * N >= 65536)
    for (int m = 0; m < M; m++) {
        const bf16 *gm = g + (size_t)m * ld, *um = u + (size_t)m * ld;
        bf16 *ym = y + (size_t)m * N;
        for (int n = 0; n < N; n += 16) {
            const __mmask16 in = lanes_left(N - n);
            const __m512 gv = bload_m(gm + n, in);
            const __m512 t = vexp(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(gv)));
            __m512 num = _mm512_mask_mul_ps(gv, _mm512_cmp_ps_mask(gv, _mm512_setzero_ps(), _CMP_LT_OQ), gv, t);
            /* below -87 (where vexp clamps) torch's SiLU is below 1e-36 in size, -0 from -88.7: -0 here */
            num = _mm512_mask_mul_ps(num, _mm512_cmp_ps_mask(gv, _mm512_set1_ps(-87.0f), _CMP_LT_OQ), gv,
                                     _mm512_setzero_ps());
            const __m512 s = round_bf16_v(_mm512_div_ps(num, _mm512_add_ps(t, _mm512_set1_ps(1.0f))));
            bstore_m(ym + n, round_bf16_v(_mm512_mul_ps(s, bload_m(um + n, in))), in);
        }
    }
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#define FORETELL_Q8 1 /* foretell_linear_q8 on VPDPBUSD (below) */
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FORETELL_Q8 2 /* foretell_linear_q8 on VPMADDUBSW (after the VNNI section) */
#endif

#if defined(FORETELL_Q8)
/* ---- the GGUF block formats of the int8 route (either build) ---- */
enum { GGUF_Q6_K = 14 }; /* int8 route only (the bf16 decoder above does not take it) */

/* bytes and values of a block of a format the int8 route takes; 0 bytes for others */
static inline int q8_block_bytes(int fmt) { return fmt == GGUF_Q6_K ? 210 : q_block_bytes(fmt); }
static inline int q8_block_values(int fmt) { return fmt == GGUF_Q6_K ? 256 : q_block_values(fmt); }
/* the formats whose weight values are stored unsigned with an offset (w = d (q - offset)): Q5_0 16, Q6_K 32 */
static inline int q8_offset(int fmt) { return fmt == GGUF_Q5_0 ? 16 : fmt == GGUF_Q6_K ? 32 : 0; }

/* Q4_K's 6-bit scale and min of sub-block j (ggml's get_scale_min_k4) */
static inline void q4k_scale_min(const uint8_t *sc, int j, int *s, int *m) {
    *s = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
    *m = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
}

/* the GGUF file's values of rows [n0, n0 + n) of w, in fp32 (ggml's reference decoder: exact products) */
int foretell_q8_decode(const uint8_t *w, int fmt, int n0, int n, int K, float *out) {
    const int per = q8_block_values(fmt);
    if (!q8_block_bytes(fmt) || K % per) return -1;
    const size_t row_bytes = (size_t)K / per * q8_block_bytes(fmt);
    for (int r = 0; r < n; r++) {
        const uint8_t *row = w + (size_t)(n0 + r) * row_bytes;
        float *o = out + (size_t)r * K;
        for (int blk = 0; blk < K / per; blk++) {
            const uint8_t *p = row + (size_t)blk * q8_block_bytes(fmt);
            float *ob = o + (size_t)blk * per;
            if (fmt == GGUF_Q8_0) {
                for (int i = 0; i < 32; i++) ob[i] = half1(p) * (float)(int8_t)p[2 + i];
            } else if (fmt == GGUF_Q5_0) {
                uint32_t qh;
                memcpy(&qh, p + 2, 4);
                for (int i = 0; i < 16; i++) {
                    int lo = (p[6 + i] & 15) | (((qh >> i) & 1) << 4), hi = (p[6 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
                    ob[i] = half1(p) * (float)(lo - 16);
                    ob[i + 16] = half1(p) * (float)(hi - 16);
                }
            } else if (fmt == GGUF_Q6_K) { /* ggml's dequantize_row_q6_K */
                const float d = half1(p + 208);
                const uint8_t *ql = p, *qh = p + 128;
                const int8_t *sc = (const int8_t *)(p + 192);
                for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8)
                    for (int l = 0; l < 32; l++) {
                        const int is = l / 16;
                        float *oh = ob + 128 * h;
                        oh[l] = d * (float)sc[is] * (float)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
                        oh[l + 32] = d * (float)sc[is + 2] * (float)(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
                        oh[l + 64] = d * (float)sc[is + 4] * (float)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                        oh[l + 96] = d * (float)sc[is + 6] * (float)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                    }
            } else {
                const float d = half1(p), dmin = half1(p + 2);
                for (int j = 0; j < 8; j += 2) {
                    int s0, m0, s1, m1;
                    q4k_scale_min(p + 4, j, &s0, &m0);
                    q4k_scale_min(p + 4, j + 1, &s1, &m1);
                    const uint8_t *q = p + 16 + 16 * j;
                    for (int i = 0; i < 32; i++) {
                        ob[32 * j + i] = d * (float)s0 * (float)(q[i] & 15) - dmin * (float)m0;
                        ob[32 * j + 32 + i] = d * (float)s1 * (float)(q[i] >> 4) - dmin * (float)m1;
                    }
                }
            }
        }
    }
    return 0;
}

#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
/* ---- int8 products on GGUF blocks (VPDPBUSD), for CPUs with AVX512-VNNI ----
 * foretell_linear_q8: y = x W^T (+ b) where W is given as GGUF blocks (Q5_0, Q8_0, Q4_K) and x is fp32, the way
 * llama.cpp computes a quantized model: each row of x is cut into blocks of 32 values and each block scaled to
 * int8 (dx = max |x| / 127, qx = x 127 / max |x| rounded to the nearest, ties to even); a block's products are
 * summed exactly in int32 by VPDPBUSD (64 products an instruction), then scaled by the weight block's and the input
 * block's scales in fp32. Not the bf16 model's bits: its own numbers (those of the GGUF file's weights, exactly,
 * and of int8 inputs), the same in every pass: each output is one fixed sequence of instructions over its own
 * input row and weight row (16 lanes of float sums over the blocks, then one horizontal sum), whatever M.
 * A chunk of 64 values (two 32-value blocks; for Q4_K two of its 32-value sub-blocks) is one vector:
 *   Q5_0: q in 0..31 unsigned, w = d (q - 16): VPDPBUSD(q, qx) from -16 * (the sum of each lane's 4 qx);
 *   Q8_0: q signed, w = d q: VPDPBUSD(|q|, qx with q's sign);
 *   Q4_K: q in 0..15, w = d sc q - dmin m: VPDPBUSD(q, qx) scaled by d sc, plus, per super-block, each
 *         sub-block's sum of qx scaled by its dx and by -dmin m;
 *   Q6_K: q in 0..63, w = d sc (q - 32) with an int8 sc per 16 values: VPDPBUSD(q, qx) from -32 * (each lane's
 *         sum of its 4 qx); a group's folded lanes (below) are one 16-value sub-block each, scaled by its d sc.
 * Four chunks' lane sums are folded into one vector before they are scaled (q8_group_sum), so the fp32 work is a
 * quarter of one conversion, product and sum per chunk (without that, passes of 16 rows and more were slower than
 * the bf16 weights' fp32 FMAs on a 2-core Cascade Lake: both bound by the one FMA port).
 * Passes of up to Q8_FUSED_MB rows decode each weight row group by group into registers as they read it
 * (q8_fused: at one row decoding through a buffer cost about what the products did). Longer ones: each thread
 * decodes a block of 4 weight rows once into a buffer (a group's chunks interleaved, q8_interleave; scales as
 * vectors), then runs tiles of 4 weight rows x 4 input rows from it. Both give each output the same integer sums
 * and the same float instructions, so the same bits. K must be a multiple of 64 (256 for Q4_K and Q6_K). */
enum { Q8_NB = 4, Q8_MB = 4, Q8_FUSED_MB = 8 };

/* acc + VPDPBUSD(a, b) (a's bytes unsigned, b's signed), in place: GCC 12 copies the accumulator around the
 * intrinsic's instruction and back, two moves per product in a tile's loop */
static inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}


static inline __m512 two_scales(float a, float b) {
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

/* A group is 4 chunks (256 values: 8 blocks of 32, a Q4_K super-block). Each (weight row, input row) pair sums a
 * group's 4 VPDPBUSD results into one vector before the floats (q8_group_sum): a block's 8 lanes become 2, so its
 * int32 partial sums are converted, scaled and added once per group instead of once per chunk, a quarter of the
 * fp32 work (the FMA port bounds these passes). Its lanes then hold blocks 0 2 4 6 | 0 2 4 6 | 1 3 5 7 | 1 3 5 7
 * (of the group's 8, per 128 bits): Q8_GROUP_ORDER, the order of the group's scale vectors (q8_group_order). Chunks past the last
 * whole group take one vector each, as they are. */
static inline __m512i q8_group_sum(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi64(p0, p1), _mm512_unpackhi_epi64(p0, p1));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi64(p2, p3), _mm512_unpackhi_epi64(p2, p3));
    const __m512 a = _mm512_castsi512_ps(t0), b = _mm512_castsi512_ps(t1);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                            _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}
/* 8 scales (of a group's blocks) in Q8_GROUP_ORDER */
static inline __m512 q8_group_order(const float *s8) {
    const __m512i order = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7); /* Q8_GROUP_ORDER */
    return _mm512_permutexvar_ps(order, _mm512_castps256_ps512(_mm256_loadu_ps(s8)));
}

/* The input rows as the tiles read them, per row: qx (the int8 values); per chunk c of 64 values xs (16 lanes:
 * block 2c's scale in lanes 0-7, 2c + 1's in 8-15) and xi (Q5_0: -16 times each lane's sum of its 4 values); per
 * group g xg (its 8 blocks' scales in Q8_GROUP_ORDER); for Q4_K per super-block xsb (lanes 0-7: each sub-block's
 * scale times the sum of its values; 8-15 zero). */
typedef struct {
    int8_t *qx;
    __m512 *xs, *xg, *xsb;
    __m512i *xi;
    __m512i *qxg, *xo; /* passes of more than Q8_FUSED_MB rows: each group's qx interleaved (q8_interleave), and
                        * its offsets folded (q8_group_sum of the 4 chunks' xi; Q5_0, Q6_K) */
    int chunks, groups, supers;
} q8_input;

/* A group's 4 chunk vectors c[t] (128-bit lane L: 4 dwords of 4 values, quarter L of chunk t) as 4 vectors s[d]
 * whose lane 4 L + t holds dword d of quarter L of chunk t (a 4 x 4 transpose in each 128-bit lane): the products
 * of s[0..3] summed by VPDPBUSD in one chain are, lane for lane, q8_group_sum of the 4 chunks' products (the same
 * integers: exact sums). The tiles of long passes read weights and inputs so, 7 instructions a group and pair
 * instead of 16. */
static inline void q8_interleave(const __m512i c[4], __m512i *s, size_t stride) {
    const __m512i t0 = _mm512_unpacklo_epi32(c[0], c[1]), t1 = _mm512_unpackhi_epi32(c[0], c[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(c[2], c[3]), t3 = _mm512_unpackhi_epi32(c[2], c[3]);
    s[0] = _mm512_unpacklo_epi64(t0, t2);
    s[stride] = _mm512_unpackhi_epi64(t0, t2);
    s[2 * stride] = _mm512_unpacklo_epi64(t1, t3);
    s[3 * stride] = _mm512_unpackhi_epi64(t1, t3);
}

static int q8_prepare(const float *x, int M, int K, int fmt, int interleaved, q8_input *in) {
    const int chunks = K / 64, groups = K / 256, supers = K / 256;
    in->chunks = chunks;
    in->groups = groups;
    in->supers = supers;
    in->qx = aligned_alloc(64, ((size_t)M * K + 63) / 64 * 64);
    in->xs = aligned_alloc(64, (size_t)M * chunks * sizeof(__m512));
    in->xg = aligned_alloc(64, ((size_t)M * groups + 1) * sizeof(__m512));
    in->xi = q8_offset(fmt) ? aligned_alloc(64, (size_t)M * chunks * sizeof(__m512i)) : NULL;
    in->xsb = fmt == GGUF_Q4_K ? aligned_alloc(64, ((size_t)M * supers + 1) * sizeof(__m512)) : NULL;
    if (!in->qx || !in->xs || !in->xg || (q8_offset(fmt) && !in->xi) || (fmt == GGUF_Q4_K && !in->xsb)) return -1;
    if (interleaved) {
        in->qxg = aligned_alloc(64, ((size_t)M * groups * 4 + 1) * sizeof(__m512i));
        in->xo = q8_offset(fmt) ? aligned_alloc(64, ((size_t)M * groups + 1) * sizeof(__m512i)) : NULL;
        if (!in->qxg || (q8_offset(fmt) && !in->xo)) return -1;
    }
    for (int m = 0; m < M; m++) {
        float d8[8], dsum[8];
        for (int c = 0; c < chunks; c++) {
            float d[2];
            int sums[2];
            for (int h = 0; h < 2; h++) {
                const float *p = x + (size_t)m * K + 64 * c + 32 * h;
                __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
                float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
                if (!(amax <= 3.0e38f)) return -2; /* inf or NaN */
                float id = amax > 0.0f ? 127.0f / amax : 0.0f;
                d[h] = amax / 127.0f;
                __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                int8_t *o = in->qx + (size_t)m * K + 64 * c + 32 * h;
                _mm_storeu_si128((__m128i *)o, _mm512_cvtsepi32_epi8(i0));
                _mm_storeu_si128((__m128i *)(o + 16), _mm512_cvtsepi32_epi8(i1));
                sums[h] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
            }
            in->xs[(size_t)m * chunks + c] = two_scales(d[0], d[1]);
            d8[2 * (c % 4)] = d[0];
            d8[2 * (c % 4) + 1] = d[1];
            if (c % 4 == 3 && c / 4 < groups) in->xg[(size_t)m * groups + c / 4] = q8_group_order(d8);
            const __m512i xv = _mm512_loadu_si512((const void *)(in->qx + (size_t)m * K + 64 * c));
            if (in->xi)
                in->xi[(size_t)m * chunks + c] = _mm512_sub_epi32(
                    _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)q8_offset(fmt)), xv));
            if (in->xsb) {
                dsum[2 * (c % 4)] = d[0] * (float)sums[0];
                dsum[2 * (c % 4) + 1] = d[1] * (float)sums[1];
                if (c % 4 == 3)
                    in->xsb[(size_t)m * supers + c / 4] = _mm512_maskz_mov_ps(0xFF, _mm512_castps256_ps512(_mm256_loadu_ps(dsum)));
            }
        }
        for (int g = 0; interleaved && g < groups; g++) {
            const __m512i *xc = (const __m512i *)(in->qx + (size_t)m * K + 256 * g);
            const __m512i c4[4] = {_mm512_load_si512(xc), _mm512_load_si512(xc + 1), _mm512_load_si512(xc + 2),
                                   _mm512_load_si512(xc + 3)};
            q8_interleave(c4, in->qxg + ((size_t)m * groups + g) * 4, 1);
            if (in->xo) {
                const __m512i *xi = in->xi + (size_t)m * chunks + 4 * g;
                in->xo[(size_t)m * groups + g] = q8_group_sum(xi[0], xi[1], xi[2], xi[3]);
            }
        }
    }
    return 0;
}

static void q8_release(q8_input *in) {
    free(in->qx);
    free(in->xs);
    free(in->xg);
    free(in->xi);
    free(in->xsb);
    free(in->qxg);
    free(in->xo);
}

/* Chunk c (64 values: blocks 2c and 2c + 1) of a Q5_0 or Q8_0 weight row as bytes; s2 gets the two blocks' scales */
static inline __attribute__((always_inline)) __m512i q8_chunk_values(const uint8_t *row, const int fmt, int c,
                                                                     float *s2) {
    if (fmt == GGUF_Q5_0) {
        const uint8_t *a = row + (size_t)c * 44, *bb = a + 22;
        uint32_t ha, hb;
        memcpy(&ha, a + 2, 4);
        memcpy(&hb, bb + 2, 4);
        __m512i q = _mm512_inserti32x4(_mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(a + 6))),
                                       _mm_loadu_si128((const __m128i *)(bb + 6)), 2);
        q = _mm512_shuffle_i64x2(q, q, 0xA0);                       /* qa qa qb qb (128-bit lanes) */
        q = _mm512_mask_srli_epi16(q, (__mmask32)0xFF00FF00, q, 4); /* qa, qa >> 4, qb, qb >> 4 */
        q = _mm512_and_si512(q, _mm512_set1_epi8(15));
        s2[0] = half1(a);
        s2[1] = half1(bb);
        return _mm512_mask_add_epi8(q, (__mmask64)ha | ((__mmask64)hb << 32), q, _mm512_set1_epi8(16));
    }
    const uint8_t *a = row + (size_t)c * 68, *bb = a + 34;
    s2[0] = half1(a);
    s2[1] = half1(bb);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                              _mm256_loadu_si256((const __m256i *)(bb + 2)), 1);
}

/* Group g (chunks 4g..4g + 3; for Q4_K its super-block g) of a weight row in registers: v[t] chunk 4g + t's values
 * as bytes, *gs the group's 8 block scales in Q8_GROUP_ORDER (Q4_K: d sc of its 8 sub-blocks), and for Q4_K *mn:
 * lanes 0-7 - dmin m of its sub-blocks, 8-15 zero. */
static inline __attribute__((always_inline)) void q8_group_values(const uint8_t *row, const int fmt, int g,
                                                                  __m512i v[4], __m512 *gs, __m512 *mn) {
    if (fmt == GGUF_Q6_K) {
        /* 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), sc[16] (int8, one per 16 values), fp16 d. Half h
         * (128 values) of ggml's layout: value l = ql[64h + l] & 15 | (qh[32h + l] & 3) << 4, value 32 + l = ql[64h
         * + 32 + l] & 15 | (qh[32h + l] >> 2 & 3) << 4, value 64 + l and 96 + l the same with ql >> 4 and qh >> 4,
         * qh >> 6 (l < 32): chunk 2h is the low nibbles, chunk 2h + 1 the high ones. */
        const uint8_t *s = row + (size_t)g * 210;
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(s + 64 * h));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(s + 128 + 32 * h));
            const __m512i qh_lo = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            const __m512i qh_hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 4)),
                                                     _mm256_srli_epi16(qh, 6), 1);
            v[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, _mm512_set1_epi8(15)),
                                       _mm512_and_si512(_mm512_slli_epi16(qh_lo, 4), _mm512_set1_epi8(0x30)));
            v[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), _mm512_set1_epi8(15)),
                                           _mm512_and_si512(_mm512_slli_epi16(qh_hi, 4), _mm512_set1_epi8(0x30)));
        }
        /* folded lane r (Q8_GROUP_ORDER) sums sub-block 4 (r % 4) + r / 4: its scale d sc there (exact in fp32) */
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(s + 192))));
        *gs = _mm512_mul_ps(_mm512_set1_ps(half1(s + 208)),
                            _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), sc));
        return;
    }
    if (fmt == GGUF_Q4_K) {
        const uint8_t *s = row + (size_t)g * 144;
        /* ggml's unpacking of the 12 scale bytes (as 32-bit words u0 u1 u2) into the 8 scales and the 8 mins, in
         * registers: [u0 & 0x3f.., (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4, u1 & 0x3f.., ((u2 >> 4) & 0x0f..) |
         * ((u1 >> 6) & 0x03..) << 4] (the 4 bytes after them, the first quants, are read and dropped) */
        const __m128i u = _mm_loadu_si128((const __m128i *)(s + 4));
        const __m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4)),
                                         _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
        const __m128i hi = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                         _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
        const __m128i bytes = _mm_or_si128(lo, hi);
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)load_u32(s))); /* d, dmin */
        const __m256 sc = _mm256_mul_ps(_mm256_broadcastss_ps(dm), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
        const __m256 m8 = _mm256_mul_ps(_mm256_broadcastss_ps(_mm_xor_ps(_mm_movehdup_ps(dm), _mm_set1_ps(-0.0f))),
                                        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8))));
        *mn = _mm512_maskz_mov_ps(0xFF, _mm512_castps256_ps512(m8));
        *gs = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7), /* Q8_GROUP_ORDER */
                                    _mm512_castps256_ps512(sc));
        for (int t = 0; t < 4; t++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(s + 16 + 32 * t));
            v[t] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1),
                                    _mm512_set1_epi8(15));
        }
        return;
    }
    float s2[2];
    for (int t = 0; t < 4; t++) v[t] = q8_chunk_values(row, fmt, 4 * g + t, s2);
    /* the 8 blocks' fp16 scales, 22 or 34 bytes apart, gathered as 16-bit words and widened (exactly) */
    const uint8_t *first = row + (size_t)g * (fmt == GGUF_Q5_0 ? 176 : 272);
    const int step = fmt == GGUF_Q5_0 ? 22 : 34;
    __m128i h = _mm_cvtsi32_si128(load_u16(first));
    h = _mm_insert_epi16(h, load_u16(first + step), 1);
    h = _mm_insert_epi16(h, load_u16(first + 2 * step), 2);
    h = _mm_insert_epi16(h, load_u16(first + 3 * step), 3);
    h = _mm_insert_epi16(h, load_u16(first + 4 * step), 4);
    h = _mm_insert_epi16(h, load_u16(first + 5 * step), 5);
    h = _mm_insert_epi16(h, load_u16(first + 6 * step), 6);
    h = _mm_insert_epi16(h, load_u16(first + 7 * step), 7);
    *gs = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7), /* Q8_GROUP_ORDER */
                                _mm512_castps256_ps512(_mm256_cvtph_ps(h)));
}

/* nb (<= Q8_NB) weight rows decoded into the thread's buffer: vals[c][i] (a chunk's 64 values as bytes; a whole
 * group's 4 chunks interleaved, q8_interleave), tscales[c][i] (the chunks past the last whole group: block 2c's scale
 * in lanes 0-7, 2c + 1's in 8-15), gscales[g][i] (group g's 8 scales in Q8_GROUP_ORDER) and, for Q4_K, mins[s][i]
 * (super-block s: lanes 0-7 - dmin m of its sub-blocks, 8-15 zero) */
static inline __attribute__((always_inline)) void q8_decode(const uint8_t *w, size_t row_bytes, const int fmt,
                                                            int nb, int chunks, __m512i *vals, __m512 *tscales,
                                                            __m512 *gscales, __m512 *mins) {
    for (int i = 0; i < nb; i++) {
        const uint8_t *row = w + (size_t)i * row_bytes;
        for (int g = 0; g < chunks / 4; g++) {
            __m512i v[4];
            q8_group_values(row, fmt, g, v, gscales + (size_t)g * Q8_NB + i, mins + (size_t)g * Q8_NB + i);
            q8_interleave(v, vals + (size_t)4 * g * Q8_NB + i, Q8_NB);
        }
        for (int c = chunks / 4 * 4; c < chunks; c++) {
            float s2[2];
            vals[(size_t)c * Q8_NB + i] = q8_chunk_values(row, fmt, c, s2);
            tscales[(size_t)c * Q8_NB + i] = two_scales(s2[0], s2[1]);
        }
    }
}

/* one chunk's int32 lane sums for weight vector wv and input chunk xv (from ``init``: Q5_0's offset) */
static inline __attribute__((always_inline)) __m512i q8_dot(const int fmt, __m512i init, __m512i wv, __m512i xv) {
    if (fmt == GGUF_Q8_0)
        return _mm512_dpbusd_epi32(init, _mm512_abs_epi8(wv),
                                   _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(wv), _mm512_setzero_si512(), xv));
    return _mm512_dpbusd_epi32(init, wv, xv);
}

/* nb (<= Q8_NB) decoded weight rows times mb (<= Q8_MB) input rows from row m0 of ``in`` (its interleaved groups):
 * y[j, i] (N apart). Per output the same instructions as q8_fused but for the integer sums' order (exact), so the
 * same bits. */
static inline __attribute__((always_inline)) void q8_tile(const __m512i *vals, const __m512 *tscales,
                                                          const __m512 *gscales, const __m512 *mins, const int fmt,
                                                          const q8_input *in, int m0, int K, float *y,
                                                          const float *b, int N, const int nb, const int mb) {
    __m512 acc[Q8_NB][Q8_MB];
    for (int i = 0; i < Q8_NB; i++)
        for (int j = 0; j < Q8_MB; j++) acc[i][j] = _mm512_setzero_ps();
    const int chunks = in->chunks, groups = in->groups;
    for (int g = 0; g < groups; g++) {
        const int c = 4 * g;
        for (int j = 0; j < mb; j++) {
            const __m512i *xr = in->qxg + ((size_t)(m0 + j) * groups + g) * 4;
            const __m512i x0 = xr[0], x1 = xr[1], x2 = xr[2], x3 = xr[3];
            const __m512i init = q8_offset(fmt) ? in->xo[(size_t)(m0 + j) * groups + g] : _mm512_setzero_si512();
            const __m512 xg = in->xg[(size_t)(m0 + j) * groups + g];
            for (int i = 0; i < nb; i++) {
                const __m512i *wv = vals + (size_t)c * Q8_NB + i;
                const __m512i r = q8_dot(fmt, q8_dot(fmt, q8_dot(fmt, q8_dot(fmt, init, wv[0], x0), wv[Q8_NB], x1),
                                                     wv[2 * Q8_NB], x2), wv[3 * Q8_NB], x3);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r), _mm512_mul_ps(gscales[(size_t)g * Q8_NB + i], xg),
                                            acc[i][j]);
            }
            if (fmt == GGUF_Q4_K) { /* the super-block's mins: - dmin m_b times dx_b sum(qx_b) */
                const __m512 xsb = in->xsb[(size_t)(m0 + j) * in->supers + g];
                for (int i = 0; i < nb; i++)
                    acc[i][j] = _mm512_fmadd_ps(mins[(size_t)g * Q8_NB + i], xsb, acc[i][j]);
            }
        }
    }
    for (int c = 4 * groups; c < chunks; c++) /* Q5_0, Q8_0: the chunks past the last whole group */
        for (int j = 0; j < mb; j++) {
            const __m512i xv = _mm512_load_si512((const void *)(in->qx + (size_t)(m0 + j) * K + 64 * c));
            const __m512 xs = in->xs[(size_t)(m0 + j) * chunks + c];
            const __m512i init = fmt == GGUF_Q5_0 ? in->xi[(size_t)(m0 + j) * chunks + c] : _mm512_setzero_si512();
            for (int i = 0; i < nb; i++) {
                const __m512i p = q8_dot(fmt, init, vals[(size_t)c * Q8_NB + i], xv);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(tscales[(size_t)c * Q8_NB + i], xs),
                                            acc[i][j]);
            }
        }
    if (nb == Q8_NB && Q8_MB == 4) { /* the 16 sums side by side: the same tree of additions, so the same bits */
        store_sums16(&acc[0][0], mb, y, b, N, 0);
        return;
    }
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < mb; j++)
            y[(size_t)j * N + i] = _mm512_reduce_add_ps(acc[i][j]) + (b ? b[i] : 0.0f);
}

/* Weight rows [0, nb) times mb (<= Q8_MB) input rows from row 0 of ``in``, each weight row decoded group by group
 * into registers as it is read (no buffer: short passes, where decoding through the buffer cost about as much as
 * the products): y[j, i] (N apart). Per output the same instructions as q8_tile, so the same bits. */
static inline __attribute__((always_inline)) void q8_fused(const uint8_t *w, size_t row_bytes, const int fmt,
                                                           const q8_input *in, int K, float *y, const float *b,
                                                           int N, int nb, const int mb) {
    const int chunks = in->chunks, groups = in->groups;
    for (int i = 0; i < nb; i++) {
        const uint8_t *row = w + (size_t)i * row_bytes;
        __m512 acc[Q8_FUSED_MB];
        for (int j = 0; j < Q8_FUSED_MB; j++) acc[j] = _mm512_setzero_ps();
        for (int g = 0; g < groups; g++) {
            const int c = 4 * g;
            __m512i v[4];
            __m512 gs, mn = _mm512_setzero_ps();
            q8_group_values(row, fmt, g, v, &gs, &mn);
            for (int j = 0; j < mb; j++) {
                const int8_t *xr = in->qx + (size_t)j * K + 64 * c;
                __m512i i0 = _mm512_setzero_si512(), i1 = i0, i2 = i0, i3 = i0;
                if (q8_offset(fmt)) {
                    const __m512i *xi = in->xi + (size_t)j * chunks + c;
                    i0 = xi[0], i1 = xi[1], i2 = xi[2], i3 = xi[3];
                }
                const __m512i r = q8_group_sum(
                    q8_dot(fmt, i0, v[0], _mm512_load_si512((const void *)xr)),
                    q8_dot(fmt, i1, v[1], _mm512_load_si512((const void *)(xr + 64))),
                    q8_dot(fmt, i2, v[2], _mm512_load_si512((const void *)(xr + 128))),
                    q8_dot(fmt, i3, v[3], _mm512_load_si512((const void *)(xr + 192))));
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r), _mm512_mul_ps(gs, in->xg[(size_t)j * groups + g]),
                                         acc[j]);
                if (fmt == GGUF_Q4_K) acc[j] = _mm512_fmadd_ps(mn, in->xsb[(size_t)j * in->supers + g], acc[j]);
            }
        }
        for (int c = 4 * groups; c < chunks; c++) { /* Q5_0, Q8_0: the chunks past the last whole group */
            float sp[2];
            const __m512i v = q8_chunk_values(row, fmt, c, sp);
            for (int j = 0; j < mb; j++) {
                const __m512i xv = _mm512_load_si512((const void *)(in->qx + (size_t)j * K + 64 * c));
                const __m512i init = fmt == GGUF_Q5_0 ? in->xi[(size_t)j * chunks + c] : _mm512_setzero_si512();
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q8_dot(fmt, init, v, xv)),
                                         _mm512_mul_ps(two_scales(sp[0], sp[1]), in->xs[(size_t)j * chunks + c]), acc[j]);
            }
        }
        for (int j = 0; j < mb; j++) y[(size_t)j * N + i] = _mm512_reduce_add_ps(acc[j]) + (b ? b[i] : 0.0f);
    }
}

#define Q8_FUSED_ROWS(NAME, FMT)                                                                              \
static void NAME(const uint8_t *w, size_t row_bytes, const q8_input *in, int M, int K, float *y,              \
                 const float *b, int N, int nb) {                                                             \
    switch (M) {                                                                                              \
    case 8: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 8); break;                                        \
    case 7: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 7); break;                                        \
    case 6: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 6); break;                                        \
    case 5: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 5); break;                                        \
    case 4: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 4); break;                                        \
    case 3: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 3); break;                                        \
    case 2: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 2); break;                                        \
    default: q8_fused(w, row_bytes, FMT, in, K, y, b, N, nb, 1); break;                                       \
    }                                                                                                         \
}
Q8_FUSED_ROWS(q8_fused_rows_q5_0, GGUF_Q5_0)
Q8_FUSED_ROWS(q8_fused_rows_q8_0, GGUF_Q8_0)
Q8_FUSED_ROWS(q8_fused_rows_q4_k, GGUF_Q4_K)
Q8_FUSED_ROWS(q8_fused_rows_q6_k, GGUF_Q6_K)

#define Q8_TILE_ROWS(NAME, FMT)                                                                               \
static void NAME(const uint8_t *w, size_t row_bytes, const q8_input *in, int M, int K, float *y,              \
                 const float *b, int N, int nb, __m512i *vals, __m512 *tscales, __m512 *gscales, __m512 *mins) { \
    q8_decode(w, row_bytes, FMT, nb, in->chunks, vals, tscales, gscales, mins);                               \
    for (int m0 = 0; m0 < M; m0 += Q8_MB) {                                                                   \
        const int mb = M - m0 < Q8_MB ? M - m0 : Q8_MB;                                                       \
        float *ym = y + (size_t)m0 * N;                                                                       \
        if (nb == Q8_NB) {                                                                                    \
            switch (mb) {                                                                                     \
            case 4: q8_tile(vals, tscales, gscales, mins, FMT, in, m0, K, ym, b, N, Q8_NB, 4); break;         \
            case 3: q8_tile(vals, tscales, gscales, mins, FMT, in, m0, K, ym, b, N, Q8_NB, 3); break;         \
            case 2: q8_tile(vals, tscales, gscales, mins, FMT, in, m0, K, ym, b, N, Q8_NB, 2); break;         \
            default: q8_tile(vals, tscales, gscales, mins, FMT, in, m0, K, ym, b, N, Q8_NB, 1); break;        \
            }                                                                                                 \
            continue;                                                                                         \
        }                                                                                                     \
        for (int i = 0; i < nb; i++) /* each alone: the same instructions per output as in a full block */    \
            q8_tile(vals + i, tscales + i, gscales + i, mins + i, FMT, in, m0, K, ym + i, b ? b + i : 0, N,   \
                    1, mb);                                                                                   \
    }                                                                                                         \
}
Q8_TILE_ROWS(q8_tile_rows_q5_0, GGUF_Q5_0)
Q8_TILE_ROWS(q8_tile_rows_q8_0, GGUF_Q8_0)
Q8_TILE_ROWS(q8_tile_rows_q4_k, GGUF_Q4_K)
Q8_TILE_ROWS(q8_tile_rows_q6_k, GGUF_Q6_K)


int foretell_gemm_q8(const float *x, const uint8_t *w, int fmt, const float *b, float *y, int M, int N, int K,
                     int threads);

int foretell_linear_q8(const float *x, const uint8_t *w, int fmt, const float *b, float *y, int M, int N, int K,
                       int threads) {
    if (fmt >= 100) /* panels (P8_PANEL): every pass on their one kernel */
        return foretell_gemm_q8(x, w, fmt, b, y, M, N, K, threads);
    const int per = q8_block_values(fmt);
    if (!q8_block_bytes(fmt) || K % 64 || K % per || M <= 0) return -1;
    const size_t row_bytes = (size_t)K / per * q8_block_bytes(fmt);
    q8_input in = {0};
    const int ok = q8_prepare(x, M, K, fmt, M > Q8_FUSED_MB, &in);
    if (ok) { q8_release(&in); return ok == -2 ? -2 : -1; }
    const int blocks = (N + Q8_NB - 1) / Q8_NB, chunks = K / 64;
    const int fused = M <= Q8_FUSED_MB; /* one input tile: each weight row decoded in registers as it is read */
    void (*const fused_rows)(const uint8_t *, size_t, const q8_input *, int, int, float *, const float *, int, int) =
        fmt == GGUF_Q5_0 ? q8_fused_rows_q5_0 : fmt == GGUF_Q8_0 ? q8_fused_rows_q8_0
        : fmt == GGUF_Q4_K ? q8_fused_rows_q4_k : q8_fused_rows_q6_k;
    void (*const tile_rows)(const uint8_t *, size_t, const q8_input *, int, int, float *, const float *, int, int,
                            __m512i *, __m512 *, __m512 *, __m512 *) =
        fmt == GGUF_Q5_0 ? q8_tile_rows_q5_0 : fmt == GGUF_Q8_0 ? q8_tile_rows_q8_0
        : fmt == GGUF_Q4_K ? q8_tile_rows_q4_k : q8_tile_rows_q6_k;
    int failed = 0;
    #pragma omp parallel num_threads(threads)
    {
        __m512i *vals = fused ? NULL : aligned_alloc(64, (size_t)chunks * Q8_NB * sizeof(__m512i));
        __m512 *tscales = fused ? NULL : aligned_alloc(64, (size_t)chunks * Q8_NB * sizeof(__m512));
        __m512 *gscales = fused ? NULL : aligned_alloc(64, ((size_t)chunks / 4 + 1) * Q8_NB * sizeof(__m512));
        __m512 *mins = fused ? NULL : aligned_alloc(64, ((size_t)chunks / 4 + 1) * Q8_NB * sizeof(__m512));
        const int ready = fused || (vals && tscales && gscales && mins);
        if (!ready) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            if (!ready) continue;
            const int n0 = blk * Q8_NB, nb = N - n0 < Q8_NB ? N - n0 : Q8_NB;
            const uint8_t *wb = w + (size_t)n0 * row_bytes;
            for (size_t l = 0; l < (size_t)nb * row_bytes; l += 64) /* the next block's rows */
                _mm_prefetch((const char *)(wb + (size_t)Q8_NB * row_bytes + l), _MM_HINT_T0);
            float *yb = y + n0;
            const float *bb = b ? b + n0 : 0;
            if (fused) fused_rows(wb, row_bytes, &in, M, K, yb, bb, N, nb);
            else tile_rows(wb, row_bytes, &in, M, K, yb, bb, N, nb, vals, tscales, gscales, mins);
        }
        free(vals);
        free(tscales);
        free(gscales);
        free(mins);
    }
    q8_release(&in);
    return failed ? -1 : 0;
}

/* ---- a prompt chunk's rows on int8 products (foretell_gemm_q8): y = x W^T (+ b), W given as GGUF blocks ----
 * The same quantities as foretell_linear_q8 (the file's integers, the input rows scaled to int8 per 32 values as
 * llama.cpp scales them) laid out for many rows: each thread decodes 32 weight rows at a time into VPDPBUSD's
 * layout (a vector = 16 weight rows x 4 values, unsigned: Q8_0's values + 128, Q5_0's 0..31, Q4_K's 0..15, Q6_K's
 * 0..63) with one float scale per weight row and block (32 values; 16 for Q6_K), then runs every input row against
 * them in tiles of 4 rows x 32 outputs, the input's 4 values broadcast: 8 VPDPBUSD per step of 4 values, and per
 * block one conversion, product and FMA per 16 outputs (the zero point, z times the block's sum of qx, is the
 * integer sum's start). Each output sums its blocks in one fixed order whatever M and the tiles: a row's result
 * depends on its own input row alone. Not foretell_linear_q8's bits (another order of float sums); exact mode uses
 * it for prompt chunks, whose rows need only be the same in every pass over the same prompt. */
enum { G8_MR = 6, G8_NR = 2 };

static inline int g8_block(int fmt) { return fmt == GGUF_Q6_K ? 16 : 32; }
static inline int g8_zero(int fmt) { return fmt == GGUF_Q5_0 ? 16 : fmt == GGUF_Q6_K ? 32 : fmt == GGUF_Q8_0 ? 128 : 0; }

/* 16 weight rows (n0..n0 + 15 of w, fewer at the end: zeros) into pw ([K/4][16 rows][4] bytes), their block scales
 * into sc ([K/B][16]) and, for Q4_K, the blocks' min terms dmin m into mn ([K/32][16]) */
static void g8_pack(const uint8_t *w, int fmt, size_t row_bytes, int rows, int K, uint8_t *pw, float *sc, float *mn) {
    const int chunks = K / 64;
    const int step = fmt == GGUF_Q6_K || fmt == GGUF_Q4_K ? 4 : 1; /* chunks decoded together (a super-block) */
    for (int c0 = 0; c0 < chunks; c0 += step) {
        __m512i v[16][4];
        vec scales[16]; /* per row: a super-block's 16 sub-block scales (Q6_K), its 8 scales and 8 mins (Q4_K),
                         * or a chunk's 2 block scales (Q5_0, Q8_0) */
        for (int j = 0; j < 16; j++) {
            if (j >= rows) {
                for (int t = 0; t < step; t++) v[j][t] = _mm512_set1_epi8((char)g8_zero(fmt));
                scales[j] = _mm512_setzero_ps();
                continue;
            }
            const uint8_t *row = w + (size_t)j * row_bytes;
            __m512 gs, mins;
            float s2[2];
            if (step == 4) {
                q8_group_values(row, fmt, c0 / 4, v[j], &gs, &mins);
                const uint8_t *p = row + (size_t)(c0 / 4) * q8_block_bytes(fmt);
                if (fmt == GGUF_Q6_K) /* d sc per 16 values, in order */
                    scales[j] = _mm512_mul_ps(_mm512_set1_ps(half1(p + 208)), _mm512_cvtepi32_ps(
                        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 192)))));
                else { /* d sc and dmin m of the 8 sub-blocks (q4k_scale_min) */
                    float t[16];
                    for (int b = 0; b < 8; b++) {
                        int si, mi;
                        q4k_scale_min(p + 4, b, &si, &mi);
                        t[b] = (float)si;
                        t[8 + b] = (float)mi;
                    }
                    const __m512 dm = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(half1(p)), _mm512_set1_ps(half1(p + 2)));
                    scales[j] = _mm512_mul_ps(dm, _mm512_loadu_ps(t));
                }
            } else {
                v[j][0] = q8_chunk_values(row, fmt, c0, s2);
                scales[j] = _mm512_castps128_ps512(_mm_setr_ps(s2[0], s2[1], 0.0f, 0.0f));
            }
            if (fmt == GGUF_Q8_0) v[j][0] = _mm512_xor_si512(v[j][0], _mm512_set1_epi8((char)0x80));
        }
        transpose_tile(scales); /* scales[i]: value i of every row */
        const int per = fmt == GGUF_Q6_K ? 16 : fmt == GGUF_Q4_K ? 8 : 2, first = c0 * 64 / g8_block(fmt);
        for (int i = 0; i < per; i++) _mm512_storeu_ps(sc + (size_t)(first + i) * 16, scales[i]);
        if (mn)
            for (int i = 0; i < 8; i++) _mm512_storeu_ps(mn + (size_t)(first + i) * 16, scales[8 + i]);
        for (int t = 0; t < step; t++) {
            vec r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_castsi512_ps(v[j][t]);
            transpose_tile(r); /* r[i]: dword i (values 4i..4i + 3) of each of the 16 rows */
            for (int i = 0; i < 16; i++)
                _mm512_storeu_si512((void *)(pw + ((size_t)(c0 + t) * 16 + i) * 64), _mm512_castps_si512(r[i]));
        }
    }
}

/* ---- panels: a weight laid out once, at load, for the tiles below (fmt P8_PANEL + its GGUF type) ----
 * Per 16 weight rows (a panel) and K values, the values of g8_pack's layout ([K/4][16 rows][4] bytes, unsigned)
 * kept in as many bits as the file's: Q8_0 as those bytes; Q5_0, Q4_K and Q6_K as nibbles, two 64-byte vectors
 * (steps 2p and 2p + 1) per 64 bytes, low and high nibble, then Q5_0's fifth bit (Q6_K's fifth and sixth) of each
 * step's 64 values as 64-bit masks; then the scales as the file has them: fp16 d per block and row (Q8_0, Q5_0);
 * per super-block fp16 d and dmin per row and the 6-bit sc and m per sub-block and row as bytes (Q4_K); per
 * super-block fp16 d per row and the int8 sc per 16 values and row (Q6_K). As many bytes as the file's blocks but
 * Q4_K's (148 a row and super-block, against 144). p8_unpack gives back exactly g8_pack's values and scales (the
 * same products d sc), so a row's result on panels has foretell_gemm_q8's bits on the file's blocks. Unpacking
 * costs a few instructions per 64 values, not a transpose, so one-row passes take the same kernel: every pass,
 * decode steps, verify passes and prompt chunks, sums each output in one order. */
enum { P8_PANEL = 100 };

static inline size_t p8_value_bytes(int fmt, int K) { /* per panel */
    return fmt == GGUF_Q8_0 ? (size_t)16 * K : fmt == GGUF_Q5_0 ? (size_t)10 * K : fmt == GGUF_Q4_K ? (size_t)8 * K
         : (size_t)12 * K;
}
static inline size_t p8_panel_bytes(int fmt, int K) {
    const size_t scales = fmt == GGUF_Q4_K ? (size_t)K / 256 * 320 : fmt == GGUF_Q6_K ? (size_t)K / 256 * 288 : (size_t)K;
    return p8_value_bytes(fmt, K) + scales;
}

static void g8_pack(const uint8_t *w, int fmt, size_t row_bytes, int rows, int K, uint8_t *pw, float *sc, float *mn);

/* panel ``panel`` (16 rows from w, row_bytes apart) into ``out``; pw, sc, mn: g8_pack's buffers */
static void p8_pack_panel(const uint8_t *w, int fmt, size_t row_bytes, int K, uint8_t *out, uint8_t *pw, float *sc,
                          float *mn) {
    g8_pack(w, fmt, row_bytes, 16, K, pw, sc, fmt == GGUF_Q4_K ? mn : NULL);
    const int steps = K / 4;
    uint8_t *planes = out + (size_t)8 * K;
    if (fmt == GGUF_Q8_0) memcpy(out, pw, (size_t)16 * K);
    else
        for (int p = 0; p < steps / 2; p++) {
            const __m512i a = _mm512_loadu_si512((const void *)(pw + (size_t)128 * p));
            const __m512i c = _mm512_loadu_si512((const void *)(pw + (size_t)128 * p + 64));
            const __m512i nib = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi8(15)),
                                                _mm512_slli_epi16(_mm512_and_si512(c, _mm512_set1_epi8(15)), 4));
            _mm512_storeu_si512((void *)(out + (size_t)64 * p), nib);
        }
    for (int t = 0; t < steps && (fmt == GGUF_Q5_0 || fmt == GGUF_Q6_K); t++) {
        const __m512i v = _mm512_loadu_si512((const void *)(pw + (size_t)64 * t));
        const uint64_t b4 = _mm512_test_epi8_mask(v, _mm512_set1_epi8(16));
        memcpy(planes + (size_t)8 * t * (fmt == GGUF_Q6_K ? 2 : 1), &b4, 8);
        if (fmt == GGUF_Q6_K) {
            const uint64_t b5 = _mm512_test_epi8_mask(v, _mm512_set1_epi8(32));
            memcpy(planes + (size_t)16 * t + 8, &b5, 8);
        }
    }
    uint8_t *scales = out + p8_value_bytes(fmt, K);
    const int per = q8_block_values(fmt), bytes = q8_block_bytes(fmt);
    for (int r = 0; r < 16; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        for (int blk = 0; blk < K / per; blk++) {
            const uint8_t *p = row + (size_t)blk * bytes;
            if (fmt == GGUF_Q8_0 || fmt == GGUF_Q5_0) { /* fp16 d [K/32][16] */
                memcpy(scales + ((size_t)blk * 16 + r) * 2, p, 2);
                continue;
            }
            uint8_t *s = scales + (size_t)blk * (fmt == GGUF_Q4_K ? 320 : 288);
            if (fmt == GGUF_Q4_K) { /* d [16], dmin [16] (fp16), sc [8][16], m [8][16] */
                memcpy(s + 2 * r, p, 2);
                memcpy(s + 32 + 2 * r, p + 2, 2);
                for (int b = 0; b < 8; b++) {
                    int si, mi;
                    q4k_scale_min(p + 4, b, &si, &mi);
                    s[64 + 16 * b + r] = (uint8_t)si;
                    s[192 + 16 * b + r] = (uint8_t)mi;
                }
            } else { /* Q6_K: d [16] (fp16), sc [16][16] (int8) */
                memcpy(s + 2 * r, p + 208, 2);
                for (int b = 0; b < 16; b++) s[32 + 16 * b + r] = p[192 + b];
            }
        }
    }
}

/* the file's blocks of N rows (N a multiple of 16) as panels: N / 16 x p8_panel_bytes */
int foretell_pack_p8(const uint8_t *w, int fmt, int N, int K, uint8_t *out, int threads) {
    const int per = q8_block_values(fmt);
    if (!q8_block_bytes(fmt) || N % 16 || K % 64 || K % per) return -1;
    const size_t row_bytes = (size_t)K / per * q8_block_bytes(fmt), panel = p8_panel_bytes(fmt, K);
    int failed = 0;
    #pragma omp parallel num_threads(threads)
    {
        uint8_t *pw = aligned_alloc(64, (size_t)16 * K);
        float *sc = malloc((size_t)16 * (K / 16) * sizeof(float)), *mn = malloc((size_t)16 * (K / 32) * sizeof(float));
        if (!pw || !sc || !mn) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int i = 0; i < N / 16; i++)
            if (pw && sc && mn)
                p8_pack_panel(w + (size_t)16 * i * row_bytes, fmt, row_bytes, K, out + (size_t)i * panel, pw, sc, mn);
        free(pw);
        free(sc);
        free(mn);
    }
    return failed ? -1 : 0;
}

/* a panel back into g8_pack's layout: pw [K/4][16][4] bytes, sc [K/B][16], for Q4_K mn [K/32][16] (the same
 * numbers: the file's integers and the same fp32 products d sc, dmin m); Q8_0's values are already those bytes
 * (the tiles read them in place: pw is not written) */
static void p8_unpack(const uint8_t *panel, int fmt, int K, uint8_t *pw, float *sc, float *mn) {
    const int steps = K / 4;
    const uint8_t *planes = panel + (size_t)8 * K, *scales = panel + p8_value_bytes(fmt, K);
    if (fmt != GGUF_Q8_0) {
        const __m512i low = _mm512_set1_epi8(15);
        for (int p = 0; p < steps / 2; p++) {
            const __m512i nib = _mm512_loadu_si512((const void *)(panel + (size_t)64 * p));
            __m512i a = _mm512_and_si512(nib, low), c = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low);
            if (fmt == GGUF_Q5_0) {
                a = _mm512_mask_add_epi8(a, (__mmask64)load_u64(planes + (size_t)16 * p), a, _mm512_set1_epi8(16));
                c = _mm512_mask_add_epi8(c, (__mmask64)load_u64(planes + (size_t)16 * p + 8), c, _mm512_set1_epi8(16));
            } else if (fmt == GGUF_Q6_K) {
                const uint8_t *q = planes + (size_t)32 * p;
                a = _mm512_mask_add_epi8(a, (__mmask64)load_u64(q), a, _mm512_set1_epi8(16));
                a = _mm512_mask_add_epi8(a, (__mmask64)load_u64(q + 8), a, _mm512_set1_epi8(32));
                c = _mm512_mask_add_epi8(c, (__mmask64)load_u64(q + 16), c, _mm512_set1_epi8(16));
                c = _mm512_mask_add_epi8(c, (__mmask64)load_u64(q + 24), c, _mm512_set1_epi8(32));
            }
            _mm512_storeu_si512((void *)(pw + (size_t)128 * p), a);
            _mm512_storeu_si512((void *)(pw + (size_t)128 * p + 64), c);
        }
    }
    if (fmt == GGUF_Q8_0 || fmt == GGUF_Q5_0) {
        for (int blk = 0; blk < K / 32; blk++)
            _mm512_storeu_ps(sc + (size_t)16 * blk, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + (size_t)32 * blk))));
        return;
    }
    for (int sb = 0; sb < K / 256; sb++) {
        const uint8_t *s = scales + (size_t)sb * (fmt == GGUF_Q4_K ? 320 : 288);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)s));
        if (fmt == GGUF_Q4_K) {
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 32)));
            for (int b = 0; b < 8; b++) {
                const __m512 si = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s + 64 + 16 * b))));
                const __m512 mi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s + 192 + 16 * b))));
                _mm512_storeu_ps(sc + (size_t)16 * (8 * sb + b), _mm512_mul_ps(d, si));
                _mm512_storeu_ps(mn + (size_t)16 * (8 * sb + b), _mm512_mul_ps(dmin, mi));
            }
        } else
            for (int b = 0; b < 16; b++)
                _mm512_storeu_ps(sc + (size_t)16 * (16 * sb + b), _mm512_mul_ps(d, _mm512_cvtepi32_ps(
                    _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(s + 32 + 16 * b))))));
    }
}

/* p8_tile's: a block's integer sums of weight column j into the outputs, f += acc s dx (the block's scales), and
 * where has_m (Q4_K) f -= m dxs (its mins), for mr input rows: g8_tile's instructions in its order (the same bits;
 * g8_tile keeps its own copy: calling this cost its many-row passes 2-5% on a Cascade Lake, GCC 12) */
static inline __attribute__((always_inline)) void g8_scale(const int mr, __m512 f[G8_MR][G8_NR],
                                                           __m512i acc[G8_MR][G8_NR], int j, __m512 s,
                                                           const int has_m, __m512 m, const float *dx,
                                                           const float *dxs, int blocks, int blk) {
    for (int r = 0; r < mr; r++)
        f[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][j]),
                                  _mm512_mul_ps(s, _mm512_set1_ps(dx[(size_t)r * blocks + blk])), f[r][j]);
    if (has_m)
        for (int r = 0; r < mr; r++)
            f[r][j] = _mm512_fnmadd_ps(m, _mm512_set1_ps(dxs[(size_t)r * blocks + blk]), f[r][j]);
}

/* p8_tile's outputs (+ bias b) to y, N apart, as g8_tile stores them */
static inline __attribute__((always_inline)) void g8_store(const int mr, __m512 f[G8_MR][G8_NR], float *y, int N,
                                                           const float *b) {
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < G8_NR; j++) {
            __m512 v = f[r][j];
            if (b) v = _mm512_add_ps(v, _mm512_loadu_ps(b + 16 * j));
            _mm512_storeu_ps(y + (size_t)r * N + 16 * j, v);
        }
}

static inline __attribute__((always_inline)) void g8_tile(const int mr, const int8_t *qx, const float *dx,
                                                          const int *zx, const float *dxs, int K, int B,
                                                          const uint8_t *const pw[G8_NR], const float *const sc[G8_NR],
                                                          const float *const mn[G8_NR], float *y, int N,
                                                          const float *b) {
    __m512 f[G8_MR][G8_NR];
    const int blocks = K / B, steps = B / 4;
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < G8_NR; j++) f[r][j] = _mm512_setzero_ps();
    for (int blk = 0; blk < blocks; blk++) {
        __m512i acc[G8_MR][G8_NR];
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < G8_NR; j++) acc[r][j] = _mm512_set1_epi32(zx[(size_t)r * blocks + blk]);
        for (int s = 0; s < steps; s++) {
            const size_t k4 = (size_t)blk * steps + s;
            __m512i wv[G8_NR];
            for (int j = 0; j < G8_NR; j++) wv[j] = _mm512_loadu_si512((const void *)(pw[j] + k4 * 64));
            for (int r = 0; r < mr; r++) {
                const __m512i xb = _mm512_set1_epi32((int)load_u32(qx + (size_t)r * K + 4 * k4));
                for (int j = 0; j < G8_NR; j++) acc[r][j] = dpbusd(acc[r][j], wv[j], xb);
            }
        }
        for (int j = 0; j < G8_NR; j++) {
            const __m512 s = _mm512_loadu_ps(sc[j] + (size_t)blk * 16);
            for (int r = 0; r < mr; r++)
                f[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][j]),
                                          _mm512_mul_ps(s, _mm512_set1_ps(dx[(size_t)r * blocks + blk])), f[r][j]);
            if (mn[j]) {
                const __m512 m = _mm512_loadu_ps(mn[j] + (size_t)blk * 16);
                for (int r = 0; r < mr; r++)
                    f[r][j] = _mm512_fnmadd_ps(m, _mm512_set1_ps(dxs[(size_t)r * blocks + blk]), f[r][j]);
            }
        }
    }
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < G8_NR; j++) {
            __m512 v = f[r][j];
            if (b) v = _mm512_add_ps(v, _mm512_loadu_ps(b + 16 * j));
            _mm512_storeu_ps(y + (size_t)r * N + 16 * j, v);
        }
}

/* g8_tile straight from panels for short passes (foretell_p8_fused_rows), P8_FUSED_MR input rows a tile: each
 * step pair's values are decoded in registers as they are read instead of through p8_unpack's buffer, and each
 * block's scales (and Q4_K's mins) are the same fp32 products p8_unpack makes. The integer sums are the same integers (exact, in any order), and
 * the float instructions per output and block are g8_tile's in its order: the same bits. At one row the buffer's
 * stores and loads cost about what the products did (Q5_0 gate/up of the 0.5B: 5.8 GB/s from memory against the
 * Q8_0 head's 13); on a 2-core Cascade Lake, cold weights: 1-4 rows 0.66-0.87x the time, 8 rows 0.75-0.99x, 16 rows
 * 0.85-0.99x (Q6_K 0.85-1.13x), 32 rows 0.98-1.24x. Longer passes decode a tile's weights once per 6 input rows, so
 * the buffer serves them. Q8_0 panels are read in place by g8_tile already. */
enum { P8_FUSED_MR = G8_MR }; /* input rows a tile (g8_scale, g8_store: G8_MR at most) */
int foretell_p8_fused_rows = 16; /* passes of up to this many rows take p8_tile, half as many for Q6_K (whose
                                   * decode takes more instructions); 0: none (for comparisons) */

static inline __attribute__((always_inline)) void p8_tile(const int mr, const int fmt, const int8_t *qx,
                                                          const float *dx, const int *zx, const float *dxs, int K,
                                                          const uint8_t *const panel[G8_NR], float *y, int N,
                                                          const float *b) {
    const int B = g8_block(fmt), blocks = K / B, pairs = B / 8; /* step pairs (2 x 4 values) a block */
    const uint8_t *planes[G8_NR], *scales[G8_NR];
    for (int j = 0; j < G8_NR; j++) {
        planes[j] = panel[j] + (size_t)8 * K;
        scales[j] = panel[j] + p8_value_bytes(fmt, K);
    }
    const __m512i low = _mm512_set1_epi8(15), b16 = _mm512_set1_epi8(16), b32 = _mm512_set1_epi8(32);
    __m512 f[G8_MR][G8_NR];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < G8_NR; j++) f[r][j] = _mm512_setzero_ps();
    for (int blk = 0; blk < blocks; blk++) {
        __m512i acc[G8_MR][G8_NR];
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < G8_NR; j++) acc[r][j] = _mm512_set1_epi32(zx[(size_t)r * blocks + blk]);
        for (int pp = 0; pp < pairs; pp++) {
            const size_t p = (size_t)blk * pairs + pp;
            __m512i va[G8_NR], vc[G8_NR];
            for (int j = 0; j < G8_NR; j++) {
                const __m512i nib = _mm512_loadu_si512((const void *)(panel[j] + (size_t)64 * p));
                __m512i a = _mm512_and_si512(nib, low), c = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low);
                if (fmt == GGUF_Q5_0) {
                    a = _mm512_mask_add_epi8(a, (__mmask64)load_u64(planes[j] + (size_t)16 * p), a, b16);
                    c = _mm512_mask_add_epi8(c, (__mmask64)load_u64(planes[j] + (size_t)16 * p + 8), c, b16);
                } else if (fmt == GGUF_Q6_K) {
                    const uint8_t *q = planes[j] + (size_t)32 * p;
                    a = _mm512_mask_add_epi8(a, (__mmask64)load_u64(q), a, b16);
                    a = _mm512_mask_add_epi8(a, (__mmask64)load_u64(q + 8), a, b32);
                    c = _mm512_mask_add_epi8(c, (__mmask64)load_u64(q + 16), c, b16);
                    c = _mm512_mask_add_epi8(c, (__mmask64)load_u64(q + 24), c, b32);
                }
                va[j] = a;
                vc[j] = c;
            }
            for (int r = 0; r < mr; r++) {
                const __m512i x0 = _mm512_set1_epi32((int)load_u32(qx + (size_t)r * K + 8 * p));
                const __m512i x1 = _mm512_set1_epi32((int)load_u32(qx + (size_t)r * K + 8 * p + 4));
                for (int j = 0; j < G8_NR; j++) acc[r][j] = dpbusd(dpbusd(acc[r][j], va[j], x0), vc[j], x1);
            }
        }
        for (int j = 0; j < G8_NR; j++) {
            __m512 s, m = _mm512_setzero_ps();
            if (fmt == GGUF_Q5_0)
                s = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales[j] + (size_t)32 * blk)));
            else if (fmt == GGUF_Q4_K) { /* 8 blocks a super-block: d sc and dmin m (p8_unpack's products) */
                const uint8_t *sb = scales[j] + (size_t)(blk / 8) * 320;
                const int bb = blk % 8;
                s = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sb)),
                                  _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sb + 64 + 16 * bb)))));
                m = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sb + 32))),
                                  _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sb + 192 + 16 * bb)))));
            } else { /* Q6_K: 16 blocks a super-block, d times the int8 sc */
                const uint8_t *sb = scales[j] + (size_t)(blk / 16) * 288;
                s = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sb)), _mm512_cvtepi32_ps(
                    _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sb + 32 + 16 * (blk % 16))))));
            }
            g8_scale(mr, f, acc, j, s, fmt == GGUF_Q4_K, m, dx, dxs, blocks, blk);
        }
    }
    g8_store(mr, f, y, N, b);
}

/* p8_tile with the format and the rows as constants in each inlined copy */
static void p8_tile_rows(const int mr, const int fmt, const int8_t *qx, const float *dx, const int *zx,
                         const float *dxs, int K, const uint8_t *const panel[G8_NR], float *y, int N, const float *b) {
#define P8_CASE(R, F) if (mr == R && fmt == F) { p8_tile(R, F, qx, dx, zx, dxs, K, panel, y, N, b); return; }
    P8_CASE(1, GGUF_Q5_0) P8_CASE(2, GGUF_Q5_0) P8_CASE(3, GGUF_Q5_0) P8_CASE(4, GGUF_Q5_0) P8_CASE(5, GGUF_Q5_0) P8_CASE(6, GGUF_Q5_0)
    P8_CASE(1, GGUF_Q4_K) P8_CASE(2, GGUF_Q4_K) P8_CASE(3, GGUF_Q4_K) P8_CASE(4, GGUF_Q4_K) P8_CASE(5, GGUF_Q4_K) P8_CASE(6, GGUF_Q4_K)
    P8_CASE(1, GGUF_Q6_K) P8_CASE(2, GGUF_Q6_K) P8_CASE(3, GGUF_Q6_K) P8_CASE(4, GGUF_Q6_K) P8_CASE(5, GGUF_Q6_K) P8_CASE(6, GGUF_Q6_K)
#undef P8_CASE
}

int foretell_gemm_q8(const float *x, const uint8_t *w, int fmt, const float *b, float *y, int M, int N, int K,
                     int threads) {
    const int panels = fmt >= P8_PANEL; /* w: panels (foretell_pack_p8), not the file's blocks */
    if (panels) fmt -= P8_PANEL;
    const int per = q8_block_values(fmt);
    if (!q8_block_bytes(fmt) || K % 64 || K % per || M <= 0 || N % 16) return -1;
    const int B = g8_block(fmt), blocks = K / B, z = g8_zero(fmt);
    const size_t row_bytes = (size_t)K / per * q8_block_bytes(fmt);
    int8_t *qx = aligned_alloc(64, ((size_t)M * K + 63) / 64 * 64);
    float *dx = malloc((size_t)M * blocks * sizeof(float)), *dxs = malloc((size_t)M * blocks * sizeof(float));
    int *zx = malloc((size_t)M * blocks * sizeof(int));
    int bad = !qx || !dx || !dxs || !zx;
    /* the input rows scaled to int8 per 32 values (as foretell_linear_q8 scales them); per block of B values its
     * scale, -z times its sum of qx (the integer sums' start) and, for Q4_K, its scale times that sum */
    #pragma omp parallel for schedule(static) num_threads(threads) if (M > 1)
    for (int m = 0; m < M; m++) {
        if (bad) continue;
        for (int k0 = 0; k0 < K; k0 += 32) {
            const float *p = x + (size_t)m * K + k0;
            const __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
            const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            if (!(amax <= 3.0e38f)) {
                #pragma omp atomic write
                bad = 2;
                break;
            }
            const float id = amax > 0.0f ? 127.0f / amax : 0.0f, d = amax / 127.0f;
            const __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)),
                                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)),
                                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            int8_t *o = qx + (size_t)m * K + k0;
            _mm_storeu_si128((__m128i *)o, _mm512_cvtsepi32_epi8(i0));
            _mm_storeu_si128((__m128i *)(o + 16), _mm512_cvtsepi32_epi8(i1));
            const int s0 = _mm512_reduce_add_epi32(i0), s1 = _mm512_reduce_add_epi32(i1);
            const int halves[2] = {s0, s1};
            for (int h = 0; h < 32 / B; h++) {
                const size_t at = (size_t)m * blocks + k0 / B + h;
                const int sum = B == 32 ? s0 + s1 : halves[h];
                dx[at] = d;
                zx[at] = -z * sum;
                dxs[at] = d * (float)sum;
            }
        }
    }
    const int tiles = (N + 16 * G8_NR - 1) / (16 * G8_NR);
    const int fused = panels && fmt != GGUF_Q8_0 && M <= (fmt == GGUF_Q6_K ? foretell_p8_fused_rows / 2 : foretell_p8_fused_rows);
    if (!bad) {
        #pragma omp parallel num_threads(threads)
        {
            /* kept per thread across calls (a one-row pass is many short calls) */
            static __thread float *kept;
            static __thread size_t kept_size;
            const size_t pw_floats = (size_t)G8_NR * 4 * K, sc_floats = (size_t)G8_NR * 16 * blocks;
            float *const buffer = grown(&kept, &kept_size, pw_floats + 2 * sc_floats);
            uint8_t *pw = buffer ? (uint8_t *)buffer : NULL;
            float *sc = buffer ? buffer + pw_floats : NULL;
            float *mn = buffer && fmt == GGUF_Q4_K ? buffer + pw_floats + sc_floats : NULL;
            const int ready = pw && sc && (fmt != GGUF_Q4_K || mn);
            if (!ready) {
                #pragma omp atomic write
                bad = 1;
            }
            #pragma omp for schedule(static)
            for (int t = 0; t < tiles; t++) {
                if (!ready) continue;
                const int n0 = t * 16 * G8_NR, nj = (N - n0) / 16 < G8_NR ? (N - n0) / 16 : G8_NR;
                if (fused) { /* short passes: the panels decoded in registers (p8_tile) */
                    const uint8_t *pan[G8_NR];
                    for (int j = 0; j < G8_NR; j++)
                        pan[j] = w + (size_t)(n0 / 16 + (j < nj ? j : nj - 1)) * p8_panel_bytes(fmt, K);
                    float tail[P8_FUSED_MR * 16 * G8_NR];
                    for (int m0 = 0; m0 < M; m0 += P8_FUSED_MR) {
                        const int mr = M - m0 < P8_FUSED_MR ? M - m0 : P8_FUSED_MR;
                        const size_t at = (size_t)m0 * blocks;
                        float *out = nj == G8_NR ? y + (size_t)m0 * N + n0 : tail;
                        const int ld = nj == G8_NR ? N : 16 * G8_NR;
                        p8_tile_rows(mr, fmt, qx + (size_t)m0 * K, dx + at, zx + at, dxs + at, K, pan, out, ld,
                                     b && nj == G8_NR ? b + n0 : NULL);
                        if (nj < G8_NR)
                            for (int r = 0; r < mr; r++)
                                for (int c = 0; c < 16 * nj; c++)
                                    y[(size_t)(m0 + r) * N + n0 + c] = tail[r * 16 * G8_NR + c] + (b ? b[n0 + c] : 0.0f);
                    }
                    continue;
                }
                const uint8_t *pws[G8_NR];
                const float *scs[G8_NR], *mns[G8_NR];
                for (int j = 0; j < G8_NR; j++) {
                    const int jj = j < nj ? j : nj - 1; /* a last tile of 16 outputs computes them twice */
                    const uint8_t *panel = panels ? w + (size_t)(n0 / 16 + jj) * p8_panel_bytes(fmt, K) : NULL;
                    pws[j] = panel && fmt == GGUF_Q8_0 ? panel : pw + (size_t)jj * 16 * K;
                    scs[j] = sc + (size_t)jj * 16 * blocks;
                    mns[j] = mn ? mn + (size_t)jj * 16 * blocks : NULL;
                    if (j < nj && panels)
                        p8_unpack(panel, fmt, K, pw + (size_t)j * 16 * K, sc + (size_t)j * 16 * blocks,
                                  mn ? mn + (size_t)j * 16 * blocks : NULL);
                    else if (j < nj)
                        g8_pack(w + (size_t)(n0 + 16 * j) * row_bytes, fmt, row_bytes, 16, K, pw + (size_t)j * 16 * K,
                                sc + (size_t)j * 16 * blocks, mn ? mn + (size_t)j * 16 * blocks : NULL);
                }
                float tail[G8_MR * 16 * G8_NR];
                for (int m0 = 0; m0 < M; m0 += G8_MR) {
                    const int mr = M - m0 < G8_MR ? M - m0 : G8_MR;
                    const size_t at = (size_t)m0 * blocks;
                    float *out = nj == G8_NR ? y + (size_t)m0 * N + n0 : tail;
                    const int ld = nj == G8_NR ? N : 16 * G8_NR;
                    const float *bias = b && nj == G8_NR ? b + n0 : NULL;
                    const int8_t *qm = qx + (size_t)m0 * K;
                    switch (mr) { /* one instance per tile height: the accumulators stay in registers */
#define G8_TILE(R) case R: g8_tile(R, qm, dx + at, zx + at, dxs + at, K, B, pws, scs, mns, out, ld, bias); break;
                        G8_TILE(1) G8_TILE(2) G8_TILE(3) G8_TILE(4) G8_TILE(5) G8_TILE(6)
#undef G8_TILE
                    }
                    if (nj < G8_NR)
                        for (int r = 0; r < mr; r++)
                            for (int c = 0; c < 16 * nj; c++)
                                y[(size_t)(m0 + r) * N + n0 + c] = tail[r * 16 * G8_NR + c] + (b ? b[n0 + c] : 0.0f);
                }
            }
        }
    }
    free(qx);
    free(dx);
    free(dxs);
    free(zx);
    return bad == 2 ? -2 : bad ? -1 : 0;
}

#endif /* AVX512-VNNI */

#if FORETELL_Q8 == 2
/* ---- int8 products on GGUF blocks without AVX512-VNNI: AVX2's VPMADDUBSW and VPMADDWD ----
 * foretell_linear_q8 as the VNNI build defines it (llama.cpp's numerics): each input row cut into blocks of 32
 * values, each scaled to int8 (dx = max |x| / 127, qx = x 127 / max |x| rounded to the nearest, ties to even: the
 * same integers and scales as there), a block's products with the weight block's integers summed exactly in int32,
 * then scaled by the two blocks' scales in fp32. VPMADDUBSW multiplies unsigned bytes by signed ones and adds
 * pairs into int16 (exact here: the weights' bytes are at most 63, or Q8_0's |q| <= 128 against |qx| <= 127, so a
 * pair is within 32512), VPMADDWD widens the pairs into int32 (by 1, or for Q6_K by each 16 values' scale):
 *   Q5_0: q in 0..31, w = d (q - 16): the products of q, minus 16 times the block's sum of qx;
 *   Q8_0: q signed, w = d q: |q| times qx with q's sign (VPSIGNB);
 *   Q4_K: q in 0..15, w = d sc q - dmin m: the products of q scaled by d sc, plus the sub-block's dx times its
 *         sum of qx times -dmin m;
 *   Q6_K: q in 0..63, w = d sc (q - 32), sc an int8 per 16 values: VPMADDWD by sc, minus 32 times the sum over the
 *         block's two halves of sc times their sums of qx.
 * A group is 8 blocks (256 values; a Q4_K or Q6_K super-block; Q5_0 and Q8_0 rows may end with 2, 4 or 6 blocks,
 * the rest zero): per (weight row, input row) its 8 int32 sums go into one vector (a2_fold), are converted, and
 * multiplied by the 8 weight scales times the 8 input scales into 8 float lanes; after the last group the lanes
 * are summed in one fixed order, then the bias added. Each output is that one sequence of instructions whatever
 * M: a row's result depends on its own input row alone. Each weight group is decoded once per call into registers
 * (a few KB) and applied to every input row. No panels here: prompt chunks run on this kernel up to the size
 * start-up measured it faster than the library's GEMM (cost.cached_prompt_kernel_rows), beyond it on the library. */

typedef struct {
    int8_t *qx;    /* M x 256 G: the int8 inputs, zero past K */
    float *dx;     /* M x 8 G: each block's scale (zero past K) */
    int32_t *off;  /* Q5_0: M x 8 G, -16 times each block's sum of qx */
    int16_t *s16;  /* Q6_K: M x 16 G, each 16 values' sum of qx */
    float *xsum;   /* Q4_K: M x 8 G, each block's dx times its sum of qx */
    int8_t *qxt;   /* passes a2_transposes takes: each group's qx transposed (a2_transpose) */
    int groups;
} a2_input;

/* Passes of this many rows and more take a2_group_dot_t: the weight group transposed once per
 * row and group so that each vector lane is one block, its products summed as int16 where they fit, no
 * horizontal adds per input row. The integer sums are the same integers, the float instructions the same: the
 * same bits as a2_group_dot. */
enum { A2_T_ROWS = 2 };

/* ... 3 rows for Q8_0, whose signs are transposed too (2-row calls 1.03x the time transposed; Q5_0 0.90x, Q4_K 0.87x,
 * Q6_K 0.75x) */
static inline int a2_transposes(int fmt, int M) { return M >= (fmt == GGUF_Q8_0 ? 3 : A2_T_ROWS); }

static void a2_release(a2_input *in) {
    free(in->qxt);
    free(in->qx);
    free(in->dx);
    free(in->off);
    free(in->s16);
    free(in->xsum);
}

static inline int a2_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline float a2_hsum(__m256 v) { /* one fixed order */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* out[j] lane b = in[b] lane j (8 x 8 int32): vector j then holds values 4j..4j + 3 of each of 8 blocks */
static inline void a2_transpose(const __m256i in[8], __m256i out[8]) {
    const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]), t1 = _mm256_unpackhi_epi32(in[0], in[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]), t3 = _mm256_unpackhi_epi32(in[2], in[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(in[4], in[5]), t5 = _mm256_unpackhi_epi32(in[4], in[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(in[6], in[7]), t7 = _mm256_unpackhi_epi32(in[6], in[7]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    out[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    out[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    out[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    out[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    out[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    out[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    out[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    out[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* room for the input rows scaled to int8 (a2_prepare_row); -1 if out of memory */
static int a2_alloc(int M, int K, int fmt, a2_input *in) {
    const int G = (K + 255) / 256;
    in->groups = G;
    in->qx = aligned_alloc(64, (size_t)M * G * 256);
    const size_t per_block = ((size_t)M * G * 32 + 63) / 64 * 64; /* 8 floats or ints a group, whole lines */
    in->dx = aligned_alloc(64, per_block);
    in->off = fmt == GGUF_Q5_0 ? aligned_alloc(64, per_block) : NULL;
    in->s16 = fmt == GGUF_Q6_K ? aligned_alloc(64, per_block) : NULL; /* 16 int16 a group */
    in->xsum = fmt == GGUF_Q4_K ? aligned_alloc(64, per_block) : NULL;
    in->qxt = a2_transposes(fmt, M) ? aligned_alloc(64, (size_t)M * G * 256) : NULL;
    if (!in->qx || !in->dx || (fmt == GGUF_Q5_0 && !in->off) || (fmt == GGUF_Q6_K && !in->s16)
        || (fmt == GGUF_Q4_K && !in->xsum) || (a2_transposes(fmt, M) && !in->qxt))
        return -1;
    return 0;
}

/* input row m scaled to int8 per block of 32 values, with what each format's offsets need (and, where the pass
 * takes the transposed path, each group transposed); -2 for an inf or NaN. Rows are independent: the threads of
 * a call share them out. */
static int a2_prepare_row(const float *x, int m, int K, a2_input *in) {
    const int G = in->groups;
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const size_t blocks = (size_t)m * G * 8;
    memset(in->qx + (size_t)m * G * 256 + K, 0, (size_t)G * 256 - K);
    for (int b = 0; b < G * 8; b++) {
        int8_t *o = in->qx + (size_t)m * G * 256 + 32 * b;
        if (32 * b >= K) {
            in->dx[blocks + b] = 0.0f;
            if (in->off) in->off[blocks + b] = 0;
            if (in->xsum) in->xsum[blocks + b] = 0.0f;
            continue;
        }
        const float *p = x + (size_t)m * K + 32 * b;
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(p + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 a = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        a = _mm_max_ps(a, _mm_movehl_ps(a, a));
        a = _mm_max_ss(a, _mm_movehdup_ps(a));
        float mx = _mm_cvtss_f32(a);
        for (int i = 0; i < 32; i++) /* max_ps drops a NaN operand: look for one */
            if (!(fabsf(p[i]) <= 3.0e38f)) return -2;
        const float id = mx > 0.0f ? 127.0f / mx : 0.0f;
        in->dx[blocks + b] = mx / 127.0f;
        __m256i q[4];
        for (int i = 0; i < 4; i++) /* the current rounding mode: to the nearest, ties to even */
            q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
        const __m256i s01 = _mm256_packs_epi32(q[0], q[1]), s23 = _mm256_packs_epi32(q[2], q[3]);
        _mm256_storeu_si256((__m256i *)o, _mm256_permutevar8x32_epi32(_mm256_packs_epi16(s01, s23), order));
        const int lo = a2_hsum_i32(_mm256_add_epi32(q[0], q[1])), hi = a2_hsum_i32(_mm256_add_epi32(q[2], q[3]));
        if (in->off) in->off[blocks + b] = -16 * (lo + hi);
        if (in->s16) {
            in->s16[(size_t)m * G * 16 + 2 * b] = (int16_t)lo;
            in->s16[(size_t)m * G * 16 + 2 * b + 1] = (int16_t)hi;
        }
        if (in->xsum) in->xsum[blocks + b] = in->dx[blocks + b] * (float)(lo + hi);
    }
    if (in->s16)
        for (int b = (K + 31) / 32; b < G * 8; b++)
            in->s16[(size_t)m * G * 16 + 2 * b] = in->s16[(size_t)m * G * 16 + 2 * b + 1] = 0;
    if (in->qxt)
        for (size_t i = (size_t)m * G; i < (size_t)(m + 1) * G; i++) {
            __m256i v[8];
            for (int b = 0; b < 8; b++) v[b] = _mm256_load_si256((const __m256i *)(in->qx + 256 * i + 32 * b));
            a2_transpose(v, (__m256i *)(in->qxt + 256 * i));
        }
    return 0;
}

/* a weight group in registers: v[b] the 8 blocks' values as bytes (Q8_0: |q|, with s[b] = q for the signs), ws the
 * weight scales per block, Q4_K mn -dmin m per block, Q6_K mul[b] each half's sc as int16 and sc16 the 16 sc */
typedef struct {
    __m256i v[8], s[8], mul[8], sc16;
    __m256 ws, mn;
} a2_group;

static inline __m256i a2_low4(__m256i q) { return _mm256_and_si256(q, _mm256_set1_epi8(15)); }
static inline __m256i a2_high4(__m256i q) { return _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15)); }

/* 0xFF in byte i where bit i of the 32 bits at p is set (llama.cpp's bytes_from_bits_32) */
static inline __m256i a2_bits_to_bytes(const uint8_t *p) {
    const __m256i shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)load_u32(p)), shuffle);
    return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
}

/* Q8_0, Q5_0: the blocks of group g a row of K values has (8, fewer at its end) */
static inline int a2_blocks(int K, int g) { return K / 32 - 8 * g < 8 ? K / 32 - 8 * g : 8; }

/* their fp16 scales as floats (0 past the row's end), 4 to a general register: two vector inserts, not eight */
static inline __m256 a2_block_scales(const uint8_t *row, const int fmt, int g, int count) {
    const size_t bytes = fmt == GGUF_Q8_0 ? 34 : 22;
    const uint8_t *p = row + (size_t)g * 8 * bytes;
    uint64_t lo = 0, hi = 0;
    for (int b = 0; b < count; b++) {
        const uint64_t h = load_u16(p + b * bytes);
        if (b < 4) lo |= h << (16 * b);
        else hi |= h << (16 * (b - 4));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* block b of group g as unsigned bytes: Q5_0's q (0..31); Q8_0's |q| (|-128| = 128 as an unsigned byte), *s = q */
static inline __attribute__((always_inline)) __m256i a2_block_values(const uint8_t *row, const int fmt, int g, int b,
                                                                     __m256i *s) {
    if (fmt == GGUF_Q8_0) {
        *s = _mm256_loadu_si256((const __m256i *)(row + ((size_t)g * 8 + b) * 34 + 2));
        return _mm256_abs_epi8(*s);
    }
    const uint8_t *p = row + ((size_t)g * 8 + b) * 22;
    const __m256i q = _mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 6))),
                                        _mm256_setr_epi64x(0, 0, 4, 4)); /* the high nibbles in the high half */
    return _mm256_or_si256(a2_low4(q), _mm256_and_si256(a2_bits_to_bytes(p + 2), _mm256_set1_epi8(16)));
}

/* a Q4_K super-block's 8 scales times d and 8 mins times -dmin (p: the super-block); the 6-bit values unpacked 4 to
 * a 32-bit word (llama.cpp's kmask), widened from one general register each */
static inline void a2_q4k_scales(const uint8_t *p, __m256 *ws, __m256 *mn) {
    const uint32_t u0 = load_u32(p + 4), u1 = load_u32(p + 8), u2 = load_u32(p + 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    const uint64_t sc = (u0 & k1) | (uint64_t)((u2 & k2) | (((u0 >> 6) & k3) << 4)) << 32;
    const uint64_t m = (u1 & k1) | (uint64_t)(((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4)) << 32;
    *ws = _mm256_mul_ps(_mm256_set1_ps(half1(p)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc))));
    *mn = _mm256_mul_ps(_mm256_set1_ps(-half1(p + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m))));
}

/* a Q6_K super-block's (p) blocks 4h..4h + 3 as bytes 0..63 */
static inline __attribute__((always_inline)) void a2_q6k_values(const uint8_t *p, int h, __m256i v[4]) {
    const __m256i three = _mm256_set1_epi8(3);
    const __m256i la = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
    const __m256i lb = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, three), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), three), 4);
    const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), three), 4);
    const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), three), 4);
    v[0] = _mm256_or_si256(a2_low4(la), h0);
    v[1] = _mm256_or_si256(a2_low4(lb), h1);
    v[2] = _mm256_or_si256(a2_high4(la), h2);
    v[3] = _mm256_or_si256(a2_high4(lb), h3);
}

/* block b's two 16-value scales as int16, sc[2b] in the low 128 bits and sc[2b + 1] in the high (sc16: the 16 as
 * int16, so that 32-bit lane b holds the pair) */
static inline __m256i a2_q6k_mul(__m256i sc16, int b) {
    const __m256i pair = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(b));
    return _mm256_shuffle_epi8(pair, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                                      2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}

static inline __attribute__((always_inline)) void a2_decode(const uint8_t *row, const int fmt, int g, int K,
                                                            a2_group *w) {
    /* the scales go into vectors from registers: scalars stored side by side and read back as one vector would
     * stall each group on a store forwarding */
    if (fmt == GGUF_Q4_K) {
        const uint8_t *p = row + (size_t)g * 144;
        a2_q4k_scales(p, &w->ws, &w->mn);
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * j));
            w->v[2 * j] = a2_low4(q);
            w->v[2 * j + 1] = a2_high4(q);
        }
    } else if (fmt == GGUF_Q6_K) {
        const uint8_t *p = row + (size_t)g * 210;
        w->ws = _mm256_set1_ps(half1(p + 208));
        for (int h = 0; h < 2; h++) a2_q6k_values(p, h, &w->v[4 * h]);
        w->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
        for (int b = 0; b < 8; b++) w->mul[b] = a2_q6k_mul(w->sc16, b);
    } else { /* Q8_0, Q5_0: 8 blocks of 32 values, fewer at the row's end (the rest zero) */
        const int count = a2_blocks(K, g);
        w->ws = a2_block_scales(row, fmt, g, count);
        for (int b = 0; b < 8; b++) {
            if (b < count) w->v[b] = a2_block_values(row, fmt, g, b, &w->s[b]);
            else w->v[b] = w->s[b] = _mm256_setzero_si256();
        }
    }
}

/* 8 vectors of 8 int32 as one whose lane b is the sum of vector b's lanes (in a fixed order) */
static inline __m256i a2_fold(const __m256i p[8]) {
    const __m256i a = _mm256_hadd_epi32(p[0], p[1]), b = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i c = _mm256_hadd_epi32(p[4], p[5]), d = _mm256_hadd_epi32(p[6], p[7]);
    const __m256i e = _mm256_hadd_epi32(a, b), f = _mm256_hadd_epi32(c, d); /* per 128 bits: halves of 0-3, 4-7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(e, f, 0x20), _mm256_permute2x128_si256(e, f, 0x31));
}

/* the same for 8 vectors of 16 int16 pair sums, added as int16 while they fit: Q4_K's pairs are within 3810 (15 x
 * 127 x 2), so the 8 pairs of a block's half within 30480; Q5_0's within 7874, 4 pairs within 31496 */
static inline __m256i a2_fold16(const int fmt, const __m256i p[8]) {
    const __m256i a = _mm256_hadd_epi16(p[0], p[1]), b = _mm256_hadd_epi16(p[2], p[3]);
    const __m256i c = _mm256_hadd_epi16(p[4], p[5]), d = _mm256_hadd_epi16(p[6], p[7]);
    const __m256i e = _mm256_hadd_epi16(a, b), f = _mm256_hadd_epi16(c, d); /* per 128 bits: 2 sums a block */
    if (fmt == GGUF_Q4_K) { /* per 128 bits: blocks 0-7's half sums */
        const __m256i h = _mm256_hadd_epi16(e, f);
        return _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(h)),
                                _mm256_cvtepi16_epi32(_mm256_extracti128_si256(h, 1)));
    }
    const __m256i ones = _mm256_set1_epi16(1), E = _mm256_madd_epi16(e, ones), F = _mm256_madd_epi16(f, ones);
    return _mm256_add_epi32(_mm256_permute2x128_si256(E, F, 0x20), _mm256_permute2x128_si256(E, F, 0x31));
}

/* acc + a group's 8 block sums (int32) times the weight blocks' scales ws times the input blocks' (dx): the float
 * instructions every path runs on its integers, so that each gives the same bits */
static inline __m256 a2_scale_add(__m256 acc, __m256i sum, __m256 ws, const a2_input *in, size_t i) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(ws, _mm256_loadu_ps(in->dx + i)), acc);
}

/* acc + group g's products of one input row (qx its 256 values, i its blocks' index) with the weight group */
static inline __attribute__((always_inline)) __m256 a2_group_dot(const int fmt, const a2_group *w,
                                                                 const a2_input *in, size_t i, const int8_t *qx,
                                                                 __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[8];
    if (fmt == GGUF_Q4_K || fmt == GGUF_Q5_0) {
        for (int b = 0; b < 8; b++)
            p[b] = _mm256_maddubs_epi16(w->v[b], _mm256_load_si256((const __m256i *)(qx + 32 * b)));
        __m256i sum = a2_fold16(fmt, p);
        if (fmt == GGUF_Q5_0) sum = _mm256_add_epi32(sum, _mm256_loadu_si256((const __m256i *)(in->off + i)));
        acc = a2_scale_add(acc, sum, w->ws, in, i);
        if (fmt == GGUF_Q4_K) acc = _mm256_fmadd_ps(w->mn, _mm256_loadu_ps(in->xsum + i), acc);
        return acc;
    }
    for (int b = 0; b < 8; b++) {
        const __m256i xv = _mm256_load_si256((const __m256i *)(qx + 32 * b));
        if (fmt == GGUF_Q8_0)
            p[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(w->v[b], _mm256_sign_epi8(xv, w->s[b])), ones);
        else if (fmt == GGUF_Q6_K)
            p[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(w->v[b], xv), w->mul[b]);
        else
            p[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(w->v[b], xv), ones);
    }
    __m256i sum = a2_fold(p);
    if (fmt == GGUF_Q5_0)
        sum = _mm256_add_epi32(sum, _mm256_loadu_si256((const __m256i *)(in->off + i)));
    if (fmt == GGUF_Q6_K)
        sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(in->s16 + 2 * i)), w->sc16), 5));
    acc = a2_scale_add(acc, sum, w->ws, in, i);
    if (fmt == GGUF_Q4_K) acc = _mm256_fmadd_ps(w->mn, _mm256_loadu_ps(in->xsum + i), acc);
    return acc;
}

/* a2_group_dot straight from the row's blocks (one-row passes), each block's values decoded into registers and
 * multiplied at once (a2_decode would store the 8 blocks' vectors, and a2_group_dot read them back): the same
 * integers, then the same instructions. With the sums kept in a register over the groups, the scales gathered in
 * general registers and the rows prefetched (A2_AHEAD), one-row calls (Zen 3 EPYC, 2 threads, against the build
 * before all three): Q8_0 0.72x the time, Q5_0 0.60x, Q4_K 0.64x, Q6_K 0.77x; the 0.5B's output head (Q8_0, 145 MB)
 * 0.78x. */
static inline __attribute__((always_inline)) __m256 a2_group_dot_blocks(const int fmt, const uint8_t *row, int g,
                                                                        const int count, const a2_input *in, size_t i,
                                                                        const int8_t *qx, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    if (fmt == GGUF_Q4_K) {
        const uint8_t *p = row + (size_t)g * 144;
        __m256i pr[8];
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * j));
            pr[2 * j] = _mm256_maddubs_epi16(a2_low4(q), _mm256_load_si256((const __m256i *)(qx + 64 * j)));
            pr[2 * j + 1] = _mm256_maddubs_epi16(a2_high4(q), _mm256_load_si256((const __m256i *)(qx + 64 * j + 32)));
        }
        const __m256i sum = a2_fold16(fmt, pr);
        __m256 ws, mn;
        a2_q4k_scales(p, &ws, &mn);
        acc = a2_scale_add(acc, sum, ws, in, i);
        return _mm256_fmadd_ps(mn, _mm256_loadu_ps(in->xsum + i), acc);
    }
    if (fmt == GGUF_Q6_K) {
        const uint8_t *p = row + (size_t)g * 210;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
        __m256i pr[8];
        for (int h = 0; h < 2; h++) {
            __m256i v[4];
            a2_q6k_values(p, h, v);
            for (int k = 0; k < 4; k++) {
                const int b = 4 * h + k;
                pr[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(v[k], _mm256_load_si256((const __m256i *)(qx + 32 * b))),
                                          a2_q6k_mul(sc16, b));
            }
        }
        __m256i sum = a2_fold(pr);
        sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(in->s16 + 2 * i)), sc16), 5));
        const __m256 ws = _mm256_set1_ps(half1(p + 208));
        return a2_scale_add(acc, sum, ws, in, i);
    }
    __m256i p[8];
    for (int b = 0; b < 8; b++) {
        if (b >= count) {
            p[b] = _mm256_setzero_si256();
            continue;
        }
        __m256i sg;
        const __m256i v = a2_block_values(row, fmt, g, b, &sg);
        const __m256i xv = _mm256_load_si256((const __m256i *)(qx + 32 * b));
        p[b] = fmt == GGUF_Q8_0 ? _mm256_madd_epi16(_mm256_maddubs_epi16(v, _mm256_sign_epi8(xv, sg)), ones)
                                : _mm256_maddubs_epi16(v, xv);
    }
    __m256i sum = fmt == GGUF_Q8_0 ? a2_fold(p) : a2_fold16(fmt, p);
    if (fmt == GGUF_Q5_0) sum = _mm256_add_epi32(sum, _mm256_loadu_si256((const __m256i *)(in->off + i)));
    const __m256 ws = a2_block_scales(row, fmt, g, count);
    return a2_scale_add(acc, sum, ws, in, i);
}

/* a weight group decoded (a2_decode) and transposed for a2_group_dot_t: vt (and Q8_0's signs st) as a2_transpose
 * lays them out, Q6_K's sc as scl/sch */
typedef struct {
    a2_group grp;
    __m256i vt[8], st[8], scl, sch;
} a2_tgroup;

static inline __attribute__((always_inline)) void a2_decode_t(const uint8_t *row, const int fmt, int g, int K,
                                                              a2_tgroup *t) {
    a2_decode(row, fmt, g, K, &t->grp);
    a2_transpose(t->grp.v, t->vt);
    if (fmt == GGUF_Q8_0) a2_transpose(t->grp.s, t->st);
    t->scl = t->sch = _mm256_setzero_si256();
    if (fmt == GGUF_Q6_K) {
        const int8_t *sc = (const int8_t *)(row + (size_t)g * 210 + 192);
        t->scl = _mm256_setr_epi16(sc[0], sc[0], sc[2], sc[2], sc[4], sc[4], sc[6], sc[6], sc[8], sc[8], sc[10],
                                   sc[10], sc[12], sc[12], sc[14], sc[14]);
        t->sch = _mm256_setr_epi16(sc[1], sc[1], sc[3], sc[3], sc[5], sc[5], sc[7], sc[7], sc[9], sc[9], sc[11],
                                   sc[11], sc[13], sc[13], sc[15], sc[15]);
    }
}

/* a2_group_dot from the transposed group (t: a2_decode_t's, xv the input group's 8 vectors from qxt): lane b of
 * every vector is block b, so the block sums are lane sums. Q4_K: the 8 vectors' pair sums as int16 (within 30480); Q5_0: two halves of
 * 4 (31496); Q6_K: pairs of vectors (32004), each by its half's sc. The same integers, then a2_group_dot's
 * instructions. */
static inline __attribute__((always_inline)) __m256 a2_group_dot_t(const int fmt, const a2_tgroup *t,
                                                                   const a2_input *in, size_t i, const __m256i xv[8],
                                                                   __m256 acc) {
    const a2_group *w = &t->grp;
    const __m256i *vt = t->vt, *st = t->st, scl = t->scl, sch = t->sch;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[8], sum;
    for (int j = 0; j < 8; j++)
        p[j] = _mm256_maddubs_epi16(vt[j], fmt == GGUF_Q8_0 ? _mm256_sign_epi8(xv[j], st[j]) : xv[j]);
    if (fmt == GGUF_Q8_0) { /* pairs within 32512: each vector widened alone */
        const __m256i a = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p[0], ones), _mm256_madd_epi16(p[1], ones)),
                                           _mm256_add_epi32(_mm256_madd_epi16(p[2], ones), _mm256_madd_epi16(p[3], ones)));
        const __m256i b = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p[4], ones), _mm256_madd_epi16(p[5], ones)),
                                           _mm256_add_epi32(_mm256_madd_epi16(p[6], ones), _mm256_madd_epi16(p[7], ones)));
        sum = _mm256_add_epi32(a, b);
    } else if (fmt == GGUF_Q4_K) {
        const __m256i a = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
        const __m256i b = _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7]));
        sum = _mm256_madd_epi16(_mm256_add_epi16(a, b), ones);
    } else if (fmt == GGUF_Q5_0) {
        const __m256i a = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
        const __m256i b = _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7]));
        sum = _mm256_add_epi32(_mm256_madd_epi16(a, ones), _mm256_madd_epi16(b, ones));
        sum = _mm256_add_epi32(sum, _mm256_loadu_si256((const __m256i *)(in->off + i)));
    } else { /* Q6_K: values 4j..4j + 3 of a block are its first half for j < 4 */
        const __m256i a = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p[0], p[1]), scl),
                                           _mm256_madd_epi16(_mm256_add_epi16(p[2], p[3]), scl));
        const __m256i b = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p[4], p[5]), sch),
                                           _mm256_madd_epi16(_mm256_add_epi16(p[6], p[7]), sch));
        sum = _mm256_sub_epi32(_mm256_add_epi32(a, b), _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(in->s16 + 2 * i)), w->sc16), 5));
    }
    acc = a2_scale_add(acc, sum, w->ws, in, i);
    if (fmt == GGUF_Q4_K) acc = _mm256_fmadd_ps(w->mn, _mm256_loadu_ps(in->xsum + i), acc);
    return acc;
}

enum { A2_NB = 4 }; /* weight rows a thread takes at a time */

static inline void a2_load_group(const a2_input *in, size_t i, __m256i xv[8]) { /* input group i / 8, transposed */
    for (int j = 0; j < 8; j++) xv[j] = _mm256_load_si256((const __m256i *)(in->qxt + 32 * i + 32 * j));
}

/* Passes of this many rows and more take a2_rows_xs: per group, the thread's A2_NB weight rows decoded and
 * transposed once into L1, then each input row's group read once into registers for all of them (a2_rows reads
 * it once per weight row: from L2 once a pass's inputs outgrow L1). The same a2_group_dot_t per (weight row, input
 * row): the same bits. A 0.5B-shaped pass of the 24 layers' linears (cold weights, a Zen 3 EPYC): 48 rows 0.89x
 * the time, 64 rows 0.75x, 128 rows 0.78x, 256 rows 0.74x; 32 rows the same, 16 rows 1.34x (the weights' groups
 * then come from L1, not from registers, and the inputs fit L1 anyway). */
enum { A2_XS_ROWS = 48 };

/* Rows of up to this many groups (1,024 values: the 0.5B's 896-wide layers, 70% of its products) take the input rows
 * one at a time: the weight rows' groups all decoded first (into L1), each input row's sums then kept in registers
 * over its groups, not stored and reloaded per group. The same a2_group_dot_t per (weight row, input row) in the same
 * order of groups: the same bits. A 9728 x 896 Q5_0 layer (2 threads, Zen 3 EPYC): 48-64 rows 0.75-0.78x the time,
 * 256-512 rows 0.79-0.82x; over 19 groups (4864-wide) the decoded groups no longer fit L1 and it was 1.1-1.5x slower. */
enum { A2_XS_SHORT = 4 };

/* ... from this many rows (passes of 10-40 rows of that layer 0.58-0.87x the time, of 6-9 rows 1.06-1.16x) */
enum { A2_XS_SHORT_ROWS = 10 };

/* weight rows [n0, n0 + nr) against all M input rows (nr: A2_NB, or fewer at the end); acc: A2_NB x M vectors */
static inline __attribute__((always_inline)) void a2_rows_xs(const uint8_t *w, size_t row_bytes, const int fmt,
                                                             const a2_input *in, int M, int K, float *y,
                                                             const float *b, int N, int n0, const int nr,
                                                             __m256 *acc) {
    const int G = in->groups;
    if (G <= A2_XS_SHORT) { /* every group of the nr weight rows decoded once into L1 (23 KB), then per input row
                             * its groups in order, each into the nr sums kept in registers */
        a2_tgroup t[A2_NB][A2_XS_SHORT];
        for (int r = 0; r < nr; r++)
            for (int g = 0; g < G; g++) a2_decode_t(w + (size_t)(n0 + r) * row_bytes, fmt, g, K, &t[r][g]);
        for (int m = 0; m < M; m++) {
            __m256 a[A2_NB];
            for (int r = 0; r < nr; r++) a[r] = _mm256_setzero_ps();
            for (int g = 0; g < G; g++) {
                const size_t i = ((size_t)m * G + g) * 8;
                __m256i xv[8];
                a2_load_group(in, i, xv);
                for (int r = 0; r < nr; r++) a[r] = a2_group_dot_t(fmt, &t[r][g], in, i, xv, a[r]);
            }
            for (int r = 0; r < nr; r++) y[(size_t)m * N + n0 + r] = a2_hsum(a[r]) + (b ? b[n0 + r] : 0.0f);
        }
        return;
    }
    a2_tgroup t[A2_NB];
    for (int i = 0; i < nr * M; i++) acc[i] = _mm256_setzero_ps();
    for (int g = 0; g < G; g++) {
        for (int r = 0; r < nr; r++) a2_decode_t(w + (size_t)(n0 + r) * row_bytes, fmt, g, K, &t[r]);
        for (int m = 0; m < M; m++) {
            const size_t i = ((size_t)m * G + g) * 8;
            __m256i xv[8];
            a2_load_group(in, i, xv);
            for (int r = 0; r < nr; r++) acc[r * M + m] = a2_group_dot_t(fmt, &t[r], in, i, xv, acc[r * M + m]);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int m = 0; m < M; m++) y[(size_t)m * N + n0 + r] = a2_hsum(acc[r * M + m]) + (b ? b[n0 + r] : 0.0f);
}

/* Passes of a few rows read each weight row from memory once: they ask for the row this many rows on while computing
 * one. The 0.5B's output head (Q8_0, 145 MB, one row, 2 threads, Zen 3 EPYC): 0.85x the time (17 GB/s), 4 or 16 rows
 * on 0.84-0.87x; whole one-token passes 0.94x, 2-8 tokens 0.94-0.98x. */
enum { A2_AHEAD = 8 };

static inline void a2_prefetch_ahead(const uint8_t *row, size_t row_bytes) { /* a prefetch does not fault */
    for (size_t o = 0; o < row_bytes; o += 64) _mm_prefetch((const char *)row + A2_AHEAD * row_bytes + o, _MM_HINT_T0);
}

/* weight rows [n0, n0 + nb) against all M input rows; acc: A2_NB x M vectors of scratch */
static inline __attribute__((always_inline)) void a2_rows(const uint8_t *w, size_t row_bytes, const int fmt,
                                                          const a2_input *in, int M, int K, float *y, const float *b,
                                                          int N, int n0, int nb, __m256 *acc) {
    const int G = in->groups;
    if (M >= A2_XS_ROWS || (G <= A2_XS_SHORT && M >= A2_XS_SHORT_ROWS)) {
        if (nb == A2_NB) a2_rows_xs(w, row_bytes, fmt, in, M, K, y, b, N, n0, A2_NB, acc);
        else a2_rows_xs(w, row_bytes, fmt, in, M, K, y, b, N, n0, nb, acc);
        return;
    }
    if (M == 1) { /* each group straight from the blocks (a2_group_dot_blocks), the sum in a register */
        const int whole = K / 256; /* groups of 8 blocks: all but maybe a Q8_0 or Q5_0 row's last */
        for (int r = 0; r < nb; r++) {
            const uint8_t *row = w + (size_t)(n0 + r) * row_bytes;
            a2_prefetch_ahead(row, row_bytes);
            __m256 a = _mm256_setzero_ps();
            for (int g = 0; g < whole; g++) a = a2_group_dot_blocks(fmt, row, g, 8, in, (size_t)g * 8, in->qx + 256 * g, a);
            for (int g = whole; g < G; g++)
                a = a2_group_dot_blocks(fmt, row, g, a2_blocks(K, g), in, (size_t)g * 8, in->qx + 256 * g, a);
            y[n0 + r] = a2_hsum(a) + (b ? b[n0 + r] : 0.0f);
        }
        return;
    }
    for (int r = 0; r < nb; r++) {
        const uint8_t *row = w + (size_t)(n0 + r) * row_bytes;
        a2_prefetch_ahead(row, row_bytes);
        for (int m = 0; m < M; m++) acc[m] = _mm256_setzero_ps();
        for (int g = 0; g < G; g++) {
            if (in->qxt) {
                a2_tgroup t;
                a2_decode_t(row, fmt, g, K, &t);
                for (int m = 0; m < M; m++) {
                    const size_t i = ((size_t)m * G + g) * 8;
                    __m256i xv[8];
                    a2_load_group(in, i, xv);
                    acc[m] = a2_group_dot_t(fmt, &t, in, i, xv, acc[m]);
                }
                continue;
            }
            a2_group grp;
            a2_decode(row, fmt, g, K, &grp);
            for (int m = 0; m < M; m++) {
                const size_t i = ((size_t)m * G + g) * 8;
                acc[m] = a2_group_dot(fmt, &grp, in, i, in->qx + 32 * i, acc[m]);
            }
        }
        for (int m = 0; m < M; m++) y[(size_t)m * N + n0 + r] = a2_hsum(acc[m]) + (b ? b[n0 + r] : 0.0f);
    }
}

#define A2_ROWS(NAME, FMT)                                                                                          \
static void NAME(const uint8_t *w, size_t row_bytes, const a2_input *in, int M, int K, float *y, const float *b, \
                 int N, int n0, int nb, __m256 *acc) {                                                              \
    a2_rows(w, row_bytes, FMT, in, M, K, y, b, N, n0, nb, acc);                                                     \
}
A2_ROWS(a2_rows_q5_0, GGUF_Q5_0)
A2_ROWS(a2_rows_q8_0, GGUF_Q8_0)
A2_ROWS(a2_rows_q4_k, GGUF_Q4_K)
A2_ROWS(a2_rows_q6_k, GGUF_Q6_K)

enum { A2_CHUNKS = 8, A2_PREPARE_ALONE = 16384 };
typedef void (*a2_rows_fn)(const uint8_t *, size_t, const a2_input *, int, int, float *, const float *, int, int, int,
                           __m256 *);

/* the call's block blk of A2_NB weight rows (fewer at the end) against all M input rows */
static inline void a2_rows_block(a2_rows_fn rows, const uint8_t *w, size_t row_bytes, const a2_input *in, int M, int K,
                                 float *y, const float *b, int N, int blk, __m256 *acc) {
    const int n0 = blk * A2_NB;
    rows(w, row_bytes, in, M, K, y, b, N, n0, N - n0 < A2_NB ? N - n0 : A2_NB, acc);
}
int foretell_linear_q8(const float *x, const uint8_t *w, int fmt, const float *b, float *y, int M, int N, int K,
                       int threads) {
    const int per = q8_block_values(fmt);
    if (!q8_block_bytes(fmt) || K % 64 || K % per || M <= 0) return -1;
    const size_t row_bytes = (size_t)K / per * q8_block_bytes(fmt);
    a2_input in = {0};
    if (a2_alloc(M, K, fmt, &in)) { a2_release(&in); return -1; }
    const a2_rows_fn rows = fmt == GGUF_Q5_0 ? a2_rows_q5_0 : fmt == GGUF_Q8_0 ? a2_rows_q8_0
                            : fmt == GGUF_Q4_K ? a2_rows_q4_k : a2_rows_q6_k;
    const int blocks = (N + A2_NB - 1) / A2_NB;
    /* one-row passes stream each thread's half of the weights (memory-bound); passes of more rows (compute-bound)
     * take A2_CHUNKS chunks a thread, first come first served, so that a core slowed by its neighbours (a shared
     * VM) does not hold the other at the end of every call. With the inputs quantized by both threads: the 0.5B's
     * 96-token passes 0.98x the time (2-core Zen 3 EPYC, one engine, the two builds alternating), the threads'
     * samples waiting in OpenMP's barriers 7.4% -> 3.6% */
    const int chunk = blocks / (threads * A2_CHUNKS) > 0 ? blocks / (threads * A2_CHUNKS) : 1;
    /* the input rows are quantized by the call's threads together, a few (a microsecond's work) before them */
    const int few = (size_t)M * K < A2_PREPARE_ALONE;
    int failed = 0, bad_input = 0;
    for (int m = 0; few && m < M; m++) bad_input |= a2_prepare_row(x, m, K, &in) != 0;
    #pragma omp parallel num_threads(threads)
    {
        if (!few) {
            #pragma omp for schedule(static)
            for (int m = 0; m < M; m++)
                if (a2_prepare_row(x, m, K, &in)) {
                    #pragma omp atomic write
                    bad_input = 1;
                }
        }
        int bad; /* read after the loop's barrier: every thread sees the same */
        #pragma omp atomic read
        bad = bad_input;
        if (!bad) {
            __m256 *acc = aligned_alloc(32, (size_t)A2_NB * M * sizeof(__m256));
            if (!acc) {
                #pragma omp atomic write
                failed = 1;
            }
            if (M == 1) {
                #pragma omp for schedule(static)
                for (int blk = 0; blk < blocks; blk++)
                    if (acc) a2_rows_block(rows, w, row_bytes, &in, M, K, y, b, N, blk, acc);
            } else {
                #pragma omp for schedule(dynamic, chunk)
                for (int blk = 0; blk < blocks; blk++)
                    if (acc) a2_rows_block(rows, w, row_bytes, &in, M, K, y, b, N, blk, acc);
            }
            free(acc);
        }
    }
    a2_release(&in);
    return bad_input ? -2 : failed ? -1 : 0;
}
#endif /* AVX2 int8 */

#if defined(FORETELL_Q8)
/* ---- a whole pass of a Qwen2/Llama decoder's layers on the int8 route, in one call (foretell_layers_q8) ----
 * Exact mode's fp32 passes whose every row needs logits (decode steps, verify passes of chains), as
 * runner.LeanDecoder runs them layer by layer from Python: the same functions on the same inputs in the same order
 * (RMSNorm with the residual add, the q/k/v projections, the rotary embedding, the cache writes, the attention,
 * o_proj, RMSNorm, gate/up, SiLU * up, down_proj), so the same bits, without the 10-16 Python calls and tensors of
 * each layer (about 15 ms of a 50 ms one-token pass of the 0.5B on a 2-core Cascade Lake). A projection set (q/k/v,
 * gate/up) is up to 3 calls of foretell_linear_q8, each writing its own [M, n] block of the set's buffer; src and
 * col say in which call's block, and at which column, each of q, k, v (gate, up) starts. A pass holds sequences
 * (chains of rows) one after another; each writes its keys and values at positions [start, start + rows) of its own
 * caches ([G, capacity, D] per layer) and its query t sees keys [first, start + t + 1), first = 0 or, with a
 * sliding window w, max(0, start + t + 1 - w). h: the embeddings [M, E] in; x_out: the final norm's output. */
typedef struct {
    const uint8_t *w;
    const float *b;
    int fmt, n;
} q8_call;

typedef struct {
    const float *norm1, *norm2;
    q8_call qkv[3], gu[2], o, down;
    int n_qkv, n_gu, window;
    int qkv_src[3], qkv_col[3], gu_src[2], gu_col[2];
} q8_layer;

typedef struct {
    int rows, start;
    long capacity;
    float *const *keys, *const *values; /* per layer */
    float *const *tiles; /* per layer, the sequence's tiled keys (foretell_attention_f32_tiles), or NULL */
    long tile_cap;
    int valid;
} q8_seq;

static float *layers_workspace(size_t floats) { /* not the attention's: that one is in use within the loop */
    static __thread float *buffer;
    static __thread size_t size;
    return grown(&buffer, &size, floats);
}

/* the calls of a projection set into buf (call i's [M, n_i] block after the blocks before it); 0 or the error */
static int q8_calls(const float *x, const q8_call *calls, int count, float *buf, size_t *offsets, int M, int K,
                    int threads) {
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        offsets[i] = off;
        const int rc = foretell_linear_q8(x, calls[i].w, calls[i].fmt, calls[i].b, buf + off, M, calls[i].n, K,
                                          threads);
        if (rc) return rc;
        off += (size_t)M * calls[i].n;
    }
    return 0;
}

enum { LAYERS_KEPT_FLOATS = 1 << 24 }; /* 64 MB */
static int layers_q8(const q8_layer *layers, int L, const q8_seq *seqs, int S, const float *embeddings,
                     const float *cos, const float *sin, const float *norm_out, float *x_out, int M, int E, int H,
                     int G, int D, int I, float eps, float scale, int threads, float *ws);

int foretell_layers_q8(const q8_layer *layers, int L, const q8_seq *seqs, int S, const float *embeddings,
                       const float *cos, const float *sin, const float *norm_out, float *x_out, int M, int E,
                       int H, int G, int D, int I, float eps, float scale, int threads) {
    const int HD = H * D, QKV = (H + 2 * G) * D;
    const size_t need = (size_t)M * (2 * E + E + QKV + 3 * HD + 3 * I) + 2 * (size_t)M;
    /* passes up to LAYERS_KEPT_FLOATS reuse one buffer per thread; longer ones (many requests' drafts) get their
     * own, freed at the end, so what stays allocated after a burst is bounded */
    float *const own = need > LAYERS_KEPT_FLOATS ? aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64) : NULL;
    float *ws = need > LAYERS_KEPT_FLOATS ? own : layers_workspace(need);
    if (!ws) return -1;
    const int rc = layers_q8(layers, L, seqs, S, embeddings, cos, sin, norm_out, x_out, M, E, H, G, D, I, eps, scale,
                             threads, ws);
    free(own);
    return rc;
}

static int layers_q8(const q8_layer *layers, int L, const q8_seq *seqs, int S, const float *embeddings,
                     const float *cos, const float *sin, const float *norm_out, float *x_out, int M, int E, int H,
                     int G, int D, int I, float eps, float scale, int threads, float *ws) {
    const int HD = H * D, QKV = (H + 2 * G) * D;
    size_t qkv_off[3], gu_off[2];
    float *h = ws, *x = h + (size_t)M * E, *delta = x + (size_t)M * E, *qkv = delta + (size_t)M * E;
    float *qr = qkv + (size_t)M * QKV, *ao = qr + (size_t)M * HD, *attn = ao + (size_t)M * HD;
    float *gu = attn + (size_t)M * HD, *act = gu + (size_t)M * 2 * I;
    int *first = (int *)(act + (size_t)M * I), *end = first + M;
    memcpy(h, embeddings, (size_t)M * E * sizeof(float));
    for (int l = 0; l < L; l++) {
        const q8_layer *ly = &layers[l];
        foretell_rmsnorm_f32(h, l ? delta : NULL, h, ly->norm1, eps, x, M, E);
        int rc = q8_calls(x, ly->qkv, ly->n_qkv, qkv, qkv_off, M, E, threads);
        if (rc) return rc;
        const float *part[3];
        int ld[3];
        for (int j = 0; j < 3; j++) {
            part[j] = qkv + qkv_off[ly->qkv_src[j]] + ly->qkv_col[j];
            ld[j] = ly->qkv[ly->qkv_src[j]].n;
        }
        int row = 0;
        for (int s = 0; s < S; s++) {
            const q8_seq *sq = &seqs[s];
            const int n = sq->rows, start = sq->start;
            const long kv_stride = sq->capacity * D;
            float *keys = sq->keys[l], *values = sq->values[l];
            rope_f32_to(part[0] + (size_t)row * ld[0], ld[0], D, cos + (size_t)row * D, sin + (size_t)row * D, qr,
                        (long)n * D, H, n, D);
            rope_f32_to(part[1] + (size_t)row * ld[1], ld[1], D, cos + (size_t)row * D, sin + (size_t)row * D,
                        keys + (size_t)start * D, kv_stride, G, n, D);
            for (int g = 0; g < G; g++)
                for (int t = 0; t < n; t++)
                    memcpy(values + g * kv_stride + (size_t)(start + t) * D, part[2] + (size_t)(row + t) * ld[2] + g * D,
                           (size_t)D * sizeof(float));
            for (int t = 0; t < n; t++) {
                end[t] = start + t + 1;
                first[t] = ly->window > 0 && end[t] > ly->window ? end[t] - ly->window : 0;
            }
            foretell_attention_f32_rows_tiled(qr, keys, values, ao, first, end, n, H, G, D, kv_stride, scale, threads,
                                              sq->tiles ? sq->tiles[l] : NULL, sq->tile_cap, sq->valid);
            for (int t = 0; t < n; t++)
                for (int hh = 0; hh < H; hh++)
                    memcpy(attn + (size_t)(row + t) * HD + hh * D, ao + ((size_t)hh * n + t) * D, (size_t)D * sizeof(float));
            row += n;
        }
        rc = foretell_linear_q8(attn, ly->o.w, ly->o.fmt, ly->o.b, delta, M, E, HD, threads);
        if (rc) return rc;
        foretell_rmsnorm_f32(h, delta, h, ly->norm2, eps, x, M, E);
        rc = q8_calls(x, ly->gu, ly->n_gu, gu, gu_off, M, E, threads);
        if (rc) return rc;
        const int ld_gate = ly->gu[ly->gu_src[0]].n, ld_up = ly->gu[ly->gu_src[1]].n;
        if (ld_gate != ld_up) return -3;
        foretell_silu_mul_f32(gu + gu_off[ly->gu_src[0]] + ly->gu_col[0], gu + gu_off[ly->gu_src[1]] + ly->gu_col[1],
                              ld_gate, act, M, I);
        rc = foretell_linear_q8(act, ly->down.w, ly->down.fmt, ly->down.b, delta, M, E, I, threads);
        if (rc) return rc;
    }
    foretell_rmsnorm_f32(h, L ? delta : NULL, h, norm_out, eps, x_out, M, E);
    return 0;
}
#endif /* FORETELL_Q8 */
