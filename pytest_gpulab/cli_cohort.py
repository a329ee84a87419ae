"""``gpulab``'s commands for grading away from the learner's machine.

gpulab bundle gpuop -o alice.gpulab.tar.gz   the lab root and the cluster, in one file
gpulab grade alice.gpulab.tar.gz             grade it in a fresh cluster of its own
gpulab grade-batch DIR --jobs 2 --out RESULTS   every bundle in DIR, and the cohort report
gpulab cohort-report RESULTS                 write the cohort report again (--gradebook canvas|moodle --roster FILE)
gpulab cohort-diff OLD NEW                   what a regrade changed, learner by learner
gpulab job-manifest DIR --image IMG --claim PVC   the batch as a Kubernetes Indexed Job
gpulab job-entry                             what each of the Job's Pods runs
gpulab job-seccomp-profile                   the Localhost seccomp profile the Pods need on containerd nodes
gpulab gradescope                            Gradescope's run_autograder
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from .cluster import snapshot
from .cluster.toolchain import up_kubeconfig
from .cohort import autograder, jobs, seccomp
from .cohort.batch import bundles_in, grade_batch, read_roster
from .cohort.bundle import write_bundle
from .cohort.diff import DIFF_FOLDER, Diff, compare_folders, write_diff
from .cohort.gradebook import CANVAS, MOODLE, MOODLE_IDENTIFIERS, GradebookError, to_check_path, write_gradebook
from .cohort.regrade import GRADED, REFUSED, grade_bundle, learner_name
from .cohort.report import write_reports
from .labs.discovery import discover


def _lab_dirs(args: argparse.Namespace) -> list[Path]:
    """``--lab-dir``, else ``GPULAB_LAB_DIR``, as ``cli.main`` read them."""
    return list(getattr(args, "lab_dirs", []))


def cmd_bundle(args: argparse.Namespace) -> int:
    lab = discover(_lab_dirs(args)).get(args.lab)
    root = lab.learner_root(args.lab_root)
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else up_kubeconfig(lab.name)
    if not root.is_dir():
        print(f"gpulab: the lab root {root} is not a directory; give the learner's with --lab-root", file=sys.stderr)
        return 1
    out = Path(args.output)
    manifest = write_bundle(lab, root, snapshot.cluster_for_kubeconfig(kubeconfig), out, learner=args.learner)
    print(f"wrote {out}: {len(manifest['files'])} files of {root}, the cluster's snapshot "
          f"({manifest['snapshot']['bytes'] >> 10} KiB), lab {lab.name} rubric {lab.rubric_version}")  # fmt: skip
    for refusal in manifest["refused"]:
        print(f"  left out {refusal['path']}: {refusal['reason']}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    bundle = Path(args.bundle)
    out = Path(args.out) if args.out else Path("gpulab-results") / learner_name(bundle)
    secret = Path(args.seed_secret) if args.seed_secret else None
    outcome = grade_bundle(bundle, out, seed=args.lab_seed, lab_dirs=_lab_dirs(args), seed_secret_file=secret)
    if (out / "output.txt").is_file():
        sys.stdout.write((out / "output.txt").read_text(errors="replace"))
    if outcome.status == GRADED:
        print(f"{bundle.name}: graded, {outcome.earned}/{outcome.possible} points; the reports are in {out}")
        return 0 if outcome.earned == outcome.possible else 1
    print(f"{bundle.name}: {outcome.status}: {outcome.reason}", file=sys.stderr)
    return 2 if outcome.status == REFUSED else 3


def cmd_grade_batch(args: argparse.Namespace) -> int:
    directory, out = Path(args.directory), Path(args.out)
    if not directory.is_dir():
        print(f"gpulab: {directory} is not a directory of bundles", file=sys.stderr)
        return 1
    if args.compare and (problem := _not_a_folder(args.compare)):
        print(problem, file=sys.stderr)
        return 1
    try:
        secret = Path(args.seed_secret) if args.seed_secret else None
        roster = read_roster(Path(args.roster)) if args.roster else None
        outcomes = grade_batch(directory, out, args.jobs, lab_dirs=_lab_dirs(args), seed_secret=secret, roster=roster)
    except KeyboardInterrupt:
        graded = len(list(out.glob("*/outcome.json")))
        print(f"\ninterrupted with {graded} bundles done: run the same command again to resume", file=sys.stderr)
        return 130
    compare = Path(args.compare) if args.compare else None
    cohort = write_reports(out, compare)
    if compare is not None:
        print(f"compared with {compare}: {_counts(compare_folders(compare, out))}; the diff is in {out / DIFF_FOLDER}")
    graded = sum(outcome.status == GRADED for outcome in outcomes)
    for entry in cohort.refused:
        print(f"{entry['bundle']}: refused: {entry['reason']}", file=sys.stderr)
    print(f"{graded} of {len(outcomes)} bundles graded; the cohort report is {out / 'cohort.html'}")
    return 0


def _counts(diff: Diff) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in diff.counts().items() if count) or "no learners"


def _not_a_folder(*paths: str) -> str | None:
    missing = [path for path in paths if not Path(path).is_dir()]
    return f"gpulab: {', '.join(missing)}: not a results folder" if missing else None


def cmd_cohort_report(args: argparse.Namespace) -> int:
    if problem := _not_a_folder(args.results, *([args.compare] if args.compare else [])):
        print(problem, file=sys.stderr)
        return 1
    cohort = write_reports(Path(args.results), Path(args.compare) if args.compare else None)
    print(f"{len(cohort.learners)} learners; wrote cohort.csv, cohort.json and cohort.html in {args.results}")
    return _gradebook(args) if args.gradebook else 0


def _gradebook(args: argparse.Namespace) -> int:
    if not args.roster:
        print("gpulab: --gradebook needs --roster FILE (docs/instructors.md, 'Grades into the LMS')", file=sys.stderr)
        return 1
    try:
        book, path = write_gradebook(
            Path(args.results), Path(args.roster), args.gradebook, assignment=args.assignment,
            missing_as_zero=args.missing_as_zero, identifier=args.identifier,
            out=Path(args.gradebook_out) if args.gradebook_out else None,
        )  # fmt: skip
    except (GradebookError, ValueError, OSError) as error:  # a roster or an output it cannot read or write
        print(f"gpulab: {error}", file=sys.stderr)
        return 1
    for learner, what, detail in book.to_check:
        print(f"  {learner or '-'}: {what}: {detail}", file=sys.stderr)
    identified = f", identified by {book.identifier}" if book.identifier else ""
    print(f"wrote {path} for {args.gradebook} ({len(book.rows)} roster learners{identified}); "
          f"{len(book.to_check)} things to check first, in {to_check_path(path)}")  # fmt: skip
    return 0


def cmd_cohort_diff(args: argparse.Namespace) -> int:
    if problem := _not_a_folder(args.old, args.new):
        print(problem, file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else Path(args.new) / DIFF_FOLDER
    try:
        diff = write_diff(Path(args.old), Path(args.new), out)
    except OSError as error:
        print(f"gpulab: the diff cannot be written in {out}: {error}", file=sys.stderr)
        return 1
    for number, step in diff.steps.items():
        print(f"  step {number}: {step['gained']} gained, {step['lost']} lost, {step['same']} the same")
    print(f"{len(diff.learners)} learners: {_counts(diff)}; wrote diff.csv and diff.json in {out}")
    return 0


def cmd_job_manifest(args: argparse.Namespace) -> int:
    count = len(bundles_in(Path(args.directory)))
    if count == 0:
        print(f"gpulab: {args.directory} holds no bundles", file=sys.stderr)
        return 1
    manifest = jobs.job_manifest(count, image=args.image, claim=args.claim, name=args.name,
                                 namespace=args.namespace, parallelism=args.parallelism,
                                 seccomp_profile=args.seccomp_profile)  # fmt: skip
    sys.stdout.write(yaml.safe_dump(manifest, sort_keys=False))
    return 0


def cmd_job_entry(args: argparse.Namespace) -> int:
    return jobs.job_entry(Path(args.bundles), Path(args.out))


def cmd_gradescope(args: argparse.Namespace) -> int:
    return autograder.run(Path(args.root) if args.root else None)


COMPARE_HELP = (
    f"an earlier results folder of the same bundles: the regrade diff goes into RESULTS/{DIFF_FOLDER}/ (diff.csv, "
    "diff.json) and a section of cohort.html"
)
SEED_SECRET_HELP = (
    "the instructor's secret the graders' seeds are keyed with, so no learner can choose them (default: a file made "
    "once beside the results, .gpulab-seed-secret, mode 0600; keep it to re-grade alike)"
)


def _gradebook_options(report: argparse.ArgumentParser) -> None:
    report.add_argument(
        "--gradebook",
        choices=[CANVAS, MOODLE],
        help="also write the CSV this LMS's grade import reads (needs --roster)",
    )
    report.add_argument(
        "--roster", metavar="FILE", help="a CSV with a header: learner, and name, email, username, id_number, "
        "canvas_id, sis_user_id, sis_login_id, section as the LMS needs (docs/instructors.md)",
    )  # fmt: skip
    report.add_argument(
        "--assignment", metavar="NAME", help="the grade column's name (Canvas: 'Name (ID)'; default: the lab)"
    )
    report.add_argument(
        "--missing-as-zero", action="store_true", help="a roster learner with no bundle gets 0, not an empty grade"
    )
    report.add_argument(
        "--identifier", choices=list(MOODLE_IDENTIFIERS),
        help="Moodle's identifier column (default: the first of email, username, id_number the roster fills for all)",
    )  # fmt: skip
    report.add_argument("--gradebook-out", metavar="FILE", help="where the CSV goes (default: RESULTS/cohort.LMS.csv)")


def add_commands(commands: Any, lab_dir: argparse.ArgumentParser) -> None:
    bundle = commands.add_parser("bundle", help="write a submission bundle", parents=[lab_dir])
    bundle.add_argument("lab")
    bundle.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the bundle to write (NAME.gpulab.tar.gz)"
    )
    bundle.add_argument("--lab-root", metavar="PATH", help="the learner's lab root (default: the lab's own)")
    bundle.add_argument("--kubeconfig", metavar="PATH", help="the lab cluster's (default: the one `gpulab up` started)")
    bundle.add_argument("--learner", help="the learner's name, kept in the manifest")
    bundle.set_defaults(run=cmd_bundle)
    grade = commands.add_parser("grade", help="grade a bundle in a fresh cluster", parents=[lab_dir])
    grade.add_argument("bundle")
    grade.add_argument("--out", metavar="DIR", help="where the reports go (default: gpulab-results/LEARNER)")
    grade.add_argument(
        "--lab-seed", type=int, help="the graders' seed (default: the bundle's digest keyed with the seed secret)"
    )
    grade.add_argument("--seed-secret", metavar="FILE", help=SEED_SECRET_HELP)
    grade.set_defaults(run=cmd_grade)
    batch = commands.add_parser("grade-batch", help="grade every bundle in a folder", parents=[lab_dir])
    batch.add_argument("directory")
    batch.add_argument("--jobs", type=int, default=1, help="bundles graded at once, each in its own cluster")
    batch.add_argument("--out", required=True, metavar="RESULTS", help="the results folder (resumed if there)")
    batch.add_argument("--seed-secret", metavar="FILE", help=SEED_SECRET_HELP)
    batch.add_argument(
        "--roster",
        metavar="FILE",
        help="a CSV of learner,file: each bundle's learner is the roster's, and a bundle not on it is refused",
    )
    batch.add_argument("--compare", metavar="OLD", help=COMPARE_HELP)
    batch.set_defaults(run=cmd_grade_batch)
    report = commands.add_parser("cohort-report", help="write cohort.csv, cohort.json and cohort.html")
    report.add_argument("results")
    report.add_argument("--compare", metavar="OLD", help=COMPARE_HELP)
    _gradebook_options(report)
    report.set_defaults(run=cmd_cohort_report)
    diff = commands.add_parser("cohort-diff", help="compare two results folders of the same bundles (a regrade)")
    diff.add_argument("old", help="the earlier results folder")
    diff.add_argument("new", help="the later one")
    diff.add_argument("--out", metavar="DIR", help=f"where diff.csv and diff.json go (default: NEW/{DIFF_FOLDER})")
    diff.set_defaults(run=cmd_cohort_diff)
    manifest = commands.add_parser("job-manifest", help="print the Indexed Job that grades a folder of bundles")
    manifest.add_argument("directory", help="the bundles, as the Job's volume will hold them")
    manifest.add_argument("--image", required=True, help="the grader's image (built from Containerfile)")
    manifest.add_argument("--claim", required=True, help="the PersistentVolumeClaim with bundles/ and results/")
    manifest.add_argument("--name", default="gpulab-grade")
    manifest.add_argument("--namespace", default="default")
    manifest.add_argument("--parallelism", type=int, default=4)
    manifest.add_argument(
        "--seccomp-profile",
        metavar="PATH",
        help="a Localhost seccomp profile on the nodes, relative to the kubelet's seccomp folder (containerd's "
        "RuntimeDefault forbids the sandbox's namespaces; gpulab job-seccomp-profile writes one)",
    )
    manifest.set_defaults(run=cmd_job_manifest)
    profile = commands.add_parser(
        "job-seccomp-profile", help="print the Localhost seccomp profile the Job's Pods need on containerd nodes"
    )
    profile.add_argument("base", nargs="?", help=f"the profile to derive it from (default {seccomp.CONTAINERS_COMMON})")
    profile.set_defaults(run=lambda args: seccomp.main([args.base] if args.base else []))
    entry = commands.add_parser("job-entry", help="grade bundle $JOB_COMPLETION_INDEX (a Job's Pod)")
    entry.add_argument("--bundles", default=f"{jobs.MOUNT}/bundles")
    entry.add_argument("--out", default=f"{jobs.MOUNT}/results")
    entry.set_defaults(run=cmd_job_entry)
    gradescope = commands.add_parser("gradescope", help="Gradescope's run_autograder")
    gradescope.add_argument("--root", help="default: $GPULAB_AUTOGRADER_ROOT, else /autograder")
    gradescope.set_defaults(run=cmd_gradescope)
