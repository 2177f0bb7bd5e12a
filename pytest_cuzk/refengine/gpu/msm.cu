// BLS12-381 G1 and G2 multi-scalar multiplication for cuzk-ref's GPU prover.
//
// Fp: mont.cuh's arithmetic with twelve 32-bit limbs (R = 2^384). Fp2 = Fp[u] / (u^2 + 1),
// (c0, c1), Karatsuba products: G2's coordinates, in the order py-arkworks writes them.
// Points: affine bases (x, y: 2 field elements), sums in XYZZ coordinates (x = X/ZZ,
// y = Y/ZZZ, ZZ^3 = ZZZ^2; the identity has ZZ = 0), with the add-2008-s, madd-2008-s and
// dbl-2008-s-1 formulas of the Explicit-Formulas Database (a = 0 on both curves). The point
// code is written once over the field F; each kernel has a _g1 and a _g2 entry point.
// MSM: Pippenger with c-bit signed digits, for a batch of scalar vectors over the same bases at
// once (plan.py holds the same recoding in Python): a counting sort of (window, |digit|) puts
// each point's index in its bucket, buckets are summed in chunks, segments of buckets are
// weighted by running sums, and each window's sum leaves as an affine point (one Fermat inversion a
// window, all windows at once: on the host these inversions and conversions took a third of a
// small proof's profiled time). The windows are folded on the host (msm.py): Horner's rule over them is some
// 250 dependent doublings, 5 ms for one GPU thread and well under 1 ms for the CPU.

#define NL 12
#define NEG_FLAG 0x80000000u

__constant__ u32 FP_P[NL] = {0xffffaaabu, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu, 0xf6b0f624u, 0x6730d2a0u,
                             0xf38512bfu, 0x64774b84u, 0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};
__constant__ u32 FP_R2[NL] = {0x1c341746u, 0xf4df1f34u, 0x09d104f1u, 0x0a76e6a6u, 0x4c95b6d5u, 0x8de5476cu,
                              0x939d83c0u, 0x67eb88a9u, 0xb519952du, 0x9a793e85u, 0x92cae3aau, 0x11988fe5u};
__constant__ u32 FP_P_MINUS_2[NL] = {0xffffaaa9u, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu, 0xf6b0f624u, 0x6730d2a0u,
                                     0xf38512bfu, 0x64774b84u, 0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};
__constant__ u32 FP_ONE[NL] = {0x0002fffdu, 0x76090000u, 0xc40c0002u, 0xebf4000bu, 0x53c758bau, 0x5f489857u,
                               0x70525745u, 0x77ce5853u, 0xa256ec6du, 0x5c071a97u, 0xfa80e493u, 0x15f65ec3u};

// Fp for mont.cuh; the product's outer loop stays rolled (see mul)
struct fp_field {
    static const int N = NL, UNROLL = 1;
    static const u32 INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    __device__ static __forceinline__ u32 p(int i) { return FP_P[i]; }
    __device__ static __forceinline__ u32 r2(int i) { return FP_R2[i]; }
    __device__ static __forceinline__ u32 one(int i) { return FP_ONE[i]; }
};

typedef mont<fp_field> fp;

// ---- the two fields behind one set of names, for the point code -------------------------------

struct fp2 { fp c0, c1; };

__device__ __forceinline__ bool is_zero(const fp2& a) { return is_zero(a.c0) && is_zero(a.c1); }
__device__ __forceinline__ void set_zero(fp2& a) { set_zero(a.c0); set_zero(a.c1); }
__device__ __forceinline__ void set_one(fp2& a) { set_one(a.c0); set_zero(a.c1); }
__device__ __forceinline__ void add(fp2& r, const fp2& a, const fp2& b) {
    add(r.c0, a.c0, b.c0);
    add(r.c1, a.c1, b.c1);
}
__device__ __forceinline__ void sub(fp2& r, const fp2& a, const fp2& b) {
    sub(r.c0, a.c0, b.c0);
    sub(r.c1, a.c1, b.c1);
}
__device__ __forceinline__ void neg(fp2& r, const fp2& a) { neg(r.c0, a.c0); neg(r.c1, a.c1); }

