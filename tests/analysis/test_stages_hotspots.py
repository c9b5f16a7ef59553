"""Stages of programs we did not write, from queue use; and where a stage spends its time (hot functions)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dflash_diag.analysis import analyse
from dflash_diag.analysis.hotspots import hot_functions, wait_spots
from dflash_diag.analysis.threads import StagePatterns, aggregate
from dflash_diag.model import NA, Frame, Observation, SourceLine, StackSample, ThreadSample, ThreadState

LIB = "/venv/lib/python3.11"
PUT_BLOCKED = (Frame("Condition.wait", f"{LIB}/threading.py", 327), Frame("Queue.put", f"{LIB}/queue.py", 140),
               Frame("Encoder.write", "/app/enc.py", 20), Frame("Thread.run", f"{LIB}/threading.py", 982))
CONSUMER_WORK = (Frame("Linear.forward", f"{LIB}/site-packages/torch/nn/modules/linear.py", 134),
                 Frame("Learner.step", "/app/learn.py", 40), Frame("Learner.loop", "/app/learn.py", 31),
                 Frame("Thread.run", f"{LIB}/threading.py", 982))
SIDE = (Frame("select", f"{LIB}/selectors.py", 415), Frame("serve", "/app/metrics.py", 9))


def _obs(rounds: list[list[tuple[str, int, tuple[Frame, ...], bool]]], code: tuple[SourceLine, ...] = (),
         lines: dict[str, str] | None = None) -> Observation:
    stacks = tuple(
        StackSample(pid=7, monotonic_s=float(i), wall_s=1000.0 + i, duration_s=0.01, native=False,
                    threads=tuple(ThreadSample(thread_id=tid * 10, os_thread_id=tid, name=name, active=active,
                                               owns_gil=False, frames=frames) for name, tid, frames, active in r))
        for i, r in enumerate(rounds))
    return Observation(pid=7, cmdline=("python",), started_wall_s=1000.0, window_s=float(len(rounds)), stacks=stacks,
                       proc=(), gpus=NA("none"), boards=NA("none"), process_alive=True, warnings=(),
                       source_lines=lines or {}, code=code)


ROUND = [("enc-a", 1, PUT_BLOCKED, False), ("enc-b", 2, PUT_BLOCKED, False), ("learner", 3, CONSUMER_WORK, True),
         ("metrics", 4, SIDE, False)]
LINES = {"/app/enc.py:20": "self.hidden_out.put(h)"}
CODE = (SourceLine("/app/learn.py", 31, "Learner.loop", "loss = self.step(batch)", queue_calls=("self.inbox.get",)),)


def test_producers_and_consumers_from_queue_use() -> None:
    threads, assignment = aggregate(_obs([ROUND] * 6, CODE, LINES), StagePatterns())
    stages = {t.name: t.stage for t in threads}
    assert stages == {"enc-a": "target", "enc-b": "target", "learner": "drafter", "metrics": "other"}
    assert assignment.how == "queues" and assignment.queue == "hidden_out"
    assert threads[0].entry is not None and threads[0].entry.name == "Encoder.write"


def test_a_consumer_never_seen_calling_get_is_the_busy_thread() -> None:
    threads, assignment = aggregate(_obs([ROUND] * 6, (), LINES), StagePatterns())
    assert {t.name: t.stage for t in threads}["learner"] == "drafter"
    assert {t.name: t.stage for t in threads}["metrics"] == "other"  # idle in select: not a worker


def test_names_win_over_inference() -> None:
    threads, assignment = aggregate(_obs([ROUND] * 3, CODE, LINES), StagePatterns.parse(target="learner"))
    assert assignment.how == "names" and {t.name: t.stage for t in threads}["learner"] == "target"


def test_hot_functions_charge_the_programs_own_frame() -> None:
    work = (Frame("Linear.forward", f"{LIB}/site-packages/torch/nn/modules/linear.py", 134),
            Frame("scan", "/app/scan.py", 18), Frame("write", "/app/enc.py", 20))
    other = (Frame("scan", "/app/scan.py", 19), Frame("write", "/app/enc.py", 20))
    thread = ThreadSample(thread_id=1, os_thread_id=1, name="w", active=True, owns_gil=True, frames=work)
    rows = ([(thread, ThreadState.NATIVE)] * 6 + [(replace(thread, frames=other), ThreadState.PYTHON)] * 2
            + [(replace(thread, frames=PUT_BLOCKED), ThreadState.QUEUE_PUT)] * 2)
    (spot,) = hot_functions(rows)
    assert (spot.function, spot.site, round(spot.share, 2), round(spot.line_share, 2)) == ("scan", "scan.py:18", 0.8, 0.6)
    assert str(spot) == "scan (scan.py:18) 80%"


def test_wait_spots_rank_where_the_samples_wait_not_where_they_work() -> None:
    waiting = (Frame("fetch_shard", "/app/fetch.py", 19), Frame("Thread.run", f"{LIB}/threading.py", 982))
    thread = ThreadSample(thread_id=1, os_thread_id=1, name="w", active=False, owns_gil=False, frames=waiting)
    rows = ([(thread, ThreadState.IDLE)] * 7 + [(replace(thread, frames=PUT_BLOCKED), ThreadState.QUEUE_PUT)] * 1
            + [(replace(thread, frames=CONSUMER_WORK), ThreadState.NATIVE)] * 2)
    (spot,) = wait_spots(rows)
    assert str(spot) == "fetch_shard (fetch.py:19) 70%"
    assert [s.function for s in hot_functions(rows)] == ["Learner.step"]  # the work ranking leaves waits out


# A producer that does not compute: it waits on a socket for its input (the consumer starves on the queue).
RECV_WAIT = (Frame("fetch_shard", "/app/fetch.py", 19), Frame("Thread.run", f"{LIB}/threading.py", 982))
GET_BLOCKED = (Frame("Condition.wait", f"{LIB}/threading.py", 327), Frame("Queue.get", f"{LIB}/queue.py", 171),
               Frame("Learner.loop", "/app/learn.py", 31), Frame("Thread.run", f"{LIB}/threading.py", 982))
FETCH_LINES = {"/app/fetch.py:19": "buf += conn.recv(need - len(buf))"}
# What the collector reads on disk for each sampled frame: the line, and the queue calls its function makes.
FETCH_CODE = (SourceLine("/app/fetch.py", 19, "fetch_shard", "buf += conn.recv(need - len(buf))",
                         queue_calls=("self.inbox.put",)),
              SourceLine("/app/learn.py", 31, "Learner.loop", "batch = self.inbox.get()", queue_calls=("self.inbox.get",)))


@pytest.mark.parametrize("consumer_seen_working", [2, 0], ids=["consumer-works-sometimes", "consumer-always-in-get"])
def test_a_producer_waiting_on_its_input_is_named_where_it_waits(consumer_seen_working: int) -> None:
    """A reader thread parked in a socket read feeds a consumer that waits in get: slow, not hung, even when the
    consumer's work is too short to land in any sample (4 items/s, 2 ms each, sampled at 20 Hz)."""
    rounds = [[("fetch", 1, RECV_WAIT, False), ("learner", 3, GET_BLOCKED, False)]] * (20 - consumer_seen_working) + \
             [[("fetch", 1, RECV_WAIT, False), ("learner", 3, CONSUMER_WORK, True)]] * consumer_seen_working
    findings = {f.rule_id: f for f in analyse(replace(_obs(rounds, FETCH_CODE, FETCH_LINES), now_wall_s=1020.0)).findings}
    assert "pipeline-hang" not in findings
    verdict = findings["pipeline-bottleneck-target"]
    assert "not computing" in verdict.claim and "fetch_shard (fetch.py:19)" in verdict.claim
    assert dict(verdict.evidence)["producer waits in"] == "fetch_shard (fetch.py:19) 100%"
    # stages inferred from a queue carry their roles, not our trainer's stage names: the program has no "target"
    assert verdict.claim.startswith("the producer stage of `") and "target" not in verdict.claim
    assert "drafter" not in verdict.claim and "target" not in verdict.remedy and "drafter" not in verdict.remedy
    assert "what they wait for" in verdict.remedy


