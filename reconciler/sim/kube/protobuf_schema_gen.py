"""Writes `protobuf_schema` from the Go API types of Kubernetes, so the simulator reads
kubectl's protobuf bodies with the field numbers of the release the realk8s tier builds.

    python -m reconciler.sim.kube.protobuf_schema_gen            # rewrite the file
    python -m reconciler.sim.kube.protobuf_schema_gen --check    # exit 1 if it differs

It reads the struct declarations of k8s.io/api's core/v1, batch/v1 and policy/v1 and of
k8s.io/apimachinery's meta/v1 (and `types.UID`), at `VERSION`, from the Go module cache
(`go mod download` says where, fetching them if they are not there). Each field's number
comes from its `protobuf:"<wire>,<number>,..."` tag, its JSON name and `omitempty` from
its `json` tag, its kind from its Go type (pointer, slice, map, named type). Every message
reachable from the kinds `protobuf.DECODED_KINDS` names is written, sorted by name; a
type of another API group is written as "unknown" (the decoder refuses it, never guesses).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from reconciler.sim.kube.protobuf import DECODED_KINDS

VERSION = "v0.37.2"
"""k8s.io/api and k8s.io/apimachinery at the release of tests/realk8s/gobuild/kube."""

CORE, BATCH, POLICY = "k8s.io/api/core/v1", "k8s.io/api/batch/v1", "k8s.io/api/policy/v1"
META, TYPES = "k8s.io/apimachinery/pkg/apis/meta/v1", "k8s.io/apimachinery/pkg/types"
# (module, file in the module, the package it declares types of)
INPUTS = (
    ("k8s.io/api", "core/v1/types.go", CORE),
    ("k8s.io/api", "batch/v1/types.go", BATCH),
    ("k8s.io/api", "policy/v1/types.go", POLICY),
    ("k8s.io/apimachinery", "pkg/apis/meta/v1/types.go", META),
    ("k8s.io/apimachinery", "pkg/types/uid.go", TYPES),
)
GROUPS = {"v1": CORE, "batch/v1": BATCH, "policy/v1": POLICY}  # apiVersion -> Go package
# Types with a wire form of their own, decoded by `protobuf._special`.
SPECIAL = {
    (META, "Time"): "time",
    (META, "MicroTime"): "time",
    (META, "Duration"): "dur",
    (META, "FieldsV1"): "raw",
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"): "raw",
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): "qty",
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): "ios",
}
INTEGERS = {"int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32"}
INTEGERS |= {"uint64", "byte"}
REPEATED, POINTER, OMITEMPTY, INLINE = 1, 2, 4, 8
TARGET = Path(__file__).with_name("protobuf_schema.py")

HEADER = f'''"""The protobuf wire schema of the kinds kubectl creates imperatively, for `protobuf`.

Written by `protobuf_schema_gen` (do not edit) from the Go API types of k8s.io/api
(core/v1, batch/v1, policy/v1) and k8s.io/apimachinery (meta/v1) {VERSION}, Apache
License 2.0: every message reachable from Secret, ConfigMap, Namespace, Job and Eviction.
For each message, field number -> (JSON name, kind, flags). Kinds: "s" string, "i"
integer, "b" bool, "bytes" (base64 in JSON), "time" (metav1.Time), "qty"
(resource.Quantity), "ios" (IntOrString), "raw" (embedded JSON), "dur" (metav1.Duration),
"map:<kind>", "m:<message>", "unknown" (types of other API groups the simulator does not
decode). Flags: 1 repeated, 2 pointer, 4 omitempty, 8 inlined into the parent.
"""

from __future__ import annotations

REPEATED, POINTER, OMITEMPTY, INLINE = {REPEATED}, {POINTER}, {OMITEMPTY}, {INLINE}

MESSAGES: dict[str, dict[int, tuple[str, str, int]]] = {{
'''


@dataclass(frozen=True)
class GoField:
    embedded: bool  # an anonymous field: Go's JSON inlines its fields unless the tag names it
    go_type: str
    json_tag: str
    number: int


@dataclass
class GoPackage:
    imports: dict[str, str]  # alias -> import path, over every file read
    structs: dict[str, list[GoField]]
    named: dict[str, str]  # a named non-struct type -> its underlying type


def module_dirs(modules: set[str]) -> dict[str, Path]:
    """Where each module's sources are: `go mod download`'s answer (the module cache, or a
    download into it), else the module cache's usual place when there is no Go."""
    wanted = [f"{module}@{VERSION}" for module in sorted(modules)]
    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", *wanted],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).parent,
            env={**os.environ, "GOFLAGS": "", "GO111MODULE": "on"},
        )
    except FileNotFoundError:
        cache = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
        return {module: Path(cache) / f"{module}@{VERSION}" for module in modules}
    answers, text = [], done.stdout.strip()  # one JSON object per module, back to back
    while text:
        answer, end = json.JSONDecoder().raw_decode(text)
        answers.append(answer)
        text = text[end:].lstrip()
    dirs = {a["Path"]: Path(a["Dir"]) for a in answers if a.get("Dir")}
    errors = [a["Error"] for a in answers if a.get("Error")]
    if errors or set(dirs) != modules:
        raise FileNotFoundError(f"go mod download {' '.join(wanted)}: {errors or done.stderr}")
    return dirs


