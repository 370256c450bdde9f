"""Beam's processes ask glibc for two malloc arenas: this one by `mallopt`, the workers a
local runner starts through the environment; a value the user set wins, and a C library
without `mallopt` is left alone."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from nmtpipe.pipelines.beam import malloc_arenas


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    monkeypatch.delenv(malloc_arenas.ENV, raising=False)
    return fake


def test_this_process_and_its_children_get_two_arenas(libc):
    malloc_arenas.limit_arenas()
    assert libc.calls == [(-8, 2)]  # M_ARENA_MAX
    child = subprocess.run(
        [sys.executable, "-c", f"import os; print(os.environ['{malloc_arenas.ENV}'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert child.stdout.strip() == "2"


def test_a_value_the_user_set_is_kept(libc, monkeypatch):
    monkeypatch.setenv(malloc_arenas.ENV, "4")
    malloc_arenas.limit_arenas()
    assert libc.calls == [(-8, 4)]
    assert os.environ[malloc_arenas.ENV] == "4"


@pytest.mark.parametrize("library", [OSError("no libc"), object()])
def test_a_c_library_without_mallopt_is_left_alone(monkeypatch, library):
    def load(name: str) -> object:
        if isinstance(library, Exception):
            raise library
        return library

    monkeypatch.setattr(ctypes, "CDLL", load)
    monkeypatch.delenv(malloc_arenas.ENV, raising=False)
    malloc_arenas.limit_arenas()  # no error


def test_the_real_call_succeeds_here(monkeypatch):
    monkeypatch.delenv(malloc_arenas.ENV, raising=False)
    malloc_arenas.limit_arenas()