# A relay: it gets from its own input (another process's queue, by a name no thread here puts into) and puts into
# `out`, which the learner gets from as `batches` (a function's parameter): the names never meet.
RELAY_WAIT = (Frame("Connection._recv", f"{LIB}/multiprocessing/connection.py", 395),
              Frame("Collator.run", "/app/collate.py", 56), Frame("Thread.run", f"{LIB}/threading.py", 982))
RELAY_CODE = (SourceLine("/app/collate.py", 56, "Collator.run", "pending.append(self.channel.get(timeout=0.25))",
                         queue_calls=("self.channel.get", "self.out.put")),
              SourceLine("/app/learn.py", 31, "Learner.loop", "batch = batches.get()", queue_calls=("batches.get",)))
RELAY_GET_BLOCKED = (GET_BLOCKED[0], GET_BLOCKED[1], Frame("Learner.loop", "/app/learn.py", 31), GET_BLOCKED[3])


@pytest.mark.parametrize("known", ["consumer", "producer"])
def test_a_relay_that_names_the_queue_differently_is_the_other_stage(known: str) -> None:
    """The collator gets from `channel` (fed by child processes) and puts into `out`; the learner gets from
    `batches`. With the learner known as the consumer, the collator is its producer (its `out` has no getter
    here); a thread that puts and gets is never taken for a consumer of a known producer."""
    if known == "consumer":
        rounds = [[("collator", 1, RELAY_WAIT, False), ("learner", 3, RELAY_GET_BLOCKED, False),
                   ("metrics", 4, SIDE, False)]] * 8
        threads, assignment = aggregate(_obs(rounds, RELAY_CODE), StagePatterns())
        assert {t.name: t.stage for t in threads} == {"collator": "target", "learner": "drafter", "metrics": "other"}
        assert assignment.how == "queues" and assignment.queue == "batches"
        return
    # The producer known (it blocks putting into `hidden_out`), the consumer gets from `inbox`: the relay rule
    # takes the getter of a queue no thread here puts into, and leaves a thread that also puts alone.
    code = (SourceLine("/app/learn.py", 31, "Learner.loop", "batch = self.inbox.get()", queue_calls=("self.inbox.get",)),
            SourceLine("/app/collate.py", 56, "Collator.run", "pending.append(self.channel.get(timeout=0.25))",
                       queue_calls=("self.channel.get", "self.out.put")))
    rounds = [[("enc-a", 1, PUT_BLOCKED, False), ("learner", 3, GET_BLOCKED, False),
               ("collator", 5, RELAY_WAIT, False)]] * 8
    threads, assignment = aggregate(_obs(rounds, code, LINES), StagePatterns())
    stages = {t.name: t.stage for t in threads}
    assert stages["enc-a"] == "target" and stages["learner"] == "drafter" and stages["collator"] == "other"


