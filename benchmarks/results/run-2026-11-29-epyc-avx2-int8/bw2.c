/* read bandwidth with AVX2 loads: gcc -O2 -mavx2 -fopenmp bw2.c -o bw2 && ./bw2 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
int main(){
  size_t n = (size_t)512<<20; // 512 MB
  char *buf = aligned_alloc(64, n);
  for (size_t i=0;i<n;i++) buf[i]=(char)i;
  for (int threads=1; threads<=2; threads++) for (int rep=0; rep<3; rep++){
    double t0=omp_get_wtime(); long sink=0;
    #pragma omp parallel for num_threads(threads) reduction(+:sink)
    for (size_t i=0;i<n;i+=128){
      __m256i a=_mm256_load_si256((__m256i*)(buf+i)), b=_mm256_load_si256((__m256i*)(buf+i+32)), c=_mm256_load_si256((__m256i*)(buf+i+64)), d=_mm256_load_si256((__m256i*)(buf+i+96));
      a=_mm256_add_epi32(_mm256_add_epi32(a,b),_mm256_add_epi32(c,d));
      sink += _mm256_extract_epi32(a, 0) + _mm256_extract_epi32(a, 7);
    }
    double t=omp_get_wtime()-t0;
    printf("threads %d: %.1f GB/s (%ld)\n", threads, n/t/1e9, sink&1);
  }
}
