"""What `yoyaku` loads before it does anything: `yoyaku --help` imports no command, a
submission imports its own command and none of the others' modules before its first request,
and what makes that possible (the group's lines of help, the models' shared methods) says and
does what the commands and the dataclass defaults would.

The import sets are read in a fresh interpreter: `python -c` running the console script's
`main`, stopped by an audit hook at its first `socket.connect` (nothing is listening there)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from yoyaku_client import files, models
from yoyaku_client.cli import COMMANDS, cli
from yoyaku_client.cli.lazy import LazyGroup
from yoyaku_client.decode import ApiModel
from yoyaku_client.endpoints.schedules import Action
from yoyaku_client.endpoints.uploads import UploadLimits
from yoyaku_client.record import Record
from yoyaku_client.submit.options import SubmitOptions
from yoyaku_client.transport import RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
HELP = json.loads(Path(__file__).with_name("help_snapshot.json").read_text())

FIRST_REQUEST = (
    "import os, sys\n"
    "def hook(event, args):\n"
    "    if event == 'socket.connect':\n"
    "        print(json.dumps(sorted(sys.modules)), flush=True)\n"
    "        os._exit(0)\n"
    "import json\n"
    "sys.addaudithook(hook)\n"
    "from yoyaku_client.cli import main\n"
    "main(sys.argv[1:])\n"
)
AFTER_MAIN = (
    "import json, sys\n"
    "from yoyaku_client.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)
#: Modules that only other commands, TLS or a table need.
OTHER_COMMANDS_ONLY = {
    "yoyaku_client.files",
    "yoyaku_client.ids",
    "yoyaku_client.models_other",
    "yoyaku_client.tokens",
    "yoyaku_client.cli.jobs",
    "yoyaku_client.cli.challenges",
    "rich",
    "httpx",
    "ssl",
    "encodings.idna",
}


def _run(code: str, args: list[str], columns: int = 80) -> subprocess.CompletedProcess[str]:
    # Nothing is written before the first request: the settings come from the environment.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "COLUMNS": str(columns),
        "YOYAKU_URL": "http://127.0.0.1:9",
        "YOYAKU_TOKEN": "t",
        "YOYAKU_RETRIES": "0",
        "YOYAKU_CONFIG_DIR": str(ROOT / ".no-such-config"),
    }
    if "PYTHONPATH" in os.environ:  # the client under test, when another checkout's
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=ROOT,
    )


def _ours(modules: list[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] == "yoyaku_client"}


@pytest.mark.parametrize("columns", [80, 100])
def test_help_lists_every_command_without_importing_one(columns: int) -> None:
    done = _run(AFTER_MAIN, ["--help"], columns)
    assert done.returncode == 0, done.stderr
    assert done.stdout == HELP[f"{columns - 2}: yoyaku"]["output"]
    assert _ours(json.loads(done.stderr)) == {
        "yoyaku_client",
        "yoyaku_client.cli",
        "yoyaku_client.cli.common",
        "yoyaku_client.cli.lazy",
        "yoyaku_client.errors",
        "yoyaku_client.record",
    }


def test_each_line_of_the_group_help_is_the_command_own_summary() -> None:
    assert isinstance(cli, LazyGroup)
    assert cli.list_commands(click.Context(cli)) == sorted(COMMANDS)
    for name, entry in COMMANDS.items():
        command = cli.load(name)
        assert command.name == name
        assert command.get_short_help_str(10_000) == entry.summary, name


def test_a_mistyped_command_is_matched_against_every_command() -> None:
    done = _run(AFTER_MAIN, ["sumbit"])
    assert "No such command 'sumbit'. Did you mean 'submit'?" in done.stderr


def test_submit_imports_no_other_command_before_its_first_request() -> None:
    done = _run(
        FIRST_REQUEST,
        ["submit", str(ROOT / "examples" / "hello"), "--idempotency-key", "start-up"],
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    commands = {m for m in loaded if m.startswith("yoyaku_client.cli.")}
    assert commands == {
        "yoyaku_client.cli.common",
        "yoyaku_client.cli.lazy",
        "yoyaku_client.cli.submit",
    }
    assert not loaded & OTHER_COMMANDS_ONLY, sorted(loaded & OTHER_COMMANDS_ONLY)
    assert "yoyaku_client.client" in loaded  # the request came from the client, as it should


def test_importing_the_command_line_loads_six_modules_of_the_client() -> None:
    done = _run(AFTER_MAIN.replace("main(sys.argv[1:])", "pass"), [])
    assert done.returncode == 0, done.stderr
    assert len(_ours(json.loads(done.stderr))) <= 6


def test_the_sdk_names_still_import_from_the_package() -> None:
    done = _run(
        "import yoyaku_client as y, sys\n"
        "print(y.Client.__module__, y.RetryPolicy.__module__, y.ApiError.__module__)\n"
        "from yoyaku_client import *\n"
        "print(sorted(set(y.__all__) - set(dir(y))))\n",
        [],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [
        "yoyaku_client.client yoyaku_client.transport yoyaku_client.errors",
        "[]",
    ]


# --- the models' shared methods ------------------------------------------------------------


def _samples() -> list[Any]:
    """An instance of every model, from an empty answer (or given fields)."""
    found: list[Any] = []
    for name in [*models.__all__, "ApiToken"]:
        kind = getattr(models, name)
        if isinstance(kind, type) and issubclass(kind, ApiModel):
            found.append(kind.from_api({}))
    reviews = (files.ArchiveMember, files.StoredFile, files.GradingAttempt, files.ReviewDetail)
    found.extend(kind.from_api({}) for kind in reviews)
    found.append(models.JobSubmission("j", "queued", False, "k", ["w"]))
    found.append(RetryPolicy())
    found.append(SubmitOptions(paths=[Path("main.py")], metadata={"a": 1}))
    found.append(Action(path="/hook/", body={"x": [1]}))
    found.append(UploadLimits(max_upload_file_size=1, max_resumable_upload_size=2))
    found.append(models.SubmissionPage(1, None, [models.Submission.from_api({"files": [{}]})]))
    return found


def _twin(item: Any) -> Any:
    """`item` as an instance of a dataclass of the same name and fields, with every default
    method generated."""
    fields = dataclasses.fields(item)
    kind = dataclasses.make_dataclass(
        type(item).__name__,
        [(f.name, Any) for f in fields],
        frozen=True,
    )
    kind.__qualname__ = type(item).__qualname__
    return kind(**{f.name: getattr(item, f.name) for f in fields})


def _hash_or_error(item: Any) -> object:
    try:
        return hash(item)
    except TypeError as exc:
        return str(exc)


def test_the_models_print_compare_and_hash_as_the_dataclass_defaults() -> None:
    samples = _samples()
    assert len(samples) == 32  # 22 models of the API, 4 of the review API, 6 others
    for item in samples:
        twin = _twin(item)
        assert repr(item) == repr(twin)
        copy = dataclasses.replace(item)
        assert item == copy
        assert _hash_or_error(item) == _hash_or_error(twin)
        assert item != twin  # another class: never equal, as generated
        with pytest.raises(dataclasses.FrozenInstanceError):
            item.extra = 1


def _records(kind: type[Any]) -> list[type[Any]]:
    found = []
    for sub in kind.__subclasses__():
        found += [sub, *_records(sub)]
    return found


def test_every_record_leaves_equality_hash_and_repr_to_record() -> None:
    # Imported so that their records are defined: every module that declares one.
    import yoyaku_client.cli.common
    import yoyaku_client.config
    import yoyaku_client.multipart
    import yoyaku_client.submit.options  # noqa: F401

    records = [
        kind
        for kind in _records(Record)
        if dataclasses.is_dataclass(kind) and kind.__module__.startswith("yoyaku_client.")
    ]
    assert len(records) >= 38
    for kind in records:
        params = kind.__dataclass_params__  # type: ignore[attr-defined]
        assert (params.frozen, params.eq, params.repr) == (True, False, False), kind
        assert "__eq__" not in vars(kind), kind
        assert "__repr__" not in vars(kind), kind


def test_a_changed_field_makes_a_model_unequal() -> None:
    user = models.User(1, "ann")
    assert user == models.User(1, "ann")
    assert user != models.User(1, "bob")
    assert user != models.Me(1, "ann")
    assert hash(user) == hash(models.User(1, "ann")) == hash((1, "ann"))
    assert {user, models.User(1, "ann")} == {user}


def test_the_models_defined_on_first_use_are_the_ones_named_for_it() -> None:
    from yoyaku_client import models, models_other

    assert frozenset(models_other.__all__) == models._OTHER
    for name in models_other.__all__:
        assert getattr(models, name) is getattr(models_other, name)
