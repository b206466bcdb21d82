"""The database adapter: rows, engine, repositories and the unit of work. Nothing outside
this package sees a Session or a row; repositories return domain objects."""
