// The thread pool's back-off (csrc/thread_pool.cc): whether parallel jobs pay on this machine right now.
// Pure bookkeeping over measured jobs, no clock and no threads of its own, so tests drive it with made-up
// samples (core._pool_policy_simulate).
//
// Every parallel job reports its wall time and an estimate of what it would have taken on the caller alone:
// the caller's own time in its chunks, per chunk, times the job's chunks. Their ratio over a window of jobs
// is the gain the workers brought. On a quiet machine it is well above 1 (1.3-1.9 with 2 threads); when the
// machine is oversubscribed, workers wake late or are descheduled holding a chunk and the caller waits for
// them: the gain falls below 1 and the pool backs off, running jobs on the caller alone (as fast as one
// thread, and the idle workers sleep instead of taking CPU from the caller). While backed off it probes:
// after an interval it runs a short window of jobs in parallel again and resumes if they pay; each failed
// probe doubles the interval (up to kMaxProbeIntervalNs), and so does a back-off within a second of a resume (a
// load that comes and goes), so probing costs little of the time.
#pragma once
#include <algorithm>
#include <cstdint>

namespace fl {

class PoolPolicy {
 public:
  static constexpr int kWindowJobs = 32;       // parallel jobs judged together
  static constexpr int kProbeJobs = 16;        // parallel jobs of a probe
  static constexpr double kBackoffGain = 1.0;  // a window below this: the workers cost more than they bring
  static constexpr double kResumeGain = 1.1;   // a probe from this: they pay again
  static constexpr int64_t kMinProbeIntervalNs = 20'000'000;
  static constexpr int64_t kMaxProbeIntervalNs = 640'000'000;
  static constexpr int64_t kLastingResumeNs = 1'000'000'000;  // parallel this long after a resume: it lasted

  // Whether a job that starts at `now_ns` may use the workers; starts a probe when one is due.
  bool BeginJob(int64_t now_ns) {
    if (!backed_off_) return true;
    if (probing_) return true;
    if (now_ns < next_probe_ns_) return false;
    probing_ = true;
    ++probes_;
    Reset();
    return true;
  }

  // A parallel job that began at BeginJob's `now_ns` and ended at `now_ns`: `serial_ns` its estimated time on
  // the caller alone, `wall_ns` its time.
  void EndJob(int64_t now_ns, double serial_ns, double wall_ns) {
    serial_ns_ += serial_ns;
    wall_ns_ += wall_ns;
    if (++jobs_ < (backed_off_ ? kProbeJobs : kWindowJobs)) return;
    gain_ = wall_ns_ > 0 ? serial_ns_ / wall_ns_ : 1.0;
    Reset();
    if (!backed_off_) {
      if (gain_ < kBackoffGain) {
        backed_off_ = true;
        ++backoffs_;
        // A resume that did not last (the load comes and goes) keeps the probes as rare as before it.
        const bool lasted = resumes_ == 0 || now_ns - resumed_ns_ >= kLastingResumeNs;
        interval_ns_ = lasted ? kMinProbeIntervalNs : std::min(2 * interval_ns_, kMaxProbeIntervalNs);
        next_probe_ns_ = now_ns + interval_ns_;
      }
    } else if (gain_ >= kResumeGain) {
      backed_off_ = probing_ = false;
      ++resumes_;
      resumed_ns_ = now_ns;
    } else {
      probing_ = false;
      interval_ns_ = std::min(2 * interval_ns_, kMaxProbeIntervalNs);
      next_probe_ns_ = now_ns + interval_ns_;
    }
  }

  // Backed off and not probing: jobs should run on the caller alone until next_probe_ns().
  bool serial() const { return backed_off_ && !probing_; }
  bool backed_off() const { return backed_off_; }
  bool probing() const { return probing_; }
  int64_t next_probe_ns() const { return next_probe_ns_; }
  int64_t interval_ns() const { return interval_ns_; }
  double gain() const { return gain_; }
  int64_t backoffs() const { return backoffs_; }
  int64_t probes() const { return probes_; }
  int64_t resumes() const { return resumes_; }

 private:
  void Reset() {
    jobs_ = 0;
    serial_ns_ = wall_ns_ = 0;
  }

  bool backed_off_ = false, probing_ = false;
  int jobs_ = 0;
  double serial_ns_ = 0, wall_ns_ = 0, gain_ = 0;
  int64_t interval_ns_ = kMinProbeIntervalNs, next_probe_ns_ = 0, resumed_ns_ = 0;
  int64_t backoffs_ = 0, probes_ = 0, resumes_ = 0;
};

}  // namespace fl
