"""The language server with its jedi wave held until the test lets it go: each jedi wave waits
until the file named by TORCHLINT_TEST_JEDI_GATE exists (HOLD_BOUND seconds at most), then
runs as it would. A stand-in for a busy machine whose jedi wave takes as long as the test
needs, without timing anything; the server's own code is unchanged.

Run as a script: ``python tests/lsp/held_jedi_server.py`` (torchlint on PYTHONPATH)."""
import os
import sys
import time

from torchlint.lsp import server
from torchlint.lsp.scheduler import Wave

GATE = os.environ["TORCHLINT_TEST_JEDI_GATE"]
HOLD_BOUND = 300  # seconds: a test that forgets its gate still ends


def held(analyse):
    def analyse_when_let_go(self, snap, wave):
        if wave is Wave.JEDI:
            deadline = time.monotonic() + HOLD_BOUND
            while not os.path.exists(GATE) and time.monotonic() < deadline:
                time.sleep(0.02)
        return analyse(self, snap, wave)
    return analyse_when_let_go


server.TorchlintServer.analyse = held(server.TorchlintServer.analyse)

if __name__ == "__main__":
    sys.exit(server.main())
