"""Native stacks (py-spy record --native): py-spy's raw output read into stacks, and where a thread's time goes
below its Python lines. The raw lines are py-spy 0.4's own, cut from real recordings of the casebook's programs
(a QNNPACK int8 teacher, decimal arithmetic at 120 digits, a thread waiting on a queue)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from dflash_diag.analysis.findings.fastpath import SLOW_PATH_WARNING_SHARE, SLOW_PATHS
from dflash_diag.analysis.native import gil_waits, native_spots, native_text, share_in, short_name
from dflash_diag.model import Frame, NativeProfile, NativeStack
from dflash_diag.sources.native_profile import parse_raw

QNNPACK = ("thread (4692): labeller;0x7f8445d278ec (libc.so.6);thread_run (libpython3.11.so.1.0);"
           "Thread.run (threading.py:982);labeller (train.py:48);WindowLM.forward (teacher.py:17);"
           "Linear.forward (torch/ao/nn/quantized/dynamic/modules/linear.py:58);"
           "OpOverloadPacket.__call__ (torch/_ops.py:1279);pybind11::cpp_function::dispatcher (libtorch_python.so);"
           "torch::jit::_get_operation_for_overload_or_packet (libtorch_python.so);"
           "c10::BoxedKernel::callBoxed (libtorch_cpu.so);"
           "torch::autograd::VariableHooks::basic_autograd_not_implemented_fallback (libtorch_cpu.so);"
           "PackedLinearWeightsQnnp::apply_dynamic(at::Tensor, bool) (libtorch_cpu.so);"
           "qnnpack::qnnpackLinearDynamic (libtorch_cpu.so);"
           "pytorch_q8gemm_dq_ukernel_4x4c2__sse2 (libtorch_cpu.so) 17")
DECIMAL = ("thread (4642): featurizer;thread_run (libpython3.11.so.1.0);features (invoices.py:40);"
           "PyNumber_Add (libpython3.11.so.1.0);nm_mpd_qadd (_decimal.c:4191);mpd_qadd (mpdecimal.c:3504);"
           "_mpd_baseshiftl (basearith.c:468) 4\n"
           "thread (4642): featurizer;thread_run (libpython3.11.so.1.0);features (invoices.py:42);"
           "dec_mpd_qsqrt (_decimal.c:4312);_mpd_mul_words (typearith.h:56) 5\n"
           "thread (4642): featurizer;thread_run (libpython3.11.so.1.0);features (invoices.py:41);"
           "nm_mpd_qdiv (_decimal.c:4194);__udivti3 (_decimal.cpython-311-x86_64-linux-gnu.so) 4\n"
           "thread (4642): featurizer;thread_run (libpython3.11.so.1.0);featurizer (train.py:35) 2\n")
WAITING = ("thread (4640): MainThread;<module> (train.py:88);main (train.py:70);get (queue.py:171);"
           "wait (threading.py:320);lock_PyThread_acquire_lock (libpython3.11.so.1.0);"
           "pthread_cond_timedwait (libc.so.6) 30\n")


def _stacks(raw: str) -> tuple[NativeStack, ...]:
    return parse_raw(raw)


def test_raw_lines_read_into_innermost_first_frames_with_their_thread() -> None:
    stacks = parse_raw(QNNPACK + "\nnot a stack line\nthread (12) 3\n" + "unrooted;frame (a.so) 2\n")
    assert len(stacks) == 2  # the bad line and the unrooted one are skipped; a stack of no frame is kept
    qnn = stacks[0]
    assert (qnn.os_thread_id, qnn.thread_name, qnn.count) == (4692, "labeller", 17)
    leaf, python = qnn.frames[0], next(f for f in qnn.frames if not f.native)
    assert leaf == Frame("pytorch_q8gemm_dq_ukernel_4x4c2__sse2", "libtorch_cpu.so", 0, native=True)
    assert python == Frame("OpOverloadPacket.__call__", "torch/_ops.py", 1279, native=False)
    # a C++ name with its own parentheses keeps them; the library is what follows the last " ("
    assert any(f.name == "PackedLinearWeightsQnnp::apply_dynamic(at::Tensor, bool)" for f in qnn.frames)
    assert stacks[1].frames == () and stacks[1].thread_name is None


def test_the_entry_below_the_python_line_is_named_past_the_bindings_plumbing_with_its_leaf() -> None:
    spots = native_spots(_stacks(QNNPACK))
    assert len(spots) == 1
    spot = spots[0]
    assert (spot.what, spot.where, spot.leaf) == ("PackedLinearWeightsQnnp::apply_dynamic", "libtorch_cpu.so",
                                                 "pytorch_q8gemm_dq_ukernel_4x4c2__sse2")
    assert spot.share == 1.0
    assert str(spot) == ("PackedLinearWeightsQnnp::apply_dynamic [libtorch_cpu.so] 100%, mostly in "
                         "pytorch_q8gemm_dq_ukernel_4x4c2__sse2")


def test_entries_of_one_file_are_named_together_when_they_hold_much_more_than_any_one() -> None:
    spots = native_spots(_stacks(DECIMAL))
    # add, square root and divide each hold a quarter to a third; _decimal.c holds 13 of the 15 samples
    assert [s.what for s in spots] == ["_decimal.c"]
    assert round(spots[0].share, 2) == round(13 / 15, 2)
    assert set(spots[0].entries) == {"dec_mpd_qsqrt", "nm_mpd_qadd", "nm_mpd_qdiv"}
    assert native_text(NativeProfile(20.0, 2.0, 15, _stacks(DECIMAL)), {4642}).startswith(
        "in native code: _decimal.c (dec_mpd_qsqrt, nm_mpd_qadd, nm_mpd_qdiv) 87%")


def test_waits_are_not_work_and_too_few_samples_say_nothing() -> None:
    both = _stacks(DECIMAL + WAITING)
    profile = NativeProfile(20.0, 2.0, 45, both)
    assert native_text(profile, {4640}) == ""  # the main thread only waited: no native work to name
    assert native_text(profile, {4642}).startswith("in native code: _decimal.c")
    assert native_text(profile, {999}) == "" and native_text(None, {4642}) == ""
    few = _stacks(DECIMAL.replace(" 4\n", " 1\n").replace(" 5\n", " 1\n"))  # 5 samples: below MIN_SAMPLES
    assert native_spots(few) == ()
    share, samples = share_in(both, re.compile(r"_decimal|mpdec"))
    assert samples == 15 and round(share, 3) == round(13 / 15, 3)  # of the working samples: the 30 waiting are not
    assert gil_waits(_stacks(WAITING)).waiting == 0  # a queue's lock wait is not the GIL's


def _recorded(name: str) -> tuple[NativeStack, ...]:
    return parse_raw(gzip.decompress((FIXTURES / name).read_bytes()).decode())


def test_gil_waits_are_told_from_the_native_stacks_of_every_thread_waiting_ones_included() -> None:
    """py-spy 0.4.3 --native --idle, 3 s at 20 Hz, of the casebook's SymPy program (a generator thread in pure
    Python, the trainer thread running torch ops) and its twin: the trainer waits for the GIL on return from its
    ops (pybind11's gil_scoped_*, torch's THPVariable_* wrappers), twice as often beside the uncached SymPy."""
    planted, twin = _recorded("pyspy_native_idle_calculus.raw.gz"), _recorded("pyspy_native_idle_calculus_fixed.raw.gz")
    main = gil_waits(s for s in planted if s.thread_name == "MainThread")
    assert main.samples == 59 and round(main.share, 2) == 0.69
    assert {name for name, _ in main.at} & {"torch::autograd::THPVariable_layer_norm",
                                           "detail::ConcretePyInterpreterVTable::incref"}
    assert round(gil_waits(s for s in twin if s.thread_name == "MainThread").share, 2) == 0.36
    generator = gil_waits(s for s in planted if s.thread_name == "sympy-generator")
    assert generator.share < 0.1 and all(name == "the interpreter" for name, _ in generator.at)
    # the work below the trainer's Python lines is named from its working samples only (BLAS, not the waits)
    spots = native_spots(s for s in planted if s.thread_name == "MainThread")
    assert spots and spots[0].what.startswith("mkl_blas") and round(spots[0].share, 2) == round(10 / 18, 2)


def test_short_names_drop_templates_arguments_and_anonymous_namespaces() -> None:
    assert short_name("at::native::(anonymous namespace)::slow_conv2d_forward_out_cpu<float>(at::Tensor const&, "
                      "long)") == "at::native::slow_conv2d_forward_out_cpu"
    assert short_name("c10::function_ref<void (char**, long const*, long, long)>::callback_fn<at::native::AVX2::"
                      "VectorizedLoop2d<op, vop> >") == "c10::function_ref::callback_fn"
    assert short_name("void at::native::foo::bar::baz::qux(int)") == "bar::baz::qux"
    assert short_name("mpd_qadd") == "mpd_qadd"


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"


def test_whole_recordings_read_line_for_line_and_name_each_programs_native_work() -> None:
    """py-spy 0.4.3's raw output of two casebook programs, 6 s at 20 Hz each, as it wrote them."""
    for name, thread, expected in (("pyspy_native_poetry.raw", "labeller", r"Qnnp|qnnpack|q8gemm"),
                                   ("pyspy_native_invoice.raw", "featurizer", r"_decimal|mpd")):
        text = (FIXTURES / name).read_text()
        stacks = parse_raw(text)
        assert len(stacks) == len(text.splitlines())  # every line py-spy wrote is a stack
        tids = {s.os_thread_id for s in stacks if s.thread_name == thread}
        said = native_text(NativeProfile(20.0, 6.0, max(s.count for s in stacks), stacks), tids)
        assert re.search(expected, said), said


