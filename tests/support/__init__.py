"""Test support: start tritium-server as a subprocess and build model repositories."""
