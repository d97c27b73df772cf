#!/usr/bin/env bash
# Prints every source file's count of non-test lines, largest first, flags
# those over the limit a person can hold (800 lines), the non-test
# functions over 100 lines (ci/long_functions.py), and the size of the weir
# binaries that exist. It reports; it never fails a build.
#
# Non-test lines are all lines except those of a `#[cfg(test)]` module
# written inline (`#[cfg(test)]` then `mod name {` up to its closing `}` at
# column 0), which is how unit tests sit at the foot of a file, and every
# line of a `tests.rs`, the unit tests a folder module keeps beside it.
# Usage: ci/sizes.sh [limit]   (CARGO_TARGET_DIR is honoured)
set -u
limit="${1:-800}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 0

over=0
files=0
total=0
while IFS=' ' read -r count path; do
    files=$((files + 1))
    # Test-only files are counted as files, not printed as code.
    [ "$count" -eq 0 ] && case "$path" in */tests.rs) continue ;; esac
    total=$((total + count))
    flag=""
    if [ "$count" -gt "$limit" ]; then
        flag="  OVER $limit"
        over=$((over + 1))
    fi
    printf '%6d  %s%s\n' "$count" "$path" "$flag"
done < <(
    find src -name '*.rs' -print0 | sort -z | while IFS= read -r -d '' f; do
        case "$f" in
        */tests.rs) echo "0 $f"; continue ;;
        esac
        awk -v path="$f" '
            # A test module starts at `#[cfg(test)]` directly followed by an
            # inline `mod x {`; it ends at the first `}` in column 0.
            pending && /^(pub(\([a-z]+\))? )?mod [A-Za-z_0-9]+ *\{/ { intest = 1; pending = 0; next }
            pending { pending = 0; code += 2; }
            intest { if ($0 ~ /^\}/) intest = 0; next }
            /^#\[cfg\(test\)\]/ { pending = 1; next }
            { code++ }
            END { if (pending) code++; print code + 0, path }
        ' "$f"
    done | sort -rn
)
printf '%d source files, %d non-test lines, %d over %d\n' "$files" "$total" "$over" "$limit"

if command -v python3 >/dev/null 2>&1; then
    python3 "$root/ci/long_functions.py" 100 || true
fi

target="${CARGO_TARGET_DIR:-$root/target}"
for profile in release debug; do
    bin="$target/$profile/weir"
    if [ -f "$bin" ]; then
        bytes=$(stat -c %s "$bin")
        printf '%s binary %s: %d bytes (%d MiB)\n' "$profile" "$bin" "$bytes" $((bytes / 1048576))
    fi
done
exit 0
