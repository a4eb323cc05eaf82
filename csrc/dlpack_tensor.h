// DLPack (https://dmlc.github.io/dlpack): the ABI that CuPy, torch, numpy and JAX exchange tensors through without
// copying. The structs are DLPack's own (ABI version 1.1); only the ones the exchange needs are declared.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "tensor.h"

namespace fl {

// ---- DLPack's ABI
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
struct DLDataType {
  uint8_t code, bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  uint32_t major, minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;  // bit 0: read only, bit 1: is a copy
  DLTensor dl_tensor;
};

// A capsule ("dltensor", or "dltensor_versioned" for DLPack 1.x consumers) that shares t's buffer and keeps it alive.
pybind11::capsule TensorToDLPack(const Tensor& t, bool versioned);
// A tensor sharing the capsule's buffer (CPU, CUDA or CUDA-host memory; compact row-major or any strides that are
// row-major compact); marks the capsule used, as the protocol asks, and calls its deleter when the last tensor
// sharing the buffer goes. Unsupported dtypes, devices or strides raise, naming what was given.
Tensor TensorFromDLPack(pybind11::capsule capsule);
// __dlpack_device__: (device_type, device_id).
pybind11::tuple DLPackDevice(const Tensor& t);

}  // namespace fl
