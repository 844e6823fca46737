// etcd, built from the upstream module: the same entry point as go.etcd.io/etcd/server/v3's
// etcd binary (etcdmain.Main). A module of its own so etcd keeps its own dependency versions
// instead of Kubernetes' pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
