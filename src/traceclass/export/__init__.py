"""Writers that convert a Trace into other tools' formats (speedscope)."""
