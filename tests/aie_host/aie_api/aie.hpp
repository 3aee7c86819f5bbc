// Host stand-in for the part of the AIE API that gemm_gen's kernels use, so that a rendered kernel
// compiles unchanged with `g++ -std=c++20 -I tests/aie_host -I kernels` and can be checked on
// random tiles against gemm_gen/numerics.py. Tests only: it models the numerics gemm_gen
// assumes (numerics.py), not the hardware's unpublished internals.
//
// - bfloat16: 16-bit storage; float -> bf16 rounds to nearest even (as ml_dtypes does), or under a
//   crRnd mode in to_vector.
// - aie::mmul: accfloat accumulates in double, so one kernel call is "the exact sum rounded once to
//   fp32"; integer accumulators (acc32) are int64, the SRS narrowing is shift-round-saturate.
// - rounding / saturation live in emulated mode registers at their reset values (floor, none).
// - AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16: a bf16 mac first turns each row of its A block and each
//   column of its B block (8 values along K) into a bfp16ebs8 block under the core's rounding mode,
//   as gemm_gen/bfp16.py models the AIE API's conversion (shared max exponent, int8 mantissas).
// - bfp16ebs8 (the block-float kernels): aie::block_vector<bfp16ebs8, 64> is one 8 x 8 tile whose
//   memory image is 8 blocks of 9 bytes (exponent byte, 8 int8 mantissas); the block-vector buffer
//   streams move whole 72-byte tiles; aie::accum<accfloat, 64> is loaded from bf16 / float vectors
//   or from a tile (exact), and to_vector<bfp16ebs8>() quantizes blocks of 8 consecutive lanes
//   under the emulated rounding mode exactly as gemm_gen/bfp16.py encode() does;
//   ::mac_8x8_8x8T(A, B^T, acc) adds the exact products of two tiles, and, like mmul, the accum
//   keeps the exact sum in double, so a kernel call rounds it once to fp32 when C is stored.

#pragma once

#if defined(__chess__) || defined(__AIECC__)
#error "tests/aie_host is a host stand-in for the AIE API; AIE compilers must use the real one"
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

using int8 = std::int8_t;
using int16 = std::int16_t;
using int32 = std::int32_t;

// accumulator tags
struct acc32 {};
struct acc64 {};
struct accfloat {};
struct accauto {};

