"""Grading as a pipeline of stages (`apps.grading.stages`), run for real in bubblewrap: a
stage's read-only folders and its one writable output, the order and the stop at the first
failure, the limits a stage hits, live logs named by stage, and the refusals of folders that a
sandbox cannot give."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.grading.isolation import (
    Limits,
    input_folder,
    input_folder_hand_over,
    isolation_probe,
)
from apps.grading.isolation.export import output_unpack
from apps.grading.results import result_from_stages
from apps.grading.stages import (
    BubblewrapBackend,
    StageOutcome,
    StageSpec,
    UnisolatedBackend,
    pipeline_run,
)
from tests.grading.workers import UNPRIVILEGED_UID

PYTHON = "/usr/bin/python3"
LIMITS = Limits(
    wall_seconds=20,
    cpu_seconds=20,
    memory_bytes=512 * 1024**2,
    file_bytes=16 * 1024**2,
    scratch_bytes=16 * 1024**2,
    processes=32,
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def backend() -> BubblewrapBackend:
    probe = isolation_probe(PYTHON)
    if probe.isolation != "bubblewrap" or probe.bwrap is None:
        if os.environ.get("YOYAKU_REQUIRE_BUBBLEWRAP"):
            pytest.fail(f"bubblewrap is required here: {probe.reason}")
        pytest.skip(f"no bubblewrap isolation on this machine: {probe.reason}")
    return BubblewrapBackend(bwrap=probe.bwrap, python=PYTHON)


@pytest.fixture
def folders() -> Iterator[dict[str, Path]]:
    """Two stages' files and a host data folder readable by the sandbox's uid."""
    with input_folder() as run, input_folder() as score:
        data = Path(tempfile.mkdtemp(prefix="yoyaku-test-data-"))
        try:
            data.chmod(0o755)
            (data / "reference.txt").write_text("the hidden answer\n")
            (data / "reference.txt").chmod(0o644)
            yield {"run": run, "score": score, "data": data}
        finally:
            shutil.rmtree(data, ignore_errors=True)


def _stage(name: str, folder: Path, program: str, **fields: Any) -> StageSpec:
    (folder / "main.py").write_text(program)
    input_folder_hand_over(folder, isolation="bubblewrap")
    return StageSpec(name=name, program=("main.py",), files=folder, limits=LIMITS, **fields)


def test_a_stage_reads_its_mounts_and_writes_only_its_output(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    program = """
import errno, json, os
print(open("/reference/reference.txt").read().strip())
refused = []
for path in ("/reference/new.txt", "/reference/reference.txt", "/new.txt"):
    try:
        open(path, "w")
    except OSError as exc:
        refused.append(exc.errno in (errno.EROFS, errno.EACCES))
