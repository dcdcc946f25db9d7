// SAME Gibbs sampling for LDA, fused with its SDDMM (bidlab.kern.lda_sampler).
//
// For each nonzero (d, w) of the CSR count matrix X (count c) and each topic j:
//     mu    = sum_j theta[d, j] * phiT[w, j]                (the SDDMM, fused)
//     lam_j = (m / T[w, j]) * c * theta[d, j] * phiT[w, j] / mu
//     z_j  ~ Poisson(lam_j)
//     theta_hat[d, j] += z_j * T[w, j] / m ;  phi_hat[w, j] += z_j * T[w, j] / m
// so E[theta_hat] = theta o ((X / mu) @ phiT) whatever the temperatures, and a hotter
// parameter (T > 1) gets fewer effective samples, hence a larger variance.
//
// Layout: theta is D x k, cnt (or phiT), T and phi_hat are V x k, all C-ordered (a row of k topics
// is contiguous). One warp per document: the warp keeps the document's row in L1, reduces
// mu with shuffles, and each lane samples topics lane, lane + 32, ... . theta_hat's row
// belongs to its warp (no atomics); phi_hat is shared by all documents (atomicAdd, only for
// the draws that are nonzero; skipped when with_phi == 0, a sweep that only refines theta).
// phi_hat must be zeroed by the caller; theta_hat is written.
//
// Random numbers: a counter-based SplitMix64 stream per (nonzero, topic) keyed by
// (seed, step), the same generator as the numba kernel, so results do not depend on the
// launch configuration. Stream (p, j) starts at mix64(key ^ p) + j * 2^20 * golden and
// steps by golden, so streams of one nonzero never overlap within 2^20 draws.

#ifndef BIDLAB_LDA_SAMPLER_CU
#define BIDLAB_LDA_SAMPLER_CU

namespace bidlab_lda {

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

struct Stream {
  unsigned long long s;
  __device__ __forceinline__ double next() {
    s += 0x9E3779B97F4A7C15ULL;
    return (double)(mix64(s) >> 11) * 1.1102230246251565e-16;  // [0, 1), 53 bits
  }
};

// exp(-lam) for 0 <= lam < 10: exp(-lam/16)^16, Taylor to degree 11 (the numba kernel's
// polynomial, coefficient for coefficient).
__device__ __forceinline__ double exp_neg(double lam) {
  const double y = lam * 0.0625;
  double r = -2.505210838544172e-08;
  r = r * y + 2.755731922398589e-07;
  r = r * y + -2.7557319223985893e-06;
  r = r * y + 2.48015873015873e-05;
  r = r * y + -0.0001984126984126984;
  r = r * y + 0.001388888888888889;
  r = r * y + -0.008333333333333333;
  r = r * y + 0.041666666666666664;
  r = r * y + -0.16666666666666666;
  r = r * y + 0.5;
  r = r * y + -1.0;
  r = r * y + 1.0;
  r = r * r;
  r = r * r;
  r = r * r;
  return r * r;
}

#define BIDLAB_LAM_INV 10.0
#define BIDLAB_MAX_TERMS 96

// Poisson(lam) from the stream's first uniform u (already drawn) and the stream:
// lam < 10: inversion, z = #{x : u > F(x)} with F built term by term (p_x = p_{x-1} lam/x;
// 1/x correctly rounded, as the numba kernel's table); lam >= 10: PTRS (Hormann 1993).
__device__ __forceinline__ int poisson(double lam, double u, Stream &st) {
  if (!(lam > 0.0) || u < 1.0 - lam) return 0;  // 1 - lam <= exp(-lam): z = 0, no exp
  if (lam < BIDLAB_LAM_INV) {
    double t = exp_neg(lam);
    double f = t;
    int z = 0;
    while (u > f && z < BIDLAB_MAX_TERMS) {
      ++z;
      t = t * (lam * __drcp_rn((double)z));
      f = f + t;
    }
    return z;
  }
  double slam = sqrt(lam), loglam = log(lam);
  double b = 0.931 + 2.53 * slam;
  double a = -0.059 + 0.02483 * b;
  double invalpha = 1.1239 + 1.1328 / (b - 3.4);
  double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (int it = 0; it < 1000; ++it) {
    double U = st.next() - 0.5;
    double V = st.next();
    double us = 0.5 - fabs(U);
    double kk = floor((2.0 * a / us + b) * U + lam + 0.43);
    if (us >= 0.07 && V <= vr) return (int)kk;
    if (kk < 0.0 || (us < 0.013 && V > us)) continue;
    if (log(V) + log(invalpha) - log(a / (us * us) + b) <= -lam + kk * loglam - lgamma(kk + 1.0))
      return (int)kk;
  }
  return (int)floor(lam + 0.5);
}

}  // namespace bidlab_lda

