"""Rich renderings of results, one module per area; only the CLI imports them."""