def test_the_probes_own_frames_are_never_the_programs_hot_code() -> None:
    """The health probe wraps Tensor.backward: in a source checkout its frame sits in every backward's stack, and
    must not be named as where the program spends its time."""
    import probes.health
    from dflash_diag.model.evidence import is_library_file

    assert is_library_file(probes.health.__file__)
    wrapped = (Frame("HealthProbe._arm.<locals>.backward", probes.health.__file__, 99),
               Frame("Tensor.backward", f"{LIB}/site-packages/torch/_tensor.py", 625),
               Frame("train_step", "/app/train.py", 40))
    thread = ThreadSample(thread_id=1, os_thread_id=1, name="w", active=True, owns_gil=False, frames=wrapped)
    (spot,) = hot_functions([(thread, ThreadState.NATIVE)] * 4)
    assert spot.function == "train_step"


def test_the_probes_frames_are_the_tools_own_wherever_they_were_recorded() -> None:
    """An observation replayed elsewhere (a user's bundle, a fixture recorded in another checkout) holds the probes'
    frames under the path they had there: the collectives probe's wrapper was read as a job's own code (the
    replayed job casebook, in a fresh clone). A program's own file of another name under ``probes/`` is its own."""
    from dflash_diag.model.evidence import is_library_file

    assert is_library_file("/home/someone/venvs/x/src/dflash-diag/probes/collectives.py")
    assert is_library_file("/work/elsewhere/probes/health.py")
    assert not is_library_file("/app/probes/my_sensor_reader.py")
    assert not is_library_file("/app/train.py")


