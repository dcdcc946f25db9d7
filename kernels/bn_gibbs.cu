// Blocked Gibbs sweeps of discrete Bayesian networks on the GPU (bidlab.kern.bn_gibbs_cuda).
//
// The arithmetic of the numba kernel bidlab.kern.bn_gibbs._sweep_rows, step for step, so
// a sweep draws the same states to the last bit on either device: one thread per row
// (a chain, or a replica of an observation), every block of units in order, each unit's
// conditional formed as a tabled row, as a product of table entries stepped per state, or
// (units with deterministic descendants) as the joint over its candidates; then one
// uniform from the row's counter-based stream and the inversion of the running sum.
//
// Layout (all C-ordered): X rows x n_vars (int), obs n_obs x n_vars (int, -1 = free),
// ev n_vars (int, -1 = free); the network's flat arrays as bidlab.models.bayesnet.tables
// builds them (long long indices, double tables); rb rows x n_states (double), written
// for the drawn units when record != 0; bad rows (unsigned char), set where a unit's
// conditional was all zero. scratch holds kk_max doubles per thread of the launch.
//
// Random numbers: row r, block c of a sweep keyed `key` reads the SplitMix64 stream
// key + (r * n_blocks + c) * STRIDE (bidlab.kern.random), as the numba kernel does.

#ifndef BIDLAB_BN_GIBBS_CU
#define BIDLAB_BN_GIBBS_CU

#ifndef BIDLAB_HOST_EMULATION
#define BIDLAB_BN_DEVICE __device__ __forceinline__
#else
#define BIDLAB_BN_DEVICE inline
#endif

