#include "dlpack_tensor.h"

#include <functional>
#include <memory>
#include <vector>

#include "cuda_api.h"
#include "enforce.h"

namespace py = pybind11;

namespace fl {

namespace {

DLDataType ToDLType(DType d) {
  switch (d) {
    case DType::BOOL: return {kDLBool, 8, 1};
    case DType::INT16: return {kDLInt, 16, 1};
    case DType::INT32: return {kDLInt, 32, 1};
    case DType::INT64: return {kDLInt, 64, 1};
    case DType::FP16: return {kDLFloat, 16, 1};
    case DType::FP32: return {kDLFloat, 32, 1};
    case DType::FP64: return {kDLFloat, 64, 1};
    case DType::UINT8: return {kDLUInt, 8, 1};
    case DType::INT8: return {kDLInt, 8, 1};
    default: FL_THROW("__dlpack__: a ", DTypeName(d), " tensor has no DLPack dtype");
  }
}

DType FromDLType(DLDataType t) {
  FL_ENFORCE(t.lanes == 1, "from_dlpack: vector dtypes (lanes ", t.lanes, ") are not supported");
  switch (t.code) {
    case kDLBool:
      if (t.bits == 8) return DType::BOOL;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::INT8;
      if (t.bits == 16) return DType::INT16;
      if (t.bits == 32) return DType::INT32;
      if (t.bits == 64) return DType::INT64;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::UINT8;
      break;
    case kDLFloat:
      if (t.bits == 16) return DType::FP16;
      if (t.bits == 32) return DType::FP32;
      if (t.bits == 64) return DType::FP64;
      break;
    default: break;
  }
  FL_THROW("from_dlpack: DLPack dtype (code ", static_cast<int>(t.code), ", ", static_cast<int>(t.bits),
           " bits) has no fluidlite dtype (bool, int8/16/32/64, uint8, float16/32/64)");
}

DLDevice ToDLDevice(const Place& p) {
  if (p.is_gpu()) return {kDLCUDA, p.device};
  if (p.is_pinned()) return {kDLCUDAHost, 0};
  return {kDLCPU, 0};
}

// What the exported capsule owns: the tensor (so its buffer lives) and the shape the DLTensor points at.
struct Export {
  Tensor tensor;
  std::vector<int64_t> shape;
};

void FillDLTensor(DLTensor& dl, Export* ex) {
  const Tensor& t = ex->tensor;
  dl.data = const_cast<void*>(t.raw_data());
  dl.device = ToDLDevice(t.place());
  dl.ndim = static_cast<int32_t>(ex->shape.size());
  dl.dtype = ToDLType(t.dtype());
  dl.shape = ex->shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
}

template <typename Managed>
void DeleteExport(Managed* m) {
  delete static_cast<Export*>(m->manager_ctx);
  delete m;
}

// A capsule's destructor: a capsule the consumer never took (still named "dltensor") still owns its tensor.
template <typename Managed>
void CapsuleDestructor(PyObject* capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule, name)) return;  // renamed "used_dltensor": the consumer owns it now
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m && m->deleter) m->deleter(m);
}

}  // namespace

py::capsule TensorToDLPack(const Tensor& t, bool versioned) {
  FL_ENFORCE(t.IsInitialized(), "__dlpack__: the tensor holds no memory (it was never written)");
  auto ex = std::make_unique<Export>();
  ex->tensor = t;
  ex->shape.assign(t.dims().begin(), t.dims().end());
  if (versioned) {
    auto* m = new DLManagedTensorVersioned{};
    m->version = {1, 1};
    m->manager_ctx = ex.get();
    m->deleter = &DeleteExport<DLManagedTensorVersioned>;
    FillDLTensor(m->dl_tensor, ex.release());
    return py::capsule(m, "dltensor_versioned",
                       [](PyObject* c) { CapsuleDestructor<DLManagedTensorVersioned>(c, "dltensor_versioned"); });
  }
  auto* m = new DLManagedTensor{};
  m->manager_ctx = ex.get();
  m->deleter = &DeleteExport<DLManagedTensor>;
  FillDLTensor(m->dl_tensor, ex.release());
  return py::capsule(m, "dltensor", [](PyObject* c) { CapsuleDestructor<DLManagedTensor>(c, "dltensor"); });
}

Tensor TensorFromDLPack(py::capsule capsule) {
  PyObject* c = capsule.ptr();
  DLTensor* dl = nullptr;
  std::function<void()> release;
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    FL_ENFORCE(m->version.major == 1, "from_dlpack: DLPack version ", m->version.major, ".", m->version.minor,
               " is not supported (1.x is)");
    dl = &m->dl_tensor;
    release = [m]() {
      if (m->deleter) m->deleter(m);
    };
    PyCapsule_SetName(c, "used_dltensor_versioned");
  } else if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    dl = &m->dl_tensor;
    release = [m]() {
      if (m->deleter) m->deleter(m);
    };
    PyCapsule_SetName(c, "used_dltensor");
  } else {
    FL_THROW("from_dlpack: expected an unused DLPack capsule (\"dltensor\" or \"dltensor_versioned\"); this one ",
             PyCapsule_GetName(c) ? "is named \"" + std::string(PyCapsule_GetName(c)) + "\"" : "has no name",
             " (a capsule can be consumed once)");
  }
  // From here on this function owns the managed tensor: an error below must still release it.
  Place place;
  switch (dl->device.device_type) {
    case kDLCPU: place = Place::CPU(); break;
    case kDLCUDAHost: place = Place::CUDAPinned(); break;
    case kDLCUDA:
    case kDLCUDAManaged:
      place = Place::CUDA(dl->device.device_id);
      // Device memory not from fluidlite's allocator: from now on the executor looks for inputs to move.
      g_device_memory_used.store(true, std::memory_order_relaxed);
      break;
    default:
      release();
      FL_THROW("from_dlpack: DLPack device type ", dl->device.device_type,
               " is not supported (CPU 1, CUDA 2, CUDA host 3, CUDA managed 13 are)");
  }
  DType dtype;
  std::vector<int64_t> shape(dl->shape, dl->shape + dl->ndim);
  try {
    dtype = FromDLType(dl->dtype);
    if (dl->strides) {  // any strides are fine if they describe the compact row-major layout
      int64_t expect = 1;
      for (int i = dl->ndim - 1; i >= 0; --i) {
        FL_ENFORCE(shape[i] == 1 || dl->strides[i] == expect, "from_dlpack: the tensor of shape ", DDim(shape),
                   " is not contiguous (strides ", DDim(std::vector<int64_t>(dl->strides, dl->strides + dl->ndim)),
                   " elements); make it contiguous first (e.g. .copy() / .contiguous())");
        expect *= shape[i];
      }
    }
  } catch (...) {
    release();
    throw;
  }
  size_t bytes = SizeOf(dtype);
  for (int64_t d : shape) bytes *= static_cast<size_t>(d);
  void* data = static_cast<char*>(dl->data) + dl->byte_offset;
  std::shared_ptr<Allocation> holder(new Allocation(data, bytes, place, nullptr), [release](Allocation* a) {
    delete a;
    release();
  });
  Tensor t;
  t.Resize(DDim(shape));
  t.ResetHolder(std::move(holder), 0, dtype, place);
  return t;
}

py::tuple DLPackDevice(const Tensor& t) {
  DLDevice d = ToDLDevice(t.place());
  return py::make_tuple(d.device_type, d.device_id);
}

}  // namespace fl