# --- the library function a hot line spends in (hotspots.library_call) ---------------------------------------------

STDLIB = "/usr/lib/python3.11"
OWN_LINE = Frame("featurize.<locals>.<listcomp>", "/app/tickets.py", 78)
RANDOM_CALL = (Frame("SystemRandom.random", f"{STDLIB}/random.py", 798), OWN_LINE,
               Frame("featurizer", "/app/train.py", 50), Frame("Thread.run", f"{STDLIB}/threading.py", 982))
OWN_ONLY = (OWN_LINE, Frame("featurizer", "/app/train.py", 50), Frame("Thread.run", f"{STDLIB}/threading.py", 982))


def _rows(frames: tuple[Frame, ...], n: int, state: ThreadState = ThreadState.PYTHON) -> list[tuple[ThreadSample, ThreadState]]:
    sample = ThreadSample(thread_id=1, os_thread_id=1, name="featurizer", active=True, owns_gil=True, frames=frames)
    return [(sample, state)] * n


def test_the_library_function_a_hot_line_spends_in_is_said_with_its_module() -> None:
    from dflash_diag.analysis.hotspots import library_call, library_text
    rows = _rows(RANDOM_CALL, 11) + _rows(OWN_ONLY, 9)
    assert library_call(rows) == ("SystemRandom.random", "random.py", 0.55)
    assert library_text(rows) == ", most of it inside SystemRandom.random (random.py, 55% of its samples)"
    # the same line calling a C function (random.Random's own) shows no library frame: nothing to say
    assert library_text(_rows(OWN_ONLY, 20)) == ""
    # below the share, not said: the line's own work is most of it
    assert library_call(_rows(RANDOM_CALL, 7) + _rows(OWN_ONLY, 13)) is None


def test_the_library_of_a_threads_work_is_said_out_of_its_working_samples() -> None:
    """A worker idle half the window: its library is 11 of 20 samples but 11 of 12 it works in."""
    from dflash_diag.analysis.hotspots import library_text, work_library_text
    idle = _rows(OWN_ONLY, 8, ThreadState.IDLE)
    rows = _rows(RANDOM_CALL, 11) + _rows(OWN_ONLY, 1) + idle
    assert library_text(rows) == ", most of it inside SystemRandom.random (random.py, 55% of its samples)"
    assert work_library_text(rows) == (", most of it inside SystemRandom.random (random.py, 92% of its working "
                                       "samples)")
    assert work_library_text(_rows(RANDOM_CALL, 5) + _rows(OWN_ONLY, 15, ThreadState.IDLE)) == \
        ", most of it inside SystemRandom.random (random.py, 100% of its working samples)"
    assert work_library_text(idle) == ""


def test_waits_torch_and_library_only_threads_are_not_a_library_call() -> None:
    from dflash_diag.analysis.hotspots import library_call
    waiting = (Frame("Condition.wait", f"{STDLIB}/threading.py", 327), Frame("Queue.get", f"{STDLIB}/queue.py", 171),
               Frame("main", "/app/train.py", 83))
    assert library_call(_rows(waiting, 20, ThreadState.QUEUE_GET)) is None  # a queue wait is not the line's cost
    assert library_call(_rows(CONSUMER_WORK, 20)) is None  # torch is the framework: the rules judge what it does
    pool = (Frame("_worker", f"{STDLIB}/concurrent/futures/thread.py", 83),
            Frame("Thread.run", f"{STDLIB}/threading.py", 982))
    assert library_call(_rows(pool, 20)) is None  # no program frame above: not a call the program makes
    installed = (Frame("SortedList._reset", f"{LIB}/site-packages/sortedcontainers/sortedlist.py", 300), OWN_LINE)
    assert library_call(_rows(installed, 20)) == ("SortedList._reset", "sortedcontainers/sortedlist.py", 1.0)


def test_where_time_goes_says_the_library_function_without_a_native_look() -> None:
    own_loop = (Frame("SystemRandom.random", f"{STDLIB}/random.py", 798), Frame("main", "/app/train.py", 40))
    findings = analyse(_obs([[("MainThread", 1, own_loop, True)]] * 12)).findings
    where = next(f for f in findings if f.rule_id == "where-time-goes")
    assert "most of its time inside SystemRandom.random (random.py, 100% of its samples)" in where.claim


