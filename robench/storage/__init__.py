"""Storage: the SQLite schema and writes, migrations, read-only access, verification records,
metadata."""
