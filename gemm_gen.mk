# Generated from gemm_gen's option table (gemm_gen/spec/request.py) by `gemm-gen make-args`: do not edit.
# After changing an option: .venv/bin/gemm-gen make-args > gemm_gen.mk (tests/app/test_make.py checks it).
# (each `override`: an environment value, under make -e too, cannot replace them)
override OPTION_VARS := DEVICE M K N m k n K_MT DTYPE_IN DTYPE_OUT B_COL_MAJ MAPPING N_AIE_COLS CHESS RHO DTYPE_B ACC B_PACK EXPANSION KERNEL_LOOPS CONVERT_ONCE L1_ALLOC SHARE_L1 A_COL_MAJ C_COL_MAJ BIAS ACTIVATION CLAMP REQUANT GROUP_SIZE ZERO_POINTS TASK_SPAN OPT_LEVEL SIZES PRESET
# the variables that are 0 or 1 (default 0)
override SWITCH_VARS := B_COL_MAJ CHESS A_COL_MAJ C_COL_MAJ BIAS ZERO_POINTS
# the gemm-gen arguments the variables make
override GEN_ARGS = $(if $(DEVICE),--dev $(DEVICE)) \
	$(if $(M),-M $(M)) \
	$(if $(K),-K $(K)) \
	$(if $(N),-N $(N)) \
	$(if $(m),-m $(m)) \
	$(if $(k),-k $(k)) \
	$(if $(n),-n $(n)) \
	$(if $(K_MT),--k-mt $(K_MT)) \
	$(if $(DTYPE_IN),--dtype_in $(DTYPE_IN)) \
	$(if $(DTYPE_OUT),--dtype_out $(DTYPE_OUT)) \
	--b-col-maj $(B_COL_MAJ) \
	$(if $(MAPPING),--mapping $(MAPPING)) \
	$(if $(N_AIE_COLS),--n-aie-cols $(N_AIE_COLS)) \
	$(if $(filter 1,$(CHESS)),--chess) \
	$(if $(RHO),--rho $(RHO)) \
	$(if $(DTYPE_B),--dtype_b $(DTYPE_B)) \
	$(if $(ACC),--acc $(ACC)) \
	$(if $(B_PACK),--b-pack $(B_PACK)) \
	$(if $(EXPANSION),--expansion $(EXPANSION)) \
	$(if $(KERNEL_LOOPS),--kernel-loops $(KERNEL_LOOPS)) \
	$(if $(CONVERT_ONCE),--convert-once $(CONVERT_ONCE)) \
	$(if $(L1_ALLOC),--l1-alloc $(L1_ALLOC)) \
	$(if $(SHARE_L1),--share-l1 $(SHARE_L1)) \
	--a-col-maj $(A_COL_MAJ) \
	--c-col-maj $(C_COL_MAJ) \
	$(if $(filter 1,$(BIAS)),--bias) \
	$(if $(ACTIVATION),--activation $(ACTIVATION)) \
	$(if $(CLAMP),--clamp=$(CLAMP)) \
	$(if $(REQUANT),--requant $(REQUANT)) \
	$(if $(GROUP_SIZE),--group-size $(GROUP_SIZE)) \
	$(if $(filter 1,$(ZERO_POINTS)),--zero-points) \
	$(if $(TASK_SPAN),--task-span $(TASK_SPAN)) \
	$(if $(OPT_LEVEL),--opt-level $(OPT_LEVEL)) \
	$(if $(SIZES),--runtime-sizes $(SIZES)) \
	$(if $(PRESET),--preset $(PRESET))
