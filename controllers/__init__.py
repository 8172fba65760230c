"""Caravanserai controllers: scheduler, node health and garbage collection, each its own process."""
