// Host stand-in for the part of the AIE API that gemm_gen's kernels use, so that a rendered kernel
// compiles unchanged with `g++ -std=c++20 -D__AIE_ARCH__=20|21 -I tests/aie_host -I kernels` and can
// be checked on random tiles against gemm_gen/numerics.py. Tests only: it models the numerics
// gemm_gen assumes (numerics.py), not the hardware's unpublished internals, and it refuses what
// the real API (aie_api 2026.1) or the hardware would not do as the kernel expects. A refusal
// that the compiler can see is a compile error (static_assert); one that depends on values is
// recorded by host::fail() and read by the tests after every kernel call (gg_host_error). The
// modelling choices, each with its source (aie_api 2026.1 = jgmelber/aie_api@2b7eedf, the newest
// public copy; UG1583; mlir-aie):
// - aie::mmul shapes: only those aie_api defines for a dense B on the target (__AIE_ARCH__ 20 = AIE2,
//   21 = AIE2P); the accumulator is the one the shape really uses (acc64 for AIE2 int16 4x4x4 and
//   2x4x8 and AIE2P int16 4x4x8, acc32 for other integer shapes, accfloat for bf16).
// - acc32 lanes hold 32 bits: a mac or an up-shifted load that leaves them fails (what the hardware
//   does on acc32 overflow is unpublished). Loading int32 into acc32 needs shift 0 (REQUIRES in
//   detail/aie2*/accum.hpp: a compile error under chess, silently dropped under Peano) and so does
//   storing acc32 as int32 (a plain cast that ignores the shift). SRS shifts 0..59, UPS 0..63.
// - accum constructors from vectors and block vectors are explicit (accum.hpp).
// - load_v / store_v need the pointer aligned as detail/ld_st.hpp vector_ldst_align says: 16 bytes
//   for a 128-bit vector, 32 for a 256-bit one, and for every other size 32 on AIE2 and 64 on AIE2P
//   (so a 64-bit vector needs 32 / 64, not 8); the hardware silently rounds a misaligned address
//   down, so a misaligned access fails here.
// - bf16 through bfp16 (AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16, tested with #if as the API does)
//   applies to AIE2P 4x8x8 and 8x8x8 only; other bf16 shapes stay plain bf16.
// - block-vector streams read ahead in 512-bit fills and seek() drops that state: a seek after a
//   pop (or a push) does not move relative to the logical position, so it fails; pop_seek is fine.
// - with -DGEMM_GEN_HOST_FIFO_LIMIT, at most host::fifo_limits.load block-vector input streams and
//   .store output streams hold a FIFO at once (AIE2P: 2 load FIFOs lf0, lf1 and 1 store FIFO sf,
//   llvm-aie aie2p/AIE2PRegisterInfo.td; AIE2 has none, aie2/AIE2GenRegisterInfo.td, and aie_api
//   defines block-vector streams from AIE_API_ML_VERSION 210 only). A stream holds its FIFO from
//   its first pop (the fifo_ld_fill of aie2p/array_helpers.hpp fifo_buffer_stream) or push until it
//   goes out of scope; a stream beyond the registers is spilled and restored (llvm-aie #1090).
// - aie::transpose(v, Row, Col) needs Row * Col == the vector's size, both > 0 (REQUIRES in aie.hpp;
//   vector sizes are powers of two, so Row is one too, as aie2/transpose.hpp's shuffle tables need).
// - subnormal float operands fail (whether the core flushes them is unpublished; bf16 declares none).
// - an acc64 accumulator goes to memory and back only through aie::vector_cast (aie.hpp: reinterpret
//   an accumulator as a vector and back, Gen2 = AIE2 / AIE2P): accum<acc64, N> <-> vector<int32, 2N>,
//   each lane's low word first (the hardware's lane order is unpublished; only the kernel reads it
//   back, so a round trip is all that must hold); mmul is built from its accum_type and gives it back
//   with to_accum() (detail/mmul.hpp C_block). Only int32 <-> acc64 casts are modelled: others fail.
// - int4 (issue 22, W4A8): an opaque 1-byte element type (sizeof(int4) == 1 in the AIE API, so
//   kernels never do int4 * arithmetic: amd/IRON PR #182's bug), reached only through
//   aie::vector_cast<int4>(vector<uint8|int8, N>) -> vector<int4, 2N>, a reinterpretation of the bytes.
//   Lane 2i is the low nibble of byte i, 2i + 1 the high one, sign-extended: the order mlir-air's
//   hardware-passing int4 GEMV packs on the host (docs/int4_decode.md; the lane order inside aie2p's
//   16 x 16 B block is unpublished, an NPU probe settles it). aie::mmul<M, K, N, int8, int4> exists
//   for aie_api's mmul_8_4 shapes only: AIE2 4x16x8, 8x16x8, 4x32x8; AIE2P 4x16x16; acc32.
// - W4A16's dequantization (templates/mm.cc.j2; read in jgmelber/aie_api@2b7eedf include/aie_api/aie.hpp,
//   detail/aie2/elementary.hpp, and UG1603 2026.1 "Data Types"): every vector the new operations below take
//   or give is one the API defines, 128, 256, 512 or 1024 bits (int4 32..256 lanes, int8 16..128, int16
//   8..64, bf16 8..64), else a compile error. aie::unpack (int4 -> int8, int8 -> int16, lane order kept;
//   floats refused, as its requires(!is_floating_point) does; the int4 lanes unpacked are counted for the
//   tests, host::int4_unpacked). aie::add / aie::sub of two int16 vectors (modular, as the vector ALU).
//   aie::to_float<float | bfloat16>(vector<int16>, shift): v 2^-shift rounded to TR under the rounding
//   mode (aie2's Fix2Float goes through accfloat and to_vector_sign<TR>; the aie2p implementation was not
//   read, and is modelled alike). aie::to_fixed<int16>(vector<bfloat16>, shift): only values that are
//   integers after the shift and fit int16 (the rounding of bfloat16_to_int is unpublished): anything else
//   fails. vector::grow_replicate<ElemsOut>() (the vector repeated to fill ElemsOut lanes, ElemsOut a multiple).
//   aie::vector_cast<bfloat16>(vector<int16>): the lanes' bits read as bf16 (the API's reinterpretation of a
//   vector of the same size). aie::msc(accum<accfloat>, vector<bfloat16>, vector<bfloat16>): acc - a b, the
//   product exact, one fp32 rounding (mul.hpp's MulMacroOp::Sub).
//   aie::interleave_zip(v, w, chunk_size): {v[0:c], w[0:c], v[c:2c], w[c:2c], ...} split into two
//   vectors, chunk_size a power of two <= the lanes and >= 8 bits of lanes (REQUIRES_MSG in aie.hpp).
// - -DGG_HOST_FP32_PER_MAC (every float kernel's test compiles with it, tests/test_kernels.py host_defines)
//   rounds fp32 lanes after every hardware mac instead of once per call: after all K products of one mmul
//   mac on AIE2 and in the bfp16 emulation / mac_8x8_8x8T (one intrinsic per lane row), after each product on
//   AIE2P's plain bf16 mmul (aie_api emulates it with eight mac_elem_32 in K order: mmul::fused_k), the
//   products of one mac added exactly first (the adder tree's own order inside a mac is unpublished);
//   gemm_gen/numerics.py's fp32_per_mac with mac_products (fused_mac_products) is the same model, so the
//   kernels' mac order shows in their tests.
// - -DGG_HOST_ACC64_PERMUTED permutes aie::vector_cast's acc64 <-> int32 word order (host::acc64_word; the real
//   one is unpublished): a kernel right under both orders relies only on whole-block round trips.
// - block-vector input streams count their pops and FIFO fills (host::stream_pops / stream_fills);
//   -DGG_HOST_PEANO models Peano's chess_manifest (__builtin_constant_p), under which a pop whose fill count is
//   carried around a loop fills every time (see host::loop_epoch).
// - set_rounding calls are counted (host::rounding_writes): the tests count the conversion loop's mode writes.
//
// - bfloat16: 16-bit storage; float -> bf16 rounds to nearest even (as ml_dtypes does), or under a
//   crRnd mode in to_vector.
// - aie::mmul: accfloat accumulates in double, so without -DGG_HOST_FP32_PER_MAC one kernel call is "the
//   exact sum rounded once to fp32" (exact for gemm_gen's inputs whatever the order); integer lanes are
//   checked against their width (above), the SRS narrowing is shift-round-saturate.
// - rounding / saturation live in emulated mode registers at their reset values (floor, none).
// - AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16 (AIE2P 4x8x8 / 8x8x8): a bf16 mac first turns each row of
//   its A block and each column of its B block (8 values along K) into a bfp16ebs8 block under the
//   core's rounding mode, as gemm_gen/bfp16.py models the AIE API's conversion (shared max exponent,
//   int8 mantissas).
// - bfp16ebs8 (the block-float kernels): aie::block_vector<bfp16ebs8, 64> is one 8 x 8 tile whose
//   memory image is 8 blocks of 9 bytes (exponent byte, 8 int8 mantissas); the block-vector buffer
//   streams move whole 72-byte tiles; aie::accum<accfloat, 64> is loaded from bf16 / float vectors
//   or from a tile (exact), and to_vector<bfp16ebs8>() quantizes blocks of 8 consecutive lanes
//   under the emulated rounding mode exactly as gemm_gen/bfp16.py encode() does;
//   ::mac_8x8_8x8T(A, B^T, acc) adds the exact products of two tiles, and, like mmul, the accum
//   keeps the exact sum in double, so a kernel call rounds it once to fp32 when C is stored.

#pragma once

// The stand-in's own guards, no rule of the real API: an AIE compiler gets aie_api's aie.hpp, and the stand-in
// models the two targets gemm_gen builds for (__AIE_ARCH__ as aie_api's detail/config.hpp reads it).
#if defined(__chess__) || defined(__AIECC__)
#error "tests/aie_host is a host stand-in for the AIE API; AIE compilers must use the real one"
#endif
#if !defined(__AIE_ARCH__) || (__AIE_ARCH__ != 20 && __AIE_ARCH__ != 21)
#error "compile the host stand-in with -D__AIE_ARCH__=20 (AIE2, npu1) or 21 (AIE2P, npu2)"
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using int8 = std::int8_t;
using uint8 = std::uint8_t;
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