namespace aie {

// crRnd / crSat encodings (UG1583), names as aie::rounding_mode / aie::saturation_mode
enum class rounding_mode : unsigned {
  floor = 0, ceil = 1, symmetric_floor = 2, symmetric_ceil = 3,
  negative_inf = 8, positive_inf = 9, symmetric_zero = 10, symmetric_inf = 11,
  conv_even = 12, conv_odd = 13,
};
enum class saturation_mode : unsigned { none = 0, saturate = 1, symmetric = 3 };

namespace host {

// The core's mode registers, at reset.
inline rounding_mode rounding = rounding_mode::floor;
inline saturation_mode saturation = saturation_mode::none;

// Arithmetic shift right by `shift` bits, rounded per `mode` (numerics.shift_round).
inline std::int64_t shift_round(std::int64_t acc, int shift, rounding_mode mode) {
  if (shift == 0) return acc;
  const std::int64_t q = acc >> shift;  // floor
  const std::int64_t r = acc & ((std::int64_t{1} << shift) - 1);
  const std::int64_t half = std::int64_t{1} << (shift - 1);
  const bool neg = acc < 0, inexact = r != 0, above = r > half, at = r == half, odd = (q & 1) != 0;
  bool up = false;
  switch (mode) {
    case rounding_mode::floor: up = false; break;
    case rounding_mode::ceil: up = inexact; break;
    case rounding_mode::symmetric_floor: up = inexact && neg; break;   // toward zero
    case rounding_mode::symmetric_ceil: up = inexact && !neg; break;   // away from zero
    case rounding_mode::negative_inf: up = above; break;               // nearest, ties down
    case rounding_mode::positive_inf: up = above || at; break;         // nearest, ties up
    case rounding_mode::symmetric_zero: up = above || (at && neg); break;
    case rounding_mode::symmetric_inf: up = above || (at && !neg); break;
    case rounding_mode::conv_even: up = above || (at && odd); break;
    case rounding_mode::conv_odd: up = above || (at && !odd); break;
  }
  return q + (up ? 1 : 0);
}

// Narrow to the integer type T (numerics.saturate).
template <typename T>
inline T saturate(std::int64_t x, saturation_mode mode) {
  const std::int64_t hi = std::numeric_limits<T>::max();
  const std::int64_t lo = mode == saturation_mode::symmetric ? -hi : std::numeric_limits<T>::min();
  if (mode == saturation_mode::none) return static_cast<T>(x);  // wraps (modular since C++20)
  return static_cast<T>(x < lo ? lo : x > hi ? hi : x);
}

// fp32 -> bf16 bits under a rounding mode (numerics.round_f32_to_bf16): round the signed bit
// pattern by 16 bits; IEEE magnitudes are ordered like their bit patterns.
inline std::uint16_t f32_to_bf16_bits(float f, rounding_mode mode) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t sign = u >> 31, mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return static_cast<std::uint16_t>((sign << 15) | 0x7FC0u);  // quiet NaN
  const std::int64_t pattern = sign ? -std::int64_t{mag} : std::int64_t{mag};
  const std::int64_t rounded = shift_round(pattern, 16, mode);
  const std::uint32_t out_mag = static_cast<std::uint32_t>(rounded < 0 ? -rounded : rounded);
  return static_cast<std::uint16_t>((sign << 15) | out_mag);
}

// Bytes of one bfp16ebs8 block: the shared exponent, then 8 int8 mantissas.
constexpr unsigned BFP16_BLOCK = 8, BFP16_BLOCK_BYTES = 9;

// Encode 8 fp32 values (stride apart) as one bfp16ebs8 block (gemm_gen/bfp16.encode): E = the
// largest biased exponent of the finite values (0 if none), mantissa q = x * 2^(133 - E) rounded
// per `mode` and clamped to [-128, 127]. In integers: q = sig * 2^(e - E) / 2^17, sig the signed
// significand; a denormal (e = 0) keeps its raw exponent field, and an Inf/NaN lane encodes as 0.
inline void bfp16_encode(const float *in, unsigned stride, std::uint8_t *out, rounding_mode mode) {
  std::int64_t sig[BFP16_BLOCK];
  int exps[BFP16_BLOCK];
  int E = 0;
  for (unsigned i = 0; i < BFP16_BLOCK; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &in[i * stride], 4);
    const int e = static_cast<int>((bits >> 23) & 0xFF);
    const std::int64_t frac = bits & 0x7FFFFF;
    const bool finite = e != 0xFF;
    std::int64_t v = finite ? (e ? (frac | 0x800000) : frac) : 0;
    sig[i] = (bits >> 31) ? -v : v;
    exps[i] = e;
    if (finite && e > E) E = e;
  }
  out[0] = static_cast<std::uint8_t>(E);
  for (unsigned i = 0; i < BFP16_BLOCK; ++i) {
    const int shift = std::min(17 + (E - exps[i]), 62);  // past 25 bits every |q| < 1/2 rounds alike
    std::int64_t q = shift_round(sig[i], shift, mode);
    q = std::min<std::int64_t>(127, std::max<std::int64_t>(-128, q));
    out[1 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q));
  }
}

// Value i of an encoded block: q * 2^(E - 133) (exact in double).
inline double bfp16_value(const std::uint8_t *block, unsigned i) {
  return std::ldexp(static_cast<double>(static_cast<std::int8_t>(block[1 + i])), static_cast<int>(block[0]) - 133);
}

// One bfp16ebs8 block of 8 values (stride apart), encoded and decoded again.
inline void bfp16_block(const float *in, unsigned stride, double *out, unsigned out_stride, rounding_mode mode) {
  std::uint8_t block[BFP16_BLOCK_BYTES];
  bfp16_encode(in, stride, block, mode);
  for (unsigned i = 0; i < BFP16_BLOCK; ++i) out[i * out_stride] = bfp16_value(block, i);
}

}  // namespace host

inline void set_rounding(rounding_mode m) { host::rounding = m; }
inline rounding_mode get_rounding() { return host::rounding; }
inline void set_saturation(saturation_mode m) { host::saturation = m; }
inline saturation_mode get_saturation() { return host::saturation; }

}  // namespace aie

struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float f) : bits(aie::host::f32_to_bf16_bits(f, aie::rounding_mode::conv_even)) {}
  static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 x;
    x.bits = b;
    return x;
  }
  explicit operator float() const {
    const std::uint32_t u = std::uint32_t{bits} << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};
static_assert(sizeof(bfloat16) == 2, "bfloat16 is stored in 16 bits");

// The element type of bfp16ebs8 block vectors. Left incomplete on purpose: a bfp16 buffer is only
// walked through block-vector streams in whole 64-value tiles (seek / pop / push), never by pointer
// arithmetic on bfp16ebs8 *, whose element size differs between the AIE compilers (llvm-aie#1232:
// sizeof(bfp16ebs8) does not track the 9 bytes per block). A kernel that tries fails to compile here.
struct bfp16ebs8;

namespace aie {

template <typename T, unsigned Elems>
struct vector {
  std::array<T, Elems> data{};

  static constexpr unsigned size() { return Elems; }
  T &operator[](unsigned i) { return data[i]; }
  const T &operator[](unsigned i) const { return data[i]; }
};

template <unsigned Elems, typename T>
vector<T, Elems> load_v(const T *ptr) {
  vector<T, Elems> v;
  std::memcpy(v.data.data(), ptr, sizeof(T) * Elems);
  return v;
}

template <typename T, unsigned Elems>
T *store_v(T *ptr, const vector<T, Elems> &v) {
  std::memcpy(ptr, v.data.data(), sizeof(T) * Elems);
  return ptr;
}

template <typename Tag, unsigned Elems>
struct accum;

template <typename T, unsigned Elems>
auto zeros() {
  if constexpr (std::is_same_v<T, accfloat>)
    return accum<accfloat, Elems>{};
  else
    return vector<T, Elems>{};
}

// v read as a row-major Row x Col matrix; returns its transpose (Col x Row, row-major).
template <typename T, unsigned Elems>
vector<T, Elems> transpose(const vector<T, Elems> &v, unsigned Row, unsigned Col) {
  vector<T, Elems> out;
  for (unsigned r = 0; r < Row; ++r)
    for (unsigned c = 0; c < Col; ++c) out[c * Row + r] = v[r * Col + c];
  return out;
}

template <typename T>
constexpr bool is_float_elem_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, float>;

// C (M x N) = A (M x K) * B (K x N) on row-major blocks; the result stays in the accumulator.
template <unsigned M_Elems, unsigned K_Elems, unsigned N_Elems, typename TypeA, typename TypeB = TypeA,
          typename AccumTag = accauto>
struct mmul {
  static constexpr unsigned M = M_Elems, K = K_Elems, N = N_Elems;
  static constexpr unsigned size_A = M * K, size_B = K * N, size_C = M * N;
  static constexpr bool is_float =
      std::is_same_v<AccumTag, accfloat> || (std::is_same_v<AccumTag, accauto> && is_float_elem_v<TypeA>);
  using acc_elem = std::conditional_t<is_float, double, std::int64_t>;

  std::array<acc_elem, size_C> acc{};

  mmul() = default;

  // Load the accumulator from a vector; integers are shifted up by `shift` bits.
  template <typename T>
  mmul(const vector<T, size_C> &v, int shift = 0) {
    for (unsigned i = 0; i < size_C; ++i) {
      if constexpr (is_float)
        acc[i] = static_cast<double>(static_cast<float>(v[i]));
      else
        acc[i] = static_cast<std::int64_t>(v[i]) << shift;
    }
  }

