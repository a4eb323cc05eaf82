// fluidlite._core's collective-communication functions (comm.h), used by fluidlite/distributed/comm.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "comm.h"

namespace py = pybind11;

namespace fl {

void BindComm(py::module_& m) {
  m.def(
      "comm_init_ring",
      [](int ring_id, int rank, int nranks, double timeout_s, const std::string& library, int handle_bytes,
         int64_t comm, const std::vector<int64_t>& dtypes, const std::vector<int64_t>& ops) {
        comm::MpiConfig cfg{library, handle_bytes, comm, dtypes, ops};
        py::gil_scoped_release release;  // replacing a ring waits for its stream
        comm::InitRing(ring_id, rank, nranks, timeout_s, library.empty() ? nullptr : &cfg);
      },
      py::arg("ring_id"), py::arg("rank"), py::arg("nranks"), py::arg("timeout_s"), py::arg("library") = "",
      py::arg("handle_bytes") = 4, py::arg("comm") = 0, py::arg("dtypes") = std::vector<int64_t>{},
      py::arg("ops") = std::vector<int64_t>{},
      "creates ring `ring_id` over the MPI communicator `comm` of the loaded MPI `library` (handles as mpi4py reports "
      "them: datatypes float32, float64, int32, int64; ops sum, max, min, prod), or a one-rank ring without MPI "
      "(library '')");
  m.def(
      "comm_destroy_ring",
      [](int ring_id) {
        py::gil_scoped_release release;
        comm::DestroyRing(ring_id);
      },
      py::arg("ring_id"));
  m.def("comm_destroy_all_rings", []() {
    py::gil_scoped_release release;
    comm::DestroyAllRings();
  });
  m.def("comm_ring_ids", &comm::RingIds);
  m.def(
      "comm_sync",
      [](int ring_id) {
        auto ring = comm::GetRing(ring_id, "comm_sync");
        py::gil_scoped_release release;
        ring->Sync("comm_sync");
      },
      py::arg("ring_id") = 0, "waits for ring `ring_id`'s comm stream (what c_sync_comm_stream does)");
  m.def(
      "comm_ring_stats",
      [](int ring_id) {
        auto ring = comm::GetRing(ring_id, "comm_ring_stats");
        const comm::RingStats s = ring->Stats();
        py::dict d;
        d["ring_id"] = ring->id();
        d["rank"] = ring->rank();
        d["nranks"] = ring->nranks();
        d["timeout_s"] = ring->timeout_s();
        d["collectives"] = s.collectives;
        d["bytes"] = s.bytes;
        d["busy_ns"] = s.busy_ns;
        d["wait_ns"] = s.wait_ns;
        d["pending"] = s.pending;
        return d;
      },
      py::arg("ring_id") = 0,
      "ring `ring_id`: rank, nranks, timeout_s; collectives and payload bytes finished, busy_ns (the stream inside "
      "collectives), wait_ns (callers waiting for it), pending");
}

}  // namespace fl
