"""The real-browser harness for tests: :mod:`bidlab.bench._browser`, under its test name.

Browser tests ``import browser_harness as bh``; the harness lives in the package (the
dashboard benchmark uses it too), so this module only re-exports it.
"""

from bidlab.bench._browser import (  # noqa: F401  (re-exported)
    CHROMIUM,
    CHROMIUM_ARGS,
    INSTALL_HINT,
    Browser,
    KernelProbe,
    LabServer,
    free_port,
    kernel_status,
    live_notebook,
    open_notebook,
    run_all_cells,
    skip_reason,
    start_browser,
    start_lab,
    wait_for,
    write_notebook,
)
