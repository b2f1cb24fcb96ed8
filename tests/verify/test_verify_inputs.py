"""Example inputs the project's code gives a class (verify.inputs.find_input_calls): read from
the source, no torch. The calls of a built object whose arguments are literal tensor factories
(or names bound to them, sizes bound to numbers) become expressions that need only torch."""
from __future__ import annotations

import textwrap
from pathlib import Path

from torchlint.verify.inputs import find_input_calls

from verify_helpers import line_of


def write(root: Path, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


PROJECT = {
    "proj/pkg/__init__.py": "",
    "proj/pkg/net.py": """
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.fc = nn.Linear(dim, dim)

            def forward(self, x, mask=None):
                return self.fc(x)


        class Other(nn.Module):
            def forward(self, x):
                return x


        def small_net():
            return Net(dim=16)


        def demo(device="cpu"):
            B, N, C = 2, 24, 64
            model = Net(C).to(device).eval()
            x = torch.randn(B, N, C, device=device)
            with torch.no_grad():
                return model(x, mask=torch.ones(B, N, dtype=torch.bool).to(device))


        if __name__ == "__main__":
            net = Net()
            print(net.forward(torch.rand(3, 64).cuda()))
    """,
    "proj/pkg/train.py": """
        import torch as th

        from .net import Net, small_net


        def fit(loader):
            model = small_net()
            for batch in loader:
                model(batch)  # not an example: a batch of a loader
            model(th.zeros(4, 16).float())


        def annotated(model: Net):
            return model(th.randint(0, 10, (2, 8)).long())


        def rebuilt():
            model = Net()
            model = Net(dim=8)  # built twice: which one is called is not known here
            return model(th.randn(2, 8))
    """,
    "proj/tests/test_net.py": """
        import torch
        from torch import randn

        from pkg.net import Net


        def test_shapes():
            assert Net(dim=32)(randn(5, 32)).shape == (5, 32)


        def test_big():
            x = torch.randn(100000, 100000, 1000)  # not an example input: far too big
            Net()(x)
    """,
}


def test_calls_of_the_built_object_in_order(tmp_path):
    write(tmp_path, PROJECT)
    root = tmp_path / "proj"
    found = find_input_calls(str(root / "pkg/net.py"), ["Net", "Other"], workspace_root=str(root))
    assert "Other" not in found  # never called with inputs
    calls = [(c["args"], c["kwargs"], c["origin"], c["built_with"]) for c in found["Net"]]
    net, train, tests = root / "pkg/net.py", root / "pkg/train.py", root / "tests/test_net.py"
    assert calls == [
        # The __main__ block first; .cuda() dropped (the child moves inputs itself).
        (["torch.rand(3, 64)"], {}, "pkg/net.py:%d, the `__main__` block" % line_of(net, "net.forward("), "Net()"),
        # Sizes bound to numbers are inlined, device= dropped, a dtype kept.
        (["torch.randn(2, 24, 64)"], {"mask": "torch.ones(2, 24, dtype=torch.bool)"},
         "pkg/net.py:%d, demo()" % line_of(net, "return model(x, mask="), "Net(64)"),
        # A factory of the class, imported by another file of the package; `th` is torch.
        (["torch.zeros(4, 16).float()"], {}, "pkg/train.py:%d, fit()" % line_of(train, "model(th.zeros"), None),
        # A parameter annotated with the class.
        (["torch.randint(0, 10, (2, 8)).long()"], {},
         "pkg/train.py:%d, annotated()" % line_of(train, "return model(th.randint"), None),
        # Tests next to the package, with `from torch import randn`.
        (["torch.randn(5, 32)"], {}, "tests/test_net.py:%d, test_shapes()" % line_of(tests, "Net(dim=32)(randn"),
         "Net(dim=32)"),
    ]


def test_nothing_to_find_is_no_entry(tmp_path):
    write(tmp_path, {"solo.py": """
        import torch.nn as nn


        class Solo(nn.Module):
            def forward(self, x):
                return x


        if __name__ == "__main__":
            Solo()(load_batch())
    """})
    assert find_input_calls(str(tmp_path / "solo.py"), ["Solo"], workspace_root=str(tmp_path)) == {}