def test_the_call_that_enters_a_busy_package_is_said_with_it() -> None:
    """A template package whose time is spread over its compiler's internals: the API the program called into it
    (get_template, three samples in four) names the cost; no entry is said when none holds half of them."""
    from dflash_diag.analysis.hotspots import library_entry, library_text
    site = "/venv/lib/python3.11/site-packages/jinja2"
    job = Frame("job", "/app/train.py", 61)
    compiling = (Frame("CodeGenerator.visit", f"{site}/compiler.py", 10), Frame("Environment._compile",
                 f"{site}/environment.py", 709), Frame("Environment.get_template", f"{site}/environment.py", 1010), job)
    rendering = (Frame("Template.render", f"{site}/environment.py", 1293), job)
    rows = _rows(compiling, 9) + _rows(rendering, 3) + _rows(OWN_ONLY, 4)
    assert library_entry(rows, "jinja2") == ("Environment.get_template", 0.75)
    assert library_text(rows) == (", most of it inside jinja2 (75% of its samples), entered through "
                                  "Environment.get_template (75% of them)")
    even = _rows(compiling, 5) + _rows(rendering, 6)
    assert library_entry(even, "jinja2") == ("Template.render", 6 / 11)
    assert library_entry(_rows(compiling, 4) + _rows(rendering, 4) + _rows((Frame("Environment.from_string",
                         f"{site}/environment.py", 1090), job), 4), "jinja2") is None


def _chain(*frames: tuple[str, str]) -> tuple[Frame, ...]:
    """Frames innermost first, from (function, file under the standard library or site-packages) pairs, under the
    program's own ``Fetcher.run`` line."""
    return (*(Frame(name, f"{STDLIB}/{where}", 10 + i) for i, (name, where) in enumerate(frames)),
            Frame("Fetcher.run", "/app/train.py", 69), Frame("Thread.run", f"{STDLIB}/threading.py", 982))


_REBUILD = ("rebuild_storage_fd", "site-packages/torch/multiprocessing/reductions.py")
_DETACH = ("DupFd.detach", "multiprocessing/resource_sharer.py")
_GET = ("Queue.get", "multiprocessing/queues.py")


def test_a_chain_of_library_calls_is_said_where_no_one_function_or_file_holds_the_time() -> None:
    """A queue's get that unpickles each item through torch's reductions and a resource-sharer connection: no
    package, function or file holds the share, the chain does, and is said as far down as it holds (each file's
    entry call, the deepest call); the handshake's socket reads count (the line's cost), the pipeline's queue
    waits do not."""
    from dflash_diag.analysis.hotspots import library_path, library_text
    handshake = _chain(("Connection._recv", "multiprocessing/connection.py"),
                       ("answer_challenge", "multiprocessing/connection.py"),
                       ("Client", "multiprocessing/connection.py"), _DETACH, _REBUILD, _GET)
    connecting = _chain(("socket.connect", "socket.py"), ("SocketClient", "multiprocessing/connection.py"),
                        ("Client", "multiprocessing/connection.py"), _DETACH, _REBUILD, _GET)
    receiving = _chain(("recvfds", "multiprocessing/reduction.py"), _DETACH, _REBUILD, _GET)
    rows = (_rows(handshake, 5, ThreadState.IDLE) + _rows(connecting, 3) + _rows(receiving, 3)
            + _rows(OWN_ONLY, 4) + _rows(PUT_BLOCKED, 5, ThreadState.QUEUE_PUT))
    found = library_path(rows)
    assert found is not None and [f.name for f in found[0]] == ["Queue.get", "rebuild_storage_fd", "DupFd.detach",
                                                                "Client"]
    assert found[1] == 8 / 20
    assert library_text(rows) == (
        ", most of it through Queue.get (multiprocessing/queues.py) > rebuild_storage_fd "
        "(torch/multiprocessing/reductions.py) > DupFd.detach (multiprocessing/resource_sharer.py) > Client "
        "(multiprocessing/connection.py) (40% of its samples)")
    # two calls deep in the last file: its entry call and its deepest call (where the chain splits: a digest, a read)
    digest = _chain(("new", "hmac.py"), ("answer_challenge", "multiprocessing/connection.py"),
                    ("Client", "multiprocessing/connection.py"), _DETACH, _REBUILD, _GET)
    assert library_text(_rows(handshake, 3) + _rows(digest, 3) + _rows(OWN_ONLY, 4)).endswith(
        "> Client > answer_challenge (multiprocessing/connection.py) (60% of its samples)")
    # below the share, not said
    assert library_path(_rows(handshake, 3) + _rows(OWN_ONLY, 7)) is None