// The first thing the kernel asked for that the real API or hardware would not do as expected;
// the tests read it after every call (gg_host_error) and clear it.
inline std::string error;
inline void fail(const std::string &what) {
  if (error.empty()) error = what;
}

constexpr bool aie2p = __AIE_ARCH__ == 21;

// Part idx of `in` (out.size() lanes each) into `out`, or a refusal past its end: aie::vector / aie::accum
// extract's REQUIRES_MSG(idx < Elems / ElemsOut) (aie_api @2b7eedf detail/aie2/vector.hpp line 987; accum.hpp
// as for insert at line 374).
template <typename T, std::size_t N, std::size_t M>
void extract_part(const std::array<T, N> &in, std::array<T, M> &out, unsigned idx, const char *what) {
  static_assert(N % M == 0, "aie::vector / aie::accum extract: the part's size divides the whole's");
  if (idx >= N / M) fail(what);
  else std::copy(in.begin() + idx * M, in.begin() + (idx + 1) * M, out.begin());
}

// int4 lanes aie::unpack has widened since the last reset: the tests count W4A16's dequantization passes.
inline unsigned long long int4_unpacked = 0;

// aie::set_rounding calls since the last reset: the tests count the conversion loop's mode writes.
inline unsigned long long rounding_writes = 0;

// Where acc64 lane `lane` of an n-lane accumulator keeps its low (half 0) or high (half 1) word when
// aie::vector_cast reinterprets it as 2n int32 values. The real order is unpublished: aie_api reinterprets the
// register (detail/aie2/vector_accum_cast.hpp, accum_to_vector_cast_bits_impl: a bit cast per 1024-bit chunk).
// By default the low word first, lane by lane; with -DGG_HOST_ACC64_PERMUTED every low word before every high
// word and the lanes reversed (any bijection would do): a kernel that reads such a dump other than whole, back
// through the same cast of the same n lanes, then reads the wrong lanes.
constexpr unsigned acc64_word(unsigned lane, unsigned half, [[maybe_unused]] unsigned n) {
#if defined(GG_HOST_ACC64_PERMUTED)
  return half * n + (n - 1 - lane);
#else
  return 2 * lane + half;
#endif
}

// Alignment load_v / store_v need for a vector of `bytes` (aie_api detail/ld_st.hpp vector_ldst_align:
// only exactly 128 and 256 bits get less than the target's natural alignment, smaller vectors too need it).
constexpr std::size_t vector_alignment(std::size_t bytes) {
  return bytes == 16 ? 16 : bytes == 32 ? 32 : aie2p ? 64 : 32;
}

// A load_v / store_v address not aligned as vector_ldst_align asks (aie_api @2b7eedf detail/ld_st.hpp lines 20-43).
inline void check_aligned(const void *ptr, std::size_t bytes, const char *what) {
  const std::size_t align = vector_alignment(bytes);
  if (reinterpret_cast<std::uintptr_t>(ptr) % align) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s of a %zu-byte vector at an address %zu bytes past a %zu-byte boundary "
                  "(the hardware rounds it down)", what, bytes, static_cast<std::size_t>(
                      reinterpret_cast<std::uintptr_t>(ptr) % align), align);
    fail(buf);
  }
}

// ---- load / store FIFO registers held by block-vector streams ----
// How many streams of each direction can hold a FIFO register at once, per target: the one place the
// limit is read from. AIE2P: lf0, lf1 and sf (llvm-aie aie2p/AIE2PRegisterInfo.td, eLdFifoReg and
// mStFifo); AIE2 defines no FIFO registers (aie2/AIE2GenRegisterInfo.td) and aie_api no block-vector
// streams before AIE2P.
struct FifoLimits {
  unsigned load, store;
  const char *registers;  // what the message names
};
constexpr FifoLimits fifo_limits =
    aie2p ? FifoLimits{2, 1, "AIE2P has 2 load FIFOs (lf0, lf1) and 1 store FIFO (sf): llvm-aie aie2p/AIE2PRegisterInfo.td"}
          : FifoLimits{0, 0, "AIE2 has no load or store FIFO registers: llvm-aie aie2/AIE2GenRegisterInfo.td"};

// ---- load FIFO fills of block-vector input streams ----
// aie_api's fifo_buffer_stream::pop() (detail/aie2p/array_helpers.hpp lines 224-235 @2b7eedf, jgmelber/aie_api, the
// newest public copy; the aie_api v1.4.3's Peano ships is not stored) fills the FIFO first
// `if (!chess_manifest(load_count_ != 0))`, load_count_ counting pops modulo ld_fill_ratio (lines 151-159: 8 for
// a 576-bit bfp16 tile: 8 pops of 576 bits take 8 pop loads and 1 fill of 512 bits), and seek / pop_seek set
// it to 0. Under Peano chess_manifest(x) is (__builtin_constant_p(x) && (x != 0)) (llvm-aie
// clang/lib/Headers/aiebase_chess.h line 25 @ccc7c0e): where load_count_ is not a compile-time constant, the
// condition is true and every pop fills. Modelled with -DGG_HOST_PEANO: a stream's count stops being a
// constant once it has been popped in one iteration of a hinted loop (kernels/gemm_gen_kernel.h's GG_* hints
// call next_iteration) and popped again after another iteration began, until a seek or pop_seek sets it
// again; the first iteration of a loop that a stream built outside it pops is counted as a constant (one
// fill too few per loop entry; no kernel here builds a stream outside the loop that pops it). Without
// -DGG_HOST_PEANO (chess, whose chess_manifest in pipelined loops is unpublished) a pop fills at count 0 only.
// Whether a fill into a FIFO that already holds a tile changes the data is unpublished: the host reads the same
// tile either way, and counts the loads (a pop's own 512-bit load and each fill) for the tests.
inline unsigned long long loop_epoch = 0;  // iterations of hinted loops begun so far
inline void next_iteration() { ++loop_epoch; }
inline unsigned long long stream_pops = 0, stream_fills = 0;  // since the last reset

// Streams holding a FIFO now, and the most at once since the last reset (read by the tests).
inline unsigned live_fifos[2] = {0, 0}, peak_fifos[2] = {0, 0};  // [0] load, [1] store

// A FIFO register held by one stream, from its first pop / push to its end; a copy of a holding stream
// is one more stream state to keep in a register.
template <bool Store>
class fifo_hold {
 public:
  fifo_hold() = default;
  fifo_hold(const fifo_hold &other) {
    if (other.held_) take();
  }
  fifo_hold &operator=(const fifo_hold &other) {
    if (other.held_ && !held_) take();
    else if (!other.held_ && held_) drop();
    return *this;
  }
  ~fifo_hold() {
    if (held_) drop();
  }
  void use() {  // the stream fills (or pushes to) its FIFO
    if (!held_) take();
  }

 private:
  void take() {
    held_ = true;
    const unsigned live = ++live_fifos[Store];
    peak_fifos[Store] = std::max(peak_fifos[Store], live);
#if defined(GEMM_GEN_HOST_FIFO_LIMIT)
    const unsigned limit = Store ? fifo_limits.store : fifo_limits.load;
    if (live > limit) {
      char buf[400];
      std::snprintf(buf, sizeof buf, "%u block-vector %s streams hold a %s FIFO at once, over the limit of %u: %s; "
                    "the compiler spills and restores the rest (llvm-aie #1090)", live, Store ? "output" : "input",
                    Store ? "store" : "load", limit, fifo_limits.registers);
      fail(buf);
    }
#endif
  }
  void drop() {
    held_ = false;
    --live_fifos[Store];
  }
  bool held_ = false;
};

// A bf16 or fp32 value that is subnormal (nonzero with a zero exponent field).
inline bool subnormal(float f) { return f != 0.0f && std::fpclassify(f) == FP_SUBNORMAL; }

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

// An fp32 lane after one mac: exact (double) by default, so a call is the exact sum rounded once;
// with -DGG_HOST_FP32_PER_MAC rounded to fp32 after every mac instruction (the products of one mac
// added exactly first), so that two kernels agree bit for bit only if they issue the same macs on
// the same operands in the same order per accumulator.
inline double per_mac(double x) {
#if defined(GG_HOST_FP32_PER_MAC)
  return static_cast<double>(static_cast<float>(x));
#else
  return x;
#endif
}

// One bfp16ebs8 block of 8 values (stride apart), encoded and decoded again.
inline void bfp16_block(const float *in, unsigned stride, double *out, unsigned out_stride, rounding_mode mode) {
  std::uint8_t block[BFP16_BLOCK_BYTES];
  bfp16_encode(in, stride, block, mode);
  for (unsigned i = 0; i < BFP16_BLOCK; ++i) out[i * out_stride] = bfp16_value(block, i);
}

}  // namespace host

inline void set_rounding(rounding_mode m) {
  host::rounding = m;
  ++host::rounding_writes;
}
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
static_assert(sizeof(bfloat16) == 2, "bfloat16 is stored in 16 bits");  // the stand-in's own layout check

// The element type of bfp16ebs8 block vectors. Left incomplete on purpose: a bfp16 buffer is only
// walked through block-vector streams in whole 64-value tiles (seek / pop / push), never by pointer
// arithmetic on bfp16ebs8 *, whose element size differs between the AIE compilers (llvm-aie#1232:
// sizeof(bfp16ebs8) does not track the 9 bytes per block). A kernel that tries fails to compile here.
struct bfp16ebs8;

// The data-memory resource a stream's accesses are annotated with (aie_api's global enum, as mlir-aie PR #3650's
// kernels spell `aie_dm_resource::a`): a bank hint to the scheduler (llvm-aie's address spaces), no change to
// any value, so the host only carries it.
enum class aie_dm_resource { none, a, b, c, d, stack };

