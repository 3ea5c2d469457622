"""Database backends that Flowsite ships for its own deployments (see ``sqlite3``)."""
