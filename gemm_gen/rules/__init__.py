"""Every legality and size rule of a design, written once, over ints or NumPy arrays."""