// 4-bit signed integers: an opaque byte-sized element (see the header's notes), values in vectors only.
struct int4 {
  std::uint8_t raw;
};
// aie_api @2b7eedf types.hpp lines 100 and 126: int4 is the empty struct int4_t, sizeof 1
static_assert(sizeof(int4) == 1, "the AIE API's int4 is one byte of storage per element pointer step");

namespace aie {

template <typename T, unsigned Elems>
struct vector {
  std::array<T, Elems> data{};

  static constexpr unsigned size() { return Elems; }
  T &operator[](unsigned i) { return data[i]; }
  const T &operator[](unsigned i) const { return data[i]; }

  // Lanes [idx ElemsIn, (idx + 1) ElemsIn) replaced by v (vector.hpp insert: idx counts subvectors).
  template <unsigned ElemsIn>
  vector &insert(unsigned idx, const vector<T, ElemsIn> &v) {
    static_assert(Elems % ElemsIn == 0, "aie::vector::insert: the subvector size divides the vector's");
    if (idx >= Elems / ElemsIn) host::fail("aie::vector::insert past the vector's end");
    else std::copy(v.data.begin(), v.data.end(), data.begin() + idx * ElemsIn);
    return *this;
  }

  // The vector repeated as many times as fill ElemsOut lanes (vector.hpp grow_replicate).
  template <unsigned ElemsOut>
  vector<T, ElemsOut> grow_replicate() const;

  template <unsigned ElemsOut>
  vector<T, ElemsOut> extract(unsigned idx) const {
    vector<T, ElemsOut> out;
    host::extract_part(data, out.data, idx, "aie::vector::extract past the vector's end");
    return out;
  }
};

// Elems int4 values in Elems / 2 bytes; lane i is nibble i % 2 (low first) of byte i / 2, sign-extended.
template <unsigned Elems>
struct vector<int4, Elems> {
  static_assert(Elems % 2 == 0, "int4 vectors hold whole bytes");  // UG1603 "Data Types": int4 vectors of 32..256 lanes
  std::array<std::uint8_t, Elems / 2> bytes{};

  static constexpr unsigned size() { return Elems; }
  int operator[](unsigned i) const {
    const int nibble = (bytes[i / 2] >> (4 * (i % 2))) & 0xF;
    return nibble >= 8 ? nibble - 16 : nibble;
  }
};

template <unsigned Elems, typename T>
vector<T, Elems> load_v(const T *ptr) {
  host::check_aligned(ptr, sizeof(T) * Elems, "load_v");
  vector<T, Elems> v;
  std::memcpy(v.data.data(), ptr, sizeof(T) * Elems);
  return v;
}

template <typename T, unsigned Elems>
T *store_v(T *ptr, const vector<T, Elems> &v) {
  host::check_aligned(ptr, sizeof(T) * Elems, "store_v");
  std::memcpy(ptr, v.data.data(), sizeof(T) * Elems);
  return ptr;
}

template <typename Tag, unsigned Elems>
struct accum;

namespace host {
// An integer accumulator's SRS into T (accum.hpp to_vector): shift-round under the rounding mode, then
// narrowed under the saturation mode; the shift range is the SRS's, 0..59.
template <typename T, std::size_t N>
vector<T, N> srs(const std::array<std::int64_t, N> &lanes, int shift) {
  if (shift < 0 || shift > 59) fail("a down-shift (SRS) outside 0..59");
  vector<T, N> out;
  for (std::size_t i = 0; i < N; ++i) out[i] = saturate<T>(shift_round(lanes[i], shift & 63, rounding), saturation);
  return out;
}
}  // namespace host

// acc64 lanes (an int16 mmul with a 64-bit accumulator; int32 x int32 products): exact int64 values.
// From int32 / int16 vectors (explicit, with an up-shift 0..63), to int32 / int16 by SRS.
template <unsigned Elems>
struct accum<acc64, Elems> {
  static constexpr unsigned size() { return Elems; }
  std::array<std::int64_t, Elems> acc{};

  accum() = default;
  template <typename T>
  explicit accum(const vector<T, Elems> &v, int shift = 0) {
    // UPS into acc64 of int16 / int32 lanes (aie_api @2b7eedf detail/aie2/accum.hpp get_ups, lines 810-830); the shift's
    // range is unpublished: 0..63 assumed (what an int64 lane can take)
    static_assert(std::is_same_v<T, int32> || std::is_same_v<T, int16>, "acc64 loads int32 or int16 vectors");
    if (shift < 0 || shift > 63) host::fail("an up-shift (UPS) outside 0..63");
    for (unsigned i = 0; i < Elems; ++i) acc[i] = static_cast<std::int64_t>(v[i]) * (std::int64_t{1} << (shift & 63));
  }

  template <typename T>
  vector<T, Elems> to_vector(int shift = 0) const {
    // SRS of acc64 into int16 / int32 (aie_api @2b7eedf detail/aie2/accum.hpp get_srs, line 862)
    static_assert(std::is_same_v<T, int32> || std::is_same_v<T, int16>, "acc64 stores int32 or int16 (SRS)");
    return host::srs<T>(acc, shift);
  }

  // Lanes [idx ElemsOut, (idx + 1) ElemsOut) (accum.hpp extract: idx counts sub-accumulators).
  template <unsigned ElemsOut>
  accum<acc64, ElemsOut> extract(unsigned idx) const {
    accum<acc64, ElemsOut> out;
    host::extract_part(acc, out.acc, idx, "aie::accum::extract past the accumulator's end");
    return out;
  }
};

// acc32 lanes: 32-bit values (one that leaves them fails, as in mmul). From an int32 vector with shift 0
// only (REQUIRES in detail/aie2*/accum.hpp); to int8 / int16 by SRS, to int32 by a plain cast that
// ignores the shift (as mmul's).
template <unsigned Elems>
struct accum<acc32, Elems> {
  static constexpr unsigned size() { return Elems; }
  std::array<std::int64_t, Elems> acc{};

  accum() = default;
  explicit accum(const vector<int32, Elems> &v, int shift = 0) {
    if (shift != 0)
      host::fail("an int32 vector loads into acc32 only with shift 0 (REQUIRES(shift == 0): chess refuses it, "
                 "Peano drops the shift)");
    for (unsigned i = 0; i < Elems; ++i) acc[i] = v[i];
  }

  template <typename T>
  vector<T, Elems> to_vector(int shift = 0) const {
    static_assert(std::is_same_v<T, int8> || std::is_same_v<T, int16> || std::is_same_v<T, int32>,
                  "acc32 stores int8, int16 or int32");
    if constexpr (std::is_same_v<T, int32>) {
      if (shift != 0) host::fail("acc32 is stored as int32 with a plain cast that ignores the shift");
      vector<int32, Elems> out;
      for (unsigned i = 0; i < Elems; ++i) out[i] = static_cast<int32>(acc[i]);
      return out;
    } else {
      return host::srs<T>(acc, shift);
    }
  }
};

// Reinterpret an accumulator as a vector (aie::vector_cast<int32>(acc)): lane i -> words host::acc64_word(i, 0 | 1).
template <typename DstT, unsigned Elems>
vector<DstT, 2 * Elems> vector_cast(const accum<acc64, Elems> &a) {
  static_assert(std::is_same_v<DstT, int32>, "the host models vector_cast of acc64 lanes to int32 pairs only");
  vector<int32, 2 * Elems> v;
  for (unsigned i = 0; i < Elems; ++i) {
    const std::uint64_t bits = static_cast<std::uint64_t>(a.acc[i]);
    v[host::acc64_word(i, 0, Elems)] = static_cast<int32>(static_cast<std::uint32_t>(bits));
    v[host::acc64_word(i, 1, Elems)] = static_cast<int32>(static_cast<std::uint32_t>(bits >> 32));
  }
  return v;
}

// Reinterpret a vector as an accumulator (aie::vector_cast<acc64>(v)): words 2i, 2i + 1 -> lane i;
// or bytes as int4 values (aie::vector_cast<int4>(v)): byte i -> lanes 2i (low nibble), 2i + 1.
template <typename Dst, typename T, unsigned Elems>
auto vector_cast(const vector<T, Elems> &v) {
  if constexpr (std::is_same_v<Dst, int4>) {
    static_assert(std::is_same_v<T, uint8> || std::is_same_v<T, int8>,
                  "the host models vector_cast to int4 from bytes (uint8 / int8 vectors) only");
    vector<int4, 2 * Elems> out;
    std::memcpy(out.bytes.data(), v.data.data(), Elems);
    return out;
  } else if constexpr (std::is_same_v<Dst, bfloat16>) {
    static_assert(std::is_same_v<T, int16>, "the host models vector_cast to bfloat16 from int16 vectors only");
    vector<bfloat16, Elems> out;  // the same 16 bits per lane, read as bf16 (W4A16's bias trick)
    for (unsigned i = 0; i < Elems; ++i) out[i] = bfloat16::from_bits(static_cast<std::uint16_t>(v[i]));
    return out;
  } else {
    static_assert(std::is_same_v<Dst, acc64> && std::is_same_v<T, int32> && Elems % 2 == 0,
                  "the host models vector_cast of int32 pairs to acc64 lanes and of bytes to int4 only");
    accum<acc64, Elems / 2> a;
    for (unsigned i = 0; i < Elems / 2; ++i) {
      const std::uint64_t lo = static_cast<std::uint32_t>(v[host::acc64_word(i, 0, Elems / 2)]);
      const std::uint64_t hi = static_cast<std::uint32_t>(v[host::acc64_word(i, 1, Elems / 2)]);
      a.acc[i] = static_cast<std::int64_t>(lo | (hi << 32));
    }
    return a;
  }
}

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
  if (Row == 0 || Col == 0 || Row * Col != Elems) {  // REQUIRES_MSG in aie_api's aie::transpose
    char buf[160];
    std::snprintf(buf, sizeof buf, "aie::transpose of a %u-element vector as %u x %u: the AIE API requires "
                  "Row * Col == Elems, Row > 0 and Col > 0", Elems, Row, Col);
    host::fail(buf);  // aie_api @2b7eedf aie.hpp lines 2891-2892
    return v;
  }
  vector<T, Elems> out;
  for (unsigned r = 0; r < Row; ++r)
    for (unsigned c = 0; c < Col; ++c) out[c * Row + r] = v[r * Col + c];
  return out;
}

