"""The acode command line: a thin client of the actors' protocol."""
