"""One thread per process that acts on words the C++ core hands to Python: an object a
future waits for is ready (ObjectRef.future, `await ref`), or prism.cancel reached a Python
task running here (KeyboardInterrupt in its thread, as Ray raises). The core's threads never
take the GIL for these; they queue the word and this thread, which holds no core lock, does
the Python part. It waits in C++ without the GIL (next_event), so it costs nothing idle."""

import concurrent.futures
import itertools
import threading

from . import _prism

_READY, _CANCEL = 1, 2
_lock = threading.Lock()
_pending = {}  # token -> (ObjectRef, concurrent.futures.Future)
_tokens = itertools.count(1)
_thread = None


def start():
    """Starts the thread once per process (prism.init, on every rank: tasks run there)."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_run, name="prism-events", daemon=True)
            _thread.start()


def future(ref):
    """A concurrent.futures.Future of ref's value (Ray's ObjectRef.future()): its result is
    get(ref), or the exception get raises."""
    start()
    fut = concurrent.futures.Future()
    token = next(_tokens)
    with _lock:
        _pending[token] = (ref, fut)
    try:
        _prism.on_ready(ref, token)
    except BaseException:
        with _lock:
            _pending.pop(token, None)
        raise
    return fut


def fail_pending(why):
    """At shutdown: the futures whose objects went with the session fail, naming why."""
    from .exceptions import PrismRuntimeError
    with _lock:
        pending = list(_pending.values())
        _pending.clear()
    for _, fut in pending:
        if not fut.done():
            fut.set_exception(PrismRuntimeError(why))


def _resolve(token):
    with _lock:
        entry = _pending.pop(token, None)
    if entry is None:  # failed at a shutdown before its object came
        return
    ref, fut = entry
    if fut.done():  # cancelled by its user
        return
    import prism
    try:
        value = prism.get(ref, timeout=60)  # ready: no wait (60 s bounds a fetch from a rank)
    except BaseException as e:
        fut.set_exception(e)
    else:
        fut.set_result(value)


def _run():
    while True:
        event = _prism.next_event(3600.0)  # without the GIL; a long timeout, only to loop
        if event is None:
            continue
        kind, value = event
        try:
            if kind == _READY:
                _resolve(value)
            elif kind == _CANCEL:
                running = _prism.interrupt(value)  # a task's KeyboardInterrupt, raised
                if running is not None:
                    from . import _worker
                    _worker.on_cancel(*running)
        except BaseException as e:  # this thread must live on: say what went wrong
            import sys
            print(f"prism: the events thread dropped a word ({type(e).__name__}: {e})", file=sys.stderr)
