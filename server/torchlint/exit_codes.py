"""The exit statuses of the commands (`torchlint check`, `torchlint verify`): 0 nothing found,
1 findings, 2 a usage, configuration or internal error, a file not checked (unreadable, larger than
``max_file_size``, nested past the recursion limit) or a fix not written (or a run that could not happen)."""

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
