"""fleet's savers on 2 ranks (tests/test_distributed.py): rank 0 writes, the others return once it is written, and a
failed write raises on every rank. Prints, on rank 0, the predictions on a fixed input as JSON.

    mpiexec -n 2 python tests/distributed/save_worker.py DIR
"""
import json
import os
import sys

import numpy as np

import fluidlite as fluid
from fluidlite.incubate.fleet.base import role_maker
from fluidlite.incubate.fleet.collective import fleet


def main():
    out_dir = sys.argv[1]
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    main_prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main_prog, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        pred = fluid.layers.fc(fluid.layers.fc(x, 8, act="tanh"), 2)
        loss = fluid.layers.mean(fluid.layers.square(pred))
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.05)).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    rng = np.random.RandomState(fleet.worker_index())  # each rank its own data
    for _ in range(3):
        exe.run(fleet.main_program, feed={"x": rng.rand(6, 4).astype("float32")}, fetch_list=[loss])
    probe = np.linspace(-1, 1, 8, dtype="float32").reshape(2, 4)
    infer = fleet._origin_program.clone(for_test=True)
    got = exe.run(infer, feed={"x": probe}, fetch_list=[pred.name])[0]
    # every rank holds the same parameters (the allreduced updates), so the same predictions
    everyone = fluid.distributed.comm.allgather_object(got.tolist())
    assert everyone[0] == everyone[1], everyone
    model_dir, params_dir = os.path.join(out_dir, "model"), os.path.join(out_dir, "params")
    fleet.save_inference_model(exe, model_dir, ["x"], [pred])
    fleet.save_persistables(exe, params_dir)
    # rank 0 wrote; every rank returns after it did
    assert os.path.exists(os.path.join(model_dir, "__model__")), os.listdir(out_dir)
    assert os.listdir(params_dir)
    blocker = os.path.join(out_dir, "not_a_dir")
    with open(blocker, "w") as f:
        f.write("a file where the save wants a directory")
    try:
        fleet.save_persistables(exe, os.path.join(blocker, "sub"))
    except RuntimeError as e:
        assert str(e).startswith("fleet.save_persistables: rank 0 failed to write: "), str(e)
    else:
        raise AssertionError("the failed save did not raise on rank %d" % fleet.worker_index())
    if fleet.worker_index() == 0:
        print(json.dumps(got.tolist()), flush=True)
    fleet.barrier_worker()


if __name__ == "__main__":
    main()
