"""The state store: SQLAlchemy models and the database session factory."""