template <typename T>
constexpr bool is_float_elem_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, float>;

// Accumulator bits of aie::mmul<M, K, N, A, B> for a dense B on this target; 0: no such shape
// (aie_api 2026.1 detail/aie2*/mmul_8_8.hpp, mmul_16_16.hpp, mmul_bf16_bf16.hpp; int8 x int4:
// detail/aie2/mmul_8_4.hpp 4x16x8, 8x16x8, 4x32x8 and detail/aie2p/mmul_8_4.hpp 4x16x16, acc32 only).
template <unsigned M, unsigned K, unsigned N, typename A, typename B = A>
constexpr unsigned mmul_acc_bits() {
  constexpr auto is = [](unsigned m, unsigned k, unsigned n) { return M == m && K == k && N == n; };
  if constexpr (std::is_same_v<B, int4>) {
    if constexpr (!std::is_same_v<A, int8>) return 0;  // 8b x 4b only (no 16b x 4b, no bf16 x 4b)
    else if constexpr (!host::aie2p) return (is(4, 16, 8) || is(8, 16, 8) || is(4, 32, 8)) ? 32 : 0;
    else return is(4, 16, 16) ? 32 : 0;
  } else if constexpr (!std::is_same_v<A, B>) {
    return 0;  // gemm_gen's kernels multiply equal types otherwise
  } else if constexpr (std::is_same_v<A, int8>) {
    if constexpr (!host::aie2p) return (is(4, 8, 8) || is(2, 8, 8) || is(8, 8, 8) || is(4, 16, 8)) ? 32 : 0;
    else return (is(8, 8, 8) || is(4, 8, 8)) ? 32 : 0;
  } else if constexpr (std::is_same_v<A, int16>) {
    if constexpr (!host::aie2p) return (is(4, 4, 4) || is(2, 4, 8)) ? 64 : is(4, 2, 8) ? 32 : 0;
    else return is(4, 4, 8) ? 64 : is(8, 1, 8) ? 32 : 0;  // 4x8x8: a sparse B only
  } else if constexpr (std::is_same_v<A, bfloat16>) {
    if constexpr (!host::aie2p)  // 4x16x8, 4x16x4: a sparse B only
      return (is(4, 8, 4) || is(8, 8, 4) || is(4, 8, 8) || is(8, 8, 8) || is(8, 1, 8)) ? 32 : 0;
    else return (is(4, 8, 8) || is(8, 8, 4) || is(4, 8, 4) || is(8, 8, 8) || is(8, 1, 8)) ? 32 : 0;
  } else {
    return 0;
  }
}

// C (M x N) = A (M x K) * B (K x N) on row-major blocks; the result stays in the accumulator.
template <unsigned M_Elems, unsigned K_Elems, unsigned N_Elems, typename TypeA, typename TypeB = TypeA,
          typename AccumTag = accauto>
struct mmul {
  static constexpr unsigned M = M_Elems, K = K_Elems, N = N_Elems;
  static constexpr unsigned size_A = M * K, size_B = K * N, size_C = M * N;
  static constexpr unsigned acc_bits = mmul_acc_bits<M, K, N, TypeA, TypeB>();
  // the host models equal types and int8 x int4 only (the shapes gemm_gen renders)
  static_assert(std::is_same_v<TypeA, TypeB> || std::is_same_v<TypeB, int4>,
                "aie::mmul: gemm_gen's kernels multiply equal types, or int8 by int4");
  static_assert(!std::is_same_v<TypeB, int4> || !std::is_same_v<AccumTag, acc64>,
                "aie::mmul: 8b x 4b shapes accumulate in acc32 only (mmul_8_4.hpp)");
  static_assert(acc_bits != 0, "aie::mmul: the AIE API has no such shape for a dense B on this target");
  static constexpr bool is_float = is_float_elem_v<TypeA>;
  static_assert(!std::is_same_v<AccumTag, acc64> || acc_bits == 64 || is_float,
                "aie::mmul: this shape supports acc32 only (int8, AIE2 int16 4x2x8, AIE2P int16 8x1x8)");
  static_assert(is_float == std::is_same_v<AccumTag, accfloat> || std::is_same_v<AccumTag, accauto>,
                "aie::mmul: accfloat goes with bf16, integer tags with integers");
#if AIE_API_EMULATE_BFLOAT16_MMUL_WITH_BFP16
  // the API's bfp16 emulation: AIE2P bf16 4x8x8 and 8x8x8 only (aie2p/mmul_bf16_bf16.hpp)
  static constexpr bool via_bfp16 = host::aie2p && std::is_same_v<TypeA, bfloat16> && K == 8 && N == 8 &&
                                    (M == 4 || M == 8);
#else
  static constexpr bool via_bfp16 = false;
#endif
  using acc_elem = std::conditional_t<is_float, double, std::int64_t>;
  // Products one hardware mac adds per lane before its fp32 rounding (-DGG_HOST_FP32_PER_MAC rounds after each):
  // AIE2's bf16 mmul and the bfp16 emulation are one intrinsic per lane row, adding all K; AIE2P's plain bf16
  // mmul is emulated with elementwise macs, one product each, in K order (aie_api @2b7eedf
  // detail/aie2p/mmul_bf16_bf16.hpp, detail/aie2p/emulated_mmul_intrinsics.hpp: mac_elem_32 x 8).
  // gemm_gen/numerics.fused_mac_products is the same fact for the reference.
  static constexpr unsigned fused_k = (is_float && host::aie2p && !via_bfp16) ? 1 : K;

  std::array<acc_elem, size_C> acc{};

  mmul() = default;

  // The accumulator itself (acc64 shapes: the lanes a vector_cast round trip keeps whole).
  // aie_api @2b7eedf aie.hpp: mmul(const accum_type &acc), "initialized from the given accumulator in row-major order"
  explicit mmul(const accum<acc64, size_C> &a) {
    static_assert(acc_bits == 64 && !is_float, "aie::mmul: an accum<acc64> builds a 64-bit accumulator mmul only");
    for (unsigned i = 0; i < size_C; ++i) acc[i] = a.acc[i];
  }

  // aie_api @2b7eedf detail/mmul.hpp C_block::to_accum (row-major; C_block_interleave_cols permutes the hardware's lanes back)
  accum<acc64, size_C> to_accum() const {
    static_assert(acc_bits == 64 && !is_float, "the host models to_accum() of acc64 mmuls only");
    accum<acc64, size_C> a;
    for (unsigned i = 0; i < size_C; ++i) a.acc[i] = acc[i];
    return a;
  }

  // Load the accumulator from a vector; integers are shifted up by `shift` bits (UPS): int32 into acc32 only
  // with shift 0 (REQUIRES(shift == 0): aie_api @2b7eedf detail/aie2/accum.hpp lines 833-835, detail/aie2p/accum.hpp
  // lines 1033-1037); the UPS range is unpublished (0..63 assumed).
  template <typename T>
  mmul(const vector<T, size_C> &v, int shift = 0) {
    if constexpr (!is_float) {
      if (acc_bits == 32 && std::is_same_v<T, int32> && shift != 0)
        host::fail("an int32 vector loads into acc32 only with shift 0 (REQUIRES(shift == 0): chess refuses it, "
                   "Peano drops the shift)");
      if (shift < 0 || shift > 63) host::fail("an up-shift (UPS) outside 0..63");
    }
    for (unsigned i = 0; i < size_C; ++i) {
      if constexpr (is_float) {
        if (host::subnormal(static_cast<float>(v[i]))) host::fail("a subnormal C value (flushing is unpublished)");
        acc[i] = static_cast<double>(static_cast<float>(v[i]));
      } else {
        acc[i] = static_cast<std::int64_t>(v[i]) * (std::int64_t{1} << (shift & 63));
        check_lane(acc[i], "an up-shifted C value");
      }
    }
  }

  void mac(const vector<TypeA, size_A> &a, const vector<TypeB, size_B> &b) {
    if constexpr (is_float) {
      for (unsigned i = 0; i < size_A; ++i)
        if (host::subnormal(static_cast<float>(a[i]))) host::fail("a subnormal A value (flushing is unpublished)");
      for (unsigned i = 0; i < size_B; ++i)
        if (host::subnormal(static_cast<float>(b[i]))) host::fail("a subnormal B value (flushing is unpublished)");
    }
    if constexpr (via_bfp16) {
      std::array<float, size_A> fa;
      std::array<float, size_B> fb;
      for (unsigned i = 0; i < size_A; ++i) fa[i] = static_cast<float>(a[i]);
      for (unsigned i = 0; i < size_B; ++i) fb[i] = static_cast<float>(b[i]);
      std::array<double, size_A> qa;
      std::array<double, size_B> qb;
      for (unsigned i = 0; i < M; ++i)  // rows of A: 8 values along K
        host::bfp16_block(&fa[i * K], 1, &qa[i * K], 1, host::rounding);
      for (unsigned j = 0; j < N; ++j)  // columns of B: 8 values along K
        host::bfp16_block(&fb[j], N, &qb[j], N, host::rounding);
      for (unsigned i = 0; i < M; ++i)
        for (unsigned j = 0; j < N; ++j) {
          for (unsigned p = 0; p < K; ++p) acc[i * N + j] += qa[i * K + p] * qb[p * N + j];
          acc[i * N + j] = host::per_mac(acc[i * N + j]);
        }
      return;
    }
    for (unsigned i = 0; i < M; ++i)
      for (unsigned j = 0; j < N; ++j) {
        for (unsigned p = 0; p < K; ++p) {
          acc[i * N + j] += product(a[i * K + p], b[p * N + j]);
          if constexpr (is_float)
            if ((p + 1) % fused_k == 0) acc[i * N + j] = host::per_mac(acc[i * N + j]);
        }
        if constexpr (!is_float) check_lane(acc[i * N + j], "a mac");
      }
  }

