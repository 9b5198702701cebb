"""What the README and the docs tell a newcomer to copy works: every copy of the GPU pod
and Job is the example the demo applies (tests/cli/test_demo_live.py brings those to
Running), both pass strict schema validation, the README's front page shows both, and
the install guide's kustomize overlay installs `deploy/` with the user's image through
`kubectl apply -k`'s built-in kustomize alone."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from reconciler.demo.examples import EXAMPLES

from .manifests import DEPLOY, find, kustomize, pod_spec, validate

ROOT = DEPLOY.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
_EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```yaml\n(.*?)```", re.S)


def examples() -> list[tuple[Path, str, str]]:
    """(page, name, text) of every `<!-- example: name -->` block of the README and docs."""
    return [
        (page, name, text) for page in PAGES for name, text in _EXAMPLE.findall(page.read_text())
    ]


def test_every_copy_of_an_example_is_the_one_the_demo_applies() -> None:
    found = examples()
    for page, name, text in found:
        if name in EXAMPLES:
            assert text == EXAMPLES[name], f"{page.relative_to(ROOT)}: {name} differs"
    shown_in_readme = {name for page, name, _ in found if page == README}
    assert set(EXAMPLES) <= shown_in_readme
    for text in EXAMPLES.values():
        for document in yaml.safe_load_all(text):
            validate(document)


def test_the_install_overlay_sets_the_image_with_kubectl_alone(tmp_path: Path) -> None:
    (text,) = [t for _, name, t in examples() if name == "kustomization.yaml"]
    overlay = tmp_path / "my-install"
    overlay.mkdir()
    # The guide's overlay sits next to a checkout named runpod-reconciler.
    (tmp_path / "runpod-reconciler").symlink_to(ROOT)
    (overlay / "kustomization.yaml").write_text(text.replace("<registry>", "registry.example"))
    objects = kustomize(overlay)
    (container,) = pod_spec(find(objects, "Deployment"))["containers"]
    assert container["image"] == "registry.example/runpod-reconciler:0.1.0"
    assert find(objects, "Namespace")["metadata"]["name"] == "runpod-system"


def test_the_readme_is_a_front_page_and_getting_started_has_all_it_shows() -> None:
    """At most 250 lines; what it leaves out lives in the site, and Getting started shows
    every example the README does."""
    assert len(README.read_text().splitlines()) <= 250
    found = examples()
    in_readme = {name for page, name, _ in found if page == README}
    started = ROOT / "docs" / "getting-started.md"
    assert in_readme <= {name for page, name, _ in found if page == started}


def test_every_storage_class_the_docs_name_is_one_that_is_shipped() -> None:
    shipped = {
        document["metadata"]["name"]
        for document in yaml.safe_load_all((DEPLOY / "common" / "storageclass.yaml").read_text())
        if document["kind"] == "StorageClass"
    }
    pattern = re.compile(r"StorageClass\s+`([^`]+)`|`([^`]+)`\s+StorageClass")
    for page in PAGES:
        for match in pattern.finditer(page.read_text()):
            name = match.group(1) or match.group(2)
            assert name in shipped, f"{page.relative_to(ROOT)} calls {name} a StorageClass"


def test_where_a_demo_user_meets_exec_they_are_told_it_runs_on_this_machine() -> None:
    for page in ("getting-started.md", "guides/exec.md"):
        text = " ".join((ROOT / "docs" / page).read_text().split())
        assert "runs on this machine" in text and "`/tmp`, `/workspace` and `/root`" in text, page


def test_the_readme_says_what_the_first_test_run_builds_and_with_which_go() -> None:
    text = " ".join(README.read_text().split())
    wanted = set()
    for go_mod in (ROOT / "tests" / "realk8s" / "gobuild").glob("*/go.mod"):
        found = re.search(r"^go (\d+\.\d+)", go_mod.read_text(), re.M)
        assert found is not None, go_mod
        wanted.add(found.group(1))
    assert len(wanted) == 1 and f"Go {wanted.pop()}" in text
    for words in ("kube-apiserver", "metrics-server", "15 minutes", "RECONCILER_K8S_CACHE"):
        assert words in text, words
