// The QAP witness map of cuzk-ref's GPU prover: the PCE's sparse products and radix-2 NTTs over
// the BLS12-381 scalar field.
//
// Fr: Montgomery form, R = 2^256, eight 32-bit limbs, little endian, multiplied by CIOS and
// kept fully reduced (below r). Vectors are rows of a (batch, n) array of limbs; an NTT is a
// bit-reversal copy and log2(n) butterfly stages (one launch each), with the twiddles of stage
// m (m = 1, 2, ..., n/2) at tw[m - 1 .. 2m - 2], as field.py's iterative FFT orders them.

typedef unsigned int u32;
typedef unsigned long long u64;

#define RL 8

struct fr { u32 v[RL]; };

__constant__ u32 FR_R[RL] = {0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                             0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
__constant__ u32 FR_R2[RL] = {0xf3f29c6du, 0xc999e990u, 0x87925c23u, 0x2b6cedcbu,
                              0x7254398fu, 0x05d31496u, 0x9f59ff11u, 0x0748d9d9u};
#define FR_RINV 0xffffffffu  // -r^-1 mod 2^32

__device__ __forceinline__ fr fr_load(const u32* p) {
    fr a;
    for (int i = 0; i < RL; i++) a.v[i] = p[i];
    return a;
}

__device__ __forceinline__ void fr_store(u32* p, const fr& a) {
    for (int i = 0; i < RL; i++) p[i] = a.v[i];
}

// a -= r when a >= r (a < 2r)
__device__ __forceinline__ void fr_reduce_once(fr& a) {
    u32 d[RL];
    u32 borrow = 0;
    for (int i = 0; i < RL; i++) {
        u64 t = (u64)a.v[i] - FR_R[i] - borrow;
        d[i] = (u32)t;
        borrow = (u32)(t >> 32) & 1u;
    }
    if (!borrow)
        for (int i = 0; i < RL; i++) a.v[i] = d[i];
}

__device__ __forceinline__ fr fr_add(const fr& a, const fr& b) {
    fr r;
    u32 carry = 0;
    for (int i = 0; i < RL; i++) {
        u64 t = (u64)a.v[i] + b.v[i] + carry;
        r.v[i] = (u32)t;
        carry = (u32)(t >> 32);
    }
    fr_reduce_once(r);  // a + b < 2r < 2^256: no carry out of the top limb
    return r;
}

__device__ __forceinline__ fr fr_sub(const fr& a, const fr& b) {
    fr r;
    u32 borrow = 0;
    for (int i = 0; i < RL; i++) {
        u64 t = (u64)a.v[i] - b.v[i] - borrow;
        r.v[i] = (u32)t;
        borrow = (u32)(t >> 32) & 1u;
    }
    if (borrow) {
        u32 carry = 0;
        for (int i = 0; i < RL; i++) {
            u64 t = (u64)r.v[i] + FR_R[i] + carry;
            r.v[i] = (u32)t;
            carry = (u32)(t >> 32);
        }
    }
    return r;
}

// Montgomery product a * b / 2^256 mod r (CIOS); r < 2^255, so the sum stays below 2r < 2^256.
__device__ __forceinline__ fr fr_mul(const fr& a, const fr& b) {
    u32 t[RL + 2];
    for (int i = 0; i < RL + 2; i++) t[i] = 0;
    for (int i = 0; i < RL; i++) {
        u32 bi = b.v[i];
        u64 c = 0;
        for (int j = 0; j < RL; j++) {
            c = (u64)a.v[j] * bi + t[j] + (c >> 32);
            t[j] = (u32)c;
        }
        c = (u64)t[RL] + (c >> 32);
        t[RL] = (u32)c;
        t[RL + 1] = (u32)(c >> 32);
        u32 m = t[0] * FR_RINV;
        c = (u64)m * FR_R[0] + t[0];
        for (int j = 1; j < RL; j++) {
            c = (u64)m * FR_R[j] + t[j] + (c >> 32);
            t[j - 1] = (u32)c;
        }
        c = (u64)t[RL] + (c >> 32);
        t[RL - 1] = (u32)c;
        t[RL] = t[RL + 1] + (u32)(c >> 32);
    }
    fr r;
    for (int i = 0; i < RL; i++) r.v[i] = t[i];
    fr_reduce_once(r);
    return r;
}

// Canonical values (below r) into Montgomery form, in place: a * R^2 / R.
extern "C" __global__ void fr_to_mont(u32* a, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    fr r2;
    for (int k = 0; k < RL; k++) r2.v[k] = FR_R2[k];
    fr_store(a + (size_t)i * RL, fr_mul(fr_load(a + (size_t)i * RL), r2));
}

// Row b of out is row b of in in bit-reversed order (n = 2^log_n; batch rows).
extern "C" __global__ void bit_reverse(const u32* in, u32* out, int log_n, int batch) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 1 << log_n;
    if (t >= n * batch) return;
    int b = t >> log_n, i = t & (n - 1);
    int j = log_n ? (int)(__brev((u32)i) >> (32 - log_n)) : 0;
    const u32* src = in + ((size_t)b * n + i) * RL;
    u32* dst = out + ((size_t)b * n + j) * RL;
    for (int k = 0; k < RL; k++) dst[k] = src[k];
}