def _recorded(name: str) -> tuple[NativeStack, ...]:
    return parse_raw(gzip.decompress((FIXTURES / name).read_bytes()).decode())


@pytest.mark.parametrize(("name", "path"), [("pyspy_native_settings2_vision.raw.gz", 0),
                                            ("pyspy_native_settings4_genomics.raw.gz", 1)])
def test_the_slow_path_of_a_planted_program_is_seen_and_its_twins_fast_path_is_not(name: str, path: int) -> None:
    """The casebook's programs with oneDNN off (convolutions) and flash attention off, 5 s at 20 Hz each, against
    their healthy twins (the same code on the fast path): only the planted one runs the slow path's functions."""
    code = SLOW_PATHS[path][0]
    planted, _ = share_in([s for s in _recorded(name) if s.thread_name == "trainer"], code)
    twin_name = name.replace("vision", "visionfixed").replace("genomics", "genomicscheck")
    twin, samples = share_in([s for s in _recorded(twin_name) if s.thread_name == "trainer"], code)
    assert planted >= SLOW_PATH_WARNING_SHARE and twin == 0.0 and samples >= 50, (planted, twin, samples)
    # and no other slow path is read into either
    for other, (pattern, _, _, _) in enumerate(SLOW_PATHS):
        if other != path:
            assert share_in(_recorded(name), pattern)[0] == 0.0 and share_in(_recorded(twin_name), pattern)[0] == 0.0


