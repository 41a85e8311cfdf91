"""Child processes that a test interrupts with SIGINT, started as a terminal's foreground job.

A job that a non-interactive shell starts in the background (`... &`: `make test`'s heavy half, a
CI runner's script, an unattended session) begins with SIGINT ignored, and its children inherit
that across exec. Python installs its KeyboardInterrupt handler (and trio its own) only when
SIGINT is at its default, so such a child ignores the test's Ctrl-C. `sigint_as_in_a_terminal`
as a Popen `preexec_fn` puts SIGINT back to its default in the child, before exec."""

import signal


def sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
