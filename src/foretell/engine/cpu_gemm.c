/* foretell's fp32 GEMM for the few rows of a decode or verify pass on a CPU (see cpu_gemm.py).
 *
 * y[m, n] = sum_k x[m, k] * w[n, k] (+ b[n]): x (M, K) and w (N, K) row-major, as torch's F.linear.
 * The weights are read once per call, 4 rows at a time, and each such block is applied to the input rows
 * 4 at a time while it sits in L1; the next weights are prefetched. Each output is one reduction over K in a
 * fixed order, whatever M: a row's result does not depend on the other rows of the call.
 * foretell_linear_bf16 reads weights stored as bf16 (half the bytes of a memory-bound pass) and widens them
 * exactly to fp32 in registers (a bf16 is the top half of an fp32): same arithmetic, same bits as
 * foretell_linear on the widened weights. With more input rows than one tile, each block of 4 weight rows is
 * widened once into a per-thread buffer that fits L1, and the fp32 tiles read it from there (with longer rows
 * the tiles widen as they read: an L2-sized buffer was slower).
 * foretell_linear_bf16dot (only where the compiler targets AVX512-BF16) takes bf16 inputs and bf16 weights and
 * multiplies them with VDPBF16PS: 32 products a vector per instruction, accumulated in fp32, twice the work of
 * an fp32 FMA, for bf16 models on CPUs that compute bf16 natively. Its rows are independent too (one fixed
 * sequence of instructions per output, whatever M), but its sums round differently from the fp32 kernels'.
 * Built by cpu_gemm.py with the machine's C compiler (-O3 -march=native -fopenmp, torch's libgomp).
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>

typedef unsigned short bf16; /* the top 16 bits of an fp32 */

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

#define NB 4         /* weight rows per block */
#define MB 4         /* input rows per tile */
#define PREFETCH_BYTES 2048 /* ahead in each weight row */
#define WIDE_MAX 32768      /* bytes of widened weights kept per thread */

/* nb weight rows x mb input rows; constant nb, mb at each call site, so the loops unroll into registers.
 * XT / WT are the inputs' / weights' types, WV the register type of a weight (and input) vector, STEP the values
 * one holds; WLOAD / XLOAD (and _TAIL: the first n, zeros after) read one, MADD(acc, w, x) accumulates their
 * products into fp32 lanes. */
#define DEFINE_TILE(NAME, XT, WT, WV, STEP, WLOAD, WLOAD_TAIL, XLOAD, XLOAD_TAIL, MADD, PF)                   \
static inline __attribute__((always_inline)) void NAME(const XT *x, const WT *w, float *y, const float *b,    \
                                                       const int nb, const int mb, int K, int N) {            \
    vec acc[NB][MB];                                                                                          \
    for (int i = 0; i < nb; i++)                                                                              \
        for (int j = 0; j < mb; j++) acc[i][j] = VZERO();                                                     \
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
    for (int j = 0; j < mb; j++)                                                                              \
        for (int i = 0; i < nb; i++) y[(size_t)j * N + i] = hsum(acc[i][j]) + (b ? b[i] : 0.0f);              \
}                                                                                                             \
                                                                                                              \
static void NAME##_rows(const XT *x, const WT *w, float *y, const float *b, int nb, int mb, int K, int N) {   \
    if (nb == NB) {                                                                                           \
        switch (mb) {                                                                                         \
        case 4: NAME(x, w, y, b, NB, 4, K, N); return;                                                        \
        case 3: NAME(x, w, y, b, NB, 3, K, N); return;                                                        \
        case 2: NAME(x, w, y, b, NB, 2, K, N); return;                                                        \
        default: NAME(x, w, y, b, NB, 1, K, N); return;                                                       \
        }                                                                                                     \
    }                                                                                                         \
    for (int i = 0; i < nb; i++) /* the last weight rows of a matrix whose N is not a multiple of NB */      \
        for (int j = 0; j < mb; j++)                                                                          \
            NAME(x + (size_t)j * K, w + (size_t)i * K, y + (size_t)j * N + i, b ? b + i : 0, 1, 1, K, N);      \
}

/* y = x w^T (+ b) over every block of NB weight rows (one thread each) and tile of MB input rows */
#define DEFINE_LINEAR(NAME, XT, WT, TILE)                                                                     \
void NAME(const XT *x, const WT *w, const float *b, float *y, int M, int N, int K, int threads) {            \
    int blocks = (N + NB - 1) / NB;                                                                           \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                                         \
    for (int blk = 0; blk < blocks; blk++) {                                                                  \
        int n0 = blk * NB, nb = N - n0 < NB ? N - n0 : NB;                                                    \
        for (int m0 = 0; m0 < M; m0 += MB) {                                                                  \
            int mb = M - m0 < MB ? M - m0 : MB;                                                               \
            TILE##_rows(x + (size_t)m0 * K, w + (size_t)n0 * K, y + (size_t)m0 * N + n0, b ? b + n0 : 0, nb,  \
                        mb, K, N);                                                                            \
        }                                                                                                     \
    }                                                                                                         \
}

#define FMA_INTO(acc, w, x) VFMA(w, x, acc)
DEFINE_TILE(tile_f32, float, float, vec, VW, VLOAD, vload_tail, VLOAD, vload_tail, FMA_INTO, 1)
DEFINE_TILE(tile_bf16, float, bf16, vec, VW, bload, bload_tail, VLOAD, vload_tail, FMA_INTO, 1)
DEFINE_TILE(tile_hot, float, float, vec, VW, VLOAD, vload_tail, VLOAD, vload_tail, FMA_INTO, 0) /* weights in cache (a widened block) */

DEFINE_LINEAR(foretell_linear, float, float, tile_f32)

/* the same product with bf16 weights; bit for bit foretell_linear on the weights widened to fp32 */
void foretell_linear_bf16(const float *x, const bf16 *w, const float *b, float *y, int M, int N, int K, int threads) {
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
            for (int m0 = 0; m0 < M; m0 += MB) {
                int mb = M - m0 < MB ? M - m0 : MB;
                const float *xm = x + (size_t)m0 * K;
                float *ym = y + (size_t)m0 * N + n0;
                if (wide)
                    tile_hot_rows(xm, wide, ym, b ? b + n0 : 0, nb, mb, K, N);
                else
                    tile_bf16_rows(xm, wb, ym, b ? b + n0 : 0, nb, mb, K, N);
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
DEFINE_TILE(tile_dot, bf16, bf16, __m512bh, 32, bhload, bhload_tail, bhload, bhload_tail, DOT_INTO, 1)
DEFINE_LINEAR(foretell_linear_bf16dot, bf16, bf16, tile_dot)
#endif
