"""Facts only people know, read from files: site inventory (``--site``), job metrics
(``--job``) and answers to the rulebook's questions (``--answers``). YAML or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gpu_triage.io import jsonio
from gpu_triage.io.yamlio import YamlError, load_one
from gpu_triage.model.facts import JobMetrics, SiteInventory

M = TypeVar("M", bound=BaseModel)
Answers = dict[str, bool | int | float | str]


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        data = load_one(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    except YamlError as exc:
        raise ValueError(f"{path}:{exc.line}:{exc.col}: cannot read: {exc.message}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of names to values")
    return data


def _finite(path: Path, data: Any) -> None:
    """A float field given "nan" or "inf" as text reads as one: refused like ``.nan``."""
    where = jsonio.first_non_finite(data)
    if where is not None:
        raise ValueError(f"{path}: {where}: not a finite number (NaN and infinities are refused)")


def _read_model(path: Path, model: type[M]) -> M:
    data = _read_mapping(path)
    try:
        value = model.model_validate({**data, "source": str(path)})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    _finite(path, value.model_dump(exclude_computed_fields=True))
    return value


def read_site(path: Path) -> SiteInventory:
    """A site inventory file; ValueError names the file (and the field) on bad input."""
    return _read_model(path, SiteInventory)


def read_job(path: Path) -> JobMetrics:
    """A job metrics file; ValueError names the file (and the field) on bad input."""
    return _read_model(path, JobMetrics)


def read_answers(path: Path) -> Answers:
    """Answers by question id; each a yes/no, a number or text."""
    data = _read_mapping(path)
    bad = [k for k, v in data.items() if not isinstance(v, bool | int | float | str)]
    if bad:
        raise ValueError(f"{path}: answer '{bad[0]}' must be yes/no, a number or text")
    _finite(path, data)
    return data


def read_supplied(
    site: Path | None = None, job: Path | None = None, answers: Path | None = None
) -> dict[str, Any]:
    """The supplied facts by Facts attribute (site, job, answers), for the files given."""
    out: dict[str, Any] = {}
    if site is not None:
        out["site"] = read_site(site)
    if job is not None:
        out["job"] = read_job(job)
    if answers is not None:
        out["answers"] = read_answers(answers)
    return out
