package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"
)

// forgecache: what anyone who can write the cache folder can do (a CI cache restored from another branch, a hostile
// job on a shared runner): rewrite every entry of $XDG_CACHE_HOME/gvisorgen/tree so that it vouches for the files on
// disk as they are now (each file's digest and size recomputed, the entry's checksum made again). It uses only the
// entry format, as a forger would, not the cache package.
func forgecache(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: forgecache")
	}
	dir := filepath.Join(ts.Getenv("XDG_CACHE_HOME"), "gvisorgen", "tree")
	ents, err := os.ReadDir(dir)
	ts.Check(err)
	n := 0
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		ts.Check(err)
		head, body, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			continue
		}
		version, _, _ := bytes.Cut(head, []byte(" "))
		var entry map[string]any
		ts.Check(json.Unmarshal(body, &entry))
		files, _ := entry["files"].([]any)
		for _, f := range files {
			m := f.(map[string]any)
			b, err := os.ReadFile(ts.MkAbs(m["p"].(string)))
			if err != nil {
				continue
			}
			sum := sha256.Sum256(b)
			m["h"], m["n"] = hex.EncodeToString(sum[:]), len(b)
		}
		body, err = json.Marshal(entry)
		ts.Check(err)
		sum := sha256.Sum256(body)
		out := append(append(append(version, ' '), hex.EncodeToString(sum[:])+"\n"...), body...)
		ts.Check(os.WriteFile(p, out, 0o644))
		n++
	}
	if n == 0 {
		ts.Fatalf("no cache entry to forge in %s", dir)
	}
}
