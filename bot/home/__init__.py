"""The App Home tab: what waits for this user's approval, and the recent runs they may see."""

from bot.home.access import ChannelAccess
from bot.home.publish import HomeTab, RecentRuns

__all__ = [
    "ChannelAccess",
    "HomeTab",
    "RecentRuns",
]
