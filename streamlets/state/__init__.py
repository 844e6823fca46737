"""State operations on Spark checkpoints, as Flink offers them: savepoints (savepoint), restore
and branches with their compatibility check (restore), offline rescaling (repartition), state
export and import (export), the driver's start-time preparation (prepare), and the control
commands savepoint and dump-state (commands).

Built on streamlets.runtime (checkpoints, storage, the runner for restore's dry run); the runtime
never imports this package. Importing it registers its control commands and the imported-state
reader with the runtime (streamlets.runtime.registry).
"""

from . import commands  # noqa: F401  (registers the state commands with the runtime)