def test_qnnpacks_x86_micro_kernels_are_its_slow_path_signature() -> None:
    stacks = parse_raw((FIXTURES / "pyspy_native_poetry.raw").read_text())
    labeller = [s for s in stacks if s.thread_name == "labeller"]
    share, _ = share_in(labeller, SLOW_PATHS[2][0])
    assert share >= 0.5, share
    # the same stacks with the NEON build's names (an ARM machine, whose own engine QNNPACK is) are not it
    arm = [NativeStack(s.os_thread_id, s.thread_name, tuple(Frame(f.name.replace("__sse2", "__neon"), f.filename,
                                                                  f.line, f.native) for f in s.frames), s.count)
           for s in labeller]
    assert share_in(arm, SLOW_PATHS[2][0])[0] == 0.0


def test_a_leaf_py_spy_could_not_name_is_said_by_its_library() -> None:
    raw = "\n".join(f"thread (7): worker;work (w.py:3);conv_impl (libconv.so);? (libconv.so) {n}" for n in (12,))
    (spot,) = native_spots(parse_raw(raw))
    assert (spot.what, spot.leaf) == ("conv_impl", "libconv.so")
    unknown = parse_raw("thread (7): worker;work (w.py:3);conv_impl (libconv.so);0x7f00aa (?) 12")
    assert native_spots(unknown)[0].leaf == "code py-spy could not name"


