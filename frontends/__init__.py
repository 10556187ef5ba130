"""Endpoint modules (frontends): thin translations of wire protocols into the core's in-process API."""
