// Collective communication for data-parallel training (Fluid's c_* collective ops, docs/distributed.md).
//
// The transport is MPI, from the library mpi4py loaded (the mpich wheel under `pip install fluidlite[mpi]`):
// Python's fluidlite.distributed.comm hands over the library's path and the handle values mpi4py reports
// (communicator, datatypes, reduce ops); this file resolves the few MPI functions it calls with dlsym, so
// fluidlite builds and imports without MPI and links to no MPI at build time.
//
// A ring (Fluid's ring_id) is one communicator plus its *comm stream*: a thread that runs the ring's
// collectives one after another, in the order the ops enqueued them, so every rank issues the same collectives
// in the same order whatever its timing. An op with use_calc_stream=false enqueues and returns (backward runs on
// while the bytes travel); c_sync_comm_stream waits. The stream never touches a scope's tensors: an op copies
// its inputs into a staging buffer the job owns, and the results are copied into the outputs by the thread
// that waits (c_sync_comm_stream, a use_calc_stream op, or the end of the executor's run).
//
// Every wait has a deadline (the ring's timeout): a rank that died, exited or took another path makes the
// others fail with an error naming the ring, the collective and the ranks, never a hang. A ring of one rank
// needs no MPI: its collectives are copies.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "desc.h"
#include "dtype.h"
#include "tensor.h"

namespace fl {
namespace comm {

enum class ReduceKind { kSum = 0, kMax = 1, kMin = 2, kProd = 3 };
const char* ReduceKindName(ReduceKind k);  // "sum", "max", ...

// What fluidlite.distributed.comm passes from mpi4py for one ring.
struct MpiConfig {
  std::string library;          // path of the loaded libmpi (dlopen'ed again: it is already mapped)
  int handle_bytes = 4;         // sizeof(MPI_Comm): 4 for MPICH's integer handles, 8 for pointer handles
  int64_t comm = 0;             // the ring's communicator (a Dup of COMM_WORLD)
  std::vector<int64_t> dtypes;  // MPI datatypes for FP32, FP64, INT32, INT64 (in that order)
  std::vector<int64_t> ops;     // MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD
};

// A staging buffer: from the CPU allocator, which keeps freed blocks of 64 KiB and more for the next request of
// that size, so a gradient bucket sent every step costs no page faults after the first (a fresh 16 MB vector
// zero-filled on each call made an allreduce 2.5x slower than MPI's own, measured).
class Staging {
 public:
  void Resize(size_t bytes);  // uninitialized contents; keeps the block when it is large enough
  char* data() const { return mem_ ? static_cast<char*>(mem_->ptr()) : nullptr; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void swap(Staging& other) {
    std::swap(mem_, other.mem_);
    std::swap(size_, other.size_);
  }

 private:
  std::shared_ptr<Allocation> mem_;
  size_t size_ = 0;
};

// One collective, as the comm stream runs it: `send` and `recv` are staging buffers the job owns.
struct Collective {
  enum Kind { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kBarrier } kind = kAllReduce;
  const char* op_type = "";  // the op that enqueued it (profiler event name, messages)
  DType dtype = DType::FP32;
  ReduceKind reduce = ReduceKind::kSum;
  int root = 0;
  int64_t count = 0;  // elements each rank contributes (allgather: sends; reduce_scatter: receives)
  Staging send;
  Staging recv;      // allreduce's result is swapped into `send`; broadcast works in place in `send`
  std::string what;  // the variables, for the GLOG line and errors ("3 tensors: fc_0.w_0@GRAD, ...")
  // Runs on the waiting thread once the collective is done: copies `recv` (or `send`) into the outputs.
  std::function<void(Collective&)> finish;
};

struct RingStats {
  int64_t collectives = 0;
  int64_t bytes = 0;    // payload bytes (per rank) of finished collectives
  int64_t busy_ns = 0;  // time the stream spent inside collectives
  int64_t wait_ns = 0;  // time callers spent waiting for the stream (c_sync_comm_stream, sync collectives)
  int64_t pending = 0;
};

class Ring {
 public:
  virtual ~Ring() = default;
  int id() const { return id_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  double timeout_s() const { return timeout_s_; }

  // Queues `c` on the comm stream (returns at once).
  void Enqueue(std::unique_ptr<Collective> c);
  // Waits for everything queued so far, then runs their `finish` on this thread in queue order. Throws the first
  // error any of them met (`caller` names the op that waits).
  void Sync(const char* caller);
  // Enqueue + Sync: a collective on the calculation stream (run on this thread when the stream is idle).
  void RunNow(std::unique_ptr<Collective> c, const char* caller);
  bool HasPending() const;
  RingStats Stats() const;

 protected:
  Ring(int id, int rank, int nranks, double timeout_s);
  // Runs one collective to completion on the stream thread (throws EnforceNotMet on failure or timeout).
  virtual void Transfer(Collective& c) = 0;
  void StartStream();  // by the subclass constructor, once Transfer can run
  void StopStream();   // by the subclass destructor, before its members go
  void Execute(std::unique_ptr<Collective> c, std::unique_lock<std::mutex>& lock);

  struct State;
  std::shared_ptr<State> state_;
  int id_, rank_, nranks_;
  double timeout_s_;
};

// Creates ring `id` (replacing one of that id after waiting for it): over MPI, or a single-rank ring when
// `config` is null (nranks must then be 1).
void InitRing(int id, int rank, int nranks, double timeout_s, const MpiConfig* config);
void DestroyRing(int id);
void DestroyAllRings();
// The ring an op names; throws naming `op` when no such ring was initialized (fleet.init was not called).
std::shared_ptr<Ring> GetRing(int id, const char* op);
bool HasRing(int id);
std::vector<int> RingIds();
// Makes `block` safe to run whatever its author forgot: before the first op that reads or writes a variable an async
// collective (use_calc_stream=false) is still carrying, inserts a c_sync_comm_stream of that ring, so no op ever sees
// a value from before the collective (Fluid on a GPU would race there). An op with sub-blocks counts as touching every
// variable. Returns how many it inserted; the executor calls it on every prepared block, after the fetch ops.
int InsertMissingSyncs(BlockDesc& block);

// Waits for every ring's stream (the executor's end of run: nothing is left in flight past Run).
void SyncAllRings(const char* caller);

}  // namespace comm
}  // namespace fl
