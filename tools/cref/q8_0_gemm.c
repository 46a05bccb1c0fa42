// A yardstick, not part of the engine: a C matrix-matrix product over Q8_0
// blocks done the way the C/C++ engines' AVX2 path does it (per weight block
// and activation block: sign, sign, maddubs, madd, convert, fma into a float
// accumulator, over RM x RN register tiles), to compare with
// BenchmarkMatMul64/Q8_0/threads=1 on the same machine. It keeps the block
// scales as float32 (the real format has float16), which only flatters it.
//
//   gcc -O3 -march=native -o /tmp/q8_0_gemm tools/cref/q8_0_gemm.c && /tmp/q8_0_gemm
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef struct { float d; int8_t qs[32]; } blk; // scale kept as float: no f16 lookup cost
static inline __m256 pairdot(__m256i u, __m256i s) {
  __m256i ax = _mm256_sign_epi8(u, u);
  __m256i sy = _mm256_sign_epi8(s, u);
  __m256i dot = _mm256_maddubs_epi16(ax, sy);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, _mm256_set1_epi16(1)));
}
static inline float hsum(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}
#define RM 4
#define RN 3
static void gemm(const blk *A, const blk *B, float *C, int m, int n, int nb) {
  for (int ii = 0; ii + RM <= m; ii += RM)
    for (int jj = 0; jj + RN <= n; jj += RN) {
      __m256 acc[RN][RM] = {0};
      for (int l = 0; l < nb; l++)
        for (int j = 0; j < RN; j++)
          for (int i = 0; i < RM; i++) {
            const blk *a = &A[(ii + i) * nb + l], *b = &B[(jj + j) * nb + l];
            acc[j][i] = _mm256_fmadd_ps(_mm256_set1_ps(a->d * b->d),
                pairdot(_mm256_loadu_si256((const __m256i *)a->qs), _mm256_loadu_si256((const __m256i *)b->qs)), acc[j][i]);
          }
      for (int j = 0; j < RN; j++) for (int i = 0; i < RM; i++) C[(jj + j) * m + ii + i] = hsum(acc[j][i]);
    }
}
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
  int m = 1024, k = 4096, n = 63, nb = k / 32; // n divisible by RN
  blk *A = aligned_alloc(64, sizeof(blk) * m * nb), *B = aligned_alloc(64, sizeof(blk) * n * nb);
  for (long i = 0; i < (long)m * nb; i++) { A[i].d = 0.01f; for (int j = 0; j < 32; j++) A[i].qs[j] = rand() % 255 - 127; }
  for (long i = 0; i < (long)n * nb; i++) { B[i].d = 0.02f; for (int j = 0; j < 32; j++) B[i].qs[j] = rand() % 255 - 127; }
  float *C = malloc(sizeof(float) * m * n);
  gemm(A, B, C, m, n, nb);
  double best = 1e9;
  for (int r = 0; r < 10; r++) { double t = now(); gemm(A, B, C, m, n, nb); t = now() - t; if (t < best) best = t; }
  printf("RM=%d RN=%d: %.2f GMAC/s (one thread) C[0]=%g\n", RM, RN, (double)m * n * k / best / 1e9, C[0]);
  return 0;
}