  // Store the accumulator: fp32 (rounded to nearest even), then bf16 under the rounding mode;
  // integers shift-round-saturate (SRS) under the rounding and saturation modes, except acc32 stored
  // as int32: a plain cast, which the API does without any shift (aie_api @2b7eedf detail/aie2/accum.hpp line 963:
  // `(v16int32) acc`). SRS shifts up to max_shift = 59 on AIE2 / AIE2P (aie_api @2b7eedf detail/shift.hpp line 25).
  // Float outputs from accfloat, integers from integer accumulators (aie_api @2b7eedf accum.hpp to_vector).
  template <typename T>
  vector<T, size_C> to_vector(int shift = 0) const {
    vector<T, size_C> out;
    if constexpr (!is_float) {
      if (acc_bits == 32 && std::is_same_v<T, int32> && shift != 0)
        host::fail("acc32 is stored as int32 with a plain cast that ignores the shift");
      if (shift < 0 || shift > 59) host::fail("a down-shift (SRS) outside 0..59");
    }
    for (unsigned i = 0; i < size_C; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        static_assert(is_float, "float output from an integer accumulator");
        out[i] = static_cast<float>(acc[i]);
      } else if constexpr (std::is_same_v<T, bfloat16>) {
        static_assert(is_float, "bfloat16 output from an integer accumulator");
        out[i] = bfloat16::from_bits(host::f32_to_bf16_bits(static_cast<float>(acc[i]), host::rounding));
      } else if constexpr (std::is_same_v<T, int32>) {
        static_assert(!is_float, "integer output from an integer accumulator");
        out[i] = acc_bits == 32 ? static_cast<int32>(acc[i])
                                : host::saturate<T>(host::shift_round(acc[i], shift, host::rounding), host::saturation);
      } else {
        static_assert(!is_float && std::is_integral_v<T>, "integer output from an integer accumulator");
        out[i] = host::saturate<T>(host::shift_round(acc[i], shift & 63, host::rounding), host::saturation);
      }
    }
    return out;
  }

 private:
  static void check_lane(std::int64_t x, const char *what) {
    const std::int64_t hi = (acc_bits >= 64) ? std::numeric_limits<std::int64_t>::max()
                                             : (std::int64_t{1} << (acc_bits - 1)) - 1;
    if (x > hi || x < -hi - 1) host::fail(std::string(what) + " leaves the acc32 lanes (overflow is unpublished)");
  }

  template <typename BValue>  // a B lane: TypeB, or int for an int4 lane
  static acc_elem product(const TypeA &a, const BValue &b) {
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
template <typename T, unsigned Elems, aie_dm_resource Resource = aie_dm_resource::none>
class block_vector_input_buffer_stream;

template <aie_dm_resource Resource>
class block_vector_input_buffer_stream<bfp16ebs8, 64, Resource> {
 public:
  using value_type = block_vector<bfp16ebs8, 64>;

  explicit block_vector_input_buffer_stream(const bfp16ebs8 *ptr) : ptr_(reinterpret_cast<const std::uint8_t *>(ptr)) {}

  // The stream reads ahead in 512-bit fills and seek() drops them, moving the read-ahead pointer:
  // only a seek before the first pop is relative to the logical position (array_helpers.hpp).
  void seek(int n) {
    if (pops_) host::fail("seek() after a pop on a block-vector input stream (use pop_seek)");
    move(n);
    count_set();
  }
  value_type pop() {
    fifo_.use();
    fill_if_needed();
    value_type v;
    std::memcpy(v.bytes.data(), ptr_, value_type::memory_bytes());
    ptr_ += value_type::memory_bytes();
    ++pops_;
    ++host::stream_pops;
    load_count_ = (load_count_ + 1) % FILL_RATIO;
    return v;
  }
  value_type pop_seek(int n) {  // pop, then move n block vectors inside the same fifo operation
    value_type v = pop();
    move(n);
    count_set();  // load_count_ = 0: a constant again
    return v;
  }
  block_vector_input_buffer_stream &operator>>(value_type &v) {
    v = pop();
    return *this;
  }

 protected:
  const std::uint8_t *position() const { return ptr_; }

 private:
  void move(int n) { ptr_ += static_cast<std::ptrdiff_t>(n) * value_type::memory_bytes(); }

  // ld_fill_ratio of array_helpers.hpp for a 576-bit tile: 512 / (576 % 512)
  static constexpr unsigned FILL_RATIO = 512 / (8 * value_type::memory_bytes() % 512);

  void count_set() {  // load_count_ set to a constant (0): known at compile time again
    load_count_ = 0;
    set_epoch_ = host::loop_epoch;
    popped_since_set_ = false;
  }
  // pop()'s `if (!chess_manifest(load_count_ != 0)) fill(...)`: under Peano a count that is not a compile-time
  // constant makes the condition true (see host::loop_epoch)
  void fill_if_needed() {
#if defined(GG_HOST_PEANO)
    const bool constant = !(popped_since_set_ && host::loop_epoch != set_epoch_);
    if (constant && !popped_since_set_) set_epoch_ = host::loop_epoch;  // no pop yet: still the set value
#else
    const bool constant = true;
#endif
    if (!constant || load_count_ == 0) ++host::stream_fills;
    popped_since_set_ = true;
  }

  const std::uint8_t *ptr_;
  unsigned pops_ = 0;
  unsigned load_count_ = 0;
  unsigned long long set_epoch_ = host::loop_epoch;  // the loop iteration the count was last set in
  bool popped_since_set_ = false;
  host::fifo_hold<false> fifo_;  // a load FIFO from the first pop on
};

// The restrict input stream (aie_api aie.hpp: block_vector_restrict_input_buffer_stream, `Restrict=true`, beside
// the plain one under AIE_API_ML_VERSION >= 210): its reads go through a restrict pointer, so for as long as it
// lives nothing may write what it reads by any other path (C11 6.7.3.1; the compiler may move its loads past
// such a write). The host keeps each popped tile and refuses, at the next pop and when the stream ends, a tile
// whose bytes changed under it.
template <typename T, unsigned Elems, aie_dm_resource Resource = aie_dm_resource::none>
class block_vector_restrict_input_buffer_stream;

template <aie_dm_resource Resource>
class block_vector_restrict_input_buffer_stream<bfp16ebs8, 64, Resource>
    : public block_vector_input_buffer_stream<bfp16ebs8, 64, Resource> {
  using base = block_vector_input_buffer_stream<bfp16ebs8, 64, Resource>;

 public:
  using value_type = typename base::value_type;
  explicit block_vector_restrict_input_buffer_stream(const bfp16ebs8 *ptr) : base(ptr) {}
  block_vector_restrict_input_buffer_stream(const block_vector_restrict_input_buffer_stream &) = default;
  ~block_vector_restrict_input_buffer_stream() { check(); }

  value_type pop() {
    check();
    const std::uint8_t *at = this->position();
    value_type v = base::pop();
    read_.push_back({at, v});
    return v;
  }
  block_vector_restrict_input_buffer_stream &operator>>(value_type &v) {
    v = pop();
    return *this;
  }

 private:
  void check() const {
    for (const auto &[at, v] : read_)
      if (std::memcmp(at, v.bytes.data(), value_type::memory_bytes()) != 0)
        // aie_api's aie.hpp: block_vector_restrict_input_buffer_stream is detail::block_vector_input_buffer_stream<..., Restrict=true>
        // (stored copy id 56708560495): its pointer is restrict, so no other path may write what it reads while it lives
        host::fail("a tile read through a restrict block-vector input stream was written by another path while "
                   "the stream lives (restrict: end the stream first, or use the plain stream)");
  }
  std::vector<std::pair<const std::uint8_t *, value_type>> read_;
};

// Writes whole block vectors to memory in order (each push stores its 72 bytes at once).
template <typename T, unsigned Elems, aie_dm_resource Resource = aie_dm_resource::none>
class block_vector_output_buffer_stream;

template <aie_dm_resource Resource>
class block_vector_output_buffer_stream<bfp16ebs8, 64, Resource> {
 public:
  using value_type = block_vector<bfp16ebs8, 64>;

  explicit block_vector_output_buffer_stream(bfp16ebs8 *ptr) : ptr_(reinterpret_cast<std::uint8_t *>(ptr)) {}

  // seek() resets the FIFO state (state_.pos = 0: aie_api @2b7eedf detail/aie2p/array_helpers.hpp lines 160-168)
  void seek(int n) {  // like the input side: exact only before the first push
    if (pushes_) host::fail("seek() after a push on a block-vector output stream");
    ptr_ += static_cast<std::ptrdiff_t>(n) * value_type::memory_bytes();
  }
  void push(const value_type &v) {
    fifo_.use();
    std::memcpy(ptr_, v.bytes.data(), value_type::memory_bytes());
    ptr_ += value_type::memory_bytes();
    ++pushes_;
  }
  block_vector_output_buffer_stream &operator<<(const value_type &v) {
    push(v);
    return *this;
  }

 private:
  std::uint8_t *ptr_;
  unsigned pushes_ = 0;
  host::fifo_hold<true> fifo_;  // the store FIFO from the first push on
};

// The fp32 accumulator (accfloat lanes). Lanes hold doubles: loads are exact (bf16, fp32 and bfp16
// values all are); in the bfp16 datapath products of two bfp16 values are exact and sums stay exact for
// the tests' inputs, so a kernel call is "the exact sum rounded once to fp32" (gemm_gen/numerics.py).
// The elementwise operations (aie::add, aie::mul, linear_approx below) are fp32 operations: each lane
// is rounded to fp32 (nearest even) once per operation, as gemm_gen/epilogue.py assumes.
template <unsigned Elems>
struct accum<accfloat, Elems> {
  static constexpr unsigned size() { return Elems; }

  std::array<double, Elems> acc{};

  accum() = default;
  template <typename T>
  explicit accum(const vector<T, Elems> &v) {  // explicit, as in the AIE API (accum.hpp)
    static_assert(std::is_same_v<T, bfloat16> || std::is_same_v<T, float>, "accfloat loads bf16 or float");
    for (unsigned i = 0; i < Elems; ++i) acc[i] = static_cast<double>(static_cast<float>(v[i]));
  }
  explicit accum(const block_vector<bfp16ebs8, 64> &v) requires(Elems == 64) {  // explicit, as in the AIE API
    for (unsigned i = 0; i < 64; ++i) acc[i] = v.host_value(i);
  }

  // fp32 (rounded to nearest even), then: float as is; bfloat16 under the rounding mode; bfp16ebs8
  // in blocks of 8 consecutive lanes under the rounding mode (bfp16.encode).
  template <typename T>
  auto to_vector() const {
    std::array<float, Elems> f;
    for (unsigned i = 0; i < Elems; ++i) f[i] = static_cast<float>(acc[i]);
    if constexpr (std::is_same_v<T, bfp16ebs8>) {
      static_assert(Elems == 64, "accfloat stores bfp16ebs8 as 8 x 8 tiles (64 lanes)");
      block_vector<bfp16ebs8, 64> out;
      for (unsigned b = 0; b < 8; ++b)
        host::bfp16_encode(&f[b * host::BFP16_BLOCK], 1, &out.bytes[b * host::BFP16_BLOCK_BYTES], host::rounding);
      return out;
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      vector<bfloat16, Elems> out;
      for (unsigned i = 0; i < Elems; ++i) out[i] = bfloat16::from_bits(host::f32_to_bf16_bits(f[i], host::rounding));
      return out;
    } else {
      static_assert(std::is_same_v<T, float>, "accfloat stores bfp16ebs8, bfloat16 or float");
      vector<float, Elems> out;
      for (unsigned i = 0; i < Elems; ++i) out[i] = f[i];
      return out;
    }
  }
};

// ---- elementwise operations of the fused epilogues (gemm_gen/epilogue.py; aie.hpp, UG1529) ----------
namespace host {
inline double fp32(double x) { return static_cast<double>(static_cast<float>(x)); }  // one fp32 rounding

inline void check_normal_bf16(const bfloat16 &x, const char *what) {
  if (subnormal(static_cast<float>(x))) fail(std::string("a subnormal bf16 operand of ") + what + " (flushing is unpublished)");
}
}  // namespace host

template <typename T, unsigned Elems>
vector<T, Elems> broadcast(T value) {
  vector<T, Elems> v;
  v.data.fill(value);
  return v;
}

// aie::concat of vectors of one type: their lanes one after another (aie_api @2b7eedf aie.hpp line 1039:
// requires((is_same_vector_v<Vec, Vectors> && ...))).
template <typename T, unsigned Elems, typename... Rest>
vector<T, Elems * (1 + sizeof...(Rest))> concat(const vector<T, Elems> &first, const Rest &...rest) {
  static_assert((std::is_same_v<Rest, vector<T, Elems>> && ...), "aie::concat takes vectors of one type and size");
  vector<T, Elems * (1 + sizeof...(Rest))> out;
  unsigned i = 0;
  out.insert(i++, first);
  (out.insert(i++, rest), ...);
  return out;
}

// acc + v (add_accum.hpp: an accfloat plus a float or bf16 vector, one fp32 rounding; an acc64 plus an
// int32 vector, exact).
template <typename T, unsigned Elems>
accum<accfloat, Elems> add(const accum<accfloat, Elems> &a, const vector<T, Elems> &v) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bfloat16>, "accfloat adds float or bf16 vectors");
  accum<accfloat, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    const float x = static_cast<float>(v[i]);
    if (host::subnormal(x)) host::fail("a subnormal operand of an accfloat add (flushing is unpublished)");
    out.acc[i] = host::fp32(a.acc[i] + static_cast<double>(x));  // exact in double, then one fp32 rounding
  }
  return out;
}

