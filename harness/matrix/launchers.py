"""Who starts the ranks of a cell: the supervisor itself (``local``), SLURM's ``srun`` (``slurm``)
or Open MPI's ``mpirun`` (``mpi``).

A production multi-host job is started by a cluster launcher, and ``jax.distributed.initialize()``
without arguments recognises the launcher from its environment (``jax/_src/clusters/``:
``SlurmCluster`` on ``SLURM_JOB_ID``, ``OmpiCluster`` on Open MPI 4's ``OMPI_MCA_orte_hnp_uri``).
A launcher cell starts its ranks the same way, so that detection, and the runtime's discovery on
top of it, are what the cell tests. This module is the table of what differs between launchers:
the command that starts every rank, how a rank learns who it is, and how to tell whether the
launcher can run here. It starts nothing itself (``harness.matrix.cluster_launch`` does).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.network.addresses import BLOCK

__all__ = [
    "LAUNCHERS",
    "LOCAL",
    "MPI",
    "SLURM",
    "ClusterOptions",
    "forget_answers",
    "RankIdentity",
    "identity",
    "launcher_command",
    "no_hosts_of_their_own",
    "unavailable",
]

LOCAL, SLURM, MPI = "local", "slurm", "mpi"

#: every launcher, with what a user reads about it in ``xharness cells``
LAUNCHERS: dict[str, str] = {
    LOCAL: "the supervisor starts every rank itself (jax.distributed with an explicit coordinator)",
    SLURM: "srun starts the ranks as one job step; jax.distributed.initialize() detects SLURM",
    MPI: "mpirun starts the ranks; jax.distributed.initialize() detects Open MPI",
}

#: how to get each launcher on a machine that has none, shown when a cell skips
HOW_TO_GET: dict[str, str] = {
    SLURM: "start the project's one-machine cluster (bash ci/cluster.sh start, as root; then "
           "eval \"$(bash ci/cluster.sh env)\"), or run inside a site's SLURM cluster",
    MPI: "install Open MPI 4 (apt-get install openmpi-bin)",
}

PROBE_TIMEOUT = 10.0  # seconds a cluster has to answer before the cell is skipped


@dataclass(frozen=True)
class ClusterOptions:
    """What a site's cluster needs to hear about a cell: where it runs and for how long, for a
    launcher cell's ``srun`` and for the job a cell becomes under ``xharness run --on slurm``.
    Empty fields are left to the cluster's defaults (its default partition, the user's default
    account, the partition's time limit)."""

    partition: str = ""
    account: str = ""
    time_limit: str = ""  # SLURM's forms: "MM", "MM:SS", "HH:MM:SS", "D-HH:MM"
    nodes: int = 0  # 0: one node per process
    tasks_per_node: int = 0  # 0: one task per node
    extra: tuple[str, ...] = ()  # more launcher arguments, passed as given
    sbatch: tuple[str, ...] = ()  # more sbatch arguments for the cell's job (--on slurm): --mem, --gres...


@dataclass(frozen=True)
class RankIdentity:
    """Who a launched rank is, as its launcher's environment says: written into every record."""

    launcher: str
    rank: int
    local_rank: int
    host: str
    job: str = ""
    step: str = ""
    node_index: int = 0
    nodes: int = 1

    def fields(self) -> dict[str, object]:
        return {"launcher": self.launcher, "rank": self.rank, "local_rank": self.local_rank,
                "host": self.host, "job": self.job, "step": self.step, "node_index": self.node_index,
                "nodes": self.nodes}


def _int(environ: Mapping[str, str], *names: str, default: int = 0) -> int:
    for name in names:
        value = environ.get(name, "")
        if value.strip().lstrip("-").isdigit():
            return int(value)
    return default


