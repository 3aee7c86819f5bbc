// gemm_gen_kernel.h: loop hints and trace markers shared by the kernels gemm_gen renders.
//
// The two AIE compilers want their loop hints in different places:
//  - chess (xchesscc, defines __chess__) takes keywords between the loop header and its body:
//        for (...) chess_prepare_for_pipelining chess_loop_range(4, ) { ... }
//  - Peano (llvm-aie clang, defines __AIECC__) takes `#pragma clang loop` before the loop; its
//    pipeliner needs no "prepare" hint, only the trip count (mlir-aie aie_kernels/aie_kernel_utils.h maps
//    AIE_PREPARE_FOR_PIPELINING to nothing and AIE_LOOP_MIN_ITERATION_COUNT to this pragma). A
//    flattened loop is `clang loop unroll(full)`, the header's AIE_LOOP_UNROLL_FULL: its
//    AIE_LOOP_FLATTEN is empty under __AIECC__ (chess_flatten_loop under chess), which would leave our
//    k-flat and jk-flat structures plain loops under Peano, not the structures the variant rule and the
//    model price (issue 31 item 6; gemm_gen/rules/peano.py). Read in the two versions of that header the
//    public index holds (mlir-aie 87ac0175 and 072b1259; v1.4.3's own, 95b3d1cc, is not stored): both agree.
// So every hinted loop carries a *_BEFORE macro in front of `for` and an *_AFTER macro behind
// the loop header; each compiler sees its own and the other expands to nothing. A plain host
// compiler (the tests' g++) sees nothing at all. Counts must be integer literals (the kernels are
// rendered with their trip counts written out), because Peano stringifies them into a pragma.

#ifndef GEMM_GEN_KERNEL_H
#define GEMM_GEN_KERNEL_H

#define GG_STRINGIFY(x) #x

// A helper that takes or returns an accumulator, a vector or a block-vector stream is inlined under
// every compiler, not only where chess happens to inline it: `static inline` is a hint Peano may
// ignore, and an accumulator passed by reference into a call that stays a call lives in memory
// (a spill). The AIE API marks its own functions the same way (`__aie_inline`, aie_api/detail/config.hpp:
// `__attribute__((always_inline))` for chess and Peano alike).
#define GG_INLINE inline __attribute__((always_inline))

#if defined(__chess__)

// Software-pipeline this loop; it runs at least `n` times.
#define GG_PIPELINE_BEFORE(n)
#define GG_PIPELINE_AFTER(n) chess_prepare_for_pipelining chess_loop_range(n, )
// This loop runs at least `n` times (no pipelining request).
#define GG_LOOP_RANGE_BEFORE(n)
#define GG_LOOP_RANGE_AFTER(n) chess_loop_range(n, )
// Unroll this loop completely.
#define GG_FLATTEN_BEFORE
#define GG_FLATTEN_AFTER chess_flatten_loop
// A bfp16 kernel's flat block loop (mlir-aie PR #3650's loop): chess pipelines it as any other.
#define GG_POSTPIPELINE_BEFORE(n)
#define GG_POSTPIPELINE_AFTER(n) chess_prepare_for_pipelining chess_loop_range(n, )
// Data-memory bank annotations of a pointer: Peano only (see below).
#define GG_DM_A
#define GG_DM_B
#define GG_DM_C
// Trace markers around a kernel call (mlir-aie's traces time kernels by event0/event1).
#define GG_TRACE_BEGIN() event0()
#define GG_TRACE_END() event1()

#elif defined(__AIECC__)

#define GG_PIPELINE_BEFORE(n) _Pragma(GG_STRINGIFY(clang loop min_iteration_count(n)))
#define GG_PIPELINE_AFTER(n)
#define GG_LOOP_RANGE_BEFORE(n) _Pragma(GG_STRINGIFY(clang loop min_iteration_count(n)))
#define GG_LOOP_RANGE_AFTER(n)
#define GG_FLATTEN_BEFORE _Pragma("clang loop unroll(full)")  // mlir-aie's AIE_LOOP_UNROLL_FULL
#define GG_FLATTEN_AFTER
// mlir-aie PR #3650's flat block loop: the trip count, no pre-RA pipelining (AIE_PREPARE_FOR_POSTPIPELINING:
// the loop goes to the post-RA pipeliner) and GPR reallocation (AIE_LOOP_GPR_REALLOC); the build widens the
// post-RA pipeliner's II search for these kernels (gemm_gen/rules/peano.py BFP16_PIPELINER_FLAGS).
#define GG_POSTPIPELINE_BEFORE(n)                                                                  \
  _Pragma(GG_STRINGIFY(clang loop min_iteration_count(n))) _Pragma("clang loop pipeline(disable)") \
      _Pragma("clang loop hint(aie-gpr-realloc, 1)")
#define GG_POSTPIPELINE_AFTER(n)
// Pointers into the A, B and C buffers in their own data-memory banks' address spaces, as PR #3650's kernels
// annotate them (__aie_dm_resource_*, llvm-aie's bank annotation): scheduling information only.
#define GG_DM_A __aie_dm_resource_a
#define GG_DM_B __aie_dm_resource_b
#define GG_DM_C __aie_dm_resource_c
#define GG_TRACE_BEGIN() event0()
#define GG_TRACE_END() event1()

#else  // a host compiler: no hints, no trace events

// With GG_HOST_PEANO (the tests' host AIE API stand-in modelling Peano, tests/aie_host) every iteration of a
// pipelined or ranged loop tells the stand-in, so that its block-vector streams know which pops' fill counts
// are carried around a loop (not compile-time constants). Nothing otherwise.
#if defined(GG_HOST_PEANO)
#define GG_HOST_ITERATION if (::aie::host::next_iteration(); true)
#else
#define GG_HOST_ITERATION
#endif
#define GG_PIPELINE_BEFORE(n)
#define GG_PIPELINE_AFTER(n) GG_HOST_ITERATION
#define GG_LOOP_RANGE_BEFORE(n)
#define GG_LOOP_RANGE_AFTER(n) GG_HOST_ITERATION
#define GG_FLATTEN_BEFORE
#define GG_FLATTEN_AFTER
#define GG_POSTPIPELINE_BEFORE(n)
#define GG_POSTPIPELINE_AFTER(n)
#define GG_DM_A
#define GG_DM_B
#define GG_DM_C
#define GG_TRACE_BEGIN()
#define GG_TRACE_END()

#endif

#endif  // GEMM_GEN_KERNEL_H
