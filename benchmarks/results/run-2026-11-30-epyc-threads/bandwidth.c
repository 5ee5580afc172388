// Streaming read bandwidth: one pass over SIZE MB with T threads (6 repeats).  gcc -O3 -march=native -fopenmp
// bandwidth.c -o bandwidth && ./bandwidth 400 2
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){ size_t n=(size_t)atol(argv[1])<<20; int T=atoi(argv[2]);
 char*a=aligned_alloc(64,n); for(size_t i=0;i<n;i++)a[i]=i;
 for(int rep=0;rep<6;rep++){ double t0=now(); __m256i tot=_mm256_setzero_si256();
 #pragma omp parallel num_threads(T)
 { __m256i s=_mm256_setzero_si256();
   #pragma omp for schedule(static)
   for(size_t i=0;i<n;i+=128){ s=_mm256_add_epi8(s,_mm256_load_si256((__m256i*)(a+i))); s=_mm256_add_epi8(s,_mm256_load_si256((__m256i*)(a+i+32))); s=_mm256_add_epi8(s,_mm256_load_si256((__m256i*)(a+i+64)));s=_mm256_add_epi8(s,_mm256_load_si256((__m256i*)(a+i+96)));}
   #pragma omp critical
   tot=_mm256_add_epi8(tot,s); }
 double d=now()-t0; printf("T=%d %zu MB: %.1f GB/s (%d)\n",T,n>>20,n/d/1e9,_mm256_extract_epi8(tot,3)); }
}
