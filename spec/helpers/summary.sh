# spec/helpers/summary.sh: what the shell runners (spec/run, spec/gpu/specs, spec/cudaemu/run)
# share; source it from the repository root.
#
# summary LOG: prints "PASSED FAILED SKIPPED" from the last "N passed, N failed[, N skipped]"
# line of LOG (the line every suite ends with); prints nothing and fails when there is none.
# summary --busted LOG (busted_summary LOG): the same from busted's last "N successes /
# N failures / N errors / N pending" line (errors count as failures, pending as skipped).
summary() {
  local busted=0 re line
  if [ "$1" = --busted ]; then busted=1; shift; fi
  re='^[0-9]+ passed, [0-9]+ failed'
  [ $busted = 1 ] && re='[0-9]+ success(es)? / [0-9]+ failures? / [0-9]+ errors? / [0-9]+ pending'
  line=$(grep -aE "$re" "$1" | tail -1)
  [ -n "$line" ] || return 1
  set -- $line
  if [ $busted = 1 ]; then echo "$1 $(( $4 + $7 )) ${10}"; else echo "$1 ${3%,} ${5:-0}"; fi
}
busted_summary() { summary --busted "$1"; }

# use_build: the environment that runs the specs against $BUILD (default build/): the
# dplua binary on PATH, torch.so for stock lua5.4, DPLUA_BUILD for the specs.
use_build() {
  BUILD=${BUILD:-build}
  export DPLUA_BUILD="$PWD/$BUILD"
  export LUA_CPATH="$PWD/$BUILD/lua/?.so;;"
  export PATH="$PWD/$BUILD:$PATH"
}
