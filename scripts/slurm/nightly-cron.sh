#!/bin/sh
# Submit tonight's nightly from a login node (crontab: 0 1 * * * /path/to/nightly-cron.sh CONFIG).
# kbisect plans the run, submits ONE array job (a task per shard) and a dependent finish job, and returns.
# Pass --wait-s N to wait (bounded) for the result and get the nightly's exit code (0 ok, 1 alerts,
# 2 incomplete, 3 environment).
set -eu
config=${1:?usage: nightly-cron.sh CONFIG [kbisect nightly options...]}
shift
KBISECT=${KBISECT:-kbisect}
exec "$KBISECT" nightly "$config" --scheduler slurm --date "$(date -u +%Y-%m-%d)" "$@"
