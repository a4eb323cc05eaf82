"""The thread pool (csrc/thread_pool.{h,cc}, csrc/pool_policy.h; docs/architecture.md, "The thread pool under
load"): jobs cut into chunks any thread may take, every chunk run exactly once, also with the machine
oversubscribed (busy background processes, more threads than CPUs); the back-off policy's decisions over made-up
jobs; the options and statistics hooks. No timing assertions: benchmarks/thread_pool_load.py measures."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name
from fluidlite.bench._load import background_load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def two_threads():
    before = core.get_num_threads()
    core.set_num_threads(2)
    options = core.thread_pool_options()
    yield
    core.thread_pool_options(chunks_per_thread=options["chunks_per_thread"], backoff=int(options["backoff"]),
                             spin_us=options["spin_us"])
    core.set_num_threads(before)


def _check_coverage(n, grain, repeats):
    counts, slices, off_caller = core._parallel_for_check(n, grain, repeats)
    np.testing.assert_array_equal(counts, np.full(n, repeats))  # every index exactly once per ParallelFor
    return slices, off_caller


@pytest.mark.parametrize("n,grain", [(0, 1), (1, 1), (2, 1), (7, 3), (100, 1), (4097, 1), (100000, 1000),
                                     (1 << 20, 1 << 15)])
def test_parallel_for_covers_every_index_once(two_threads, n, grain):
    _check_coverage(n, grain, 3)


def test_jobs_are_cut_into_more_chunks_than_threads(two_threads):
    core.thread_pool_options(chunks_per_thread=4, backoff=0)
    slices, _ = _check_coverage(1000, 1, 1)
    assert slices == 8  # 2 threads x 4 chunks per thread
    slices, _ = _check_coverage(5, 1, 1)
    assert slices == 5  # never more chunks than the work allows
    slices, _ = _check_coverage(1000, 400, 1)
    assert slices == 2  # nor chunks under the grain
    core.thread_pool_options(chunks_per_thread=1)
    slices, _ = _check_coverage(1000, 1, 1)
    assert slices == 2
    core.set_num_threads(1)
    slices, off_caller = _check_coverage(1000, 1, 1)
    assert (slices, off_caller) == (1, 0)  # one thread: the caller alone, one slice


def test_stats_count_jobs_and_chunks(two_threads):
    core.thread_pool_options(chunks_per_thread=3, backoff=0)
    core.reset_thread_pool_stats()
    _check_coverage(600, 1, 5)
    s = core.thread_pool_stats()
    assert (s["jobs"], s["chunks"], s["serial_jobs"]) == (5, 30, 0)
    assert 0 <= s["worker_chunks"] <= 30 and s["wait_ns"] >= 0
    assert s["chunks_per_thread"] == 3 and s["backoff"] == 0


def test_backed_off_jobs_run_the_same_chunks_on_the_caller(two_threads):
    # backoff=2 is the back-off's state held on: every job's chunks (the same ones: Chunks does not depend on it)
    # run on the caller, in order, and no worker is woken.
    core.thread_pool_options(chunks_per_thread=4, backoff=2)
    core.reset_thread_pool_stats()
    slices, off_caller = _check_coverage(1000, 1, 7)
    assert (slices, off_caller) == (7 * 8, 0)
    s = core.thread_pool_stats()
    assert (s["jobs"], s["serial_jobs"], s["backed_off"]) == (0, 7, False)


def test_options_are_checked(two_threads):
    with pytest.raises(fluid.core.EnforceNotMet, match=r"thread_pool_options: chunks_per_thread = 0 must be in "
                                                       r"\[1, 64\]"):
        core.thread_pool_options(chunks_per_thread=0)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"thread_pool_options: spin_us = -5 must be in"):
        core.thread_pool_options(spin_us=-5)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"thread_pool_options: backoff = 3 must be 0 \(never\), 1"):
        core.thread_pool_options(backoff=3)


def test_concurrent_callers_each_get_every_index_once(two_threads):
    # Two Python threads issue jobs at once (the GIL is released): one runs on the pool, the other finds it busy
    # and runs its loop serially; neither loses or repeats a slice.
    errors = []

    def work():
        try:
            for _ in range(20):
                _check_coverage(3000, 1, 10)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a ParallelFor hung"
    assert not errors, errors[0]


def _mlp_losses(threads, steps=6):
    """An MLP (GEMMs large enough to split) trained a few SGD steps at `threads`: the losses and final weights."""
    core.set_num_threads(threads)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[256], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=x, size=512, act="relu")
        h = fluid.layers.fc(input=h, size=512, act="relu")
        logits = fluid.layers.fc(input=h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.05).minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    rng = np.random.RandomState(0)
    with fluid.scope_guard(scope):
        exe.run(startup)
        losses = []
        for _ in range(steps):
            feed = {"x": rng.rand(128, 256).astype("float32"), "label": rng.randint(0, 10, (128, 1)).astype("int64")}
            losses.append(float(exe.run(main, feed=feed, fetch_list=[loss])[0].reshape(-1)[0]))
        w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    return np.array(losses), w


def test_training_under_background_load_gives_the_same_results(two_threads):
    # Two busy processes on this machine's cores: the pool backs off or not, chunks are taken late or by the
    # caller, and the results are those of a quiet run at the same thread count to the bit (a job's chunks, so a
    # GEMM's tiles, depend on the shape and the thread count only; the reductions split by thread count), and
    # those of one thread within float tolerance (other tiles: OpenBLAS sums in another order).
    core.thread_pool_options(chunks_per_thread=4, backoff=0)
    quiet_losses, quiet_w = _mlp_losses(2)
    core.thread_pool_options(backoff=2)
    serial_losses, serial_w = _mlp_losses(2)
    one_losses, one_w = _mlp_losses(1)
    core.set_num_threads(2)
    core.thread_pool_options(backoff=1)
    core.reset_thread_pool_stats()
    with background_load(2):
        losses, w = _mlp_losses(2)
        _check_coverage(1 << 16, 64, 200)
    s = core.thread_pool_stats()
    for got, got_w in ((serial_losses, serial_w), (losses, w)):
        np.testing.assert_array_equal(got, quiet_losses)
        np.testing.assert_array_equal(got_w, quiet_w)
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5)
    np.testing.assert_allclose(w, one_w, rtol=1e-4, atol=1e-6)
    assert s["jobs"] + s["serial_jobs"] > 0  # the GEMMs did go through the pool


def test_gemm_tiles_agree_with_numpy_and_do_not_depend_on_the_back_off(two_threads):
    # A matmul large enough to split, at every chunk count per thread: run in parallel or all on the caller, the
    # same bits; numpy's product within float tolerance.
    rng = np.random.RandomState(1)
    a, b = rng.rand(200, 300).astype("float32"), rng.rand(300, 150).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="a", shape=[200, 300], dtype="float32", append_batch_size=False)
        y = fluid.layers.data(name="b", shape=[300, 150], dtype="float32", append_batch_size=False)
        out = fluid.layers.matmul(x, y)
    exe = fluid.Executor(fluid.CPUPlace())
    for cpt in (1, 2, 4, 16):
        got = []
        for backoff in (0, 2, 1):
            core.thread_pool_options(chunks_per_thread=cpt, backoff=backoff)
            got.append(exe.run(main, feed={"a": a, "b": b}, fetch_list=[out])[0])
        for r in got[1:]:
            np.testing.assert_array_equal(r, got[0])
        np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)


_PINNED = r"""
import os, sys
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one CPU, before the pool's workers start
sys.path.insert(0, sys.argv[1])
import numpy as np
from fluidlite import core
core.set_num_threads(4)  # four threads on one CPU: workers are off the CPU most of the time
for n, grain in ((100000, 64), (4096, 1), (37, 1)):
    counts, slices, off = core._parallel_for_check(n, grain, 300)
    assert (counts == 300).all(), (n, grain, counts.min(), counts.max())
