"""The supplied-facts readers (--site/--job/--answers) and the YAML adapter under them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.io.yamlio import YamlError, documents, load_one
from gpu_triage.model.supplied import read_answers, read_site, read_supplied


def test_site_file_is_read_with_its_source(tmp_path: Path) -> None:
    p = tmp_path / "site.yaml"
    p.write_text("expected_pcie_width: 16\nrack: r12\n", encoding="utf-8")
    site = read_site(p)
    assert site.expected_pcie_width == 16 and site.rack == "r12" and site.source == str(p)


def test_bad_yaml_names_file_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "site.yaml"
    p.write_text("rack: r1\nexpected_pcie_width: [16\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"site\.yaml:3:1: cannot read: YAML"):
        read_site(p)


def test_aliases_are_refused_in_supplied_files(tmp_path: Path) -> None:
    p = tmp_path / "answers.yaml"
    p.write_text("a: &x yes\nb: *x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="anchors and aliases"):
        read_answers(p)


def test_answers_must_be_scalars(tmp_path: Path) -> None:
    p = tmp_path / "answers.yaml"
    p.write_text("gpu_ok: [1, 2]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="answer 'gpu_ok' must be"):
        read_answers(p)


def test_only_given_files_are_read(tmp_path: Path) -> None:
    p = tmp_path / "answers.json"
    p.write_text('{"q1": true}', encoding="utf-8")
    assert read_supplied(answers=p) == {"answers": {"q1": True}}


def test_positions_of_keys_and_refused_documents() -> None:
    docs = list(documents("a: 1\nb:\n  c: 2\n---\nx: &y 1\nz: *y\n", "f", max_docs=5))
    assert docs[0].data == {"a": 1, "b": {"c": 2}}
    assert docs[0].loc.where(("b", "c")) == (3, 6)
    assert docs[1].problem is not None and docs[1].problem.line == 5
    with pytest.raises(YamlError, match="more than 1 documents"):
        load_one("a: 1\n---\nb: 2\n", "f")
