// Python bindings for devices: whether CUDA is linked in, the CUDA and pinned places, waiting for a device, the
// device events the profiler collects, and DLPack (sharing tensors with CuPy, torch and numpy without copies).
// Host code only: everything CUDA goes through the CudaApi table (cuda_api.h), null in a CPU-only build.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cuda_api.h"
#include "dlpack_tensor.h"
#include "enforce.h"
#include "tensor.h"

namespace py = pybind11;

namespace fl {

namespace {

const CudaApi& NeedCuda(const char* what) {
  const CudaApi* cuda = Cuda();
  FL_ENFORCE(cuda != nullptr, what, ": fluidlite was built without CUDA (nvcc was not found at build time)");
  return *cuda;
}

void CheckDevice(int device, const char* what) {
  const int n = NeedCuda(what).device_count();
  FL_ENFORCE(device >= 0 && device < n, what, ": CUDAPlace(", device, ") does not exist: ", n,
             " CUDA device(s) are visible");
}

}  // namespace

void BindDevice(py::module_& m) {
  m.def("is_compiled_with_cuda", []() { return Cuda() != nullptr; });
  m.def("cuda_device_count", []() { return Cuda() ? Cuda()->device_count() : 0; });
  m.def("cuda_pinned_place", []() {
    NeedCuda("CUDAPinnedPlace");
    return Place::CUDAPinned();
  });
  m.def(
      "cuda_device_name",
      [](int device) {
        CheckDevice(device, "cuda_device_name");
        return Cuda()->device_name(device);
      },
      py::arg("device") = 0);
  m.def(
      "cuda_synchronize",
      [](int device) {
        CheckDevice(device, "cuda_synchronize");
        py::gil_scoped_release release;
        Cuda()->synchronize(device);
      },
      py::arg("device") = 0, "waits for everything queued on CUDAPlace(device)'s stream");
  m.def(
      "_cuda_stream",
      [](int device) {
        CheckDevice(device, "_cuda_stream");
        return reinterpret_cast<uintptr_t>(Cuda()->stream(device));
      },
      py::arg("device") = 0, "CUDAPlace(device)'s compute stream (a cudaStream_t as an int), for DLPack");
  m.def(
      "_add_cuda_library_dir", [](const std::string& dir) { NeedCuda("_add_cuda_library_dir").add_library_dir(dir); },
      py::arg("dir"), "a folder searched for libcublas.so.13 before the loader's path");
  m.def(
      "cublas_library", []() { return NeedCuda("cublas_library").blas_library(); },
      "where cuBLAS was loaded from (loading it), or why it could not be");
  m.def(
      "_device_events",
      []() {
        py::list out;
        if (!Cuda()) return out;
        std::vector<DeviceEvent> events;
        {
          py::gil_scoped_release release;
          events = Cuda()->collect();
        }
        for (const DeviceEvent& e : events)
          out.append(py::make_tuple(e.name, e.category, e.args ? py::str(e.args) : py::str(""), e.start_ns, e.end_ns,
                                    e.device, e.bytes));
        return out;
      },
      "(name, category, args, start_ns, end_ns, device, bytes) for each span recorded on a GPU stream since the "
      "last call (waits for the devices)");

  // DLPack (dlpack_tensor.h). to: a "dltensor" capsule sharing the tensor's buffer; from: a tensor sharing the
  // buffer of a capsule (legacy or versioned), which it keeps alive.
  m.def(
      "_to_dlpack", [](const Tensor& t, bool versioned) { return TensorToDLPack(t, versioned); }, py::arg("tensor"),
      py::arg("versioned") = false);
  m.def("_from_dlpack", [](py::capsule capsule) { return TensorFromDLPack(capsule); }, py::arg("capsule"));
  m.def("_dlpack_device", [](const Tensor& t) { return DLPackDevice(t); });
}

}  // namespace fl
