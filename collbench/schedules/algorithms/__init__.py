"""One module per algorithm family, each exporting its specs (builder and cost formulas) in ``SPECS``.

Importing this package imports none of them: ``collbench.schedules.registry`` lists the modules.
"""
