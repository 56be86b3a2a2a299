"""The notices a dashboard page shows after a redirect, by code: `?msg=` names one of these,
never carries the text, so a crafted link cannot put words of its own on our page."""

from __future__ import annotations

MESSAGES = {
    "alias_moved": "The alias was moved: the model's aliases below show where it points.",
    "cancelled": "Cancelled.",
    "cancel_conflict": "Not cancelled: the job had already ended, or kept changing state.",
    "cancel_not_found": "Not cancelled: the job is gone.",
    "cancel_ray_unreachable": "Not cancelled: Ray could not be reached; try again.",
    "paused": "Paused: it holds nothing until resumed.",
    "pause_running": "Pausing: the run checkpoints at its next step, then gives back its CPUs.",
    "pause_submitted": "Pausing: the run checkpoints at its next step, then gives back its CPUs.",
    "pause_conflict": "Not paused: the job has ended.",
    "pause_not_found": "Not paused: the job is gone.",
    "resume_queued": "Resumed: queued again, it goes on from its checkpoint.",
    "resume_running": "It is running: nothing to resume.",
    "resume_submitted": "It is running: nothing to resume.",
    "resume_conflict": "Not resumed: it has ended, or is still pausing (try again once paused).",
    "resume_not_found": "Not resumed: the job is gone.",
}


def shown(code: str) -> str:
    """The text for a notice code; nothing for any other value."""
    return MESSAGES.get(code, "")
