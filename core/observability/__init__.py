"""What the server tells about itself: statistics and metrics, model code's custom metrics, logs, progress.

:mod:`.stats` (Triton's statistics extension and the metrics snapshot), :mod:`.custom_metrics`
(``pb_utils.MetricFamily`` values read from shared memory), :mod:`.logging` (Triton's log format
and the logging extension), :mod:`.progress` (long operations' progress lines). The trace
extension is :mod:`tritium.core.tracing`. Worker processes import the logging module too.
"""
