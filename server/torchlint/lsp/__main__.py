"""``python -m torchlint.lsp``: the language server on stdio."""
import sys

from .server import main

sys.exit(main())
