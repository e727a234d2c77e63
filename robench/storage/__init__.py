"""Storage: the SQLite schema and writes, migrations, read-only access, merge, metadata,
provenance."""