  void mac(const vector<TypeA, size_A> &a, const vector<TypeB, size_B> &b) {
#ifdef AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16
    if constexpr (std::is_same_v<TypeA, bfloat16> && K % 8 == 0) {
      std::array<float, size_A> fa;
      std::array<float, size_B> fb;
      for (unsigned i = 0; i < size_A; ++i) fa[i] = static_cast<float>(a[i]);
      for (unsigned i = 0; i < size_B; ++i) fb[i] = static_cast<float>(b[i]);
      std::array<double, size_A> qa;
      std::array<double, size_B> qb;
      for (unsigned i = 0; i < M; ++i)  // rows of A: 8 values along K
        for (unsigned p = 0; p < K; p += 8) host::bfp16_block(&fa[i * K + p], 1, &qa[i * K + p], 1, host::rounding);
      for (unsigned j = 0; j < N; ++j)  // columns of B: 8 values along K
        for (unsigned p = 0; p < K; p += 8)
          host::bfp16_block(&fb[p * N + j], N, &qb[p * N + j], N, host::rounding);
      for (unsigned i = 0; i < M; ++i)
        for (unsigned j = 0; j < N; ++j)
          for (unsigned p = 0; p < K; ++p) acc[i * N + j] += qa[i * K + p] * qb[p * N + j];
      return;
    }
#endif
    for (unsigned i = 0; i < M; ++i)
      for (unsigned j = 0; j < N; ++j)
        for (unsigned p = 0; p < K; ++p) acc[i * N + j] += product(a[i * K + p], b[p * N + j]);
  }

  // Store the accumulator: fp32 (rounded to nearest even), then bf16 under the rounding mode;
  // integers shift-round-saturate under the rounding and saturation modes.
  template <typename T>
  vector<T, size_C> to_vector(int shift = 0) const {
    vector<T, size_C> out;
    for (unsigned i = 0; i < size_C; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        static_assert(is_float, "float output from an integer accumulator");
        out[i] = static_cast<float>(acc[i]);
      } else if constexpr (std::is_same_v<T, bfloat16>) {
        static_assert(is_float, "bfloat16 output from an integer accumulator");
        out[i] = bfloat16::from_bits(host::f32_to_bf16_bits(static_cast<float>(acc[i]), host::rounding));
      } else {
        static_assert(!is_float && std::is_integral_v<T>, "integer output from an integer accumulator");
        out[i] = host::saturate<T>(host::shift_round(acc[i], shift, host::rounding), host::saturation);
      }
    }
    return out;
  }

 private:
  static acc_elem product(const TypeA &a, const TypeB &b) {
    if constexpr (is_float)  // exact: bf16 x bf16 has at most 16 significant bits
      return static_cast<double>(static_cast<float>(a)) * static_cast<double>(static_cast<float>(b));
    else
      return static_cast<std::int64_t>(a) * static_cast<std::int64_t>(b);
  }
};

// ---- bfp16ebs8 block vectors (aie2p) --------------------------------------------------------
template <typename T, unsigned Elems>
struct block_vector;

// One 8 x 8 tile of bfp16ebs8: 8 blocks of 8 consecutive lanes, each block 9 bytes in memory.
template <>
struct block_vector<bfp16ebs8, 64> {
  static constexpr unsigned size() { return 64; }
  static constexpr unsigned memory_bytes() { return 8 * host::BFP16_BLOCK_BYTES; }

  std::array<std::uint8_t, 8 * host::BFP16_BLOCK_BYTES> bytes{};  // the memory image

  double host_value(unsigned lane) const {  // test-only accessor
    return host::bfp16_value(&bytes[(lane / host::BFP16_BLOCK) * host::BFP16_BLOCK_BYTES], lane % host::BFP16_BLOCK);
  }
};

// Reads whole block vectors from memory in order; seek(n) skips n of them (from the current position).
template <typename T, unsigned Elems>
class block_vector_input_buffer_stream;

template <>
class block_vector_input_buffer_stream<bfp16ebs8, 64> {
 public:
  using value_type = block_vector<bfp16ebs8, 64>;

  explicit block_vector_input_buffer_stream(const bfp16ebs8 *ptr) : ptr_(reinterpret_cast<const std::uint8_t *>(ptr)) {}

  void seek(int n) { ptr_ += static_cast<std::ptrdiff_t>(n) * value_type::memory_bytes(); }
  value_type pop() {
    value_type v;
    std::memcpy(v.bytes.data(), ptr_, value_type::memory_bytes());
    ptr_ += value_type::memory_bytes();
    return v;
  }
  value_type pop_seek(int n) {  // pop, then seek(n)
    value_type v = pop();
    seek(n);
    return v;
  }
  block_vector_input_buffer_stream &operator>>(value_type &v) {
    v = pop();
    return *this;
  }

 private:
  const std::uint8_t *ptr_;
};

