# Shared set-up for tools/run and tools/test (sourced, not executed).
# Installs the Debian packages the build and tests need, only when one is missing.

SHARDC_DEB_PACKAGES=(
  build-essential cmake ninja-build g++
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libspdlog-dev doctest-dev libssl-dev
  libsimdjson-dev # safetensors headers, config.json (src/import)
  python3 python3-jsonschema python3-yaml
  python3-numpy # e2e checks on rank files (tests/e2e); torch comes from the venv (tools/venv)
  clang        # libFuzzer and sanitizer builds
  libclang-rt-14-dev # clang's libFuzzer, ASan and UBSan runtimes (tools/fuzz)
  clang-format # tools/format
  clang-tidy   # tools/tidy (.clang-tidy: names, parameter counts; CTest tidy/names)
  ccache       # compiler launcher when present
  chromium nodejs # the report pages in a real browser (tests/browser, CTest browser/report)
)

shardc_ensure_packages() {
  local missing=() pkg
  for pkg in "${SHARDC_DEB_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  echo "shardc: installing missing Debian packages: ${missing[*]}" >&2
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

# The browser test's npm packages (tests/browser/package-lock.json: playwright-core drives the
# Debian chromium, axe-core lints accessibility), installed with `npm ci` when the lock file
# changed since the last install (stamp: its sha256 in node_modules). Debian's nodejs comes
# without npm (NodeSource's includes it): the Debian npm package is added only then.
shardc_ensure_browser() {
  local dir=tests/browser stamp=tests/browser/node_modules/.shardc-lock.sha256 want
  if ! command -v npm >/dev/null 2>&1; then
    SHARDC_DEB_PACKAGES=(npm) shardc_ensure_packages
  fi
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  echo "shardc: installing the browser test's npm packages (npm ci in $dir)" >&2
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
  echo "$want" >"$stamp"
}

# ccache keys on paths relative to the checkout, so a fresh clone anywhere (CI) hits the
# cache a previous build of the same sources filled. Callers cd to the repo root first.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
# Four builds (test, sanitize with debug info, bench, fuzz) outgrow ccache's 5 GB default,
# and evicted objects are rebuilt (a CI run spent 369 s on its sanitizer build).
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"

# True when clang++ can link a libFuzzer target (Debian: clang libclang-rt-14-dev).
shardc_have_libfuzzer() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local probe
  probe=$(mktemp)
  if echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer - -o "$probe" 2>/dev/null; then
    rm -f "$probe"
    return 0
  fi
  rm -f "$probe"
  return 1
}

# Extra CMake arguments every configure uses (ccache as launcher when installed).
shardc_cmake_common_args() {
  local args=(-G Ninja)
  if command -v ccache >/dev/null 2>&1; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  # The tests' Python: Debian's interpreter, the one the packages above install into
  # (python3-jsonschema, python3-yaml, python3-torch). A version manager's shim earlier on
  # PATH (pyenv) costs ~0.2 s per start, over 250 e2e tests, and may lack those packages.
  # --no-warn-unused-cli: a build without the tests (tools/run) does not use it.
  if [[ -x /usr/bin/python3 ]]; then
    args+=(-DPython3_EXECUTABLE=/usr/bin/python3 --no-warn-unused-cli)
  fi
  printf '%s\n' "${args[@]}"
}

shardc_jobs() {
  nproc 2>/dev/null || echo 2
}
