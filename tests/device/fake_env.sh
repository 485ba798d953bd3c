# SPDX-License-Identifier: MIT
# Sourced by the CLI golden cases of the device layer: use the fake drivers of this build,
# a private state file, and none of the caller's GPU memory settings.
export GPUMEM_CUDA_LIBRARY="$GM_BINARY_DIR/tests/fake/libcuda.so.1"
export GPUMEM_NVML_LIBRARY="$GM_BINARY_DIR/tests/fake/libnvidia-ml.so.1"
# No AMD SMI unless a case asks for the fake one: a real libamd_smi.so must not leak in.
export GPUMEM_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so
export GPUMEM_FAKE_STATE="$PWD/fake.state"
WORKLOAD="$GM_BINARY_DIR/tests/fake/gm_workload"
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF \
    PYTORCH_NO_CUDA_MEMORY_CACHING CUDA_MODULE_LOADING CUDA_LAUNCH_BLOCKING \
    CUDA_MPS_PIPE_DIRECTORY TF_FORCE_GPU_ALLOW_GROWTH XLA_PYTHON_CLIENT_MEM_FRACTION \
    XLA_PYTHON_CLIENT_PREALLOCATE HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES PYTORCH_HIP_ALLOC_CONF
# Paths of this build are replaced by BUILD in golden output.
strip_build() { sed "s|$GM_BINARY_DIR|BUILD|g"; }
