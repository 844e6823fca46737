# The Go settings of every build here (dev/minio, dev/k8s-env, dev/k8s-node-env source this after
# setting CACHE, the streamlets cache folder).
export GOMODCACHE=$CACHE/go/mod
export GOCACHE=${GOCACHE:-$HOME/.cache/go-build}
export CGO_ENABLED=0  # static binaries, no C toolchain needed
# The compiler's garbage collector runs a quarter as often as by default (100): a fresh build of
# local-path-provisioner (empty GOCACHE, modules downloaded) took 165 s with 100, 136 s with 400,
# on 2 cores (stop 50); the k8s binaries, MinIO, Helm and CoreDNS are most of a fresh machine's
# toolchain time. It costs memory in the compiler processes only (a fresh machine's whole .ci/run
# with it peaked at 10 GB used of 24, stop 51); set GOGC to override.
export GOGC=${GOGC:-400}
