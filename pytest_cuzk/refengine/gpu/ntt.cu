// The QAP witness map of cuzk-ref's GPU prover: the PCE's sparse products and radix-2 NTTs over
// the BLS12-381 scalar field.
//
// Fr: mont.cuh's arithmetic with eight 32-bit limbs (R = 2^256). Vectors are rows of a
// (batch, n) array of limbs; an NTT is a bit-reversal copy and log2(n) butterfly stages (one
// launch each), with the twiddles of stage m (m = 1, 2, ..., n/2) at tw[m - 1 .. 2m - 2], as
// field.py's iterative FFT orders them.

#define RL 8

__constant__ u32 FR_R[RL] = {0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                             0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
__constant__ u32 FR_R2[RL] = {0xf3f29c6du, 0xc999e990u, 0x87925c23u, 0x2b6cedcbu,
                              0x7254398fu, 0x05d31496u, 0x9f59ff11u, 0x0748d9d9u};

// Fr for mont.cuh; its product is unrolled whole
struct fr_field {
    static const int N = RL, UNROLL = RL;
    static const u32 INV = 0xffffffffu;  // -r^-1 mod 2^32
    __device__ static __forceinline__ u32 p(int i) { return FR_R[i]; }
    __device__ static __forceinline__ u32 r2(int i) { return FR_R2[i]; }
};

typedef mont<fr_field> fr;

// Canonical values (below r) into Montgomery form, in place.
extern "C" __global__ void fr_to_mont(u32* a, int count) { mont_in_each<fr_field>(a, count); }

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
    fr u, v, w, x;
    load(u, a + lo * RL);
    load(v, a + hi * RL);
    load(w, tw + (size_t)(m - 1 + j) * RL);
    mul(v, v, w);
    add(x, u, v);
    sub(u, u, v);
    store(a + lo * RL, x);
    store(a + hi * RL, u);
}

// Element i of every row times factor[i] (Montgomery); canonical output when leave is set.
extern "C" __global__ void scale_rows(u32* a, const u32* factor, int log_n, int batch, int leave) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 1 << log_n;
    if (t >= n * batch) return;
    fr x, f;
    load(x, a + (size_t)t * RL);
    load(f, factor + (size_t)(t & (n - 1)) * RL);
    mul(x, x, f);
    if (leave) mont_out(x);
    store(a + (size_t)t * RL, x);
}

// out[i] = (A[i] B[i] - C[i]) / Z on the coset, from the three rows of abc (Montgomery).
extern "C" __global__ void quotient(const u32* abc, const u32* z_inv, u32* out, int log_n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 1 << log_n;
    if (i >= n) return;
    fr a, b, c, zi;
    load(a, abc + (size_t)i * RL);
    load(b, abc + ((size_t)n + i) * RL);
    load(c, abc + ((size_t)2 * n + i) * RL);
    load(zi, z_inv);
    mul(a, a, b);
    sub(a, a, c);
    mul(a, a, zi);
    store(out + (size_t)i * RL, a);
}

// One sparse product (A·z, B·z or C·z) from the PCE's CSR matrix: out[i] = sum_k vals[k] z[cols[k]]
// over row i's entries, in Montgomery form because vals are stored as val R^2 (one Montgomery
// product with a canonical z[j] gives val z[j] R). Rows past the matrix's (the domain's padding)
// are zero.
extern "C" __global__ void spmv(const u32* row_ptr, const u32* cols, const u32* vals, const u32* z, u32* out,
                                int rows, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr acc, v, x;
    set_zero(acc);
    if (i < rows)
        for (u32 k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
            load(v, vals + (size_t)k * RL);
            load(x, z + (size_t)cols[k] * RL);
            mul(v, v, x);
            add(acc, acc, v);
        }
    store(out + (size_t)i * RL, acc);
}