template <unsigned Elems>
accum<acc64, Elems> add(const accum<acc64, Elems> &a, const vector<int32, Elems> &v) {
  accum<acc64, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) out.acc[i] = a.acc[i] + v[i];  // |acc| < 2^62 here: no wrap
  return out;
}

// aie::mul of two vectors (mul.hpp): bf16 x bf16 -> accfloat (the product exact, then one fp32 rounding:
// only an overflow or underflow rounds); int32 x int32 -> acc64 (exact; mul_acc64.hpp).
template <unsigned Elems>
accum<accfloat, Elems> mul(const vector<bfloat16, Elems> &a, const vector<bfloat16, Elems> &b) {
  accum<accfloat, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    host::check_normal_bf16(a[i], "aie::mul");
    host::check_normal_bf16(b[i], "aie::mul");
    out.acc[i] = host::fp32(static_cast<double>(static_cast<float>(a[i])) * static_cast<double>(static_cast<float>(b[i])));
  }
  return out;
}

// aie::msc(acc, a, b) (mul.hpp, MulMacroOp::Sub): acc - a b for bf16 a, b into accfloat, the product exact and
// the difference rounded once to fp32.
template <unsigned Elems>
accum<accfloat, Elems> msc(const accum<accfloat, Elems> &acc, const vector<bfloat16, Elems> &a,
                           const vector<bfloat16, Elems> &b) {
  accum<accfloat, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    host::check_normal_bf16(a[i], "aie::msc");
    host::check_normal_bf16(b[i], "aie::msc");
    out.acc[i] = host::fp32(acc.acc[i] - static_cast<double>(static_cast<float>(a[i])) *
                                             static_cast<double>(static_cast<float>(b[i])));
  }
  return out;
}

template <unsigned Elems>
accum<acc64, Elems> mul(const vector<int32, Elems> &a, const vector<int32, Elems> &b) {
  accum<acc64, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) out.acc[i] = static_cast<std::int64_t>(a[i]) * static_cast<std::int64_t>(b[i]);
  return out;
}

// aie::max / aie::min of two vectors or a vector and a scalar (max_min.hpp): int32 and bf16 (compared as
// values; a NaN lane fails: what the core's max does with it is unpublished). On equal values (+0, -0)
// the second operand, as NumPy's maximum / minimum, which gemm_gen/epilogue.py uses (the core's choice
// between signed zeros is unpublished).
namespace host {
template <typename T>
double value(const T &x) {
  if constexpr (std::is_same_v<T, bfloat16>) return static_cast<double>(static_cast<float>(x));
  else return static_cast<double>(x);
}

template <bool Max, typename T, unsigned Elems>
vector<T, Elems> max_min(const vector<T, Elems> &a, const vector<T, Elems> &b) {
  static_assert(std::is_same_v<T, int32> || std::is_same_v<T, bfloat16>, "the host models int32 and bf16 max / min");
  vector<T, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    const double x = value(a[i]), y = value(b[i]);
    if (std::isnan(x) || std::isnan(y)) fail("a NaN operand of aie::max / aie::min (the core's result is unpublished)");
    out[i] = (Max ? x > y : x < y) ? a[i] : b[i];
  }
  return out;
}
}  // namespace host

template <typename T, unsigned Elems>
vector<T, Elems> max(const vector<T, Elems> &a, const vector<T, Elems> &b) { return host::max_min<true>(a, b); }
template <typename T, unsigned Elems>
vector<T, Elems> max(const vector<T, Elems> &a, T b) { return host::max_min<true>(a, broadcast<T, Elems>(b)); }
template <typename T, unsigned Elems>
vector<T, Elems> min(const vector<T, Elems> &a, const vector<T, Elems> &b) { return host::max_min<false>(a, b); }
template <typename T, unsigned Elems>
vector<T, Elems> min(const vector<T, Elems> &a, T b) { return host::max_min<false>(a, broadcast<T, Elems>(b)); }

