// Rings, their comm streams and the MPI transport (comm.h).
#include "comm.h"

#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "enforce.h"
#include "logging.h"
#include "profiler.h"

namespace fl {
namespace comm {

const char* ReduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum: return "sum";
    case ReduceKind::kMax: return "max";
    case ReduceKind::kMin: return "min";
    case ReduceKind::kProd: return "prod";
  }
  return "?";
}

void Staging::Resize(size_t bytes) {
  if (!mem_ || mem_->size() < bytes) mem_ = bytes ? AllocateShared(Place::CPU(), bytes) : nullptr;
  size_ = bytes;
}

namespace {

int64_t ElapsedNs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count();
}

const char* KindName(Collective::Kind k) {
  switch (k) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBarrier: return "barrier";
  }
  return "?";
}

// Bytes one rank puts on the wire for `c` (its payload: what GB/s is computed from).
int64_t PayloadBytes(const Collective& c) {
  return c.kind == Collective::kAllGather ? static_cast<int64_t>(c.recv.size()) : static_cast<int64_t>(c.send.size());
}

}  // namespace

// The comm stream: a queue of collectives, the thread that runs them, and the finished ones awaiting `finish`.
struct Ring::State {
  std::mutex mu;
  std::condition_variable work;  // the stream: a job was queued, or stop
  std::condition_variable idle;  // waiters: the queue drained
  std::deque<std::unique_ptr<Collective>> queue;
  std::vector<std::unique_ptr<Collective>> done;
  bool running = false;  // the stream is inside a Transfer
  bool stop = false;
  std::string error;            // the first failure, until a Sync reports it
  std::string broken;           // set for good after a failure: MPI may still hold the failed request
  std::atomic<int> waiting{0};  // threads blocked in Sync: the stream drives MPI flat out while one is
  RingStats stats;
  std::thread thread;
};

Ring::Ring(int id, int rank, int nranks, double timeout_s)
    : state_(std::make_shared<State>()), id_(id), rank_(rank), nranks_(nranks), timeout_s_(timeout_s) {}

// Runs `c` on this thread; called and returns with `lock` held and st->running set by the caller.
void Ring::Execute(std::unique_ptr<Collective> c, std::unique_lock<std::mutex>& lock) {
  State* st = state_.get();
  const std::string broken = st->broken;
  lock.unlock();
  const auto start = std::chrono::steady_clock::now();
  std::string failure;
  try {
    FL_ENFORCE(broken.empty(), c->op_type, " (ring ", id_,
               "): the ring failed earlier and can carry no more: ", broken);
    RecordEvent event(c->op_type, "Communication");
    event.SetBytes(PayloadBytes(*c));
    Transfer(*c);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const int64_t ns = ElapsedNs(start);
  if (failure.empty()) {
    FL_VLOG(3) << c->op_type << " ring " << id_ << " (rank " << rank_ << " of " << nranks_ << "): " << KindName(c->kind)
               << " of " << c->what << ", " << PayloadBytes(*c) << " bytes in " << ns / 1e6 << " ms, "
               << (ns > 0 ? PayloadBytes(*c) / static_cast<double>(ns) : 0.0) << " GB/s";
  }
  lock.lock();
  st->running = false;
  st->stats.busy_ns += ns;
  if (failure.empty()) {
    st->stats.collectives += 1;
    st->stats.bytes += PayloadBytes(*c);
    st->done.push_back(std::move(c));
  } else {
    if (st->error.empty()) st->error = failure;
    if (st->broken.empty()) st->broken = failure;
  }
}

void Ring::StartStream() {
  State* st = state_.get();
  st->thread = std::thread([this, st] {
    std::unique_lock<std::mutex> lock(st->mu);
    for (;;) {
      st->work.wait(lock, [st] { return st->stop || (!st->queue.empty() && !st->running); });
      if (st->queue.empty()) return;  // stop, with nothing left to run
      std::unique_ptr<Collective> c = std::move(st->queue.front());
      st->queue.pop_front();
      st->running = true;
      Execute(std::move(c), lock);
      if (st->queue.empty()) st->idle.notify_all();
      else st->work.notify_one();
    }
  });
}

void Ring::RunNow(std::unique_ptr<Collective> c, const char* caller) {
  State* st = state_.get();
  {
    std::unique_lock<std::mutex> lock(st->mu);
    if (st->queue.empty() && !st->running) {
      // The stream is idle: run it here, saving two thread hand-offs (tens of us each on a busy machine).
      st->running = true;
      st->waiting.fetch_add(1);  // poll flat out: this thread has nothing else to do
      Execute(std::move(c), lock);
      st->waiting.fetch_sub(1);
      st->work.notify_one();  // a collective queued meanwhile waited for this one
    } else {
      lock.unlock();
      Enqueue(std::move(c));
    }
  }
  Sync(caller);
}

void Ring::StopStream() {
  State* st = state_.get();
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stop = true;
  }
  st->work.notify_all();
  if (st->thread.joinable()) st->thread.join();
}