def test_a_chain_into_torch_a_threading_wait_or_one_call_is_not_said() -> None:
    """A forward pass ends in torch's modules (the framework: the rules judge its ops); a thread parked in an
    Event's wait ends in threading (the wait itself); a single call is the program's own line already."""
    from dflash_diag.analysis.hotspots import library_path
    forward = _chain(("Linear.forward", "site-packages/torch/nn/modules/linear.py"),
                     ("Module._call_impl", "site-packages/torch/nn/modules/module.py"))
    parked = _chain(("Condition.wait", "threading.py"), ("Event.wait", "threading.py"))
    single = _chain(("dumps", "json/__init__.py"))
    for frames in (forward, parked, single):
        assert library_path(_rows(frames, 10)) is None
    # a wait in threading under a library chain: the chain up to the wait is said
    joined = _chain(("Condition.wait", "threading.py"), ("Future.result", "concurrent/futures/_base.py"),
                    ("Executor.map.<locals>.result_iterator", "concurrent/futures/_base.py"))
    found = library_path(_rows(joined, 10))
    assert found is not None and [f.name for f in found[0]] == ["Executor.map.<locals>.result_iterator",
                                                                "Future.result"]


def test_the_chain_a_real_fetch_thread_spends_in_is_said() -> None:
    """A recorded fetch thread (py-spy, outside, settings batch 13) whose queue's get unpickles 89 tensors a batch
    through torch's file-descriptor sharing: its time goes to the chain through ``rebuild_storage_fd``."""
    from pathlib import Path

    from dflash_diag.analysis.classify import classify_sample
    from dflash_diag.analysis.hotspots import library_place
    from dflash_diag.snapshot.bundle import load_observation
    path = Path(__file__).parents[1] / "casebook/observations/settings13_playlists__outside.json.gz"
    obs = load_observation(str(path))
    rows = [(t, c.state) for s in obs.stacks for t, c in classify_sample(s) if t.name == "fetch"]
    place = library_place(rows)
    assert place.startswith("through Queue.get (multiprocessing/queues.py) > rebuild_storage_fd "
                            "(torch/multiprocessing/reductions.py) > DupFd.detach"), place


