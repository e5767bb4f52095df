"""Looking runs up by Flow ID, and the read-only hooks the tests use to see inside a run."""

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import AttemptRecord, MethodAttempts
from dex_agents.devserver._errors import flow_closing, flow_not_active, flow_not_found
from dex_agents.devserver._state import Phase, Run


class RunLookup:
    """Finds a Flow's runs and reads what a test asks of them (the base of `Engine`)."""

    _runs: dict[str, list[Run]]
    _methods: MethodAttempts

    def run(self, flow_id: str, run_id: str = "") -> Run:
        """Return the latest run of ``flow_id`` (or the exact ``run_id``).

        Raises:
            ServiceError: ``NOT_FOUND`` / ``FLOW_NOT_EXISTS`` when there is none.
        """
        runs = self._runs.get(flow_id)
        if not runs:
            raise flow_not_found(flow_id)
        if not run_id:
            return runs[-1]
        for run in runs:
            if run.run_id == run_id:
                return run
        raise flow_not_found(flow_id)

    def active_run(self, flow_id: str, run_id: str = "") -> Run:
        """Return the run if it is still running, else raise ``FLOW_NOT_EXISTS``."""
        run = self.run(flow_id, run_id)
        if not run.running:
            raise flow_not_active(flow_id)
        if run.closing:
            raise flow_closing(flow_id)
        return run

    def attempts(self, flow_id: str | None = None) -> list[AttemptRecord]:
        """Return every Step method attempt so far (of one Flow, if given)."""
        return [a for a in self._methods.log if flow_id is None or a.flow_id == flow_id]

    def flow_ids(self) -> list[str]:
        """Return every Flow ID ever started."""
        return list(self._runs)

    # ------------------------------------------------------------------ test hooks

    def waiting_executions(self, flow_id: str) -> list[str]:
        """Return the IDs of the run's executions that are waiting on a condition."""
        run = self.run(flow_id)
        return [e.id for e in run.executions.values() if e.phase == Phase.WAITING]

    def active_executions(self, flow_id: str) -> dict[str, str]:
        """Return ``{step execution ID: phase}`` of the run's active executions."""
        run = self.run(flow_id)
        return {e.id: e.phase for e in run.executions.values()}

    def last_heartbeat(self, flow_id: str, step_execution_id: str) -> pb.Value | None:
        """Return the last heartbeat value the server holds for an active execution."""
        execution = self.run(flow_id).executions.get(step_execution_id)
        return None if execution is None else execution.last_heartbeat

    def progress_frames(self, flow_id: str, step_execution_id: str) -> int:
        """Return how many heartbeat/Stream frames an active execution sent so far."""
        execution = self.run(flow_id).executions.get(step_execution_id)
        return 0 if execution is None else execution.progress_frames

    def attribute(self, flow_id: str, key: str) -> pb.Value | None:
        """Return the raw stored value of one Attribute (physical key) or ``None``."""
        return self.run(flow_id).attributes.get(key)

    def channel_messages(self, flow_id: str, name: str) -> list[pb.ChannelMessage]:
        """Return the queued messages of one Channel (physical name), oldest first."""
        return list(self.run(flow_id).channels.get(name, ()))
