"""Prism's Python exceptions (Ray's names in parentheses).

A task that raised comes back from ``prism.get`` as a :class:`TaskError` (RayTaskError)
that is also an instance of the exception the task raised, when Python allows such a class
(``except ValueError`` catches a task's ValueError); its message carries the worker's
traceback, and ``cause`` is the original exception.
"""


class PrismError(Exception):
    """Base of every Prism exception (RayError)."""


class TaskError(PrismError):
    """A remote task or actor method raised (RayTaskError).

    Attributes: ``cause`` (the original exception, or None if it could not be pickled),
    ``cause_type`` (its qualified type name), ``traceback_str`` (the worker's traceback),
    ``task_name`` and ``rank`` (where it ran).
    """

    def __init__(self, message, cause=None, cause_type="", traceback_str="", task_name="", rank=-1):
        Exception.__init__(self, message)
        _fill(self, message, cause, cause_type, traceback_str, task_name, rank)

    def __str__(self):
        return self._message

    def __reduce__(self):
        return (TaskError, (self._message, self.cause, self.cause_type, self.traceback_str,
                            self.task_name, self.rank))


def _fill(err, message, cause, cause_type, traceback_str, task_name, rank):
    err._message = message
    err.cause = cause
    err.cause_type = cause_type
    err.traceback_str = traceback_str
    err.task_name = task_name
    err.rank = rank


_cause_classes = {}


def _task_error(message, cause, cause_type, traceback_str, task_name, rank):
    """A TaskError that is also an instance of type(cause) when such a class can be made."""
    if cause is not None and not isinstance(cause, TaskError):
        cls = _cause_classes.get(type(cause))
        if cls is None:
            try:
                cls = type("TaskError(" + type(cause).__name__ + ")", (TaskError, type(cause)),
                           {"__module__": __name__})
            except TypeError:  # e.g. an instance layout conflict: a plain TaskError
                cls = TaskError
            _cause_classes[type(cause)] = cls
        if cls is not TaskError:
            try:
                err = cls.__new__(cls, message)
                err.args = (message,)
                _fill(err, message, cause, cause_type, traceback_str, task_name, rank)
                return err
            except Exception:  # a __new__ that wants other arguments
                pass
    return TaskError(message, cause, cause_type, traceback_str, task_name, rank)


class TaskCancelledError(PrismError):
    """The task was cancelled (prism.cancel) before it finished (TaskCancelledError)."""


class GetTimeoutError(PrismError, TimeoutError):
    """prism.get did not finish within its timeout (GetTimeoutError)."""


class WorkerCrashedError(PrismError):
    """The task ended its process (its code called ``os._exit``) on every attempt its
    ``max_retries`` allowed (WorkerCrashedError). Prism runs tasks inside the MPI ranks, so
    the call does not end the rank: the task fails as if its worker had died, and is retried."""


class RayActorError(PrismError):
    """The actor cannot run the call (RayActorError); ActorDiedError is the case Prism has."""


class ActorDiedError(RayActorError):
    """A call on an actor that is dead: killed, or its constructor raised (ActorDiedError)."""


class ObjectLostError(PrismError):
    """An object is gone: freed, or lost with its rank (ObjectLostError)."""


class ResourceError(PrismError):
    """A resource request no rank can ever satisfy."""


class SerializationError(PrismError):
    """A value could not be pickled or unpickled, or its bytes are not what was expected."""


class PrismRuntimeError(PrismError, RuntimeError):
    """Prism is not in a state for this call (init twice, a call before init)."""


class FunctionNotFoundError(PrismError):
    """A worker could not find a remote function or class by its module and name."""


# Ray's names for the same classes, so `except ray.exceptions.RayTaskError` reads the same.
RayError = PrismError
RayTaskError = TaskError
RaySystemError = PrismRuntimeError
