"""The root of the state operations' errors (savepoints, restore, repartitioning, state export):
catch StateError to handle any of them. Each message names the savepoint, checkpoint, batch or
operator at fault and says what to do.

A root of its own beside streamlets.errors.StreamletError (SDK and runtime) and
blueprint.errors.BlueprintError (spec, deployment, sandbox, CLIs): the driver and the sandbox
catch StreamletError around a streamlet's start, and a state error there keeps its own report.
"""


class StateError(Exception):
    """Base class of every error a state operation raises on purpose (SavepointError,
    StateExportError, RepartitionError)."""
