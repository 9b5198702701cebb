"""The money's reads and records: billing reads, namespace caps, the hourly ghost-charge
audit; run in each tick by its money chore (`runtime/tick/chores/money.py`)."""