void Ring::Enqueue(std::unique_ptr<Collective> c) {
  State* st = state_.get();
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->queue.push_back(std::move(c));
  }
  st->work.notify_one();
}

bool Ring::HasPending() const {
  State* st = state_.get();
  std::lock_guard<std::mutex> lock(st->mu);
  return st->running || !st->queue.empty() || !st->done.empty() || !st->error.empty();
}

RingStats Ring::Stats() const {
  State* st = state_.get();
  std::lock_guard<std::mutex> lock(st->mu);
  RingStats s = st->stats;
  s.pending = static_cast<int64_t>(st->queue.size()) + (st->running ? 1 : 0);
  return s;
}

void Ring::Sync(const char* caller) {
  State* st = state_.get();
  std::vector<std::unique_ptr<Collective>> done;
  std::string error;
  {
    std::unique_lock<std::mutex> lock(st->mu);
    if (st->running || !st->queue.empty()) {
      const auto start = std::chrono::steady_clock::now();
      RecordEvent event("c_sync_comm_stream/wait", "Communication");
      st->waiting.fetch_add(1);
      st->idle.wait(lock, [st] { return !st->running && st->queue.empty(); });
      st->waiting.fetch_sub(1);
      st->stats.wait_ns += ElapsedNs(start);
    }
    done.swap(st->done);
    error.swap(st->error);
  }
  // The finished collectives' results go into their outputs in queue order, even when a later one failed.
  for (auto& c : done) {
    if (c->finish) c->finish(*c);
  }
  FL_ENFORCE(error.empty(), caller, ": ", error);
}

// ---- the single-rank ring: every collective is the identity (allreduce of one rank is its own value)

namespace {

class LocalRing : public Ring {
 public:
  LocalRing(int id, double timeout_s) : Ring(id, 0, 1, timeout_s) { StartStream(); }
  ~LocalRing() override { StopStream(); }

