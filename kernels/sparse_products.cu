// Sparse products of bidlab.kern on the GPU: SDDMM, gather (CSR rows pull dense rows) and
// scatter (CSR rows push dense rows), plus CSR row and column sums.
//
// Every dense operand is addressed as a "row view" R[r, c] = R[r * rs + c * cs] whose
// rows hold the k-vectors the products work on; bidlab.kern.cuda maps each product onto one
// of the three kernels:
//     sddmm(A, B, S)          out[p] = A[:, i] . B[:, j]            (rows of A.T and B.T)
//     sparse_dense(S, B)      gather   out[i, :] = sum_p S[i, j] B[j, :]
//     dense_sparse_t(A, S)    gather   on A.T, out.T
//     sparse_t_dense(S, B)    scatter  out[j, :] += S[i, j] B[i, :]
//     dense_sparse(A, S)      scatter  on A.T, out.T
// With cs == 1 (bidlab's layouts: F-ordered k x m matrices, C-ordered m x k ones) a warp's
// 32 lanes read 32 consecutive values of a k-vector: coalesced, one pass over the data,
// which is what the HBM roofline assumes.
//
// One warp per CSR row. SDDMM reduces each dot product with shuffles; gather keeps the
// output row in registers (no atomics); scatter uses atomicAdd on the output, which the
// caller zeroes first.

#ifndef BIDLAB_SPARSE_PRODUCTS_CU
#define BIDLAB_SPARSE_PRODUCTS_CU

namespace bidlab_sparse {

constexpr int WARP = 32;

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int off = WARP / 2; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

}  // namespace bidlab_sparse

// out[p] = sum_c A[i, c] * B[j, c] for the p-th stored entry (i, j) of the CSR pattern.
// G lanes (a power of two up to WARP) share one entry: a warp works on WARP / G entries of
// its row at once, each lane summing k / G products, and each group's partial sums meet in
// log2(G) shuffles. With G = WARP every entry costs a whole warp's five shuffles for a few
// multiply-adds each (k = 64: two), which bounds the kernel well below the memory system.
template <typename T, typename I, int G>
__global__ void bidlab_sddmm(const I* __restrict__ indptr, const I* __restrict__ indices,
                             long long m, int k, const T* __restrict__ A, long long a_rs,
                             long long a_cs, const T* __restrict__ B, long long b_rs,
                             long long b_cs, T* __restrict__ out) {
  using namespace bidlab_sparse;
  static_assert(G > 0 && G <= WARP && (G & (G - 1)) == 0, "G: a power of two up to 32");
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / WARP;
  const int lane = threadIdx.x % WARP;
  if (warp >= m) return;  // whole warps leave together: the shuffles below see all lanes
  const int group = lane / G, glane = lane % G;
  const T* a = A + warp * a_rs;
  const I lo = indptr[warp], hi = indptr[warp + 1];
  for (I base = lo; base < hi; base += WARP / G) {
    const I p = base + group;
    T s = 0;
    if (p < hi) {
      const T* b = B + (long long)indices[p] * b_rs;
      for (int c = glane; c < k; c += G) s += a[c * a_cs] * b[c * b_cs];
    }
    for (int off = G / 2; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off, G);
    if (glane == 0 && p < hi) out[p] = s;
  }
}

// out[i, :] = sum_{p in row i} data[p] * G[indices[p], :]
template <typename T, typename I>
__global__ void bidlab_gather(const I* __restrict__ indptr, const I* __restrict__ indices,
                              const T* __restrict__ data, long long m, int k,
                              const T* __restrict__ G, long long g_rs, long long g_cs,
                              T* __restrict__ out, long long o_rs, long long o_cs) {
  using namespace bidlab_sparse;
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / WARP;
  const int lane = threadIdx.x % WARP;
  if (warp >= m) return;
  const I lo = indptr[warp], hi = indptr[warp + 1];
  for (int c0 = 0; c0 < k; c0 += WARP) {
    const int c = c0 + lane;
    T s = 0;
    if (c < k) {
      for (I p = lo; p < hi; ++p) s += data[p] * G[(long long)indices[p] * g_rs + c * g_cs];
      out[warp * o_rs + c * o_cs] = s;
    }
  }
}