def test_arguments_passed_from_the_configuration_are_said_where_their_library_runs() -> None:
    from dflash_diag.analysis.hotspots import passed_text
    from dflash_diag.model.evidence import KnobUse, SourceFile
    from dflash_diag.sources.native_profile import parse_raw

    bpe = KnobUse(line=21, call="models.BPE", name="dropout", value="0.3", key="bpe_dropout",
                  configured_in="run.toml", library="tokenizers")
    http = KnobUse(line=8, call="httpx.Limits", name="max_keepalive_connections", value="0", key="keepalive",
                   configured_in="run.toml", library="httpx")
    files = (SourceFile(path="/app/subwords.py", exists=True, mtime_wall_s=1.0, passed=(bpe, http)),)
    encode = Frame("Feed.encode", "/app/feed.py", 30)
    rows = [(ThreadSample(thread_id=1, os_thread_id=501, name="feed", active=True, owns_gil=False,
                          frames=(encode,)), ThreadState.NATIVE)] * 10
    # The feed thread's native time is in tokenizers' library: its argument is said, httpx's is not.
    rust = parse_raw("thread (501): feed;thread_run (libpython3.11.so.1.0);encode (feed.py:30);"
                     "merge_word (tokenizers.abi3.so) 40\n"
                     "thread (501): feed;thread_run (libpython3.11.so.1.0);encode (feed.py:30);"
                     "mkl_gemm (libtorch_cpu.so) 60\n")
    assert passed_text(files, rows, rust) == ("; the program passes to tokenizers from its configuration: "
                                              "models.BPE(dropout=0.3 (`bpe_dropout` in run.toml)) at subwords.py:21")
    # An installed package's Python frames count the same way; time elsewhere says nothing.
    pooled = Frame("HTTPConnectionPool._get_conn", f"{LIB}/site-packages/httpx/_pool.py", 80)
    in_httpx = [(replace(rows[0][0], frames=(pooled, encode)), ThreadState.PYTHON)] * 10
    assert "httpx.Limits(max_keepalive_connections=0" in passed_text(files, in_httpx, ())
    assert passed_text(files, rows, ()) == ""
    # An option turned off is said first, whatever its line: the usual way a configuration slows a library.
    strict = replace(bpe, line=5, name="strict", value="True", key="strict")
    off = replace(bpe, line=30, name="cache_capacity_words", value="0", key="words")
    ordered = passed_text((replace(files[0], passed=(strict, off)),), rows, rust)
    assert ordered.index("cache_capacity_words=0") < ordered.index("strict=True"), ordered
    # ... after the argument passed on the line the samples stand on (the call their time is in).
    hot = replace(strict, line=30)
    hot_file = replace(files[0], path="/app/feed.py", passed=(replace(off, line=31), hot))
    ordered = passed_text((hot_file,), rows, rust)
    assert ordered.index("strict=True") < ordered.index("cache_capacity_words=0"), ordered
    # A positional argument, and the standard library's own files: `zlib.compressobj(9 ...)` where zlib runs.
    level = KnobUse(line=5, call="zlib.compressobj", name="", value="9", key="level", configured_in="run.toml",
                    library="zlib")
    packed = (SourceFile(path="/app/pack.py", exists=True, mtime_wall_s=1.0, passed=(level,)),)
    deflate = parse_raw("thread (501): feed;thread_run (libpython3.11.so.1.0);pack (pack.py:9);"
                        "zlib_Compress_compress (zlib.cpython-311-x86_64-linux-gnu.so);deflate_slow (libz.so.1) 30\n")
    assert passed_text(packed, rows, deflate).endswith("zlib.compressobj(9 (`level` in run.toml)) at pack.py:5")
    # A name the code computed from a key: the name as passed, then the key and its value.
    traced = replace(level, name="level", value="'fast'", key="mode", via="lvl")
    assert passed_text((replace(packed[0], passed=(traced,)),), rows, deflate).endswith(
        "zlib.compressobj(level=lvl (`mode` = 'fast' in run.toml)) at pack.py:5")
    # The code's own default for the key, where the run's configuration departs from it.
    from dflash_diag.model.evidence import DeclaredDefault

    declared = DeclaredDefault(name="level", default="6", line=3, configured="9", configured_in="run.toml")
    with_default = (replace(packed[0], overridden=(declared,)),)
    assert passed_text(with_default, rows, deflate).endswith(
        "zlib.compressobj(9 (`level` in run.toml; the code's default 6 at pack.py:3)) at pack.py:5")


def test_a_variable_the_program_set_is_said_where_the_library_it_is_named_after_runs() -> None:
    from dflash_diag.analysis.hotspots import program_env_text
    from dflash_diag.model.evidence import ENV_LIBRARY, KnobUse, SourceFile

    exported = KnobUse(line=7, call="os.environ", name="POLARS_MAX_THREADS", value="1", key="polars_threads",
                       configured_in="run.toml", library=ENV_LIBRARY)
    files = (SourceFile(path="/app/boot.py", exists=True, mtime_wall_s=1.0, passed=(exported,)),)
    join = Frame("DataFrame.join", f"{LIB}/site-packages/polars/dataframe/frame.py", 80)
    feed = Frame("Feed.run", "/app/feed.py", 30)
    rows = [(ThreadSample(thread_id=1, os_thread_id=501, name="feed", active=True, owns_gil=False,
                          frames=(join, feed)), ThreadState.PYTHON)] * 10
    assert program_env_text(("POLARS_MAX_THREADS", "ZQ_OTHER"), files, rows, ()) == (
        "; the program set in its own environment at run time POLARS_MAX_THREADS (from `polars_threads` = 1 in "
        "run.toml), a variable named after polars, which holds this time")
    # Named after no library the time is in, or no time there: nothing said.
    assert program_env_text(("ZQ_OTHER",), files, rows, ()) == ""
    elsewhere = [(replace(rows[0][0], frames=(feed,)), ThreadState.PYTHON)] * 10
    assert program_env_text(("POLARS_MAX_THREADS",), files, elsewhere, ()) == ""


