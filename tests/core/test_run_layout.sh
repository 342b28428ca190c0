#!/usr/bin/env bash
# The run layout is named once (core/run_files.hpp, core/src/run_files.cpp): no other C++ source of the
# components builds a path under a run's folder from its own string literal, by std::filesystem's `/ "name"`, by `+ "/name"`
# or `"name/" +`, or by a printf format. Help texts, messages and comments that quote a name for the user
# are documentation, not paths, and are not looked at.
set -euo pipefail
root="${PCDINO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
names='mean_and_std_of_dataset\.txt|run_config_dump\.yaml|skipped_images\.txt|scDINO_ViTs|checkpoint|log\.txt|metrics\.jsonl|CLS_features|features\.h5|class_labels\.csv|image_paths\.csv|_features\.csv|kNN|global_kNN\.txt|knn\.json|plots|index\.html|logs|submitted_pipeline\.yaml|pipeline_jobs\.json|\.sbatch|\.complete|_out_|_err_'
joins="/ *\"($names)|\+ *\"($names)|\"/($names)|\"($names)/\" *\\+|\"($names)%0"
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' ':!tests/' ':!core/src/run_files.cpp' \
  ':!core/include/pcdino/core/run_files.hpp')
if [ ${#sources[@]} -lt 50 ]; then
  echo "expected the project's C++ sources from git ls-files, found ${#sources[@]} (not a git checkout?)" >&2
  exit 1
fi
rc=0
matches=$(grep -nE "$joins" "${sources[@]}") || rc=$?
if [ "$rc" -gt 1 ]; then
  echo "grep failed (exit $rc)" >&2
  exit 1
fi
hits=$(grep -vE '^[^:]+:[0-9]+:\s*//' <<<"$matches" || true)
if [ -n "$hits" ]; then
  echo "paths under the run folder spelled outside core/run_files (use RunLayout):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "ok: every run path comes from RunLayout"
