"""``python -m flopplan`` runs the command line."""

from flopplan.cli import main

main()
