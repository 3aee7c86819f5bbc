// Test-only entry points into the host AIE API stand-in: the emulated mode registers and the
// float -> bf16 conversion, linked into each compiled kernel library next to the kernel.

#include <aie_api/aie.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {

// What the kernel asked for that the real API or hardware would not do as expected ("" if nothing).
const char *gg_host_error() { return aie::host::error.c_str(); }
void gg_host_clear_error() { aie::host::error.clear(); }

// The most block-vector streams that held a load (store = 0) or store (store = 1) FIFO at once since
// the last reset, whether or not -DGEMM_GEN_HOST_FIFO_LIMIT refuses more than the target has.
unsigned gg_host_fifo_peak(unsigned store) { return aie::host::peak_fifos[store ? 1 : 0]; }
void gg_host_reset_fifo_peaks() { aie::host::peak_fifos[0] = aie::host::peak_fifos[1] = 0; }

// int4 lanes aie::unpack widened since the last reset (W4A16: k n per dequantization pass).
unsigned long long gg_host_int4_unpacked() { return aie::host::int4_unpacked; }
void gg_host_reset_int4_unpacked() { aie::host::int4_unpacked = 0; }

// The modelled core data memory (aie.hpp host::l1): its first byte, and a buffer registered in it (a LUT table the
// kernel reads, placed where the L1 plan puts it: a lookup needs its two tables in two banks).
unsigned char *gg_host_l1() { return aie::host::l1; }
unsigned char *gg_host_l1_place(std::size_t at, std::size_t bytes) { return aie::host::l1_place(at, bytes); }
void gg_host_l1_reset() { aie::host::l1_reset(); }

// aie::set_rounding calls since the last reset (the conversion loop must make none).
unsigned long long gg_host_rounding_writes() { return aie::host::rounding_writes; }
void gg_host_reset_rounding_writes() { aie::host::rounding_writes = 0; }

// An acc64 accumulator of n lanes as aie::vector_cast<int32> lays it out in memory (the host's order, permuted
// with -DGG_HOST_ACC64_PERMUTED): what store_acc writes for n = MMUL::size_C.
void gg_host_acc64_words(const std::int64_t *lanes, std::int32_t *words, unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    const std::uint64_t bits = static_cast<std::uint64_t>(lanes[i]);
    words[aie::host::acc64_word(i, 0, n)] = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
    words[aie::host::acc64_word(i, 1, n)] = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits >> 32));
  }
}

// Pops of block-vector input streams and the FIFO fills they made since the last reset ([0] pops, [1] fills).
void gg_host_stream_loads(unsigned long long *out) {
  out[0] = aie::host::stream_pops;
  out[1] = aie::host::stream_fills;
}
void gg_host_reset_stream_loads() { aie::host::stream_pops = aie::host::stream_fills = 0; }

unsigned gg_host_get_rounding() { return static_cast<unsigned>(aie::get_rounding()); }
void gg_host_set_rounding(unsigned mode) { aie::set_rounding(static_cast<aie::rounding_mode>(mode)); }
unsigned gg_host_get_saturation() { return static_cast<unsigned>(aie::get_saturation()); }
void gg_host_set_saturation(unsigned mode) { aie::set_saturation(static_cast<aie::saturation_mode>(mode)); }

// out[i] = bf16 bits of in[i] under rounding `mode` (12 = conv_even is the bfloat16(float) constructor)
void gg_host_f32_to_bf16(const float *in, std::uint16_t *out, std::size_t n, unsigned mode) {
  for (std::size_t i = 0; i < n; ++i) {
    if (mode == static_cast<unsigned>(aie::rounding_mode::conv_even))
      out[i] = bfloat16(in[i]).bits;
    else
      out[i] = aie::host::f32_to_bf16_bits(in[i], static_cast<aie::rounding_mode>(mode));
  }
}

// bfp16ebs8 tiles of fp32 values the way a kernel makes them: 64 values (8 blocks of 8) at a time
// loaded into aie::accum<accfloat, 64> and stored with to_vector<bfp16ebs8>() under rounding `mode`;
// out gets 72 bytes per 64 values (the block vector's memory image). n is a multiple of 64.
void gg_host_bfp16_tiles(const float *in, std::uint8_t *out, std::size_t n, unsigned mode) {
  const aie::rounding_mode saved = aie::get_rounding();
  aie::set_rounding(static_cast<aie::rounding_mode>(mode));
  bfp16ebs8 *dst = reinterpret_cast<bfp16ebs8 *>(out);
  aie::block_vector_output_buffer_stream<bfp16ebs8, 64> stream(dst);
  alignas(64) float block[64];  // the caller's array need not be vector aligned
  for (std::size_t i = 0; i < n; i += 64) {
    std::memcpy(block, in + i, sizeof block);
    const aie::accum<accfloat, 64> acc(aie::load_v<64>(block));
    stream.push(acc.template to_vector<bfp16ebs8>());
  }
  aie::set_rounding(saved);
}

// The values of bfp16 tiles, read back through aie::accum<accfloat, 64> (as a kernel loads C).
void gg_host_bfp16_values(const std::uint8_t *in, float *out, std::size_t n) {
  aie::block_vector_input_buffer_stream<bfp16ebs8, 64> stream(reinterpret_cast<const bfp16ebs8 *>(in));
  alignas(64) float block[64];
  for (std::size_t i = 0; i < n; i += 64) {
    const aie::accum<accfloat, 64> acc(stream.pop());
    aie::store_v(block, acc.template to_vector<float>());
    std::memcpy(out + i, block, sizeof block);
  }
}

}  // extern "C"
