#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  long n=100000000;
  double t=now();
  __asm__ volatile(
    "vpxor %%ymm0,%%ymm0,%%ymm0\n vpcmpeqb %%ymm1,%%ymm1,%%ymm1\n"
    "mov %0,%%rcx\n"
    "1:\n"
    "vpmaddubsw %%ymm1,%%ymm0,%%ymm2\n vpmaddubsw %%ymm1,%%ymm0,%%ymm3\n vpmaddubsw %%ymm1,%%ymm0,%%ymm4\n vpmaddubsw %%ymm1,%%ymm0,%%ymm5\n"
    "vpmaddubsw %%ymm1,%%ymm0,%%ymm6\n vpmaddubsw %%ymm1,%%ymm0,%%ymm7\n vpmaddubsw %%ymm1,%%ymm0,%%ymm8\n vpmaddubsw %%ymm1,%%ymm0,%%ymm9\n"
    "dec %%rcx\n jnz 1b\n" :: "r"(n) : "rcx","xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9");
  t=now()-t; printf("maddubs: %.3f ns each\n", t/(n*8)*1e9);
  t=now();
  __asm__ volatile(
    "vpxor %%ymm0,%%ymm0,%%ymm0\n vpcmpeqb %%ymm1,%%ymm1,%%ymm1\n"
    "mov %0,%%rcx\n"
    "1:\n"
    "vpmaddwd %%ymm1,%%ymm0,%%ymm2\n vpmaddwd %%ymm1,%%ymm0,%%ymm3\n vpmaddwd %%ymm1,%%ymm0,%%ymm4\n vpmaddwd %%ymm1,%%ymm0,%%ymm5\n"
    "vpmaddwd %%ymm1,%%ymm0,%%ymm6\n vpmaddwd %%ymm1,%%ymm0,%%ymm7\n vpmaddwd %%ymm1,%%ymm0,%%ymm8\n vpmaddwd %%ymm1,%%ymm0,%%ymm9\n"
    "dec %%rcx\n jnz 1b\n" :: "r"(n) : "rcx","xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9");
  t=now()-t; printf("maddwd: %.3f ns each\n", t/(n*8)*1e9);
  t=now();
  __asm__ volatile(
    "vpxor %%ymm0,%%ymm0,%%ymm0\n vpcmpeqb %%ymm1,%%ymm1,%%ymm1\n"
    "mov %0,%%rcx\n"
    "1:\n"
    "vpaddw %%ymm1,%%ymm0,%%ymm2\n vpaddw %%ymm1,%%ymm0,%%ymm3\n vpaddw %%ymm1,%%ymm0,%%ymm4\n vpaddw %%ymm1,%%ymm0,%%ymm5\n"
    "vpaddw %%ymm1,%%ymm0,%%ymm6\n vpaddw %%ymm1,%%ymm0,%%ymm7\n vpaddw %%ymm1,%%ymm0,%%ymm8\n vpaddw %%ymm1,%%ymm0,%%ymm9\n"
    "dec %%rcx\n jnz 1b\n" :: "r"(n) : "rcx","xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9");
  t=now()-t; printf("paddw: %.3f ns each\n", t/(n*8)*1e9);
  t=now();
  __asm__ volatile(
    "vxorps %%ymm0,%%ymm0,%%ymm0\n vxorps %%ymm1,%%ymm1,%%ymm1\n"
    "mov %0,%%rcx\n"
    "1:\n"
    "vfmadd231ps %%ymm1,%%ymm0,%%ymm2\n vfmadd231ps %%ymm1,%%ymm0,%%ymm3\n vfmadd231ps %%ymm1,%%ymm0,%%ymm4\n vfmadd231ps %%ymm1,%%ymm0,%%ymm5\n"
    "vfmadd231ps %%ymm1,%%ymm0,%%ymm6\n vfmadd231ps %%ymm1,%%ymm0,%%ymm7\n vfmadd231ps %%ymm1,%%ymm0,%%ymm8\n vfmadd231ps %%ymm1,%%ymm0,%%ymm9\n"
    "dec %%rcx\n jnz 1b\n" :: "r"(n) : "rcx","xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9");
  t=now()-t; printf("fma (8 chains): %.3f ns each\n", t/(n*8)*1e9);
}
