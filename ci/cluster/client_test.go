//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The API server listens on 127.0.0.1:6443 of the node's network namespace, which the machine's own namespace
// cannot reach: every connection of a client is opened from a thread that entered that namespace (dial).

// RESTConfig is a client configuration for a bearer token (TLS not verified: the API server's certificate is the
// self-signed one it made at start, as the old kubeconfig's insecure-skip-tls-verify did).
func (c *Cluster) RESTConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            "https://127.0.0.1:6443",
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Dial:            c.dial,
		QPS:             200,
		Burst:           400,
		Timeout:         30 * time.Second,
	}
}

// ClientForToken is a client that authenticates with a bearer token (the admin's, the kubelet's, or any other).
func (c *Cluster) ClientForToken(token string) (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig(token))
	if err != nil {
		return nil, fmt.Errorf("client for a token: %w", err)
	}
	return cs, nil
}

// ServiceAccountToken asks the API server (TokenRequest, as the kubelet does for a projected token) for a token of
// service account ns/name; bound, when not nil, ties it to an object (a Pod, a Node, a Secret). The token lives 10
// minutes (the API server's minimum).
func (c *Cluster) ServiceAccountToken(ctx context.Context, ns, name string, audiences []string, bound *authnv1.BoundObjectReference) (string, error) {
	exp := int64(600)
	tr, err := c.Admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp, BoundObjectRef: bound},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token request for %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// ClientForServiceAccount is a client with a fresh projected token of service account ns/name (see
// ServiceAccountToken; nil audiences: the API server's own).
func (c *Cluster) ClientForServiceAccount(ctx context.Context, ns, name string, bound *authnv1.BoundObjectReference) (kubernetes.Interface, error) {
	tok, err := c.ServiceAccountToken(ctx, ns, name, nil, bound)
	if err != nil {
		return nil, err
	}
	return c.ClientForToken(tok)
}

// WhoAmI is the user a client authenticates as (SelfSubjectReview, like kubectl auth whoami).
func WhoAmI(ctx context.Context, cs kubernetes.Interface) (authnv1.UserInfo, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, fmt.Errorf("whoami: %w", err)
	}
	return r.Status.UserInfo, nil
}

// inNetns runs f on a locked OS thread that entered the node's network namespace, then goes back: a socket f makes
// (a connection, a listener) stays in that namespace.
func (c *Cluster) inNetns(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("own network namespace: %w", err)
			return
		}
		defer own.Close()
		if err := unix.Setns(int(c.netns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("enter the node's network namespace: %w", err)
			return
		}
		err = f()
		// a thread that could not go back must not run anything else: leaving it locked ends it with this goroutine
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// dial opens a connection from inside the node's network namespace (inNetns).
func (c *Cluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := c.inNetns(func() (err error) {
		conn, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// TestClusterUp: each node comes up (etcd, the control plane, containerd, kubelet: Ready), and the API server tells
// the harness's identities apart: the admin token, the kubelet's node token, and a service account's projected
// token (the clients the next scenario families use).
func TestClusterUp(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		who := func(what string, cs kubernetes.Interface, err error, want string) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			u, err := WhoAmI(ctx, cs)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if u.Username != want {
				t.Errorf("%s authenticates as %q, want %q", what, u.Username, want)
			}
			t.Logf("  .. %s: %s %v", what, u.Username, u.Groups)
		}
		who("admin token", c.Admin, nil, "admin")
		b, err := os.ReadFile(filepath.Join(c.Dir, "conf/tokens.csv"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		node, err := c.ClientForToken(strings.Split(lines[1], ",")[0])
		who("node token", node, err, "system:node:gvz-node")
		if err := Poll(ctx, 200*time.Millisecond, 30*time.Second, "default/default ServiceAccount", func(ctx context.Context) (bool, error) {
			_, err := c.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, err
		}); err != nil {
			t.Fatal(err)
		}
		sa, err := c.ClientForServiceAccount(ctx, "default", "default", nil)
		who("service account token", sa, err, "system:serviceaccount:default:default")
	})
}
