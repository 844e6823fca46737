"""The SparkApplication's mainApplicationFile (local:///opt/streamlets/runner.py in the streamlet
image): Spark's driver runs this file with the application's arguments, `--config <run.json>`."""

from streamlets.driver import main

raise SystemExit(main())
