"""The root of the state operations' errors (savepoints, restore, repartitioning, state export):
catch StateError to handle any of them. Each message names the savepoint, checkpoint, batch or
operator at fault and says what to do."""

from ..errors import StreamletError


class StateError(StreamletError):
    """Base class of every error a state operation raises on purpose (SavepointError,
    StateExportError, RepartitionError)."""
