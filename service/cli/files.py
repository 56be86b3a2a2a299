"""`numtune files upload|list|rm`: training files on the control plane (/v1/files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.rest import connect, friendly, show

files_app = typer.Typer(
    help="Uploaded training files (JSONL, for data.file in a spec) and images (--purpose vision)."
)


@files_app.command("upload")
@friendly
def upload(
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="a JSONL file")],
    purpose: Annotated[
        str, typer.Option(help="fine-tune (JSONL rows), table (CSV or JSONL) or vision (one image)")
    ] = "fine-tune",
) -> None:
    """Upload PATH; every row (or the image) is checked. A JSONL file's id is what data.file
    takes; an image's, what a row's "image" or a served request's image takes."""
    with path.open("rb") as f:
        found = connect().upload("/v1/files", f, path.name, {"purpose": purpose})
    typer.echo(f"{found['id']}  {found['rows']} rows  sha256 {found['sha256']}")


@files_app.command("list")
@friendly
def list_files() -> None:
    """Your files, newest first."""
    table = Table("id", "filename", "purpose", "rows", "bytes", "sha256")
    for f in connect().json("GET", "/v1/files", params={"limit": 200})["data"]:
        table.add_row(
            f["id"], f["filename"], f["purpose"], str(f["rows"]), str(f["bytes"]), f["sha256"][:12]
        )
    show(table)


@files_app.command("rm")
@friendly
def remove(file_id: str) -> None:
    """Delete a file no queued or running job reads."""
    connect().request("DELETE", f"/v1/files/{file_id}")
    typer.echo(f"deleted {file_id}")