// ---- the LUT tanh (templates/mm_epilogue.cc.j2 tanh_lut; gemm_gen/epilogue.py tanh_lut) ------------------------
// The kernel reads getTanhBf16's table as mlir-aie's rewritten getTanhBf16 does (aie_runtime_lib/AIE2/
// lut_based_ops.h, stored versions id 69788820702 and 69055850465: aie::linear_approx<bfloat16, lut<4, float,
// bfloat16>> written out, because the object, rebuilt on every call, escapes through its scratchpad member):
// aie::to_fixed_floor, a 4-way table load, two shuffles and one mac. No aie::lut or aie::linear_approx is modelled
// here: a kernel that builds one fails to compile. Modelled, each with what it rests on:
// - the core's data memory: host::l1, 64 KiB in 4 banks of 16 KiB (AIETargetModel getNumBanks; mlir-aie's lit
//   test test/aiecc/lut_runtime_lib_banks.mlir: "a bank is 0x4000"; gemm_gen/l1_banks.py). A test places the
//   tables in it where the L1 plan puts them and registers each (host::l1_place). A table anywhere else has no
//   bank the host knows, so a lookup of it fails.
// - aie::to_fixed_floor<int32>(v, shift) (aie_api 2026.1 aie.hpp l.7522-7540, "floored fixed-point values",
//   ::bfloat16_to_int per 16 lanes, detail/aie2/elementary.hpp l.224-248): floor(v 2^shift); a NaN, a subnormal
//   or a value past int32 fails.
// - load_lut_2x_float(ab, cd, index, o0, o1): lane i's byte index b reads entry b / 16 (the low 4 bits unused,
//   as linear_approx's 16 bytes per entry, detail/aie2/linear_approx.hpp l.361-371) in groups of 128 bits on
//   AIE2 and 256 bits on AIE2P, each group stored twice (gemm_gen/epilogue.lut_entry; hw/devices.py
//   lut_copy_bits: UG1603, mlir-aie PR #2189); it reads the pair and its repeat in ab and in cd, and which lane
//   reads which copy is unpublished, so the four must agree (a table in the other target's layout fails). ab
//   and cd must lie in different banks: aie::lut<4> needs its two tables in two banks, and nothing but the
//   placement enforces it (mlir-aie issue #3737; the check of PR #3746 is not in 1.4.3). Every read must fall
//   inside its table (a registered buffer: an unclamped index reads past it), the tables aligned to
//   aie::vector_decl_align (aie_api detail/ld_st.hpp: 32 bytes on AIE2, 64 on AIE2P; mlir-aie PR #3045), and
//   every slope bf16-valued (the mac below multiplies the slope's high 16 bits). o0 gets lanes 0-7's pairs, o1
//   lanes 8-15's, each pair as 4 bf16 lanes: slope low half, slope high half, offset low half, offset high half.
// - ::shuffle(a, b, T32_16x2_hi): the odd 32-bit words of (a, b), the offsets; ::shuffle(a, b, T16_16x4_lo): the
//   first 16-bit lane of each group of 4, then the second (the slopes' low halves, then their high halves, the
//   bf16 slopes). The two modes aie_api's linear_approx uses (l.405-406, 415-416); any other mode fails.
// - mac_elem_16_2(a, b, acc) (AIE2 only): lane i = acc[i] + a[i] b[i] + a[i + 16] b[i + 16]; mac_elem_32(a, b, acc)
//   (AIE2P only): lane i = acc[i] + a[i] b[i]. The lane pairing is what linear_approx relies on (its input in the
//   upper half of a zeroed vector, l.404-422); each product exact, one fp32 rounding of the sum.
namespace host {
constexpr std::size_t l1_bytes = 64 * 1024, l1_banks = 4, l1_bank_bytes = l1_bytes / l1_banks;
constexpr unsigned lut_copy_bits = aie2p ? 256 : 128;  // gemm_gen/hw/devices.py Device.lut_copy_bits
constexpr std::size_t lut_align = aie2p ? 64 : 32;      // aie::vector_decl_align
alignas(64) inline unsigned char l1[l1_bytes];
struct L1Buffer {
  std::size_t at, bytes;
};
inline std::array<L1Buffer, 16> l1_buffers{};
inline std::size_t l1_count = 0;

// Register bytes [at, at + bytes) of host::l1 as one buffer (a table the kernel reads); returns its address.
inline unsigned char *l1_place(std::size_t at, std::size_t bytes) {
  if (at + bytes > l1_bytes || l1_count == l1_buffers.size()) {
    fail("host::l1_place: a buffer past the modelled L1 (or too many)");
    return l1;
  }
  l1_buffers[l1_count++] = {at, bytes};
  return l1 + at;
}
inline void l1_reset() { l1_count = 0; }

// The registered buffer holding p, or nullptr.
inline const L1Buffer *l1_buffer(const void *p) {
  const auto *b = static_cast<const unsigned char *>(p);
  if (b < l1 || b >= l1 + l1_bytes) return nullptr;
  const std::size_t at = static_cast<std::size_t>(b - l1);
  for (std::size_t i = 0; i < l1_count; ++i)
    if (l1_buffers[i].at <= at && at < l1_buffers[i].at + l1_buffers[i].bytes) return &l1_buffers[i];
  return nullptr;
}

// The bank of byte `at` of a table whose first byte is `base` (both in host::l1).
inline std::size_t l1_bank(const unsigned char *base, std::size_t at) {
  return static_cast<std::size_t>(base + at - l1) / l1_bank_bytes;
}
}  // namespace host

template <typename TR, typename T, unsigned Elems>
vector<TR, Elems> to_fixed_floor(const vector<T, Elems> &v, int shift = 0) {
  static_assert(std::is_same_v<TR, int32> && std::is_same_v<T, bfloat16> && Elems == 16,
                "the host models aie::to_fixed_floor<int32> of 16 bfloat16 lanes only (one ::bfloat16_to_int)");
  vector<TR, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    host::check_normal_bf16(v[i], "aie::to_fixed_floor");
    const double x = std::floor(std::ldexp(static_cast<double>(static_cast<float>(v[i])), shift));
    if (std::isnan(x) || x < -2147483648.0 || x > 2147483647.0) {
      host::fail("aie::to_fixed_floor of a NaN or of a value past int32 (the result is unpublished)");
      continue;
    }
    out[i] = static_cast<TR>(x);
  }
  return out;
}

// aie::add(v, s): an int32 vector plus a scalar in every lane (modular, as the vector ALU).
template <unsigned Elems>
vector<int32, Elems> add(const vector<int32, Elems> &v, int32 s) {
  vector<int32, Elems> out;
  for (unsigned i = 0; i < Elems; ++i)
    out[i] = static_cast<int32>(static_cast<std::uint32_t>(v[i]) + static_cast<std::uint32_t>(s));
  return out;
}

// aie::vector_cast<float>(v) of a bf16 vector: its bits as half as many fp32 lanes (lanes 2i, 2i + 1 -> lane i,
// the low half first, as the memory image holds them).
template <typename Dst, unsigned Elems>
  requires std::is_same_v<Dst, float>
vector<float, Elems / 2> vector_cast(const vector<bfloat16, Elems> &v) {
  // aie_api aie.hpp @2b7eedf vector_cast: the bits are reinterpreted whole, so the lane counts must hold the same bits
  static_assert(Elems % 2 == 0, "aie::vector_cast<float> of an odd number of bf16 lanes");
  vector<float, Elems / 2> out;
  std::memcpy(out.data.data(), v.data.data(), sizeof out.data);
  return out;
}

}  // namespace aie

// The native types the LUT intrinsics name (aie::vector and aie::accum convert to and from them).
using v16int32 = aie::vector<int32, 16>;
using v32bfloat16 = aie::vector<bfloat16, 32>;

inline constexpr unsigned T32_16x2_hi = 0x3216, T16_16x4_lo = 0x1641;  // shuffle modes (values: host-only tags)

inline void load_lut_2x_float(const void *ab, const void *cd, const v16int32 &index, v32bfloat16 &o0,
                              v32bfloat16 &o1) {
  namespace h = aie::host;
  const h::L1Buffer *tables[2] = {h::l1_buffer(ab), h::l1_buffer(cd)};
  const auto *base_ab = static_cast<const unsigned char *>(ab), *base_cd = static_cast<const unsigned char *>(cd);
  if (!tables[0] || !tables[1]) {
    // the host models banks only inside host::l1: a table elsewhere has no bank to check (mlir-aie #3737)
    h::fail("load_lut_2x_float: a table outside the modelled L1 (host::l1_place): its bank is unknown");
    return;
  }
  if (reinterpret_cast<std::uintptr_t>(ab) % h::lut_align || reinterpret_cast<std::uintptr_t>(cd) % h::lut_align) {
    h::fail("load_lut_2x_float: a table not aligned to aie::vector_decl_align");
    return;
  }
  constexpr unsigned group = h::lut_copy_bits / 8, per = group / 8;
  for (unsigned lane = 0; lane < 16; ++lane) {
    const long long entry = static_cast<long long>(index[lane]) >> 4;  // 16 bytes per entry, as linear_approx's
    const long long at = entry < 0 ? -1 : entry / per * 2 * group + entry % per * 8;
    for (unsigned t = 0; t < 2; ++t) {  // the pair and its repeat, in both tables
      const long long off = (t ? base_cd : base_ab) - (h::l1 + tables[t]->at) + at;
      if (at < 0 || off < 0 || off + group + 8 > static_cast<long long>(tables[t]->bytes)) {
        // the hardware reads whatever lies past the table (lut_based_ops.h's rewrite clamps x first, stored id 69055850465);
        // the host models the table's own bytes only
        h::fail("load_lut_2x_float: an index that reads outside its table (clamp the input to the table's range)");
        return;
      }
    }
    const unsigned char *where[4] = {base_ab + at, base_ab + at + group, base_cd + at, base_cd + at + group};
    if (h::l1_bank(base_ab, static_cast<std::size_t>(at)) == h::l1_bank(base_cd, static_cast<std::size_t>(at))) {
      // mlir-aie #3737 and its lit test test/aiecc/lut_runtime_lib_banks.mlir: the 4-way lookup's two tables in two banks
      h::fail("load_lut_2x_float: the two tables share a bank (aie::lut<4> reads them in parallel from two banks)");
      return;
    }
    std::uint32_t words[4][2];
    for (unsigned c = 0; c < 4; ++c) std::memcpy(words[c], where[c], sizeof words[c]);
    for (unsigned c = 1; c < 4; ++c)
      if (std::memcmp(words[c], words[0], sizeof words[0])) {
        h::fail("load_lut_2x_float: the table's copies of one {slope, offset} pair differ (which lane reads which "
                "copy is unpublished; is the table in the " + std::to_string(h::lut_copy_bits) + "-bit layout?)");
        return;
      }
    if (words[0][0] & 0xFFFFu) h::fail("load_lut_2x_float: a slope that is not bf16-valued (the mac reads its high half)");
    v32bfloat16 &out = lane < 8 ? o0 : o1;
    for (unsigned j = 0; j < 4; ++j)
      out[4 * (lane % 8) + j] = bfloat16::from_bits(static_cast<std::uint16_t>(words[0][j / 2] >> (16 * (j % 2))));
  }
}

inline v32bfloat16 shuffle(const v32bfloat16 &a, const v32bfloat16 &b, unsigned mode) {
  v32bfloat16 out;
  auto lane = [&](unsigned i) { return i < 32 ? a[i] : b[i - 32]; };
  if (mode == T32_16x2_hi) {
    for (unsigned w = 0; w < 16; ++w) out[2 * w] = lane(4 * w + 2), out[2 * w + 1] = lane(4 * w + 3);
  } else if (mode == T16_16x4_lo) {
    for (unsigned i = 0; i < 16; ++i) out[i] = lane(4 * i), out[16 + i] = lane(4 * i + 1);
  } else {
    // the host models the two shuffle modes lut_based_ops.h's rewrite uses (stored id 69055850465) only
    aie::host::fail("::shuffle: a mode the host does not model (T32_16x2_hi and T16_16x4_lo only)");
  }
  return out;
}

