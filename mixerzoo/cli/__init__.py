"""The ``mixerzoo`` command line."""
