#!/usr/bin/env bash
# ABI check: the patched server must keep stock 18.6's ABI, as PostgreSQL's
# minor-release policy requires (extensions built against 18.x must load into
# any 18.y).  Compares the unpatched build with the patched one, both built
# with exactly the same options and debug info ("upstream-check" and "check",
# see build_config in lib.sh), with libabigail's abidiff (abigail-tools).
#
#   scripts/test/abi.sh               build both if needed, compare their
#                                     postgres
#   scripts/test/abi.sh --no-build    compare what is installed now
#   scripts/test/abi.sh BASELINE NEW  compare two given binaries (no build)
#
# Fails on any removed or changed function or variable, on any change to a
# type reachable from them, and on removed symbols without debug info.
# Additions are fine, and so are an enumerator appended to an enum (harmless
# to libabigail) and GUC tables grown by new GUCs (see below).  Prints the
# summary and "ABI check passed" or "ABI check failed"; full report:
# $WORK/abi/abidiff.txt.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"
# Whatever stops us (usage, missing abidiff, a build, no debug info), say so.
reported=
trap 'st=$?; [ "$st" = 0 ] || [ -n "$reported" ] || echo "ABI check failed"' EXIT

build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi
if [ $# = 2 ]; then
  base=$1; new=$2; build=0
elif [ $# = 0 ]; then
  build_config upstream-check; base=$PREFIX/bin/postgres
  build_config check; new=$PREFIX/bin/postgres
else
  die "usage: $0 [--no-build] [BASELINE NEW]"
fi
command -v abidiff >/dev/null ||
  die "abidiff not found: apt-get install abigail-tools (make check installs it as root)"

if [ "$build" = 1 ]; then
  "$TOP/scripts/build/build.sh" check
  "$TOP/scripts/build/build.sh" upstream-check
fi
# Without DWARF, abidiff compares only symbol names and passes any change of
# a type (its --fail-no-debug-info does not catch that in 2.2): require it.
for f in "$base" "$new"; do
  [ -f "$f" ] || die "$f does not exist (build it: scripts/build/build.sh check / upstream-check)"
  sections=$(readelf -S --wide "$f" 2>/dev/null || true)
  grep -q ' \.debug_info ' <<<"$sections" ||
    die "$f has no debug info: abidiff would not see type changes"
done

out=$WORK/abi
mkdir -p "$out"
report=$out/abidiff.txt
# Options:
# --no-default-suppression: only our own scripts/test/abi.suppr applies, never a
#   system-wide or ~/.abignore file that could hide a change.
# --exported-interfaces-only: postgres is linked with --export-dynamic, so
#   every non-static function and variable is an exported ELF symbol, and
#   exported symbols are exactly what an extension can bind to.  Analysing
#   only the types reachable from them gives the same report as the default
#   (which first analyses every interface visible outside its translation
#   unit; checked: byte-identical report) in half the time and memory (about
#   16 s and 320 MB instead of 35 s and 570 MB).
# Not used:
# --show-bytes: abidiff 2.2 then prints ELF symbol sizes divided by 8 ("size
#   of symbol changed from 2975 to 3000" for 23800 -> 24000 bytes); sizes
#   and offsets of types are in bits, as libabigail's documentation shows.
# --no-unreferenced-symbols would hide "Function/Variable symbols changes"
#   (symbols that have no debug info, e.g. from assembler); a removed one is a
#   break, so we want them reported.
# --non-reachable-types (-t) would also report types that no exported
#   function or variable reaches; in a server, that is mostly executor and
#   parser internals and local types of static functions: very slow and noisy.
#   Structs that extensions use are reached through the functions and
#   variables that hand them out.
# --leaf-changes-only: its summary lines have another format; the default
#   report shows, for each changed function or variable, the path to the
#   changed type, which is what a reviewer needs.
# --harmless: libabigail filters harmless changes by default, e.g. an
#   enumerator added at the end of an enum (counted as "N filtered out");
#   run abidiff --harmless by hand to see them.
msg "comparing ABI: $base (baseline) vs $new"
start=$(date +%s)
set +e
abidiff --no-default-suppression --exported-interfaces-only \
  --suppressions "$TOP/scripts/test/abi.suppr" \
  "$base" "$new" >"$report" 2>"$out/abidiff.stderr"
rc=$?
set -e
secs=$(( $(date +%s) - start ))

# abidiff's exit status is a bit field (man abidiff, libabigail 2.2):
# 1 ABIDIFF_ERROR, 2 ABIDIFF_USAGE_ERROR (with 1), 4 ABIDIFF_ABI_CHANGE (some
# change, possibly only additions), 8 ABIDIFF_ABI_INCOMPATIBLE_CHANGE (with
# 4; at present only for removed symbols).  So bit 4 alone says nothing
# about compatibility, and bit 8 misses changed types: besides the status,
# parse the summary lines and the report's section headings.
fail=()
(( rc & 3 )) && fail+=("abidiff failed (exit status $rc): $(tail -3 "$out/abidiff.stderr" | tr '\n' ' ')")
(( rc & 8 )) && fail+=("abidiff reports an incompatible change (exit status $rc)")

# Growth of the GUC tables is allowed.  A new GUC adds an entry to
# ConfigureNamesBool[] (or ...Int/Real/String/Enum), which abidiff reports as
# a changed variable ("size of symbol changed"): the arrays are declared
# without a bound, end with a NULL-named sentinel, and an extension (a shared
# library: no copy relocation) only sees their address.  Upstream accepts
# exactly this in minor releases (18.x's .abi-compliance-history: "Addition
# of a new GUC enlarges ConfigureNamesString[], but that is not harmful.").
# This is not a suppression in abi.suppr because that would hide any change of
# these variables, including one of struct config_bool and friends, which no
# other exported interface reaches: only an entry whose single change is a
# larger symbol size is accepted.
guc_ok=$(awk '
  /^[0-9]+ Changed variables?:$/ { insec = 1; next }
  /^[^ \t]/ { insec = 0 }
  function flush() { if (name != "" && ok && nlines == 1) n++; name = "" }
  insec && /^  \[C\] / {
    flush()
    name = ""; ok = 0; nlines = 0
    if (match($0, /^  \[C\] .[a-z_]+ ConfigureNames(Bool|Int|Real|String|Enum)\[\]. was changed/)) name = $0
    next
  }
  insec && name != "" && /^    / {
    nlines++
    if (match($0, /^    size of symbol changed from [0-9]+ to [0-9]+$/)) {
      ok = ($8 + 0 > $6 + 0)
    } else ok = 0
  }
  END { flush(); print n + 0 }' "$report")

# "Functions changes summary: 1 Removed, 2 Changed (3 filtered out), 4 Added functions"
# "Variables changes summary: ..."; "Function symbols changes summary:
# 1 Removed, 2 Added function symbols not referenced by debug info", and
# "Variable symbols ..." (these two only when there are such symbols).
summary=$(grep -E '^(Functions|Variables|Function symbols|Variable symbols) changes summary:' "$report" || true)
while IFS= read -r line; do
  [ -n "$line" ] || continue
  removed=$(sed -nE 's/.*summary: ([0-9]+) Removed.*/\1/p' <<<"$line")
  changed=$(sed -nE 's/.*, ([0-9]+) Changed.*/\1/p' <<<"$line")
  [ -n "$removed" ] || fail+=("cannot parse: $line")
  [[ $line != Variables* ]] || changed=$(( ${changed:-0} - guc_ok ))
  if [ "${removed:-0}" != 0 ] || [ "${changed:-0}" != 0 ]; then
    fail+=("${line%%:*}: ${removed:-0} removed, ${changed:-0} changed")
  fi
done <<<"$summary"
if (( rc & 4 )) && [ -z "$summary" ]; then
  fail+=("abidiff reports a change (exit status $rc) but no summary line")
fi
# Every top-level line of the report must be a summary line or the heading of
# a list of additions ("3 Added functions:", "1 Added variable:", "2 Added
# function symbols not referenced by debug info:"), or of the list of the
# allowed GUC table changes.  Anything else (removed or changed lists, an
# ELF-level change such as the architecture) fails.
other=$(grep -vE '^$|^[[:space:]]|^(Functions|Variables|Function symbols|Variable symbols) changes summary:|^[0-9]+ Added ' "$report" |
  grep -vxE "$guc_ok Changed variables?:" || true)
[ -z "$other" ] || fail+=("report has non-addition sections: $(head -3 <<<"$other" | tr '\n' ';')")

echo "abidiff $(abidiff --version | sed 's/^abidiff: //') took ${secs} s, exit status $rc"
if [ -n "$summary" ]; then
  sed 's/^/  /' <<<"$summary"
elif [ "$rc" = 0 ]; then
  echo "  no ABI difference at all"
fi
[ "$guc_ok" = 0 ] || echo "  (of the changed variables, $guc_ok: GUC tables grown by new GUCs, allowed)"
if [ ${#fail[@]} -gt 0 ]; then
  for f in "${fail[@]}"; do echo "  FAIL: $f"; done
  # The report shows each change on the path from a function or variable,
  # which can be deep; first list the structs and unions whose size changed.
  sized=$(awk '
    match($0, /(struct|union) [A-Za-z_0-9]+. at [^ ]+ changed:$/) {
      t = substr($0, RSTART, RLENGTH - 9); sub(/\047 at /, " at ", t); nx = 1; next
    }
    nx && /^ *type size changed from/ { sub(/^ */, ""); if (!seen[t]++) print "    " t ": " $0 }
    { nx = 0 }' "$report")
  [ -z "$sized" ] || printf '  types whose size changed:\n%s\n' "$sized"
  echo "---- first 80 lines of $report"
  head -80 "$report"
  echo "----"
  echo "full report: $report"
  echo "ABI check failed"
  reported=1
  exit 1
fi
echo "full report: $report"
echo "ABI check passed"
