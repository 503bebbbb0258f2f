"""Pages and charts: the sweep's ``report.html`` (in process or from written outputs) and the
budget simulation's page."""

from cupel_np.report.from_dir import write_dir_report
from cupel_np.report.from_result import write_html_report

__all__ = ["write_dir_report", "write_html_report"]
