"""``python -m torchlint.lsp``: the language server on stdio."""
import sys

from .. import collection

collection.restart_on_system_allocator()  # (before pygls loads and anything is read)

from .server import main  # noqa: E402

sys.exit(main())
