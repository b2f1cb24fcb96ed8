"""The language server: short pygls handlers (server.py) over the analysis core.

state.py keeps one record per open document and what the client can do; the feature
modules (publishing.py, notebooks.py, hover.py, inlay_hints.py, code_actions.py,
verification.py) get what they read as typed arguments, never the server. convert.py turns
findings into LSP types, views.py sees a result from a file or a notebook's cell,
scheduler.py decides when documents are analysed, messages.py talks to the user,
workspace_settings.py turns editor settings into check options, documents.py applies edits
the way the protocol defines them, framing.py resynchronises the stdio reader after a
malformed frame.
"""
