// Montgomery arithmetic over a prime field of N 32-bit limbs, written once for Fr (ntt.cu) and
// Fp (msm.cu); the loader puts this file in front of each. A field is a traits struct P: its
// limb count N, its modulus p(i), R^2 mod p r2(i), -p^-1 mod 2^32 INV, UNROLL, how far the
// product's outer loop is unrolled, and, for set_one, R mod p one(i) (R = 2^(32 N)). Elements are little-endian
// limbs kept fully reduced (below p), so that zero has one representation. Results may alias
// operands. Both moduli are below R/2, so a + b < 2p fits the limbs, and a product, below 2p
// before its last step (p < R), needs one subtraction of p.

typedef unsigned int u32;
typedef unsigned long long u64;

template <class P> struct mont { u32 v[P::N]; };

template <class P> __device__ __forceinline__ bool is_zero(const mont<P>& a) {
    u32 acc = 0;
    for (int i = 0; i < P::N; i++) acc |= a.v[i];
    return acc == 0;
}

template <class P> __device__ __forceinline__ void set_zero(mont<P>& a) {
    for (int i = 0; i < P::N; i++) a.v[i] = 0;
}

// R mod p: one, in Montgomery form
template <class P> __device__ __forceinline__ void set_one(mont<P>& a) {
    for (int i = 0; i < P::N; i++) a.v[i] = P::one(i);
}

template <class P> __device__ __forceinline__ void load(mont<P>& a, const u32* src) {
    for (int i = 0; i < P::N; i++) a.v[i] = src[i];
}

template <class P> __device__ __forceinline__ void store(u32* dst, const mont<P>& a) {
    for (int i = 0; i < P::N; i++) dst[i] = a.v[i];
}

// a -= p when a >= p (a < 2p)
template <class P> __device__ __forceinline__ void reduce_once(mont<P>& a) {
    u32 d[P::N];
    u32 borrow = 0;
    for (int i = 0; i < P::N; i++) {
        u64 t = (u64)a.v[i] - P::p(i) - borrow;
        d[i] = (u32)t;
        borrow = (u32)(t >> 32) & 1u;
    }
    if (!borrow)
        for (int i = 0; i < P::N; i++) a.v[i] = d[i];
}

template <class P> __device__ __forceinline__ void add(mont<P>& r, const mont<P>& a, const mont<P>& b) {
    u32 carry = 0;
    for (int i = 0; i < P::N; i++) {
        u64 t = (u64)a.v[i] + b.v[i] + carry;
        r.v[i] = (u32)t;
        carry = (u32)(t >> 32);
    }
    reduce_once(r);
}

template <class P> __device__ __forceinline__ void sub(mont<P>& r, const mont<P>& a, const mont<P>& b) {
    u32 borrow = 0;
    for (int i = 0; i < P::N; i++) {
        u64 t = (u64)a.v[i] - b.v[i] - borrow;
        r.v[i] = (u32)t;
        borrow = (u32)(t >> 32) & 1u;
    }
    if (borrow) {
        u32 carry = 0;
        for (int i = 0; i < P::N; i++) {
            u64 t = (u64)r.v[i] + P::p(i) + carry;
            r.v[i] = (u32)t;
            carry = (u32)(t >> 32);
        }
    }
}

template <class P> __device__ __forceinline__ void neg(mont<P>& r, const mont<P>& a) {
    mont<P> z;
    set_zero(z);
    sub(r, z, a);
}

// Montgomery product a * b / R mod p, coarsely integrated operand scanning. b's limbs rotate
// through bi, so no register array is indexed by a variable when the outer loop stays rolled
// (Fp: one product is ~150 instructions instead of ~1700, which keeps NVRTC fast).
template <class P> __device__ __forceinline__ void mul(mont<P>& r, const mont<P>& a, const mont<P>& b) {
    u32 t[P::N + 2], bs[P::N];
    for (int i = 0; i < P::N + 2; i++) t[i] = 0;
    for (int i = 0; i < P::N; i++) bs[i] = b.v[i];
#pragma unroll P::UNROLL
    for (int i = 0; i < P::N; i++) {
        u32 bi = bs[0];
        for (int j = 0; j < P::N - 1; j++) bs[j] = bs[j + 1];
        u64 c = 0;
        for (int j = 0; j < P::N; j++) {
            c = (u64)a.v[j] * bi + t[j] + (c >> 32);
            t[j] = (u32)c;
        }
        c = (u64)t[P::N] + (c >> 32);
        t[P::N] = (u32)c;
        t[P::N + 1] = (u32)(c >> 32);
        u32 m = t[0] * P::INV;
        c = (u64)m * P::p(0) + t[0];
        for (int j = 1; j < P::N; j++) {
            c = (u64)m * P::p(j) + t[j] + (c >> 32);
            t[j - 1] = (u32)c;
        }
        c = (u64)t[P::N] + (c >> 32);
        t[P::N - 1] = (u32)c;
        t[P::N] = t[P::N + 1] + (u32)(c >> 32);
    }
    for (int i = 0; i < P::N; i++) r.v[i] = t[i];
    reduce_once(r);
}

template <class P> __device__ __forceinline__ void sqr(mont<P>& r, const mont<P>& a) { mul(r, a, a); }

// a canonical value into Montgomery form (times R^2 / R)
template <class P> __device__ __forceinline__ void mont_in(mont<P>& a) {
    mont<P> r2;
    for (int i = 0; i < P::N; i++) r2.v[i] = P::r2(i);
    mul(a, a, r2);
}

// The body of a kernel that puts `count` canonical elements of v into Montgomery form, in place:
// thread i takes element i.
template <class P> __device__ __forceinline__ void mont_in_each(u32* v, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    mont<P> a;
    load(a, v + (size_t)i * P::N);
    mont_in(a);
    store(v + (size_t)i * P::N, a);
}

// a out of Montgomery form (times 1 / R)
template <class P> __device__ __forceinline__ void mont_out(mont<P>& a) {
    mont<P> one;
    set_zero(one);
    one.v[0] = 1;
    mul(a, a, one);
}
