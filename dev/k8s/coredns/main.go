// CoreDNS with the plugins a cluster's DNS uses (the Corefile of tests/kube/cluster.py, and those
// of kubeadm's default Corefile: forward, loop, log), built from the upstream module: the same
// entry point as github.com/coredns/coredns's main (coremain.Run), as CoreDNS documents for a
// build with chosen plugins. Leaving out the cloud and tracing plugins (route53, azure,
// clouddns, dnstap, trace, ...) roughly halves a cold build. The order in which plugins run is
// CoreDNS's own (core/dnsserver.Directives), whichever are compiled in.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
