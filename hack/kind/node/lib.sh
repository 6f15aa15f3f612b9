# shellcheck shell=bash
# Shared by hack/kind/node/build.sh and images.sh: a Debian root file system from Debian's archive.
#
# Needs: mmdebstrap, root (or mmdebstrap's unshare mode).

# debian_root SUITE DIR PACKAGES: a minbase SUITE in DIR with PACKAGES (comma-separated) added, from
# the suite, its updates and its security updates, without docs, man pages or locales.
debian_root() {
  local suite=$1 dir=$2 packages=$3
  mmdebstrap --quiet --variant=minbase --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$dir" \
    "deb http://deb.debian.org/debian $suite main" \
    "deb http://deb.debian.org/debian $suite-updates main" \
    "deb http://deb.debian.org/debian-security $suite-security main"
}
