"""One rank of tests/test_distributed_checkpoint.py's sharding check: a DataLoader.from_generator fed by
shard_reader trains a one-weight model under fleet, and rank 0 writes which sample ids each rank saw.

    python tests/distributed/shard_worker.py N_SAMPLES BATCH OUT.json
"""
import json
import sys

import numpy as np

import fluidlite as fluid
from fluidlite.distributed import comm, shard_reader
from fluidlite.incubate.fleet.base import role_maker
from fluidlite.incubate.fleet.collective import fleet


def main():
    n_samples, batch, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    fleet.init(role_maker.PaddleCloudRoleMaker())
    main_prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main_prog, startup):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.01)).minimize(loss)
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4)

    def samples():  # sample i is the number i
        for i in range(n_samples):
            yield (np.array([i], dtype="float32"),)
    loader.set_sample_generator(shard_reader(samples, drop_last=True), batch_size=batch, drop_last=False,
                                 places=fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    seen = []
    for data in loader():
        xs, = exe.run(fleet.main_program, feed=data, fetch_list=[x])
        seen.extend(int(v) for v in np.asarray(xs).ravel())
    everyone = comm.allgather_object(seen)
    if fleet.worker_index() == 0:
        with open(out, "w") as f:
            json.dump(everyone, f)
    fleet.barrier_worker()


if __name__ == "__main__":
    main()
