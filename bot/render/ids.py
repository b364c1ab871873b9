"""Action and callback ids of every interactive element we render; listeners register on these.

Button `value`s carry an id only (a request id or a run id, or `run_id:label` for answers); the
listener looks everything else up server-side.
"""

from __future__ import annotations

from typing import Final

# Approval message buttons; value = approval request id.
APPROVE_ONCE: Final = "approve_once"
APPROVE_RUN: Final = "approve_run"
DENY: Final = "deny"
DETAILS: Final = "details"
VIEW_DIFF: Final = "view_diff"  # only on requests whose action carries a diff
# Root status message buttons; value = run id.
RUN_CANCEL: Final = "run_cancel"
RUN_FINISH_NOW: Final = "run_finish_now"
# "Show full" on an answer preview; value = "<run id>:<answer label>".
ANSWER_FULL: Final = "answer_full"

ACTION_IDS: Final = frozenset(
    {APPROVE_ONCE, APPROVE_RUN, DENY, DETAILS, VIEW_DIFF, RUN_CANCEL, RUN_FINISH_NOW, ANSWER_FULL}
)

# Modal callback ids (views.open payloads).
DENY_MODAL: Final = (
    "deny_reason"  # private_metadata = request id; input block DENY_REASON_BLOCK/DENY_REASON_INPUT
)
DETAILS_MODAL: Final = "approval_details"  # read-only, no submit
ANSWER_MODAL: Final = "answer_full_view"  # read-only, no submit
DENY_REASON_BLOCK: Final = "deny_reason_block"
DENY_REASON_INPUT: Final = "deny_reason_input"
DIFF_MODAL: Final = "approval_diff"  # read-only, no submit; private_metadata = request id
# `/massgen settings`; private_metadata = channel id; one input block per setting, action id "value".
SETTINGS_MODAL: Final = "channel_settings"
SETTING_REPOSITORY: Final = "setting_repository"
SETTING_TEAM: Final = "setting_team"
SETTING_POLICY: Final = "setting_policy"
SETTING_APPROVERS: Final = "setting_approvers"
SETTING_GROUP: Final = "setting_group"
SETTING_INPUT: Final = "value"

CALLBACK_IDS: Final = frozenset({DENY_MODAL, DETAILS_MODAL, ANSWER_MODAL, DIFF_MODAL, SETTINGS_MODAL})
