"""The native look at another process: which processes get one (``peers.peers_to_look_at``, judged on recorded
windows of the casebook), and what ``observe.native_look`` records of them (recorders and environments injected;
the live look is tested in tests/cli/test_doctor_native.py)."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.analysis.peers import MAX_PEER_LOOKS, child_places, peers_to_look_at
from dflash_diag.model import NativeProfile, NativeStack, Observation, PeerNative
from dflash_diag.observe.codec import read_observation
from dflash_diag.observe.native_look import native_look
from dflash_diag.sources.native_profile import parse_raw
from dflash_diag.sources.redaction import ProcessRedactor

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"
TZSET = ("thread (4050): MainThread;<module> (meters.py:33);time_mktime (libpython3.11.so.1.0);timelocal (libc.so.6);"
         "tzset (libc.so.6);fstatat64 (libc.so.6) 40\n")


def _recorded(name: str) -> Observation:
    obs = read_observation(gzip.open(RECORDED / f"{name}.json.gz").read())
    assert isinstance(obs, Observation)
    return obs


def _child_pid(obs: Observation) -> int:
    return next(p.pid for w in obs.outside_waits for p in w.peers if p.relation == "child")


def test_a_busy_child_in_the_kernel_that_a_finding_names_gets_the_look_and_a_plain_busy_one_does_not() -> None:
    """Batch 17's decoder child (99% CPU, a third in the kernel) and batch 16's parse worker (half in the kernel)
    are looked at; their healthy twins' children compute in user space and are not (a look beside the process's own
    would stop their reader: they would block in their writes); once looked at, not again."""
    for name in ("settings17_juniper__outside", "settings16_quarry__attach"):
        obs = replace(_recorded(name), peer_native=())  # as the window left it, before the look
        assert peers_to_look_at(analyse(obs)) == (_child_pid(obs),), name
        looked = replace(obs, peer_native=(PeerNative(pid=_child_pid(obs), profile=NativeProfile(20.0, 2.5, 0, ())),))
        assert peers_to_look_at(analyse(looked)) == ()
    for name in ("settings17_juniper_fixed__outside", "settings16_quarry_fixed__attach"):
        assert peers_to_look_at(analyse(replace(_recorded(name), peer_native=()))) == (), name
    assert MAX_PEER_LOOKS == 2


def test_the_peers_c_library_calls_and_their_mechanism_join_what_the_wait_says_of_it() -> None:
    obs = replace(_recorded("settings17_juniper__outside"), peer_native=())
    pid = _child_pid(obs)
    profile = NativeProfile(rate_hz=20.0, duration_s=2.5, samples=40, stacks=parse_raw(TZSET.replace("4050", str(pid))))
    unset = analyse(replace(obs, peer_native=(PeerNative(pid=pid, profile=profile),)))
    assert unset.headline is not None
    assert "its native samples in the C library: timelocal > tzset > fstatat64 100%" in unset.headline.text
    assert "TZ is not set in its environment" in unset.headline.text
    assert child_places(unset.observation)[pid].startswith("its native samples in the C library: timelocal")
    tz_set = replace(obs, peer_native=(PeerNative(pid=pid, profile=profile, env=(("TZ", "UTC"),)),))
    assert "TZ is not set" not in (analyse(tz_set).headline.text or "")  # type: ignore[union-attr]


class _Recorder:
    def __init__(self, pid: int, log: list[str]) -> None:
        self.pid, self.log = pid, log

    def start(self) -> None:
        self.log.append(f"start {self.pid}")

    def stop(self) -> NativeProfile:
        self.log.append(f"stop {self.pid}")
        stack = NativeStack(os_thread_id=self.pid, thread_name="worker token-abcdef123456", frames=(), count=3)
        return NativeProfile(rate_hz=20.0, duration_s=1.0, samples=3, stacks=(stack,))


def test_the_look_records_the_peers_beside_or_without_the_process_and_reads_their_mechanisms_environment() -> None:
    obs = replace(_recorded("settings17_juniper__outside"), native=None, peer_native=())
    log: list[str] = []
    redactor = ProcessRedactor(secrets=("token-abcdef123456",))
    environ = {obs.pid: {"TZ": "UTC"}, 901: {"TZ": "token-abcdef123456", "HOME": "/root"}, 902: {}}
    kept = native_look(obs, duration_s=0.5, recorder=lambda pid, _s: _Recorder(pid, log), sleep=lambda _s: None,
                       redactor=redactor, peers=(901, 902), own=False, peer_env=("TZ",),
                       environ=lambda pid: environ[pid])
    assert kept.native is None  # own=False: the process itself is left alone
    assert [p.pid for p in kept.peer_native] == [901, 902]
    assert sorted(log) == ["start 901", "start 902", "stop 901", "stop 902"]
    first = kept.peer_native[0]
    assert first.env == (("TZ", redactor.text("token-abcdef123456")),) and "abcdef123456" not in first.env[0][1]
    assert "abcdef123456" not in (first.profile.stacks[0].thread_name or "")
    assert kept.peer_native[1].env == ()  # nothing the mechanisms read
    log.clear()
    both = native_look(obs, duration_s=0.5, recorder=lambda pid, _s: _Recorder(pid, log), sleep=lambda _s: None,
                       redactor=redactor, peers=(901,), environ=lambda pid: environ[pid])
    assert both.native is not None and [p.pid for p in both.peer_native] == [901]
    assert log[:2] == [f"start {obs.pid}", "start 901"]


def test_a_peer_whose_environment_cannot_be_read_is_looked_at_without_it() -> None:
    obs = replace(_recorded("settings17_juniper__outside"), peer_native=())

    def unreadable(pid: int) -> dict[str, str]:
        raise PermissionError(13, "Permission denied")

    kept = native_look(obs, duration_s=0.25, recorder=lambda pid, _s: _Recorder(pid, []), sleep=lambda _s: None,
                       redactor=ProcessRedactor(), peers=(901,), own=False, peer_env=("TZ",), environ=unreadable)
    assert kept.peer_native[0].env == () and kept.peer_native[0].profile.samples == 3


def test_the_recorded_look_at_the_tz_programs_child_names_the_mechanism_in_every_mode() -> None:
    """Recorded live after the look existed (2026-12-06): the child's profile is in the observation, and the
    headline says the chain and the unset TZ."""
    for mode in ("outside", "probes", "attach"):
        analysis = analyse(_recorded(f"settings17_juniper__{mode}"))
        assert len(analysis.observation.peer_native) == 1, mode
        assert analysis.headline is not None and "> tzset > " in analysis.headline.text, mode
        assert "TZ is not set in its environment" in analysis.headline.text, mode
