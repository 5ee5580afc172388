#include <immintrin.h>
#include <stdio.h>
#include <omp.h>
int main(){
  long iters = 200000000;
  for (int threads = 1; threads <= 2; threads++) {
    double t0 = omp_get_wtime();
    float sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+:sink)
    {
      __m512 a[12]; __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-8f);
      for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
      for (long it = 0; it < iters; it++) {
        #pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
      }
      for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_ps(a[i]);
    }
    double t = omp_get_wtime() - t0;
    printf("fp32 threads %d: %.1f G FMA-inst/s total (%.1f GMAC/s) sink %g\n", threads, threads*iters*12/t/1e9, threads*iters*12*16/t/1e9, sink);
  }
  for (int threads = 1; threads <= 2; threads++) {
    double t0 = omp_get_wtime();
    int sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+:sink)
    {
      __m512i a[12]; __m512i b = _mm512_set1_epi8(1), c = _mm512_set1_epi8(2);
      for (int i = 0; i < 12; i++) a[i] = _mm512_set1_epi32(i);
      for (long it = 0; it < iters; it++) {
        #pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_dpbusd_epi32(a[i], b, c);
      }
      for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_epi32(a[i]);
    }
    double t = omp_get_wtime() - t0;
    printf("vnni threads %d: %.1f G inst/s total (%.1f GMAC/s) sink %d\n", threads, threads*iters*12/t/1e9, threads*iters*12*64/t/1e9, sink);
  }
}
