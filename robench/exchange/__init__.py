"""What moves results between people: merging databases, re-running stored trials to verify
them, and publishing a leaderboard repository. Above run/ (it re-scores and re-runs trials)
and present/ (the publish pipeline builds the site)."""
