// x-stationary loop order: per block of R weight rows and group g, each input row's 8 vectors in registers,
// the R rows' decoded groups read from L1 (Q4_K-like unit: 8 maddubs, int16 sums, madd, float epilogue)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#ifndef R
#define R 8
#endif
int main(int argc,char**argv){
  int M=atoi(argv[1]), G=19, N=896;
  int8_t *x=aligned_alloc(64,(size_t)M*G*256); for(size_t i=0;i<(size_t)M*G*256;i++)x[i]=(i*37)%255-127;
  float *dx=aligned_alloc(64,(size_t)M*G*32), *xs=aligned_alloc(64,(size_t)M*G*32);
  for(size_t i=0;i<(size_t)M*G*8;i++){dx[i]=0.01f*(i%7);xs[i]=0.5f*(i%5);}
  uint8_t *w=aligned_alloc(64,(size_t)N*G*256); for(size_t i=0;i<(size_t)N*G*256;i++)w[i]=i%16;
  __m256 *acc=aligned_alloc(32,(size_t)R*M*32); float out=0;
  const __m256i ones=_mm256_set1_epi16(1);
  double t=now();
  for(int r0=0;r0<N;r0+=R){
    for(int i=0;i<R*M;i++)acc[i]=_mm256_setzero_ps();
    for(int g=0;g<G;g++){
      __m256i wb[R][8] __attribute__((aligned(32)));  /* the block's decoded group (L1) */
      __m256 ws[R], mn[R];
      for(int r=0;r<R;r++){ for(int j=0;j<8;j++) wb[r][j]=_mm256_load_si256((const __m256i*)(w+((size_t)(r0+r)*G+g)*256+32*j)); ws[r]=_mm256_set1_ps(0.1f+g); mn[r]=_mm256_set1_ps(0.2f*r); }
      for(int m=0;m<M;m++){
        const int8_t *q=x+((size_t)m*G+g)*256; size_t i=((size_t)m*G+g)*8;
        __m256i xv[8]; for(int j=0;j<8;j++) xv[j]=_mm256_load_si256((const __m256i*)(q+32*j));
        const __m256 d=_mm256_loadu_ps(dx+i), xsum=_mm256_loadu_ps(xs+i);
        for(int r=0;r<R;r++){
          __m256i a=_mm256_maddubs_epi16(wb[r][0],xv[0]);
          for(int j=1;j<8;j++) a=_mm256_add_epi16(a,_mm256_maddubs_epi16(wb[r][j],xv[j]));
          __m256i s=_mm256_madd_epi16(a,ones);
          __m256 A=acc[r*M+m];
          A=_mm256_fmadd_ps(_mm256_cvtepi32_ps(s),_mm256_mul_ps(ws[r],d),A);
          A=_mm256_fmadd_ps(mn[r],xsum,A);
          acc[r*M+m]=A;
        }
      }
    }
    for(int i=0;i<R*M;i++)out+=acc[i][0];
  }
  t=now()-t;
  printf("R %d M %d: %.2f ms, %.2f ns/unit (%g)\n",R,M,t*1e3,t/((double)N*G*M)*1e9,out);
}
