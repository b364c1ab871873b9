"""Permission engine and approval lifecycle: who may do what, and asking a human when in doubt.

The lowest layer: it knows nothing of Slack or language models.
"""
