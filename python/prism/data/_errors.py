"""The Python errors of prism.data's engine failures (prism._data calls raise_engine_error
with the engine's message): a UDF's exception comes back with its type and the worker's
traceback (a TaskError that is also an instance of the UDF's exception type, as prism.get
gives a task's); a timeout is a GetTimeoutError (a TimeoutError); a rank without prism.data
says to import it before prism.init(); other Data failures (a missing column, a bad file,
bad arguments) are ValueErrors."""

import re

from .._worker import MARKER, decode_attached
from ..exceptions import GetTimeoutError, PrismRuntimeError, _task_error

_UDF_ERROR = "prism::python::data_binding::PythonUdfError: "


def raise_engine_error(kind, message):
    if kind == "timeout":
        raise GetTimeoutError(message) from None
    if ("no function registered as" in message and "PrismDataPythonUdf" in message) or \
            ("PythonBatchClass" in message and "regist" in message):
        raise PrismRuntimeError(
            "prism.data: a rank ran a Python UDF without prism.data: `import prism.data` at the top of "
            "the script, before prism.init(), so that every rank (each runs the script and serves "
            f"inside prism.init()) can run your functions. The engine said: {message}") from None
    at = message.find(MARKER)
    if at < 0:
        raise ValueError(message) from None
    end = message.find("]", at)
    tail = message[end + 1:] if end >= 0 else ""
    rank_match = re.search(r"on rank (\d+)", tail)
    rank = int(rank_match.group(1)) if rank_match else -1
    head = message[:at]
    cut = head.find(_UDF_ERROR)
    where = head[:cut].rstrip(": ") if cut >= 0 else head.split("\n", 1)[0]
    cause, cause_type, text = decode_attached(message[at + len(MARKER):end], "Exception",
                                              head[cut + len(_UDF_ERROR):] if cut >= 0 else head)
    task = where[len("prism::data: "):] if where.startswith("prism::data: ") else where
    header = f"{where}{tail}: {cause_type}; the worker's traceback:\n"
    raise _task_error(header + text.rstrip("\n"), cause, cause_type, text, task, rank) from None
