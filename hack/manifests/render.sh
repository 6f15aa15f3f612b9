#!/usr/bin/env bash
# Prints the manifests of config/overlays/OVERLAY, with the image set to IMG when IMG is given:
#
#   hack/manifests/render.sh gke                                  as committed
#   IMG=registry.example.com/servicecidr-guard:v0.1.0 hack/manifests/render.sh gke
#   IMG=registry.example.com/servicecidr-guard@sha256:... hack/manifests/render.sh gke
#
# IMG is applied by a throwaway kustomization on top of the overlay (kustomize's `images:`), so no
# committed file is edited. For a lasting setting, write your own overlay with an `images:` entry.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
overlay=${1:?usage: hack/manifests/render.sh OVERLAY}
dir=$repo/config/overlays/$overlay
[[ -f $dir/kustomization.yaml ]] || { echo "render-overlay: no overlay $dir" >&2; exit 1; }
kubectl=$(KUBECTL=${KUBECTL:-} "$repo/hack/control-plane/find-kubectl.sh")

if [[ -z ${IMG:-} ]]; then
  exec "$kubectl" kustomize "$dir"
fi

# name[:tag] or name@digest; a registry port (host:5000/name) is not a tag.
case $IMG in
  *@*) name=${IMG%%@*} field="digest: ${IMG#*@}" ;;
  *)
    last=${IMG##*/}
    if [[ $last == *:* ]]; then name=${IMG%:*} field="newTag: ${last##*:}"; else name=$IMG field="newTag: latest"; fi
    ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$tmp" "$dir")
images:
  - name: servicecidr-guard
    newName: $name
    $field
YAML
"$kubectl" kustomize "$tmp"
