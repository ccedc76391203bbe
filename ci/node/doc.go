// Package node holds the functional tests of the gvisorgen node installer scripts (cue/installer/*.sh).
//
// The tests carry the build tag nodetest and run through ci/node/test.sh (make test-node): the real scripts under
// Debian's busybox sh against temporary fake host trees, artifacts served by busybox httpd on 127.0.0.1, and
// every resulting containerd config checked by real containerd 1.6 (Debian) and 2.4.2.
package node