def test_a_value_the_configuration_changed_from_the_codes_default_is_said_where_the_code_reading_it_runs() -> None:
    from dflash_diag.analysis.hotspots import departures_text
    from dflash_diag.model.evidence import DeclaredDefault, SourceFile

    path = DeclaredDefault(name="contraction_path", default="'greedy'", line=28, configured="'none'",
                           configured_in="run.toml")
    width = DeclaredDefault(name="width", default="24", line=40, configured="16", configured_in="run.toml")
    settings = SourceFile(path="/app/settings.py", exists=True, mtime_wall_s=1.0, imported_by="train.py",
                          overridden=(width, path))
    label = DeclaredDefault(name="name", default="'default'", line=48, configured="'nocturnal'",
                            configured_in="run.toml")  # a profile's name: how the run is called, not how it runs
    settings = replace(settings, overridden=(*settings.overridden, label))
    featurize = SourceFile(path="/app/featurize.py", exists=True, mtime_wall_s=1.0,
                           reads_departures=(("width", 12), ("contraction_path", 29), ("name", 3)))
    call = Frame("Featurizer.__call__", "/app/featurize.py", 35)
    rows = [(ThreadSample(thread_id=1, os_thread_id=501, name="loader", active=True, owns_gil=False,
                          frames=(call,)), ThreadState.NATIVE)] * 10
    assert departures_text((settings, featurize), rows) == (
        "; this code reads values the run's configuration sets away from the code's defaults: `contraction_path` = "
        "'none' in run.toml (the code's default 'greedy' at settings.py:28), read at featurize.py:29; `width` = 16 in "
        "run.toml (the code's default 24 at settings.py:40), read at featurize.py:12")
    # Time elsewhere: only an option turned off is said (wherever it is read); said already as an argument passed
    # to a library: nothing.
    elsewhere = [(replace(rows[0][0], frames=(Frame("main", "/app/train.py", 5),)), ThreadState.NATIVE)] * 10
    assert departures_text((settings, featurize), elsewhere) == (
        "; the run's configuration turns off what the code has on: `contraction_path` = 'none' in run.toml (the "
        "code's default 'greedy' at settings.py:28)")
    from dflash_diag.model.evidence import KnobUse
    passed = replace(featurize, reads_departures=(("contraction_path", 29),),
                     passed=(KnobUse(line=35, call="np.einsum", name="optimize", key="contraction_path"),))
    assert departures_text((settings, passed), rows) == ""


def test_an_option_the_configuration_turns_off_is_said_beside_the_time_wherever_it_is_read() -> None:
    from dflash_diag.analysis.hotspots import departures_text
    from dflash_diag.model.evidence import DeclaredDefault, SourceFile

    tag = DeclaredDefault(name="discriminator", default="'kind'", line=8, note="field that tags each record",
                          configured="''", configured_in="run.toml")
    width = DeclaredDefault(name="width", default="24", line=40, configured="16", configured_in="run.toml")
    off_already = DeclaredDefault(name="cache", default="0", line=41, configured="False", configured_in="run.toml")
    config = SourceFile(path="/app/config.py", exists=True, mtime_wall_s=1.0, overridden=(width, tag, off_already))
    rows = [(ThreadSample(thread_id=1, os_thread_id=501, name="ingest", active=True, owns_gil=True,
                          frames=(Frame("Ingest.run", "/app/ingest.py", 30),)), ThreadState.PYTHON)] * 10
    assert departures_text((config,), rows) == (
        "; the run's configuration turns off what the code has on: `discriminator` = '' in run.toml (the code's "
        "default 'kind' at config.py:8: field that tags each record)")
    assert departures_text((replace(config, overridden=(width,)),), rows) == ""
