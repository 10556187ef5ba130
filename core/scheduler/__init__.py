"""Schedulers: how requests of a model reach its instances (default, batchers, ensembles)."""
