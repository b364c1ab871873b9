"""A channel's settings: its default repository, team, policy and approvers, in a modal, audited.

`/massgen settings` opens the modal (`ChannelSettings.open`); a submission is checked against the
configured names before the ack (`check`) and saved, with an audit row per changed field, only for
the channel's approvers and workspace admins (`save`). Each run's request gets the channel's
defaults (`select`); what it used travels with the run as a `Selection` and shows on its status.
"""

from bot.channel_settings.defaults import (
    ChannelDefaults,
    Choices,
    Selection,
    repository_names,
    select,
    unknown,
)
from bot.channel_settings.service import REFUSED, ChannelSettings
from bot.channel_settings.store import Change, ChannelSettingsStore, channel_metadata

__all__ = [
    "REFUSED",
    "Change",
    "ChannelDefaults",
    "ChannelSettings",
    "ChannelSettingsStore",
    "Choices",
    "Selection",
    "channel_metadata",
    "repository_names",
    "select",
    "unknown",
]