print("refused", refused, os.environ["SPLIT"], os.environ["PATH"])
json.dump({"public": {"accuracy": 0.5}}, open("/scores/scores.json", "w"))
"""
    spec = _stage(
        "score",
        folders["score"],
        program,
        mounts={"/reference": folders["data"]},
        output="/scores",
        result="/scores/scores.json",
        environment={"SPLIT": "public", "PATH": "/nowhere"},
    )
    [outcome] = pipeline_run([spec], backend=backend)
    assert outcome.ok, outcome
    assert outcome.stage == "score"
    assert outcome.result == b'{"public": {"accuracy": 0.5}}'
    assert "the hidden answer" in outcome.logs
    # Every write outside the output folder is refused; the fixed PATH wins.
    assert "refused [True, True, True] public /usr/local/bin:/usr/bin:/bin" in outcome.logs
    assert not (folders["data"] / "new.txt").exists()


def test_a_stage_without_the_mount_never_sees_the_data(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    program = f"""
import os
print("seen", os.path.exists("/reference"), os.path.exists({str(folders["data"])!r}))
open("metrics.json", "w").write("{{}}")
"""
    run = _stage("run", folders["run"], program)
    score = _stage(
        "score",
        folders["score"],
        "print(open('/reference/reference.txt').read())",
        mounts={"/reference": folders["data"]},
    )
    outcomes = pipeline_run([run, score], backend=backend)
    assert [o.stage for o in outcomes] == ["run", "score"]
    assert "seen False False" in outcomes[0].logs
    assert "the hidden answer" in outcomes[1].logs


def test_the_pipeline_stops_at_the_first_stage_that_fails(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    run = _stage("run", folders["run"], "import sys\nprint('trying')\nsys.exit(3)\n")
    score = _stage("score", folders["score"], "print('scoring')\n")
    outcomes = pipeline_run([run, score], backend=backend)
    assert len(outcomes) == 1
    assert outcomes[0].exit_code == 3
    assert not outcomes[0].ok


def test_live_logs_reach_the_callback_named_by_stage(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    program = "import time\nprint('early', flush=True)\ntime.sleep(2.5)\nprint('late')\n"
    seen: list[tuple[str, str]] = []
    pipeline_run(
        [_stage("run", folders["run"], program)],
        backend=backend,
        on_logs=lambda stage, logs: seen.append((stage, logs)),
    )
    assert ("run", "early\n") in seen, seen


def test_a_stage_reports_the_limits_it_hit(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    loud = _stage("run", folders["run"], "while True:\n    print('x' * 4096)\n")
    spec = dataclasses.replace(loud, limits=dataclasses.replace(LIMITS, output_bytes=1024))
    [outcome] = pipeline_run([spec], backend=backend)
    assert outcome.limits_hit == ("output_bytes",)
    assert "printed more than 16384 bytes" in outcome.error

    wall = StageSpec(
        name="run",
        program=("-c", "import time; time.sleep(30)"),
        files=loud.files,
        limits=dataclasses.replace(LIMITS, wall_seconds=1),
    )
    [outcome] = pipeline_run([wall], backend=backend)
    assert outcome.timed_out
    assert outcome.limits_hit == ("wall_seconds",)


@pytest.mark.parametrize(
    ("mounts", "output", "refusal"),
    [
        ({"/tmp/data": None}, "", "one the sandbox makes itself"),  # noqa: S108
        ({"/usr/share": None}, "", "system folder"),
        ({"/data/../etc": None}, "", "not an absolute, normal folder path"),
        ({"/data": None}, "/data/out", "overlaps another folder"),
        ({}, "relative", "not an absolute, normal folder path"),
        ({"/data": "missing"}, "", "is not an absolute path to a folder"),
    ],
)
def test_folders_a_sandbox_cannot_give_are_refused_before_anything_runs(
    backend: BubblewrapBackend,
    folders: dict[str, Path],
    mounts: dict[str, str | None],
    output: str,
    refusal: str,
) -> None:
    host = {
        inside: folders["data"] if path is None else folders["data"] / path
        for inside, path in mounts.items()
    }
    spec = _stage("run", folders["run"], "print('ran')\n", mounts=host, output=output)
    [outcome] = pipeline_run([spec], backend=backend)
    assert refusal in outcome.error
    assert "ran" not in outcome.logs
    assert not outcome.ok


def test_the_unisolated_backend_refuses_a_stage_with_folders(folders: dict[str, Path]) -> None:
    spec = _stage("score", folders["score"], "print('ran')\n", output="/scores")
    [outcome] = pipeline_run([spec], backend=UnisolatedBackend(python=PYTHON))
    assert "needs bubblewrap" in outcome.error
    assert outcome.logs == ""


def test_the_stage_interface_imports_no_django() -> None:
    code = (
        "import sys, apps.grading.stages; print(any(m.startswith('django') for m in sys.modules))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert completed.stdout.strip() == "False"


def test_an_unprivileged_worker_runs_a_stage_with_its_folders(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    """The isolation package's own command as a uid that is not root: the same mounts, output
    folder and result file, without the root worker's uid switch."""
    if os.geteuid() != 0:
        pytest.skip("switching to another uid needs root")
    files = Path(tempfile.mkdtemp(prefix="yoyaku-test-files-"))
    collect = Path(tempfile.mkdtemp(prefix="yoyaku-test-collect-"))
    os.chown(collect, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    try:
        files.chmod(0o755)
        (files / "main.py").write_text(
            "import json\n"
            "answer = open('/reference/reference.txt').read().strip()\n"
            "json.dump({'answer': answer}, open('/scores/scores.json', 'w'))\n"
            "open('/scores/detail.txt', 'w').write(answer)\n"
        )
        (files / "main.py").chmod(0o644)
        completed = subprocess.run(
            [
                PYTHON,
                "-m",
                "apps.grading.isolation",
                "run",
                f"--files={files}",
                f"--mount=/reference={folders['data']}",
                "--output=/scores",
                "--result=/scores/scores.json",
                f"--collect={collect}",
                "--",
                "main.py",
            ],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT)},
            user=UNPRIVILEGED_UID,
            group=UNPRIVILEGED_UID,
            extra_groups=[],
            capture_output=True,
            timeout=60,
            check=True,
        )
        outcome = json.loads(completed.stdout)
        assert outcome["exit_code"] == 0, outcome
        assert json.loads(outcome["metrics"]) == {"answer": "the hidden answer"}
        assert (collect / "detail.txt").read_text() == "the hidden answer"
        assert (collect / "detail.txt").stat().st_uid == UNPRIVILEGED_UID
    finally:
        shutil.rmtree(files, ignore_errors=True)
        shutil.rmtree(collect, ignore_errors=True)


def _outcome(stage: str, **fields: Any) -> StageOutcome:
    values: dict[str, Any] = {"exit_code": 0, "timed_out": False, "logs": "", "wall_seconds": 0.1}
    return StageOutcome(stage=stage, **{**values, **fields})


def test_the_first_failed_stage_decides_and_the_logs_are_the_first_stages() -> None:
    outcomes = [
        _outcome("run", logs="participant\n", result=b'{"score": 1}'),
        _outcome("score", logs="host only\n", exit_code=-9),
    ]
    result = result_from_stages(outcomes, timeout=5)
    assert result.outcome == "failed"
    assert result.reason == "The program failed: killed by SIGKILL (killed)."
    assert result.logs == "participant\n"


