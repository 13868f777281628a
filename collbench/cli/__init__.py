"""The command line: Typer commands, one module each, and Rich rendering. Only this package imports
typer and rich; it builds config objects and hands them to the core."""
