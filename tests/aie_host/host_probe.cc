// Test-only entry points into the host AIE API stand-in: the emulated mode registers and the
// float -> bf16 conversion, linked into each compiled kernel library next to the kernel.

#include <aie_api/aie.hpp>

#include <cstddef>
#include <cstdint>

extern "C" {

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

}  // extern "C"
