# Sanitizer settings for tools/test.sh --sanitize; `source tools/sanitize/env.sh BUILD_DIR` to run a
# sanitized binary by hand. Stops at the first report, with symbolized stacks.
sanitize_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sanitize_build="$(mkdir -p "$1" && cd "$1" && pwd)"
cc -shared -fPIC -O2 -Wall -Wextra -o "$sanitize_build/keep_drivers_loaded.so" \
  "$sanitize_dir/keep_drivers_loaded.c" -ldl
export LD_PRELOAD="$sanitize_build/keep_drivers_loaded.so"
# verify_asan_link_order=0: the preloaded library above comes before ASan's runtime, on purpose.
# intercept_tls_get_addr=0: GCC 12's runtime takes a dlopen'd library's thread-local block that
# glibc mallocs at an address 16 past a page for one with a glibc header in front, reads garbage
# bounds from ASan's own chunk, and LeakSanitizer's exit scan crashes on them (the CUDA host
# emulator's kernels, whichever heap address they get). Static TLS and stacks are still scanned.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:print_stacktrace=1:check_initialization_order=1:strict_init_order=1:verify_asan_link_order=0:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$sanitize_dir/lsan.supp:print_suppressions=0"
for s in llvm-symbolizer-14 llvm-symbolizer; do
  if command -v "$s" > /dev/null; then
    export ASAN_SYMBOLIZER_PATH="$(command -v "$s")"
    break
  fi
done
unset sanitize_dir sanitize_build s
