"""What the tests share: the checkout's paths and the CLI run in-process (support), the
`# expect:` reading of fixtures (expectations), a rule run on a snippet (rules), installs and
git repositories in scratch folders (packaging), the browser end-to-end tests' tools and
driver runs (browser). Fixtures live in the conftest.py files."""
