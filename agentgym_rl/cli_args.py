"""Dataclass-driven command-line arguments shared by every ``agentgym-rl`` subcommand.

Each subcommand keeps its arguments in one dataclass whose fields carry ``help``
metadata (TRL/CleanRL style); :func:`add_dataclass_arguments` turns the fields into
flags named like the fields (``--data_dir``, with ``--data-dir`` as an alias), and ``--config FILE.yaml`` sets defaults that flags
override. Unknown keys in a config file are an error that lists the valid ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "add_dataclass_arguments",
    "add_prefixed_arguments",
    "dataclass_from_args",
    "make_command_parser",
    "make_passthrough_parser",
    "parse_command_args",
    "with_default_output_dir",
]


def _field_type(field: dataclasses.Field, hints: dict[str, Any]) -> tuple[type, bool]:
    """The scalar type of a field and whether it is a list."""
    hint = hints[field.name]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else str
        origin = typing.get_origin(hint)
    if origin in (list, tuple):
        inner = typing.get_args(hint)[0] if typing.get_args(hint) else str
        return inner, True
    return hint, False


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {text!r}")


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one ``--flag`` per field of the dataclass ``cls`` (flag = field name).

    A field with ``metadata["positional"]`` becomes a positional argument instead;
    ``metadata["choices"]`` restricts the values.
    """
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        scalar, is_list = _field_type(field, hints)
        kwargs: dict[str, Any] = {"help": field.metadata.get("help", "").replace("%", "%%")}
        if field.default is not dataclasses.MISSING:
            kwargs["default"] = field.default
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            kwargs["default"] = field.default_factory()  # type: ignore[misc]
        else:
            kwargs["required"] = True
        if "choices" in field.metadata:
            kwargs["choices"] = field.metadata["choices"]
        if scalar is bool:
            kwargs["type"] = _parse_bool
            kwargs["nargs"] = "?"
            kwargs["const"] = True
        elif scalar in (int, float, str):
            kwargs["type"] = scalar
        if is_list:
            kwargs["nargs"] = "+"
        if field.metadata.get("positional"):
            kwargs.pop("required", None)
            if "default" in kwargs:
                kwargs["nargs"] = "?"
            parser.add_argument(field.name, **kwargs)
        else:
            # TRL's parser spells flags like the fields (underscores); the hyphenated spelling is an alias.
            flags = dict.fromkeys([f"--{field.name}", f"--{field.name.replace('_', '-')}"])
            parser.add_argument(*flags, dest=field.name, **kwargs)


def _optional(convert: Any) -> Any:
    """``convert``, with ``none`` / ``null`` read as ``None`` (for ``X | None`` fields)."""

    def parse(text: str) -> Any:
        return None if text.lower() in ("none", "null") else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its errors
    return parse


def add_prefixed_arguments(container: Any, cls: type, prefix: str) -> dict[str, str]:
    """Add ``--<prefix>_<field>`` for every field of the dataclass ``cls``; returns ``{dest: field}``.

    Unlike :func:`add_dataclass_arguments` these flags default to "not given"
    (``argparse.SUPPRESS``: the namespace holds only the flags that were passed or set
    by a ``--config`` file), so that a caller can tell an explicit value from the
    dataclass's default, which the help shows. ``container`` is a parser or an
    argument group; fields typed ``X | None`` also accept ``none``.
    """
    hints = typing.get_type_hints(cls)
    dests: dict[str, str] = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        scalar, is_list = _field_type(field, hints)
        optional = type(None) in typing.get_args(hints[field.name])
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = field.default_factory()  # type: ignore[misc]
        else:
            default = "required"
        help_text = f"{field.metadata.get('help', '')} (default: {default})".replace("%", "%%")
        kwargs: dict[str, Any] = {
            "help": help_text,
            "default": argparse.SUPPRESS,
            "metavar": field.name.upper(),
        }
        if scalar is bool:
            kwargs.update(type=_parse_bool, nargs="?", const=True)
        elif scalar in (int, float, str):
            kwargs["type"] = _optional(scalar) if optional else scalar
        if is_list:
            kwargs["nargs"] = "+"
        dest = f"{prefix}_{field.name}"
        # Underscores as TRL's parser spells flags; the hyphenated spelling is an alias.
        flags = dict.fromkeys([f"--{dest}", f"--{dest.replace('_', '-')}"])
        container.add_argument(*flags, dest=dest, **kwargs)
        dests[dest] = field.name
    return dests


