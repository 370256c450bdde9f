"""Training as a step: how far a job that adds updates per new data trains, and the one
line that refuses another model (the chain and refresh tests run the step itself)."""

from __future__ import annotations

from nmtpipe.pipelines.workflow.train import _other_model, _target


def test_a_job_adds_its_updates_to_a_model_once_per_new_data():
    last = {"updates": 40, "max_update": 40, "data_fingerprint": "v1"}
    assert _target(None, "v1", 20) == 20  # a new model
    # New data: 20 more than the model's last finished job ended with, which a re-run of
    # a job killed on the new data still reads (its checkpoints are further on).
    assert _target(last, "v2", 20) == 60
    assert _target(last, "v1", 20) == 40  # the data it trained on last: nothing more
    # An older nmtpipe's summary names no data: the data is taken as new.
    assert _target({"updates": 40, "max_update": 40}, "v1", 20) == 60


def test_another_model_is_refused_naming_what_differs():
    ours = {"fingerprint": "a" * 64, "options": {"arch": "transformer_tiny"}, "vocab": "v",
            "data": "d2"}  # fmt: skip
    theirs = {**ours, "fingerprint": "b" * 64, "data": "d1"}
    line = str(_other_model("runs/x/checkpoints", theirs, ours))
    assert line == (
        "runs/x/checkpoints holds another model (other data: model bbbbbbbbbbbb, this "
        "config's is aaaaaaaaaaaa); delete runs/x/checkpoints to train this one there, or "
        "set reset_data to continue it on this data"
    )
    theirs = {**theirs, "vocab": "w"}
    assert "(other vocabulary and data: " in str(_other_model("out", theirs, ours))
    assert "reset_data" not in str(_other_model("out", theirs, ours))
