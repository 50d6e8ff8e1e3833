"""The language writer: its checkpoint, its state in the store, its commit, the long-running service."""
