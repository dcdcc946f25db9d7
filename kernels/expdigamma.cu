// exp(digamma(x)), element-wise (bidlab.kern.expdigamma): the variational LDA update's hot
// spot, fused so that digamma's result never travels through memory.
//
// digamma(x): for x <= 0 the reflection psi(x) = psi(1 - x) - pi / tan(pi x) (poles at
// 0, -1, -2, ... give -inf at 0 as scipy does, NaN at the negative integers); then the
// recurrence psi(x) = psi(x + 1) - 1 / x up to x >= 6 and the asymptotic series
// ln x - 1/(2x) - sum B_2n / (2n x^2n). Computed in double, so float32 results are exact
// to rounding and float64 ones to ~1e-14 relative (scipy.special.digamma is the oracle).
// NaN propagates.

#ifndef BIDLAB_EXPDIGAMMA_CU
#define BIDLAB_EXPDIGAMMA_CU

namespace bidlab_special {

// NVRTC compiles without the host's math.h: no INFINITY, NAN or M_PI, so the constants
// are spelled out here (their IEEE-754 bit patterns, and pi to double precision).
constexpr double kPi = 3.141592653589793238462643383279502884;
__device__ __forceinline__ double neg_inf() { return __longlong_as_double(0xfff0000000000000LL); }
__device__ __forceinline__ double quiet_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

__device__ __forceinline__ double digamma_pos(double x) {
  double acc = 0.0;
  while (x < 6.0) {
    acc -= 1.0 / x;
    x += 1.0;
  }
  const double r = 1.0 / x, r2 = r * r;
  const double series =
      r2 * (1.0 / 12 - r2 * (1.0 / 120 - r2 * (1.0 / 252 - r2 * (1.0 / 240 - r2 * (1.0 / 132)))));
  return acc + log(x) - 0.5 * r - series;
}

__device__ __forceinline__ double digamma(double x) {
  if (isnan(x)) return x;
  if (x <= 0.0) {
    if (x == floor(x)) return x == 0.0 ? neg_inf() : quiet_nan();
    return digamma_pos(1.0 - x) - kPi * cospi(x) / sinpi(x);
  }
  if (isinf(x)) return x;
  return digamma_pos(x);
}

}  // namespace bidlab_special

template <typename T>
__global__ void bidlab_expdigamma(const T* __restrict__ x, T* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = (T)exp(bidlab_special::digamma((double)x[i]));
}

#ifdef BIDLAB_NVCC_CHECK
template __global__ void bidlab_expdigamma<float>(const float*, float*, long long);
template __global__ void bidlab_expdigamma<double>(const double*, double*, long long);
#endif

#endif  // BIDLAB_EXPDIGAMMA_CU
