"""What NCCL is, read from its source: one home below the runtime and the exports, which both ask it.

* :mod:`.algorithms`: algorithms, protocols and collectives, their numbering, spellings and arrival.
* :mod:`.support`: what NCCL can run per collective, version and communicator shape.
* :mod:`.channels`: how many channels each version holds (the bound of a tuner's count).
* :mod:`.variants`: ``native`` and ``native:<algorithm>/<protocol>``, the names that force NCCL.
* :mod:`.tuning_log`: the per-call TUNING log lines, as text.

Running NCCL (forcing a communicator, reading its log files) is ``collbench.runtime.cuda.nccl``'s.
"""
