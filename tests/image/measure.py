"""What the image weighs and how long it takes to build, measured as the image tests build it.

    python -m tests.image.measure [--json PATH]

Builds the image with `make image` (Docker or Podman, as `tests/image` finds them, with
the base image as the engine has it), then prints: the build's wall time, what the
project's layers add to the base uncompressed (the engine's image sizes, as
`test_hygiene.py` checks against its ceiling) and compressed as a registry stores them
(the layers' blob sizes in `save --format docker-dir --compress`). The image is removed
afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests.image.engine import Image, Unavailable, base_reference, build, find_engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
import perf_record  # a benchmark's helper, beside the benchmarks


def compressed_bytes(image: Image) -> int:
    """The project's layers as gzip blobs, as a registry stores them."""
    base_layers = len(image.inspect(base_reference())["RootFS"]["Layers"])  # type: ignore[index]
    with tempfile.TemporaryDirectory(prefix="image-measure-") as directory:
        saved = Path(directory) / "image"
        image.engine_output(
            "save", "--format", "docker-dir", "--compress", "--output", str(saved), image.ref
        )
        manifest = json.loads((saved / "manifest.json").read_text())
        return sum(int(layer["size"]) for layer in manifest["layers"][base_layers:])


def measure() -> dict[str, object]:
    engine = find_engine()
    image = build(engine, "measure-" + uuid.uuid4().hex[:8])
    try:
        version = image.engine_output("--version").strip()
        return {
            "engine": version,
            "build_seconds": image.build_seconds,
            "added_mb": image.added_bytes() / 1e6,
            "added_compressed_mb": compressed_bytes(image) / 1e6,
        }
    finally:
        subprocess.run([engine, "rmi", image.ref], capture_output=True, timeout=120, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures here (perf_record)")
    args = parser.parse_args(argv)
    run = perf_record.Run("image", argv)
    try:
        figures = measure()
    except Unavailable as reason:
        print(f"no image measured: {reason}", file=sys.stderr)
        return 1
    for name, value in figures.items():
        print(f"{name}: {value:.1f}" if isinstance(value, float) else f"{name}: {value}")
    if args.json:
        run.write(args.json, figures)
    return 0


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parents[2])
    sys.exit(main())
