"""Are the jedi layer's shortcuts jedi's own answers? On a corpus sample, every question is asked
the short way and the long way, and the answers compared (issue 23):

- answered from the project's files (project_answers.ProjectAnswers.answer) vs jedi on the file;
- jedi on a question's own few lines (question_text) vs jedi on the file's text;
- an answer kept by what was asked about (question_key), or by a question's own text, vs jedi
  asked again.

    .venv/bin/python benchmarks/check_project_answers.py --corpus DIR [--files 300] [--seed 0]

Prints the counts per check and shape, and each question whose answers differ (exit 1 if any
but an unknown where jedi finds a plain value, which the files may say of an attribute built of
typed parts, and "history": an answer jedi gives in a fresh layer but not in this run's state).
One process, no disk cache; a few minutes for 300 transformers model files on 2 cores.
"""
import argparse
import ast
import collections
import os
import pathlib
import random
import sys

from torchlint import cli
from torchlint.cli import workers
from torchlint.inference import file_inference
from torchlint.inference.layer import JediInference
from torchlint.inference.project_answers import ASK
from torchlint.analysis.scopes import NodeTable


def _verdict(short, long) -> str:
    """Values compare by their fields; None is "unknown". An attribute built of typed parts may be
    unknown where jedi finds a plain value ("less": project_answers says so, never the reverse)."""
    if short == long:
        return "same"
    return "less" if short is None and long is not None and long.kind.value == "other" else "DIFFERENT"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    files = sorted(str(p) for p in pathlib.Path(args.corpus).rglob("*.py"))
    random.Random(args.seed).shuffle(files)
    files = sorted(files[:args.files])
    counts: "collections.Counter[tuple]" = collections.Counter()
    differ = []
    FileInference = file_inference.FileInference
    from_files, own_text, kept_key, classify = (FileInference._from_files, FileInference._question_text,
                                                FileInference._question_key, FileInference._classify)

    def jedi_on_the_file(inference, node):
        return classify(inference, node)  # (no question: the file's text)

    def record(check, inference, node, short, long):
        shape = type(node).__name__
        verdict = _verdict(short, long)
        if verdict == "DIFFERENT":
            # jedi's answer in this run's shared state may have lost what an earlier file's
            # questions used up (its per-function execution limits, whose empty results it
            # memoizes): asked again in a fresh layer, an agreement is "history", not a wrong answer
            fresh = JediInference(inference.project.root, share_states=True)
            tree = inference._checked_tree()
            again = fresh.for_file(inference.text, inference.path, inference.source, tree, NodeTable(tree))
            if _verdict(short, classify(again, node)) == "same":
                verdict = "history"
        counts[(check, shape, verdict)] += 1
        if verdict != "same":
            differ.append((verdict.upper(), check, inference.path, node.lineno, ast.unparse(node)[:70], short, long))

    def checked_from_files(self, node):
        answer = from_files(self, node)
        if answer is not ASK:
            record("files", self, node, answer, jedi_on_the_file(self, node))
        return answer

    def kept(inference, node, key):
        """The kept answer as the file reads it: "an instance of the called class" is that class here."""
        value = inference.project.asked[key][0]
        return inference._instance_of_called_class(node) if value is file_inference._THE_CALLED_CLASS else value

    def checked_key(self, node):
        key = kept_key(self, node)
        if key is not None and key in self.project.asked:
            value = kept(self, node, key)
            if value is not file_inference._THE_CALLED_CLASS:  # (else a class of another file: jedi is asked)
                record("kept", self, node, value, jedi_on_the_file(self, node))
        return key

    def checked_text(self, node):
        question = own_text(self, node)
        if question is not None and kept_key(self, node) is None:
            key = (file_inference.QUESTION_FILE, os.path.dirname(self.path)) + question
            if key in self.project.asked:
                record("kept", self, node, kept(self, node, key), jedi_on_the_file(self, node))
        return question

    def checked_classify(self, node, question=None):
        if question is None:
            return classify(self, node)
        short = classify(self, node, question)
        record("own text", self, node, short, jedi_on_the_file(self, node))
        return short

    FileInference._from_files = checked_from_files
    FileInference._question_key = checked_key
    FileInference._question_text = checked_text
    FileInference._classify = checked_classify
    workers.PARALLEL_MIN_FILES = 10 ** 9  # one process: the patches above apply
    try:
        cli.main(["check", "--no-cache", "-q", "--exit-zero", "--output-file", "/dev/null"] + files)
    except SystemExit:
        pass
    print("%d files of %s (seed %d)" % (len(files), args.corpus, args.seed))
    for (check, shape, verdict), count in sorted(counts.items()):
        print("%-9s %-10s %-9s %5d" % (check, shape, verdict, count))
    for entry in differ:
        print("%s %s %s:%d %s: short %r, jedi %r" % entry)
    return 1 if any(entry[0] == "DIFFERENT" for entry in differ) else 0


if __name__ == "__main__":
    sys.exit(main())
