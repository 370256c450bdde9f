"""Beam's introspection, memoized: the same answers, and pipelines that run the same."""

from __future__ import annotations

import functools
import gc
import weakref

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TypeOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate

from nmtpipe.pipelines.beam import graph_memo


@pytest.fixture
def memoized():
    """graph_memo installed for one test, Beam's own functions back afterwards."""
    args, view_as = core.get_function_args_defaults, PipelineOptions.view_as
    assert graph_memo.install()
    yield
    core.get_function_args_defaults, PipelineOptions.view_as = args, view_as


SEEN = userstate.BagStateSpec("seen", VarIntCoder())
FLUSH = userstate.TimerSpec("flush", userstate.TimeDomain.WATERMARK)
SEEN_PARAM, FLUSH_PARAM = beam.DoFn.StateParam(SEEN), beam.DoFn.TimerParam(FLUSH)


class RunningCountFn(beam.DoFn):
    """Stateful: numbers each key's values in arrival order, with a bag state and a
    timer parameter, the two things Beam looks for in a DoFn's defaults."""

    def process(self, element, seen=SEEN_PARAM, flush=FLUSH_PARAM):
        key, value = element
        before = len(list(seen.read()))
        seen.add(value)
        yield key, before + 1

    @userstate.on_timer(FLUSH)
    def on_flush(self):
        return []


def test_install_is_idempotent_and_keeps_beams_functions(memoized):
    first = core.get_function_args_defaults
    assert graph_memo.install()
    assert core.get_function_args_defaults is first
    assert not hasattr(first.memoizes, "memoizes")


def test_dofn_specs_and_arguments_are_beams_own(memoized):
    unmemoized = core.get_function_args_defaults.memoizes
    fn = RunningCountFn()
    assert userstate.get_dofn_specs(fn) == ({SEEN}, {FLUSH})
    assert userstate.get_dofn_specs(RunningCountFn()) == userstate.get_dofn_specs(fn)
    for method in (fn.process, RunningCountFn.process, fn.on_flush, lambda a, b=2: a):
        assert core.get_function_args_defaults(method) == unmemoized(method)
    args, _ = core.get_function_args_defaults(fn.process)
    assert args == ["element", "seen", "flush"]  # `self` bound, as Beam reports it
    args.append("mine")  # each caller gets lists of its own
    assert core.get_function_args_defaults(fn.process)[0] == ["element", "seen", "flush"]
    partial = functools.partial(lambda a, b: a, b=1)  # not memoized: inspected each time
    assert core.get_function_args_defaults(partial) == unmemoized(partial)


def test_a_function_is_not_kept_alive(memoized):
    def scratch(a, b=1):
        return a

    core.get_function_args_defaults(scratch)
    dead = weakref.ref(scratch)
    del scratch
    gc.collect()
    assert dead() is None


def test_views_share_values_per_options_object(memoized):
    options = PipelineOptions(["--runner=FnApiRunner"])
    standard = options.view_as(StandardOptions)
    assert options.view_as(StandardOptions) is standard
    standard.runner = "DirectRunner"  # set through one view, seen through every other
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    assert options.get_all_options()["runner"] == "DirectRunner"
    other = PipelineOptions(["--runner=FnApiRunner"])  # same flags, values of its own
    assert other.view_as(StandardOptions) is not standard
    assert other.view_as(StandardOptions).runner == "FnApiRunner"
    assert other.view_as(TypeOptions).pipeline_type_check


def test_a_stateful_pipeline_runs_the_same(memoized):
    with TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        counted = (
            p | beam.Create([("a", 5), ("b", 7), ("a", 6), ("a", 1)]) | beam.ParDo(RunningCountFn())
        )  # each key's values numbered 1, 2, ... whatever their order: the state worked
        assert_that(counted, equal_to([("a", 1), ("a", 2), ("a", 3), ("b", 1)]))
