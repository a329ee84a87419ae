"""What reading the cluster can fail with, free of the kubernetes client (slow to import)."""

from __future__ import annotations

import json


class ConfigError(RuntimeError):
    """The kubeconfig could not be loaded."""


class TransportError(RuntimeError):
    """No answer came from the API server."""

    @property
    def reason(self) -> str:
        return str(self)


class ApiError(RuntimeError):
    """The API server answered with an HTTP error."""

    def __init__(self, status: int, reason: str, body: bytes | str | None = None) -> None:
        super().__init__(f"{status} {reason}")
        self.status, self.reason, self.body = status, reason, body

    def message(self) -> str:
        """The Status message the server gave, or its reason."""
        try:
            return str(json.loads(self.body or "{}").get("message") or self.reason)
        except (ValueError, AttributeError):
            return self.reason
