"""The rows of a JSONL training file: numtune's `{"prompt", "answer"}` or OpenAI's chat
rows `{"messages": [...]}`; a numtune row may add `"image": "<path>"` (absolute, or relative
to the JSONL file's folder), or the id of an image uploaded with purpose vision
(`"image": "file-…"`, jobs/data/jsonl.py), for a vision-language model. One parser, used
by the control plane when a file is uploaded and by the job when it reads one, so a file
the upload accepted is a file the job reads."""

from __future__ import annotations

import json
from typing import Any


class RowError(ValueError):
    """A row that is not a training example; the message says what is wrong with it."""


def _chat(messages: Any) -> tuple[str, str]:
    """The last assistant message is the answer; the user message before it the prompt."""
    if not isinstance(messages, list) or not messages:
        raise RowError("'messages' must be a non-empty list")
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise RowError("each message needs a 'role' and a string 'content'")
    roles = [m.get("role") for m in messages]
    if "assistant" not in roles:
        raise RowError("no assistant message: the last one is the answer to learn")
    last = len(roles) - 1 - roles[::-1].index("assistant")
    asked = [m["content"] for m in messages[:last] if m.get("role") == "user"]
    if not asked or not asked[-1].strip():
        raise RowError("no user message before the last assistant message")
    return asked[-1], messages[last]["content"]


def _plain(row: dict[str, Any]) -> tuple[str, str]:
    prompt, answer = row.get("prompt"), row.get("answer")
    if not isinstance(prompt, str) or not prompt.strip():
        raise RowError("'prompt' must be a non-empty string (or give chat 'messages')")
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise RowError("'answer' must be a string or a number")
    return prompt, str(answer)


def parse_row(line: str) -> tuple[str, str, str | None]:
    """(prompt, answer, image path or None) of one non-empty line; RowError naming the
    problem. Only the row's shape is checked here: the image file is read by its user."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise RowError(f"not valid JSON ({error.msg})") from None
    except RecursionError:
        # The decoder recurses once per nested array or object: 200,000 `[` exhaust the stack.
        raise RowError("nested too deeply to be a training row") from None
    if not isinstance(row, dict):
        raise RowError("a row must be a JSON object")
    prompt, answer = _chat(row["messages"]) if "messages" in row else _plain(row)
    if not answer.strip():
        raise RowError("the answer is empty")
    image = row.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise RowError("'image' must be a path to an image file")
    return prompt, answer, image
