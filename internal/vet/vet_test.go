package vet

import (
	"strings"
	"testing"
)

func TestObject(t *testing.T) {
	cases := []struct {
		name, apiVersion, kind, json, err string
	}{
		{"valid runtimeclass", "node.k8s.io/v1", "RuntimeClass", `{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"gvisor"},"handler":"runsc"}`, ""},
		{"unknown field", "node.k8s.io/v1", "RuntimeClass", `{"metadata":{"name":"gvisor"},"handlr":"runsc"}`, `unknown field "handlr"`},
		{"wrong type", "apps/v1", "DaemonSet", `{"spec":{"minReadySeconds":"ten"}}`, "cannot unmarshal string"},
		{"nested unknown field", "v1", "Namespace", `{"metadata":{"nmae":"x"}}`, `unknown field "nmae"`},
		{"unknown kind", "example.com/v1", "Widget", `{}`, "unknown type example.com/v1 Widget"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Object(c.apiVersion, c.kind, []byte(c.json))
			switch {
			case c.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v, want one containing %q", err, c.err)
			}
		})
	}
}