namespace aie::host {
template <unsigned Out, unsigned Terms, unsigned Elems>
accum<accfloat, Out> mac_bf16(const vector<bfloat16, Elems> &a, const vector<bfloat16, Elems> &b,
                              const accum<accfloat, Out> &acc, const char *what) {
  accum<accfloat, Out> out;
  for (unsigned i = 0; i < Out; ++i) {
    double sum = acc.acc[i];
    for (unsigned t = 0; t < Terms; ++t) {
      check_normal_bf16(a[i + t * Out], what);
      check_normal_bf16(b[i + t * Out], what);
      sum += static_cast<double>(static_cast<float>(a[i + t * Out])) * static_cast<double>(static_cast<float>(b[i + t * Out]));
    }
    out.acc[i] = fp32(sum);  // exact here: one of the two products is 0 (the zeroed half of x)
  }
  return out;
}
}  // namespace aie::host

// (templates, so that only a call on the wrong target fails to compile)
template <typename V>
  requires std::is_same_v<V, v32bfloat16>
aie::accum<accfloat, 16> mac_elem_16_2(const V &a, const V &b, const aie::accum<accfloat, 16> &acc) {
  // aie_api detail/aie2/linear_approx.hpp @2b7eedf l.346-446: mac_elem_16_2 on AIE2, mac_elem_32 on AIE2P
  static_assert(!aie::host::aie2p && sizeof(V), "mac_elem_16_2 on bf16 is an AIE2 intrinsic (AIE2P: mac_elem_32)");
  return aie::host::mac_bf16<16, 2>(a, b, acc, "mac_elem_16_2");
}

template <typename V>
  requires std::is_same_v<V, v32bfloat16>
aie::accum<accfloat, 32> mac_elem_32(const V &a, const V &b, const aie::accum<accfloat, 32> &acc) {
  // aie_api detail/aie2/linear_approx.hpp @2b7eedf l.346-446: the AIE2P branch takes mac_elem_32
  static_assert(aie::host::aie2p && sizeof(V), "mac_elem_32 on bf16 is an AIE2P intrinsic (AIE2: mac_elem_16_2)");
  return aie::host::mac_bf16<32, 1>(a, b, acc, "mac_elem_32");
}

namespace aie {

// ---- W4A16's dequantization: unpack, int16 add / sub, to_float, to_fixed, grow_replicate, interleave_zip ----
namespace host {
template <typename T>
constexpr unsigned elem_bits() {
  if constexpr (std::is_same_v<T, int4>) return 4;
  else return 8 * sizeof(T);
}

// A vector the AIE API defines: 128, 256, 512 or 1024 bits (UG1603 "Data Types", Table 1).
template <typename T, unsigned Elems>
constexpr bool api_vector() {
  constexpr unsigned bits = elem_bits<T>() * Elems;
  return bits == 128 || bits == 256 || bits == 512 || bits == 1024;
}
}  // namespace host

template <typename T, unsigned Elems>
template <unsigned ElemsOut>
vector<T, ElemsOut> vector<T, Elems>::grow_replicate() const {
  // UG1603 "Data Types" Table 1 (the sizes); aie_api @2b7eedf vector.hpp line 256 (grow_replicate)
  static_assert(host::api_vector<T, Elems>() && host::api_vector<T, ElemsOut>(),
                "aie::vector::grow_replicate: the AIE API has 128- to 1024-bit vectors only");
  static_assert(ElemsOut % Elems == 0 && ElemsOut >= Elems, "aie::vector::grow_replicate grows to a multiple");
  vector<T, ElemsOut> out;
  for (unsigned i = 0; i < ElemsOut; ++i) out[i] = data[i % Elems];
  return out;
}

// aie::unpack: the next larger integer type, lane for lane (int4 -> int8, int8 -> int16).
template <typename T, unsigned Elems>
auto unpack(const vector<T, Elems> &v) {
  static_assert(!is_float_elem_v<T>, "aie::unpack takes integer vectors (requires(!is_floating_point))");
  static_assert(std::is_same_v<T, int4> || std::is_same_v<T, int8>, "the host models aie::unpack of int4 and int8 only");
  using T2 = std::conditional_t<std::is_same_v<T, int4>, int8, int16>;  // vector sizes: UG1603 "Data Types"
  static_assert(host::api_vector<T, Elems>() && host::api_vector<T2, Elems>(),
                "aie::unpack: the AIE API has 128- to 1024-bit vectors only (int4 32..256 lanes, int8 16..128)");
  vector<T2, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) out[i] = static_cast<T2>(v[i]);
  if constexpr (std::is_same_v<T, int4>) host::int4_unpacked += Elems;
  return out;
}

namespace host {
template <bool Add, unsigned Elems>
vector<int16, Elems> add_sub(const vector<int16, Elems> &a, const vector<int16, Elems> &b) {
  // UG1603 "Data Types" Table 1: 128- to 1024-bit vectors
  static_assert(api_vector<int16, Elems>(), "aie::add / aie::sub: the AIE API has 128- to 1024-bit vectors only");
  vector<int16, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) out[i] = static_cast<int16>(Add ? a[i] + b[i] : a[i] - b[i]);  // modular
  return out;
}
}  // namespace host

template <unsigned Elems>
vector<int16, Elems> add(const vector<int16, Elems> &a, const vector<int16, Elems> &b) { return host::add_sub<true>(a, b); }
template <unsigned Elems>
vector<int16, Elems> sub(const vector<int16, Elems> &a, const vector<int16, Elems> &b) { return host::add_sub<false>(a, b); }

// aie::to_float<TR>(v, shift): v 2^-shift, rounded to TR (fp32 first, then bf16 under the rounding mode).
template <typename TR = float, typename T, unsigned Elems>
vector<TR, Elems> to_float(const vector<T, Elems> &v, int shift = 0) {
  static_assert(std::is_same_v<TR, float> || std::is_same_v<TR, bfloat16>, "aie::to_float gives float or bfloat16");
  static_assert(std::is_same_v<T, int16>, "the host models aie::to_float of int16 vectors only");  // sizes: UG1603
  static_assert(host::api_vector<T, Elems>() && host::api_vector<TR, Elems>(),
                "aie::to_float: the AIE API has 128- to 1024-bit vectors only");
  vector<TR, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    const float f = static_cast<float>(std::ldexp(static_cast<double>(v[i]), -shift));
    if constexpr (std::is_same_v<TR, float>) out[i] = f;
    else out[i] = bfloat16::from_bits(host::f32_to_bf16_bits(f, host::rounding));
  }
  return out;
}

// aie::to_fixed<int16>(v, shift): v 2^shift, for values that are integers in int16's range only.
template <typename TR, typename T, unsigned Elems>
vector<TR, Elems> to_fixed(const vector<T, Elems> &v, int shift = 0) {
  static_assert(std::is_same_v<TR, int16> && std::is_same_v<T, bfloat16>,
                "the host models aie::to_fixed<int16> of bfloat16 vectors only");  // sizes: UG1603 "Data Types"
  static_assert(host::api_vector<T, Elems>() && host::api_vector<TR, Elems>(),
                "aie::to_fixed: the AIE API has 128- to 1024-bit vectors only");
  vector<TR, Elems> out;
  for (unsigned i = 0; i < Elems; ++i) {
    const double x = std::ldexp(static_cast<double>(static_cast<float>(v[i])), shift);
    if (x != std::floor(x) || x < -32768.0 || x > 32767.0) {
      host::fail("aie::to_fixed<int16> of a value that is no int16 integer (bfloat16_to_int's rounding is unpublished)");
      continue;
    }
    out[i] = static_cast<TR>(x);
  }
  return out;
}

// aie::interleave_zip(v, w, chunk_size): chunks of v and w alternately, the result split in two.
template <typename T, unsigned Elems>
std::pair<vector<T, Elems>, vector<T, Elems>> interleave_zip(const vector<T, Elems> &v, const vector<T, Elems> &w,
                                                             unsigned chunk_size) {
  // UG1603 "Data Types" Table 1: 128- to 1024-bit vectors
  static_assert(host::api_vector<T, Elems>(), "aie::interleave_zip: the AIE API has 128- to 1024-bit vectors only");
  std::pair<vector<T, Elems>, vector<T, Elems>> out;
  if (chunk_size == 0 || chunk_size > Elems || (chunk_size & (chunk_size - 1)) ||
      host::elem_bits<T>() * chunk_size < 8) {
    host::fail("aie::interleave_zip: chunk_size must be a power of two, at most the vector's lanes and at least 8 bits "
               "(REQUIRES_MSG in aie.hpp)");
    return out;
  }
  for (unsigned i = 0; i < 2 * Elems; ++i) {
    const unsigned chunk = i / chunk_size, at = (chunk / 2) * chunk_size + i % chunk_size;
    const T x = chunk % 2 ? w[at] : v[at];
    (i < Elems ? out.first : out.second)[i % Elems] = x;
  }
  return out;
}

}  // namespace aie

// aie2p intrinsics the bf16-via-bfp16 emulation uses on B^T (global functions on native vectors, which
// aie::vector converts to and an accum is built from): ones, their concatenation, and the
// elementwise bf16 product into fp32 lanes, exact for normal values (subnormal operands fail, as in mmul).
inline aie::vector<bfloat16, 32> broadcast_one_to_v32bfloat16() {
  aie::vector<bfloat16, 32> v;
  v.data.fill(bfloat16(1.0f));
  return v;
}

template <typename T>
aie::vector<T, 64> concat(const aie::vector<T, 32> &lo, const aie::vector<T, 32> &hi) {
  aie::vector<T, 64> v;
  std::copy(lo.data.begin(), lo.data.end(), v.data.begin());
  std::copy(hi.data.begin(), hi.data.end(), v.data.begin() + 32);
  return v;
}

inline aie::accum<accfloat, 64> mul_elem_64(const aie::vector<bfloat16, 64> &a, const aie::vector<bfloat16, 64> &b) {
  aie::accum<accfloat, 64> out;
  for (unsigned i = 0; i < 64; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    if (aie::host::subnormal(x) || aie::host::subnormal(y))
      aie::host::fail("a subnormal bf16 operand of mul_elem_64 (flushing is unpublished)");
    out.acc[i] = static_cast<double>(x) * static_cast<double>(y);
  }
  return out;
}

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
  for (double &x : out.acc) x = aie::host::per_mac(x);
  return out;
}
