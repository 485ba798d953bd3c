/* SPDX-License-Identifier: MIT */
/* cuda_abi.h - the CUDA driver API's types as gpumem declares them (driver-abi.md §1.2): no
 * toolkit header is needed at build time.  One declaration for the device module
 * (src/device/cuda.c), gpumem account's interposer (preload/) and the test suite's fake driver
 * (tests/fake/), so that the three cannot disagree.  Pointers and sizes are 64-bit
 * (CUdeviceptr_v2); handles are opaque. */
#ifndef GM_DEVICE_CUDA_ABI_H
#define GM_DEVICE_CUDA_ABI_H

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2: 64-bit */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUlib_st *CUlibrary;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef int CUjit_option;
typedef int CUlibraryOption;

#endif
