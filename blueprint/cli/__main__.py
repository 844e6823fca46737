"""`python -m blueprint.cli ...`: the `blueprint` command."""

from .app import main

main()
