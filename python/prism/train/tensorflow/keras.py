"""prism.train.tensorflow.keras.ReportCheckpointCallback (Ray's): reports Keras' logs (and
a checkpoint of the model, saved with model.save) at each epoch's or batch's end. A Keras
Callback when TensorFlow is importable, else a plain class with the same hooks (so it is
testable without TensorFlow)."""

import os
import tempfile

from .. import _session
from .._checkpoint import Checkpoint

try:  # pragma: no cover (TensorFlow is not installable here)
    from tensorflow.keras.callbacks import Callback as _Base
except Exception:  # noqa: BLE001
    class _Base:
        def set_model(self, model):
            self.model = model


class ReportCheckpointCallback(_Base):
    """ReportCheckpointCallback(checkpoint_on="epoch_end", report_metrics_on="epoch_end",
    metrics=None): `metrics` picks which logs to report (a list, or a dict {reported name:
    log name}); None reports them all."""

    _WHEN = ("epoch_end", "train_batch_end", "test_batch_end", "predict_batch_end",
             "test_end", "predict_end", "train_end")

    def __init__(self, checkpoint_on="epoch_end", report_metrics_on="epoch_end", metrics=None):
        super().__init__()
        on = [checkpoint_on] if isinstance(checkpoint_on, str) else list(checkpoint_on)
        report = [report_metrics_on] if isinstance(report_metrics_on, str) else list(report_metrics_on)
        for w in on + report:
            if w not in self._WHEN:
                raise ValueError(f"ReportCheckpointCallback: {w!r} is not one of {', '.join(self._WHEN)}")
        self._checkpoint_on, self._report_on = on, report
        self._metrics = metrics

    def _pick(self, logs):
        logs = dict(logs or {})
        if self._metrics is None:
            return logs
        if isinstance(self._metrics, str):
            return {self._metrics: logs[self._metrics]}
        if isinstance(self._metrics, dict):
            return {name: logs[key] for name, key in self._metrics.items()}
        return {key: logs[key] for key in self._metrics}

    def _handle(self, when, logs):
        report = when in self._report_on
        checkpoint = when in self._checkpoint_on
        if not report and not checkpoint:
            return
        metrics = self._pick(logs) if report else {}
        if checkpoint:
            with tempfile.TemporaryDirectory() as d:
                self.model.save(os.path.join(d, "model.keras"))
                _session.report(metrics, checkpoint=Checkpoint.from_directory(d))
        else:
            _session.report(metrics)

    def on_epoch_end(self, epoch, logs=None):
        self._handle("epoch_end", logs)

    def on_train_batch_end(self, batch, logs=None):
        self._handle("train_batch_end", logs)

    def on_train_end(self, logs=None):
        self._handle("train_end", logs)
