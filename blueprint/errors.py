"""The root of the errors the blueprint side raises on purpose (spec, deployment, sandbox, CLIs):
catch BlueprintError to handle any of them. The SDK's and runtime's errors derive from
streamlets.errors.StreamletError, the state operations' from streamlets.state.errors.StateError."""


class BlueprintError(Exception):
    """Base class of every error of the blueprint packages (BlueprintLoadError, BuildError,
    SandboxError, ...). The message names the file, field or resource at fault and what to do."""
