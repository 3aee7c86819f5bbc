"""Facts: the devices, the data types and precisions, exact numerics (rounding, bfp16, the epilogue, group
quantization, W4A16 weights), errors, seeded inputs, the losses measured, atomic file writing."""