// (a0 + a1 u)(b0 + b1 u) = a0 b0 - a1 b1 + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u; r may alias a or b
__device__ __noinline__ void mul(fp2& r, const fp2& a, const fp2& b) {
    fp t0, t1, s0, s1;
    mul(t0, a.c0, b.c0);
    mul(t1, a.c1, b.c1);
    add(s0, a.c0, a.c1);
    add(s1, b.c0, b.c1);
    mul(s0, s0, s1);
    sub(r.c0, t0, t1);
    sub(s0, s0, t0);
    sub(r.c1, s0, t1);
}

// (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u
__device__ __noinline__ void sqr(fp2& r, const fp2& a) {
    fp s, d, m;
    add(s, a.c0, a.c1);
    sub(d, a.c0, a.c1);
    mul(m, a.c0, a.c1);
    mul(r.c0, s, d);
    add(r.c1, m, m);
}

// 1 / a in Fp for non-zero a: a^(p - 2), square-and-multiply from the top bit (Fermat)
__device__ __noinline__ void inv(fp& r, const fp& a) {
    fp acc;
    set_one(acc);
    for (int i = NL - 1; i >= 0; i--) {
        u32 e = FP_P_MINUS_2[i];
        for (int bit = 31; bit >= 0; bit--) {
            sqr(acc, acc);
            if ((e >> bit) & 1u) mul(acc, acc, a);
        }
    }
    r = acc;
}

// 1 / a in Fp2 for non-zero a: conj(a) / (a0^2 + a1^2), the norm being in Fp (u^2 = -1)
__device__ __noinline__ void inv(fp2& r, const fp2& a) {
    fp n, t;
    sqr(n, a.c0);
    sqr(t, a.c1);
    add(n, n, t);
    inv(t, n);
    fp c1;
    mul(c1, a.c1, t);
    mul(r.c0, a.c0, t);
    neg(r.c1, c1);
}

__device__ __forceinline__ void load(fp2& a, const u32* src) { load(a.c0, src); load(a.c1, src + NL); }
__device__ __forceinline__ void store(u32* dst, const fp2& a) { store(dst, a.c0); store(dst + NL, a.c1); }

__device__ __forceinline__ void mont_out(fp2& a) { mont_out(a.c0); mont_out(a.c1); }

template <class F> struct limbs_of { static const int n = sizeof(F) / sizeof(u32); };

// ---- points -------------------------------------------------------------------------------------

template <class F> struct xyzz { F x, y, zz, zzz; };

template <class F> __device__ __forceinline__ void xyzz_set_inf(xyzz<F>& a) {
    set_zero(a.x);
    set_one(a.y);
    set_zero(a.zz);
    set_zero(a.zzz);
}

template <class F> __device__ __forceinline__ bool xyzz_is_inf(const xyzz<F>& a) { return is_zero(a.zz); }

// dbl-2008-s-1 for the point (x, y) over any ZZ, ZZZ: X3 and Y3, and the factors V and W that scale
// ZZ and ZZZ. x3 and y3 may alias x and y: both are read before either is written.
template <class F>
__device__ __forceinline__ void dbl_core(F& x3, F& y3, F& v, F& w, const F& x, const F& y) {
    F u, s, m, t;
    add(u, y, y);
    sqr(v, u);
    mul(w, u, v);
    mul(s, x, v);
    sqr(m, x);
    add(t, m, m);
    add(m, t, m);
    sqr(t, m);
    sub(t, t, s);
    sub(t, t, s);  // X3
    sub(s, s, t);
    mul(s, m, s);
    mul(u, w, y);
    sub(y3, s, u);
    x3 = t;
}

template <class F> __device__ __noinline__ void xyzz_dbl(xyzz<F>& a) {
    if (xyzz_is_inf(a)) return;
    F v, w;
    dbl_core(a.x, a.y, v, w, a.x, a.y);
    mul(a.zz, a.zz, v);
    mul(a.zzz, a.zzz, w);
}

// mdbl-2008-s-1: a = 2 (x, y)
template <class F> __device__ __forceinline__ void xyzz_mdbl(xyzz<F>& a, const F& x, const F& y) {
    dbl_core(a.x, a.y, a.zz, a.zzz, x, y);
}

