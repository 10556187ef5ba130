"""Model repository: layout scan, version policy, lifecycle, path checks."""
