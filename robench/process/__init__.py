"""Process utilities at the ground of robench: time limits and interrupts (guard), whether a
process or its parent still lives (liveness), and the provenance of a run (versions, machine,
git revision, secrets redacted). They import nothing of robench above the ground room."""
