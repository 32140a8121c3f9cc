"""The trajectories' two steps: analyses.trajectory_plan runs the analyses along the series and records the series'
points (points.json, one codec); analyses.summary.trajectories reads results and that record, never a checkpoint
folder nor a repository script."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from analyses import trajectory_plan
from analyses.summary import trajectories
from analyses.trajectory_plan import PointRecord, SeriesRecord, read_points, write_points
from probes.errors import ProbeError

SUMMARY = Path(trajectories.__file__).resolve().parent


def test_the_points_record_reads_back_as_written(tmp_path):
    records = [SeriesRecord("bert-small", [PointRecord("bert-small-seed1.step-0000010", 0.5, 10, 320),
                                           PointRecord("bert-small-seed1.step-0000020", 1.0, 20, None)], "ab" * 32),
               SeriesRecord("slstm-small", [PointRecord("s.step-0000001", None, 1)], None)]
    write_points(records, tmp_path)
    assert read_points(tmp_path) == records


@pytest.mark.parametrize("text,match", [(None, "missing"), ("{}", "not a record"), ('{"series": [{}]}', "not a record"),
                                        ("[", "not a record")])
def test_a_missing_or_damaged_points_record_is_one_error_line(tmp_path, text, match):
    if text is not None:
        (tmp_path / trajectory_plan.POINTS_FILE).write_text(text)
    with pytest.raises(ProbeError, match=match):
        read_points(tmp_path)
    with pytest.raises(ProbeError, match=match):
        trajectories.main(["--out", str(tmp_path)])


def test_the_summary_reads_results_not_checkpoint_folders_nor_scripts():
    for path in sorted(SUMMARY.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m.startswith(("probes.series", "probes.checkpoints", "subprocess"))}, path
        text = path.read_text(encoding="utf-8")
        assert "scripts/" not in text and "Path(__file__)" not in text, path  # no repository file found by a path
