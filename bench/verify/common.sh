# The shape of a Killercoda/Instruqt verify script: each check is one kubectl, python3 or learner-script
# process, its answer compared in the shell. Sourced by LAB.sh with ROOT (the lab root) and FAKES (fake
# containerd directories the bench prepared, one per dump: FAKES/NAME/bin/containerd) set.
set -u
failed=0
check() {  # check NAME COMMAND...: the command's exit status is the check's verdict
  local name=$1; shift
  if "$@" >/dev/null 2>&1; then echo "ok   $name"; else echo "FAIL $name"; failed=$((failed + 1)); fi
}
py() {  # py 'python source': one python3 process; ROOT is sys.argv[1]
  python3 -c "import sys, tomllib, yaml, pathlib; root = pathlib.Path(sys.argv[1]); $1" "$ROOT"
}
toml() { python3 -c "import sys, tomllib; d = tomllib.load(open(sys.argv[1], 'rb')); $2" "$ROOT/$1"; }
yamlcheck() { python3 -c "import sys, yaml; docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]; $2" "$ROOT/$1"; }
answer() { grep -qx "$2" "$ROOT/$1"; }  # answer FILE LINE: a result file holds the line
jsonpath() { [ "$(kubectl get "${@:1:$#-2}" -o "jsonpath=${@: -2:1}")" = "${@: -1}" ]; }  # jsonpath ARGS... PATH WANT
with_dump() { local dump=$1; shift; env PATH="$FAKES/$dump/bin:$PATH" "$@" </dev/null; }
without_containerd() { env PATH="$(echo "$PATH" | tr ':' '\n' | grep -v fake | paste -sd:)" "$@" </dev/null; }
not() { ! "$@"; }
finish() { echo "$failed failed"; [ "$failed" = 0 ]; }
