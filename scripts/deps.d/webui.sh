# shellcheck shell=bash
# webui: the web UI's browser test (service/tests/webui_browser.rs) drives
# Debian's headless Chromium through chromium-driver (WebDriver) from Rust
# (fantoccini, a crates.io dependency). Sourced by scripts/install-deps.
# Idempotent: a second run only checks.
# shellcheck source=../lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt-install.sh"
webui_missing=()
for webui_pkg in chromium chromium-driver fonts-dejavu-core; do
    dpkg -s "$webui_pkg" >/dev/null 2>&1 || webui_missing+=("$webui_pkg")
done
if [ ${#webui_missing[@]} -gt 0 ]; then
    apt_install --no-install-recommends "${webui_missing[@]}"
fi
unset webui_missing webui_pkg
