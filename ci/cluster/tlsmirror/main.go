// busybox 1.35's TLS client (the installer's wget, which fetches every pinned artifact, since a pin wins over the
// transport) sends no signature_algorithms extension, which in TLS 1.2 means SHA-1 signatures (RFC 5246 7.4.1.4.1).
// Go 1.25 and later refuse that handshake unless GODEBUG tlssha1=1, which this directive sets for this binary only.
// Seen here (go1.26, busybox 1.35.0 of Debian 12, no openssl on wget's PATH, as in the installer image): without it
// the server logs "tls: missing signature_algorithms from TLS 1.2 peer" and wget gets "TLS error from peer (alert
// code 40): handshake failure"; with it, wget negotiates TLS 1.2 ECDHE_RSA_WITH_AES_128_GCM_SHA256 with the RSA
// key that ci/cluster/prepare.sh makes (an ECDSA P-256 key worked too: ECDHE_ECDSA_WITH_AES_128_GCM_SHA256).
//go:debug tlssha1=1

// Command tlsmirror serves a folder over HTTPS: the gVisor release mirror of the cluster e2e (ci/cluster/prepare.sh
// builds it, ci/cluster/node.sh runs it on the simulated node's IP). Test-only; standard library only.
//
//	tlsmirror -addr 10.99.0.1:18443 -dir serve/ -cert mirror.pem -key mirror.key
//
// Every request is logged to stderr (method, path, status, bytes, TLS version and cipher suite).
package main

import (
	"crypto/tls"
	"flag"
	"log"
	"net/http"
	"os"
	"time"
)

type recorder struct {
	http.ResponseWriter
	status int
	n      int64
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.n += int64(n)
	return n, err
}

func main() {
	addr := flag.String("addr", "", "listen address, host:port")
	dir := flag.String("dir", "", "folder to serve")
	cert := flag.String("cert", "", "PEM certificate (chain) of the server")
	key := flag.String("key", "", "PEM private key of the server")
	flag.Parse()
	if *addr == "" || *dir == "" || *cert == "" || *key == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	kp, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatalf("tlsmirror: %v", err)
	}
	files := http.FileServer(http.Dir(*dir))
	srv := &http.Server{
		Addr: *addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			files.ServeHTTP(rec, req)
			log.Printf("%s %s %s %d %dB %s %s", req.RemoteAddr, req.Method, req.URL.Path, rec.status, rec.n,
				tls.VersionName(req.TLS.Version), tls.CipherSuiteName(req.TLS.CipherSuite))
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(os.Stderr, "tlsmirror: ", log.LstdFlags),
	}
	log.Printf("tlsmirror: serving %s on https://%s", *dir, *addr)
	log.Fatal(srv.ListenAndServeTLS("", ""))
}
