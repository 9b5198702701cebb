"""The built-in resources' parts of the tick's report (`TickReport.sections`), as a new
resource keeps its own: what the metrics read of a tick besides its actions. None adds a
word to the tick's log line (`line()` is None): the metrics and the log tell them."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.core.resources.clusters import UnrunCluster
from reconciler.runtime.tick.tick_report import TickReport


@dataclass
class ClusterSection:
    """The Instant Clusters' part (`resources/clusters.py`)."""

    leaks: list[UnrunCluster] = field(default_factory=list)
    """Clusters of ours that no Job's gang has run for the orphan grace (the leak audit,
    once the tick is planned)."""
    created: list[str] = field(default_factory=list)
    """Clusters RunPod made this tick."""

    @classmethod
    def of(cls, report: TickReport) -> ClusterSection:
        """The report's, or an empty one (a tick that did not get so far)."""
        return report.section(cls) or cls()

    def line(self) -> str | None:
        return None


@dataclass
class RegistrySection:
    """The registry credentials' part (`resources/registries.py`)."""

    deleted: list[str] = field(default_factory=list)
    """Credentials of ours collected this tick."""

    @classmethod
    def of(cls, report: TickReport) -> RegistrySection:
        """The report's, or an empty one (nothing collected)."""
        return report.section(cls) or cls()

    def line(self) -> str | None:
        return None


@dataclass
class VolumeSection:
    """The network volumes' part (`resources/volumes.py`)."""

    leaks: list[str] | None = None
    """Network volumes of ours that no PV names (kept, reported); None when the leak
    audit did not run this tick."""

    @classmethod
    def of(cls, report: TickReport) -> VolumeSection:
        """The report's, or one that says the audit did not run."""
        return report.section(cls) or cls()

    def line(self) -> str | None:
        return None