 protected:
  void Transfer(Collective& c) override {
    if (c.kind == Collective::kAllGather || c.kind == Collective::kReduceScatter) {
      c.recv.Resize(c.send.size());
      if (!c.send.empty()) std::memcpy(c.recv.data(), c.send.data(), c.send.size());
    }
  }
};

// ---- MPI: the functions called, resolved from the library mpi4py loaded. `H` is the handle type: int for MPICH
// (handles and requests are ints), void* for implementations with pointer handles.

template <typename H>
struct MpiApi {
  using Req = H;
  int (*Iallreduce)(const void*, void*, int, H, H, H, Req*) = nullptr;
  int (*Ibcast)(void*, int, H, int, H, Req*) = nullptr;
  int (*Iallgather)(const void*, int, H, void*, int, H, H, Req*) = nullptr;
  int (*Ireduce_scatter_block)(const void*, void*, int, H, H, H, Req*) = nullptr;
  int (*Ibarrier)(H, Req*) = nullptr;
  int (*Test)(Req*, int*, void*) = nullptr;
  int (*Error_string)(int, char*, int*) = nullptr;
};

template <typename F>
void Resolve(void* lib, const char* name, F* fn, const std::string& path) {
  void* sym = dlsym(lib, name);
  FL_ENFORCE(sym != nullptr, "fleet: the MPI library ", path, " has no ", name, " (an MPI-3 library is needed)");
  *fn = reinterpret_cast<F>(sym);
}

template <typename H>
H AsHandle(int64_t v) {
  if constexpr (std::is_pointer_v<H>) return reinterpret_cast<H>(static_cast<intptr_t>(v));
  else return static_cast<H>(v);
}

// Elements per MPI call: counts are C ints, so a larger buffer travels in pieces (each a collective of its own,
// in the same order on every rank).
constexpr int64_t kMaxCount = int64_t{1} << 30;

template <typename H>
class MpiRing : public Ring {
 public:
  MpiRing(int id, int rank, int nranks, double timeout_s, const MpiConfig& cfg) : Ring(id, rank, nranks, timeout_s) {
    FL_ENFORCE(cfg.dtypes.size() == 4 && cfg.ops.size() == 4, "fleet: the MPI configuration needs 4 datatypes and 4 ",
               "reduce ops, got ", cfg.dtypes.size(), " and ", cfg.ops.size());
    // Already mapped by mpi4py: this only takes another reference to it.
    lib_ = dlopen(cfg.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    FL_ENFORCE(lib_ != nullptr, "fleet: cannot open the MPI library ", cfg.library, ": ", dlerror());
    Resolve(lib_, "MPI_Iallreduce", &api_.Iallreduce, cfg.library);
    Resolve(lib_, "MPI_Ibcast", &api_.Ibcast, cfg.library);
    Resolve(lib_, "MPI_Iallgather", &api_.Iallgather, cfg.library);
    Resolve(lib_, "MPI_Ireduce_scatter_block", &api_.Ireduce_scatter_block, cfg.library);
    Resolve(lib_, "MPI_Ibarrier", &api_.Ibarrier, cfg.library);
    Resolve(lib_, "MPI_Test", &api_.Test, cfg.library);
    Resolve(lib_, "MPI_Error_string", &api_.Error_string, cfg.library);
    comm_ = AsHandle<H>(cfg.comm);
    for (int i = 0; i < 4; ++i) {
      dtypes_[i] = AsHandle<H>(cfg.dtypes[i]);
      ops_[i] = AsHandle<H>(cfg.ops[i]);
    }
    StartStream();
  }
  ~MpiRing() override {
    StopStream();
    // lib_ stays open: MPI is finalized by mpi4py at exit, after the rings are gone.
  }

 protected:
  void Transfer(Collective& c) override {
    H dtype = DTypeHandle(c);
    const int64_t esize = SizeOf(c.dtype);
    switch (c.kind) {
      case Collective::kAllReduce: {
        c.recv.Resize(c.send.size());
        for (int64_t begin = 0; begin < c.count; begin += kMaxCount) {
          const int n = static_cast<int>(std::min(kMaxCount, c.count - begin));
          Req req;
          Check(c, api_.Iallreduce(c.send.data() + begin * esize, c.recv.data() + begin * esize, n, dtype,
                                   ops_[static_cast<int>(c.reduce)], comm_, &req));
          Wait(c, &req);
        }
        c.send.swap(c.recv);  // the result is in `send`, as for broadcast
        break;
      }
      case Collective::kBroadcast:
        for (int64_t begin = 0; begin < c.count; begin += kMaxCount) {
          const int n = static_cast<int>(std::min(kMaxCount, c.count - begin));
          Req req;
          Check(c, api_.Ibcast(c.send.data() + begin * esize, n, dtype, c.root, comm_, &req));
          Wait(c, &req);
        }
        break;
      case Collective::kAllGather: {
        FL_ENFORCE(c.count * nranks() <= INT_MAX, c.op_type, ": ", c.count, " elements per rank x ", nranks(),
                   " ranks is more than one MPI call carries (", INT_MAX, ")");
        c.recv.Resize(c.send.size() * nranks());
        Req req;
        Check(c, api_.Iallgather(c.send.data(), static_cast<int>(c.count), dtype, c.recv.data(),
                                 static_cast<int>(c.count), dtype, comm_, &req));
        Wait(c, &req);
        break;
      }
      case Collective::kReduceScatter: {
        FL_ENFORCE(c.count * nranks() <= INT_MAX, c.op_type, ": ", c.count * nranks(),
                   " elements is more than one MPI call carries (", INT_MAX, ")");
        c.recv.Resize(c.count * esize);
        Req req;
        Check(c, api_.Ireduce_scatter_block(c.send.data(), c.recv.data(), static_cast<int>(c.count), dtype,
                                            ops_[static_cast<int>(c.reduce)], comm_, &req));
        Wait(c, &req);
        break;
      }
      case Collective::kBarrier: {
        Req req;
        Check(c, api_.Ibarrier(comm_, &req));
        Wait(c, &req);
        break;
      }
    }
  }

 private:
  using Req = typename MpiApi<H>::Req;

  H DTypeHandle(const Collective& c) const {
    switch (c.dtype) {
      case DType::FP32: return dtypes_[0];
      case DType::FP64: return dtypes_[1];
      case DType::INT32: return dtypes_[2];
      case DType::INT64: return dtypes_[3];
      default:
        if (c.kind == Collective::kBarrier) return dtypes_[0];
        FL_THROW(c.op_type, ": dtype ", DTypeName(c.dtype), " of ", c.what,
                 " is not supported (float32, float64, int32 or int64)");
    }
  }

  void Check(const Collective& c, int rc) const {
    if (rc == 0) return;
    char text[512] = {0};
    int len = 0;
    api_.Error_string(rc, text, &len);
    FL_THROW(c.op_type, " (ring ", id(), ", rank ", rank(), " of ", nranks(), "): MPI error ", rc, ": ", text);
  }

  // Polls the request to completion. MPI progresses a nonblocking collective only inside MPI calls, so the stream
  // tests it. While some thread waits for the stream (nothing left to overlap with) it tests back to back, yielding
  // the core between tests, as a blocking MPI call would; while none does (backward still computes: the overlap)
  // it tests with sleeps of up to 50 us between, leaving the core to the compute threads.
  void Wait(const Collective& c, Req* req) {
    char status[256];  // larger than any MPI_Status
    const auto start = std::chrono::steady_clock::now();
    const int64_t deadline_ns = static_cast<int64_t>(timeout_s() * 1e9);
    int64_t sleep_ns = 1000;
    for (;;) {
      int flag = 0;
      Check(c, api_.Test(req, &flag, status));
      if (flag) return;
      const int64_t waited = ElapsedNs(start);
      if (waited > deadline_ns) {
        FL_THROW(c.op_type, " (ring ", id(), ", rank ", rank(), " of ", nranks(),
                 "): the other ranks did not join the ", KindName(c.kind), " of ", c.what, " within ", timeout_s(),
                 " s: a rank died, exited early, or runs a different program (FLUIDLITE_COMM_TIMEOUT sets the limit)");
      }
      if (waited < 50000 || state_->waiting.load(std::memory_order_relaxed) > 0) {
        sched_yield();
        sleep_ns = 1000;
      } else {
        timespec ts{0, static_cast<long>(sleep_ns)};
        nanosleep(&ts, nullptr);
        sleep_ns = std::min<int64_t>(sleep_ns * 2, 50000);
      }
    }
  }

  void* lib_ = nullptr;
  MpiApi<H> api_;
  H comm_{};
  H dtypes_[4]{};
  H ops_[4]{};
};

std::mutex g_rings_mu;
std::atomic<int> g_ring_count{0};  // SyncAllRings' fast exit: most programs run with no ring at all
std::map<int, std::shared_ptr<Ring>>& Rings() {
  static auto* rings = new std::map<int, std::shared_ptr<Ring>>();  // never destroyed: no stream joins at exit
  return *rings;
}

}  // namespace

void InitRing(int id, int rank, int nranks, double timeout_s, const MpiConfig* config) {
  FL_ENFORCE(id >= 0, "fleet: ring_id must be >= 0, got ", id);
  FL_ENFORCE(nranks >= 1 && rank >= 0 && rank < nranks, "fleet: rank ", rank, " of ", nranks,
             " ranks is not valid (0 <= rank < nranks)");
  FL_ENFORCE(timeout_s > 0, "fleet: the communication timeout must be > 0 seconds, got ", timeout_s);
  std::shared_ptr<Ring> ring;
  if (config == nullptr) {
    FL_ENFORCE(nranks == 1, "fleet: ring ", id, " has ", nranks, " ranks but no MPI communicator");
    ring = std::make_shared<LocalRing>(id, timeout_s);
  } else if (config->handle_bytes == 4) {
    ring = std::make_shared<MpiRing<int>>(id, rank, nranks, timeout_s, *config);
  } else {
    FL_ENFORCE(config->handle_bytes == static_cast<int>(sizeof(void*)), "fleet: MPI handles of ", config->handle_bytes,
               " bytes are not supported (4 or ", sizeof(void*), ")");
    ring = std::make_shared<MpiRing<void*>>(id, rank, nranks, timeout_s, *config);
  }
  std::shared_ptr<Ring> old;
  {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    auto& slot = Rings()[id];
    old = std::move(slot);
    slot = std::move(ring);
    g_ring_count.store(static_cast<int>(Rings().size()));
  }
  if (old && old->HasPending()) old->Sync("fleet.init");
}

void DestroyRing(int id) {
  std::shared_ptr<Ring> old;
  {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    auto it = Rings().find(id);
    if (it == Rings().end()) return;
    old = std::move(it->second);
    Rings().erase(it);
    g_ring_count.store(static_cast<int>(Rings().size()));
  }
}

void DestroyAllRings() {
  std::map<int, std::shared_ptr<Ring>> old;
  {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    old.swap(Rings());
    g_ring_count.store(0);
  }
}

std::shared_ptr<Ring> GetRing(int id, const char* op) {
  std::lock_guard<std::mutex> lock(g_rings_mu);
  auto it = Rings().find(id);
  FL_ENFORCE(it != Rings().end(), op, ": ring_id ", id, " has no communicator: call fleet.init(role) (or ",
             "fluidlite.distributed.comm.init()) before running a program with collective ops",
             Rings().empty() ? "" : " (a ring of another id exists: check the op's ring_id)");
  return it->second;
}

bool HasRing(int id) {
  std::lock_guard<std::mutex> lock(g_rings_mu);
  return Rings().count(id) > 0;
}

std::vector<int> RingIds() {
  std::lock_guard<std::mutex> lock(g_rings_mu);
  std::vector<int> ids;
  for (auto& kv : Rings()) ids.push_back(kv.first);
  return ids;
}

namespace {

bool IsAsyncCollective(const OpDesc& op) {
  static const std::set<std::string> types = {"c_allreduce_sum",  "c_allreduce_max", "c_allreduce_min",
                                              "c_allreduce_prod", "c_broadcast",     "c_allgather",
                                              "c_reducescatter"};
  if (!types.count(op.type())) return false;
  return !(op.HasAttr("use_calc_stream") && op.Attr<bool>("use_calc_stream"));
}

int RingIdOf(const OpDesc& op) { return op.HasAttr("ring_id") ? op.Attr<int32_t>("ring_id") : 0; }

// Ops after which ring `id`'s stream is drained: c_sync_comm_stream, barrier, and a collective on the calc stream.
bool SyncsRing(const OpDesc& op) {
  if (op.type() == "c_sync_comm_stream" || op.type() == "barrier") return true;
  return op.type().rfind("c_", 0) == 0 && op.HasAttr("use_calc_stream") && op.Attr<bool>("use_calc_stream");
}

bool HasSubBlock(const OpDesc& op) {
  for (auto& kv : op.attrs()) {
    const AttrType t = TypeOf(kv.second);
    if (t == AttrType::BLOCK || t == AttrType::BLOCKS) return true;
  }
  return false;
}

}  // namespace

int InsertMissingSyncs(BlockDesc& block) {
  std::map<int, std::set<std::string>> in_flight;  // ring -> variables its stream still carries
  int inserted = 0;
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = *block.Op(i);
    if (in_flight.empty() && !IsAsyncCollective(op)) continue;
    std::vector<int> rings;
    if (op.type() != "c_sync_comm_stream") {
      const bool all = HasSubBlock(op);
      const auto ins = op.InputArgumentNames();
      const auto outs = op.OutputArgumentNames();
      for (auto& [ring, vars] : in_flight) {
        bool touches = all && !vars.empty();
        for (const auto* names : {&ins, &outs})
          for (auto& n : *names) touches = touches || vars.count(n);
        if (touches) rings.push_back(ring);
      }
    }
    for (int ring : rings) {
      OpDesc* sync = block.InsertOp(i++);
      sync->set_type("c_sync_comm_stream");
      std::vector<std::string> vars(in_flight[ring].begin(), in_flight[ring].end());
      sync->SetInput("X", vars);
      sync->SetOutput("Out", vars);
      sync->SetAttr("ring_id", Attribute(static_cast<int32_t>(ring)));
      in_flight.erase(ring);
      ++inserted;
    }
    const OpDesc& cur = *block.Op(i);
    if (SyncsRing(cur)) in_flight.erase(RingIdOf(cur));
    if (IsAsyncCollective(cur))
      for (auto& n : cur.OutputArgumentNames()) in_flight[RingIdOf(cur)].insert(n);
  }
  if (inserted > 0) FL_VLOG(2) << "InsertMissingSyncs: " << inserted << " c_sync_comm_stream op(s) inserted";
  return inserted;
}

void SyncAllRings(const char* caller) {
  if (g_ring_count.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::shared_ptr<Ring>> rings;
  {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    if (Rings().empty()) return;
    for (auto& kv : Rings()) rings.push_back(kv.second);
  }
  for (auto& r : rings) {
    if (r->HasPending()) r->Sync(caller);
  }
}

}  // namespace comm
}  // namespace fl
