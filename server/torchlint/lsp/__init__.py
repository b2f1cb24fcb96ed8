"""The language server: pygls handlers (server.py) over the analysis core.

convert.py turns findings into LSP types, scheduler.py decides when documents are
analysed, workspace_settings.py turns editor settings into check options, documents.py
applies edits the way the protocol defines them, framing.py resynchronises the stdio
reader after a malformed frame.
"""
