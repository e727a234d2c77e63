"""Running: configuration and knobs, the selection policy, planning, trials and keys,
executors, liveness and time limits, scoring, adaptive repeats."""
