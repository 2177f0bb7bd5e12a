// CUDA's device-side vocabulary for g++, put in front of a kernel source (mont.cuh + msm.cu or ntt.cu)
// so that the very text NVRTC compiles runs on the CPU under the tests' CuPy stand-in (hostcuda.py).
//
// A launch runs every (block, thread) index in turn, one thread after the other. That is a faithful
// schedule for these kernels only because they share nothing within a launch: no __shared__ memory,
// no __syncthreads, and their two atomicAdds (one counts a bucket's points, one hands out its
// slots) are correct in any order of the threads, so a sequential one is a legal interleaving. `#pragma unroll` is unknown to g++: compile with -Wno-unknown-pragmas.

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#define __device__
#define __global__
#define __constant__ const
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))

struct dim3 {
    unsigned int x, y, z;
};

// The index of the simulated thread, set by hostcuda::launch before each call of the kernel.
static dim3 blockDim, blockIdx, threadIdx;

inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}

inline unsigned int atomicAdd(unsigned int* address, unsigned int value) {
    unsigned int old = *address;
    *address = old + value;
    return old;
}

namespace hostcuda {

// The NumPy dtype of each parameter type a kernel may take; another type fails to compile here.
template <class T> struct dtype;
template <> struct dtype<int> { static constexpr const char* name = "int32"; };
template <> struct dtype<unsigned int> { static constexpr const char* name = "uint32"; };
template <> struct dtype<unsigned char> { static constexpr const char* name = "uint8"; };

template <class T> std::string param_name() {
    if constexpr (std::is_pointer_v<T>)
        return param_name<std::remove_cv_t<std::remove_pointer_t<T>>>() + "*";
    else
        return dtype<T>::name;
}

// The kernel's parameters, e.g. "uint32* int32": what the launcher checks the arguments against.
template <class... A> const char* signature(void (*)(A...)) {
    static const std::string names = [] {
        std::string out;
        ((out += param_name<A>() + " "), ...);
        return out;
    }();
    return names.c_str();
}

template <class... A, std::size_t... I>
void call(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<A*>(args[I])...);
}

// cudaLaunchKernel's contract: args[i] points at the value of parameter i.
template <class... A> void launch(void (*kernel)(A...), unsigned int grid, unsigned int block, void** args) {
    blockDim = {block, 1, 1};
    for (unsigned int b = 0; b < grid; b++)
        for (unsigned int t = 0; t < block; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            call(kernel, args, std::index_sequence_for<A...>{});
        }
}

}  // namespace hostcuda