// The end that add-2008-s and madd-2008-s share: a's X3 and Y3 from P = U2 - U1 (non-zero),
// R = S2 - S1, U1 and S1, and the factors PP and PPP that scale ZZ and ZZZ. u1 and s1 may be
// a.x and a.y: both are read before a is written.
template <class F>
__device__ __forceinline__ void add_tail(xyzz<F>& a, const F& p, const F& r, const F& u1, const F& s1, F& pp,
                                         F& ppp) {
    F q, t, s;
    sqr(pp, p);
    mul(ppp, p, pp);
    mul(q, u1, pp);
    sqr(t, r);
    sub(t, t, ppp);
    sub(t, t, q);
    sub(t, t, q);  // X3
    sub(q, q, t);
    mul(q, r, q);
    mul(s, s1, ppp);
    sub(a.y, q, s);
    a.x = t;
}

// madd-2008-s: a += (x, y), with the doubling and inverse cases handled
template <class F> __device__ __noinline__ void xyzz_madd(xyzz<F>& a, const F& x, const F& y) {
    if (xyzz_is_inf(a)) {
        a.x = x;
        a.y = y;
        set_one(a.zz);
        set_one(a.zzz);
        return;
    }
    F p, r, pp, ppp;
    mul(p, x, a.zz);
    sub(p, p, a.x);
    mul(r, y, a.zzz);
    sub(r, r, a.y);
    if (is_zero(p)) {
        if (is_zero(r)) xyzz_mdbl(a, x, y);
        else xyzz_set_inf(a);
        return;
    }
    add_tail(a, p, r, a.x, a.y, pp, ppp);
    mul(a.zz, a.zz, pp);
    mul(a.zzz, a.zzz, ppp);
}

// add-2008-s: a += b
template <class F> __device__ __noinline__ void xyzz_add(xyzz<F>& a, const xyzz<F>& b) {
    if (xyzz_is_inf(b)) return;
    if (xyzz_is_inf(a)) {
        a = b;
        return;
    }
    F u1, s1, p, r, pp, ppp;
    mul(u1, a.x, b.zz);
    mul(p, b.x, a.zz);
    sub(p, p, u1);
    mul(s1, a.y, b.zzz);
    mul(r, b.y, a.zzz);
    sub(r, r, s1);
    if (is_zero(p)) {
        if (is_zero(r)) xyzz_dbl(a);
        else xyzz_set_inf(a);
        return;
    }
    add_tail(a, p, r, u1, s1, pp, ppp);
    mul(a.zz, a.zz, b.zz);
    mul(a.zz, a.zz, pp);
    mul(a.zzz, a.zzz, b.zzz);
    mul(a.zzz, a.zzz, ppp);
}

template <class F> __device__ __forceinline__ void load_xyzz(xyzz<F>& a, const u32* src) {
    const int W = limbs_of<F>::n;
    load(a.x, src);
    load(a.y, src + W);
    load(a.zz, src + 2 * W);
    load(a.zzz, src + 3 * W);
}

template <class F> __device__ __forceinline__ void store_xyzz(u32* dst, const xyzz<F>& a) {
    const int W = limbs_of<F>::n;
    store(dst, a.x);
    store(dst + W, a.y);
    store(dst + 2 * W, a.zz);
    store(dst + 3 * W, a.zzz);
}

// ---- kernels ------------------------------------------------------------------------------------

// `count` Fp elements (a base's coordinates, canonical) into Montgomery form, in place.
extern "C" __global__ void to_montgomery(u32* v, int count) { mont_in_each<fp_field>(v, count); }

// c bits of a 256-bit scalar (8 limbs) from bit `pos`
__device__ __forceinline__ u32 scalar_bits(const u32* s, int pos, int c) {
    int limb = pos >> 5, off = pos & 31;
    if (limb >= 8) return 0;
    u32 v = s[limb] >> off;
    if (off + c > 32 && limb + 1 < 8) v |= s[limb + 1] << (32 - off);
    return v & ((1u << c) - 1u);
}

