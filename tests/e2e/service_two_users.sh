#!/usr/bin/env bash
# e2e.service_two_users (issue #37): two users, two LoRA jobs on one base
# model in one managed-service deployment; isolation, quotas, kill -9 and
# resume, learning, and Phase 3 serving (service_two_users.py says what).
#   service_two_users.sh AREAL_HOST SOURCE_DIR WORK [isolation]
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
source "$src/tests/support/trainer_runs.sh"
require_agent_modules "$src"
fresh_model_workdir "$work" 1 --initializer-range 0.1
format_warmup "$src" "$work"
/usr/bin/python3 "$src/tests/e2e/service_two_users.py" "$host" "$src" "$work" ${4:-}
