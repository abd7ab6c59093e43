#!/usr/bin/env bash
# Install the Debian packages INSync needs when they are missing.
#   ensure_system.sh base   python3-venv and python3-pip: enough for the venv and everything
#                           that needs neither root nor Mininet (make plan, test-unit, lint)
#   ensure_system.sh [full] base + Mininet and what a run needs (make run, test, bench; the
#                           default, and what every server of a cluster run needs)
# Mininet's Python module is Debian's (for /usr/bin/python3); the project venv
# sees it through --system-site-packages.  Without root we only warn: unit tests
# still run, and the tests that need root/Mininet skip themselves.
set -euo pipefail
profile=${1:-full}
pkgs=(python3-venv python3-pip)
case "$profile" in
    base) ;;
    # openssh-server and sudo: Mininet's cluster mode (run --servers, docs/servers.md) reaches
    # every server over SSH and runs its commands there with sudo
    full) pkgs+=(mininet bridge-utils iputils-ping iproute2 openssh-server sudo) ;;
    *) echo "error: ensure_system.sh: unknown profile '$profile' (base or full)" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "warning: missing Debian packages (${missing[*]}); run as root to install them" >&2
    exit 0
fi
echo "installing Debian packages ($profile): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
