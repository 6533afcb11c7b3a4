#!/usr/bin/env bash
# ARM, i686 and Android: cross builds, the tracer on real arm64 and armv7
# kernels under qemu-system, i686 natively (scripts/cross-test).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec scripts/cross-test