rng = np.random.RandomState(0)
import fluidlite as fluid
from fluidlite import unique_name
main, startup = fluid.Program(), fluid.Program()
with unique_name.guard(), fluid.program_guard(main, startup):
    a = fluid.layers.data(name="a", shape=[256, 512], dtype="float32", append_batch_size=False)
    b = fluid.layers.data(name="b", shape=[512, 384], dtype="float32", append_batch_size=False)
    out = fluid.layers.relu(fluid.layers.matmul(a, b))
exe = fluid.Executor(fluid.CPUPlace())
av, bv = rng.rand(256, 512).astype("float32"), rng.rand(512, 384).astype("float32")
first = exe.run(main, feed={"a": av, "b": bv}, fetch_list=[out])[0]
for _ in range(50):
    assert (exe.run(main, feed={"a": av, "b": bv}, fetch_list=[out])[0] == first).all()
np.testing.assert_allclose(first, np.maximum(av @ bv, 0), rtol=1e-5)
s = core.thread_pool_stats()
print("ok", s["jobs"], s["serial_jobs"], s["backoffs"])
"""


def test_more_threads_than_cpus_pinned_to_one_cpu_runs_every_chunk_once():
    # Pinned to one CPU with four threads, a woken worker often runs only after the caller has done the job, or
    # is descheduled holding a chunk: no chunk is lost or run twice, no job hangs, and the GEMM results hold.
    proc = subprocess.run([sys.executable, "-c", _PINNED, ROOT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("ok ")


# -- the back-off policy (csrc/pool_policy.h) over made-up jobs: (start_ns, serial estimate ns, wall ns) --------

US, MS = 1000, 1000000
WINDOW, PROBE = 32, 16  # PoolPolicy::kWindowJobs, kProbeJobs


def _jobs(start_ns, count, serial, wall, every=None):
    every = every or wall
    return [(start_ns + i * every, serial, wall) for i in range(count)]


def test_policy_stays_parallel_while_the_workers_pay():
    out = core._pool_policy_simulate(_jobs(0, 500, 75 * US, 50 * US))  # gain 1.5
    assert all(parallel for parallel, _, _, _ in out)
    assert not any(backed for _, backed, _, _ in out)
    assert out[-1][3] == pytest.approx(1.5)


def test_policy_keeps_gains_just_at_one_parallel():
    out = core._pool_policy_simulate(_jobs(0, 200, 50 * US, 50 * US))  # gain exactly 1: not below it
    assert not any(backed for _, backed, _, _ in out)


def test_policy_backs_off_after_a_losing_window_and_probes_with_doubling_intervals():
    # Workers that do not show up: each parallel job takes twice its serial time.
    jobs = _jobs(0, 4000, 50 * US, 100 * US)
    out = core._pool_policy_simulate(jobs)
    parallel = [p for p, _, _, _ in out]
    assert all(parallel[:WINDOW]) and not out[WINDOW - 2][1] and out[WINDOW - 1][1]  # backs off after window 1
    assert not any(parallel[WINDOW:WINDOW + 100])  # then the caller alone (the next probe is 20 ms away)
    # Probes: runs of PROBE parallel jobs, at 20, 40, 80, 160 ms ... after the previous one ended.
    runs, i = [], WINDOW
    while i < len(parallel):
        if parallel[i]:
            j = i
            while j < len(parallel) and parallel[j]:
                j += 1
            runs.append((jobs[i][0], j - i, out[j - 1][2]))
            i = j
        else:
            i += 1
    assert [n for _, n, _ in runs] == [PROBE] * len(runs) and len(runs) >= 3
    intervals = [r[2] for r in runs]
    assert intervals[:3] == [40 * MS, 80 * MS, 160 * MS]  # each failed probe doubles the interval
    gaps = [b[0] - a[0] for a, b in zip(runs, runs[1:])]
    assert gaps[0] >= 40 * MS and gaps[1] >= 80 * MS


def test_policy_probe_interval_is_capped():
    out = core._pool_policy_simulate(_jobs(0, 40000, 50 * US, 100 * US, every=1 * MS))
    assert max(interval for _, _, interval, _ in out) == 640 * MS


def test_policy_resumes_when_a_probe_pays():
    bad = _jobs(0, 200, 50 * US, 100 * US)
    good = _jobs(bad[-1][0] + 1 * MS, 200, 80 * US, 50 * US, every=1 * MS)  # the load went away
    out = core._pool_policy_simulate(bad + good)
    assert out[len(bad) - 1][1]  # backed off during the bad phase
    assert not out[-1][1] and all(p for p, _, _, _ in out[-50:])  # and parallel again for good


def test_policy_probe_just_above_one_does_not_resume():
    # A probe must show a clear gain (kResumeGain 1.1) before the workers are trusted again.
    bad = _jobs(0, 40, 50 * US, 100 * US)
    meh = _jobs(bad[-1][0] + 1 * MS, 3000, 52 * US, 50 * US, every=1 * MS)  # gain 1.04
    out = core._pool_policy_simulate(bad + meh)
    assert all(backed for _, backed, _, _ in out[len(bad):])


def test_policy_one_long_stall_outweighs_a_window_of_small_gains():
    # 31 jobs gaining 25 us each, one job whose worker was descheduled holding a chunk (4 ms): the window loses.
    jobs = _jobs(0, 31, 75 * US, 50 * US) + [(31 * 50 * US, 75 * US, 4 * MS)]
    out = core._pool_policy_simulate(jobs)
    assert out[-1][1] and out[-1][3] < 1.0


def test_policy_a_resume_that_does_not_last_keeps_probes_rare():
    # The load comes and goes: each probe pays, then the next window loses again. The back-offs after such short
    # resumes keep doubling the probe interval instead of starting again at 20 ms.
    jobs, t = [], 0
    while t < 5000 * MS:  # 50 ms paying, 50 ms losing, for 5 s
        jobs.append((t, 80 * US, 50 * US) if (t // (50 * MS)) % 2 else (t, 50 * US, 100 * US))
        t += 100 * US
    out = core._pool_policy_simulate(jobs)
    assert sum(1 for a, b in zip(out, out[1:]) if b[1] and not a[1]) >= 2  # backed off after resuming, again
    intervals = [interval for _, _, interval, _ in out]
    first_doubled = next(i for i, v in enumerate(intervals) if v > 20 * MS)
    assert min(intervals[first_doubled:]) > 20 * MS  # never back to 20 ms: the resumes did not last
    assert max(intervals) == 640 * MS


def test_policy_a_lasting_resume_starts_probing_afresh():
    bad = _jobs(0, 40, 50 * US, 100 * US)
    good = _jobs(bad[-1][0] + 1 * MS, 2000, 80 * US, 50 * US, every=1 * MS)  # 2 s of paying jobs
    bad2 = _jobs(good[-1][0] + 1 * MS, 40, 50 * US, 100 * US)
    out = core._pool_policy_simulate(bad + good + bad2)
    assert out[-1][1] and out[-1][2] == 20 * MS
