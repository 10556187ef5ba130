"""Backends: the Python backend API and the libtriton_<name> loader."""
