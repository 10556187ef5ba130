"""Worker processes: one per model instance, the protocol and channel to the core."""
