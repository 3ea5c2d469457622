"""Django's SQLite backend, with writers that queue on a file lock (see ``base``)."""
