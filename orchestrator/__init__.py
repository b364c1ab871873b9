"""The agent team: providers, coordination, tools, sandboxed workspaces, run events and cost.

Imports `approvals`; never Slack.
"""
