"""Fitting the model and the data it is fitted on, apart from the pricing (issue 19).

`paper` holds the papers' published numbers, `calibrate` derives calibration.json's constants from
them and compares the model with every number, `measured` refits constants on a laptop's measured
designs, `plots` draws the roofline and the tiling heat map, and `upstream` names the published
kernel each of our kernels resembles and whether ours is predicted slower, at par or faster. The
pipeline (search, the pricing modules of model/, design, sim, backends) never imports this package;
only the application layer (`gemm-gen calibrate`, `roofline`, `predict`'s upstream lines, `make
validate`'s sweep), scripts and tests do (tests/package/test_structure.py keeps it so).
"""
