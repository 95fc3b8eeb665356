"""Ray Serve's config classes that prism.serve takes (serve.config.AutoscalingConfig)."""
from ._api import AutoscalingConfig  # noqa: F401
