// CoreDNS for the offline kind node image (hack/kind/node/binaries.sh builds it from the
// github.com/coredns/coredns module at the version kubeadm pins). It registers exactly the plugins
// that the Corefile kubeadm writes names (cmd/kubeadm/app/phases/addons/dns/manifests.go:
// CoreDNSConfigMap), in a build of CoreDNS's own coremain: the way CoreDNS documents builds with a
// chosen set of plugins. The full plugin set would pull in the SDKs of every cloud DNS provider and
// tracer (AWS, Azure, Google, Datadog) that a kind node never uses.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
