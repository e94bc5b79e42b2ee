"""`python -m subspace` runs the CLI."""

from subspace.cli import main

main()
