"""Closing the loop from robot logs: the log format, recording a robot instance."""