def test_the_native_look_is_taken_when_no_cause_of_warning_level_is_linked() -> None:
    """Recorded windows of the casebook: a stage verdict whose only cause is information (kernel time at a socket
    call whose cost is not known) takes the look; one with a warning-level cause (a busy child waited on) does not; a window
    that already has its native profile does not take another."""
    from dataclasses import replace

    from dflash_diag.analysis import analyse
    from dflash_diag.analysis.native import wants_native_look
    from dflash_diag.snapshot.bundle import load_observation

    recorded = Path(__file__).resolve().parents[1] / "casebook" / "observations"
    info_only = analyse(replace(load_observation(str(recorded / "settings9_telemetry__outside.json.gz")), native=None))
    assert info_only.headline is not None and info_only.headline.because == ("kernel-time",)
    assert wants_native_look(info_only)
    warned = analyse(load_observation(str(recorded / "settings12_hvac__attach.json.gz")))
    assert warned.headline is not None and warned.headline.severity.name == "WARNING" and warned.headline.because
    assert not wants_native_look(warned)
    looked = analyse(load_observation(str(recorded / "settings9_calculus__outside.json.gz")))
    assert looked.observation.native is not None and not wants_native_look(looked)


def _observation(name: str):  # type: ignore[no-untyped-def]
    from dflash_diag.observe.codec import read_observation
    path = Path(__file__).resolve().parents[1] / "casebook" / "observations" / f"{name}.json.gz"
    return read_observation(gzip.open(path).read())


def test_a_gil_holder_at_one_lines_c_call_gets_the_native_look_even_with_its_cause_named() -> None:
    """A telemetry thread holds the GIL at one line (gil_hog_side_thread, under probes): the headline's cause is
    named at warning, yet only native stacks say what that line's call runs, so the look is taken. With them, batch
    14's sampler (its `np.random.choice(...)` line) is said to run NumPy's choice, mostly in shuffle. A holder whose
    time spreads over a function's lines (batch 12's Jinja2 notes, in the library's Python) asks for none."""
    from dataclasses import replace

    from dflash_diag.analysis import analyse
    from dflash_diag.analysis.native import looks_below, wants_native_look
    from dflash_diag.model import Severity
    hog = analyse(replace(_observation("gil_hog_side_thread__probes"), native=None))
    assert hog.headline is not None and "gil-contention" in (hog.headline.rule_id, *hog.headline.because)
    assert hog.headline.severity >= Severity.WARNING
    assert looks_below(hog) and wants_native_look(hog)
    after = analyse(_observation("settings14_recipes__probes"))
    assert after.headline is not None
    assert re.search(r"its native samples: choice \[mtrand[^\]]*\] \d+%, mostly in shuffle", after.headline.text)
    assert not wants_native_look(after)  # one look per window
    spread = analyse(replace(_observation("settings12_vetnotes__outside"), native=None))
    gil = next(f for f in spread.findings if f.rule_id == "gil-contention")
    assert gil.looks_below == () and not looks_below(spread) and not wants_native_look(spread)
