"""The notices a dashboard page shows after a redirect, by code: `?msg=` names one of these,
never carries the text, so a crafted link cannot put words of its own on our page."""

from __future__ import annotations

MESSAGES = {
    "alias_moved": "The alias was moved: the model's aliases below show where it points.",
    "cancelled": "Cancelled.",
    "cancel_conflict": "Not cancelled: the job had already ended, or kept changing state.",
    "cancel_not_found": "Not cancelled: the job is gone.",
    "cancel_ray_unreachable": "Not cancelled: Ray could not be reached; try again.",
}


def shown(code: str) -> str:
    """The text for a notice code; nothing for any other value."""
    return MESSAGES.get(code, "")
