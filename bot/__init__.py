"""Slack adapter and composition root: the only place that wires everything together."""
