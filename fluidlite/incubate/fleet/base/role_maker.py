"""Fluid 1.x's role makers for collective training: who this process is (its rank, the number of workers).

Every role maker here makes this process a worker of a collective job whose transport is MPI
(fluidlite.distributed.comm): ``MPISymetricRoleMaker`` takes the rank from MPI itself; ``PaddleCloudRoleMaker``
and ``UserDefinedCollectiveRoleMaker`` take it from the environment or the arguments (as Paddle's launcher
sets it) and check it against MPI's, so a launcher and MPI that disagree fail at ``fleet.init`` with both values
named. Servers (parameter-server training) are out of scope: ``is_server()`` is False everywhere.
"""
import os

from ....distributed import comm

__all__ = ["Role", "RoleMakerBase", "MPISymetricRoleMaker", "PaddleCloudRoleMaker", "UserDefinedCollectiveRoleMaker"]


class Role:
    WORKER = 1
    SERVER = 2


class RoleMakerBase:
    """What fleet asks a role maker: generate_role() (joins the job), worker_index/worker_num, is_worker,
    is_first_worker, get_trainer_endpoints."""

    def __init__(self):
        self._role = Role.WORKER
        self._current_id = -1
        self._worker_num = 0
        self._worker_endpoints = []
        self._server_endpoints = []
        self._role_is_generated = False

    # What the launcher or the user says this process is; None: whatever MPI says.
    def _declared(self):
        return None, None

    def generate_role(self):
        if self._role_is_generated:
            return
        declared_id, declared_num = self._declared()
        rank, size = comm.init()
        name = type(self).__name__
        if declared_num is not None and declared_num != size:
            raise ValueError("%s: the job has %d trainers (%s) but MPI started %d ranks: launch with "
                             "mpiexec -n %d (or python -m fluidlite.distributed.launch --nproc_per_node %d)"
                             % (name, declared_num, self._declared_from(), size, declared_num, declared_num))
        if declared_id is not None and declared_id != rank:
            raise ValueError("%s: this process is trainer %d (%s) but MPI rank %d; the trainer id must be the MPI "
                             "rank" % (name, declared_id, self._declared_from(), rank))
        self._current_id, self._worker_num = rank, size
        if not self._worker_endpoints:
            self._worker_endpoints = ["rank%d" % r for r in range(size)]
        self._role_is_generated = True

    def _declared_from(self):
        return "arguments"

    def _require(self):
        if not self._role_is_generated:
            self.generate_role()

    def is_worker(self):
        return True

    def is_server(self):
        return False

    def is_first_worker(self):
        self._require()
        return self._current_id == 0

    def worker_index(self):
        self._require()
        return self._current_id

    def server_index(self):
        raise NotImplementedError("%s: there are no servers in collective training (parameter-server training is "
                                  "out of scope)" % type(self).__name__)

    def worker_num(self):
        self._require()
        return self._worker_num

    def server_num(self):
        return 0

    def get_trainer_endpoints(self):
        self._require()
        return list(self._worker_endpoints)

    def get_pserver_endpoints(self):
        return []

    def role_id(self):
        return self.worker_index()

    def to_string(self):
        return "role: worker, current_id: %s, worker_num: %s, worker_endpoints: %s" % (
            self._current_id, self._worker_num, self._worker_endpoints)

    __repr__ = to_string


class MPISymetricRoleMaker(RoleMakerBase):
    """Every MPI rank is a worker; its index is its MPI rank (``mpiexec -n N python train.py``)."""

    def _declared_from(self):
        return "MPI"


class PaddleCloudRoleMaker(RoleMakerBase):
    """The role from the environment a launcher sets: PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM,
    PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT (``python -m fluidlite.distributed.launch`` sets them).
    Unset, MPI's rank and size are used. Only collective mode: ``is_collective=False`` (parameter servers) raises."""

    def __init__(self, is_collective=True, **kwargs):
        super().__init__()
        if not is_collective:
            raise NotImplementedError("PaddleCloudRoleMaker(is_collective=False): parameter-server training is out "
                                      "of scope in fluidlite; collective training is is_collective=True")
        self._is_collective = True
        eps = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "")
        self._worker_endpoints = [e for e in eps.split(",") if e]

    @staticmethod
    def _env_int(name):
        value = os.environ.get(name)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except ValueError:
            raise ValueError("PaddleCloudRoleMaker: environment variable %s must be an integer, got %r"
                             % (name, value)) from None

    def _declared(self):
        return self._env_int("PADDLE_TRAINER_ID"), self._env_int("PADDLE_TRAINERS_NUM")

    def _declared_from(self):
        return "PADDLE_TRAINER_ID=%s, PADDLE_TRAINERS_NUM=%s" % (os.environ.get("PADDLE_TRAINER_ID"),
                                                                os.environ.get("PADDLE_TRAINERS_NUM"))


class UserDefinedCollectiveRoleMaker(RoleMakerBase):
    """The role from arguments: current_id and worker_endpoints (one per trainer)."""

    def __init__(self, current_id=0, worker_endpoints=None):
        super().__init__()
        if not isinstance(current_id, int) or current_id < 0:
            raise ValueError("UserDefinedCollectiveRoleMaker: current_id must be an int >= 0, got %r" % (current_id,))
        if not worker_endpoints:
            raise ValueError("UserDefinedCollectiveRoleMaker: worker_endpoints must list one endpoint per trainer")
        self._declared_id = current_id
        self._worker_endpoints = list(worker_endpoints)
        if current_id >= len(self._worker_endpoints):
            raise ValueError("UserDefinedCollectiveRoleMaker: current_id %d is not below the %d worker endpoints"
                             % (current_id, len(self._worker_endpoints)))

    def _declared(self):
        return self._declared_id, len(self._worker_endpoints)
