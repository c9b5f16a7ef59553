"""What a process's stderr says: thread deaths with the program's frame, torch's warnings. Texts are verbatim
forms Python 3.11 and torch 2.13 print (the casebook programs produce them for real)."""

from __future__ import annotations

from dflash_diag.analysis.stderr import parse_stderr

DEATH = """pipeline started
Exception in thread student-1:
Traceback (most recent call last):
  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner
    self.run()
  File "/tmp/x/hsworks/pipeline.py", line 44, in learn
    loss = (student(feats) - feats).pow(2).mean()
            ^^^^^^^^^^^^^^
  File "/tmp/x/hsworks/nets.py", line 22, in forward
    return self.head(torch.relu(self.proj(feats)))
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x80 and 96x128)
Exception in thread worker-2 (run):
Traceback (most recent call last):
  File "/tmp/x/w.py", line 3, in run
    raise KeyError("batch")
KeyError: 'batch'
"""


def test_thread_deaths_name_the_thread_the_exception_and_the_programs_frame() -> None:
    facts = parse_stderr(DEATH)
    assert [d.thread for d in facts.deaths] == ["student-1", "worker-2"]
    first = facts.deaths[0]
    assert first.exception == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x80 and 96x128)"
    assert first.where == "nets.py:22 in forward (raised in linear.py:134 in forward)"
    assert facts.deaths[1].where == "w.py:3 in run" and facts.deaths[1].exception == "KeyError: 'batch'"


def test_torch_warnings() -> None:
    text = "\n".join([
        "/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:238: UserWarning: None of the inputs have "
        "requires_grad=True. Gradients will be None",
        "  check_backward_validity(args)",
        "W1201 05:20:01.123000 4242 torch/_dynamo/convert_frame.py:1016] torch._dynamo hit config.recompile_limit (8)",
        "W1201 05:20:01.123000 4242 torch/_dynamo/convert_frame.py:1016]    function: 'forward' (/tmp/f.py:19)",
        "W1201 05:20:01.123000 4242 torch/_dynamo/convert_frame.py:1016]    last reason: 0/7: tensor 'x' size "
        "mismatch at index 1. expected 90, actual 31",
        "`causal_conv1d_fn` is falling back to its reference PyTorch implementation because `causal_conv1d` is not "
        "installed. This is correct but much slower",
        "skipping cudagraphs due to mutated inputs (1 instances). Found from :",
    ])
    facts = parse_stderr(text)
    assert facts.checkpoint_no_grad == 1 and facts.checkpoint_no_grad_site.endswith("checkpoint.py:238")
    (limit,) = facts.recompile_limits
    assert (limit.limit, limit.function) == (8, "forward (f.py:19)")
    assert limit.reason.startswith("0/7: tensor 'x' size mismatch")
    assert facts.fallbacks == (("causal_conv1d_fn", "`causal_conv1d` is not installed"),)
    assert facts.cudagraph_skips == ("mutated inputs (1 instances). Found from :",)


def test_nothing_in_ordinary_output() -> None:
    facts = parse_stderr("step 10 loss 0.3\nException ignored in: <function X.__del__>\nwarning: low disk\n")
    assert facts.deaths == () and facts.recompile_limits == () and not facts.checkpoint_no_grad
    assert parse_stderr(None).deaths == ()


def test_interleaved_tracebacks_of_two_dying_threads() -> None:
    text = ("Exception in thread a-1:\nTraceback (most recent call last):\n  File \"/app/w.py\", line 3, in run\n"
            "Exception in thread a-2:\nTraceback (most recent call last):\n    x = f()\n"
            "ValueError: one\n  File \"/app/w.py\", line 3, in run\nValueError: two\n")
    deaths = parse_stderr(text).deaths
    assert [d.thread for d in deaths] == ["a-1", "a-2"]
    # Which line belongs to which thread is ambiguous once interleaved; never the other thread's header.
    assert all(d.exception.startswith("ValueError: ") for d in deaths) and deaths[0].where == "w.py:3 in run"


def test_headers_interleaved_inside_a_line_are_all_found() -> None:
    """Two threads dying at once interleave their tracebacks character by character (seen on a 2-core CI box):
    a header after another traceback's carets, and the exception line behind a caret."""
    text = ("Exception in thread student-0:\nTraceback (most recent call last):\n"
            '  File "/app/pipeline.py", line 43, in learn\n'
            "    loss = student(feats)\n"
            "           ^^^^^Exception in thread student-1:\n"
            "Traceback (most recent call last):\n"
            "return self._call_impl(*args, **kwargs)\n"
            '^^^^  File "/app/nets.py", line 22, in forward\n'
            "Loss: 0.3\n"
            "^RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x80 and 96x128)\n"
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x80 and 96x128)\n")
    deaths = parse_stderr(text).deaths
    assert [d.thread for d in deaths] == ["student-0", "student-1"]
    assert all(d.exception.startswith("RuntimeError: mat1") for d in deaths), deaths
    assert deaths[0].where == "nets.py:22 in forward"


def test_a_program_line_after_a_garbled_traceback_is_not_the_exception() -> None:
    text = ("Exception in thread w:\nTraceback (most recent call last):\n  File \"/app/w.py\", line 3, in run\n"
            "step 10 done\nLoss: 0.3\n")
    (death,) = parse_stderr(text).deaths
    assert death.exception == "(exception text not found)" and death.where == "w.py:3 in run"


def test_a_header_split_by_another_traceback_still_names_its_thread() -> None:
    """CPython writes the header in three pieces ("Exception in thread ", the name, ":\\n"); on a loaded 2-core box
    another thread's traceback came between the first two (stderr of the casebook's dead-consumer program)."""
    text = ("Exception in thread student-1:\nTraceback (most recent call last):\n"
            '  File "/app/nets.py", line 22, in forward\n'
            "    return self._call_impl(*args, **kwargs)\n"
            "           ^^^^^^^^^^^^^^^^^^^^Exception in thread ^^^^^^^^^^^^\n"
            '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 134, in forward\n'
            "    return F.linear(input, self.weight, self.bias)\n"
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x80 and 96x128)\n"
            "student-0:\n"
            "Traceback (most recent call last):\n"
            '  File "/app/pipeline.py", line 43, in learn\n'
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x80 and 96x128)\n")
    deaths = parse_stderr(text).deaths
    assert [d.thread for d in deaths] == ["student-1", "student-0"]
    assert all(d.exception.startswith("RuntimeError: mat1") for d in deaths), deaths


def test_a_logged_traceback_after_a_colon_is_not_a_thread_death() -> None:
    text = "Saving failed:\nTraceback (most recent call last):\n  File \"/app/s.py\", line 3, in save\nOSError: disk full\n"
    assert parse_stderr(text).deaths == ()