namespace bidlab_bn {

typedef long long i64;
typedef unsigned long long u64;

constexpr u64 GOLD = 0x9E3779B97F4A7C15ULL;
constexpr u64 STRIDE = 0x9E3779B97F4A7C15ULL << 20;

BIDLAB_BN_DEVICE u64 mix64(u64 x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// one draw of the stream in state s: a double in [0, 1) (53 bits); s advances
BIDLAB_BN_DEVICE double uniform(u64 &s) {
  s += GOLD;
  return (double)(mix64(s) >> 11) * 1.1102230246251565e-16;
}

struct Net {
  const double *cpt;
  const i64 *off, *card, *par_ptr, *par_idx, *par_stride, *unit_a, *unit_b, *fac_ptr,
      *fac_idx, *fac_step_a, *fac_step_b, *det_ptr, *det_idx, *blk_ptr, *blk_units;
  const double *cond;
  const i64 *cond_ptr, *mb_ptr, *mb_idx, *mb_stride, *rb_off;
  i64 n_vars, n_blk, n_states;
};

// the configuration index of v's parents in row x
BIDLAB_BN_DEVICE i64 config(const int *x, i64 v, const Net &n) {
  i64 c = 0;
  for (i64 q = n.par_ptr[v]; q < n.par_ptr[v + 1]; ++q) c += x[n.par_idx[q]] * n.par_stride[q];
  return c;
}

BIDLAB_BN_DEVICE bool clamped(const int *ev, const int *ob, i64 v) {
  return ev[v] >= 0 || ob[v] >= 0;
}

// the free deterministic variables hanging on unit u set from their parents (each to its
// table row's first largest entry)
BIDLAB_BN_DEVICE void recompute(int *x, const int *ev, const int *ob, i64 u, const Net &n) {
  for (i64 q = n.det_ptr[u]; q < n.det_ptr[u + 1]; ++q) {
    const i64 d = n.det_idx[q];
    if (clamped(ev, ob, d)) continue;
    const i64 k = n.card[d];
    const i64 base = n.off[d] + config(x, d, n) * k;
    i64 best = 0;
    for (i64 st = 1; st < k; ++st)
      if (n.cpt[base + st] > n.cpt[base + best]) best = st;
    x[d] = (int)best;
  }
}

// unit u's unnormalised joint conditional into p (returns its total), its deterministic
// descendants recomputed for every candidate
BIDLAB_BN_DEVICE double joint(double *p, int *x, const int *ev, const int *ob, i64 u, i64 va,
                              i64 vb, i64 ka, i64 kb, const Net &n) {
  double tot = 0.0;
  for (i64 sa = 0; sa < ka; ++sa) {
    x[va] = (int)sa;
    for (i64 sb = 0; sb < kb; ++sb) {
      if (kb > 1) x[vb] = (int)sb;
      recompute(x, ev, ob, u, n);
      double pv = 1.0;
      for (i64 e = n.fac_ptr[u]; e < n.fac_ptr[u + 1]; ++e) {
        const i64 f = n.fac_idx[e];
        pv *= n.cpt[n.off[f] + config(x, f, n) * n.card[f] + x[f]];
        if (pv == 0.0) break;
      }
      p[sa * kb + sb] = pv;
      tot += pv;
    }
  }
  return tot;
}

// one sweep of row t of the list "replica t / (hi - lo) of observation lo + t % (hi - lo)"
BIDLAB_BN_DEVICE void sweep_row(i64 t, int *X, const int *obs, const int *ev, i64 n_obs,
                                i64 lo, i64 hi, const Net &n, u64 key, double *rb, int record,
                                unsigned char *bad, double *p) {
  const i64 nn = hi - lo;
  const i64 j = t / nn;
  const i64 i = lo + t - j * nn;
  const i64 r = j * n_obs + i;
  int *x = X + r * n.n_vars;
  const int *ob = obs + i * n.n_vars;
  for (i64 c = 0; c < n.n_blk; ++c) {
    u64 s = key + (u64)(r * n.n_blk + c) * STRIDE;
    for (i64 q = n.blk_ptr[c]; q < n.blk_ptr[c + 1]; ++q) {
      const i64 u = n.blk_units[q];
      const i64 va = n.unit_a[u];
      if (clamped(ev, ob, va)) {
        if (ev[va] >= 0) x[va] = ev[va];
        continue;
      }
      const i64 vb = n.unit_b[u];
      i64 kb = 1;
      if (vb >= 0 && !clamped(ev, ob, vb)) kb = n.card[vb];
      const i64 ka = n.card[va];
      const i64 kk = ka * kb;
      double tot = 0.0;
      if (n.cond_ptr[u] >= 0 && (vb < 0 || kb > 1)) {
        i64 row = 0;
        for (i64 m = n.mb_ptr[u]; m < n.mb_ptr[u + 1]; ++m) row += x[n.mb_idx[m]] * n.mb_stride[m];
        const i64 base = n.cond_ptr[u] + row * kk;
        for (i64 st = 0; st < kk; ++st) {
          p[st] = n.cond[base + st];
          tot += p[st];
        }
      } else if (n.det_ptr[u] == n.det_ptr[u + 1]) {
        for (i64 st = 0; st < kk; ++st) p[st] = 1.0;
        const i64 xa = x[va];
        const i64 xb = kb > 1 ? x[vb] : 0;
        for (i64 e = n.fac_ptr[u]; e < n.fac_ptr[u + 1]; ++e) {
          const i64 f = n.fac_idx[e];
          const i64 da = n.fac_step_a[e];
          const i64 db = kb > 1 ? n.fac_step_b[e] : 0;
          const i64 b0 = n.off[f] + config(x, f, n) * n.card[f] + x[f] - xa * da - xb * db;
          for (i64 sa = 0; sa < ka; ++sa)
            for (i64 sb = 0; sb < kb; ++sb) p[sa * kb + sb] *= n.cpt[b0 + sa * da + sb * db];
        }
        for (i64 st = 0; st < kk; ++st) tot += p[st];
      } else {
        tot = joint(p, x, ev, ob, u, va, vb, ka, kb, n);
      }
      if (!(tot > 0.0)) {
        bad[r] = 1;
        continue;
      }
      const double u01 = uniform(s) * tot;
      double acc = 0.0;
      i64 pick = kk - 1;
      for (i64 st = 0; st < kk; ++st) {
        acc += p[st];
        if (u01 < acc && p[st] > 0.0) {
          pick = st;
          break;
        }
      }
      while (p[pick] <= 0.0) --pick;  // rounding at the top end: the last positive
      x[va] = (int)(pick / kb);
      if (kb > 1) x[vb] = (int)(pick - (pick / kb) * kb);
      recompute(x, ev, ob, u, n);
      if (record) {
        const double inv = 1.0 / tot;
        for (i64 sa = 0; sa < ka; ++sa) {
          double a = 0.0;
          for (i64 sb = 0; sb < kb; ++sb) a += p[sa * kb + sb];
          rb[r * n.n_states + n.rb_off[va] + sa] = a * inv;
        }
      }
    }
  }
}

}  // namespace bidlab_bn

// rows t_lo .. t_hi of the sweep's row list, one per thread; scratch: kk_max doubles per
// thread of the launch. Built with BIDLAB_HOST_EMULATION (a C++ compiler, the tests), the
// same entry is a host function running the threads one after the other.
#ifdef BIDLAB_HOST_EMULATION
#define BIDLAB_BN_ENTRY extern "C"
#else
#define BIDLAB_BN_ENTRY extern "C" __global__
#endif
BIDLAB_BN_ENTRY void bidlab_bn_sweep(
    int *X, const int *obs, const int *ev, long long n_obs, long long lo, long long hi,
    long long t_lo, long long t_hi, const double *cpt, const long long *off,
    const long long *card, const long long *par_ptr, const long long *par_idx,
    const long long *par_stride, const long long *unit_a, const long long *unit_b,
    const long long *fac_ptr, const long long *fac_idx, const long long *fac_step_a,
    const long long *fac_step_b, const long long *det_ptr, const long long *det_idx,
    const long long *blk_ptr, const long long *blk_units, const double *cond,
    const long long *cond_ptr, const long long *mb_ptr, const long long *mb_idx,
    const long long *mb_stride, unsigned long long key, double *rb, const long long *rb_off,
    int record, unsigned char *bad, long long n_vars, long long n_blk, long long n_states,
    double *scratch, long long kk_max) {
  const bidlab_bn::Net n = {cpt, off, card, par_ptr, par_idx, par_stride, unit_a, unit_b,
                            fac_ptr, fac_idx, fac_step_a, fac_step_b, det_ptr, det_idx,
                            blk_ptr, blk_units, cond, cond_ptr, mb_ptr, mb_idx, mb_stride,
                            rb_off, n_vars, n_blk, n_states};
#ifdef BIDLAB_HOST_EMULATION
  for (long long g = 0; g < t_hi - t_lo; ++g)
#else
  const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (g < t_hi - t_lo)
#endif
    bidlab_bn::sweep_row(t_lo + g, X, obs, ev, n_obs, lo, hi, n, key, rb, record, bad,
                         scratch + g * kk_max);
}

#endif  // BIDLAB_BN_GIBBS_CU
