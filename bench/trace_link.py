"""Trace one resumed link: the module's functions in the order of their first call, and how
often that order jumps back up the file.

    python3 bench/trace_link.py            # the count and the jumps over 500 lines
    python3 bench/trace_link.py --list     # every function in the order of its first call

A resumed link (its predecessor timed out, the controller still knows it) runs its prologue
step through the rendered prologue, with bench/run.py's instant replay of the fake Slurm first on
PATH. The interpreter the prologue calls is this file again (``--as-python``): it installs a
profiler, then runs the loader exactly as the prologue hands it over. Only calls of functions
defined in resumable_chain.py count, from the step's start to the work's start (the background
step is a process of its own and is not traced). Exit status 0; the figures go to stdout, so
the next change can see what it did to the file's order.
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JUMP_LINES = 500  # a first call more than this many lines above the previous one is a jump up
TRACE_ENV = "RESUMABLE_CHAIN_TRACE_TO"


def as_python(argv):
    """Stand in for ``python -I -S -c CODE ARGS...``: profile CODE, write the first calls."""
    code = argv[argv.index("-c") + 1]
    arguments = argv[argv.index("-c") + 2:]
    module_path = os.path.realpath(arguments[0])
    first_calls, seen = [], set()

    def profile(frame, event, _):
        code_object = frame.f_code
        if event == "call" and not code_object.co_name.startswith("<") and \
                os.path.realpath(code_object.co_filename) == module_path:  # no comprehensions
            key = (code_object.co_name, code_object.co_firstlineno)
            if key not in seen:
                seen.add(key)
                first_calls.append(key)

    step = os.getpid()  # the background step the link forks keeps the profiler: not traced

    def write_trace():
        sys.setprofile(None)
        if os.environ.get(TRACE_ENV) and os.getpid() == step:  # nor is the harness's first job
            with open(os.environ[TRACE_ENV], "w") as handle:
                json.dump(first_calls, handle)

    real_exit = os._exit  # the loader ends with os._exit (no teardown): the trace first

    def exit_after_trace(status):
        write_trace()
        real_exit(status)

    os._exit = exit_after_trace
    sys.argv = ["-c"] + arguments
    sys.setprofile(profile)
    try:
        exec(compile(code, "<prologue>", "exec"), {"__name__": "__main__"})
    finally:
        write_trace()


def jumps_up(first_calls):
    """The first calls that lie more than JUMP_LINES above the one before them."""
    return [(before, after) for before, after in zip(first_calls, first_calls[1:])
            if before[1] - after[1] > JUMP_LINES]


def trace_resumed_link(root):
    sys.path[:0] = [HERE]
    import run as bench  # bench/run.py: its harness and instant fakes

    wrapper = os.path.join(root, "tracing-python")
    with open(wrapper, "w") as handle:
        handle.write('#!/bin/sh\nexec "%s" "%s" --as-python "$@"\n'
                     % (sys.executable, os.path.abspath(__file__)))
    os.chmod(wrapper, 0o755)

    class Tracing(bench.Harness):
        def _script(self, kind):
            if kind != "ours":
                return bench.Harness._script(self, kind)
            path = os.path.join(self.root, "ours.sh")
            with open(path, "w") as script:
                script.write("#!/bin/bash\n" + bench.rc.render_prologue(
                    os.path.join(self.root, "run-ours"), python=wrapper) + bench.WORK)
            return path

    trace = os.path.join(root, "trace.json")
    harness = Tracing(os.path.join(root, "bench"))
    harness.link("ours", controller_knows=True, **{TRACE_ENV: trace})
    with open(trace) as handle:
        return [tuple(call) for call in json.load(handle)]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--as-python"]:
        return as_python(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every first call")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        first_calls = trace_resumed_link(root)
    if options.list:
        for name, line in first_calls:
            print("%5d %s" % (line, name))
    jumps = jumps_up(first_calls)
    print("a resumed link's prologue step: %d functions in the order of their first call, %d jumps "
          "back up by more than %d lines" % (len(first_calls), len(jumps), JUMP_LINES))
    for (name, line), (up_name, up_line) in jumps:
        print("  %s (line %d) -> %s (line %d)" % (name, line, up_name, up_line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
