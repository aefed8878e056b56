"""Run untrusted code: bubblewrap namespaces, rlimits, a trusted harness, a bounded pool."""

from swarmrl.sandbox.infra import InfraErrorRateExceeded, check_infra_errors
from swarmrl.sandbox.limits import STATUSES, ExecResult, Limits
from swarmrl.sandbox.pool import SandboxPool, SandboxUnavailable, limits_from_config, make_pool
from swarmrl.sandbox.runner import run_job

__all__ = ["STATUSES", "ExecResult", "InfraErrorRateExceeded", "Limits", "SandboxPool",
           "SandboxUnavailable", "check_infra_errors", "limits_from_config", "make_pool", "run_job"]
