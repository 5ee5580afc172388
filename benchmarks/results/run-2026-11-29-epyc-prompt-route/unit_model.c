// microbench: Q4_K-like unit (8 maddubs on 8 weight regs x 8 input loads) + epilogue variants
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#ifndef VAR
#define VAR 0
#endif
int main(int argc,char**argv){
  int M=atoi(argv[1]), G=19, R=896;
  int8_t *x=aligned_alloc(64,(size_t)M*G*256); for(size_t i=0;i<(size_t)M*G*256;i++)x[i]=(i*37)%255-127;
  float *dx=aligned_alloc(64,(size_t)M*G*32), *xs=aligned_alloc(64,(size_t)M*G*32);
  for(size_t i=0;i<(size_t)M*G*8;i++){dx[i]=0.01f*(i%7);xs[i]=0.5f*(i%5);}
  uint8_t *w=aligned_alloc(64,(size_t)R*G*256); for(size_t i=0;i<(size_t)R*G*256;i++)w[i]=i%16;
  __m256 *acc=aligned_alloc(32,M*32); float out=0;
  const __m256i ones=_mm256_set1_epi16(1);
  double t=now();
  for(int r=0;r<R;r++){
    for(int m=0;m<M;m++)acc[m]=_mm256_setzero_ps();
    __m256i isum[64];
    for(int g=0;g<G;g++){
      __m256i vt[8]; for(int j=0;j<8;j++)vt[j]=_mm256_load_si256((const __m256i*)(w+((size_t)r*G+g)*256+32*j));
      __m256 ws=_mm256_set1_ps(0.1f+g), mn=_mm256_set1_ps(0.2f*r);
#if VAR==2 || VAR==3
      for(int m=0;m<M;m+=2){
        const int8_t *q0=x+((size_t)m*G+g)*256, *q1=x+((size_t)(m+1)*G+g)*256;
        size_t i0=((size_t)m*G+g)*8, i1=((size_t)(m+1)*G+g)*8;
        __m256i a0=_mm256_maddubs_epi16(vt[0],_mm256_load_si256((const __m256i*)q0));
        __m256i a1=_mm256_maddubs_epi16(vt[0],_mm256_load_si256((const __m256i*)q1));
        __m256i b0=_mm256_maddubs_epi16(vt[1],_mm256_load_si256((const __m256i*)(q0+32)));
        __m256i b1=_mm256_maddubs_epi16(vt[1],_mm256_load_si256((const __m256i*)(q1+32)));
        for(int j=2;j<8;j+=2){
          a0=_mm256_add_epi16(a0,_mm256_maddubs_epi16(vt[j],_mm256_load_si256((const __m256i*)(q0+32*j))));
          a1=_mm256_add_epi16(a1,_mm256_maddubs_epi16(vt[j],_mm256_load_si256((const __m256i*)(q1+32*j))));
          b0=_mm256_add_epi16(b0,_mm256_maddubs_epi16(vt[j+1],_mm256_load_si256((const __m256i*)(q0+32*j+32))));
          b1=_mm256_add_epi16(b1,_mm256_maddubs_epi16(vt[j+1],_mm256_load_si256((const __m256i*)(q1+32*j+32))));
        }
        __m256i s0=_mm256_madd_epi16(_mm256_add_epi16(a0,b0),ones), s1=_mm256_madd_epi16(_mm256_add_epi16(a1,b1),ones);
#if VAR==2
        __m256 A0=acc[m], A1=acc[m+1];
        A0=_mm256_fmadd_ps(_mm256_cvtepi32_ps(s0),_mm256_mul_ps(ws,_mm256_loadu_ps(dx+i0)),A0);
        A1=_mm256_fmadd_ps(_mm256_cvtepi32_ps(s1),_mm256_mul_ps(ws,_mm256_loadu_ps(dx+i1)),A1);
        A0=_mm256_fmadd_ps(mn,_mm256_loadu_ps(xs+i0),A0);
        A1=_mm256_fmadd_ps(mn,_mm256_loadu_ps(xs+i1),A1);
        acc[m]=A0; acc[m+1]=A1;
#else
        if(g==0){isum[m]=s0;isum[m+1]=s1;} else {isum[m]=_mm256_add_epi32(isum[m],s0);isum[m+1]=_mm256_add_epi32(isum[m+1],s1);}
#endif
      }
#else
      for(int m=0;m<M;m++){
        const int8_t *q=x+((size_t)m*G+g)*256; size_t i=((size_t)m*G+g)*8;
        __m256i p[8];
        for(int j=0;j<8;j++)p[j]=_mm256_maddubs_epi16(vt[j],_mm256_load_si256((const __m256i*)(q+32*j)));
        __m256i a=_mm256_add_epi16(_mm256_add_epi16(p[0],p[1]),_mm256_add_epi16(p[2],p[3]));
        __m256i b=_mm256_add_epi16(_mm256_add_epi16(p[4],p[5]),_mm256_add_epi16(p[6],p[7]));
        __m256i s=_mm256_madd_epi16(_mm256_add_epi16(a,b),ones);
#if VAR==0
        __m256 A=acc[m];
        A=_mm256_fmadd_ps(_mm256_cvtepi32_ps(s),_mm256_mul_ps(ws,_mm256_loadu_ps(dx+i)),A);
        A=_mm256_fmadd_ps(mn,_mm256_loadu_ps(xs+i),A);
        acc[m]=A;
#elif VAR==1
        if(g==0) isum[m]=s; else isum[m]=_mm256_add_epi32(isum[m],s);
#endif
      }
#endif
    }
#if VAR==1 || VAR==3
    for(int m=0;m<M;m++)acc[m]=_mm256_cvtepi32_ps(isum[m]);
#endif
    for(int m=0;m<M;m++)out+=acc[m][0];
  }
  t=now()-t;
  printf("VAR %d M %d: %.2f ms, %.2f ns/unit (%g)\n",VAR,M,t*1e3,t/((double)R*G*M)*1e9,out);
}
