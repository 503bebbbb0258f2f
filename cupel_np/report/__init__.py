"""Pages and charts: the sweep's ``report.html`` (in process or from written outputs) and the
budget simulation's page."""

from cupel_np.report.from_dir import dir_page_data, write_dir_report
from cupel_np.report.from_result import result_page_data, write_html_report

# Grouped by source file.
__all__ = [
    # from_dir.py
    "dir_page_data",
    "write_dir_report",
    # from_result.py
    "result_page_data",
    "write_html_report",
]
