"""The GitHub Actions workflows keep their promises: what runs where, with which permissions.

Loaded with PyYAML, which reads the key `on` as the boolean True.
"""

import re

import pytest
import yaml

from fieldguide import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40} # v\S+\s*$")


def load(name):
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True)
    return data


def steps(workflow):
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def runs(workflow):
    return [step.get("run", "") for step in steps(workflow)]


def uses(workflow):
    return [step["uses"].split("@")[0] for step in steps(workflow) if "uses" in step]


@pytest.mark.parametrize("name", ["ci.yml", "gpu-timings.yml", "pages.yml"])
def test_every_action_is_pinned_to_a_commit(name):
    lines = [line for line in (WORKFLOWS / name).read_text().splitlines() if "uses:" in line]
    assert lines
    for line in lines:
        assert PINNED.match(line), line


def test_ci_runs_make_test_on_push_and_pull_request():
    ci = load("ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    assert "make test" in runs(ci)
    assert ci["permissions"] == {"contents": "read"}


def test_gpu_timings_only_runs_trusted_code_without_permissions():
    text = (WORKFLOWS / "gpu-timings.yml").read_text()
    gpu = load("gpu-timings.yml")
    assert gpu["on"] == {"push": {"branches": ["main"]}, "workflow_dispatch": None}
    assert gpu["permissions"] == {}
    assert "secrets" not in text
    (job,) = gpu["jobs"].values()
    assert "self-hosted" in job["runs-on"]
    assert "permissions" not in job
    assert {"make timings", "make test-gpu"} <= set(runs(gpu))
    upload = next(s for s in job["steps"] if "upload-artifact@" in s.get("uses", ""))
    assert upload["with"]["path"] == "timings/*/*.json"  # every GPU folder, every kept run


def test_pages_builds_with_read_and_deploys_with_pages_permissions():
    pages = load("pages.yml")
    assert pages["permissions"] == {}
    build, deploy = pages["jobs"]["build"], pages["jobs"]["deploy"]
    assert build["permissions"] == {"contents": "read"}
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["needs"] == "build"
    assert deploy["environment"]["name"] == "github-pages"
    assert "make build" in runs(pages)
    build_step = next(s for s in pages["jobs"]["build"]["steps"] if s.get("run") == "make build")
    assert build_step["env"]["SITE_URL"].startswith("https://")  # the served path of the site
    assert {"actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses(pages))
