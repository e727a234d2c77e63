"""Running: configuration and knobs, the selection policy, planning, trials and keys,
executors, scoring, adaptive repeats."""