// out[indices[p], :] += data[p] * G[i, :] for p in row i; out must be zeroed first.
template <typename T, typename I>
__global__ void bidlab_scatter(const I* __restrict__ indptr, const I* __restrict__ indices,
                               const T* __restrict__ data, long long m, int k,
                               const T* __restrict__ G, long long g_rs, long long g_cs,
                               T* __restrict__ out, long long o_rs, long long o_cs) {
  using namespace bidlab_sparse;
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / WARP;
  const int lane = threadIdx.x % WARP;
  if (warp >= m) return;
  const I lo = indptr[warp], hi = indptr[warp + 1];
  for (int c = lane; c < k; c += WARP) {
    const T g = G[warp * g_rs + c * g_cs];
    for (I p = lo; p < hi; ++p) atomicAdd(out + (long long)indices[p] * o_rs + c * o_cs, data[p] * g);
  }
}

// out[i] = sum of row i's stored values (one warp per row).
template <typename T, typename O, typename I>
__global__ void bidlab_csr_row_sums(const I* __restrict__ indptr, const T* __restrict__ data,
                                    long long m, O* __restrict__ out) {
  using namespace bidlab_sparse;
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / WARP;
  const int lane = threadIdx.x % WARP;
  if (warp >= m) return;
  O s = 0;
  for (I p = indptr[warp] + lane; p < indptr[warp + 1]; p += WARP) s += (O)data[p];
  s = warp_sum(s);
  if (lane == 0) out[warp] = s;
}

// out[j] += value of each stored (i, j); out must be zeroed first.
template <typename T, typename O, typename I>
__global__ void bidlab_csr_col_sums(const I* __restrict__ indices, const T* __restrict__ data,
                                    long long nnz, O* __restrict__ out) {
  const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (p < nnz) atomicAdd(out + indices[p], (O)data[p]);
}

#ifdef BIDLAB_NVCC_CHECK
// Explicit instantiations so that `nvcc -ptx -DBIDLAB_NVCC_CHECK` compiles every body (the
// tests do this on every run, GPU or not); CuPy instantiates through name_expressions.
#define BIDLAB_SDDMM(T, I, G)                                                                 \
  template __global__ void bidlab_sddmm<T, I, G>(const I*, const I*, long long, int, const T*, \
                                                 long long, long long, const T*, long long,   \
                                                 long long, T*);
#define BIDLAB_INSTANTIATE(T, I)                                                              \
  BIDLAB_SDDMM(T, I, 4)                                                                       \
  BIDLAB_SDDMM(T, I, 8)                                                                       \
  BIDLAB_SDDMM(T, I, 16)                                                                      \
  BIDLAB_SDDMM(T, I, 32)                                                                      \
  template __global__ void bidlab_gather<T, I>(const I*, const I*, const T*, long long, int,   \
                                               const T*, long long, long long, T*, long long,  \
                                               long long);                                    \
  template __global__ void bidlab_scatter<T, I>(const I*, const I*, const T*, long long, int,  \
                                                const T*, long long, long long, T*, long long, \
                                                long long);                                   \
  template __global__ void bidlab_csr_row_sums<T, T, I>(const I*, const T*, long long, T*);   \
  template __global__ void bidlab_csr_col_sums<T, T, I>(const I*, const T*, long long, T*);
BIDLAB_INSTANTIATE(float, int)
BIDLAB_INSTANTIATE(float, long long)
BIDLAB_INSTANTIATE(double, int)
BIDLAB_INSTANTIATE(double, long long)
#undef BIDLAB_INSTANTIATE
#undef BIDLAB_SDDMM
#endif

#endif  // BIDLAB_SPARSE_PRODUCTS_CU
