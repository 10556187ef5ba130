"""Integrations of tritium with other serving systems (cluster engines)."""
