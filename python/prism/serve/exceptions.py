"""prism.serve's exceptions (Ray Serve's names)."""


class RayServeException(Exception):
    """A Serve call failed for a reason of Serve's own: no deployment of that name, a
    deleted application, Serve shut down (Ray's RayServeException)."""


class BackPressureError(RayServeException):
    """Every replica had max_ongoing_requests in flight and max_queued_requests calls were
    already waiting (Ray's BackPressureError; 503 over HTTP). Try again later, or raise
    max_queued_requests or the replica count."""


class DeploymentUnavailableError(RayServeException):
    """The deployment's replica died while it ran the call and none could take it over."""


class BadRequestError(ValueError):
    """The request itself is wrong: ``await request.json()`` on a body that is not JSON.
    Answered 400 over HTTP; a handler may raise it too."""


# Ray Serve's names for prism's own, so `except serve.exceptions.RayServeException` reads the same.
PrismServeError = RayServeException
