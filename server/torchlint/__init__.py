"""torchlint: finds the PyTorch bugs PyTorch stays silent about."""

__version__ = "0.1.0"
