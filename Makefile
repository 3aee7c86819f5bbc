# gemm_gen: mlir-aie style entry points. Variables follow mlir-aie's matrix_multiplication
# Makefiles: DEVICE (npu1|npu2), M K N, optional m k n K_MT RHO N_AIE_COLS MAPPING DTYPE_IN DTYPE_B DTYPE_OUT ACC PRESET
# GROUP_SIZE (32|64|128) ZERO_POINTS (0/1) for W4A16 (DTYPE_IN=bf16 DTYPE_B=i4);
# A_COL_MAJ B_COL_MAJ C_COL_MAJ B_PACK; the fused epilogue BIAS (0/1) ACTIVATION CLAMP (LO,HI) REQUANT; gemm_gen's kernel and L1 choices EXPANSION KERNEL_LOOPS CONVERT_ONCE L1_ALLOC;
# OPT_LEVEL (0-3: Peano's -O for the kernel; default 2, the -O2 of mlir-aie's PEANOWRAP2(P)_FLAGS); the runtime sequence's TASK_SPAN (blocks per shim task, 0: most); SIZES for
# one design serving several sizes; BUILD_DIR for the files generate, all, run, validate and roofline write;
# TIMEOUT_MS for the time limit of each NPU run of run and validate (default: derived from the prediction).
SHELL := /bin/bash

# This Makefile's variables come from its command line or from here, never from the environment:
# short names like k, M, SIZES or SEED are often exported for other reasons and would silently change
# the design `make sim` checks. A command-line value wins as usual (and reaches sub-makes through
# MAKEFLAGS); an environment value is dropped (under `make -e` too) before the defaults below.
# PYTHON is the exception: it only picks the interpreter of .venv/ (printed when installing), and
# `PYTHON=python3.12 make install` is a reasonable way to choose it.
# The option variables, the 0/1 ones among them and GEN_ARGS (the gemm-gen arguments they make) are generated
# from gemm_gen's option table into gemm_gen.mk (`gemm-gen make-args`; tests/app/test_make.py keeps it current).
include gemm_gen.mk
OWN_VARS := $(OPTION_VARS) SEED TOP WARMUP ITERS TIMEOUT_MS BUILD_DIR VENV BIN STAMP \
	INSTALL_LOG GEMM_GEN OPTION_VARS SWITCH_VARS GEN_ARGS BUILD_ARGS TIMEOUT_ARGS SHOWN
$(foreach v,$(OWN_VARS),$(if $(filter environment%,$(origin $(v))),$(eval override undefine $(v))))

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# gemm-gen as make runs it: its messages name options as this Makefile's variables (DTYPE_OUT=bf16, not --dtype_out bf16)
GEMM_GEN := GEMM_GEN_SPELLING=make $(BIN)/gemm-gen
STAMP := $(VENV)/.installed
INSTALL_LOG := $(VENV)/install.log

DEVICE ?= npu2
# SIZES=1000x777x333,1x4096x4096: one design for all of them (M K N then default to their largest)
SIZES ?=
M ?= $(if $(SIZES),,512)
K ?= $(if $(SIZES),,512)
N ?= $(if $(SIZES),,512)
$(foreach v,$(SWITCH_VARS),$(eval $(v) ?= 0))
SEED ?= 0
WARMUP ?= 1
ITERS ?= 10
# milliseconds one NPU run may take (gemm-gen run/validate --timeout-ms); empty: max(2 s, 100 x predicted)
TIMEOUT_MS ?=
TOP ?= 5
BUILD_DIR ?= build

# 0 or 1, nothing else (an empty B_COL_MAJ= or CHESS=yes would otherwise be a silent default or a
# traceback); $(error) is one line and exit 2, before anything runs
is_01 = $(and $(filter 0 1,$(1)),$(filter 1,$(words $(1))))
$(foreach v,$(SWITCH_VARS),$(if $(call is_01,$($(v))),,$(error $(v)=$($(v)) is $(if $($(v)),not 0 or 1,empty); \
	give $(v)=0 or $(v)=1, or leave it out)))

# BUILD_DIR in single quotes for the shell (a ' inside as '\''): a folder name with spaces stays one argument
BUILD_ARGS := --build-dir '$(subst ','\'',$(BUILD_DIR))'
TIMEOUT_ARGS := $(if $(TIMEOUT_MS),--timeout-ms $(TIMEOUT_MS))
# what `make sim` and `make run` check: the device, the sizes, and every other variable given here
SHOWN := DEVICE=$(DEVICE) $(foreach v,M K N SIZES,$(if $($(v)),$(v)=$($(v)))) \
	$(foreach v,$(filter-out DEVICE M K N SIZES,$(OWN_VARS)),$(if $(filter command line,$(origin $(v))),$(v)=$($(v))))

.PHONY: install doctor validate sim plan generate kernel mlir all build run dry-run predict tune roofline test test-slow bench lint clean help

