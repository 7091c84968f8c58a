"""
Errors raised by beekeeper. Each names the key or input at fault and the fix. Plain
exceptions (no pyinfra here): deploy.py turns one into pyinfra's one-line failure.
"""

class BeekeeperError(Exception):
    """Base class for every error beekeeper raises on purpose."""


class ConfigError(BeekeeperError, ValueError):
    """Host or group data is invalid; raised before any operation touches a host."""


class PreflightError(BeekeeperError):
    """A host fact rules the deploy out (wrong OS, WSL2 rules, GPU or driver too old)."""


class SandboxError(BeekeeperError, RuntimeError):
    """The local sandbox host could not be created, reached or removed."""


class VerifyError(BeekeeperError, RuntimeError):
    """A verification run could not be carried out (not: a check that failed)."""