// use_temp == 0: all temperatures are 1 and temp is not read.
// phi[w, j] = (a * cnt[w, j] + beta) * invden[j] is formed on the fly from topic-word
// counts (a = 1, beta = 0, invden = 1 passes normalised topics through unchanged).
template <typename T, typename I>
__global__ void bidlab_same_sample(const I *__restrict__ indptr, const I *__restrict__ indices,
                                   const T *__restrict__ counts, const T *__restrict__ theta,
                                   const T *__restrict__ cnt, double a, double beta,
                                   const T *__restrict__ invden, const T *__restrict__ temp,
                                   int use_temp, T *__restrict__ theta_hat,
                                   T *__restrict__ phi_hat, int with_phi, int ndocs, int k,
                                   double nsamps, unsigned long long key) {
  using namespace bidlab_lda;
  const int lane = threadIdx.x & 31;
  const long long d = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (d >= ndocs) return;
  const T *th = theta + d * (long long)k;
  T *thh = theta_hat + d * (long long)k;
  for (int j = lane; j < k; j += 32) thh[j] = T(0);
  const double inv_m = 1.0 / nsamps;
  for (long long p = indptr[d]; p < (long long)indptr[d + 1]; ++p) {
    const long long w = indices[p];
    const T *ph = cnt + w * k;
    double part = 0.0;
    for (int j = lane; j < k; j += 32)
      part += (double)th[j] * ((a * (double)ph[j] + beta) * (double)invden[j]);
    for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (!(part > 0.0)) continue;
    const double scale = nsamps * (double)counts[p] / part;
    const unsigned long long base = key ^ mix64((unsigned long long)p * 0xD1B54A32D192ED03ULL);
    for (int j = lane; j < k; j += 32) {
      double lam = ((double)th[j] * ((a * (double)ph[j] + beta) * (double)invden[j])) * scale;
      double t = 1.0;
      if (use_temp) {
        t = (double)temp[w * k + j];
        lam /= t;
      }
      Stream st;
      st.s = base + (unsigned long long)j * 0x9B97F4A7C1500000ULL;
      const double u = st.next();
      const int z = poisson(lam, u, st);
      if (z > 0) {
        const T v = (T)(z * t * inv_m);
        thh[j] += v;
        if (with_phi) atomicAdd(phi_hat + w * k + j, v);
      }
    }
  }
}

#ifdef BIDLAB_NVCC_CHECK
#define BIDLAB_SAME_INSTANTIATE(T, I)                                                          \
  template __global__ void bidlab_same_sample<T, I>(                                         \
      const I *, const I *, const T *, const T *, const T *, double, double, const T *,         \
      const T *, int, T *, T *, int, int, int, double, unsigned long long);
BIDLAB_SAME_INSTANTIATE(float, int)
BIDLAB_SAME_INSTANTIATE(double, int)
BIDLAB_SAME_INSTANTIATE(float, long long)
BIDLAB_SAME_INSTANTIATE(double, long long)
#undef BIDLAB_SAME_INSTANTIATE
#endif

#endif  // BIDLAB_LDA_SAMPLER_CU
