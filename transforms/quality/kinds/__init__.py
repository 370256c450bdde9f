"""The pair scorers' kinds, one module each (its class and its `Config`), each named
by one `register` line in `quality/registry.py`."""
