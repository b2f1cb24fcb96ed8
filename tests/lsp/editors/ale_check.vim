" Vim + ALE, headless: ALE starts torchlint's language server and the diagnostics it
" shows for one file are written to $TL_OUT (stdout is garbled under -es).
" Run: vim -N -u NONE -i NONE -es -S ale_check.vim </dev/null   (exit 0 = diagnostics seen)
execute 'set runtimepath^=' . fnameescape($TL_ALE)
filetype plugin on
" Only our linter, linted once on request, with no display work a headless Vim can't use.
let g:ale_linters_explicit = 1
let g:ale_linters = {'python': ['torchlint']}
let g:ale_lint_on_enter = 0
let g:ale_lint_on_text_changed = 'never'
let g:ale_set_signs = 0
let g:ale_set_highlights = 0
let g:ale_echo_cursor = 0
runtime plugin/ale.vim
call ale#linter#Define('python', {
\   'name': 'torchlint',
\   'lsp': 'stdio',
\   'executable': $TL_PY,
\   'command': '%e -m torchlint serve',
\   'project_root': $TL_ROOT,
\})
execute 'edit ' . fnameescape($TL_FILE)
set filetype=python
ALELint
" sleep lets Vim run the job and channel callbacks that fill the loclist.
let s:deadline = reltimefloat(reltime()) + str2float($TL_WAIT)
while empty(ale#engine#GetLoclist(bufnr(''))) && reltimefloat(reltime()) < s:deadline
  sleep 50m
endwhile
let s:items = ale#engine#GetLoclist(bufnr(''))
let s:lines = []
for s:item in s:items
  call add(s:lines, printf('diagnostic %d:%d %s %s %s', s:item.lnum, s:item.col,
  \   get(s:item, 'code', '-'), s:item.linter_name, s:item.text))
endfor
call add(s:lines, 'done')
call writefile(s:lines, $TL_OUT)
if empty(s:items)
  cquit 1
endif
qall!