// Signed digits of scalar i of MSM k (digits[(k * windows + w) * n + i], in [-2^(c-1), 2^(c-1)])
// and the bucket counts. A batch of MSMs over the same n bases is one MSM of batch * windows
// windows: MSM k's window w is window k * windows + w, with its own buckets.
// A point whose base is the identity (valid[i] == 0) gets digits 0 and lands in no bucket.
extern "C" __global__ void signed_digits(const u32* scalars, const unsigned char* valid, int n, int c,
                                         int windows, int batch, int* digits, u32* counts) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * batch) return;
    int k = (int)(t / n), i = (int)(t % n);
    const u32* s = scalars + 8 * t;
    int half = 1 << (c - 1), buckets = half;
    u32 carry = 0;
    for (int w = 0; w < windows; w++) {
        int d = valid[i] ? (int)(scalar_bits(s, w * c, c) + carry) : 0;
        carry = d > half;
        if (carry) d -= 1 << c;
        long long vw = (long long)k * windows + w;
        digits[vw * n + i] = d;
        if (d) atomicAdd(&counts[vw * buckets + (d < 0 ? -d : d) - 1], 1u);
    }
}

// Each (window, point) with a non-zero digit writes its point index (and sign) into its bucket's slot range.
extern "C" __global__ void scatter(const int* digits, int n, int c, int windows, u32* cursor, u32* entries) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * windows) return;
    long long w = t / n;
    int i = (int)(t % n);
    int d = digits[t];
    if (!d) return;
    u32 pos = atomicAdd(&cursor[w * (1 << (c - 1)) + (d < 0 ? -d : d) - 1], 1u);
    entries[pos] = (u32)i | (d < 0 ? NEG_FLAG : 0u);
}


// Buckets are summed in chunks of at most L entries, so that a crowded bucket (witnesses full of
// 0s and 1s, a scalar's short top window) is shared by many threads: task t belongs to bucket
// task_bucket[t] and is chunk t - task0[bucket] of it. Level 1 adds affine points (negated
// where the digit was negative), later levels add the partial sums until one is left a bucket.
template <class F>
__device__ void accumulate_chunks(const u32* bases, const u32* entries, const u32* starts, const u32* counts,
                                  const u32* task_bucket, const u32* task0, int chunk, int tasks, u32* out) {
    const int W = limbs_of<F>::n;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tasks) return;
    u32 b = task_bucket[t];
    u32 lo = starts[b] + (t - task0[b]) * chunk, end = starts[b] + counts[b];
    u32 hi = lo + chunk < end ? lo + chunk : end;
    xyzz<F> acc;
    xyzz_set_inf(acc);
    for (u32 k = lo; k < hi; k++) {
        u32 e = entries[k];
        const u32* pt = bases + 2 * W * (u64)(e & ~NEG_FLAG);
        F x, y;
        load(x, pt);
        load(y, pt + W);
        if (e & NEG_FLAG) neg(y, y);
        xyzz_madd(acc, x, y);
    }
    store_xyzz(out + 4 * W * (u64)t, acc);
}

template <class F>
__device__ void sum_chunks(const u32* in, const u32* starts, const u32* counts, const u32* task_bucket,
                           const u32* task0, int chunk, int tasks, u32* out) {
    const int W = limbs_of<F>::n;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tasks) return;
    u32 b = task_bucket[t];
    u32 lo = starts[b] + (t - task0[b]) * chunk, end = starts[b] + counts[b];
    u32 hi = lo + chunk < end ? lo + chunk : end;
    xyzz<F> acc, p;
    xyzz_set_inf(acc);
    for (u32 k = lo; k < hi; k++) {
        load_xyzz(p, in + 4 * W * (u64)k);
        xyzz_add(acc, p);
    }
    store_xyzz(out + 4 * W * (u64)t, acc);
}

// bucket b = its one remaining partial sum, or the identity when it got no point
template <class F>
__device__ void gather_buckets(const u32* partial, const u32* counts, const u32* starts, int total_buckets,
                               u32* buckets) {
    const int W = limbs_of<F>::n;
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= total_buckets) return;
    xyzz<F> acc;
    if (counts[b]) load_xyzz(acc, partial + 4 * W * (u64)starts[b]);
    else xyzz_set_inf(acc);
    store_xyzz(buckets + 4 * W * (u64)b, acc);
}