def identity(launcher: str, environ: Mapping[str, str], hostname: str) -> RankIdentity:
    """The rank this process is, from its launcher's own variables (the ones JAX reads too)."""
    if launcher == SLURM:
        return RankIdentity(
            SLURM, _int(environ, "SLURM_PROCID"), _int(environ, "SLURM_LOCALID"),
            environ.get("SLURMD_NODENAME") or hostname, environ.get("SLURM_JOB_ID", ""),
            environ.get("SLURM_STEP_ID", ""), _int(environ, "SLURM_NODEID"),
            _int(environ, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", default=1),
        )
    if launcher == MPI:
        return RankIdentity(
            MPI, _int(environ, "OMPI_COMM_WORLD_RANK"), _int(environ, "OMPI_COMM_WORLD_LOCAL_RANK"),
            hostname, environ.get("OMPI_MCA_ess_base_jobid", ""), "",
            _int(environ, "OMPI_COMM_WORLD_NODE_RANK"), 1,
        )
    return RankIdentity(LOCAL, _int(environ, "HARNESS_PROCESS_ID"), 0, hostname)


def launcher_command(launcher: str, processes: int, options: ClusterOptions, job_name: str,
                     rank_argv: Sequence[str], *, on_nodes: bool = False) -> list[str]:
    """The command that starts ``processes`` ranks of ``rank_argv`` under ``launcher``.

    ``srun`` makes one job step: inside the allocation the harness runs in (``SLURM_JOB_ID`` is
    set), or in one it requests itself, named ``job_name`` so that exactly this launch's job can
    be found and cancelled. A rank that ends badly ends the step (``--kill-on-bad-exit``), as the
    supervisor stops a local cell when one rank dies. ``mpirun`` runs as root only when asked
    (this harness runs as root in CI), may place more ranks than cores on one machine, and ends
    every rank when one exits non-zero, which is its default. ``on_nodes``: ``mpirun`` places the
    ranks on the nodes of a SLURM allocation instead of this machine (:func:`_mpirun_on_nodes`)."""
    if launcher == SLURM:
        nodes = options.nodes or processes
        cmd = ["srun", f"--ntasks={processes}", f"--nodes={nodes}", "--kill-on-bad-exit=1",
               "--unbuffered", "--export=ALL", f"--job-name={job_name}"]
        if options.tasks_per_node:
            cmd.append(f"--ntasks-per-node={options.tasks_per_node}")
        elif nodes == processes:
            cmd.append("--ntasks-per-node=1")
        for flag, value in (("--partition", options.partition), ("--account", options.account),
                            ("--time", options.time_limit)):
            if value:
                cmd.append(f"{flag}={value}")
        return [*cmd, *options.extra, *rank_argv]
    if launcher == MPI:
        cmd = ["mpirun", "-n", str(processes), "--oversubscribe", "--tag-output"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if options.tasks_per_node or on_nodes:
            cmd += ["--map-by", f"ppr:{_per_node(processes, options)}:node"]
        cmd = [*cmd, *options.extra, *rank_argv]
        return _mpirun_on_nodes(processes, options, job_name, cmd) if on_nodes else cmd
    raise ValueError(f"launcher {launcher!r} starts no command (the supervisor starts local ranks)")


#: run inside a job step on one node: mpirun reads the nodes it may use from SLURM's variables
#: (its ras/slurm), which inside a step name only the step's node, so it gets the allocation's back
_ALLOCATION_AGAIN = (
    'export SLURM_NODELIST="$SLURM_JOB_NODELIST" SLURM_NNODES="$SLURM_JOB_NUM_NODES" '
    'SLURM_TASKS_PER_NODE="$0"; unset SLURM_STEP_ID SLURM_STEPID SLURM_STEP_NODELIST '
    'SLURM_STEP_NUM_NODES SLURM_STEP_NUM_TASKS SLURM_STEP_TASKS_PER_NODE; exec "$@"'
)


def _per_node(processes: int, options: ClusterOptions) -> int:
    """Ranks per node: the cell's own figure, else its ranks spread evenly over its nodes (one
    node per rank when it names no node count). mpirun's placement and the allocation agree."""
    return options.tasks_per_node or max(1, processes // (options.nodes or processes))


def _mpirun_on_nodes(processes: int, options: ClusterOptions, job_name: str, mpirun: list[str]) -> list[str]:
    """``mpirun`` on the first node of an allocation of its own, starting its daemons on the
    other nodes through SLURM (plm/slurm: ``srun`` again, no ssh). JAX's ``OmpiCluster`` takes the
    coordinator's address from ``OMPI_MCA_orte_hnp_uri``, the address of mpirun's own host, so
    mpirun must run where rank 0 runs, never on the host that submits (on the namespaced
    cluster, xh-ctld, where no rank runs)."""
    nodes = options.nodes or processes
    per_node = _per_node(processes, options)
    alloc = ["salloc", f"--nodes={nodes}", f"--ntasks={processes}", f"--ntasks-per-node={per_node}",
             f"--job-name={job_name}"]
    for flag, value in (("--partition", options.partition), ("--account", options.account),
                        ("--time", options.time_limit)):
        if value:
            alloc.append(f"{flag}={value}")
    step = ["srun", "--nodes=1", "--ntasks=1", "--relative=0", "--overlap", "--export=ALL", "--unbuffered"]
    return [*alloc, *step, "sh", "-c", _ALLOCATION_AGAIN, f"{per_node}(x{nodes})", *mpirun]


#: the answers of this process: (launcher, SLURM_CONF, PATH) -> (when asked, why not); every cell
#: of a launcher is probed once a minute at most, not once per cell
_ASKED: dict[tuple[str, str, str], tuple[float, str]] = {}
_ANSWER_KEPT = 60.0


def unavailable(launcher: str, environ: Mapping[str, str] | None = None) -> str:
    """Why ``launcher`` cannot run a cell here ("" when it can), with how to get it: the tool is
    missing, or no cluster answers (its controller is down, or munge is). Bounded: a cluster that
    does not answer within ``PROBE_TIMEOUT`` seconds is as good as absent."""
    env = dict(os.environ if environ is None else environ)
    if launcher == LOCAL:
        return ""
    key = (launcher, env.get("SLURM_CONF", ""), env.get("PATH", ""))
    asked = _ASKED.get(key)
    if asked is not None and time.monotonic() - asked[0] < _ANSWER_KEPT:
        return asked[1]
    why = _why_not(launcher, env)
    _ASKED[key] = (time.monotonic(), why)
    return why


def forget_answers() -> None:
    """Ask the launchers afresh at the next probe (a cluster was started or stopped)."""
    _ASKED.clear()


def no_hosts_of_their_own(launcher: str, environ: Mapping[str, str] | None = None) -> str:
    """Why ``launcher``'s ranks are not hosts of their own here ("" when they are): a launcher
    cell with ``network = "namespaces"`` runs only on a cluster whose every node has an address of
    198.18.0.0/15 (``ci/cluster.sh start --network namespaces``), and is skipped elsewhere; its
    ``mpirun`` then runs in an allocation of that cluster (``salloc``)."""
    env = dict(os.environ if environ is None else environ)
    if launcher == MPI and (why := unavailable(SLURM, env)):
        return f"mpirun places the ranks on the nodes of a SLURM allocation, and {why}"
    proc = _answer(["sinfo", "-h", "-N", "-o", "%N %o"], env)
    if isinstance(proc, str) or proc.returncode != 0:
        return unavailable(launcher, env) or "sinfo does not list the cluster's nodes"
    nodes = sorted({tuple(line.split()[:2]) for line in proc.stdout.splitlines() if len(line.split()) >= 2})
    shared = [f"{name} on {addr}" for name, addr in nodes if not _on_fabric(addr)]
    if not nodes or shared:
        return (f"the cluster's nodes share this machine's network ({', '.join(shared) or 'no node'}): "
                "start the cluster with bash ci/cluster.sh start --network namespaces")
    return ""


def _on_fabric(address: str) -> bool:
    try:
        return ipaddress.ip_address(address) in BLOCK
    except ValueError:
        return False


def _why_not(launcher: str, env: dict[str, str]) -> str:
    tool = {SLURM: "srun", MPI: "mpirun"}[launcher]
    if shutil.which(tool, path=env.get("PATH")) is None:
        return f"{tool} is not installed: {HOW_TO_GET[launcher]}"
    if launcher == MPI:
        return _mpi_version_problem(env)
    return _slurm_problem(env)


def _answer(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str] | str:
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"`{' '.join(cmd)}` did not answer within {PROBE_TIMEOUT:g} s"
    except OSError as exc:
        return f"`{' '.join(cmd)}` could not start: {exc}"


def _slurm_problem(env: dict[str, str]) -> str:
    proc = _answer(["sinfo", "-h", "-o", "%t %D"], env)
    if isinstance(proc, str):
        return f"no SLURM cluster answers: {proc}; {HOW_TO_GET[SLURM]}"
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())[:300] or f"exit {proc.returncode}"
        cause = "munge (the cluster's authentication) is down" if "munge" in said.lower() else "no SLURM cluster answers"
        return f"{cause}: sinfo says {said!r}; {HOW_TO_GET[SLURM]}"
    usable = [line for line in proc.stdout.splitlines() if re.match(r"(idle|mix|alloc|comp)", line)]
    if not usable:
        return f"the SLURM cluster has no node up (sinfo: {' '.join(proc.stdout.split()) or 'nothing'})"
    return ""


def _mpi_version_problem(env: dict[str, str]) -> str:
    proc = _answer(["mpirun", "--version"], env)
    if isinstance(proc, str):
        return proc
    first = (proc.stdout or proc.stderr).splitlines()[:1]
    match = re.search(r"Open MPI\)?\s*(\d+)", first[0]) if first else None
    if match is None:
        return f"mpirun is not Open MPI ({first[0] if first else 'no version'}): JAX detects Open MPI only"
    if int(match.group(1)) != 4:
        return (f"mpirun is Open MPI {match.group(1)}: JAX's OmpiCluster detects Open MPI 4's ORTE "
                "(OMPI_MCA_orte_hnp_uri); install Open MPI 4")
    return ""
