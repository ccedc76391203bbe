// Command benchtool is the glue of `make bench` (ci/bench/run.sh); it is not part of gvisorgen.
//
//	benchtool split EXPORT.json DIR   writes DIR/<target>/<kind>-<name>.json and a kustomization.yaml
//	                                  per target from `cue export -e rendered` output (the plain pipeline)
//	benchtool canon FILE...           prints every YAML document of the files as one canonical JSON line,
//	                                  sorted, so that two renderings of the same objects compare equal
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: benchtool split EXPORT.json DIR | canon FILE..."))
	}
	var err error
	switch os.Args[1] {
	case "split":
		if len(os.Args) != 4 {
			err = fmt.Errorf("usage: benchtool split EXPORT.json DIR")
			break
		}
		err = split(os.Args[2], os.Args[3])
	case "canon":
		err = canon(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchtool:", err)
	os.Exit(2)
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func split(export, dir string) error {
	b, err := os.ReadFile(export)
	if err != nil {
		return err
	}
	var targets map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &targets); err != nil {
		return err
	}
	for t, objs := range targets {
		td := filepath.Join(dir, t)
		if err := os.MkdirAll(td, 0o755); err != nil {
			return err
		}
		var files []string
		for _, raw := range objs {
			var o object
			if err := json.Unmarshal(raw, &o); err != nil {
				return err
			}
			f := strings.ToLower(o.Kind) + "-" + o.Metadata.Name + ".json"
			if err := os.WriteFile(filepath.Join(td, f), raw, 0o644); err != nil {
				return err
			}
			files = append(files, f)
		}
		sort.Strings(files)
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nsortOptions:\n  order: legacy\nresources:\n"
		for _, f := range files {
			k += "- " + f + "\n"
		}
		if err := os.WriteFile(filepath.Join(td, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func canon(files []string) error {
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			doc, err := yaml.Marshal(&n)
			if err != nil {
				return err
			}
			j, err := sigsyaml.YAMLToJSON(doc)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if string(j) == "null" {
				continue
			}
			var v any
			if err := json.Unmarshal(j, &v); err != nil {
				return err
			}
			c, err := json.Marshal(v) // maps marshal with sorted keys
			if err != nil {
				return err
			}
			lines = append(lines, string(c))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}