def _load_config(path: str) -> dict[str, Any]:
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        import yaml

        return yaml.safe_load(text) or {}
    return json.loads(text)


def dataclass_from_args(cls: type[T], namespace: argparse.Namespace) -> T:
    """Build ``cls`` from a namespace parsed by a parser of :func:`make_command_parser`."""
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    return cls(**{name: getattr(namespace, name) for name in names if hasattr(namespace, name)})


def parse_command_args(parser: argparse.ArgumentParser, cls: type[T], argv: list[str] | None) -> T:
    """Parse ``argv`` into ``cls``; ``--config`` values become defaults that flags override."""
    namespace = parser.parse_args(argv)
    if getattr(namespace, "config", None):
        config = _load_config(namespace.config)
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        unknown = sorted(set(config) - set(names))
        if unknown:
            parser.error(f"unknown keys {unknown} in {namespace.config}; valid keys: {names}")
        parser.set_defaults(**config)
        namespace = parser.parse_args(argv)
    return dataclass_from_args(cls, namespace)


def make_command_parser(
    cls: type,
    *,
    name: str,
    description: str,
    subparsers: argparse._SubParsersAction | None = None,
    prog: str | None = None,
) -> argparse.ArgumentParser:
    """A parser for one subcommand: the dataclass's flags plus ``--config``.

    With ``subparsers`` the parser is added as subcommand ``name``; otherwise it is a
    standalone parser (``python -m agentgym_cli.commands.<name>``).
    """
    kwargs = dict(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    if subparsers is not None:
        parser = subparsers.add_parser(name, help=description.splitlines()[0], **kwargs)
    else:
        parser = argparse.ArgumentParser(prog=prog or f"agentgym-rl {name}", **kwargs)
    parser.add_argument("--config", default=None, help="YAML or JSON file of defaults; flags override it")
    add_dataclass_arguments(parser, cls)
    return parser


def make_passthrough_parser(
    name: str, description: str, subparsers: argparse._SubParsersAction | None = None, prog: str | None = None
) -> argparse.ArgumentParser:
    """A parser that hands every flag on unparsed, for commands that parse their own (TRL's parser)."""
    if subparsers is not None:
        parser = subparsers.add_parser(name, help=description, description=description, add_help=False)
    else:
        parser = argparse.ArgumentParser(
            prog=prog or f"agentgym-rl {name}", description=description, add_help=False
        )
    parser.add_argument("flags", nargs=argparse.REMAINDER, help="Flags (see --help).")
    return parser


def _config_file(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def with_default_output_dir(argv: list[str], default: str) -> list[str]:
    """``argv`` plus ``--output_dir default`` unless it sets one, its ``--config`` YAML does, or it asks for --help.

    >>> with_default_output_dir(["--max_steps", "2"], "runs/x")
    ['--max_steps', '2', '--output_dir', 'runs/x']
    """
    if "--help" in argv or any(
        a in ("--output_dir", "--output-dir") or a.startswith(("--output_dir=", "--output-dir="))
        for a in argv
    ):
        return argv
    config = _config_file(argv)
    if config is not None:
        import yaml

        try:
            with open(config) as handle:
                settings = yaml.safe_load(handle) or {}
        except OSError:
            return [*argv, "--output_dir", default]  # TRL's parser reports the missing file
        if isinstance(settings, dict) and settings.get("output_dir"):
            return argv  # the YAML's output_dir stands (a flag would override it)
    return [*argv, "--output_dir", default]
