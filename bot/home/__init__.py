"""The App Home tab: what waits for this user's approval, and recent runs."""

from bot.home.publish import HomeTab, RecentRuns

__all__ = [
    "HomeTab",
    "RecentRuns",
]
