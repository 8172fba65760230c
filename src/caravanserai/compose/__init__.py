"""Compose files to Projects: `caractrl convert` and `caractrl apply -f compose.yaml` use this room.

    conversion = convert_file("compose.yaml")            # or a folder holding one
    print(dump_yaml([conversion.project]))
    for note in conversion.notes:
        print(note)                                      # warning: compose.yaml: services.web.build: …

The rooms, bottom up: `problems` (a refusal or a note, each naming its key), `yamltext` (YAML as Compose reads it:
anchors, merge keys, capped), `interpolation` and `dotenv` (variables as Compose substitutes them), `schema` (the
Compose specification's JSON schema, vendored in `schema/` with its notice), `units`, `names`, then the mapping
(`ports`, `mounts`, `services`, `runtime`, `unsupported`) and `convert`, which runs them in order. See
docs/coming-from-compose.md for what maps to what.
"""

from caravanserai.compose.convert import (
    COMPOSE_FILE_NAMES,
    Conversion,
    convert_file,
    convert_text,
    find_compose_file,
    is_compose,
    looks_like_compose,
)
from caravanserai.compose.problems import ComposeError, Note

__all__ = [
    "COMPOSE_FILE_NAMES",
    "ComposeError",
    "Conversion",
    "Note",
    "convert_file",
    "convert_text",
    "find_compose_file",
    "is_compose",
    "looks_like_compose",
]
