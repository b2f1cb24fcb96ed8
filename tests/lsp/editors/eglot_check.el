;;; eglot_check.el --- Emacs + eglot, headless  -*- lexical-binding: t -*-
;; eglot starts torchlint's language server and the flymake diagnostics it shows for
;; one file are written to $TL_OUT.
;; Run: emacs -Q --batch -l eglot_check.el   (exit 0 = diagnostics seen)
(let ((file (getenv "TL_FILE"))
      (root (file-name-as-directory (getenv "TL_ROOT")))
      (python (getenv "TL_PY"))
      (out (getenv "TL_OUT"))
      (eglot-dir (getenv "TL_EGLOT"))
      (wait (string-to-number (getenv "TL_WAIT"))))
  ;; Emacs 28 gets eglot from the elpa-eglot package; Emacs 29+ has it built in.
  (when (> (length eglot-dir) 0) (add-to-list 'load-path eglot-dir))
  (require 'eglot) (require 'python) (require 'flymake)
  (setq eglot-server-programs `((python-mode ,python "-m" "torchlint" "serve")))
  ;; The workspace is the project root: eglot would otherwise ask for one.
  (add-hook 'project-find-functions (lambda (_dir) (cons 'transient root)))
  (find-file file)
  (python-mode)
  (apply #'eglot (eglot--guess-contact))
  (flymake-start)
  (let ((deadline (+ (float-time) wait)))
    (while (and (null (flymake-diagnostics)) (< (float-time) deadline))
      (accept-process-output nil 0.05)
      (unless (flymake-diagnostics) (flymake-start))))
  (let ((diagnostics (sort (flymake-diagnostics)
                           (lambda (a b) (< (flymake-diagnostic-beg a) (flymake-diagnostic-beg b)))))
        (lines nil))
    (dolist (d diagnostics)
      (save-excursion
        (goto-char (flymake-diagnostic-beg d))
        ;; 1-based line and column, like ALE's loclist.
        (push (format "diagnostic %d:%d %s %s" (line-number-at-pos) (1+ (current-column))
                      (flymake-diagnostic-type d) (flymake-diagnostic-text d))
              lines)))
    (with-temp-file out
      (dolist (line (nreverse lines)) (insert line "\n"))
      (insert "done\n"))
    (kill-emacs (if diagnostics 0 1))))
