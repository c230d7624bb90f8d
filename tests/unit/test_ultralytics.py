"""Ultralytics' last.pt / best.pt, on the files its own trainer wrote
(sample_checkpoints/make_ultralytics_samples.py): the weights are whole pickled DetectionModel
objects, listed under the names their state_dict() gives (expected_keys.json, which the
generator wrote from Ultralytics' own load of each file); an interrupted run's last.pt holds
the EMA only (model None), which is what its resume loads; a finished run's file is stripped.
"""

from __future__ import annotations

import json

import pytest

from ckpt_browser.model import natural_key as _natural

from .helpers import SAMPLES, run_cli

ROOT = SAMPLES / "projects" / "ultralytics"
LAST = "interrupted/runs/detect/train/weights/last.pt"
BEST = "finished/runs/detect/train/weights/best.pt"
EXPECTED = json.loads((ROOT / "expected_keys.json").read_text())


def cli_json(*args: str) -> tuple[int, dict]:
    done = run_cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("rel", [LAST, BEST])
def test_weights_are_what_ultralytics_loads_by_their_state_dict_names(rel):
    want = EXPECTED[rel]
    rc, doc = cli_json("inspect", str(ROOT / rel))
    assert rc == 0
    weights = [t for t in doc["tensors"] if t["component"] == "weights"]
    prefix = want["key"] + "."
    assert [t["name"].removeprefix(prefix) for t in weights] == want["names"]
    assert all(t["name"].startswith(prefix) for t in weights)
    assert doc["totals"]["tensors"] == len(want["names"])
    assert doc["totals"]["params"] == want["params"]
    # plain tensor attributes (Detect's stride, anchors) are in the file, not in state_dict()
    others = {t["name"].removeprefix(prefix) for t in doc["tensors"] if t["component"] == "other"}
    assert others and not others & set(want["names"])


def test_interrupted_last_pt_resumes_from_its_ema_with_its_optimizer():
    rc, doc = cli_json("check", str(ROOT / LAST))
    assert rc == 3 and doc["verdict"] == "inexact"
    comps = doc["components"]
    assert comps["weights"]["status"] == "ok"
    assert "only an EMA copy" in comps["weights"]["detail"]
    assert f"holds {len(EXPECTED[LAST]['names'])} weight tensors" in comps["weights"]["detail"]
    assert comps["optimizer"]["status"] == "ok"
    assert comps["progress"]["status"] == "ok" and "epoch 0" in comps["progress"]["detail"]


def test_finished_best_pt_is_stripped_a_warm_start_only():
    rc, doc = cli_json("check", str(ROOT / BEST))
    assert rc == 4 and doc["verdict"] == "weights-only"
    opt = doc["components"]["optimizer"]
    assert opt["status"] == "missing"
    assert "stripped" in opt["detail"] and "epoch -1" in opt["detail"]


def test_diff_and_stats_name_the_weights_alike_in_both_files():
    a, b = str(ROOT / LAST), str(ROOT / BEST)
    doc = json.loads(run_cli("diff", a, b, "--json").stdout)
    assert [r["name"] for r in doc["tensors"]] == sorted(EXPECTED[LAST]["names"], key=_natural)
    assert {r["status"] for r in doc["tensors"]} == {"unchanged"}  # paired, not only-in-A/B
    first = doc["tensors"][0]
    assert first["names"] == {"a": "ema." + first["name"], "b": "model." + first["name"]}
    for path, full in ((a, first["names"]["a"]), (b, first["names"]["b"])):
        done = run_cli("stats", path, first["name"])  # the name the diff printed
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{full}  F16")
