"""Fitting the model and the data it is fitted on, apart from the pricing (issue 19).

`paper` holds the papers' published numbers, `calibrate` derives calibration.json's constants from
them and compares the model with every number, `measured` refits constants on a laptop's measured
designs, and `plots` draws the roofline and the tiling heat map. The pipeline (search, the pricing
modules of model/, design, sim, backends) never imports this package; only the application layer
(`gemm-gen calibrate`, `roofline`, `make validate`'s sweep), scripts and tests do
(tests/test_structure.py keeps it so).
"""