help:
	@echo "make sim DEVICE=npu2 M=512 K=512 N=512 [SIZES=MxKxN,... m= k= n= K_MT= RHO= N_AIE_COLS= MAPPING= DTYPE_IN= DTYPE_B= DTYPE_OUT= ACC="
	@echo "         PRESET= A_COL_MAJ= B_COL_MAJ= C_COL_MAJ= B_PACK= EXPANSION= KERNEL_LOOPS= CONVERT_ONCE= L1_ALLOC= TASK_SPAN="
	@echo "         GROUP_SIZE=32|64|128 ZERO_POINTS=0/1 (W4A16: DTYPE_IN=bf16 DTYPE_B=i4)"
	@echo "         BIAS=0/1 ACTIVATION=relu|silu|gelu|runtime CLAMP=LO,HI REQUANT=per_channel]; BUILD_DIR= (default build)"
	@echo "make plan|generate|kernel|mlir (same variables); make doctor, validate, all, run on an NPU machine [CHESS=1"
	@echo "         OPT_LEVEL=0-3 (Peano's -O, default 2) WARMUP= ITERS= TIMEOUT_MS=]"
	@echo "make predict|tune|roofline (the model; TOP= for tune), make dry-run (the build commands)"
	@echo "make test, make test-slow, make bench, make lint, make clean"

# a quiet first install: pip's and setuptools' output goes to the log, shown whole if a step fails
$(STAMP): pyproject.toml
	@echo "installing gemm_gen and its dependencies into $(VENV)/ with $(PYTHON) (log: $(INSTALL_LOG))"
	@mkdir -p $(VENV) && { $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --upgrade pip \
		&& $(BIN)/pip install -e '.[dev,llm]'; } > $(INSTALL_LOG) 2>&1 \
		|| { cat $(INSTALL_LOG) >&2; echo "make: installing into $(VENV)/ failed: the log is above and in $(INSTALL_LOG)" >&2; exit 1; }
	@touch $(STAMP)
	@echo "installed; to run gemm-gen directly: source $(VENV)/bin/activate (or export PATH=\"$$PWD/$(BIN):\$$PATH\")"

install: $(STAMP)

# the pinned NPU toolchain against what is installed (exit 0 only when everything is there)
doctor: $(STAMP)
	$(GEMM_GEN) doctor

sim: $(STAMP)
	@echo "make sim: checking $(strip $(SHOWN))"
	$(GEMM_GEN) simulate $(GEN_ARGS) --seed $(SEED) --predicted

plan: $(STAMP)
	$(GEMM_GEN) plan $(GEN_ARGS)

generate: $(STAMP)
	$(GEMM_GEN) generate $(GEN_ARGS) $(BUILD_ARGS)

kernel: $(STAMP)
	$(GEMM_GEN) kernel $(GEN_ARGS)

mlir: $(STAMP)
	$(GEMM_GEN) mlir $(GEN_ARGS)

# build/final_<suffix>.xclbin and build/insts_<suffix>.bin (needs mlir-aie and Peano or chess)
all build: $(STAMP)
	$(GEMM_GEN) build $(GEN_ARGS) $(BUILD_ARGS)

dry-run: $(STAMP)
	$(GEMM_GEN) build $(GEN_ARGS) $(BUILD_ARGS) --dry-run

# build if needed, then run on the NPU through XRT with mlir-aie's output lines
run: $(STAMP)
	@echo "make run: checking $(strip $(SHOWN))"
	export XRT_HACK_UNSECURE_LOADING_XCLBIN=1 && $(GEMM_GEN) run $(GEN_ARGS) $(BUILD_ARGS) --warmup $(WARMUP) --iters $(ITERS) --seed $(SEED) $(TIMEOUT_ARGS)

# on an NPU laptop: doctor, then build, run and check a fixed sweep; build/validate_$(DEVICE).json + .png
validate: $(STAMP)
	export XRT_HACK_UNSECURE_LOADING_XCLBIN=1 && $(GEMM_GEN) validate --dev $(DEVICE) --iters $(ITERS) \
		--warmup $(WARMUP) $(BUILD_ARGS) $(TIMEOUT_ARGS)

predict: $(STAMP)
	$(GEMM_GEN) predict $(GEN_ARGS)

tune: $(STAMP)
	$(GEMM_GEN) tune $(GEN_ARGS) --top $(TOP)

roofline: $(STAMP)
	$(GEMM_GEN) roofline $(GEN_ARGS) --out-dir '$(subst ','\'',$(BUILD_DIR))'

# the tests write only into temporary folders, never into build/ (tests/conftest.py checks it); -n auto: one
# pytest-xdist worker per core, sharing the host kernel compiles (tests/host_compile.py); --dist worksteal: a worker
# that runs out of tests takes half of the other's queue (xdist's default, load, left one worker idle for the last
# minute while the other ran the queue it had been given, issue 33 item 4)
test: $(STAMP)
	@echo "make test: every test but the slow and hardware ones (pytest -m 'not slow and not hardware'), one worker per core;"
	@echo "           it ends with the CPU time it took (by module, and the host g++ compiles, which .pytest_cache/ keeps"
	@echo "           for the next run) and how many random designs it checked: docs/testing.md says how to read it"
	$(BIN)/python -m pytest -q -n auto --dist worksteal

test-slow: $(STAMP)
	@echo "make test-slow: the full-size simulations and the model's calibration checks (pytest -m slow);"
	@echo "                it ends with the CPU time it took, by module (docs/testing.md)"
	$(BIN)/python -m pytest -q -n auto --dist worksteal -m slow

bench: $(STAMP)
	$(BIN)/python scripts/bench_sim.py
	$(BIN)/python scripts/bench_tune.py
	$(BIN)/python scripts/bench_cli.py

lint: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,llm,lint]'
	$(BIN)/ruff check gemm_gen tests scripts
	$(BIN)/mypy gemm_gen

# build/ only, whatever BUILD_DIR says: clean never deletes a folder named on the command line
clean:
	rm -rf build .pytest_cache .hypothesis .setuptools-build
