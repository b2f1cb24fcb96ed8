"""The jedi layer: what names alone cannot tell, behind the core's seam
(:mod:`torchlint.analysis.inference_seam`). :mod:`.layer` holds the project-wide state
(:class:`.layer.JediInference`), :mod:`.file_inference` one file's questions, :mod:`.project_files`
and :mod:`.project_answers` what reading files answers without jedi, :mod:`.reduced_text` the texts
jedi is given, :mod:`.inference_cache` the answers on disk, :mod:`.jedi_access` (and
:mod:`.parso_parser`) everything taken from jedi's and parso's internals."""
