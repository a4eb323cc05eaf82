"""3 fleet steps of a small MLP on each rank with the profiler on (tests/test_distributed.py): prints, on rank 0,
one JSON line with what the profile shows of the collectives; the test reads it and the GLOG lines on stderr."""
import json

import numpy as np

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.incubate.fleet.base import role_maker
from fluidlite.incubate.fleet.collective import DistributedStrategy, fleet


def main():
    fleet.init(role_maker.MPISymetricRoleMaker())
    main_prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main_prog, startup):
        x = fluid.layers.data(name="x", shape=[16], dtype="float32")
        h = fluid.layers.fc(x, 32, act="relu")
        loss = fluid.layers.mean(fluid.layers.fc(h, 4))
        strategy = DistributedStrategy()
        strategy.fuse_grad_size_in_MB = 500 / (1 << 20)  # fc_1 (4 + 128 floats) and fc_0 (32 + 512) apart
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    feed = {"x": np.ones((8, 16), "float32")}
    exe.run(fleet.main_program, feed=feed, fetch_list=[loss])
    profiler.start_profiler("CPU")
    for _ in range(3):
        exe.run(fleet.main_program, feed=feed, fetch_list=[loss])
    profiler.stop_profiler(print_report=False, profile_path=None)
    comm_events = [e for e in profiler.events() if e["category"] == "Communication"]
    main_thread = {e["thread"] for e in profiler.events() if e["name"] == "Executor::run"}
    if fleet.worker_index() == 0:
        print(json.dumps({
            "buckets": fleet._buckets,
            "allreduce_bytes": sorted({e["bytes"] for e in comm_events if e["name"] == "c_allreduce_sum"}),
            "allreduce_calls": sum(e["name"] == "c_allreduce_sum" for e in comm_events),
            "on_main_thread": sum(e["thread"] in main_thread for e in comm_events if e["name"] == "c_allreduce_sum"),
        }), flush=True)
    fleet.barrier_worker()


if __name__ == "__main__":
    main()
