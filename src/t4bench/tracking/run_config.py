"""What tracking reads of a run's config: the run spec (t4bench.spec.RunSpec) as a protocol, so that
tracking/ stays a low floor and imports nothing above it."""

from __future__ import annotations

from typing import Any, Protocol


class RunConfig(Protocol):
    """The run spec's typed sections and its composed config's keys (tracking.uri, model.name ...)."""

    @property
    def tags(self) -> dict[str, str]:
        """The user's tracking.tags, then what the runner derived."""
        ...

    def logged_config(self) -> dict[str, Any]:
        """The config as the run trains with it, `${...}` resolved."""
        ...

    def __getattr__(self, name: str) -> Any: ...
