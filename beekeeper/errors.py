"""
Errors raised by beekeeper. Each names the key or input at fault and the fix.
"""

try:  # pyinfra prints its DeployError as one clean line; the verify suite runs without it
    from pyinfra.api.exceptions import DeployError
except ImportError:  # pragma: no cover - hosts that only run verify/

    class DeployError(Exception):  # type: ignore[no-redef]
        """Stand-in when pyinfra is not installed."""


class BeekeeperError(Exception):
    """Base class for every error beekeeper raises on purpose."""


class ConfigError(BeekeeperError, DeployError, ValueError):
    """Host or group data is invalid; raised before any operation touches a host."""


class PreflightError(BeekeeperError, DeployError):
    """A host fact rules the deploy out (wrong OS, WSL2 rules, GPU or driver too old)."""


class SandboxError(BeekeeperError, RuntimeError):
    """The local sandbox host could not be created, reached or removed."""


class VerifyError(BeekeeperError, RuntimeError):
    """A verification run could not be carried out (not: a check that failed)."""
