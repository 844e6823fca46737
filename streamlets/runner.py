"""Re-export shim (one release): the runner moved to streamlets.runtime.runner, the driver entry
point to streamlets.driver. `python -m streamlets.runner --config run.json` keeps working.
"""

import sys

from .driver import main
from .loading import StreamletLoadError, check_streamlet_class, load_streamlet_class
from .runtime.runner import StreamletRuntime, start_control_listener, transport_for
from .state.prepare import prepare_checkpoints

__all__ = ["StreamletLoadError", "StreamletRuntime", "check_streamlet_class", "load_streamlet_class", "main",
           "prepare_checkpoints", "start_control_listener", "transport_for"]

if __name__ == "__main__":
    sys.exit(main())
