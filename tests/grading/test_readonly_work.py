"""A stage whose working folder is its files themselves, read-only (a phase's run stage): the
program reads its files and imports its own modules, writes nothing beside them, and writes
its output folder and /tmp; the host folder is unchanged; without bubblewrap it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.grading.isolation import input_folder, input_folder_hand_over
from apps.grading.stages import BubblewrapBackend, StageSpec, UnisolatedBackend
from tests.grading.test_stages import LIMITS, PYTHON, backend  # noqa: F401 - the fixture

PROGRAM = """
import errno, os
import helper
refused = []
for path in ("metrics.json", "helper.py", "new/x"):
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        open(path, "w").write("forged")
    except OSError as exc:
        refused.append(exc.errno in (errno.EROFS, errno.EACCES))
open("/tmp/scratch", "w").write("ok")
open("/output/predictions.csv", "w").write(helper.VALUE)
print("refused", refused, sorted(os.listdir(".")))
"""


def _spec(root: Path, collect: Path) -> StageSpec:
    (root / "main.py").write_text(PROGRAM)
    (root / "helper.py").write_text("VALUE = 'id,label\\n'\n")
    input_folder_hand_over(root, isolation="bubblewrap")
    return StageSpec(
        name="run",
        program=("main.py",),
        files=root,
        limits=LIMITS,
        output="/output",
        result="/output/.unused",
        collect=collect,
        readonly_work=True,
    )


def test_a_read_only_working_folder_refuses_every_write_beside_the_program(
    backend: BubblewrapBackend,  # noqa: F811 - the fixture
) -> None:
    with input_folder() as root, input_folder() as collect:
        outcome = backend.run(_spec(root, collect))
        assert outcome.ok, outcome
        assert "refused [True, True, True] ['helper.py', 'main.py']" in outcome.logs
        assert (collect / "predictions.csv").read_text() == "id,label\n"
        assert sorted(p.name for p in root.iterdir()) == ["helper.py", "main.py"]
        assert (root / "helper.py").read_text() == "VALUE = 'id,label\\n'\n"


def test_a_read_only_working_folder_needs_bubblewrap() -> None:
    with input_folder() as root, input_folder() as collect:
        spec = _spec(root, collect)
        outcome = UnisolatedBackend(python=PYTHON).run(
            StageSpec(
                name=spec.name,
                program=spec.program,
                files=spec.files,
                limits=spec.limits,
                readonly_work=True,
            )
        )
    assert outcome.error == "This stage needs bubblewrap: its working folder is read-only."
    assert not outcome.ok


@pytest.mark.parametrize("files", [70])
def test_many_files_are_not_copied_into_a_read_only_working_folder(
    backend: BubblewrapBackend,  # noqa: F811 - the fixture
    files: int,
) -> None:
    with input_folder() as root, input_folder() as collect:
        for index in range(files):
            (root / f"data{index}.txt").write_text(str(index))
        outcome = backend.run(_spec(root, collect))
        assert outcome.ok, outcome
        assert f"'data{files - 1}.txt'" in outcome.logs