def test_the_last_stages_result_is_read_as_metrics() -> None:
    outcomes = [_outcome("run", logs="ran\n"), _outcome("score", result=b'{"score": 0.75}')]
    result = result_from_stages(outcomes, timeout=5)
    assert (result.outcome, result.score, result.logs) == ("completed", 0.75, "ran\n")
    assert result_from_stages([], timeout=5).outcome == "failed"


RUN_WRITES_PREDICTIONS = """
import os
os.makedirs("/output/more")
open("/output/predictions.csv", "w").write("id,label\\n1,cat\\n")
open("/output/more/notes.txt", "w").write("second file\\n")
os.symlink("/etc/passwd", "/output/link")
os.mkfifo("/output/fifo")
"""
SCORE_READS_PREDICTIONS = """
import json, os
found = sorted(os.path.relpath(os.path.join(d, n), "/predictions")
               for d, _, names in os.walk("/predictions") for n in names)
labels = open("/predictions/predictions.csv").read().split()
reference = open("/reference/reference.txt").read().strip()
json.dump({"found": found, "labels": labels, "reference": reference},
          open("/scores/scores.json", "w"))
"""


def test_the_run_stages_output_reaches_the_score_stage_read_only(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    """SPEC §11.2's shape: the run stage writes /output; its folders and regular files (no
    link, no FIFO) come out into a host folder, mounted read-only at /predictions beside the
    reference data in the score stage, which writes /scores/scores.json."""
    with input_folder() as predictions:
        run = _stage(
            "run", folders["run"], RUN_WRITES_PREDICTIONS, output="/output", collect=predictions
        )
        score = _stage(
            "score",
            folders["score"],
            SCORE_READS_PREDICTIONS,
            mounts={"/predictions": predictions, "/reference": folders["data"]},
            output="/scores",
            result="/scores/scores.json",
        )
        input_folder_hand_over(predictions, isolation="bubblewrap")
        outcomes = pipeline_run([run, score], backend=backend)
        assert [o.ok for o in outcomes] == [True, True], outcomes
        assert outcomes[0].output_dir == predictions
        assert sorted(p.name for p in predictions.rglob("*")) == [
            "more",
            "notes.txt",
            "predictions.csv",
        ]
    assert json.loads(outcomes[1].result or b"") == {
        "found": ["more/notes.txt", "predictions.csv"],
        "labels": ["id,label", "1,cat"],
        "reference": "the hidden answer",
    }


def test_a_program_cannot_write_on_its_runners_result_channel(
    backend: BubblewrapBackend, folders: dict[str, Path]
) -> None:
    """The channel that carries the result and the output folder belongs to the runner; the
    program (same uid inside) cannot open it through /proc."""
    program = (
        "import os\n"
        "try:\n"
        "    open(f'/proc/{os.getppid()}/fd/1', 'wb').write(b'0\\nN\\n')\n"
        "    print('forged')\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n"
    )
    with input_folder() as collect:
        spec = _stage("run", folders["run"], program, output="/output", collect=collect)
        [outcome] = pipeline_run([spec], backend=backend)
    assert "refused" in outcome.logs
    assert "forged" not in outcome.logs


def _tar(*members: tuple[str, bytes | None, bytes]) -> io.BytesIO:
    """A tar of (name, file bytes or None for a link, type)."""
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as archive:
        for name, data, kind in members:
            member = tarfile.TarInfo(name)
            member.type = kind
            if data is None:
                member.linkname = "/etc/passwd"
                archive.addfile(member)
            else:
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
    stream.seek(0)
    return stream


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ([("../escaped.txt", b"x", tarfile.REGTYPE)], "names '../escaped.txt'"),
        ([("/abs.txt", b"x", tarfile.REGTYPE)], "names '/abs.txt'"),
        ([("a/../../escaped.txt", b"x", tarfile.REGTYPE)], "names 'a/../../escaped.txt'"),
        ([("big", b"x" * 2048, tarfile.REGTYPE)], "more than 1024 bytes"),
        ([("ok", b"x", tarfile.REGTYPE), ("ok", b"y", tarfile.REGTYPE)], "could not be read"),
    ],
)
def test_a_hostile_output_stream_writes_nothing_outside_its_folder(
    members: list[tuple[str, bytes | None, bytes]], problem: str
) -> None:
    with input_folder() as parent:
        target = parent / "predictions"
        target.mkdir()
        found = output_unpack(_tar(*members), target, max_bytes=1024)
        assert problem in found
        assert sorted(p.name for p in parent.iterdir()) == ["predictions"]


def test_links_and_special_files_of_an_output_stream_are_left_out() -> None:
    stream = _tar(
        ("link", None, tarfile.SYMTYPE),
        ("hard", None, tarfile.LNKTYPE),
        ("fifo", b"", tarfile.FIFOTYPE),
        ("kept.txt", b"kept", tarfile.REGTYPE),
    )
    with input_folder() as target:
        assert output_unpack(stream, target, max_bytes=1024) == ""
        assert [p.name for p in target.iterdir()] == ["kept.txt"]
        assert not (target / "kept.txt").is_symlink()