def read_inputs() -> dict[str, GoPackage]:
    dirs = module_dirs({module for module, _, _ in INPUTS})
    packages: dict[str, GoPackage] = {}
    for module, file, path in INPUTS:
        source = (dirs[module] / file).read_text()
        package = packages.setdefault(path, GoPackage({}, {}, {}))
        parse(source, package)
    return packages


def parse(source: str, package: GoPackage) -> None:
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    source = re.sub(r"^\s*//.*$", "", source, flags=re.M)
    for block in re.findall(r"^import \((.*?)^\)", source, flags=re.S | re.M):
        for alias, path in re.findall(r'^\s*(\w+)?\s*"([^"]+)"', block, flags=re.M):
            package.imports[alias or path.rsplit("/", 1)[-1]] = path
    for name, body in re.findall(r"^type (\w+) struct \{\n(.*?)^\}", source, flags=re.S | re.M):
        package.structs[name] = [f for line in body.splitlines() if (f := _field(line))]
    for name, underlying in re.findall(r"^type (\w+) ([^\s{]+)\s*$", source, flags=re.M):
        package.named[name] = underlying


def _field(line: str) -> GoField | None:
    """One field of a struct, or None when it has no protobuf number (TypeMeta, `-`)."""
    found = re.fullmatch(r"\s*(\w+\s+)?([^\s`]+)\s*`([^`]*)`\s*", line)
    if not found:
        if line.strip():
            raise ValueError(f"cannot read the Go field {line.strip()!r}")
        return None
    name, go_type, tags = found.groups()
    number = re.search(r'protobuf:"\w+,(\d+)[,"]', tags)
    if number is None:
        return None
    json_tag = re.search(r'json:"([^"]*)"', tags)
    json_value = json_tag.group(1) if json_tag else ""
    return GoField(name is None, go_type, json_value, int(number.group(1)))


class Schema:
    def __init__(self, packages: dict[str, GoPackage]) -> None:
        self.packages = packages
        self.messages: dict[str, dict[int, tuple[str, str, int]]] = {}
        self.origin: dict[str, str] = {}

    def add(self, path: str, name: str) -> str:
        """The message `name` of package `path`, and every message it reaches."""
        if self.origin.setdefault(name, path) != path:
            raise ValueError(f"two messages named {name}: {self.origin[name]} and {path}")
        if name not in self.messages:
            self.messages[name] = {}
            for field in self.packages[path].structs[name]:
                self.messages[name][field.number] = self._entry(path, field)
        return name

    def _entry(self, path: str, field: GoField) -> tuple[str, str, int]:
        json_name, *options = field.json_tag.split(",")
        kind, flags = self.kind(path, field.go_type)
        if "omitempty" in options or "omitzero" in options:
            flags |= OMITEMPTY
        if "inline" in options or (field.embedded and not json_name):
            flags |= INLINE
        return json_name, kind, flags

    def kind(self, path: str, go_type: str) -> tuple[str, int]:
        if go_type.startswith("*"):
            kind, flags = self.kind(path, go_type[1:])
            return kind, flags | POINTER
        if go_type == "[]byte":
            return "bytes", 0
        if go_type.startswith("[]"):
            kind, flags = self.kind(path, go_type[2:])
            return kind, flags | REPEATED
        if found := re.fullmatch(r"map\[[^\]]+\](.+)", go_type):
            kind, flags = self.kind(path, found.group(1))
            if flags:
                raise ValueError(f"a map of {found.group(1)} has no wire form here")
            return f"map:{kind}", 0
        if go_type == "string":
            return "s", 0
        if go_type == "bool":
            return "b", 0
        if go_type in INTEGERS:
            return "i", 0
        alias, _, name = go_type.rpartition(".")
        where = self.packages[path].imports[alias] if alias else path
        if (where, name) in SPECIAL:
            return SPECIAL[where, name], 0
        package = self.packages.get(where)
        if package is None:
            return "unknown", 0
        if name in package.structs:
            return f"m:{self.add(where, name)}", 0
        return self.kind(where, package.named[name])


def render(messages: dict[str, dict[int, tuple[str, str, int]]]) -> str:
    lines = [HEADER]
    for name in sorted(messages):
        lines.append(f'    "{name}": {{\n')
        for number, (json_name, kind, flags) in sorted(messages[name].items()):
            lines.append(f'        {number}: ("{json_name}", "{kind}", {flags}),\n')
        lines.append("    },\n")
    lines.append("}\n")
    return "".join(lines)


def generate() -> str:
    """The text of `protobuf_schema`, from the Go sources at `VERSION`."""
    schema = Schema(read_inputs())
    for (api_version, _), name in DECODED_KINDS.items():
        schema.add(GROUPS[api_version], name)
    return render(schema.messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reconciler.sim.kube.protobuf_schema_gen")
    parser.add_argument("--check", action="store_true", help="only say whether the file differs")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        same = TARGET.read_text() == text
        print(f"{TARGET.name} is {'up to date' if same else 'out of date'} ({VERSION})")
        return 0 if same else 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
