# spec/helpers/summary.sh: what the shell runners (spec/run, spec/gpu/specs, spec/cudaemu/run)
# share; source it from the repository root.
#
# summary LOG: prints "PASSED FAILED SKIPPED" from the last "N passed, N failed[, N skipped]"
# line of LOG (the line every suite ends with); prints nothing and fails when there is none.
summary() {
  local line
  line=$(grep -aE '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  [ -n "$line" ] || return 1
  set -- $line
  echo "$1 ${3%,} ${5:-0}"
}

# busted_summary LOG: the same from busted's last "N successes / N failures / N errors /
# N pending" line (errors count as failures, pending as skipped).
busted_summary() {
  local line
  line=$(grep -aE '[0-9]+ success(es)? / [0-9]+ failures? / [0-9]+ errors? / [0-9]+ pending' "$1" | tail -1)
  [ -n "$line" ] || return 1
  set -- $line
  echo "$1 $(( $4 + $7 )) ${10}"
}

# use_build: the environment that runs the specs against $BUILD (default build/): the
# dplua binary on PATH, torch.so for stock lua5.4, DPLUA_BUILD for the specs.
use_build() {
  BUILD=${BUILD:-build}
  export DPLUA_BUILD="$PWD/$BUILD"
  export LUA_CPATH="$PWD/$BUILD/lua/?.so;;"
  export PATH="$PWD/$BUILD:$PATH"
}
