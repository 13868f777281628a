"""What each consumer of an export can run, read from the consumer's own source, one module per consumer."""
