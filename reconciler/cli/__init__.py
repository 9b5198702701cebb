"""The command line: `reconciler sync`, `state show`, `demo`, `db upgrade`."""