// One radix-2 stage with half-size m over every row: (u, v) -> (u + w v, u - w v).
extern "C" __global__ void butterflies(u32* a, const u32* tw, int m, int log_n, int batch) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int half = 1 << (log_n - 1);
    if (t >= half * batch) return;
    int b = t / half, i = t - b * half;
    int j = i & (m - 1);
    size_t base = (size_t)b << log_n;
    size_t lo = base + (size_t)((i - j) * 2 + j), hi = lo + m;
    fr u = fr_load(a + lo * RL);
    fr v = fr_mul(fr_load(a + hi * RL), fr_load(tw + (size_t)(m - 1 + j) * RL));
    fr_store(a + lo * RL, fr_add(u, v));
    fr_store(a + hi * RL, fr_sub(u, v));
}

// Element i of every row times factor[i] (Montgomery); canonical output when leave is set.
extern "C" __global__ void scale_rows(u32* a, const u32* factor, int log_n, int batch, int leave) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 1 << log_n;
    if (t >= n * batch) return;
    fr x = fr_mul(fr_load(a + (size_t)t * RL), fr_load(factor + (size_t)(t & (n - 1)) * RL));
    if (leave) {
        fr one;
        one.v[0] = 1;
        for (int k = 1; k < RL; k++) one.v[k] = 0;
        x = fr_mul(x, one);
    }
    fr_store(a + (size_t)t * RL, x);
}

// out[i] = (A[i] B[i] - C[i]) / Z on the coset, from the three rows of abc (Montgomery).
extern "C" __global__ void quotient(const u32* abc, const u32* z_inv, u32* out, int log_n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 1 << log_n;
    if (i >= n) return;
    fr a = fr_load(abc + (size_t)i * RL);
    fr b = fr_load(abc + ((size_t)n + i) * RL);
    fr c = fr_load(abc + ((size_t)2 * n + i) * RL);
    fr_store(out + (size_t)i * RL, fr_mul(fr_sub(fr_mul(a, b), c), fr_load(z_inv)));
}

// One sparse product (A·z, B·z or C·z) from the PCE's CSR matrix: out[i] = sum_k vals[k] z[cols[k]]
// over row i's entries, in Montgomery form because vals are stored as val R^2 (one Montgomery
// product with a canonical z[j] gives val z[j] R). Rows past the matrix's (the domain's padding)
// are zero.
extern "C" __global__ void spmv(const u32* row_ptr, const u32* cols, const u32* vals, const u32* z, u32* out,
                                int rows, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr acc;
    for (int k = 0; k < RL; k++) acc.v[k] = 0;
    if (i < rows)
        for (u32 k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            acc = fr_add(acc, fr_mul(fr_load(vals + (size_t)k * RL), fr_load(z + (size_t)cols[k] * RL)));
    fr_store(out + (size_t)i * RL, acc);
}
