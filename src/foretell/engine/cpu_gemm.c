/* foretell's fp32 GEMM for the few rows of a decode or verify pass on a CPU (see cpu_gemm.py).
 *
 * y[m, n] = sum_k x[m, k] * w[n, k] (+ b[n]): x (M, K) and w (N, K) row-major, as torch's F.linear.
 * The weights are read once per call, 4 rows at a time, and each such block is applied to the input rows
 * 4 at a time while it sits in L1; the next weights are prefetched. Each output is one reduction over K in a
 * fixed order, whatever M: a row's result does not depend on the other rows of the call.
 * Built by cpu_gemm.py with the machine's C compiler (-O3 -march=native -fopenmp, torch's libgomp).
 */
#include <immintrin.h>
#include <stddef.h>

#if defined(__AVX512F__)
#define VW 16
typedef __m512 vec;
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
static inline float hsum(vec v) { return _mm512_reduce_add_ps(v); }
static inline vec vload_tail(const float *p, int n) { return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p); }
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
#else
#error "foretell's CPU GEMM needs AVX2 + FMA or AVX-512"
#endif

#define NB 4         /* weight rows per block */
#define MB 4         /* input rows per tile */
#define PREFETCH 512 /* floats ahead in each weight row */

/* nb weight rows x mb input rows; constant nb, mb at each call site, so the loops unroll into registers */
static inline __attribute__((always_inline)) void tile(const float *x, const float *w, float *y, const float *b,
                                                       const int nb, const int mb, int K, int N) {
    vec acc[NB][MB];
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < mb; j++) acc[i][j] = VZERO();
    int k = 0;
    for (; k + VW <= K; k += VW) {
        vec wv[NB];
        for (int i = 0; i < nb; i++) {
            wv[i] = VLOAD(w + (size_t)i * K + k);
            _mm_prefetch((const char *)(w + (size_t)i * K + k + PREFETCH), _MM_HINT_T0);
        }
        for (int j = 0; j < mb; j++) {
            vec u = VLOAD(x + (size_t)j * K + k);
            for (int i = 0; i < nb; i++) acc[i][j] = VFMA(wv[i], u, acc[i][j]);
        }
    }
    if (k < K) {
        vec wv[NB];
        for (int i = 0; i < nb; i++) wv[i] = vload_tail(w + (size_t)i * K + k, K - k);
        for (int j = 0; j < mb; j++) {
            vec u = vload_tail(x + (size_t)j * K + k, K - k);
            for (int i = 0; i < nb; i++) acc[i][j] = VFMA(wv[i], u, acc[i][j]);
        }
    }
    for (int j = 0; j < mb; j++)
        for (int i = 0; i < nb; i++) y[(size_t)j * N + i] = hsum(acc[i][j]) + (b ? b[i] : 0.0f);
}

static void rows(const float *x, const float *w, float *y, const float *b, int nb, int mb, int K, int N) {
    if (nb == NB) {
        switch (mb) {
        case 4: tile(x, w, y, b, NB, 4, K, N); return;
        case 3: tile(x, w, y, b, NB, 3, K, N); return;
        case 2: tile(x, w, y, b, NB, 2, K, N); return;
        default: tile(x, w, y, b, NB, 1, K, N); return;
        }
    }
    for (int i = 0; i < nb; i++)  /* the last few weight rows of a matrix whose N is not a multiple of NB */
        for (int j = 0; j < mb; j++)
            tile(x + (size_t)j * K, w + (size_t)i * K, y + (size_t)j * N + i, b ? b + i : 0, 1, 1, K, N);
}

void foretell_linear(const float *x, const float *w, const float *b, float *y, int M, int N, int K, int threads) {
    int blocks = (N + NB - 1) / NB;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int blk = 0; blk < blocks; blk++) {
        int n0 = blk * NB, nb = N - n0 < NB ? N - n0 : NB;
        for (int m0 = 0; m0 < M; m0 += MB) {
            int mb = M - m0 < MB ? M - m0 : MB;
            rows(x + (size_t)m0 * K, w + (size_t)n0 * K, y + (size_t)m0 * N + n0, b ? b + n0 : 0, nb, mb, K, N);
        }
    }
}
