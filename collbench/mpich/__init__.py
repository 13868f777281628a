"""MPICH's facts: its collectives' algorithms and their names (:mod:`.algorithms`)."""
