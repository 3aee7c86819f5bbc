"""The application layer: the gemm-gen command line and its commands, flags <-> config and the choice
of a design (search.choose, said before it is used), the text renderers, the Gemm operator, `make
validate`'s sweep, and the wiring of the NPU runner with the model's time limit. Nothing below imports it
(docs/structure.md)."""
