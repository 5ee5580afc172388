#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
int main(){
  size_t n = (size_t)512<<20; // 512 MB
  char *buf = aligned_alloc(64, n);
  for (size_t i=0;i<n;i+=4096) buf[i]=1;
  for (size_t i=0;i<n;i++) buf[i]=(char)i;
  for (int threads=1; threads<=2; threads++) for (int rep=0; rep<3; rep++){
    double t0=omp_get_wtime(); long sink=0;
    #pragma omp parallel for num_threads(threads) reduction(+:sink)
    for (size_t i=0;i<n;i+=256){
      __m512i a=_mm512_load_si512(buf+i), b=_mm512_load_si512(buf+i+64), c=_mm512_load_si512(buf+i+128), d=_mm512_load_si512(buf+i+192);
      a=_mm512_add_epi32(_mm512_add_epi32(a,b),_mm512_add_epi32(c,d));
      sink += _mm512_reduce_add_epi32(a);
    }
    double t=omp_get_wtime()-t0;
    printf("threads %d: %.1f GB/s (%ld)\n", threads, n/t/1e9, sink&1);
  }
}
