"""caractrl and cara: the command-line tools."""