// One thread per segment of `seg` buckets of a window: sum_{b in segment} (b + 1) * B_b,
// by a running sum (weights 1..seg) plus lo * (the segment's plain sum).
template <class F>
__device__ void weigh_segments(const u32* buckets, int per_window, int seg, int segments, u32* out) {
    const int W = limbs_of<F>::n;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= segments) return;
    int per_seg_window = per_window / seg;
    int w = t / per_seg_window, lo = (t % per_seg_window) * seg;
    const u32* base = buckets + 4 * W * ((u64)w * per_window + lo);
    xyzz<F> running, total, b;
    xyzz_set_inf(running);
    xyzz_set_inf(total);
    for (int k = seg - 1; k >= 0; k--) {
        load_xyzz(b, base + 4 * W * k);
        xyzz_add(running, b);
        xyzz_add(total, running);
    }
    // total += lo * running, double-and-add from the top bit of lo
    xyzz<F> acc;
    xyzz_set_inf(acc);
    for (int bit = 15; bit >= 0; bit--) {  // lo < 2^15: c is at most 16
        xyzz_dbl(acc);
        if ((lo >> bit) & 1) xyzz_add(acc, running);
    }
    xyzz_add(total, acc);
    store_xyzz(out + 4 * W * (u64)t, total);
}

// out[g] = sum of in[g * group .. g * group + group - 1]
template <class F> __device__ void sum_groups(const u32* in, int group, int groups, u32* out) {
    const int W = limbs_of<F>::n;
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    xyzz<F> acc, b;
    xyzz_set_inf(acc);
    for (int k = 0; k < group; k++) {
        load_xyzz(b, in + 4 * W * ((u64)g * group + k));
        xyzz_add(acc, b);
    }
    store_xyzz(out + 4 * W * (u64)g, acc);
}

// One thread per window: its sum S_w as the affine point (x, y) = (X / ZZ, Y / ZZZ), canonical, and
// the identity as (0, 0). One inversion: with ZZ = Z^2 and ZZZ = Z^3 for some Z (every formula here
// keeps that), 1 / Z = ZZ / ZZZ and 1 / ZZ = (1 / Z)^2.
template <class F> __device__ void window_affine(const u32* sums, int windows, u32* out) {
    const int W = limbs_of<F>::n;
    int w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= windows) return;
    xyzz<F> s;
    load_xyzz(s, sums + 4 * W * (u64)w);
    F x, y;
    if (xyzz_is_inf(s)) {
        set_zero(x);
        set_zero(y);
    } else {
        F izzz, iz;
        inv(izzz, s.zzz);
        mul(iz, s.zz, izzz);
        sqr(iz, iz);
        mul(x, s.x, iz);
        mul(y, s.y, izzz);
        mont_out(x);
        mont_out(y);
    }
    store(out + 2 * W * (u64)w, x);
    store(out + 2 * W * (u64)w + W, y);
}

// The entry points NVRTC exports: each point kernel for G1 (over Fp) and G2 (over Fp2).
#define FOR_GROUP(G, F)                                                                                     \
    extern "C" __global__ void accumulate_chunks_##G(const u32* bases, const u32* entries, const u32* starts, \
                                                     const u32* counts, const u32* task_bucket,               \
                                                     const u32* task0, int chunk, int tasks, u32* out) {      \
        accumulate_chunks<F>(bases, entries, starts, counts, task_bucket, task0, chunk, tasks, out);          \
    }                                                                                                       \
    extern "C" __global__ void sum_chunks_##G(const u32* in, const u32* starts, const u32* counts,           \
                                              const u32* task_bucket, const u32* task0, int chunk, int tasks, \
                                              u32* out) {                                                   \
        sum_chunks<F>(in, starts, counts, task_bucket, task0, chunk, tasks, out);                           \
    }                                                                                                       \
    extern "C" __global__ void gather_buckets_##G(const u32* partial, const u32* counts, const u32* starts,   \
                                                  int total_buckets, u32* buckets) {                         \
        gather_buckets<F>(partial, counts, starts, total_buckets, buckets);                                 \
    }                                                                                                       \
    extern "C" __global__ void weigh_segments_##G(const u32* buckets, int per_window, int seg, int segments,  \
                                                  u32* out) {                                               \
        weigh_segments<F>(buckets, per_window, seg, segments, out);                                         \
    }                                                                                                       \
    extern "C" __global__ void sum_groups_##G(const u32* in, int group, int groups, u32* out) {              \
        sum_groups<F>(in, group, groups, out);                                                              \
    }                                                                                                       \
    extern "C" __global__ void window_affine_##G(const u32* sums, int windows, u32* out) {                   \
        window_affine<F>(sums, windows, out);                                                               \
    }

FOR_GROUP(g1, fp)
FOR_GROUP(g2, fp2)
