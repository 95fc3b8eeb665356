"""Ray Serve's handle module names (serve.handle.DeploymentHandle, DeploymentResponse)."""
from ._handle import DeploymentHandle, DeploymentResponse  # noqa: F401
