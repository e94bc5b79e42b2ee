"""Everything that speaks SQL: the embedded server, the pool, migrations and queries."""