// Writes whole block vectors to memory in order (each push stores its 72 bytes at once).
template <typename T, unsigned Elems>
class block_vector_output_buffer_stream;

template <>
class block_vector_output_buffer_stream<bfp16ebs8, 64> {
 public:
  using value_type = block_vector<bfp16ebs8, 64>;

  explicit block_vector_output_buffer_stream(bfp16ebs8 *ptr) : ptr_(reinterpret_cast<std::uint8_t *>(ptr)) {}

  void seek(int n) { ptr_ += static_cast<std::ptrdiff_t>(n) * value_type::memory_bytes(); }
  void push(const value_type &v) {
    std::memcpy(ptr_, v.bytes.data(), value_type::memory_bytes());
    ptr_ += value_type::memory_bytes();
  }
  block_vector_output_buffer_stream &operator<<(const value_type &v) {
    push(v);
    return *this;
  }

 private:
  std::uint8_t *ptr_;
};

// The fp32 accumulator of the bfp16 datapath. Lanes hold doubles: loads are exact (bf16, fp32 and
// bfp16 values all are), products of two bfp16 values are exact, and sums stay exact for the tests'
// inputs, so a kernel call is "the exact sum rounded once to fp32" (gemm_gen/numerics.py).
template <>
struct accum<accfloat, 64> {
  static constexpr unsigned size() { return 64; }

  std::array<double, 64> acc{};

  accum() = default;
  template <typename T>
  accum(const vector<T, 64> &v) {  // implicit, like the AIE API's vector -> accum conversion
    static_assert(std::is_same_v<T, bfloat16> || std::is_same_v<T, float>, "accfloat loads bf16 or float");
    for (unsigned i = 0; i < 64; ++i) acc[i] = static_cast<double>(static_cast<float>(v[i]));
  }
  accum(const block_vector<bfp16ebs8, 64> &v) {  // implicit
    for (unsigned i = 0; i < 64; ++i) acc[i] = v.host_value(i);
  }

  // fp32 (rounded to nearest even), then: float as is; bfloat16 under the rounding mode; bfp16ebs8
  // in blocks of 8 consecutive lanes under the rounding mode (bfp16.encode).
  template <typename T>
  auto to_vector() const {
    std::array<float, 64> f;
    for (unsigned i = 0; i < 64; ++i) f[i] = static_cast<float>(acc[i]);
    if constexpr (std::is_same_v<T, bfp16ebs8>) {
      block_vector<bfp16ebs8, 64> out;
      for (unsigned b = 0; b < 8; ++b)
        host::bfp16_encode(&f[b * host::BFP16_BLOCK], 1, &out.bytes[b * host::BFP16_BLOCK_BYTES], host::rounding);
      return out;
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      vector<bfloat16, 64> out;
      for (unsigned i = 0; i < 64; ++i) out[i] = bfloat16::from_bits(host::f32_to_bf16_bits(f[i], host::rounding));
      return out;
    } else {
      static_assert(std::is_same_v<T, float>, "accfloat stores bfp16ebs8, bfloat16 or float");
      vector<float, 64> out;
      for (unsigned i = 0; i < 64; ++i) out[i] = f[i];
      return out;
    }
  }
};

}  // namespace aie

// The aie2p intrinsic (a global function on v64bfp16ebs8 / v64accfloat, which aie::block_vector and
// aie::accum convert to and from): acc + A B^T for an 8 x 8 tile A (rows = blocks along K) and an
// 8 x 8 tile Bt of B^T (rows = columns of B, blocks along K): acc[i][j] += sum_p A[i][p] Bt[j][p].
inline aie::accum<accfloat, 64> mac_8x8_8x8T(const aie::block_vector<bfp16ebs8, 64> &a,
                                            const aie::block_vector<bfp16ebs8, 64> &bt,
                                            const aie::accum<accfloat, 64> &acc) {
  aie::accum<accfloat, 64> out = acc;
  for (unsigned i = 0; i < 8; ++i)
    for (unsigned j = 0; j < 8; ++j)
      for (unsigned p = 0; p < 8; ++p) out.acc[i * 8 + j] += a.host_value(i * 8 + p) * bt.host_value(j * 8 + p);
  return out;
}
