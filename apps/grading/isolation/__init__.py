"""Grading isolation: run a stranger's program so that it can read, reach, outlive or forge
nothing beyond its own scratch folder.

A package of its own with no Django import: it takes paths, limits and argv and returns an
`Outcome`. `apps.grading.grader` decides what an outcome means for a submission.

    probe = isolation_probe("/usr/bin/python3")          # bubblewrap, or none + reason
    outcome = run_program(isolation=probe.isolation, bwrap=probe.bwrap, input_dir=folder,
                          program=["main.py", "config.yaml"], limits=limits,
                          python="/usr/bin/python3")

`python -m apps.grading.isolation` prints what this host can do.
"""

from apps.grading.isolation.limits import MAX_METRICS_BYTES, Limits, sandbox_host_uid
from apps.grading.isolation.probe import Probe, interpreter_problem, isolation_probe
from apps.grading.isolation.run import BUBBLEWRAP, NONE, Outcome, run_program
from apps.grading.isolation.scratch import input_folder, input_folder_hand_over

__all__ = [
    "BUBBLEWRAP",
    "MAX_METRICS_BYTES",
    "NONE",
    "Limits",
    "Outcome",
    "Probe",
    "input_folder",
    "input_folder_hand_over",
    "interpreter_problem",
    "isolation_probe",
    "run_program",
    "sandbox_host_uid",
]
